/*
 * store-worker.c - a process that writes and reads a persistent cache, for the multi-process
 * tests of test-store-damage.c (the store's internal API, src/store/store.h).
 *
 *   store-worker write PATH ID N   writes N decisions of op "mp": even i under the key [i, 7]
 *                                  that every worker shares, odd i under [ID * 1000 + i, 7],
 *                                  its own; reading one back after each write; then reads all
 *                                  N back and checks each is whole. Exit 0 when all are.
 *   store-worker one PATH ID       opens the cache (which may be damaged: all of them open it at
 *                                  once), writes one decision of op "one" under [ID], reads it
 *                                  back; prints the open warning, if any.
 *   store-worker crash PATH ID W   writes decisions [ID, 0..4] of op "crash" (1 + i units each),
 *                                  then, while writing [ID, 5] (40 units of 2000-byte messages,
 *                                  a transaction of dozens of WAL frames), SIGKILLs itself at its
 *                                  W-th write into the WAL's frames: a process dying in the
 *                                  middle of a commit, at a point chosen by the test. The writes
 *                                  are counted by a VFS shim registered as SQLite's default, which
 *                                  passes every call on to the real one. The WAL header's write
 *                                  (offset 0, made when a transaction starts the WAL anew) is not
 *                                  counted, so W means the same whether the transaction appends
 *                                  to the WAL or restarts it. Exits 3 if it was not killed.
 *   store-worker crash-fresh PATH ID W
 *                                  the same, but the WAL is checkpointed whole (by a second
 *                                  connection) just before [ID, 5], so that its transaction
 *                                  starts the WAL anew: a new header and salt over the old
 *                                  frames, which a reader must then ignore. Exits 6 if it did not.
 *   store-worker loop PATH ID      writes decisions of op "loop" under [ID, i] for i = 0, 1, ...
 *                                  with 1 + i % 40 units each (2000-byte messages, so that a
 *                                  commit writes many pages) and winner_config "n=<units>",
 *                                  until killed; prints "ready" after the first.
 *
 * Records written by worker W carry W everywhere (winner "w<W>", unit configs
 * "writer=<W>,u=<j>", unit hashes "h<j>-<W>"), so a reader can tell a whole record from a mix
 * of two writers' rows.
 */
#include "store/store.h"

#include <kerntune.h>
#include <kerntune/cache.h>

#include <signal.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NUNITS 3

static int fail(kt_status st, const char *what, long i) {
    fprintf(stderr, "store-worker: %s (i=%ld): %s: %s\n", what, i, kt_status_name(st), kt_last_error());
    return 1;
}

static void fill(kt__store_rec *r, kt__store_unit *u, char (*text)[64], const char *op, int64_t *key, long id, long i, size_t nunits) {
    memset(r, 0, sizeof *r);
    r->op = (char *)op;
    r->set_hash = "s1";
    r->device = "dev";
    r->version = "0.1.0";
    r->key = key;
    r->key_len = 2;
    snprintf(text[0], 64, "w%ld", id);
    r->winner_candidate = text[0];
    snprintf(text[1], 64, "n=%zu", nunits);
    r->winner_config = text[1];
    r->time_ns = (double)(id * 1000 + i);
    r->confidence = 0.5;
    r->created = 1700000000 + i;
    r->units = u;
    r->nunits = nunits;
    for (size_t j = 0; j < nunits; j++) {
        memset(&u[j], 0, sizeof u[j]);
        snprintf(text[2 + 2 * j], 64, "writer=%ld,u=%zu", id, j);
        snprintf(text[3 + 2 * j], 64, "h%zu-%ld", j, id);
        u[j].candidate = "c";
        u[j].config = text[2 + 2 * j];
        u[j].unit_hash = text[3 + 2 * j];
        u[j].outcome = (int)(j % 6);
        u[j].time_ns = (double)(j * 10 + (size_t)id);
        u[j].ci_low_ns = u[j].time_ns - 1;
        u[j].ci_high_ns = u[j].time_ns + 1;
        u[j].runs = (unsigned)j + 1;
        u[j].warmups = 1;
        u[j].message = j == 2 ? "third" : NULL;
    }
}

/* Checks a record read back is whole: NUNITS units, all by the writer its winner names (and by
 * `owner` when it is not negative). */
static int whole(const kt__store_rec *r, long owner, long i) {
    long w;
    if (sscanf(r->winner_candidate, "w%ld", &w) != 1 || (owner >= 0 && w != owner)) {
        fprintf(stderr, "store-worker: i=%ld: winner '%s', expected w%ld\n", i, r->winner_candidate, owner);
        return 1;
    }
    if (r->nunits != NUNITS) {
        fprintf(stderr, "store-worker: i=%ld: %zu units, expected %d\n", i, r->nunits, NUNITS);
        return 1;
    }
    for (size_t j = 0; j < r->nunits; j++) {
        char config[64], hash[64];
        snprintf(config, sizeof config, "writer=%ld,u=%zu", w, j);
        snprintf(hash, sizeof hash, "h%zu-%ld", j, w);
        if (strcmp(r->units[j].config, config) != 0 || strcmp(r->units[j].unit_hash, hash) != 0 ||
            r->units[j].runs != j + 1 || r->units[j].time_ns != (double)(j * 10 + (size_t)w)) {
            fprintf(stderr, "store-worker: i=%ld: unit %zu is '%s' '%s', mixed with another writer's\n", i, j,
                    r->units[j].config, r->units[j].unit_hash);
            return 1;
        }
    }
    return 0;
}

static int do_write(const char *path, long id, long n) {
    kt_cache *c;
    kt_status st = kt_cache_open(path, &c);
    if (st != KT_OK) return fail(st, "open", -1);
    if (*kt_cache_warning(c)) {
        fprintf(stderr, "store-worker: unexpected warning: %s\n", kt_cache_warning(c));
        return 1;
    }
    int bad = 0;
    for (long i = 0; i < n && !bad; i++) {
        kt__store_rec r, got;
        kt__store_unit u[NUNITS];
        char text[2 + 2 * NUNITS][64];
        int64_t key[2] = {i % 2 == 0 ? i : id * 1000 + i, 7};
        fill(&r, u, text, "mp", key, id, i, NUNITS);
        if ((st = kt__store_put(c, &r)) != KT_OK) return fail(st, "put", i);
        if (i > 0) { /* read a shared key back while the others write it */
            int64_t prev[2] = {(i - 1) / 2 * 2, 7};
            r.key = prev;
            if ((st = kt__store_get(c, &r, &got)) != KT_OK) return fail(st, "get", i);
            bad = whole(&got, -1, i);
            kt__store_rec_free(&got);
        }
    }
    for (long i = 0; i < n && !bad; i++) {
        kt__store_rec id_rec = {.op = "mp", .set_hash = "s1", .device = "dev", .version = "0.1.0"}, got;
        int64_t key[2] = {i % 2 == 0 ? i : id * 1000 + i, 7};
        id_rec.key = key;
        id_rec.key_len = 2;
        if ((st = kt__store_get(c, &id_rec, &got)) != KT_OK) return fail(st, "get back", i);
        bad = whole(&got, i % 2 == 0 ? -1 : id, i);
        kt__store_rec_free(&got);
    }
    kt_cache_close(c);
    return bad;
}

static int do_one(const char *path, long id) {
    kt_cache *c;
    kt_status st = kt_cache_open(path, &c);
    if (st != KT_OK) return fail(st, "open", -1);
    printf("%s\n", kt_cache_warning(c));
    kt__store_rec r, got;
    kt__store_unit u[NUNITS];
    char text[2 + 2 * NUNITS][64];
    int64_t key[2] = {id, 0};
    fill(&r, u, text, "one", key, id, 0, NUNITS);
    if ((st = kt__store_put(c, &r)) != KT_OK) return fail(st, "put", 0);
    if ((st = kt__store_get(c, &r, &got)) != KT_OK) return fail(st, "get", 0);
    int bad = whole(&got, id, 0);
    kt__store_rec_free(&got);
    kt_cache_close(c);
    return bad;
}

/* ---- a VFS shim that kills the process at a chosen write into the WAL ---- */

typedef struct crash_file {
    sqlite3_file base;
    sqlite3_file *real; /* the real VFS's file, right after this struct */
    int wal;
} crash_file;

static sqlite3_vfs *real_vfs;
static sqlite3_vfs crash_vfs;
static long wal_writes_left = -1; /* armed when >= 0 */
static bool must_restart, wal_restarted; /* crash-fresh; whether the armed transaction wrote a new WAL header */

#define REAL(f) (((crash_file *)(f))->real)
static int c_close(sqlite3_file *f) { return REAL(f)->pMethods->xClose(REAL(f)); }
static int c_read(sqlite3_file *f, void *b, int n, sqlite3_int64 o) { return REAL(f)->pMethods->xRead(REAL(f), b, n, o); }
static int c_write(sqlite3_file *f, const void *b, int n, sqlite3_int64 o) {
    if (((crash_file *)f)->wal && wal_writes_left >= 0) {
        /* writes at offset 0 are the WAL header's; frames start after its 32 bytes */
        if (o == 0) wal_restarted = true;
        else if (wal_writes_left-- == 0) {
            if (must_restart && !wal_restarted) _exit(6); /* the test would not prove what it says */
            raise(SIGKILL);
        }
    }
    return REAL(f)->pMethods->xWrite(REAL(f), b, n, o);
}
static int c_truncate(sqlite3_file *f, sqlite3_int64 size) { return REAL(f)->pMethods->xTruncate(REAL(f), size); }
static int c_sync(sqlite3_file *f, int flags) { return REAL(f)->pMethods->xSync(REAL(f), flags); }
static int c_size(sqlite3_file *f, sqlite3_int64 *size) { return REAL(f)->pMethods->xFileSize(REAL(f), size); }
static int c_lock(sqlite3_file *f, int l) { return REAL(f)->pMethods->xLock(REAL(f), l); }
static int c_unlock(sqlite3_file *f, int l) { return REAL(f)->pMethods->xUnlock(REAL(f), l); }
static int c_reserved(sqlite3_file *f, int *out) { return REAL(f)->pMethods->xCheckReservedLock(REAL(f), out); }
static int c_control(sqlite3_file *f, int op, void *arg) { return REAL(f)->pMethods->xFileControl(REAL(f), op, arg); }
static int c_sector(sqlite3_file *f) { return REAL(f)->pMethods->xSectorSize(REAL(f)); }
static int c_chars(sqlite3_file *f) { return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f)); }
static int c_shm_map(sqlite3_file *f, int pg, int size, int extend, void volatile **p) {
    return REAL(f)->pMethods->xShmMap(REAL(f), pg, size, extend, p);
}
static int c_shm_lock(sqlite3_file *f, int off, int n, int flags) { return REAL(f)->pMethods->xShmLock(REAL(f), off, n, flags); }
static void c_shm_barrier(sqlite3_file *f) { REAL(f)->pMethods->xShmBarrier(REAL(f)); }
static int c_shm_unmap(sqlite3_file *f, int del) { return REAL(f)->pMethods->xShmUnmap(REAL(f), del); }
static int c_fetch(sqlite3_file *f, sqlite3_int64 o, int n, void **p) { return REAL(f)->pMethods->xFetch(REAL(f), o, n, p); }
static int c_unfetch(sqlite3_file *f, sqlite3_int64 o, void *p) { return REAL(f)->pMethods->xUnfetch(REAL(f), o, p); }

static const sqlite3_io_methods crash_io = {3, c_close, c_read, c_write, c_truncate, c_sync, c_size, c_lock, c_unlock, c_reserved,
                                            c_control, c_sector, c_chars, c_shm_map, c_shm_lock, c_shm_barrier, c_shm_unmap,
                                            c_fetch, c_unfetch};

static int crash_open(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *f, int flags, int *out_flags) {
    (void)vfs;
    crash_file *cf = (crash_file *)f;
    cf->real = (sqlite3_file *)(cf + 1);
    cf->wal = (flags & SQLITE_OPEN_WAL) != 0;
    int rc = real_vfs->xOpen(real_vfs, name, cf->real, flags, out_flags);
    cf->base.pMethods = cf->real->pMethods && cf->real->pMethods->iVersion >= 3 ? &crash_io : NULL;
    if (cf->real->pMethods && cf->base.pMethods == NULL) {
        cf->real->pMethods->xClose(cf->real);
        return SQLITE_CANTOPEN;
    }
    return rc;
}

/* Checkpoints the whole WAL into the database through a connection of its own, so that the
 * next write transaction starts the WAL anew. */
static int checkpoint_all(const char *path) {
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL);
    int log = 0, done = 0;
    /* a first read opens the WAL; before it the connection does not know the file is in WAL mode */
    if (rc == SQLITE_OK) rc = sqlite3_exec(db, "SELECT count(*) FROM sqlite_master", NULL, NULL, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_FULL, &log, &done);
    if (rc != SQLITE_OK || log <= 0 || log != done) fprintf(stderr, "store-worker: checkpoint of %s: %s (%d of %d frames)\n", path, sqlite3_errmsg(db), done, log);
    sqlite3_close(db);
    return rc == SQLITE_OK && log > 0 && log == done ? 0 : 5;
}

static int do_crash(const char *path, long id, long w, bool fresh) {
    real_vfs = sqlite3_vfs_find(NULL);
    crash_vfs = *real_vfs;
    crash_vfs.zName = "kt-crash";
    crash_vfs.szOsFile = (int)sizeof(crash_file) + real_vfs->szOsFile;
    crash_vfs.xOpen = crash_open;
    if (sqlite3_vfs_register(&crash_vfs, 1) != SQLITE_OK) return 4;
    kt_cache *c;
    kt_status st = kt_cache_open(path, &c);
    if (st != KT_OK) return fail(st, "open", -1);
    static kt__store_unit u[40];
    static char text[2 + 2 * 40][64];
    static char big[2001];
    memset(big, 'm', sizeof big - 1);
    for (long i = 0; i <= 5; i++) {
        kt__store_rec r;
        int64_t key[2] = {id, i};
        fill(&r, u, text, "crash", key, id, i, i < 5 ? 1 + (size_t)i : 40);
        for (size_t j = 0; j < r.nunits; j++) u[j].message = big;
        if (i == 5) {
            if (fresh && checkpoint_all(path) != 0) return 5;
            must_restart = fresh;
            wal_writes_left = w - 1;
        }
        if ((st = kt__store_put(c, &r)) != KT_OK) return fail(st, "put", i);
    }
    fprintf(stderr, "store-worker: not killed: the transaction made fewer than %ld writes into the WAL\n", w);
    return 3;
}

static int do_loop(const char *path, long id) {
    kt_cache *c;
    kt_status st = kt_cache_open(path, &c);
    if (st != KT_OK) return fail(st, "open", -1);
    static kt__store_unit u[40];
    static char text[2 + 2 * 40][64];
    static char big[2001];
    memset(big, 'm', sizeof big - 1);
    for (long i = 0;; i++) {
        kt__store_rec r;
        int64_t key[2] = {id, i};
        fill(&r, u, text, "loop", key, id, i, 1 + (size_t)i % 40);
        for (size_t j = 0; j < r.nunits; j++) u[j].message = big; /* commits of many pages */
        if ((st = kt__store_put(c, &r)) != KT_OK) return fail(st, "put", i);
        if (i == 0) {
            printf("ready\n");
            fflush(stdout);
        }
    }
}

int main(int argc, char **argv) {
    if (argc == 5 && strcmp(argv[1], "write") == 0) return do_write(argv[2], atol(argv[3]), atol(argv[4]));
    if (argc == 5 && strcmp(argv[1], "crash") == 0) return do_crash(argv[2], atol(argv[3]), atol(argv[4]), false);
    if (argc == 5 && strcmp(argv[1], "crash-fresh") == 0) return do_crash(argv[2], atol(argv[3]), atol(argv[4]), true);
    if (argc == 4 && strcmp(argv[1], "one") == 0) return do_one(argv[2], atol(argv[3]));
    if (argc == 4 && strcmp(argv[1], "loop") == 0) return do_loop(argv[2], atol(argv[3]));
    fprintf(stderr, "usage: store-worker write PATH ID N | one PATH ID | crash[-fresh] PATH ID W | loop PATH ID\n");
    return 2;
}
