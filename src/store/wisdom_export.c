/*
 * wisdom_export.c - kt_cache_export: the stored decisions as a wisdom document (JSON, through
 * jansson), every unit with them, in a stable order (op, device, candidate set, version, key).
 * The format is described in kerntune.h (kt_cache_export); wisdom_import.c reads it back.
 */
#ifndef KT_NO_CACHE

#include "store/store_int.h"

#include <stdlib.h>
#include <string.h>

/* Adds value under name to obj; a NULL value or a failed insertion clears *ok. */
static void jset(json_t *obj, const char *name, json_t *value, bool *ok) {
    if (value == NULL || json_object_set_new(obj, name, value) != 0) *ok = false;
}

static json_t *jstr_or_null(const char *s) { return s ? json_string(s) : json_null(); }

static json_t *unit_json(const kt__store_unit *u) {
    json_t *o = json_object();
    if (o == NULL) return NULL;
    bool ok = true;
    jset(o, "candidate", json_string(u->candidate), &ok);
    jset(o, "config", jstr_or_null(u->config), &ok);
    jset(o, "unit_hash", json_string(u->unit_hash), &ok);
    jset(o, "outcome", json_string(kt_outcome_name((kt_outcome)u->outcome)), &ok);
    jset(o, "time_ns", json_real(u->time_ns), &ok);
    if (u->ci_low_ns < 0 || u->ci_high_ns < 0) {
        jset(o, "ci_ns", json_null(), &ok);
    } else {
        json_t *ci = json_array();
        if (ci == NULL || json_array_append_new(ci, json_real(u->ci_low_ns)) != 0 ||
            json_array_append_new(ci, json_real(u->ci_high_ns)) != 0)
            ok = false;
        jset(o, "ci_ns", ci, &ok);
    }
    jset(o, "runs", json_integer(u->runs), &ok);
    jset(o, "warmups", json_integer(u->warmups), &ok);
    jset(o, "message", jstr_or_null(u->message), &ok);
    jset(o, "finalist", json_boolean(u->finalist), &ok);
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *rec_json(const kt__store_rec *r) {
    json_t *o = json_object(), *key = json_array(), *winner = json_object(), *units = json_array();
    bool ok = o && key && winner && units;
    if (!ok) {
        json_decref(o);
        json_decref(key);
        json_decref(winner);
        json_decref(units);
        return NULL;
    }
    jset(o, "op", json_string(r->op), &ok);
    jset(o, "candidate_set", json_string(r->set_hash), &ok);
    jset(o, "device", json_string(r->device), &ok);
    if (r->arch && r->arch[0]) jset(o, "arch", json_string(r->arch), &ok);
    if (r->vendor && r->vendor[0]) jset(o, "vendor", json_string(r->vendor), &ok);
    jset(o, "library_version", json_string(r->version), &ok);
    for (size_t i = 0; i < r->key_len; i++)
        if (json_array_append_new(key, json_integer(r->key[i])) != 0) ok = false;
    jset(o, "key", key, &ok);
    if (r->key_kinds && r->key_kinds[0]) jset(o, "key_kinds", json_string(r->key_kinds), &ok);
    if (r->artifact && r->artifact[0]) jset(o, "artifact", json_string(r->artifact), &ok);
    if (r->compiler && r->compiler[0]) jset(o, "compiler", json_string(r->compiler), &ok);
    jset(winner, "candidate", json_string(r->winner_candidate), &ok);
    jset(winner, "config", jstr_or_null(r->winner_config), &ok);
    jset(o, "winner", winner, &ok);
    jset(o, "time_ns", json_real(r->time_ns), &ok);
    jset(o, "confidence", r->confidence < 0 ? json_null() : json_real(r->confidence), &ok);
    jset(o, "requested_confidence", r->requested_confidence < 0 ? json_null() : json_real(r->requested_confidence), &ok);
    jset(o, "created", json_integer(r->created), &ok);
    for (size_t i = 0; i < r->nunits; i++)
        if (json_array_append_new(units, unit_json(&r->units[i])) != 0) ok = false;
    jset(o, "units", units, &ok);
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static kt_status export_tx(kt_cache *c, void *arg, const char *where) {
    kt__filter_job *j = arg;
    json_array_clear(j->entries);
    sqlite3_stmt *s;
    kt_status st = kt__db_prepare(c,
                           "SELECT " KT__DECISION_COLS " FROM decisions WHERE " KT__FILTER
                           " ORDER BY op, device, set_hash, version, key",
                           &s, where);
    if (st != KT_OK) return st;
    kt__db_bind_text(s, 1, j->op);
    kt__db_bind_text(s, 2, j->device);
    for (;;) {
        bool row = false;
        st = kt__db_step(c, s, &row, where);
        if (st != KT_OK || !row) break;
        kt__store_rec r;
        st = kt__rows_load_decision(c, s, &r, true, where);
        if (st != KT_OK) {
            kt__err(st, "%s (decision %lld; remove it, e.g. with 'kerntune cache rm --op NAME')", kt_last_error(),
                    (long long)sqlite3_column_int64(s, 0));
            break;
        }
        json_t *e = rec_json(&r);
        kt__store_rec_free(&r);
        if (e == NULL || json_array_append_new(j->entries, e) != 0) {
            st = kt__err(KT_ERR_NO_MEMORY, "%s: out of memory building the document", where);
            break;
        }
    }
    sqlite3_finalize(s);
    return st;
}

typedef struct outbuf {
    char *p;
    size_t n, cap;
    bool failed;
} outbuf;

static int outbuf_add(const char *text, size_t n, void *arg) {
    outbuf *b = arg;
    if (b->n + n + 2 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n + 2) cap *= 2;
        char *p = realloc(b->p, cap);
        if (p == NULL) {
            b->failed = true;
            return -1;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, text, n);
    b->n += n;
    return 0;
}

kt_status kt_cache_export(kt_cache *cache, const char *op, const char *device, char **json) {
    if (json != NULL) *json = NULL;
    if (cache == NULL || json == NULL) return kt__err(KT_ERR_NULL, "kt_cache_export: cache or json is NULL");
    char where[600];
    kt__rec_where(where, sizeof where, "kt_cache_export", cache);
    json_t *doc = json_object(), *entries = json_array();
    bool ok = doc && entries;
    if (!ok) {
        json_decref(doc);
        json_decref(entries);
        return kt__err(KT_ERR_NO_MEMORY, "%s: out of memory allocating the document", where);
    }
    kt__filter_job j = {.op = op, .device = device, .entries = entries};
    pthread_mutex_lock(&cache->lock);
    kt_status st = kt__db_tx(cache, false, export_tx, &j, where);
    pthread_mutex_unlock(&cache->lock);
    jset(doc, "kerntune_wisdom", json_integer(1), &ok);
    jset(doc, "library_version", json_string(kt_version_string()), &ok);
    jset(doc, "entries", entries, &ok);
    outbuf b = {0};
    if (st == KT_OK && (!ok || json_dump_callback(doc, outbuf_add, &b, JSON_INDENT(2) | JSON_PRESERVE_ORDER) != 0 || b.failed))
        st = kt__err(KT_ERR_NO_MEMORY, "%s: out of memory writing the document", where);
    json_decref(doc);
    if (st != KT_OK) {
        free(b.p);
        return st;
    }
    b.p[b.n++] = '\n';
    b.p[b.n] = '\0';
    *json = b.p;
    return KT_OK;
}

#endif /* KT_NO_CACHE */

#ifndef KT_NO_CACHE
kt_status kt__store_rec_json(const kt__store_rec *r, char **text) {
    *text = NULL;
    json_t *e = rec_json(r);
    if (e) *text = json_dumps(e, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(e);
    return *text ? KT_OK : kt__err(KT_ERR_NO_MEMORY, "out of memory writing a decision as text");
}
#endif
