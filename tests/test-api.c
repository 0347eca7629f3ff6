/*
 * test-api.c - the small pieces of the public API's shape: user-data pointers on the context and
 * the op, and the names of every enum that has them (one list per enum generates the enum and
 * its name function, so their values and names are pinned here).
 */
#include "helpers.h"

#include <kerntune/decision.h>
#include <kerntune/inputs.h>
#include <kerntune/measure.h>

static int32_t buf[4];
static cand c1 = {.id = 1}, c2 = {.id = 2};

/* Set, get, clear; NULL handles fail (set) or read as NULL (get). */
/* kt_op_call_async on host candidates is kt_op_call: the winner has run when it returns (a
 * host candidate has no queue to wait on), the same decision serves both, and misuse fails. */
static void test_call_async_on_host(void **state) {
    (void)state;
    kt_context *ctx = test_context(2);
    kt_op *op = test_op(ctx, "async-host");
    static cand slow = {.id = 1, .work = 10, .sleep_ms = 20}, fast = {.id = 2, .work = 1};
    ok(kt_op_add_native(op, "slow", cand_fn, &slow));
    ok(kt_op_add_native(op, "fast", cand_fn, &fast));
    int32_t out[4] = {0};
    kt_arg args[] = {kt_arg_buf(out, sizeof out), kt_arg_i64(4)};
    ok(kt_op_call_async(op, NULL, args, 2)); /* a miss: tuned, then the winner ran */
    assert_int_equal(out[0], 2);
    out[0] = 0;
    ok(kt_op_call_async(op, NULL, args, 2)); /* a hit */
    assert_int_equal(out[0], 2);
    assert_int_equal(kt_op_tune_count(op), 1);
    expect_status(KT_ERR_NULL, kt_op_call_async(NULL, NULL, args, 2));
    assert_string_equal(kt_last_error(), "kt_op_call_async: op is NULL");
    expect_status(KT_ERR_ARG_COUNT, kt_op_call_async(op, NULL, args, 1));
    assert_string_equal(kt_last_error(), "kt_op_call_async(op 'async-host'): 1 argument(s) passed, the op declares 2");
    kt_context_destroy(ctx);
}

static int never_queued(const kt_arg *args, size_t nargs, kt_queue queue, void *user) {
    (void)args, (void)nargs, (void)queue, (void)user;
    fail_msg("a native device candidate ran on the host device");
    return 1;
}

/* A native device candidate needs a device with queues: on the host device the op's first call
 * says so, naming the candidate and what to do, and nothing runs. */
static void test_native_queued_needs_queues(void **state) {
    (void)state;
    kt_context *ctx = test_context(2);
    kt_op *op = test_op(ctx, "queued-host");
    static cand one = {.id = 1, .work = 1};
    ok(kt_op_add_native(op, "plain", cand_fn, &one));
    ok(kt_op_add_native_queued(op, "enqueues", never_queued, NULL));
    expect_status(KT_ERR_DUPLICATE, kt_op_add_native_queued(op, "plain", never_queued, NULL));
    expect_status(KT_ERR_NULL, kt_op_add_native_queued(op, "x", NULL, NULL));
    assert_string_equal(kt_last_error(), "kt_op_add_native_queued(op 'queued-host'): fn is NULL");
    int32_t out[4] = {0};
    kt_arg args[] = {kt_arg_buf(out, sizeof out), kt_arg_i64(4)};
    expect_status(KT_ERR_STATE, kt_op_call(op, args, 2));
    assert_non_null(strstr(kt_last_error(), "kt_op_call(op 'queued-host'): candidate 'enqueues' enqueues on a device queue"));
    assert_non_null(strstr(kt_last_error(), "backend 'c'"));
    assert_non_null(strstr(kt_last_error(), "kt_op_set_device"));
    assert_int_equal(out[0], 0);
    kt_context_destroy(ctx);
}

static void test_context_user(void **state) {
    (void)state;
    kt_context *ctx;
    ok(kt_context_create(&ctx));
    assert_null(kt_context_user(ctx));
    int mine = 7;
    ok(kt_context_set_user(ctx, &mine));
    assert_ptr_equal(kt_context_user(ctx), &mine);
    ok(kt_context_set_user(ctx, NULL));
    assert_null(kt_context_user(ctx));
    expect_status(KT_ERR_NULL, kt_context_set_user(NULL, &mine));
    assert_string_equal(kt_last_error(), "kt_context_set_user: ctx is NULL");
    assert_null(kt_context_user(NULL));
    kt_context_destroy(ctx);
}

static void test_op_user(void **state) {
    (void)state;
    kt_context *ctx;
    kt_op *op, *other;
    ok(kt_context_create(&ctx));
    ok(kt_op_create(ctx, "user", &op));
    ok(kt_op_create(ctx, "other", &other));
    assert_null(kt_op_user(op));
    int a = 1, b = 2;
    ok(kt_op_set_user(op, &a));
    ok(kt_context_set_user(ctx, &b));
    assert_ptr_equal(kt_op_user(op), &a); /* each handle keeps its own */
    assert_null(kt_op_user(other));
    assert_ptr_equal(kt_context_user(ctx), &b);
    expect_status(KT_ERR_NULL, kt_op_set_user(NULL, &a));
    assert_string_equal(kt_last_error(), "kt_op_set_user: op is NULL");
    assert_null(kt_op_user(NULL));

    /* the op tunes and is frozen: the pointer may still change, since it is not part of the
     * op's declaration (building calls fail by now) */
    ok(kt_op_add_buffer(op, "x", KT_TYPE_I32, KT_READ_WRITE));
    ok(kt_op_add_native(op, "one", cand_fn, &c1));
    ok(kt_op_add_native(op, "two", cand_fn, &c2));
    kt_arg arg = kt_arg_buf(buf, sizeof buf);
    ok(kt_op_call(op, &arg, 1));
    expect_status(KT_ERR_STATE, kt_op_add_native(op, "three", cand_fn, &c1));
    assert_ptr_equal(kt_op_user(op), &a);
    ok(kt_op_set_user(op, &b));
    assert_ptr_equal(kt_op_user(op), &b);
    ok(kt_op_set_user(op, NULL));
    assert_null(kt_op_user(op));
    kt_context_destroy(ctx);
}

/* kerntune never dereferences, copies from or frees the pointers: ones that point nowhere (an
 * ASan build would report any access) ride through a tuning, a hit and destruction. */
static void test_user_never_touched(void **state) {
    (void)state;
    kt_context *ctx;
    kt_op *op;
    void *nowhere = (void *)(uintptr_t)0x10, *elsewhere = (void *)(uintptr_t)0x20;
    ok(kt_context_create(&ctx));
    ok(kt_context_set_user(ctx, nowhere));
    ok(kt_op_create(ctx, "untouched", &op));
    ok(kt_op_set_user(op, elsewhere));
    ok(kt_op_add_buffer(op, "x", KT_TYPE_I32, KT_READ_WRITE));
    ok(kt_op_add_native(op, "one", cand_fn, &c1));
    ok(kt_op_add_native(op, "two", cand_fn, &c2));
    kt_arg arg = kt_arg_buf(buf, sizeof buf);
    ok(kt_op_call(op, &arg, 1)); /* tunes */
    ok(kt_op_call(op, &arg, 1)); /* dispatches */
    assert_int_equal(kt_op_tune_count(op), 1);
    assert_ptr_equal(kt_context_user(ctx), nowhere);
    assert_ptr_equal(kt_op_user(op), elsewhere);
    kt_op_destroy(op);
    kt_context_destroy(ctx);
}

/* Every value of every named enum: its value (part of the ABI) and its name (part of formats:
 * wisdom documents write outcomes by name, KERNTUNE_MODE and KERNTUNE_LOG take these names, the
 * CLI prints policies by name). Unknown values have no name. */
static void test_enum_names(void **state) {
    (void)state;
    static const char *const effort_names[] = {"inherit", "tune", "cache-only", "off", "forced"};
    const kt_effort efforts[] = {KT_EFFORT_INHERIT, KT_EFFORT_MEASURE, KT_EFFORT_CACHE_ONLY, KT_EFFORT_OFF,
                                 KT_EFFORT_FORCED};
    for (int i = 0; i < 5; i++) {
        assert_int_equal(efforts[i], i);
        assert_string_equal(kt_effort_name(efforts[i]), effort_names[i]);
    }
    assert_null(kt_effort_name((kt_effort)5));
    assert_null(kt_effort_name((kt_effort)-1));

    static const char *const log_names[] = {"none", "error", "warn", "info", "debug"};
    const kt_log_level levels[] = {KT_LOG_NONE, KT_LOG_ERROR, KT_LOG_WARN, KT_LOG_INFO, KT_LOG_DEBUG};
    for (int i = 0; i < 5; i++) {
        assert_int_equal(levels[i], i);
        assert_string_equal(kt_log_level_name(levels[i]), log_names[i]);
    }
    assert_null(kt_log_level_name((kt_log_level)5));

    static const char *const policy_names[] = {"race", "triton", "kerneltuner", "fixed"};
    const kt_policy policies[] = {KT_POLICY_RACE, KT_POLICY_TRITON, KT_POLICY_KERNELTUNER, KT_POLICY_FIXED};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(policies[i], i);
        assert_string_equal(kt_policy_name(policies[i]), policy_names[i]);
        kt_policy back = (kt_policy)-1;
        ok(kt_policy_parse(policy_names[i], &back));
        assert_int_equal(back, policies[i]);
    }
    assert_null(kt_policy_name((kt_policy)4));
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_policy_parse("fast", &(kt_policy){0}));
    assert_string_equal(kt_last_error(), "kt_policy_parse: 'fast' is not a policy (race, triton, kerneltuner, fixed)");

    static const char *const onoff[] = {"auto", "off", "on"};
    const kt_flush flushes[] = {KT_FLUSH_AUTO, KT_FLUSH_OFF, KT_FLUSH_ON};
    const kt_isolation isolations[] = {KT_ISOLATE_AUTO, KT_ISOLATE_OFF, KT_ISOLATE_ON};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(flushes[i], i);
        assert_int_equal(isolations[i], i);
        assert_string_equal(kt_flush_name(flushes[i]), onoff[i]);
        assert_string_equal(kt_isolation_name(isolations[i]), onoff[i]);
    }
    assert_null(kt_flush_name((kt_flush)3));
    assert_null(kt_isolation_name((kt_isolation)3));

    static const char *const input_names[] = {"protect", "clone", "generated"};
    const kt_inputs inputs[] = {KT_INPUTS_PROTECT, KT_INPUTS_CLONE, KT_INPUTS_GENERATED};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(inputs[i], i);
        assert_string_equal(kt_inputs_name(inputs[i]), input_names[i]);
    }
    assert_null(kt_inputs_name((kt_inputs)3));

    static const char *const outcome_names[] = {"not_run", "measured", "rejected", "failed",
                                                "invalid", "build_failed", "timeout", "crashed"};
    const kt_outcome outcomes[] = {KT_OUTCOME_NOT_RUN, KT_OUTCOME_MEASURED, KT_OUTCOME_REJECTED, KT_OUTCOME_FAILED,
                                   KT_OUTCOME_INVALID, KT_OUTCOME_BUILD_FAILED, KT_OUTCOME_TIMEOUT, KT_OUTCOME_CRASHED};
    for (int i = 0; i < 8; i++) {
        assert_int_equal(outcomes[i], i);
        assert_string_equal(kt_outcome_name(outcomes[i]), outcome_names[i]);
    }
    assert_null(kt_outcome_name((kt_outcome)8));

    static const struct {
        kt_type type;
        int value;
        const char *name;
        size_t size;
    } types[] = {{KT_TYPE_I8, 1, "i8", 1},     {KT_TYPE_I16, 2, "i16", 2},   {KT_TYPE_I32, 3, "i32", 4},
                 {KT_TYPE_I64, 4, "i64", 8},   {KT_TYPE_U8, 5, "u8", 1},     {KT_TYPE_U16, 6, "u16", 2},
                 {KT_TYPE_U32, 7, "u32", 4},   {KT_TYPE_U64, 8, "u64", 8},   {KT_TYPE_F32, 9, "f32", 4},
                 {KT_TYPE_F64, 10, "f64", 8},  {KT_TYPE_F16, 11, "f16", 2},  {KT_TYPE_BF16, 12, "bf16", 2},
                 {KT_TYPE_BUFFER, 64, "buffer", 0}};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        assert_int_equal(types[i].type, types[i].value);
        assert_string_equal(kt_type_name(types[i].type), types[i].name);
        assert_int_equal(kt_type_size(types[i].type), types[i].size);
    }
    assert_string_equal(kt_type_name((kt_type)13), "?");
    assert_int_equal(kt_type_size((kt_type)13), 0);
}

/* Each list generates its enum and its name function: expanding a list here visits exactly the
 * values the name function knows, under the names it returns. */
static void test_lists_agree(void **state) {
    (void)state;
    size_t n = 0;
#define CHECK(fn, type, e, value, name)             \
    do {                                            \
        assert_non_null(fn((type)(value)));         \
        assert_string_equal(fn((type)(value)), name); \
        assert_int_equal((int)(e), value);          \
        n++;                                        \
    } while (0);
#define EFFORT(e, value, name) CHECK(kt_effort_name, kt_effort, e, value, name)
#define LOG(e, value, name) CHECK(kt_log_level_name, kt_log_level, e, value, name)
#define POLICY(e, value, name) CHECK(kt_policy_name, kt_policy, e, value, name)
#define FLUSH(e, value, name) CHECK(kt_flush_name, kt_flush, e, value, name)
#define ISOLATION(e, value, name) CHECK(kt_isolation_name, kt_isolation, e, value, name)
#define INPUTS(e, value, name) CHECK(kt_inputs_name, kt_inputs, e, value, name)
#define OUTCOME(e, value, name) CHECK(kt_outcome_name, kt_outcome, e, value, name)
#define TYPE(e, value, name, size) \
    CHECK(kt_type_name, kt_type, e, value, name) assert_int_equal(kt_type_size(e), size);
    KT_EFFORT_LIST(EFFORT)
    KT_LOG_LEVEL_LIST(LOG)
    KT_POLICY_LIST(POLICY)
    KT_FLUSH_LIST(FLUSH)
    KT_ISOLATION_LIST(ISOLATION)
    KT_INPUTS_LIST(INPUTS)
    KT_OUTCOME_LIST(OUTCOME)
    KT_TYPE_LIST(TYPE)
    assert_int_equal(n, 5 + 5 + 4 + 3 + 3 + 3 + 8 + 14);
}

/* Settings refuse the values their lists do not have, with the messages they always had. */
static void test_settings_refuse_unlisted(void **state) {
    (void)state;
    kt_context *ctx;
    kt_op *op;
    ok(kt_context_create(&ctx));
    ok(kt_op_create(ctx, "refuse", &op));
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_context_set_flush(ctx, (kt_flush)3));
    assert_string_equal(kt_last_error(), "kt_context_set_flush: 3 is not a kt_flush");
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_context_set_log_level(ctx, (kt_log_level)5));
    assert_string_equal(kt_last_error(), "kt_context_set_log_level: level 5 is not 0..4");
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_context_set_policy(ctx, (kt_policy)4));
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_op_set_isolation(op, (kt_isolation)3));
    assert_string_equal(kt_last_error(), "kt_op_set_isolation(op 'refuse'): 3 is not a kt_isolation");
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_op_set_inputs(op, (kt_inputs)3));
    assert_string_equal(kt_last_error(), "kt_op_set_inputs(op 'refuse'): inputs 3 is not PROTECT, CLONE or GENERATED");
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_op_set_effort(op, (kt_effort)5));
    assert_string_equal(kt_last_error(), "kt_op_set_effort(op 'refuse'): effort 5 is not a level (0..4)");
    for (int v = 0; v < 3; v++) {
        ok(kt_context_set_flush(ctx, (kt_flush)v));
        ok(kt_op_set_isolation(op, (kt_isolation)v));
        ok(kt_op_set_inputs(op, (kt_inputs)v));
    }
    kt_context_destroy(ctx);
}

/* A device's compiler identity and peaks: the host's compiler is named, its peaks not known (0,
 * not an error); a device that does not exist and NULL outputs are refused. */
static void test_device_compiler_and_peaks(void **state) {
    (void)state;
    kt_context *ctx = test_context(1);
    char cc[1024];
    ok(kt_device_compiler(ctx, 0, cc, sizeof cc));
    assert_true(strlen(cc) > 0);
    double f = -1, b = -1;
    ok(kt_device_peaks(ctx, 0, &f, &b));
    assert_true(f == 0 && b == 0);
    assert_int_equal(kt_device_peaks(ctx, 999, &f, &b), KT_ERR_INVALID_ARGUMENT);
    assert_int_equal(kt_device_peaks(ctx, 0, NULL, &b), KT_ERR_NULL);
    assert_int_equal(kt_device_compiler(ctx, 999, cc, sizeof cc), KT_ERR_INVALID_ARGUMENT);
    assert_string_equal(cc, "");
    kt_context_destroy(ctx);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device_compiler_and_peaks),
        cmocka_unit_test(test_call_async_on_host),
        cmocka_unit_test(test_native_queued_needs_queues),
        cmocka_unit_test(test_context_user),   cmocka_unit_test(test_op_user),
        cmocka_unit_test(test_user_never_touched), cmocka_unit_test(test_enum_names),
        cmocka_unit_test(test_lists_agree),    cmocka_unit_test(test_settings_refuse_unlisted),
    };
    return kt_run_cases(argc, argv, tests, NULL, NULL);
}
