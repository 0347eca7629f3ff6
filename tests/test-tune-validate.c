/*
 * test-tune-validate.c - `kerntune tune`'s validation policy, end to end on tiny C kernels
 * (tests/data/t1): which reference validates and why (a consensus where the Default is no
 * configuration of the space, never blindly the first configuration), --validate off,
 * --answer FILE and its errors, and a tuning that most configurations disagree with: stopped
 * early, naming the parameter that changes the output.
 */
#include "tune-cli.h"

/* The configuration P of a T4 record or --json example. */
static json_int_t p_of(const json_t *r) { return json_integer_value(json_object_get(json_object_get(r, "configuration"), "P")); }

/* Every record of the T4 file at path: P=1 has invalidity bad_one, the others others. */
static void expect_t4(const char *path, size_t n, const char *p1, const char *others) {
    json_t *t4 = load(path);
    const json_t *results = json_object_get(t4, "results");
    assert_int_equal(json_array_size(results), n);
    for (size_t i = 0; i < n; i++) {
        const json_t *r = json_array_get(results, i);
        assert_string_equal(json_string_value(json_object_get(r, "invalidity")), p_of(r) == 1 ? p1 : others);
    }
    json_decref(t4);
}

/* The Default (P = 6) breaks the problem's Condition P < 6, so no Default configuration can be
 * the reference; the first configuration (P = 1) is the odd one out. The first five configurations
 * vote: P = 2 agrees with three others, P = 1 with none, so P = 2 is the reference and only P = 1
 * is disqualified, in the text, the --json document and the T4 file. */
static void test_consensus_outvotes_first(void **state) {
    (void)state;
    make_tmpdir();
    char args[2048], t4path[256];
    snprintf(t4path, sizeof t4path, "%s/consensus.json", tmpdir);
    snprintf(args, sizeof args, "tune '%s/t1/consensus_c.json' --cache off --measure kerneltuner --t4 %s", KT_DATA, t4path);
    int rc = run(args);
    if (rc != 0) fail_msg("exit %d:\n%s\n%s", rc, out, err);
    assert_non_null(strstr(err, "kerntune tune: note: the Default values break ConfigurationSpace.Conditions: the reference is the "
                                "consensus of the first 5 configurations\n"));
    assert_non_null(strstr(out, "\nvalidation: against the consensus of 4 of 5 configurations (the Default values break "
                                "ConfigurationSpace.Conditions): the reference is P=2\n"));
    assert_non_null(strstr(out, "5 configurations: 4 measured, 1 failed (0 compile, 0 runtime, 0 crashed, 0 timeout, 1 correctness, "
                                "0 rejected), 0 not run\n  correctness (1):\n    P=1\n      output 'out' element 0: expected 6, got 4 "
                                "(atol 1e-06, rtol 0.0001)\n"));
    expect_t4(t4path, 5, "correctness", "correct");
    json_t *t4 = load(t4path), *x = json_object_get(t4, "x-kerntune"), *ref = json_object_get(x, "reference");
    assert_string_equal(json_string_value(json_object_get(x, "validation")), "reference");
    assert_string_equal(json_string_value(json_object_get(ref, "source")), "consensus of 4 of 5");
    assert_string_equal(json_string_value(json_object_get(ref, "why")), "the Default values break ConfigurationSpace.Conditions");
    assert_int_equal(p_of(ref), 2);
    json_decref(t4);

    snprintf(args, sizeof args, "tune '%s/t1/consensus_c.json' --cache off --measure kerneltuner --json", KT_DATA);
    assert_int_equal(run(args), 0);
    json_t *s = doc();
    ref = json_object_get(s, "reference");
    assert_string_equal(json_string_value(json_object_get(s, "validation")), "reference");
    assert_true(json_is_true(json_object_get(s, "validated")));
    assert_string_equal(json_string_value(json_object_get(ref, "source")), "consensus of 4 of 5");
    assert_int_equal(json_integer_value(json_object_get(ref, "agreeing")), 4);
    assert_int_equal(json_integer_value(json_object_get(ref, "among")), 5);
    assert_int_equal(p_of(ref), 2);
    assert_int_equal(json_integer_value(json_object_get(s, "measured")), 4);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(s, "failures"), "correctness")), 1);
    assert_int_equal(p_of(json_array_get(json_object_get(json_object_get(s, "failure_examples"), "correctness"), 0)), 1);
    assert_int_not_equal(json_integer_value(json_object_get(json_object_get(json_object_get(s, "best"), "configuration"), "P")), 1);
    json_decref(s);
    remove_tmpdir();
}

/* A Default outside its parameter's Values is no configuration of the space either: the
 * consensus chooses, and says why. */
static void test_default_outside_values(void **state) {
    (void)state;
    make_tmpdir();
    mutate("consensus_c.json", "outside.json", "ConfigurationSpace.TuningParameters[0].Default", "9");
    char args[2048];
    snprintf(args, sizeof args, "tune '%s/outside.json' --cache off --measure kerneltuner --json", tmpdir);
    int rc = run(args);
    if (rc != 0) fail_msg("exit %d:\n%s\n%s", rc, out, err);
    json_t *s = doc(), *ref = json_object_get(s, "reference");
    assert_string_equal(json_string_value(json_object_get(ref, "source")), "consensus of 4 of 5");
    assert_string_equal(json_string_value(json_object_get(ref, "why")), "the Default of P is not used: 9 is not one of the Values [1, 2, 3, 4, 5, 6]");
    assert_int_equal(p_of(ref), 2);
    assert_int_equal(json_integer_value(json_object_get(s, "measured")), 4);
    assert_int_equal(json_integer_value(json_object_get(s, "failed")), 1);
    json_decref(s);
    /* a Default that is a configuration is the reference, as before */
    mutate("consensus_c.json", "inside.json", "ConfigurationSpace.TuningParameters[0].Default", "3");
    snprintf(args, sizeof args, "tune '%s/inside.json' --cache off --measure kerneltuner", tmpdir);
    assert_int_equal(run(args), 0);
    assert_non_null(strstr(out, "\nvalidation: against the Default configuration P=3\n"));
    assert_non_null(strstr(out, " 4 measured, 1 failed "));
    remove_tmpdir();
}

/* --validate off checks nothing and says so: every configuration is measured, none disqualified. */
static void test_validate_off(void **state) {
    (void)state;
    make_tmpdir();
    char args[2048], t4path[256];
    snprintf(t4path, sizeof t4path, "%s/off.json", tmpdir);
    snprintf(args, sizeof args, "tune '%s/t1/consensus_c.json' --cache off --measure kerneltuner --validate off --t4 %s", KT_DATA, t4path);
    assert_int_equal(run(args), 0);
    assert_non_null(strstr(out, "5 configurations: 5 measured, 0 failed "));
    assert_non_null(strstr(out, "\nvalidation: off (--validate off): no configuration's output was checked\n"));
    assert_null(strstr(out, "warning"));
    assert_null(strstr(err, "the reference is the consensus"));
    expect_t4(t4path, 5, "correct", "correct");
    json_t *t4 = load(t4path), *x = json_object_get(t4, "x-kerntune");
    assert_string_equal(json_string_value(json_object_get(x, "validation")), "off");
    assert_string_equal(json_string_value(json_object_get(json_object_get(x, "reference"), "source")), "none");
    json_decref(t4);
    snprintf(args, sizeof args, "tune '%s/t1/consensus_c.json' --cache off --measure kerneltuner --validate=off --json", KT_DATA);
    assert_int_equal(run(args), 0);
    json_t *s = doc();
    assert_string_equal(json_string_value(json_object_get(s, "validation")), "off");
    assert_false(json_is_true(json_object_get(s, "validated")));
    assert_string_equal(json_string_value(json_object_get(json_object_get(s, "reference"), "why")), "--validate off");
    assert_int_equal(json_integer_value(json_object_get(s, "measured")), 5);
    assert_int_equal(json_integer_value(json_object_get(s, "failed")), 0);
    json_decref(s);
    snprintf(args, sizeof args, "tune '%s/t1/consensus_c.json' --validate maybe", KT_DATA);
    assert_int_equal(run(args), 2);
    expect_error("--validate 'maybe': expected reference or off");
    remove_tmpdir();
}

/* Writes count floats of value to path. */
static void write_floats(const char *path, size_t count, float value) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    for (size_t i = 0; i < count; i++) assert_int_equal(fwrite(&value, sizeof value, 1, f), 1);
    assert_int_equal(fclose(f), 0);
}

/* --answer FILE: the expected bytes of the outputs. The right answer (in = 3, so 6 everywhere)
 * disqualifies P = 1 alone; a wrong one (4 everywhere: P = 1's) disqualifies the other four. A
 * file that is not there, or of the wrong size, is an error naming it and what it should hold. */
static void test_answer_file(void **state) {
    (void)state;
    make_tmpdir();
    char args[2048], t4path[256], good[256], bad[256], small[256];
    snprintf(t4path, sizeof t4path, "%s/answer.json", tmpdir);
    snprintf(good, sizeof good, "%s/good.bin", tmpdir);
    snprintf(bad, sizeof bad, "%s/bad.bin", tmpdir);
    snprintf(small, sizeof small, "%s/small.bin", tmpdir);
    write_floats(good, 64, 6.0f);
    write_floats(bad, 64, 4.0f);
    write_floats(small, 3, 6.0f);
    snprintf(args, sizeof args, "tune '%s/t1/consensus_c.json' --cache off --measure kerneltuner --answer %s --t4 %s", KT_DATA, good, t4path);
    assert_int_equal(run(args), 0);
    assert_null(strstr(err, "the reference is the consensus"));
    char want[512];
    snprintf(want, sizeof want, "\nvalidation: against the answer file %s\n", good);
    assert_non_null(strstr(out, want));
    assert_non_null(strstr(out, "5 configurations: 4 measured, 1 failed (0 compile, 0 runtime, 0 crashed, 0 timeout, 1 correctness, "));
    expect_t4(t4path, 5, "correctness", "correct");
    json_t *t4 = load(t4path), *ref = json_object_get(json_object_get(t4, "x-kerntune"), "reference");
    assert_string_equal(json_string_value(json_object_get(ref, "source")), "answer file");
    assert_string_equal(json_string_value(json_object_get(ref, "file")), good);
    json_decref(t4);

    snprintf(args, sizeof args, "tune '%s/t1/consensus_c.json' --cache off --measure kerneltuner --answer %s --t4 %s --json", KT_DATA, bad,
             t4path);
    assert_int_equal(run(args), 0);
    json_t *s = doc();
    assert_string_equal(json_string_value(json_object_get(json_object_get(s, "reference"), "source")), "answer file");
    assert_int_equal(json_integer_value(json_object_get(s, "measured")), 1);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(s, "failures"), "correctness")), 4);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(json_object_get(s, "best"), "configuration"), "P")), 1);
    json_decref(s);
    expect_t4(t4path, 5, "correct", "correctness");

    snprintf(args, sizeof args, "tune '%s/t1/consensus_c.json' --cache off --answer %s/none.bin", KT_DATA, tmpdir);
    assert_int_equal(run(args), 1);
    snprintf(want, sizeof want, "--answer %s/none.bin: cannot be read: No such file or directory", tmpdir);
    expect_error(want);
    snprintf(args, sizeof args, "tune '%s/t1/consensus_c.json' --cache off --answer %s --json", KT_DATA, small);
    assert_int_equal(run(args), 1);
    snprintf(want, sizeof want, "--answer %s: 12 bytes; expected 256: the outputs out (64 float elements, 256 bytes), one after another "
                                "in the order of the problem's Arguments", small);
    expect_error(want);
    s = doc();
    assert_string_equal(json_string_value(json_object_get(s, "error")), want);
    json_decref(s);
    snprintf(args, sizeof args, "tune '%s/t1/consensus_c.json' --answer %s --validate off", KT_DATA, good);
    assert_int_equal(run(args), 2);
    expect_error("--answer with --validate off: nothing would be compared with it");
    remove_tmpdir();
}

/* A parameter that changes what the kernel computes (STEPS, the time steps of one launch; the
 * Default STEPS = 1 is the reference) makes most configurations disagree: in the space's order
 * (UNROLL, then STEPS) the first eight compared are 3 right and 5 wrong, and there the tuning
 * stops (exit 3), naming STEPS in the text, the --json document, the T4 file and the report,
 * having validated 8 of its budget of 100 (of 120 configurations): less than a tenth. */
static void test_parameter_changes_output(void **state) {
    (void)state;
    make_tmpdir();
    char args[2048], t4path[256];
    snprintf(t4path, sizeof t4path, "%s/steps.json", tmpdir);
    const char *message = "outputs differ whenever STEPS != 1: this parameter changes what the kernel computes; fix it with "
                          "--define STEPS=1, or pass --validate off";
    snprintf(args, sizeof args, "tune '%s/t1/steps_c.json' --cache off --measure kerneltuner --budget 100 --strategy exhaustive --jobs 2 "
             "--t4 %s", KT_DATA, t4path);
    int rc = run(args);
    if (rc != 3) fail_msg("exit %d:\n%s\n%s", rc, out, err);
    char want[1024];
    snprintf(want, sizeof want, "validation: against the Default configuration UNROLL=0,STEPS=1\nvalidation stopped the tuning: 5 of the "
                                "first 8 configurations compared with the reference disagreed with it (of 120 configurations; the "
                                "rest were not run)\n%s\n", message);
    if (strcmp(out, want) != 0) fail_msg("expected\n%s\ngot\n%s", want, out);
    json_t *t4 = load(t4path), *x = json_object_get(t4, "x-kerntune"), *dj = json_object_get(x, "disagreement");
    const json_t *results = json_object_get(t4, "results");
    assert_int_equal(json_array_size(results), 8); /* validated: 8 of the budget's 100 */
    for (size_t i = 0; i < 8; i++) {
        const json_t *cfg = json_object_get(json_array_get(results, i), "configuration");
        json_int_t steps = json_integer_value(json_object_get(cfg, "STEPS"));
        assert_int_equal(json_integer_value(json_object_get(cfg, "UNROLL")), (json_int_t)i / 3);
        assert_string_equal(json_string_value(json_object_get(json_array_get(results, i), "invalidity")), steps == 1 ? "correct" : "correctness");
    }
    assert_string_equal(json_string_value(json_object_get(dj, "parameter")), "STEPS");
    assert_string_equal(json_string_value(json_object_get(dj, "message")), message);
    assert_int_equal(json_integer_value(json_object_get(dj, "compared")), 8);
    assert_int_equal(json_integer_value(json_object_get(dj, "disagreed")), 5);
    assert_string_equal(json_string_value(json_object_get(json_object_get(x, "reference"), "source")), "Default");
    json_decref(t4);

    /* --report is written too: the configurations compared, and why the tuning stopped */
    char report[256];
    snprintf(report, sizeof report, "%s/steps.html", tmpdir);
    snprintf(args, sizeof args, "tune '%s/t1/steps_c.json' --cache off --measure kerneltuner --budget 100 --strategy exhaustive --jobs 2 "
             "--report %s", KT_DATA, report);
    rc = run(args);
    if (rc != 3) fail_msg("exit %d:\n%s\n%s", rc, out, err);
    FILE *f = fopen(report, "r");
    assert_non_null(f);
    static char html[1 << 18];
    size_t n = fread(html, 1, sizeof html - 1, f);
    fclose(f);
    html[n] = '\0';
    char row[512];
    snprintf(row, sizeof row, "<td class=\"stopped\" id=\"stopped0\">%s</td>", message);
    if (strstr(html, row) == NULL) fail_msg("the report lacks %s", row);
    assert_non_null(strstr(html, "8 tried: 3 measured, 5 correctness"));

    snprintf(args, sizeof args, "tune '%s/t1/steps_c.json' --cache off --measure kerneltuner --budget 100 --strategy exhaustive --jobs 2 "
             "--json", KT_DATA);
    assert_int_equal(run(args), 3);
    json_t *s = doc();
    dj = json_object_get(s, "disagreement");
    assert_string_equal(json_string_value(json_object_get(s, "stopped")), "disagreement");
    assert_string_equal(json_string_value(json_object_get(dj, "parameter")), "STEPS");
    assert_string_equal(json_string_value(json_array_get(json_object_get(dj, "agreeing_values"), 0)), "1");
    assert_int_equal(json_array_size(json_object_get(dj, "agreeing_values")), 1);
    assert_string_equal(json_string_value(json_object_get(dj, "message")), message);
    assert_true(json_is_null(json_object_get(s, "best")));
    json_decref(s);

    /* as told: --define STEPS=1 tunes, every configuration agreeing */
    snprintf(args, sizeof args, "tune '%s/t1/steps_c.json' --cache off --measure kerneltuner --budget 10 --strategy exhaustive --jobs 2 "
             "--define STEPS=1 --json", KT_DATA);
    assert_int_equal(run(args), 0);
    s = doc();
    assert_int_equal(json_integer_value(json_object_get(s, "measured")), 10);
    assert_int_equal(json_integer_value(json_object_get(s, "failed")), 0);
    json_decref(s);
    remove_tmpdir();
}

/* A decision made with --validate off is recorded apart: a validated run on the same cache tunes
 * (and validates) instead of taking it, and a second unvalidated run takes it. */
static void test_unvalidated_decision_kept_apart(void **state) {
    (void)state;
    make_tmpdir();
    char args[2048], db[256];
    snprintf(db, sizeof db, "%s/cache.db", tmpdir);
    static const char *const runs[][2] = {{"--validate off", "measured"}, {"", "measured"}, {"--validate off", "cache"}, {"", "cache"}};
    for (size_t r = 0; r < 4; r++) {
        snprintf(args, sizeof args, "tune '%s/t1/consensus_c.json' --cache '%s' --measure kerneltuner --json %s", KT_DATA, db, runs[r][0]);
        int rc = run(args);
        if (rc != 0) fail_msg("run %zu: exit %d:\n%s\n%s", r, rc, out, err);
        json_t *s = doc();
        const char *source = json_string_value(json_object_get(s, "source"));
        if (source == NULL || strcmp(source, runs[r][1]) != 0)
            fail_msg("run %zu (%s): source %s, expected %s", r, runs[r][0], source ? source : "(none)", runs[r][1]);
        json_decref(s);
    }
    remove_tmpdir();
}

/* The parameter that changes the output varies slowest (first of the problem's parameters): in
 * enumeration order its first 40 configurations all agree with the reference, and the stop
 * would come after 81 of 120. A whole space walked under the stop goes in spread order, so it is
 * named within the first 10% of the space, and built as it goes: the stop spares the builds of
 * what it never admits. */
static void test_slow_parameter_named_early(void **state) {
    (void)state;
    char args[2048];
    snprintf(args, sizeof args, "tune '%s/t1/steps_slow_c.json' --cache off --measure kerneltuner --json", KT_DATA);
    int rc = run(args);
    if (rc != 3) fail_msg("exit %d:\n%s\n%s", rc, out, err);
    json_t *s = doc(), *dj = json_object_get(s, "disagreement");
    assert_string_equal(json_string_value(json_object_get(dj, "parameter")), "STEPS");
    json_int_t compared = json_integer_value(json_object_get(dj, "compared"));
    if (compared < 8 || compared > 12) fail_msg("%lld configurations compared before the stop; expected 8 to 12 (10%% of 120)", (long long)compared);
    assert_int_equal(json_integer_value(json_object_get(s, "configurations")), 120);
    /* nor was more built than what it compared (in waves of the build threads; the reference
     * too): without a budget, everything used to be compiled before the first comparison */
    json_int_t builds = json_integer_value(json_object_get(s, "builds")) + json_integer_value(json_object_get(s, "artifacts_found"));
    if (builds < compared || builds > compared + 4) fail_msg("%lld variants built for %lld compared", (long long)builds, (long long)compared);
    json_decref(s);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_consensus_outvotes_first),
        cmocka_unit_test(test_default_outside_values),
        cmocka_unit_test(test_validate_off),
        cmocka_unit_test(test_answer_file),
        cmocka_unit_test(test_parameter_changes_output),
        cmocka_unit_test(test_slow_parameter_named_early),
        cmocka_unit_test(test_unvalidated_decision_kept_apart),
    };
    return kt_run_cases(argc, argv, tests, NULL, NULL);
}
