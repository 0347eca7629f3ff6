/*
 * db.c - the persistent cache's connection layer: SQLite calls that say what failed and where,
 * the cache's warning, and the transaction runner every read and write of the store goes
 * through (see store_int.h for the other files of src/store/).
 *
 * Many processes
 *   WAL mode, so readers never wait for the writer. Every write is a BEGIN IMMEDIATE
 *   transaction: writers queue on the write lock instead of failing a lock upgrade. SQLite's
 *   busy handler waits up to KT__STORE_BUSY_MS for it; whatever still comes back busy is
 *   rolled back and retried from the start, after a short random pause, until that deadline.
 *   A process killed mid-transaction leaves WAL frames without a commit record, which every
 *   later reader ignores: a decision is there with all its units or not at all. Damage found
 *   during a transaction is handed to recovery.c once, and the work run again on the fresh
 *   store.
 */
#ifndef KT_NO_CACHE

#include "store/store_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int64_t kt__db_now_ms(void) { return (int64_t)(kt__now_s() * 1e3); }

/* Sleeps 1 to 16 ms, chosen by a small generator, so that processes retrying together spread. */
void kt__db_nap(uint32_t *seed) {
    *seed = *seed * 1103515245u + 12345u;
    struct timespec t = {0, (long)(1 + (*seed >> 16) % 16) * 1000000L};
    nanosleep(&t, NULL);
}

bool kt__db_is_busy(int rc) { return (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED; }
bool kt__db_is_damaged(int rc) { return (rc & 0xff) == SQLITE_CORRUPT || (rc & 0xff) == SQLITE_NOTADB; }
bool kt__db_is_unwritable(int rc) {
    int p = rc & 0xff;
    return p == SQLITE_READONLY || p == SQLITE_CANTOPEN || p == SQLITE_PERM || p == SQLITE_AUTH;
}

char *kt__db_dup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p != NULL) memcpy(p, s, n);
    return p;
}

/* Out of memory loses the warning only: the event itself succeeded. */
void kt__db_warn(kt_cache *c, const char *fmt, ...) {
    char text[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    char *old = atomic_load(&c->warning);
    size_t n = (old ? strlen(old) + 2 : 0) + strlen(text) + 1;
    char *w = malloc(n);
    char **r = realloc(c->retired, (c->nretired + 1) * sizeof *r);
    if (r != NULL) c->retired = r;
    if (w == NULL || r == NULL) {
        free(w);
        return;
    }
    snprintf(w, n, "%s%s%s", old ? old : "", old ? "; " : "", text);
    if (old != NULL) c->retired[c->nretired++] = old;
    atomic_store(&c->warning, w);
}

/* Records a failed SQLite call: its code for the retry logic, its message for the caller. */
kt_status kt__db_fail(kt_cache *c, int rc, const char *where, const char *what) {
    c->rc = rc;
    bool oom = (rc & 0xff) == SQLITE_NOMEM || rc == SQLITE_IOERR_NOMEM;
    return kt__err(oom ? KT_ERR_NO_MEMORY : KT_ERR_SYSTEM, "%s: %s: %s", where, what, c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc));
}

kt_status kt__db_exec(kt_cache *c, const char *sql, const char *where) {
    int rc = sqlite3_exec(c->db, sql, NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        char what[96];
        snprintf(what, sizeof what, "'%.60s%s'", sql, strlen(sql) > 60 ? "..." : "");
        return kt__db_fail(c, rc, where, what);
    }
    return KT_OK;
}

kt_status kt__db_prepare(kt_cache *c, const char *sql, sqlite3_stmt **out, const char *where) {
    int rc = sqlite3_prepare_v2(c->db, sql, -1, out, NULL);
    if (rc != SQLITE_OK) {
        *out = NULL;
        return kt__db_fail(c, rc, where, "preparing a statement");
    }
    return KT_OK;
}

/* Steps s; *row says whether it produced a row. */
kt_status kt__db_step(kt_cache *c, sqlite3_stmt *s, bool *row, const char *where) {
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW || rc == SQLITE_DONE) {
        if (row) *row = rc == SQLITE_ROW;
        return KT_OK;
    }
    return kt__db_fail(c, rc, where, "reading or writing the store");
}

/* Binds text, NULL as SQL NULL. */
void kt__db_bind_text(sqlite3_stmt *s, int i, const char *v) {
    if (v == NULL) sqlite3_bind_null(s, i);
    else sqlite3_bind_text(s, i, v, -1, SQLITE_STATIC);
}

/*
 * Runs fn inside a transaction (write: BEGIN IMMEDIATE; else a read transaction, one
 * snapshot for every statement of fn), with the cache's lock held by the caller. fn reports
 * SQLite failures through kt__db_fail, so c->rc says what went wrong: busy (another process
 * held a lock past SQLite's own wait, or a snapshot moved) is rolled back and retried after a
 * short pause until the deadline; damage is moved aside once (kt__recover) and fn run again on
 * the fresh store; anything else, and every failure of fn's own (not found, invalid), is
 * rolled back and returned. fn must therefore leave its outputs clean when it fails.
 */
kt_status kt__db_tx(kt_cache *c, bool write, kt__db_tx_fn fn, void *arg, const char *where) {
    int64_t deadline = kt__db_now_ms() + KT__STORE_BUSY_MS;
    uint32_t seed = (uint32_t)(uintptr_t)&deadline ^ (uint32_t)deadline ^ (uint32_t)getpid() * 2654435761u;
    bool recovered = false;
    for (;;) {
        if (c->db == NULL)
            return kt__err(KT_ERR_STATE, "%s: the store could not be reopened after it was found damaged", where);
        c->rc = SQLITE_OK;
        kt_status st = kt__db_exec(c, write ? "BEGIN IMMEDIATE" : "BEGIN", where);
        if (st == KT_OK) st = fn(c, arg, where);
        if (st == KT_OK) st = kt__db_exec(c, "COMMIT", where);
        if (st == KT_OK) return KT_OK;
        int rc = c->rc;
        if (!sqlite3_get_autocommit(c->db)) sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
        if (kt__db_is_busy(rc) && kt__db_now_ms() < deadline) {
            kt__db_nap(&seed);
            continue;
        }
        if (kt__db_is_damaged(rc) && !recovered && c->recoverable) {
            recovered = true;
            kt_status rs = kt__recover(c, where);
            if (rs != KT_OK) return rs;
            continue;
        }
        return st;
    }
}

#endif /* KT_NO_CACHE */
