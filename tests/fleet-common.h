/*
 * fleet-common.h - what test-fleet.c and test-fleet-build.c share: a real redis-server on a
 * loopback port started per case (setup, teardown) in a fresh directory, and `kerntune worker`
 * processes started, awaited and stopped.
 */
#ifndef KT_TEST_FLEET_COMMON_H
#define KT_TEST_FLEET_COMMON_H

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

static inline int setup(void **state) {
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

static inline int teardown(void **state) {
    (void)state;
    redis_stop(&server);
    return remove_tree(dir);
}

/* Starts `kerntune worker URL ARGS...` (its output in dir/NAME.log); its pid. */
static inline pid_t start_worker(const char *name, const char *extra) {
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
static inline void await_worker(const char *name) {
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
static inline void await_file(const char *path) {
    struct stat st;
    for (int i = 0; i < 1200 && stat(path, &st) != 0; i++) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(stat(path, &st), 0);
}

static inline void stop_worker(pid_t pid) {
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
}

static inline json_t *load_json(const char *path) {
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    if (j == NULL) fail_msg("%s: %s (line %d)", path, e.text, e.line);
    return j;
}

#endif
