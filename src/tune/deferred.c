/*
 * deferred.c - a miss whose queue is being captured into a graph, and the keys it defers.
 *
 * Tuning waits for the caller's queue (it reads and restores the caller's buffers); a queue
 * being captured cannot be waited for (the backend's queue_wait says KT_ERR_CAPTURING), so such
 * a miss never tunes. By the op's capture-miss policy it either refuses, saying how to tune the
 * key ahead of time, or runs a native candidate on the caller's arguments, building and loading
 * nothing: the first native winner that the rules for keys nobody tuned give (fallback.c: the
 * nearest tuned key on the device, this key on the same architecture, then vendor), else the
 * op's fallback (or default) candidate; and records the key as deferred: its key words (what
 * later calls look up) and the call's arguments from sizes alone (buffers NULL with their byte
 * sizes, scalars with their values), once per key. kt_op_tune_deferred tunes them later, outside
 * the capture, on generated inputs, as kt_op_tune does from sizes.
 *
 * With a persistent cache the deferred keys are also written to it (the store's `deferred`
 * table, identified as decisions are: op, candidate set, device, library version, key), and an
 * op of a later process reads them at its first kt_op_deferred_count or kt_op_tune_deferred;
 * a key tuned leaves the file. The arguments are kept as text, one "type:value" per argument
 * ("buffer:4096,i64:1024,f32:0.5"), checked against the op's signature when read back. A stored
 * key that differs from the key its arguments give today (a key that depends on the buffers'
 * addresses, kt_op_key_align or kt_op_require_align, or a key function that changed) cannot be
 * tuned from sizes: it is dropped from the file with a warning in the log. The store failing
 * costs a warning in the log, never the call.
 */
#include "tune/stages.h"
#include "tune/tune.h"
#include "store/store.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KT__ARGS_TEXT_MAX 8192 /* the arguments as text: messages and the store */

/* ---- the arguments as text ----------------------------------------------------------------- */

/* Appends one scalar's value (its declared type) to buf at *at. */
static void put_scalar(char *buf, size_t len, size_t *at, kt_type type, const kt_arg *a) {
    int n;
    switch (type) {
    case KT_TYPE_U8: case KT_TYPE_U16: case KT_TYPE_U32: case KT_TYPE_U64:
        n = snprintf(buf + *at, len - *at, "%" PRIu64, a->u);
        break;
    case KT_TYPE_F32: n = snprintf(buf + *at, len - *at, "%.9g", (double)a->f32); break;
    case KT_TYPE_F64: n = snprintf(buf + *at, len - *at, "%.17g", a->f64); break;
    default: n = snprintf(buf + *at, len - *at, "%" PRId64, a->i); break;
    }
    if (n > 0) *at = *at + (size_t)n < len ? *at + (size_t)n : len - 1;
}

static void put_text(char *buf, size_t len, size_t *at, const char *s) {
    int n = snprintf(buf + *at, len - *at, "%s", s);
    if (n > 0) *at = *at + (size_t)n < len ? *at + (size_t)n : len - 1;
}

/* The arguments as the store keeps them: "buffer:4096,i64:1024". */
static void args_store_text(const kt_op *op, const kt_arg *args, char *buf, size_t len) {
    size_t at = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < op->nargs; i++) {
        if (i) put_text(buf, len, &at, ",");
        put_text(buf, len, &at, kt_type_name(op->args[i].type));
        put_text(buf, len, &at, ":");
        if (op->args[i].type == KT_TYPE_BUFFER) {
            char n[32];
            snprintf(n, sizeof n, "%zu", args[i].bytes);
            put_text(buf, len, &at, n);
        } else {
            put_scalar(buf, len, &at, op->args[i].type, &args[i]);
        }
    }
}

/* The arguments for messages: "out=4096 bytes, n=1024". */
static void args_message(const kt_op *op, const kt_arg *args, char *buf, size_t len) {
    size_t at = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < op->nargs; i++) {
        if (i) put_text(buf, len, &at, ", ");
        put_text(buf, len, &at, op->args[i].name);
        put_text(buf, len, &at, "=");
        if (op->args[i].type == KT_TYPE_BUFFER) {
            char n[48];
            snprintf(n, sizeof n, "%zu bytes", args[i].bytes);
            put_text(buf, len, &at, n);
        } else {
            put_scalar(buf, len, &at, op->args[i].type, &args[i]);
        }
    }
}

/* Parses the store's text back into args (op->nargs of them, buffers NULL); false when it does
 * not match the op's signature or a value does not parse whole. */
static bool args_parse(const kt_op *op, const char *text, kt_arg *args) {
    const char *p = text;
    for (size_t i = 0; i < op->nargs; i++) {
        if (i > 0 && *p++ != ',') return false;
        const kt__argdecl *d = &op->args[i];
        const char *tn = kt_type_name(d->type);
        size_t tl = strlen(tn);
        if (strncmp(p, tn, tl) != 0 || p[tl] != ':') return false;
        p += tl + 1;
        if (*p == '\0' || *p == ',' || *p == ' ') return false;
        char *end;
        errno = 0;
        kt_arg a = {.type = d->type};
        if (d->type == KT_TYPE_BUFFER) {
            if (*p == '-') return false;
            unsigned long long v = strtoull(p, &end, 10);
            if (v > SIZE_MAX) return false;
            a.ptr = NULL;
            a.bytes = (size_t)v;
        } else if (d->type == KT_TYPE_F32 || d->type == KT_TYPE_F64) {
            double v = strtod(p, &end);
            if (d->type == KT_TYPE_F32) a.f32 = (float)v;
            else a.f64 = v;
        } else if (d->type >= KT_TYPE_U8 && d->type <= KT_TYPE_U64) {
            if (*p == '-') return false;
            a.u = strtoull(p, &end, 10);
        } else {
            a.i = strtoll(p, &end, 10);
        }
        if (end == p || errno == ERANGE || (*end != ',' && *end != '\0')) return false;
        args[i] = a;
        p = end;
    }
    return *p == '\0';
}

/* ---- the list ------------------------------------------------------------------------------ */

/* The index of key in the list (op->lock held), or -1. */
static long find(const kt_op *op, const int64_t *key, size_t len) {
    for (size_t i = 0; i < op->ndeferred; i++)
        if (op->deferred[i].keylen == len && memcmp(op->deferred[i].key, key, len * sizeof *key) == 0) return (long)i;
    return -1;
}

/* Appends key with a copy of args from sizes alone (op->lock held). */
static kt_status append(kt_op *op, const int64_t *key, size_t len, const kt_arg *args, const char *where) {
    if (op->ndeferred == op->deferred_cap) {
        size_t cap = op->deferred_cap ? 2 * op->deferred_cap : 8;
        kt__deferred *nd = realloc(op->deferred, cap * sizeof *nd);
        if (nd == NULL) return kt__err(KT_ERR_NO_MEMORY, "%s(op '%s'): out of memory recording a deferred key", where, op->name);
        op->deferred = nd;
        op->deferred_cap = cap;
    }
    kt__deferred *e = &op->deferred[op->ndeferred];
    e->args = calloc(op->nargs ? op->nargs : 1, sizeof *e->args);
    if (e->args == NULL) return kt__err(KT_ERR_NO_MEMORY, "%s(op '%s'): out of memory recording a deferred key", where, op->name);
    memcpy(e->args, args, op->nargs * sizeof *args);
    for (size_t i = 0; i < op->nargs; i++)
        if (op->args[i].type == KT_TYPE_BUFFER) e->args[i].ptr = NULL;
    memcpy(e->key, key, len * sizeof *key);
    e->keylen = len;
    op->ndeferred++;
    return KT_OK;
}

/* Removes key from the list, when there (op->lock held). */
static void drop(kt_op *op, const int64_t *key, size_t len) {
    long i = find(op, key, len);
    if (i < 0) return;
    free(op->deferred[i].args);
    op->deferred[i] = op->deferred[--op->ndeferred];
}

/* The identity of key's row in the store; strings point into op. */
static void identity(const kt_op *op, const int64_t *key, size_t len, kt__store_rec *id) {
    const kt_backend *b;
    void *bstate;
    size_t local;
    const char *fp;
    kt__op_backend(op, &b, &bstate, &local, &fp);
    *id = (kt__store_rec){.op = op->name,
                          .set_hash = (char *)op->set_hash,
                          .device = (char *)fp,
                          .version = (char *)kt_version_string(),
                          .key = (int64_t *)key,
                          .key_len = len};
}

/* Reads the keys deferred by earlier processes into the list, once (op->lock not held). */
static void load(kt_op *op) {
    pthread_mutex_lock(&op->lock);
    bool done = op->deferred_loaded;
    pthread_mutex_unlock(&op->lock);
    if (done) return;
    kt_cache *c = kt__context_cache(op->ctx);
    kt__store_deferred *rows = NULL;
    size_t n = 0;
    if (c != NULL) {
        kt__store_rec id;
        identity(op, NULL, 0, &id);
        if (kt__store_defer_list(c, &id, &rows, &n) != KT_OK)
            kt__log(op->ctx, KT_LOG_WARN, "op '%s': reading the deferred keys from the cache: %s", op->name, kt_last_error());
    }
    kt_arg *args = calloc(op->nargs ? op->nargs : 1, sizeof *args);
    bool *usable = calloc(n ? n : 1, sizeof *usable);
    for (size_t r = 0; args != NULL && usable != NULL && r < n; r++) {
        int64_t key[KT__KEY_WORDS_MAX];
        const char *why = NULL;
        if (!args_parse(op, rows[r].args, args)) why = "its arguments do not match the op's signature";
        else if (kt__key_compute(op, args, key) != rows[r].id.key_len ||
                 memcmp(key, rows[r].id.key, rows[r].id.key_len * sizeof *key) != 0)
            why = "the key its arguments give today differs (a key that depends on the buffers' addresses cannot be tuned from sizes)";
        if (why == NULL) {
            usable[r] = true;
            continue;
        }
        kt__log(op->ctx, KT_LOG_WARN, "op '%s': the cache's deferred key with arguments '%.200s' is dropped: %s", op->name,
                rows[r].args, why);
        if (kt__store_defer_remove(c, &rows[r].id) != KT_OK)
            kt__log(op->ctx, KT_LOG_WARN, "op '%s': removing a deferred key from the cache: %s", op->name, kt_last_error());
    }
    pthread_mutex_lock(&op->lock);
    for (size_t r = 0; !op->deferred_loaded && args != NULL && usable != NULL && r < n; r++) {
        if (!usable[r] || find(op, rows[r].id.key, rows[r].id.key_len) >= 0) continue;
        args_parse(op, rows[r].args, args);
        if (append(op, rows[r].id.key, rows[r].id.key_len, args, "kt_op_deferred_count") != KT_OK) break;
    }
    if (args != NULL && usable != NULL) op->deferred_loaded = true; /* out of memory: tried again next time */
    pthread_mutex_unlock(&op->lock);
    free(usable);
    free(args);
    kt__store_deferred_free(rows, n);
}

/* Records key as deferred, once: in the list, and in the persistent cache. */
static kt_status record(kt_op *op, const kt_arg *args, const int64_t *key, size_t len, const char *where) {
    pthread_mutex_lock(&op->lock);
    kt_status st = find(op, key, len) >= 0 ? KT_ERR_DUPLICATE : append(op, key, len, args, where);
    pthread_mutex_unlock(&op->lock);
    if (st == KT_ERR_DUPLICATE) return KT_OK;
    if (st != KT_OK) return st;
    char text[KT__ARGS_TEXT_MAX];
    args_message(op, args, text, sizeof text);
    kt__log(op->ctx, KT_LOG_INFO, "op '%s': a miss under capture deferred the key of (%s)", op->name, text);
    kt_cache *c = kt__context_cache(op->ctx);
    if (c == NULL) return KT_OK;
    kt__store_rec id;
    identity(op, key, len, &id);
    args_store_text(op, args, text, sizeof text);
    if (kt__store_defer_put(c, &id, text) != KT_OK)
        kt__log(op->ctx, KT_LOG_WARN, "op '%s': writing a deferred key to the cache: %s", op->name, kt_last_error());
    return KT_OK;
}

/* ---- the miss under capture ---------------------------------------------------------------- */

/* Whether candidate idx (-1: none) is a native that accepts the key. */
static bool native_accepts(const kt_op *op, long idx, const int64_t *key) {
    return idx >= 0 && op->cands[idx].space == NULL && kt__key_accepts(op, key, (size_t)idx);
}

kt_status kt__capture_miss(kt_op *op, const kt_arg *args, size_t nargs, const int64_t *key, size_t len, const char *where,
                           kt__unit *fallback, const kt__unit **launch) {
    (void)nargs;
    char text[KT__ARGS_TEXT_MAX];
    args_message(op, args, text, sizeof text);
    if (op->capture_miss != KT_CAPTURE_MISS_FALLBACK)
        return kt__err(KT_ERR_CAPTURING,
                       "%s(op '%s'): the key of these arguments (%s) has no decision, and the queue is being captured into a "
                       "graph: tuning would wait for the queue and end the capture, so nothing ran. Tune the key before "
                       "capturing with kt_op_tune (with KT_INPUTS_GENERATED its buffers may be NULL), or let such a miss run "
                       "the fallback and defer the key: kt_op_set_capture_miss(op, KT_CAPTURE_MISS_FALLBACK)",
                       where, op->name, text);
    long dflt = op->default_idx >= 0 ? op->default_idx : 0;
    kt_decision_source source = KT_SOURCE_DEFAULT;
    long idx = kt__fallback_native(op, key, where, &source);
    if (idx < 0) idx = native_accepts(op, op->fallback_idx, key) ? op->fallback_idx : native_accepts(op, dflt, key) ? dflt : -1;
    if (idx < 0)
        return kt__err(KT_ERR_CAPTURING,
                       "%s(op '%s'): the key of these arguments (%s) has no decision, and the queue is being captured into a "
                       "graph, so it cannot be tuned now; the capture-miss policy is 'fallback', but neither the fallback "
                       "candidate (%s%s%s) nor the default candidate ('%s') is a native that accepts these arguments, so "
                       "nothing ran. Tune the key before capturing with kt_op_tune (with KT_INPUTS_GENERATED its buffers may "
                       "be NULL)",
                       where, op->name, text, op->fallback_idx >= 0 ? "'" : "", op->fallback_idx >= 0 ? op->cands[op->fallback_idx].name : "none set",
                       op->fallback_idx >= 0 ? "'" : "", op->cands[dflt].name);
    kt_status st = record(op, args, key, len, where);
    if (st != KT_OK) return st;
    kt__unit_native(op, (size_t)idx, fallback); /* a native device candidate: enqueued on the captured queue */
    *launch = fallback;
    return KT_OK;
}

/* ---- kt_op_deferred_count, kt_op_tune_deferred --------------------------------------------- */

static kt_status freeze(kt_op *op, const char *where) {
    return atomic_load_explicit(&op->frozen, memory_order_acquire) ? KT_OK : kt__op_freeze(op, where);
}

size_t kt_op_deferred_count(const kt_op *op) {
    if (op == NULL) return 0;
    kt_op *m = (kt_op *)op; /* freezing and reading the cache do not change what the op declares */
    if (freeze(m, "kt_op_deferred_count") != KT_OK) return 0;
    load(m);
    pthread_mutex_lock(&m->lock);
    size_t n = op->ndeferred;
    pthread_mutex_unlock(&m->lock);
    return n;
}

kt_status kt_op_tune_deferred(kt_op *op, size_t *tuned) {
    if (tuned != NULL) *tuned = 0;
    if (op == NULL) return kt__err(KT_ERR_NULL, "kt_op_tune_deferred: op is NULL");
    const char *where = "kt_op_tune_deferred";
    kt_status st = freeze(op, where);
    if (st != KT_OK) return st;
    load(op);
    kt_arg *args = calloc(op->nargs ? op->nargs : 1, sizeof *args);
    if (args == NULL) return kt__err(KT_ERR_NO_MEMORY, "%s(op '%s'): out of memory", where, op->name);
    size_t done = 0;
    for (;;) {
        /* the oldest key left: a copy, so that other threads may record and tune meanwhile */
        int64_t key[KT__KEY_WORDS_MAX];
        size_t len = 0;
        pthread_mutex_lock(&op->lock);
        bool any = op->ndeferred > 0;
        if (any) {
            len = op->deferred[0].keylen;
            memcpy(key, op->deferred[0].key, len * sizeof *key);
            memcpy(args, op->deferred[0].args, op->nargs * sizeof *args);
        }
        pthread_mutex_unlock(&op->lock);
        if (!any) break;
        uint64_t hash = kt__key_hash(key, len);
        const kt_decision *d = kt__table_find(atomic_load_explicit(&op->table, memory_order_acquire), key, len, hash);
        if (d == NULL || atomic_load_explicit(&d->state, memory_order_acquire) != KT__DONE)
            st = kt__tune_miss(op, args, op->nargs, key, len, hash, KT__FINISH_GENERATED, where, NULL, NULL);
        if (st != KT_OK) {
            char *why = kt__error_save();
            char text[KT__ARGS_TEXT_MAX];
            args_message(op, args, text, sizeof text);
            kt__err(st, "%s(op '%s'): tuning the deferred key of (%s) failed: %s", where, op->name, text,
                    why ? why : kt_strerror(st));
            free(why);
            break;
        }
        pthread_mutex_lock(&op->lock);
        drop(op, key, len);
        pthread_mutex_unlock(&op->lock);
        done++;
        kt_cache *c = kt__context_cache(op->ctx);
        kt__store_rec id;
        identity(op, key, len, &id);
        if (c != NULL && kt__store_defer_remove(c, &id) != KT_OK)
            kt__log(op->ctx, KT_LOG_WARN, "op '%s': removing a deferred key from the cache: %s", op->name, kt_last_error());
    }
    free(args);
    if (tuned != NULL) *tuned = done;
    return st;
}
