/*
 * test-native.c - native candidates are known to the persistent cache by the build of the
 * object that holds their function, and by a version the caller may set: a shared object
 * rebuilt with a changed function misses the cache and is measured again, while the same
 * object loaded from another path (or another process) is served from it; the same holds for
 * an object linked without a build-id (known by a hash of its loaded code); a changed version
 * misses. The shared objects are compiled here, at test time, by the C compiler that built the
 * tests.
 */
#define _GNU_SOURCE /* mkdtemp */
#include "helpers.h"

#include <kerntune/cache.h>
#include <kerntune/decision.h>

#include <dlfcn.h>
#include <unistd.h>

#if !defined(KT_CC) || !defined(KT_INCLUDE)
#error "KT_CC must name the C compiler and KT_INCLUDE the public headers"
#endif

static char dir[64], db[128];
static int32_t buf[4];
#define ARGS(n) ((kt_arg[]){kt_arg_buf(buf, sizeof buf), kt_arg_i64(n)})

static int setup(void **state) {
    (void)state;
    return temp_cache_dir(dir, sizeof dir, db, sizeof db, "native");
}

static int teardown(void **state) {
    (void)state;
    return remove_tree(dir);
}

static void run(const char *cmd) {
    int rc = system(cmd);
    if (rc != 0) fail_msg("'%s' exited with %d", cmd, rc);
}

/* Compiles a shared object at DIR/name/lib.so whose function `native` writes `value` into
 * element 0 of its first argument and counts its calls in *(int *)user; link: extra linker
 * flags (a build-id choice). */
static void build_lib(const char *name, int value, const char *link) {
    char src[256], cmd[1024];
    snprintf(src, sizeof src, "%s/lib-%d.c", dir, value);
    FILE *f = fopen(src, "w");
    assert_non_null(f);
    fprintf(f,
            "#include <kerntune.h>\n"
            "#include <string.h>\n"
            "int native(const kt_arg *args, size_t nargs, void *user) {\n"
            "    int32_t v = %d;\n"
            "    ++*(int *)user;\n"
            "    if (nargs > 0) memcpy(args[0].ptr, &v, sizeof v);\n"
            "    return 0;\n"
            "}\n",
            value);
    assert_int_equal(fclose(f), 0);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/%s' && %s -O1 -fPIC -shared -I'%s' %s -o '%s/%s/lib.so' '%s'", dir, name, KT_CC,
             KT_INCLUDE, link, dir, name, src);
    run(cmd);
}

/* Copies DIR/from/lib.so to DIR/to/lib.so: the same object, loaded from another path. */
static void copy_lib(const char *from, const char *to) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/%s' && cp '%s/%s/lib.so' '%s/%s/lib.so'", dir, to, dir, from, dir, to);
    run(cmd);
}

typedef struct loaded {
    void *handle;
    kt_native_fn fn;
} loaded;

static loaded load_lib(const char *name) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s/lib.so", dir, name);
    loaded l = {dlopen(path, RTLD_NOW | RTLD_LOCAL), NULL};
    if (l.handle == NULL) fail_msg("dlopen %s: %s", path, dlerror());
    void *sym = dlsym(l.handle, "native");
    assert_non_null(sym);
    memcpy(&l.fn, &sym, sizeof sym);
    return l;
}

/* The debug log of a context, kept for a test to read. */
static char logged[8192];
static void keep_log(kt_log_level level, const char *message, void *user) {
    (void)level, (void)user;
    size_t n = strlen(logged);
    snprintf(logged + n, sizeof logged - n, "%s\n", message);
}

/* A context on the test's cache file, measuring 1 warm-up and 3 runs per candidate. */
static kt_context *ctx_on_db(void) {
    kt_context *ctx = NULL;
    ok(kt_context_create(&ctx));
    ok(kt_context_set_cache(ctx, db));
    ok(kt_context_set_measure(ctx, 1, 3, 3, 0.0));
    logged[0] = '\0';
    ok(kt_context_set_log_fn(ctx, keep_log, NULL));
    ok(kt_context_set_log_level(ctx, KT_LOG_DEBUG));
    return ctx;
}

static void remove_db(void) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -f '%s' '%s-wal' '%s-shm'", db, db, db);
    run(cmd);
}

/* One tuning in a fresh context: op "native" with candidates "lib" (the shared object's
 * function, fast) and "local" (this executable's, slower by a 20 ms sleep: it never wins).
 * Returns the decision's source; *lib_runs and *local_runs receive each unit's measured runs
 * (0 for a unit whose time came from the cache), *lib_calls the calls of lib's function. */
static kt_decision_source tune_once(kt_native_fn lib, const char *version, unsigned *lib_runs, unsigned *local_runs,
                                    int *lib_calls) {
    static cand local = {.id = 99, .sleep_ms = 20};
    *lib_calls = 0;
    kt_context *ctx = ctx_on_db();
    kt_op *op = test_op(ctx, "native");
    ok(kt_op_add_native(op, "lib", lib, lib_calls));
    ok(kt_op_add_native(op, "local", cand_fn, &local));
    if (version) ok(kt_op_set_candidate_version(op, "lib", version));
    buf[0] = 0;
    ok(kt_op_call(op, ARGS(5), 2));
    const kt_decision *d = NULL;
    ok(kt_op_decision(op, ARGS(5), 2, &d));
    assert_int_equal(kt_decision_winner(d), 0);
    kt_decision_source src = kt_decision_source_of(d);
    *lib_runs = kt_decision_runs(d, 0);
    *local_runs = kt_decision_runs(d, 1);
    kt_context_destroy(ctx);
    return src;
}

/* An object rebuilt with a changed function misses: its unit is measured again (the unchanged
 * candidate beside it keeps its recorded time). The same object from another path hits. */
static void test_rebuilt_object_misses(void **state) {
    (void)state;
    remove_db();
    build_lib("v1", 1, "-Wl,--build-id");
    copy_lib("v1", "v1-copy");
    build_lib("v2", 2, "-Wl,--build-id");
    loaded v1 = load_lib("v1"), copy = load_lib("v1-copy"), v2 = load_lib("v2");
    assert_ptr_not_equal(v1.fn, copy.fn); /* two loaded objects */
    unsigned lib_runs = 0, local_runs = 0;
    int lib_calls = 0;

    assert_int_equal(tune_once(v1.fn, NULL, &lib_runs, &local_runs, &lib_calls), KT_SOURCE_MEASURED);
    assert_int_equal(buf[0], 1);
    assert_int_equal(lib_runs, 3);
    assert_int_equal(local_runs, 3);
    assert_null(strstr(logged, "has no build-id"));

    /* the same bytes from another path, at another address: served from the cache */
    assert_int_equal(tune_once(copy.fn, NULL, &lib_runs, &local_runs, &lib_calls), KT_SOURCE_CACHE);
    assert_int_equal(buf[0], 1);
    assert_int_equal(lib_calls, 1); /* the call itself */

    /* rebuilt with a changed body: missed, lib measured again, local recalled */
    assert_int_equal(tune_once(v2.fn, NULL, &lib_runs, &local_runs, &lib_calls), KT_SOURCE_MEASURED);
    assert_int_equal(buf[0], 2);
    assert_int_equal(lib_runs, 3);
    assert_int_equal(local_runs, 0);
    assert_true(lib_calls >= 4); /* warm-up, 3 runs, the final launch */

    /* and v1 again: its record is still there */
    assert_int_equal(tune_once(v1.fn, NULL, &lib_runs, &local_runs, &lib_calls), KT_SOURCE_CACHE);
    assert_int_equal(buf[0], 1);
    dlclose(v1.handle), dlclose(copy.handle), dlclose(v2.handle);
}

/* The identity is the build-id the linker wrote, not the code: two different bodies linked with
 * the same explicit build-id are one object to the cache (which is why the build-id must come
 * from the code: GNU ld's default, a hash of the output), and a different one misses. */
static void test_identity_is_the_build_id(void **state) {
    (void)state;
    remove_db();
    build_lib("id-a", 1, "-Wl,--build-id=0x0123456789abcdef");
    build_lib("id-b", 2, "-Wl,--build-id=0x0123456789abcdef");
    build_lib("id-c", 1, "-Wl,--build-id=0xfedcba9876543210");
    loaded a = load_lib("id-a"), b = load_lib("id-b"), c = load_lib("id-c");
    unsigned lib_runs = 0, local_runs = 0;
    int lib_calls = 0;
    assert_int_equal(tune_once(a.fn, NULL, &lib_runs, &local_runs, &lib_calls), KT_SOURCE_MEASURED);
    assert_int_equal(tune_once(b.fn, NULL, &lib_runs, &local_runs, &lib_calls), KT_SOURCE_CACHE);
    assert_int_equal(buf[0], 2); /* b's function ran, on a's decision */
    assert_int_equal(tune_once(c.fn, NULL, &lib_runs, &local_runs, &lib_calls), KT_SOURCE_MEASURED);
    assert_int_equal(lib_runs, 3);
    dlclose(a.handle), dlclose(b.handle), dlclose(c.handle);
}

/* An object linked without a build-id is known by a hash of its loaded code: the same bytes from
 * another path hit, a changed body misses; the debug log says which object and why. */
static void test_no_build_id(void **state) {
    (void)state;
    remove_db();
    build_lib("none-v1", 1, "-Wl,--build-id=none");
    copy_lib("none-v1", "none-copy");
    build_lib("none-v2", 2, "-Wl,--build-id=none");
    loaded v1 = load_lib("none-v1"), copy = load_lib("none-copy"), v2 = load_lib("none-v2");
    unsigned lib_runs = 0, local_runs = 0;
    int lib_calls = 0;

    assert_int_equal(tune_once(v1.fn, NULL, &lib_runs, &local_runs, &lib_calls), KT_SOURCE_MEASURED);
    char path[256], line[512];
    snprintf(path, sizeof path, "%s/none-v1/lib.so", dir);
    snprintf(line, sizeof line, "op 'native': candidate 'lib' is in '%s', which has no build-id (linked with --build-id=none)", path);
    if (strstr(logged, line) == NULL) fail_msg("the log lacks \"%s\"; it holds:\n%s", line, logged);
    assert_null(strstr(logged, "candidate 'local' is in")); /* this executable has a build-id */

    assert_int_equal(tune_once(copy.fn, NULL, &lib_runs, &local_runs, &lib_calls), KT_SOURCE_CACHE);
    assert_int_equal(lib_calls, 1);
    assert_int_equal(tune_once(v2.fn, NULL, &lib_runs, &local_runs, &lib_calls), KT_SOURCE_MEASURED);
    assert_int_equal(buf[0], 2);
    assert_int_equal(lib_runs, 3);
    assert_int_equal(local_runs, 0);
    dlclose(v1.handle), dlclose(copy.handle), dlclose(v2.handle);
}

/* A version set on a candidate is part of its identity: another version misses, the same hits,
 * and each version's record stays. */
static void test_version_misses(void **state) {
    (void)state;
    remove_db();
    build_lib("ver", 1, "");
    loaded l = load_lib("ver");
    unsigned lib_runs = 0, local_runs = 0;
    int lib_calls = 0;
    assert_int_equal(tune_once(l.fn, "1.0", &lib_runs, &local_runs, &lib_calls), KT_SOURCE_MEASURED);
    assert_int_equal(tune_once(l.fn, "1.0", &lib_runs, &local_runs, &lib_calls), KT_SOURCE_CACHE);
    assert_int_equal(lib_calls, 1);
    assert_int_equal(tune_once(l.fn, "1.1", &lib_runs, &local_runs, &lib_calls), KT_SOURCE_MEASURED);
    assert_int_equal(lib_runs, 3);
    assert_int_equal(local_runs, 0); /* the unversioned candidate beside it keeps its time */
    assert_int_equal(tune_once(l.fn, NULL, &lib_runs, &local_runs, &lib_calls), KT_SOURCE_MEASURED);
    assert_int_equal(lib_runs, 3);
    assert_int_equal(tune_once(l.fn, "1.0", &lib_runs, &local_runs, &lib_calls), KT_SOURCE_CACHE);
    dlclose(l.handle);
}

/* kt_op_set_candidate_version refuses what it cannot use, naming the op and candidate. */
static void test_version_misuse(void **state) {
    (void)state;
    kt_context *ctx = NULL;
    ok(kt_context_create(&ctx));
    kt_op *op = test_op(ctx, "versioned");
    cand a = {.id = 1};
    ok(kt_op_add_native(op, "a", cand_fn, &a));
    expect_status(KT_ERR_NULL, kt_op_set_candidate_version(NULL, "a", "1"));
    assert_string_equal(kt_last_error(), "kt_op_set_candidate_version: op is NULL");
    expect_status(KT_ERR_UNKNOWN_CANDIDATE, kt_op_set_candidate_version(op, "b", "1"));
    assert_string_equal(kt_last_error(), "kt_op_set_candidate_version(op 'versioned'): no candidate named 'b' (the op has 1)");
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_op_set_candidate_version(op, "a", ""));
    assert_string_equal(kt_last_error(),
                        "kt_op_set_candidate_version(op 'versioned'): candidate 'a': the version is empty; pass NULL to clear it");
    ok(kt_op_set_candidate_version(op, "a", "2"));
    ok(kt_op_set_candidate_version(op, "a", NULL));
    ok(kt_op_set_candidate_version(op, "a", "3"));
    ok(kt_op_call(op, ARGS(1), 2));
    expect_status(KT_ERR_STATE, kt_op_set_candidate_version(op, "a", "4"));
    assert_string_equal(kt_last_error(),
                        "kt_op_set_candidate_version(op 'versioned'): the op was already called; it can no longer be changed");
    kt_context_destroy(ctx);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rebuilt_object_misses),
        cmocka_unit_test(test_identity_is_the_build_id),
        cmocka_unit_test(test_no_build_id),
        cmocka_unit_test(test_version_misses),
        cmocka_unit_test(test_version_misuse),
    };
    return kt_run_cases(argc, argv, tests, setup, teardown);
}
