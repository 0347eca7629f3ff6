/*
 * measure.c - deciding a key by measurement. Works on a workset (workset.c): the arguments
 * every tuning run uses, with the caller's ReadWrite buffers restored before each run (or
 * clones, or generated inputs). The reference runs first; each other candidate's first run is
 * its validation run; then the engine (engine.c) measures it. Units run in the caller's
 * process, or in a runner process (src/isolate/) when the op or their backend asks.
 */
#include "tune/tuning.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

/* A budget of seconds on the wall clock (no budget clock of the context's): a tuning under it
 * takes units as they are built and does not wait past its deadline for builds. */
bool kt__wall_budget(const kt_op *op) { return op->budget.seconds > 0 && !op->ctx->budget_clock; }

/* Until when (kt__now_s) the tuning waits for a build: under a wall budget, once it can decide,
 * its deadline; 0 (no limit) otherwise. */
double kt__build_deadline(const tuning *tu) {
    return kt__wall_budget(tu->op) && tu->any_valid ? tu->start_s + tu->op->budget.seconds : 0;
}

/* Now on the clock the op's budget of seconds counts on. */
double kt__budget_now(const tuning *tu) { return kt__clock_s(tu->op->ctx->budget_clock, tu->op->ctx->budget_clock_user); }

static kt_status tuning_admit(void *p, size_t i, bool *usable, unsigned *runs) {
    tuning *tu = p;
    kt_op *op = tu->op;
    kt__unit *u = &tu->d->units[i];
    trial_ctx *t = &tu->trials[i];
    t->evict = t->flush == FLUSH_HOST && tu->ws->host && kt__evict_supported();
    if (t->flush == FLUSH_HOST && !t->evict && tu->host_flush == NULL) {
        tu->host_flush_len = kt__host_llc_bytes();
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
        if ((long)i != tu->ref->unit) st = kt__validation_run(t, tu->ref, &u->r);
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
    *out = (kt__trial){kt__trial_before, kt__trial_run, kt__trial_after, kt__trial_device_ns, &((tuning *)p)->trials[i]};
}

static void tuning_progress(void *p, size_t done, size_t total, size_t valid, size_t failed, double best_ns) {
    const tuning *tu = p;
    const kt_context *ctx = tu->op->ctx;
    /* under a budget of units, what the tuning will try: the budget (the rest is never run) */
    if (tu->budget > 0 && tu->budget < total) total = tu->budget;
    if (done > total) done = total;
    ctx->progress_fn(done, total, valid, failed, best_ns, ctx->progress_user);
}

/* Whether a unit runs in a runner process while tuning: compiled variants when the op says
 * so, and by default those of a backend whose faults poison its device context (CUDA's). The
 * runner setup may still refuse (a backend without KT_BACKEND_CAP_RUNNER): they then run here. */
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

/* Why a native of an op that asks for isolation (KT_ISOLATE_ON) cannot run in a runner
 * process for this tuning, or NULL when it may (its code may still not be found there:
 * kt__runner_add_native says). */
static const char *native_stays(const kt__workset *ws, const kt__unit *u) {
    if (u->rfn != NULL) return "it returns its output (kt_op_add_native_result), which cannot cross processes";
    if (u->fn == kt__queued_fn) return "it enqueues on this process's device queue (kt_op_add_native_queued)";
    if (!ws->host) return "its arguments are in device memory, which a runner process cannot reach";
    return NULL;
}

static kt_status iso_to_host(void *ws, void *dst, const void *buf, size_t n) { return kt__workset_to_host(ws, dst, buf, n); }
static kt_status iso_from_host(void *ws, void *buf, const void *src, size_t n) { return kt__workset_from_host(ws, buf, src, n); }

/* What a runner needs of the workset: the work arguments, which of them the tuning rewrites
 * before every run (ReadWrite restored, accumulating outputs refilled), and copies. */
static kt__iso_args iso_args(const kt_op *op, kt__workset *ws, bool *refreshed) {
    for (size_t i = 0; i < op->nargs; i++)
        refreshed[i] = op->args[i].access == KT_READ_WRITE || (op->args[i].access == KT_WRITE_ONLY && op->args[i].accumulate);
    /* restored from its pristine copy, or filled with the accumulator's start, before every run:
     * the same bytes each time, unless a pre-hook may change them */
    return (kt__iso_args){.args = ws->args, .nargs = op->nargs, .refreshed = refreshed, .same = op->pre_hook == NULL,
                          .to_host = iso_to_host, .from_host = iso_from_host, .user = ws};
}

/* The reference's run, through its trial (so in its runner when isolated). */
static int tuning_run_unit(void *p, size_t i, const kt_arg *args, kt_result *res) {
    tuning *tu = p;
    const kt__unit *u = &tu->d->units[i];
    if (tu->trials[i].runner) {
        tu->trials[i].full = true;
        int rc = kt__trial_run(&tu->trials[i], args);
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
 * some run in runners. */
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
        tu->trials[i] = (trial_ctx){.op = op, .ws = tu->ws, .unit = &d->units[i], .device_ns = -1, .flush = kt__flush_kind(op, &d->units[i])};
        tu->isolated = tu->isolated || (tu->acc[i] && isolate(op, &d->units[i]));
        tu->natives = tu->natives || (tu->acc[i] && d->units[i].text == NULL && op->isolation == KT_ISOLATE_ON);
    }
    if (st == KT_OK && (tu->isolated || tu->natives) && (tu->refreshed = calloc(op->nargs ? op->nargs : 1, sizeof *tu->refreshed)) == NULL)
        st = kt__err(KT_ERR_NO_MEMORY, "%s(op '%s'): out of memory", d->where, op->name);
    return st;
}

/* Starts the runner of this tuning's natives with those that can run there; the others run
 * here, with an info line saying why. */
static kt_status start_natives_runner(tuning *tu) {
    kt_op *op = tu->op;
    kt_decision *d = tu->d;
    kt_status st = KT_OK;
    bool added = false;
    for (size_t i = 0; st == KT_OK && i < d->nunits; i++) {
        kt__unit *u = &d->units[i];
        if (!tu->acc[i] || u->text != NULL) continue;
        char why[512];
        const char *stays = native_stays(tu->ws, u);
        if (stays == NULL && tu->native_runner == NULL) { /* the first that may: the runner's setup */
            kt__iso_args io = iso_args(op, tu->ws, tu->refreshed);
            if ((st = kt__runner_setup_natives(&tu->native_runner, &io)) != KT_OK) break;
        }
        if (stays == NULL && kt__runner_add_native(tu->native_runner, u->fn, u->user, &tu->trials[i].runner_id, why, sizeof why)) {
            tu->trials[i].runner = tu->native_runner;
            added = true;
        } else {
            kt__log(op->ctx, KT_LOG_INFO, "op '%s': native '%s' runs in this process, not in a runner: %s", op->name,
                    op->cands[u->cand].name, stays ? stays : why);
        }
    }
    if (st == KT_OK && added) st = kt__runner_ready(tu->native_runner);
    return st == KT_OK ? KT_OK : kt__err(st, "%s(op '%s'): %s", d->where, op->name, kt_last_error());
}

/* Loads unit i into the runner, its wall time counted as the unit's framework time. */
static kt_status load_in_runner(tuning *tu, kt__runner *runner, size_t i) {
    kt__unit *u = &tu->d->units[i];
    double t0 = kt__now_s();
    tu->trials[i].runner = runner;
    kt_status st = kt__runner_add(runner, u->artifact, tu->op->cands[u->cand].kernel, &u->launch.geometry, &tu->trials[i].runner_id);
    u->r.framework_ns += (kt__now_s() - t0) * 1e9;
    return st;
}

/* Readies the device's runner (kept by the context, held for the whole tuning) and loads the
 * isolated variants into it; a backend that cannot run in a runner keeps them here. */
static kt_status start_device_runner(tuning *tu) {
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
    kt_status st = kt__runner_setup_backend(&op->ctx->runners[op->device], b, fp, &io);
    if (st == KT_ERR_NOT_FOUND) { /* this backend's variants cannot run in a runner: here, then */
        kt__log(op->ctx, KT_LOG_INFO, "op '%s': variants run in this process, not in a runner: %s", op->name, kt_last_error());
        tu->isolated = false;
        return KT_OK;
    }
    kt__runner *runner = op->ctx->runners[op->device];
    if (st == KT_OK) st = kt__runner_ready(runner);
    if (st != KT_OK) return kt__err(st, "%s(op '%s'): %s", d->where, op->name, kt_last_error());
    for (size_t i = 0; st == KT_OK && i < d->nunits; i++) {
        if (!tu->acc[i] || !isolate(op, &d->units[i]) || d->units[i].artifact == NULL) continue; /* or when built */
        st = load_in_runner(tu, runner, i);
    }
    return st;
}

/* After units (n) were built: those that failed are out, those that run in the device's runner
 * are loaded there. */
kt_status kt__prepare_built(tuning *tu, const size_t *units, size_t n) {
    kt_op *op = tu->op;
    kt_decision *d = tu->d;
    kt_status st = KT_OK;
    for (size_t j = 0; st == KT_OK && j < n; j++) {
        size_t i = units[j];
        kt__unit *u = &d->units[i];
        if (!tu->acc[i] || tu->trials[i].runner != NULL) continue;
        if (!kt__unit_runnable(u)) {
            tu->acc[i] = false; /* BUILD_FAILED */
            continue;
        }
        tu->trials[i].flush = kt__flush_kind(op, u); /* its backend is known once built */
        if (!tu->isolated || !isolate(op, u)) continue;
        st = load_in_runner(tu, op->ctx->runners[op->device], i);
        if (st != KT_OK) st = kt__err(st, "%s(op '%s'): %s", d->where, op->name, kt_last_error());
    }
    return st;
}

/* Builds those of units (n) still to build, now, and prepares them (kt__prepare_built). Under a
 * budget of wall seconds, once the tuning can decide, no build is waited for past its deadline. */
kt_status kt__build_admitted(tuning *tu, const size_t *units, size_t n) {
    kt_status st = kt__build_some(tu->op, tu->d, tu->plans, units, n, kt__build_deadline(tu));
    return st == KT_OK ? kt__prepare_built(tu, units, n) : st;
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
        st = kt__build_admitted(tu, &i, 1);
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

/* Lets the device's runner check validation runs on its device (isolate.h: kt__runner_check),
 * so that a validation run that passes sends nothing back: every output compared there with the
 * reference's, every ReadOnly input's digest with its pristine one, WriteOnly outputs poisoned
 * there first. Not with a pre-hook (it may substitute buffers the runner does not have) or a
 * verify function (it runs here, on the outputs themselves); a
 * runner that cannot (a host backend, no device checks) leaves validation runs in full. */
static void runner_checks(tuning *tu) {
    kt_op *op = tu->op;
    const kt__reference *ref = tu->ref;
    kt__runner *w = tu->isolated ? op->ctx->runners[op->device] : NULL;
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
    if (usable && kt__runner_check(w, c, op->nargs) == KT_OK) {
        tu->runner_checks = true;
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

/* What the runners saw: a unit that failed in one gets its kind, code and message from there. */
static void runner_verdicts(tuning *tu) {
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
            kt__log(op->ctx, KT_LOG_WARN, "op '%s': candidate '%s'%s%s disqualified in its runner process: %s", op->name,
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
 * again): the kt__fastest of them that would beat every runnable unit is built now, so that it can
 * win (one that fails to build gives way to the next). Without this a resumed tuning under a
 * budget lost its recorded winner to a slower unit measured today. */
static kt_status build_recalled_best(tuning *tu, long best) {
    kt_decision *d = tu->d;
    if (!tu->recalled || tu->plans == NULL) return KT_OK;
    for (;;) {
        double bar = best >= 0 ? d->units[best].r.time_ns : INFINITY; /* the kt__fastest runnable unit's time */
        long pick = -1;                                                /* the kt__fastest recorded unit not built */
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

/* The kt__fastest unit: measured now, or recalled with its recorded time; -1 when none. */
long kt__fastest(tuning *tu, long best) {
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
    /* set up -> runners -> reference -> measure -> verdicts -> restore the caller's buffers */
    kt_status st = set_up(&tu, caller, inputs, launching);
    if (st == KT_OK && tu.natives) st = start_natives_runner(&tu);
    if (st == KT_OK && tu.isolated) st = start_device_runner(&tu);
    if (st == KT_OK && tu.plans) st = build_reference(&tu);
    if (st == KT_OK) st = run_reference(&tu);
    if (st == KT_OK) runner_checks(&tu);
    if (st == KT_OK) hold_recalled(&tu);
    d->validated = ref.active;
    d->ref_unit1 = ref.active && ref.unit >= 0 ? (size_t)ref.unit + 1 : 0;
    d->ref_agree = ref.active ? ref.agree : 0;
    d->ref_among = ref.active ? ref.among : 0;
    if (st == KT_OK) st = kt__set_up_search(&tu);
    if (st == KT_OK) kt__set_spread(&tu);
    if (st == KT_OK && (tu.ngroups > 0 || tu.plans || tu.spread_bits)) io.next = kt__tuning_next; /* spread: the walk is kt__tuning_next's */
    io.told = kt__tuning_told; /* every unit is recorded as it comes */
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
     * processors stay with the measuring thread and its runner process */
    if (beside && op->ctx->artifacts.threads == 0) tu.threads -= tu.threads / 4;
    if (st == KT_OK && beside) st = kt__builder_start(op, d, tu.plans, tu.threads, kt__wall_budget(op), true, &tu.builder);
    /* under a budget of wall seconds the build threads are the tuning's pace: while one walk of a
     * local search waits for its neighbours' builds, another may keep idle threads building (a
     * walk per two threads at most; one walk keeps a tuning repeatable when time does not count) */
    for (size_t g = 0; st == KT_OK && tu.builder && kt__wall_budget(op) && g < tu.ngroups; g++)
        kt__search_set_walkers(tu.groups[g].s, tu.threads / 2);
    if (st == KT_OK) st = kt__engine_run(&cfg, &op->budget, &io, tu.acc, d->nunits, &out);
    /* builds running finish (under a budget of wall seconds, without the tuning waiting for
     * them); the rest never start */
    kt__builder_stop(tu.builder, kt__wall_budget(op));
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
    runner_verdicts(&tu);
    if (tu.iso_locked) pthread_mutex_unlock(&op->ctx->iso_lock);
    kt__runner_free(tu.native_runner);
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
    kt__free_search(&tu);
    atomic_fetch_add(&op->measured_runs, runs);
    d->policy = cfg.policy;
    d->confidence = out.confidence;
    d->total_runs = out.runs;
    d->measure_ns = out.measure_ns;
    if (st != KT_OK) return st;
    atomic_fetch_add(&op->tune_count, 1);
    long best = kt__fastest(&tu, out.best);
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
