/*
 * isolate-test.h - what test-isolate.c (candidates that fail badly, natives, failure kinds,
 * OpenCL) and test-isolate-plugin.c (a user's plug-in: a backend and natives in a shared object)
 * share: a scratch folder per run, the twice reference, looking units up, the log that the
 * plug-in and the natives write ("WHAT PID" lines), an op of natives, and captured info lines.
 */
#ifndef KT_ISOLATE_TEST_H
#define KT_ISOLATE_TEST_H

#include "helpers.h"

#include <kerntune/backend.h>
#include <kerntune/cache.h>
#include <kerntune/decision.h>
#include <kerntune/search.h>
#include <kerntune/device.h>
#include <kerntune/inputs.h>
#include <kerntune/measure.h>
#include <kerntune/validation.h>
#include <kerntune/variants.h>

#include <dlfcn.h>
#include <math.h>
#include <signal.h>
#include <errno.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

__attribute__((unused)) static char artifacts[64];

__attribute__((unused)) static int setup(void **state) {
    (void)state;
    snprintf(artifacts, sizeof artifacts, "/tmp/kt-isolate-XXXXXX");
    return mkdtemp(artifacts) ? 0 : -1;
}

__attribute__((unused)) static int teardown(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", artifacts);
    return system(cmd) == 0 ? 0 : -1;
}

__attribute__((unused)) static int twice(const kt_arg *args, size_t nargs, void *user, kt_result *res) {
    (void)nargs, (void)user, (void)res;
    float *out = args[0].ptr;
    const float *in = args[1].ptr;
    for (int32_t i = 0; i < (int32_t)args[2].i; i++) out[i] = 2.0f * in[i];
    return 0;
}

__attribute__((unused)) static int twice_ref(const kt_arg *args, size_t nargs, void *user, kt_result *res) { return twice(args, nargs, user, res); }

#define N (1 << 18) /* long enough runs that scheduling noise cannot reverse a 20x gap */

__attribute__((unused)) static size_t unit_of(const kt_decision *d, const char *config) {
    for (size_t u = 0; u < kt_decision_unit_count(d); u++)
        if (kt_decision_unit_config(d, u) && strcmp(kt_decision_unit_config(d, u), config) == 0) return u;
    fail_msg("no unit %s", config);
    return 0;
}

__attribute__((unused)) static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

__attribute__((unused)) static void expect_unit(const kt_decision *d, const char *config, kt_outcome want, const char *text) {
    size_t u = unit_of(d, config);
    kt_outcome got = kt_decision_unit_outcome(d, u);
    const char *msg = kt_decision_unit_message(d, u);
    if (got != want) fail_msg("%s: outcome %d, expected %d (%s)", config, (int)got, (int)want, msg ? msg : "");
    if (text && (msg == NULL || strstr(msg, text) == NULL)) fail_msg("%s: message '%s' lacks '%s'", config, msg ? msg : "", text);
}

__attribute__((unused)) static char plugin_log[128];

/* Each line of the log: a word and the pid that wrote it. Counts the lines of word written by
 * this process (*mine) and by others (returned); *other receives one of the others' pids. */
__attribute__((unused)) static int log_count(const char *word, int *mine, long *other) {
    FILE *f = fopen(plugin_log, "r");
    int others = 0;
    *mine = 0;
    if (other) *other = 0;
    if (f == NULL) return 0;
    char w[64];
    long pid;
    while (fscanf(f, "%63s %ld", w, &pid) == 2) {
        if (strcmp(w, word) != 0) continue;
        if (pid == (long)getpid()) {
            (*mine)++;
        } else {
            others++;
            if (other) *other = pid;
        }
    }
    fclose(f);
    return others;
}

__attribute__((unused)) static void log_reset(void) {
    snprintf(plugin_log, sizeof plugin_log, "%s/plugin.log", artifacts);
    remove(plugin_log);
    setenv("KT_TEST_PLUGIN_LOG", plugin_log, 1); /* workers inherit it */
}

__attribute__((unused)) static kt_op *natives_op(kt_context *ctx, const char *name, kt_isolation iso) {
    kt_op *op = NULL;
    ok(kt_op_create(ctx, name, &op));
    ok(kt_op_add_buffer(op, "out", KT_TYPE_F32, KT_WRITE_ONLY));
    ok(kt_op_add_buffer(op, "in", KT_TYPE_F32, KT_READ_ONLY));
    ok(kt_op_add_scalar(op, "n", KT_TYPE_I32));
    ok(kt_op_set_reference_fn(op, twice_ref, NULL));
    ok(kt_op_set_isolation(op, iso));
    ok(kt_op_set_timeout(op, 1.0));
    return op;
}

__attribute__((unused)) static void expect_fail(const kt_decision *d, size_t u, kt_outcome outcome, kt_fail_kind kind, const char *name, int code) {
    if (kt_decision_unit_outcome(d, u) != outcome || kt_decision_unit_fail_kind(d, u) != kind ||
        kt_decision_unit_fail_code(d, u) != code)
        fail_msg("unit %zu: outcome %d kind %s code %d, expected %d %s %d (%s)", u, (int)kt_decision_unit_outcome(d, u),
                 kt_fail_kind_name(kt_decision_unit_fail_kind(d, u)), kt_decision_unit_fail_code(d, u), (int)outcome, name, code,
                 kt_decision_unit_message(d, u) ? kt_decision_unit_message(d, u) : "");
    assert_string_equal(kt_fail_kind_name(kind), name);
}

typedef struct lines {
    char text[4096];
} lines;

__attribute__((unused)) static void capture(kt_log_level level, const char *message, void *user) {
    lines *l = user;
    if (level != KT_LOG_INFO) return;
    size_t n = strlen(l->text);
    snprintf(l->text + n, sizeof l->text - n, "%s\n", message);
}

#endif
