/*
 * worker_serve.c - how a fleet worker serves its jobs (worker_int.h).
 *
 * In batches (a host device, or --stream off): take up to --batch jobs, build them, measure
 * them, send the results, take the next. Every batch waits for its slowest build, and the build
 * threads wait while the batch is measured; on a host device that is the point (a build beside
 * a running kernel would slow it and its measurement).
 *
 * Streaming (a device with its own processor, such as a GPU, or --stream on): a build-ahead
 * thread takes jobs and builds them into the artifact directory (kt_op_build, on a context of
 * its own: nothing is loaded or run there) while the measuring thread measures the jobs built
 * before them, which find their artifacts built. The device waits only when nothing built is
 * left. The build-ahead thread takes a batch as large as its build threads whenever fewer jobs
 * are ready than the device measures while one such batch builds (the moving averages of a
 * batch's build and a job's measuring say how many that is, at least one, at most a batch); the
 * jobs in hand are at most twice the build threads (or --batch), which the worker announces
 * so that the coordinator keeps that many on its stream.
 */
#define _DEFAULT_SOURCE
#include "worker_int.h"

#ifndef KT_NO_REDIS

#include "text.h"

#include <jansson.h>

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void sleep_ns(double ns) {
    if (!(ns > 0)) return;
    struct timespec ts = {(time_t)(ns / 1e9), (long)fmod(ns, 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR && !worker_interrupted) {
    }
}

/* A result document (allocated): the measurement, or a failure with message. */
static char *result_text(const worker *w, const job *j, const tune_bench_result *r, kt_outcome failed, const char *message) {
    json_t *res = json_object();
    json_object_set_new(res, "worker", json_string(w->name));
    json_object_set_new(res, "config", json_string(j->config));
    json_object_set_new(res, "outcome", json_string(kt_outcome_name(r ? r->outcome : failed)));
    if (r ? r->message != NULL : message != NULL) json_object_set_new(res, "message", json_string(r ? r->message : message));
    if (r) {
        json_t *runs = json_array();
        for (size_t i = 0; i < r->nruns; i++) json_array_append_new(runs, json_real(r->runs[i]));
        json_object_set_new(res, "runs", runs);
    }
    char *text = json_dumps(res, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(res);
    return text;
}

/* The jobs among js[0..n) of one run that are to be built or measured (their configurations
 * into configs, the jobs into sel), in lane l's session of the run (*s). The others are
 * answered now: acknowledged when the run is gone, failed when the run could not be set up
 * or the job took every worker that tried it down; when answer is false they are only left
 * out (the build-ahead thread leaves answering to the measuring thread). How many were kept. */
static size_t select_jobs(worker *w, lane *l, job *js, size_t n, bool answer, session **s, const char **configs, job **sel) {
    bool gone = false;
    *s = worker_session(w, l, js[0].run, &gone);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        char *text = NULL;
        if (gone || *s == NULL) { /* its run is gone: nobody waits for it */
            if (answer) worker_ack(w, l, js[i].stream, js[i].id);
            continue;
        }
        if (js[i].deliveries > POISON) /* it took every worker that tried it down */
            text = answer ? result_text(w, &js[i], NULL, KT_OUTCOME_CRASHED, "handed out more than 8 times: every worker that took it stopped") : NULL;
        else if ((*s)->error)
            text = answer ? result_text(w, &js[i], NULL, KT_OUTCOME_FAILED, (*s)->error) : NULL;
        else {
            sel[k] = &js[i];
            configs[k++] = js[i].config;
            continue;
        }
        if (text && worker_finish(w, l, &js[i], text)) atomic_fetch_add(&w->jobs, 1);
        free(text);
    }
    return k;
}

/* Measures jobs js[0..n) of one run, which ask for the same runs (built together, measured one
 * after the other), and sends each result. */
static void run_group(worker *w, job *js, size_t n) {
    const char *configs[64];
    job *batch[64];
    session *s = NULL;
    size_t k = select_jobs(w, &w->main, js, n, true, &s, configs, batch);
    if (k == 0) return;
    tune_bench_result r[64];
    double t0 = kt_now_s();
    char *err = tune_bench_measure(s->bench, configs, k, (unsigned)batch[0]->from, (unsigned)(batch[0]->runs ? batch[0]->runs : 1), r);
    if (err == NULL && w->o.pace > 0) sleep_ns(r[0].recorded_ns * w->o.pace); /* as long as the recording says (scaled) */
    double per_job = (kt_now_s() - t0) / (double)k;
    pthread_mutex_lock(&w->mu);
    w->measure_s = w->measure_s > 0 ? 0.7 * w->measure_s + 0.3 * per_job : per_job;
    pthread_mutex_unlock(&w->mu);
    for (size_t i = 0; i < k; i++) {
        char *text = err ? result_text(w, batch[i], NULL, KT_OUTCOME_FAILED, err) : result_text(w, batch[i], &r[i], KT_OUTCOME_FAILED, NULL);
        if (text && worker_finish(w, &w->main, batch[i], text)) atomic_fetch_add(&w->jobs, 1);
        free(text);
        if (err == NULL) tune_bench_result_free(&r[i]);
    }
    free(err);
}

/* Measures jobs js[0..n): those of one run that ask for the same runs together. */
static void run_all(worker *w, job *js, size_t n) {
    static job grp[64]; /* the measuring thread's alone */
    bool done[HAND] = {false};
    for (size_t i = 0; i < n; i++) {
        if (done[i]) continue;
        size_t k = 0;
        for (size_t j = i; j < n && k < 64; j++)
            if (!done[j] && strcmp(js[j].run, js[i].run) == 0 && js[j].from == js[i].from && js[j].runs == js[i].runs) {
                grp[k++] = js[j];
                done[j] = true;
            }
        run_group(w, grp, k);
    }
}

/* ---- the jobs in hand ---------------------------------------------------------------------- */

/* Puts jobs js[0..n) in hand in state st (the caller holds mu; there is room: see room). */
static void hand_put(worker *w, const job *js, size_t n, int st) {
    for (size_t i = 0, slot = 0; i < n; i++) {
        while (slot < HAND && w->state[slot] != FREE) slot++;
        if (slot == HAND) return; /* cannot happen (at most 64 in hand); its claim is then not renewed */
        w->hand[slot] = js[i];
        w->state[slot] = st;
        if (st == READY) w->ready_at[slot] = ++w->readies;
    }
}

/* Jobs in hand in state st (the caller holds mu). */
static size_t hand_count(const worker *w, int st) {
    size_t n = 0;
    for (size_t i = 0; i < HAND; i++) n += w->state[i] == st;
    return n;
}

/* Moves the jobs in hand in state from that match js[0..n) (by stream entry) to state to (FREE:
 * out of hand); the caller holds mu. */
static void hand_move(worker *w, const job *js, size_t n, int from, int to) {
    for (size_t i = 0; i < HAND; i++) {
        if (w->state[i] != from) continue;
        for (size_t k = 0; k < n; k++)
            if (strcmp(w->hand[i].id, js[k].id) == 0 && strcmp(w->hand[i].stream, js[k].stream) == 0) {
                w->state[i] = to;
                if (to == READY) w->ready_at[i] = ++w->readies;
                break;
            }
    }
}

void worker_hand(worker *w, const job *j, int from, int to) {
    pthread_mutex_lock(&w->mu);
    if (from == FREE) hand_put(w, j, 1, to);
    else hand_move(w, j, 1, from, to);
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* Tells the jobs' coordinators that this worker has them. */
static void say_started(worker *w, lane *l, const job *js, size_t n) {
    for (size_t i = 0; i < n; i++) {
        char results[96];
        snprintf(results, sizeof results, FLEET_PREFIX "results:%s", js[i].run);
        redisReply *r = redisCommand(l->c, "XADD %s * type start seq %s worker %s", results, js[i].seq, w->name);
        if (r) freeReplyObject(r);
    }
}

/* Reconnects lane l to Redis when its connection is gone; false (after a second's wait) when
 * Redis does not answer. */
static bool connected(worker *w, lane *l) {
    if (l->c != NULL && !l->c->err) return true;
    if (l->c) redisFree(l->c);
    char *err = NULL;
    if ((l->c = fleet_connect(w->o.url, 5000, &err)) == NULL) {
        free(err);
        sleep(1);
        return false;
    }
    return true;
}

static bool serving(const worker *w) {
    return !worker_interrupted && !atomic_load(&w->stop) && (w->o.max_jobs < 0 || atomic_load(&w->jobs) < w->o.max_jobs);
}

long worker_in_flight(const worker *w) {
    if (!w->streaming || w->o.batch_given) return w->o.batch;
    size_t n = 2 * w->build_threads;
    return (long)(n < 2 ? 2 : n > 64 ? 64 : n);
}

/* ---- in batches ------------------------------------------------------------------------------ */

static void serve_batch(worker *w) {
    static job js[64]; /* the serving thread's alone */
    size_t n = worker_next_jobs(w, &w->main, js, (size_t)w->o.batch, JOBS_MEASURE);
    if (n == 0) return;
    pthread_mutex_lock(&w->mu);
    hand_put(w, js, n, MEASURING);
    pthread_mutex_unlock(&w->mu);
    say_started(w, &w->main, js, n);
    for (size_t i = 0; i < n; i++) worker_receive(w, &w->main, &js[i]);
    run_all(w, js, n);
    pthread_mutex_lock(&w->mu);
    hand_move(w, js, n, MEASURING, FREE);
    pthread_mutex_unlock(&w->mu);
}

/* ---- streaming ---------------------------------------------------------------------------------- */

/* Whether a build-ahead thread may take another job now (the caller holds mu): not while
 * enough are ready to keep the device busy through one build (the moving averages of a build
 * and of a job's measuring say how many that is: at least one, at most the build threads), nor
 * with the hand full. */
static bool may_take(const worker *w) {
    size_t threads = w->build_threads ? w->build_threads : 1, limit = (size_t)worker_in_flight(w);
    size_t ready = hand_count(w, READY), held = HAND - hand_count(w, FREE);
    size_t keep = w->measure_s > 0 && w->build_s > 0 ? (size_t)ceil(w->build_s / w->measure_s) : threads;
    if (keep < 1) keep = 1;
    if (keep > threads) keep = threads;
    return ready < keep && held + w->taking < limit;
}

/* Builds job j ahead in lane l's session of its run. */
static void build_one(worker *w, lane *l, job *j) {
    const char *config;
    job *sel;
    session *s = NULL;
    double t0 = kt_now_s();
    kt_build_counts c = {0};
    worker_receive(w, l, j); /* built by a compile worker: then found here */
    char *err = select_jobs(w, l, j, 1, false, &s, &config, &sel) == 1 ? tune_bench_build(s->bench, &config, 1, &c, NULL, NULL) : NULL;
    if (err && !w->o.quiet) fprintf(stderr, "kerntune worker %s: building ahead: %s\n", w->name, err); /* measuring says it again */
    free(err);
    atomic_fetch_add(&w->built_ahead, (long)c.built);
    atomic_fetch_add(&w->found_ahead, (long)c.found);
    double took = kt_now_s() - t0;
    pthread_mutex_lock(&w->mu);
    if (c.built > 0) w->build_s = w->build_s > 0 ? 0.8 * w->build_s + 0.2 * took : took;
    pthread_mutex_unlock(&w->mu);
}

/* Waits on the worker's condition for up to 200 ms (the caller holds mu). */
static void wait_a_little(worker *w) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 200000000L;
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    pthread_cond_timedwait(&w->cv, &w->mu, &ts);
}

/* A build-ahead thread: one job at a time, taken, built and made ready, so that a slow build
 * holds up only its own thread. */
static void *ahead_main(void *p) {
    lane *l = p;
    worker *w = l->w;
    job *j = malloc(sizeof *j);
    while (j != NULL && serving(w) && !atomic_load(&w->ahead_stop)) {
        pthread_mutex_lock(&w->mu);
        if (!may_take(w)) {
            wait_a_little(w);
            pthread_mutex_unlock(&w->mu);
            continue;
        }
        w->taking++;
        pthread_mutex_unlock(&w->mu);
        size_t n = connected(w, l) ? worker_next_jobs(w, l, j, 1, JOBS_MEASURE) : 0;
        pthread_mutex_lock(&w->mu);
        w->taking--;
        if (n == 1) hand_put(w, j, 1, BUILDING);
        pthread_mutex_unlock(&w->mu);
        if (n == 0) continue;
        say_started(w, l, j, 1);
        build_one(w, l, j);
        pthread_mutex_lock(&w->mu);
        hand_move(w, j, 1, BUILDING, READY);
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
    }
    free(j);
    pthread_mutex_lock(&w->mu);
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* The jobs ready, oldest first, into js (marked MEASURING); waits up to 200 ms for one. */
static size_t take_ready(worker *w, job *js, size_t max) {
    pthread_mutex_lock(&w->mu);
    if (hand_count(w, READY) == 0) wait_a_little(w);
    size_t n = 0;
    while (n < max) {
        long at = -1;
        for (size_t i = 0; i < HAND; i++)
            if (w->state[i] == READY && (at < 0 || w->ready_at[i] < w->ready_at[at])) at = (long)i;
        if (at < 0) break;
        js[n++] = w->hand[at];
        w->state[at] = MEASURING;
    }
    pthread_mutex_unlock(&w->mu);
    return n;
}

static void serve_streaming(worker *w) {
    static job js[64]; /* the measuring thread's alone */
    for (size_t i = 0; i < w->nahead; i++) {
        w->ahead[i].w = w;
        if (pthread_create(&w->ahead_th[i], NULL, ahead_main, &w->ahead[i]) != 0) break;
        w->ahead_started++;
    }
    if (w->ahead_started == 0) {
        fprintf(stderr, "kerntune worker %s: cannot start the build-ahead threads: serving in batches\n", w->name);
        w->streaming = false;
        return;
    }
    while (serving(w)) {
        if (!connected(w, &w->main)) continue;
        size_t n = take_ready(w, js, 64);
        if (n == 0) continue;
        run_all(w, js, n);
        pthread_mutex_lock(&w->mu);
        hand_move(w, js, n, MEASURING, FREE);
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
    }
    /* stopping: nothing more is taken, and what is in hand is measured (as a batch is finished) */
    atomic_store(&w->ahead_stop, true);
    for (size_t i = 0; i < w->ahead_started; i++) pthread_join(w->ahead_th[i], NULL);
    w->ahead_started = 0;
    size_t n;
    while ((n = take_ready(w, js, 64)) > 0) {
        if (!connected(w, &w->main)) {
            pthread_mutex_lock(&w->mu);
            hand_move(w, js, n, MEASURING, READY);
            pthread_mutex_unlock(&w->mu);
            break; /* left to the claim timeout: another worker takes them over */
        }
        run_all(w, js, n);
        pthread_mutex_lock(&w->mu);
        hand_move(w, js, n, MEASURING, FREE);
        pthread_mutex_unlock(&w->mu);
    }
}

void worker_serve(worker *w) {
    if (w->o.build_only) {
        worker_serve_builds(w);
        return;
    }
    if (w->streaming) serve_streaming(w);
    while (!w->streaming && serving(w)) {
        if (!connected(w, &w->main)) continue;
        serve_batch(w);
    }
}

#endif /* KT_NO_REDIS */
