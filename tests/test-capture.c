/*
 * test-capture.c - a miss of kt_op_call_async whose queue is being captured into a graph
 * (kt_op_set_capture_miss). No GPU: a backend registered with kt_context_add_backend wraps the
 * C backend and declares KT_BACKEND_CAP_ASYNC_LAUNCH; its queue_wait returns KT_ERR_CAPTURING
 * while the test says the queue is being captured, as CUDA's does for a capturing stream.
 *  - REFUSE (the default): KT_ERR_CAPTURING with a message naming the op and the key's arguments
 *    and how to tune ahead; nothing runs, nothing is tuned, the buffers are untouched;
 *  - FALLBACK: the native fallback (else the default) runs on the caller's buffers, the key is
 *    deferred once; once other keys are tuned, the nearest one's native winner runs instead; kt_op_tune_deferred tunes the deferred keys from sizes alone (generated
 *    inputs, whatever the op's inputs mode) and empties the list;
 *  - with a persistent cache the deferred keys outlive the process: a second context on the file
 *    sees them, tunes them, and the file no longer holds them;
 *  - misuse: no native that accepts, an unknown policy, a policy set after the first call.
 */
#include "helpers.h"

#include <kerntune/backend.h>
#include <kerntune/cache.h>
#include <kerntune/device.h>
#include <kerntune/inputs.h>

#include <pthread.h>
#include <sqlite3.h>

#define N 64
#define QUEUE ((kt_queue)(uintptr_t)0x51) /* the backend never dereferences its queues */

static kt_backend capt;         /* the C backend's table, asynchronous, with a capture flag */
static atomic_int capturing;    /* 1: queue_wait refuses, as for a stream being captured */
static atomic_int waits;        /* queue_wait calls */

static kt_status capt_launch_async(void *state, size_t device, void *module, const kt_launch_geometry *g,
                                   const kt_arg *args, size_t nargs, void *queue, char *err, size_t errlen) {
    (void)queue;
    return kt_backend_c()->launch(state, device, module, g, args, nargs, NULL, err, errlen);
}

static kt_status capt_queue_wait(void *state, size_t device, void *queue, char *err, size_t errlen) {
    (void)state, (void)device, (void)queue;
    atomic_fetch_add(&waits, 1);
    if (atomic_load(&capturing)) {
        snprintf(err, errlen, "the test queue is being captured");
        return KT_ERR_CAPTURING;
    }
    return KT_OK;
}

/* Registers the capturing backend with ctx; returns its device. */
static size_t capt_device(kt_context *ctx) {
    capt = *kt_backend_c();
    capt.abi_version = KT_BACKEND_ABI_VERSION;
    capt.name = "capt";
    capt.caps = KT_BACKEND_CAP_HOST_MEMORY | KT_BACKEND_CAP_ASYNC_LAUNCH; /* no worker: it lives in this process */
    capt.launch_async = capt_launch_async;
    capt.queue_wait = capt_queue_wait;
    ok(kt_context_add_backend(ctx, &capt));
    size_t dev = (size_t)-1;
    for (size_t i = 0; i < kt_context_device_count(ctx); i++)
        if (strcmp(kt_device_backend(kt_context_device(ctx, i)), "capt") == 0) dev = i;
    assert_true(dev != (size_t)-1);
    atomic_store(&capturing, 0);
    atomic_store(&waits, 0);
    return dev;
}

/* A candidate that fills the whole buffer with id * 1000 + i, so its output is known exactly. */
typedef struct filler {
    int32_t id;
    unsigned sleep_ms;
    atomic_int calls;
} filler;

static int fill_fn(const kt_arg *args, size_t nargs, void *user) {
    (void)nargs;
    filler *f = user;
    atomic_fetch_add(&f->calls, 1);
    if (f->sleep_ms) {
        struct timespec ts = {0, (long)f->sleep_ms * 1000000L};
        while (nanosleep(&ts, &ts) != 0) {}
    }
    int32_t *out = args[0].ptr;
    for (size_t i = 0; i < args[0].bytes / sizeof *out; i++) out[i] = f->id * 1000 + (int32_t)i;
    return 0;
}

static void expect_filled(const int32_t *out, size_t n, int32_t id) {
    for (size_t i = 0; i < n; i++)
        if (out[i] != id * 1000 + (int32_t)i) fail_msg("element %zu is %d, expected %d", i, out[i], id * 1000 + (int32_t)i);
}

static filler f_slow, f_fast, f_fb;

/* Op `name` (out: i32 buffer ReadWrite, n: i64; key n) on dev: "slow" (sleeps 20 ms, id 1),
 * "fast" (id 2) and "fb" (sleeps 20 ms, id 3), validation off (they differ by design), inputs
 * CLONE (so that tuning from NULL buffers that are read works only on generated inputs). */
static kt_op *capt_op(kt_context *ctx, size_t dev, const char *name) {
    kt_op *op = NULL;
    ok(kt_op_create(ctx, name, &op));
    ok(kt_op_set_validation(op, 0));
    ok(kt_op_add_buffer(op, "out", KT_TYPE_I32, KT_READ_WRITE));
    ok(kt_op_add_scalar(op, "n", KT_TYPE_I64));
    ok(kt_op_key_arg(op, 1, KT_BUCKET_EXACT));
    ok(kt_op_set_device(op, dev));
    ok(kt_op_set_inputs(op, KT_INPUTS_CLONE));
    f_slow = (filler){.id = 1, .sleep_ms = 20};
    f_fast = (filler){.id = 2};
    f_fb = (filler){.id = 3, .sleep_ms = 20};
    ok(kt_op_add_native(op, "slow", fill_fn, &f_slow));
    ok(kt_op_add_native(op, "fast", fill_fn, &f_fast));
    ok(kt_op_add_native(op, "fb", fill_fn, &f_fb));
    return op;
}

static int32_t out[N];
#define ARGS(n) ((kt_arg[]){kt_arg_buf(out, sizeof out), kt_arg_i64(n)})

static int runs(void) { return atomic_load(&f_slow.calls) + atomic_load(&f_fast.calls) + atomic_load(&f_fb.calls); }

/* ---- REFUSE ------------------------------------------------------------------------------------ */

static void test_refuse_by_default(void **state) {
    (void)state;
    kt_context *ctx = test_context(2);
    size_t dev = capt_device(ctx);
    kt_op *op = capt_op(ctx, dev, "cap");
    atomic_store(&capturing, 1);
    memset(out, 0x5a, sizeof out);
    int32_t before[N];
    memcpy(before, out, sizeof out);
    expect_status(KT_ERR_CAPTURING, kt_op_call_async(op, QUEUE, ARGS(40), 2));
    const char *m = kt_last_error();
    assert_non_null(strstr(m, "kt_op_call_async(op 'cap')"));
    assert_non_null(strstr(m, "(out=256 bytes, n=40) has no decision"));
    assert_non_null(strstr(m, "the queue is being captured"));
    assert_non_null(strstr(m, "kt_op_tune"));
    assert_non_null(strstr(m, "KT_INPUTS_GENERATED"));
    assert_non_null(strstr(m, "kt_op_set_capture_miss(op, KT_CAPTURE_MISS_FALLBACK)"));
    assert_memory_equal(out, before, sizeof out); /* untouched */
    assert_int_equal(runs(), 0);
    assert_int_equal(kt_op_tune_count(op), 0);
    assert_int_equal(kt_op_deferred_count(op), 0);
    assert_int_equal(atomic_load(&waits), 1);
    /* the capture over, the same call tunes and runs the winner */
    atomic_store(&capturing, 0);
    ok(kt_op_call_async(op, QUEUE, ARGS(40), 2));
    assert_int_equal(kt_op_tune_count(op), 1);
    expect_filled(out, N, 2);
    kt_context_destroy(ctx);
}

/* The names of the policies and the status. */
static void test_names(void **state) {
    (void)state;
    assert_string_equal(kt_capture_miss_name(KT_CAPTURE_MISS_REFUSE), "refuse");
    assert_string_equal(kt_capture_miss_name(KT_CAPTURE_MISS_FALLBACK), "fallback");
    assert_null(kt_capture_miss_name((kt_capture_miss)7));
    assert_string_equal(kt_status_name(KT_ERR_CAPTURING), "ERR_CAPTURING");
    assert_int_equal(KT_ERR_CAPTURING, 19);
}

/* ---- FALLBACK ---------------------------------------------------------------------------------- */

static void test_fallback_defers_and_tunes_later(void **state) {
    (void)state;
    kt_context *ctx = test_context(2);
    size_t dev = capt_device(ctx);
    kt_op *op = capt_op(ctx, dev, "cap");
    ok(kt_op_set_fallback(op, "fb"));
    ok(kt_op_set_capture_miss(op, KT_CAPTURE_MISS_FALLBACK));
    atomic_store(&capturing, 1);
    memset(out, 0, sizeof out);
    ok(kt_op_call_async(op, QUEUE, ARGS(40), 2));
    expect_filled(out, N, 3); /* the fallback ran on the caller's buffer */
    assert_int_equal(atomic_load(&f_fb.calls), 1);
    assert_int_equal(runs(), 1);
    assert_int_equal(kt_op_deferred_count(op), 1);
    ok(kt_op_call_async(op, QUEUE, ARGS(40), 2)); /* the same key: recorded once */
    ok(kt_op_call_async(op, QUEUE, ARGS(40), 2));
    assert_int_equal(kt_op_deferred_count(op), 1);
    ok(kt_op_call_async(op, QUEUE, ARGS(41), 2)); /* another key */
    assert_int_equal(kt_op_deferred_count(op), 2);
    assert_int_equal(runs(), 4);
    assert_int_equal(kt_op_tune_count(op), 0);
    assert_int_equal(kt_op_decision_count(op), 0);

    /* after the capture: both tuned from sizes (the op's inputs are CLONE: only generated
     * inputs can tune NULL buffers), nothing of the caller's written */
    atomic_store(&capturing, 0);
    memset(out, 0x11, sizeof out);
    int32_t before[N];
    memcpy(before, out, sizeof out);
    size_t tuned = 99;
    ok(kt_op_tune_deferred(op, &tuned));
    assert_int_equal(tuned, 2);
    assert_int_equal(kt_op_deferred_count(op), 0);
    assert_int_equal(kt_op_tune_count(op), 2);
    assert_memory_equal(out, before, sizeof out);
    for (int64_t n = 40; n <= 41; n++) {
        const kt_decision *d = NULL;
        ok(kt_op_decision(op, ARGS(n), 2, &d));
        assert_int_equal(kt_decision_source_of(d), KT_SOURCE_MEASURED);
        assert_string_equal(kt_op_candidate_name(op, kt_decision_winner(d)), "fast");
    }
    /* nothing left: tuning again does nothing */
    ok(kt_op_tune_deferred(op, &tuned));
    assert_int_equal(tuned, 0);
    /* under capture again, the tuned keys hit: the winner runs, no wait, nothing deferred */
    atomic_store(&capturing, 1);
    int w = atomic_load(&waits);
    ok(kt_op_call_async(op, QUEUE, ARGS(41), 2));
    expect_filled(out, N, 2);
    assert_int_equal(atomic_load(&waits), w);
    assert_int_equal(kt_op_deferred_count(op), 0);
    /* a new key under capture: the nearest tuned key's winner (a native: nothing to build) runs
     * instead of the fallback, and the key is deferred as before */
    ok(kt_op_call_async(op, QUEUE, ARGS(44), 2));
    expect_filled(out, N, 2);
    assert_int_equal(kt_op_deferred_count(op), 1);
    assert_int_equal(kt_op_tune_count(op), 2);
    kt_context_destroy(ctx);
}

/* Without a fallback the default runs (declared, else the first); a fallback that rejects the
 * arguments gives way to the default. */
static int below_50(const kt_arg *args, size_t nargs, void *user) {
    (void)nargs, (void)user;
    return args[1].i < 50;
}

static void test_fallback_is_the_default_without_one(void **state) {
    (void)state;
    kt_context *ctx = test_context(2);
    size_t dev = capt_device(ctx);
    kt_op *op = capt_op(ctx, dev, "cap");
    ok(kt_op_set_capture_miss(op, KT_CAPTURE_MISS_FALLBACK));
    atomic_store(&capturing, 1);
    ok(kt_op_call_async(op, QUEUE, ARGS(40), 2));
    expect_filled(out, N, 1); /* the first candidate */
    kt_context_destroy(ctx);

    ctx = test_context(2);
    dev = capt_device(ctx);
    op = capt_op(ctx, dev, "cap");
    ok(kt_op_set_default(op, "fast"));
    ok(kt_op_set_fallback(op, "fb"));
    ok(kt_op_require_fn(op, "fb", below_50, NULL));
    ok(kt_op_set_capture_miss(op, KT_CAPTURE_MISS_FALLBACK));
    atomic_store(&capturing, 1);
    ok(kt_op_call_async(op, QUEUE, ARGS(40), 2));
    expect_filled(out, N, 3); /* the fallback accepts 40 */
    ok(kt_op_call_async(op, QUEUE, ARGS(60), 2));
    expect_filled(out, N, 2); /* ... not 60: the declared default */
    assert_int_equal(kt_op_deferred_count(op), 2);
    kt_context_destroy(ctx);
}

/* Neither the fallback nor the default accepts: KT_ERR_CAPTURING saying so; nothing ran or was
 * deferred. */
static void test_no_native_that_accepts(void **state) {
    (void)state;
    kt_context *ctx = test_context(2);
    size_t dev = capt_device(ctx);
    kt_op *op = capt_op(ctx, dev, "cap");
    ok(kt_op_set_fallback(op, "fb"));
    ok(kt_op_require_fn(op, "fb", below_50, NULL));
    ok(kt_op_require_fn(op, "slow", below_50, NULL)); /* the default: the first */
    ok(kt_op_set_capture_miss(op, KT_CAPTURE_MISS_FALLBACK));
    atomic_store(&capturing, 1);
    memset(out, 0x5a, sizeof out);
    int32_t before[N];
    memcpy(before, out, sizeof out);
    expect_status(KT_ERR_CAPTURING, kt_op_call_async(op, QUEUE, ARGS(60), 2));
    const char *m = kt_last_error();
    assert_non_null(strstr(m, "op 'cap'"));
    assert_non_null(strstr(m, "(out=256 bytes, n=60)"));
    assert_non_null(strstr(m, "neither the fallback candidate ('fb') nor the default candidate ('slow') is a native that accepts"));
    assert_non_null(strstr(m, "kt_op_tune"));
    assert_memory_equal(out, before, sizeof out);
    assert_int_equal(runs(), 0);
    assert_int_equal(kt_op_deferred_count(op), 0);
    kt_context_destroy(ctx);

    /* no fallback set: the message says so */
    ctx = test_context(2);
    dev = capt_device(ctx);
    op = capt_op(ctx, dev, "cap");
    ok(kt_op_require_fn(op, "slow", below_50, NULL));
    ok(kt_op_set_capture_miss(op, KT_CAPTURE_MISS_FALLBACK));
    atomic_store(&capturing, 1);
    expect_status(KT_ERR_CAPTURING, kt_op_call_async(op, QUEUE, ARGS(60), 2));
    assert_non_null(strstr(kt_last_error(), "neither the fallback candidate (none set) nor the default candidate ('slow')"));
    kt_context_destroy(ctx);
}

static void test_set_capture_miss_misuse(void **state) {
    (void)state;
    kt_context *ctx = test_context(2);
    size_t dev = capt_device(ctx);
    kt_op *op = capt_op(ctx, dev, "cap");
    expect_status(KT_ERR_NULL, kt_op_set_capture_miss(NULL, KT_CAPTURE_MISS_FALLBACK));
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_op_set_capture_miss(op, (kt_capture_miss)2));
    assert_non_null(strstr(kt_last_error(), "kt_op_set_capture_miss(op 'cap'): 2 is not"));
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_op_set_capture_miss(op, (kt_capture_miss)-1));
    ok(kt_op_call_async(op, QUEUE, ARGS(40), 2)); /* freezes it */
    expect_status(KT_ERR_STATE, kt_op_set_capture_miss(op, KT_CAPTURE_MISS_FALLBACK));
    assert_non_null(strstr(kt_last_error(), "kt_op_set_capture_miss(op 'cap'): the op was already called"));
    expect_status(KT_ERR_NULL, kt_op_tune_deferred(NULL, NULL));
    assert_int_equal(kt_op_deferred_count(NULL), 0);
    kt_context_destroy(ctx);
}

/* Threads missing the same key under capture at once record it once. */
typedef struct worker_arg {
    kt_op *op;
    int32_t buf[N];
    atomic_int failures;
} worker_arg;

static void *capture_worker(void *p) {
    worker_arg *a = p;
    int32_t buf[N];
    for (int k = 0; k < 50; k++)
        if (kt_op_call_async(a->op, QUEUE, (kt_arg[]){kt_arg_buf(buf, sizeof buf), kt_arg_i64(40 + k % 2)}, 2) != KT_OK)
            atomic_fetch_add(&a->failures, 1);
    return NULL;
}

static void test_threads_record_once(void **state) {
    (void)state;
    kt_context *ctx = test_context(2);
    size_t dev = capt_device(ctx);
    kt_op *op = capt_op(ctx, dev, "cap");
    ok(kt_op_set_fallback(op, "fast"));
    ok(kt_op_set_capture_miss(op, KT_CAPTURE_MISS_FALLBACK));
    atomic_store(&capturing, 1);
    worker_arg a = {.op = op};
    pthread_t t[4];
    for (int i = 0; i < 4; i++) assert_int_equal(pthread_create(&t[i], NULL, capture_worker, &a), 0);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    assert_int_equal(atomic_load(&a.failures), 0);
    assert_int_equal(atomic_load(&f_fast.calls), 200);
    assert_int_equal(kt_op_deferred_count(op), 2);
    kt_context_destroy(ctx);
}

/* ---- persistence ------------------------------------------------------------------------------- */

static char dir[64], db[128];

static int setup(void **state) {
    (void)state;
    return temp_cache_dir(dir, sizeof dir, db, sizeof db, "capture");
}

static int teardown(void **state) {
    (void)state;
    return remove_tree(dir);
}

/* The number of rows of the cache file that sql counts. */
static int64_t sql_count(const char *sql) {
    sqlite3 *s = NULL;
    assert_int_equal(sqlite3_open(db, &s), SQLITE_OK);
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(s, sql, -1, &q, NULL) != SQLITE_OK) fail_msg("%s: %s", sql, sqlite3_errmsg(s));
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    int64_t n = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    sqlite3_close(s);
    return n;
}

/* Runs `kerntune ARGS --cache <db>` and reads its standard output into buf; it must succeed. */
static void cli_output(const char *args, char *buf, size_t len) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' %s --cache '%s'", KT_CLI, args, db);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(buf, 1, len - 1, p);
    buf[n] = '\0';
    assert_int_equal(pclose(p), 0);
}

static kt_context *cached_context(size_t *dev) {
    kt_context *ctx = test_context(2);
    ok(kt_context_set_cache(ctx, db));
    *dev = capt_device(ctx);
    return ctx;
}

static void test_deferred_keys_outlive_the_process(void **state) {
    (void)state;
    size_t dev;
    kt_context *ctx = cached_context(&dev);
    kt_op *op = capt_op(ctx, dev, "cap");
    ok(kt_op_set_fallback(op, "fb"));
    ok(kt_op_set_capture_miss(op, KT_CAPTURE_MISS_FALLBACK));
    atomic_store(&capturing, 1);
    ok(kt_op_call_async(op, QUEUE, ARGS(40), 2));
    ok(kt_op_call_async(op, QUEUE, ARGS(40), 2));
    ok(kt_op_call_async(op, QUEUE, ARGS(41), 2));
    assert_int_equal(kt_op_deferred_count(op), 2);
    kt_context_destroy(ctx);
    assert_int_equal(sql_count("SELECT count(*) FROM deferred WHERE op = 'cap'"), 2);
    assert_int_equal(sql_count("SELECT count(*) FROM deferred WHERE args = 'buffer:256,i64:40'"), 1);
    assert_int_equal(sql_count("SELECT count(*) FROM deferred WHERE args = 'buffer:256,i64:41'"), 1);
    assert_int_equal(sql_count("SELECT count(*) FROM decisions"), 0);

    /* the listing for the CLI */
    kt_cache *c = NULL;
    char *json = NULL;
    ok(kt_cache_open(db, &c));
    ok(kt_cache_deferred(c, "cap", NULL, &json));
    assert_non_null(strstr(json, "\"args\": \"buffer:256,i64:40\""));
    assert_non_null(strstr(json, "\"args\": \"buffer:256,i64:41\""));
    kt_free(json);
    ok(kt_cache_deferred(c, "other", NULL, &json));
    assert_null(strstr(json, "\"args\""));
    kt_free(json);
    kt_cache_close(c);
    /* and through the command, which lists them and cannot tune them */
    char text[4096];
    cli_output("cache deferred --op cap", text, sizeof text);
    assert_memory_equal(text, "OP   DEVICE", 11);
    assert_non_null(strstr(text, "  ARGS               DEFERRED\n"));
    assert_non_null(strstr(text, "  40   buffer:256,i64:40  "));
    assert_non_null(strstr(text, "  41   buffer:256,i64:41  "));
    cli_output("cache deferred --op other", text, sizeof text);
    assert_string_equal(text, "no deferred keys\n");
    cli_output("cache deferred --json", text, sizeof text);
    assert_non_null(strstr(text, "\"args\": \"buffer:256,i64:41\""));
    assert_non_null(strstr(text, "\"op\": \"cap\""));

    /* a later process: the same op sees them (a miss of one of them under capture before the
     * first count is not counted twice), tunes them, and the file lets them go */
    ctx = cached_context(&dev);
    op = capt_op(ctx, dev, "cap");
    ok(kt_op_set_fallback(op, "fb"));
    ok(kt_op_set_capture_miss(op, KT_CAPTURE_MISS_FALLBACK));
    atomic_store(&capturing, 1);
    ok(kt_op_call_async(op, QUEUE, ARGS(41), 2));
    expect_filled(out, N, 3);
    assert_int_equal(kt_op_deferred_count(op), 2);
    atomic_store(&capturing, 0);
    size_t tuned = 0;
    ok(kt_op_tune_deferred(op, &tuned));
    assert_int_equal(tuned, 2);
    assert_int_equal(kt_op_deferred_count(op), 0);
    assert_int_equal(sql_count("SELECT count(*) FROM deferred"), 0);
    assert_int_equal(sql_count("SELECT count(*) FROM decisions WHERE op = 'cap'"), 2);
    kt_context_destroy(ctx);

    /* and a third finds nothing deferred, and the decisions recorded */
    ctx = cached_context(&dev);
    op = capt_op(ctx, dev, "cap");
    assert_int_equal(kt_op_deferred_count(op), 0);
    ok(kt_op_call_async(op, QUEUE, ARGS(40), 2)); /* recalled from the cache */
    expect_filled(out, N, 2);
    assert_int_equal(kt_op_tune_count(op), 0);
    kt_context_destroy(ctx);
}

/* A stored row whose arguments do not fit the op is dropped (with a warning in the log), never
 * tuned. */
static void test_bad_stored_row_is_dropped(void **state) {
    (void)state;
    size_t dev;
    kt_context *ctx = cached_context(&dev);
    kt_op *op = capt_op(ctx, dev, "cap");
    ok(kt_op_set_capture_miss(op, KT_CAPTURE_MISS_FALLBACK));
    atomic_store(&capturing, 1);
    ok(kt_op_call_async(op, QUEUE, ARGS(40), 2));
    kt_context_destroy(ctx);
    sqlite3 *s = NULL;
    assert_int_equal(sqlite3_open(db, &s), SQLITE_OK);
    assert_int_equal(sqlite3_exec(s, "UPDATE deferred SET args = 'buffer:256,f32:40'", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(s);
    ctx = cached_context(&dev);
    op = capt_op(ctx, dev, "cap");
    assert_int_equal(kt_op_deferred_count(op), 0);
    assert_int_equal(sql_count("SELECT count(*) FROM deferred"), 0);
    kt_context_destroy(ctx);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_refuse_by_default),
        cmocka_unit_test(test_fallback_defers_and_tunes_later),
        cmocka_unit_test(test_fallback_is_the_default_without_one),
        cmocka_unit_test(test_no_native_that_accepts),
        cmocka_unit_test(test_set_capture_miss_misuse),
        cmocka_unit_test(test_threads_record_once),
        cmocka_unit_test_setup_teardown(test_deferred_keys_outlive_the_process, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_stored_row_is_dropped, setup, teardown),
    };
    return kt_run_cases(argc, argv, tests, NULL, NULL);
}
