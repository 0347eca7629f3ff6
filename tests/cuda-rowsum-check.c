/*
 * cuda-rowsum-check.c - the row-sum op of ops/ (ops/rowsum.c, ops/rowsum.cu) on a GPU, run by
 * scripts/gpu-check after cuda-check. Like cuda-check it needs no CUDA headers and no test
 * framework; it prints one line per failed check and closes with "N passed, N failed".
 *
 * Checks:
 *  - on small shapes, (3, 1), (1000, 7), (17, 4099) and (2, 70000), every configuration of every
 *    implementation is validated against the host's sums (the op's reference) and measured:
 *    none invalid, failing to build or rejected; the caller's out then holds the host's sums
 *    exactly (the inputs are multiples of 1/4, so every order of summation gives the same bits),
 *    nothing is written past it and in is untouched;
 *  - other shapes of a tuned bucket, and an input starting off a 16-byte boundary, are hits that
 *    compute their own grid, exactly;
 *  - each configuration on its own (ktops_rowsum_create_with, launched without tuning) sums
 *    rows that start anywhere on a 4-byte boundary, twice in a row on one stream (the split-row
 *    kernel's counters start clean for the second launch);
 *  - a call's shape errors are named, a too-small buffer never reaches a kernel, and split-row
 *    alone refuses more rows than its workspace holds;
 *  - with a cache file, a second context serves the decision from the cache without tuning.
 */
#define _GNU_SOURCE /* mkdtemp */
#include "cuda_ops.h"

#include "gpu-harness.h"

#include <kerntune.h>
#include <kerntune/cache.h>
#include <kerntune/decision.h>
#include <kerntune/device.h>
#include <kerntune/measure.h>
#include <kerntune/variants.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* a failed call's message: the ops' own (ktops_last_error) for theirs, else kerntune's */
#define OK(call) OK_SAYING(call, strncmp(#call, "ktops_", 6) == 0 ? ktops_last_error() : kt_last_error())

static char tmp[256];

/* The implementations and how many configurations each space of ops/rowsum.c holds. */
static const char *const groups[3] = {"block-per-row", "persistent", "split-row"};
static const size_t group_configs[3] = {10, 20, 12};

/* A context on the first CUDA device, with the driver for the ops. */
typedef struct gpu {
    kt_context *ctx;
    size_t dev;
    ktops_cuda *cu;
} gpu;

static int open_gpu(gpu *g, const char *cache) {
    memset(g, 0, sizeof *g);
    char artifacts[300];
    snprintf(artifacts, sizeof artifacts, "%s/artifacts", tmp);
    /* a short fixed measurement: these checks are about what runs, not how fast */
    if (kt_context_create(&g->ctx) != KT_OK || kt_context_set_measure(g->ctx, 1, 3, 3, 0) != KT_OK ||
        kt_context_set_artifact_dir(g->ctx, artifacts) != KT_OK || kt_context_set_cache(g->ctx, cache ? cache : "off") != KT_OK) {
        CHECK(0, "context: %s", kt_last_error());
        kt_context_destroy(g->ctx);
        return 0;
    }
    g->dev = (size_t)-1;
    for (size_t i = 0; i < kt_context_device_count(g->ctx) && g->dev == (size_t)-1; i++)
        if (strcmp(kt_device_backend(kt_context_device(g->ctx, i)), "cuda") == 0) g->dev = i;
    for (size_t i = 0; g->dev == (size_t)-1 && i < kt_context_unavailable_count(g->ctx); i++)
        printf("unavailable: %s\n", kt_context_unavailable(g->ctx, i));
    CHECK(g->dev != (size_t)-1, "no CUDA device");
    kt_status st = g->dev == (size_t)-1 ? KT_ERR_NOT_FOUND : ktops_cuda_open(g->ctx, g->dev, &g->cu);
    if (g->dev != (size_t)-1) CHECK(st == KT_OK, "ktops_cuda_open: %s", ktops_last_error());
    if (st != KT_OK) kt_context_destroy(g->ctx);
    return st == KT_OK;
}

static void close_gpu(gpu *g) {
    ktops_cuda_close(g->cu);
    kt_context_destroy(g->ctx);
}

/* Multiples of 1/4 from -4 to 4 (another sequence than the op's generated inputs). */
static void fill(float *v, size_t n, unsigned seed) {
    unsigned s = seed * 2654435761u + 12345u;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        v[i] = (float)((int)((s >> 24) % 33) - 16) * 0.25f;
    }
}

enum { GUARD = 64 };
#define SENTINEL 1234.5f

/* One call of r on (rows, cols) with the input starting off floats into its allocation, on
 * stream, and what it must give: the host's sums exactly, nothing written past out's rows,
 * in unchanged. calls > 1 repeats the launch on the stream before reading. */
static void sum_and_check(gpu *g, ktops_rowsum *r, kt_queue stream, long long rows, long long cols, int off, int calls,
                          const char *what) {
    size_t nin = (size_t)rows * (size_t)cols + (size_t)off, nout = (size_t)rows + GUARD;
    float *in = malloc(nin * sizeof *in), *back = malloc(nin * sizeof *back), *out = malloc(nout * sizeof *out);
    double *want = calloc((size_t)rows, sizeof *want);
    void *din = NULL, *dout = NULL;
    fill(in, nin, (unsigned)(rows * 31 + cols + off));
    for (long long i = 0; i < rows; i++)
        for (long long c = 0; c < cols; c++) want[i] += in[off + i * cols + c];
    for (size_t i = 0; i < nout; i++) out[i] = SENTINEL;
    kt_status st = kt_device_alloc(g->ctx, g->dev, nin * sizeof *in, &din);
    if (st == KT_OK) st = kt_device_alloc(g->ctx, g->dev, nout * sizeof *out, &dout);
    if (st == KT_OK) st = kt_device_write(g->ctx, g->dev, din, in, nin * sizeof *in);
    if (st == KT_OK) st = kt_device_write(g->ctx, g->dev, dout, out, nout * sizeof *out);
    CHECK(st == KT_OK, "%s: device buffers: %s", what, kt_last_error());
    const float *dinp = (const float *)din + off;
    for (int k = 0; st == KT_OK && k < calls; k++) {
        st = ktops_rowsum_run(r, stream, dinp, dout, rows, cols);
        CHECK(st == KT_OK, "%s (%lld x %lld, +%d): ktops_rowsum_run: %s", what, rows, cols, off, ktops_last_error());
    }
    if (st == KT_OK) {
        st = ktops_cuda_sync(g->cu, stream);
        CHECK(st == KT_OK, "%s: %s", what, ktops_last_error());
    }
    if (st == KT_OK && kt_device_read(g->ctx, g->dev, out, dout, nout * sizeof *out) == KT_OK &&
        kt_device_read(g->ctx, g->dev, back, din, nin * sizeof *in) == KT_OK) {
        long long bad = 0, first = -1;
        for (long long i = 0; i < rows; i++)
            if (out[i] != (float)want[i] && bad++ == 0) first = i;
        CHECK(bad == 0, "%s (%lld x %lld, +%d): %lld rows differ from the host's sums, first row %lld: %.9g, not %.9g", what,
              rows, cols, off, bad, first, first >= 0 ? out[first] : 0.0, first >= 0 ? want[first] : 0.0);
        int guard = 1;
        for (size_t i = (size_t)rows; i < nout; i++) guard = guard && out[i] == SENTINEL;
        CHECK(guard, "%s (%lld x %lld): wrote past out's %lld rows", what, rows, cols, rows);
        CHECK(memcmp(in, back, nin * sizeof *in) == 0, "%s (%lld x %lld): in was changed", what, rows, cols);
    }
    kt_device_free(g->ctx, g->dev, din);
    kt_device_free(g->ctx, g->dev, dout);
    free(in), free(back), free(out), free(want);
}

static long group_of(const char *name) {
    for (long i = 0; i < 3; i++)
        if (strcmp(name, groups[i]) == 0) return i;
    return -1;
}

static const long long shapes[][2] = {{3, 1}, {1000, 7}, {17, 4099}, {2, 70000}};

/* Tunes each shape: every configuration validated against the host and measured. Leaves the
 * units of (17, 4099)'s decision, every configuration, in configs (candidate index, text). */
static void check_every_configuration(gpu *g, ktops_rowsum *r, char configs[64][96], long *cands, size_t *nconfigs) {
    kt_op *op = ktops_rowsum_op(r);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        long long rows = shapes[s][0], cols = shapes[s][1];
        uint64_t tunes = kt_op_tune_count(op);
        sum_and_check(g, r, NULL, rows, cols, 0, 1, "tuning call");
        CHECK(kt_op_tune_count(op) == tunes + 1, "(%lld x %lld) tuned %llu times", rows, cols,
              (unsigned long long)(kt_op_tune_count(op) - tunes));
        const kt_decision *d = NULL;
        OK(ktops_rowsum_decision(r, NULL, NULL, rows, cols, &d));
        CHECK(kt_decision_source_of(d) == KT_SOURCE_MEASURED && kt_decision_validated(d), "(%lld x %lld): source %d, validated %d",
              rows, cols, (int)kt_decision_source_of(d), kt_decision_validated(d));
        size_t per_group[3] = {0, 0, 0}, measured = 0;
        for (size_t u = 0; u < kt_decision_unit_count(d); u++) {
            const char *cand = kt_op_candidate_name(op, kt_decision_unit_candidate(d, u)), *cfg = kt_decision_unit_config(d, u);
            long gi = group_of(cand);
            CHECK(gi >= 0 && cfg != NULL, "unit %zu: candidate %s", u, cand);
            if (gi < 0 || cfg == NULL) continue;
            per_group[gi]++;
            kt_outcome o = kt_decision_unit_outcome(d, u);
            const char *msg = kt_decision_unit_message(d, u);
            CHECK(o == KT_OUTCOME_MEASURED && kt_decision_unit_time_ns(d, u) > 0, "(%lld x %lld) %s %s: %s%s%s", rows, cols, cand,
                  cfg, kt_outcome_name(o), msg ? ": " : "", msg ? msg : "");
            measured += o == KT_OUTCOME_MEASURED;
            if (s == 2 && *nconfigs < 64) {
                cands[*nconfigs] = gi;
                snprintf(configs[(*nconfigs)++], 96, "%s", cfg);
            }
        }
        for (int gi = 0; gi < 3; gi++)
            CHECK(per_group[gi] == group_configs[gi], "(%lld x %lld): %zu configurations of %s, not %zu", rows, cols,
                  per_group[gi], groups[gi], group_configs[gi]);
        size_t w = kt_decision_winner_unit(d);
        printf("  %5lld x %-6lld %zu measured; winner %s %s (%.1f us)\n", rows, cols, measured,
               kt_op_candidate_name(op, kt_decision_winner(d)), kt_decision_unit_config(d, w), kt_decision_unit_time_ns(d, w) / 1e3);
    }
}

/* Other shapes of tuned buckets: hits (no tuning), each with its own grid; the input off a
 * 16-byte boundary; a stream of the caller's. */
static void check_hits(gpu *g, ktops_rowsum *r) {
    kt_op *op = ktops_rowsum_op(r);
    uint64_t tunes = kt_op_tune_count(op);
    kt_queue stream = NULL;
    OK(ktops_cuda_stream_create(g->cu, &stream));
    sum_and_check(g, r, stream, 600, 5, 0, 1, "hit (1024 x 8 bucket)");
    sum_and_check(g, r, stream, 513, 8, 0, 1, "hit (1024 x 8 bucket)");
    sum_and_check(g, r, stream, 1000, 7, 3, 1, "hit off a 16-byte boundary");
    sum_and_check(g, r, stream, 30, 8000, 1, 2, "hit (32 x 8192 bucket), input off a 16-byte boundary");
    sum_and_check(g, r, stream, 2, 65537, 2, 1, "hit (2 x 131072 bucket)");
    CHECK(kt_op_tune_count(op) == tunes, "hits tuned %llu times", (unsigned long long)(kt_op_tune_count(op) - tunes));
    ktops_cuda_stream_destroy(g->cu, stream);
}

/* Each configuration as the only candidate of an op that does not tune (effort OFF: its one
 * configuration is the default), on the caller's data, rows starting anywhere. */
static void check_each_alone(gpu *g, char configs[64][96], const long *cands, size_t nconfigs) {
    CHECK(nconfigs == 42, "%zu configurations to check", nconfigs);
    for (size_t i = 0; i < nconfigs; i++) {
        ktops_rowsum_options opt = {groups[cands[i]], configs[i]};
        ktops_rowsum *one = NULL;
        char name[64], what[160];
        snprintf(name, sizeof name, "rowsum-alone-%zu", i);
        snprintf(what, sizeof what, "%s %.95s alone", groups[cands[i]], configs[i]);
        kt_status st = ktops_rowsum_create_with(g->cu, g->ctx, g->dev, name, &opt, &one);
        CHECK(st == KT_OK, "%s: %s", what, ktops_last_error());
        if (st != KT_OK) continue;
        CHECK(kt_op_set_effort(ktops_rowsum_op(one), KT_EFFORT_OFF) == KT_OK, "%s", kt_last_error());
        sum_and_check(g, one, NULL, 17, 4099, 1, 2, what);
        sum_and_check(g, one, NULL, 1000, 7, 3, 2, what);
        sum_and_check(g, one, NULL, 3, 1, 2, 2, what);
        sum_and_check(g, one, NULL, 5, 3, 1, 2, what);
        const kt_decision *d = NULL;
        if (ktops_rowsum_decision(one, NULL, NULL, 17, 4099, &d) == KT_OK)
            CHECK(kt_decision_source_of(d) == KT_SOURCE_DEFAULT && strcmp(kt_decision_unit_config(d, 0), configs[i]) == 0,
                  "%s: ran %s", what, kt_decision_unit_config(d, 0));
        ktops_rowsum_destroy(one);
    }
}

static void check_errors(gpu *g, ktops_rowsum *r) {
    void *din = NULL, *dout = NULL;
    OK(kt_device_alloc(g->ctx, g->dev, 1 << 16, &din));
    OK(kt_device_alloc(g->ctx, g->dev, 1 << 16, &dout));
    kt_status st = ktops_rowsum_run(r, NULL, din, dout, 0, 5);
    CHECK(st == KT_ERR_INVALID_ARGUMENT && strstr(ktops_last_error(), "rows 0"), "%s: %s", kt_status_name(st), ktops_last_error());
    st = ktops_rowsum_run(r, NULL, din, dout, 4, -1);
    CHECK(st == KT_ERR_INVALID_ARGUMENT && strstr(ktops_last_error(), "cols -1"), "%s: %s", kt_status_name(st), ktops_last_error());
    st = ktops_rowsum_run(r, NULL, din, dout, 1LL << 31, 1);
    CHECK(st == KT_ERR_INVALID_ARGUMENT && strstr(ktops_last_error(), "2147483648"), "%s: %s", kt_status_name(st),
          ktops_last_error());
    st = ktops_rowsum_run(r, NULL, (const float *)((char *)din + 2), dout, 4, 4);
    CHECK(st == KT_ERR_INVALID_ARGUMENT && strstr(ktops_last_error(), "aligned"), "%s: %s", kt_status_name(st), ktops_last_error());
    /* a direct call whose in is smaller than rows x cols: no candidate accepts it, nothing runs */
    kt_arg args[KTOPS_ROWSUM_NARGS] = {kt_arg_buf(din, 100 * sizeof(float)), kt_arg_buf(dout, 10 * sizeof(float)), kt_arg_i64(10),
                                       kt_arg_i64(11)};
    st = kt_op_call(ktops_rowsum_op(r), args, KTOPS_ROWSUM_NARGS);
    CHECK(st == KT_ERR_NO_VALID_CANDIDATE, "a too-small in: %s: %s", kt_status_name(st), kt_last_error());
    /* split-row alone: its workspace holds 4096 rows */
    ktops_rowsum *split = NULL;
    ktops_rowsum_options opt = {"split-row", NULL};
    OK(ktops_rowsum_create_with(g->cu, g->ctx, g->dev, "rowsum-split-only", &opt, &split));
    st = ktops_rowsum_run(split, NULL, din, dout, 4097, 1);
    CHECK(st == KT_ERR_NO_VALID_CANDIDATE && strstr(ktops_last_error(), "rows 4097"), "%s: %s", kt_status_name(st),
          ktops_last_error());
    ktops_rowsum_destroy(split);
    kt_device_free(g->ctx, g->dev, din);
    kt_device_free(g->ctx, g->dev, dout);
}

/* A second context with the same cache file serves (17, 4099) from it: no tuning. */
static void check_cache(void) {
    char path[300];
    snprintf(path, sizeof path, "%s/cache.db", tmp);
    for (int round = 0; round < 2; round++) {
        gpu g;
        if (!open_gpu(&g, path)) return;
        if (kt_context_cache(g.ctx) == NULL) {
            kt_cache *c = NULL;
            kt_status st = kt_cache_open(path, &c);
            if (st == KT_ERR_STATE && strstr(kt_last_error(), "without the persistent cache")) {
                printf("SKIP the cache check: %s\n", kt_last_error());
            } else {
                CHECK(0, "the cache %s could not be opened: %s", path, kt_last_error());
                kt_cache_close(c);
            }
            close_gpu(&g);
            return;
        }
        ktops_rowsum *r = NULL;
        kt_status st = ktops_rowsum_create(g.cu, g.ctx, g.dev, "rowsum", &r);
        CHECK(st == KT_OK, "ktops_rowsum_create: %s", ktops_last_error());
        if (st == KT_OK) {
            sum_and_check(&g, r, NULL, 17, 4099, 0, 1, round ? "served from the cache" : "tuned, recorded in the cache");
            const kt_decision *d = NULL;
            st = ktops_rowsum_decision(r, NULL, NULL, 17, 4099, &d);
            CHECK(st == KT_OK, "%s", ktops_last_error());
            kt_decision_source want = round ? KT_SOURCE_CACHE : KT_SOURCE_MEASURED;
            uint64_t tunes = kt_op_tune_count(ktops_rowsum_op(r));
            if (st == KT_OK)
                CHECK(kt_decision_source_of(d) == want, "round %d: source %d, not %d", round, (int)kt_decision_source_of(d),
                      (int)want);
            CHECK(tunes == (round ? 0u : 1u), "round %d: tuned %llu times", round, (unsigned long long)tunes);
            CHECK(kt_context_cache_hits(g.ctx) == (round ? 1u : 0u), "round %d: %llu cache hits", round,
                  (unsigned long long)kt_context_cache_hits(g.ctx));
            if (round && st == KT_OK)
                printf("  second context: served from the cache: %s %s\n", kt_op_candidate_name(ktops_rowsum_op(r), kt_decision_winner(d)),
                       kt_decision_unit_config(d, kt_decision_winner_unit(d)));
            ktops_rowsum_destroy(r);
        }
        close_gpu(&g);
    }
}

int main(void) {
    snprintf(tmp, sizeof tmp, "/tmp/kt-rowsum-XXXXXX");
    if (mkdtemp(tmp) == NULL) return 1;
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("kerntune %s: the row-sum op on the GPU\n", kt_version_string());
    gpu g;
    if (open_gpu(&g, NULL)) {
        printf("device %zu: %s, %d SMs\n", g.dev, kt_device_name(kt_context_device(g.ctx, g.dev)), ktops_cuda_sm_count(g.cu));
        ktops_rowsum *r = NULL;
        kt_status st = ktops_rowsum_create(g.cu, g.ctx, g.dev, "rowsum", &r);
        CHECK(st == KT_OK, "ktops_rowsum_create: %s", ktops_last_error());
        if (st == KT_OK) {
            static char configs[64][96];
            long cands[64];
            size_t nconfigs = 0;
            check_every_configuration(&g, r, configs, cands, &nconfigs);
            check_hits(&g, r);
            check_each_alone(&g, configs, cands, nconfigs);
            check_errors(&g, r);
            ktops_rowsum_destroy(r);
        }
        close_gpu(&g);
    }
    check_cache();
    char rm[300];
    snprintf(rm, sizeof rm, "rm -rf '%s'", tmp);
    if (system(rm) != 0) failed++;
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
