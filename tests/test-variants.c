/*
 * test-variants.c - runtime-compiled variants on the C backend (the system compiler, dlopen):
 * a tiled matrix multiply tuned over tile and unroll defines, with a deliberately wrong variant
 * that validation disqualifies; a variant with a syntax error; a missing entry point; identical
 * code compiled once; space inputs bound from the op's arguments; and a second process that
 * finds every artifact compiled (zero compiles). Kernel Tuner's compile contract is in test-contract.c.
 */
#define _GNU_SOURCE /* mkdtemp */
#include "helpers.h"

#include <kerntune/cache.h>
#include <kerntune/decision.h>
#include <kerntune/device.h>
#include <kerntune/measure.h>
#include <kerntune/validation.h>
#include <kerntune/variants.h>

#include <math.h>
#include <sys/wait.h>
#include <unistd.h>

#include "variants-matmul.h"

static const char *self_path;

/* Tunes the tiled matmul: the wrong variants disqualified, a right one the winner. */
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
        cmocka_unit_test(test_names_cannot_collide),
        cmocka_unit_test(test_missing_compiler),
        cmocka_unit_test(test_corrupt_artifact_rebuilt),
        cmocka_unit_test(test_code_argument_keyed_exactly),
        cmocka_unit_test(test_long_inputs_never_cut),
        cmocka_unit_test(test_derived_list),
    };
    int rc = kt_run_cases(argc, argv, tests, NULL, NULL);
    char rm[300];
    snprintf(rm, sizeof rm, "rm -rf '%s'", artifacts);
    if (system(rm) != 0) rc = rc ? rc : 1;
    return rc;
}
