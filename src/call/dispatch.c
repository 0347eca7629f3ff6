/*
 * dispatch.c - calling an op. Two straight lines:
 *   hit:  arguments -> key -> lookup -> launch the winner;
 *   miss: arguments -> key -> lookup -> tune (src/tune/: units, build, validate, measure,
 *         record) -> launch the winner.
 * A finished decision is dispatched at once: that path allocates nothing, makes no system call
 * and takes no lock. After a tuning the caller's buffers are as they were, and the winner runs
 * once on them: the caller sees exactly one launch of the winner.
 */
#include "backends/backends.h"
#include "op/launch.h"
#include "op/op.h"
#include "tune/tune.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- calls ---------------------------------------------------------------------------------- */

#if defined(__GNUC__)
#define KT__ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define KT__ALWAYS_INLINE inline
#endif

/* Runs unit u (a tuning's winner or the fallback) on the caller's arguments for the call
 * named where (result: NULL unless the op returns one). With a queue (kt_op_call_async; *q NULL:
 * the device's default one) a variant of a backend that enqueues goes on it without waiting. */
/* A unit that failed with rc: its status, described unless the candidate described it. */
KT__COLD static kt_status unit_failed(const kt_op *op, const kt__unit *u, int rc, kt_result *result, const char *where) {
    if (result) kt_result_release(result);
    if (kt__rc_reported(u->fn, rc)) return KT_ERR_CANDIDATE_FAILED; /* the detail message says how */
    char why[256]; /* a host variant's own account of its failure (backend ABI 19) */
    if (kt__backend_run_failure(u->launch.backend, u->launch.bstate, u->launch.module, rc, why, sizeof why))
        return kt__err(KT_ERR_CANDIDATE_FAILED, "%s(op '%s'): candidate '%s'%s%s failed: %s", where, op->name,
                       op->cands[u->cand].name, u->text ? " " : "", u->text ? u->text : "", why);
    return kt__err(KT_ERR_CANDIDATE_FAILED, "%s(op '%s'): candidate '%s'%s%s returned %d", where, op->name,
                   op->cands[u->cand].name, u->text ? " " : "", u->text ? u->text : "", rc);
}

static KT__ALWAYS_INLINE kt_status launch(const kt_op *op, const kt__unit *u, const kt_arg *args, size_t nargs,
                                          kt_result *result, const char *where, const kt_queue *q) {
    int rc = result                                             ? u->rfn(args, nargs, u->user, result)
             : q != NULL && u->launch.async && kt__fn_on_device(u->fn) ? kt__launch_async(&u->launch, args, nargs, *q)
                                                                : u->fn(args, nargs, u->user);
    return KT__LIKELY(rc == 0) ? KT_OK : unit_failed(op, u, rc, result, where);
}

/* The miss line: (wait for the caller's queue,) tune, then launch. A queue being captured
 * cannot be waited for: the miss does not tune, and launches the fallback or nothing
 * (kt__capture_miss). Kept out of the hit path's frame (the fallback unit is large). */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static kt_status miss(kt_op *op, const kt_arg *args, size_t nargs, const int64_t *key, size_t len, uint64_t hash,
                      kt_result *result, const char *where, const kt_queue *q) {
    kt__unit fallback;
    const kt__unit *u = NULL;
    kt_status st = q != NULL ? kt__queue_wait(op, *q, where) : KT_OK; /* tuning reads the caller's buffers */
    if (st == KT_ERR_CAPTURING) st = kt__capture_miss(op, args, nargs, key, len, where, &fallback, &u);
    else if (st == KT_OK) st = kt__tune_miss(op, args, nargs, key, len, hash, KT__FINISH_LAUNCH, where, &fallback, &u);
    return st == KT_OK ? launch(op, u, args, nargs, result, where, q) : st;
}

/* Freezes the op on its first call. */
static KT__ALWAYS_INLINE kt_status freeze(kt_op *op, const char *where) {
    return KT__LIKELY(atomic_load_explicit(&op->frozen, memory_order_acquire)) ? KT_OK : kt__op_freeze(op, where);
}

/* The key of checked arguments (into key, *len words, *hash) and the table's entry for it, in
 * whatever state (NULL: none). */
static KT__ALWAYS_INLINE const kt_decision *lookup(const kt_op *op, const kt_arg *args, int64_t *key, size_t *len,
                                                   uint64_t *hash) {
    *len = kt__key_compute(op, args, key);
    *hash = kt__key_hash(key, *len);
    return kt__table_find(atomic_load_explicit(&op->table, memory_order_acquire), key, *len, *hash);
}

static KT__ALWAYS_INLINE bool finished(const kt_decision *d) {
    return d != NULL && atomic_load_explicit(&d->state, memory_order_acquire) == KT__DONE;
}

/* kt_op_call (result and q NULL), kt_op_call_result and kt_op_call_async: always inlined, so
 * each caller gets a copy with `result` and `q` constants. */
static KT__ALWAYS_INLINE kt_status call(kt_op *op, const kt_arg *args, size_t nargs, kt_result *result, const kt_queue *q,
                                        const char *where) {
    kt_status st = freeze(op, where);
    if (KT__UNLIKELY(st != KT_OK)) return st;
    if (KT__UNLIKELY(op->has_result != (result != NULL)))
        return result ? kt__err(KT_ERR_STATE, "kt_op_call_result(op '%s'): the op returns no result; use kt_op_call", op->name)
                      : kt__err(KT_ERR_STATE, "%s(op '%s'): the op returns a result; use kt_op_call_result", where, op->name);
    st = kt__check_args(op, args, nargs, where);
    if (KT__UNLIKELY(st != KT_OK)) return st;
    /* hit: key -> lookup -> launch */
    int64_t key[KT__KEY_WORDS_MAX];
    size_t len;
    uint64_t hash;
    const kt_decision *d = lookup(op, args, key, &len, &hash);
    if (KT__LIKELY(finished(d))) {
        if (q != NULL) return launch(op, d->hit, args, nargs, NULL, where, q);
        int rc = result ? d->rfn(args, nargs, d->user, result) : d->fn(args, nargs, d->user);
        if (KT__LIKELY(rc == 0)) return KT_OK;
        return unit_failed(op, d->hit, rc, result, where);
    }
    /* miss: tune -> launch */
    return miss(op, args, nargs, key, len, hash, result, where, q);
}

KT__HOT kt_status kt_op_call(kt_op *op, const kt_arg *args, size_t nargs) {
    if (KT__UNLIKELY(op == NULL)) return kt__err(KT_ERR_NULL, "kt_op_call: op is NULL");
    return call(op, args, nargs, NULL, NULL, "kt_op_call");
}

KT__HOT kt_status kt_op_call_async(kt_op *op, kt_queue queue, const kt_arg *args, size_t nargs) {
    if (KT__UNLIKELY(op == NULL)) return kt__err(KT_ERR_NULL, "kt_op_call_async: op is NULL");
    return call(op, args, nargs, NULL, &queue, "kt_op_call_async");
}

/* kt_op_tune and kt_op_recall: the key's decision made (by how) unless it is made already. */
static kt_status decide_key(kt_op *op, const kt_arg *args, size_t nargs, kt__finish how, const char *where) {
    if (op == NULL) return kt__err(KT_ERR_NULL, "%s: op is NULL", where);
    kt_status st = freeze(op, where);
    if (st == KT_OK) st = kt__check_args(op, args, nargs, where);
    if (st != KT_OK) return st;
    int64_t key[KT__KEY_WORDS_MAX];
    size_t len;
    uint64_t hash;
    if (finished(lookup(op, args, key, &len, &hash))) return KT_OK;
    return kt__tune_miss(op, args, nargs, key, len, hash, how, where, NULL, NULL);
}

kt_status kt_op_tune(kt_op *op, const kt_arg *args, size_t nargs) {
    return decide_key(op, args, nargs, KT__FINISH_DECIDE, "kt_op_tune");
}

kt_status kt_op_recall(kt_op *op, const kt_arg *args, size_t nargs) {
    return decide_key(op, args, nargs, KT__FINISH_RECALL, "kt_op_recall");
}

kt_status kt_op_call_result(kt_op *op, const kt_arg *args, size_t nargs, kt_result *result) {
    if (result == NULL) return kt__err(KT_ERR_NULL, "kt_op_call_result: result is NULL");
    memset(result, 0, sizeof *result);
    if (op == NULL) return kt__err(KT_ERR_NULL, "kt_op_call_result: op is NULL");
    return call(op, args, nargs, result, NULL, "kt_op_call_result");
}

uint64_t kt_op_tune_count(const kt_op *op) { return op ? atomic_load(&op->tune_count) : 0; }
uint64_t kt_op_measured_runs(const kt_op *op) { return op ? atomic_load(&op->measured_runs) : 0; }

/* ---- decisions ------------------------------------------------------------------------------ */

kt_status kt_op_decision(const kt_op *op, const kt_arg *args, size_t nargs, const kt_decision **out) {
    if (out == NULL) return kt__err(KT_ERR_NULL, "kt_op_decision: out is NULL");
    *out = NULL;
    if (op == NULL) return kt__err(KT_ERR_NULL, "kt_op_decision: op is NULL");
    if (!atomic_load_explicit(&op->frozen, memory_order_acquire))
        return kt__err(KT_ERR_NOT_FOUND, "kt_op_decision(op '%s'): the op has not been called yet", op->name);
    kt_status st = kt__check_args(op, args, nargs, "kt_op_decision");
    if (st != KT_OK) return st;
    int64_t key[KT__KEY_WORDS_MAX];
    size_t len;
    uint64_t hash;
    const kt_decision *d = lookup(op, args, key, &len, &hash);
    int state = d ? atomic_load_explicit(&d->state, memory_order_acquire) : KT__TUNING;
    if (state == KT__FAILED) { /* its units say why */
        *out = d;
        return kt__err(KT_ERR_ALL_FAILED, "%s", d->fail_msg ? d->fail_msg : "kt_op_decision: every candidate failed");
    }
    if (state != KT__DONE)
        return kt__err(KT_ERR_NOT_FOUND, "kt_op_decision(op '%s'): no finished decision for the key of these arguments",
                       op->name);
    *out = d;
    return KT_OK;
}

size_t kt_op_decision_count(const kt_op *op) {
    if (op == NULL) return 0;
    kt_op *m = (kt_op *)op; /* the lock is not part of the op's logical state */
    pthread_mutex_lock(&m->lock);
    size_t n = op->ndone;
    pthread_mutex_unlock(&m->lock);
    return n;
}

const kt_decision *kt_op_decision_at(const kt_op *op, size_t index) {
    if (op == NULL) return NULL;
    kt_op *m = (kt_op *)op;
    pthread_mutex_lock(&m->lock);
    const kt_decision *d = index < op->ndone ? op->done[index] : NULL;
    pthread_mutex_unlock(&m->lock);
    return d;
}

