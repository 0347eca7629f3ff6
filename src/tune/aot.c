/*
 * aot.c - tables of decisions made ahead of time (kerntune/aot.h), registered with a context
 * and served on a key's first call before the persistent cache is read.
 *
 * A table is used as it is (the program's constant): registering checks its layout version,
 * library MAJOR version and device fingerprint, and keeps a pointer. An op whose device has the
 * table's fingerprint looks its key up there first (op name, candidate set and every key word
 * equal: the validity mask too, so an entry serves only calls that the same candidates accept)
 * and takes the winner through kt__adopt_winner, the check a recalled record passes: a winner
 * that is not valid for the arguments is skipped with a log line, never launched. Nothing is
 * measured and the cache is not opened for a listed key. An entry may carry its winner's
 * artifact (`kerntune aot --embed`): the build writes it into the artifact directory when it is
 * not there (build/compile.c), so the winner loads without a compiler.
 */
#include "tune/stages.h"

#include <kerntune/aot.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The MAJOR of a "MAJOR.MINOR.PATCH" version, or -1. */
static long major_of(const char *v) {
    char *end;
    long m = v ? strtol(v, &end, 10) : -1;
    return v && end != v && *end == '.' ? m : -1;
}

/* The bytes of an artifact a registered table carries, by its file name (the build's hook,
 * build/compile.h); NULL when none does. */
static const unsigned char *carried(void *user, const char *name, size_t *len) {
    const kt_context *ctx = user;
    size_t n = atomic_load_explicit(&ctx->ntables, memory_order_acquire);
    for (size_t t = 0; t < n; t++)
        for (size_t i = 0; i < ctx->tables[t]->count; i++) {
            const kt_aot_entry *e = &ctx->tables[t]->entries[i];
            if (e->artifact && e->artifact_bytes && e->artifact_len && strcmp(e->artifact, name) == 0) {
                *len = e->artifact_len;
                return e->artifact_bytes;
            }
        }
    return NULL;
}

/* The compiler identity a registered table of the device (backend b, local index device) was
 * made with, or NULL. */
static const char *carried_compiler(void *user, const kt_backend *b, size_t device) {
    const kt_context *ctx = user;
    const char *fp = NULL;
    size_t nd = atomic_load(&ctx->ndevices);
    for (size_t d = 0; d < nd && fp == NULL; d++)
        if (ctx->devices[d].table == b && ctx->devices[d].local == device) fp = ctx->devices[d].fingerprint;
    size_t n = atomic_load_explicit(&ctx->ntables, memory_order_acquire);
    for (size_t t = 0; fp && t < n; t++)
        if (strcmp(ctx->tables[t]->device, fp) == 0 && ctx->tables[t]->compiler && ctx->tables[t]->compiler[0]) return ctx->tables[t]->compiler;
    return NULL;
}

kt_status kt_context_add_decisions(kt_context *ctx, const kt_aot_table *table, int *used) {
    if (used) *used = 0;
    if (ctx == NULL || table == NULL) return kt__err(KT_ERR_NULL, "kt_context_add_decisions: %s is NULL", ctx ? "table" : "ctx");
    if (table->device == NULL || (table->count > 0 && table->entries == NULL))
        return kt__err(KT_ERR_NULL, "kt_context_add_decisions: the table's device or entries is NULL");
    for (size_t i = 0; i < table->count; i++) {
        const kt_aot_entry *e = &table->entries[i];
        if (e->op == NULL || e->set_hash == NULL || e->candidate == NULL || (e->key_len > 0 && e->key == NULL))
            return kt__err(KT_ERR_NULL, "kt_context_add_decisions: entry %zu's op, set_hash, candidate or key is NULL", i);
        if (e->key_len > KT__KEY_WORDS_MAX)
            return kt__err(KT_ERR_LIMIT, "kt_context_add_decisions: entry %zu's key has %zu words; at most %d", i, e->key_len, KT__KEY_WORDS_MAX);
    }
    const char *why = NULL;
    char text[512];
    if (table->version != KT_AOT_VERSION) {
        snprintf(text, sizeof text, "its layout version is %d; this library reads %d", table->version, KT_AOT_VERSION);
        why = text;
    } else if (major_of(table->library_version) != KT_VERSION_MAJOR) {
        snprintf(text, sizeof text, "its decisions were made by kerntune %.40s; this is %s", table->library_version ? table->library_version : "(none)",
                 kt_version_string());
        why = text;
    } else {
        size_t n = kt_context_device_count(ctx); /* (starts the backends not yet tried) */
        bool found = false;
        for (size_t d = 0; d < n && !found; d++) found = strcmp(ctx->devices[d].fingerprint, table->device) == 0;
        if (!found) {
            snprintf(text, sizeof text, "it was made on device '%.300s', which is none of this context's devices", table->device);
            why = text;
        }
    }
    if (why) {
        kt__log(ctx, KT_LOG_WARN, "kt_context_add_decisions: a table of %zu decision(s) is ignored: %s", table->count, why);
        return KT_OK;
    }
    pthread_mutex_lock(&ctx->lock);
    size_t n = atomic_load(&ctx->ntables);
    kt_status st = KT_OK;
    for (size_t i = 0; i < n; i++)
        if (ctx->tables[i] == table) st = kt__err(KT_ERR_DUPLICATE, "kt_context_add_decisions: this table is registered already");
    if (st == KT_OK && n == KT__MAX_TABLES) st = kt__err(KT_ERR_LIMIT, "kt_context_add_decisions: at most %d tables", KT__MAX_TABLES);
    if (st == KT_OK) {
        ctx->tables[n] = table;
        atomic_store_explicit(&ctx->ntables, n + 1, memory_order_release);
        ctx->artifacts.carried_user = ctx;
        ctx->artifacts.carried = carried;
        ctx->artifacts.carried_compiler = carried_compiler;
        if (used) *used = 1;
        kt__log(ctx, KT_LOG_INFO, "kt_context_add_decisions: %zu decision(s) made on device '%.200s'", table->count, table->device);
    }
    pthread_mutex_unlock(&ctx->lock);
    return st;
}

uint64_t kt_context_table_hits(const kt_context *ctx) { return ctx ? atomic_load(&ctx->table_hits) : 0; }


size_t kt__aot_entries(const kt_op *op, const kt_aot_entry **out, size_t max, const kt_aot_table **tables) {
    const char *fp = op->ctx->devices[op->device].fingerprint;
    size_t n = atomic_load_explicit(&op->ctx->ntables, memory_order_acquire), k = 0;
    for (size_t t = 0; t < n; t++) {
        const kt_aot_table *tb = op->ctx->tables[t];
        if (strcmp(tb->device, fp) != 0) continue;
        for (size_t i = 0; i < tb->count; i++) {
            const kt_aot_entry *e = &tb->entries[i];
            if (strcmp(e->op, op->name) != 0) continue;
            if (k < max) {
                out[k] = e;
                if (tables) tables[k] = tb;
            }
            k++;
        }
    }
    return k;
}

kt_status kt__aot_recall(kt_op *op, kt_decision *d, const kt_arg *args, bool *found) {
    *found = false;
    const char *fp = op->ctx->devices[op->device].fingerprint;
    size_t n = atomic_load_explicit(&op->ctx->ntables, memory_order_acquire);
    for (size_t t = 0; t < n && !*found; t++) {
        const kt_aot_table *tb = op->ctx->tables[t];
        if (strcmp(tb->device, fp) != 0) continue;
        for (size_t i = 0; i < tb->count && !*found; i++) {
            const kt_aot_entry *e = &tb->entries[i];
            if (e->key_len != d->keylen || strcmp(e->op, op->name) != 0 || memcmp(e->key, d->key, d->keylen * sizeof *d->key) != 0)
                continue;
            if (strcmp(e->set_hash, op->set_hash) != 0) {
                kt__log(op->ctx, KT_LOG_INFO, "op '%s': the table's decision for this key is of another candidate set: not used", op->name);
                continue;
            }
            char why[512];
            long cand, unit;
            kt_status st = kt__adopt_winner(op, d, args, e->candidate, e->config, &cand, &unit, why, sizeof why);
            if (st != KT_OK) return st;
            if (unit < 0) {
                kt__decision_reset(d);
                kt__log(op->ctx, KT_LOG_WARN, "op '%s': the table's decision for this key cannot be used: %s", op->name, why);
                continue;
            }
            d->winner = (size_t)cand;
            d->winner_unit = (size_t)unit;
            d->source = KT_SOURCE_TABLE;
            kt__cand_result *r = &d->units[unit].r;
            r->outcome = KT_OUTCOME_MEASURED; /* as a recalled record: its time when it was decided */
            r->time_ns = r->ci_low_ns = r->ci_high_ns = e->time_ns;
            atomic_fetch_add(&op->ctx->table_hits, 1);
            *found = true;
        }
    }
    return KT_OK;
}
