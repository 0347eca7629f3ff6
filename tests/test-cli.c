/*
 * test-cli.c - the kerntune command: --help and --version, `devices` (and its --json, one JSON
 * document on stdout), every subcommand's --help, and usage errors (with --json, JSON too, help
 * included), run as a real process (the built binary).
 */
#define _GNU_SOURCE /* popen */
#include "helpers.h"

#include <jansson.h>

#include <sys/wait.h>

#ifndef KT_CLI
#error "KT_CLI must name the built kerntune binary"
#endif

/* Runs `kerntune ARGS` (stderr merged into stdout) and returns its exit status; the output
 * goes to out. */
static int run(const char *env, const char *cli_args, char *out, size_t outlen) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s '%s' %s 2>&1", env ? env : "", KT_CLI, cli_args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, outlen - 1, p);
    out[n] = 0;
    int status = pclose(p);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static char out[65536];

static void test_help_and_version(void **state) {
    (void)state;
    assert_int_equal(run(NULL, "--help", out, sizeof out), 0);
    assert_non_null(strstr(out, "usage: kerntune"));
    assert_non_null(strstr(out, "devices"));
    assert_non_null(strstr(out, "KERNTUNE_MODE"));
    assert_int_equal(run(NULL, "-h", out, sizeof out), 0);
    char expect[64];
    snprintf(expect, sizeof expect, "kerntune %s\n", kt_version_string());
    assert_int_equal(run(NULL, "--version", out, sizeof out), 0);
    assert_string_equal(out, expect);
    assert_int_equal(run(NULL, "version", out, sizeof out), 0);
    assert_string_equal(out, expect);
}

static void test_every_command_has_help(void **state) {
    (void)state;
    static const char *const cmds[] = {"devices", "version", "help"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char a[64], prefix[64];
        snprintf(a, sizeof a, "%s --help", cmds[i]);
        snprintf(prefix, sizeof prefix, "usage: kerntune %s", cmds[i]);
        assert_int_equal(run(NULL, a, out, sizeof out), 0);
        assert_memory_equal(out, prefix, strlen(prefix));
        snprintf(a, sizeof a, "help %s", cmds[i]);
        assert_int_equal(run(NULL, a, out, sizeof out), 0);
        assert_memory_equal(out, prefix, strlen(prefix));
    }
}

static void test_devices(void **state) {
    (void)state;
    assert_int_equal(run(NULL, "devices", out, sizeof out), 0);
    assert_memory_equal(out, "BACKEND  DEVICE NAME\n", 21);
    assert_memory_equal(out + 21, "c        0      ", 16);
    assert_null(strstr(out, "fingerprint"));
    assert_int_equal(run(NULL, "devices --verbose", out, sizeof out), 0);
    assert_non_null(strstr(out, "fingerprint: cpu:"));
}

/* devices --json: stdout is one JSON document (stderr kept apart), the same devices as the table. */
static void test_devices_json(void **state) {
    (void)state;
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' devices --json 2>/dev/null", KT_CLI);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    assert_int_equal(pclose(p), 0);
    json_error_t e;
    json_t *j = json_loads(out, 0, &e); /* the whole of stdout: nothing before or after */
    if (j == NULL) fail_msg("not one JSON document (%s): %s", e.text, out);
    json_t *devs = json_object_get(j, "devices");
    assert_true(json_array_size(devs) >= 1);
    json_t *d0 = json_array_get(devs, 0);
    assert_int_equal(json_integer_value(json_object_get(d0, "index")), 0);
    assert_string_equal(json_string_value(json_object_get(d0, "backend")), "c");
    assert_memory_equal(json_string_value(json_object_get(d0, "fingerprint")), "cpu:", 4);
    assert_true(json_is_array(json_object_get(j, "unavailable")));
    size_t ndev = json_array_size(devs);
    json_decref(j);
    /* as many devices as the table lists */
    char table[65536];
    assert_int_equal(run(NULL, "devices", table, sizeof table), 0);
    size_t rows = 0;
    for (const char *l = strchr(table, '\n'); l && l[1]; l = strchr(l + 1, '\n'))
        if (strncmp(l + 1, "unavailable:", 12) != 0) rows++;
    assert_int_equal(rows, ndev);
    /* a failure is a JSON document too */
    snprintf(cmd, sizeof cmd, "KERNTUNE_MODE=sometimes '%s' devices --json 2>/dev/null", KT_CLI);
    p = popen(cmd, "r");
    assert_non_null(p);
    n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int status = pclose(p);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 1);
    j = json_loads(out, 0, &e);
    if (j == NULL) fail_msg("not one JSON document (%s): %s", e.text, out);
    assert_non_null(strstr(json_string_value(json_object_get(j, "error")), "KERNTUNE_MODE='sometimes'"));
    json_decref(j);
}

/* Runs `kerntune ARGS` with stderr discarded; stdout goes to out. Returns the exit status. */
static int run_stdout(const char *cli_args) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' %s 2>/dev/null", KT_CLI, cli_args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int status = pclose(p);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

/* The whole of stdout as one JSON object with member name, a string; returns it (owned by j). */
static const char *json_member(json_t **j, const char *name) {
    json_error_t e;
    *j = json_loads(out, 0, &e);
    if (*j == NULL) fail_msg("stdout is not one JSON document (%s): '%s'", e.text, out);
    const char *v = json_string_value(json_object_get(*j, name));
    if (v == NULL) fail_msg("no string '%s' in %s", name, out);
    return v;
}

/* With --json, stdout is one JSON document on every path: a usage error of devices is
 * {"error": ...}, and --help is {"help": TEXT} with the text --help prints without --json. */
static void test_json_usage_and_help(void **state) {
    (void)state;
    json_t *j;
    assert_int_equal(run_stdout("devices --json --bogus"), 2);
    assert_string_equal(json_member(&j, "error"), "unknown argument '--bogus'");
    json_decref(j);
    assert_int_equal(run_stdout("devices --bogus --json"), 2);
    assert_string_equal(json_member(&j, "error"), "unknown argument '--bogus'");
    json_decref(j);
    static const char *const cmds[][2] = {{"tune --json --help", "tune --help"},
                                          {"devices --help --json", "devices --help"},
                                          {"cache list --json --help", "cache list --help"},
                                          {"cache --help --json", "cache --help"}};
    static char text[sizeof out];
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        assert_int_equal(run_stdout(cmds[i][1]), 0);
        snprintf(text, sizeof text, "%s", out);
        assert_memory_equal(text, "usage: kerntune ", 16);
        if (run_stdout(cmds[i][0]) != 0) fail_msg("%s: exit status", cmds[i][0]);
        assert_string_equal(json_member(&j, "help"), text);
        json_decref(j);
    }
}

static void test_usage_errors(void **state) {
    (void)state;
    assert_int_equal(run(NULL, "", out, sizeof out), 2);
    assert_non_null(strstr(out, "usage: kerntune"));
    assert_int_equal(run(NULL, "frobnicate", out, sizeof out), 2);
    assert_non_null(strstr(out, "unknown command 'frobnicate'"));
    assert_int_equal(run(NULL, "devices --bogus", out, sizeof out), 2);
    assert_non_null(strstr(out, "unknown argument '--bogus'"));
    assert_int_equal(run(NULL, "help frobnicate", out, sizeof out), 2);
    assert_int_equal(run(NULL, "version extra", out, sizeof out), 2);
    assert_int_equal(run("KERNTUNE_MODE=sometimes", "devices", out, sizeof out), 1);
    assert_non_null(strstr(out, "ERR_ENV"));
    assert_non_null(strstr(out, "KERNTUNE_MODE='sometimes'"));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help_and_version),
        cmocka_unit_test(test_every_command_has_help),
        cmocka_unit_test(test_devices),
        cmocka_unit_test(test_devices_json),
        cmocka_unit_test(test_usage_errors),
        cmocka_unit_test(test_json_usage_and_help),
    };
    return kt_run_cases(argc, argv, tests, NULL, NULL);
}
