/*
 * rows.c - reading the persistent cache's rows back. A stored row is not trusted: another
 * program may have written the file, so every column is checked for its SQLite type and for
 * possible values (outcome in range, runs not negative, names neither NULL nor empty, a key
 * of at most KT__STORE_KEY_MAX integers), and a bad one is reported naming its column.
 */
#ifndef KT_NO_CACHE

#include "store/store_int.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parses key text back into words; false when it is not integers separated by commas or has
 * more than KT__STORE_KEY_MAX of them. */
static bool parse_key(const char *text, int64_t *words, size_t *n) {
    *n = 0;
    if (*text == '\0') return true;
    const char *p = text;
    for (;;) {
        if (*n == KT__STORE_KEY_MAX) return false;
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno != 0 || (*p != '-' && (*p < '0' || *p > '9'))) return false;
        words[(*n)++] = v;
        if (*end == '\0') return true;
        if (*end != ',') return false;
        p = end + 1;
    }
}

static kt_status bad_col(const kt__rows_at *r, const char *col, const char *fmt, ...) KT__PRINTF(3, 4);
static kt_status bad_col(const kt__rows_at *r, const char *col, const char *fmt, ...) {
    char what[256], unit[32] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (r->unit >= 0) snprintf(unit, sizeof unit, " (unit %ld)", r->unit);
    return kt__err(KT_ERR_INVALID_ARGUMENT, "%s: stored %s is invalid: column %s.%s%s %s", r->where,
                   strcmp(r->table, "deferred") == 0 ? "deferred key" : "decision", r->table, col, unit, what);
}

static const char *type_desc(int t) {
    switch (t) {
    case SQLITE_INTEGER: return "an integer";
    case SQLITE_FLOAT: return "a real";
    case SQLITE_TEXT: return "text";
    case SQLITE_BLOB: return "a blob";
    default: return "NULL";
    }
}

static kt_status rd_text(const kt__rows_at *r, sqlite3_stmt *s, int i, const char *col, bool nullable, char **out) {
    *out = NULL;
    int t = sqlite3_column_type(s, i);
    if (t == SQLITE_NULL && nullable) return KT_OK;
    if (t != SQLITE_TEXT) return bad_col(r, col, "is %s; expected text", type_desc(t));
    const char *p = (const char *)sqlite3_column_text(s, i);
    int n = sqlite3_column_bytes(s, i);
    if (p == NULL) return kt__err(KT_ERR_NO_MEMORY, "%s: out of memory reading %s.%s", r->where, r->table, col);
    if (n == 0 && !nullable) return bad_col(r, col, "is empty; expected a name");
    if ((int)strlen(p) != n) return bad_col(r, col, "holds a NUL byte");
    *out = malloc((size_t)n + 1);
    if (*out == NULL) return kt__err(KT_ERR_NO_MEMORY, "%s: out of memory reading %s.%s", r->where, r->table, col);
    memcpy(*out, p, (size_t)n + 1);
    return KT_OK;
}

/* A text column that may be empty ('': unknown); NULL is refused. */
static kt_status rd_maybe_empty(const kt__rows_at *r, sqlite3_stmt *s, int i, const char *col, char **out) {
    if (sqlite3_column_type(s, i) == SQLITE_NULL) return bad_col(r, col, "is NULL; expected text");
    kt_status st = rd_text(r, s, i, col, true, out);
    if (st == KT_OK && *out == NULL) st = kt__err(KT_ERR_NO_MEMORY, "%s: out of memory reading %s.%s", r->where, r->table, col);
    return st;
}

/* The text of a column known to be text, for a message; NULL when SQLite ran out of memory
 * converting it (KT_ERR_NO_MEMORY reported). */
static const char *text_for_message(const kt__rows_at *r, sqlite3_stmt *s, int i, const char *col) {
    const char *p = (const char *)sqlite3_column_text(s, i);
    if (p == NULL) kt__err(KT_ERR_NO_MEMORY, "%s: out of memory reading %s.%s", r->where, r->table, col);
    return p;
}

static kt_status rd_num(const kt__rows_at *r, sqlite3_stmt *s, int i, const char *col, double *out) {
    int t = sqlite3_column_type(s, i);
    if (t == SQLITE_TEXT) {
        const char *text = text_for_message(r, s, i, col);
        return text ? bad_col(r, col, "is text '%.40s'; expected a number", text) : KT_ERR_NO_MEMORY;
    }
    if (t != SQLITE_INTEGER && t != SQLITE_FLOAT) return bad_col(r, col, "is %s; expected a number", type_desc(t));
    *out = sqlite3_column_double(s, i);
    if (!isfinite(*out)) return bad_col(r, col, "is not finite");
    return KT_OK;
}

static kt_status rd_int(const kt__rows_at *r, sqlite3_stmt *s, int i, const char *col, int64_t lo, int64_t hi, int64_t *out) {
    int t = sqlite3_column_type(s, i);
    if (t == SQLITE_TEXT) {
        const char *text = text_for_message(r, s, i, col);
        return text ? bad_col(r, col, "is text '%.40s'; expected an integer", text) : KT_ERR_NO_MEMORY;
    }
    if (t != SQLITE_INTEGER) return bad_col(r, col, "is %s; expected an integer", type_desc(t));
    *out = sqlite3_column_int64(s, i);
    if (*out < lo || *out > hi) return bad_col(r, col, "is %" PRId64 "; expected %" PRId64 " to %" PRId64, *out, lo, hi);
    return KT_OK;
}

/* Reads a unit from columns first.. of s, in KT__UNIT_COLS order. */
kt_status kt__rows_load_unit(const kt__rows_at *r, sqlite3_stmt *s, int first, kt__store_unit *u) {
    memset(u, 0, sizeof *u);
    int64_t outcome = 0, runs = 0, warmups = 0, finalist = 0;
    kt_status st = rd_text(r, s, first, "candidate", false, &u->candidate);
    if (st == KT_OK) st = rd_text(r, s, first + 1, "config", true, &u->config);
    if (st == KT_OK) st = rd_text(r, s, first + 2, "unit_hash", false, &u->unit_hash);
    if (st == KT_OK) st = rd_int(r, s, first + 3, "outcome", 0, KT__NOUTCOMES - 1, &outcome);
    if (st == KT_OK) st = rd_num(r, s, first + 4, "time_ns", &u->time_ns);
    if (st == KT_OK) st = rd_num(r, s, first + 5, "ci_low_ns", &u->ci_low_ns);
    if (st == KT_OK) st = rd_num(r, s, first + 6, "ci_high_ns", &u->ci_high_ns);
    if (st == KT_OK) st = rd_int(r, s, first + 7, "runs", 0, UINT32_MAX, &runs);
    if (st == KT_OK) st = rd_int(r, s, first + 8, "warmups", 0, UINT32_MAX, &warmups);
    if (st == KT_OK) st = rd_text(r, s, first + 9, "message", true, &u->message);
    if (st == KT_OK) st = rd_int(r, s, first + 10, "finalist", 0, 1, &finalist);
    if (st != KT_OK) {
        kt__store_unit_free(u);
        return st;
    }
    u->outcome = (int)outcome;
    u->runs = (unsigned)runs;
    u->warmups = (unsigned)warmups;
    u->finalist = finalist != 0;
    return KT_OK;
}

/* Reads the units of decision id into out (units, nunits). */
static kt_status load_units(kt_cache *c, int64_t id, kt__store_rec *out, const char *where) {
    sqlite3_stmt *s;
    kt_status st = kt__db_prepare(c, "SELECT " KT__UNIT_COLS " FROM units WHERE decision = ?1 ORDER BY idx", &s, where);
    if (st != KT_OK) return st;
    sqlite3_bind_int64(s, 1, id);
    size_t cap = 0;
    for (;;) {
        bool row = false;
        st = kt__db_step(c, s, &row, where);
        if (st != KT_OK || !row) break;
        if (out->nunits == cap) {
            size_t ncap = cap ? cap * 2 : 8;
            kt__store_unit *nu = realloc(out->units, ncap * sizeof *nu);
            if (nu == NULL) {
                st = kt__err(KT_ERR_NO_MEMORY, "%s: out of memory growing the units past %zu", where, out->nunits);
                break;
            }
            out->units = nu;
            cap = ncap;
        }
        kt__rows_at r = {where, "units", (long)out->nunits};
        st = kt__rows_load_unit(&r, s, 0, &out->units[out->nunits]);
        if (st != KT_OK) break;
        out->nunits++;
    }
    sqlite3_finalize(s);
    return st;
}

/* Reads a decision row (KT__DECISION_COLS) and its units into out. */
kt_status kt__rows_load_decision(kt_cache *c, sqlite3_stmt *s, kt__store_rec *out, bool units, const char *where) {
    memset(out, 0, sizeof *out);
    kt__rows_at r = {where, "decisions", -1};
    int64_t id = sqlite3_column_int64(s, 0);
    char *key = NULL;
    int64_t words[KT__STORE_KEY_MAX];
    kt_status st = rd_text(&r, s, 1, "op", false, &out->op);
    if (st == KT_OK) st = rd_text(&r, s, 2, "set_hash", false, &out->set_hash);
    if (st == KT_OK) st = rd_text(&r, s, 3, "device", false, &out->device);
    if (st == KT_OK) st = rd_text(&r, s, 4, "version", false, &out->version);
    if (st == KT_OK) st = rd_text(&r, s, 5, "key", true, &key);
    if (st == KT_OK && key == NULL) st = bad_col(&r, "key", "is NULL; expected text");
    if (st == KT_OK && !parse_key(key, words, &out->key_len))
        st = bad_col(&r, "key", "is '%.60s'; expected at most %d integers separated by commas", key, KT__STORE_KEY_MAX);
    free(key);
    if (st == KT_OK && out->key_len > 0) {
        out->key = malloc(out->key_len * sizeof *out->key);
        if (out->key == NULL) st = kt__err(KT_ERR_NO_MEMORY, "%s: out of memory copying the key (%zu words)", where, out->key_len);
        else memcpy(out->key, words, out->key_len * sizeof *out->key);
    }
    if (st == KT_OK) st = rd_text(&r, s, 6, "winner_candidate", false, &out->winner_candidate);
    if (st == KT_OK) st = rd_text(&r, s, 7, "winner_config", true, &out->winner_config);
    if (st == KT_OK) st = rd_num(&r, s, 8, "time_ns", &out->time_ns);
    if (st == KT_OK) st = rd_num(&r, s, 9, "confidence", &out->confidence);
    if (st == KT_OK && out->confidence > 1) st = bad_col(&r, "confidence", "is %g; expected 0 to 1, or negative for unknown", out->confidence);
    if (st == KT_OK) st = rd_int(&r, s, 10, "created", INT64_MIN, INT64_MAX, &out->created);
    if (st == KT_OK) st = rd_num(&r, s, 11, "requested_confidence", &out->requested_confidence);
    if (st == KT_OK && out->requested_confidence > 1)
        st = bad_col(&r, "requested_confidence", "is %g; expected 0 to 1, or negative for none", out->requested_confidence);
    if (st == KT_OK) st = rd_maybe_empty(&r, s, 12, "arch", &out->arch);
    if (st == KT_OK) st = rd_maybe_empty(&r, s, 13, "vendor", &out->vendor);
    if (st == KT_OK) st = rd_maybe_empty(&r, s, 14, "key_kinds", &out->key_kinds);
    if (st == KT_OK) st = rd_maybe_empty(&r, s, 15, "artifact", &out->artifact);
    if (st == KT_OK) st = rd_maybe_empty(&r, s, 16, "compiler", &out->compiler);
    if (st == KT_OK && (strchr(out->artifact, '/') || strcmp(out->artifact, "..") == 0))
        st = bad_col(&r, "artifact", "is '%.60s'; expected a file name", out->artifact);
    if (st == KT_OK && (strspn(out->key_kinds, "sc") != strlen(out->key_kinds) || strlen(out->key_kinds) > out->key_len))
        st = bad_col(&r, "key_kinds", "is '%.60s'; expected one letter s or c per key component, at most %zu", out->key_kinds, out->key_len);
    if (st == KT_OK && units) st = load_units(c, id, out, where);
    if (st != KT_OK) kt__store_rec_free(out);
    return st;
}

/* Reads a deferred row (KT__DEFERRED_COLS) into out. */
kt_status kt__rows_load_deferred(sqlite3_stmt *s, kt__store_deferred *out, const char *where) {
    memset(out, 0, sizeof *out);
    kt__rows_at r = {where, "deferred", -1};
    char *key = NULL;
    int64_t words[KT__STORE_KEY_MAX];
    kt__store_rec *id = &out->id;
    kt_status st = rd_text(&r, s, 0, "op", false, &id->op);
    if (st == KT_OK) st = rd_text(&r, s, 1, "set_hash", false, &id->set_hash);
    if (st == KT_OK) st = rd_text(&r, s, 2, "device", false, &id->device);
    if (st == KT_OK) st = rd_text(&r, s, 3, "version", false, &id->version);
    if (st == KT_OK) st = rd_text(&r, s, 4, "key", true, &key);
    if (st == KT_OK && key == NULL) st = bad_col(&r, "key", "is NULL; expected text");
    if (st == KT_OK && !parse_key(key, words, &id->key_len))
        st = bad_col(&r, "key", "is '%.60s'; expected at most %d integers separated by commas", key, KT__STORE_KEY_MAX);
    free(key);
    if (st == KT_OK && id->key_len > 0) {
        id->key = malloc(id->key_len * sizeof *id->key);
        if (id->key == NULL) st = kt__err(KT_ERR_NO_MEMORY, "%s: out of memory copying the key (%zu words)", where, id->key_len);
        else memcpy(id->key, words, id->key_len * sizeof *id->key);
    }
    if (st == KT_OK) st = rd_text(&r, s, 5, "args", false, &out->args);
    if (st == KT_OK) st = rd_int(&r, s, 6, "created", INT64_MIN, INT64_MAX, &out->created);
    if (st != KT_OK) {
        kt__store_rec_free(id);
        free(out->args);
        memset(out, 0, sizeof *out);
    }
    return st;
}

#endif /* KT_NO_CACHE */
