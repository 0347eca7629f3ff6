/*
 * test-threads.c - concurrent first calls: one tuning per key, waiters get the decision, the
 * fallback option runs instead of waiting, and a hit never waits for another key's tuning.
 */
#include "helpers.h"

#include <kerntune/measure.h>

#include <pthread.h>
#include <sched.h>

#define NTHREADS 32
#define RUNS 5

typedef struct shared {
    kt_op *op;
    pthread_barrier_t barrier;
    int64_t nkeys;
    kt_status status[NTHREADS];
    int32_t out[NTHREADS][4];
} shared;

typedef struct worker {
    shared *sh;
    int index;
} worker;

static void *first_call(void *arg) {
    worker *w = arg;
    shared *sh = w->sh;
    pthread_barrier_wait(&sh->barrier);
    kt_arg args[] = {kt_arg_buf(sh->out[w->index], sizeof sh->out[w->index]), kt_arg_i64(w->index % sh->nkeys)};
    sh->status[w->index] = kt_op_call(sh->op, args, 2);
    return NULL;
}

static void run_threads(shared *sh) {
    pthread_t th[NTHREADS];
    worker w[NTHREADS];
    pthread_barrier_init(&sh->barrier, NULL, NTHREADS);
    for (int i = 0; i < NTHREADS; i++) {
        w[i] = (worker){sh, i};
        assert_int_equal(pthread_create(&th[i], NULL, first_call, &w[i]), 0);
    }
    for (int i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&sh->barrier);
}

/* 32 threads make the first call for one key at once: exactly one tuning, counted by the
 * candidates' calls; every thread gets the winner's result. */
static void test_one_key_tunes_once(void **state) {
    (void)state;
    kt_context *ctx = test_context(RUNS);
    static shared sh;
    memset(&sh, 0, sizeof sh);
    sh.op = test_op(ctx, "threads");
    sh.nkeys = 1;
    cand slow = {.id = 1, .work = 10, .sleep_ms = 20}, fast = {.id = 2, .work = 1}, mid = {.id = 3, .work = 4, .sleep_ms = 10};
    ok(kt_op_add_native(sh.op, "slow", cand_fn, &slow));
    ok(kt_op_add_native(sh.op, "fast", cand_fn, &fast));
    ok(kt_op_add_native(sh.op, "mid", cand_fn, &mid));
    run_threads(&sh);
    for (int i = 0; i < NTHREADS; i++) {
        assert_int_equal(sh.status[i], KT_OK);
        assert_int_equal(sh.out[i][0], fast.id);
    }
    assert_int_equal(kt_op_tune_count(sh.op), 1);
    assert_int_equal(kt_op_measured_runs(sh.op), 3 * RUNS);
    /* One tuning: each candidate 1 warm-up + RUNS runs; then one launch per thread. */
    assert_int_equal(calls(&slow), 1 + RUNS);
    assert_int_equal(calls(&mid), 1 + RUNS);
    assert_int_equal(calls(&fast), 1 + RUNS + NTHREADS);
    assert_int_equal(kt_op_decision_count(sh.op), 1);
    kt_context_destroy(ctx);
}

/* Different keys tune independently: 4 keys over 32 threads, 4 tunings. */
static void test_keys_tune_independently(void **state) {
    (void)state;
    kt_context *ctx = test_context(RUNS);
    static shared sh;
    memset(&sh, 0, sizeof sh);
    sh.op = test_op(ctx, "keys");
    sh.nkeys = 4;
    cand slow = {.id = 1, .work = 10, .sleep_ms = 20}, fast = {.id = 2, .work = 1};
    ok(kt_op_add_native(sh.op, "slow", cand_fn, &slow));
    ok(kt_op_add_native(sh.op, "fast", cand_fn, &fast));
    run_threads(&sh);
    for (int i = 0; i < NTHREADS; i++) assert_int_equal(sh.status[i], KT_OK);
    assert_int_equal(kt_op_tune_count(sh.op), 4);
    assert_int_equal(calls(&slow), 4 * (1 + RUNS));
    assert_int_equal(calls(&fast), 4 * (1 + RUNS) + NTHREADS);
    assert_int_equal(kt_op_decision_count(sh.op), 4);
    kt_context_destroy(ctx);
}

/* A candidate that blocks, while it is being measured, until the test opens its gate. */
typedef struct gate {
    atomic_int entered;
    atomic_int open;
    atomic_int calls;
} gate;

static int gated_fn(const kt_arg *args, size_t nargs, void *user) {
    (void)nargs;
    gate *g = user;
    atomic_fetch_add(&g->calls, 1);
    atomic_store(&g->entered, 1);
    while (!atomic_load(&g->open)) sched_yield();
    ((int32_t *)args[0].ptr)[0] = 100;
    return 0;
}

typedef struct tuner_arg {
    kt_op *op;
    int64_t n;
    int32_t out[4];
    kt_status status;
} tuner_arg;

static void *tune_thread(void *p) {
    tuner_arg *t = p;
    kt_arg args[] = {kt_arg_buf(t->out, sizeof t->out), kt_arg_i64(t->n)};
    t->status = kt_op_call(t->op, args, 2);
    return NULL;
}

static void wait_entered(gate *g) {
    while (!atomic_load(&g->entered)) sched_yield();
}

/* While key 7 is being tuned (its gated candidate blocked mid-measurement): calls for key 7
 * run the fallback instead of waiting, and a call for an already tuned key is dispatched
 * without waiting for the tuning. */
static void test_fallback_and_hits_during_tuning(void **state) {
    (void)state;
    kt_context *ctx = test_context(RUNS);
    kt_op *op = test_op(ctx, "fallback");
    gate g = {0};
    cand fb = {.id = 5, .work = 0}, slow = {.id = 6, .work = 10, .sleep_ms = 20};
    ok(kt_op_add_native(op, "gated", gated_fn, &g));
    ok(kt_op_add_native(op, "slow", cand_fn, &slow));
    ok(kt_op_add_native(op, "fb", cand_fn, &fb));
    ok(kt_op_require_multiple(op, "gated", 1, 7)); /* so key 1 never runs the gate */
    ok(kt_op_set_fallback(op, "fb"));

    int32_t out[4] = {0};
    ok(kt_op_call(op, (kt_arg[]){kt_arg_buf(out, sizeof out), kt_arg_i64(1)}, 2));
    assert_int_equal(atomic_load(&g.calls), 0);

    tuner_arg t = {.op = op, .n = 7};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, tune_thread, &t), 0);
    wait_entered(&g);
    int fb_before = calls(&fb);
    for (int i = 0; i < 10; i++) {
        out[0] = 0;
        ok(kt_op_call(op, (kt_arg[]){kt_arg_buf(out, sizeof out), kt_arg_i64(7)}, 2));
        assert_int_equal(out[0], fb.id);
    }
    assert_int_equal(calls(&fb), fb_before + 10);
    /* Key 1 is tuned: a hit while key 7 is mid-tuning. */
    int gated_before = atomic_load(&g.calls);
    int slow_before = calls(&slow);
    int fb_before2 = calls(&fb);
    ok(kt_op_call(op, (kt_arg[]){kt_arg_buf(out, sizeof out), kt_arg_i64(1)}, 2));
    assert_int_equal(atomic_load(&g.calls) + calls(&slow) + calls(&fb), gated_before + slow_before + fb_before2 + 1);
    assert_int_equal(kt_op_tune_count(op), 1); /* key 7 is still being tuned */
    atomic_store(&g.open, 1);
    pthread_join(th, NULL);
    assert_int_equal(t.status, KT_OK);
    assert_int_equal(kt_op_tune_count(op), 2);
    kt_context_destroy(ctx);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_key_tunes_once),
        cmocka_unit_test(test_keys_tune_independently),
        cmocka_unit_test(test_fallback_and_hits_during_tuning),
    };
    return kt_run_cases(argc, argv, tests, NULL, NULL);
}
