/*
 * fleet_wire.h - the fleet's messages as they come out of Redis, decoded and checked: a job
 * (a stream entry a worker takes), an event (a start or a result the coordinator reads) and a
 * result's document. Nothing here talks to Redis: the replies may come from anyone who can
 * write to the fleet's streams, so every element's type is checked before it is read, and what
 * is not a well-formed message is refused, never trusted (tests/fuzz/fuzz-fleet.c).
 */
#ifndef KT_CLI_FLEET_WIRE_H
#define KT_CLI_FLEET_WIRE_H

#ifndef KT_NO_REDIS

#include <hiredis/hiredis.h>
#include <jansson.h>

#include <stdbool.h>

/* A job as taken from its stream (a worker's "job": worker_int.h). */
typedef struct fleet_job {
    char stream[64], id[64];
    char run[40], seq[24], config[4096];
    unsigned long from, runs;
    long long deliveries;
    char artifact[128], sha256[65]; /* built by a compile worker: the artifact's file name and digest */
    bool forwarded;      /* moved here by a compile worker: removed from its stream once done */
} fleet_job;

/* The entry's id ([id, [k, v, ...]]): a string of at most 63 bytes; NULL when it has none. */
const char *fleet_wire_id(const redisReply *ent);

/* Reads one stream entry [id, [k, v, ...]] of stream into j: true when it is a whole job (run,
 * seq, config, from and runs given, each fitting, from and runs decimal numbers); an artifact
 * or digest that does not fit is dropped (the job is then built again). */
bool fleet_wire_job(const redisReply *ent, const char *stream, fleet_job *j);

/* One entry of the results stream: a worker's "start" or "done" of job seq. */
typedef struct fleet_event {
    const char *type;   /* "start", "done", ... (NULL when absent); points into the reply */
    const char *result; /* a done's result document (text), or NULL */
    unsigned long long seq;
    bool has_seq;       /* seq was given as a decimal number */
} fleet_event;

/* Reads one entry of the results stream; false when it is not an entry ([id, [k, v, ...]]). */
bool fleet_wire_event(const redisReply *ent, fleet_event *ev);

/* A worker's result document, checked: an object whose "outcome" is a string, "message" and
 * "worker" strings when given, "runs" an array of finite non-negative numbers when given.
 * Anything else comes back as {"outcome": "failed", "message": "a worker's result could not be
 * read: WHY"}, so that a damaged result fails its configuration instead of timing it. NULL
 * only when out of memory. */
json_t *fleet_wire_result(const char *text);

#endif
#endif
