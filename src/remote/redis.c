/*
 * redis.c - the shared decision cache's transport (remote.h): hiredis for Redis, OpenSSL's
 * libcrypto for HMAC-SHA256 and SHA-256. Built without hiredis (KT_NO_REDIS), every call says
 * so.
 */
#include "remote/remote.h"
#include "util/util.h"

#include <kerntune/cache.h>

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef KT_NO_REDIS
#include <hiredis/hiredis.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#define BACKOFF_S 5.0 /* how long a remote that failed stays down */

struct kt__remote {
    char url[320];         /* as given: kt_redis_connect reads it */
    char host[256];        /* host and port: for messages */
    int port, timeout_ms;
    unsigned char *secret;
    size_t secret_len;
    char owner[64];        /* this remote's lease token */
    pthread_mutex_t lock;
    redisContext *c;       /* NULL: not connected */
    double down_until;     /* monotonic seconds: failing at once until then */
};

static void hex(const unsigned char *b, size_t n, char *out) {
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) out[2 * i] = digits[b[i] >> 4], out[2 * i + 1] = digits[b[i] & 15];
    out[2 * n] = '\0';
}

kt_status kt__remote_create(const char *url, const void *secret, size_t secret_len, int timeout_ms, kt__remote **out) {
    *out = NULL;
    if (url == NULL) return kt__err(KT_ERR_NULL, "remote: the url is NULL");
    if (secret == NULL || secret_len == 0)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "remote '%.200s': no shared secret (KERNTUNE_REMOTE_KEY or kt_context_set_remote_key): "
                                                "entries are signed with it", url);
    kt__remote *r = calloc(1, sizeof *r);
    if (r == NULL) return kt__err(KT_ERR_NO_MEMORY, "remote: out of memory");
    int db;
    if (kt_redis_url_parse(url, r->host, sizeof r->host, &r->port, &db) != KT_OK) {
        char why[600];
        snprintf(why, sizeof why, "%s", kt_last_error());
        free(r);
        return kt__err(KT_ERR_INVALID_ARGUMENT, "remote %s", why);
    }
    snprintf(r->url, sizeof r->url, "%s", url);
    r->secret = malloc(secret_len);
    if (r->secret == NULL) {
        free(r);
        return kt__err(KT_ERR_NO_MEMORY, "remote: out of memory");
    }
    memcpy(r->secret, secret, secret_len);
    r->secret_len = secret_len;
    r->timeout_ms = timeout_ms > 0 ? timeout_ms : 200;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(r->owner, sizeof r->owner, "%ld.%016llx", (long)getpid(),
             (unsigned long long)kt__fnv1a(&ts, sizeof ts, (uint64_t)(uintptr_t)r));
    pthread_mutex_init(&r->lock, NULL);
    *out = r;
    return KT_OK;
}

void kt__remote_destroy(kt__remote *r) {
    if (r == NULL) return;
    if (r->c) redisFree(r->c);
    pthread_mutex_destroy(&r->lock);
    free(r->secret);
    free(r);
}

/* A connection (lock held), or NULL with the error set: the remote is then down for a while. */
static redisContext *conn(kt__remote *r, const char *what) {
    if (r->c) return r->c;
    if (kt__now_s() < r->down_until) {
        kt__err(KT_ERR_BACKEND, "remote redis://%s:%d: %s: unreachable a moment ago; not retried yet", r->host, r->port, what);
        return NULL;
    }
    void *c = NULL;
    if (kt_redis_connect(r->url, r->timeout_ms, &c) != KT_OK) {
        char why[600];
        snprintf(why, sizeof why, "%s", kt_last_error());
        kt__err(KT_ERR_BACKEND, "remote %s: %s", what, why);
        r->down_until = kt__now_s() + BACKOFF_S;
        return NULL;
    }
    r->c = c;
    return c;
}

/* Runs a command (lock held); NULL with the error set when Redis did not answer (the
 * connection is dropped, the remote down for a while) or answered with an error. */
static redisReply *command(kt__remote *r, const char *what, const char *fmt, ...) {
    redisContext *c = conn(r, what);
    if (c == NULL) return NULL;
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = redisvCommand(c, fmt, ap);
    va_end(ap);
    if (rep == NULL) {
        kt__err(KT_ERR_BACKEND, "remote redis://%s:%d: %s: %s", r->host, r->port, what, c->errstr[0] ? c->errstr : "no answer");
        redisFree(c);
        r->c = NULL;
        r->down_until = kt__now_s() + BACKOFF_S;
        return NULL;
    }
    if (rep->type == REDIS_REPLY_ERROR) {
        kt__err(KT_ERR_BACKEND, "remote redis://%s:%d: %s: %.200s", r->host, r->port, what, rep->str);
        freeReplyObject(rep);
        return NULL;
    }
    return rep;
}

static void sign(const kt__remote *r, const char *text, char out[65]) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    HMAC(EVP_sha256(), r->secret, (int)r->secret_len, (const unsigned char *)text, strlen(text), md, &n);
    hex(md, n > 32 ? 32 : n, out);
}

kt_status kt__remote_get(kt__remote *r, const char *id, char **text) {
    *text = NULL;
    pthread_mutex_lock(&r->lock);
    redisReply *rep = command(r, "GET", "GET %s", id);
    pthread_mutex_unlock(&r->lock);
    if (rep == NULL) return KT_ERR_BACKEND;
    kt_status st = KT_OK;
    if (rep->type == REDIS_REPLY_NIL) {
        st = KT_ERR_NOT_FOUND;
    } else if (rep->type != REDIS_REPLY_STRING || rep->len < 66 || rep->str[64] != ' ' || strlen(rep->str) != rep->len) {
        st = kt__err(KT_ERR_INVALID_ARGUMENT, "remote entry %s: not a signed entry", id);
    } else {
        char want[65];
        sign(r, rep->str + 65, want);
        /* (a comparison whose time does not depend on where it differs) */
        unsigned diff = 0;
        for (int i = 0; i < 64; i++) diff |= (unsigned)(want[i] ^ rep->str[i]);
        if (diff) st = kt__err(KT_ERR_INVALID_ARGUMENT, "remote entry %s: its signature does not verify under the shared secret", id);
        else if ((*text = strdup(rep->str + 65)) == NULL) st = kt__err(KT_ERR_NO_MEMORY, "remote entry %s: out of memory", id);
    }
    freeReplyObject(rep);
    return st;
}

/* SET id value (lock taken here). */
static kt_status set_value(kt__remote *r, const char *id, const char *value, size_t len) {
    pthread_mutex_lock(&r->lock);
    redisReply *rep = command(r, "SET", "SET %s %b", id, value, len);
    pthread_mutex_unlock(&r->lock);
    if (rep == NULL) return KT_ERR_BACKEND;
    freeReplyObject(rep);
    return KT_OK;
}

kt_status kt__remote_put(kt__remote *r, const char *id, const char *text) {
    size_t n = strlen(text);
    char *value = malloc(n + 66);
    if (value == NULL) return kt__err(KT_ERR_NO_MEMORY, "remote entry %s: out of memory", id);
    sign(r, text, value);
    value[64] = ' ';
    memcpy(value + 65, text, n + 1);
    kt_status st = set_value(r, id, value, n + 65);
    free(value);
    return st;
}

kt_status kt__remote_put_raw(kt__remote *r, const char *id, const char *value) { return set_value(r, id, value, strlen(value)); }

/* The lease key of a decision key: "kerntune:l:..." for "kerntune:d:...". */
static void lease_key(const char *id, char out[128]) {
    snprintf(out, 128, "%s", id);
    char *d = strstr(out, ":d:");
    if (d) d[1] = 'l';
}

kt_status kt__remote_lease(kt__remote *r, const char *id, int ms, bool *held) {
    *held = false;
    char key[128];
    lease_key(id, key);
    pthread_mutex_lock(&r->lock);
    redisReply *rep = command(r, "SET NX", "SET %s %s NX PX %d", key, r->owner, ms);
    pthread_mutex_unlock(&r->lock);
    if (rep == NULL) return KT_ERR_BACKEND;
    *held = rep->type == REDIS_REPLY_STATUS; /* OK; nil when another holds it */
    freeReplyObject(rep);
    return KT_OK;
}

void kt__remote_unlease(kt__remote *r, const char *id) {
    char key[128];
    lease_key(id, key);
    pthread_mutex_lock(&r->lock); /* only ours: compare and delete in one step */
    redisReply *rep = command(r, "EVAL", "EVAL %s 1 %s %s", "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0",
                              key, r->owner);
    pthread_mutex_unlock(&r->lock);
    if (rep) freeReplyObject(rep);
}

void kt__remote_id(const char *op, const char *set_hash, const char *device, const char *version, const char *key_text, char out[96]) {
    EVP_MD_CTX *m = EVP_MD_CTX_new();
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    const char *parts[5] = {op, set_hash, device, version, key_text};
    if (m && EVP_DigestInit_ex(m, EVP_sha256(), NULL) == 1) {
        for (int i = 0; i < 5; i++) EVP_DigestUpdate(m, parts[i], strlen(parts[i]) + 1); /* each with its NUL */
        EVP_DigestFinal_ex(m, md, &n);
    }
    EVP_MD_CTX_free(m);
    char h[2 * EVP_MAX_MD_SIZE + 1];
    hex(md, n > 32 ? 32 : n, h);
    snprintf(out, 96, "kerntune:d:%.64s", h);
}

#else /* KT_NO_REDIS */

static kt_status no_redis(void) {
    return kt__err(KT_ERR_STATE, "this kerntune was built without Redis (no hiredis or libcrypto at build time, or KT_WITH_REDIS=OFF): no remote cache");
}
kt_status kt__remote_create(const char *url, const void *secret, size_t secret_len, int timeout_ms, kt__remote **out) {
    (void)url, (void)secret, (void)secret_len, (void)timeout_ms;
    *out = NULL;
    return no_redis();
}
void kt__remote_destroy(kt__remote *r) { (void)r; }
kt_status kt__remote_get(kt__remote *r, const char *id, char **text) {
    (void)r, (void)id;
    *text = NULL;
    return no_redis();
}
kt_status kt__remote_put(kt__remote *r, const char *id, const char *text) {
    (void)r, (void)id, (void)text;
    return no_redis();
}
kt_status kt__remote_put_raw(kt__remote *r, const char *id, const char *value) {
    (void)r, (void)id, (void)value;
    return no_redis();
}
kt_status kt__remote_lease(kt__remote *r, const char *id, int ms, bool *held) {
    (void)r, (void)id, (void)ms;
    *held = false;
    return no_redis();
}
void kt__remote_unlease(kt__remote *r, const char *id) { (void)r, (void)id; }
void kt__remote_id(const char *op, const char *set_hash, const char *device, const char *version, const char *key_text, char out[96]) {
    (void)op, (void)set_hash, (void)device, (void)version, (void)key_text;
    snprintf(out, 96, "kerntune:d:none");
}
#endif
