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
 *  - a streaming worker measures other jobs while one job's build hangs, and builds every one;
 *  - compile workers: an artifact damaged on its way fails its digest and is built again by the
 *    measuring worker; a compile worker killed mid-build has its job taken over, one whose
 *    compiler hangs gives the build up after --build-timeout; nothing lost;
 *  - a dead Redis, no live worker, and bad options: clear errors, nothing hangs.
 */
#define _GNU_SOURCE /* popen */
#include "helpers.h"
#include "redis-server.h"

#include <jansson.h>

#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

static char dir[64], db[128], url[64];
static int port;
static pid_t server;

static int setup(void **state) {
    (void)state;
    if (temp_cache_dir(dir, sizeof dir, db, sizeof db, "fleet") != 0) return -1;
    server = redis_start(dir, &port);
    if (server < 0) {
        fprintf(stderr, "redis-server did not start (is it installed? scripts/install-deps.sh)\n");
        return -1;
    }
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    redis_stop(&server);
    return remove_tree(dir);
}

/* Starts `kerntune worker URL ARGS...` (its output in dir/NAME.log); its pid. */
static pid_t start_worker(const char *name, const char *extra) {
    pid_t pid = fork();
    if (pid == 0) {
        char log[256], cmd[1024];
        snprintf(log, sizeof log, "%s/%s.log", dir, name);
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) dup2(fd, 1), dup2(fd, 2);
        snprintf(cmd, sizeof cmd, "exec '%s' worker %s --name %s %s", KT_CLI, url, name, extra);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    assert_true(pid > 0);
    return pid;
}

/* Waits (up to 120 s: a sanitizer build starts slowly) until worker name is announced. */
static void await_worker(const char *name) {
    redisContext *c = redis_client(port);
    assert_non_null(c);
    bool there = false;
    for (int i = 0; i < 1200 && !there; i++) {
        redisReply *r = redisCommand(c, "HEXISTS kerntune:fleet:workers %s", name);
        there = r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
        if (r) freeReplyObject(r);
        if (!there) {
            struct timespec ts = {0, 100 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    redisFree(c);
    if (!there) fail_msg("worker %s did not announce itself within 120 s", name);
}

/* Waits (up to 120 s) until path exists. */
static void await_file(const char *path) {
    struct stat st;
    for (int i = 0; i < 1200 && stat(path, &st) != 0; i++) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(stat(path, &st), 0);
}

static void stop_worker(pid_t pid) {
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
}

static json_t *load_json(const char *path) {
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    if (j == NULL) fail_msg("%s: %s (line %d)", path, e.text, e.line);
    return j;
}

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
    const char *opts = "--seed 7 --budget 3% --jobs 6 --cache off --quiet";
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
    assert_true(n >= 100); /* 3% of 4,362, and their failures */
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

/* Writes an executable shell script. */
static void write_script(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(chmod(path, 0755), 0);
}

/* Starts `[ENV] kerntune worker URL --name NAME ARGS --json` with its JSON document in
 * dir/NAME.json and its messages in dir/NAME.log; its pid. */
static pid_t start_json_worker(const char *name, const char *env, const char *extra) {
    pid_t pid = fork();
    if (pid == 0) {
        char out[256], log[256], cmd[2048];
        snprintf(out, sizeof out, "%s/%s.json", dir, name);
        snprintf(log, sizeof log, "%s/%s.log", dir, name);
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644), fe = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) dup2(fd, 1);
        if (fe >= 0) dup2(fe, 2);
        snprintf(cmd, sizeof cmd, "%s exec '%s' worker %s --name %s %s --json", env ? env : "", KT_CLI, url, name, extra);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    assert_true(pid > 0);
    return pid;
}

/* Starts `kerntune tune PROBLEM --workers URL ARGS` in the background; its pid. */
static pid_t start_tune(const char *problem, const char *args) {
    pid_t pid = fork();
    if (pid == 0) {
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "exec '%s' tune '%s' --workers %s %s", KT_CLI, problem, url, args);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    assert_true(pid > 0);
    return pid;
}

static int wait_exit(pid_t pid) {
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The stream a worker announced (its device model's jobs). */
static void announced_stream(const char *name, char *out, size_t len) {
    redisContext *c = redis_client(port);
    assert_non_null(c);
    redisReply *r = redisCommand(c, "HGET kerntune:fleet:workers %s", name);
    assert_true(r && r->type == REDIS_REPLY_STRING);
    json_t *w = json_loads(r->str, 0, NULL);
    snprintf(out, len, "%s", json_string_value(json_object_get(w, "stream")));
    json_decref(w);
    freeReplyObject(r);
    redisFree(c);
}

/* Asserts that dir/NAME (a T4 file) holds the 8 configurations of stream_c.json, each once and
 * correct. */
static void assert_stream_t4(const char *name) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    json_t *t4 = load_json(path), *res = json_object_get(t4, "results");
    assert_int_equal(json_array_size(res), 8);
    bool seen[8] = {false};
    for (size_t i = 0; i < 8; i++) {
        json_t *r = json_array_get(res, i);
        json_int_t v = json_integer_value(json_object_get(json_object_get(r, "configuration"), "V"));
        assert_true(v >= 0 && v < 8 && !seen[v]);
        seen[v] = true;
        assert_string_equal(json_string_value(json_object_get(r, "invalidity")), "correct");
    }
    json_decref(t4);
}

/* A streaming worker measures while it builds: the build of V=0 waits (a compiler wrapper's
 * gate) until V=7 has been compiled, which only a worker that goes on taking, building and
 * measuring other jobs while one build hangs ever gets to (the coordinator keeps as many jobs on
 * the stream as the worker holds: the worker would wait for V=0's build with every job it was
 * given, and the gate would time out, as it does in batches). Every configuration comes back
 * measured and correct, built by the build-ahead threads. */
static void streaming(void **state) {
    (void)state;
    char cc[256], gate[256], timed_out[256], problem[512], text[2048], env[512], args[512];
    snprintf(cc, sizeof cc, "%s/cc-gate", dir);
    snprintf(gate, sizeof gate, "%s/gate", dir);
    snprintf(timed_out, sizeof timed_out, "%s/gate-timed-out", dir);
    snprintf(text, sizeof text,
             "#!/bin/sh\n"
             "for a in \"$@\"; do case \"$a\" in *.c)\n"
             "  if grep -q '^#define V 7$' \"$a\"; then touch '%s'; fi\n"
             "  if grep -q '^#define V 0$' \"$a\"; then\n"
             "    i=0; while [ ! -e '%s' ]; do i=$((i+1)); if [ $i -gt 600 ]; then touch '%s'; break; fi; sleep 0.1; done\n"
             "  fi;;\n"
             "esac; done\n"
             "exec cc \"$@\"\n",
             gate, gate, timed_out);
    write_script(cc, text);
    snprintf(problem, sizeof problem, "%s/t1/stream_c.json", KT_DATA);
    snprintf(env, sizeof env, "KERNTUNE_CC='%s'", cc);
    pid_t pid = start_json_worker("sw", env, "--device 0 --stream on --build-threads 3 --quiet");
    await_worker("sw");
    snprintf(args, sizeof args, "--cache off --quiet --t4 '%s/stream.json'", dir);
    assert_int_equal(wait_exit(start_tune(problem, args)), 0);
    stop_worker(pid);
    struct stat st;
    assert_int_equal(stat(gate, &st), 0);
    assert_int_not_equal(stat(timed_out, &st), 0);
    assert_stream_t4("stream.json");
    char path[256];
    snprintf(path, sizeof path, "%s/sw.json", dir);
    json_t *w = load_json(path);
    assert_true(json_is_true(json_object_get(w, "streaming")));
    assert_true(json_integer_value(json_object_get(w, "built_ahead")) >= 8);
    assert_true(json_integer_value(json_object_get(w, "jobs")) >= 8);
    json_decref(w);
}

/* A compile worker builds every job and hands the artifacts on; their bytes are then damaged in
 * Redis before the measuring worker (stopped meanwhile) reads them: it finds each failing its
 * digest, loads none, builds the jobs itself, and every configuration comes back correct. */
static void artifact_corrupted(void **state) {
    (void)state;
    char problem[512], stream[96];
    snprintf(problem, sizeof problem, "%s/t1/stream_c.json", KT_DATA);
    char env_m[300], env_c[300]; /* artifact directories of their own, as on two machines */
    snprintf(env_m, sizeof env_m, "KERNTUNE_ARTIFACTS='%s/artifacts-dm'", dir);
    snprintf(env_c, sizeof env_c, "KERNTUNE_ARTIFACTS='%s/artifacts-cw'", dir);
    pid_t m = start_json_worker("dm", env_m, "--device 0 --claim-timeout 5");
    pid_t c = start_json_worker("cw", env_c, "--device 0 --build-only --build-threads 2 --claim-timeout 5");
    await_worker("dm"), await_worker("cw");
    announced_stream("dm", stream, sizeof stream);
    kill(m, SIGSTOP); /* announced and live for the coordinator's start, but measuring nothing */
    usleep(1200000);  /* a read it had waiting when stopped ends (BLOCK 1000): it takes no job of the run */
    char args[512];
    snprintf(args, sizeof args, "--cache off --quiet --t4 '%s/corrupt.json'", dir);
    pid_t t = start_tune(problem, args);
    redisContext *rc = redis_client(port);
    assert_non_null(rc);
    long long forwarded = 0;
    for (int i = 0; i < 1200 && forwarded < 8; i++) { /* every configuration built and moved to the jobs stream */
        redisReply *r = redisCommand(rc, "XLEN %s", stream);
        forwarded = r && r->type == REDIS_REPLY_INTEGER ? r->integer : 0;
        if (r) freeReplyObject(r);
        if (forwarded < 8) usleep(100000);
    }
    assert_true(forwarded >= 8);
    redisReply *keys = redisCommand(rc, "KEYS kerntune:fleet:blob:*");
    assert_true(keys && keys->type == REDIS_REPLY_ARRAY && keys->elements >= 8);
    for (size_t i = 0; i < keys->elements; i++) {
        redisReply *r = redisCommand(rc, "SET %s %s", keys->element[i]->str, "not the artifact");
        assert_true(r && r->type == REDIS_REPLY_STATUS);
        freeReplyObject(r);
    }
    freeReplyObject(keys);
    redisFree(rc);
    kill(m, SIGCONT);
    assert_int_equal(wait_exit(t), 0);
    stop_worker(m), stop_worker(c);
    char path[256];
    assert_stream_t4("corrupt.json");
    snprintf(path, sizeof path, "%s/dm.json", dir);
    json_t *w = load_json(path);
    /* every damaged artifact it read was rejected: all 8, or 7 when it built the Default (V=1)
     * as a batch's reference before V=1's own job came, which then finds it built */
    assert_true(json_integer_value(json_object_get(w, "artifacts_rejected")) >= 7);
    assert_int_equal(json_integer_value(json_object_get(w, "artifacts_received")), 0);
    json_decref(w);
    snprintf(path, sizeof path, "%s/cw.json", dir);
    w = load_json(path);
    assert_true(json_is_true(json_object_get(w, "build_only")));
    assert_true(json_integer_value(json_object_get(w, "artifacts_handed_on")) >= 8);
    json_decref(w);
}

/* A compile worker killed while it builds (its compiler hangs on V=0): its job stays pending on
 * the build stream, the measuring worker takes it over after the claim timeout and builds it
 * itself; every configuration comes back correct, each once. */
static void compile_worker_killed(void **state) {
    (void)state;
    char problem[512], cc[256], hung[256], env[512], text[1024];
    snprintf(problem, sizeof problem, "%s/t1/stream_c.json", KT_DATA);
    snprintf(cc, sizeof cc, "%s/cc-hang", dir);
    snprintf(hung, sizeof hung, "%s/hung", dir);
    snprintf(text, sizeof text,
             "#!/bin/sh\n"
             "for a in \"$@\"; do case \"$a\" in *.c)\n"
             "  if grep -q '^#define V 0$' \"$a\"; then touch '%s'; i=0; while [ $i -lt 600 ] && kill -0 $PPID 2>/dev/null; do i=$((i+1)); sleep 0.1; done; exit 1; fi;;\n"
             "esac; done\n"
             "exec cc \"$@\"\n",
             hung);
    write_script(cc, text);
    snprintf(env, sizeof env, "KERNTUNE_CC='%s' KERNTUNE_ARTIFACTS='%s/artifacts-kc'", cc, dir);
    char env_m[300];
    snprintf(env_m, sizeof env_m, "KERNTUNE_ARTIFACTS='%s/artifacts-km'", dir);
    pid_t m = start_json_worker("km", env_m, "--device 0 --claim-timeout 2");
    pid_t c = start_json_worker("kc", env, "--device 0 --build-only --build-threads 2 --claim-timeout 2");
    await_worker("km"), await_worker("kc");
    kill(m, SIGSTOP); /* until the compile worker hangs: so it, not the measuring worker, takes V=0 */
    usleep(1200000);  /* (a read the measuring worker had waiting when stopped ends first) */
    char args[512];
    snprintf(args, sizeof args, "--cache off --quiet --t4 '%s/killed-cw.json'", dir);
    pid_t t = start_tune(problem, args);
    await_file(hung);
    kill(c, SIGKILL);
    waitpid(c, NULL, 0);
    kill(m, SIGCONT);
    assert_int_equal(wait_exit(t), 0);
    stop_worker(m);
    assert_stream_t4("killed-cw.json");
}

/* A compile worker gives a build up after --build-timeout: its compiler hangs on V=0 (for 600 s,
 * longer than ctest lets this test take, while the compile worker renews its claim on the job),
 * the compile worker stops it after 1 s and moves the job on unbuilt, and the measuring worker
 * builds it itself; every configuration comes back correct, and the compile worker lives on. */
static void compile_worker_gives_up(void **state) {
    (void)state;
    char problem[512], cc[256], hung[256], env[512], env_m[300], text[1024], args[512];
    snprintf(problem, sizeof problem, "%s/t1/stream_c.json", KT_DATA);
    snprintf(cc, sizeof cc, "%s/cc-hang-long", dir);
    snprintf(hung, sizeof hung, "%s/hung-long", dir);
    snprintf(text, sizeof text,
             "#!/bin/sh\n"
             "for a in \"$@\"; do case \"$a\" in *.c)\n"
             "  if grep -q '^#define V 0$' \"$a\"; then touch '%s'; i=0; while [ $i -lt 6000 ] && kill -0 $PPID 2>/dev/null; do i=$((i+1)); sleep 0.1; done; exit 1; fi;;\n"
             "esac; done\n"
             "exec cc \"$@\"\n",
             hung);
    write_script(cc, text);
    snprintf(env, sizeof env, "KERNTUNE_CC='%s' KERNTUNE_ARTIFACTS='%s/artifacts-gc'", cc, dir);
    snprintf(env_m, sizeof env_m, "KERNTUNE_ARTIFACTS='%s/artifacts-gm'", dir);
    pid_t m = start_json_worker("gm", env_m, "--device 0 --claim-timeout 5");
    pid_t c = start_json_worker("gc", env, "--device 0 --build-only --build-threads 2 --build-timeout 1 --claim-timeout 5");
    await_worker("gm"), await_worker("gc");
    kill(m, SIGSTOP); /* until the compile worker hangs: so it, not the measuring worker, takes V=0 */
    usleep(1200000);
    snprintf(args, sizeof args, "--cache off --quiet --t4 '%s/gave-up.json'", dir);
    pid_t t = start_tune(problem, args);
    await_file(hung);
    kill(m, SIGCONT);
    assert_int_equal(wait_exit(t), 0);
    assert_int_equal(kill(c, 0), 0); /* the compile worker lives on */
    stop_worker(m), stop_worker(c);
    assert_stream_t4("gave-up.json");
    char path[256];
    snprintf(path, sizeof path, "%s/gc.json", dir);
    json_t *w = load_json(path);
    assert_true(json_is_true(json_object_get(w, "build_only")));
    /* V=0 among them, moved on unbuilt: the compile worker held it, renewing its claim, until it gave
     * the build up (nothing else could have let the tuning end within ctest's limit) */
    assert_true(json_integer_value(json_object_get(w, "jobs")) >= 1);
    json_decref(w);
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
        cmocka_unit_test(streaming),
        cmocka_unit_test(artifact_corrupted),
        cmocka_unit_test(compile_worker_killed),
        cmocka_unit_test(compile_worker_gives_up),
    };
    return kt_run_cases(argc, argv, tests, setup, teardown);
}
