/*
 * fuzz-fleet.c - the fleet's messages (cli/fleet_wire.c) as a worker and the coordinator read
 * them: the input is what Redis would send (RESP), read by hiredis's reader into replies; each
 * reply is taken as an XREADGROUP answer ([[stream, [[id, [k, v, ...]], ...]], ...]) whose
 * entries are decoded as jobs and as events, and each event's result document is checked.
 * Promises: a job is whole (every field fits and is NUL-terminated) or refused; a result is a
 * checked document (an outcome string, runs of finite non-negative numbers) or a failure.
 */
#include "fuzz.h"

#include "fleet_wire.h"

#include <hiredis/read.h>
#include <math.h>

static void check_result(const char *text) {
    json_t *doc = fleet_wire_result(text);
    if (doc == NULL) return; /* out of memory */
    fuzz_check(json_is_string(json_object_get(doc, "outcome")), "a result without an outcome string");
    const json_t *runs = json_object_get(doc, "runs");
    for (size_t i = 0; i < json_array_size(runs); i++) {
        double v = json_number_value(json_array_get(runs, i));
        fuzz_check(json_is_number(json_array_get(runs, i)) && isfinite(v) && v >= 0, "run %zu is %g", i, v);
    }
    json_decref(doc);
}

static void entries(const redisReply *list) {
    for (size_t e = 0; list && list->type == REDIS_REPLY_ARRAY && e < list->elements; e++) {
        const redisReply *ent = list->element[e];
        fleet_job j;
        if (fleet_wire_job(ent, "kerntune:fleet:jobs:fuzz", &j)) {
            fuzz_check(memchr(j.run, 0, sizeof j.run) && memchr(j.seq, 0, sizeof j.seq) && memchr(j.config, 0, sizeof j.config) &&
                           memchr(j.artifact, 0, sizeof j.artifact) && memchr(j.sha256, 0, sizeof j.sha256) && j.id[0],
                       "a job's field is not a whole string");
        }
        fleet_event ev;
        if (fleet_wire_event(ent, &ev)) {
            fuzz_check(fleet_wire_id(ent) != NULL, "an event without an id");
            if (ev.result) check_result(ev.result);
        }
    }
}

/* Whether every array header ("*N") asks for no more elements than bytes follow it: what a
 * Redis server can send. hiredis 0.14 allocates an array's N slots when it reads the header
 * (its reader has no maxelements before hiredis 1.0), so that a larger N is a server's (trusted:
 * the fleet's own Redis) cost, not the messages' that the harness is about. */
static bool plausible(const uint8_t *data, size_t size) {
    for (size_t i = 0; i + 1 < size; i++) {
        if (data[i] != '*') continue;
        unsigned long long n = 0;
        size_t k = i + 1;
        while (k < size && data[k] >= '0' && data[k] <= '9' && n <= size) n = n * 10 + (unsigned)(data[k++] - '0');
        if (n > size - k) return false;
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!plausible(data, size)) return 0;
    if (size > 0 && data[0] == '{') { /* a result document alone */
        char *t = fuzz_text(data, size);
        if (t) check_result(t);
        free(t);
        return 0;
    }
    redisReader *r = redisReaderCreate();
    if (r == NULL) return 0;
    if (redisReaderFeed(r, (const char *)data, size) == REDIS_OK) {
        void *reply = NULL;
        for (int k = 0; k < 16 && redisReaderGetReply(r, &reply) == REDIS_OK && reply != NULL; k++) {
            const redisReply *top = reply;
            for (size_t s = 0; top->type == REDIS_REPLY_ARRAY && s < top->elements; s++) {
                const redisReply *stream = top->element[s];
                if (stream->type == REDIS_REPLY_ARRAY && stream->elements >= 2) entries(stream->element[1]);
            }
            entries(top); /* an XAUTOCLAIM's entries, or a bare list */
            freeReplyObject(reply);
            reply = NULL;
        }
    }
    redisReaderFree(r);
    return 0;
}
