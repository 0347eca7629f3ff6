/*
 * helpers.h - shared pieces of the cmocka tests: candidates whose cost is set by design (a
 * fixed amount of work, so a 10x slower candidate is 10x slower whatever the machine), call
 * counters, and assertion helpers that print kerntune's detail message on failure.
 */
#ifndef KT_TEST_HELPERS_H
#define KT_TEST_HELPERS_H

#include <kerntune.h>
#include <kerntune/measure.h>
#include <kerntune/validation.h>
#include <kerntune/device.h>
#include <kerntune/variants.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <dirent.h>
#include <sys/wait.h>

#include <cmocka.h>

/* Tests measure afresh: none reads or writes the user's cache of decisions, however it is run
 * (a test of the cache itself names its own file, or defines KT_TEST_CACHE_ENV to leave
 * KERNTUNE_CACHE alone). */
#ifndef KT_TEST_CACHE_ENV
__attribute__((constructor)) static void kt_test_cache_off(void) { setenv("KERNTUNE_CACHE", "off", 1); }
#endif

/* Sanitizer builds (ASan+UBSan, TSan) run every contract on small problems; the large replays
 * of the shared recordings (tens of thousands of configurations) run once, in the normal build.
 * A test that skips its large part in a sanitizer build still runs its small one there. */
#ifdef KT_SANITIZED
#define KT_TEST_LARGE 0
#else
#define KT_TEST_LARGE 1
#endif

/* Runs the cases of tests that the command line names (each argument a case's exact name), or
 * all of them when it names none; KT_TEST_FILTER, when set, is a cmocka filter on top (e.g.
 * test_json*). tests/CMakeLists.txt decides which cases each build runs and passes their names
 * (see kt_test there); a name that no case has is an error, so that a renamed case cannot drop
 * out of a build unnoticed. Returns what cmocka returns (the number of failed cases), or 2. */
#define kt_run_cases(argc, argv, tests, setup, teardown) \
    kt__run_cases((argc), (argv), (tests), sizeof(tests) / sizeof((tests)[0]), (setup), (teardown))
static inline int kt__run_cases(int argc, char **argv, const struct CMUnitTest *tests, size_t n, CMFixtureFunction setup,
                                CMFixtureFunction teardown) {
    if (getenv("KT_TEST_FILTER")) cmocka_set_test_filter(getenv("KT_TEST_FILTER"));
    const char *group = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    if (argc <= 1) return _cmocka_run_group_tests(group, tests, n, setup, teardown);
    struct CMUnitTest *chosen = calloc((size_t)argc, sizeof *chosen);
    if (chosen == NULL) return 2;
    size_t k = 0;
    for (int a = 1; a < argc; a++) {
        size_t i = 0;
        while (i < n && strcmp(tests[i].name, argv[a]) != 0) i++;
        if (i == n) {
            fprintf(stderr, "%s: no case named '%s'\n", group, argv[a]);
            free(chosen);
            return 2;
        }
        chosen[k++] = tests[i];
    }
    int rc = _cmocka_run_group_tests(group, chosen, k, setup, teardown);
    free(chosen);
    return rc;
}

/* Fails the test with kerntune's message when st is not the expected status. */
#define expect_status(expected, call)                                                            \
    do {                                                                                         \
        kt_status st_ = (call);                                                                  \
        if (st_ != (expected))                                                                   \
            fail_msg("%s returned %s, expected %s; last error: %s", #call, kt_status_name(st_), \
                     kt_status_name(expected), kt_last_error());                                 \
    } while (0)
#define ok(call) expect_status(KT_OK, call)

/* A candidate's identity and behaviour. work: units of fixed work per call; sleep_ms: a sleep
 * before it, a floor no load can lower, so a candidate that must lose a selection loses by
 * construction (a fast candidate of 1 work unit runs for microseconds; for it to lose to one
 * that sleeps 20 ms, most of its runs would have to be preempted for longer than that); fail: a
 * nonzero value to return; fail_after: succeed that many calls, then return fail. */
typedef struct cand {
    int32_t id;
    unsigned work;
    unsigned sleep_ms;
    int fail;
    int fail_after;
    atomic_int calls;
} cand;

/* One unit of work: a dependent chain of integer operations the compiler cannot remove. */
static inline void do_work(unsigned units) {
    volatile uint64_t x = 1;
    for (unsigned u = 0; u < units; u++)
        for (int i = 0; i < 4000; i++) x = x * 6364136223846793005ull + 1442695040888963407ull;
}

/* The standard test candidate: counts its call, works, and writes its id into element 0 of
 * argument 0 (an i32 buffer) so tests can see who ran last. */
static inline int cand_fn(const kt_arg *args, size_t nargs, void *user) {
    cand *c = user;
    int n = atomic_fetch_add(&c->calls, 1);
    if (c->fail && n >= c->fail_after) return c->fail;
    if (c->sleep_ms) {
        struct timespec ts = {c->sleep_ms / 1000, (long)(c->sleep_ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0) {}
    }
    do_work(c->work);
    if (nargs > 0 && args[0].type == KT_TYPE_BUFFER && args[0].bytes >= sizeof(int32_t))
        memcpy(args[0].ptr, &c->id, sizeof(int32_t)); /* the buffer may be unaligned */
    return 0;
}

static inline int calls(cand *c) { return atomic_load(&c->calls); }

/* Creates a context with a fixed, small measurement: 1 warm-up and exactly `runs` measured
 * runs per candidate, so counts of calls are exact. */
static inline kt_context *test_context(unsigned runs) {
    kt_context *ctx = NULL;
    ok(kt_context_create(&ctx));
    ok(kt_context_set_measure(ctx, 1, runs, runs, 0.0));
    return ctx;
}

/* Creates op `name` with signature (out: i32 buffer, n: i64) and key n (exact). Its candidates
 * write their own id, so they differ by design: validation is off. */
static inline kt_op *test_op(kt_context *ctx, const char *name) {
    kt_op *op = NULL;
    ok(kt_op_create(ctx, name, &op));
    ok(kt_op_set_validation(op, 0));
    ok(kt_op_add_buffer(op, "out", KT_TYPE_I32, KT_WRITE_ONLY));
    ok(kt_op_add_scalar(op, "n", KT_TYPE_I64));
    ok(kt_op_key_arg(op, 1, KT_BUCKET_EXACT));
    return op;
}

/* Makes a fresh directory /tmp/kt-<tag>-XXXXXX into dir and names the cache file in it into db
 * (dir/cache.db): a cmocka setup's work. Returns 0, or -1 when it cannot. */
static inline int temp_cache_dir(char *dir, size_t dir_len, char *db, size_t db_len, const char *tag) {
    snprintf(dir, dir_len, "/tmp/kt-%s-XXXXXX", tag);
    if (mkdtemp(dir) == NULL) return -1;
    snprintf(db, db_len, "%s/cache.db", dir);
    return 0;
}

/* Runs a command line (formatted) through the shell; its exit status, -1 when it did not exit. */
static inline int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline int sh(const char *fmt, ...) {
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* Removes directory dir and all it holds: a cmocka teardown's work. Returns 0, or -1. */
static inline int remove_tree(const char *dir) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* How many files in directory dir end with suffix (-1: dir cannot be read). */
static inline int count_files(const char *dir, const char *suffix) {
    DIR *d = opendir(dir);
    if (d == NULL) return -1;
    int n = 0;
    size_t sl = strlen(suffix);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        size_t l = strlen(e->d_name);
        n += l >= sl && strcmp(e->d_name + l - sl, suffix) == 0;
    }
    closedir(d);
    return n;
}

/* Op "fill" (out: i32 buffer, n: i64; keyed by n) on device dev: one variant group whose V in
 * [5, 7] is written into out's first n elements, in C on the host, in OpenCL C elsewhere (a
 * global size of 16). Validation is off: the values differ by design. */
static inline kt_op *fill_variants_op(kt_context *ctx, size_t dev) {
    static const char *fill_c = "void fill(int *out, long n) { for (long i = 0; i < n; i++) out[i] = V; }\n";
    static const char *fill_cl = "__kernel void fill(__global int *out, long n) { long i = get_global_id(0); if (i < n) out[i] = V; }\n";
    int host = strcmp(kt_device_backend(kt_context_device(ctx, dev)), "c") == 0;
    kt_op *op = NULL;
    ok(kt_op_create(ctx, "fill", &op));
    ok(kt_op_set_device(op, dev));
    ok(kt_op_set_validation(op, 0));
    ok(kt_op_add_buffer(op, "out", KT_TYPE_I32, KT_WRITE_ONLY));
    ok(kt_op_add_scalar(op, "n", KT_TYPE_I64));
    ok(kt_op_key_arg(op, 1, KT_BUCKET_EXACT));
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    ok(kt_space_add_param(sp, "V", "[5, 7]"));
    if (!host) {
        const char *global[3] = {"16", NULL, NULL}, *local[3] = {"1", NULL, NULL};
        ok(kt_space_set_geometry(sp, KT_GEOMETRY_GLOBAL, global, local, NULL));
    }
    ok(kt_op_add_variants(op, "v", sp, host ? fill_c : fill_cl, "fill", NULL, 0));
    kt_space_destroy(sp);
    return op;
}

#endif
