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
 *
 * This file parses the options and runs a subcommand; cache_show.c and cache_files.c hold them.
 */
#include "cache_int.h"
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

typedef struct subcommand {
    const char *name;
    const char *synopsis; /* after "kerntune cache NAME" */
    const char *summary;
    unsigned allowed;
    int (*run)(const opts *o, kt_cache *c);
    const char *details;
} subcommand;


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


static void report_text(const char *sub, const char *msg) {
    fprintf(stderr, "kerntune cache%s%s: %s\n", sub ? " " : "", sub ? sub : "", msg ? msg : "out of memory");
    if (json_mode) {
        json_t *v = json_pack("{s:s}", "error", msg ? msg : "out of memory");
        cache_print_json(v);
        json_decref(v);
    }
}

/* Reports an error: "kerntune cache[ SUB]: MESSAGE" on stderr and, with --json, {"error":
 * MESSAGE} on stdout. Returns status. */
int cache_report(int status, const char *sub, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *msg = cli_vformat(fmt, ap);
    va_end(ap);
    report_text(sub, msg);
    free(msg);
    return status;
}

int cache_usage(const char *sub, const char *fmt, ...) {
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
int cache_failed(const opts *o) { return cache_report(1, o->sub, "%s", kt_last_error()); }

static int parse(const subcommand *s, int argc, char **argv, opts *o) {
    memset(o, 0, sizeof *o);
    o->sub = s->name;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if ((a[0] != '-' || (o->op && !o->key && a[1] >= '0' && a[1] <= '9')) && (s->allowed & OPT_OPKEY)) {
            if (o->op == NULL) o->op = a; /* (a key may start with '-': a negative component) */
            else if (o->key == NULL) o->key = a;
            else return cache_usage(s->name, "unexpected argument '%s' (OP and KEY were given)", a);
            continue;
        }
        if (a[0] != '-' || strcmp(a, "-") == 0) {
            if (!(s->allowed & OPT_FILE)) return cache_usage(s->name, "unexpected argument '%s'", a);
            if (o->file != NULL) return cache_usage(s->name, "one FILE only ('%s' and '%s')", o->file, a);
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
            return cache_usage(s->name, "unknown option '%.*s'", nl, a);
        const char *v = NULL;
        if (known[k].value) {
            if (eq) v = eq + 1;
            else if (i + 1 < argc) v = argv[++i];
            else return cache_usage(s->name, "%s needs a value", known[k].name);
            if (*v == '\0') return cache_usage(s->name, "%s needs a non-empty value", known[k].name);
        } else if (eq) {
            return cache_usage(s->name, "%s takes no value", known[k].name);
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
    if ((s->allowed & OPT_FILE) && o->file == NULL) return cache_usage(s->name, "which FILE?");
    if ((s->allowed & OPT_OPKEY) && o->key == NULL) return cache_usage(s->name, o->op ? "which KEY?" : "which OP and KEY?");
    return 0;
}


void cache_print_json(json_t *v) {
    char *s = json_dumps(v, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (s) printf("%s\n", s);
    free(s);
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
    cache_print_json(v);
    json_decref(v);
    free(text);
    return text ? 0 : 1;
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
    if (s == NULL) return cache_report(2, NULL, "unknown command '%s'; run 'kerntune cache --help' for the list", argv[1]);
    for (int i = 2; i < argc; i++)
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) return print_help(print_sub_help, s);
    opts o;
    int status = parse(s, argc - 1, argv + 1, &o);
    if (status != 0) return status;
    if (s->run == run_rm && o.op == NULL && o.device == NULL)
        return cache_usage(s->name, "give --op NAME (or --device FP): to remove every decision, run 'kerntune cache clear --yes'");
    if (s->run == run_clear && !o.yes) return cache_usage(s->name, "this removes every decision of the cache: add --yes to confirm");
    kt_cache *c;
    if (kt_cache_open(o.cache, &c) != KT_OK) return cache_failed(&o);
    const char *w = kt_cache_warning(c);
    if (*w && s->run != run_path) fprintf(stderr, "kerntune cache: warning: %s\n", w);
    status = s->run(&o, c);
    kt_cache_close(c);
    return status;
}
