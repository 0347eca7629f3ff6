/*
 * test-variants.c - runtime-compiled variants on the C backend (the system compiler, dlopen):
 * a tiled matrix multiply tuned over tile and unroll defines, with a deliberately wrong variant
 * that validation disqualifies; a variant with a syntax error; a missing entry point; identical
 * code compiled once; space inputs bound from the op's arguments; and a second process that
 * finds every artifact compiled (zero compiles). Kernel Tuner's compile contract is in test-contract.c.
 */
#define _GNU_SOURCE /* mkdtemp */
#include "helpers.h"

#include <kerntune/backend.h>
#include <kerntune/cache.h>
#include <kerntune/decision.h>
#include <kerntune/device.h>
#include <kerntune/measure.h>
#include <kerntune/validation.h>
#include <kerntune/variants.h>

#include "fifo-hang.h"

#include <math.h>
#include <sys/wait.h>
#include <unistd.h>

static char artifacts[256];
static const char *self_path;

/* Tiles over i and k; UNROLL > 1 unrolls the j loop; WRONG drops the last k of each tile, a
 * bug validation must catch. */
static const char *matmul_src =
    "void matmul(const float *a, const float *b, float *c, long n) {\n"
    "    for (long i = 0; i < n * n; i++) c[i] = 0;\n"
    "    for (long i0 = 0; i0 < n; i0 += TI)\n"
    "        for (long k0 = 0; k0 < n; k0 += TK)\n"
    "            for (long i = i0; i < i0 + TI && i < n; i++)\n"
    "                for (long k = k0; k < k0 + TK - WRONG && k < n; k++) {\n"
    "                    float aik = a[i * n + k];\n"
    "                    long j = 0;\n"
    "#if UNROLL > 1\n"
    "                    for (; j + UNROLL <= n; j += UNROLL)\n"
    "                        for (int u = 0; u < UNROLL; u++) c[i * n + j + u] += aik * b[k * n + j + u];\n"
    "#endif\n"
    "                    for (; j < n; j++) c[i * n + j] += aik * b[k * n + j];\n"
    "                }\n"
    "}\n";

static int naive(const kt_arg *args, size_t nargs, void *user) {
    (void)nargs, (void)user;
    const float *a = args[0].ptr, *b = args[1].ptr;
    float *c = args[2].ptr;
    long n = (long)args[3].i;
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++) {
            float s = 0;
            for (long k = 0; k < n; k++) s += a[i * n + k] * b[k * n + j];
            c[i * n + j] = s;
        }
    return 0;
}

static kt_context *variant_context(void) {
    kt_context *ctx = test_context(3);
    ok(kt_context_set_artifact_dir(ctx, artifacts));
    return ctx;
}

static kt_op *matmul_op(kt_context *ctx, kt_space *sp, const char *src, const char *kernel) {
    kt_op *op = NULL;
    ok(kt_op_create(ctx, "matmul", &op));
    ok(kt_op_add_buffer(op, "a", KT_TYPE_F32, KT_READ_ONLY));
    ok(kt_op_add_buffer(op, "b", KT_TYPE_F32, KT_READ_ONLY));
    ok(kt_op_add_buffer(op, "c", KT_TYPE_F32, KT_WRITE_ONLY));
    ok(kt_op_add_scalar(op, "n", KT_TYPE_I64));
    ok(kt_op_key_arg(op, 3, KT_BUCKET_EXACT));
    ok(kt_op_add_native(op, "naive", naive, NULL)); /* the default: the reference */
    ok(kt_op_add_variants(op, "tiled", sp, src, kernel, (const char *const[]){"-DWRONG_DEFAULT=0"}, 1));
    return op;
}

static kt_space *matmul_space(void) {
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    ok(kt_space_add_input(sp, "n"));
    ok(kt_space_add_param(sp, "TI", "[8, 32]"));
    ok(kt_space_add_param(sp, "TK", "[16, 64]"));
    ok(kt_space_add_param(sp, "UNROLL", "[1, 4]"));
    ok(kt_space_add_derived(sp, "WRONG", "1 if UNROLL == 4 and TI == 8 else 0"));
    ok(kt_space_add_constraint(sp, "n % TI == 0"));
    return sp;
}

#define N 64

static float A[N * N], B[N * N], C[N * N], R[N * N];

static void fill(void) {
    for (int i = 0; i < N * N; i++) A[i] = (float)((i * 7) % 13) - 6, B[i] = (float)((i * 5) % 11) - 5;
    naive((kt_arg[]){kt_arg_buf(A, sizeof A), kt_arg_buf(B, sizeof B), kt_arg_buf(R, sizeof R), kt_arg_i64(N)}, 4, NULL);
}

static kt_arg *mm_args(long n) {
    static kt_arg a[4];
    a[0] = kt_arg_buf(A, (size_t)(n * n) * sizeof(float));
    a[1] = kt_arg_buf(B, (size_t)(n * n) * sizeof(float));
    a[2] = kt_arg_buf(C, (size_t)(n * n) * sizeof(float));
    a[3] = kt_arg_i64(n);
    return a;
}

/* Tunes the tiled matmul; returns the number of compiles. */
static void test_tiled_matmul(void **state) {
    (void)state;
    fill();
    kt_context *ctx = variant_context();
    kt_space *sp = matmul_space();
    kt_op *op = matmul_op(ctx, sp, matmul_src, "matmul");
    kt_space_destroy(sp); /* the op keeps its own reference */
    uint64_t before = kt_context_compile_count(ctx) + kt_context_artifact_hits(ctx);
    ok(kt_op_call(op, mm_args(N), 4));
    assert_memory_equal(C, R, sizeof C); /* small integers: every order of summation is exact */
    const kt_decision *d = NULL;
    ok(kt_op_decision(op, mm_args(N), 4, &d));
    assert_true(kt_decision_validated(d));
    assert_int_equal(kt_decision_unit_count(d), 1 + 8);
    /* 8 variants compiled (or found) */
    assert_int_equal(kt_context_compile_count(ctx) + kt_context_artifact_hits(ctx) - before, 8);
    int invalid = 0, measured = 0;
    for (size_t u = 1; u < kt_decision_unit_count(d); u++) {
        const char *cfg = kt_decision_unit_config(d, u);
        assert_non_null(cfg);
        assert_int_equal(kt_decision_unit_candidate(d, u), 1);
        /* every variant was validated, and its validation took time; measuring cost some too */
        assert_true(kt_decision_unit_validation_ms(d, u) > 0);
        assert_true(kt_decision_unit_framework_ms(d, u) >= 0 && isfinite(kt_decision_unit_framework_ms(d, u)));
        if (strstr(cfg, "WRONG=1")) {
            assert_int_equal(kt_decision_unit_outcome(d, u), KT_OUTCOME_INVALID);
            assert_true(kt_decision_unit_framework_ms(d, u) == 0); /* never measured: nothing around runs */
            assert_non_null(strstr(kt_decision_unit_message(d, u), "output 'c' element"));
            invalid++;
        } else {
            assert_int_equal(kt_decision_unit_outcome(d, u), KT_OUTCOME_MEASURED);
            assert_true(kt_decision_unit_framework_ms(d, u) > 0); /* preparing and flushing around its runs */
            measured++;
        }
    }
    assert_int_equal(invalid, 2);
    assert_int_equal(measured, 6);
    size_t w = kt_decision_winner_unit(d);
    assert_int_equal(kt_decision_unit_outcome(d, w), KT_OUTCOME_MEASURED);
    /* the op's scalar n bound the space's input: n = 40 drops TI = 32 (40 % 32 != 0) */
    ok(kt_op_call(op, mm_args(40), 4));
    ok(kt_op_decision(op, mm_args(40), 4, &d));
    assert_int_equal(kt_decision_unit_count(d), 1 + 4);
    for (size_t u = 1; u < kt_decision_unit_count(d); u++) assert_non_null(strstr(kt_decision_unit_config(d, u), "TI=8,"));
    /* a hit dispatches the compiled winner directly */
    memset(C, 0, sizeof C);
    uint64_t tunes = kt_op_tune_count(op);
    ok(kt_op_call(op, mm_args(N), 4));
    assert_memory_equal(C, R, sizeof C);
    assert_int_equal(kt_op_tune_count(op), tunes);
    kt_context_destroy(ctx);
}

/* A variant with a syntax error fails to build, is recorded with its log, and the others run. */
/* Work formulas (kt_op_set_work): a matmul's 2 n^3 flops and its three n x n buffers of bytes,
 * for every unit, natives and variants; a formula may name a variant's parameters (a name it
 * lacks, for the native: -1); GFLOP/s is what they give over the measured time. */
static void test_work_formulas(void **state) {
    (void)state;
    fill();
    kt_context *ctx = variant_context();
    kt_space *sp = matmul_space();
    kt_op *op = matmul_op(ctx, sp, matmul_src, "matmul");
    kt_space_destroy(sp);
    ok(kt_op_set_work(op, "2 * n ** 3", "(a + b + c) * 4")); /* buffers stand for their element counts */
    ok(kt_op_call(op, mm_args(N), 4));
    const kt_decision *d = NULL;
    ok(kt_op_decision(op, mm_args(N), 4, &d));
    for (size_t u = 0; u < kt_decision_unit_count(d); u++) {
        assert_true(kt_decision_unit_flops(d, u) == 2.0 * N * N * N);
        assert_true(kt_decision_unit_bytes(d, u) == 3.0 * N * N * 4);
    }
    size_t w = kt_decision_winner_unit(d);
    double gflops = kt_decision_unit_flops(d, w) / kt_decision_unit_time_ns(d, w);
    assert_true(gflops > 0 && isfinite(gflops));
    assert_true(fabs(gflops - 2.0 * N * N * N / kt_decision_unit_time_ns(d, w)) < 1e-12 * gflops);
    /* the other size: its own arguments */
    ok(kt_op_call(op, mm_args(40), 4));
    ok(kt_op_decision(op, mm_args(40), 4, &d));
    assert_true(kt_decision_unit_flops(d, 0) == 2.0 * 40 * 40 * 40);
    kt_context_destroy(ctx);
    /* a formula of parameters: the variants have TI, the native does not */
    ctx = variant_context();
    sp = matmul_space();
    op = matmul_op(ctx, sp, matmul_src, "matmul");
    kt_space_destroy(sp);
    ok(kt_op_set_work(op, "n * TI", NULL));
    ok(kt_op_call(op, mm_args(N), 4));
    ok(kt_op_decision(op, mm_args(N), 4, &d));
    assert_true(kt_decision_unit_flops(d, 0) == -1); /* the native: no TI */
    assert_true(kt_decision_unit_bytes(d, 0) == -1); /* none declared */
    for (size_t u = 1; u < kt_decision_unit_count(d); u++) {
        double want = strstr(kt_decision_unit_config(d, u), "TI=8,") ? 8.0 * N : 32.0 * N;
        assert_true(kt_decision_unit_flops(d, u) == want);
    }
    kt_context_destroy(ctx);
    /* an op without formulas: -1 */
    ctx = variant_context();
    sp = matmul_space();
    op = matmul_op(ctx, sp, matmul_src, "matmul");
    kt_space_destroy(sp);
    ok(kt_op_call(op, mm_args(N), 4));
    ok(kt_op_decision(op, mm_args(N), 4, &d));
    assert_true(kt_decision_unit_flops(d, 0) == -1);
    /* declared after the first call: refused */
    assert_int_equal(kt_op_set_work(op, "1", NULL), KT_ERR_STATE);
    kt_context_destroy(ctx);
}

static void test_syntax_error_variant(void **state) {
    (void)state;
    fill();
    static char src[4096];
    snprintf(src, sizeof src, "#if TI == 32\nthis is not C;\n#endif\n%s", matmul_src);
    kt_context *ctx = variant_context();
    kt_space *sp = matmul_space();
    kt_op *op = matmul_op(ctx, sp, src, "matmul");
    ok(kt_op_call(op, mm_args(N), 4));
    assert_memory_equal(C, R, sizeof C);
    const kt_decision *d = NULL;
    ok(kt_op_decision(op, mm_args(N), 4, &d));
    int failed = 0;
    for (size_t u = 1; u < kt_decision_unit_count(d); u++) {
        if (!strstr(kt_decision_unit_config(d, u), "TI=32,")) continue;
        assert_int_equal(kt_decision_unit_outcome(d, u), KT_OUTCOME_BUILD_FAILED);
        assert_non_null(strstr(kt_decision_unit_message(d, u), "error"));
        failed++;
    }
    assert_int_equal(failed, 4);
    assert_false(strstr(kt_decision_unit_config(d, kt_decision_winner_unit(d)) ?: "", "TI=32,"));
    kt_space_destroy(sp);
    kt_context_destroy(ctx);
}

/* A kernel name the source does not define: every variant fails to load; the native runs. */
static void test_missing_entry_point(void **state) {
    (void)state;
    fill();
    kt_context *ctx = variant_context();
    kt_space *sp = matmul_space();
    kt_op *op = matmul_op(ctx, sp, matmul_src, "matmul_typo");
    ok(kt_op_call(op, mm_args(N), 4));
    assert_memory_equal(C, R, sizeof C);
    const kt_decision *d = NULL;
    ok(kt_op_decision(op, mm_args(N), 4, &d));
    assert_int_equal(kt_decision_winner(d), 0);
    for (size_t u = 1; u < kt_decision_unit_count(d); u++) {
        assert_int_equal(kt_decision_unit_outcome(d, u), KT_OUTCOME_BUILD_FAILED);
        assert_non_null(strstr(kt_decision_unit_message(d, u), "matmul_typo"));
    }
    kt_space_destroy(sp);
    kt_context_destroy(ctx);
}

/* Two groups with the same source and space: the same code is compiled once. */
static void test_identical_code_compiled_once(void **state) {
    (void)state;
    fill();
    static char src[4096];
    snprintf(src, sizeof src, "/* once %d */\n%s", (int)getpid(), matmul_src); /* new to the cache */
    kt_context *ctx = variant_context();
    kt_space *sp = matmul_space();
    kt_op *op = matmul_op(ctx, sp, src, "matmul");
    ok(kt_op_add_variants(op, "tiled_again", sp, src, "matmul", (const char *const[]){"-DWRONG_DEFAULT=0"}, 1));
    ok(kt_op_call(op, mm_args(N), 4));
    assert_memory_equal(C, R, sizeof C);
    assert_int_equal(kt_context_compile_count(ctx), 8);
    kt_space_destroy(sp);
    kt_context_destroy(ctx);
}

typedef struct built_seen {
    int with_artifact, without;
    bool files_there;
} built_seen;

static void on_built(void *user, const char *config, const char *artifact) {
    built_seen *b = user;
    assert_non_null(strstr(config, "TI="));
    if (artifact == NULL) {
        b->without++;
        return;
    }
    b->with_artifact++;
    b->files_there = b->files_there && access(artifact, R_OK) == 0 && strncmp(artifact, artifacts, strlen(artifacts)) == 0;
}

/* kt_op_build: the variants built into the artifact directory and nothing else (no decision,
 * no run, the buffers untouched); built again, every one is found; a tuning in another context
 * on the same directory compiles nothing; a variant that fails to build is counted. */
static void test_build_ahead(void **state) {
    (void)state;
    fill();
    static char src[4096], bad[4096];
    snprintf(src, sizeof src, "/* ahead %d */\n%s", (int)getpid(), matmul_src); /* new to the cache */
    snprintf(bad, sizeof bad, "/* ahead bad %d */\n#if TI == 32\nthis is not C;\n#endif\n%s", (int)getpid(), matmul_src);
    kt_context *ctx = variant_context();
    kt_space *sp = matmul_space();
    kt_op *op = matmul_op(ctx, sp, src, "matmul");
    memset(C, 0x5a, sizeof C);
    kt_build_counts c = {99, 99, 99};
    ok(kt_op_build(op, mm_args(N), 4, &c));
    assert_int_equal(c.built, 8);
    assert_int_equal(c.found, 0);
    assert_int_equal(c.failed, 0);
    assert_int_equal(kt_context_compile_count(ctx), 8);
    for (size_t i = 0; i < sizeof C; i++) assert_int_equal(((unsigned char *)C)[i], 0x5a);
    assert_int_equal(kt_op_decision_count(op), 0);
    assert_int_equal(kt_op_tune_count(op), 0);
    assert_int_equal(kt_op_measured_runs(op), 0);
    ok(kt_op_build(op, mm_args(N), 4, &c));
    assert_int_equal(c.built, 0);
    assert_int_equal(c.found, 8);
    assert_int_equal(kt_context_compile_count(ctx), 8);
    kt_context *ctx2 = variant_context();
    kt_op *op2 = matmul_op(ctx2, sp, src, "matmul");
    ok(kt_op_call(op2, mm_args(N), 4));
    assert_memory_equal(C, R, sizeof C);
    assert_int_equal(kt_context_compile_count(ctx2), 0);
    assert_int_equal(kt_context_artifact_hits(ctx2), 8);
    built_seen seen = {0, 0, true};
    ok(kt_op_build_each(op, mm_args(N), 4, &c, on_built, &seen)); /* each configuration told, with its file */
    assert_int_equal(seen.with_artifact, 8);
    assert_int_equal(seen.without, 0);
    assert_true(seen.files_there);
    kt_context *ctx3 = variant_context();
    kt_op *op3 = matmul_op(ctx3, sp, bad, "matmul");
    seen = (built_seen){0, 0, true};
    ok(kt_op_build_each(op3, mm_args(N), 4, &c, on_built, &seen));
    assert_int_equal(c.built, 4);
    assert_int_equal(c.failed, 4);
    assert_int_equal(seen.with_artifact, 4);
    assert_int_equal(seen.without, 4);
    expect_status(KT_ERR_NULL, kt_op_build(NULL, mm_args(N), 4, NULL));
    assert_int_not_equal(kt_op_build(op3, mm_args(N), 3, NULL), KT_OK); /* the wrong number of arguments */
    assert_non_null(strstr(kt_last_error(), "kt_op_build"));
    kt_space_destroy(sp);
    kt_context_destroy(ctx3);
    kt_context_destroy(ctx2);
    kt_context_destroy(ctx);
}

/* ---- regressions from review ---------------------------------------------------------------- */

/* Exported by this program (linked -rdynamic): a variant whose kernel has the same name must
 * still run its own code, not this. */
void kt_test_collide(float *y, long n);
void kt_test_collide(float *y, long n) {
    for (long i = 0; i < n; i++) y[i] = -1;
}

static int twice_index(const kt_arg *args, size_t nargs, void *user) {
    (void)nargs, (void)user;
    float *y = args[0].ptr;
    for (long i = 0; i < args[1].i; i++) y[i] = 2.0f * (float)i;
    return 0;
}

static kt_op *collide_op(kt_context *ctx, const char *name, const char *src, const char *kernel, const char *params) {
    kt_op *op = NULL;
    ok(kt_op_create(ctx, name, &op));
    ok(kt_op_add_buffer(op, "y", KT_TYPE_F32, KT_WRITE_ONLY));
    ok(kt_op_add_scalar(op, "n", KT_TYPE_I64));
    ok(kt_op_add_native(op, "reference", twice_index, NULL));
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    ok(kt_space_add_param(sp, "v", params));
    ok(kt_space_add_param(sp, "a", "[1]"));
    ok(kt_space_add_param(sp, "u", "[0]"));
    ok(kt_space_add_param(sp, "ptr", "[2]"));
    ok(kt_op_add_variants(op, "variant", sp, src, kernel, NULL, 0));
    expect_status(KT_ERR_STATE, kt_space_add_input(sp, "late")); /* an op holds it now */
    expect_status(KT_ERR_STATE, kt_space_add_param(sp, "late", "[1]"));
    kt_space_destroy(sp);
    return op;
}

/* Parameters named like the entry wrapper's old names (v, a, u, ptr), a kernel named like one
 * of them (n), and a kernel whose name the host program exports: all run their own code. */
static void test_names_cannot_collide(void **state) {
    (void)state;
    kt_context *ctx = variant_context();
    /* a kernel named like the old wrapper's argument n (no parameter is named n) */
    const char *named_n = "void n(float *y, long len) { for (long i = 0; i < len; i++) y[i] = (float)(ptr * i * a + u * v); }\n";
    const char *collide = "void kt_test_collide(float *y, long n) { for (long i = 0; i < n; i++) y[i] = ptr * (float)i + u; }\n";
    const char *names[] = {"kernel_n", "kernel_collide"}, *srcs[] = {named_n, collide}, *kernels[] = {"n", "kt_test_collide"};
    for (int k = 0; k < 2; k++) {
        kt_op *op = collide_op(ctx, names[k], srcs[k], kernels[k], "[0, 3]");
        float y[16];
        kt_arg args[] = {kt_arg_buf(y, sizeof y), kt_arg_i64(16)};
        ok(kt_op_call(op, args, 2));
        for (int i = 0; i < 16; i++) assert_true(y[i] == 2.0f * (float)i);
        const kt_decision *d = NULL;
        ok(kt_op_decision(op, args, 2, &d));
        for (size_t u = 1; u < kt_decision_unit_count(d); u++) /* every variant ran its own code */
            assert_int_equal(kt_decision_unit_outcome(d, u), KT_OUTCOME_MEASURED);
    }
    kt_context_destroy(ctx);
}

/* No compiler: the variants are disqualified with the reason; the native still decides. */
static void test_missing_compiler(void **state) {
    (void)state;
    setenv("KERNTUNE_CC", "/nonexistent/cc", 1);
    kt_context *ctx = variant_context();
    unsetenv("KERNTUNE_CC");
    kt_op *op = collide_op(ctx, "nocc", "void f(float *y, long n) { (void)y; (void)n; }\n", "f", "[0]");
    float y[4];
    kt_arg args[] = {kt_arg_buf(y, sizeof y), kt_arg_i64(4)};
    ok(kt_op_call(op, args, 2));
    const kt_decision *d = NULL;
    ok(kt_op_decision(op, args, 2, &d));
    assert_int_equal(kt_decision_winner(d), 0);
    assert_int_equal(kt_decision_unit_outcome(d, 1), KT_OUTCOME_BUILD_FAILED);
    assert_non_null(strstr(kt_decision_unit_message(d, 1), "/nonexistent/cc"));
    kt_context_destroy(ctx);
}

/* A cached artifact that was truncated is rebuilt, not reused. */
static void test_corrupt_artifact_rebuilt(void **state) {
    (void)state;
    char dir[] = "/tmp/kt-corrupt-XXXXXX";
    assert_non_null(mkdtemp(dir));
    const char *src = "void g(float *y, long n) { for (long i = 0; i < n; i++) y[i] = ptr * (float)i + u * v * a; }\n";
    for (int round = 0; round < 2; round++) {
        kt_context *ctx = test_context(1);
        ok(kt_context_set_artifact_dir(ctx, dir));
        kt_op *op = collide_op(ctx, "corrupt", src, "g", "[0]");
        float y[8];
        kt_arg args[] = {kt_arg_buf(y, sizeof y), kt_arg_i64(8)};
        ok(kt_op_call(op, args, 2));
        for (int i = 0; i < 8; i++) assert_true(y[i] == 2.0f * (float)i);
        assert_int_equal(kt_context_compile_count(ctx), 1); /* round 1: rebuilt after the damage */
        kt_context_destroy(ctx);
        char cmd[200]; /* truncate every artifact */
        snprintf(cmd, sizeof cmd, "for f in %s/*.so; do head -c 100 \"$f\" > \"$f.x\" && mv \"$f.x\" \"$f\"; done", dir);
        assert_int_equal(system(cmd), 0);
    }
    char rm[100];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    assert_int_equal(system(rm), 0);
}

/* The child half of test_second_process_compiles_nothing: tunes the same op and prints its
 * counts. */
static int child_main(void) {
    fill();
    kt_context *ctx = NULL;
    if (kt_context_create(&ctx) != KT_OK || kt_context_set_measure(ctx, 1, 3, 3, 0) != KT_OK ||
        kt_context_set_artifact_dir(ctx, artifacts) != KT_OK)
        return 2;
    kt_space *sp = matmul_space();
    kt_op *op = matmul_op(ctx, sp, matmul_src, "matmul");
    if (kt_op_call(op, mm_args(N), 4) != KT_OK || memcmp(C, R, sizeof C) != 0) return 3;
    printf("compiles=%llu hits=%llu\n", (unsigned long long)kt_context_compile_count(ctx),
           (unsigned long long)kt_context_artifact_hits(ctx));
    kt_space_destroy(sp);
    kt_context_destroy(ctx);
    return 0;
}

/* A host variant whose code holds a count derived from n (a define) and whose constraint reads
 * n: n is keyed exactly whatever bucket the op declared, so code compiled for n = 600 never
 * runs for n = 1000 (elements left unwritten) or n = 520 (elements written past the end), and
 * a configuration valid for one n is never reused for an n it is invalid for (issue [8] A). */
static const char *upto_src =
    "#include <stdint.h>\n"
    "void upto(int32_t *out, long n) { for (long i = 0; i < COUNT; i += STEP) for (long k = i; k < i + STEP; k++) out[k] = (int32_t)k; }\n";

static void test_code_argument_keyed_exactly(void **state) {
    (void)state;
    kt_context *ctx = variant_context();
    kt_op *op = NULL;
    ok(kt_op_create(ctx, "upto", &op));
    ok(kt_op_set_validation(op, 0));
    ok(kt_op_add_buffer(op, "out", KT_TYPE_I32, KT_WRITE_ONLY));
    ok(kt_op_add_scalar(op, "n", KT_TYPE_I64));
    ok(kt_op_key_arg(op, 1, KT_BUCKET_POW2));
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    ok(kt_space_add_input(sp, "n"));
    ok(kt_space_add_param(sp, "STEP", "[8, 25]")); /* 25 divides 600 and 1000, not 520 */
    ok(kt_space_add_constraint(sp, "n % STEP == 0"));
    ok(kt_space_add_derived(sp, "COUNT", "n"));
    ok(kt_op_add_variants(op, "upto", sp, upto_src, "upto", NULL, 0));
    kt_space_destroy(sp);
    enum { CAP = 1100 };
    int32_t *buf = malloc(CAP * sizeof *buf);
    assert_non_null(buf);
    const int64_t ns[] = {600, 1000, 520, 1000, 600};
    const char *winners[] = {NULL, NULL, "STEP=8,COUNT=520", NULL, NULL}; /* 520: the only valid one */
    for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
        int64_t n = ns[t];
        for (int i = 0; i < CAP; i++) buf[i] = -1;
        kt_arg args[] = {kt_arg_buf(buf, (size_t)n * sizeof *buf), kt_arg_i64(n)};
        ok(kt_op_call(op, args, 2));
        for (int64_t i = 0; i < CAP; i++)
            if (buf[i] != (i < n ? (int32_t)i : -1)) fail_msg("n = %lld: element %lld is %d", (long long)n, (long long)i, buf[i]);
        const kt_decision *d = NULL;
        ok(kt_op_decision(op, args, 2, &d));
        assert_int_equal(kt_decision_key_len(d), 2); /* the bucket, then n exactly */
        assert_int_equal(kt_decision_key(d, 1), n);
        const char *cfg = kt_decision_unit_config(d, kt_decision_winner_unit(d));
        char count[32];
        snprintf(count, sizeof count, "COUNT=%lld", (long long)n);
        assert_non_null(strstr(cfg, count));
        if (winners[t]) assert_string_equal(cfg, winners[t]);
    }
    assert_int_equal(kt_op_tune_count(op), 3); /* 600, 1000 and 520; the repeats are hits */
    free(buf);
    kt_context_destroy(ctx);
}

/* No fixed-size buffer cuts what the user gave (issue [8] 7): a string parameter of 5,000
 * characters reaches its define whole (and the configuration text, longer than 4 KB, is kept);
 * compiler flags of over 3 KB and 300 options reach the compiler, the last of each included. */
static const char *measure_src =
    "#include <stdint.h>\n"
    "void measure(int32_t *out, long n) { (void)n; out[0] = (int32_t)(sizeof(STR) - 1); out[1] = FLAG_LAST; out[2] = OPT_LAST; }\n";

static void test_long_inputs_never_cut(void **state) {
    (void)state;
    enum { LEN = 5000, NOPT = 300 };
    size_t flen = 64 + 200 * 16 + 32;
    char *values = malloc(LEN + 16), *flags = malloc(flen), **opts = calloc(NOPT, sizeof *opts);
    assert_non_null(values), assert_non_null(flags), assert_non_null(opts);
    /* ['"xxxx...x"']: a string whose value is a C string literal of LEN characters */
    size_t k = (size_t)sprintf(values, "['\"");
    memset(values + k, 'x', LEN);
    k += LEN;
    sprintf(values + k, "\"']");
    k = (size_t)sprintf(flags, "-O1 -fPIC -shared");
    for (int i = 0; i < 200; i++) k += (size_t)sprintf(flags + k, " -DPAD_%06d=1", i);
    sprintf(flags + k, " -DFLAG_LAST=7");
    for (int i = 0; i < NOPT; i++) {
        opts[i] = malloc(32);
        sprintf(opts[i], i == NOPT - 1 ? "-DOPT_LAST=9" : "-DOPT_%04d=1", i);
    }
    const char *old = getenv("KERNTUNE_CFLAGS");
    char *saved = old ? strdup(old) : NULL;
    setenv("KERNTUNE_CFLAGS", flags, 1);
    kt_context *ctx = variant_context(); /* the C backend reads KERNTUNE_CFLAGS when it starts */
    if (saved) setenv("KERNTUNE_CFLAGS", saved, 1), free(saved);
    else unsetenv("KERNTUNE_CFLAGS");
    kt_op *op = NULL;
    ok(kt_op_create(ctx, "measure", &op));
    ok(kt_op_set_validation(op, 0));
    ok(kt_op_add_buffer(op, "out", KT_TYPE_I32, KT_WRITE_ONLY));
    ok(kt_op_add_scalar(op, "n", KT_TYPE_I64));
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    ok(kt_space_add_param(sp, "STR", values));
    ok(kt_op_add_variants(op, "measure", sp, measure_src, "measure", (const char *const *)opts, NOPT));
    kt_space_destroy(sp);
    int32_t out[3] = {0};
    kt_arg args[] = {kt_arg_buf(out, sizeof out), kt_arg_i64(1)};
    ok(kt_op_call(op, args, 2));
    assert_int_equal(out[0], LEN);
    assert_int_equal(out[1], 7);
    assert_int_equal(out[2], 9);
    const kt_decision *d = NULL;
    ok(kt_op_decision(op, args, 2, &d));
    assert_int_equal(strlen(kt_decision_unit_config(d, 0)), strlen("STR=") + LEN + 2);
    kt_context_destroy(ctx);
    for (int i = 0; i < NOPT; i++) free(opts[i]);
    free(opts), free(flags), free(values);
}

/* A derived value may be a list (a define the kernel need not read): its configuration text is
 * Python's repr, and the variant builds and runs. */
static void test_derived_list(void **state) {
    (void)state;
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    ok(kt_space_add_param(sp, "P", "[1, 2]"));
    ok(kt_space_add_derived(sp, "L", "[P, 2 * P, 'x' * 70]"));
    size_t count = 0;
    ok(kt_space_enumerate(sp, &count));
    assert_int_equal(count, 2);
    char text[256];
    ok(kt_space_config_format(sp, 1, text, sizeof text));
    char want[256];
    snprintf(want, sizeof want, "P=2,L=[2, 4, '%s']", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
    assert_string_equal(text, want);
    kt_context *ctx = variant_context();
    kt_op *op = NULL;
    ok(kt_op_create(ctx, "dlist", &op));
    ok(kt_op_set_validation(op, 0));
    ok(kt_op_add_buffer(op, "out", KT_TYPE_I32, KT_WRITE_ONLY));
    ok(kt_op_add_scalar(op, "n", KT_TYPE_I64));
    ok(kt_op_add_variants(op, "v", sp, "#include <stdint.h>\nvoid put(int32_t *out, long n) { (void)n; out[0] = P; }\n", "put", NULL, 0));
    kt_space_destroy(sp);
    int32_t out[1] = {0};
    kt_arg args[] = {kt_arg_buf(out, sizeof out), kt_arg_i64(1)};
    ok(kt_op_call(op, args, 2));
    assert_true(out[0] == 1 || out[0] == 2);
    kt_context_destroy(ctx);
}

static void test_second_process_compiles_nothing(void **state) {
    (void)state;
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' --child '%s'", self_path, artifacts);
    /* The first child may compile (or find the artifacts of the tests above); the second must
     * find everything. */
    for (int round = 0; round < 2; round++) {
        FILE *p = popen(cmd, "r");
        assert_non_null(p);
        char line[256] = "";
        char *got = fgets(line, sizeof line, p);
        int status = pclose(p);
        assert_non_null(got);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        unsigned long long compiles = 99, hits = 0;
        assert_int_equal(sscanf(line, "compiles=%llu hits=%llu", &compiles, &hits), 2);
        if (round == 1) {
            assert_int_equal(compiles, 0);
            assert_int_equal(hits, 8);
        }
    }
}

/*
 * A device that records the geometry of each launch (its variants "build" into a file of their
 * defines and "load" B back; buffers are host memory), for the launch sizes a call computes
 * from its own arguments: through the integer programs compiled at planning, or through the
 * interpreter where a size is outside what compiles. Both must give each call its own sizes.
 */
typedef struct rec_module {
    int block;
} rec_module;

static kt_launch_geometry rec_last;
static int rec_launches, rec_async_launches, rec_waits;

static size_t rec_count(void *state) {
    (void)state;
    return 1;
}
static kt_status rec_describe(void *state, size_t i, char *name, char *fp, char *err, size_t errlen) {
    (void)state, (void)i, (void)err, (void)errlen;
    snprintf(name, KT_DEVICE_NAME_MAX, "recording device");
    snprintf(fp, KT_DEVICE_FINGERPRINT_MAX, "rec:1");
    return KT_OK;
}
static kt_status rec_alloc(void *state, size_t dev, size_t bytes, void **out, char *err, size_t errlen) {
    (void)state, (void)dev, (void)err, (void)errlen;
    *out = calloc(1, bytes ? bytes : 1);
    return *out ? KT_OK : KT_ERR_NO_MEMORY;
}
static void rec_free(void *state, size_t dev, void *p) {
    (void)state, (void)dev;
    free(p);
}
static kt_status rec_copy(void *state, size_t dev, void *dst, const void *src, size_t bytes, kt_copy_dir dir, char *err,
                          size_t errlen) {
    (void)state, (void)dev, (void)dir, (void)err, (void)errlen;
    memmove(dst, src, bytes);
    return KT_OK;
}
static kt_status rec_fill(void *state, size_t dev, void *p, size_t bytes, const void *pattern, size_t plen, char *err,
                          size_t errlen) {
    (void)state, (void)dev, (void)err, (void)errlen;
    for (size_t i = 0; i < bytes; i += plen) memcpy((char *)p + i, pattern, plen);
    return KT_OK;
}
static kt_status rec_compiler(void *state, size_t dev, char *out, size_t len, char *err, size_t errlen) {
    (void)state, (void)dev, (void)err, (void)errlen;
    snprintf(out, len, "rec 1");
    return KT_OK;
}
static kt_status rec_build(void *state, size_t dev, const kt_build_request *req, char *log, size_t loglen) {
    (void)state, (void)dev;
    FILE *f = fopen(req->out_path, "w");
    if (f == NULL) {
        snprintf(log, loglen, "cannot write %s", req->out_path);
        return KT_ERR_BACKEND;
    }
    for (size_t i = 0; i < req->ndefines; i++) fprintf(f, "%s\n", req->defines[i]);
    return fclose(f) == 0 ? KT_OK : KT_ERR_BACKEND;
}
static kt_status rec_load(void *state, size_t dev, const char *path, const char *kernel, void **module, char *err, size_t errlen) {
    (void)state, (void)dev, (void)kernel;
    FILE *f = fopen(path, "r");
    int block = 0;
    char line[64];
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "B=", 2) == 0) block = atoi(line + 2);
    if (f) fclose(f);
    rec_module *m = block > 0 ? malloc(sizeof *m) : NULL;
    if (m == NULL) {
        snprintf(err, errlen, "%s: no B", path);
        return KT_ERR_BACKEND;
    }
    m->block = block;
    *module = m;
    return KT_OK;
}
static void rec_unload(void *state, size_t dev, void *module) {
    (void)state, (void)dev;
    free(module);
}
/* B=64 takes half the time of B=128: the winner. */
static kt_status rec_launch(void *state, size_t dev, void *module, const kt_launch_geometry *g, const kt_arg *args,
                            size_t nargs, double *ns, char *err, size_t errlen) {
    (void)state, (void)dev, (void)args, (void)nargs, (void)err, (void)errlen;
    rec_last = *g;
    rec_launches++;
    if (ns) *ns = ((const rec_module *)module)->block == 64 ? 1000.0 : 2000.0;
    return KT_OK;
}
static kt_status rec_launch_async(void *state, size_t dev, void *module, const kt_launch_geometry *g, const kt_arg *args,
                                  size_t nargs, void *queue, char *err, size_t errlen) {
    (void)queue;
    rec_async_launches++;
    return rec_launch(state, dev, module, g, args, nargs, NULL, err, errlen);
}
static kt_status rec_wait(void *state, size_t dev, void *queue, char *err, size_t errlen) {
    (void)state, (void)dev, (void)queue, (void)err, (void)errlen;
    rec_waits++;
    return KT_OK;
}
static const kt_backend rec_backend = {
    .abi_version = 7, .name = "rec", .device_count = rec_count, .device_describe = rec_describe,
    .buffer_alloc = rec_alloc, .buffer_free = rec_free, .buffer_copy = rec_copy, .buffer_fill = rec_fill,
    .artifact_ext = ".rec", .compiler_id = rec_compiler, .build = rec_build, .load = rec_load, .unload = rec_unload,
    .launch = rec_launch, .caps = KT_BACKEND_CAP_HOST_MEMORY | KT_BACKEND_CAP_ASYNC_LAUNCH, .language = "rec",
    .launch_async = rec_launch_async, .queue_wait = rec_wait};

static int64_t pymod(int64_t a, int64_t b) { return ((a % b) + b) % b; }

/* Op `name` (x: f32 buffer, n: i64 keyed by power of two, m: i32, s: f64) on the recording
 * device, its variants' grid given by global (B is 64 or 128; every input reaches only the
 * grid, so none is keyed beyond n's bucket). */
static kt_op *rec_op(kt_context *ctx, size_t dev, const char *name, const char *const global[3]) {
    kt_op *op = NULL;
    ok(kt_op_create(ctx, name, &op));
    ok(kt_op_set_device(op, dev));
    ok(kt_op_add_buffer(op, "x", KT_TYPE_F32, KT_READ_WRITE));
    ok(kt_op_add_scalar(op, "n", KT_TYPE_I64));
    ok(kt_op_add_scalar(op, "m", KT_TYPE_I32));
    ok(kt_op_add_scalar(op, "s", KT_TYPE_F64));
    ok(kt_op_key_arg(op, 1, KT_BUCKET_POW2));
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    ok(kt_space_add_input(sp, "x"));
    ok(kt_space_add_input(sp, "n"));
    ok(kt_space_add_input(sp, "m"));
    ok(kt_space_add_input(sp, "s"));
    ok(kt_space_add_param(sp, "B", "[64, 128]"));
    const char *block[3] = {"B", NULL, NULL};
    ok(kt_space_set_geometry(sp, KT_GEOMETRY_GRID, global, block, NULL));
    ok(kt_op_add_variants(op, "v", sp, "a kernel the recording device does not read", "k", NULL, 0));
    kt_space_destroy(sp);
    return op;
}

/* Each hit's grid comes from its own arguments, whether its sizes compile into integer programs
 * ("rec_compiled": integer arithmetic over an i64, an i32 and a buffer's element count) or go to
 * the interpreter ("rec_interpreted": a conditional and a float); through kt_op_call and
 * kt_op_call_async alike, within a bucket and across buckets, and a size that comes out
 * negative fails the call with the interpreter's message either way. */
static void test_call_sizes_compiled_or_interpreted(void **state) {
    (void)state;
    kt_context *ctx = variant_context();
    ok(kt_context_set_cache(ctx, "off"));
    ok(kt_context_add_backend(ctx, &rec_backend));
    size_t dev = (size_t)-1;
    for (size_t i = 0; i < kt_context_device_count(ctx); i++)
        if (strcmp(kt_device_backend(kt_context_device(ctx, i)), "rec") == 0) dev = i;
    assert_true(dev != (size_t)-1);
    const char *compiled[3] = {"(n + B - 1) // B", "x // 4 + m % 3 - 1", "max(1, n // 256 - m)"};
    const char *interpreted[3] = {"(n + B - 1) // B", "m if m > 0 else 1", "int(s * 2) - 1"};
    kt_op *ops[2] = {rec_op(ctx, dev, "rec_compiled", compiled), rec_op(ctx, dev, "rec_interpreted", interpreted)};
    static float x[4096];
    typedef struct call {
        int64_t n, elems;
        int32_t m;
        double s;
        uint64_t tunes; /* tunings so far */
    } call;
    const call calls[] = {
        {600, 4096, 5, 1.5, 1},   /* tunes n's bucket 1024 */
        {1000, 1000, -2, 3.0, 1}, /* inside the bucket: its own sizes */
        {520, 64, 0, 0.5, 1},
        {1024, 7, 7, 8.0, 1},
        {3000, 4096, 1, 1.0, 2},  /* bucket 4096: tuned */
        {2049, 13, -9, 2.5, 2},
        {601, 4095, 4, 1.75, 2},  /* bucket 1024 again */
    };
    for (int o = 0; o < 2; o++)
        for (size_t c = 0; c < sizeof calls / sizeof calls[0]; c++)
            for (int async = 0; async < 2; async++) {
                const call *k = &calls[c];
                kt_arg args[] = {kt_arg_buf(x, (size_t)k->elems * sizeof(float)), kt_arg_i64(k->n), kt_arg_i32(k->m),
                                 kt_arg_f64(k->s)};
                rec_last = (kt_launch_geometry){0};
                int before = rec_async_launches, waits = rec_waits;
                uint64_t tuned = kt_op_tune_count(ops[o]);
                ok(async ? kt_op_call_async(ops[o], NULL, args, 4) : kt_op_call(ops[o], args, 4));
                assert_int_equal(kt_op_tune_count(ops[o]), k->tunes);
                if (tuned == k->tunes) { /* a hit: one launch enqueued; kt_op_call then waits for the queue */
                    assert_int_equal(rec_async_launches - before, 1);
                    assert_int_equal(rec_waits - waits, async ? 0 : 1);
                }
                const kt_decision *d = NULL;
                ok(kt_op_decision(ops[o], args, 4, &d));
                assert_string_equal(kt_decision_unit_config(d, kt_decision_winner_unit(d)), "B=64");
                int64_t want[3] = {(k->n + 63) / 64, 0, 0};
                if (o == 0) {
                    want[1] = k->elems / 4 + pymod(k->m, 3) - 1;
                    want[2] = k->n / 256 - k->m > 1 ? k->n / 256 - k->m : 1;
                } else {
                    want[1] = k->m > 0 ? k->m : 1;
                    want[2] = (int64_t)(k->s * 2) - 1;
                }
                if (rec_last.global[0] != want[0] || rec_last.global[1] != want[1] || rec_last.global[2] != want[2] ||
                    rec_last.local[0] != 64)
                    fail_msg("%s, call %zu%s: grid %lld,%lld,%lld block %lld; expected %lld,%lld,%lld block 64", kt_op_name(ops[o]),
                             c, async ? " (async)" : "", (long long)rec_last.global[0], (long long)rec_last.global[1],
                             (long long)rec_last.global[2], (long long)rec_last.local[0], (long long)want[0], (long long)want[1],
                             (long long)want[2]);
            }
    /* a size below zero: the call fails, saying which expression, and launches nothing */
    const kt_arg bad[2][4] = {{kt_arg_buf(x, 2 * sizeof(float)), kt_arg_i64(1000), kt_arg_i32(3), kt_arg_f64(1.0)},
                              {kt_arg_buf(x, 2 * sizeof(float)), kt_arg_i64(1000), kt_arg_i32(3), kt_arg_f64(0.25)}};
    const char *expr[2] = {"x // 4 + m % 3 - 1", "int(s * 2) - 1"};
    for (int o = 0; o < 2; o++)
        for (int async = 0; async < 2; async++) {
            int before = rec_launches;
            const char *where = async ? "kt_op_call_async" : "kt_op_call";
            expect_status(KT_ERR_CANDIDATE_FAILED, async ? kt_op_call_async(ops[o], NULL, bad[o], 4) : kt_op_call(ops[o], bad[o], 4));
            char want[512];
            snprintf(want, sizeof want,
                     "op '%s': candidate 'v': the launch size for these arguments: geometry: global size: expression '%s' "
                     "does not give a size >= 0",
                     kt_op_name(ops[o]), expr[o]);
            if (strcmp(kt_last_error(), want) != 0) fail_msg("%s: '%s', expected '%s'", where, kt_last_error(), want);
            assert_int_equal(rec_launches, before);
        }
    kt_context_destroy(ctx);
}

/* Under a budget of wall seconds, the tuning does not wait past its deadline for a build on the
 * host either, and the build it leaves is stopped: group "hung" compiles with -include of a
 * FIFO nobody writes, so its compiler (cc1) waits for ever (the FIFO's watcher sees it arrive).
 * With a budget of 5 s (the hung build starts well before) the tuning returns at its deadline
 * without it (its unit NOT_RUN, the result right), having stopped the compiler, its children
 * included: soon nobody reads the FIFO (opening it to write fails with ENXIO). Destroying the
 * context then waits for nothing, and no failure is recorded for the group's code. */
/* A variant group "hung" of one configuration whose compiler includes the FIFO at fifo: it
 * waits for ever until stopped (fifo-hang.h). */
static void add_hung_group(kt_op *op, const char *src, const char *fifo) {
    kt_space *hs = NULL;
    ok(kt_space_create(&hs));
    ok(kt_space_add_param(hs, "TI", "[8]"));
    ok(kt_space_add_param(hs, "TK", "[16]"));
    ok(kt_space_add_param(hs, "UNROLL", "[1]"));
    ok(kt_space_add_param(hs, "WRONG", "[0]"));
    ok(kt_op_add_variants(op, "hung", hs, src, "matmul", (const char *const[]){"-include", fifo}, 2));
    kt_space_destroy(hs);
}

static void test_budget_stops_hung_compiler(void **state) {
    (void)state;
    fill();
    static fifo_hang hang; /* the watcher reads it: it outlives a failed assertion */
    assert_true(fifo_hang_start(&hang, true));
    const int failed_before = count_files(artifacts, ".failed");
    kt_context *ctx = variant_context();
    kt_space *sp = matmul_space();
    kt_op *op = matmul_op(ctx, sp, matmul_src, "matmul");
    add_hung_group(op, matmul_src, hang.path);
    ok(kt_op_set_budget(op, 0, 5.0));
    /* one build at a time: the tiled group's first unit is measured before "hung" is built, so
     * that the tuning can decide by the deadline (without an answer it waits for a build) */
    ok(kt_context_set_compile_threads(ctx, 1));
    double t0 = fifo_now_s();
    ok(kt_op_call(op, mm_args(N), 4));
    assert_true(fifo_now_s() - t0 < 50); /* ten times the deadline; a build waited for lasts 60 s */
    assert_memory_equal(C, R, sizeof C);
    const kt_decision *d = NULL;
    ok(kt_op_decision(op, mm_args(N), 4, &d));
    size_t hung = kt_decision_unit_count(d);
    for (size_t u = 0; u < kt_decision_unit_count(d); u++)
        if (strcmp(kt_op_candidate_name(op, kt_decision_unit_candidate(d, u)), "hung") == 0) hung = u;
    assert_true(hung < kt_decision_unit_count(d));
    assert_int_equal(kt_decision_unit_outcome(d, hung), KT_OUTCOME_NOT_RUN);
    assert_true(kt_decision_winner_unit(d) != hung);
    const bool unread = fifo_unread(&hang);
    t0 = fifo_now_s();
    kt_context_destroy(ctx);
    assert_true(fifo_now_s() - t0 < 50);
    assert_true(atomic_load(&hang.reader_seen)); /* the compiler reached the FIFO */
    assert_false(fifo_hang_end(&hang));          /* the watcher never had to let it finish */
    assert_true(unread);
    assert_int_equal(count_files(artifacts, ".failed"), failed_before);
    kt_space_destroy(sp);
}

/* kt_op_build under a budget of wall seconds (1.5 s): the compiler hung on its FIFO is stopped at
 * the deadline, the hung build counts as failed and is told with no file, the others are built. */
static void test_build_ahead_gives_up(void **state) {
    (void)state;
    fill();
    static fifo_hang hang;
    assert_true(fifo_hang_start(&hang, true));
    static char src[4096];
    snprintf(src, sizeof src, "/* ahead deadline %d */\n%s", (int)getpid(), matmul_src); /* new to the cache */
    kt_context *ctx = variant_context();
    kt_space *sp = matmul_space();
    kt_op *op = matmul_op(ctx, sp, src, "matmul");
    add_hung_group(op, src, hang.path);
    ok(kt_op_set_budget(op, 0, 1.5));
    built_seen seen = {0, 0, true};
    kt_build_counts c = {0};
    double t0 = fifo_now_s();
    ok(kt_op_build_each(op, mm_args(N), 4, &c, on_built, &seen));
    assert_true(fifo_now_s() - t0 < 50); /* the deadline is 1.5 s; a build waited for lasts 60 s */
    assert_int_equal(c.built, 8);
    assert_int_equal(c.failed, 1);
    assert_int_equal(seen.with_artifact, 8);
    assert_int_equal(seen.without, 1);
    kt_context_destroy(ctx); /* waits for the stopped compiler */
    assert_true(atomic_load(&hang.reader_seen)); /* the compiler reached the FIFO */
    assert_false(fifo_hang_end(&hang));          /* the watcher never had to let it finish */
    kt_space_destroy(sp);
}

int main(int argc, char **argv) {
    self_path = argv[0];
    if (argc == 3 && strcmp(argv[1], "--child") == 0) {
        snprintf(artifacts, sizeof artifacts, "%s", argv[2]);
        return child_main();
    }
    snprintf(artifacts, sizeof artifacts, "/tmp/kt-variants-XXXXXX");
    if (mkdtemp(artifacts) == NULL) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiled_matmul),
        cmocka_unit_test(test_work_formulas),
        cmocka_unit_test(test_syntax_error_variant),
        cmocka_unit_test(test_missing_entry_point),
        cmocka_unit_test(test_identical_code_compiled_once),
        cmocka_unit_test(test_second_process_compiles_nothing),
        cmocka_unit_test(test_build_ahead),
        cmocka_unit_test(test_names_cannot_collide),
        cmocka_unit_test(test_missing_compiler),
        cmocka_unit_test(test_corrupt_artifact_rebuilt),
        cmocka_unit_test(test_code_argument_keyed_exactly),
        cmocka_unit_test(test_long_inputs_never_cut),
        cmocka_unit_test(test_derived_list),
        cmocka_unit_test(test_call_sizes_compiled_or_interpreted),
        cmocka_unit_test(test_budget_stops_hung_compiler),
        cmocka_unit_test(test_build_ahead_gives_up),
    };
    int rc = kt_run_cases(argc, argv, tests, NULL, NULL);
    char rm[300];
    snprintf(rm, sizeof rm, "rm -rf '%s'", artifacts);
    if (system(rm) != 0) rc = rc ? rc : 1;
    return rc;
}
