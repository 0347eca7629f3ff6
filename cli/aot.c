/*
 * aot.c - `kerntune aot`: decisions emitted ahead of time as C (kerntune/aot.h).
 *
 * Reads the decisions of the persistent cache (through kt_cache_export, the public API) or of
 * wisdom files, keeps those of the ops, devices and keys asked for, and writes PREFIX.h and
 * PREFIX.c: one constant kt_aot_table per device fingerprint (entries ordered by op, key words
 * and candidate set), the array of the tables, a lookup function (binary search on op and key
 * words) and a function registering every table with a context. The output depends on the
 * decisions alone (no time, no path): the same input gives the same bytes. It uses nothing
 * past C99 itself and compiles, with kerntune's C11 headers, under -std=c11 -Wall -Wextra
 * -Werror -pedantic. Decisions of another library MAJOR version are left out, with a note on
 * stderr.
 */
#include "aot.h"
#include "cache.h"
#include "text.h"

#include <kerntune.h>
#include <kerntune/cache.h>
#include <kerntune/variants.h>

#include <jansson.h>

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AOT_STRING_MAX 4095 /* the longest string literal C99 promises to take (-Woverlength-strings) */

void help_aot(FILE *out) {
    fprintf(out,
            "usage: kerntune aot -o PREFIX [--op NAME]... [--device FP]... [--key K]... [--name SYMBOL]\n"
            "                    [--embed [--artifacts DIR]] [--wisdom FILE]... [--cache PATH] [--json]\n"
            "\n"
            "Emits decisions as C, so that a program dispatches them without measuring and without a\n"
            "cache: PREFIX.h and PREFIX.c hold one table per device (kerntune/aot.h), SYMBOL_tables and\n"
            "SYMBOL_table_count, SYMBOL_find(device, op, key, key_len) (the entry of that key, or NULL)\n"
            "and SYMBOL_register(ctx, &used) (kt_context_add_decisions of each table: a table made on\n"
            "a device the context does not have is ignored, and the log says why). Link PREFIX.c into\n"
            "the program and call SYMBOL_register before the ops' first calls. The decisions come from\n"
            "the persistent cache, or from wisdom files ('kerntune cache export') with --wisdom.\n"
            "The same decisions give the same bytes.\n"
            "\n"
            "options:\n"
            "  -o, --output PREFIX  write PREFIX.h and PREFIX.c (their directory must exist)\n"
            "  --op NAME            only this op's decisions (repeatable; default: every op)\n"
            "  --device FP          only this device fingerprint's (repeatable; see 'kerntune devices -v')\n"
            "  --key K              only keys whose components start with K (\"4096\", \"512,512\"; repeatable)\n"
            "  --name SYMBOL        the C prefix of the emitted names (default kt_decisions)\n"
            "  --embed              put each variant winner's compiled artifact in the table too, so the\n"
            "                       program loads it without a compiler (a decision whose artifact is\n"
            "                       not found is an error)\n"
            "  --artifacts DIR      where the artifacts are (default: KERNTUNE_ARTIFACTS, else the\n"
            "                       user's cache directory, as for tuning)\n"
            "  --wisdom FILE        read decisions from a wisdom file instead of the cache (repeatable)\n"
            "  --cache PATH         the cache file; default: KERNTUNE_CACHE, else the user's cache directory\n"
            "  --json               print {\"header\", \"source\", \"tables\", \"decisions\"} instead of text\n"
            "  -h, --help           print this help\n"
            "\n"
            "Exit status: 0 when the files were written, 1 when the work failed, 2 on a usage error.\n");
}

typedef struct aot_opts {
    const char *out, *name, *cache, *artifacts;
    const char *ops[64], *devices[64], *keys[64], *wisdom[64];
    size_t nops, ndevices, nkeys, nwisdom;
    bool json, embed;
} aot_opts;

static int usage(const char *fmt, const char *arg) {
    fprintf(stderr, "kerntune aot: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nrun 'kerntune aot --help' for the options\n");
    return 2;
}

static bool identifier(const char *s) {
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_')) return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_')) return false;
    return strlen(s) <= 64;
}

static int parse(int argc, char **argv, aot_opts *o) {
    memset(o, 0, sizeof *o);
    o->name = "kt_decisions";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--json") == 0 || strcmp(a, "--embed") == 0) {
            if (a[2] == 'j') o->json = true;
            else o->embed = true;
            continue;
        }
        static const char *const valued[] = {"-o", "--output", "--op", "--device", "--key", "--name", "--wisdom", "--cache", "--artifacts"};
        size_t k = 0;
        while (k < sizeof valued / sizeof valued[0] && strcmp(valued[k], a) != 0) k++;
        if (k == sizeof valued / sizeof valued[0]) return usage(a[0] == '-' ? "unknown option '%s'" : "unexpected argument '%s'", a);
        if (i + 1 >= argc || argv[i + 1][0] == '\0') return usage("%s needs a value", a);
        const char *v = argv[++i];
        const char **list = NULL;
        size_t *n = NULL;
        switch (k) {
        case 0: case 1: o->out = v; break;
        case 2: list = o->ops, n = &o->nops; break;
        case 3: list = o->devices, n = &o->ndevices; break;
        case 4: list = o->keys, n = &o->nkeys; break;
        case 5: o->name = v; break;
        case 6: list = o->wisdom, n = &o->nwisdom; break;
        case 7: o->cache = v; break;
        case 8: o->artifacts = v; break;
        }
        if (list) {
            if (*n == 64) return usage("%s given more than 64 times", a);
            list[(*n)++] = v;
        }
    }
    if (o->out == NULL) return usage("%s", "where to? give -o PREFIX");
    if (!identifier(o->name)) return usage("--name '%s' is not a C identifier of at most 64 characters", o->name);
    if (o->cache && o->nwisdom) return usage("%s", "--cache and --wisdom: decisions come from one or the other");
    if (o->artifacts && !o->embed) return usage("%s", "--artifacts without --embed: nothing would read them");
    return 0;
}

/* ---- the decisions ------------------------------------------------------------------------- */

typedef struct dec {
    json_t *e;          /* the wisdom entry */
    const char *op, *device, *set_hash;
    int64_t key[32];
    size_t key_len;
} dec;

static int cmp_dec(const void *a, const void *b) {
    const dec *x = a, *y = b;
    int d = strcmp(x->device, y->device);
    if (d == 0) d = strcmp(x->op, y->op);
    for (size_t i = 0; d == 0 && i < x->key_len && i < y->key_len; i++) d = x->key[i] < y->key[i] ? -1 : x->key[i] > y->key[i];
    if (d == 0) d = x->key_len < y->key_len ? -1 : x->key_len > y->key_len;
    if (d == 0) d = strcmp(x->set_hash, y->set_hash);
    return d;
}

static bool listed(const char *const *list, size_t n, const char *s) {
    if (n == 0) return true;
    for (size_t i = 0; i < n; i++)
        if (strcmp(list[i], s) == 0) return true;
    return false;
}

/* Whether the key's words start with the components of one of --key's (all when none given). */
static bool key_listed(const aot_opts *o, const dec *d) {
    if (o->nkeys == 0) return true;
    for (size_t i = 0; i < o->nkeys; i++) {
        const char *p = o->keys[i];
        size_t w = 0;
        bool match = true;
        while (match && *p) {
            char *end;
            long long v = strtoll(p, &end, 10);
            match = end != p && w < d->key_len && d->key[w] == v && (*end == ',' || *end == '\0');
            w++;
            p = *end == ',' ? end + 1 : end;
        }
        if (match) return true;
    }
    return false;
}

static const char *str_of(json_t *o, const char *name) {
    const char *s = json_string_value(json_object_get(o, name));
    return s ? s : "";
}

/* ---- writing C ----------------------------------------------------------------------------- */

/* Writes s as a C string literal (octal escapes for anything but printable ASCII, quotes and
 * backslashes escaped), or NULL. False when it is too long for a literal. */
static bool put_string(FILE *f, const char *s) {
    if (s == NULL) {
        fputs("NULL", f);
        return true;
    }
    if (strlen(s) > AOT_STRING_MAX) return false;
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20 || *p > 0x7e || *p == '?') fprintf(f, "\\%03o", *p); /* '?': no trigraphs */
        else fputc(*p, f);
    }
    fputc('"', f);
    return true;
}

/* The header of the emitted tables (include guard guard, names prefixed N), into h. */
static void write_header(FILE *h, const char *guard, const char *N) {
    fprintf(h,
            "/* Decisions made ahead of time, emitted by kerntune aot (kerntune %s). Do not edit: emit them again. */\n"
            "#ifndef %s\n#define %s\n\n#include <kerntune/aot.h>\n\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n"
            "/* The tables, one per device fingerprint, and how many there are. */\n"
            "extern const kt_aot_table *const %s_tables[];\nextern const size_t %s_table_count;\n\n"
            "/* The entry of op and key (its words: components, then validity mask) in the table of device,\n"
            " * or NULL. */\n"
            "const kt_aot_entry *%s_find(const char *device, const char *op, const int64_t *key, size_t key_len);\n\n"
            "/* Registers every table with ctx (kt_context_add_decisions); *used (may be NULL) receives how\n"
            " * many were used: a table of a device the context does not have is ignored. */\n"
            "kt_status %s_register(kt_context *ctx, size_t *used);\n\n"
            "#ifdef __cplusplus\n}\n#endif\n\n#endif\n",
            kt_version_string(), guard, guard, N, N, N, N);
}

/* The emitted lookup code, names prefixed N: N_find's binary search over a device's sorted
 * table and N_register's loop over the tables, into c. */
static void write_lookup(FILE *c, const char *N) {
    fprintf(c,
            "/* Orders an entry against op and key: by op, then key words, then length. */\n"
            "static int %s_cmp(const kt_aot_entry *e, const char *op, const int64_t *key, size_t key_len) {\n"
            "    int d = strcmp(e->op, op);\n"
            "    size_t i;\n"
            "    for (i = 0; d == 0 && i < e->key_len && i < key_len; i++) d = e->key[i] < key[i] ? -1 : e->key[i] > key[i];\n"
            "    if (d == 0) d = e->key_len < key_len ? -1 : e->key_len > key_len;\n"
            "    return d;\n"
            "}\n\n"
            "const kt_aot_entry *%s_find(const char *device, const char *op, const int64_t *key, size_t key_len) {\n"
            "    size_t t;\n"
            "    for (t = 0; t < %s_table_count; t++) {\n"
            "        const kt_aot_table *tb = %s_tables[t];\n"
            "        size_t lo = 0, hi;\n"
            "        if (tb == NULL || strcmp(tb->device, device) != 0) continue;\n"
            "        hi = tb->count;\n"
            "        while (lo < hi) { /* the first entry not before (op, key) */\n"
            "            size_t mid = lo + (hi - lo) / 2;\n"
            "            if (%s_cmp(&tb->entries[mid], op, key, key_len) < 0) lo = mid + 1;\n"
            "            else hi = mid;\n"
            "        }\n"
            "        if (lo < tb->count && %s_cmp(&tb->entries[lo], op, key, key_len) == 0) return &tb->entries[lo];\n"
            "    }\n"
            "    return NULL;\n"
            "}\n\n"
            "kt_status %s_register(kt_context *ctx, size_t *used) {\n"
            "    size_t t;\n"
            "    if (used) *used = 0;\n"
            "    for (t = 0; t < %s_table_count; t++) {\n"
            "        int one = 0;\n"
            "        kt_status st = kt_context_add_decisions(ctx, %s_tables[t], &one);\n"
            "        if (st != KT_OK) return st;\n"
            "        if (used) *used += (size_t)one;\n"
            "    }\n"
            "    return KT_OK;\n"
            "}\n",
            N, N, N, N, N, N, N, N, N);
}

/* Writes the bytes of artifact dir/name as a C array named sym; false (said) when it cannot. */
static bool put_artifact(FILE *c, const char *dir, const char *name, const char *sym, size_t *len) {
    char path[8300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "kerntune aot: --embed: the artifact %s: %s (tune the key again, or give --artifacts DIR)\n", path, strerror(errno));
        return false;
    }
    fprintf(c, "static const unsigned char %s[] = {", sym);
    unsigned char buf[4096];
    size_t got;
    *len = 0;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0) {
        for (size_t i = 0; i < got; i++, (*len)++) fprintf(c, "%s0x%02x,", *len % 16 ? "" : "\n    ", buf[i]);
    }
    bool ok = !ferror(f);
    fclose(f);
    fprintf(c, "\n};\n");
    if (!ok || *len == 0) fprintf(stderr, "kerntune aot: --embed: the artifact %s cannot be read, or is empty\n", path);
    return ok && *len > 0;
}

static int write_files(const aot_opts *o, const char *artdir, dec *d, size_t n, const char *version, size_t *ntables) {
    char hpath[4200], cpath[4200], guard[128];
    snprintf(hpath, sizeof hpath, "%s.h", o->out);
    snprintf(cpath, sizeof cpath, "%s.c", o->out);
    const char *base = strrchr(o->out, '/');
    base = base ? base + 1 : o->out;
    size_t g = 0;
    for (const char *p = o->name; *p && g < sizeof guard - 8; p++) guard[g++] = (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
    snprintf(guard + g, sizeof guard - g, "_AOT_H");
    FILE *h = fopen(hpath, "w");
    if (h == NULL) {
        fprintf(stderr, "kerntune aot: cannot write %s: %s\n", hpath, strerror(errno));
        return 1;
    }
    const char *N = o->name;
    write_header(h, guard, N);
    bool ok = fclose(h) == 0;
    FILE *c = ok ? fopen(cpath, "w") : NULL;
    if (c == NULL) {
        fprintf(stderr, "kerntune aot: cannot write %s: %s\n", ok ? cpath : hpath, strerror(errno));
        return 1;
    }
    fprintf(c, "/* Decisions made ahead of time, emitted by kerntune aot (kerntune %s). Do not edit: emit them again. */\n", kt_version_string());
    fprintf(c, "#include \"%s.h\"\n\n#include <string.h>\n\n", base);
    size_t t = 0;
    bool fits = true, embedded = true;
    size_t *alen = calloc(n ? n : 1, sizeof *alen);
    for (size_t first = 0; first < n && alen; t++) {
        size_t last = first;
        while (last < n && strcmp(d[last].device, d[first].device) == 0) last++;
        for (size_t i = first; i < last && o->embed && embedded; i++) {
            const char *art = str_of(d[i].e, "artifact");
            if (*art == '\0') {
                if (json_is_string(json_object_get(json_object_get(d[i].e, "winner"), "config"))) {
                    fprintf(stderr, "kerntune aot: --embed: the decision of op '%s' on '%.60s' records no artifact (made before kerntune kept it: tune the key again)\n",
                            d[i].op, d[i].device);
                    embedded = false;
                }
                continue;
            }
            char sym[160];
            snprintf(sym, sizeof sym, "%s_a%zu_%zu", N, t, i - first);
            embedded = put_artifact(c, artdir, art, sym, &alen[i]);
        }
        for (size_t i = first; i < last; i++) {
            if (d[i].key_len == 0) continue;
            fprintf(c, "static const int64_t %s_k%zu_%zu[] = {", N, t, i - first);
            for (size_t w = 0; w < d[i].key_len; w++) {
                if (d[i].key[w] == INT64_MIN) fprintf(c, "%sINT64_MIN", w ? ", " : ""); /* (no literal writes it) */
                else fprintf(c, "%s%lldLL", w ? ", " : "", (long long)d[i].key[w]);
            }
            fprintf(c, "};\n");
        }
        fprintf(c, "static const kt_aot_entry %s_e%zu[] = {\n", N, t);
        for (size_t i = first; i < last; i++) {
            json_t *w = json_object_get(d[i].e, "winner");
            json_t *cfg = json_object_get(w, "config");
            fprintf(c, "    {");
            fits &= put_string(c, d[i].op);
            fprintf(c, ", ");
            fits &= put_string(c, d[i].set_hash);
            if (d[i].key_len) fprintf(c, ", %s_k%zu_%zu, %zu, ", N, t, i - first, d[i].key_len);
            else fprintf(c, ", NULL, 0, ");
            fits &= put_string(c, str_of(d[i].e, "key_kinds"));
            fprintf(c, ",\n     ");
            fits &= put_string(c, str_of(w, "candidate"));
            fprintf(c, ", ");
            fits &= put_string(c, json_is_string(cfg) ? json_string_value(cfg) : NULL);
            fprintf(c, ", %.17g,\n     ", json_number_value(json_object_get(d[i].e, "time_ns")));
            const char *art = str_of(d[i].e, "artifact");
            fits &= put_string(c, *art ? art : NULL);
            if (alen[i]) fprintf(c, ", %s_a%zu_%zu, %zu},\n", N, t, i - first, alen[i]);
            else fprintf(c, ", NULL, 0},\n");
        }
        fprintf(c, "};\nstatic const kt_aot_table %s_t%zu = {KT_AOT_VERSION, ", N, t);
        fits &= put_string(c, version);
        fprintf(c, ",\n    ");
        fits &= put_string(c, d[first].device);
        fprintf(c, ",\n    ");
        fits &= put_string(c, str_of(d[first].e, "arch"));
        fprintf(c, ", ");
        fits &= put_string(c, str_of(d[first].e, "vendor"));
        const char *compiler = ""; /* (one per device; the newest decision's were it to differ) */
        json_int_t newest = -1;
        for (size_t i = first; i < last; i++) {
            json_int_t created = json_integer_value(json_object_get(d[i].e, "created"));
            if (*str_of(d[i].e, "compiler") && created > newest) compiler = str_of(d[i].e, "compiler"), newest = created;
        }
        fprintf(c, ",\n    ");
        fits &= put_string(c, compiler);
        fprintf(c, ", %s_e%zu, %zu};\n\n", N, t, last - first);
        first = last;
    }
    *ntables = t;
    fprintf(c, "const kt_aot_table *const %s_tables[] = {", N);
    for (size_t i = 0; i < t; i++) fprintf(c, "%s&%s_t%zu", i ? ", " : "", N, i);
    if (t == 0) fprintf(c, "NULL"); /* (an empty initializer is not C) */
    fprintf(c, "};\nconst size_t %s_table_count = %zu;\n\n", N, t);
    write_lookup(c, N);
    ok = fclose(c) == 0 && alen != NULL;
    free(alen);
    if (!ok || !fits || !embedded) {
        if (embedded) /* (else said already) */
            fprintf(stderr, "kerntune aot: %s\n", !fits ? "a name or configuration is longer than a C string literal may be (4095)" : "writing the source failed");
        remove(cpath), remove(hpath);
        return 1;
    }
    return 0;
}

/* Reads the entries of one wisdom document into all. False (said) when it cannot. */
static bool read_doc(const char *text, const char *what, json_t *all) {
    json_error_t err;
    json_t *doc = json_loads(text, 0, &err);
    json_t *entries = doc ? json_object_get(doc, "entries") : NULL;
    if (!json_is_array(entries)) {
        fprintf(stderr, "kerntune aot: %s: %s\n", what, doc ? "no entries: not a wisdom document" : err.text);
        json_decref(doc);
        return false;
    }
    json_array_extend(all, entries);
    json_decref(doc);
    return true;
}

/* Every decision the options name the source of (--wisdom files, else the cache's export), into
 * all: false once a message is printed. */
static bool gather(const aot_opts *o, json_t *all) {
    for (size_t i = 0; i < o->nwisdom; i++) {
        char name[1100], *why = NULL;
        snprintf(name, sizeof name, "--wisdom %.1000s", o->wisdom[i]);
        char *text = cli_read_wisdom(o->wisdom[i], name, &why);
        if (text == NULL) {
            fprintf(stderr, "kerntune aot: %s\n", why ? why : "out of memory");
            free(why);
            return false;
        }
        bool ok = read_doc(text, o->wisdom[i], all);
        free(text);
        if (!ok) return false;
    }
    if (o->nwisdom) return true;
    kt_cache *c = NULL;
    char *text = NULL;
    if (kt_cache_open(o->cache, &c) != KT_OK || kt_cache_export(c, NULL, NULL, &text) != KT_OK) {
        fprintf(stderr, "kerntune aot: %s\n", kt_last_error());
        kt_cache_close(c);
        return false;
    }
    kt_cache_close(c);
    bool ok = read_doc(text, "the cache's export", all);
    kt_free(text);
    return ok;
}

/* The decisions of all that the options select and this library's major version serves, sorted,
 * into d (n slots); their count. */
static size_t select_decisions(const aot_opts *o, json_t *all, dec *d) {
    size_t n = json_array_size(all), k = 0, other = 0;
    char major[16];
    snprintf(major, sizeof major, "%d.", KT_VERSION_MAJOR);
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(all, i), *key = json_object_get(e, "key");
        dec x = {e, str_of(e, "op"), str_of(e, "device"), str_of(e, "candidate_set"), {0}, json_array_size(key)};
        if (x.key_len > 32) continue; /* (the store refuses longer keys) */
        for (size_t w = 0; w < x.key_len; w++) x.key[w] = json_integer_value(json_array_get(key, w));
        if (strncmp(str_of(e, "library_version"), major, strlen(major)) != 0) {
            other++;
            continue;
        }
        if (listed(o->ops, o->nops, x.op) && listed(o->devices, o->ndevices, x.device) && key_listed(o, &x)) d[k++] = x;
    }
    if (other) fprintf(stderr, "kerntune aot: %zu decision(s) of another library major version left out\n", other);
    qsort(d, k, sizeof *d, cmp_dec);
    return k;
}

/* What was written: one JSON line with --json, else a sentence. */
static void say_written(const aot_opts *o, size_t k, size_t ntables) {
    if (!o->json) {
        printf("%zu decision(s) of %zu device(s) written to %s.h and %s.c\n", k, ntables, o->out, o->out);
        return;
    }
    json_t *j = json_pack("{s:s+, s:s+, s:I, s:I}", "header", o->out, ".h", "source", o->out, ".c", "tables", (json_int_t)ntables,
                          "decisions", (json_int_t)k);
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    if (text) printf("%s\n", text);
    free(text);
    json_decref(j);
}

int run_aot(int argc, char **argv) {
    aot_opts o;
    int status = parse(argc, argv, &o);
    if (status != 0) return status;
    json_t *all = json_array();
    dec *d = all && gather(&o, all) ? calloc(json_array_size(all) + 1, sizeof *d) : NULL;
    if (d == NULL) {
        json_decref(all);
        return 1;
    }
    size_t k = select_decisions(&o, all, d), ntables = 0;
    char artdir[4096] = "";
    if (o.embed) { /* where tuning put the artifacts: the library's own default, unless told */
        kt_context *ctx = NULL;
        if (o.artifacts) snprintf(artdir, sizeof artdir, "%s", o.artifacts);
        else if (kt_context_create(&ctx) == KT_OK) snprintf(artdir, sizeof artdir, "%s", kt_context_artifact_dir(ctx));
        kt_context_destroy(ctx);
    }
    status = write_files(&o, artdir, d, k, kt_version_string(), &ntables);
    if (status == 0) say_written(&o, k, ntables);
    free(d);
    json_decref(all);
    return status;
}
