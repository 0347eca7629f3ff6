/*
 * worker.c - `kerntune worker redis://...`: measures the jobs of fleet runs on one device (see
 * fleet.h for the keys and the protocol).
 *
 * One job at a time: take one abandoned by a worker that stopped answering (XAUTOCLAIM), else
 * a new one (XREADGROUP) from the stream of this device model or of replayed problems; set up
 * the job's run once (its problem and files, written to a temporary directory, made ready by
 * tune_bench as `kerntune tune` would), measure the configuration, and write the result and
 * acknowledge the job in one transaction. A heartbeat thread rewrites this worker's entry every
 * second and re-claims the job in hand, so that a long job is never taken over while this
 * worker lives.
 */
#define _GNU_SOURCE /* mkdtemp, usleep, sched_getaffinity */
#include "worker_int.h"

#include "text.h"
#include "tune.h"

#include <kerntune/backend.h>
#include <kerntune/cache.h>
#include <kerntune/device.h>

#include <jansson.h>

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef KT_NO_REDIS
#include <hiredis/hiredis.h>
#endif

void help_worker(FILE *out) {
    fprintf(out,
            "usage: kerntune worker redis://HOST[:PORT][/DB] [options]\n"
            "\n"
            "Measures configurations for 'kerntune tune PROBLEM --workers redis://...' on one device:\n"
            "takes jobs from the Redis streams of this device model (and of replayed problems),\n"
            "builds, validates and measures each, and sends the results back. Run one per device\n"
            "(GPU or host) on every machine; workers on other device models never take this one's\n"
            "jobs. Stops on SIGINT or SIGTERM after the job in hand.\n"
            "\n"
            "options:\n"
            "  --device N           the kerntune device to measure on (see 'kerntune devices';\n"
            "                       default: the first that runs apart from the host's processors,\n"
            "                       else device 0)\n"
            "  --claim-timeout S    take over a job whose worker has not renewed its claim for S\n"
            "                       seconds (default 30; give every worker the same); a live\n"
            "                       worker renews its claim every S/4 seconds, at most every second\n"
            "  --pace F             replayed jobs take F times as long as the recording says they\n"
            "                       took (building and runs; 1: as long): a fleet's coordination\n"
            "                       measured on one machine\n"
            "  --batch K            take up to K jobs at once and build them in parallel (they are\n"
            "                       measured one after the other; default: twice the processors,\n"
            "                       at most 64); streaming: at most K jobs in hand (default: twice\n"
            "                       the build threads)\n"
            "  --build-threads N    streaming: how many jobs build at once, each on a thread of its\n"
            "                       own (default: one per processor, at most 64)\n"
            "  --build-only         a compile worker: build the jobs for the device (it needs no\n"
            "                       device of its own beyond what its compiler targets: the host for\n"
            "                       C), hand each artifact on (through Redis, or --share) with its\n"
            "                       SHA-256, and leave the measuring to the device workers, which\n"
            "                       check the digest before they load it; --build-threads builds at\n"
            "                       once (a tuning's jobs go to its compile workers first while any\n"
            "                       serve its device model)\n"
            "  --build-timeout S    building ahead (streaming) or for others (--build-only), give up a\n"
            "                       build after S seconds (default 600): the job goes on unbuilt, to\n"
            "                       be built where it is measured, and a compiler that never ends\n"
            "                       holds nothing\n"
            "  --share DIR          hand artifacts on through DIR (a directory every worker of the\n"
            "                       fleet reads and writes) instead of through Redis\n"
            "  --stream auto|on|off build the next jobs while the device measures the current ones\n"
            "                       (on), or take a batch, build it, measure it, take the next (off);\n"
            "                       auto (the default): on for a device with a processor of its own\n"
            "                       (a GPU), off for the host's (building beside a kernel on the same\n"
            "                       processors would slow it, and its measurement with it)\n"
            "  --max-jobs N         stop after N jobs (a batch is finished first)\n"
            "  --name NAME          this worker's name in the fleet (default: host:pid)\n"
            "  --quiet              print nothing but errors\n"
            "  --json               when it stops, print {\"worker\", \"device\", \"jobs\", \"streaming\",\n"
            "                       \"built_ahead\", \"found_ahead\" (builds compiled, and found built, by\n"
            "                       the build-ahead threads), \"build_only\", \"artifacts_handed_on\",\n"
            "                       \"artifacts_received\", \"artifacts_rejected\" (failing their digest)}\n"
            "                       on stdout (an {\"error\": ...} document when it fails), and nothing\n"
            "                       else there\n"
            "  -h, --help           print this help\n");
}

static bool json_wanted; /* --json anywhere on the line: errors are JSON documents too */
static FILE *doc_out;    /* where the document goes (the real stdout: see cli_json_begin) */

/* The failure: on stderr, and as {"error": ...} on stdout with --json. */
static void say_error(const char *msg) {
    fprintf(stderr, "kerntune worker: %s\n", msg);
    if (!json_wanted) return;
    json_t *j = json_pack("{s:s}", "error", msg);
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    if (text) fprintf(doc_out ? doc_out : stdout, "%s\n", text);
    free(text);
    json_decref(j);
}

#ifdef KT_NO_REDIS

int run_worker(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            help_worker(stdout);
            return 0;
        }
        json_wanted = json_wanted || strcmp(argv[i], "--json") == 0;
    }
    say_error("this kerntune was built without Redis (no hiredis or libcrypto at build time, or KT_WITH_REDIS=OFF): it cannot reach a fleet");
    return 1;
}

#else

volatile sig_atomic_t worker_interrupted;

static void on_signal(int sig) {
    (void)sig;
    worker_interrupted = 1;
}

static int usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *msg = cli_vformat(fmt, ap);
    va_end(ap);
    say_error(msg ? msg : "usage error");
    if (!json_wanted) fprintf(stderr, "(see 'kerntune worker --help')\n");
    free(msg);
    return 2;
}

static int parse(int argc, char **argv, worker_opts *o) {
    long procs = sysconf(_SC_NPROCESSORS_ONLN);
#ifdef __linux__
    cpu_set_t set; /* the processors it may run on (taskset) */
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) procs = CPU_COUNT(&set);
#endif
    *o = (worker_opts){.device = -1, .claim_s = 30, .max_jobs = -1, .build_timeout = 600, .batch = procs < 1 ? 2 : 2 * procs > 64 ? 64 : 2 * procs};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_value = strcmp(a, "--device") == 0 || strcmp(a, "--claim-timeout") == 0 || strcmp(a, "--max-jobs") == 0 ||
                         strcmp(a, "--name") == 0 || strcmp(a, "--pace") == 0 || strcmp(a, "--batch") == 0 ||
                         strcmp(a, "--stream") == 0 || strcmp(a, "--build-threads") == 0 || strcmp(a, "--share") == 0 ||
                         strcmp(a, "--build-timeout") == 0;
        const char *v = has_value && i + 1 < argc ? argv[i + 1] : NULL;
        if (has_value && v == NULL) return usage("%s needs a value", a);
        char *end = NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            help_worker(stdout);
            return -1;
        } else if (strcmp(a, "--pace") == 0) {
            o->pace = strtod(v, &end);
            if (end == v || *end || !(o->pace > 0 && o->pace <= 1000)) return usage("--pace '%s': expected a factor above 0, at most 1000", v);
        } else if (strcmp(a, "--build-only") == 0) {
            o->build_only = true;
        } else if (strcmp(a, "--share") == 0) {
            struct stat st;
            if (*v == '\0' || stat(v, &st) != 0 || !S_ISDIR(st.st_mode)) return usage("--share '%s': not a directory", v);
            o->share = v;
        } else if (strcmp(a, "--quiet") == 0) {
            o->quiet = true;
        } else if (strcmp(a, "--json") == 0) {
            o->json = true;
        } else if (strcmp(a, "--device") == 0) {
            o->device = strtol(v, &end, 10);
            if (end == v || *end || o->device < 0 || o->device > 1000000) return usage("--device '%s': expected a device number", v);
        } else if (strcmp(a, "--claim-timeout") == 0) {
            o->claim_s = strtod(v, &end);
            if (end == v || *end || !(o->claim_s >= 0.5 && o->claim_s <= 86400))
                return usage("--claim-timeout '%s': expected seconds from 0.5 to 86400", v);
        } else if (strcmp(a, "--max-jobs") == 0) {
            o->max_jobs = strtol(v, &end, 10);
            if (end == v || *end || o->max_jobs < 1) return usage("--max-jobs '%s': expected a count, at least 1", v);
        } else if (strcmp(a, "--batch") == 0) {
            o->batch = strtol(v, &end, 10);
            if (end == v || *end || o->batch < 1 || o->batch > 64) return usage("--batch '%s': expected a count from 1 to 64", v);
            o->batch_given = true;
        } else if (strcmp(a, "--build-timeout") == 0) {
            o->build_timeout = strtod(v, &end);
            if (end == v || *end || !(o->build_timeout >= 0.1 && o->build_timeout <= 86400))
                return usage("--build-timeout '%s': expected seconds from 0.1 to 86400", v);
        } else if (strcmp(a, "--build-threads") == 0) {
            o->build_threads = strtol(v, &end, 10);
            if (end == v || *end || o->build_threads < 1 || o->build_threads > AHEAD)
                return usage("--build-threads '%s': expected a count from 1 to %d", v, AHEAD);
        } else if (strcmp(a, "--stream") == 0) {
            if (strcmp(v, "auto") == 0) o->stream = STREAM_AUTO;
            else if (strcmp(v, "on") == 0) o->stream = STREAM_ON;
            else if (strcmp(v, "off") == 0) o->stream = STREAM_OFF;
            else return usage("--stream '%s': expected auto, on or off", v);
        } else if (strcmp(a, "--name") == 0) {
            if (*v == '\0' || strlen(v) > 200) return usage("--name: expected a name of 1 to 200 characters");
            o->name = v;
        } else if (a[0] == '-') {
            return usage("unknown option '%s'", a);
        } else if (o->url == NULL) {
            o->url = a;
        } else {
            return usage("unexpected argument '%s' (one Redis URL)", a);
        }
        if (has_value) i++;
    }
    if (o->url == NULL) return usage("no Redis URL given (redis://HOST[:PORT][/DB])");
    return 0;
}

/* ---- the heartbeat ---------------------------------------------------------------------------- */

static void announce(worker *w) {
    json_t *e = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:I,s:I,s:i,s:I,s:b}", "device", kt_device_name(w->dev), "fingerprint",
                          kt_device_fingerprint(w->dev), "language", kt_device_language(w->dev) ? kt_device_language(w->dev) : "",
                          "compiler", w->compiler, "architecture", kt_device_architecture(w->dev), "vendor", kt_device_vendor(w->dev),
                          "stream", w->streams[0], "seen", (json_int_t)fleet_now_ms(), "jobs", (json_int_t)atomic_load(&w->jobs),
                          "pid", (int)getpid(), "batch", (json_int_t)worker_in_flight(w), "build_only", w->o.build_only);
    char *text = e ? json_dumps(e, JSON_COMPACT) : NULL;
    json_decref(e);
    if (text == NULL) return;
    redisReply *r = redisCommand(w->hc, "HSET %s %s %s", FLEET_PREFIX "workers", w->name, text);
    if (r) freeReplyObject(r);
    free(text);
}

static void *beat_main(void *p) {
    worker *w = p;
    double renew = fmin(1.0, w->o.claim_s / 4), last_announce = 0, last_renew = 0;
    while (!atomic_load(&w->stop)) {
        if (w->hc == NULL) {
            char *err = NULL;
            w->hc = fleet_connect(w->o.url, 2000, &err);
            free(err);
            if (w->hc == NULL) {
                usleep(250000);
                continue;
            }
        }
        double now = kt_now_s();
        if (now - last_announce >= 1) {
            announce(w);
            last_announce = now;
        }
        if (now - last_renew >= renew) { /* the job in hand stays this worker's while it lives */
            pthread_mutex_lock(&w->mu);
            for (size_t i = 0; i < HAND; i++) {
                if (w->state[i] == FREE) continue;
                redisReply *r = redisCommand(w->hc, "XCLAIM %s %s %s 0 %s JUSTID", w->hand[i].stream, FLEET_GROUP, w->name, w->hand[i].id);
                if (r) freeReplyObject(r);
            }
            pthread_mutex_unlock(&w->mu);
            last_renew = now;
        }
        if (w->hc && w->hc->err) {
            redisFree(w->hc);
            w->hc = NULL;
        }
        usleep(50000);
    }
    return NULL;
}

/* ---- runs -------------------------------------------------------------------------------------- */

static void session_free(session *s) {
    tune_bench_close(s->bench);
    free(s->error);
    if (s->dir[0]) cli_remove_tree(s->dir);
    memset(s, 0, sizeof *s);
}

static bool write_file(const char *dir, const char *name, const char *data, size_t len) {
    if (strchr(name, '/') || strcmp(name, "..") == 0 || strcmp(name, ".") == 0) return false; /* the coordinator names files flat */
    char *path = cli_format("%s/%s", dir, name);
    FILE *f = path ? fopen(path, "wb") : NULL;
    bool ok = f && fwrite(data, 1, len, f) == len;
    if (f && fclose(f) != 0) ok = false;
    free(path);
    return ok;
}

/* Sets run up in s: NULL, or why not (allocated); *gone when the run's coordinator is gone. */
static char *session_open(worker *w, lane *l, session *s, const char *run, bool *gone) {
    *gone = false;
    snprintf(s->run, sizeof s->run, "%s", run);
    redisReply *r = redisCommand(l->c, "HGETALL " FLEET_PREFIX "run:%s", run);
    if (r == NULL) return cli_format("Redis: %s", l->c->errstr);
    char *err = NULL;
    const redisReply *problem = NULL, *options = NULL, *recording = NULL;
    int64_t seen = 0;
    for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i + 1 < r->elements; i += 2) {
        const char *k = r->element[i]->str;
        if (strcmp(k, "problem") == 0) problem = r->element[i + 1];
        else if (strcmp(k, "options") == 0) options = r->element[i + 1];
        else if (strcmp(k, "recording") == 0) recording = r->element[i + 1];
        else if (strcmp(k, "seen") == 0) seen = strtoll(r->element[i + 1]->str, NULL, 10);
    }
    if (problem == NULL || options == NULL || fleet_now_ms() - seen > 60000) { /* its coordinator stopped */
        freeReplyObject(r);
        *gone = true;
        return cli_format("run %s is gone", run);
    }
    snprintf(s->dir, sizeof s->dir, "/tmp/kerntune-run-XXXXXX");
    if (mkdtemp(s->dir) == NULL) {
        s->dir[0] = '\0';
        freeReplyObject(r);
        return cli_format("cannot create a temporary directory: %s", strerror(errno));
    }
    bool ok = write_file(s->dir, "problem.json", problem->str, problem->len);
    for (size_t i = 0; ok && i + 1 < r->elements; i += 2)
        if (strncmp(r->element[i]->str, "file:", 5) == 0)
            ok = write_file(s->dir, r->element[i]->str + 5, r->element[i + 1]->str, r->element[i + 1]->len);
    if (ok && recording) ok = write_file(s->dir, "recording", recording->str, recording->len);
    json_t *opts = json_loads(options->str, 0, NULL);
    if (!ok) err = cli_format("cannot write the run's files into %s", s->dir);
    else if (opts == NULL) err = cli_format("run %s: its options cannot be read", run);
    if (err == NULL) {
        char *problem_path = cli_format("%s/problem.json", s->dir), *rec_path = cli_format("%s/recording", s->dir);
        json_t *defs = json_object_get(opts, "defines");
        const char *defines[64];
        size_t nd = 0;
        for (size_t i = 0; i < json_array_size(defs) && nd < 64; i++)
            if (json_string_value(json_array_get(defs, i))) defines[nd++] = json_string_value(json_array_get(defs, i));
        tune_bench_args a = {.problem = problem_path,
                             .problem_size = json_string_value(json_object_get(opts, "problem_size")),
                             .defines = defines,
                             .ndefines = nd,
                             .seed = (uint64_t)json_integer_value(json_object_get(opts, "seed")),
                             .seed_given = json_is_true(json_object_get(opts, "seed_given")),
                             .timeout = json_number_value(json_object_get(opts, "timeout")),
                             .device = recording ? -1 : (long)w->devi,
                             .simulate = recording ? rec_path : NULL,
                             .simulate_name = json_string_value(json_object_get(opts, "simulate_name")),
                             .recorded = json_is_true(json_object_get(opts, "recorded")),
                             .build_only = l->build_only,
                             .build_timeout = l->build_only ? w->o.build_timeout : 0};
        err = problem_path && rec_path ? tune_bench_open(&a, &s->bench) : cli_format("out of memory");
        free(problem_path), free(rec_path);
    }
    json_decref(opts);
    freeReplyObject(r);
    return err;
}

/* The session of run in lane l: set up now when none is (the least recently used one makes
 * room). */
session *worker_session(worker *w, lane *l, const char *run, bool *gone) {
    *gone = false;
    session *s = NULL, *oldest = &l->sessions[0];
    for (int i = 0; i < SESSIONS && s == NULL; i++)
        if (strcmp(l->sessions[i].run, run) == 0) s = &l->sessions[i];
        else if (l->sessions[i].used < oldest->used) oldest = &l->sessions[i];
    if (s == NULL) {
        s = oldest;
        session_free(s);
        s->error = session_open(w, l, s, run, gone);
        if (s->error && !w->o.quiet && !*gone) fprintf(stderr, "kerntune worker: run %s: %s\n", run, s->error);
        if (*gone) session_free(s);
    }
    if (s->run[0]) s->used = ++l->tick;
    return *gone ? NULL : s;
}

/* ---- jobs ----------------------------------------------------------------------------------- */

/* Makes the two streams and their consumer group where they are absent: at the start, and when
 * a Redis that lost them (restarted without saving) answers again. NULL, or the error. */
static char *make_groups(worker *w, lane *l) {
    for (int s = 0; s < 3; s++) {
        redisReply *r = redisCommand(l->c, "XGROUP CREATE %s %s 0 MKSTREAM", w->streams[s], FLEET_GROUP);
        bool ok = r && (r->type != REDIS_REPLY_ERROR || strncmp(r->str, "BUSYGROUP", 9) == 0);
        char *err = ok ? NULL : cli_format("creating the consumer group of %s: %s", w->streams[s], r ? r->str : l->c->errstr);
        if (r) freeReplyObject(r);
        if (err) return err;
    }
    return NULL;
}

/* Up to max jobs into js: those abandoned by workers that stopped renewing their claims first,
 * else new ones (waiting up to a second); how many. An entry that is not a job is acknowledged
 * and dropped. */
void worker_ack(worker *w, lane *l, const char *stream, const char *id) {
    (void)w;
    redisReply *r = redisCommand(l->c, "XACK %s %s %s", stream, FLEET_GROUP, id);
    if (r) freeReplyObject(r);
}

/* The jobs among entries (a reply's list of [id, [k, v...]]) of stream into js[*n..max); an entry
 * that is not a job is acknowledged and dropped. */
static void take_entries(worker *w, lane *l, const redisReply *entries, const char *stream, job *js, size_t *n, size_t max) {
    for (size_t e = 0; entries && entries->type == REDIS_REPLY_ARRAY && e < entries->elements && *n < max; e++) {
        const redisReply *ent = entries->element[e];
        const char *id = fleet_wire_id(ent);
        if (fleet_wire_job(ent, stream, &js[*n])) (*n)++;
        else if (id != NULL) worker_ack(w, l, stream, id);
    }
}

size_t worker_next_jobs(worker *w, lane *l, job *js, size_t max, jobs_from from) {
    char min_idle[32], count[16];
    snprintf(min_idle, sizeof min_idle, "%lld", (long long)(w->o.claim_s * 1000));
    snprintf(count, sizeof count, "%zu", max);
    /* abandoned jobs first: a measuring worker takes over builds too (nothing may wait on a
     * compile worker that died) */
    int first = from == JOBS_BUILD ? 2 : 0;
    size_t n = 0;
    for (int s = first; s < 3 && n == 0; s++) {
        const char *argv[] = {"XAUTOCLAIM", w->streams[s], FLEET_GROUP, w->name, min_idle, "0-0", "COUNT", count};
        redisReply *r = redisCommandArgv(l->c, 8, argv, NULL);
        if (r && r->type == REDIS_REPLY_ARRAY && r->elements >= 2) take_entries(w, l, r->element[1], w->streams[s], js, &n, max);
        if (r) freeReplyObject(r);
    }
    for (size_t i = 0; i < n; i++) {
        /* how often it was handed out: a job that takes every worker down is failed, not retried forever */
        redisReply *r = redisCommand(l->c, "XPENDING %s %s %s %s 1", js[i].stream, FLEET_GROUP, js[i].id, js[i].id);
        if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 1 && r->element[0]->elements >= 4)
            js[i].deliveries = r->element[0]->element[3]->integer;
        if (r) freeReplyObject(r);
    }
    if (n > 0) return n;
    /* then new ones: a measuring worker's own streams (waiting up to a second), then, with
     * nothing there, the jobs still to build (it builds them itself: an idle device beats one
     * waiting for a compile worker) */
    /* then new ones: a measuring worker's own streams first (what compile workers built, and
     * replays), without waiting; then, waiting up to a second, those and the jobs still to build
     * too (it builds those itself: an idle device beats one waiting for a compile worker). A
     * compile worker reads the jobs to build alone. */
    for (int pass = from == JOBS_BUILD ? 1 : 0; pass < 2 && n == 0; pass++) {
        const char *argv[15];
        int argc = 0;
        argv[argc++] = "XREADGROUP", argv[argc++] = "GROUP", argv[argc++] = FLEET_GROUP, argv[argc++] = w->name;
        argv[argc++] = "COUNT", argv[argc++] = count;
        if (pass == 1) argv[argc++] = "BLOCK", argv[argc++] = "1000";
        argv[argc++] = "STREAMS";
        if (from == JOBS_BUILD) argv[argc++] = w->streams[2], argv[argc++] = ">";
        else if (pass == 0) argv[argc++] = w->streams[0], argv[argc++] = w->streams[1], argv[argc++] = ">", argv[argc++] = ">";
        else
            argv[argc++] = w->streams[0], argv[argc++] = w->streams[1], argv[argc++] = w->streams[2], argv[argc++] = ">",
            argv[argc++] = ">", argv[argc++] = ">";
        redisReply *r = redisCommandArgv(l->c, argc, argv, NULL);
        if (r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOGROUP", 7) == 0) free(make_groups(w, l)); /* Redis lost them */
        for (size_t s = 0; r && r->type == REDIS_REPLY_ARRAY && s < r->elements; s++) {
            const redisReply *st = r->element[s];
            if (st->type != REDIS_REPLY_ARRAY || st->elements < 2) continue;
            size_t first_new = n;
            take_entries(w, l, st->element[1], st->element[0]->str, js, &n, max);
            for (size_t i = first_new; i < n; i++) js[i].deliveries = 1; /* read new: handed out once */
        }
        if (r) freeReplyObject(r);
    }
    return n;
}

bool worker_answer(worker *w, lane *l, const char *const *add, int nadd, const job *j, bool remove) {
    (void)w;
    redisReply *r = redisCommand(l->c, "MULTI");
    bool ok = r && r->type != REDIS_REPLY_ERROR;
    if (r) freeReplyObject(r);
    if (ok) {
        r = redisCommandArgv(l->c, nadd, (const char **)add, NULL);
        if (r) freeReplyObject(r);
        r = redisCommand(l->c, "XACK %s %s %s", j->stream, FLEET_GROUP, j->id);
        if (r) freeReplyObject(r);
        if (remove) {
            r = redisCommand(l->c, "XDEL %s %s", j->stream, j->id);
            if (r) freeReplyObject(r);
        }
        r = redisCommand(l->c, "EXEC");
        ok = r && r->type == REDIS_REPLY_ARRAY;
        if (r) freeReplyObject(r);
    }
    return ok;
}

/* Writes job j's result and acknowledges it, in one transaction (a compile worker's copy is
 * removed too: no coordinator withdraws it). */
bool worker_finish(worker *w, lane *l, const job *j, const char *result) {
    char results[96];
    snprintf(results, sizeof results, FLEET_PREFIX "results:%s", j->run);
    const char *add[] = {"XADD", results, "*", "type", "done", "seq", j->seq, "worker", w->name, "result", result};
    return worker_answer(w, l, add, 11, j, j->forwarded);
}

/* The device this worker measures on. */
static bool pick(worker *w, char **err) {
    size_t n = kt_context_device_count(w->ctx);
    if (w->o.device >= 0 && (size_t)w->o.device >= n) {
        *err = cli_format("--device %ld: no such device (there are %zu; see 'kerntune devices')", w->o.device, n);
        return false;
    }
    if (n == 0) {
        *err = cli_format("no device: kerntune found no backend with a device");
        return false;
    }
    w->devi = w->o.device >= 0 ? (size_t)w->o.device : 0;
    for (size_t i = 0; w->o.device < 0 && i < n; i++)
        if (kt_device_caps(kt_context_device(w->ctx, i)) & KT_BACKEND_CAP_OWN_PROCESSOR) {
            w->devi = i;
            break;
        }
    w->dev = kt_context_device(w->ctx, w->devi);
    return true;
}

/* Sets the worker up: its context and device, its name and streams, its connections, its entry in
 * the fleet's table and its heartbeat; false with *err (allocated) on a failure. */
static bool worker_start(worker *w, char **err) {
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    if (kt_context_create(&w->ctx) != KT_OK || kt_context_set_cache(w->ctx, "off") != KT_OK) {
        *err = cli_format("%s", kt_last_error());
        return false;
    }
    if (!pick(w, err)) return false;
    if (kt_device_compiler(w->ctx, w->devi, w->compiler, sizeof w->compiler) != KT_OK) {
        *err = cli_format("device %zu: its compiler: %s", w->devi, kt_last_error());
        return false;
    }
    char host[128] = "host";
    gethostname(host, sizeof host - 1);
    snprintf(w->name, sizeof w->name, "%s", w->o.name ? w->o.name : "");
    if (!w->o.name) snprintf(w->name, sizeof w->name, "%.120s:%ld", host, (long)getpid());
    fleet_jobs_key(kt_device_fingerprint(w->dev), w->streams[0]);
    fleet_jobs_key(NULL, w->streams[1]);
    fleet_build_key(kt_device_fingerprint(w->dev), w->streams[2]);
    /* replies may wait a second (XREADGROUP BLOCK 1000): the timeout leaves room */
    if ((w->main.c = fleet_connect(w->o.url, 5000, err)) == NULL || (w->hc = fleet_connect(w->o.url, 2000, err)) == NULL) return false;
    if ((*err = make_groups(w, &w->main)) != NULL) return false;
    w->streaming = w->o.stream == STREAM_ON || (w->o.stream == STREAM_AUTO && (kt_device_caps(w->dev) & KT_BACKEND_CAP_OWN_PROCESSOR));
    if (w->o.build_only) w->streaming = false; /* it builds on the threads below and measures nothing */
    if (w->streaming || w->o.build_only) { /* a build-ahead thread per compile thread, each with its connection */
        w->build_threads = w->o.build_threads > 0 ? (size_t)w->o.build_threads : kt_context_compile_threads(w->ctx);
        w->nahead = w->build_threads < 1 ? 1 : w->build_threads > AHEAD ? AHEAD : w->build_threads;
        for (size_t i = 0; i < w->nahead; i++)
            if ((w->ahead[i].c = fleet_connect(w->o.url, 5000, err)) == NULL) return false;
            else w->ahead[i].build_only = true;
    }
    announce(w);
    if (pthread_create(&w->beat, NULL, beat_main, w) != 0) {
        *err = cli_format("cannot start the heartbeat thread");
        return false;
    }
    w->beat_started = true;
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    if (!w->o.quiet)
        fprintf(stderr, "kerntune worker %s: measuring on device %zu, %s, for %s (%s)\n", w->name, w->devi, kt_device_name(w->dev),
                w->o.url, w->o.build_only ? "building only" : w->streaming ? "streaming: building ahead while measuring" : "in batches");
    return true;
}

void worker_lane_free(lane *l) {
    if (l->c) redisFree(l->c);
    l->c = NULL;
    for (int i = 0; i < SESSIONS; i++) session_free(&l->sessions[i]);
}

/* Leaves the fleet (its entry removed), says what it did (--json: one document), frees w. */
static void worker_stop(worker *w, int rc) {
    atomic_store(&w->stop, true);
    if (w->beat_started) pthread_join(w->beat, NULL);
    if (w->hc) {
        redisReply *r = redisCommand(w->hc, "HDEL %s %s", FLEET_PREFIX "workers", w->name);
        if (r) freeReplyObject(r);
        redisFree(w->hc);
    }
    worker_lane_free(&w->main);
    for (size_t i = 0; i < w->nahead; i++) worker_lane_free(&w->ahead[i]);
    if (w->o.json && rc == 0) {
        json_t *j = json_pack("{s:s,s:s,s:I,s:b,s:I,s:I,s:b,s:I,s:I,s:I}", "worker", w->name, "device", w->dev ? kt_device_name(w->dev) : "",
                              "jobs", (json_int_t)atomic_load(&w->jobs), "streaming", w->streaming, "built_ahead",
                              (json_int_t)atomic_load(&w->built_ahead), "found_ahead", (json_int_t)atomic_load(&w->found_ahead), "build_only",
                              w->o.build_only, "artifacts_handed_on", (json_int_t)atomic_load(&w->handed_on), "artifacts_received",
                              (json_int_t)atomic_load(&w->received), "artifacts_rejected", (json_int_t)atomic_load(&w->rejected));
        char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
        if (text) fprintf(doc_out ? doc_out : stdout, "%s\n", text);
        free(text);
        json_decref(j);
    }
    kt_context_destroy(w->ctx);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    if (!w->o.quiet && rc == 0) fprintf(stderr, "kerntune worker %s: stopped after %ld jobs\n", w->name, (long)atomic_load(&w->jobs));
    free(w);
}

int run_worker(int argc, char **argv) {
    for (int i = 1; i < argc; i++) json_wanted = json_wanted || strcmp(argv[i], "--json") == 0;
    worker *w = calloc(1, sizeof *w);
    if (w == NULL) return 1;
    int rc = parse(argc, argv, &w->o);
    if (rc != 0) {
        free(w);
        return rc < 0 ? 0 : rc;
    }
    /* kernels (in runner processes that inherit descriptor 1) may print: the document alone on stdout */
    FILE *jout = w->o.json ? cli_json_begin() : NULL;
    doc_out = jout;
    char *err = NULL;
    rc = worker_start(w, &err) ? 0 : 1;
    if (rc == 0) worker_serve(w);
    else say_error(err ? err : "out of memory");
    free(err);
    worker_stop(w, rc);
    cli_json_end(jout);
    doc_out = NULL;
    return rc;
}

#endif /* KT_NO_REDIS */
