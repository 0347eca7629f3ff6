/*
 * iso-plugin.c - a shared object that test-isolate loads at run time, as a user's plug-in
 * would be: a backend of its own ("plug") exported as a table, and native candidates. Every
 * launch and native call appends "WHAT PID" to the file KT_TEST_PLUGIN_LOG names, so that the
 * test can tell which process ran it. It uses kerntune's headers only, not the library.
 *
 * The plug backend's one device keeps buffers in ordinary memory (but says nothing of host
 * memory: the core copies through buffer_copy as for a GPU). Its "artifact" is the variant's
 * defines, one per line; its kernel computes out[i] = 2 * in[i], REPS times, and MODE picks a
 * behaviour: 0 correct, 1 a segmentation fault, 2 a wrong answer, 3 a failed launch, 4 a right
 * answer that writes into its input, 5 out[i] += 2 * in[i] (out read and written). Reading a
 * buffer back logs "readback"; copying one in "upload-BYTES", and device to device
 * "d2d-BYTES"; the table
 * kt_test_plug_checks also checks on its device (ABI 9: digest, all_close; logged "close"), and
 * kt_test_plug_pipe says its kernels run on a processor of their own. A configuration with
 * LAG >= 1 builds until some launch happens (at most 5 s); one with MAXT=k says (ABI 11: fits)
 * that its kernel allows k threads per block. Every build logs its thread's priority, "nice-N".
 */
#define _GNU_SOURCE /* MAP_ANONYMOUS, syscall */
#include <kerntune/backend.h>

#include <errno.h>
#include <stdbool.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static void note(const char *what) {
    const char *path = getenv("KT_TEST_PLUGIN_LOG");
    FILE *f = path ? fopen(path, "a") : NULL;
    if (f == NULL) return;
    fprintf(f, "%s %ld\n", what, (long)getpid());
    fclose(f);
}

/* The plug-in's kernel. It stands for a device's, which no sanitizer sees, so it is left
 * uninstrumented: under TSan each of its loads and stores cost a call into the runtime, and a
 * tuning that measured it (REPS = 20 of 2^18 elements) took 46 s instead of 6. */
#if defined(__SANITIZE_THREAD__)
__attribute__((no_sanitize("thread")))
#endif
static void twice(const kt_arg *args, int reps, int add) {
    float *out = args[0].ptr;
    const float *in = args[1].ptr;
    for (int r = 0; r < reps; r++)
        for (int32_t i = 0; i < (int32_t)args[2].i; i++) out[i] = add ? out[i] + 2.0f * in[i] : 2.0f * in[i];
    if (add) /* once in all: what the other reps added comes off (small integers: exact) */
        for (int32_t i = 0; i < (int32_t)args[2].i; i++) out[i] -= 2.0f * in[i] * (float)(reps - 1);
}

static size_t plug_count(void *state) {
    (void)state;
    return 1;
}

static kt_status plug_describe(void *state, size_t index, char *name, char *fp, char *err, size_t errlen) {
    (void)state, (void)index, (void)err, (void)errlen;
    snprintf(name, KT_DEVICE_NAME_MAX, "plug device");
    snprintf(fp, KT_DEVICE_FINGERPRINT_MAX, "plug-device-1");
    return KT_OK;
}

static kt_status plug_alloc(void *state, size_t device, size_t bytes, void **out, char *err, size_t errlen) {
    (void)state, (void)device;
    *out = calloc(1, bytes ? bytes : 1);
    if (*out == NULL) snprintf(err, errlen, "out of memory");
    return *out ? KT_OK : KT_ERR_NO_MEMORY;
}

static void plug_free(void *state, size_t device, void *buffer) {
    (void)state, (void)device;
    free(buffer);
}

static kt_status plug_copy(void *state, size_t device, void *dst, const void *src, size_t bytes, kt_copy_dir dir, char *err,
                           size_t errlen) {
    (void)state, (void)device, (void)err, (void)errlen;
    char what[64];
    snprintf(what, sizeof what, "%s-%zu", dir == KT_COPY_HOST_TO_DEVICE ? "upload" : "d2d", bytes);
    note(dir == KT_COPY_DEVICE_TO_HOST ? "readback" : what);
    memmove(dst, src, bytes);
    return KT_OK;
}

/* ABI 9, on the memory behind the "device" buffers: FNV-1a of the bytes; f32 within tolerance. */
static kt_status plug_digest(void *state, size_t device, const void *buffer, size_t bytes, uint64_t *out, char *err, size_t errlen) {
    (void)state, (void)device, (void)err, (void)errlen;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < bytes; i++) h = (h ^ ((const unsigned char *)buffer)[i]) * 0x100000001b3ull;
    *out = h;
    return KT_OK;
}

static kt_status plug_all_close(void *state, size_t device, kt_type elem, const void *actual, const void *expected, size_t count,
                                double atol, double rtol, int *close, char *err, size_t errlen) {
    (void)state, (void)device, (void)err, (void)errlen;
    note("close");
    *close = 0;
    if (elem != KT_TYPE_F32) return KT_OK; /* 0 is always a safe answer */
    const float *a = actual, *e = expected;
    int bad = 0;
    for (size_t i = 0; i < count; i++) {
        double d = (double)a[i] - (double)e[i];
        bad |= !((d < 0 ? -d : d) <= atol + rtol * ((double)e[i] < 0 ? -(double)e[i] : (double)e[i]));
    }
    *close = !bad;
    return KT_OK;
}

static kt_status plug_fill(void *state, size_t device, void *buffer, size_t bytes, const void *pattern, size_t pattern_bytes,
                           char *err, size_t errlen) {
    (void)state, (void)device, (void)err, (void)errlen;
    for (size_t i = 0; i < bytes; i += pattern_bytes) memcpy((char *)buffer + i, pattern, pattern_bytes);
    return KT_OK;
}

static kt_status plug_compiler(void *state, size_t device, char *out, size_t len, char *err, size_t errlen) {
    (void)state, (void)device, (void)err, (void)errlen;
    snprintf(out, len, "plug 1");
    return KT_OK;
}

/* How many lines of the log say word. */
static int log_lines(const char *word) {
    const char *path = getenv("KT_TEST_PLUGIN_LOG");
    FILE *f = path ? fopen(path, "r") : NULL;
    int n = 0;
    char w[64];
    long pid;
    while (f && fscanf(f, "%63s %ld", w, &pid) == 2) n += strcmp(w, word) == 0;
    if (f) fclose(f);
    return n;
}

static kt_status plug_build(void *state, size_t device, const kt_build_request *req, char *log, size_t loglen) {
    (void)state, (void)device;
    char nice_now[32]; /* the building thread's priority: "nice-N" */
    errno = 0;
    int prio = getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid));
    snprintf(nice_now, sizeof nice_now, "nice-%d", errno == 0 ? prio : -99);
    note(nice_now);
    /* LAG >= 1: the build lasts until a launch happens (at most 5 s on the clock: counted in
     * 1 ms sleeps, the log's reads between them stretched the 5 s to 20 s under TSan), so that
     * it shows whether configurations run while others build: "build-waited" if one did, else
     * "build-timeout" */
    for (size_t i = 0; i < req->ndefines; i++) {
        if (strncmp(req->defines[i], "LAG=", 4) != 0 || atoi(req->defines[i] + 4) < 1) continue;
        int before = log_lines("launch");
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        bool launched = false;
        for (;;) {
            if ((launched = log_lines("launch") != before)) break;
            clock_gettime(CLOCK_MONOTONIC, &t);
            if ((double)(t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) * 1e-9 >= 5.0) break;
            struct timespec ms = {0, 1000000};
            nanosleep(&ms, NULL);
        }
        note(launched ? "build-waited" : "build-timeout");
    }
    /* SLOW = ms: the build takes that long, then says so ("build-slow-done"); unless the core
     * cancels it meanwhile (asked every 10 ms, unless DEAF = 1): then it says "build-cancelled"
     * and fails as if the code had, which the core must not record */
    int deaf = 0;
    for (size_t i = 0; i < req->ndefines; i++) deaf = deaf || strcmp(req->defines[i], "DEAF=1") == 0;
    for (size_t i = 0; i < req->ndefines; i++) {
        int ms = strncmp(req->defines[i], "SLOW=", 5) == 0 ? atoi(req->defines[i] + 5) : 0;
        if (ms <= 0) continue;
        for (int slept = 0; slept < ms; slept += 10) {
            if (!deaf && req->cancelled && req->cancelled(req->cancel_user)) {
                note("build-cancelled");
                snprintf(log, loglen, "cancelled");
                return KT_ERR_BACKEND;
            }
            struct timespec ts = {0, 10 * 1000000L};
            while (nanosleep(&ts, &ts) != 0) {}
        }
        note("build-slow-done");
    }
    FILE *f = fopen(req->out_path, "w");
    if (f == NULL) {
        snprintf(log, loglen, "cannot write %s", req->out_path);
        return KT_ERR_BACKEND;
    }
    for (size_t i = 0; i < req->ndefines; i++) fprintf(f, "%s\n", req->defines[i]);
    return fclose(f) == 0 ? KT_OK : KT_ERR_BACKEND;
}

typedef struct plug_module {
    int reps, mode;
    int maxt; /* MAXT: the threads per block the "compiled" kernel allows (-1: any) */
    int slow; /* SLOW: its build took that many ms (its launches say "launch-slow") */
} plug_module;

static kt_status plug_load(void *state, size_t device, const char *path, const char *kernel, void **module, char *err,
                           size_t errlen) {
    (void)state, (void)device, (void)kernel;
    FILE *f = fopen(path, "r");
    plug_module *m = calloc(1, sizeof *m);
    if (f == NULL || m == NULL) {
        if (f) fclose(f);
        free(m);
        snprintf(err, errlen, "cannot load %s", path);
        return KT_ERR_BACKEND;
    }
    char line[128];
    m->maxt = -1;
    while (fgets(line, sizeof line, f)) {
        sscanf(line, "REPS=%d", &m->reps);
        sscanf(line, "MODE=%d", &m->mode);
        sscanf(line, "MAXT=%d", &m->maxt);
        sscanf(line, "SLOW=%d", &m->slow);
    }
    fclose(f);
    *module = m;
    return KT_OK;
}

/* ABI 11: a module built with MAXT=k allows k threads per block. */
static kt_status plug_fits(void *state, size_t device, void *module, const kt_launch_geometry *g, char *err, size_t errlen) {
    (void)state, (void)device;
    const plug_module *m = module;
    long long threads = (long long)g->local[0] * g->local[1] * g->local[2];
    if (m->maxt < 0 || threads <= m->maxt) return KT_OK;
    snprintf(err, errlen, "plug: needs %lld threads per block; the kernel allows %d", threads, m->maxt);
    return KT_ERR_LIMIT;
}

static void plug_unload(void *state, size_t device, void *module) {
    (void)state, (void)device;
    free(module);
}

static kt_status plug_launch(void *state, size_t device, void *module, const kt_launch_geometry *g, const kt_arg *args,
                             size_t nargs, double *ns, char *err, size_t errlen) {
    (void)state, (void)device, (void)g, (void)nargs;
    const plug_module *m = module;
    note(m->slow > 0 ? "launch-slow" : "launch");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (m->mode == 1) { /* a page that may not be written: a plain SIGSEGV, even under the sanitizers */
        volatile int *bad = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (bad != MAP_FAILED) *bad = 1;
    }
    if (m->mode == 3) {
        snprintf(err, errlen, "plug: launch refused");
        return KT_ERR_BACKEND;
    }
    twice(args, m->reps, m->mode == 5);
    if (m->mode == 2) ((float *)args[0].ptr)[0] += 1.0f;
    if (m->mode == 4) ((float *)args[1].ptr)[0] = 99.0f;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (ns) *ns = (double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec);
    return KT_OK;
}

/* ABI 16: evicting a run's buffers logs "evict-BYTES" for each; the whole cache's flush logs
 * "flush". kt_test_plug_flush evicts; kt_test_plug_flush_whole's flush_buffers cannot for its
 * device (KT_ERR_NOT_FOUND, logged "evict-refused"), so the core flushes the whole cache. */
static kt_status plug_flush(void *state, size_t device, char *err, size_t errlen) {
    (void)state, (void)device, (void)err, (void)errlen;
    note("flush");
    return KT_OK;
}

static kt_status plug_flush_buffers(void *state, size_t device, const kt_arg *args, size_t nargs, char *err, size_t errlen) {
    (void)state, (void)device, (void)err, (void)errlen;
    for (size_t i = 0; i < nargs; i++) {
        if (args[i].type != KT_TYPE_BUFFER) continue;
        char what[48];
        snprintf(what, sizeof what, "evict-%zu", args[i].bytes);
        note(what);
    }
    return KT_OK;
}

static kt_status plug_flush_refused(void *state, size_t device, const kt_arg *args, size_t nargs, char *err, size_t errlen) {
    (void)state, (void)device, (void)args, (void)nargs, (void)err, (void)errlen;
    note("evict-refused");
    return KT_ERR_NOT_FOUND;
}

#define PLUG_TABLE(caps_)                                                                          \
    .abi_version = KT_BACKEND_ABI_VERSION,                                                         \
     .device_count = plug_count,                                                                   \
     .device_describe = plug_describe,                                                             \
     .buffer_alloc = plug_alloc,                                                                   \
     .buffer_free = plug_free,                                                                     \
     .buffer_copy = plug_copy,                                                                     \
     .buffer_fill = plug_fill,                                                                     \
     .artifact_ext = ".plug",                                                                      \
     .compiler_id = plug_compiler,                                                                 \
     .build = plug_build,                                                                          \
     .load = plug_load,                                                                            \
     .unload = plug_unload,                                                                        \
     .launch = plug_launch,                                                                        \
     .fits = plug_fits,                                                                            \
     .caps = (caps_),                                                                              \
     .language = "plug"

/* The plug-in's backend, as a user exports one. */
const kt_backend kt_test_plug = {.name = "plug", PLUG_TABLE(KT_BACKEND_CAP_RUNNER)};
/* The same backend, saying nothing of runners. */
const kt_backend kt_test_plug_nocap = {.name = "plugnocap", PLUG_TABLE(0)};
/* The same backend, its kernels on a processor of their own: a tuning builds while it measures. */
const kt_backend kt_test_plug_pipe = {.name = "plugpipe", PLUG_TABLE(KT_BACKEND_CAP_RUNNER | KT_BACKEND_CAP_OWN_PROCESSOR)};
/* The same backend, checking on its device. */
const kt_backend kt_test_plug_checks = {.name = "plugchecks", PLUG_TABLE(KT_BACKEND_CAP_RUNNER), .digest = plug_digest,
                                        .all_close = plug_all_close};

/* The same backend, flushing its cache by the run's buffers (ABI 16), or unable to. */
const kt_backend kt_test_plug_flush = {.name = "plugflush", PLUG_TABLE(KT_BACKEND_CAP_RUNNER), .flush = plug_flush,
                                       .flush_buffers = plug_flush_buffers};
const kt_backend kt_test_plug_flush_whole = {.name = "plugflushwhole", PLUG_TABLE(KT_BACKEND_CAP_RUNNER), .flush = plug_flush,
                                             .flush_buffers = plug_flush_refused};

/* Native candidates: twice, user times over (user is a number), and one that fails with 42. */
static int native_twice(const kt_arg *args, size_t nargs, void *user) {
    (void)nargs;
    note("native");
    twice(args, (int)(intptr_t)user, 0);
    return 0;
}

int kt_test_plug_native_fails(const kt_arg *args, size_t nargs, void *user) {
    (void)args, (void)nargs, (void)user;
    note("native");
    return 42;
}

/* native_twice is static: no symbol names it, so the runner finds it by its offset in this
 * file (checked by the build-id); built without a build-id, it cannot be found at all. */
kt_native_fn kt_test_plug_native_twice(void) { return native_twice; }
