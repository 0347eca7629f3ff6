/*
 * test-store.c - the persistent cache (src/store/): records in and out whole, 32 processes at
 * once (tests/store-worker), a writer killed mid-transaction, damaged, truncated, read-only,
 * version-1, version-2 and newer-version files, rows with wrong types, wisdom export and import
 * (and every kind of lie import refuses), the default path, one handle shared by threads, and
 * every allocation failing in turn (this program's malloc fails the one it is told to). Real
 * files in a fresh temporary directory per test, inspected with SQLite directly.
 */
#define _GNU_SOURCE /* mkdtemp, nftw, dladdr */
#define KT_TEST_CACHE_ENV /* its tests set KERNTUNE_CACHE themselves */
#include "helpers.h"

#include <kerntune/cache.h>
#include <kerntune/decision.h>

#include "store/store.h"
#include "store/store_int.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <stdbool.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef KT_STORE_WORKER
#error "KT_STORE_WORKER must name the built store-worker"
#endif
#ifndef KT_DATA
#error "KT_DATA must name tests/data"
#endif

#include "oom.h"

/* ---- files ----------------------------------------------------------------------------------- */

static char dir[256];

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)ftw;
    return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static int chmod_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)ftw;
    if (flag == FTW_D || flag == FTW_DP) chmod(path, 0700);
    else if (S_ISREG(sb->st_mode)) chmod(path, 0600);
    return 0;
}

static int setup(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/kt-store-XXXXXX");
    if (mkdtemp(dir) == NULL) return -1;
    return 0;
}

/* The same in memory (tmpfs) where there is one: for tests that open thousands of files, whose
 * time on a shared disk is its other users' to decide. */
static int setup_in_memory(void **state) {
    snprintf(dir, sizeof dir, "/dev/shm/kt-store-XXXXXX");
    if (mkdtemp(dir) != NULL) return 0;
    return setup(state);
}

static int teardown(void **state) {
    (void)state;
    chmod(dir, 0700);
    nftw(dir, chmod_entry, 16, FTW_PHYS);
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

static const char *in_dir(const char *name) {
    static char buf[4][512];
    static int next;
    char *p = buf[next++ % 4];
    snprintf(p, 512, "%s/%s", dir, name);
    return p;
}

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = malloc((size_t)n + 1);
    assert_non_null(p);
    assert_int_equal(fread(p, 1, (size_t)n, f), (size_t)n);
    p[n] = 0;
    fclose(f);
    if (len) *len = (size_t)n;
    return p;
}

static void write_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static bool exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* The one "<name>.corrupt-*" file of the test directory (not its -wal/-shm), or NULL. */
static const char *moved_aside(const char *name) {
    static char found[512];
    char prefix[256];
    snprintf(prefix, sizeof prefix, "%s.corrupt-", name);
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0) continue;
        if (len > 4 && (strcmp(e->d_name + len - 4, "-wal") == 0 || strcmp(e->d_name + len - 4, "-shm") == 0)) continue;
        snprintf(found, sizeof found, "%s/%s", dir, e->d_name);
        n++;
    }
    closedir(d);
    assert_true(n <= 1);
    return n == 1 ? found : NULL;
}

/* ---- SQLite directly -------------------------------------------------------------------------- */

static void sql(const char *path, const char *text) {
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 10000);
    char *err = NULL;
    int rc = sqlite3_exec(db, text, NULL, NULL, &err);
    if (rc != SQLITE_OK) fail_msg("%s: %s", text, err);
    sqlite3_close(db);
}

/* The first column of the first row of query, as text ("" when NULL or no row). */
static const char *sql_text(const char *path, const char *query) {
    static char out[4096];
    sqlite3 *db;
    sqlite3_stmt *s;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 10000);
    assert_int_equal(sqlite3_prepare_v2(db, query, -1, &s, NULL), SQLITE_OK);
    out[0] = 0;
    if (sqlite3_step(s) == SQLITE_ROW && sqlite3_column_text(s, 0)) snprintf(out, sizeof out, "%s", sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    sqlite3_close(db);
    return out;
}

static long long sql_int(const char *path, const char *query) { return atoll(sql_text(path, query)); }

/* ---- records ---------------------------------------------------------------------------------- */

typedef struct recbuf {
    kt__store_rec r;
    kt__store_unit u[8];
    int64_t key[4];
} recbuf;

/* A decision of op/set/device/version under key [k0, k1] with three units: a measured variant
 * (the winner, a finalist), a native that failed (no config, a message), a variant never
 * measured (negative times). Its race asked for no confidence (another policy). */
static kt__store_rec *make_rec(recbuf *b, const char *op, const char *set, const char *device, const char *version, int64_t k0, int64_t k1) {
    memset(b, 0, sizeof *b);
    b->key[0] = k0;
    b->key[1] = k1;
    b->r = (kt__store_rec){.op = (char *)op, .set_hash = (char *)set, .device = (char *)device, .version = (char *)version,
                           .key = b->key, .key_len = 2, .winner_candidate = "tiled", .winner_config = "TM=16,TN=8",
                           .time_ns = 1234.5, .confidence = 0.9375, .requested_confidence = -1, .created = 1763800000,
                           .units = b->u, .nunits = 3};
    b->u[0] = (kt__store_unit){"tiled", "TM=16,TN=8", "a1b2c3", KT_OUTCOME_MEASURED, 1234.5, 1200.25, 1260.75, 25, 2, NULL, true};
    b->u[1] = (kt__store_unit){"naive", NULL, "d4e5f6", KT_OUTCOME_FAILED, -1, -1, -1, 0, 1, "returned 3", false};
    b->u[2] = (kt__store_unit){"tiled", "TM=32,TN=8", "0789ab", KT_OUTCOME_BUILD_FAILED, -1, -1, -1, 0, 0, "ptxas: too much shared data", false};
    return &b->r;
}

static void assert_str_or_null(const char *a, const char *b) {
    if (a == NULL || b == NULL) assert_ptr_equal(a, b);
    else assert_string_equal(a, b);
}

static void assert_unit_equal(const kt__store_unit *a, const kt__store_unit *b) {
    assert_string_equal(a->candidate, b->candidate);
    assert_str_or_null(a->config, b->config);
    assert_string_equal(a->unit_hash, b->unit_hash);
    assert_int_equal(a->outcome, b->outcome);
    assert_true(a->time_ns == b->time_ns);
    assert_true(a->ci_low_ns == b->ci_low_ns);
    assert_true(a->ci_high_ns == b->ci_high_ns);
    assert_int_equal(a->runs, b->runs);
    assert_int_equal(a->warmups, b->warmups);
    assert_str_or_null(a->message, b->message);
    assert_int_equal(a->finalist, b->finalist);
}

static void assert_rec_equal(const kt__store_rec *a, const kt__store_rec *b) {
    assert_string_equal(a->op, b->op);
    assert_string_equal(a->set_hash, b->set_hash);
    assert_string_equal(a->device, b->device);
    assert_string_equal(a->version, b->version);
    assert_int_equal(a->key_len, b->key_len);
    for (size_t i = 0; i < a->key_len; i++) assert_int_equal(a->key[i], b->key[i]);
    assert_string_equal(a->winner_candidate, b->winner_candidate);
    assert_str_or_null(a->winner_config, b->winner_config);
    assert_true(a->time_ns == b->time_ns);
    assert_true(a->confidence == b->confidence);
    assert_true(a->requested_confidence == b->requested_confidence);
    assert_int_equal(a->created, b->created);
    assert_int_equal(a->nunits, b->nunits);
    for (size_t i = 0; i < a->nunits; i++) assert_unit_equal(&a->units[i], &b->units[i]);
}

static kt_cache *open_ok(const char *path) {
    kt_cache *c = NULL;
    ok(kt_cache_open(path, &c));
    assert_non_null(c);
    return c;
}

static size_t count(kt_cache *c, const char *op, const char *device) {
    size_t n = 99999;
    ok(kt_cache_count(c, op, device, &n));
    return n;
}

/* ---- single records --------------------------------------------------------------------------- */

static void test_roundtrip(void **state) {
    (void)state;
    kt_cache *c = open_ok(in_dir("a/b/cache.db")); /* directories created */
    assert_string_equal(kt_cache_path(c), in_dir("a/b/cache.db"));
    assert_string_equal(kt_cache_warning(c), "");
    recbuf b;
    kt__store_rec *r = make_rec(&b, "matmul", "set1", "cpu:x", "0.1.0", 512, -3);
    ok(kt__store_put(c, r));
    kt__store_rec got;
    ok(kt__store_get(c, r, &got));
    assert_rec_equal(&got, r);
    kt__store_rec_free(&got);
    assert_null(got.op);

    /* any part of the identity different: a miss */
    recbuf m;
    make_rec(&m, "matmul", "set2", "cpu:x", "0.1.0", 512, -3);
    expect_status(KT_ERR_NOT_FOUND, kt__store_get(c, &m.r, &got));
    assert_string_equal(kt_last_error(), "kt__store_get(op 'matmul'): no decision recorded for that identity");
    make_rec(&m, "matmul", "set1", "cpu:y", "0.1.0", 512, -3);
    expect_status(KT_ERR_NOT_FOUND, kt__store_get(c, &m.r, &got));
    make_rec(&m, "matmul", "set1", "cpu:x", "0.1.1", 512, -3);
    expect_status(KT_ERR_NOT_FOUND, kt__store_get(c, &m.r, &got));
    make_rec(&m, "matmul", "set1", "cpu:x", "0.1.0", 512, -4);
    expect_status(KT_ERR_NOT_FOUND, kt__store_get(c, &m.r, &got));
    make_rec(&m, "matmul", "set1", "cpu:x", "0.1.0", 512, -3);
    m.r.key_len = 1;
    expect_status(KT_ERR_NOT_FOUND, kt__store_get(c, &m.r, &got));
    make_rec(&m, "matmu", "set1", "cpu:x", "0.1.0", 512, -3);
    expect_status(KT_ERR_NOT_FOUND, kt__store_get(c, &m.r, &got));
    assert_null(got.op);

    /* a unit found under another candidate-set hash */
    kt__store_unit u;
    make_rec(&m, "matmul", "a-changed-set", "cpu:x", "0.1.0", 512, -3);
    ok(kt__store_get_unit(c, &m.r, "d4e5f6", false, &u));
    assert_unit_equal(&u, &b.u[1]);
    kt__store_unit_free(&u);
    ok(kt__store_get_unit(c, &m.r, "d4e5f6", true, &u)); /* set1's record is not m's own */
    kt__store_unit_free(&u);
    expect_status(KT_ERR_NOT_FOUND, kt__store_get_unit(c, &m.r, "ffffff", false, &u));
    make_rec(&m, "matmul", "set1", "cpu:x", "0.1.0", 512, -3); /* its own record, skipped when asked */
    ok(kt__store_get_unit(c, &m.r, "d4e5f6", false, &u));
    kt__store_unit_free(&u);
    expect_status(KT_ERR_NOT_FOUND, kt__store_get_unit(c, &m.r, "d4e5f6", true, &u));
    make_rec(&m, "matmul", "set1", "cpu:y", "0.1.0", 512, -3); /* but not on another device */
    expect_status(KT_ERR_NOT_FOUND, kt__store_get_unit(c, &m.r, "d4e5f6", false, &u));

    /* the most recent unit of a hash wins: the same unit measured again under set2, later */
    recbuf n2;
    kt__store_rec *r2 = make_rec(&n2, "matmul", "set2", "cpu:x", "0.1.0", 512, -3);
    r2->created += 60;
    n2.u[1] = (kt__store_unit){"naive", NULL, "d4e5f6", KT_OUTCOME_MEASURED, 999.0, 990.0, 1010.0, 40, 1, NULL, true};
    r2->requested_confidence = 0.99; /* and ended below it */
    ok(kt__store_put(c, r2));
    make_rec(&m, "matmul", "set3", "cpu:x", "0.1.0", 512, -3);
    ok(kt__store_get_unit(c, &m.r, "d4e5f6", false, &u));
    assert_unit_equal(&u, &n2.u[1]);
    kt__store_unit_free(&u);

    /* put replaces a decision whole: fewer units, another winner */
    make_rec(&m, "matmul", "set1", "cpu:x", "0.1.0", 512, -3);
    m.r.winner_candidate = "naive";
    m.r.winner_config = NULL;
    m.r.confidence = -1;
    m.r.nunits = 1;
    ok(kt__store_put(c, &m.r));
    ok(kt__store_get(c, r, &got));
    assert_rec_equal(&got, &m.r);
    kt__store_rec_free(&got);
    assert_int_equal(count(c, NULL, NULL), 2);
    assert_int_equal(sql_int(in_dir("a/b/cache.db"), "SELECT count(*) FROM units"), 4);

    /* an empty key is a key */
    make_rec(&m, "nokey", "s", "d", "0.1.0", 0, 0);
    m.r.key_len = 0;
    m.r.key = NULL;
    ok(kt__store_put(c, &m.r));
    ok(kt__store_get(c, &m.r, &got));
    assert_int_equal(got.key_len, 0);
    kt__store_rec_free(&got);

    /* what put refuses */
    make_rec(&m, "matmul", "set1", "cpu:x", "0.1.0", 1, 2);
    m.u[2].outcome = 8;
    expect_status(KT_ERR_INVALID_ARGUMENT, kt__store_put(c, &m.r));
    assert_string_equal(kt_last_error(), "kt__store_put(op 'matmul'): units[2].outcome is 8; expected a kt_outcome (0 to 7)");
    make_rec(&m, "matmul", NULL, "cpu:x", "0.1.0", 1, 2);
    expect_status(KT_ERR_NULL, kt__store_put(c, &m.r));
    assert_string_equal(kt_last_error(), "kt__store_put(op 'matmul'): set_hash is NULL");
    make_rec(&m, "matmul", "s", "", "0.1.0", 1, 2);
    expect_status(KT_ERR_INVALID_ARGUMENT, kt__store_put(c, &m.r));
    assert_string_equal(kt_last_error(), "kt__store_put(op 'matmul'): device is empty");
    make_rec(&m, "matmul", "s", "d", "0.1.0", 1, 2);
    m.r.confidence = 1.5;
    expect_status(KT_ERR_INVALID_ARGUMENT, kt__store_put(c, &m.r));
    make_rec(&m, "matmul", "s", "d", "0.1.0", 1, 2);
    m.r.requested_confidence = 2;
    expect_status(KT_ERR_INVALID_ARGUMENT, kt__store_put(c, &m.r));
    assert_string_equal(kt_last_error(), "kt__store_put(op 'matmul'): requested_confidence is 2; expected 0 to 1, or negative for none");
    make_rec(&m, "matmul", "s", "d", "0.1.0", 1, 2);
    m.u[0].time_ns = NAN;
    expect_status(KT_ERR_INVALID_ARGUMENT, kt__store_put(c, &m.r));
    assert_string_equal(kt_last_error(), "kt__store_put(op 'matmul'): units[0].time_ns is nan; expected a finite number");
    make_rec(&m, "matmul", "s", "d", "0.1.0", 1, 2);
    m.r.key_len = KT__STORE_KEY_MAX + 1;
    expect_status(KT_ERR_LIMIT, kt__store_put(c, &m.r));
    assert_int_equal(count(c, NULL, NULL), 3);
    kt_cache_close(c);

    /* and it is all still there in a new handle */
    c = open_ok(in_dir("a/b/cache.db"));
    ok(kt__store_get(c, r2, &got));
    assert_rec_equal(&got, r2);
    kt__store_rec_free(&got);
    kt_cache_close(c);
}

static void test_memory_and_nulls(void **state) {
    (void)state;
    kt_cache *c = open_ok(":memory:");
    assert_string_equal(kt_cache_path(c), ":memory:");
    assert_string_equal(kt_cache_warning(c), "");
    recbuf b;
    ok(kt__store_put(c, make_rec(&b, "op", "s", "d", "0.1.0", 1, 2)));
    assert_int_equal(count(c, NULL, NULL), 1);
    kt_cache_close(c);
    kt_cache_close(NULL);
    kt_free(NULL);
    size_t n;
    expect_status(KT_ERR_NULL, kt_cache_open(NULL, NULL));
    expect_status(KT_ERR_NULL, kt_cache_count(NULL, NULL, NULL, &n));
    expect_status(KT_ERR_NULL, kt_cache_remove(NULL, NULL, NULL, &n));
    char *json;
    expect_status(KT_ERR_NULL, kt_cache_export(NULL, NULL, NULL, &json));
    assert_null(json);
    expect_status(KT_ERR_NULL, kt_cache_import(NULL, "{}", 0, NULL, NULL, NULL));
    kt_cache *c2 = (kt_cache *)1;
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_cache_open("", &c2));
    assert_null(c2);
    assert_string_equal(kt_cache_warning(NULL), "");
    assert_null(kt_cache_path(NULL));
    /* a directory is not a store */
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_cache_open(dir, &c2));
}

/* ---- many processes --------------------------------------------------------------------------- */

static pid_t spawn(const char *const *argv, int *out_fd) {
    int p[2] = {-1, -1};
    if (out_fd) assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (out_fd) {
            dup2(p[1], 1);
            close(p[0]);
            close(p[1]);
        }
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    if (out_fd) {
        close(p[1]);
        *out_fd = p[0];
    }
    return pid;
}

#define NPROC 32
#define PER_PROC 20

static void check_integrity(const char *path) { assert_string_equal(sql_text(path, "PRAGMA integrity_check"), "ok"); }

static void test_many_processes(void **state) {
    (void)state;
    const char *path = in_dir("shared.db");
    char ids[NPROC][16], n[16];
    snprintf(n, sizeof n, "%d", PER_PROC);
    pid_t pids[NPROC];
    for (int i = 0; i < NPROC; i++) {
        snprintf(ids[i], sizeof ids[i], "%d", i + 1);
        const char *argv[] = {KT_STORE_WORKER, "write", path, ids[i], n, NULL};
        pids[i] = spawn(argv, NULL);
    }
    for (int i = 0; i < NPROC; i++) {
        int status;
        assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) fail_msg("worker %d ended with status %#x", i + 1, status);
    }
    check_integrity(path);
    /* PER_PROC / 2 keys every worker shares, PER_PROC / 2 of each worker's own */
    size_t expect = PER_PROC / 2 + NPROC * (PER_PROC / 2);
    assert_int_equal(sql_int(path, "SELECT count(*) FROM decisions"), (long long)expect);
    assert_int_equal(sql_int(path, "SELECT count(*) FROM units"), (long long)expect * 3);
    assert_int_equal(sql_int(path, "SELECT count(*) FROM units WHERE decision NOT IN (SELECT id FROM decisions)"), 0);
    kt_cache *c = open_ok(path);
    assert_int_equal(count(c, "mp", "dev"), expect);
    for (int w = 0; w <= NPROC; w++) {
        for (int i = w == 0 ? 0 : 1; i < PER_PROC; i += 2) { /* w 0: the shared keys */
            kt__store_rec id = {.op = "mp", .set_hash = "s1", .device = "dev", .version = "0.1.0"}, got;
            int64_t key[2] = {w == 0 ? i : w * 1000 + i, 7};
            id.key = key;
            id.key_len = 2;
            ok(kt__store_get(c, &id, &got));
            long writer = -1;
            assert_int_equal(sscanf(got.winner_candidate, "w%ld", &writer), 1);
            if (w > 0) assert_int_equal(writer, w);
            assert_int_equal(got.nunits, 3);
            for (size_t j = 0; j < 3; j++) {
                char cfg[64];
                snprintf(cfg, sizeof cfg, "writer=%ld,u=%zu", writer, j);
                assert_string_equal(got.units[j].config, cfg);
            }
            assert_true(got.time_ns == (double)(writer * 1000 + i));
            kt__store_rec_free(&got);
        }
    }
    kt_cache_close(c);
}

/* Reads the "ready" line of a loop worker. */
static void wait_ready(int fd) {
    char buf[8] = {0};
    size_t got = 0;
    while (got < 6) {
        ssize_t n = read(fd, buf + got, 6 - got);
        assert_true(n > 0);
        got += (size_t)n;
    }
    assert_string_equal(buf, "ready\n");
}

static uint32_t be32(const unsigned char *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }

/* Whether the WAL beside path ends in a transaction that never committed, i.e. its writer was
 * killed while writing it: frames of the WAL's current salt after its last commit frame (a
 * frame header's second word is nonzero on commit frames), or a frame written only in part. */
static bool wal_ends_uncommitted(const char *path) {
    char wal[600];
    snprintf(wal, sizeof wal, "%s-wal", path);
    size_t len;
    unsigned char *d = (unsigned char *)read_file(wal, &len);
    if (d == NULL) return false;
    bool uncommitted = false;
    if (len >= 32) {
        size_t frame = 24 + (size_t)be32(d + 8), off = 32, committed = 32;
        uint32_t salt1 = be32(d + 16), salt2 = be32(d + 20);
        while (off + 16 <= len && be32(d + off + 8) == salt1 && be32(d + off + 12) == salt2) {
            if (off + frame > len) { /* a frame cut short */
                uncommitted = true;
                break;
            }
            off += frame;
            if (be32(d + off - frame + 4) != 0) committed = off;
        }
        uncommitted = uncommitted || off > committed;
    }
    free(d);
    return uncommitted;
}

static void expect_killed(pid_t pid) {
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)) fail_msg("the writer was not killed: status %#x", status);
}

static void test_killed_mid_write(void **state) {
    (void)state;
    const char *path = in_dir("killed.db");
    /* writers killed by the test a few ms after their first decision, wherever they are */
    int k = 0, hits = 0;
    for (; k < 4; k++) {
        char id[16];
        snprintf(id, sizeof id, "%d", k + 1);
        const char *argv[] = {KT_STORE_WORKER, "loop", path, id, NULL};
        int fd;
        pid_t pid = spawn(argv, &fd);
        wait_ready(fd);
        struct timespec t = {0, (3 + k * 11) * 1000000L};
        nanosleep(&t, NULL);
        assert_int_equal(kill(pid, SIGKILL), 0);
        expect_killed(pid);
        close(fd);
        hits += wal_ends_uncommitted(path);
    }
    print_message("%d writers killed at random, %d of them while writing a transaction into the WAL\n", k, hits);
    /* and writers that kill themselves at a chosen write into the WAL, in the middle of a
     * transaction: after its first frame header only, after some frames, after many */
    static const char *const at[] = {"2", "9", "31"};
    for (int i = 0; i < 3; i++) {
        char id[16];
        snprintf(id, sizeof id, "%d", 100 + i);
        const char *argv[] = {KT_STORE_WORKER, "crash", path, id, at[i], NULL};
        expect_killed(spawn(argv, NULL));
        if (!wal_ends_uncommitted(path)) fail_msg("killed at WAL write %s, but the WAL ends on a commit", at[i]);
        kt_cache *c = open_ok(path);
        for (int64_t d = 0; d <= 5; d++) {
            kt__store_rec id_rec = {.op = "crash", .set_hash = "s1", .device = "dev", .version = "0.1.0"}, got;
            int64_t key[2] = {100 + i, d};
            id_rec.key = key;
            id_rec.key_len = 2;
            if (d == 5) { /* the transaction being written: not there at all */
                expect_status(KT_ERR_NOT_FOUND, kt__store_get(c, &id_rec, &got));
                continue;
            }
            ok(kt__store_get(c, &id_rec, &got));
            assert_int_equal(got.nunits, 1 + d);
            kt__store_rec_free(&got);
        }
        assert_int_equal(sql_int(path, "SELECT count(*) FROM units WHERE decision NOT IN (SELECT id FROM decisions)"), 0);
        kt_cache_close(c);
    }
    int writers = k;
    kt_cache *c = open_ok(path);
    assert_string_equal(kt_cache_warning(c), "");
    check_integrity(path);
    size_t n = count(c, "loop", NULL);
    assert_true(n >= 3);
    /* every decision present is whole: as many units as its winner_config says */
    char *json;
    ok(kt_cache_export(c, "loop", NULL, &json));
    json_t *doc = json_loads(json, 0, NULL);
    assert_non_null(doc);
    json_t *entries = json_object_get(doc, "entries");
    assert_int_equal(json_array_size(entries), n);
    size_t i;
    json_t *e;
    size_t per_writer[41] = {0};
    json_array_foreach(entries, i, e) {
        unsigned units;
        assert_int_equal(sscanf(json_string_value(json_object_get(json_object_get(e, "winner"), "config")), "n=%u", &units), 1);
        assert_int_equal(json_array_size(json_object_get(e, "units")), units);
        json_t *key = json_object_get(e, "key");
        long w = (long)json_integer_value(json_array_get(key, 0));
        assert_true(w >= 1 && w <= writers);
        per_writer[w]++;
        /* decision i of a writer has 1 + i % 40 units */
        assert_int_equal(units, 1 + json_integer_value(json_array_get(key, 1)) % 40);
    }
    for (int w = 1; w <= writers; w++) {
        assert_true(per_writer[w] >= 1);
        /* a writer's decisions are 0..m-1: none lost in the middle */
        for (size_t k = 0; k < per_writer[w]; k++) {
            kt__store_rec id = {.op = "loop", .set_hash = "s1", .device = "dev", .version = "0.1.0"}, got;
            int64_t key[2] = {w, (int64_t)k};
            id.key = key;
            id.key_len = 2;
            ok(kt__store_get(c, &id, &got));
            kt__store_rec_free(&got);
        }
    }
    json_decref(doc);
    kt_free(json);
    kt_cache_close(c);
}

/* ---- damage ----------------------------------------------------------------------------------- */

/* Fills a store with n decisions and closes it (the WAL folded into the file). */
static void fill_store(const char *path, int n) {
    kt_cache *c = open_ok(path);
    for (int i = 0; i < n; i++) {
        recbuf b;
        ok(kt__store_put(c, make_rec(&b, "fill", "set-with-a-longer-hash-0123456789abcdef", "device-fingerprint-of-some-length", "0.1.0", i, i * 3)));
    }
    kt_cache_close(c);
    assert_false(exists(in_dir("store.db-wal")));
}

/* Opens a damaged store at path and checks the warning, the file moved aside (holding exactly
 * `bad`), and a fresh store that works. */
static void expect_moved_aside(const char *path, const char *reason, const char *bad, size_t badlen) {
    kt_cache *c = open_ok(path);
    const char *aside = moved_aside("store.db");
    assert_non_null(aside);
    char expect[2048];
    snprintf(expect, sizeof expect, "'%s' was damaged (%s); moved it aside to '%s' and started a fresh store", path, reason, aside);
    assert_string_equal(kt_cache_warning(c), expect);
    assert_string_equal(kt_cache_path(c), path);
    size_t len;
    char *kept = read_file(aside, &len);
    assert_non_null(kept);
    assert_int_equal(len, badlen);
    assert_memory_equal(kept, bad, badlen);
    free(kept);
    assert_int_equal(count(c, NULL, NULL), 0);
    recbuf b;
    ok(kt__store_put(c, make_rec(&b, "after", "s", "d", "0.1.0", 1, 2)));
    kt__store_rec got;
    ok(kt__store_get(c, &b.r, &got));
    assert_rec_equal(&got, &b.r);
    kt__store_rec_free(&got);
    kt_cache_close(c);
    check_integrity(path);
    /* opened again: no new warning, the decision is there */
    c = open_ok(path);
    assert_string_equal(kt_cache_warning(c), "");
    assert_int_equal(count(c, NULL, NULL), 1);
    kt_cache_close(c);
}

static void test_garbage_file(void **state) {
    (void)state;
    const char *path = in_dir("store.db");
    char junk[10000];
    uint32_t x = 12345;
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (char)((x = x * 1103515245u + 12345u) >> 24);
    write_file(path, junk, sizeof junk);
    expect_moved_aside(path, "file is not a database", junk, sizeof junk);
}

/* Twelve processes open one damaged file at once: it is moved aside once, and every one of
 * them ends up writing into the same fresh store. */
static void test_damage_found_together(void **state) {
    (void)state;
    const char *path = in_dir("store.db");
    char junk[8192];
    memset(junk, 'j', sizeof junk);
    write_file(path, junk, sizeof junk);
    enum { N = 12 };
    pid_t pids[N];
    int fds[N];
    char ids[N][16];
    for (int i = 0; i < N; i++) {
        snprintf(ids[i], sizeof ids[i], "%d", i + 1);
        const char *argv[] = {KT_STORE_WORKER, "one", path, ids[i], NULL};
        pids[i] = spawn(argv, &fds[i]);
    }
    int moved = 0;
    for (int i = 0; i < N; i++) {
        char text[2048] = {0};
        size_t got = 0;
        ssize_t n;
        while (got + 1 < sizeof text && (n = read(fds[i], text + got, sizeof text - 1 - got)) > 0) got += (size_t)n;
        close(fds[i]);
        int status;
        assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) fail_msg("worker %d ended with status %#x", i + 1, status);
        /* each saw a healthy file, or the damage moved aside by itself or by another */
        moved += strstr(text, "moved it aside to") != NULL;
        assert_true(strcmp(text, "\n") == 0 || strstr(text, "was damaged (file is not a database)") != NULL);
    }
    assert_int_equal(moved, 1);
    const char *aside = moved_aside("store.db");
    assert_non_null(aside);
    size_t len;
    char *kept = read_file(aside, &len);
    assert_int_equal(len, sizeof junk);
    assert_memory_equal(kept, junk, len);
    free(kept);
    check_integrity(path);
    assert_int_equal(sql_int(path, "SELECT count(*) FROM decisions WHERE op = 'one'"), N);
    assert_int_equal(sql_int(path, "SELECT count(*) FROM units"), N * 3);
}

/* A file whose inode the finder of damage never saw is not moved aside: between one process's
 * stat and its open another may have moved the damaged file aside and started a fresh store in
 * its place, which must not be moved in turn (in test_damage_found_together, once under
 * AddressSanitizer, a worker still opening the old file then failed with an I/O error). Nor is
 * a file other than the one seen. */
static void test_unseen_file_never_moved(void **state) {
    (void)state;
    const char *path = in_dir("store.db");
    kt_cache *c = open_ok(path);
    struct stat zero = {0}, other;
    assert_int_equal(kt__recover_move_aside(c, path, &zero, "test"), 0);
    assert_null(moved_aside("store.db"));
    assert_int_equal(stat(dir, &other), 0);
    assert_int_equal(kt__recover_move_aside(c, path, &other, "test"), 0);
    assert_null(moved_aside("store.db"));
    assert_true(exists(path));
    assert_int_equal(count(c, NULL, NULL), 0); /* the store still works */
    kt_cache_close(c);
    check_integrity(path);
}

static void test_truncated_file(void **state) {
    (void)state;
    const char *path = in_dir("store.db");
    fill_store(path, 300);
    size_t len;
    char *whole = read_file(path, &len);
    assert_true(len >= 40 * 4096);
    write_file(path, whole, len / 2);
    expect_moved_aside(path, "database disk image is malformed", whole, len / 2);
    free(whole);
}

static void test_first_page_overwritten(void **state) {
    (void)state;
    const char *path = in_dir("store.db");
    fill_store(path, 50);
    size_t len;
    char *bytes = read_file(path, &len);
    memset(bytes, 0xAB, 4096);
    write_file(path, bytes, len);
    expect_moved_aside(path, "file is not a database", bytes, len);
    free(bytes);
}

/* Damage deep in the file, which opening does not read, found by a later call: the call moves
 * the file aside and runs again on a fresh store. */
static void test_damage_found_later(void **state) {
    (void)state;
    const char *path = in_dir("store.db");
    fill_store(path, 300);
    kt_cache *c = open_ok(path);
    assert_string_equal(kt_cache_warning(c), "");
    size_t len;
    char *bytes = read_file(path, &len);
    for (size_t i = 8 * 4096; i < len; i++) bytes[i] = (char)(i * 7 + 3);
    write_file(path, bytes, len);
    char *json = NULL;
    ok(kt_cache_export(c, NULL, NULL, &json));
    assert_non_null(strstr(json, "\"entries\": []"));
    kt_free(json);
    const char *aside = moved_aside("store.db");
    assert_non_null(aside);
    char expect[2048];
    snprintf(expect, sizeof expect, "'%s' was damaged (database disk image is malformed); moved it aside to '%s' and started a fresh store", path, aside);
    assert_string_equal(kt_cache_warning(c), expect);
    recbuf b;
    ok(kt__store_put(c, make_rec(&b, "after", "s", "d", "0.1.0", 1, 2)));
    assert_int_equal(count(c, NULL, NULL), 1);
    kt_cache_close(c);
    free(bytes);
    check_integrity(path);
}

/* ---- read-only -------------------------------------------------------------------------------- */

/* The read-only checks, returning 0 or the number of the check that failed (so that they can
 * run in a child process that dropped root). */
static int readonly_checks(const char *file, const char *in_ro_dir) {
    kt_cache *c;
    if (kt_cache_open(file, &c) != KT_OK) return 1;
    if (strcmp(kt_cache_path(c), ":memory:") != 0) return 2;
    char expect[1024];
    snprintf(expect, sizeof expect,
             "'%s' cannot be written (the file is not readable and writable: Permission denied); using an in-memory store: "
             "decisions will not outlive this process",
             file);
    if (strcmp(kt_cache_warning(c), expect) != 0) return 3;
    size_t n = 1;
    if (kt_cache_count(c, NULL, NULL, &n) != KT_OK || n != 0) return 4;
    recbuf b;
    kt__store_rec got;
    if (kt__store_put(c, make_rec(&b, "ro", "s", "d", "0.1.0", 1, 2)) != KT_OK) return 5;
    if (kt__store_get(c, &b.r, &got) != KT_OK || strcmp(got.winner_candidate, "tiled") != 0 || got.nunits != 3) return 6;
    kt__store_rec_free(&got);
    kt_cache_close(c);
    /* a file that would have to be created in a read-only directory */
    if (kt_cache_open(in_ro_dir, &c) != KT_OK) return 7;
    if (strcmp(kt_cache_path(c), ":memory:") != 0) return 8;
    char ro_dir[512];
    snprintf(ro_dir, sizeof ro_dir, "%.*s", (int)(strrchr(in_ro_dir, '/') - in_ro_dir), in_ro_dir);
    snprintf(expect, sizeof expect,
             "'%s' cannot be written (its directory '%s' is not writable, and SQLite keeps the -wal and -shm files there: "
             "Permission denied); using an in-memory store: decisions will not outlive this process",
             in_ro_dir, ro_dir);
    if (strcmp(kt_cache_warning(c), expect) != 0) return 9;
    if (kt__store_put(c, &b.r) != KT_OK) return 10;
    kt_cache_close(c);
    return 0;
}

static void test_read_only(void **state) {
    (void)state;
    char ro[512], file[512], newfile[512];
    snprintf(ro, sizeof ro, "%s/ro", dir);
    snprintf(file, sizeof file, "%s/ro/cache.db", dir);
    snprintf(newfile, sizeof newfile, "%s/ro/new.db", dir);
    assert_int_equal(mkdir(ro, 0700), 0);
    kt_cache *c = open_ok(file);
    recbuf b;
    ok(kt__store_put(c, make_rec(&b, "kept", "s", "d", "0.1.0", 1, 2)));
    kt_cache_close(c);
    size_t len;
    char *before = read_file(file, &len);
    assert_int_equal(chmod(file, 0444), 0);
    assert_int_equal(chmod(ro, 0555), 0);
    int failed_check;
    if (geteuid() != 0) {
        failed_check = readonly_checks(file, newfile);
    } else {
        /* root ignores permissions: the checks run in a child that became nobody */
        assert_int_equal(chmod(dir, 0755), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            if (setgid(65534) != 0 || setuid(65534) != 0) _exit(100);
            _exit(readonly_checks(file, newfile));
        }
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        failed_check = WEXITSTATUS(status);
        if (failed_check == 100) {
            free(before);
            skip(); /* cannot drop root here: permissions cannot be tested */
        }
    }
    if (failed_check != 0) fail_msg("read-only check %d failed", failed_check);
    char *after = read_file(file, NULL);
    assert_memory_equal(before, after, len);
    assert_false(exists(newfile));
    free(before);
    free(after);
}

/* ---- versions --------------------------------------------------------------------------------- */

static void test_migrate_v1(void **state) {
    (void)state;
    const char *path = in_dir("v1.db");
    char *v1 = read_file(KT_DATA "/store/v1.sql", NULL);
    assert_non_null(v1);
    sql(path, v1);
    free(v1);
    assert_int_equal(sql_int(path, "PRAGMA user_version"), 1);
    kt_cache *c = open_ok(path);
    assert_string_equal(kt_cache_warning(c), "");
    assert_int_equal(sql_int(path, "PRAGMA user_version"), 6);
    assert_int_equal(sql_int(path, "SELECT count(*) FROM deferred"), 0);
    assert_int_equal(count(c, NULL, NULL), 3);
    assert_int_equal(count(c, "matmul", NULL), 2);
    kt__store_rec id = {.op = "axpy", .set_hash = "04d1e7c2aa90b3f1", .device = "cpu:x86_64:avx2:8t", .version = "0.1.0"}, got;
    int64_t key[2] = {1048576, -1};
    id.key = key;
    id.key_len = 2;
    ok(kt__store_get(c, &id, &got));
    assert_string_equal(got.winner_candidate, "unrolled");
    assert_null(got.winner_config);
    assert_true(got.time_ns == 95112.25);
    assert_true(got.confidence == -1);
    assert_true(got.requested_confidence == -1);
    assert_int_equal(got.created, 1763800200);
    assert_int_equal(got.nunits, 0);
    kt__store_rec_free(&got);
    id = (kt__store_rec){.op = "matmul", .set_hash = "9f2c4e1a7b3d5f60", .device = "cpu:x86_64:avx2:8t", .version = "0.1.0"};
    int64_t key2[3] = {1024, 1024, 1024};
    id.key = key2;
    id.key_len = 3;
    ok(kt__store_get(c, &id, &got));
    assert_string_equal(got.winner_config, "TM=32,TN=8");
    assert_true(got.time_ns == 1466004.0);
    kt__store_rec_free(&got);
    /* unknown confidence is exported as null */
    char *json;
    ok(kt_cache_export(c, "axpy", NULL, &json));
    assert_non_null(strstr(json, "\"confidence\": null"));
    assert_non_null(strstr(json, "\"units\": []"));
    kt_free(json);
    /* the migrated store takes new decisions with units */
    recbuf b;
    ok(kt__store_put(c, make_rec(&b, "matmul", "9f2c4e1a7b3d5f60", "cpu:x86_64:avx2:8t", "0.1.0", 512, 512)));
    assert_int_equal(count(c, NULL, NULL), 4);
    kt_cache_close(c);
    check_integrity(path);
    c = open_ok(path); /* once more: already version 5 */
    assert_int_equal(count(c, NULL, NULL), 4);
    kt_cache_close(c);
}

/* A file of schema version 2 (tests/data/store/v2.sql: decisions with confidence and units,
 * without requested confidence or finalists) is migrated in place: every decision and unit is
 * kept, none asked for a confidence (so none is unsettled), no unit is a finalist; the
 * migrated store then takes and returns both. */
static void test_migrate_v2(void **state) {
    (void)state;
    const char *path = in_dir("v2.db");
    char *v2 = read_file(KT_DATA "/store/v2.sql", NULL);
    assert_non_null(v2);
    sql(path, v2);
    free(v2);
    assert_int_equal(sql_int(path, "PRAGMA user_version"), 2);
    assert_int_equal(sql_int(path, "SELECT count(*) FROM units"), 3);
    kt_cache *c = open_ok(path);
    assert_string_equal(kt_cache_warning(c), "");
    assert_int_equal(sql_int(path, "PRAGMA user_version"), 6);
    assert_int_equal(sql_int(path, "SELECT count(*) FROM deferred"), 0);
    assert_int_equal(count(c, NULL, NULL), 2);
    kt__store_rec id = {.op = "matmul", .set_hash = "9f2c4e1a7b3d5f60", .device = "cpu:x86_64:avx2:8t", .version = "0.1.0"}, got;
    int64_t key[3] = {512, 512, 512};
    id.key = key;
    id.key_len = 3;
    ok(kt__store_get(c, &id, &got));
    assert_string_equal(got.winner_candidate, "tiled");
    assert_string_equal(got.winner_config, "TM=16,TN=8");
    assert_true(got.time_ns == 183250.5);
    assert_true(got.confidence == 0.7);
    assert_true(got.requested_confidence == -1);
    assert_false(kt__store_unsettled(&got)); /* 0.7, but nothing is known to have asked for more */
    assert_int_equal(got.created, 1763800000);
    assert_int_equal(got.nunits, 3);
    kt__store_unit want[3] = {
        {"tiled", "TM=16,TN=8", "e3a1", KT_OUTCOME_MEASURED, 183250.5, 182000.0, 184500.0, 12, 1, NULL, false},
        {"tiled", "TM=32,TN=8", "77c0", KT_OUTCOME_MEASURED, 201500.0, 199800.0, 203100.0, 9, 1, NULL, false},
        {"naive", NULL, "51fe", KT_OUTCOME_INVALID, -1, -1, -1, 0, 1, "output 'c' element 17: expected 3.5, got 3.25", false}};
    for (int i = 0; i < 3; i++) assert_unit_equal(&got.units[i], &want[i]);
    kt__store_rec_free(&got);
    /* unit rows are still found by their hash */
    kt__store_unit u;
    id.set_hash = "another-set";
    ok(kt__store_get_unit(c, &id, "77c0", false, &u));
    assert_unit_equal(&u, &want[1]);
    kt__store_unit_free(&u);
    /* the migrated store takes a decision that asked for a confidence and fell short */
    recbuf b;
    kt__store_rec *r = make_rec(&b, "matmul", "9f2c4e1a7b3d5f60", "cpu:x86_64:avx2:8t", "0.1.0", 64, 64);
    r->requested_confidence = 0.99;
    ok(kt__store_put(c, r));
    ok(kt__store_get(c, r, &got));
    assert_rec_equal(&got, r);
    assert_true(kt__store_unsettled(&got));
    kt__store_rec_free(&got);
    kt_cache_close(c);
    check_integrity(path);
    c = open_ok(path); /* once more: already version 5 */
    assert_int_equal(count(c, NULL, NULL), 3);
    kt_cache_close(c);
}

/* A file of schema version 4 (tests/data/store/v4.sql: no `progress` table) is migrated in
 * place, keeping its decision, units and deferred key; the new table takes a tuning's units as
 * they come (found by unit hash under any candidate set, the newest first), and recording the
 * decision of that identity replaces them. */
/* A file made from tests/data/store/v<from>.sql, checked to be of that version, opened (which
 * migrates it, without a warning) and checked to be of the current one; its path into *path. */
static kt_cache *migrated(int from, const char **path) {
    char name[32], fixture[256];
    snprintf(name, sizeof name, "v%d.db", from);
    snprintf(fixture, sizeof fixture, "%s/store/v%d.sql", KT_DATA, from);
    *path = in_dir(name);
    char *text = read_file(fixture, NULL);
    assert_non_null(text);
    sql(*path, text);
    free(text);
    assert_int_equal(sql_int(*path, "PRAGMA user_version"), from);
    kt_cache *c = open_ok(*path);
    assert_string_equal(kt_cache_warning(c), "");
    assert_int_equal(sql_int(*path, "PRAGMA user_version"), 6);
    return c;
}

static void test_migrate_v4(void **state) {
    (void)state;
    const char *path;
    kt_cache *c = migrated(4, &path);
    assert_int_equal(count(c, NULL, NULL), 1);
    assert_int_equal(sql_int(path, "SELECT count(*) FROM deferred"), 1);
    assert_int_equal(sql_int(path, "SELECT count(*) FROM progress"), 0);
    /* a tuning of another key records two units as it goes */
    int64_t key[1] = {96};
    kt__store_rec id = {.op = "matmul", .set_hash = "9f2c4e1a7b3d5f60", .device = "cpu:x86_64:avx2:8t", .version = "0.1.0",
                        .key = key, .key_len = 1};
    kt__store_unit units[2] = {{.candidate = "tiled", .config = "TM=8,TN=8", .unit_hash = "aa01", .outcome = KT_OUTCOME_MEASURED,
                                .time_ns = 5000, .ci_low_ns = -1, .ci_high_ns = -1, .runs = 2},
                               {.candidate = "tiled", .config = "TM=64,TN=8", .unit_hash = "aa02", .outcome = KT_OUTCOME_BUILD_FAILED,
                                .time_ns = -1, .ci_low_ns = -1, .ci_high_ns = -1, .message = "too many registers"}};
    ok(kt__store_progress_put(c, &id, units, 2));
    ok(kt__store_progress_put(c, &id, units, 1)); /* again: replaced, not doubled */
    assert_int_equal(sql_int(path, "SELECT count(*) FROM progress"), 2);
    assert_int_equal(count(c, NULL, NULL), 1); /* not a decision */
    kt__store_unit got;
    kt__store_rec other = id;
    other.set_hash = "0000000000000000"; /* found under any candidate set */
    ok(kt__store_get_unit(c, &other, "aa01", false, &got));
    assert_true(got.time_ns == 5000 && got.outcome == KT_OUTCOME_MEASURED && got.runs == 2);
    kt__store_unit_free(&got);
    ok(kt__store_get_unit(c, &other, "aa02", false, &got));
    assert_int_equal(got.outcome, KT_OUTCOME_BUILD_FAILED);
    assert_string_equal(got.message, "too many registers");
    kt__store_unit_free(&got);
    assert_int_equal(kt__store_get_unit(c, &id, "aa01", true, &got), KT_ERR_NOT_FOUND); /* its own set skipped */
    kt__store_unit bad = units[0];
    bad.time_ns = NAN;
    assert_int_equal(kt__store_progress_put(c, &id, &bad, 1), KT_ERR_INVALID_ARGUMENT);
    /* the decision of that identity replaces its progress */
    kt__store_rec rec = id;
    rec.winner_candidate = "tiled";
    rec.winner_config = "TM=8,TN=8";
    rec.time_ns = 5000;
    rec.confidence = 0.99;
    rec.requested_confidence = 0.99;
    rec.created = 1763800200;
    rec.units = units;
    rec.nunits = 2;
    ok(kt__store_put(c, &rec));
    assert_int_equal(sql_int(path, "SELECT count(*) FROM progress"), 0);
    assert_int_equal(count(c, NULL, NULL), 2);
    /* and removing an op's decisions removes its tunings' progress too */
    ok(kt__store_progress_put(c, &other, units, 1));
    size_t removed = 0;
    ok(kt_cache_remove(c, "matmul", NULL, &removed));
    assert_int_equal(removed, 2);
    assert_int_equal(sql_int(path, "SELECT count(*) FROM progress"), 0);
    kt_cache_close(c);
}

/* A file of schema version 3 (tests/data/store/v3.sql: no `deferred` table) is migrated in
 * place: the decision and its units are kept as they were, and the new table takes deferred
 * keys (put once per identity, listed, removed). */
static void test_migrate_v3(void **state) {
    (void)state;
    const char *path = in_dir("v3.db");
    char *v3 = read_file(KT_DATA "/store/v3.sql", NULL);
    assert_non_null(v3);
    sql(path, v3);
    free(v3);
    assert_int_equal(sql_int(path, "PRAGMA user_version"), 3);
    kt_cache *c = open_ok(path);
    assert_string_equal(kt_cache_warning(c), "");
    assert_int_equal(sql_int(path, "PRAGMA user_version"), 6);
    assert_int_equal(count(c, NULL, NULL), 1);
    kt__store_rec id = {.op = "matmul", .set_hash = "9f2c4e1a7b3d5f60", .device = "cpu:x86_64:avx2:8t", .version = "0.1.0"}, got;
    int64_t key[3] = {512, 512, 512};
    id.key = key;
    id.key_len = 3;
    ok(kt__store_get(c, &id, &got));
    assert_string_equal(got.winner_config, "TM=16,TN=8");
    assert_true(got.confidence == 0.97);
    assert_true(got.requested_confidence == 0.99);
    assert_int_equal(got.nunits, 2);
    assert_true(got.units[0].finalist && got.units[1].finalist);
    kt__store_rec_free(&got);
    /* deferred keys: once per identity, listed in order, removed one by one */
    int64_t k2[2] = {64, -3};
    kt__store_rec d = id;
    d.key = k2;
    d.key_len = 2;
    ok(kt__store_defer_put(c, &d, "buffer:256,i64:64"));
    ok(kt__store_defer_put(c, &d, "buffer:512,i64:64")); /* the same identity: kept as it was */
    ok(kt__store_defer_put(c, &id, "buffer:1024,i64:512"));
    kt__store_deferred *list = NULL;
    size_t n = 0;
    ok(kt__store_defer_list(c, &id, &list, &n));
    assert_int_equal(n, 2);
    int first = list[0].id.key_len == 2 ? 0 : 1; /* same second: ordered by key text */
    assert_string_equal(list[first].args, "buffer:256,i64:64");
    assert_int_equal(list[first].id.key[1], -3);
    assert_string_equal(list[1 - first].args, "buffer:1024,i64:512");
    kt__store_deferred_free(list, n);
    kt__store_rec other = id;
    other.set_hash = "another-set";
    ok(kt__store_defer_list(c, &other, &list, &n));
    assert_int_equal(n, 0);
    kt__store_deferred_free(list, n);
    ok(kt__store_defer_remove(c, &d));
    ok(kt__store_defer_remove(c, &d)); /* absent: nothing */
    ok(kt__store_defer_list(c, &id, &list, &n));
    assert_int_equal(n, 1);
    assert_string_equal(list[0].args, "buffer:1024,i64:512");
    kt__store_deferred_free(list, n);
    /* a row another program damaged is reported naming its column */
    kt_cache_close(c);
    sql(path, "UPDATE deferred SET key = 'x'");
    c = open_ok(path);
    expect_status(KT_ERR_INVALID_ARGUMENT, kt__store_defer_list(c, &id, &list, &n));
    assert_non_null(strstr(kt_last_error(), "stored deferred key is invalid: column deferred.key is 'x'"));
    assert_null(list);
    kt_cache_close(c);
    check_integrity(path);
}

static void expect_refused_untouched(const char *path, const char *message) {
    size_t len;
    char *before = read_file(path, &len);
    kt_cache *c = (kt_cache *)1;
    expect_status(KT_ERR_STATE, kt_cache_open(path, &c));
    assert_null(c);
    assert_string_equal(kt_last_error(), message);
    size_t len2;
    char *after = read_file(path, &len2);
    assert_int_equal(len, len2);
    assert_memory_equal(before, after, len);
    free(before);
    free(after);
    char side[600];
    snprintf(side, sizeof side, "%s-wal", path);
    assert_false(exists(side));
    assert_null(moved_aside("newer.db"));
}

/* A file of schema version 5 (tests/data/store/v5.sql) is migrated in place: its decision, units,
 * deferred key and progress are kept, and the decision's device architecture, vendor and key
 * kinds are unknown (''), which kt__store_list reports as such; a decision written now keeps
 * them, and one with key kinds that are not s or c is refused. */
static void test_migrate_v5(void **state) {
    (void)state;
    const char *path;
    kt_cache *c = migrated(5, &path);
    assert_int_equal(count(c, NULL, NULL), 1);
    assert_int_equal(sql_int(path, "SELECT count(*) FROM units"), 2);
    assert_int_equal(sql_int(path, "SELECT count(*) FROM deferred"), 1);
    assert_int_equal(sql_int(path, "SELECT count(*) FROM progress"), 1);
    kt__store_rec *recs = NULL;
    size_t n = 0;
    ok(kt__store_list(c, "matmul", "0.1.0", &recs, &n));
    assert_int_equal(n, 1);
    assert_string_equal(recs[0].arch, "");
    assert_string_equal(recs[0].vendor, "");
    assert_string_equal(recs[0].key_kinds, "");
    assert_string_equal(recs[0].artifact, "");
    assert_string_equal(recs[0].compiler, "");
    assert_int_equal(recs[0].nunits, 0); /* listed without units */
    assert_string_equal(recs[0].winner_config, "TM=16,TN=8");
    kt__store_rec_free(&recs[0]);
    free(recs);
    int64_t key[4] = {1024, 64, 16, 3};
    kt__store_rec rec = {.op = "matmul", .set_hash = "9f2c4e1a7b3d5f60", .device = "cpu:x86_64:avx2:8t", .version = "0.1.0",
                         .key = key, .key_len = 4, .winner_candidate = "tiled", .winner_config = "TM=8,TN=8", .time_ns = 4000,
                         .confidence = 0.99, .requested_confidence = 0.99, .created = 1763800300, .arch = "x86_64 haswell",
                         .vendor = "GenuineIntel", .key_kinds = "ssc", .artifact = "0123abcd.so", .compiler = "cc 12"};
    ok(kt__store_put(c, &rec));
    ok(kt__store_list(c, "matmul", "0.1.0", &recs, &n));
    assert_int_equal(n, 2);
    assert_string_equal(recs[1].arch, "x86_64 haswell");
    assert_string_equal(recs[1].vendor, "GenuineIntel");
    assert_string_equal(recs[1].key_kinds, "ssc");
    assert_string_equal(recs[1].artifact, "0123abcd.so");
    assert_string_equal(recs[1].compiler, "cc 12");
    assert_int_equal(recs[1].key_len, 4);
    for (size_t i = 0; i < n; i++) kt__store_rec_free(&recs[i]);
    free(recs);
    ok(kt__store_list(c, "other", "0.1.0", &recs, &n));
    assert_int_equal(n, 0);
    free(recs);
    rec.artifact = "../escape.so";
    assert_int_equal(kt__store_put(c, &rec), KT_ERR_INVALID_ARGUMENT);
    rec.artifact = NULL;
    rec.key_kinds = "sx";
    assert_int_equal(kt__store_put(c, &rec), KT_ERR_INVALID_ARGUMENT);
    assert_string_equal(kt_last_error(), "kt__store_put(op 'matmul'): key_kinds is 'sx'; expected one letter s or c per key component, at most 4");
    rec.key_kinds = "sssss"; /* more kinds than key words */
    assert_int_equal(kt__store_put(c, &rec), KT_ERR_INVALID_ARGUMENT);
    kt_cache_close(c);
}

static void test_newer_version_refused(void **state) {
    (void)state;
    const char *path = in_dir("newer.db");
    sql(path, "CREATE TABLE decisions (id INTEGER PRIMARY KEY, what TEXT); CREATE TABLE things (x);"
              "INSERT INTO decisions (what) VALUES ('from the future'); PRAGMA user_version = 7;");
    char expect[1024];
    snprintf(expect, sizeof expect,
             "kt_cache_open('%s'): the store has schema version 7; this library (%s) knows versions up to 6: a newer kerntune "
             "wrote it; it was left untouched",
             path, kt_version_string());
    expect_refused_untouched(path, expect);
    /* someone else's database */
    const char *other = in_dir("other.db");
    sql(other, "CREATE TABLE notes (text TEXT); INSERT INTO notes VALUES ('mine');");
    snprintf(expect, sizeof expect, "kt_cache_open('%s'): not a kerntune cache: the file has 1 tables but no schema version; it was left untouched", other);
    expect_refused_untouched(other, expect);
}

/* ---- rows with wrong types -------------------------------------------------------------------- */

static void expect_invalid(kt_cache *c, const char *path, const char *update, const char *column_message) {
    recbuf b;
    kt__store_rec *r = make_rec(&b, "mm", "s", "d", "0.1.0", 8, 9);
    ok(kt__store_put(c, r));
    sql(path, update);
    kt__store_rec got;
    expect_status(KT_ERR_INVALID_ARGUMENT, kt__store_get(c, r, &got));
    assert_null(got.op);
    char expect[512];
    snprintf(expect, sizeof expect, "kt__store_get(op 'mm'): stored decision is invalid: column %s", column_message);
    assert_string_equal(kt_last_error(), expect);
}

static void test_wrong_types(void **state) {
    (void)state;
    const char *path = in_dir("types.db");
    kt_cache *c = open_ok(path);
    expect_invalid(c, path, "UPDATE units SET time_ns = 'abc' WHERE idx = 1", "units.time_ns (unit 1) is text 'abc'; expected a number");
    expect_invalid(c, path, "UPDATE units SET outcome = 9 WHERE idx = 0", "units.outcome (unit 0) is 9; expected 0 to 7");
    /* get_unit refuses the row as well */
    recbuf b;
    kt__store_unit u;
    expect_status(KT_ERR_INVALID_ARGUMENT, kt__store_get_unit(c, make_rec(&b, "mm", "other", "d", "0.1.0", 8, 9), "a1b2c3", false, &u));
    assert_string_equal(kt_last_error(), "kt__store_get_unit(op 'mm'): stored decision is invalid: column units.outcome (unit 0) is 9; expected 0 to 7");
    assert_null(u.candidate);
    /* and export names it */
    char *json;
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_cache_export(c, NULL, NULL, &json));
    assert_null(json);
    assert_non_null(strstr(kt_last_error(), "units.outcome (unit 0) is 9; expected 0 to 7 (decision "));
    expect_invalid(c, path, "UPDATE units SET outcome = 2.5 WHERE idx = 2", "units.outcome (unit 2) is a real; expected an integer");
    expect_invalid(c, path, "UPDATE units SET runs = -1 WHERE idx = 2", "units.runs (unit 2) is -1; expected 0 to 4294967295");
    expect_invalid(c, path, "UPDATE units SET candidate = x'00ff' WHERE idx = 1", "units.candidate (unit 1) is a blob; expected text");
    expect_invalid(c, path, "UPDATE units SET unit_hash = '' WHERE idx = 0", "units.unit_hash (unit 0) is empty; expected a name");
    expect_invalid(c, path, "UPDATE decisions SET winner_candidate = x'00'", "decisions.winner_candidate is a blob; expected text");
    expect_invalid(c, path, "UPDATE decisions SET confidence = 'high'", "decisions.confidence is text 'high'; expected a number");
    expect_invalid(c, path, "UPDATE decisions SET confidence = 3", "decisions.confidence is 3; expected 0 to 1, or negative for unknown");
    expect_invalid(c, path, "UPDATE decisions SET created = 'yesterday'", "decisions.created is text 'yesterday'; expected an integer");
    expect_invalid(c, path, "UPDATE decisions SET requested_confidence = 'most'",
                   "decisions.requested_confidence is text 'most'; expected a number");
    expect_invalid(c, path, "UPDATE decisions SET requested_confidence = 99",
                   "decisions.requested_confidence is 99; expected 0 to 1, or negative for none");
    expect_invalid(c, path, "UPDATE units SET finalist = 2 WHERE idx = 1", "units.finalist (unit 1) is 2; expected 0 to 1");
    /* the outcome read back once the row is right again */
    recbuf ok_rec;
    ok(kt__store_put(c, make_rec(&ok_rec, "mm", "s", "d", "0.1.0", 8, 9)));
    kt__store_rec got;
    ok(kt__store_get(c, &ok_rec.r, &got));
    assert_rec_equal(&got, &ok_rec.r);
    kt__store_rec_free(&got);
    kt_cache_close(c);
}

/* ---- wisdom ----------------------------------------------------------------------------------- */

/* Five decisions: two ops, two devices, natives and variants, one of unknown confidence. */
static void put_five(kt_cache *c) {
    recbuf b;
    ok(kt__store_put(c, make_rec(&b, "matmul", "s1", "cpu:a", "0.1.0", 64, 64)));
    ok(kt__store_put(c, make_rec(&b, "matmul", "s1", "cpu:a", "0.1.0", 128, 64)));
    ok(kt__store_put(c, make_rec(&b, "matmul", "s1", "gpu:b", "0.1.0", 64, 64)));
    make_rec(&b, "axpy", "s9", "cpu:a", "0.1.0", 1 << 20, 0);
    b.r.winner_candidate = "naive";
    b.r.winner_config = NULL;
    b.r.confidence = -1;
    b.r.time_ns = 0.1;
    b.u[1] = (kt__store_unit){"naive", NULL, "d4e5f6", KT_OUTCOME_MEASURED, 0.1, 0.05, 0.25, 4, 1, NULL, true};
    ok(kt__store_put(c, &b.r));
    make_rec(&b, "axpy", "s9", "gpu:b", "0.1.0", 1 << 20, 0);
    b.r.nunits = 0;
    ok(kt__store_put(c, &b.r));
}

static void test_wisdom_roundtrip(void **state) {
    (void)state;
    kt_cache *c = open_ok(in_dir("w.db"));
    put_five(c);
    char *before, *after;
    ok(kt_cache_export(c, NULL, NULL, &before));
    /* the document as specified */
    json_error_t err;
    json_t *doc = json_loads(before, JSON_REJECT_DUPLICATES, &err);
    assert_non_null(doc);
    assert_int_equal(json_integer_value(json_object_get(doc, "kerntune_wisdom")), 1);
    assert_string_equal(json_string_value(json_object_get(doc, "library_version")), kt_version_string());
    json_t *entries = json_object_get(doc, "entries");
    assert_int_equal(json_array_size(entries), 5);
    json_t *e0 = json_array_get(entries, 0); /* sorted: axpy on cpu:a first */
    json_t *expect0 = json_loads(
        "{\"op\": \"axpy\", \"candidate_set\": \"s9\", \"device\": \"cpu:a\", \"library_version\": \"0.1.0\", \"key\": [1048576, 0],"
        " \"winner\": {\"candidate\": \"naive\", \"config\": null}, \"time_ns\": 0.1, \"confidence\": null,"
        " \"requested_confidence\": null, \"created\": 1763800000,"
        " \"units\": [{\"candidate\": \"tiled\", \"config\": \"TM=16,TN=8\", \"unit_hash\": \"a1b2c3\", \"outcome\": \"measured\","
        "   \"time_ns\": 1234.5, \"ci_ns\": [1200.25, 1260.75], \"runs\": 25, \"warmups\": 2, \"message\": null, \"finalist\": true},"
        "  {\"candidate\": \"naive\", \"config\": null, \"unit_hash\": \"d4e5f6\", \"outcome\": \"measured\", \"time_ns\": 0.1,"
        "   \"ci_ns\": [0.05, 0.25], \"runs\": 4, \"warmups\": 1, \"message\": null, \"finalist\": true},"
        "  {\"candidate\": \"tiled\", \"config\": \"TM=32,TN=8\", \"unit_hash\": \"0789ab\", \"outcome\": \"build_failed\","
        "   \"time_ns\": -1.0, \"ci_ns\": null, \"runs\": 0, \"warmups\": 0, \"message\": \"ptxas: too much shared data\","
        "   \"finalist\": false}]}",
        0, &err);
    assert_non_null(expect0);
    if (!json_equal(e0, expect0)) fail_msg("entry 0 differs: %s", before);
    json_decref(expect0);
    assert_string_equal(json_string_value(json_object_get(json_array_get(entries, 2), "device")), "cpu:a");
    assert_string_equal(json_string_value(json_object_get(json_array_get(entries, 4), "device")), "gpu:b");
    json_decref(doc);

    size_t removed, added, replaced, kept;
    ok(kt_cache_remove(c, NULL, NULL, &removed));
    assert_int_equal(removed, 5);
    assert_int_equal(count(c, NULL, NULL), 0);
    assert_int_equal(sql_int(in_dir("w.db"), "SELECT count(*) FROM units"), 0);
    ok(kt_cache_import(c, before, 0, &added, &replaced, &kept));
    assert_int_equal(added, 5);
    assert_int_equal(replaced, 0);
    assert_int_equal(kept, 0);
    ok(kt_cache_export(c, NULL, NULL, &after));
    assert_string_equal(after, before);
    kt_free(after);

    /* into another store: the same decisions, record by record */
    kt_cache *c2 = open_ok(in_dir("w2.db"));
    ok(kt_cache_import(c2, before, 0, NULL, NULL, NULL));
    recbuf b;
    kt__store_rec got;
    ok(kt__store_get(c2, make_rec(&b, "matmul", "s1", "gpu:b", "0.1.0", 64, 64), &got));
    assert_rec_equal(&got, &b.r);
    kt__store_rec_free(&got);
    kt_cache_close(c2);
    kt_free(before);
    kt_cache_close(c);
}

/* A small valid document with the entries given (JSON text, comma-separated). */
static char *doc_of(const char *version, const char *entries) {
    static char buf[8192];
    snprintf(buf, sizeof buf, "{\"kerntune_wisdom\": 1, \"library_version\": \"%s\", \"entries\": [%s]}", version, entries);
    return buf;
}

/* An entry as a document written before schema 3 has it (no requested_confidence, no
 * finalists): such documents stay readable. */
#define ENTRY(op, key, winner, units)                                                                            \
    "{\"op\": \"" op "\", \"candidate_set\": \"s\", \"device\": \"d\", \"library_version\": \"0.1.0\", \"key\": " key \
    ", \"winner\": {\"candidate\": \"" winner "\", \"config\": null}, \"time_ns\": 1, \"confidence\": 0.5,"           \
    " \"created\": 5, \"units\": [" units "]}"
#define UNIT(cand, time)                                                                                                   \
    "{\"candidate\": \"" cand "\", \"config\": null, \"unit_hash\": \"h\", \"outcome\": \"measured\", \"time_ns\": " time \
    ", \"ci_ns\": null, \"runs\": 3, \"warmups\": 1, \"message\": null}"

static void expect_import_error(kt_cache *c, const char *json, const char *message) {
    size_t added = 9, replaced = 9, kept = 9, before = count(c, NULL, NULL);
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_cache_import(c, json, 1, &added, &replaced, &kept));
    assert_string_equal(kt_last_error(), message);
    assert_int_equal(added + replaced + kept, 0);
    assert_int_equal(count(c, NULL, NULL), before);
}

static void test_wisdom_refused(void **state) {
    (void)state;
    kt_cache *c = open_ok(in_dir("w.db"));
    ok(kt_cache_import(c, doc_of("0.1.0", ENTRY("keep", "[1]", "w", UNIT("w", "1"))), 0, NULL, NULL, NULL));
    assert_int_equal(count(c, NULL, NULL), 1);
    /* an invalid entry in the middle: nothing of the document is applied */
    expect_import_error(c, doc_of("0.1.0", ENTRY("a", "[1]", "w", UNIT("w", "1")) "," ENTRY("b", "[2]", "w", UNIT("w", "1") "," UNIT("c", "\"fast\"")) "," ENTRY("c", "[3]", "w", "")),
                        "kt_cache_import: entries[1].units[1].time_ns: expected a number, got a string");
    expect_import_error(c, doc_of("0.1.0", ENTRY("a", "[1]", "w", "") "," ENTRY("b", "[2]", "w", "") "," ENTRY("c", "\"1,2\"", "w", "")),
                        "kt_cache_import: entries[2].key: expected an array of integers, got a string");
    expect_import_error(c, doc_of("0.1.0", ENTRY("a", "[1, 2.5]", "w", "")), "kt_cache_import: entries[0].key: expected an array of integers, got an array");
    expect_import_error(c, doc_of("0.1.0", ENTRY("a", "[1]", "", "")), "kt_cache_import: entries[0].winner.candidate: expected a non-empty string, got an empty string");
    expect_import_error(c, doc_of("1.0.0", ENTRY("a", "[1]", "w", "")),
                        "kt_cache_import: library_version: '1.0.0' is kerntune 1's; this library (0.1.0) reads wisdom of major version 0 only");
    expect_import_error(c, doc_of("0.1", ""), "kt_cache_import: library_version: expected a version \"MAJOR.MINOR.PATCH\", got '0.1'");
    expect_import_error(c, doc_of("0.1.0", "{\"op\": \"a\"}"), "kt_cache_import: entries[0].candidate_set: missing; expected a non-empty string");
    expect_import_error(c, doc_of("0.1.0", ENTRY("a", "[1]", "w", "") "," ENTRY("b", "[1]", "w", "") "," ENTRY("a", "[1]", "v", "")),
                        "kt_cache_import: entries[2]: the same decision (op, candidate_set, device, library_version, key) as entries[0]");
    expect_import_error(c, "{\"kerntune_wisdom\": 2, \"library_version\": \"0.1.0\", \"entries\": []}",
                        "kt_cache_import: kerntune_wisdom: expected 1, the wisdom format this library reads, got an integer");
    expect_import_error(c, "{\"entries\": []}", "kt_cache_import: kerntune_wisdom: missing: not a kerntune wisdom document");
    expect_import_error(c, "[1, 2]", "kt_cache_import: expected a JSON object (a kerntune wisdom document), got an array");
    expect_import_error(c, "{\"kerntune_wisdom\": 1,\n \"entries\": [}", "kt_cache_import: invalid JSON at line 2, column 14: unexpected token near '}'");
    char unit_bad[8192];
    snprintf(unit_bad, sizeof unit_bad, "%s", doc_of("0.1.0", ENTRY("a", "[1]", "w",
        "{\"candidate\": \"c\", \"config\": null, \"unit_hash\": \"h\", \"outcome\": \"great\", \"time_ns\": 1, \"ci_ns\": null, \"runs\": 3, \"warmups\": 1, \"message\": null}")));
    expect_import_error(c, unit_bad,
                        "kt_cache_import: entries[0].units[0].outcome: expected one of not_run, measured, rejected, failed, invalid, build_failed, timeout, crashed, got a string 'great'");
    snprintf(unit_bad, sizeof unit_bad, "%s", doc_of("0.1.0", ENTRY("a", "[1]", "w",
        "{\"candidate\": \"c\", \"config\": null, \"unit_hash\": \"h\", \"outcome\": \"failed\", \"time_ns\": -1, \"ci_ns\": [1], \"runs\": -3, \"warmups\": 1, \"message\": null}")));
    expect_import_error(c, unit_bad, "kt_cache_import: entries[0].units[0].ci_ns: expected [low, high] (two non-negative numbers) or null, got an array");
    /* the store was never touched */
    assert_int_equal(count(c, NULL, NULL), 1);
    assert_int_equal(count(c, "keep", NULL), 1);
    kt_cache_close(c);
}

/* One lie in an otherwise valid entry (the first of tests/data/store/wisdom.json): where it
 * goes (the entry, its winner, or unit N), the member, its new JSON value (NULL: removed), and
 * what import must say. */
typedef struct lie {
    int unit;           /* -1: the entry; -2: its winner; N: units[N] */
    const char *member;
    const char *value;
    const char *message; /* after "kt_cache_import: entries[0]"; a trailing '*' matches a prefix */
} lie;

/* Writes a JSON string of n characters c into buf (n + 3 bytes). */
static void quoted(char *buf, char c, size_t n) {
    buf[0] = '"';
    memset(buf + 1, c, n);
    buf[n + 1] = '"';
    buf[n + 2] = 0;
}

/* Every lie that import can see without the op is refused, naming the entry, the field and
 * why, and nothing of the document is applied. */
static void test_wisdom_lies(void **state) {
    (void)state;
    kt_cache *c = open_ok(in_dir("lies.db"));
    json_error_t jerr;
    json_t *fixture = json_load_file(KT_DATA "/store/wisdom.json", 0, &jerr);
    assert_non_null(fixture);
    json_t *base = json_array_get(json_object_get(fixture, "entries"), 0);
    char long_name[128 + 3], long_device[1024 + 3], long_hash[65 + 3]; /* JSON strings one character too long */
    quoted(long_name, 'n', 128);
    quoted(long_device, 'd', 1024);
    quoted(long_hash, 'a', 65);
    const lie lies[] = {
        /* configuration text */
        {-2, "config", "\"TM16\"", ".winner.config: 'TM16' is not configuration text: expected NAME=VALUE at offset 0"},
        {-2, "config", "\"TM=16,TN=8 \\t\"", ".winner.config: holds a control character (0x09) at offset 11"},
        {-2, "config", "\"TM=1,TM=2\"", ".winner.config: 'TM=1,TM=2' names parameter 'TM' twice"},
        {1, "config", "\"=32\"", ".units[1].config: '=32' is not configuration text: expected NAME=VALUE at offset 0"},
        {1, "config", "7", ".units[1].config: expected a string or null, got an integer"},
        /* names and sizes */
        {-1, "op", long_name, ".op: has 128 characters; at most 127"},
        {-1, "op", "\"mat\\nmul\"", ".op: holds a control character (0x0a) at offset 3"},
        {-2, "candidate", "\"\\u001b[31mtiled\"", ".winner.candidate: holds a control character (0x1b) at offset 0"},
        {-1, "device", long_device, ".device: has 1024 characters; at most 1023"},
        {-1, "candidate_set", long_hash, ".candidate_set: has 65 characters; at most 64"},
        {0, "unit_hash", long_hash, ".units[0].unit_hash: has 65 characters; at most 64"},
        {3, "message", "\"\\u001b[2Jgone\"", ".units[3].message: holds a control character (0x1b) at offset 0"},
        /* the winner against the units */
        {-2, "candidate", "\"ghost\"", ".winner: candidate 'ghost', configuration TM=16,TN=8 is none of the entry's 4 units"},
        {-2, "config", "\"TM=64,TN=16\"", ".winner: its unit (units[2]) has outcome build_failed: a winner was measured"},
        {-1, "time_ns", "1.5", ".time_ns: is 1.5, but the winner's unit (units[0]) has time_ns 183250.5"},
        {-1, "time_ns", "-5", ".time_ns: is -5; expected the winner's time, at least 0"},
        /* times, intervals, runs */
        {1, "time_ns", "-3", ".units[1].time_ns: is -3, but the unit was measured: expected a time of at least 0"},
        {2, "time_ns", "5", ".units[2].time_ns: is 5, but the unit's outcome is build_failed: a unit that was not measured has no time (-1)"},
        {0, "ci_ns", "[1, 2]", ".units[0].ci_ns: [1, 2] does not contain the unit's time_ns 183250.5"},
        {2, "ci_ns", "[1, 2]", ".units[2].ci_ns: is an interval, but the unit's outcome is build_failed: expected null"},
        {1, "runs", "-1", ".units[1].runs: expected an integer from 0 to 4294967295, got an integer"},
        {1, "warmups", "4294967296", ".units[1].warmups: expected an integer from 0 to 4294967295, got an integer"},
        /* confidence */
        {-1, "confidence", "1.5", ".confidence: is 1.5; expected a number from 0 to 1, or null"},
        {-1, "confidence", "-0.5", ".confidence: is -0.5; expected a number from 0 to 1, or null"},
        {-1, "requested_confidence", "0.3", ".requested_confidence: is 0.3; expected a number from 0.5 to 1, or null"},
        {-1, "requested_confidence", "\"high\"", ".requested_confidence: expected a number from 0.5 to 1, or null, got a string"},
        /* outcomes, finalists, duplicates */
        {3, "outcome", "\"slow\"", ".units[3].outcome: expected one of not_run, measured, rejected, failed, invalid, build_failed, timeout, crashed, got a string 'slow'"},
        {2, "finalist", "true", ".units[2].finalist: is true, but the unit's outcome is build_failed: only a measured unit can be a finalist"},
        {1, "finalist", "\"yes\"", ".units[1].finalist: expected true or false, got a string"},
        {4, NULL, NULL, ".units[4]: the same unit (candidate 'tiled', configuration TM=32,TN=8) as units[1]"},
        /* when */
        {-1, "created", "-1", ".created: is -1; expected a unix time from 0 to a day from now (*"},
        {-1, "created", "99999999999", ".created: is 99999999999; expected a unix time from 0 to a day from now (*"},
        {-1, "created", "1.5", ".created: expected an integer (unix time), got a number"},
    };
    for (size_t i = 0; i < sizeof lies / sizeof lies[0]; i++) {
        const lie *l = &lies[i];
        json_t *e = json_deep_copy(base), *units = json_object_get(e, "units");
        json_t *target = l->unit == -1 ? e : l->unit == -2 ? json_object_get(e, "winner") : json_array_get(units, (size_t)l->unit);
        if (l->member == NULL) { /* a copy of units[1] appended */
            json_array_append_new(units, json_deep_copy(json_array_get(units, 1)));
        } else {
            json_t *v = json_loads(l->value, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
            if (v == NULL) fail_msg("lie %zu: bad test value %s: %s", i, l->value, jerr.text);
            assert_non_null(target);
            json_object_set_new(target, l->member, v);
        }
        json_t *doc = json_pack("{s:i, s:s, s:[o]}", "kerntune_wisdom", 1, "library_version", "0.1.0", "entries", e);
        char *text = json_dumps(doc, 0);
        json_decref(doc);
        char want[1024];
        snprintf(want, sizeof want, "kt_cache_import: entries[0]%s", l->message);
        size_t added = 9;
        if (kt_cache_import(c, text, 1, &added, NULL, NULL) != KT_ERR_INVALID_ARGUMENT) fail_msg("lie %zu was imported", i);
        size_t n = strlen(want);
        if (want[n - 1] == '*' ? strncmp(kt_last_error(), want, n - 1) != 0 : strcmp(kt_last_error(), want) != 0)
            fail_msg("lie %zu:\n  got  %s\n  want %s", i, kt_last_error(), want);
        assert_int_equal(added, 0);
        free(text);
    }
    assert_int_equal(count(c, NULL, NULL), 0);
    /* units beyond the limit are refused before they are read */
    json_t *e = json_deep_copy(base), *many = json_array();
    for (int i = 0; i < (1 << 20) + 1; i++) json_array_append_new(many, json_integer(0));
    json_object_set_new(e, "units", many);
    json_t *doc = json_pack("{s:i, s:s, s:[o]}", "kerntune_wisdom", 1, "library_version", "0.1.0", "entries", e);
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_cache_import(c, text, 1, NULL, NULL, NULL));
    assert_string_equal(kt_last_error(), "kt_cache_import: entries[0].units: has 1048577 units; at most 1048576");
    free(text);
    /* and the entry as it is imports */
    doc = json_pack("{s:i, s:s, s:[O]}", "kerntune_wisdom", 1, "library_version", "0.1.0", "entries", base);
    text = json_dumps(doc, 0);
    json_decref(doc);
    ok(kt_cache_import(c, text, 1, NULL, NULL, NULL));
    free(text);
    assert_int_equal(count(c, NULL, NULL), 1);
    json_decref(fixture);
    kt_cache_close(c);
}

static void test_wisdom_existing_wins(void **state) {
    (void)state;
    kt_cache *c = open_ok(in_dir("w.db"));
    ok(kt_cache_import(c, doc_of("0.1.0", ENTRY("a", "[1]", "old", "") "," ENTRY("b", "[1]", "old", "")), 0, NULL, NULL, NULL));
    char doc[8192];
    snprintf(doc, sizeof doc, "%s", doc_of("0.1.0", ENTRY("a", "[1]", "new", UNIT("new", "1")) "," ENTRY("c", "[1]", "new", "")));
    size_t added, replaced, kept;
    ok(kt_cache_import(c, doc, 0, &added, &replaced, &kept));
    assert_int_equal(added, 1);
    assert_int_equal(replaced, 0);
    assert_int_equal(kept, 1);
    kt__store_rec id = {.op = "a", .set_hash = "s", .device = "d", .version = "0.1.0"}, got;
    int64_t key[1] = {1};
    id.key = key;
    id.key_len = 1;
    ok(kt__store_get(c, &id, &got));
    assert_string_equal(got.winner_candidate, "old");
    assert_int_equal(got.nunits, 0);
    kt__store_rec_free(&got);
    ok(kt_cache_import(c, doc, 1, &added, &replaced, &kept));
    assert_int_equal(added, 0);
    assert_int_equal(replaced, 2);
    assert_int_equal(kept, 0);
    ok(kt__store_get(c, &id, &got));
    assert_string_equal(got.winner_candidate, "new");
    assert_int_equal(got.nunits, 1);
    kt__store_rec_free(&got);
    assert_int_equal(count(c, NULL, NULL), 3);
    ok(kt_cache_import(c, doc, 0, NULL, NULL, NULL)); /* counts may be NULL */
    kt_cache_close(c);
}

static size_t entries_of(const char *json, const char *field, const char *want) {
    json_t *doc = json_loads(json, 0, NULL);
    assert_non_null(doc);
    json_t *entries = json_object_get(doc, "entries");
    size_t i;
    json_t *e;
    json_array_foreach(entries, i, e) {
        if (field) assert_string_equal(json_string_value(json_object_get(e, field)), want);
    }
    size_t n = json_array_size(entries);
    json_decref(doc);
    return n;
}

static void test_filters(void **state) {
    (void)state;
    kt_cache *c = open_ok(in_dir("f.db"));
    put_five(c);
    char *json;
    ok(kt_cache_export(c, "matmul", NULL, &json));
    assert_int_equal(entries_of(json, "op", "matmul"), 3);
    kt_free(json);
    ok(kt_cache_export(c, NULL, "gpu:b", &json));
    assert_int_equal(entries_of(json, "device", "gpu:b"), 2);
    kt_free(json);
    ok(kt_cache_export(c, "axpy", "gpu:b", &json));
    assert_int_equal(entries_of(json, "op", "axpy"), 1);
    kt_free(json);
    ok(kt_cache_export(c, "nothing", NULL, &json));
    assert_int_equal(entries_of(json, NULL, NULL), 0);
    kt_free(json);
    assert_int_equal(count(c, "matmul", NULL), 3);
    assert_int_equal(count(c, NULL, "cpu:a"), 3);
    assert_int_equal(count(c, "matmul", "cpu:a"), 2);
    size_t removed;
    ok(kt_cache_remove(c, "matmul", "cpu:a", &removed));
    assert_int_equal(removed, 2);
    ok(kt_cache_remove(c, "matmul", "cpu:a", &removed));
    assert_int_equal(removed, 0);
    ok(kt_cache_remove(c, NULL, "gpu:b", NULL));
    assert_int_equal(count(c, NULL, NULL), 1);
    assert_int_equal(count(c, "axpy", "cpu:a"), 1);
    /* unit rows went with their decisions */
    assert_int_equal(sql_int(in_dir("f.db"), "SELECT count(*) FROM units"), 3);
    kt_cache_close(c);
}

/* ---- the default path ------------------------------------------------------------------------- */

static void test_default_path(void **state) {
    (void)state;
    char *saved[3];
    static const char *const vars[] = {"KERNTUNE_CACHE", "XDG_CACHE_HOME", "HOME"};
    for (int i = 0; i < 3; i++) saved[i] = getenv(vars[i]) ? strdup(getenv(vars[i])) : NULL;
    char buf[512];
    setenv("KERNTUNE_CACHE", "/some/where/c.db", 1);
    setenv("XDG_CACHE_HOME", "/xdg", 1);
    setenv("HOME", "/home/u", 1);
    ok(kt_cache_default_path(buf, sizeof buf));
    assert_string_equal(buf, "/some/where/c.db");
    setenv("KERNTUNE_CACHE", "", 1); /* empty: as unset */
    ok(kt_cache_default_path(buf, sizeof buf));
    assert_string_equal(buf, "/xdg/kerntune/cache.db");
    unsetenv("KERNTUNE_CACHE");
    ok(kt_cache_default_path(buf, sizeof buf));
    assert_string_equal(buf, "/xdg/kerntune/cache.db");
    setenv("XDG_CACHE_HOME", "relative/dir", 1); /* XDG: relative paths are ignored */
    ok(kt_cache_default_path(buf, sizeof buf));
    assert_string_equal(buf, "/home/u/.cache/kerntune/cache.db");
    unsetenv("XDG_CACHE_HOME");
    ok(kt_cache_default_path(buf, sizeof buf));
    assert_string_equal(buf, "/home/u/.cache/kerntune/cache.db");
    expect_status(KT_ERR_LIMIT, kt_cache_default_path(buf, 10));
    assert_string_equal(kt_last_error(), "kt_cache_default_path: the path needs 33 bytes, buf has 10");
    assert_string_equal(buf, "");
    unsetenv("HOME");
    expect_status(KT_ERR_NOT_FOUND, kt_cache_default_path(buf, sizeof buf));
    assert_string_equal(kt_last_error(), "kt_cache_default_path: none of KERNTUNE_CACHE, XDG_CACHE_HOME (absolute) and HOME is set");
    setenv("KERNTUNE_CACHE", "off", 1);
    expect_status(KT_ERR_NOT_FOUND, kt_cache_default_path(buf, sizeof buf));
    assert_string_equal(kt_last_error(), "kt_cache_default_path: KERNTUNE_CACHE=off: the persistent cache is switched off");
    kt_cache *c = (kt_cache *)1;
    expect_status(KT_ERR_NOT_FOUND, kt_cache_open(NULL, &c));
    assert_null(c);
    assert_string_equal(kt_last_error(), "kt_cache_open(NULL): KERNTUNE_CACHE=off: the persistent cache is switched off");
    expect_status(KT_ERR_NULL, kt_cache_default_path(NULL, 4));
    /* open(NULL) follows the variables, and creates the directories */
    setenv("KERNTUNE_CACHE", in_dir("env/deep/c.db"), 1);
    c = open_ok(NULL);
    assert_string_equal(kt_cache_path(c), in_dir("env/deep/c.db"));
    kt_cache_close(c);
    unsetenv("KERNTUNE_CACHE");
    setenv("XDG_CACHE_HOME", in_dir("xdg"), 1);
    c = open_ok(NULL);
    assert_string_equal(kt_cache_path(c), in_dir("xdg/kerntune/cache.db"));
    kt_cache_close(c);
    assert_true(exists(in_dir("xdg/kerntune/cache.db")));
    struct stat sb;
    assert_int_equal(stat(in_dir("xdg/kerntune"), &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0700);
    for (int i = 0; i < 3; i++) {
        if (saved[i]) setenv(vars[i], saved[i], 1);
        else unsetenv(vars[i]);
        free(saved[i]);
    }
}

/* ---- threads ---------------------------------------------------------------------------------- */

#define NTHREADS 4
#define PER_THREAD 40

static kt_cache *shared_cache;

static void *thread_main(void *arg) {
    long t = (long)(intptr_t)arg;
    for (int i = 0; i < PER_THREAD; i++) {
        recbuf b;
        kt__store_rec *r = make_rec(&b, "threads", "s", "d", "0.1.0", t, i);
        if (kt__store_put(shared_cache, r) != KT_OK) return (void *)1;
        kt__store_rec got;
        if (kt__store_get(shared_cache, r, &got) != KT_OK) return (void *)2;
        int bad = got.nunits != 3 || strcmp(got.units[2].message, "ptxas: too much shared data") != 0;
        kt__store_rec_free(&got);
        if (bad) return (void *)3;
        size_t n;
        if (kt_cache_count(shared_cache, "threads", NULL, &n) != KT_OK || n < (size_t)i + 1) return (void *)4;
        if (i % 10 == 0) {
            char *json;
            if (kt_cache_export(shared_cache, "threads", NULL, &json) != KT_OK) return (void *)5;
            kt_free(json);
        }
        if (kt_cache_warning(shared_cache)[0] != '\0') return (void *)6;
    }
    return NULL;
}

static void test_threads(void **state) {
    (void)state;
    shared_cache = open_ok(in_dir("t.db"));
    pthread_t th[NTHREADS];
    for (long t = 0; t < NTHREADS; t++) assert_int_equal(pthread_create(&th[t], NULL, thread_main, (void *)(intptr_t)t), 0);
    for (int t = 0; t < NTHREADS; t++) {
        void *r;
        assert_int_equal(pthread_join(th[t], &r), 0);
        if (r != NULL) fail_msg("thread %d failed at step %ld: %s", t, (long)(intptr_t)r, kt_last_error());
    }
    assert_int_equal(count(shared_cache, "threads", NULL), NTHREADS * PER_THREAD);
    kt_cache_close(shared_cache);
    check_integrity(in_dir("t.db"));
}

/* ---- every allocation failing ------------------------------------------------------------------ */

#ifdef OOM_INJECT
/* A fresh file opened (its directory made, the schema created, WAL set up), and an
 * in-memory store. */
static kt_status oom_open_body(void *arg) {
    const char *path = arg;
    static const char *const sides[] = {"", "-wal", "-shm"};
    for (size_t i = 0; i < 3; i++) {
        char p[600];
        snprintf(p, sizeof p, "%s%s", path, sides[i]);
        unlink(p);
    }
    kt_cache *c = NULL, *mem = NULL;
    char warning[256] = "";
    kt_status st = kt_cache_open(":memory:", &mem);
    if (st == KT_OK) st = kt_cache_open(path, &c);
    if (st == KT_OK) snprintf(warning, sizeof warning, "%s", kt_cache_warning(c));
    atomic_store(&oom_left, -1); /* what follows checks; it fails nothing */
    if (st == KT_OK && warning[0] != '\0') fail_msg("opening warned: %s", warning);
    kt_cache_close(c);
    kt_cache_close(mem);
    return st;
}

/* On an open store: a decision written, read back whole and by unit, counted, exported,
 * imported over itself, removed. */
static kt_status oom_calls_body(void *arg) {
    kt_cache *c = arg;
    recbuf b;
    kt__store_rec *rec = make_rec(&b, "oom", "set1", "dev", "0.1.0", 512, 7);
    kt__store_rec got = {0};
    kt__store_unit unit = {0};
    char *json = NULL;
    size_t n = 0, added = 9, replaced = 0, kept = 9, removed = 0;
    kt_status st = kt__store_put(c, rec);
    if (st == KT_OK) st = kt__store_get(c, rec, &got);
    if (st == KT_OK) st = kt__store_get_unit(c, rec, "d4e5f6", false, &unit);
    if (st == KT_OK) st = kt_cache_count(c, "oom", NULL, &n);
    if (st == KT_OK) st = kt_cache_export(c, "oom", NULL, &json);
    atomic_store(&oom_spared, "libjansson");
    if (st == KT_OK) st = kt_cache_import(c, json, 1, &added, &replaced, &kept);
    atomic_store(&oom_spared, NULL);
    if (st == KT_OK) st = kt_cache_remove(c, "oom", NULL, &removed);
    atomic_store(&oom_left, -1); /* what follows checks; it fails nothing */
    if (st == KT_OK) {
        assert_rec_equal(&got, rec);
        assert_unit_equal(&unit, &b.u[1]);
        assert_int_equal(n, 1);
        assert_int_equal(added, 0);
        assert_int_equal(replaced, 1);
        assert_int_equal(kept, 0);
        assert_int_equal(removed, 1);
        assert_string_equal(kt_cache_warning(c), "");
    }
    kt_free(json);
    kt__store_rec_free(&got);
    kt__store_unit_free(&unit);
    return st;
}

#endif /* OOM_INJECT */

/* Every allocation of the store's calls can fail, SQLite's and jansson's included (but its
 * parser's, see oom_spared): the call says so with KT_ERR_NO_MEMORY and "out of memory",
 * nothing else (SQLite running out came back as KT_ERR_SYSTEM, and a configuration text that
 * could not be checked as KT_ERR_INVALID_ARGUMENT), and a call that succeeds did its work
 * whole. */
static void test_allocation_failures(void **state) {
    (void)state;
#ifndef OOM_INJECT
    skip(); /* allocations are made to fail through the GNU C library's */
#else
    long runs = every_allocation_fails(oom_open_body, (void *)in_dir("fresh/oom.db"), "opening");
    fprintf(stderr, "opening: %ld allocations, each failed once\n", runs - 1);
    assert_true(runs > 50);
    kt_cache *c = open_ok(in_dir("oom.db"));
    runs = every_allocation_fails(oom_calls_body, c, "the store's calls");
    fprintf(stderr, "calls: %ld allocations, each failed once\n", runs - 1);
    assert_true(runs > 50);
    kt_cache_close(c);
    check_integrity(in_dir("oom.db"));
#endif
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_roundtrip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_memory_and_nulls, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_processes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_killed_mid_write, setup, teardown),
        cmocka_unit_test_setup_teardown(test_garbage_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_damage_found_together, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unseen_file_never_moved, setup, teardown),
        cmocka_unit_test_setup_teardown(test_truncated_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_first_page_overwritten, setup, teardown),
        cmocka_unit_test_setup_teardown(test_damage_found_later, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migrate_v1, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migrate_v2, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migrate_v3, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migrate_v4, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migrate_v5, setup, teardown),
        cmocka_unit_test_setup_teardown(test_newer_version_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wrong_types, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wisdom_roundtrip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wisdom_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wisdom_lies, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wisdom_existing_wins, setup, teardown),
        cmocka_unit_test_setup_teardown(test_filters, setup, teardown),
        cmocka_unit_test_setup_teardown(test_default_path, setup, teardown),
        cmocka_unit_test_setup_teardown(test_threads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_allocation_failures, setup_in_memory, teardown),
    };
    return kt_run_cases(argc, argv, tests, NULL, NULL);
}
