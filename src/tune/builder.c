/*
 * builder.c - building a decision's planned variant units on threads, in the background.
 *
 * Units are submitted (planned, not built yet) and taken back once built: the caller may
 * measure units taken earlier meanwhile, so that on a backend whose kernels run apart from the
 * host's processors the next configurations compile while the current ones run. Units whose
 * builds share a key (the same code, see compile/pp.c) share one build, also across submissions;
 * a key another tuning of the op loaded already is not built again. Building and loading happen
 * on the builder's threads (as the build pool's threads did); a taken unit is finished on the
 * caller's thread: its module adopted into the op's table, its launch made runnable, or
 * BUILD_FAILED with lines of its log (the first, then those that say "error"). kt__build_some,
 * building synchronously, is a submit and a take of everything.
 */
#define _GNU_SOURCE /* syscall (the build thread's id, for its priority) */
#include "backends/backends.h"
#include "compile/compile.h"
#include "tune/stages.h"
#include "tune/tune.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/syscall.h>
#endif

enum { QUEUED, RUNNING, DONE };

typedef struct job {
    kt__build bd;  /* its request points into own, not into the op: an abandoned build outlives it */
    char *own;
    size_t *units; /* the units this build serves: the first pays its build time */
    size_t nunits, cap;
    int state;
    double start_s, end_s; /* when a thread began and ended it (kt__now_s) */
    bool adopted; /* its module is in the op's table */
    /* running when its tuning ended: its module is unloaded once built, and a cancellable
     * builder's backend is told it is no longer wanted (kt_build_request.cancelled) */
    _Atomic int abandoned;
} job;

static int job_cancelled(void *user) { return atomic_load(&((job *)user)->abandoned); }

struct kt__builder {
    kt_op *op;
    kt_context *ctx;
    kt_decision *d;
    kt__plans *plans;
    const kt_backend *b;
    void *bstate;
    size_t local;
    const char *fp;
    char compiler[1024];
    kt_status begun;   /* kt__build_begin's status (KT_OK, or why nothing can be built) */
    char *begun_why;
    kt_type *types, *elems;
    const char **names;
    unsigned char *constant;
    job **jobs;
    size_t njobs, capjobs, next; /* jobs[next..] are queued, in order */
    size_t *ready;                 /* units whose builds are done, not taken */
    size_t nready, capready;
    size_t *fifo;                  /* units submitted and not taken, in the order submitted */
    size_t nfifo, capfifo;
    size_t pending;                /* units submitted, build not done */
    double *built_ms;              /* the times of the builds done (not found cached), */
    size_t nbuilt, capbuilt;       /* how many */
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    pthread_t th[64];
    size_t nthreads;
    bool stopping;
    bool inited; /* mu, work and done exist */
    bool cancellable; /* jobs' requests carry cancelled (kt__builder_start) */
    bool background;  /* its threads run at a lower priority (kt__builder_start) */
    bool no_load;     /* artifacts only (kt__builder_no_load) */
    size_t exited; /* threads that left their loop */
    double t0;     /* when its threads began (kt__now_s): the origin of the decision's build spans */
    struct kt__builder *drain_next; /* in the context's list of builders left to finish */
};

static bool grow(void **p, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap * 2 : 16;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * size);
    if (q == NULL) return false;
    *p = q, *cap = c;
    return true;
}

/* Lowers the calling thread's priority by 10 (what a process it starts inherits). Linux lets
 * setpriority name one thread; elsewhere the builds keep the process's priority. */
static void lower_priority(void) {
#ifdef __linux__
    pid_t tid = (pid_t)syscall(SYS_gettid);
    errno = 0;
    int now = getpriority(PRIO_PROCESS, (id_t)tid);
    if (errno == 0) (void)setpriority(PRIO_PROCESS, (id_t)tid, now + 10 > 19 ? 19 : now + 10);
#endif
}

static void *build_thread(void *arg) {
    kt__builder *bl = arg;
    if (bl->background) lower_priority();
    pthread_mutex_lock(&bl->mu);
    for (;;) {
        while (!bl->stopping && bl->next == bl->njobs) pthread_cond_wait(&bl->work, &bl->mu);
        if (bl->stopping) break;
        job *j = bl->jobs[bl->next++];
        j->state = RUNNING;
        j->start_s = kt__now_s();
        pthread_mutex_unlock(&bl->mu);
        /* a budget clock that is not the wall clock (a replay's simulated time) times the build
         * too: what a budget of seconds expects the next builds to cost is on that clock */
        kt_clock_fn clock = bl->ctx->budget_clock;
        void *clock_user = bl->ctx->budget_clock_user;
        double c0 = clock ? clock(clock_user) : 0;
        kt__build_run_one(&bl->ctx->artifacts, &j->bd);
        double on_clock_ms = clock ? (clock(clock_user) - c0) * 1e3 : 0;
        double end = kt__now_s();
        pthread_mutex_lock(&bl->mu);
        j->state = DONE;
        j->end_s = end;
        if (atomic_load(&j->abandoned)) { /* its tuning is over, and its op may be gone: nobody takes it */
            if (j->bd.status == KT_OK && j->bd.module != NULL && !j->adopted) bl->b->unload(j->bd.bstate, j->bd.device, j->bd.module);
            j->bd.module = NULL;
            bl->pending -= j->nunits;
            continue;
        }
        if (!j->bd.cached && grow((void **)&bl->built_ms, &bl->capbuilt, bl->nbuilt + 1, sizeof *bl->built_ms))
            bl->built_ms[bl->nbuilt++] = j->bd.build_ms > on_clock_ms ? j->bd.build_ms : on_clock_ms;
        if (j->nunits > 0 && grow((void **)&bl->ready, &bl->capready, bl->nready + j->nunits, sizeof *bl->ready)) {
            memcpy(bl->ready + bl->nready, j->units, j->nunits * sizeof *j->units);
            bl->nready += j->nunits;
        }
        bl->pending -= j->nunits;
        pthread_cond_broadcast(&bl->done);
    }
    bl->exited++;
    pthread_mutex_unlock(&bl->mu);
    return NULL;
}

kt_status kt__builder_start(kt_op *op, kt_decision *d, kt__plans *plans, size_t threads, bool cancellable, bool background,
                            kt__builder **out) {
    *out = NULL;
    kt__builder *bl = calloc(1, sizeof *bl);
    size_t na = op->nargs ? op->nargs : 1;
    if (bl == NULL) return kt__err(KT_ERR_NO_MEMORY, "%s(op '%s'): out of memory for the builder", d->where, op->name);
    bl->op = op, bl->ctx = op->ctx, bl->d = d, bl->plans = plans, bl->cancellable = cancellable, bl->background = background;
    kt__op_backend(op, &bl->b, &bl->bstate, &bl->local, &bl->fp);
    bl->types = calloc(na, sizeof *bl->types), bl->elems = calloc(na, sizeof *bl->elems);
    bl->names = calloc(na, sizeof *bl->names), bl->constant = calloc(na, 1);
    if (!bl->types || !bl->elems || !bl->names || !bl->constant) {
        kt__builder_stop(bl, false);
        return kt__err(KT_ERR_NO_MEMORY, "%s(op '%s'): out of memory for the builder", d->where, op->name);
    }
    for (size_t a = 0; a < op->nargs; a++) {
        bl->types[a] = op->args[a].type, bl->elems[a] = op->args[a].elem;
        bl->names[a] = op->args[a].name, bl->constant[a] = op->args[a].constant;
    }
    bl->begun = KT_ERR_STATE; /* asked at the first submission that builds */
    pthread_mutex_init(&bl->mu, NULL);
    pthread_cond_init(&bl->work, NULL);
    pthread_condattr_t monotonic; /* take's deadline is on the monotonic clock (kt__now_s) */
    pthread_condattr_init(&monotonic);
    pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);
    pthread_cond_init(&bl->done, &monotonic);
    pthread_condattr_destroy(&monotonic);
    bl->inited = true;
    bl->t0 = kt__now_s();
    if (threads == 0) threads = kt__processors();
    if (threads < 1) threads = 1;
    if (threads > 64) threads = 64;
    for (; bl->nthreads < threads; bl->nthreads++)
        if (pthread_create(&bl->th[bl->nthreads], NULL, build_thread, bl) != 0) break;
    if (bl->nthreads == 0) {
        kt__builder_stop(bl, false);
        return kt__err(KT_ERR_SYSTEM, "%s(op '%s'): cannot start a build thread", d->where, op->name);
    }
    *out = bl;
    return KT_OK;
}

/* A unit that cannot be built here, for a reason that is not its code's: never recorded. */
static void env_failed(kt__unit *u, const char *fmt, const char *detail) {
    u->r.outcome = KT_OUTCOME_BUILD_FAILED;
    u->env_failed = true;
    kt__unit_message(&u->r, fmt, detail, 0);
}

/* Points j's request at copies of its strings in one block that j owns (j->own): a build left
 * running when its tuning ends finishes after the op, its candidates and the plans are gone. */
static bool own_request(job *j) {
    kt_build_request *r = &j->bd.req;
    const char *const *lists[3] = {r->defines, r->options, r->arg_names};
    size_t counts[3] = {r->ndefines, r->noptions, r->arg_names ? r->nargs : 0};
    size_t bytes = strlen(r->source) + 1 + strlen(r->kernel_name) + 1 + (r->config ? strlen(r->config) + 1 : 0), ptrs = 0;
    for (int l = 0; l < 3; l++)
        for (size_t k = 0; k < counts[l]; k++) bytes += strlen(lists[l][k]) + 1, ptrs++;
    char *own = malloc(ptrs * sizeof(char *) + bytes + 1);
    if (own == NULL) return false;
    const char **slot = (const char **)(void *)own;
    char *text = own + ptrs * sizeof(char *);
    const char *copied[3] = {NULL, NULL, NULL};
    for (int l = 0; l < 3; l++) {
        copied[l] = (const char *)slot;
        for (size_t k = 0; k < counts[l]; k++) {
            size_t len = strlen(lists[l][k]) + 1;
            *slot++ = memcpy(text, lists[l][k], len);
            text += len;
        }
    }
    r->defines = (const char *const *)(void *)copied[0];
    r->options = (const char *const *)(void *)copied[1];
    if (r->arg_names) r->arg_names = (const char *const *)(void *)copied[2];
    size_t len = strlen(r->source) + 1;
    r->source = memcpy(text, r->source, len);
    text += len;
    len = strlen(r->kernel_name) + 1;
    r->kernel_name = memcpy(text, r->kernel_name, len);
    text += len;
    if (r->config) r->config = memcpy(text, r->config, strlen(r->config) + 1);
    j->own = own;
    return true;
}

kt_status kt__builder_submit(kt__builder *bl, const size_t *units, size_t n) {
    kt_op *op = bl->op;
    kt_decision *d = bl->d;
    const kt_backend *b = bl->b;
    for (size_t k = 0; k < n; k++) {
        size_t i = units[k];
        kt__unit *u = &d->units[i];
        const kt__cand *c = &op->cands[u->cand];
        const char *const *defines = NULL;
        size_t ndefines = 0;
        if (!kt__plan_defines(bl->plans, i, &defines, &ndefines) || u->r.outcome != KT_OUTCOME_NOT_RUN) continue;
        if (!(kt__backend_caps(b) & KT_BACKEND_CAP_LAUNCH_PARAMS) && c->nlparams > 0) {
            env_failed(u, "backend '%s' cannot pass launch parameters (kt_op_add_launch_param)", b->name);
            continue;
        }
        if (!kt__backend_has(b, KT__BACKEND_BUILDS))
            return kt__err(KT_ERR_BACKEND, "%s(op '%s'): backend '%s' cannot build variants", d->where, op->name, b->name);
        bool constants = false;
        for (size_t a = 0; a < op->nargs; a++) constants = constants || op->args[a].constant;
        if (constants && !kt__backend_has(b, KT__BACKEND_CONSTANTS))
            return kt__err(KT_ERR_BACKEND, "%s(op '%s'): backend '%s' (ABI %d) cannot place arguments in constant memory (ABI 5)",
                           d->where, op->name, b->name, b->abi_version);
        if (c->kt_contract && !kt__backend_has(b, KT__BACKEND_CONTRACT))
            return kt__err(KT_ERR_BACKEND, "%s(op '%s'): backend '%s' (ABI %d) cannot compile under Kernel Tuner's contract "
                           "(kt_op_set_kernel_tuner_contract; ABI 15)", d->where, op->name, b->name, b->abi_version);
        if (bl->begun == KT_ERR_STATE) { /* the compiler and the directory, once */
            bl->begun = kt__build_begin(&op->ctx->artifacts, b, bl->bstate, bl->local, bl->compiler, sizeof bl->compiler);
            if (bl->begun != KT_OK) {
                bl->begun_why = kt__error_save();
                kt__log(op->ctx, KT_LOG_WARN, "op '%s': no variant can be built: %s", op->name,
                        bl->begun_why ? bl->begun_why : "out of memory");
            }
        }
        if (bl->begun != KT_OK) { /* no compiler, no artifact directory: the variants cannot run, the natives can */
            env_failed(u, "%s", bl->begun_why ? bl->begun_why : "out of memory");
            continue;
        }
        kt__build probe = {.backend = b, .bstate = bl->bstate, .device = bl->local, .device_fp = bl->fp,
                           .req = {.source = c->source, .kernel_name = c->kernel, .defines = (const char **)defines,
                                   .ndefines = ndefines, .options = (const char *const *)c->options, .noptions = c->noptions,
                                   .arg_types = bl->types, .arg_elems = bl->elems, .nargs = op->nargs,
                                   .arg_names = bl->names, .arg_constant = bl->constant,
                                   .flags = c->kt_contract ? KT_BUILD_KERNEL_TUNER : 0u, .config = u->text}};
        kt__build_keyed(&op->ctx->artifacts, bl->compiler, &probe);
        pthread_mutex_lock(&bl->mu);
        job *j = NULL;
        for (size_t q = 0; q < bl->njobs && j == NULL; q++) /* the same code: one build */
            if (strcmp(bl->jobs[q]->bd.key, probe.key) == 0) j = bl->jobs[q];
        bool fresh = j == NULL;
        if (fresh && (j = calloc(1, sizeof *j)) != NULL) {
            j->bd = probe;
            if (bl->cancellable) j->bd.req.cancelled = job_cancelled, j->bd.req.cancel_user = j;
            j->bd.no_load = bl->no_load;
            if (!own_request(j)) free(j), j = NULL;
        }
        if (fresh && j != NULL && !bl->no_load) {
            pthread_mutex_lock(&op->lock); /* a module another tuning loaded already */
            for (size_t m = 0; m < op->nmodules; m++)
                if (strcmp(op->modules[m].key, probe.key) == 0) j->bd.module = op->modules[m].module;
            pthread_mutex_unlock(&op->lock);
            if (j->bd.module) j->bd.status = KT_OK, j->bd.cached = true, j->adopted = true;
        }
        bool ok = j != NULL && grow((void **)&j->units, &j->cap, j->nunits + 1, sizeof *j->units) &&
                  (!fresh || grow((void **)&bl->jobs, &bl->capjobs, bl->njobs + 1, sizeof *bl->jobs));
        if (!ok) {
            pthread_mutex_unlock(&bl->mu);
            if (fresh && j) free(j->own), free(j);
            return kt__err(KT_ERR_NO_MEMORY, "%s(op '%s'): out of memory submitting a build", d->where, op->name);
        }
        j->units[j->nunits++] = i;
        if (fresh && j->adopted) { /* loaded already: done at once, before the queue (jobs[next..]) */
            j->state = DONE;
            if (bl->next < bl->njobs) bl->jobs[bl->njobs] = bl->jobs[bl->next];
            bl->jobs[bl->next++] = j;
            bl->njobs++;
        } else if (fresh) {
            j->state = QUEUED;
            bl->jobs[bl->njobs++] = j;
        }
        if (!grow((void **)&bl->fifo, &bl->capfifo, bl->nfifo + 1, sizeof *bl->fifo)) {
            pthread_mutex_unlock(&bl->mu);
            return kt__err(KT_ERR_NO_MEMORY, "%s(op '%s'): out of memory submitting a build", d->where, op->name);
        }
        bl->fifo[bl->nfifo++] = i;
        if (j->state == DONE) {
            if (!grow((void **)&bl->ready, &bl->capready, bl->nready + 1, sizeof *bl->ready)) {
                pthread_mutex_unlock(&bl->mu);
                return kt__err(KT_ERR_NO_MEMORY, "%s(op '%s'): out of memory submitting a build", d->where, op->name);
            }
            bl->ready[bl->nready++] = i;
        } else {
            bl->pending++;
        }
        pthread_cond_signal(&bl->work);
        pthread_mutex_unlock(&bl->mu);
    }
    return KT_OK;
}

/* The job unit i's build is in (the caller holds mu). */
static job *job_of(kt__builder *bl, size_t i) {
    for (size_t q = 0; q < bl->njobs; q++)
        for (size_t k = 0; k < bl->jobs[q]->nunits; k++)
            if (bl->jobs[q]->units[k] == i) return bl->jobs[q];
    return NULL;
}

/* Up to max_lines lines of a build's log into out (len bytes): its first line (the compiler and
 * how it ended), then the lines that say "error", then the others, each group in the log's
 * order. A compiler's warnings often come first (NVRTC's about a parameter the kernel never
 * uses), and the first lines alone then hid the error that failed the build. */
static void log_excerpt(const char *log, char *out, size_t len, int max_lines) {
    size_t at = 0;
    int lines = 0;
    out[0] = '\0';
    for (int pass = 0; pass < 3; pass++) {
        int index = 0;
        for (const char *p = log; *p && lines < max_lines; index++) {
            size_t n = strcspn(p, "\n");
            bool error = false;
            for (size_t k = 0; k + 5 <= n && !error; k++) error = strncmp(p + k, "error", 5) == 0;
            bool take = pass == 0 ? index == 0 : index > 0 && n > 0 && (pass == 1) == error;
            if (take && at < len) {
                at += (size_t)snprintf(out + at, len - at, "%s%.*s", at ? "\n" : "", (int)n, p);
                lines++;
            }
            p += n + (p[n] == '\n');
        }
    }
}

/* Finishes unit i of a done job, on the caller's thread: the module into the op's table (a key
 * loaded meanwhile keeps the first module, and this load is unloaded), the launch, or the
 * failure. */
static kt_status finish(kt__builder *bl, job *j, size_t i) {
    kt_op *op = bl->op;
    kt_decision *d = bl->d;
    kt__unit *u = &d->units[i];
    kt__build *bd = &j->bd;
    bool first = j->units[0] == i;
    kt__plan_done(bl->plans, i);
    if (bd->status != KT_OK) {
        u->r.outcome = KT_OUTCOME_BUILD_FAILED;
        u->r.build_ms = first ? bd->build_ms : 0;
        char head[1024];
        log_excerpt(bd->log, head, sizeof head, 8);
        kt__unit_message(&u->r, "%s", head, 0);
        kt__log(op->ctx, KT_LOG_WARN, "op '%s': variant %s of '%s' failed to build: %s", op->name, u->text, op->cands[u->cand].name,
                head);
        return KT_OK;
    }
    if (bl->no_load) { /* the artifact is the result */
        u->r.build_ms = first ? bd->build_ms : 0;
        if ((u->artifact = strdup(bd->path)) == NULL)
            return kt__err(KT_ERR_NO_MEMORY, "%s(op '%s'): out of memory for an artifact's path", d->where, op->name);
        return KT_OK;
    }
    if (!j->adopted) {
        pthread_mutex_lock(&op->lock);
        size_t m = 0;
        while (m < op->nmodules && strcmp(op->modules[m].key, bd->key) != 0) m++;
        if (m < op->nmodules) {
            if (op->modules[m].module != bd->module) bl->b->unload(bd->bstate, bd->device, bd->module);
            bd->module = op->modules[m].module;
        } else {
            kt__module *mods = realloc(op->modules, (op->nmodules + 1) * sizeof *mods);
            if (mods != NULL) { /* else kept loaded anyway: leaking a module beats a dangling one */
                op->modules = mods;
                snprintf(op->modules[op->nmodules].key, sizeof op->modules[op->nmodules].key, "%s", bd->key);
                op->modules[op->nmodules++].module = bd->module;
            }
        }
        pthread_mutex_unlock(&op->lock);
        j->adopted = true;
    }
    u->r.build_ms = first ? bd->build_ms : 0; /* built once, for the first */
    if ((u->artifact = strdup(bd->path)) == NULL) /* a runner process loads it from there */
        return kt__err(KT_ERR_NO_MEMORY, "%s(op '%s'): out of memory for an artifact's path", d->where, op->name);
    u->launch.backend = bl->b;
    u->launch.async = kt__backend_async(bl->b);
    u->launch.bstate = bl->bstate;
    u->launch.device = bl->local;
    u->launch.module = bd->module;
    char why[256] = "";
    if (kt__backend_has(bl->b, KT__BACKEND_FITS) &&
        bl->b->fits(bl->bstate, bl->local, bd->module, &u->launch.geometry, why, sizeof why) == KT_ERR_LIMIT) {
        u->r.outcome = KT_OUTCOME_REJECTED; /* the compiler's own account: never launched */
        kt__unit_message(&u->r, "%s", why, 0);
    }
    int regs = -1, shared = -1, local = -1; /* what the kernel uses, by the compiler's account */
    if (kt__backend_has(bl->b, KT__BACKEND_RESOURCES) &&
        bl->b->resources(bl->bstate, bl->local, bd->module, &regs, &shared, &local, why, sizeof why) == KT_OK) {
        u->r.registers = regs, u->r.shared_bytes = shared, u->r.local_bytes = local;
        u->r.resources_set = true;
    }
    if (bl->b->entry != NULL) {
        u->fn = bl->b->entry(bl->bstate, bd->module);
    } else {
        u->fn = kt__launch_fn;
        u->user = &u->launch;
    }
    return KT_OK;
}

void kt__builder_no_load(kt__builder *bl) { bl->no_load = true; }

void kt__builder_counts(kt__builder *bl, size_t *built, size_t *found, size_t *failed) {
    *built = *found = *failed = 0;
    pthread_mutex_lock(&bl->mu);
    for (size_t q = 0; q < bl->njobs; q++) {
        const job *j = bl->jobs[q];
        if (j->state != DONE) continue;
        if (j->bd.status != KT_OK) ++*failed;
        else if (j->bd.cached) ++*found;
        else ++*built;
    }
    pthread_mutex_unlock(&bl->mu);
}

/* Removes unit i from the list of those not taken (the caller holds mu). */
static void untake(kt__builder *bl, size_t i) {
    for (size_t q = 0; q < bl->nfifo; q++)
        if (bl->fifo[q] == i) {
            memmove(bl->fifo + q, bl->fifo + q + 1, (bl->nfifo - q - 1) * sizeof *bl->fifo);
            bl->nfifo--;
            return;
        }
}

/* Waits for a build to end (the caller holds mu); false once the deadline (kt__now_s; 0: none)
 * has passed. */
static bool wait_done(kt__builder *bl, double deadline) {
    if (deadline <= 0) {
        pthread_cond_wait(&bl->done, &bl->mu);
        return true;
    }
    if (kt__now_s() >= deadline) return false;
    struct timespec ts;
    double whole = floor(deadline);
    ts.tv_sec = (time_t)whole;
    ts.tv_nsec = (long)((deadline - whole) * 1e9);
    if (ts.tv_nsec > 999999999L) ts.tv_nsec = 999999999L;
    pthread_cond_timedwait(&bl->done, &bl->mu, &ts);
    return true;
}

size_t kt__builder_take(kt__builder *bl, size_t *units, size_t max, bool wait, bool oldest, double deadline, kt_status *st) {
    *st = KT_OK;
    pthread_mutex_lock(&bl->mu);
    size_t k = 0;
    if (oldest && max > 0) { /* the first submitted, whatever order the builds end in */
        long at = -1;
        while (bl->nfifo > 0) {
            for (size_t q = 0; q < bl->nready && at < 0; q++)
                if (bl->ready[q] == bl->fifo[0]) at = (long)q;
            if (at >= 0 || !wait || bl->pending == 0 || !wait_done(bl, deadline)) break;
        }
        if (at >= 0) {
            units[k++] = bl->ready[at];
            memmove(bl->ready + at, bl->ready + at + 1, (bl->nready - (size_t)at - 1) * sizeof *bl->ready);
        }
    } else {
        while (wait && bl->nready == 0 && bl->pending > 0 && wait_done(bl, deadline)) {}
        k = bl->nready < max ? bl->nready : max;
        if (k > 0) {
            memcpy(units, bl->ready, k * sizeof *units);
            memmove(bl->ready, bl->ready + k, (bl->nready - k) * sizeof *bl->ready);
        }
    }
    bl->nready -= k;
    for (size_t q = 0; q < k; q++) untake(bl, units[q]);
    job **of = malloc((k ? k : 1) * sizeof *of);
    for (size_t q = 0; of && q < k; q++) of[q] = job_of(bl, units[q]);
    pthread_mutex_unlock(&bl->mu);
    if (of == NULL) {
        *st = kt__err(KT_ERR_NO_MEMORY, "%s(op '%s'): out of memory taking builds", bl->d->where, bl->op->name);
        return 0;
    }
    for (size_t q = 0; q < k && *st == KT_OK; q++) *st = finish(bl, of[q], units[q]);
    free(of);
    return *st == KT_OK ? k : 0;
}

size_t kt__builder_pending(kt__builder *bl) {
    pthread_mutex_lock(&bl->mu);
    size_t n = bl->pending + bl->nready;
    pthread_mutex_unlock(&bl->mu);
    return n;
}

static int cmp_ms(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double kt__builder_quantile_ms(kt__builder *bl, double q) {
    pthread_mutex_lock(&bl->mu);
    double v = 0;
    size_t n = bl->nbuilt;
    double *copy = n ? malloc(n * sizeof *copy) : NULL;
    if (copy) memcpy(copy, bl->built_ms, n * sizeof *copy);
    pthread_mutex_unlock(&bl->mu);
    if (copy) {
        qsort(copy, n, sizeof *copy, cmp_ms);
        size_t i = (size_t)(q * (double)(n - 1) + 0.5);
        v = copy[i < n ? i : n - 1];
        free(copy);
    }
    return v;
}

/* Joins bl's threads and frees it (its builds are done or never started). */
static void builder_free(kt__builder *bl) {
    if (bl->inited)
        for (size_t t = 0; t < bl->nthreads; t++) pthread_join(bl->th[t], NULL);
    for (size_t q = 0; q < bl->njobs; q++) {
        free(bl->jobs[q]->units);
        free(bl->jobs[q]->own);
        free(bl->jobs[q]);
    }
    free(bl->jobs), free(bl->ready), free(bl->fifo), free(bl->built_ms);
    free(bl->types), free(bl->elems), free(bl->names), free(bl->constant);
    free(bl->begun_why);
    if (bl->inited) {
        pthread_mutex_destroy(&bl->mu);
        pthread_cond_destroy(&bl->work);
        pthread_cond_destroy(&bl->done);
    }
    free(bl);
}

void kt__builders_drain(kt_context *ctx, bool all) {
    pthread_mutex_lock(&ctx->lock);
    kt__builder **at = &ctx->draining, *done = NULL;
    while (*at != NULL) {
        kt__builder *bl = *at;
        pthread_mutex_lock(&bl->mu);
        bool over = bl->exited == bl->nthreads;
        pthread_mutex_unlock(&bl->mu);
        if (over || all) {
            *at = bl->drain_next;
            bl->drain_next = done, done = bl;
        } else {
            at = &bl->drain_next;
        }
    }
    pthread_mutex_unlock(&ctx->lock);
    while (done != NULL) {
        kt__builder *next = done->drain_next;
        builder_free(done); /* all: waits for the builds still running */
        done = next;
    }
}

/* The spans of a background builder's builds begun (building beside the measuring), into the
 * decision (under bl->mu): one running ends now. The decision keeps none when there is no
 * memory for them (kt_decision_build_busy says -1). */
static void record_spans(kt__builder *bl) {
    kt_decision *d = bl->d;
    if (d == NULL || !bl->background) return; /* synchronous batches (kt__build_some): the units' times say it */
    double now = kt__now_s();
    free(d->build_spans);
    d->nbuild_spans = 0;
    d->build_end_s = 0;
    d->build_spans = bl->next ? malloc(bl->next * sizeof *d->build_spans) : NULL;
    if (bl->next && d->build_spans == NULL) return;
    for (size_t q = 0; q < bl->next; q++) {
        const job *j = bl->jobs[q];
        d->build_spans[d->nbuild_spans][0] = j->start_s - bl->t0;
        d->build_spans[d->nbuild_spans++][1] = (j->state == DONE ? j->end_s : now) - bl->t0;
    }
    d->build_end_s = now - bl->t0;
}

void kt__builder_stop(kt__builder *bl, bool abandon) {
    if (bl == NULL) return;
    kt_context *ctx = bl->ctx;
    size_t running = 0;
    if (bl->inited) {
        pthread_mutex_lock(&bl->mu);
        bl->stopping = true; /* queued builds never start */
        record_spans(bl);
        pthread_cond_broadcast(&bl->work);
        for (size_t q = 0; abandon && q < bl->njobs; q++)
            if (bl->jobs[q]->state == RUNNING) /* a backend that can stop its compiler does */
                atomic_store(&bl->jobs[q]->abandoned, 1), running++;
        pthread_mutex_unlock(&bl->mu);
        if (running == 0) { /* the builds running end first, so that what they built is finished below */
            for (size_t t = 0; t < bl->nthreads; t++) pthread_join(bl->th[t], NULL);
            bl->nthreads = 0;
        }
        kt_status st;
        size_t unit;
        while (kt__builder_take(bl, &unit, 1, false, false, 0, &st) == 1) {} /* built, never taken: finished (their modules kept) */
    }
    kt__builders_drain(ctx, false); /* those left by earlier tunings whose builds have ended */
    if (running == 0) {
        builder_free(bl);
        return;
    }
    /* the builds running finish on their own: the context frees bl after them (at the latest
     * when it is destroyed), and nothing of the op is read meanwhile */
    bl->op = NULL, bl->d = NULL, bl->plans = NULL;
    pthread_mutex_lock(&ctx->lock);
    bl->drain_next = ctx->draining;
    ctx->draining = bl;
    ctx->drain = kt__builders_drain; /* the context waits for them when it is destroyed */
    pthread_mutex_unlock(&ctx->lock);
}
