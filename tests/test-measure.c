/*
 * test-measure.c - the measurement engine: the race picks the fastest and spends least on the
 * clearest losers; budgets of runs and of time are respected; the reference policies make
 * exactly the runs their tools make; the decision says how sure it is.
 */
#include "helpers.h"

#include <kerntune/decision.h>
#include <kerntune/measure.h>
#include <kerntune/validation.h>

#include <math.h>
#include <stdbool.h>
#include <time.h>

static int32_t buf[64];

#define ARGS(n) ((kt_arg[]){kt_arg_buf(buf, sizeof buf), kt_arg_i64(n)})

static const kt_decision *decision(kt_op *op, int64_t n) {
    const kt_decision *d = NULL;
    ok(kt_op_decision(op, ARGS(n), 2, &d));
    return d;
}

static kt_context *race_context(void) {
    kt_context *ctx = NULL;
    ok(kt_context_create(&ctx));
    assert_int_equal(kt_context_policy(ctx), KT_POLICY_RACE); /* the default */
    return ctx;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Candidates 2x and 10x slower than the best by design: in every order, the race picks the
 * best, and the 10x loser gets fewer measured runs than the 2x one: after screening a 10x gap
 * is beyond the prior's doubt, a 2x gap is not. Warm-ups are left out of that comparison: how
 * many a candidate gets is the settling rule's answer to this machine's noise (a first run more
 * than 10% slower than the next counts as one), not the race's; with them counted, a CI run
 * under load saw the 10x loser spend 11 and 12 runs against 10 and 12. The runs are summed
 * over the nine tunings (three orders of three keys): on a loaded machine a preempted screening
 * run can make the 2x loser look beyond doubt too (6 measured runs against 6 over one order's
 * three keys was seen), but not in all nine. */
static void test_race_picks_fastest_and_drops_clear_losers_first(void **state) {
    (void)state;
    static const int orders[3][3] = {{0, 1, 2}, {2, 1, 0}, {1, 2, 0}};
    unsigned raced_all[3] = {0, 0, 0};
    for (int o = 0; o < 3; o++) {
        kt_context *ctx = race_context();
        kt_op *op = test_op(ctx, "race");
        /* runs of milliseconds: a preempted run (a few ms on a loaded 2-core machine) cannot
         * make the best look 3x slower than the 2x loser */
        cand cs[3] = {{.id = 1, .work = 1000}, {.id = 2, .work = 2000}, {.id = 3, .work = 10000}};
        static const char *const names[3] = {"best", "twice", "tenfold"};
        size_t idx[3];
        for (int k = 0; k < 3; k++) {
            int c = orders[o][k];
            idx[c] = (size_t)k;
            ok(kt_op_add_native(op, names[c], cand_fn, &cs[c]));
        }
        for (int64_t n = 1; n <= 3; n++) {
            ok(kt_op_call(op, ARGS(n), 2));
            assert_int_equal(buf[0], 1); /* the final launch was the best's */
            const kt_decision *d = decision(op, n);
            assert_int_equal(kt_decision_winner(d), idx[0]);
            assert_int_equal(kt_decision_policy(d), KT_POLICY_RACE);
            unsigned spent[3];
            uint64_t total = 0;
            for (int c = 0; c < 3; c++) {
                size_t u = idx[c]; /* natives: unit u is candidate u */
                assert_int_equal(kt_decision_unit_outcome(d, u), KT_OUTCOME_MEASURED);
                spent[c] = kt_decision_unit_runs(d, u) + kt_decision_unit_warmups(d, u);
                total += spent[c];
                assert_true(kt_decision_unit_ci_low_ns(d, u) <= kt_decision_unit_time_ns(d, u));
                assert_true(kt_decision_unit_ci_high_ns(d, u) >= kt_decision_unit_time_ns(d, u));
            }
            for (int c = 0; c < 3; c++) raced_all[c] += kt_decision_unit_runs(d, idx[c]);
            assert_int_equal(kt_decision_total_runs(d), total); /* no validation: every run is counted here */
            assert_true(kt_decision_confidence(d) > 0.5); /* how sure depends on this machine's noise */
            assert_true(kt_decision_confidence(d) <= 1.0);
            assert_true(kt_decision_measure_ns(d) > 0);
        }
        int sum = calls(&cs[0]) + calls(&cs[1]) + calls(&cs[2]);
        uint64_t runs = 0;
        for (int64_t n = 1; n <= 3; n++) runs += kt_decision_total_runs(decision(op, n));
        assert_int_equal((uint64_t)sum, runs + 3); /* plus the three final launches */
        kt_context_destroy(ctx);
    }
    if (!(raced_all[2] < raced_all[1]))
        fail_msg("the 10x loser had %u measured runs, the 2x loser %u (nine tunings)", raced_all[2], raced_all[1]);
}

/* Equal candidates cannot be separated: the race ends when they are within the tolerance of
 * each other with confidence, or at the cap, never later. */
static void test_race_stops_on_equal_candidates(void **state) {
    (void)state;
    kt_context *ctx = race_context();
    ok(kt_context_set_race(ctx, 0.99, 0.01, 12));
    kt_op *op = test_op(ctx, "equal");
    cand a = {.id = 1, .work = 20}, b = {.id = 2, .work = 20};
    ok(kt_op_add_native(op, "a", cand_fn, &a));
    ok(kt_op_add_native(op, "b", cand_fn, &b));
    ok(kt_op_call(op, ARGS(1), 2));
    const kt_decision *d = decision(op, 1);
    for (size_t u = 0; u < 2; u++) {
        assert_true(kt_decision_unit_runs(d, u) <= 12);
        assert_true(kt_decision_unit_runs(d, u) >= 1);
    }
    kt_context_destroy(ctx);
}

/* A native whose k-th run sleeps us[k] microseconds, writing its id: after its n entries it
 * repeats them (repeat) or holds the last. A run's place in the race decides its time. */
typedef struct scheduled {
    int32_t id;
    long us[6];
    size_t n;
    bool repeat;
    atomic_int calls;
} scheduled;

static int scheduled_fn(const kt_arg *args, size_t nargs, void *user) {
    scheduled *p = user;
    size_t k = (size_t)atomic_fetch_add(&p->calls, 1);
    struct timespec ts = {0, p->us[p->repeat ? k % p->n : k < p->n ? k : p->n - 1] * 1000};
    while (nanosleep(&ts, &ts) != 0) {}
    if (nargs > 0 && args[0].type == KT_TYPE_BUFFER) memcpy(args[0].ptr, &p->id, sizeof p->id);
    return 0;
}

/* Three runs with two alike have no median deviation: a spread from it alone made runs of 1, 2
 * and 1 ms look like a sure win over 1.35, 1.7 and 1.35 ms (confidence 1 at 0.999999 asked).
 * Until seven runs the range counts too, and the race ends below the confidence it asked for. */
static void test_few_runs_spread_by_their_range(void **state) {
    (void)state;
    kt_context *ctx = race_context();
    ok(kt_context_set_race(ctx, 0.999999, 0, 3));
    kt_op *op = test_op(ctx, "patterned");
    /* any three runs in a row hold two alike and one apart */
    scheduled a = {.id = 1, .us = {1000, 2000, 1000}, .n = 3, .repeat = true}, b = {.id = 2, .us = {1350, 1700, 1350}, .n = 3, .repeat = true};
    ok(kt_op_add_native(op, "a", scheduled_fn, &a));
    ok(kt_op_add_native(op, "b", scheduled_fn, &b));
    ok(kt_op_call(op, ARGS(1), 2));
    const kt_decision *d = decision(op, 1);
    for (size_t u = 0; u < 2; u++) assert_int_equal(kt_decision_unit_runs(d, u), 3);
    double c = kt_decision_confidence(d);
    if (!(c < 0.999999)) fail_msg("confidence %.9f from three runs each: the spread of two alike and one apart was taken as none", c);
    assert_true(kt_decision_below_confidence(d));
    kt_context_destroy(ctx);
}

/* An arm dropped at screening that the figures of the end no longer beat races again. The
 * winner's warm-up and two screening runs take 1 ms, its third (the pilot's) 40 ms, as a
 * preempted run on a loaded machine does; the loser takes 40 ms a run. Screening drops the loser
 * (40x, beyond the prior's doubt); the winner's third run then widens its spread (the range of
 * three runs), and through the pooled prior the loser's, so far that the decision would end
 * at confidence 0.73 of the 0.99 asked for, and the next process would race it again. Instead
 * the loser runs again, its own three runs say it is steady, and it is dropped once more: the
 * decision is settled. */
static void test_dropped_arm_races_again_when_the_end_doubts(void **state) {
    (void)state;
    kt_context *ctx = race_context();
    ok(kt_context_set_race(ctx, 0.99, 0.01, 20));
    kt_op *op = test_op(ctx, "doubted");
    scheduled fast = {.id = 1, .us = {1000, 1000, 1000, 40000, 1000}, .n = 5}, slow = {.id = 2, .us = {40000}, .n = 1};
    ok(kt_op_add_native(op, "fast", scheduled_fn, &fast));
    ok(kt_op_add_native(op, "slow", scheduled_fn, &slow));
    ok(kt_op_call(op, ARGS(1), 2));
    const kt_decision *d = decision(op, 1);
    assert_int_equal(kt_decision_winner(d), 0);
    assert_int_equal(buf[0], 1);
    if (kt_decision_unit_runs(d, 1) < 3) fail_msg("the loser ran %u times: not raced again", kt_decision_unit_runs(d, 1));
    if (kt_decision_below_confidence(d) || kt_decision_confidence(d) < 0.99)
        fail_msg("decided at confidence %.4f, below the 0.99 asked for", kt_decision_confidence(d));
    kt_context_destroy(ctx);
}

/* A lone candidate is screened (a warm-up, two runs) and decided: no pilot's third run, which
 * would judge nothing. */
static void test_lone_candidate_no_pilot(void **state) {
    (void)state;
    kt_context *ctx = race_context();
    kt_op *op = test_op(ctx, "lone");
    scheduled only = {.id = 7, .us = {2000}, .n = 1};
    ok(kt_op_add_native(op, "only", scheduled_fn, &only));
    ok(kt_op_call(op, ARGS(1), 2));
    const kt_decision *d = decision(op, 1);
    assert_int_equal(kt_decision_winner(d), 0);
    assert_int_equal(buf[0], 7);
    assert_int_equal(kt_decision_unit_runs(d, 0), 2);
    kt_context_destroy(ctx);
}

/* A run budget caps every run of the tuning, and the key is still decided. */
static void test_run_budget(void **state) {
    (void)state;
    kt_context *ctx = race_context();
    kt_op *op = test_op(ctx, "runs");
    ok(kt_op_set_run_budget(op, 30));
    cand cs[6];
    for (int i = 0; i < 6; i++) {
        cs[i] = (cand){.id = i + 1, .work = 10};
        char name[16];
        snprintf(name, sizeof name, "c%d", i);
        ok(kt_op_add_native(op, name, cand_fn, &cs[i]));
    }
    ok(kt_op_call(op, ARGS(1), 2));
    const kt_decision *d = decision(op, 1);
    int sum = 0;
    for (int i = 0; i < 6; i++) sum += calls(&cs[i]);
    assert_int_equal((uint64_t)sum, kt_decision_total_runs(d) + 1); /* plus the final launch */
    assert_true(kt_decision_total_runs(d) <= 30);
    assert_int_equal(buf[0], (int32_t)kt_decision_winner(d) + 1);
    /* a budget of one run still decides: the first candidate gets its warm-up and one run */
    kt_op *op1 = test_op(ctx, "one");
    ok(kt_op_set_run_budget(op1, 1));
    ok(kt_op_add_native(op1, "c0", cand_fn, &cs[0]));
    ok(kt_op_add_native(op1, "c1", cand_fn, &cs[1]));
    ok(kt_op_call(op1, ARGS(1), 2));
    d = decision(op1, 1);
    assert_int_equal(kt_decision_winner(d), 0);
    assert_int_equal(kt_decision_unit_runs(d, 0), 1);
    assert_int_equal(kt_decision_unit_outcome(d, 1), KT_OUTCOME_NOT_RUN);
    kt_context_destroy(ctx);
}

/* Adds six equal candidates c0..c5 to op, each calling fn with its cand (ids 1..6, work). */
static void add_six(kt_op *op, cand cs[6], unsigned work, kt_native_fn fn) {
    for (int i = 0; i < 6; i++) {
        cs[i] = (cand){.id = i + 1, .work = work};
        char name[16];
        snprintf(name, sizeof name, "c%d", i);
        ok(kt_op_add_native(op, name, fn, &cs[i]));
    }
}

/* A time budget stops the tuning: equal candidates that would race to their cap (6 x 100
 * runs) stop soon after the budget, with most of the cap unspent. */
static void test_time_budget(void **state) {
    (void)state;
    kt_context *ctx = race_context();
    kt_op *op = test_op(ctx, "time");
    ok(kt_op_set_budget(op, 0, 0.05));
    cand cs[6];
    add_six(op, cs, 300, cand_fn);
    double t0 = now_s();
    ok(kt_op_call(op, ARGS(1), 2));
    double took = now_s() - t0;
    const kt_decision *d = decision(op, 1);
    /* without the budget: 600 runs of ~2 ms; the engine checks the budget before every run */
    assert_true(kt_decision_total_runs(d) < 300);
    if (took > 0.5) fail_msg("took %.3f s for a 0.05 s budget", took);
    kt_context_destroy(ctx);
}

/* A budget clock of the program's own (kt_context_set_budget_clock): here every candidate call
 * advances it a second, so a budget of 10 s stops the tuning after about ten calls though the
 * wall clock barely moved; the same op on the wall clock measures all six. */
static _Atomic long ticks;
static double tick_clock(void *user) {
    (void)user;
    return (double)atomic_load(&ticks);
}
static int ticking(const kt_arg *args, size_t nargs, void *user) {
    atomic_fetch_add(&ticks, 1);
    return cand_fn(args, nargs, user);
}

static void test_budget_clock(void **state) {
    (void)state;
    expect_status(KT_ERR_NULL, kt_context_set_budget_clock(NULL, tick_clock, NULL));
    for (int own = 1; own >= 0; own--) {
        kt_context *ctx = race_context();
        if (own) ok(kt_context_set_budget_clock(ctx, tick_clock, NULL));
        kt_op *op = test_op(ctx, "ticks");
        ok(kt_op_set_budget(op, 0, 10));
        cand cs[6];
        add_six(op, cs, 1, ticking);
        atomic_store(&ticks, 0);
        ok(kt_op_call(op, ARGS(1), 2));
        const kt_decision *d = decision(op, 1);
        size_t not_run = 0;
        for (size_t u = 0; u < 6; u++) not_run += kt_decision_unit_outcome(d, u) == KT_OUTCOME_NOT_RUN;
        if (own) {
            /* the engine checks before every run: at most one run past the 10 s, and the final launch */
            if (atomic_load(&ticks) > 12) fail_msg("%ld calls on a 10 s budget clock", (long)atomic_load(&ticks));
            assert_true(not_run >= 2); /* a screening takes a warm-up and two runs at least */
        } else {
            assert_int_equal(not_run, 0);
        }
        kt_context_destroy(ctx);
    }
    kt_context *ctx = test_context(1);
    ok(kt_context_set_budget_clock(ctx, NULL, NULL)); /* back to the wall clock */
    kt_context_destroy(ctx);
}

/* Kernel Tuner's policy: one warm-up and seven runs each, their mean; the fixed policy: what
 * kt_context_set_measure says. */
static void test_reference_policy_counts(void **state) {
    (void)state;
    kt_context *ctx = race_context();
    ok(kt_context_set_policy(ctx, KT_POLICY_KERNELTUNER));
    kt_op *op = test_op(ctx, "kt");
    cand a = {.id = 1, .work = 1}, b = {.id = 2, .work = 10, .sleep_ms = 20}; /* b loses by construction */
    ok(kt_op_add_native(op, "a", cand_fn, &a));
    ok(kt_op_add_native(op, "b", cand_fn, &b));
    ok(kt_op_call(op, ARGS(1), 2));
    const kt_decision *d = decision(op, 1);
    assert_int_equal(kt_decision_policy(d), KT_POLICY_KERNELTUNER);
    assert_int_equal(kt_decision_winner(d), 0);
    for (size_t u = 0; u < 2; u++) {
        assert_int_equal(kt_decision_unit_runs(d, u), 7);
        assert_int_equal(kt_decision_unit_warmups(d, u), 1);
        const double *t = NULL;
        size_t n = 0;
        ok(kt_decision_unit_runtimes(d, u, &t, &n));
        double sum = 0;
        for (size_t i = 0; i < n; i++) sum += t[i];
        assert_true(fabs(kt_decision_unit_time_ns(d, u) - sum / 7) <= 1e-6 * sum);
    }
    assert_int_equal(calls(&a), 8 + 1);
    assert_int_equal(calls(&b), 8);

    ok(kt_context_set_measure(ctx, 2, 4, 4, 0));
    assert_int_equal(kt_context_policy(ctx), KT_POLICY_FIXED);
    kt_op *op2 = test_op(ctx, "fixed");
    cand c = {.id = 1, .work = 1};
    ok(kt_op_add_native(op2, "c", cand_fn, &c));
    ok(kt_op_call(op2, ARGS(1), 2));
    d = decision(op2, 1);
    assert_int_equal(kt_decision_unit_runs(d, 0), 4);
    assert_int_equal(kt_decision_unit_warmups(d, 0), 2);
    assert_int_equal(kt_decision_total_runs(d), 6);
    kt_context_destroy(ctx);
}

/* Triton's do_bench arithmetic on a candidate of known cost: warm-ups fill 25 ms and
 * repetitions 100 ms of the estimate from five runs. */
static void test_triton_policy_counts(void **state) {
    (void)state;
    kt_context *ctx = race_context();
    ok(kt_context_set_policy(ctx, KT_POLICY_TRITON));
    kt_op *op = test_op(ctx, "triton");
    cand a = {.id = 1, .work = 1};
    ok(kt_op_add_native(op, "a", cand_fn, &a));
    ok(kt_op_call(op, ARGS(1), 2));
    const kt_decision *d = decision(op, 1);
    unsigned runs = kt_decision_unit_runs(d, 0), warmups = kt_decision_unit_warmups(d, 0);
    /* a tiny candidate: 100 ms of repetitions is many runs, at least 6 warm-ups (1 + 5 + n) */
    assert_true(runs >= 100);
    assert_true(warmups >= 7);
    assert_true(warmups < runs);
    assert_int_equal(kt_decision_total_runs(d), (uint64_t)runs + warmups);
    kt_context_destroy(ctx);
}

static void test_policy_names(void **state) {
    (void)state;
    kt_policy p;
    const char *names[] = {"race", "triton", "kerneltuner", "fixed"};
    for (int i = 0; i < 4; i++) {
        ok(kt_policy_parse(names[i], &p));
        assert_int_equal(p, i);
        assert_string_equal(kt_policy_name(p), names[i]);
    }
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_policy_parse("fast", &p));
    assert_non_null(strstr(kt_last_error(), "'fast' is not a policy"));
    assert_null(kt_policy_name((kt_policy)9));
    kt_context *ctx = race_context();
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_context_set_race(ctx, 0.3, 0.01, 10));
    assert_non_null(strstr(kt_last_error(), "confidence (0.3)"));
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_context_set_race(ctx, 0.99, -1, 10));
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_context_set_race(ctx, 0.99, 0.01, 2));
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_context_set_policy(ctx, (kt_policy)7));
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_context_set_flush(ctx, (kt_flush)5));
    ok(kt_context_set_flush(ctx, KT_FLUSH_ON));
    expect_status(KT_ERR_NULL, kt_context_set_policy(NULL, KT_POLICY_RACE));
    kt_context_destroy(ctx);
}

/* Flushing the host's cache for native candidates changes no result and no count. */
static void test_flush_on_natives(void **state) {
    (void)state;
    kt_context *ctx = race_context();
    ok(kt_context_set_flush(ctx, KT_FLUSH_ON));
    kt_op *op = test_op(ctx, "flush");
    cand a = {.id = 1, .work = 100}, b = {.id = 2, .work = 1000, .sleep_ms = 20};
    ok(kt_op_add_native(op, "a", cand_fn, &a));
    ok(kt_op_add_native(op, "b", cand_fn, &b));
    ok(kt_op_call(op, ARGS(1), 2));
    const kt_decision *d = decision(op, 1);
    assert_int_equal(kt_decision_winner(d), 0);
    assert_int_equal(buf[0], 1);
    kt_context_destroy(ctx);
}

/* A reference that only validates: never measured, never the winner, even when fastest. */
static void test_reference_only(void **state) {
    (void)state;
    kt_context *ctx = race_context();
    kt_op *op = NULL;
    ok(kt_op_create(ctx, "refonly", &op));
    ok(kt_op_add_buffer(op, "out", KT_TYPE_I32, KT_WRITE_ONLY));
    ok(kt_op_add_scalar(op, "n", KT_TYPE_I64));
    ok(kt_op_key_arg(op, 1, KT_BUCKET_EXACT));
    cand ref = {.id = 7, .work = 1}, a = {.id = 7, .work = 100}, b = {.id = 7, .work = 1000, .sleep_ms = 20};
    ok(kt_op_add_native(op, "ref", cand_fn, &ref));
    ok(kt_op_add_native(op, "a", cand_fn, &a));
    ok(kt_op_add_native(op, "b", cand_fn, &b));
    ok(kt_op_set_reference(op, "ref"));
    ok(kt_op_set_reference_only(op, 1));
    ok(kt_op_call(op, ARGS(1), 2));
    const kt_decision *d = decision(op, 1);
    assert_string_equal(kt_op_candidate_name(op, kt_decision_winner(d)), "a");
    assert_int_equal(kt_decision_outcome(d, 0), KT_OUTCOME_NOT_RUN);
    assert_int_equal(calls(&ref), 1); /* its one reference run */
    assert_true(kt_decision_validated(d));
    kt_context_destroy(ctx);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_race_picks_fastest_and_drops_clear_losers_first),
        cmocka_unit_test(test_race_stops_on_equal_candidates),
        cmocka_unit_test(test_few_runs_spread_by_their_range),
        cmocka_unit_test(test_dropped_arm_races_again_when_the_end_doubts),
        cmocka_unit_test(test_lone_candidate_no_pilot),
        cmocka_unit_test(test_run_budget),
        cmocka_unit_test(test_time_budget),
        cmocka_unit_test(test_budget_clock),
        cmocka_unit_test(test_reference_policy_counts),
        cmocka_unit_test(test_triton_policy_counts),
        cmocka_unit_test(test_policy_names),
        cmocka_unit_test(test_flush_on_natives),
        cmocka_unit_test(test_reference_only),
    };
    return kt_run_cases(argc, argv, tests, NULL, NULL);
}
