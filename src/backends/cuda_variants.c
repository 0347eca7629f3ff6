/*
 * cuda_variants.c - the CUDA backend's variants: NVRTC compiles a variant for the device's own
 * architecture (-arch=sm_XY) with its defines as -D options; the kernel's lowered (mangled)
 * name is found through a name expression, so kernels need no extern "C". The artifact is a
 * small header naming the lowered kernel and the `__constant__` variables of the op's
 * constant-memory arguments, then the cubin, loaded with cuModuleLoadData. Before each launch
 * a constant-memory argument's buffer is copied into its variable (device to device, in stream
 * order, outside the timed region); the kernel receives it as a parameter too, like every
 * argument (as Kernel Tuner's cmem_args and T1 reader do). Launches are timed with CUDA events.
 */
#include "backends/cuda_int.h"
#include "backends/contract.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- variants ------------------------------------------------------------------------------- */

/* Says NVRTC is missing (a backend started without it loads carried artifacts only). */
static kt_status no_nvrtc(char *err, size_t errlen) {
    snprintf(err, errlen, "NVRTC (libnvrtc.so) is not installed, so nothing can be compiled; set KERNTUNE_NVRTC to its path");
    return KT_ERR_BACKEND;
}

kt_status kt__cu_compiler_id(void *state, size_t device, char *out, size_t len, char *err, size_t errlen) {
    cu_state *s = state;
    if (s->nvrtc == NULL) {
        out[0] = '\0';
        return no_nvrtc(err, errlen);
    }
    snprintf(out, len, "nvrtc %d.%d | driver %d | sm_%d%d", s->rtc_major, s->rtc_minor, s->devs[device].driver,
             s->devs[device].cc_major, s->devs[device].cc_minor);
    return KT_OK;
}

/* KTCUBIN2: the lowered kernel name; the number of constant-memory arguments; one line "ARG
 * NAME" each (the argument's index and its variable's lowered name); the cubin. KTCUBIN1 (no
 * constants) is still read. */
static const char cubin_magic[] = "KTCUBIN2\n", cubin_magic_v1[] = "KTCUBIN1\n";

/* ---- Kernel Tuner's compile contract (KT_BUILD_KERNEL_TUNER) ----------------------------------- */

char *kt__cu_contract_source(const char *source, const char *const *defines, size_t ndefines, bool *as_option) {
    size_t len = strlen(source), prefix = 16;
    for (size_t i = 0; i < ndefines; i++) prefix += strlen(defines[i]) + 32;
    char *text = malloc(len + 1), *out = NULL;
    if (text == NULL) return NULL;
    memcpy(text, source, len + 1);
    char *head = malloc(prefix);
    if (head == NULL) {
        free(text);
        return NULL;
    }
    size_t k = 0;
    head[0] = '\0';
    for (size_t i = 0; i < ndefines; i++) {
        const char *d = defines[i], *eq = strchr(d, '='), *at = strstr(d, "loop_unroll_factor");
        as_option[i] = at == NULL || (eq != NULL && at > eq);
        if (as_option[i]) continue;
        size_t nlen = eq ? (size_t)(eq - d) : strlen(d);
        const char *value = eq ? eq + 1 : "1"; /* -DNAME means 1 */
        if (strcmp(value, "0") != 0) {
            k += (size_t)snprintf(head + k, prefix - k, "constexpr int %.*s = %s;\n", (int)nlen, d, value);
            continue;
        }
        char name[512]; /* the pragmas that name it go, each with the white space before it */
        if (nlen >= sizeof name) nlen = sizeof name - 1;
        memcpy(name, d, nlen);
        name[nlen] = '\0';
        kt__contract_drop_unroll(text, name);
    }
    snprintf(head + k, prefix - k, "#line 1\n");
    size_t hl = strlen(head), tl = strlen(text);
    if ((out = malloc(hl + tl + 1)) != NULL) {
        memcpy(out, head, hl);
        memcpy(out + hl, text, tl + 1);
    }
    free(head);
    free(text);
    return out;
}

/* Compiles one variant with NVRTC in this process. */
kt_status kt__cu_build_here(cu_state *s, size_t device, const kt_build_request *req, char *log, size_t loglen) {
    size_t nopt = req->ndefines + req->noptions + 1;
    char **opts = calloc(nopt, sizeof *opts);
    char arch[32];
    snprintf(arch, sizeof arch, "-arch=sm_%d%d", s->devs[device].cc_major, s->devs[device].cc_minor);
    kt_status st = opts ? KT_OK : KT_ERR_NO_MEMORY;
    /* Kernel Tuner's contract: its CUDA prefix and pragmas in the source; the other defines stay options */
    bool contract = (req->flags & KT_BUILD_KERNEL_TUNER) != 0;
    bool *as_option = contract ? calloc(req->ndefines ? req->ndefines : 1, sizeof *as_option) : NULL;
    char *source = contract && as_option ? kt__cu_contract_source(req->source, req->defines, req->ndefines, as_option) : NULL;
    if (contract && source == NULL) st = KT_ERR_NO_MEMORY;
    size_t k = 0;
    for (size_t i = 0; st == KT_OK && i < req->ndefines; i++) {
        if (contract && !as_option[i]) continue;
        size_t n = strlen(req->defines[i]) + 3;
        if ((opts[k] = malloc(n)) == NULL) st = KT_ERR_NO_MEMORY;
        else snprintf(opts[k++], n, "-D%s", req->defines[i]);
    }
    if (st != KT_OK) {
        for (size_t i = 0; opts && i < k; i++) free(opts[i]);
        free(opts);
        free(as_option), free(source);
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
    nvrtcResult rc = oom ? 1 : s->api.rtcCreateProgram(&prog, source ? source : req->source, "kernel.cu", 0, NULL, NULL);
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
            /* NVRTC_ERROR_COMPILATION (6): the code's failure; out of memory (1) and the rest:
             * the environment's, tried again next time */
            st = rc == 6 ? KT_ERR_BACKEND : rc == 1 ? KT_ERR_NO_MEMORY : KT_ERR_SYSTEM;
        }
    } else {
        snprintf(log, loglen, "NVRTC: %s", oom ? "out of memory" : s->api.rtcGetErrorString(rc));
        st = oom ? KT_ERR_NO_MEMORY : KT_ERR_BACKEND;
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
    free(as_option), free(source);
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

kt_status kt__cu_build(void *state, size_t device, const kt_build_request *req, char *log, size_t loglen) {
    cu_state *s = state;
    if (s->nvrtc == NULL) return no_nvrtc(log, loglen);
    const char *env = getenv("KERNTUNE_NVRTC_PROCESSES");
    if (env && strcmp(env, "0") == 0) return kt__cu_build_here(s, device, req, log, loglen); /* never forks then */
    /* A compile target (KERNTUNE_CUDA_TARGET) compiles in this process: its process exists to
     * compile (a fleet's compile worker, whose jobs the fleet takes over if it dies), and a child
     * forked without exec that loads NVRTC's builtins can wait for ever on the dynamic loader's
     * lock when another thread held it at the fork (seen once, under ASan, in test-cuda-target). */
    if (s->devs[device].target_only) return kt__cu_build_here(s, device, req, log, loglen);
    int fds[2];
    pid_t pid = -1;
    if (pipe(fds) == 0 && (pid = fork()) < 0) close(fds[0]), close(fds[1]);
    if (pid < 0) { /* compiling here instead would break "the parent never compiles" */
        snprintf(log, loglen, "cannot start an NVRTC process: %s", strerror(errno));
        return KT_ERR_SYSTEM;
    }
    if (pid == 0) { /* the child: compile, report, exit without running the parent's atexit handlers */
        close(fds[0]);
        char buf[4096] = "";
        int32_t head[2] = {(int32_t)kt__cu_build_here(s, device, req, buf, sizeof buf), 0};
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
    /* While the child compiles, whether the core still wants the build: if not, the child is
     * killed (NVRTC's longest compiles take seconds, which an ended tuning would wait for). */
    while (req->cancelled) {
        struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
        int r = poll(&pfd, 1, 20);
        if (r > 0 || (r < 0 && errno != EINTR)) break; /* the report (or the pipe's end) is there */
        if (req->cancelled(req->cancel_user)) {
            kill(pid, SIGKILL);
            close(fds[0]);
            while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
            snprintf(log, loglen, "cancelled: the tuning that asked for it has ended");
            return KT_ERR_SYSTEM;
        }
    }
    /* A status and a length, then exactly that much log: never waiting for end of file, which
     * sibling NVRTC processes holding a copy of this pipe could delay. */
    int32_t head[2] = {-1, 0};
    bool have = read_full(fds[0], head, sizeof head) && head[1] >= 0;
    size_t len = have ? (size_t)head[1] : 0, keep = len < loglen ? len : (loglen ? loglen - 1 : 0);
    if (have && keep > 0) have = read_full(fds[0], log, keep);
    if (loglen) log[have ? keep : 0] = '\0';
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (!have) {
        snprintf(log, loglen, "the NVRTC process died (%s %d)", WIFSIGNALED(status) ? "signal" : "exit",
                 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
        return KT_ERR_SYSTEM; /* not the code's failure: tried again next time */
    }
    return (kt_status)head[0];
}

kt_status kt__cu_load(void *state, size_t device, const char *path, const char *kernel_name, void **module,
                         char *err, size_t errlen) {
    cu_state *s = state;
    size_t size;
    bool opened;
    char *data = (char *)kt__read_whole(path, &size, &opened);
    if (!opened) {
        snprintf(err, errlen, "cannot open %s", path);
        return KT_ERR_SYSTEM;
    }
    bool ok = data != NULL && size > 0;
    size_t mlen = sizeof cubin_magic - 1;
    bool v2 = ok && size > mlen && memcmp(data, cubin_magic, mlen) == 0;
    bool v1 = ok && !v2 && size > mlen && memcmp(data, cubin_magic_v1, mlen) == 0;
    char *end = data ? data + size : NULL;
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
    kt_status st = kt__cu_use(s, device, err, errlen);
    cu_module *m = st == KT_OK ? calloc(1, sizeof *m) : NULL;
    if (m) m->consts = calloc(nconst ? nconst : 1, sizeof *m->consts);
    if (st == KT_OK && (m == NULL || m->consts == NULL)) {
        snprintf(err, errlen, "out of memory");
        st = KT_ERR_NO_MEMORY;
    }
    CUresult rc = 0;
    if (st == KT_OK && (rc = s->api.ModuleLoadData(&m->module, cubin)) != 0) st = kt__cu_fail(s, rc, "cuModuleLoadData", err, errlen);
    if (st == KT_OK && (rc = s->api.ModuleGetFunction(&m->fn, m->module, lowered)) != 0) {
        snprintf(err, errlen, "kernel '%s' not found in the module (CUDA error %d)", kernel_name, rc);
        s->api.ModuleUnload(m->module);
        st = KT_ERR_BACKEND;
    }
    /* Under lazy loading (CUDA_MODULE_LOADING=LAZY, the default since CUDA 12.2) the function may
     * be only partially loaded, and the driver finishes loading it at its first launch, which
     * may synchronise the whole context. That first launch is often a hit (kt_op_tune measures
     * in a runner process and launches nothing here), and a hit must never wait for another
     * stream's work: the function is loaded now, while tuning. */
    if (st == KT_OK && s->api.FuncLoad != NULL && (rc = s->api.FuncLoad(m->fn)) != 0) {
        st = kt__cu_fail(s, rc, "cuFuncLoad", err, errlen);
        s->api.ModuleUnload(m->module);
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

/* What the compiled kernel needs, from the driver: the most threads per block its registers
 * allow (CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 0), its registers (NUM_REGS, 4) and static
 * shared memory (SHARED_SIZE_BYTES, 1), against the launch's block and dynamic shared memory. */
kt_status kt__cu_fits(void *state, size_t device, void *module, const kt_launch_geometry *g, char *err, size_t errlen) {
    cu_state *s = state;
    cu_module *m = module;
    kt_status st = kt__cu_use(s, device, err, errlen);
    if (st != KT_OK) return st;
    int max_threads = 0, regs = 0, shared = 0, optin = 0;
    if (s->api.FuncGetAttribute(&max_threads, 0, m->fn) != 0 || s->api.FuncGetAttribute(&regs, 4, m->fn) != 0 ||
        s->api.FuncGetAttribute(&shared, 1, m->fn) != 0)
        return KT_OK; /* the launch will say */
    if (s->api.DeviceGetAttribute(&optin, ATTR_MAX_SHARED_PER_BLOCK_OPTIN, s->devs[device].dev) != 0) optin = 0;
    long long threads = (long long)g->local[0] * g->local[1] * g->local[2];
    if (max_threads > 0 && threads > max_threads) {
        snprintf(err, errlen, "needs %lld threads per block; the compiled kernel, with %d registers a thread, allows %d", threads,
                 regs, max_threads);
        return KT_ERR_LIMIT;
    }
    if (optin > 0 && (long long)shared + g->shared_memory > optin) {
        snprintf(err, errlen, "needs %d bytes of static and %lld of dynamic shared memory a block; the device allows %d", shared,
                 (long long)g->shared_memory, optin);
        return KT_ERR_LIMIT;
    }
    return KT_OK;
}

/* Registers (NUM_REGS, 4), static shared memory (SHARED_SIZE_BYTES, 1) and local memory a thread
 * (LOCAL_SIZE_BYTES, 3: where registers spill), from the driver. */
kt_status kt__cu_resources(void *state, size_t device, void *module, int *registers, int *shared_bytes, int *local_bytes, char *err,
                           size_t errlen) {
    cu_state *s = state;
    cu_module *m = module;
    kt_status st = kt__cu_use(s, device, err, errlen);
    if (st != KT_OK) return st;
    if (s->api.FuncGetAttribute(registers, 4, m->fn) != 0) *registers = -1;
    if (s->api.FuncGetAttribute(shared_bytes, 1, m->fn) != 0) *shared_bytes = -1;
    if (s->api.FuncGetAttribute(local_bytes, 3, m->fn) != 0) *local_bytes = -1;
    return KT_OK;
}

void kt__cu_unload(void *state, size_t device, void *module) {
    cu_state *s = state;
    cu_module *m = module;
    char err[64];
    if (m == NULL) return;
    if (kt__cu_use(s, device, err, sizeof err) == KT_OK) s->api.ModuleUnload(m->module);
    pthread_mutex_destroy(&m->lock);
    free(m->consts);
    free(m);
}

/* What one launch needs: its grid and block, and its parameters (pointing into args: a buffer's
 * pointer is passed as the CUdeviceptr it holds, which has its size and bits). Checks the
 * constant-memory arguments and opts the function in to its dynamic shared memory. */
typedef struct cu_call {
    unsigned grid[3], block[3];
    bool empty;        /* a dimension of zero: nothing to run */
    void *params[256]; /* only the first nargs are written */
} cu_call;
_Static_assert(sizeof(void *) == sizeof(CUdeviceptr), "a buffer's pointer is passed as its CUdeviceptr");

KT__HOT static kt_status prepare(cu_state *s, cu_module *m, const kt_launch_geometry *g, const kt_arg *args, size_t nargs, cu_call *c,
                         char *err, size_t errlen) {
    c->empty = false;
    for (int d = 0; d < 3; d++) {
        int64_t b = g->local[d] > 0 ? g->local[d] : 1;
        int64_t n = g->kind == KT_GEOMETRY_GRID ? g->global[d] : (g->global[d] + b - 1) / b;
        if (n <= 0) {
            c->empty = true; /* nothing to run */
            return KT_OK;
        }
        c->grid[d] = (unsigned)n;
        c->block[d] = (unsigned)b;
    }
    CUresult rc = 0;
    if (g->shared_memory > STATIC_SHARED_DEFAULT_LIMIT) { /* opt in to more dynamic shared memory */
        pthread_mutex_lock(&m->lock);
        if (m->dynamic_limit < g->shared_memory)
            rc = s->api.FuncSetAttribute(m->fn, FUNC_ATTR_MAX_DYNAMIC_SHARED, (int)g->shared_memory);
        if (rc == 0 && m->dynamic_limit < g->shared_memory) m->dynamic_limit = (int)g->shared_memory;
        pthread_mutex_unlock(&m->lock);
        if (rc != 0) return kt__cu_fail(s, rc, "cuFuncSetAttribute (dynamic shared memory)", err, errlen);
    }
    if (nargs > 256) {
        snprintf(err, errlen, "at most 256 kernel arguments");
        return KT_ERR_LIMIT;
    }
    for (size_t i = 0; i < nargs; i++) { /* every argument is a parameter, constant ones too (as Kernel Tuner passes them) */
        if (args[i].type == KT_TYPE_BUFFER) {
            c->params[i] = (void *)&args[i].ptr;
        } else if (args[i].type == KT_TYPE_BYTES) { /* a launch parameter: its bytes are the value */
            c->params[i] = args[i].ptr;
        } else if (args[i].type == KT_TYPE_F32) {
            c->params[i] = (void *)&args[i].f32;
        } else if (args[i].type == KT_TYPE_F64) {
            c->params[i] = (void *)&args[i].f64;
        } else { /* integers: the low bytes of the 64-bit value, little-endian, at the declared width */
            c->params[i] = (void *)&args[i].u;
        }
    }
    for (size_t k = 0; k < m->nconsts; k++) { /* stream-ordered before the launch, outside its timing */
        const cu_const *cc = &m->consts[k];
        if (cc->arg >= nargs || args[cc->arg].type != KT_TYPE_BUFFER) {
            snprintf(err, errlen, "constant-memory argument %zu is not a buffer argument of this call", cc->arg);
            return KT_ERR_BACKEND;
        }
        if (args[cc->arg].bytes > cc->bytes) {
            snprintf(err, errlen, "constant-memory argument %zu has %zu bytes; its __constant__ variable holds %zu", cc->arg,
                     args[cc->arg].bytes, cc->bytes);
            return KT_ERR_INVALID_ARGUMENT;
        }
    }
    return KT_OK;
}

/* Enqueues the constant-memory copies and the launch on stream, timed between start and stop
 * when given. The module's __constant__ variables are one per module: two threads launching it
 * at once must not interleave their copies and launches, or a kernel would read the other
 * call's data; the lock covers enqueueing them, which the stream then orders. */
KT__HOT static CUresult enqueue(cu_state *s, cu_module *m, const kt_arg *args, const kt_launch_geometry *g, cu_call *c, CUstream stream,
                        CUevent start, CUevent stop, const char **what) {
    CUresult rc = 0;
    if (m->nconsts > 0) pthread_mutex_lock(&m->lock);
    for (size_t k = 0; rc == 0 && k < m->nconsts; k++) {
        const cu_const *cc = &m->consts[k];
        if (args[cc->arg].bytes > 0 &&
            (rc = s->api.MemcpyDtoDAsync(cc->ptr, DPTR(args[cc->arg].ptr), args[cc->arg].bytes, stream)) != 0)
            *what = "copying a constant-memory argument (cuMemcpyDtoDAsync)";
    }
    if (rc == 0 && start) rc = s->api.EventRecord(start, stream);
    if (rc == 0)
        rc = s->api.LaunchKernel(m->fn, c->grid[0], c->grid[1], c->grid[2], c->block[0], c->block[1], c->block[2],
                                 (unsigned)g->shared_memory, stream, c->params, NULL);
    if (rc == 0 && stop) rc = s->api.EventRecord(stop, stream);
    if (m->nconsts > 0) pthread_mutex_unlock(&m->lock);
    return rc;
}

/* Two timing events around work on the own stream (none when not timed), behind a gate.
 *
 * The events time what the device does between them; on an idle stream the start event's
 * timestamp is taken as soon as it is enqueued, so the host's time to enqueue the work after it
 * (microseconds for a vendor library's call, more than a small kernel runs) would be counted as
 * the work's. So a timed run first enqueues a host function that holds the stream until the
 * events and the work are all enqueued (the gate), and the device then runs them back to back.
 * The gate opens by itself after GATE_MAX_NS, so work that waits for its own stream (a
 * synchronising call inside a native candidate) is delayed, not deadlocked. */
#define GATE_MAX_NS 100000000L

typedef struct timing {
    CUevent start, stop;
    atomic_int open; /* the gate: the host function holding the stream returns once it is set */
    bool gated;
} timing;

static void gate_wait(void *p) {
    timing *t = p;
    double t0 = kt__now_s();
    while (!atomic_load_explicit(&t->open, memory_order_acquire))
        if (kt__now_s() - t0 > GATE_MAX_NS * 1e-9) break;
}

static kt_status timing_start(cu_state *s, timing *t, CUstream own, bool timed, char *err, size_t errlen) {
    t->start = t->stop = NULL;
    t->gated = false;
    atomic_init(&t->open, 0);
    CUresult rc = 0;
    if (timed && ((rc = s->api.EventCreate(&t->start, 0)) != 0 || (rc = s->api.EventCreate(&t->stop, 0)) != 0)) {
        if (t->start) s->api.EventDestroy(t->start);
        return kt__cu_fail(s, rc, "cuEventCreate", err, errlen);
    }
    /* without the gate (the driver refused the host function) the timing is as before */
    if (timed) t->gated = s->api.LaunchHostFunc(own, gate_wait, t) == 0;
    return KT_OK;
}

/* Opens the gate, waits for the own stream after the timed work (rc: how enqueueing it went,
 * described by what), stores the time between the events in *ns, and releases them. The host
 * function reads t, so the stream is waited for on every path before t goes away. */
static kt_status timing_end(cu_state *s, timing *t, CUstream own, CUresult rc, const char *what, double *ns, char *err,
                            size_t errlen) {
    atomic_store_explicit(&t->open, 1, memory_order_release);
    if (rc == 0 && (rc = t->stop ? s->api.EventSynchronize(t->stop) : s->api.StreamSynchronize(own)) != 0)
        what = "waiting for kerntune's own stream";
    else if (rc != 0 && t->gated)
        s->api.StreamSynchronize(own);
    if (rc == 0 && ns != NULL) {
        float ms = 0;
        if (s->api.EventElapsedTime(&ms, t->start, t->stop) == 0) *ns = (double)ms * 1e6;
    }
    if (t->start) s->api.EventDestroy(t->start);
    if (t->stop) s->api.EventDestroy(t->stop);
    return rc == 0 ? KT_OK : kt__cu_fail(s, rc, what, err, errlen);
}

/* A launch for tuning: on the stream of timed runs, waited for, timed by its events. */
kt_status kt__cu_launch(void *state, size_t device, void *module, const kt_launch_geometry *g, const kt_arg *args,
                        size_t nargs, double *ns, char *err, size_t errlen) {
    cu_state *s = state;
    cu_module *m = module;
    CUstream own;
    kt_status st = kt__cu_timed(s, device, &own, err, errlen);
    cu_call c;
    if (st == KT_OK) st = prepare(s, m, g, args, nargs, &c, err, errlen);
    if (st != KT_OK || c.empty) return st;
    timing t;
    if ((st = timing_start(s, &t, own, ns != NULL, err, errlen)) != KT_OK) return st;
    const char *what = "a kernel launch";
    CUresult rc = enqueue(s, m, args, g, &c, own, t.start, t.stop, &what);
    return timing_end(s, &t, own, rc, what, ns, err, errlen);
}

/* The launch alone, on the caller's stream: no event, no synchronisation. A stream being
 * captured into a CUDA graph records it like a direct launch. */
/* The context this thread last made current for an asynchronous launch: the hit path sets it
 * only when it changes, so a launch is one driver call. */
static _Thread_local CUcontext launch_ctx;

KT__HOT kt_status kt__cu_launch_async(void *state, size_t device, void *module, const kt_launch_geometry *g, const kt_arg *args,
                              size_t nargs, void *queue, char *err, size_t errlen) {
    cu_state *s = state;
    cu_module *m = module;
    CUcontext want = s->devs[device].ctx;
    kt_status st = launch_ctx == want ? KT_OK : kt__cu_use(s, device, err, errlen);
    if (st == KT_OK) launch_ctx = want;
    cu_call c;
    if (st == KT_OK) st = prepare(s, m, g, args, nargs, &c, err, errlen);
    if (st != KT_OK || c.empty) return st;
    const char *what = "a kernel launch on the caller's stream";
    CUresult rc = enqueue(s, m, args, g, &c, (CUstream)queue, NULL, NULL, &what);
    if (rc == 201 /* CUDA_ERROR_INVALID_CONTEXT */ || rc == 400 /* CUDA_ERROR_INVALID_HANDLE */) {
        /* the caller made another context current on this thread since: ours again, once more */
        launch_ctx = NULL;
        if ((st = kt__cu_use(s, device, err, errlen)) != KT_OK) return st;
        launch_ctx = want;
        what = "a kernel launch on the caller's stream";
        rc = enqueue(s, m, args, g, &c, (CUstream)queue, NULL, NULL, &what);
    }
    return rc == 0 ? KT_OK : kt__cu_fail(s, rc, what, err, errlen);
}

/* Waits for the work already on the stream, and only for that: an event recorded on it now,
 * waited for (work that other threads enqueue meanwhile is not waited for). A stream being
 * captured into a graph cannot be waited for (it would end the capture): that is refused with
 * KT_ERR_CAPTURING, so a miss never tunes inside a capture (the core's kt__capture_miss says
 * what the call does instead). */
kt_status kt__cu_queue_wait(void *state, size_t device, void *queue, char *err, size_t errlen) {
    cu_state *s = state;
    kt_status st = kt__cu_use(s, device, err, errlen);
    if (st != KT_OK) return st;
    int capturing = 0; /* CU_STREAM_CAPTURE_STATUS_NONE */
    CUresult rc = s->api.StreamIsCapturing((CUstream)queue, &capturing);
    if (rc != 0) return kt__cu_fail(s, rc, "cuStreamIsCapturing", err, errlen);
    if (capturing != 0) {
        snprintf(err, errlen, "the stream is being captured into a CUDA graph: waiting for it would end the capture");
        return KT_ERR_CAPTURING;
    }
    CUevent ev = NULL;
    const char *what = "cuEventCreate";
    if ((rc = s->api.EventCreate(&ev, 2 /* CU_EVENT_DISABLE_TIMING */)) == 0) {
        what = "cuEventRecord on the caller's stream";
        if ((rc = s->api.EventRecord(ev, (CUstream)queue)) == 0) {
            what = "waiting for the caller's stream (cuEventSynchronize)";
            rc = s->api.EventSynchronize(ev);
        }
        s->api.EventDestroy(ev);
    }
    return rc == 0 ? KT_OK : kt__cu_fail(s, rc, what, err, errlen);
}

/* A native device candidate's work on the stream of timed runs, between two timing events. */
kt_status kt__cu_time_queued(void *state, size_t device, int (*work)(void *ctx, void *queue), void *ctx, double *ns,
                             int *rc, char *err, size_t errlen) {
    cu_state *s = state;
    CUstream own;
    kt_status st = kt__cu_timed(s, device, &own, err, errlen);
    timing t;
    if (st != KT_OK || (st = timing_start(s, &t, own, ns != NULL, err, errlen)) != KT_OK) return st;
    const char *what = "cuEventRecord on kerntune's own stream";
    CUresult r = t.start ? s->api.EventRecord(t.start, own) : 0;
    if (r == 0) {
        *rc = work(ctx, own);
        if (*rc != 0) ns = NULL; /* a failed run is not timed, but what it enqueued is waited for */
        if (t.stop) r = s->api.EventRecord(t.stop, own);
    }
    return timing_end(s, &t, own, r, what, ns, err, errlen);
}
