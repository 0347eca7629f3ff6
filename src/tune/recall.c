/*
 * recall.c - decisions that outlive the process: the tuner's side of the persistent cache.
 *
 * The store (src/store/) keeps records; this file decides what identifies them and whether a
 * record may be used:
 *   - identity: op name, candidate-set hash (the op's signature and key, every candidate's
 *     name, kind and version, for natives the build of the object holding the function, and
 *     for variant groups their source, kernel name, options, space and the backend's compiler
 *     identity), the device fingerprint (driver included), the library version and the tuning
 *     key (validity mask words included);
 *   - a record is used only if its winner is a candidate of the op that accepts the key, and, for
 *     a variant group, a configuration of today's space for these arguments that builds; any
 *     other record is rejected, counted and logged, never launched;
 *   - a rejected record lends nothing: the key is measured from scratch (none of that record's
 *     units' times, runs or failures is reused), and the reason is kept on the new decision
 *     (kt_decision_cache_rejected) so that a program can say so without a log;
 *   - a unit is identified across candidate sets by a hash of its code (name, version, a
 *     native's build; a configuration's source, kernel, options, configuration, compiler), so that a tuning after a candidate was added measures
 *     only what is new, and a recorded failure is not tried again;
 *   - a decision records the confidence its race asked for (the context's race confidence; none
 *     for the other policies) and which units were finalists: measured and not dropped when
 *     the race stopped (the race drops a unit once it is slower than the best with that
 *     confidence), plus the winner. A record whose confidence is below what was asked for is
 *     not settled: an op that may measure (effort MEASURE) re-races its finalists, measuring
 *     them afresh (validated as usual), while every other unit keeps its recorded result
 *     without running or competing (a held unit); the new decision replaces the record. An op
 *     that may not measure (CACHE_ONLY) serves it as it is.
 * The store failing (locked past its timeout, a full disk) costs a warning, never the call.
 */
#include "tune/stages.h"
#include "space/space.h"
#include "store/store.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

_Static_assert(KT__STORE_KEY_MAX == KT__KEY_WORDS_MAX, "the store keeps every word of a key");

/* A unit's code identity, as hex: a native's name and build (the object holding its function),
 * a configuration's source, kernel, options, configuration and compiler; either's version. */
static void unit_hash(const kt_op *op, const kt__unit *u, const char *compiler, char out[33]) {
    const kt__cand *c = &op->cands[u->cand];
    uint64_t a = kt__hash_str(c->name, 0x756e6974ull), b = kt__hash_str(c->name, 0x636f6465ull);
    if (c->code_id[0]) a = kt__hash_str(c->code_id, a), b = kt__hash_str(c->code_id, b);
    if (c->version) a = kt__hash_str(c->version, kt__hash_str("version", a)), b = kt__hash_str(c->version, kt__hash_str("version", b));
    if (c->space) {
        a = kt__hash_str(u->text, kt__hash_str(c->kernel, kt__hash_str(c->source, a)));
        b = kt__hash_str(compiler, kt__hash_str(u->text, kt__hash_str(c->source, b)));
        for (size_t o = 0; o < c->noptions; o++) a = kt__hash_str(c->options[o], a);
    }
    kt__hex128(a, b, out);
}

/* The identity of d's record; strings point into op and d. */
static void identity(const kt_op *op, const kt_decision *d, kt__store_rec *id) {
    const kt_backend *b;
    void *bstate;
    size_t local;
    const char *fp;
    kt__op_backend(op, &b, &bstate, &local, &fp);
    *id = (kt__store_rec){.op = op->name,
                          .set_hash = (char *)op->set_hash,
                          .device = (char *)fp,
                          .version = (char *)kt_version_string(),
                          .key = (int64_t *)d->key,
                          .key_len = d->keylen};
}

/* Rejects d's record: counted, logged, and kept on d (out of memory loses the text only). */
static void reject(kt_op *op, kt_decision *d, const char *why) {
    atomic_fetch_add(&op->ctx->cache_rejected, 1);
    kt__log(op->ctx, KT_LOG_WARN, "op '%s': a recorded decision was rejected: %s", op->name, why);
    free(d->cache_rejected);
    d->cache_rejected = strdup(why);
}

kt_status kt__adopt_winner(kt_op *op, kt_decision *d, const kt_arg *args, const char *cand_name, const char *config, long *cand,
                           long *unit, char *why, size_t len) {
    *cand = *unit = -1;
    why[0] = '\0';
    for (size_t i = 0; i < op->ncands; i++)
        if (strcmp(op->cands[i].name, cand_name) == 0) *cand = (long)i;
    long c = *cand;
    if (c < 0) snprintf(why, len, "it names candidate '%.200s', which the op does not have", cand_name);
    else if ((op->cands[c].space == NULL) != (config == NULL))
        snprintf(why, len, "candidate '%.200s' %s", cand_name,
                 config ? "is native but the record gives a configuration" : "is a variant group but the record gives no configuration");
    else if (op->reference_only && c == kt__reference_candidate(op))
        snprintf(why, len, "candidate '%.200s' only validates the others", cand_name);
    else if (!kt__key_accepts(op, d->key, (size_t)c))
        snprintf(why, len, "candidate '%.200s' rejects these arguments", cand_name);
    if (why[0]) return KT_OK;
    kt_status st = kt__make_units(op, d, args, (size_t)c, config, NULL, NULL);
    if (st != KT_OK) return st;
    for (size_t i = 0; i < d->nunits; i++)
        if (d->units[i].cand == (size_t)c && (config == NULL || (d->units[i].text && strcmp(d->units[i].text, config) == 0))) *unit = (long)i;
    if (*unit < 0)
        snprintf(why, len, "configuration %.200s of '%.100s' is not in today's space for these arguments", config, cand_name);
    else if (!kt__unit_runnable(&d->units[*unit]))
        snprintf(why, len, "configuration %.200s of '%.100s' cannot run: %.200s", config ? config : "", cand_name,
                 d->units[*unit].r.message ? d->units[*unit].r.message : "not built");
    if (why[0]) *unit = -1;
    return KT_OK;
}

kt_status kt__persist_recall(kt_op *op, kt_decision *d, const kt_arg *args, bool *found) {
    *found = false;
    kt_cache *c = kt__context_cache(op->ctx);
    if (c == NULL) return KT_OK;
    kt__store_rec id, rec;
    identity(op, d, &id);
    kt_status st = kt__store_get(c, &id, &rec);
    if (st == KT_ERR_NOT_FOUND) return KT_OK;
    if (st == KT_ERR_INVALID_ARGUMENT) {
        char *why = kt__error_save();
        reject(op, d, why ? why : "out of memory");
        free(why);
        return KT_OK;
    }
    if (st != KT_OK) {
        kt__log(op->ctx, KT_LOG_WARN, "op '%s': reading the cache: %s", op->name, kt_last_error());
        return KT_OK;
    }
    char why[512] = "";
    long cand = -1, w = -1;
    st = kt__adopt_winner(op, d, args, rec.winner_candidate, rec.winner_config, &cand, &w, why, sizeof why);
    if (st != KT_OK) {
        kt__store_rec_free(&rec);
        return st;
    }
    if (!why[0]) {
        d->winner = (size_t)cand;
        d->winner_unit = (size_t)w;
        d->source = KT_SOURCE_CACHE;
        d->confidence = rec.confidence;
        d->requested_confidence = rec.requested_confidence;
        kt__cand_result *r = &d->units[w].r;
        r->outcome = KT_OUTCOME_MEASURED;
        r->time_ns = rec.time_ns;
        r->ci_low_ns = r->ci_high_ns = rec.time_ns;
        for (size_t i = 0; i < rec.nunits; i++) { /* its recorded interval */
            const kt__store_unit *su = &rec.units[i];
            if (strcmp(su->candidate, rec.winner_candidate) == 0 && (su->config == NULL) == (rec.winner_config == NULL) &&
                (su->config == NULL || strcmp(su->config, rec.winner_config) == 0) && su->ci_low_ns >= 0) {
                r->ci_low_ns = su->ci_low_ns;
                r->ci_high_ns = su->ci_high_ns;
            }
        }
        *found = true;
        if (kt__store_unsettled(&rec) && op->effective == KT_EFFORT_MEASURE && !op->no_rerace) { /* not settled: race again */
            kt__log(op->ctx, KT_LOG_INFO,
                    "op '%s': the recorded decision has confidence %.3f, below the %.3f its race asked for: re-racing its finalists",
                    op->name, rec.confidence, rec.requested_confidence);
            *found = false;
            kt__decision_reset(d);
            d->rerace = true;
            kt__store_rec_free(&rec);
            return KT_OK;
        }
    }
    if (why[0]) {
        kt__decision_reset(d); /* the units made for it */
        reject(op, d, why);
    } else {
        atomic_fetch_add(&op->ctx->cache_hits, 1);
    }
    kt__store_rec_free(&rec);
    return KT_OK;
}

/* The first line of a message, in buf. */
static char *first_line(const char *msg, char *buf, size_t len) {
    if (msg == NULL) return NULL;
    size_t n = strcspn(msg, "\n");
    if (n >= len) { /* cut, but never inside a UTF-8 character: the export must stay valid JSON text */
        n = len - 1;
        while (n > 0 && ((unsigned char)msg[n] & 0xc0) == 0x80) n--;
    }
    memcpy(buf, msg, n);
    buf[n] = '\0';
    for (size_t i = 0; i < n; i++) /* a terminal's colour codes and the like: what wisdom refuses */
        if (((unsigned char)buf[i] < 0x20 && buf[i] != '\t') || buf[i] == 0x7f) buf[i] = ' ';
    return buf;
}

void kt__persist_record(kt_op *op, kt_decision *d) {
    d->requested_confidence = d->policy == KT_POLICY_RACE ? op->ctx->measure.confidence : 0;
    if (kt_decision_below_confidence(d))
        kt__log(op->ctx, KT_LOG_WARN, "op '%s': decided with confidence %.3f, below the %.3f its race asked for%s", op->name,
                d->confidence, d->requested_confidence, kt__context_cache(op->ctx) ? ": the next tuning re-races its finalists" : "");
    kt_cache *c = kt__context_cache(op->ctx);
    if (c == NULL && op->ctx->remote_url == NULL) return;
    kt__store_rec rec;
    identity(op, d, &rec);
    kt__store_unit *units = calloc(d->nunits ? d->nunits : 1, sizeof *units);
    char (*hashes)[33] = calloc(d->nunits ? d->nunits : 1, sizeof *hashes);
    char (*lines)[256] = calloc(d->nunits ? d->nunits : 1, sizeof *lines);
    char compiler[1024];
    kt__op_compiler(op, compiler, sizeof compiler);
    if (units == NULL || hashes == NULL || lines == NULL) {
        kt__log(op->ctx, KT_LOG_WARN, "op '%s': out of memory recording a decision", op->name);
    } else {
        for (size_t i = 0; i < d->nunits; i++) {
            const kt__unit *u = &d->units[i];
            unit_hash(op, u, compiler, hashes[i]);
            units[i] = (kt__store_unit){.candidate = op->cands[u->cand].name,
                                        .config = u->text,
                                        .unit_hash = hashes[i],
                                        .outcome = u->env_failed ? KT_OUTCOME_NOT_RUN : (int)u->r.outcome,
                                        .time_ns = u->r.outcome == KT_OUTCOME_MEASURED ? u->r.time_ns : -1,
                                        .ci_low_ns = u->r.outcome == KT_OUTCOME_MEASURED ? u->r.ci_low_ns : -1,
                                        .ci_high_ns = u->r.outcome == KT_OUTCOME_MEASURED ? u->r.ci_high_ns : -1,
                                        .runs = u->r.runs,
                                        .warmups = u->r.warmups,
                                        .message = first_line(u->r.message, lines[i], sizeof lines[i]),
                                        .finalist = i == d->winner_unit || (u->r.finalist && u->r.outcome == KT_OUTCOME_MEASURED)};
        }
        const kt__unit *w = &d->units[d->winner_unit];
        rec.winner_candidate = op->cands[d->winner].name;
        rec.winner_config = w->text;
        rec.time_ns = w->r.time_ns;
        rec.confidence = d->confidence;
        rec.requested_confidence = d->requested_confidence > 0 ? d->requested_confidence : -1;
        rec.created = (int64_t)time(NULL);
        const kt_device *dev = &op->ctx->devices[op->device];
        char kinds[KT__KEY_USER_MAX + KT__KEY_AUTO_MAX + 1];
        kt__key_kinds(op, kinds);
        rec.arch = dev->arch;
        rec.vendor = dev->vendor;
        rec.key_kinds = kinds;
        const char *slash = w->artifact ? strrchr(w->artifact, '/') : NULL;
        rec.artifact = w->artifact ? (char *)(slash ? slash + 1 : w->artifact) : NULL;
        rec.compiler = compiler;
        rec.units = units;
        rec.nunits = d->nunits;
        if (c != NULL && kt__store_put(c, &rec) != KT_OK)
            kt__log(op->ctx, KT_LOG_WARN, "op '%s': recording the decision: %s", op->name, kt_last_error());
        kt__shared_publish(op, &rec); /* write-through to the fleet's cache, when there is one */
    }
    free(units);
    free(hashes);
    free(lines);
}

void kt__persist_progress(kt_op *op, kt_decision *d, size_t i, double ns) {
    kt_cache *c = kt__context_cache(op->ctx);
    if (c == NULL || i >= d->nunits) return;
    const kt__unit *u = &d->units[i];
    if (u->env_failed || u->recalled || u->r.outcome == KT_OUTCOME_NOT_RUN) return;
    if (u->r.outcome == KT_OUTCOME_MEASURED && !(ns > 0 && isfinite(ns))) return; /* not measured after all */
    kt__store_rec id;
    identity(op, d, &id);
    char compiler[1024], hash[33], line[256];
    kt__op_compiler(op, compiler, sizeof compiler);
    unit_hash(op, u, compiler, hash);
    bool measured = u->r.outcome == KT_OUTCOME_MEASURED;
    kt__store_unit su = {.candidate = op->cands[u->cand].name,
                         .config = u->text,
                         .unit_hash = hash,
                         .outcome = (int)u->r.outcome,
                         .time_ns = measured ? ns : -1,
                         .ci_low_ns = -1,
                         .ci_high_ns = -1,
                         .runs = u->r.runs,
                         .warmups = u->r.warmups,
                         .message = first_line(u->r.message, line, sizeof line)};
    if (kt__store_progress_put(c, &id, &su, 1) != KT_OK)
        kt__log(op->ctx, KT_LOG_WARN, "op '%s': recording a unit's result as it came: %s", op->name, kt_last_error());
}

/* Takes what the store recorded of a unit: a measurement (recalled: not run again, its time
 * competes with today's, or, held, is kept without competing) or a failure (not built or run
 * again). A held unit that was not measured is not run either. */
static void apply_unit(kt__unit *u, const kt__store_unit *su, bool held) {
    if (su->outcome == KT_OUTCOME_MEASURED && su->time_ns > 0) {
        u->recalled = true;
        u->held = held;
        u->r.time_ns = su->time_ns;
        u->r.ci_low_ns = su->ci_low_ns;
        u->r.ci_high_ns = su->ci_high_ns;
    } else if (kt__outcome_failed(su->outcome)) {
        u->r.outcome = (kt_outcome)su->outcome;
        u->r.fail_kind = KT_FAIL_RECORDED; /* the store keeps no kind nor code */
        char msg[512];
        snprintf(msg, sizeof msg, "recorded in the cache: %s", su->message ? su->message : "failed");
        free(u->r.message);
        u->r.message = strdup(msg);
    } else if (held) {
        u->recalled = u->held = true; /* not measured then (a budget), not now: time_ns stays negative */
    }
}

/* The unit of rec with this hash, or NULL. */
static const kt__store_unit *rec_unit(const kt__store_rec *rec, const char *hash) {
    for (size_t i = 0; i < rec->nunits; i++)
        if (strcmp(rec->units[i].unit_hash, hash) == 0) return &rec->units[i];
    return NULL;
}

static bool is_rec_winner(const kt__store_rec *rec, const kt__store_unit *su) {
    return strcmp(su->candidate, rec->winner_candidate) == 0 && (su->config == NULL) == (rec->winner_config == NULL) &&
           (su->config == NULL || strcmp(su->config, rec->winner_config) == 0);
}

void kt__persist_units(kt_op *op, kt_decision *d) {
    kt_cache *c = kt__context_cache(op->ctx);
    if (c == NULL) return;
    kt__store_rec id, own = {0};
    identity(op, d, &id);
    /* re-racing: the record being re-raced says which units are finalists */
    bool rerace = d->rerace && kt__store_get(c, &id, &own) == KT_OK;
    /* a rejected record lends nothing; the re-raced one lends only through `own` */
    bool skip_own = d->cache_rejected != NULL || d->rerace;
    char compiler[1024];
    kt__op_compiler(op, compiler, sizeof compiler);
    for (size_t i = 0; i < d->nunits; i++) {
        kt__unit *u = &d->units[i];
        if (u->r.outcome != KT_OUTCOME_NOT_RUN) continue;
        char h[33];
        unit_hash(op, u, compiler, h);
        const kt__store_unit *ou = rerace ? rec_unit(&own, h) : NULL;
        if (ou != NULL) {
            if (!ou->finalist && !is_rec_winner(&own, ou)) apply_unit(u, ou, true); /* finalists: measured afresh */
            continue;
        }
        kt__store_unit su;
        if (kt__store_get_unit(c, &id, h, skip_own, &su) != KT_OK) continue;
        apply_unit(u, &su, false);
        kt__store_unit_free(&su);
    }
    kt__store_rec_free(&own);
}

/* ---- what the caller can ask of a decision ----------------------------------------------- */

const char *kt_decision_cache_rejected(const kt_decision *d) { return d ? d->cache_rejected : NULL; }

double kt_decision_requested_confidence(const kt_decision *d) {
    return d && (d->source == KT_SOURCE_MEASURED || d->source == KT_SOURCE_CACHE) && d->requested_confidence > 0 ? d->requested_confidence
                                                                                                                 : -1;
}

int kt_decision_below_confidence(const kt_decision *d) {
    double want = kt_decision_requested_confidence(d);
    return want > 0 && d->confidence >= 0 && d->confidence < want;
}

int kt_decision_reraced(const kt_decision *d) { return d && d->rerace && d->source == KT_SOURCE_MEASURED; }

int kt_decision_unit_finalist(const kt_decision *d, size_t u) {
    if (d == NULL || u >= d->nunits || d->units == NULL) return 0;
    if (d->source != KT_SOURCE_MEASURED && d->source != KT_SOURCE_CACHE) return 0;
    return u == d->winner_unit || (d->units[u].r.finalist && d->units[u].r.outcome == KT_OUTCOME_MEASURED);
}
