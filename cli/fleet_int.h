/*
 * fleet_int.h - what the coordinator's two files share: fleet.c runs the jobs (the backend that
 * stands for the workers, the reader of their results, the progress line); fleet_open.c
 * publishes a run, finds its workers and closes it.
 */
#ifndef KT_CLI_FLEET_INT_H
#define KT_CLI_FLEET_INT_H

#include "fleet.h"

#ifndef KT_NO_REDIS

#include <kerntune/backend.h>
#include <kerntune/decision.h>

#include <jansson.h>
#include <hiredis/hiredis.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

/* One configuration's measurements, as workers sent them. */
typedef struct record {
    char *config;
    bool known;          /* a first result came */
    kt_outcome outcome;
    char *message;
    double *runs;
    size_t nruns, cap;
} record;

typedef struct job {
    char *config;
    size_t from, runs;
    char entry[48];      /* its stream entry, withdrawn at the end */
    bool direct;         /* on measure_key, not jobs_key: more runs of what was built already */
    bool done;
    unsigned starts;     /* "start" events: more than one means it was taken over */
    json_t *result;
} job;

/* A loaded configuration: where the engine is in its runs. */
typedef struct module {
    record *rec;
    size_t next;
} module;

struct fleet {
    kt_backend backend; /* first: the backend's state is the fleet itself */
    char *url;
    redisContext *c;    /* submitting, under mu */
    redisContext *rc;   /* the reader's */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t reader;
    bool reader_started;
    atomic_bool stop;
    char run[40], run_key[96], results_key[96], jobs_key[64];
    char measure_key[64]; /* the device model's jobs stream: jobs_key too, unless compile workers build first */
    char device[256], fingerprint[1024];
    char compiler[1024], arch[128], vendor[128]; /* the workers' device, as they describe it */
    /* the run's hash, kept to publish it again should Redis lose it */
    size_t nfields;
    const char *fields[24];
    size_t lens[24];
    char *owned[24];
    job *jobs;
    size_t njobs, jcap;
    record **recs;       /* open addressing on the configuration text */
    size_t rmask, nrecs;
    fleet_stats st;
    bool progress, shown;
    void (*status_fn)(char *buf, size_t len, void *user);
    void *status_user;
    struct timespec cpu0;
};

/* The backend whose one device stands for the workers (fleet_backend copies it into the fleet). */
extern const kt_backend fleet_backend_table;

/* Runs a command on *c, reconnecting while Redis does not answer (*reconnected, when not NULL,
 * says whether it had to); past 30 s without an answer the tuning stops as an interrupted run
 * does. NULL only once the fleet is closing. */
redisReply *fleet_command(fleet *f, redisContext **c, int argc, const char **argv, const size_t *lens, bool *reconnected);

/* Publishes the run's hash (again, should Redis have lost it); false with *err. */
bool fleet_publish(fleet *f, redisContext **c, char **err);

/* Makes the consumer group of the run's job stream; false with *err. */
bool fleet_make_group(fleet *f, redisContext **c, char **err);

/* The thread that reads the run's result stream and beats the run's heartbeat, until f->stop. */
void *fleet_reader_main(void *p);

/* The progress line on stderr (under mu); final: the last one, ended by a newline. */
void fleet_show_progress(fleet *f, bool final);

#endif
#endif
