/*
 * launch.c - how a unit launches: a device variant through its backend (waited for, or enqueued
 * on the caller's queue), its global sizes computed from the call's own arguments where the
 * group's space reads them (compiled programs first, the interpreter when they cannot say),
 * a group's launch parameters appended; a native device candidate's work on a queue, waited for
 * or timed by the queue's events; waiting for the work already on a queue. The hit path's.
 */
#include "op/launch.h"

#include "backends/backends.h"
#include "space/space.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

kt__value kt__arg_input(const kt__argdecl *d, const kt_arg *a) {
    if (d->type == KT_TYPE_BUFFER) return (kt__value){.t = KT_V_INT, .i = (int64_t)(a->bytes / d->esize)};
    if (d->type == KT_TYPE_F32) return (kt__value){.t = KT_V_FLOAT, .f = a->f32};
    if (d->type == KT_TYPE_F64) return (kt__value){.t = KT_V_FLOAT, .f = a->f64};
    if (d->type >= KT_TYPE_U8 && d->type <= KT_TYPE_U64) return (kt__value){.t = KT_V_INT, .i = (int64_t)a->u};
    return (kt__value){.t = KT_V_INT, .i = a->i};
}

/* The global sizes a call computes from its own arguments (see key_fixed_inputs in op.c): the
 * planned slots with this call's inputs in place, on the stack; evaluating a size allocates
 * nothing unless its expression builds a list or a string. */
KT__COLD static kt_status call_sizes(const kt__launch *l, const kt_arg *args, kt_launch_geometry *g) {
    const kt__cand *c = l->cand;
    const kt_space *sp = c->space;
    size_t n = kt__space_slot_count(sp);
    kt__value slots[KT__CALL_SLOTS_MAX];
    memcpy(slots, l->slots, n * sizeof *slots);
    for (size_t i = 0; i < kt__space_input_count(sp); i++) {
        long a = c->input_arg[i];
        if (a >= 0) slots[kt__space_input_slot(sp, i)] = kt__arg_input(&l->op->args[a], &args[a]);
    }
    kt__arena arena = {0};
    kt_status st = KT_OK;
    for (int d = 0; d < 3 && st == KT_OK; d++)
        if (c->call_dims & (1u << d)) st = kt__space_global(sp, d, slots, &arena, &g->global[d]);
    kt__arena_free(&arena);
    return st;
}

/* Those global sizes through their compiled programs: false when a program cannot say (an
 * overflow, a division by zero, a negative size), and the interpreter must. */
KT__HOT static bool compiled_sizes(const kt__launch *l, const kt_arg *args, kt_launch_geometry *g) {
    const kt__call_sizes *cs = l->sizes;
    int64_t in[KT__CALL_INPUTS_MAX];
    for (size_t i = 0; i < cs->ninputs; i++) {
        const kt_arg *a = &args[cs->arg[i]];
        in[i] = cs->shift[i] < 0 ? a->i : (int64_t)(a->bytes >> cs->shift[i]);
    }
    for (int d = 0; d < 3; d++)
        if ((l->call_dims & (1u << d)) && !kt__iprog_run(&cs->prog[d], in, &g->global[d])) return false;
    return true;
}

/* The launch geometry of a call: as planned, with the global sizes that read arguments
 * computed from this call's own. On a failure describes it and returns false. */
KT__HOT static bool geometry_of(const kt__launch *l, const kt_arg *args, kt_launch_geometry *g) {
    *g = l->geometry;
    if (KT__LIKELY(l->sizes != NULL) && compiled_sizes(l, args, g)) return true;
    if (l->slots != NULL && call_sizes(l, args, g) != KT_OK) {
        kt__err(KT_ERR_INVALID_ARGUMENT, "op '%s': candidate '%s': the launch size for these arguments: %s",
                l->op->name, l->cand->name, kt_last_error());
        return false;
    }
    return true;
}

/* Describes a backend's failure around unit l and returns KT__RC_REPORTED. */
KT__COLD static int reported(const kt__launch *l, kt_status st, const char *err) {
    kt__err(st, "op '%s': candidate '%s': %s", l->op->name, l->cand->name, err);
    return KT__RC_REPORTED;
}

/* Waits for the device's default queue after l's launch on it. */
static int wait_default(const kt__launch *l) {
    char err[256];
    kt_status st = l->backend->queue_wait(l->bstate, l->device, NULL, err, sizeof err);
    return st == KT_OK ? 0 : reported(l, st, err);
}

/* Enqueues l (a variant, or a native device candidate) on the device's default queue and waits
 * for that queue: for CUDA the default stream, which orders it after the work of the caller's
 * other blocking streams as kt_op_call always did. */
static int enqueue_and_wait(const kt__launch *l, const kt_arg *args, size_t nargs) {
    int rc = kt__launch_async(l, args, nargs, NULL);
    return rc != 0 ? rc : wait_default(l);
}

/* ---- launch parameters (kt_op_add_launch_param) ---------------------------------------------- */

/* A launch's arguments: the call's, then the group's launch parameters computed from them. */
typedef struct lp_frame {
    kt_arg args[KT__LPARAM_ARGS_MAX + KT__LPARAMS_MAX];
    _Alignas(64) unsigned char bytes[KT__LPARAM_BYTES_MAX];
} lp_frame;

/* Fills f for l's launch on args; on a refusal says why in err and returns false. */
static bool lp_fill(const kt__launch *l, const kt_arg *args, size_t nargs, lp_frame *f, char *err, size_t errlen) {
    const kt__cand *c = l->cand;
    if (nargs > KT__LPARAM_ARGS_MAX) { /* kt_op_add_launch_param keeps the op below it */
        snprintf(err, errlen, "%zu arguments with launch parameters", nargs);
        return false;
    }
    memcpy(f->args, args, nargs * sizeof *args);
    for (size_t i = 0; i < c->nlparams; i++) {
        const kt__lparam *p = &c->lparams[i];
        unsigned char *out = f->bytes + p->offset;
        memset(out, 0, p->bytes);
        int rc = p->fn(args, nargs, out, p->user);
        if (rc != 0) {
            snprintf(err, errlen, "launch parameter %zu refused these arguments (it returned %d)", i, rc);
            return false;
        }
        f->args[nargs + i] = (kt_arg){.type = KT_TYPE_BYTES, .ptr = out, .bytes = p->bytes};
    }
    return true;
}

/* The backend's launch of l with geometry g, waited for, timed into *ns unless ns is NULL: with
 * its launch parameters appended to args when it has them. */
static kt_status launch_with(const kt__launch *l, const kt_launch_geometry *g, const kt_arg *args, size_t nargs, double *ns,
                             char *err, size_t errlen) {
    if (!l->lparams) return l->backend->launch(l->bstate, l->device, l->module, g, args, nargs, ns, err, errlen);
    lp_frame f;
    if (!lp_fill(l, args, nargs, &f, err, errlen)) return KT_ERR_INVALID_ARGUMENT;
    return l->backend->launch(l->bstate, l->device, l->module, g, f.args, nargs + l->cand->nlparams, ns, err, errlen);
}

kt_status kt__launch_timed(const kt__launch *l, const kt_arg *args, size_t nargs, double *ns, char *err, size_t errlen) {
    return launch_with(l, &l->geometry, args, nargs, ns, err, errlen); /* tuning's arguments: the planned geometry */
}

/* Launches l on args and waits for it (kt__launch_async enqueues without waiting); a backend
 * that enqueues does it on the default queue, its own queue being left to tuning's timed runs.
 * On a failure describes it and returns KT__RC_REPORTED. */
int kt__launch_fn(const kt_arg *args, size_t nargs, void *user) {
    const kt__launch *l = user;
    if (l->async) return enqueue_and_wait(l, args, nargs);
    char err[256];
    kt_launch_geometry g;
    if (!geometry_of(l, args, &g)) return KT__RC_REPORTED;
    kt_status st = launch_with(l, &g, args, nargs, NULL, err, sizeof err);
    return st == KT_OK ? 0 : reported(l, st, err);
}

/* The queue a native device candidate gets: the caller's, or the handle of the device's default
 * (never NULL where NULL is not a queue). */
static void *native_queue(const kt__launch *l, void *queue) {
    return queue != NULL ? queue : l->backend->queue_default(l->bstate, l->device);
}

/* kt__launch_async for a group with launch parameters: the hit of a kernel that takes them. */
static int launch_async_lparams(const kt__launch *l, const kt_arg *args, size_t nargs, const kt_launch_geometry *g, void *queue) {
    lp_frame f;
    char err[256];
    if (!lp_fill(l, args, nargs, &f, err, sizeof err)) return reported(l, KT_ERR_INVALID_ARGUMENT, err);
    kt_status st = l->backend->launch_async(l->bstate, l->device, l->module, g, f.args, nargs + l->cand->nlparams, queue, err, sizeof err);
    return st == KT_OK ? 0 : reported(l, st, err);
}

KT__HOT int kt__launch_async(const kt__launch *l, const kt_arg *args, size_t nargs, void *queue) {
    if (l->qfn != NULL) return l->qfn(args, nargs, native_queue(l, queue), l->quser);
    char err[256];
    kt_launch_geometry g;
    if (!geometry_of(l, args, &g)) return KT__RC_REPORTED;
    if (KT__UNLIKELY(l->lparams)) return launch_async_lparams(l, args, nargs, &g, queue);
    kt_status st = l->backend->launch_async(l->bstate, l->device, l->module, &g, args, nargs, queue, err, sizeof err);
    return KT__LIKELY(st == KT_OK) ? 0 : reported(l, st, err);
}

/* ---- native device candidates ---------------------------------------------------------------- */

int kt__queued_fn(const kt_arg *args, size_t nargs, void *user) { return enqueue_and_wait(user, args, nargs); }

typedef struct queued_call {
    const kt__launch *l;
    const kt_arg *args;
    size_t nargs;
} queued_call;

static int queued_work(void *ctx, void *queue) {
    const queued_call *c = ctx;
    return c->l->qfn(c->args, c->nargs, queue, c->l->quser);
}

int kt__queued_timed(const kt__launch *l, const kt_arg *args, size_t nargs, double *ns) {
    char err[256] = "";
    queued_call c = {l, args, nargs};
    int rc = 0;
    kt_status st = l->backend->time_queued(l->bstate, l->device, queued_work, &c, ns, &rc, err, sizeof err);
    if (st != KT_OK) return reported(l, st, err);
    return rc;
}


kt_status kt__queue_wait(const kt_op *op, void *queue, const char *where) {
    const kt_backend *b;
    void *bstate;
    size_t local;
    kt__op_backend(op, &b, &bstate, &local, NULL);
    if (!kt__backend_async(b)) return KT_OK; /* every launch of it waited */
    char err[256] = "";
    kt_status st = b->queue_wait(bstate, local, queue, err, sizeof err);
    if (st == KT_ERR_CAPTURING) return st; /* not a failure: the miss says what it does (kt__capture_miss) */
    return st == KT_OK ? KT_OK : kt__err(st, "%s(op '%s'): waiting for the work already on the queue: %s", where, op->name, err);
}
