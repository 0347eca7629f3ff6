/*
 * client.c - the one way into Redis: reading redis:// URLs (kt_redis_url_parse) and opening a
 * connection from one (kt_redis_connect: connect within a timeout, SELECT the database). The
 * shared cache (redis.c, kt_context_set_remote) and the CLI's fleet (tune --workers, worker)
 * both connect through it.
 */
#include <kerntune/cache.h>

#include "util/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SHAPE "expected redis://HOST[:PORT][/DB]"

/* A whole decimal number from lo to hi in [p, end_of_digits), which must be followed by one of
 * stops (or the string's end): false otherwise. *next: after its digits. */
static bool number(const char *p, long lo, long hi, const char *stops, long *out, const char **next) {
    if (*p < '0' || *p > '9') return false;
    char *end;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (errno != 0 || v < lo || v > hi || (*end != '\0' && strchr(stops, *end) == NULL)) return false;
    *out = v, *next = end;
    return true;
}

kt_status kt_redis_url_parse(const char *url, char *host, size_t hostlen, int *port, int *db) {
    if (url == NULL || host == NULL || port == NULL || db == NULL)
        return kt__err(KT_ERR_NULL, "kt_redis_url_parse: %s is NULL", url == NULL ? "url" : host == NULL ? "host" : port ? "db" : "port");
    if (hostlen < 2) return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_redis_url_parse: hostlen %zu is too small", hostlen);
    if (strncmp(url, "redis://", 8) != 0) return kt__err(KT_ERR_INVALID_ARGUMENT, "'%.200s': " SHAPE, url);
    const char *p = url + 8;
    size_t hl = strcspn(p, ":/");
    if (hl == 0) return kt__err(KT_ERR_INVALID_ARGUMENT, "'%.200s': " SHAPE ": no host", url);
    if (hl >= hostlen) return kt__err(KT_ERR_INVALID_ARGUMENT, "'%.200s': " SHAPE ": the host name is longer than %zu characters", url, hostlen - 1);
    for (size_t i = 0; i < hl; i++)
        if ((unsigned char)p[i] <= ' ' || p[i] == '@' || p[i] == '?' || p[i] == '#')
            return kt__err(KT_ERR_INVALID_ARGUMENT, "'%.200s': " SHAPE ": the host name holds '%c'", url, p[i] > ' ' ? p[i] : '?');
    long pv = 6379, dv = 0;
    const char *q = p + hl;
    if (*q == ':' && !number(q + 1, 1, 65535, "/", &pv, &q))
        return kt__err(KT_ERR_INVALID_ARGUMENT, "'%.200s': " SHAPE ": the port must be a number from 1 to 65535", url);
    if (*q == '/' && q[1] != '\0' && !number(q + 1, 0, 1000000, "", &dv, &q))
        return kt__err(KT_ERR_INVALID_ARGUMENT, "'%.200s': " SHAPE ": the database must be a number from 0 to 1000000", url);
    memcpy(host, p, hl);
    host[hl] = '\0';
    *port = (int)pv, *db = (int)dv;
    return KT_OK;
}

#ifndef KT_NO_REDIS
#include <hiredis/hiredis.h>

kt_status kt_redis_connect(const char *url, int timeout_ms, void **out) {
    if (out == NULL) return kt__err(KT_ERR_NULL, "kt_redis_connect: out is NULL");
    *out = NULL;
    char host[256];
    int port, db;
    kt_status st = kt_redis_url_parse(url, host, sizeof host, &port, &db);
    if (st != KT_OK) return st;
    if (timeout_ms <= 0) return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_redis_connect: timeout %d ms: must be positive", timeout_ms);
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    redisContext *c = redisConnectWithTimeout(host, port, tv);
    if (c == NULL || c->err) {
        st = kt__err(KT_ERR_BACKEND, "redis://%s:%d: cannot connect: %s", host, port, c ? c->errstr : "out of memory");
        if (c) redisFree(c);
        return st;
    }
    redisSetTimeout(c, tv);
    if (db != 0) {
        redisReply *r = redisCommand(c, "SELECT %d", db);
        if (r == NULL || r->type != REDIS_REPLY_STATUS) {
            st = kt__err(KT_ERR_BACKEND, "redis://%s:%d: SELECT %d: %.200s", host, port, db,
                         r && r->type == REDIS_REPLY_ERROR ? r->str : c->errstr[0] ? c->errstr : "no answer");
            if (r) freeReplyObject(r);
            redisFree(c);
            return st;
        }
        freeReplyObject(r);
    }
    *out = c;
    return KT_OK;
}

#else

kt_status kt_redis_connect(const char *url, int timeout_ms, void **out) {
    (void)url, (void)timeout_ms;
    if (out) *out = NULL;
    return kt__err(KT_ERR_STATE, "this kerntune was built without Redis (no hiredis or libcrypto at build time, or KT_WITH_REDIS=OFF)");
}

#endif
