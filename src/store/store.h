/*
 * store.h - the persistent cache (src/store/) as the other stages see it: the tuner's calls.
 *
 * The public face of the cache is kerntune/cache.h (open, count, export, import, remove). The tuner reads and writes single decisions through the functions below
 * (records.c; the folder's files are listed in store_int.h, which no other stage includes),
 * which take and return whole records: a decision with every unit it considered, so that a
 * later tuning with a changed candidate set can reuse the measurements and failures of the
 * units that did not change (kt__store_get_unit).
 *
 * All functions are safe to call from several threads on one kt_cache, and from many processes
 * on one file. Records handed out are owned copies: free them with kt__store_rec_free /
 * kt__store_unit_free.
 */
#ifndef KT_STORE_H
#define KT_STORE_H

#include <kerntune.h>
#include <kerntune/cache.h>
#include <kerntune/decision.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Newest schema version (PRAGMA user_version) this library reads and writes. Version 1: one
 * `decisions` table without confidence; version 2: decisions.confidence and the `units` table;
 * version 3: decisions.requested_confidence and units.finalist; version 4: the `deferred` table;
 * version 5: the `progress` table; version 6: decisions.arch, decisions.vendor and
 * decisions.key_kinds, for answering keys nobody tuned (tune/fallback.c), and
 * decisions.artifact, for decisions emitted with their artifacts (kerntune aot --embed). */
#define KT__STORE_SCHEMA 6

/* Longest key a record may have, in 64-bit words. */
#define KT__STORE_KEY_MAX 24 /* every word a key can have: KT__KEY_WORDS_MAX (checked in tune/recall.c) */

/* Writes key words (at most KT__STORE_KEY_MAX) as the store keeps them: decimal, separated by
 * commas, "" for none (buf: KT__KEYTEXT_MAX bytes). In every build, with or without a cache. */
#define KT__KEYTEXT_MAX (KT__STORE_KEY_MAX * 21 + 1)
void kt__rec_key_text(const int64_t *key, size_t n, char *buf);

/* One unit of a decision: a native candidate, or one configuration of a variant group. */
typedef struct kt__store_unit {
    char *candidate;              /* candidate name */
    char *config;                 /* configuration text "A=1,B=2", or NULL for a native candidate */
    char *unit_hash;              /* hex hash of the unit's code (candidate source, options, config) */
    int outcome;                  /* a kt_outcome value (0..7) */
    double time_ns;               /* estimate; negative when not measured */
    double ci_low_ns, ci_high_ns; /* confidence interval of the estimate; negative when unknown */
    unsigned runs, warmups;
    char *message;                /* first diagnostic line of a failure, or NULL */
    bool finalist;                /* measured and still racing when the race stopped, or the winner */
} kt__store_unit;

/* One decision: what identifies it (op, set_hash, device, version, key) and what was decided. */
typedef struct kt__store_rec {
    char *op, *set_hash, *device, *version; /* op name, candidate-set hash, device fingerprint,
                                               library version ("0.1.0") */
    int64_t *key;                           /* the tuning key words (at most KT__STORE_KEY_MAX) */
    size_t key_len;
    char *winner_candidate, *winner_config; /* winner_config NULL for natives */
    double time_ns, confidence;             /* the winner's time; confidence in [0,1], negative
                                               when unknown (decisions migrated from schema 1) */
    double requested_confidence;            /* the confidence the race asked for, in [0,1];
                                               negative when none (another policy, or recorded
                                               before schema 3). A decision whose confidence is
                                               below it is not settled: kt__store_unsettled */
    int64_t created;                        /* unix time of the recording */
    char *arch, *vendor;                    /* the device's architecture and vendor, as its
                                               backend classifies it ("" when unknown) */
    char *key_kinds;                        /* per declared key component: 's' a size, 'c' a
                                               category; the key's other words are the validity
                                               mask ("" when unknown) */
    char *artifact;                         /* the winner's artifact file name in the artifact
                                               directory ("" for a native, or unknown) */
    char *compiler;                         /* the device's compiler identity it was built with
                                               (artifacts are keyed by it; "" when none) */
    kt__store_unit *units;
    size_t nunits;
} kt__store_rec;

/* Looks up the decision of exactly (op, set_hash, device, version, key); only those fields of
 * id are read. KT_ERR_NOT_FOUND when absent. A stored row whose columns have the wrong SQLite
 * types or impossible values (outcome out of range, negative runs, NULL or empty names) is not
 * returned: KT_ERR_INVALID_ARGUMENT with a message naming the column. On success *out holds
 * owned copies (free with kt__store_rec_free); on failure *out is zeroed. */
kt_status kt__store_get(kt_cache *c, const kt__store_rec *id, kt__store_rec *out);

/* Inserts the decision and its units, replacing a stored decision of the same identity, in one
 * transaction. Names must be non-empty, outcomes 0..7, times finite, confidence and
 * requested_confidence at most 1. */
kt_status kt__store_put(kt_cache *c, const kt__store_rec *rec);

/* Finds the most recently stored unit with this unit_hash among the decisions of (op, device,
 * version, key) under any candidate-set hash, and the progress of their tunings: lets a changed candidate set reuse the
 * measurements and failures of unchanged units. With skip_own, the decision of id's exact
 * identity (its set_hash included) is not consulted: a record that was rejected lends nothing.
 * Otherwise id's set_hash is not read. KT_ERR_NOT_FOUND when absent; KT_ERR_INVALID_ARGUMENT
 * for an invalid stored row, as kt__store_get. */
kt_status kt__store_get_unit(kt_cache *c, const kt__store_rec *id, const char *unit_hash, bool skip_own, kt__store_unit *out);

/* Records units (n) that a tuning of id's identity (op, set_hash, device, version, key) has
 * decided so far, as it goes: a tuning killed midway keeps them, and kt__store_get_unit finds
 * them like a decision's units. kt__store_put of the decision replaces them. Names must be
 * non-empty, outcomes 0..7, times finite. */
kt_status kt__store_progress_put(kt_cache *c, const kt__store_rec *id, const kt__store_unit *units, size_t n);

/* Whether a record ended below the confidence its race asked for (both known). */
bool kt__store_unsettled(const kt__store_rec *r);

/* Every decision recorded for op name op and library version version, on any device, of any
 * candidate set, without units (nunits 0), in recording order, into *out (*n of them; free each
 * with kt__store_rec_free, then the array with free). A row that cannot be read is skipped. */
kt_status kt__store_list(kt_cache *c, const char *op, const char *version, kt__store_rec **out, size_t *n);

/* A record (and its units) as the text of one wisdom entry (allocated; free it), and back:
 * every check kt_cache_import makes (messages name `what`). */
kt_status kt__store_rec_json(const kt__store_rec *r, char **text);
kt_status kt__store_rec_parse(const char *text, const char *what, kt__store_rec *out);

/* Free what a record or unit owns and zero it; the struct itself is the caller's. NULL is
 * harmless. */
void kt__store_rec_free(kt__store_rec *r);
void kt__store_unit_free(kt__store_unit *u);

/* ---- keys deferred by misses under capture (deferred.c) ------------------------------------- */

/* One deferred key: its identity (id's op, set_hash, device, version, key; nothing else of id is
 * used) and the call's arguments as the tuner wrote them (tune/deferred.c). */
typedef struct kt__store_deferred {
    kt__store_rec id;
    char *args;
    int64_t created; /* unix time */
} kt__store_deferred;

/* Records the deferred key of id's identity with the arguments' text; a key already recorded
 * is kept as it is. */
kt_status kt__store_defer_put(kt_cache *c, const kt__store_rec *id, const char *args);

/* Reads the deferred keys of id's op, set_hash, device and version (its key is not read), in
 * the order they were recorded, into *out (*n of them; free with kt__store_deferred_free). An
 * invalid stored row fails with KT_ERR_INVALID_ARGUMENT naming its column. */
kt_status kt__store_defer_list(kt_cache *c, const kt__store_rec *id, kt__store_deferred **out, size_t *n);

/* Removes the deferred key of id's identity (nothing when absent). */
kt_status kt__store_defer_remove(kt_cache *c, const kt__store_rec *id);

/* Frees n deferred keys and the array. NULL is harmless. */
void kt__store_deferred_free(kt__store_deferred *d, size_t n);

#endif /* KT_STORE_H */
