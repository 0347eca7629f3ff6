/*
 * test-isolate.c - candidates that crash, abort, hang, write far out of bounds or exhaust
 * memory run in a runner process: each is disqualified with its class, the op still returns the
 * right answer, and this process survives. OpenCL on PoCL: a kernel that fails to build and one
 * that asks for too large a work-group are disqualified, the good one wins, in a runner too.
 * The runner is a new process image (posix_spawn), never a fork of this one; failures report
 * their kind and real code. A user's plug-in (a backend and natives in a shared object) is
 * test-isolate-plugin.c's; isolate-test.h holds what both share.
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include "isolate-test.h"

#ifndef KT_DATA
#error "KT_DATA must name tests/data"
#endif

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char text[8192];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    return text;
}

/* One op over tests/data/t1/crashy.c's modes (values), isolated, timeout seconds. */
static kt_op *crashy_op(kt_context *ctx, const char *name, const char *values, double timeout) {
    kt_op *op = NULL;
    ok(kt_op_create(ctx, name, &op));
    ok(kt_op_add_buffer(op, "out", KT_TYPE_F32, KT_WRITE_ONLY));
    ok(kt_op_add_buffer(op, "in", KT_TYPE_F32, KT_READ_ONLY));
    ok(kt_op_add_scalar(op, "n", KT_TYPE_I32));
    ok(kt_op_set_reference_fn(op, twice_ref, NULL));
    ok(kt_op_set_isolation(op, KT_ISOLATE_ON));
    ok(kt_op_set_timeout(op, timeout));
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    ok(kt_space_add_param(sp, "MODE", values));
    ok(kt_op_add_variants(op, "crashy", sp, read_file(KT_DATA "/t1/crashy.c"), "crashy", NULL, 0));
    kt_space_destroy(sp);
    return op;
}

/* Null write, abort, a write 64 GiB out of bounds, allocating without end, and an endless loop:
 * each is disqualified with its class; the correct variants are measured, the faster wins, the
 * caller's output holds its result. */
static void test_c_candidates_that_fail_badly(void **state) {
    (void)state;
    kt_context *ctx = NULL;
    ok(kt_context_create(&ctx));
    ok(kt_context_set_artifact_dir(ctx, artifacts));
    static float out[N], in[N];
    for (int i = 0; i < N; i++) in[i] = (float)(i % 17) - 8.0f;
    kt_arg args[3] = {kt_arg_buf(out, sizeof out), kt_arg_buf(in, sizeof in), kt_arg_i32(N)};

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    /* a sanitizer reserves the address space up front, so allocating without end takes minutes
     * to fail there: that mode is the normal build's */
    kt_op *op = crashy_op(ctx, "crashy", "[0, 1, 2, 4, 6]", 30);
#else
    kt_op *op = crashy_op(ctx, "crashy", "[0, 1, 2, 4, 5, 6]", 30);
#endif
    ok(kt_op_call(op, args, 3));
    for (int i = 0; i < N; i++) assert_true(out[i] == 2.0f * in[i]);
    const kt_decision *d = NULL;
    ok(kt_op_decision(op, args, 3, &d));
    assert_string_equal(kt_decision_unit_config(d, kt_decision_winner_unit(d)), "MODE=0");
    expect_unit(d, "MODE=0", KT_OUTCOME_MEASURED, NULL);
    expect_unit(d, "MODE=6", KT_OUTCOME_MEASURED, NULL);
    expect_unit(d, "MODE=1", KT_OUTCOME_CRASHED, "signal 11");
    expect_unit(d, "MODE=2", KT_OUTCOME_CRASHED, "signal 6");
    expect_unit(d, "MODE=4", KT_OUTCOME_CRASHED, "signal 11");
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    expect_unit(d, "MODE=5", KT_OUTCOME_CRASHED, "signal 11");
#endif

    /* an endless loop: killed at the timeout */
    memset(out, 0, sizeof out);
    kt_op *op2 = crashy_op(ctx, "hangs", "[3, 0]", 1.0);
    ok(kt_op_call(op2, args, 3));
    for (int i = 0; i < N; i++) assert_true(out[i] == 2.0f * in[i]);
    ok(kt_op_decision(op2, args, 3, &d));
    expect_unit(d, "MODE=3", KT_OUTCOME_TIMEOUT, "timeout");
    assert_string_equal(kt_decision_unit_config(d, kt_decision_winner_unit(d)), "MODE=0");
    kt_context_destroy(ctx);
}

/* A crash is remembered: with a cache, a later tuning of a changed candidate set does not run
 * the crashing configuration again. */
static void test_crash_remembered(void **state) {
    (void)state;
    char db[128];
    snprintf(db, sizeof db, "%s/cache.db", artifacts);
    static float out[N], in[N];
    for (int i = 0; i < N; i++) in[i] = (float)(i % 5);
    kt_arg args[3] = {kt_arg_buf(out, sizeof out), kt_arg_buf(in, sizeof in), kt_arg_i32(N)};
    for (int round = 0; round < 2; round++) {
        kt_context *ctx = NULL;
        ok(kt_context_create(&ctx));
        ok(kt_context_set_artifact_dir(ctx, artifacts));
        ok(kt_context_set_cache(ctx, db));
        kt_op *op = crashy_op(ctx, "remembers", round == 0 ? "[0, 1]" : "[0, 1, 6]", 30);
        ok(kt_op_call(op, args, 3));
        const kt_decision *d = NULL;
        ok(kt_op_decision(op, args, 3, &d));
        expect_unit(d, "MODE=1", KT_OUTCOME_CRASHED, round == 0 ? "signal 11" : "recorded in the cache");
        kt_context_destroy(ctx);
    }
}

static int native_segv(const kt_arg *args, size_t nargs, void *user) {
    (void)args, (void)nargs, (void)user;
    /* a page that may not be written: a plain SIGSEGV, even under the sanitizers */
    volatile int *bad = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (bad != MAP_FAILED) *bad = 1;
    return 1;
}
static int native_abort(const kt_arg *args, size_t nargs, void *user) {
    (void)args, (void)nargs, (void)user;
    abort();
}
static int native_hang(const kt_arg *args, size_t nargs, void *user) {
    (void)args, (void)nargs, (void)user;
    for (volatile long i = 0;; i++) {
    }
    return 0;
}
static int native_twice(const kt_arg *args, size_t nargs, void *user) {
    (void)nargs;
    int reps = (int)(intptr_t)user;
    float *out = args[0].ptr;
    const float *in = args[1].ptr;
    for (int r = 0; r < reps; r++)
        for (int32_t i = 0; i < (int32_t)args[2].i; i++) out[i] = 2.0f * in[i];
    return 0;
}

/* Natives, when the op asks: they run in a fork of this process; one that segfaults, aborts or
 * hangs is disqualified with its class; the fast correct one wins and its result is the call's. */
static void test_isolated_natives(void **state) {
    (void)state;
    kt_context *ctx = NULL;
    ok(kt_context_create(&ctx));
    static float out[N], in[N];
    for (int i = 0; i < N; i++) in[i] = (float)(i % 9);
    kt_arg args[3] = {kt_arg_buf(out, sizeof out), kt_arg_buf(in, sizeof in), kt_arg_i32(N)};
    kt_op *op = NULL;
    ok(kt_op_create(ctx, "natives", &op));
    ok(kt_op_add_buffer(op, "out", KT_TYPE_F32, KT_WRITE_ONLY));
    ok(kt_op_add_buffer(op, "in", KT_TYPE_F32, KT_READ_ONLY));
    ok(kt_op_add_scalar(op, "n", KT_TYPE_I32));
    ok(kt_op_set_reference_fn(op, twice_ref, NULL));
    ok(kt_op_set_isolation(op, KT_ISOLATE_ON));
    ok(kt_op_set_timeout(op, 1.0));
    ok(kt_op_add_native(op, "segv", native_segv, NULL));
    ok(kt_op_add_native(op, "slow", native_twice, (void *)(intptr_t)20));
    ok(kt_op_add_native(op, "abort", native_abort, NULL));
    ok(kt_op_add_native(op, "fast", native_twice, (void *)(intptr_t)1));
    ok(kt_op_add_native(op, "hang", native_hang, NULL));
    ok(kt_op_call(op, args, 3));
    for (int i = 0; i < N; i++) assert_true(out[i] == 2.0f * in[i]);
    const kt_decision *d = NULL;
    ok(kt_op_decision(op, args, 3, &d));
    assert_string_equal(kt_op_candidate_name(op, kt_decision_winner(d)), "fast");
    assert_int_equal(kt_decision_outcome(d, 0), KT_OUTCOME_CRASHED);
    assert_non_null(strstr(kt_decision_message(d, 0), "signal 11"));
    assert_int_equal(kt_decision_outcome(d, 1), KT_OUTCOME_MEASURED);
    assert_int_equal(kt_decision_outcome(d, 2), KT_OUTCOME_CRASHED);
    assert_non_null(strstr(kt_decision_message(d, 2), "signal 6"));
    assert_int_equal(kt_decision_outcome(d, 4), KT_OUTCOME_TIMEOUT);
    kt_context_destroy(ctx);
}


/* ---- the runner is a new program image, failures say their kind ------------------------------ */

static int changed_at_run_time; /* 0 in the program's file; this process sets it */

/* Writes "fresh PID" when it runs where changed_at_run_time has its initial value (a new image
 * of this program), "forked PID" where it was changed (this process or a fork of it). */
static int native_where(const kt_arg *args, size_t nargs, void *user) {
    const char *path = getenv("KT_TEST_PLUGIN_LOG"); /* plugin_log is empty in a new image too */
    FILE *f = path ? fopen(path, "a") : NULL;
    if (f) {
        fprintf(f, "%s %ld\n", changed_at_run_time ? "forked" : "fresh", (long)getpid());
        fclose(f);
    }
    (void)user;
    return native_twice(args, nargs, (void *)(intptr_t)1);
}
static int native_fails(const kt_arg *args, size_t nargs, void *user) {
    (void)args, (void)nargs, (void)user;
    return 42;
}
static int native_exits(const kt_arg *args, size_t nargs, void *user) {
    (void)args, (void)nargs, (void)user;
    _exit(3);
}

/* A native of this program runs in a new image of the program (posix_spawn), not in a fork:
 * it sees this process's run-time changes to its data nowhere, and runs in another process. */
static void test_runner_is_a_new_image(void **state) {
    (void)state;
    log_reset();
    changed_at_run_time = 1;
    kt_context *ctx = NULL;
    ok(kt_context_create(&ctx));
    static float out[N], in[N];
    for (int i = 0; i < N; i++) in[i] = (float)(i % 7);
    kt_arg args[3] = {kt_arg_buf(out, sizeof out), kt_arg_buf(in, sizeof in), kt_arg_i32(N)};
    kt_op *op = natives_op(ctx, "fresh", KT_ISOLATE_ON);
    ok(kt_op_add_native(op, "where", native_where, (void *)(intptr_t)1));
    ok(kt_op_add_native(op, "slow", native_twice, (void *)(intptr_t)20)); /* a race: both are run */
    ok(kt_op_call(op, args, 3));
    for (int i = 0; i < N; i++) assert_true(out[i] == 2.0f * in[i]);
    int mine = 0;
    assert_int_equal(log_count("forked", &mine, NULL), 0); /* no run in a fork */
    int fresh = log_count("fresh", &mine, NULL);
    assert_true(fresh >= 2); /* its validation run and at least one measured run, in a runner */
    assert_int_equal(mine, 0);
    int forked_here = 0;
    log_count("forked", &forked_here, NULL);
    assert_int_equal(forked_here, 1); /* the final launch: this process's, on the caller's data */
    changed_at_run_time = 0;
    kt_context_destroy(ctx);
}

/* Each failure says its kind and its real code: a signal's number, an exit status, the value a
 * native returned (in a runner and in this process alike); a timeout has no code. */
static void test_fail_kinds(void **state) {
    (void)state;
    kt_context *ctx = NULL;
    ok(kt_context_create(&ctx));
    static float out[N], in[N];
    for (int i = 0; i < N; i++) in[i] = (float)(i % 5);
    kt_arg args[3] = {kt_arg_buf(out, sizeof out), kt_arg_buf(in, sizeof in), kt_arg_i32(N)};
    kt_op *op = natives_op(ctx, "kinds", KT_ISOLATE_ON);
    ok(kt_op_add_native(op, "segv", native_segv, NULL));
    ok(kt_op_add_native(op, "abort", native_abort, NULL));
    ok(kt_op_add_native(op, "hang", native_hang, NULL));
    ok(kt_op_add_native(op, "fails", native_fails, NULL));
    ok(kt_op_add_native(op, "exits", native_exits, NULL));
    ok(kt_op_add_native(op, "good", native_twice, (void *)(intptr_t)1));
    ok(kt_op_call(op, args, 3));
    const kt_decision *d = NULL;
    ok(kt_op_decision(op, args, 3, &d));
    expect_fail(d, 0, KT_OUTCOME_CRASHED, KT_FAIL_CRASH, "crash", SIGSEGV);
    expect_fail(d, 1, KT_OUTCOME_CRASHED, KT_FAIL_CRASH, "crash", SIGABRT);
    expect_fail(d, 2, KT_OUTCOME_TIMEOUT, KT_FAIL_TIMEOUT, "timeout", 0);
    expect_fail(d, 3, KT_OUTCOME_FAILED, KT_FAIL_RETURNED, "returned", 42);
    expect_fail(d, 4, KT_OUTCOME_CRASHED, KT_FAIL_EXIT, "exit", 3);
    expect_fail(d, 5, KT_OUTCOME_MEASURED, KT_FAIL_NONE, "none", 0);
    assert_int_equal(kt_decision_fail_code(d, 0), SIGSEGV); /* the candidate accessor agrees */
    assert_int_equal(kt_decision_fail_code(d, 3), 42);
    assert_non_null(strstr(kt_decision_unit_message(d, 4), "exited with status 3"));
    /* in this process: the same kind and code */
    kt_op *here = natives_op(ctx, "kinds-here", KT_ISOLATE_OFF);
    ok(kt_op_add_native(here, "fails", native_fails, NULL));
    ok(kt_op_add_native(here, "good", native_twice, (void *)(intptr_t)1));
    ok(kt_op_call(here, args, 3));
    ok(kt_op_decision(here, args, 3, &d));
    expect_fail(d, 0, KT_OUTCOME_FAILED, KT_FAIL_RETURNED, "returned", 42);
    /* the names and descriptions come from one list */
    assert_string_equal(kt_fail_kind_name(KT_FAIL_RECORDED), "recorded");
    assert_string_equal(kt_fail_kind_name((kt_fail_kind)99), "unknown");
    assert_non_null(strstr(kt_fail_kind_describe(KT_FAIL_CRASH), "signal number"));
    assert_non_null(strstr(kt_fail_kind_describe((kt_fail_kind)99), "not a failure kind"));
    assert_int_equal(kt_decision_unit_fail_kind(d, 99), KT_FAIL_NONE);
    kt_context_destroy(ctx);
}

/* A native whose user pointer is an address of this process's memory cannot run in a runner:
 * it runs here, and an info line says why. */
static void test_user_pointer_stays(void **state) {
    (void)state;
    log_reset();
    kt_context *ctx = NULL;
    ok(kt_context_create(&ctx));
    lines got = {""};
    ok(kt_context_set_log_level(ctx, KT_LOG_INFO));
    ok(kt_context_set_log_fn(ctx, capture, &got));
    static float out[N], in[N];
    for (int i = 0; i < N; i++) in[i] = (float)(i % 3);
    kt_arg args[3] = {kt_arg_buf(out, sizeof out), kt_arg_buf(in, sizeof in), kt_arg_i32(N)};
    kt_op *op = natives_op(ctx, "pointer", KT_ISOLATE_ON);
    static int config = 1; /* native_where reads no user; the pointer is the point */
    ok(kt_op_add_native(op, "here", native_where, &config));
    ok(kt_op_add_native(op, "slow", native_twice, (void *)(intptr_t)20)); /* a race: both are run */
    ok(kt_op_call(op, args, 3));
    for (int i = 0; i < N; i++) assert_true(out[i] == 2.0f * in[i]);
    int mine = 0;
    assert_int_equal(log_count("fresh", &mine, NULL), 0);
    assert_true(mine >= 3); /* validation, measured runs and the final launch: all here */
    assert_non_null(strstr(got.text, "op 'pointer': native 'here' runs in this process, not in a runner: its user pointer"));
    assert_non_null(strstr(got.text, "is an address in this process, which means nothing in another"));
    kt_context_destroy(ctx);
}


static const char *cl_src =
    "#if BAD\n"
    "#error this configuration does not build\n"
    "#endif\n"
    "__kernel void twice(__global float *out, __global const float *in, int n) {\n"
    "    int i = get_global_id(0);\n"
    "    if (i < n) out[i] = 2.0f * in[i];\n"
    "}\n";

/* On PoCL, isolated: a configuration that fails to build, and one asking for a work-group far
 * beyond the device's, are disqualified; the good one runs in the runner and wins. */
static void test_opencl_isolated(void **state) {
    (void)state;
    kt_context *ctx = NULL;
    ok(kt_context_create(&ctx));
    ok(kt_context_set_artifact_dir(ctx, artifacts));
    size_t dev = (size_t)-1;
    for (size_t i = 0; i < kt_context_device_count(ctx); i++)
        if (strcmp(kt_device_backend(kt_context_device(ctx, i)), "opencl") == 0) dev = i;
    if (dev == (size_t)-1) {
        print_message("no OpenCL device: skipped\n");
        kt_context_destroy(ctx);
        skip();
    }
    static float out[N], in[N];
    for (int i = 0; i < N; i++) in[i] = (float)i;
    void *dout, *din;
    ok(kt_device_alloc(ctx, dev, sizeof out, &dout));
    ok(kt_device_alloc(ctx, dev, sizeof in, &din));
    ok(kt_device_write(ctx, dev, din, in, sizeof in));
    kt_op *op = NULL;
    ok(kt_op_create(ctx, "cltwice", &op));
    ok(kt_op_set_device(op, dev));
    ok(kt_op_add_buffer(op, "out", KT_TYPE_F32, KT_WRITE_ONLY));
    ok(kt_op_add_buffer(op, "in", KT_TYPE_F32, KT_READ_ONLY));
    ok(kt_op_add_scalar(op, "n", KT_TYPE_I32));
    ok(kt_op_set_isolation(op, KT_ISOLATE_ON));
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    ok(kt_space_add_input(sp, "n"));
    ok(kt_space_add_param(sp, "BAD", "[0, 1]"));
    ok(kt_space_add_param(sp, "WG", "[16, 1048576]"));
    const char *global[3] = {"n", NULL, NULL}, *local[3] = {"WG", NULL, NULL};
    ok(kt_space_set_geometry(sp, KT_GEOMETRY_GLOBAL, global, local, NULL));
    ok(kt_op_add_variants(op, "twice", sp, cl_src, "twice", NULL, 0));
    kt_space_destroy(sp);
    kt_arg args[3] = {kt_arg_buf(dout, sizeof out), kt_arg_buf(din, sizeof in), kt_arg_i32(N)};
    ok(kt_op_call(op, args, 3));
    ok(kt_device_read(ctx, dev, out, dout, sizeof out));
    for (int i = 0; i < N; i++) assert_true(out[i] == 2.0f * in[i]);
    const kt_decision *d = NULL;
    ok(kt_op_decision(op, args, 3, &d));
    assert_string_equal(kt_decision_unit_config(d, kt_decision_winner_unit(d)), "BAD=0,WG=16");
    expect_unit(d, "BAD=1,WG=16", KT_OUTCOME_BUILD_FAILED, "does not build");
    expect_unit(d, "BAD=0,WG=1048576", KT_OUTCOME_REJECTED, "the device allows");
    kt_device_free(ctx, dev, dout);
    kt_device_free(ctx, dev, din);
    kt_context_destroy(ctx);
}

static void test_isolation_arguments(void **state) {
    (void)state;
    kt_context *ctx = NULL;
    ok(kt_context_create(&ctx));
    kt_op *op = NULL;
    ok(kt_op_create(ctx, "args", &op));
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_op_set_isolation(op, (kt_isolation)9));
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_op_set_timeout(op, 0));
    assert_non_null(strstr(kt_last_error(), "0 s is not in (0, 1e6]"));
    expect_status(KT_ERR_NULL, kt_op_set_isolation(NULL, KT_ISOLATE_ON));
    kt_context_destroy(ctx);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_c_candidates_that_fail_badly),
        cmocka_unit_test(test_crash_remembered),
        cmocka_unit_test(test_isolated_natives),
        cmocka_unit_test(test_runner_is_a_new_image),
        cmocka_unit_test(test_fail_kinds),
        cmocka_unit_test(test_user_pointer_stays),
        cmocka_unit_test(test_opencl_isolated),
        cmocka_unit_test(test_isolation_arguments),
    };
    return kt_run_cases(argc, argv, tests, setup, teardown);
}
