/*
 * test-persist.c - decisions through the persistent cache, with real files and processes: a
 * warm cache measures nothing; a changed candidate set measures only what is new; a recorded
 * build failure is not built again; a record of another library version misses; poisoned
 * records (unknown candidate, configuration out of the space, wrong types) are rejected and
 * counted, never launched; 32 processes tuning at once lose and corrupt nothing.
 */
#include "helpers.h"

#include <jansson.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef KT_TUNE_WORKER
#error "KT_TUNE_WORKER must name the built tune-worker"
#endif

static char dir[64], db[128];
static int32_t buf[64];
#define ARGS(n) ((kt_arg[]){kt_arg_buf(buf, sizeof buf), kt_arg_i64(n)})

static int setup(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/kt-persist-XXXXXX");
    if (mkdtemp(dir) == NULL) return -1;
    snprintf(db, sizeof db, "%s/cache.db", dir);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* A context on the test's cache file, with a fresh artifact directory. */
static kt_context *ctx_on(const char *path) {
    kt_context *ctx = NULL;
    ok(kt_context_create(&ctx));
    ok(kt_context_set_cache(ctx, path));
    char art[128];
    snprintf(art, sizeof art, "%s/artifacts", dir);
    ok(kt_context_set_artifact_dir(ctx, art));
    return ctx;
}

static const kt_decision *decision(kt_op *op, int64_t n) {
    const kt_decision *d = NULL;
    ok(kt_op_decision(op, ARGS(n), 2, &d));
    return d;
}

static void remove_db(void) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -f '%s' '%s-wal' '%s-shm'", db, db, db);
    assert_int_equal(system(cmd), 0);
}

/* The second process (here: a second context) with a warm cache measures nothing and runs the
 * recorded winner; adding a candidate measures only the new one. */
static void test_warm_cache_and_new_candidates(void **state) {
    (void)state;
    remove_db();
    cand fast = {.id = 1, .work = 1}, slow = {.id = 2, .work = 10}, newer = {.id = 3, .work = 20};
    kt_context *ctx = ctx_on(db);
    kt_op *op = test_op(ctx, "persisted");
    ok(kt_op_add_native(op, "fast", cand_fn, &fast));
    ok(kt_op_add_native(op, "slow", cand_fn, &slow));
    ok(kt_op_call(op, ARGS(7), 2));
    assert_int_equal(kt_decision_source_of(decision(op, 7)), KT_SOURCE_MEASURED);
    kt_context_destroy(ctx);
    size_t count = 0;
    kt_cache *c = NULL;
    ok(kt_cache_open(db, &c));
    ok(kt_cache_count(c, "persisted", NULL, &count));
    assert_int_equal(count, 1);
    kt_cache_close(c);

    atomic_store(&fast.calls, 0), atomic_store(&slow.calls, 0);
    ctx = ctx_on(db);
    op = test_op(ctx, "persisted");
    ok(kt_op_add_native(op, "fast", cand_fn, &fast));
    ok(kt_op_add_native(op, "slow", cand_fn, &slow));
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
    op = test_op(ctx, "persisted");
    ok(kt_op_add_native(op, "fast", cand_fn, &fast));
    ok(kt_op_add_native(op, "slow", cand_fn, &slow));
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
        kt_op *op = NULL;
        ok(kt_op_create(ctx, "failing", &op));
        ok(kt_op_set_validation(op, 0));
        ok(kt_op_add_buffer(op, "out", KT_TYPE_I32, KT_WRITE_ONLY));
        ok(kt_op_add_scalar(op, "n", KT_TYPE_I64));
        ok(kt_op_key_arg(op, 1, KT_BUCKET_EXACT));
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

/* Exports the cache, lets edit() change the document, imports it in place of what was there. */
static void rewrite(void (*edit)(json_t *entry)) {
    kt_cache *c = NULL;
    ok(kt_cache_open(db, &c));
    char *text = NULL;
    ok(kt_cache_export(c, NULL, NULL, &text));
    json_error_t e;
    json_t *w = json_loads(text, 0, &e);
    kt_free(text);
    assert_non_null(w);
    json_t *entries = json_object_get(w, "entries");
    assert_int_equal(json_array_size(entries), 1);
    edit(json_array_get(entries, 0));
    char *out = json_dumps(w, 0);
    json_decref(w);
    size_t removed = 0;
    ok(kt_cache_remove(c, NULL, NULL, &removed));
    ok(kt_cache_import(c, out, 1, NULL, NULL, NULL));
    free(out);
    kt_cache_close(c);
}

static void edit_version(json_t *e) { json_object_set_new(e, "library_version", json_string("0.0.9")); }
static void edit_candidate(json_t *e) {
    json_object_set_new(json_object_get(e, "winner"), "candidate", json_string("vanished"));
}

/* Tunes "poison" with fast and slow once, so that the cache holds its decision. */
static kt_context *poison_op(kt_op **op, cand *fast, cand *slow) {
    kt_context *ctx = ctx_on(db);
    *op = test_op(ctx, "poison");
    ok(kt_op_add_native(*op, "fast", cand_fn, fast));
    ok(kt_op_add_native(*op, "slow", cand_fn, slow));
    return ctx;
}

/* Records that must not be used: another library version misses; a winner the op does not
 * have and a row with values of the wrong type are rejected and counted; the key is tuned
 * again and the answer is right. */
static void test_invalid_records(void **state) {
    (void)state;
    void (*edits[2])(json_t *) = {edit_version, edit_candidate};
    for (int k = 0; k < 3; k++) {
        remove_db();
        cand fast = {.id = 1, .work = 1}, slow = {.id = 2, .work = 10};
        kt_op *op = NULL;
        kt_context *ctx = poison_op(&op, &fast, &slow);
        ok(kt_op_call(op, ARGS(3), 2));
        kt_context_destroy(ctx);
        if (k < 2) {
            rewrite(edits[k]);
        } else { /* a time stored as text */
            sqlite3 *s = NULL;
            assert_int_equal(sqlite3_open(db, &s), SQLITE_OK);
            assert_int_equal(sqlite3_exec(s, "UPDATE decisions SET time_ns = 'abc'", NULL, NULL, NULL), SQLITE_OK);
            sqlite3_close(s);
        }
        atomic_store(&fast.calls, 0), atomic_store(&slow.calls, 0);
        ctx = poison_op(&op, &fast, &slow);
        buf[0] = 0;
        ok(kt_op_call(op, ARGS(3), 2));
        assert_int_equal(buf[0], 1);
        const kt_decision *d = decision(op, 3);
        assert_int_equal(kt_decision_source_of(d), KT_SOURCE_MEASURED);
        /* decided again: another version's units are not reused; the same version's units are
         * (only the decision record was bad) */
        if (k == 0) assert_true(calls(&slow) >= 1);
        assert_int_equal(kt_context_cache_hits(ctx), 0);
        assert_int_equal(kt_context_cache_rejected(ctx), k == 0 ? 0 : 1); /* another version simply misses */
        kt_context_destroy(ctx);
    }
}

/* A configuration that is not in today's space (the space changed, same set otherwise cannot
 * happen: a poisoned record) is rejected, never launched. */
static void test_config_out_of_space(void **state) {
    (void)state;
    remove_db();
    static const char *src = "void fill(int *out, long n) { out[0] = (int)(n * K); }\n";
    for (int round = 0; round < 2; round++) {
        kt_context *ctx = ctx_on(db);
        kt_op *op = NULL;
        ok(kt_op_create(ctx, "space", &op));
        ok(kt_op_add_buffer(op, "out", KT_TYPE_I32, KT_WRITE_ONLY));
        ok(kt_op_add_scalar(op, "n", KT_TYPE_I64));
        ok(kt_op_key_arg(op, 1, KT_BUCKET_EXACT));
        ok(kt_op_set_validation(op, 0));
        kt_space *sp = NULL;
        ok(kt_space_create(&sp));
        ok(kt_space_add_param(sp, "K", "[3]"));
        ok(kt_op_add_variants(op, "v", sp, src, "fill", NULL, 0));
        kt_space_destroy(sp);
        buf[0] = 0;
        ok(kt_op_call(op, ARGS(2), 2));
        assert_int_equal(buf[0], 6);
        const kt_decision *d = decision(op, 2);
        if (round == 1) {
            assert_int_equal(kt_decision_source_of(d), KT_SOURCE_MEASURED);
            assert_int_equal(kt_context_cache_rejected(ctx), 1);
        }
        kt_context_destroy(ctx);
        if (round == 0) {
            sqlite3 *s = NULL;
            assert_int_equal(sqlite3_open(db, &s), SQLITE_OK);
            assert_int_equal(sqlite3_exec(s, "UPDATE decisions SET winner_config = 'K=999'", NULL, NULL, NULL), SQLITE_OK);
            sqlite3_close(s);
        }
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_warm_cache_and_new_candidates),
        cmocka_unit_test(test_recorded_failure_not_retried),
        cmocka_unit_test(test_invalid_records),
        cmocka_unit_test(test_config_out_of_space),
        cmocka_unit_test(test_32_processes),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
