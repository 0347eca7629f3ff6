/*
 * url.c - the one reader of redis:// URLs (kt_redis_url_parse): the shared cache (redis.c,
 * kt_context_set_remote) and the CLI's fleet read them through it.
 */
#include <kerntune/cache.h>

#include "util/util.h"

#include <errno.h>
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
