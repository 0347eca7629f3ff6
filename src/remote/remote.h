/*
 * remote.h - a decision cache shared by many machines, on Redis (redis.c). Internal: the
 * public face is kerntune/cache.h (kt_context_set_remote).
 *
 * The remote keeps one value per decision identity: "<HMAC-SHA256 of the text, 64 hex digits>
 * <text>", the text being the decision as one wisdom entry (store.h). A value whose signature
 * does not verify under the shared secret is refused here (KT_ERR_INVALID_ARGUMENT), never
 * handed out. Every call has a bounded time: a connection that does not open, or a command that
 * does not answer, within the remote's timeout fails with KT_ERR_BACKEND, and the remote then
 * stays down (every call fails at once) for a back-off period, so that a dead Redis costs one
 * timeout, not one per call. Thread-safe: one connection under a mutex.
 */
#ifndef KT_REMOTE_H
#define KT_REMOTE_H

#include <kerntune.h>

#include <stdbool.h>
#include <stddef.h>

typedef struct kt__remote kt__remote;

/* Parses url ("redis://host:port/db", db optional) and keeps the secret; connects at the first
 * call. KT_ERR_INVALID_ARGUMENT for a malformed url or an empty secret, KT_ERR_STATE when the
 * library was built without hiredis. */
kt_status kt__remote_create(const char *url, const void *secret, size_t secret_len, int timeout_ms, kt__remote **out);
void kt__remote_destroy(kt__remote *r);

/* The value of id (its text, verified, allocated into *text), KT_ERR_NOT_FOUND when absent,
 * KT_ERR_INVALID_ARGUMENT when its signature does not verify, KT_ERR_BACKEND when Redis cannot
 * be reached in time. */
kt_status kt__remote_get(kt__remote *r, const char *id, char **text);

/* Stores text signed under id. */
kt_status kt__remote_put(kt__remote *r, const char *id, const char *text);

/* Stores a raw value under id, unsigned: for tests that forge entries. */
kt_status kt__remote_put_raw(kt__remote *r, const char *id, const char *value);

/* Takes the lease of id for ms milliseconds if nobody holds it (SET NX PX): *held says whether
 * this caller got it. */
kt_status kt__remote_lease(kt__remote *r, const char *id, int ms, bool *held);

/* Gives the lease of id back (only if this remote holds it). */
void kt__remote_unlease(kt__remote *r, const char *id);

/* The key of a decision identity: "kerntune:d:<sha256 hex>" of its fields joined by NULs. */
void kt__remote_id(const char *op, const char *set_hash, const char *device, const char *version, const char *key_text,
                   char out[96]);

#endif
