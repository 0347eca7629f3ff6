/*
 * fallback.c - an answer for a key nobody tuned, when tuning is off for it (effort CACHE_ONLY).
 *
 * In the spirit of CLBlast's database, which falls back from the device to its architecture,
 * its vendor and a default, the rules are tried in order and the first winner that is valid for
 * the call's arguments answers (kerntune.h, kt_decision_source):
 *   1. NEAREST: a decision of the same op, candidate set and device for another key whose
 *      category components all equal this key's; the least distance first, the distance being
 *      the Euclidean one over the size components in log2 (kt_op_key_scale), ties broken by the
 *      key's words in order, so the answer is the same in every process;
 *   2. ARCH: this very key (its components; the validity mask may differ) decided on another
 *      device of the same architecture, the newest first;
 *   3. VENDOR: the same, on a device of the same vendor;
 *   4. otherwise the caller (miss.c) takes the op's default.
 * Decisions come from the op's own finished ones (measured or recalled: never an answer of
 * these rules), from the tables of decisions registered for its device (aot.c), and from every
 * decision the persistent cache holds for the op name and library
 * version (kt__store_list; another candidate set's too for rules 2 and 3, whose compiler
 * identity differs by device). A decision whose device, architecture or key kinds are unknown
 * (recorded before schema 6) answers none of them. Valid means what a recalled record must be:
 * a candidate of today's op that accepts these arguments, and for a variant group a
 * configuration of today's space for them that builds (kt__adopt_winner); an invalid winner is
 * passed over, never launched. Nothing is measured: the answer's unit keeps outcome NOT_RUN.
 */
#include "tune/stages.h"
#include "store/store.h"

#include <kerntune/aot.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A decision made for another key or on another device. Strings are owned by the record they
 * come from (or duplicated for the op's own). */
typedef struct known {
    const char *device, *arch, *vendor, *kinds, *set_hash;
    const int64_t *key;
    size_t keylen;
    const char *cand, *config;
    int64_t created;
    double dist;
    size_t ncomp; /* the key components compared */
    kt_decision_source source; /* the rule it answers by (rank) */
} known;

/* A decision of the persistent cache (its strings stay the record's). */
static known known_of(const kt__store_rec *r) {
    return (known){.device = r->device, .arch = r->arch, .vendor = r->vendor, .kinds = r->key_kinds, .set_hash = r->set_hash,
                   .key = r->key, .keylen = r->key_len, .cand = r->winner_candidate, .config = r->winner_config, .created = r->created};
}

static double log2_of(int64_t v) { return log2(v < 1 ? 1.0 : (double)v); }

/* Whether k's components match key's by the kinds (categories equal), with its distance. */
static bool comparable(const known *k, const int64_t *key, size_t ncomp, const char *kinds, double *dist) {
    if (k->keylen < ncomp || strcmp(k->kinds, kinds) != 0) return false;
    double sum = 0;
    for (size_t i = 0; i < ncomp; i++) {
        if (kinds[i] == 'c') {
            if (k->key[i] != key[i]) return false;
        } else {
            double d = log2_of(k->key[i]) - log2_of(key[i]);
            sum += d * d;
        }
    }
    *dist = sqrt(sum);
    return true;
}

static int by_distance(const void *a, const void *b) {
    const known *x = *(const known *const *)a, *y = *(const known *const *)b;
    if (x->dist != y->dist) return x->dist < y->dist ? -1 : 1;
    for (size_t i = 0; i < x->ncomp; i++)
        if (x->key[i] != y->key[i]) return x->key[i] < y->key[i] ? -1 : 1;
    return strcmp(x->device, y->device);
}

static int by_recency(const void *a, const void *b) {
    const known *x = *(const known *const *)a, *y = *(const known *const *)b;
    if (x->created != y->created) return x->created > y->created ? -1 : 1;
    return strcmp(x->device, y->device);
}

/* Orders the decisions of all that may answer key (ncomp components of kinds) on device (its
 * candidate set set_hash, NULL for any; its arch and vendor, "" when unknown) into order, by
 * rule then within each rule, setting each one's source and distance; returns how many. */
static size_t rank(known *all, size_t n, const char *device, const char *set_hash, const char *arch, const char *vendor,
                   const int64_t *key, size_t ncomp, const char *kinds, known **order) {
    size_t m = 0;
    for (size_t i = 0; i < n; i++) { /* 1. the nearest key on this device, of this candidate set */
        all[i].ncomp = ncomp;
        if (strcmp(all[i].device, device) == 0 && (set_hash == NULL || strcmp(all[i].set_hash, set_hash) == 0) &&
            comparable(&all[i], key, ncomp, kinds, &all[i].dist)) {
            all[i].source = KT_SOURCE_NEAREST;
            order[m++] = &all[i];
        }
    }
    qsort(order, m, sizeof *order, by_distance);
    for (int rule = 0; rule < 2; rule++) { /* 2, 3. this key on another device of the same architecture, then vendor */
        const char *mine = rule == 0 ? arch : vendor;
        if (mine[0] == '\0') continue;
        size_t first = m;
        for (size_t i = 0; i < n; i++) {
            const char *theirs = rule == 0 ? all[i].arch : all[i].vendor;
            if (strcmp(all[i].device, device) == 0 || strcmp(theirs, mine) != 0 || all[i].keylen < ncomp ||
                memcmp(all[i].key, key, ncomp * sizeof *key) != 0 || (rule == 1 && arch[0] && strcmp(all[i].arch, arch) == 0))
                continue; /* (one of this architecture was ranked by rule 2 already) */
            all[i].source = rule == 0 ? KT_SOURCE_ARCH : KT_SOURCE_VENDOR;
            all[i].dist = 0;
            order[m++] = &all[i];
        }
        qsort(order + first, m - first, sizeof *order, by_recency);
    }
    return m;
}

/* What is known of an op's decisions: its own and its cache's, ranked for one key. */
typedef struct ranked {
    known *all, **order;
    size_t m;                /* how many are ranked in order */
    char **owned;            /* the op's own decisions' strings */
    size_t nowned;
    kt__store_rec *recs;
    size_t nrecs;
    char kinds[KT__KEY_USER_MAX + KT__KEY_AUTO_MAX + 1];
} ranked;

static void ranked_free(ranked *r) {
    free(r->all);
    free(r->order);
    for (size_t i = 0; i < r->nrecs; i++) kt__store_rec_free(&r->recs[i]);
    free(r->recs);
    for (size_t i = 0; r->owned && i < r->nowned; i++) free(r->owned[i]);
    free(r->owned);
    memset(r, 0, sizeof *r);
}

/* Gathers the op's finished decisions (measured or recalled: never another rule's answer) and
 * its cache's, and ranks them for key. A cache that cannot be read is skipped with a warning;
 * an own decision that cannot be copied (out of memory) too. Errors: out of memory only. */
static kt_status gather(kt_op *op, const int64_t *key, const char *where, ranked *r) {
    memset(r, 0, sizeof *r);
    const kt_device *dev = &op->ctx->devices[op->device];
    kt__key_kinds(op, r->kinds);
    pthread_mutex_lock(&op->lock);
    size_t nown = op->ndone, k = 0;
    known *own = calloc(nown ? nown : 1, sizeof *own);
    r->owned = calloc(2 * (nown ? nown : 1), sizeof *r->owned);
    bool oom = own == NULL || r->owned == NULL;
    for (size_t i = 0; !oom && i < nown; i++) {
        const kt_decision *e = op->done[i];
        if (e->source != KT_SOURCE_MEASURED && e->source != KT_SOURCE_CACHE) continue;
        const kt__unit *w = &e->units[e->winner_unit];
        char *cand = strdup(op->cands[e->winner].name), *config = w->text ? strdup(w->text) : NULL;
        if (cand == NULL || (w->text && config == NULL)) {
            free(cand), free(config);
            oom = true;
            break;
        }
        r->owned[r->nowned++] = cand;
        if (config) r->owned[r->nowned++] = config;
        own[k++] = (known){.device = dev->fingerprint, .arch = dev->arch, .vendor = dev->vendor, .kinds = r->kinds, .set_hash = op->set_hash,
                           .key = e->key, .keylen = e->keylen, .cand = cand, .config = config, .created = INT64_MAX};
    }
    pthread_mutex_unlock(&op->lock);
    if (oom && own && r->owned) kt__log(op->ctx, KT_LOG_WARN, "op '%s': out of memory copying its decisions: some were not considered", op->name);
    kt_cache *c = kt__context_cache(op->ctx);
    if (c != NULL && kt__store_list(c, op->name, kt_version_string(), &r->recs, &r->nrecs) != KT_OK) {
        kt__log(op->ctx, KT_LOG_WARN, "op '%s': reading the cache for a key nobody tuned: %s", op->name, kt_last_error());
        r->recs = NULL, r->nrecs = 0;
    }
    size_t ntab = kt__aot_entries(op, NULL, 0, NULL); /* the registered tables' entries of this device */
    const kt_aot_entry **tab = calloc(ntab + 1, sizeof *tab);
    const kt_aot_table **tabs = calloc(ntab + 1, sizeof *tabs);
    if (tab && tabs) kt__aot_entries(op, tab, ntab, tabs);
    r->all = calloc(k + ntab + r->nrecs + 1, sizeof *r->all);
    r->order = calloc(k + ntab + r->nrecs + 1, sizeof *r->order);
    if (own == NULL || r->owned == NULL || r->all == NULL || r->order == NULL || tab == NULL || tabs == NULL) {
        free(own), free(tab), free(tabs);
        ranked_free(r);
        return kt__err(KT_ERR_NO_MEMORY, "%s(op '%s'): out of memory answering a key nobody tuned", where, op->name);
    }
    size_t n = 0;
    for (size_t i = 0; i < k; i++) r->all[n++] = own[i];
    free(own);
    for (size_t i = 0; i < ntab; i++) {
        const kt_aot_entry *e = tab[i];
        r->all[n++] = (known){.device = tabs[i]->device, .arch = tabs[i]->arch ? tabs[i]->arch : "", .vendor = tabs[i]->vendor ? tabs[i]->vendor : "",
                              .kinds = e->key_kinds ? e->key_kinds : "", .set_hash = e->set_hash, .key = e->key, .keylen = e->key_len,
                              .cand = e->candidate, .config = e->config, .created = INT64_MAX - 1};
    }
    free(tab), free(tabs);
    for (size_t i = 0; i < r->nrecs; i++) r->all[n++] = known_of(&r->recs[i]);
    r->m = rank(r->all, n, dev->fingerprint, op->set_hash, dev->arch, dev->vendor, key, op->nkeys, r->kinds, r->order);
    return KT_OK;
}

static void log_answer(const kt_op *op, kt_decision_source source, const int64_t *key, size_t n, const char *device) {
    char text[KT__KEYTEXT_MAX];
    kt__rec_key_text(key, n, text);
    kt__log(op->ctx, KT_LOG_INFO, "op '%s': a key nobody tuned is answered by rule '%s': the winner of key [%s] on device '%.200s'",
            op->name, kt_decision_source_name(source), text, device);
}

kt_status kt__fallback(kt_op *op, kt_decision *d, const kt_arg *args, bool *found) {
    *found = false;
    size_t ncomp = op->nkeys;
    ranked rk;
    kt_status st = gather(op, d->key, d->where, &rk);
    if (st != KT_OK) return st;
    size_t m = rk.m;
    known **order = rk.order;
    for (size_t i = 0; i < m && st == KT_OK && !*found; i++) { /* the first valid winner answers */
        const known *k = order[i];
        char why[512];
        long cand, unit;
        st = kt__adopt_winner(op, d, args, k->cand, k->config, &cand, &unit, why, sizeof why);
        if (st != KT_OK) break;
        if (unit < 0) {
            kt__decision_reset(d);
            kt__log(op->ctx, KT_LOG_DEBUG, "op '%s': the decision of device '%.200s' cannot answer by rule '%s': %s", op->name,
                    k->device, kt_decision_source_name(k->source), why);
            continue;
        }
        if ((d->borrowed_device = strdup(k->device)) == NULL) {
            kt__decision_reset(d);
            st = kt__err(KT_ERR_NO_MEMORY, "%s(op '%s'): out of memory", d->where, op->name);
            break;
        }
        d->winner = (size_t)cand;
        d->winner_unit = (size_t)unit;
        d->source = k->source;
        d->borrowed_len = ncomp;
        memcpy(d->borrowed_key, k->key, ncomp * sizeof *k->key);
        *found = true;
    }
    if (st == KT_OK && *found) log_answer(op, d->source, d->borrowed_key, d->borrowed_len, d->borrowed_device);
    ranked_free(&rk);
    return st;
}

long kt__fallback_native(kt_op *op, const int64_t *key, const char *where, kt_decision_source *source) {
    ranked rk;
    if (gather(op, key, where, &rk) != KT_OK) return -1; /* (out of memory: the fixed fallback answers) */
    long idx = -1;
    for (size_t i = 0; i < rk.m && idx < 0; i++) {
        const known *k = rk.order[i];
        for (size_t c = 0; c < op->ncands && idx < 0; c++)
            if (k->config == NULL && op->cands[c].space == NULL && strcmp(op->cands[c].name, k->cand) == 0 && kt__key_accepts(op, key, c) &&
                !(op->reference_only && (long)c == kt__reference_candidate(op))) {
                idx = (long)c;
                *source = k->source;
                log_answer(op, k->source, k->key, op->nkeys, k->device);
            }
    }
    ranked_free(&rk);
    return idx;
}

/* ---- explaining it, from the cache alone ----------------------------------------------------- */

#ifndef KT_NO_CACHE
#include <jansson.h>

static json_t *key_json(const int64_t *key, size_t n) {
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        if (json_array_append_new(a, json_integer(key[i])) != 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}

static json_t *winner_json(const char *cand, const char *config) {
    return json_pack("{s:s, s:o}", "candidate", cand, "config", config ? json_string(config) : json_null());
}

kt_status kt_cache_explain(kt_cache *cache, const char *op, const char *device, const char *arch, const char *vendor, const int64_t *key,
                           size_t nkey, char **json) {
    if (json) *json = NULL;
    if (cache == NULL || op == NULL || device == NULL || json == NULL || (key == NULL && nkey > 0))
        return kt__err(KT_ERR_NULL, "kt_cache_explain: cache, op, device, key or json is NULL");
    if (nkey > KT__KEY_USER_MAX + KT__KEY_AUTO_MAX)
        return kt__err(KT_ERR_LIMIT, "kt_cache_explain(op '%.128s'): the key has %zu components; at most %d", op, nkey,
                       KT__KEY_USER_MAX + KT__KEY_AUTO_MAX);
    kt__store_rec *recs = NULL;
    size_t n = 0;
    kt_status st = kt__store_list(cache, op, kt_version_string(), &recs, &n);
    if (st != KT_OK) return st;
    known *all = calloc(n + 1, sizeof *all);
    known **order = calloc(n + 1, sizeof *order);
    json_t *doc = NULL;
    if (all == NULL || order == NULL) {
        st = kt__err(KT_ERR_NO_MEMORY, "kt_cache_explain(op '%.128s'): out of memory", op);
        goto out;
    }
    /* the device's kinds, architecture and vendor: its newest decision's with a key this long */
    const char *kinds = NULL, *my_arch = arch, *my_vendor = vendor;
    const kt__store_rec *exact = NULL;
    for (size_t i = n; i-- > 0;) {
        const kt__store_rec *r = &recs[i];
        all[i] = known_of(r);
        if (strcmp(r->device, device) != 0) continue;
        if (kinds == NULL && strlen(r->key_kinds) == nkey && nkey > 0) kinds = r->key_kinds;
        if (my_arch == NULL && r->arch[0]) my_arch = r->arch;
        if (my_vendor == NULL && r->vendor[0]) my_vendor = r->vendor;
        if (exact == NULL && strlen(r->key_kinds) == nkey && r->key_len >= nkey && memcmp(r->key, key, nkey * sizeof *key) == 0) exact = r;
    }
    if (kinds == NULL) /* no decision of this device has such a key: another device's kinds */
        for (size_t i = n; i-- > 0 && kinds == NULL;)
            if (strlen(recs[i].key_kinds) == nkey && nkey > 0) kinds = recs[i].key_kinds;
    size_t m = rank(all, n, device, NULL, my_arch ? my_arch : "", my_vendor ? my_vendor : "", key, nkey, kinds ? kinds : "", order);
    if (kinds == NULL) { /* nothing to compare with: no nearest key */
        size_t k = 0;
        for (size_t i = 0; i < m; i++)
            if (order[i]->source != KT_SOURCE_NEAREST) order[k++] = order[i];
        m = k;
    }
    json_t *cands = json_array();
    doc = json_pack("{s:s, s:s, s:s, s:s, s:o, s:o, s:o}", "op", op, "device", device, "arch", my_arch ? my_arch : "", "vendor",
                    my_vendor ? my_vendor : "", "key", key_json(key, nkey), "recorded",
                    exact ? json_pack("{s:o, s:o}", "key", key_json(exact->key, exact->key_len), "winner",
                                      winner_json(exact->winner_candidate, exact->winner_config))
                          : json_null(),
                    "candidates", cands);
    for (size_t i = 0; doc && i < m; i++) {
        const known *k = order[i];
        json_t *c = json_pack("{s:s, s:s, s:o, s:f, s:o}", "rule", kt_decision_source_name(k->source), "device", k->device, "key",
                              key_json(k->key, nkey), "distance", k->dist, "winner", winner_json(k->cand, k->config));
        if (c == NULL || json_array_append_new(cands, c) != 0) {
            json_decref(doc);
            doc = NULL;
        }
    }
    if (doc == NULL || (*json = json_dumps(doc, JSON_INDENT(2))) == NULL)
        st = kt__err(KT_ERR_NO_MEMORY, "kt_cache_explain(op '%.128s'): out of memory building the document", op);
out:
    json_decref(doc);
    free(all);
    free(order);
    for (size_t i = 0; i < n; i++) kt__store_rec_free(&recs[i]);
    free(recs);
    return st;
}
#endif
