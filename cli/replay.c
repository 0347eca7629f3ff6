/*
 * replay.c - the replay backend (see replay.h).
 */
#include "replay.h"

#include <kerntune/backend.h>

#include <stdbool.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct replay_module {
    t4_record *rec;
    size_t next;
    uint64_t rng;
} replay_module;

/* The table is the backend member of its replay_data (replay_backend), which becomes the state
 * every other callback receives. */
static kt_status r_init(const kt_backend *self, void **state, char *err, size_t errlen) {
    (void)err, (void)errlen;
    *state = (replay_data *)((const char *)self - offsetof(replay_data, backend));
    return KT_OK;
}

static size_t r_count(void *state) {
    (void)state;
    return 1;
}

static kt_status r_describe(void *state, size_t index, char *name, char *fp, char *err, size_t errlen) {
    (void)index, (void)err, (void)errlen;
    replay_data *d = state;
    snprintf(name, KT_DEVICE_NAME_MAX, "replay of %.200s", d->source);
    snprintf(fp, KT_DEVICE_FINGERPRINT_MAX, "replay:%.900s", d->source);
    return KT_OK;
}

/* Buffers are host memory: replay reads none of them. */
kt_status replay_buffer_alloc(void *state, size_t device, size_t bytes, void **out, char *err, size_t errlen) {
    (void)state, (void)device;
    *out = calloc(1, bytes ? bytes : 1); /* never touched: calloc maps it without using memory */
    if (*out == NULL) snprintf(err, errlen, "out of memory");
    return *out ? KT_OK : KT_ERR_NO_MEMORY;
}

void replay_buffer_free(void *state, size_t device, void *buffer) {
    (void)state, (void)device;
    free(buffer);
}

kt_status replay_buffer_copy(void *state, size_t device, void *dst, const void *src, size_t bytes, kt_copy_dir dir, char *err,
                             size_t errlen) {
    (void)state, (void)device, (void)dir, (void)err, (void)errlen;
    if (bytes) memmove(dst, src, bytes);
    return KT_OK;
}

kt_status replay_buffer_fill(void *state, size_t device, void *buffer, size_t bytes, const void *pattern, size_t pattern_bytes,
                             char *err, size_t errlen) {
    (void)state, (void)device, (void)err, (void)errlen;
    for (size_t i = 0; i + pattern_bytes <= bytes; i += pattern_bytes) memcpy((char *)buffer + i, pattern, pattern_bytes);
    return KT_OK;
}

static kt_status r_compiler_id(void *state, size_t device, char *out, size_t len, char *err, size_t errlen) {
    (void)device, (void)err, (void)errlen;
    replay_data *d = state;
    snprintf(out, len, "replay %s recorded=%d", d->source, d->recorded);
    return KT_OK;
}

char *replay_defines_key(const kt_build_request *req) {
    /* the configuration's own text: under Kernel Tuner's contract the defines hold more */
    if (req->config != NULL) return strdup(req->config);
    size_t len = 1;
    for (size_t i = 0; i < req->ndefines; i++) len += strlen(req->defines[i]) + 1;
    char *buf = malloc(len), *p = buf;
    if (buf == NULL) return NULL;
    *p = '\0';
    for (size_t i = 0; i < req->ndefines; i++) {
        if (i) *p++ = ',';
        size_t n = strlen(req->defines[i]);
        memcpy(p, req->defines[i], n + 1);
        p += n;
    }
    return buf;
}

char *replay_read_key(const char *path) {
    FILE *f = fopen(path, "r");
    if (f == NULL) return NULL;
    size_t cap = 256, n = 0;
    char *key = malloc(cap);
    while (key) {
        n += fread(key + n, 1, cap - n - 1, f);
        if (n < cap - 1) break;
        char *more = realloc(key, cap *= 2);
        if (more == NULL) free(key);
        key = more;
    }
    bool bad = ferror(f);
    fclose(f);
    if (key == NULL || bad) {
        free(key);
        return NULL;
    }
    key[n] = '\0';
    return key;
}

static t4_record *find(replay_data *d, const char *key) {
    t4_record probe = {.key = (char *)key};
    return d->recs.n > 0 ? bsearch(&probe, d->recs.recs, d->recs.n, sizeof probe, t4_compare) : NULL; /* none: recs may be NULL */
}

const t4_record *replay_find(const replay_data *data, const char *config) {
    return find((replay_data *)data, config);
}

static kt_status r_build(void *state, size_t device, const kt_build_request *req, char *log, size_t loglen) {
    (void)device;
    replay_data *d = state;
    char *key = replay_defines_key(req);
    if (key == NULL) {
        snprintf(log, loglen, "out of memory");
        return KT_ERR_NO_MEMORY;
    }
    t4_record *rec = find(d, key);
    if (rec) /* what building it cost when it was recorded: compiling, and the framework's share */
        atomic_fetch_add(&d->built_ns, (uint64_t)(fmax(rec->compile_ns, 0) + fmax(rec->framework_ns, 0)));
    if (rec && strcmp(rec->invalidity, "compile") == 0) { /* replay the recorded failure */
        free(key);
        snprintf(log, loglen, "recorded as failing to compile in %s", d->source);
        return KT_ERR_BACKEND;
    }
    FILE *f = fopen(req->out_path, "w");
    bool ok = f != NULL && fputs(key, f) >= 0;
    if (f && fclose(f) != 0) ok = false;
    free(key);
    if (!ok) {
        snprintf(log, loglen, "cannot write %s", req->out_path);
        return KT_ERR_SYSTEM;
    }
    return KT_OK;
}

static uint64_t next_random(uint64_t *s);

static kt_status r_load(void *state, size_t device, const char *path, const char *kernel_name, void **module, char *err,
                        size_t errlen) {
    (void)device, (void)kernel_name;
    replay_data *d = state;
    /* the artifact holds the configuration's key, as r_build wrote it */
    char *key = replay_read_key(path);
    if (key == NULL) {
        snprintf(err, errlen, "cannot read %s", path);
        return KT_ERR_SYSTEM;
    }
    t4_record *rec = find(d, key);
    if (rec == NULL) {
        snprintf(err, errlen, "configuration %s is not in the recorded data of %s", key, d->source);
        free(key);
        return KT_ERR_BACKEND;
    }
    free(key);
    replay_module *m = calloc(1, sizeof *m);
    if (m == NULL) return KT_ERR_NO_MEMORY;
    m->rec = rec;
    m->rng = d->seed ^ (uint64_t)(rec - d->recs.recs) * 0x9e3779b97f4a7c15ull;
    /* served from run skip on: as if the runs before it had been served here */
    m->next = d->skip;
    for (unsigned i = 0; i < d->skip && d->sampled; i++) next_random(&m->rng);
    *module = m;
    return KT_OK;
}

static void r_unload(void *state, size_t device, void *module) {
    (void)state, (void)device;
    free(module);
}

static uint64_t next_random(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static kt_status r_launch(void *state, size_t device, void *module, const kt_launch_geometry *g, const kt_arg *args,
                          size_t nargs, double *ns, char *err, size_t errlen) {
    (void)device, (void)g, (void)args, (void)nargs;
    replay_data *d = state;
    replay_module *m = module;
    t4_record *rec = m->rec;
    if (strcmp(rec->invalidity, "correct") != 0 || (rec->nruntimes == 0 && rec->mean_ns < 0)) {
        snprintf(err, errlen, "recorded as %s in %s", rec->invalidity, d->source);
        return KT_ERR_BACKEND;
    }
    double t;
    if (d->recorded || rec->nruntimes == 0) t = rec->mean_ns;
    else if (d->sampled) t = rec->runtimes[next_random(&m->rng) % rec->nruntimes];
    else t = rec->runtimes[m->next++ % rec->nruntimes];
    atomic_fetch_add(&d->served_ns, (uint64_t)fmax(t, 0));
    d->served_runs++;
    if (ns) *ns = t;
    return KT_OK;
}

static const kt_backend replay_table = {
    .abi_version = KT_BACKEND_ABI_VERSION,
    .name = "replay",
    .init = r_init,
    .device_count = r_count,
    .device_describe = r_describe,
    .buffer_alloc = replay_buffer_alloc,
    .buffer_free = replay_buffer_free,
    .buffer_copy = replay_buffer_copy,
    .buffer_fill = replay_buffer_fill,
    .artifact_ext = ".replay",
    .compiler_id = r_compiler_id,
    .build = r_build,
    .load = r_load,
    .unload = r_unload,
    .entry = NULL,
    .launch = r_launch,
    .limits = NULL,
    /* the recording's device ran its kernels apart from the host: a replay builds as it goes,
     * exactly as a tuning there would have */
    .caps = KT_BACKEND_CAP_OWN_PROCESSOR,
};

double replay_clock_s(void *data) {
    const replay_data *d = data;
    return (double)(atomic_load(&d->served_ns) + atomic_load(&d->built_ns)) / 1e9;
}

const kt_backend *replay_backend(replay_data *data) {
    data->backend = replay_table;
    return &data->backend;
}
