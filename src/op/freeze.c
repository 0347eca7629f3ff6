/*
 * freeze.c - freezing an op on its first call: resolving what a miss does (effort, a forced
 * candidate), binding space inputs to arguments, adding the automatic key components, assigning
 * validity mask bits and computing the candidate set's identity.
 */
#include "backends/backends.h"
#include "op/building.h"
#include "space/space.h"

#include <string.h>

/* Resolves what the op will do on a miss. Precedence: KERNTUNE_FORCE for this op, then
 * KERNTUNE_MODE, then the op's own level, then the context's. */
static kt_status resolve_effort(kt_op *op, const char *where) {
    const kt_context *ctx = op->ctx;
    const char *forced = kt__context_forced(ctx, op->name);
    if (forced != NULL) {
        size_t idx = 0;
        if (kt__op_find_cand(op, forced, where, &idx) != KT_OK)
            return kt__err(KT_ERR_UNKNOWN_CANDIDATE, "%s(op '%s'): KERNTUNE_FORCE names candidate '%s', which the op does not have",
                           where, op->name, forced);
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
 *     (more than KT__CALL_SLOTS_MAX slots) keys such an argument exactly instead, and so does a
 *     group under Kernel Tuner's compile contract, whose grid is compiled in (grid_size_x...). */
static kt_status key_fixed_inputs(kt_op *op, const char *where) {
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
            /* under Kernel Tuner's contract the grid is compiled in (grid_size_x...): code, not a launch size */
            bool exact = (fixed & bit) != 0 || (dims != 0 && (big || c->kt_contract));
            if (!exact) {
                c->call_dims |= dims;
                continue;
            }
            if (keyed_exactly(op, (size_t)a)) continue;
            if (op->nkeys >= KT__KEY_USER_MAX + KT__KEY_AUTO_MAX)
                return kt__err(KT_ERR_LIMIT, "%s(op '%s'): too many arguments reach the variants' code: at most %d key components in all",
                               where, op->name, KT__KEY_USER_MAX + KT__KEY_AUTO_MAX);
            op->keys[op->nkeys++] = (kt__keycomp){.kind = KT__KEY_ARG, .arg = (size_t)a, .bucket = KT_BUCKET_EXACT, .automatic = true};
            kt__log(op->ctx, KT_LOG_INFO,
                    "op '%s': argument '%s' reaches the %s of candidate '%s' (space input '%s'): it is keyed exactly", op->name,
                    op->args[a].name, (fixed & bit)     ? "compiled code, constraints or launch limits"
                    : c->kt_contract ? "grid (compiled in as grid_size_* by Kernel Tuner's contract)"
                                     : "launch size (a space too large to size per call)", c->name,
                    kt__space_input_name(c->space, k));
        }
    }
    return KT_OK;
}

/* Native device candidates need a device whose backend runs them (kt__backend_queued). */
static kt_status check_queued(const kt_op *op, const char *where) {
    size_t i = 0;
    while (i < op->ncands && op->cands[i].qfn == NULL) i++;
    if (i == op->ncands) return KT_OK;
    const kt_backend *b;
    void *bstate;
    size_t local;
    kt__op_backend(op, &b, &bstate, &local, NULL);
    if (kt__backend_queued(b)) return KT_OK;
    return kt__err(KT_ERR_STATE,
                   "%s(op '%s'): candidate '%s' enqueues on a device queue (kt_op_add_native_queued), but the op's device "
                   "(backend '%s') has no queues to time it on: choose a device of a backend with asynchronous launch and "
                   "backend ABI 8 (CUDA, OpenCL) with kt_op_set_device",
                   where, op->name, op->cands[i].name, b->name);
}

kt_status kt__op_freeze(kt_op *op, const char *where) {
    pthread_mutex_lock(&op->lock);
    kt_status st = KT_OK;
    if (atomic_load_explicit(&op->frozen, memory_order_relaxed)) goto out;
    if (op->ncands == 0) {
        st = kt__err(KT_ERR_NO_CANDIDATES, "%s(op '%s'): the op has no candidates; add one with kt_op_add_native",
                     where, op->name);
        goto out;
    }
    size_t npred = 0;
    for (size_t i = 0; i < op->ncands; i++)
        if (op->cands[i].nreqs > 0 || op->cands[i].accept != NULL) npred++;
    if (npred > 64 * KT__MASK_WORDS_MAX) {
        st = kt__err(KT_ERR_LIMIT, "%s(op '%s'): %zu candidates have requirements; at most %d may", where, op->name, npred,
                     64 * KT__MASK_WORDS_MAX);
        goto out;
    }
    if ((st = resolve_effort(op, where)) != KT_OK) goto out;
    for (size_t i = 0; i < op->ncands; i++) { /* space inputs named like an argument take its value */
        kt__cand *c = &op->cands[i];
        for (size_t k = 0; c->space && k < kt__space_input_count(c->space); k++) {
            c->input_arg[k] = -1;
            for (size_t a = 0; a < op->nargs; a++)
                if (strcmp(op->args[a].name, kt__space_input_name(c->space, k)) == 0) c->input_arg[k] = (long)a;
        }
    }
    if ((st = key_fixed_inputs(op, where)) != KT_OK) goto out;
    if ((st = check_queued(op, where)) != KT_OK) goto out;
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
