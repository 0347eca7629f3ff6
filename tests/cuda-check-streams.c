/*
 * cuda-check-streams.c - the CUDA backend on the caller's streams, run on a GPU machine by
 * scripts/gpu-check: kt_op_call_async on the caller's stream and inside a captured CUDA graph, an
 * in-place call after a writer on the same stream, a native device candidate (cuBLAS's saxpy)
 * on the queue it is given, and two threads on two streams with no wait across them on the hit
 * path. (cuda-check.c: tuning, artifacts, isolation, constant memory, device checks.)
 * Prints one line per check and closes with "N passed, N failed".
 */
#define _GNU_SOURCE /* mkdtemp */
#include "cuda-check.h"

#include <kerntune.h>
#include <kerntune/backend.h>
#include <kerntune/inputs.h>
#include <kerntune/cache.h>
#include <kerntune/decision.h>
#include <kerntune/device.h>
#include <kerntune/measure.h>
#include <kerntune/validation.h>
#include <kerntune/variants.h>
#include <dirent.h>
#include <math.h>
#include <dlfcn.h>
#include <stdatomic.h>
#include <time.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/prctl.h>

/* ---- kt_op_call_async on the caller's stream, and inside a CUDA graph (issue [10]) ---------
 * The check reaches the driver itself (dlopen, as the backend does) for a stream of its own on
 * the device's primary context, a host function that holds the stream, and graph capture. */
typedef struct cu_fns {
    int (*Init)(unsigned);
    int (*DeviceGet)(int *, int);
    int (*DevicePrimaryCtxRetain)(void **, int);
    int (*CtxSetCurrent)(void *);
    int (*StreamCreate)(void **, unsigned);
    int (*StreamDestroy)(void *);
    int (*StreamQuery)(void *);
    int (*StreamSynchronize)(void *);
    int (*LaunchHostFunc)(void *, void (*)(void *), void *);
    int (*StreamBeginCapture)(void *, int);
    int (*StreamEndCapture)(void *, void **);
    int (*GraphInstantiate)(void **, void *, unsigned long long);
    int (*GraphLaunch)(void *, void *);
    int (*GraphExecDestroy)(void *);
    int (*GraphDestroy)(void *);
} cu_fns;

static int cu_open(cu_fns *f) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) return 0;
    int all = 1;
#define LOAD(field, name)                            \
    do {                                             \
        void *sym_ = dlsym(h, name);                 \
        all = all && sym_ != NULL;                   \
        memcpy(&f->field, &sym_, sizeof sym_);       \
    } while (0)
    LOAD(Init, "cuInit");
    LOAD(DeviceGet, "cuDeviceGet");
    LOAD(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    LOAD(CtxSetCurrent, "cuCtxSetCurrent");
    LOAD(StreamCreate, "cuStreamCreate");
    LOAD(StreamDestroy, "cuStreamDestroy_v2");
    LOAD(StreamQuery, "cuStreamQuery");
    LOAD(StreamSynchronize, "cuStreamSynchronize");
    LOAD(LaunchHostFunc, "cuLaunchHostFunc");
    LOAD(StreamBeginCapture, "cuStreamBeginCapture_v2");
    LOAD(StreamEndCapture, "cuStreamEndCapture");
    LOAD(GraphInstantiate, "cuGraphInstantiateWithFlags");
    LOAD(GraphLaunch, "cuGraphLaunch");
    LOAD(GraphExecDestroy, "cuGraphExecDestroy");
    LOAD(GraphDestroy, "cuGraphDestroy");
#undef LOAD
    return all;
}

static atomic_int released;

/* Runs on the driver's thread when the stream reaches it: holds the stream until released. */
static void hold_stream(void *p) {
    (void)p;
    while (!atomic_load(&released)) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

static const char *add_cu =
    "__global__ void add(float *v, float s) {\n"
    "    long i = (long)blockIdx.x * B + threadIdx.x;\n"
    "    v[i] += s;\n"
    "}\n";

static kt_op *add_op(kt_context *ctx, size_t dev, const char *name) {
    kt_op *op = NULL;
    if (kt_op_create(ctx, name, &op) != KT_OK || kt_op_set_device(op, dev) != KT_OK ||
        kt_op_add_buffer(op, "v", KT_TYPE_F32, KT_READ_WRITE) != KT_OK || kt_op_add_scalar(op, "s", KT_TYPE_F32) != KT_OK)
        return NULL;
    kt_space *sp = NULL;
    const char *grid[3] = {"v // B", NULL, NULL}, *block[3] = {"B", NULL, NULL};
    if (kt_space_create(&sp) != KT_OK || kt_space_add_input(sp, "v") != KT_OK || kt_space_add_param(sp, "B", "[128, 256]") != KT_OK ||
        kt_space_set_geometry(sp, KT_GEOMETRY_GRID, grid, block, NULL) != KT_OK ||
        kt_op_add_variants(op, "add", sp, add_cu, "add", NULL, 0) != KT_OK)
        op = NULL;
    kt_space_destroy(sp);
    return op;
}

static int all_equal(const float *v, int n, float want) {
    for (int i = 0; i < n; i++)
        if (v[i] != want + (float)(i % 1000)) return 0;
    return 1;
}

static void check_async(void) {
    kt_context *ctx = context();
    size_t dev = cuda_device(ctx);
    cu_fns cu;
    if (dev == (size_t)-1 || !cu_open(&cu)) return;
    enum { M = 1 << 16, HELD = 256, BACK_TO_BACK = 10000, CAPTURED = 100 };
    float *v = malloc(M * sizeof *v);
    for (int i = 0; i < M; i++) v[i] = (float)(i % 1000);
    void *dv, *cuctx = NULL, *stream = NULL;
    int cudev = 0;
    OK(kt_device_alloc(ctx, dev, M * sizeof *v, &dv));
    OK(kt_device_write(ctx, dev, dv, v, M * sizeof *v));
    CHECK(cu.Init(0) == 0 && cu.DeviceGet(&cudev, 0) == 0 && cu.DevicePrimaryCtxRetain(&cuctx, cudev) == 0 &&
              cu.CtxSetCurrent(cuctx) == 0 && cu.StreamCreate(&stream, 1 /* CU_STREAM_NON_BLOCKING */) == 0,
          "a stream of the check's own");
    kt_op *op = add_op(ctx, dev, "addasync"), *untuned = add_op(ctx, dev, "adduntuned");
    CHECK(op && untuned, "ops: %s", kt_last_error());
    if (!op || !untuned || !stream) return;
    kt_arg args[] = {kt_arg_buf(dv, M * sizeof *v), kt_arg_f32(1.0f)};

    OK(kt_op_call_async(op, stream, args, 2)); /* a miss: tuned, then the winner enqueued on the stream */
    CHECK(cu.StreamSynchronize(stream) == 0, "synchronise");
    OK(kt_device_read(ctx, dev, v, dv, M * sizeof *v));
    CHECK(all_equal(v, M, 1.0f), "one launch of the winner after the miss");

    /* hits on a held stream: each returns at once, its kernel waiting for the stream (fewer than
     * the driver's queue of pending launches holds: past that, a launch waits for room) */
    atomic_store(&released, 0);
    CHECK(cu.LaunchHostFunc(stream, hold_stream, NULL) == 0, "hold the stream");
    for (int k = 0; k < HELD; k++) OK(kt_op_call_async(op, stream, args, 2));
    CHECK(cu.StreamQuery(stream) == 600 /* CUDA_ERROR_NOT_READY */, "the hits returned before their kernels ran");
    OK(kt_device_read(ctx, dev, v, dv, M * sizeof *v)); /* the legacy stream does not wait for a non-blocking one */
    CHECK(all_equal(v, M, 1.0f), "nothing ran while the stream was held");
    atomic_store(&released, 1);
    CHECK(cu.StreamSynchronize(stream) == 0, "synchronise");
    OK(kt_device_read(ctx, dev, v, dv, M * sizeof *v));
    CHECK(all_equal(v, M, 1.0f + HELD), "the held launches, in order, as direct launches");
    /* 10,000 hits back to back, one synchronisation at the end */
    for (int k = 0; k < BACK_TO_BACK; k++) OK(kt_op_call_async(op, stream, args, 2));
    CHECK(cu.StreamSynchronize(stream) == 0, "synchronise");
    OK(kt_device_read(ctx, dev, v, dv, M * sizeof *v));
    CHECK(all_equal(v, M, 1.0f + HELD + BACK_TO_BACK), "10,000 launches as 10,000 direct launches");

    /* the thread's current context changed under the hit path (here: none): it sets its own */
    CHECK(cu.CtxSetCurrent(NULL) == 0, "no current context");
    OK(kt_op_call_async(op, stream, args, 2));
    CHECK(cu.StreamSynchronize(stream) == 0, "synchronise");
    OK(kt_device_read(ctx, dev, v, dv, M * sizeof *v));
    CHECK(all_equal(v, M, 2.0f + HELD + BACK_TO_BACK), "a hit after another context was made current");

    /* a graph captured from the stream: 100 hits; a miss of another op is refused and leaves the
     * capture valid; the graph replays the 100 launches */
    void *graph = NULL, *exec = NULL;
    CHECK(cu.StreamBeginCapture(stream, 2 /* CU_STREAM_CAPTURE_MODE_RELAXED */) == 0, "begin capture");
    for (int k = 0; k < CAPTURED; k++) OK(kt_op_call_async(op, stream, args, 2));
    kt_status st = kt_op_call_async(untuned, stream, args, 2);
    CHECK(st == KT_ERR_CAPTURING && strstr(kt_last_error(), "is being captured") != NULL && strstr(kt_last_error(), "kt_op_tune") != NULL,
          "a miss under capture: %s %s",
          kt_status_name(st), kt_last_error());
    CHECK(cu.StreamEndCapture(stream, &graph) == 0 && graph != NULL, "the capture is still valid");
    CHECK(cu.GraphInstantiate(&exec, graph, 0) == 0, "instantiate");
    OK(kt_device_read(ctx, dev, v, dv, M * sizeof *v));
    CHECK(all_equal(v, M, 2.0f + HELD + BACK_TO_BACK), "capturing ran nothing");
    CHECK(cu.GraphLaunch(exec, stream) == 0 && cu.StreamSynchronize(stream) == 0, "replay");
    OK(kt_device_read(ctx, dev, v, dv, M * sizeof *v));
    CHECK(all_equal(v, M, 2.0f + HELD + BACK_TO_BACK + CAPTURED), "the graph replays the 100 captured launches");
    CHECK(kt_op_tune_count(op) == 1 && kt_op_tune_count(untuned) == 0, "tunings: %llu and %llu",
          (unsigned long long)kt_op_tune_count(op), (unsigned long long)kt_op_tune_count(untuned));
    if (exec) cu.GraphExecDestroy(exec);
    if (graph) cu.GraphDestroy(graph);
    cu.StreamDestroy(stream);
    kt_device_free(ctx, dev, dv);
    free(v);
    kt_context_destroy(ctx);
}

/* Opens a stream of the check's own on device 0's primary context (non-blocking: it never
 * waits for the default stream, nor the default stream for it). */
static void *own_stream(cu_fns *cu) {
    void *cuctx = NULL, *stream = NULL;
    int cudev = 0;
    if (cu->Init(0) != 0 || cu->DeviceGet(&cudev, 0) != 0 || cu->DevicePrimaryCtxRetain(&cuctx, cudev) != 0 ||
        cu->CtxSetCurrent(cuctx) != 0 || cu->StreamCreate(&stream, 1 /* CU_STREAM_NON_BLOCKING */) != 0)
        return NULL;
    return stream;
}

/* A kernel that spins for `spin` clock cycles, then writes v: the earlier work on a stream that
 * is still writing a buffer when the next call is made. */
static const char *slowwrite_cu =
    "__global__ void slowwrite(float *v, long long spin) {\n"
    "    long long t0 = clock64();\n"
    "    while (clock64() - t0 < spin) { }\n"
    "    long i = (long)blockIdx.x * B + threadIdx.x;\n"
    "    v[i] = (float)(i % 1000) + 100.0f;\n"
    "}\n";

/* An in-place op called on a stream right after a kernel that writes its input (a miss: it
 * tunes) ends with exactly the direct sequence's bytes: the tuning waited for the writer. */
static void check_inplace_after_writer(void) {
    kt_context *ctx = context();
    size_t dev = cuda_device(ctx);
    cu_fns cu;
    if (dev == (size_t)-1 || !cu_open(&cu)) return;
    enum { M = 1 << 16 };
    float *v = malloc(M * sizeof *v);
    for (int i = 0; i < M; i++) v[i] = (float)(i % 1000);
    void *dv, *stream = own_stream(&cu);
    CHECK(stream != NULL, "a stream of the check's own");
    OK(kt_device_alloc(ctx, dev, M * sizeof *v, &dv));
    OK(kt_device_write(ctx, dev, dv, v, M * sizeof *v));
    kt_op *writer = NULL, *add = add_op(ctx, dev, "addafterwriter");
    OK(kt_op_create(ctx, "slowwrite", &writer));
    OK(kt_op_set_device(writer, dev));
    OK(kt_op_add_buffer(writer, "v", KT_TYPE_F32, KT_WRITE_ONLY));
    OK(kt_op_add_scalar(writer, "spin", KT_TYPE_I64));
    kt_space *sp = NULL;
    const char *grid[3] = {"v // B", NULL, NULL}, *block[3] = {"B", NULL, NULL};
    OK(kt_space_create(&sp));
    OK(kt_space_add_input(sp, "v"));
    OK(kt_space_add_param(sp, "B", "[256]"));
    OK(kt_space_set_geometry(sp, KT_GEOMETRY_GRID, grid, block, NULL));
    OK(kt_op_add_variants(writer, "slowwrite", sp, slowwrite_cu, "slowwrite", NULL, 0));
    kt_space_destroy(sp);
    CHECK(add != NULL && stream != NULL, "ops: %s", kt_last_error());
    if (add == NULL || stream == NULL) return;
    kt_arg w[] = {kt_arg_buf(dv, M * sizeof *v), kt_arg_i64(0)};
    OK(kt_op_tune(writer, w, 2)); /* decided ahead: the writer's call below is a hit */
    OK(kt_device_write(ctx, dev, dv, v, M * sizeof *v));
    w[1] = kt_arg_i64(200000000); /* about 0.1 s of spinning, then the write */
    kt_arg a[] = {kt_arg_buf(dv, M * sizeof *v), kt_arg_f32(1.0f)};
    OK(kt_op_call_async(writer, stream, w, 2));
    OK(kt_op_call_async(add, stream, a, 2)); /* a miss: waits for the writer, tunes, enqueues the winner */
    CHECK(cu.StreamSynchronize(stream) == 0, "synchronise");
    OK(kt_device_read(ctx, dev, v, dv, M * sizeof *v));
    CHECK(all_equal(v, M, 101.0f), "the writer's bytes plus one launch of the winner (v[1] = %g)", v[1]);
    CHECK(kt_op_tune_count(add) == 1, "add tuned once");
    cu.StreamDestroy(stream);
    kt_device_free(ctx, dev, dv);
    free(v);
    kt_context_destroy(ctx);
}

/* ---- a native device candidate: cuBLAS's saxpy on the queue it is given --------------------- */
typedef struct cublas_fns {
    int (*Create)(void **);
    int (*Destroy)(void *);
    int (*SetStream)(void *, void *);
    int (*Saxpy)(void *, int, const float *, const float *, int, float *, int);
} cublas_fns;

typedef struct saxpy_user {
    cublas_fns *b;
    void *handle;
    void *last_queue;
    int calls;
} saxpy_user;

static int cublas_saxpy(const kt_arg *args, size_t nargs, kt_queue queue, void *user) {
    saxpy_user *u = user;
    (void)nargs;
    u->calls++;
    u->last_queue = queue;
    int rc = u->b->SetStream(u->handle, queue);
    float alpha = args[2].f32;
    if (rc == 0) rc = u->b->Saxpy(u->handle, (int)(args[0].bytes / sizeof(float)), &alpha, args[0].ptr, 1, args[1].ptr, 1);
    return rc;
}

static const char *axpy_cu =
    "__global__ void axpy(const float *x, float *y, float a) {\n"
    "    long i = (long)blockIdx.x * B + threadIdx.x;\n"
    "    y[i] += a * x[i];\n"
    "}\n";

static kt_op *axpy_op(kt_context *ctx, size_t dev, const char *name, int with_kernel, saxpy_user *su) {
    kt_op *op = NULL;
    if (kt_op_create(ctx, name, &op) != KT_OK || kt_op_set_device(op, dev) != KT_OK ||
        kt_op_add_buffer(op, "x", KT_TYPE_F32, KT_READ_ONLY) != KT_OK ||
        kt_op_add_buffer(op, "y", KT_TYPE_F32, KT_READ_WRITE) != KT_OK || kt_op_add_scalar(op, "a", KT_TYPE_F32) != KT_OK)
        return NULL;
    if (with_kernel) {
        kt_space *sp = NULL;
        const char *grid[3] = {"x // B", NULL, NULL}, *block[3] = {"B", NULL, NULL};
        if (kt_space_create(&sp) != KT_OK || kt_space_add_input(sp, "x") != KT_OK || kt_space_add_param(sp, "B", "[256]") != KT_OK ||
            kt_space_set_geometry(sp, KT_GEOMETRY_GRID, grid, block, NULL) != KT_OK ||
            kt_op_add_variants(op, "kernel", sp, axpy_cu, "axpy", NULL, 0) != KT_OK)
            op = NULL;
        kt_space_destroy(sp);
    }
    if (op && kt_op_add_native_queued(op, "cublas", cublas_saxpy, su) != KT_OK) op = NULL;
    return op;
}

static void check_native_queued(void) {
    kt_context *ctx = context();
    size_t dev = cuda_device(ctx);
    cu_fns cu;
    if (dev == (size_t)-1 || !cu_open(&cu)) return;
    static const char *const libs[] = {"libcublas.so", "libcublas.so.13", "libcublas.so.12", "/usr/local/cuda/lib64/libcublas.so"};
    void *h = NULL;
    for (size_t i = 0; h == NULL && i < sizeof libs / sizeof libs[0]; i++) h = dlopen(libs[i], RTLD_NOW | RTLD_LOCAL);
    CHECK(h != NULL, "cuBLAS is installed: %s", dlerror());
    if (h == NULL) return;
    cublas_fns b;
    void *p;
    p = dlsym(h, "cublasCreate_v2"), memcpy(&b.Create, &p, sizeof p);
    p = dlsym(h, "cublasDestroy_v2"), memcpy(&b.Destroy, &p, sizeof p);
    p = dlsym(h, "cublasSetStream_v2"), memcpy(&b.SetStream, &p, sizeof p);
    p = dlsym(h, "cublasSaxpy_v2"), memcpy(&b.Saxpy, &p, sizeof p);
    void *stream = own_stream(&cu); /* (makes the primary context current for cublasCreate) */
    saxpy_user su = {.b = &b};
    CHECK(stream && b.Create && b.Destroy && b.SetStream && b.Saxpy && b.Create(&su.handle) == 0, "cuBLAS handle and stream");
    if (su.handle == NULL || stream == NULL) return;
    enum { M = 1 << 16, HELD = 16, CAPTURED = 10 };
    float *x = malloc(M * sizeof *x), *y = malloc(M * sizeof *y);
    for (int i = 0; i < M; i++) x[i] = 1.0f, y[i] = (float)(i % 1000);
    void *dx, *dy;
    OK(kt_device_alloc(ctx, dev, M * sizeof *x, &dx));
    OK(kt_device_alloc(ctx, dev, M * sizeof *y, &dy));
    OK(kt_device_write(ctx, dev, dx, x, M * sizeof *x));
    OK(kt_device_write(ctx, dev, dy, y, M * sizeof *y));
    kt_arg args[] = {kt_arg_buf(dx, M * sizeof *x), kt_arg_buf(dy, M * sizeof *y), kt_arg_f32(1.0f)};

    /* tuned against the kernel: both validated and timed on the device */
    kt_op *both = axpy_op(ctx, dev, "axpy", 1, &su);
    CHECK(both != NULL, "op: %s", kt_last_error());
    if (both == NULL) return;
    OK(kt_op_call_async(both, stream, args, 3));
    CHECK(cu.StreamSynchronize(stream) == 0, "synchronise");
    OK(kt_device_read(ctx, dev, y, dy, M * sizeof *y));
    CHECK(all_equal(y, M, 1.0f), "one launch of the winner after the miss");
    const kt_decision *d = NULL;
    OK(kt_op_decision(both, args, 3, &d));
    for (size_t i = 0; i < kt_decision_unit_count(d); i++)
        CHECK(kt_decision_unit_outcome(d, i) == KT_OUTCOME_MEASURED && kt_decision_unit_time_ns(d, i) > 0,
              "unit %zu (%s) measured on the device: %s, %.0f ns", i, kt_op_candidate_name(both, kt_decision_unit_candidate(d, i)),
              kt_outcome_name(kt_decision_unit_outcome(d, i)), kt_decision_unit_time_ns(d, i));
    printf("cuBLAS saxpy %.0f ns, kernel %.0f ns: winner %s\n", kt_decision_unit_time_ns(d, 1), kt_decision_unit_time_ns(d, 0),
           kt_op_candidate_name(both, kt_decision_winner(d)));
    CHECK(su.calls >= 2, "cuBLAS ran in the tuning (%d calls)", su.calls);

    /* cuBLAS alone: hits on a held stream return at once; a graph captures them */
    kt_op *only = axpy_op(ctx, dev, "axpy-cublas", 0, &su);
    CHECK(only != NULL, "op: %s", kt_last_error());
    if (only == NULL) return;
    OK(kt_device_write(ctx, dev, dy, y, M * sizeof *y)); /* y = i % 1000 + 1 */
    OK(kt_op_tune(only, args, 3));
    atomic_store(&released, 0);
    CHECK(cu.LaunchHostFunc(stream, hold_stream, NULL) == 0, "hold the stream");
    for (int k = 0; k < HELD; k++) OK(kt_op_call_async(only, stream, args, 3));
    CHECK(su.last_queue == stream, "the native got the caller's stream");
    CHECK(cu.StreamQuery(stream) == 600 /* CUDA_ERROR_NOT_READY */, "the hits returned before their work ran");
    OK(kt_device_read(ctx, dev, y, dy, M * sizeof *y));
    CHECK(all_equal(y, M, 1.0f), "nothing ran while the stream was held");
    atomic_store(&released, 1);
    CHECK(cu.StreamSynchronize(stream) == 0, "synchronise");
    OK(kt_device_read(ctx, dev, y, dy, M * sizeof *y));
    CHECK(all_equal(y, M, 1.0f + HELD), "the held saxpys, in order");
    void *graph = NULL, *exec = NULL;
    CHECK(cu.StreamBeginCapture(stream, 2 /* CU_STREAM_CAPTURE_MODE_RELAXED */) == 0, "begin capture");
    for (int k = 0; k < CAPTURED; k++) OK(kt_op_call_async(only, stream, args, 3));
    CHECK(cu.StreamEndCapture(stream, &graph) == 0 && graph != NULL, "the capture is valid");
    CHECK(cu.GraphInstantiate(&exec, graph, 0) == 0, "instantiate");
    CHECK(cu.GraphLaunch(exec, stream) == 0 && cu.StreamSynchronize(stream) == 0, "replay");
    OK(kt_device_read(ctx, dev, y, dy, M * sizeof *y));
    CHECK(all_equal(y, M, 1.0f + HELD + CAPTURED), "the graph replays the captured saxpys");
    OK(kt_op_call(only, args, 3)); /* the default stream, waited for */
    CHECK(su.last_queue == NULL, "kt_op_call passes the default stream");
    OK(kt_device_read(ctx, dev, y, dy, M * sizeof *y));
    CHECK(all_equal(y, M, 2.0f + HELD + CAPTURED), "kt_op_call's saxpy finished when it returned");
    if (exec) cu.GraphExecDestroy(exec);
    if (graph) cu.GraphDestroy(graph);

    /* a miss under capture, by option, enqueues the cuBLAS fallback on the captured stream and
     * defers the key; kt_op_tune_deferred tunes it after the capture; then it is a hit */
    kt_op *fb = axpy_op(ctx, dev, "axpy-fallback", 1, &su);
    CHECK(fb && kt_op_set_fallback(fb, "cublas") == KT_OK && kt_op_set_capture_miss(fb, KT_CAPTURE_MISS_FALLBACK) == KT_OK,
          "op: %s", kt_last_error());
    if (fb == NULL) return;
    graph = exec = NULL;
    CHECK(cu.StreamBeginCapture(stream, 2 /* CU_STREAM_CAPTURE_MODE_RELAXED */) == 0, "begin capture");
    OK(kt_op_call_async(fb, stream, args, 3));
    CHECK(su.last_queue == stream, "the fallback got the captured stream");
    CHECK(cu.StreamEndCapture(stream, &graph) == 0 && graph != NULL, "the capture is valid");
    CHECK(kt_op_deferred_count(fb) == 1 && kt_op_tune_count(fb) == 0, "deferred %zu, tuned %llu", kt_op_deferred_count(fb),
          (unsigned long long)kt_op_tune_count(fb));
    CHECK(cu.GraphInstantiate(&exec, graph, 0) == 0 && cu.GraphLaunch(exec, stream) == 0 && cu.StreamSynchronize(stream) == 0,
          "replay");
    OK(kt_device_read(ctx, dev, y, dy, M * sizeof *y));
    CHECK(all_equal(y, M, 3.0f + HELD + CAPTURED), "the graph replays the fallback's saxpy");
    size_t tuned = 0;
    OK(kt_op_tune_deferred(fb, &tuned));
    CHECK(tuned == 1 && kt_op_deferred_count(fb) == 0 && kt_op_tune_count(fb) == 1, "the deferred key tuned");
    OK(kt_device_read(ctx, dev, y, dy, M * sizeof *y));
    CHECK(all_equal(y, M, 3.0f + HELD + CAPTURED), "tuning a deferred key leaves the caller's buffers alone");
    OK(kt_op_call_async(fb, stream, args, 3));
    CHECK(cu.StreamSynchronize(stream) == 0, "synchronise");
    OK(kt_device_read(ctx, dev, y, dy, M * sizeof *y));
    CHECK(all_equal(y, M, 4.0f + HELD + CAPTURED), "then a hit");
    if (exec) cu.GraphExecDestroy(exec);
    if (graph) cu.GraphDestroy(graph);
    b.Destroy(su.handle);
    cu.StreamDestroy(stream);
    kt_device_free(ctx, dev, dx);
    kt_device_free(ctx, dev, dy);
    free(x), free(y);
    kt_context_destroy(ctx);
}

/* ---- two threads, two streams, two keys: no wait across streams on the hit path ------------- */
typedef struct stream_caller {
    kt_op *op;
    cu_fns *cu;
    void *stream;
    kt_arg args[2];
    int calls, sync;
    kt_status st;
    int synced;
    atomic_int done;  /* calls returned so far */
    atomic_int phase; /* 0 not started, 1 calling, 2 synchronising, 3 finished */
} stream_caller;

static void *call_on_stream(void *p) {
    stream_caller *c = p;
    c->st = KT_OK;
    atomic_store(&c->phase, 1);
    for (int k = 0; k < c->calls && c->st == KT_OK; k++) {
        c->st = kt_op_call_async(c->op, c->stream, c->args, 2);
        atomic_fetch_add(&c->done, 1);
    }
    atomic_store(&c->phase, 2);
    if (c->sync) c->synced = c->cu->StreamSynchronize(c->stream);
    atomic_store(&c->phase, 3);
    return NULL;
}

static stream_caller *stuck_callers[2]; /* A, B: what the alarm reports */

/* Appends text, then a number, to buf at *at (async-signal-safe: no stdio). */
static void put_num(char *buf, size_t *at, const char *text, long v) {
    while (*text && *at < 250) buf[(*at)++] = *text++;
    char d[24];
    int n = 0;
    if (v < 0) buf[(*at)++] = '-', v = -v;
    do d[n++] = (char)('0' + v % 10), v /= 10; while (v && n < 23);
    while (n && *at < 250) buf[(*at)++] = d[--n];
}

/* The alarm: says how far each thread got (which of them is stuck, and where: calling or in
 * cuStreamSynchronize), then has gdb (else eu-stack) print every thread's stack, the driver's
 * included, and ends the process. */
static void stuck(int sig) {
    (void)sig;
    static const char msg[] = "FAIL: two streams: a thread waited while stream A was held\n";
    if (write(1, msg, sizeof msg - 1) < 0) _exit(3);
    char buf[256];
    size_t at = 0;
    for (int t = 0; t < 2 && stuck_callers[t]; t++) {
        put_num(buf, &at, t ? "; B: calls returned " : "  A: calls returned ", atomic_load(&stuck_callers[t]->done));
        put_num(buf, &at, " of ", stuck_callers[t]->calls);
        put_num(buf, &at, ", phase ", atomic_load(&stuck_callers[t]->phase));
    }
    buf[at++] = '\n';
    if (write(1, buf, at) < 0) _exit(3);
    char pid[24];
    size_t pn = 0;
    put_num(pid, &pn, "", (long)getpid());
    pid[pn] = '\0';
#if defined(__linux__)
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0); /* Yama: let the child attach */
#endif
    pid_t child = fork();
    if (child == 0) {
        dup2(1, 2);
        execlp("gdb", "gdb", "-batch", "-nx", "-p", pid, "-ex", "info threads", "-ex", "thread apply all bt", (char *)NULL);
        execlp("eu-stack", "eu-stack", "-p", pid, (char *)NULL);
        _exit(127);
    }
    if (child > 0) waitpid(child, NULL, 0);
    _exit(2);
}

static void check_two_streams(void) {
    kt_context *ctx = context();
    size_t dev = cuda_device(ctx);
    cu_fns cu;
    if (dev == (size_t)-1 || !cu_open(&cu)) return;
    enum { MA = 1 << 12, MB = 1 << 13, CALLS = 50 };
    float *v = malloc(MB * sizeof *v);
    for (int i = 0; i < MB; i++) v[i] = (float)(i % 1000);
    void *da, *db, *sa = own_stream(&cu), *sb = NULL;
    CHECK(sa && cu.StreamCreate(&sb, 1) == 0, "two streams");
    OK(kt_device_alloc(ctx, dev, MA * sizeof *v, &da));
    OK(kt_device_alloc(ctx, dev, MB * sizeof *v, &db));
    kt_op *op = add_op(ctx, dev, "addstreams");
    CHECK(op && kt_op_key_arg(op, 0, KT_BUCKET_EXACT) == KT_OK, "op: %s", kt_last_error()); /* the size: two keys */
    if (!op || !sa || !sb) return;
    stream_caller ca = {op, &cu, sa, {kt_arg_buf(da, MA * sizeof *v), kt_arg_f32(1.0f)}, CALLS, 0, KT_OK, 0, 0, 0};
    stream_caller cb = {op, &cu, sb, {kt_arg_buf(db, MB * sizeof *v), kt_arg_f32(1.0f)}, CALLS, 1, KT_OK, 0, 0, 0};
    OK(kt_op_tune(op, ca.args, 2));
    OK(kt_op_tune(op, cb.args, 2));
    const kt_decision *wa = NULL, *wb = NULL; /* which kernels the hits launch (the first time in this process) */
    if (kt_op_decision(op, ca.args, 2, &wa) == KT_OK && kt_op_decision(op, cb.args, 2, &wb) == KT_OK)
        printf("two streams: winners %s (A) and %s (B)\n", kt_decision_unit_config(wa, kt_decision_winner_unit(wa)),
               kt_decision_unit_config(wb, kt_decision_winner_unit(wb)));
    stuck_callers[0] = &ca, stuck_callers[1] = &cb;
    OK(kt_device_write(ctx, dev, da, v, MA * sizeof *v));
    OK(kt_device_write(ctx, dev, db, v, MB * sizeof *v));
    atomic_store(&released, 0);
    CHECK(cu.LaunchHostFunc(sa, hold_stream, NULL) == 0, "hold stream A");
    void (*was)(int) = signal(SIGALRM, stuck);
    alarm(60);
    pthread_t ta, tb;
    pthread_create(&ta, NULL, call_on_stream, &ca);
    pthread_create(&tb, NULL, call_on_stream, &cb);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL); /* B synchronised its stream while A is held */
    alarm(0);
    signal(SIGALRM, was);
    CHECK(ca.st == KT_OK && cb.st == KT_OK && cb.synced == 0, "both threads' hits: %s %s", kt_status_name(ca.st),
          kt_status_name(cb.st));
    CHECK(cu.StreamQuery(sa) == 600, "A is still held");
    OK(kt_device_read(ctx, dev, v, db, MB * sizeof *v));
    CHECK(all_equal(v, MB, (float)CALLS), "B's fifty launches ran while A was held");
    OK(kt_device_read(ctx, dev, v, da, MA * sizeof *v));
    CHECK(all_equal(v, MA, 0.0f), "A's wait for A's hold");
    atomic_store(&released, 1);
    CHECK(cu.StreamSynchronize(sa) == 0, "synchronise A");
    OK(kt_device_read(ctx, dev, v, da, MA * sizeof *v));
    CHECK(all_equal(v, MA, (float)CALLS), "A's fifty launches, after the hold");
    CHECK(kt_op_tune_count(op) == 2, "two keys tuned once each");
    cu.StreamDestroy(sa);
    cu.StreamDestroy(sb);
    kt_device_free(ctx, dev, da);
    kt_device_free(ctx, dev, db);
    free(v);
    kt_context_destroy(ctx);
}

int main(void) {
    cuda_check_begin("stream checks");
    check_async();
    check_inplace_after_writer();
    check_native_queued();
    check_two_streams();
    return cuda_check_end();
}
