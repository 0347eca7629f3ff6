/*
 * miss.c - a call whose key has no finished decision. The caller takes the op's lock, and
 * either finds the key being decided by another thread (then waits for it, or runs the
 * fallback candidate) or inserts a new entry marked as tuning and decides it without holding
 * the lock, so other keys tune and dispatch meanwhile. Deciding: recalled from the persistent
 * cache (recall.c), measured (measure.c), forced, or the default; then published.
 */
#include "tune/stages.h"
#include "tune/tune.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The candidate used without measuring: the declared default when it accepts the arguments,
 * else the first one in declaration order that does; -1 when none does. */
static long default_candidate(const kt_op *op, const int64_t *key) {
    if (op->default_idx >= 0 && kt__key_accepts(op, key, (size_t)op->default_idx)) return op->default_idx;
    for (size_t i = 0; i < op->ncands; i++)
        if (kt__key_accepts(op, key, i)) return (long)i;
    return -1;
}

/* Decides an entry by the op's effort level. */
static kt_status decide(kt_op *op, kt_decision *d, const kt_arg *args, kt__finish how) {
    if (op->effective == KT_EFFORT_MEASURE || op->effective == KT_EFFORT_CACHE_ONLY) { /* a decision made earlier */
        bool found = false;
        kt_status st = kt__aot_recall(op, d, args, &found); /* a table compiled in: no cache read */
        if (st == KT_OK && !found) st = kt__persist_recall(op, d, args, &found);
        if (st == KT_OK && !found && !d->rerace) st = kt__shared_recall(op, d, args, &found); /* the fleet's */
        if (st != KT_OK || found) return st;
    }
    if (op->effective == KT_EFFORT_MEASURE && how == KT__FINISH_RECALL) /* left for a call to tune (tune() abandons it) */
        return kt__err(KT_ERR_NOT_FOUND, "%s(op '%s'): no recorded decision for the key of these arguments", d->where, op->name);
    if (op->effective == KT_EFFORT_MEASURE) {
        bool found = false, held = false; /* one process of the fleet measures a key at a time */
        kt_status st = d->rerace ? KT_OK : kt__shared_claim(op, d, args, &found, &held);
        if (st != KT_OK || found) return st;
        st = kt__measure_all(op, d, args, how == KT__FINISH_LAUNCH, how == KT__FINISH_GENERATED);
        if (st == KT_OK) kt__persist_record(op, d); /* (and published) */
        if (held) kt__shared_release(op, d);
        return st;
    }
    if (op->effective == KT_EFFORT_CACHE_ONLY) { /* a key nobody tuned: what other keys and devices decided */
        bool found = false;
        kt_status st = kt__fallback(op, d, args, &found);
        if (st != KT_OK || found) return st;
    }
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
        idx = default_candidate(op, d->key); /* the caller checked that some candidate accepts the key */
        d->source = KT_SOURCE_DEFAULT;
    }
    d->winner = (size_t)idx;
    kt_status st = kt__make_units(op, d, args, idx, NULL, NULL, NULL); /* a variant group: build its first configuration */
    if (st != KT_OK) return st;
    if (d->nunits != 1 || !kt__unit_runnable(&d->units[0]))
        return kt__err(KT_ERR_BACKEND, "%s(op '%s'): candidate '%s' cannot run: %s", d->where, op->name, op->cands[idx].name,
                       d->nunits && d->units[0].r.message ? d->units[0].r.message : "no runnable configuration");
    d->winner_unit = 0;
    return KT_OK;
}

/* ---- the miss path ------------------------------------------------------------------------- */

kt_decision *kt__decision_new(const kt_op *op, const int64_t *key, size_t len, uint64_t hash) {
    kt_decision *d = calloc(1, sizeof *d);
    if (d == NULL) return NULL;
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

/* Makes room in the done list for every entry in the table plus one (op->lock held), so that
 * publishing a decision later cannot fail. */
static kt_status reserve_done(kt_op *op, const char *where) {
    if (op->count + 1 <= op->done_cap) return KT_OK;
    size_t cap = op->done_cap ? 2 * op->done_cap : 16;
    kt_decision **nd = realloc(op->done, cap * sizeof *nd);
    if (nd == NULL) return kt__err(KT_ERR_NO_MEMORY, "%s(op '%s'): out of memory for its decision list", where, op->name);
    op->done = nd;
    op->done_cap = cap;
    return KT_OK;
}

/* Decides entry d (this thread owns its TUNING state), publishes the outcome and wakes
 * waiters. */
static kt_status tune(kt_op *op, kt_decision *d, const kt_arg *args, kt__finish how, const kt__unit **launch) {
    kt_status st = decide(op, d, args, how);
    pthread_mutex_lock(&op->lock);
    int state = KT__DONE;
    if (st == KT_OK) {
        const kt__unit *w = &d->units[d->winner_unit];
        d->fn = w->fn;
        d->rfn = w->rfn;
        d->user = w->user;
        d->hit = w;
        op->done[op->ndone++] = d; /* reserve_done made room */
    } else if (st == KT_ERR_ALL_FAILED) {
        d->fail_status = st;
        state = KT__FAILED;
    } else {
        state = KT__ABANDONED; /* not the candidates' fault: the next call tunes again */
    }
    atomic_store_explicit(&d->state, state, memory_order_release);
    pthread_cond_broadcast(&op->cond);
    pthread_mutex_unlock(&op->lock);
    if (st == KT_OK && launch) *launch = &d->units[d->winner_unit];
    return st;
}

kt_status kt__tune_miss(kt_op *op, const kt_arg *args, size_t nargs, const int64_t *key, size_t len, uint64_t hash,
                        kt__finish how, const char *where, kt__unit *fallback, const kt__unit **launch) {
    (void)nargs;
    if (!any_accepts(op, key))
        return kt__err(KT_ERR_NO_VALID_CANDIDATE, "%s(op '%s'): none of its %zu candidates accepts these arguments", where,
                       op->name, op->ncands);
    pthread_mutex_lock(&op->lock);
    kt_decision *d = kt__table_find(atomic_load_explicit(&op->table, memory_order_relaxed), key, len, hash);
    if (d != NULL) {
        for (;;) {
            int state = atomic_load_explicit(&d->state, memory_order_acquire);
            if (state == KT__ABANDONED) { /* take the tuning over */
                kt__decision_reset(d);
                d->where = where;
                atomic_store_explicit(&d->state, KT__TUNING, memory_order_relaxed);
                pthread_mutex_unlock(&op->lock);
                return tune(op, d, args, how, launch);
            }
            if (state != KT__TUNING) break;
            if (how == KT__FINISH_LAUNCH && op->fallback_idx >= 0 && op->cands[op->fallback_idx].space == NULL &&
                kt__key_accepts(op, key, (size_t)op->fallback_idx)) { /* another thread tunes it: run the fallback */
                pthread_mutex_unlock(&op->lock);
                kt__unit_native(op, (size_t)op->fallback_idx, fallback);
                *launch = fallback;
                return KT_OK;
            }
            pthread_cond_wait(&op->cond, &op->lock);
        }
        pthread_mutex_unlock(&op->lock);
        if (atomic_load_explicit(&d->state, memory_order_acquire) == KT__DONE) {
            if (launch) *launch = &d->units[d->winner_unit];
            return KT_OK;
        }
        return d->fail_msg ? kt__err(d->fail_status, "%s", d->fail_msg) : kt__err(d->fail_status, "%s(op '%s'): tuning failed", where, op->name);
    }
    d = kt__decision_new(op, key, len, hash);
    kt_status st = d ? reserve_done(op, where) : kt__err(KT_ERR_NO_MEMORY, "%s(op '%s'): out of memory", where, op->name);
    if (st == KT_OK) st = kt__table_insert(op, d);
    pthread_mutex_unlock(&op->lock);
    if (st != KT_OK) {
        kt__decision_free(d);
        return st;
    }
    d->where = where;
    return tune(op, d, args, how, launch);
}
