/*
 * tune-cli.h - running `kerntune tune` as a real process for test-tune*.c: the command with a
 * hang guard (stdout and stderr kept), its JSON document, errors as the command prints them, a
 * temporary directory per case, and problems of tests/data/t1 copied with one field changed.
 * Sanitizer builds (KT_TEST_LARGE 0) tune real problems over part of their spaces. The functions
 * are not inline (the compiler would then check their buffers against each caller's): unused
 * ones are allowed, since each program uses some.
 */
#ifndef KT_TEST_TUNE_CLI_H
#define KT_TEST_TUNE_CLI_H

#include "helpers.h"

#include <fcntl.h>
#include <signal.h>

#include <kerntune/cache.h>
#include <kerntune/variants.h>

#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#ifndef KT_CLI
#error "KT_CLI must name the kerntune binary"
#endif

static char out[1 << 22]; /* stdout of the last run */
static const char *cli = KT_CLI; /* the command that runs: the build's, or a copy another user can reach */
static char err[1 << 20]; /* its stderr */

/* Runs `env KT_CLI args` (env may be NULL) with a 120 s limit, so that a hang fails the test
 * instead of blocking it; stdout goes to out, stderr to err. Returns the exit status.
 * In sanitizer builds a real tuning that names no policy measures with kerneltuner's (8 runs
 * a configuration): the race runs up to 100 when configurations are equally fast, and each run
 * flushes the host's last-level cache, which an instrumented build writes slowly. */
__attribute__((unused)) static int run_env(const char *env, const char *args) {
    char errpath[64], cmd[8192];
    snprintf(errpath, sizeof errpath, "/tmp/kt-test-tune-%d.err", (int)getpid());
    bool fixed_runs = !KT_TEST_LARGE && strncmp(args, "tune ", 5) == 0 && strstr(args, "--simulate") == NULL &&
                      strstr(args, "--measure") == NULL;
    snprintf(cmd, sizeof cmd, "%s timeout 120 '%s' %s%s 2>'%s'", env ? env : "", cli, fixed_runs ? "tune --measure kerneltuner " : "",
             fixed_runs ? args + 5 : args, errpath);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    int status = pclose(p);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (getenv("KT_TEST_TIMES")) /* where the test's time goes */
        fprintf(stderr, "TIME %.2f %s\n", (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec), args);
    FILE *e = fopen(errpath, "r");
    assert_non_null(e);
    n = fread(err, 1, sizeof err - 1, e);
    err[n] = '\0';
    fclose(e);
    unlink(errpath);
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) == 124) fail_msg("timed out: %s", args);
    return WEXITSTATUS(status);
}

__attribute__((unused)) static int run(const char *args) { return run_env(NULL, args); }

/* When the test runs as root, which reads and writes everything, a refusal is shown as user
 * nobody (65534) through setpriv: the command and the C problem (with its kernel) are copied
 * into dir (made 0755 with its parent), since the build tree may lie where nobody cannot reach
 * (a clone in a 0700 temporary directory). Writes the problem's path into problem and returns
 * the prefix that runs as nobody; NULL when there is no setpriv (the caller skips). */
__attribute__((unused)) static const char *as_nobody(const char *dir, char *problem, size_t len) {
    if (system("command -v setpriv >/dev/null 2>&1") != 0) return NULL;
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp '%s' '%s/kerntune' && cp '%s/t1/matmul_c.json' '%s/t1/matmul.c' '%s/' && "
             "chmod 0755 '%s' '%s/kerntune' && chmod 0644 '%s/matmul_c.json' '%s/matmul.c'",
             dir, KT_CLI, dir, KT_DATA, KT_DATA, dir, dir, dir, dir, dir);
    assert_int_equal(system(cmd), 0);
    static char staged[600];
    snprintf(staged, sizeof staged, "%s/kerntune", dir);
    cli = staged;
    snprintf(problem, len, "%s/matmul_c.json", dir);
    return "setpriv --reuid=65534 --regid=65534 --clear-groups env KERNTUNE_ARTIFACTS=/nonexistent";
}

/* Options that make a real tuning smaller in sanitizer builds (part of its space), none in the
 * normal build. */
#define SMALL(options) (KT_TEST_LARGE ? "" : (options))

/* The whole of stdout as one JSON document: nothing before it, nothing after it. */
__attribute__((unused)) static json_t *doc(void) {
    json_error_t e;
    json_t *j = json_loads(out, 0, &e);
    if (j == NULL) fail_msg("stdout is not one JSON document (%s at %d:%d):\n%s\nstderr:\n%s", e.text, e.line, e.column, out, err);
    return j;
}

/* The line of err that starts with "kerntune tune: " and is an error, exactly. */
__attribute__((unused)) static void expect_error(const char *message) {
    char want[8192];
    snprintf(want, sizeof want, "kerntune tune: %s\n", message);
    if (strstr(err, want) == NULL) fail_msg("expected the error\n  %s\ngot:\n%s", want, err);
}

__attribute__((unused)) static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

__attribute__((unused)) static void write_json(const char *path, const json_t *j) { assert_int_equal(json_dump_file(j, path, JSON_INDENT(1)), 0); }

__attribute__((unused)) static json_t *load(const char *path) {
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    if (j == NULL) fail_msg("%s: %s", path, e.text);
    return j;
}

static char tmpdir[64];

__attribute__((unused)) static void make_tmpdir(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/kt-test-tune-XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
}

__attribute__((unused)) static void remove_tmpdir(void) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "chmod -R u+rwx '%s'; rm -rf '%s'", tmpdir, tmpdir);
    assert_int_equal(system(cmd), 0);
}

/* Sets (value not NULL) or deletes the member at path ("A.B[2].C") of root; steals value. */
__attribute__((unused)) static void set_path(json_t *root, const char *path, json_t *value) {
    json_t *node = root;
    char key[256];
    const char *p = path;
    for (;;) {
        size_t len = strcspn(p, ".[");
        snprintf(key, sizeof key, "%.*s", (int)len, p);
        p += len;
        bool last = *p == '\0';
        if (last) {
            if (value) json_object_set_new(node, key, value);
            else json_object_del(node, key);
            return;
        }
        node = json_object_get(node, key);
        assert_non_null(node);
        while (*p == '[') {
            size_t idx = strtoul(p + 1, (char **)&p, 10);
            p++; /* ']' */
            node = json_array_get(node, idx);
            assert_non_null(node);
        }
        if (*p == '.') p++;
        if (*p == '\0') return;
    }
}

/* A copy of tests/data/t1/BASE with member path set to value (JSON text; NULL deletes), in the
 * temporary directory as NAME; KernelFile stays the data directory's. */
__attribute__((unused)) static void mutate(const char *base, const char *name, const char *path, const char *value) {
    char src[1024], dst[1024];
    snprintf(src, sizeof src, "%s/t1/%s", KT_DATA, base);
    snprintf(dst, sizeof dst, "%s/%s", tmpdir, name);
    json_t *j = load(src), *kf = json_object_get(json_object_get(j, "KernelSpecification"), "KernelFile");
    char kernel[1024];
    snprintf(kernel, sizeof kernel, "%s/t1/%s", KT_DATA, json_string_value(kf));
    json_object_set_new(json_object_get(j, "KernelSpecification"), "KernelFile", json_string(kernel));
    json_error_t e;
    json_t *v = value ? json_loads(value, JSON_DECODE_ANY, &e) : NULL;
    if (value && v == NULL) fail_msg("bad test value %s", value);
    set_path(j, path, v);
    write_json(dst, j);
    json_decref(j);
}

#endif
