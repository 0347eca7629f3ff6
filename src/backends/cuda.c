/*
 * backend_cuda.c - the CUDA backend: the driver API and NVRTC, both opened at run time.
 *
 * libcuda.so.1 and NVRTC are loaded with dlopen when the backend starts, and the few types and
 * constants used are declared here, so the library builds without the CUDA toolkit and runs
 * where CUDA is absent (the backend then says why and is skipped). Each device works in its
 * primary context. Buffers are device pointers (CUdeviceptr) carried in kt_arg.ptr. A variant is
 * compiled by NVRTC for the device's own architecture (-arch=sm_XY) with its defines as -D
 * options; the kernel's lowered (mangled) name is found through a name expression, so kernels
 * need no extern "C". The artifact is a small header naming the lowered kernel and the
 * `__constant__` variables of the op's constant-memory arguments, then the cubin, loaded with
 * cuModuleLoadData. Before each launch a constant-memory argument's buffer is copied into its
 * variable (device to device, in stream order, outside the timed region); the kernel receives
 * it as a parameter too, like every argument (as Kernel Tuner's cmem_args and T1 reader do).
 * Launches are timed with CUDA events.
 */
#include <kerntune/backend.h>

#include "util/util.h"

#include <pthread.h>

#include <dlfcn.h>
#include <pthread.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUmodule;
typedef void *CUfunction;
typedef void *CUevent;
typedef void *CUstream;
typedef unsigned long long CUdeviceptr;
typedef int nvrtcResult;
typedef void *nvrtcProgram;

enum {
    ATTR_MAX_THREADS_PER_BLOCK = 1,
    ATTR_MAX_BLOCK_DIM_X = 2,
    ATTR_MAX_SHARED_PER_BLOCK = 8,
    ATTR_MULTIPROCESSOR_COUNT = 16,
    ATTR_L2_CACHE_SIZE = 38,
    ATTR_CC_MAJOR = 75,
    ATTR_CC_MINOR = 76,
    ATTR_MAX_SHARED_PER_BLOCK_OPTIN = 97,
    FUNC_ATTR_MAX_DYNAMIC_SHARED = 8,
    STATIC_SHARED_DEFAULT_LIMIT = 48 * 1024
};

typedef struct cu_api {
    CUresult (*Init)(unsigned);
    CUresult (*DriverGetVersion)(int *);
    CUresult (*DeviceGetCount)(int *);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*DeviceGetName)(char *, int, CUdevice);
    CUresult (*DeviceGetAttribute)(int *, int, CUdevice);
    CUresult (*DeviceTotalMem)(size_t *, CUdevice);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*DevicePrimaryCtxRelease)(CUdevice);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*CtxSynchronize)(void);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
    CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
    CUresult (*MemcpyDtoD)(CUdeviceptr, CUdeviceptr, size_t);
    CUresult (*MemsetD8)(CUdeviceptr, unsigned char, size_t);
    CUresult (*MemsetD16)(CUdeviceptr, unsigned short, size_t);
    CUresult (*MemsetD32)(CUdeviceptr, unsigned int, size_t);
    CUresult (*ModuleLoadData)(CUmodule *, const void *);
    CUresult (*ModuleUnload)(CUmodule);
    CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*ModuleGetGlobal)(CUdeviceptr *, size_t *, CUmodule, const char *);
    CUresult (*FuncSetAttribute)(CUfunction, int, int);
    CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                             void **, void **);
    CUresult (*EventCreate)(CUevent *, unsigned);
    CUresult (*EventRecord)(CUevent, CUstream);
    CUresult (*EventSynchronize)(CUevent);
    CUresult (*EventElapsedTime)(float *, CUevent, CUevent);
    CUresult (*EventDestroy)(CUevent);
    CUresult (*GetErrorString)(CUresult, const char **);
    nvrtcResult (*rtcVersion)(int *, int *);
    nvrtcResult (*rtcCreateProgram)(nvrtcProgram *, const char *, const char *, int, const char *const *,
                                    const char *const *);
    nvrtcResult (*rtcAddNameExpression)(nvrtcProgram, const char *);
    nvrtcResult (*rtcCompileProgram)(nvrtcProgram, int, const char *const *);
    nvrtcResult (*rtcGetProgramLogSize)(nvrtcProgram, size_t *);
    nvrtcResult (*rtcGetProgramLog)(nvrtcProgram, char *);
    nvrtcResult (*rtcGetCUBINSize)(nvrtcProgram, size_t *);
    nvrtcResult (*rtcGetCUBIN)(nvrtcProgram, char *);
    nvrtcResult (*rtcGetLoweredName)(nvrtcProgram, const char *, const char **);
    nvrtcResult (*rtcDestroyProgram)(nvrtcProgram *);
    const char *(*rtcGetErrorString)(nvrtcResult);
} cu_api;

typedef struct cu_dev {
    CUdevice dev;
    CUcontext ctx;
    int cc_major, cc_minor;
    char name[KT_DEVICE_NAME_MAX];
    char fingerprint[KT_DEVICE_FINGERPRINT_MAX];
    pthread_mutex_t flush_lock; /* guards creating flush */
    CUdeviceptr flush;          /* a buffer as large as the L2 cache, made at the first flush */
    size_t flush_bytes;
} cu_dev;

typedef struct cu_state {
    void *cuda, *nvrtc;
    cu_api api;
    int driver;
    int rtc_major, rtc_minor;
    cu_dev *devs;
    size_t ndevs;
} cu_state;

/* A constant-memory argument of a loaded module: which argument, and its variable. */
typedef struct cu_const {
    size_t arg;
    CUdeviceptr ptr;
    size_t bytes;
} cu_const;

typedef struct cu_module {
    CUmodule module;
    CUfunction fn;
    cu_const *consts;
    size_t nconsts;
    int dynamic_limit; /* the dynamic shared memory the function is allowed now */
    pthread_mutex_t lock;
} cu_module;

static void cu_fini(void *state);

static bool load_symbols(cu_state *s, char *err, size_t errlen) {
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
    KT__SYM(s->cuda, CtxSynchronize, "cuCtxSynchronize");
    KT__SYM(s->cuda, MemAlloc, "cuMemAlloc_v2");
    KT__SYM(s->cuda, MemFree, "cuMemFree_v2");
    KT__SYM(s->cuda, MemcpyHtoD, "cuMemcpyHtoD_v2");
    KT__SYM(s->cuda, MemcpyDtoH, "cuMemcpyDtoH_v2");
    KT__SYM(s->cuda, MemcpyDtoD, "cuMemcpyDtoD_v2");
    KT__SYM(s->cuda, MemsetD8, "cuMemsetD8_v2");
    KT__SYM(s->cuda, MemsetD16, "cuMemsetD16_v2");
    KT__SYM(s->cuda, MemsetD32, "cuMemsetD32_v2");
    KT__SYM(s->cuda, ModuleLoadData, "cuModuleLoadData");
    KT__SYM(s->cuda, ModuleUnload, "cuModuleUnload");
    KT__SYM(s->cuda, ModuleGetFunction, "cuModuleGetFunction");
    KT__SYM(s->cuda, ModuleGetGlobal, "cuModuleGetGlobal_v2");
    KT__SYM(s->cuda, FuncSetAttribute, "cuFuncSetAttribute");
    KT__SYM(s->cuda, LaunchKernel, "cuLaunchKernel");
    KT__SYM(s->cuda, EventCreate, "cuEventCreate");
    KT__SYM(s->cuda, EventRecord, "cuEventRecord");
    KT__SYM(s->cuda, EventSynchronize, "cuEventSynchronize");
    KT__SYM(s->cuda, EventElapsedTime, "cuEventElapsedTime");
    KT__SYM(s->cuda, EventDestroy, "cuEventDestroy_v2");
    KT__SYM(s->cuda, GetErrorString, "cuGetErrorString");
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

static const char *cu_errstr(cu_state *s, CUresult rc) {
    const char *msg = NULL;
    if (s->api.GetErrorString == NULL || s->api.GetErrorString(rc, &msg) != 0 || msg == NULL) return "unknown error";
    return msg;
}

static kt_status cu_fail(cu_state *s, CUresult rc, const char *what, char *err, size_t errlen) {
    snprintf(err, errlen, "%s failed: CUDA error %d (%s)", what, rc, cu_errstr(s, rc));
    return rc == 2 /* CUDA_ERROR_OUT_OF_MEMORY */ ? KT_ERR_NO_MEMORY : KT_ERR_BACKEND;
}

static int attr(cu_state *s, CUdevice d, int which) {
    int v = 0;
    if (s->api.DeviceGetAttribute(&v, which, d) != 0) v = 0;
    return v;
}

static kt_status cu_init(const kt_backend *self, void **state, char *err, size_t errlen) {
    (void)self;
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (cuda == NULL) {
        snprintf(err, errlen, "libcuda.so.1 (the NVIDIA driver) is not installed");
        return KT_ERR_BACKEND;
    }
    void *nvrtc = open_nvrtc();
    if (nvrtc == NULL) {
        dlclose(cuda);
        snprintf(err, errlen, "NVRTC (libnvrtc.so) is not installed; set KERNTUNE_NVRTC to its path");
        return KT_ERR_BACKEND;
    }
    cu_state *s = calloc(1, sizeof *s);
    if (s == NULL) {
        dlclose(cuda), dlclose(nvrtc);
        snprintf(err, errlen, "out of memory");
        return KT_ERR_NO_MEMORY;
    }
    s->cuda = cuda;
    s->nvrtc = nvrtc;
    if (!load_symbols(s, err, errlen)) {
        cu_fini(s);
        return KT_ERR_BACKEND;
    }
    CUresult rc = s->api.Init(0);
    int count = 0;
    if (rc != 0 || (rc = s->api.DeviceGetCount(&count)) != 0) {
        cu_fail(s, rc, "cuInit", err, errlen);
        cu_fini(s);
        return KT_ERR_BACKEND;
    }
    s->api.DriverGetVersion(&s->driver);
    s->api.rtcVersion(&s->rtc_major, &s->rtc_minor);
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
        snprintf(d->name, sizeof d->name, "%s (sm_%d%d)", name, d->cc_major, d->cc_minor);
        snprintf(d->fingerprint, sizeof d->fingerprint, "cuda:%s|cc=%d.%d|sms=%d|mem=%zu|l2=%d|driver=%d|nvrtc=%d.%d", name,
                 d->cc_major, d->cc_minor, attr(s, d->dev, ATTR_MULTIPROCESSOR_COUNT), mem,
                 attr(s, d->dev, ATTR_L2_CACHE_SIZE), s->driver, s->rtc_major, s->rtc_minor);
        pthread_mutex_init(&d->flush_lock, NULL);
        s->ndevs++;
    }
    *state = s;
    return KT_OK;
}

static void cu_fini(void *state) {
    cu_state *s = state;
    if (s == NULL) return;
    for (size_t i = 0; i < s->ndevs; i++) {
        cu_dev *d = &s->devs[i];
        if (d->flush && s->api.CtxSetCurrent(d->ctx) == 0) s->api.MemFree(d->flush);
        pthread_mutex_destroy(&d->flush_lock);
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

/* Makes device's primary context current on this thread. */
static kt_status use(cu_state *s, size_t device, char *err, size_t errlen) {
    CUresult rc = s->api.CtxSetCurrent(s->devs[device].ctx);
    return rc == 0 ? KT_OK : cu_fail(s, rc, "cuCtxSetCurrent", err, errlen);
}

#define DPTR(p) ((CUdeviceptr)(uintptr_t)(p))

/* ---- buffers -------------------------------------------------------------------------------- */

static kt_status cu_buffer_alloc(void *state, size_t device, size_t bytes, void **out, char *err, size_t errlen) {
    cu_state *s = state;
    kt_status st = use(s, device, err, errlen);
    if (st != KT_OK) return st;
    CUdeviceptr p = 0;
    CUresult rc = s->api.MemAlloc(&p, bytes ? bytes : 1);
    if (rc != 0) return cu_fail(s, rc, "cuMemAlloc", err, errlen);
    *out = (void *)(uintptr_t)p;
    return KT_OK;
}

static void cu_buffer_free(void *state, size_t device, void *buffer) {
    cu_state *s = state;
    char err[64];
    if (buffer && use(s, device, err, sizeof err) == KT_OK) s->api.MemFree(DPTR(buffer));
}

static kt_status cu_buffer_copy(void *state, size_t device, void *dst, const void *src, size_t bytes, kt_copy_dir dir,
                                char *err, size_t errlen) {
    cu_state *s = state;
    if (bytes == 0) return KT_OK;
    kt_status st = use(s, device, err, errlen);
    if (st != KT_OK) return st;
    CUresult rc = dir == KT_COPY_HOST_TO_DEVICE   ? s->api.MemcpyHtoD(DPTR(dst), src, bytes)
                  : dir == KT_COPY_DEVICE_TO_HOST ? s->api.MemcpyDtoH(dst, DPTR(src), bytes)
                                                  : s->api.MemcpyDtoD(DPTR(dst), DPTR(src), bytes);
    return rc == 0 ? KT_OK : cu_fail(s, rc, "a buffer copy", err, errlen);
}

static kt_status cu_buffer_fill(void *state, size_t device, void *buffer, size_t bytes, const void *pattern,
                                size_t pattern_bytes, char *err, size_t errlen) {
    cu_state *s = state;
    if (bytes == 0) return KT_OK;
    kt_status st = use(s, device, err, errlen);
    if (st != KT_OK) return st;
    CUresult rc;
    if (pattern_bytes == 1) {
        rc = s->api.MemsetD8(DPTR(buffer), *(const unsigned char *)pattern, bytes);
    } else if (pattern_bytes == 2) {
        unsigned short v;
        memcpy(&v, pattern, 2);
        rc = s->api.MemsetD16(DPTR(buffer), v, bytes / 2);
    } else if (pattern_bytes == 4) {
        unsigned int v;
        memcpy(&v, pattern, 4);
        rc = s->api.MemsetD32(DPTR(buffer), v, bytes / 4);
    } else { /* wider patterns: fill on the host, copy once */
        unsigned char *host = malloc(bytes);
        if (host == NULL) {
            snprintf(err, errlen, "out of memory");
            return KT_ERR_NO_MEMORY;
        }
        for (size_t i = 0; i + pattern_bytes <= bytes; i += pattern_bytes) memcpy(host + i, pattern, pattern_bytes);
        rc = s->api.MemcpyHtoD(DPTR(buffer), host, bytes);
        free(host);
    }
    return rc == 0 ? KT_OK : cu_fail(s, rc, "a buffer fill", err, errlen);
}

/* ---- variants ------------------------------------------------------------------------------- */

static kt_status cu_compiler_id(void *state, size_t device, char *out, size_t len, char *err, size_t errlen) {
    (void)err, (void)errlen;
    cu_state *s = state;
    snprintf(out, len, "nvrtc %d.%d | driver %d | sm_%d%d", s->rtc_major, s->rtc_minor, s->driver,
             s->devs[device].cc_major, s->devs[device].cc_minor);
    return KT_OK;
}

/* KTCUBIN2: the lowered kernel name; the number of constant-memory arguments; one line "ARG
 * NAME" each (the argument's index and its variable's lowered name); the cubin. KTCUBIN1 (no
 * constants) is still read. */
static const char cubin_magic[] = "KTCUBIN2\n", cubin_magic_v1[] = "KTCUBIN1\n";

/* Compiles one variant with NVRTC in this process. */
static kt_status build_here(cu_state *s, size_t device, const kt_build_request *req, char *log, size_t loglen) {
    size_t nopt = req->ndefines + req->noptions + 1;
    char **opts = calloc(nopt, sizeof *opts);
    char arch[32];
    snprintf(arch, sizeof arch, "-arch=sm_%d%d", s->devs[device].cc_major, s->devs[device].cc_minor);
    kt_status st = opts ? KT_OK : KT_ERR_NO_MEMORY;
    size_t k = 0;
    for (size_t i = 0; st == KT_OK && i < req->ndefines; i++) {
        size_t n = strlen(req->defines[i]) + 3;
        if ((opts[k] = malloc(n)) == NULL) st = KT_ERR_NO_MEMORY;
        else snprintf(opts[k++], n, "-D%s", req->defines[i]);
    }
    if (st != KT_OK) {
        for (size_t i = 0; opts && i < k; i++) free(opts[i]);
        free(opts);
        snprintf(log, loglen, "out of memory");
        return st;
    }
    const char **all = calloc(nopt, sizeof *all);
    size_t na = 0;
    if (all) {
        for (size_t i = 0; i < k; i++) all[na++] = opts[i];
        for (size_t i = 0; i < req->noptions; i++) all[na++] = req->options[i];
        all[na++] = arch;
    }
    size_t nconst = 0;
    for (size_t i = 0; req->arg_constant && i < req->nargs; i++) nconst += req->arg_constant[i] != 0;
    char *expr = malloc(strlen(req->kernel_name) + 2);
    char **cexpr = calloc(nconst ? nconst : 1, sizeof *cexpr); /* "&name" of each constant variable */
    bool oom = all == NULL || expr == NULL || cexpr == NULL;
    for (size_t i = 0, c = 0; !oom && i < req->nargs && c < nconst; i++) {
        if (!req->arg_constant[i]) continue;
        if ((cexpr[c] = malloc(strlen(req->arg_names[i]) + 2)) == NULL) oom = true;
        else sprintf(cexpr[c++], "&%s", req->arg_names[i]);
    }
    nvrtcProgram prog = NULL;
    nvrtcResult rc = oom ? 1 : s->api.rtcCreateProgram(&prog, req->source, "kernel.cu", 0, NULL, NULL);
    if (rc == 0) {
        sprintf(expr, "&%s", req->kernel_name);
        rc = s->api.rtcAddNameExpression(prog, expr);
    }
    for (size_t c = 0; rc == 0 && c < nconst; c++) rc = s->api.rtcAddNameExpression(prog, cexpr[c]);
    if (rc == 0) {
        rc = s->api.rtcCompileProgram(prog, (int)na, all);
        if (rc != 0) {
            size_t n = 0;
            s->api.rtcGetProgramLogSize(prog, &n);
            char *text = malloc(n + 1);
            if (text && s->api.rtcGetProgramLog(prog, text) == 0) {
                text[n] = '\0';
                snprintf(log, loglen, "NVRTC: %s%s", text,
                         nconst ? " (each constant-memory argument needs a __constant__ variable of its name)" : "");
            } else {
                snprintf(log, loglen, "NVRTC: %s", s->api.rtcGetErrorString(rc));
            }
            free(text);
            st = KT_ERR_BACKEND;
        }
    } else {
        snprintf(log, loglen, "NVRTC: %s", oom ? "out of memory" : s->api.rtcGetErrorString(rc));
        st = KT_ERR_BACKEND;
    }
    if (st == KT_OK) {
        const char *lowered = NULL;
        size_t size = 0;
        char *cubin = NULL;
        if (s->api.rtcGetLoweredName(prog, expr, &lowered) != 0 || lowered == NULL ||
            s->api.rtcGetCUBINSize(prog, &size) != 0 || size == 0 || (cubin = malloc(size)) == NULL ||
            s->api.rtcGetCUBIN(prog, cubin) != 0) {
            snprintf(log, loglen, "NVRTC gave no cubin for kernel '%s'", req->kernel_name);
            st = KT_ERR_BACKEND;
        } else {
            FILE *f = fopen(req->out_path, "wb");
            bool ok = f && fputs(cubin_magic, f) >= 0 && fprintf(f, "%s\n%zu\n", lowered, nconst) > 0;
            for (size_t i = 0, c = 0; ok && i < req->nargs && c < nconst; i++) {
                if (!req->arg_constant[i]) continue;
                const char *low = NULL;
                if (s->api.rtcGetLoweredName(prog, cexpr[c++], &low) != 0 || low == NULL) low = req->arg_names[i];
                ok = fprintf(f, "%zu %s\n", i, low) > 0;
            }
            ok = ok && fwrite(cubin, 1, size, f) == size;
            if (f && fclose(f) != 0) ok = false;
            if (!ok) {
                snprintf(log, loglen, "cannot write %s", req->out_path);
                st = KT_ERR_SYSTEM;
            }
        }
        free(cubin);
    }
    if (prog) s->api.rtcDestroyProgram(&prog);
    for (size_t i = 0; i < k; i++) free(opts[i]);
    for (size_t i = 0; cexpr && i < nconst; i++) free(cexpr[i]);
    free(cexpr);
    free(expr);
    free(opts);
    free(all);
    return st;
}

/* NVRTC serialises part of every compile inside one process (measured on an H200 machine: 16
 * threads gave 3.2x, and more threads than 4 gained nothing), so by default each compile runs in
 * a child process: it writes the artifact, sends its log and status back through a pipe, and
 * exits. The child calls NVRTC only, never the driver, and the parent never compiles, so no
 * NVRTC lock is held when a thread forks. An NVRTC crash takes only the child down.
 * KERNTUNE_NVRTC_PROCESSES=0 compiles in the calling thread instead. */
/* Reads exactly len bytes, retrying on interruption; false on end of file or error. */
static bool read_full(int fd, void *buf, size_t len) {
    for (size_t got = 0; got < len;) {
        ssize_t r = read(fd, (char *)buf + got, len - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        got += (size_t)r;
    }
    return true;
}

static kt_status cu_build(void *state, size_t device, const kt_build_request *req, char *log, size_t loglen) {
    cu_state *s = state;
    const char *env = getenv("KERNTUNE_NVRTC_PROCESSES");
    if (env && strcmp(env, "0") == 0) return build_here(s, device, req, log, loglen); /* never forks then */
    int fds[2];
    pid_t pid = -1;
    if (pipe(fds) == 0 && (pid = fork()) < 0) close(fds[0]), close(fds[1]);
    if (pid < 0) { /* compiling here instead would break "the parent never compiles" */
        snprintf(log, loglen, "cannot start an NVRTC worker process: %s", strerror(errno));
        return KT_ERR_SYSTEM;
    }
    if (pid == 0) { /* the child: compile, report, exit without running the parent's atexit handlers */
        close(fds[0]);
        char buf[4096] = "";
        int32_t head[2] = {(int32_t)build_here(s, device, req, buf, sizeof buf), 0};
        head[1] = (int32_t)strlen(buf);
        bool ok = write(fds[1], head, sizeof head) == (ssize_t)sizeof head;
        for (size_t off = 0; ok && off < (size_t)head[1];) {
            ssize_t w = write(fds[1], buf + off, (size_t)head[1] - off);
            if (w <= 0) break;
            off += (size_t)w;
        }
        _exit(0);
    }
    close(fds[1]);
    /* A status and a length, then exactly that much log: never waiting for end of file, which
     * sibling workers holding a copy of this pipe could delay. */
    int32_t head[2] = {-1, 0};
    bool have = read_full(fds[0], head, sizeof head) && head[1] >= 0;
    size_t len = have ? (size_t)head[1] : 0, keep = len < loglen ? len : (loglen ? loglen - 1 : 0);
    if (have && keep > 0) have = read_full(fds[0], log, keep);
    if (loglen) log[have ? keep : 0] = '\0';
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (!have) {
        snprintf(log, loglen, "the NVRTC worker process died (%s %d)", WIFSIGNALED(status) ? "signal" : "exit",
                 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
        return KT_ERR_BACKEND;
    }
    return (kt_status)head[0];
}

static kt_status cu_load(void *state, size_t device, const char *path, const char *kernel_name, void **module,
                         char *err, size_t errlen) {
    cu_state *s = state;
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(err, errlen, "cannot open %s", path);
        return KT_ERR_SYSTEM;
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *data = size > 0 ? malloc((size_t)size + 1) : NULL;
    bool ok = data && fread(data, 1, (size_t)size, f) == (size_t)size;
    if (ok) data[size] = '\0';
    fclose(f);
    size_t mlen = sizeof cubin_magic - 1;
    bool v2 = ok && (size_t)size > mlen && memcmp(data, cubin_magic, mlen) == 0;
    bool v1 = ok && !v2 && (size_t)size > mlen && memcmp(data, cubin_magic_v1, mlen) == 0;
    char *end = data ? data + (size > 0 ? size : 0) : NULL;
    char *nl = (v1 || v2) ? memchr(data + mlen, '\n', (size_t)(end - data) - mlen) : NULL;
    /* the constant-memory arguments: a count, then "ARG NAME" lines */
    char *cubin = nl ? nl + 1 : NULL, *names = NULL;
    unsigned long long nconst = 0;
    if (nl && v2) {
        char *p = cubin, *cnl = memchr(p, '\n', (size_t)(end - p)), *stop = NULL;
        nconst = (cnl && *p >= '0' && *p <= '9') ? strtoull(p, &stop, 10) : 0;
        if (cnl == NULL || stop != cnl || nconst > 4096) nl = NULL;
        else names = p = cnl + 1;
        for (unsigned long long i = 0; nl && i < nconst; i++) { /* "ARG NAME": digits, one space, a name */
            char *l = memchr(p, '\n', (size_t)(end - p)), *q = p;
            while (l && q < l && *q >= '0' && *q <= '9') q++;
            if (l == NULL || q == p || q + 2 > l || *q != ' ' || memchr(q + 1, '\0', (size_t)(l - q - 1)) != NULL) nl = NULL;
            else p = l + 1;
        }
        cubin = p;
    }
    if (nl == NULL) {
        free(data);
        snprintf(err, errlen, "%s is not a kerntune CUDA artifact", path);
        return KT_ERR_BACKEND;
    }
    *nl = '\0';
    const char *lowered = data + mlen;
    kt_status st = use(s, device, err, errlen);
    cu_module *m = st == KT_OK ? calloc(1, sizeof *m) : NULL;
    if (m) m->consts = calloc(nconst ? nconst : 1, sizeof *m->consts);
    if (st == KT_OK && (m == NULL || m->consts == NULL)) {
        snprintf(err, errlen, "out of memory");
        st = KT_ERR_NO_MEMORY;
    }
    CUresult rc = 0;
    if (st == KT_OK && (rc = s->api.ModuleLoadData(&m->module, cubin)) != 0) st = cu_fail(s, rc, "cuModuleLoadData", err, errlen);
    if (st == KT_OK && (rc = s->api.ModuleGetFunction(&m->fn, m->module, lowered)) != 0) {
        snprintf(err, errlen, "kernel '%s' not found in the module (CUDA error %d)", kernel_name, rc);
        s->api.ModuleUnload(m->module);
        st = KT_ERR_BACKEND;
    }
    for (char *line = names; st == KT_OK && m->nconsts < nconst; m->nconsts++) { /* checked above */
        char *l = memchr(line, '\n', (size_t)(end - line));
        *l = '\0';
        char *name = strchr(line, ' ');
        cu_const *c = &m->consts[m->nconsts];
        c->arg = (size_t)strtoull(line, NULL, 10);
        if (name == NULL || (rc = s->api.ModuleGetGlobal(&c->ptr, &c->bytes, m->module, name + 1)) != 0) {
            snprintf(err, errlen, "the module has no __constant__ variable '%s' for constant-memory argument %zu (CUDA error %d)",
                     name ? name + 1 : line, c->arg, rc);
            s->api.ModuleUnload(m->module);
            st = KT_ERR_BACKEND;
        }
        line = l + 1;
    }
    free(data);
    if (st != KT_OK) {
        if (m) free(m->consts);
        free(m);
        return st;
    }
    pthread_mutex_init(&m->lock, NULL);
    *module = m;
    return KT_OK;
}

static void cu_unload(void *state, size_t device, void *module) {
    cu_state *s = state;
    cu_module *m = module;
    char err[64];
    if (m == NULL) return;
    if (use(s, device, err, sizeof err) == KT_OK) s->api.ModuleUnload(m->module);
    pthread_mutex_destroy(&m->lock);
    free(m->consts);
    free(m);
}

static kt_status cu_launch(void *state, size_t device, void *module, const kt_launch_geometry *g, const kt_arg *args,
                           size_t nargs, double *ns, char *err, size_t errlen) {
    cu_state *s = state;
    cu_module *m = module;
    kt_status st = use(s, device, err, errlen);
    if (st != KT_OK) return st;
    unsigned grid[3], block[3];
    for (int d = 0; d < 3; d++) {
        int64_t b = g->local[d] > 0 ? g->local[d] : 1;
        int64_t n = g->kind == KT_GEOMETRY_GRID ? g->global[d] : (g->global[d] + b - 1) / b;
        if (n <= 0) return KT_OK; /* nothing to run */
        grid[d] = (unsigned)n;
        block[d] = (unsigned)b;
    }
    CUresult rc = 0;
    if (g->shared_memory > STATIC_SHARED_DEFAULT_LIMIT) { /* opt in to more dynamic shared memory */
        pthread_mutex_lock(&m->lock);
        if (m->dynamic_limit < g->shared_memory)
            rc = s->api.FuncSetAttribute(m->fn, FUNC_ATTR_MAX_DYNAMIC_SHARED, (int)g->shared_memory);
        if (rc == 0 && m->dynamic_limit < g->shared_memory) m->dynamic_limit = (int)g->shared_memory;
        pthread_mutex_unlock(&m->lock);
        if (rc != 0) return cu_fail(s, rc, "cuFuncSetAttribute (dynamic shared memory)", err, errlen);
    }
    void *params[256];
    CUdeviceptr ptrs[256];
    if (nargs > 256) {
        snprintf(err, errlen, "at most 256 kernel arguments");
        return KT_ERR_LIMIT;
    }
    size_t np = 0;
    for (size_t i = 0; i < nargs; i++) { /* every argument is a parameter, constant ones too (as Kernel Tuner passes them) */
        if (args[i].type == KT_TYPE_BUFFER) {
            ptrs[np] = DPTR(args[i].ptr);
            params[np] = &ptrs[np];
        } else if (args[i].type == KT_TYPE_F32) {
            params[np] = (void *)&args[i].f32;
        } else if (args[i].type == KT_TYPE_F64) {
            params[np] = (void *)&args[i].f64;
        } else { /* integers: the low bytes of the 64-bit value, little-endian, at the declared width */
            params[np] = (void *)&args[i].u;
        }
        np++;
    }
    for (size_t c = 0; c < m->nconsts; c++) { /* stream-ordered before the launch, outside its timing */
        const cu_const *k = &m->consts[c];
        if (k->arg >= nargs || args[k->arg].type != KT_TYPE_BUFFER) {
            snprintf(err, errlen, "constant-memory argument %zu is not a buffer argument of this call", k->arg);
            return KT_ERR_BACKEND;
        }
        if (args[k->arg].bytes > k->bytes) {
            snprintf(err, errlen, "constant-memory argument %zu has %zu bytes; its __constant__ variable holds %zu", k->arg,
                     args[k->arg].bytes, k->bytes);
            return KT_ERR_INVALID_ARGUMENT;
        }
    }
    CUevent start = NULL, stop = NULL;
    if (ns != NULL && (s->api.EventCreate(&start, 0) != 0 || s->api.EventCreate(&stop, 0) != 0)) {
        if (start) s->api.EventDestroy(start);
        snprintf(err, errlen, "cuEventCreate failed");
        return KT_ERR_BACKEND;
    }
    /* The module's __constant__ variables are one per module: two threads launching it at once
     * must not interleave their copies and launches, or a kernel would read the other call's
     * data. The lock covers enqueueing the copies and the launch, which the stream orders. */
    if (m->nconsts > 0) pthread_mutex_lock(&m->lock);
    const char *what = "a kernel launch";
    for (size_t c = 0; rc == 0 && c < m->nconsts; c++) {
        const cu_const *k = &m->consts[c];
        if (args[k->arg].bytes > 0 && (rc = s->api.MemcpyDtoD(k->ptr, DPTR(args[k->arg].ptr), args[k->arg].bytes)) != 0)
            what = "copying a constant-memory argument (cuMemcpyDtoD)";
    }
    if (rc == 0 && start) rc = s->api.EventRecord(start, NULL);
    if (rc == 0)
        rc = s->api.LaunchKernel(m->fn, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                                 (unsigned)g->shared_memory, NULL, params, NULL);
    if (rc == 0 && stop) rc = s->api.EventRecord(stop, NULL);
    if (m->nconsts > 0) pthread_mutex_unlock(&m->lock);
    if (rc == 0) rc = stop ? s->api.EventSynchronize(stop) : s->api.CtxSynchronize();
    if (rc == 0 && ns != NULL) {
        float ms = 0;
        if (s->api.EventElapsedTime(&ms, start, stop) == 0) *ns = (double)ms * 1e6;
    }
    if (start) s->api.EventDestroy(start);
    if (stop) s->api.EventDestroy(stop);
    return rc == 0 ? KT_OK : cu_fail(s, rc, what, err, errlen);
}

static kt_status cu_limits(void *state, size_t device, kt_device_limits *out, char *err, size_t errlen) {
    (void)err, (void)errlen;
    cu_state *s = state;
    CUdevice d = s->devs[device].dev;
    out->max_threads_per_block = attr(s, d, ATTR_MAX_THREADS_PER_BLOCK);
    for (int i = 0; i < 3; i++) out->max_block[i] = attr(s, d, ATTR_MAX_BLOCK_DIM_X + i);
    int optin = attr(s, d, ATTR_MAX_SHARED_PER_BLOCK_OPTIN);
    out->max_shared_memory = optin > 0 ? optin : attr(s, d, ATTR_MAX_SHARED_PER_BLOCK);
    return KT_OK;
}

/* Writes a buffer as large as the L2 cache (Triton writes a fixed 256 MB; the H200's L2 is
 * 60 MB) and waits for it. */
static kt_status cu_flush(void *state, size_t device, char *err, size_t errlen) {
    cu_state *s = state;
    cu_dev *d = &s->devs[device];
    kt_status st = use(s, device, err, errlen);
    if (st != KT_OK) return st;
    pthread_mutex_lock(&d->flush_lock);
    CUresult rc = 0;
    if (d->flush == 0) {
        int l2 = attr(s, d->dev, ATTR_L2_CACHE_SIZE);
        d->flush_bytes = l2 > 0 ? (size_t)l2 : (size_t)64 << 20;
        rc = s->api.MemAlloc(&d->flush, d->flush_bytes);
        if (rc != 0) d->flush = 0;
    }
    CUdeviceptr buf = d->flush;
    pthread_mutex_unlock(&d->flush_lock);
    if (rc != 0) return cu_fail(s, rc, "cuMemAlloc (cache flush buffer)", err, errlen);
    rc = s->api.MemsetD8(buf, 0, d->flush_bytes);
    if (rc == 0) rc = s->api.CtxSynchronize();
    return rc == 0 ? KT_OK : cu_fail(s, rc, "cuMemsetD8 (cache flush)", err, errlen);
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
    .compiler_id = cu_compiler_id,
    .build = cu_build,
    .load = cu_load,
    .unload = cu_unload,
    .entry = NULL,
    .launch = cu_launch,
    .limits = cu_limits,
    .flush = cu_flush,
    .caps = KT_BACKEND_CAP_WORKER | KT_BACKEND_CAP_FAULT_POISONS,
    .language = "CUDA",
};

const kt_backend *kt_backend_cuda(void) { return &kt__backend_cuda; }
