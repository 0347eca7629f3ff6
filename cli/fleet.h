/*
 * fleet.h - tuning spread over many devices through Redis Streams (fleet.c, worker.c).
 *
 * `kerntune tune PROBLEM --workers redis://HOST:PORT[/DB]` (the coordinator) runs its search and
 * its race as a local run does, on a device that stands for the workers: building a
 * configuration there puts a job on a stream ("measure this configuration, runs FROM to
 * FROM+N"), and its runs are what a worker measured. `kerntune worker redis://...` (worker.c),
 * one per device, takes jobs through a consumer group, builds, validates and measures each on
 * its own device, and adds the result to the run's result stream. Redis keys, all under
 * "kerntune:fleet:":
 *
 *   workers            hash: worker name -> JSON {device, fingerprint, language, stream, seen}
 *                      (rewritten every second by each live worker; removed when it stops)
 *   jobs:<device>      stream of jobs for one device model (<device>: a hash of its
 *                      fingerprint, "replay" for replayed problems, which every worker takes),
 *                      consumed by the group "workers"
 *   run:<id>           hash: what a worker needs to measure as the coordinator would (the
 *                      problem, its files, a recording, options); "seen" is the coordinator's
 *                      heartbeat: a worker drops the jobs of a run whose coordinator is gone
 *   results:<id>       stream of "start" and "done" events of the run's jobs
 *   build:<device>     stream of jobs to build first, while compile workers serve the device
 *                      model (fleet_build_key), consumed by the group "workers"
 *   blob:<sha256>      an artifact a compile worker built, by its digest (expires in a day)
 *
 * A worker writes a job's result and acknowledges the job in one transaction (MULTI/EXEC): a job
 * is either done, with one result, or still pending. While it works on a job it re-claims it
 * (XCLAIM, every quarter of the claim timeout, at most every second), so a slow job keeps its
 * worker; a job whose worker died stays pending until its idle time passes the claim timeout,
 * then another worker takes it over (XAUTOCLAIM) before reading new jobs. The coordinator keeps
 * the first result of each job and counts any other.
 */
#ifndef KT_CLI_FLEET_H
#define KT_CLI_FLEET_H

#include "t1.h"

#include <kerntune/backend.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* What the workers need to measure a problem as this command would. */
typedef struct fleet_run {
    const char *problem;       /* the T1 file */
    const t1 *p;
    const char *simulate;      /* a recording to replay, or NULL */
    bool recorded;             /* --measure recorded */
    uint64_t seed;
    bool seed_given;
    const char *problem_size;  /* --problem-size text, or NULL */
    const char *const *defines;
    size_t ndefines;
    double timeout;
} fleet_run;

/* The coordinator's view of the fleet. */
typedef struct fleet fleet;

typedef struct fleet_stats {
    size_t workers;       /* live workers measuring on the run's device when it began */
    size_t compilers;     /* live compile workers building for it then (their jobs go to build:) */
    size_t ignored;       /* live workers on other devices */
    size_t batch;         /* jobs those workers take at once, summed over them */
    uint64_t jobs, done, failed, duplicates;
    uint64_t reclaimed;   /* jobs taken over from a worker that stopped answering */
    double cpu_s;         /* the coordinator's processor time since fleet_open */
} fleet_stats;

/* Connects to url, finds the live workers that can measure the run (waiting up to wait_s for
 * one), picks the device model most of them have, and publishes the run. progress: show jobs
 * queued, running, done and failed on stderr (a TTY line). On failure returns false with *err
 * (allocated) naming what failed. */
bool fleet_open(const char *url, const fleet_run *run, double wait_s, bool progress, fleet **out, char **err);

/* The backend whose one device is the workers' device model (name and fingerprint as a worker
 * reported them): give it to kt_context_add_backend. Valid until fleet_close. */
const kt_backend *fleet_backend(fleet *f);

/* The device the workers measure on, as they name it. */
const char *fleet_device_name(const fleet *f);

void fleet_get_stats(fleet *f, fleet_stats *s);

/* What the fleet's progress line shows before the jobs: fn writes it into buf (len bytes); called
 * from the fleet's own thread. NULL: the jobs alone. */
void fleet_set_status(fleet *f, void (*fn)(char *buf, size_t len, void *user), void *user);

/* Ends the progress line (its last state, then a new line) and shows no more. */
void fleet_progress_done(fleet *f);

/* How a worker saw configuration config fail (the library sees only that its build or launch
 * failed here): true with *outcome when a worker reported a failure of it. */
bool fleet_failure(fleet *f, const char *config, int *outcome);

/* Withdraws the run's jobs and keys, and disconnects. */
void fleet_close(fleet *f);

/* `kerntune worker`: argv[0] is "worker"; returns the exit status. */
int run_worker(int argc, char **argv);
void help_worker(FILE *out);

/* ---- shared by the coordinator and the worker ----------------------------------------------- */

#define FLEET_PREFIX "kerntune:fleet:"
#define FLEET_GROUP "workers"

/* The stream of jobs for a device of this fingerprint ("kerntune:fleet:jobs:<16 hex digits>"),
 * or of replayed problems (fingerprint NULL). */
void fleet_jobs_key(const char *fingerprint, char out[64]);

/* The stream of jobs to build first for that device model ("kerntune:fleet:build:<16 hex>"):
 * where the coordinator puts its jobs while compile workers (kerntune worker --build-only)
 * serve the model. A compile worker builds a job, hands its artifact on (blob:<sha256>, or a
 * shared directory) and moves the job to the jobs stream with the artifact's name and digest;
 * a measuring worker takes jobs there first, and from here when it has nothing to do (it builds
 * those itself), also those a compile worker took and stopped answering for. */
void fleet_build_key(const char *fingerprint, char out[64]);

/* Connects to url ("redis://host:port/db"; port 6379 and db 0 when left out) with a timeout in
 * ms for connecting and for each reply; NULL with *err on failure. The result is a
 * redisContext *. */
void *fleet_connect(const char *url, int timeout_ms, char **err);

/* Wall-clock milliseconds since the epoch (heartbeats compare them across machines). */
int64_t fleet_now_ms(void);

#endif
