/*
 * test-select.c - which candidate runs: measurement picks the fast one, requirements are never
 * violated, forcing and the effort levels are honoured, failing candidates are disqualified.
 */
#include "helpers.h"

#include <kerntune/decision.h>
#include <kerntune/measure.h>
#include <kerntune/validation.h>

#include <unistd.h>

static int32_t buf[64];

#define CALL(op, n) kt_op_call((op), (kt_arg[]){kt_arg_buf(buf, sizeof buf), kt_arg_i64(n)}, 2)

static const kt_decision *decision(kt_op *op, int64_t n) {
    const kt_decision *d = NULL;
    ok(kt_op_decision(op, (kt_arg[]){kt_arg_buf(buf, sizeof buf), kt_arg_i64(n)}, 2, &d));
    return d;
}

/* A candidate 10x slower by design never wins, whichever order the candidates come in; the
 * final launch on the caller's data is the winner's; a hit runs only the winner. */
static void test_slow_never_wins(void **state) {
    (void)state;
    for (int order = 0; order < 2; order++) {
        kt_context *ctx = test_context(5);
        kt_op *op = test_op(ctx, "select");
        cand slow = {.id = 1, .work = 10, .sleep_ms = 20}, fast = {.id = 2, .work = 1};
        cand *first = order ? &fast : &slow, *second = order ? &slow : &fast;
        ok(kt_op_add_native(op, first == &slow ? "slow" : "fast", cand_fn, first));
        ok(kt_op_add_native(op, second == &slow ? "slow" : "fast", cand_fn, second));
        for (int64_t n = 1; n <= 3; n++) {
            buf[0] = 0;
            ok(CALL(op, n));
            assert_int_equal(buf[0], fast.id); /* the final launch was the winner's */
            const kt_decision *d = decision(op, n);
            assert_string_equal(kt_op_candidate_name(op, kt_decision_winner(d)), "fast");
            assert_int_equal(kt_decision_source_of(d), KT_SOURCE_MEASURED);
            for (size_t c = 0; c < 2; c++) {
                assert_int_equal(kt_decision_outcome(d, c), KT_OUTCOME_MEASURED);
                assert_int_equal(kt_decision_runs(d, c), 5);
                assert_true(kt_decision_time_ns(d, c) > 0);
            }
        }
        assert_int_equal(kt_op_tune_count(op), 3);
        assert_int_equal(kt_op_measured_runs(op), 3 * 2 * 5);
        /* 3 tunings: 6 calls each (1 warm-up + 5 runs) plus the final launch for fast. */
        assert_int_equal(calls(&slow), 3 * 6);
        assert_int_equal(calls(&fast), 3 * 7);
        ok(CALL(op, 2));
        assert_int_equal(calls(&slow), 3 * 6);
        assert_int_equal(calls(&fast), 3 * 7 + 1);
        assert_int_equal(kt_op_tune_count(op), 3);
        assert_int_equal(kt_op_decision_count(op), 3);
        kt_context_destroy(ctx);
    }
}

static int reject_big(const kt_arg *args, size_t nargs, void *user) {
    (void)nargs, (void)user;
    return args[1].i <= 100;
}

/* The fastest candidate requires n % 4 == 0: on other sizes it is never launched, not even
 * while measuring, and the decision says it was rejected. */
static void test_requirement_multiple(void **state) {
    (void)state;
    kt_context *ctx = test_context(3);
    kt_op *op = test_op(ctx, "req");
    cand quick = {.id = 1, .work = 1}, medium = {.id = 2, .work = 4, .sleep_ms = 10}, slow = {.id = 3, .work = 12, .sleep_ms = 40};
    ok(kt_op_add_native(op, "slow", cand_fn, &slow));
    ok(kt_op_add_native(op, "quick", cand_fn, &quick));
    ok(kt_op_add_native(op, "medium", cand_fn, &medium));
    ok(kt_op_require_multiple(op, "quick", 1, 4));
    ok(CALL(op, 6));
    assert_int_equal(calls(&quick), 0);
    const kt_decision *d = decision(op, 6);
    assert_string_equal(kt_op_candidate_name(op, kt_decision_winner(d)), "medium");
    assert_int_equal(kt_decision_outcome(d, 1), KT_OUTCOME_REJECTED);
    assert_true(kt_decision_time_ns(d, 1) < 0);
    ok(CALL(op, 8));
    assert_int_equal(buf[0], quick.id);
    assert_string_equal(kt_op_candidate_name(op, kt_decision_winner(decision(op, 8))), "quick");
    kt_context_destroy(ctx);
}

/* With no key at all, every call shares one key: a call the recorded winner rejects must not
 * reuse that decision. The validity mask in the key makes it a different key. */
static void test_requirement_without_key(void **state) {
    (void)state;
    kt_context *ctx = test_context(3);
    kt_op *op = NULL;
    ok(kt_op_create(ctx, "nokey", &op));
    ok(kt_op_set_validation(op, 0));
    ok(kt_op_add_buffer(op, "out", KT_TYPE_I32, KT_WRITE_ONLY));
    ok(kt_op_add_scalar(op, "n", KT_TYPE_I64));
    cand quick = {.id = 1, .work = 1}, slow = {.id = 2, .work = 10, .sleep_ms = 20};
    ok(kt_op_add_native(op, "quick", cand_fn, &quick));
    ok(kt_op_add_native(op, "slow", cand_fn, &slow));
    ok(kt_op_require_multiple(op, "quick", 1, 4));
    ok(CALL(op, 8));
    assert_int_equal(buf[0], quick.id);
    int quick_calls = calls(&quick);
    ok(CALL(op, 7));
    assert_int_equal(calls(&quick), quick_calls); /* never launched on n = 7 */
    assert_int_equal(buf[0], slow.id);
    assert_int_equal(kt_op_tune_count(op), 2);
    ok(CALL(op, 12)); /* same key as n = 8: a hit */
    assert_int_equal(calls(&quick), quick_calls + 1);
    assert_int_equal(kt_op_tune_count(op), 2);
    kt_context_destroy(ctx);
}

/* Alignment requirements and predicate functions are checked the same way. */
static void test_requirement_align_and_fn(void **state) {
    (void)state;
    static _Alignas(64) int32_t aligned[32];
    kt_context *ctx = test_context(3);
    kt_op *op = test_op(ctx, "align");
    cand quick = {.id = 1, .work = 1}, pred = {.id = 2, .work = 1}, slow = {.id = 3, .work = 10, .sleep_ms = 20};
    ok(kt_op_add_native(op, "quick", cand_fn, &quick));
    ok(kt_op_add_native(op, "pred", cand_fn, &pred));
    ok(kt_op_add_native(op, "slow", cand_fn, &slow));
    ok(kt_op_require_align(op, "quick", 0, 64));
    ok(kt_op_require_fn(op, "pred", reject_big, NULL));
    kt_arg misaligned[] = {kt_arg_buf(aligned + 1, sizeof aligned - 4), kt_arg_i64(1000)};
    ok(kt_op_call(op, misaligned, 2));
    assert_int_equal(calls(&quick), 0);
    assert_int_equal(calls(&pred), 0);
    assert_int_equal(aligned[1], slow.id);
    kt_arg good[] = {kt_arg_buf(aligned, sizeof aligned), kt_arg_i64(1000)};
    ok(kt_op_call(op, good, 2));
    assert_true(calls(&quick) > 0);
    assert_int_equal(calls(&pred), 0);
    kt_context_destroy(ctx);
}

/* No candidate accepts: a clear status, and nothing runs. */
static void test_no_valid_candidate(void **state) {
    (void)state;
    kt_context *ctx = test_context(3);
    kt_op *op = test_op(ctx, "none");
    cand a = {.id = 1, .work = 1}, b = {.id = 2, .work = 1};
    ok(kt_op_add_native(op, "a", cand_fn, &a));
    ok(kt_op_add_native(op, "b", cand_fn, &b));
    ok(kt_op_require_multiple(op, "a", 1, 2));
    ok(kt_op_require_multiple(op, "b", 1, 3));
    expect_status(KT_ERR_NO_VALID_CANDIDATE, CALL(op, 7));
    assert_non_null(strstr(kt_last_error(), "'none'"));
    assert_int_equal(calls(&a) + calls(&b), 0);
    ok(CALL(op, 6));
    kt_context_destroy(ctx);
}

/* KERNTUNE_FORCE runs the named candidate without measuring anything. */
static void test_force_env(void **state) {
    (void)state;
    setenv("KERNTUNE_FORCE", "other=x,forced=slow", 1);
    kt_context *ctx = test_context(3);
    unsetenv("KERNTUNE_FORCE");
    kt_op *op = test_op(ctx, "forced");
    cand slow = {.id = 1, .work = 10, .sleep_ms = 20}, fast = {.id = 2, .work = 1};
    ok(kt_op_add_native(op, "fast", cand_fn, &fast));
    ok(kt_op_add_native(op, "slow", cand_fn, &slow));
    for (int i = 0; i < 3; i++) ok(CALL(op, 5));
    assert_int_equal(calls(&slow), 3);
    assert_int_equal(calls(&fast), 0);
    assert_int_equal(kt_op_tune_count(op), 0);
    assert_int_equal(kt_op_measured_runs(op), 0);
    assert_int_equal(kt_decision_source_of(decision(op, 5)), KT_SOURCE_FORCED);
    kt_context_destroy(ctx);
}

/* kt_op_force does the same; a forced candidate that rejects the arguments is not launched:
 * the default is used instead. */
static void test_force_api_and_rejection(void **state) {
    (void)state;
    kt_context *ctx = test_context(3);
    kt_op *op = test_op(ctx, "forceapi");
    cand slow = {.id = 1, .work = 10, .sleep_ms = 20}, fast = {.id = 2, .work = 1}, dflt = {.id = 3, .work = 5, .sleep_ms = 10};
    ok(kt_op_add_native(op, "fast", cand_fn, &fast));
    ok(kt_op_add_native(op, "slow", cand_fn, &slow));
    ok(kt_op_add_native(op, "dflt", cand_fn, &dflt));
    ok(kt_op_require_multiple(op, "slow", 1, 2));
    ok(kt_op_set_default(op, "dflt"));
    ok(kt_op_force(op, "slow"));
    ok(CALL(op, 4));
    assert_int_equal(buf[0], slow.id);
    ok(CALL(op, 5));
    assert_int_equal(buf[0], dflt.id);
    assert_int_equal(calls(&slow), 1);
    assert_int_equal(kt_decision_source_of(decision(op, 5)), KT_SOURCE_DEFAULT);
    assert_int_equal(calls(&fast), 0);
    assert_int_equal(kt_op_tune_count(op), 0);
    kt_context_destroy(ctx);
}

/* Cache-only, by API or by KERNTUNE_MODE, uses the declared default and measures nothing;
 * without a declared default the first candidate that accepts. */
static void test_cache_only(void **state) {
    (void)state;
    for (int via_env = 0; via_env < 2; via_env++) {
        if (via_env) setenv("KERNTUNE_MODE", "cache-only", 1);
        kt_context *ctx = test_context(3);
        unsetenv("KERNTUNE_MODE");
        if (!via_env) ok(kt_context_set_effort(ctx, KT_EFFORT_CACHE_ONLY));
        assert_int_equal(kt_context_effort(ctx), KT_EFFORT_CACHE_ONLY);
        kt_op *op = test_op(ctx, "cacheonly");
        cand fast = {.id = 1, .work = 1}, slow = {.id = 2, .work = 10, .sleep_ms = 20};
        ok(kt_op_add_native(op, "fast", cand_fn, &fast));
        ok(kt_op_add_native(op, "slow", cand_fn, &slow));
        ok(kt_op_set_default(op, "slow"));
        ok(CALL(op, 3));
        ok(CALL(op, 3));
        assert_int_equal(calls(&slow), 2);
        assert_int_equal(calls(&fast), 0);
        assert_int_equal(kt_op_measured_runs(op), 0);
        assert_int_equal(kt_op_tune_count(op), 0);
        assert_int_equal(kt_decision_source_of(decision(op, 3)), KT_SOURCE_DEFAULT);

        kt_op *op2 = test_op(ctx, "nodefault");
        cand a = {.id = 3, .work = 10, .sleep_ms = 20}, b = {.id = 4, .work = 1};
        ok(kt_op_add_native(op2, "a", cand_fn, &a));
        ok(kt_op_add_native(op2, "b", cand_fn, &b));
        ok(kt_op_require_multiple(op2, "a", 1, 2));
        ok(CALL(op2, 3)); /* a rejects 3: b, the first that accepts */
        ok(CALL(op2, 4));
        assert_int_equal(calls(&a), 1);
        assert_int_equal(calls(&b), 1);
        kt_context_destroy(ctx);
    }
}

/* KERNTUNE_MODE=off wins over an op's own level; =tune wins over an op set to off. */
static void test_mode_env_precedence(void **state) {
    (void)state;
    const char *modes[] = {"off", "tune"};
    for (int m = 0; m < 2; m++) {
        setenv("KERNTUNE_MODE", modes[m], 1);
        kt_context *ctx = test_context(3);
        unsetenv("KERNTUNE_MODE");
        kt_op *op = test_op(ctx, "prec");
        cand slow = {.id = 1, .work = 10, .sleep_ms = 20}, fast = {.id = 2, .work = 1};
        ok(kt_op_add_native(op, "slow", cand_fn, &slow));
        ok(kt_op_add_native(op, "fast", cand_fn, &fast));
        ok(kt_op_set_effort(op, m == 0 ? KT_EFFORT_MEASURE : KT_EFFORT_OFF));
        ok(CALL(op, 9));
        assert_int_equal(buf[0], m == 0 ? slow.id : fast.id);
        assert_int_equal(kt_op_tune_count(op), m == 0 ? 0 : 1);
        kt_context_destroy(ctx);
    }
}

/* A candidate that fails while measured is disqualified; the others still decide. When all
 * fail the call says so, and later calls for the key report it without measuring again. */
static void test_failing_candidates(void **state) {
    (void)state;
    kt_context *ctx = test_context(3);
    kt_op *op = test_op(ctx, "failing");
    cand broken = {.id = 1, .work = 0, .fail = 7}, slow = {.id = 2, .work = 10, .sleep_ms = 20};
    ok(kt_op_add_native(op, "broken", cand_fn, &broken));
    ok(kt_op_add_native(op, "slow", cand_fn, &slow));
    ok(kt_op_require_multiple(op, "slow", 1, 2));
    ok(CALL(op, 4));
    assert_int_equal(buf[0], slow.id);
    const kt_decision *d = decision(op, 4);
    assert_int_equal(kt_decision_outcome(d, 0), KT_OUTCOME_FAILED);
    assert_int_equal(kt_decision_fail_code(d, 0), 7);
    assert_string_equal(kt_op_candidate_name(op, kt_decision_winner(d)), "slow");

    expect_status(KT_ERR_ALL_FAILED, CALL(op, 5)); /* only broken accepts 5 */
    assert_non_null(strstr(kt_last_error(), "'broken' returned 7"));
    uint64_t tunes = kt_op_tune_count(op);
    expect_status(KT_ERR_ALL_FAILED, CALL(op, 5));
    assert_int_equal(kt_op_tune_count(op), tunes);
    /* the failed decision is there to say why: broken's outcome and message */
    d = NULL;
    expect_status(KT_ERR_ALL_FAILED, kt_op_decision(op, (kt_arg[]){kt_arg_buf(buf, sizeof buf), kt_arg_i64(5)}, 2, &d));
    assert_non_null(d);
    assert_int_equal(kt_decision_outcome(d, 0), KT_OUTCOME_FAILED);
    assert_int_equal(kt_decision_fail_code(d, 0), 7);
    assert_int_equal(kt_decision_outcome(d, 1), KT_OUTCOME_REJECTED);
    /* a key never called has no decision at all */
    expect_status(KT_ERR_NOT_FOUND, kt_op_decision(op, (kt_arg[]){kt_arg_buf(buf, sizeof buf), kt_arg_i64(9)}, 2, &d));
    kt_context_destroy(ctx);
}

/* A winner that fails on a later, dispatched call reports KT_ERR_CANDIDATE_FAILED. */
static void test_dispatch_failure(void **state) {
    (void)state;
    kt_context *ctx = test_context(3);
    kt_op *op = test_op(ctx, "laterfail");
    cand flaky = {.id = 1, .work = 1, .fail = 9, .fail_after = 5}, slow = {.id = 2, .work = 10, .sleep_ms = 20};
    ok(kt_op_add_native(op, "flaky", cand_fn, &flaky));
    ok(kt_op_add_native(op, "slow", cand_fn, &slow));
    ok(CALL(op, 1)); /* 1 warm-up + 3 runs + final launch = 5 successful calls */
    expect_status(KT_ERR_CANDIDATE_FAILED, CALL(op, 1));
    assert_non_null(strstr(kt_last_error(), "candidate 'flaky' returned 9"));
    kt_context_destroy(ctx);
}

typedef struct loglines {
    char text[4096];
    int count;
} loglines;

static void capture(kt_log_level level, const char *msg, void *user) {
    (void)level;
    loglines *l = user;
    strncat(l->text, msg, sizeof l->text - strlen(l->text) - 2);
    strcat(l->text, "\n");
    l->count++;
}

/* Logging reaches a log function when switched on; with it off, nothing is written to stderr
 * even when calls fail. */
static void test_logging(void **state) {
    (void)state;
    fflush(stderr);
    FILE *tmp = tmpfile();
    assert_non_null(tmp);
    int saved = dup(2);
    dup2(fileno(tmp), 2);

    kt_context *ctx = test_context(3);
    kt_op *op = test_op(ctx, "logged");
    cand slow = {.id = 1, .work = 10, .sleep_ms = 20}, fast = {.id = 2, .work = 1};
    ok(kt_op_add_native(op, "slow", cand_fn, &slow));
    ok(kt_op_add_native(op, "fast", cand_fn, &fast));
    ok(CALL(op, 1));
    expect_status(KT_ERR_ARG_COUNT, kt_op_call(op, NULL, 0));
    fflush(stderr);
    assert_int_equal(ftell(tmp), 0); /* silent by default */

    loglines lines = {"", 0};
    ok(kt_context_set_log_fn(ctx, capture, &lines));
    ok(kt_context_set_log_level(ctx, KT_LOG_INFO));
    ok(CALL(op, 2));
    assert_non_null(strstr(lines.text, "winner 'fast'"));
    ok(kt_context_set_log_level(ctx, KT_LOG_NONE));
    int count = lines.count;
    ok(CALL(op, 3));
    assert_int_equal(lines.count, count);
    kt_context_destroy(ctx);

    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    fclose(tmp);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slow_never_wins),
        cmocka_unit_test(test_requirement_multiple),
        cmocka_unit_test(test_requirement_without_key),
        cmocka_unit_test(test_requirement_align_and_fn),
        cmocka_unit_test(test_no_valid_candidate),
        cmocka_unit_test(test_force_env),
        cmocka_unit_test(test_force_api_and_rejection),
        cmocka_unit_test(test_cache_only),
        cmocka_unit_test(test_mode_env_precedence),
        cmocka_unit_test(test_failing_candidates),
        cmocka_unit_test(test_dispatch_failure),
        cmocka_unit_test(test_logging),
    };
    return kt_run_cases(argc, argv, tests, NULL, NULL);
}
