/*
 * cuda-check.c - the CUDA backend's test suite, run on a machine with an NVIDIA GPU by
 * scripts/gpu-check (CI compiles it; it needs no CUDA headers and no test framework, since the
 * GPU machine's image has neither cmocka nor a package manager).
 *
 * Checks: a tiled matrix multiply tuned over tile and block defines with a wrong variant
 * (validation) and a broken one (NVRTC error, recorded); configurations rejected before they
 * are compiled by the device's block-size and shared-memory limits; a kernel using more than
 * 48 KB of dynamic shared memory (opt-in); an in-place kernel whose device buffer holds one
 * launch's result after tuning; sixteen variants compiled in parallel, then found in the
 * artifact cache by a second context; a crashing variant isolated; launch sizes from each call's
 * arguments; constant memory, from threads too; a damaged artifact rebuilt. The streams are
 * cuda-check-streams.c's, the device's checks and builds cuda-check-device.c's.
 * Prints one line per check and closes with "N passed, N failed".
 */
#define _GNU_SOURCE /* mkdtemp */
#include "cuda-check.h"

#include <kerntune.h>
#include <kerntune/backend.h>
#include <kerntune/inputs.h>
#include <kerntune/cache.h>
#include <kerntune/decision.h>
#include <kerntune/device.h>
#include <kerntune/measure.h>
#include <kerntune/validation.h>
#include <kerntune/variants.h>

#include <dirent.h>
#include <math.h>
#include <dlfcn.h>
#include <stdatomic.h>
#include <time.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#if defined(__linux__)
#include <sys/prctl.h>
#endif

static const char *matmul_cu =
    "#if BAD\n"
    "this does not compile;\n"
    "#endif\n"
    "__global__ void matmul(const float *a, const float *b, float *c, long n) {\n"
    "    long col0 = ((long)blockIdx.x * BX + threadIdx.x) * TM, row = blockIdx.y;\n"
    "    float acc[TM];\n"
    "    for (int t = 0; t < TM; t++) acc[t] = 0;\n"
    "    for (long k = 0; k < n - WRONG; k++) {\n"
    "        float av = a[row * n + k];\n"
    "        for (int t = 0; t < TM; t++) acc[t] += av * b[k * n + col0 + t];\n"
    "    }\n"
    "    for (int t = 0; t < TM; t++) c[row * n + col0 + t] = acc[t];\n"
    "}\n";

static const char *shmem_cu =
    "__global__ void reverse(float *v, long n) {\n"
    "    extern __shared__ float tile[];\n"
    "    long i = threadIdx.x;\n"
    "    for (long k = i; k < n; k += blockDim.x) tile[k] = v[k];\n"
    "    __syncthreads();\n"
    "    for (long k = i; k < n; k += blockDim.x) v[k] = tile[n - 1 - k] * SCALE;\n"
    "}\n";

static kt_space *mm_space(const char *tm, const char *bx, const char *bad, const char *wrong, const char *shmem) {
    kt_space *sp = NULL;
    /* the constraint keeps the grid whole; a block too large for the device is let through, to
     * be rejected by the device's limits instead */
    if (kt_space_create(&sp) || kt_space_add_input(sp, "n") || kt_space_add_param(sp, "TM", tm) ||
        kt_space_add_param(sp, "BX", bx) || kt_space_add_param(sp, "BAD", bad) || kt_space_add_derived(sp, "WRONG", wrong) ||
        kt_space_add_constraint(sp, "BX > 1024 or (n // TM) % BX == 0")) {
        printf("FAIL: space: %s\n", kt_last_error());
        exit(1);
    }
    const char *grid[3] = {"n // TM // BX", "n", NULL}, *block[3] = {"BX", NULL, NULL};
    if (kt_space_set_geometry(sp, KT_GEOMETRY_GRID, grid, block, shmem) != KT_OK) exit(1);
    return sp;
}

#define N 256

static void check_tiled_matmul(void) {
    kt_context *ctx = context();
    size_t dev = cuda_device(ctx);
    CHECK(dev != (size_t)-1, "no CUDA device");
    if (dev == (size_t)-1) return;
    printf("device %zu: %s\n  %s\n", dev, kt_device_name(kt_context_device(ctx, dev)),
           kt_device_fingerprint(kt_context_device(ctx, dev)));
    static float a[N * N], b[N * N], c[N * N], ref[N * N];
    for (int i = 0; i < N * N; i++) a[i] = (float)((i * 7) % 13) - 6, b[i] = (float)((i * 5) % 11) - 5;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            float s = 0;
            for (int k = 0; k < N; k++) s += a[i * N + k] * b[k * N + j];
            ref[i * N + j] = s;
        }
    void *da, *db, *dc;
    OK(kt_device_alloc(ctx, dev, sizeof a, &da));
    OK(kt_device_alloc(ctx, dev, sizeof b, &db));
    OK(kt_device_alloc(ctx, dev, sizeof c, &dc));
    OK(kt_device_write(ctx, dev, da, a, sizeof a));
    OK(kt_device_write(ctx, dev, db, b, sizeof b));
    kt_op *op = NULL;
    OK(kt_op_create(ctx, "cumatmul", &op));
    OK(kt_op_set_device(op, dev));
    OK(kt_op_add_buffer(op, "a", KT_TYPE_F32, KT_READ_ONLY));
    OK(kt_op_add_buffer(op, "b", KT_TYPE_F32, KT_READ_ONLY));
    OK(kt_op_add_buffer(op, "c", KT_TYPE_F32, KT_WRITE_ONLY));
    OK(kt_op_add_scalar(op, "n", KT_TYPE_I64));
    kt_space *naive = mm_space("[1]", "[32]", "[0]", "0", NULL);
    kt_space *tiled = mm_space("[1, 2, 4]", "[32, 64, 128]", "[0]", "1 if TM == 4 and BX == 64 else 0", NULL);
    kt_space *broken = mm_space("[2]", "[32]", "[1]", "0", NULL);
    kt_space *huge = mm_space("[1]", "[2048]", "[0]", "0", NULL);               /* too many threads */
    kt_space *greedy = mm_space("[1]", "[32]", "[0]", "0", "1 << 30");           /* too much shared memory */
    OK(kt_op_add_variants(op, "naive", naive, matmul_cu, "matmul", NULL, 0));
    OK(kt_op_add_variants(op, "tiled", tiled, matmul_cu, "matmul", NULL, 0));
    OK(kt_op_add_variants(op, "broken", broken, matmul_cu, "matmul", NULL, 0));
    OK(kt_op_add_variants(op, "huge", huge, matmul_cu, "matmul", NULL, 0));
    OK(kt_op_add_variants(op, "greedy", greedy, matmul_cu, "matmul", NULL, 0));
    kt_space_destroy(naive), kt_space_destroy(tiled), kt_space_destroy(broken), kt_space_destroy(huge), kt_space_destroy(greedy);
    OK(kt_op_set_default(op, "naive"));
    uint64_t compiles = kt_context_compile_count(ctx) + kt_context_artifact_hits(ctx);
    kt_arg args[] = {kt_arg_buf(da, sizeof a), kt_arg_buf(db, sizeof b), kt_arg_buf(dc, sizeof c), kt_arg_i64(N)};
    OK(kt_op_call(op, args, 4));
    OK(kt_device_read(ctx, dev, c, dc, sizeof c));
    CHECK(memcmp(c, ref, sizeof c) == 0, "the result differs from the host's");
    const kt_decision *d = NULL;
    OK(kt_op_decision(op, args, 4, &d));
    CHECK(kt_decision_validated(d), "not validated");
    /* naive 1 + tiled 8 (TM=4, BX=128 breaks the constraint) + broken 1 + huge 1 + greedy 1.
     * The two rejected are never compiled, and naive's code is tiled's TM=1,BX=32: built once,
     * so 8 + 1 builds. */
    CHECK(kt_decision_unit_count(d) == 12, "%zu units", kt_decision_unit_count(d));
    CHECK(kt_context_compile_count(ctx) + kt_context_artifact_hits(ctx) - compiles == 9, "%llu builds",
          (unsigned long long)(kt_context_compile_count(ctx) + kt_context_artifact_hits(ctx) - compiles));
    int measured = 0;
    for (size_t u = 0; u < kt_decision_unit_count(d); u++) {
        const char *cfg = kt_decision_unit_config(d, u), *msg = kt_decision_unit_message(d, u);
        const char *cand = kt_op_candidate_name(op, kt_decision_unit_candidate(d, u));
        kt_outcome o = kt_decision_unit_outcome(d, u);
        printf("  %-7s %-44s outcome %d  %10.1f us  %s\n", cand, cfg, (int)o, kt_decision_unit_time_ns(d, u) / 1e3,
               msg ? msg : "");
        if (strcmp(cand, "broken") == 0) CHECK(o == KT_OUTCOME_BUILD_FAILED && msg && strstr(msg, "error"), "broken: %d", o);
        else if (strcmp(cand, "huge") == 0) CHECK(o == KT_OUTCOME_REJECTED && msg && strstr(msg, "threads per block"), "huge: %d", o);
        else if (strcmp(cand, "greedy") == 0) CHECK(o == KT_OUTCOME_REJECTED && msg && strstr(msg, "shared memory"), "greedy: %d", o);
        else if (strstr(cfg, "WRONG=1")) CHECK(o == KT_OUTCOME_INVALID, "wrong variant: %d", o);
        else {
            CHECK(o == KT_OUTCOME_MEASURED && kt_decision_unit_time_ns(d, u) > 0, "%s: %d", cfg, o);
            measured++;
        }
    }
    CHECK(measured == 8, "%d measured", measured);
    printf("  winner: %s %s\n", kt_op_candidate_name(op, kt_decision_winner(d)),
           kt_decision_unit_config(d, kt_decision_winner_unit(d)));
    memset(c, 0, sizeof c);
    OK(kt_device_write(ctx, dev, dc, c, sizeof c));
    OK(kt_op_call(op, args, 4));
    OK(kt_device_read(ctx, dev, c, dc, sizeof c));
    CHECK(memcmp(c, ref, sizeof c) == 0, "the dispatched result differs");
    kt_device_free(ctx, dev, da), kt_device_free(ctx, dev, db), kt_device_free(ctx, dev, dc);
    kt_context_destroy(ctx);
}

/* More than 48 KB of dynamic shared memory needs the function's opt-in. */
static void check_large_shared_memory(void) {
    kt_context *ctx = context();
    size_t dev = cuda_device(ctx);
    if (dev == (size_t)-1) return;
    enum { M = 16384 }; /* 64 KB of floats */
    static float v[M], expect[M];
    for (int i = 0; i < M; i++) v[i] = (float)i;
    for (int i = 0; i < M; i++) expect[i] = v[M - 1 - i] * 2.0f;
    void *dv;
    OK(kt_device_alloc(ctx, dev, sizeof v, &dv));
    OK(kt_device_write(ctx, dev, dv, v, sizeof v));
    kt_op *op = NULL;
    OK(kt_op_create(ctx, "reverse", &op));
    OK(kt_op_set_device(op, dev));
    OK(kt_op_add_buffer(op, "v", KT_TYPE_F32, KT_READ_WRITE));
    OK(kt_op_add_scalar(op, "n", KT_TYPE_I64));
    kt_space *sp = NULL;
    OK(kt_space_create(&sp));
    OK(kt_space_add_input(sp, "n"));
    OK(kt_space_add_param(sp, "THREADS", "[128, 256]"));
    OK(kt_space_add_param(sp, "SCALE", "[2.0]"));
    const char *grid[3] = {NULL, NULL, NULL}, *block[3] = {"THREADS", NULL, NULL};
    OK(kt_space_set_geometry(sp, KT_GEOMETRY_GRID, grid, block, "n * 4"));
    OK(kt_op_add_variants(op, "reverse", sp, shmem_cu, "reverse", NULL, 0));
    kt_space_destroy(sp);
    kt_arg args[] = {kt_arg_buf(dv, sizeof v), kt_arg_i64(M)};
    OK(kt_op_call(op, args, 2));
    OK(kt_device_read(ctx, dev, v, dv, sizeof v));
    CHECK(memcmp(v, expect, sizeof v) == 0, "64 KB shared-memory kernel gave a wrong result");
    kt_device_free(ctx, dev, dv);
    kt_context_destroy(ctx);
}

/* v *= s in place over variants: one launch's worth in the device buffer afterwards. */
static void check_inplace(void) {
    kt_context *ctx = context();
    size_t dev = cuda_device(ctx);
    if (dev == (size_t)-1) return;
    enum { M = 1 << 20 };
    float *v = malloc(M * sizeof *v), *expect = malloc(M * sizeof *v);
    for (int i = 0; i < M; i++) v[i] = (float)(i % 1000) - 499.5f, expect[i] = v[i] * 1.5f;
    void *dv;
    OK(kt_device_alloc(ctx, dev, M * sizeof *v, &dv));
    OK(kt_device_write(ctx, dev, dv, v, M * sizeof *v));
    kt_op *op = scale_op(ctx, dev, "scale");
    if (op == NULL) return;
    OK(add_scale(op, "scale", "[1, 2, 4, 8]", "[128, 256]", NULL, 0));
    kt_arg args[] = {kt_arg_buf(dv, M * sizeof *v), kt_arg_f32(1.5f)};
    OK(kt_op_call(op, args, 2));
    OK(kt_device_read(ctx, dev, v, dv, M * sizeof *v));
    CHECK(memcmp(v, expect, M * sizeof *v) == 0, "in-place buffer is not one launch's result");
    /* the cache flush (tuning's, and kt_device_flush) reads its own buffer and touches nobody's */
    OK(kt_device_flush(ctx, dev));
    OK(kt_device_flush(ctx, dev));
    OK(kt_device_read(ctx, dev, v, dv, M * sizeof *v));
    CHECK(memcmp(v, expect, M * sizeof *v) == 0, "a buffer changed across kt_device_flush");
    kt_device_free(ctx, dev, dv);
    free(v), free(expect);
    kt_context_destroy(ctx);
}

/* A second context (as a second process would) finds every artifact: zero compiles. */
static void check_artifact_cache(void) {
    for (int round = 0; round < 2; round++) {
        kt_context *ctx = context();
        size_t dev = cuda_device(ctx);
        if (dev == (size_t)-1) return;
        kt_op *op = scale_op(ctx, dev, "cached");
        if (op == NULL) return;
        OK(add_scale(op, "scale16", "[1, 2, 4, 8]", "[32, 64, 128, 256]", (const char *const[]){"-DCACHE_CHECK=1"}, 1));
        void *dv;
        OK(kt_device_alloc(ctx, dev, 1 << 20, &dv));
        kt_arg args[] = {kt_arg_buf(dv, 1 << 20), kt_arg_f32(1.0f)};
        OK(kt_op_tune(op, args, 2));
        printf("  round %d: %llu compiles, %llu artifact hits\n", round, (unsigned long long)kt_context_compile_count(ctx),
               (unsigned long long)kt_context_artifact_hits(ctx));
        /* 16 configurations, 4 codes: the kernel reads PER; B only sets the block, and
         * configurations whose preprocessed code is the same share one build (build/pp.c) */
        if (round == 0) CHECK(kt_context_compile_count(ctx) == 4, "%llu compiles", (unsigned long long)kt_context_compile_count(ctx));
        else CHECK(kt_context_compile_count(ctx) == 0 && kt_context_artifact_hits(ctx) == 4, "second context compiled %llu",
                   (unsigned long long)kt_context_compile_count(ctx));
        kt_device_free(ctx, dev, dv);
        kt_context_destroy(ctx);
    }
}

static const char *poison_cu =
    "__global__ void twice(float *out, const float *in, long n) {\n"
    "    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "#if MODE == 1\n"
    "    ((volatile float *)0x10)[i] = 1.0f; /* an illegal address: the context is lost */\n"
    "#elif MODE == 2\n"
    "    __trap();\n"
    "#endif\n"
    "    for (int r = 0; r < (MODE == 3 ? 50 : 1); r++)\n"
    "        if (i < n) out[i] = 2.0f * in[i] + 0.0f * r;\n"
    "}\n";

/* A CUDA candidate that hits an illegal address and one that traps run in a runner process
 * (the default for CUDA): both are disqualified, the runner is replaced, the other candidates
 * are measured and the right one chosen; this process's context still works. */
static void check_isolation(void) {
    kt_context *ctx = context();
    OK(kt_context_set_policy(ctx, KT_POLICY_RACE));
    size_t dev = cuda_device(ctx);
    if (dev == (size_t)-1) return;
    enum { M = 1 << 20 };
    static float in[M], out[M];
    for (int i = 0; i < M; i++) in[i] = (float)(i % 1000);
    void *din, *dout;
    OK(kt_device_alloc(ctx, dev, sizeof in, &din));
    OK(kt_device_alloc(ctx, dev, sizeof out, &dout));
    OK(kt_device_write(ctx, dev, din, in, sizeof in));
    kt_op *op = NULL;
    OK(kt_op_create(ctx, "poison", &op));
    OK(kt_op_set_device(op, dev));
    OK(kt_op_add_buffer(op, "out", KT_TYPE_F32, KT_WRITE_ONLY));
    OK(kt_op_add_buffer(op, "in", KT_TYPE_F32, KT_READ_ONLY));
    OK(kt_op_add_scalar(op, "n", KT_TYPE_I64));
    kt_space *sp = NULL;
    OK(kt_space_create(&sp));
    OK(kt_space_add_input(sp, "n"));
    OK(kt_space_add_param(sp, "MODE", "[0, 1, 2, 3]"));
    const char *grid[3] = {"(n + 255) // 256", NULL, NULL}, *block[3] = {"256", NULL, NULL};
    OK(kt_space_set_geometry(sp, KT_GEOMETRY_GRID, grid, block, NULL));
    OK(kt_op_add_variants(op, "twice", sp, poison_cu, "twice", NULL, 0));
    kt_space_destroy(sp);
    kt_arg args[3] = {kt_arg_buf(dout, sizeof out), kt_arg_buf(din, sizeof in), kt_arg_i64(M)};
    OK(kt_op_call(op, args, 3));
    OK(kt_device_read(ctx, dev, out, dout, sizeof out));
    int wrong = 0;
    for (int i = 0; i < M; i++) wrong += out[i] != 2.0f * in[i];
    CHECK(wrong == 0, "%d elements wrong", wrong);
    const kt_decision *d = NULL;
    OK(kt_op_decision(op, args, 3, &d));
    printf("isolation:\n");
    for (size_t u = 0; u < kt_decision_unit_count(d); u++) {
        kt_outcome o = kt_decision_unit_outcome(d, u);
        const char *msg = kt_decision_unit_message(d, u);
        printf("  %-8s outcome %d %10.1f us  %s\n", kt_decision_unit_config(d, u), (int)o, kt_decision_unit_time_ns(d, u) / 1e3,
               msg ? msg : "");
        const char *cfg = kt_decision_unit_config(d, u);
        if (strcmp(cfg, "MODE=1") == 0 || strcmp(cfg, "MODE=2") == 0)
            CHECK(o == KT_OUTCOME_FAILED && msg && strstr(msg, "runner was replaced"), "%s: outcome %d: %s", cfg, (int)o, msg ? msg : "");
        else
            CHECK(o == KT_OUTCOME_MEASURED, "%s: outcome %d", cfg, (int)o);
    }
    CHECK(strcmp(kt_decision_unit_config(d, kt_decision_winner_unit(d)), "MODE=0") == 0, "winner %s",
          kt_decision_unit_config(d, kt_decision_winner_unit(d)));
    /* this process's context is fine: a copy and a hit both work */
    memset(out, 0, sizeof out);
    OK(kt_device_write(ctx, dev, dout, out, sizeof out));
    OK(kt_op_call(op, args, 3));
    OK(kt_device_read(ctx, dev, out, dout, sizeof out));
    CHECK(out[M - 1] == 2.0f * in[M - 1], "after: %g", (double)out[M - 1]);
    kt_device_free(ctx, dev, din);
    kt_device_free(ctx, dev, dout);
    kt_context_destroy(ctx);
}

/* ---- launch sizes from each call's arguments (issue [8] A) ----------------------------------- */

static const char *twice_cu =
    "__global__ void twice(float *out, const float *in, long n) {\n"
    "    long i = ((long)blockIdx.x * blockDim.x + threadIdx.x) * PER;\n"
    "    for (int k = 0; k < PER; k++) out[i + k] = 2.0f * in[i + k] + 1.0f;\n"
    "}\n";

static const char *upto_cu =
    "__global__ void upto(float *out, const float *in, long n) {\n"
    "    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < COUNT; i += (long)gridDim.x * blockDim.x)\n"
    "        out[i] = 2.0f * in[i] + 1.0f;\n"
    "}\n";

#define CAP (1048576 + 1024)

typedef struct sized {
    kt_context *ctx;
    size_t dev;
    void *din, *dout;
    float *host;
} sized;

/* Calls op on the first n elements of buffers of CAP; every element below n must hold 2 in + 1
 * and none at or past n may be written. Returns 0 when so. */
static int call_sized(sized *z, kt_op *op, long n) {
    for (long i = 0; i < CAP; i++) z->host[i] = (float)(i % 1000) * 0.5f;
    if (kt_device_write(z->ctx, z->dev, z->din, z->host, CAP * sizeof(float)) != KT_OK) return -1;
    for (long i = 0; i < CAP; i++) z->host[i] = -7.0f;
    if (kt_device_write(z->ctx, z->dev, z->dout, z->host, CAP * sizeof(float)) != KT_OK) return -1;
    kt_arg args[] = {kt_arg_buf(z->dout, (size_t)n * sizeof(float)), kt_arg_buf(z->din, (size_t)n * sizeof(float)), kt_arg_i64(n)};
    kt_status st = kt_op_call(op, args, 3);
    CHECK(st == KT_OK, "n = %ld: %s: %s", n, kt_status_name(st), kt_last_error());
    if (st != KT_OK || kt_device_read(z->ctx, z->dev, z->host, z->dout, CAP * sizeof(float)) != KT_OK) return -1;
    long wrong = 0, past = 0;
    for (long i = 0; i < n; i++) wrong += z->host[i] != 2.0f * ((float)(i % 1000) * 0.5f) + 1.0f;
    for (long i = n; i < CAP; i++) past += z->host[i] != -7.0f;
    CHECK(wrong == 0 && past == 0, "%s, n = %ld: %ld of %ld elements wrong, %ld written past the end", kt_op_name(op), n, wrong, n,
          past);
    return wrong || past ? 1 : 0;
}

static kt_op *sized_op(sized *z, const char *name, const char *src, const char *kernel, kt_space *sp, int pow2) {
    kt_op *op = NULL;
    if (kt_op_create(z->ctx, name, &op) || kt_op_set_device(op, z->dev) ||
        kt_op_add_buffer(op, "out", KT_TYPE_F32, KT_WRITE_ONLY) || kt_op_add_buffer(op, "in", KT_TYPE_F32, KT_READ_ONLY) ||
        kt_op_add_scalar(op, "n", KT_TYPE_I64) || (pow2 && kt_op_key_arg(op, 2, KT_BUCKET_POW2)) ||
        kt_op_add_variants(op, name, sp, src, kernel, NULL, 0)) {
        printf("FAIL: op %s: %s\n", name, kt_last_error());
        failed++;
        op = NULL;
    }
    kt_space_destroy(sp);
    return op;
}

static void check_launch_sizes(void) {
    sized z = {.ctx = context()};
    z.dev = cuda_device(z.ctx);
    if (z.dev == (size_t)-1) return;
    z.host = malloc(CAP * sizeof(float));
    OK(kt_device_alloc(z.ctx, z.dev, CAP * sizeof(float), &z.din));
    OK(kt_device_alloc(z.ctx, z.dev, CAP * sizeof(float), &z.dout));
    /* grid = n // PER // B: each call computes it from its own n */
    for (int pow2 = 0; pow2 < 2; pow2++) {
        kt_space *sp = NULL;
        OK(kt_space_create(&sp));
        OK(kt_space_add_input(sp, "n"));
        OK(kt_space_add_param(sp, "PER", "[1, 4]"));
        OK(kt_space_add_param(sp, "B", "[8]"));
        const char *grid[3] = {"n // PER // B", NULL, NULL}, *block[3] = {"B", NULL, NULL};
        OK(kt_space_set_geometry(sp, KT_GEOMETRY_GRID, grid, block, NULL));
        kt_op *op = sized_op(&z, pow2 ? "twice_pow2" : "twice_nokey", twice_cu, "twice", sp, pow2);
        if (op == NULL) return;
        if (!pow2) {
            call_sized(&z, op, 1024);
            call_sized(&z, op, 1048576);
            call_sized(&z, op, 544);
            CHECK(kt_op_tune_count(op) == 1, "tuned %llu times", (unsigned long long)kt_op_tune_count(op));
        } else {
            /* sizes the grid n // PER // B covers whole (multiples of 32), all in bucket 1024 */
            call_sized(&z, op, 608);
            call_sized(&z, op, 992);
            call_sized(&z, op, 544);
            CHECK(kt_op_tune_count(op) == 1, "tuned %llu times inside one bucket", (unsigned long long)kt_op_tune_count(op));
            call_sized(&z, op, 3008);
            CHECK(kt_op_tune_count(op) == 2, "tuned %llu times across buckets", (unsigned long long)kt_op_tune_count(op));
        }
    }
    /* a count compiled in (a derived value of n): n keyed exactly */
    kt_space *sp = NULL;
    OK(kt_space_create(&sp));
    OK(kt_space_add_input(sp, "n"));
    OK(kt_space_add_param(sp, "B", "[64, 128]"));
    OK(kt_space_add_derived(sp, "COUNT", "n"));
    const char *grid[3] = {"4", NULL, NULL}, *block[3] = {"B", NULL, NULL};
    OK(kt_space_set_geometry(sp, KT_GEOMETRY_GRID, grid, block, NULL));
    kt_op *op = sized_op(&z, "upto", upto_cu, "upto", sp, 1);
    if (op == NULL) return;
    call_sized(&z, op, 600);
    call_sized(&z, op, 1000);
    call_sized(&z, op, 520);
    call_sized(&z, op, 1000);
    CHECK(kt_op_tune_count(op) == 3, "upto tuned %llu times (600, 1000, 520)", (unsigned long long)kt_op_tune_count(op));
    const kt_decision *d = NULL;
    kt_arg args[] = {kt_arg_buf(z.dout, 1000 * sizeof(float)), kt_arg_buf(z.din, 1000 * sizeof(float)), kt_arg_i64(1000)};
    OK(kt_op_decision(op, args, 3, &d));
    CHECK(kt_decision_key_len(d) == 2 && kt_decision_key(d, 1) == 1000, "key (%lld, %lld)", (long long)kt_decision_key(d, 0),
          (long long)kt_decision_key(d, 1));
    kt_device_free(z.ctx, z.dev, z.din), kt_device_free(z.ctx, z.dev, z.dout);
    free(z.host);
    kt_context_destroy(z.ctx);
}

/* ---- constant memory (issue [8] C) ------------------------------------------------------------- */

/* out[i] = in[i] * weights[i % 16]: the weights are read from __constant__ memory; the kernel
 * takes the buffer as a parameter too (every argument is one) and ignores it */
static const char *cmem_cu =
    "__constant__ float weights[16];\n"
    "__global__ void weigh(float *out, const float *in, const float *unused, long n) {\n"
    "    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n) out[i] = in[i] * weights[i % 16] + OFFSET;\n"
    "}\n";

/* The op out[i] = in[i] * weights[i % 16] (+ OFFSET) with its third argument in constant memory
 * under the name cname, over the values B and OFFSET take; NULL (a failure counted) when it
 * cannot be made. */
static kt_op *weigh_op(kt_context *ctx, size_t dev, const char *name, const char *cname, const char *bs, const char *offsets) {
    kt_op *op = NULL;
    kt_space *sp = NULL;
    const char *grid[3] = {"(n + B - 1) // B", NULL, NULL}, *block[3] = {"B", NULL, NULL};
    if (kt_op_create(ctx, name, &op) || kt_op_set_device(op, dev) || kt_op_add_buffer(op, "out", KT_TYPE_F32, KT_WRITE_ONLY) ||
        kt_op_add_buffer(op, "in", KT_TYPE_F32, KT_READ_ONLY) || kt_op_add_buffer(op, cname, KT_TYPE_F32, KT_READ_ONLY) ||
        kt_op_add_scalar(op, "n", KT_TYPE_I64) || kt_op_set_constant(op, 2) || kt_space_create(&sp) ||
        kt_space_add_input(sp, "n") || kt_space_add_param(sp, "B", bs) || kt_space_add_param(sp, "OFFSET", offsets) ||
        kt_space_set_geometry(sp, KT_GEOMETRY_GRID, grid, block, NULL) || kt_op_add_variants(op, "weigh", sp, cmem_cu, "weigh", NULL, 0)) {
        CHECK(0, "op %s: %s", name, kt_last_error());
        op = NULL;
    }
    kt_space_destroy(sp);
    return op;
}

static void check_constant_memory(void) {
    kt_context *ctx = context();
    size_t dev = cuda_device(ctx);
    if (dev == (size_t)-1) return;
    enum { M = 4096 };
    float in[M], out[M], w[16];
    for (int i = 0; i < M; i++) in[i] = (float)(i % 7) - 3;
    void *din, *dout, *dw;
    OK(kt_device_alloc(ctx, dev, sizeof in, &din));
    OK(kt_device_alloc(ctx, dev, sizeof out, &dout));
    OK(kt_device_alloc(ctx, dev, sizeof w, &dw));
    OK(kt_device_write(ctx, dev, din, in, sizeof in));
    /* OFFSET=1 is wrong: validation must catch it */
    kt_op *op = weigh_op(ctx, dev, "weigh", "weights", "[64, 256]", "[0, 1]");
    if (op == NULL) return;
    OK(kt_op_set_reference(op, "weigh")); /* its first configuration, B=64 OFFSET=0 */
    for (int round = 0; round < 2; round++) { /* tune, then a hit with other weights */
        for (int k = 0; k < 16; k++) w[k] = round ? (float)(k * k) * 0.25f : (float)k + 1;
        OK(kt_device_write(ctx, dev, dw, w, sizeof w));
        kt_arg args[] = {kt_arg_buf(dout, sizeof out), kt_arg_buf(din, sizeof in), kt_arg_buf(dw, sizeof w), kt_arg_i64(M)};
        OK(kt_op_call(op, args, 4));
        OK(kt_device_read(ctx, dev, out, dout, sizeof out));
        int bad = 0;
        for (int i = 0; i < M; i++) bad += out[i] != in[i] * w[i % 16];
        CHECK(bad == 0, "constant memory, round %d: %d of %d elements wrong", round, bad, M);
        const kt_decision *d = NULL;
        OK(kt_op_decision(op, args, 4, &d));
        int invalid = 0;
        for (size_t u = 0; u < kt_decision_unit_count(d); u++)
            if (strstr(kt_decision_unit_config(d, u), "OFFSET=1")) invalid += kt_decision_unit_outcome(d, u) == KT_OUTCOME_INVALID;
        CHECK(invalid == 2, "%d OFFSET=1 configurations invalid, expected 2", invalid);
    }
    /* a variant without the __constant__ variable fails to build or load, with the name */
    kt_op *bad = weigh_op(ctx, dev, "noconst", "filter", "[64]", "[0]");
    if (bad == NULL) return;
    kt_arg args[] = {kt_arg_buf(dout, sizeof out), kt_arg_buf(din, sizeof in), kt_arg_buf(dw, sizeof w), kt_arg_i64(M)};
    kt_status st = kt_op_call(bad, args, 4);
    const kt_decision *d = NULL;
    kt_op_decision(bad, args, 4, &d);
    const char *msg = d ? kt_decision_unit_message(d, 0) : NULL;
    CHECK(st == KT_ERR_ALL_FAILED && d && kt_decision_unit_outcome(d, 0) == KT_OUTCOME_BUILD_FAILED && msg && strstr(msg, "filter"),
          "a missing __constant__ variable: %s, %s", kt_status_name(st), msg ? msg : kt_last_error());
    kt_device_free(ctx, dev, din), kt_device_free(ctx, dev, dout), kt_device_free(ctx, dev, dw);
    kt_context_destroy(ctx);
}

/* Two threads hit one decision with their own constant data at once: each call's kernel reads
 * its own (the module's __constant__ variable is shared; copy and launch go together). */
typedef struct hitter {
    kt_op *op;
    kt_context *ctx;
    size_t dev;
    void *din, *dout, *dw;
    float w[16];
    int wrong, failed;
} hitter;

enum { HM = 4096, HITS = 400 };

static void *hit_loop(void *p) {
    hitter *h = p;
    static float in[HM];
    for (int i = 0; i < HM; i++) in[i] = (float)(i % 7) - 3;
    float *out = malloc(HM * sizeof *out);
    for (int k = 0; k < HITS && out; k++) {
        kt_arg args[] = {kt_arg_buf(h->dout, HM * sizeof(float)), kt_arg_buf(h->din, HM * sizeof(float)),
                         kt_arg_buf(h->dw, sizeof h->w), kt_arg_i64(HM)};
        if (kt_op_call(h->op, args, 4) != KT_OK || kt_device_read(h->ctx, h->dev, out, h->dout, HM * sizeof *out) != KT_OK) {
            h->failed++;
            continue;
        }
        for (int i = 0; i < HM; i++)
            if (out[i] != in[i] * h->w[i % 16]) {
                h->wrong++;
                break;
            }
    }
    free(out);
    return NULL;
}

static void check_constant_memory_threads(void) {
    kt_context *ctx = context();
    size_t dev = cuda_device(ctx);
    if (dev == (size_t)-1) return;
    kt_op *op = weigh_op(ctx, dev, "weigh2", "weights", "[128]", "[0]");
    if (op == NULL) return;
    hitter h[2];
    float in[HM];
    for (int i = 0; i < HM; i++) in[i] = (float)(i % 7) - 3;
    for (int t = 0; t < 2; t++) {
        h[t] = (hitter){.op = op, .ctx = ctx, .dev = dev};
        for (int k = 0; k < 16; k++) h[t].w[k] = t ? (float)(k + 100) : (float)(-k - 1);
        OK(kt_device_alloc(ctx, dev, HM * sizeof(float), &h[t].din));
        OK(kt_device_alloc(ctx, dev, HM * sizeof(float), &h[t].dout));
        OK(kt_device_alloc(ctx, dev, sizeof h[t].w, &h[t].dw));
        OK(kt_device_write(ctx, dev, h[t].din, in, sizeof in));
        OK(kt_device_write(ctx, dev, h[t].dw, h[t].w, sizeof h[t].w));
    }
    hit_loop(&h[0]); /* tunes, then hits */
    h[0].wrong = h[0].failed = 0;
    pthread_t th[2];
    for (int t = 0; t < 2; t++) pthread_create(&th[t], NULL, hit_loop, &h[t]);
    for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < 2; t++)
        CHECK(h[t].wrong == 0 && h[t].failed == 0, "thread %d: %d of %d calls read another call's constant data, %d failed", t,
              h[t].wrong, HITS, h[t].failed);
    for (int t = 0; t < 2; t++) kt_device_free(ctx, dev, h[t].din), kt_device_free(ctx, dev, h[t].dout), kt_device_free(ctx, dev, h[t].dw);
    kt_context_destroy(ctx);
}

/* A CUDA artifact whose header is damaged (a NUL inside a constant-memory line) fails to load
 * and is built again: the process does not crash, and the calls are right. */
static void check_damaged_artifact(void) {
    DIR *dir = opendir(artifacts);
    int damaged = 0;
    for (struct dirent *e; dir && (e = readdir(dir)) != NULL;) {
        size_t n = strlen(e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 6, ".cubin") != 0) continue;
        char path[600];
        snprintf(path, sizeof path, "%s/%s", artifacts, e->d_name);
        FILE *f = fopen(path, "r+b");
        char head[512] = "";
        size_t got = f ? fread(head, 1, sizeof head - 1, f) : 0;
        char *at = got ? memmem(head, got, " weights\n", 9) : NULL;
        if (f && at) { /* "2 weights\n" -> "2 we\0ghts\n" */
            fseek(f, (long)(at - head) + 3, SEEK_SET);
            fputc(0, f);
            damaged++;
        }
        if (f) fclose(f);
    }
    if (dir) closedir(dir);
    CHECK(damaged > 0, "no artifact with a constant-memory line to damage");
    check_constant_memory_threads(); /* a fresh context loads them: fails, rebuilds, runs */
}

int main(void) {
    cuda_check_begin("checks");
    check_tiled_matmul();
    check_large_shared_memory();
    check_inplace();
    check_artifact_cache();
    check_isolation();
    check_launch_sizes();
    check_constant_memory();
    check_constant_memory_threads();
    check_damaged_artifact();
    return cuda_check_end();
}
