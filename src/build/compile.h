/*
 * compile.h - building variants into cached artifacts, in parallel (compile.c). Internal.
 */
#ifndef KT_COMPILE_H
#define KT_COMPILE_H

#include <kerntune/backend.h>

#include "util/util.h"

#include <stdatomic.h>

#define KT__ARTIFACT_DIR_MAX 3900    /* characters of an artifact directory (its files' paths fit 4096) */

/* Where artifacts go and how many threads build them: a context owns one (its settings and
 * counters); the functions below read it. */
typedef struct kt__artifacts {
    char dir[KT__ARTIFACT_DIR_MAX + 1];
    size_t threads;               /* 0: one per core */
    _Atomic uint64_t compiles;    /* builds run (artifact cache misses) */
    _Atomic uint64_t hits;        /* artifacts found on disk */
    /* Optional: the bytes of an artifact the program carries (tune/aot.c), by its file name,
     * written into place when it is not on disk instead of building it; NULL when none. */
    const unsigned char *(*carried)(void *user, const char *name, size_t *len);
    /* ... and the compiler identity that keyed them, for device `device` of backend b, when the
     * backend cannot say its own (no compiler installed); NULL when none is carried. */
    const char *(*carried_compiler)(void *user, const kt_backend *b, size_t device);
    void *carried_user;
} kt__artifacts;

/* One variant to build. The caller fills backend..req (req.out_path is the pool's) and may set
 * no_load; prepare fills key, path and dup_of; run fills status, log, cached, build_ms and
 * module. A build whose module is already set when run starts (found loaded elsewhere) is
 * skipped. */
typedef struct kt__build {
    const kt_backend *backend;
    void *bstate;
    size_t device;
    const char *device_fp;
    kt_build_request req;
    char key[33];
    char path[4096];
    long dup_of;        /* index of the build with the same key that really builds, or -1 */
    kt_status status;
    char log[2048];     /* the compiler's log or the loader's error when status is not KT_OK */
    bool cached;        /* the artifact was on disk already */
    bool no_load;       /* build (or find) the artifact only: bench/compile times the phases */
    double build_ms;    /* how long the build took (0 when cached) */
    void *module;
} kt__build;

/* Asks the backend of builds[0] (every build's) for its compiler's identity, creates the
 * artifact directory, computes every build's key and artifact path, and finds duplicates.
 * Fails when the compiler or the directory fails. */
kt_status kt__build_prepare(kt__artifacts *arts, kt__build *builds, size_t n);

/* The pieces of kt__build_prepare and kt__build_run, for a caller that builds one at a time
 * (tune/builder.c): asks backend b for its compiler's identity (into compiler) and creates the
 * artifact directory; computes one build's key and path (dup_of -1); builds (or finds) and
 * loads one, as the pool does (thread-safe). */
kt_status kt__build_begin(kt__artifacts *arts, const kt_backend *b, void *bstate, size_t device, char *compiler, size_t len);
void kt__build_keyed(const kt__artifacts *arts, const char *compiler, kt__build *bd);
void kt__build_run_one(kt__artifacts *arts, kt__build *bd);

/* Builds what is not on disk and loads every artifact, on a pool of arts->threads threads (0:
 * one per core; at most 64, and no more than there are distinct builds). Failures are per build
 * (status, log); the call itself fails only when it cannot allocate the pool. */
kt_status kt__build_run(kt__artifacts *arts, kt__build *builds, size_t n);

/* The default artifact directory (see kt_context_set_artifact_dir). */
kt_status kt__default_artifact_dir(char *out, size_t len);

#endif
