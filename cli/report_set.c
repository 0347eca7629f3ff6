/*
 * report_set.c - one set of results as a section of the report's page (report_write_set): its
 * summary, the plots gnuplot draws for it (embedded as data: images), each parameter's effect,
 * the finalists, the roofline, the fastest configurations' launch geometry, its failures and
 * every configuration. report.c reads the sets and writes the page around them.
 */
#define _XOPEN_SOURCE 700
#define _DEFAULT_SOURCE
#include "report_int.h"

#include "t4.h"
#include "text.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void report_esc(FILE *f, const char *s) {
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
    report_esc(html, alt);
    fputs("\" src=\"data:image/svg+xml;base64,", html);
    base64(html, data, len);
    fputs("\"><figcaption>", html);
    report_esc(html, alt);
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
        report_esc(h, r->config);
        fputs("</td><td>", h);
        report_esc(h, grid && g ? grid : "-");
        fputs("</td><td>", h);
        report_esc(h, block && g ? block : "-");
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

/* Set k's summary table, up to the winner: where it came from, what was tried and how it failed,
 * and whether validation stopped the tuning. */
static void write_set_head(FILE *h, const set *s, size_t k) {
    fprintf(h, "<section class=\"set\" id=\"set%zu\"><h2>", k);
    report_esc(h, s->device ? s->device : s->in->name);
    fputs("</h2>\n<table class=\"summary\">\n<tr><th>results</th><td>", h);
    report_esc(h, s->in->name);
    fputs("</td></tr>\n<tr><th>problem</th><td>", h);
    report_esc(h, s->problem ? s->problem : "(not named)");
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
        report_esc(h, m ? m : "most configurations disagreed with the reference");
        fputs("</td></tr>\n", h);
    }
}

/* The winner's rows of the summary: its time, its margin, its work against the peaks, the
 * decision's confidence. */
static void write_winner(FILE *h, const set *s, size_t k) {
    if (s->winner < 0) return;
    row *w = &s->rows[s->winner];
    fprintf(h, "<tr><th>winner</th><td><span class=\"winner\" id=\"winner%zu\">", k);
    report_esc(h, w->config);
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

/* The summary's last row: where the time went, summed over the configurations. */
static void write_time_split(FILE *h, const set *s) {
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
}

/* The sorted times and the best so far over evaluations and over time: false with *err when a
 * plot cannot be drawn. */
static bool report_progress(FILE *h, set *s, size_t k, const char *dir, char **err) {
    char name[64];
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
    if (idx) report_sort_idx(idx, s->n, by_order, s->rows);
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
    return true;
}

/* Every failure, with its kind and message. */
static void write_failures(FILE *h, const set *s) {
    size_t nfail = s->n - s->nok;
    fprintf(h, "<h3>Failures (%zu)</h3>\n", nfail);
    if (nfail) {
        fputs("<table class=\"failures\"><tr><th>configuration</th><th>kind</th><th>message</th></tr>\n", h);
        for (size_t i = 0; i < s->n; i++) {
            row *r = &s->rows[i];
            if (r->ok) continue;
            fputs("<tr><td>", h);
            report_esc(h, r->config);
            fputs("</td><td>", h);
            const char *kind = json_string_value(json_object_get(json_object_get(r->res, "x-kerntune"), "outcome"));
            report_esc(h, kind ? kind : r->inv); /* kerntune's own kind (crashed, timeout...), else T4's class */
            fputs("</td><td><pre>", h);
            report_esc(h, json_string_value(json_object_get(r->res, "diagnostic")));
            fputs("</pre></td></tr>\n", h);
        }
        fputs("</table>\n", h);
    }
}

/* Every configuration: the measured ones by rank, then the others with their invalidity. */
static void write_every_configuration(FILE *h, const set *s, size_t k) {
    fprintf(h, "<h3>Every configuration (%zu)</h3>\n<table class=\"all\" id=\"all%zu\"><tr><th>rank</th><th>configuration</th><th>time (ms)</th>"
               "<th>result</th></tr>\n", s->n, k);
    for (size_t i = 0; i < s->nok; i++) {
        row *r = &s->rows[s->by_time[i]];
        fprintf(h, "<tr class=\"cfg\"><td>%zu</td><td>", i + 1);
        report_esc(h, r->config);
        fprintf(h, "</td><td>%.6g</td><td>correct</td></tr>\n", r->ms);
    }
    for (size_t i = 0; i < s->n; i++) {
        row *r = &s->rows[i];
        if (r->ok) continue;
        fputs("<tr class=\"cfg\"><td>-</td><td>", h);
        report_esc(h, r->config);
        fputs("</td><td>-</td><td>", h);
        report_esc(h, r->inv);
        fputs("</td></tr>\n", h);
    }
}

/* The plots and tables of one set. */
bool report_write_set(FILE *h, set *s, size_t k, const char *dir, char **err) {
    write_set_head(h, s, k);
    write_winner(h, s, k);
    write_time_split(h, s);
    if (s->nok > 0) {
        if (!report_progress(h, s, k, dir, err) || !report_param_effects(h, s, k, dir, err) || !report_finalists(h, s, k, dir, err) ||
            !report_roofline(h, s, k, dir, err))
            return false;
        report_fastest_table(h, s);
    }
    write_failures(h, s);
    write_every_configuration(h, s, k);
    fputs("</table>\n</section>\n", h);
    return true;
}
