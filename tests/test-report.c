/*
 * test-report.c - `kerntune report` and `kerntune tune --report` (issue [15]): the HTML page of
 * a replayed benchmark_hub run holds every configuration and the run's winner (read back from
 * the HTML), loads nothing from anywhere (no URL, no script, every image a data: URI), and a
 * real headless Chromium renders it without console errors into a PNG that is not blank
 * (decoded here). Several devices' results: their winners side by side. Errors name their cause.
 */
#define _GNU_SOURCE /* popen */
#include "helpers.h"
#include "hub.h"

#include <jansson.h>
#include <stdbool.h>
#include <zlib.h>

#include <math.h>
#include <sys/stat.h>
#include <sys/wait.h>

static char dir[64], db[128];

static int setup(void **state) {
    (void)state;
    return temp_cache_dir(dir, sizeof dir, db, sizeof db, "report");
}

static int teardown(void **state) {
    (void)state;
    return remove_tree(dir);
}

/* The file's contents (allocated, NUL-terminated). */
static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) fail_msg("%s: cannot be read", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    if (len) *len = (size_t)n;
    return buf;
}

static size_t count(const char *hay, const char *needle) {
    size_t n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

/* The page loads nothing: no URL anywhere, no script, stylesheet link or frame, and every
 * src= a data: URI. */
static void assert_self_contained(const char *html) {
    assert_null(strstr(html, "http://"));
    assert_null(strstr(html, "https://"));
    assert_null(strstr(html, "//cdn"));
    assert_null(strstr(html, "<script"));
    assert_null(strstr(html, "<link"));
    assert_null(strstr(html, "<iframe"));
    assert_null(strstr(html, "url("));
    assert_null(strstr(html, "@import"));
    for (const char *p = strstr(html, "src=\""); p; p = strstr(p + 1, "src=\"")) assert_int_equal(strncmp(p, "src=\"data:", 10), 0);
    for (const char *p = strstr(html, "href=\""); p; p = strstr(p + 1, "href=\"")) assert_int_equal(p[6], '#');
}

/* ---- PNG: decoded enough to count the pixels that are not background ------------------------- */

static uint32_t be32(const unsigned char *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }

static int paeth(int a, int b, int c) {
    int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
    return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

/* The fraction of the PNG's pixels that are not (near) white; -1 when it is not a PNG this reads
 * (8-bit RGB or RGBA, not interlaced). */
static double ink_fraction(const char *path) {
    size_t len;
    unsigned char *png = (unsigned char *)slurp(path, &len);
    double ink = -1;
    uint32_t w = 0, h = 0;
    int channels = 0;
    unsigned char *idat = NULL;
    size_t nidat = 0;
    if (len < 8 || memcmp(png, "\x89PNG\r\n\x1a\n", 8) != 0) goto out;
    for (size_t at = 8; at + 12 <= len;) {
        uint32_t n = be32(png + at);
        const unsigned char *type = png + at + 4, *data = png + at + 8;
        if (at + 12 + n > len) goto out;
        if (memcmp(type, "IHDR", 4) == 0) {
            w = be32(data), h = be32(data + 4);
            if (data[8] != 8 || data[12] != 0 || (data[9] != 2 && data[9] != 6)) goto out;
            channels = data[9] == 2 ? 3 : 4;
        } else if (memcmp(type, "IDAT", 4) == 0) {
            idat = realloc(idat, nidat + n);
            memcpy(idat + nidat, data, n);
            nidat += n;
        }
        at += 12 + n;
    }
    if (w == 0 || h == 0 || channels == 0) goto out;
    size_t stride = (size_t)w * (size_t)channels;
    uLongf raw_len = (uLongf)((stride + 1) * h);
    unsigned char *raw = malloc(raw_len), *prev = calloc(stride, 1), *cur = malloc(stride);
    if (uncompress(raw, &raw_len, idat, nidat) != Z_OK || raw_len != (stride + 1) * h) {
        free(raw), free(prev), free(cur);
        goto out;
    }
    size_t inked = 0;
    for (uint32_t y = 0; y < h; y++) {
        const unsigned char *line = raw + (size_t)y * (stride + 1);
        for (size_t x = 0; x < stride; x++) {
            int a = x >= (size_t)channels ? cur[x - (size_t)channels] : 0, b = prev[x], c = x >= (size_t)channels ? prev[x - (size_t)channels] : 0;
            int v = line[1 + x];
            switch (line[0]) {
            case 1: v += a; break;
            case 2: v += b; break;
            case 3: v += (a + b) / 2; break;
            case 4: v += paeth(a, b, c); break;
            default: break;
            }
            cur[x] = (unsigned char)v;
        }
        for (uint32_t x = 0; x < w; x++) {
            const unsigned char *px = cur + (size_t)x * (size_t)channels;
            inked += px[0] < 200 || px[1] < 200 || px[2] < 200;
        }
        memcpy(prev, cur, stride);
    }
    ink = (double)inked / ((double)w * (double)h);
    free(raw), free(prev), free(cur);
out:
    free(idat);
    free(png);
    return ink;
}

/* Renders html with a real headless Chromium (its profile, cache and fonts' cache in dir): the
 * PNG's path in png; asserts there was no console message. */
static void render(const char *html, const char *png) {
    char log[256];
    snprintf(log, sizeof log, "%s/chromium.log", dir);
    int rc = sh("HOME='%s' XDG_CACHE_HOME='%s/cache' XDG_CONFIG_HOME='%s/config' timeout 120 chromium --headless --no-sandbox "
                "--disable-gpu --hide-scrollbars --no-first-run --user-data-dir='%s/chromium' --window-size=1000,2400 "
                "--enable-logging=stderr --v=0 --screenshot='%s' 'file://%s' > '%s' 2>&1",
                dir, dir, dir, dir, png, html, log);
    char *text = slurp(log, NULL);
    if (rc != 0) fail_msg("chromium failed (%d): %.2000s", rc, text);
    if (strstr(text, "CONSOLE")) fail_msg("the page wrote to the console: %.2000s", strstr(text, "CONSOLE"));
    free(text);
    double ink = ink_fraction(png);
    if (!(ink > 0.02 && ink < 0.9)) fail_msg("%s: %.3f of its pixels are drawn (blank, or not a PNG this test reads)", png, ink);
}

static void replayed_run(void **state) {
    (void)state;
    char html[256], t4[256], out[256], png[256];
    snprintf(html, sizeof html, "%s/run.html", dir);
    snprintf(t4, sizeof t4, "%s/run.json", dir);
    snprintf(out, sizeof out, "%s/run.out", dir);
    snprintf(png, sizeof png, "%s/run.png", dir);
    assert_int_equal(sh("'%s' tune '%s/kernels/convolution_milo.json' --simulate '%s/results/convolution_milo/W6600_T4.json.gz' --seed 3 "
                        "--budget 3%% --cache off --t4 '%s' --report '%s' --json > '%s' 2>/dev/null",
                        KT_CLI, KT_HUB, KT_HUB, t4, html, out),
                     0);
    json_error_t e;
    json_t *doc = json_load_file(out, 0, &e), *res = json_load_file(t4, 0, &e);
    assert_non_null(doc);
    assert_non_null(res);
    char *page = slurp(html, NULL);
    /* every configuration tried, once each */
    size_t n = json_array_size(json_object_get(res, "results"));
    assert_true(n >= 100);
    assert_int_equal(count(page, "<tr class=\"cfg\">"), n);
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(res, "results"), i, r) {
        char want[1024] = "<td>";
        const char *k;
        json_t *v;
        bool first = true;
        json_object_foreach(json_object_get(r, "configuration"), k, v) {
            size_t l = strlen(want);
            snprintf(want + l, sizeof want - l, "%s%s=%lld", first ? "" : ", ", k, (long long)json_integer_value(v));
            first = false;
        }
        strcat(want, "</td>");
        if (strstr(page, want) == NULL) fail_msg("result %zu (%s) is not in the report", i, want);
    }
    /* the winner is the run's */
    const char *w = strstr(page, "id=\"winner0\">");
    assert_non_null(w);
    w += strlen("id=\"winner0\">");
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(json_object_get(doc, "best"), "configuration"), k, v) {
        char pair[128];
        snprintf(pair, sizeof pair, "%s=%lld", k, (long long)json_integer_value(v));
        const char *end = strstr(w, "</span>");
        const char *at = strstr(w, pair);
        if (at == NULL || at > end) fail_msg("the report's winner lacks %s", pair);
    }
    /* the plots: gnuplot's SVG, embedded */
    assert_true(count(page, "src=\"data:image/svg+xml;base64,") >= 4);
    assert_non_null(strstr(page, "best so far over evaluations"));
    assert_non_null(strstr(page, "Effect of block_size_x"));
    assert_non_null(strstr(page, "finalists"));
    assert_self_contained(page);
    free(page);
    json_decref(doc), json_decref(res);
    render(html, png);
}

/* Two devices' results (the same 91 configurations of dedispersion's recordings on each: a page
 * of the whole ones, 22,260 configurations, took seconds to write and to render): their winners
 * side by side, each with its time on the other device. */
static void devices_side_by_side(void **state) {
    (void)state;
    char html[256], png[256], a4000[1024], w6600[1024];
    snprintf(html, sizeof html, "%s/two.html", dir);
    snprintf(png, sizeof png, "%s/two.png", dir);
    hub_part("dedispersion_milo", "A4000", hub_small_subset("dedispersion_milo"), a4000, sizeof a4000);
    hub_part("dedispersion_milo", "W6600", hub_small_subset("dedispersion_milo"), w6600, sizeof w6600);
    assert_int_equal(sh("'%s' report '%s' '%s' -o '%s' --title 'dedispersion, two GPUs'", KT_CLI, a4000, w6600, html), 0);
    char *page = slurp(html, NULL);
    assert_non_null(strstr(page, "<title>dedispersion, two GPUs</title>"));
    assert_non_null(strstr(page, "Winners side by side"));
    assert_non_null(strstr(page, "id=\"winner0\""));
    assert_non_null(strstr(page, "id=\"winner1\""));
    assert_non_null(strstr(page, "its best)")); /* each winner's time on the other device */
    assert_self_contained(page);
    free(page);
    render(html, png);
}

/* Work formulas (the problem's KernelSpecification.x-kerntune): the GFLOP/s of a known matmul
 * is 2 n^3 over its time, its GB/s its three buffers over its time, and the fractions of the
 * given peaks follow; the report places the results on a roofline. */
static void work_formulas(void **state) {
    (void)state;
    char problem[256], out[256], html[256];
    snprintf(problem, sizeof problem, "%s/mm.json", dir);
    snprintf(out, sizeof out, "%s/mm.out", dir);
    snprintf(html, sizeof html, "%s/mm.html", dir);
    json_error_t e;
    json_t *p = json_load_file(KT_DATA "/t1/matmul_c.json", 0, &e);
    assert_non_null(p);
    json_t *ks = json_object_get(p, "KernelSpecification");
    json_object_set_new(ks, "KernelFile", json_string(KT_DATA "/t1/matmul.c"));
    json_object_set_new(ks, "x-kerntune", json_pack("{s:s,s:s}", "Flops", "2 * n ** 3", "Bytes", "(a + b + c) * 4"));
    assert_int_equal(json_dump_file(p, problem, 0), 0);
    char t4[256];
    snprintf(t4, sizeof t4, "%s/mm.t4.json", dir);
    assert_int_equal(sh("'%s' tune '%s' --cache off --measure kerneltuner --peak 100,20 --report '%s' --t4 '%s' --json > '%s' 2>/dev/null",
                        KT_CLI, problem, html, t4, out),
                     0);
    json_t *doc = json_load_file(out, 0, &e), *best = json_object_get(doc, "best");
    assert_non_null(best);
    double t_ns = json_number_value(json_object_get(best, "time_ms")) * 1e6, gf = json_number_value(json_object_get(best, "gflops"));
    double gb = json_number_value(json_object_get(best, "gbs"));
    assert_true(t_ns > 0);
    assert_true(fabs(gf - 2.0 * 64 * 64 * 64 / t_ns) <= 1e-9 * gf); /* 2MNK / t */
    assert_true(fabs(gb - 3.0 * 64 * 64 * 4 / t_ns) <= 1e-9 * gb);
    assert_true(fabs(json_number_value(json_object_get(best, "gflops_fraction_of_peak")) - gf / 100) <= 1e-12);
    assert_true(fabs(json_number_value(json_object_get(best, "gbs_fraction_of_peak")) - gb / 20) <= 1e-12);
    json_decref(doc);
    char *page = slurp(html, NULL);
    assert_non_null(strstr(page, "Roofline"));
    assert_non_null(strstr(page, "work of the winner"));
    assert_non_null(strstr(page, "of the peak 100)"));
    assert_self_contained(page);
    free(page);
    /* a replay of that run: its buffers stand in with one element, yet the formulas give the
     * work of the recorded arguments (the problem's declared sizes), for every configuration */
    char rt4[256];
    snprintf(rt4, sizeof rt4, "%s/mm.replay.json", dir);
    assert_int_equal(sh("'%s' tune '%s' --cache off --simulate '%s' --peak 100,20 --report '%s' --t4 '%s' --json > '%s' 2>/dev/null", KT_CLI,
                        problem, t4, html, rt4, out),
                     0);
    doc = json_load_file(out, 0, &e), best = json_object_get(doc, "best");
    assert_non_null(best);
    t_ns = json_number_value(json_object_get(best, "time_ms")) * 1e6;
    assert_true(t_ns > 0);
    assert_true(fabs(json_number_value(json_object_get(best, "gflops")) - 2.0 * 64 * 64 * 64 / t_ns) <= 1e-9 * 2.0 * 64 * 64 * 64 / t_ns);
    assert_true(fabs(json_number_value(json_object_get(best, "gbs")) - 3.0 * 64 * 64 * 4 / t_ns) <= 1e-9 * 3.0 * 64 * 64 * 4 / t_ns);
    json_decref(doc);
    doc = json_load_file(rt4, 0, &e);
    json_t *results = json_object_get(doc, "results");
    assert_int_equal(json_array_size(results), 5);
    for (size_t i = 0; i < json_array_size(results); i++) {
        json_t *x = json_object_get(json_array_get(results, i), "x-kerntune");
        assert_true(json_number_value(json_object_get(x, "flops")) == 2.0 * 64 * 64 * 64);
        assert_true(json_number_value(json_object_get(x, "bytes")) == 3.0 * 64 * 64 * 4);
    }
    json_decref(doc);
    page = slurp(html, NULL);
    assert_non_null(strstr(page, "Roofline"));
    free(page);
    /* an unknown field of the extension is refused, named */
    json_object_set_new(json_object_get(ks, "x-kerntune"), "Joules", json_string("1"));
    assert_int_equal(json_dump_file(p, problem, 0), 0);
    assert_int_equal(sh("'%s' tune '%s' --cache off > '%s' 2>&1", KT_CLI, problem, out), 1);
    char *t = slurp(out, NULL);
    assert_non_null(strstr(t, "KernelSpecification.x-kerntune.Joules"));
    free(t);
    json_decref(p);
}

/* Every failure with its kind, kerntune's own (crashed, timeout), not only T4's class. */
static void failure_kinds(void **state) {
    (void)state;
    char html[256];
    snprintf(html, sizeof html, "%s/crashy.html", dir);
    assert_int_equal(sh("'%s' tune '%s/t1/crashy_c.json' --timeout 1 --cache off --quiet --report '%s' > /dev/null 2>&1", KT_CLI, KT_DATA,
                        html),
                     0);
    char *page = slurp(html, NULL);
    assert_non_null(strstr(page, "Failures (5)"));
    assert_true(count(page, "<td>crashed</td>") >= 3); /* null write, abort, out of bounds (out of memory may time out) */
    assert_true(count(page, "<td>timeout</td>") >= 1); /* the endless loop */
    assert_non_null(strstr(page, "Segmentation fault"));
    assert_self_contained(page);
    free(page);
}

/* What a built kernel uses, where the backend tells (OpenCL on PoCL: local and private memory;
 * no registers): in T4's x-kerntune and the report's table of the fastest. The host's C
 * backend tells nothing: the fields are absent. */
static void kernel_resources(void **state) {
    (void)state;
    char t4[256], html[256];
    snprintf(t4, sizeof t4, "%s/cl.json", dir);
    snprintf(html, sizeof html, "%s/cl.html", dir);
    assert_int_equal(sh("'%s' tune '%s/t1/matmul_cl.json' --cache off --quiet --t4 '%s' --report '%s' > /dev/null 2>&1", KT_CLI, KT_DATA,
                        t4, html),
                     0);
    json_error_t e;
    json_t *doc = json_load_file(t4, 0, &e);
    assert_non_null(doc);
    size_t i, measured = 0;
    json_t *r;
    json_array_foreach(json_object_get(doc, "results"), i, r) {
        json_t *x = json_object_get(r, "x-kerntune");
        if (strcmp(json_string_value(json_object_get(r, "invalidity")), "correct") != 0) continue;
        measured++;
        assert_true(json_integer_value(json_object_get(x, "static_shared_bytes")) >= 0);
        assert_true(json_is_integer(json_object_get(x, "static_shared_bytes")));
        assert_true(json_is_integer(json_object_get(x, "local_bytes")));
        assert_null(json_object_get(x, "registers")); /* OpenCL does not say */
    }
    assert_true(measured > 0);
    json_decref(doc);
    char *page = slurp(html, NULL);
    assert_non_null(strstr(page, "<th>local memory, spills (bytes)</th>"));
    free(page);
    /* the host's backend tells nothing */
    snprintf(t4, sizeof t4, "%s/c.json", dir);
    assert_int_equal(sh("'%s' tune '%s/t1/crashy_c.json' --define MODE=0 --cache off --quiet --t4 '%s' > /dev/null 2>&1", KT_CLI, KT_DATA, t4), 0);
    doc = json_load_file(t4, 0, &e);
    assert_non_null(doc);
    json_t *x = json_object_get(json_array_get(json_object_get(doc, "results"), 0), "x-kerntune");
    assert_non_null(x);
    assert_null(json_object_get(x, "local_bytes"));
    json_decref(doc);
}

/* A report of the cache's decisions: each with every unit it considered, its winner the cache's. */
static void from_the_cache(void **state) {
    (void)state;
    char html[256], show[256];
    snprintf(html, sizeof html, "%s/cache.html", dir);
    snprintf(show, sizeof show, "%s/show.json", dir);
    assert_int_equal(sh("'%s' tune '%s/t1/matmul_c.json' --cache '%s' --measure kerneltuner --quiet > /dev/null 2>&1", KT_CLI, KT_DATA, db), 0);
    assert_int_equal(sh("'%s' cache show --op matmul_c --cache '%s' --json > '%s'", KT_CLI, db, show), 0);
    assert_int_equal(sh("'%s' report --cache '%s' --op matmul_c -o '%s'", KT_CLI, db, html), 0);
    json_error_t e;
    json_t *doc = json_load_file(show, 0, &e), *entry = json_array_get(doc, 0);
    assert_non_null(entry);
    size_t measured = 0, i;
    json_t *u;
    json_array_foreach(json_object_get(entry, "units"), i, u) measured += strcmp(json_string_value(json_object_get(u, "outcome")), "not_run") != 0;
    char *page = slurp(html, NULL);
    assert_int_equal(count(page, "<tr class=\"cfg\">"), measured);
    /* the cache's winner, "TI=16,TK=8" as the page writes it: "TI=16, TK=8" */
    char want[256] = "id=\"winner0\">";
    const char *cfg = json_string_value(json_object_get(json_object_get(entry, "winner"), "config"));
    for (size_t k = strlen(want); *cfg && k + 2 < sizeof want; cfg++) {
        want[k++] = *cfg;
        if (*cfg == ',') want[k++] = ' ';
        want[k] = '\0';
    }
    assert_non_null(strstr(page, want));
    assert_self_contained(page);
    free(page);
    json_decref(doc);
    char out[256];
    snprintf(out, sizeof out, "%s/nocache.txt", dir);
    assert_int_equal(sh("'%s' report --cache '%s' --op nothing -o '%s/n.html' > '%s' 2>&1", KT_CLI, db, dir, out), 1);
    char *t = slurp(out, NULL);
    assert_non_null(strstr(t, "no decision of op nothing"));
    free(t);
}

static void errors(void **state) {
    (void)state;
    char out[256];
    snprintf(out, sizeof out, "%s/err.txt", dir);
    assert_int_equal(sh("'%s' report > '%s' 2>&1", KT_CLI, out), 2);
    char *t = slurp(out, NULL);
    assert_non_null(strstr(t, "no results file"));
    free(t);
    assert_int_equal(sh("'%s' report '%s/nope.json' -o '%s/x.html' > '%s' 2>&1", KT_CLI, dir, dir, out), 1);
    t = slurp(out, NULL);
    assert_non_null(strstr(t, "nope.json"));
    free(t);
    assert_int_equal(sh("'%s' report '%s/kernels/convolution_milo.json' -o '%s/x.html' > '%s' 2>&1", KT_CLI, KT_HUB, dir, out), 1);
    t = slurp(out, NULL);
    assert_non_null(strstr(t, "not a T4 document"));
    free(t);
    struct stat st;
    assert_int_not_equal(stat(out, &st), -1);
    char x[256];
    snprintf(x, sizeof x, "%s/x.html", dir);
    assert_int_equal(stat(x, &st), -1); /* nothing written on failure */
    assert_int_equal(sh("'%s' report --help | grep -q gnuplot", KT_CLI), 0);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(errors),
        cmocka_unit_test(replayed_run),
        cmocka_unit_test(devices_side_by_side),
        cmocka_unit_test(work_formulas),
        cmocka_unit_test(failure_kinds),
        cmocka_unit_test(kernel_resources),
        cmocka_unit_test(from_the_cache),
    };
    return kt_run_cases(argc, argv, tests, setup, teardown);
}
