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
 */
#define _XOPEN_SOURCE 700 /* mkdtemp */
#define _DEFAULT_SOURCE
#include "report.h"

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

/* One result of a set, as the report needs it. */
typedef struct row {
    json_t *res;        /* the T4 result */
    char *config;       /* "name=value, ..." */
    const char *inv;    /* invalidity */
    bool ok;            /* measured and correct */
    double ms;          /* its time (ms), when ok */
    double cost_ms;     /* what measuring it cost: compiling, framework, validation, its runs */
    double order;       /* evaluation order */
} row;

typedef struct set {
    const report_input *in;
    row *rows;
    size_t n, nok;
    size_t *by_time;    /* indices of the ok rows, fastest first */
    const char *problem, *device;
    const json_t *ext;  /* the document's x-kerntune, or NULL */
    double scale_ms;    /* ms in one unit of its timeunit */
    long winner;        /* row index */
} set;

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

static double ms_of(const json_t *v, double scale_ms) { return json_is_number(v) ? json_number_value(v) * scale_ms : 0; }

static int cmp_time(const void *a, const void *b, void *rows) {
    const row *r = rows;
    double x = r[*(const size_t *)a].ms, y = r[*(const size_t *)b].ms;
    return (x > y) - (x < y);
}

/* qsort_r is a GNU extension: a small stable merge sort instead. */
static void sort_idx(size_t *idx, size_t n, int (*cmp)(const void *, const void *, void *), void *user) {
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
        if (idx) sort_idx(idx, s->n, by_stamp, s->rows);
        for (size_t i = 0; idx && i < s->n; i++) s->rows[idx[i]].order = (double)i;
        free(idx);
    }
    sort_idx(s->by_time, s->nok, cmp_time, s->rows);
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

static void esc(FILE *f, const char *s) {
    for (; s && *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

static void base64(FILE *f, const unsigned char *p, size_t n) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        fputc(tab[v >> 18 & 63], f);
        fputc(tab[v >> 12 & 63], f);
        fputc(i + 1 < n ? tab[v >> 6 & 63] : '=', f);
        fputc(i + 2 < n ? tab[v & 63] : '=', f);
    }
}

/* Runs gnuplot on script (in dir) and embeds the SVG it draws as an image; false with *err when
 * gnuplot cannot. */
static bool plot(FILE *html, const char *dir, const char *name, const char *script, const char *alt, char **err) {
    char *sp = cli_format("%s/%s.gp", dir, name), *svg = cli_format("%s/%s.svg", dir, name);
    FILE *f = sp ? fopen(sp, "w") : NULL;
    bool ok = f != NULL;
    if (f) {
        fprintf(f, "set terminal svg size 860,380 dynamic noenhanced font 'sans,11' background '#ffffff'\nset output '%s'\nset grid\n%s\n", svg, script);
        ok = fclose(f) == 0;
    }
    char *cmd = ok ? cli_format("gnuplot '%s' 2>'%s/%s.err'", sp, dir, name) : NULL;
    int rc = cmd ? system(cmd) : -1;
    free(cmd);
    size_t len = 0;
    unsigned char *data = NULL;
    FILE *in = rc == 0 ? fopen(svg, "rb") : NULL;
    if (in) {
        fseek(in, 0, SEEK_END);
        long l = ftell(in);
        fseek(in, 0, SEEK_SET);
        data = l > 0 ? malloc((size_t)l) : NULL;
        if (data && fread(data, 1, (size_t)l, in) == (size_t)l) len = (size_t)l;
        fclose(in);
    }
    if (len == 0) {
        *err = cli_format("gnuplot could not draw the plot '%s' (%s); is it installed? (scripts/install-deps.sh installs gnuplot-nox)",
                          name, rc == 0 ? "no output" : "it failed");
        free(data), free(sp), free(svg);
        return false;
    }
    fputs("<figure><img alt=\"", html);
    esc(html, alt);
    fputs("\" src=\"data:image/svg+xml;base64,", html);
    base64(html, data, len);
    fputs("\"><figcaption>", html);
    esc(html, alt);
    fputs("</figcaption></figure>\n", html);
    free(data), free(sp), free(svg);
    return true;
}

static FILE *data_file(const char *dir, const char *name) {
    char *p = cli_format("%s/%s.dat", dir, name);
    FILE *f = p ? fopen(p, "w") : NULL;
    free(p);
    return f;
}

static int by_order(const void *a, const void *b, void *u) {
    const row *r = u;
    double x = r[*(const size_t *)a].order, y = r[*(const size_t *)b].order;
    return (x > y) - (x < y);
}

/* The data file of set k's plot stem (name receives "<stem><k>", 64 bytes), or NULL. */
static FILE *set_data_file(const char *dir, char name[64], const char *stem, size_t k) {
    snprintf(name, 64, "%s%zu", stem, k);
    return data_file(dir, name);
}

/* Each parameter's effect: a candlestick of its values' times. Of set k, into h (plots under dir); false with *err on a failure. */
static bool report_param_effects(FILE *h, set *s, size_t k, const char *dir, char **err) {
    char name[64];
    FILE *d;
    char *sc;
    bool ok;
    /* each parameter's effect: the times of its values */
    const json_t *cfg0 = json_object_get(s->rows[s->by_time[0]].res, "configuration");
    const char *pname;
    json_t *pv;
    size_t pi = 0;
    json_object_foreach((json_t *)cfg0, pname, pv) {
        /* the distinct values, in order of first appearance among the measured */
        char *vals[64];
        size_t nv = 0;
        for (size_t i = 0; i < s->nok && nv < 64; i++) {
            char *v = t4_value_string(json_object_get(json_object_get(s->rows[s->by_time[i]].res, "configuration"), pname));
            bool seen = false;
            for (size_t q = 0; v && q < nv && !seen; q++) seen = strcmp(vals[q], v) == 0;
            if (v && !seen) vals[nv++] = v;
            else free(v);
        }
        if (nv > 1) {
            /* sort the values numerically where they are numbers */
            for (size_t a = 1; a < nv; a++)
                for (size_t b = a; b > 0 && strtod(vals[b], NULL) < strtod(vals[b - 1], NULL); b--) {
                    char *t = vals[b];
                    vals[b] = vals[b - 1], vals[b - 1] = t;
                }
            snprintf(name, sizeof name, "param%zu_%zu", k, pi);
            d = data_file(dir, name);
            /* per value: its times' quartiles, extremes and median (a candlestick), and how many */
            double *t = malloc(s->nok * sizeof *t);
            for (size_t q = 0; d && t && q < nv; q++) {
                size_t m = 0;
                for (size_t i = 0; i < s->nok; i++) {
                    char *v = t4_value_string(json_object_get(json_object_get(s->rows[s->by_time[i]].res, "configuration"), pname));
                    if (v && strcmp(vals[q], v) == 0) t[m++] = s->rows[s->by_time[i]].ms; /* by_time: already sorted */
                    free(v);
                }
                if (m == 0) continue;
#define QT(f) t[(size_t)((f) * (double)(m - 1) + 0.5)]
                fprintf(d, "%zu %.9g %.9g %.9g %.9g %.9g %zu\n", q, QT(0.0), QT(0.25), QT(0.5), QT(0.75), QT(1.0), m);
#undef QT
            }
            free(t);
            if (d) fclose(d);
            char *tics = cli_format("%s", "");
            for (size_t q = 0; tics && q < nv; q++) {
                char *more = cli_format("%s%s'%s' %zu", tics, q ? ", " : "", vals[q], q);
                free(tics);
                tics = more;
            }
            char *title = cli_format("Effect of %s: the times of the measured configurations with each of its values", pname);
            sc = tics ? cli_format("set logscale y\nset xtics (%s)\nset xrange [-0.6:%zu.6]\nset xlabel '%s'\nset ylabel 'time (ms)'\n"
                                   "set boxwidth 0.4\n"
                                   "plot '%s/%s.dat' using 1:3:2:6:5 with candlesticks whiskerbars lc rgb '#3060a0' "
                                   "title 'quartiles and extremes', '' using 1:4:4:4:4 with candlesticks lw 2 lc rgb '#a03030' "
                                   "title 'median'",
                                   tics, nv - 1, pname, dir, name)
                      : NULL;
            ok = sc && title && plot(h, dir, name, sc, title, err);
            free(sc), free(tics), free(title);
            if (!ok) {
                for (size_t q = 0; q < nv; q++) free(vals[q]);
                return false;
            }
        }
        for (size_t q = 0; q < nv; q++) free(vals[q]);
        pi++;
    }
    return true;
}

/* The race's finalists (else the fastest 20) with their confidence intervals. Of set k, into h (plots under dir); false with *err on a failure. */
static bool report_finalists(FILE *h, set *s, size_t k, const char *dir, char **err) {
    /* the race's finalists with their confidence intervals (kerntune's extension) */
    char name[64];
    FILE *d = set_data_file(dir, name, "ci", k);
    size_t nci = 0;
    size_t nfinal = 0; /* the race's finalists where it names two or more; else the fastest 20 */
    for (size_t i = 0; i < s->nok; i++)
        nfinal += json_is_true(json_object_get(json_object_get(s->rows[s->by_time[i]].res, "x-kerntune"), "finalist"));
    bool flagged = nfinal >= 2;
    for (size_t i = 0; d && i < s->nok && nci < 20; i++) {
        const json_t *x = json_object_get(s->rows[s->by_time[i]].res, "x-kerntune"), *ci = json_object_get(x, "ci_ms");
        if (json_array_size(ci) != 2 || (flagged && !json_is_true(json_object_get(x, "finalist")))) continue;
        fprintf(d, "%zu %.9g %.9g %.9g\n", ++nci, s->rows[s->by_time[i]].ms, json_number_value(json_array_get(ci, 0)),
                json_number_value(json_array_get(ci, 1)));
    }
    if (d) fclose(d);
    if (nci > 1) {
        char *sc = cli_format("set xlabel 'finalists, fastest first'\nset ylabel 'time (ms)'\nset xrange [0:%zu]\n"
                        "plot '%s/%s.dat' using 1:2:3:4 with yerrorbars pt 7 lc rgb '#307030' title 'mean and confidence interval'",
                        nci + 1, dir, name);
        bool ok = sc && plot(h, dir, name, sc, flagged ? "The race's finalists: their times with the confidence intervals it decided on"
                                                  : "The fastest configurations (the race's finalists and those it dropped last): their "
                                                    "times with their confidence intervals", err);
        free(sc);
        if (!ok) return false;
    }
    return true;
}

/* The roofline, where work formulas place the measured configurations. Of set k, into h (plots under dir); false with *err on a failure. */
static bool report_roofline(FILE *h, set *s, size_t k, const char *dir, char **err) {
    /* the roofline: where the work formulas (kerntune's x-kerntune flops and bytes) place each
     * measured configuration against the device's limits (given with --peak) */
    char name[64];
    FILE *d = set_data_file(dir, name, "roof", k);
    size_t nroof = 0;
    double ai_lo = INFINITY, ai_hi = 0;
    for (size_t i = 0; d && i < s->nok; i++) {
        const json_t *x = json_object_get(s->rows[s->by_time[i]].res, "x-kerntune");
        double fl = json_number_value(json_object_get(x, "flops")), by = json_number_value(json_object_get(x, "bytes"));
        double gf = json_number_value(json_object_get(x, "gflops"));
        if (!(fl > 0 && by > 0 && gf > 0)) continue;
        double ai = fl / by;
        fprintf(d, "%.9g %.9g %d\n", ai, gf, (long)s->by_time[i] == s->winner);
        ai_lo = fmin(ai_lo, ai), ai_hi = fmax(ai_hi, ai);
        nroof++;
    }
    if (d) fclose(d);
    if (nroof > 0) {
        double pf = json_number_value(json_object_get(s->ext, "peak_gflops")), pb = json_number_value(json_object_get(s->ext, "peak_gbs"));
        char *roof = pf > 0 && pb > 0 ? cli_format(", (x < %.9g / %.9g ? %.9g * x : %.9g) with lines lw 2 lc rgb '#707070' title "
                                                   "'peak: %g GFLOP/s, %g GB/s'", pf, pb, pb, pf, pf, pb)
                                      : cli_format("%s", "");
        char *sc = roof ? cli_format("set logscale xy\nset xrange [%.9g:%.9g]\nset xlabel 'arithmetic intensity (flop per byte)'\n"
                               "set ylabel 'GFLOP/s'\nset samples 400\n"
                               "plot '%s/%s.dat' using 1:($3 == 0 ? $2 : 1/0) with points pt 7 ps 0.5 lc rgb '#3060a0' title 'measured', "
                               "'' using 1:($3 == 1 ? $2 : 1/0) with points pt 9 ps 2 lc rgb '#a03030' title 'winner'%s",
                               ai_lo / 4, ai_hi * 4, dir, name, roof)
                  : NULL;
        bool ok = sc && plot(h, dir, name, sc, "Roofline: the measured configurations by their work formulas, against the device's peaks", err);
        free(sc), free(roof);
        if (!ok) return false;
    }
    return true;
}

/* The fastest ten configurations of set s: their launch and resources, a table into h. */
static void report_fastest_table(FILE *h, const set *s) {
    /* the top configurations' launch and resources, where recorded */
    fputs("<h3>The fastest configurations</h3>\n<table class=\"top\"><tr><th>rank</th><th>time (ms)</th><th>configuration</th><th>grid</th>"
          "<th>block</th><th>dynamic shared memory (bytes)</th><th>registers</th><th>static shared memory (bytes)</th>"
          "<th>local memory, spills (bytes)</th></tr>\n", h);
    for (size_t i = 0; i < s->nok && i < 10; i++) {
        row *r = &s->rows[s->by_time[i]];
        const json_t *g = json_object_get(r->res, "geometry");
        char *grid = json_dumps(json_object_get(g, "grid"), JSON_COMPACT | JSON_ENCODE_ANY);
        char *block = json_dumps(json_object_get(g, "block"), JSON_COMPACT | JSON_ENCODE_ANY);
        fprintf(h, "<tr><td>%zu</td><td>%.6g</td><td>", i + 1, r->ms);
        esc(h, r->config);
        fputs("</td><td>", h);
        esc(h, grid && g ? grid : "-");
        fputs("</td><td>", h);
        esc(h, block && g ? block : "-");
        const json_t *sm = json_object_get(g, "shared_memory"), *x = json_object_get(r->res, "x-kerntune");
        const char *const res[3] = {"registers", "static_shared_bytes", "local_bytes"};
        if (json_is_integer(sm)) fprintf(h, "</td><td>%lld", (long long)json_integer_value(sm));
        else fputs("</td><td>-", h);
        for (int q = 0; q < 3; q++) { /* what the compiler says the kernel uses, where the backend tells */
            const json_t *v = json_object_get(x, res[q]);
            if (json_is_integer(v)) fprintf(h, "</td><td>%lld", (long long)json_integer_value(v));
            else fputs("</td><td>-", h);
        }
        fputs("</td></tr>\n", h);
        free(grid), free(block);
    }
    fputs("</table>\n", h);
}

/* The plots and tables of one set. */
static bool write_set(FILE *h, set *s, size_t k, const char *dir, char **err) {
    char name[64];
    fprintf(h, "<section class=\"set\" id=\"set%zu\"><h2>", k);
    esc(h, s->device ? s->device : s->in->name);
    fputs("</h2>\n<table class=\"summary\">\n<tr><th>results</th><td>", h);
    esc(h, s->in->name);
    fputs("</td></tr>\n<tr><th>problem</th><td>", h);
    esc(h, s->problem ? s->problem : "(not named)");
    fprintf(h, "</td></tr>\n<tr><th>configurations</th><td>%zu tried: %zu measured", s->n, s->nok);
    /* failures by kind */
    const char *kinds[] = {"compile", "runtime", "timeout", "correctness", "constraints"};
    for (size_t q = 0; q < 5; q++) {
        size_t c = 0;
        for (size_t i = 0; i < s->n; i++) c += strcmp(s->rows[i].inv, kinds[q]) == 0;
        if (c) fprintf(h, ", %zu %s", c, kinds[q]);
    }
    fputs("</td></tr>\n", h);
    const json_t *stop = json_object_get(s->ext, "disagreement"); /* validation stopped the tuning */
    if (json_is_object(stop)) {
        fprintf(h, "<tr><th>stopped</th><td class=\"stopped\" id=\"stopped%zu\">", k);
        const char *m = json_string_value(json_object_get(stop, "message"));
        esc(h, m ? m : "most configurations disagreed with the reference");
        fputs("</td></tr>\n", h);
    }
    if (s->winner >= 0) {
        row *w = &s->rows[s->winner];
        fprintf(h, "<tr><th>winner</th><td><span class=\"winner\" id=\"winner%zu\">", k);
        esc(h, w->config);
        fprintf(h, "</span>: %.6g ms</td></tr>\n", w->ms);
        double next = INFINITY;
        for (size_t i = 0; i < s->nok; i++)
            if ((long)s->by_time[i] != s->winner) {
                next = s->rows[s->by_time[i]].ms;
                break;
            }
        if (isfinite(next)) fprintf(h, "<tr><th>runner-up</th><td>%.6g ms: the winner is %.2f%% faster</td></tr>\n", next, (next / w->ms - 1) * 100);
        const json_t *wx = json_object_get(w->res, "x-kerntune");
        if (json_is_number(json_object_get(wx, "gflops")) || json_is_number(json_object_get(wx, "gbs"))) {
            fputs("<tr><th>work of the winner</th><td>", h);
            double pf = json_number_value(json_object_get(s->ext, "peak_gflops")), pb = json_number_value(json_object_get(s->ext, "peak_gbs"));
            if (json_is_number(json_object_get(wx, "gflops"))) {
                double g = json_number_value(json_object_get(wx, "gflops"));
                fprintf(h, "%.4g GFLOP/s", g);
                if (pf > 0) fprintf(h, " (%.1f%% of the peak %g)", 100 * g / pf, pf);
            }
            if (json_is_number(json_object_get(wx, "gbs"))) {
                double g = json_number_value(json_object_get(wx, "gbs"));
                fprintf(h, "%s%.4g GB/s", json_is_number(json_object_get(wx, "gflops")) ? ", " : "", g);
                if (pb > 0) fprintf(h, " (%.1f%% of the peak %g)", 100 * g / pb, pb);
            }
            fputs("</td></tr>\n", h);
        }
        const json_t *conf = json_object_get(s->ext, "confidence");
        if (json_is_number(conf))
            fprintf(h, "<tr><th>confidence</th><td>%.4f that the winner is within the race's tolerance of every other</td></tr>\n",
                    json_number_value(conf));
    }
    double split[4] = {0, 0, 0, 0};
    for (size_t i = 0; i < s->n; i++) {
        const json_t *t = json_object_get(s->rows[i].res, "times");
        split[0] += ms_of(json_object_get(t, "compilation"), s->scale_ms);
        split[1] += ms_of(json_object_get(t, "validation"), s->scale_ms);
        split[2] += ms_of(json_object_get(t, "framework"), s->scale_ms);
        const json_t *rt = json_object_get(t, "runtimes");
        for (size_t q = 0; q < json_array_size(rt); q++) split[3] += ms_of(json_array_get(rt, q), s->scale_ms);
    }
    fprintf(h, "<tr><th>where the time went</th><td>compiling %.3g s, validating %.3g s, around the runs %.3g s, the runs %.3g s", split[0] / 1e3,
            split[1] / 1e3, split[2] / 1e3, split[3] / 1e3);
    const json_t *wall = json_object_get(s->ext, "wall_s");
    if (json_is_number(wall)) fprintf(h, "; the tuning took %.3g s of wall time", json_number_value(wall));
    fputs("</td></tr>\n</table>\n", h);
    if (s->nok > 0) {
        /* every measured configuration, sorted */
        snprintf(name, sizeof name, "sorted%zu", k);
        FILE *d = data_file(dir, name);
        for (size_t i = 0; d && i < s->nok; i++) fprintf(d, "%zu %.9g\n", i + 1, s->rows[s->by_time[i]].ms);
        if (d) fclose(d);
        char *sc = cli_format("set logscale y\nset xlabel 'configurations, fastest first'\nset ylabel 'time (ms)'\n"
                              "plot '%s/%s.dat' using 1:2 with lines lw 2 lc rgb '#3060a0' title 'measured'", dir, name);
        bool ok = sc && plot(h, dir, name, sc, "Time of every measured configuration, sorted", err);
        free(sc);
        if (!ok) return false;
        /* the best so far, over evaluations and over what they cost */
        size_t *idx = malloc(s->n * sizeof *idx);
        for (size_t i = 0; idx && i < s->n; i++) idx[i] = i;
        if (idx) sort_idx(idx, s->n, by_order, s->rows);
        snprintf(name, sizeof name, "best%zu", k);
        d = data_file(dir, name);
        /* over wall time where kerntune recorded when each was decided (x-kerntune.at_s), else
         * over what the evaluations cost, summed (another tool's T4: compiling, validating, runs) */
        bool wall = s->n > 0 && json_is_number(json_object_get(json_object_get(s->rows[0].res, "x-kerntune"), "at_s"));
        double best = INFINITY, spent = 0;
        for (size_t i = 0; d && idx && i < s->n; i++) {
            row *r = &s->rows[idx[i]];
            spent += r->cost_ms;
            double at = wall ? json_number_value(json_object_get(json_object_get(r->res, "x-kerntune"), "at_s")) : spent / 1e3;
            if (r->ok && r->ms < best) best = r->ms;
            if (isfinite(best)) fprintf(d, "%zu %.9g %.9g\n", i + 1, at, best);
        }
        if (d) fclose(d);
        free(idx);
        sc = cli_format("set logscale y\nset xlabel 'evaluations'\nset ylabel 'best so far (ms)'\n"
                        "plot '%s/%s.dat' using 1:3 with steps lw 2 lc rgb '#a03030' title 'best so far'", dir, name);
        ok = sc && plot(h, dir, name, sc, "The search's best so far over evaluations", err);
        free(sc);
        if (!ok) return false;
        char name2[64];
        snprintf(name2, sizeof name2, "bestt%zu", k);
        sc = cli_format("set logscale y\nset xlabel '%s'\nset ylabel 'best so far (ms)'\n"
                        "plot '%s/%s.dat' using 2:3 with steps lw 2 lc rgb '#a03030' title 'best so far'",
                        wall ? "seconds since the tuning began" : "seconds spent (compiling, validating, running)", dir, name);
        ok = sc && plot(h, dir, name2, sc, wall ? "The search's best so far over the tuning's wall time"
                                                : "The search's best so far over the time its evaluations cost", err);
        free(sc);
        if (!ok) return false;
        if (!report_param_effects(h, s, k, dir, err) || !report_finalists(h, s, k, dir, err) || !report_roofline(h, s, k, dir, err))
            return false;
        report_fastest_table(h, s);
    }
    /* every failure, with its kind and message */
    size_t nfail = s->n - s->nok;
    fprintf(h, "<h3>Failures (%zu)</h3>\n", nfail);
    if (nfail) {
        fputs("<table class=\"failures\"><tr><th>configuration</th><th>kind</th><th>message</th></tr>\n", h);
        for (size_t i = 0; i < s->n; i++) {
            row *r = &s->rows[i];
            if (r->ok) continue;
            fputs("<tr><td>", h);
            esc(h, r->config);
            fputs("</td><td>", h);
            const char *kind = json_string_value(json_object_get(json_object_get(r->res, "x-kerntune"), "outcome"));
            esc(h, kind ? kind : r->inv); /* kerntune's own kind (crashed, timeout...), else T4's class */
            fputs("</td><td><pre>", h);
            esc(h, json_string_value(json_object_get(r->res, "diagnostic")));
            fputs("</pre></td></tr>\n", h);
        }
        fputs("</table>\n", h);
    }
    /* every configuration */
    fprintf(h, "<h3>Every configuration (%zu)</h3>\n<table class=\"all\" id=\"all%zu\"><tr><th>rank</th><th>configuration</th><th>time (ms)</th>"
               "<th>result</th></tr>\n", s->n, k);
    for (size_t i = 0; i < s->nok; i++) {
        row *r = &s->rows[s->by_time[i]];
        fprintf(h, "<tr class=\"cfg\"><td>%zu</td><td>", i + 1);
        esc(h, r->config);
        fprintf(h, "</td><td>%.6g</td><td>correct</td></tr>\n", r->ms);
    }
    for (size_t i = 0; i < s->n; i++) {
        row *r = &s->rows[i];
        if (r->ok) continue;
        fputs("<tr class=\"cfg\"><td>-</td><td>", h);
        esc(h, r->config);
        fputs("</td><td>-</td><td>", h);
        esc(h, r->inv);
        fputs("</td></tr>\n", h);
    }
    fputs("</table>\n</section>\n", h);
    return true;
}

/* Several devices: the winners side by side, and each winner's time on the others. */
static void write_compare(FILE *h, set *sets, size_t n) {
    fputs("<section><h2>Winners side by side</h2>\n<table class=\"compare\"><tr><th>winner of</th><th>configuration</th>", h);
    for (size_t j = 0; j < n; j++) {
        fputs("<th>on ", h);
        esc(h, sets[j].device ? sets[j].device : sets[j].in->name);
        fputs("</th>", h);
    }
    fputs("</tr>\n", h);
    for (size_t i = 0; i < n; i++) {
        if (sets[i].winner < 0) continue;
        const row *w = &sets[i].rows[sets[i].winner];
        fputs("<tr><td>", h);
        esc(h, sets[i].device ? sets[i].device : sets[i].in->name);
        fputs("</td><td>", h);
        esc(h, w->config);
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
    esc(h, title ? title : problem);
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
    esc(h, title ? title : problem);
    fprintf(h, "</h1>\n<p>%zu set%s of results. Made by kerntune %s; plots by gnuplot.</p>\n", n, n == 1 ? "" : "s", kt_version_string());
    if (n > 1) write_compare(h, sets, n);
    for (size_t i = 0; i < n && err == NULL; i++)
        if (!write_set(h, &sets[i], i, dir, &err)) break;
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

int run_report(int argc, char **argv) {
    const char *output = NULL, *title = NULL, *cache = NULL, *op = NULL;
    const char *files[64];
    size_t nfiles = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            help_report(stdout);
            return 0;
        } else if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0 || strcmp(a, "--title") == 0 || strcmp(a, "--cache") == 0 ||
                   strcmp(a, "--op") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "kerntune report: %s needs a value\n", a);
                return 2;
            }
            if (strcmp(a, "--title") == 0) title = argv[++i];
            else if (strcmp(a, "--cache") == 0) cache = argv[++i];
            else if (strcmp(a, "--op") == 0) op = argv[++i];
            else output = argv[++i];
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "kerntune report: unknown option '%s' (see 'kerntune report --help')\n", a);
            return 2;
        } else if (nfiles == 64) {
            fprintf(stderr, "kerntune report: at most 64 result files\n");
            return 2;
        } else {
            files[nfiles++] = a;
        }
    }
    if ((nfiles == 0 && cache == NULL) || output == NULL) {
        fprintf(stderr, "kerntune report: %s (see 'kerntune report --help')\n",
                nfiles == 0 && cache == NULL ? "no results file given (or --cache PATH)" : "no -o REPORT.html given");
        return 2;
    }
    if (op && cache == NULL) {
        fprintf(stderr, "kerntune report: --op names decisions of the cache: give --cache PATH too\n");
        return 2;
    }
    report_input in[64] = {{0}};
    char *err = NULL;
    size_t loaded = 0;
    for (; loaded < nfiles && err == NULL; loaded++) {
        in[loaded].name = files[loaded];
        if ((in[loaded].doc = t4_load(files[loaded], &err)) == NULL) break;
    }
    size_t n = nfiles;
    if (err == NULL && cache) { /* the cache's decisions, each a set of results */
        kt_cache *c = NULL;
        char *text = NULL;
        json_t *doc = NULL;
        if (kt_cache_open(cache, &c) != KT_OK || kt_cache_export(c, op, NULL, &text) != KT_OK)
            err = cli_format("--cache %s: %s", cache, kt_last_error());
        else if ((doc = json_loads(text, 0, NULL)) == NULL)
            err = cli_format("--cache %s: its export cannot be read", cache);
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(doc, "entries"), i, e) {
            if (n == 64) break;
            in[n].name = cache;
            in[n++].doc = entry_document(e);
        }
        if (err == NULL && n == nfiles) err = cli_format("--cache %s: no decision%s%s in it", cache, op ? " of op " : "", op ? op : "");
        json_decref(doc);
        kt_free(text);
        kt_cache_close(c);
    }
    if (err == NULL) err = report_write(output, in, n, title);
    for (size_t i = 0; i < 64; i++) json_decref(in[i].doc); /* NULL for those not loaded */
    if (err) {
        fprintf(stderr, "kerntune report: %s\n", err);
        free(err);
        return 1;
    }
    return 0;
}
