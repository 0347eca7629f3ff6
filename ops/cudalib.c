/*
 * cudalib.c - the CUDA driver functions the example ops need, opened at run time (dlopen), and
 * the calling thread's error message.
 */
#include "cuda_ops.h"
#include "cudalib.h"

#include <kerntune/device.h>

#include <dlfcn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static _Thread_local char last_error[512];

const char *ktops_last_error(void) { return last_error; }

kt_status ktops__fail(kt_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return status;
}

void *ktops__sym(void *lib, const char *name, int *missing) {
    void *p = dlsym(lib, name);
    if (p == NULL) *missing = 1;
    return p;
}

kt_status ktops_cuda_open(kt_context *ctx, size_t device, ktops_cuda **out) {
    if (out == NULL || ctx == NULL) return ktops__fail(KT_ERR_INVALID_ARGUMENT, "ktops_cuda_open: ctx and out must not be NULL");
    *out = NULL;
    const kt_device *dev = kt_context_device(ctx, device);
    if (dev == NULL || strcmp(kt_device_backend(dev), "cuda") != 0)
        return ktops__fail(KT_ERR_INVALID_ARGUMENT, "ktops_cuda_open: device %zu is not a CUDA device", device);
    int ordinal = 0; /* the backend lists the driver's devices in order */
    for (size_t i = 0; i < device; i++)
        if (strcmp(kt_device_backend(kt_context_device(ctx, i)), "cuda") == 0) ordinal++;
    ktops_cuda *cu = calloc(1, sizeof *cu);
    if (cu == NULL) return ktops__fail(KT_ERR_NO_MEMORY, "ktops_cuda_open: out of memory");
    cu->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (cu->lib == NULL) {
        free(cu);
        return ktops__fail(KT_ERR_BACKEND, "ktops_cuda_open: libcuda.so.1: %s", dlerror());
    }
    int missing = 0;
    KTOPS__LOAD(cu, Init, "cuInit");
    KTOPS__LOAD(cu, DeviceGet, "cuDeviceGet");
    KTOPS__LOAD(cu, DeviceGetAttribute, "cuDeviceGetAttribute");
    KTOPS__LOAD(cu, PrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    KTOPS__LOAD(cu, PrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
    KTOPS__LOAD(cu, CtxSetCurrent, "cuCtxSetCurrent");
    KTOPS__LOAD(cu, MemAlloc, "cuMemAlloc_v2");
    KTOPS__LOAD(cu, MemFree, "cuMemFree_v2");
    KTOPS__LOAD(cu, StreamCreate, "cuStreamCreate");
    KTOPS__LOAD(cu, StreamDestroy, "cuStreamDestroy_v2");
    KTOPS__LOAD(cu, StreamSynchronize, "cuStreamSynchronize");
    KTOPS__LOAD(cu, EventCreate, "cuEventCreate");
    KTOPS__LOAD(cu, EventDestroy, "cuEventDestroy_v2");
    KTOPS__LOAD(cu, EventRecord, "cuEventRecord");
    KTOPS__LOAD(cu, EventSynchronize, "cuEventSynchronize");
    KTOPS__LOAD(cu, EventElapsedTime, "cuEventElapsedTime");
    KTOPS__LOAD(cu, LaunchHostFunc, "cuLaunchHostFunc");
    KTOPS__LOAD(cu, GetErrorString, "cuGetErrorString");
    int rc = 0, major = 0, minor = 0, optional = 0;
    KTOPS__LOAD_AS(cu, TensorMapEncodeTiled, "cuTensorMapEncodeTiled", optional); /* the wgmma kernels' only */
    (void)optional;
    if (missing) {
        ktops_cuda_close(cu);
        return ktops__fail(KT_ERR_BACKEND, "ktops_cuda_open: libcuda.so.1 lacks a driver function the ops need");
    }
    if ((rc = cu->Init(0)) != 0 || (rc = cu->DeviceGet(&cu->dev, ordinal)) != 0 ||
        (rc = cu->PrimaryCtxRetain(&cu->ctx, cu->dev)) != 0) {
        ktops_cuda_close(cu);
        return ktops__fail(KT_ERR_BACKEND, "ktops_cuda_open: starting CUDA device %d failed (CUresult %d)", ordinal, rc);
    }
    cu->retained = 1;
    if ((rc = cu->CtxSetCurrent(cu->ctx)) != 0 ||
        (rc = cu->DeviceGetAttribute(&cu->sms, 16 /* CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT */, cu->dev)) != 0 ||
        (rc = cu->DeviceGetAttribute(&major, 75 /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR */, cu->dev)) != 0 ||
        (rc = cu->DeviceGetAttribute(&minor, 76 /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR */, cu->dev)) != 0) {
        ktops_cuda_close(cu);
        return ktops__fail(KT_ERR_BACKEND, "ktops_cuda_open: querying CUDA device %d failed (CUresult %d)", ordinal, rc);
    }
    cu->cc = major * 10 + minor;
    cu->kctx = ctx, cu->kdev = device;
    *out = cu;
    return KT_OK;
}

void ktops_cuda_close(ktops_cuda *cu) {
    if (cu == NULL) return;
    if (cu->retained) cu->PrimaryCtxRelease(cu->dev);
    if (cu->lib) dlclose(cu->lib);
    free(cu);
}

kt_status ktops__cu(ktops_cuda *cu, int rc, const char *what) {
    if (rc == 0) return KT_OK;
    const char *s = NULL;
    if (cu->GetErrorString == NULL || cu->GetErrorString(rc, &s) != 0 || s == NULL) s = "unknown error";
    return ktops__fail(KT_ERR_BACKEND, "%s failed: CUresult %d (%s)", what, rc, s);
}

kt_status ktops_cuda_make_current(ktops_cuda *cu) { return ktops__cu(cu, cu->CtxSetCurrent(cu->ctx), "cuCtxSetCurrent"); }

int ktops_cuda_sm_count(const ktops_cuda *cu) { return cu ? cu->sms : 0; }

int ktops_cuda_compute_capability(const ktops_cuda *cu) { return cu ? cu->cc : 0; }

kt_status ktops_cuda_stream_create(ktops_cuda *cu, kt_queue *out) {
    kt_status st = ktops_cuda_make_current(cu);
    return st != KT_OK ? st : ktops__cu(cu, cu->StreamCreate(out, 1 /* CU_STREAM_NON_BLOCKING */), "cuStreamCreate");
}

void ktops_cuda_stream_destroy(ktops_cuda *cu, kt_queue stream) {
    if (cu && stream) cu->StreamDestroy(stream);
}

kt_status ktops_cuda_sync(ktops_cuda *cu, kt_queue stream) {
    return ktops__cu(cu, cu->StreamSynchronize(stream), "cuStreamSynchronize");
}

kt_status ktops_cuda_alloc(ktops_cuda *cu, size_t bytes, void **out) {
    kt_status st = ktops_cuda_make_current(cu);
    unsigned long long p = 0;
    if (st == KT_OK) st = ktops__cu(cu, cu->MemAlloc(&p, bytes), "cuMemAlloc");
    *out = (void *)(uintptr_t)p;
    return st;
}

void ktops_cuda_free(ktops_cuda *cu, void *ptr) {
    if (cu && ptr) cu->MemFree((unsigned long long)(uintptr_t)ptr);
}

/* Fails with the message of the enqueue function's ktops_* call (call i of a timing). */
static kt_status enqueue_failed(int i, const char *where) {
    char why[sizeof last_error];
    snprintf(why, sizeof why, "%s", last_error);
    return ktops__fail(KT_ERR_BACKEND, "%s: call %d failed: %s", where, i, why);
}

kt_status ktops_cuda_time(ktops_cuda *cu, kt_queue stream, int (*enqueue)(void *user, kt_queue stream), void *user,
                          int calls, double *ms_per_call) {
    void *start = NULL, *stop = NULL;
    kt_status st = ktops__cu(cu, cu->EventCreate(&start, 0), "cuEventCreate");
    if (st == KT_OK) st = ktops__cu(cu, cu->EventCreate(&stop, 0), "cuEventCreate");
    if (st == KT_OK) st = ktops__cu(cu, cu->EventRecord(start, stream), "cuEventRecord");
    for (int i = 0; st == KT_OK && i < calls; i++)
        if (enqueue(user, stream) != 0) st = enqueue_failed(i, "ktops_cuda_time");
    if (st == KT_OK) st = ktops__cu(cu, cu->EventRecord(stop, stream), "cuEventRecord");
    if (st == KT_OK) st = ktops__cu(cu, cu->EventSynchronize(stop), "cuEventSynchronize");
    float ms = 0;
    if (st == KT_OK) st = ktops__cu(cu, cu->EventElapsedTime(&ms, start, stop), "cuEventElapsedTime");
    if (st == KT_OK) *ms_per_call = ms / (calls > 0 ? calls : 1);
    if (start) cu->EventDestroy(start);
    if (stop) cu->EventDestroy(stop);
    return st;
}

/* A host function that holds its stream until the gate opens (or 100 ms pass): the timed call's
 * events and work are all enqueued behind it, so the device runs them back to back and the
 * start event does not count the host's time to enqueue the work (microseconds for a vendor
 * library's call). kerntune's own timing does the same (src/backends/cuda_variants.c). */
static void gate_wait(void *p) {
    atomic_int *open = p;
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (!atomic_load_explicit(open, memory_order_acquire)) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((now.tv_sec - t0.tv_sec) * 1000000000L + (now.tv_nsec - t0.tv_nsec) > 100000000L) break;
    }
}

kt_status ktops_cuda_time_cold(ktops_cuda *cu, kt_queue stream, int (*enqueue)(void *user, kt_queue stream), void *user,
                               int calls, double *ms_per_call) {
    kt_status st = ktops_cuda_make_current(cu);
    void *start = NULL, *stop = NULL;
    if (st == KT_OK) st = ktops__cu(cu, cu->EventCreate(&start, 0), "cuEventCreate");
    if (st == KT_OK) st = ktops__cu(cu, cu->EventCreate(&stop, 0), "cuEventCreate");
    double total = 0;
    for (int i = 0; st == KT_OK && i < calls; i++) {
        if ((st = kt_device_flush(cu->kctx, cu->kdev)) != KT_OK) { /* waited for: it is done before the events */
            st = ktops__fail(st, "ktops_cuda_time_cold: %s", kt_last_error());
            break;
        }
        atomic_int open;
        atomic_init(&open, 0);
        st = ktops__cu(cu, cu->LaunchHostFunc(stream, gate_wait, &open), "cuLaunchHostFunc (the timing's gate)");
        if (st != KT_OK) break;
        st = ktops__cu(cu, cu->EventRecord(start, stream), "cuEventRecord");
        if (st == KT_OK && enqueue(user, stream) != 0) st = enqueue_failed(i, "ktops_cuda_time_cold");
        if (st == KT_OK) st = ktops__cu(cu, cu->EventRecord(stop, stream), "cuEventRecord");
        atomic_store_explicit(&open, 1, memory_order_release);
        kt_status wait = ktops__cu(cu, cu->StreamSynchronize(stream), "cuStreamSynchronize"); /* the gate reads `open` */
        if (st == KT_OK) st = wait;
        float ms = 0;
        if (st == KT_OK) st = ktops__cu(cu, cu->EventElapsedTime(&ms, start, stop), "cuEventElapsedTime");
        total += ms;
    }
    if (st == KT_OK) *ms_per_call = total / (calls > 0 ? calls : 1);
    if (start) cu->EventDestroy(start);
    if (stop) cu->EventDestroy(stop);
    return st;
}
