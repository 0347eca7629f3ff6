/*
 * test-cli.c - the kerntune command: --help and --version, `devices`, every subcommand's
 * --help, and usage errors, run as a real process (the built binary).
 */
#define _GNU_SOURCE /* popen */
#include "helpers.h"

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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help_and_version),
        cmocka_unit_test(test_every_command_has_help),
        cmocka_unit_test(test_devices),
        cmocka_unit_test(test_usage_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
