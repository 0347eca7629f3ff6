/*
 * fleet_wire.c - decoding the fleet's messages (fleet_wire.h).
 */
#ifndef KT_NO_REDIS

#include "fleet_wire.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The string of element e, or NULL when it is not a string (an integer, a nil, an array) or
 * holds a NUL byte (C would read less than was sent). */
static const char *str_of(const redisReply *e) {
    bool text = e != NULL && (e->type == REDIS_REPLY_STRING || e->type == REDIS_REPLY_STATUS) && e->str != NULL;
    return text && strlen(e->str) == e->len ? e->str : NULL;
}

/* The pairs of an entry, or NULL when ent is not [id, [k, v, ...]]. */
static const redisReply *pairs_of(const redisReply *ent) {
    if (ent == NULL || ent->type != REDIS_REPLY_ARRAY || ent->elements < 2 || fleet_wire_id(ent) == NULL) return NULL;
    const redisReply *kv = ent->element[1];
    return kv != NULL && kv->type == REDIS_REPLY_ARRAY ? kv : NULL;
}

const char *fleet_wire_id(const redisReply *ent) {
    if (ent == NULL || ent->type != REDIS_REPLY_ARRAY || ent->elements < 1) return NULL;
    const char *id = str_of(ent->element[0]);
    /* a stream entry's id, as Redis makes them: MILLISECONDS-SEQUENCE */
    size_t ms = id ? strspn(id, "0123456789") : 0, seq = ms > 0 && id[ms] == '-' ? strspn(id + ms + 1, "0123456789") : 0;
    bool ok = seq > 0 && id[ms + 1 + seq] == '\0';
    return ok && ms + 1 + seq < sizeof ((fleet_job *)0)->id ? id : NULL;
}

/* v as a decimal number of unsigned long (no sign, no space, nothing after). */
static bool decimal(const char *v, unsigned long *out) {
    if (v == NULL || *v < '0' || *v > '9') return false;
    char *end;
    errno = 0;
    *out = strtoul(v, &end, 10);
    return errno == 0 && *end == '\0';
}

/* Copies v into out (n bytes) when it fits whole. */
static bool copy(char *out, size_t n, const char *v) {
    if (v == NULL || strlen(v) >= n) return false;
    memcpy(out, v, strlen(v) + 1);
    return true;
}

bool fleet_wire_job(const redisReply *ent, const char *stream, fleet_job *j) {
    memset(j, 0, sizeof *j);
    const redisReply *kv = pairs_of(ent);
    if (kv == NULL || !copy(j->stream, sizeof j->stream, stream)) return false;
    copy(j->id, sizeof j->id, fleet_wire_id(ent));
    bool have[5] = {false};
    for (size_t k = 0; k + 1 < kv->elements; k += 2) {
        const char *n = str_of(kv->element[k]), *v = str_of(kv->element[k + 1]);
        if (n == NULL || v == NULL) continue;
        if (strcmp(n, "run") == 0) have[0] = copy(j->run, sizeof j->run, v);
        else if (strcmp(n, "seq") == 0) have[1] = copy(j->seq, sizeof j->seq, v);
        else if (strcmp(n, "config") == 0) have[2] = copy(j->config, sizeof j->config, v);
        else if (strcmp(n, "from") == 0) have[3] = decimal(v, &j->from);
        else if (strcmp(n, "runs") == 0) have[4] = decimal(v, &j->runs);
        else if (strcmp(n, "artifact") == 0) {
            if (!copy(j->artifact, sizeof j->artifact, v)) j->artifact[0] = '\0';
        } else if (strcmp(n, "sha256") == 0) {
            if (!copy(j->sha256, sizeof j->sha256, v)) j->sha256[0] = '\0';
        }
        else if (strcmp(n, "forwarded") == 0) j->forwarded = true;
    }
    return have[0] && have[1] && have[2] && have[3] && have[4];
}

bool fleet_wire_event(const redisReply *ent, fleet_event *ev) {
    *ev = (fleet_event){0};
    const redisReply *kv = pairs_of(ent);
    if (kv == NULL) return false;
    const char *seq = NULL;
    for (size_t k = 0; k + 1 < kv->elements; k += 2) {
        const char *n = str_of(kv->element[k]), *v = str_of(kv->element[k + 1]);
        if (n == NULL || v == NULL) continue;
        if (strcmp(n, "type") == 0) ev->type = v;
        else if (strcmp(n, "seq") == 0) seq = v;
        else if (strcmp(n, "result") == 0) ev->result = v;
    }
    unsigned long s = 0;
    ev->has_seq = decimal(seq, &s);
    ev->seq = s;
    return true;
}

static json_t *unreadable(const char *why) {
    char msg[160];
    snprintf(msg, sizeof msg, "a worker's result could not be read: %s", why);
    return json_pack("{s:s,s:s}", "outcome", "failed", "message", msg);
}

json_t *fleet_wire_result(const char *text) {
    json_error_t jerr;
    json_t *doc = text ? json_loads(text, JSON_REJECT_DUPLICATES, &jerr) : NULL;
    const char *why = text == NULL ? "none given" : doc == NULL ? "not JSON" : NULL;
    if (why == NULL && !json_is_object(doc)) why = "not an object";
    if (why == NULL && !json_is_string(json_object_get(doc, "outcome"))) why = "its outcome is not a string";
    static const char *const strings[] = {"message", "worker"};
    for (int k = 0; why == NULL && k < 2; k++) {
        const json_t *v = json_object_get(doc, strings[k]);
        if (v != NULL && !json_is_string(v) && !json_is_null(v)) why = k ? "its worker is not a string" : "its message is not a string";
    }
    const json_t *runs = why ? NULL : json_object_get(doc, "runs");
    if (runs != NULL && !json_is_array(runs)) why = "its runs are not a list";
    for (size_t i = 0; why == NULL && i < json_array_size(runs); i++) {
        const json_t *r = json_array_get(runs, i);
        if (!json_is_number(r) || !isfinite(json_number_value(r)) || json_number_value(r) < 0)
            why = "a run is not a finite non-negative number";
    }
    if (why == NULL) return doc;
    json_decref(doc);
    return unreadable(why);
}

#endif
