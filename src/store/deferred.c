/*
 * deferred.c - keys deferred by misses under capture (kt_op_set_capture_miss): the tuner's calls
 * (kt__store_defer_put, _list, _remove) and kt_cache_deferred, their JSON listing. A deferred
 * key is identified as a decision is (op, set_hash, device, version, key); its row holds the
 * call's arguments as text, which only the tuner reads (tune/deferred.c), and is removed when the
 * key is tuned. Each call takes the handle's mutex and runs its work in one transaction.
 */
#include "store/store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void kt__store_deferred_free(kt__store_deferred *d, size_t n) {
    if (d == NULL) return;
    for (size_t i = 0; i < n; i++) {
        kt__store_rec_free(&d[i].id);
        free(d[i].args);
    }
    free(d);
}

#ifndef KT_NO_CACHE

static kt_status need_id(const kt__store_rec *id, bool key, const char *where) {
    const char *names[] = {"op", "set_hash", "device", "version"};
    const char *values[] = {id->op, id->set_hash, id->device, id->version};
    for (size_t i = 0; i < 4; i++) {
        if (values[i] == NULL) return kt__err(KT_ERR_NULL, "%s: %s is NULL", where, names[i]);
        if (values[i][0] == '\0') return kt__err(KT_ERR_INVALID_ARGUMENT, "%s: %s is empty", where, names[i]);
    }
    if (!key) return KT_OK;
    if (id->key_len > KT__STORE_KEY_MAX)
        return kt__err(KT_ERR_LIMIT, "%s: the key has %zu words; at most %d", where, id->key_len, KT__STORE_KEY_MAX);
    if (id->key_len > 0 && id->key == NULL) return kt__err(KT_ERR_NULL, "%s: key is NULL with key_len %zu", where, id->key_len);
    return KT_OK;
}

typedef struct defer_job {
    const kt__store_rec *id;
    char key[KT__KEYTEXT_MAX];
    const char *args;
    const char *op, *device; /* kt_cache_deferred's filter */
    kt__store_deferred *list;
    size_t n;
} defer_job;

static kt_status put_tx(kt_cache *c, void *arg, const char *where) {
    defer_job *j = arg;
    sqlite3_stmt *s;
    kt_status st = kt__db_prepare(c,
                                  "INSERT OR IGNORE INTO deferred (" KT__DEFERRED_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                                  &s, where);
    if (st != KT_OK) return st;
    kt__rec_bind_identity(s, j->id, j->key);
    kt__db_bind_text(s, 6, j->args);
    sqlite3_bind_int64(s, 7, (int64_t)time(NULL));
    st = kt__db_step(c, s, NULL, where);
    sqlite3_finalize(s);
    return st;
}

kt_status kt__store_defer_put(kt_cache *c, const kt__store_rec *id, const char *args) {
    if (c == NULL || id == NULL || args == NULL) return kt__err(KT_ERR_NULL, "kt__store_defer_put: cache, id or args is NULL");
    char where[200];
    snprintf(where, sizeof where, "kt__store_defer_put(op '%.128s')", id->op ? id->op : "(null)");
    kt_status st = need_id(id, true, where);
    if (st != KT_OK) return st;
    defer_job j = {.id = id, .args = args};
    kt__rec_key_text(id->key, id->key_len, j.key);
    pthread_mutex_lock(&c->lock);
    st = kt__db_tx(c, true, put_tx, &j, where);
    pthread_mutex_unlock(&c->lock);
    return st;
}

/* Reads the rows s selects into j->list (j->n); cleans up on failure, so the transaction may
 * be run again. */
static kt_status read_rows(kt_cache *c, sqlite3_stmt *s, defer_job *j, const char *where) {
    size_t cap = 0;
    kt_status st;
    for (;;) {
        bool row = false;
        st = kt__db_step(c, s, &row, where);
        if (st != KT_OK || !row) break;
        if (j->n == cap) {
            size_t ncap = cap ? 2 * cap : 8;
            kt__store_deferred *nl = realloc(j->list, ncap * sizeof *nl);
            if (nl == NULL) {
                st = kt__err(KT_ERR_NO_MEMORY, "%s: out of memory growing the deferred keys past %zu", where, j->n);
                break;
            }
            j->list = nl;
            cap = ncap;
        }
        st = kt__rows_load_deferred(s, &j->list[j->n], where);
        if (st != KT_OK) break;
        j->n++;
    }
    if (st != KT_OK) {
        kt__store_deferred_free(j->list, j->n);
        j->list = NULL;
        j->n = 0;
    }
    return st;
}

static kt_status list_tx(kt_cache *c, void *arg, const char *where) {
    defer_job *j = arg;
    sqlite3_stmt *s;
    kt_status st = kt__db_prepare(c,
                                  "SELECT " KT__DEFERRED_COLS " FROM deferred"
                                  " WHERE op = ?1 AND set_hash = ?2 AND device = ?3 AND version = ?4 ORDER BY created, key",
                                  &s, where);
    if (st != KT_OK) return st;
    kt__db_bind_text(s, 1, j->id->op);
    kt__db_bind_text(s, 2, j->id->set_hash);
    kt__db_bind_text(s, 3, j->id->device);
    kt__db_bind_text(s, 4, j->id->version);
    st = read_rows(c, s, j, where);
    sqlite3_finalize(s);
    return st;
}

kt_status kt__store_defer_list(kt_cache *c, const kt__store_rec *id, kt__store_deferred **out, size_t *n) {
    if (out != NULL) *out = NULL;
    if (n != NULL) *n = 0;
    if (c == NULL || id == NULL || out == NULL || n == NULL)
        return kt__err(KT_ERR_NULL, "kt__store_defer_list: cache, id, out or n is NULL");
    char where[200];
    snprintf(where, sizeof where, "kt__store_defer_list(op '%.128s')", id->op ? id->op : "(null)");
    kt_status st = need_id(id, false, where);
    if (st != KT_OK) return st;
    defer_job j = {.id = id};
    pthread_mutex_lock(&c->lock);
    st = kt__db_tx(c, false, list_tx, &j, where);
    pthread_mutex_unlock(&c->lock);
    if (st == KT_OK) {
        *out = j.list;
        *n = j.n;
    }
    return st;
}

static kt_status remove_tx(kt_cache *c, void *arg, const char *where) {
    defer_job *j = arg;
    sqlite3_stmt *s;
    kt_status st = kt__db_prepare(c, "DELETE FROM deferred WHERE " KT__IDENTITY, &s, where);
    if (st != KT_OK) return st;
    kt__rec_bind_identity(s, j->id, j->key);
    st = kt__db_step(c, s, NULL, where);
    sqlite3_finalize(s);
    return st;
}

kt_status kt__store_defer_remove(kt_cache *c, const kt__store_rec *id) {
    if (c == NULL || id == NULL) return kt__err(KT_ERR_NULL, "kt__store_defer_remove: cache or id is NULL");
    char where[200];
    snprintf(where, sizeof where, "kt__store_defer_remove(op '%.128s')", id->op ? id->op : "(null)");
    kt_status st = need_id(id, true, where);
    if (st != KT_OK) return st;
    defer_job j = {.id = id};
    kt__rec_key_text(id->key, id->key_len, j.key);
    pthread_mutex_lock(&c->lock);
    st = kt__db_tx(c, true, remove_tx, &j, where);
    pthread_mutex_unlock(&c->lock);
    return st;
}

/* ---- kt_cache_deferred --------------------------------------------------------------------- */

static kt_status filter_tx(kt_cache *c, void *arg, const char *where) {
    defer_job *j = arg;
    sqlite3_stmt *s;
    kt_status st = kt__db_prepare(c,
                                  "SELECT " KT__DEFERRED_COLS " FROM deferred WHERE " KT__FILTER
                                  " ORDER BY op, device, set_hash, version, created, key",
                                  &s, where);
    if (st != KT_OK) return st;
    kt__db_bind_text(s, 1, j->op);
    kt__db_bind_text(s, 2, j->device);
    st = read_rows(c, s, j, where);
    sqlite3_finalize(s);
    return st;
}

/* One entry of kt_cache_deferred's document; NULL when out of memory. */
static json_t *entry_json(const kt__store_deferred *d) {
    json_t *o = json_object(), *key = json_array();
    bool ok = o != NULL && key != NULL;
    for (size_t i = 0; ok && i < d->id.key_len; i++) ok = json_array_append_new(key, json_integer(d->id.key[i])) == 0;
    if (ok) ok = json_object_set_new(o, "op", json_string(d->id.op)) == 0;
    if (ok) ok = json_object_set_new(o, "candidate_set", json_string(d->id.set_hash)) == 0;
    if (ok) ok = json_object_set_new(o, "device", json_string(d->id.device)) == 0;
    if (ok) ok = json_object_set_new(o, "library_version", json_string(d->id.version)) == 0;
    if (ok) ok = json_object_set(o, "key", key) == 0;
    if (ok) ok = json_object_set_new(o, "args", json_string(d->args)) == 0;
    if (ok) ok = json_object_set_new(o, "created", json_integer(d->created)) == 0;
    json_decref(key);
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

kt_status kt_cache_deferred(kt_cache *cache, const char *op, const char *device, char **json) {
    if (json != NULL) *json = NULL;
    if (cache == NULL || json == NULL) return kt__err(KT_ERR_NULL, "kt_cache_deferred: cache or json is NULL");
    char where[600];
    kt__rec_where(where, sizeof where, "kt_cache_deferred", cache);
    defer_job j = {.op = op, .device = device};
    pthread_mutex_lock(&cache->lock);
    kt_status st = kt__db_tx(cache, false, filter_tx, &j, where);
    pthread_mutex_unlock(&cache->lock);
    if (st != KT_OK) return st;
    json_t *doc = json_object(), *entries = json_array();
    bool ok = doc != NULL && entries != NULL && json_object_set_new(doc, "kerntune_deferred", json_integer(1)) == 0 &&
              json_object_set(doc, "entries", entries) == 0;
    for (size_t i = 0; ok && i < j.n; i++) {
        json_t *e = entry_json(&j.list[i]);
        ok = e != NULL && json_array_append_new(entries, e) == 0;
    }
    kt__store_deferred_free(j.list, j.n);
    json_decref(entries);
    char *text = ok ? json_dumps(doc, JSON_INDENT(2)) : NULL;
    json_decref(doc);
    if (text == NULL) return kt__err(KT_ERR_NO_MEMORY, "%s: out of memory writing the document", where);
    *json = text;
    return KT_OK;
}

#endif /* KT_NO_CACHE */
