/*
 * cuda_int.h - what the files of the CUDA backend share (cuda.c: starting, devices, buffers,
 * limits, flushing; cuda_variants.c: building, loading and launching variants): the few
 * driver API and NVRTC types and constants used, declared here so the library builds without
 * the CUDA toolkit, and the backend's state. Not installed.
 */
#ifndef KT_CUDA_INT_H
#define KT_CUDA_INT_H

#include <kerntune/backend.h>

#include "util/util.h"

#include <pthread.h>
#include <stdint.h>

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
    ATTR_CLOCK_RATE = 13,          /* kHz */
    ATTR_MULTIPROCESSOR_COUNT = 16,
    ATTR_MEMORY_CLOCK_RATE = 36,   /* kHz */
    ATTR_GLOBAL_MEMORY_BUS_WIDTH = 37, /* bits */
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
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*MemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
    CUresult (*MemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
    CUresult (*MemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
    CUresult (*MemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
    CUresult (*MemsetD16Async)(CUdeviceptr, unsigned short, size_t, CUstream);
    CUresult (*MemsetD32Async)(CUdeviceptr, unsigned int, size_t, CUstream);
    CUresult (*StreamCreate)(CUstream *, unsigned);
    CUresult (*StreamDestroy)(CUstream);
    CUresult (*StreamSynchronize)(CUstream);
    CUresult (*LaunchHostFunc)(CUstream, void (*)(void *), void *);
    CUresult (*StreamIsCapturing)(CUstream, int *);
    CUresult (*ModuleLoadData)(CUmodule *, const void *);
    CUresult (*ModuleUnload)(CUmodule);
    CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*ModuleGetGlobal)(CUdeviceptr *, size_t *, CUmodule, const char *);
    CUresult (*FuncSetAttribute)(CUfunction, int, int);
    CUresult (*FuncGetAttribute)(int *, int, CUfunction);
    CUresult (*FuncLoad)(CUfunction); /* CUDA 12.4+; NULL where the driver lacks it */
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
    int driver;                 /* the driver's version (a compile target's: its fingerprint's) */
    bool target_only;           /* a compile target (KERNTUNE_CUDA_TARGET): builds, runs nothing */
    char name[KT_DEVICE_NAME_MAX];
    char fingerprint[KT_DEVICE_FINGERPRINT_MAX];
    pthread_mutex_t flush_lock; /* guards creating flush and own */
    CUdeviceptr flush;          /* a buffer as large as the L2 cache, made at the first flush */
    size_t flush_bytes;
    CUstream own;               /* the backend's own stream (non-blocking), made at its first use:
                                 * tuning's copies, fills, checks and flushes run there */
    CUstream timed;             /* and the one its timed runs have to themselves */
    pthread_mutex_t check_lock; /* guards the device checks (cuda_check.c): */
    void *check_mod;            /* their module (a cu_module), built at the first check */
    CUfunction check_digest, check_equal, check_close[4];
    CUdeviceptr check_out;      /* 16 bytes: a kernel's answer */
    int check_failed;           /* they could not be built: check_err says why */
    char check_err[256];
    char check_dir[4096];       /* where their build is kept between processes ("": nowhere) */
    pthread_t check_prebuild;   /* their build into check_dir, begun when it was given and they */
    bool check_prebuilding;     /* were not there: joined at the first check (cuda_check.c) */
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

#define DPTR(p) ((CUdeviceptr)(uintptr_t)(p))

/* The message of a driver error code. */
const char *kt__cu_errstr(cu_state *s, CUresult rc);

/* Writes "what failed: CUDA error N (message)" into err; KT_ERR_NO_MEMORY for out of memory,
 * KT_ERR_BACKEND otherwise. */
kt_status kt__cu_fail(cu_state *s, CUresult rc, const char *what, char *err, size_t errlen);

/* Makes device's primary context current on this thread. */
kt_status kt__cu_use(cu_state *s, size_t device, char *err, size_t errlen);

/* Makes device's primary context current on this thread and stores the backend's own stream
 * for it in *stream (creating it at the first call). */
kt_status kt__cu_own(cu_state *s, size_t device, CUstream *stream, char *err, size_t errlen);

/* The same for the stream of tuning's timed runs (kt__cu_launch, kt__cu_time_queued). */
kt_status kt__cu_timed(cu_state *s, size_t device, CUstream *stream, char *err, size_t errlen);

/* The variant methods of the backend table (cuda_variants.c). */
kt_status kt__cu_compiler_id(void *state, size_t device, char *out, size_t len, char *err, size_t errlen);
kt_status kt__cu_build(void *state, size_t device, const kt_build_request *req, char *log, size_t loglen);
/* The same with NVRTC in this process, whatever KERNTUNE_NVRTC_PROCESSES says: no fork (for a
 * thread of its own, which must not fork while another thread may hold the loader's lock). */
kt_status kt__cu_build_here(cu_state *s, size_t device, const kt_build_request *req, char *log, size_t loglen);
/* Kernel Tuner's CUDA part of its compile contract (KT_BUILD_KERNEL_TUNER), a pure function:
 * returns the source NVRTC compiles (allocated; NULL when out of memory): a `constexpr int NAME
 * = VALUE;` line for each define whose name contains loop_unroll_factor and whose value is not
 * "0", then "#line 1", then source with, for each such define of value "0", every match of
 * Kernel Tuner's "\n\s*#pragma\s+unroll\s+NAME" replaced by a newline. Sets as_option[i]
 * (ndefines entries) for the defines that stay -D options (all the others). */
char *kt__cu_contract_source(const char *source, const char *const *defines, size_t ndefines, bool *as_option);
kt_status kt__cu_load(void *state, size_t device, const char *path, const char *kernel_name, void **module, char *err,
                      size_t errlen);
void kt__cu_unload(void *state, size_t device, void *module);
kt_status kt__cu_launch(void *state, size_t device, void *module, const kt_launch_geometry *g, const kt_arg *args,
                        size_t nargs, double *ns, char *err, size_t errlen);
kt_status kt__cu_launch_async(void *state, size_t device, void *module, const kt_launch_geometry *g, const kt_arg *args,
                              size_t nargs, void *queue, char *err, size_t errlen);
kt_status kt__cu_queue_wait(void *state, size_t device, void *queue, char *err, size_t errlen);
kt_status kt__cu_time_queued(void *state, size_t device, int (*work)(void *ctx, void *queue), void *ctx, double *ns,
                             int *rc, char *err, size_t errlen);

/* The checks on the device (cuda_check.c): ABI 9's digest and all_close, and freeing them. */
kt_status kt__cu_fits(void *state, size_t device, void *module, const kt_launch_geometry *g, char *err, size_t errlen);
kt_status kt__cu_resources(void *state, size_t device, void *module, int *registers, int *shared_bytes, int *local_bytes, char *err,
                           size_t errlen);
kt_status kt__cu_digest(void *state, size_t device, const void *buffer, size_t bytes, uint64_t *out, char *err,
                        size_t errlen);
kt_status kt__cu_all_close(void *state, size_t device, kt_type elem, const void *actual, const void *expected, size_t count,
                           double atol, double rtol, int *close, char *err, size_t errlen);
void kt__cu_check_free(cu_state *s, size_t device);
/* Begins building the checks into d's check_dir on a thread of its own when that directory lacks
 * them, so that the first check finds them built (NVRTC: a few hundred milliseconds); the first
 * check, a new directory and fini wait for it (kt__cu_check_join). Under d->check_lock. */
void kt__cu_check_prebuild(cu_state *s, size_t device);
void kt__cu_check_join(cu_state *s, size_t device);

/* Reads bytes of device memory at buffer with the digest kernel, on the own stream, and waits
 * for it: cu_flush's way of evicting the L2 cache while leaving it clean. */
kt_status kt__cu_read_through(cu_state *s, size_t device, CUdeviceptr buffer, size_t bytes, char *err, size_t errlen);

#endif
