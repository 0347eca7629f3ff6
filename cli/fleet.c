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
 */
#define _DEFAULT_SOURCE
#include "fleet.h"

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
static redisReply *command(fleet *f, redisContext **c, int argc, const char **argv, const size_t *lens, bool *reconnected) {
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
    const char *argv[] = {"XADD", f->jobs_key, "*", "run", f->run, "seq", s_seq, "config", j->config, "from", s_from, "runs", s_runs};
    redisReply *r = command(f, &f->c, 13, argv, NULL, NULL);
    bool ok = r && r->type == REDIS_REPLY_STRING;
    if (ok) snprintf(j->entry, sizeof j->entry, "%s", r->str);
    else *err = cli_format("putting a job on %s: %s", f->jobs_key, r && r->str ? r->str : "refused");
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
static bool publish(fleet *f, redisContext **c, char **err) {
    const char *argv[2 + 24];
    size_t lens[2 + 24];
    argv[0] = "HSET", lens[0] = 4;
    argv[1] = f->run_key, lens[1] = strlen(f->run_key);
    for (size_t i = 0; i < f->nfields; i++) argv[2 + i] = f->fields[i], lens[2 + i] = f->lens[i];
    redisReply *r = command(f, c, (int)(2 + f->nfields), argv, lens, NULL);
    bool ok = r && r->type != REDIS_REPLY_ERROR;
    if (!ok) *err = cli_format("publishing the run on %s: %s", f->url, r ? r->str : "the fleet is closing");
    if (r) freeReplyObject(r);
    if (ok) {
        const char *ex[] = {"EXPIRE", f->run_key, "86400"}; /* a coordinator that died leaves nothing for long */
        if ((r = command(f, c, 3, ex, NULL, NULL)) != NULL) freeReplyObject(r);
    }
    return ok;
}

/* Makes the stream of jobs and its consumer group where they are absent: when the run begins,
 * and when a Redis that lost them (restarted without saving) answers again. */
static bool make_group(fleet *f, redisContext **c, char **err) {
    const char *grp[] = {"XGROUP", "CREATE", f->jobs_key, FLEET_GROUP, "0", "MKSTREAM"};
    redisReply *r = command(f, c, 6, grp, NULL, NULL);
    bool ok = r && (r->type != REDIS_REPLY_ERROR || strncmp(r->str, "BUSYGROUP", 9) == 0);
    if (!ok) *err = cli_format("creating the consumer group of %s: %s", f->jobs_key, r ? r->str : "the fleet is closing");
    if (r) freeReplyObject(r);
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

static const kt_backend fleet_table = {
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

static void show_progress(fleet *f, bool final);

void fleet_set_status(fleet *f, void (*fn)(char *buf, size_t len, void *user), void *user) {
    pthread_mutex_lock(&f->mu);
    f->status_fn = fn, f->status_user = user;
    pthread_mutex_unlock(&f->mu);
}

void fleet_progress_done(fleet *f) {
    pthread_mutex_lock(&f->mu);
    if (f->shown) show_progress(f, true);
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

static void show_progress(fleet *f, bool final) {
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
        for (size_t e = 0; e < entries->elements; e++) {
            redisReply *ent = entries->element[e];
            if (ent->type != REDIS_REPLY_ARRAY || ent->elements < 2) continue;
            snprintf(last, lastlen, "%s", ent->element[0]->str);
            redisReply *kv = ent->element[1];
            const char *type = NULL, *seqs = NULL, *result = NULL;
            for (size_t k = 0; k + 1 < kv->elements; k += 2) {
                const char *name = kv->element[k]->str, *value = kv->element[k + 1]->str;
                if (strcmp(name, "type") == 0) type = value;
                else if (strcmp(name, "seq") == 0) seqs = value;
                else if (strcmp(name, "result") == 0) result = value;
            }
            char *end;
            unsigned long long seq = seqs ? strtoull(seqs, &end, 10) : 0;
            if (type == NULL || seqs == NULL || *end || seq >= f->njobs) continue;
            job *j = &f->jobs[seq];
            if (strcmp(type, "start") == 0) {
                if (j->starts++ > 0 && !j->done) f->st.reclaimed++;
                continue;
            }
            if (strcmp(type, "done") != 0 || result == NULL) continue;
            if (j->done) { /* a second result: kept out of the run, counted */
                f->st.duplicates++;
                continue;
            }
            json_t *doc = json_loads(result, 0, NULL);
            if (doc == NULL || !json_is_object(doc)) {
                json_decref(doc);
                doc = json_pack("{s:s,s:s}", "outcome", "failed", "message", "a worker's result could not be read");
            }
            j->result = doc;
            j->done = true;
            f->st.done++;
            if (outcome_named(json_string_value(json_object_get(doc, "outcome"))) != KT_OUTCOME_MEASURED) f->st.failed++;
            pthread_cond_broadcast(&f->cv);
        }
    }
}

static void *reader_main(void *p) {
    fleet *f = p;
    char last[64] = "0-0", now_ms[24];
    double last_beat = 0, last_show = 0;
    for (;;) {
        double now = kt_now_s();
        bool again = false, back = false;
        if (now - last_beat >= 1) { /* the workers drop a run whose coordinator stopped beating */
            snprintf(now_ms, sizeof now_ms, "%lld", (long long)fleet_now_ms());
            const char *beat[] = {"HSET", f->run_key, "seen", now_ms};
            redisReply *r = command(f, &f->rc, 4, beat, NULL, &again);
            if (r == NULL) break;
            freeReplyObject(r);
            back = back || again;
            last_beat = now;
        }
        const char *read[] = {"XREAD", "COUNT", "512", "BLOCK", "200", "STREAMS", f->results_key, last};
        redisReply *r = command(f, &f->rc, 8, read, NULL, &again);
        if (r == NULL) break;
        if (back || again) { /* Redis came back, perhaps without the run: publish it and the open jobs again */
            char *e2 = NULL;
            if (!publish(f, &f->rc, &e2)) free(e2), e2 = NULL;
            if (!make_group(f, &f->rc, &e2)) free(e2), e2 = NULL;
            pthread_mutex_lock(&f->mu);
            for (size_t i = 0; i < f->njobs; i++)
                if (!f->jobs[i].done && !enqueue(f, i, &e2)) free(e2), e2 = NULL;
            pthread_mutex_unlock(&f->mu);
        }
        pthread_mutex_lock(&f->mu);
        take_events(f, r, last, sizeof last);
        if (now - last_show >= 0.25) {
            show_progress(f, false);
            last_show = now;
        }
        pthread_mutex_unlock(&f->mu);
        freeReplyObject(r);
    }
    return NULL;
}

/* ---- opening and closing a run --------------------------------------------------------------- */

/* Adds a field of the run's hash; value is owned by the fleet from now on. */
static bool add_field(fleet *f, const char *name, char *value, size_t len) {
    if (value == NULL || f->nfields + 2 > sizeof f->fields / sizeof f->fields[0]) {
        free(value);
        return false;
    }
    f->fields[f->nfields] = name, f->lens[f->nfields] = strlen(name), f->owned[f->nfields] = NULL;
    f->nfields++;
    f->fields[f->nfields] = value, f->lens[f->nfields] = len, f->owned[f->nfields] = value;
    f->nfields++;
    return true;
}

/* Adds the problem (its file names made local to the run's directory on the worker) and the
 * files it names. */
static bool add_problem(fleet *f, const fleet_run *run, char **err) {
    json_error_t je;
    json_t *doc = json_load_file(run->problem, 0, &je);
    json_t *spec = doc ? json_object_get(doc, "KernelSpecification") : NULL;
    if (spec == NULL) {
        json_decref(doc);
        *err = cli_format("%s: cannot be read again to send it to the workers", run->problem);
        return false;
    }
    const t1 *p = run->p;
    bool ok = true;
    /* the kernel file (not needed to replay, but sent when it is there) */
    if (p->kernel_file && (run->simulate == NULL || access(p->kernel_file, R_OK) == 0)) {
        const char *dot = strrchr(p->kernel_file, '.'), *slash = strrchr(p->kernel_file, '/');
        char *name = cli_format("kernel%s", dot && (slash == NULL || dot > slash) && strlen(dot) < 16 ? dot : "");
        size_t len = 0;
        char *text = name ? t1_read_file(p->kernel_file, "the kernel file", T1_FILE_LIMIT, 0, &len, err) : NULL;
        ok = name && text && json_object_set_new(spec, "KernelFile", json_string(name)) == 0;
        char *field = ok ? cli_format("file:%s", name) : NULL;
        ok = ok && field && add_field(f, field, text, len);
        if (ok) f->owned[f->nfields - 2] = field; /* the field's name is the fleet's too */
        else free(field), free(text);
        free(name);
    }
    const char *lists[2] = {"Arguments", "ReferenceArguments"};
    for (int l = 0; ok && l < 2; l++) {
        json_t *arr = json_object_get(spec, lists[l]);
        for (size_t i = 0; ok && i < json_array_size(arr); i++) {
            json_t *a = json_array_get(arr, i);
            const char *src = json_string_value(json_object_get(a, "DataSource"));
            if (src == NULL) continue;
            char *path = src[0] == '/' ? cli_format("%s", src) : cli_format("%s/%s", p->dir, src);
            char *name = cli_format("data-%s-%zu", l ? "ref" : "arg", i);
            size_t len = 0;
            char *data = path && name ? t1_read_file(path, "the data file", T1_FILE_LIMIT, 0, &len, err) : NULL;
            ok = data && json_object_set_new(a, "DataSource", json_string(name)) == 0;
            char *field = ok ? cli_format("file:%s", name) : NULL;
            ok = ok && field && add_field(f, field, data, len);
            if (ok) f->owned[f->nfields - 2] = field;
            else free(field), free(data);
            free(path), free(name);
        }
    }
    char *text = ok ? json_dumps(doc, JSON_COMPACT) : NULL;
    ok = ok && text && add_field(f, "problem", text, strlen(text));
    json_decref(doc);
    if (!ok && *err == NULL) *err = cli_format("out of memory");
    return ok;
}

/* The live workers able to take the run: their stream, device and fingerprint (jansson objects
 * in an array); waits up to wait_s for one. */
static json_t *live_workers(fleet *f, const fleet_run *run, double wait_s, size_t *others, char **err) {
    double until = kt_now_s() + wait_s;
    bool said = false;
    for (;;) {
        const char *argv[] = {"HGETALL", FLEET_PREFIX "workers"};
        redisReply *r = command(f, &f->c, 2, argv, NULL, NULL);
        json_t *list = json_array();
        *others = 0;
        int64_t now = fleet_now_ms();
        for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i + 1 < r->elements; i += 2) {
            json_t *w = json_loads(r->element[i + 1]->str, 0, NULL);
            int64_t seen = json_integer_value(json_object_get(w, "seen"));
            const char *lang = json_string_value(json_object_get(w, "language"));
            if (w == NULL || now - seen > 5000) { /* gone: it stopped beating */
                json_decref(w);
                continue;
            }
            if (run->simulate || (lang && strcmp(lang, run->p->language) == 0)) {
                json_object_set_new(w, "name", json_string(r->element[i]->str));
                json_array_append_new(list, w);
            } else {
                (*others)++;
                json_decref(w);
            }
        }
        freeReplyObject(r);
        if (json_array_size(list) > 0 || kt_now_s() >= until) {
            if (json_array_size(list) == 0) {
                *err = run->simulate ? cli_format("no live worker on %s (start 'kerntune worker %s' on each machine)", f->url, f->url)
                                     : cli_format("no live worker on %s has a %s device%s (start 'kerntune worker %s --device N' "
                                                  "on each machine with one)", f->url, run->p->language,
                                                  *others ? "; the live ones have other devices" : "", f->url);
                json_decref(list);
                return NULL;
            }
            return list;
        }
        json_decref(list);
        if (!said && f->progress) fprintf(stderr, "kerntune tune: waiting up to %g s for a worker on %s\n", wait_s, f->url);
        said = true;
        usleep(200000);
    }
}

bool fleet_open(const char *url, const fleet_run *run, double wait_s, bool progress, fleet **out, char **err) {
    *out = NULL;
    *err = NULL;
    fleet *f = calloc(1, sizeof *f);
    if (f == NULL || (f->url = cli_format("%s", url)) == NULL) {
        free(f);
        *err = cli_format("out of memory");
        return false;
    }
    f->backend = fleet_table;
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    f->progress = progress;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &f->cpu0);
    if ((f->c = fleet_connect(url, 2000, err)) == NULL) goto fail;
    size_t others = 0;
    json_t *workers = live_workers(f, run, wait_s, &others, err);
    if (workers == NULL) goto fail;
    /* the device model most of them have (replay: every worker replays) */
    const char *pick = NULL;
    size_t nw = json_array_size(workers);
    f->st.workers = run->simulate ? nw : 0;
    for (size_t i = 0; run->simulate && i < nw; i++) {
        json_int_t b = json_integer_value(json_object_get(json_array_get(workers, i), "batch"));
        f->st.batch += b > 0 ? (size_t)b : 1;
    }
    for (size_t i = 0; i < nw && !run->simulate; i++) {
        json_t *w = json_array_get(workers, i);
        const char *fp = json_string_value(json_object_get(w, "fingerprint"));
        size_t same = 0;
        for (size_t k = 0; fp && k < nw; k++) {
            const char *other = json_string_value(json_object_get(json_array_get(workers, k), "fingerprint"));
            same += other && strcmp(fp, other) == 0;
        }
        if (same > f->st.workers) {
            f->st.workers = same, pick = fp;
            f->st.batch = 0;
            for (size_t k = 0; k < nw; k++) {
                json_t *o = json_array_get(workers, k);
                const char *other = json_string_value(json_object_get(o, "fingerprint"));
                json_int_t b = json_integer_value(json_object_get(o, "batch"));
                if (other && strcmp(fp, other) == 0) f->st.batch += b > 0 ? (size_t)b : 1;
            }
            const char *dev = json_string_value(json_object_get(w, "device")), *cc = json_string_value(json_object_get(w, "compiler"));
            const char *arch = json_string_value(json_object_get(w, "architecture")), *vendor = json_string_value(json_object_get(w, "vendor"));
            snprintf(f->device, sizeof f->device, "%s", dev ? dev : "?");
            snprintf(f->compiler, sizeof f->compiler, "%s", cc ? cc : "");
            snprintf(f->arch, sizeof f->arch, "%s", arch ? arch : "");
            snprintf(f->vendor, sizeof f->vendor, "%s", vendor ? vendor : "");
        }
    }
    f->st.ignored = others + nw - f->st.workers;
    if (run->simulate) {
        snprintf(f->device, sizeof f->device, "replay of %.200s", run->simulate); /* as replay.c names it */
        snprintf(f->fingerprint, sizeof f->fingerprint, "replay:%.900s", run->simulate);
        snprintf(f->compiler, sizeof f->compiler, "replay %.900s recorded=%d", run->simulate, run->recorded); /* as replay.c says */
        fleet_jobs_key(NULL, f->jobs_key);
    } else {
        snprintf(f->fingerprint, sizeof f->fingerprint, "%s", pick ? pick : "");
        fleet_jobs_key(f->fingerprint, f->jobs_key);
    }
    json_decref(workers);
    /* the run: a random name, its problem and files, the recording, the options */
    uint64_t id = 0;
    FILE *rnd = fopen("/dev/urandom", "rb");
    if (rnd == NULL || fread(&id, sizeof id, 1, rnd) != 1) id = (uint64_t)fleet_now_ms() ^ ((uint64_t)getpid() << 32);
    if (rnd) fclose(rnd);
    snprintf(f->run, sizeof f->run, "%016llx", (unsigned long long)id);
    snprintf(f->run_key, sizeof f->run_key, FLEET_PREFIX "run:%s", f->run);
    snprintf(f->results_key, sizeof f->results_key, FLEET_PREFIX "results:%s", f->run);
    if (!add_problem(f, run, err)) goto fail;
    if (run->simulate) {
        size_t len = 0;
        char *rec = t1_read_file(run->simulate, "the recording", T4_READ_LIMIT, 0, &len, err);
        if (rec == NULL || !add_field(f, "recording", rec, len)) goto fail;
    }
    json_t *opts = json_pack("{s:I,s:b,s:f,s:b,s:s?,s:s?,s:s}", "seed", (json_int_t)run->seed, "seed_given", run->seed_given, "timeout",
                             run->timeout, "recorded", run->recorded, "problem_size", run->problem_size, "simulate_name", run->simulate,
                             "language", run->p->language ? run->p->language : "");
    json_t *defs = json_array();
    for (size_t i = 0; i < run->ndefines; i++) json_array_append_new(defs, json_string(run->defines[i]));
    if (opts) json_object_set_new(opts, "defines", defs);
    else json_decref(defs);
    char *text = opts ? json_dumps(opts, JSON_COMPACT) : NULL;
    json_decref(opts);
    if (text == NULL || !add_field(f, "options", text, strlen(text))) {
        *err = cli_format("out of memory");
        goto fail;
    }
    char now[24];
    snprintf(now, sizeof now, "%lld", (long long)fleet_now_ms());
    if (!add_field(f, "seen", cli_format("%s", now), strlen(now)) || !publish(f, &f->c, err)) goto fail;
    if (!make_group(f, &f->c, err)) goto fail;
    if (pthread_create(&f->reader, NULL, reader_main, f) != 0) {
        *err = cli_format("cannot start the fleet's reader thread");
        goto fail;
    }
    f->reader_started = true;
    *out = f;
    return true;
fail:
    if (*err == NULL) *err = cli_format("out of memory");
    fleet_close(f);
    return false;
}

void fleet_get_stats(fleet *f, fleet_stats *s) {
    pthread_mutex_lock(&f->mu);
    *s = f->st;
    pthread_mutex_unlock(&f->mu);
    struct timespec now;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
    s->cpu_s = (double)(now.tv_sec - f->cpu0.tv_sec) + (double)(now.tv_nsec - f->cpu0.tv_nsec) / 1e9;
}

void fleet_close(fleet *f) {
    if (f == NULL) return;
    atomic_store(&f->stop, true);
    pthread_mutex_lock(&f->mu);
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    if (f->reader_started) pthread_join(f->reader, NULL);
    if (f->shown) show_progress(f, true);
    /* withdraw what is left of the run: its jobs (done or not), its hash and its results */
    if (f->c) {
        for (size_t i = 0; i < f->njobs;) {
            const char *argv[2 + 256];
            int n = 0;
            argv[n++] = "XDEL", argv[n++] = f->jobs_key;
            for (; i < f->njobs && n < 2 + 256; i++)
                if (f->jobs[i].entry[0]) argv[n++] = f->jobs[i].entry;
            redisReply *r = n > 2 ? redisCommandArgv(f->c, n, argv, NULL) : NULL;
            if (r) freeReplyObject(r);
        }
        if (f->run_key[0]) {
            redisReply *r = redisCommand(f->c, "DEL %s %s", f->run_key, f->results_key);
            if (r) freeReplyObject(r);
        }
        redisFree(f->c);
    }
    if (f->rc) redisFree(f->rc);
    for (size_t i = 0; i < f->njobs; i++) {
        free(f->jobs[i].config);
        json_decref(f->jobs[i].result);
    }
    free(f->jobs);
    for (size_t i = 0; f->recs && i <= f->rmask; i++) {
        record *r = f->recs[i];
        if (r == NULL) continue;
        free(r->config), free(r->message), free(r->runs), free(r);
    }
    free(f->recs);
    for (size_t i = 0; i < f->nfields; i++) free(f->owned[i]);
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
    free(f->url);
    free(f);
}

#endif /* KT_NO_REDIS */
