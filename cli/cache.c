/*
 * cache.c - `kerntune cache list|show|export|import|rm|clear|path|deferred|explain`: the persistent cache from
 * the command line, through the public kt_cache_* API only.
 *
 * list and show read the same wisdom document `export` writes (parsed with jansson), so what
 * they print is exactly what an export carries; they order decisions by age, newest first. Exit
 * status: 0 on success, 1 when the work failed (the cache cannot be opened, a file cannot be
 * read, an import is refused), 2 on a usage error. Warnings from opening the cache (a damaged
 * file moved aside, a fallback to memory) go to stderr. With --json, stdout holds exactly one
 * JSON document: the result, or {"error": MESSAGE} when the command fails (the message also goes
 * to stderr, as without --json).
 */
#include "cache.h"
#include "text.h"

#include <kerntune.h>
#include <kerntune/cache.h>

#include <jansson.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum {
    OPT_JSON = 1 << 0,
    OPT_OP = 1 << 1,
    OPT_DEVICE = 1 << 2,
    OPT_OUTPUT = 1 << 3,
    OPT_REPLACE = 1 << 4,
    OPT_YES = 1 << 5,
    OPT_FILE = 1 << 6, /* one positional FILE */
    OPT_OPKEY = 1 << 7, /* two positionals: OP and KEY; and --arch, --vendor */
};

typedef struct opts {
    const char *sub;
    const char *cache, *op, *device, *output, *file, *key, *arch, *vendor;
    bool json, replace, yes;
} opts;

typedef struct subcommand {
    const char *name;
    const char *synopsis; /* after "kerntune cache NAME" */
    const char *summary;
    unsigned allowed;
    int (*run)(const opts *o, kt_cache *c);
    const char *details;
} subcommand;

static int run_list(const opts *o, kt_cache *c);
static int run_show(const opts *o, kt_cache *c);
static int run_export(const opts *o, kt_cache *c);
static int run_import(const opts *o, kt_cache *c);
static int run_rm(const opts *o, kt_cache *c);
static int run_clear(const opts *o, kt_cache *c);
static int run_path(const opts *o, kt_cache *c);
static int run_deferred(const opts *o, kt_cache *c);
static int run_explain(const opts *o, kt_cache *c);

static const subcommand subs[] = {
    {"list", "[--op NAME] [--device FP] [--json] [--cache PATH]", "one line per decision", OPT_JSON | OPT_OP | OPT_DEVICE, run_list,
     "Lists the decisions, newest first, one line each: op, device (shortened), key, winner, the\n"
     "winner's time, the decision's confidence (- when unknown; \"0.70<0.99\" when it is below the\n"
     "confidence its race asked for: the next tuning re-races its finalists), how many units it\n"
     "considered, and when it was made (UTC).\n"
     "With --json: an array of objects {op, device, key, winner {candidate, config}, time_ns,\n"
     "confidence, requested_confidence, below_confidence, units (their number), created (unix\n"
     "time)}.\n"},
    {"show", "[--op NAME] [--device FP] [--json] [--cache PATH]", "every decision with its units", OPT_JSON | OPT_OP | OPT_DEVICE, run_show,
     "Shows each decision in full, newest first (device fingerprint, candidate set, library\n"
     "version, creation time, winner, confidence and what was asked for) with a table of its\n"
     "units: candidate, configuration, outcome, time, measured runs and diagnostic; for a\n"
     "decision below its requested confidence, also which units are its finalists. With --json:\n"
     "the entries of the wisdom document (see export), newest first.\n"},
    {"export", "[--op NAME] [--device FP] [-o FILE] [--json] [--cache PATH]", "write decisions as a wisdom JSON document",
     OPT_OP | OPT_DEVICE | OPT_OUTPUT | OPT_JSON, run_export,
     "Writes the decisions (all, or those of --op and --device) as a wisdom document, the JSON\n"
     "that 'kerntune cache import' reads on another machine of the same device fingerprint.\n"
     "To stdout, or to FILE with -o (then prints how many decisions it wrote; with --json as\n"
     "{\"exported\": N, \"file\": FILE}).\n"},
    {"import", "FILE [--replace] [--json] [--cache PATH]", "read a wisdom document into the cache", OPT_FILE | OPT_REPLACE | OPT_JSON, run_import,
     "Reads a wisdom document (FILE, or - for stdin). Every entry is checked first, for what can\n"
     "be checked without the op: names and sizes, well-formed configuration text (NAME=VALUE,...),\n"
     "known outcomes, times (a measured unit has one, at least 0, inside its interval; an\n"
     "unmeasured one has none), confidences from 0 to 1, no unit listed twice, the winner among\n"
     "the units, measured and with the entry's time, a creation time not in the future. One bad\n"
     "entry refuses the whole file, naming the entry, the field and why (entries[2].key: ...).\n"
     "What only the op can tell (a candidate or configuration it does not have) is found when the\n"
     "decision is used: it is rejected, reported, and the key measured again. A decision already\n"
     "in the cache is kept unless --replace. Prints how many were added, replaced and kept.\n"},
    {"rm", "--op NAME [--device FP] [--json] [--cache PATH]", "remove the decisions of an op (and device)", OPT_OP | OPT_DEVICE | OPT_JSON, run_rm,
     "Removes the decisions of op NAME (of device FP only, with --device; --device alone removes\n"
     "every op's decisions on that device) and prints how many. Refuses to run without a filter:\n"
     "'kerntune cache clear --yes' removes everything.\n"},
    {"clear", "--yes [--json] [--cache PATH]", "remove every decision", OPT_YES | OPT_JSON, run_clear,
     "Removes every decision of the cache and prints how many; refuses without --yes.\n"},
    {"path", "[--json] [--cache PATH]", "print the cache file in use", OPT_JSON, run_path,
     "Opens the cache and prints the file in use (\":memory:\" when it fell back to memory), then,\n"
     "on a second line, the warning of opening it, if any (\"warning: ...\").\n"},
    {"deferred", "[--op NAME] [--device FP] [--json] [--cache PATH]", "keys deferred by misses under graph capture",
     OPT_JSON | OPT_OP | OPT_DEVICE, run_deferred,
     "Lists the keys that calls of a program deferred because they missed while their queue was\n"
     "being captured into a graph (kt_op_set_capture_miss with KT_CAPTURE_MISS_FALLBACK), oldest\n"
     "first, one line each: op, device (shortened), key, the call's arguments (a buffer's bytes,\n"
     "a scalar's value) and when it was deferred (UTC). This command cannot tune them: only the\n"
     "program that declares the op can (kt_op_tune_deferred, e.g. at its next start, before it\n"
     "captures). With --json: the entries of kt_cache_deferred's document, objects {op,\n"
     "candidate_set, device, library_version, key, args, created (unix time)}.\n"},
    {"explain", "OP KEY [--device FP] [--arch A] [--vendor V] [--json] [--cache PATH]",
     "how a key nobody tuned would be answered", OPT_OPKEY | OPT_DEVICE | OPT_JSON, run_explain,
     "Explains how op OP answers KEY (its key components, as 'kerntune cache list' shows them up\n"
     "to the validity mask: \"4096\" or \"512,512\") on device FP when it may not tune (effort\n"
     "cache-only): the decision recorded for that very key, if any; else, in the order they are\n"
     "tried, the decisions that may answer it: the nearest tuned keys on the device (distance in\n"
     "log2 over the size components, category components equal), this key decided on another\n"
     "device of the same architecture, then of the same vendor. The first whose winner accepts the\n"
     "call's arguments answers, else the op's default; only the op can tell which accept them.\n"
     "--device may be left out when one device has decisions of OP; its architecture and vendor\n"
     "come from its decisions, or from --arch and --vendor (see 'kerntune devices'). With --json:\n"
     "kt_cache_explain's document {op, device, arch, vendor, key, recorded, candidates [{rule,\n"
     "device, key, distance, winner}]}.\n"},
};
#define NSUBS (sizeof subs / sizeof subs[0])

static const char cache_option_help[] =
    "  --cache PATH   the cache file; default: KERNTUNE_CACHE, else\n"
    "                 $XDG_CACHE_HOME/kerntune/cache.db, else ~/.cache/kerntune/cache.db\n";

void help_cache(FILE *out) {
    fprintf(out,
            "usage: kerntune cache COMMAND [options]\n"
            "\n"
            "Reads and edits the persistent cache: the decisions kerntune measured, with every unit\n"
            "they considered, in one SQLite file shared by every process on the machine.\n"
            "\n"
            "commands:\n");
    for (size_t i = 0; i < NSUBS; i++) fprintf(out, "  %-8s %s\n", subs[i].name, subs[i].summary);
    fprintf(out, "\noptions of every command:\n%s", cache_option_help);
    fprintf(out,
            "  -h, --help     print the help of the command\n"
            "\n"
            "Run 'kerntune cache COMMAND --help' for a command's options. KERNTUNE_CACHE=off switches\n"
            "the cache off. Exit status: 0 on success, 1 when the work failed, 2 on a usage error.\n");
}

static void help_sub(const subcommand *s, FILE *out) {
    fprintf(out, "usage: kerntune cache %s %s\n\n%s\noptions:\n", s->name, s->synopsis, s->details);
    if (s->allowed & OPT_OP) fprintf(out, "  --op NAME      only the decisions of this op\n");
    if (s->allowed & OPT_DEVICE && !(s->allowed & OPT_OPKEY)) fprintf(out, "  --device FP    only the decisions of this device fingerprint (exact)\n");
    if (s->allowed & OPT_OPKEY) {
        fprintf(out, "  --device FP    the device (its fingerprint, exact) whose calls are explained\n");
        fprintf(out, "  --arch A       its architecture (default: as its decisions in the cache say)\n");
        fprintf(out, "  --vendor V     its vendor (default: as its decisions in the cache say)\n");
    }
    if (s->allowed & OPT_OUTPUT) fprintf(out, "  -o FILE        write to FILE instead of stdout\n");
    if (s->allowed & OPT_REPLACE) fprintf(out, "  --replace      replace decisions already in the cache\n");
    if (s->allowed & OPT_YES) fprintf(out, "  --yes          confirm removing everything\n");
    if (s->allowed & OPT_JSON) fprintf(out, "  --json         print JSON instead of text\n");
    fprintf(out, "%s  -h, --help     print this help\n", cache_option_help);
}

/* --json was given: stdout must then hold one JSON document, errors included. */
static bool json_mode;

static void print_json(json_t *v);

static void report_text(const char *sub, const char *msg) {
    fprintf(stderr, "kerntune cache%s%s: %s\n", sub ? " " : "", sub ? sub : "", msg ? msg : "out of memory");
    if (json_mode) {
        json_t *v = json_pack("{s:s}", "error", msg ? msg : "out of memory");
        print_json(v);
        json_decref(v);
    }
}

/* Reports an error: "kerntune cache[ SUB]: MESSAGE" on stderr and, with --json, {"error":
 * MESSAGE} on stdout. Returns status. */
static int report(int status, const char *sub, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int report(int status, const char *sub, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *msg = cli_vformat(fmt, ap);
    va_end(ap);
    report_text(sub, msg);
    free(msg);
    return status;
}

static int usage(const char *sub, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int usage(const char *sub, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *msg = cli_vformat(fmt, ap);
    va_end(ap);
    report_text(sub, msg);
    free(msg);
    fprintf(stderr, "run 'kerntune cache%s%s --help' for the options\n", sub ? " " : "", sub ? sub : "");
    return 2;
}

/* Reports kerntune's message for subcommand o and returns 1. */
static int failed(const opts *o) { return report(1, o->sub, "%s", kt_last_error()); }

static int parse(const subcommand *s, int argc, char **argv, opts *o) {
    memset(o, 0, sizeof *o);
    o->sub = s->name;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if ((a[0] != '-' || (o->op && !o->key && a[1] >= '0' && a[1] <= '9')) && (s->allowed & OPT_OPKEY)) {
            if (o->op == NULL) o->op = a; /* (a key may start with '-': a negative component) */
            else if (o->key == NULL) o->key = a;
            else return usage(s->name, "unexpected argument '%s' (OP and KEY were given)", a);
            continue;
        }
        if (a[0] != '-' || strcmp(a, "-") == 0) {
            if (!(s->allowed & OPT_FILE)) return usage(s->name, "unexpected argument '%s'", a);
            if (o->file != NULL) return usage(s->name, "one FILE only ('%s' and '%s')", o->file, a);
            o->file = a;
            continue;
        }
        /* the option's name is a[0 .. nlen): compared and printed from argv, whole */
        const char *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
        size_t nlen = eq ? (size_t)(eq - a) : strlen(a);
        int nl = nlen > INT_MAX ? INT_MAX : (int)nlen;
        static const struct {
            const char *name;
            unsigned bit; /* 0: --cache, allowed everywhere */
            bool value;
        } known[] = {{"--cache", 0, true},       {"--op", OPT_OP, true},       {"--device", OPT_DEVICE, true},
                     {"-o", OPT_OUTPUT, true},   {"--output", OPT_OUTPUT, true}, {"--json", OPT_JSON, false},
                     {"--replace", OPT_REPLACE, false}, {"--yes", OPT_YES, false},
                     {"--arch", OPT_OPKEY, true}, {"--vendor", OPT_OPKEY, true}};
        size_t k = 0;
        while (k < sizeof known / sizeof known[0] && !(strlen(known[k].name) == nlen && strncmp(known[k].name, a, nlen) == 0)) k++;
        if (k == sizeof known / sizeof known[0] || (known[k].bit && !(s->allowed & known[k].bit)))
            return usage(s->name, "unknown option '%.*s'", nl, a);
        const char *v = NULL;
        if (known[k].value) {
            if (eq) v = eq + 1;
            else if (i + 1 < argc) v = argv[++i];
            else return usage(s->name, "%s needs a value", known[k].name);
            if (*v == '\0') return usage(s->name, "%s needs a non-empty value", known[k].name);
        } else if (eq) {
            return usage(s->name, "%s takes no value", known[k].name);
        }
        switch (known[k].bit) {
        case 0: o->cache = v; break;
        case OPT_OP: o->op = v; break;
        case OPT_DEVICE: o->device = v; break;
        case OPT_OUTPUT: o->output = v; break;
        case OPT_JSON: o->json = true; break;
        case OPT_REPLACE: o->replace = true; break;
        case OPT_YES: o->yes = true; break;
        case OPT_OPKEY:
            if (known[k].name[2] == 'a') o->arch = v;
            else o->vendor = v;
            break;
        }
    }
    if ((s->allowed & OPT_FILE) && o->file == NULL) return usage(s->name, "which FILE?");
    if ((s->allowed & OPT_OPKEY) && o->key == NULL) return usage(s->name, o->op ? "which KEY?" : "which OP and KEY?");
    return 0;
}

/* ---- reading the export ---------------------------------------------------------------- */

typedef struct aged {
    json_t *entry;
    json_int_t created;
    size_t pos;
} aged;

static int cmp_aged(const void *a, const void *b) {
    const aged *x = a, *y = b;
    if (x->created != y->created) return x->created > y->created ? -1 : 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

/* Orders entries by age, newest first; entries made in the same second keep the export's order
 * (op, device, candidate set, version, key). False when out of memory. */
static bool by_age(json_t *entries) {
    size_t n = json_array_size(entries);
    aged *a = malloc((n ? n : 1) * sizeof *a);
    if (a == NULL) return false;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(entries, i);
        a[i] = (aged){json_incref(e), json_integer_value(json_object_get(e, "created")), i};
    }
    qsort(a, n, sizeof *a, cmp_aged);
    json_array_clear(entries);
    bool ok = true;
    for (size_t i = 0; i < n; i++)
        if (json_array_append_new(entries, a[i].entry) != 0) ok = false;
    free(a);
    return ok;
}

/* Whether an entry ended below the confidence its race asked for. */
static bool below(json_t *e) {
    json_t *c = json_object_get(e, "confidence"), *r = json_object_get(e, "requested_confidence");
    return json_is_number(c) && json_is_number(r) && json_number_value(c) < json_number_value(r);
}

/* "0.70", "-" when unknown, "0.70<0.99" when below what was asked for. */
static void fmt_conf(json_t *e, char *buf, size_t len) {
    json_t *cv = json_object_get(e, "confidence");
    if (!json_is_number(cv)) snprintf(buf, len, "-");
    else if (below(e)) snprintf(buf, len, "%.2f<%.2f", json_number_value(cv), json_number_value(json_object_get(e, "requested_confidence")));
    else snprintf(buf, len, "%.2f", json_number_value(cv));
}

/* Exports with o's filters and parses the document; NULL (message printed) on failure. */
static json_t *load_entries(const opts *o, kt_cache *c, json_t **doc) {
    char *text = NULL;
    if (kt_cache_export(c, o->op, o->device, &text) != KT_OK) {
        failed(o);
        return NULL;
    }
    json_error_t err;
    *doc = json_loads(text, 0, &err);
    kt_free(text);
    json_t *entries = *doc ? json_object_get(*doc, "entries") : NULL;
    if (!json_is_array(entries)) {
        report(1, o->sub, "the cache's export cannot be read: %s", *doc ? "no entries" : err.text);
        json_decref(*doc);
        *doc = NULL;
        return NULL;
    }
    if (!by_age(entries)) {
        report(1, o->sub, "out of memory");
        json_decref(*doc);
        *doc = NULL;
        return NULL;
    }
    return entries;
}

static const char *str_of(json_t *obj, const char *name) {
    const char *s = json_string_value(json_object_get(obj, name));
    return s ? s : "";
}

/* Formats a time in ns with a unit: "850.0 ns", "12.35 us", "1.23 ms", "2.50 s"; "-" when
 * negative (not measured) or absent. */
static const char *fmt_time(json_t *v, char *buf, size_t len) {
    if (!json_is_number(v) || json_number_value(v) < 0) return "-";
    double ns = json_number_value(v);
    if (ns < 1e3) snprintf(buf, len, "%.1f ns", ns);
    else if (ns < 1e6) snprintf(buf, len, "%.2f us", ns / 1e3);
    else if (ns < 1e9) snprintf(buf, len, "%.2f ms", ns / 1e6);
    else snprintf(buf, len, "%.2f s", ns / 1e9);
    return buf;
}

/* The key's words joined by commas. A stored key has at most 16 words of at most 20 digits and a
 * sign (the store refuses longer ones), so 400 bytes always hold it. */
static void fmt_key(json_t *key, char *buf, size_t len) {
    size_t at = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < json_array_size(key) && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%lld", i ? "," : "", (long long)json_integer_value(json_array_get(key, i)));
}

/* "candidate config" (a new string; NULL when out of memory). */
static char *fmt_winner(json_t *e) {
    json_t *w = json_object_get(e, "winner");
    const char *config = json_string_value(json_object_get(w, "config"));
    return cli_format("%s%s%s", str_of(w, "candidate"), config ? " " : "", config ? config : "");
}

static void shorten(const char *s, char *buf, size_t len, size_t max) {
    if (strlen(s) <= max) snprintf(buf, len, "%s", s);
    else snprintf(buf, len, "%.*s...", (int)(max - 3), s);
}

/* A table printed with columns as wide as their widest cell, two spaces apart; the last column
 * is not padded. */
#define TABLE_COLS 8
typedef struct table {
    size_t ncols, nrows, cap;
    char **cells; /* nrows * ncols */
    size_t width[TABLE_COLS];
} table;

static bool table_row(table *t, const char *const *cells) {
    if (t->nrows == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        char **p = realloc(t->cells, cap * t->ncols * sizeof *p);
        if (p == NULL) return false;
        t->cells = p;
        t->cap = cap;
    }
    for (size_t i = 0; i < t->ncols; i++) {
        char *c = strdup(cells[i]);
        if (c == NULL) return false;
        t->cells[t->nrows * t->ncols + i] = c;
        if (strlen(c) > t->width[i]) t->width[i] = strlen(c);
    }
    t->nrows++;
    return true;
}

static void table_print(table *t, const char *indent) {
    for (size_t r = 0; r < t->nrows; r++) {
        const char *const *cells = (const char *const *)&t->cells[r * t->ncols];
        size_t last = t->ncols; /* cells up to the last non-empty one: no trailing blanks */
        while (last > 0 && cells[last - 1][0] == '\0') last--;
        fputs(indent, stdout);
        for (size_t i = 0; i < last; i++) {
            fputs(cells[i], stdout);
            if (i + 1 < last) printf("%*s", (int)(t->width[i] - strlen(cells[i]) + 2), "");
        }
        putchar('\n');
    }
}

static void table_free(table *t) {
    for (size_t i = 0; i < t->nrows * t->ncols; i++) free(t->cells[i]);
    free(t->cells);
}

static void print_json(json_t *v) {
    char *s = json_dumps(v, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (s) printf("%s\n", s);
    free(s);
}

/* A unix time as "2025-11-22 08:26:40 UTC" (with_seconds) or "2025-11-22 08:26"; the number
 * itself when it is not a representable time. */
static void format_created(json_t *v, char *buf, size_t len, bool with_seconds) {
    time_t t = (time_t)json_integer_value(v);
    struct tm tm;
    if (!json_is_integer(v) || gmtime_r(&t, &tm) == NULL ||
        strftime(buf, len, with_seconds ? "%Y-%m-%d %H:%M:%S UTC" : "%Y-%m-%d %H:%M", &tm) == 0)
        snprintf(buf, len, "%lld", (long long)json_integer_value(v));
}

/* ---- the subcommands ------------------------------------------------------------------- */

static int run_list(const opts *o, kt_cache *c) {
    json_t *doc;
    json_t *entries = load_entries(o, c, &doc);
    if (entries == NULL) return 1;
    int status = 0;
    if (o->json) {
        json_t *out = json_array();
        size_t i;
        json_t *e;
        json_array_foreach(entries, i, e) {
            json_t *row = json_object();
            json_object_set(row, "op", json_object_get(e, "op"));
            json_object_set(row, "device", json_object_get(e, "device"));
            json_object_set(row, "key", json_object_get(e, "key"));
            json_object_set(row, "winner", json_object_get(e, "winner"));
            json_object_set(row, "time_ns", json_object_get(e, "time_ns"));
            json_object_set(row, "confidence", json_object_get(e, "confidence"));
            json_t *req = json_object_get(e, "requested_confidence");
            json_object_set_new(row, "requested_confidence", req ? json_incref(req) : json_null());
            json_object_set_new(row, "below_confidence", json_boolean(below(e)));
            json_object_set_new(row, "units", json_integer((json_int_t)json_array_size(json_object_get(e, "units"))));
            json_object_set(row, "created", json_object_get(e, "created"));
            json_array_append_new(out, row);
        }
        print_json(out);
        json_decref(out);
    } else if (json_array_size(entries) == 0) {
        printf("no decisions\n");
    } else {
        table t = {.ncols = 8};
        static const char *const head[] = {"OP", "DEVICE", "KEY", "WINNER", "TIME", "CONF", "UNITS", "CREATED"};
        bool ok = table_row(&t, head);
        size_t i;
        json_t *e;
        json_array_foreach(entries, i, e) {
            char device[32], key[400], time[32], conf[32], units[24], created[64];
            shorten(str_of(e, "device"), device, sizeof device, 24);
            fmt_key(json_object_get(e, "key"), key, sizeof key);
            char *winner = fmt_winner(e);
            ok = ok && winner != NULL;
            fmt_conf(e, conf, sizeof conf);
            snprintf(units, sizeof units, "%zu", json_array_size(json_object_get(e, "units")));
            format_created(json_object_get(e, "created"), created, sizeof created, false);
            const char *row[] = {str_of(e, "op"), device, key, winner ? winner : "", fmt_time(json_object_get(e, "time_ns"), time, sizeof time),
                                 conf, units, created};
            ok = ok && table_row(&t, row);
            free(winner);
        }
        if (ok) table_print(&t, "");
        else status = report(1, "list", "out of memory");
        table_free(&t);
    }
    json_decref(doc);
    return status;
}

static int run_show(const opts *o, kt_cache *c) {
    json_t *doc;
    json_t *entries = load_entries(o, c, &doc);
    if (entries == NULL) return 1;
    int status = 0;
    if (o->json) {
        print_json(entries);
    } else if (json_array_size(entries) == 0) {
        printf("no decisions\n");
    }
    size_t i;
    json_t *e;
    json_array_foreach(entries, i, e) {
        if (o->json) break;
        char key[400], time[32], created[64];
        fmt_key(json_object_get(e, "key"), key, sizeof key);
        char *winner = fmt_winner(e);
        format_created(json_object_get(e, "created"), created, sizeof created, true);
        json_t *cv = json_object_get(e, "confidence"), *rv = json_object_get(e, "requested_confidence");
        bool low = below(e);
        if (i > 0) printf("\n");
        printf("%s [%s]\n", str_of(e, "op"), key);
        printf("  device:        %s\n", str_of(e, "device"));
        printf("  candidate set: %s\n", str_of(e, "candidate_set"));
        printf("  library:       %s\n", str_of(e, "library_version"));
        printf("  created:       %s\n", created);
        printf("  winner:        %s, %s, confidence ", winner ? winner : "(out of memory)", fmt_time(json_object_get(e, "time_ns"), time, sizeof time));
        free(winner);
        if (json_is_number(cv)) printf("%.2f", json_number_value(cv));
        else printf("unknown");
        if (low) printf(", below the %.2f asked for: the next tuning re-races its finalists\n", json_number_value(rv));
        else if (json_is_number(rv)) printf(" (%.2f asked for)\n", json_number_value(rv));
        else printf("\n");
        json_t *units = json_object_get(e, "units");
        if (json_array_size(units) == 0) {
            printf("  units:         none recorded\n");
            continue;
        }
        /* the finalists matter only to a decision that will be re-raced */
        table t = {.ncols = low ? 7 : 6};
        static const char *const head[] = {"CANDIDATE", "CONFIG", "OUTCOME", "TIME", "RUNS", "FINALIST", "MESSAGE"};
        const char *heads[7];
        for (size_t h = 0, k = 0; h < 7; h++)
            if (low || h != 5) heads[k++] = head[h];
        bool ok = table_row(&t, heads);
        size_t k;
        json_t *u;
        json_array_foreach(units, k, u) {
            char runs[24];
            snprintf(runs, sizeof runs, "%lld", (long long)json_integer_value(json_object_get(u, "runs")));
            const char *config = json_string_value(json_object_get(u, "config"));
            const char *message = json_string_value(json_object_get(u, "message"));
            const char *all[] = {str_of(u, "candidate"), config ? config : "-", str_of(u, "outcome"),
                                 fmt_time(json_object_get(u, "time_ns"), time, sizeof time), runs,
                                 json_is_true(json_object_get(u, "finalist")) ? "yes" : "no", message ? message : ""};
            const char *row[7];
            for (size_t h = 0, c = 0; h < 7; h++)
                if (low || h != 5) row[c++] = all[h];
            ok = ok && table_row(&t, row);
        }
        if (ok) table_print(&t, "  ");
        else status = report(1, "show", "out of memory");
        table_free(&t);
    }
    json_decref(doc);
    return status;
}

/* Writes text to path, a regular file or a new one: a FIFO, a device or a directory is refused
 * before anything is written (and opened without waiting for a reader). NULL on success, else
 * why (allocated). */
static char *write_regular(const char *path, const char *text) {
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return cli_format("is %s; expected a regular file (or a new one)", cli_file_kind(st.st_mode));
    int fd = open(path, O_WRONLY | O_CREAT | O_NONBLOCK | O_CLOEXEC, 0666);
    if (fd < 0) return cli_format("%s", strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) { /* replaced since it was looked at */
        char *why = cli_format("is %s; expected a regular file (or a new one)", cli_file_kind(st.st_mode));
        close(fd);
        return why;
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0) fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    size_t len = strlen(text), at = 0;
    int e = ftruncate(fd, 0) == 0 ? 0 : errno;
    while (e == 0 && at < len) {
        ssize_t w = write(fd, text + at, len - at);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) e = w < 0 ? errno : EIO;
        else at += (size_t)w;
    }
    if (close(fd) != 0 && e == 0) e = errno;
    return e ? cli_format("%s", strerror(e)) : NULL;
}

static int run_export(const opts *o, kt_cache *c) {
    char *text = NULL;
    if (kt_cache_export(c, o->op, o->device, &text) != KT_OK) return failed(o);
    if (o->output == NULL) {
        fputs(text, stdout);
        kt_free(text);
        return 0;
    }
    json_t *doc = json_loads(text, 0, NULL);
    size_t n = json_array_size(json_object_get(doc, "entries"));
    json_decref(doc);
    char *why = write_regular(o->output, text);
    kt_free(text);
    if (why != NULL) {
        report(1, "export", "%s: %s", o->output, why);
        free(why);
        return 1;
    }
    if (o->json) {
        json_t *v = json_pack("{s:I, s:s}", "exported", (json_int_t)n, "file", o->output);
        print_json(v);
        json_decref(v);
    } else {
        printf("exported %zu decision%s to %s\n", n, n == 1 ? "" : "s", o->output);
    }
    return 0;
}

/* The largest wisdom document import reads (bytes): far more than a cache of thousands of
 * decisions with every unit of their spaces, and a bound on what a wrong file costs. */
#define WISDOM_LIMIT ((size_t)256 << 20)

/* Reads a wisdom document into a NUL-terminated buffer: a regular file of at most WISDOM_LIMIT
 * bytes (a FIFO, a device or a directory is refused before anything is read from it, so
 * nothing waits on a writer or reads without end), or stdin for "-", read up to the same
 * limit. NULL on failure, with the reason in *why (allocated; NULL when out of memory). */
char *cli_read_wisdom(const char *path, const char *name, char **why) {
    *why = NULL;
    bool in = strcmp(path, "-") == 0;
    int fd = in ? 0 : open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || (!in && fstat(fd, &st) != 0)) {
        *why = cli_format("%s: %s", name, strerror(errno));
        if (fd >= 0) close(fd);
        return NULL;
    }
    size_t want = WISDOM_LIMIT + 1; /* stdin: up to one byte past the limit, to know it is past */
    if (!in) {
        if (!S_ISREG(st.st_mode))
            *why = cli_format("%s: is %s; expected a regular file (or - for stdin)", name, cli_file_kind(st.st_mode));
        else if ((uintmax_t)st.st_size > WISDOM_LIMIT)
            *why = cli_format("%s: is %jd bytes; kerntune reads at most %zu MiB of wisdom", name, (intmax_t)st.st_size,
                              WISDOM_LIMIT >> 20);
        if (*why != NULL) {
            close(fd);
            return NULL;
        }
        int flags = fcntl(fd, F_GETFL);
        if (flags >= 0) fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
        want = (size_t)st.st_size; /* what it holds now: a file that grows meanwhile is read as it was */
    }
    size_t n = 0, cap = in ? 65536 : want + 1;
    char *buf = malloc(cap);
    while (buf != NULL && n < want) {
        if (n + 1 == cap) { /* stdin only: grow, never past the limit and its extra byte */
            size_t more = cap > (want + 1) / 2 ? want + 1 : cap * 2;
            char *p = realloc(buf, more);
            if (p == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = p;
            cap = more;
        }
        size_t room = cap - 1 - n;
        ssize_t got = read(fd, buf + n, room < want - n ? room : want - n);
        if (got < 0 && errno == EINTR) continue;
        if (got > 0) {
            n += (size_t)got;
            continue;
        }
        if (got < 0 || !in) { /* an error, or a file shorter than it was: it changed while it was read */
            *why = got < 0 ? cli_format("%s: %s", name, strerror(errno))
                           : cli_format("%s: changed while it was read (%zu of %zu bytes)", name, n, want);
            free(buf);
            buf = NULL;
        }
        break;
    }
    if (!in) close(fd);
    if (buf != NULL && n > WISDOM_LIMIT) {
        *why = cli_format("%s: more than %zu MiB; kerntune reads at most %zu MiB of wisdom", name, WISDOM_LIMIT >> 20,
                          WISDOM_LIMIT >> 20);
        free(buf);
        buf = NULL;
    }
    if (buf != NULL) buf[n] = '\0';
    return buf;
}

static int run_import(const opts *o, kt_cache *c) {
    const char *name = strcmp(o->file, "-") == 0 ? "(stdin)" : o->file;
    char *why = NULL;
    char *text = cli_read_wisdom(o->file, name, &why);
    if (text == NULL) {
        report(1, "import", "%s", why ? why : "out of memory");
        free(why);
        return 1;
    }
    /* syntax errors reported as FILE:LINE:COLUMN, as for T1 problems */
    json_error_t err;
    json_t *doc = json_loads(text, JSON_REJECT_DUPLICATES, &err);
    if (doc == NULL) {
        free(text);
        return report(1, "import", "%s:%d:%d: %s", name, err.line, err.column, err.text);
    }
    json_decref(doc);
    size_t added, replaced, kept;
    kt_status st = kt_cache_import(c, text, o->replace, &added, &replaced, &kept);
    free(text);
    if (st != KT_OK) {
        static const char prefix[] = "kt_cache_import: ";
        const char *msg = kt_last_error();
        if (strncmp(msg, prefix, sizeof prefix - 1) == 0) msg += sizeof prefix - 1;
        return report(1, "import", "%s: %s", name, msg);
    }
    if (o->json) {
        json_t *v = json_pack("{s:s, s:I, s:I, s:I}", "file", name, "added", (json_int_t)added, "replaced", (json_int_t)replaced, "kept",
                              (json_int_t)kept);
        print_json(v);
        json_decref(v);
    } else {
        printf("imported %s: %zu added, %zu replaced, %zu kept\n", name, added, replaced, kept);
    }
    return 0;
}

static int print_removed(const opts *o, size_t n) {
    if (o->json) {
        json_t *v = json_pack("{s:I}", "removed", (json_int_t)n);
        print_json(v);
        json_decref(v);
    } else {
        printf("removed %zu decision%s\n", n, n == 1 ? "" : "s");
    }
    return 0;
}

static int run_rm(const opts *o, kt_cache *c) {
    size_t n;
    if (kt_cache_remove(c, o->op, o->device, &n) != KT_OK) return failed(o);
    return print_removed(o, n);
}

static int run_clear(const opts *o, kt_cache *c) {
    size_t n;
    if (kt_cache_remove(c, NULL, NULL, &n) != KT_OK) return failed(o);
    return print_removed(o, n);
}

static int run_deferred(const opts *o, kt_cache *c) {
    char *text = NULL;
    if (kt_cache_deferred(c, o->op, o->device, &text) != KT_OK) {
        failed(o);
        return 1;
    }
    json_error_t err;
    json_t *doc = json_loads(text, 0, &err);
    kt_free(text);
    json_t *entries = doc ? json_object_get(doc, "entries") : NULL;
    if (!json_is_array(entries)) {
        int st = report(1, o->sub, "the cache's list of deferred keys cannot be read: %s", doc ? "no entries" : err.text);
        json_decref(doc);
        return st;
    }
    int status = 0;
    if (o->json) {
        print_json(entries);
    } else if (json_array_size(entries) == 0) {
        printf("no deferred keys\n");
    } else {
        table t = {.ncols = 5};
        static const char *const head[] = {"OP", "DEVICE", "KEY", "ARGS", "DEFERRED"};
        bool ok = table_row(&t, head);
        size_t i;
        json_t *e;
        json_array_foreach(entries, i, e) {
            char device[32], key[400], created[64];
            shorten(str_of(e, "device"), device, sizeof device, 24);
            fmt_key(json_object_get(e, "key"), key, sizeof key);
            format_created(json_object_get(e, "created"), created, sizeof created, false);
            const char *row[] = {str_of(e, "op"), device, key, str_of(e, "args"), created};
            ok = ok && table_row(&t, row);
        }
        if (ok) table_print(&t, "");
        else status = report(1, "deferred", "out of memory");
        table_free(&t);
    }
    json_decref(doc);
    return status;
}

static int run_path(const opts *o, kt_cache *c) {
    const char *w = kt_cache_warning(c);
    if (o->json) {
        json_t *v = json_object();
        json_object_set_new(v, "path", json_string(kt_cache_path(c)));
        json_object_set_new(v, "warning", *w ? json_string(w) : json_null());
        print_json(v);
        json_decref(v);
        return 0;
    }
    printf("%s\n", kt_cache_path(c));
    if (*w) printf("warning: %s\n", w);
    return 0;
}

static void print_cache_help(FILE *out, const void *unused) {
    (void)unused;
    help_cache(out);
}

static void print_sub_help(FILE *out, const void *s) { help_sub(s, out); }

/* Prints a help: as text, or with --json as one document {"help": TEXT}. */
static int print_help(void (*print)(FILE *out, const void *arg), const void *arg) {
    if (!json_mode) {
        print(stdout, arg);
        return 0;
    }
    char *text = cli_capture(print, arg);
    json_t *v = json_pack("{s:s}", "help", text ? text : "out of memory");
    print_json(v);
    json_decref(v);
    free(text);
    return text ? 0 : 1;
}

/* ---- explain ------------------------------------------------------------------------------ */

/* Parses "4096" or "512,-1,7" into key; false with why when it is not integers joined by commas. */
static bool parse_key(const char *text, int64_t *key, size_t max, size_t *n, char *why, size_t len) {
    *n = 0;
    for (const char *p = text;;) {
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno != 0 || (*end != ',' && *end != '\0')) {
            snprintf(why, len, "KEY '%.100s' is not integers joined by commas (at offset %zu)", text, (size_t)(p - text));
            return false;
        }
        if (*n == max) {
            snprintf(why, len, "KEY '%.100s' has more than %zu components", text, max);
            return false;
        }
        key[(*n)++] = v;
        if (*end == '\0') return true;
        p = end + 1;
    }
}

static int run_explain(const opts *o, kt_cache *c) {
    int64_t key[16];
    size_t nkey = 0;
    char why[256];
    if (!parse_key(o->key, key, sizeof key / sizeof key[0], &nkey, why, sizeof why)) return usage(o->sub, "%s", why);
    const char *device = o->device;
    json_t *doc = NULL;
    if (device == NULL) { /* the one device with decisions of the op */
        json_t *entries = load_entries(o, c, &doc);
        if (entries == NULL) return 1;
        size_t i;
        json_t *e;
        json_array_foreach(entries, i, e) {
            const char *d = str_of(e, "device");
            if (device == NULL) device = d;
            else if (strcmp(device, d) != 0) {
                int st = usage(o->sub, "decisions of op '%s' were made on several devices ('%.80s', '%.80s'...): give --device FP", o->op,
                               device, d);
                json_decref(doc);
                return st;
            }
        }
        if (device == NULL) {
            json_decref(doc);
            return report(1, o->sub, "the cache holds no decision of op '%s' (of this library version): every key gets the op's default", o->op);
        }
    }
    char *text = NULL;
    kt_status st = kt_cache_explain(c, o->op, device, o->arch, o->vendor, key, nkey, &text);
    json_decref(doc); /* device pointed into it */
    if (st != KT_OK) return failed(o);
    json_t *x = json_loads(text, 0, NULL);
    kt_free(text);
    if (x == NULL) return report(1, o->sub, "out of memory");
    if (o->json) {
        print_json(x);
        json_decref(x);
        return 0;
    }
    char k[400];
    fmt_key(json_object_get(x, "key"), k, sizeof k);
    printf("op %s, key [%s], device %s\n", o->op, k, str_of(x, "device"));
    printf("  architecture: %s; vendor: %s\n", *str_of(x, "arch") ? str_of(x, "arch") : "unknown",
           *str_of(x, "vendor") ? str_of(x, "vendor") : "unknown");
    json_t *rec = json_object_get(x, "recorded");
    if (json_is_object(rec)) {
        char *w = fmt_winner(rec);
        printf("recorded: %s (a tuned key: served as it is)\n", w ? w : "(out of memory)");
        free(w);
    } else {
        printf("recorded: nothing for this key on this device\n");
    }
    json_t *cands = json_object_get(x, "candidates");
    if (json_array_size(cands) == 0) {
        printf("no other decision can answer it: the op's default does\n");
    } else {
        printf("%s, in this order (the first whose winner accepts the call's arguments answers; else the op's default):\n",
               json_is_object(rec) ? "were it not recorded" : "answered by the rules");
        table t = {.ncols = 5};
        static const char *const head[] = {"RULE", "KEY", "DISTANCE", "DEVICE", "WINNER"};
        bool ok = table_row(&t, head);
        size_t i;
        json_t *e;
        json_array_foreach(cands, i, e) {
            char ck[400], dist[32], dev[48];
            fmt_key(json_object_get(e, "key"), ck, sizeof ck);
            snprintf(dist, sizeof dist, "%.2f", json_number_value(json_object_get(e, "distance")));
            shorten(str_of(e, "device"), dev, sizeof dev, 40);
            char *w = fmt_winner(e);
            const char *row[] = {str_of(e, "rule"), ck, dist, dev, w ? w : ""};
            ok = ok && w != NULL && table_row(&t, row);
            free(w);
        }
        if (ok) table_print(&t, "  ");
        table_free(&t);
        if (!ok) {
            json_decref(x);
            return report(1, o->sub, "out of memory");
        }
    }
    json_decref(x);
    return 0;
}

int run_cache(int argc, char **argv) {
    json_mode = false;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--json") == 0) json_mode = true;
    if (argc < 2) {
        help_cache(stderr);
        return 2;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) return print_help(print_cache_help, NULL);
    const subcommand *s = NULL;
    for (size_t i = 0; i < NSUBS && s == NULL; i++)
        if (strcmp(subs[i].name, argv[1]) == 0) s = &subs[i];
    if (s == NULL) return report(2, NULL, "unknown command '%s'; run 'kerntune cache --help' for the list", argv[1]);
    for (int i = 2; i < argc; i++)
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) return print_help(print_sub_help, s);
    opts o;
    int status = parse(s, argc - 1, argv + 1, &o);
    if (status != 0) return status;
    if (s->run == run_rm && o.op == NULL && o.device == NULL)
        return usage(s->name, "give --op NAME (or --device FP): to remove every decision, run 'kerntune cache clear --yes'");
    if (s->run == run_clear && !o.yes) return usage(s->name, "this removes every decision of the cache: add --yes to confirm");
    kt_cache *c;
    if (kt_cache_open(o.cache, &c) != KT_OK) return failed(&o);
    const char *w = kt_cache_warning(c);
    if (*w && s->run != run_path) fprintf(stderr, "kerntune cache: warning: %s\n", w);
    status = s->run(&o, c);
    kt_cache_close(c);
    return status;
}
