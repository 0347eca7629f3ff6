/*
 * store-test.h - what the tests of the persistent cache (test-store*.c) share: a fresh temporary
 * directory per case (setup, teardown), files read and written whole, the file a damaged store
 * was moved aside to, SQLite queried directly, and decisions built and compared field by field.
 * Its functions are not inline (unused ones are allowed: each program uses some).
 */
#ifndef KT_TEST_STORE_TEST_H
#define KT_TEST_STORE_TEST_H

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

/* ---- files ----------------------------------------------------------------------------------- */

static char dir[256];

__attribute__((unused)) static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)ftw;
    return flag == FTW_DP ? rmdir(path) : unlink(path);
}

__attribute__((unused)) static int chmod_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)ftw;
    if (flag == FTW_D || flag == FTW_DP) chmod(path, 0700);
    else if (S_ISREG(sb->st_mode)) chmod(path, 0600);
    return 0;
}

__attribute__((unused)) static int setup(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/kt-store-XXXXXX");
    if (mkdtemp(dir) == NULL) return -1;
    return 0;
}

/* The same in memory (tmpfs) where there is one: for tests that open thousands of files, whose
 * time on a shared disk is its other users' to decide. */
__attribute__((unused)) static int setup_in_memory(void **state) {
    snprintf(dir, sizeof dir, "/dev/shm/kt-store-XXXXXX");
    if (mkdtemp(dir) != NULL) return 0;
    return setup(state);
}

__attribute__((unused)) static int teardown(void **state) {
    (void)state;
    chmod(dir, 0700);
    nftw(dir, chmod_entry, 16, FTW_PHYS);
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

__attribute__((unused)) static const char *in_dir(const char *name) {
    static char buf[4][512];
    static int next;
    char *p = buf[next++ % 4];
    snprintf(p, 512, "%s/%s", dir, name);
    return p;
}

__attribute__((unused)) static char *read_file(const char *path, size_t *len) {
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

__attribute__((unused)) static void write_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

__attribute__((unused)) static bool exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* The one "<name>.corrupt-*" file of the test directory (not its -wal/-shm), or NULL. */
__attribute__((unused)) static const char *moved_aside(const char *name) {
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

__attribute__((unused)) static void sql(const char *path, const char *text) {
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 10000);
    char *err = NULL;
    int rc = sqlite3_exec(db, text, NULL, NULL, &err);
    if (rc != SQLITE_OK) fail_msg("%s: %s", text, err);
    sqlite3_close(db);
}

/* The first column of the first row of query, as text ("" when NULL or no row). */
__attribute__((unused)) static const char *sql_text(const char *path, const char *query) {
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

__attribute__((unused)) static long long sql_int(const char *path, const char *query) { return atoll(sql_text(path, query)); }

/* SQLite's own check of the file passes. */
__attribute__((unused)) static void check_integrity(const char *path) { assert_string_equal(sql_text(path, "PRAGMA integrity_check"), "ok"); }

/* ---- records ---------------------------------------------------------------------------------- */

typedef struct recbuf {
    kt__store_rec r;
    kt__store_unit u[8];
    int64_t key[4];
} recbuf;

/* A decision of op/set/device/version under key [k0, k1] with three units: a measured variant
 * (the winner, a finalist), a native that failed (no config, a message), a variant never
 * measured (negative times). Its race asked for no confidence (another policy). */
__attribute__((unused)) static kt__store_rec *make_rec(recbuf *b, const char *op, const char *set, const char *device, const char *version, int64_t k0, int64_t k1) {
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

__attribute__((unused)) static void assert_str_or_null(const char *a, const char *b) {
    if (a == NULL || b == NULL) assert_ptr_equal(a, b);
    else assert_string_equal(a, b);
}

__attribute__((unused)) static void assert_unit_equal(const kt__store_unit *a, const kt__store_unit *b) {
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

__attribute__((unused)) static void assert_rec_equal(const kt__store_rec *a, const kt__store_rec *b) {
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

__attribute__((unused)) static kt_cache *open_ok(const char *path) {
    kt_cache *c = NULL;
    ok(kt_cache_open(path, &c));
    assert_non_null(c);
    return c;
}

__attribute__((unused)) static size_t count(kt_cache *c, const char *op, const char *device) {
    size_t n = 99999;
    ok(kt_cache_count(c, op, device, &n));
    return n;
}

#endif
