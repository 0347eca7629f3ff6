/*
 * opencl.c - the OpenCL backend, through the ICD loader opened at run time.
 *
 * libOpenCL.so.1 is loaded with dlopen when the backend starts, so the library builds with
 * only the OpenCL headers and runs where OpenCL is absent (the backend then reports why and
 * is skipped). Every device of every platform becomes a kerntune device with its own context
 * and a profiling command queue. Buffers are cl_mem handles. Building and loading variants is
 * opencl_build.c's; loading creates a pool of kernel objects (opencl_int.h). Launches are timed with
 * profiling events.
 *
 * A launch takes no lock. A cl_kernel's arguments are state of the kernel object, and
 * clSetKernelArg must not run on one kernel object from two threads at once (OpenCL 1.2,
 * appendix A.2: every call is thread-safe except clSetKernelArg on the same cl_kernel; the
 * spec asks for a kernel object per thread). So each module holds several kernel objects of
 * the same program (the kernel pool: opencl_int.h), each with an atomic "in use" flag: a launch claims a free
 * one with an atomic exchange, sets its arguments, enqueues it and frees it. Freeing it right
 * after clEnqueueNDRangeKernel returns is safe: the arguments a kernel has when it is enqueued
 * are the ones that launch uses ("the argument data is used by all API calls that enqueue the
 * kernel until the argument is changed by another call to clSetKernelArg", clSetKernelArg), so
 * the next launch's clSetKernelArg changes only what later enqueues use.
 */
#include "backends/opencl_int.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void cl_fini(void *state);

/* Resolves every entry point; false (with the missing name in err) when one is absent. */
static bool resolve(cl_state *s, char *err, size_t errlen) {
#define KT__CL(name)                                                        \
    do {                                                                    \
        void *p_ = dlsym(s->lib, "cl" #name);                               \
        if (p_ == NULL) {                                                   \
            snprintf(err, errlen, "the OpenCL loader lacks cl%s", #name);   \
            return false;                                                   \
        }                                                                   \
        memcpy(&s->api.name, &p_, sizeof p_);                               \
    } while (0)
    KT__CL(GetPlatformIDs);
    KT__CL(GetPlatformInfo);
    KT__CL(GetDeviceIDs);
    KT__CL(GetDeviceInfo);
    KT__CL(GetKernelWorkGroupInfo);
    KT__CL(CreateContext);
    KT__CL(CreateCommandQueue);
    KT__CL(CreateBuffer);
    KT__CL(ReleaseMemObject);
    KT__CL(EnqueueWriteBuffer);
    KT__CL(EnqueueReadBuffer);
    KT__CL(EnqueueCopyBuffer);
    KT__CL(EnqueueFillBuffer);
    KT__CL(EnqueueMapBuffer);
    KT__CL(EnqueueUnmapMemObject);
    KT__CL(CreateProgramWithSource);
    KT__CL(CreateProgramWithBinary);
    KT__CL(BuildProgram);
    KT__CL(GetProgramBuildInfo);
    KT__CL(GetProgramInfo);
    KT__CL(CreateKernel);
    KT__CL(SetKernelArg);
    KT__CL(EnqueueNDRangeKernel);
    KT__CL(Finish);
    KT__CL(EnqueueMarkerWithWaitList);
    KT__CL(WaitForEvents);
    KT__CL(GetEventProfilingInfo);
    KT__CL(ReleaseEvent);
    KT__CL(ReleaseKernel);
    KT__CL(ReleaseProgram);
    KT__CL(ReleaseCommandQueue);
    KT__CL(ReleaseContext);
#undef KT__CL
    return true;
}

static void dev_string(cl_state *s, cl_device_id d, cl_device_info what, char *out, size_t len) {
    out[0] = '\0';
    if (s->api.GetDeviceInfo(d, what, len, out, NULL) != CL_SUCCESS) out[0] = '\0';
    out[len - 1] = '\0';
}

static kt_status cl_init(const kt_backend *self, void **state, char *err, size_t errlen) {
    (void)self;
    const char *lib = getenv("KERNTUNE_OPENCL_LIBRARY");
    void *h = dlopen(lib && *lib ? lib : "libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        snprintf(err, errlen, "the OpenCL ICD loader (libOpenCL.so.1) is not installed");
        return KT_ERR_BACKEND;
    }
    cl_state *s = calloc(1, sizeof *s);
    if (s == NULL) {
        dlclose(h);
        snprintf(err, errlen, "out of memory");
        return KT_ERR_NO_MEMORY;
    }
    s->lib = h;
    if (!resolve(s, err, errlen)) {
        cl_fini(s);
        return KT_ERR_BACKEND;
    }
    cl_uint np = 0;
    cl_platform_id plats[16];
    if (s->api.GetPlatformIDs(16, plats, &np) != CL_SUCCESS || np == 0) {
        snprintf(err, errlen, "no OpenCL platform is installed (no ICD in /etc/OpenCL/vendors)");
        cl_fini(s);
        return KT_ERR_BACKEND;
    }
    for (cl_uint p = 0; p < np && p < 16; p++) {
        cl_uint nd = 0;
        cl_device_id ids[32];
        if (s->api.GetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 32, ids, &nd) != CL_SUCCESS) continue;
        char pname[256] = "", pver[256] = "";
        s->api.GetPlatformInfo(plats[p], CL_PLATFORM_NAME, sizeof pname, pname, NULL);
        s->api.GetPlatformInfo(plats[p], CL_PLATFORM_VERSION, sizeof pver, pver, NULL);
        for (cl_uint d = 0; d < nd && d < 32; d++) {
            cl_dev *nds = realloc(s->devs, (s->ndevs + 1) * sizeof *nds);
            if (nds == NULL) break;
            s->devs = nds;
            cl_dev *dv = &s->devs[s->ndevs];
            memset(dv, 0, sizeof *dv);
            dv->platform = plats[p];
            dv->id = ids[d];
            cl_int e1 = CL_SUCCESS, e2 = CL_SUCCESS;
            dv->ctx = s->api.CreateContext(NULL, 1, &dv->id, NULL, NULL, &e1);
            if (dv->ctx) dv->queue = s->api.CreateCommandQueue(dv->ctx, dv->id, CL_QUEUE_PROFILING_ENABLE, &e2);
            if (dv->ctx == NULL || dv->queue == NULL) {
                if (dv->ctx) s->api.ReleaseContext(dv->ctx);
                continue;
            }
            char dname[256], dver[256], drv[256];
            dev_string(s, dv->id, CL_DEVICE_NAME, dname, sizeof dname);
            dev_string(s, dv->id, CL_DEVICE_VERSION, dver, sizeof dver);
            dev_string(s, dv->id, CL_DRIVER_VERSION, drv, sizeof drv);
            cl_uint cus = 0;
            cl_ulong mem = 0, cache = 0;
            cl_device_type type = 0;
            s->api.GetDeviceInfo(dv->id, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cus, &cus, NULL);
            s->api.GetDeviceInfo(dv->id, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof mem, &mem, NULL);
            s->api.GetDeviceInfo(dv->id, CL_DEVICE_GLOBAL_MEM_CACHE_SIZE, sizeof cache, &cache, NULL);
            s->api.GetDeviceInfo(dv->id, CL_DEVICE_TYPE, sizeof type, &type, NULL);
            snprintf(dv->name, sizeof dv->name, "%.120s (%.100s)", dname, pname);
            /* The fingerprint holds what identifies the device and its software, nothing that
             * changes while it runs: a CPU device's global memory size is the host's memory
             * that the platform judges free (PoCL: 3.7 to 5.6 GB within the hour), so it is
             * left out there; a GPU's is its own hardware. */
            char memtext[48] = "";
            if (!(type & CL_DEVICE_TYPE_CPU)) snprintf(memtext, sizeof memtext, "|mem=%llu", (unsigned long long)mem);
            snprintf(dv->fingerprint, sizeof dv->fingerprint,
                     "opencl:%.200s|platform=%.100s %.100s|device=%.100s|driver=%.100s|cu=%u%s|cache=%llu", dname,
                     pname, pver, dver, drv, cus, memtext, (unsigned long long)cache);
            snprintf(dv->compiler, sizeof dv->compiler, "%.150s %.150s | %.150s", pname, pver, drv);
            snprintf(dv->arch, sizeof dv->arch, "%s", dname); /* a GPU's name is its chip ("gfx1032"), PoCL's its CPU's */
            dev_string(s, dv->id, CL_DEVICE_VENDOR, dv->vendor, sizeof dv->vendor);
            dv->cache = cache;
            dv->cpu = (type & CL_DEVICE_TYPE_CPU) != 0;
            pthread_mutex_init(&dv->flush_lock, NULL);
            s->ndevs++;
        }
    }
    *state = s;
    return KT_OK;
}

static void cl_fini(void *state) {
    cl_state *s = state;
    if (s == NULL) return;
    for (size_t i = 0; i < s->ndevs; i++) {
        if (s->devs[i].flush) s->api.ReleaseMemObject(s->devs[i].flush);
        pthread_mutex_destroy(&s->devs[i].flush_lock);
        s->api.ReleaseCommandQueue(s->devs[i].queue);
        s->api.ReleaseContext(s->devs[i].ctx);
    }
    free(s->devs);
    /* The loader stays loaded: ICDs such as PoCL keep threads and atexit handlers that would
     * run code from an unloaded library. */
    free(s);
}

static size_t cl_device_count(void *state) { return ((cl_state *)state)->ndevs; }

static kt_status cl_device_describe(void *state, size_t index, char *name, char *fp, char *err, size_t errlen) {
    cl_state *s = state;
    if (index >= s->ndevs) {
        snprintf(err, errlen, "device %zu does not exist", index);
        return KT_ERR_INVALID_ARGUMENT;
    }
    snprintf(name, KT_DEVICE_NAME_MAX, "%s", s->devs[index].name);
    snprintf(fp, KT_DEVICE_FINGERPRINT_MAX, "%s", s->devs[index].fingerprint);
    return KT_OK;
}

static kt_status cl_classify(void *state, size_t index, char *arch, char *vendor, char *err, size_t errlen) {
    cl_state *s = state;
    if (index >= s->ndevs) {
        snprintf(err, errlen, "device %zu does not exist", index);
        return KT_ERR_INVALID_ARGUMENT;
    }
    snprintf(arch, KT_DEVICE_NAME_MAX, "%s", s->devs[index].arch);
    snprintf(vendor, KT_DEVICE_NAME_MAX, "%s", s->devs[index].vendor);
    return KT_OK;
}

kt_status kt__cl_fail(cl_int rc, const char *what, char *err, size_t errlen) {
    snprintf(err, errlen, "%s failed with OpenCL error %d", what, (int)rc);
    return rc == CL_OUT_OF_RESOURCES || rc == CL_OUT_OF_HOST_MEMORY || rc == CL_MEM_OBJECT_ALLOCATION_FAILURE
               ? KT_ERR_NO_MEMORY
               : KT_ERR_BACKEND;
}

/* ---- buffers -------------------------------------------------------------------------------- */

static kt_status cl_buffer_alloc(void *state, size_t device, size_t bytes, void **out, char *err, size_t errlen) {
    cl_state *s = state;
    cl_int rc = CL_SUCCESS;
    cl_mem m = s->api.CreateBuffer(s->devs[device].ctx, CL_MEM_READ_WRITE, bytes ? bytes : 1, NULL, &rc);
    if (m == NULL) return kt__cl_fail(rc, "clCreateBuffer", err, errlen);
    *out = m;
    return KT_OK;
}

static void cl_buffer_free(void *state, size_t device, void *buffer) {
    (void)device;
    if (buffer) ((cl_state *)state)->api.ReleaseMemObject((cl_mem)buffer);
}

static kt_status cl_buffer_copy(void *state, size_t device, void *dst, const void *src, size_t bytes, kt_copy_dir dir,
                                char *err, size_t errlen) {
    cl_state *s = state;
    cl_command_queue q = s->devs[device].queue;
    if (bytes == 0) return KT_OK;
    cl_int rc;
    if (dir == KT_COPY_HOST_TO_DEVICE) rc = s->api.EnqueueWriteBuffer(q, (cl_mem)dst, CL_TRUE, 0, bytes, src, 0, NULL, NULL);
    else if (dir == KT_COPY_DEVICE_TO_HOST) rc = s->api.EnqueueReadBuffer(q, (cl_mem)src, CL_TRUE, 0, bytes, dst, 0, NULL, NULL);
    else {
        rc = s->api.EnqueueCopyBuffer(q, (cl_mem)src, (cl_mem)dst, 0, 0, bytes, 0, NULL, NULL);
        if (rc == CL_SUCCESS) rc = s->api.Finish(q);
    }
    return rc == CL_SUCCESS ? KT_OK : kt__cl_fail(rc, "a buffer copy", err, errlen);
}

static kt_status cl_buffer_fill(void *state, size_t device, void *buffer, size_t bytes, const void *pattern,
                                size_t pattern_bytes, char *err, size_t errlen) {
    cl_state *s = state;
    if (bytes == 0) return KT_OK;
    cl_command_queue q = s->devs[device].queue;
    cl_int rc = s->api.EnqueueFillBuffer(q, (cl_mem)buffer, pattern, pattern_bytes, 0, bytes, 0, NULL, NULL);
    if (rc == CL_SUCCESS) rc = s->api.Finish(q);
    return rc == CL_SUCCESS ? KT_OK : kt__cl_fail(rc, "clEnqueueFillBuffer", err, errlen);
}

/* Fills a buffer as large as the device's global memory cache (8 MiB when it reports none)
 * and waits for it. */
static kt_status cl_flush(void *state, size_t device, char *err, size_t errlen) {
    cl_state *s = state;
    cl_dev *d = &s->devs[device];
    size_t bytes = d->cache > 0 ? (size_t)d->cache : (size_t)8 << 20;
    cl_int rc = CL_SUCCESS;
    pthread_mutex_lock(&d->flush_lock);
    if (d->flush == NULL) d->flush = s->api.CreateBuffer(d->ctx, CL_MEM_READ_WRITE, bytes, NULL, &rc);
    cl_mem buf = d->flush;
    pthread_mutex_unlock(&d->flush_lock);
    if (buf == NULL) return kt__cl_fail(rc, "clCreateBuffer (cache flush buffer)", err, errlen);
    static const cl_uint zero = 0;
    return cl_buffer_fill(state, device, buf, bytes & ~(size_t)3, &zero, sizeof zero, err, errlen);
}

/* A CPU device's caches are the host's: the run's buffers are mapped (PoCL maps a CPU device's
 * buffer where it lives, without a copy), evicted from every cache level by address, and
 * unmapped. The whole-cache fill above would write the host's last-level cache, which a server
 * part reports as all of its L3 (480 MiB on an Intel Xeon VM of two cores): tens of ms a run. */
static kt_status cl_flush_buffers(void *state, size_t device, const kt_arg *args, size_t nargs, char *err, size_t errlen) {
    cl_state *s = state;
    cl_dev *d = &s->devs[device];
    if (!d->cpu || !kt__evict_supported()) return KT_ERR_NOT_FOUND;
    for (size_t i = 0; i < nargs; i++) {
        if (args[i].type != KT_TYPE_BUFFER || args[i].bytes == 0 || args[i].ptr == NULL) continue;
        cl_int rc = CL_SUCCESS;
        void *p = s->api.EnqueueMapBuffer(d->queue, (cl_mem)args[i].ptr, CL_TRUE, CL_MAP_READ, 0, args[i].bytes, 0, NULL, NULL, &rc);
        if (p == NULL) return kt__cl_fail(rc, "clEnqueueMapBuffer (evicting a buffer from the caches)", err, errlen);
        kt__evict(p, args[i].bytes);
        if ((rc = s->api.EnqueueUnmapMemObject(d->queue, (cl_mem)args[i].ptr, p, 0, NULL, NULL)) != CL_SUCCESS)
            return kt__cl_fail(rc, "clEnqueueUnmapMemObject", err, errlen);
    }
    cl_int rc = s->api.Finish(d->queue);
    return rc == CL_SUCCESS ? KT_OK : kt__cl_fail(rc, "clFinish (after evicting buffers)", err, errlen);
}


/* The first `seen` kernels of the pool were all in use when the caller looked: makes one
 * more, already claimed, under the grow lock. NULL when another thread grew the pool
 * meanwhile (look again), when it is full, or when the platform cannot make one. */
static cl_slot *grow_pool(cl_state *s, cl_module *m, size_t seen) {
    cl_slot *k = NULL;
    pthread_mutex_lock(&m->grow);
    size_t n = atomic_load_explicit(&m->count, memory_order_relaxed);
    if (n == seen && n < KT_CL_KERNELS_MAX) {
        cl_int rc = CL_SUCCESS;
        cl_kernel made = s->api.CreateKernel(m->program, m->name, &rc);
        if (made != NULL) {
            k = &m->slots[n];
            k->kernel = made;
            atomic_store_explicit(&k->busy, true, memory_order_relaxed);
            /* publishes the kernel handle (and the flag) to the threads that scan the pool */
            atomic_store_explicit(&m->count, n + 1, memory_order_release);
        }
    }
    pthread_mutex_unlock(&m->grow);
    return k;
}

/* Claims a kernel of the pool for one set-and-enqueue: a load and an exchange per kernel tried,
 * no lock unless every kernel is in use (grow_pool). The acquire pairs with release_kernel's
 * release, so the previous holder's clSetKernelArg and clEnqueueNDRangeKernel on it happen
 * before the claimant's. */
static cl_slot *claim_kernel(cl_state *s, cl_module *m) {
    for (;;) {
        size_t n = atomic_load_explicit(&m->count, memory_order_acquire);
        for (size_t i = 0; i < n; i++) {
            cl_slot *k = &m->slots[i];
            if (!atomic_load_explicit(&k->busy, memory_order_relaxed) &&
                !atomic_exchange_explicit(&k->busy, true, memory_order_acquire))
                return k;
        }
        cl_slot *k = grow_pool(s, m, n);
        if (k != NULL) return k;
        if (atomic_load_explicit(&m->count, memory_order_relaxed) == n) sched_yield(); /* full: wait */
    }
}

static void release_kernel(cl_slot *k) { atomic_store_explicit(&k->busy, false, memory_order_release); }

/* Sets the arguments of a kernel of the module's pool and enqueues it on q; ev (may be NULL)
 * receives its event. The kernel is free again as soon as the enqueue returns: the launch keeps
 * the argument values it was enqueued with. *ran is false when the geometry is empty (nothing
 * to run). */
static cl_int enqueue(cl_state *s, cl_module *m, cl_command_queue q, const kt_launch_geometry *g, const kt_arg *args,
                      size_t nargs, cl_event *ev, bool *ran) {
    size_t global[3], local[3];
    cl_uint dims = 1;
    *ran = false;
    for (int d = 0; d < 3; d++) {
        local[d] = (size_t)(g->local[d] > 0 ? g->local[d] : 1);
        global[d] = (size_t)(g->kind == KT_GEOMETRY_GRID ? g->global[d] * (int64_t)local[d] : g->global[d]);
        if (global[d] == 0) return CL_SUCCESS; /* nothing to run */
        if (d > 0 && (global[d] > 1 || local[d] > 1)) dims = (cl_uint)d + 1;
    }
    cl_slot *slot = claim_kernel(s, m);
    cl_kernel kernel = slot->kernel;
    cl_int rc = CL_SUCCESS;
    for (size_t i = 0; rc == CL_SUCCESS && i < nargs; i++) {
        const kt_arg *a = &args[i];
        switch (a->type) {
        case KT_TYPE_BUFFER: {
            cl_mem mem = (cl_mem)a->ptr;
            rc = s->api.SetKernelArg(kernel, (cl_uint)i, sizeof mem, &mem);
            break;
        }
        case KT_TYPE_BYTES: rc = s->api.SetKernelArg(kernel, (cl_uint)i, a->bytes, a->ptr); break; /* a launch parameter */
        case KT_TYPE_F32: rc = s->api.SetKernelArg(kernel, (cl_uint)i, sizeof a->f32, &a->f32); break;
        case KT_TYPE_F64: rc = s->api.SetKernelArg(kernel, (cl_uint)i, sizeof a->f64, &a->f64); break;
        default: { /* integers: pass the declared width, little-endian low bytes of the 64-bit value */
            size_t w = kt_type_size(a->type);
            rc = s->api.SetKernelArg(kernel, (cl_uint)i, w, &a->u);
            break;
        }
        }
    }
    if (rc == CL_SUCCESS) rc = s->api.EnqueueNDRangeKernel(q, kernel, dims, NULL, global, local, 0, NULL, ev);
    release_kernel(slot);
    *ran = rc == CL_SUCCESS;
    return rc;
}

static kt_status no_local_memory(const kt_launch_geometry *g, char *err, size_t errlen) {
    if (g->shared_memory <= 0) return KT_OK;
    snprintf(err, errlen, "dynamic local memory is not supported by the OpenCL backend");
    return KT_ERR_BACKEND;
}

static kt_status cl_launch(void *state, size_t device, void *module, const kt_launch_geometry *g, const kt_arg *args,
                           size_t nargs, double *ns, char *err, size_t errlen) {
    cl_state *s = state;
    kt_status st = no_local_memory(g, err, errlen);
    if (st != KT_OK) return st;
    cl_event ev = NULL;
    bool ran = false;
    cl_int rc = enqueue(s, module, s->devs[device].queue, g, args, nargs, &ev, &ran);
    if (rc == CL_SUCCESS && ran) rc = s->api.WaitForEvents(1, &ev);
    if (rc == CL_SUCCESS && ran && ns != NULL) {
        cl_ulong t0 = 0, t1 = 0;
        if (s->api.GetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL) == CL_SUCCESS &&
            s->api.GetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL) == CL_SUCCESS)
            *ns = (double)(t1 - t0);
    }
    if (ev) s->api.ReleaseEvent(ev);
    return rc == CL_SUCCESS ? KT_OK : kt__cl_fail(rc, "a kernel launch", err, errlen);
}

/* Enqueues on the caller's queue (NULL: the device's) without an event and without waiting. */
static kt_status cl_launch_async(void *state, size_t device, void *module, const kt_launch_geometry *g, const kt_arg *args,
                                 size_t nargs, void *queue, char *err, size_t errlen) {
    cl_state *s = state;
    kt_status st = no_local_memory(g, err, errlen);
    if (st != KT_OK) return st;
    bool ran = false;
    cl_command_queue q = queue ? (cl_command_queue)queue : s->devs[device].queue;
    cl_int rc = enqueue(s, module, q, g, args, nargs, NULL, &ran);
    return rc == CL_SUCCESS ? KT_OK : kt__cl_fail(rc, "enqueueing a kernel on the caller's queue", err, errlen);
}

static kt_status cl_queue_wait(void *state, size_t device, void *queue, char *err, size_t errlen) {
    cl_state *s = state;
    cl_int rc = s->api.Finish(queue ? (cl_command_queue)queue : s->devs[device].queue);
    return rc == CL_SUCCESS ? KT_OK : kt__cl_fail(rc, "clFinish on the caller's queue", err, errlen);
}

/* A native device candidate's work on the device's profiling queue, between two markers: its
 * time is from the first marker's end (everything before it done) to the second's (everything
 * it enqueued done). */
static kt_status cl_time_queued(void *state, size_t device, int (*work)(void *ctx, void *queue), void *ctx, double *ns,
                                int *rc, char *err, size_t errlen) {
    cl_state *s = state;
    cl_command_queue q = s->devs[device].queue;
    cl_event ev[2] = {NULL, NULL};
    const char *what = "clEnqueueMarkerWithWaitList";
    cl_int r = ns ? s->api.EnqueueMarkerWithWaitList(q, 0, NULL, &ev[0]) : CL_SUCCESS;
    if (r == CL_SUCCESS) {
        *rc = work(ctx, q);
        if (*rc != 0) ns = NULL; /* a failed run is not timed, but what it enqueued is waited for */
        r = ns ? s->api.EnqueueMarkerWithWaitList(q, 0, NULL, &ev[1]) : CL_SUCCESS;
        if (r == CL_SUCCESS) {
            what = "waiting for the device's queue";
            r = ev[1] ? s->api.WaitForEvents(1, &ev[1]) : s->api.Finish(q);
        }
    }
    if (r == CL_SUCCESS && ns != NULL) {
        cl_ulong t[2] = {0, 0};
        for (int i = 0; i < 2 && r == CL_SUCCESS; i++)
            r = s->api.GetEventProfilingInfo(ev[i], CL_PROFILING_COMMAND_END, sizeof t[i], &t[i], NULL);
        if (r == CL_SUCCESS) *ns = (double)(t[1] - t[0]);
        else what = "clGetEventProfilingInfo (a marker)";
    }
    for (int i = 0; i < 2; i++)
        if (ev[i]) s->api.ReleaseEvent(ev[i]);
    return r == CL_SUCCESS ? KT_OK : kt__cl_fail(r, what, err, errlen);
}

static void *cl_queue_default(void *state, size_t device) { return ((cl_state *)state)->devs[device].queue; }

static kt_status cl_limits(void *state, size_t device, kt_device_limits *out, char *err, size_t errlen) {
    (void)err, (void)errlen;
    cl_state *s = state;
    cl_device_id id = s->devs[device].id;
    size_t wg = 0, items[3] = {0, 0, 0};
    cl_ulong local = 0;
    s->api.GetDeviceInfo(id, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof wg, &wg, NULL);
    s->api.GetDeviceInfo(id, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof items, items, NULL);
    s->api.GetDeviceInfo(id, CL_DEVICE_LOCAL_MEM_SIZE, sizeof local, &local, NULL);
    out->max_threads_per_block = (int64_t)wg;
    for (int d = 0; d < 3; d++) out->max_block[d] = (int64_t)items[d];
    out->max_shared_memory = (int64_t)local;
    return KT_OK;
}

/* Local memory a work-group and private memory a work-item (where a GPU's registers spill), as
 * the platform's compiler accounts for them; OpenCL does not say registers. */
static kt_status cl_resources(void *state, size_t device, void *module, int *registers, int *shared_bytes, int *local_bytes, char *err,
                              size_t errlen) {
    (void)err, (void)errlen;
    cl_state *s = state;
    cl_module *m = module;
    cl_ulong local = 0, priv = 0;
    *registers = -1;
    cl_device_id id = s->devs[device].id;
    *shared_bytes = s->api.GetKernelWorkGroupInfo(m->slots[0].kernel, id, CL_KERNEL_LOCAL_MEM_SIZE, sizeof local, &local, NULL) == CL_SUCCESS
                        ? (int)(local > INT32_MAX ? INT32_MAX : local)
                        : -1;
    *local_bytes = s->api.GetKernelWorkGroupInfo(m->slots[0].kernel, id, CL_KERNEL_PRIVATE_MEM_SIZE, sizeof priv, &priv, NULL) == CL_SUCCESS
                       ? (int)(priv > INT32_MAX ? INT32_MAX : priv)
                       : -1;
    return KT_OK;
}

static const kt_backend kt__backend_opencl = {
    .abi_version = KT_BACKEND_ABI_VERSION,
    .name = "opencl",
    .init = cl_init,
    .fini = cl_fini,
    .device_count = cl_device_count,
    .device_describe = cl_device_describe,
    .classify = cl_classify,
    .resources = cl_resources,
    .buffer_alloc = cl_buffer_alloc,
    .buffer_free = cl_buffer_free,
    .buffer_copy = cl_buffer_copy,
    .buffer_fill = cl_buffer_fill,
    .artifact_ext = ".clbin",
    .compiler_id = kt__cl_compiler_id,
    .build = kt__cl_build,
    .load = kt__cl_load,
    .unload = kt__cl_unload,
    .entry = NULL,
    .launch = cl_launch,
    .limits = cl_limits,
    .flush = cl_flush,
    .caps = KT_BACKEND_CAP_RUNNER | KT_BACKEND_CAP_ASYNC_LAUNCH | KT_BACKEND_CAP_LAUNCH_PARAMS |
            KT_BACKEND_CAP_PREPROCESSED,
    .language = "OpenCL",
    .launch_async = cl_launch_async,
    .queue_wait = cl_queue_wait,
    .time_queued = cl_time_queued,
    .queue_default = cl_queue_default,
    .flush_buffers = cl_flush_buffers,
};

const kt_backend *kt_backend_opencl(void) { return &kt__backend_opencl; }
