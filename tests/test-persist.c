/*
 * test-persist.c - decisions through the persistent cache, with real files and processes: a
 * warm cache measures nothing; a changed candidate set measures only what is new; a recall runs
 * nothing and builds only a recorded winner; a recorded build failure is not built again; a
 * decision is stamped with the time it was made; 32 processes tuning at once lose and corrupt
 * nothing; the longest key and every field of a decision survive the round trip.
 * test-persist-reject.c has the records the cache does not serve as they are.
 */
#include "persist-test.h"

#include <kerntune/cache.h>
#include <kerntune/decision.h>
#include <kerntune/variants.h>

#include <jansson.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef KT_TUNE_WORKER
#error "KT_TUNE_WORKER must name the built tune-worker"
#endif

/* The second process (here: a second context) with a warm cache measures nothing and runs the
 * recorded winner; adding a candidate measures only the new one. */
static void test_warm_cache_and_new_candidates(void **state) {
    (void)state;
    remove_db();
    /* the losers sleep too: ten times the work alone is tens of microseconds, which one
     * preempted run on a loaded machine can outweigh (a CI run once picked slow) */
    cand fast = {.id = 1, .work = 1}, slow = {.id = 2, .work = 10, .sleep_ms = 20}, newer = {.id = 3, .work = 20, .sleep_ms = 20};
    kt_context *ctx = ctx_on(db);
    kt_op *op = fast_slow_op(ctx, "persisted", &fast, &slow);
    time_t before = time(NULL);
    ok(kt_op_call(op, ARGS(7), 2));
    time_t after = time(NULL);
    assert_int_equal(kt_decision_source_of(decision(op, 7)), KT_SOURCE_MEASURED);
    kt_context_destroy(ctx);
    size_t count = 0;
    kt_cache *c = NULL;
    ok(kt_cache_open(db, &c));
    ok(kt_cache_count(c, "persisted", NULL, &count));
    assert_int_equal(count, 1);
    /* stamped with the wall clock of its recording, which the export carries */
    char *text = NULL;
    ok(kt_cache_export(c, "persisted", NULL, &text));
    json_t *doc = json_loads(text, 0, NULL);
    kt_free(text);
    json_int_t created = json_integer_value(json_object_get(json_array_get(json_object_get(doc, "entries"), 0), "created"));
    if (created < (json_int_t)before || created > (json_int_t)after)
        fail_msg("created %lld, recorded between %lld and %lld", (long long)created, (long long)before, (long long)after);
    json_decref(doc);
    kt_cache_close(c);

    atomic_store(&fast.calls, 0), atomic_store(&slow.calls, 0);
    ctx = ctx_on(db);
    op = fast_slow_op(ctx, "persisted", &fast, &slow);
    buf[0] = 0;
    ok(kt_op_call(op, ARGS(7), 2));
    assert_int_equal(buf[0], 1);
    const kt_decision *d = decision(op, 7);
    assert_int_equal(kt_decision_source_of(d), KT_SOURCE_CACHE);
    assert_int_equal(kt_decision_winner(d), 0);
    assert_int_equal(calls(&fast), 1); /* the call itself */
    assert_int_equal(calls(&slow), 0);
    assert_int_equal(kt_op_measured_runs(op), 0);
    assert_int_equal(kt_context_cache_hits(ctx), 1);
    kt_context_destroy(ctx);

    /* a third candidate: the set changed, so the decision misses; the two known candidates keep
     * their recorded times and only the new one runs */
    atomic_store(&fast.calls, 0), atomic_store(&slow.calls, 0);
    ctx = ctx_on(db);
    op = fast_slow_op(ctx, "persisted", &fast, &slow);
    ok(kt_op_add_native(op, "newer", cand_fn, &newer));
    ok(kt_op_call(op, ARGS(7), 2));
    d = decision(op, 7);
    assert_int_equal(kt_decision_source_of(d), KT_SOURCE_MEASURED);
    assert_int_equal(kt_decision_winner(d), 0);
    assert_int_equal(buf[0], 1);
    assert_int_equal(calls(&slow), 0);
    assert_int_equal(calls(&fast), 1); /* the final launch only */
    assert_true(calls(&newer) >= 2);
    assert_int_equal(kt_decision_outcome(d, 1), KT_OUTCOME_MEASURED);
    assert_int_equal(kt_decision_runs(d, 1), 0); /* its time is the recorded one */
    kt_context_destroy(ctx);
}

/* kt_op_recall runs nothing: a key nothing records is KT_ERR_NOT_FOUND and stays undecided
 * (the next call tunes it, as if the recall had not been); in the next process the recorded key
 * is decided from the cache without a run, and its calls dispatch to the recorded winner. */
static void test_recall_runs_nothing(void **state) {
    (void)state;
    remove_db();
    cand fast = {.id = 1, .work = 1}, slow = {.id = 2, .work = 10, .sleep_ms = 20};
    kt_context *ctx = ctx_on(db);
    kt_op *op = fast_slow_op(ctx, "recalled", &fast, &slow);
    buf[0] = 0;
    assert_int_equal(kt_op_recall(op, ARGS(5), 2), KT_ERR_NOT_FOUND);
    assert_non_null(strstr(kt_last_error(), "kt_op_recall(op 'recalled'): no recorded decision"));
    assert_int_equal(kt_op_recall(op, ARGS(5), 2), KT_ERR_NOT_FOUND); /* again: still nothing ran */
    assert_int_equal(calls(&fast) + calls(&slow), 0);
    assert_int_equal(buf[0], 0);
    assert_int_equal(kt_op_tune_count(op), 0);
    const kt_decision *d = NULL;
    assert_int_equal(kt_op_decision(op, ARGS(5), 2, &d), KT_ERR_NOT_FOUND);
    assert_int_equal(kt_op_decision_count(op), 0);
    ok(kt_op_call(op, ARGS(5), 2)); /* tunes the key the recall left */
    assert_int_equal(kt_op_tune_count(op), 1);
    assert_int_equal(buf[0], 1);
    assert_int_equal(kt_decision_source_of(decision(op, 5)), KT_SOURCE_MEASURED);
    assert_true(calls(&slow) >= 1);
    ok(kt_op_recall(op, ARGS(5), 2)); /* decided: nothing more */
    kt_context_destroy(ctx);

    atomic_store(&fast.calls, 0), atomic_store(&slow.calls, 0);
    ctx = ctx_on(db);
    op = fast_slow_op(ctx, "recalled", &fast, &slow);
    buf[0] = 0;
    assert_int_equal(kt_op_recall(op, ARGS(6), 2), KT_ERR_NOT_FOUND); /* another key */
    ok(kt_op_recall(op, ARGS(5), 2));
    assert_int_equal(calls(&fast) + calls(&slow), 0);
    assert_int_equal(buf[0], 0);
    d = decision(op, 5);
    assert_int_equal(kt_decision_source_of(d), KT_SOURCE_CACHE);
    assert_int_equal(kt_decision_winner(d), 0);
    assert_int_equal(kt_context_cache_hits(ctx), 1);
    ok(kt_op_call(op, ARGS(5), 2));
    assert_int_equal(buf[0], 1);
    assert_int_equal(calls(&fast), 1); /* the call alone */
    assert_int_equal(calls(&slow), 0);
    assert_int_equal(kt_op_tune_count(op), 0);
    kt_context_destroy(ctx);

    /* an op that may not measure decides as it would on a call, without a run: CACHE_ONLY's
     * answer for a key nobody tuned is the nearest tuned key's winner */
    ctx = ctx_on(db);
    op = fast_slow_op(ctx, "recalled", &fast, &slow);
    ok(kt_op_set_default(op, "slow"));
    ok(kt_op_set_effort(op, KT_EFFORT_CACHE_ONLY));
    atomic_store(&fast.calls, 0), atomic_store(&slow.calls, 0);
    ok(kt_op_recall(op, ARGS(1 << 20), 2));
    assert_int_equal(calls(&fast) + calls(&slow), 0);
    d = decision(op, 1 << 20);
    assert_int_equal(kt_decision_source_of(d), KT_SOURCE_NEAREST);
    assert_int_equal(kt_decision_winner(d), 0);
    kt_context_destroy(ctx);
}

static const char *bad_c =
    "#if BAD\n"
    "#error this configuration does not compile\n"
    "#endif\n"
    "void fill(int *out, long n) { out[0] = (int)(n + K); }\n";

/* A configuration that failed to build is remembered: a later tuning of a changed set does not
 * build it again. */
static void test_recorded_failure_not_retried(void **state) {
    (void)state;
    remove_db();
    for (int round = 0; round < 2; round++) {
        kt_context *ctx = ctx_on(db);
        kt_op *op = test_op(ctx, "failing");
        kt_space *sp = NULL;
        ok(kt_space_create(&sp));
        ok(kt_space_add_param(sp, "K", "[1, 2]"));
        ok(kt_space_add_param(sp, "BAD", "[0, 1]"));
        ok(kt_op_add_variants(op, "v", sp, bad_c, "fill", NULL, 0));
        kt_space_destroy(sp);
        cand extra = {.id = 9, .work = 50};
        if (round == 1) ok(kt_op_add_native(op, "extra", cand_fn, &extra)); /* a changed set */
        ok(kt_op_call(op, ARGS(5), 2));
        const kt_decision *d = decision(op, 5);
        size_t failed = 0;
        for (size_t u = 0; u < kt_decision_unit_count(d); u++) {
            const char *cfg = kt_decision_unit_config(d, u);
            if (cfg && strstr(cfg, "BAD=1")) {
                assert_int_equal(kt_decision_unit_outcome(d, u), KT_OUTCOME_BUILD_FAILED);
                if (round == 1) assert_non_null(strstr(kt_decision_unit_message(d, u), "recorded in the cache"));
                failed++;
            }
        }
        assert_int_equal(failed, 2);
        /* round 0 compiles the two good configurations and tries the two bad ones; round 1
         * finds the good ones in the artifact cache and does not try the bad ones */
        if (round == 0) assert_int_equal(kt_context_compile_count(ctx), 4);
        else assert_int_equal(kt_context_compile_count(ctx), 0);
        kt_context_destroy(ctx);
    }
}

static const char *reps_c =
    "void fill(int *out, long n) {\n"
    "    volatile long s = 0;\n"
    "    for (long r = 0; r < REPS * 100000L; r++) s += r;\n"
    "    out[0] = (int)(n + REPS);\n"
    "}\n";

/* A recalled decision of a variant group builds its winner alone: the next process, with an
 * empty artifact directory, compiles one configuration of the two and runs none while recalling. */
static void test_recall_builds_the_winner_alone(void **state) {
    (void)state;
    remove_db();
    for (int round = 0; round < 2; round++) {
        kt_context *ctx = ctx_on(db);
        if (round == 1) { /* nothing built there */
            char art[128];
            snprintf(art, sizeof art, "%s/artifacts-recall", dir);
            ok(kt_context_set_artifact_dir(ctx, art));
        }
        kt_op *op = test_op(ctx, "recalled-variants");
        kt_space *sp = NULL;
        ok(kt_space_create(&sp));
        ok(kt_space_add_param(sp, "REPS", "[40, 1]")); /* 40 times the work: REPS=1 wins by design */
        ok(kt_op_add_variants(op, "v", sp, reps_c, "fill", NULL, 0));
        kt_space_destroy(sp);
        buf[0] = 0;
        if (round == 0) {
            assert_int_equal(kt_op_recall(op, ARGS(5), 2), KT_ERR_NOT_FOUND);
            assert_int_equal(kt_context_compile_count(ctx), 0); /* nothing built for a miss */
            ok(kt_op_call(op, ARGS(5), 2));
            assert_int_equal(kt_context_compile_count(ctx), 2);
        } else {
            ok(kt_op_recall(op, ARGS(5), 2));
            assert_int_equal(kt_context_compile_count(ctx), 1);
            assert_int_equal(buf[0], 0); /* nothing ran */
            assert_int_equal(kt_op_measured_runs(op), 0);
            assert_int_equal(kt_decision_source_of(decision(op, 5)), KT_SOURCE_CACHE);
            ok(kt_op_call(op, ARGS(5), 2));
        }
        assert_int_equal(buf[0], 6);
        const kt_decision *d = decision(op, 5);
        assert_string_equal(kt_decision_unit_config(d, kt_decision_winner_unit(d)), "REPS=1");
        kt_context_destroy(ctx);
    }
}

/* 32 processes tune the same four keys and one key each against one cache at once: every call
 * succeeds, and the cache then passes SQLite's integrity check and holds exactly 4 + 32
 * decisions. */
static void test_32_processes(void **state) {
    (void)state;
    remove_db();
    pid_t pids[32];
    for (int i = 0; i < 32; i++) {
        char idx[16];
        snprintf(idx, sizeof idx, "%d", i);
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            execl(KT_TUNE_WORKER, KT_TUNE_WORKER, db, idx, (char *)NULL);
            _exit(127);
        }
    }
    int failures = 0;
    for (int i = 0; i < 32; i++) {
        int status = 0;
        assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failures++;
    }
    assert_int_equal(failures, 0);
    sqlite3 *s = NULL;
    assert_int_equal(sqlite3_open(db, &s), SQLITE_OK);
    sqlite3_stmt *q = NULL;
    assert_int_equal(sqlite3_prepare_v2(s, "PRAGMA integrity_check", -1, &q, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(q, 0), "ok");
    sqlite3_finalize(q);
    sqlite3_close(s);
    kt_cache *c = NULL;
    size_t count = 0;
    ok(kt_cache_open(db, &c));
    ok(kt_cache_count(c, "shared", NULL, &count));
    assert_int_equal(count, 36);
    kt_cache_close(c);
}

/* The longest key an op can have (8 declared components, 8 automatic ones of arguments that
 * reach a define, validity-mask words) is recorded and served like any other. */
static int64_t key_const(const kt_arg *args, size_t nargs, void *user) {
    (void)args, (void)nargs;
    return (int64_t)(intptr_t)user;
}
static int accept_all(const kt_arg *args, size_t nargs, void *user) {
    (void)args, (void)nargs, (void)user;
    return 1;
}

static kt_op *long_key_op(kt_context *ctx) {
    kt_op *op = NULL;
    ok(kt_op_create(ctx, "longkey", &op));
    ok(kt_op_set_validation(op, 0));
    ok(kt_op_add_buffer(op, "out", KT_TYPE_I32, KT_WRITE_ONLY));
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    char name[16];
    for (int i = 0; i < 8; i++) {
        snprintf(name, sizeof name, "s%d", i);
        ok(kt_op_add_scalar(op, name, KT_TYPE_I64));
        ok(kt_space_add_input(sp, name));
        snprintf(name, sizeof name, "D%d", i);
        char expr[16];
        snprintf(expr, sizeof expr, "s%d", i);
        ok(kt_space_add_derived(sp, name, expr));
        ok(kt_op_key_fn(op, key_const, (void *)(intptr_t)(i + 100)));
    }
    ok(kt_space_add_param(sp, "P", "[1]"));
    ok(kt_op_add_variants(op, "v", sp,
                          "#include <stdint.h>\nvoid put(int32_t *out, long a, long b, long c, long d, long e, long f, long g, long h)"
                          " { out[0] = (int32_t)(D0 + D7) + P; (void)a, (void)b, (void)c, (void)d, (void)e, (void)f, (void)g, (void)h; }\n",
                          "put", NULL, 0));
    kt_space_destroy(sp);
    ok(kt_op_require_fn(op, "v", accept_all, NULL));
    return op;
}

static void test_longest_key_recorded(void **state) {
    (void)state;
    remove_db();
    kt_arg args[9] = {kt_arg_buf(buf, sizeof buf)};
    for (int i = 0; i < 8; i++) args[1 + i] = kt_arg_i64(10 * i + 1);
    for (int round = 0; round < 2; round++) {
        kt_context *ctx = ctx_on(db);
        kt_op *op = long_key_op(ctx);
        buf[0] = 0;
        ok(kt_op_call(op, args, 9));
        assert_int_equal(buf[0], 1 + 71 + 1);
        const kt_decision *d = NULL;
        ok(kt_op_decision(op, args, 9, &d));
        assert_int_equal(kt_decision_key_len(d), 16); /* 8 declared, 8 automatic (then a mask word) */
        assert_int_equal(kt_decision_source_of(d), round ? KT_SOURCE_CACHE : KT_SOURCE_MEASURED);
        kt_context_destroy(ctx);
    }
    kt_cache *c = NULL;
    size_t count = 0;
    ok(kt_cache_open(db, &c));
    ok(kt_cache_count(c, "longkey", NULL, &count));
    assert_int_equal(count, 1);
    kt_cache_close(c);
}

/* Whatever the library records, wisdom export then import accepts: a string value of 4,500
 * characters, an empty string value, a compiler log in colour (escape codes). */
static void test_recorded_decisions_round_trip(void **state) {
    (void)state;
    remove_db();
    const char *old = getenv("KERNTUNE_CFLAGS");
    char *keep = old ? strdup(old) : NULL;
    setenv("KERNTUNE_CFLAGS", "-O1 -fPIC -shared -fdiagnostics-color=always", 1);
    kt_context *ctx = ctx_on(db);
    if (keep) setenv("KERNTUNE_CFLAGS", keep, 1), free(keep);
    else unsetenv("KERNTUNE_CFLAGS");
    kt_op *op = NULL;
    ok(kt_op_create(ctx, "awkward", &op));
    ok(kt_op_set_validation(op, 0));
    ok(kt_op_add_buffer(op, "out", KT_TYPE_I32, KT_WRITE_ONLY));
    ok(kt_op_add_scalar(op, "n", KT_TYPE_I64));
    size_t len = 4500;
    char *values = malloc(len + 32);
    assert_non_null(values);
    size_t k = (size_t)sprintf(values, "['', 'bad', '");
    memset(values + k, 'x', len);
    sprintf(values + k + len, "']");
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    ok(kt_space_add_param(sp, "S", values));
    ok(kt_op_add_variants(op, "v", sp,
                          "#include <stdint.h>\n#define STR_(x) #x\n#define STR(x) STR_(x)\n"
                          "void put(int32_t *out, long n) { (void)n; out[0] = (int32_t)sizeof(STR(S)); int x = ; }\n",
                          "put", NULL, 0));
    kt_space_destroy(sp);
    free(values);
    /* every variant has a syntax error: each fails to build, with the compiler's
     * coloured log; a native gives the decision its winner */
    cand only = {.id = 3, .work = 1};
    ok(kt_op_add_native(op, "native", cand_fn, &only));
    ok(kt_op_call(op, ARGS(1), 2));
    const kt_decision *d = decision(op, 1);
    assert_int_equal(kt_decision_unit_count(d), 4);
    size_t colour = 0;
    for (size_t u = 0; u < 3; u++) {
        assert_int_equal(kt_decision_unit_outcome(d, u), KT_OUTCOME_BUILD_FAILED);
        colour += strchr(kt_decision_unit_message(d, u), 0x1b) != NULL;
    }
    assert_true(colour > 0); /* the log really was in colour */
    kt_context_destroy(ctx);
    kt_cache *c = NULL;
    char *doc = NULL;
    ok(kt_cache_open(db, &c));
    ok(kt_cache_export(c, "awkward", NULL, &doc));
    kt_cache_close(c);
    char other[160];
    snprintf(other, sizeof other, "%s/other.db", dir);
    remove(other);
    size_t added = 0;
    ok(kt_cache_open(other, &c));
    ok(kt_cache_import(c, doc, 0, &added, NULL, NULL));
    assert_int_equal(added, 1);
    kt_cache_close(c);
    kt_free(doc);
    remove(other);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_warm_cache_and_new_candidates),
        cmocka_unit_test(test_recall_runs_nothing),
        cmocka_unit_test(test_recorded_failure_not_retried),
        cmocka_unit_test(test_recall_builds_the_winner_alone),
        cmocka_unit_test(test_32_processes),
        cmocka_unit_test(test_longest_key_recorded),
        cmocka_unit_test(test_recorded_decisions_round_trip),
    };
    return kt_run_cases(argc, argv, tests, setup, teardown);
}
