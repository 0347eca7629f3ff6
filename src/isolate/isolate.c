/*
 * isolate.c - the tuning side of runner processes (see isolate.h).
 *
 * A tuning uses the runner of its device for variants (its context keeps one per device, started
 * at the first isolated tuning and warm for later ones) and one of its own for natives. Buffer
 * arguments go through one shared-memory region: before each run the
 * work arguments are copied in, after a successful run they are copied back, so restoring,
 * poisoning and validation stay the tuning's, unchanged. A run that does not answer within the
 * timeout gets the runner killed (SIGKILL); a runner that died is reaped and its signal or exit
 * status reported; a failed launch that left the device unusable gets the runner replaced.
 * Modules are loaded again into a replacement as needed.
 *
 * Runners are started with posix_spawn, which is safe in a multithreaded process: nothing runs
 * in the child between its creation and the exec but the file actions and attributes below.
 */
#define _GNU_SOURCE /* posix_spawn_file_actions_addclosefrom_np, mincore */
#include "util/util.h"
#include "isolate/isolate.h"
#include "isolate/locate.h"
#include "isolate/protocol.h"
#include "backends/backends.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#ifndef KT_RUNNER_BUILD_PATH
#define KT_RUNNER_BUILD_PATH ""
#endif
#ifndef KT_RUNNER_INSTALL_PATH
#define KT_RUNNER_INSTALL_PATH ""
#endif

/* Where the runner finds its two descriptors. */
enum { SOCK_FD = 3, REGION_FD = 4 };

typedef struct runner_mod {
    kt__msg_load *load;   /* how to load it */
    uint64_t incarnation; /* the runner process it was loaded into */
    uint32_t runner_id;   /* its id there */
} runner_mod;

/* A runner process and what it was asked to hold. */
struct kt__runner {
    pid_t pid;                 /* -1: not running */
    int sock;                  /* the socket to it, both directions */
    uint64_t incarnation;      /* counts replacements */
    bool program;              /* some code is in the program: start it again, not kerntune-runner */
    bool running_program;      /* what the running process is */
    int region_fd;
    unsigned char *region;
    size_t region_bytes;
    kt__msg_setup *setup;
    size_t setup_len;
    bool set_up;
    bool primed;               /* the inputs that do not change are in its buffers */
    uint64_t kept;             /* the buffers it restores on its device (its last reply's kept) */
    kt__iso_args io;
    runner_mod *mods;
    size_t nmods;
    kt__msg_check *check;      /* the CHECK request of this tuning (NULL: none), */
    size_t check_len;
    kt__iso_check_arg *check_args; /* and where its data comes from */
    uint64_t check_incarnation; /* the runner process that holds it */
};

/* kerntune-runner: KERNTUNE_RUNNER, else the installed one, else the build tree's. */
static const char *runner_path(void) {
    const char *env = getenv("KERNTUNE_RUNNER");
    if (env && env[0]) return env;
    if (KT_RUNNER_INSTALL_PATH[0] && access(KT_RUNNER_INSTALL_PATH, X_OK) == 0) return KT_RUNNER_INSTALL_PATH;
    if (KT_RUNNER_BUILD_PATH[0] && access(KT_RUNNER_BUILD_PATH, X_OK) == 0) return KT_RUNNER_BUILD_PATH;
    return NULL;
}

static void stop(kt__runner *w) {
    if (w->pid > 0) {
        kill(w->pid, SIGKILL);
        while (waitpid(w->pid, NULL, 0) < 0 && errno == EINTR) {
        }
    }
    if (w->sock >= 0) close(w->sock);
    w->pid = -1;
    w->sock = -1;
    w->incarnation++;
    w->set_up = false;
    w->primed = false;
    w->kept = 0;
}

static void drop_mods(kt__runner *w) {
    for (size_t i = 0; i < w->nmods; i++) free(w->mods[i].load);
    w->nmods = 0;
}

static void drop_check(kt__runner *w) {
    free(w->check);
    free(w->check_args);
    w->check = NULL;
    w->check_args = NULL;
    w->check_len = 0;
}

void kt__runner_free(kt__runner *w) {
    if (w == NULL) return;
    stop(w);
    if (w->region) munmap(w->region, w->region_bytes);
    if (w->region_fd >= 0) close(w->region_fd);
    drop_mods(w);
    drop_check(w);
    free(w->mods);
    free(w->setup);
    free(w);
}

/* The runner's environment: the caller's; for a fresh start of the program, where its
 * descriptors are (serve) and kerntune's object preloaded when it is a shared object; and in a
 * sanitizer build options that let a crashing candidate die of its signal as in a normal build
 * (the runner is instrumented too), after the caller's own options, which it keeps. The strings
 * it makes go to own[0..2] (NULL where none), for the caller to free, also when it returns NULL
 * (out of memory). */
static char **runner_env(const kt__runner *w, const char *preload, char *serve, size_t serve_len, char *own[3]) {
    own[0] = own[1] = own[2] = NULL;
    size_t nenv = 0;
    while (environ[nenv]) nenv++;
    char **envp = calloc(nenv + 5, sizeof *envp);
    if (envp == NULL) return NULL;
    size_t k = 0;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    /* verify_asan_link_order=0: a preloaded libkerntune.so comes before the ASan runtime */
    static const char *const san[2][2] = {
        {"ASAN_OPTIONS", "handle_segv=0:handle_sigbus=0:handle_abort=0:handle_sigill=0:handle_sigfpe=0:"
                         "allocator_may_return_null=1:detect_leaks=0:verify_asan_link_order=0"},
        {"TSAN_OPTIONS", "handle_segv=0:handle_sigbus=0:handle_abort=0:handle_sigill=0:handle_sigfpe=0:"
                         "allocator_may_return_null=1"},
    };
    for (int i = 0; i < 2; i++) { /* a later option overrides an earlier one of the same name */
        const char *old = getenv(san[i][0]);
        size_t n = strlen(san[i][0]) + 1 + (old ? strlen(old) + 1 : 0) + strlen(san[i][1]) + 1;
        if ((own[i] = malloc(n)) == NULL) {
            free(envp);
            return NULL;
        }
        snprintf(own[i], n, "%s=%s%s%s", san[i][0], old ? old : "", old && old[0] ? ":" : "", san[i][1]);
        envp[k++] = own[i];
    }
    const bool sanitized = true;
#else
    const bool sanitized = false;
#endif
    const char *old_preload = NULL;
    for (size_t i = 0; i < nenv; i++) {
        if (sanitized && (strncmp(environ[i], "ASAN_OPTIONS=", 13) == 0 || strncmp(environ[i], "TSAN_OPTIONS=", 13) == 0)) continue;
        if (strncmp(environ[i], "KERNTUNE_RUNNER_SERVE=", 22) == 0) continue;
        if (w->program && preload && strncmp(environ[i], "LD_PRELOAD=", 11) == 0) {
            old_preload = environ[i] + 11;
            continue;
        }
        envp[k++] = environ[i];
    }
    if (w->program) {
        snprintf(serve, serve_len, "KERNTUNE_RUNNER_SERVE=%d,%d,%ld", SOCK_FD, REGION_FD, (long)getpid());
        envp[k++] = serve;
    }
    if (w->program && preload) { /* ours first: the constructor there takes it off again */
        size_t n = strlen("LD_PRELOAD=") + strlen(preload) + 1 + (old_preload ? strlen(old_preload) : 0) + 1;
        if ((own[2] = malloc(n)) == NULL) {
            free(envp);
            return NULL;
        }
        snprintf(own[2], n, "LD_PRELOAD=%s%s%s", preload, old_preload && old_preload[0] ? ":" : "", old_preload ? old_preload : "");
        envp[k++] = own[2];
    }
    return envp;
}

/* Starts the runner process, connected by one socket pair (the tuning side sends with
 * MSG_NOSIGNAL: a dead runner must not raise SIGPIPE in the caller's process). */
static kt_status start(kt__runner *w) {
    char why[512] = "", preload[KT__CODE_PATH_MAX] = "";
    const char *path;
    if (w->program) {
        int k = kt__code_serve_object(preload, sizeof preload, why, sizeof why);
        if (k < 0) return kt__err(KT_ERR_STATE, "isolation: this program cannot be started as a runner: %s", why);
        if (k == 0) preload[0] = '\0';
        path = "/proc/self/exe"; /* the very file this process runs, even if replaced on disk since */
    } else if ((path = runner_path()) == NULL) {
        return kt__err(KT_ERR_STATE, "isolation: the kerntune-runner program was not found (set KERNTUNE_RUNNER to its path)");
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return kt__err(KT_ERR_SYSTEM, "isolation: socketpair: %s", strerror(errno));
    char serve[64], *own[3];
    char **envp = runner_env(w, preload[0] ? preload : NULL, serve, sizeof serve, own);
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    bool fa_ok = false, attr_ok = false;
    int e = envp ? 0 : ENOMEM;
    if (e == 0) fa_ok = (e = posix_spawn_file_actions_init(&fa)) == 0;
    if (e == 0) attr_ok = (e = posix_spawnattr_init(&attr)) == 0;
    /* the socket and the region at 3 and 4 (through two numbers above both, so that neither
     * overwrites the other on the way); every other descriptor closed (before glibc 2.34, only
     * those marked close-on-exec, as every one of kerntune's is) */
    int hi = (sv[1] > w->region_fd ? sv[1] : w->region_fd) + 1;
    if (hi <= REGION_FD) hi = REGION_FD + 1;
    if (e == 0) e = posix_spawn_file_actions_adddup2(&fa, sv[1], hi);
    if (e == 0) e = posix_spawn_file_actions_adddup2(&fa, w->region_fd, hi + 1);
    if (e == 0) e = posix_spawn_file_actions_adddup2(&fa, hi, SOCK_FD);
    if (e == 0) e = posix_spawn_file_actions_adddup2(&fa, hi + 1, REGION_FD);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
    if (e == 0) e = posix_spawn_file_actions_addclosefrom_np(&fa, REGION_FD + 1);
#else
    if (e == 0) e = posix_spawn_file_actions_addclose(&fa, hi);
    if (e == 0) e = posix_spawn_file_actions_addclose(&fa, hi + 1);
#endif
    /* its own process group (a Ctrl-C meant for the caller's group is not a candidate's crash),
     * no signal blocked, and the crash signals at their default (death, which is reported) */
    sigset_t none, fatal;
    sigemptyset(&none);
    sigemptyset(&fatal);
    static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGABRT, SIGILL, SIGFPE, SIGTERM, SIGINT};
    for (size_t i = 0; i < sizeof fatal_signals / sizeof *fatal_signals; i++) sigaddset(&fatal, fatal_signals[i]);
    if (e == 0) e = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    if (e == 0) e = posix_spawnattr_setpgroup(&attr, 0);
    if (e == 0) e = posix_spawnattr_setsigmask(&attr, &none);
    if (e == 0) e = posix_spawnattr_setsigdefault(&attr, &fatal);
    char a1[16], a2[16], a3[24];
    snprintf(a1, sizeof a1, "%d", SOCK_FD);
    snprintf(a2, sizeof a2, "%d", REGION_FD);
    snprintf(a3, sizeof a3, "%ld", (long)getpid());
    char *argv_tool[] = {(char *)"kerntune-runner", a1, a2, a3, NULL};
    char *argv_program[] = {(char *)"kerntune-runner", NULL}; /* the descriptors are in its environment */
    pid_t pid = -1;
    if (e == 0) e = posix_spawn(&pid, path, &fa, &attr, w->program ? argv_program : argv_tool, envp);
    if (fa_ok) posix_spawn_file_actions_destroy(&fa);
    if (attr_ok) posix_spawnattr_destroy(&attr);
    free(envp);
    for (int i = 0; i < 3; i++) free(own[i]);
    close(sv[1]);
    if (e != 0) {
        close(sv[0]);
        return kt__err(e == ENOMEM ? KT_ERR_NO_MEMORY : KT_ERR_SYSTEM, "isolation: starting %s: %s",
                       w->program ? "this program again as a runner" : path, strerror(e));
    }
    w->pid = pid;
    w->sock = sv[0];
    w->running_program = w->program;
    return KT_OK;
}

static void fail(kt__iso_run *out, kt_fail_kind kind, int code, const char *fmt, ...) KT__PRINTF(4, 5);
static void fail(kt__iso_run *out, kt_fail_kind kind, int code, const char *fmt, ...) {
    out->kind = kind;
    out->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->msg, sizeof out->msg, fmt, ap);
    va_end(ap);
}

/* Why the runner is gone, after its socket closed: reaps it. */
static void reap(kt__runner *w, kt__iso_run *out) {
    int status = 0;
    pid_t r = 0;
    /* a dying runner is reaped with its signal; one still alive after 200 ms (it closed its
     * socket and went on) is killed */
    for (int i = 0; i < 200 && (r = waitpid(w->pid, &status, WNOHANG)) == 0; i++) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    if (r == 0) {
        kill(w->pid, SIGKILL);
        while ((r = waitpid(w->pid, &status, 0)) < 0 && errno == EINTR) {
        }
    }
    if (r == w->pid && WIFSIGNALED(status))
        fail(out, KT_FAIL_CRASH, WTERMSIG(status), "crashed: killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else if (r == w->pid && WIFEXITED(status))
        fail(out, KT_FAIL_EXIT, WEXITSTATUS(status), "crashed: the runner process exited with status %d", WEXITSTATUS(status));
    else
        fail(out, KT_FAIL_CRASH, 0, "crashed: the runner process is gone (its status could not be read: %s)",
             r < 0 ? strerror(errno) : "not reaped");
    w->pid = -1;
    stop(w);
}

/* Sends a request and waits for its reply, at most timeout_s (0: no limit). Returns true, or
 * false with out saying how the runner was lost (it is then gone). */
static bool call(kt__runner *w, uint32_t type, const void *payload, uint32_t len, double timeout_s, kt__reply *r, kt__iso_run *out) {
    kt__msg h = {type, len};
    const struct {
        const void *p;
        size_t n;
    } parts[2] = {{&h, sizeof h}, {payload, len}};
    for (int k = 0; k < 2; k++)
        for (size_t done = 0; done < parts[k].n;) {
            ssize_t n = send(w->sock, (const char *)parts[k].p + done, parts[k].n - done, MSG_NOSIGNAL);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                reap(w, out);
                return false;
            }
            done += (size_t)n;
        }
    double deadline = timeout_s > 0 ? kt__now_s() + timeout_s : 0;
    for (size_t done = 0; done < sizeof *r;) {
        int wait_ms = -1;
        if (deadline > 0) {
            double left = deadline - kt__now_s();
            if (left <= 0) {
                fail(out, KT_FAIL_TIMEOUT, 0, "timeout: no answer within %.3g s; the runner was killed", timeout_s);
                stop(w);
                return false;
            }
            wait_ms = (int)(left * 1e3) + 1;
        }
        struct pollfd p = {w->sock, POLLIN, 0};
        int pr = poll(&p, 1, wait_ms);
        if (pr < 0 && errno == EINTR) continue;
        if (pr == 0) continue; /* the deadline check above fires */
        ssize_t n = read(w->sock, (char *)r + done, sizeof *r - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            reap(w, out);
            return false;
        }
        done += (size_t)n;
    }
    return true;
}

static kt__runner *runner_new(void) {
    kt__runner *w = calloc(1, sizeof *w);
    if (w == NULL) return NULL;
    w->pid = -1;
    w->sock = w->region_fd = -1;
    return w;
}

/* Lays out the shared region and the setup request for arguments a in mode. */
static kt_status setup(kt__runner **wp, uint32_t mode, const kt__iso_args *a, kt__msg_setup **out) {
    kt__runner *w = *wp;
    if (w == NULL && (w = *wp = runner_new()) == NULL) return kt__err(KT_ERR_NO_MEMORY, "isolation: out of memory");
    /* the shared region: every buffer argument, 64-byte aligned */
    size_t bytes = 0;
    for (size_t i = 0; i < a->nargs; i++)
        if (a->args[i].type == KT_TYPE_BUFFER) bytes += (a->args[i].bytes + 63) & ~(size_t)63;
    if (bytes == 0) bytes = 64;
    if (w->region_fd < 0) {
        char name[64];
        snprintf(name, sizeof name, "/kerntune-%d-%p", (int)getpid(), (void *)w);
        w->region_fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600); /* close-on-exec */
        if (w->region_fd < 0) return kt__err(KT_ERR_SYSTEM, "isolation: shm_open: %s", strerror(errno));
        shm_unlink(name); /* the descriptors keep it alive */
    }
    if (bytes > w->region_bytes) {
        if (w->region) munmap(w->region, w->region_bytes);
        w->region = NULL;
        w->region_bytes = 0;
        if (ftruncate(w->region_fd, (off_t)bytes) != 0) return kt__err(KT_ERR_SYSTEM, "isolation: ftruncate: %s", strerror(errno));
        w->region = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, w->region_fd, 0);
        if (w->region == MAP_FAILED) {
            w->region = NULL;
            return kt__err(KT_ERR_SYSTEM, "isolation: mmap: %s", strerror(errno));
        }
        w->region_bytes = bytes;
    }
    size_t len = sizeof(kt__msg_setup) + a->nargs * sizeof(kt__msg_arg);
    kt__msg_setup *m = calloc(1, len);
    if (m == NULL) return kt__err(KT_ERR_NO_MEMORY, "isolation: out of memory");
    m->version = KT__PROTOCOL_VERSION;
    m->mode = mode;
    m->region = w->region_bytes;
    m->nargs = (uint32_t)a->nargs;
    kt__msg_arg *ma = (kt__msg_arg *)(m + 1);
    size_t off = 0;
    for (size_t i = 0; i < a->nargs; i++) {
        ma[i].type = (uint32_t)a->args[i].type;
        if (a->args[i].type == KT_TYPE_BUFFER) {
            ma[i].bytes = a->args[i].bytes;
            ma[i].offset = off;
            off += (a->args[i].bytes + 63) & ~(size_t)63;
        } else {
            memcpy(&ma[i].value, &a->args[i].u, sizeof ma[i].value);
        }
    }
    free(w->setup);
    w->setup = m;
    w->setup_len = len;
    w->set_up = false;
    w->primed = false;
    w->kept = 0;
    w->io = *a;
    drop_mods(w);
    drop_check(w);
    *out = m;
    return KT_OK;
}

kt_status kt__runner_setup_backend(kt__runner **wp, const kt_backend *b, const char *device_fp, const kt__iso_args *a) {
    if (!(kt__backend_caps(b) & KT_BACKEND_CAP_RUNNER))
        return kt__err(KT_ERR_NOT_FOUND, "backend '%s' does not say it can run in a runner process (KT_BACKEND_CAP_RUNNER)", b->name);
    kt__code_ref ref;
    char why[512];
    if (!kt__code_locate(b, &ref, why, sizeof why))
        return kt__err(KT_ERR_NOT_FOUND, "backend '%s' cannot be found by a runner process: its table: %s", b->name, why);
    kt__msg_setup *m;
    kt_status st = setup(wp, KT__MODE_BACKEND, a, &m);
    if (st != KT_OK) return st;
    m->backend = ref;
    snprintf(m->device, sizeof m->device, "%s", device_fp);
    (*wp)->program = ref.in_program;
    return KT_OK;
}

kt_status kt__runner_setup_natives(kt__runner **wp, const kt__iso_args *a) {
    kt__msg_setup *m;
    kt_status st = setup(wp, KT__MODE_NATIVES, a, &m);
    if (st == KT_OK) (*wp)->program = false; /* until a native of the program's is added */
    return st;
}

/* Whether p is an address of this process's memory (a mapped page). */
static bool is_address(const void *p) {
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)(page > 0 ? page - 1 : 4095);
    unsigned char vec;
    return mincore((void *)a, 1, &vec) == 0 || errno != ENOMEM;
}

static bool add_mod(kt__runner *w, kt__msg_load *m, size_t *id) {
    runner_mod *mods = realloc(w->mods, (w->nmods + 1) * sizeof *mods);
    if (mods == NULL) return false;
    w->mods = mods;
    w->mods[w->nmods] = (runner_mod){.load = m, .incarnation = (uint64_t)-1};
    *id = w->nmods++;
    return true;
}

bool kt__runner_add_native(kt__runner *w, kt_native_fn fn, void *user, size_t *id, char *why, size_t len) {
    void *addr;
    KT__FN_ADDR(fn, addr);
    kt__code_ref ref;
    if (!kt__code_locate(addr, &ref, why, len)) return false;
    if (user != NULL && is_address(user)) {
        snprintf(why, len, "its user pointer %p is an address in this process, which means nothing in another", user);
        return false;
    }
    kt__msg_load *m = calloc(1, sizeof *m);
    if (m == NULL || !add_mod(w, m, id)) {
        free(m);
        snprintf(why, len, "out of memory");
        return false;
    }
    m->native = ref;
    m->user = (uint64_t)(uintptr_t)user;
    if (ref.in_program) w->program = true;
    return true;
}

kt_status kt__runner_add(kt__runner *w, const char *path, const char *kernel, const kt_launch_geometry *g, size_t *id) {
    kt__msg_load *m = calloc(1, sizeof *m);
    if (m == NULL || !add_mod(w, m, id)) {
        free(m);
        return kt__err(KT_ERR_NO_MEMORY, "isolation: out of memory");
    }
    snprintf(m->path, sizeof m->path, "%s", path);
    snprintf(m->kernel, sizeof m->kernel, "%s", kernel);
    if (g) m->geometry = *g;
    return KT_OK;
}

/* Makes sure the runner runs, is the right program, and is set up for the current tuning. */
static kt_status ready(kt__runner *w) {
    if (w->pid > 0 && waitpid(w->pid, NULL, WNOHANG) != 0) { /* it died while idle: not a candidate's doing */
        w->pid = -1;
        stop(w);
    }
    if (w->pid > 0 && w->running_program != w->program) stop(w); /* the code it needs is elsewhere now */
    if (w->pid < 0) {
        kt_status st = start(w);
        if (st != KT_OK) return st;
    }
    if (w->set_up) return KT_OK;
    kt__reply r;
    kt__iso_run lost;
    if (!call(w, KT__MSG_SETUP, w->setup, (uint32_t)w->setup_len, 60, &r, &lost))
        return kt__err(KT_ERR_BACKEND, "isolation: the runner failed while starting: %s", lost.msg);
    if (r.status != KT_OK) {
        stop(w); /* a runner whose setup failed holds nothing worth keeping */
        return kt__err((kt_status)r.status, "isolation: the runner could not set up: %s", r.msg);
    }
    w->set_up = true;
    return KT_OK;
}

kt_status kt__runner_ready(kt__runner *w) { return ready(w); }

/* Whether buffer argument i goes to the runner before a run: always in a full run (validation:
 * poisoned outputs, and every output comes back); otherwise buffers the tuning rewrites before
 * every run, and the rest only once per runner and tuning (primed). */
static bool copy_in(const kt__runner *w, size_t i, bool full) {
    return full || !w->primed || i >= 64 || (w->io.refreshed && w->io.refreshed[i]);
}

/* Back from the runner: everything after a full run (inputs too, so that a candidate that
 * wrote into a ReadOnly buffer is caught as in-process), nothing after a measured one. */
static bool copy_out(size_t i, bool full) { return i >= 64 || full; }

static bool infra(kt__iso_run *out, const char *fmt, ...) KT__PRINTF(2, 3);
static bool infra(kt__iso_run *out, const char *fmt, ...) {
    out->infra = true;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->msg, sizeof out->msg, fmt, ap);
    va_end(ap);
    return false;
}

/* Sends this tuning's CHECK to the running runner: the reference's outputs and the pristine
 * inputs into the region first. */
static kt_status send_check(kt__runner *w) {
    const kt__msg_arg *a = (const kt__msg_arg *)(w->setup + 1);
    for (size_t i = 0; i < w->io.nargs; i++) {
        const kt__iso_check_arg *c = &w->check_args[i];
        if (a[i].type != KT_TYPE_BUFFER || a[i].bytes == 0) continue;
        if (c->role == KT__ISO_OUTPUT) memcpy(w->region + a[i].offset, c->expected, a[i].bytes);
        else if (c->role == KT__ISO_INPUT && w->io.to_host(w->io.user, w->region + a[i].offset, w->io.args[i].ptr, a[i].bytes) != KT_OK)
            return KT_ERR_BACKEND; /* its message says which copy */
    }
    kt__reply r;
    kt__iso_run lost;
    if (!call(w, KT__MSG_CHECK, w->check, (uint32_t)w->check_len, 60, &r, &lost))
        return kt__err(KT_ERR_BACKEND, "isolation: the runner failed while taking the reference: %s", lost.msg);
    if (r.status != KT_OK) return kt__err((kt_status)r.status, "isolation: the runner cannot check runs: %s", r.msg);
    w->check_incarnation = w->incarnation;
    return KT_OK;
}

kt_status kt__runner_check(kt__runner *w, const kt__iso_check_arg *args, size_t nargs) {
    if (nargs != w->io.nargs) return kt__err(KT_ERR_INVALID_ARGUMENT, "isolation: %zu checked arguments, %zu set up", nargs, w->io.nargs);
    drop_check(w);
    size_t len = sizeof(kt__msg_check) + nargs * sizeof(kt__msg_check_arg);
    w->check = calloc(1, len);
    w->check_args = calloc(nargs ? nargs : 1, sizeof *w->check_args);
    if (w->check == NULL || w->check_args == NULL) {
        drop_check(w);
        return kt__err(KT_ERR_NO_MEMORY, "isolation: out of memory");
    }
    w->check_len = len;
    w->check->nargs = (uint32_t)nargs;
    kt__msg_check_arg *m = (kt__msg_check_arg *)(w->check + 1);
    for (size_t i = 0; i < nargs; i++) {
        const kt__iso_check_arg *c = &args[i];
        w->check_args[i] = *c;
        m[i].role = c->role == KT__ISO_OUTPUT ? KT__CHECK_OUTPUT : c->role == KT__ISO_INPUT ? KT__CHECK_INPUT : KT__CHECK_NONE;
        m[i].elem = (uint32_t)c->elem;
        m[i].atol = c->atol, m[i].rtol = c->rtol;
        m[i].poison_size = c->poison_size <= sizeof m[i].poison ? (uint32_t)c->poison_size : 0;
        memcpy(m[i].poison, c->poison, m[i].poison_size);
    }
    kt_status st = ready(w);
    if (st == KT_OK) st = send_check(w);
    if (st != KT_OK) drop_check(w); /* runs are validated in full, as without */
    return st;
}

bool kt__runner_run(kt__runner *w, size_t id, const kt_arg *run_args, unsigned flush, bool full, bool check, double timeout_s,
                    kt__iso_run *out) {
    *out = (kt__iso_run){.ns = -1, .wrote_input = -1};
    if (ready(w) != KT_OK) return infra(out, "%s", kt_last_error());
    check = check && w->check != NULL && w->io.nargs <= 64;
    if (check && w->check_incarnation != w->incarnation && send_check(w) != KT_OK) /* a replacement runner */
        return infra(out, "%s", kt_last_error());
    if (check) full = false; /* in: what a measured run takes; back: everything, but only if the check fails */
    if (id >= w->nmods) return infra(out, "isolation: no module %zu", id);
    runner_mod *mod = &w->mods[id];
    kt__reply r;
    if (mod->incarnation != w->incarnation) { /* load it into this runner */
        if (!call(w, KT__MSG_LOAD, mod->load, sizeof *mod->load, 60, &r, out)) {
            snprintf(out->msg + strlen(out->msg), sizeof out->msg - strlen(out->msg), " (while loading)");
            return false;
        }
        if (r.status != KT_OK) { /* a variant loaded in the tuning process, so this is about it (or a lost
                                  * device); a native's object may have changed on disk */
            fail(out, KT_FAIL_LAUNCH, r.status, "the runner could not load it: %s", r.msg);
            return false;
        }
        mod->runner_id = r.module;
        mod->incarnation = w->incarnation;
    }
    /* the work arguments into the region */
    const kt__msg_arg *a = (const kt__msg_arg *)(w->setup + 1);
    kt__msg_run m = {.module = mod->runner_id,
                     .flags = ((flush & KT__WORKER_FLUSH_DEVICE) ? KT__RUN_FLUSH : 0) | (check ? KT__RUN_CHECK : 0)};
    for (size_t i = 0; i < w->io.nargs; i++) {
        if (run_args[i].type != KT_TYPE_BUFFER) { /* scalars went at setup: a hook may not change them */
            if (memcmp(&run_args[i].u, &a[i].value, sizeof a[i].value) != 0)
                return infra(out, "isolation: a pre-hook changed scalar argument %zu, which a runner cannot follow", i);
            continue;
        }
        if (run_args[i].bytes > a[i].bytes)
            return infra(out, "isolation: a pre-hook substituted a larger buffer for argument %zu (%zu bytes, %llu set up)", i,
                         run_args[i].bytes, (unsigned long long)a[i].bytes);
        if (run_args[i].bytes == 0) continue;
        /* the same bytes before every run: restored there from the copy it keeps, once it has one */
        bool same = i < 64 && w->io.same && w->io.refreshed && w->io.refreshed[i] && run_args[i].ptr == w->io.args[i].ptr;
        bool restore = same && (w->kept >> i & 1);
        bool in = !restore && (copy_in(w, i, full) || run_args[i].ptr != w->io.args[i].ptr); /* a substitute goes every time */
        if (i < 64 && in) m.in |= (uint64_t)1 << i;
        if (same && in) m.keep |= (uint64_t)1 << i;
        if (restore) m.restore |= (uint64_t)1 << i;
        if (i < 64 && copy_out(i, full || check)) m.out |= (uint64_t)1 << i;
        if (in && w->io.to_host(w->io.user, w->region + a[i].offset, run_args[i].ptr, run_args[i].bytes) != KT_OK)
            return infra(out, "%s", kt_last_error());
    }
    /* a cold start for a host runner's run: the region is the memory it runs on, and copying into
     * it just brought those lines into the cache (mapped here too, the same pages are evicted) */
    for (size_t i = 0; (flush & KT__WORKER_EVICT) && i < w->io.nargs; i++)
        if (run_args[i].type == KT_TYPE_BUFFER && run_args[i].bytes > 0) kt__evict(w->region + a[i].offset, run_args[i].bytes);
    if (!call(w, KT__MSG_RUN, &m, sizeof m, timeout_s, &r, out)) return false;
    w->kept = r.kept;
    if (r.status != KT_OK) {
        fail(out, r.kind == KT_FAIL_RETURNED ? KT_FAIL_RETURNED : KT_FAIL_LAUNCH, r.kind ? r.code : r.status, "%s%s", r.msg,
             r.sticky ? " (the device context was left unusable; the runner was replaced)" : "");
        if (r.sticky) stop(w);
        return false;
    }
    w->primed = true;
    out->checked = check && r.checked;
    if (check && r.changed != 0) { /* named there; its inputs are sent again before the next run */
        w->primed = false;
        for (size_t i = 0; i < w->io.nargs && out->wrote_input < 0; i++)
            if (r.changed >> i & 1) out->wrote_input = (long)i;
    }
    for (size_t i = 0; i < w->io.nargs; i++) { /* and back: after a check, only a mismatch's outputs (the runner
                                                 * sent them: m.out above), for the comparison here to name the element */
        if (run_args[i].type != KT_TYPE_BUFFER || run_args[i].bytes == 0 || !copy_out(i, full || check)) continue;
        if (check && (r.changed != 0 || !(r.mismatched != 0 && w->check_args[i].role == KT__ISO_OUTPUT))) continue;
        if (w->io.from_host(w->io.user, run_args[i].ptr, w->region + a[i].offset, run_args[i].bytes) != KT_OK)
            return infra(out, "%s", kt_last_error());
    }
    out->ns = r.ns;
    return true;
}
