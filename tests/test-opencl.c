/*
 * test-opencl.c - the OpenCL backend, for real on PoCL: a tiled matrix multiply tuned over tile
 * and work-group defines, a wrong variant caught by validation against a naive variant, a
 * variant that fails to build, and an in-place kernel whose device buffer holds exactly one
 * launch's result after tuning (snapshot and restore on the device); launch sizes per call,
 * keys, device facts and flushes, Kernel Tuner's contract. (test-opencl-queues.c: queues and
 * threads.)
 */
#define _GNU_SOURCE /* mkdtemp */
#include "opencl-helpers.h"

#include <kerntune/decision.h>
#include <kerntune/device.h>
#include <kerntune/variants.h>

#include <stdbool.h>
#include <unistd.h>

static const char *matmul_cl =
    "#if BAD\n"
    "this does not compile;\n"
    "#endif\n"
    "__kernel void matmul(__global const float *a, __global const float *b, __global float *c, long n) {\n"
    "    long col0 = get_global_id(0) * TM, row = get_global_id(1);\n"
    "    float acc[TM];\n"
    "    for (int t = 0; t < TM; t++) acc[t] = 0;\n"
    "    for (long k = 0; k < n - WRONG; k++) {\n"
    "        float av = a[row * n + k];\n"
    "        for (int t = 0; t < TM; t++) acc[t] += av * b[k * n + col0 + t];\n"
    "    }\n"
    "    for (int t = 0; t < TM; t++) c[row * n + col0 + t] = acc[t];\n"
    "}\n";

static kt_space *mm_space(const char *tm, const char *lx, const char *bad, const char *wrong) {
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    ok(kt_space_add_input(sp, "n"));
    ok(kt_space_add_param(sp, "TM", tm));
    ok(kt_space_add_param(sp, "LX", lx));
    ok(kt_space_add_param(sp, "BAD", bad));
    ok(kt_space_add_derived(sp, "WRONG", wrong));
    ok(kt_space_add_constraint(sp, "(n // TM) % LX == 0"));
    const char *global[3] = {"n // TM", "n", NULL}, *local[3] = {"LX", NULL, NULL};
    ok(kt_space_set_geometry(sp, KT_GEOMETRY_GLOBAL, global, local, NULL));
    return sp;
}

#define N 32

/* c = a b over N x N floats: the inputs (from two seeds), the reference product. */
static void mm_inputs(float *a, float *b, float *ref, int sa, int sb) {
    for (int i = 0; i < N * N; i++) a[i] = (float)((i * sa) % 13) - 6, b[i] = (float)((i * sb) % 11) - 5;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            float s = 0;
            for (int k = 0; k < N; k++) s += a[i * N + k] * b[k * N + j];
            ref[i * N + j] = s;
        }
}

/* The device's copies of a and b and room for c; an op "name" (a, b: ReadOnly, c: WriteOnly, n)
 * on the device, with no candidates yet. */
static kt_op *mm_op(kt_context *ctx, size_t dev, const char *name, const float *a, const float *b, void **da, void **db,
                    void **dc) {
    const size_t bytes = N * N * sizeof(float);
    ok(kt_device_alloc(ctx, dev, bytes, da));
    ok(kt_device_alloc(ctx, dev, bytes, db));
    ok(kt_device_alloc(ctx, dev, bytes, dc));
    ok(kt_device_write(ctx, dev, *da, a, bytes));
    ok(kt_device_write(ctx, dev, *db, b, bytes));
    kt_op *op = NULL;
    ok(kt_op_create(ctx, name, &op));
    ok(kt_op_set_device(op, dev));
    ok(kt_op_add_buffer(op, "a", KT_TYPE_F32, KT_READ_ONLY));
    ok(kt_op_add_buffer(op, "b", KT_TYPE_F32, KT_READ_ONLY));
    ok(kt_op_add_buffer(op, "c", KT_TYPE_F32, KT_WRITE_ONLY));
    ok(kt_op_add_scalar(op, "n", KT_TYPE_I64));
    return op;
}

static void test_tiled_matmul_on_pocl(void **state) {
    (void)state;
    size_t dev;
    kt_context *ctx = cl_context(3, &dev);
    float a[N * N], b[N * N], c[N * N], ref[N * N];
    mm_inputs(a, b, ref, 7, 5);
    void *da, *db, *dc;
    kt_op *op = mm_op(ctx, dev, "clmatmul", a, b, &da, &db, &dc);
    kt_space *naive = mm_space("[1]", "[1]", "[0]", "0");
    kt_space *tiled = mm_space("[1, 4]", "[4, 8]", "[0]", "1 if TM == 4 and LX == 8 else 0");
    kt_space *broken = mm_space("[2]", "[4]", "[1]", "0");
    ok(kt_op_add_variants(op, "naive", naive, matmul_cl, "matmul", NULL, 0));
    ok(kt_op_add_variants(op, "tiled", tiled, matmul_cl, "matmul", NULL, 0));
    ok(kt_op_add_variants(op, "broken", broken, matmul_cl, "matmul", NULL, 0));
    kt_space_destroy(naive), kt_space_destroy(tiled), kt_space_destroy(broken);
    ok(kt_op_set_default(op, "naive")); /* the reference */

    kt_arg args[] = {kt_arg_buf(da, sizeof a), kt_arg_buf(db, sizeof b), kt_arg_buf(dc, sizeof c), kt_arg_i64(N)};
    ok(kt_op_call(op, args, 4));
    ok(kt_device_read(ctx, dev, c, dc, sizeof c));
    assert_memory_equal(c, ref, sizeof c);
    const kt_decision *d = NULL;
    ok(kt_op_decision(op, args, 4, &d));
    assert_true(kt_decision_validated(d));
    assert_int_equal(kt_decision_unit_count(d), 1 + 4 + 1);
    int measured = 0;
    for (size_t u = 0; u < kt_decision_unit_count(d); u++) {
        const char *cfg = kt_decision_unit_config(d, u);
        kt_outcome o = kt_decision_unit_outcome(d, u);
        if (strstr(cfg, "BAD=1")) {
            assert_int_equal(o, KT_OUTCOME_BUILD_FAILED);
            assert_non_null(strstr(kt_decision_unit_message(d, u), "error"));
        } else if (strstr(cfg, "WRONG=1")) {
            assert_int_equal(o, KT_OUTCOME_INVALID);
        } else {
            assert_int_equal(o, KT_OUTCOME_MEASURED);
            assert_true(kt_decision_unit_time_ns(d, u) > 0); /* profiling events */
            measured++;
        }
    }
    assert_int_equal(measured, 4);
    memset(c, 0, sizeof c);
    ok(kt_device_write(ctx, dev, dc, c, sizeof c));
    ok(kt_op_call(op, args, 4)); /* a hit */
    ok(kt_device_read(ctx, dev, c, dc, sizeof c));
    assert_memory_equal(c, ref, sizeof c);
    kt_device_free(ctx, dev, da), kt_device_free(ctx, dev, db), kt_device_free(ctx, dev, dc);
    kt_context_destroy(ctx);
}

/* A CPU device's artifact holds the program's source and options (opencl.c: its binary would
 * cost a second code generation), and loads as a binary's would: a second context on the same
 * artifact directory compiles nothing, and its program computes the same. */
static void test_cpu_artifacts_hold_source(void **state) {
    (void)state;
    char dir[300];
    snprintf(dir, sizeof dir, "%s/cpu-artifacts", artifacts);
    float a[N * N], b[N * N], c[N * N], ref[N * N];
    mm_inputs(a, b, ref, 3, 7);
    for (int round = 0; round < 2; round++) {
        kt_context *ctx = test_context(3);
        ok(kt_context_set_artifact_dir(ctx, dir));
        size_t dev = opencl_device(ctx);
        void *da, *db, *dc;
        kt_op *op = mm_op(ctx, dev, "clsource", a, b, &da, &db, &dc);
        kt_space *sp = mm_space("[1, 4]", "[4]", "[0]", "0");
        ok(kt_op_add_variants(op, "tiled", sp, matmul_cl, "matmul", NULL, 0));
        kt_space_destroy(sp);
        kt_arg args[] = {kt_arg_buf(da, sizeof a), kt_arg_buf(db, sizeof b), kt_arg_buf(dc, sizeof c), kt_arg_i64(N)};
        ok(kt_op_call(op, args, 4));
        ok(kt_device_read(ctx, dev, c, dc, sizeof c));
        assert_memory_equal(c, ref, sizeof c);
        assert_int_equal(kt_context_compile_count(ctx), round == 0 ? 2 : 0); /* the second found both built */
        kt_device_free(ctx, dev, da), kt_device_free(ctx, dev, db), kt_device_free(ctx, dev, dc);
        kt_context_destroy(ctx);
    }
    char cmd[512], line[64] = "";
    snprintf(cmd, sizeof cmd, "for f in $(find '%s' -name '*.clbin'); do head -c 8 \"$f\"; echo; done | sort -u", dir);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    assert_non_null(fgets(line, sizeof line, p));
    assert_string_equal(line, "KTCLSRC1\n"); /* every artifact: source, not a binary */
    assert_null(fgets(line, sizeof line, p));
    pclose(p);
}

/* v *= s on the device: tuning restores the device buffer before every run. */
static void test_inplace_on_device(void **state) {
    (void)state;
    size_t dev;
    kt_context *ctx = cl_context(3, &dev);
    enum { M = 256 };
    float v[M], expect[M];
    for (int i = 0; i < M; i++) v[i] = (float)i - 100.5f, expect[i] = v[i] * 1.5f;
    void *dv;
    ok(kt_device_alloc(ctx, dev, sizeof v, &dv));
    ok(kt_device_write(ctx, dev, dv, v, sizeof v));
    kt_op *op = NULL;
    ok(kt_op_create(ctx, "clscale", &op));
    ok(kt_op_set_device(op, dev));
    ok(kt_op_add_buffer(op, "v", KT_TYPE_F32, KT_READ_WRITE));
    ok(kt_op_add_scalar(op, "s", KT_TYPE_F32));
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    ok(kt_space_add_input(sp, "v")); /* a buffer input: its element count */
    ok(kt_space_add_param(sp, "PER", "[1, 2, 4]"));
    ok(kt_space_add_param(sp, "ELEM", "['unsigned int']"));
    const char *global[3] = {"v // PER", NULL, NULL};
    ok(kt_space_set_geometry(sp, KT_GEOMETRY_GLOBAL, global, NULL, NULL));
    ok(kt_op_add_variants(op, "scale", sp, scale_cl, "scale", NULL, 0));
    kt_space_destroy(sp);
    kt_arg args[] = {kt_arg_buf(dv, sizeof v), kt_arg_f32(1.5f)};
    ok(kt_op_call(op, args, 2));
    ok(kt_device_read(ctx, dev, v, dv, sizeof v));
    assert_memory_equal(v, expect, sizeof v);
    const kt_decision *d = NULL;
    ok(kt_op_decision(op, args, 2, &d));
    assert_int_equal(kt_decision_unit_count(d), 3);
    /* the device snapshot, the reference's output (host) and a host copy to compare each
     * candidate's output with it */
    assert_int_equal(kt_decision_peak_extra_bytes(d), 3 * sizeof v);
    kt_device_free(ctx, dev, dv);
    kt_context_destroy(ctx);
}

/* out[i] = 2 in[i] + 1, PER elements per work-item; no bounds check, so a launch of the wrong
 * size writes past n or leaves elements unwritten. */
static const char *twice_cl =
    "__kernel void twice(__global float *out, __global const float *in, long n) {\n"
    "    long i = get_global_id(0) * PER;\n"
    "    for (int k = 0; k < PER; k++) out[i + k] = 2.0f * in[i + k] + 1.0f;\n"
    "}\n";

/* The same, over a count compiled in (a derived value of n), in a loop over a fixed grid. */
static const char *fixed_cl =
    "__kernel void upto(__global float *out, __global const float *in, long n) {\n"
    "    for (long i = get_global_id(0); i < COUNT; i += get_global_size(0)) out[i] = 2.0f * in[i] + 1.0f;\n"
    "}\n";

#define CAP (1048576 + 256) /* elements of the device buffers: the largest n and a guard */
#define SENTINEL (-7.0f)

typedef struct sized {
    kt_context *ctx;
    size_t dev;
    void *din, *dout;
    float *host;
} sized;

/* A context on the first OpenCL device with two device buffers of CAP floats. */
static sized sized_open(void) {
    sized z = {.ctx = test_context(2)};
    ok(kt_context_set_artifact_dir(z.ctx, artifacts));
    z.dev = opencl_device(z.ctx);
    z.host = malloc(CAP * sizeof(float));
    assert_non_null(z.host);
    ok(kt_device_alloc(z.ctx, z.dev, CAP * sizeof(float), &z.din));
    ok(kt_device_alloc(z.ctx, z.dev, CAP * sizeof(float), &z.dout));
    return z;
}

static void sized_close(sized *z) {
    kt_device_free(z->ctx, z->dev, z->din), kt_device_free(z->ctx, z->dev, z->dout);
    free(z->host);
    kt_context_destroy(z->ctx);
}

/* Calls op on the first n elements of the device buffers (their real size is CAP), then checks
 * every element below n holds 2 in + 1 and that nothing at or past n was written. */
static void call_sized(sized *z, kt_op *op, int64_t n) {
    for (size_t i = 0; i < CAP; i++) z->host[i] = (float)(i % 1000) * 0.5f;
    ok(kt_device_write(z->ctx, z->dev, z->din, z->host, CAP * sizeof(float)));
    for (size_t i = 0; i < CAP; i++) z->host[i] = SENTINEL;
    ok(kt_device_write(z->ctx, z->dev, z->dout, z->host, CAP * sizeof(float)));
    kt_arg args[] = {kt_arg_buf(z->dout, (size_t)n * sizeof(float)), kt_arg_buf(z->din, (size_t)n * sizeof(float)),
                     kt_arg_i64(n)};
    ok(kt_op_call(op, args, 3));
    ok(kt_device_read(z->ctx, z->dev, z->host, z->dout, CAP * sizeof(float)));
    size_t wrong = 0, past = 0;
    for (size_t i = 0; i < (size_t)n; i++) wrong += z->host[i] != 2.0f * ((float)(i % 1000) * 0.5f) + 1.0f;
    for (size_t i = (size_t)n; i < CAP; i++) past += z->host[i] != SENTINEL;
    if (wrong || past) fail_msg("n = %lld: %zu of %lld elements wrong, %zu written past the end", (long long)n, wrong, (long long)n, past);
}

static kt_op *sized_op(sized *z, const char *name, const char *source, const char *kernel, kt_space *sp, bool pow2) {
    kt_op *op = NULL;
    ok(kt_op_create(z->ctx, name, &op));
    ok(kt_op_set_device(op, z->dev));
    ok(kt_op_add_buffer(op, "out", KT_TYPE_F32, KT_WRITE_ONLY));
    ok(kt_op_add_buffer(op, "in", KT_TYPE_F32, KT_READ_ONLY));
    ok(kt_op_add_scalar(op, "n", KT_TYPE_I64));
    if (pow2) ok(kt_op_key_arg(op, 2, KT_BUCKET_POW2));
    ok(kt_op_add_variants(op, name, sp, source, kernel, NULL, 0));
    kt_space_destroy(sp);
    return op;
}

/* A decision's launch size comes from each call's own arguments: a vector op whose global size
 * is n // PER, tuned at one n, launched at others, with and without a key (issue [8] A). */
static void test_launch_size_per_call(void **state) {
    (void)state;
    sized z = sized_open();
    const char *global[3] = {"n // PER", NULL, NULL};
    for (int pow2 = 0; pow2 < 2; pow2++) {
        kt_space *sp = NULL;
        ok(kt_space_create(&sp));
        ok(kt_space_add_input(sp, "n"));
        ok(kt_space_add_param(sp, "PER", "[1, 4]"));
        ok(kt_space_set_geometry(sp, KT_GEOMETRY_GLOBAL, global, NULL, NULL));
        kt_op *op = sized_op(&z, pow2 ? "twice_pow2" : "twice_nokey", twice_cl, "twice", sp, pow2);
        if (!pow2) {
            call_sized(&z, op, 1024); /* tunes */
            call_sized(&z, op, 1048576); /* the same decision, launched over all of it */
            call_sized(&z, op, 520);
            assert_int_equal(kt_op_tune_count(op), 1);
        } else {
            call_sized(&z, op, 600);  /* tunes bucket 1024 */
            call_sized(&z, op, 1000); /* inside the bucket: no tuning, its own size */
            call_sized(&z, op, 520);  /* smaller, inside the bucket: nothing past its end */
            assert_int_equal(kt_op_tune_count(op), 1);
            call_sized(&z, op, 3000); /* another bucket: tuned */
            assert_int_equal(kt_op_tune_count(op), 2);
            call_sized(&z, op, 1000);
            assert_int_equal(kt_op_tune_count(op), 2);
            const kt_decision *d = NULL;
            kt_arg args[] = {kt_arg_buf(z.dout, 1000 * sizeof(float)), kt_arg_buf(z.din, 1000 * sizeof(float)), kt_arg_i64(1000)};
            ok(kt_op_decision(op, args, 3, &d));
            assert_int_equal(kt_decision_key_len(d), 1); /* n reaches the launch size only: not keyed */
            assert_int_equal(kt_decision_key(d, 0), 1024);
            int64_t g[3], l[3], shm;
            ok(kt_decision_unit_geometry(d, kt_decision_winner_unit(d), g, l, &shm));
            assert_int_equal(g[0], 600 / (strstr(kt_decision_unit_config(d, kt_decision_winner_unit(d)), "PER=4") ? 4 : 1));
        }
    }
    sized_close(&z);
}

/* A global size counted in work-items must be a multiple of the local size (OpenCL 1.2): an
 * argument that reaches such a global size decides which configurations are valid, so it is
 * keyed exactly rather than sized per call (n = 1000 is no multiple of 16). */
static void test_work_items_with_local_size_keyed(void **state) {
    (void)state;
    sized z = sized_open();
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    ok(kt_space_add_input(sp, "n"));
    ok(kt_space_add_param(sp, "PER", "[1]"));
    ok(kt_space_add_param(sp, "L", "[8, 16]"));
    const char *global[3] = {"n", NULL, NULL}, *local[3] = {"L", NULL, NULL};
    ok(kt_space_set_geometry(sp, KT_GEOMETRY_GLOBAL, global, local, NULL));
    kt_op *op = sized_op(&z, "grouped", twice_cl, "twice", sp, false);
    call_sized(&z, op, 1024);
    call_sized(&z, op, 1000); /* its own key: L = 16 cannot launch it */
    assert_int_equal(kt_op_tune_count(op), 2);
    const kt_decision *d = NULL;
    kt_arg args[] = {kt_arg_buf(z.dout, 1000 * sizeof(float)), kt_arg_buf(z.din, 1000 * sizeof(float)), kt_arg_i64(1000)};
    ok(kt_op_decision(op, args, 3, &d));
    assert_int_equal(kt_decision_key_len(d), 1);
    assert_int_equal(kt_decision_key(d, 0), 1000);
    assert_string_equal(kt_decision_unit_config(d, kt_decision_winner_unit(d)), "PER=1,L=8");
    sized_close(&z);
}

/* An argument that reaches the compiled code (a derived value, so a define) is keyed exactly,
 * whatever bucket the op declared: code compiled for n = 600 is never launched for n = 1000 or
 * n = 520 (issue [8] A). */
static void test_code_argument_keyed_exactly(void **state) {
    (void)state;
    sized z = sized_open();
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    ok(kt_space_add_input(sp, "n"));
    ok(kt_space_add_param(sp, "G", "[64]"));
    ok(kt_space_add_derived(sp, "COUNT", "n"));
    const char *global[3] = {"G", NULL, NULL};
    ok(kt_space_set_geometry(sp, KT_GEOMETRY_GLOBAL, global, NULL, NULL));
    kt_op *op = sized_op(&z, "upto", fixed_cl, "upto", sp, true);
    call_sized(&z, op, 600);
    call_sized(&z, op, 1000); /* same POW2 bucket, other code: tuned for itself */
    call_sized(&z, op, 520);
    assert_int_equal(kt_op_tune_count(op), 3);
    call_sized(&z, op, 1000); /* now a hit */
    assert_int_equal(kt_op_tune_count(op), 3);
    const kt_decision *d = NULL;
    kt_arg args[] = {kt_arg_buf(z.dout, 1000 * sizeof(float)), kt_arg_buf(z.din, 1000 * sizeof(float)), kt_arg_i64(1000)};
    ok(kt_op_decision(op, args, 3, &d));
    assert_int_equal(kt_decision_key_len(d), 2); /* the declared bucket, then n exactly */
    assert_int_equal(kt_decision_key(d, 0), 1024);
    assert_int_equal(kt_decision_key(d, 1), 1000);
    assert_string_equal(kt_decision_unit_config(d, kt_decision_winner_unit(d)), "G=64,COUNT=1000");
    sized_close(&z);
}

/* A fingerprint holds only what identifies the device and its software. PoCL reports a CPU
 * device's global memory size from the memory it judges free, which moves while the machine
 * runs (3.7 to 5.6 GB within 40 minutes were seen): in the fingerprint it invalidated every
 * decision and artifact, and made the isolation runner miss its device. */
static void test_cpu_fingerprint_has_no_free_memory(void **state) {
    (void)state;
    kt_context *ctx = test_context(1);
    size_t dev = opencl_device(ctx);
    const char *fp = kt_device_fingerprint(kt_context_device(ctx, dev));
    assert_non_null(fp);
    assert_non_null(strstr(fp, "opencl:"));
    assert_non_null(strstr(fp, "|cu="));    /* compute units: the hardware's */
    assert_non_null(strstr(fp, "|cache=")); /* its cache size too */
    if (strstr(fp, "cpu") != NULL || strstr(fp, "Portable Computing Language") != NULL)
        assert_null(strstr(fp, "|mem=")); /* PoCL's CPU device: no memory size */
    /* and it is the same in a second context of the same process */
    kt_context *ctx2 = test_context(1);
    assert_string_equal(fp, kt_device_fingerprint(kt_context_device(ctx2, opencl_device(ctx2))));
    kt_context_destroy(ctx2);
    kt_context_destroy(ctx);
}

/* How many of the context's devices backend name found. */
static size_t devices_of(kt_context *ctx, const char *name) {
    size_t n = 0;
    for (size_t i = 0; i < kt_context_device_count(ctx); i++) n += strcmp(kt_device_backend(kt_context_device(ctx, i)), name) == 0;
    return n;
}

/* kt_context_set_backends: a context told to start only CUDA has no OpenCL device (PoCL is
 * installed here) and lists no failure of OpenCL's; one told "c,opencl" has PoCL's devices and
 * no CUDA failure; a name that is no backend is refused naming the ones there are, as is a
 * change once the devices were asked for; KERNTUNE_BACKENDS does the same at creation. */
static void test_backends_chosen(void **state) {
    (void)state;
    kt_context *all = test_context(1), *ctx = test_context(1);
    size_t opencl_all = devices_of(all, "opencl");
    assert_true(opencl_all > 0);
    ok(kt_context_set_backends(ctx, "cuda"));
    assert_int_equal(devices_of(ctx, "opencl"), 0);
    assert_int_equal(devices_of(ctx, "c"), 1);
    for (size_t i = 0; i < kt_context_unavailable_count(ctx); i++) assert_null(strstr(kt_context_unavailable(ctx, i), "opencl"));
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_context_set_backends(ctx, "opencl"));
    assert_non_null(strstr(kt_last_error(), "first asked for"));
    kt_context_destroy(ctx);

    ctx = test_context(1);
    ok(kt_context_set_backends(ctx, "c,opencl"));
    assert_int_equal(devices_of(ctx, "opencl"), opencl_all);
    for (size_t i = 0; i < kt_context_unavailable_count(ctx); i++) assert_null(strstr(kt_context_unavailable(ctx, i), "cuda"));
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_context_set_backends(ctx, "cuda,vulkan"));
    assert_non_null(strstr(kt_last_error(), "'vulkan' is not a backend (there are: c, opencl, cuda)"));
    kt_context_destroy(ctx);

    setenv("KERNTUNE_BACKENDS", "cuda", 1);
    ctx = test_context(1);
    assert_int_equal(devices_of(ctx, "opencl"), 0);
    kt_context_destroy(ctx);
    setenv("KERNTUNE_BACKENDS", "opencl,metal", 1);
    ctx = NULL;
    expect_status(KT_ERR_ENV, kt_context_create(&ctx));
    assert_null(ctx);
    assert_non_null(strstr(kt_last_error(), "KERNTUNE_BACKENDS: 'metal' is not a backend"));
    unsetenv("KERNTUNE_BACKENDS");
    kt_context_destroy(all);
}

/* kt_device_launch_limits: the OpenCL device's, as its platform reports them; none are known of
 * the host's; a device that does not exist is refused. */
static void test_device_launch_limits(void **state) {
    (void)state;
    kt_context *ctx = test_context(3);
    size_t dev = opencl_device(ctx);
    int64_t threads = -1, block[3] = {-1, -1, -1}, shared = -1;
    ok(kt_device_launch_limits(ctx, dev, &threads, block, &shared));
    assert_true(threads >= 1 && block[0] >= 1 && block[0] <= threads && shared > 0);
    ok(kt_device_launch_limits(ctx, 0, &threads, NULL, NULL));
    assert_int_equal(threads, 0); /* the C backend has no blocks */
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_device_launch_limits(ctx, 99, &threads, NULL, NULL));
    expect_status(KT_ERR_NULL, kt_device_launch_limits(NULL, dev, &threads, NULL, NULL));
    kt_context_destroy(ctx);
}

/* kt_device_flush: the OpenCL device's flush runs and is waited for; the host's backend cannot
 * flush (kerntune flushes the CPU's caches itself), nor can a device that does not exist. */
static void test_device_flush(void **state) {
    (void)state;
    kt_context *ctx = test_context(3);
    size_t dev = opencl_device(ctx);
    ok(kt_device_flush(ctx, dev));
    ok(kt_device_flush(ctx, dev)); /* its buffer allocated once, reused */
    expect_status(KT_ERR_BACKEND, kt_device_flush(ctx, 0));
    assert_non_null(strstr(kt_last_error(), "backend 'c' cannot flush"));
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_device_flush(ctx, 99));
    expect_status(KT_ERR_NULL, kt_device_flush(NULL, dev));
    kt_context_destroy(ctx);
}

/* A kernel written for Kernel Tuner (its own block sizes when kernel_tuner is undefined) under
 * Kernel Tuner's compile contract: one program of two configurations. P=5 sees kernel_tuner, the
 * block (work-group), the grid in blocks (global work-items 8 x 3 over work-groups of 4 x 1)
 * and its parameter; P=6 fails to compile on the kernel's line 16, reported as line 16 (the
 * defines come before the kernel's line 1). */
static const char *kt_contract_cl =
    "#ifndef kernel_tuner\n"
    "#define block_size_x 7\n"
    "#define block_size_y 7\n"
    "#define block_size_z 7\n"
    "#define grid_size_x 7\n"
    "#define grid_size_y 7\n"
    "#define grid_size_z 7\n"
    "#endif\n"
    "__kernel void put(__global int *out) {\n"
    "    if (get_global_id(0) != 0 || get_global_id(1) != 0) return;\n"
    "    out[0] = kernel_tuner;\n"
    "    out[1] = block_size_x; out[2] = block_size_y; out[3] = block_size_z;\n"
    "    out[4] = grid_size_x; out[5] = grid_size_y; out[6] = grid_size_z;\n"
    "    out[7] = P;\n"
    "#if P == 6\n"
    "    this_is_no_opencl = 1;\n" /* line 16 */
    "#endif\n"
    "}\n";

static void test_kernel_tuner_contract(void **state) {
    (void)state;
    size_t dev;
    kt_context *ctx = cl_context(3, &dev);
    int32_t out[8];
    void *dv;
    ok(kt_device_alloc(ctx, dev, sizeof out, &dv));
    kt_op *op = NULL;
    ok(kt_op_create(ctx, "clcontract", &op));
    ok(kt_op_set_device(op, dev));
    ok(kt_op_set_validation(op, 0));
    ok(kt_op_add_buffer(op, "out", KT_TYPE_I32, KT_WRITE_ONLY));
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    ok(kt_space_add_param(sp, "P", "[5, 6]"));
    const char *global[3] = {"8", "3", NULL}, *local[3] = {"4", NULL, NULL};
    ok(kt_space_set_geometry(sp, KT_GEOMETRY_GLOBAL, global, local, NULL));
    ok(kt_op_add_variants(op, "put", sp, kt_contract_cl, "put", NULL, 0));
    kt_space_destroy(sp);
    ok(kt_op_set_kernel_tuner_contract(op, "put", NULL));
    kt_arg args[] = {kt_arg_buf(dv, sizeof out)};
    ok(kt_op_call(op, args, 1));
    ok(kt_device_read(ctx, dev, out, dv, sizeof out));
    assert_memory_equal(out, ((int32_t[]){1, 4, 1, 1, 2, 3, 1, 5}), sizeof out);
    const kt_decision *d = NULL;
    ok(kt_op_decision(op, args, 1, &d));
    assert_int_equal(kt_decision_unit_count(d), 2);
    assert_string_equal(kt_decision_unit_config(d, 1), "P=6");
    assert_int_equal(kt_decision_unit_outcome(d, 1), KT_OUTCOME_BUILD_FAILED);
    const char *msg = kt_decision_unit_message(d, 1);
    if (strstr(msg, ":16:") == NULL || strstr(msg, "this_is_no_opencl") == NULL) fail_msg("not reported on line 16: %s", msg);
    kt_device_free(ctx, dev, dv);
    kt_context_destroy(ctx);
}

/* Under Kernel Tuner's contract a loop_unroll_factor of 0 removes the `#pragma unroll NAME` line
 * (which would say `#pragma unroll 0`, refused by OpenCL compilers: PoCL's clang says the value
 * must be positive), as Kernel Tuner does for CUDA: both configurations build, run and agree. */
static const char *unroll_cl =
    "__kernel void sums(__global float *out) {\n"
    "    int i = get_global_id(0);\n"
    "    float s = 0.0f;\n"
    "    #pragma unroll loop_unroll_factor\n"
    "    for (int k = 0; k < 16; k++) s += (float)(i + k);\n"
    "    out[i] = s + (float)(loop_unroll_factor - loop_unroll_factor);\n"
    "}\n";

static void test_kernel_tuner_contract_unroll_zero(void **state) {
    (void)state;
    size_t dev;
    kt_context *ctx = cl_context(3, &dev);
    float out[64];
    void *dv;
    ok(kt_device_alloc(ctx, dev, sizeof out, &dv));
    kt_op *op = NULL;
    ok(kt_op_create(ctx, "clunroll", &op));
    ok(kt_op_set_device(op, dev));
    ok(kt_op_add_buffer(op, "out", KT_TYPE_F32, KT_WRITE_ONLY));
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    ok(kt_space_add_param(sp, "loop_unroll_factor", "[0, 2]"));
    const char *global[3] = {"64", NULL, NULL}, *local[3] = {"8", NULL, NULL};
    ok(kt_space_set_geometry(sp, KT_GEOMETRY_GLOBAL, global, local, NULL));
    ok(kt_op_add_variants(op, "sums", sp, unroll_cl, "sums", NULL, 0));
    kt_space_destroy(sp);
    ok(kt_op_set_kernel_tuner_contract(op, "sums", NULL));
    kt_arg args[] = {kt_arg_buf(dv, sizeof out)};
    ok(kt_op_call(op, args, 1));
    ok(kt_device_read(ctx, dev, out, dv, sizeof out));
    for (int i = 0; i < 64; i++) assert_true(out[i] == (float)(16 * i + 120));
    const kt_decision *d = NULL;
    ok(kt_op_decision(op, args, 1, &d));
    for (size_t u = 0; u < 2; u++)
        if (kt_decision_unit_outcome(d, u) != KT_OUTCOME_MEASURED)
            fail_msg("%s: %s", kt_decision_unit_config(d, u), kt_decision_unit_message(d, u) ? kt_decision_unit_message(d, u) : "");
    kt_device_free(ctx, dev, dv);
    kt_context_destroy(ctx);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiled_matmul_on_pocl),
        cmocka_unit_test(test_inplace_on_device),
        cmocka_unit_test(test_cpu_fingerprint_has_no_free_memory),
        cmocka_unit_test(test_backends_chosen),
        cmocka_unit_test(test_launch_size_per_call),
        cmocka_unit_test(test_code_argument_keyed_exactly),
        cmocka_unit_test(test_work_items_with_local_size_keyed),
        cmocka_unit_test(test_device_flush),
        cmocka_unit_test(test_device_launch_limits),
        cmocka_unit_test(test_cpu_artifacts_hold_source),
        cmocka_unit_test(test_kernel_tuner_contract),
        cmocka_unit_test(test_kernel_tuner_contract_unroll_zero),
    };
    return run_opencl_cases(argc, argv, tests, sizeof tests / sizeof tests[0]);
}
