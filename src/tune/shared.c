/*
 * shared.c - the fleet's shared decision cache, in front of the persistent one (kerntune/cache.h,
 * kt_context_set_remote; the transport is remote/redis.c).
 *
 *   - read-through: a key the local cache misses is asked of the remote under the decision's
 *     whole identity (op, candidate set, device fingerprint, library version, key words: the
 *     key of remote.h is a SHA-256 of them). The entry's signature is checked by the transport;
 *     here its identity must be the one asked for, and its winner valid for today's op and these
 *     arguments (kt__adopt_winner, as a recalled record). A good entry decides the key (source
 *     REMOTE) and is written to the local cache; any other is counted, logged and never launched.
 *   - write-through: a decision measured here is published (kt__persist_record calls
 *     kt__shared_publish with the record it writes locally).
 *   - one tuning per key across processes: before measuring, a process takes the key's lease
 *     (SET NX PX, 30 s); one that finds it held polls for the result every 20 ms, and takes the
 *     lease itself (and measures) when the holder's lapses without a result.
 *   - never a failure: an unreachable remote (remote.h: bounded time, then down for 5 s) costs a
 *     log line and a count; the op decides locally.
 */
#include "tune/stages.h"
#include "remote/remote.h"
#include "store/store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LEASE_MS 30000
#define POLL_MS 20

/* The context's remote, opened at the first need; NULL when none (or it cannot be: said once). */
static kt__remote *remote_of(kt_context *ctx) {
    if (ctx->remote_url == NULL) return NULL;
    if (atomic_load_explicit(&ctx->remote_tried, memory_order_acquire)) return ctx->remote;
    pthread_mutex_lock(&ctx->cache_lock);
    if (!atomic_load(&ctx->remote_tried)) {
        if (kt__remote_create(ctx->remote_url, ctx->remote_key, ctx->remote_key_len, ctx->remote_timeout_ms, &ctx->remote) != KT_OK)
            kt__log(ctx, KT_LOG_WARN, "the shared cache is left out: %s", kt_last_error());
        atomic_store_explicit(&ctx->remote_tried, 1, memory_order_release);
    }
    pthread_mutex_unlock(&ctx->cache_lock);
    return ctx->remote;
}

/* The remote key of d's identity. */
static void id_of(const kt_op *op, const int64_t *key, size_t keylen, char id[96]) {
    char text[KT__KEYTEXT_MAX];
    kt__rec_key_text(key, keylen, text); /* as the local store keys it */
    kt__remote_id(op->name, op->set_hash, op->ctx->devices[op->device].fingerprint, kt_version_string(), text, id);
}

static void failed(kt_op *op, const char *what) {
    atomic_fetch_add(&op->ctx->remote_errors, 1);
    kt__log(op->ctx, KT_LOG_WARN, "op '%s': the shared cache: %s: %s; deciding here", op->name, what, kt_last_error());
}

static void rejected(kt_op *op, const char *why) {
    atomic_fetch_add(&op->ctx->remote_rejected, 1);
    kt__log(op->ctx, KT_LOG_WARN, "op '%s': an entry of the shared cache was rejected: %s", op->name, why);
}

/* Whether rec is the decision of d's identity. */
static bool same_identity(const kt_op *op, const kt_decision *d, const kt__store_rec *rec) {
    return strcmp(rec->op, op->name) == 0 && strcmp(rec->set_hash, op->set_hash) == 0 &&
           strcmp(rec->device, op->ctx->devices[op->device].fingerprint) == 0 && strcmp(rec->version, kt_version_string()) == 0 &&
           rec->key_len == d->keylen && (d->keylen == 0 || memcmp(rec->key, d->key, d->keylen * sizeof *d->key) == 0);
}

kt_status kt__shared_recall(kt_op *op, kt_decision *d, const kt_arg *args, bool *found) {
    *found = false;
    kt__remote *r = remote_of(op->ctx);
    if (r == NULL) return KT_OK;
    char id[96], *text = NULL;
    id_of(op, d->key, d->keylen, id);
    kt_status st = kt__remote_get(r, id, &text);
    if (st == KT_ERR_NOT_FOUND) return KT_OK;
    if (st == KT_ERR_BACKEND) {
        failed(op, "reading");
        return KT_OK;
    }
    if (st != KT_OK) {
        rejected(op, kt_last_error());
        return KT_OK;
    }
    kt__store_rec rec;
    st = kt__store_rec_parse(text, "shared entry", &rec);
    free(text);
    if (st != KT_OK) {
        rejected(op, kt_last_error());
        return KT_OK;
    }
    char why[512] = "";
    long cand = -1, unit = -1;
    if (!same_identity(op, d, &rec)) snprintf(why, sizeof why, "its identity is not the one asked for (op '%.100s', device '%.100s')", rec.op, rec.device);
    else st = kt__adopt_winner(op, d, args, rec.winner_candidate, rec.winner_config, &cand, &unit, why, sizeof why);
    if (st == KT_OK && why[0] == '\0') {
        d->winner = (size_t)cand;
        d->winner_unit = (size_t)unit;
        d->source = KT_SOURCE_REMOTE;
        d->confidence = rec.confidence;
        d->requested_confidence = rec.requested_confidence;
        kt__cand_result *u = &d->units[unit].r;
        u->outcome = KT_OUTCOME_MEASURED;
        u->time_ns = u->ci_low_ns = u->ci_high_ns = rec.time_ns;
        kt_cache *c = kt__context_cache(op->ctx);
        if (c != NULL && kt__store_put(c, &rec) != KT_OK) /* kept here too: the next process asks nobody */
            kt__log(op->ctx, KT_LOG_WARN, "op '%s': keeping a shared decision in the cache: %s", op->name, kt_last_error());
        atomic_fetch_add(&op->ctx->remote_hits, 1);
        *found = true;
    } else if (st == KT_OK) {
        kt__decision_reset(d);
        rejected(op, why);
    }
    kt__store_rec_free(&rec);
    return st;
}

void kt__shared_publish(kt_op *op, const kt__store_rec *rec) {
    kt__remote *r = remote_of(op->ctx);
    if (r == NULL) return;
    char id[96], *text = NULL;
    id_of(op, rec->key, rec->key_len, id);
    if (kt__store_rec_json(rec, &text) != KT_OK || kt__remote_put(r, id, text) != KT_OK) failed(op, "publishing");
    free(text);
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

static double now_ms(void) { return kt__now_s() * 1e3; }

/* With the lease held: a result published between this process's miss and its lease (by the
 * holder before) is taken instead of measuring again. */
static kt_status recheck(kt_op *op, kt_decision *d, const kt_arg *args, kt__remote *r, const char *id, bool *found, bool *held) {
    kt_status st = kt__shared_recall(op, d, args, found);
    if (st != KT_OK || *found) {
        kt__remote_unlease(r, id);
        *held = false;
    }
    return st;
}

kt_status kt__shared_claim(kt_op *op, kt_decision *d, const kt_arg *args, bool *found, bool *held) {
    *found = *held = false;
    kt__remote *r = remote_of(op->ctx);
    if (r == NULL) return KT_OK;
    char id[96];
    id_of(op, d->key, d->keylen, id);
    double since = now_ms();
    for (bool said = false;; said = true) {
        if (kt__remote_lease(r, id, LEASE_MS, held) != KT_OK) {
            failed(op, "taking the key's lease");
            return KT_OK; /* measured here, unshared */
        }
        if (*held) return recheck(op, d, args, r, id, found, held);
        if (!said) kt__log(op->ctx, KT_LOG_INFO, "op '%s': another process is tuning this key: waiting for its result", op->name);
        while (now_ms() - since < LEASE_MS) { /* another process tunes it: its result, or its lease lapses */
            sleep_ms(POLL_MS);
            kt_status st = kt__shared_recall(op, d, args, found);
            if (st != KT_OK || *found) return st;
            if (kt__remote_lease(r, id, LEASE_MS, held) == KT_OK && *held) return recheck(op, d, args, r, id, found, held); /* it gave up, or died */
        }
        since = now_ms();
    }
}

void kt__shared_release(kt_op *op, const kt_decision *d) {
    kt__remote *r = remote_of(op->ctx);
    if (r == NULL) return;
    char id[96];
    id_of(op, d->key, d->keylen, id);
    kt__remote_unlease(r, id);
}
