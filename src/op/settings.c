/*
 * settings.c - the context's settings of the fleet's shared decision cache (kerntune/cache.h:
 * kt_context_set_remote and its key and timeout, from the environment at kt_context_create) and
 * its counters; what uses them is tune/shared.c, the transport remote/redis.c. The context owns
 * them, so creating and destroying it calls nothing of tune/.
 */
#include "op/op.h"
#include "remote/remote.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a Redis call's timeout may be, in seconds (kt_context_set_remote_timeout). */
static bool timeout_ok(double s) { return s >= 0.001 && s <= 600; }
#define TIMEOUT_RANGE "[0.001, 600]"

/* KT_OK when url (not "off") is a redis:// URL the shared cache can use, else
 * KT_ERR_INVALID_ARGUMENT with the reason, which its callers prefix with their own names. */
static kt_status url_check(const char *url) {
    if (strncmp(url, "redis://", 8) != 0)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "'%.200s': expected redis://HOST:PORT[/DB] or off", url);
    char host[256];
    int port, db;
    return kt_redis_url_parse(url, host, sizeof host, &port, &db);
}

kt_status kt_context_set_remote(kt_context *ctx, const char *url) {
    if (ctx == NULL) return kt__err(KT_ERR_NULL, "kt_context_set_remote: ctx is NULL");
    bool off = url == NULL || strcmp(url, "off") == 0;
    if (!off && url_check(url) != KT_OK) {
        char why[600];
        snprintf(why, sizeof why, "%s", kt_last_error());
        return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_context_set_remote: %s", why);
    }
    if (atomic_load(&ctx->remote_tried))
        return kt__err(KT_ERR_STATE, "kt_context_set_remote: the context's shared cache is in use already; set it before the first tuning");
    char *copy = off ? NULL : strdup(url);
    if (!off && copy == NULL) return kt__err(KT_ERR_NO_MEMORY, "kt_context_set_remote: out of memory");
    free(ctx->remote_url);
    ctx->remote_url = copy;
    return KT_OK;
}

kt_status kt_context_set_remote_key(kt_context *ctx, const void *key, size_t len) {
    if (ctx == NULL || key == NULL) return kt__err(KT_ERR_NULL, "kt_context_set_remote_key: %s is NULL", ctx ? "key" : "ctx");
    if (len == 0) return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_context_set_remote_key: the key is empty");
    if (atomic_load(&ctx->remote_tried))
        return kt__err(KT_ERR_STATE, "kt_context_set_remote_key: the context's shared cache is in use already");
    unsigned char *copy = malloc(len);
    if (copy == NULL) return kt__err(KT_ERR_NO_MEMORY, "kt_context_set_remote_key: out of memory");
    memcpy(copy, key, len);
    free(ctx->remote_key);
    ctx->remote_key = copy;
    ctx->remote_key_len = len;
    return KT_OK;
}

kt_status kt_context_set_remote_timeout(kt_context *ctx, double seconds) {
    if (ctx == NULL) return kt__err(KT_ERR_NULL, "kt_context_set_remote_timeout: ctx is NULL");
    if (!timeout_ok(seconds))
        return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_context_set_remote_timeout: %g s is not in " TIMEOUT_RANGE, seconds);
    if (atomic_load(&ctx->remote_tried))
        return kt__err(KT_ERR_STATE, "kt_context_set_remote_timeout: the context's shared cache is in use already");
    ctx->remote_timeout_ms = (int)(seconds * 1000 + 0.5);
    return KT_OK;
}

uint64_t kt_context_remote_hits(const kt_context *ctx) { return ctx ? atomic_load(&ctx->remote_hits) : 0; }
uint64_t kt_context_remote_rejected(const kt_context *ctx) { return ctx ? atomic_load(&ctx->remote_rejected) : 0; }
uint64_t kt_context_remote_errors(const kt_context *ctx) { return ctx ? atomic_load(&ctx->remote_errors) : 0; }

kt_status kt__shared_env(kt_context *ctx) {
    const char *url = getenv("KERNTUNE_REMOTE"), *key = getenv("KERNTUNE_REMOTE_KEY"), *file = getenv("KERNTUNE_REMOTE_KEY_FILE");
    const char *timeout = getenv("KERNTUNE_REMOTE_TIMEOUT");
    if (url && *url && strcmp(url, "off") != 0 && url_check(url) != KT_OK) {
        char why[600];
        snprintf(why, sizeof why, "%s", kt_last_error());
        return kt__err(KT_ERR_ENV, "kt_context_create: KERNTUNE_REMOTE: %s", why);
    }
    kt_status st = KT_OK;
    if (timeout && *timeout) {
        char *end = NULL;
        errno = 0;
        double s = strtod(timeout, &end);
        if (errno != 0 || end == timeout || *end != '\0' || !timeout_ok(s))
            return kt__err(KT_ERR_ENV, "kt_context_create: KERNTUNE_REMOTE_TIMEOUT='%.200s': expected seconds in " TIMEOUT_RANGE, timeout);
        st = kt_context_set_remote_timeout(ctx, s);
    }
    if (st == KT_OK && url && *url) st = kt_context_set_remote(ctx, url);
    if (st == KT_OK && key && *key) st = kt_context_set_remote_key(ctx, key, strlen(key));
    else if (st == KT_OK && file && *file) {
        FILE *f = fopen(file, "rb");
        unsigned char buf[4096];
        size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
        if (f) fclose(f);
        while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) n--; /* a key file's last line ends */
        if (f == NULL || n == 0)
            return kt__err(KT_ERR_ENV, "kt_context_create: KERNTUNE_REMOTE_KEY_FILE='%.200s': %s", file, f ? "empty" : strerror(errno));
        st = kt_context_set_remote_key(ctx, buf, n);
    }
    if (st != KT_OK) return kt__err(KT_ERR_ENV, "%s", kt_last_error());
    return KT_OK;
}

void kt__shared_free(kt_context *ctx) {
    kt__remote_destroy(ctx->remote);
    free(ctx->remote_url);
    if (ctx->remote_key) memset(ctx->remote_key, 0, ctx->remote_key_len);
    free(ctx->remote_key);
}

