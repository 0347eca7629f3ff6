/*
 * candidates.c - an op's candidates: natives (a function, or one returning its output),
 * variant groups (a source, a kernel, options and a space), their requirements on arguments,
 * and the settings that name one candidate (default, fallback, forced, reference).
 */
#include "op/building.h"
#include "space/space.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool is_int_type(kt_type t) { return t >= KT_TYPE_I8 && t <= KT_TYPE_U64; }

void kt__cand_free(kt__cand *c) {
    free(c->name);
    free(c->reqs);
    kt_space_destroy(c->space);
    free(c->source);
    free(c->kernel);
    for (size_t k = 0; k < c->noptions; k++) free(c->options[k]);
    free(c->options);
    free(c->input_arg);
    free(c->version);
}

kt_status kt__op_find_cand(const kt_op *op, const char *name, const char *where, size_t *idx) {
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
static kt_status add_candidate(kt_op *op, const char *name, kt_native_fn fn, kt_result_fn rfn, kt_queued_fn qfn,
                               void *user, const char *where) {
    KT__CHECK_OP(op, where);
    kt_status st = kt__op_building(op, where);
    if (st != KT_OK) return st;
    if ((fn != NULL || rfn != NULL || qfn != NULL) && op->has_result != (rfn != NULL))
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
    cand->qfn = qfn;
    cand->user = user;
    cand->mask_bit = -1;
    op->ncands++;
    return KT_OK;
}

kt_status kt_op_add_native(kt_op *op, const char *name, kt_native_fn fn, void *user) {
    if (op && fn == NULL) return kt__err(KT_ERR_NULL, "kt_op_add_native(op '%s'): fn is NULL", op->name);
    return add_candidate(op, name, fn, NULL, NULL, user, "kt_op_add_native");
}

kt_status kt_op_add_native_queued(kt_op *op, const char *name, kt_queued_fn fn, void *user) {
    if (op && fn == NULL) return kt__err(KT_ERR_NULL, "kt_op_add_native_queued(op '%s'): fn is NULL", op->name);
    return add_candidate(op, name, NULL, NULL, fn, user, "kt_op_add_native_queued");
}

kt_status kt_op_add_native_result(kt_op *op, const char *name, kt_result_fn fn, void *user) {
    if (op && fn == NULL) return kt__err(KT_ERR_NULL, "kt_op_add_native_result(op '%s'): fn is NULL", op->name);
    return add_candidate(op, name, NULL, fn, NULL, user, "kt_op_add_native_result");
}

kt_status kt_op_add_variants(kt_op *op, const char *name, kt_space *space, const char *source, const char *kernel_name,
                             const char *const *options, size_t noptions) {
    const char *where = "kt_op_add_variants";
    KT__CHECK_OP(op, where);
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
    kt_status st = add_candidate(op, name, NULL, NULL, NULL, NULL, where);
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
        kt__cand_free(c);
        op->ncands--;
        return kt__err(KT_ERR_NO_MEMORY, "%s: out of memory", where);
    }
    kt__space_retain(space);
    c->space = space;
    return KT_OK;
}

/* The candidate a setter taking a function names: the op is still being built, fn is set. */
static kt_status fn_target(kt_op *op, const char *name, const void *fn, const char *where, kt__cand **out) {
    KT__CHECK_OP(op, where);
    if (fn == NULL) return kt__err(KT_ERR_NULL, "%s(op '%s'): fn is NULL", where, op->name);
    kt_status st = kt__op_building(op, where);
    size_t idx = 0;
    if (st == KT_OK) st = kt__op_find_cand(op, name, where, &idx);
    if (st == KT_OK) *out = &op->cands[idx];
    return st;
}

kt_status kt_op_add_launch_param(kt_op *op, const char *name, size_t bytes, kt_launch_param_fn fn, void *user) {
    const char *where = "kt_op_add_launch_param";
    kt__cand *c = NULL;
    kt_status st = fn_target(op, name, (const void *)(uintptr_t)fn, where, &c);
    if (st != KT_OK) return st;
    if (c->space == NULL)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "%s(op '%s'): '%s' is a native candidate; launch parameters are for variant groups",
                       where, op->name, name);
    if (bytes < 1 || bytes > 1024)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "%s(op '%s'): candidate '%s': %zu bytes; a launch parameter has 1 to 1024", where,
                       op->name, name, bytes);
    if (c->nlparams >= KT__LPARAMS_MAX)
        return kt__err(KT_ERR_LIMIT, "%s(op '%s'): candidate '%s' has %d launch parameters already, the most it may", where,
                       op->name, name, KT__LPARAMS_MAX);
    size_t offset = 0;
    if (c->nlparams > 0) {
        const kt__lparam *last = &c->lparams[c->nlparams - 1];
        offset = (last->offset + last->bytes + 63) / 64 * 64;
    }
    if (offset + bytes > KT__LPARAM_BYTES_MAX)
        return kt__err(KT_ERR_LIMIT, "%s(op '%s'): candidate '%s': launch parameters of more than %d bytes in all", where, op->name,
                       name, KT__LPARAM_BYTES_MAX);
    if (op->nargs > KT__LPARAM_ARGS_MAX)
        return kt__err(KT_ERR_LIMIT, "%s(op '%s'): an op with launch parameters has at most %d arguments (this one has %zu)", where,
                       op->name, KT__LPARAM_ARGS_MAX, op->nargs);
    c->lparams[c->nlparams++] = (kt__lparam){.bytes = bytes, .offset = offset, .fn = fn, .user = user};
    return KT_OK;
}

static bool is_identifier(const char *s) {
    if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z'))) return false;
    for (; *s; s++)
        if (!(*s == '_' || (*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z'))) return false;
    return true;
}

kt_status kt_op_set_kernel_tuner_contract(kt_op *op, const char *name, const char *const block_size_names[3]) {
    const char *where = "kt_op_set_kernel_tuner_contract";
    KT__CHECK_OP(op, where);
    kt_status st = kt__op_building(op, where);
    size_t idx = 0;
    if (st == KT_OK) st = kt__op_find_cand(op, name, where, &idx);
    if (st != KT_OK) return st;
    kt__cand *c = &op->cands[idx];
    if (c->space == NULL)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "%s(op '%s'): '%s' is a native candidate; the compile contract is for variant groups",
                       where, op->name, name);
    static const char *const defaults[3] = {"block_size_x", "block_size_y", "block_size_z"};
    const char *names[3];
    for (int d = 0; d < 3; d++) {
        names[d] = block_size_names && block_size_names[d] ? block_size_names[d] : defaults[d];
        const char *n = names[d];
        if (strlen(n) > KT__NAME_MAX || !is_identifier(n))
            return kt__err(KT_ERR_INVALID_ARGUMENT, "%s(op '%s'): candidate '%s': block size name %d '%.*s' is not an identifier (of at most %d characters)",
                           where, op->name, name, d, 200, n, KT__NAME_MAX);
        if (strcmp(n, "grid_size_x") == 0 || strcmp(n, "grid_size_y") == 0 || strcmp(n, "grid_size_z") == 0 ||
            strcmp(n, "kernel_tuner") == 0)
            return kt__err(KT_ERR_INVALID_ARGUMENT, "%s(op '%s'): candidate '%s': block size name %d '%s' is a name the contract defines itself",
                           where, op->name, name, d, n);
        for (int e = 0; e < d; e++)
            if (strcmp(names[e], n) == 0)
                return kt__err(KT_ERR_INVALID_ARGUMENT, "%s(op '%s'): candidate '%s': block size names %d and %d are both '%s'", where,
                               op->name, name, e, d, n);
    }
    for (int d = 0; d < 3; d++) snprintf(c->kt_block_names[d], sizeof c->kt_block_names[d], "%s", names[d]);
    c->kt_contract = true;
    return KT_OK;
}

/* Looks up a candidate for a requirement and checks the argument index and building state. */
static kt_status req_target(kt_op *op, const char *name, size_t arg, const char *where, kt__cand **out) {
    KT__CHECK_OP(op, where);
    kt_status st = kt__op_building(op, where);
    size_t idx = 0;
    if (st == KT_OK) st = kt__op_find_cand(op, name, where, &idx);
    if (st == KT_OK) st = kt__op_check_arg(op, arg, where);
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
    if (!kt__is_pow2(align))
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
    kt__cand *c = NULL;
    kt_status st = fn_target(op, name, (const void *)(uintptr_t)fn, "kt_op_require_fn", &c);
    if (st != KT_OK) return st;
    c->accept = fn;
    c->accept_user = user;
    return KT_OK;
}

/* Shared body of the setters that name one candidate (NULL clears when allowed). */
static kt_status set_named(kt_op *op, const char *name, bool null_clears, const char *where, long *slot) {
    KT__CHECK_OP(op, where);
    kt_status st = kt__op_building(op, where);
    if (st != KT_OK) return st;
    if (name == NULL && null_clears) {
        *slot = -1;
        return KT_OK;
    }
    size_t idx = 0;
    if ((st = kt__op_find_cand(op, name, where, &idx)) != KT_OK) return st;
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

kt_status kt_op_set_reference(kt_op *op, const char *name) {
    return set_named(op, name, false, "kt_op_set_reference", op ? &op->reference_idx : NULL);
}

kt_status kt_op_set_candidate_version(kt_op *op, const char *name, const char *version) {
    const char *where = "kt_op_set_candidate_version";
    KT__CHECK_OP(op, where);
    kt_status st = kt__op_building(op, where);
    size_t idx = 0;
    if (st == KT_OK) st = kt__op_find_cand(op, name, where, &idx);
    if (st != KT_OK) return st;
    if (version != NULL && version[0] == '\0')
        return kt__err(KT_ERR_INVALID_ARGUMENT, "%s(op '%s'): candidate '%s': the version is empty; pass NULL to clear it",
                       where, op->name, name);
    char *copy = NULL;
    if (version != NULL && (copy = strdup(version)) == NULL) return kt__err(KT_ERR_NO_MEMORY, "%s: out of memory", where);
    free(op->cands[idx].version);
    op->cands[idx].version = copy;
    return KT_OK;
}
