/*
 * test-store-versions.c - the persistent cache's schema versions: files of versions 1 to 5
 * (tests/data/store) migrated in place with every decision kept, and a newer version refused
 * with the file untouched.
 */
#define _GNU_SOURCE /* mkdtemp, nftw, dladdr */
#include "store-test.h"

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

/* A file whose tables are not what its schema version says (damaged, or written by something
 * else): the migration fails, or the probe after it, and the file is refused with its bytes as
 * they were, its journal mode included (found by fuzz-store: the migration used to be committed,
 * and WAL switched on, before the probe refused the file). */
static void expect_refused_as_it_was(const char *path, const char *says) {
    size_t len, len2;
    char *before = read_file(path, &len);
    kt_cache *c = (kt_cache *)1;
    expect_status(KT_ERR_STATE, kt_cache_open(path, &c));
    assert_null(c);
    if (strstr(kt_last_error(), says) == NULL || strstr(kt_last_error(), "; it was left untouched") == NULL)
        fail_msg("the refusal says: %s", kt_last_error());
    char *after = read_file(path, &len2);
    assert_int_equal(len, len2);
    assert_memory_equal(before, after, len); /* the journal mode (header bytes 18, 19) included */
    free(before);
    free(after);
    char side[600];
    snprintf(side, sizeof side, "%s-wal", path);
    assert_false(exists(side));
}

static void test_wrong_tables_refused_untouched(void **state) {
    (void)state;
    /* version 5's migration adds its columns, then the probe finds the rest missing: rolled back */
    const char *path = in_dir("v5-decisions-only.db");
    sql(path, "CREATE TABLE decisions (id INTEGER PRIMARY KEY, what TEXT); PRAGMA user_version = 5;");
    expect_refused_as_it_was(path, "not a kerntune cache of schema version 6: no such column: op");
    /* version 5's migration itself fails: the table it alters is not there */
    const char *none = in_dir("v5-no-tables.db");
    sql(none, "CREATE TABLE notes (x); PRAGMA user_version = 5;");
    expect_refused_as_it_was(none, "not a kerntune cache of the schema version it says: migrating it failed (");
    /* version 6 with a column missing: the probe alone, reading */
    const char *other = in_dir("v6-column-missing.db");
    sql(other, "CREATE TABLE decisions (id INTEGER PRIMARY KEY); CREATE TABLE units (x); CREATE TABLE deferred (x);"
               "CREATE TABLE progress (x); PRAGMA user_version = 6;");
    expect_refused_as_it_was(other, "not a kerntune cache of schema version 6: no such column");
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_migrate_v1, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migrate_v2, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migrate_v3, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migrate_v4, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migrate_v5, setup, teardown),
        cmocka_unit_test_setup_teardown(test_newer_version_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wrong_tables_refused_untouched, setup, teardown),
    };
    return kt_run_cases(argc, argv, tests, NULL, NULL);
}
