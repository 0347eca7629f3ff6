/*
 * test-safety.c - argument safety while tuning: in-place buffers, accumulating outputs,
 * benchmark hooks, CLONE and GENERATED inputs, returned outputs, and validation.
 *
 * Every candidate of an op here computes the same bits by the same arithmetic, at a cost set by
 * design, so after the first call the caller's buffers must equal one plain launch exactly.
 */
#include "helpers.h"

#include <kerntune/decision.h>
#include <kerntune/inputs.h>
#include <kerntune/validation.h>

#include <math.h>
#include <stdbool.h>
#include <time.h>

#define N 64

static kt_context *ctx_measure(void) { return test_context(3); }

/* ---- in place: v *= s ------------------------------------------------------------------------ */

static int scale(const kt_arg *args, size_t nargs, void *user) {
    (void)nargs;
    float *v = args[0].ptr;
    size_t n = args[0].bytes / sizeof *v;
    do_work((unsigned)(uintptr_t)user);
    for (size_t i = 0; i < n; i++) v[i] *= args[1].f32;
    return 0;
}

static kt_op *scale_op(kt_context *ctx, const char *name) {
    kt_op *op = NULL;
    ok(kt_op_create(ctx, name, &op));
    ok(kt_op_add_buffer(op, "v", KT_TYPE_F32, KT_READ_WRITE));
    ok(kt_op_add_scalar(op, "s", KT_TYPE_F32));
    static const char *names[] = {"s1", "s2", "s3", "s4", "s5"};
    static const unsigned work[] = {10, 3, 1, 5, 20};
    for (int i = 0; i < 5; i++) ok(kt_op_add_native(op, names[i], scale, (void *)(uintptr_t)work[i]));
    return op;
}

static void test_inplace_scale(void **state) {
    (void)state;
    kt_context *ctx = ctx_measure();
    kt_op *op = scale_op(ctx, "scale");
    float v[N], v0[N], expect[N];
    for (int i = 0; i < N; i++) v[i] = v0[i] = (float)i * 0.37f - 3.0f;
    kt_arg args[] = {kt_arg_buf(v, sizeof v), kt_arg_f32(1.5f)};
    ok(kt_op_call(op, args, 2));
    for (int i = 0; i < N; i++) expect[i] = v0[i] * 1.5f;
    assert_memory_equal(v, expect, sizeof v); /* one launch, not 5 candidates x runs */
    const kt_decision *d = NULL;
    ok(kt_op_decision(op, args, 2, &d));
    assert_string_equal(kt_op_candidate_name(op, kt_decision_winner(d)), "s3");
    assert_true(kt_decision_validated(d));
    for (size_t c = 0; c < 5; c++) assert_int_equal(kt_decision_outcome(d, c), KT_OUTCOME_MEASURED);
    /* Snapshot of v plus the reference's copy of its output. */
    assert_int_equal(kt_decision_peak_extra_bytes(d), 2 * sizeof v);
    ok(kt_op_call(op, args, 2)); /* later calls are plain launches */
    for (int i = 0; i < N; i++) expect[i] *= 1.5f;
    assert_memory_equal(v, expect, sizeof v);
    kt_context_destroy(ctx);
}

/* Protect mode without validation holds exactly the ReadWrite buffers' size extra. */
static void test_protect_peak_is_readwrite_total(void **state) {
    (void)state;
    kt_context *ctx = ctx_measure();
    kt_op *op = NULL;
    ok(kt_op_create(ctx, "peak", &op));
    ok(kt_op_add_buffer(op, "v", KT_TYPE_F32, KT_READ_WRITE));
    ok(kt_op_add_scalar(op, "s", KT_TYPE_F32));
    ok(kt_op_add_buffer(op, "w", KT_TYPE_F32, KT_READ_WRITE));
    ok(kt_op_add_buffer(op, "ro", KT_TYPE_F64, KT_READ_ONLY));
    ok(kt_op_add_native(op, "a", scale, (void *)1));
    ok(kt_op_add_native(op, "b", scale, (void *)2));
    ok(kt_op_set_validation(op, 0));
    float v[N], w[3 * N];
    double ro[1000] = {0};
    for (int i = 0; i < N; i++) v[i] = (float)i;
    kt_arg args[] = {kt_arg_buf(v, sizeof v), kt_arg_f32(2), kt_arg_buf(w, sizeof w), kt_arg_buf(ro, sizeof ro)};
    memset(w, 0, sizeof w);
    ok(kt_op_call(op, args, 4));
    const kt_decision *d = NULL;
    ok(kt_op_decision(op, args, 4, &d));
    assert_int_equal(kt_decision_peak_extra_bytes(d), sizeof v + sizeof w);
    for (int i = 0; i < N; i++) assert_true(v[i] == (float)i * 2);
    kt_context_destroy(ctx);
}

/* ---- x += y, and a running-statistics update with two ReadWrite buffers ---------------------- */

static int axpy(const kt_arg *args, size_t nargs, void *user) {
    (void)nargs;
    double *x = args[0].ptr;
    const double *y = args[1].ptr;
    do_work((unsigned)(uintptr_t)user);
    for (size_t i = 0; i < args[0].bytes / sizeof *x; i++) x[i] += y[i];
    return 0;
}

static void test_x_plus_y(void **state) {
    (void)state;
    kt_context *ctx = ctx_measure();
    kt_op *op = NULL;
    ok(kt_op_create(ctx, "xpy", &op));
    ok(kt_op_add_buffer(op, "x", KT_TYPE_F64, KT_READ_WRITE));
    ok(kt_op_add_buffer(op, "y", KT_TYPE_F64, KT_READ_ONLY));
    ok(kt_op_add_native(op, "slow", axpy, (void *)10));
    ok(kt_op_add_native(op, "fast", axpy, (void *)1));
    double x[N], y[N], y0[N], expect[N];
    for (int i = 0; i < N; i++) x[i] = 1, y[i] = y0[i] = i * 0.5, expect[i] = 1 + i * 0.5;
    kt_arg args[] = {kt_arg_buf(x, sizeof x), kt_arg_buf(y, sizeof y)};
    ok(kt_op_call(op, args, 2));
    assert_memory_equal(x, expect, sizeof x);
    assert_memory_equal(y, y0, sizeof y);
    kt_context_destroy(ctx);
}

static int running_stats(const kt_arg *args, size_t nargs, void *user) {
    (void)nargs;
    float *mean = args[0].ptr, *var = args[1].ptr;
    const float *x = args[2].ptr;
    do_work((unsigned)(uintptr_t)user);
    for (size_t i = 0; i < args[0].bytes / sizeof *mean; i++) {
        mean[i] = 0.9f * mean[i] + 0.1f * x[i];
        var[i] = 0.9f * var[i] + 0.1f * x[i] * x[i];
    }
    return 0;
}

static void test_running_statistics(void **state) {
    (void)state;
    kt_context *ctx = ctx_measure();
    kt_op *op = NULL;
    ok(kt_op_create(ctx, "stats", &op));
    ok(kt_op_add_buffer(op, "mean", KT_TYPE_F32, KT_READ_WRITE));
    ok(kt_op_add_buffer(op, "var", KT_TYPE_F32, KT_READ_WRITE));
    ok(kt_op_add_buffer(op, "x", KT_TYPE_F32, KT_READ_ONLY));
    ok(kt_op_add_native(op, "a", running_stats, (void *)5));
    ok(kt_op_add_native(op, "b", running_stats, (void *)1));
    ok(kt_op_add_native(op, "c", running_stats, (void *)12));
    float mean[N], var[N], x[N], em[N], ev[N];
    for (int i = 0; i < N; i++) {
        mean[i] = 0.5f, var[i] = 1.0f, x[i] = (float)i / 7;
        em[i] = 0.9f * 0.5f + 0.1f * x[i];
        ev[i] = 0.9f * 1.0f + 0.1f * x[i] * x[i];
    }
    kt_arg args[] = {kt_arg_buf(mean, sizeof mean), kt_arg_buf(var, sizeof var), kt_arg_buf(x, sizeof x)};
    ok(kt_op_call(op, args, 3));
    assert_memory_equal(mean, em, sizeof mean);
    assert_memory_equal(var, ev, sizeof var);
    kt_context_destroy(ctx);
}

/* ---- accumulating output --------------------------------------------------------------------- */

static int accumulate(const kt_arg *args, size_t nargs, void *user) {
    (void)nargs;
    int32_t *out = args[0].ptr;
    const int32_t *a = args[1].ptr;
    do_work((unsigned)(uintptr_t)user);
    for (size_t i = 0; i < args[0].bytes / sizeof *out; i++) out[i] += 2 * a[i];
    return 0;
}

static void test_accumulate_reset(void **state) {
    (void)state;
    kt_context *ctx = ctx_measure();
    kt_op *op = NULL;
    ok(kt_op_create(ctx, "acc", &op));
    ok(kt_op_add_buffer(op, "out", KT_TYPE_I32, KT_WRITE_ONLY));
    ok(kt_op_add_buffer(op, "a", KT_TYPE_I32, KT_READ_ONLY));
    ok(kt_op_set_accumulate(op, 0, 0));
    ok(kt_op_add_native(op, "slow", accumulate, (void *)10));
    ok(kt_op_add_native(op, "fast", accumulate, (void *)1));
    int32_t out[N] = {0}, a[N], expect[N];
    for (int i = 0; i < N; i++) a[i] = i - 9, expect[i] = 2 * (i - 9);
    kt_arg args[] = {kt_arg_buf(out, sizeof out), kt_arg_buf(a, sizeof a)};
    ok(kt_op_call(op, args, 2));
    assert_memory_equal(out, expect, sizeof out);
    /* A tuned call is a plain launch: no reset. */
    for (int i = 0; i < N; i++) out[i] = 5, expect[i] = 5 + 2 * (i - 9);
    ok(kt_op_call(op, args, 2));
    assert_memory_equal(out, expect, sizeof out);
    expect_status(KT_ERR_NULL, kt_op_set_accumulate(NULL, 0, 0));
    kt_context_destroy(ctx);
}

/* ---- validation -------------------------------------------------------------------------------- */

typedef struct partial {
    size_t from, to; /* elements written, as fractions of 4: [from/4, to/4) */
    unsigned work;
    float value_at;  /* index written with NaN (when nan is set) */
    int nan;
    int off_by_one;  /* writes out[last] wrong by one ulp-ish amount */
} partial;

static int write_range(const kt_arg *args, size_t nargs, void *user) {
    (void)nargs;
    const partial *p = user;
    float *out = args[0].ptr;
    const float *in = args[1].ptr;
    size_t n = args[0].bytes / sizeof *out;
    do_work(p->work);
    for (size_t i = n * p->from / 4; i < n * p->to / 4; i++) out[i] = in[i] * 3.0f + 1.0f;
    if (p->nan) out[(size_t)p->value_at] = NAN;
    if (p->off_by_one) out[n - 1] += 0.5f;
    return 0;
}

static kt_op *range_op(kt_context *ctx, const char *name) {
    kt_op *op = NULL;
    ok(kt_op_create(ctx, name, &op));
    ok(kt_op_add_buffer(op, "out", KT_TYPE_F32, KT_WRITE_ONLY));
    ok(kt_op_add_buffer(op, "in", KT_TYPE_F32, KT_READ_ONLY));
    return op;
}

static float in_data[N], out_data[N];

static kt_arg *range_args(void) {
    static kt_arg a[2];
    for (int i = 0; i < N; i++) in_data[i] = (float)i;
    a[0] = kt_arg_buf(out_data, sizeof out_data);
    a[1] = kt_arg_buf(in_data, sizeof in_data);
    return a;
}

static const kt_decision *decided(kt_op *op, kt_arg *args) {
    const kt_decision *d = NULL;
    ok(kt_op_decision(op, args, kt_op_arg_count(op), &d));
    return d;
}

/* Two fast candidates each write half the output; run one after the other on the same buffer
 * they would look complete. Poisoning makes each fail on its own. */
static void test_halves_fail_validation(void **state) {
    (void)state;
    kt_context *ctx = ctx_measure();
    kt_op *op = range_op(ctx, "halves");
    static partial full = {0, 4, 10, 0, 0, 0}, lo = {0, 2, 1, 0, 0, 0}, hi = {2, 4, 1, 0, 0, 0};
    ok(kt_op_add_native(op, "full", write_range, &full)); /* first added: the reference */
    ok(kt_op_add_native(op, "lo", write_range, &lo));
    ok(kt_op_add_native(op, "hi", write_range, &hi));
    kt_arg *args = range_args();
    ok(kt_op_call(op, args, 2));
    const kt_decision *d = decided(op, args);
    assert_string_equal(kt_op_candidate_name(op, kt_decision_winner(d)), "full");
    assert_int_equal(kt_decision_outcome(d, 1), KT_OUTCOME_INVALID);
    assert_int_equal(kt_decision_outcome(d, 2), KT_OUTCOME_INVALID);
    assert_string_equal(kt_decision_message(d, 1), "output 'out' element 32: expected 97, got poison (left unwritten)");
    assert_string_equal(kt_decision_message(d, 2), "output 'out' element 0: expected 1, got poison (left unwritten)");
    for (int i = 0; i < N; i++) assert_true(out_data[i] == in_data[i] * 3.0f + 1.0f);
    kt_context_destroy(ctx);
}

static void test_nan_unwritten_and_tolerance(void **state) {
    (void)state;
    kt_context *ctx = ctx_measure();
    kt_op *op = range_op(ctx, "nan");
    static partial ref = {0, 4, 10, 0, 0, 0}, nan = {0, 4, 1, 5, 1, 0}, close = {0, 4, 1, 0, 0, 1};
    ok(kt_op_add_native(op, "ref", write_range, &ref));
    ok(kt_op_add_native(op, "nan", write_range, &nan));
    ok(kt_op_add_native(op, "close", write_range, &close));
    ok(kt_op_set_reference(op, "ref"));
    kt_arg *args = range_args();
    ok(kt_op_call(op, args, 2));
    const kt_decision *d = decided(op, args);
    assert_int_equal(kt_decision_outcome(d, 1), KT_OUTCOME_INVALID);
    assert_non_null(strstr(kt_decision_message(d, 1), "output 'out' element 5: expected 16, got nan"));
    /* 190 + 0.5 is within rtol 1e-4 * 190 + 1e-6? No: 0.5 > 0.019. */
    assert_int_equal(kt_decision_outcome(d, 2), KT_OUTCOME_INVALID);
    assert_non_null(strstr(kt_decision_message(d, 2), "element 63: expected 190, got 190.5 (atol 1e-06, rtol 0.0001)"));
    kt_context_destroy(ctx);

    /* With a looser tolerance the close candidate passes (and wins, being faster). */
    ctx = ctx_measure();
    op = range_op(ctx, "loose");
    ok(kt_op_add_native(op, "ref", write_range, &ref));
    ok(kt_op_add_native(op, "close", write_range, &close));
    ok(kt_op_set_tolerance(op, 0.0, 0.01));
    ok(kt_op_call(op, args, 2));
    d = decided(op, args);
    assert_int_equal(kt_decision_outcome(d, 1), KT_OUTCOME_MEASURED);
    assert_string_equal(kt_op_candidate_name(op, kt_decision_winner(d)), "close");
    kt_context_destroy(ctx);
}

static int skip_last(const kt_arg *args, size_t nargs, void *user) {
    (void)nargs, (void)user;
    int64_t *out = args[0].ptr;
    size_t n = args[0].bytes / sizeof *out;
    for (size_t i = 0; i + 1 < n; i++) out[i] = (int64_t)i * 3;
    return 0;
}

static int all_ints(const kt_arg *args, size_t nargs, void *user) {
    (void)nargs;
    int64_t *out = args[0].ptr;
    size_t n = args[0].bytes / sizeof *out;
    do_work((unsigned)(uintptr_t)user);
    for (size_t i = 0; i < n; i++) out[i] = (int64_t)i * 3 + (user == (void *)2 && i == 7);
    return 0;
}

/* Integers: the unwritten last element and an off-by-one are caught; a reference function. */
static int ints_reference(const kt_arg *args, size_t nargs, void *user, kt_result *result) {
    (void)nargs, (void)user;
    assert_null(result);
    int64_t *out = args[0].ptr;
    for (size_t i = 0; i < args[0].bytes / sizeof *out; i++) out[i] = (int64_t)i * 3;
    return 0;
}

static void test_integers_and_reference_fn(void **state) {
    (void)state;
    kt_context *ctx = ctx_measure();
    kt_op *op = NULL;
    ok(kt_op_create(ctx, "ints", &op));
    ok(kt_op_add_buffer(op, "out", KT_TYPE_I64, KT_WRITE_ONLY));
    ok(kt_op_add_native(op, "skip_last", skip_last, NULL));
    ok(kt_op_add_native(op, "off_by_one", all_ints, (void *)2));
    ok(kt_op_add_native(op, "right", all_ints, (void *)10));
    ok(kt_op_set_reference_fn(op, ints_reference, NULL));
    int64_t out[N];
    kt_arg args[] = {kt_arg_buf(out, sizeof out)};
    ok(kt_op_call(op, args, 1));
    const kt_decision *d = decided(op, args);
    assert_string_equal(kt_decision_message(d, 0), "output 'out' element 63: expected 189, got poison (left unwritten)");
    assert_string_equal(kt_decision_message(d, 1), "output 'out' element 7: expected 21, got 22");
    assert_string_equal(kt_op_candidate_name(op, kt_decision_winner(d)), "right");
    for (int i = 0; i < N; i++) assert_int_equal(out[i], i * 3);
    kt_context_destroy(ctx);
}

/* Every candidate wrong: ALL_FAILED with each diagnostic. */
static void test_all_invalid(void **state) {
    (void)state;
    kt_context *ctx = ctx_measure();
    kt_op *op = NULL;
    ok(kt_op_create(ctx, "allbad", &op));
    ok(kt_op_add_buffer(op, "out", KT_TYPE_I64, KT_WRITE_ONLY));
    ok(kt_op_add_native(op, "skip_last", skip_last, NULL));
    ok(kt_op_add_native(op, "off_by_one", all_ints, (void *)2));
    ok(kt_op_set_reference_fn(op, ints_reference, NULL));
    int64_t out[8];
    kt_arg args[] = {kt_arg_buf(out, sizeof out)};
    expect_status(KT_ERR_ALL_FAILED, kt_op_call(op, args, 1));
    assert_non_null(strstr(kt_last_error(), "'skip_last' output 'out' element 7: expected 21, got poison"));
    assert_non_null(strstr(kt_last_error(), "'off_by_one' output 'out' element 7: expected 21, got 22"));
    kt_context_destroy(ctx);
}

/* A candidate that writes into a ReadOnly buffer is disqualified (CLONE mode keeps the caller's
 * copy safe). */
static int writes_input(const kt_arg *args, size_t nargs, void *user) {
    float *in = args[1].ptr;
    in[3] = -1;
    return write_range(args, nargs, user);
}

static void test_readonly_written(void **state) {
    (void)state;
    kt_context *ctx = ctx_measure();
    kt_op *op = range_op(ctx, "rowrite");
    static partial full = {0, 4, 10, 0, 0, 0}, fast = {0, 4, 1, 0, 0, 0};
    ok(kt_op_add_native(op, "full", write_range, &full));
    ok(kt_op_add_native(op, "cheater", writes_input, &fast));
    ok(kt_op_set_inputs(op, KT_INPUTS_CLONE));
    kt_arg *args = range_args();
    ok(kt_op_call(op, args, 2));
    const kt_decision *d = decided(op, args);
    assert_int_equal(kt_decision_outcome(d, 1), KT_OUTCOME_INVALID);
    assert_string_equal(kt_decision_message(d, 1), "wrote into read-only argument 'in'");
    assert_true(in_data[3] == 3.0f);
    kt_context_destroy(ctx);
}

/* A reference that rejects the arguments: tuned without validation, and the decision says so. */
static void test_reference_rejects(void **state) {
    (void)state;
    kt_context *ctx = ctx_measure();
    kt_op *op = range_op(ctx, "refrejects");
    static partial full = {0, 4, 10, 0, 0, 0}, lo = {0, 2, 1, 0, 0, 0};
    ok(kt_op_add_native(op, "full", write_range, &full));
    ok(kt_op_add_native(op, "lo", write_range, &lo));
    ok(kt_op_require_align(op, "full", 0, 1u << 20));
    kt_arg *args = range_args();
    ok(kt_op_call(op, args, 2));
    const kt_decision *d = decided(op, args);
    assert_false(kt_decision_validated(d));
    assert_string_equal(kt_op_candidate_name(op, kt_decision_winner(d)), "lo");
    kt_context_destroy(ctx);
}

/* ---- candidates that return their output ---------------------------------------------------- */

static atomic_int live_results;

static void release_counted(void *p, void *user) {
    (void)user;
    atomic_fetch_sub(&live_results, 1);
    free(p);
}

static int make_squares(const kt_arg *args, size_t nargs, void *user, kt_result *result) {
    (void)nargs;
    int64_t n = args[0].i;
    do_work((unsigned)(uintptr_t)user);
    double *out = malloc((size_t)n * sizeof *out);
    if (out == NULL) return 1;
    for (int64_t i = 0; i < n; i++) out[i] = (double)(i * i);
    atomic_fetch_add(&live_results, 1);
    *result = (kt_result){out, (size_t)n * sizeof *out, release_counted, NULL};
    return 0;
}

static int make_wrong(const kt_arg *args, size_t nargs, void *user, kt_result *result) {
    int rc = make_squares(args, nargs, user, result);
    ((double *)result->ptr)[2] = 5;
    return rc;
}

static void test_returned_output(void **state) {
    (void)state;
    kt_context *ctx = ctx_measure();
    kt_op *op = NULL;
    ok(kt_op_create(ctx, "squares", &op));
    ok(kt_op_add_scalar(op, "n", KT_TYPE_I64));
    ok(kt_op_key_arg(op, 0, KT_BUCKET_EXACT));
    ok(kt_op_set_result(op, KT_TYPE_F64));
    expect_status(KT_ERR_STATE, kt_op_add_native(op, "plain", cand_fn, NULL));
    kt_op *plain = NULL;
    ok(kt_op_create(ctx, "plain", &plain));
    ok(kt_op_add_native(plain, "p", cand_fn, NULL));
    expect_status(KT_ERR_STATE, kt_op_set_result(plain, KT_TYPE_F64));
    expect_status(KT_ERR_STATE, kt_op_call_result(plain, NULL, 0, &(kt_result){0}));
    ok(kt_op_add_native_result(op, "slow", make_squares, (void *)10));
    ok(kt_op_add_native_result(op, "wrong", make_wrong, (void *)1));
    ok(kt_op_add_native_result(op, "fast", make_squares, (void *)2));
    kt_arg args[] = {kt_arg_i64(20)};
    expect_status(KT_ERR_STATE, kt_op_call(op, args, 1));
    kt_result r;
    ok(kt_op_call_result(op, args, 1, &r));
    /* Every output made while tuning was released; only the caller's is alive. */
    assert_int_equal(atomic_load(&live_results), 1);
    assert_int_equal(r.bytes, 20 * sizeof(double));
    for (int i = 0; i < 20; i++) assert_true(((double *)r.ptr)[i] == i * i);
    const kt_decision *d = decided(op, args);
    assert_string_equal(kt_op_candidate_name(op, kt_decision_winner(d)), "fast");
    assert_int_equal(kt_decision_outcome(d, 1), KT_OUTCOME_INVALID);
    assert_string_equal(kt_decision_message(d, 1), "returned output element 2: expected 4, got 5 (atol 1e-12, rtol 1e-09)");
    kt_result_release(&r);
    assert_null(r.ptr);
    assert_int_equal(atomic_load(&live_results), 0);
    ok(kt_op_call_result(op, args, 1, &r)); /* a hit */
    assert_int_equal(atomic_load(&live_results), 1);
    kt_result_release(&r);
    kt_result_release(NULL);
    kt_context_destroy(ctx);
}

/* ---- CLONE and GENERATED: the caller's buffers untouched while tuning -------------------------- */

typedef struct watcher {
    float *caller;      /* the caller's ReadWrite buffer */
    float caller0[N];   /* its contents before the call */
    int runs, saw_caller_ptr, caller_changed;
    float first_seen;   /* element 0 as the first run saw it */
    int seen;
} watcher;

static int watched_scale(const kt_arg *args, size_t nargs, void *user) {
    watcher *w = user;
    float *v = args[0].ptr;
    if (v == w->caller) {
        w->saw_caller_ptr++;
    } else {
        w->runs++;
        if (memcmp(w->caller, w->caller0, sizeof w->caller0) != 0) w->caller_changed++;
    }
    if (!w->seen++) w->first_seen = v[0];
    return scale(args, nargs, (void *)1);
}

static void run_watched(kt_inputs inputs, watcher *w, float *v) {
    kt_context *ctx = ctx_measure();
    kt_op *op = NULL;
    ok(kt_op_create(ctx, "watched", &op));
    ok(kt_op_add_buffer(op, "v", KT_TYPE_F32, KT_READ_WRITE));
    ok(kt_op_add_scalar(op, "s", KT_TYPE_F32));
    ok(kt_op_add_native(op, "a", watched_scale, w));
    ok(kt_op_add_native(op, "b", watched_scale, w));
    ok(kt_op_set_inputs(op, inputs));
    ok(kt_op_set_generator(op, 0, KT_GEN_CONSTANT, 3.0));
    for (int i = 0; i < N; i++) v[i] = w->caller0[i] = (float)i + 0.25f;
    w->caller = v;
    kt_arg args[] = {kt_arg_buf(v, N * sizeof *v), kt_arg_f32(2.0f)};
    ok(kt_op_call(op, args, 2));
    const kt_decision *d = decided(op, args);
    /* CLONE: a copy of v (in a 64-byte alignment window) plus its pristine copy, plus the
     * reference output. GENERATED: same. */
    assert_int_equal(kt_decision_peak_extra_bytes(d), 3 * N * sizeof *v + 64);
    kt_context_destroy(ctx);
}

static void test_clone_and_generated_untouched(void **state) {
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        static watcher w;
        memset(&w, 0, sizeof w);
        float v[N];
        run_watched(mode ? KT_INPUTS_GENERATED : KT_INPUTS_CLONE, &w, v);
        assert_true(w.runs >= 2 * 4);       /* validation/warm-up and 3 runs each */
        assert_int_equal(w.saw_caller_ptr, 1); /* only the final launch */
        assert_int_equal(w.caller_changed, 0);
        /* CLONE runs see the caller's data; GENERATED runs see the generator's 3.0. */
        assert_true(w.first_seen == (mode ? 3.0f : 0.25f));
        for (int i = 0; i < N; i++) assert_true(v[i] == ((float)i + 0.25f) * 2.0f);
    }
}

/* GENERATED: random inputs are the same for one seed, and f16/bf16 constants encode right. */
static float seen_random[2];
static uint16_t seen_half[2];

static int record_inputs(const kt_arg *args, size_t nargs, void *user) {
    (void)nargs, (void)user;
    const float *r = args[0].ptr;
    const uint16_t *h = args[1].ptr, *b = args[2].ptr;
    if (r != NULL && seen_random[0] == 0) seen_random[0] = r[0], seen_random[1] = r[1];
    seen_half[0] = h[0];
    seen_half[1] = b[0];
    return 0;
}

static void test_generated_values(void **state) {
    (void)state;
    float first[2] = {0, 0};
    for (int round = 0; round < 2; round++) {
        kt_context *ctx = ctx_measure();
        kt_op *op = NULL;
        ok(kt_op_create(ctx, "gen", &op));
        ok(kt_op_add_buffer(op, "r", KT_TYPE_F32, KT_READ_ONLY));
        ok(kt_op_add_buffer(op, "h", KT_TYPE_F16, KT_READ_ONLY));
        ok(kt_op_add_buffer(op, "b", KT_TYPE_BF16, KT_READ_ONLY));
        ok(kt_op_add_native(op, "rec", record_inputs, NULL));
        ok(kt_op_set_inputs(op, KT_INPUTS_GENERATED));
        ok(kt_op_set_generator(op, 1, KT_GEN_CONSTANT, 1.5));
        ok(kt_op_set_generator(op, 2, KT_GEN_CONSTANT, -2.0));
        ok(kt_op_set_seed(op, 42));
        seen_random[0] = 0;
        /* Sizes only: the caller passes no data at all, and nothing runs on its arguments. */
        kt_arg args[] = {kt_arg_buf(NULL, 16), kt_arg_buf(NULL, 8), kt_arg_buf(NULL, 8)};
        ok(kt_op_tune(op, args, 3));
        assert_int_equal(kt_op_tune_count(op), 1);
        ok(kt_op_tune(op, args, 3)); /* already decided */
        assert_int_equal(kt_op_tune_count(op), 1);
        assert_int_equal(seen_half[0], 0x3e00); /* 1.5 in f16 */
        assert_int_equal(seen_half[1], 0xc000); /* -2 in bf16 */
        assert_true(seen_random[0] >= -1 && seen_random[0] < 1 && seen_random[0] != seen_random[1]);
        if (round == 0) memcpy(first, seen_random, sizeof first);
        else assert_memory_equal(first, seen_random, sizeof first);
        kt_context_destroy(ctx);
    }
}

/* ---- benchmark hooks ------------------------------------------------------------------------ */

typedef struct hooks {
    float scratch[N];
    int pre, post, runs_on_scratch, runs_on_caller;
    int fail_pre_at; /* fail the pre-hook on this call number (1-based), 0: never */
} hooks;

static int pre_hook(kt_arg *args, size_t nargs, void *user) {
    (void)nargs;
    hooks *h = user;
    if (++h->pre == h->fail_pre_at) return 7;
    memcpy(h->scratch, args[0].ptr, args[0].bytes); /* substitute a scratch copy */
    args[0].ptr = h->scratch;
    return 0;
}

static int post_hook(kt_arg *args, size_t nargs, void *user) {
    (void)nargs;
    hooks *h = user;
    h->post++;
    assert_ptr_equal(args[0].ptr, h->scratch);
    return 0;
}

static hooks *hook_state;

static int hooked_scale(const kt_arg *args, size_t nargs, void *user) {
    if (args[0].ptr == hook_state->scratch) hook_state->runs_on_scratch++;
    else hook_state->runs_on_caller++;
    return scale(args, nargs, user);
}

/* An op scaling v by s in place with two candidates (a slow, b fast) and the hooks above. */
static kt_op *hooked_op(kt_context *ctx, const char *name, hooks *h) {
    kt_op *op = NULL;
    ok(kt_op_create(ctx, name, &op));
    ok(kt_op_add_buffer(op, "v", KT_TYPE_F32, KT_READ_WRITE));
    ok(kt_op_add_scalar(op, "s", KT_TYPE_F32));
    ok(kt_op_add_native(op, "a", hooked_scale, (void *)1));
    ok(kt_op_add_native(op, "b", hooked_scale, (void *)8));
    ok(kt_op_set_bench_hooks(op, pre_hook, post_hook, h));
    return op;
}

static void test_bench_hooks(void **state) {
    (void)state;
    static hooks h;
    memset(&h, 0, sizeof h);
    hook_state = &h;
    h.fail_pre_at = 2;
    kt_context *ctx = ctx_measure();
    kt_op *op = hooked_op(ctx, "hooked", &h);
    float v[N];
    for (int i = 0; i < N; i++) v[i] = (float)i;
    kt_arg args[] = {kt_arg_buf(v, sizeof v), kt_arg_f32(4.0f)};
    /* The pre-hook fails once: the call fails, the caller's data is intact, and nothing is
     * recorded, so the next call tunes again. */
    expect_status(KT_ERR_HOOK, kt_op_call(op, args, 2));
    assert_non_null(strstr(kt_last_error(), "pre-benchmark hook returned 7"));
    for (int i = 0; i < N; i++) assert_true(v[i] == (float)i);
    assert_int_equal(kt_op_tune_count(op), 0);
    memset(&h, 0, sizeof h);
    ok(kt_op_call(op, args, 2));
    assert_int_equal(kt_op_tune_count(op), 1);
    for (int i = 0; i < N; i++) assert_true(v[i] == (float)i * 4.0f);
    /* 2 candidates x (validation/reference run + 3 measured runs) = 8 tuning runs, all hooked. */
    assert_int_equal(h.pre, 8);
    assert_int_equal(h.post, 8);
    assert_int_equal(h.runs_on_scratch, 8);
    assert_int_equal(h.runs_on_caller, 1); /* the final launch, unhooked */
    ok(kt_op_call(op, args, 2));
    assert_int_equal(h.pre, 8); /* dispatched calls never run hooks */
    assert_int_equal(h.runs_on_caller, 2);
    kt_context_destroy(ctx);
}

/* A failure while tuning names the call that tuned: kt_op_tune, kt_op_call or
 * kt_op_call_result, never kt_op_call for all three. */
static void test_messages_name_the_call(void **state) {
    (void)state;
    static hooks h;
    kt_context *ctx = ctx_measure();
    kt_op *op = hooked_op(ctx, "named", &h);
    float v[N];
    for (int i = 0; i < N; i++) v[i] = (float)i;
    kt_arg args[] = {kt_arg_buf(v, sizeof v), kt_arg_f32(4.0f)};
    memset(&h, 0, sizeof h);
    hook_state = &h;
    h.fail_pre_at = 1;
    expect_status(KT_ERR_HOOK, kt_op_tune(op, args, 2));
    assert_string_equal(kt_last_error(), "kt_op_tune(op 'named'): the pre-benchmark hook returned 7");
    memset(&h, 0, sizeof h);
    h.fail_pre_at = 1;
    expect_status(KT_ERR_HOOK, kt_op_call(op, args, 2));
    assert_string_equal(kt_last_error(), "kt_op_call(op 'named'): the pre-benchmark hook returned 7");
    kt_op *empty = NULL;
    ok(kt_op_create(ctx, "empty", &empty));
    ok(kt_op_add_scalar(empty, "s", KT_TYPE_F32));
    expect_status(KT_ERR_NO_CANDIDATES, kt_op_tune(empty, args + 1, 1));
    assert_string_equal(kt_last_error(), "kt_op_tune(op 'empty'): the op has no candidates; add one with kt_op_add_native");
    kt_context_destroy(ctx);
}

/* Nothing but the candidate call is timed: a pre-hook that sleeps 10 ms and a 4 MB restore
 * before every run of a candidate that does almost nothing must not show in its time. */
static int sleepy_pre(kt_arg *args, size_t nargs, void *user) {
    (void)args, (void)nargs, (void)user;
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
    return 0;
}

static int touch_one(const kt_arg *args, size_t nargs, void *user) {
    (void)nargs, (void)user;
    ((unsigned char *)args[0].ptr)[0] ^= 1;
    return 0;
}

static void test_only_the_call_is_timed(void **state) {
    (void)state;
    kt_context *ctx = ctx_measure();
    kt_op *op = NULL;
    ok(kt_op_create(ctx, "untimed", &op));
    ok(kt_op_add_buffer(op, "big", KT_TYPE_U8, KT_READ_WRITE));
    ok(kt_op_add_native(op, "touch", touch_one, NULL));
    ok(kt_op_set_bench_hooks(op, sleepy_pre, NULL, NULL));
    size_t bytes = 4u << 20;
    unsigned char *big = calloc(bytes, 1);
    kt_arg args[] = {kt_arg_buf(big, bytes)};
    ok(kt_op_call(op, args, 1));
    const kt_decision *d = decided(op, args);
    assert_int_equal(kt_decision_runs(d, 0), 3);
    assert_true(kt_decision_time_ns(d, 0) < 1e6); /* far below the 10 ms the hook sleeps */
    assert_int_equal(big[0], 1);                  /* and the caller saw one launch */
    free(big);
    kt_context_destroy(ctx);
}

/* ---- regressions from review ------------------------------------------------------------- */

static int fail_post(kt_arg *args, size_t nargs, void *user) {
    (void)args, (void)nargs;
    return ++*(int *)user == 3 ? 9 : 0;
}

/* A tuning that stops on an error mid-way leaves the caller's ReadWrite data as it was. */
static void test_error_restores_readwrite(void **state) {
    (void)state;
    kt_context *ctx = ctx_measure();
    kt_op *op = scale_op(ctx, "restore");
    int posts = 0;
    ok(kt_op_set_bench_hooks(op, NULL, fail_post, &posts));
    float v[N], v0[N];
    for (int i = 0; i < N; i++) v[i] = v0[i] = (float)i + 1;
    kt_arg args[] = {kt_arg_buf(v, sizeof v), kt_arg_f32(2.0f)};
    expect_status(KT_ERR_HOOK, kt_op_call(op, args, 2));
    assert_memory_equal(v, v0, sizeof v);
    ok(kt_op_call(op, args, 2)); /* tuned again from the right data */
    for (int i = 0; i < N; i++) assert_true(v[i] == v0[i] * 2.0f);
    kt_context_destroy(ctx);
}

static atomic_int bad_align_launches;

static int needs_4096(const kt_arg *args, size_t nargs, void *user) {
    if (((uintptr_t)args[0].ptr & 4095) != 0) atomic_fetch_add(&bad_align_launches, 1);
    return scale(args, nargs, user);
}

/* Copies keep the caller's alignment, so an alignment requirement holds on them too. */
static void test_copies_keep_alignment(void **state) {
    (void)state;
    float *mem = aligned_alloc(4096, 2 * 4096);
    for (int mode = 0; mode < 2; mode++) {
        for (int shift = 0; shift < 2; shift++) {
            kt_context *ctx = ctx_measure();
            kt_op *op = NULL;
            ok(kt_op_create(ctx, "aligned", &op));
            ok(kt_op_add_buffer(op, "v", KT_TYPE_F32, KT_READ_WRITE));
            ok(kt_op_add_scalar(op, "s", KT_TYPE_F32));
            ok(kt_op_add_native(op, "any", scale, (void *)3));
            ok(kt_op_add_native(op, "paged", needs_4096, (void *)1));
            ok(kt_op_require_align(op, "paged", 0, 4096));
            ok(kt_op_set_inputs(op, mode ? KT_INPUTS_GENERATED : KT_INPUTS_CLONE));
            float *v = mem + shift; /* 4096-aligned, or 4 bytes past */
            for (int i = 0; i < N; i++) v[i] = 1;
            kt_arg args[] = {kt_arg_buf(v, N * sizeof *v), kt_arg_f32(2.0f)};
            ok(kt_op_call(op, args, 2));
            const kt_decision *d = decided(op, args);
            assert_int_equal(kt_decision_outcome(d, 1), shift ? KT_OUTCOME_REJECTED : KT_OUTCOME_MEASURED);
            kt_context_destroy(ctx);
        }
    }
    assert_int_equal(atomic_load(&bad_align_launches), 0);
    free(mem);
}

/* A reference that writes its input is not used as the reference; in CLONE a candidate that
 * writes its input does not spoil the input for the candidates after it. */
static void test_input_writers_do_not_spoil_others(void **state) {
    (void)state;
    static partial full = {0, 4, 10, 0, 0, 0}, fast = {0, 4, 1, 0, 0, 0};
    kt_arg *args = range_args();
    for (int mode = 0; mode < 2; mode++) {
        kt_context *ctx = ctx_measure();
        kt_op *op = range_op(ctx, "writers");
        if (mode == 0) { /* the reference itself writes its input */
            ok(kt_op_add_native(op, "cheater", writes_input, &full));
            ok(kt_op_add_native(op, "honest", write_range, &fast));
            ok(kt_op_set_inputs(op, KT_INPUTS_CLONE));
        } else { /* a cheater runs before two honest candidates */
            ok(kt_op_add_native(op, "full", write_range, &full));
            ok(kt_op_add_native(op, "cheater", writes_input, &fast));
            ok(kt_op_add_native(op, "honest", write_range, &fast));
            ok(kt_op_set_inputs(op, KT_INPUTS_CLONE));
        }
        ok(kt_op_call(op, args, 2));
        const kt_decision *d = decided(op, args);
        size_t cheater = mode == 0 ? 0 : 1, honest = mode == 0 ? 1 : 2;
        assert_int_equal(kt_decision_outcome(d, cheater), KT_OUTCOME_INVALID);
        assert_string_equal(kt_decision_message(d, cheater), "wrote into read-only argument 'in'");
        assert_int_equal(kt_decision_outcome(d, honest), KT_OUTCOME_MEASURED);
        assert_int_equal(kt_decision_validated(d), mode == 1);
        assert_string_equal(kt_op_candidate_name(op, kt_decision_winner(d)), "honest");
        assert_true(in_data[3] == 3.0f);
        kt_context_destroy(ctx);
    }
}

/* kt_op_tune never writes the caller's buffers, PROTECT mode included. */
static void test_tune_leaves_buffers_alone(void **state) {
    (void)state;
    kt_context *ctx = ctx_measure();
    kt_op *op = scale_op(ctx, "tuneonly");
    float v[N], v0[N];
    for (int i = 0; i < N; i++) v[i] = v0[i] = (float)i;
    kt_arg args[] = {kt_arg_buf(v, sizeof v), kt_arg_f32(3.0f)};
    ok(kt_op_tune(op, args, 2));
    assert_memory_equal(v, v0, sizeof v);
    assert_int_equal(kt_op_tune_count(op), 1);
    ok(kt_op_call(op, args, 2)); /* a hit: one plain launch */
    for (int i = 0; i < N; i++) assert_true(v[i] == v0[i] * 3.0f);
    assert_int_equal(kt_op_tune_count(op), 1);
    kt_context_destroy(ctx);
}

/* A failing result candidate may leave what it allocated in *result: kerntune releases it,
 * once. */
static int fail_after_alloc(const kt_arg *args, size_t nargs, void *user, kt_result *result) {
    make_squares(args, nargs, user, result);
    return 3;
}

static void test_failing_result_released_once(void **state) {
    (void)state;
    kt_context *ctx = ctx_measure();
    kt_op *op = NULL;
    ok(kt_op_create(ctx, "failres", &op));
    ok(kt_op_add_scalar(op, "n", KT_TYPE_I64));
    ok(kt_op_set_result(op, KT_TYPE_F64));
    ok(kt_op_add_native_result(op, "good", make_squares, (void *)5));
    ok(kt_op_add_native_result(op, "bad", fail_after_alloc, (void *)0));
    kt_arg args[] = {kt_arg_i64(8)};
    kt_result r;
    ok(kt_op_call_result(op, args, 1, &r));
    assert_int_equal(atomic_load(&live_results), 1);
    assert_int_equal(kt_decision_outcome(decided(op, args), 1), KT_OUTCOME_FAILED);
    kt_result_release(&r);
    assert_int_equal(atomic_load(&live_results), 0);
    kt_context_destroy(ctx);
}

/* ---- an output compared as a sum: a reduction's partial sums, one per block ------------------ */

typedef struct partials {
    int blocks; /* partial sums written into part[0 .. blocks) */
    float off;  /* added to part[0]: a wrong total */
} partials;

static int partial_sums(const kt_arg *args, size_t nargs, void *user) {
    (void)nargs;
    const partials *p = user;
    float *part = args[0].ptr;
    const float *x = args[1].ptr;
    size_t n = args[1].bytes / sizeof *x;
    for (int b = 0; b < p->blocks; b++) part[b] = 0;
    for (size_t i = 0; i < n; i++) part[i % (size_t)p->blocks] += x[i];
    part[0] += p->off;
    return 0;
}

/* Candidates that split the same total over 4 and 8 blocks (whole numbers: every sum exact),
 * and one whose total is 1 too large. */
static const kt_decision *reduce(kt_context *ctx, const char *name, bool as_sum, float *part, float *x) {
    static partials b4 = {4, 0}, b8 = {8, 0}, wrong = {8, 1};
    kt_op *op = NULL;
    ok(kt_op_create(ctx, name, &op));
    ok(kt_op_add_buffer(op, "part", KT_TYPE_F32, KT_READ_WRITE));
    ok(kt_op_add_buffer(op, "x", KT_TYPE_F32, KT_READ_ONLY));
    ok(kt_op_add_native(op, "b4", partial_sums, &b4));
    ok(kt_op_add_native(op, "b8", partial_sums, &b8));
    ok(kt_op_add_native(op, "wrong", partial_sums, &wrong));
    ok(kt_op_set_reference(op, "b4"));
    if (as_sum) ok(kt_op_set_compare(op, 0, KT_COMPARE_SUM));
    for (int i = 0; i < 16; i++) part[i] = 0;
    for (int i = 0; i < 1024; i++) x[i] = (float)(i % 7);
    kt_arg args[] = {kt_arg_buf(part, 16 * sizeof *part), kt_arg_buf(x, 1024 * sizeof *x)};
    ok(kt_op_call(op, args, 2));
    return decided(op, args);
}

static void test_compare_sum(void **state) {
    (void)state;
    static float part[16], x[1024];
    kt_context *ctx = ctx_measure();
    /* element by element, 8 blocks' partial sums are not 4 blocks' */
    const kt_decision *d = reduce(ctx, "elements", false, part, x);
    assert_int_equal(kt_decision_outcome(d, 1), KT_OUTCOME_INVALID);
    assert_string_equal(kt_decision_message(d, 1), "output 'part' element 0: expected 766, got 379 (atol 1e-06, rtol 0.0001)");
    /* as a sum, they are the same total (3067); the wrong one is 1 off, beyond 1e-6 + 1e-4 * 3067 */
    d = reduce(ctx, "sums", true, part, x);
    assert_int_equal(kt_decision_outcome(d, 0), KT_OUTCOME_MEASURED);
    assert_int_equal(kt_decision_outcome(d, 1), KT_OUTCOME_MEASURED);
    assert_int_equal(kt_decision_outcome(d, 2), KT_OUTCOME_INVALID);
    assert_string_equal(kt_decision_message(d, 2),
                        "output 'part': sum 3068, expected 3067 (compared as a sum; atol 1e-06, rtol 0.0001 of 3067)");
    kt_context_destroy(ctx);
}

static int says_why(const kt_arg *args, size_t nargs, void *user) {
    (void)args, (void)nargs, (void)user;
    return kt_candidate_failed("no %s today", "luck");
}

static int fails_quietly(const kt_arg *args, size_t nargs, void *user) {
    (void)args, (void)nargs, (void)user;
    return 5;
}

/* A native that fails through kt_candidate_failed gives its own reason as its diagnostic; one
 * that returns a number is described by it; the one that works wins and runs once on the
 * caller's buffer. */
static void test_candidate_failed_says_why(void **state) {
    (void)state;
    kt_context *ctx = ctx_measure();
    kt_op *op = range_op(ctx, "reasons");
    static partial full = {0, 4, 1, 0, 0, 0};
    ok(kt_op_add_native(op, "full", write_range, &full));
    ok(kt_op_add_native(op, "says", says_why, NULL));
    ok(kt_op_add_native(op, "quiet", fails_quietly, NULL));
    assert_int_equal(kt_candidate_failed("%s", "x"), KT_CANDIDATE_FAILED_SAID);
    kt_arg *args = range_args();
    ok(kt_op_call(op, args, 2));
    const kt_decision *d = decided(op, args);
    assert_string_equal(kt_op_candidate_name(op, kt_decision_winner(d)), "full");
    assert_int_equal(kt_decision_outcome(d, 1), KT_OUTCOME_FAILED);
    assert_string_equal(kt_decision_message(d, 1), "no luck today");
    assert_int_equal(kt_decision_outcome(d, 2), KT_OUTCOME_FAILED);
    assert_string_equal(kt_decision_message(d, 2), "returned 5 in its validation run");
    for (int i = 0; i < N; i++) assert_true(out_data[i] == in_data[i] * 3.0f + 1.0f);
    kt_context_destroy(ctx);
}

typedef struct stopper {
    kt_op *op;
    int told, stop_at;
} stopper;

static void stop_when_told(const kt_decision *d, size_t u, void *user) {
    (void)d, (void)u;
    stopper *s = user;
    if (++s->told == s->stop_at) ok(kt_op_stop_disagreement(s->op));
}

/* A caller that judges disagreement itself (the command's fleet) stops a tuning from its unit
 * function: no unit is admitted after, nothing is decided (KT_ERR_DISAGREEMENT); the next call
 * tunes afresh, the stop forgotten. */
static void test_stop_disagreement(void **state) {
    (void)state;
    kt_context *ctx = ctx_measure();
    kt_op *op = range_op(ctx, "stopped");
    static partial p[4] = {{0, 4, 1, 0, 0, 0}, {0, 4, 2, 0, 0, 0}, {0, 4, 3, 0, 0, 0}, {0, 4, 4, 0, 0, 0}};
    const char *names[] = {"a", "b", "c", "d"};
    for (int i = 0; i < 4; i++) ok(kt_op_add_native(op, names[i], write_range, &p[i]));
    stopper s = {op, 0, 2};
    ok(kt_context_set_unit_fn(ctx, stop_when_told, &s));
    kt_arg *args = range_args();
    expect_status(KT_ERR_DISAGREEMENT, kt_op_call(op, args, 2));
    assert_non_null(strstr(kt_last_error(), "kt_op_stop_disagreement"));
    assert_int_equal(s.told, 2); /* the third and fourth were never admitted */
    const kt_decision *d = NULL;
    expect_status(KT_ERR_NOT_FOUND, kt_op_decision(op, args, 2, &d));
    s.stop_at = 0; /* never again */
    ok(kt_op_call(op, args, 2));
    assert_int_equal(s.told, 6);
    for (int i = 0; i < N; i++) assert_true(out_data[i] == in_data[i] * 3.0f + 1.0f);
    expect_status(KT_ERR_NULL, kt_op_stop_disagreement(NULL));
    kt_context_destroy(ctx);
}

/* What the verify function was shown: per call, part's expected and actual sums, and whether
 * x (ReadOnly) came as NULL with its byte size. */
typedef struct verify_log {
    int calls;
    double expected_sum[8], actual_sum[8];
    bool x_hidden;
} verify_log;

static int sums_equal(const kt_arg *expected, const kt_arg *actual, size_t nargs, void *user, char *msg, size_t len) {
    verify_log *log = user;
    if (nargs != 2 || expected[0].bytes != 16 * sizeof(float) || actual[0].bytes != expected[0].bytes) return 0;
    const float *e = expected[0].ptr, *a = actual[0].ptr;
    double se = 0, sa = 0;
    for (int i = 0; i < 16; i++) se += e[i], sa += a[i];
    if (log->calls < 8) log->expected_sum[log->calls] = se, log->actual_sum[log->calls] = sa;
    log->calls++;
    log->x_hidden = expected[1].ptr == NULL && actual[1].ptr == NULL && actual[1].bytes == 1024 * sizeof(float);
    if (sa == se) return 1;
    snprintf(msg, len, "sums %g and %g", sa, se);
    return 0;
}

/* A verify function decides in place of kerntune's rules: the 8-block partial sums, which
 * differ element by element from the reference's 4, pass it; the one 1 too large fails with the
 * function's own message. It sees the reference's and each candidate's outputs (part) and not
 * the ReadOnly input (x: NULL, with its size); the caller still gets the winner's one launch. */
static void test_verify_fn(void **state) {
    (void)state;
    static float part[16], x[1024];
    static partials b4 = {4, 0}, b8 = {8, 0}, wrong = {8, 1};
    verify_log log = {0};
    kt_context *ctx = ctx_measure();
    kt_op *op = NULL;
    ok(kt_op_create(ctx, "verified", &op));
    ok(kt_op_add_buffer(op, "part", KT_TYPE_F32, KT_READ_WRITE));
    ok(kt_op_add_buffer(op, "x", KT_TYPE_F32, KT_READ_ONLY));
    ok(kt_op_add_native(op, "b4", partial_sums, &b4));
    ok(kt_op_add_native(op, "b8", partial_sums, &b8));
    ok(kt_op_add_native(op, "wrong", partial_sums, &wrong));
    ok(kt_op_set_reference(op, "b4"));
    ok(kt_op_set_verify_fn(op, sums_equal, &log));
    for (int i = 0; i < 16; i++) part[i] = 0;
    for (int i = 0; i < 1024; i++) x[i] = (float)(i % 7);
    kt_arg args[] = {kt_arg_buf(part, 16 * sizeof *part), kt_arg_buf(x, 1024 * sizeof *x)};
    ok(kt_op_call(op, args, 2));
    const kt_decision *d = decided(op, args);
    assert_int_equal(kt_decision_outcome(d, 0), KT_OUTCOME_MEASURED);
    assert_int_equal(kt_decision_outcome(d, 1), KT_OUTCOME_MEASURED);
    assert_int_equal(kt_decision_outcome(d, 2), KT_OUTCOME_INVALID);
    assert_string_equal(kt_decision_message(d, 2), "sums 3068 and 3067");
    assert_int_equal(log.calls, 2); /* b8 and wrong; the reference is not compared with itself */
    assert_true(log.expected_sum[0] == 3067 && log.expected_sum[1] == 3067);
    assert_true((log.actual_sum[0] == 3067 && log.actual_sum[1] == 3068) || (log.actual_sum[0] == 3068 && log.actual_sum[1] == 3067));
    assert_true(log.x_hidden);
    double total = 0;
    for (int i = 0; i < 16; i++) total += part[i];
    assert_true(total == 3067); /* the winner's one launch on the caller's buffer */
    expect_status(KT_ERR_STATE, kt_op_set_verify_fn(op, NULL, NULL)); /* frozen */
    expect_status(KT_ERR_NULL, kt_op_set_verify_fn(NULL, sums_equal, NULL));
    kt_context_destroy(ctx);
}

static void test_safety_misuse(void **state) {
    (void)state;
    kt_context *ctx = ctx_measure();
    kt_op *op = range_op(ctx, "misuse");
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_op_set_accumulate(op, 1, 0)); /* ReadOnly */
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_op_set_inputs(op, (kt_inputs)5));
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_op_set_generator(op, 0, (kt_gen)3, 0));
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_op_set_generator(op, 7, KT_GEN_RANDOM, 0));
    expect_status(KT_ERR_NULL, kt_op_set_generator_fn(op, 0, NULL, NULL));
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_op_set_tolerance(op, -1, 0));
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_op_set_compare(op, 1, KT_COMPARE_SUM)); /* ReadOnly */
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_op_set_compare(op, 0, (kt_compare)2));
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_op_set_result(op, KT_TYPE_BUFFER));
    expect_status(KT_ERR_UNKNOWN_CANDIDATE, kt_op_set_reference(op, "nope"));
    expect_status(KT_ERR_NULL, kt_op_call_result(op, NULL, 0, NULL));
    kt_result r = {(void *)1, 5, NULL, NULL};
    expect_status(KT_ERR_NULL, kt_op_call_result(NULL, NULL, 0, &r));
    assert_null(r.ptr); /* emptied on failure */
    kt_context_destroy(ctx);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inplace_scale),
        cmocka_unit_test(test_protect_peak_is_readwrite_total),
        cmocka_unit_test(test_x_plus_y),
        cmocka_unit_test(test_running_statistics),
        cmocka_unit_test(test_accumulate_reset),
        cmocka_unit_test(test_halves_fail_validation),
        cmocka_unit_test(test_verify_fn),
        cmocka_unit_test(test_candidate_failed_says_why),
        cmocka_unit_test(test_stop_disagreement),
        cmocka_unit_test(test_nan_unwritten_and_tolerance),
        cmocka_unit_test(test_integers_and_reference_fn),
        cmocka_unit_test(test_all_invalid),
        cmocka_unit_test(test_readonly_written),
        cmocka_unit_test(test_reference_rejects),
        cmocka_unit_test(test_returned_output),
        cmocka_unit_test(test_clone_and_generated_untouched),
        cmocka_unit_test(test_generated_values),
        cmocka_unit_test(test_bench_hooks),
        cmocka_unit_test(test_messages_name_the_call),
        cmocka_unit_test(test_only_the_call_is_timed),
        cmocka_unit_test(test_error_restores_readwrite),
        cmocka_unit_test(test_copies_keep_alignment),
        cmocka_unit_test(test_input_writers_do_not_spoil_others),
        cmocka_unit_test(test_tune_leaves_buffers_alone),
        cmocka_unit_test(test_failing_result_released_once),
        cmocka_unit_test(test_compare_sum),
        cmocka_unit_test(test_safety_misuse),
    };
    return kt_run_cases(argc, argv, tests, NULL, NULL);
}
