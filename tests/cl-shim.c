/*
 * cl-shim.c - an OpenCL loader in front of the real one, for test-opencl's kernel pool tests.
 *
 * KERNTUNE_OPENCL_LIBRARY names it. The backend resolves every entry point through its dlopen
 * handle; a lookup through a handle searches the library, then the libraries it needs, so it
 * finds clSetKernelArg and clEnqueueNDRangeKernel here and every other entry point in
 * libOpenCL.so.1, which this library links. Both forward to the real ones.
 *
 * What it adds, for the test to read through kt_shim_*:
 * - it watches every set-and-enqueue: a thread holds a kernel object from its first
 *   clSetKernelArg on it to its clEnqueueNDRangeKernel of it; a clSetKernelArg on a kernel that
 *   another thread holds is an overlap (what the OpenCL spec leaves undefined);
 * - it counts the distinct kernel objects that were set since kt_shim_reset;
 * - kt_shim_gather(n): the next n set-and-enqueues wait inside their first clSetKernelArg until
 *   all n are there, so that n kernel objects of one module are in use at the same moment. A
 *   gathering that is not complete within 30 s (a launch path that holds a lock while it sets
 *   arguments never completes it) lets every waiter go and is counted as timed out.
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

#define KT_SHIM_API __attribute__((visibility("default")))

enum { MAX_KERNELS = 256 };

typedef struct seen {
    cl_kernel kernel;
    bool held;
    pthread_t holder;
} seen;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gathered = PTHREAD_COND_INITIALIZER;
static seen kernels[MAX_KERNELS];
static unsigned nkernels, overlaps, gather_want, gather_in, gather_done, gather_timeouts;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static cl_int (*real_set)(cl_kernel, cl_uint, size_t, const void *);
static cl_int (*real_enqueue)(cl_command_queue, cl_kernel, cl_uint, const size_t *, const size_t *, const size_t *,
                              cl_uint, const cl_event *, cl_event *);

static void resolve(void) {
    void *h = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (h == NULL) return;
    void *p = dlsym(h, "clSetKernelArg");
    memcpy(&real_set, &p, sizeof p);
    p = dlsym(h, "clEnqueueNDRangeKernel");
    memcpy(&real_enqueue, &p, sizeof p);
}

/* The record of k (under lock); NULL when the table is full. */
static seen *find(cl_kernel k) {
    for (unsigned i = 0; i < nkernels; i++)
        if (kernels[i].kernel == k) return &kernels[i];
    if (nkernels == MAX_KERNELS) return NULL;
    seen *s = &kernels[nkernels++];
    s->kernel = k;
    s->held = false;
    return s;
}

/* Waits (under lock) until the gathering this thread joined is complete, or 30 s have passed. */
static void gather(void) {
    unsigned round = gather_done;
    if (++gather_in == gather_want) {
        gather_want = gather_in = 0;
        gather_done++;
        pthread_cond_broadcast(&gathered);
        return;
    }
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 30;
    while (gather_done == round) {
        if (pthread_cond_timedwait(&gathered, &lock, &until) == ETIMEDOUT && gather_done == round) {
            gather_timeouts++;
            gather_want = gather_in = 0;
            gather_done++;
            pthread_cond_broadcast(&gathered);
        }
    }
}

KT_SHIM_API cl_int clSetKernelArg(cl_kernel kernel, cl_uint index, size_t size, const void *value) {
    pthread_once(&once, resolve);
    if (real_set == NULL) return CL_INVALID_PLATFORM;
    pthread_mutex_lock(&lock);
    seen *s = find(kernel);
    if (s != NULL && !(s->held && pthread_equal(s->holder, pthread_self()))) {
        if (s->held) overlaps++;
        s->held = true;
        s->holder = pthread_self();
        if (gather_want > 0) gather();
    }
    pthread_mutex_unlock(&lock);
    return real_set(kernel, index, size, value);
}

KT_SHIM_API cl_int clEnqueueNDRangeKernel(cl_command_queue q, cl_kernel kernel, cl_uint dims, const size_t *offset,
                                          const size_t *global, const size_t *local, cl_uint nwait,
                                          const cl_event *wait, cl_event *ev) {
    pthread_once(&once, resolve);
    if (real_enqueue == NULL) return CL_INVALID_PLATFORM;
    cl_int rc = real_enqueue(q, kernel, dims, offset, global, local, nwait, wait, ev);
    pthread_mutex_lock(&lock);
    seen *s = find(kernel);
    if (s != NULL && s->held && pthread_equal(s->holder, pthread_self())) s->held = false;
    pthread_mutex_unlock(&lock);
    return rc;
}

/* Forgets the kernels seen and the counts. */
KT_SHIM_API void kt_shim_reset(void) {
    pthread_mutex_lock(&lock);
    nkernels = overlaps = gather_timeouts = 0;
    pthread_mutex_unlock(&lock);
}

/* Makes the next n set-and-enqueues wait for one another (see the top). */
KT_SHIM_API void kt_shim_gather(unsigned n) {
    pthread_mutex_lock(&lock);
    gather_want = n;
    gather_in = 0;
    pthread_mutex_unlock(&lock);
}

/* Distinct kernel objects set, overlaps and gatherings that timed out since kt_shim_reset, and
 * how many gatherings are over. */
KT_SHIM_API void kt_shim_counts(unsigned *nkern, unsigned *noverlap, unsigned *ntimeout, unsigned *ndone) {
    pthread_mutex_lock(&lock);
    *nkern = nkernels;
    *noverlap = overlaps;
    *ntimeout = gather_timeouts;
    *ndone = gather_done;
    pthread_mutex_unlock(&lock);
}
