/*
 * trial.c - one run of a unit in a tuning: its arguments made ready (restored, generated,
 * poisoned), the cache flushed as the unit's backend or the host can (evicting the run's
 * buffers, else writing a buffer as large as the last-level cache), the run timed by the
 * device's events or the host's clock, in this process or its runner; and a unit's validation
 * run against the reference.
 */
#include "tune/tuning.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- measuring one unit ---------------------------------------------------------------------- */

int kt__flush_kind(const kt_op *op, const kt__unit *u) {
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
size_t kt__host_llc_bytes(void) {
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

kt_status kt__trial_before(void *p, const kt_arg **args) {
    trial_ctx *t = p;
    kt_status st = kt__workset_before(t->ws, false, args);
    /* an isolated device variant is flushed by its runner, on the runner's context; an isolated
     * host run's buffers are evicted once they are copied into the runner's region */
    if (st == KT_OK && t->flush != FLUSH_NONE && !(t->runner && (t->flush == FLUSH_DEVICE || t->evict))) st = trial_flush(t, *args);
    return st;
}

int kt__trial_run(void *p, const kt_arg *args) {
    trial_ctx *t = p;
    const kt__unit *u = t->unit;
    t->device_ns = -1;
    if (t->runner) { /* in the runner process */
        kt__iso_run run;
        unsigned flush = (t->flush == FLUSH_DEVICE ? KT__WORKER_FLUSH_DEVICE : 0) | (t->evict ? KT__WORKER_EVICT : 0);
        if (kt__runner_run(t->runner, t->runner_id, args, flush, t->full, t->full && t->check, t->op->timeout_s, &run)) {
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
    int rc = u->fn(args, t->op->nargs, u->user);
    if (rc == 0 && u->launch.backend != NULL) /* a host variant's own account of its time (Kernel Tuner's C contract) */
        t->device_ns = kt__backend_reported_ns(u->launch.backend, u->launch.bstate, u->launch.module);
    else if (rc != 0 && u->launch.backend != NULL && !kt__rc_reported(u->fn, rc)) /* and why it failed, if it says */
        kt__backend_run_failure(u->launch.backend, u->launch.bstate, u->launch.module, rc, t->launch_msg, sizeof t->launch_msg);
    return rc;
}

double kt__trial_device_ns(void *p) { return ((trial_ctx *)p)->device_ns; }

kt_status kt__trial_after(void *p) {
    trial_ctx *t = p;
    kt_result_release(&t->result); /* outputs of tuning runs never reach the caller */
    kt_status st = kt__workset_after(t->ws);
    if (st == KT_OK && t->iso.infra) /* the isolation failed, not the candidate */
        st = kt__err(KT_ERR_BACKEND, "%s(op '%s'): %s", t->ws->where, t->op->name, t->iso.msg);
    return st;
}

/* The validation run of a unit: poisoned outputs, then a comparison with the reference before
 * the post-hook. Sets the outcome to FAILED or INVALID when it does not pass. */
kt_status kt__validation_run(trial_ctx *t, const kt__reference *ref, kt__cand_result *r) {
    const kt_arg *args = NULL;
    kt_status st = kt__workset_before(t->ws, true, &args);
    if (st != KT_OK) return st;
    t->result = (kt_result){0};
    t->full = true;
    t->checked = false;
    t->wrote_input = -1;
    int rc = kt__trial_run(t, args);
    t->full = false;
    char msg[KT__ERRBUF] = ""; /* a comparison's diagnostic: an element and two values */
    bool reported = kt__rc_reported(t->unit->fn, rc);
    char *why = reported ? kt__error_save() : NULL;
    /* a run its runner checked and vouched for sent nothing back: there is nothing to compare here */
    if (rc == 0 && t->wrote_input >= 0)
        snprintf(msg, sizeof msg, "wrote into read-only argument '%s'", t->op->args[t->wrote_input].name);
    bool valid = rc != 0 || t->checked || (t->wrote_input < 0 && kt__validate(ref, t->ws, args, &t->result, msg, sizeof msg));
    st = kt__trial_after(t);
    if (reported) {
        r->outcome = KT_OUTCOME_FAILED;
        r->fail_code = rc;
        kt__unit_message(r, "%s", why ? why : "out of memory", 0);
    } else if (rc != 0) {
        r->outcome = KT_OUTCOME_FAILED;
        r->fail_code = rc;
        if (t->iso.kind != KT_FAIL_NONE) kt__unit_message(r, "%s", t->iso.msg, 0); /* in its runner: how it failed there */
        else if (t->launch_msg[0]) kt__unit_message(r, "%s", t->launch_msg, 0); /* its launch, here */
        else kt__unit_message(r, "%sreturned %d in its validation run", NULL, rc);
    } else if (!valid) {
        r->outcome = KT_OUTCOME_INVALID;
        kt__unit_message(r, "%s", msg, 0);
    }
    free(why);
    return st;
}

