/*
 * tuner.c - calling an op: the hit path, first-call tuning, and decisions.
 *
 * A call checks its arguments, computes the key and probes the op's table. A finished decision
 * is dispatched at once: that path allocates nothing, makes no system call and takes no lock.
 * On a miss the caller takes the op's lock, and either finds the key being decided by another
 * thread (then waits for it, or runs the fallback candidate) or inserts a new entry marked as
 * tuning and decides it without holding the lock, so other keys tune and dispatch meanwhile.
 *
 * Deciding by measurement works on a workset (args.c): the arguments every tuning run uses,
 * with the caller's ReadWrite buffers restored before each run (or clones, or generated inputs).
 * The reference runs first; each other candidate's first run is its validation run; then the
 * engine (bench.c) measures it. After the decision the caller's buffers are restored once more
 * and the winner runs once on them: the caller sees exactly one launch of the winner.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kt_result_release(kt_result *r) {
    if (r == NULL) return;
    if (r->release != NULL && r->ptr != NULL) r->release(r->ptr, r->release_user);
    memset(r, 0, sizeof *r);
}

static void reset_results(kt_decision *d) {
    for (size_t i = 0; i < d->ncand; i++) {
        free(d->results[i].message);
        d->results[i] = (kt__cand_result){.outcome = KT_OUTCOME_NOT_RUN, .time_ns = -1};
    }
    free(d->fail_msg);
    d->fail_msg = NULL;
    d->validated = false;
    d->peak_extra = 0;
}

void kt__decision_free(kt_decision *d) {
    if (d == NULL) return;
    reset_results(d);
    free(d->results);
    free(d);
}

/* Runs candidate idx on the caller's arguments as a dispatched call (result: NULL unless the op
 * returns one). */
static kt_status run_candidate(const kt_op *op, size_t idx, const kt_arg *args, size_t nargs, kt_result *result) {
    const kt__cand *c = &op->cands[idx];
    int rc = result ? c->rfn(args, nargs, c->user, result) : c->fn(args, nargs, c->user);
    if (rc == 0) return KT_OK;
    if (result) kt_result_release(result);
    return kt__err(KT_ERR_CANDIDATE_FAILED, "kt_op_call(op '%s'): candidate '%s' returned %d", op->name, c->name, rc);
}

/* The candidate used without measuring: the declared default when it accepts the arguments,
 * else the first one in declaration order that does; -1 when none does. */
static long default_candidate(const kt_op *op, const int64_t *key) {
    if (op->default_idx >= 0 && kt__key_accepts(op, key, (size_t)op->default_idx)) return op->default_idx;
    for (size_t i = 0; i < op->ncands; i++)
        if (kt__key_accepts(op, key, i)) return (long)i;
    return -1;
}

/* ---- measuring one candidate ---------------------------------------------------------------- */

typedef struct trial_ctx {
    const kt_op *op;
    kt__workset *ws;
    const kt__cand *cand;
    kt_result result;
} trial_ctx;

static kt_status trial_before(void *p, const kt_arg **args) {
    trial_ctx *t = p;
    return kt__workset_before(t->ws, false, args);
}

static int trial_run(void *p, const kt_arg *args) {
    trial_ctx *t = p;
    if (t->cand->rfn) return t->cand->rfn(args, t->op->nargs, t->cand->user, &t->result);
    return t->cand->fn(args, t->op->nargs, t->cand->user);
}

static kt_status trial_after(void *p) {
    trial_ctx *t = p;
    kt_result_release(&t->result); /* outputs of tuning runs never reach the caller */
    return kt__workset_after(t->ws);
}

static void set_message(kt__cand_result *r, const char *fmt, const char *detail, int code) {
    char msg[KT__ERRBUF];
    snprintf(msg, sizeof msg, fmt, detail ? detail : "", code);
    free(r->message);
    r->message = strdup(msg);
}

/* The validation run of candidate i: poisoned outputs, then a comparison with the reference
 * before the post-hook. Sets the outcome to FAILED or INVALID when it does not pass. */
static kt_status validation_run(trial_ctx *t, const kt__reference *ref, kt__cand_result *r) {
    const kt_arg *args = NULL;
    kt_status st = kt__workset_before(t->ws, true, &args);
    if (st != KT_OK) return st;
    t->result = (kt_result){0};
    int rc = trial_run(t, args);
    char msg[KT__ERRBUF] = "";
    bool valid = rc != 0 || kt__validate(ref, t->ws, args, &t->result, msg, sizeof msg);
    st = trial_after(t);
    if (rc != 0) {
        r->outcome = KT_OUTCOME_FAILED;
        r->fail_code = rc;
        set_message(r, "%sreturned %d in its validation run", NULL, rc);
    } else if (!valid) {
        r->outcome = KT_OUTCOME_INVALID;
        set_message(r, "%s", msg, 0);
    }
    return st;
}

/* Builds the ALL_FAILED message from the candidates' diagnostics. */
static kt_status all_failed(const kt_op *op, kt_decision *d) {
    char msg[KT__ERRBUF];
    int len = snprintf(msg, sizeof msg, "kt_op_call(op '%s'): every candidate that accepts the arguments failed:", op->name);
    for (size_t i = 0; i < op->ncands && len > 0 && (size_t)len < sizeof msg; i++) {
        const kt__cand_result *r = &d->results[i];
        if (r->outcome == KT_OUTCOME_FAILED && r->message == NULL)
            len += snprintf(msg + len, sizeof msg - (size_t)len, " '%s' returned %d;", op->cands[i].name, r->fail_code);
        else if (r->outcome == KT_OUTCOME_FAILED || r->outcome == KT_OUTCOME_INVALID)
            len += snprintf(msg + len, sizeof msg - (size_t)len, " '%s' %s;", op->cands[i].name, r->message);
    }
    d->fail_msg = strdup(msg);
    return kt__err(KT_ERR_ALL_FAILED, "%s", msg);
}

/* Which candidates may run while tuning: those that accept the caller's arguments (the key)
 * and also the work arguments they will actually run on (copies keep the caller's alignment,
 * and this makes sure of it, predicate functions included). */
static bool *accepting(const kt_op *op, const kt_decision *d, const kt__workset *ws) {
    bool *acc = calloc(op->ncands, sizeof *acc);
    if (acc == NULL) return NULL;
    int64_t wkey[KT__KEY_WORDS_MAX];
    kt__key_compute(op, ws->args, wkey);
    for (size_t i = 0; i < op->ncands; i++) acc[i] = kt__key_accepts(op, d->key, i) && kt__key_accepts(op, wkey, i);
    return acc;
}

/* Validates and measures every accepting candidate on a workset built from the caller's
 * arguments, picks the fastest, and restores the caller's buffers for the final launch (on
 * every path, errors included). Returns KT_ERR_ALL_FAILED when no candidate passed; any other
 * error is not the candidates' (the key will be tuned again). launching: the caller's buffers
 * get the final launch (kt_op_call); otherwise (kt_op_tune) they are not written at all. */
static kt_status measure_all(kt_op *op, kt_decision *d, const kt_arg *caller, bool launching) {
    const kt__measure_cfg cfg = op->ctx->measure;
    kt_inputs inputs = (!launching && op->inputs == KT_INPUTS_PROTECT) ? KT_INPUTS_CLONE : op->inputs;
    kt__workset ws;
    kt__reference ref = {0};
    bool *acc = NULL;
    double *scratch = malloc((size_t)cfg.max_runs * sizeof *scratch);
    kt_status st = kt__workset_init(&ws, op, inputs, caller, launching);
    if (st == KT_OK && (scratch == NULL || (acc = accepting(op, d, &ws)) == NULL))
        st = kt__err(KT_ERR_NO_MEMORY, "kt_op_call(op '%s'): out of memory", op->name);
    if (st == KT_OK) st = kt__reference_capture(&ref, &ws, acc);
    d->validated = ref.active;
    long best = -1;
    uint64_t runs = 0;
    for (size_t i = 0; st == KT_OK && i < op->ncands; i++) {
        kt__cand_result *r = &d->results[i];
        if (!acc[i]) {
            r->outcome = KT_OUTCOME_REJECTED;
            if (kt__key_accepts(op, d->key, i))
                set_message(r, "%sits requirements reject the copies of the arguments that tuning runs on", NULL, 0);
            continue;
        }
        trial_ctx t = {op, &ws, &op->cands[i], {0}};
        unsigned warmups = cfg.warmup_runs;
        r->outcome = KT_OUTCOME_MEASURED;
        if ((long)i == ref.cand && ref.wrote_input) {
            r->outcome = KT_OUTCOME_INVALID;
            set_message(r, "%s", ref.message, 0);
        } else if (op->validate && (long)i != ref.cand) {
            st = validation_run(&t, &ref, r);
        }
        if (op->validate && warmups > 0) warmups--; /* the validation (or reference) run warmed it up */
        if (st != KT_OK) break;
        if (r->outcome == KT_OUTCOME_MEASURED) {
            kt__trial trial = {trial_before, trial_run, trial_after, &t};
            st = kt__measure(&cfg, warmups, &trial, scratch, r);
            if (st != KT_OK) break;
            if (r->outcome == KT_OUTCOME_FAILED) set_message(r, "%sreturned %d while measured", NULL, r->fail_code);
        }
        runs += r->runs;
        if (r->outcome != KT_OUTCOME_MEASURED) {
            kt__log(op->ctx, KT_LOG_WARN, "op '%s': candidate '%s' disqualified: %s", op->name, op->cands[i].name,
                    r->message ? r->message : "");
            continue;
        }
        kt__log(op->ctx, KT_LOG_DEBUG, "op '%s': candidate '%s' %.0f ns (median of %u)", op->name, op->cands[i].name,
                r->time_ns, r->runs);
        if (best < 0 || r->time_ns < d->results[best].time_ns) best = (long)i;
    }
    if (launching) kt__workset_finish(&ws, caller);
    kt__reference_free(&ref, &ws);
    d->peak_extra = ws.peak;
    kt__workset_free(&ws);
    free(scratch);
    free(acc);
    atomic_fetch_add(&op->measured_runs, runs);
    if (st != KT_OK) return st;
    atomic_fetch_add(&op->tune_count, 1);
    if (best < 0) return all_failed(op, d);
    d->winner = (size_t)best;
    d->source = KT_SOURCE_MEASURED;
    kt__log(op->ctx, KT_LOG_INFO, "op '%s': tuned a new key in %llu measured runs; winner '%s' (%.0f ns)%s", op->name,
            (unsigned long long)runs, op->cands[best].name, d->results[best].time_ns,
            d->validated ? "" : ", not validated");
    return KT_OK;
}

/* Decides an entry by the op's effort level. */
static kt_status decide(kt_op *op, kt_decision *d, const kt_arg *args, bool launching) {
    if (op->effective == KT_EFFORT_MEASURE) return measure_all(op, d, args, launching);
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

/* ---- the miss path ------------------------------------------------------------------------- */

static kt_decision *new_entry(const kt_op *op, const int64_t *key, size_t len, uint64_t hash) {
    kt_decision *d = calloc(1, sizeof *d);
    if (d == NULL) return NULL;
    d->results = calloc(op->ncands, sizeof *d->results);
    if (d->results == NULL) {
        free(d);
        return NULL;
    }
    d->ncand = op->ncands;
    reset_results(d);
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
static kt_status reserve_done(kt_op *op) {
    if (op->count + 1 <= op->done_cap) return KT_OK;
    size_t cap = op->done_cap ? 2 * op->done_cap : 16;
    kt_decision **nd = realloc(op->done, cap * sizeof *nd);
    if (nd == NULL) return kt__err(KT_ERR_NO_MEMORY, "kt_op_call(op '%s'): out of memory", op->name);
    op->done = nd;
    op->done_cap = cap;
    return KT_OK;
}

/* How a miss ends: with the final launch on the caller's arguments (kt_op_call and
 * kt_op_call_result), or with the decision alone (kt_op_tune). */
typedef enum { LAUNCH, DECIDE_ONLY } finish;

/* Decides entry d (this thread owns its TUNING state), publishes the outcome, wakes waiters,
 * and makes the final launch on the caller's arguments. */
static kt_status tune_and_run(kt_op *op, kt_decision *d, const kt_arg *args, size_t nargs, kt_result *result,
                              finish how) {
    kt_status st = decide(op, d, args, how == LAUNCH);
    pthread_mutex_lock(&op->lock);
    int state = KT__DONE;
    if (st == KT_OK) {
        d->fn = op->cands[d->winner].fn;
        d->rfn = op->cands[d->winner].rfn;
        d->user = op->cands[d->winner].user;
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
    if (st != KT_OK || how == DECIDE_ONLY) return st;
    return run_candidate(op, d->winner, args, nargs, result);
}

static kt_status miss(kt_op *op, const kt_arg *args, size_t nargs, const int64_t *key, size_t len, uint64_t hash,
                      kt_result *result, finish how) {
    if (!any_accepts(op, key))
        return kt__err(KT_ERR_NO_VALID_CANDIDATE, "kt_op_call(op '%s'): none of its %zu candidates accepts these arguments",
                       op->name, op->ncands);
    pthread_mutex_lock(&op->lock);
    kt_decision *d = kt__table_find(atomic_load_explicit(&op->table, memory_order_relaxed), key, len, hash);
    if (d != NULL) {
        for (;;) {
            int state = atomic_load_explicit(&d->state, memory_order_acquire);
            if (state == KT__ABANDONED) { /* take the tuning over */
                reset_results(d);
                atomic_store_explicit(&d->state, KT__TUNING, memory_order_relaxed);
                pthread_mutex_unlock(&op->lock);
                return tune_and_run(op, d, args, nargs, result, how);
            }
            if (state != KT__TUNING) break;
            if (how == LAUNCH && op->fallback_idx >= 0 && kt__key_accepts(op, key, (size_t)op->fallback_idx)) {
                pthread_mutex_unlock(&op->lock);
                return run_candidate(op, (size_t)op->fallback_idx, args, nargs, result);
            }
            pthread_cond_wait(&op->cond, &op->lock);
        }
        pthread_mutex_unlock(&op->lock);
        if (atomic_load_explicit(&d->state, memory_order_acquire) == KT__DONE)
            return how == LAUNCH ? run_candidate(op, d->winner, args, nargs, result) : KT_OK;
        return kt__err(d->fail_status, "%s", d->fail_msg ? d->fail_msg : "kt_op_call: tuning failed");
    }
    d = new_entry(op, key, len, hash);
    kt_status st = d ? reserve_done(op) : kt__err(KT_ERR_NO_MEMORY, "kt_op_call(op '%s'): out of memory", op->name);
    if (st == KT_OK) st = kt__table_insert(op, d);
    pthread_mutex_unlock(&op->lock);
    if (st != KT_OK) {
        kt__decision_free(d);
        return st;
    }
    return tune_and_run(op, d, args, nargs, result, how);
}

/* ---- calls ---------------------------------------------------------------------------------- */

/* The shared body of kt_op_call (result NULL), kt_op_call_result and kt_op_tune. */
static inline kt_status call(kt_op *op, const kt_arg *args, size_t nargs, kt_result *result, finish how) {
    if (KT__UNLIKELY(!atomic_load_explicit(&op->frozen, memory_order_acquire))) {
        kt_status st = kt__op_freeze(op);
        if (st != KT_OK) return st;
    }
    if (how == DECIDE_ONLY) {
        kt_status st = kt__check_args(op, args, nargs, "kt_op_tune");
        if (st != KT_OK) return st;
        int64_t key[KT__KEY_WORDS_MAX];
        size_t len = kt__key_compute(op, args, key);
        uint64_t hash = kt__key_hash(key, len);
        const kt_decision *d = kt__table_find(atomic_load_explicit(&op->table, memory_order_acquire), key, len, hash);
        if (d != NULL && atomic_load_explicit(&d->state, memory_order_acquire) == KT__DONE) return KT_OK;
        return miss(op, args, nargs, key, len, hash, NULL, DECIDE_ONLY);
    }
    if (KT__UNLIKELY(op->has_result != (result != NULL)))
        return kt__err(KT_ERR_STATE, result ? "kt_op_call_result(op '%s'): the op returns no result; use kt_op_call"
                                            : "kt_op_call(op '%s'): the op returns a result; use kt_op_call_result",
                       op->name);
    kt_status st = kt__check_args(op, args, nargs, result ? "kt_op_call_result" : "kt_op_call");
    if (KT__UNLIKELY(st != KT_OK)) return st;
    int64_t key[KT__KEY_WORDS_MAX];
    size_t len = kt__key_compute(op, args, key);
    uint64_t hash = kt__key_hash(key, len);
    const kt_decision *d = kt__table_find(atomic_load_explicit(&op->table, memory_order_acquire), key, len, hash);
    if (KT__LIKELY(d != NULL && atomic_load_explicit(&d->state, memory_order_acquire) == KT__DONE)) {
        int rc = result ? d->rfn(args, nargs, d->user, result) : d->fn(args, nargs, d->user);
        if (KT__LIKELY(rc == 0)) return KT_OK;
        if (result) kt_result_release(result);
        return kt__err(KT_ERR_CANDIDATE_FAILED, "kt_op_call(op '%s'): candidate '%s' returned %d", op->name,
                       op->cands[d->winner].name, rc);
    }
    return miss(op, args, nargs, key, len, hash, result, LAUNCH);
}

kt_status kt_op_call(kt_op *op, const kt_arg *args, size_t nargs) {
    if (KT__UNLIKELY(op == NULL)) return kt__err(KT_ERR_NULL, "kt_op_call: op is NULL");
    return call(op, args, nargs, NULL, LAUNCH);
}

kt_status kt_op_tune(kt_op *op, const kt_arg *args, size_t nargs) {
    if (op == NULL) return kt__err(KT_ERR_NULL, "kt_op_tune: op is NULL");
    return call(op, args, nargs, NULL, DECIDE_ONLY);
}

kt_status kt_op_call_result(kt_op *op, const kt_arg *args, size_t nargs, kt_result *result) {
    if (result == NULL) return kt__err(KT_ERR_NULL, "kt_op_call_result: result is NULL");
    memset(result, 0, sizeof *result);
    if (op == NULL) return kt__err(KT_ERR_NULL, "kt_op_call_result: op is NULL");
    return call(op, args, nargs, result, LAUNCH);
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
    const kt_decision *d = index < op->ndone ? op->done[index] : NULL;
    pthread_mutex_unlock(&m->lock);
    return d;
}

size_t kt_decision_winner(const kt_decision *d) { return d ? d->winner : 0; }
kt_decision_source kt_decision_source_of(const kt_decision *d) { return d ? d->source : 0; }
size_t kt_decision_key_len(const kt_decision *d) { return d ? d->nuser : 0; }
int64_t kt_decision_key(const kt_decision *d, size_t index) { return (d && index < d->nuser) ? d->key[index] : 0; }
int kt_decision_validated(const kt_decision *d) { return d ? d->validated : 0; }
size_t kt_decision_peak_extra_bytes(const kt_decision *d) { return d ? d->peak_extra : 0; }

kt_outcome kt_decision_outcome(const kt_decision *d, size_t c) {
    return (d && c < d->ncand) ? d->results[c].outcome : KT_OUTCOME_NOT_RUN;
}
double kt_decision_time_ns(const kt_decision *d, size_t c) { return (d && c < d->ncand) ? d->results[c].time_ns : -1; }
unsigned kt_decision_runs(const kt_decision *d, size_t c) { return (d && c < d->ncand) ? d->results[c].runs : 0; }
int kt_decision_fail_code(const kt_decision *d, size_t c) { return (d && c < d->ncand) ? d->results[c].fail_code : 0; }
const char *kt_decision_message(const kt_decision *d, size_t c) {
    return (d && c < d->ncand) ? d->results[c].message : NULL;
}
