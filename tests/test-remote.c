/*
 * test-remote.c - the fleet's shared decision cache on a real redis-server, which the test
 * starts on a loopback port in a temporary directory and stops (issue [14], shared decisions):
 *  - read-through and write-through between two contexts in two processes, each with its own
 *    local cache: the second measures nothing, and keeps the decision locally;
 *  - a forged entry (wrong signature) and poisoned ones (signed, but naming a candidate the op
 *    does not have, or a configuration not in its space) are ignored, counted, never launched,
 *    and the key measured;
 *  - Redis killed mid-run, or hung (stopped): calls go on, decided locally, within a bounded time;
 *  - two processes missing one key at once: one tunes it, the other takes its result.
 * The op: (out: i32 buffer, n: i64) keyed by n; "fast" is 10x faster than "slow" by design.
 */
#include "helpers.h"
#include "redis-server.h"

#include <kerntune/cache.h>
#include <kerntune/decision.h>
#include <kerntune/measure.h>
#include <kerntune/variants.h>

#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <jansson.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>

static char dir[64], db[128], url[64];
static int port;
static pid_t server;
static int32_t buf[16];
#define ARGS(n) ((kt_arg[]){kt_arg_buf(buf, sizeof buf), kt_arg_i64(n)})
static const char secret[] = "the fleet's shared secret";

static redisContext *client(void) { return redis_client(port); }

static void start_server(void) {
    server = redis_start(dir, &port);
    if (server < 0) fail_msg("redis-server did not start (is it installed? scripts/install-deps.sh)");
}

static void stop_server(void) { redis_stop(&server); }

static int setup(void **state) {
    (void)state;
    if (temp_cache_dir(dir, sizeof dir, db, sizeof db, "remote") != 0) return -1;
    start_server();
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    stop_server();
    return remove_tree(dir);
}

/* slow also sleeps 20 ms more than fast: ten times the work alone is tens of microseconds,
 * which one preempted run on a loaded machine can outweigh */
static cand fast = {.id = 1, .work = 1}, slow = {.id = 2, .work = 10};

/* A context on the local cache file name (in dir) and the test's Redis, whose calls may take 10
 * s: at the default 200 ms a busy machine (the test beside two CPU hogs) can make a live Redis
 * look down, and the op then decides locally where the test expects the shared answer. */
static kt_context *ctx_with(const char *local, bool remote) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, local);
    kt_context *ctx = test_context(3);
    ok(kt_context_set_cache(ctx, path));
    if (remote) {
        ok(kt_context_set_remote(ctx, url));
        ok(kt_context_set_remote_key(ctx, secret, strlen(secret)));
        ok(kt_context_set_remote_timeout(ctx, 10));
    }
    return ctx;
}

static kt_op *pair_op(kt_context *ctx, unsigned sleep_ms) {
    kt_op *op = test_op(ctx, "shared");
    fast.sleep_ms = sleep_ms, slow.sleep_ms = sleep_ms + 20;
    ok(kt_op_add_native(op, "fast", cand_fn, &fast));
    ok(kt_op_add_native(op, "slow", cand_fn, &slow));
    return op;
}

static kt_decision_source source_of(kt_op *op, int64_t n) {
    const kt_decision *d = NULL;
    ok(kt_op_decision(op, ARGS(n), 2, &d));
    return kt_decision_source_of(d);
}

/* Tunes n in a child process with its own local cache (and the remote); returns when it ended. */
static void tune_in_child(const char *local, int64_t n) {
    pid_t pid = fork();
    if (pid == 0) {
        kt_context *ctx = ctx_with(local, true);
        kt_op *op = pair_op(ctx, 0);
        int bad = kt_op_call(op, ARGS(n), 2) != KT_OK || source_of(op, n) != KT_SOURCE_MEASURED;
        kt_context_destroy(ctx);
        _exit(bad);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void test_read_and_write_through(void **state) {
    (void)state;
    tune_in_child("a.db", 64);
    kt_context *ctx = ctx_with("b.db", true);
    kt_op *op = pair_op(ctx, 0);
    buf[0] = 0;
    ok(kt_op_call(op, ARGS(64), 2));
    assert_int_equal(buf[0], 1); /* fast, as the other process measured */
    assert_int_equal(source_of(op, 64), KT_SOURCE_REMOTE);
    assert_int_equal(kt_op_measured_runs(op), 0);
    assert_int_equal(kt_context_remote_hits(ctx), 1);
    kt_context_destroy(ctx);
    /* kept locally: without the remote, the local cache answers */
    ctx = ctx_with("b.db", false);
    op = pair_op(ctx, 0);
    ok(kt_op_call(op, ARGS(64), 2));
    assert_int_equal(source_of(op, 64), KT_SOURCE_CACHE);
    kt_context_destroy(ctx);
}

/* The one value the test's Redis holds for a decision (the only "kerntune:d:" key). */
static char *only_value(char *key, size_t keylen) {
    redisContext *c = client();
    assert_non_null(c);
    redisReply *r = redisCommand(c, "KEYS kerntune:d:*");
    assert_true(r && r->type == REDIS_REPLY_ARRAY && r->elements == 1);
    snprintf(key, keylen, "%s", r->element[0]->str);
    freeReplyObject(r);
    r = redisCommand(c, "GET %s", key);
    assert_true(r && r->type == REDIS_REPLY_STRING);
    char *v = strdup(r->str);
    freeReplyObject(r);
    redisFree(c);
    return v;
}

static void set_value(const char *key, const char *value) {
    redisContext *c = client();
    redisReply *r = redisCommand(c, "SET %s %s", key, value);
    assert_true(r && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    redisFree(c);
}

/* Signs text as the library does: 64 hex digits of HMAC-SHA256, a space, the text. */
static char *signed_value(const char *text) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    HMAC(EVP_sha256(), secret, (int)strlen(secret), (const unsigned char *)text, strlen(text), md, &n);
    char *v = malloc(strlen(text) + 66);
    for (unsigned i = 0; i < 32; i++) sprintf(v + 2 * i, "%02x", md[i]);
    v[64] = ' ';
    strcpy(v + 65, text);
    return v;
}

static void expect_rejected_then_measured(const char *local) {
    kt_context *ctx = ctx_with(local, true);
    kt_op *op = pair_op(ctx, 0);
    buf[0] = 0;
    ok(kt_op_call(op, ARGS(64), 2));
    assert_int_equal(buf[0], 1);
    assert_int_equal(source_of(op, 64), KT_SOURCE_MEASURED);
    assert_true(kt_context_remote_rejected(ctx) >= 1); /* each time it was read */
    assert_int_equal(kt_context_remote_hits(ctx), 0);
    kt_context_destroy(ctx);
}

static void test_forged_and_poisoned(void **state) {
    (void)state;
    tune_in_child("a.db", 64);
    char key[128];
    char *good = only_value(key, sizeof key);
    /* forged: the same text, a signature made without the secret */
    char *forged = strdup(good);
    memset(forged, '0', 64);
    set_value(key, forged);
    expect_rejected_then_measured("b.db"); /* (its own tuning republished a good entry) */
    /* poisoned: signed with the secret, but its winner is no candidate of the op */
    json_t *e = json_loads(good + 65, 0, NULL);
    assert_non_null(e);
    json_object_set_new(json_object_get(e, "winner"), "candidate", json_string("rm -rf"));
    size_t i;
    json_t *u;
    json_array_foreach(json_object_get(e, "units"), i, u) {
        if (json_is_true(json_object_get(u, "finalist")) && json_real_value(json_object_get(u, "time_ns")) == json_real_value(json_object_get(e, "time_ns")))
            json_object_set_new(u, "candidate", json_string("rm -rf"));
    }
    char *text = json_dumps(e, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(e);
    char *poisoned = signed_value(text);
    free(text);
    set_value(key, poisoned);
    expect_rejected_then_measured("c.db");
    free(good), free(forged), free(poisoned);
}

/* A variant group's decision whose configuration is not in the op's space (V=9 of [5, 7]),
 * signed with the secret: rejected, never built or launched, and the key measured. */
static void test_config_not_in_space(void **state) {
    (void)state;
    char art[256];
    snprintf(art, sizeof art, "%s/artifacts", dir);
    kt_context *ctx = ctx_with("a.db", true);
    ok(kt_context_set_artifact_dir(ctx, art));
    ok(kt_op_call(fill_variants_op(ctx, 0), ARGS(16), 2)); /* published */
    kt_context_destroy(ctx);
    char key[128];
    char *good = only_value(key, sizeof key);
    json_t *e = json_loads(good + 65, 0, NULL);
    assert_non_null(e);
    const char *was = json_string_value(json_object_get(json_object_get(e, "winner"), "config"));
    assert_true(strcmp(was, "V=5") == 0 || strcmp(was, "V=7") == 0);
    char old[16];
    snprintf(old, sizeof old, "%s", was);
    json_object_set_new(json_object_get(e, "winner"), "config", json_string("V=9"));
    size_t i;
    json_t *u;
    json_array_foreach(json_object_get(e, "units"), i, u) {
        if (strcmp(json_string_value(json_object_get(u, "config")), old) == 0) json_object_set_new(u, "config", json_string("V=9"));
    }
    char *text = json_dumps(e, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(e);
    char *poisoned = signed_value(text);
    free(text);
    set_value(key, poisoned);
    ctx = ctx_with("b.db", true);
    ok(kt_context_set_artifact_dir(ctx, art));
    kt_op *op = fill_variants_op(ctx, 0);
    buf[0] = 0;
    ok(kt_op_call(op, ARGS(16), 2));
    assert_true(buf[0] == 5 || buf[0] == 7); /* never 9 */
    assert_int_equal(source_of(op, 16), KT_SOURCE_MEASURED);
    assert_true(kt_context_remote_rejected(ctx) >= 1);
    kt_context_destroy(ctx);
    free(good), free(poisoned);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_redis_killed(void **state) {
    (void)state;
    kt_context *ctx = ctx_with("a.db", true);
    kt_op *op = pair_op(ctx, 0);
    ok(kt_op_call(op, ARGS(64), 2)); /* published */
    stop_server();
    double t0 = now_s();
    for (int64_t n = 65; n < 70; n++) { /* five keys: the first call finds Redis gone, the rest skip it */
        buf[0] = 0;
        ok(kt_op_call(op, ARGS(n), 2));
        assert_int_equal(buf[0], 1);
        assert_int_equal(source_of(op, n), KT_SOURCE_MEASURED);
    }
    double spent = now_s() - t0;
    assert_true(kt_context_remote_errors(ctx) >= 1);
    if (spent > 5.0) fail_msg("five local tunings took %.1f s with Redis dead: a call stalled on it", spent);
    kt_context_destroy(ctx);
}

/* A Redis that stops answering (SIGSTOP: connections open, commands never answered) costs one
 * timeout (here 1 s: at least that is waited, which a busy machine cannot shorten), not a stall:
 * the calls are decided here, and the rest skip the remote. */
static void test_redis_hangs(void **state) {
    (void)state;
    kt_context *ctx = ctx_with("a.db", true);
    ok(kt_context_set_remote_timeout(ctx, 1));
    kt_op *op = pair_op(ctx, 0);
    ok(kt_op_call(op, ARGS(64), 2)); /* connected and published */
    kill(server, SIGSTOP);
    double t0 = now_s();
    for (int64_t n = 65; n < 70; n++) {
        ok(kt_op_call(op, ARGS(n), 2));
        assert_int_equal(source_of(op, n), KT_SOURCE_MEASURED);
    }
    double spent = now_s() - t0;
    kill(server, SIGCONT);
    assert_true(kt_context_remote_errors(ctx) >= 1);
    if (spent < 0.9) fail_msg("five local tunings with Redis hung took %.2f s: less than the 1 s timeout", spent);
    if (spent > 10.0) fail_msg("five local tunings took %.1f s with Redis hung: a call waited on it", spent);
    kt_context_destroy(ctx);
}

static void test_one_tuning_per_key(void **state) {
    (void)state;
    int fds[2][2];
    pid_t kids[2];
    for (int k = 0; k < 2; k++) {
        assert_int_equal(pipe(fds[k]), 0);
        kids[k] = fork();
        if (kids[k] == 0) {
            char local[16];
            snprintf(local, sizeof local, "p%d.db", k);
            kt_context *ctx = ctx_with(local, true);
            kt_op *op = pair_op(ctx, 20); /* a tuning that lasts: both miss while it runs */
            int out[2] = {-1, -1};
            if (kt_op_call(op, ARGS(128), 2) == KT_OK) out[0] = (int)source_of(op, 128), out[1] = (int)kt_op_tune_count(op);
            kt_context_destroy(ctx);
            _exit(write(fds[k][1], out, sizeof out) == sizeof out ? 0 : 1);
        }
        close(fds[k][1]);
    }
    int measured = 0, shared = 0, tunings = 0;
    for (int k = 0; k < 2; k++) {
        int out[2] = {-1, -1};
        assert_int_equal(read(fds[k][0], out, sizeof out), (ssize_t)sizeof out);
        close(fds[k][0]);
        int status;
        waitpid(kids[k], &status, 0);
        measured += out[0] == KT_SOURCE_MEASURED;
        shared += out[0] == KT_SOURCE_REMOTE;
        tunings += out[1];
    }
    assert_int_equal(measured, 1);
    assert_int_equal(shared, 1);
    assert_int_equal(tunings, 1);
}

static void test_settings(void **state) {
    (void)state;
    kt_context *ctx = test_context(3);
    assert_int_equal(kt_context_set_remote(ctx, "http://x"), KT_ERR_INVALID_ARGUMENT);
    assert_string_equal(kt_last_error(), "kt_context_set_remote: 'http://x': expected redis://HOST:PORT[/DB] or off");
    assert_int_equal(kt_context_set_remote_key(ctx, secret, 0), KT_ERR_INVALID_ARGUMENT);
    assert_int_equal(kt_context_set_remote_timeout(ctx, 0), KT_ERR_INVALID_ARGUMENT);
    assert_string_equal(kt_last_error(), "kt_context_set_remote_timeout: 0 s is not in [0.001, 600]");
    assert_int_equal(kt_context_set_remote_timeout(ctx, 601), KT_ERR_INVALID_ARGUMENT);
    assert_int_equal(kt_context_set_remote_timeout(NULL, 1), KT_ERR_NULL);
    ok(kt_context_set_remote_timeout(ctx, 0.5));
    ok(kt_context_set_remote(ctx, "off"));
    kt_context_destroy(ctx);
    /* no secret: the remote is left out with a log line, and tuning goes on */
    ctx = test_context(3);
    ok(kt_context_set_cache(ctx, "off"));
    ok(kt_context_set_remote(ctx, url));
    kt_op *op = pair_op(ctx, 0);
    ok(kt_op_call(op, ARGS(64), 2));
    assert_int_equal(source_of(op, 64), KT_SOURCE_MEASURED);
    kt_context_destroy(ctx);
    setenv("KERNTUNE_REMOTE", "tcp://nope", 1);
    assert_int_equal(kt_context_create(&ctx), KT_ERR_ENV);
    assert_string_equal(kt_last_error(), "kt_context_create: KERNTUNE_REMOTE: 'tcp://nope': expected redis://HOST:PORT[/DB] or off");
    setenv("KERNTUNE_REMOTE", "redis://h:99999", 1); /* read by the one parser, as the setter reads it */
    assert_int_equal(kt_context_create(&ctx), KT_ERR_ENV);
    assert_string_equal(kt_last_error(), "kt_context_create: KERNTUNE_REMOTE: 'redis://h:99999': expected redis://HOST[:PORT][/DB]: the port must be "
                                         "a number from 1 to 65535");
    unsetenv("KERNTUNE_REMOTE");
    static const char *const bad_timeouts[] = {"0", "2s", "", "700", "-1", "nan"};
    for (size_t i = 0; i < sizeof bad_timeouts / sizeof bad_timeouts[0]; i++) {
        setenv("KERNTUNE_REMOTE_TIMEOUT", bad_timeouts[i], 1);
        kt_status st = kt_context_create(&ctx);
        if (bad_timeouts[i][0] == '\0') { /* empty: not set */
            ok(st);
            kt_context_destroy(ctx);
            continue;
        }
        assert_int_equal(st, KT_ERR_ENV);
        char want[128];
        snprintf(want, sizeof want, "kt_context_create: KERNTUNE_REMOTE_TIMEOUT='%s': expected seconds in [0.001, 600]", bad_timeouts[i]);
        assert_string_equal(kt_last_error(), want);
    }
    setenv("KERNTUNE_REMOTE_TIMEOUT", "2.5", 1);
    ok(kt_context_create(&ctx));
    kt_context_destroy(ctx);
    unsetenv("KERNTUNE_REMOTE_TIMEOUT");
}

/* The one reader of redis:// URLs (the shared cache's and the fleet's): each part in its range,
 * the defaults, and a located reason for each malformed one. */
static void test_url_parse(void **state) {
    (void)state;
    char host[16];
    int port = -1, db = -1;
    ok(kt_redis_url_parse("redis://127.0.0.1", host, sizeof host, &port, &db));
    assert_string_equal(host, "127.0.0.1");
    assert_int_equal(port, 6379);
    assert_int_equal(db, 0);
    ok(kt_redis_url_parse("redis://h:65535/", host, sizeof host, &port, &db));
    assert_string_equal(host, "h");
    assert_int_equal(port, 65535);
    assert_int_equal(db, 0);
    ok(kt_redis_url_parse("redis://cache.local:7000/12", host, sizeof host, &port, &db));
    assert_string_equal(host, "cache.local");
    assert_int_equal(port, 7000);
    assert_int_equal(db, 12);
    static const char *const bad[][2] = {
        {"http://h", "'http://h': expected redis://HOST[:PORT][/DB]"},
        {"redis://", "'redis://': expected redis://HOST[:PORT][/DB]: no host"},
        {"redis://:6379", "'redis://:6379': expected redis://HOST[:PORT][/DB]: no host"},
        {"redis://h:0", "'redis://h:0': expected redis://HOST[:PORT][/DB]: the port must be a number from 1 to 65535"},
        {"redis://h:65536", "'redis://h:65536': expected redis://HOST[:PORT][/DB]: the port must be a number from 1 to 65535"},
        {"redis://h:", "'redis://h:': expected redis://HOST[:PORT][/DB]: the port must be a number from 1 to 65535"},
        {"redis://h:-1", "'redis://h:-1': expected redis://HOST[:PORT][/DB]: the port must be a number from 1 to 65535"},
        {"redis://h:12x", "'redis://h:12x': expected redis://HOST[:PORT][/DB]: the port must be a number from 1 to 65535"},
        {"redis://h/x", "'redis://h/x': expected redis://HOST[:PORT][/DB]: the database must be a number from 0 to 1000000"},
        {"redis://h/1000001", "'redis://h/1000001': expected redis://HOST[:PORT][/DB]: the database must be a number from 0 to 1000000"},
        {"redis://h/3/4", "'redis://h/3/4': expected redis://HOST[:PORT][/DB]: the database must be a number from 0 to 1000000"},
        {"redis://a b", "'redis://a b': expected redis://HOST[:PORT][/DB]: the host name holds '?'"},
        {"redis://u@h", "'redis://u@h': expected redis://HOST[:PORT][/DB]: the host name holds '@'"},
        {"redis://a-very-long-host-name", "'redis://a-very-long-host-name': expected redis://HOST[:PORT][/DB]: the host name is longer than 15 characters"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        port = db = -1;
        assert_int_equal(kt_redis_url_parse(bad[i][0], host, sizeof host, &port, &db), KT_ERR_INVALID_ARGUMENT);
        assert_string_equal(kt_last_error(), bad[i][1]);
        assert_int_equal(port, -1); /* nothing written */
    }
    assert_int_equal(kt_redis_url_parse(NULL, host, sizeof host, &port, &db), KT_ERR_NULL);
    /* the shared cache reads it through the same parser */
    kt_context *ctx = test_context(3);
    assert_int_equal(kt_context_set_remote(ctx, "redis://h:0"), KT_ERR_INVALID_ARGUMENT);
    assert_string_equal(kt_last_error(), "kt_context_set_remote: 'redis://h:0': expected redis://HOST[:PORT][/DB]: the port must be a number "
                                         "from 1 to 65535");
    kt_context_destroy(ctx);
}

/* The one connection routine, which the shared cache and the fleet both use: a bad url, a dead
 * port, a database Redis refuses, and a database selected (a key set through it lands in that
 * database only). */
static void test_connect(void **state) {
    (void)state;
    void *c = (void *)1;
    assert_int_equal(kt_redis_connect("redis://h:0", 200, &c), KT_ERR_INVALID_ARGUMENT);
    assert_null(c);
    assert_int_equal(kt_redis_connect(url, 0, &c), KT_ERR_INVALID_ARGUMENT);
    assert_string_equal(kt_last_error(), "kt_redis_connect: timeout 0 ms: must be positive");
    char dead[64], msg[128];
    int dport = redis_free_port();
    snprintf(dead, sizeof dead, "redis://127.0.0.1:%d", dport);
    assert_int_equal(kt_redis_connect(dead, 500, &c), KT_ERR_BACKEND);
    snprintf(msg, sizeof msg, "redis://127.0.0.1:%d: cannot connect: ", dport);
    assert_memory_equal(kt_last_error(), msg, strlen(msg));
    char u[96];
    snprintf(u, sizeof u, "%s/99999", url); /* past redis-server's 16 databases */
    assert_int_equal(kt_redis_connect(u, 500, &c), KT_ERR_BACKEND);
    snprintf(msg, sizeof msg, "redis://127.0.0.1:%d: SELECT 99999: ERR ", port);
    assert_memory_equal(kt_last_error(), msg, strlen(msg));
    snprintf(u, sizeof u, "%s/3", url);
    ok(kt_redis_connect(u, 500, &c));
    redisReply *r = redisCommand(c, "SET kt-connect-probe yes");
    assert_non_null(r);
    freeReplyObject(r);
    redisFree(c);
    redisContext *plain = client(); /* database 0 */
    r = redisCommand(plain, "EXISTS kt-connect-probe");
    assert_int_equal(r->integer, 0);
    freeReplyObject(r);
    r = redisCommand(plain, "SELECT 3");
    freeReplyObject(r);
    r = redisCommand(plain, "EXISTS kt-connect-probe");
    assert_int_equal(r->integer, 1);
    freeReplyObject(r);
    redisFree(plain);
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_read_and_write_through, setup, teardown),
        cmocka_unit_test_setup_teardown(test_forged_and_poisoned, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_not_in_space, setup, teardown),
        cmocka_unit_test_setup_teardown(test_redis_killed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_redis_hangs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_one_tuning_per_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_settings, setup, teardown),
        cmocka_unit_test(test_url_parse),
        cmocka_unit_test_setup_teardown(test_connect, setup, teardown),
    };
    return kt_run_cases(argc, argv, tests, NULL, NULL);
}
