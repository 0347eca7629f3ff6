/*
 * test-store-wisdom.c - wisdom: decisions exported and imported whole, malformed documents and
 * every kind of lie refused, an existing decision kept unless replaced, filters by op and device.
 */
#define _GNU_SOURCE /* mkdtemp, nftw, dladdr */
#include "store-test.h"

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

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_wisdom_roundtrip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wisdom_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wisdom_lies, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wisdom_existing_wins, setup, teardown),
        cmocka_unit_test_setup_teardown(test_filters, setup, teardown),
    };
    return kt_run_cases(argc, argv, tests, NULL, NULL);
}
