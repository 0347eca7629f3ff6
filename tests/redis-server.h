/*
 * redis-server.h - a real redis-server for a test: started on a free loopback port with its
 * files in the test's temporary directory, persistence off, and stopped (SIGKILL) at the end.
 * Shared by test-remote.c (the fleet's decision cache) and test-fleet.c (tuning on workers).
 */
#ifndef KT_TEST_REDIS_SERVER_H
#define KT_TEST_REDIS_SERVER_H

#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* A port nobody listens on now (the kernel's pick for a socket bound to port 0). */
static inline int redis_free_port(void) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) != 0 || getsockname(s, (struct sockaddr *)&a, &len) != 0) {
        if (s >= 0) close(s);
        return -1;
    }
    close(s);
    return ntohs(a.sin_port);
}

/* A client of the server on port, or NULL. Its timeouts (10 s) are a guard against a server
 * that hangs, not a measure: with 1 s, a connection on loopback timed out once on a machine
 * busy with make check's tests and two CPU hogs. */
static inline redisContext *redis_client(int port) {
    struct timeval tv = {10, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (c && c->err) {
        redisFree(c);
        return NULL;
    }
    if (c) redisSetTimeout(c, tv);
    return c;
}

/* Starts redis-server with its files in dir on port; its pid, -1 when it did not answer PING
 * within 10 s. */
static inline pid_t redis_start_on(const char *dir, int port) {
    char p[16];
    snprintf(p, sizeof p, "%d", port);
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) dup2(null, 1), dup2(null, 2);
        execlp("redis-server", "redis-server", "--port", p, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir,
               (char *)NULL);
        _exit(127);
    }
    if (pid < 0) return -1;
    for (int i = 0; i < 200; i++) {
        redisContext *c = redis_client(port);
        redisReply *r = c ? redisCommand(c, "PING") : NULL;
        bool up = r && r->type == REDIS_REPLY_STATUS;
        if (r) freeReplyObject(r);
        if (c) redisFree(c);
        if (up) return pid;
        struct timespec ts = {0, 50000000};
        nanosleep(&ts, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

/* The same on a free port, written to *port. */
static inline pid_t redis_start(const char *dir, int *port) {
    *port = redis_free_port();
    return *port > 0 ? redis_start_on(dir, *port) : -1;
}

static inline void redis_stop(pid_t *pid) {
    if (*pid > 0) {
        kill(*pid, SIGKILL);
        waitpid(*pid, NULL, 0);
        *pid = 0;
    }
}

#endif
