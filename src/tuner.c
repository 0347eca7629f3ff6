/*
 * tuner.c - calling an op: the hit path, first-call tuning, and decisions.
 *
 * A call checks its arguments, computes the key and probes the op's table. A finished decision
 * is dispatched at once: that path allocates nothing, makes no system call and takes no lock.
 * On a miss the caller takes the op's lock, and either finds the key being decided by another
 * thread (then waits for it, or runs the fallback candidate) or inserts a new entry marked as
 * tuning and decides it without holding the lock, so other keys tune and dispatch meanwhile.
 * The decision is then published, waiters are woken, and the winner runs once on the caller's
 * arguments.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kt__decision_free(kt_decision *d) {
    if (d == NULL) return;
    free(d->results);
    free(d->fail_msg);
    free(d);
}

/* Runs candidate idx on the caller's arguments as a dispatched call. */
static kt_status run_candidate(const kt_op *op, size_t idx, const kt_arg *args, size_t nargs) {
    const kt__cand *c = &op->cands[idx];
    int rc = c->fn(args, nargs, c->user);
    if (rc != 0)
        return kt__err(KT_ERR_CANDIDATE_FAILED, "kt_op_call(op '%s'): candidate '%s' returned %d", op->name, c->name, rc);
    return KT_OK;
}

/* The candidate used without measuring: the declared default when it accepts the arguments,
 * else the first one in declaration order that does; -1 when none does. */
static long default_candidate(const kt_op *op, const int64_t *key) {
    if (op->default_idx >= 0 && kt__key_accepts(op, key, (size_t)op->default_idx)) return op->default_idx;
    for (size_t i = 0; i < op->ncands; i++)
        if (kt__key_accepts(op, key, i)) return (long)i;
    return -1;
}

/* Measures every accepting candidate and picks the fastest. Fills d (winner, results) or sets
 * d->fail_status / d->fail_msg when every candidate failed. */
static kt_status measure_all(kt_op *op, kt_decision *d, const kt_arg *args, size_t nargs) {
    const kt__measure_cfg cfg = op->ctx->measure;
    double *scratch = malloc((size_t)cfg.max_runs * sizeof *scratch);
    if (scratch == NULL) return kt__err(KT_ERR_NO_MEMORY, "kt_op_call(op '%s'): out of memory for timings", op->name);
    long best = -1;
    uint64_t runs = 0;
    for (size_t i = 0; i < op->ncands; i++) {
        kt__cand_result *r = &d->results[i];
        if (!kt__key_accepts(op, d->key, i)) {
            r->outcome = KT_OUTCOME_REJECTED;
            continue;
        }
        kt__measure_native(&cfg, op->cands[i].fn, op->cands[i].user, args, nargs, scratch, r);
        runs += r->runs;
        if (r->outcome == KT_OUTCOME_FAILED) {
            kt__log(op->ctx, KT_LOG_WARN, "op '%s': candidate '%s' returned %d while measured; disqualified", op->name,
                    op->cands[i].name, r->fail_code);
            continue;
        }
        kt__log(op->ctx, KT_LOG_DEBUG, "op '%s': candidate '%s' %.0f ns (median of %u)", op->name, op->cands[i].name,
                r->time_ns, r->runs);
        if (best < 0 || r->time_ns < d->results[best].time_ns) best = (long)i;
    }
    free(scratch);
    atomic_fetch_add(&op->measured_runs, runs);
    atomic_fetch_add(&op->tune_count, 1);
    if (best < 0) {
        char msg[KT__ERRBUF];
        int len = snprintf(msg, sizeof msg, "kt_op_call(op '%s'): every candidate that accepts the arguments failed:",
                           op->name);
        for (size_t i = 0; i < op->ncands && len > 0 && (size_t)len < sizeof msg; i++)
            if (d->results[i].outcome == KT_OUTCOME_FAILED)
                len += snprintf(msg + len, sizeof msg - (size_t)len, " '%s' returned %d;", op->cands[i].name,
                                d->results[i].fail_code);
        d->fail_msg = strdup(msg);
        return kt__err(KT_ERR_ALL_FAILED, "%s", msg);
    }
    d->winner = (size_t)best;
    d->source = KT_SOURCE_MEASURED;
    kt__log(op->ctx, KT_LOG_INFO, "op '%s': tuned a new key in %llu measured runs; winner '%s' (%.0f ns)", op->name,
            (unsigned long long)runs, op->cands[best].name, d->results[best].time_ns);
    return KT_OK;
}

/* Decides an entry by the op's effort level. */
static kt_status decide(kt_op *op, kt_decision *d, const kt_arg *args, size_t nargs) {
    if (op->effective == KT_EFFORT_MEASURE) return measure_all(op, d, args, nargs);
    long idx = -1;
    if (op->effective == KT_EFFORT_FORCED && op->forced_idx >= 0) {
        if (kt__key_accepts(op, d->key, (size_t)op->forced_idx)) {
            idx = op->forced_idx;
            d->source = KT_SOURCE_FORCED;
        } else {
            kt__log(op->ctx, KT_LOG_WARN, "op '%s': forced candidate '%s' rejects these arguments; using the default",
                    op->name, op->cands[op->forced_idx].name);
        }
    }
    if (idx < 0) {
        idx = default_candidate(op, d->key);
        d->source = KT_SOURCE_DEFAULT;
    }
    /* The caller checked that some candidate accepts the key. */
    d->winner = (size_t)idx;
    return KT_OK;
}

static kt_decision *new_entry(const kt_op *op, const int64_t *key, size_t len, uint64_t hash) {
    kt_decision *d = calloc(1, sizeof *d);
    if (d == NULL) return NULL;
    d->results = calloc(op->ncands, sizeof *d->results);
    if (d->results == NULL) {
        free(d);
        return NULL;
    }
    for (size_t i = 0; i < op->ncands; i++) d->results[i].time_ns = -1;
    d->ncand = op->ncands;
    d->hash = hash;
    d->keylen = len;
    d->nuser = op->nkeys;
    memcpy(d->key, key, len * sizeof *key);
    atomic_init(&d->state, KT__TUNING);
    return d;
}

/* Whether any candidate accepts the key. */
static bool any_accepts(const kt_op *op, const int64_t *key) {
    if (op->npredicated < op->ncands) return true;
    for (size_t w = 0; w < op->nmask_words; w++)
        if (key[op->nkeys + w] != 0) return true;
    return false;
}

/* Returns the outcome of a finished entry for a call: run its winner, or report its failure. */
static kt_status finish_call(const kt_op *op, const kt_decision *d, const kt_arg *args, size_t nargs) {
    if (atomic_load_explicit(&d->state, memory_order_acquire) == KT__DONE)
        return run_candidate(op, d->winner, args, nargs);
    return kt__err(d->fail_status, "%s", d->fail_msg ? d->fail_msg : "kt_op_call: tuning failed");
}

/* Makes room in the done list for every entry in the table plus one (op->lock held), so that
 * publishing a decision later cannot fail. */
static kt_status reserve_done(kt_op *op) {
    if (op->count + 1 <= op->done_cap) return KT_OK;
    size_t cap = op->done_cap ? 2 * op->done_cap : 16;
    kt_decision **nd = realloc(op->done, cap * sizeof *nd);
    if (nd == NULL) return kt__err(KT_ERR_NO_MEMORY, "kt_op_call(op '%s'): out of memory", op->name);
    op->done = nd;
    op->done_cap = cap;
    return KT_OK;
}

static kt_status miss(kt_op *op, const kt_arg *args, size_t nargs, const int64_t *key, size_t len, uint64_t hash) {
    if (!any_accepts(op, key))
        return kt__err(KT_ERR_NO_VALID_CANDIDATE, "kt_op_call(op '%s'): none of its %zu candidates accepts these arguments",
                       op->name, op->ncands);
    pthread_mutex_lock(&op->lock);
    kt_decision *d = kt__table_find(atomic_load_explicit(&op->table, memory_order_relaxed), key, len, hash);
    if (d != NULL) {
        /* Another thread inserted it: wait for its decision, or run the fallback meanwhile. */
        while (atomic_load_explicit(&d->state, memory_order_acquire) == KT__TUNING) {
            if (op->fallback_idx >= 0 && kt__key_accepts(op, key, (size_t)op->fallback_idx)) {
                pthread_mutex_unlock(&op->lock);
                return run_candidate(op, (size_t)op->fallback_idx, args, nargs);
            }
            pthread_cond_wait(&op->cond, &op->lock);
        }
        pthread_mutex_unlock(&op->lock);
        return finish_call(op, d, args, nargs);
    }
    d = new_entry(op, key, len, hash);
    kt_status st = d ? reserve_done(op) : kt__err(KT_ERR_NO_MEMORY, "kt_op_call(op '%s'): out of memory", op->name);
    if (st == KT_OK) st = kt__table_insert(op, d);
    pthread_mutex_unlock(&op->lock);
    if (st != KT_OK) {
        kt__decision_free(d);
        return st;
    }

    st = decide(op, d, args, nargs);

    pthread_mutex_lock(&op->lock);
    if (st == KT_OK) {
        d->fn = op->cands[d->winner].fn;
        d->user = op->cands[d->winner].user;
    } else {
        d->fail_status = st;
        if (d->fail_msg == NULL) d->fail_msg = strdup(kt_last_error());
    }
    if (st == KT_OK) op->done[op->ndone++] = d; /* reserve_done made room */
    atomic_store_explicit(&d->state, st == KT_OK ? KT__DONE : KT__FAILED, memory_order_release);
    pthread_cond_broadcast(&op->cond);
    pthread_mutex_unlock(&op->lock);
    if (st != KT_OK) return st;
    return run_candidate(op, d->winner, args, nargs);
}

kt_status kt_op_call(kt_op *op, const kt_arg *args, size_t nargs) {
    if (KT__UNLIKELY(op == NULL)) return kt__err(KT_ERR_NULL, "kt_op_call: op is NULL");
    if (KT__UNLIKELY(!atomic_load_explicit(&op->frozen, memory_order_acquire))) {
        kt_status st = kt__op_freeze(op);
        if (st != KT_OK) return st;
    }
    kt_status st = kt__check_args(op, args, nargs, "kt_op_call");
    if (KT__UNLIKELY(st != KT_OK)) return st;
    int64_t key[KT__KEY_WORDS_MAX];
    size_t len = kt__key_compute(op, args, key);
    uint64_t hash = kt__key_hash(key, len);
    const kt_decision *d = kt__table_find(atomic_load_explicit(&op->table, memory_order_acquire), key, len, hash);
    if (KT__LIKELY(d != NULL && atomic_load_explicit(&d->state, memory_order_acquire) == KT__DONE)) {
        int rc = d->fn(args, nargs, d->user);
        if (KT__LIKELY(rc == 0)) return KT_OK;
        return kt__err(KT_ERR_CANDIDATE_FAILED, "kt_op_call(op '%s'): candidate '%s' returned %d", op->name,
                       op->cands[d->winner].name, rc);
    }
    return miss(op, args, nargs, key, len, hash);
}

uint64_t kt_op_tune_count(const kt_op *op) { return op ? atomic_load(&op->tune_count) : 0; }
uint64_t kt_op_measured_runs(const kt_op *op) { return op ? atomic_load(&op->measured_runs) : 0; }

kt_status kt_op_decision(const kt_op *op, const kt_arg *args, size_t nargs, const kt_decision **out) {
    if (out == NULL) return kt__err(KT_ERR_NULL, "kt_op_decision: out is NULL");
    *out = NULL;
    if (op == NULL) return kt__err(KT_ERR_NULL, "kt_op_decision: op is NULL");
    if (!atomic_load_explicit(&op->frozen, memory_order_acquire))
        return kt__err(KT_ERR_NOT_FOUND, "kt_op_decision(op '%s'): the op has not been called yet", op->name);
    kt_status st = kt__check_args(op, args, nargs, "kt_op_decision");
    if (st != KT_OK) return st;
    int64_t key[KT__KEY_WORDS_MAX];
    size_t len = kt__key_compute(op, args, key);
    const kt_decision *d =
        kt__table_find(atomic_load_explicit(&op->table, memory_order_acquire), key, len, kt__key_hash(key, len));
    if (d == NULL || atomic_load_explicit(&d->state, memory_order_acquire) != KT__DONE)
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
    const kt_decision *d = NULL;
    if (index < op->ndone) d = op->done[index];
    pthread_mutex_unlock(&m->lock);
    return d;
}

size_t kt_decision_winner(const kt_decision *d) { return d ? d->winner : 0; }
kt_decision_source kt_decision_source_of(const kt_decision *d) { return d ? d->source : 0; }
size_t kt_decision_key_len(const kt_decision *d) { return d ? d->nuser : 0; }
int64_t kt_decision_key(const kt_decision *d, size_t index) { return (d && index < d->nuser) ? d->key[index] : 0; }

kt_outcome kt_decision_outcome(const kt_decision *d, size_t c) {
    return (d && c < d->ncand) ? d->results[c].outcome : KT_OUTCOME_NOT_RUN;
}
double kt_decision_time_ns(const kt_decision *d, size_t c) { return (d && c < d->ncand) ? d->results[c].time_ns : -1; }
unsigned kt_decision_runs(const kt_decision *d, size_t c) { return (d && c < d->ncand) ? d->results[c].runs : 0; }
int kt_decision_fail_code(const kt_decision *d, size_t c) { return (d && c < d->ncand) ? d->results[c].fail_code : 0; }
