/*
 * op.c - building an op: its argument signature, key components, device and settings, and the
 * accessors of what was declared. Candidates are added in candidates.c; the op is frozen on its
 * first call in freeze.c.
 *
 * An op is mutable until its first call and immutable afterwards, so the call path reads its
 * declarations without locks. Every building call checks that and names itself in errors.
 */
#include "op/building.h"
#include "space/space.h"

#include <kerntune/search.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

kt_status kt__op_building(const kt_op *op, const char *where) {
    if (atomic_load(&op->frozen))
        return kt__err(KT_ERR_STATE, "%s(op '%s'): the op was already called; it can no longer be changed", where,
                       op->name);
    return KT_OK;
}

kt_status kt_op_create(kt_context *ctx, const char *name, kt_op **out) {
    if (out == NULL) return kt__err(KT_ERR_NULL, "kt_op_create: out is NULL");
    *out = NULL;
    if (ctx == NULL) return kt__err(KT_ERR_NULL, "kt_op_create: ctx is NULL");
    kt_op *op = calloc(1, sizeof *op);
    if (op == NULL) return kt__err(KT_ERR_NO_MEMORY, "kt_op_create: out of memory");
    kt_status st = kt__dup_name(name, "kt_op_create", &op->name);
    if (st != KT_OK) {
        free(op);
        return st;
    }
    kt__table *t = calloc(1, sizeof *t + 16 * sizeof t->slot[0]);
    if (t == NULL || pthread_mutex_init(&op->lock, NULL) != 0) {
        free(t);
        free(op->name);
        free(op);
        return kt__err(KT_ERR_NO_MEMORY, "kt_op_create: out of memory");
    }
    if (pthread_cond_init(&op->cond, NULL) != 0) {
        pthread_mutex_destroy(&op->lock);
        free(t);
        free(op->name);
        free(op);
        return kt__err(KT_ERR_SYSTEM, "kt_op_create: pthread_cond_init failed");
    }
    t->mask = 15;
    atomic_init(&op->table, t);
    op->ctx = ctx;
    op->default_idx = op->fallback_idx = op->forced_idx = op->reference_idx = -1;
    op->effort = KT_EFFORT_INHERIT;
    op->inputs = KT_INPUTS_PROTECT;
    op->seed = 0x6b65726e74756e65ull;
    op->validate = true;
    op->timeout_s = 10;

    pthread_mutex_lock(&ctx->lock);
    for (kt_op *o = ctx->ops; o; o = o->next) {
        if (strcmp(o->name, op->name) == 0) {
            pthread_mutex_unlock(&ctx->lock);
            st = kt__err(KT_ERR_DUPLICATE, "kt_op_create: an op named '%s' already exists in this context", name);
            op->ctx = NULL;
            kt_op_destroy(op);
            return st;
        }
    }
    op->next = ctx->ops;
    ctx->ops = op;
    pthread_mutex_unlock(&ctx->lock);
    *out = op;
    return KT_OK;
}

/* Frees the op's deferred keys (tune/deferred.c records them; the op owns them). */
static void free_deferred(kt_op *op) {
    for (size_t i = 0; i < op->ndeferred; i++) free(op->deferred[i].args);
    free(op->deferred);
    op->deferred = NULL;
    op->ndeferred = op->deferred_cap = 0;
}

void kt_op_destroy(kt_op *op) {
    if (op == NULL) return;
    if (op->ctx) kt__context_unlink(op->ctx, op);
    kt__table_free(op);
    free_deferred(op);
    free(op->done);
    if (op->nmodules > 0) {
        const kt_device *dev = &op->ctx->devices[op->device];
        const kt__backend_slot *bs = &op->ctx->backends[dev->slot];
        for (size_t i = 0; i < op->nmodules; i++) bs->backend->unload(bs->state, dev->local, op->modules[i].module);
    }
    free(op->modules);
    for (size_t i = 0; i < op->nargs; i++) free(op->args[i].name);
    free(op->args);
    for (size_t i = 0; i < op->ncands; i++) kt__cand_free(&op->cands[i]);
    free(op->cands);
    pthread_cond_destroy(&op->cond);
    pthread_mutex_destroy(&op->lock);
    free(op->work_flops), free(op->work_bytes);
    free(op->name);
    free(op);
}

const char *kt_op_name(const kt_op *op) { return op ? op->name : NULL; }
size_t kt_op_arg_count(const kt_op *op) { return op ? op->nargs : 0; }
size_t kt_op_candidate_count(const kt_op *op) { return op ? op->ncands : 0; }

/* The user pointer is the caller's alone: it may change after the op is frozen. */
kt_status kt_op_set_user(kt_op *op, void *user) {
    KT__CHECK_OP(op, "kt_op_set_user");
    op->user = user;
    return KT_OK;
}

void *kt_op_user(const kt_op *op) { return op ? op->user : NULL; }

const char *kt_op_candidate_name(const kt_op *op, size_t index) {
    return (op && index < op->ncands) ? op->cands[index].name : NULL;
}

static bool is_scalar_type(kt_type t) { return t >= KT_TYPE_I8 && t <= KT_TYPE_F64; }

static kt_status add_arg(kt_op *op, const char *name, kt_type type, kt_type elem, kt_access access,
                         const char *where) {
    KT__CHECK_OP(op, where);
    kt_status st = kt__op_building(op, where);
    if (st != KT_OK) return st;
    for (size_t i = 0; name && i < op->nargs; i++)
        if (strcmp(op->args[i].name, name) == 0)
            return kt__err(KT_ERR_DUPLICATE, "%s(op '%s'): argument '%s' is already declared", where, op->name, name);
    for (size_t i = 0; op->nargs >= KT__LPARAM_ARGS_MAX && i < op->ncands; i++)
        if (op->cands[i].nlparams > 0)
            return kt__err(KT_ERR_LIMIT, "%s(op '%s'): an op with launch parameters has at most %d arguments", where, op->name,
                           KT__LPARAM_ARGS_MAX);
    kt__argdecl *a = realloc(op->args, (op->nargs + 1) * sizeof *a);
    if (a == NULL) return kt__err(KT_ERR_NO_MEMORY, "%s: out of memory", where);
    op->args = a;
    kt__argdecl *d = &op->args[op->nargs];
    memset(d, 0, sizeof *d);
    if ((st = kt__dup_name(name, where, &d->name)) != KT_OK) return st;
    d->type = type;
    d->elem = elem;
    d->access = access;
    d->esize = kt_type_size(type == KT_TYPE_BUFFER ? elem : type);
    /* scalars carry no size (a caller's stray `bytes` is not checked); element sizes are powers of two */
    d->size_mask = type == KT_TYPE_BUFFER ? d->esize - 1 : 0;
    op->nargs++;
    return KT_OK;
}

kt_status kt_op_add_buffer(kt_op *op, const char *name, kt_type elem, kt_access access) {
    if (kt_type_size(elem) == 0)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_op_add_buffer: element type %d is not an element type", (int)elem);
    if (access != KT_READ_ONLY && access != KT_WRITE_ONLY && access != KT_READ_WRITE)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_op_add_buffer: access %d is not READ_ONLY, WRITE_ONLY or READ_WRITE",
                       (int)access);
    return add_arg(op, name, KT_TYPE_BUFFER, elem, access, "kt_op_add_buffer");
}

kt_status kt_op_add_scalar(kt_op *op, const char *name, kt_type type) {
    if (!is_scalar_type(type))
        return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_op_add_scalar: type %d (%s) is not a scalar type", (int)type,
                       kt_type_name(type));
    return add_arg(op, name, type, 0, 0, "kt_op_add_scalar");
}

kt_status kt__op_check_arg(const kt_op *op, size_t arg, const char *where) {
    if (arg >= op->nargs)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "%s(op '%s'): argument index %zu is out of range (the op has %zu)", where,
                       op->name, arg, op->nargs);
    return KT_OK;
}

static kt_status add_key(kt_op *op, kt__keycomp comp, const char *where) {
    KT__CHECK_OP(op, where);
    kt_status st = kt__op_building(op, where);
    if (st != KT_OK) return st;
    if (op->nkeys >= KT__KEY_USER_MAX)
        return kt__err(KT_ERR_LIMIT, "%s(op '%s'): at most %d key components", where, op->name, KT__KEY_USER_MAX);
    if (comp.kind != KT__KEY_FN && (st = kt__op_check_arg(op, comp.arg, where)) != KT_OK) return st;
    op->keys[op->nkeys++] = comp;
    return KT_OK;
}

kt_status kt_op_key_arg(kt_op *op, size_t arg, kt_bucket bucket) {
    if (bucket != KT_BUCKET_EXACT && bucket != KT_BUCKET_POW2)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_op_key_arg: bucket %d is not EXACT or POW2", (int)bucket);
    if (op && arg < op->nargs && bucket == KT_BUCKET_POW2 &&
        (op->args[arg].type == KT_TYPE_F32 || op->args[arg].type == KT_TYPE_F64))
        return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_op_key_arg(op '%s'): POW2 bucketing of float argument '%s'; use EXACT",
                       op->name, op->args[arg].name);
    return add_key(op, (kt__keycomp){.kind = KT__KEY_ARG, .arg = arg, .bucket = bucket}, "kt_op_key_arg");
}

kt_status kt_op_key_arg_fn(kt_op *op, size_t arg, kt_bucket_fn fn, void *user) {
    if (fn == NULL) return kt__err(KT_ERR_NULL, "kt_op_key_arg_fn: fn is NULL");
    if (op && arg < op->nargs && (op->args[arg].type == KT_TYPE_F32 || op->args[arg].type == KT_TYPE_F64))
        return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_op_key_arg_fn(op '%s'): argument '%s' is a float; use kt_op_key_fn",
                       op->name, op->args[arg].name);
    return add_key(op, (kt__keycomp){.kind = KT__KEY_ARG_FN, .arg = arg, .bucket_fn = fn, .user = user},
                   "kt_op_key_arg_fn");
}


kt_status kt_op_key_align(kt_op *op, size_t arg, size_t max_align) {
    if (!kt__is_pow2(max_align))
        return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_op_key_align: max_align %zu is not a power of two", max_align);
    if (op && arg < op->nargs && op->args[arg].type != KT_TYPE_BUFFER)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_op_key_align(op '%s'): argument '%s' is not a buffer", op->name,
                       op->args[arg].name);
    return add_key(op, (kt__keycomp){.kind = KT__KEY_ALIGN, .arg = arg, .max_align = max_align}, "kt_op_key_align");
}

kt_status kt_op_key_scale(kt_op *op, size_t index, kt_key_scale scale) {
    KT__CHECK_OP(op, "kt_op_key_scale");
    kt_status st = kt__op_building(op, "kt_op_key_scale");
    if (st != KT_OK) return st;
    if (scale != KT_KEY_SIZE && scale != KT_KEY_CATEGORY)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_op_key_scale(op '%s'): scale %d is not KT_KEY_SIZE or KT_KEY_CATEGORY", op->name,
                       (int)scale);
    if (index >= op->nkeys)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_op_key_scale(op '%s'): key component %zu does not exist (the op declares %zu)",
                       op->name, index, op->nkeys);
    op->keys[index].scale = scale;
    op->keys[index].scale_set = true;
    return KT_OK;
}

void kt__key_kinds(const kt_op *op, char *kinds) {
    for (size_t i = 0; i < op->nkeys; i++) {
        const kt__keycomp *k = &op->keys[i];
        bool size = false;
        if (k->scale_set) size = k->scale == KT_KEY_SIZE;
        else if (k->kind == KT__KEY_ARG || k->kind == KT__KEY_ARG_FN) size = op->args[k->arg].type != KT_TYPE_F32 && op->args[k->arg].type != KT_TYPE_F64;
        kinds[i] = size ? 's' : 'c';
    }
    kinds[op->nkeys] = '\0';
}

kt_status kt_op_key_fn(kt_op *op, kt_key_fn fn, void *user) {
    if (fn == NULL) return kt__err(KT_ERR_NULL, "kt_op_key_fn: fn is NULL");
    return add_key(op, (kt__keycomp){.kind = KT__KEY_FN, .key_fn = fn, .user = user}, "kt_op_key_fn");
}

void kt__op_backend(const kt_op *op, const kt_backend **b, void **state, size_t *local, const char **fp) {
    const kt_device *dev = &op->ctx->devices[op->device];
    *b = op->ctx->backends[dev->slot].backend;
    *state = op->ctx->backends[dev->slot].state;
    *local = dev->local;
    if (fp) *fp = dev->fingerprint;
}

kt_status kt_op_set_device(kt_op *op, size_t device) {
    KT__CHECK_OP(op, "kt_op_set_device");
    kt_status st = kt__op_building(op, "kt_op_set_device");
    if (st != KT_OK) return st;
    size_t n = kt_context_device_count(op->ctx);
    if (device >= n)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_op_set_device(op '%s'): device %zu does not exist (the context has %zu)",
                       op->name, device, n);
    op->device = device;
    return KT_OK;
}

kt_status kt_op_set_budget(kt_op *op, size_t max_units, double max_seconds) {
    KT__CHECK_OP(op, "kt_op_set_budget");
    kt_status st = kt__op_building(op, "kt_op_set_budget");
    if (st != KT_OK) return st;
    if (!(max_seconds >= 0))
        return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_op_set_budget(op '%s'): max_seconds %g must be >= 0", op->name, max_seconds);
    op->budget.units = max_units;
    op->budget.seconds = max_seconds;
    return KT_OK;
}

kt_status kt_op_set_budget_fraction(kt_op *op, double fraction) {
    KT__CHECK_OP(op, "kt_op_set_budget_fraction");
    kt_status st = kt__op_building(op, "kt_op_set_budget_fraction");
    if (st != KT_OK) return st;
    if (!(fraction >= 0 && fraction <= 1))
        return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_op_set_budget_fraction(op '%s'): %g is not a fraction in [0, 1]", op->name, fraction);
    op->budget.fraction = fraction;
    return KT_OK;
}

kt_status kt_op_set_search(kt_op *op, const char *strategy, uint64_t seed) {
    KT__CHECK_OP(op, "kt_op_set_search");
    kt_status st = kt__op_building(op, "kt_op_set_search");
    if (st != KT_OK) return st;
    bool known = strategy == NULL;
    for (size_t i = 0; !known && i < kt_search_strategy_count(); i++) known = strcmp(strategy, kt_search_strategy_name(i)) == 0;
    if (!known)
        return kt__err(KT_ERR_INVALID_ARGUMENT,
                       "kt_op_set_search(op '%s'): unknown strategy '%s' (known: exhaustive, random, local, anneal, genetic, model, auto)",
                       op->name, strategy);
    snprintf(op->strategy, sizeof op->strategy, "%s", strategy && strcmp(strategy, "auto") != 0 ? strategy : "");
    op->search_seed = seed;
    return KT_OK;
}

kt_status kt_op_set_isolation(kt_op *op, kt_isolation isolation) {
    KT__CHECK_OP(op, "kt_op_set_isolation");
    kt_status st = kt__op_building(op, "kt_op_set_isolation");
    if (st != KT_OK) return st;
    if (kt_isolation_name(isolation) == NULL)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_op_set_isolation(op '%s'): %d is not a kt_isolation", op->name, (int)isolation);
    op->isolation = isolation;
    return KT_OK;
}

kt_status kt_op_set_timeout(kt_op *op, double seconds) {
    KT__CHECK_OP(op, "kt_op_set_timeout");
    kt_status st = kt__op_building(op, "kt_op_set_timeout");
    if (st != KT_OK) return st;
    if (!(seconds > 0) || seconds > 1e6)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_op_set_timeout(op '%s'): %g s is not in (0, 1e6]", op->name, seconds);
    op->timeout_s = seconds;
    return KT_OK;
}

kt_status kt_op_set_run_budget(kt_op *op, uint64_t max_runs) {
    KT__CHECK_OP(op, "kt_op_set_run_budget");
    kt_status st = kt__op_building(op, "kt_op_set_run_budget");
    if (st != KT_OK) return st;
    op->budget.runs = max_runs;
    return KT_OK;
}

kt_status kt_op_set_effort(kt_op *op, kt_effort effort) {
    KT__CHECK_OP(op, "kt_op_set_effort");
    kt_status st = kt__op_building(op, "kt_op_set_effort");
    if (st != KT_OK) return st;
    if (kt_effort_name(effort) == NULL)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_op_set_effort(op '%s'): effort %d is not a level (0..4)", op->name,
                       (int)effort);
    op->effort = effort;
    return KT_OK;
}

kt_status kt_op_set_capture_miss(kt_op *op, kt_capture_miss how) {
    KT__CHECK_OP(op, "kt_op_set_capture_miss");
    kt_status st = kt__op_building(op, "kt_op_set_capture_miss");
    if (st != KT_OK) return st;
    if (kt_capture_miss_name(how) == NULL)
        return kt__err(KT_ERR_INVALID_ARGUMENT,
                       "kt_op_set_capture_miss(op '%s'): %d is not KT_CAPTURE_MISS_REFUSE (0) or KT_CAPTURE_MISS_FALLBACK (1)",
                       op->name, (int)how);
    op->capture_miss = how;
    return KT_OK;
}

kt_status kt_op_set_inputs(kt_op *op, kt_inputs inputs) {
    KT__CHECK_OP(op, "kt_op_set_inputs");
    kt_status st = kt__op_building(op, "kt_op_set_inputs");
    if (st != KT_OK) return st;
    if (kt_inputs_name(inputs) == NULL)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_op_set_inputs(op '%s'): inputs %d is not PROTECT, CLONE or GENERATED",
                       op->name, (int)inputs);
    op->inputs = inputs;
    return KT_OK;
}

/* Checks that arg is a buffer argument of a building op; reports as `where`. */
static kt_status buffer_arg(kt_op *op, size_t arg, const char *where) {
    KT__CHECK_OP(op, where);
    kt_status st = kt__op_building(op, where);
    if (st == KT_OK) st = kt__op_check_arg(op, arg, where);
    if (st == KT_OK && op->args[arg].type != KT_TYPE_BUFFER)
        st = kt__err(KT_ERR_INVALID_ARGUMENT, "%s(op '%s'): argument '%s' is not a buffer", where, op->name, op->args[arg].name);
    return st;
}

kt_status kt_op_set_accumulate(kt_op *op, size_t arg, double value) {
    kt_status st = buffer_arg(op, arg, "kt_op_set_accumulate");
    if (st != KT_OK) return st;
    if (op->args[arg].access != KT_WRITE_ONLY)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_op_set_accumulate(op '%s'): argument '%s' is not WRITE_ONLY", op->name,
                       op->args[arg].name);
    op->args[arg].accumulate = true;
    op->args[arg].acc_value = value;
    return KT_OK;
}

kt_status kt_op_set_constant(kt_op *op, size_t arg) {
    kt_status st = buffer_arg(op, arg, "kt_op_set_constant");
    if (st != KT_OK) return st;
    if (op->args[arg].access != KT_READ_ONLY)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_op_set_constant(op '%s'): argument '%s' is not READ_ONLY; constant memory cannot be written by a kernel",
                       op->name, op->args[arg].name);
    op->args[arg].constant = true;
    return KT_OK;
}

kt_status kt_op_set_compare(kt_op *op, size_t arg, kt_compare how) {
    kt_status st = buffer_arg(op, arg, "kt_op_set_compare");
    if (st != KT_OK) return st;
    if (op->args[arg].access == KT_READ_ONLY)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_op_set_compare(op '%s'): argument '%s' is READ_ONLY; only an output is compared",
                       op->name, op->args[arg].name);
    if (how != KT_COMPARE_ELEMENTS && how != KT_COMPARE_SUM)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_op_set_compare(op '%s'): %d is not KT_COMPARE_ELEMENTS or KT_COMPARE_SUM", op->name,
                       (int)how);
    op->args[arg].compare = (uint8_t)how;
    return KT_OK;
}

kt_status kt_op_set_generator(kt_op *op, size_t arg, kt_gen gen, double value) {
    kt_status st = buffer_arg(op, arg, "kt_op_set_generator");
    if (st != KT_OK) return st;
    if (gen != KT_GEN_RANDOM && gen != KT_GEN_CONSTANT)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_op_set_generator(op '%s'): generator %d is not RANDOM or CONSTANT",
                       op->name, (int)gen);
    op->args[arg].gen = gen;
    op->args[arg].gen_value = value;
    op->args[arg].gen_fn = NULL;
    return KT_OK;
}

kt_status kt_op_set_generator_fn(kt_op *op, size_t arg, kt_generate_fn fn, void *user) {
    kt_status st = buffer_arg(op, arg, "kt_op_set_generator_fn");
    if (st != KT_OK) return st;
    if (fn == NULL) return kt__err(KT_ERR_NULL, "kt_op_set_generator_fn(op '%s'): fn is NULL", op->name);
    op->args[arg].gen_fn = fn;
    op->args[arg].gen_user = user;
    return KT_OK;
}

kt_status kt_op_set_seed(kt_op *op, uint64_t seed) {
    KT__CHECK_OP(op, "kt_op_set_seed");
    kt_status st = kt__op_building(op, "kt_op_set_seed");
    if (st == KT_OK) op->seed = seed;
    return st;
}

kt_status kt_op_set_bench_hooks(kt_op *op, kt_hook_fn pre, kt_hook_fn post, void *user) {
    KT__CHECK_OP(op, "kt_op_set_bench_hooks");
    kt_status st = kt__op_building(op, "kt_op_set_bench_hooks");
    if (st != KT_OK) return st;
    op->pre_hook = pre;
    op->post_hook = post;
    op->hook_user = user;
    return KT_OK;
}

kt_status kt_op_set_result(kt_op *op, kt_type elem) {
    KT__CHECK_OP(op, "kt_op_set_result");
    kt_status st = kt__op_building(op, "kt_op_set_result");
    if (st != KT_OK) return st;
    if (kt_type_size(elem) == 0)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_op_set_result(op '%s'): element type %d is not an element type", op->name,
                       (int)elem);
    bool plain = false;
    for (size_t i = 0; i < op->ncands; i++) plain = plain || op->cands[i].rfn == NULL;
    if (plain && !op->has_result)
        return kt__err(KT_ERR_STATE, "kt_op_set_result(op '%s'): the op already has candidates that return no result",
                       op->name);
    op->has_result = true;
    op->result_elem = elem;
    return KT_OK;
}

kt_status kt_op_set_reference_only(kt_op *op, int on) {
    KT__CHECK_OP(op, "kt_op_set_reference_only");
    kt_status st = kt__op_building(op, "kt_op_set_reference_only");
    if (st == KT_OK) op->reference_only = on != 0;
    return st;
}

kt_status kt_op_set_reference_fn(kt_op *op, kt_reference_fn fn, void *user) {
    KT__CHECK_OP(op, "kt_op_set_reference_fn");
    kt_status st = kt__op_building(op, "kt_op_set_reference_fn");
    if (st != KT_OK) return st;
    op->reference_fn = fn;
    op->reference_user = user;
    return KT_OK;
}

kt_status kt_op_set_verify_fn(kt_op *op, kt_verify_fn fn, void *user) {
    KT__CHECK_OP(op, "kt_op_set_verify_fn");
    kt_status st = kt__op_building(op, "kt_op_set_verify_fn");
    if (st != KT_OK) return st;
    op->verify_fn = fn;
    op->verify_user = fn ? user : NULL;
    return KT_OK;
}

kt_status kt_op_set_reference_consensus(kt_op *op, size_t n) {
    KT__CHECK_OP(op, "kt_op_set_reference_consensus");
    kt_status st = kt__op_building(op, "kt_op_set_reference_consensus");
    if (st != KT_OK) return st;
    if (n > KT_REFERENCE_CONSENSUS_MAX)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_op_set_reference_consensus(op '%s'): %zu units; at most %d vote", op->name, n,
                       KT_REFERENCE_CONSENSUS_MAX);
    op->consensus = n > 1 ? n : 0;
    return KT_OK;
}

kt_status kt_op_set_disagreement_stop(kt_op *op, size_t min_validated) {
    KT__CHECK_OP(op, "kt_op_set_disagreement_stop");
    kt_status st = kt__op_building(op, "kt_op_set_disagreement_stop");
    if (st == KT_OK) op->disagree_min = min_validated;
    return st;
}

kt_status kt_op_stop_disagreement(kt_op *op) {
    KT__CHECK_OP(op, "kt_op_stop_disagreement");
    atomic_store(&op->stop_asked, true);
    return KT_OK;
}

kt_status kt_op_set_validation(kt_op *op, int on) {
    KT__CHECK_OP(op, "kt_op_set_validation");
    kt_status st = kt__op_building(op, "kt_op_set_validation");
    if (st == KT_OK) op->validate = on != 0;
    return st;
}

kt_status kt_op_set_rerace(kt_op *op, int on) {
    KT__CHECK_OP(op, "kt_op_set_rerace");
    kt_status st = kt__op_building(op, "kt_op_set_rerace");
    if (st == KT_OK) op->no_rerace = on == 0;
    return st;
}

kt_status kt_op_set_work(kt_op *op, const char *flops, const char *bytes) {
    KT__CHECK_OP(op, "kt_op_set_work");
    kt_status st = kt__op_building(op, "kt_op_set_work");
    if (st != KT_OK) return st;
    char *f = flops && *flops ? strdup(flops) : NULL, *b = bytes && *bytes ? strdup(bytes) : NULL;
    if ((flops && *flops && f == NULL) || (bytes && *bytes && b == NULL)) {
        free(f), free(b);
        return kt__err(KT_ERR_NO_MEMORY, "kt_op_set_work(op '%s'): out of memory", op->name);
    }
    free(op->work_flops), free(op->work_bytes);
    op->work_flops = f, op->work_bytes = b;
    return KT_OK;
}

kt_status kt_op_set_tolerance(kt_op *op, double atol, double rtol) {
    KT__CHECK_OP(op, "kt_op_set_tolerance");
    kt_status st = kt__op_building(op, "kt_op_set_tolerance");
    if (st != KT_OK) return st;
    if (!(atol >= 0) || !(rtol >= 0))
        return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_op_set_tolerance(op '%s'): atol %g and rtol %g must be >= 0", op->name,
                       atol, rtol);
    op->tol_set = true;
    op->atol = atol;
    op->rtol = rtol;
    return KT_OK;
}
