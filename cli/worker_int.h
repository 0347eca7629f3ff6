/*
 * worker_int.h - what the fleet worker's two files share: worker.c sets the worker up (its
 * options, heartbeat, runs and the jobs' streams), worker_serve.c serves the jobs, one batch at
 * a time or streaming (building the next jobs while the device measures the current ones).
 */
#ifndef KT_CLI_WORKER_INT_H
#define KT_CLI_WORKER_INT_H

#include "fleet.h"
#include "tune.h"

#ifndef KT_NO_REDIS

#include <kerntune/device.h>

#include <hiredis/hiredis.h>

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>

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
    worker_stream stream;
} worker_opts;

/* A job as taken from its stream. */
typedef struct job {
    char stream[64], id[64];
    char run[40], seq[24], config[4096];
    unsigned long from, runs;
    long long deliveries;
} job;

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
    char streams[2][64];
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
} worker;

extern volatile sig_atomic_t worker_interrupted;

/* worker.c */
session *worker_session(worker *w, lane *l, const char *run, bool *gone);
size_t worker_next_jobs(worker *w, lane *l, job *js, size_t max);
void worker_ack(worker *w, lane *l, const char *stream, const char *id);
bool worker_finish(worker *w, lane *l, const job *j, const char *result);
void worker_lane_free(lane *l);

/* worker_serve.c: takes and measures jobs until a signal or --max-jobs; the jobs in flight the
 * worker announces (the coordinator keeps that many on the stream). */
void worker_serve(worker *w);
long worker_in_flight(const worker *w);

#endif /* KT_NO_REDIS */
#endif
