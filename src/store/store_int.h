/*
 * store_int.h - what the files of src/store/ share; not for other stages (they use store.h).
 *
 *   db.c             the connection layer: SQLite calls that report what failed, warnings,
 *                    and the transaction runner (busy retry, damage handed to recovery)
 *   schema.c         the file format: schema version 4, migration of versions 1 to 3,
 *                    refusal of newer and foreign files, setting a file up (WAL, probe)
 *   open.c           kt_cache_open and the public handle: paths, directories, the in-memory
 *                    fallback for what cannot be written
 *   recovery.c       damage: moving a damaged file aside and starting a fresh store
 *   rows.c           reading stored rows back, every column checked
 *   records.c        single decisions (kt__store_get, _get_unit, _put), count and remove
 *   deferred.c       keys deferred by misses under capture (kt__store_defer_*), and
 *                    kt_cache_deferred, their JSON listing
 *   wisdom_export.c  kt_cache_export: the JSON document of stored decisions
 *   wisdom_import.c  kt_cache_import: checking a document and writing its decisions
 *   nocache.c        a build without SQLite and jansson: every call fails saying so
 *
 * Threads: one connection per kt_cache, used under the handle's mutex; every kt__db_*,
 * kt__rows_* and kt__rec_* function below expects the caller to hold it.
 */
#ifndef KT_STORE_INT_H
#define KT_STORE_INT_H

#include "store/store.h"
#include "util/util.h"

#ifndef KT_NO_CACHE

#include <jansson.h>
#include <sqlite3.h>

#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>

#define KT__STORE_BUSY_MS 10000 /* how long a call waits for other processes' locks */
#define KT__STORE_PATH_MAX 4096

struct kt_cache {
    pthread_mutex_t lock;
    sqlite3 *db;             /* NULL only after a failed recovery */
    char *path;              /* the file in use, or ":memory:" */
    bool in_memory;
    struct stat seen;        /* the file as it was when opened: recovery moves only that one */
    _Atomic(char *) warning; /* NULL ("") or what happened; replaced texts wait in `retired` */
    char **retired;
    size_t nretired;
    int rc;                  /* SQLite code of the last failing call, read by the retry logic */
    bool recoverable;        /* damage found by a call may be moved aside (not while opening) */
    char journal[16];        /* the journal mode the file got: "wal" unless the file system refused */
};

/* Outcomes are stored as their values, 0..KT__NOUTCOMES-1 (kerntune/decision.h's list counts up
 * from 0), and written in wisdom by their names (kt_outcome_name): both from KT_OUTCOME_LIST. */
#define KT__OUTCOME_ONE(e, v, s) +1
#define KT__NOUTCOMES (0 KT_OUTCOME_LIST(KT__OUTCOME_ONE))

/* ---- db.c: the connection layer ------------------------------------------------------------ */

/* Milliseconds on the monotonic clock; a pause of 1 to 16 ms chosen by *seed, so that
 * processes retrying together spread. */
int64_t kt__db_now_ms(void);
void kt__db_nap(uint32_t *seed);

/* What a SQLite result code means for the retry logic: another connection holds a lock; the
 * file is damaged (corrupt, or not a database); the file cannot be written. */
bool kt__db_is_busy(int rc);
bool kt__db_is_damaged(int rc);
bool kt__db_is_unwritable(int rc);

/* A copy of s, or NULL when out of memory. */
char *kt__db_dup(const char *s);

/* Adds text to the cache's warning ("; " between events). The previous text stays allocated
 * until close, since another thread may be reading it. Out of memory loses the warning only. */
void kt__db_warn(kt_cache *c, const char *fmt, ...) KT__PRINTF(2, 3);

/* Records a failed SQLite call: its code for the retry logic (c->rc), and for the caller
 * "where: what: SQLite's message" with KT_ERR_NO_MEMORY when SQLite ran out of memory,
 * KT_ERR_SYSTEM otherwise. */
kt_status kt__db_fail(kt_cache *c, int rc, const char *where, const char *what);

/* sqlite3_exec, _prepare_v2 (*out NULL on failure) and _step (*row: whether it produced a
 * row; row may be NULL) reporting through kt__db_fail. */
kt_status kt__db_exec(kt_cache *c, const char *sql, const char *where);
kt_status kt__db_prepare(kt_cache *c, const char *sql, sqlite3_stmt **out, const char *where);
kt_status kt__db_step(kt_cache *c, sqlite3_stmt *s, bool *row, const char *where);

/* Binds text, NULL as SQL NULL (the text must outlive the statement's use). */
void kt__db_bind_text(sqlite3_stmt *s, int i, const char *v);

/* Work done inside one transaction; it reports SQLite failures through kt__db_fail and leaves
 * its outputs clean when it fails (it may be run again). */
typedef kt_status (*kt__db_tx_fn)(kt_cache *c, void *arg, const char *where);

/* Runs fn in a transaction (write: BEGIN IMMEDIATE; else one read snapshot), retrying while
 * other processes hold locks and once after damage was moved aside (see db.c). */
kt_status kt__db_tx(kt_cache *c, bool write, kt__db_tx_fn fn, void *arg, const char *where);

/* ---- schema.c: the file format ------------------------------------------------------------- */

/* Every column of schema version 6, in the order the readers expect (rows.c, deferred.c;
 * progress rows: the identity, KT__UNIT_COLS, created). */
#define KT__DECISION_COLS \
    "id, op, set_hash, device, version, key, winner_candidate, winner_config, time_ns, confidence, created," \
    " requested_confidence, arch, vendor, key_kinds, artifact, compiler"
#define KT__UNIT_COLS \
    "candidate, config, unit_hash, outcome, time_ns, ci_low_ns, ci_high_ns, runs, warmups, message, finalist"
#define KT__DEFERRED_COLS "op, set_hash, device, version, key, args, created"

/* The statements creating schema version 6 in an empty database. */
extern const char kt__schema[];

/* Sets a file up on an open connection: refuses newer and foreign files, switches to WAL,
 * creates or migrates the schema when needed, and reads the first page of each table. */
kt_status kt__schema_setup(kt_cache *c, const char *where);

/* ---- open.c, recovery.c -------------------------------------------------------------------- */

/* Opens path on c->db and sets it up, retrying while other processes hold locks. */
kt_status kt__open_file_once(kt_cache *c, const char *path, const char *where);

/* Moves the damaged store at path aside, only if path still names the file seen; reason goes
 * into the warning. Returns 0 or an errno. */
int kt__recover_move_aside(kt_cache *c, const char *path, const struct stat *seen, const char *reason);

/* Damage found during a call: closes, moves the file aside (if still there), opens a fresh one. */
kt_status kt__recover(kt_cache *c, const char *where);

/* ---- rows.c: stored rows read back, checked ------------------------------------------------ */

/* Where a column being read sits, for messages: "units.time_ns (unit 2)". */
typedef struct kt__rows_at {
    const char *where;
    const char *table;
    long unit; /* -1: a decisions column */
} kt__rows_at;

/* Reads a unit from columns first.. of s, in KT__UNIT_COLS order. */
kt_status kt__rows_load_unit(const kt__rows_at *r, sqlite3_stmt *s, int first, kt__store_unit *u);

/* Reads a decision row (KT__DECISION_COLS), and its units when units is set, into out. */
kt_status kt__rows_load_decision(kt_cache *c, sqlite3_stmt *s, kt__store_rec *out, bool units, const char *where);

/* Reads a deferred row (KT__DEFERRED_COLS) into out (freed and zeroed on failure). */
kt_status kt__rows_load_deferred(sqlite3_stmt *s, kt__store_deferred *out, const char *where);

/* ---- records.c: decisions written and found ------------------------------------------------ */

/* A decision's identity as SQL parameters ?1..?5 (kt__rec_bind_identity binds them). */
#define KT__IDENTITY "op = ?1 AND set_hash = ?2 AND device = ?3 AND version = ?4 AND key = ?5"

/* Selects decisions by op (?1) and device (?2), each NULL for any. */
#define KT__FILTER "(?1 IS NULL OR op = ?1) AND (?2 IS NULL OR device = ?2)"

/* The work of count, remove and export: the filter, and what it found. */
typedef struct kt__filter_job {
    const char *op, *device;
    size_t n;
    json_t *entries; /* export: the array of entries */
} kt__filter_job;


/* Binds r's identity to ?1..?5, key as text (see kt__rec_key_text). */
void kt__rec_bind_identity(sqlite3_stmt *s, const kt__store_rec *r, const char *key);

/* Deletes the decision of rec's identity and its units, then inserts rec; inside a write
 * transaction. */
kt_status kt__rec_write(kt_cache *c, const kt__store_rec *rec, const char *where);

/* "fn('<the cache's path>')", for messages. */
void kt__rec_where(char *buf, size_t len, const char *fn, const kt_cache *c);

#endif /* KT_NO_CACHE */

#endif /* KT_STORE_INT_H */
