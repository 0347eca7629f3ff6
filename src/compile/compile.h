/*
 * compile.h - building variants into cached artifacts (compile.c): the key, the artifact's
 * place, recorded failures, one build at a time on any thread. Internal.
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

/* One variant to build. The caller fills backend..req (req.out_path is the build's own) and
 * may set no_load; kt__build_keyed fills key, path and dup_of; kt__build_run_one fills status,
 * log, cached, build_ms and module. */
typedef struct kt__build {
    const kt_backend *backend;
    void *bstate;
    size_t device;
    const char *device_fp;
    kt_build_request req;
    char key[33];
    char path[4096];
    long dup_of;        /* -1 (kt__build_keyed); a caller building several may note the build with the same key */
    kt_status status;
    char log[2048];     /* the compiler's log or the loader's error when status is not KT_OK */
    bool cached;        /* the artifact was on disk already */
    bool no_load;       /* build (or find) the artifact only: bench/compile times the phases */
    double build_ms;    /* how long the build took (0 when cached) */
    void *module;
} kt__build;

/* Building one variant at a time, on the caller's threads (tune/builder.c's, bench/compile.c's):
 * asks backend b for its compiler's identity (into compiler) and creates the artifact
 * directory; computes one build's key and path (dup_of -1); builds (or finds) and loads one
 * (thread-safe). */
kt_status kt__build_begin(kt__artifacts *arts, const kt_backend *b, void *bstate, size_t device, char *compiler, size_t len);
void kt__build_keyed(const kt__artifacts *arts, const char *compiler, kt__build *bd);
void kt__build_run_one(kt__artifacts *arts, kt__build *bd);

/* The default artifact directory (see kt_context_set_artifact_dir). */
kt_status kt__default_artifact_dir(char *out, size_t len);

#endif
