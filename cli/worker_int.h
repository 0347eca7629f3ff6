/*
 * worker_int.h - what the fleet worker's two files share: worker.c sets the worker up (its
 * options, heartbeat, runs and the jobs' streams), worker_serve.c serves the jobs, one batch at
 * a time or streaming (building the next jobs while the device measures the current ones).
 */
#ifndef KT_CLI_WORKER_INT_H
#define KT_CLI_WORKER_INT_H

#include "fleet.h"
#include "fleet_wire.h"
#include "tune.h"

#ifndef KT_NO_REDIS

#include <kerntune/device.h>

#include <hiredis/hiredis.h>

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>

typedef fleet_job job; /* a job as taken from its stream (fleet_wire.h) */

typedef enum worker_stream { STREAM_AUTO, STREAM_ON, STREAM_OFF } worker_stream;

typedef struct worker_opts {
    const char *url, *name;
    long device;
    double claim_s;
    double pace; /* 0: replayed jobs take no time */
    bool quiet, json;
    long max_jobs;
    long batch;          /* jobs taken at once (streaming: the most in hand) */
    bool batch_given;
    long build_threads;  /* streaming: jobs built at once (0: one per processor) */
    double build_timeout; /* building ahead or for others: seconds before a build is given up */
    worker_stream stream;
    bool build_only;     /* a compile worker: builds jobs for the device, never measures */
    const char *share;   /* a directory that hands artifacts on instead of Redis, or NULL */
} worker_opts;


/* One run this worker has set up. */
typedef struct session {
    char run[40];
    char dir[64];
    tune_bench *bench;
    char *error;      /* why it could not be set up (every job of the run then fails with it) */
    uint64_t used;
} session;

enum { SESSIONS = 4, POISON = 8, HAND = 128, AHEAD = 64 };

/* What a thread that takes jobs or sets runs up needs of its own: hiredis connections and
 * kerntune contexts serve one thread at a time. */
typedef struct lane {
    struct worker *w;
    bool build_only;       /* its runs are set up to build, not to measure (tune_bench_args) */
    redisContext *c;
    session sessions[SESSIONS];
    uint64_t tick;
} lane;

/* A job in hand: being built ahead, built and waiting for the device, or being measured. */
enum { FREE, BUILDING, READY, MEASURING };

typedef struct worker {
    worker_opts o;
    char name[256];
    char compiler[1024];
    lane main;             /* the measuring thread's (and the only one without streaming) */
    lane ahead[AHEAD];     /* the build-ahead threads' (streaming) */
    size_t nahead;
    redisContext *hc;      /* the heartbeat's */
    kt_context *ctx;
    const kt_device *dev;
    size_t devi;
    char streams[3][64];   /* this device model's jobs, replayed jobs, jobs to build first */
    pthread_mutex_t mu;    /* the jobs in hand */
    pthread_cond_t cv;     /* a job became ready, or room was made */
    job hand[HAND];        /* the jobs in hand (renewed by the heartbeat) */
    int state[HAND];       /* FREE, BUILDING, READY, MEASURING */
    uint64_t ready_at[HAND]; /* the order jobs became ready in */
    uint64_t readies;
    bool streaming;
    size_t build_threads;  /* streaming: the build-ahead threads (one build each) */
    double build_s, measure_s; /* streaming: a job's build, and its measuring (moving averages) */
    pthread_t beat, ahead_th[AHEAD];
    bool beat_started;
    size_t ahead_started;
    size_t taking;         /* build-ahead threads asking Redis for a job */
    atomic_bool stop;
    atomic_bool ahead_stop; /* the build-ahead thread takes no more jobs */
    atomic_long jobs;
    atomic_long built_ahead, found_ahead;
    atomic_long handed_on, received, rejected; /* artifacts: sent on (compile worker), placed, failing their digest */
} worker;

extern volatile sig_atomic_t worker_interrupted;

/* Which streams worker_next_jobs reads: a measuring worker's (its model's jobs and replays first,
 * then jobs still to build), or a compile worker's (jobs to build). */
typedef enum jobs_from { JOBS_MEASURE, JOBS_BUILD } jobs_from;

/* worker.c */
session *worker_session(worker *w, lane *l, const char *run, bool *gone);
size_t worker_next_jobs(worker *w, lane *l, job *js, size_t max, jobs_from from);
void worker_ack(worker *w, lane *l, const char *stream, const char *id);
bool worker_finish(worker *w, lane *l, const job *j, const char *result);
/* Adds the entry add[0..nadd) (an XADD) and acknowledges job j (removing it from its stream too
 * when remove), in one transaction. */
bool worker_answer(worker *w, lane *l, const char *const *add, int nadd, const job *j, bool remove);
void worker_lane_free(lane *l);

/* worker_build.c: a compile worker's serving (worker_serve calls it), and a measuring worker's
 * use of what one built: the artifact of job j put into this worker's artifact directory
 * once its digest is checked (a failing one is counted and left: the job is built here). */
void worker_serve_builds(worker *w);
void worker_receive(worker *w, lane *l, const job *j);

/* worker_serve.c: takes and measures jobs until a signal or --max-jobs; the jobs in flight the
 * worker announces (the coordinator keeps that many on the stream). */
void worker_serve(worker *w);
/* Moves job j in hand from state from to state to (from FREE: takes it in hand; to FREE:
 * lets it go), under the worker's lock. */
void worker_hand(worker *w, const job *j, int from, int to);
long worker_in_flight(const worker *w);

#endif /* KT_NO_REDIS */
#endif
