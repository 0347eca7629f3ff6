/*
 * test-lparams.c - launch parameters (kt_op_add_launch_param): values a variant's kernel takes
 * by value after the op's arguments, computed at each launch from that launch's arguments. For
 * real on PoCL: the kernel writes what it received, so the output's bytes say which values
 * reached it, on the tuning call and on later hits with other arguments. A refusing parameter
 * fails its group's runs; a backend that cannot pass them (the C backend) fails the group's
 * build, saying so; an op isolated in worker processes still computes them here; and the API
 * refuses what it must.
 */
#define _GNU_SOURCE /* mkdtemp */
#include "helpers.h"

#include <kerntune/decision.h>
#include <kerntune/device.h>
#include <kerntune/variants.h>

#include <stdbool.h>

static char artifacts[256];

/* out[i] = in[i] * MUL + p.a + (i == 0 ? p.b : 0) + q.c[i % 4] + (i == 1 ? (int)(p.tag >> 32) : 0)
 * for i < n, -1 beyond (out is write-only: every element is written) */
static const char *stamp_cl =
    "typedef struct { int a; int b; ulong tag; } P;\n"
    "typedef struct { int c[4]; } Q;\n"
    "__kernel void stamp(__global int *out, int n, __global const int *in, P p, Q q) {\n"
    "    int i = get_global_id(0);\n"
    "    if (i >= n) { out[i] = -1; return; }\n"
    "    out[i] = in[i] * MUL + p.a + (i == 0 ? p.b : 0) + q.c[i % 4] + (i == 1 ? (int)(p.tag >> 32) : 0);\n"
    "}\n";

typedef struct P {
    int32_t a, b;
    uint64_t tag;
} P;

typedef struct Q {
    int32_t c[4];
} Q;

typedef struct seen {
    int calls;
    int32_t last_n;
    bool aligned; /* every out pointer was 64-byte aligned */
} seen;

/* p.a = 3 n, p.b = the number of arguments, p.tag's high word = 7 */
static int make_p(const kt_arg *args, size_t nargs, void *out, void *user) {
    seen *s = user;
    s->calls++;
    s->last_n = (int32_t)args[1].i;
    s->aligned = s->aligned && ((uintptr_t)out % 64) == 0;
    P p = {.a = (int32_t)(3 * args[1].i), .b = (int32_t)nargs, .tag = (uint64_t)7 << 32};
    memcpy(out, &p, sizeof p);
    return 0;
}

/* q.c[k] = 100 k + n */
static int make_q(const kt_arg *args, size_t nargs, void *out, void *user) {
    (void)nargs, (void)user;
    Q q;
    for (int k = 0; k < 4; k++) q.c[k] = 100 * k + (int32_t)args[1].i;
    memcpy(out, &q, sizeof q);
    return 0;
}

static int refuse(const kt_arg *args, size_t nargs, void *out, void *user) {
    (void)args, (void)nargs, (void)out;
    ++*(int *)user;
    return 7;
}

static size_t opencl_device(kt_context *ctx) {
    for (size_t i = 0; i < kt_context_device_count(ctx); i++)
        if (strcmp(kt_device_backend(kt_context_device(ctx, i)), "opencl") == 0) return i;
    fail_msg("no OpenCL device: is pocl-opencl-icd installed (scripts/install-deps.sh)?");
    return 0;
}

static kt_space *stamp_space(void) {
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    ok(kt_space_add_input(sp, "out"));
    ok(kt_space_add_param(sp, "MUL", "[1]"));
    ok(kt_space_add_param(sp, "PAD", "[0, 1]")); /* two configurations: a real tuning */
    const char *global[3] = {"out", NULL, NULL};
    ok(kt_space_set_geometry(sp, KT_GEOMETRY_GLOBAL, global, NULL, NULL));
    return sp;
}

/* The op stamp(out: i32[8], n: i32, in: i32[8]) on the context's OpenCL device, its group
 * "stamp" taking P and Q. */
static kt_op *stamp_op(kt_context *ctx, size_t dev, const char *name, seen *s) {
    kt_op *op = NULL;
    ok(kt_op_create(ctx, name, &op));
    ok(kt_op_set_device(op, dev));
    ok(kt_op_add_buffer(op, "out", KT_TYPE_I32, KT_WRITE_ONLY));
    ok(kt_op_add_scalar(op, "n", KT_TYPE_I32));
    ok(kt_op_add_buffer(op, "in", KT_TYPE_I32, KT_READ_ONLY));
    kt_space *sp = stamp_space();
    ok(kt_op_add_variants(op, "stamp", sp, stamp_cl, "stamp", NULL, 0));
    kt_space_destroy(sp);
    ok(kt_op_add_launch_param(op, "stamp", sizeof(P), make_p, s));
    ok(kt_op_add_launch_param(op, "stamp", sizeof(Q), make_q, NULL));
    return op;
}

enum { E = 8 };

static void expected(int32_t n, const int32_t *in, int32_t *want) {
    for (int i = 0; i < E; i++) {
        want[i] = i < n ? in[i] + 3 * n + (i == 0 ? 3 : 0) + 100 * (i % 4) + n + (i == 1 ? 7 : 0) : -1;
    }
}

/* Calls op with n on fresh device buffers (out poisoned to -1) and returns out, and the call's
 * decision in *d when d is not NULL. */
static void call_stamp(kt_context *ctx, size_t dev, kt_op *op, int32_t n, int32_t *out, const kt_decision **d) {
    int32_t in[E];
    for (int i = 0; i < E; i++) in[i] = 10 * (i + 1), out[i] = -1;
    void *dout = NULL, *din = NULL;
    ok(kt_device_alloc(ctx, dev, sizeof in, &dout));
    ok(kt_device_alloc(ctx, dev, sizeof in, &din));
    ok(kt_device_write(ctx, dev, dout, out, sizeof in));
    ok(kt_device_write(ctx, dev, din, in, sizeof in));
    kt_arg args[] = {kt_arg_buf(dout, sizeof in), kt_arg_i32(n), kt_arg_buf(din, sizeof in)};
    ok(kt_op_call(op, args, 3));
    ok(kt_device_read(ctx, dev, out, dout, sizeof in));
    if (d != NULL) ok(kt_op_decision(op, args, 3, d));
    kt_device_free(ctx, dev, dout);
    kt_device_free(ctx, dev, din);
}

static void test_values_reach_the_kernel(void **state) {
    (void)state;
    kt_context *ctx = test_context(3);
    ok(kt_context_set_artifact_dir(ctx, artifacts));
    size_t dev = opencl_device(ctx);
    seen s = {.aligned = true};
    kt_op *op = stamp_op(ctx, dev, "stamp", &s);
    int32_t out[E], want[E], in[E];
    for (int i = 0; i < E; i++) in[i] = 10 * (i + 1);
    const kt_decision *d = NULL;
    call_stamp(ctx, dev, op, 8, out, &d); /* tunes: the values of every run come from n = 8 */
    expected(8, in, want);
    assert_memory_equal(out, want, sizeof out);
    /* every run of both configurations computed them: validation, warm-up and measured runs */
    assert_true(s.calls >= 2 * 4);
    assert_true(s.aligned);
    assert_int_equal(kt_decision_source_of(d), KT_SOURCE_MEASURED);
    for (size_t u = 0; u < kt_decision_unit_count(d); u++) assert_int_equal(kt_decision_unit_outcome(d, u), KT_OUTCOME_MEASURED);
    /* a hit with other arguments: computed again from this call's n */
    int before = s.calls;
    call_stamp(ctx, dev, op, 5, out, NULL);
    expected(5, in, want);
    assert_memory_equal(out, want, sizeof out);
    assert_int_equal(s.calls, before + 1);
    assert_int_equal(s.last_n, 5);
    kt_context_destroy(ctx);
}

/* A parameter that refuses fails its group's runs (the backend's launch status as their code);
 * the group that computes its values wins. */
static void test_refusal_fails_the_group(void **state) {
    (void)state;
    kt_context *ctx = test_context(3);
    ok(kt_context_set_artifact_dir(ctx, artifacts));
    size_t dev = opencl_device(ctx);
    seen s = {.aligned = true};
    kt_op *op = stamp_op(ctx, dev, "stamp2", &s);
    int refused = 0;
    kt_space *sp = stamp_space();
    ok(kt_op_add_variants(op, "refused", sp, stamp_cl, "stamp", NULL, 0));
    kt_space_destroy(sp);
    ok(kt_op_add_launch_param(op, "refused", sizeof(P), refuse, &refused));
    ok(kt_op_add_launch_param(op, "refused", sizeof(Q), make_q, NULL));
    int32_t out[E], want[E], in[E];
    for (int i = 0; i < E; i++) in[i] = 10 * (i + 1);
    const kt_decision *d = NULL;
    call_stamp(ctx, dev, op, 6, out, &d);
    expected(6, in, want);
    assert_memory_equal(out, want, sizeof out);
    assert_true(refused >= 2);
    size_t refusing = 0;
    for (size_t u = 0; u < kt_decision_unit_count(d); u++) {
        const char *cand = kt_op_candidate_name(op, kt_decision_unit_candidate(d, u));
        if (strcmp(cand, "refused") == 0) {
            refusing++;
            assert_int_equal(kt_decision_unit_outcome(d, u), KT_OUTCOME_FAILED);
            assert_int_equal(kt_decision_unit_fail_kind(d, u), KT_FAIL_LAUNCH);
            assert_int_equal(kt_decision_unit_fail_code(d, u), KT_ERR_INVALID_ARGUMENT);
            assert_non_null(strstr(kt_decision_unit_message(d, u), "launch parameter 0 refused these arguments (it returned 7)"));
        } else {
            assert_int_equal(kt_decision_unit_outcome(d, u), KT_OUTCOME_MEASURED);
        }
    }
    assert_int_equal(refusing, 2);
    assert_string_equal(kt_op_candidate_name(op, kt_decision_unit_candidate(d, kt_decision_winner_unit(d))), "stamp");
    kt_context_destroy(ctx);
}

/* An op that runs its variants in worker processes still computes the parameters here (the
 * functions live in this process) and runs that group here. */
static void test_isolated_op_runs_the_group_here(void **state) {
    (void)state;
    kt_context *ctx = test_context(3);
    ok(kt_context_set_artifact_dir(ctx, artifacts));
    size_t dev = opencl_device(ctx);
    seen s = {.aligned = true};
    kt_op *op = stamp_op(ctx, dev, "stamp3", &s);
    ok(kt_op_set_isolation(op, KT_ISOLATE_ON));
    int32_t out[E], want[E], in[E];
    for (int i = 0; i < E; i++) in[i] = 10 * (i + 1);
    call_stamp(ctx, dev, op, 7, out, NULL);
    expected(7, in, want);
    assert_memory_equal(out, want, sizeof out);
    assert_true(s.calls >= 2 * 4); /* in this process: its counter saw every run */
    kt_context_destroy(ctx);
}

static int host_copy(const kt_arg *args, size_t nargs, void *user) {
    (void)nargs, (void)user;
    memcpy(args[0].ptr, args[2].ptr, args[0].bytes);
    return 0;
}

/* The C backend cannot pass launch parameters: the group's variants fail to build, saying so,
 * and the native candidate answers. */
static void test_c_backend_refuses_the_group(void **state) {
    (void)state;
    kt_context *ctx = test_context(3);
    ok(kt_context_set_artifact_dir(ctx, artifacts));
    kt_op *op = NULL;
    ok(kt_op_create(ctx, "copyc", &op));
    ok(kt_op_add_buffer(op, "out", KT_TYPE_I32, KT_WRITE_ONLY));
    ok(kt_op_add_scalar(op, "n", KT_TYPE_I32));
    ok(kt_op_add_buffer(op, "in", KT_TYPE_I32, KT_READ_ONLY));
    ok(kt_op_add_native(op, "copy", host_copy, NULL));
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    ok(kt_space_add_param(sp, "U", "[1, 2]"));
    ok(kt_op_add_variants(op, "cgroup", sp, "void copyk(int *out, int n, const int *in) { for (int i = 0; i < n; i++) out[i] = in[i]; }\n",
                          "copyk", NULL, 0));
    kt_space_destroy(sp);
    seen s = {.aligned = true};
    ok(kt_op_add_launch_param(op, "cgroup", sizeof(P), make_p, &s));
    int32_t in[E], out[E];
    for (int i = 0; i < E; i++) in[i] = i * 3, out[i] = -1;
    kt_arg args[] = {kt_arg_buf(out, sizeof out), kt_arg_i32(E), kt_arg_buf(in, sizeof in)};
    ok(kt_op_call(op, args, 3));
    assert_memory_equal(out, in, sizeof in);
    assert_int_equal(s.calls, 0);
    const kt_decision *d = NULL;
    ok(kt_op_decision(op, args, 3, &d));
    size_t groups = 0;
    for (size_t u = 0; u < kt_decision_unit_count(d); u++) {
        if (strcmp(kt_op_candidate_name(op, kt_decision_unit_candidate(d, u)), "cgroup") != 0) continue;
        groups++;
        assert_int_equal(kt_decision_unit_outcome(d, u), KT_OUTCOME_BUILD_FAILED);
        assert_non_null(strstr(kt_decision_unit_message(d, u), "backend 'c' cannot pass launch parameters"));
    }
    assert_int_equal(groups, 2);
    kt_context_destroy(ctx);
}

static void test_api_refusals(void **state) {
    (void)state;
    kt_context *ctx = test_context(3);
    kt_op *op = NULL;
    ok(kt_op_create(ctx, "lp-api", &op));
    ok(kt_op_add_buffer(op, "out", KT_TYPE_I32, KT_WRITE_ONLY));
    ok(kt_op_add_scalar(op, "n", KT_TYPE_I32));
    ok(kt_op_add_buffer(op, "in", KT_TYPE_I32, KT_READ_ONLY));
    ok(kt_op_add_native(op, "copy", host_copy, NULL));
    kt_space *sp = stamp_space();
    ok(kt_op_add_variants(op, "g", sp, stamp_cl, "stamp", NULL, 0));
    kt_space_destroy(sp);
    seen s = {.aligned = true};
    expect_status(KT_ERR_NULL, kt_op_add_launch_param(NULL, "g", 16, make_p, &s));
    expect_status(KT_ERR_NULL, kt_op_add_launch_param(op, "g", 16, NULL, &s));
    expect_status(KT_ERR_UNKNOWN_CANDIDATE, kt_op_add_launch_param(op, "nope", 16, make_p, &s));
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_op_add_launch_param(op, "copy", 16, make_p, &s));
    assert_non_null(strstr(kt_last_error(), "'copy' is a native candidate"));
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_op_add_launch_param(op, "g", 0, make_p, &s));
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_op_add_launch_param(op, "g", 1025, make_p, &s));
    /* 2048 bytes in all, each parameter at a 64-byte offset */
    ok(kt_op_add_launch_param(op, "g", 1000, make_p, &s)); /* bytes 0..999 */
    ok(kt_op_add_launch_param(op, "g", 1024, make_p, &s)); /* 1024..2047 */
    expect_status(KT_ERR_LIMIT, kt_op_add_launch_param(op, "g", 1, make_p, &s));
    assert_non_null(strstr(kt_last_error(), "2048 bytes"));
    /* at most 8 parameters */
    sp = stamp_space();
    ok(kt_op_add_variants(op, "h", sp, stamp_cl, "stamp", NULL, 0));
    kt_space_destroy(sp);
    for (int i = 0; i < 8; i++) ok(kt_op_add_launch_param(op, "h", 8, make_p, &s));
    expect_status(KT_ERR_LIMIT, kt_op_add_launch_param(op, "h", 8, make_p, &s));
    /* an op with launch parameters has at most 64 arguments */
    for (int i = 3; i < 64; i++) {
        char name[16];
        snprintf(name, sizeof name, "x%d", i);
        ok(kt_op_add_scalar(op, name, KT_TYPE_I32));
    }
    expect_status(KT_ERR_LIMIT, kt_op_add_scalar(op, "x64", KT_TYPE_I32));
    assert_non_null(strstr(kt_last_error(), "at most 64 arguments"));
    kt_op_destroy(op);

    /* once the op is frozen (its first call), nothing more */
    op = NULL;
    ok(kt_op_create(ctx, "lp-frozen", &op));
    ok(kt_op_add_buffer(op, "out", KT_TYPE_I32, KT_WRITE_ONLY));
    ok(kt_op_add_scalar(op, "n", KT_TYPE_I32));
    ok(kt_op_add_buffer(op, "in", KT_TYPE_I32, KT_READ_ONLY));
    ok(kt_op_add_native(op, "copy", host_copy, NULL));
    sp = stamp_space();
    ok(kt_op_add_variants(op, "g", sp, stamp_cl, "stamp", NULL, 0));
    kt_space_destroy(sp);
    ok(kt_op_force(op, "copy"));
    int32_t in[E] = {1, 2, 3, 4, 5, 6, 7, 8}, out[E];
    kt_arg args[] = {kt_arg_buf(out, sizeof out), kt_arg_i32(E), kt_arg_buf(in, sizeof in)};
    ok(kt_op_call(op, args, 3));
    expect_status(KT_ERR_STATE, kt_op_add_launch_param(op, "g", 16, make_p, &s));
    kt_op_destroy(op);
    kt_context_destroy(ctx);
}

int main(int argc, char **argv) {
    snprintf(artifacts, sizeof artifacts, "/tmp/kt-lparams-XXXXXX");
    if (mkdtemp(artifacts) == NULL) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values_reach_the_kernel),
        cmocka_unit_test(test_refusal_fails_the_group),
        cmocka_unit_test(test_isolated_op_runs_the_group_here),
        cmocka_unit_test(test_c_backend_refuses_the_group),
        cmocka_unit_test(test_api_refusals),
    };
    int rc = kt_run_cases(argc, argv, tests, NULL, NULL);
    char rm[300];
    snprintf(rm, sizeof rm, "rm -rf '%s'", artifacts);
    if (system(rm) != 0 && rc == 0) rc = 1;
    return rc;
}
