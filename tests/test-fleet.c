/*
 * test-fleet.c - tuning spread over workers through Redis Streams (issue [14], part 2), with a
 * real redis-server on a loopback port, real `kerntune worker` processes and the real command:
 *  - a benchmark_hub problem replayed by 3 workers gives the T4 results of a local replay with
 *    the same seed: the same configurations in the same order, with the same runs;
 *  - the same with workers SIGKILLed mid-job 10 times (and replaced): every configuration is in
 *    the result exactly once, jobs were taken over, no job has a second result;
 *  - a real C problem on 2 workers of the host, with an OpenCL worker beside them: the host's
 *    workers measure it (the OpenCL one takes no job), crashes and a hang come back classified,
 *    the winner is right, and the cache holds a decision that a local run is served from;
 *  - validation's disagreement stop, the workers validating: stopped as a local run is;
 *  - a dead Redis, no live worker, and bad options: clear errors, nothing hangs.
 * Streaming and compile workers are test-fleet-build.c's.
 */
#define _GNU_SOURCE /* popen */
#include "fleet-common.h"

/* What a T4 result says of its configuration's measurement (not when or how long around it). */
static char *result_core(json_t *r) {
    json_t *core = json_pack("{s:O,s:O,s:O,s:O}", "configuration", json_object_get(r, "configuration"), "invalidity",
                             json_object_get(r, "invalidity"), "runtimes", json_object_get(json_object_get(r, "times"), "runtimes"),
                             "measurements", json_object_get(r, "measurements"));
    char *text = json_dumps(core, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
    json_decref(core);
    return text;
}

/* Asserts that two T4 files hold the same results in the same order; returns how many. */
static size_t assert_same_t4(const char *a_path, const char *b_path) {
    json_t *a = load_json(a_path), *b = load_json(b_path);
    json_t *ra = json_object_get(a, "results"), *rb = json_object_get(b, "results");
    assert_int_equal(json_array_size(ra), json_array_size(rb));
    for (size_t i = 0; i < json_array_size(ra); i++) {
        char *x = result_core(json_array_get(ra, i)), *y = result_core(json_array_get(rb, i));
        if (strcmp(x, y) != 0) fail_msg("result %zu differs:\n  local: %.400s\n  fleet: %.400s", i, x, y);
        free(x), free(y);
    }
    /* and each configuration once */
    for (size_t i = 0; i < json_array_size(rb); i++)
        for (size_t k = 0; k < i; k++)
            assert_false(json_equal(json_object_get(json_array_get(rb, i), "configuration"),
                                    json_object_get(json_array_get(rb, k), "configuration")));
    size_t n = json_array_size(ra);
    json_decref(a), json_decref(b);
    return n;
}

static void conv_paths(char *problem, size_t plen, char *rec, size_t rlen) {
    snprintf(problem, plen, "%s/kernels/convolution_milo.json", KT_HUB);
    snprintf(rec, rlen, "%s/results/convolution_milo/A4000_T4.json.gz", KT_HUB);
}

/* ---- a replay on 3 workers is the local replay ------------------------------------------------ */

static void replay_matches_local(void **state) {
    (void)state;
    char problem[512], rec[512];
    conv_paths(problem, sizeof problem, rec, sizeof rec);
    /* the sanitizer builds replay 1% (44 configurations: 22 and 29 s for 3% under ASan and
     * TSan), enough for three workers to race on the coordinator's streams */
    const char *opts = KT_TEST_LARGE ? "--seed 7 --budget 3% --jobs 6 --cache off --quiet" : "--seed 7 --budget 1% --jobs 6 --cache off --quiet";
    assert_int_equal(sh("'%s' tune '%s' --simulate '%s' %s --t4 %s/local.json", KT_CLI, problem, rec, opts, dir), 0);
    pid_t w[3];
    for (int i = 0; i < 3; i++) {
        char name[16];
        snprintf(name, sizeof name, "r%d", i);
        w[i] = start_worker(name, "");
    }
    await_worker("r0"), await_worker("r1"), await_worker("r2");
    assert_int_equal(sh("'%s' tune '%s' --simulate '%s' %s --t4 %s/fleet.json --workers %s --wait-workers 60 --json > %s/fleet.out", KT_CLI, problem, rec,
                        opts, dir, url, dir),
                     0);
    for (int i = 0; i < 3; i++) stop_worker(w[i]);
    char a[256], b[256];
    snprintf(a, sizeof a, "%s/local.json", dir);
    snprintf(b, sizeof b, "%s/fleet.json", dir);
    size_t n = assert_same_t4(a, b);
    assert_true(n >= (KT_TEST_LARGE ? 100u : 40u)); /* 3% (1%) of 4,362, and their failures */
    snprintf(a, sizeof a, "%s/fleet.out", dir);
    json_t *out = load_json(a), *fl = json_object_get(out, "fleet");
    assert_int_equal(json_integer_value(json_object_get(fl, "workers")), 3);
    assert_int_equal(json_integer_value(json_object_get(fl, "duplicate_results")), 0);
    assert_true(json_integer_value(json_object_get(fl, "jobs")) >= (json_int_t)n);
    json_decref(out);
    /* the workers each did some of it */
    for (int i = 0; i < 3; i++) {
        char log[256], text[4096] = "";
        snprintf(log, sizeof log, "%s/r%d.log", dir, i);
        FILE *f = fopen(log, "r");
        assert_non_null(f);
        size_t len = fread(text, 1, sizeof text - 1, f);
        text[len] = '\0';
        fclose(f);
        const char *at = strstr(text, "stopped after ");
        assert_non_null(at);
        assert_true(atol(at + 14) >= 1);
    }
}

/* ---- workers killed mid-job lose nothing, and measure nothing twice ---------------------------- */

static void killed_workers(void **state) {
    (void)state;
    char problem[512], rec[512];
    conv_paths(problem, sizeof problem, rec, sizeof rec);
    const char *opts = "--seed 11 --budget 2% --jobs 6 --cache off --quiet";
    assert_int_equal(sh("'%s' tune '%s' --simulate '%s' %s --t4 %s/local2.json", KT_CLI, problem, rec, opts, dir), 0);
    /* paced: each job takes a tenth of what the recording says (its build about 0.27 s), so that a
     * kill lands mid-job */
    const char *wopts = "--quiet --pace 0.1 --claim-timeout 1";
    pid_t w[3];
    for (int i = 0; i < 3; i++) {
        char name[16];
        snprintf(name, sizeof name, "k%d", i);
        w[i] = start_worker(name, wopts);
    }
    await_worker("k0"), await_worker("k1"), await_worker("k2");
    pid_t coord = fork();
    if (coord == 0) {
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "exec '%s' tune '%s' --simulate '%s' %s --t4 %s/fleet2.json --workers %s --json > %s/fleet2.out", KT_CLI,
                 problem, rec, opts, dir, url, dir);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    assert_true(coord > 0);
    char live[256];
    snprintf(live, sizeof live, "%s/fleet2.json", dir); /* written as results come: the run is going */
    await_file(live);
    struct timespec pause = {0, 600 * 1000 * 1000};
    int kills = 0, status = 0, next = 100;
    unsigned seed = 12345;
    while (kills < 10) {
        pid_t done = waitpid(coord, &status, WNOHANG);
        if (done == coord) break;
        int i = (int)(rand_r(&seed) % 3);
        assert_int_equal(kill(w[i], SIGKILL), 0);
        waitpid(w[i], NULL, 0);
        kills++;
        char name[16];
        snprintf(name, sizeof name, "k%d", next++);
        w[i] = start_worker(name, wopts);
        nanosleep(&pause, NULL);
    }
    if (kills == 10) assert_int_equal(waitpid(coord, &status, 0), coord);
    for (int i = 0; i < 3; i++) stop_worker(w[i]);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_int_equal(kills, 10); /* the run outlasted ten kills */
    char a[256], b[256];
    snprintf(a, sizeof a, "%s/local2.json", dir);
    snprintf(b, sizeof b, "%s/fleet2.json", dir);
    assert_same_t4(a, b);
    snprintf(a, sizeof a, "%s/fleet2.out", dir);
    json_t *out = load_json(a), *fl = json_object_get(out, "fleet");
    assert_int_equal(json_integer_value(json_object_get(fl, "duplicate_results")), 0); /* no job measured twice */
    assert_true(json_integer_value(json_object_get(fl, "taken_over")) >= 1);        /* killed workers' jobs went on */
    json_decref(out);
}

/* ---- Redis restarted mid-run, without its data: the run goes on and loses nothing ------------ */

static void redis_restarted(void **state) {
    (void)state;
    char problem[512], rec[512];
    conv_paths(problem, sizeof problem, rec, sizeof rec);
    const char *opts = "--seed 2 --budget 40 --strategy random --jobs 4 --cache off --quiet";
    assert_int_equal(sh("'%s' tune '%s' --simulate '%s' %s --t4 %s/local3.json", KT_CLI, problem, rec, opts, dir), 0);
    pid_t w = start_worker("rs", "--quiet --pace 0.1 --batch 1");
    await_worker("rs");
    pid_t coord = fork();
    if (coord == 0) {
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "exec '%s' tune '%s' --simulate '%s' %s --t4 %s/fleet3.json --workers %s --json > %s/fleet3.out", KT_CLI,
                 problem, rec, opts, dir, url, dir);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    assert_true(coord > 0);
    char live[256];
    snprintf(live, sizeof live, "%s/fleet3.json", dir);
    await_file(live); /* the run is going */
    redis_stop(&server); /* the jobs, the group and the run's hash are gone with it */
    struct timespec pause = {1, 0};
    nanosleep(&pause, NULL);
    server = redis_start_on(dir, port);
    assert_true(server > 0);
    int status = 0;
    pid_t done = 0;
    for (int i = 0; i < 1200 && done == 0; i++) { /* 120 s: a run that stalls fails, it does not hang the test */
        done = waitpid(coord, &status, WNOHANG);
        if (done == 0) nanosleep(&(struct timespec){0, 100 * 1000 * 1000}, NULL);
    }
    if (done == 0) {
        kill(coord, SIGKILL);
        waitpid(coord, NULL, 0);
    }
    stop_worker(w);
    if (done == 0) fail_msg("the run did not finish within 120 s of Redis coming back");
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    char a[256], b[256];
    snprintf(a, sizeof a, "%s/local3.json", dir);
    snprintf(b, sizeof b, "%s/fleet3.json", dir);
    assert_same_t4(a, b);
}

/* ---- a real problem: the host's workers, not the OpenCL one; failures classified; the cache ----- */

static void real_problem(void **state) {
    (void)state;
    char problem[512];
    snprintf(problem, sizeof problem, "%s/t1/crashy_c.json", KT_DATA);
    /* a local run first: how this machine classifies each failure (under a sanitizer, allocating
     * until memory runs out may time out instead of crashing) */
    char local_t4[256];
    snprintf(local_t4, sizeof local_t4, "%s/crashy-local.json", dir);
    assert_int_equal(sh("'%s' tune '%s' --timeout 2 --cache off --quiet --t4 %s", KT_CLI, problem, local_t4), 0);
    /* device 0 is the host (C); the OpenCL device (PoCL) is another model, for another language */
    pid_t w[3] = {start_worker("c0", "--device 0 --claim-timeout 5"), start_worker("c1", "--device 0 --claim-timeout 5"),
                  start_worker("cl", "--device 1 --claim-timeout 5")};
    await_worker("c0"), await_worker("c1"), await_worker("cl");
    /* on a terminal (script gives it one): the progress line */
    assert_int_equal(sh("script -qefc \"'%s' tune '%s' --timeout 2 --cache %s --t4 %s/crashy.json --workers %s --json > %s/crashy.out\" "
                        "/dev/null > %s/crashy.tty 2>&1",
                        KT_CLI, problem, db, dir, url, dir, dir),
                     0);
    for (int i = 0; i < 3; i++) stop_worker(w[i]);
    char path[256];
    snprintf(path, sizeof path, "%s/crashy.out", dir);
    json_t *out = load_json(path);
    json_t *best = json_object_get(json_object_get(out, "best"), "configuration");
    assert_int_equal(json_integer_value(json_object_get(best, "MODE")), 0);
    json_t *fl = json_object_get(out, "fleet");
    assert_int_equal(json_integer_value(json_object_get(out, "measured")), 2);
    assert_int_equal(json_integer_value(json_object_get(out, "failed")), 5);
    assert_int_equal(json_integer_value(json_object_get(fl, "workers")), 2);
    assert_int_equal(json_integer_value(json_object_get(fl, "workers_left_out")), 1);
    json_decref(out);
    /* each failure as the workers saw it, which is how a local run sees it: crashes (null write,
     * abort, out of bounds) and a hang (the endless loop) */
    snprintf(path, sizeof path, "%s/crashy.json", dir);
    json_t *t4 = load_json(path), *res = json_object_get(t4, "results"), *lt4 = load_json(local_t4),
           *lres = json_object_get(lt4, "results");
    assert_int_equal(json_array_size(res), 7);
    assert_int_equal(json_array_size(lres), 7);
    for (size_t i = 0; i < 7; i++) {
        json_t *r = json_array_get(res, i);
        json_int_t mode = json_integer_value(json_object_get(json_object_get(r, "configuration"), "MODE"));
        const char *inv = json_string_value(json_object_get(r, "invalidity")), *diag = json_string_value(json_object_get(r, "diagnostic"));
        const char *local = NULL;
        for (size_t k = 0; k < 7; k++)
            if (json_integer_value(json_object_get(json_object_get(json_array_get(lres, k), "configuration"), "MODE")) == mode)
                local = json_string_value(json_object_get(json_array_get(lres, k), "invalidity"));
        assert_non_null(local);
        assert_string_equal(inv, local);
        if (mode != 5) assert_string_equal(inv, mode == 0 || mode == 6 ? "correct" : mode == 3 ? "timeout" : "runtime");
        if (mode == 1) assert_non_null(strstr(diag, "Segmentation fault"));
        if (mode == 2) assert_non_null(strstr(diag, "Aborted"));
    }
    json_decref(t4), json_decref(lt4);
    /* the OpenCL worker took none of it */
    char log[256], text[4096] = "";
    snprintf(log, sizeof log, "%s/cl.log", dir);
    FILE *f = fopen(log, "r");
    assert_non_null(f);
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    assert_non_null(strstr(text, "stopped after 0 jobs"));
    /* the progress line, on the terminal */
    snprintf(log, sizeof log, "%s/crashy.tty", dir);
    f = fopen(log, "r");
    assert_non_null(f);
    n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    assert_non_null(strstr(text, "queued"));
    assert_non_null(strstr(text, "running"));
    assert_non_null(strstr(text, "done"));
    assert_non_null(strstr(text, "failed"));
    /* the cache holds the fleet's decision: a local run on this machine measures nothing */
    snprintf(path, sizeof path, "%s/crashy-local.out", dir);
    assert_int_equal(sh("'%s' tune '%s' --timeout 2 --cache %s --json > %s", KT_CLI, problem, db, path), 0);
    out = load_json(path);
    assert_string_equal(json_string_value(json_object_get(out, "source")), "cache");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(json_object_get(out, "best"), "configuration"), "MODE")), 0);
    json_decref(out);
}

/* Validation's disagreement stop with the workers validating: the coordinator hears their
 * verdicts through its units and stops the tuning as a local run does (exit 3), naming the
 * parameter that changes the output (tests/data/t1/steps_c.json: STEPS). */
static void disagreement_stops(void **state) {
    (void)state;
    char problem[512], path[256];
    snprintf(problem, sizeof problem, "%s/t1/steps_c.json", KT_DATA);
    pid_t w[2] = {start_worker("s0", "--device 0 --claim-timeout 5"), start_worker("s1", "--device 0 --claim-timeout 5")};
    await_worker("s0"), await_worker("s1");
    snprintf(path, sizeof path, "%s/steps.out", dir);
    int rc = sh("'%s' tune '%s' --cache off --measure kerneltuner --budget 100 --strategy exhaustive --workers %s --json > %s", KT_CLI,
                problem, url, path);
    for (int i = 0; i < 2; i++) stop_worker(w[i]);
    assert_int_equal(rc, 3);
    json_t *out = load_json(path), *dj = json_object_get(out, "disagreement");
    assert_string_equal(json_string_value(json_object_get(out, "stopped")), "disagreement");
    assert_string_equal(json_string_value(json_object_get(dj, "parameter")), "STEPS");
    json_int_t compared = json_integer_value(json_object_get(dj, "compared"));
    if (compared < 8 || compared >= 100) fail_msg("%lld configurations compared before the stop", (long long)compared);
    assert_true(2 * json_integer_value(json_object_get(dj, "disagreed")) > compared);
    json_decref(out);
}

/* ---- errors ------------------------------------------------------------------------------------- */

static void errors(void **state) {
    (void)state;
    char problem[512], out[256];
    snprintf(problem, sizeof problem, "%s/t1/crashy_c.json", KT_DATA);
    snprintf(out, sizeof out, "%s/err.txt", dir);
    /* nobody listens there: an error naming it, at once */
    int dead = redis_free_port();
    time_t t0 = time(NULL);
    assert_int_equal(sh("'%s' tune '%s' --cache off --workers redis://127.0.0.1:%d > %s 2>&1", KT_CLI, problem, dead, out), 1);
    assert_true(time(NULL) - t0 < 10);
    char text[2048] = "";
    FILE *f = fopen(out, "r");
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    assert_non_null(strstr(text, "--workers redis://127.0.0.1:"));
    assert_non_null(strstr(text, "cannot reach Redis"));
    /* a live Redis without workers: said after --wait-workers */
    assert_int_equal(sh("'%s' tune '%s' --cache off --workers %s --wait-workers 0.5 > %s 2>&1", KT_CLI, problem, url, out), 1);
    f = fopen(out, "r");
    n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    assert_non_null(strstr(text, "no live worker"));
    /* usage errors */
    assert_int_equal(sh("'%s' tune '%s' --workers localhost:6379 > /dev/null 2>&1", KT_CLI, problem), 2);
    assert_int_equal(sh("'%s' tune '%s' --workers %s --device 0 > /dev/null 2>&1", KT_CLI, problem, url), 2);
    assert_int_equal(sh("'%s' worker > /dev/null 2>&1", KT_CLI), 2);
    assert_int_equal(sh("'%s' worker %s --claim-timeout 0 > /dev/null 2>&1", KT_CLI, url), 2);
    assert_int_equal(sh("'%s' worker %s --device 99 > /dev/null 2>&1", KT_CLI, url), 1);
    assert_int_equal(sh("'%s' worker --help | grep -q claim-timeout", KT_CLI), 0);
    /* --json: stdout is one JSON document, the error too */
    assert_int_equal(sh("'%s' worker --json > %s 2>/dev/null", KT_CLI, out), 2);
    json_t *doc = load_json(out);
    assert_non_null(strstr(json_string_value(json_object_get(doc, "error")), "no Redis URL"));
    json_decref(doc);
    assert_int_equal(sh("'%s' worker redis://127.0.0.1:%d --max-jobs 1 > /dev/null 2>&1", KT_CLI, dead), 1);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(errors),
        cmocka_unit_test(replay_matches_local),
        cmocka_unit_test(killed_workers),
        cmocka_unit_test(redis_restarted),
        cmocka_unit_test(real_problem),
        cmocka_unit_test(disagreement_stops),
    };
    return kt_run_cases(argc, argv, tests, setup, teardown);
}
