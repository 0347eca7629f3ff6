/*
 * context.c - the context: settings, the environment, backends and the devices they found.
 *
 * The environment is read once, when the context is created, so that a running program sees
 * one consistent configuration; a value kerntune does not understand fails creation loudly
 * rather than being ignored.
 */
#include "backends/backends.h"
#include "compile/compile.h"
#include "isolate/isolate.h"
#include "op/op.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static kt_status add_backend(kt_context *ctx, const kt_backend *b);

/* KERNTUNE_MODE names the levels a whole program may be put at, as kt_effort_name spells them:
 * not INHERIT (an op's default) nor FORCED (which names candidates: KERNTUNE_FORCE). */
static kt_status parse_mode(const char *v, kt_effort *out) {
    static const kt_effort modes[] = {KT_EFFORT_MEASURE, KT_EFFORT_CACHE_ONLY, KT_EFFORT_OFF};
    for (size_t i = 0; i < sizeof modes / sizeof *modes; i++)
        if (strcmp(v, kt_effort_name(modes[i])) == 0) {
            *out = modes[i];
            return KT_OK;
        }
    return kt__err(KT_ERR_ENV, "kt_context_create: KERNTUNE_MODE='%.64s' is not one of tune, cache-only, off", v);
}

/* KERNTUNE_LOG names a level as kt_log_level_name spells it, or "off" for none. */
static kt_status parse_log(const char *v, int *out) {
#define KT__LOG_PARSE(level, value, name) \
    if (strcmp(v, name) == 0) {           \
        *out = level;                     \
        return KT_OK;                     \
    }
    KT_LOG_LEVEL_LIST(KT__LOG_PARSE)
#undef KT__LOG_PARSE
    if (strcmp(v, "off") == 0) {
        *out = KT_LOG_NONE;
        return KT_OK;
    }
    return kt__err(KT_ERR_ENV, "kt_context_create: KERNTUNE_LOG='%.64s' is not one of error, warn, info, debug, none", v);
}

/* Parses "op=cand[,op=cand...]" into ctx->forces. */
static kt_status parse_force(kt_context *ctx, const char *v) {
    size_t n = 1;
    for (const char *p = v; *p; p++) n += *p == ',';
    ctx->forces = calloc(n, sizeof *ctx->forces);
    if (ctx->forces == NULL) return kt__err(KT_ERR_NO_MEMORY, "kt_context_create: out of memory");
    const char *p = v;
    for (size_t i = 0; i < n; i++) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        if (eq == NULL || eq == p || eq == p + len - 1)
            return kt__err(KT_ERR_ENV, "kt_context_create: KERNTUNE_FORCE entry %zu '%.*s' is not op=candidate",
                           i + 1, (int)(len > 64 ? 64 : len), p);
        size_t oplen = (size_t)(eq - p), clen = len - oplen - 1;
        char *op = strndup(p, oplen), *cand = strndup(eq + 1, clen);
        ctx->forces[ctx->nforces].op = op;
        ctx->forces[ctx->nforces].candidate = cand;
        ctx->nforces++;
        if (op == NULL || cand == NULL) return kt__err(KT_ERR_NO_MEMORY, "kt_context_create: out of memory");
        p = end ? end + 1 : p + len;
    }
    return KT_OK;
}

static kt_status read_env(kt_context *ctx) {
    const char *v = getenv("KERNTUNE_MODE");
    kt_status st;
    if (v && *v && (st = parse_mode(v, &ctx->env_mode)) != KT_OK) return st;
    v = getenv("KERNTUNE_LOG");
    int level = 0;
    if (v && *v) {
        if ((st = parse_log(v, &level)) != KT_OK) return st;
        atomic_store(&ctx->log_level, level);
    }
    v = getenv("KERNTUNE_FORCE");
    if (v && *v && (st = parse_force(ctx, v)) != KT_OK) return st;
    v = getenv("KERNTUNE_BACKENDS");
    if (v && *v && kt_context_set_backends(ctx, v) != KT_OK) {
        const char *why = strstr(kt_last_error(), ": ");
        return kt__err(KT_ERR_ENV, "kt_context_create: KERNTUNE_BACKENDS: %s", why ? why + 2 : kt_last_error());
    }
    return KT_OK;
}

kt_status kt_context_create(kt_context **out) {
    if (out == NULL) return kt__err(KT_ERR_NULL, "kt_context_create: out is NULL");
    *out = NULL;
    kt_context *ctx = calloc(1, sizeof *ctx);
    if (ctx == NULL) return kt__err(KT_ERR_NO_MEMORY, "kt_context_create: out of memory");
    ctx->effort = KT_EFFORT_MEASURE;
    ctx->env_mode = KT_EFFORT_INHERIT;
    atomic_init(&ctx->log_level, KT_LOG_NONE);
    atomic_init(&ctx->ndevices, 0);
    ctx->measure = (kt__measure_cfg){.policy = KT_POLICY_RACE,
                                     .warmup_runs = 1,
                                     .min_runs = 3,
                                     .max_runs = 1000,
                                     .min_time_s = 0.002,
                                     .confidence = 0.99,
                                     .tolerance = 0.01,
                                     .race_max_runs = 100,
                                     .flush = KT_FLUSH_AUTO};
    if (pthread_mutex_init(&ctx->lock, NULL) != 0) {
        free(ctx);
        return kt__err(KT_ERR_SYSTEM, "kt_context_create: pthread_mutex_init failed");
    }
    if (pthread_mutex_init(&ctx->cache_lock, NULL) != 0) {
        pthread_mutex_destroy(&ctx->lock);
        free(ctx);
        return kt__err(KT_ERR_SYSTEM, "kt_context_create: pthread_mutex_init failed");
    }
    if (pthread_mutex_init(&ctx->iso_lock, NULL) != 0) {
        pthread_mutex_destroy(&ctx->cache_lock);
        pthread_mutex_destroy(&ctx->lock);
        free(ctx);
        return kt__err(KT_ERR_SYSTEM, "kt_context_create: pthread_mutex_init failed");
    }
    kt_status st = kt__default_artifact_dir(ctx->artifacts.dir, sizeof ctx->artifacts.dir);
    if (st == KT_OK) st = read_env(ctx);
    if (st == KT_OK) st = kt__shared_env(ctx);
    const kt_backend *builtin[KT__BUILTIN_BACKENDS];
    kt__backends_builtin(builtin);
    if (st == KT_OK) st = add_backend(ctx, builtin[0]); /* the host's: device 0 */
    if (st != KT_OK) {
        char *saved = kt__error_save();
        kt_context_destroy(ctx);
        return kt__error_restore(st, saved);
    }
    kt__log(ctx, KT_LOG_DEBUG, "context created (kerntune %s)", kt_version_string());
    *out = ctx;
    return KT_OK;
}

void kt_context_destroy(kt_context *ctx) {
    if (ctx == NULL) return;
    if (ctx->drain) ctx->drain(ctx, true); /* builds left running use the backends */
    while (ctx->ops != NULL) kt_op_destroy(ctx->ops);
    for (size_t i = 0; i < ctx->nforces; i++) {
        free(ctx->forces[i].op);
        free(ctx->forces[i].candidate);
    }
    free(ctx->forces);
    for (size_t i = 0; i < ctx->nbackends; i++)
        if (ctx->backends[i].backend->fini) ctx->backends[i].backend->fini(ctx->backends[i].state);
    for (size_t i = 0; i < atomic_load(&ctx->ndevices); i++) {
        free(ctx->devices[i].backend);
        free(ctx->devices[i].name);
        free(ctx->devices[i].fingerprint);
        free(ctx->devices[i].arch);
        free(ctx->devices[i].vendor);
    }
    for (size_t i = 0; i < ctx->nunavailable; i++) free(ctx->unavailable[i]);
    for (size_t i = 0; i < KT__MAX_DEVICES; i++) kt__runner_free(ctx->runners[i]);
    pthread_mutex_destroy(&ctx->iso_lock);
    kt_cache_close(ctx->cache);
    kt__shared_free(ctx);
    free(ctx->cache_path);
    pthread_mutex_destroy(&ctx->cache_lock);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
}

kt_status kt_context_set_cache(kt_context *ctx, const char *path) {
    if (ctx == NULL) return kt__err(KT_ERR_NULL, "kt_context_set_cache: ctx is NULL");
    if (path != NULL && path[0] == '\0') return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_context_set_cache: path is empty");
    pthread_mutex_lock(&ctx->cache_lock);
    kt_status st = KT_OK;
    char *copy = NULL;
    if (atomic_load(&ctx->cache_tried))
        st = kt__err(KT_ERR_STATE, "kt_context_set_cache: the context's cache is already in use; set it before the first tuning");
    else if (path != NULL && strcmp(path, "off") != 0 && (copy = strdup(path)) == NULL)
        st = kt__err(KT_ERR_NO_MEMORY, "kt_context_set_cache: out of memory");
    if (st == KT_OK) {
        free(ctx->cache_path);
        ctx->cache_path = copy;
        ctx->cache_off = path != NULL && strcmp(path, "off") == 0;
    }
    pthread_mutex_unlock(&ctx->cache_lock);
    return st;
}

kt_cache *kt__context_cache(kt_context *ctx) {
    if (atomic_load_explicit(&ctx->cache_tried, memory_order_acquire)) return ctx->cache;
    pthread_mutex_lock(&ctx->cache_lock);
    if (!atomic_load_explicit(&ctx->cache_tried, memory_order_relaxed)) {
        char *saved = kt__error_save(); /* opening must not disturb the caller's last error */
        char def[4096];
        bool off = ctx->cache_off || (ctx->cache_path == NULL && kt_cache_default_path(def, sizeof def) == KT_ERR_NOT_FOUND);
        if (!off && kt_cache_open(ctx->cache_path, &ctx->cache) != KT_OK) {
            kt__log(ctx, KT_LOG_WARN, "the persistent cache is not available (decisions last as long as the process): %s",
                    kt_last_error());
            ctx->cache = NULL;
        } else if (ctx->cache != NULL && kt_cache_warning(ctx->cache)[0]) {
            kt__log(ctx, KT_LOG_WARN, "%s", kt_cache_warning(ctx->cache));
        }
        kt__error_restore(KT_OK, saved);
        atomic_store_explicit(&ctx->cache_tried, 1, memory_order_release);
    }
    pthread_mutex_unlock(&ctx->cache_lock);
    return ctx->cache;
}

kt_cache *kt_context_cache(kt_context *ctx) { return ctx ? kt__context_cache(ctx) : NULL; }
uint64_t kt_context_cache_hits(const kt_context *ctx) { return ctx ? atomic_load(&ctx->cache_hits) : 0; }
uint64_t kt_context_cache_rejected(const kt_context *ctx) { return ctx ? atomic_load(&ctx->cache_rejected) : 0; }

const char *kt__context_forced(const kt_context *ctx, const char *op_name) {
    for (size_t i = 0; i < ctx->nforces; i++)
        if (strcmp(ctx->forces[i].op, op_name) == 0) return ctx->forces[i].candidate;
    return NULL;
}

void kt__context_unlink(kt_context *ctx, kt_op *op) {
    pthread_mutex_lock(&ctx->lock);
    for (kt_op **pp = &ctx->ops; *pp; pp = &(*pp)->next) {
        if (*pp == op) {
            *pp = op->next;
            break;
        }
    }
    pthread_mutex_unlock(&ctx->lock);
}

kt_status kt_context_set_effort(kt_context *ctx, kt_effort effort) {
    if (ctx == NULL) return kt__err(KT_ERR_NULL, "kt_context_set_effort: ctx is NULL");
    if (effort < KT_EFFORT_MEASURE || effort > KT_EFFORT_FORCED)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_context_set_effort: effort %d is not a level (1..4)", (int)effort);
    ctx->effort = effort;
    return KT_OK;
}

kt_effort kt_context_effort(const kt_context *ctx) {
    if (ctx == NULL) return KT_EFFORT_INHERIT;
    return ctx->env_mode != KT_EFFORT_INHERIT ? ctx->env_mode : ctx->effort;
}

kt_status kt_context_set_log_level(kt_context *ctx, kt_log_level level) {
    if (ctx == NULL) return kt__err(KT_ERR_NULL, "kt_context_set_log_level: ctx is NULL");
    if (kt_log_level_name(level) == NULL)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_context_set_log_level: level %d is not 0..4", (int)level);
    atomic_store(&ctx->log_level, (int)level);
    return KT_OK;
}

kt_status kt_context_set_log_fn(kt_context *ctx, kt_log_fn fn, void *user) {
    if (ctx == NULL) return kt__err(KT_ERR_NULL, "kt_context_set_log_fn: ctx is NULL");
    ctx->log_fn = fn;
    ctx->log_user = user;
    return KT_OK;
}

kt_status kt_context_set_user(kt_context *ctx, void *user) {
    if (ctx == NULL) return kt__err(KT_ERR_NULL, "kt_context_set_user: ctx is NULL");
    ctx->user = user;
    return KT_OK;
}

void *kt_context_user(const kt_context *ctx) { return ctx ? ctx->user : NULL; }

kt_status kt_context_set_measure(kt_context *ctx, unsigned warmup_runs, unsigned min_runs,
                                 unsigned max_runs, double min_time_s) {
    if (ctx == NULL) return kt__err(KT_ERR_NULL, "kt_context_set_measure: ctx is NULL");
    if (min_runs < 1 || max_runs < min_runs || !(min_time_s >= 0) || max_runs > 10000000)
        return kt__err(KT_ERR_INVALID_ARGUMENT,
                       "kt_context_set_measure: need 1 <= min_runs (%u) <= max_runs (%u) <= 10000000 and min_time_s (%g) >= 0",
                       min_runs, max_runs, min_time_s);
    ctx->measure.policy = KT_POLICY_FIXED;
    ctx->measure.warmup_runs = warmup_runs;
    ctx->measure.min_runs = min_runs;
    ctx->measure.max_runs = max_runs;
    ctx->measure.min_time_s = min_time_s;
    return KT_OK;
}

kt_status kt_context_set_policy(kt_context *ctx, kt_policy policy) {
    if (ctx == NULL) return kt__err(KT_ERR_NULL, "kt_context_set_policy: ctx is NULL");
    if (kt_policy_name(policy) == NULL)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_context_set_policy: policy %d is not a kt_policy", (int)policy);
    ctx->measure.policy = policy;
    return KT_OK;
}

kt_policy kt_context_policy(const kt_context *ctx) { return ctx ? ctx->measure.policy : KT_POLICY_RACE; }

kt_status kt_context_set_race(kt_context *ctx, double confidence, double tolerance, unsigned max_runs) {
    if (ctx == NULL) return kt__err(KT_ERR_NULL, "kt_context_set_race: ctx is NULL");
    if (!(confidence >= 0.5 && confidence <= 0.999999) || !(tolerance >= 0 && tolerance <= 10) || max_runs < 3 ||
        max_runs > 10000000)
        return kt__err(KT_ERR_INVALID_ARGUMENT,
                       "kt_context_set_race: need 0.5 <= confidence (%g) <= 0.999999, 0 <= tolerance (%g) <= 10 and 3 <= "
                       "max_runs (%u) <= 10000000",
                       confidence, tolerance, max_runs);
    ctx->measure.confidence = confidence;
    ctx->measure.tolerance = tolerance;
    ctx->measure.race_max_runs = max_runs;
    return KT_OK;
}

kt_status kt_context_set_flush(kt_context *ctx, kt_flush flush) {
    if (ctx == NULL) return kt__err(KT_ERR_NULL, "kt_context_set_flush: ctx is NULL");
    if (kt_flush_name(flush) == NULL)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_context_set_flush: %d is not a kt_flush", (int)flush);
    ctx->measure.flush = flush;
    return KT_OK;
}

/* Registers a backend and its devices (ctx->lock held). */
static kt_status add_backend(kt_context *ctx, const kt_backend *b) {
    if (!kt__backend_has(b, KT__BACKEND_TABLE))
        return kt__err(KT_ERR_INVALID_ARGUMENT,
                       "kt_context_add_backend: backend table is incomplete (abi_version %d, needs name, device_count, device_describe)",
                       b->abi_version);
    size_t nlen = strlen(b->name);
    bool plain = nlen >= 1 && nlen <= 31;
    for (size_t i = 0; plain && i < nlen; i++)
        plain = (b->name[i] >= 'a' && b->name[i] <= 'z') || (b->name[i] >= '0' && b->name[i] <= '9') || b->name[i] == '_' ||
                b->name[i] == '-';
    if (!plain) /* it names the backend in fingerprints, the cache and the runner protocol */
        return kt__err(KT_ERR_INVALID_ARGUMENT,
                       "kt_context_add_backend: backend name '%.64s%s' must be 1 to 31 lower-case letters, digits, '_' or '-'",
                       b->name, nlen > 64 ? "..." : "");
    for (size_t i = 0; i < ctx->nbackends; i++)
        if (strcmp(ctx->backends[i].backend->name, b->name) == 0)
            return kt__err(KT_ERR_DUPLICATE, "kt_context_add_backend: backend '%s' is already registered", b->name);
    if (ctx->nbackends == KT__MAX_BACKENDS)
        return kt__err(KT_ERR_LIMIT, "kt_context_add_backend(%s): at most %d backends", b->name, KT__MAX_BACKENDS);
    char err[512] = "";
    void *state = NULL;
    if (b->init) {
        kt_status st = b->init(b, &state, err, sizeof err);
        if (st != KT_OK) return kt__err(st, "kt_context_add_backend(%s): %s", b->name, err);
    }
    if (kt__backend_has(b, KT__BACKEND_CACHE_DIR)) b->set_cache_dir(state, ctx->artifacts.dir);
    size_t n = b->device_count(state), base = atomic_load(&ctx->ndevices);
    kt_status st = base + n > KT__MAX_DEVICES
                       ? kt__err(KT_ERR_LIMIT, "kt_context_add_backend(%s): more than %d devices in all", b->name, KT__MAX_DEVICES)
                       : KT_OK;
    size_t added = 0;
    for (; st == KT_OK && added < n; added++) {
        char name[KT_DEVICE_NAME_MAX] = "", fp[KT_DEVICE_FINGERPRINT_MAX] = "";
        st = b->device_describe(state, added, name, fp, err, sizeof err);
        if (st != KT_OK) {
            kt__err(st, "kt_context_add_backend(%s): device %zu: %s", b->name, added, err);
            break;
        }
        kt_device *d = &ctx->devices[base + added];
        d->slot = ctx->nbackends;
        d->table = b;
        d->local = added;
        d->backend = strdup(b->name);
        d->name = strdup(name);
        d->fingerprint = strdup(fp);
        char arch[KT_DEVICE_NAME_MAX] = "", vendor[KT_DEVICE_NAME_MAX] = "", why[256] = "";
        if (kt__backend_has(b, KT__BACKEND_CLASSIFY) && b->classify(state, added, arch, vendor, why, sizeof why) != KT_OK) {
            kt__log(ctx, KT_LOG_DEBUG, "backend '%s': device %zu is not classified: %s", b->name, added, why);
            arch[0] = vendor[0] = '\0';
        }
        arch[KT_DEVICE_NAME_MAX - 1] = vendor[KT_DEVICE_NAME_MAX - 1] = '\0';
        d->arch = strdup(arch);
        d->vendor = strdup(vendor);
        if (!d->backend || !d->name || !d->fingerprint || !d->arch || !d->vendor) {
            added++; /* so that the cleanup below frees this one too */
            st = kt__err(KT_ERR_NO_MEMORY, "kt_context_add_backend(%s): out of memory", b->name);
            break;
        }
    }
    if (st != KT_OK) {
        for (size_t i = 0; i < added; i++) {
            kt_device *d = &ctx->devices[base + i];
            free(d->backend);
            free(d->name);
            free(d->fingerprint);
            free(d->arch);
            free(d->vendor);
            memset(d, 0, sizeof *d);
        }
        if (b->fini) b->fini(state);
        return st;
    }
    ctx->backends[ctx->nbackends++] = (kt__backend_slot){b, state};
    atomic_store_explicit(&ctx->ndevices, base + n, memory_order_release); /* publish the entries */
    kt__log(ctx, KT_LOG_DEBUG, "backend '%s' registered with %zu device(s)", b->name, n);
    return KT_OK;
}

kt_status kt_context_add_backend(kt_context *ctx, const kt_backend *b) {
    if (ctx == NULL || b == NULL) return kt__err(KT_ERR_NULL, "kt_context_add_backend: %s is NULL", ctx ? "backend" : "ctx");
    pthread_mutex_lock(&ctx->lock);
    kt_status st = add_backend(ctx, b);
    pthread_mutex_unlock(&ctx->lock);
    return st;
}

void kt__context_discover(kt_context *ctx) {
    pthread_mutex_lock(&ctx->lock);
    if (!ctx->discovered) {
        ctx->discovered = true;
        const kt_backend *optional[KT__BUILTIN_BACKENDS];
        size_t n = kt__backends_builtin(optional);
        char *saved = kt__error_save();
        for (size_t i = 1; i < n; i++) {
            if (ctx->backends_left_out & (1u << i)) continue; /* kt_context_set_backends */
            if (add_backend(ctx, optional[i]) == KT_OK || ctx->nunavailable == KT__MAX_BACKENDS) continue;
            const char *why = strstr(kt_last_error(), "): ");
            kt__err(KT_OK, "%s: %s", optional[i]->name, why ? why + 3 : kt_last_error());
            ctx->unavailable[ctx->nunavailable] = strdup(kt_last_error());
            if (ctx->unavailable[ctx->nunavailable]) ctx->nunavailable++;
            kt__log(ctx, KT_LOG_INFO, "backend %s", kt_last_error());
        }
        kt__error_restore(KT_OK, saved); /* a missing optional backend is not an error of the caller */
    }
    pthread_mutex_unlock(&ctx->lock);
}

kt_status kt_context_set_backends(kt_context *ctx, const char *names) {
    if (ctx == NULL) return kt__err(KT_ERR_NULL, "kt_context_set_backends: ctx is NULL");
    const kt_backend *builtin[KT__BUILTIN_BACKENDS];
    size_t n = kt__backends_builtin(builtin);
    char known[128] = "";
    for (size_t i = 0; i < n; i++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "", builtin[i]->name);
    unsigned left_out = 0;
    if (names != NULL && *names != '\0') {
        left_out = ~0u & ~1u; /* the host's is always started */
        for (const char *p = names; *p;) {
            size_t len = strcspn(p, ",");
            size_t i = 0;
            while (i < n && !(strlen(builtin[i]->name) == len && strncmp(builtin[i]->name, p, len) == 0)) i++;
            if (i == n)
                return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_context_set_backends: '%.*s' is not a backend (there are: %s)",
                               (int)(len > 64 ? 64 : len), p, known);
            left_out &= ~(1u << i);
            p += len + (p[len] == ',');
        }
    }
    pthread_mutex_lock(&ctx->lock);
    bool started = ctx->discovered;
    if (!started) ctx->backends_left_out = left_out;
    pthread_mutex_unlock(&ctx->lock);
    if (started)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_context_set_backends: the backends started when the devices were "
                                                "first asked for; choose them before that");
    return KT_OK;
}

size_t kt_context_unavailable_count(kt_context *ctx) {
    if (ctx == NULL) return 0;
    kt__context_discover(ctx);
    return ctx->nunavailable;
}

const char *kt_context_unavailable(kt_context *ctx, size_t index) {
    if (ctx == NULL) return NULL;
    kt__context_discover(ctx);
    return index < ctx->nunavailable ? ctx->unavailable[index] : NULL;
}

kt_status kt_context_set_artifact_dir(kt_context *ctx, const char *path) {
    if (ctx == NULL || path == NULL) return kt__err(KT_ERR_NULL, "kt_context_set_artifact_dir: %s is NULL", ctx ? "path" : "ctx");
    if (*path == '\0' || strlen(path) > KT__ARTIFACT_DIR_MAX)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_context_set_artifact_dir: path has %zu characters; 1 to %d allowed",
                       strlen(path), KT__ARTIFACT_DIR_MAX);
    snprintf(ctx->artifacts.dir, sizeof ctx->artifacts.dir, "%s", path);
    for (size_t i = 0; i < ctx->nbackends; i++) { /* their own builds go there too */
        const kt_backend *b = ctx->backends[i].backend;
        if (kt__backend_has(b, KT__BACKEND_CACHE_DIR)) b->set_cache_dir(ctx->backends[i].state, ctx->artifacts.dir);
    }
    return KT_OK;
}

const char *kt_context_artifact_dir(const kt_context *ctx) { return ctx ? ctx->artifacts.dir : NULL; }

kt_status kt_context_set_progress_fn(kt_context *ctx, kt_progress_fn fn, void *user) {
    if (ctx == NULL) return kt__err(KT_ERR_NULL, "kt_context_set_progress_fn: ctx is NULL");
    ctx->progress_fn = fn;
    ctx->progress_user = user;
    return KT_OK;
}

kt_status kt_context_set_unit_fn(kt_context *ctx, kt_unit_fn fn, void *user) {
    if (ctx == NULL) return kt__err(KT_ERR_NULL, "kt_context_set_unit_fn: ctx is NULL");
    ctx->unit_fn = fn;
    ctx->unit_user = user;
    return KT_OK;
}

kt_status kt_context_set_budget_clock(kt_context *ctx, kt_clock_fn now, void *user) {
    if (ctx == NULL) return kt__err(KT_ERR_NULL, "kt_context_set_budget_clock: ctx is NULL");
    ctx->budget_clock = now;
    ctx->budget_clock_user = user;
    return KT_OK;
}

kt_status kt_context_set_compile_threads(kt_context *ctx, size_t threads) {
    if (ctx == NULL) return kt__err(KT_ERR_NULL, "kt_context_set_compile_threads: ctx is NULL");
    if (threads > 64) return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_context_set_compile_threads: %zu threads; at most 64", threads);
    ctx->artifacts.threads = threads;
    return KT_OK;
}

size_t kt_context_compile_threads(const kt_context *ctx) {
    if (ctx == NULL) return 0;
    size_t n = ctx->artifacts.threads ? ctx->artifacts.threads : kt__processors();
    return n > 64 ? 64 : n; /* the builders start at most 64 */
}

uint64_t kt_context_compile_count(const kt_context *ctx) { return ctx ? atomic_load(&ctx->artifacts.compiles) : 0; }
uint64_t kt_context_artifact_hits(const kt_context *ctx) { return ctx ? atomic_load(&ctx->artifacts.hits) : 0; }

/* Finds device index's backend for a buffer call; reports as `where`. */
static kt_status device_slot(kt_context *ctx, size_t device, const char *where, const kt__backend_slot **bs, size_t *local) {
    if (ctx == NULL) return kt__err(KT_ERR_NULL, "%s: ctx is NULL", where);
    const kt_device *d = kt_context_device(ctx, device);
    if (d == NULL) return kt__err(KT_ERR_INVALID_ARGUMENT, "%s: device %zu does not exist", where, device);
    *bs = &ctx->backends[d->slot];
    *local = d->local;
    if (!kt__backend_has((*bs)->backend, KT__BACKEND_BUFFERS))
        return kt__err(KT_ERR_BACKEND, "%s: backend '%s' has no buffers", where, (*bs)->backend->name);
    return KT_OK;
}

kt_status kt_device_alloc(kt_context *ctx, size_t device, size_t bytes, void **out) {
    const kt__backend_slot *bs = NULL;
    size_t local = 0;
    if (out == NULL) return kt__err(KT_ERR_NULL, "kt_device_alloc: out is NULL");
    *out = NULL;
    kt_status st = device_slot(ctx, device, "kt_device_alloc", &bs, &local);
    if (st != KT_OK) return st;
    char err[256] = "";
    st = bs->backend->buffer_alloc(bs->state, local, bytes, out, err, sizeof err);
    return st == KT_OK ? KT_OK : kt__err(st, "kt_device_alloc(device %zu, %zu bytes): %s", device, bytes, err);
}

void kt_device_free(kt_context *ctx, size_t device, void *buffer) {
    const kt__backend_slot *bs = NULL;
    size_t local = 0;
    if (buffer == NULL) return;
    char *saved = kt__error_save();
    if (device_slot(ctx, device, "kt_device_free", &bs, &local) == KT_OK) bs->backend->buffer_free(bs->state, local, buffer);
    kt__error_restore(KT_OK, saved);
}

static kt_status device_copy(kt_context *ctx, size_t device, void *dst, const void *src, size_t bytes, kt_copy_dir dir,
                             const char *where) {
    const kt__backend_slot *bs = NULL;
    size_t local = 0;
    kt_status st = device_slot(ctx, device, where, &bs, &local);
    if (st != KT_OK) return st;
    if ((dst == NULL || src == NULL) && bytes > 0) return kt__err(KT_ERR_NULL, "%s: %s is NULL", where, dst ? "src" : "dst");
    char err[256] = "";
    st = bs->backend->buffer_copy(bs->state, local, dst, src, bytes, dir, err, sizeof err);
    return st == KT_OK ? KT_OK : kt__err(st, "%s(device %zu, %zu bytes): %s", where, device, bytes, err);
}

kt_status kt_device_write(kt_context *ctx, size_t device, void *dst, const void *src, size_t bytes) {
    return device_copy(ctx, device, dst, src, bytes, KT_COPY_HOST_TO_DEVICE, "kt_device_write");
}

kt_status kt_device_read(kt_context *ctx, size_t device, void *dst, const void *src, size_t bytes) {
    return device_copy(ctx, device, dst, src, bytes, KT_COPY_DEVICE_TO_HOST, "kt_device_read");
}

kt_status kt_device_flush(kt_context *ctx, size_t device) {
    const kt__backend_slot *bs = NULL;
    size_t local = 0;
    kt_status st = device_slot(ctx, device, "kt_device_flush", &bs, &local);
    if (st != KT_OK) return st;
    if (!kt__backend_has(bs->backend, KT__BACKEND_FLUSH))
        return kt__err(KT_ERR_BACKEND, "kt_device_flush: backend '%s' cannot flush its device's caches", bs->backend->name);
    char err[256] = "";
    st = bs->backend->flush(bs->state, local, err, sizeof err);
    return st == KT_OK ? KT_OK : kt__err(st, "kt_device_flush(device %zu): %s", device, err);
}

kt_status kt_device_launch_limits(kt_context *ctx, size_t device, int64_t *max_threads, int64_t max_block[3], int64_t *max_shared) {
    kt_device_limits lim = {0, {0, 0, 0}, 0};
    const kt__backend_slot *bs = NULL;
    size_t local = 0;
    if (ctx == NULL) return kt__err(KT_ERR_NULL, "kt_device_launch_limits: ctx is NULL");
    kt_status st = device_slot(ctx, device, "kt_device_launch_limits", &bs, &local);
    if (st != KT_OK) return st;
    char err[256] = "";
    if (kt__backend_has(bs->backend, KT__BACKEND_LIMITS) && bs->backend->limits(bs->state, local, &lim, err, sizeof err) != KT_OK)
        lim = (kt_device_limits){0, {0, 0, 0}, 0}; /* what it cannot tell is unknown, not an error */
    if (max_threads) *max_threads = lim.max_threads_per_block;
    if (max_block) memcpy(max_block, lim.max_block, sizeof lim.max_block);
    if (max_shared) *max_shared = lim.max_shared_memory;
    return KT_OK;
}

kt_status kt_device_compiler(kt_context *ctx, size_t device, char *out, size_t len) {
    const kt__backend_slot *bs = NULL;
    size_t local = 0;
    if (out == NULL || len == 0) return kt__err(KT_ERR_NULL, "kt_device_compiler: out is NULL or len is 0");
    out[0] = '\0';
    kt_status st = device_slot(ctx, device, "kt_device_compiler", &bs, &local);
    if (st != KT_OK) return st;
    if (!kt__backend_has(bs->backend, KT__BACKEND_COMPILER_ID)) return KT_OK; /* it builds nothing */
    char err[256] = "";
    st = bs->backend->compiler_id(bs->state, local, out, len, err, sizeof err);
    if (st != KT_OK) out[0] = '\0';
    return st == KT_OK ? KT_OK : kt__err(st, "kt_device_compiler(device %zu): %s", device, err);
}

kt_status kt_device_peaks(kt_context *ctx, size_t device, double *gflops, double *gbs) {
    if (gflops == NULL || gbs == NULL) return kt__err(KT_ERR_NULL, "kt_device_peaks: gflops or gbs is NULL");
    *gflops = *gbs = 0;
    if (ctx == NULL) return kt__err(KT_ERR_NULL, "kt_device_peaks: ctx is NULL");
    const kt_device *d = kt_context_device(ctx, device);
    if (d == NULL) return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_device_peaks: device %zu does not exist", device);
    const kt__backend_slot *bs = &ctx->backends[d->slot];
    char err[256] = "";
    if (!kt__backend_has(bs->backend, KT__BACKEND_PEAKS) ||
        bs->backend->peaks(bs->state, d->local, gflops, gbs, err, sizeof err) != KT_OK || !(*gflops >= 0) || !(*gbs >= 0))
        *gflops = *gbs = 0; /* not known: not an error */
    return KT_OK;
}

size_t kt_context_device_count(kt_context *ctx) {
    if (ctx == NULL) return 0;
    kt__context_discover(ctx);
    return atomic_load_explicit(&ctx->ndevices, memory_order_acquire);
}

const kt_device *kt_context_device(kt_context *ctx, size_t index) {
    if (ctx == NULL) return NULL;
    if (index > 0) kt__context_discover(ctx); /* device 0, the host, is always there */
    return index < atomic_load_explicit(&ctx->ndevices, memory_order_acquire) ? &ctx->devices[index] : NULL;
}

const char *kt_device_backend(const kt_device *dev) { return dev ? dev->backend : NULL; }
const char *kt_device_name(const kt_device *dev) { return dev ? dev->name : NULL; }
const char *kt_device_fingerprint(const kt_device *dev) { return dev ? dev->fingerprint : NULL; }
const char *kt_device_architecture(const kt_device *dev) { return dev ? dev->arch : NULL; }
const char *kt_device_vendor(const kt_device *dev) { return dev ? dev->vendor : NULL; }
unsigned kt_device_caps(const kt_device *dev) { return dev ? kt__backend_caps(dev->table) : 0; }
const char *kt_device_language(const kt_device *dev) {
    return dev && kt__backend_has(dev->table, KT__BACKEND_LANGUAGE) ? dev->table->language : NULL;
}

void kt__log(const kt_context *ctx, kt_log_level level, const char *fmt, ...) {
    if (ctx == NULL || (int)level > atomic_load_explicit(&ctx->log_level, memory_order_relaxed))
        return;
    char small[1024], *line = small;
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof small && (line = malloc((size_t)n + 1)) != NULL) vsnprintf(line, (size_t)n + 1, fmt, again);
    else line = small; /* out of memory: the line as far as it fits */
    va_end(again);
    if (ctx->log_fn != NULL) {
        ctx->log_fn(level, line, ctx->log_user);
    } else {
        fprintf(stderr, "kerntune: %s: %s\n", kt_log_level_name(level), line);
    }
    if (line != small) free(line);
}
