/*
 * store.c - the persistent cache: decisions and the units behind them in one SQLite file,
 * shared by every thread and process that tunes on the machine; and wisdom, the JSON export
 * and import of those decisions (jansson).
 *
 * The file (schema version 3, PRAGMA user_version)
 *   decisions  one row per decision: id, op, set_hash, device, version, key, winner_candidate,
 *              winner_config, time_ns, confidence (-1: unknown), created (unix time),
 *              requested_confidence (what the race asked for; -1: none); UNIQUE on the
 *              identity (op, set_hash, device, version, key)
 *   units      one row per unit of a decision (decision = decisions.id, idx = its position):
 *              candidate, config, unit_hash, outcome, time_ns, ci_low_ns, ci_high_ns, runs,
 *              warmups, message, finalist (0 or 1); indexed by unit_hash
 *   A key is stored as text, its words in decimal separated by commas ("512,512,-1"; "" for a
 *   key of no words): identity is then one equality per column, and the file stays readable
 *   in the sqlite3 shell. Older versions are migrated in place when opened: version 1 (the
 *   first design: decisions without confidence, no units) and version 2 (no requested
 *   confidence, no finalists); a newer version is refused and never written.
 *
 * Many processes
 *   WAL mode, so readers never wait for the writer. Every write is a BEGIN IMMEDIATE
 *   transaction: writers queue on the write lock instead of failing a lock upgrade. SQLite's
 *   busy handler waits up to KT__STORE_BUSY_MS for it; whatever still comes back busy is
 *   rolled back and retried from the start, after a short random pause, until that deadline.
 *   A process killed mid-transaction leaves WAL frames without a commit record, which every
 *   later reader ignores: a decision is there with all its units or not at all.
 *
 * Damage
 *   A file SQLite finds is not a database or is corrupt (a truncated file counts fewer pages
 *   than its header says) is renamed to "<path>.corrupt-<unix time>" with its -wal and -shm
 *   files, and a fresh store is started in its place. Open reads the header, the schema and
 *   the first page of each table, which finds most damage; damage SQLite meets deeper in the
 *   file later is handled the same way during that call, which is then run again on the fresh
 *   store. Two processes finding the same damage move it once: the move happens under a lock
 *   on "<path>.lock" (fcntl, plus a process-wide mutex, since fcntl locks do not exclude
 *   threads), and only if the path still names the file that was found damaged. A file or
 *   directory this process cannot write gives an in-memory store instead. Both succeed and are
 *   reported by kt_cache_warning; nothing is printed.
 *
 * Threads
 *   One connection per kt_cache, used under the handle's mutex.
 */
#include "store/store.h"

#include <kerntune/backend.h>
#include <pthread.h>
#include <stdatomic.h>

#include "util/util.h"

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
    for (size_t i = 0; i < r->nunits; i++) kt__store_unit_free(&r->units[i]);
    free(r->units);
    memset(r, 0, sizeof *r);
}

#ifndef KT_NO_CACHE

#include <jansson.h>
#include <sqlite3.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define KT__STORE_BUSY_MS 10000 /* how long a call waits for other processes' locks */
#define KT__STORE_PATH_MAX 4096
#define KT__KEYTEXT_MAX (KT__STORE_KEY_MAX * 21 + 1)

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

static pthread_mutex_t kt__recover_lock = PTHREAD_MUTEX_INITIALIZER;

/* Outcomes are stored as their values (0 .. KT__NOUTCOMES - 1: kerntune/decision.h's list counts
 * up from 0) and written in wisdom by their names (kt_outcome_name), both from KT_OUTCOME_LIST. */
#define KT__OUTCOME_ONE(e, v, s) +1
#define KT__NOUTCOMES (0 KT_OUTCOME_LIST(KT__OUTCOME_ONE))
#define KT__OUTCOME_LISTED(e, v, s) ", " s

/* ---- small helpers ------------------------------------------------------------------------- */

static int64_t now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Sleeps 1 to 16 ms, chosen by a small generator, so that processes retrying together spread. */
static void nap(uint32_t *seed) {
    *seed = *seed * 1103515245u + 12345u;
    struct timespec t = {0, (long)(1 + (*seed >> 16) % 16) * 1000000L};
    nanosleep(&t, NULL);
}

static bool is_busy(int rc) { return (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED; }
static bool is_damaged(int rc) { return (rc & 0xff) == SQLITE_CORRUPT || (rc & 0xff) == SQLITE_NOTADB; }
static bool is_unwritable(int rc) {
    int p = rc & 0xff;
    return p == SQLITE_READONLY || p == SQLITE_CANTOPEN || p == SQLITE_PERM || p == SQLITE_AUTH;
}
static bool is_perm_errno(int e) { return e == EACCES || e == EPERM || e == EROFS; }

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p != NULL) memcpy(p, s, n);
    return p;
}

/* Copies s (NULL stays NULL) into *out; false when out of memory. */
static bool dup_opt(const char *s, char **out) {
    *out = NULL;
    if (s == NULL) return true;
    *out = dup_str(s);
    return *out != NULL;
}

/* Adds text to the cache's warning ("; " between events). The previous text stays allocated
 * until close, since another thread may be reading it. Out of memory loses the warning only. */
static void add_warning(kt_cache *c, const char *fmt, ...) KT__PRINTF(2, 3);
static void add_warning(kt_cache *c, const char *fmt, ...) {
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
static kt_status sql_fail(kt_cache *c, int rc, const char *where, const char *what) {
    c->rc = rc;
    return kt__err(KT_ERR_SYSTEM, "%s: %s: %s", where, what, c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc));
}

static kt_status exec(kt_cache *c, const char *sql, const char *where) {
    int rc = sqlite3_exec(c->db, sql, NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        char what[96];
        snprintf(what, sizeof what, "'%.60s%s'", sql, strlen(sql) > 60 ? "..." : "");
        return sql_fail(c, rc, where, what);
    }
    return KT_OK;
}

static kt_status prepare(kt_cache *c, const char *sql, sqlite3_stmt **out, const char *where) {
    int rc = sqlite3_prepare_v2(c->db, sql, -1, out, NULL);
    if (rc != SQLITE_OK) {
        *out = NULL;
        return sql_fail(c, rc, where, "preparing a statement");
    }
    return KT_OK;
}

/* Steps s; *row says whether it produced a row. */
static kt_status step(kt_cache *c, sqlite3_stmt *s, bool *row, const char *where) {
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW || rc == SQLITE_DONE) {
        if (row) *row = rc == SQLITE_ROW;
        return KT_OK;
    }
    return sql_fail(c, rc, where, "reading or writing the store");
}

/* Binds text, NULL as SQL NULL. */
static void bind_text(sqlite3_stmt *s, int i, const char *v) {
    if (v == NULL) sqlite3_bind_null(s, i);
    else sqlite3_bind_text(s, i, v, -1, SQLITE_STATIC);
}

/* Writes key words as decimal text separated by commas. */
static void key_text(const int64_t *key, size_t n, char *buf) {
    size_t at = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++)
        at += (size_t)snprintf(buf + at, KT__KEYTEXT_MAX - at, "%s%" PRId64, i ? "," : "", key[i]);
}

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

/* ---- schema -------------------------------------------------------------------------------- */

#define KT__DECISIONS_TABLE                                                                        \
    "CREATE TABLE decisions ("                                                                     \
    " id INTEGER PRIMARY KEY,"                                                                     \
    " op TEXT NOT NULL, set_hash TEXT NOT NULL, device TEXT NOT NULL, version TEXT NOT NULL,"       \
    " key TEXT NOT NULL,"                                                                          \
    " winner_candidate TEXT NOT NULL, winner_config TEXT,"                                         \
    " time_ns REAL NOT NULL, confidence REAL NOT NULL DEFAULT -1, created INTEGER NOT NULL,"       \
    " requested_confidence REAL NOT NULL DEFAULT -1,"                                              \
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

static const char kt__schema_v3[] = KT__DECISIONS_TABLE KT__UNITS_TABLE "PRAGMA user_version = 3;";

/* Version 1 -> 3: decisions gain an id, confidence and requested confidence (-1, unknown),
 * units arrive empty. Rows that break the NOT NULL columns cannot be kept and are counted as
 * dropped. */
static const char kt__migrate_v1[] =
    "ALTER TABLE decisions RENAME TO decisions_v1;" KT__DECISIONS_TABLE
    "INSERT OR IGNORE INTO decisions (op, set_hash, device, version, key, winner_candidate, winner_config,"
    " time_ns, confidence, created)"
    " SELECT op, set_hash, device, version, key, winner_candidate, winner_config, time_ns, -1, created"
    " FROM decisions_v1 ORDER BY rowid;"
    "DROP TABLE decisions_v1;" KT__UNITS_TABLE "PRAGMA user_version = 3;";

/* Version 2 -> 3: what the race asked for is unknown (-1), so every decision stays settled; no
 * unit is known to be a finalist (0). */
static const char kt__migrate_v2[] =
    "ALTER TABLE decisions ADD COLUMN requested_confidence REAL NOT NULL DEFAULT -1;"
    "ALTER TABLE units ADD COLUMN finalist INTEGER NOT NULL DEFAULT 0;"
    "PRAGMA user_version = 3;";

/* Every column of version 3, in the order the readers below expect. */
#define KT__DECISION_COLS \
    "id, op, set_hash, device, version, key, winner_candidate, winner_config, time_ns, confidence, created," \
    " requested_confidence"
#define KT__UNIT_COLS \
    "candidate, config, unit_hash, outcome, time_ns, ci_low_ns, ci_high_ns, runs, warmups, message, finalist"

static kt_status read_int(kt_cache *c, const char *sql, int64_t *out, const char *where) {
    sqlite3_stmt *s;
    kt_status st = prepare(c, sql, &s, where);
    bool row = false;
    if (st == KT_OK) st = step(c, s, &row, where);
    *out = st == KT_OK && row ? sqlite3_column_int64(s, 0) : 0;
    sqlite3_finalize(s);
    return st;
}

/* Reads the schema version, refusing files this library must not touch: newer versions, and
 * databases with tables but no version (not kerntune's). One statement, so that version and
 * tables come from one snapshot even outside a transaction (another process may be creating
 * the schema right now). */
static kt_status read_version(kt_cache *c, int64_t *version, const char *where) {
    sqlite3_stmt *s;
    kt_status st = prepare(c,
                           "SELECT (SELECT user_version FROM pragma_user_version),"
                           " (SELECT count(*) FROM sqlite_master WHERE type = 'table')",
                           &s, where);
    bool row = false;
    if (st == KT_OK) st = step(c, s, &row, where);
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

/* Brings the schema to version 3 inside the caller's write transaction (the version is read
 * again: another process may have done it meanwhile): creates it in an empty file, migrates
 * versions 1 and 2. */
static kt_status schema_tx(kt_cache *c, void *arg, const char *where) {
    (void)arg;
    int64_t version;
    kt_status st = read_version(c, &version, where);
    if (st != KT_OK) return st;
    if (version == 0) return exec(c, kt__schema_v3, where);
    if (version == 2) return exec(c, kt__migrate_v2, where);
    if (version == 1) {
        int64_t before, after;
        st = read_int(c, "SELECT count(*) FROM decisions", &before, where);
        if (st == KT_OK) st = exec(c, kt__migrate_v1, where);
        if (st == KT_OK) st = read_int(c, "SELECT count(*) FROM decisions", &after, where);
        if (st != KT_OK) return st;
        if (after < before)
            add_warning(c, "migrating '%s' from schema version 1 dropped %" PRId64 " of %" PRId64 " decisions that had NULL fields",
                        c->path, before - after, before);
        return KT_OK;
    }
    return KT_OK;
}

/* Checks that both tables exist with every column of version 3, and reads the first page of
 * each (damage there shows now rather than in the middle of the first call). */
static kt_status probe_tables(kt_cache *c, const char *where) {
    static const char *const probes[] = {"SELECT " KT__DECISION_COLS " FROM decisions LIMIT 1",
                                         "SELECT decision, idx, " KT__UNIT_COLS " FROM units LIMIT 1"};
    for (size_t i = 0; i < 2; i++) {
        sqlite3_stmt *s;
        int rc = sqlite3_prepare_v2(c->db, probes[i], -1, &s, NULL);
        if ((rc & 0xff) == SQLITE_ERROR)
            return kt__err(KT_ERR_STATE, "%s: not a kerntune cache of schema version %d: %s", where, KT__STORE_SCHEMA,
                           sqlite3_errmsg(c->db));
        if (rc != SQLITE_OK) return sql_fail(c, rc, where, "reading the schema");
        kt_status st = step(c, s, NULL, where);
        sqlite3_finalize(s);
        if (st != KT_OK) return st;
    }
    return KT_OK;
}

typedef kt_status (*tx_fn)(kt_cache *c, void *arg, const char *where);
static kt_status recover(kt_cache *c, const char *where);

/*
 * Runs fn inside a transaction (write: BEGIN IMMEDIATE; else a read transaction, one
 * snapshot for every statement of fn), with the cache's lock held by the caller. fn reports
 * SQLite failures through sql_fail, so c->rc says what went wrong: busy (another process held
 * a lock past SQLite's own wait, or a snapshot moved) is rolled back and retried after a short
 * pause until the deadline; damage is moved aside once and fn run again on the fresh store;
 * anything else, and every failure of fn's own (not found, invalid), is rolled back and
 * returned. fn must therefore leave its outputs clean when it fails.
 */
static kt_status tx(kt_cache *c, bool write, tx_fn fn, void *arg, const char *where) {
    int64_t deadline = now_ms() + KT__STORE_BUSY_MS;
    uint32_t seed = (uint32_t)(uintptr_t)&deadline ^ (uint32_t)deadline ^ (uint32_t)getpid() * 2654435761u;
    bool recovered = false;
    for (;;) {
        if (c->db == NULL)
            return kt__err(KT_ERR_STATE, "%s: the store could not be reopened after it was found damaged", where);
        c->rc = SQLITE_OK;
        kt_status st = exec(c, write ? "BEGIN IMMEDIATE" : "BEGIN", where);
        if (st == KT_OK) st = fn(c, arg, where);
        if (st == KT_OK) st = exec(c, "COMMIT", where);
        if (st == KT_OK) return KT_OK;
        int rc = c->rc;
        if (!sqlite3_get_autocommit(c->db)) sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
        if (is_busy(rc) && now_ms() < deadline) {
            nap(&seed);
            continue;
        }
        if (is_damaged(rc) && !recovered && c->recoverable) {
            recovered = true;
            kt_status rs = recover(c, where);
            if (rs != KT_OK) return rs;
            continue;
        }
        return st;
    }
}

/* ---- opening ------------------------------------------------------------------------------- */

/* Creates the directories above path (mode 0700, as XDG asks of cache directories). Returns 0
 * or an errno, with the directory that failed in dir. */
static int make_parents(const char *path, char *dir, size_t dirlen) {
    snprintf(dir, dirlen, "%s", path);
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
            int e = errno;
            struct stat sb;
            if (!(stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode))) return e;
        }
        *p = '/';
    }
    return 0;
}

/* The directory holding path ("." for a bare name). */
static void dir_of(const char *path, char *dir, size_t len) {
    const char *slash = strrchr(path, '/');
    if (slash == NULL) snprintf(dir, len, ".");
    else if (slash == path) snprintf(dir, len, "/");
    else snprintf(dir, len, "%.*s", (int)(slash - path), path);
}

static kt_status open_connection(kt_cache *c, const char *file, const char *where) {
    int rc = sqlite3_open_v2(file, &c->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        kt_status st = sql_fail(c, rc, where, "cannot open the store");
        sqlite3_close_v2(c->db);
        c->db = NULL;
        return st;
    }
    sqlite3_extended_result_codes(c->db, 1);
    sqlite3_busy_timeout(c->db, KT__STORE_BUSY_MS);
    return KT_OK;
}

static kt_status open_memory(kt_cache *c, const char *where) {
    kt_status st = open_connection(c, ":memory:", where);
    if (st == KT_OK) st = exec(c, kt__schema_v3, where);
    free(c->path);
    c->path = dup_str(":memory:");
    c->in_memory = true;
    if (st == KT_OK && c->path == NULL) st = kt__err(KT_ERR_NO_MEMORY, "%s: out of memory", where);
    return st;
}

/* Falls back to an in-memory store because path cannot be written; why says how we know. */
static kt_status fall_back(kt_cache *c, const char *path, const char *why, const char *where) {
    if (c->db != NULL) sqlite3_close_v2(c->db);
    c->db = NULL;
    kt_status st = open_memory(c, where);
    if (st == KT_OK)
        add_warning(c, "'%s' cannot be written (%s); using an in-memory store: decisions will not outlive this process", path, why);
    return st;
}

/* Sets the file up on an open connection: the version check before anything is written, WAL,
 * schema creation or migration in a write transaction (only when needed), then the probe. */
static kt_status setup_file(kt_cache *c, const char *where) {
    int64_t version;
    kt_status st = read_version(c, &version, where);
    if (st != KT_OK) return st;
    sqlite3_stmt *s;
    st = prepare(c, "PRAGMA journal_mode = WAL", &s, where);
    bool row = false;
    if (st == KT_OK) st = step(c, s, &row, where);
    /* a file system without shared memory (some network file systems) keeps the rollback
     * journal: still correct, with readers and writers waiting for each other */
    const char *mode = st == KT_OK && row ? (const char *)sqlite3_column_text(s, 0) : NULL;
    if (st == KT_OK) snprintf(c->journal, sizeof c->journal, "%s", mode ? mode : "?");
    sqlite3_finalize(s);
    if (st == KT_OK) st = exec(c, "PRAGMA synchronous = NORMAL", where);
    if (st != KT_OK) return st;
    if (version != KT__STORE_SCHEMA) {
        st = tx(c, true, schema_tx, NULL, where);
        if (st != KT_OK) return st;
    }
    return probe_tables(c, where);
}

/* Opens path and sets it up, retrying while other processes hold locks. */
static kt_status open_file_once(kt_cache *c, const char *path, const char *where) {
    kt_status st = open_connection(c, path, where);
    if (st != KT_OK) return st;
    int64_t deadline = now_ms() + KT__STORE_BUSY_MS;
    uint32_t seed = (uint32_t)(uintptr_t)c ^ (uint32_t)getpid();
    for (;;) {
        c->rc = SQLITE_OK;
        st = setup_file(c, where);
        if (st == KT_OK || !is_busy(c->rc) || now_ms() >= deadline) return st;
        nap(&seed);
    }
}

/*
 * Moves a damaged store aside: "<path>.corrupt-<unix time>" (then "-2", "-3"... when taken),
 * its -wal and -shm files first, so that the fresh store can never replay the old WAL. Done
 * under the recovery lock, and only when path still names the file that was found damaged
 * (seen); otherwise another process or thread has moved it already. Returns 0 or an errno.
 */
static int move_aside(kt_cache *c, const char *path, const struct stat *seen, const char *reason) {
    char lockpath[KT__STORE_PATH_MAX + 16], dest[KT__STORE_PATH_MAX + 64], from[KT__STORE_PATH_MAX + 16], to[KT__STORE_PATH_MAX + 80];
    snprintf(lockpath, sizeof lockpath, "%s.lock", path);
    pthread_mutex_lock(&kt__recover_lock);
    int fd = open(lockpath, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    int err = 0;
    if (fd < 0) err = errno;
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    while (err == 0 && fcntl(fd, F_SETLKW, &fl) != 0)
        if (errno != EINTR) err = errno;
    struct stat now;
    if (err == 0 && stat(path, &now) == 0 && (seen->st_ino == 0 || (now.st_dev == seen->st_dev && now.st_ino == seen->st_ino))) {
        long long t = (long long)time(NULL);
        snprintf(dest, sizeof dest, "%s.corrupt-%lld", path, t);
        struct stat sb;
        for (int n = 2; lstat(dest, &sb) == 0; n++) snprintf(dest, sizeof dest, "%s.corrupt-%lld-%d", path, t, n);
        static const char *const sides[] = {"-wal", "-shm"};
        for (size_t i = 0; i < 2 && err == 0; i++) {
            snprintf(from, sizeof from, "%s%s", path, sides[i]);
            snprintf(to, sizeof to, "%s%s", dest, sides[i]);
            if (rename(from, to) != 0 && errno != ENOENT) err = errno;
        }
        if (err == 0 && rename(path, dest) != 0) err = errno;
        if (err == 0) add_warning(c, "'%s' was damaged (%s); moved it aside to '%s' and started a fresh store", path, reason, dest);
    } else if (err == 0) {
        add_warning(c, "'%s' was damaged (%s); another process had already moved it aside", path, reason);
    }
    if (fd >= 0) close(fd); /* releases the fcntl lock */
    pthread_mutex_unlock(&kt__recover_lock);
    return err;
}

/* Opens a file store: directories, the writability checks that decide on the in-memory
 * fallback, then the file itself, moving it aside once if it is damaged. */
static kt_status open_file(kt_cache *c, const char *path, const char *where) {
    if (strlen(path) >= KT__STORE_PATH_MAX)
        return kt__err(KT_ERR_LIMIT, "%s: the path has %zu characters; at most %d", where, strlen(path), KT__STORE_PATH_MAX - 1);
    c->path = dup_str(path);
    if (c->path == NULL) return kt__err(KT_ERR_NO_MEMORY, "%s: out of memory", where);
    char dir[KT__STORE_PATH_MAX], why[KT__STORE_PATH_MAX + 128];
    int e = make_parents(path, dir, sizeof dir);
    if (e != 0) {
        snprintf(why, sizeof why, "cannot create directory '%s': %s", dir, strerror(e));
        if (is_perm_errno(e)) return fall_back(c, path, why, where);
        return kt__err(KT_ERR_SYSTEM, "%s: %s", where, why);
    }
    struct stat sb;
    if (stat(path, &sb) == 0) {
        if (!S_ISREG(sb.st_mode)) return kt__err(KT_ERR_INVALID_ARGUMENT, "%s: not a regular file", where);
        if (access(path, R_OK | W_OK) != 0) {
            e = errno;
            snprintf(why, sizeof why, "the file is not readable and writable: %s", strerror(e));
            if (is_perm_errno(e)) return fall_back(c, path, why, where);
            return kt__err(KT_ERR_SYSTEM, "%s: %s", where, why);
        }
    } else if (errno != ENOENT) {
        return kt__err(KT_ERR_SYSTEM, "%s: %s", where, strerror(errno));
    }
    dir_of(path, dir, sizeof dir);
    if (access(dir, W_OK | X_OK) != 0) {
        e = errno;
        snprintf(why, sizeof why, "its directory '%s' is not writable, and SQLite keeps the -wal and -shm files there: %s", dir, strerror(e));
        if (is_perm_errno(e)) return fall_back(c, path, why, where);
        return kt__err(KT_ERR_SYSTEM, "%s: %s", where, why);
    }
    for (int attempt = 0;; attempt++) {
        struct stat seen = {0};
        stat(path, &seen);
        kt_status st = open_file_once(c, path, where);
        if (st == KT_OK) {
            if (stat(path, &c->seen) != 0) memset(&c->seen, 0, sizeof c->seen);
            c->recoverable = true;
            if (strcmp(c->journal, "wal") != 0)
                add_warning(c, "'%s' cannot use WAL mode here (journal mode '%s'; a network file system?): other processes' readers and writers wait for each other",
                            path, c->journal);
            return KT_OK;
        }
        int rc = c->rc;
        sqlite3_close_v2(c->db);
        c->db = NULL;
        if (is_damaged(rc) && attempt == 0) {
            e = move_aside(c, path, &seen, sqlite3_errstr(rc));
            if (e == 0) continue;
            snprintf(why, sizeof why, "it is damaged (%s) and cannot be moved aside: %s", sqlite3_errstr(rc), strerror(e));
            if (is_perm_errno(e)) return fall_back(c, path, why, where);
            return kt__err(KT_ERR_SYSTEM, "%s: %s", where, why);
        }
        if (is_unwritable(rc)) {
            /* the detail of the failure, without the "kt_cache_open('...'): " it starts with */
            const char *detail = kt_last_error();
            if (strncmp(detail, where, strlen(where)) == 0 && strncmp(detail + strlen(where), ": ", 2) == 0) detail += strlen(where) + 2;
            snprintf(why, sizeof why, "%s", detail);
            return fall_back(c, path, why, where);
        }
        return st;
    }
}

/* Damage found during a call: close, move the file aside (if still there), open a fresh one. */
static kt_status recover(kt_cache *c, const char *where) {
    const char *reason = sqlite3_errstr(c->rc);
    sqlite3_close_v2(c->db);
    c->db = NULL;
    c->recoverable = false;
    int e = move_aside(c, c->path, &c->seen, reason);
    if (e != 0) return kt__err(KT_ERR_SYSTEM, "%s: the store is damaged (%s) and cannot be moved aside: %s", where, reason, strerror(e));
    kt_status st = open_file_once(c, c->path, where);
    if (st != KT_OK) {
        sqlite3_close_v2(c->db);
        c->db = NULL;
        return st;
    }
    if (stat(c->path, &c->seen) != 0) memset(&c->seen, 0, sizeof c->seen);
    c->recoverable = true;
    return KT_OK;
}

static void cache_free(kt_cache *c) {
    if (c->db != NULL) sqlite3_close_v2(c->db);
    free(c->path);
    free(atomic_load(&c->warning));
    for (size_t i = 0; i < c->nretired; i++) free(c->retired[i]);
    free(c->retired);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

/* ---- the public handle --------------------------------------------------------------------- */

static kt_status put_path(char *buf, size_t len, const char *fmt, const char *a, const char *b) {
    int n = snprintf(buf, len, fmt, a, b);
    if (n < 0 || (size_t)n >= len) {
        if (len > 0) buf[0] = '\0';
        return kt__err(KT_ERR_LIMIT, "kt_cache_default_path: the path needs %d bytes, buf has %zu", n + 1, len);
    }
    return KT_OK;
}

kt_status kt_cache_default_path(char *buf, size_t len) {
    if (buf == NULL) return kt__err(KT_ERR_NULL, "kt_cache_default_path: buf is NULL");
    const char *e = getenv("KERNTUNE_CACHE");
    if (e != NULL && *e != '\0') {
        if (strcmp(e, "off") == 0) {
            if (len > 0) buf[0] = '\0';
            return kt__err(KT_ERR_NOT_FOUND, "kt_cache_default_path: KERNTUNE_CACHE=off: the persistent cache is switched off");
        }
        return put_path(buf, len, "%s%s", e, "");
    }
    e = getenv("XDG_CACHE_HOME");
    if (e != NULL && e[0] == '/') return put_path(buf, len, "%s%s", e, "/kerntune/cache.db");
    e = getenv("HOME");
    if (e != NULL && *e != '\0') return put_path(buf, len, "%s%s", e, "/.cache/kerntune/cache.db");
    if (len > 0) buf[0] = '\0';
    return kt__err(KT_ERR_NOT_FOUND, "kt_cache_default_path: none of KERNTUNE_CACHE, XDG_CACHE_HOME (absolute) and HOME is set");
}

kt_status kt_cache_open(const char *path, kt_cache **out) {
    if (out == NULL) return kt__err(KT_ERR_NULL, "kt_cache_open: out is NULL");
    *out = NULL;
    if (!sqlite3_threadsafe())
        return kt__err(KT_ERR_STATE, "kt_cache_open: the SQLite library in use was built without threads (SQLITE_THREADSAFE=0)");
    char def[KT__STORE_PATH_MAX];
    if (path == NULL) {
        kt_status st = kt_cache_default_path(def, sizeof def);
        if (st != KT_OK) {
            return kt__err(st, "kt_cache_open(NULL): %s", kt_last_error() + strlen("kt_cache_default_path: "));
        }
        path = def;
    }
    char where[600];
    snprintf(where, sizeof where, "kt_cache_open('%.512s')", path);
    if (path[0] == '\0') return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_cache_open: path is empty");
    kt_cache *c = calloc(1, sizeof *c);
    if (c == NULL) return kt__err(KT_ERR_NO_MEMORY, "%s: out of memory", where);
    if (pthread_mutex_init(&c->lock, NULL) != 0) {
        free(c);
        return kt__err(KT_ERR_SYSTEM, "%s: cannot create a mutex", where);
    }
    kt_status st = strcmp(path, ":memory:") == 0 ? open_memory(c, where) : open_file(c, path, where);
    if (st != KT_OK) {
        cache_free(c);
        return st;
    }
    *out = c;
    return KT_OK;
}

void kt_cache_close(kt_cache *cache) {
    if (cache != NULL) cache_free(cache);
}

const char *kt_cache_path(const kt_cache *cache) { return cache ? cache->path : NULL; }

const char *kt_cache_warning(const kt_cache *cache) {
    if (cache == NULL) return "";
    const char *w = atomic_load((_Atomic(char *) *)&cache->warning);
    return w ? w : "";
}

void kt_free(void *p) { free(p); }

/* ---- reading rows, checked ----------------------------------------------------------------- */

/* Where a column being read sits, for messages: "units.time_ns (unit 2)". */
typedef struct rd {
    const char *where;
    const char *table;
    long unit; /* -1: a decisions column */
} rd;

static kt_status bad_col(const rd *r, const char *col, const char *fmt, ...) KT__PRINTF(3, 4);
static kt_status bad_col(const rd *r, const char *col, const char *fmt, ...) {
    char what[256], unit[32] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (r->unit >= 0) snprintf(unit, sizeof unit, " (unit %ld)", r->unit);
    return kt__err(KT_ERR_INVALID_ARGUMENT, "%s: stored decision is invalid: column %s.%s%s %s", r->where, r->table, col, unit, what);
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

static kt_status rd_text(const rd *r, sqlite3_stmt *s, int i, const char *col, bool nullable, char **out) {
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

static kt_status rd_num(const rd *r, sqlite3_stmt *s, int i, const char *col, double *out) {
    int t = sqlite3_column_type(s, i);
    if (t == SQLITE_TEXT) return bad_col(r, col, "is text '%.40s'; expected a number", (const char *)sqlite3_column_text(s, i));
    if (t != SQLITE_INTEGER && t != SQLITE_FLOAT) return bad_col(r, col, "is %s; expected a number", type_desc(t));
    *out = sqlite3_column_double(s, i);
    if (!isfinite(*out)) return bad_col(r, col, "is not finite");
    return KT_OK;
}

static kt_status rd_int(const rd *r, sqlite3_stmt *s, int i, const char *col, int64_t lo, int64_t hi, int64_t *out) {
    int t = sqlite3_column_type(s, i);
    if (t == SQLITE_TEXT) return bad_col(r, col, "is text '%.40s'; expected an integer", (const char *)sqlite3_column_text(s, i));
    if (t != SQLITE_INTEGER) return bad_col(r, col, "is %s; expected an integer", type_desc(t));
    *out = sqlite3_column_int64(s, i);
    if (*out < lo || *out > hi) return bad_col(r, col, "is %" PRId64 "; expected %" PRId64 " to %" PRId64, *out, lo, hi);
    return KT_OK;
}

/* Reads a unit from columns first.. of s, in KT__UNIT_COLS order. */
static kt_status load_unit(const rd *r, sqlite3_stmt *s, int first, kt__store_unit *u) {
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

/* Reads the units of decision id into r. */
static kt_status load_units(kt_cache *c, int64_t id, kt__store_rec *out, const char *where) {
    sqlite3_stmt *s;
    kt_status st = prepare(c, "SELECT " KT__UNIT_COLS " FROM units WHERE decision = ?1 ORDER BY idx", &s, where);
    if (st != KT_OK) return st;
    sqlite3_bind_int64(s, 1, id);
    size_t cap = 0;
    for (;;) {
        bool row = false;
        st = step(c, s, &row, where);
        if (st != KT_OK || !row) break;
        if (out->nunits == cap) {
            size_t ncap = cap ? cap * 2 : 8;
            kt__store_unit *nu = realloc(out->units, ncap * sizeof *nu);
            if (nu == NULL) {
                st = kt__err(KT_ERR_NO_MEMORY, "%s: out of memory reading units", where);
                break;
            }
            out->units = nu;
            cap = ncap;
        }
        rd r = {where, "units", (long)out->nunits};
        st = load_unit(&r, s, 0, &out->units[out->nunits]);
        if (st != KT_OK) break;
        out->nunits++;
    }
    sqlite3_finalize(s);
    return st;
}

/* Reads a decision row (KT__DECISION_COLS) and its units into out; id gets the row id. */
static kt_status load_decision(kt_cache *c, sqlite3_stmt *s, kt__store_rec *out, const char *where) {
    memset(out, 0, sizeof *out);
    rd r = {where, "decisions", -1};
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
        if (out->key == NULL) st = kt__err(KT_ERR_NO_MEMORY, "%s: out of memory", where);
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
    if (st == KT_OK) st = load_units(c, id, out, where);
    if (st != KT_OK) kt__store_rec_free(out);
    return st;
}

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

#define KT__IDENTITY "op = ?1 AND set_hash = ?2 AND device = ?3 AND version = ?4 AND key = ?5"

static void bind_identity(sqlite3_stmt *s, const kt__store_rec *r, const char *key) {
    bind_text(s, 1, r->op);
    bind_text(s, 2, r->set_hash);
    bind_text(s, 3, r->device);
    bind_text(s, 4, r->version);
    bind_text(s, 5, key);
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
    kt_status st = prepare(c, "SELECT " KT__DECISION_COLS " FROM decisions WHERE " KT__IDENTITY, &s, where);
    if (st != KT_OK) return st;
    bind_identity(s, j->id, j->key);
    bool row = false;
    st = step(c, s, &row, where);
    if (st == KT_OK && !row) st = kt__err(KT_ERR_NOT_FOUND, "%s: no decision recorded for that identity", where);
    if (st == KT_OK) st = load_decision(c, s, j->rec, where);
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
    key_text(id->key, id->key_len, j.key);
    pthread_mutex_lock(&c->lock);
    st = tx(c, false, get_tx, &j, where);
    pthread_mutex_unlock(&c->lock);
    return st;
}

static kt_status get_unit_tx(kt_cache *c, void *arg, const char *where) {
    get_job *j = arg;
    sqlite3_stmt *s;
    kt_status st = prepare(c,
                           "SELECT u.candidate, u.config, u.unit_hash, u.outcome, u.time_ns, u.ci_low_ns, u.ci_high_ns,"
                           " u.runs, u.warmups, u.message, u.finalist, u.idx FROM units u JOIN decisions d ON d.id = u.decision"
                           " WHERE u.unit_hash = ?1 AND d.op = ?2 AND d.device = ?3 AND d.version = ?4 AND d.key = ?5"
                           " AND (?6 IS NULL OR d.set_hash IS NOT ?6)"
                           " ORDER BY d.created DESC, d.id DESC, u.idx LIMIT 1",
                           &s, where);
    if (st != KT_OK) return st;
    bind_text(s, 1, j->unit_hash);
    bind_text(s, 2, j->id->op);
    bind_text(s, 3, j->id->device);
    bind_text(s, 4, j->id->version);
    bind_text(s, 5, j->key);
    bind_text(s, 6, j->skip_own ? j->id->set_hash : NULL);
    bool row = false;
    st = step(c, s, &row, where);
    if (st == KT_OK && !row) st = kt__err(KT_ERR_NOT_FOUND, "%s: no unit recorded with that hash", where);
    rd r = {where, "units", st == KT_OK ? (long)sqlite3_column_int64(s, 11) : 0};
    if (st == KT_OK) st = load_unit(&r, s, 0, j->unit);
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
    key_text(id->key, id->key_len, j.key);
    pthread_mutex_lock(&c->lock);
    st = tx(c, false, get_unit_tx, &j, where);
    pthread_mutex_unlock(&c->lock);
    return st;
}

/* Deletes the decision of rec's identity and its units, then inserts rec; inside a write
 * transaction. */
static kt_status write_rec(kt_cache *c, const kt__store_rec *rec, const char *where) {
    char key[KT__KEYTEXT_MAX];
    key_text(rec->key, rec->key_len, key);
    sqlite3_stmt *s = NULL;
    kt_status st = prepare(c, "DELETE FROM units WHERE decision IN (SELECT id FROM decisions WHERE " KT__IDENTITY ")", &s, where);
    if (st == KT_OK) {
        bind_identity(s, rec, key);
        st = step(c, s, NULL, where);
    }
    sqlite3_finalize(s);
    s = NULL;
    if (st == KT_OK) st = prepare(c, "DELETE FROM decisions WHERE " KT__IDENTITY, &s, where);
    if (st == KT_OK) {
        bind_identity(s, rec, key);
        st = step(c, s, NULL, where);
    }
    sqlite3_finalize(s);
    s = NULL;
    if (st == KT_OK)
        st = prepare(c,
                     "INSERT INTO decisions (op, set_hash, device, version, key, winner_candidate, winner_config,"
                     " time_ns, confidence, created, requested_confidence) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                     &s, where);
    if (st == KT_OK) {
        bind_identity(s, rec, key);
        bind_text(s, 6, rec->winner_candidate);
        bind_text(s, 7, rec->winner_config);
        sqlite3_bind_double(s, 8, rec->time_ns);
        sqlite3_bind_double(s, 9, rec->confidence < 0 ? -1.0 : rec->confidence);
        sqlite3_bind_int64(s, 10, rec->created);
        sqlite3_bind_double(s, 11, rec->requested_confidence < 0 ? -1.0 : rec->requested_confidence);
        st = step(c, s, NULL, where);
    }
    sqlite3_finalize(s);
    s = NULL;
    if (st != KT_OK) return st;
    int64_t id = sqlite3_last_insert_rowid(c->db);
    st = prepare(c,
                 "INSERT INTO units (decision, idx, " KT__UNIT_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
                 &s, where);
    for (size_t i = 0; st == KT_OK && i < rec->nunits; i++) {
        const kt__store_unit *u = &rec->units[i];
        sqlite3_reset(s);
        sqlite3_bind_int64(s, 1, id);
        sqlite3_bind_int64(s, 2, (int64_t)i);
        bind_text(s, 3, u->candidate);
        bind_text(s, 4, u->config);
        bind_text(s, 5, u->unit_hash);
        sqlite3_bind_int(s, 6, u->outcome);
        sqlite3_bind_double(s, 7, u->time_ns);
        sqlite3_bind_double(s, 8, u->ci_low_ns);
        sqlite3_bind_double(s, 9, u->ci_high_ns);
        sqlite3_bind_int64(s, 10, u->runs);
        sqlite3_bind_int64(s, 11, u->warmups);
        bind_text(s, 12, u->message);
        sqlite3_bind_int(s, 13, u->finalist ? 1 : 0);
        st = step(c, s, NULL, where);
    }
    sqlite3_finalize(s);
    return st;
}

static kt_status put_tx(kt_cache *c, void *arg, const char *where) { return write_rec(c, arg, where); }

kt_status kt__store_put(kt_cache *c, const kt__store_rec *rec) {
    if (c == NULL || rec == NULL) return kt__err(KT_ERR_NULL, "kt__store_put: cache or rec is NULL");
    char where[200];
    snprintf(where, sizeof where, "kt__store_put(op '%.128s')", rec->op ? rec->op : "(null)");
    kt_status st = check_rec(rec, where);
    if (st != KT_OK) return st;
    pthread_mutex_lock(&c->lock);
    st = tx(c, true, put_tx, (void *)rec, where);
    pthread_mutex_unlock(&c->lock);
    return st;
}

/* ---- count, remove ------------------------------------------------------------------------- */

#define KT__FILTER "(?1 IS NULL OR op = ?1) AND (?2 IS NULL OR device = ?2)"

typedef struct filter_job {
    const char *op, *device;
    size_t n;
    json_t *entries; /* export */
} filter_job;

static kt_status count_tx(kt_cache *c, void *arg, const char *where) {
    filter_job *j = arg;
    sqlite3_stmt *s;
    kt_status st = prepare(c, "SELECT count(*) FROM decisions WHERE " KT__FILTER, &s, where);
    if (st != KT_OK) return st;
    bind_text(s, 1, j->op);
    bind_text(s, 2, j->device);
    bool row = false;
    st = step(c, s, &row, where);
    j->n = st == KT_OK && row ? (size_t)sqlite3_column_int64(s, 0) : 0;
    sqlite3_finalize(s);
    return st;
}

static void where_of(char *buf, size_t len, const char *fn, const kt_cache *c) {
    snprintf(buf, len, "%s('%.512s')", fn, c ? c->path : "(null)");
}

kt_status kt_cache_count(kt_cache *cache, const char *op, const char *device, size_t *count) {
    if (count != NULL) *count = 0;
    if (cache == NULL || count == NULL) return kt__err(KT_ERR_NULL, "kt_cache_count: cache or count is NULL");
    char where[600];
    where_of(where, sizeof where, "kt_cache_count", cache);
    filter_job j = {.op = op, .device = device};
    pthread_mutex_lock(&cache->lock);
    kt_status st = tx(cache, false, count_tx, &j, where);
    pthread_mutex_unlock(&cache->lock);
    if (st == KT_OK) *count = j.n;
    return st;
}

static kt_status remove_tx(kt_cache *c, void *arg, const char *where) {
    filter_job *j = arg;
    bool all = j->op == NULL && j->device == NULL;
    sqlite3_stmt *s = NULL;
    kt_status st = prepare(c, all ? "DELETE FROM units" : "DELETE FROM units WHERE decision IN (SELECT id FROM decisions WHERE " KT__FILTER ")",
                           &s, where);
    if (st == KT_OK) {
        if (!all) {
            bind_text(s, 1, j->op);
            bind_text(s, 2, j->device);
        }
        st = step(c, s, NULL, where);
    }
    sqlite3_finalize(s);
    s = NULL;
    if (st == KT_OK) st = prepare(c, "DELETE FROM decisions WHERE " KT__FILTER, &s, where);
    if (st == KT_OK) {
        bind_text(s, 1, j->op);
        bind_text(s, 2, j->device);
        st = step(c, s, NULL, where);
        j->n = (size_t)sqlite3_changes(c->db);
    }
    sqlite3_finalize(s);
    return st;
}

kt_status kt_cache_remove(kt_cache *cache, const char *op, const char *device, size_t *removed) {
    if (removed != NULL) *removed = 0;
    if (cache == NULL) return kt__err(KT_ERR_NULL, "kt_cache_remove: cache is NULL");
    char where[600];
    where_of(where, sizeof where, "kt_cache_remove", cache);
    filter_job j = {.op = op, .device = device};
    pthread_mutex_lock(&cache->lock);
    kt_status st = tx(cache, true, remove_tx, &j, where);
    pthread_mutex_unlock(&cache->lock);
    if (st == KT_OK && removed != NULL) *removed = j.n;
    return st;
}

/* ---- wisdom: export ------------------------------------------------------------------------ */

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
    jset(o, "library_version", json_string(r->version), &ok);
    for (size_t i = 0; i < r->key_len; i++)
        if (json_array_append_new(key, json_integer(r->key[i])) != 0) ok = false;
    jset(o, "key", key, &ok);
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
    filter_job *j = arg;
    json_array_clear(j->entries);
    sqlite3_stmt *s;
    kt_status st = prepare(c,
                           "SELECT " KT__DECISION_COLS " FROM decisions WHERE " KT__FILTER
                           " ORDER BY op, device, set_hash, version, key",
                           &s, where);
    if (st != KT_OK) return st;
    bind_text(s, 1, j->op);
    bind_text(s, 2, j->device);
    for (;;) {
        bool row = false;
        st = step(c, s, &row, where);
        if (st != KT_OK || !row) break;
        kt__store_rec r;
        st = load_decision(c, s, &r, where);
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
    where_of(where, sizeof where, "kt_cache_export", cache);
    json_t *doc = json_object(), *entries = json_array();
    bool ok = doc && entries;
    if (!ok) {
        json_decref(doc);
        json_decref(entries);
        return kt__err(KT_ERR_NO_MEMORY, "%s: out of memory", where);
    }
    filter_job j = {.op = op, .device = device, .entries = entries};
    pthread_mutex_lock(&cache->lock);
    kt_status st = tx(cache, false, export_tx, &j, where);
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

/* ---- wisdom: import ------------------------------------------------------------------------ */

static const char *kind_of(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE: case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "something else";
}

/* Fails an import at JSON path `path`.`name`: "kt_cache_import: entries[3].op: expected ...". */
static kt_status jbad(const char *path, const char *name, const char *fmt, ...) KT__PRINTF(3, 4);
static kt_status jbad(const char *path, const char *name, const char *fmt, ...) {
    char what[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (*path == '\0' && *name == '\0') return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_cache_import: %s", what);
    return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_cache_import: %s%s%s: %s", path, *path && *name ? "." : "", name, what);
}

/* The member `name` of obj, or "path.name: missing; expected what". */
static kt_status jget(json_t *obj, const char *path, const char *name, json_t **out, const char *what) {
    *out = json_object_get(obj, name);
    if (*out == NULL) return jbad(path, name, "missing; expected %s", what);
    return KT_OK;
}

/* A string member (nullable: null gives NULL; nonempty: "" is refused), copied into *out. */
static kt_status jstr(json_t *obj, const char *path, const char *name, bool nullable, char **out) {
    json_t *v;
    const char *what = nullable ? "a string or null" : "a non-empty string";
    *out = NULL;
    kt_status st = jget(obj, path, name, &v, what);
    if (st != KT_OK) return st;
    if (nullable && json_is_null(v)) return KT_OK;
    if (!json_is_string(v) || (!nullable && json_string_length(v) == 0))
        return jbad(path, name, "expected %s, got %s", what, json_is_string(v) ? "an empty string" : kind_of(v));
    if (!dup_opt(json_string_value(v), out)) return kt__err(KT_ERR_NO_MEMORY, "kt_cache_import: out of memory");
    return KT_OK;
}

static kt_status jnum(json_t *obj, const char *path, const char *name, double *out) {
    json_t *v;
    kt_status st = jget(obj, path, name, &v, "a number");
    if (st != KT_OK) return st;
    if (!json_is_number(v)) return jbad(path, name, "expected a number, got %s", kind_of(v));
    *out = json_number_value(v);
    return KT_OK;
}

static kt_status juint(json_t *obj, const char *path, const char *name, unsigned *out) {
    json_t *v;
    kt_status st = jget(obj, path, name, &v, "an integer from 0 to 4294967295");
    if (st != KT_OK) return st;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > (json_int_t)UINT32_MAX)
        return jbad(path, name, "expected an integer from 0 to 4294967295, got %s", kind_of(v));
    *out = (unsigned)json_integer_value(v);
    return KT_OK;
}

/* Parses "MAJOR.MINOR.PATCH"; false when text is not one. */
static bool parse_version(const char *text, long *major) {
    const char *p = text;
    for (int part = 0; part < 3; part++) {
        if (*p < '0' || *p > '9') return false;
        char *end;
        long v = strtol(p, &end, 10);
        if (part == 0) *major = v;
        p = end;
        if (part < 2 && *p++ != '.') return false;
    }
    return *p == '\0';
}

static kt_status check_major(const char *path, const char *name, const char *version) {
    long major = -1;
    if (!parse_version(version, &major)) return jbad(path, name, "expected a version \"MAJOR.MINOR.PATCH\", got '%.40s'", version);
    if (major != KT_VERSION_MAJOR)
        return jbad(path, name, "'%s' is kerntune %ld's; this library (%s) reads wisdom of major version %d only", version, major,
                    kt_version_string(), KT_VERSION_MAJOR);
    return KT_OK;
}

/* Limits on what a wisdom entry may hold: a document that breaks one is refused, whatever the
 * op it names (import knows no op: these are the checks it can make alone). */
#define KT__WISDOM_HASH_MAX 64          /* candidate_set, unit_hash */
#define KT__WISDOM_CONFIG_MAX (1 << 20) /* configuration text (string values of any length make it long) */
#define KT__WISDOM_MESSAGE_MAX 4096     /* a unit's diagnostic */
#define KT__WISDOM_UNITS_MAX (1 << 20)  /* units of one decision */
#define KT__WISDOM_FUTURE_S 86400       /* how far in the future `created` may lie (clock skew) */

/* What a text member may hold: its longest length, and whether a tab is allowed (in messages);
 * other control characters are never. */
typedef struct text_rule {
    size_t max;
    bool tab;
} text_rule;

static kt_status check_text(const char *path, const char *name, const char *s, size_t len, text_rule rule) {
    if (strlen(s) != len) return jbad(path, name, "holds a NUL character");
    if (len > rule.max) return jbad(path, name, "has %zu characters; at most %zu", len, rule.max);
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if ((ch < 0x20 && !(ch == '\t' && rule.tab)) || ch == 0x7f)
            return jbad(path, name, "holds a control character (0x%02x) at offset %zu", ch, i);
    }
    return KT_OK;
}

/* A string member checked by rule (nullable: null gives NULL; else "" is refused), copied. */
static kt_status jtext(json_t *obj, const char *path, const char *name, bool nullable, text_rule rule, char **out) {
    kt_status st = jstr(obj, path, name, nullable, out);
    if (st != KT_OK || *out == NULL) return st;
    st = check_text(path, name, *out, json_string_length(json_object_get(obj, name)), rule);
    if (st != KT_OK) {
        free(*out);
        *out = NULL;
    }
    return st;
}

static bool ident_start(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
static bool ident_char(char c) { return ident_start(c) || (c >= '0' && c <= '9'); }

/* Length of the identifier followed by '=' at p, or 0 when p does not start "NAME=". */
static size_t name_eq(const char *p) {
    if (!ident_start(*p)) return 0;
    size_t n = 1;
    while (ident_char(p[n])) n++;
    return p[n] == '=' ? n : 0;
}

/* Whether text is configuration text as kerntune writes it: NAME=VALUE items joined by ',',
 * NAME an identifier appearing once, VALUE possibly empty (an empty string's) and possibly
 * holding a comma, as a derived list's does, as long as no "NAME=" follows it). Says what is wrong in why. */
static bool config_ok(const char *text, char *why, size_t len) {
    size_t cap = strlen(text) / 2 + 1, n = 0; /* an item takes at least 2 characters ("A=1,") */
    const char **names = malloc(cap * sizeof *names);
    size_t *lens = malloc(cap * sizeof *lens);
    bool ok = names != NULL && lens != NULL;
    if (!ok) snprintf(why, len, "out of memory checking '%.60s'", text);
    for (const char *p = text; ok;) {
        size_t k = name_eq(p);
        if (k == 0) {
            snprintf(why, len, "'%.60s' is not configuration text: expected NAME=VALUE at offset %zu", text, (size_t)(p - text));
            ok = false;
            break;
        }
        for (size_t i = 0; i < n && ok; i++)
            if (lens[i] == k && strncmp(names[i], p, k) == 0) {
                snprintf(why, len, "'%.60s' names parameter '%.*s' twice", text, (int)k, p);
                ok = false;
            }
        if (!ok) break;
        names[n] = p, lens[n++] = k;
        const char *v = p + k + 1, *end = v;
        while (*end != '\0' && !(*end == ',' && name_eq(end + 1) > 0)) end++;
        if (*end == '\0') break; /* (a value may be empty: an empty string's) */
        p = end + 1;
    }
    free(names);
    free(lens);
    return ok;
}

/* A configuration member: null, or text that config_ok accepts. */
static kt_status jconfig(json_t *obj, const char *path, const char *name, char **out) {
    kt_status st = jtext(obj, path, name, true, (text_rule){KT__WISDOM_CONFIG_MAX, false}, out);
    char why[160];
    if (st == KT_OK && *out != NULL && !config_ok(*out, why, sizeof why)) {
        free(*out);
        *out = NULL;
        st = jbad(path, name, "%s", why);
    }
    return st;
}

/* A probability member: null (or -1) for unknown, else a number from lo to 1; optional members
 * may be absent (unknown). */
static kt_status jprob(json_t *obj, const char *path, const char *name, bool optional, double lo, double *out) {
    *out = -1;
    json_t *v = json_object_get(obj, name);
    if (v == NULL && optional) return KT_OK;
    char what[64];
    snprintf(what, sizeof what, "a number from %g to 1, or null", lo);
    kt_status st = jget(obj, path, name, &v, what);
    if (st != KT_OK || json_is_null(v)) return st;
    if (!json_is_number(v)) return jbad(path, name, "expected %s, got %s", what, kind_of(v));
    double x = json_number_value(v);
    if (x == -1) return KT_OK; /* unknown, as the store writes it */
    if (!(x >= lo && x <= 1)) return jbad(path, name, "is %g; expected %s", x, what);
    *out = x;
    return KT_OK;
}

static const char *outcome_list(void) { return KT_OUTCOME_LIST(KT__OUTCOME_LISTED) + 2; }

static kt_status parse_unit(json_t *u, const char *path, kt__store_unit *out) {
    memset(out, 0, sizeof *out);
    if (!json_is_object(u)) return jbad(path, "", "expected an object, got %s", kind_of(u));
    kt_status st = jtext(u, path, "candidate", false, (text_rule){KT__NAME_MAX, false}, &out->candidate);
    if (st == KT_OK) st = jconfig(u, path, "config", &out->config);
    if (st == KT_OK) st = jtext(u, path, "unit_hash", false, (text_rule){KT__WISDOM_HASH_MAX, false}, &out->unit_hash);
    json_t *v;
    if (st == KT_OK) st = jget(u, path, "outcome", &v, "an outcome name");
    if (st == KT_OK) {
        out->outcome = -1;
        for (int i = 0; i < KT__NOUTCOMES && json_is_string(v); i++)
            if (strcmp(json_string_value(v), kt_outcome_name((kt_outcome)i)) == 0) out->outcome = i;
        if (out->outcome < 0)
            st = jbad(path, "outcome", "expected one of %s, got %s%s%.40s%s", outcome_list(), kind_of(v), json_is_string(v) ? " '" : "",
                      json_is_string(v) ? json_string_value(v) : "", json_is_string(v) ? "'" : "");
    }
    bool measured = out->outcome == KT_OUTCOME_MEASURED;
    if (st == KT_OK) st = jnum(u, path, "time_ns", &out->time_ns);
    if (st == KT_OK && measured && out->time_ns < 0)
        st = jbad(path, "time_ns", "is %.15g, but the unit was measured: expected a time of at least 0", out->time_ns);
    if (st == KT_OK && !measured && out->time_ns >= 0)
        st = jbad(path, "time_ns", "is %.15g, but the unit's outcome is %s: a unit that was not measured has no time (-1)", out->time_ns,
                  kt_outcome_name((kt_outcome)out->outcome));
    if (st == KT_OK) st = jget(u, path, "ci_ns", &v, "[low, high] or null");
    if (st == KT_OK) {
        out->ci_low_ns = out->ci_high_ns = -1;
        if (!json_is_null(v)) {
            if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_number(json_array_get(v, 0)) ||
                !json_is_number(json_array_get(v, 1)) || json_number_value(json_array_get(v, 0)) < 0 ||
                json_number_value(json_array_get(v, 1)) < 0)
                st = jbad(path, "ci_ns", "expected [low, high] (two non-negative numbers) or null, got %s", kind_of(v));
            else if (!measured)
                st = jbad(path, "ci_ns", "is an interval, but the unit's outcome is %s: expected null", kt_outcome_name((kt_outcome)out->outcome));
            else {
                out->ci_low_ns = json_number_value(json_array_get(v, 0));
                out->ci_high_ns = json_number_value(json_array_get(v, 1));
                if (!(out->ci_low_ns <= out->time_ns && out->time_ns <= out->ci_high_ns))
                    st = jbad(path, "ci_ns", "[%.15g, %.15g] does not contain the unit's time_ns %.15g", out->ci_low_ns, out->ci_high_ns, out->time_ns);
            }
        }
    }
    if (st == KT_OK) st = juint(u, path, "runs", &out->runs);
    if (st == KT_OK) st = juint(u, path, "warmups", &out->warmups);
    if (st == KT_OK) st = jtext(u, path, "message", true, (text_rule){KT__WISDOM_MESSAGE_MAX, true}, &out->message);
    v = json_object_get(u, "finalist"); /* absent in documents written before schema 3 */
    if (st == KT_OK && v != NULL && !json_is_boolean(v)) st = jbad(path, "finalist", "expected true or false, got %s", kind_of(v));
    if (st == KT_OK && json_is_true(v) && !measured)
        st = jbad(path, "finalist", "is true, but the unit's outcome is %s: only a measured unit can be a finalist",
                  kt_outcome_name((kt_outcome)out->outcome));
    if (st == KT_OK) out->finalist = json_is_true(v);
    if (st != KT_OK) kt__store_unit_free(out);
    return st;
}

/* Orders units by candidate, then configuration (NULL first). */
static int cmp_unit(const void *a, const void *b) {
    const kt__store_unit *x = *(const kt__store_unit *const *)a, *y = *(const kt__store_unit *const *)b;
    int d = strcmp(x->candidate, y->candidate);
    if (d == 0) d = (x->config != NULL) - (y->config != NULL);
    if (d == 0 && x->config) d = strcmp(x->config, y->config);
    return d ? d : (x < y ? -1 : x > y);
}

/* Checks what an entry's units say against each other and against its winner: no unit listed
 * twice, and the winner among them (when any are listed), measured, with the entry's time. */
static kt_status check_units(const kt__store_rec *r, const char *path) {
    if (r->nunits == 0) return KT_OK;
    const kt__store_unit **p = malloc(r->nunits * sizeof *p);
    if (p == NULL) return kt__err(KT_ERR_NO_MEMORY, "kt_cache_import: out of memory");
    for (size_t i = 0; i < r->nunits; i++) p[i] = &r->units[i];
    qsort(p, r->nunits, sizeof *p, cmp_unit);
    kt_status st = KT_OK;
    for (size_t i = 1; i < r->nunits && st == KT_OK; i++) {
        const kt__store_unit *a = p[i - 1], *b = p[i];
        if (strcmp(a->candidate, b->candidate) == 0 && (a->config == NULL) == (b->config == NULL) &&
            (a->config == NULL || strcmp(a->config, b->config) == 0)) {
            char sub[160];
            snprintf(sub, sizeof sub, "%s.units[%zu]", path, (size_t)(b - r->units));
            st = jbad(sub, "", "the same unit (candidate '%.100s'%s%.200s) as units[%zu]", b->candidate, b->config ? ", configuration " : "",
                      b->config ? b->config : "", (size_t)(a - r->units));
        }
    }
    free(p);
    if (st != KT_OK) return st;
    const kt__store_unit *w = NULL;
    size_t wi = 0;
    for (size_t i = 0; i < r->nunits && w == NULL; i++) {
        const kt__store_unit *u = &r->units[i];
        if (strcmp(u->candidate, r->winner_candidate) == 0 && (u->config == NULL) == (r->winner_config == NULL) &&
            (u->config == NULL || strcmp(u->config, r->winner_config) == 0))
            w = u, wi = i;
    }
    if (w == NULL)
        return jbad(path, "winner", "candidate '%.100s'%s%.200s is none of the entry's %zu units", r->winner_candidate,
                    r->winner_config ? ", configuration " : "", r->winner_config ? r->winner_config : "", r->nunits);
    if (w->outcome != KT_OUTCOME_MEASURED)
        return jbad(path, "winner", "its unit (units[%zu]) has outcome %s: a winner was measured", wi, kt_outcome_name((kt_outcome)w->outcome));
    if (w->time_ns != r->time_ns)
        return jbad(path, "time_ns", "is %.15g, but the winner's unit (units[%zu]) has time_ns %.15g", r->time_ns, wi, w->time_ns);
    return KT_OK;
}

static kt_status parse_entry(json_t *e, const char *path, int64_t now, kt__store_rec *out) {
    memset(out, 0, sizeof *out);
    if (!json_is_object(e)) return jbad(path, "", "expected an object, got %s", kind_of(e));
    kt_status st = jtext(e, path, "op", false, (text_rule){KT__NAME_MAX, false}, &out->op);
    if (st == KT_OK) st = jtext(e, path, "candidate_set", false, (text_rule){KT__WISDOM_HASH_MAX, false}, &out->set_hash);
    if (st == KT_OK) st = jtext(e, path, "device", false, (text_rule){KT_DEVICE_FINGERPRINT_MAX - 1, false}, &out->device);
    if (st == KT_OK) st = jstr(e, path, "library_version", false, &out->version);
    if (st == KT_OK) st = check_major(path, "library_version", out->version);
    json_t *v;
    if (st == KT_OK) st = jget(e, path, "key", &v, "an array of integers");
    if (st == KT_OK) {
        bool ints = json_is_array(v);
        for (size_t i = 0; ints && i < json_array_size(v); i++) ints = json_is_integer(json_array_get(v, i));
        if (!ints) st = jbad(path, "key", "expected an array of integers, got %s", kind_of(v));
        else if (json_array_size(v) > KT__STORE_KEY_MAX)
            st = jbad(path, "key", "has %zu words; at most %d", json_array_size(v), KT__STORE_KEY_MAX);
        else if (json_array_size(v) > 0) {
            out->key_len = json_array_size(v);
            out->key = malloc(out->key_len * sizeof *out->key);
            if (out->key == NULL) st = kt__err(KT_ERR_NO_MEMORY, "kt_cache_import: out of memory");
            for (size_t i = 0; st == KT_OK && i < out->key_len; i++) out->key[i] = json_integer_value(json_array_get(v, i));
        }
    }
    char sub[128];
    if (st == KT_OK) st = jget(e, path, "winner", &v, "an object");
    if (st == KT_OK && !json_is_object(v)) st = jbad(path, "winner", "expected an object, got %s", kind_of(v));
    snprintf(sub, sizeof sub, "%s.winner", path);
    if (st == KT_OK) st = jtext(v, sub, "candidate", false, (text_rule){KT__NAME_MAX, false}, &out->winner_candidate);
    if (st == KT_OK) st = jconfig(v, sub, "config", &out->winner_config);
    if (st == KT_OK) st = jnum(e, path, "time_ns", &out->time_ns);
    if (st == KT_OK && out->time_ns < 0) st = jbad(path, "time_ns", "is %.15g; expected the winner's time, at least 0", out->time_ns);
    if (st == KT_OK) st = jprob(e, path, "confidence", false, 0, &out->confidence);
    /* absent in documents written before schema 3: no confidence was asked for */
    if (st == KT_OK) st = jprob(e, path, "requested_confidence", true, 0.5, &out->requested_confidence);
    if (st == KT_OK) st = jget(e, path, "created", &v, "an integer (unix time)");
    if (st == KT_OK && !json_is_integer(v)) st = jbad(path, "created", "expected an integer (unix time), got %s", kind_of(v));
    if (st == KT_OK) {
        out->created = json_integer_value(v);
        if (out->created < 0 || out->created > now + KT__WISDOM_FUTURE_S)
            st = jbad(path, "created", "is %lld; expected a unix time from 0 to a day from now (%lld)", (long long)out->created,
                      (long long)(now + KT__WISDOM_FUTURE_S));
    }
    if (st == KT_OK) st = jget(e, path, "units", &v, "an array");
    if (st == KT_OK && !json_is_array(v)) st = jbad(path, "units", "expected an array, got %s", kind_of(v));
    if (st == KT_OK && json_array_size(v) > KT__WISDOM_UNITS_MAX)
        st = jbad(path, "units", "has %zu units; at most %d", json_array_size(v), KT__WISDOM_UNITS_MAX);
    if (st == KT_OK && json_array_size(v) > 0) {
        out->units = calloc(json_array_size(v), sizeof *out->units);
        if (out->units == NULL) st = kt__err(KT_ERR_NO_MEMORY, "kt_cache_import: out of memory");
        for (size_t i = 0; st == KT_OK && i < json_array_size(v); i++) {
            snprintf(sub, sizeof sub, "%s.units[%zu]", path, i);
            st = parse_unit(json_array_get(v, i), sub, &out->units[i]);
            if (st == KT_OK) out->nunits++;
        }
    }
    if (st == KT_OK) st = check_units(out, path);
    if (st != KT_OK) kt__store_rec_free(out);
    return st;
}

typedef struct import_job {
    kt__store_rec *recs;
    size_t n;
    bool replace;
    size_t added, replaced, kept;
} import_job;

static int cmp_identity(const kt__store_rec *a, const kt__store_rec *b) {
    int d = strcmp(a->op, b->op);
    if (d == 0) d = strcmp(a->set_hash, b->set_hash);
    if (d == 0) d = strcmp(a->device, b->device);
    if (d == 0) d = strcmp(a->version, b->version);
    if (d == 0) d = a->key_len < b->key_len ? -1 : a->key_len > b->key_len;
    for (size_t i = 0; d == 0 && i < a->key_len; i++) d = a->key[i] < b->key[i] ? -1 : a->key[i] > b->key[i];
    return d;
}

/* Orders pointers into one array by identity, then by position. */
static int cmp_ptr(const void *a, const void *b) {
    const kt__store_rec *x = *(const kt__store_rec *const *)a, *y = *(const kt__store_rec *const *)b;
    int d = cmp_identity(x, y);
    return d ? d : (x < y ? -1 : x > y);
}

/* Refuses a document naming one decision twice: "entries[5]: the same decision as entries[2]". */
static kt_status check_duplicates(const kt__store_rec *recs, size_t n) {
    if (n < 2) return KT_OK;
    const kt__store_rec **p = malloc(n * sizeof *p);
    if (p == NULL) return kt__err(KT_ERR_NO_MEMORY, "kt_cache_import: out of memory");
    for (size_t i = 0; i < n; i++) p[i] = &recs[i];
    qsort(p, n, sizeof *p, cmp_ptr);
    kt_status st = KT_OK;
    for (size_t i = 1; i < n && st == KT_OK; i++)
        if (cmp_identity(p[i - 1], p[i]) == 0)
            st = kt__err(KT_ERR_INVALID_ARGUMENT,
                         "kt_cache_import: entries[%zu]: the same decision (op, candidate_set, device, library_version, key) as entries[%zu]",
                         (size_t)(p[i] - recs), (size_t)(p[i - 1] - recs));
    free(p);
    return st;
}

static kt_status import_tx(kt_cache *c, void *arg, const char *where) {
    import_job *j = arg;
    j->added = j->replaced = j->kept = 0;
    sqlite3_stmt *s;
    kt_status st = prepare(c, "SELECT 1 FROM decisions WHERE " KT__IDENTITY, &s, where);
    for (size_t i = 0; st == KT_OK && i < j->n; i++) {
        char key[KT__KEYTEXT_MAX];
        key_text(j->recs[i].key, j->recs[i].key_len, key);
        sqlite3_reset(s);
        bind_identity(s, &j->recs[i], key);
        bool exists = false;
        st = step(c, s, &exists, where);
        sqlite3_reset(s);
        if (st != KT_OK) break;
        if (exists && !j->replace) {
            j->kept++;
            continue;
        }
        st = write_rec(c, &j->recs[i], where);
        if (st == KT_OK) {
            if (exists) j->replaced++;
            else j->added++;
        }
    }
    sqlite3_finalize(s);
    return st;
}

kt_status kt_cache_import(kt_cache *cache, const char *json, int replace, size_t *added, size_t *replaced, size_t *kept) {
    if (added) *added = 0;
    if (replaced) *replaced = 0;
    if (kept) *kept = 0;
    if (cache == NULL || json == NULL) return kt__err(KT_ERR_NULL, "kt_cache_import: cache or json is NULL");
    json_error_t jerr;
    json_t *doc = json_loads(json, JSON_REJECT_DUPLICATES, &jerr);
    if (doc == NULL)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_cache_import: invalid JSON at line %d, column %d: %s", jerr.line, jerr.column, jerr.text);
    kt_status st = KT_OK;
    json_t *v = NULL, *entries = NULL;
    if (!json_is_object(doc)) st = jbad("", "", "expected a JSON object (a kerntune wisdom document), got %s", kind_of(doc));
    if (st == KT_OK && (v = json_object_get(doc, "kerntune_wisdom")) == NULL)
        st = jbad("", "kerntune_wisdom", "missing: not a kerntune wisdom document");
    if (st == KT_OK && !(json_is_integer(v) && json_integer_value(v) == 1))
        st = jbad("", "kerntune_wisdom", "expected 1, the wisdom format this library reads, got %s", kind_of(v));
    char *version = NULL;
    if (st == KT_OK) st = jstr(doc, "", "library_version", false, &version);
    if (st == KT_OK) st = check_major("", "library_version", version);
    free(version);
    if (st == KT_OK) st = jget(doc, "", "entries", &entries, "an array");
    if (st == KT_OK && !json_is_array(entries)) st = jbad("", "entries", "expected an array, got %s", kind_of(entries));
    import_job j = {.replace = replace != 0};
    int64_t now = (int64_t)time(NULL);
    if (st == KT_OK && json_array_size(entries) > 0) {
        j.recs = calloc(json_array_size(entries), sizeof *j.recs);
        if (j.recs == NULL) st = kt__err(KT_ERR_NO_MEMORY, "kt_cache_import: out of memory");
        for (size_t i = 0; st == KT_OK && i < json_array_size(entries); i++) {
            char path[48];
            snprintf(path, sizeof path, "entries[%zu]", i);
            st = parse_entry(json_array_get(entries, i), path, now, &j.recs[i]);
            if (st == KT_OK) j.n++;
        }
    }
    json_decref(doc);
    if (st == KT_OK) st = check_duplicates(j.recs, j.n);
    if (st == KT_OK) {
        char where[600];
        where_of(where, sizeof where, "kt_cache_import", cache);
        pthread_mutex_lock(&cache->lock);
        st = tx(cache, true, import_tx, &j, where);
        pthread_mutex_unlock(&cache->lock);
    }
    for (size_t i = 0; i < j.n; i++) kt__store_rec_free(&j.recs[i]);
    free(j.recs);
    if (st != KT_OK) return st;
    if (added) *added = j.added;
    if (replaced) *replaced = j.replaced;
    if (kept) *kept = j.kept;
    return KT_OK;
}

#else /* KT_NO_CACHE: built without SQLite and jansson (a KT_CUDA_ONLY build on a bare image) */

static kt_status kt__no_cache(const char *fn) {
    return kt__err(KT_ERR_STATE, "%s: this kerntune was built without the persistent cache (no SQLite or jansson at build time)", fn);
}

kt_status kt_cache_default_path(char *buf, size_t len) {
    if (buf != NULL && len > 0) buf[0] = '\0';
    return kt__no_cache("kt_cache_default_path");
}
kt_status kt_cache_open(const char *path, kt_cache **out) {
    (void)path;
    if (out != NULL) *out = NULL;
    return kt__no_cache("kt_cache_open");
}
void kt_cache_close(kt_cache *cache) { (void)cache; }
const char *kt_cache_path(const kt_cache *cache) { (void)cache; return NULL; }
const char *kt_cache_warning(const kt_cache *cache) { (void)cache; return ""; }
kt_status kt_cache_count(kt_cache *cache, const char *op, const char *device, size_t *count) {
    (void)cache, (void)op, (void)device;
    if (count != NULL) *count = 0;
    return kt__no_cache("kt_cache_count");
}
kt_status kt_cache_export(kt_cache *cache, const char *op, const char *device, char **json) {
    (void)cache, (void)op, (void)device;
    if (json != NULL) *json = NULL;
    return kt__no_cache("kt_cache_export");
}
kt_status kt_cache_import(kt_cache *cache, const char *json, int replace, size_t *added, size_t *replaced, size_t *kept) {
    (void)cache, (void)json, (void)replace, (void)added, (void)replaced, (void)kept;
    return kt__no_cache("kt_cache_import");
}
kt_status kt_cache_remove(kt_cache *cache, const char *op, const char *device, size_t *removed) {
    (void)cache, (void)op, (void)device;
    if (removed != NULL) *removed = 0;
    return kt__no_cache("kt_cache_remove");
}
void kt_free(void *p) { free(p); }
kt_status kt__store_get(kt_cache *c, const kt__store_rec *id, kt__store_rec *out) {
    (void)c, (void)id, (void)out;
    return kt__no_cache("kt__store_get");
}
kt_status kt__store_put(kt_cache *c, const kt__store_rec *rec) {
    (void)c, (void)rec;
    return kt__no_cache("kt__store_put");
}
kt_status kt__store_get_unit(kt_cache *c, const kt__store_rec *id, const char *unit_hash, bool skip_own, kt__store_unit *out) {
    (void)c, (void)id, (void)unit_hash, (void)skip_own, (void)out;
    return kt__no_cache("kt__store_get_unit");
}

#endif /* KT_NO_CACHE */
