/*
 * worker.c - kerntune-worker: runs candidates for a tuning process (see src/isolate.h).
 *
 * usage: kerntune-worker REQUEST_FD REPLY_FD REGION_FD
 * Started by the library, never by hand. Reads requests until the request pipe closes. It
 * prints nothing: what goes wrong is in its replies, or in how it died.
 */
#include "isolate/isolate.h"

#include <kerntune/backend.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

typedef struct module {
    void *handle;
    kt_native_fn entry;
    kt_launch_geometry geometry;
} module;

static const kt_backend *backend;
static void *state;
static char backend_name[32];
static size_t device;
static unsigned char *region;
static size_t region_bytes;
static int region_fd;
static kt_arg *args;      /* what the kernel is called with */
static uint64_t *offsets; /* per buffer argument, where it lives in the region */
static uint32_t nargs;
static module *modules;
static uint32_t nmodules;

static int read_all(int fd, void *p, size_t n) {
    for (size_t done = 0; done < n;) {
        ssize_t r = read(fd, (char *)p + done, n - done);
        if (r == 0) return -1;
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -1;
        done += (size_t)r;
    }
    return 0;
}

static int write_all(int fd, const void *p, size_t n) {
    for (size_t done = 0; done < n;) {
        ssize_t w = write(fd, (const char *)p + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        done += (size_t)w;
    }
    return 0;
}

static bool host(void) { return backend->entry != NULL; }

static void free_buffers(void) {
    for (uint32_t i = 0; args && i < nargs; i++)
        if (args[i].type == KT_TYPE_BUFFER && !host() && args[i].ptr) backend->buffer_free(state, device, args[i].ptr);
    free(args);
    free(offsets);
    args = NULL;
    offsets = NULL;
    nargs = 0;
}

static void unload_all(void) {
    for (uint32_t i = 0; i < nmodules; i++) backend->unload(state, device, modules[i].handle);
    free(modules);
    modules = NULL;
    nmodules = 0;
}

static const kt_backend *find_backend(const char *name) {
    const kt_backend *all[3] = {kt_backend_c(), kt_backend_opencl(), kt_backend_cuda()};
    for (int i = 0; i < 3; i++)
        if (strcmp(all[i]->name, name) == 0) return all[i];
    return NULL;
}

static void setup(const kt__msg_setup *m, const kt__msg_arg *a, kt__reply *r) {
    if (backend == NULL || strcmp(backend_name, m->backend) != 0) {
        if (backend) {
            free_buffers();
            unload_all();
            if (backend->fini) backend->fini(state);
        }
        backend = find_backend(m->backend);
        state = NULL;
        if (backend == NULL) {
            snprintf(r->msg, sizeof r->msg, "no backend named '%.31s'", m->backend);
            r->status = KT_ERR_BACKEND;
            return;
        }
        if (backend->init && (r->status = backend->init(backend, &state, r->msg, sizeof r->msg)) != KT_OK) {
            backend = NULL;
            return;
        }
        snprintf(backend_name, sizeof backend_name, "%.31s", m->backend);
    }
    free_buffers();
    unload_all(); /* the tuner numbers modules afresh for every tuning */
    size_t n = backend->device_count(state);
    device = n;
    for (size_t i = 0; i < n; i++) {
        char name[KT_DEVICE_NAME_MAX], fp[KT_DEVICE_FINGERPRINT_MAX], err[256];
        if (backend->device_describe(state, i, name, fp, err, sizeof err) == KT_OK && strcmp(fp, m->device) == 0) device = i;
    }
    if (device == n) {
        snprintf(r->msg, sizeof r->msg, "no %.31s device with fingerprint %.300s", m->backend, m->device);
        r->status = KT_ERR_BACKEND;
        return;
    }
    if (region) munmap(region, region_bytes);
    region = NULL;
    region_bytes = m->region;
    if (region_bytes) {
        region = mmap(NULL, region_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, region_fd, 0);
        if (region == MAP_FAILED) {
            region = NULL;
            snprintf(r->msg, sizeof r->msg, "mmap of the shared region: %s", strerror(errno));
            r->status = KT_ERR_SYSTEM;
            return;
        }
    }
    nargs = m->nargs;
    args = calloc(nargs ? nargs : 1, sizeof *args);
    offsets = calloc(nargs ? nargs : 1, sizeof *offsets);
    if (!args || !offsets) {
        r->status = KT_ERR_NO_MEMORY;
        snprintf(r->msg, sizeof r->msg, "out of memory");
        return;
    }
    for (uint32_t i = 0; i < nargs; i++) {
        args[i].type = (kt_type)a[i].type;
        if (a[i].type != KT_TYPE_BUFFER) {
            memcpy(&args[i].u, &a[i].value, sizeof args[i].u);
            continue;
        }
        args[i].bytes = a[i].bytes;
        offsets[i] = a[i].offset;
        if (host()) {
            args[i].ptr = region + a[i].offset;
        } else if ((r->status = backend->buffer_alloc(state, device, a[i].bytes, &args[i].ptr, r->msg, sizeof r->msg)) != KT_OK) {
            args[i].ptr = NULL;
            return;
        }
    }
    r->status = KT_OK;
}

static void load(const kt__msg_load *m, kt__reply *r) {
    if (backend == NULL) {
        r->status = KT_ERR_STATE;
        snprintf(r->msg, sizeof r->msg, "load before setup");
        return;
    }
    module *grown = realloc(modules, (nmodules + 1) * sizeof *grown);
    if (grown == NULL) {
        r->status = KT_ERR_NO_MEMORY;
        return;
    }
    modules = grown;
    module *mod = &modules[nmodules];
    *mod = (module){.geometry = m->geometry};
    r->status = backend->load(state, device, m->path, m->kernel, &mod->handle, r->msg, sizeof r->msg);
    if (r->status != KT_OK) return;
    if (host()) mod->entry = backend->entry(state, mod->handle);
    r->module = nmodules++;
}

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Whether the device still works after a failed launch: a CUDA illegal address, for one,
 * leaves the context unusable for good. */
static bool usable(void) {
    void *p = NULL;
    char err[256];
    if (backend->buffer_alloc(state, device, 64, &p, err, sizeof err) != KT_OK) return false;
    static unsigned char zero[64];
    kt_status st = backend->buffer_copy(state, device, p, zero, sizeof zero, KT_COPY_HOST_TO_DEVICE, err, sizeof err);
    backend->buffer_free(state, device, p);
    return st == KT_OK;
}

static void run(const kt__msg_run *m, kt__reply *r) {
    if (backend == NULL || m->module >= nmodules) {
        r->status = KT_ERR_STATE;
        snprintf(r->msg, sizeof r->msg, "no module %u", m->module);
        return;
    }
    module *mod = &modules[m->module];
    if (host()) {
        double t0 = now_ns();
        int rc = mod->entry(args, nargs, NULL);
        r->ns = now_ns() - t0;
        r->status = rc == 0 ? KT_OK : KT_ERR_CANDIDATE_FAILED;
        if (rc != 0) snprintf(r->msg, sizeof r->msg, "returned %d", rc);
        return;
    }
    for (uint32_t i = 0; i < nargs; i++)
        if (args[i].type == KT_TYPE_BUFFER && args[i].bytes && (i >= 64 || (m->in >> i & 1)) &&
            (r->status = backend->buffer_copy(state, device, args[i].ptr, region + offsets[i], args[i].bytes,
                                              KT_COPY_HOST_TO_DEVICE, r->msg, sizeof r->msg)) != KT_OK)
            goto failed;
    if ((m->flags & KT__RUN_FLUSH) && backend->abi_version >= 4 && backend->flush &&
        (r->status = backend->flush(state, device, r->msg, sizeof r->msg)) != KT_OK)
        goto failed;
    r->ns = -1;
    r->status = backend->launch(state, device, mod->handle, &mod->geometry, args, nargs, &r->ns, r->msg, sizeof r->msg);
    if (r->status != KT_OK) goto failed;
    for (uint32_t i = 0; i < nargs; i++)
        if (args[i].type == KT_TYPE_BUFFER && args[i].bytes && (i >= 64 || (m->out >> i & 1)) &&
            (r->status = backend->buffer_copy(state, device, region + offsets[i], args[i].ptr, args[i].bytes,
                                              KT_COPY_DEVICE_TO_HOST, r->msg, sizeof r->msg)) != KT_OK)
            goto failed;
    return;
failed:
    r->sticky = !usable();
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "kerntune-worker: started by the kerntune library, not by hand\n");
        return 2;
    }
    int req = atoi(argv[1]), rep = atoi(argv[2]);
    region_fd = atoi(argv[3]);
    /* a candidate that starts programs of its own must not hand them these */
    fcntl(req, F_SETFD, FD_CLOEXEC);
    fcntl(region_fd, F_SETFD, FD_CLOEXEC);
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* not outlive the caller, even when a candidate hangs */
    /* Host code runs with a cap on its address space (KERNTUNE_WORKER_MEMORY_MB, default half of
     * the physical memory), so that a candidate that allocates without end fails soon instead of
     * pushing the machine into swap. Not for device backends (a CUDA context reserves a vast
     * address space) nor under sanitizers (their shadow memory does). */
    const char *limit = getenv("KERNTUNE_WORKER_MEMORY_MB");
    long long limit_mb = limit ? atoll(limit) : (long long)(sysconf(_SC_PHYS_PAGES) / 2 * (sysconf(_SC_PAGESIZE) / 1024) / 1024);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    limit_mb = 0;
#endif
    for (;;) {
        kt__msg h;
        if (read_all(req, &h, sizeof h) != 0) break;
        void *payload = malloc(h.len ? h.len : 1);
        if (payload == NULL || read_all(req, payload, h.len) != 0) break;
        kt__reply r = {0};
        if (h.type == KT__MSG_SETUP && h.len >= sizeof(kt__msg_setup)) {
            const kt__msg_setup *m = payload;
            if (h.len >= sizeof *m + (size_t)m->nargs * sizeof(kt__msg_arg)) {
                setup(m, (const kt__msg_arg *)(m + 1), &r);
                if (r.status == KT_OK && limit_mb > 0 && host()) {
                    struct rlimit rl = {(rlim_t)limit_mb << 20, (rlim_t)limit_mb << 20};
                    setrlimit(RLIMIT_AS, &rl);
                }
            } else {
                r.status = KT_ERR_INVALID_ARGUMENT;
            }
        } else if (h.type == KT__MSG_LOAD && h.len == sizeof(kt__msg_load)) {
            load(payload, &r);
        } else if (h.type == KT__MSG_RUN && h.len == sizeof(kt__msg_run)) {
            run(payload, &r);
        } else {
            r.status = KT_ERR_INVALID_ARGUMENT;
            snprintf(r.msg, sizeof r.msg, "unknown request %u", h.type);
        }
        free(payload);
        if (write_all(rep, &r, sizeof r) != 0) break;
    }
    return 0;
}
