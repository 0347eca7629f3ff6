/*
 * test-tune.c - `kerntune tune`, run as a real process: every shared T1 problem parses and its
 * exhaustive replay with --measure recorded gives exactly the recorded best configuration and
 * time; T4 output carries the required fields and round-trips through replay; a C problem tunes
 * for real and an OpenCL one on PoCL; twelve malformed problem files each give their exact
 * message; options and usage errors.
 */
#define _GNU_SOURCE /* popen, mkdtemp */
#include "helpers.h"

#include <dirent.h>
#include <stdbool.h>
#include <jansson.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#ifndef KT_CLI
#error "KT_CLI must name the kerntune binary"
#endif

static char out[1 << 20];

/* Runs the CLI with args (and `2>&1` when merge); returns the exit status, output in out. */
static int run(const char *args, bool merge) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' %s %s", KT_CLI, args, merge ? "2>&1" : "2>/dev/null");
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    int status = pclose(p);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

/* Parses the --json line of out: the last line that starts with '{'. */
static json_t *summary(void) {
    const char *line = NULL;
    for (const char *p = out; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (*p == '{') line = p;
    json_error_t e;
    json_t *j = line ? json_loads(line, JSON_DISABLE_EOF_CHECK, &e) : NULL;
    if (j == NULL) fail_msg("no JSON summary in: %s", out);
    return j;
}

static json_t *load_gz(const char *path) {
    gzFile gz = gzopen(path, "rb");
    assert_non_null(gz);
    size_t cap = 1 << 22, len = 0;
    char *buf = malloc(cap);
    int n;
    while ((n = gzread(gz, buf + len, (unsigned)(cap - len))) > 0)
        if ((len += (size_t)n) == cap) buf = realloc(buf, cap *= 2);
    gzclose(gz);
    json_error_t e;
    json_t *j = json_loadb(buf, len, 0, &e);
    free(buf);
    assert_non_null(j);
    return j;
}

/* The recorded best of a T4 file: its fastest correct result's time measurement. */
static const json_t *recorded_best(const json_t *t4, double *time) {
    const json_t *best = NULL, *r;
    size_t i;
    json_array_foreach(json_object_get(t4, "results"), i, r) {
        if (strcmp(json_string_value(json_object_get(r, "invalidity")), "correct") != 0) continue;
        double t = json_number_value(json_object_get(json_array_get(json_object_get(r, "measurements"), 0), "value"));
        if (best == NULL || t < *time) best = r, *time = t;
    }
    return best;
}

static void test_hub_replay_exact(void **state) {
    (void)state;
    static const char *const kernels[] = {"convolution_milo", "dedispersion_milo"}, *const gpus[] = {"A4000", "W6600"};
    for (int k = 0; k < 2; k++)
        for (int g = 0; g < 2; g++) {
            char results[1024], args[4096];
            snprintf(results, sizeof results, "%s/results/%s/%s_T4.json.gz", KT_HUB, kernels[k], gpus[g]);
            snprintf(args, sizeof args, "tune '%s/kernels/%s.json' --simulate '%s' --strategy exhaustive --measure recorded --json --quiet",
                     KT_HUB, kernels[k], results);
            assert_int_equal(run(args, false), 0);
            json_t *s = summary(), *t4 = load_gz(results);
            double want = 0;
            const json_t *rec = recorded_best(t4, &want);
            assert_non_null(rec);
            json_t *best = json_object_get(s, "best");
            if (!json_equal(json_object_get(best, "configuration"), json_object_get(rec, "configuration")))
                fail_msg("%s on %s: best configuration differs from the recorded best", kernels[k], gpus[g]);
            assert_true(json_real_value(json_object_get(best, "time_ms")) == want); /* exactly */
            assert_int_equal(json_integer_value(json_object_get(s, "configurations")), json_array_size(json_object_get(t4, "results")));
            json_decref(s);
            json_decref(t4);
        }
}

/* Every T1 file of the hub parses (tuned here by replaying its first result file). */
static void test_every_hub_problem_parses(void **state) {
    (void)state;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/kernels", KT_HUB);
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".json") != 0) continue;
        char args[4096];
        snprintf(args, sizeof args, "tune '%s/%s' --simulate '%s/results/%.*s/A4000_T4.json.gz' --budget 5 --quiet --json", dir,
                 e->d_name, KT_HUB, (int)(len - 5), e->d_name);
        if (run(args, true) != 0) fail_msg("%s: %s", e->d_name, out);
        n++;
    }
    closedir(d);
    assert_true(n >= 2);
}

/* T4 written by a real tuning has the required fields, classifies failures, and replays to the
 * same best. */
static void test_t4_round_trip(void **state) {
    (void)state;
    char dir[] = "/tmp/kt-t4-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char t4path[256], args[2048];
    snprintf(t4path, sizeof t4path, "%s/out.json", dir);
    snprintf(args, sizeof args, "tune '%s/t1/matmul_c_bad.json' --t4 '%s' --quiet --json", KT_DATA, t4path);
    assert_int_equal(run(args, false), 0);
    json_error_t e;
    json_t *t4 = json_load_file(t4path, 0, &e);
    assert_non_null(t4);
    assert_string_equal(json_string_value(json_object_get(json_object_get(t4, "metadata"), "timeunit")), "milliseconds");
    const json_t *r;
    size_t i;
    int compile_failures = 0, correct = 0;
    json_array_foreach(json_object_get(t4, "results"), i, r) {
        static const char *const required[] = {"configuration", "times", "invalidity", "correctness"};
        for (int k = 0; k < 4; k++) assert_non_null(json_object_get(r, required[k]));
        const char *inv = json_string_value(json_object_get(r, "invalidity"));
        const json_t *cfg = json_object_get(r, "configuration");
        assert_true(json_is_integer(json_object_get(cfg, "TI")) && json_is_integer(json_object_get(cfg, "BAD")));
        if (json_integer_value(json_object_get(cfg, "BAD")) == 1) {
            assert_string_equal(inv, "compile");
            assert_int_equal(json_integer_value(json_object_get(r, "correctness")), 0);
            compile_failures++;
        } else {
            assert_string_equal(inv, "correct");
            assert_true(json_array_size(json_object_get(json_object_get(r, "times"), "runtimes")) > 0);
            correct++;
        }
    }
    assert_int_equal(compile_failures, 5);
    assert_int_equal(correct, 5);
    double want = 0;
    const json_t *rec = recorded_best(t4, &want);
    snprintf(args, sizeof args, "tune '%s/t1/matmul_c_bad.json' --simulate '%s' --measure recorded --quiet --json", KT_DATA, t4path);
    assert_int_equal(run(args, false), 0);
    json_t *s = summary();
    assert_true(json_equal(json_object_get(json_object_get(s, "best"), "configuration"), json_object_get(rec, "configuration")));
    assert_true(json_real_value(json_object_get(json_object_get(s, "best"), "time_ms")) == want);
    assert_int_equal(json_integer_value(json_object_get(s, "failed")), 5);
    json_decref(s);
    json_decref(t4);
    snprintf(args, sizeof args, "rm -rf '%s'", dir);
    assert_int_equal(system(args), 0);
}

static void tunes_for_real(const char *problem, size_t configs) {
    char args[2048];
    snprintf(args, sizeof args, "tune '%s/t1/%s' --json", KT_DATA, problem);
    assert_int_equal(run(args, true), 0);
    assert_non_null(strstr(out, "best: "));
    assert_null(strchr(out, '\r')); /* no progress line when stderr is not a terminal */
    json_t *s = summary();
    assert_int_equal(json_integer_value(json_object_get(s, "configurations")), configs);
    assert_int_equal(json_integer_value(json_object_get(s, "measured")), configs);
    assert_true(json_is_object(json_object_get(json_object_get(s, "best"), "configuration")));
    assert_true(json_real_value(json_object_get(json_object_get(s, "best"), "time_ms")) > 0);
    json_decref(s);
}

static void test_c_problem(void **state) {
    (void)state;
    tunes_for_real("matmul_c.json", 5);
}

static void test_opencl_problem(void **state) {
    (void)state;
    tunes_for_real("matmul_cl.json", 6);
}

/* Each malformed problem gives its exact message. */
static void test_malformed_problems(void **state) {
    (void)state;
    static const struct {
        const char *file, *message;
    } cases[] = {
        {"01_syntax.json", "01_syntax.json:5:25: '}' expected"},
        {"02_values_type.json", "02_values_type.json: ConfigurationSpace.TuningParameters[1].Values: expected a string (a Python list, e.g. \"[16, 32, 64]\"), got an integer"},
        {"03_no_kernelspec.json", "03_no_kernelspec.json: KernelSpecification: missing; expected an object"},
        {"04_condition_syntax.json", "04_condition_syntax.json: ConfigurationSpace.Conditions[0].Expression: kt_space_add_constraint: expression 'TI +* 2 > 4': column 5: expected a value, found '*'"},
        {"05_values_unclosed.json", "05_values_unclosed.json: ConfigurationSpace.TuningParameters[0].Values: kt_space_add_param: expression '[4, 16': column 7: expected ',' or ']', found the end"},
        {"06_missing_kernel.json", "06_missing_kernel.json: KernelSpecification.KernelFile: the kernel file " KT_DATA "/t1/bad/no_such_kernel.c cannot be read: No such file or directory"},
        {"07_language.json", "07_language.json: KernelSpecification.Language: 'Vulkan' is not supported; expected C, OpenCL or CUDA"},
        {"08_arg_type.json", "08_arg_type.json: KernelSpecification.Arguments[0].Type: 'float4' is not supported; expected bool, int8..int64, uint8..uint64, half, float or double"},
        {"09_size_index.json", "09_size_index.json: KernelSpecification.Arguments[0].Size: kt_space_eval_int: expression 'ProblemSize[0] * ProblemSize[1]': column 29: index out of range"},
        {"10_reference_target.json", "10_reference_target.json: KernelSpecification.ReferenceArguments[0].TargetName: 'nope' names no argument"},
        {"11_param_type.json", "11_param_type.json: ConfigurationSpace.TuningParameters[0].Type: 'complex' is not one of int, uint, float, bool, string"},
        {"12_unknown_name.json", "12_unknown_name.json: ConfigurationSpace.Conditions[0].Expression: kt_space_add_constraint: expression 'TI <= block_size': column 7: name 'block_size' is not defined"},
    };
    char cwd[1024];
    assert_non_null(getcwd(cwd, sizeof cwd));
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/t1/bad", KT_DATA);
    assert_int_equal(chdir(dir), 0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[512], want[2048];
        snprintf(args, sizeof args, "tune %s --quiet", cases[i].file);
        assert_int_equal(run(args, true), 1);
        snprintf(want, sizeof want, "kerntune tune: %s\n", cases[i].message);
        const char *line = strstr(out, "kerntune tune: ");
        if (line == NULL || strcmp(line, want) != 0) fail_msg("%s:\n  got  %s  want %s", cases[i].file, line ? line : out, want);
    }
    /* an unknown field is a warning, not an error */
    assert_int_equal(run("tune 12_unknown_name.json --quiet", true), 1);
    assert_non_null(strstr(out, "12_unknown_name.json: warning: ignoring unknown field KernelSpecification.Colour\n"));
    assert_int_equal(chdir(cwd), 0);
}

/* Kernel Tuner's formats: its cache files replay (a failed compile classified), and a problem
 * in its T1 style (list(range(...)), GridDivX, MemType, Output, a null Stream) tunes. */
static void test_kernel_tuner_formats(void **state) {
    (void)state;
    char args[2048];
    snprintf(args, sizeof args, "tune '%s/t1/matmul_c.json' --simulate '%s/t1/matmul_c.ktcache.json' --measure recorded --quiet --json",
             KT_DATA, KT_DATA);
    assert_int_equal(run(args, false), 0);
    json_t *s = summary(), *best = json_object_get(s, "best");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(best, "configuration"), "TI")), 16);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(best, "configuration"), "TK")), 8);
    assert_true(json_real_value(json_object_get(best, "time_ms")) == 0.125);
    assert_int_equal(json_integer_value(json_object_get(s, "failed")), 1);
    json_decref(s);
    snprintf(args, sizeof args, "tune '%s/t1/matmul_kt_style.json' --quiet --json", KT_DATA);
    assert_int_equal(run(args, false), 0);
    s = summary();
    assert_int_equal(json_integer_value(json_object_get(s, "configurations")), 7);
    assert_int_equal(json_integer_value(json_object_get(s, "measured")), 7);
    json_decref(s);
}

/* The measurement policies on recorded data: a seeded replay is deterministic; triton makes
 * exactly do_bench's runs; kerneltuner 1 + 7 per configuration; the race spends fewer. */
static void test_replay_policies(void **state) {
    (void)state;
    char args[2048];
    json_int_t runs[3];
    static const char *const policies[3] = {"race", "triton", "kerneltuner"};
    for (int p = 0; p < 3; p++) {
        char first[4096] = "";
        for (int twice = 0; twice < 2; twice++) {
            snprintf(args, sizeof args, "tune '%s/t1/matmul_c.json' --simulate '%s/t1/matmul_c.ktcache.json' --measure %s --seed 7 --quiet --json",
                     KT_DATA, KT_DATA, policies[p]);
            assert_int_equal(run(args, false), 0);
            json_t *s = summary();
            assert_string_equal(json_string_value(json_object_get(s, "policy")), policies[p]);
            json_object_del(s, "tuning_time_s"); /* the only wall-clock field */
            char *text = json_dumps(s, JSON_SORT_KEYS | JSON_COMPACT | JSON_REAL_PRECISION(17));
            if (twice == 0) snprintf(first, sizeof first, "%s", text);
            else assert_string_equal(text, first);
            runs[p] = json_integer_value(json_object_get(s, "runs"));
            free(text);
            json_decref(s);
        }
    }
    assert_int_equal(runs[2], 4 * 8); /* four valid configurations, a fourth fails to compile */
    assert_true(runs[0] < runs[2]);
    /* triton, runtimes served in order: configuration TI=4,TK=8 records 0.52 0.49 0.49 0.5 ms;
     * one call (0.52), five estimate runs (0.49 0.49 0.5 0.52 0.49: 0.498 ms each), so 50
     * warm-ups (25 ms) and 200 repetitions (100 ms) */
    char t4path[64];
    snprintf(t4path, sizeof t4path, "/tmp/kt-test-triton-%d.json", (int)getpid());
    snprintf(args, sizeof args, "tune '%s/t1/matmul_c.json' --simulate '%s/t1/matmul_c.ktcache.json' --measure triton --quiet --t4 %s",
             KT_DATA, KT_DATA, t4path);
    assert_int_equal(run(args, false), 0);
    json_error_t e;
    json_t *t4 = json_load_file(t4path, 0, &e);
    assert_non_null(t4);
    size_t i;
    json_t *r;
    int seen = 0;
    json_array_foreach(json_object_get(t4, "results"), i, r) {
        json_t *c = json_object_get(r, "configuration");
        if (json_integer_value(json_object_get(c, "TI")) == 4 && json_integer_value(json_object_get(c, "TK")) == 8) {
            assert_int_equal(json_array_size(json_object_get(json_object_get(r, "times"), "runtimes")), 200);
            seen = 1;
        }
    }
    assert_true(seen);
    json_decref(t4);
    assert_int_equal(unlink(t4path), 0);
}

/* A problem whose configurations crash, abort, hang, write out of bounds and exhaust memory
 * tunes to completion (each configuration runs in a worker process), and its T4 output
 * classifies every failure. */
static void test_crashing_problem(void **state) {
    (void)state;
    char args[2048], t4path[64];
    snprintf(t4path, sizeof t4path, "/tmp/kt-test-crashy-%d.json", (int)getpid());
    snprintf(args, sizeof args, "tune '%s/t1/crashy_c.json' --timeout 1 --quiet --json --t4 %s", KT_DATA, t4path);
    assert_int_equal(run(args, false), 0);
    json_t *s = summary();
    assert_int_equal(json_integer_value(json_object_get(json_object_get(json_object_get(s, "best"), "configuration"), "MODE")), 0);
    assert_int_equal(json_integer_value(json_object_get(s, "measured")), 2);
    assert_int_equal(json_integer_value(json_object_get(s, "failed")), 5);
    json_decref(s);
    json_error_t e;
    json_t *t4 = json_load_file(t4path, 0, &e);
    assert_non_null(t4);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    const char *memory = NULL; /* a sanitizer's allocator may take longer than the timeout to give up */
#else
    const char *memory = "runtime";
#endif
    const char *want[7] = {"correct", "runtime", "runtime", "timeout", "runtime", memory, "correct"};
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(t4, "results"), i, r) {
        json_int_t mode = json_integer_value(json_object_get(json_object_get(r, "configuration"), "MODE"));
        assert_true(mode >= 0 && mode < 7);
        const char *inv = json_string_value(json_object_get(r, "invalidity"));
        if (want[mode] == NULL) assert_true(strcmp(inv, "runtime") == 0 || strcmp(inv, "timeout") == 0);
        else if (strcmp(inv, want[mode]) != 0) fail_msg("MODE=%d: invalidity %s, expected %s", (int)mode, inv, want[mode]);
    }
    assert_int_equal(json_array_size(json_object_get(t4, "results")), 7);
    json_decref(t4);
    assert_int_equal(unlink(t4path), 0);
}

/* kerntune tune records its decision in the persistent cache; a second run of the same problem
 * is served from it (nothing compiled or measured), and kerntune cache lists it. */
static void test_decision_recorded(void **state) {
    (void)state;
    char db[64], args[2048];
    snprintf(db, sizeof db, "/tmp/kt-test-tune-cache-%d.db", (int)getpid());
    const char *source[2] = {"measured", "cache"};
    char first[256] = "";
    for (int round = 0; round < 2; round++) {
        snprintf(args, sizeof args, "tune '%s/t1/matmul_c.json' --cache %s --quiet --json", KT_DATA, db);
        assert_int_equal(run(args, false), 0);
        json_t *s = summary();
        assert_string_equal(json_string_value(json_object_get(s, "source")), source[round]);
        assert_string_equal(json_string_value(json_object_get(s, "cache")), db);
        char *best = json_dumps(json_object_get(json_object_get(s, "best"), "configuration"), JSON_SORT_KEYS | JSON_COMPACT);
        if (round == 0) snprintf(first, sizeof first, "%s", best);
        else assert_string_equal(best, first); /* the same decision */
        if (round == 1) assert_int_equal(json_integer_value(json_object_get(s, "runs")), 0);
        free(best);
        json_decref(s);
    }
    snprintf(args, sizeof args, "cache list --cache %s --json", db);
    assert_int_equal(run(args, false), 0);
    json_error_t e;
    json_t *list = json_loads(out, JSON_DISABLE_EOF_CHECK, &e);
    assert_non_null(list);
    json_t *entries = json_is_array(list) ? list : json_object_get(list, "entries");
    assert_int_equal(json_array_size(entries), 1);
    json_decref(list);
    char rm[256];
    snprintf(rm, sizeof rm, "rm -f '%s' '%s-wal' '%s-shm'", db, db, db);
    assert_int_equal(system(rm), 0);
}

static void test_options(void **state) {
    (void)state;
    char args[2048];
    /* --budget: the first 2 configurations only */
    snprintf(args, sizeof args, "tune '%s/t1/matmul_c.json' --budget 2 --quiet --json", KT_DATA);
    assert_int_equal(run(args, false), 0);
    json_t *s = summary();
    assert_int_equal(json_integer_value(json_object_get(s, "measured")), 2);
    assert_int_equal(json_integer_value(json_object_get(s, "not_run")), 3);
    json_decref(s);
    /* --define fixes a parameter */
    snprintf(args, sizeof args, "tune '%s/t1/matmul_c.json' --define TI=16 --quiet --json", KT_DATA);
    assert_int_equal(run(args, false), 0);
    s = summary();
    assert_int_equal(json_integer_value(json_object_get(s, "configurations")), 2);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(json_object_get(s, "best"), "configuration"), "TI")), 16);
    json_decref(s);
    /* --problem-size changes the space through the constraints and sizes */
    snprintf(args, sizeof args, "tune '%s/t1/matmul_cl.json' --problem-size 8 --quiet --json", KT_DATA);
    assert_int_equal(run(args, false), 0);
    s = summary();
    assert_int_equal(json_integer_value(json_object_get(s, "configurations")), 3); /* (8 // TM) % LX == 0: TM=1 with LX 4, 8; TM=2 with 4 */
    json_decref(s);
    static const struct {
        const char *args, *message;
    } usage[] = {
        {"tune", "no problem file given"},
        {"tune x.json --frobnicate", "unknown option '--frobnicate'"},
        {"tune x.json --budget lots", "--budget 'lots': expected a count of configurations (N) or seconds (Ns)"},
        {"tune x.json --measure recorded", "--measure recorded needs --simulate"},
        {"tune x.json --strategy random", "--strategy 'random': this version has exhaustive only"},
        {"tune x.json --define TI", "--define 'TI': expected NAME=VALUE"},
        {"tune x.json --seed", "--seed needs a value"},
    };
    for (size_t i = 0; i < sizeof usage / sizeof usage[0]; i++) {
        assert_int_equal(run(usage[i].args, true), 2);
        if (strstr(out, usage[i].message) == NULL) fail_msg("%s: %s", usage[i].args, out);
    }
    snprintf(args, sizeof args, "tune '%s/t1/matmul_c.json' --define NOPE=1 --quiet", KT_DATA);
    assert_int_equal(run(args, true), 1);
    assert_non_null(strstr(out, "--define NOPE: the problem has no parameter of that name"));
    assert_int_equal(run("tune --help", true), 0);
    assert_non_null(strstr(out, "usage: kerntune tune PROBLEM.json"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hub_replay_exact),   cmocka_unit_test(test_every_hub_problem_parses),
        cmocka_unit_test(test_t4_round_trip),      cmocka_unit_test(test_c_problem),
        cmocka_unit_test(test_opencl_problem),     cmocka_unit_test(test_malformed_problems),
        cmocka_unit_test(test_kernel_tuner_formats),
        cmocka_unit_test(test_replay_policies),
        cmocka_unit_test(test_crashing_problem),
        cmocka_unit_test(test_decision_recorded),
        cmocka_unit_test(test_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
