/*
 * kerntune/aot.h - decisions made ahead of time, compiled into a program.
 *
 * `kerntune aot` reads decisions from the persistent cache (or wisdom files) and emits a C
 * source and header holding them as constant tables of the types below, one table per device
 * fingerprint. A program that links them and registers a table (kt_context_add_decisions)
 * dispatches every listed key without measuring and without reading the cache: on a key's
 * first call the op finds the key's entry (op name, candidate set, device, key) and launches its
 * winner, if the winner is still valid for the arguments (a candidate of today's op that accepts
 * them; for a variant group a configuration of today's space for them). An entry that is not
 * valid is skipped with a log line, and the key is decided as without the table. The table's
 * entries also answer keys nobody tuned under CACHE_ONLY (kt_decision_source: the nearest key
 * of the table's device, ...) without any cache at all. With `--embed` the winners' compiled
 * artifacts (a cubin, an OpenCL program binary, the C backend's shared object) are in the table
 * too: the op loads them without a compiler.
 *
 * The types are part of the stable ABI: emitted files of one library version are read by later
 * ones of the same MAJOR version (kt_aot_table.version says which layout).
 */
#ifndef KERNTUNE_AOT_H
#define KERNTUNE_AOT_H

#include <kerntune.h>

#ifdef __cplusplus
extern "C" {
#endif

/** The layout version of kt_aot_table and kt_aot_entry. */
#define KT_AOT_VERSION 1

/** One decision: the winner of one key of one op. */
typedef struct kt_aot_entry {
    const char *op;          /**< the op's name */
    const char *set_hash;    /**< its candidate set's identity (as the cache keeps it) */
    const int64_t *key;      /**< the key's words: its components, then the validity mask */
    size_t key_len;
    const char *key_kinds;   /**< per component: 's' a size, 'c' a category ("" unknown) */
    const char *candidate;   /**< the winner candidate's name */
    const char *config;      /**< its configuration ("A=1,B=2"), NULL for a native candidate */
    double time_ns;          /**< its measured time when it was decided */
    const char *artifact;    /**< a variant's: its artifact's file name in the artifact directory
                                  (NULL or "" for a native, or when not known) */
    const unsigned char *artifact_bytes; /**< with `kerntune aot --embed`: the artifact itself
                                  (NULL when not embedded), written into the context's artifact
                                  directory when the op needs it, so nothing is compiled */
    size_t artifact_len;
} kt_aot_entry;

/** The decisions made on one device, ordered by op, candidate set and key words. */
typedef struct kt_aot_table {
    int version;                  /**< KT_AOT_VERSION when it was emitted */
    const char *library_version;  /**< kt_version_string() of the library that made the decisions */
    const char *device;           /**< the device fingerprint they were made on */
    const char *arch, *vendor;    /**< that device's architecture and vendor ("" unknown) */
    const char *compiler;         /**< its backend's compiler identity then (variants' artifacts
                                       are keyed by it), which a program without the compiler
                                       takes as its own, so that carried artifacts are found;
                                       NULL or "" when not known */
    const kt_aot_entry *entries;
    size_t count;
} kt_aot_table;

/**
 * Registers a table of decisions made ahead of time with the context, which keeps a pointer to
 * it: the table must outlive the context (an emitted table is a constant of the program). Its
 * entries serve the context's ops whose device has the table's fingerprint, before the
 * persistent cache is read. A table made on a device that none of the context's devices is
 * (another fingerprint), of another layout version or another library MAJOR version, is ignored:
 * the call succeeds, logs why at level WARN, and *used (may be NULL) receives 0; else 1.
 * Register tables before the ops' first calls. At most 64 tables per context.
 */
KT_API kt_status kt_context_add_decisions(kt_context *ctx, const kt_aot_table *table, int *used);

/** Returns how many of the context's decisions were taken from registered tables. */
KT_API uint64_t kt_context_table_hits(const kt_context *ctx);

#ifdef __cplusplus
}
#endif

#endif /* KERNTUNE_AOT_H */
