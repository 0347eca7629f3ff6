/*
 * report.c - `kerntune report` and `kerntune tune --report`: one HTML file of tuning results.
 *
 * Everything is inline: the style, the tables, and the plots, which gnuplot's SVG terminal draws
 * from data files written to a temporary directory and which the page embeds as data: images
 * (each its own document, so gnuplot's element ids never clash). The page has no script and
 * loads nothing: readable offline, printable. What it shows of one set of results (a T4 file,
 * kerntune's or another tool's): a summary (problem, device, winner, its margin over the
 * runner-up, the decision's confidence, where the time went), every measured configuration's
 * time sorted, the best so far over evaluations and over the time they cost, each parameter's
 * effect, the finalists' confidence intervals (kerntune's T4 extension "x-kerntune"), the top
 * configurations' launch geometry and shared memory, every failure with its kind and message,
 * and every configuration. Several sets of one problem (several devices): their winners side by
 * side, and each winner's time on the other devices where they measured it.
 *
 * This file reads the sets and writes the page around them; report_set.c writes each set.
 */
#define _XOPEN_SOURCE 700 /* mkdtemp */
#define _DEFAULT_SOURCE
#include "report_int.h"

#include "t4.h"
#include "text.h"

#include <kerntune.h>
#include <kerntune/cache.h>

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char *fmt_config(const json_t *cfg) {
    char *out = cli_format("%s", "");
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)cfg, k, v) {
        char *val = t4_value_string(v);
        char *more = out && val ? cli_format("%s%s%s=%s", out, *out ? ", " : "", k, val) : NULL;
        free(out), free(val);
        out = more;
    }
    return out;
}

static int cmp_time(const void *a, const void *b, void *rows) {
    const row *r = rows;
    double x = r[*(const size_t *)a].ms, y = r[*(const size_t *)b].ms;
    return (x > y) - (x < y);
}

/* qsort_r is a GNU extension: a small stable merge sort instead. */
void report_sort_idx(size_t *idx, size_t n, int (*cmp)(const void *, const void *, void *), void *user) {
    if (n < 2) return;
    size_t *tmp = malloc(n * sizeof *tmp);
    if (tmp == NULL) return;
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n, i = lo, j = mid, k = lo;
            while (i < mid && j < hi) tmp[k++] = cmp(&idx[j], &idx[i], user) < 0 ? idx[j++] : idx[i++];
            while (i < mid) tmp[k++] = idx[i++];
            while (j < hi) tmp[k++] = idx[j++];
        }
        memcpy(idx, tmp, n * sizeof *idx);
    }
    free(tmp);
}

static int by_stamp(const void *a, const void *b, void *u);

static void set_free(set *s) {
    for (size_t i = 0; i < s->n; i++) free(s->rows[i].config);
    free(s->rows);
    free(s->by_time);
}

/* Reads one input into s; NULL or the error (allocated). */
static char *set_read(set *s, const report_input *in) {
    memset(s, 0, sizeof *s);
    s->in = in;
    s->winner = -1;
    const json_t *results = json_object_get(in->doc, "results"), *meta = json_object_get(in->doc, "metadata");
    if (!json_is_array(results)) return cli_format("%s: no \"results\" array: not a T4 document", in->name);
    s->problem = json_string_value(json_object_get(meta, "problem"));
    s->device = json_string_value(json_object_get(meta, "device"));
    s->ext = json_object_get(in->doc, "x-kerntune");
    double scale_ms = s->scale_ms = t4_unit_ns(json_string_value(json_object_get(meta, "timeunit"))) / 1e6;
    s->n = json_array_size(results);
    s->rows = calloc(s->n ? s->n : 1, sizeof *s->rows);
    s->by_time = calloc(s->n ? s->n : 1, sizeof *s->by_time);
    if (s->rows == NULL || s->by_time == NULL) return cli_format("out of memory");
    for (size_t i = 0; i < s->n; i++) {
        row *r = &s->rows[i];
        r->res = json_array_get(results, i);
        r->config = fmt_config(json_object_get(r->res, "configuration"));
        if (r->config == NULL) return cli_format("out of memory");
        r->inv = json_string_value(json_object_get(r->res, "invalidity"));
        if (r->inv == NULL) r->inv = "unknown";
        const json_t *m = json_array_get(json_object_get(r->res, "measurements"), 0), *times = json_object_get(r->res, "times");
        double unit = json_string_value(json_object_get(m, "unit")) ? t4_unit_ns(json_string_value(json_object_get(m, "unit"))) / 1e6 : scale_ms;
        r->ok = strcmp(r->inv, "correct") == 0 && json_is_number(json_object_get(m, "value"));
        r->ms = r->ok ? json_number_value(json_object_get(m, "value")) * unit : INFINITY;
        double runs = 0;
        const json_t *rt = json_object_get(times, "runtimes");
        for (size_t k = 0; k < json_array_size(rt); k++) runs += ms_of(json_array_get(rt, k), scale_ms);
        r->cost_ms = ms_of(json_object_get(times, "compilation"), scale_ms) + ms_of(json_object_get(times, "framework"), scale_ms) +
                     ms_of(json_object_get(times, "validation"), scale_ms) + runs;
        const json_t *order = json_object_get(json_object_get(r->res, "x-kerntune"), "order");
        r->order = json_is_number(order) ? json_number_value(order) : (double)i;
        if (r->ok) s->by_time[s->nok++] = i;
    }
    /* without kerntune's evaluation order, the timestamps give it (ISO text sorts by time) */
    bool ordered = s->n > 0 && json_is_number(json_object_get(json_object_get(s->rows[0].res, "x-kerntune"), "order"));
    if (!ordered && s->n > 0 && json_is_string(json_object_get(s->rows[0].res, "timestamp"))) {
        size_t *idx = malloc(s->n * sizeof *idx);
        for (size_t i = 0; idx && i < s->n; i++) idx[i] = i;
        if (idx) report_sort_idx(idx, s->n, by_stamp, s->rows);
        for (size_t i = 0; idx && i < s->n; i++) s->rows[idx[i]].order = (double)i;
        free(idx);
    }
    report_sort_idx(s->by_time, s->nok, cmp_time, s->rows);
    /* the winner: as the tuning decided it (kerntune's extension), else the fastest */
    for (size_t i = 0; i < s->n && s->winner < 0; i++)
        if (s->rows[i].ok && json_is_true(json_object_get(json_object_get(s->rows[i].res, "x-kerntune"), "winner"))) s->winner = (long)i;
    if (s->winner < 0 && s->nok > 0) s->winner = (long)s->by_time[0];
    return NULL;
}

static int by_stamp(const void *a, const void *b, void *u) {
    const row *r = u;
    const char *x = json_string_value(json_object_get(r[*(const size_t *)a].res, "timestamp"));
    const char *y = json_string_value(json_object_get(r[*(const size_t *)b].res, "timestamp"));
    return strcmp(x ? x : "", y ? y : "");
}

/* ---- writing ------------------------------------------------------------------------------------ */

/* Several devices: the winners side by side, and each winner's time on the others. */
static void write_compare(FILE *h, set *sets, size_t n) {
    fputs("<section><h2>Winners side by side</h2>\n<table class=\"compare\"><tr><th>winner of</th><th>configuration</th>", h);
    for (size_t j = 0; j < n; j++) {
        fputs("<th>on ", h);
        report_esc(h, sets[j].device ? sets[j].device : sets[j].in->name);
        fputs("</th>", h);
    }
    fputs("</tr>\n", h);
    for (size_t i = 0; i < n; i++) {
        if (sets[i].winner < 0) continue;
        const row *w = &sets[i].rows[sets[i].winner];
        fputs("<tr><td>", h);
        report_esc(h, sets[i].device ? sets[i].device : sets[i].in->name);
        fputs("</td><td>", h);
        report_esc(h, w->config);
        fputs("</td>", h);
        for (size_t j = 0; j < n; j++) {
            const row *there = NULL;
            for (size_t q = 0; q < sets[j].n && there == NULL; q++)
                if (strcmp(sets[j].rows[q].config, w->config) == 0) there = &sets[j].rows[q];
            double best = sets[j].nok ? sets[j].rows[sets[j].by_time[0]].ms : INFINITY;
            if (there && there->ok) fprintf(h, "<td>%.6g ms (%.3fx its best)</td>", there->ms, there->ms / best);
            else if (there) fprintf(h, "<td>%s</td>", there->inv);
            else fputs("<td>not measured</td>", h);
        }
        fputs("</tr>\n", h);
    }
    fputs("</table></section>\n", h);
}

char *report_write(const char *path, const report_input *inputs, size_t n, const char *title) {
    set *sets = calloc(n ? n : 1, sizeof *sets);
    char *err = NULL, dir[] = "/tmp/kerntune-report-XXXXXX";
    bool dir_made = false;
    char *tmp = cli_format("%s.tmp-%ld", path, (long)getpid());
    FILE *h = NULL;
    if (sets == NULL || tmp == NULL) {
        err = cli_format("out of memory");
        goto out;
    }
    for (size_t i = 0; i < n && err == NULL; i++) err = set_read(&sets[i], &inputs[i]);
    if (err) goto out;
    if (mkdtemp(dir) == NULL) {
        err = cli_format("cannot create a temporary directory: %s", strerror(errno));
        goto out;
    }
    dir_made = true;
    if ((h = fopen(tmp, "w")) == NULL) {
        err = cli_format("%s: cannot be written: %s", path, strerror(errno));
        goto out;
    }
    const char *problem = sets[0].problem ? sets[0].problem : "tuning results";
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>", h);
    report_esc(h, title ? title : problem);
    fputs("</title>\n<style>\n"
          "body{font-family:sans-serif;margin:2em;color:#222;max-width:72em}\n"
          "table{border-collapse:collapse;margin:0.5em 0 1.5em}\n"
          "td,th{border:1px solid #bbb;padding:0.2em 0.5em;text-align:left;vertical-align:top;font-size:0.9em}\n"
          "th{background:#eee}\n"
          "pre{margin:0;white-space:pre-wrap;font-size:0.85em}\n"
          "figure{margin:1em 0;page-break-inside:avoid}\n"
          "figure img{max-width:100%;border:1px solid #ddd}\n"
          ".winner{font-weight:bold}\n"
          "@media print{body{margin:0}section{page-break-before:always}}\n"
          "</style>\n</head>\n<body>\n<h1>", h);
    report_esc(h, title ? title : problem);
    fprintf(h, "</h1>\n<p>%zu set%s of results. Made by kerntune %s; plots by gnuplot.</p>\n", n, n == 1 ? "" : "s", kt_version_string());
    if (n > 1) write_compare(h, sets, n);
    for (size_t i = 0; i < n && err == NULL; i++)
        if (!report_write_set(h, &sets[i], i, dir, &err)) break;
    fputs("</body>\n</html>\n", h);
    if (err == NULL && (ferror(h) || fflush(h) != 0)) err = cli_format("%s: cannot be written: %s", path, strerror(errno));
    if (fclose(h) != 0 && err == NULL) err = cli_format("%s: cannot be written: %s", path, strerror(errno));
    h = NULL;
    if (err == NULL && rename(tmp, path) != 0) err = cli_format("%s: cannot be written: %s", path, strerror(errno));
out:
    if (h) fclose(h);
    if (tmp) unlink(tmp);
    free(tmp);
    if (dir_made) cli_remove_tree(dir);
    for (size_t i = 0; sets && i < n; i++) set_free(&sets[i]);
    free(sets);
    return err;
}

/* ---- decisions from the cache, as T4 documents ---------------------------------------------------- */

/* A configuration text ("A=1,B=x") as a T4 configuration object (numbers where they read as
 * numbers); a native candidate, which has none, as {"candidate": NAME}. */
static json_t *config_object(const char *text, const char *candidate) {
    json_t *o = json_object();
    if (text == NULL) {
        json_object_set_new(o, "candidate", json_string(candidate ? candidate : "?"));
        return o;
    }
    char *copy = cli_format("%s", text);
    for (char *p = copy, *save = NULL, *tok; copy && (tok = strtok_r(p, ",", &save)) != NULL; p = NULL) {
        char *eq = strchr(tok, '=');
        if (eq == NULL) continue;
        *eq = '\0';
        char *end;
        long long i = strtoll(eq + 1, &end, 10);
        if (*end == '\0' && end != eq + 1) json_object_set_new(o, tok, json_integer(i));
        else {
            double f = strtod(eq + 1, &end);
            json_object_set_new(o, tok, *end == '\0' && end != eq + 1 ? json_real(f) : json_string(eq + 1));
        }
    }
    free(copy);
    return o;
}

/* One cached decision (an entry of kt_cache_export) as a T4 document: its units, their times,
 * intervals and failures (the cache keeps no runs). */
static json_t *entry_document(const json_t *e) {
    static const char *const inv[][2] = {{"measured", "correct"}, {"build_failed", "compile"}, {"failed", "runtime"},
                                         {"crashed", "runtime"},  {"timeout", "timeout"},      {"invalid", "correctness"},
                                         {"rejected", "constraints"}};
    json_t *results = json_array();
    const json_t *w = json_object_get(e, "winner");
    size_t i;
    json_t *u;
    json_array_foreach(json_object_get(e, "units"), i, u) {
        const char *oc = json_string_value(json_object_get(u, "outcome")), *t4inv = NULL;
        for (size_t k = 0; oc && k < sizeof inv / sizeof inv[0]; k++)
            if (strcmp(oc, inv[k][0]) == 0) t4inv = inv[k][1];
        if (t4inv == NULL) continue; /* not run */
        const char *cand = json_string_value(json_object_get(u, "candidate")), *cfg = json_string_value(json_object_get(u, "config"));
        json_t *r = json_object(), *x = json_object(), *m = json_object();
        json_object_set_new(r, "configuration", config_object(cfg, cand));
        json_object_set_new(r, "invalidity", json_string(t4inv));
        double ns = json_number_value(json_object_get(u, "time_ns"));
        json_object_set_new(m, "name", json_string("time"));
        json_object_set_new(m, "value", strcmp(t4inv, "correct") == 0 ? json_real(ns / 1e6) : json_string("InvalidConfig"));
        json_object_set_new(m, "unit", json_string("ms"));
        json_object_set_new(r, "measurements", json_pack("[o]", m));
        json_object_set_new(r, "times", json_object());
        const char *msg = json_string_value(json_object_get(u, "message"));
        if (msg) json_object_set_new(r, "diagnostic", json_string(msg));
        json_object_set_new(x, "outcome", json_string(oc));
        const json_t *ci = json_object_get(u, "ci_ns");
        if (json_array_size(ci) == 2)
            json_object_set_new(x, "ci_ms", json_pack("[f,f]", json_number_value(json_array_get(ci, 0)) / 1e6, json_number_value(json_array_get(ci, 1)) / 1e6));
        if (json_is_true(json_object_get(u, "finalist"))) json_object_set_new(x, "finalist", json_true());
        const char *wc = json_string_value(json_object_get(w, "candidate")), *wcfg = json_string_value(json_object_get(w, "config"));
        if (wc && cand && strcmp(wc, cand) == 0 && ((wcfg == NULL && cfg == NULL) || (wcfg && cfg && strcmp(wcfg, cfg) == 0)))
            json_object_set_new(x, "winner", json_true());
        json_object_set_new(r, "x-kerntune", x);
        json_array_append_new(results, r);
    }
    char *key = json_dumps(json_object_get(e, "key"), JSON_COMPACT | JSON_ENCODE_ANY);
    char *problem = cli_format("%s, key %s", json_string_value(json_object_get(e, "op")), key ? key : "?");
    const char *fp = json_string_value(json_object_get(e, "device"));
    json_t *doc = json_pack("{s:s,s:{s:s,s:s?,s:s},s:o,s:{s:O?}}", "schema_version", "1.0.0", "metadata", "problem", problem ? problem : "?",
                            "device", fp, "timeunit", "milliseconds", "results", results, "x-kerntune", "confidence",
                            json_object_get(e, "confidence"));
    free(key), free(problem);
    return doc;
}

/* ---- the command -------------------------------------------------------------------------------- */

void help_report(FILE *out) {
    fprintf(out,
            "usage: kerntune report RESULTS.json [MORE.json...] -o REPORT.html [--title TEXT]\n"
            "       kerntune report --cache PATH [--op NAME] -o REPORT.html\n"
            "\n"
            "Writes one self-contained HTML page of tuning results: T4 files (gzip or plain; from\n"
            "'kerntune tune --t4', Kernel Tuner or benchmark_hub), one per device for one problem.\n"
            "It shows a summary (winner, its margin over the runner-up, confidence, where the time\n"
            "went), the time of every measured configuration, the search's best so far over\n"
            "evaluations and over time, each parameter's effect, the race's finalists with their\n"
            "confidence intervals, the fastest configurations' launch, every failure with its kind\n"
            "and message, and every configuration; given several devices' results, their winners\n"
            "side by side. Plots are drawn by gnuplot (SVG) and embedded: the page loads nothing.\n"
            "'kerntune tune PROBLEM --report REPORT.html' writes the same for a run.\n"
            "\n"
            "options:\n"
            "  -o, --output FILE   the HTML file to write (replaced atomically)\n"
            "  --title TEXT        the page's title (default: the problem's name)\n"
            "  --cache PATH        also the decisions in this cache file, each with every unit it\n"
            "                      considered (times and intervals; the cache keeps no runs)\n"
            "  --op NAME           of the cache, only this op's decisions\n"
            "  -h, --help          print this help\n");
}

/* kerntune report's arguments. */
typedef struct report_args {
    const char *output, *title, *cache, *op;
    const char *files[64];
    size_t nfiles;
} report_args;

/* Reads the arguments into r: 0 to go on, -1 after --help, 2 on a usage error (said). */
static int report_parse(int argc, char **argv, report_args *r) {
    memset(r, 0, sizeof *r);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            help_report(stdout);
            return -1;
        } else if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0 || strcmp(a, "--title") == 0 || strcmp(a, "--cache") == 0 ||
                   strcmp(a, "--op") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "kerntune report: %s needs a value\n", a);
                return 2;
            }
            if (strcmp(a, "--title") == 0) r->title = argv[++i];
            else if (strcmp(a, "--cache") == 0) r->cache = argv[++i];
            else if (strcmp(a, "--op") == 0) r->op = argv[++i];
            else r->output = argv[++i];
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "kerntune report: unknown option '%s' (see 'kerntune report --help')\n", a);
            return 2;
        } else if (r->nfiles == 64) {
            fprintf(stderr, "kerntune report: at most 64 result files\n");
            return 2;
        } else {
            r->files[r->nfiles++] = a;
        }
    }
    if ((r->nfiles == 0 && r->cache == NULL) || r->output == NULL) {
        fprintf(stderr, "kerntune report: %s (see 'kerntune report --help')\n",
                r->nfiles == 0 && r->cache == NULL ? "no results file given (or --cache PATH)" : "no -o REPORT.html given");
        return 2;
    }
    if (r->op && r->cache == NULL) {
        fprintf(stderr, "kerntune report: --op names decisions of the cache: give --cache PATH too\n");
        return 2;
    }
    return 0;
}

/* The cache's decisions (of --op, when given), each a set of results, appended to in (*n of 64);
 * NULL or the error (allocated). */
static char *cache_inputs(const report_args *r, report_input *in, size_t *n) {
    kt_cache *c = NULL;
    char *text = NULL, *err = NULL;
    json_t *doc = NULL;
    size_t before = *n;
    if (kt_cache_open(r->cache, &c) != KT_OK || kt_cache_export(c, r->op, NULL, &text) != KT_OK)
        err = cli_format("--cache %s: %s", r->cache, kt_last_error());
    else if ((doc = json_loads(text, 0, NULL)) == NULL)
        err = cli_format("--cache %s: its export cannot be read", r->cache);
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(doc, "entries"), i, e) {
        if (*n == 64) break;
        in[*n].name = r->cache;
        in[(*n)++].doc = entry_document(e);
    }
    if (err == NULL && *n == before)
        err = cli_format("--cache %s: no decision%s%s in it", r->cache, r->op ? " of op " : "", r->op ? r->op : "");
    json_decref(doc);
    kt_free(text);
    kt_cache_close(c);
    return err;
}

int run_report(int argc, char **argv) {
    report_args r;
    int st = report_parse(argc, argv, &r);
    if (st != 0) return st < 0 ? 0 : st;
    report_input in[64] = {{0}};
    char *err = NULL;
    for (size_t i = 0; i < r.nfiles && err == NULL; i++) {
        in[i].name = r.files[i];
        in[i].doc = t4_load(r.files[i], &err);
    }
    size_t n = r.nfiles;
    if (err == NULL && r.cache) err = cache_inputs(&r, in, &n);
    if (err == NULL) err = report_write(r.output, in, n, r.title);
    for (size_t i = 0; i < 64; i++) json_decref(in[i].doc); /* NULL for those not loaded */
    if (err) {
        fprintf(stderr, "kerntune report: %s\n", err);
        free(err);
        return 1;
    }
    return 0;
}
