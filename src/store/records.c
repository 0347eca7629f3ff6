/*
 * records.c - single decisions in the persistent cache: what the tuner reads and writes
 * (kt__store_get, kt__store_get_unit, kt__store_put, with the checks a record passes before
 * it is written), and kt_cache_count and kt_cache_remove. Each call takes the handle's mutex
 * and runs its work in one transaction (db.c).
 */
#include "store/store_int.h"

#include <time.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kt__store_unit_free(kt__store_unit *u) {
    if (u == NULL) return;
    free(u->candidate);
    free(u->config);
    free(u->unit_hash);
    free(u->message);
    memset(u, 0, sizeof *u);
}

bool kt__store_unsettled(const kt__store_rec *r) {
    return r->confidence >= 0 && r->requested_confidence >= 0 && r->confidence < r->requested_confidence;
}

void kt__store_rec_free(kt__store_rec *r) {
    if (r == NULL) return;
    free(r->op);
    free(r->set_hash);
    free(r->device);
    free(r->version);
    free(r->key);
    free(r->winner_candidate);
    free(r->winner_config);
    free(r->arch);
    free(r->vendor);
    free(r->key_kinds);
    free(r->artifact);
    free(r->compiler);
    for (size_t i = 0; i < r->nunits; i++) kt__store_unit_free(&r->units[i]);
    free(r->units);
    memset(r, 0, sizeof *r);
}

void kt__rec_key_text(const int64_t *key, size_t n, char *buf) {
    size_t at = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++)
        at += (size_t)snprintf(buf + at, KT__KEYTEXT_MAX - at, "%s%" PRId64, i ? "," : "", key[i]);
}

#ifndef KT_NO_CACHE


/* ---- checking records before they are written ---------------------------------------------- */

static kt_status need_name(const char *v, const char *field, const char *where) {
    if (v == NULL) return kt__err(KT_ERR_NULL, "%s: %s is NULL", where, field);
    if (*v == '\0') return kt__err(KT_ERR_INVALID_ARGUMENT, "%s: %s is empty", where, field);
    return KT_OK;
}

static kt_status need_identity(const kt__store_rec *r, const char *where) {
    kt_status st = need_name(r->op, "op", where);
    if (st == KT_OK) st = need_name(r->set_hash, "set_hash", where);
    if (st == KT_OK) st = need_name(r->device, "device", where);
    if (st == KT_OK) st = need_name(r->version, "version", where);
    if (st != KT_OK) return st;
    if (r->key_len > KT__STORE_KEY_MAX)
        return kt__err(KT_ERR_LIMIT, "%s: the key has %zu words; at most %d", where, r->key_len, KT__STORE_KEY_MAX);
    if (r->key_len > 0 && r->key == NULL) return kt__err(KT_ERR_NULL, "%s: key is NULL with key_len %zu", where, r->key_len);
    return KT_OK;
}

static kt_status need_finite(double v, const char *field, const char *where) {
    if (!isfinite(v)) return kt__err(KT_ERR_INVALID_ARGUMENT, "%s: %s is %g; expected a finite number", where, field, v);
    return KT_OK;
}

static kt_status check_rec(const kt__store_rec *r, const char *where) {
    kt_status st = need_identity(r, where);
    if (st == KT_OK) st = need_name(r->winner_candidate, "winner_candidate", where);
    if (st == KT_OK) st = need_finite(r->time_ns, "time_ns", where);
    if (st == KT_OK && r->key_kinds && (strspn(r->key_kinds, "sc") != strlen(r->key_kinds) || strlen(r->key_kinds) > r->key_len))
        st = kt__err(KT_ERR_INVALID_ARGUMENT, "%s: key_kinds is '%.60s'; expected one letter s or c per key component, at most %zu", where,
                     r->key_kinds, r->key_len);
    if (st == KT_OK && r->artifact && (strchr(r->artifact, '/') || strlen(r->artifact) > 255 || strcmp(r->artifact, ".") == 0 ||
                        strcmp(r->artifact, "..") == 0))
        st = kt__err(KT_ERR_INVALID_ARGUMENT, "%s: artifact is '%.60s'; expected a file name of at most 255 characters", where, r->artifact);
    if (st == KT_OK) st = need_finite(r->confidence, "confidence", where);
    if (st == KT_OK && r->confidence > 1)
        st = kt__err(KT_ERR_INVALID_ARGUMENT, "%s: confidence is %g; expected 0 to 1, or negative for unknown", where, r->confidence);
    if (st == KT_OK) st = need_finite(r->requested_confidence, "requested_confidence", where);
    if (st == KT_OK && r->requested_confidence > 1)
        st = kt__err(KT_ERR_INVALID_ARGUMENT, "%s: requested_confidence is %g; expected 0 to 1, or negative for none", where,
                     r->requested_confidence);
    if (st == KT_OK && r->nunits > 0 && r->units == NULL) st = kt__err(KT_ERR_NULL, "%s: units is NULL with nunits %zu", where, r->nunits);
    for (size_t i = 0; st == KT_OK && i < r->nunits; i++) {
        const kt__store_unit *u = &r->units[i];
        char f[64];
        snprintf(f, sizeof f, "units[%zu].candidate", i);
        st = need_name(u->candidate, f, where);
        snprintf(f, sizeof f, "units[%zu].unit_hash", i);
        if (st == KT_OK) st = need_name(u->unit_hash, f, where);
        if (st == KT_OK && (u->outcome < 0 || u->outcome >= KT__NOUTCOMES))
            st = kt__err(KT_ERR_INVALID_ARGUMENT, "%s: units[%zu].outcome is %d; expected a kt_outcome (0 to 7)", where, i, u->outcome);
        snprintf(f, sizeof f, "units[%zu].time_ns", i);
        if (st == KT_OK) st = need_finite(u->time_ns, f, where);
        snprintf(f, sizeof f, "units[%zu].ci_low_ns", i);
        if (st == KT_OK) st = need_finite(u->ci_low_ns, f, where);
        snprintf(f, sizeof f, "units[%zu].ci_high_ns", i);
        if (st == KT_OK) st = need_finite(u->ci_high_ns, f, where);
    }
    return st;
}

/* ---- single records: the tuner's calls ----------------------------------------------------- */

void kt__rec_bind_identity(sqlite3_stmt *s, const kt__store_rec *r, const char *key) {
    kt__db_bind_text(s, 1, r->op);
    kt__db_bind_text(s, 2, r->set_hash);
    kt__db_bind_text(s, 3, r->device);
    kt__db_bind_text(s, 4, r->version);
    kt__db_bind_text(s, 5, key);
}

typedef struct get_job {
    const kt__store_rec *id;
    const char *unit_hash;
    char key[KT__KEYTEXT_MAX];
    kt__store_rec *rec;
    kt__store_unit *unit;
    bool skip_own; /* get_unit: not from the decision of id's own identity */
} get_job;

static kt_status get_tx(kt_cache *c, void *arg, const char *where) {
    get_job *j = arg;
    sqlite3_stmt *s;
    kt_status st = kt__db_prepare(c, "SELECT " KT__DECISION_COLS " FROM decisions WHERE " KT__IDENTITY, &s, where);
    if (st != KT_OK) return st;
    kt__rec_bind_identity(s, j->id, j->key);
    bool row = false;
    st = kt__db_step(c, s, &row, where);
    if (st == KT_OK && !row) st = kt__err(KT_ERR_NOT_FOUND, "%s: no decision recorded for that identity", where);
    if (st == KT_OK) st = kt__rows_load_decision(c, s, j->rec, true, where);
    sqlite3_finalize(s);
    return st;
}

kt_status kt__store_get(kt_cache *c, const kt__store_rec *id, kt__store_rec *out) {
    if (out != NULL) memset(out, 0, sizeof *out);
    if (c == NULL || id == NULL || out == NULL) return kt__err(KT_ERR_NULL, "kt__store_get: cache, id or out is NULL");
    char where[200];
    snprintf(where, sizeof where, "kt__store_get(op '%.128s')", id->op ? id->op : "(null)");
    kt_status st = need_identity(id, where);
    if (st != KT_OK) return st;
    get_job j = {.id = id, .rec = out};
    kt__rec_key_text(id->key, id->key_len, j.key);
    pthread_mutex_lock(&c->lock);
    st = kt__db_tx(c, false, get_tx, &j, where);
    pthread_mutex_unlock(&c->lock);
    return st;
}

static kt_status get_unit_tx(kt_cache *c, void *arg, const char *where) {
    get_job *j = arg;
    sqlite3_stmt *s;
    /* a recorded decision's unit, or a unit an unfinished tuning recorded as it went: the newest */
    kt_status st = kt__db_prepare(c,
                           "SELECT " KT__UNIT_COLS ", idx FROM ("
                           " SELECT u.candidate, u.config, u.unit_hash, u.outcome, u.time_ns, u.ci_low_ns, u.ci_high_ns,"
                           " u.runs, u.warmups, u.message, u.finalist, u.idx, d.created AS at, d.id AS seq"
                           " FROM units u JOIN decisions d ON d.id = u.decision"
                           " WHERE u.unit_hash = ?1 AND d.op = ?2 AND d.device = ?3 AND d.version = ?4 AND d.key = ?5"
                           " AND (?6 IS NULL OR d.set_hash IS NOT ?6)"
                           " UNION ALL"
                           " SELECT " KT__UNIT_COLS ", 0, created, 0 FROM progress"
                           " WHERE unit_hash = ?1 AND op = ?2 AND device = ?3 AND version = ?4 AND key = ?5"
                           " AND (?6 IS NULL OR set_hash IS NOT ?6))"
                           " ORDER BY at DESC, seq DESC, idx LIMIT 1",
                           &s, where);
    if (st != KT_OK) return st;
    kt__db_bind_text(s, 1, j->unit_hash);
    kt__db_bind_text(s, 2, j->id->op);
    kt__db_bind_text(s, 3, j->id->device);
    kt__db_bind_text(s, 4, j->id->version);
    kt__db_bind_text(s, 5, j->key);
    kt__db_bind_text(s, 6, j->skip_own ? j->id->set_hash : NULL);
    bool row = false;
    st = kt__db_step(c, s, &row, where);
    if (st == KT_OK && !row) st = kt__err(KT_ERR_NOT_FOUND, "%s: no unit recorded with that hash", where);
    kt__rows_at r = {where, "units", st == KT_OK ? (long)sqlite3_column_int64(s, 11) : 0};
    if (st == KT_OK) st = kt__rows_load_unit(&r, s, 0, j->unit);
    sqlite3_finalize(s);
    return st;
}

kt_status kt__store_get_unit(kt_cache *c, const kt__store_rec *id, const char *unit_hash, bool skip_own, kt__store_unit *out) {
    if (out != NULL) memset(out, 0, sizeof *out);
    if (c == NULL || id == NULL || out == NULL || unit_hash == NULL)
        return kt__err(KT_ERR_NULL, "kt__store_get_unit: cache, id, unit_hash or out is NULL");
    char where[200];
    snprintf(where, sizeof where, "kt__store_get_unit(op '%.128s')", id->op ? id->op : "(null)");
    kt_status st = need_name(id->op, "op", where);
    if (st == KT_OK) st = need_name(id->device, "device", where);
    if (st == KT_OK) st = need_name(id->version, "version", where);
    if (st == KT_OK && id->key_len > KT__STORE_KEY_MAX)
        st = kt__err(KT_ERR_LIMIT, "%s: the key has %zu words; at most %d", where, id->key_len, KT__STORE_KEY_MAX);
    if (st == KT_OK && id->key_len > 0 && id->key == NULL) st = kt__err(KT_ERR_NULL, "%s: key is NULL", where);
    if (st == KT_OK && skip_own) st = need_name(id->set_hash, "set_hash", where);
    if (st != KT_OK) return st;
    get_job j = {.id = id, .unit_hash = unit_hash, .unit = out, .skip_own = skip_own};
    kt__rec_key_text(id->key, id->key_len, j.key);
    pthread_mutex_lock(&c->lock);
    st = kt__db_tx(c, false, get_unit_tx, &j, where);
    pthread_mutex_unlock(&c->lock);
    return st;
}

/* Binds a unit's columns (KT__UNIT_COLS) to parameters first.. of s. */
static void bind_unit(sqlite3_stmt *s, int first, const kt__store_unit *u) {
    kt__db_bind_text(s, first, u->candidate);
    kt__db_bind_text(s, first + 1, u->config);
    kt__db_bind_text(s, first + 2, u->unit_hash);
    sqlite3_bind_int(s, first + 3, u->outcome);
    sqlite3_bind_double(s, first + 4, u->time_ns);
    sqlite3_bind_double(s, first + 5, u->ci_low_ns);
    sqlite3_bind_double(s, first + 6, u->ci_high_ns);
    sqlite3_bind_int64(s, first + 7, u->runs);
    sqlite3_bind_int64(s, first + 8, u->warmups);
    kt__db_bind_text(s, first + 9, u->message);
    sqlite3_bind_int(s, first + 10, u->finalist ? 1 : 0);
}

/* Deletes the decision of rec's identity, its units and its tuning's progress, then inserts rec;
 * inside a write transaction. */
kt_status kt__rec_write(kt_cache *c, const kt__store_rec *rec, const char *where) {
    char key[KT__KEYTEXT_MAX];
    kt__rec_key_text(rec->key, rec->key_len, key);
    sqlite3_stmt *s = NULL;
    kt_status st = kt__db_prepare(c, "DELETE FROM progress WHERE " KT__IDENTITY, &s, where);
    if (st == KT_OK) {
        kt__rec_bind_identity(s, rec, key);
        st = kt__db_step(c, s, NULL, where);
    }
    sqlite3_finalize(s);
    s = NULL;
    if (st == KT_OK) st = kt__db_prepare(c, "DELETE FROM units WHERE decision IN (SELECT id FROM decisions WHERE " KT__IDENTITY ")", &s, where);
    if (st == KT_OK) {
        kt__rec_bind_identity(s, rec, key);
        st = kt__db_step(c, s, NULL, where);
    }
    sqlite3_finalize(s);
    s = NULL;
    if (st == KT_OK) st = kt__db_prepare(c, "DELETE FROM decisions WHERE " KT__IDENTITY, &s, where);
    if (st == KT_OK) {
        kt__rec_bind_identity(s, rec, key);
        st = kt__db_step(c, s, NULL, where);
    }
    sqlite3_finalize(s);
    s = NULL;
    if (st == KT_OK)
        st = kt__db_prepare(c,
                     "INSERT INTO decisions (op, set_hash, device, version, key, winner_candidate, winner_config,"
                     " time_ns, confidence, created, requested_confidence, arch, vendor, key_kinds, artifact, compiler)"
                     " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
                     &s, where);
    if (st == KT_OK) {
        kt__rec_bind_identity(s, rec, key);
        kt__db_bind_text(s, 6, rec->winner_candidate);
        kt__db_bind_text(s, 7, rec->winner_config);
        sqlite3_bind_double(s, 8, rec->time_ns);
        sqlite3_bind_double(s, 9, rec->confidence < 0 ? -1.0 : rec->confidence);
        sqlite3_bind_int64(s, 10, rec->created);
        sqlite3_bind_double(s, 11, rec->requested_confidence < 0 ? -1.0 : rec->requested_confidence);
        kt__db_bind_text(s, 12, rec->arch ? rec->arch : "");
        kt__db_bind_text(s, 13, rec->vendor ? rec->vendor : "");
        kt__db_bind_text(s, 14, rec->key_kinds ? rec->key_kinds : "");
        kt__db_bind_text(s, 15, rec->artifact ? rec->artifact : "");
        kt__db_bind_text(s, 16, rec->compiler ? rec->compiler : "");
        st = kt__db_step(c, s, NULL, where);
    }
    sqlite3_finalize(s);
    s = NULL;
    if (st != KT_OK) return st;
    int64_t id = sqlite3_last_insert_rowid(c->db);
    st = kt__db_prepare(c,
                 "INSERT INTO units (decision, idx, " KT__UNIT_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
                 &s, where);
    for (size_t i = 0; st == KT_OK && i < rec->nunits; i++) {
        const kt__store_unit *u = &rec->units[i];
        sqlite3_reset(s);
        sqlite3_bind_int64(s, 1, id);
        sqlite3_bind_int64(s, 2, (int64_t)i);
        bind_unit(s, 3, u);
        st = kt__db_step(c, s, NULL, where);
    }
    sqlite3_finalize(s);
    return st;
}

typedef struct list_job {
    const char *op, *version;
    kt__store_rec *recs;
    size_t n, cap;
} list_job;

static kt_status list_tx(kt_cache *c, void *arg, const char *where) {
    list_job *j = arg;
    for (size_t i = 0; i < j->n; i++) kt__store_rec_free(&j->recs[i]); /* a retried transaction starts over */
    j->n = 0;
    sqlite3_stmt *s;
    kt_status st = kt__db_prepare(c, "SELECT " KT__DECISION_COLS " FROM decisions WHERE op = ?1 AND version = ?2 ORDER BY id", &s, where);
    if (st != KT_OK) return st;
    kt__db_bind_text(s, 1, j->op);
    kt__db_bind_text(s, 2, j->version);
    for (;;) {
        bool row = false;
        st = kt__db_step(c, s, &row, where);
        if (st != KT_OK || !row) break;
        if (j->n == j->cap) {
            size_t cap = j->cap ? 2 * j->cap : 16;
            kt__store_rec *p = realloc(j->recs, cap * sizeof *p);
            if (p == NULL) {
                st = kt__err(KT_ERR_NO_MEMORY, "%s: out of memory listing decisions", where);
                break;
            }
            j->recs = p, j->cap = cap;
        }
        if (kt__rows_load_decision(c, s, &j->recs[j->n], false, where) == KT_OK) j->n++; /* an unreadable row answers nothing */
    }
    sqlite3_finalize(s);
    return st;
}

kt_status kt__store_list(kt_cache *c, const char *op, const char *version, kt__store_rec **out, size_t *n) {
    *out = NULL, *n = 0;
    if (c == NULL || op == NULL || version == NULL) return kt__err(KT_ERR_NULL, "kt__store_list: cache, op or version is NULL");
    char where[200];
    snprintf(where, sizeof where, "kt__store_list(op '%.128s')", op);
    list_job j = {op, version, NULL, 0, 0};
    pthread_mutex_lock(&c->lock);
    kt_status st = kt__db_tx(c, false, list_tx, &j, where);
    pthread_mutex_unlock(&c->lock);
    if (st != KT_OK) {
        for (size_t i = 0; i < j.n; i++) kt__store_rec_free(&j.recs[i]);
        free(j.recs);
        return st;
    }
    *out = j.recs, *n = j.n;
    return KT_OK;
}

static kt_status put_tx(kt_cache *c, void *arg, const char *where) { return kt__rec_write(c, arg, where); }

kt_status kt__store_put(kt_cache *c, const kt__store_rec *rec) {
    if (c == NULL || rec == NULL) return kt__err(KT_ERR_NULL, "kt__store_put: cache or rec is NULL");
    char where[200];
    snprintf(where, sizeof where, "kt__store_put(op '%.128s')", rec->op ? rec->op : "(null)");
    kt_status st = check_rec(rec, where);
    if (st != KT_OK) return st;
    pthread_mutex_lock(&c->lock);
    st = kt__db_tx(c, true, put_tx, (void *)rec, where);
    pthread_mutex_unlock(&c->lock);
    return st;
}

/* ---- a tuning's progress ------------------------------------------------------------------- */

typedef struct progress_job {
    const kt__store_rec *id;
    const kt__store_unit *units;
    size_t n;
} progress_job;

static kt_status progress_tx(kt_cache *c, void *arg, const char *where) {
    progress_job *j = arg;
    char key[KT__KEYTEXT_MAX];
    kt__rec_key_text(j->id->key, j->id->key_len, key);
    sqlite3_stmt *s = NULL;
    kt_status st = kt__db_prepare(c,
                                  "INSERT OR REPLACE INTO progress (op, set_hash, device, version, key, " KT__UNIT_COLS ", created)"
                                  " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
                                  &s, where);
    int64_t now = (int64_t)time(NULL);
    for (size_t i = 0; st == KT_OK && i < j->n; i++) {
        const kt__store_unit *u = &j->units[i];
        sqlite3_reset(s);
        kt__rec_bind_identity(s, j->id, key);
        bind_unit(s, 6, u);
        sqlite3_bind_int64(s, 17, now);
        st = kt__db_step(c, s, NULL, where);
    }
    sqlite3_finalize(s);
    return st;
}

kt_status kt__store_progress_put(kt_cache *c, const kt__store_rec *id, const kt__store_unit *units, size_t n) {
    if (c == NULL || id == NULL || (n > 0 && units == NULL)) return kt__err(KT_ERR_NULL, "kt__store_progress_put: cache, id or units is NULL");
    char where[200];
    snprintf(where, sizeof where, "kt__store_progress_put(op '%.128s')", id->op ? id->op : "(null)");
    kt_status st = need_identity(id, where);
    for (size_t i = 0; st == KT_OK && i < n; i++) { /* checked as a decision's units are */
        const kt__store_unit *u = &units[i];
        st = need_name(u->candidate, "candidate", where);
        if (st == KT_OK) st = need_name(u->unit_hash, "unit_hash", where);
        if (st == KT_OK && (u->outcome < 0 || u->outcome >= KT__NOUTCOMES))
            st = kt__err(KT_ERR_INVALID_ARGUMENT, "%s: units[%zu].outcome is %d; expected a kt_outcome (0 to 7)", where, i, u->outcome);
        if (st == KT_OK) st = need_finite(u->time_ns, "time_ns", where);
        if (st == KT_OK) st = need_finite(u->ci_low_ns, "ci_low_ns", where);
        if (st == KT_OK) st = need_finite(u->ci_high_ns, "ci_high_ns", where);
    }
    if (st != KT_OK || n == 0) return st;
    progress_job j = {id, units, n};
    pthread_mutex_lock(&c->lock);
    st = kt__db_tx(c, true, progress_tx, &j, where);
    pthread_mutex_unlock(&c->lock);
    return st;
}

/* ---- count, remove ------------------------------------------------------------------------- */

static kt_status count_tx(kt_cache *c, void *arg, const char *where) {
    kt__filter_job *j = arg;
    sqlite3_stmt *s;
    kt_status st = kt__db_prepare(c, "SELECT count(*) FROM decisions WHERE " KT__FILTER, &s, where);
    if (st != KT_OK) return st;
    kt__db_bind_text(s, 1, j->op);
    kt__db_bind_text(s, 2, j->device);
    bool row = false;
    st = kt__db_step(c, s, &row, where);
    j->n = st == KT_OK && row ? (size_t)sqlite3_column_int64(s, 0) : 0;
    sqlite3_finalize(s);
    return st;
}

void kt__rec_where(char *buf, size_t len, const char *fn, const kt_cache *c) {
    snprintf(buf, len, "%s('%.512s')", fn, c ? c->path : "(null)");
}

kt_status kt_cache_count(kt_cache *cache, const char *op, const char *device, size_t *count) {
    if (count != NULL) *count = 0;
    if (cache == NULL || count == NULL) return kt__err(KT_ERR_NULL, "kt_cache_count: cache or count is NULL");
    char where[600];
    kt__rec_where(where, sizeof where, "kt_cache_count", cache);
    kt__filter_job j = {.op = op, .device = device};
    pthread_mutex_lock(&cache->lock);
    kt_status st = kt__db_tx(cache, false, count_tx, &j, where);
    pthread_mutex_unlock(&cache->lock);
    if (st == KT_OK) *count = j.n;
    return st;
}

static kt_status remove_tx(kt_cache *c, void *arg, const char *where) {
    kt__filter_job *j = arg;
    bool all = j->op == NULL && j->device == NULL;
    sqlite3_stmt *s = NULL;
    kt_status st = kt__db_prepare(c, "DELETE FROM progress WHERE " KT__FILTER, &s, where); /* unfinished tunings too */
    if (st == KT_OK) {
        kt__db_bind_text(s, 1, j->op);
        kt__db_bind_text(s, 2, j->device);
        st = kt__db_step(c, s, NULL, where);
    }
    sqlite3_finalize(s);
    s = NULL;
    if (st == KT_OK)
        st = kt__db_prepare(c, all ? "DELETE FROM units" : "DELETE FROM units WHERE decision IN (SELECT id FROM decisions WHERE " KT__FILTER ")",
                            &s, where);
    if (st == KT_OK) {
        if (!all) {
            kt__db_bind_text(s, 1, j->op);
            kt__db_bind_text(s, 2, j->device);
        }
        st = kt__db_step(c, s, NULL, where);
    }
    sqlite3_finalize(s);
    s = NULL;
    if (st == KT_OK) st = kt__db_prepare(c, "DELETE FROM decisions WHERE " KT__FILTER, &s, where);
    if (st == KT_OK) {
        kt__db_bind_text(s, 1, j->op);
        kt__db_bind_text(s, 2, j->device);
        st = kt__db_step(c, s, NULL, where);
        j->n = (size_t)sqlite3_changes(c->db);
    }
    sqlite3_finalize(s);
    return st;
}

kt_status kt_cache_remove(kt_cache *cache, const char *op, const char *device, size_t *removed) {
    if (removed != NULL) *removed = 0;
    if (cache == NULL) return kt__err(KT_ERR_NULL, "kt_cache_remove: cache is NULL");
    char where[600];
    kt__rec_where(where, sizeof where, "kt_cache_remove", cache);
    kt__filter_job j = {.op = op, .device = device};
    pthread_mutex_lock(&cache->lock);
    kt_status st = kt__db_tx(cache, true, remove_tx, &j, where);
    pthread_mutex_unlock(&cache->lock);
    if (st == KT_OK && removed != NULL) *removed = j.n;
    return st;
}

#endif /* KT_NO_CACHE */
