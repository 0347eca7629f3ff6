/*
 * test-launch-sizes.c - the launch sizes a call computes from its own arguments, on a device
 * that records each launch's geometry: through the integer programs compiled at planning, or
 * through the interpreter, for kt_op_call and kt_op_call_async, within a bucket and across
 * buckets, and a size below zero failing the call with the interpreter's message.
 */
#define _GNU_SOURCE /* mkdtemp */
#include "helpers.h"

#include <kerntune/backend.h>
#include <kerntune/cache.h>
#include <kerntune/decision.h>
#include <kerntune/device.h>
#include <kerntune/variants.h>

static char artifacts[256];

/*
 * A device that records the geometry of each launch (its variants "build" into a file of their
 * defines and "load" B back; buffers are host memory), for the launch sizes a call computes
 * from its own arguments: through the integer programs compiled at planning, or through the
 * interpreter where a size is outside what compiles. Both must give each call its own sizes.
 */
typedef struct rec_module {
    int block;
} rec_module;

static kt_launch_geometry rec_last;
static int rec_launches, rec_async_launches, rec_waits;

static size_t rec_count(void *state) {
    (void)state;
    return 1;
}
static kt_status rec_describe(void *state, size_t i, char *name, char *fp, char *err, size_t errlen) {
    (void)state, (void)i, (void)err, (void)errlen;
    snprintf(name, KT_DEVICE_NAME_MAX, "recording device");
    snprintf(fp, KT_DEVICE_FINGERPRINT_MAX, "rec:1");
    return KT_OK;
}
static kt_status rec_alloc(void *state, size_t dev, size_t bytes, void **out, char *err, size_t errlen) {
    (void)state, (void)dev, (void)err, (void)errlen;
    *out = calloc(1, bytes ? bytes : 1);
    return *out ? KT_OK : KT_ERR_NO_MEMORY;
}
static void rec_free(void *state, size_t dev, void *p) {
    (void)state, (void)dev;
    free(p);
}
static kt_status rec_copy(void *state, size_t dev, void *dst, const void *src, size_t bytes, kt_copy_dir dir, char *err,
                          size_t errlen) {
    (void)state, (void)dev, (void)dir, (void)err, (void)errlen;
    memmove(dst, src, bytes);
    return KT_OK;
}
static kt_status rec_fill(void *state, size_t dev, void *p, size_t bytes, const void *pattern, size_t plen, char *err,
                          size_t errlen) {
    (void)state, (void)dev, (void)err, (void)errlen;
    for (size_t i = 0; i < bytes; i += plen) memcpy((char *)p + i, pattern, plen);
    return KT_OK;
}
static kt_status rec_compiler(void *state, size_t dev, char *out, size_t len, char *err, size_t errlen) {
    (void)state, (void)dev, (void)err, (void)errlen;
    snprintf(out, len, "rec 1");
    return KT_OK;
}
static kt_status rec_build(void *state, size_t dev, const kt_build_request *req, char *log, size_t loglen) {
    (void)state, (void)dev;
    FILE *f = fopen(req->out_path, "w");
    if (f == NULL) {
        snprintf(log, loglen, "cannot write %s", req->out_path);
        return KT_ERR_BACKEND;
    }
    for (size_t i = 0; i < req->ndefines; i++) fprintf(f, "%s\n", req->defines[i]);
    return fclose(f) == 0 ? KT_OK : KT_ERR_BACKEND;
}
static kt_status rec_load(void *state, size_t dev, const char *path, const char *kernel, void **module, char *err, size_t errlen) {
    (void)state, (void)dev, (void)kernel;
    FILE *f = fopen(path, "r");
    int block = 0;
    char line[64];
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "B=", 2) == 0) block = atoi(line + 2);
    if (f) fclose(f);
    rec_module *m = block > 0 ? malloc(sizeof *m) : NULL;
    if (m == NULL) {
        snprintf(err, errlen, "%s: no B", path);
        return KT_ERR_BACKEND;
    }
    m->block = block;
    *module = m;
    return KT_OK;
}
static void rec_unload(void *state, size_t dev, void *module) {
    (void)state, (void)dev;
    free(module);
}
/* B=64 takes half the time of B=128: the winner. */
static kt_status rec_launch(void *state, size_t dev, void *module, const kt_launch_geometry *g, const kt_arg *args,
                            size_t nargs, double *ns, char *err, size_t errlen) {
    (void)state, (void)dev, (void)args, (void)nargs, (void)err, (void)errlen;
    rec_last = *g;
    rec_launches++;
    if (ns) *ns = ((const rec_module *)module)->block == 64 ? 1000.0 : 2000.0;
    return KT_OK;
}
static kt_status rec_launch_async(void *state, size_t dev, void *module, const kt_launch_geometry *g, const kt_arg *args,
                                  size_t nargs, void *queue, char *err, size_t errlen) {
    (void)queue;
    rec_async_launches++;
    return rec_launch(state, dev, module, g, args, nargs, NULL, err, errlen);
}
static kt_status rec_wait(void *state, size_t dev, void *queue, char *err, size_t errlen) {
    (void)state, (void)dev, (void)queue, (void)err, (void)errlen;
    rec_waits++;
    return KT_OK;
}
static const kt_backend rec_backend = {
    .abi_version = 7, .name = "rec", .device_count = rec_count, .device_describe = rec_describe,
    .buffer_alloc = rec_alloc, .buffer_free = rec_free, .buffer_copy = rec_copy, .buffer_fill = rec_fill,
    .artifact_ext = ".rec", .compiler_id = rec_compiler, .build = rec_build, .load = rec_load, .unload = rec_unload,
    .launch = rec_launch, .caps = KT_BACKEND_CAP_HOST_MEMORY | KT_BACKEND_CAP_ASYNC_LAUNCH, .language = "rec",
    .launch_async = rec_launch_async, .queue_wait = rec_wait};

static int64_t pymod(int64_t a, int64_t b) { return ((a % b) + b) % b; }

/* Op `name` (x: f32 buffer, n: i64 keyed by power of two, m: i32, s: f64) on the recording
 * device, its variants' grid given by global (B is 64 or 128; every input reaches only the
 * grid, so none is keyed beyond n's bucket). */
static kt_op *rec_op(kt_context *ctx, size_t dev, const char *name, const char *const global[3]) {
    kt_op *op = NULL;
    ok(kt_op_create(ctx, name, &op));
    ok(kt_op_set_device(op, dev));
    ok(kt_op_add_buffer(op, "x", KT_TYPE_F32, KT_READ_WRITE));
    ok(kt_op_add_scalar(op, "n", KT_TYPE_I64));
    ok(kt_op_add_scalar(op, "m", KT_TYPE_I32));
    ok(kt_op_add_scalar(op, "s", KT_TYPE_F64));
    ok(kt_op_key_arg(op, 1, KT_BUCKET_POW2));
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    ok(kt_space_add_input(sp, "x"));
    ok(kt_space_add_input(sp, "n"));
    ok(kt_space_add_input(sp, "m"));
    ok(kt_space_add_input(sp, "s"));
    ok(kt_space_add_param(sp, "B", "[64, 128]"));
    const char *block[3] = {"B", NULL, NULL};
    ok(kt_space_set_geometry(sp, KT_GEOMETRY_GRID, global, block, NULL));
    ok(kt_op_add_variants(op, "v", sp, "a kernel the recording device does not read", "k", NULL, 0));
    kt_space_destroy(sp);
    return op;
}

/* Each hit's grid comes from its own arguments, whether its sizes compile into integer programs
 * ("rec_compiled": integer arithmetic over an i64, an i32 and a buffer's element count) or go to
 * the interpreter ("rec_interpreted": a conditional and a float); through kt_op_call and
 * kt_op_call_async alike, within a bucket and across buckets, and a size that comes out
 * negative fails the call with the interpreter's message either way. */
static void test_call_sizes_compiled_or_interpreted(void **state) {
    (void)state;
    kt_context *ctx = test_context(3);
    ok(kt_context_set_artifact_dir(ctx, artifacts));
    ok(kt_context_set_cache(ctx, "off"));
    ok(kt_context_add_backend(ctx, &rec_backend));
    size_t dev = (size_t)-1;
    for (size_t i = 0; i < kt_context_device_count(ctx); i++)
        if (strcmp(kt_device_backend(kt_context_device(ctx, i)), "rec") == 0) dev = i;
    assert_true(dev != (size_t)-1);
    const char *compiled[3] = {"(n + B - 1) // B", "x // 4 + m % 3 - 1", "max(1, n // 256 - m)"};
    const char *interpreted[3] = {"(n + B - 1) // B", "m if m > 0 else 1", "int(s * 2) - 1"};
    kt_op *ops[2] = {rec_op(ctx, dev, "rec_compiled", compiled), rec_op(ctx, dev, "rec_interpreted", interpreted)};
    static float x[4096];
    typedef struct call {
        int64_t n, elems;
        int32_t m;
        double s;
        uint64_t tunes; /* tunings so far */
    } call;
    const call calls[] = {
        {600, 4096, 5, 1.5, 1},   /* tunes n's bucket 1024 */
        {1000, 1000, -2, 3.0, 1}, /* inside the bucket: its own sizes */
        {520, 64, 0, 0.5, 1},
        {1024, 7, 7, 8.0, 1},
        {3000, 4096, 1, 1.0, 2},  /* bucket 4096: tuned */
        {2049, 13, -9, 2.5, 2},
        {601, 4095, 4, 1.75, 2},  /* bucket 1024 again */
    };
    for (int o = 0; o < 2; o++)
        for (size_t c = 0; c < sizeof calls / sizeof calls[0]; c++)
            for (int async = 0; async < 2; async++) {
                const call *k = &calls[c];
                kt_arg args[] = {kt_arg_buf(x, (size_t)k->elems * sizeof(float)), kt_arg_i64(k->n), kt_arg_i32(k->m),
                                 kt_arg_f64(k->s)};
                rec_last = (kt_launch_geometry){0};
                int before = rec_async_launches, waits = rec_waits;
                uint64_t tuned = kt_op_tune_count(ops[o]);
                ok(async ? kt_op_call_async(ops[o], NULL, args, 4) : kt_op_call(ops[o], args, 4));
                assert_int_equal(kt_op_tune_count(ops[o]), k->tunes);
                if (tuned == k->tunes) { /* a hit: one launch enqueued; kt_op_call then waits for the queue */
                    assert_int_equal(rec_async_launches - before, 1);
                    assert_int_equal(rec_waits - waits, async ? 0 : 1);
                }
                const kt_decision *d = NULL;
                ok(kt_op_decision(ops[o], args, 4, &d));
                assert_string_equal(kt_decision_unit_config(d, kt_decision_winner_unit(d)), "B=64");
                int64_t want[3] = {(k->n + 63) / 64, 0, 0};
                if (o == 0) {
                    want[1] = k->elems / 4 + pymod(k->m, 3) - 1;
                    want[2] = k->n / 256 - k->m > 1 ? k->n / 256 - k->m : 1;
                } else {
                    want[1] = k->m > 0 ? k->m : 1;
                    want[2] = (int64_t)(k->s * 2) - 1;
                }
                if (rec_last.global[0] != want[0] || rec_last.global[1] != want[1] || rec_last.global[2] != want[2] ||
                    rec_last.local[0] != 64)
                    fail_msg("%s, call %zu%s: grid %lld,%lld,%lld block %lld; expected %lld,%lld,%lld block 64", kt_op_name(ops[o]),
                             c, async ? " (async)" : "", (long long)rec_last.global[0], (long long)rec_last.global[1],
                             (long long)rec_last.global[2], (long long)rec_last.local[0], (long long)want[0], (long long)want[1],
                             (long long)want[2]);
            }
    /* a size below zero: the call fails, saying which expression, and launches nothing */
    const kt_arg bad[2][4] = {{kt_arg_buf(x, 2 * sizeof(float)), kt_arg_i64(1000), kt_arg_i32(3), kt_arg_f64(1.0)},
                              {kt_arg_buf(x, 2 * sizeof(float)), kt_arg_i64(1000), kt_arg_i32(3), kt_arg_f64(0.25)}};
    const char *expr[2] = {"x // 4 + m % 3 - 1", "int(s * 2) - 1"};
    for (int o = 0; o < 2; o++)
        for (int async = 0; async < 2; async++) {
            int before = rec_launches;
            const char *where = async ? "kt_op_call_async" : "kt_op_call";
            expect_status(KT_ERR_CANDIDATE_FAILED, async ? kt_op_call_async(ops[o], NULL, bad[o], 4) : kt_op_call(ops[o], bad[o], 4));
            char want[512];
            snprintf(want, sizeof want,
                     "op '%s': candidate 'v': the launch size for these arguments: geometry: global size: expression '%s' "
                     "does not give a size >= 0",
                     kt_op_name(ops[o]), expr[o]);
            if (strcmp(kt_last_error(), want) != 0) fail_msg("%s: '%s', expected '%s'", where, kt_last_error(), want);
            assert_int_equal(rec_launches, before);
        }
    kt_context_destroy(ctx);
}

int main(int argc, char **argv) {
    snprintf(artifacts, sizeof artifacts, "/tmp/kt-launch-sizes-XXXXXX");
    if (mkdtemp(artifacts) == NULL) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_call_sizes_compiled_or_interpreted),
    };
    int rc = kt_run_cases(argc, argv, tests, NULL, NULL);
    if (remove_tree(artifacts) != 0) rc = rc ? rc : 1;
    return rc;
}
