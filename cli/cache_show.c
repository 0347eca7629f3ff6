/*
 * cache_show.c - `kerntune cache list|show|deferred|path|explain`: what the persistent cache
 * holds, read from the same wisdom document `export` writes, newest decisions first, as tables
 * or (--json) one document.
 */
#define _DEFAULT_SOURCE
#include "cache_int.h"
#include "text.h"

#include <kerntune.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
        cache_failed(o);
        return NULL;
    }
    json_error_t err;
    *doc = json_loads(text, 0, &err);
    kt_free(text);
    json_t *entries = *doc ? json_object_get(*doc, "entries") : NULL;
    if (!json_is_array(entries)) {
        cache_report(1, o->sub, "the cache's export cannot be read: %s", *doc ? "no entries" : err.text);
        json_decref(*doc);
        *doc = NULL;
        return NULL;
    }
    if (!by_age(entries)) {
        cache_report(1, o->sub, "out of memory");
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

/* A unix time as "2025-11-22 08:26:40 UTC" (with_seconds) or "2025-11-22 08:26"; the number
 * itself when it is not a representable time. */
static void format_created(json_t *v, char *buf, size_t len, bool with_seconds) {
    time_t t = (time_t)json_integer_value(v);
    struct tm tm;
    if (!json_is_integer(v) || gmtime_r(&t, &tm) == NULL ||
        strftime(buf, len, with_seconds ? "%Y-%m-%d %H:%M:%S UTC" : "%Y-%m-%d %H:%M", &tm) == 0)
        snprintf(buf, len, "%lld", (long long)json_integer_value(v));
}

int run_list(const opts *o, kt_cache *c) {
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
        cache_print_json(out);
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
        else status = cache_report(1, "list", "out of memory");
        table_free(&t);
    }
    json_decref(doc);
    return status;
}

int run_show(const opts *o, kt_cache *c) {
    json_t *doc;
    json_t *entries = load_entries(o, c, &doc);
    if (entries == NULL) return 1;
    int status = 0;
    if (o->json) {
        cache_print_json(entries);
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
        else status = cache_report(1, "show", "out of memory");
        table_free(&t);
    }
    json_decref(doc);
    return status;
}

int run_deferred(const opts *o, kt_cache *c) {
    char *text = NULL;
    if (kt_cache_deferred(c, o->op, o->device, &text) != KT_OK) {
        cache_failed(o);
        return 1;
    }
    json_error_t err;
    json_t *doc = json_loads(text, 0, &err);
    kt_free(text);
    json_t *entries = doc ? json_object_get(doc, "entries") : NULL;
    if (!json_is_array(entries)) {
        int st = cache_report(1, o->sub, "the cache's list of deferred keys cannot be read: %s", doc ? "no entries" : err.text);
        json_decref(doc);
        return st;
    }
    int status = 0;
    if (o->json) {
        cache_print_json(entries);
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
        else status = cache_report(1, "deferred", "out of memory");
        table_free(&t);
    }
    json_decref(doc);
    return status;
}

int run_path(const opts *o, kt_cache *c) {
    const char *w = kt_cache_warning(c);
    if (o->json) {
        json_t *v = json_object();
        json_object_set_new(v, "path", json_string(kt_cache_path(c)));
        json_object_set_new(v, "warning", *w ? json_string(w) : json_null());
        cache_print_json(v);
        json_decref(v);
        return 0;
    }
    printf("%s\n", kt_cache_path(c));
    if (*w) printf("warning: %s\n", w);
    return 0;
}

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

int run_explain(const opts *o, kt_cache *c) {
    int64_t key[16];
    size_t nkey = 0;
    char why[256];
    if (!parse_key(o->key, key, sizeof key / sizeof key[0], &nkey, why, sizeof why)) return cache_usage(o->sub, "%s", why);
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
                int st = cache_usage(o->sub, "decisions of op '%s' were made on several devices ('%.80s', '%.80s'...): give --device FP", o->op,
                               device, d);
                json_decref(doc);
                return st;
            }
        }
        if (device == NULL) {
            json_decref(doc);
            return cache_report(1, o->sub, "the cache holds no decision of op '%s' (of this library version): every key gets the op's default", o->op);
        }
    }
    char *text = NULL;
    kt_status st = kt_cache_explain(c, o->op, device, o->arch, o->vendor, key, nkey, &text);
    json_decref(doc); /* device pointed into it */
    if (st != KT_OK) return cache_failed(o);
    json_t *x = json_loads(text, 0, NULL);
    kt_free(text);
    if (x == NULL) return cache_report(1, o->sub, "out of memory");
    if (o->json) {
        cache_print_json(x);
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
            return cache_report(1, o->sub, "out of memory");
        }
    }
    json_decref(x);
    return 0;
}
