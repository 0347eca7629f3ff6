/*
 * worker_build.c - a fleet's compile workers (`kerntune worker --build-only`), and what a
 * measuring worker does with what they built (worker_int.h, fleet.h's build:<device> stream).
 *
 * While compile workers serve a device model, the coordinator puts its jobs on the model's
 * build stream. A compile worker takes them one per build thread, builds each as the measuring
 * workers would (tune_bench_build on a session that makes no data and touches no device), and
 * hands the artifact on: its bytes under blob:<sha256> in Redis (or as <sha256> in the
 * --share directory), and the job moved to the model's jobs stream with the artifact's file
 * name and digest, in one transaction with its removal from the build stream. A measuring
 * worker that takes such a job reads the artifact, computes its digest, and places it in its
 * artifact directory only when the digest is the one the job names (a blob that expired,
 * failed its digest or cannot be read is counted and left: the measuring worker builds the job
 * itself, as it does a job it takes from the build stream when it has nothing else to do).
 * So a compile worker only ever saves time: one that dies leaves its job pending on the build
 * stream, where another compile worker, or a measuring worker, takes it over after the claim
 * timeout.
 */
#define _DEFAULT_SOURCE
#include "worker_int.h"

#ifndef KT_NO_REDIS

#include "text.h"

#include <kerntune/variants.h>

#include <openssl/evp.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { ARTIFACT_MAX = 64 << 20 }; /* larger ones are not handed on (the measuring worker builds them) */

static void sha256_hex(const void *data, size_t len, char out[65]) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    out[0] = '\0';
    if (EVP_Digest(data, len, md, &n, EVP_sha256(), NULL) != 1 || n != 32) return;
    for (unsigned i = 0; i < n; i++) snprintf(out + 2 * i, 3, "%02x", md[i]);
}

/* An artifact's file name as a compile worker may name it: flat, no dot first, a few safe
 * characters. */
static bool safe_name(const char *name) {
    size_t n = strlen(name);
    if (n == 0 || n >= 128 || name[0] == '.') return false;
    for (size_t i = 0; i < n; i++)
        if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= 'A' && name[i] <= 'Z') || (name[i] >= '0' && name[i] <= '9') ||
              name[i] == '.' || name[i] == '_' || name[i] == '-'))
            return false;
    return true;
}

static bool hex64(const char *s) {
    if (strlen(s) != 64) return false;
    for (size_t i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
    return true;
}

/* The bytes of file path (at most ARTIFACT_MAX), or NULL. */
static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return NULL;
    char *data = NULL;
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && st.st_size > 0 && st.st_size <= ARTIFACT_MAX && (data = malloc((size_t)st.st_size)) != NULL &&
        fread(data, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
        free(data);
        data = NULL;
    }
    if (data) *len = (size_t)st.st_size;
    fclose(f);
    return data;
}

/* Writes data into dir/name through a temporary file and a rename (a reader never sees part of
 * one), creating dir when it is not there. */
static bool place(const char *dir, const char *name, const void *data, size_t len) {
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        char *parent = cli_format("%s", dir), *slash = parent ? strrchr(parent, '/') : NULL;
        if (slash && slash != parent) *slash = '\0', mkdir(parent, 0755); /* one level up: the user's cache directory */
        free(parent);
        if (mkdir(dir, 0755) != 0 && errno != EEXIST) return false;
    }
    char *tmp = cli_format("%s/.%s.%ld.tmp", dir, name, (long)getpid()), *path = cli_format("%s/%s", dir, name);
    FILE *f = tmp && path ? fopen(tmp, "wb") : NULL;
    bool ok = f && fwrite(data, 1, len, f) == len;
    if (f && fclose(f) != 0) ok = false;
    if (ok && rename(tmp, path) != 0) ok = false;
    if (!ok && tmp) unlink(tmp);
    free(tmp), free(path);
    return ok;
}

void worker_receive(worker *w, lane *l, const job *j) {
    if (!j->artifact[0]) return;
    const char *dir = kt_context_artifact_dir(w->ctx);
    if (dir == NULL || !safe_name(j->artifact) || !hex64(j->sha256)) {
        atomic_fetch_add(&w->rejected, 1);
        return;
    }
    char *path = cli_format("%s/%s", dir, j->artifact);
    struct stat st;
    bool there = path && stat(path, &st) == 0 && st.st_size > 0; /* built here already */
    free(path);
    if (there) return;
    char *data = NULL;
    size_t len = 0;
    if (w->o.share) {
        char *from = cli_format("%s/%s", w->o.share, j->sha256);
        data = from ? read_file(from, &len) : NULL;
        free(from);
    } else {
        redisReply *r = redisCommand(l->c, "GET " FLEET_PREFIX "blob:%s", j->sha256);
        if (r && r->type == REDIS_REPLY_STRING && r->len > 0 && (data = malloc(r->len)) != NULL) memcpy(data, r->str, r->len), len = r->len;
        if (r) freeReplyObject(r);
    }
    char got[65] = "";
    if (data) sha256_hex(data, len, got);
    if (data == NULL || strcmp(got, j->sha256) != 0 || !place(dir, j->artifact, data, len)) {
        atomic_fetch_add(&w->rejected, 1);
        if (!w->o.quiet)
            fprintf(stderr, "kerntune worker %s: the artifact of %s %s: built here instead\n", w->name, j->config,
                    data == NULL ? "is not there" : strcmp(got, j->sha256) != 0 ? "fails its digest" : "cannot be written");
    } else {
        atomic_fetch_add(&w->received, 1);
    }
    free(data);
}

/* ---- the compile worker ------------------------------------------------------------------- */

/* The artifact of one configuration, as kt_op_build_each tells it. */
typedef struct built_one {
    const char *config;
    char path[4096];
} built_one;

static void on_built(void *user, const char *config, const char *artifact) {
    built_one *b = user;
    if (artifact && strcmp(config, b->config) == 0) snprintf(b->path, sizeof b->path, "%s", artifact);
}

/* Moves job j from the build stream to the jobs stream (naming its artifact when sha is not
 * NULL): the copy added, the original acknowledged and removed, in one transaction. */
static bool forward(worker *w, lane *l, const job *j, const char *name, const char *sha) {
    char from[24], runs[24];
    snprintf(from, sizeof from, "%lu", j->from);
    snprintf(runs, sizeof runs, "%lu", j->runs);
    const char *add[] = {"XADD", w->streams[0], "*", "run", j->run, "seq", j->seq, "config", j->config, "from", from, "runs", runs,
                         "forwarded", "1", "artifact", name, "sha256", sha};
    return worker_answer(w, l, add, sha ? 19 : 15, j, true);
}

/* Puts an artifact where the measuring workers read it: blob:<sha> in Redis (kept a day), or
 * <sha> in the shared directory. */
static bool publish(worker *w, lane *l, const char *sha, const char *data, size_t len) {
    if (w->o.share) return place(w->o.share, sha, data, len);
    char key[128];
    snprintf(key, sizeof key, FLEET_PREFIX "blob:%s", sha);
    const char *argv[] = {"SET", key, data, "EX", "86400"};
    size_t lens[] = {3, strlen(key), len, 2, 5};
    redisReply *r = redisCommandArgv(l->c, 5, argv, lens);
    bool ok = r && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
    return ok;
}

/* Builds job j and hands it on (without an artifact when it failed to build, or its run could
 * not be set up here: the measuring worker builds it and reports what happens). */
static void build_and_hand_on(worker *w, lane *l, job *j) {
    bool gone = false;
    session *s = worker_session(w, l, j->run, &gone);
    if (gone || s == NULL) { /* nobody waits for it */
        worker_ack(w, l, j->stream, j->id);
        return;
    }
    built_one b = {.config = j->config};
    kt_build_counts c = {0};
    if (s->error == NULL && j->deliveries <= POISON) {
        const char *config = j->config;
        char *err = tune_bench_build(s->bench, &config, 1, &c, on_built, &b);
        if (err && !w->o.quiet) fprintf(stderr, "kerntune worker %s: building %s: %s\n", w->name, j->config, err);
        free(err);
    }
    atomic_fetch_add(&w->built_ahead, (long)c.built);
    atomic_fetch_add(&w->found_ahead, (long)c.found);
    size_t len = 0;
    char *data = b.path[0] ? read_file(b.path, &len) : NULL, sha[65] = "";
    const char *name = b.path[0] ? strrchr(b.path, '/') : NULL;
    name = name ? name + 1 : b.path;
    if (data) sha256_hex(data, len, sha);
    bool handed = data && sha[0] && safe_name(name) && publish(w, l, sha, data, len);
    free(data);
    if (forward(w, l, j, name, handed ? sha : NULL)) {
        atomic_fetch_add(&w->jobs, 1);
        if (handed) atomic_fetch_add(&w->handed_on, 1);
    }
}

static void *compile_main(void *p) {
    lane *l = p;
    worker *w = l->w;
    job *j = malloc(sizeof *j);
    while (j != NULL && !worker_interrupted && (w->o.max_jobs < 0 || atomic_load(&w->jobs) < w->o.max_jobs)) {
        if (l->c == NULL || l->c->err) {
            if (l->c) redisFree(l->c);
            char *err = NULL;
            if ((l->c = fleet_connect(w->o.url, 5000, &err)) == NULL) {
                free(err);
                sleep(1);
                continue;
            }
        }
        if (worker_next_jobs(w, l, j, 1, JOBS_BUILD) == 0) continue;
        worker_hand(w, j, FREE, BUILDING);
        build_and_hand_on(w, l, j);
        worker_hand(w, j, BUILDING, FREE);
    }
    free(j);
    return NULL;
}

void worker_serve_builds(worker *w) {
    size_t started = 0;
    for (size_t i = 0; i < w->nahead; i++) {
        w->ahead[i].w = w;
        if (pthread_create(&w->ahead_th[i], NULL, compile_main, &w->ahead[i]) != 0) break;
        started++;
    }
    if (started == 0) fprintf(stderr, "kerntune worker %s: cannot start a build thread\n", w->name);
    for (size_t i = 0; i < started; i++) pthread_join(w->ahead_th[i], NULL);
}

#endif /* KT_NO_REDIS */
