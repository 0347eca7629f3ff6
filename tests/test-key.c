/*
 * test-key.c - key components map arguments to buckets as documented in kerntune.h, and keys
 * that share a bucket share a decision.
 */
#include "helpers.h"

static int32_t buf[16];
static cand only = {.id = 1, .work = 0};

/* An op with signature (out: i32 buffer, n: i64) and one key component set by `setup`. */
static kt_op *keyed_op(kt_context *ctx, const char *name) {
    kt_op *op = NULL;
    ok(kt_op_create(ctx, name, &op));
    ok(kt_op_add_buffer(op, "out", KT_TYPE_I32, KT_WRITE_ONLY));
    ok(kt_op_add_scalar(op, "n", KT_TYPE_I64));
    ok(kt_op_add_native(op, "only", cand_fn, &only));
    return op;
}

/* Calls op with n and returns the decision's first key component. */
static int64_t key_of(kt_op *op, kt_arg *args) {
    ok(kt_op_call(op, args, kt_op_arg_count(op)));
    const kt_decision *d = NULL;
    ok(kt_op_decision(op, args, kt_op_arg_count(op), &d));
    assert_int_equal(kt_decision_key_len(d), 1);
    return kt_decision_key(d, 0);
}

static int64_t key_n(kt_op *op, int64_t n) {
    kt_arg args[] = {kt_arg_buf(buf, sizeof buf), kt_arg_i64(n)};
    return key_of(op, args);
}

static void test_pow2(void **state) {
    (void)state;
    static const int64_t cases[][2] = {{0, 0},       {1, 1},       {2, 2},       {3, 4},
                                       {5, 8},       {1000, 1024}, {1024, 1024}, {1025, 2048},
                                       {-5, -5},     {(1ll << 40) + 1, 1ll << 41}};
    kt_context *ctx = test_context(1);
    kt_op *op = keyed_op(ctx, "pow2");
    ok(kt_op_key_arg(op, 1, KT_BUCKET_POW2));
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) assert_int_equal(key_n(op, cases[i][0]), cases[i][1]);
    uint64_t tunes = kt_op_tune_count(op);
    assert_int_equal(tunes, 9); /* 1000 and 1024 share bucket 1024 */
    assert_int_equal(key_n(op, 600), 1024);
    assert_int_equal(key_n(op, 513), 1024);
    assert_int_equal(kt_op_tune_count(op), tunes);
    assert_int_equal(key_n(op, 512), 512);
    assert_int_equal(kt_op_tune_count(op), tunes + 1);
    kt_context_destroy(ctx);
}

static void test_exact(void **state) {
    (void)state;
    kt_context *ctx = test_context(1);
    kt_op *op = keyed_op(ctx, "exact");
    ok(kt_op_key_arg(op, 1, KT_BUCKET_EXACT));
    assert_int_equal(key_n(op, 1000), 1000);
    assert_int_equal(key_n(op, 1001), 1001);
    assert_int_equal(key_n(op, -3), -3);
    assert_int_equal(kt_op_tune_count(op), 3);
    kt_context_destroy(ctx);
}

static int64_t hundreds(int64_t v, void *user) {
    (void)user;
    return v / 100;
}

static void test_user_bucket(void **state) {
    (void)state;
    kt_context *ctx = test_context(1);
    kt_op *op = keyed_op(ctx, "user");
    ok(kt_op_key_arg_fn(op, 1, hundreds, NULL));
    assert_int_equal(key_n(op, 250), 2);
    assert_int_equal(key_n(op, 299), 2);
    assert_int_equal(key_n(op, 300), 3);
    assert_int_equal(kt_op_tune_count(op), 2);
    kt_context_destroy(ctx);
}

/* Alignment: the largest power of two dividing the address, capped; buffer size as a key. */
static void test_align_and_size(void **state) {
    (void)state;
    static _Alignas(256) char mem[1024];
    kt_context *ctx = test_context(1);
    kt_op *op = NULL;
    ok(kt_op_create(ctx, "align", &op));
    ok(kt_op_add_buffer(op, "out", KT_TYPE_U8, KT_WRITE_ONLY));
    ok(kt_op_key_align(op, 0, 64));
    ok(kt_op_add_native(op, "only", cand_fn, &only));
    static const struct { size_t off; int64_t align; } cases[] = {{0, 64}, {4, 4}, {1, 1}, {32, 32}, {128, 64}, {48, 16}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kt_arg a = kt_arg_buf(mem + cases[i].off, 64);
        assert_int_equal(key_of(op, &a), cases[i].align);
    }
    kt_arg null_buf = kt_arg_buf(NULL, 0);
    assert_int_equal(key_of(op, &null_buf), 64);

    kt_op *sz = NULL;
    ok(kt_op_create(ctx, "size", &sz));
    ok(kt_op_add_buffer(sz, "out", KT_TYPE_F64, KT_WRITE_ONLY));
    ok(kt_op_key_arg(sz, 0, KT_BUCKET_POW2));
    ok(kt_op_add_native(sz, "only", cand_fn, &only));
    kt_arg a = kt_arg_buf(mem, 24 * 8);
    assert_int_equal(key_of(sz, &a), 256);
    kt_context_destroy(ctx);
}

static int64_t rows_times_cols(const kt_arg *args, size_t nargs, void *user) {
    (void)nargs, (void)user;
    return args[1].i * (int64_t)args[2].u;
}

/* A derived key from several arguments; float keys are exact; unsigned values as themselves. */
static void test_derived_float_unsigned(void **state) {
    (void)state;
    kt_context *ctx = test_context(1);
    kt_op *op = NULL;
    ok(kt_op_create(ctx, "derived", &op));
    ok(kt_op_add_buffer(op, "out", KT_TYPE_I32, KT_WRITE_ONLY));
    ok(kt_op_add_scalar(op, "rows", KT_TYPE_I32));
    ok(kt_op_add_scalar(op, "cols", KT_TYPE_U32));
    ok(kt_op_add_scalar(op, "alpha", KT_TYPE_F32));
    ok(kt_op_key_fn(op, rows_times_cols, NULL));
    ok(kt_op_key_arg(op, 2, KT_BUCKET_EXACT));
    ok(kt_op_key_arg(op, 3, KT_BUCKET_EXACT));
    ok(kt_op_add_native(op, "only", cand_fn, &only));
    kt_arg args[] = {kt_arg_buf(buf, sizeof buf), kt_arg_i32(6), kt_arg_u32(4000000000u), kt_arg_f32(1.5f)};
    ok(kt_op_call(op, args, 4));
    const kt_decision *d = NULL;
    ok(kt_op_decision(op, args, 4, &d));
    assert_int_equal(kt_decision_key_len(d), 3);
    assert_int_equal(kt_decision_key(d, 0), 24000000000ll);
    assert_int_equal(kt_decision_key(d, 1), 4000000000ll);
    float f = 1.5f;
    uint32_t bits;
    memcpy(&bits, &f, 4);
    assert_int_equal(kt_decision_key(d, 2), bits);
    args[3] = kt_arg_f32(2.5f);
    ok(kt_op_call(op, args, 4));
    assert_int_equal(kt_op_tune_count(op), 2);
    args[3] = kt_arg_f32(1.5f);
    ok(kt_op_call(op, args, 4));
    assert_int_equal(kt_op_tune_count(op), 2);
    kt_context_destroy(ctx);
}

/* Many keys force the table to grow; every decision stays reachable. */
static void test_table_growth(void **state) {
    (void)state;
    kt_context *ctx = test_context(1);
    kt_op *op = keyed_op(ctx, "grow");
    ok(kt_op_key_arg(op, 1, KT_BUCKET_EXACT));
    for (int64_t n = 0; n < 1000; n++) assert_int_equal(key_n(op, n * 7919), n * 7919);
    assert_int_equal(kt_op_tune_count(op), 1000);
    for (int64_t n = 0; n < 1000; n++) assert_int_equal(key_n(op, n * 7919), n * 7919);
    assert_int_equal(kt_op_tune_count(op), 1000);
    assert_int_equal(kt_op_decision_count(op), 1000);
    kt_context_destroy(ctx);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pow2),          cmocka_unit_test(test_exact),
        cmocka_unit_test(test_user_bucket),   cmocka_unit_test(test_align_and_size),
        cmocka_unit_test(test_derived_float_unsigned), cmocka_unit_test(test_table_growth),
    };
    return kt_run_cases(argc, argv, tests, NULL, NULL);
}
