/*
 * isolate.c - the tuner's side of worker processes (see isolate.h).
 *
 * One worker per device of a context, started at the first isolated tuning and kept warm for
 * later ones (a tuning holds it for its whole length, which also keeps two tunings from timing
 * on one device at once). Buffer arguments go through one shared-memory region: before each run
 * the tuner copies its work arguments in, after a successful run it copies them back, so
 * restoring, poisoning and validation stay the tuner's, unchanged. A run that does not answer
 * within the timeout gets the worker killed (SIGKILL); a worker that died is reaped and its
 * signal reported; a failed launch that left the device unusable gets the worker replaced.
 * Modules are loaded again into a replacement as needed.
 */
#include "util/util.h"
#include "isolate/isolate.h"
#include "tune/stages.h" /* FIXME(issue 9): isolate reads the workset */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#ifndef KT_WORKER_BUILD_PATH
#define KT_WORKER_BUILD_PATH ""
#endif
#ifndef KT_WORKER_INSTALL_PATH
#define KT_WORKER_INSTALL_PATH ""
#endif

/* The worker program: KERNTUNE_WORKER, else the installed one, else the build tree's. */
static const char *worker_path(void) {
    const char *env = getenv("KERNTUNE_WORKER");
    if (env && env[0]) return env;
    if (KT_WORKER_INSTALL_PATH[0] && access(KT_WORKER_INSTALL_PATH, X_OK) == 0) return KT_WORKER_INSTALL_PATH;
    if (KT_WORKER_BUILD_PATH[0] && access(KT_WORKER_BUILD_PATH, X_OK) == 0) return KT_WORKER_BUILD_PATH;
    return NULL;
}

static void stop(kt__worker *w) {
    if (w->pid > 0) {
        kill(w->pid, SIGKILL);
        while (waitpid(w->pid, NULL, 0) < 0 && errno == EINTR) {
        }
    }
    if (w->req >= 0) close(w->req); /* one socket: req and rep are the same descriptor */
    w->pid = -1;
    w->req = w->rep = -1;
    w->incarnation++;
    w->set_up = false;
    w->primed = false;
}

void kt__worker_free(kt__worker *w) {
    if (w == NULL) return;
    stop(w);
    if (w->region) munmap(w->region, w->region_bytes);
    if (w->region_fd >= 0) close(w->region_fd);
    for (size_t i = 0; i < w->nmods; i++) free(w->mods[i].load);
    free(w->mods);
    free(w->setup);
    free(w);
}

/* Starts the worker process, connected by one socket pair (the tuner's end sends with
 * MSG_NOSIGNAL: a dead worker must not raise SIGPIPE in the caller's process). */
static void serve_natives(kt__worker *w, int fd);

static kt_status start(kt__worker *w) {
    if (w->call != NULL) { /* natives: a fork of this process, which has their code */
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
            return kt__err(KT_ERR_SYSTEM, "isolation: socketpair: %s", strerror(errno));
        pid_t pid = fork();
        if (pid < 0) {
            close(sv[0]), close(sv[1]);
            return kt__err(KT_ERR_SYSTEM, "isolation: fork: %s", strerror(errno));
        }
        if (pid == 0) {
            close(sv[0]);
            serve_natives(w, sv[1]);
        }
        close(sv[1]);
        w->pid = pid;
        w->req = w->rep = sv[0];
        w->set_up = true;
        return KT_OK;
    }
    const char *path = worker_path();
    if (path == NULL)
        return kt__err(KT_ERR_STATE, "isolation: the kerntune-worker program was not found (set KERNTUNE_WORKER to its path)");
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return kt__err(KT_ERR_SYSTEM, "isolation: socketpair: %s", strerror(errno));
    char a1[16], a3[16];
    snprintf(a1, sizeof a1, "%d", sv[1]);
    snprintf(a3, sizeof a3, "%d", w->region_fd);
    /* the worker's environment: the caller's, and in a sanitizer build options that let a
     * crashing candidate die of its signal as in a normal build (the worker is instrumented too) */
    size_t nenv = 0;
    while (environ[nenv]) nenv++;
    char **envp = calloc(nenv + 3, sizeof *envp);
    if (envp == NULL) {
        close(sv[0]), close(sv[1]);
        return kt__err(KT_ERR_NO_MEMORY, "isolation: out of memory");
    }
    size_t k = 0;
    bool sanitized = false;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    sanitized = true;
    static char asan[] = "ASAN_OPTIONS=handle_segv=0:handle_sigbus=0:handle_abort=0:handle_sigill=0:handle_sigfpe=0:"
                         "allocator_may_return_null=1:detect_leaks=0";
    static char tsan[] = "TSAN_OPTIONS=handle_segv=0:handle_sigbus=0:handle_abort=0:handle_sigill=0:handle_sigfpe=0:"
                         "allocator_may_return_null=1";
    envp[k++] = asan;
    envp[k++] = tsan;
#endif
    for (size_t i = 0; i < nenv; i++)
        if (!sanitized || (strncmp(environ[i], "ASAN_OPTIONS=", 13) != 0 && strncmp(environ[i], "TSAN_OPTIONS=", 13) != 0))
            envp[k++] = environ[i];
    pid_t pid = fork();
    if (pid < 0) {
        free(envp);
        close(sv[0]), close(sv[1]);
        return kt__err(KT_ERR_SYSTEM, "isolation: fork: %s", strerror(errno));
    }
    if (pid == 0) { /* the child: only async-signal-safe calls until exec */
        close(sv[0]);
        fcntl(sv[1], F_SETFD, 0); /* these two, and only these, go to the worker */
        fcntl(w->region_fd, F_SETFD, 0);
        setpgid(0, 0); /* a Ctrl-C meant for the caller's group is not a candidate's crash */
        char *argv[] = {(char *)"kerntune-worker", a1, a1, a3, NULL};
        execve(path, argv, envp);
        _exit(127);
    }
    free(envp);
    close(sv[1]);
    w->pid = pid;
    w->req = w->rep = sv[0];
    return KT_OK;
}

/* Why the worker is gone, after its reply pipe closed: reaps it. */
static void reap(kt__worker *w, char *why, size_t len) {
    int status = 0;
    pid_t r = 0;
    /* a dying worker is reaped with its signal; one still alive after 200 ms (it closed its
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
        snprintf(why, len, "crashed: killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else if (r == w->pid && WIFEXITED(status))
        snprintf(why, len, "crashed: the worker exited with status %d", WEXITSTATUS(status));
    else
        snprintf(why, len, "crashed: the worker is gone");
    w->pid = -1;
    stop(w);
}

/* Sends a request and waits for its reply, at most timeout_s (0: no limit). Returns 0, or
 * KT__ISO_CRASH / KT__ISO_TIMEOUT with why set (the worker is then gone). */
static int call(kt__worker *w, uint32_t type, const void *payload, uint32_t len, double timeout_s, kt__reply *r, char *why,
                size_t wlen) {
    kt__msg h = {type, len};
    struct iovec_like {
        const void *p;
        size_t n;
    } parts[2] = {{&h, sizeof h}, {payload, len}};
    for (int k = 0; k < 2; k++)
        for (size_t done = 0; done < parts[k].n;) {
            ssize_t n = send(w->req, (const char *)parts[k].p + done, parts[k].n - done, MSG_NOSIGNAL);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                reap(w, why, wlen);
                return KT__ISO_CRASH;
            }
            done += (size_t)n;
        }
    double deadline = timeout_s > 0 ? kt__now_s() + timeout_s : 0;
    for (size_t done = 0; done < sizeof *r;) {
        int wait_ms = -1;
        if (deadline > 0) {
            double left = deadline - kt__now_s();
            if (left <= 0) {
                snprintf(why, wlen, "timeout: no answer within %.3g s; the worker was killed", timeout_s);
                stop(w);
                return KT__ISO_TIMEOUT;
            }
            wait_ms = (int)(left * 1e3) + 1;
        }
        struct pollfd p = {w->rep, POLLIN, 0};
        int pr = poll(&p, 1, wait_ms);
        if (pr < 0 && errno == EINTR) continue;
        if (pr == 0) continue; /* the deadline check above fires */
        ssize_t n = read(w->rep, (char *)r + done, sizeof *r - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            reap(w, why, wlen);
            return KT__ISO_CRASH;
        }
        done += (size_t)n;
    }
    return 0;
}

static int read_full(int fd, void *p, size_t n) {
    for (size_t done = 0; done < n;) {
        ssize_t r = read(fd, (char *)p + done, n - done);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        done += (size_t)r;
    }
    return 0;
}

/* The forked child's loop: runs natives on the shared region until the socket closes. It only
 * reads, calls the candidate and writes: no lock of the parent's is taken. */
static void serve_natives(kt__worker *w, int fd) {
    /* the caller's handlers (a test framework's, a crash reporter's) must not catch a
     * candidate's crash in here: the child dies of it, and the parent sees the signal */
    static const int fatal[] = {SIGSEGV, SIGBUS, SIGABRT, SIGILL, SIGFPE, SIGTERM, SIGINT};
    for (size_t i = 0; i < sizeof fatal / sizeof *fatal; i++) signal(fatal[i], SIG_DFL);
    /* nothing of the caller's but this socket: another worker's socket held open here would
     * hide that worker's death from the caller */
    long max = sysconf(_SC_OPEN_MAX);
    for (long i = 3; i < (max > 0 && max < 65536 ? max : 65536); i++)
        if (i != fd) close((int)i);
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* not outlive the caller, even when a candidate hangs */
    if (getppid() == 1) _exit(0);
    const kt__msg_arg *a = (const kt__msg_arg *)(w->setup + 1);
    size_t nargs = w->setup->nargs;
    kt_arg *args = calloc(nargs ? nargs : 1, sizeof *args);
    if (args == NULL) _exit(1);
    for (size_t i = 0; i < nargs; i++) {
        args[i].type = (kt_type)a[i].type;
        if (a[i].type == KT_TYPE_BUFFER) {
            args[i].ptr = w->region + a[i].offset;
            args[i].bytes = a[i].bytes;
        } else {
            memcpy(&args[i].u, &a[i].value, sizeof args[i].u);
        }
    }
    for (;;) {
        kt__msg h;
        kt__msg_run m;
        if (read_full(fd, &h, sizeof h) != 0 || h.len != sizeof m || read_full(fd, &m, sizeof m) != 0) break;
        kt__reply r = {0};
        double t0 = kt__now_s();
        int rc = w->call(w->call_user, m.module, args, nargs);
        r.ns = (kt__now_s() - t0) * 1e9;
        r.status = rc == 0 ? KT_OK : KT_ERR_CANDIDATE_FAILED;
        if (rc != 0) snprintf(r.msg, sizeof r.msg, "returned %d", rc);
        for (size_t done = 0; done < sizeof r;) {
            ssize_t n = write(fd, (const char *)&r + done, sizeof r - done);
            if (n <= 0) _exit(0);
            done += (size_t)n;
        }
    }
    _exit(0);
}

kt_status kt__worker_setup(kt__worker **wp, const char *backend, const char *device_fp, const kt_arg *args, size_t nargs) {
    kt__worker *w = *wp;
    if (w == NULL) {
        w = calloc(1, sizeof *w);
        if (w == NULL) return kt__err(KT_ERR_NO_MEMORY, "isolation: out of memory");
        w->pid = -1;
        w->req = w->rep = w->region_fd = -1;
        *wp = w;
    }
    /* the shared region: every buffer argument, 64-byte aligned */
    size_t bytes = 0;
    for (size_t i = 0; i < nargs; i++)
        if (args[i].type == KT_TYPE_BUFFER) bytes += (args[i].bytes + 63) & ~(size_t)63;
    if (bytes == 0) bytes = 64;
    if (w->region_fd < 0) {
        char name[64];
        snprintf(name, sizeof name, "/kerntune-%d-%p", (int)getpid(), (void *)w);
        w->region_fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
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
    size_t len = sizeof(kt__msg_setup) + nargs * sizeof(kt__msg_arg);
    kt__msg_setup *m = calloc(1, len);
    if (m == NULL) return kt__err(KT_ERR_NO_MEMORY, "isolation: out of memory");
    snprintf(m->backend, sizeof m->backend, "%s", backend);
    snprintf(m->device, sizeof m->device, "%s", device_fp);
    m->region = w->region_bytes;
    m->nargs = (uint32_t)nargs;
    kt__msg_arg *a = (kt__msg_arg *)(m + 1);
    size_t off = 0;
    for (size_t i = 0; i < nargs; i++) {
        a[i].type = (uint32_t)args[i].type;
        if (args[i].type == KT_TYPE_BUFFER) {
            a[i].bytes = args[i].bytes;
            a[i].offset = off;
            off += (args[i].bytes + 63) & ~(size_t)63;
        } else {
            memcpy(&a[i].value, &args[i].u, sizeof a[i].value);
        }
    }
    free(w->setup);
    w->setup = m;
    w->setup_len = len;
    w->set_up = false;
    w->primed = false;
    for (size_t i = 0; i < w->nmods; i++) free(w->mods[i].load);
    w->nmods = 0;
    return KT_OK;
}

/* Makes sure the worker runs and is set up for the current tuning. */
static kt_status ready(kt__worker *w, char *why, size_t wlen) {
    if (w->pid > 0 && waitpid(w->pid, NULL, WNOHANG) != 0) { /* it died while idle: not a candidate's doing */
        w->pid = -1;
        stop(w);
    }
    if (w->pid < 0) {
        kt_status st = start(w);
        if (st != KT_OK) return st;
    }
    if (w->set_up) return KT_OK;
    kt__reply r;
    if (call(w, KT__MSG_SETUP, w->setup, (uint32_t)w->setup_len, 60, &r, why, wlen) != 0)
        return kt__err(KT_ERR_BACKEND, "isolation: the worker failed while starting: %s", why);
    if (r.status != KT_OK) return kt__err((kt_status)r.status, "isolation: the worker could not set up: %s", r.msg);
    w->set_up = true;
    return KT_OK;
}

kt_status kt__worker_ready(kt__worker *w) {
    char why[512] = "";
    return ready(w, why, sizeof why);
}

kt_status kt__worker_add(kt__worker *w, const char *path, const char *kernel, const kt_launch_geometry *g, size_t *id) {
    kt__worker_mod *mods = realloc(w->mods, (w->nmods + 1) * sizeof *mods);
    if (mods == NULL) return kt__err(KT_ERR_NO_MEMORY, "isolation: out of memory");
    w->mods = mods;
    kt__msg_load *m = calloc(1, sizeof *m);
    if (m == NULL) return kt__err(KT_ERR_NO_MEMORY, "isolation: out of memory");
    snprintf(m->path, sizeof m->path, "%s", path);
    snprintf(m->kernel, sizeof m->kernel, "%s", kernel);
    if (g) m->geometry = *g;
    w->mods[w->nmods] = (kt__worker_mod){.load = m, .incarnation = (uint64_t)-1};
    *id = w->nmods++;
    return KT_OK;
}

/* Whether buffer argument i goes to the worker before a run: always in a full run (validation:
 * poisoned outputs, and every output comes back); otherwise ReadWrite buffers (restored before
 * every run) and accumulating outputs, and the rest only once per worker and tuning (primed). */
static bool copy_in(const kt__worker *w, const kt__workset *ws, size_t i, bool full) {
    const kt__argdecl *a = &ws->op->args[i];
    return full || !w->primed || i >= 64 || a->access == KT_READ_WRITE || (a->access == KT_WRITE_ONLY && a->accumulate);
}

/* Back from the worker: everything after a full run (inputs too, so that a candidate that
 * wrote into a ReadOnly buffer is caught as in-process), nothing after a measured one. */
static bool copy_out(size_t i, bool full) { return i >= 64 || full; }

int kt__worker_run(kt__worker *w, size_t id, const kt__workset *ws, const kt_arg *run_args, size_t nargs, bool flush, bool full,
                   double timeout_s, double *ns, char *msg, size_t len) {
    *ns = -1;
    char why[512] = "";
    kt_status st = ready(w, why, sizeof why);
    if (st != KT_OK) {
        snprintf(msg, len, "%s", kt_last_error());
        return KT__ISO_INFRA;
    }
    kt__worker_mod none = {.incarnation = w->incarnation, .worker_id = (uint32_t)id};
    kt__worker_mod *mod = w->call ? &none : &w->mods[id]; /* a native's id is its unit */
    kt__reply r;
    if (mod->incarnation != w->incarnation) { /* load it into this worker */
        int rc = call(w, KT__MSG_LOAD, mod->load, sizeof *mod->load, 60, &r, why, sizeof why);
        if (rc != 0) {
            snprintf(msg, len, "%s (while loading)", why);
            return rc;
        }
        if (r.status != KT_OK) {
            snprintf(msg, len, "the worker could not load it: %s", r.msg);
            return KT__ISO_FAILED; /* the artifact loaded here, so this is about it (or a lost device) */
        }
        mod->worker_id = r.module;
        mod->incarnation = w->incarnation;
    }
    /* the work arguments into the region */
    const kt__msg_arg *a = (const kt__msg_arg *)(w->setup + 1);
    kt__msg_run m = {(uint32_t)mod->worker_id, flush ? KT__RUN_FLUSH : 0, 0, 0};
    for (size_t i = 0; i < nargs; i++) {
        if (run_args[i].type != KT_TYPE_BUFFER) { /* scalars went at setup: a hook may not change them */
            if (memcmp(&run_args[i].u, &a[i].value, sizeof a[i].value) != 0) {
                snprintf(msg, len, "isolation: a pre-hook changed scalar argument %zu, which a worker cannot follow", i);
                return KT__ISO_INFRA;
            }
            continue;
        }
        if (run_args[i].bytes > a[i].bytes) {
            snprintf(msg, len, "isolation: a pre-hook substituted a larger buffer for argument %zu (%zu bytes, %llu set up)", i,
                     run_args[i].bytes, (unsigned long long)a[i].bytes);
            return KT__ISO_INFRA;
        }
        if (run_args[i].bytes == 0) continue;
        bool in = copy_in(w, ws, i, full) || run_args[i].ptr != ws->args[i].ptr; /* a substitute goes every time */
        if (i < 64 && in) m.in |= (uint64_t)1 << i;
        if (i < 64 && copy_out(i, full)) m.out |= (uint64_t)1 << i;
        if (!in) continue;
        if (kt__workset_to_host(ws, w->region + a[i].offset, run_args[i].ptr, run_args[i].bytes) != KT_OK) {
            snprintf(msg, len, "%s", kt_last_error());
            return KT__ISO_INFRA;
        }
    }
    int rc = call(w, KT__MSG_RUN, &m, sizeof m, timeout_s, &r, why, sizeof why);
    if (rc != 0) {
        snprintf(msg, len, "%s", why);
        return rc;
    }
    if (r.status != KT_OK) {
        snprintf(msg, len, "%s%s", r.msg, r.sticky ? " (the device context was left unusable; the worker was replaced)" : "");
        if (r.sticky) stop(w);
        return KT__ISO_FAILED;
    }
    w->primed = true;
    for (size_t i = 0; i < nargs; i++) { /* and back */
        if (run_args[i].type != KT_TYPE_BUFFER || run_args[i].bytes == 0 || !copy_out(i, full)) continue;
        if (kt__workset_from_host(ws, run_args[i].ptr, w->region + a[i].offset, run_args[i].bytes) != KT_OK) {
            snprintf(msg, len, "%s", kt_last_error());
            return KT__ISO_INFRA;
        }
    }
    *ns = r.ns;
    return 0;
}
