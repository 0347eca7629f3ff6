/*
 * test-fleet-build.c - a fleet's builds (issue [21]), with a real redis-server on a loopback
 * port, real `kerntune worker` processes and the real command:
 *  - a streaming worker measures other jobs while one job's build hangs, and builds every one;
 *  - compile workers: an artifact damaged on its way fails its digest and is built again by the
 *    measuring worker; a compile worker killed mid-build has its job taken over, one whose
 *    compiler hangs gives the build up after --build-timeout; nothing lost.
 */
#define _GNU_SOURCE /* popen */
#include "fleet-common.h"

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

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(streaming),
        cmocka_unit_test(artifact_corrupted),
        cmocka_unit_test(compile_worker_killed),
        cmocka_unit_test(compile_worker_gives_up),
    };
    return kt_run_cases(argc, argv, tests, setup, teardown);
}
