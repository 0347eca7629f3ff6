/*
 * measure.c - deciding a key by measurement. Works on a workset (workset.c): the arguments
 * every tuning run uses, with the caller's ReadWrite buffers restored before each run (or
 * clones, or generated inputs). The reference runs first; each other candidate's first run is
 * its validation run; then the engine (engine.c) measures it. Units run in the caller's
 * process, or in a worker process (src/isolate/) when the op or their backend asks.
 */
#include "backends/backends.h"
#include "isolate/isolate.h"
#include "search/search.h"
#include "tune/stages.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- measuring one unit ---------------------------------------------------------------------- */

/* Where a unit's runs are flushed from the cache: its backend flushes a device's; the core
 * flushes the host's by evicting the run's buffers (util/evict.c), or, on a processor where it
 * cannot (or for buffers that are not host memory), by writing a buffer as large as its
 * last-level cache. */
enum { FLUSH_NONE, FLUSH_DEVICE, FLUSH_HOST };

typedef struct trial_ctx {
    const kt_op *op;
    kt__workset *ws;
    const kt__unit *unit;
    kt_result result;
    double device_ns;
    int flush;
    unsigned char *host_flush; /* the tuning's host flush buffer (when not evict) */
    size_t host_flush_len;
    bool evict;                /* FLUSH_HOST by evicting the run's buffers (host memory) from the caches */
    kt__worker *worker;        /* isolated: the worker process that runs it, and its id there */
    size_t worker_id;
    kt__iso_run iso;           /* how its isolated run failed (iso.kind), or the isolation did (iso.infra) */
    char launch_msg[256];      /* how its backend's launch failed in this process (KT_FAIL_LAUNCH) */
    bool full;                 /* this run's outputs are looked at (validation, the reference) */
    bool check;                /* isolated: the worker checks this validation run itself */
    bool checked;              /* and vouched for it: outputs match, inputs unchanged; */
    long wrote_input;          /* or saw it write into this input (-1: none) */
} trial_ctx;

static int flush_kind(const kt_op *op, const kt__unit *u) {
    kt_flush mode = op->ctx->measure.flush;
    if (mode == KT_FLUSH_OFF) return FLUSH_NONE;
    if (kt__fn_on_device(u->fn)) {
        const kt_backend *b = u->launch.backend;
        return kt__backend_flushes(b) ? FLUSH_DEVICE : FLUSH_NONE;
    }
    return (u->text != NULL || mode == KT_FLUSH_ON) ? FLUSH_HOST : FLUSH_NONE;
}

/* The size of the largest data cache the first CPU uses, as the kernel lists it
 * (/sys/devices/system/cpu/cpu0/cache/indexN: "32768K"), or 0 when it does not. */
static size_t sysfs_llc_bytes(void) {
    size_t best = 0;
    for (int i = 0; i < 16; i++) {
        char path[96], type[32] = "", size[32] = "";
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        FILE *f = fopen(path, "r");
        if (f == NULL) break;
        bool typed = fgets(type, sizeof type, f) != NULL;
        fclose(f);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if (!typed || strncmp(type, "Instruction", 11) == 0 || (f = fopen(path, "r")) == NULL) continue;
        bool sized = fgets(size, sizeof size, f) != NULL;
        fclose(f);
        char *end = NULL;
        unsigned long long v = sized ? strtoull(size, &end, 10) : 0;
        if (end == size) continue;
        if (*end == 'K') v <<= 10;
        else if (*end == 'M') v <<= 20;
        else if (*end == 'G') v <<= 30;
        if (v > best) best = (size_t)v;
    }
    return best;
}

/* The host's last-level cache size in bytes: the one the first CPU uses (sysfs), else what the
 * C library says, else 8 MiB. The C library's figure comes second because on some parts it is
 * the whole package's L3 (256 MiB on an EPYC whose cores share 32 MiB), and a flush that large
 * costs each run tens of milliseconds for nothing. */
static size_t host_llc_bytes(void) {
    size_t sysfs = sysfs_llc_bytes();
    if (sysfs > 0) return sysfs;
    long v = -1;
#ifdef _SC_LEVEL3_CACHE_SIZE
    v = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (v <= 0) v = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
    return v > 0 ? (size_t)v : (size_t)8 << 20;
}

/* Flushes before run on args: the device's cache by its backend (of the run's buffers alone where
 * it can: ABI 16), the host's by evicting the run's buffers, or where that cannot be done by
 * writing a buffer as large as the last-level cache. */
static kt_status trial_flush(trial_ctx *t, const kt_arg *args) {
    size_t nargs = t->op->nargs;
    if (t->flush == FLUSH_DEVICE) {
        char err[256] = "";
        const kt__launch *l = &t->unit->launch;
        kt_status st = kt__backend_flush(l->backend, l->bstate, l->device, args, nargs, err, sizeof err);
        return st == KT_OK ? KT_OK : kt__err(st, "op '%s': flushing the device's cache: %s", t->op->name, err);
    }
    if (t->evict) {
        for (size_t i = 0; i < nargs; i++)
            if (args[i].type == KT_TYPE_BUFFER) kt__evict(args[i].ptr, args[i].bytes);
        return KT_OK;
    }
    if (t->host_flush == NULL) return KT_OK;
    /* writing every line evicts what the candidate left; the counter keeps it from being elided */
    static _Atomic unsigned char round;
    memset(t->host_flush, atomic_fetch_add_explicit(&round, 1, memory_order_relaxed), t->host_flush_len);
    return KT_OK;
}

static kt_status trial_before(void *p, const kt_arg **args) {
    trial_ctx *t = p;
    kt_status st = kt__workset_before(t->ws, false, args);
    /* an isolated device variant is flushed by its worker, on the worker's context; an isolated
     * host run's buffers are evicted once they are copied into the worker's region */
    if (st == KT_OK && t->flush != FLUSH_NONE && !(t->worker && (t->flush == FLUSH_DEVICE || t->evict))) st = trial_flush(t, *args);
    return st;
}

static int trial_run(void *p, const kt_arg *args) {
    trial_ctx *t = p;
    const kt__unit *u = t->unit;
    t->device_ns = -1;
    if (t->worker) { /* in the worker process */
        kt__iso_run run;
        unsigned flush = (t->flush == FLUSH_DEVICE ? KT__WORKER_FLUSH_DEVICE : 0) | (t->evict ? KT__WORKER_EVICT : 0);
        if (kt__worker_run(t->worker, t->worker_id, args, flush, t->full, t->full && t->check, t->op->timeout_s, &run)) {
            t->device_ns = run.ns;
            t->checked = run.checked;
            t->wrote_input = run.wrote_input;
            return 0;
        }
        t->iso = run; /* its kind and code go on the unit after the engine; infra: after() stops the tuning */
        return run.code != 0 ? run.code : -1;
    }
    if (u->fn == kt__launch_fn) { /* a device variant: timed by the device's events */
        kt_status st = kt__launch_timed(&u->launch, args, t->op->nargs, &t->device_ns, t->launch_msg, sizeof t->launch_msg);
        return st == KT_OK ? 0 : (int)st; /* the backend's status is the failure's code (KT_FAIL_LAUNCH); launch_msg says why */
    }
    if (u->fn == kt__queued_fn) return kt__queued_timed(&u->launch, args, t->op->nargs, &t->device_ns); /* device events */
    if (u->rfn) return u->rfn(args, t->op->nargs, u->user, &t->result);
    return u->fn(args, t->op->nargs, u->user);
}

static double trial_device_ns(void *p) { return ((trial_ctx *)p)->device_ns; }

static kt_status trial_after(void *p) {
    trial_ctx *t = p;
    kt_result_release(&t->result); /* outputs of tuning runs never reach the caller */
    kt_status st = kt__workset_after(t->ws);
    if (st == KT_OK && t->iso.infra) /* the isolation failed, not the candidate */
        st = kt__err(KT_ERR_BACKEND, "%s(op '%s'): %s", t->ws->where, t->op->name, t->iso.msg);
    return st;
}

/* The validation run of a unit: poisoned outputs, then a comparison with the reference before
 * the post-hook. Sets the outcome to FAILED or INVALID when it does not pass. */
static kt_status validation_run(trial_ctx *t, const kt__reference *ref, kt__cand_result *r) {
    const kt_arg *args = NULL;
    kt_status st = kt__workset_before(t->ws, true, &args);
    if (st != KT_OK) return st;
    t->result = (kt_result){0};
    t->full = true;
    t->checked = false;
    t->wrote_input = -1;
    int rc = trial_run(t, args);
    t->full = false;
    char msg[KT__ERRBUF] = ""; /* a comparison's diagnostic: an element and two values */
    bool reported = kt__rc_reported(t->unit->fn, rc);
    char *why = reported ? kt__error_save() : NULL;
    /* a run its worker checked and vouched for sent nothing back: there is nothing to compare here */
    if (rc == 0 && t->wrote_input >= 0)
        snprintf(msg, sizeof msg, "wrote into read-only argument '%s'", t->op->args[t->wrote_input].name);
    bool valid = rc != 0 || t->checked || (t->wrote_input < 0 && kt__validate(ref, t->ws, args, &t->result, msg, sizeof msg));
    st = trial_after(t);
    if (reported) {
        r->outcome = KT_OUTCOME_FAILED;
        r->fail_code = rc;
        kt__unit_message(r, "%s", why ? why : "out of memory", 0);
    } else if (rc != 0) {
        r->outcome = KT_OUTCOME_FAILED;
        r->fail_code = rc;
        if (t->iso.kind != KT_FAIL_NONE) kt__unit_message(r, "%s", t->iso.msg, 0); /* in its worker: how it failed there */
        else if (t->launch_msg[0]) kt__unit_message(r, "%s", t->launch_msg, 0); /* its launch, here */
        else kt__unit_message(r, "%sreturned %d in its validation run", NULL, rc);
    } else if (!valid) {
        r->outcome = KT_OUTCOME_INVALID;
        kt__unit_message(r, "%s", msg, 0);
    }
    free(why);
    return st;
}

/* Builds the ALL_FAILED message from the units' diagnostics. */
static kt_status all_failed(const kt_op *op, kt_decision *d) {
    /* the first three failures whole, then how many more: kt_op_decision gives them all */
    size_t shown = 0, more = 0;
    kt__err(KT_ERR_ALL_FAILED, "%s(op '%s'): every candidate that accepts the arguments failed:", d->where, op->name);
    for (size_t i = 0; i < d->nunits; i++) {
        const kt__unit *u = &d->units[i];
        const kt__cand_result *r = &u->r;
        if (!kt__outcome_failed(r->outcome)) continue;
        if (shown == 3) {
            more++;
            continue;
        }
        shown++;
        const char *name = op->cands[u->cand].name;
        if (r->message == NULL) kt__err(KT_ERR_ALL_FAILED, "%s '%s'%s%s returned %d;", kt_last_error(), name, u->text ? " " : "",
                                        u->text ? u->text : "", r->fail_code);
        else kt__err(KT_ERR_ALL_FAILED, "%s '%s'%s%s %s;", kt_last_error(), name, u->text ? " " : "", u->text ? u->text : "",
                     r->message);
    }
    if (more) kt__err(KT_ERR_ALL_FAILED, "%s and %zu more (kt_op_decision gives each unit's outcome and message)", kt_last_error(), more);
    d->fail_msg = kt__error_save();
    return KT_ERR_ALL_FAILED;
}

/* Which units may run while tuning: built, and accepting both the caller's arguments (the
 * key) and the work arguments they will actually run on (copies keep the caller's alignment,
 * and this makes sure of it, predicate functions included). Units that may not are marked
 * REJECTED here. */
static bool *accepting(const kt_op *op, kt_decision *d, const kt__workset *ws, const kt__plans *plans) {
    bool *acc = calloc(d->nunits ? d->nunits : 1, sizeof *acc);
    if (acc == NULL) return NULL;
    int64_t wkey[KT__KEY_WORDS_MAX];
    kt__key_compute(op, ws->args, wkey);
    for (size_t i = 0; i < d->nunits; i++) {
        kt__unit *u = &d->units[i];
        size_t c = u->cand;
        bool ready = kt__unit_runnable(u) || (kt__unit_planned(plans, i) && u->r.outcome == KT_OUTCOME_NOT_RUN); /* or to be built */
        acc[i] = ready && kt__key_accepts(op, d->key, c) && kt__key_accepts(op, wkey, c);
        if (!acc[i] && u->r.outcome == KT_OUTCOME_NOT_RUN) {
            u->r.outcome = KT_OUTCOME_REJECTED;
            if (kt__key_accepts(op, d->key, c))
                kt__unit_message(&u->r, "%sits requirements reject the copies of the arguments that tuning runs on", NULL, 0);
        }
    }
    return acc;
}

/* A variant group searched in a tuning: its configurations are its units first .. first + n - 1. */
typedef struct group_search {
    size_t cand, first, n;
    kt_search *s;
    size_t outstanding; /* proposed and not told yet (building, or being screened) */
    bool done;
} group_search;

/* What the engine needs of one tuning. */
typedef struct tuning {
    kt_op *op;
    kt_decision *d;
    kt__workset *ws;
    kt__reference *ref;
    trial_ctx *trials;         /* one per unit */
    unsigned char *host_flush; /* allocated when a unit first needs it */
    size_t host_flush_len;
    bool *acc;                 /* per unit: it may run in this tuning (accepting) */
    bool isolated, natives;    /* some accepted variant runs in a worker; some native may */
    bool *refreshed;           /* per argument, for the workers (iso_args) */
    kt__worker *native_worker; /* started for this tuning: it holds this tuning's natives */
    bool iso_locked;           /* holds the context's iso_lock (the device's worker) */
    bool recalled;             /* some unit's time comes from the persistent cache */
    kt__configs *cfgs;         /* per candidate: its variant group's enumeration (make_units) */
    kt__plans *plans;          /* the variant units not built yet (lazy: built when admitted) */
    group_search *groups;      /* the searched groups, when a strategy chooses their units */
    size_t ngroups, turn;      /* and whose turn it is */
    size_t plain;              /* the next unit outside a search to admit (in spread order: a counter) */
    unsigned spread_bits;      /* nonzero: units outside a search go in spread order (spread_unit) */
    size_t evaluations, budget; /* units proposed or admitted so far, and at most (0: no limit) */
    kt_status next_error;      /* what stopped tuning_next (building), for after the engine */
    bool ref_taken;            /* a searched group's reference unit went first */
    bool worker_checks;        /* the device's worker checks validation runs itself */
    /* Times under a budget of seconds are on the context's budget clock (budget_now): the wall
     * clock, or a replay's simulated time. */
    double start_s;            /* when the tuning started (a budget of seconds counts from there) */
    /* building lazily under a budget of seconds: what batches cost so far */
    double build_s;            /* the time of their builds, */
    size_t waves;              /* in waves of as many units as there are build threads, */
    double screen_s;           /* the time the engine took to screen them, */
    size_t screened;           /* for this many units */
    double handed_s;           /* when the last batch went to the engine */
    size_t handed;             /* and how many units it held (0: none is out) */
    bool any_valid;            /* a unit was measured: the tuning can decide */
    kt__builder *builder;      /* pipelined: builds the next proposals while the engine measures */
    size_t threads;            /* build threads */
    size_t direct[64];         /* pipelined: proposals that need no build (the reference, natives), */
    size_t ndirect;            /* handed to the engine next */
    size_t compared, disagreed; /* validation runs compared with the reference, and those that failed */
    bool stopped;              /* most disagreed (kt_op_set_disagreement_stop): admit no more */
} tuning;

/* A budget of seconds on the wall clock (no budget clock of the context's): a tuning under it
 * takes units as they are built and does not wait past its deadline for builds. */
static bool wall_budget(const kt_op *op) { return op->budget.seconds > 0 && !op->ctx->budget_clock; }

/* Until when (kt__now_s) the tuning waits for a build: under a wall budget, once it can decide,
 * its deadline; 0 (no limit) otherwise. */
static double build_deadline(const tuning *tu) {
    return wall_budget(tu->op) && tu->any_valid ? tu->start_s + tu->op->budget.seconds : 0;
}

/* Now on the clock the op's budget of seconds counts on. */
static double budget_now(const tuning *tu) { return kt__clock_s(tu->op->ctx->budget_clock, tu->op->ctx->budget_clock_user); }

static kt_status tuning_admit(void *p, size_t i, bool *usable, unsigned *runs) {
    tuning *tu = p;
    kt_op *op = tu->op;
    kt__unit *u = &tu->d->units[i];
    trial_ctx *t = &tu->trials[i];
    t->evict = t->flush == FLUSH_HOST && tu->ws->host && kt__evict_supported();
    if (t->flush == FLUSH_HOST && !t->evict && tu->host_flush == NULL) {
        tu->host_flush_len = host_llc_bytes();
        tu->host_flush = malloc(tu->host_flush_len);
        if (tu->host_flush == NULL) return kt__err(KT_ERR_NO_MEMORY, "op '%s': out of memory for a cache flush buffer", op->name);
    }
    t->host_flush = t->flush == FLUSH_HOST && !t->evict ? tu->host_flush : NULL;
    t->host_flush_len = tu->host_flush_len;
    kt_status st = KT_OK;
    *runs = 0;
    u->r.outcome = KT_OUTCOME_MEASURED;
    if ((long)i == tu->ref->unit && tu->ref->wrote_input) {
        u->r.outcome = KT_OUTCOME_INVALID;
        kt__unit_message(&u->r, "%s", tu->ref->message, 0);
    } else if (op->validate) {
        *runs = 1; /* the reference's own run is its validation run */
        if ((long)i != tu->ref->unit) st = validation_run(t, tu->ref, &u->r);
        if (st == KT_OK && (long)i != tu->ref->unit && tu->ref->active && op->disagree_min > 0 &&
            (u->r.outcome == KT_OUTCOME_MEASURED || u->r.outcome == KT_OUTCOME_INVALID)) {
            tu->compared++;
            tu->disagreed += u->r.outcome == KT_OUTCOME_INVALID;
            if (tu->compared >= op->disagree_min && 2 * tu->disagreed > tu->compared) tu->stopped = true;
        }
    }
    *usable = st == KT_OK && u->r.outcome == KT_OUTCOME_MEASURED;
    if (st == KT_OK && !*usable)
        kt__log(op->ctx, KT_LOG_WARN, "op '%s': candidate '%s'%s%s disqualified: %s", op->name, op->cands[u->cand].name,
                u->text ? " " : "", u->text ? u->text : "", u->r.message ? u->r.message : "");
    return st;
}

static kt__cand_result *tuning_result(void *p, size_t i) { return &((tuning *)p)->d->units[i].r; }

static bool tuning_stopped(void *p) {
    tuning *tu = p;
    return tu->stopped || atomic_load(&tu->op->stop_asked);
}

static void tuning_trial(void *p, size_t i, kt__trial *out) {
    *out = (kt__trial){trial_before, trial_run, trial_after, trial_device_ns, &((tuning *)p)->trials[i]};
}

static void tuning_progress(void *p, size_t done, size_t total, size_t valid, size_t failed, double best_ns) {
    const tuning *tu = p;
    const kt_context *ctx = tu->op->ctx;
    /* under a budget of units, what the tuning will try: the budget (the rest is never run) */
    if (tu->budget > 0 && tu->budget < total) total = tu->budget;
    if (done > total) done = total;
    ctx->progress_fn(done, total, valid, failed, best_ns, ctx->progress_user);
}

/* Whether a unit runs in a worker process while tuning: compiled variants when the op says
 * so, and by default those of a backend whose faults poison its device context (CUDA's). The
 * worker setup may still refuse (a backend without KT_BACKEND_CAP_WORKER): they then run here. */
static bool isolate(const kt_op *op, const kt__unit *u) {
    if (u->text == NULL || op->isolation == KT_ISOLATE_OFF) return false;
    if (op->cands[u->cand].nlparams > 0) return false; /* its launch parameters are computed in this process */
    if (op->isolation == KT_ISOLATE_ON) return true;
    const kt_backend *b; /* the op's device's: a variant not built yet has none of its own */
    void *bstate;
    size_t local;
    kt__op_backend(op, &b, &bstate, &local, NULL);
    return (kt__backend_caps(b) & KT_BACKEND_CAP_FAULT_POISONS) != 0;
}

/* Why a native of an op that asks for isolation (KT_ISOLATE_ON) cannot run in a worker
 * process for this tuning, or NULL when it may (its code may still not be found there:
 * kt__worker_add_native says). */
static const char *native_stays(const kt__workset *ws, const kt__unit *u) {
    if (u->rfn != NULL) return "it returns its output (kt_op_add_native_result), which cannot cross processes";
    if (u->fn == kt__queued_fn) return "it enqueues on this process's device queue (kt_op_add_native_queued)";
    if (!ws->host) return "its arguments are in device memory, which a worker process cannot reach";
    return NULL;
}

static kt_status iso_to_host(void *ws, void *dst, const void *buf, size_t n) { return kt__workset_to_host(ws, dst, buf, n); }
static kt_status iso_from_host(void *ws, void *buf, const void *src, size_t n) { return kt__workset_from_host(ws, buf, src, n); }

/* What a worker needs of the workset: the work arguments, which of them the tuning rewrites
 * before every run (ReadWrite restored, accumulating outputs refilled), and copies. */
static kt__iso_args iso_args(const kt_op *op, kt__workset *ws, bool *refreshed) {
    for (size_t i = 0; i < op->nargs; i++)
        refreshed[i] = op->args[i].access == KT_READ_WRITE || (op->args[i].access == KT_WRITE_ONLY && op->args[i].accumulate);
    /* restored from its pristine copy, or filled with the accumulator's start, before every run:
     * the same bytes each time, unless a pre-hook may change them */
    return (kt__iso_args){.args = ws->args, .nargs = op->nargs, .refreshed = refreshed, .same = op->pre_hook == NULL,
                          .to_host = iso_to_host, .from_host = iso_from_host, .user = ws};
}

/* The reference's run, through its trial (so in its worker when isolated). */
static int tuning_run_unit(void *p, size_t i, const kt_arg *args, kt_result *res) {
    tuning *tu = p;
    const kt__unit *u = &tu->d->units[i];
    if (tu->trials[i].worker) {
        tu->trials[i].full = true;
        int rc = trial_run(&tu->trials[i], args);
        tu->trials[i].full = false;
        return rc;
    }
    return res ? u->rfn(args, tu->op->nargs, u->user, res) : u->fn(args, tu->op->nargs, u->user);
}

/* Whether a tuning of the op builds its variants only as it admits them: when a budget or a
 * search strategy may leave most of them out. */
static bool lazy_building(const kt_op *op) {
    const kt_backend *b;
    void *bstate;
    size_t local;
    kt__op_backend(op, &b, &bstate, &local, NULL);
    return op->budget.units || op->budget.fraction > 0 || op->budget.seconds > 0 ||
           (op->strategy[0] && strcmp(op->strategy, "exhaustive") != 0) ||
           (kt__backend_caps(b) & KT_BACKEND_CAP_OWN_PROCESSOR) || /* building while measuring: always worth it */
           (op->disagree_min > 0 && op->validate); /* a stop on disagreement may end it early: what it never admits, never built */
}

/* Makes the units, the workset and one trial per unit; says which units may run and whether
 * some run in workers. */
static kt_status set_up(tuning *tu, const kt_arg *caller, kt_inputs inputs, bool launching) {
    kt_op *op = tu->op;
    kt_decision *d = tu->d;
    if ((tu->cfgs = calloc(op->ncands ? op->ncands : 1, sizeof *tu->cfgs)) == NULL)
        return kt__err(KT_ERR_NO_MEMORY, "%s(op '%s'): out of memory", d->where, op->name);
    kt_status st = kt__make_units(op, d, caller, -1, NULL, tu->cfgs, lazy_building(op) && !d->rerace ? &tu->plans : NULL);
    if (st == KT_OK) st = kt__workset_init(tu->ws, op, d->where, inputs, caller, launching);
    else memset(tu->ws, 0, sizeof *tu->ws);
    if (st == KT_OK && ((tu->acc = accepting(op, d, tu->ws, tu->plans)) == NULL ||
                        (tu->trials = calloc(d->nunits ? d->nunits : 1, sizeof *tu->trials)) == NULL))
        st = kt__err(KT_ERR_NO_MEMORY, "%s(op '%s'): out of memory for the tuning's trials", d->where, op->name);
    for (size_t i = 0; st == KT_OK && i < d->nunits; i++) {
        tu->trials[i] = (trial_ctx){.op = op, .ws = tu->ws, .unit = &d->units[i], .device_ns = -1, .flush = flush_kind(op, &d->units[i])};
        tu->isolated = tu->isolated || (tu->acc[i] && isolate(op, &d->units[i]));
        tu->natives = tu->natives || (tu->acc[i] && d->units[i].text == NULL && op->isolation == KT_ISOLATE_ON);
    }
    if (st == KT_OK && (tu->isolated || tu->natives) && (tu->refreshed = calloc(op->nargs ? op->nargs : 1, sizeof *tu->refreshed)) == NULL)
        st = kt__err(KT_ERR_NO_MEMORY, "%s(op '%s'): out of memory", d->where, op->name);
    return st;
}

/* Starts the worker of this tuning's natives with those that can run there; the others run
 * here, with an info line saying why. */
static kt_status start_natives_worker(tuning *tu) {
    kt_op *op = tu->op;
    kt_decision *d = tu->d;
    kt_status st = KT_OK;
    bool added = false;
    for (size_t i = 0; st == KT_OK && i < d->nunits; i++) {
        kt__unit *u = &d->units[i];
        if (!tu->acc[i] || u->text != NULL) continue;
        char why[512];
        const char *stays = native_stays(tu->ws, u);
        if (stays == NULL && tu->native_worker == NULL) { /* the first that may: the worker's setup */
            kt__iso_args io = iso_args(op, tu->ws, tu->refreshed);
            if ((st = kt__worker_setup_natives(&tu->native_worker, &io)) != KT_OK) break;
        }
        if (stays == NULL && kt__worker_add_native(tu->native_worker, u->fn, u->user, &tu->trials[i].worker_id, why, sizeof why)) {
            tu->trials[i].worker = tu->native_worker;
            added = true;
        } else {
            kt__log(op->ctx, KT_LOG_INFO, "op '%s': native '%s' runs in this process, not in a worker: %s", op->name,
                    op->cands[u->cand].name, stays ? stays : why);
        }
    }
    if (st == KT_OK && added) st = kt__worker_ready(tu->native_worker);
    return st == KT_OK ? KT_OK : kt__err(st, "%s(op '%s'): %s", d->where, op->name, kt_last_error());
}

/* Loads unit i into the worker, its wall time counted as the unit's framework time. */
static kt_status load_in_worker(tuning *tu, kt__worker *worker, size_t i) {
    kt__unit *u = &tu->d->units[i];
    double t0 = kt__now_s();
    tu->trials[i].worker = worker;
    kt_status st = kt__worker_add(worker, u->artifact, tu->op->cands[u->cand].kernel, &u->launch.geometry, &tu->trials[i].worker_id);
    u->r.framework_ns += (kt__now_s() - t0) * 1e9;
    return st;
}

/* Readies the device's worker (kept by the context, held for the whole tuning) and loads the
 * isolated variants into it; a backend that cannot run in a worker keeps them here. */
static kt_status start_device_worker(tuning *tu) {
    kt_op *op = tu->op;
    kt_decision *d = tu->d;
    pthread_mutex_lock(&op->ctx->iso_lock); /* held to the end of the tuning */
    tu->iso_locked = true;
    const kt_backend *b;
    void *bstate;
    size_t local;
    const char *fp;
    kt__op_backend(op, &b, &bstate, &local, &fp);
    kt__iso_args io = iso_args(op, tu->ws, tu->refreshed);
    kt_status st = kt__worker_setup_backend(&op->ctx->workers[op->device], b, fp, &io);
    if (st == KT_ERR_NOT_FOUND) { /* this backend's variants cannot run in a worker: here, then */
        kt__log(op->ctx, KT_LOG_INFO, "op '%s': variants run in this process, not in a worker: %s", op->name, kt_last_error());
        tu->isolated = false;
        return KT_OK;
    }
    kt__worker *worker = op->ctx->workers[op->device];
    if (st == KT_OK) st = kt__worker_ready(worker);
    if (st != KT_OK) return kt__err(st, "%s(op '%s'): %s", d->where, op->name, kt_last_error());
    for (size_t i = 0; st == KT_OK && i < d->nunits; i++) {
        if (!tu->acc[i] || !isolate(op, &d->units[i]) || d->units[i].artifact == NULL) continue; /* or when built */
        st = load_in_worker(tu, worker, i);
    }
    return st;
}

/* After units (n) were built: those that failed are out, those that run in the device's worker
 * are loaded there. */
static kt_status prepare_built(tuning *tu, const size_t *units, size_t n) {
    kt_op *op = tu->op;
    kt_decision *d = tu->d;
    kt_status st = KT_OK;
    for (size_t j = 0; st == KT_OK && j < n; j++) {
        size_t i = units[j];
        kt__unit *u = &d->units[i];
        if (!tu->acc[i] || tu->trials[i].worker != NULL) continue;
        if (!kt__unit_runnable(u)) {
            tu->acc[i] = false; /* BUILD_FAILED */
            continue;
        }
        tu->trials[i].flush = flush_kind(op, u); /* its backend is known once built */
        if (!tu->isolated || !isolate(op, u)) continue;
        st = load_in_worker(tu, op->ctx->workers[op->device], i);
        if (st != KT_OK) st = kt__err(st, "%s(op '%s'): %s", d->where, op->name, kt_last_error());
    }
    return st;
}

/* Builds those of units (n) still to build, now, and prepares them (prepare_built). Under a
 * budget of wall seconds, once the tuning can decide, no build is waited for past its deadline. */
static kt_status build_admitted(tuning *tu, const size_t *units, size_t n) {
    kt_status st = kt__build_some(tu->op, tu->d, tu->plans, units, n, build_deadline(tu));
    return st == KT_OK ? prepare_built(tu, units, n) : st;
}

/* Lazily built: the reference candidate's first unit that builds, before the reference runs. */
static kt_status build_reference(tuning *tu) {
    kt_op *op = tu->op;
    kt_decision *d = tu->d;
    if (!op->validate || op->reference_fn != NULL) return KT_OK;
    size_t cand = (size_t)kt__reference_candidate(op), want = op->consensus > 1 && !op->has_result ? op->consensus : 1, built = 0;
    kt_status st = KT_OK;
    for (size_t i = 0; st == KT_OK && i < d->nunits; i++) { /* (the voters of a consensus, one at a time: few) */
        if (d->units[i].cand != cand || !tu->acc[i]) continue;
        st = build_admitted(tu, &i, 1);
        if (tu->acc[i] && ++built == want) break;
    }
    return st;
}

/* Runs the reference; a reference unit that fails says why and is not measured. */
static kt_status run_reference(tuning *tu) {
    kt_op *op = tu->op;
    kt_decision *d = tu->d;
    const kt__reference *ref = tu->ref;
    kt_status st = kt__reference_capture(tu->ref, tu->ws, d->units, d->nunits, tu->acc, tuning_run_unit, tu);
    for (size_t i = 0; i < d->nunits; i++) { /* the reference's isolated run */
        trial_ctx *t = &tu->trials[i];
        if (st == KT_OK && t->iso.infra) st = kt__err(KT_ERR_BACKEND, "%s(op '%s'): %s", d->where, op->name, t->iso.msg);
        if (st == KT_OK && (long)i == ref->unit && ref->failed_rc != 0) {
            kt__unit *u = &d->units[i];
            kt_fail_kind c = t->iso.kind;
            u->r.outcome = c != KT_FAIL_NONE ? kt__iso_outcome(c) : KT_OUTCOME_FAILED;
            u->r.fail_kind = c; /* in-process: set with the others' in settle_units */
            u->r.fail_code = c != KT_FAIL_NONE ? t->iso.code : ref->failed_rc;
            if (c != KT_FAIL_NONE && t->iso.msg[0]) kt__unit_message(&u->r, "%s", t->iso.msg, 0);
            else if (ref->failed_msg) kt__unit_message(&u->r, "%s", ref->failed_msg, 0);
            else kt__unit_message(&u->r, "%sreturned %d in its reference run", NULL, ref->failed_rc);
            tu->acc[i] = false;
            kt__log(op->ctx, KT_LOG_WARN, "op '%s': the reference '%s'%s%s failed: %s", op->name, op->cands[u->cand].name,
                    u->text ? " " : "", u->text ? u->text : "", u->r.message ? u->r.message : "");
        }
        t->iso.kind = KT_FAIL_NONE; /* the engine runs the others again: what it sees there counts */
    }
    /* it validates, never competes (also when nothing is validated here: a stand-in device whose
     * measurements were validated where they were made) */
    for (size_t i = 0; st == KT_OK && op->reference_only && i < d->nunits; i++)
        if ((long)d->units[i].cand == kt__reference_candidate(op)) tu->acc[i] = false;
    return st;
}

/* Lets the device's worker check validation runs on its device (isolate.h: kt__worker_check),
 * so that a validation run that passes sends nothing back: every output compared there with the
 * reference's, every ReadOnly input's digest with its pristine one, WriteOnly outputs poisoned
 * there first. Not with a pre-hook (it may substitute buffers the worker does not have) or a
 * verify function (it runs here, on the outputs themselves); a
 * worker that cannot (a host backend, no device checks) leaves validation runs in full. */
static void worker_checks(tuning *tu) {
    kt_op *op = tu->op;
    const kt__reference *ref = tu->ref;
    kt__worker *w = tu->isolated ? op->ctx->workers[op->device] : NULL;
    if (w == NULL || !op->validate || !ref->active || op->pre_hook != NULL || op->has_result || op->verify_fn != NULL) return;
    kt__iso_check_arg *c = calloc(op->nargs ? op->nargs : 1, sizeof *c);
    if (c == NULL) return;
    bool usable = true;
    for (size_t i = 0; i < op->nargs && usable; i++) {
        const kt__argdecl *d = &op->args[i];
        if (d->type != KT_TYPE_BUFFER) continue;
        if (d->access == KT_READ_ONLY) {
            c[i].role = KT__ISO_INPUT;
            continue;
        }
        usable = ref->outputs[i] != NULL && ref->out_bytes[i] == tu->ws->args[i].bytes && d->esize <= sizeof c[i].poison;
        c[i].role = KT__ISO_OUTPUT;
        c[i].expected = ref->outputs[i];
        c[i].elem = d->elem;
        kt__tolerances(op, d->elem, &c[i].atol, &c[i].rtol);
        if (d->access == KT_WRITE_ONLY && !d->accumulate) {
            memcpy(c[i].poison, kt__poison(d->elem), d->esize);
            c[i].poison_size = d->esize;
        }
    }
    if (usable && kt__worker_check(w, c, op->nargs) == KT_OK) {
        tu->worker_checks = true;
        for (size_t i = 0; i < tu->d->nunits; i++) tu->trials[i].check = true;
    } else if (usable) {
        kt__log(op->ctx, KT_LOG_INFO, "op '%s': validation runs come back to be compared: %s", op->name, kt_last_error());
    }
    free(c);
}

/* Units measured by an earlier tuning (the persistent cache) are not measured again. */
static void hold_recalled(tuning *tu) {
    kt_decision *d = tu->d;
    for (size_t i = 0; i < d->nunits; i++) {
        if (!tu->acc[i] || !d->units[i].recalled) continue;
        tu->acc[i] = false;
        tu->recalled = true;
        if ((long)i == tu->ref->unit && tu->ref->wrote_input) { /* the reference changed an input: out */
            d->units[i].recalled = false;
            d->units[i].r.outcome = KT_OUTCOME_INVALID;
            kt__unit_message(&d->units[i].r, "%s", tu->ref->message, 0);
        }
    }
}

/* What the workers saw: a unit that failed in one gets its kind, code and message from there. */
static void worker_verdicts(tuning *tu) {
    kt_op *op = tu->op;
    kt_decision *d = tu->d;
    for (size_t i = 0; tu->trials && i < d->nunits; i++) {
        const trial_ctx *t = &tu->trials[i];
        kt__cand_result *r = &d->units[i].r;
        if (t->iso.kind == KT_FAIL_NONE || r->outcome != KT_OUTCOME_FAILED) continue;
        r->outcome = kt__iso_outcome(t->iso.kind);
        r->fail_kind = t->iso.kind;
        r->fail_code = t->iso.code;
        bool said = r->message && strcmp(r->message, t->iso.msg) == 0; /* by tuning_admit, in its validation run */
        free(r->message);
        r->message = strdup(t->iso.msg); /* NULL when out of memory: settle_units says what it can */
        if (!said)
            kt__log(op->ctx, KT_LOG_WARN, "op '%s': candidate '%s'%s%s disqualified in its worker process: %s", op->name,
                    op->cands[d->units[i].cand].name, d->units[i].text ? " " : "", d->units[i].text ? d->units[i].text : "",
                    t->iso.msg);
    }
}

/* Gives failures in this process their kind and a message, logs the units; returns the runs. */
static uint64_t settle_units(tuning *tu) {
    kt_op *op = tu->op;
    kt_decision *d = tu->d;
    uint64_t runs = 0;
    for (size_t i = 0; i < d->nunits; i++) {
        kt__unit *u = &d->units[i];
        runs += u->r.runs;
        if (u->r.outcome == KT_OUTCOME_FAILED && u->r.fail_kind == KT_FAIL_NONE) /* failed in this process */
            u->r.fail_kind = u->fn == kt__launch_fn ? KT_FAIL_LAUNCH : KT_FAIL_RETURNED;
        if (u->r.outcome == KT_OUTCOME_FAILED && u->r.message == NULL) {
            if (tu->trials && tu->trials[i].launch_msg[0]) kt__unit_message(&u->r, "%s", tu->trials[i].launch_msg, 0);
            else kt__unit_message(&u->r, "%sreturned %d while measured", NULL, u->r.fail_code);
            kt__log(op->ctx, KT_LOG_WARN, "op '%s': candidate '%s'%s%s disqualified: %s", op->name, op->cands[u->cand].name,
                    u->text ? " " : "", u->text ? u->text : "", u->r.message ? u->r.message : "");
        } else if (u->r.outcome == KT_OUTCOME_MEASURED) {
            kt__log(op->ctx, KT_LOG_DEBUG, "op '%s': candidate '%s'%s%s %.0f ns (%u runs, %u warm-ups)", op->name,
                    op->cands[u->cand].name, u->text ? " " : "", u->text ? u->text : "", u->r.time_ns, u->r.runs,
                    u->r.warmups);
        }
    }
    return runs;
}

/* Under lazy building a unit whose time the cache recorded is held, never built (it is not run
 * again): the fastest of them that would beat every runnable unit is built now, so that it can
 * win (one that fails to build gives way to the next). Without this a resumed tuning under a
 * budget lost its recorded winner to a slower unit measured today. */
static kt_status build_recalled_best(tuning *tu, long best) {
    kt_decision *d = tu->d;
    if (!tu->recalled || tu->plans == NULL) return KT_OK;
    for (;;) {
        double bar = best >= 0 ? d->units[best].r.time_ns : INFINITY; /* the fastest runnable unit's time */
        long pick = -1;                                                /* the fastest recorded unit not built */
        for (size_t i = 0; i < d->nunits; i++) {
            const kt__unit *u = &d->units[i];
            if (!u->recalled || u->held || !(u->r.time_ns > 0) || u->r.outcome != KT_OUTCOME_NOT_RUN ||
                !kt__key_accepts(tu->op, d->key, u->cand))
                continue;
            if (kt__unit_runnable(u)) bar = fmin(bar, u->r.time_ns);
            else if (kt__unit_planned(tu->plans, i) && (pick < 0 || u->r.time_ns < d->units[pick].r.time_ns)) pick = (long)i;
        }
        if (pick < 0 || d->units[pick].r.time_ns >= bar) return KT_OK;
        size_t unit = (size_t)pick;
        kt_status st = kt__build_some(tu->op, d, tu->plans, &unit, 1, 0);
        if (st != KT_OK || kt__unit_runnable(&d->units[unit])) return st;
        /* it failed to build (or was not built): its plan is gone, so the next is looked at */
    }
}

/* The fastest unit: measured now, or recalled with its recorded time; -1 when none. */
static long fastest(tuning *tu, long best) {
    kt_decision *d = tu->d;
    for (size_t i = 0; tu->recalled && i < d->nunits; i++) {
        kt__unit *u = &d->units[i];
        if (!u->recalled || !kt__unit_runnable(u) || !kt__key_accepts(tu->op, d->key, u->cand)) continue;
        if (u->held) { /* a non-finalist of a re-raced decision (tune/recall.c): kept as recorded, never competes */
            if (u->r.time_ns >= 0) u->r.outcome = KT_OUTCOME_MEASURED;
            continue;
        }
        u->r.outcome = KT_OUTCOME_MEASURED; /* its recorded time competes with today's */
        if (best < 0 || u->r.time_ns < d->units[best].r.time_ns) best = (long)i;
    }
    return best;
}

/* ---- a search over the variant groups ----------------------------------------------------------- */

/* The searched group unit i belongs to, or NULL. */
static group_search *group_of(tuning *tu, size_t i) {
    for (size_t g = 0; g < tu->ngroups; g++)
        if (i >= tu->groups[g].first && i < tu->groups[g].first + tu->groups[g].n) return &tu->groups[g];
    return NULL;
}

/* Sets up a search over each variant group when the op's strategy (auto: for the budget of
 * units) is not exhaustive; otherwise the engine admits units in their order. */
static kt_status set_up_search(tuning *tu) {
    kt_op *op = tu->op;
    kt_decision *d = tu->d;
    const size_t n = d->nunits;
    size_t budget = op->budget.units;
    if (op->budget.fraction > 0) {
        double want = ceil(op->budget.fraction * (double)n);
        size_t part = want >= (double)n ? n : want < 1 ? 1 : (size_t)want;
        if (budget == 0 || part < budget) budget = part;
    }
    tu->budget = budget;
    if (d->rerace) return KT_OK; /* its finalists only: recall.c */
    size_t groups = 0;
    for (size_t c = 0; c < op->ncands; c++) groups += tu->cfgs[c].n > 0;
    if (groups == 0) return KT_OK;
    if ((tu->groups = calloc(groups, sizeof *tu->groups)) == NULL)
        return kt__err(KT_ERR_NO_MEMORY, "%s(op '%s'): out of memory", d->where, op->name);
    for (size_t c = 0, u = 0; c < op->ncands; c++) {
        while (u < n && d->units[u].cand != c) u++;
        if (tu->cfgs[c].n == 0 || u == n) continue;
        const char *strategy = op->strategy[0] ? op->strategy : "auto";
        /* a budget of seconds alone may end long before the space does: auto searches then
         * (as for a budget of units short of the space), never walks the space in order */
        if (strcmp(strategy, "auto") == 0 && budget == 0 && op->budget.seconds > 0 && tu->cfgs[c].n > 1)
            strategy = kt__strategy_auto(tu->cfgs[c].n, 0, tu->cfgs[c].n - 1)->name; /* what it picks short of the space */
        kt_search *s = NULL;
        char where[160];
        snprintf(where, sizeof where, "%s(op '%s'): the search over '%s'", d->where, op->name, op->cands[c].name);
        kt_status st = kt__search_new(op->cands[c].space, &tu->cfgs[c], strategy, op->search_seed, budget ? budget : n, where, &s);
        if (st != KT_OK) return st;
        if (strcmp(kt_search_strategy(s), "exhaustive") == 0) { /* in order: as the engine goes anyway */
            kt_search_destroy(s);
            continue;
        }
        tu->groups[tu->ngroups++] = (group_search){.cand = c, .first = u, .n = tu->cfgs[c].n, .s = s};
        kt__log(op->ctx, KT_LOG_INFO, "op '%s': searching the %zu configurations of '%s' by %s (budget %zu units of %zu)", op->name,
                tu->cfgs[c].n, op->cands[c].name, kt_search_strategy(s), budget ? budget : n, n);
    }
    return KT_OK;
}

static bool budget_left(const tuning *tu) { return tu->budget == 0 || tu->evaluations < tu->budget; }

static size_t propose_units(tuning *tu, size_t *units, size_t max);

/* The engine's next units, within the budget of units: first those outside a search (natives,
 * unsearched groups) in their order, then each search's proposals in turn, built now when they
 * are built lazily. A proposal the tuning can say something of without running it (a limit or
 * requirement rejected it, it failed to build now or in a recorded tuning, the persistent cache
 * knows its time) is told at once; each counts as an evaluation. */
/* Of units (k) just built, those the engine can run (the rest failed to build: told to their
 * search as failures); their count, kept in order at the front. Notes the hand-over time. */
static size_t keep_runnable(tuning *tu, size_t *units, size_t k) {
    size_t kept = 0;
    for (size_t j = 0; j < k; j++) {
        size_t i = units[j];
        if (tu->acc[i]) {
            units[kept++] = i;
            continue;
        }
        group_search *g = group_of(tu, i); /* it failed to build */
        if (g) {
            g->outstanding--;
            kt_search_tell(g->s, i - g->first, INFINITY);
        }
        kt__persist_progress(tu->op, tu->d, i, INFINITY); /* kept even if this tuning never ends */
        if (tu->op->ctx->unit_fn) tu->op->ctx->unit_fn(tu->d, i, tu->op->ctx->unit_user);
    }
    if (kept > 0) {
        tu->handed_s = budget_now(tu);
        tu->handed = kept;
    }
    return kept;
}

/* Whether one more unit may go to the builder under a budget of seconds: what the builds and
 * screenings so far say it would finish by fits in what is left (after the inflight ones,
 * threads at a time, at the median build time; itself at the 90th percentile, since a build
 * cannot be cut short and build times have a long tail); always before the tuning can decide.
 * Times are on the budget clock (budget_now). */
static bool fits_in_budget(const tuning *tu, size_t inflight) {
    const kt_op *op = tu->op;
    if (op->budget.seconds <= 0 || !tu->any_valid) return true;
    double median_s = kt__builder_quantile_ms(tu->builder, 0.5) / 1e3, p90_s = kt__builder_quantile_ms(tu->builder, 0.9) / 1e3;
    double per_unit = tu->screened ? tu->screen_s / (double)tu->screened : 0;
    double left = op->budget.seconds - (budget_now(tu) - tu->start_s);
    /* builds in flight finish threads at a time on the wall clock; a budget clock of the
     * context's own (a replay's) counts each build in full, one after another */
    size_t lanes = op->ctx->budget_clock ? 1 : tu->threads;
    return (double)(inflight / lanes) * median_s + p90_s + (double)(inflight + 1) * per_unit <= left;
}

/* Pipelined: keeps the build threads busy with the search's proposals, and hands the engine
 * units in the order they were proposed, each once its build is done, so that the next
 * configurations compile while the engine measures these. Twice as many units as threads are
 * submitted and not taken at any time (a slow build at the head of the line leaves the threads
 * the others to build), and the search proposes only to refill that window after a unit was
 * taken: what the search is told, and when, depends on nothing but the results, never on which
 * build ends first. A tuning on such a device is as repeatable as one built in batches, and a
 * fleet's (cli/fleet.c), whose builds are jobs on other machines, gives a local replay's T4.
 * Under a budget of wall seconds (no budget clock) units are handed over as their builds end
 * instead: that tuning's outcome depends on timing anyway, and on the H200 the convolution's
 * slow builds (5-8 s against a median of 1-3) held back a dozen built units at a time. */
/* Gives the builder the search's proposals until the window is full (what needs no build waits
 * in tu->direct). */
static kt_status top_up(tuning *tu) {
    kt_status st = KT_OK;
    size_t inflight = kt__builder_pending(tu->builder), window = 2 * tu->threads;
    while (st == KT_OK && inflight < window && tu->ndirect < 48) {
        size_t got[16], want = window - inflight < 16 ? window - inflight : 16;
        while (want > 0 && !fits_in_budget(tu, inflight + want - 1)) want--; /* each unit of the batch must fit */
        if (want == 0) break;
        size_t k = propose_units(tu, got, want);
        if (k == 0) break;
        for (size_t j = 0; j < k && st == KT_OK; j++)
            if (!kt__unit_planned(tu->plans, got[j])) tu->direct[tu->ndirect++] = got[j]; /* built or native */
            else st = kt__builder_submit(tu->builder, &got[j], 1);
        inflight = kt__builder_pending(tu->builder);
    }
    return st;
}

static size_t next_pipelined(tuning *tu, size_t *units, size_t max) {
    for (;;) {
        kt_status st = top_up(tu);
        size_t k = 0;
        if (st == KT_OK && tu->ndirect > 0) { /* what needs no build goes first */
            k = tu->ndirect < max ? tu->ndirect : max;
            memcpy(units, tu->direct, k * sizeof *units);
            memmove(tu->direct, tu->direct + k, (tu->ndirect - k) * sizeof *tu->direct);
            tu->ndirect -= k;
        } else if (st == KT_OK) {
            /* under a budget of wall seconds, time is what counts: units are taken as their
             * builds end (in proposal order, one slow build would hold back every unit built
             * after it, and with them the search's next proposals), and not waited for past
             * the deadline once the tuning can decide */
            k = kt__builder_take(tu->builder, units, max, true, !wall_budget(tu->op), build_deadline(tu), &st);
        }
        /* the threads those freed build the next proposals while the engine measures these */
        if (st == KT_OK && k > 0) st = top_up(tu);
        if (st == KT_OK) st = prepare_built(tu, units, k);
        if (st != KT_OK) {
            tu->next_error = st;
            return 0;
        }
        if (k == 0) return 0; /* nothing building, nothing proposed: the search is over */
        if ((k = keep_runnable(tu, units, k)) > 0) return k;
    }
}

static size_t tuning_next(void *p, size_t *units, size_t max) {
    tuning *tu = p;
    const kt_op *op = tu->op;
    const size_t threads = tu->threads;
    if (tu->handed > 0) { /* the engine screened the last batch meanwhile */
        tu->screen_s += budget_now(tu) - tu->handed_s;
        tu->screened += tu->handed;
        tu->handed = 0;
    }
    if (tu->builder) return next_pipelined(tu, units, max);
    for (;;) {
        /* building lazily: a batch as large as the build threads, so that they all work; under a
         * budget of seconds, no larger than what the batches so far say fits in what is left
         * (nothing more, once the tuning can decide) */
        size_t want = tu->plans && threads < max ? threads : max;
        if (tu->plans && op->budget.seconds > 0 && tu->waves > 0) {
            double left = op->budget.seconds - (budget_now(tu) - tu->start_s), wave = tu->build_s / (double)tu->waves;
            double per_unit = tu->screened ? tu->screen_s / (double)tu->screened : 0;
            while (want > 0 && (double)((want + threads - 1) / threads) * wave + (double)want * per_unit > left) want--;
            if (want == 0 && tu->any_valid) return 0;
            if (want == 0) want = 1;
        }
        size_t k = propose_units(tu, units, want);
        if (k == 0 || tu->plans == NULL) return k;
        double t0 = budget_now(tu);
        kt_status st = build_admitted(tu, units, k);
        tu->build_s += budget_now(tu) - t0;
        tu->waves += (k + threads - 1) / threads;
        if (st != KT_OK) {
            tu->next_error = st;
            return 0;
        }
        if ((k = keep_runnable(tu, units, k)) > 0) return k;
    }
}

/* Units outside a search are admitted in order, unless the tuning stops on disagreement
 * (kt_op_set_disagreement_stop) and walks a whole space ten times larger than that stop's
 * minimum: then in spread order, the counter's bits reversed (units past the end skipped), which
 * visits both halves of the units, then every quarter, and so on. Enumeration varies the last
 * parameter fastest, so in order the first hundred configurations can share the first
 * parameters' values, and a parameter among those that changes what the kernel computes would
 * show (and stop the tuning) only late; spread, it shows among the first. The order of the
 * whole walk is all it changes. */
static void set_spread(tuning *tu) {
    const kt_op *op = tu->op;
    size_t n = tu->d->nunits;
    tu->spread_bits = 0;
    if (op->disagree_min == 0 || !op->validate || tu->budget != 0 || n <= 10 * op->disagree_min) return;
    unsigned bits = 1;
    while (bits < 62 && ((size_t)1 << bits) < n) bits++;
    tu->spread_bits = bits;
}

/* The unit at position k of the walk outside a search: k itself, or its bits reversed. */
static size_t spread_unit(const tuning *tu, size_t k) {
    if (tu->spread_bits == 0) return k;
    size_t r = 0;
    for (unsigned b = 0; b < tu->spread_bits; b++, k >>= 1) r = r << 1 | (k & 1);
    return r;
}

static size_t propose_units(tuning *tu, size_t *units, size_t max) {
    kt_decision *d = tu->d;
    size_t k = 0;
    long r = tu->ref->unit;
    group_search *rg = r >= 0 && !tu->ref_taken ? group_of(tu, (size_t)r) : NULL;
    tu->ref_taken = true;
    if (rg && tu->acc[r] && budget_left(tu) && kt__search_take(rg->s, (size_t)r - rg->first)) {
        units[k++] = (size_t)r; /* the reference ran already: the search's first evaluation */
        tu->evaluations++;
        rg->outstanding++;
        return k;
    }
    size_t walk = tu->spread_bits ? (size_t)1 << tu->spread_bits : d->nunits;
    while (k < max && tu->plain < walk && budget_left(tu)) {
        size_t i = spread_unit(tu, tu->plain++);
        if (i >= d->nunits || !tu->acc[i] || group_of(tu, i) != NULL) continue;
        units[k++] = i;
        tu->evaluations++;
    }
    if (k > 0) return k;
    for (size_t idle = 0; k == 0 && idle < tu->ngroups && budget_left(tu);) {
        group_search *g = &tu->groups[tu->turn++ % tu->ngroups];
        size_t cfg[16], want = max < 16 ? max : 16;
        if (tu->budget && tu->budget - tu->evaluations < want) want = tu->budget - tu->evaluations;
        size_t m = g->done ? 0 : kt_search_propose(g->s, cfg, want);
        if (m == 0) { /* over, unless it waits for what it proposed (building, or measured now) */
            if (g->outstanding == 0) g->done = true;
            idle++;
            continue;
        }
        idle = 0;
        for (size_t j = 0; j < m; j++) {
            size_t i = g->first + cfg[j];
            const kt__unit *u = &d->units[i];
            tu->evaluations++;
            if (tu->acc[i]) {
                units[k++] = i;
                g->outstanding++;
                continue;
            }
            double told = u->recalled && u->r.time_ns > 0 ? u->r.time_ns : INFINITY;
            kt_search_tell(g->s, cfg[j], told);
        }
    }
    return k;
}

static void tuning_told(void *p, size_t i, double ns) {
    tuning *tu = p;
    if (isfinite(ns)) tu->any_valid = true;
    kt__persist_progress(tu->op, tu->d, i, ns); /* kept even if this tuning never ends */
    if (tu->op->ctx->unit_fn) tu->op->ctx->unit_fn(tu->d, i, tu->op->ctx->unit_user);
    group_search *g = group_of(tu, i);
    if (g) {
        g->outstanding -= g->outstanding > 0;
        kt_search_tell(g->s, i - g->first, ns);
    }
}

static void free_search(tuning *tu) {
    for (size_t g = 0; g < tu->ngroups; g++) kt_search_destroy(tu->groups[g].s);
    free(tu->groups);
    for (size_t c = 0; tu->cfgs && c < tu->op->ncands; c++) kt__configs_free(&tu->cfgs[c]);
    free(tu->cfgs);
    kt__plans_free(tu->plans);
}

kt_status kt__measure_all(kt_op *op, kt_decision *d, const kt_arg *caller, bool launching, bool generated) {
    atomic_store(&op->stop_asked, false); /* a stop asked of an earlier tuning is not this one's */
    const kt__measure_cfg cfg = op->ctx->measure;
    kt_inputs inputs = generated                                       ? KT_INPUTS_GENERATED
                       : (!launching && op->inputs == KT_INPUTS_PROTECT) ? KT_INPUTS_CLONE
                                                                        : op->inputs;
    kt__workset ws;
    kt__reference ref = {.unit = -1};
    tuning tu = {.op = op, .d = d, .ws = &ws, .ref = &ref};
    kt__engine_io io = {&tu, tuning_admit, tuning_result, tuning_trial, op->ctx->progress_fn ? tuning_progress : NULL, NULL, NULL,
                        op->ctx->budget_clock, op->ctx->budget_clock_user, kt__clock_s(op->ctx->budget_clock, op->ctx->budget_clock_user), NULL};
    tu.start_s = io.start_s;
    kt__engine_out out = {.best = -1};
    /* set up -> workers -> reference -> measure -> verdicts -> restore the caller's buffers */
    kt_status st = set_up(&tu, caller, inputs, launching);
    if (st == KT_OK && tu.natives) st = start_natives_worker(&tu);
    if (st == KT_OK && tu.isolated) st = start_device_worker(&tu);
    if (st == KT_OK && tu.plans) st = build_reference(&tu);
    if (st == KT_OK) st = run_reference(&tu);
    if (st == KT_OK) worker_checks(&tu);
    if (st == KT_OK) hold_recalled(&tu);
    d->validated = ref.active;
    d->ref_unit1 = ref.active && ref.unit >= 0 ? (size_t)ref.unit + 1 : 0;
    d->ref_agree = ref.active ? ref.agree : 0;
    d->ref_among = ref.active ? ref.among : 0;
    if (st == KT_OK) st = set_up_search(&tu);
    if (st == KT_OK) set_spread(&tu);
    if (st == KT_OK && (tu.ngroups > 0 || tu.plans || tu.spread_bits)) io.next = tuning_next; /* spread: the walk is tuning_next's */
    io.told = tuning_told; /* every unit is recorded as it comes */
    io.stopped = tuning_stopped; /* by the disagreement stop, or by the caller (kt_op_stop_disagreement) */
    tu.threads = kt_context_compile_threads(op->ctx);
    /* building lazily for a device whose kernels run apart from the host's processors: the next
     * proposals compile while the engine measures (compiling beside a host kernel would slow it) */
    const kt_backend *ob;
    void *ostate;
    size_t olocal;
    kt__op_backend(op, &ob, &ostate, &olocal, NULL);
    bool beside = tu.plans && (kt__backend_caps(ob) & KT_BACKEND_CAP_OWN_PROCESSOR);
    /* building beside measuring, with the number of threads left to kerntune: a quarter of the
     * processors stay with the measuring thread and its worker process */
    if (beside && op->ctx->artifacts.threads == 0) tu.threads -= tu.threads / 4;
    if (st == KT_OK && beside) st = kt__builder_start(op, d, tu.plans, tu.threads, wall_budget(op), true, &tu.builder);
    /* under a budget of wall seconds the build threads are the tuning's pace: while one walk of a
     * local search waits for its neighbours' builds, another may keep idle threads building (a
     * walk per two threads at most; one walk keeps a tuning repeatable when time does not count) */
    for (size_t g = 0; st == KT_OK && tu.builder && wall_budget(op) && g < tu.ngroups; g++)
        kt__search_set_walkers(tu.groups[g].s, tu.threads / 2);
    if (st == KT_OK) st = kt__engine_run(&cfg, &op->budget, &io, tu.acc, d->nunits, &out);
    /* builds running finish (under a budget of wall seconds, without the tuning waiting for
     * them); the rest never start */
    kt__builder_stop(tu.builder, wall_budget(op));
    tu.builder = NULL;
    d->build_threads = tu.threads; /* the builder's, or the batches' (kt__build_some: the context's) */
    if (st == KT_OK) st = tu.next_error;
    if (st == KT_OK && !tu.stopped && !atomic_load(&op->stop_asked)) st = build_recalled_best(&tu, out.best);
    if (st == KT_OK && tu.stopped)
        st = kt__err(KT_ERR_DISAGREEMENT, "%s(op '%s'): %zu of the first %zu units compared with the reference disagreed with it: "
                     "tuning stopped, nothing decided (kt_op_set_disagreement_stop)", d->where, op->name, tu.disagreed, tu.compared);
    else if (st == KT_OK && atomic_load(&op->stop_asked))
        st = kt__err(KT_ERR_DISAGREEMENT, "%s(op '%s'): its caller found most units disagreeing with the reference: tuning stopped, "
                     "nothing decided (kt_op_stop_disagreement)", d->where, op->name);
    worker_verdicts(&tu);
    if (tu.iso_locked) pthread_mutex_unlock(&op->ctx->iso_lock);
    kt__worker_free(tu.native_worker);
    uint64_t runs = settle_units(&tu);
    kt__work_eval(op, d, caller); /* before the caller's buffers are restored: their sizes are the call's */
    if (launching && ws.op != NULL) st = kt__workset_finish(&ws, caller, st);
    if (ws.op != NULL) {
        kt__reference_free(&ref, &ws);
        d->peak_extra = ws.peak;
        kt__workset_free(&ws);
    }
    free(tu.refreshed);
    free(tu.host_flush);
    free(tu.trials);
    free(tu.acc);
    free_search(&tu);
    atomic_fetch_add(&op->measured_runs, runs);
    d->policy = cfg.policy;
    d->confidence = out.confidence;
    d->total_runs = out.runs;
    d->measure_ns = out.measure_ns;
    if (st != KT_OK) return st;
    atomic_fetch_add(&op->tune_count, 1);
    long best = fastest(&tu, out.best);
    if (best < 0) return all_failed(op, d);
    d->winner_unit = (size_t)best;
    d->winner = d->units[best].cand;
    d->source = KT_SOURCE_MEASURED;
    kt__log(op->ctx, KT_LOG_INFO,
            "op '%s': tuned a new key in %llu runs (%s); winner '%s'%s%s (%.0f ns, confidence %.3f)%s", op->name,
            (unsigned long long)out.runs, kt_policy_name(cfg.policy), op->cands[d->winner].name,
            d->units[best].text ? " " : "", d->units[best].text ? d->units[best].text : "", d->units[best].r.time_ns,
            out.confidence, d->validated ? "" : ", not validated");
    return KT_OK;
}
