/*
 * cuda-gemm-check.c - the GEMM op of ops/ (issue [11]) on a machine with an NVIDIA GPU, run by
 * scripts/gpu-check (CI compiles it; no CUDA headers, no test framework).
 *
 * Checks: on small shapes with tails in M, N and K, every candidate (cuBLAS's default,
 * cuBLASLt's top 8, every tiled-kernel configuration of both kernel families: on Hopper the
 * wgmma kernels with their tensor maps, persistent and split over clusters, and the mma.sync
 * kernels with split-K and stream-K) is validated against cuBLAS while tuning, and the winner's
 * C equals a host-computed product;
 * the candidate list of a machine without cuBLASLt (both vendor libraries hidden), which still
 * tunes and computes the right C; a second context on the same cache file serves the decision
 * without tuning. Prints one line per failed check and closes with "N passed, N failed".
 */
#define _GNU_SOURCE /* mkdtemp */
#include "cuda_ops.h"
#include "cudalib.h" /* the kernels' spaces, to count a shape's configurations */

#include "gpu-harness.h"

#include <kerntune.h>
#include <kerntune/cache.h>
#include <kerntune/decision.h>
#include <kerntune/device.h>
#include <kerntune/measure.h>
#include <kerntune/variants.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* a failed call's message: the ops' own (ktops_last_error) for theirs, else kerntune's */
#define OK(call) OK_SAYING(call, strncmp(#call, "ktops_", 6) == 0 ? ktops_last_error() : kt_last_error())

static char dir[256], artifacts[300], cache_path[300];

static uint16_t to_bf16(float f) { /* round to nearest even */
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

static float from_bf16(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static kt_context *context(const char *cache) {
    kt_context *ctx = NULL;
    if (kt_context_create(&ctx) != KT_OK || kt_context_set_artifact_dir(ctx, artifacts) != KT_OK ||
        kt_context_set_cache(ctx, cache) != KT_OK) {
        printf("FAIL: context: %s\n", kt_last_error());
        exit(1);
    }
    return ctx;
}

static size_t cuda_device(kt_context *ctx) {
    for (size_t i = 0; i < kt_context_device_count(ctx); i++)
        if (strcmp(kt_device_backend(kt_context_device(ctx, i)), "cuda") == 0) return i;
    return (size_t)-1;
}

/* One shape's matrices on the host and the device, and the host product. */
typedef struct problem {
    int64_t m, n, k;
    uint16_t *a, *b, *c;
    float *ref;
    void *da, *db, *dc;
} problem;

static int problem_init(problem *p, kt_context *ctx, size_t dev, int64_t m, int64_t n, int64_t k, unsigned seed) {
    memset(p, 0, sizeof *p);
    p->m = m, p->n = n, p->k = k;
    p->a = malloc((size_t)(m * k) * 2), p->b = malloc((size_t)(k * n) * 2), p->c = malloc((size_t)(m * n) * 2);
    p->ref = calloc((size_t)(m * n), sizeof *p->ref);
    if (!p->a || !p->b || !p->c || !p->ref) return 0;
    srand(seed);
    for (int64_t i = 0; i < m * k; i++) p->a[i] = to_bf16((float)rand() / RAND_MAX * 2 - 1);
    for (int64_t i = 0; i < k * n; i++) p->b[i] = to_bf16((float)rand() / RAND_MAX * 2 - 1);
    for (int64_t i = 0; i < m; i++)
        for (int64_t kk = 0; kk < k; kk++) {
            float av = from_bf16(p->a[i * k + kk]);
            for (int64_t j = 0; j < n; j++) p->ref[i * n + j] += av * from_bf16(p->b[kk * n + j]);
        }
    return kt_device_alloc(ctx, dev, (size_t)(m * k) * 2, &p->da) == KT_OK &&
           kt_device_alloc(ctx, dev, (size_t)(k * n) * 2, &p->db) == KT_OK &&
           kt_device_alloc(ctx, dev, (size_t)(m * n) * 2, &p->dc) == KT_OK &&
           kt_device_write(ctx, dev, p->da, p->a, (size_t)(m * k) * 2) == KT_OK &&
           kt_device_write(ctx, dev, p->db, p->b, (size_t)(k * n) * 2) == KT_OK;
}

static void problem_free(problem *p, kt_context *ctx, size_t dev) {
    kt_device_free(ctx, dev, p->da), kt_device_free(ctx, dev, p->db), kt_device_free(ctx, dev, p->dc);
    free(p->a), free(p->b), free(p->c), free(p->ref);
}

/* C read back from the device equals the host product: the host sums in fp32 in another order,
 * and C is rounded to bf16 (half an ulp: 2^-9 relative). */
static int64_t wrong_elements(problem *p, kt_context *ctx, size_t dev, int64_t *first) {
    memset(p->c, 0xA5, (size_t)(p->m * p->n) * 2);
    if (kt_device_read(ctx, dev, p->c, p->dc, (size_t)(p->m * p->n) * 2) != KT_OK) return -1;
    int64_t bad = 0;
    for (int64_t i = 0; i < p->m * p->n; i++) {
        float got = from_bf16(p->c[i]), want = p->ref[i];
        if (!(fabsf(got - want) <= 1e-3f * sqrtf((float)p->k) + 8e-3f * fabsf(want))) {
            if (bad++ == 0) *first = i;
        }
    }
    return bad;
}

enum { DP_CONFIGS = 11, SPLIT_CONFIGS = 22 + 6, KERNEL_CONFIGS = DP_CONFIGS + SPLIT_CONFIGS }; /* ops/gemm.c's mma spaces */
enum { WG_CONFIGS = 9, WG_SPLIT_CONFIGS = 11, WG_KERNEL_CONFIGS = WG_CONFIGS + WG_SPLIT_CONFIGS }; /* and its wgmma spaces */
enum { SKINNY_MAX_M = 128 }; /* ops/gemm.c: the skinny kernel's requirement */
/* its configurations for M of 1-16, 17-32 and 33 or more rows, without clusters (ops/gemm.c's
 * register estimate over VEC, WARPS and UNROLL); clusters of 1, 2 or 4 blocks triple them */
enum { SKINNY_M16 = 11, SKINNY_M32 = 10, SKINNY_M64 = 6 };

/* The skinny kernel's configurations for a shape, as its space enumerates them (a rejected
 * group is one unit); checked against fixed counts in check_skinny_kernels. */
static size_t skinny_units(ktops_cuda *cu, int64_t m, int64_t n, int64_t k) {
    if (m > SKINNY_MAX_M) return 1;
    kt_space *sp = NULL;
    size_t count = 0;
    if (ktops__gemm_space(KTOPS__SKINNY, ktops_cuda_sm_count(cu), ktops_cuda_compute_capability(cu), &sp) != KT_OK ||
        kt_space_bind_int(sp, "M", m) != KT_OK || kt_space_bind_int(sp, "N", n) != KT_OK || kt_space_bind_int(sp, "K", k) != KT_OK ||
        kt_space_enumerate(sp, &count) != KT_OK)
        count = 0;
    kt_space_destroy(sp);
    return count;
}

/* Tunes C = A * B of one shape and checks C, and that every unit was validated and measured but
 * those of the groups named in rejected (a space-separated list), which the shape's size must
 * have rejected. */
static void check_shape(ktops_cuda *cu, kt_context *ctx, size_t dev, ktops_gemm *g, int64_t m, int64_t n, int64_t k,
                        size_t want_units, const char *rejected) {
    problem p;
    CHECK(problem_init(&p, ctx, dev, m, n, k, (unsigned)(m * 31 + n * 7 + k)), "allocating %lld x %lld x %lld", (long long)m,
          (long long)n, (long long)k);
    OK(ktops_gemm_run(g, NULL, p.da, p.db, p.dc, m, n, k));
    OK(ktops_cuda_sync(cu, NULL));
    int64_t first = -1, bad = wrong_elements(&p, ctx, dev, &first);
    CHECK(bad == 0, "%lld x %lld x %lld: %lld wrong elements; first [%lld]: %g, want %g", (long long)m, (long long)n,
          (long long)k, (long long)bad, (long long)first, first >= 0 ? from_bf16(p.c[first]) : 0.0, first >= 0 ? p.ref[first] : 0.0);
    kt_op *op = ktops_gemm_op(g);
    const kt_decision *d = NULL;
    kt_status st = ktops_gemm_decision(g, p.da, p.db, p.dc, m, n, k, &d);
    CHECK(st == KT_OK && d, "decision for %lld x %lld x %lld: %s", (long long)m, (long long)n, (long long)k, ktops_last_error());
    if (d) {
        size_t units = kt_decision_unit_count(d), measured = 0;
        for (size_t u = 0; u < units; u++) {
            kt_outcome o = kt_decision_unit_outcome(d, u);
            const char *cand = kt_op_candidate_name(op, kt_decision_unit_candidate(d, u));
            char padded[64];
            snprintf(padded, sizeof padded, " %s ", cand);
            int split = strstr(rejected, padded) != NULL;
            measured += o == KT_OUTCOME_MEASURED;
            CHECK(o == (split ? KT_OUTCOME_REJECTED : KT_OUTCOME_MEASURED), "%lld x %lld x %lld: %s %s: %s (%s)", (long long)m, (long long)n, (long long)k,
                  kt_op_candidate_name(op, kt_decision_unit_candidate(d, u)), kt_decision_unit_config(d, u) ? kt_decision_unit_config(d, u) : "",
                  kt_outcome_name(o), kt_decision_unit_message(d, u) ? kt_decision_unit_message(d, u) : "");
        }
        CHECK(units == want_units, "%zu units, want %zu", units, want_units);
        size_t w = kt_decision_winner_unit(d);
        printf("%5lld x %5lld x %5lld: %zu of %zu validated and measured; winner %s %s (%.1f us)\n", (long long)m, (long long)n,
               (long long)k, measured, units, kt_op_candidate_name(op, kt_decision_unit_candidate(d, w)),
               kt_decision_unit_config(d, w) ? kt_decision_unit_config(d, w) : "", kt_decision_unit_time_ns(d, w) / 1e3);
    }
    problem_free(&p, ctx, dev);
}

/* Tiles in M, N and K; a skinny product for split-K and stream-K; a shape with one tile. */
static const int64_t shapes[][3] = {{64, 128, 256}, {100, 200, 96}, {16, 1024, 2048}, {300, 136, 1032}, {1, 8, 8}};

/* Whether the op's default kernels are the wgmma ones (a Hopper GPU). */
static int hopper(ktops_cuda *cu) { return ktops_cuda_compute_capability(cu) == 90; }

/* The mma.sync family (the default elsewhere than on Hopper): its three groups, every
 * configuration validated, and its split groups rejected for a C too large for their workspace. */
static void check_mma_kernels(ktops_cuda *cu, kt_context *ctx, size_t dev) {
    ktops_gemm *g = NULL;
    ktops_gemm_options opt = {.kernels = KTOPS_GEMM_KERNELS_MMA};
    OK(ktops_gemm_create(cu, ctx, dev, "gemm-mma", &opt, &g));
    kt_op *op = ktops_gemm_op(g);
    size_t n = kt_op_candidate_count(op);
    CHECK(n == 12 && strcmp(kt_op_candidate_name(op, 0), "cublas") == 0 && strcmp(kt_op_candidate_name(op, 1), "cublaslt-0") == 0 &&
              strcmp(kt_op_candidate_name(op, 8), "cublaslt-7") == 0 && strcmp(kt_op_candidate_name(op, 9), "mma") == 0 &&
              strcmp(kt_op_candidate_name(op, 11), "mma-streamk") == 0,
          "cublas, cublaslt-0..7, mma, mma-splitk, mma-streamk: %zu candidates (%s, %s, ...)", n, kt_op_candidate_name(op, 0),
          kt_op_candidate_name(op, 1));
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        check_shape(cu, ctx, dev, g, shapes[i][0], shapes[i][1], shapes[i][2], 9 + KERNEL_CONFIGS, "");
    /* C of 2^23 elements: too large for the split kernels' workspace, whose two groups are
     * rejected whole (one unit each) */
    check_shape(cu, ctx, dev, g, 2048, 4096, 64, 9 + DP_CONFIGS + 2, " mma-splitk mma-streamk ");
    ktops_gemm_destroy(g);

    /* tuned in a runner process (options.isolate): every unit validated the same way */
    ktops_gemm_options iso = {.kernels = KTOPS_GEMM_KERNELS_MMA, .isolate = 1};
    OK(ktops_gemm_create(cu, ctx, dev, "gemm-mma-isolated", &iso, &g));
    check_shape(cu, ctx, dev, g, 300, 136, 1032, 9 + KERNEL_CONFIGS, "");
    ktops_gemm_destroy(g);
}

/* The wgmma family, Hopper's default: its two groups with their tensor maps (launch
 * parameters), cooperative and ping-pong blocks, every configuration validated, on small shapes
 * and on ones of many tiles (several per block, so that both ping-pong consumers take tiles). */
static void check_wgmma_kernels(ktops_cuda *cu, kt_context *ctx, size_t dev) {
    ktops_gemm *g = NULL;
    OK(ktops_gemm_create(cu, ctx, dev, "gemm-wgmma", NULL, &g));
    kt_op *op = ktops_gemm_op(g);
    size_t n = kt_op_candidate_count(op);
    CHECK(n == 11 && strcmp(kt_op_candidate_name(op, 9), "wgmma") == 0 && strcmp(kt_op_candidate_name(op, 10), "wgmma-splitk") == 0,
          "cublas, cublaslt-0..7, wgmma, wgmma-splitk: %zu candidates (%s, ...)", n, n > 9 ? kt_op_candidate_name(op, 9) : "");
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        check_shape(cu, ctx, dev, g, shapes[i][0], shapes[i][1], shapes[i][2], 9 + WG_KERNEL_CONFIGS, "");
    /* many tiles, with tails in every dimension of every tile shape */
    check_shape(cu, ctx, dev, g, 2048, 4096, 64, 9 + WG_KERNEL_CONFIGS, "");
    check_shape(cu, ctx, dev, g, 1000, 2056, 200, 9 + WG_KERNEL_CONFIGS, "");
    check_shape(cu, ctx, dev, g, 2056, 1000, 520, 9 + WG_KERNEL_CONFIGS, "");
    /* options.isolate asks for runner processes: the wgmma groups still run here (their tensor
     * maps are made in this process) and validate the same way */
    ktops_gemm_destroy(g);
    ktops_gemm_options iso = {.isolate = 1};
    OK(ktops_gemm_create(cu, ctx, dev, "gemm-wgmma-isolated", &iso, &g));
    check_shape(cu, ctx, dev, g, 300, 136, 1032, 9 + WG_KERNEL_CONFIGS, "");
    ktops_gemm_destroy(g);
}

/* The skinny kernel alone (KTOPS_GEMM_KERNELS_SKINNY, the mma.sync family's GPUs too): its space
 * picks the rows of a block from M, and every configuration validates on shapes with tails. */
static void check_skinny_kernels(ktops_cuda *cu, kt_context *ctx, size_t dev) {
    const int clusters = ktops_cuda_compute_capability(cu) >= 90;
    /* per row class (M of 1-16, 17-32, 33-64): VEC, WARPS, UNROLL and SPLIT within the register estimate */
    CHECK(skinny_units(cu, 16, 4096, 4096) == (clusters ? SKINNY_M16 * 3 : SKINNY_M16) &&
              skinny_units(cu, 1, 8, 8) == skinny_units(cu, 16, 4096, 4096) &&
              skinny_units(cu, 32, 64, 64) == (clusters ? SKINNY_M32 * 3 : SKINNY_M32) &&
              skinny_units(cu, 64, 64, 64) == (clusters ? SKINNY_M64 * 3 : SKINNY_M64) &&
              skinny_units(cu, SKINNY_MAX_M + 1, 64, 64) == 1,
          "the skinny space's configurations: %zu, %zu, %zu, %zu", skinny_units(cu, 16, 4096, 4096), skinny_units(cu, 32, 64, 64),
          skinny_units(cu, 64, 64, 64), skinny_units(cu, SKINNY_MAX_M + 1, 64, 64));
    ktops_gemm *g = NULL;
    ktops_gemm_options opt = {.kernels = KTOPS_GEMM_KERNELS_SKINNY};
    OK(ktops_gemm_create(cu, ctx, dev, "gemm-skinny", &opt, &g));
    kt_op *op = ktops_gemm_op(g);
    CHECK(kt_op_candidate_count(op) == 10 && strcmp(kt_op_candidate_name(op, 9), "skinny") == 0,
          "cublas, cublaslt-0..7, skinny: %zu candidates", kt_op_candidate_count(op));
    static const int64_t skinny[][3] = {{1, 8, 8}, {7, 72, 24}, {16, 1024, 2048}, {24, 520, 1000}, {64, 136, 4104}, {50, 2048, 40}, {100, 264, 520}};
    for (size_t i = 0; i < sizeof skinny / sizeof skinny[0]; i++)
        check_shape(cu, ctx, dev, g, skinny[i][0], skinny[i][1], skinny[i][2],
                    9 + skinny_units(cu, skinny[i][0], skinny[i][1], skinny[i][2]), "");
    check_shape(cu, ctx, dev, g, SKINNY_MAX_M + 1, 64, 64, 9 + 1, " skinny ");
    ktops_gemm_destroy(g);
}

/* The default op of this GPU, and the vendor calls directly. */
static void check_all_candidates(ktops_cuda *cu, kt_context *ctx, size_t dev) {
    if (hopper(cu)) check_wgmma_kernels(cu, ctx, dev);
    check_mma_kernels(cu, ctx, dev);
    check_skinny_kernels(cu, ctx, dev);
    ktops_gemm *g = NULL;
    OK(ktops_gemm_create(cu, ctx, dev, "gemm-vendor", NULL, &g));
    problem p;
    CHECK(problem_init(&p, ctx, dev, 96, 64, 128, 7), "allocating");
    int64_t first = -1;
    OK(ktops_gemm_cublas(g, NULL, p.da, p.db, p.dc, 96, 64, 128));
    OK(ktops_cuda_sync(cu, NULL));
    CHECK(wrong_elements(&p, ctx, dev, &first) == 0, "cublasGemmEx's C");
    OK(ktops_gemm_cublaslt(g, NULL, 0, p.da, p.db, p.dc, 96, 64, 128));
    OK(ktops_cuda_sync(cu, NULL));
    CHECK(wrong_elements(&p, ctx, dev, &first) == 0, "cuBLASLt's first pick's C");
    CHECK(ktops_gemm_cublaslt(g, NULL, 99, p.da, p.db, p.dc, 96, 64, 128) == KT_ERR_BACKEND &&
              strstr(ktops_last_error(), "not rank 99") != NULL,
          "a rank the heuristic does not offer: %s", ktops_last_error());
    CHECK(ktops_gemm_run(g, NULL, p.da, p.db, p.dc, 0, 64, 128) == KT_ERR_INVALID_ARGUMENT &&
              strstr(ktops_last_error(), "M, N, K = 0, 64, 128") != NULL,
          "M = 0 refused: %s", ktops_last_error());
    problem_free(&p, ctx, dev);
    ktops_gemm_destroy(g);
    ktops_gemm_options bad = {.kernels = 8};
    CHECK(ktops_gemm_create(cu, ctx, dev, "gemm-bad", &bad, &g) == KT_ERR_INVALID_ARGUMENT &&
              strstr(ktops_last_error(), "kernels 8") != NULL,
          "kernels 8 refused: %s", ktops_last_error());
}

static void check_without_cublaslt(ktops_cuda *cu, kt_context *ctx, size_t dev) {
    ktops_gemm *g = NULL;
    ktops_gemm_options opt = {.cublaslt_path = "", .cublas_path = ""};
    OK(ktops_gemm_create(cu, ctx, dev, "gemm-no-vendor", &opt, &g));
    kt_op *op = ktops_gemm_op(g);
    if (hopper(cu))
        CHECK(kt_op_candidate_count(op) == 2 && strcmp(kt_op_candidate_name(op, 0), "wgmma") == 0 &&
                  strcmp(kt_op_candidate_name(op, 1), "wgmma-splitk") == 0,
              "without cuBLASLt only the kernels: %zu candidates", kt_op_candidate_count(op));
    else
        CHECK(kt_op_candidate_count(op) == 3 && strcmp(kt_op_candidate_name(op, 0), "mma") == 0 &&
                  strcmp(kt_op_candidate_name(op, 1), "mma-splitk") == 0 && strcmp(kt_op_candidate_name(op, 2), "mma-streamk") == 0,
              "without cuBLASLt only the kernels: %zu candidates", kt_op_candidate_count(op));
    /* the reference is then the first kernel configuration: every other one validated against it */
    check_shape(cu, ctx, dev, g, 100, 200, 96, hopper(cu) ? WG_KERNEL_CONFIGS : KERNEL_CONFIGS, "");
    problem p;
    CHECK(problem_init(&p, ctx, dev, 8, 8, 8, 3), "allocating");
    CHECK(ktops_gemm_cublas(g, NULL, p.da, p.db, p.dc, 8, 8, 8) == KT_ERR_BACKEND, "no cuBLAS to call directly");
    problem_free(&p, ctx, dev);
    ktops_gemm_destroy(g);

    /* and nothing at all: vendor libraries hidden, kernels left out */
    opt.no_kernels = 1;
    CHECK(ktops_gemm_create(cu, ctx, dev, "gemm-nothing", &opt, &g) == KT_ERR_NO_CANDIDATES &&
              strstr(ktops_last_error(), "no candidates") != NULL,
          "an op with no candidate is refused: %s", ktops_last_error());
}

static void check_cached(ktops_cuda *cu, size_t *dev_out) {
    const int64_t m = 48, n = 256, k = 512;
    for (int run = 0; run < 2; run++) {
        kt_context *ctx = context(cache_path);
        if (kt_context_cache(ctx) == NULL) {
            CHECK(0, "this build has no persistent cache (no SQLite development files): the second run cannot be checked");
            kt_context_destroy(ctx);
            return;
        }
        /* a decision below the confidence its race asked for is re-raced by the next run, by
         * design (test-persist.c pins that): at this small shape cuBLAS, cuBLASLt's picks and the
         * kernels are within a few percent of each other, and a race at 1% tolerance ended
         * unsettled in 3 of 20 runs on the H200. At 50% they count as equally fast, so the first
         * decision is settled and the second run must be served from the cache. */
        OK(kt_context_set_race(ctx, 0.99, 0.5, 100));
        size_t dev = cuda_device(ctx);
        *dev_out = dev;
        ktops_gemm *g = NULL;
        ktops_gemm_options opt = {.cublaslt_top_k = 4};
        OK(ktops_gemm_create(cu, ctx, dev, "gemm-cached", &opt, &g));
        problem p;
        CHECK(problem_init(&p, ctx, dev, m, n, k, 11), "allocating");
        OK(ktops_gemm_run(g, NULL, p.da, p.db, p.dc, m, n, k));
        OK(ktops_cuda_sync(cu, NULL));
        int64_t first = -1;
        CHECK(wrong_elements(&p, ctx, dev, &first) == 0, "run %d: C", run + 1);
        kt_op *op = ktops_gemm_op(g);
        const kt_decision *d = NULL;
        OK(ktops_gemm_decision(g, p.da, p.db, p.dc, m, n, k, &d));
        if (run == 0)
            CHECK(kt_op_tune_count(op) == 1 && kt_decision_source_of(d) == KT_SOURCE_MEASURED && !kt_decision_below_confidence(d),
                  "the first run tunes, and settles: confidence %.4f", kt_decision_confidence(d));
        else
            CHECK(kt_op_tune_count(op) == 0 && kt_decision_source_of(d) == KT_SOURCE_CACHE && kt_context_cache_hits(ctx) >= 1,
                  "the second run is served from the cache without tuning: tuned %llu, source %d",
                  (unsigned long long)kt_op_tune_count(op), (int)kt_decision_source_of(d));
        printf("run %d: winner %s\n", run + 1, kt_op_candidate_name(op, kt_decision_winner(d)));
        problem_free(&p, ctx, dev);
        ktops_gemm_destroy(g);
        kt_context_destroy(ctx);
    }
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/kt-gemm-check-XXXXXX");
    if (mkdtemp(dir) == NULL) return 1;
    snprintf(artifacts, sizeof artifacts, "%s/artifacts", dir);
    snprintf(cache_path, sizeof cache_path, "%s/cache.sqlite", dir);
    kt_context *ctx = context("off");
    size_t dev = cuda_device(ctx);
    if (dev == (size_t)-1) {
        printf("no CUDA device: nothing checked\n0 passed, 1 failed\n");
        return 1;
    }
    ktops_cuda *cu = NULL;
    if (ktops_cuda_open(ctx, dev, &cu) != KT_OK) {
        printf("FAIL: ktops_cuda_open: %s\n0 passed, 1 failed\n", ktops_last_error());
        return 1;
    }
    printf("device: %s, %d SMs\n", kt_device_name(kt_context_device(ctx, dev)), ktops_cuda_sm_count(cu));
    check_all_candidates(cu, ctx, dev);
    check_without_cublaslt(cu, ctx, dev);
    size_t dev2;
    check_cached(cu, &dev2);
    ktops_cuda_close(cu);
    kt_context_destroy(ctx);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) printf("could not remove %s\n", dir);
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
