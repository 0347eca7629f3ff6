/*
 * persist-test.h - what test-persist.c (what the persistent cache keeps and serves) and
 * test-persist-reject.c (records it does not serve as they are: rejected, or re-raced) share: a
 * scratch cache file per run, a context on it, the (out, n) op's arguments and decisions, and an
 * op of a fast and a slow native.
 */
#ifndef KT_PERSIST_TEST_H
#define KT_PERSIST_TEST_H

#include "helpers.h"

#include <kerntune/cache.h>
#include <kerntune/decision.h>

__attribute__((unused)) static char dir[64], db[128];
__attribute__((unused)) static int32_t buf[64];
#define ARGS(n) ((kt_arg[]){kt_arg_buf(buf, sizeof buf), kt_arg_i64(n)})

__attribute__((unused)) static int setup(void **state) {
    (void)state;
    return temp_cache_dir(dir, sizeof dir, db, sizeof db, "persist");
}

__attribute__((unused)) static int teardown(void **state) {
    (void)state;
    return remove_tree(dir);
}

/* A context on the test's cache file, with a fresh artifact directory. */
__attribute__((unused)) static kt_context *ctx_on(const char *path) {
    kt_context *ctx = NULL;
    ok(kt_context_create(&ctx));
    ok(kt_context_set_cache(ctx, path));
    char art[128];
    snprintf(art, sizeof art, "%s/artifacts", dir);
    ok(kt_context_set_artifact_dir(ctx, art));
    return ctx;
}

__attribute__((unused)) static const kt_decision *decision(kt_op *op, int64_t n) {
    const kt_decision *d = NULL;
    ok(kt_op_decision(op, ARGS(n), 2, &d));
    return d;
}

/* Op `name` on ctx with the natives "fast" and "slow" (in that order). */
__attribute__((unused)) static kt_op *fast_slow_op(kt_context *ctx, const char *name, cand *fast, cand *slow) {
    kt_op *op = test_op(ctx, name);
    ok(kt_op_add_native(op, "fast", cand_fn, fast));
    ok(kt_op_add_native(op, "slow", cand_fn, slow));
    return op;
}

__attribute__((unused)) static void remove_db(void) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -f '%s' '%s-wal' '%s-shm'", db, db, db);
    assert_int_equal(system(cmd), 0);
}

#endif /* KT_PERSIST_TEST_H */
