/*
 * c.c - the C backend: the host CPU as a device.
 *
 * Native candidates (C function pointers) and, later, C kernels compiled by the system compiler
 * run here. The fingerprint records what can change a decision on a CPU: the model, the
 * instruction-set flags, the number of hardware threads and the cache sizes.
 */
#include <kerntune/backend.h>

#include "util/util.h"

#include <pthread.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* Reads the value of the first "key<spaces>: value" line of /proc/cpuinfo into out; returns
 * whether it was found. */
static bool cpuinfo_field(const char *key, char *out, size_t outlen) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f == NULL) return false;
    char line[8192];
    size_t klen = strlen(key);
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        if (strncmp(line, key, klen) != 0) continue;
        const char *p = line + klen;
        while (*p == ' ' || *p == '\t') p++;
        if (*p != ':') continue;
        p++;
        while (*p == ' ') p++;
        snprintf(out, outlen, "%s", p);
        out[strcspn(out, "\n")] = '\0';
        found = true;
    }
    fclose(f);
    return found;
}

static size_t c_device_count(void *state) {
    (void)state;
    return 1;
}

static long cache_size(int name) {
#ifdef _SC_LEVEL1_DCACHE_SIZE
    long v = sysconf(name);
    return v > 0 ? v : 0;
#else
    (void)name;
    return 0;
#endif
}

/* The one device's checks, and what describes the host: its machine (uname) and CPU model. */
static kt_status host_cpu(size_t index, struct utsname *u, char *model, size_t len, char *err, size_t errlen) {
    if (index != 0) {
        snprintf(err, errlen, "device %zu does not exist (the C backend has one)", index);
        return KT_ERR_INVALID_ARGUMENT;
    }
    if (uname(u) != 0) snprintf(u->machine, sizeof u->machine, "unknown");
    if (!cpuinfo_field("model name", model, len) && !cpuinfo_field("Model", model, len) && !cpuinfo_field("CPU part", model, len))
        snprintf(model, len, "%s CPU", u->machine);
    return KT_OK;
}

static kt_status c_device_describe(void *state, size_t index, char *name, char *fp, char *err,
                                   size_t errlen) {
    (void)state;
    struct utsname u;
    char model[256] = "", flags[8192] = "";
    kt_status st = host_cpu(index, &u, model, sizeof model, err, errlen);
    if (st != KT_OK) return st;
    if (!cpuinfo_field("flags", flags, sizeof flags)) cpuinfo_field("Features", flags, sizeof flags);
    long threads = sysconf(_SC_NPROCESSORS_ONLN);
    long l1 = 0, l2 = 0, l3 = 0;
#ifdef _SC_LEVEL1_DCACHE_SIZE
    l1 = cache_size(_SC_LEVEL1_DCACHE_SIZE);
    l2 = cache_size(_SC_LEVEL2_CACHE_SIZE);
    l3 = cache_size(_SC_LEVEL3_CACHE_SIZE);
#endif
    snprintf(name, KT_DEVICE_NAME_MAX, "%.200s (%ld threads)", model, threads);
    snprintf(fp, KT_DEVICE_FINGERPRINT_MAX, "cpu:%.200s|arch=%.64s|threads=%ld|l1d=%ld|l2=%ld|l3=%ld|flags=%016llx",
             model, u.machine, threads, l1, l2, l3,
             (unsigned long long)kt__fnv1a(flags, strlen(flags), 0));
    return KT_OK;
}

/* The architecture: the CPU's model and instruction set ("Intel(R) Xeon(R) ... (x86_64)"); the
 * vendor: its vendor_id ("GenuineIntel") or implementer. */
static kt_status c_classify(void *state, size_t index, char *arch, char *vendor, char *err, size_t errlen) {
    (void)state;
    struct utsname u;
    char model[200] = "", who[120] = "";
    kt_status st = host_cpu(index, &u, model, sizeof model, err, errlen);
    if (st != KT_OK) return st;
    if (!cpuinfo_field("vendor_id", who, sizeof who) && !cpuinfo_field("CPU implementer", who, sizeof who))
        snprintf(who, sizeof who, "%s", u.machine);
    snprintf(arch, KT_DEVICE_NAME_MAX, "%.150s (%.40s)", model, u.machine);
    snprintf(vendor, KT_DEVICE_NAME_MAX, "%.120s", who);
    return KT_OK;
}

/* Host memory: the C backend's buffers are plain malloc'd memory, its "device" is the host. */
static kt_status c_buffer_alloc(void *state, size_t device, size_t bytes, void **out, char *err, size_t errlen) {
    (void)state, (void)device;
    *out = malloc(bytes ? bytes : 1);
    if (*out == NULL) {
        snprintf(err, errlen, "out of memory allocating %zu bytes", bytes);
        return KT_ERR_NO_MEMORY;
    }
    return KT_OK;
}

static void c_buffer_free(void *state, size_t device, void *buffer) {
    (void)state, (void)device;
    free(buffer);
}

static kt_status c_buffer_copy(void *state, size_t device, void *dst, const void *src, size_t bytes,
                               kt_copy_dir dir, char *err, size_t errlen) {
    (void)state, (void)device, (void)dir, (void)err, (void)errlen;
    if (bytes) memmove(dst, src, bytes);
    return KT_OK;
}

static kt_status c_buffer_fill(void *state, size_t device, void *buffer, size_t bytes, const void *pattern,
                               size_t pattern_bytes, char *err, size_t errlen) {
    (void)state, (void)device;
    if (pattern_bytes == 0 || bytes % pattern_bytes != 0) {
        snprintf(err, errlen, "fill of %zu bytes with a %zu-byte pattern", bytes, pattern_bytes);
        return KT_ERR_INVALID_ARGUMENT;
    }
    unsigned char *p = buffer;
    if (pattern_bytes == 1) {
        memset(p, *(const unsigned char *)pattern, bytes);
        return KT_OK;
    }
    /* Write the pattern once, then double the filled prefix until the buffer is full. */
    size_t done = pattern_bytes < bytes ? pattern_bytes : bytes;
    memcpy(p, pattern, done);
    while (done < bytes) {
        size_t n = done < bytes - done ? done : bytes - done;
        memcpy(p + done, p, n);
        done += n;
    }
    return KT_OK;
}

/* ---- building and loading variants --------------------------------------------------------- */

/* The compiler and its default flags, read from the environment once when the backend starts:
 * KERNTUNE_CC (default cc) and KERNTUNE_CFLAGS (default -O3 -march=native -fPIC -shared); and
 * CUDA host code's compiler, KERNTUNE_NVCC (default nvcc). */
typedef struct c_state {
    char *cc;     /* as given, however long */
    char *cflags;
    char *nvcc;   /* CUDA host code's compiler (KERNTUNE_NVCC, default nvcc) */
    pthread_mutex_t lock;
    char id[512]; /* "cc (Debian 12.2.0-14) 12.2.0 | -O3 ...", computed on first use */
} c_state;

static kt_status c_init(const kt_backend *self, void **state, char *err, size_t errlen) {
    (void)self;
    c_state *st = calloc(1, sizeof *st);
    if (st == NULL) {
        snprintf(err, errlen, "out of memory");
        return KT_ERR_NO_MEMORY;
    }
    const char *cc = getenv("KERNTUNE_CC"), *flags = getenv("KERNTUNE_CFLAGS");
    st->cc = strdup(cc && *cc ? cc : "cc");
    st->cflags = strdup(flags && *flags ? flags : "-O3 -march=native -fPIC -shared");
    const char *nvcc = getenv("KERNTUNE_NVCC");
    st->nvcc = strdup(nvcc && *nvcc ? nvcc : "nvcc");
    if (st->cc == NULL || st->cflags == NULL || st->nvcc == NULL) {
        free(st->cc), free(st->cflags), free(st->nvcc), free(st);
        snprintf(err, errlen, "out of memory");
        return KT_ERR_NO_MEMORY;
    }
    pthread_mutex_init(&st->lock, NULL);
    *state = st;
    return KT_OK;
}

static void c_fini(void *state) {
    c_state *st = state;
    if (st == NULL) return;
    pthread_mutex_destroy(&st->lock);
    free(st->cc);
    free(st->cflags);
    free(st->nvcc);
    free(st);
}

/* Splits text at spaces into argv (at most max entries, pointers into buf). Thread-safe: the
 * pool's threads build at once. */
static size_t split_args(char *buf, char **argv, size_t max) {
    size_t n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, " \t", &save); tok && n < max; tok = strtok_r(NULL, " \t", &save)) argv[n++] = tok;
    return n;
}

/* Runs argv with stdout and stderr into log_path; returns the exit status, -1 when it could not
 * be started, or -2 when req's build was cancelled meanwhile (it is stopped then); the reason
 * for -1 and -2 in err. */
static int run_logged(char *const argv[], const char *log_path, char *err, size_t errlen, const kt_build_request *req) {
    /* a build the core may cancel runs in a process group of its own, so that stopping it stops
     * the compiler's own children (cc1, as) too */
    const bool cancellable = req != NULL && req->cancelled != NULL;
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    if (cancellable) posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP), posix_spawnattr_setpgroup(&attr, 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, &attr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
        snprintf(err, errlen, "cannot run '%s': %s", argv[0], strerror(rc));
        return -1;
    }
    int status = 0;
    pid_t got;
    /* cancellable: polled, a millisecond at first and at most 8 between looks */
    for (long nap_us = 1000; cancellable; nap_us = nap_us < 8000 ? nap_us * 2 : 8000) {
        while ((got = waitpid(pid, &status, WNOHANG)) < 0 && errno == EINTR) {}
        if (got != 0) break; /* ended (pid), or lost (below) */
        if (req->cancelled(req->cancel_user)) {
            /* SIGTERM first, which lets the compiler driver remove its temporary files; the
             * group's stragglers get SIGKILL after 200 ms */
            kill(-pid, SIGTERM);
            for (int t = 0; t < 40 && (got = waitpid(pid, &status, WNOHANG)) == 0; t++) {
                struct timespec ms5 = {0, 5000000L};
                nanosleep(&ms5, NULL);
            }
            kill(-pid, SIGKILL);
            if (got != pid)
                while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
            snprintf(err, errlen, "cancelled: the tuning that asked for it has ended");
            return -2;
        }
        struct timespec nap = {0, nap_us * 1000};
        nanosleep(&nap, NULL);
    }
    if (!cancellable)
        while ((got = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {}
    if (got < 0) { /* the application reaped it (a SIGCHLD handler): the outcome is unknown */
        snprintf(err, errlen, "lost the exit status of '%s': %s", argv[0], strerror(errno));
        return -1;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/* Reads up to len - 1 bytes of a file into out ("" when it cannot be read). */
static void read_head(const char *path, char *out, size_t len) {
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (f == NULL) return;
    size_t n = fread(out, 1, len - 1, f);
    out[n] = '\0';
    fclose(f);
}

static kt_status c_compiler_id(void *state, size_t device, char *out, size_t len, char *err, size_t errlen) {
    (void)device;
    c_state *st = state;
    pthread_mutex_lock(&st->lock);
    kt_status status = KT_OK;
    if (st->id[0] == '\0') {
        char log[] = "/tmp/kerntune-ccid-XXXXXX";
        int fd = mkstemp(log);
        if (fd < 0) {
            snprintf(err, errlen, "cannot create a temporary file: %s", strerror(errno));
            status = KT_ERR_SYSTEM;
        } else {
            close(fd);
            char *argv[] = {st->cc, "--version", NULL};
            char first[256];
            int rc = run_logged(argv, log, err, errlen, NULL);
            read_head(log, first, sizeof first);
            first[strcspn(first, "\n")] = '\0';
            if (rc != 0) {
                if (rc > 0) snprintf(err, errlen, "'%s --version' failed (exit %d): %s", st->cc, rc, first);
                status = KT_ERR_BACKEND;
            } else {
                /* the flags are shown cut to fit, and identified in full by a hash of the
                 * compiler command and all its flags, so two long flag sets never share an id */
                uint64_t h = kt__fnv1a(st->cc, strlen(st->cc) + 1, 0);
                h = kt__fnv1a(st->cflags, strlen(st->cflags), h);
                /* and CUDA host code's compiler, by its whole version text ("none" without one) */
                char nv[1024] = "none", why[64];
                char *nargv[] = {st->nvcc, "--version", NULL};
                if (run_logged(nargv, log, why, sizeof why, NULL) == 0) read_head(log, nv, sizeof nv);
                h = kt__fnv1a(st->nvcc, strlen(st->nvcc) + 1, h);
                h = kt__fnv1a(nv, strlen(nv), h);
                snprintf(st->id, sizeof st->id, "%.200s | %.200s | %016llx", first, st->cflags, (unsigned long long)h);
            }
            unlink(log);
        }
    }
    if (status == KT_OK) snprintf(out, len, "%s", st->id);
    pthread_mutex_unlock(&st->lock);
    return status;
}

/* The C type of an argument as the entry wrapper passes it. */
static const char *c_type(kt_type t) {
    switch (t) {
    case KT_TYPE_I8: return "signed char";
    case KT_TYPE_I16: return "short";
    case KT_TYPE_I32: return "int";
    case KT_TYPE_I64: return "long long";
    case KT_TYPE_U8: return "unsigned char";
    case KT_TYPE_U16: case KT_TYPE_F16: case KT_TYPE_BF16: return "unsigned short";
    case KT_TYPE_U32: return "unsigned int";
    case KT_TYPE_U64: return "unsigned long long";
    case KT_TYPE_F32: return "float";
    case KT_TYPE_F64: return "double";
    case KT_TYPE_BUFFER: case KT_TYPE_BYTES: break; /* no launch parameters here (no KT_BACKEND_CAP_LAUNCH_PARAMS) */
    }
    return "void";
}

static bool ident_char(char c) { return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

/* Whether the source declares kernel_name as a function returning float or double: under Kernel
 * Tuner's C contract such a function returns its run's time in milliseconds, which is the time
 * Kernel Tuner records for the run. The declaration is the first mention of the name followed
 * by '(' whose last word before it is a type's (not a call's: after '=', '(', ',', "return"). */
static bool returns_time(const char *source, const char *name) {
    size_t n = strlen(name);
    for (const char *p = strstr(source, name); p != NULL; p = strstr(p + 1, name)) {
        if ((p > source && ident_char(p[-1])) || ident_char(p[n])) continue;
        const char *q = p + n;
        while (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r') q++;
        if (*q != '(') continue;
        const char *e = p; /* the word before the name */
        while (e > source && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r')) e--;
        const char *b = e;
        while (b > source && ident_char(b[-1])) b--;
        if (b == e) continue; /* '*', '=', '(', ',', or the start: no type's word */
        size_t len = (size_t)(e - b);
        if (len == 6 && strncmp(b, "return", 6) == 0) continue;
        return (len == 5 && strncmp(b, "float", 5) == 0) || (len == 6 && strncmp(b, "double", 6) == 0);
    }
    return false;
}

/* Whether the variant is CUDA host code, compiled by nvcc as C++: under Kernel Tuner's contract,
 * by Kernel Tuner's rule for its C backend (device code in it, or CUDA's runtime). */
static bool cuda_host_code(const kt_build_request *req) {
    const char *s = req->source;
    return (req->flags & KT_BUILD_KERNEL_TUNER) && (strstr(s, "__global") || strstr(s, "__syncthreads()") ||
                                                    strstr(s, "threadIdx") || strstr(s, "#include <cuda") || strstr(s, "cudaMemcpy"));
}

/* Writes the variant's source: its defines, the kernel, and an entry point with kerntune's
 * candidate signature that unpacks the arguments and calls the kernel (the convention: a
 * Vector as a pointer to its element type, a Scalar by value, in order). The defines are undone
 * before the entry and its names are kerntune's reserved ones, so no parameter name or kernel
 * name can collide with them. */
static bool write_source(FILE *f, const kt_build_request *req) {
    fprintf(f, "/* generated by kerntune: one variant of '%s' */\n", req->kernel_name);
    for (size_t i = 0; i < req->ndefines; i++) {
        const char *eq = strchr(req->defines[i], '=');
        if (eq) fprintf(f, "#define %.*s %s\n", (int)(eq - req->defines[i]), req->defines[i], eq + 1);
        else fprintf(f, "#define %s\n", req->defines[i]);
    }
    fprintf(f, "#line 1 \"kernel\"\n%s\n", req->source);
    fprintf(f, "#line 1 \"kerntune-entry\"\n");
    for (size_t i = 0; i < req->ndefines; i++) {
        const char *eq = strchr(req->defines[i], '=');
        fprintf(f, "#undef %.*s\n", eq ? (int)(eq - req->defines[i]) : (int)strlen(req->defines[i]), req->defines[i]);
    }
    /* Kernel Tuner's C contract: a function that returns float or double returns its run's
     * time in ms, kept for kt__reported (per thread); a negative one is a failed run */
    const bool timed = (req->flags & KT_BUILD_KERNEL_TUNER) && returns_time(req->source, req->kernel_name);
    /* CUDA host code (C++): the entry has C linkage, a buffer converts to whatever pointer the
     * function takes, and each buffer is registered with CUDA as mapped memory for the call, so
     * that device code may use its host address (as Kernel Tuner's callers pass device-mapped
     * host memory) */
    const bool cuda = cuda_host_code(req);
    const char *linkage = cuda ? "extern \"C\" " : "";
    fprintf(f, "typedef struct { int kt__type; union { void *kt__ptr; long long kt__i; unsigned long long kt__u;"
               " float kt__f32; double kt__f64; } kt__v; __SIZE_TYPE__ kt__bytes; } kt__arg_t;\n");
    if (cuda)
        fprintf(f, "struct kt__ptr { void *kt__p; template <class T> operator T *() const { return (T *)kt__p; } };\n");
    if (timed)
        fprintf(f, "static __thread double kt__ms = -1;\n"
                   "%s__attribute__((visibility(\"default\"))) double kt__reported(void) {\n"
                   "    double kt__t = kt__ms;\n    kt__ms = -1;\n    return kt__t;\n}\n", linkage);
    /* why the wrapper failed a run (per thread), for the backend's run_failure */
    if (timed || cuda)
        fprintf(f, "static __thread char kt__why[200];\n"
                   "%s__attribute__((visibility(\"default\"))) const char *kt__failure(void) { return kt__why; }\n", linkage);
    fprintf(f, "%s__attribute__((visibility(\"default\"))) int kt__entry(const kt__arg_t *kt__a, __SIZE_TYPE__ kt__n,"
               " void *kt__user) {\n"
               "    (void)kt__n; (void)kt__user;\n", linkage);
    /* what unregisters the buffers registered, after the call or when one cannot be */
    const char *unreg = "for (__SIZE_TYPE__ kt__j = 0; kt__j < kt__nreg; kt__j++) if (kt__reg[kt__j]) "
                        "cudaHostUnregister(kt__a[kt__j].kt__v.kt__ptr)";
    if (cuda)
        fprintf(f, "    const __SIZE_TYPE__ kt__nreg = kt__n < %zu ? kt__n : %zu;\n"
                   "    bool kt__reg[%zu] = {false};\n"
                   "    for (__SIZE_TYPE__ kt__i = 0; kt__i < kt__nreg; kt__i++) {\n"
                   "        if (kt__a[kt__i].kt__type != %d || kt__a[kt__i].kt__bytes == 0) continue;\n"
                   "        cudaError_t kt__e = cudaHostRegister(kt__a[kt__i].kt__v.kt__ptr, kt__a[kt__i].kt__bytes,"
                   " cudaHostRegisterMapped | cudaHostRegisterPortable);\n"
                   "        if (kt__e == cudaSuccess) kt__reg[kt__i] = true;\n"
                   "        else if (kt__e == cudaErrorHostMemoryAlreadyRegistered) (void)cudaGetLastError();\n"
                   "        else {\n            %s;\n"
                   "            __builtin_snprintf(kt__why, sizeof kt__why, \"cudaHostRegister of argument %%zu (%%zu bytes) failed: %%s\",\n"
                   "                               (__SIZE_TYPE__)kt__i, (__SIZE_TYPE__)kt__a[kt__i].kt__bytes, cudaGetErrorString(kt__e));\n"
                   "            return 2;\n        }\n"
                   "    }\n",
                req->nargs, req->nargs, req->nargs ? req->nargs : 1, (int)KT_TYPE_BUFFER, unreg);
    fprintf(f, "    %s%s(", timed ? "double kt__t = (double)" : "", req->kernel_name);
    for (size_t i = 0; i < req->nargs; i++) {
        kt_type t = req->arg_types[i];
        const char *sep = i ? ", " : "";
        if (t == KT_TYPE_BUFFER && cuda) fprintf(f, "%skt__ptr{kt__a[%zu].kt__v.kt__ptr}", sep, i);
        else if (t == KT_TYPE_BUFFER) fprintf(f, "%s(%s *)kt__a[%zu].kt__v.kt__ptr", sep, c_type(req->arg_elems[i]), i);
        else if (t == KT_TYPE_F32) fprintf(f, "%skt__a[%zu].kt__v.kt__f32", sep, i);
        else if (t == KT_TYPE_F64) fprintf(f, "%skt__a[%zu].kt__v.kt__f64", sep, i);
        else if (t >= KT_TYPE_U8 && t <= KT_TYPE_U64) fprintf(f, "%s(%s)kt__a[%zu].kt__v.kt__u", sep, c_type(t), i);
        else fprintf(f, "%s(%s)kt__a[%zu].kt__v.kt__i", sep, c_type(t), i);
    }
    fprintf(f, ");\n");
    if (cuda) fprintf(f, "    %s;\n", unreg);
    if (timed)
        fprintf(f, "    kt__ms = kt__t >= 0 ? kt__t : -1;\n"
                   "    if (kt__t >= 0) return 0;\n"
                   "    __builtin_snprintf(kt__why, sizeof kt__why, \"the function returned %%g ms: under Kernel Tuner's C contract a\"\n"
                   "                       \" negative time is a failed run\", kt__t);\n"
                   "    return 1;\n}\n");
    else fprintf(f, "    return 0;\n}\n");
    return !ferror(f);
}

static kt_status c_build(void *state, size_t device, const kt_build_request *req, char *log, size_t loglen) {
    (void)device;
    c_state *st = state;
    size_t plen = strlen(req->out_path) + 8;
    char *src = malloc(plen), *logp = malloc(plen);
    if (src == NULL || logp == NULL) {
        free(src), free(logp);
        snprintf(log, loglen, "out of memory");
        return KT_ERR_NO_MEMORY;
    }
    const bool cuda = cuda_host_code(req);
    snprintf(src, plen, "%s.%s", req->out_path, cuda ? "cu" : "c");
    snprintf(logp, plen, "%s.log", req->out_path);
    kt_status status = KT_OK;
    FILE *f = fopen(src, "w");
    if (f == NULL || !write_source(f, req)) {
        snprintf(log, loglen, "cannot write %s: %s", src, strerror(errno));
        status = KT_ERR_SYSTEM;
    }
    if (f != NULL && fclose(f) != 0 && status == KT_OK) {
        snprintf(log, loglen, "cannot write %s: %s", src, strerror(errno));
        status = KT_ERR_SYSTEM;
    }
    char *flags = NULL, **argv = NULL;
    if (status == KT_OK) { /* every flag and option, however many */
        flags = strdup(st->cflags);
        argv = calloc(strlen(st->cflags) / 2 + req->noptions + 8, sizeof *argv);
        if (flags == NULL || argv == NULL) {
            snprintf(log, loglen, "out of memory");
            status = KT_ERR_NO_MEMORY;
        }
    }
    if (status == KT_OK) {
        size_t n = 0;
        if (cuda) { /* nvcc: a shared object of position-independent host code, as Kernel Tuner builds it */
            argv[n++] = st->nvcc;
            argv[n++] = "-O3";
            argv[n++] = "-shared";
            argv[n++] = "-Xcompiler=-fPIC,-fvisibility=hidden";
        } else {
            argv[n++] = st->cc;
            n += split_args(flags, argv + n, strlen(st->cflags) / 2 + 1);
            /* the kernel's own symbols stay inside the variant: a call from the entry can never
             * bind to a function of the same name in the host program */
            argv[n++] = "-fvisibility=hidden";
        }
        for (size_t i = 0; i < req->noptions; i++) argv[n++] = (char *)req->options[i];
        argv[n++] = "-o";
        argv[n++] = (char *)req->out_path;
        argv[n++] = src;
        argv[n] = NULL;
        int rc = run_logged(argv, logp, log, loglen, req);
        if (rc != 0) {
            if (rc > 0) {
                char head[2048];
                read_head(logp, head, sizeof head);
                snprintf(log, loglen, "%s exited with %d: %s", argv[0], rc, head);
            }
            /* could not run, cancelled, or killed (the OOM killer, a signal): the environment's failure */
            status = rc < 0 || rc >= 128 ? KT_ERR_SYSTEM : KT_ERR_BACKEND;
        }
    }
    unlink(src);
    unlink(logp);
    free(flags);
    free(argv);
    free(src);
    free(logp);
    return status;
}

typedef struct c_module {
    void *handle;
    kt_native_fn fn;
    double (*reported)(void); /* the run's own time in ms (Kernel Tuner's C contract), or NULL */
    const char *(*failure)(void); /* why the wrapper failed its last run on this thread, or NULL */
} c_module;

static kt_status c_load(void *state, size_t device, const char *path, const char *kernel_name, void **module, char *err,
                        size_t errlen) {
    (void)state, (void)device;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        const char *why = dlerror();
        snprintf(err, errlen, "cannot load the variant of '%s': %s", kernel_name, why ? why : "dlopen failed");
        return KT_ERR_BACKEND;
    }
    c_module *m = calloc(1, sizeof *m);
    void *sym = dlsym(h, "kt__entry");
    if (m == NULL || sym == NULL) {
        snprintf(err, errlen, m ? "entry point kt__entry missing from %s" : "out of memory", path);
        free(m);
        dlclose(h);
        return KT_ERR_BACKEND;
    }
    m->handle = h;
    memcpy(&m->fn, &sym, sizeof m->fn); /* POSIX guarantees function pointers from dlsym */
    void *rep = dlsym(h, "kt__reported");
    if (rep != NULL) memcpy(&m->reported, &rep, sizeof m->reported);
    void *why = dlsym(h, "kt__failure");
    if (why != NULL) memcpy(&m->failure, &why, sizeof m->failure);
    *module = m;
    return KT_OK;
}

static void c_unload(void *state, size_t device, void *module) {
    (void)state, (void)device;
    c_module *m = module;
    if (m == NULL) return;
    dlclose(m->handle);
    free(m);
}

static kt_native_fn c_entry(void *state, void *module) {
    (void)state;
    return ((c_module *)module)->fn;
}

static void c_reported_ns(void *state, void *module, double *ns) {
    (void)state;
    const c_module *m = module;
    double ms = m->reported ? m->reported() : -1;
    *ns = ms >= 0 ? ms * 1e6 : -1;
}

static int c_run_failure(void *state, void *module, int rc, char *msg, size_t len) {
    (void)state, (void)rc;
    const c_module *m = module;
    const char *why = m->failure ? m->failure() : NULL;
    if (why == NULL || why[0] == '\0') return 0;
    snprintf(msg, len, "%s", why);
    return 1;
}

static const kt_backend kt__backend_c = {
    .abi_version = KT_BACKEND_ABI_VERSION,
    .name = "c",
    .init = c_init,
    .fini = c_fini,
    .device_count = c_device_count,
    .device_describe = c_device_describe,
    .classify = c_classify,
    .buffer_alloc = c_buffer_alloc,
    .buffer_free = c_buffer_free,
    .buffer_copy = c_buffer_copy,
    .buffer_fill = c_buffer_fill,
    .artifact_ext = ".so",
    .compiler_id = c_compiler_id,
    .build = c_build,
    .load = c_load,
    .unload = c_unload,
    .entry = c_entry,
    .launch = NULL,
    .limits = NULL,
    .caps = KT_BACKEND_CAP_HOST_MEMORY | KT_BACKEND_CAP_RUNNER |
            KT_BACKEND_CAP_PREPROCESSED,
    .language = "C",
    .reported_ns = c_reported_ns,
    .run_failure = c_run_failure,
};

const kt_backend *kt_backend_c(void) { return &kt__backend_c; }
