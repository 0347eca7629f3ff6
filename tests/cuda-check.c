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
 * artifact cache by a second context; and, under a budget of wall seconds, an NVRTC build left
 * running (hung on a FIFO) killed when the context is destroyed.
 * Prints one line per check and closes with "N passed, N failed".
 */
#define _GNU_SOURCE /* mkdtemp */
#include "fifo-hang.h"
#include "gpu-harness.h"

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

#define OK(call) OK_SAYING(call, kt_last_error())

static char artifacts[256];

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

static const char *scale_cu =
    "__global__ void scale(float *v, float s) {\n"
    "    long i = ((long)blockIdx.x * blockDim.x + threadIdx.x) * PER;\n"
    "    for (int k = 0; k < PER; k++) v[i + k] *= s;\n"
    "}\n";

/* Op `name` on device dev: v (f32, read and written) scaled by s (f32), in place. NULL when a
 * call failed (counted). */
static kt_op *scale_op(kt_context *ctx, size_t dev, const char *name) {
    kt_op *op = NULL;
    kt_status st = kt_op_create(ctx, name, &op);
    if (st == KT_OK) st = kt_op_set_device(op, dev);
    if (st == KT_OK) st = kt_op_add_buffer(op, "v", KT_TYPE_F32, KT_READ_WRITE);
    if (st == KT_OK) st = kt_op_add_scalar(op, "s", KT_TYPE_F32);
    CHECK(st == KT_OK, "op '%s': %s", name, kt_last_error());
    return st == KT_OK ? op : NULL;
}

/* Adds to a scale_op variant group `group` of scale_cu over PER and B (value lists), one element
 * per thread of PER and blocks of B, compiled with options (n of them). */
static kt_status add_scale(kt_op *op, const char *group, const char *per, const char *b, const char *const *options, size_t n) {
    kt_space *sp = NULL;
    kt_status st = kt_space_create(&sp);
    if (st == KT_OK) st = kt_space_add_input(sp, "v");
    if (st == KT_OK) st = kt_space_add_param(sp, "PER", per);
    if (st == KT_OK) st = kt_space_add_param(sp, "B", b);
    const char *grid[3] = {"v // PER // B", NULL, NULL}, *block[3] = {"B", NULL, NULL};
    if (st == KT_OK) st = kt_space_set_geometry(sp, KT_GEOMETRY_GRID, grid, block, NULL);
    if (st == KT_OK) st = kt_op_add_variants(op, group, sp, scale_cu, "scale", options, n);
    kt_space_destroy(sp);
    return st;
}

static size_t cuda_device(kt_context *ctx) {
    for (size_t i = 0; i < kt_context_device_count(ctx); i++)
        if (strcmp(kt_device_backend(kt_context_device(ctx, i)), "cuda") == 0) return i;
    for (size_t i = 0; i < kt_context_unavailable_count(ctx); i++) printf("unavailable: %s\n", kt_context_unavailable(ctx, i));
    return (size_t)-1;
}

static kt_context *context(void) {
    kt_context *ctx = NULL;
    if (kt_context_create(&ctx) != KT_OK || kt_context_set_cache(ctx, "off") != KT_OK ||
        kt_context_set_measure(ctx, 1, 5, 5, 0) != KT_OK ||
        kt_context_set_artifact_dir(ctx, artifacts) != KT_OK) {
        printf("FAIL: context: %s\n", kt_last_error());
        exit(1);
    }
    return ctx;
}

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

/* ---- kt_op_call_async on the caller's stream, and inside a CUDA graph (issue [10]) ---------
 * The check reaches the driver itself (dlopen, as the backend does) for a stream of its own on
 * the device's primary context, a host function that holds the stream, and graph capture. */
typedef struct cu_fns {
    int (*Init)(unsigned);
    int (*DeviceGet)(int *, int);
    int (*DevicePrimaryCtxRetain)(void **, int);
    int (*CtxSetCurrent)(void *);
    int (*StreamCreate)(void **, unsigned);
    int (*StreamDestroy)(void *);
    int (*StreamQuery)(void *);
    int (*StreamSynchronize)(void *);
    int (*LaunchHostFunc)(void *, void (*)(void *), void *);
    int (*StreamBeginCapture)(void *, int);
    int (*StreamEndCapture)(void *, void **);
    int (*GraphInstantiate)(void **, void *, unsigned long long);
    int (*GraphLaunch)(void *, void *);
    int (*GraphExecDestroy)(void *);
    int (*GraphDestroy)(void *);
} cu_fns;

static int cu_open(cu_fns *f) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) return 0;
    int all = 1;
#define LOAD(field, name)                            \
    do {                                             \
        void *sym_ = dlsym(h, name);                 \
        all = all && sym_ != NULL;                   \
        memcpy(&f->field, &sym_, sizeof sym_);       \
    } while (0)
    LOAD(Init, "cuInit");
    LOAD(DeviceGet, "cuDeviceGet");
    LOAD(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    LOAD(CtxSetCurrent, "cuCtxSetCurrent");
    LOAD(StreamCreate, "cuStreamCreate");
    LOAD(StreamDestroy, "cuStreamDestroy_v2");
    LOAD(StreamQuery, "cuStreamQuery");
    LOAD(StreamSynchronize, "cuStreamSynchronize");
    LOAD(LaunchHostFunc, "cuLaunchHostFunc");
    LOAD(StreamBeginCapture, "cuStreamBeginCapture_v2");
    LOAD(StreamEndCapture, "cuStreamEndCapture");
    LOAD(GraphInstantiate, "cuGraphInstantiateWithFlags");
    LOAD(GraphLaunch, "cuGraphLaunch");
    LOAD(GraphExecDestroy, "cuGraphExecDestroy");
    LOAD(GraphDestroy, "cuGraphDestroy");
#undef LOAD
    return all;
}

static atomic_int released;

/* Runs on the driver's thread when the stream reaches it: holds the stream until released. */
static void hold_stream(void *p) {
    (void)p;
    while (!atomic_load(&released)) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

static const char *add_cu =
    "__global__ void add(float *v, float s) {\n"
    "    long i = (long)blockIdx.x * B + threadIdx.x;\n"
    "    v[i] += s;\n"
    "}\n";

static kt_op *add_op(kt_context *ctx, size_t dev, const char *name) {
    kt_op *op = NULL;
    if (kt_op_create(ctx, name, &op) != KT_OK || kt_op_set_device(op, dev) != KT_OK ||
        kt_op_add_buffer(op, "v", KT_TYPE_F32, KT_READ_WRITE) != KT_OK || kt_op_add_scalar(op, "s", KT_TYPE_F32) != KT_OK)
        return NULL;
    kt_space *sp = NULL;
    const char *grid[3] = {"v // B", NULL, NULL}, *block[3] = {"B", NULL, NULL};
    if (kt_space_create(&sp) != KT_OK || kt_space_add_input(sp, "v") != KT_OK || kt_space_add_param(sp, "B", "[128, 256]") != KT_OK ||
        kt_space_set_geometry(sp, KT_GEOMETRY_GRID, grid, block, NULL) != KT_OK ||
        kt_op_add_variants(op, "add", sp, add_cu, "add", NULL, 0) != KT_OK)
        op = NULL;
    kt_space_destroy(sp);
    return op;
}

static int all_equal(const float *v, int n, float want) {
    for (int i = 0; i < n; i++)
        if (v[i] != want + (float)(i % 1000)) return 0;
    return 1;
}

static void check_async(void) {
    kt_context *ctx = context();
    size_t dev = cuda_device(ctx);
    cu_fns cu;
    if (dev == (size_t)-1 || !cu_open(&cu)) return;
    enum { M = 1 << 16, HELD = 256, BACK_TO_BACK = 10000, CAPTURED = 100 };
    float *v = malloc(M * sizeof *v);
    for (int i = 0; i < M; i++) v[i] = (float)(i % 1000);
    void *dv, *cuctx = NULL, *stream = NULL;
    int cudev = 0;
    OK(kt_device_alloc(ctx, dev, M * sizeof *v, &dv));
    OK(kt_device_write(ctx, dev, dv, v, M * sizeof *v));
    CHECK(cu.Init(0) == 0 && cu.DeviceGet(&cudev, 0) == 0 && cu.DevicePrimaryCtxRetain(&cuctx, cudev) == 0 &&
              cu.CtxSetCurrent(cuctx) == 0 && cu.StreamCreate(&stream, 1 /* CU_STREAM_NON_BLOCKING */) == 0,
          "a stream of the check's own");
    kt_op *op = add_op(ctx, dev, "addasync"), *untuned = add_op(ctx, dev, "adduntuned");
    CHECK(op && untuned, "ops: %s", kt_last_error());
    if (!op || !untuned || !stream) return;
    kt_arg args[] = {kt_arg_buf(dv, M * sizeof *v), kt_arg_f32(1.0f)};

    OK(kt_op_call_async(op, stream, args, 2)); /* a miss: tuned, then the winner enqueued on the stream */
    CHECK(cu.StreamSynchronize(stream) == 0, "synchronise");
    OK(kt_device_read(ctx, dev, v, dv, M * sizeof *v));
    CHECK(all_equal(v, M, 1.0f), "one launch of the winner after the miss");

    /* hits on a held stream: each returns at once, its kernel waiting for the stream (fewer than
     * the driver's queue of pending launches holds: past that, a launch waits for room) */
    atomic_store(&released, 0);
    CHECK(cu.LaunchHostFunc(stream, hold_stream, NULL) == 0, "hold the stream");
    for (int k = 0; k < HELD; k++) OK(kt_op_call_async(op, stream, args, 2));
    CHECK(cu.StreamQuery(stream) == 600 /* CUDA_ERROR_NOT_READY */, "the hits returned before their kernels ran");
    OK(kt_device_read(ctx, dev, v, dv, M * sizeof *v)); /* the legacy stream does not wait for a non-blocking one */
    CHECK(all_equal(v, M, 1.0f), "nothing ran while the stream was held");
    atomic_store(&released, 1);
    CHECK(cu.StreamSynchronize(stream) == 0, "synchronise");
    OK(kt_device_read(ctx, dev, v, dv, M * sizeof *v));
    CHECK(all_equal(v, M, 1.0f + HELD), "the held launches, in order, as direct launches");
    /* 10,000 hits back to back, one synchronisation at the end */
    for (int k = 0; k < BACK_TO_BACK; k++) OK(kt_op_call_async(op, stream, args, 2));
    CHECK(cu.StreamSynchronize(stream) == 0, "synchronise");
    OK(kt_device_read(ctx, dev, v, dv, M * sizeof *v));
    CHECK(all_equal(v, M, 1.0f + HELD + BACK_TO_BACK), "10,000 launches as 10,000 direct launches");

    /* the thread's current context changed under the hit path (here: none): it sets its own */
    CHECK(cu.CtxSetCurrent(NULL) == 0, "no current context");
    OK(kt_op_call_async(op, stream, args, 2));
    CHECK(cu.StreamSynchronize(stream) == 0, "synchronise");
    OK(kt_device_read(ctx, dev, v, dv, M * sizeof *v));
    CHECK(all_equal(v, M, 2.0f + HELD + BACK_TO_BACK), "a hit after another context was made current");

    /* a graph captured from the stream: 100 hits; a miss of another op is refused and leaves the
     * capture valid; the graph replays the 100 launches */
    void *graph = NULL, *exec = NULL;
    CHECK(cu.StreamBeginCapture(stream, 2 /* CU_STREAM_CAPTURE_MODE_RELAXED */) == 0, "begin capture");
    for (int k = 0; k < CAPTURED; k++) OK(kt_op_call_async(op, stream, args, 2));
    kt_status st = kt_op_call_async(untuned, stream, args, 2);
    CHECK(st == KT_ERR_CAPTURING && strstr(kt_last_error(), "is being captured") != NULL && strstr(kt_last_error(), "kt_op_tune") != NULL,
          "a miss under capture: %s %s",
          kt_status_name(st), kt_last_error());
    CHECK(cu.StreamEndCapture(stream, &graph) == 0 && graph != NULL, "the capture is still valid");
    CHECK(cu.GraphInstantiate(&exec, graph, 0) == 0, "instantiate");
    OK(kt_device_read(ctx, dev, v, dv, M * sizeof *v));
    CHECK(all_equal(v, M, 2.0f + HELD + BACK_TO_BACK), "capturing ran nothing");
    CHECK(cu.GraphLaunch(exec, stream) == 0 && cu.StreamSynchronize(stream) == 0, "replay");
    OK(kt_device_read(ctx, dev, v, dv, M * sizeof *v));
    CHECK(all_equal(v, M, 2.0f + HELD + BACK_TO_BACK + CAPTURED), "the graph replays the 100 captured launches");
    CHECK(kt_op_tune_count(op) == 1 && kt_op_tune_count(untuned) == 0, "tunings: %llu and %llu",
          (unsigned long long)kt_op_tune_count(op), (unsigned long long)kt_op_tune_count(untuned));
    if (exec) cu.GraphExecDestroy(exec);
    if (graph) cu.GraphDestroy(graph);
    cu.StreamDestroy(stream);
    kt_device_free(ctx, dev, dv);
    free(v);
    kt_context_destroy(ctx);
}

/* Opens a stream of the check's own on device 0's primary context (non-blocking: it never
 * waits for the default stream, nor the default stream for it). */
static void *own_stream(cu_fns *cu) {
    void *cuctx = NULL, *stream = NULL;
    int cudev = 0;
    if (cu->Init(0) != 0 || cu->DeviceGet(&cudev, 0) != 0 || cu->DevicePrimaryCtxRetain(&cuctx, cudev) != 0 ||
        cu->CtxSetCurrent(cuctx) != 0 || cu->StreamCreate(&stream, 1 /* CU_STREAM_NON_BLOCKING */) != 0)
        return NULL;
    return stream;
}

/* A kernel that spins for `spin` clock cycles, then writes v: the earlier work on a stream that
 * is still writing a buffer when the next call is made. */
static const char *slowwrite_cu =
    "__global__ void slowwrite(float *v, long long spin) {\n"
    "    long long t0 = clock64();\n"
    "    while (clock64() - t0 < spin) { }\n"
    "    long i = (long)blockIdx.x * B + threadIdx.x;\n"
    "    v[i] = (float)(i % 1000) + 100.0f;\n"
    "}\n";

/* An in-place op called on a stream right after a kernel that writes its input (a miss: it
 * tunes) ends with exactly the direct sequence's bytes: the tuning waited for the writer. */
static void check_inplace_after_writer(void) {
    kt_context *ctx = context();
    size_t dev = cuda_device(ctx);
    cu_fns cu;
    if (dev == (size_t)-1 || !cu_open(&cu)) return;
    enum { M = 1 << 16 };
    float *v = malloc(M * sizeof *v);
    for (int i = 0; i < M; i++) v[i] = (float)(i % 1000);
    void *dv, *stream = own_stream(&cu);
    CHECK(stream != NULL, "a stream of the check's own");
    OK(kt_device_alloc(ctx, dev, M * sizeof *v, &dv));
    OK(kt_device_write(ctx, dev, dv, v, M * sizeof *v));
    kt_op *writer = NULL, *add = add_op(ctx, dev, "addafterwriter");
    OK(kt_op_create(ctx, "slowwrite", &writer));
    OK(kt_op_set_device(writer, dev));
    OK(kt_op_add_buffer(writer, "v", KT_TYPE_F32, KT_WRITE_ONLY));
    OK(kt_op_add_scalar(writer, "spin", KT_TYPE_I64));
    kt_space *sp = NULL;
    const char *grid[3] = {"v // B", NULL, NULL}, *block[3] = {"B", NULL, NULL};
    OK(kt_space_create(&sp));
    OK(kt_space_add_input(sp, "v"));
    OK(kt_space_add_param(sp, "B", "[256]"));
    OK(kt_space_set_geometry(sp, KT_GEOMETRY_GRID, grid, block, NULL));
    OK(kt_op_add_variants(writer, "slowwrite", sp, slowwrite_cu, "slowwrite", NULL, 0));
    kt_space_destroy(sp);
    CHECK(add != NULL && stream != NULL, "ops: %s", kt_last_error());
    if (add == NULL || stream == NULL) return;
    kt_arg w[] = {kt_arg_buf(dv, M * sizeof *v), kt_arg_i64(0)};
    OK(kt_op_tune(writer, w, 2)); /* decided ahead: the writer's call below is a hit */
    OK(kt_device_write(ctx, dev, dv, v, M * sizeof *v));
    w[1] = kt_arg_i64(200000000); /* about 0.1 s of spinning, then the write */
    kt_arg a[] = {kt_arg_buf(dv, M * sizeof *v), kt_arg_f32(1.0f)};
    OK(kt_op_call_async(writer, stream, w, 2));
    OK(kt_op_call_async(add, stream, a, 2)); /* a miss: waits for the writer, tunes, enqueues the winner */
    CHECK(cu.StreamSynchronize(stream) == 0, "synchronise");
    OK(kt_device_read(ctx, dev, v, dv, M * sizeof *v));
    CHECK(all_equal(v, M, 101.0f), "the writer's bytes plus one launch of the winner (v[1] = %g)", v[1]);
    CHECK(kt_op_tune_count(add) == 1, "add tuned once");
    cu.StreamDestroy(stream);
    kt_device_free(ctx, dev, dv);
    free(v);
    kt_context_destroy(ctx);
}

/* ---- a native device candidate: cuBLAS's saxpy on the queue it is given --------------------- */
typedef struct cublas_fns {
    int (*Create)(void **);
    int (*Destroy)(void *);
    int (*SetStream)(void *, void *);
    int (*Saxpy)(void *, int, const float *, const float *, int, float *, int);
} cublas_fns;

typedef struct saxpy_user {
    cublas_fns *b;
    void *handle;
    void *last_queue;
    int calls;
} saxpy_user;

static int cublas_saxpy(const kt_arg *args, size_t nargs, kt_queue queue, void *user) {
    saxpy_user *u = user;
    (void)nargs;
    u->calls++;
    u->last_queue = queue;
    int rc = u->b->SetStream(u->handle, queue);
    float alpha = args[2].f32;
    if (rc == 0) rc = u->b->Saxpy(u->handle, (int)(args[0].bytes / sizeof(float)), &alpha, args[0].ptr, 1, args[1].ptr, 1);
    return rc;
}

static const char *axpy_cu =
    "__global__ void axpy(const float *x, float *y, float a) {\n"
    "    long i = (long)blockIdx.x * B + threadIdx.x;\n"
    "    y[i] += a * x[i];\n"
    "}\n";

static kt_op *axpy_op(kt_context *ctx, size_t dev, const char *name, int with_kernel, saxpy_user *su) {
    kt_op *op = NULL;
    if (kt_op_create(ctx, name, &op) != KT_OK || kt_op_set_device(op, dev) != KT_OK ||
        kt_op_add_buffer(op, "x", KT_TYPE_F32, KT_READ_ONLY) != KT_OK ||
        kt_op_add_buffer(op, "y", KT_TYPE_F32, KT_READ_WRITE) != KT_OK || kt_op_add_scalar(op, "a", KT_TYPE_F32) != KT_OK)
        return NULL;
    if (with_kernel) {
        kt_space *sp = NULL;
        const char *grid[3] = {"x // B", NULL, NULL}, *block[3] = {"B", NULL, NULL};
        if (kt_space_create(&sp) != KT_OK || kt_space_add_input(sp, "x") != KT_OK || kt_space_add_param(sp, "B", "[256]") != KT_OK ||
            kt_space_set_geometry(sp, KT_GEOMETRY_GRID, grid, block, NULL) != KT_OK ||
            kt_op_add_variants(op, "kernel", sp, axpy_cu, "axpy", NULL, 0) != KT_OK)
            op = NULL;
        kt_space_destroy(sp);
    }
    if (op && kt_op_add_native_queued(op, "cublas", cublas_saxpy, su) != KT_OK) op = NULL;
    return op;
}

static void check_native_queued(void) {
    kt_context *ctx = context();
    size_t dev = cuda_device(ctx);
    cu_fns cu;
    if (dev == (size_t)-1 || !cu_open(&cu)) return;
    static const char *const libs[] = {"libcublas.so", "libcublas.so.13", "libcublas.so.12", "/usr/local/cuda/lib64/libcublas.so"};
    void *h = NULL;
    for (size_t i = 0; h == NULL && i < sizeof libs / sizeof libs[0]; i++) h = dlopen(libs[i], RTLD_NOW | RTLD_LOCAL);
    CHECK(h != NULL, "cuBLAS is installed: %s", dlerror());
    if (h == NULL) return;
    cublas_fns b;
    void *p;
    p = dlsym(h, "cublasCreate_v2"), memcpy(&b.Create, &p, sizeof p);
    p = dlsym(h, "cublasDestroy_v2"), memcpy(&b.Destroy, &p, sizeof p);
    p = dlsym(h, "cublasSetStream_v2"), memcpy(&b.SetStream, &p, sizeof p);
    p = dlsym(h, "cublasSaxpy_v2"), memcpy(&b.Saxpy, &p, sizeof p);
    void *stream = own_stream(&cu); /* (makes the primary context current for cublasCreate) */
    saxpy_user su = {.b = &b};
    CHECK(stream && b.Create && b.Destroy && b.SetStream && b.Saxpy && b.Create(&su.handle) == 0, "cuBLAS handle and stream");
    if (su.handle == NULL || stream == NULL) return;
    enum { M = 1 << 16, HELD = 16, CAPTURED = 10 };
    float *x = malloc(M * sizeof *x), *y = malloc(M * sizeof *y);
    for (int i = 0; i < M; i++) x[i] = 1.0f, y[i] = (float)(i % 1000);
    void *dx, *dy;
    OK(kt_device_alloc(ctx, dev, M * sizeof *x, &dx));
    OK(kt_device_alloc(ctx, dev, M * sizeof *y, &dy));
    OK(kt_device_write(ctx, dev, dx, x, M * sizeof *x));
    OK(kt_device_write(ctx, dev, dy, y, M * sizeof *y));
    kt_arg args[] = {kt_arg_buf(dx, M * sizeof *x), kt_arg_buf(dy, M * sizeof *y), kt_arg_f32(1.0f)};

    /* tuned against the kernel: both validated and timed on the device */
    kt_op *both = axpy_op(ctx, dev, "axpy", 1, &su);
    CHECK(both != NULL, "op: %s", kt_last_error());
    if (both == NULL) return;
    OK(kt_op_call_async(both, stream, args, 3));
    CHECK(cu.StreamSynchronize(stream) == 0, "synchronise");
    OK(kt_device_read(ctx, dev, y, dy, M * sizeof *y));
    CHECK(all_equal(y, M, 1.0f), "one launch of the winner after the miss");
    const kt_decision *d = NULL;
    OK(kt_op_decision(both, args, 3, &d));
    for (size_t i = 0; i < kt_decision_unit_count(d); i++)
        CHECK(kt_decision_unit_outcome(d, i) == KT_OUTCOME_MEASURED && kt_decision_unit_time_ns(d, i) > 0,
              "unit %zu (%s) measured on the device: %s, %.0f ns", i, kt_op_candidate_name(both, kt_decision_unit_candidate(d, i)),
              kt_outcome_name(kt_decision_unit_outcome(d, i)), kt_decision_unit_time_ns(d, i));
    printf("cuBLAS saxpy %.0f ns, kernel %.0f ns: winner %s\n", kt_decision_unit_time_ns(d, 1), kt_decision_unit_time_ns(d, 0),
           kt_op_candidate_name(both, kt_decision_winner(d)));
    CHECK(su.calls >= 2, "cuBLAS ran in the tuning (%d calls)", su.calls);

    /* cuBLAS alone: hits on a held stream return at once; a graph captures them */
    kt_op *only = axpy_op(ctx, dev, "axpy-cublas", 0, &su);
    CHECK(only != NULL, "op: %s", kt_last_error());
    if (only == NULL) return;
    OK(kt_device_write(ctx, dev, dy, y, M * sizeof *y)); /* y = i % 1000 + 1 */
    OK(kt_op_tune(only, args, 3));
    atomic_store(&released, 0);
    CHECK(cu.LaunchHostFunc(stream, hold_stream, NULL) == 0, "hold the stream");
    for (int k = 0; k < HELD; k++) OK(kt_op_call_async(only, stream, args, 3));
    CHECK(su.last_queue == stream, "the native got the caller's stream");
    CHECK(cu.StreamQuery(stream) == 600 /* CUDA_ERROR_NOT_READY */, "the hits returned before their work ran");
    OK(kt_device_read(ctx, dev, y, dy, M * sizeof *y));
    CHECK(all_equal(y, M, 1.0f), "nothing ran while the stream was held");
    atomic_store(&released, 1);
    CHECK(cu.StreamSynchronize(stream) == 0, "synchronise");
    OK(kt_device_read(ctx, dev, y, dy, M * sizeof *y));
    CHECK(all_equal(y, M, 1.0f + HELD), "the held saxpys, in order");
    void *graph = NULL, *exec = NULL;
    CHECK(cu.StreamBeginCapture(stream, 2 /* CU_STREAM_CAPTURE_MODE_RELAXED */) == 0, "begin capture");
    for (int k = 0; k < CAPTURED; k++) OK(kt_op_call_async(only, stream, args, 3));
    CHECK(cu.StreamEndCapture(stream, &graph) == 0 && graph != NULL, "the capture is valid");
    CHECK(cu.GraphInstantiate(&exec, graph, 0) == 0, "instantiate");
    CHECK(cu.GraphLaunch(exec, stream) == 0 && cu.StreamSynchronize(stream) == 0, "replay");
    OK(kt_device_read(ctx, dev, y, dy, M * sizeof *y));
    CHECK(all_equal(y, M, 1.0f + HELD + CAPTURED), "the graph replays the captured saxpys");
    OK(kt_op_call(only, args, 3)); /* the default stream, waited for */
    CHECK(su.last_queue == NULL, "kt_op_call passes the default stream");
    OK(kt_device_read(ctx, dev, y, dy, M * sizeof *y));
    CHECK(all_equal(y, M, 2.0f + HELD + CAPTURED), "kt_op_call's saxpy finished when it returned");
    if (exec) cu.GraphExecDestroy(exec);
    if (graph) cu.GraphDestroy(graph);

    /* a miss under capture, by option, enqueues the cuBLAS fallback on the captured stream and
     * defers the key; kt_op_tune_deferred tunes it after the capture; then it is a hit */
    kt_op *fb = axpy_op(ctx, dev, "axpy-fallback", 1, &su);
    CHECK(fb && kt_op_set_fallback(fb, "cublas") == KT_OK && kt_op_set_capture_miss(fb, KT_CAPTURE_MISS_FALLBACK) == KT_OK,
          "op: %s", kt_last_error());
    if (fb == NULL) return;
    graph = exec = NULL;
    CHECK(cu.StreamBeginCapture(stream, 2 /* CU_STREAM_CAPTURE_MODE_RELAXED */) == 0, "begin capture");
    OK(kt_op_call_async(fb, stream, args, 3));
    CHECK(su.last_queue == stream, "the fallback got the captured stream");
    CHECK(cu.StreamEndCapture(stream, &graph) == 0 && graph != NULL, "the capture is valid");
    CHECK(kt_op_deferred_count(fb) == 1 && kt_op_tune_count(fb) == 0, "deferred %zu, tuned %llu", kt_op_deferred_count(fb),
          (unsigned long long)kt_op_tune_count(fb));
    CHECK(cu.GraphInstantiate(&exec, graph, 0) == 0 && cu.GraphLaunch(exec, stream) == 0 && cu.StreamSynchronize(stream) == 0,
          "replay");
    OK(kt_device_read(ctx, dev, y, dy, M * sizeof *y));
    CHECK(all_equal(y, M, 3.0f + HELD + CAPTURED), "the graph replays the fallback's saxpy");
    size_t tuned = 0;
    OK(kt_op_tune_deferred(fb, &tuned));
    CHECK(tuned == 1 && kt_op_deferred_count(fb) == 0 && kt_op_tune_count(fb) == 1, "the deferred key tuned");
    OK(kt_device_read(ctx, dev, y, dy, M * sizeof *y));
    CHECK(all_equal(y, M, 3.0f + HELD + CAPTURED), "tuning a deferred key leaves the caller's buffers alone");
    OK(kt_op_call_async(fb, stream, args, 3));
    CHECK(cu.StreamSynchronize(stream) == 0, "synchronise");
    OK(kt_device_read(ctx, dev, y, dy, M * sizeof *y));
    CHECK(all_equal(y, M, 4.0f + HELD + CAPTURED), "then a hit");
    if (exec) cu.GraphExecDestroy(exec);
    if (graph) cu.GraphDestroy(graph);
    b.Destroy(su.handle);
    cu.StreamDestroy(stream);
    kt_device_free(ctx, dev, dx);
    kt_device_free(ctx, dev, dy);
    free(x), free(y);
    kt_context_destroy(ctx);
}

/* ---- two threads, two streams, two keys: no wait across streams on the hit path ------------- */
typedef struct stream_caller {
    kt_op *op;
    cu_fns *cu;
    void *stream;
    kt_arg args[2];
    int calls, sync;
    kt_status st;
    int synced;
    atomic_int done;  /* calls returned so far */
    atomic_int phase; /* 0 not started, 1 calling, 2 synchronising, 3 finished */
} stream_caller;

static void *call_on_stream(void *p) {
    stream_caller *c = p;
    c->st = KT_OK;
    atomic_store(&c->phase, 1);
    for (int k = 0; k < c->calls && c->st == KT_OK; k++) {
        c->st = kt_op_call_async(c->op, c->stream, c->args, 2);
        atomic_fetch_add(&c->done, 1);
    }
    atomic_store(&c->phase, 2);
    if (c->sync) c->synced = c->cu->StreamSynchronize(c->stream);
    atomic_store(&c->phase, 3);
    return NULL;
}

static stream_caller *stuck_callers[2]; /* A, B: what the alarm reports */

/* Appends text, then a number, to buf at *at (async-signal-safe: no stdio). */
static void put_num(char *buf, size_t *at, const char *text, long v) {
    while (*text && *at < 250) buf[(*at)++] = *text++;
    char d[24];
    int n = 0;
    if (v < 0) buf[(*at)++] = '-', v = -v;
    do d[n++] = (char)('0' + v % 10), v /= 10; while (v && n < 23);
    while (n && *at < 250) buf[(*at)++] = d[--n];
}

/* The alarm: says how far each thread got (which of them is stuck, and where: calling or in
 * cuStreamSynchronize), then has gdb (else eu-stack) print every thread's stack, the driver's
 * included, and ends the process. */
static void stuck(int sig) {
    (void)sig;
    static const char msg[] = "FAIL: two streams: a thread waited while stream A was held\n";
    if (write(1, msg, sizeof msg - 1) < 0) _exit(3);
    char buf[256];
    size_t at = 0;
    for (int t = 0; t < 2 && stuck_callers[t]; t++) {
        put_num(buf, &at, t ? "; B: calls returned " : "  A: calls returned ", atomic_load(&stuck_callers[t]->done));
        put_num(buf, &at, " of ", stuck_callers[t]->calls);
        put_num(buf, &at, ", phase ", atomic_load(&stuck_callers[t]->phase));
    }
    buf[at++] = '\n';
    if (write(1, buf, at) < 0) _exit(3);
    char pid[24];
    size_t pn = 0;
    put_num(pid, &pn, "", (long)getpid());
    pid[pn] = '\0';
#if defined(__linux__)
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0); /* Yama: let the child attach */
#endif
    pid_t child = fork();
    if (child == 0) {
        dup2(1, 2);
        execlp("gdb", "gdb", "-batch", "-nx", "-p", pid, "-ex", "info threads", "-ex", "thread apply all bt", (char *)NULL);
        execlp("eu-stack", "eu-stack", "-p", pid, (char *)NULL);
        _exit(127);
    }
    if (child > 0) waitpid(child, NULL, 0);
    _exit(2);
}

static void check_two_streams(void) {
    kt_context *ctx = context();
    size_t dev = cuda_device(ctx);
    cu_fns cu;
    if (dev == (size_t)-1 || !cu_open(&cu)) return;
    enum { MA = 1 << 12, MB = 1 << 13, CALLS = 50 };
    float *v = malloc(MB * sizeof *v);
    for (int i = 0; i < MB; i++) v[i] = (float)(i % 1000);
    void *da, *db, *sa = own_stream(&cu), *sb = NULL;
    CHECK(sa && cu.StreamCreate(&sb, 1) == 0, "two streams");
    OK(kt_device_alloc(ctx, dev, MA * sizeof *v, &da));
    OK(kt_device_alloc(ctx, dev, MB * sizeof *v, &db));
    kt_op *op = add_op(ctx, dev, "addstreams");
    CHECK(op && kt_op_key_arg(op, 0, KT_BUCKET_EXACT) == KT_OK, "op: %s", kt_last_error()); /* the size: two keys */
    if (!op || !sa || !sb) return;
    stream_caller ca = {op, &cu, sa, {kt_arg_buf(da, MA * sizeof *v), kt_arg_f32(1.0f)}, CALLS, 0, KT_OK, 0, 0, 0};
    stream_caller cb = {op, &cu, sb, {kt_arg_buf(db, MB * sizeof *v), kt_arg_f32(1.0f)}, CALLS, 1, KT_OK, 0, 0, 0};
    OK(kt_op_tune(op, ca.args, 2));
    OK(kt_op_tune(op, cb.args, 2));
    const kt_decision *wa = NULL, *wb = NULL; /* which kernels the hits launch (the first time in this process) */
    if (kt_op_decision(op, ca.args, 2, &wa) == KT_OK && kt_op_decision(op, cb.args, 2, &wb) == KT_OK)
        printf("two streams: winners %s (A) and %s (B)\n", kt_decision_unit_config(wa, kt_decision_winner_unit(wa)),
               kt_decision_unit_config(wb, kt_decision_winner_unit(wb)));
    stuck_callers[0] = &ca, stuck_callers[1] = &cb;
    OK(kt_device_write(ctx, dev, da, v, MA * sizeof *v));
    OK(kt_device_write(ctx, dev, db, v, MB * sizeof *v));
    atomic_store(&released, 0);
    CHECK(cu.LaunchHostFunc(sa, hold_stream, NULL) == 0, "hold stream A");
    void (*was)(int) = signal(SIGALRM, stuck);
    alarm(60);
    pthread_t ta, tb;
    pthread_create(&ta, NULL, call_on_stream, &ca);
    pthread_create(&tb, NULL, call_on_stream, &cb);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL); /* B synchronised its stream while A is held */
    alarm(0);
    signal(SIGALRM, was);
    CHECK(ca.st == KT_OK && cb.st == KT_OK && cb.synced == 0, "both threads' hits: %s %s", kt_status_name(ca.st),
          kt_status_name(cb.st));
    CHECK(cu.StreamQuery(sa) == 600, "A is still held");
    OK(kt_device_read(ctx, dev, v, db, MB * sizeof *v));
    CHECK(all_equal(v, MB, (float)CALLS), "B's fifty launches ran while A was held");
    OK(kt_device_read(ctx, dev, v, da, MA * sizeof *v));
    CHECK(all_equal(v, MA, 0.0f), "A's wait for A's hold");
    atomic_store(&released, 1);
    CHECK(cu.StreamSynchronize(sa) == 0, "synchronise A");
    OK(kt_device_read(ctx, dev, v, da, MA * sizeof *v));
    CHECK(all_equal(v, MA, (float)CALLS), "A's fifty launches, after the hold");
    CHECK(kt_op_tune_count(op) == 2, "two keys tuned once each");
    cu.StreamDestroy(sa);
    cu.StreamDestroy(sb);
    kt_device_free(ctx, dev, da);
    kt_device_free(ctx, dev, db);
    free(v);
    kt_context_destroy(ctx);
}

/* ---- the backend's checks on the device (ABI 9: digest, all_close) ---------------------------- */

static const char *copy_cu =
    "extern \"C\" __global__ void copy(const float *in, float *out, long long n) {\n"
    "    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
    "    if (i < n) out[i] = in[i];\n"
    "    if (W && i == 0) ((float *)in)[0] = 7.0f; /* writes into its read-only input */\n"
    "}\n";

/* Writes v (a value the type holds exactly: a multiple of 1/2 below 2048, or 0) as type t. */
static void encode_exact(kt_type t, double v, unsigned char *out) {
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, 4);
    if (t == KT_TYPE_F64) {
        memcpy(out, &v, 8);
    } else if (t == KT_TYPE_BF16) {
        uint16_t h = (uint16_t)(u >> 16);
        memcpy(out, &h, 2);
    } else if (t == KT_TYPE_F16) { /* a normal number's sign, exponent rebiased from 127 to 15, mantissa */
        uint16_t h = f == 0.0f ? 0 : (uint16_t)(((u >> 16) & 0x8000u) | ((((u >> 23) & 0xffu) - 112u) << 10) | ((u >> 13) & 0x3ffu));
        memcpy(out, &h, 2);
    } else {
        int32_t i = (int32_t)v;
        memcpy(out, &i, 4);
    }
}

/* The host's rule of all_close: every element within atol + rtol * |e| in double. */
static int host_close_f32(const float *a, const float *e, size_t n, double atol, double rtol) {
    int bad = 0;
    for (size_t i = 0; i < n; i++) bad |= !(fabs((double)a[i] - (double)e[i]) <= atol + rtol * fabs((double)e[i]));
    return !bad;
}

static void check_device_checks(void) {
    const kt_backend *b = kt_backend_cuda();
    void *bs = NULL;
    char err[512] = "";
    if (b->init(b, &bs, err, sizeof err) != KT_OK || b->device_count(bs) == 0) {
        CHECK(0, "the CUDA backend did not start: %s", err);
        return;
    }
    CHECK(b->abi_version >= 9 && b->digest && b->all_close, "the CUDA backend has no device checks");
    enum { BYTES = (1 << 20) + 3, M = 4096 };
    unsigned char *h = malloc(BYTES + 8);
    for (int i = 0; i < BYTES + 8; i++) h[i] = (unsigned char)(i * 2654435761u >> 13);
    void *d1 = NULL, *d2 = NULL;
    OK(b->buffer_alloc(bs, 0, BYTES + 8, &d1, err, sizeof err));
    OK(b->buffer_alloc(bs, 0, BYTES + 8, &d2, err, sizeof err));
    OK(b->buffer_copy(bs, 0, d1, h, BYTES, KT_COPY_HOST_TO_DEVICE, err, sizeof err));
    OK(b->buffer_copy(bs, 0, (char *)d2 + 1, h, BYTES, KT_COPY_HOST_TO_DEVICE, err, sizeof err)); /* off 8 bytes */
    uint64_t g1 = 0, g2 = 1, g3 = 0, g0 = 0;
    OK(b->digest(bs, 0, d1, BYTES, &g1, err, sizeof err));
    OK(b->digest(bs, 0, (char *)d2 + 1, BYTES, &g2, err, sizeof err));
    CHECK(g1 == g2, "the digest of the same bytes depends on their address: %llx %llx", (unsigned long long)g1,
          (unsigned long long)g2);
    for (size_t at = 0; at < BYTES; at += BYTES / 5) { /* one bit of one byte changed anywhere */
        unsigned char c = h[at] ^ 4;
        OK(b->buffer_copy(bs, 0, (char *)d1 + at, &c, 1, KT_COPY_HOST_TO_DEVICE, err, sizeof err));
        OK(b->digest(bs, 0, d1, BYTES, &g3, err, sizeof err));
        CHECK(g3 != g1, "a changed byte at %zu kept the digest", at);
        OK(b->buffer_copy(bs, 0, (char *)d1 + at, &h[at], 1, KT_COPY_HOST_TO_DEVICE, err, sizeof err));
    }
    OK(b->digest(bs, 0, d1, BYTES - 1, &g3, err, sizeof err));
    CHECK(g3 != g1, "one byte less kept the digest");
    OK(b->digest(bs, 0, d1, 0, &g0, err, sizeof err));

    /* all_close, f32: the device says 1 exactly where the host's rule passes, at the boundary too */
    float *a = malloc(M * sizeof *a), *e = malloc(M * sizeof *e);
    int agree = 0, trials = 0, ones = 0;
    for (int t = 0; t < 60; t++) {
        for (int i = 0; i < M; i++) e[i] = (float)((i * 37 + t) % 200) - 100.0f + 0.125f, a[i] = e[i];
        const int at = (t * 131) % M;
        /* around the tolerance edge: a[at] moved by atol + rtol * |e| times 0.5 to 1.5 */
        double edge = 1e-6 + 1e-4 * fabs((double)e[at]);
        a[at] = (float)((double)e[at] + edge * (0.5 + (double)t / 60.0));
        if (t % 10 == 9) a[at] = NAN;
        if (t % 10 == 8) a[at] = e[at] = INFINITY;
        OK(b->buffer_copy(bs, 0, d1, a, M * sizeof *a, KT_COPY_HOST_TO_DEVICE, err, sizeof err));
        OK(b->buffer_copy(bs, 0, d2, e, M * sizeof *e, KT_COPY_HOST_TO_DEVICE, err, sizeof err));
        int close = -1;
        OK(b->all_close(bs, 0, KT_TYPE_F32, d1, d2, M, 1e-6, 1e-4, &close, err, sizeof err));
        const int want = host_close_f32(a, e, M, 1e-6, 1e-4);
        agree += close == want, trials++, ones += close == 1;
    }
    CHECK(agree == trials, "all_close and the host's rule disagree on %d of %d", trials - agree, trials);
    CHECK(ones > 5 && ones < trials - 5, "the boundary trials were all on one side (%d of %d close)", ones, trials);
    int close = -1;
    OK(b->all_close(bs, 0, KT_TYPE_F32, (char *)d1 + 2, d2, 16, 1e-6, 1e-4, &close, err, sizeof err));
    CHECK(close == 0, "a misaligned f32 output was not left to the host");
    /* f64, f16, bf16 and i32: equal passes, one element off fails */
    static const kt_type types[] = {KT_TYPE_F64, KT_TYPE_F16, KT_TYPE_BF16, KT_TYPE_I32};
    for (int k = 0; k < 4; k++) {
        const size_t es = kt_type_size(types[k]), n = 1000;
        unsigned char *x = calloc(n, es);
        for (size_t i = 0; i < n; i++) encode_exact(types[k], (double)(i % 50) * 0.5, x + i * es);
        OK(b->buffer_copy(bs, 0, d1, x, n * es, KT_COPY_HOST_TO_DEVICE, err, sizeof err));
        OK(b->buffer_copy(bs, 0, d2, x, n * es, KT_COPY_HOST_TO_DEVICE, err, sizeof err));
        OK(b->all_close(bs, 0, types[k], d1, d2, n, 1e-3, 1e-2, &close, err, sizeof err));
        CHECK(close == 1, "%s: equal outputs not close", kt_type_name(types[k]));
        encode_exact(types[k], 1000.0, x + 777 * es);
        OK(b->buffer_copy(bs, 0, d1, x, n * es, KT_COPY_HOST_TO_DEVICE, err, sizeof err));
        OK(b->all_close(bs, 0, types[k], d1, d2, n, 1e-3, 1e-2, &close, err, sizeof err));
        CHECK(close == 0, "%s: element 777 off, yet close", kt_type_name(types[k]));
        free(x);
    }
    b->buffer_free(bs, 0, d1);
    b->buffer_free(bs, 0, d2);
    b->fini(bs);
    free(h), free(a), free(e);

    /* end to end: a variant that writes into its read-only input is caught through the digest
     * (its run in a runner process, whose copy of the input comes back) */
    kt_context *ctx = context();
    size_t dev = cuda_device(ctx);
    if (dev == (size_t)-1) return;
    enum { K = 1 << 16 };
    float *in = malloc(K * sizeof *in), *out = malloc(K * sizeof *out);
    for (int i = 0; i < K; i++) in[i] = (float)i;
    void *din, *dout;
    OK(kt_device_alloc(ctx, dev, K * sizeof *in, &din));
    OK(kt_device_alloc(ctx, dev, K * sizeof *out, &dout));
    OK(kt_device_write(ctx, dev, din, in, K * sizeof *in));
    kt_op *op = NULL;
    OK(kt_op_create(ctx, "copy", &op));
    OK(kt_op_set_device(op, dev));
    OK(kt_op_add_buffer(op, "in", KT_TYPE_F32, KT_READ_ONLY));
    OK(kt_op_add_buffer(op, "out", KT_TYPE_F32, KT_WRITE_ONLY));
    OK(kt_op_add_scalar(op, "n", KT_TYPE_I64));
    OK(kt_op_set_inputs(op, KT_INPUTS_CLONE));
    kt_space *sp = NULL;
    OK(kt_space_create(&sp));
    OK(kt_space_add_input(sp, "n"));
    OK(kt_space_add_param(sp, "W", "[0, 1]"));
    const char *grid[3] = {"(n + 255) // 256", NULL, NULL}, *block[3] = {"256", NULL, NULL};
    OK(kt_space_set_geometry(sp, KT_GEOMETRY_GRID, grid, block, NULL));
    OK(kt_op_add_variants(op, "copy", sp, copy_cu, "copy", NULL, 0));
    kt_space_destroy(sp);
    kt_arg args[] = {kt_arg_buf(din, K * sizeof *in), kt_arg_buf(dout, K * sizeof *out), kt_arg_i64(K)};
    OK(kt_op_call(op, args, 3));
    OK(kt_device_read(ctx, dev, out, dout, K * sizeof *out));
    OK(kt_device_read(ctx, dev, in, din, K * sizeof *in));
    CHECK(out[0] == 0.0f && out[K - 1] == (float)(K - 1) && in[0] == 0.0f, "copy: out %g..%g, in[0] %g", out[0],
          out[K - 1], in[0]);
    const kt_decision *d = NULL;
    OK(kt_op_decision(op, args, 3, &d));
    for (size_t u = 0; u < kt_decision_unit_count(d); u++) {
        const char *cfg = kt_decision_unit_config(d, u), *msg = kt_decision_unit_message(d, u);
        if (strstr(cfg, "W=1"))
            CHECK(kt_decision_unit_outcome(d, u) == KT_OUTCOME_INVALID && msg && strcmp(msg, "wrote into read-only argument 'in'") == 0,
                  "the writer: %s (%s)", kt_outcome_name(kt_decision_unit_outcome(d, u)), msg ? msg : "");
        else
            CHECK(kt_decision_unit_outcome(d, u) == KT_OUTCOME_MEASURED, "W=0: %s", kt_outcome_name(kt_decision_unit_outcome(d, u)));
    }
    kt_device_free(ctx, dev, din);
    kt_device_free(ctx, dev, dout);
    free(in), free(out);
    kt_context_destroy(ctx);
}

/* The files in dir whose names start with prefix: how many, and the last one's path. */
static int files_named(const char *dir, const char *prefix, char *last, size_t len) {
    DIR *dp = opendir(dir);
    int n = 0;
    for (struct dirent *e; dp && (e = readdir(dp)) != NULL;)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) n++, snprintf(last, len, "%s/%s", dir, e->d_name);
    if (dp) closedir(dp);
    return n;
}

/* The device checks' build is kept in the directory set_cache_dir gives (ABI 17): the first
 * backend state builds it there (no temporary file left), a second loads that file (the same
 * inode and time: not built again), and one that finds the file damaged builds it again and
 * replaces it, checking as before. */
static void check_device_checks_kept(void) {
    const kt_backend *b = kt_backend_cuda();
    char dir[400], kept[800] = "", other[800] = "", err[512] = "";
    snprintf(dir, sizeof dir, "%s/own-builds", artifacts);
    struct stat st1, st2;
    uint64_t sums[3] = {0, 1, 2};
    for (int round = 0; round < 3; round++) {
        void *bs = NULL;
        if (b->init(b, &bs, err, sizeof err) != KT_OK || b->device_count(bs) == 0) {
            CHECK(0, "the CUDA backend did not start: %s", err);
            return;
        }
        CHECK(b->abi_version >= 17 && b->set_cache_dir, "the CUDA backend takes no directory of its own builds");
        b->set_cache_dir(bs, dir);
        void *buf = NULL;
        unsigned char bytes[4096];
        for (int i = 0; i < 4096; i++) bytes[i] = (unsigned char)(i * 7);
        OK(b->buffer_alloc(bs, 0, sizeof bytes, &buf, err, sizeof err));
        OK(b->buffer_copy(bs, 0, buf, bytes, sizeof bytes, KT_COPY_HOST_TO_DEVICE, err, sizeof err));
        OK(b->digest(bs, 0, buf, sizeof bytes, &sums[round], err, sizeof err));
        b->buffer_free(bs, 0, buf);
        b->fini(bs);
        CHECK(files_named(dir, "cuda-checks-", kept, sizeof kept) == 1, "round %d: not one kept build in %s", round, dir);
        CHECK(files_named(dir, "kerntune-check-", other, sizeof other) == 0, "round %d: a temporary build left: %s", round, other);
        if (round == 0) {
            CHECK(stat(kept, &st1) == 0, "stat %s", kept);
        } else if (round == 1) {
            CHECK(stat(kept, &st2) == 0 && st2.st_ino == st1.st_ino && st2.st_mtime == st1.st_mtime,
                  "the second backend built the checks again instead of loading %s", kept);
            FILE *f = fopen(kept, "wb"); /* damaged: the third builds it again */
            if (f) fputs("not a cubin", f), fclose(f);
        } else {
            CHECK(stat(kept, &st2) == 0 && st2.st_size > 100, "the damaged build was not replaced: %s", kept);
        }
    }
    CHECK(sums[0] == sums[1] && sums[1] == sums[2], "the digests differ: %llx %llx %llx", (unsigned long long)sums[0],
          (unsigned long long)sums[1], (unsigned long long)sums[2]);
}

/* Under a budget of wall seconds, an NVRTC build the tuning leaves running is cancelled: group
 * "hung" compiles with --pre-include of a FIFO nobody writes, so its NVRTC child waits for ever
 * in open(). With one build thread the fast group is built and measured first, and "hung" is
 * built from then on (well before the deadline: the fast build takes under a second); the
 * tuning waits for it until the 5 s deadline, and returns without it (NOT_RUN), having killed
 * the child: the FIFO is left with no reader, and the destroy waits for nothing. (NVRTC fails
 * a compile that reads a FIFO with a writer, so the watcher does not hold it.) */
static void check_budget_cancels_nvrtc(void) {
    static fifo_hang hang; /* the watcher reads it: it outlives an early return */
    if (!fifo_hang_start(&hang, false)) {
        CHECK(0, "cannot make the FIFO or its guard");
        return;
    }
    kt_context *ctx = context();
    size_t dev = cuda_device(ctx);
    if (dev == (size_t)-1) return;
    OK(kt_context_set_compile_threads(ctx, 1));
    kt_op *op = scale_op(ctx, dev, "cancel");
    if (op == NULL) return;
    char include[160];
    snprintf(include, sizeof include, "--pre-include=%s", hang.path);
    OK(add_scale(op, "fast", "[1]", "[64]", NULL, 0));
    OK(add_scale(op, "hung", "[1]", "[64]", (const char *const[]){include}, 1));
    OK(kt_op_set_budget(op, 0, 5.0));
    void *dv;
    OK(kt_device_alloc(ctx, dev, 1 << 20, &dv));
    kt_arg args[] = {kt_arg_buf(dv, 1 << 20), kt_arg_f32(1.0f)};
    double t0 = fifo_now_s();
    OK(kt_op_tune(op, args, 2));
    double took = fifo_now_s() - t0;
    CHECK(took >= 4.5 && took < 30, "the tuning took %.1f s (its deadline: 5 s)", took);
    const kt_decision *d = NULL;
    OK(kt_op_decision(op, args, 2, &d));
    for (size_t u = 0; u < kt_decision_unit_count(d); u++) {
        const char *name = kt_op_candidate_name(op, kt_decision_unit_candidate(d, u));
        if (strcmp(name, "hung") == 0)
            CHECK(kt_decision_unit_outcome(d, u) == KT_OUTCOME_NOT_RUN, "hung: outcome %d", (int)kt_decision_unit_outcome(d, u));
        if (strcmp(name, "fast") == 0)
            CHECK(kt_decision_unit_outcome(d, u) == KT_OUTCOME_MEASURED, "fast: outcome %d", (int)kt_decision_unit_outcome(d, u));
    }
    kt_device_free(ctx, dev, dv);
    const bool unread = fifo_unread(&hang);
    t0 = fifo_now_s();
    kt_context_destroy(ctx);
    took = fifo_now_s() - t0;
    CHECK(took < 30, "the destroy took %.1f s", took);
    const bool fired = fifo_hang_end(&hang);
    CHECK(unread && !fired, "the NVRTC child: gone %d, let finish %d", (int)unread, (int)fired);
    printf("  budget: the tuning returned at its deadline, the hung NVRTC child killed; the destroy took %.2f s\n", took);
}


/* Kernel Tuner's compile contract on NVRTC: a kernel written for Kernel Tuner (its own block size
 * when kernel_tuner is undefined) with `#pragma unroll loop_unroll_factor_0` compiles and runs
 * with the factor 4 (a constexpr int) and 0 (the pragma removed), each its own artifact, and
 * sees the configuration's block and grid. */
static const char *unroll_cu =
    "#ifndef kernel_tuner\n"
    "#define block_size_x 7\n"
    "#endif\n"
    "__global__ void sum8(const float *in, float *out, int *info) {\n"
    "    int i = blockIdx.x * block_size_x + threadIdx.x;\n"
    "    float s = 0;\n"
    "    #pragma unroll loop_unroll_factor_0\n"
    "    for (int k = 0; k < 8; k++) s += in[i * 8 + k];\n"
    "    out[i] = s;\n"
    "    if (i == 0) { info[0] = kernel_tuner; info[1] = grid_size_x; info[2] = block_size_x; }\n"
    "}\n";

static void check_kernel_tuner_contract(void) {
    kt_context *ctx = context();
    size_t dev = cuda_device(ctx);
    if (dev == (size_t)-1) return;
    enum { T = 1024 };
    float *in = malloc(T * 8 * sizeof *in), out[T];
    for (int i = 0; i < T * 8; i++) in[i] = (float)(i % 8);
    void *din, *dout, *dinfo;
    OK(kt_device_alloc(ctx, dev, T * 8 * sizeof *in, &din));
    OK(kt_device_alloc(ctx, dev, sizeof out, &dout));
    OK(kt_device_alloc(ctx, dev, 3 * sizeof(int), &dinfo));
    OK(kt_device_write(ctx, dev, din, in, T * 8 * sizeof *in));
    const char *factors[2] = {"[4]", "[0]"};
    for (int f = 0; f < 2; f++) {
        kt_op *op = NULL;
        char name[32];
        snprintf(name, sizeof name, "sum8_%d", f);
        OK(kt_op_create(ctx, name, &op));
        OK(kt_op_set_device(op, dev));
        OK(kt_op_set_validation(op, 0));
        OK(kt_op_add_buffer(op, "in", KT_TYPE_F32, KT_READ_ONLY));
        OK(kt_op_add_buffer(op, "out", KT_TYPE_F32, KT_WRITE_ONLY));
        OK(kt_op_add_buffer(op, "info", KT_TYPE_I32, KT_WRITE_ONLY));
        kt_space *sp = NULL;
        OK(kt_space_create(&sp));
        OK(kt_space_add_input(sp, "out"));
        OK(kt_space_add_param(sp, "block_size_x", "[64]"));
        OK(kt_space_add_param(sp, "loop_unroll_factor_0", factors[f]));
        const char *grid[3] = {"out // block_size_x", NULL, NULL}, *block[3] = {"block_size_x", NULL, NULL};
        OK(kt_space_set_geometry(sp, KT_GEOMETRY_GRID, grid, block, NULL));
        OK(kt_op_add_variants(op, "sum8", sp, unroll_cu, "sum8", NULL, 0));
        kt_space_destroy(sp);
        OK(kt_op_set_kernel_tuner_contract(op, "sum8", NULL));
        kt_arg args[] = {kt_arg_buf(din, T * 8 * sizeof *in), kt_arg_buf(dout, sizeof out), kt_arg_buf(dinfo, 3 * sizeof(int))};
        kt_status st = kt_op_call(op, args, 3);
        const kt_decision *d = NULL;
        if (st == KT_OK) st = kt_op_decision(op, args, 3, &d);
        CHECK(st == KT_OK, "factor %s: %s", factors[f], kt_last_error());
        if (st != KT_OK) continue;
        CHECK(kt_decision_unit_outcome(d, 0) != KT_OUTCOME_BUILD_FAILED, "factor %s did not build: %s", factors[f],
              kt_decision_unit_message(d, 0) ? kt_decision_unit_message(d, 0) : "");
        int info[3] = {0, 0, 0};
        OK(kt_device_read(ctx, dev, out, dout, sizeof out));
        OK(kt_device_read(ctx, dev, info, dinfo, sizeof info));
        int bad = 0;
        for (int i = 0; i < T; i++) bad += out[i] != 28.0f;
        CHECK(bad == 0, "factor %s: %d sums are not 28", factors[f], bad);
        CHECK(info[0] == 1 && info[1] == T / 64 && info[2] == 64, "factor %s: kernel_tuner %d, grid_size_x %d, block_size_x %d",
              factors[f], info[0], info[1], info[2]);
    }
    CHECK(kt_context_compile_count(ctx) + kt_context_artifact_hits(ctx) == 2, "%llu compiles and %llu hits for two factors",
          (unsigned long long)kt_context_compile_count(ctx), (unsigned long long)kt_context_artifact_hits(ctx));
    kt_device_free(ctx, dev, din), kt_device_free(ctx, dev, dout), kt_device_free(ctx, dev, dinfo);
    free(in);
    kt_context_destroy(ctx);
}

int main(void) {
    snprintf(artifacts, sizeof artifacts, "/tmp/kt-cuda-XXXXXX");
    if (mkdtemp(artifacts) == NULL) return 1;
    setvbuf(stdout, NULL, _IOLBF, 0); /* a check that hangs shows how far the others got */
    printf("kerntune %s CUDA checks\n", kt_version_string());
    check_tiled_matmul();
    check_large_shared_memory();
    check_inplace();
    check_artifact_cache();
    check_isolation();
    check_launch_sizes();
    check_constant_memory();
    check_constant_memory_threads();
    check_damaged_artifact();
    check_async();
    check_inplace_after_writer();
    check_native_queued();
    check_two_streams();
    check_device_checks();
    check_device_checks_kept();
    check_budget_cancels_nvrtc();
    check_kernel_tuner_contract();
    char rm[300];
    snprintf(rm, sizeof rm, "rm -rf '%s'", artifacts);
    if (system(rm) != 0) failed++;
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
