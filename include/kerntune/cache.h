/*
 * kerntune/cache.h - the persistent cache of decisions, and wisdom.
 *
 * Decisions outlive the process in one SQLite file, shared by every thread and process on the
 * machine: a decision is stored with the op's name, its candidate-set hash, the device's
 * fingerprint, the library version and the key, and is served only when all five match; every
 * unit it considered is kept with it (time, confidence interval, runs, outcome, diagnostic).
 * Wisdom is the JSON export of decisions, for another machine of the same fingerprint.
 * A context uses the default cache (kt_cache_default_path) unless told otherwise; this header
 * chooses another one or none, and counts, exports, imports and removes what a cache holds.
 */
#ifndef KERNTUNE_CACHE_H
#define KERNTUNE_CACHE_H

#include <kerntune.h>

#ifdef __cplusplus
extern "C" {
#endif

/** An open persistent cache. One handle may be used by several threads at once. */
typedef struct kt_cache kt_cache;

/** Sets the persistent cache the context's ops look decisions up in (after their own table)
 *  and record measured decisions in: the path of its file, NULL for the default
 *  (kt_cache_default_path: KERNTUNE_CACHE, else the user's cache directory), or "off". Set it
 *  before the first tuning (KT_ERR_STATE after). A cache that cannot be opened is logged and
 *  left out: decisions then last as long as the process. */
KT_API kt_status kt_context_set_cache(kt_context *ctx, const char *path);

/** Returns the context's cache, opening it if it was not yet; NULL when off or unavailable. */
KT_API kt_cache *kt_context_cache(kt_context *ctx);

/**
 * Adds a cache shared by a fleet in front of the persistent cache: url is "redis://HOST:PORT"
 * or "redis://HOST:PORT/DB" (NULL or "off": none, the default unless KERNTUNE_REMOTE names
 * one). A key the local cache misses is asked of Redis (read-through: a hit is kept locally); a
 * decision measured here is published (write-through); while one process measures a key it holds
 * a short lease on it (SET NX PX), so that another process missing the same key at once waits for
 * the result instead of measuring too (or measures itself when the lease expires). Entries are
 * signed with HMAC-SHA256 under the shared secret (kt_context_set_remote_key, else
 * KERNTUNE_REMOTE_KEY, else the file KERNTUNE_REMOTE_KEY_FILE names): one with a missing or wrong
 * signature, or whose decision is not valid for today's op (a candidate or configuration it does
 * not have, another identity), is ignored, counted (kt_context_remote_rejected) and logged,
 * never launched. A Redis that cannot be reached, or does not answer, within the timeout (200 ms;
 * kt_context_set_remote_timeout) never fails or stalls a call: the op decides locally, the log
 * says so, and the remote is not asked again for 5 s. Set it before the first tuning.
 * KT_ERR_INVALID_ARGUMENT for a malformed url; a library built without hiredis fails the first
 * use with a log line.
 */
KT_API kt_status kt_context_set_remote(kt_context *ctx, const char *url);

/** Parses a Redis URL, redis://HOST[:PORT][/DB], as the shared cache and the fleet read it: HOST
 *  into host (hostlen bytes, at least 2), PORT from 1 to 65535 (default 6379) into *port, DB from
 *  0 to 1000000 (default 0; "/" alone is 0) into *db. KT_ERR_INVALID_ARGUMENT with the reason
 *  ("'URL': expected redis://HOST[:PORT][/DB]: ...") otherwise. */
KT_API kt_status kt_redis_url_parse(const char *url, char *host, size_t hostlen, int *port, int *db);

/** Opens a connection to the Redis that url names (kt_redis_url_parse), within timeout_ms
 *  milliseconds, which is also each later command's timeout, and selects its database: *out
 *  is then a hiredis redisContext (free it with redisFree). The one way kerntune connects to
 *  Redis: the shared cache and the CLI's fleet both use it. KT_ERR_INVALID_ARGUMENT for a bad
 *  url or timeout, KT_ERR_BACKEND ("redis://HOST:PORT: cannot connect: ...", or "SELECT DB: ...")
 *  when Redis cannot be reached or refuses the database, KT_ERR_STATE when the library was built
 *  without hiredis. */
KT_API kt_status kt_redis_connect(const char *url, int timeout_ms, void **out);

/** Sets how long one call to the shared cache may take, connecting included (default 0.2 s, or
 *  KERNTUNE_REMOTE_TIMEOUT in seconds): past it the call counts as failed and the op decides
 *  locally. Set it before the first tuning. KT_ERR_INVALID_ARGUMENT outside [0.001, 600] s. */
KT_API kt_status kt_context_set_remote_timeout(kt_context *ctx, double seconds);

/** Sets the shared secret entries are signed with (len bytes, copied). */
KT_API kt_status kt_context_set_remote_key(kt_context *ctx, const void *key, size_t len);

/** Returns how many decisions the context's ops took from the shared cache, how many times they
 *  rejected one of its entries (signature, identity or validity; each time it was read), and
 *  how many of its calls failed (unreachable, timed out). */
KT_API uint64_t kt_context_remote_hits(const kt_context *ctx);
KT_API uint64_t kt_context_remote_rejected(const kt_context *ctx);
KT_API uint64_t kt_context_remote_errors(const kt_context *ctx);

/** Returns how many decisions the context's ops took from the cache, and how many recorded
 *  decisions they rejected (a candidate or configuration not in today's op, values of the
 *  wrong type): a rejected record is never launched and lends nothing, the key is tuned again
 *  (kt_decision_cache_rejected says why). */
KT_API uint64_t kt_context_cache_hits(const kt_context *ctx);
KT_API uint64_t kt_context_cache_rejected(const kt_context *ctx);

/** Writes the default cache path into buf (len bytes): KERNTUNE_CACHE when set (and not "off"),
 *  else $XDG_CACHE_HOME/kerntune/cache.db (when XDG_CACHE_HOME is absolute), else
 *  $HOME/.cache/kerntune/cache.db. KT_ERR_NOT_FOUND when KERNTUNE_CACHE=off or none of the
 *  three is set; KT_ERR_LIMIT when the path does not fit. */
KT_API kt_status kt_cache_default_path(char *buf, size_t len);

/**
 * Opens the store at path (NULL: kt_cache_default_path, so KT_ERR_NOT_FOUND with
 * KERNTUNE_CACHE=off; ":memory:": a private in-memory store), creating the file and its
 * directories (mode 0700) when missing, and stores the handle in *out (NULL on failure). The file is
 * put in WAL mode; calls wait up to 10 s for other processes' locks. A file of schema version 1
 * or 2 is migrated in place; a file written by a newer kerntune (a newer schema version), or a
 * database that is not a kerntune cache, is refused with KT_ERR_STATE and left untouched.
 * A damaged file (not a database, truncated, corrupt) is moved aside to
 * "<path>.corrupt-<unix time>" (never deleted) and a fresh store started; a store this process
 * cannot write (read-only file or directory) is replaced by an in-memory one. Both succeed, and
 * kt_cache_warning says what happened.
 */
KT_API kt_status kt_cache_open(const char *path, kt_cache **out);

/** Closes the store. NULL is harmless. */
KT_API void kt_cache_close(kt_cache *cache);

/** Returns the file in use, or ":memory:" for an in-memory store (also after a fallback); NULL
 *  for a NULL cache. Valid until kt_cache_close. */
KT_API const char *kt_cache_path(const kt_cache *cache);

/** Returns "" or what opening (or a later recovery from damage) did: moved a damaged file
 *  aside, fell back to memory. Valid until kt_cache_close. */
KT_API const char *kt_cache_warning(const kt_cache *cache);

/** Stores in *count the number of decisions stored, of op and of device when not NULL. */
KT_API kt_status kt_cache_count(kt_cache *cache, const char *op, const char *device, size_t *count);

/**
 * Exports the decisions (all, or only those of op and of device when not NULL) as a wisdom
 * document into *json, a NUL-terminated string to free with kt_free. Entries are ordered by op,
 * device, candidate set, version and key; the document is:
 *
 *   {"kerntune_wisdom": 1, "library_version": "0.1.0", "entries": [
 *     {"op": "matmul", "candidate_set": "<hex>", "device": "<fingerprint>",
 *      "library_version": "0.1.0", "key": [512, 512],
 *      "arch": "sm_90", "vendor": "NVIDIA",       (the device's, as its backend classifies it;
 *                                                    absent when unknown)
 *      "key_kinds": "ss",    (per key component: s a size, c a category; absent when unknown)
 *      "winner": {"candidate": "tiled", "config": "TM=16,TN=8"},    (config null for natives)
 *      "time_ns": 1234.5, "confidence": 0.99,                     (null when unknown)
 *      "requested_confidence": 0.99,                 (what the race asked for; null: nothing)
 *      "created": 1764000000,                                     (unix time)
 *      "units": [{"candidate": "tiled", "config": "TM=16,TN=8", "unit_hash": "<hex>",
 *                 "outcome": "measured",   (not_run|measured|rejected|failed|invalid|build_failed
 *                                           |timeout|crashed)
 *                 "time_ns": 1234.5,       (negative when not measured)
 *                 "ci_ns": [1200.0, 1260.0],                      (null when unknown)
 *                 "runs": 10, "warmups": 1, "message": null,
 *                 "finalist": true}]}]}    (still racing when the race stopped, or the winner)
 *
 * A stored row that is not valid fails the export with KT_ERR_INVALID_ARGUMENT naming it.
 */
KT_API kt_status kt_cache_export(kt_cache *cache, const char *op, const char *device, char **json);

/**
 * Lists the keys deferred by misses under capture (kt_op_set_capture_miss) and not yet tuned
 * (all, or only those of op and of device when not NULL) as a JSON document into *json, to free
 * with kt_free. Entries are ordered by op, device, candidate set, version, then as recorded:
 *
 *   {"kerntune_deferred": 1, "entries": [
 *     {"op": "scale", "candidate_set": "<hex>", "device": "<fingerprint>",
 *      "library_version": "0.1.0", "key": [4096],
 *      "args": "buffer:4096,i64:1024",   (each argument: a buffer's bytes, a scalar's value)
 *      "created": 1764000000}]}                                   (unix time)
 *
 * Only the program that declares the op can tune them (kt_op_tune_deferred). A stored row that
 * is not valid fails with KT_ERR_INVALID_ARGUMENT naming it.
 */
KT_API kt_status kt_cache_deferred(kt_cache *cache, const char *op, const char *device, char **json);

/**
 * Imports a wisdom document (as kt_cache_export writes it; requested_confidence and finalist may
 * be absent, as in documents written before they existed). Every entry is checked before
 * anything is written, for what can be checked without the op: types, names and sizes,
 * configuration text ("NAME=VALUE,..."), times that agree with outcomes and intervals,
 * confidences in range, no unit twice, the winner among the units with their time, a creation
 * time not in the future. The first problem fails the import with KT_ERR_INVALID_ARGUMENT and a
 * message naming the entry, the field and why, e.g. "kt_cache_import: entries[3].units[0].time_ns:
 * expected a number, got a string", or the line and column of a JSON syntax error. A document (or
 * entry) of another MAJOR library version, or naming one decision twice, is refused the same way.
 * The entries are then applied in one transaction, all or nothing: a decision already stored is
 * kept unless replace is nonzero. added, replaced and kept (each may be NULL) receive the counts.
 * Unknown members are ignored. What only the op can tell is checked when a decision is used
 * (kt_decision_cache_rejected).
 */
KT_API kt_status kt_cache_import(kt_cache *cache, const char *json, int replace, size_t *added,
                                 size_t *replaced, size_t *kept);

/**
 * Explains how a key nobody tuned would be answered for op (of this library version) on device
 * (a fingerprint) under effort CACHE_ONLY, by the rules of kt_decision_source, from what the
 * cache holds: a JSON document into *json, to free with kt_free:
 *
 *   {"op": "scale", "device": "<fingerprint>", "arch": "sm_90", "vendor": "NVIDIA",
 *    "key": [4096],
 *    "recorded": {"key": [...], "winner": {...}} or null,   (this very key, decided here)
 *    "candidates": [{"rule": "nearest key", "device": "<fingerprint>", "key": [2048],
 *                    "distance": 1.0, "winner": {"candidate": "big", "config": null}}, ...]}
 *
 * key holds the key's components (kt_decision_key); arch and vendor are the device's, or NULL
 * to take them from its decisions in the cache. The candidates come in the order the rules try
 * them; which of them accept a call's arguments only the op can tell: the first that does
 * answers, else the op's default.
 */
KT_API kt_status kt_cache_explain(kt_cache *cache, const char *op, const char *device, const char *arch, const char *vendor,
                                  const int64_t *key, size_t nkey, char **json);

/** Removes the decisions of op and of device (NULL: any; both NULL: every decision) with their
 *  units; *removed (may be NULL) receives how many decisions. */
KT_API kt_status kt_cache_remove(kt_cache *cache, const char *op, const char *device, size_t *removed);

#ifdef __cplusplus
}
#endif

#endif /* KERNTUNE_CACHE_H */
