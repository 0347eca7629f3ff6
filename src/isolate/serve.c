/*
 * serve.c - the runner's side of isolation (see isolate.h, protocol.h): the request loop that
 * kerntune-runner runs (tools/runner.c), and the constructor that turns a fresh start of the
 * tuning process's own program into a runner before the program's main runs.
 *
 * It prints nothing: what goes wrong is in its replies, or in how the process died.
 */
#define _GNU_SOURCE /* dladdr (the preloaded object's own path) */
#include "isolate/isolate.h"
#include "isolate/protocol.h"
#include "backends/backends.h"
#include "util/util.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct module {
    void *handle;          /* BACKEND: the loaded artifact */
    kt_native_fn entry;    /* a host entry point, or a native */
    void *user;            /* a native's user value */
    kt_launch_geometry geometry;
} module;

/* The runner's state: one process serves one tuning process, so this is the process's. */
static struct {
    bool program;          /* a fresh start of the tuning process's program */
    uint32_t mode;         /* KT__MODE_* of the last setup */
    bool ready;            /* the last setup succeeded: loads and runs may follow */
    const kt_backend *backend;
    void *state;
    size_t device;
    int region_fd;
    unsigned char *region;
    size_t region_bytes;
    kt_arg *args;          /* what the candidate is called with */
    void **kept;           /* per buffer argument, or NULL: its bytes as they came (RUN's keep), on
                            * the device, restored from before a run that asks (restore) */
    uint64_t *offsets;     /* per buffer argument, where it lives in the region */
    uint32_t nargs;
    module *modules;
    uint32_t nmodules;
    kt__msg_check_arg *check; /* per argument, after a CHECK; NULL: no checked runs */
    void **expected;          /* per compared output: the reference's bytes on the device */
    uint64_t *digest;         /* per checked input: its bytes' digest at CHECK */
} S;

static int read_all(int fd, void *p, size_t n) {
    for (size_t done = 0; done < n;) {
        ssize_t r = read(fd, (char *)p + done, n - done);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
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

/* Whether candidates run on host memory (the region itself): natives, and host backends. */
static bool host(void) { return S.mode == KT__MODE_NATIVES || (S.backend && S.backend->entry != NULL); }

static void free_check(void) {
    for (uint32_t i = 0; S.expected && i < S.nargs; i++)
        if (S.expected[i] && S.backend) S.backend->buffer_free(S.state, S.device, S.expected[i]);
    free(S.expected), free(S.digest), free(S.check);
    S.expected = NULL, S.digest = NULL, S.check = NULL;
}

static void free_buffers(void) {
    free_check();
    for (uint32_t i = 0; S.args && i < S.nargs; i++) {
        if (S.args[i].type == KT_TYPE_BUFFER && !host() && S.backend && S.args[i].ptr) S.backend->buffer_free(S.state, S.device, S.args[i].ptr);
        if (S.kept && S.kept[i] && S.backend) S.backend->buffer_free(S.state, S.device, S.kept[i]);
    }
    free(S.kept);
    S.kept = NULL;
    free(S.args);
    free(S.offsets);
    S.args = NULL;
    S.offsets = NULL;
    S.nargs = 0;
}

static void unload_all(void) {
    for (uint32_t i = 0; i < S.nmodules; i++)
        if (S.mode == KT__MODE_BACKEND && S.backend && S.modules[i].handle) S.backend->unload(S.state, S.device, S.modules[i].handle);
    free(S.modules);
    S.modules = NULL;
    S.nmodules = 0;
}

static void drop_backend(void) {
    if (S.backend && S.backend->fini) S.backend->fini(S.state);
    S.backend = NULL;
    S.state = NULL;
}

/* Finds the backend's table, checks it can serve here, and starts it. */
static void open_backend(const kt__code_ref *ref, kt__reply *r) {
    void *addr = NULL;
    if (ref->in_program && !S.program) {
        r->status = KT_ERR_STATE;
        snprintf(r->msg, sizeof r->msg, "the backend's table is in the tuning process's program, which kerntune-runner cannot load");
        return;
    }
    if (!kt__code_resolve(ref, &addr, r->msg, sizeof r->msg)) {
        r->status = KT_ERR_BACKEND;
        return;
    }
    const kt_backend *b = addr;
    if (b == S.backend) return; /* the same one as the last tuning's: kept started */
    free_buffers();
    unload_all();
    drop_backend();
    if (!kt__backend_has(b, KT__BACKEND_RUNNER)) {
        r->status = KT_ERR_BACKEND;
        snprintf(r->msg, sizeof r->msg, "the table found is not a backend that can run in a runner (ABI %d, caps %#x)", b->abi_version,
                 kt__backend_caps(b));
        return;
    }
    if (b->init && (r->status = b->init(b, &S.state, r->msg, sizeof r->msg)) != KT_OK) return;
    S.backend = b;
}

static void setup(const kt__msg_setup *m, const kt__msg_arg *a, kt__reply *r) {
    r->status = KT_OK;
    S.ready = false;
    if (m->mode == KT__MODE_BACKEND) {
        open_backend(&m->backend, r);
        if (r->status != KT_OK) return;
    } else {
        free_buffers();
        unload_all();
        drop_backend();
    }
    free_buffers();
    unload_all(); /* the tuning side numbers modules afresh for every tuning */
    S.mode = m->mode;
    if (m->mode == KT__MODE_BACKEND) {
        size_t n = S.backend->device_count(S.state);
        S.device = n;
        for (size_t i = 0; i < n; i++) {
            char name[KT_DEVICE_NAME_MAX], fp[KT_DEVICE_FINGERPRINT_MAX], err[256];
            if (S.backend->device_describe(S.state, i, name, fp, err, sizeof err) == KT_OK && strcmp(fp, m->device) == 0) S.device = i;
        }
        if (S.device == n) {
            snprintf(r->msg, sizeof r->msg, "no %.31s device with fingerprint %.300s", S.backend->name, m->device);
            r->status = KT_ERR_BACKEND;
            return;
        }
    }
    if (S.region) munmap(S.region, S.region_bytes);
    S.region = NULL;
    S.region_bytes = m->region;
    if (S.region_bytes) {
        S.region = mmap(NULL, S.region_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, S.region_fd, 0);
        if (S.region == MAP_FAILED) {
            S.region = NULL;
            snprintf(r->msg, sizeof r->msg, "mmap of the shared region: %s", strerror(errno));
            r->status = KT_ERR_SYSTEM;
            return;
        }
    }
    S.nargs = m->nargs;
    S.args = calloc(S.nargs ? S.nargs : 1, sizeof *S.args);
    S.offsets = calloc(S.nargs ? S.nargs : 1, sizeof *S.offsets);
    S.kept = calloc(S.nargs ? S.nargs : 1, sizeof *S.kept);
    if (!S.args || !S.offsets || !S.kept) {
        r->status = KT_ERR_NO_MEMORY;
        snprintf(r->msg, sizeof r->msg, "out of memory");
        return;
    }
    for (uint32_t i = 0; i < S.nargs; i++) {
        S.args[i].type = (kt_type)a[i].type;
        if (a[i].type != KT_TYPE_BUFFER) {
            memcpy(&S.args[i].u, &a[i].value, sizeof S.args[i].u);
            continue;
        }
        S.args[i].bytes = a[i].bytes;
        S.offsets[i] = a[i].offset;
        if (a[i].offset > S.region_bytes || a[i].bytes > S.region_bytes - a[i].offset) {
            r->status = KT_ERR_INVALID_ARGUMENT;
            snprintf(r->msg, sizeof r->msg, "argument %u lies outside the shared region", i);
            return;
        }
        if (host()) {
            S.args[i].ptr = S.region + a[i].offset;
        } else if ((r->status = S.backend->buffer_alloc(S.state, S.device, a[i].bytes, &S.args[i].ptr, r->msg, sizeof r->msg)) != KT_OK) {
            S.args[i].ptr = NULL;
            return;
        }
    }
    S.ready = true;
}

static void load(const kt__msg_load *m, kt__reply *r) {
    if (!S.ready) {
        r->status = KT_ERR_STATE;
        snprintf(r->msg, sizeof r->msg, "load before a successful setup");
        return;
    }
    module *grown = realloc(S.modules, (S.nmodules + 1) * sizeof *grown);
    if (grown == NULL) {
        r->status = KT_ERR_NO_MEMORY;
        snprintf(r->msg, sizeof r->msg, "out of memory");
        return;
    }
    S.modules = grown;
    module *mod = &S.modules[S.nmodules];
    *mod = (module){.geometry = m->geometry};
    if (S.mode == KT__MODE_NATIVES) {
        void *addr = NULL;
        if (m->native.in_program && !S.program) {
            r->status = KT_ERR_STATE;
            snprintf(r->msg, sizeof r->msg, "the native is in the tuning process's program, which kerntune-runner cannot load");
            return;
        }
        if (!kt__code_resolve(&m->native, &addr, r->msg, sizeof r->msg)) {
            r->status = KT_ERR_NOT_FOUND;
            return;
        }
        _Static_assert(sizeof mod->entry == sizeof addr, "function pointers are addresses");
        memcpy(&mod->entry, &addr, sizeof addr);
        mod->user = (void *)(uintptr_t)m->user;
        r->status = KT_OK;
    } else {
        r->status = S.backend->load(S.state, S.device, m->path, m->kernel, &mod->handle, r->msg, sizeof r->msg);
        if (r->status != KT_OK) return;
        if (S.backend->entry) mod->entry = S.backend->entry(S.state, mod->handle);
    }
    r->module = S.nmodules++;
}

static double now_ns(void) { return kt__now_s() * 1e9; }

/* Whether the device still works after a failed launch: a CUDA illegal address, for one,
 * leaves the context unusable for good. */
static bool usable(void) {
    void *p = NULL;
    char err[256];
    if (S.backend->buffer_alloc(S.state, S.device, 64, &p, err, sizeof err) != KT_OK) return false;
    static unsigned char zero[64];
    kt_status st = S.backend->buffer_copy(S.state, S.device, p, zero, sizeof zero, KT_COPY_HOST_TO_DEVICE, err, sizeof err);
    S.backend->buffer_free(S.state, S.device, p);
    return st == KT_OK;
}

/* Takes the roles of a checked run: the reference's outputs onto the device, the inputs' digests. */
static void check(const kt__msg_check *m, const kt__msg_check_arg *a, kt__reply *r) {
    free_check();
    const kt_backend *b = S.backend;
    if (!S.ready || host() || m->nargs != S.nargs || !kt__backend_has(b, KT__BACKEND_FILL_CHECKS)) {
        r->status = KT_ERR_NOT_FOUND;
        snprintf(r->msg, sizeof r->msg, "this runner cannot check runs on its device");
        return;
    }
    S.check = calloc(S.nargs ? S.nargs : 1, sizeof *S.check);
    S.expected = calloc(S.nargs ? S.nargs : 1, sizeof *S.expected);
    S.digest = calloc(S.nargs ? S.nargs : 1, sizeof *S.digest);
    if (!S.check || !S.expected || !S.digest) {
        free_check();
        r->status = KT_ERR_NO_MEMORY;
        snprintf(r->msg, sizeof r->msg, "out of memory");
        return;
    }
    memcpy(S.check, a, S.nargs * sizeof *a);
    r->status = KT_OK;
    for (uint32_t i = 0; i < S.nargs && r->status == KT_OK; i++) {
        const kt__msg_check_arg *c = &a[i];
        size_t bytes = S.args[i].bytes;
        if (c->role == KT__CHECK_NONE || S.args[i].type != KT_TYPE_BUFFER || bytes == 0) continue;
        if (c->poison_size > sizeof c->poison || c->elem > KT_TYPE_BF16) {
            r->status = KT_ERR_INVALID_ARGUMENT;
            snprintf(r->msg, sizeof r->msg, "malformed check of argument %u", i);
        } else if (c->role == KT__CHECK_OUTPUT) {
            r->status = b->buffer_alloc(S.state, S.device, bytes, &S.expected[i], r->msg, sizeof r->msg);
            if (r->status == KT_OK)
                r->status = b->buffer_copy(S.state, S.device, S.expected[i], S.region + S.offsets[i], bytes, KT_COPY_HOST_TO_DEVICE,
                                           r->msg, sizeof r->msg);
        } else if (c->role == KT__CHECK_INPUT) {
            r->status = b->buffer_copy(S.state, S.device, S.args[i].ptr, S.region + S.offsets[i], bytes, KT_COPY_HOST_TO_DEVICE,
                                       r->msg, sizeof r->msg);
            if (r->status == KT_OK) r->status = b->digest(S.state, S.device, S.args[i].ptr, bytes, &S.digest[i], r->msg, sizeof r->msg);
        }
    }
    if (r->status != KT_OK) free_check();
}

/* After a checked run: which outputs do not match the reference's, which inputs changed. */
static void check_run(kt__reply *r) {
    const kt_backend *b = S.backend;
    for (uint32_t i = 0; i < S.nargs && i < 64; i++) {
        const kt__msg_check_arg *c = &S.check[i];
        size_t bytes = S.args[i].bytes, es = kt_type_size((kt_type)c->elem);
        char err[256];
        if (c->role == KT__CHECK_OUTPUT && S.expected[i] != NULL) {
            int close = 0;
            if (es == 0 || bytes % es != 0 ||
                b->all_close(S.state, S.device, (kt_type)c->elem, S.args[i].ptr, S.expected[i], bytes / es, c->atol, c->rtol, &close,
                             err, sizeof err) != KT_OK || close != 1)
                r->mismatched |= (uint64_t)1 << i;
        } else if (c->role == KT__CHECK_INPUT && bytes > 0) {
            uint64_t d = 0;
            if (b->digest(S.state, S.device, S.args[i].ptr, bytes, &d, err, sizeof err) != KT_OK || d != S.digest[i])
                r->changed |= (uint64_t)1 << i;
        }
    }
    r->checked = r->mismatched == 0 && r->changed == 0;
}

/* Keeps a copy of buffer argument i as it is now, on the device (RUN's keep). Without memory for
 * it there is none, and the tuning goes on copying the buffer in. */
static void keep(uint32_t i) {
    char err[256];
    if (S.kept[i] == NULL && S.backend->buffer_alloc(S.state, S.device, S.args[i].bytes, &S.kept[i], err, sizeof err) != KT_OK) {
        S.kept[i] = NULL;
        return;
    }
    if (S.backend->buffer_copy(S.state, S.device, S.kept[i], S.args[i].ptr, S.args[i].bytes, KT_COPY_DEVICE_TO_DEVICE, err,
                               sizeof err) != KT_OK) {
        S.backend->buffer_free(S.state, S.device, S.kept[i]);
        S.kept[i] = NULL;
    }
}

/* The buffers a run may be restored from (the reply's kept). */
static uint64_t kept_mask(void) {
    uint64_t mask = 0;
    for (uint32_t i = 0; S.kept && i < S.nargs && i < 64; i++)
        if (S.kept[i] != NULL) mask |= (uint64_t)1 << i;
    return mask;
}

static void run(const kt__msg_run *m, kt__reply *r) {
    if (!S.ready || m->module >= S.nmodules) {
        r->status = KT_ERR_STATE;
        snprintf(r->msg, sizeof r->msg, "no module %u", m->module);
        return;
    }
    module *mod = &S.modules[m->module];
    if (host()) { /* on the region itself: nothing to copy */
        double t0 = now_ns();
        int rc = mod->entry(S.args, S.nargs, mod->user);
        r->ns = now_ns() - t0;
        double own = rc == 0 ? kt__backend_reported_ns(S.backend, S.state, mod->handle) : -1;
        if (own >= 0) r->ns = own; /* the run's own account of its time (Kernel Tuner's C contract) */
        r->status = rc == 0 ? KT_OK : KT_ERR_CANDIDATE_FAILED;
        if (rc != 0) {
            r->kind = KT_FAIL_RETURNED;
            r->code = rc;
            if (!kt__backend_run_failure(S.backend, S.state, mod->handle, rc, r->msg, sizeof r->msg))
                snprintf(r->msg, sizeof r->msg, "returned %d", rc);
        }
        return;
    }
    for (uint32_t i = 0; i < S.nargs; i++) {
        if (S.args[i].type != KT_TYPE_BUFFER || S.args[i].bytes == 0) continue;
        bool restore = i < 64 && (m->restore >> i & 1), in = i >= 64 || (m->in >> i & 1);
        if (restore && S.kept[i] == NULL) {
            r->status = KT_ERR_STATE;
            snprintf(r->msg, sizeof r->msg, "argument %u: asked to restore it, but no copy of it is kept", i);
            goto failed;
        }
        if (restore || in)
            r->status = S.backend->buffer_copy(S.state, S.device, S.args[i].ptr, restore ? S.kept[i] : S.region + S.offsets[i],
                                               S.args[i].bytes, restore ? KT_COPY_DEVICE_TO_DEVICE : KT_COPY_HOST_TO_DEVICE, r->msg,
                                               sizeof r->msg);
        if (r->status != KT_OK) goto failed;
        if (restore || !in || i >= 64 || !(m->keep >> i & 1)) continue;
        keep(i); /* a copy to restore from in later runs: without one (no memory for it), they copy it in */
    }
    bool checking = (m->flags & KT__RUN_CHECK) && S.check != NULL;
    for (uint32_t i = 0; checking && i < S.nargs; i++) /* outputs start poisoned: what is left unwritten shows */
        if (S.check[i].poison_size > 0 && S.args[i].bytes &&
            (r->status = S.backend->buffer_fill(S.state, S.device, S.args[i].ptr, S.args[i].bytes, S.check[i].poison,
                                                S.check[i].poison_size, r->msg, sizeof r->msg)) != KT_OK)
            goto failed;
    if ((m->flags & KT__RUN_FLUSH) &&
        (r->status = kt__backend_flush(S.backend, S.state, S.device, S.args, S.nargs, r->msg, sizeof r->msg)) != KT_OK)
        goto failed;
    r->ns = -1;
    r->status = S.backend->launch(S.state, S.device, mod->handle, &mod->geometry, S.args, S.nargs, &r->ns, r->msg, sizeof r->msg);
    if (r->status != KT_OK) goto failed;
    if (checking) check_run(r);
    for (uint32_t i = 0; i < S.nargs; i++) /* after a check, only the outputs of one that did not match */
        if (S.args[i].type == KT_TYPE_BUFFER && S.args[i].bytes && (i >= 64 || (m->out >> i & 1)) &&
            (!checking || (r->mismatched != 0 && r->changed == 0 && S.check[i].role == KT__CHECK_OUTPUT)) &&
            (r->status = S.backend->buffer_copy(S.state, S.device, S.region + S.offsets[i], S.args[i].ptr, S.args[i].bytes,
                                                KT_COPY_DEVICE_TO_HOST, r->msg, sizeof r->msg)) != KT_OK)
            goto failed;
    return;
failed:
    r->kind = KT_FAIL_LAUNCH;
    r->code = r->status;
    r->sticky = !usable();
}

/* The address-space cap for host code (KERNTUNE_RUNNER_MEMORY_MB, default half of the physical
 * memory), so that a candidate that allocates without end fails soon instead of pushing the
 * machine into swap. Not for device backends (a CUDA context reserves a vast address space) nor
 * under sanitizers (their shadow memory does). */
static long long memory_cap_mb(void) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    return 0;
#else
    const char *limit = getenv("KERNTUNE_RUNNER_MEMORY_MB");
    return limit ? atoll(limit) : (long long)(sysconf(_SC_PHYS_PAGES) / 2 * (sysconf(_SC_PAGESIZE) / 1024) / 1024);
#endif
}

int kt__runner_serve(int sock, int region_fd, long parent, bool program) {
    S.program = program;
    S.region_fd = region_fd;
    /* a candidate that starts programs of its own must not hand them these */
    fcntl(sock, F_SETFD, FD_CLOEXEC);
    fcntl(region_fd, F_SETFD, FD_CLOEXEC);
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* not outlive the tuning process, even when a candidate hangs */
    if (getppid() != (pid_t)parent) return 0; /* it is already gone */
    long long cap_mb = memory_cap_mb();
    bool capped = false;
    for (;;) {
        kt__msg h;
        if (read_all(sock, &h, sizeof h) != 0) break;
        void *payload = malloc(h.len ? h.len : 1);
        if (payload == NULL || read_all(sock, payload, h.len) != 0) break;
        kt__reply r = {0};
        if (h.type == KT__MSG_SETUP && h.len >= sizeof(kt__msg_setup)) {
            const kt__msg_setup *m = payload;
            if (m->version != KT__PROTOCOL_VERSION) {
                r.status = KT_ERR_STATE;
                snprintf(r.msg, sizeof r.msg, "this runner speaks protocol %d, the library %u: they are from different builds",
                         KT__PROTOCOL_VERSION, m->version);
            } else if ((m->mode == KT__MODE_BACKEND || m->mode == KT__MODE_NATIVES) &&
                       h.len == sizeof *m + (size_t)m->nargs * sizeof(kt__msg_arg)) {
                setup(m, (const kt__msg_arg *)(m + 1), &r);
                if (r.status == KT_OK && cap_mb > 0 && host() && !capped) {
                    struct rlimit rl = {(rlim_t)cap_mb << 20, (rlim_t)cap_mb << 20};
                    capped = setrlimit(RLIMIT_AS, &rl) == 0;
                }
            } else {
                r.status = KT_ERR_INVALID_ARGUMENT;
                snprintf(r.msg, sizeof r.msg, "malformed setup request");
            }
        } else if (h.type == KT__MSG_LOAD && h.len == sizeof(kt__msg_load)) {
            load(payload, &r);
        } else if (h.type == KT__MSG_RUN && h.len == sizeof(kt__msg_run)) {
            run(payload, &r);
            r.kept = kept_mask(); /* also after a failed run: the copies stay good */
        } else if (h.type == KT__MSG_CHECK && h.len >= sizeof(kt__msg_check) &&
                   h.len == sizeof(kt__msg_check) + (size_t)((const kt__msg_check *)payload)->nargs * sizeof(kt__msg_check_arg)) {
            check(payload, (const kt__msg_check_arg *)((const kt__msg_check *)payload + 1), &r);
        } else {
            r.status = KT_ERR_INVALID_ARGUMENT;
            snprintf(r.msg, sizeof r.msg, "unknown request %u (%u bytes)", h.type, h.len);
        }
        free(payload);
        if (write_all(sock, &r, sizeof r) != 0) break;
    }
    return 0;
}

/* ---- a fresh start of the tuning process's program, as a runner ------------------------------ */

/* The tuning process starts its own program again (isolate.c) with KERNTUNE_RUNNER_SERVE set to
 * "SOCKET,REGION,PARENT" and, when kerntune is a shared object, that object preloaded. This
 * constructor, run before the program's main (and, linked into the program, before its
 * constructors of default priority), serves the requests and ends the process: the program's
 * main never runs, even when the tuning process is gone already (the loop then ends at once). A
 * process that runs with raised privileges, or whose descriptor is no socket, ignores the
 * variable (kerntune sets it for neither); it is removed from the environment either way, and so
 * is kerntune's object from LD_PRELOAD, so that programs a candidate starts see the caller's
 * environment. */
__attribute__((constructor(101))) static void program_runner(void) {
    const char *v = getenv("KERNTUNE_RUNNER_SERVE");
    if (v == NULL) return;
    int sock = -1, region = -1;
    long parent = -1;
    char tail = 0;
    bool parsed = sscanf(v, "%d,%d,%ld%c", &sock, &region, &parent, &tail) == 3;
    unsetenv("KERNTUNE_RUNNER_SERVE");
    const char *pre = getenv("LD_PRELOAD");
    Dl_info self;
    void *addr;
    void (*fn)(void) = program_runner;
    _Static_assert(sizeof fn == sizeof addr, "function pointers are addresses");
    memcpy(&addr, &fn, sizeof addr);
    if (pre && dladdr(addr, &self) && self.dli_fname) { /* the preload was ours: put the caller's back */
        size_t n = strlen(self.dli_fname);
        if (strncmp(pre, self.dli_fname, n) == 0 && pre[n] == '\0') unsetenv("LD_PRELOAD");
        else if (strncmp(pre, self.dli_fname, n) == 0 && pre[n] == ':') setenv("LD_PRELOAD", pre + n + 1, 1);
    }
    struct stat st;
    if (!parsed || getauxval(AT_SECURE) || fstat(sock, &st) != 0 || !S_ISSOCK(st.st_mode)) return; /* not kerntune's doing */
    _exit(kt__runner_serve(sock, region, parent, true)); /* also when the parent is gone: main never runs in a runner */
}
