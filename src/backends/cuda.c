/*
 * cuda.c - the CUDA backend: the driver API and NVRTC, both opened at run time.
 *
 * libcuda.so.1 and NVRTC are loaded with dlopen when the backend starts, and the few types and
 * constants used are declared here, so the library builds without the CUDA toolkit and runs
 * where CUDA is absent (the backend then says why and is skipped). Without NVRTC it still starts:
 * it compiles nothing, and loads the artifacts a program carries (kerntune aot --embed). Each
 * device works in its
 * primary context. Buffers are device pointers (CUdeviceptr) carried in kt_arg.ptr. Variants:
 * cuda_variants.c.
 */
#include "backends/cuda_int.h"

#include <dlfcn.h>
#include <pthread.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void cu_fini(void *state);

static bool load_driver_symbols(cu_state *s, char *err, size_t errlen) {
#define KT__SYM(lib, field, name)                                           \
    do {                                                                    \
        void *p_ = dlsym(lib, name);                                        \
        if (p_ == NULL) {                                                   \
            snprintf(err, errlen, "the CUDA libraries lack %s", name);      \
            return false;                                                   \
        }                                                                   \
        memcpy(&s->api.field, &p_, sizeof p_);                              \
    } while (0)
    KT__SYM(s->cuda, Init, "cuInit");
    KT__SYM(s->cuda, DriverGetVersion, "cuDriverGetVersion");
    KT__SYM(s->cuda, DeviceGetCount, "cuDeviceGetCount");
    KT__SYM(s->cuda, DeviceGet, "cuDeviceGet");
    KT__SYM(s->cuda, DeviceGetName, "cuDeviceGetName");
    KT__SYM(s->cuda, DeviceGetAttribute, "cuDeviceGetAttribute");
    KT__SYM(s->cuda, DeviceTotalMem, "cuDeviceTotalMem_v2");
    KT__SYM(s->cuda, DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    KT__SYM(s->cuda, DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
    KT__SYM(s->cuda, CtxSetCurrent, "cuCtxSetCurrent");
    KT__SYM(s->cuda, MemAlloc, "cuMemAlloc_v2");
    KT__SYM(s->cuda, MemFree, "cuMemFree_v2");
    KT__SYM(s->cuda, MemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2");
    KT__SYM(s->cuda, MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
    KT__SYM(s->cuda, MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
    KT__SYM(s->cuda, MemsetD8Async, "cuMemsetD8Async");
    KT__SYM(s->cuda, MemsetD16Async, "cuMemsetD16Async");
    KT__SYM(s->cuda, MemsetD32Async, "cuMemsetD32Async");
    KT__SYM(s->cuda, StreamCreate, "cuStreamCreate");
    KT__SYM(s->cuda, StreamDestroy, "cuStreamDestroy_v2");
    KT__SYM(s->cuda, StreamSynchronize, "cuStreamSynchronize");
    KT__SYM(s->cuda, LaunchHostFunc, "cuLaunchHostFunc");
    KT__SYM(s->cuda, StreamIsCapturing, "cuStreamIsCapturing");
    KT__SYM(s->cuda, ModuleLoadData, "cuModuleLoadData");
    KT__SYM(s->cuda, ModuleUnload, "cuModuleUnload");
    KT__SYM(s->cuda, ModuleGetFunction, "cuModuleGetFunction");
    KT__SYM(s->cuda, ModuleGetGlobal, "cuModuleGetGlobal_v2");
    KT__SYM(s->cuda, FuncSetAttribute, "cuFuncSetAttribute");
    KT__SYM(s->cuda, FuncGetAttribute, "cuFuncGetAttribute");
    KT__SYM(s->cuda, LaunchKernel, "cuLaunchKernel");
    KT__SYM(s->cuda, EventCreate, "cuEventCreate");
    KT__SYM(s->cuda, EventRecord, "cuEventRecord");
    KT__SYM(s->cuda, EventSynchronize, "cuEventSynchronize");
    KT__SYM(s->cuda, EventElapsedTime, "cuEventElapsedTime");
    KT__SYM(s->cuda, EventDestroy, "cuEventDestroy_v2");
    KT__SYM(s->cuda, GetErrorString, "cuGetErrorString");
    { /* optional (CUDA 12.4+): finishes loading a lazily loaded function (cuda_variants.c) */
        void *p_ = dlsym(s->cuda, "cuFuncLoad");
        memcpy(&s->api.FuncLoad, &p_, sizeof p_);
    }
    return true;
}

static bool load_nvrtc_symbols(cu_state *s, char *err, size_t errlen) {
    if (s->nvrtc == NULL) return true; /* no compiler: artifacts a program carries still load */
    KT__SYM(s->nvrtc, rtcVersion, "nvrtcVersion");
    KT__SYM(s->nvrtc, rtcCreateProgram, "nvrtcCreateProgram");
    KT__SYM(s->nvrtc, rtcAddNameExpression, "nvrtcAddNameExpression");
    KT__SYM(s->nvrtc, rtcCompileProgram, "nvrtcCompileProgram");
    KT__SYM(s->nvrtc, rtcGetProgramLogSize, "nvrtcGetProgramLogSize");
    KT__SYM(s->nvrtc, rtcGetProgramLog, "nvrtcGetProgramLog");
    KT__SYM(s->nvrtc, rtcGetCUBINSize, "nvrtcGetCUBINSize");
    KT__SYM(s->nvrtc, rtcGetCUBIN, "nvrtcGetCUBIN");
    KT__SYM(s->nvrtc, rtcGetLoweredName, "nvrtcGetLoweredName");
    KT__SYM(s->nvrtc, rtcDestroyProgram, "nvrtcDestroyProgram");
    KT__SYM(s->nvrtc, rtcGetErrorString, "nvrtcGetErrorString");
#undef KT__SYM
    return true;
}

/* Opens NVRTC: KERNTUNE_NVRTC, else the unversioned name, else the versions CUDA 13 to 11
 * install, else the toolkit's default place. */
static void *open_nvrtc(void) {
    const char *env = getenv("KERNTUNE_NVRTC");
    if (env && *env) return dlopen(env, RTLD_NOW | RTLD_LOCAL);
    static const char *const names[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2",
                                        "/usr/local/cuda/lib64/libnvrtc.so", "/usr/local/cuda/lib64/libnvrtc.so.13"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (h) return h;
    }
    return NULL;
}

static int attr(cu_state *s, CUdevice d, int which) {
    int v = 0;
    if (s->api.DeviceGetAttribute == NULL || s->api.DeviceGetAttribute(&v, which, d) != 0) v = 0;
    return v;
}

/* The compile targets KERNTUNE_CUDA_TARGET names (one device fingerprint, as `kerntune devices
 * --json` or a fleet worker's entry gives it, or several separated by ';'), as devices that
 * build and run nothing: a fleet's compile worker on a machine without that GPU (or without any)
 * builds for it, with the artifacts' keys of the GPU's own (the fingerprint and the compiler
 * identity, which takes the driver's version from the fingerprint). False with err on a
 * fingerprint it cannot read. */
static bool add_targets(cu_state *s, const char *list, char *err, size_t errlen) {
    char *copy = strdup(list), *save = NULL;
    if (copy == NULL) {
        snprintf(err, errlen, "out of memory");
        return false;
    }
    bool ok = true;
    for (char *fp = strtok_r(copy, ";", &save); ok && fp; fp = strtok_r(NULL, ";", &save)) {
        const char *bar = strchr(fp, '|'), *cc = strstr(fp, "|cc="), *drv = strstr(fp, "|driver=");
        int major = 0, minor = 0, driver = 0;
        ok = strncmp(fp, "cuda:", 5) == 0 && bar && cc && drv && sscanf(cc, "|cc=%d.%d", &major, &minor) == 2 &&
             sscanf(drv, "|driver=%d", &driver) == 1 && major > 0 && strlen(fp) < KT_DEVICE_FINGERPRINT_MAX;
        if (!ok) {
            snprintf(err, errlen, "KERNTUNE_CUDA_TARGET: '%.200s' is not a CUDA device's fingerprint "
                     "(cuda:NAME|cc=M.N|...|driver=V, as 'kerntune devices --json' gives it)", fp);
            break;
        }
        cu_dev *devs = realloc(s->devs, (s->ndevs + 1) * sizeof *devs);
        if (devs == NULL) {
            snprintf(err, errlen, "out of memory");
            ok = false;
            break;
        }
        s->devs = devs;
        cu_dev *d = &s->devs[s->ndevs++];
        *d = (cu_dev){.cc_major = major, .cc_minor = minor, .driver = driver, .target_only = true};
        snprintf(d->name, sizeof d->name, "%.*s (sm_%d%d, a compile target)", (int)(bar - fp - 5), fp + 5, major, minor);
        snprintf(d->fingerprint, sizeof d->fingerprint, "%s", fp);
        pthread_mutex_init(&d->flush_lock, NULL);
        pthread_mutex_init(&d->check_lock, NULL);
    }
    free(copy);
    return ok;
}

static kt_status cu_init(const kt_backend *self, void **state, char *err, size_t errlen) {
    (void)self;
    const char *targets = getenv("KERNTUNE_CUDA_TARGET");
    if (targets && !*targets) targets = NULL;
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (cuda == NULL && targets == NULL) {
        snprintf(err, errlen, "libcuda.so.1 (the NVIDIA driver) is not installed");
        return KT_ERR_BACKEND;
    }
    void *nvrtc = open_nvrtc(); /* NULL: nothing can be compiled, carried cubins still load */
    if (nvrtc == NULL && cuda == NULL) {
        snprintf(err, errlen, "KERNTUNE_CUDA_TARGET: building for a CUDA device needs NVRTC, which is not installed");
        return KT_ERR_BACKEND;
    }
    cu_state *s = calloc(1, sizeof *s);
    if (s == NULL) {
        if (cuda) dlclose(cuda);
        if (nvrtc) dlclose(nvrtc);
        snprintf(err, errlen, "out of memory");
        return KT_ERR_NO_MEMORY;
    }
    s->cuda = cuda;
    s->nvrtc = nvrtc;
    if ((cuda && !load_driver_symbols(s, err, errlen)) || !load_nvrtc_symbols(s, err, errlen)) {
        cu_fini(s);
        return KT_ERR_BACKEND;
    }
    int count = 0;
    CUresult rc = cuda ? s->api.Init(0) : 0;
    if (cuda && (rc != 0 || (rc = s->api.DeviceGetCount(&count)) != 0)) {
        if (targets == NULL) { /* no GPU here, and none to build for */
            kt__cu_fail(s, rc, "cuInit", err, errlen);
            cu_fini(s);
            return KT_ERR_BACKEND;
        }
        count = 0; /* the targets alone */
    }
    if (cuda && count > 0) s->api.DriverGetVersion(&s->driver);
    if (s->nvrtc) s->api.rtcVersion(&s->rtc_major, &s->rtc_minor);
    s->devs = calloc(count > 0 ? (size_t)count : 1, sizeof *s->devs);
    if (s->devs == NULL) {
        cu_fini(s);
        snprintf(err, errlen, "out of memory");
        return KT_ERR_NO_MEMORY;
    }
    for (int i = 0; i < count; i++) {
        cu_dev *d = &s->devs[s->ndevs];
        if (s->api.DeviceGet(&d->dev, i) != 0 || s->api.DevicePrimaryCtxRetain(&d->ctx, d->dev) != 0) continue;
        char name[200] = "";
        s->api.DeviceGetName(name, sizeof name, d->dev);
        size_t mem = 0;
        s->api.DeviceTotalMem(&mem, d->dev);
        d->cc_major = attr(s, d->dev, ATTR_CC_MAJOR);
        d->cc_minor = attr(s, d->dev, ATTR_CC_MINOR);
        d->driver = s->driver;
        snprintf(d->name, sizeof d->name, "%s (sm_%d%d)", name, d->cc_major, d->cc_minor);
        /* (NVRTC's version is the compiler's identity, in a variant group's candidate set and its
         * artifacts' keys, not the device's: a program without NVRTC runs on the same device) */
        snprintf(d->fingerprint, sizeof d->fingerprint, "cuda:%s|cc=%d.%d|sms=%d|mem=%zu|l2=%d|driver=%d", name,
                 d->cc_major, d->cc_minor, attr(s, d->dev, ATTR_MULTIPROCESSOR_COUNT), mem,
                 attr(s, d->dev, ATTR_L2_CACHE_SIZE), s->driver);
        pthread_mutex_init(&d->flush_lock, NULL);
        pthread_mutex_init(&d->check_lock, NULL);
        s->ndevs++;
    }
    if (targets && !add_targets(s, targets, err, errlen)) {
        cu_fini(s);
        return KT_ERR_INVALID_ARGUMENT;
    }
    *state = s;
    return KT_OK;
}

static void cu_fini(void *state) {
    cu_state *s = state;
    if (s == NULL) return;
    for (size_t i = 0; i < s->ndevs; i++) {
        cu_dev *d = &s->devs[i];
        kt__cu_check_join(s, i);
        if (d->target_only) { /* nothing of the driver's */
            pthread_mutex_destroy(&d->flush_lock);
            pthread_mutex_destroy(&d->check_lock);
            continue;
        }
        if ((d->flush || d->own || d->timed || d->check_mod) && s->api.CtxSetCurrent(d->ctx) == 0) {
            if (d->flush) s->api.MemFree(d->flush);
            kt__cu_check_free(s, i);
            if (d->own) s->api.StreamDestroy(d->own);
            if (d->timed) s->api.StreamDestroy(d->timed);
        }
        pthread_mutex_destroy(&d->flush_lock);
        pthread_mutex_destroy(&d->check_lock);
        s->api.DevicePrimaryCtxRelease(d->dev);
    }
    free(s->devs);
    /* The driver library stays loaded: it keeps threads of its own. */
    free(s);
}

static size_t cu_device_count(void *state) { return ((cu_state *)state)->ndevs; }

static kt_status cu_device_describe(void *state, size_t index, char *name, char *fp, char *err, size_t errlen) {
    cu_state *s = state;
    if (index >= s->ndevs) {
        snprintf(err, errlen, "device %zu does not exist", index);
        return KT_ERR_INVALID_ARGUMENT;
    }
    snprintf(name, KT_DEVICE_NAME_MAX, "%s", s->devs[index].name);
    snprintf(fp, KT_DEVICE_FINGERPRINT_MAX, "%s", s->devs[index].fingerprint);
    return KT_OK;
}

/* The architecture is the compute capability (code built for it runs alike on every such GPU). */
static kt_status cu_classify(void *state, size_t index, char *arch, char *vendor, char *err, size_t errlen) {
    cu_state *s = state;
    if (index >= s->ndevs) {
        snprintf(err, errlen, "device %zu does not exist", index);
        return KT_ERR_INVALID_ARGUMENT;
    }
    snprintf(arch, KT_DEVICE_NAME_MAX, "sm_%d%d", s->devs[index].cc_major, s->devs[index].cc_minor);
    snprintf(vendor, KT_DEVICE_NAME_MAX, "NVIDIA");
    return KT_OK;
}

/* Peaks from the device's attributes: FP32 lanes per multiprocessor by compute capability
 * (64 on 6.0, 7.x and 8.0; 128 elsewhere from 5.0), two flops an FMA, at the SM clock; memory
 * at twice its clock over its bus (double data rate). An attribute the driver no longer reports
 * leaves that peak 0 (unknown). */
static kt_status cu_peaks(void *state, size_t index, double *gflops, double *gbs, char *err, size_t errlen) {
    cu_state *s = state;
    if (index >= s->ndevs) {
        snprintf(err, errlen, "device %zu does not exist", index);
        return KT_ERR_INVALID_ARGUMENT;
    }
    const cu_dev *d = &s->devs[index];
    if (d->target_only) return kt__cu_use(s, index, err, errlen);
    int major = d->cc_major, minor = d->cc_minor;
    int lanes = (major == 6 && minor == 0) || major == 7 || (major == 8 && minor == 0) ? 64 : major >= 5 ? 128 : 0;
    double sms = attr(s, d->dev, ATTR_MULTIPROCESSOR_COUNT), khz = attr(s, d->dev, ATTR_CLOCK_RATE);
    double mem_khz = attr(s, d->dev, ATTR_MEMORY_CLOCK_RATE), bus = attr(s, d->dev, ATTR_GLOBAL_MEMORY_BUS_WIDTH);
    *gflops = sms * lanes * 2 * khz / 1e6;
    *gbs = 2 * mem_khz * 1e3 * (bus / 8) / 1e9;
    return KT_OK;
}

/* ---- errors, the current context -------------------------------------------------------------- */

const char *kt__cu_errstr(cu_state *s, CUresult rc) {
    const char *msg = NULL;
    if (s->api.GetErrorString == NULL || s->api.GetErrorString(rc, &msg) != 0 || msg == NULL) return "unknown error";
    return msg;
}

kt_status kt__cu_fail(cu_state *s, CUresult rc, const char *what, char *err, size_t errlen) {
    snprintf(err, errlen, "%s failed: CUDA error %d (%s)", what, rc, kt__cu_errstr(s, rc));
    return rc == 2 /* CUDA_ERROR_OUT_OF_MEMORY */ ? KT_ERR_NO_MEMORY : KT_ERR_BACKEND;
}

/* Says why a compile target cannot do what was asked (a caller's buffer may be short: cut). */
static __attribute__((noinline)) kt_status target_only(const cu_dev *d, char *err, size_t errlen) {
    char msg[320];
    snprintf(msg, sizeof msg, "%.200s is a compile target (KERNTUNE_CUDA_TARGET): it builds variants and runs nothing", d->name);
    size_t n = strlen(msg) < errlen ? strlen(msg) : errlen - 1;
    if (errlen > 0) memcpy(err, msg, n), err[n] = '\0';
    return KT_ERR_BACKEND;
}

kt_status kt__cu_use(cu_state *s, size_t device, char *err, size_t errlen) {
    if (s->devs[device].target_only) return target_only(&s->devs[device], err, errlen);
    CUresult rc = s->api.CtxSetCurrent(s->devs[device].ctx);
    return rc == 0 ? KT_OK : kt__cu_fail(s, rc, "cuCtxSetCurrent", err, errlen);
}

/* Makes the device's context current and *slot (one of its streams, made at first use) ready. */
static kt_status stream_of(cu_state *s, size_t device, CUstream *slot, CUstream *stream, char *err, size_t errlen) {
    cu_dev *d = &s->devs[device];
    kt_status st = kt__cu_use(s, device, err, errlen);
    if (st != KT_OK) return st;
    CUresult rc = 0;
    pthread_mutex_lock(&d->flush_lock);
    if (*slot == NULL) rc = s->api.StreamCreate(slot, 1 /* CU_STREAM_NON_BLOCKING */);
    if (rc != 0) *slot = NULL;
    *stream = *slot;
    pthread_mutex_unlock(&d->flush_lock);
    return rc == 0 ? KT_OK : kt__cu_fail(s, rc, "cuStreamCreate (kerntune's own stream)", err, errlen);
}

kt_status kt__cu_own(cu_state *s, size_t device, CUstream *stream, char *err, size_t errlen) {
    return stream_of(s, device, &s->devs[device].own, stream, err, errlen);
}

kt_status kt__cu_timed(cu_state *s, size_t device, CUstream *stream, char *err, size_t errlen) {
    return stream_of(s, device, &s->devs[device].timed, stream, err, errlen);
}

/* Waits for the own stream after work enqueued there, reporting rc (the enqueueing's) first. */
static kt_status own_done(cu_state *s, CUstream own, CUresult rc, const char *what, char *err, size_t errlen) {
    if (rc == 0 && (rc = s->api.StreamSynchronize(own)) != 0) what = "cuStreamSynchronize (kerntune's own stream)";
    return rc == 0 ? KT_OK : kt__cu_fail(s, rc, what, err, errlen);
}

/* ---- buffers: copies and fills run on the own stream, waited for ------------------------------- */

static kt_status cu_buffer_alloc(void *state, size_t device, size_t bytes, void **out, char *err, size_t errlen) {
    cu_state *s = state;
    kt_status st = kt__cu_use(s, device, err, errlen);
    if (st != KT_OK) return st;
    CUdeviceptr p = 0;
    CUresult rc = s->api.MemAlloc(&p, bytes ? bytes : 1);
    if (rc != 0) return kt__cu_fail(s, rc, "cuMemAlloc", err, errlen);
    *out = (void *)(uintptr_t)p;
    return KT_OK;
}

static void cu_buffer_free(void *state, size_t device, void *buffer) {
    cu_state *s = state;
    char err[64];
    if (buffer && kt__cu_use(s, device, err, sizeof err) == KT_OK) s->api.MemFree(DPTR(buffer));
}

static kt_status cu_buffer_copy(void *state, size_t device, void *dst, const void *src, size_t bytes, kt_copy_dir dir,
                                char *err, size_t errlen) {
    cu_state *s = state;
    if (bytes == 0) return KT_OK;
    CUstream own;
    kt_status st = kt__cu_own(s, device, &own, err, errlen);
    if (st != KT_OK) return st;
    CUresult rc = dir == KT_COPY_HOST_TO_DEVICE   ? s->api.MemcpyHtoDAsync(DPTR(dst), src, bytes, own)
                  : dir == KT_COPY_DEVICE_TO_HOST ? s->api.MemcpyDtoHAsync(dst, DPTR(src), bytes, own)
                                                  : s->api.MemcpyDtoDAsync(DPTR(dst), DPTR(src), bytes, own);
    return own_done(s, own, rc, "a buffer copy", err, errlen);
}

static kt_status cu_buffer_fill(void *state, size_t device, void *buffer, size_t bytes, const void *pattern,
                                size_t pattern_bytes, char *err, size_t errlen) {
    cu_state *s = state;
    if (bytes == 0) return KT_OK;
    CUstream own;
    kt_status st = kt__cu_own(s, device, &own, err, errlen);
    if (st != KT_OK) return st;
    CUresult rc;
    if (pattern_bytes == 1) {
        rc = s->api.MemsetD8Async(DPTR(buffer), *(const unsigned char *)pattern, bytes, own);
    } else if (pattern_bytes == 2) {
        unsigned short v;
        memcpy(&v, pattern, 2);
        rc = s->api.MemsetD16Async(DPTR(buffer), v, bytes / 2, own);
    } else if (pattern_bytes == 4) {
        unsigned int v;
        memcpy(&v, pattern, 4);
        rc = s->api.MemsetD32Async(DPTR(buffer), v, bytes / 4, own);
    } else { /* wider patterns: fill on the host, copy once */
        unsigned char *host = malloc(bytes);
        if (host == NULL) {
            snprintf(err, errlen, "out of memory");
            return KT_ERR_NO_MEMORY;
        }
        for (size_t i = 0; i + pattern_bytes <= bytes; i += pattern_bytes) memcpy(host + i, pattern, pattern_bytes);
        rc = s->api.MemcpyHtoDAsync(DPTR(buffer), host, bytes, own);
        st = own_done(s, own, rc, "a buffer fill", err, errlen); /* before host is freed */
        free(host);
        return st;
    }
    return own_done(s, own, rc, "a buffer fill", err, errlen);
}


static kt_status cu_limits(void *state, size_t device, kt_device_limits *out, char *err, size_t errlen) {
    cu_state *s = state;
    if (s->devs[device].target_only) return kt__cu_use(s, device, err, errlen); /* none known: nothing is rejected by them */
    CUdevice d = s->devs[device].dev;
    out->max_threads_per_block = attr(s, d, ATTR_MAX_THREADS_PER_BLOCK);
    for (int i = 0; i < 3; i++) out->max_block[i] = attr(s, d, ATTR_MAX_BLOCK_DIM_X + i);
    int optin = attr(s, d, ATTR_MAX_SHARED_PER_BLOCK_OPTIN);
    out->max_shared_memory = optin > 0 ? optin : attr(s, d, ATTR_MAX_SHARED_PER_BLOCK);
    return KT_OK;
}

/* Evicts the L2 cache by reading a buffer twice its size with the device checks' digest kernel
 * (cuda_check.c), and waits. Reading leaves the cache holding clean lines: the measured kernel's
 * misses then evict them for free. Writing a buffer instead (a memset, as Triton's do_bench
 * does) leaves the cache full of dirty lines, which the measured kernel then writes back to
 * memory while it runs: the flush's own work, counted in the kernel's time (measured on an
 * H100: 16 x 4096 x 4096 bf16 GEMMs 21.6 us after a memset, 17.2 us after a read). Where the
 * check kernels cannot be built, the buffer is written as before. */
static kt_status cu_flush(void *state, size_t device, char *err, size_t errlen) {
    cu_state *s = state;
    cu_dev *d = &s->devs[device];
    CUstream own;
    kt_status st = kt__cu_own(s, device, &own, err, errlen);
    if (st != KT_OK) return st;
    pthread_mutex_lock(&d->flush_lock);
    CUresult rc = 0;
    if (d->flush == 0) {
        int l2 = attr(s, d->dev, ATTR_L2_CACHE_SIZE);
        d->flush_bytes = 2 * (l2 > 0 ? (size_t)l2 : (size_t)64 << 20);
        rc = s->api.MemAlloc(&d->flush, d->flush_bytes);
        if (rc != 0) d->flush = 0;
        else if ((rc = s->api.MemsetD8Async(d->flush, 0, d->flush_bytes, own)) == 0) rc = s->api.StreamSynchronize(own);
    }
    CUdeviceptr buf = d->flush;
    pthread_mutex_unlock(&d->flush_lock);
    if (rc != 0) return kt__cu_fail(s, rc, "cuMemAlloc (cache flush buffer)", err, errlen);
    if (kt__cu_read_through(s, device, buf, d->flush_bytes, err, errlen) == KT_OK) return KT_OK;
    return own_done(s, own, s->api.MemsetD8Async(buf, 0, d->flush_bytes, own), "cuMemsetD8Async (cache flush)", err, errlen);
}

static void *cu_queue_default(void *state, size_t device) {
    (void)state, (void)device;
    return NULL; /* the default stream */
}

/* The directory the device checks' build is kept in (cuda_check.c), for every device. */
static void cu_set_cache_dir(void *state, const char *dir) {
    cu_state *s = state;
    for (size_t i = 0; i < s->ndevs; i++) {
        pthread_mutex_lock(&s->devs[i].check_lock);
        snprintf(s->devs[i].check_dir, sizeof s->devs[i].check_dir, "%s", dir ? dir : "");
        if (!s->devs[i].target_only) kt__cu_check_prebuild(s, i); /* ahead of the first check */
        pthread_mutex_unlock(&s->devs[i].check_lock);
    }
}

static const kt_backend kt__backend_cuda = {
    .abi_version = KT_BACKEND_ABI_VERSION,
    .name = "cuda",
    .init = cu_init,
    .fini = cu_fini,
    .device_count = cu_device_count,
    .device_describe = cu_device_describe,
    .buffer_alloc = cu_buffer_alloc,
    .buffer_free = cu_buffer_free,
    .buffer_copy = cu_buffer_copy,
    .buffer_fill = cu_buffer_fill,
    .artifact_ext = ".cubin",
    .compiler_id = kt__cu_compiler_id,
    .build = kt__cu_build,
    .load = kt__cu_load,
    .unload = kt__cu_unload,
    .entry = NULL,
    .launch = kt__cu_launch,
    .limits = cu_limits,
    .fits = kt__cu_fits,
    .classify = cu_classify,
    .peaks = cu_peaks,
    .resources = kt__cu_resources,
    .flush = cu_flush,
    .caps = KT_BACKEND_CAP_RUNNER | KT_BACKEND_CAP_FAULT_POISONS | KT_BACKEND_CAP_ASYNC_LAUNCH | KT_BACKEND_CAP_LAUNCH_PARAMS |
            KT_BACKEND_CAP_PREPROCESSED | KT_BACKEND_CAP_OWN_PROCESSOR,
    .language = "CUDA",
    .launch_async = kt__cu_launch_async,
    .queue_wait = kt__cu_queue_wait,
    .time_queued = kt__cu_time_queued,
    .queue_default = cu_queue_default,
    .digest = kt__cu_digest,
    .all_close = kt__cu_all_close,
    .set_cache_dir = cu_set_cache_dir,
};

const kt_backend *kt_backend_cuda(void) { return &kt__backend_cuda; }
