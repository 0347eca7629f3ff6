/*
 * op.c - building an op: its argument signature, key components, candidates and their
 * requirements; and freezing it on its first call.
 *
 * An op is mutable until its first call and immutable afterwards, so the call path reads its
 * declarations without locks. Every building call checks that and names itself in errors.
 */
#include "op/op.h"
#include "space/space.h"

#include <stdlib.h>
#include <string.h>

#define CHECK_OP(op, where)                                                   \
    do {                                                                      \
        if ((op) == NULL) return kt__err(KT_ERR_NULL, "%s: op is NULL", where); \
    } while (0)

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

/* Frees what a candidate owns. */
static void free_candidate(kt__cand *c) {
    free(c->name);
    free(c->reqs);
    kt_space_destroy(c->space);
    free(c->source);
    free(c->kernel);
    for (size_t k = 0; k < c->noptions; k++) free(c->options[k]);
    free(c->options);
    free(c->input_arg);
}

void kt_op_destroy(kt_op *op) {
    if (op == NULL) return;
    if (op->ctx) kt__context_unlink(op->ctx, op);
    kt__table_free(op);
    free(op->done);
    if (op->nmodules > 0) {
        const kt_device *dev = &op->ctx->devices[op->device];
        const kt__backend_slot *bs = &op->ctx->backends[dev->slot];
        for (size_t i = 0; i < op->nmodules; i++) bs->backend->unload(bs->state, dev->local, op->modules[i].module);
    }
    free(op->modules);
    for (size_t i = 0; i < op->nargs; i++) free(op->args[i].name);
    free(op->args);
    for (size_t i = 0; i < op->ncands; i++) free_candidate(&op->cands[i]);
    free(op->cands);
    pthread_cond_destroy(&op->cond);
    pthread_mutex_destroy(&op->lock);
    free(op->name);
    free(op);
}

const char *kt_op_name(const kt_op *op) { return op ? op->name : NULL; }
size_t kt_op_arg_count(const kt_op *op) { return op ? op->nargs : 0; }
size_t kt_op_candidate_count(const kt_op *op) { return op ? op->ncands : 0; }

/* The user pointer is the caller's alone: it may change after the op is frozen. */
kt_status kt_op_set_user(kt_op *op, void *user) {
    CHECK_OP(op, "kt_op_set_user");
    op->user = user;
    return KT_OK;
}

void *kt_op_user(const kt_op *op) { return op ? op->user : NULL; }

const char *kt_op_candidate_name(const kt_op *op, size_t index) {
    return (op && index < op->ncands) ? op->cands[index].name : NULL;
}

static bool is_scalar_type(kt_type t) { return t >= KT_TYPE_I8 && t <= KT_TYPE_F64; }
static bool is_int_type(kt_type t) { return t >= KT_TYPE_I8 && t <= KT_TYPE_U64; }

static kt_status add_arg(kt_op *op, const char *name, kt_type type, kt_type elem, kt_access access,
                         const char *where) {
    CHECK_OP(op, where);
    kt_status st = kt__op_building(op, where);
    if (st != KT_OK) return st;
    for (size_t i = 0; name && i < op->nargs; i++)
        if (strcmp(op->args[i].name, name) == 0)
            return kt__err(KT_ERR_DUPLICATE, "%s(op '%s'): argument '%s' is already declared", where, op->name, name);
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

/* Checks a key/requirement argument index. */
static kt_status check_arg_index(const kt_op *op, size_t arg, const char *where) {
    if (arg >= op->nargs)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "%s(op '%s'): argument index %zu is out of range (the op has %zu)", where,
                       op->name, arg, op->nargs);
    return KT_OK;
}

static kt_status add_key(kt_op *op, kt__keycomp comp, const char *where) {
    CHECK_OP(op, where);
    kt_status st = kt__op_building(op, where);
    if (st != KT_OK) return st;
    if (op->nkeys >= KT__KEY_USER_MAX)
        return kt__err(KT_ERR_LIMIT, "%s(op '%s'): at most %d key components", where, op->name, KT__KEY_USER_MAX);
    if (comp.kind != KT__KEY_FN && (st = check_arg_index(op, comp.arg, where)) != KT_OK) return st;
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

static bool is_pow2(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

kt_status kt_op_key_align(kt_op *op, size_t arg, size_t max_align) {
    if (!is_pow2(max_align))
        return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_op_key_align: max_align %zu is not a power of two", max_align);
    if (op && arg < op->nargs && op->args[arg].type != KT_TYPE_BUFFER)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_op_key_align(op '%s'): argument '%s' is not a buffer", op->name,
                       op->args[arg].name);
    return add_key(op, (kt__keycomp){.kind = KT__KEY_ALIGN, .arg = arg, .max_align = max_align}, "kt_op_key_align");
}

kt_status kt_op_key_fn(kt_op *op, kt_key_fn fn, void *user) {
    if (fn == NULL) return kt__err(KT_ERR_NULL, "kt_op_key_fn: fn is NULL");
    return add_key(op, (kt__keycomp){.kind = KT__KEY_FN, .key_fn = fn, .user = user}, "kt_op_key_fn");
}

/* Finds candidate name; reports an unknown name as `where`. */
static kt_status find_cand(const kt_op *op, const char *name, const char *where, size_t *idx) {
    if (name == NULL) return kt__err(KT_ERR_NULL, "%s(op '%s'): candidate name is NULL", where, op->name);
    for (size_t i = 0; i < op->ncands; i++) {
        if (strcmp(op->cands[i].name, name) == 0) {
            *idx = i;
            return KT_OK;
        }
    }
    return kt__err(KT_ERR_UNKNOWN_CANDIDATE, "%s(op '%s'): no candidate named '%s' (the op has %zu)", where, op->name,
                   name, op->ncands);
}

/* Adds a candidate calling fn or rfn (exactly one set); `where` names the public function. */
static kt_status add_candidate(kt_op *op, const char *name, kt_native_fn fn, kt_result_fn rfn, void *user,
                               const char *where) {
    CHECK_OP(op, where);
    kt_status st = kt__op_building(op, where);
    if (st != KT_OK) return st;
    if ((fn != NULL || rfn != NULL) && op->has_result != (rfn != NULL))
        return kt__err(KT_ERR_STATE, op->has_result
                                         ? "%s(op '%s'): the op returns a result (kt_op_set_result); add candidates with kt_op_add_native_result"
                                         : "%s(op '%s'): the op returns no result; declare one with kt_op_set_result first",
                       where, op->name);
    for (size_t i = 0; name && i < op->ncands; i++)
        if (strcmp(op->cands[i].name, name) == 0)
            return kt__err(KT_ERR_DUPLICATE, "%s(op '%s'): candidate '%s' already exists", where, op->name, name);
    if (op->ncands >= KT__CAND_MAX)
        return kt__err(KT_ERR_LIMIT, "%s(op '%s'): at most %d candidates", where, op->name, KT__CAND_MAX);
    kt__cand *c = realloc(op->cands, (op->ncands + 1) * sizeof *c);
    if (c == NULL) return kt__err(KT_ERR_NO_MEMORY, "%s: out of memory", where);
    op->cands = c;
    kt__cand *cand = &op->cands[op->ncands];
    memset(cand, 0, sizeof *cand);
    if ((st = kt__dup_name(name, where, &cand->name)) != KT_OK) return st;
    cand->fn = fn;
    cand->rfn = rfn;
    cand->user = user;
    cand->mask_bit = -1;
    op->ncands++;
    return KT_OK;
}

kt_status kt_op_add_native(kt_op *op, const char *name, kt_native_fn fn, void *user) {
    if (op && fn == NULL) return kt__err(KT_ERR_NULL, "kt_op_add_native(op '%s'): fn is NULL", op->name);
    return add_candidate(op, name, fn, NULL, user, "kt_op_add_native");
}

kt_status kt_op_add_native_result(kt_op *op, const char *name, kt_result_fn fn, void *user) {
    if (op && fn == NULL) return kt__err(KT_ERR_NULL, "kt_op_add_native_result(op '%s'): fn is NULL", op->name);
    return add_candidate(op, name, NULL, fn, user, "kt_op_add_native_result");
}

void kt__op_backend(const kt_op *op, const kt_backend **b, void **state, size_t *local, const char **fp) {
    const kt_device *dev = &op->ctx->devices[op->device];
    *b = op->ctx->backends[dev->slot].backend;
    *state = op->ctx->backends[dev->slot].state;
    *local = dev->local;
    if (fp) *fp = dev->fingerprint;
}

kt_status kt_op_set_device(kt_op *op, size_t device) {
    CHECK_OP(op, "kt_op_set_device");
    kt_status st = kt__op_building(op, "kt_op_set_device");
    if (st != KT_OK) return st;
    size_t n = kt_context_device_count(op->ctx);
    if (device >= n)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_op_set_device(op '%s'): device %zu does not exist (the context has %zu)",
                       op->name, device, n);
    op->device = device;
    return KT_OK;
}

kt_status kt_op_add_variants(kt_op *op, const char *name, kt_space *space, const char *source, const char *kernel_name,
                             const char *const *options, size_t noptions) {
    const char *where = "kt_op_add_variants";
    CHECK_OP(op, where);
    if (space == NULL || source == NULL || kernel_name == NULL)
        return kt__err(KT_ERR_NULL, "%s(op '%s'): %s is NULL", where, op->name,
                       space == NULL ? "space" : source == NULL ? "source" : "kernel_name");
    if (options == NULL && noptions > 0) return kt__err(KT_ERR_NULL, "%s(op '%s'): options is NULL", where, op->name);
    if (op->has_result)
        return kt__err(KT_ERR_STATE, "%s(op '%s'): the op returns a result; compiled variants write their outputs into buffers",
                       where, op->name);
    for (const char *k = kernel_name; *k; k++)
        if (!(*k == '_' || (*k >= '0' && *k <= '9') || (*k >= 'a' && *k <= 'z') || (*k >= 'A' && *k <= 'Z')))
            return kt__err(KT_ERR_INVALID_ARGUMENT, "%s(op '%s'): kernel name '%s' is not an identifier", where, op->name, kernel_name);
    /* A native placeholder first (so the shared checks run), then the group's own fields. */
    kt_status st = add_candidate(op, name, NULL, NULL, NULL, where);
    if (st != KT_OK) return st;
    kt__cand *c = &op->cands[op->ncands - 1];
    size_t ninputs = kt__space_input_count(space);
    c->source = strdup(source);
    c->kernel = strdup(kernel_name);
    c->options = calloc(noptions ? noptions : 1, sizeof *c->options);
    c->input_arg = calloc(ninputs ? ninputs : 1, sizeof *c->input_arg);
    bool ok = c->source && c->kernel && c->options && c->input_arg;
    for (size_t i = 0; ok && i < noptions; i++) ok = (c->options[c->noptions++] = strdup(options[i])) != NULL;
    if (!ok) {
        free_candidate(c);
        op->ncands--;
        return kt__err(KT_ERR_NO_MEMORY, "%s: out of memory", where);
    }
    kt__space_retain(space);
    c->space = space;
    return KT_OK;
}

/* Looks up a candidate for a requirement and checks the argument index and building state. */
static kt_status req_target(kt_op *op, const char *name, size_t arg, const char *where, kt__cand **out) {
    CHECK_OP(op, where);
    kt_status st = kt__op_building(op, where);
    size_t idx = 0;
    if (st == KT_OK) st = find_cand(op, name, where, &idx);
    if (st == KT_OK) st = check_arg_index(op, arg, where);
    if (st == KT_OK) *out = &op->cands[idx];
    return st;
}

static kt_status add_req(kt__cand *c, kt__req r, const char *where) {
    kt__req *reqs = realloc(c->reqs, (c->nreqs + 1) * sizeof *reqs);
    if (reqs == NULL) return kt__err(KT_ERR_NO_MEMORY, "%s: out of memory", where);
    c->reqs = reqs;
    c->reqs[c->nreqs++] = r;
    return KT_OK;
}

kt_status kt_op_require_align(kt_op *op, const char *name, size_t arg, size_t align) {
    const char *where = "kt_op_require_align";
    kt__cand *c = NULL;
    kt_status st = req_target(op, name, arg, where, &c);
    if (st != KT_OK) return st;
    if (op->args[arg].type != KT_TYPE_BUFFER)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "%s(op '%s'): argument '%s' is not a buffer", where, op->name,
                       op->args[arg].name);
    if (!is_pow2(align))
        return kt__err(KT_ERR_INVALID_ARGUMENT, "%s(op '%s'): align %zu is not a power of two", where, op->name, align);
    return add_req(c, (kt__req){KT__REQ_ALIGN, arg, (int64_t)align}, where);
}

kt_status kt_op_require_multiple(kt_op *op, const char *name, size_t arg, int64_t k) {
    const char *where = "kt_op_require_multiple";
    kt__cand *c = NULL;
    kt_status st = req_target(op, name, arg, where, &c);
    if (st != KT_OK) return st;
    kt_type t = op->args[arg].type;
    if (t != KT_TYPE_BUFFER && !is_int_type(t))
        return kt__err(KT_ERR_INVALID_ARGUMENT, "%s(op '%s'): argument '%s' is %s; need an integer or a buffer", where,
                       op->name, op->args[arg].name, kt_type_name(t));
    if (k < 1) return kt__err(KT_ERR_INVALID_ARGUMENT, "%s(op '%s'): k %lld must be >= 1", where, op->name, (long long)k);
    return add_req(c, (kt__req){KT__REQ_MULTIPLE, arg, k}, where);
}

kt_status kt_op_require_fn(kt_op *op, const char *name, kt_accept_fn fn, void *user) {
    const char *where = "kt_op_require_fn";
    CHECK_OP(op, where);
    if (fn == NULL) return kt__err(KT_ERR_NULL, "%s(op '%s'): fn is NULL", where, op->name);
    kt_status st = kt__op_building(op, where);
    size_t idx = 0;
    if (st == KT_OK) st = find_cand(op, name, where, &idx);
    if (st != KT_OK) return st;
    op->cands[idx].accept = fn;
    op->cands[idx].accept_user = user;
    return KT_OK;
}

/* Shared body of the setters that name one candidate (NULL clears when allowed). */
static kt_status set_named(kt_op *op, const char *name, bool null_clears, const char *where, long *slot) {
    CHECK_OP(op, where);
    kt_status st = kt__op_building(op, where);
    if (st != KT_OK) return st;
    if (name == NULL && null_clears) {
        *slot = -1;
        return KT_OK;
    }
    size_t idx = 0;
    if ((st = find_cand(op, name, where, &idx)) != KT_OK) return st;
    *slot = (long)idx;
    return KT_OK;
}

kt_status kt_op_set_default(kt_op *op, const char *name) {
    return set_named(op, name, false, "kt_op_set_default", op ? &op->default_idx : NULL);
}

kt_status kt_op_set_fallback(kt_op *op, const char *name) {
    return set_named(op, name, true, "kt_op_set_fallback", op ? &op->fallback_idx : NULL);
}

kt_status kt_op_force(kt_op *op, const char *name) {
    kt_status st = set_named(op, name, true, "kt_op_force", op ? &op->forced_idx : NULL);
    if (st == KT_OK) op->effort = name ? KT_EFFORT_FORCED : KT_EFFORT_INHERIT;
    return st;
}

kt_status kt_op_set_budget(kt_op *op, size_t max_units, double max_seconds) {
    CHECK_OP(op, "kt_op_set_budget");
    kt_status st = kt__op_building(op, "kt_op_set_budget");
    if (st != KT_OK) return st;
    if (!(max_seconds >= 0))
        return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_op_set_budget(op '%s'): max_seconds %g must be >= 0", op->name, max_seconds);
    op->budget.units = max_units;
    op->budget.seconds = max_seconds;
    return KT_OK;
}

kt_status kt_op_set_isolation(kt_op *op, kt_isolation isolation) {
    CHECK_OP(op, "kt_op_set_isolation");
    kt_status st = kt__op_building(op, "kt_op_set_isolation");
    if (st != KT_OK) return st;
    if (kt_isolation_name(isolation) == NULL)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_op_set_isolation(op '%s'): %d is not a kt_isolation", op->name, (int)isolation);
    op->isolation = isolation;
    return KT_OK;
}

kt_status kt_op_set_timeout(kt_op *op, double seconds) {
    CHECK_OP(op, "kt_op_set_timeout");
    kt_status st = kt__op_building(op, "kt_op_set_timeout");
    if (st != KT_OK) return st;
    if (!(seconds > 0) || seconds > 1e6)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_op_set_timeout(op '%s'): %g s is not in (0, 1e6]", op->name, seconds);
    op->timeout_s = seconds;
    return KT_OK;
}

kt_status kt_op_set_run_budget(kt_op *op, uint64_t max_runs) {
    CHECK_OP(op, "kt_op_set_run_budget");
    kt_status st = kt__op_building(op, "kt_op_set_run_budget");
    if (st != KT_OK) return st;
    op->budget.runs = max_runs;
    return KT_OK;
}

kt_status kt_op_set_effort(kt_op *op, kt_effort effort) {
    CHECK_OP(op, "kt_op_set_effort");
    kt_status st = kt__op_building(op, "kt_op_set_effort");
    if (st != KT_OK) return st;
    if (kt_effort_name(effort) == NULL)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_op_set_effort(op '%s'): effort %d is not a level (0..4)", op->name,
                       (int)effort);
    op->effort = effort;
    return KT_OK;
}

kt_status kt_op_set_inputs(kt_op *op, kt_inputs inputs) {
    CHECK_OP(op, "kt_op_set_inputs");
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
    CHECK_OP(op, where);
    kt_status st = kt__op_building(op, where);
    if (st == KT_OK) st = check_arg_index(op, arg, where);
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
    CHECK_OP(op, "kt_op_set_seed");
    kt_status st = kt__op_building(op, "kt_op_set_seed");
    if (st == KT_OK) op->seed = seed;
    return st;
}

kt_status kt_op_set_bench_hooks(kt_op *op, kt_hook_fn pre, kt_hook_fn post, void *user) {
    CHECK_OP(op, "kt_op_set_bench_hooks");
    kt_status st = kt__op_building(op, "kt_op_set_bench_hooks");
    if (st != KT_OK) return st;
    op->pre_hook = pre;
    op->post_hook = post;
    op->hook_user = user;
    return KT_OK;
}

kt_status kt_op_set_result(kt_op *op, kt_type elem) {
    CHECK_OP(op, "kt_op_set_result");
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

kt_status kt_op_set_reference(kt_op *op, const char *name) {
    return set_named(op, name, false, "kt_op_set_reference", op ? &op->reference_idx : NULL);
}

kt_status kt_op_set_reference_only(kt_op *op, int on) {
    CHECK_OP(op, "kt_op_set_reference_only");
    kt_status st = kt__op_building(op, "kt_op_set_reference_only");
    if (st == KT_OK) op->reference_only = on != 0;
    return st;
}

kt_status kt_op_set_reference_fn(kt_op *op, kt_reference_fn fn, void *user) {
    CHECK_OP(op, "kt_op_set_reference_fn");
    kt_status st = kt__op_building(op, "kt_op_set_reference_fn");
    if (st != KT_OK) return st;
    op->reference_fn = fn;
    op->reference_user = user;
    return KT_OK;
}

kt_status kt_op_set_validation(kt_op *op, int on) {
    CHECK_OP(op, "kt_op_set_validation");
    kt_status st = kt__op_building(op, "kt_op_set_validation");
    if (st == KT_OK) op->validate = on != 0;
    return st;
}

kt_status kt_op_set_tolerance(kt_op *op, double atol, double rtol) {
    CHECK_OP(op, "kt_op_set_tolerance");
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

/* Resolves what the op will do on a miss. Precedence: KERNTUNE_FORCE for this op, then
 * KERNTUNE_MODE, then the op's own level, then the context's. */
static kt_status resolve_effort(kt_op *op) {
    const kt_context *ctx = op->ctx;
    const char *forced = kt__context_forced(ctx, op->name);
    if (forced != NULL) {
        size_t idx = 0;
        if (find_cand(op, forced, "kt_op_call", &idx) != KT_OK)
            return kt__err(KT_ERR_UNKNOWN_CANDIDATE, "kt_op_call(op '%s'): KERNTUNE_FORCE names candidate '%s', which the op does not have",
                           op->name, forced);
        op->forced_idx = (long)idx;
        op->effective = KT_EFFORT_FORCED;
        return KT_OK;
    }
    if (ctx->env_mode != KT_EFFORT_INHERIT) op->effective = ctx->env_mode;
    else if (op->effort != KT_EFFORT_INHERIT) op->effective = op->effort;
    else op->effective = ctx->effort;
    return KT_OK;
}

/* Whether the op already keys argument a exactly. */
static bool keyed_exactly(const kt_op *op, size_t a) {
    for (size_t k = 0; k < op->nkeys; k++)
        if (op->keys[k].kind == KT__KEY_ARG && op->keys[k].arg == a && op->keys[k].bucket == KT_BUCKET_EXACT) return true;
    return false;
}

/* A configuration's compiled code (its defines), whether it is valid (constraints, the device's
 * limits on its local size and shared memory) and its launch size may all depend on the space's
 * inputs, which arguments bind. A decision is reused for every call of its key, so:
 *   - an argument that reaches the code or the validity of a configuration is keyed exactly
 *     (an automatic key component after the declared ones): a decision made for one value is
 *     never launched with code compiled, or validity judged, for another;
 *   - an argument that reaches only a global size is not keyed: every call computes those
 *     sizes from its own arguments (cand->call_dims), so n = 600 and n = 1000 may share a
 *     decision and each launch covers its own n. A space too large to copy on the call path
 *     (more than KT__CALL_SLOTS_MAX slots) keys such an argument exactly instead. */
static kt_status key_fixed_inputs(kt_op *op) {
    for (size_t i = 0; i < op->ncands; i++) {
        kt__cand *c = &op->cands[i];
        if (c->space == NULL) continue;
        uint64_t fixed = kt__space_fixed_inputs(c->space);
        bool big = kt__space_slot_count(c->space) > KT__CALL_SLOTS_MAX;
        c->call_dims = 0;
        for (size_t k = 0; k < kt__space_input_count(c->space); k++) {
            long a = c->input_arg[k];
            if (a < 0) continue;
            uint64_t bit = (uint64_t)1 << k;
            uint8_t dims = 0;
            for (int d = 0; d < 3; d++)
                if (kt__space_global_inputs(c->space, d) & bit) dims |= (uint8_t)(1u << d);
            bool exact = (fixed & bit) != 0 || (dims != 0 && big);
            if (!exact) {
                c->call_dims |= dims;
                continue;
            }
            if (keyed_exactly(op, (size_t)a)) continue;
            if (op->nkeys >= KT__KEY_USER_MAX + KT__KEY_AUTO_MAX)
                return kt__err(KT_ERR_LIMIT, "kt_op_call(op '%s'): too many arguments reach the variants' code: at most %d key components in all",
                               op->name, KT__KEY_USER_MAX + KT__KEY_AUTO_MAX);
            op->keys[op->nkeys++] = (kt__keycomp){.kind = KT__KEY_ARG, .arg = (size_t)a, .bucket = KT_BUCKET_EXACT, .automatic = true};
            kt__log(op->ctx, KT_LOG_INFO,
                    "op '%s': argument '%s' reaches the %s of candidate '%s' (space input '%s'): it is keyed exactly", op->name,
                    op->args[a].name, (fixed & bit) ? "compiled code, constraints or launch limits" : "launch size (a space too large to size per call)", c->name,
                    kt__space_input_name(c->space, k));
        }
    }
    return KT_OK;
}

kt_status kt__op_freeze(kt_op *op) {
    pthread_mutex_lock(&op->lock);
    kt_status st = KT_OK;
    if (atomic_load_explicit(&op->frozen, memory_order_relaxed)) goto out;
    if (op->ncands == 0) {
        st = kt__err(KT_ERR_NO_CANDIDATES, "kt_op_call(op '%s'): the op has no candidates; add one with kt_op_add_native",
                     op->name);
        goto out;
    }
    size_t npred = 0;
    for (size_t i = 0; i < op->ncands; i++)
        if (op->cands[i].nreqs > 0 || op->cands[i].accept != NULL) npred++;
    if (npred > 64 * KT__MASK_WORDS_MAX) {
        st = kt__err(KT_ERR_LIMIT, "kt_op_call(op '%s'): %zu candidates have requirements; at most %d may", op->name, npred,
                     64 * KT__MASK_WORDS_MAX);
        goto out;
    }
    if ((st = resolve_effort(op)) != KT_OK) goto out;
    for (size_t i = 0; i < op->ncands; i++) { /* space inputs named like an argument take its value */
        kt__cand *c = &op->cands[i];
        for (size_t k = 0; c->space && k < kt__space_input_count(c->space); k++) {
            c->input_arg[k] = -1;
            for (size_t a = 0; a < op->nargs; a++)
                if (strcmp(op->args[a].name, kt__space_input_name(c->space, k)) == 0) c->input_arg[k] = (long)a;
        }
    }
    if ((st = key_fixed_inputs(op)) != KT_OK) goto out;
    int bit = 0;
    for (size_t i = 0; i < op->ncands; i++)
        op->cands[i].mask_bit = (op->cands[i].nreqs > 0 || op->cands[i].accept != NULL) ? bit++ : -1;
    op->npredicated = npred;
    op->nmask_words = (npred + 63) / 64;
    kt__op_identity(op);
    atomic_store_explicit(&op->frozen, 1, memory_order_release);
    kt__log(op->ctx, KT_LOG_DEBUG, "op '%s' frozen: %zu argument(s), %zu key component(s), %zu candidate(s), effort %s",
            op->name, op->nargs, op->nkeys, op->ncands, kt_effort_name(op->effective));
out:
    pthread_mutex_unlock(&op->lock);
    return st;
}
