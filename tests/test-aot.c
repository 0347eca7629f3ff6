/*
 * test-aot.c - decisions ahead of time (issue [13]): `kerntune aot` emits C that compiles under
 * -std=c11 -Wall -Wextra -Werror -pedantic, the same bytes twice; a program that loads it (here
 * a shared object of it, dlopen'ed) and registers its table dispatches the listed keys with
 * the store's decisions, measuring nothing and reading no cache, and answers keys nobody tuned
 * from the table alone; a table of another device or layout is ignored with a log line saying
 * why; an entry whose winner is not valid for the arguments is never launched.
 *
 * And keys nobody tuned, under effort CACHE_ONLY, with a real cache file: each
 * rule of kt_decision_source answers in a case built for it and says so (the nearest tuned key
 * on the device, the same key on another device of the architecture, then of the vendor, then
 * the default); a nearest winner that rejects the arguments (a size it does not divide, a
 * buffer not aligned as it requires) is passed over for the next; a
 * category component must match; nothing is measured and nothing recorded; decisions keep their
 * device's architecture, vendor and key kinds in the cache and its wisdom.
 *
 * The op: (out: i32 buffer, n: i64), keyed by n. Candidate "small" is far faster than the others
 * for n <= 256 (they do 20x its work and sleep 20 ms), "big" so for n >= 1024 and requires n to be a multiple of 1024 and its
 * buffer 64-byte aligned, "plain"
 * (the default) is never the fastest: a tuning picks by design, not by this machine's luck.
 */
#include "helpers.h"

#include <kerntune/aot.h>
#include <kerntune/cache.h>
#include <kerntune/decision.h>
#include <kerntune/device.h>
#include <kerntune/measure.h>
#include <kerntune/variants.h>

#include <jansson.h>
#include <stdbool.h>
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[64], db[128], db2[160];
_Alignas(64) static int32_t buf[64];
#define ARGS(n) ((kt_arg[]){kt_arg_buf(buf, sizeof buf), kt_arg_i64(n)})

enum { SMALL = 1, BIG = 2, PLAIN = 3 };
static atomic_int ncalls[4];

static int shaped(const kt_arg *args, size_t nargs, void *user) {
    (void)nargs;
    int id = (int)(intptr_t)user;
    int64_t n = args[1].i;
    atomic_fetch_add(&ncalls[id], 1);
    bool fast = (id == SMALL && n <= 256) || (id == BIG && n >= 1024);
    do_work(fast ? 1 : 20);
    if (!fast) { /* 20x the work alone is a few hundred microseconds: one preemption of a fast
                  * run on a loaded machine is longer (a CI run once picked "plain" for 64) */
        struct timespec ts = {0, 20 * 1000000L};
        while (nanosleep(&ts, &ts) != 0) {}
    }
    memcpy(args[0].ptr, &(int32_t){id}, sizeof(int32_t));
    return 0;
}

static int setup(void **state) {
    (void)state;
    if (temp_cache_dir(dir, sizeof dir, db, sizeof db, "fallback") != 0) return -1;
    snprintf(db2, sizeof db2, "%s/other.db", dir);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    return remove_tree(dir);
}

static kt_context *ctx_on(const char *path, kt_effort effort) {
    kt_context *ctx = NULL;
    ok(kt_context_create(&ctx));
    ok(kt_context_set_cache(ctx, path));
    ok(kt_context_set_effort(ctx, effort));
    return ctx;
}

static kt_op *shaped_op(kt_context *ctx, bool n_is_category) {
    kt_op *op = test_op(ctx, "shaped");
    if (n_is_category) ok(kt_op_key_scale(op, 0, KT_KEY_CATEGORY));
    ok(kt_op_add_native(op, "plain", shaped, (void *)(intptr_t)PLAIN));
    ok(kt_op_add_native(op, "small", shaped, (void *)(intptr_t)SMALL));
    ok(kt_op_add_native(op, "big", shaped, (void *)(intptr_t)BIG));
    ok(kt_op_require_multiple(op, "big", 1, 1024));
    ok(kt_op_require_align(op, "big", 0, 64));
    ok(kt_op_set_default(op, "plain"));
    return op;
}

static void reset_calls(void) {
    for (int i = 0; i < 4; i++) atomic_store(&ncalls[i], 0);
}

/* Tunes n = 64 (small wins) and n = 4096 (big wins) into path. */
static void tune_two(const char *path) {
    kt_context *ctx = ctx_on(path, KT_EFFORT_MEASURE);
    kt_op *op = shaped_op(ctx, false);
    ok(kt_op_call(op, ARGS(64), 2));
    assert_int_equal(buf[0], SMALL);
    ok(kt_op_call(op, ARGS(4096), 2));
    assert_int_equal(buf[0], BIG);
    kt_context_destroy(ctx);
}

/* Calls n under CACHE_ONLY and checks who answered, by which rule, from which key. */
static void expect(kt_op *op, int64_t n, int winner, kt_decision_source source, int64_t from) {
    buf[0] = 0;
    ok(kt_op_call(op, ARGS(n), 2));
    assert_int_equal(buf[0], winner);
    const kt_decision *d = NULL;
    ok(kt_op_decision(op, ARGS(n), 2, &d));
    if (kt_decision_source_of(d) != source)
        fail_msg("n = %lld: answered by '%s', expected '%s'", (long long)n, kt_decision_source_name(kt_decision_source_of(d)),
                 kt_decision_source_name(source));
    int64_t key[4] = {0};
    if (source != KT_SOURCE_NEAREST && source != KT_SOURCE_ARCH && source != KT_SOURCE_VENDOR) {
        assert_null(kt_decision_borrowed_device(d));
        assert_int_equal(kt_decision_borrowed_key(d, key, 4), 0);
    } else {
        assert_non_null(kt_decision_borrowed_device(d));
        assert_int_equal(kt_decision_borrowed_key(d, key, 4), 1);
        assert_int_equal(key[0], from);
    }
}

/* NEAREST: the closest tuned key in log2 answers, on this device; a winner that rejects the
 * arguments (big, for n not a multiple of 1024) is passed over for the next nearest; nothing
 * is measured, and the answers are not recorded. */
static void test_nearest_key(void **state) {
    (void)state;
    tune_two(db);
    reset_calls();
    kt_context *ctx = ctx_on(db, KT_EFFORT_CACHE_ONLY);
    kt_op *op = shaped_op(ctx, false);
    expect(op, 128, SMALL, KT_SOURCE_NEAREST, 64);   /* 1 from 64, 5 from 4096 */
    expect(op, 2048, BIG, KT_SOURCE_NEAREST, 4096);  /* 1 from 4096 */
    expect(op, 3000, SMALL, KT_SOURCE_NEAREST, 64);  /* 4096 is nearer, but big rejects 3000 */
    /* 2048 again, on a buffer big rejects (not 64-byte aligned): another key (its validity mask
     * differs), whose nearest valid winner is small's */
    kt_arg misaligned[2] = {kt_arg_buf(buf + 1, sizeof buf - sizeof buf[0]), kt_arg_i64(2048)};
    ok(kt_op_call(op, misaligned, 2));
    assert_int_equal(buf[1], SMALL);
    const kt_decision *dm = NULL;
    ok(kt_op_decision(op, misaligned, 2, &dm));
    assert_int_equal(kt_decision_source_of(dm), KT_SOURCE_NEAREST);
    expect(op, 64, SMALL, KT_SOURCE_CACHE, 0);       /* a tuned key is itself */
    const kt_decision *d = NULL;
    ok(kt_op_decision(op, ARGS(128), 2, &d));
    assert_string_equal(kt_decision_borrowed_device(d), kt_device_fingerprint(kt_context_device(ctx, 0)));
    assert_int_equal(kt_op_measured_runs(op), 0);
    assert_int_equal(kt_op_tune_count(op), 0);
    assert_int_equal(atomic_load(&ncalls[SMALL]), 4); /* the four calls it answered, nothing more */
    assert_int_equal(atomic_load(&ncalls[BIG]), 1);
    assert_int_equal(atomic_load(&ncalls[PLAIN]), 0);
    kt_context_destroy(ctx);
    kt_cache *c = NULL;
    size_t count = 0;
    ok(kt_cache_open(db, &c));
    ok(kt_cache_count(c, "shaped", NULL, &count));
    assert_int_equal(count, 2); /* only the two tuned keys */
    kt_cache_close(c);
    /* under MEASURE the same key is tuned, not answered */
    ctx = ctx_on(db, KT_EFFORT_MEASURE);
    op = shaped_op(ctx, false);
    ok(kt_op_call(op, ARGS(128), 2));
    ok(kt_op_decision(op, ARGS(128), 2, &d));
    assert_int_equal(kt_decision_source_of(d), KT_SOURCE_MEASURED);
    kt_context_destroy(ctx);
}

/* A category component answers only from an equal value: none here, so the default. */
static void test_category_must_match(void **state) {
    (void)state;
    tune_two(db);
    kt_context *ctx = ctx_on(db, KT_EFFORT_CACHE_ONLY);
    kt_op *op = shaped_op(ctx, true); /* n declared a category: the records of n as a size do not compare */
    expect(op, 128, PLAIN, KT_SOURCE_DEFAULT, 0);
    kt_context_destroy(ctx);
    /* tuned as categories, 64 answers 64 only */
    ctx = ctx_on(db, KT_EFFORT_MEASURE);
    op = shaped_op(ctx, true);
    ok(kt_op_call(op, ARGS(64), 2));
    kt_context_destroy(ctx);
    ctx = ctx_on(db, KT_EFFORT_CACHE_ONLY);
    op = shaped_op(ctx, true);
    expect(op, 64, SMALL, KT_SOURCE_CACHE, 0);
    expect(op, 65, PLAIN, KT_SOURCE_DEFAULT, 0);
    assert_int_equal(kt_op_measured_runs(op), 0);
    /* the scale is checked, and set only while the op is built */
    assert_int_equal(kt_op_key_scale(op, 0, KT_KEY_SIZE), KT_ERR_STATE);
    kt_op *other = test_op(ctx, "other");
    assert_int_equal(kt_op_key_scale(other, 1, KT_KEY_SIZE), KT_ERR_INVALID_ARGUMENT);
    assert_string_equal(kt_last_error(), "kt_op_key_scale(op 'other'): key component 1 does not exist (the op declares 1)");
    assert_int_equal(kt_op_key_scale(other, 0, (kt_key_scale)7), KT_ERR_INVALID_ARGUMENT);
    kt_context_destroy(ctx);
}

/* The cache's entries, as wisdom. */
static json_t *exported(const char *path) {
    kt_cache *c = NULL;
    ok(kt_cache_open(path, &c));
    char *text = NULL;
    ok(kt_cache_export(c, "shaped", NULL, &text));
    kt_cache_close(c);
    json_t *doc = json_loads(text, 0, NULL);
    kt_free(text);
    assert_non_null(doc);
    return doc;
}

/* The entry of key n in doc's entries. */
static json_t *entry_of(json_t *doc, int64_t n) {
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(doc, "entries"), i, e) {
        if (json_integer_value(json_array_get(json_object_get(e, "key"), 0)) == n) return e;
    }
    fail_msg("no entry for n = %lld", (long long)n);
    return NULL;
}

/* ARCH and VENDOR: decisions made on other devices, brought in as wisdom, answer this very key
 * when their device shares this one's architecture, else its vendor; another vendor's never. A
 * decision records its device's architecture, vendor and key kinds. */
static void test_other_devices(void **state) {
    (void)state;
    tune_two(db);
    json_t *doc = exported(db);
    kt_context *probe = ctx_on(db, KT_EFFORT_CACHE_ONLY);
    const kt_device *dev = kt_context_device(probe, 0);
    char arch[256], vendor[256];
    snprintf(arch, sizeof arch, "%s", kt_device_architecture(dev));
    snprintf(vendor, sizeof vendor, "%s", kt_device_vendor(dev));
    kt_context_destroy(probe);
    assert_true(arch[0] != '\0' && vendor[0] != '\0'); /* the host's backend classifies it */
    json_t *e64 = entry_of(doc, 64), *e4096 = entry_of(doc, 4096);
    assert_string_equal(json_string_value(json_object_get(e64, "arch")), arch);
    assert_string_equal(json_string_value(json_object_get(e64, "vendor")), vendor);
    assert_string_equal(json_string_value(json_object_get(e64, "key_kinds")), "s");
    /* 4096 decided on a twin (same architecture), 64 on a cousin (same vendor only), 256 on a
     * stranger (another vendor): none on this device */
    json_object_set_new(e4096, "device", json_string("cpu:twin"));
    json_object_set_new(e64, "device", json_string("cpu:cousin"));
    json_object_set_new(e64, "arch", json_string("another architecture"));
    json_t *e256 = json_deep_copy(e64);
    json_object_set_new(e256, "device", json_string("cpu:stranger"));
    json_object_set_new(e256, "vendor", json_string("another vendor"));
    json_array_set_new(json_object_get(e256, "key"), 0, json_integer(256));
    json_array_append_new(json_object_get(doc, "entries"), e256);
    char *text = json_dumps(doc, 0);
    json_decref(doc);
    kt_cache *c = NULL;
    size_t added = 0;
    ok(kt_cache_open(db2, &c));
    ok(kt_cache_import(c, text, 0, &added, NULL, NULL));
    free(text);
    assert_int_equal(added, 3);
    kt_cache_close(c);
    reset_calls();
    kt_context *ctx = ctx_on(db2, KT_EFFORT_CACHE_ONLY);
    kt_op *op = shaped_op(ctx, false);
    expect(op, 4096, BIG, KT_SOURCE_ARCH, 4096);
    expect(op, 64, SMALL, KT_SOURCE_VENDOR, 64);
    expect(op, 256, PLAIN, KT_SOURCE_DEFAULT, 0);  /* another vendor's decision is not taken */
    expect(op, 2048, PLAIN, KT_SOURCE_DEFAULT, 0); /* other devices answer their own keys only */
    const kt_decision *d = NULL;
    ok(kt_op_decision(op, ARGS(4096), 2, &d));
    assert_string_equal(kt_decision_borrowed_device(d), "cpu:twin");
    assert_int_equal(kt_op_measured_runs(op), 0);
    assert_string_equal(kt_decision_source_name(KT_SOURCE_ARCH), "same architecture");
    assert_string_equal(kt_decision_source_name(KT_SOURCE_VENDOR), "same vendor");
    assert_string_equal(kt_decision_source_name(KT_SOURCE_NEAREST), "nearest key");
    assert_null(kt_decision_source_name((kt_decision_source)0));
    assert_null(kt_decision_source_name((kt_decision_source)10));
    kt_context_destroy(ctx);
}

/* Runs `kerntune ARGS --cache path` and reads its standard output (and error, with err) into
 * buf; returns its exit status. */
static int cli(const char *args, const char *path, bool err, char *buf, size_t len) {
    char cmd[2400];
    snprintf(cmd, sizeof cmd, "'%s' %s --cache '%s'%s", KT_CLI, args, path, err ? " 2>&1" : " 2>/dev/null");
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(buf, 1, len - 1, p);
    buf[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* `kerntune cache explain OP KEY` says what the rules would try, in order, from the cache alone;
 * a tuned key is itself; usage errors say what is wrong. */
static void test_explain(void **state) {
    (void)state;
    tune_two(db);
    char out[16384];
    assert_int_equal(cli("cache explain shaped 2048 --json", db, false, out, sizeof out), 0);
    json_t *x = json_loads(out, 0, NULL);
    assert_non_null(x);
    json_t *cands = json_object_get(x, "candidates");
    assert_int_equal(json_array_size(cands), 2); /* both tuned keys, nearest first */
    json_t *c0 = json_array_get(cands, 0), *c1 = json_array_get(cands, 1);
    assert_string_equal(json_string_value(json_object_get(c0, "rule")), "nearest key");
    assert_int_equal(json_integer_value(json_array_get(json_object_get(c0, "key"), 0)), 4096);
    assert_true(json_real_value(json_object_get(c0, "distance")) == 1.0);
    assert_string_equal(json_string_value(json_object_get(json_object_get(c0, "winner"), "candidate")), "big");
    assert_int_equal(json_integer_value(json_array_get(json_object_get(c1, "key"), 0)), 64);
    assert_true(json_real_value(json_object_get(c1, "distance")) == 5.0);
    assert_true(json_is_null(json_object_get(x, "recorded")));
    json_decref(x);
    /* a tuned key */
    assert_int_equal(cli("cache explain shaped 64", db, false, out, sizeof out), 0);
    assert_non_null(strstr(out, "recorded: small (a tuned key: served as it is)"));
    assert_int_equal(cli("cache explain shaped 100", db, false, out, sizeof out), 0);
    assert_non_null(strstr(out, "answered by the rules, in this order"));
    assert_non_null(strstr(out, "nearest key"));
    /* usage */
    assert_int_equal(cli("cache explain shaped", db, true, out, sizeof out), 2);
    assert_non_null(strstr(out, "which KEY?"));
    assert_int_equal(cli("cache explain shaped 12x", db, true, out, sizeof out), 2);
    assert_non_null(strstr(out, "KEY '12x' is not integers joined by commas (at offset 0)"));
    assert_int_equal(cli("cache explain nothing 1", db, true, out, sizeof out), 1);
    assert_non_null(strstr(out, "the cache holds no decision of op 'nothing'"));
}

/* ---- decisions ahead of time ------------------------------------------------------------- */

static char logged[4096];

static void keep_log(kt_log_level level, const char *message, void *user) {
    (void)level, (void)user;
    size_t at = strlen(logged);
    snprintf(logged + at, sizeof logged - at, "%s\n", message);
}

/* Emits the cache's decisions into dir/sub/dec.{h,c}, compiles dec.c into a shared object with
 * the strictest flags, and returns its handle. */
static void *emit_and_load(const char *sub, char *c_path, size_t len) {
    char out[256], args[1024], cmd[2048];
    snprintf(out, sizeof out, "%s/%s", dir, sub);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", out);
    assert_int_equal(system(cmd), 0);
    snprintf(args, sizeof args, "aot --op shaped -o '%s/dec'", out);
    char text[4096];
    if (cli(args, db, true, text, sizeof text) != 0) fail_msg("kerntune %s: %s", args, text);
    assert_non_null(strstr(text, "2 decision(s) of 1 device(s) written to"));
    snprintf(c_path, len, "%s/dec.c", out);
    snprintf(cmd, sizeof cmd, "'%s' -std=c11 -Wall -Wextra -Werror -pedantic -fPIC -shared -I'%s' -o '%s/dec.so' '%s/dec.c' 2>&1", KT_CC,
             KT_INCLUDE, out, out);
    FILE *p = popen(cmd, "r");
    size_t n = fread(text, 1, sizeof text - 1, p);
    text[n] = '\0';
    if (pclose(p) != 0) fail_msg("%s\n%s", cmd, text);
    snprintf(cmd, sizeof cmd, "%s/dec.so", out);
    void *so = dlopen(cmd, RTLD_NOW | RTLD_LOCAL);
    if (so == NULL) fail_msg("dlopen: %s", dlerror());
    return so;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char buf[2][65536];
    static int which;
    char *b = buf[which++ % 2];
    size_t n = fread(b, 1, sizeof buf[0] - 1, f);
    b[n] = '\0';
    fclose(f);
    return b;
}

/* The emitted source is the same bytes twice, compiles with -pedantic, and its table, once
 * registered, serves the tuned keys with the store's winners: no measurement, no cache (off),
 * and a key nobody tuned answered from the table's own entries. */
static void test_aot_table(void **state) {
    (void)state;
    tune_two(db);
    char c1[512], c2[512];
    void *so = emit_and_load("one", c1, sizeof c1), *so2 = emit_and_load("two", c2, sizeof c2);
    assert_string_equal(slurp(c1), slurp(c2));
    dlclose(so2);
    kt_status (*reg)(kt_context *, size_t *) = (kt_status(*)(kt_context *, size_t *))dlsym(so, "kt_decisions_register");
    const kt_aot_entry *(*find)(const char *, const char *, const int64_t *, size_t) =
        (const kt_aot_entry *(*)(const char *, const char *, const int64_t *, size_t))dlsym(so, "kt_decisions_find");
    const size_t *count = dlsym(so, "kt_decisions_table_count");
    assert_true(reg && find && count && *count == 1);
    reset_calls();
    char never[256];
    snprintf(never, sizeof never, "%s/never.db", dir); /* a cache the listed keys never open */
    kt_context *ctx = ctx_on(never, KT_EFFORT_MEASURE);
    size_t used = 0;
    ok(reg(ctx, &used));
    assert_int_equal(used, 1);
    kt_op *op = shaped_op(ctx, false);
    expect(op, 64, SMALL, KT_SOURCE_TABLE, 0);
    expect(op, 4096, BIG, KT_SOURCE_TABLE, 0);
    assert_int_not_equal(access(never, F_OK), 0);
    assert_int_equal(kt_op_measured_runs(op), 0);
    assert_int_equal(kt_op_tune_count(op), 0);
    assert_int_equal(kt_context_table_hits(ctx), 2);
    assert_int_equal(atomic_load(&ncalls[SMALL]) + atomic_load(&ncalls[BIG]) + atomic_load(&ncalls[PLAIN]), 2); /* the two calls */
    /* the lookup function finds the same entries by their full key words */
    const char *fp = kt_device_fingerprint(kt_context_device(ctx, 0));
    int64_t key[2] = {64, 0}; /* the key of 64: its component, then the validity mask (big rejects 64) */
    const kt_aot_entry *e = find(fp, "shaped", key, 2);
    assert_non_null(e);
    assert_string_equal(e->candidate, "small");
    assert_null(find("cpu:elsewhere", "shaped", e->key, e->key_len));
    kt_context_destroy(ctx);
    /* cache-only, no cache: a key nobody tuned takes the nearest of the table's keys */
    ctx = ctx_on("off", KT_EFFORT_CACHE_ONLY);
    ok(reg(ctx, &used));
    op = shaped_op(ctx, false);
    expect(op, 128, SMALL, KT_SOURCE_NEAREST, 64);
    expect(op, 2048, BIG, KT_SOURCE_NEAREST, 4096);
    assert_int_equal(kt_op_measured_runs(op), 0);
    kt_context_destroy(ctx);
    dlclose(so);
}

/* A table made on another device, or of another layout or major version, is ignored, and the
 * log says why; a valid entry whose winner rejects the arguments is not launched. */
static void test_aot_refused(void **state) {
    (void)state;
    tune_two(db);
    json_t *doc = exported(db);
    json_t *e64 = entry_of(doc, 64);
    int64_t words[8];
    size_t nwords = json_array_size(json_object_get(e64, "key"));
    assert_true(nwords <= 8);
    for (size_t i = 0; i < nwords; i++) words[i] = json_integer_value(json_array_get(json_object_get(e64, "key"), i));
    kt_aot_entry entry = {"shaped", json_string_value(json_object_get(e64, "candidate_set")), words, nwords, "s", "big", NULL, 100.0, NULL, NULL, 0};
    kt_context *ctx = ctx_on("off", KT_EFFORT_MEASURE);
    ok(kt_context_set_log_fn(ctx, keep_log, NULL));
    ok(kt_context_set_log_level(ctx, KT_LOG_WARN));
    const char *fp = kt_device_fingerprint(kt_context_device(ctx, 0));
    kt_aot_table elsewhere = {KT_AOT_VERSION, kt_version_string(), "cpu:elsewhere", "", "", NULL, &entry, 1};
    kt_aot_table future = {KT_AOT_VERSION + 1, kt_version_string(), fp, "", "", NULL, &entry, 1};
    kt_aot_table major = {KT_AOT_VERSION, "99.0.0", fp, "", "", NULL, &entry, 1};
    int used = 7;
    logged[0] = '\0';
    ok(kt_context_add_decisions(ctx, &elsewhere, &used));
    assert_int_equal(used, 0);
    assert_non_null(strstr(logged, "a table of 1 decision(s) is ignored: it was made on device 'cpu:elsewhere', which is none of this context's devices"));
    ok(kt_context_add_decisions(ctx, &future, &used));
    assert_int_equal(used, 0);
    assert_non_null(strstr(logged, "its layout version is 2; this library reads 1"));
    ok(kt_context_add_decisions(ctx, &major, &used));
    assert_int_equal(used, 0);
    assert_non_null(strstr(logged, "its decisions were made by kerntune 99.0.0"));
    /* this device's table, whose entry for 64 names big, which requires multiples of 1024 */
    kt_aot_table here = {KT_AOT_VERSION, kt_version_string(), fp, "", "", NULL, &entry, 1};
    ok(kt_context_add_decisions(ctx, &here, &used));
    assert_int_equal(used, 1);
    assert_int_equal(kt_context_add_decisions(ctx, &here, &used), KT_ERR_DUPLICATE);
    reset_calls();
    kt_op *op = shaped_op(ctx, false);
    expect(op, 64, SMALL, KT_SOURCE_MEASURED, 0); /* measured: the entry is not valid for 64 */
    assert_non_null(strstr(logged, "op 'shaped': the table's decision for this key cannot be used: candidate 'big' rejects these arguments"));
    assert_int_equal(kt_context_table_hits(ctx), 0);
    assert_int_equal(kt_context_add_decisions(ctx, NULL, &used), KT_ERR_NULL);
    kt_context_destroy(ctx);
    json_decref(doc);
    /* --key keeps the keys whose components start with it; --json says what was written */
    char out[4096], args[1024];
    snprintf(args, sizeof args, "aot --op shaped --key 4096 --json -o '%s/only'", dir);
    if (cli(args, db, true, out, sizeof out) != 0) fail_msg("%s", out);
    json_t *j = json_loads(out, 0, NULL);
    assert_non_null(j);
    assert_int_equal(json_integer_value(json_object_get(j, "decisions")), 1);
    assert_int_equal(json_integer_value(json_object_get(j, "tables")), 1);
    json_decref(j);
    snprintf(args, sizeof args, "%s/only.c", dir);
    const char *src = slurp(args);
    assert_non_null(strstr(src, "4096LL"));
    assert_null(strstr(src, "{64LL"));
    snprintf(args, sizeof args, "aot --op nothing -o '%s/none'", dir);
    assert_int_equal(cli(args, db, false, out, sizeof out), 0);
    assert_non_null(strstr(out, "0 decision(s) of 0 device(s) written"));
    /* usage of the command */
    assert_int_equal(cli("aot", db, true, out, sizeof out), 2);
    assert_non_null(strstr(out, "where to? give -o PREFIX"));
    assert_int_equal(cli("aot -o x --name 9bad", db, true, out, sizeof out), 2);
    assert_non_null(strstr(out, "--name '9bad' is not a C identifier"));
}

/* --embed: the winner's compiled artifact travels in the table. A program with no compiler
 * for it and an empty artifact directory loads it and runs it: nothing is compiled, and the
 * artifact is written where a build would have put it. On the host, KERNTUNE_CC names a
 * compiler that fails (so without the table nothing builds); on OpenCL (PoCL) the program binary
 * is loaded instead of built from source. */
static size_t device_of(kt_context *ctx, const char *backend) {
    for (size_t i = 0; i < kt_context_device_count(ctx); i++)
        if (strcmp(kt_device_backend(kt_context_device(ctx, i)), backend) == 0) return i;
    fail_msg("no %s device: is pocl-opencl-icd installed (scripts/install-deps.sh)?", backend);
    return 0;
}

/* Calls fill for n = 16 on dev and returns the value written. */
static int32_t call_fill(kt_context *ctx, size_t dev, kt_op *op, kt_status *st) {
    bool host = strcmp(kt_device_backend(kt_context_device(ctx, dev)), "c") == 0;
    void *out = buf;
    if (!host) ok(kt_device_alloc(ctx, dev, 16 * sizeof(int32_t), &out));
    memset(buf, 0, sizeof buf);
    *st = kt_op_call(op, ((kt_arg[]){kt_arg_buf(out, 16 * sizeof(int32_t)), kt_arg_i64(16)}), 2);
    if (!host && *st == KT_OK) ok(kt_device_read(ctx, dev, buf, out, 16 * sizeof(int32_t)));
    if (!host) kt_device_free(ctx, dev, out);
    for (int i = 1; *st == KT_OK && i < 16; i++) assert_int_equal(buf[i], buf[0]);
    return buf[0];
}

static void embed_on(const char *backend) {
    char art[256], art2[256], args[2048], out[4096], cmd[2048];
    snprintf(art, sizeof art, "%s/art-%s", dir, backend);
    kt_context *ctx = ctx_on(db, KT_EFFORT_MEASURE);
    ok(kt_context_set_artifact_dir(ctx, art));
    size_t dev = device_of(ctx, backend);
    kt_op *op = fill_variants_op(ctx, dev);
    kt_status st;
    int32_t tuned = call_fill(ctx, dev, op, &st);
    ok(st);
    assert_true(tuned == 5 || tuned == 7);
    char fp[1024];
    snprintf(fp, sizeof fp, "%s", kt_device_fingerprint(kt_context_device(ctx, dev)));
    kt_context_destroy(ctx);
    snprintf(args, sizeof args, "aot --op fill --device '%s' --embed --artifacts '%s' -o '%s/emb-%s'", fp, art, dir, backend);
    if (cli(args, db, true, out, sizeof out) != 0) fail_msg("kerntune %s: %s", args, out);
    snprintf(cmd, sizeof cmd, "'%s' -std=c11 -Wall -Wextra -Werror -pedantic -fPIC -shared -I'%s' -o '%s/emb-%s.so' '%s/emb-%s.c' 2>&1", KT_CC,
             KT_INCLUDE, dir, backend, dir, backend);
    assert_int_equal(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s/emb-%s.so", dir, backend);
    void *so = dlopen(cmd, RTLD_NOW | RTLD_LOCAL);
    if (so == NULL) fail_msg("dlopen: %s", dlerror());
    kt_status (*reg)(kt_context *, size_t *) = (kt_status(*)(kt_context *, size_t *))dlsym(so, "kt_decisions_register");
    assert_non_null(reg);
    char *was = getenv("KERNTUNE_CC") ? strdup(getenv("KERNTUNE_CC")) : NULL;
    setenv("KERNTUNE_CC", "/bin/false", 1); /* the host has no compiler */
    snprintf(art2, sizeof art2, "%s/art-%s-2", dir, backend);
    ctx = ctx_on("off", KT_EFFORT_MEASURE);
    ok(kt_context_set_artifact_dir(ctx, art2));
    size_t used = 0;
    ok(reg(ctx, &used));
    assert_int_equal(used, 1);
    dev = device_of(ctx, backend);
    op = fill_variants_op(ctx, dev);
    assert_int_equal(call_fill(ctx, dev, op, &st), tuned);
    ok(st);
    const kt_decision *d = NULL;
    ok(kt_op_decision(op, ARGS(16), 2, &d));
    assert_int_equal(kt_decision_source_of(d), KT_SOURCE_TABLE);
    assert_int_equal(kt_context_compile_count(ctx), 0);
    assert_int_equal(kt_op_measured_runs(op), 0);
    kt_context_destroy(ctx);
    if (strcmp(backend, "c") == 0) { /* without the table the same program cannot build anything */
        ctx = ctx_on("off", KT_EFFORT_MEASURE);
        snprintf(art2, sizeof art2, "%s/art-c-3", dir);
        ok(kt_context_set_artifact_dir(ctx, art2));
        op = fill_variants_op(ctx, 0);
        call_fill(ctx, 0, op, &st);
        assert_int_not_equal(st, KT_OK);
        kt_context_destroy(ctx);
    }
    if (was) setenv("KERNTUNE_CC", was, 1);
    else unsetenv("KERNTUNE_CC");
    free(was);
    dlclose(so);
}

static void test_aot_embed(void **state) {
    (void)state;
    embed_on("c");
    embed_on("opencl");
    /* a decision whose artifact is not where --artifacts says is an error, and nothing is written */
    char args[1024], out[4096], path[512];
    snprintf(args, sizeof args, "aot --op fill --embed --artifacts '%s/nowhere' -o '%s/bad'", dir, dir);
    assert_int_equal(cli(args, db, true, out, sizeof out), 1);
    assert_non_null(strstr(out, "--embed: the artifact"));
    snprintf(path, sizeof path, "%s/bad.c", dir);
    assert_int_not_equal(access(path, F_OK), 0);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_nearest_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_category_must_match, setup, teardown),
        cmocka_unit_test_setup_teardown(test_other_devices, setup, teardown),
        cmocka_unit_test_setup_teardown(test_explain, setup, teardown),
        cmocka_unit_test_setup_teardown(test_aot_table, setup, teardown),
        cmocka_unit_test_setup_teardown(test_aot_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_aot_embed, setup, teardown),
    };
    return kt_run_cases(argc, argv, tests, NULL, NULL);
}
