/*
 * test-contract.c - Kernel Tuner's compile contract (kt_op_set_kernel_tuner_contract) on the C
 * backend: each configuration's defines (grid in blocks, block, parameters, kernel_tuner), its
 * misuse, compiler messages on the kernel's own lines, a compiled-in grid keyed exactly, unroll
 * factors never sharing an artifact, and the CUDA backend's text (constexpr unroll factors,
 * pragmas removed for 0) as a pure function, and a function's returned time taken as its run's.
 * The contract on PoCL is in test-opencl, on the GPU in
 * cuda-check.
 */
#define _GNU_SOURCE /* mkdtemp */
#include "helpers.h"

#include <math.h>

#include <kerntune/decision.h>
#include <kerntune/validation.h>
#include <kerntune/variants.h>

#include "backends/cuda_int.h" /* kt__cu_contract_source */

static char artifacts[256];

static kt_context *variant_context(void) {
    kt_context *ctx = test_context(3);
    ok(kt_context_set_artifact_dir(ctx, artifacts));
    return ctx;
}


/* A kernel written for Kernel Tuner: its own defaults when kernel_tuner is not defined. */
static const char *kt_defaults_src =
    "#ifndef kernel_tuner\n"
    "#define block_size_x 7\n"
    "#define block_size_y 7\n"
    "#define block_size_z 7\n"
    "#define grid_size_x 7\n"
    "#define grid_size_y 7\n"
    "#define grid_size_z 7\n"
    "#endif\n"
    "#include <stdint.h>\n"
    "void put(int32_t *out, long n) {\n"
    "    (void)n;\n"
    "#ifdef kernel_tuner\n"
    "    out[0] = kernel_tuner;\n"
    "#else\n"
    "    out[0] = -1;\n"
    "#endif\n"
    "    out[1] = block_size_x; out[2] = block_size_y; out[3] = block_size_z;\n"
    "    out[4] = grid_size_x; out[5] = grid_size_y; out[6] = grid_size_z;\n"
    "    out[7] = P;\n"
    "}\n";

static int naive_put(const kt_arg *args, size_t nargs, void *user) {
    (void)nargs, (void)user;
    memset(args[0].ptr, 0, 8 * sizeof(int32_t));
    return 0;
}

/* The same with block size names bx, by, bz: block_size_x is then no define of the contract. */
static const char *kt_names_src =
    "#include <stdint.h>\n"
    "void put(int32_t *out, long n) {\n"
    "    (void)n;\n"
    "    out[0] = kernel_tuner; out[1] = bx; out[2] = by; out[3] = bz;\n"
    "    out[4] = grid_size_x; out[5] = grid_size_y; out[6] = grid_size_z;\n"
    "#ifdef block_size_x\n"
    "    out[7] = -1;\n"
    "#else\n"
    "    out[7] = P;\n"
    "#endif\n"
    "}\n";

/* One configuration (P=5, a parameter block_size_y=9), the given geometry; with or without the
 * contract; returns what the kernel wrote. */
static void kt_contract_run(bool contract, kt_geometry kind, const char *const global[3], const char *const local[3],
                            const char *const *names, int32_t out[8]) {
    kt_context *ctx = variant_context();
    kt_op *op = NULL;
    ok(kt_op_create(ctx, "ktc", &op));
    ok(kt_op_set_validation(op, 0));
    ok(kt_op_add_buffer(op, "out", KT_TYPE_I32, KT_WRITE_ONLY));
    ok(kt_op_add_scalar(op, "n", KT_TYPE_I64));
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    ok(kt_space_add_param(sp, "P", "[5]"));
    ok(kt_space_add_param(sp, "block_size_y", "[9]"));
    ok(kt_space_set_geometry(sp, kind, global, local, NULL));
    ok(kt_op_add_variants(op, "v", sp, names ? kt_names_src : kt_defaults_src,
                              "put", NULL, 0));
    kt_space_destroy(sp);
    if (contract) ok(kt_op_set_kernel_tuner_contract(op, "v", names));
    for (int i = 0; i < 8; i++) out[i] = -99;
    kt_arg args[] = {kt_arg_buf(out, 8 * sizeof *out), kt_arg_i64(8)};
    ok(kt_op_call(op, args, 2));
    kt_context_destroy(ctx);
}

/* A kernel that begins `#ifndef kernel_tuner` and defines its own block sizes there sees the
 * configuration's under the contract: kernel_tuner 1, the block (a parameter of a block size's
 * name keeps its own value), the grid in blocks (a global size in work-items divided, rounded
 * up), the parameter; without the contract its defaults, and kernel_tuner undefined. Custom
 * block size names replace block_size_x/y/z. */
static void test_kernel_tuner_contract_defines(void **state) {
    (void)state;
    int32_t out[8];
    const char *grid[3] = {"3", "4", NULL}, *block[3] = {"P + 1", "2", NULL};
    kt_contract_run(true, KT_GEOMETRY_GRID, grid, block, NULL, out);
    assert_memory_equal(out, ((int32_t[]){1, 6, 9, 1, 3, 4, 1, 5}), sizeof out);
    kt_contract_run(false, KT_GEOMETRY_GRID, grid, block, NULL, out);
    assert_memory_equal(out, ((int32_t[]){-1, 7, 7, 7, 7, 7, 7, 5}), sizeof out);
    const char *items[3] = {"13", "8", "2"}, *wg[3] = {"4", "P - 1", "2"};
    kt_contract_run(true, KT_GEOMETRY_GLOBAL, items, wg, NULL, out); /* 13 / 4 -> 4 blocks; 8 / 4 -> 2; 2 / 2 -> 1 */
    assert_memory_equal(out, ((int32_t[]){1, 4, 9, 2, 4, 2, 1, 5}), sizeof out);
    /* custom names: bx, by, bz are the block; block_size_x is then no define of the contract */
    static const char *const names[3] = {"bx", "by", "bz"};
    const char *b2[3] = {"P + 1", "2", "3"};
    kt_contract_run(true, KT_GEOMETRY_GRID, grid, b2, names, out);
    assert_memory_equal(out, ((int32_t[]){1, 6, 2, 3, 3, 4, 1, 5}), sizeof out);
}

/* The contract's misuse: a native, unknown group, names that are no identifiers, the contract's
 * own names, twice the same name, after the op froze. */
static void test_kernel_tuner_contract_misuse(void **state) {
    (void)state;
    kt_context *ctx = variant_context();
    kt_op *op = NULL;
    ok(kt_op_create(ctx, "ktm", &op));
    ok(kt_op_add_buffer(op, "out", KT_TYPE_I32, KT_WRITE_ONLY));
    ok(kt_op_add_scalar(op, "n", KT_TYPE_I64));
    ok(kt_op_add_native(op, "native", naive_put, NULL));
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    ok(kt_space_add_param(sp, "P", "[5]"));
    ok(kt_op_add_variants(op, "v", sp, kt_defaults_src, "put", NULL, 0));
    kt_space_destroy(sp);
    assert_int_equal(kt_op_set_kernel_tuner_contract(op, "native", NULL), KT_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(kt_last_error(), "'native' is a native candidate"));
    assert_int_equal(kt_op_set_kernel_tuner_contract(op, "nope", NULL), KT_ERR_UNKNOWN_CANDIDATE);
    assert_int_equal(kt_op_set_kernel_tuner_contract(op, "v", (const char *const[]){"bx", "2y", NULL}), KT_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(kt_last_error(), "block size name 1 '2y' is not an identifier"));
    assert_int_equal(kt_op_set_kernel_tuner_contract(op, "v", (const char *const[]){"grid_size_x", NULL, NULL}), KT_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(kt_last_error(), "a name the contract defines itself"));
    assert_int_equal(kt_op_set_kernel_tuner_contract(op, "v", (const char *const[]){NULL, "block_size_x", NULL}), KT_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(kt_last_error(), "block size names 0 and 1 are both 'block_size_x'"));
    ok(kt_op_set_kernel_tuner_contract(op, "v", NULL));
    ok(kt_op_set_validation(op, 0));
    int32_t out[8];
    kt_arg args[] = {kt_arg_buf(out, sizeof out), kt_arg_i64(8)};
    ok(kt_op_call(op, args, 2));
    assert_int_equal(kt_op_set_kernel_tuner_contract(op, "v", NULL), KT_ERR_STATE);
    kt_context_destroy(ctx);
}

/* A compile error on line 3 of the kernel is reported on line 3 under the contract: the defines
 * come before the kernel's line 1. */
static void test_kernel_tuner_contract_line_numbers(void **state) {
    (void)state;
    kt_context *ctx = variant_context();
    kt_op *op = NULL;
    ok(kt_op_create(ctx, "ktl", &op));
    ok(kt_op_add_buffer(op, "out", KT_TYPE_I32, KT_WRITE_ONLY));
    ok(kt_op_add_scalar(op, "n", KT_TYPE_I64));
    ok(kt_op_add_native(op, "native", naive_put, NULL));
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    ok(kt_space_add_param(sp, "P", "[5]"));
    ok(kt_op_add_variants(op, "v", sp, "#include <stdint.h>\nvoid put(int32_t *out, long n) {\n    this_is_no_c = block_size_x;\n}\n",
                          "put", NULL, 0));
    kt_space_destroy(sp);
    ok(kt_op_set_kernel_tuner_contract(op, "v", NULL));
    int32_t out[8];
    kt_arg args[] = {kt_arg_buf(out, sizeof out), kt_arg_i64(8)};
    ok(kt_op_call(op, args, 2));
    const kt_decision *d = NULL;
    ok(kt_op_decision(op, args, 2, &d));
    assert_int_equal(kt_decision_unit_outcome(d, 1), KT_OUTCOME_BUILD_FAILED);
    const char *msg = kt_decision_unit_message(d, 1);
    if (strstr(msg, "kernel:3:") == NULL) fail_msg("no error on the kernel's line 3: %s", msg);
    kt_context_destroy(ctx);
}

/* A global size that reads an argument is compiled in as grid_size_x under the contract, so the
 * argument is keyed exactly (without the contract each call would size its own launch from one
 * decision): n = 3 and n = 5 each see their own grid. */
static void test_kernel_tuner_contract_grid_keyed(void **state) {
    (void)state;
    kt_context *ctx = variant_context();
    kt_op *op = NULL;
    ok(kt_op_create(ctx, "ktg", &op));
    ok(kt_op_set_validation(op, 0));
    ok(kt_op_add_buffer(op, "out", KT_TYPE_I32, KT_WRITE_ONLY));
    ok(kt_op_add_scalar(op, "n", KT_TYPE_I64));
    ok(kt_op_key_arg(op, 1, KT_BUCKET_POW2));
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    ok(kt_space_add_input(sp, "n"));
    ok(kt_space_add_param(sp, "P", "[5]"));
    ok(kt_space_set_geometry(sp, KT_GEOMETRY_GRID, (const char *const[]){"n", NULL, NULL}, NULL, NULL));
    ok(kt_op_add_variants(op, "v", sp, kt_defaults_src, "put", NULL, 0));
    kt_space_destroy(sp);
    ok(kt_op_set_kernel_tuner_contract(op, "v", NULL));
    for (int64_t n = 5; n >= 3; n -= 2) { /* one POW2 bucket */
        int32_t out[8];
        kt_arg args[] = {kt_arg_buf(out, sizeof out), kt_arg_i64(n)};
        ok(kt_op_call(op, args, 2));
        assert_int_equal(out[4], n);
        const kt_decision *d = NULL;
        ok(kt_op_decision(op, args, 2, &d));
        assert_int_equal(kt_decision_key_len(d), 2);
        assert_int_equal(kt_decision_key(d, 1), n);
    }
    assert_int_equal(kt_op_tune_count(op), 2);
    kt_context_destroy(ctx);
}

/* Configurations that differ in a loop_unroll_factor value never share an artifact under the
 * contract (a backend may write it as a constant, or remove pragmas for 0), even where the code
 * never reads it; without the contract the preprocessed code is the same, built once. */
static void test_kernel_tuner_contract_unroll_not_shared(void **state) {
    (void)state;
    for (int contract = 0; contract < 2; contract++) {
        kt_context *ctx = variant_context();
        kt_op *op = NULL;
        ok(kt_op_create(ctx, "ktu", &op));
        ok(kt_op_set_validation(op, 0));
        ok(kt_op_add_buffer(op, "out", KT_TYPE_I32, KT_WRITE_ONLY));
        ok(kt_op_add_scalar(op, "n", KT_TYPE_I64));
        kt_space *sp = NULL;
        ok(kt_space_create(&sp));
        ok(kt_space_add_param(sp, "loop_unroll_factor_0", "[0, 4]"));
        char src[200];
        snprintf(src, sizeof src, "#include <stdint.h>\n/* %d */\nvoid put(int32_t *out, long n) { (void)n; out[0] = 1; }\n", contract);
        ok(kt_op_add_variants(op, "v", sp, src, "put", NULL, 0));
        kt_space_destroy(sp);
        if (contract) ok(kt_op_set_kernel_tuner_contract(op, "v", NULL));
        int32_t out[8];
        kt_arg args[] = {kt_arg_buf(out, sizeof out), kt_arg_i64(8)};
        ok(kt_op_call(op, args, 2));
        assert_int_equal(kt_context_compile_count(ctx), contract ? 2 : 1);
        kt_context_destroy(ctx);
    }
}

/* Kernel Tuner's CUDA part, as text (no GPU needed): loop_unroll_factor defines become constexpr
 * lines, 0 removes the pragmas that name it (the white space before them, blank lines too, and
 * only at a line's start: not in a // comment), then #line 1; other defines stay options. */
static void test_kernel_tuner_contract_cuda_text(void **state) {
    (void)state;
    const char *src = "__global__ void k(float *x) {\n"
                      "    #pragma unroll loop_unroll_factor_a\n"
                      "    for (int i = 0; i < 4; i++) x[i] = 0;\n"
                      "\n"
                      "\t#pragma  unroll\tloop_unroll_factor_b\n"
                      "    for (int i = 0; i < 4; i++) x[i] = 1;\n"
                      "    // #pragma unroll loop_unroll_factor_b\n"
                      "#pragma unroll loop_unroll_factor_bc\n"
                      "#pragma unrolled loop_unroll_factor_b\n"
                      "}\n";
    const char *defs[] = {"grid_size_x=2", "loop_unroll_factor_a=4", "block_size_x=32", "loop_unroll_factor_b=0", "kernel_tuner=1"};
    bool opt[5];
    char *out = kt__cu_contract_source(src, defs, 5, opt);
    assert_non_null(out);
    assert_string_equal(out, "constexpr int loop_unroll_factor_a = 4;\n"
                             "#line 1\n"
                             "__global__ void k(float *x) {\n"
                             "    #pragma unroll loop_unroll_factor_a\n"
                             "    for (int i = 0; i < 4; i++) x[i] = 0;\n"
                             "\n"
                             "    for (int i = 0; i < 4; i++) x[i] = 1;\n"
                             "    // #pragma unroll loop_unroll_factor_b\n"
                             "c\n" /* Kernel Tuner's expression has no word boundary: a longer name loses its prefix */
                             "#pragma unrolled loop_unroll_factor_b\n"
                             "}\n");
    assert_memory_equal(opt, ((bool[]){true, false, true, false, true}), sizeof opt);
    free(out);
    /* no loop_unroll_factor at all: the source after #line 1, every define an option */
    const char *plain[] = {"P=3"};
    out = kt__cu_contract_source("int x;\n", plain, 1, opt);
    assert_string_equal(out, "#line 1\nint x;\n");
    assert_true(opt[0]);
    free(out);
}

/* A function that returns float returns its run's time in ms under the contract (Kernel Tuner's
 * C backend records that value): W = 1 spins 20 ms and says 0.25 ms, W = 0 returns at once and
 * says 2.5 ms. Under the contract W = 1 wins with exactly the times it returned; without it the
 * calls are timed, and W = 0 wins. A negative time fails its configuration. */
static const char *kt_timed_src =
    "#include <stdint.h>\n"
    "#include <time.h>\n"
    "float put(int32_t *out, long n) {\n"
    "    out[0] = (int32_t)n;\n"
    "    if (n == 99) return -1.0f; /* a call that fails after the tuning */\n"
    "    struct timespec t0, t;\n"
    "    clock_gettime(CLOCK_MONOTONIC, &t0);\n"
    "    if (W == 1)\n"
    "        do clock_gettime(CLOCK_MONOTONIC, &t);\n"
    "        while ((t.tv_sec - t0.tv_sec) * 1e3 + (t.tv_nsec - t0.tv_nsec) / 1e6 < 20.0);\n"
    "    return W == 1 ? 0.25f : W == 0 ? 2.5f : -1.0f;\n"
    "}\n";

static void test_kernel_tuner_contract_returned_time(void **state) {
    (void)state;
    for (int contract = 1; contract >= 0; contract--) {
        kt_context *ctx = variant_context();
        kt_op *op = NULL;
        ok(kt_op_create(ctx, contract ? "ktt" : "ktt-plain", &op));
        ok(kt_op_set_validation(op, 0));
        ok(kt_op_add_buffer(op, "out", KT_TYPE_I32, KT_WRITE_ONLY));
        ok(kt_op_add_scalar(op, "n", KT_TYPE_I64));
        kt_space *sp = NULL;
        ok(kt_space_create(&sp));
        ok(kt_space_add_param(sp, "W", contract ? "[0, 1, 2]" : "[0, 1]"));
        ok(kt_op_add_variants(op, "v", sp, kt_timed_src, "put", NULL, 0));
        kt_space_destroy(sp);
        if (contract) ok(kt_op_set_kernel_tuner_contract(op, "v", NULL));
        int32_t out[1] = {0};
        kt_arg args[] = {kt_arg_buf(out, sizeof out), kt_arg_i64(7)};
        ok(kt_op_call(op, args, 2));
        assert_int_equal(out[0], 7);
        const kt_decision *d = NULL;
        ok(kt_op_decision(op, args, 2, &d));
        const char *win = kt_decision_unit_config(d, kt_decision_winner_unit(d));
        assert_non_null(strstr(win, contract ? "W=1" : "W=0"));
        for (size_t u = 0; contract && u < kt_decision_unit_count(d); u++) {
            const char *cfg = kt_decision_unit_config(d, u);
            if (strstr(cfg, "W=2")) { /* returned -1 ms, and says so */
                assert_int_equal(kt_decision_unit_outcome(d, u), KT_OUTCOME_FAILED);
                const char *msg = kt_decision_unit_message(d, u);
                assert_non_null(msg);
                if (strstr(msg, "the function returned -1 ms: under Kernel Tuner's C contract a negative time is a failed run") == NULL)
                    fail_msg("W=2's message: %s", msg);
                continue;
            }
            const double want = strstr(cfg, "W=1") ? 0.25e6 : 2.5e6;
            const double *times = NULL;
            size_t n = 0;
            ok(kt_decision_unit_runtimes(d, u, &times, &n));
            assert_true(n > 0);
            for (size_t r = 0; r < n; r++) assert_true(times[r] == want); /* each run's, exactly */
            assert_true(fabs(kt_decision_unit_time_ns(d, u) - want) < 1e-3); /* their median, as arithmetic gives it */
        }
        if (contract) { /* a hit that fails says why, as the tuning's runs do */
            kt_arg again[] = {kt_arg_buf(out, sizeof out), kt_arg_i64(99)};
            assert_int_equal(kt_op_call(op, again, 2), KT_ERR_CANDIDATE_FAILED);
            assert_string_equal(kt_last_error(), "kt_op_call(op 'ktt'): candidate 'v' W=1 failed: the function returned -1 ms: "
                                                 "under Kernel Tuner's C contract a negative time is a failed run");
        }
        kt_context_destroy(ctx);
    }
}

int main(int argc, char **argv) {
    snprintf(artifacts, sizeof artifacts, "/tmp/kt-contract-XXXXXX");
    if (mkdtemp(artifacts) == NULL) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernel_tuner_contract_defines),    cmocka_unit_test(test_kernel_tuner_contract_misuse),
        cmocka_unit_test(test_kernel_tuner_contract_line_numbers), cmocka_unit_test(test_kernel_tuner_contract_grid_keyed),
        cmocka_unit_test(test_kernel_tuner_contract_unroll_not_shared), cmocka_unit_test(test_kernel_tuner_contract_cuda_text),
        cmocka_unit_test(test_kernel_tuner_contract_returned_time),
    };
    int rc = kt_run_cases(argc, argv, tests, NULL, NULL);
    char rm[300];
    snprintf(rm, sizeof rm, "rm -rf '%s'", artifacts);
    if (system(rm) != 0) rc = rc ? rc : 1;
    return rc;
}
