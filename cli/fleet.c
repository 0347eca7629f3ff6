/*
 * fleet.c - the coordinator of a tuning spread over workers, and what it shares with them
 * (fleet.h).
 *
 * The coordinator's device is a backend like replay's: "building" a configuration puts a job
 * on the device model's stream and waits for a worker's result (the build threads wait in
 * parallel, so a batch of the search's proposals is on the stream at once); the artifact holds
 * the configuration's key; "launching" it serves the runs the worker measured, in order, and
 * asks for more (a job for runs FROM..FROM+N) when the engine's race wants more than it has.
 * So the search, the race, the T4 file and the cache are the local run's, fed by the workers.
 *
 * This file runs the jobs and reads their results; fleet_open.c opens and closes the run.
 */
#define _DEFAULT_SOURCE
#include "fleet_int.h"
#include "fleet_wire.h"

#include "replay.h"
#include "t4.h"
#include "text.h"

#include <kerntune/cache.h>
#include <kerntune/decision.h>

#include <jansson.h>

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef KT_NO_REDIS
#include <hiredis/hiredis.h>
#endif

int64_t fleet_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* FNV-1a: names a stream and places a record in the table, no secret */
static uint64_t hash_text(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    while (*s) h = (h ^ (unsigned char)*s++) * 0x100000001b3ull;
    return h;
}

void fleet_jobs_key(const char *fingerprint, char out[64]) {
    if (fingerprint == NULL) snprintf(out, 64, FLEET_PREFIX "jobs:replay");
    else snprintf(out, 64, FLEET_PREFIX "jobs:%016llx", (unsigned long long)hash_text(fingerprint));
}

void fleet_build_key(const char *fingerprint, char out[64]) {
    snprintf(out, 64, FLEET_PREFIX "build:%016llx", (unsigned long long)hash_text(fingerprint ? fingerprint : ""));
}

void *fleet_connect(const char *url, int timeout_ms, char **err) {
    void *c = NULL;
    kt_status st = kt_redis_connect(url, timeout_ms, &c);
    if (st != KT_OK) *err = cli_format("%s%s", st == KT_ERR_BACKEND ? "cannot reach Redis: " : "", kt_last_error());
    return c;
}

#ifdef KT_NO_REDIS

bool fleet_open(const char *url, const fleet_run *run, double wait_s, bool progress, fleet **out, char **err) {
    (void)run, (void)wait_s, (void)progress;
    *out = NULL;
    return fleet_connect(url, 1000, err) != NULL;
}

const kt_backend *fleet_backend(fleet *f) { (void)f; return NULL; }
bool fleet_failure(fleet *f, const char *config, int *outcome) { (void)f, (void)config, (void)outcome; return false; }
void fleet_set_status(fleet *f, void (*fn)(char *buf, size_t len, void *user), void *user) { (void)f, (void)fn, (void)user; }
void fleet_progress_done(fleet *f) { (void)f; }
const char *fleet_device_name(const fleet *f) { (void)f; return ""; }
void fleet_get_stats(fleet *f, fleet_stats *s) { (void)f, memset(s, 0, sizeof *s); }
void fleet_close(fleet *f) { (void)f; }

#else

enum { FIRST_RUNS = 8, MORE_RUNS = 32, DOWN_LIMIT_S = 30 };

/* The record of config (under mu): made when absent and make, else NULL when absent. */
static record *record_of(fleet *f, const char *config, bool make) {
    if (!make && f->recs == NULL) return NULL;
    if (make && (f->recs == NULL || 2 * (f->nrecs + 1) > f->rmask + 1)) {
        size_t n = f->recs ? 2 * (f->rmask + 1) : 1024;
        record **t = calloc(n, sizeof *t);
        if (t == NULL) return NULL;
        for (size_t i = 0; f->recs && i <= f->rmask; i++) {
            if (f->recs[i] == NULL) continue;
            size_t k = hash_text(f->recs[i]->config) & (n - 1);
            while (t[k]) k = (k + 1) & (n - 1);
            t[k] = f->recs[i];
        }
        free(f->recs);
        f->recs = t;
        f->rmask = n - 1;
    }
    size_t k = hash_text(config) & f->rmask;
    while (f->recs[k] && strcmp(f->recs[k]->config, config) != 0) k = (k + 1) & f->rmask;
    if (f->recs[k] == NULL && make) {
        record *r = calloc(1, sizeof *r);
        if (r == NULL || (r->config = cli_format("%s", config)) == NULL) {
            free(r);
            return NULL;
        }
        f->recs[k] = r;
        f->nrecs++;
    }
    return f->recs[k];
}

/* An outcome as kt_outcome_name names it (a worker's result); an unknown name is a failure. */
static kt_outcome outcome_named(const char *s) {
    for (int o = KT_OUTCOME_NOT_RUN; s && o <= KT_OUTCOME_CRASHED; o++)
        if (strcmp(s, kt_outcome_name((kt_outcome)o)) == 0) return (kt_outcome)o;
    return KT_OUTCOME_FAILED;
}

/* Runs a command on *c, reconnecting while Redis does not answer (*reconnected, when not NULL,
 * says whether it had to); after DOWN_LIMIT_S seconds without an answer the tuning cannot go
 * on: it stops as an interrupted run does. NULL only once the fleet is closing. */
redisReply *fleet_command(fleet *f, redisContext **c, int argc, const char **argv, const size_t *lens, bool *reconnected) {
    double down_since = 0;
    if (reconnected) *reconnected = false;
    while (!atomic_load(&f->stop)) {
        char *err = NULL;
        if (*c == NULL) *c = fleet_connect(f->url, 2000, &err);
        redisReply *r = *c ? redisCommandArgv(*c, argc, argv, lens) : NULL;
        if (r) {
            if (reconnected) *reconnected = down_since > 0;
            return r;
        }
        if (*c) {
            err = cli_format("%s", (*c)->errstr);
            redisFree(*c);
            *c = NULL;
        }
        if (down_since == 0) down_since = kt_now_s();
        if (kt_now_s() - down_since > DOWN_LIMIT_S) {
            fprintf(stderr, "\nkerntune tune: the fleet's Redis at %s has not answered for %d s: %s; stopping (what was "
                            "measured is in the cache: run again with --resume)\n", f->url, DOWN_LIMIT_S, err ? err : "");
            _exit(1);
        }
        free(err);
        usleep(250000);
    }
    return NULL;
}

/* Puts job seq on the stream (under mu); false with *err when Redis refuses it. */
static bool enqueue(fleet *f, size_t seq, char **err) {
    job *j = &f->jobs[seq];
    char s_seq[24], s_from[24], s_runs[24];
    snprintf(s_seq, sizeof s_seq, "%zu", seq);
    snprintf(s_from, sizeof s_from, "%zu", j->from);
    snprintf(s_runs, sizeof s_runs, "%zu", j->runs);
    /* more runs of a configuration measured already: built, so straight to the measuring workers */
    j->direct = j->from > 0 && strcmp(f->measure_key, f->jobs_key) != 0;
    const char *key = j->direct ? f->measure_key : f->jobs_key;
    const char *argv[] = {"XADD", key, "*", "run", f->run, "seq", s_seq, "config", j->config, "from", s_from, "runs", s_runs};
    redisReply *r = fleet_command(f, &f->c, 13, argv, NULL, NULL);
    bool ok = r && r->type == REDIS_REPLY_STRING;
    if (ok) snprintf(j->entry, sizeof j->entry, "%s", r->str);
    else *err = cli_format("putting a job on %s: %s", key, r && r->str ? r->str : "refused");
    if (r) freeReplyObject(r);
    return ok;
}

/* A new job (under mu): its sequence number, or -1 with *err. */
static long submit(fleet *f, const char *config, size_t from, size_t runs, char **err) {
    if (f->njobs == f->jcap) {
        size_t n = f->jcap ? 2 * f->jcap : 256;
        job *j = realloc(f->jobs, n * sizeof *j);
        if (j == NULL) {
            *err = cli_format("out of memory");
            return -1;
        }
        f->jobs = j, f->jcap = n;
    }
    size_t seq = f->njobs;
    job *j = &f->jobs[seq];
    memset(j, 0, sizeof *j);
    if ((j->config = cli_format("%s", config)) == NULL) {
        *err = cli_format("out of memory");
        return -1;
    }
    j->from = from, j->runs = runs;
    f->njobs++;
    if (!enqueue(f, seq, err)) {
        free(j->config);
        f->njobs--;
        return -1;
    }
    f->st.jobs++;
    return (long)seq;
}

/* Publishes the run's hash (again). */
bool fleet_publish(fleet *f, redisContext **c, char **err) {
    const char *argv[2 + 24];
    size_t lens[2 + 24];
    argv[0] = "HSET", lens[0] = 4;
    argv[1] = f->run_key, lens[1] = strlen(f->run_key);
    for (size_t i = 0; i < f->nfields; i++) argv[2 + i] = f->fields[i], lens[2 + i] = f->lens[i];
    redisReply *r = fleet_command(f, c, (int)(2 + f->nfields), argv, lens, NULL);
    bool ok = r && r->type != REDIS_REPLY_ERROR;
    if (!ok) *err = cli_format("publishing the run on %s: %s", f->url, r ? r->str : "the fleet is closing");
    if (r) freeReplyObject(r);
    if (ok) {
        const char *ex[] = {"EXPIRE", f->run_key, "86400"}; /* a coordinator that died leaves nothing for long */
        if ((r = fleet_command(f, c, 3, ex, NULL, NULL)) != NULL) freeReplyObject(r);
    }
    return ok;
}

/* Makes the stream of jobs and its consumer group where they are absent: when the run begins,
 * and when a Redis that lost them (restarted without saving) answers again. */
bool fleet_make_group(fleet *f, redisContext **c, char **err) {
    bool ok = true;
    for (int k = 0; k < 2 && ok; k++) {
        const char *key = k ? f->measure_key : f->jobs_key;
        if (k == 1 && strcmp(key, f->jobs_key) == 0) break;
        const char *grp[] = {"XGROUP", "CREATE", key, FLEET_GROUP, "0", "MKSTREAM"};
        redisReply *r = fleet_command(f, c, 6, grp, NULL, NULL);
        ok = r && (r->type != REDIS_REPLY_ERROR || strncmp(r->str, "BUSYGROUP", 9) == 0);
        if (!ok) *err = cli_format("creating the consumer group of %s: %s", key, r ? r->str : "the fleet is closing");
        if (r) freeReplyObject(r);
    }
    return ok;
}

/* Asks the workers for runs from..from+n of config and waits for the answer, which it adds to
 * the configuration's record: NULL, or why there is no answer (allocated). */
static char *measure(fleet *f, record *rec, size_t from, size_t n) {
    char *err = NULL;
    pthread_mutex_lock(&f->mu);
    long seq = submit(f, rec->config, from, n, &err);
    while (seq >= 0 && !f->jobs[seq].done && !atomic_load(&f->stop)) pthread_cond_wait(&f->cv, &f->mu);
    if (seq >= 0 && !f->jobs[seq].done) err = cli_format("the tuning was stopped");
    if (err == NULL) {
        json_t *res = f->jobs[seq].result;
        kt_outcome oc = outcome_named(json_string_value(json_object_get(res, "outcome")));
        const char *msg = json_string_value(json_object_get(res, "message"));
        const char *who = json_string_value(json_object_get(res, "worker"));
        json_t *runs = json_object_get(res, "runs");
        if (!rec->known || (rec->outcome == KT_OUTCOME_MEASURED && oc != KT_OUTCOME_MEASURED)) {
            free(rec->message);
            rec->outcome = oc;
            rec->message = msg || oc != KT_OUTCOME_MEASURED ? cli_format("%s (on worker %s)", msg ? msg : kt_outcome_name(oc), who ? who : "?") : NULL;
            rec->known = true;
        }
        size_t k = json_array_size(runs);
        if (rec->nruns + k > rec->cap) {
            size_t cap = rec->nruns + k + 16;
            double *r = realloc(rec->runs, cap * sizeof *r);
            if (r == NULL) err = cli_format("out of memory");
            else rec->runs = r, rec->cap = cap;
        }
        for (size_t i = 0; err == NULL && i < k; i++) rec->runs[rec->nruns++] = json_number_value(json_array_get(runs, i));
    }
    pthread_mutex_unlock(&f->mu);
    return err;
}

/* ---- the backend ----------------------------------------------------------------------------- */

static kt_status b_init(const kt_backend *self, void **state, char *err, size_t errlen) {
    (void)err, (void)errlen;
    *state = (fleet *)(void *)self;
    return KT_OK;
}

static size_t b_count(void *state) {
    (void)state;
    return 1;
}

static kt_status b_describe(void *state, size_t index, char *name, char *fp, char *err, size_t errlen) {
    (void)index, (void)err, (void)errlen;
    fleet *f = state;
    snprintf(name, KT_DEVICE_NAME_MAX, "%s", f->device);
    snprintf(fp, KT_DEVICE_FINGERPRINT_MAX, "%s", f->fingerprint);
    return KT_OK;
}

static kt_status b_compiler_id(void *state, size_t device, char *out, size_t len, char *err, size_t errlen) {
    (void)device, (void)err, (void)errlen;
    fleet *f = state;
    /* the workers' compiler: with their fingerprint it names the decision in the cache, so that
     * a local run on one of their machines finds what the fleet decided */
    snprintf(out, len, "%s", f->compiler);
    return KT_OK;
}

static kt_status b_classify(void *state, size_t index, char *arch, char *vendor, char *err, size_t errlen) {
    (void)index, (void)err, (void)errlen;
    fleet *f = state;
    snprintf(arch, KT_DEVICE_NAME_MAX, "%s", f->arch);
    snprintf(vendor, KT_DEVICE_NAME_MAX, "%s", f->vendor);
    return KT_OK;
}

static kt_status b_build(void *state, size_t device, const kt_build_request *req, char *log, size_t loglen) {
    (void)device;
    fleet *f = state;
    char *key = replay_defines_key(req);
    if (key == NULL) {
        snprintf(log, loglen, "out of memory");
        return KT_ERR_NO_MEMORY;
    }
    pthread_mutex_lock(&f->mu);
    record *rec = record_of(f, key, true);
    pthread_mutex_unlock(&f->mu);
    char *err = rec == NULL ? cli_format("out of memory") : rec->known ? NULL : measure(f, rec, 0, FIRST_RUNS);
    if (err) {
        snprintf(log, loglen, "%s", err);
        free(err), free(key);
        return KT_ERR_BACKEND;
    }
    if (rec->outcome == KT_OUTCOME_BUILD_FAILED) {
        snprintf(log, loglen, "%s", rec->message ? rec->message : "failed to build on a worker");
        free(key);
        return KT_ERR_BACKEND;
    }
    FILE *out = fopen(req->out_path, "w");
    bool ok = out != NULL && fputs(key, out) >= 0;
    if (out && fclose(out) != 0) ok = false;
    free(key);
    if (!ok) {
        snprintf(log, loglen, "cannot write %s", req->out_path);
        return KT_ERR_SYSTEM;
    }
    return KT_OK;
}

static kt_status b_load(void *state, size_t device, const char *path, const char *kernel_name, void **out, char *err, size_t errlen) {
    (void)device, (void)kernel_name;
    fleet *f = state;
    char *key = replay_read_key(path);
    if (key == NULL) {
        snprintf(err, errlen, "cannot read %s", path);
        return KT_ERR_SYSTEM;
    }
    pthread_mutex_lock(&f->mu);
    record *rec = record_of(f, key, true);
    pthread_mutex_unlock(&f->mu);
    free(key);
    module *m = rec ? calloc(1, sizeof *m) : NULL;
    if (m == NULL) {
        snprintf(err, errlen, "out of memory");
        return KT_ERR_NO_MEMORY;
    }
    m->rec = rec;
    *out = m;
    return KT_OK;
}

static void b_unload(void *state, size_t device, void *m) {
    (void)state, (void)device;
    free(m);
}

static kt_status b_launch(void *state, size_t device, void *mod, const kt_launch_geometry *g, const kt_arg *args, size_t nargs,
                          double *ns, char *err, size_t errlen) {
    (void)device, (void)g, (void)args, (void)nargs;
    fleet *f = state;
    module *m = mod;
    record *rec = m->rec;
    if (rec->known && rec->outcome == KT_OUTCOME_MEASURED && m->next >= rec->nruns) {
        char *why = measure(f, rec, rec->nruns, MORE_RUNS);
        if (why) {
            snprintf(err, errlen, "%s", why);
            free(why);
            return KT_ERR_BACKEND;
        }
    }
    if (!rec->known || rec->outcome != KT_OUTCOME_MEASURED || m->next >= rec->nruns) {
        snprintf(err, errlen, "%s", rec->message ? rec->message : "a worker measured no runs of it");
        return KT_ERR_BACKEND;
    }
    if (ns) *ns = rec->runs[m->next];
    m->next++;
    return KT_OK;
}

const kt_backend fleet_backend_table = {
    .abi_version = KT_BACKEND_ABI_VERSION,
    .name = "fleet",
    .init = b_init,
    .device_count = b_count,
    .device_describe = b_describe,
    .buffer_alloc = replay_buffer_alloc, /* host memory the workers never see, as replay's */
    .buffer_free = replay_buffer_free,
    .buffer_copy = replay_buffer_copy,
    .buffer_fill = replay_buffer_fill,
    .artifact_ext = ".fleet",
    .compiler_id = b_compiler_id,
    .build = b_build,
    .load = b_load,
    .unload = b_unload,
    .launch = b_launch,
    .classify = b_classify,
    /* the workers build and run: building here (putting jobs on the stream) goes on while the
     * engine serves the runs that came back */
    .caps = KT_BACKEND_CAP_OWN_PROCESSOR,
};

const kt_backend *fleet_backend(fleet *f) { return &f->backend; }

const char *fleet_device_name(const fleet *f) { return f->device; }

void fleet_set_status(fleet *f, void (*fn)(char *buf, size_t len, void *user), void *user) {
    pthread_mutex_lock(&f->mu);
    f->status_fn = fn, f->status_user = user;
    pthread_mutex_unlock(&f->mu);
}

void fleet_progress_done(fleet *f) {
    pthread_mutex_lock(&f->mu);
    if (f->shown) fleet_show_progress(f, true);
    f->progress = false;
    f->status_fn = NULL;
    pthread_mutex_unlock(&f->mu);
}

bool fleet_failure(fleet *f, const char *config, int *outcome) {
    if (f == NULL || config == NULL) return false;
    pthread_mutex_lock(&f->mu);
    record *rec = record_of(f, config, false);
    bool failed = rec && rec->known && rec->outcome != KT_OUTCOME_MEASURED;
    if (failed) *outcome = (int)rec->outcome;
    pthread_mutex_unlock(&f->mu);
    return failed;
}

/* ---- the reader: results, heartbeat, progress ----------------------------------------------- */

void fleet_show_progress(fleet *f, bool final) {
    if (!f->progress) return;
    size_t running = 0, done = 0;
    for (size_t i = 0; i < f->njobs; i++) {
        if (f->jobs[i].done) done++;
        else if (f->jobs[i].starts) running++;
    }
    char head[512] = "";
    if (f->status_fn) f->status_fn(head, sizeof head, f->status_user);
    fprintf(stderr, "\r\033[K%s%s%zu worker%s: jobs %zu queued, %zu running, %zu done, %llu failed%s", head, head[0] ? "; " : "  ",
            f->st.workers, f->st.workers == 1 ? "" : "s", f->njobs - running - done, running, done, (unsigned long long)f->st.failed,
            final ? "\n" : "");
    f->shown = !final;
}

/* Takes the events of one XREAD reply (under mu); returns the last entry id seen. */
static void take_events(fleet *f, redisReply *r, char *last, size_t lastlen) {
    if (r->type != REDIS_REPLY_ARRAY) return;
    for (size_t s = 0; s < r->elements; s++) {
        redisReply *stream = r->element[s];
        if (stream->type != REDIS_REPLY_ARRAY || stream->elements < 2) continue;
        redisReply *entries = stream->element[1];
        for (size_t e = 0; entries->type == REDIS_REPLY_ARRAY && e < entries->elements; e++) {
            redisReply *ent = entries->element[e];
            fleet_event ev;
            const char *id = fleet_wire_id(ent);
            if (id != NULL) snprintf(last, lastlen, "%s", id); /* read past it, whatever it holds */
            if (!fleet_wire_event(ent, &ev)) continue;
            if (ev.type == NULL || !ev.has_seq || ev.seq >= f->njobs) continue;
            job *j = &f->jobs[ev.seq];
            if (strcmp(ev.type, "start") == 0) {
                if (j->starts++ > 0 && !j->done) f->st.reclaimed++;
                continue;
            }
            if (strcmp(ev.type, "done") != 0 || ev.result == NULL) continue;
            if (j->done) { /* a second result: kept out of the run, counted */
                f->st.duplicates++;
                continue;
            }
            json_t *doc = fleet_wire_result(ev.result); /* NULL (out of memory) reads as a failure */
            j->result = doc;
            j->done = true;
            f->st.done++;
            if (outcome_named(json_string_value(json_object_get(doc, "outcome"))) != KT_OUTCOME_MEASURED) f->st.failed++;
            pthread_cond_broadcast(&f->cv);
        }
    }
}

void *fleet_reader_main(void *p) {
    fleet *f = p;
    char last[64] = "0-0", now_ms[24];
    double last_beat = 0, last_show = 0;
    for (;;) {
        double now = kt_now_s();
        bool again = false, back = false;
        if (now - last_beat >= 1) { /* the workers drop a run whose coordinator stopped beating */
            snprintf(now_ms, sizeof now_ms, "%lld", (long long)fleet_now_ms());
            const char *beat[] = {"HSET", f->run_key, "seen", now_ms};
            redisReply *r = fleet_command(f, &f->rc, 4, beat, NULL, &again);
            if (r == NULL) break;
            freeReplyObject(r);
            back = back || again;
            last_beat = now;
        }
        const char *read[] = {"XREAD", "COUNT", "512", "BLOCK", "200", "STREAMS", f->results_key, last};
        redisReply *r = fleet_command(f, &f->rc, 8, read, NULL, &again);
        if (r == NULL) break;
        if (back || again) { /* Redis came back, perhaps without the run: publish it and the open jobs again */
            char *e2 = NULL;
            if (!fleet_publish(f, &f->rc, &e2)) free(e2), e2 = NULL;
            if (!fleet_make_group(f, &f->rc, &e2)) free(e2), e2 = NULL;
            pthread_mutex_lock(&f->mu);
            for (size_t i = 0; i < f->njobs; i++)
                if (!f->jobs[i].done && !enqueue(f, i, &e2)) free(e2), e2 = NULL;
            pthread_mutex_unlock(&f->mu);
        }
        pthread_mutex_lock(&f->mu);
        take_events(f, r, last, sizeof last);
        if (now - last_show >= 0.25) {
            fleet_show_progress(f, false);
            last_show = now;
        }
        pthread_mutex_unlock(&f->mu);
        freeReplyObject(r);
    }
    return NULL;
}

/* ---- opening and closing a run --------------------------------------------------------------- */

#endif /* KT_NO_REDIS */
