/*
 * schema.c - the persistent cache's file format: creating it, migrating older versions,
 * refusing files that are not ours, and setting a file up when it is opened.
 *
 * The file (schema version 5, PRAGMA user_version)
 *   decisions  one row per decision: id, op, set_hash, device, version, key, winner_candidate,
 *              winner_config, time_ns, confidence (-1: unknown), created (unix time),
 *              requested_confidence (what the race asked for; -1: none); UNIQUE on the
 *              identity (op, set_hash, device, version, key)
 *   units      one row per unit of a decision (decision = decisions.id, idx = its position):
 *              candidate, config, unit_hash, outcome, time_ns, ci_low_ns, ci_high_ns, runs,
 *              warmups, message, finalist (0 or 1); indexed by unit_hash
 *   deferred   one row per key deferred by a miss under capture and not yet tuned (version 4):
 *              op, set_hash, device, version, key (the decisions' identity), args (the call's
 *              arguments as tune/deferred.c writes them: scalar values and buffer sizes),
 *              created (unix time); the identity is its primary key
 *   progress   one row per unit a tuning has decided so far, written as it goes (version 5):
 *              the decisions' identity, then the units' columns (KT__UNIT_COLS) and created;
 *              primary key the identity and unit_hash. A tuning killed midway leaves its rows,
 *              which the next tuning of the key reuses like a recorded decision's units; the
 *              decision, once recorded, replaces them
 *   A key is stored as text, its words in decimal separated by commas ("512,512,-1"; "" for a
 *   key of no words): identity is then one equality per column, and the file stays readable
 *   in the sqlite3 shell. Older versions are migrated in place when opened: version 1 (the
 *   first design: decisions without confidence, no units), version 2 (no requested
 *   confidence, no finalists) and version 3 (no deferred keys); a newer version, and a database with tables but no version
 *   (not kerntune's), are refused and never written.
 */
#ifndef KT_NO_CACHE

#include "store/store_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#define KT__DECISIONS_TABLE                                                                        \
    "CREATE TABLE decisions ("                                                                     \
    " id INTEGER PRIMARY KEY,"                                                                     \
    " op TEXT NOT NULL, set_hash TEXT NOT NULL, device TEXT NOT NULL, version TEXT NOT NULL,"       \
    " key TEXT NOT NULL,"                                                                          \
    " winner_candidate TEXT NOT NULL, winner_config TEXT,"                                         \
    " time_ns REAL NOT NULL, confidence REAL NOT NULL DEFAULT -1, created INTEGER NOT NULL,"       \
    " requested_confidence REAL NOT NULL DEFAULT -1,"                                              \
    " arch TEXT NOT NULL DEFAULT '', vendor TEXT NOT NULL DEFAULT '', key_kinds TEXT NOT NULL DEFAULT '',"  \
    " artifact TEXT NOT NULL DEFAULT '', compiler TEXT NOT NULL DEFAULT '',"                       \
    " UNIQUE (op, set_hash, device, version, key));"

#define KT__UNITS_TABLE                                                                            \
    "CREATE TABLE units ("                                                                         \
    " decision INTEGER NOT NULL REFERENCES decisions (id) ON DELETE CASCADE,"                      \
    " idx INTEGER NOT NULL,"                                                                       \
    " candidate TEXT NOT NULL, config TEXT, unit_hash TEXT NOT NULL,"                              \
    " outcome INTEGER NOT NULL, time_ns REAL NOT NULL,"                                            \
    " ci_low_ns REAL NOT NULL, ci_high_ns REAL NOT NULL,"                                          \
    " runs INTEGER NOT NULL, warmups INTEGER NOT NULL, message TEXT,"                              \
    " finalist INTEGER NOT NULL DEFAULT 0,"                                                        \
    " PRIMARY KEY (decision, idx)) WITHOUT ROWID;"                                                 \
    "CREATE INDEX units_by_hash ON units (unit_hash);"

#define KT__DEFERRED_TABLE                                                                         \
    "CREATE TABLE deferred ("                                                                      \
    " op TEXT NOT NULL, set_hash TEXT NOT NULL, device TEXT NOT NULL, version TEXT NOT NULL,"       \
    " key TEXT NOT NULL, args TEXT NOT NULL, created INTEGER NOT NULL,"                            \
    " PRIMARY KEY (op, set_hash, device, version, key)) WITHOUT ROWID;"

#define KT__PROGRESS_TABLE                                                                         \
    "CREATE TABLE progress ("                                                                      \
    " op TEXT NOT NULL, set_hash TEXT NOT NULL, device TEXT NOT NULL, version TEXT NOT NULL,"       \
    " key TEXT NOT NULL,"                                                                          \
    " candidate TEXT NOT NULL, config TEXT, unit_hash TEXT NOT NULL,"                              \
    " outcome INTEGER NOT NULL, time_ns REAL NOT NULL,"                                            \
    " ci_low_ns REAL NOT NULL, ci_high_ns REAL NOT NULL,"                                          \
    " runs INTEGER NOT NULL, warmups INTEGER NOT NULL, message TEXT,"                              \
    " finalist INTEGER NOT NULL DEFAULT 0, created INTEGER NOT NULL,"                              \
    " PRIMARY KEY (op, set_hash, device, version, key, unit_hash)) WITHOUT ROWID;"                 \
    "CREATE INDEX progress_by_hash ON progress (unit_hash);"

/* Version 5 -> 6: what a decision's device is, and its key's components, unknown ('') for the
 * decisions recorded before: they answer for their own keys only, never for a key nobody tuned
 * on another device, nor as a nearest key. */
#define KT__V6_COLUMNS                                                                             \
    "ALTER TABLE decisions ADD COLUMN arch TEXT NOT NULL DEFAULT '';"                              \
    "ALTER TABLE decisions ADD COLUMN vendor TEXT NOT NULL DEFAULT '';"                            \
    "ALTER TABLE decisions ADD COLUMN key_kinds TEXT NOT NULL DEFAULT '';"                         \
    "ALTER TABLE decisions ADD COLUMN artifact TEXT NOT NULL DEFAULT '';"                          \
    "ALTER TABLE decisions ADD COLUMN compiler TEXT NOT NULL DEFAULT '';"

const char kt__schema[] = KT__DECISIONS_TABLE KT__UNITS_TABLE KT__DEFERRED_TABLE KT__PROGRESS_TABLE "PRAGMA user_version = 6;";

/* Version 1 -> 6: decisions gain an id, confidence and requested confidence (-1, unknown),
 * units, deferred keys and progress arrive empty. Rows that break the NOT NULL columns cannot be kept and are counted as
 * dropped. */
static const char kt__migrate_v1[] =
    "ALTER TABLE decisions RENAME TO decisions_v1;" KT__DECISIONS_TABLE
    "INSERT OR IGNORE INTO decisions (op, set_hash, device, version, key, winner_candidate, winner_config,"
    " time_ns, confidence, created)"
    " SELECT op, set_hash, device, version, key, winner_candidate, winner_config, time_ns, -1, created"
    " FROM decisions_v1 ORDER BY rowid;"
    "DROP TABLE decisions_v1;" KT__UNITS_TABLE KT__DEFERRED_TABLE KT__PROGRESS_TABLE "PRAGMA user_version = 6;";

/* Version 2 -> 6: what the race asked for is unknown (-1), so every decision stays settled; no
 * unit is known to be a finalist (0); no key is deferred; no tuning is in progress. */
static const char kt__migrate_v2[] =
    "ALTER TABLE decisions ADD COLUMN requested_confidence REAL NOT NULL DEFAULT -1;"
    "ALTER TABLE units ADD COLUMN finalist INTEGER NOT NULL DEFAULT 0;" KT__DEFERRED_TABLE KT__PROGRESS_TABLE KT__V6_COLUMNS
    "PRAGMA user_version = 6;";

/* Version 3 -> 6: no key is deferred, no tuning in progress. */
static const char kt__migrate_v3[] = KT__DEFERRED_TABLE KT__PROGRESS_TABLE KT__V6_COLUMNS "PRAGMA user_version = 6;";

/* Version 4 -> 6: no tuning in progress. */
static const char kt__migrate_v4[] = KT__PROGRESS_TABLE KT__V6_COLUMNS "PRAGMA user_version = 6;";

/* Version 5 -> 6. */
static const char kt__migrate_v5[] = KT__V6_COLUMNS "PRAGMA user_version = 6;";

static kt_status read_int(kt_cache *c, const char *sql, int64_t *out, const char *where) {
    sqlite3_stmt *s;
    kt_status st = kt__db_prepare(c, sql, &s, where);
    bool row = false;
    if (st == KT_OK) st = kt__db_step(c, s, &row, where);
    *out = st == KT_OK && row ? sqlite3_column_int64(s, 0) : 0;
    sqlite3_finalize(s);
    return st;
}

/* Reads the schema version, refusing files this library must not touch: newer versions, and
 * databases with tables but no version (not kerntune's). One statement, so that version and
 * tables come from one snapshot even outside a transaction (another process may be creating
 * the schema right now). */
static kt_status read_version(kt_cache *c, int64_t *version, const char *where) {
    *version = 0;
    sqlite3_stmt *s;
    kt_status st = kt__db_prepare(c,
                                  "SELECT (SELECT user_version FROM pragma_user_version),"
                                  " (SELECT count(*) FROM sqlite_master WHERE type = 'table')",
                                  &s, where);
    bool row = false;
    if (st == KT_ERR_SYSTEM && (c->rc & 0xff) == SQLITE_ERROR) /* e.g. "unsupported file format": a schema format newer than this SQLite's */
        return kt__err(KT_ERR_STATE, "%s: this SQLite (%s) cannot read the file's schema: %s; it was left untouched", where, sqlite3_libversion(),
                       sqlite3_errmsg(c->db));
    if (st == KT_OK) st = kt__db_step(c, s, &row, where);
    *version = st == KT_OK && row ? sqlite3_column_int64(s, 0) : 0;
    int64_t tables = st == KT_OK && row ? sqlite3_column_int64(s, 1) : 0;
    sqlite3_finalize(s);
    if (st != KT_OK) return st;
    if (*version > KT__STORE_SCHEMA)
        return kt__err(KT_ERR_STATE, "%s: the store has schema version %" PRId64 "; this library (%s) knows versions up to %d: a newer kerntune wrote it; it was left untouched",
                       where, *version, kt_version_string(), KT__STORE_SCHEMA);
    if (*version == 0 && tables > 0)
        return kt__err(KT_ERR_STATE, "%s: not a kerntune cache: the file has %" PRId64 " tables but no schema version; it was left untouched", where, tables);
    return KT_OK;
}

/* Checks that the four tables exist with every column of version 6, and reads the first page
 * of each (damage there shows now rather than in the middle of the first call). */
static kt_status probe_tables(kt_cache *c, const char *where) {
    static const char *const probes[] = {"SELECT " KT__DECISION_COLS " FROM decisions LIMIT 1",
                                         "SELECT decision, idx, " KT__UNIT_COLS " FROM units LIMIT 1",
                                         "SELECT " KT__DEFERRED_COLS " FROM deferred LIMIT 1",
                                         "SELECT op, set_hash, device, version, key, " KT__UNIT_COLS ", created FROM progress LIMIT 1"};
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
        sqlite3_stmt *s;
        int rc = sqlite3_prepare_v2(c->db, probes[i], -1, &s, NULL);
        if ((rc & 0xff) == SQLITE_ERROR)
            return kt__err(KT_ERR_STATE, "%s: not a kerntune cache of schema version %d: %s; it was left untouched", where, KT__STORE_SCHEMA,
                           sqlite3_errmsg(c->db));
        if (rc != SQLITE_OK) return kt__db_fail(c, rc, where, "reading the schema");
        kt_status st = kt__db_step(c, s, NULL, where);
        sqlite3_finalize(s);
        if (st != KT_OK) return st;
    }
    return KT_OK;
}

/* Brings the schema to version 6 inside the caller's write transaction (the version is read
 * again: another process may have done it meanwhile): creates it in an empty file, migrates
 * versions 1 to 5. */
static kt_status migrate(kt_cache *c, const char *where) {
    int64_t version;
    kt_status st = read_version(c, &version, where);
    if (st != KT_OK) return st;
    if (version == 0) return kt__db_exec(c, kt__schema, where);
    if (version == 5) return kt__db_exec(c, kt__migrate_v5, where);
    if (version == 4) return kt__db_exec(c, kt__migrate_v4, where);
    if (version == 3) return kt__db_exec(c, kt__migrate_v3, where);
    if (version == 2) return kt__db_exec(c, kt__migrate_v2, where);
    if (version == 1) {
        int64_t before, after;
        st = read_int(c, "SELECT count(*) FROM decisions", &before, where);
        if (st == KT_OK) st = kt__db_exec(c, kt__migrate_v1, where);
        if (st == KT_OK) st = read_int(c, "SELECT count(*) FROM decisions", &after, where);
        if (st != KT_OK) return st;
        if (after < before)
            kt__db_warn(c, "migrating '%s' from schema version 1 dropped %" PRId64 " of %" PRId64 " decisions that had NULL fields",
                        c->path, before - after, before);
        return KT_OK;
    }
    return KT_OK;
}

/* The migration, then the probe, in the caller's write transaction: a file whose tables are not
 * what its version says is refused with the migration rolled back (left as it was). */
static kt_status schema_tx(kt_cache *c, void *arg, const char *where) {
    (void)arg;
    c->rc = SQLITE_OK;
    kt_status st = migrate(c, where);
    if (st == KT_ERR_SYSTEM && (c->rc & 0xff) == SQLITE_ERROR) { /* its SQL does not fit the file's tables */
        char *why = kt__error_save();
        st = kt__err(KT_ERR_STATE, "%s: not a kerntune cache of the schema version it says: migrating it failed (%s); it was left untouched",
                     where, why ? why : "?");
        free(why);
        return st;
    }
    return st == KT_OK ? probe_tables(c, where) : st;
}

/* Sets the file up on an open connection: the version check before anything is written, then
 * the schema's creation or migration and the probe in one write transaction (only the probe,
 * reading, for a file of this version), then WAL: a file refused is left as it was, its journal
 * mode included. */
kt_status kt__schema_setup(kt_cache *c, const char *where) {
    int64_t version;
    kt_status st = read_version(c, &version, where);
    if (st != KT_OK) return st;
    st = version != KT__STORE_SCHEMA ? kt__db_tx(c, true, schema_tx, NULL, where) : probe_tables(c, where);
    if (st != KT_OK) return st;
    sqlite3_stmt *s;
    st = kt__db_prepare(c, "PRAGMA journal_mode = WAL", &s, where);
    bool row = false;
    if (st == KT_OK) st = kt__db_step(c, s, &row, where);
    /* a file system without shared memory (some network file systems) keeps the rollback
     * journal: still correct, with readers and writers waiting for each other */
    const char *mode = st == KT_OK && row ? (const char *)sqlite3_column_text(s, 0) : NULL;
    if (st == KT_OK && row && mode == NULL)
        st = kt__err(KT_ERR_NO_MEMORY, "%s: out of memory reading the journal mode", where);
    if (st == KT_OK) snprintf(c->journal, sizeof c->journal, "%s", mode ? mode : "?");
    sqlite3_finalize(s);
    if (st == KT_OK) st = kt__db_exec(c, "PRAGMA synchronous = NORMAL", where);
    return st;
}

#endif /* KT_NO_CACHE */
