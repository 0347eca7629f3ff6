/*
 * isolate.h - running candidates in a runner process (isolate.c: the tuning side; serve.c: the
 * runner's side; locate.c: naming code across processes). Internal.
 *
 * A runner is a separate process, started with posix_spawn, that owns its own backend state and
 * device context. It is one of two programs: kerntune-runner (tools/runner.c) when every piece
 * of code it needs is in a shared object, which it loads with dlopen; or a fresh start of the
 * caller's own program (/proc/self/exe) when some of that code is in the program itself (a
 * native candidate, a backend table, kerntune linked statically): glibc cannot dlopen a
 * program, so the program is started again and a constructor of kerntune's, run before the
 * program's main (and preloaded when kerntune is a shared object), serves the requests instead.
 * Either way the runner finds the code through a kt__code_ref (locate.h) and speaks the
 * protocol of protocol.h over one socket; buffer arguments travel through one shared-memory
 * region. A runner that crashes, hangs past its timeout or is left with an unusable device
 * context is killed and replaced; the candidate that did it is disqualified; the caller's
 * process is untouched.
 *
 * isolate/ knows nothing of tunings: what it needs of the tuning's arguments comes as plain data
 * and callbacks (kt__iso_args).
 */
#ifndef KT_ISOLATE_H
#define KT_ISOLATE_H

#include <kerntune/backend.h>
#include <kerntune/decision.h>

#include <stdbool.h>
#include <stddef.h>

typedef struct kt__runner kt__runner;

/* The arguments a tuning runs on, as a runner needs them. The pointers must stay valid until
 * the next kt__runner_setup_* of the runner (the tuning's length). */
typedef struct kt__iso_args {
    const kt_arg *args;       /* the work arguments runs start from (buffers in the op's device's
                               * memory); a run's buffer that differs was substituted by a pre-hook */
    size_t nargs;
    const bool *refreshed;    /* per argument: rewritten before every run (a ReadWrite buffer
                               * restored, an accumulating output refilled): copied in every run */
    bool same;                /* those come with the same bytes every time (no pre-hook may
                               * change them): the runner restores them on its device */
    /* copy bytes of a work buffer to host memory, and host memory into a work buffer */
    kt_status (*to_host)(void *user, void *dst, const void *buf, size_t bytes);
    kt_status (*from_host)(void *user, void *buf, const void *src, size_t bytes);
    void *user;
} kt__iso_args;

/* How one isolated run went. */
typedef struct kt__iso_run {
    double ns;          /* ran: the candidate's time */
    bool checked;       /* a checked run the runner vouched for: outputs match, inputs unchanged */
    long wrote_input;   /* a checked run: the first input it changed (its runner said), else -1 */
    kt_fail_kind kind;  /* KT_FAIL_NONE: it ran; else how it failed, and */
    int code;           /* the code kt_fail_kind describes */
    bool infra;         /* the isolation itself failed (no runner, a copy failed): not the
                         * candidate's failure; the tuning stops */
    char msg[512];      /* what went wrong */
} kt__iso_run;

/* The outcome of a unit that failed in its runner as kind says. */
static inline kt_outcome kt__iso_outcome(kt_fail_kind kind) {
    return kind == KT_FAIL_CRASH || kind == KT_FAIL_EXIT ? KT_OUTCOME_CRASHED
           : kind == KT_FAIL_TIMEOUT                     ? KT_OUTCOME_TIMEOUT
                                                         : KT_OUTCOME_FAILED;
}

/* Prepares *w (created when NULL) to run variants of backend b on its device device_fp, on
 * arguments a. Fails with KT_ERR_NOT_FOUND and a message saying why when b's variants cannot
 * run in a runner: b lacks KT_BACKEND_CAP_RUNNER, or its table cannot be named for another
 * process (locate.h). The process starts at kt__runner_ready. */
kt_status kt__runner_setup_backend(kt__runner **w, const kt_backend *b, const char *device_fp, const kt__iso_args *a);

/* Prepares *w (created when NULL) to run native candidates on host arguments a. */
kt_status kt__runner_setup_natives(kt__runner **w, const kt__iso_args *a);

/* Registers native fn with user for a natives runner; *id names it in kt__runner_run. Returns
 * false, with why (a sentence, no trailing period), when it cannot run in another process: its
 * code cannot be named (locate.h), or user is an address of this process's memory, which means
 * nothing there (NULL or a number that is no address passes as it is). Before kt__runner_ready. */
bool kt__runner_add_native(kt__runner *w, kt_native_fn fn, void *user, size_t *id, char *why, size_t len);

/* Registers an artifact of a backend runner to run; *id names it in kt__runner_run. */
kt_status kt__runner_add(kt__runner *w, const char *path, const char *kernel, const kt_launch_geometry *g, size_t *id);

/* Starts the runner and sets it up now, so that a runner that cannot start fails the tuning
 * rather than its candidates. */
kt_status kt__runner_ready(kt__runner *w);

/* One argument's part in a checked run (kt__runner_check). */
typedef struct kt__iso_check_arg {
    enum { KT__ISO_NONE, KT__ISO_OUTPUT, KT__ISO_INPUT } role; /* compared with expected; must not change */
    const void *expected; /* an output's reference bytes, in host memory (its size), valid until the next setup */
    kt_type elem;         /* an output's element type, */
    double atol, rtol;    /* and tolerances (kerntune/backend.h: all_close) */
    unsigned char poison[8];
    size_t poison_size;   /* > 0: the output is filled with this pattern before a checked run */
} kt__iso_check_arg;

/* Lets the runner check validation runs on its own device, so that a run that passes sends no
 * buffer back (kt__runner_run with check): it keeps the reference's outputs and the inputs'
 * digests (sent again to a replacement runner). nargs as set up. Fails with KT_ERR_NOT_FOUND
 * when it cannot (a host backend, no device checks: ABI 9): validation runs are then full. */
kt_status kt__runner_check(kt__runner *w, const kt__iso_check_arg *args, size_t nargs);

/* What kt__runner_run flushes before the run (flush). */
enum {
    KT__WORKER_FLUSH_DEVICE = 1u << 0, /* the device's cache, by the runner's backend */
    KT__WORKER_EVICT = 1u << 1         /* a host runner's buffers (in the region) from the CPU's caches,
                                        * once they are copied in (kt__evict) */
};

/* Runs id once on run_args (nargs as set up), flushing as flush says (KT__WORKER_*): copies them to the runner and back (full: every
 * buffer both ways, for a validation run; otherwise what changes between runs only; check,
 * after kt__runner_check: a validation run the runner checks itself: out->checked when it
 * passed, out->wrote_input when it wrote into an input (nothing comes back: the caller's input
 * keeps its bytes), and the outputs back (only) when one of them did not match, for the caller
 * to compare and name the element). Returns true when it ran, with its
 * time in out->ns; false with out saying how it failed (a failure of the candidate's, or
 * out->infra). timeout_s: the longest the run may take (0: no limit). */
bool kt__runner_run(kt__runner *w, size_t id, const kt_arg *run_args, unsigned flush, bool full, bool check, double timeout_s,
                    kt__iso_run *out);

/* Kills the runner and frees it; NULL is harmless. */
void kt__runner_free(kt__runner *w);

/* ---- serve.c: the runner's side --------------------------------------------------------------- */

/* Serves requests on socket sock with the shared region region_fd until the socket closes;
 * returns the process's exit status. parent: the tuning process's pid (the runner ends when it
 * does). program: this runner is a fresh start of the tuning process's program (code in the
 * program is found in this process); false in kerntune-runner, which refuses such code. */
int kt__runner_serve(int sock, int region_fd, long parent, bool program);

#endif
