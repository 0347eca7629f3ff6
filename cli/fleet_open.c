/*
 * fleet_open.c - the coordinator's run, from opening to closing: the live workers found and
 * the device model most of them have chosen, the run published (the problem and its files, as
 * the workers need them), the reader started; and at the end the jobs withdrawn and the run's
 * keys removed.
 */
#define _DEFAULT_SOURCE
#include "fleet_int.h"

#ifndef KT_NO_REDIS

#include "t4.h"
#include "text.h"

#include <kerntune/cache.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* Whether a worker's entry is a compile worker's (kerntune worker --build-only). */
static bool is_compiler(json_t *w) { return json_is_true(json_object_get(w, "build_only")); }

/* The live workers able to take the run: their stream, device and fingerprint (jansson objects
 * in an array); waits up to wait_s for one. */
static json_t *live_workers(fleet *f, const fleet_run *run, double wait_s, size_t *others, char **err) {
    double until = kt_now_s() + wait_s;
    bool said = false;
    for (;;) {
        const char *argv[] = {"HGETALL", FLEET_PREFIX "workers"};
        redisReply *r = fleet_command(f, &f->c, 2, argv, NULL, NULL);
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
        bool measures = false; /* compile workers alone cannot measure: wait on for one that does */
        for (size_t i = 0; i < json_array_size(list) && !measures; i++) measures = run->simulate || !is_compiler(json_array_get(list, i));
        if (measures || kt_now_s() >= until) {
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
    f->backend = fleet_backend_table;
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
        if (is_compiler(w)) continue; /* the device model is the measuring workers' */
        size_t same = 0;
        for (size_t k = 0; fp && k < nw; k++) {
            const char *other = json_string_value(json_object_get(json_array_get(workers, k), "fingerprint"));
            same += other && strcmp(fp, other) == 0 && !is_compiler(json_array_get(workers, k));
        }
        if (same > f->st.workers) {
            f->st.workers = same, pick = fp;
            f->st.batch = 0, f->st.compilers = 0;
            for (size_t k = 0; k < nw; k++) { /* jobs in flight: what those workers and their compile workers hold */
                json_t *o = json_array_get(workers, k);
                const char *other = json_string_value(json_object_get(o, "fingerprint"));
                json_int_t b = json_integer_value(json_object_get(o, "batch"));
                if (other && strcmp(fp, other) == 0) f->st.batch += b > 0 ? (size_t)b : 1, f->st.compilers += is_compiler(o);
            }
            const char *dev = json_string_value(json_object_get(w, "device")), *cc = json_string_value(json_object_get(w, "compiler"));
            const char *arch = json_string_value(json_object_get(w, "architecture")), *vendor = json_string_value(json_object_get(w, "vendor"));
            snprintf(f->device, sizeof f->device, "%s", dev ? dev : "?");
            snprintf(f->compiler, sizeof f->compiler, "%s", cc ? cc : "");
            snprintf(f->arch, sizeof f->arch, "%s", arch ? arch : "");
            snprintf(f->vendor, sizeof f->vendor, "%s", vendor ? vendor : "");
        }
    }
    if (!run->simulate && f->st.workers == 0) {
        *err = cli_format("no live worker on %s measures on a %s device: the %zu there only build (kerntune worker --build-only); "
                          "start 'kerntune worker %s --device N' on a machine with one", f->url, run->p->language, nw, f->url);
        json_decref(workers);
        goto fail;
    }
    f->st.ignored = others + nw - f->st.workers - f->st.compilers;
    if (run->simulate) {
        snprintf(f->device, sizeof f->device, "replay of %.200s", run->simulate); /* as replay.c names it */
        snprintf(f->fingerprint, sizeof f->fingerprint, "replay:%.900s", run->simulate);
        snprintf(f->compiler, sizeof f->compiler, "replay %.900s recorded=%d", run->simulate, run->recorded); /* as replay.c says */
        fleet_jobs_key(NULL, f->jobs_key);
        fleet_jobs_key(NULL, f->measure_key);
    } else {
        snprintf(f->fingerprint, sizeof f->fingerprint, "%s", pick ? pick : "");
        fleet_jobs_key(f->fingerprint, f->measure_key);
        if (f->st.compilers > 0) fleet_build_key(f->fingerprint, f->jobs_key); /* built first, then measured */
        else fleet_jobs_key(f->fingerprint, f->jobs_key);
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
    if (!add_field(f, "seen", cli_format("%s", now), strlen(now)) || !fleet_publish(f, &f->c, err)) goto fail;
    if (!fleet_make_group(f, &f->c, err)) goto fail;
    if (pthread_create(&f->reader, NULL, fleet_reader_main, f) != 0) {
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
    if (f->shown) fleet_show_progress(f, true);
    /* withdraw what is left of the run: its jobs (done or not), its hash and its results */
    if (f->c) {
        for (int direct = 0; direct < 2; direct++)
            for (size_t i = 0; i < f->njobs;) {
                const char *argv[2 + 256];
                int n = 0;
                argv[n++] = "XDEL", argv[n++] = direct ? f->measure_key : f->jobs_key;
                for (; i < f->njobs && n < 2 + 256; i++)
                    if (f->jobs[i].entry[0] && f->jobs[i].direct == (direct == 1)) argv[n++] = f->jobs[i].entry;
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

#endif
