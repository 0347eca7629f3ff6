/*
 * test-rowsum.c - the row-sum op of ops/ as ops/rowsum.c declares it, without a GPU. The op is
 * built on the host device (device 0) for a stand-in driver of 132 multiprocessors: the C
 * compiler cannot build its CUDA kernels, so every configuration fails to build, but each is
 * still planned for the call's arguments first, which shows what the declaration says: the
 * spaces and their constraint, every configuration's grid computed from rows, the key (rows and
 * cols rounded up to powers of two, nothing keyed exactly), the split-row requirement, and the
 * errors of a configuration given by hand. The kernels run in tests/cuda-rowsum-check.c, on a GPU.
 */
#include "helpers.h"

#include "cudalib.h" /* struct ktops_cuda: the stand-in driver */

#include <kerntune/decision.h>
#include <kerntune/device.h>

static ktops_cuda fake_gpu = {.sms = 132};

static ktops_rowsum *make(kt_context *ctx, const char *group, const char *config) {
    ktops_rowsum *r = NULL;
    ktops_rowsum_options opt = {group, config};
    kt_status st = ktops_rowsum_create_with(&fake_gpu, ctx, 0, "rowsum", &opt, &r);
    if (st != KT_OK) fail_msg("ktops_rowsum_create_with: %s", ktops_last_error());
    return r;
}

/* Plans every configuration for (rows, cols) from sizes alone (the op tunes on generated
 * inputs, so its buffers may be NULL) and returns the decision: every unit failed to build. */
static const kt_decision *plan(ktops_rowsum *r, int64_t rows, int64_t cols) {
    kt_arg args[KTOPS_ROWSUM_NARGS] = {kt_arg_buf(NULL, (size_t)(rows * cols) * sizeof(float)),
                                       kt_arg_buf(NULL, (size_t)rows * sizeof(float)), kt_arg_i64(rows), kt_arg_i64(cols)};
    expect_status(KT_ERR_ALL_FAILED, kt_op_tune(ktops_rowsum_op(r), args, KTOPS_ROWSUM_NARGS));
    const kt_decision *d = NULL;
    expect_status(KT_ERR_ALL_FAILED, kt_op_decision(ktops_rowsum_op(r), args, KTOPS_ROWSUM_NARGS, &d));
    return d;
}

static int64_t param(const char *config, const char *name) {
    char key[32];
    snprintf(key, sizeof key, "%s=", name);
    const char *p = config;
    while ((p = strstr(p, key)) != NULL && p != config && p[-1] != ',') p++;
    if (p == NULL) fail_msg("%s has no %s", config, name);
    return strtoll(p + strlen(key), NULL, 10);
}

static const char *const persistent_configs[] = {
    "BLOCK=256,BPS=4,TPR=1,UNROLL=1", "BLOCK=256,BPS=4,TPR=1,UNROLL=4", "BLOCK=256,BPS=4,TPR=2,UNROLL=1",
    "BLOCK=256,BPS=4,TPR=4,UNROLL=1", "BLOCK=256,BPS=4,TPR=8,UNROLL=1", "BLOCK=256,BPS=4,TPR=16,UNROLL=1",
    "BLOCK=256,BPS=4,TPR=32,UNROLL=1", "BLOCK=256,BPS=4,TPR=32,UNROLL=4", "BLOCK=256,BPS=4,TPR=256,UNROLL=1",
    "BLOCK=256,BPS=4,TPR=256,UNROLL=4", "BLOCK=256,BPS=8,TPR=1,UNROLL=1", "BLOCK=256,BPS=8,TPR=1,UNROLL=4",
    "BLOCK=256,BPS=8,TPR=2,UNROLL=1", "BLOCK=256,BPS=8,TPR=4,UNROLL=1", "BLOCK=256,BPS=8,TPR=8,UNROLL=1",
    "BLOCK=256,BPS=8,TPR=16,UNROLL=1", "BLOCK=256,BPS=8,TPR=32,UNROLL=1", "BLOCK=256,BPS=8,TPR=32,UNROLL=4",
    "BLOCK=256,BPS=8,TPR=256,UNROLL=1", "BLOCK=256,BPS=8,TPR=256,UNROLL=4",
};

/* Every configuration of the three spaces, each with the grid its kernel needs for the call's
 * rows: one block per row; min(SMs x BPS, blocks of 256 / TPR rows); one block per split of
 * each row. rows and cols are the key, rounded up to powers of two, and nothing more: they
 * reach no define, constraint or block size. */
static void test_every_configuration_planned(void **state) {
    (void)state;
    kt_context *ctx = NULL;
    ok(kt_context_create(&ctx));
    ktops_rowsum *r = make(ctx, NULL, NULL);
    kt_op *op = ktops_rowsum_op(r);
    assert_int_equal(kt_op_candidate_count(op), 3);
    assert_string_equal(kt_op_candidate_name(op, 0), "block-per-row");
    assert_string_equal(kt_op_candidate_name(op, 1), "persistent");
    assert_string_equal(kt_op_candidate_name(op, 2), "split-row");
    const int64_t shapes[][2] = {{1000, 7}, {3, 1}, {40000, 2}};
    for (size_t s = 0; s < 3; s++) {
        const int64_t rows = shapes[s][0], cols = shapes[s][1];
        const kt_decision *d = plan(r, rows, cols);
        assert_int_equal(kt_decision_key_len(d), 2);
        int64_t pow2r = 1, pow2c = 1;
        while (pow2r < rows) pow2r *= 2;
        while (pow2c < cols) pow2c *= 2;
        assert_int_equal(kt_decision_key(d, 0), pow2r);
        assert_int_equal(kt_decision_key(d, 1), pow2c);
        /* more rows than the split-row workspace holds: its requirement rejects them, and the
         * candidate is one unit, rejected, never planned */
        const int split_rejected = rows > 4096;
        assert_int_equal(kt_decision_unit_count(d), 10 + 20 + (split_rejected ? 1 : 12));
        size_t per[3] = {0, 0, 0};
        for (size_t u = 0; u < kt_decision_unit_count(d); u++) {
            const size_t c = kt_decision_unit_candidate(d, u);
            const char *cfg = kt_decision_unit_config(d, u);
            if (c == 2 && split_rejected) {
                assert_null(cfg);
                assert_int_equal(kt_decision_unit_outcome(d, u), KT_OUTCOME_REJECTED);
                per[c]++;
                continue;
            }
            int64_t grid[3], block[3], shmem;
            ok(kt_decision_unit_geometry(d, u, grid, block, &shmem));
            assert_int_equal(block[0], param(cfg, "BLOCK"));
            assert_int_equal(block[1], 1);
            assert_int_equal(shmem, 0);
            if (c == 0) {
                assert_int_equal(grid[0], rows);
                assert_int_equal(grid[1], 1);
                assert_int_equal(kt_decision_unit_outcome(d, u), KT_OUTCOME_BUILD_FAILED);
            } else if (c == 1) {
                assert_string_equal(cfg, persistent_configs[per[1]]);
                int64_t per_block = 256 / param(cfg, "TPR"), need = (rows + per_block - 1) / per_block;
                int64_t most = 132 * param(cfg, "BPS");
                assert_int_equal(grid[0], need < most ? need : most);
                assert_int_equal(grid[1], 1);
                assert_int_equal(kt_decision_unit_outcome(d, u), KT_OUTCOME_BUILD_FAILED);
            } else {
                assert_int_equal(grid[0], rows);
                assert_int_equal(grid[1], param(cfg, "SPLITS"));
                assert_int_equal(kt_decision_unit_outcome(d, u), KT_OUTCOME_BUILD_FAILED);
            }
            per[c]++;
        }
        assert_int_equal(per[0], 10);
        assert_int_equal(per[1], 20);
        assert_int_equal(per[2], split_rejected ? 1 : 12);
    }
    ktops_rowsum_destroy(r);
    kt_context_destroy(ctx);
}

/* One implementation, or one configuration of it, as the op's only candidate. */
static void test_one_implementation(void **state) {
    (void)state;
    kt_context *ctx = NULL;
    ok(kt_context_create(&ctx));
    ktops_rowsum *r = make(ctx, "split-row", NULL);
    assert_int_equal(kt_op_candidate_count(ktops_rowsum_op(r)), 1);
    assert_string_equal(kt_op_candidate_name(ktops_rowsum_op(r), 0), "split-row");
    const kt_decision *d = plan(r, 100, 100);
    assert_int_equal(kt_decision_unit_count(d), 12);
    ktops_rowsum_destroy(r);
    /* the configuration's text as a decision writes it, parameters in any order */
    /* 10,000 rows of 8 per block need 1,250 blocks: more than 132 x 8 (the op plans from sizes
     * alone, on generated inputs: 100,000 x 1,000 floats took 10 s under TSan to fill) */
    r = make(ctx, "persistent", "TPR=32,BLOCK=256,UNROLL=4,BPS=8");
    d = plan(r, 10000, 100);
    assert_int_equal(kt_decision_unit_count(d), 1);
    assert_string_equal(kt_decision_unit_config(d, 0), "BLOCK=256,BPS=8,TPR=32,UNROLL=4");
    int64_t grid[3];
    ok(kt_decision_unit_geometry(d, 0, grid, NULL, NULL));
    assert_int_equal(grid[0], 132 * 8);
    ktops_rowsum_destroy(r);
    kt_context_destroy(ctx);
}

/* A configuration given by hand is checked against the group's space, naming what is wrong;
 * so are the group and the arguments. */
static void test_bad_options(void **state) {
    (void)state;
    kt_context *ctx = NULL;
    ok(kt_context_create(&ctx));
    static const struct {
        const char *group, *config, *message;
    } cases[] = {
        {"split", NULL, "no implementation 'split' (block-per-row, persistent or split-row)"},
        {NULL, "BLOCK=256,UNROLL=1", "config 'BLOCK=256,UNROLL=1' needs the group it belongs to"},
        {"block-per-row", "BLOCK=256", "config 'BLOCK=256' gives no value of UNROLL"},
        {"block-per-row", "BLOCK=256,UNROLL=2", "config 'BLOCK=256,UNROLL=2': block-per-row's UNROLL must be one of 1, 4, not '2'"},
        {"block-per-row", "BLOCK=256,UNROLL=1x", "block-per-row's UNROLL must be one of 1, 4, not '1x'"},
        {"block-per-row", "BLOCK=256,UNROLL=", "config 'BLOCK=256,UNROLL=': block-per-row's UNROLL must be one of 1, 4, not ''"},
        {"persistent", "BLOCK=256,BPS=4,TPR=3,UNROLL=1", "persistent's TPR must be one of 1, 2, 4, 8, 16, 32, 256, not '3'"},
        {"block-per-row", "BLOCK=256,BLOCK=512,UNROLL=1", "config 'BLOCK=256,BLOCK=512,UNROLL=1': BLOCK is given twice"},
        {"block-per-row", "BLOCK=256,WARPS=2", "config 'BLOCK=256,WARPS=2': block-per-row has no parameter 'WARPS'"},
        {"block-per-row", "BLOCK=256,UNROLL", "config 'BLOCK=256,UNROLL': expected NAME=VALUE at 'UNROLL'"},
        {"persistent", "BLOCK=256,BPS=4,TPR=4,UNROLL=4",
         "config 'BLOCK=256,BPS=4,TPR=4,UNROLL=4' breaks persistent's constraint (TPR <= 32 or TPR == BLOCK) and (UNROLL == 1 "
         "or TPR == 1 or TPR >= 32)"},
    };
    static char not_null;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ktops_rowsum *r = (ktops_rowsum *)(void *)&not_null; /* a failure sets it to NULL */
        ktops_rowsum_options opt = {cases[i].group, cases[i].config};
        assert_int_equal(ktops_rowsum_create_with(&fake_gpu, ctx, 0, "rowsum", &opt, &r), KT_ERR_INVALID_ARGUMENT);
        assert_null(r);
        if (strstr(ktops_last_error(), cases[i].message) == NULL)
            fail_msg("case %zu: '%s' does not say '%s'", i, ktops_last_error(), cases[i].message);
    }
    ktops_rowsum *r = make(ctx, NULL, NULL); /* the failures left no op behind: the name is free */
    assert_int_equal(ktops_rowsum_run(r, NULL, NULL, NULL, 0, 4), KT_ERR_INVALID_ARGUMENT);
    assert_string_equal(ktops_last_error(), "ktops_rowsum_run: rows 0 and cols 4 must both be at least 1");
    assert_int_equal(ktops_rowsum_run(r, NULL, NULL, NULL, (int64_t)1 << 31, 4), KT_ERR_INVALID_ARGUMENT);
    assert_string_equal(ktops_last_error(), "ktops_rowsum_run: rows 2147483648 is above 2147483647 (a grid's x dimension)");
    assert_int_equal(ktops_rowsum_run(r, NULL, (const float *)2, NULL, 4, 4), KT_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ktops_last_error(), "must be aligned to 4 bytes"));
    assert_int_equal(ktops_rowsum_run(NULL, NULL, NULL, NULL, 4, 4), KT_ERR_NULL);
    ktops_rowsum *none = NULL;
    assert_int_equal(ktops_rowsum_create_with(NULL, ctx, 0, "x", NULL, &none), KT_ERR_NULL);
    ktops_rowsum_destroy(r);
    ktops_rowsum_destroy(NULL);
    kt_context_destroy(ctx);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_configuration_planned),
        cmocka_unit_test(test_one_implementation),
        cmocka_unit_test(test_bad_options),
    };
    return kt_run_cases(argc, argv, tests, NULL, NULL);
}
