/*
 * test-variants-build.c - building a key's variants ahead on the C backend (kt_op_build): into
 * the artifact directory and nothing else, found again, compiling nothing for a later tuning;
 * and builds given up: a tuning under a budget of seconds, and kt_op_build under one, leave a
 * hung compiler stopped at their deadline.
 */
#define _GNU_SOURCE /* mkdtemp */
#include "variants-matmul.h"

#include <kerntune/decision.h>

#include "fifo-hang.h"

#include <unistd.h>

typedef struct built_seen {
    int with_artifact, without;
    bool files_there;
} built_seen;

static void on_built(void *user, const char *config, const char *artifact) {
    built_seen *b = user;
    assert_non_null(strstr(config, "TI="));
    if (artifact == NULL) {
        b->without++;
        return;
    }
    b->with_artifact++;
    b->files_there = b->files_there && access(artifact, R_OK) == 0 && strncmp(artifact, artifacts, strlen(artifacts)) == 0;
}

/* kt_op_build: the variants built into the artifact directory and nothing else (no decision,
 * no run, the buffers untouched); built again, every one is found; a tuning in another context
 * on the same directory compiles nothing; a variant that fails to build is counted. */
static void test_build_ahead(void **state) {
    (void)state;
    fill();
    static char src[4096], bad[4096];
    snprintf(src, sizeof src, "/* ahead %d */\n%s", (int)getpid(), matmul_src); /* new to the cache */
    snprintf(bad, sizeof bad, "/* ahead bad %d */\n#if TI == 32\nthis is not C;\n#endif\n%s", (int)getpid(), matmul_src);
    kt_context *ctx = variant_context();
    kt_space *sp = matmul_space();
    kt_op *op = matmul_op(ctx, sp, src, "matmul");
    memset(C, 0x5a, sizeof C);
    kt_build_counts c = {99, 99, 99};
    ok(kt_op_build(op, mm_args(N), 4, &c));
    assert_int_equal(c.built, 8);
    assert_int_equal(c.found, 0);
    assert_int_equal(c.failed, 0);
    assert_int_equal(kt_context_compile_count(ctx), 8);
    for (size_t i = 0; i < sizeof C; i++) assert_int_equal(((unsigned char *)C)[i], 0x5a);
    assert_int_equal(kt_op_decision_count(op), 0);
    assert_int_equal(kt_op_tune_count(op), 0);
    assert_int_equal(kt_op_measured_runs(op), 0);
    ok(kt_op_build(op, mm_args(N), 4, &c));
    assert_int_equal(c.built, 0);
    assert_int_equal(c.found, 8);
    assert_int_equal(kt_context_compile_count(ctx), 8);
    kt_context *ctx2 = variant_context();
    kt_op *op2 = matmul_op(ctx2, sp, src, "matmul");
    ok(kt_op_call(op2, mm_args(N), 4));
    assert_memory_equal(C, R, sizeof C);
    assert_int_equal(kt_context_compile_count(ctx2), 0);
    assert_int_equal(kt_context_artifact_hits(ctx2), 8);
    built_seen seen = {0, 0, true};
    ok(kt_op_build_each(op, mm_args(N), 4, &c, on_built, &seen)); /* each configuration told, with its file */
    assert_int_equal(seen.with_artifact, 8);
    assert_int_equal(seen.without, 0);
    assert_true(seen.files_there);
    kt_context *ctx3 = variant_context();
    kt_op *op3 = matmul_op(ctx3, sp, bad, "matmul");
    seen = (built_seen){0, 0, true};
    ok(kt_op_build_each(op3, mm_args(N), 4, &c, on_built, &seen));
    assert_int_equal(c.built, 4);
    assert_int_equal(c.failed, 4);
    assert_int_equal(seen.with_artifact, 4);
    assert_int_equal(seen.without, 4);
    expect_status(KT_ERR_NULL, kt_op_build(NULL, mm_args(N), 4, NULL));
    assert_int_not_equal(kt_op_build(op3, mm_args(N), 3, NULL), KT_OK); /* the wrong number of arguments */
    assert_non_null(strstr(kt_last_error(), "kt_op_build"));
    kt_space_destroy(sp);
    kt_context_destroy(ctx3);
    kt_context_destroy(ctx2);
    kt_context_destroy(ctx);
}

/* ---- regressions from review ---------------------------------------------------------------- */

/* Exported by this program (linked -rdynamic): a variant whose kernel has the same name must
 * still run its own code, not this. */
void kt_test_collide(float *y, long n);
void kt_test_collide(float *y, long n) {
    for (long i = 0; i < n; i++) y[i] = -1;
}

/* Under a budget of wall seconds, the tuning does not wait past its deadline for a build on the
 * host either, and the build it leaves is stopped: group "hung" compiles with -include of a
 * FIFO nobody writes, so its compiler (cc1) waits for ever (the FIFO's watcher sees it arrive).
 * With a budget of 5 s (the hung build starts well before) the tuning returns at its deadline
 * without it (its unit NOT_RUN, the result right), having stopped the compiler, its children
 * included: soon nobody reads the FIFO (opening it to write fails with ENXIO). Destroying the
 * context then waits for nothing, and no failure is recorded for the group's code. */
/* A variant group "hung" of one configuration whose compiler includes the FIFO at fifo: it
 * waits for ever until stopped (fifo-hang.h). */
static void add_hung_group(kt_op *op, const char *src, const char *fifo) {
    kt_space *hs = NULL;
    ok(kt_space_create(&hs));
    ok(kt_space_add_param(hs, "TI", "[8]"));
    ok(kt_space_add_param(hs, "TK", "[16]"));
    ok(kt_space_add_param(hs, "UNROLL", "[1]"));
    ok(kt_space_add_param(hs, "WRONG", "[0]"));
    ok(kt_op_add_variants(op, "hung", hs, src, "matmul", (const char *const[]){"-include", fifo}, 2));
    kt_space_destroy(hs);
}

static void test_budget_stops_hung_compiler(void **state) {
    (void)state;
    fill();
    static fifo_hang hang; /* the watcher reads it: it outlives a failed assertion */
    assert_true(fifo_hang_start(&hang, true));
    const int failed_before = count_files(artifacts, ".failed");
    kt_context *ctx = variant_context();
    kt_space *sp = matmul_space();
    kt_op *op = matmul_op(ctx, sp, matmul_src, "matmul");
    add_hung_group(op, matmul_src, hang.path);
    ok(kt_op_set_budget(op, 0, 5.0));
    /* one build at a time: the tiled group's first unit is measured before "hung" is built, so
     * that the tuning can decide by the deadline (without an answer it waits for a build) */
    ok(kt_context_set_compile_threads(ctx, 1));
    double t0 = fifo_now_s();
    ok(kt_op_call(op, mm_args(N), 4));
    assert_true(fifo_now_s() - t0 < 50); /* ten times the deadline; a build waited for lasts 60 s */
    assert_memory_equal(C, R, sizeof C);
    const kt_decision *d = NULL;
    ok(kt_op_decision(op, mm_args(N), 4, &d));
    size_t hung = kt_decision_unit_count(d);
    for (size_t u = 0; u < kt_decision_unit_count(d); u++)
        if (strcmp(kt_op_candidate_name(op, kt_decision_unit_candidate(d, u)), "hung") == 0) hung = u;
    assert_true(hung < kt_decision_unit_count(d));
    assert_int_equal(kt_decision_unit_outcome(d, hung), KT_OUTCOME_NOT_RUN);
    assert_true(kt_decision_winner_unit(d) != hung);
    const bool unread = fifo_unread(&hang);
    t0 = fifo_now_s();
    kt_context_destroy(ctx);
    assert_true(fifo_now_s() - t0 < 50);
    assert_true(atomic_load(&hang.reader_seen)); /* the compiler reached the FIFO */
    assert_false(fifo_hang_end(&hang));          /* the watcher never had to let it finish */
    assert_true(unread);
    assert_int_equal(count_files(artifacts, ".failed"), failed_before);
    kt_space_destroy(sp);
}

/* kt_op_build under a budget of wall seconds (5 s: the eight others build on the threads the
 * hung one leaves, and at 1.5 s the ASan stage of a make check on the 2-core VM once had 7 of
 * them built, 2026-12-03): the compiler hung on its FIFO is stopped at the deadline, the hung
 * build counts as failed and is told with no file, the others are built. */
static void test_build_ahead_gives_up(void **state) {
    (void)state;
    fill();
    static fifo_hang hang;
    assert_true(fifo_hang_start(&hang, true));
    static char src[4096];
    snprintf(src, sizeof src, "/* ahead deadline %d */\n%s", (int)getpid(), matmul_src); /* new to the cache */
    kt_context *ctx = variant_context();
    kt_space *sp = matmul_space();
    kt_op *op = matmul_op(ctx, sp, src, "matmul");
    add_hung_group(op, src, hang.path);
    ok(kt_op_set_budget(op, 0, 5.0));
    built_seen seen = {0, 0, true};
    kt_build_counts c = {0};
    double t0 = fifo_now_s();
    ok(kt_op_build_each(op, mm_args(N), 4, &c, on_built, &seen));
    assert_true(fifo_now_s() - t0 < 50); /* the deadline is 5 s; a build waited for lasts 60 s */
    assert_int_equal(c.built, 8);
    assert_int_equal(c.failed, 1);
    assert_int_equal(seen.with_artifact, 8);
    assert_int_equal(seen.without, 1);
    kt_context_destroy(ctx); /* waits for the stopped compiler */
    assert_true(atomic_load(&hang.reader_seen)); /* the compiler reached the FIFO */
    assert_false(fifo_hang_end(&hang));          /* the watcher never had to let it finish */
    kt_space_destroy(sp);
}

int main(int argc, char **argv) {
    snprintf(artifacts, sizeof artifacts, "/tmp/kt-variants-build-XXXXXX");
    if (mkdtemp(artifacts) == NULL) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_build_ahead),
        cmocka_unit_test(test_budget_stops_hung_compiler),
        cmocka_unit_test(test_build_ahead_gives_up),
    };
    int rc = kt_run_cases(argc, argv, tests, NULL, NULL);
    if (remove_tree(artifacts) != 0) rc = rc ? rc : 1;
    return rc;
}
