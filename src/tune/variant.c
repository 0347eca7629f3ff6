/*
 * variant.c - units: the things a decision considers (native candidates, and one unit per
 * configuration of a variant group), planned from the group's space for the call's arguments,
 * built in parallel into artifacts and loaded. How a unit launches is op/launch.c's.
 */
#include "backends/backends.h"
#include "compile/compile.h"
#include "op/launch.h"
#include "space/space.h"
#include "tune/stages.h"
#include "tune/tune.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kt__unit_native(const kt_op *op, size_t i, kt__unit *u) {
    const kt__cand *c = &op->cands[i];
    *u = (kt__unit){.cand = i, .fn = c->fn, .rfn = c->rfn, .user = c->user, .r = {.time_ns = -1}};
    if (c->qfn == NULL) return;
    u->launch = (kt__launch){.async = true, .qfn = c->qfn, .quser = c->user, .op = op, .cand = c};
    kt__op_backend(op, &u->launch.backend, &u->launch.bstate, &u->launch.device, NULL);
    u->fn = kt__queued_fn;
    u->user = &u->launch;
}

void kt__unit_message(kt__cand_result *r, const char *fmt, const char *detail, int code) {
    int n = snprintf(NULL, 0, fmt, detail ? detail : "", code);
    char *msg = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (msg) snprintf(msg, (size_t)n + 1, fmt, detail ? detail : "", code);
    free(r->message);
    r->message = msg; /* NULL when out of memory: no diagnostic, nothing worse */
}

/* ---- units: natives and the configurations of variant groups -------------------------------- */

/* The inputs of a variant group's space for a call: op arguments where they bind one (a
 * scalar's value, a buffer's element count), the space's bound values otherwise. */
static kt_status group_inputs(const kt_op *op, const kt__cand *c, const kt_arg *args, kt__value *inputs, const char *where) {
    for (size_t i = 0; i < kt__space_input_count(c->space); i++) {
        long a = c->input_arg[i];
        if (a < 0) {
            if (!kt__space_input_value(c->space, i, &inputs[i]))
                return kt__err(KT_ERR_STATE, "%s(op '%s'): candidate '%s': space input '%s' is neither an argument of the op nor bound",
                               where, op->name, c->name, kt__space_input_name(c->space, i));
            continue;
        }
        inputs[i] = kt__arg_input(&op->args[a], &args[a]);
    }
    return KT_OK;
}

/* Compiles the global sizes that a call of unit launch l computes (candidate c's call_dims)
 * from its planned slots: l->sizes, left NULL where the interpreter must compute them (a size
 * outside the compiled subset, or one that reads a float argument). */
static kt_status compile_sizes(const kt_op *op, const kt__cand *c, kt__launch *l, const char *where) {
    const kt_space *sp = c->space;
    int var[KT__CALL_SLOTS_MAX]; /* call_dims is set only for spaces of at most this many slots */
    kt__call_sizes cs = {.ninputs = 0};
    for (size_t s = 0; s < kt__space_slot_count(sp); s++) var[s] = -1;
    for (size_t i = 0; i < kt__space_input_count(sp); i++) {
        long a = c->input_arg[i];
        if (a < 0) continue; /* a bound value: fixed in the slots */
        const kt__argdecl *d = &op->args[a];
        size_t slot = kt__space_input_slot(sp, i);
        bool buffer = d->type == KT_TYPE_BUFFER;
        if (buffer ? (d->esize & (d->esize - 1)) != 0 : d->type == KT_TYPE_F32 || d->type == KT_TYPE_F64) {
            var[slot] = -2; /* no integer, or a count that needs a division */
            continue;
        }
        if (cs.ninputs == KT__CALL_INPUTS_MAX) return KT_OK;
        cs.arg[cs.ninputs] = (uint32_t)a;
        cs.shift[cs.ninputs] = (int8_t)(buffer ? __builtin_ctzll(d->esize) : -1);
        var[slot] = (int)cs.ninputs++;
    }
    for (int d = 0; d < 3; d++)
        if ((c->call_dims & (1u << d)) && !kt__space_global_compile(sp, d, l->slots, var, &cs.prog[d])) return KT_OK;
    if ((l->sizes = malloc(sizeof *l->sizes)) == NULL) return kt__err(KT_ERR_NO_MEMORY, "%s(op '%s'): out of memory", where, op->name);
    *l->sizes = cs;
    return KT_OK;
}

/* Everything one variant unit needs before it is built. */
typedef struct unit_plan {
    char *defines_buf;   /* NAME=VALUE\x1f... */
    const char **defines;
    size_t ndefines;
    char *contract_buf;  /* Kernel Tuner's contract: the defines it adds (NULL without) */
} unit_plan;

/* Splits text at \x1f into strings (in place). */
static size_t split_defines(char *text, const char **out, size_t max) {
    size_t n = 0;
    if (*text == '\0') return 0;
    for (char *p = text; p && n < max;) {
        out[n++] = p;
        p = strchr(p, '\x1f');
        if (p) *p++ = '\0';
    }
    return n;
}

/* The name of define d ("NAME=VALUE" or "NAME") is name. */
static bool define_named(const char *d, const char *name) {
    size_t n = strlen(name);
    return strncmp(d, name, n) == 0 && (d[n] == '=' || d[n] == '\0');
}

/* Kernel Tuner's compile contract (kt_op_set_kernel_tuner_contract): replaces the plan's
 * defines (the space's, in its order) with Kernel Tuner's: grid_size_x/y/z (the grid in blocks),
 * the block size names (the local size), the space's defines, kernel_tuner=1. A space define of
 * one of those names gives it its value in that place (as Kernel Tuner's dictionary does), once. */
static kt_status contract_defines(const char *where, const kt_op *op, const kt__cand *c, const kt_launch_geometry *g, unit_plan *plan) {
    static const char *const grid_names[3] = {"grid_size_x", "grid_size_y", "grid_size_z"};
    const char *names[7];
    int64_t values[7];
    for (int d = 0; d < 3; d++) {
        int64_t local = g->local[d] > 0 ? g->local[d] : 1;
        names[d] = grid_names[d];
        values[d] = g->kind == KT_GEOMETRY_GLOBAL ? (g->global[d] + local - 1) / local : g->global[d];
        names[3 + d] = c->kt_block_names[d];
        values[3 + d] = local;
    }
    names[6] = "kernel_tuner";
    values[6] = 1;
    size_t n = plan->ndefines, total = 7 + n, len = 0;
    const char *fixed[7];
    size_t at[7];                          /* where each made define starts in text */
    char text[7 * (KT__NAME_MAX + 24)];    /* NAME=VALUE\0 of those the space does not give */
    for (int k = 0; k < 7; k++) {
        fixed[k] = NULL;
        for (size_t i = 0; i < n && fixed[k] == NULL; i++)
            if (define_named(plan->defines[i], names[k])) fixed[k] = plan->defines[i];
        if (fixed[k] == NULL) { /* without snprintf: this runs once per unit of the space */
            size_t nl = strnlen(names[k], KT__NAME_MAX);
            at[k] = len;
            memcpy(text + len, names[k], nl);
            text[len + nl] = '=';
            len += nl + 1 + (size_t)kt__int_text(values[k], text + len + nl + 1) + 1;
        }
    }
    const char **defs = calloc(total, sizeof *defs);
    char *buf = malloc(len ? len : 1); /* as long as it needs: a space of millions keeps one per unit */
    if (defs == NULL || buf == NULL) {
        free(defs), free(buf);
        return kt__err(KT_ERR_NO_MEMORY, "%s(op '%s'): out of memory", where, op->name);
    }
    memcpy(buf, text, len);
    for (int k = 0; k < 7; k++)
        if (fixed[k] == NULL) fixed[k] = buf + at[k];
    size_t m = 0;
    for (int k = 0; k < 6; k++) defs[m++] = fixed[k];
    for (size_t i = 0; i < n; i++) {
        bool taken = false;
        for (int k = 0; k < 7 && !taken; k++) taken = fixed[k] == plan->defines[i];
        if (!taken) defs[m++] = plan->defines[i];
    }
    defs[m++] = fixed[6];
    free(plan->defines);
    plan->defines = defs;
    plan->ndefines = m;
    plan->contract_buf = buf;
    return KT_OK;
}

/* Fills unit u of variant group c (configuration idx of cfgs) and its plan: configuration text,
 * defines, geometry; rejects it when the geometry breaks the device's limits. */
static kt_status plan_unit(const char *where, const kt_op *op, const kt__cand *c, const kt__configs *cfgs, size_t idx, const kt__value *inputs,
                           const kt_device_limits *lim, kt__unit *u, unit_plan *plan) {
    size_t nslots = kt__space_slot_count(c->space);
    kt__value *slots = calloc(nslots ? nslots : 1, sizeof *slots);
    kt__arena arena = {0};
    kt_status st = slots ? kt__space_slots(c->space, cfgs, idx, inputs, slots, &arena)
                         : kt__err(KT_ERR_NO_MEMORY, "%s(op '%s'): out of memory", where, op->name);
    size_t len = st == KT_OK ? kt__space_format_len(c->space, slots, "", "\x1f") : 0; /* "," is as long */
    if (st == KT_OK && ((u->text = malloc(len)) == NULL || (plan->defines_buf = malloc(len)) == NULL))
        st = kt__err(KT_ERR_NO_MEMORY, "%s(op '%s'): out of memory", where, op->name);
    if (st == KT_OK) st = kt__space_format_slots(c->space, slots, "", ",", u->text, len);
    if (st == KT_OK) st = kt__space_format_slots(c->space, slots, "", "\x1f", plan->defines_buf, len);
    if (st == KT_OK) {
        plan->defines = calloc(kt__space_param_count_all(c->space) + 1, sizeof *plan->defines);
        if (!plan->defines) st = kt__err(KT_ERR_NO_MEMORY, "%s(op '%s'): out of memory", where, op->name);
        else plan->ndefines = split_defines(plan->defines_buf, plan->defines, kt__space_param_count_all(c->space) + 1);
    }
    if (st == KT_OK) st = kt__space_geometry(c->space, slots, &arena, &u->launch.geometry);
    if (st == KT_OK && c->kt_contract) st = contract_defines(where, op, c, &u->launch.geometry, plan);
    u->launch.op = op; /* a launch names them in its messages */
    u->launch.cand = c;
    u->launch.call_dims = c->call_dims;
    u->launch.lparams = c->nlparams > 0;
    if (st == KT_OK && c->call_dims != 0) { /* each call computes its global sizes from these */
        u->launch.slots = calloc(nslots ? nslots : 1, sizeof *u->launch.slots);
        if (u->launch.slots == NULL) st = kt__err(KT_ERR_NO_MEMORY, "%s(op '%s'): out of memory", where, op->name);
        for (size_t i = 0; st == KT_OK && i < nslots; i++)
            if (!kt__value_copy(&slots[i], &u->launch.slots_arena, &u->launch.slots[i]))
                st = kt__err(KT_ERR_NO_MEMORY, "%s(op '%s'): out of memory", where, op->name);
        if (st == KT_OK) st = compile_sizes(op, c, &u->launch, where);
    }
    if (st == KT_OK && lim != NULL) {
        const kt_launch_geometry *g = &u->launch.geometry;
        int64_t threads = g->local[0] * g->local[1] * g->local[2];
        char why[256] = "";
        if (lim->max_threads_per_block > 0 && threads > lim->max_threads_per_block)
            snprintf(why, sizeof why, "needs %lld threads per block; the device allows %lld", (long long)threads,
                     (long long)lim->max_threads_per_block);
        for (int dd = 0; dd < 3 && !why[0]; dd++)
            if (lim->max_block[dd] > 0 && g->local[dd] > lim->max_block[dd])
                snprintf(why, sizeof why, "block dimension %d is %lld; the device allows %lld", dd, (long long)g->local[dd],
                         (long long)lim->max_block[dd]);
        if (!why[0] && lim->max_shared_memory > 0 && g->shared_memory > lim->max_shared_memory)
            snprintf(why, sizeof why, "needs %lld bytes of shared memory; the device allows %lld",
                     (long long)g->shared_memory, (long long)lim->max_shared_memory);
        if (why[0]) {
            u->r.outcome = KT_OUTCOME_REJECTED;
            kt__unit_message(&u->r, "%s", why, 0);
        }
    }
    kt__arena_free(&arena);
    free(slots);
    return st;
}

struct kt__plans {
    unit_plan *p; /* per unit; a built (or never to be built) unit's is empty */
    size_t n;
};

static void free_plan(unit_plan *p) {
    free(p->defines_buf);
    free(p->defines);
    free(p->contract_buf);
    *p = (unit_plan){0};
}

void kt__plans_free(kt__plans *pl) {
    if (pl == NULL) return;
    for (size_t i = 0; i < pl->n; i++) free_plan(&pl->p[i]);
    free(pl->p);
    free(pl);
}

bool kt__unit_planned(const kt__plans *pl, size_t i) { return pl != NULL && i < pl->n && pl->p[i].defines_buf != NULL; }

bool kt__plan_defines(const kt__plans *pl, size_t i, const char *const **defines, size_t *n) {
    if (!kt__unit_planned(pl, i)) return false;
    *defines = pl->p[i].defines;
    *n = pl->p[i].ndefines;
    return true;
}

void kt__plan_done(kt__plans *pl, size_t i) {
    if (pl != NULL && i < pl->n) free_plan(&pl->p[i]);
}

kt_status kt__build_some(kt_op *op, kt_decision *d, kt__plans *pl, const size_t *units, size_t n, double deadline) {
    bool any = false;
    for (size_t j = 0; j < n; j++) any = any || kt__unit_planned(pl, units[j]);
    if (!any) return KT_OK;
    size_t distinct = 0, threads = kt_context_compile_threads(op->ctx);
    for (size_t j = 0; j < n; j++) distinct += kt__unit_planned(pl, units[j]);
    if (threads > distinct) threads = distinct; /* no more threads than builds */
    kt__builder *bl = NULL;
    kt_status st = kt__builder_start(op, d, pl, threads, deadline > 0, false, &bl);
    if (st == KT_OK) st = kt__builder_submit(bl, units, n);
    size_t *taken = st == KT_OK ? malloc(n * sizeof *taken) : NULL;
    if (st == KT_OK && taken == NULL) st = kt__err(KT_ERR_NO_MEMORY, "%s(op '%s'): out of memory", d->where, op->name);
    while (st == KT_OK && kt__builder_take(bl, taken, n, true, false, deadline, &st) > 0) {}
    free(taken);
    kt__builder_stop(bl, deadline > 0); /* past the deadline: what still builds is left */
    for (size_t j = 0; j < n; j++) free_plan(&pl->p[units[j]]); /* built, or failed: never again */
    return st;
}

/* Makes the decision's units: all candidates (only < 0) or only candidate `only`'s
 * configuration only_text (NULL: its first); natives are runnable at once, variant units are
 * planned and built (or, with lazy, planned only: *lazy receives their plans, for
 * kt__build_some). A full set first learns from the persistent cache what it recorded of each
 * unit (kt__persist_units): recorded failures are not built again. */
kt_status kt__make_units(kt_op *op, kt_decision *d, const kt_arg *args, long only, const char *only_text, kt__configs *keep,
                         kt__plans **lazy) {
    size_t total = 0;
    kt__configs *cfgs = calloc(op->ncands, sizeof *cfgs);
    kt__value **inputs = calloc(op->ncands, sizeof *inputs);
    kt_status st = (cfgs && inputs) ? KT_OK : kt__err(KT_ERR_NO_MEMORY, "%s(op '%s'): out of memory", d->where, op->name);
    for (size_t i = 0; st == KT_OK && i < op->ncands; i++) {
        const kt__cand *c = &op->cands[i];
        if (only >= 0 && (long)i != only) continue;
        if (c->space == NULL || !kt__key_accepts(op, d->key, i)) {
            total++;
            continue;
        }
        size_t ni = kt__space_input_count(c->space);
        inputs[i] = calloc(ni ? ni : 1, sizeof **inputs);
        if (inputs[i] == NULL) st = kt__err(KT_ERR_NO_MEMORY, "%s(op '%s'): out of memory", d->where, op->name);
        if (st == KT_OK) st = group_inputs(op, c, args, inputs[i], d->where);
        if (st == KT_OK) st = kt__space_enum(c->space, inputs[i], &cfgs[i]);
        if (st == KT_OK && only >= 0 && only_text == NULL && cfgs[i].n > 1) cfgs[i].n = 1;
        total += cfgs[i].n ? cfgs[i].n : 1; /* an empty space still gets a unit, to say so */
    }
    unit_plan *plans = NULL;
    if (st == KT_OK) {
        d->units = calloc(total ? total : 1, sizeof *d->units);
        plans = calloc(total ? total : 1, sizeof *plans);
        if (!d->units || !plans) st = kt__err(KT_ERR_NO_MEMORY, "%s(op '%s'): out of memory", d->where, op->name);
    }
    kt_device_limits lim = {0};
    bool have_lim = false;
    if (st == KT_OK) {
        const kt_backend *b;
        void *bstate;
        size_t local;
        const char *fp;
        kt__op_backend(op, &b, &bstate, &local, &fp);
        char err[256];
        have_lim = kt__backend_has(b, KT__BACKEND_LIMITS) && b->limits(bstate, local, &lim, err, sizeof err) == KT_OK;
    }
    for (size_t i = 0; st == KT_OK && i < op->ncands; i++) {
        const kt__cand *c = &op->cands[i];
        if (only >= 0 && (long)i != only) continue;
        bool accepted = kt__key_accepts(op, d->key, i);
        if (c->space == NULL || !accepted) {
            kt__unit *u = &d->units[d->nunits++];
            kt__unit_native(op, i, u);
            if (!accepted) u->r.outcome = KT_OUTCOME_REJECTED;
            continue;
        }
        if (cfgs[i].n == 0) {
            kt__unit *u = &d->units[d->nunits++];
            *u = (kt__unit){.cand = i, .r = {.outcome = KT_OUTCOME_REJECTED, .time_ns = -1}};
            kt__unit_message(&u->r, "%sits space has no valid configuration for these arguments", NULL, 0);
            continue;
        }
        for (size_t k = 0; st == KT_OK && k < cfgs[i].n; k++) {
            size_t ui = d->nunits++;
            kt__unit *u = &d->units[ui];
            *u = (kt__unit){.cand = i, .r = {.time_ns = -1}};
            st = plan_unit(d->where, op, c, &cfgs[i], k, inputs[i], have_lim ? &lim : NULL, u, &plans[ui]);
            if (st == KT_OK && only_text != NULL && strcmp(u->text, only_text) != 0) { /* not the one asked for */
                kt__launch_free_slots(&u->launch);
                free(u->text);
                free(u->r.message);
                free_plan(&plans[ui]);
                d->nunits--;
            }
        }
    }
    if (st == KT_OK && only < 0) kt__persist_units(op, d);
    if (st == KT_OK && lazy) {
        for (size_t i = 0; i < d->nunits; i++) /* what will never be built holds no plan */
            if (d->units[i].r.outcome != KT_OUTCOME_NOT_RUN) free_plan(&plans[i]);
        if ((*lazy = malloc(sizeof **lazy)) == NULL) {
            st = kt__err(KT_ERR_NO_MEMORY, "%s(op '%s'): out of memory", d->where, op->name);
        } else {
            **lazy = (kt__plans){plans, d->nunits};
            plans = NULL;
        }
    } else if (st == KT_OK) { /* every planned unit, now */
        kt__plans all = {plans, d->nunits};
        size_t *every = malloc((d->nunits ? d->nunits : 1) * sizeof *every);
        if (every == NULL) st = kt__err(KT_ERR_NO_MEMORY, "%s(op '%s'): out of memory", d->where, op->name);
        for (size_t i = 0; every && i < d->nunits; i++) every[i] = i;
        if (every) st = kt__build_some(op, d, &all, every, d->nunits, 0);
        free(every);
    }
    for (size_t i = 0; plans && i < d->nunits; i++) free_plan(&plans[i]);
    free(plans);
    for (size_t i = 0; cfgs && inputs && i < op->ncands; i++) {
        if (keep && st == KT_OK) keep[i] = cfgs[i]; /* the caller's now */
        else kt__configs_free(&cfgs[i]);
        free(inputs[i]);
    }
    free(cfgs);
    free(inputs);
    return st;
}

bool kt__unit_runnable(const kt__unit *u) {
    return (u->fn != NULL || u->rfn != NULL) && u->r.outcome == KT_OUTCOME_NOT_RUN;
}

