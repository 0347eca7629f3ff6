/*
 * test-devcheck.c - validation through a backend's checks on the device (ABI 9: digest and
 * all_close). A backend table wraps the C backend's methods but says its buffers are not host
 * memory, so the core treats them as a device's: it reads them back with buffer_copy, or asks
 * the backend's digest and all_close, which this table computes on the (host) memory behind
 * them and counts. The tests pin down what the core does with them: a candidate that passes is
 * not read back at all; one the device does not vouch for is read back and named element by
 * element exactly as before; a write into a read-only input is seen through the digest; and a
 * device that cannot check leaves the host to do it, with the same verdicts.
 */
#include "helpers.h"

#include <kerntune/backend.h>
#include <kerntune/cache.h>
#include <kerntune/decision.h>
#include <kerntune/inputs.h>
#include <kerntune/validation.h>

#include <math.h>
#include <stdbool.h>

#define N 64

static kt_backend checking;                 /* the C backend's table, as a device with checks */
static atomic_int reads_back, digests, closes; /* device-to-host copies; check calls */
static atomic_int digest_fails, close_says_no; /* switches */

static kt_status counting_copy(void *state, size_t device, void *dst, const void *src, size_t bytes, kt_copy_dir dir,
                               char *err, size_t errlen) {
    if (dir == KT_COPY_DEVICE_TO_HOST) atomic_fetch_add(&reads_back, 1);
    return kt_backend_c()->buffer_copy(state, device, dst, src, bytes, dir, err, errlen);
}

/* The digest the ABI asks for, on the memory behind the "device" buffer: FNV-1a of the bytes. */
static kt_status host_digest(void *state, size_t device, const void *buffer, size_t bytes, uint64_t *out, char *err,
                             size_t errlen) {
    (void)state, (void)device;
    atomic_fetch_add(&digests, 1);
    if (atomic_load(&digest_fails)) {
        snprintf(err, errlen, "this device cannot digest");
        return KT_ERR_BACKEND;
    }
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < bytes; i++) h = (h ^ ((const unsigned char *)buffer)[i]) * 0x100000001b3ull;
    *out = h;
    return KT_OK;
}

/* all_close's rule for f32 (the only float type these ops use) and equal bytes for the rest. */
static kt_status host_all_close(void *state, size_t device, kt_type elem, const void *actual, const void *expected,
                                size_t count, double atol, double rtol, int *close, char *err, size_t errlen) {
    (void)state, (void)device, (void)err, (void)errlen;
    atomic_fetch_add(&closes, 1);
    *close = 0;
    if (atomic_load(&close_says_no)) return KT_OK;
    if (elem != KT_TYPE_F32) {
        *close = memcmp(actual, expected, count * kt_type_size(elem)) == 0;
        return KT_OK;
    }
    const float *a = actual, *e = expected;
    int bad = 0;
    for (size_t i = 0; i < count; i++) bad |= !(fabs((double)a[i] - (double)e[i]) <= atol + rtol * fabs((double)e[i]));
    *close = !bad;
    return KT_OK;
}

/* A context with the checking backend registered (with its checks, or as an ABI 8 backend
 * without them), the counters reset; *dev receives its device. */
static kt_context *checking_context(bool with_checks, size_t *dev) {
    checking = *kt_backend_c();
    checking.name = "checking";
    checking.buffer_copy = counting_copy;
    checking.caps = 0; /* its buffers are a "device's": read back through buffer_copy */
    checking.digest = with_checks ? host_digest : NULL;
    checking.all_close = with_checks ? host_all_close : NULL;
    atomic_store(&reads_back, 0), atomic_store(&digests, 0), atomic_store(&closes, 0);
    kt_context *ctx = test_context(2);
    ok(kt_context_set_cache(ctx, "off"));
    ok(kt_context_add_backend(ctx, &checking));
    *dev = (size_t)-1;
    for (size_t i = 0; i < kt_context_device_count(ctx); i++)
        if (strcmp(kt_device_backend(kt_context_device(ctx, i)), "checking") == 0) *dev = i;
    assert_true(*dev != (size_t)-1);
    return ctx;
}

/* ---- y = 2 x, four ways --------------------------------------------------------------------- */

static void twice(const kt_arg *args) {
    const float *x = args[0].ptr;
    float *y = args[1].ptr;
    for (size_t i = 0; i < args[1].bytes / sizeof *y; i++) y[i] = 2.0f * x[i];
}
static int right(const kt_arg *args, size_t nargs, void *user) {
    (void)nargs, (void)user;
    twice(args);
    return 0;
}
static int off_at_5(const kt_arg *args, size_t nargs, void *user) { /* element 5 one too large */
    (void)nargs, (void)user;
    twice(args);
    ((float *)args[1].ptr)[5] += 1.0f;
    return 0;
}
static int writes_x(const kt_arg *args, size_t nargs, void *user) { /* right, but writes its input */
    (void)nargs, (void)user;
    twice(args);
    ((float *)args[0].ptr)[0] = 99.0f;
    return 0;
}

static float x[N], y[N];

/* Op "twice" (x: f32 ReadOnly, y: f32 WriteOnly) on dev, inputs cloned (so that the input a
 * candidate wrote into is put back): "ref" (the default, so the reference), "good", "off" and
 * "writer". */
static kt_op *twice_op(kt_context *ctx, size_t dev) {
    kt_op *op = NULL;
    ok(kt_op_create(ctx, "twice", &op));
    ok(kt_op_set_device(op, dev));
    ok(kt_op_set_inputs(op, KT_INPUTS_CLONE));
    ok(kt_op_add_buffer(op, "x", KT_TYPE_F32, KT_READ_ONLY));
    ok(kt_op_add_buffer(op, "y", KT_TYPE_F32, KT_WRITE_ONLY));
    ok(kt_op_add_native(op, "ref", right, NULL));
    ok(kt_op_add_native(op, "good", right, NULL));
    ok(kt_op_add_native(op, "off", off_at_5, NULL));
    ok(kt_op_add_native(op, "writer", writes_x, NULL));
    ok(kt_op_set_default(op, "ref"));
    for (int i = 0; i < N; i++) x[i] = (float)i, y[i] = -1.0f;
    return op;
}
#define TWICE_ARGS ((kt_arg[]){kt_arg_buf(x, sizeof x), kt_arg_buf(y, sizeof y)})

/* Tunes the op once and checks the verdicts, which never depend on where the checking ran. */
static void tune_and_check_verdicts(kt_op *op) {
    ok(kt_op_call(op, TWICE_ARGS, 2));
    for (int i = 0; i < N; i++) assert_true(y[i] == 2.0f * (float)i);
    const kt_decision *d = NULL;
    ok(kt_op_decision(op, TWICE_ARGS, 2, &d));
    assert_true(kt_decision_validated(d));
    assert_int_equal(kt_decision_outcome(d, 0), KT_OUTCOME_MEASURED);
    assert_int_equal(kt_decision_outcome(d, 1), KT_OUTCOME_MEASURED);
    assert_int_equal(kt_decision_outcome(d, 2), KT_OUTCOME_INVALID);
    assert_string_equal(kt_decision_message(d, 2), "output 'y' element 5: expected 10, got 11 (atol 1e-06, rtol 0.0001)");
    assert_int_equal(kt_decision_outcome(d, 3), KT_OUTCOME_INVALID);
    assert_string_equal(kt_decision_message(d, 3), "wrote into read-only argument 'x'");
}

/* With the checks, a validation run reads back only what fails: the reference's output once
 * (kept for a later diagnostic) and "off"'s output to name its element; nothing of "good" and
 * nothing to hash x. Without them (the same table as an ABI 8 backend), x is read back for its
 * hash at the start and after every validation run, and every output is read back. */
static void test_passing_candidates_are_not_read_back(void **state) {
    (void)state;
    size_t dev;
    kt_context *ctx = checking_context(true, &dev);
    tune_and_check_verdicts(twice_op(ctx, dev));
    assert_int_equal(atomic_load(&reads_back), 2);
    /* x at the start, after the reference, and after each of the three validation runs */
    assert_int_equal(atomic_load(&digests), 5);
    assert_int_equal(atomic_load(&closes), 2); /* good and off; writer failed on its input first */
    kt_context_destroy(ctx);

    ctx = checking_context(false, &dev);
    tune_and_check_verdicts(twice_op(ctx, dev));
    /* x 5 times as above; y: the reference's, good's and off's (writer stops at its input) */
    assert_int_equal(atomic_load(&reads_back), 5 + 3);
    assert_int_equal(atomic_load(&digests), 0);
    assert_int_equal(atomic_load(&closes), 0);
    kt_context_destroy(ctx);
}

/* A device that never vouches for an output (all_close answers 0, as for a misaligned one) costs
 * a read back per output and changes no verdict: the host compares, and "good" passes there. */
static void test_device_that_cannot_say_leaves_it_to_the_host(void **state) {
    (void)state;
    size_t dev;
    kt_context *ctx = checking_context(true, &dev);
    atomic_store(&close_says_no, 1);
    tune_and_check_verdicts(twice_op(ctx, dev));
    atomic_store(&close_says_no, 0);
    assert_int_equal(atomic_load(&reads_back), 1 + 2); /* the reference's y, good's and off's */
    assert_int_equal(atomic_load(&closes), 2);
    kt_context_destroy(ctx);
}

/* A device whose digest fails at the start checks nothing for that tuning: the host hashes x and
 * compares every output, with the same verdicts, and all_close is never asked. */
static void test_failed_digest_falls_back_to_the_host(void **state) {
    (void)state;
    size_t dev;
    kt_context *ctx = checking_context(true, &dev);
    atomic_store(&digest_fails, 1);
    tune_and_check_verdicts(twice_op(ctx, dev));
    atomic_store(&digest_fails, 0);
    assert_int_equal(atomic_load(&digests), 1); /* the first, failed */
    assert_int_equal(atomic_load(&closes), 0);
    assert_int_equal(atomic_load(&reads_back), 5 + 3);
    kt_context_destroy(ctx);
}

/* ---- ABI 17: the directory for a backend's own builds ----------------------------------------- */

static char given_dir[4096];
static atomic_int dirs_given;
static void record_dir(void *state, const char *dir) {
    (void)state;
    snprintf(given_dir, sizeof given_dir, "%s", dir);
    atomic_fetch_add(&dirs_given, 1);
}

/* A backend is given the context's artifact directory when it is registered, and the new one
 * whenever it changes; an ABI 16 backend with the same table is never asked. */
static void test_backend_gets_the_artifact_dir(void **state) {
    (void)state;
    atomic_store(&dirs_given, 0);
    checking = *kt_backend_c();
    checking.name = "checking";
    checking.set_cache_dir = record_dir;
    kt_context *ctx = test_context(1);
    ok(kt_context_set_cache(ctx, "off"));
    ok(kt_context_add_backend(ctx, &checking));
    assert_int_equal(atomic_load(&dirs_given), 1);
    assert_string_equal(given_dir, kt_context_artifact_dir(ctx));
    ok(kt_context_set_artifact_dir(ctx, "/nonexistent/kerntune-artifacts"));
    assert_int_equal(atomic_load(&dirs_given), 2);
    assert_string_equal(given_dir, "/nonexistent/kerntune-artifacts");
    kt_context_destroy(ctx);
    checking.abi_version = 16;
    ctx = test_context(1);
    ok(kt_context_add_backend(ctx, &checking));
    ok(kt_context_set_artifact_dir(ctx, "/elsewhere"));
    assert_int_equal(atomic_load(&dirs_given), 2);
    kt_context_destroy(ctx);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backend_gets_the_artifact_dir),
        cmocka_unit_test(test_passing_candidates_are_not_read_back),
        cmocka_unit_test(test_device_that_cannot_say_leaves_it_to_the_host),
        cmocka_unit_test(test_failed_digest_falls_back_to_the_host),
    };
    return kt_run_cases(argc, argv, tests, NULL, NULL);
}
