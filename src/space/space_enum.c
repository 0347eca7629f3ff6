/*
 * space_enum.c - enumerating a space's valid configurations: a depth-first walk over the
 * parameters in declaration order (the last varies fastest, as itertools.product does). A
 * constraint is checked as soon as the last parameter it reads has a value, so whole subtrees
 * are pruned early; derived values and the constraints that read them (or that are callbacks)
 * are checked at the leaves. The walk does not change the space, so several threads may
 * enumerate one space at once (kt__space_enum); kt_space_enumerate keeps its result in the
 * space for the public accessors.
 */
#include "space/space_int.h"

#include <stdlib.h>
#include <string.h>

typedef struct walk {
    const kt_space *sp;
    kt__configs *out;
    kt__value *slots;
    uint16_t *cur;
    kt__arena arena;
    const constraint **by_level; /* constraints grouped by level: [level][...] flattened */
    size_t *level_start;         /* where each level starts in by_level (index 0: level -1, inputs only;
                                    k + 1: parameter k; nparams + 1: the leaves), then the end */
} walk;

/* Checks one constraint on w->slots. reset: the arena may be emptied first (not at the leaves,
 * where it holds the derived values). */
static kt_status check(walk *w, const constraint *c, bool reset, bool *ok) {
    if (c->fn != NULL) {
        kt_config cfg = {w->sp, w->slots};
        *ok = c->fn(&cfg, c->user) != 0;
        return KT_OK;
    }
    kt__value v;
    if (reset) kt__arena_reset(&w->arena);
    kt_status st = kt__expr_eval(c->e, w->slots, &w->arena, "kt_space_enumerate: constraint", &v);
    if (st == KT_OK) *ok = kt__value_truthy(&v);
    return st;
}

static kt_status check_level(walk *w, size_t level, bool reset, bool *ok) {
    *ok = true;
    for (size_t i = w->level_start[level]; *ok && i < w->level_start[level + 1]; i++) {
        kt_status st = check(w, w->by_level[i], reset, ok);
        if (st != KT_OK) return st;
    }
    return KT_OK;
}

/* Evaluates the derived values of the configuration in slots, in declaration order. */
kt_status kt__space_eval_derived(const kt_space *sp, kt__value *slots, kt__arena *arena) {
    for (size_t i = 0; i < sp->nderived; i++) {
        kt_status st = kt__expr_eval(sp->derived[i].e, slots, arena, "kt_space_enumerate: derived value",
                                     &slots[sp->derived[i].slot]);
        if (st != KT_OK) return st;
    }
    return KT_OK;
}

static kt_status record(const kt_space *sp, kt__configs *out, const uint16_t *cur) {
    if (out->n == out->cap) {
        size_t cap = out->cap ? 2 * out->cap : 1024;
        uint16_t *c = realloc(out->idx, cap * (sp->nparams ? sp->nparams : 1) * sizeof *c);
        if (c == NULL) return kt__err(KT_ERR_NO_MEMORY, "kt_space_enumerate: out of memory growing the configurations past %zu", out->n);
        out->idx = c;
        out->cap = cap;
    }
    memcpy(out->idx + out->n * sp->nparams, cur, sp->nparams * sizeof *cur);
    out->n++;
    return KT_OK;
}

void kt__configs_free(kt__configs *c) {
    free(c->idx);
    memset(c, 0, sizeof *c);
}

static kt_status dfs(walk *w, size_t depth) {
    const kt_space *sp = w->sp;
    bool ok;
    kt_status st;
    if (depth == sp->nparams) {
        /* derived values live in the arena until the leaf constraints are done */
        kt__arena_reset(&w->arena);
        if ((st = kt__space_eval_derived(sp, w->slots, &w->arena)) != KT_OK) return st;
        if ((st = check_level(w, sp->nparams + 1, false, &ok)) != KT_OK) return st;
        return ok ? record(sp, w->out, w->cur) : KT_OK;
    }
    const param *p = &sp->params[depth];
    for (size_t v = 0; v < p->n; v++) {
        w->slots[p->slot] = p->values[v];
        w->cur[depth] = (uint16_t)v;
        if ((st = check_level(w, depth + 1, true, &ok)) != KT_OK) return st;
        if (ok && (st = dfs(w, depth + 1)) != KT_OK) return st;
    }
    return KT_OK;
}

/* Puts the inputs into slots: from inputs when given, else the bound values (failing on an
 * unbound input). */
kt_status kt__space_bind_slots(const kt_space *sp, const kt__value *inputs, kt__value *slots) {
    for (size_t i = 0; i < sp->ninputs; i++) {
        if (inputs != NULL) {
            slots[sp->inputs[i].slot] = inputs[i];
            continue;
        }
        if (!sp->inputs[i].bound)
            return kt__err(KT_ERR_STATE, "kt_space_enumerate: input '%s' is not bound (kt_space_bind_int or _ints)",
                           sp->slots[sp->inputs[i].slot].name);
        slots[sp->inputs[i].slot] = sp->inputs[i].value;
    }
    return KT_OK;
}

kt_status kt__space_enum(const kt_space *sp, const kt__value *inputs, kt__configs *out) {
    out->n = 0;
    walk w = {.sp = sp, .out = out};
    size_t levels = sp->nparams + 3; /* level -1 (inputs only), 0..nparams-1, leaves */
    w.slots = calloc(sp->nslots ? sp->nslots : 1, sizeof *w.slots);
    w.cur = calloc(sp->nparams ? sp->nparams : 1, sizeof *w.cur);
    w.by_level = calloc(sp->ncons ? sp->ncons : 1, sizeof *w.by_level);
    w.level_start = calloc(levels, sizeof *w.level_start);
    kt_status st = (w.slots && w.cur && w.by_level && w.level_start)
                       ? kt__space_bind_slots(sp, inputs, w.slots)
                       : kt__err(KT_ERR_NO_MEMORY, "kt_space_enumerate: out of memory allocating the walk (%zu slots, %zu constraints)",
                                 sp->nslots, sp->ncons);
    if (st == KT_OK) {
        /* Group constraints by level: index 0 holds level -1, index k+1 level k (the
         * constraint can be checked once parameter k is set), index nparams+1 the leaves. */
        size_t n = 0;
        for (size_t lv = 0; lv + 1 < levels; lv++) {
            w.level_start[lv] = n;
            for (size_t i = 0; i < sp->ncons; i++) {
                long l = sp->cons[i].level;
                size_t idx = l == LONG_MAX ? sp->nparams + 1 : (size_t)(l + 1);
                if (idx == lv) w.by_level[n++] = &sp->cons[i];
            }
        }
        w.level_start[levels - 1] = n;
        bool ok;
        st = check_level(&w, 0, true, &ok);
        if (st == KT_OK && ok) st = dfs(&w, 0);
    }
    kt__arena_free(&w.arena);
    free(w.slots);
    free(w.cur);
    free(w.by_level);
    free(w.level_start);
    if (st != KT_OK) out->n = 0;
    return st;
}

kt_status kt_space_enumerate(kt_space *sp, size_t *count) {
    if (sp == NULL || count == NULL) return kt__err(KT_ERR_NULL, "kt_space_enumerate: %s is NULL", sp ? "count" : "sp");
    kt_status st = kt__space_enum(sp, NULL, &sp->last);
    *count = sp->last.n;
    return st;
}

size_t kt__space_input_count(const kt_space *sp) { return sp->ninputs; }
const char *kt__space_input_name(const kt_space *sp, size_t index) { return sp->slots[sp->inputs[index].slot].name; }

bool kt__space_input_value(const kt_space *sp, size_t index, kt__value *out) {
    if (!sp->inputs[index].bound) return false;
    *out = sp->inputs[index].value;
    return true;
}
