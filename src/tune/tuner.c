/*
 * tuner.c - calling an op: the hit path, first-call tuning, and decisions.
 *
 * A call checks its arguments, computes the key and probes the op's table. A finished decision
 * is dispatched at once: that path allocates nothing, makes no system call and takes no lock.
 * On a miss the caller takes the op's lock, and either finds the key being decided by another
 * thread (then waits for it, or runs the fallback candidate) or inserts a new entry marked as
 * tuning and decides it without holding the lock, so other keys tune and dispatch meanwhile.
 *
 * Deciding by measurement works on a workset (args.c): the arguments every tuning run uses,
 * with the caller's ReadWrite buffers restored before each run (or clones, or generated inputs).
 * The reference runs first; each other candidate's first run is its validation run; then the
 * engine (bench.c) measures it. After the decision the caller's buffers are restored once more
 * and the winner runs once on them: the caller sees exactly one launch of the winner.
 */
#include "build/compile.h"
#include "backends/backends.h"
#include "isolate/isolate.h"
#include "space/space.h"
#include "tune/tune.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A space input's value from the argument that binds it: a scalar's value, a buffer's element
 * count. */
static kt__value input_of(const kt__argdecl *d, const kt_arg *a) {
    if (d->type == KT_TYPE_BUFFER) return (kt__value){.t = KT_V_INT, .i = (int64_t)(a->bytes / d->esize)};
    if (d->type == KT_TYPE_F32) return (kt__value){.t = KT_V_FLOAT, .f = a->f32};
    if (d->type == KT_TYPE_F64) return (kt__value){.t = KT_V_FLOAT, .f = a->f64};
    if (d->type >= KT_TYPE_U8 && d->type <= KT_TYPE_U64) return (kt__value){.t = KT_V_INT, .i = (int64_t)a->u};
    return (kt__value){.t = KT_V_INT, .i = a->i};
}

/* The global sizes a call computes from its own arguments (see key_fixed_inputs in op.c): the
 * planned slots with this call's inputs in place, on the stack; evaluating a size allocates
 * nothing unless its expression builds a list or a string. */
static kt_status call_sizes(const kt__launch *l, const kt_arg *args, kt_launch_geometry *g) {
    const kt__cand *c = l->cand;
    const kt_space *sp = c->space;
    size_t n = kt__space_slot_count(sp);
    kt__value slots[KT__CALL_SLOTS_MAX];
    memcpy(slots, l->slots, n * sizeof *slots);
    for (size_t i = 0; i < kt__space_input_count(sp); i++) {
        long a = c->input_arg[i];
        if (a >= 0) slots[kt__space_input_slot(sp, i)] = input_of(&l->op->args[a], &args[a]);
    }
    kt__arena arena = {0};
    kt_status st = KT_OK;
    for (int d = 0; d < 3 && st == KT_OK; d++)
        if (c->call_dims & (1u << d)) st = kt__space_global(sp, d, slots, &arena, &g->global[d]);
    kt__arena_free(&arena);
    return st;
}

int kt__launch_fn(const kt_arg *args, size_t nargs, void *user) {
    const kt__launch *l = user;
    char err[256];
    kt_launch_geometry g = l->geometry;
    if (l->slots != NULL && call_sizes(l, args, &g) != KT_OK) {
        kt__err(KT_ERR_INVALID_ARGUMENT, "kt_op_call(op '%s'): candidate '%s': the launch size for these arguments: %s",
                l->op->name, l->cand->name, kt_last_error());
        return KT__RC_REPORTED;
    }
    kt_status st = l->backend->launch(l->bstate, l->device, l->module, &g, args, nargs, NULL, err, sizeof err);
    if (st == KT_OK) return 0;
    kt__err(st, "kt_op_call(op '%s'): candidate '%s': %s", l->op->name, l->cand->name, err);
    return KT__RC_REPORTED;
}

/* Runs unit u on the caller's arguments as a dispatched call (result: NULL unless the op
 * returns one). */
static kt_status run_unit(const kt_op *op, const kt__unit *u, const kt_arg *args, size_t nargs, kt_result *result) {
    int rc = result ? u->rfn(args, nargs, u->user, result) : u->fn(args, nargs, u->user);
    if (rc == 0) return KT_OK;
    if (result) kt_result_release(result);
    if (kt__rc_reported(u->fn, rc)) return KT_ERR_CANDIDATE_FAILED; /* the detail message says how */
    return kt__err(KT_ERR_CANDIDATE_FAILED, "kt_op_call(op '%s'): candidate '%s'%s%s returned %d", op->name,
                   op->cands[u->cand].name, u->text ? " " : "", u->text ? u->text : "", rc);
}

/* Runs native candidate idx (the fallback) on the caller's arguments. */
static kt_status run_native(const kt_op *op, size_t idx, const kt_arg *args, size_t nargs, kt_result *result) {
    const kt__cand *c = &op->cands[idx];
    kt__unit u = {.cand = idx, .fn = c->fn, .rfn = c->rfn, .user = c->user};
    return run_unit(op, &u, args, nargs, result);
}

/* The candidate used without measuring: the declared default when it accepts the arguments,
 * else the first one in declaration order that does; -1 when none does. */
static long default_candidate(const kt_op *op, const int64_t *key) {
    if (op->default_idx >= 0 && kt__key_accepts(op, key, (size_t)op->default_idx)) return op->default_idx;
    for (size_t i = 0; i < op->ncands; i++)
        if (kt__key_accepts(op, key, i)) return (long)i;
    return -1;
}

/* Sets a unit's diagnostic from fmt, which takes detail (a %s) and code (a %d), whole. */
static void set_message(kt__cand_result *r, const char *fmt, const char *detail, int code) {
    int n = snprintf(NULL, 0, fmt, detail ? detail : "", code);
    char *msg = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (msg) snprintf(msg, (size_t)n + 1, fmt, detail ? detail : "", code);
    free(r->message);
    r->message = msg; /* NULL when out of memory: no diagnostic, nothing worse */
}

/* ---- units: natives and the configurations of variant groups -------------------------------- */

/* The inputs of a variant group's space for a call: op arguments where they bind one (a
 * scalar's value, a buffer's element count), the space's bound values otherwise. */
static kt_status group_inputs(const kt_op *op, const kt__cand *c, const kt_arg *args, kt__value *inputs) {
    for (size_t i = 0; i < kt__space_input_count(c->space); i++) {
        long a = c->input_arg[i];
        if (a < 0) {
            if (!kt__space_input_value(c->space, i, &inputs[i]))
                return kt__err(KT_ERR_STATE, "kt_op_call(op '%s'): candidate '%s': space input '%s' is neither an argument of the op nor bound",
                               op->name, c->name, kt__space_input_name(c->space, i));
            continue;
        }
        inputs[i] = input_of(&op->args[a], &args[a]);
    }
    return KT_OK;
}

/* Everything one variant unit needs before it is built. */
typedef struct unit_plan {
    char *defines_buf;   /* NAME=VALUE\x1f... */
    const char **defines;
    size_t ndefines;
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

/* Fills unit u of variant group c (configuration idx of cfgs) and its plan: configuration text,
 * defines, geometry; rejects it when the geometry breaks the device's limits. */
static kt_status plan_unit(const kt_op *op, const kt__cand *c, const kt__configs *cfgs, size_t idx, const kt__value *inputs,
                           const kt_device_limits *lim, kt__unit *u, unit_plan *plan) {
    size_t nslots = kt__space_slot_count(c->space);
    kt__value *slots = calloc(nslots ? nslots : 1, sizeof *slots);
    kt__arena arena = {0};
    kt_status st = slots ? kt__space_slots(c->space, cfgs, idx, inputs, slots, &arena)
                         : kt__err(KT_ERR_NO_MEMORY, "kt_op_call(op '%s'): out of memory", op->name);
    size_t len = st == KT_OK ? kt__space_format_len(c->space, slots, "", "\x1f") : 0; /* "," is as long */
    if (st == KT_OK && ((u->text = malloc(len)) == NULL || (plan->defines_buf = malloc(len)) == NULL))
        st = kt__err(KT_ERR_NO_MEMORY, "kt_op_call(op '%s'): out of memory", op->name);
    if (st == KT_OK) st = kt__space_format_slots(c->space, slots, "", ",", u->text, len);
    if (st == KT_OK) st = kt__space_format_slots(c->space, slots, "", "\x1f", plan->defines_buf, len);
    if (st == KT_OK) {
        plan->defines = calloc(kt__space_param_count_all(c->space) + 1, sizeof *plan->defines);
        if (!plan->defines) st = kt__err(KT_ERR_NO_MEMORY, "kt_op_call: out of memory");
        else plan->ndefines = split_defines(plan->defines_buf, plan->defines, kt__space_param_count_all(c->space) + 1);
    }
    if (st == KT_OK) st = kt__space_geometry(c->space, slots, &arena, &u->launch.geometry);
    u->launch.op = op; /* a launch names them in its messages */
    u->launch.cand = c;
    if (st == KT_OK && c->call_dims != 0) { /* each call computes its global sizes from these */
        u->launch.slots = calloc(nslots ? nslots : 1, sizeof *u->launch.slots);
        if (u->launch.slots == NULL) st = kt__err(KT_ERR_NO_MEMORY, "kt_op_call(op '%s'): out of memory", op->name);
        for (size_t i = 0; st == KT_OK && i < nslots; i++)
            if (!kt__value_copy(&slots[i], &u->launch.slots_arena, &u->launch.slots[i]))
                st = kt__err(KT_ERR_NO_MEMORY, "kt_op_call(op '%s'): out of memory", op->name);
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
            set_message(&u->r, "%s", why, 0);
        }
    }
    kt__arena_free(&arena);
    free(slots);
    return st;
}

/* Adopts loaded modules into the op's table (op->lock held): a key already loaded keeps the
 * first module, and a second load of it is unloaded. */
static void adopt_modules(kt_op *op, kt__build *builds, size_t n, const kt_backend *b) {
    for (size_t i = 0; i < n; i++) {
        kt__build *bd = &builds[i];
        if (bd->dup_of >= 0 || bd->status != KT_OK || bd->module == NULL) continue;
        size_t m = 0;
        while (m < op->nmodules && strcmp(op->modules[m].key, bd->key) != 0) m++;
        if (m < op->nmodules) {
            if (op->modules[m].module != bd->module) b->unload(bd->bstate, bd->device, bd->module);
            bd->module = op->modules[m].module;
            continue;
        }
        kt__module *mods = realloc(op->modules, (op->nmodules + 1) * sizeof *mods);
        if (mods == NULL) { /* keep it loaded anyway: leaking a module beats a dangling one */
            continue;
        }
        op->modules = mods;
        snprintf(op->modules[op->nmodules].key, sizeof op->modules[op->nmodules].key, "%s", bd->key);
        op->modules[op->nmodules++].module = bd->module;
    }
    for (size_t i = 0; i < n; i++)
        if (builds[i].dup_of >= 0) builds[i].module = builds[builds[i].dup_of].module;
}

/* Builds the variant units that are still to be built (those with a plan), in parallel, and
 * makes them runnable, or BUILD_FAILED with the first lines of their log. */
static kt_status build_units(kt_op *op, kt_decision *d, unit_plan *plans) {
    const kt_backend *b;
    void *bstate;
    size_t local;
    const char *fp;
    kt__op_backend(op, &b, &bstate, &local, &fp);
    size_t n = 0;
    for (size_t i = 0; i < d->nunits; i++) n += plans[i].defines_buf != NULL && d->units[i].r.outcome == KT_OUTCOME_NOT_RUN;
    if (n == 0) return KT_OK;
    if (b->abi_version < 3 || b->build == NULL || b->load == NULL || (b->entry == NULL && b->launch == NULL))
        return kt__err(KT_ERR_BACKEND, "kt_op_call(op '%s'): backend '%s' cannot build variants", op->name, b->name);
    bool constants = false;
    for (size_t a = 0; a < op->nargs; a++) constants = constants || op->args[a].constant;
    if (constants && b->abi_version < 5)
        return kt__err(KT_ERR_BACKEND, "kt_op_call(op '%s'): backend '%s' (ABI %d) cannot place arguments in constant memory (ABI 5)",
                       op->name, b->name, b->abi_version);
    size_t na = op->nargs ? op->nargs : 1;
    kt__build *builds = calloc(n, sizeof *builds);
    size_t *unit_of = calloc(n, sizeof *unit_of);
    kt_type *types = calloc(na, sizeof *types), *elems = calloc(na, sizeof *elems);
    const char **names = calloc(na, sizeof *names);
    unsigned char *constant = calloc(na, 1);
    if (!builds || !unit_of || !types || !elems || !names || !constant) {
        free(builds), free(unit_of), free(types), free(elems), free(names), free(constant);
        return kt__err(KT_ERR_NO_MEMORY, "kt_op_call(op '%s'): out of memory", op->name);
    }
    for (size_t a = 0; a < op->nargs; a++) {
        types[a] = op->args[a].type, elems[a] = op->args[a].elem;
        names[a] = op->args[a].name, constant[a] = op->args[a].constant;
    }
    size_t k = 0;
    for (size_t i = 0; i < d->nunits; i++) {
        if (plans[i].defines_buf == NULL || d->units[i].r.outcome != KT_OUTCOME_NOT_RUN) continue;
        const kt__cand *c = &op->cands[d->units[i].cand];
        builds[k] = (kt__build){.backend = b, .bstate = bstate, .device = local, .device_fp = fp,
                                .req = {.source = c->source, .kernel_name = c->kernel, .defines = plans[i].defines,
                                        .ndefines = plans[i].ndefines, .options = (const char *const *)c->options,
                                        .noptions = c->noptions, .arg_types = types, .arg_elems = elems, .nargs = op->nargs,
                                        .arg_names = names, .arg_constant = constant}};
        unit_of[k++] = i;
    }
    kt_status st = kt__build_prepare(&op->ctx->artifacts, builds, n);
    if (st != KT_OK) { /* no compiler, no artifact directory: the variants cannot run, the natives can */
        char *why = kt__error_save();
        for (size_t i = 0; i < n; i++) {
            kt__unit *u = &d->units[unit_of[i]];
            u->r.outcome = KT_OUTCOME_BUILD_FAILED;
            u->env_failed = true; /* not the unit's code: never recorded as its failure */
            set_message(&u->r, "%s", why ? why : "out of memory", 0);
        }
        kt__log(op->ctx, KT_LOG_WARN, "op '%s': no variant can be built: %s", op->name, why ? why : "out of memory");
        free(why);
        free(builds), free(unit_of), free(types), free(elems), free(names), free(constant);
        return KT_OK;
    }
    {
        pthread_mutex_lock(&op->lock); /* modules another tuning loaded already */
        for (size_t i = 0; i < n; i++)
            for (size_t m = 0; m < op->nmodules && builds[i].dup_of < 0; m++)
                if (strcmp(op->modules[m].key, builds[i].key) == 0) builds[i].module = op->modules[m].module;
        pthread_mutex_unlock(&op->lock);
        st = kt__build_run(&op->ctx->artifacts, builds, n);
    }
    if (st == KT_OK) {
        pthread_mutex_lock(&op->lock);
        adopt_modules(op, builds, n, b);
        pthread_mutex_unlock(&op->lock);
        for (size_t i = 0; i < n; i++) {
            kt__unit *u = &d->units[unit_of[i]];
            if (builds[i].status != KT_OK) {
                u->r.outcome = KT_OUTCOME_BUILD_FAILED;
                u->r.build_ms = builds[i].build_ms;
                char head[1024];
                snprintf(head, sizeof head, "%s", builds[i].log);
                for (int lines = 0, j = 0; head[j]; j++) /* keep the first lines */
                    if (head[j] == '\n' && ++lines == 8) head[j] = '\0';
                set_message(&u->r, "%s", head, 0);
                kt__log(op->ctx, KT_LOG_WARN, "op '%s': variant %s of '%s' failed to build: %s", op->name, u->text,
                        op->cands[u->cand].name, head);
                continue;
            }
            u->r.build_ms = builds[i].build_ms;
            u->artifact = strdup(builds[i].path);
            u->launch.backend = b;
            u->launch.bstate = bstate;
            u->launch.device = local;
            u->launch.module = builds[i].module;
            if (b->entry != NULL) {
                u->fn = b->entry(bstate, builds[i].module);
            } else {
                u->fn = kt__launch_fn;
                u->user = &u->launch;
            }
        }
    }
    free(builds);
    free(unit_of);
    free(types);
    free(elems);
    free(names);
    free(constant);
    return st;
}

/* Makes the decision's units: all candidates (only < 0) or only candidate `only`'s
 * configuration only_text (NULL: its first); natives are runnable at once, variant units are
 * planned and built. A full set first learns from the persistent cache what it recorded of
 * each unit (kt__persist_units): recorded failures are not built again. */
kt_status kt__make_units(kt_op *op, kt_decision *d, const kt_arg *args, long only, const char *only_text) {
    size_t total = 0;
    kt__configs *cfgs = calloc(op->ncands, sizeof *cfgs);
    kt__value **inputs = calloc(op->ncands, sizeof *inputs);
    kt_status st = (cfgs && inputs) ? KT_OK : kt__err(KT_ERR_NO_MEMORY, "kt_op_call(op '%s'): out of memory", op->name);
    for (size_t i = 0; st == KT_OK && i < op->ncands; i++) {
        const kt__cand *c = &op->cands[i];
        if (only >= 0 && (long)i != only) continue;
        if (c->space == NULL || !kt__key_accepts(op, d->key, i)) {
            total++;
            continue;
        }
        size_t ni = kt__space_input_count(c->space);
        inputs[i] = calloc(ni ? ni : 1, sizeof **inputs);
        if (inputs[i] == NULL) st = kt__err(KT_ERR_NO_MEMORY, "kt_op_call(op '%s'): out of memory", op->name);
        if (st == KT_OK) st = group_inputs(op, c, args, inputs[i]);
        if (st == KT_OK) st = kt__space_enum(c->space, inputs[i], &cfgs[i]);
        if (st == KT_OK && only >= 0 && only_text == NULL && cfgs[i].n > 1) cfgs[i].n = 1;
        total += cfgs[i].n ? cfgs[i].n : 1; /* an empty space still gets a unit, to say so */
    }
    unit_plan *plans = NULL;
    if (st == KT_OK) {
        d->units = calloc(total ? total : 1, sizeof *d->units);
        plans = calloc(total ? total : 1, sizeof *plans);
        if (!d->units || !plans) st = kt__err(KT_ERR_NO_MEMORY, "kt_op_call(op '%s'): out of memory", op->name);
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
        have_lim = b->abi_version >= 3 && b->limits && b->limits(bstate, local, &lim, err, sizeof err) == KT_OK;
    }
    for (size_t i = 0; st == KT_OK && i < op->ncands; i++) {
        const kt__cand *c = &op->cands[i];
        if (only >= 0 && (long)i != only) continue;
        bool accepted = kt__key_accepts(op, d->key, i);
        if (c->space == NULL || !accepted) {
            kt__unit *u = &d->units[d->nunits++];
            *u = (kt__unit){.cand = i, .fn = c->fn, .rfn = c->rfn, .user = c->user, .r = {.time_ns = -1}};
            if (!accepted) u->r.outcome = KT_OUTCOME_REJECTED;
            continue;
        }
        if (cfgs[i].n == 0) {
            kt__unit *u = &d->units[d->nunits++];
            *u = (kt__unit){.cand = i, .r = {.outcome = KT_OUTCOME_REJECTED, .time_ns = -1}};
            set_message(&u->r, "%sits space has no valid configuration for these arguments", NULL, 0);
            continue;
        }
        for (size_t k = 0; st == KT_OK && k < cfgs[i].n; k++) {
            size_t ui = d->nunits++;
            kt__unit *u = &d->units[ui];
            *u = (kt__unit){.cand = i, .r = {.time_ns = -1}};
            st = plan_unit(op, c, &cfgs[i], k, inputs[i], have_lim ? &lim : NULL, u, &plans[ui]);
            if (st == KT_OK && only_text != NULL && strcmp(u->text, only_text) != 0) { /* not the one asked for */
                kt__launch_free_slots(&u->launch);
                free(u->text);
                free(u->r.message);
                free(plans[ui].defines_buf);
                free(plans[ui].defines);
                plans[ui] = (unit_plan){0};
                d->nunits--;
            }
        }
    }
    if (st == KT_OK && only < 0) kt__persist_units(op, d);
    if (st == KT_OK) st = build_units(op, d, plans);
    for (size_t i = 0; plans && i < d->nunits; i++) {
        free(plans[i].defines_buf);
        free(plans[i].defines);
    }
    free(plans);
    for (size_t i = 0; cfgs && inputs && i < op->ncands; i++) {
        kt__configs_free(&cfgs[i]);
        free(inputs[i]);
    }
    free(cfgs);
    free(inputs);
    return st;
}

bool kt__unit_runnable(const kt__unit *u) {
    return (u->fn != NULL || u->rfn != NULL) && u->r.outcome == KT_OUTCOME_NOT_RUN;
}

/* ---- measuring one unit ---------------------------------------------------------------------- */

/* Where a unit's runs are flushed from the cache: its backend flushes a device's; the core
 * flushes the host's by writing a buffer as large as its last-level cache. */
enum { FLUSH_NONE, FLUSH_DEVICE, FLUSH_HOST };

typedef struct trial_ctx {
    const kt_op *op;
    kt__workset *ws;
    const kt__unit *unit;
    kt_result result;
    double device_ns;
    int flush;
    unsigned char *host_flush; /* the tuning's host flush buffer */
    size_t host_flush_len;
    kt__worker *worker;        /* isolated: the worker process that runs it, and its id there */
    size_t worker_id;
    kt__iso_run iso;           /* how its isolated run failed (iso.kind), or the isolation did (iso.infra) */
    bool full;                 /* this run's outputs are looked at (validation, the reference) */
} trial_ctx;

static int flush_kind(const kt_op *op, const kt__unit *u) {
    kt_flush mode = op->ctx->measure.flush;
    if (mode == KT_FLUSH_OFF) return FLUSH_NONE;
    if (u->fn == kt__launch_fn) {
        const kt_backend *b = u->launch.backend;
        return (b->abi_version >= 4 && b->flush != NULL) ? FLUSH_DEVICE : FLUSH_NONE;
    }
    return (u->text != NULL || mode == KT_FLUSH_ON) ? FLUSH_HOST : FLUSH_NONE;
}

/* The host's last-level cache size in bytes (8 MiB when the system does not say). */
static size_t host_llc_bytes(void) {
    long v = -1;
#ifdef _SC_LEVEL3_CACHE_SIZE
    v = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (v <= 0) v = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
    return v > 0 ? (size_t)v : (size_t)8 << 20;
}

static kt_status trial_flush(trial_ctx *t) {
    if (t->flush == FLUSH_DEVICE) {
        char err[256] = "";
        const kt__launch *l = &t->unit->launch;
        kt_status st = l->backend->flush(l->bstate, l->device, err, sizeof err);
        return st == KT_OK ? KT_OK : kt__err(st, "op '%s': flushing the device's cache: %s", t->op->name, err);
    }
    if (t->host_flush == NULL) return KT_OK;
    /* writing every line evicts what the candidate left; the counter keeps it from being elided */
    static _Atomic unsigned char round;
    memset(t->host_flush, atomic_fetch_add_explicit(&round, 1, memory_order_relaxed), t->host_flush_len);
    return KT_OK;
}

static kt_status trial_before(void *p, const kt_arg **args) {
    trial_ctx *t = p;
    kt_status st = kt__workset_before(t->ws, false, args);
    /* an isolated device variant is flushed by its worker, on the worker's context */
    if (st == KT_OK && t->flush != FLUSH_NONE && !(t->worker && t->flush == FLUSH_DEVICE)) st = trial_flush(t);
    return st;
}

static int trial_run(void *p, const kt_arg *args) {
    trial_ctx *t = p;
    const kt__unit *u = t->unit;
    t->device_ns = -1;
    if (t->worker) { /* in the worker process */
        kt__iso_run run;
        if (kt__worker_run(t->worker, t->worker_id, args, t->flush == FLUSH_DEVICE, t->full, t->op->timeout_s, &run)) {
            t->device_ns = run.ns;
            return 0;
        }
        t->iso = run; /* its kind and code go on the unit after the engine; infra: after() stops the tuning */
        return run.code != 0 ? run.code : -1;
    }
    if (u->fn == kt__launch_fn) { /* a device variant: timed by the device's events */
        char err[256];
        const kt__launch *l = &u->launch;
        kt_status st = l->backend->launch(l->bstate, l->device, l->module, &l->geometry, args, t->op->nargs, &t->device_ns,
                                          err, sizeof err);
        return st == KT_OK ? 0 : (int)st;
    }
    if (u->rfn) return u->rfn(args, t->op->nargs, u->user, &t->result);
    return u->fn(args, t->op->nargs, u->user);
}

static double trial_device_ns(void *p) { return ((trial_ctx *)p)->device_ns; }

static kt_status trial_after(void *p) {
    trial_ctx *t = p;
    kt_result_release(&t->result); /* outputs of tuning runs never reach the caller */
    kt_status st = kt__workset_after(t->ws);
    if (st == KT_OK && t->iso.infra) /* the isolation failed, not the candidate */
        st = kt__err(KT_ERR_BACKEND, "kt_op_call(op '%s'): %s", t->op->name, t->iso.msg);
    return st;
}

/* The validation run of a unit: poisoned outputs, then a comparison with the reference before
 * the post-hook. Sets the outcome to FAILED or INVALID when it does not pass. */
static kt_status validation_run(trial_ctx *t, const kt__reference *ref, kt__cand_result *r) {
    const kt_arg *args = NULL;
    kt_status st = kt__workset_before(t->ws, true, &args);
    if (st != KT_OK) return st;
    t->result = (kt_result){0};
    t->full = true;
    int rc = trial_run(t, args);
    t->full = false;
    char msg[KT__ERRBUF] = ""; /* a comparison's diagnostic: an element and two values */
    bool reported = kt__rc_reported(t->unit->fn, rc);
    char *why = reported ? kt__error_save() : NULL;
    bool valid = rc != 0 || kt__validate(ref, t->ws, args, &t->result, msg, sizeof msg);
    st = trial_after(t);
    if (reported) {
        r->outcome = KT_OUTCOME_FAILED;
        r->fail_code = rc;
        set_message(r, "%s", why ? why : "out of memory", 0);
    } else if (rc != 0) {
        r->outcome = KT_OUTCOME_FAILED;
        r->fail_code = rc;
        if (t->iso.kind != KT_FAIL_NONE) set_message(r, "%s", t->iso.msg, 0); /* in its worker: how it failed there */
        else set_message(r, "%sreturned %d in its validation run", NULL, rc);
    } else if (!valid) {
        r->outcome = KT_OUTCOME_INVALID;
        set_message(r, "%s", msg, 0);
    }
    free(why);
    return st;
}

/* Builds the ALL_FAILED message from the units' diagnostics. */
static kt_status all_failed(const kt_op *op, kt_decision *d) {
    /* the first three failures whole, then how many more: kt_op_decision gives them all */
    size_t shown = 0, more = 0;
    kt__err(KT_ERR_ALL_FAILED, "kt_op_call(op '%s'): every candidate that accepts the arguments failed:", op->name);
    for (size_t i = 0; i < d->nunits; i++) {
        const kt__unit *u = &d->units[i];
        const kt__cand_result *r = &u->r;
        if (!kt__outcome_failed(r->outcome)) continue;
        if (shown == 3) {
            more++;
            continue;
        }
        shown++;
        const char *name = op->cands[u->cand].name;
        if (r->message == NULL) kt__err(KT_ERR_ALL_FAILED, "%s '%s'%s%s returned %d;", kt_last_error(), name, u->text ? " " : "",
                                        u->text ? u->text : "", r->fail_code);
        else kt__err(KT_ERR_ALL_FAILED, "%s '%s'%s%s %s;", kt_last_error(), name, u->text ? " " : "", u->text ? u->text : "",
                     r->message);
    }
    if (more) kt__err(KT_ERR_ALL_FAILED, "%s and %zu more (kt_op_decision gives each unit's outcome and message)", kt_last_error(), more);
    d->fail_msg = kt__error_save();
    return KT_ERR_ALL_FAILED;
}

/* Which units may run while tuning: built, and accepting both the caller's arguments (the
 * key) and the work arguments they will actually run on (copies keep the caller's alignment,
 * and this makes sure of it, predicate functions included). Units that may not are marked
 * REJECTED here. */
static bool *accepting(const kt_op *op, kt_decision *d, const kt__workset *ws) {
    bool *acc = calloc(d->nunits ? d->nunits : 1, sizeof *acc);
    if (acc == NULL) return NULL;
    int64_t wkey[KT__KEY_WORDS_MAX];
    kt__key_compute(op, ws->args, wkey);
    for (size_t i = 0; i < d->nunits; i++) {
        kt__unit *u = &d->units[i];
        size_t c = u->cand;
        acc[i] = kt__unit_runnable(u) && kt__key_accepts(op, d->key, c) && kt__key_accepts(op, wkey, c);
        if (!acc[i] && u->r.outcome == KT_OUTCOME_NOT_RUN) {
            u->r.outcome = KT_OUTCOME_REJECTED;
            if (kt__key_accepts(op, d->key, c))
                set_message(&u->r, "%sits requirements reject the copies of the arguments that tuning runs on", NULL, 0);
        }
    }
    return acc;
}

/* What the engine needs of one tuning. */
typedef struct tuning {
    kt_op *op;
    kt_decision *d;
    kt__workset *ws;
    const kt__reference *ref;
    trial_ctx *trials; /* one per unit */
    unsigned char *host_flush; /* allocated when a unit first needs it */
    size_t host_flush_len;
} tuning;

static kt_status tuning_admit(void *p, size_t i, bool *usable, unsigned *runs) {
    tuning *tu = p;
    kt_op *op = tu->op;
    kt__unit *u = &tu->d->units[i];
    trial_ctx *t = &tu->trials[i];
    if (t->flush == FLUSH_HOST && tu->host_flush == NULL) {
        tu->host_flush_len = host_llc_bytes();
        tu->host_flush = malloc(tu->host_flush_len);
        if (tu->host_flush == NULL) return kt__err(KT_ERR_NO_MEMORY, "op '%s': out of memory for a cache flush buffer", op->name);
    }
    t->host_flush = t->flush == FLUSH_HOST ? tu->host_flush : NULL;
    t->host_flush_len = tu->host_flush_len;
    kt_status st = KT_OK;
    *runs = 0;
    u->r.outcome = KT_OUTCOME_MEASURED;
    if ((long)i == tu->ref->unit && tu->ref->wrote_input) {
        u->r.outcome = KT_OUTCOME_INVALID;
        set_message(&u->r, "%s", tu->ref->message, 0);
    } else if (op->validate) {
        *runs = 1; /* the reference's own run is its validation run */
        if ((long)i != tu->ref->unit) st = validation_run(t, tu->ref, &u->r);
    }
    *usable = st == KT_OK && u->r.outcome == KT_OUTCOME_MEASURED;
    if (st == KT_OK && !*usable)
        kt__log(op->ctx, KT_LOG_WARN, "op '%s': candidate '%s'%s%s disqualified: %s", op->name, op->cands[u->cand].name,
                u->text ? " " : "", u->text ? u->text : "", u->r.message ? u->r.message : "");
    return st;
}

static kt__cand_result *tuning_result(void *p, size_t i) { return &((tuning *)p)->d->units[i].r; }

static void tuning_trial(void *p, size_t i, kt__trial *out) {
    *out = (kt__trial){trial_before, trial_run, trial_after, trial_device_ns, &((tuning *)p)->trials[i]};
}

static void tuning_progress(void *p, size_t done, size_t total, size_t valid, size_t failed, double best_ns) {
    const kt_context *ctx = ((tuning *)p)->op->ctx;
    ctx->progress_fn(done, total, valid, failed, best_ns, ctx->progress_user);
}

/* Whether a unit runs in a worker process while tuning: compiled variants when the op says
 * so, and by default those of a backend whose faults poison its device context (CUDA's). The
 * worker setup may still refuse (a backend without KT_BACKEND_CAP_WORKER): they then run here. */
static bool isolate(const kt_op *op, const kt__unit *u) {
    if (u->text == NULL || u->artifact == NULL || op->isolation == KT_ISOLATE_OFF) return false;
    if (op->isolation == KT_ISOLATE_ON) return true;
    return (kt__backend_caps(u->launch.backend) & KT_BACKEND_CAP_FAULT_POISONS) != 0;
}

/* Why a native of an op that asks for isolation (KT_ISOLATE_ON) cannot run in a worker
 * process for this tuning, or NULL when it may (its code may still not be found there:
 * kt__worker_add_native says). */
static const char *native_stays(const kt__workset *ws, const kt__unit *u) {
    if (u->rfn != NULL) return "it returns its output (kt_op_add_native_result), which cannot cross processes";
    if (!ws->host) return "its arguments are in device memory, which a worker process cannot reach";
    return NULL;
}

static kt_status iso_to_host(void *ws, void *dst, const void *buf, size_t n) { return kt__workset_to_host(ws, dst, buf, n); }
static kt_status iso_from_host(void *ws, void *buf, const void *src, size_t n) { return kt__workset_from_host(ws, buf, src, n); }

/* What a worker needs of the workset: the work arguments, which of them the tuning rewrites
 * before every run (ReadWrite restored, accumulating outputs refilled), and copies. */
static kt__iso_args iso_args(const kt_op *op, kt__workset *ws, bool *refreshed) {
    for (size_t i = 0; i < op->nargs; i++)
        refreshed[i] = op->args[i].access == KT_READ_WRITE || (op->args[i].access == KT_WRITE_ONLY && op->args[i].accumulate);
    return (kt__iso_args){ws->args, op->nargs, refreshed, iso_to_host, iso_from_host, ws};
}

/* The reference's run, through its trial (so in its worker when isolated). */
static int tuning_run_unit(void *p, size_t i, const kt_arg *args, kt_result *res) {
    tuning *tu = p;
    const kt__unit *u = &tu->d->units[i];
    if (tu->trials[i].worker) {
        tu->trials[i].full = true;
        int rc = trial_run(&tu->trials[i], args);
        tu->trials[i].full = false;
        return rc;
    }
    return res ? u->rfn(args, tu->op->nargs, u->user, res) : u->fn(args, tu->op->nargs, u->user);
}

/* Validates and measures every runnable unit on a workset built from the caller's arguments,
 * picks the fastest, and restores the caller's buffers for the final launch (on every path,
 * errors included). Returns KT_ERR_ALL_FAILED when no unit passed; any other error is not the
 * candidates' (the key will be tuned again). launching: the caller's buffers get the final
 * launch (kt_op_call); otherwise (kt_op_tune) they are not written at all. */
static kt_status measure_all(kt_op *op, kt_decision *d, const kt_arg *caller, bool launching) {
    const kt__measure_cfg cfg = op->ctx->measure;
    kt_inputs inputs = (!launching && op->inputs == KT_INPUTS_PROTECT) ? KT_INPUTS_CLONE : op->inputs;
    kt__workset ws;
    kt__reference ref = {.unit = -1};
    bool *acc = NULL;
    trial_ctx *trials = NULL;
    kt_status st = kt__make_units(op, d, caller, -1, NULL);
    if (st == KT_OK) st = kt__workset_init(&ws, op, inputs, caller, launching);
    else memset(&ws, 0, sizeof ws);
    if (st == KT_OK && ((acc = accepting(op, d, &ws)) == NULL || (trials = calloc(d->nunits ? d->nunits : 1, sizeof *trials)) == NULL))
        st = kt__err(KT_ERR_NO_MEMORY, "kt_op_call(op '%s'): out of memory", op->name);
    bool isolated = false, natives = false;
    for (size_t i = 0; st == KT_OK && i < d->nunits; i++) {
        trials[i] = (trial_ctx){.op = op, .ws = &ws, .unit = &d->units[i], .device_ns = -1, .flush = flush_kind(op, &d->units[i])};
        isolated = isolated || (acc[i] && isolate(op, &d->units[i]));
        natives = natives || (acc[i] && d->units[i].text == NULL && op->isolation == KT_ISOLATE_ON);
    }
    tuning tu = {op, d, &ws, &ref, trials, NULL, 0};
    bool *refreshed = NULL; /* per argument, for the workers (iso_args) */
    if (st == KT_OK && (isolated || natives) && (refreshed = calloc(op->nargs ? op->nargs : 1, sizeof *refreshed)) == NULL)
        st = kt__err(KT_ERR_NO_MEMORY, "kt_op_call(op '%s'): out of memory", op->name);
    kt__worker *native_worker = NULL; /* started for this tuning: it holds this tuning's natives */
    bool native_added = false;
    if (st == KT_OK && natives) {
        for (size_t i = 0; st == KT_OK && i < d->nunits; i++) {
            kt__unit *u = &d->units[i];
            if (!acc[i] || u->text != NULL) continue;
            char why[512];
            const char *stays = native_stays(&ws, u);
            if (stays == NULL && native_worker == NULL) { /* the first that may: the worker's setup */
                kt__iso_args io = iso_args(op, &ws, refreshed);
                if ((st = kt__worker_setup_natives(&native_worker, &io)) != KT_OK) break;
            }
            if (stays == NULL && kt__worker_add_native(native_worker, u->fn, u->user, &trials[i].worker_id, why, sizeof why)) {
                trials[i].worker = native_worker;
                native_added = true;
            } else {
                kt__log(op->ctx, KT_LOG_INFO, "op '%s': native '%s' runs in this process, not in a worker: %s", op->name,
                        op->cands[u->cand].name, stays ? stays : why);
            }
        }
        if (st == KT_OK && native_added) st = kt__worker_ready(native_worker);
        if (st != KT_OK) st = kt__err(st, "kt_op_call(op '%s'): %s", op->name, kt_last_error());
    }
    kt__worker *worker = NULL;
    bool iso_locked = false;
    if (st == KT_OK && isolated) {
        pthread_mutex_lock(&op->ctx->iso_lock); /* held to the end of the tuning */
        iso_locked = true;
        const kt_backend *b;
        void *bstate;
        size_t local;
        const char *fp;
        kt__op_backend(op, &b, &bstate, &local, &fp);
        kt__iso_args io = iso_args(op, &ws, refreshed);
        st = kt__worker_setup_backend(&op->ctx->workers[op->device], b, fp, &io);
        if (st == KT_ERR_NOT_FOUND) { /* this backend's variants cannot run in a worker: here, then */
            kt__log(op->ctx, KT_LOG_INFO, "op '%s': variants run in this process, not in a worker: %s", op->name, kt_last_error());
            isolated = false;
            st = KT_OK;
        }
        worker = op->ctx->workers[op->device];
        if (st == KT_OK && isolated) st = kt__worker_ready(worker);
        if (st != KT_OK) {
            st = kt__err(st, "kt_op_call(op '%s'): %s", op->name, kt_last_error());
        }
        for (size_t i = 0; st == KT_OK && isolated && i < d->nunits; i++) {
            if (!acc[i] || !isolate(op, &d->units[i])) continue;
            trials[i].worker = worker;
            st = kt__worker_add(worker, d->units[i].artifact, op->cands[d->units[i].cand].kernel, &d->units[i].launch.geometry,
                                &trials[i].worker_id);
        }
    }
    if (st == KT_OK) st = kt__reference_capture(&ref, &ws, d->units, d->nunits, acc, tuning_run_unit, &tu);
    for (size_t i = 0; trials && i < d->nunits; i++) { /* the reference's isolated run */
        if (st == KT_OK && trials[i].iso.infra)
            st = kt__err(KT_ERR_BACKEND, "kt_op_call(op '%s'): %s", op->name, trials[i].iso.msg);
        if (st == KT_OK && (long)i == ref.unit && ref.failed_rc != 0) { /* it failed: it says why, and is not measured */
            kt__unit *u = &d->units[i];
            kt_fail_kind c = trials[i].iso.kind;
            u->r.outcome = c != KT_FAIL_NONE ? kt__iso_outcome(c) : KT_OUTCOME_FAILED;
            u->r.fail_kind = c; /* in-process: set with the others' below */
            u->r.fail_code = c != KT_FAIL_NONE ? trials[i].iso.code : ref.failed_rc;
            if (c != KT_FAIL_NONE && trials[i].iso.msg[0]) set_message(&u->r, "%s", trials[i].iso.msg, 0);
            else if (ref.failed_msg) set_message(&u->r, "%s", ref.failed_msg, 0);
            else set_message(&u->r, "%sreturned %d in its reference run", NULL, ref.failed_rc);
            acc[i] = false;
            kt__log(op->ctx, KT_LOG_WARN, "op '%s': the reference '%s'%s%s failed: %s", op->name, op->cands[u->cand].name,
                    u->text ? " " : "", u->text ? u->text : "", u->r.message ? u->r.message : "");
        }
        trials[i].iso.kind = KT_FAIL_NONE; /* the engine runs the others again: what it sees there counts */
    }
    if (st == KT_OK && op->reference_only && ref.unit >= 0) acc[ref.unit] = false; /* it validates, never competes */
    bool recalled = false; /* units measured by an earlier tuning (the persistent cache): not again */
    for (size_t i = 0; st == KT_OK && i < d->nunits; i++) {
        if (!acc[i] || !d->units[i].recalled) continue;
        acc[i] = false;
        recalled = true;
        if ((long)i == ref.unit && ref.wrote_input) { /* the reference changed an input: out */
            d->units[i].recalled = false;
            d->units[i].r.outcome = KT_OUTCOME_INVALID;
            set_message(&d->units[i].r, "%s", ref.message, 0);
        }
    }
    d->validated = ref.active;
    kt__engine_io io = {&tu, tuning_admit, tuning_result, tuning_trial, op->ctx->progress_fn ? tuning_progress : NULL};
    kt__engine_out out = {.best = -1};
    if (st == KT_OK) st = kt__engine_run(&cfg, &op->budget, &io, acc, d->nunits, &out);
    uint64_t runs = 0;
    for (size_t i = 0; trials && i < d->nunits; i++) { /* what the worker saw */
        kt__cand_result *r = &d->units[i].r;
        if (trials[i].iso.kind == KT_FAIL_NONE || r->outcome != KT_OUTCOME_FAILED) continue;
        r->outcome = kt__iso_outcome(trials[i].iso.kind);
        r->fail_kind = trials[i].iso.kind;
        r->fail_code = trials[i].iso.code;
        bool said = r->message && strcmp(r->message, trials[i].iso.msg) == 0; /* by tuning_admit, in its validation run */
        free(r->message);
        r->message = strdup(trials[i].iso.msg);
        if (!said) kt__log(op->ctx, KT_LOG_WARN, "op '%s': candidate '%s'%s%s disqualified in its worker process: %s", op->name,
                op->cands[d->units[i].cand].name, d->units[i].text ? " " : "", d->units[i].text ? d->units[i].text : "",
                trials[i].iso.msg);
    }
    if (iso_locked) pthread_mutex_unlock(&op->ctx->iso_lock);
    kt__worker_free(native_worker);
    free(refreshed);
    for (size_t i = 0; i < d->nunits; i++) {
        kt__unit *u = &d->units[i];
        runs += u->r.runs;
        if (u->r.outcome == KT_OUTCOME_FAILED && u->r.fail_kind == KT_FAIL_NONE) /* failed in this process */
            u->r.fail_kind = u->fn == kt__launch_fn ? KT_FAIL_LAUNCH : KT_FAIL_RETURNED;
        if (u->r.outcome == KT_OUTCOME_FAILED && u->r.message == NULL) {
            set_message(&u->r, "%sreturned %d while measured", NULL, u->r.fail_code);
            kt__log(op->ctx, KT_LOG_WARN, "op '%s': candidate '%s'%s%s disqualified: %s", op->name, op->cands[u->cand].name,
                    u->text ? " " : "", u->text ? u->text : "", u->r.message ? u->r.message : "");
        } else if (u->r.outcome == KT_OUTCOME_MEASURED) {
            kt__log(op->ctx, KT_LOG_DEBUG, "op '%s': candidate '%s'%s%s %.0f ns (%u runs, %u warm-ups)", op->name,
                    op->cands[u->cand].name, u->text ? " " : "", u->text ? u->text : "", u->r.time_ns, u->r.runs,
                    u->r.warmups);
        }
    }
    if (launching && ws.op != NULL) kt__workset_finish(&ws, caller);
    if (ws.op != NULL) {
        kt__reference_free(&ref, &ws);
        d->peak_extra = ws.peak;
        kt__workset_free(&ws);
    }
    free(tu.host_flush);
    free(trials);
    free(acc);
    atomic_fetch_add(&op->measured_runs, runs);
    d->policy = cfg.policy;
    d->confidence = out.confidence;
    d->total_runs = out.runs;
    d->measure_ns = out.measure_ns;
    if (st != KT_OK) return st;
    atomic_fetch_add(&op->tune_count, 1);
    long best = out.best;
    for (size_t i = 0; recalled && i < d->nunits; i++) {
        kt__unit *u = &d->units[i];
        if (!u->recalled || !kt__unit_runnable(u) || !kt__key_accepts(op, d->key, u->cand)) continue;
        if (u->held) { /* a non-finalist of a re-raced decision (persist.c): kept as recorded, never competes */
            if (u->r.time_ns >= 0) u->r.outcome = KT_OUTCOME_MEASURED;
            continue;
        }
        u->r.outcome = KT_OUTCOME_MEASURED; /* its recorded time competes with today's */
        if (best < 0 || u->r.time_ns < d->units[best].r.time_ns) best = (long)i;
    }
    if (best < 0) return all_failed(op, d);
    d->winner_unit = (size_t)best;
    d->winner = d->units[best].cand;
    d->source = KT_SOURCE_MEASURED;
    kt__log(op->ctx, KT_LOG_INFO,
            "op '%s': tuned a new key in %llu runs (%s); winner '%s'%s%s (%.0f ns, confidence %.3f)%s", op->name,
            (unsigned long long)out.runs, kt_policy_name(cfg.policy), op->cands[d->winner].name,
            d->units[best].text ? " " : "", d->units[best].text ? d->units[best].text : "", d->units[best].r.time_ns,
            out.confidence, d->validated ? "" : ", not validated");
    return KT_OK;
}

/* Decides an entry by the op's effort level. */
static kt_status decide(kt_op *op, kt_decision *d, const kt_arg *args, bool launching) {
    if (op->effective == KT_EFFORT_MEASURE || op->effective == KT_EFFORT_CACHE_ONLY) { /* a recorded decision */
        bool found = false;
        kt_status st = kt__persist_recall(op, d, args, &found);
        if (st != KT_OK || found) return st;
    }
    if (op->effective == KT_EFFORT_MEASURE) {
        kt_status st = measure_all(op, d, args, launching);
        if (st == KT_OK) kt__persist_record(op, d);
        return st;
    }
    long idx = -1;
    if (op->effective == KT_EFFORT_FORCED && op->forced_idx >= 0) {
        if (kt__key_accepts(op, d->key, (size_t)op->forced_idx)) {
            idx = op->forced_idx;
            d->source = KT_SOURCE_FORCED;
        } else {
            kt__log(op->ctx, KT_LOG_WARN, "op '%s': forced candidate '%s' rejects these arguments; using the default",
                    op->name, op->cands[op->forced_idx].name);
        }
    }
    if (idx < 0) {
        idx = default_candidate(op, d->key); /* the caller checked that some candidate accepts the key */
        d->source = KT_SOURCE_DEFAULT;
    }
    d->winner = (size_t)idx;
    kt_status st = kt__make_units(op, d, args, idx, NULL); /* a variant group: build its first configuration */
    if (st != KT_OK) return st;
    if (d->nunits != 1 || !kt__unit_runnable(&d->units[0]))
        return kt__err(KT_ERR_BACKEND, "kt_op_call(op '%s'): candidate '%s' cannot run: %s", op->name, op->cands[idx].name,
                       d->nunits && d->units[0].r.message ? d->units[0].r.message : "no runnable configuration");
    d->winner_unit = 0;
    return KT_OK;
}

/* ---- the miss path ------------------------------------------------------------------------- */

static kt_decision *new_entry(const kt_op *op, const int64_t *key, size_t len, uint64_t hash) {
    kt_decision *d = calloc(1, sizeof *d);
    if (d == NULL) return NULL;
    d->ncand = op->ncands;
    d->hash = hash;
    d->keylen = len;
    d->nuser = op->nkeys;
    memcpy(d->key, key, len * sizeof *key);
    atomic_init(&d->state, KT__TUNING);
    return d;
}

/* Whether any candidate accepts the key. */
static bool any_accepts(const kt_op *op, const int64_t *key) {
    if (op->npredicated < op->ncands) return true;
    for (size_t w = 0; w < op->nmask_words; w++)
        if (key[op->nkeys + w] != 0) return true;
    return false;
}

/* Makes room in the done list for every entry in the table plus one (op->lock held), so that
 * publishing a decision later cannot fail. */
static kt_status reserve_done(kt_op *op) {
    if (op->count + 1 <= op->done_cap) return KT_OK;
    size_t cap = op->done_cap ? 2 * op->done_cap : 16;
    kt_decision **nd = realloc(op->done, cap * sizeof *nd);
    if (nd == NULL) return kt__err(KT_ERR_NO_MEMORY, "kt_op_call(op '%s'): out of memory", op->name);
    op->done = nd;
    op->done_cap = cap;
    return KT_OK;
}

/* How a miss ends: with the final launch on the caller's arguments (kt_op_call and
 * kt_op_call_result), or with the decision alone (kt_op_tune). */
typedef enum { LAUNCH, DECIDE_ONLY } finish;

/* Decides entry d (this thread owns its TUNING state), publishes the outcome, wakes waiters,
 * and makes the final launch on the caller's arguments. */
static kt_status tune_and_run(kt_op *op, kt_decision *d, const kt_arg *args, size_t nargs, kt_result *result,
                              finish how) {
    kt_status st = decide(op, d, args, how == LAUNCH);
    pthread_mutex_lock(&op->lock);
    int state = KT__DONE;
    if (st == KT_OK) {
        const kt__unit *w = &d->units[d->winner_unit];
        d->fn = w->fn;
        d->rfn = w->rfn;
        d->user = w->user;
        op->done[op->ndone++] = d; /* reserve_done made room */
    } else if (st == KT_ERR_ALL_FAILED) {
        d->fail_status = st;
        state = KT__FAILED;
    } else {
        state = KT__ABANDONED; /* not the candidates' fault: the next call tunes again */
    }
    atomic_store_explicit(&d->state, state, memory_order_release);
    pthread_cond_broadcast(&op->cond);
    pthread_mutex_unlock(&op->lock);
    if (st != KT_OK || how == DECIDE_ONLY) return st;
    return run_unit(op, &d->units[d->winner_unit], args, nargs, result);
}

static kt_status miss(kt_op *op, const kt_arg *args, size_t nargs, const int64_t *key, size_t len, uint64_t hash,
                      kt_result *result, finish how) {
    if (!any_accepts(op, key))
        return kt__err(KT_ERR_NO_VALID_CANDIDATE, "kt_op_call(op '%s'): none of its %zu candidates accepts these arguments",
                       op->name, op->ncands);
    pthread_mutex_lock(&op->lock);
    kt_decision *d = kt__table_find(atomic_load_explicit(&op->table, memory_order_relaxed), key, len, hash);
    if (d != NULL) {
        for (;;) {
            int state = atomic_load_explicit(&d->state, memory_order_acquire);
            if (state == KT__ABANDONED) { /* take the tuning over */
                kt__decision_reset(d);
                atomic_store_explicit(&d->state, KT__TUNING, memory_order_relaxed);
                pthread_mutex_unlock(&op->lock);
                return tune_and_run(op, d, args, nargs, result, how);
            }
            if (state != KT__TUNING) break;
            if (how == LAUNCH && op->fallback_idx >= 0 && op->cands[op->fallback_idx].space == NULL &&
                kt__key_accepts(op, key, (size_t)op->fallback_idx)) {
                pthread_mutex_unlock(&op->lock);
                return run_native(op, (size_t)op->fallback_idx, args, nargs, result);
            }
            pthread_cond_wait(&op->cond, &op->lock);
        }
        pthread_mutex_unlock(&op->lock);
        if (atomic_load_explicit(&d->state, memory_order_acquire) == KT__DONE)
            return how == LAUNCH ? run_unit(op, &d->units[d->winner_unit], args, nargs, result) : KT_OK;
        return kt__err(d->fail_status, "%s", d->fail_msg ? d->fail_msg : "kt_op_call: tuning failed");
    }
    d = new_entry(op, key, len, hash);
    kt_status st = d ? reserve_done(op) : kt__err(KT_ERR_NO_MEMORY, "kt_op_call(op '%s'): out of memory", op->name);
    if (st == KT_OK) st = kt__table_insert(op, d);
    pthread_mutex_unlock(&op->lock);
    if (st != KT_OK) {
        kt__decision_free(d);
        return st;
    }
    return tune_and_run(op, d, args, nargs, result, how);
}

/* ---- calls ---------------------------------------------------------------------------------- */

#if defined(__GNUC__)
#define KT__ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define KT__ALWAYS_INLINE inline
#endif

/* The hit path, shared by kt_op_call (result NULL) and kt_op_call_result: always inlined, so
 * each caller gets a copy with `result` a constant. */
static KT__ALWAYS_INLINE kt_status call(kt_op *op, const kt_arg *args, size_t nargs, kt_result *result) {
    if (KT__UNLIKELY(!atomic_load_explicit(&op->frozen, memory_order_acquire))) {
        kt_status st = kt__op_freeze(op);
        if (st != KT_OK) return st;
    }
    if (KT__UNLIKELY(op->has_result != (result != NULL)))
        return kt__err(KT_ERR_STATE, result ? "kt_op_call_result(op '%s'): the op returns no result; use kt_op_call"
                                            : "kt_op_call(op '%s'): the op returns a result; use kt_op_call_result",
                       op->name);
    kt_status st = kt__check_args(op, args, nargs, result ? "kt_op_call_result" : "kt_op_call");
    if (KT__UNLIKELY(st != KT_OK)) return st;
    int64_t key[KT__KEY_WORDS_MAX];
    size_t len = kt__key_compute(op, args, key);
    uint64_t hash = kt__key_hash(key, len);
    const kt_decision *d = kt__table_find(atomic_load_explicit(&op->table, memory_order_acquire), key, len, hash);
    if (KT__LIKELY(d != NULL && atomic_load_explicit(&d->state, memory_order_acquire) == KT__DONE)) {
        int rc = result ? d->rfn(args, nargs, d->user, result) : d->fn(args, nargs, d->user);
        if (KT__LIKELY(rc == 0)) return KT_OK;
        if (result) kt_result_release(result);
        if (kt__rc_reported(d->fn, rc)) return KT_ERR_CANDIDATE_FAILED; /* the detail message says how */
        return kt__err(KT_ERR_CANDIDATE_FAILED, "kt_op_call(op '%s'): candidate '%s' returned %d", op->name,
                       op->cands[d->winner].name, rc);
    }
    return miss(op, args, nargs, key, len, hash, result, LAUNCH);
}

kt_status kt_op_call(kt_op *op, const kt_arg *args, size_t nargs) {
    if (KT__UNLIKELY(op == NULL)) return kt__err(KT_ERR_NULL, "kt_op_call: op is NULL");
    return call(op, args, nargs, NULL);
}

kt_status kt_op_tune(kt_op *op, const kt_arg *args, size_t nargs) {
    if (op == NULL) return kt__err(KT_ERR_NULL, "kt_op_tune: op is NULL");
    if (!atomic_load_explicit(&op->frozen, memory_order_acquire)) {
        kt_status st = kt__op_freeze(op);
        if (st != KT_OK) return st;
    }
    kt_status st = kt__check_args(op, args, nargs, "kt_op_tune");
    if (st != KT_OK) return st;
    int64_t key[KT__KEY_WORDS_MAX];
    size_t len = kt__key_compute(op, args, key);
    uint64_t hash = kt__key_hash(key, len);
    const kt_decision *d = kt__table_find(atomic_load_explicit(&op->table, memory_order_acquire), key, len, hash);
    if (d != NULL && atomic_load_explicit(&d->state, memory_order_acquire) == KT__DONE) return KT_OK;
    return miss(op, args, nargs, key, len, hash, NULL, DECIDE_ONLY);
}

kt_status kt_op_call_result(kt_op *op, const kt_arg *args, size_t nargs, kt_result *result) {
    if (result == NULL) return kt__err(KT_ERR_NULL, "kt_op_call_result: result is NULL");
    memset(result, 0, sizeof *result);
    if (op == NULL) return kt__err(KT_ERR_NULL, "kt_op_call_result: op is NULL");
    return call(op, args, nargs, result);
}

uint64_t kt_op_tune_count(const kt_op *op) { return op ? atomic_load(&op->tune_count) : 0; }
uint64_t kt_op_measured_runs(const kt_op *op) { return op ? atomic_load(&op->measured_runs) : 0; }

/* ---- decisions ------------------------------------------------------------------------------ */

kt_status kt_op_decision(const kt_op *op, const kt_arg *args, size_t nargs, const kt_decision **out) {
    if (out == NULL) return kt__err(KT_ERR_NULL, "kt_op_decision: out is NULL");
    *out = NULL;
    if (op == NULL) return kt__err(KT_ERR_NULL, "kt_op_decision: op is NULL");
    if (!atomic_load_explicit(&op->frozen, memory_order_acquire))
        return kt__err(KT_ERR_NOT_FOUND, "kt_op_decision(op '%s'): the op has not been called yet", op->name);
    kt_status st = kt__check_args(op, args, nargs, "kt_op_decision");
    if (st != KT_OK) return st;
    int64_t key[KT__KEY_WORDS_MAX];
    size_t len = kt__key_compute(op, args, key);
    const kt_decision *d =
        kt__table_find(atomic_load_explicit(&op->table, memory_order_acquire), key, len, kt__key_hash(key, len));
    int state = d ? atomic_load_explicit(&d->state, memory_order_acquire) : KT__TUNING;
    if (state == KT__FAILED) { /* its units say why */
        *out = d;
        return kt__err(KT_ERR_ALL_FAILED, "%s", d->fail_msg ? d->fail_msg : "kt_op_decision: every candidate failed");
    }
    if (state != KT__DONE)
        return kt__err(KT_ERR_NOT_FOUND, "kt_op_decision(op '%s'): no finished decision for the key of these arguments",
                       op->name);
    *out = d;
    return KT_OK;
}

size_t kt_op_decision_count(const kt_op *op) {
    if (op == NULL) return 0;
    kt_op *m = (kt_op *)op; /* the lock is not part of the op's logical state */
    pthread_mutex_lock(&m->lock);
    size_t n = op->ndone;
    pthread_mutex_unlock(&m->lock);
    return n;
}

const kt_decision *kt_op_decision_at(const kt_op *op, size_t index) {
    if (op == NULL) return NULL;
    kt_op *m = (kt_op *)op;
    pthread_mutex_lock(&m->lock);
    const kt_decision *d = index < op->ndone ? op->done[index] : NULL;
    pthread_mutex_unlock(&m->lock);
    return d;
}

size_t kt_decision_winner(const kt_decision *d) { return d ? d->winner : 0; }
kt_decision_source kt_decision_source_of(const kt_decision *d) { return d ? d->source : 0; }
size_t kt_decision_key_len(const kt_decision *d) { return d ? d->nuser : 0; }
int64_t kt_decision_key(const kt_decision *d, size_t index) { return (d && index < d->nuser) ? d->key[index] : 0; }
int kt_decision_validated(const kt_decision *d) { return d ? d->validated : 0; }
size_t kt_decision_peak_extra_bytes(const kt_decision *d) { return d ? d->peak_extra : 0; }

/* The unit that speaks for candidate c: the winner when c won, else c's fastest measured
 * unit, else its first; NULL when the decision did not consider c. */
static const kt__unit *cand_unit(const kt_decision *d, size_t c) {
    if (d == NULL || c >= d->ncand || d->units == NULL) return NULL;
    if (d->winner == c && d->winner_unit < d->nunits && d->units[d->winner_unit].cand == c) return &d->units[d->winner_unit];
    const kt__unit *first = NULL, *best = NULL;
    for (size_t i = 0; i < d->nunits; i++) {
        const kt__unit *u = &d->units[i];
        if (u->cand != c) continue;
        if (first == NULL) first = u;
        if (u->r.outcome == KT_OUTCOME_MEASURED && (best == NULL || u->r.time_ns < best->r.time_ns)) best = u;
    }
    return best ? best : first;
}

kt_outcome kt_decision_outcome(const kt_decision *d, size_t c) {
    const kt__unit *u = cand_unit(d, c);
    return u ? u->r.outcome : KT_OUTCOME_NOT_RUN;
}
double kt_decision_time_ns(const kt_decision *d, size_t c) {
    const kt__unit *u = cand_unit(d, c);
    return u ? u->r.time_ns : -1;
}
unsigned kt_decision_runs(const kt_decision *d, size_t c) {
    const kt__unit *u = cand_unit(d, c);
    return u ? u->r.runs : 0;
}
int kt_decision_fail_code(const kt_decision *d, size_t c) {
    const kt__unit *u = cand_unit(d, c);
    return u ? u->r.fail_code : 0;
}
const char *kt_decision_message(const kt_decision *d, size_t c) {
    const kt__unit *u = cand_unit(d, c);
    return u ? u->r.message : NULL;
}

size_t kt_decision_unit_count(const kt_decision *d) { return d ? d->nunits : 0; }

kt_status kt_decision_unit_runtimes(const kt_decision *d, size_t u, const double **times, size_t *n) {
    if (times == NULL || n == NULL) return kt__err(KT_ERR_NULL, "kt_decision_unit_runtimes: %s is NULL", times ? "n" : "times");
    *times = NULL;
    *n = 0;
    if (d == NULL || u >= d->nunits || d->units[u].r.times == NULL || d->units[u].r.runs == 0)
        return kt__err(KT_ERR_NOT_FOUND, "kt_decision_unit_runtimes: unit %zu has no measured runs", u);
    *times = d->units[u].r.times;
    *n = d->units[u].r.runs;
    return KT_OK;
}

double kt_decision_unit_build_ms(const kt_decision *d, size_t u) { return (d && u < d->nunits) ? d->units[u].r.build_ms : 0; }
size_t kt_decision_winner_unit(const kt_decision *d) { return d ? d->winner_unit : 0; }
static const kt__unit *unit_at(const kt_decision *d, size_t u) { return (d && u < d->nunits) ? &d->units[u] : NULL; }
size_t kt_decision_unit_candidate(const kt_decision *d, size_t u) {
    const kt__unit *x = unit_at(d, u);
    return x ? x->cand : 0;
}
const char *kt_decision_unit_config(const kt_decision *d, size_t u) {
    const kt__unit *x = unit_at(d, u);
    return x ? x->text : NULL;
}
kt_outcome kt_decision_unit_outcome(const kt_decision *d, size_t u) {
    const kt__unit *x = unit_at(d, u);
    return x ? x->r.outcome : KT_OUTCOME_NOT_RUN;
}
double kt_decision_unit_time_ns(const kt_decision *d, size_t u) {
    const kt__unit *x = unit_at(d, u);
    return x ? x->r.time_ns : -1;
}
unsigned kt_decision_unit_runs(const kt_decision *d, size_t u) {
    const kt__unit *x = unit_at(d, u);
    return x ? x->r.runs : 0;
}
const char *kt_decision_unit_message(const kt_decision *d, size_t u) {
    const kt__unit *x = unit_at(d, u);
    return x ? x->r.message : NULL;
}

kt_status kt_decision_unit_geometry(const kt_decision *d, size_t u, int64_t global[3], int64_t local[3],
                                    int64_t *shared_memory) {
    const kt__unit *x = unit_at(d, u);
    if (x == NULL || x->text == NULL)
        return kt__err(KT_ERR_NOT_FOUND, "kt_decision_unit_geometry: unit %zu is not a planned variant", u);
    const kt_launch_geometry *g = &x->launch.geometry;
    for (int i = 0; i < 3; i++) {
        if (global) global[i] = g->global[i];
        if (local) local[i] = g->local[i];
    }
    if (shared_memory) *shared_memory = g->shared_memory;
    return KT_OK;
}

unsigned kt_decision_unit_warmups(const kt_decision *d, size_t u) {
    const kt__unit *x = unit_at(d, u);
    return x ? x->r.warmups : 0;
}
double kt_decision_unit_ci_low_ns(const kt_decision *d, size_t u) {
    const kt__unit *x = unit_at(d, u);
    return x && x->r.outcome == KT_OUTCOME_MEASURED && x->r.runs ? x->r.ci_low_ns : -1;
}
double kt_decision_unit_ci_high_ns(const kt_decision *d, size_t u) {
    const kt__unit *x = unit_at(d, u);
    return x && x->r.outcome == KT_OUTCOME_MEASURED && x->r.runs ? x->r.ci_high_ns : -1;
}
double kt_decision_confidence(const kt_decision *d) {
    return d && (d->source == KT_SOURCE_MEASURED || d->source == KT_SOURCE_CACHE) && d->confidence > 0 ? d->confidence : 0;
}
uint64_t kt_decision_total_runs(const kt_decision *d) { return d ? d->total_runs : 0; }
double kt_decision_measure_ns(const kt_decision *d) { return d ? d->measure_ns : 0; }
kt_policy kt_decision_policy(const kt_decision *d) { return d ? d->policy : KT_POLICY_RACE; }
