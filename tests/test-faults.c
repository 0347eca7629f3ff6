/*
 * test-faults.c - failures injected into the backend's buffer methods, as SQLite tests its VFS:
 * a backend table registered with kt_context_add_backend wraps the C backend's methods
 * (kt_backend_c()) and fails the Nth buffer_copy or buffer_fill on demand. A tuning that cannot
 * put the caller's data back before the final launch says so, naming the op and the buffer;
 * whichever copy fails, a call either fails with the injected error or leaves the caller's
 * buffers exactly as one plain launch would.
 */
#include "helpers.h"

#include <kerntune/backend.h>
#include <kerntune/inputs.h>

#define N 16

static kt_backend faulty;                  /* the C backend's table, buffer methods wrapped */
static atomic_int copies, fills;           /* calls so far */
static atomic_int fail_copy, fail_fill;    /* the call to fail (1-based); 0: none */

static kt_status faulty_copy(void *state, size_t device, void *dst, const void *src, size_t bytes, kt_copy_dir dir,
                             char *err, size_t errlen) {
    int n = atomic_fetch_add(&copies, 1) + 1;
    if (n == atomic_load(&fail_copy)) {
        snprintf(err, errlen, "injected failure of buffer_copy #%d", n);
        return KT_ERR_BACKEND;
    }
    return kt_backend_c()->buffer_copy(state, device, dst, src, bytes, dir, err, errlen);
}

static kt_status faulty_fill(void *state, size_t device, void *buffer, size_t bytes, const void *pattern,
                             size_t pattern_bytes, char *err, size_t errlen) {
    int n = atomic_fetch_add(&fills, 1) + 1;
    if (n == atomic_load(&fail_fill)) {
        snprintf(err, errlen, "injected failure of buffer_fill #%d", n);
        return KT_ERR_BACKEND;
    }
    return kt_backend_c()->buffer_fill(state, device, buffer, bytes, pattern, pattern_bytes, err, errlen);
}

/* Arms the wrapper: the copy and fill numbers to fail (0: none), counts reset. */
static void arm(int copy, int fill) {
    atomic_store(&copies, 0), atomic_store(&fills, 0);
    atomic_store(&fail_copy, copy), atomic_store(&fail_fill, fill);
}

/* A context measuring 3 runs per candidate (so the number of buffer calls is the same every
 * time), with the faulty backend registered; *dev receives its device. */
static kt_context *faulty_context(size_t *dev) {
    faulty = *kt_backend_c();
    faulty.name = "faulty";
    faulty.buffer_copy = faulty_copy;
    faulty.buffer_fill = faulty_fill;
    faulty.caps = KT_BACKEND_CAP_HOST_MEMORY; /* no worker: the wrapper lives in this process */
    kt_context *ctx = test_context(3);
    ok(kt_context_add_backend(ctx, &faulty));
    *dev = (size_t)-1;
    for (size_t i = 0; i < kt_context_device_count(ctx); i++)
        if (strcmp(kt_device_backend(kt_context_device(ctx, i)), "faulty") == 0) *dev = i;
    assert_true(*dev != (size_t)-1);
    return ctx;
}

/* ---- in place: v *= s ------------------------------------------------------------------------ */

static int scale(const kt_arg *args, size_t nargs, void *user) {
    (void)nargs;
    float *v = args[0].ptr;
    do_work((unsigned)(uintptr_t)user);
    for (size_t i = 0; i < args[0].bytes / sizeof *v; i++) v[i] *= args[1].f32;
    return 0;
}

static float v[N], v_expect[N];

/* Op "restore" (v: f32 ReadWrite, s: f32) on the faulty device, two candidates computing the
 * same bits; v is reset to its input and v_expect to one plain launch's result. */
static kt_op *scale_op(kt_context *ctx, size_t dev) {
    kt_op *op = NULL;
    ok(kt_op_create(ctx, "restore", &op));
    ok(kt_op_set_device(op, dev));
    ok(kt_op_add_buffer(op, "v", KT_TYPE_F32, KT_READ_WRITE));
    ok(kt_op_add_scalar(op, "s", KT_TYPE_F32));
    ok(kt_op_add_native(op, "slow", scale, (void *)3));
    ok(kt_op_add_native(op, "fast", scale, (void *)1));
    for (int i = 0; i < N; i++) v[i] = (float)i + 0.25f, v_expect[i] = v[i] * 3.0f;
    return op;
}
#define SCALE_ARGS ((kt_arg[]){kt_arg_buf(v, sizeof v), kt_arg_f32(3.0f)})

/* The copies one tuning call makes, counted with nothing failing. */
static int copies_of_one_call(void) {
    size_t dev;
    kt_context *ctx = faulty_context(&dev);
    kt_op *op = scale_op(ctx, dev);
    arm(0, 0);
    ok(kt_op_call(op, SCALE_ARGS, 2));
    assert_memory_equal(v, v_expect, sizeof v);
    int n = atomic_load(&copies);
    kt_context_destroy(ctx);
    return n;
}

/* The last copy of a tuning is the restore of v before the final launch: when it fails, the call
 * fails naming the buffer and the op, and launches nothing on the caller's data; the decision
 * is not kept, so the next call tunes again and gets it right. */
static void test_failed_restore_is_reported(void **state) {
    (void)state;
    int total = copies_of_one_call();
    assert_true(total >= 2); /* the snapshot, the restores */
    size_t dev;
    kt_context *ctx = faulty_context(&dev);
    kt_op *op = scale_op(ctx, dev);
    arm(total, 0);
    expect_status(KT_ERR_BACKEND, kt_op_call(op, SCALE_ARGS, 2));
    char want[256];
    snprintf(want, sizeof want,
             "kt_op_call(op 'restore'): tuning could not restore buffer argument 'v' for the final launch (it may hold a tuning run's data): injected failure of buffer_copy #%d",
             total);
    assert_string_equal(kt_last_error(), want);
    assert_int_equal(atomic_load(&copies), total);
    assert_int_equal(kt_op_tune_count(op), 0);

    for (int i = 0; i < N; i++) v[i] = (float)i + 0.25f;
    arm(0, 0);
    ok(kt_op_call(op, SCALE_ARGS, 2));
    assert_memory_equal(v, v_expect, sizeof v);
    assert_int_equal(kt_op_tune_count(op), 1);
    kt_context_destroy(ctx);
}

/* Every copy of a tuning call, failed in turn: the call fails with the injected error, or
 * succeeds with the caller's buffer exactly as one plain launch leaves it. */
static void test_every_copy_failure(void **state) {
    (void)state;
    int total = copies_of_one_call();
    for (int n = 1; n <= total; n++) {
        size_t dev;
        kt_context *ctx = faulty_context(&dev);
        kt_op *op = scale_op(ctx, dev);
        arm(n, 0);
        kt_status st = kt_op_call(op, SCALE_ARGS, 2);
        char injected[64];
        snprintf(injected, sizeof injected, "injected failure of buffer_copy #%d", n);
        if (st == KT_OK) {
            if (memcmp(v, v_expect, sizeof v) != 0) fail_msg("copy #%d of %d failed, the call succeeded, v is wrong", n, total);
        } else if (st != KT_ERR_BACKEND || strstr(kt_last_error(), injected) == NULL) {
            fail_msg("copy #%d of %d failed: %s: %s", n, total, kt_status_name(st), kt_last_error());
        }
        kt_context_destroy(ctx);
    }
}

/* ---- accumulating: out += 2 * a ----------------------------------------------------------------- */

static int accumulate(const kt_arg *args, size_t nargs, void *user) {
    (void)nargs;
    int32_t *out = args[0].ptr;
    const int32_t *a = args[1].ptr;
    do_work((unsigned)(uintptr_t)user);
    for (size_t i = 0; i < args[0].bytes / sizeof *out; i++) out[i] += 2 * a[i];
    return 0;
}

/* The last fill of a tuning refills the accumulating output before the final launch: when it
 * fails, the call fails naming that buffer. */
static void test_failed_refill_is_reported(void **state) {
    (void)state;
    int32_t out[N] = {0}, a[N], expect[N];
    for (int i = 0; i < N; i++) a[i] = i - 9, expect[i] = 2 * (i - 9);
    kt_arg args[] = {kt_arg_buf(out, sizeof out), kt_arg_buf(a, sizeof a)};
    int total = 0;
    for (int round = 0; round < 2; round++) {
        size_t dev;
        kt_context *ctx = faulty_context(&dev);
        kt_op *op = NULL;
        ok(kt_op_create(ctx, "acc", &op));
        ok(kt_op_set_device(op, dev));
        ok(kt_op_add_buffer(op, "out", KT_TYPE_I32, KT_WRITE_ONLY));
        ok(kt_op_add_buffer(op, "a", KT_TYPE_I32, KT_READ_ONLY));
        ok(kt_op_set_accumulate(op, 0, 0));
        ok(kt_op_add_native(op, "slow", accumulate, (void *)3));
        ok(kt_op_add_native(op, "fast", accumulate, (void *)1));
        memset(out, 0, sizeof out);
        arm(0, total);
        if (round == 0) { /* count the fills */
            ok(kt_op_call(op, args, 2));
            assert_memory_equal(out, expect, sizeof out);
            total = atomic_load(&fills);
            assert_true(total >= 2);
        } else {
            expect_status(KT_ERR_BACKEND, kt_op_call(op, args, 2));
            char want[256];
            snprintf(want, sizeof want,
                     "kt_op_call(op 'acc'): tuning could not refill accumulating buffer argument 'out' for the final launch (it may hold a tuning run's data): injected failure of buffer_fill #%d",
                     total);
            assert_string_equal(kt_last_error(), want);
        }
        kt_context_destroy(ctx);
    }
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_failed_restore_is_reported),
        cmocka_unit_test(test_every_copy_failure),
        cmocka_unit_test(test_failed_refill_is_reported),
    };
    return kt_run_cases(argc, argv, tests, NULL, NULL);
}
