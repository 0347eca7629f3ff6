/*
 * opencl_int.h - what the OpenCL backend's files share (opencl.c: discovery, buffers, flushes,
 * the kernel pool and launches; opencl_build.c: building and loading variants). Internal.
 */
#ifndef KT_OPENCL_INT_H
#define KT_OPENCL_INT_H

#define CL_TARGET_OPENCL_VERSION 120
#include <kerntune/backend.h>

#include "util/util.h"

#include <CL/cl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

/* The entry points used, resolved from the loader. */
typedef struct cl_api {
    cl_int (*GetPlatformIDs)(cl_uint, cl_platform_id *, cl_uint *);
    cl_int (*GetPlatformInfo)(cl_platform_id, cl_platform_info, size_t, void *, size_t *);
    cl_int (*GetDeviceIDs)(cl_platform_id, cl_device_type, cl_uint, cl_device_id *, cl_uint *);
    cl_int (*GetDeviceInfo)(cl_device_id, cl_device_info, size_t, void *, size_t *);
    cl_int (*GetKernelWorkGroupInfo)(cl_kernel, cl_device_id, cl_kernel_work_group_info, size_t, void *, size_t *);
    cl_context (*CreateContext)(const cl_context_properties *, cl_uint, const cl_device_id *,
                                void(CL_CALLBACK *)(const char *, const void *, size_t, void *), void *, cl_int *);
    cl_command_queue (*CreateCommandQueue)(cl_context, cl_device_id, cl_command_queue_properties, cl_int *);
    cl_mem (*CreateBuffer)(cl_context, cl_mem_flags, size_t, void *, cl_int *);
    cl_int (*ReleaseMemObject)(cl_mem);
    cl_int (*EnqueueWriteBuffer)(cl_command_queue, cl_mem, cl_bool, size_t, size_t, const void *, cl_uint,
                                 const cl_event *, cl_event *);
    cl_int (*EnqueueReadBuffer)(cl_command_queue, cl_mem, cl_bool, size_t, size_t, void *, cl_uint, const cl_event *,
                                cl_event *);
    cl_int (*EnqueueCopyBuffer)(cl_command_queue, cl_mem, cl_mem, size_t, size_t, size_t, cl_uint, const cl_event *,
                                cl_event *);
    cl_int (*EnqueueFillBuffer)(cl_command_queue, cl_mem, const void *, size_t, size_t, size_t, cl_uint,
                                const cl_event *, cl_event *);
    void *(*EnqueueMapBuffer)(cl_command_queue, cl_mem, cl_bool, cl_map_flags, size_t, size_t, cl_uint, const cl_event *,
                              cl_event *, cl_int *);
    cl_int (*EnqueueUnmapMemObject)(cl_command_queue, cl_mem, void *, cl_uint, const cl_event *, cl_event *);
    cl_program (*CreateProgramWithSource)(cl_context, cl_uint, const char **, const size_t *, cl_int *);
    cl_program (*CreateProgramWithBinary)(cl_context, cl_uint, const cl_device_id *, const size_t *,
                                          const unsigned char **, cl_int *, cl_int *);
    cl_int (*BuildProgram)(cl_program, cl_uint, const cl_device_id *, const char *,
                           void(CL_CALLBACK *)(cl_program, void *), void *);
    cl_int (*GetProgramBuildInfo)(cl_program, cl_device_id, cl_program_build_info, size_t, void *, size_t *);
    cl_int (*GetProgramInfo)(cl_program, cl_program_info, size_t, void *, size_t *);
    cl_kernel (*CreateKernel)(cl_program, const char *, cl_int *);
    cl_int (*SetKernelArg)(cl_kernel, cl_uint, size_t, const void *);
    cl_int (*EnqueueNDRangeKernel)(cl_command_queue, cl_kernel, cl_uint, const size_t *, const size_t *,
                                   const size_t *, cl_uint, const cl_event *, cl_event *);
    cl_int (*Finish)(cl_command_queue);
    cl_int (*EnqueueMarkerWithWaitList)(cl_command_queue, cl_uint, const cl_event *, cl_event *);
    cl_int (*WaitForEvents)(cl_uint, const cl_event *);
    cl_int (*GetEventProfilingInfo)(cl_event, cl_profiling_info, size_t, void *, size_t *);
    cl_int (*ReleaseEvent)(cl_event);
    cl_int (*ReleaseKernel)(cl_kernel);
    cl_int (*ReleaseProgram)(cl_program);
    cl_int (*ReleaseCommandQueue)(cl_command_queue);
    cl_int (*ReleaseContext)(cl_context);
} cl_api;

typedef struct cl_dev {
    cl_platform_id platform;
    cl_device_id id;
    cl_context ctx;
    cl_command_queue queue;
    char name[KT_DEVICE_NAME_MAX];
    char fingerprint[KT_DEVICE_FINGERPRINT_MAX];
    char compiler[512];
    char arch[KT_DEVICE_NAME_MAX], vendor[KT_DEVICE_NAME_MAX]; /* the device's name, CL_DEVICE_VENDOR */
    cl_ulong cache;             /* CL_DEVICE_GLOBAL_MEM_CACHE_SIZE */
    bool cpu;                   /* CL_DEVICE_TYPE_CPU: its buffers are host memory, evicted by address */
    pthread_mutex_t flush_lock; /* guards creating flush */
    cl_mem flush;               /* a buffer as large as the cache, made at the first flush */
} cl_dev;

typedef struct cl_state {
    void *lib;
    cl_api api;
    cl_dev *devs;
    size_t ndevs;
} cl_state;

/* The kernel pool. A module starts with KT_CL_KERNELS kernel objects, made at load, so that
 * four threads can be inside the set-and-enqueue of one module (a few microseconds) at once
 * before any takes a lock. Four is cheap for every loaded candidate: a kernel object holds its
 * argument values, no code (clCreateKernel on PoCL: 0.25 us each, measured on the 2-core
 * machine), and the pool grows to the concurrency actually seen, so the number only decides
 * how many launches of a burst pay for one more. When every kernel is in use, the launch takes
 * the module's grow lock and makes one more kernel object (clCreateKernel: an allocation, once
 * per kernel the pool gains, kept until unload), up to KT_CL_KERNELS_MAX; past that, or when
 * the platform cannot make one, it yields and looks again until a launch frees one. */
enum { KT_CL_KERNELS = 4, KT_CL_KERNELS_MAX = 64 };

/* One kernel object and its flag, alone on a cache line of 64 bytes, so that claiming one does
 * not take the line of another from the thread that holds it. */
typedef struct cl_slot {
    atomic_bool busy;
    cl_kernel kernel;
    char pad[64 - 2 * sizeof(cl_kernel)]; /* busy takes a pointer's room with its padding */
} cl_slot;
_Static_assert(sizeof(cl_slot) == 64, "a pool slot fills one cache line");

typedef struct cl_module {
    cl_program program;
    char *name;          /* the kernel's name, for the kernels the pool gains */
    atomic_size_t count; /* slots [0, count) hold a kernel; grows under grow, never shrinks */
    pthread_mutex_t grow;
    cl_slot slots[KT_CL_KERNELS_MAX];
} cl_module;

/* An OpenCL call's failure as a status, with what failed and its error code in err. */
kt_status kt__cl_fail(cl_int rc, const char *what, char *err, size_t errlen);

/* ---- opencl_build.c: the backend table's variant methods ---- */
kt_status kt__cl_compiler_id(void *state, size_t device, char *out, size_t len, char *err, size_t errlen);
kt_status kt__cl_build(void *state, size_t device, const kt_build_request *req, char *log, size_t loglen);
kt_status kt__cl_load(void *state, size_t device, const char *path, const char *kernel_name, void **module, char *err,
                      size_t errlen);
void kt__cl_unload(void *state, size_t device, void *module);

#endif
