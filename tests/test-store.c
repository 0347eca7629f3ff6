/*
 * test-store.c - the persistent cache (src/store/): records in and out whole, read-only files,
 * rows with wrong types, the default path, one handle shared by threads, and every allocation
 * failing in turn (this program's malloc fails the one it is told to). Real files in a fresh
 * temporary directory per test, inspected with SQLite directly. (test-store-damage.c: many
 * writers, killed ones and damaged files; test-store-versions.c: older and newer schemas;
 * test-store-wisdom.c: wisdom export and import.)
 */
#define _GNU_SOURCE /* mkdtemp, nftw, dladdr */
#include "store-test.h"

#include "oom.h"

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
        cmocka_unit_test_setup_teardown(test_read_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wrong_types, setup, teardown),
        cmocka_unit_test_setup_teardown(test_default_path, setup, teardown),
        cmocka_unit_test_setup_teardown(test_threads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_allocation_failures, setup_in_memory, teardown),
    };
    return kt_run_cases(argc, argv, tests, NULL, NULL);
}
