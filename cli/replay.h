/*
 * replay.h - a backend that replays recorded measurements instead of running kernels.
 *
 * Registered by `kerntune tune --simulate FILE`, it is an ordinary backend as far as the
 * library knows: "building" a configuration writes its defines into the artifact, "loading" it
 * finds the configuration's record, and "launching" it serves the next recorded runtime (in the
 * order recorded, or sampled with a seed), or the recorded mean with --measure recorded. So
 * search and measurement run through exactly the same engine as on hardware, with no GPU and
 * no kernel source.
 */
#ifndef KT_CLI_REPLAY_H
#define KT_CLI_REPLAY_H

#include "t4.h"

#include <kerntune/backend.h>

#include <stdatomic.h>

typedef struct replay_data {
    kt_backend backend;   /* the table registered with the context (replay_backend): replay's
                           * callbacks find this data through it, so none needs a global */
    const char *source;   /* the recorded file */
    t4_records recs;
    int recorded;         /* serve each configuration's recorded mean */
    int sampled;          /* serve runtimes sampled with seed instead of in order */
    uint64_t seed;
    unsigned skip;        /* a configuration's runs are served from this index (a fleet worker
                           * continuing a measurement another one began) */
    _Atomic uint64_t served_ns; /* simulated time of every run served, whole ns (atomic: the
                                 * budget clock, replay_clock_s, is read on any thread) */
    uint64_t served_runs;
    _Atomic uint64_t built_ns; /* the recorded compile and framework times of the configurations
                                * built (builds run in parallel) */
} replay_data;

/* Fills in data's backend table and returns it, for kt_context_add_backend: the backend's state
 * is data itself, which must outlive the context. */
const kt_backend *replay_backend(replay_data *data);

/* The replay's simulated time in seconds (data: its replay_data): what the runs served and the
 * configurations built cost when they were recorded; a kt_clock_fn, so that a budget of seconds
 * counts it (kt_context_set_budget_clock). Safe on any thread. */
double replay_clock_s(void *data);

/* The record of a configuration given as kerntune's configuration text, or NULL. */
const t4_record *replay_find(const replay_data *data, const char *config);

/* The buffers of a stand-in device (replay, a fleet's coordinator): host memory that nothing
 * reads, for a backend table's buffer_alloc, _free, _copy and _fill. */
kt_status replay_buffer_alloc(void *state, size_t device, size_t bytes, void **out, char *err, size_t errlen);
void replay_buffer_free(void *state, size_t device, void *buffer);
kt_status replay_buffer_copy(void *state, size_t device, void *dst, const void *src, size_t bytes, kt_copy_dir dir, char *err,
                             size_t errlen);
kt_status replay_buffer_fill(void *state, size_t device, void *buffer, size_t bytes, const void *pattern, size_t pattern_bytes,
                             char *err, size_t errlen);

/* The key kerntune's defines give, in the parameters' order: "A=1,B=2" (allocated; NULL when out
 * of memory). A configuration's artifact holds it (replay and fleet backends). */
char *replay_defines_key(const kt_build_request *req);

/* The key an artifact holds (allocated), or NULL when it cannot be read. */
char *replay_read_key(const char *path);

#endif
