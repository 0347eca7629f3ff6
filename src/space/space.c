/*
 * space.c - spaces: parameters, inputs, constraints, derived values, geometry, enumeration.
 *
 * Every declared name (parameter, input, derived value) gets a slot, in declaration order; an
 * expression is parsed once with names resolved to slots, and records which parameters it
 * reads. Enumeration is a depth-first walk over the parameters in declaration order (the last
 * varies fastest, as itertools.product does): a constraint is checked as soon as the last
 * parameter it reads has a value, so whole subtrees are pruned early; derived values and the
 * constraints that read them (or that are callbacks) are checked at the leaves. A valid
 * configuration is stored as one value index per parameter.
 */
#include "space/space.h"

#include <stdatomic.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum slot_kind { SLOT_PARAM, SLOT_INPUT, SLOT_DERIVED };

typedef struct slot {
    char *name;
    enum slot_kind kind;
    size_t index; /* within its kind */
} slot;

typedef struct param {
    size_t slot;
    kt__value *values;
    size_t n;
} param;

typedef struct input {
    size_t slot;
    bool bound;
    kt__value value;
} input;

typedef struct derived {
    size_t slot;
    kt__expr *e;
    uint64_t inputs; /* the inputs it reads, directly or through earlier derived values */
} derived;

typedef struct constraint {
    kt__expr *e;          /* or a callback: */
    kt_constraint_fn fn;
    void *user;
    long level;           /* checked once parameter `level` has a value; -1: inputs only; nparams: at leaves */
} constraint;

struct kt_space {
    _Atomic int refs;
    _Atomic int sealed;   /* an op holds it: it can no longer change */
    slot *slots;
    size_t nslots;
    param *params;
    size_t nparams;
    input *inputs;
    size_t ninputs;
    derived *derived;
    size_t nderived;
    constraint *cons;
    size_t ncons;
    kt_geometry kind;
    kt__expr *global[3], *local[3], *shmem;
    /* Which inputs (bit i: input i) each part reads, directly or through derived values:
     * derived values (which become defines) and constraints; the local size and shared memory
     * (which the device's limits judge); each dimension's global size. */
    uint64_t code_inputs, geometry_inputs, global_inputs[3];
    kt__arena store;      /* parameter values and bound inputs */
    kt__configs last;     /* the last kt_space_enumerate */
};

struct kt_config {
    const kt_space *sp;
    const kt__value *slots;
};

/* ---- declaration -------------------------------------------------------------------------- */

kt_status kt_space_create(kt_space **out) {
    if (out == NULL) return kt__err(KT_ERR_NULL, "kt_space_create: out is NULL");
    *out = calloc(1, sizeof **out);
    if (*out == NULL) return kt__err(KT_ERR_NO_MEMORY, "kt_space_create: out of memory");
    atomic_init(&(*out)->refs, 1);
    return KT_OK;
}

void kt__space_retain(kt_space *sp) {
    atomic_fetch_add(&sp->refs, 1);
    atomic_store(&sp->sealed, 1);
}

/* Checks that sp may still change; reports as `where`. */
static kt_status changeable(const kt_space *sp, const char *where) {
    if (sp == NULL) return kt__err(KT_ERR_NULL, "%s: sp is NULL", where);
    if (atomic_load(&sp->sealed))
        return kt__err(KT_ERR_STATE, "%s: the space was added to an op; it can no longer change (create another)", where);
    return KT_OK;
}

void kt_space_destroy(kt_space *sp) {
    if (sp == NULL || atomic_fetch_sub(&sp->refs, 1) != 1) return;
    for (size_t i = 0; i < sp->nslots; i++) free(sp->slots[i].name);
    for (size_t i = 0; i < sp->nderived; i++) kt__expr_free(sp->derived[i].e);
    for (size_t i = 0; i < sp->ncons; i++) kt__expr_free(sp->cons[i].e);
    for (int d = 0; d < 3; d++) {
        kt__expr_free(sp->global[d]);
        kt__expr_free(sp->local[d]);
    }
    kt__expr_free(sp->shmem);
    kt__arena_free(&sp->store);
    free(sp->slots);
    free(sp->params);
    free(sp->inputs);
    free(sp->derived);
    free(sp->cons);
    kt__configs_free(&sp->last);
    free(sp);
}

static long find_slot(const kt_space *sp, const char *name, size_t len) {
    for (size_t i = 0; i < sp->nslots; i++)
        if (strlen(sp->slots[i].name) == len && strncmp(sp->slots[i].name, name, len) == 0) return (long)i;
    return -1;
}

/* Adds a slot for a new name; checks the name is an identifier and unused. */
static kt_status add_slot(kt_space *sp, const char *name, enum slot_kind kind, size_t index, const char *where) {
    char *copy;
    kt_status st = kt__dup_name(name, where, &copy);
    if (st != KT_OK) return st;
    bool ident = (copy[0] == '_' || (copy[0] >= 'A' && copy[0] <= 'Z') || (copy[0] >= 'a' && copy[0] <= 'z'));
    for (const char *c = copy; ident && *c; c++)
        ident = *c == '_' || (*c >= '0' && *c <= '9') || (*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z');
    if (!ident) {
        free(copy);
        return kt__err(KT_ERR_INVALID_ARGUMENT, "%s: '%s' is not a valid name (letters, digits, _)", where, name);
    }
    if (find_slot(sp, copy, strlen(copy)) >= 0) {
        free(copy);
        return kt__err(KT_ERR_DUPLICATE, "%s: the name '%s' is already declared in this space", where, name);
    }
    slot *s = realloc(sp->slots, (sp->nslots + 1) * sizeof *s);
    if (s == NULL) {
        free(copy);
        return kt__err(KT_ERR_NO_MEMORY, "%s: out of memory", where);
    }
    sp->slots = s;
    sp->slots[sp->nslots++] = (slot){copy, kind, index};
    return KT_OK;
}

/* Grows an array of n items of elem bytes to n + 1: returns the new array, which the caller
 * stores back before filling its last item, or NULL when out of memory (arr unchanged). The
 * array goes in and out by value, so that each caller reads and writes its pointer member
 * through that member's own type. */
static void *grow(void *arr, size_t n, size_t elem) { return realloc(arr, (n + 1) * elem); }

/* What an expression reads, collected by the resolver while it parses. */
typedef struct reads {
    kt_space *sp;
    long max_param;   /* highest parameter index read, -1 none */
    bool derived;     /* reads a derived value */
    bool lists;       /* parameters resolve to their whole value lists */
    uint64_t inputs;  /* inputs read, directly or through derived values */
} reads;

static int resolve(const char *name, size_t len, void *user) {
    reads *r = user;
    long i = find_slot(r->sp, name, len);
    if (i < 0) return -1;
    const slot *s = &r->sp->slots[i];
    if (s->kind == SLOT_PARAM && (long)s->index > r->max_param) r->max_param = (long)s->index;
    if (s->kind == SLOT_DERIVED) {
        r->derived = true;
        r->inputs |= r->sp->derived[s->index].inputs;
    }
    if (s->kind == SLOT_INPUT) r->inputs |= (uint64_t)1 << s->index;
    return (int)i;
}

static kt_status parse(kt_space *sp, const char *text, const char *where, kt__expr **out, reads *r) {
    *r = (reads){sp, -1, false, false, 0};
    return kt__expr_parse(text, resolve, r, where, out);
}

static bool param_value_ok(const kt__value *v) {
    return v->t == KT_V_INT || v->t == KT_V_FLOAT || v->t == KT_V_BOOL || v->t == KT_V_STR;
}

/* Copies values into the space's store. */
static kt_status store_values(kt_space *sp, const kt__value *src, size_t n, kt__value **out, const char *where);

/* A value as its define writes it: strings bare, bools 1/0, the rest as Python writes them.
 * Returns the text (*vlen bytes, not always NUL-terminated): num (64 bytes) when it fits there,
 * the string's own bytes, or *heap, which the caller frees; NULL when out of memory. */
static const char *value_text(const kt__value *v, char num[64], char **heap, int *vlen) {
    *heap = NULL;
    if (v->t == KT_V_STR) {
        *vlen = (int)v->str.len;
        return v->str.s;
    }
    if (v->t == KT_V_BOOL) snprintf(num, 64, "%d", v->b ? 1 : 0);
    else if (v->t == KT_V_LIST) { /* a derived list */
        size_t n = kt__value_format_len(v);
        if ((*heap = malloc(n)) == NULL) return NULL;
        kt__value_format(v, *heap, n);
        *vlen = (int)strlen(*heap);
        return *heap;
    } else kt__value_format(v, num, 64);
    *vlen = (int)strlen(num);
    return num;
}

/* The same, allocated and NUL-terminated. */
static char *define_text(const kt__value *v) {
    char num[64], *heap;
    int len;
    const char *t = value_text(v, num, &heap, &len);
    if (t == NULL || t == heap) return heap;
    char *copy = malloc((size_t)len + 1);
    if (copy) memcpy(copy, t, (size_t)len), copy[len] = '\0';
    return copy;
}

typedef struct ranked_text {
    char *text;
    size_t index;
} ranked_text;

static int by_text(const void *a, const void *b) {
    const ranked_text *x = a, *y = b;
    int c = strcmp(x->text, y->text);
    return c ? c : (x->index < y->index ? -1 : x->index > y->index);
}

/* Refuses a value list in which two values give the same define ([1, 1], [True, 1]): they
 * would be one configuration measured twice, under one identity in the cache. */
static kt_status distinct_values(const char *name, const char *values, const kt__value *list, const char *where) {
    size_t n = list->list.n;
    ranked_text *r = calloc(n ? n : 1, sizeof *r);
    kt_status st = r ? KT_OK : kt__err(KT_ERR_NO_MEMORY, "%s: out of memory", where);
    for (size_t i = 0; st == KT_OK && i < n; i++)
        if ((r[i].text = define_text(&list->list.items[i])) == NULL) st = kt__err(KT_ERR_NO_MEMORY, "%s: out of memory", where);
        else r[i].index = i;
    if (st == KT_OK) qsort(r, n, sizeof *r, by_text);
    for (size_t i = 1; st == KT_OK && i < n; i++)
        if (strcmp(r[i - 1].text, r[i].text) == 0)
            st = kt__err(KT_ERR_INVALID_ARGUMENT, "%s: parameter '%s': values '%s' give the value %s twice (items %zu and %zu)",
                         where, name ? name : "", values, r[i].text, r[i - 1].index, r[i].index);
    for (size_t i = 0; r && i < n; i++) free(r[i].text);
    free(r);
    return st;
}

kt_status kt_space_add_param(kt_space *sp, const char *name, const char *values) {
    const char *where = "kt_space_add_param";
    kt_status sst = changeable(sp, where);
    if (sst != KT_OK) return sst;
    kt__expr *e = NULL;
    reads r;
    kt_status st = parse(sp, values, where, &e, &r);
    if (st != KT_OK) return st;
    kt__arena scratch = {0};
    kt__value v;
    st = kt__expr_eval(e, NULL, &scratch, where, &v);
    if (st == KT_OK && v.t != KT_V_LIST)
        st = kt__err(KT_ERR_INVALID_ARGUMENT, "%s: parameter '%s': values '%s' is not a list", where, name ? name : "",
                     values);
    if (st == KT_OK && v.list.n == 0)
        st = kt__err(KT_ERR_INVALID_ARGUMENT, "%s: parameter '%s': values '%s' is an empty list", where, name ? name : "",
                     values);
    if (st == KT_OK && v.list.n > 65535)
        st = kt__err(KT_ERR_LIMIT, "%s: parameter '%s' has %zu values; at most 65535", where, name ? name : "", v.list.n);
    for (size_t i = 0; st == KT_OK && i < v.list.n; i++)
        if (!param_value_ok(&v.list.items[i]))
            st = kt__err(KT_ERR_INVALID_ARGUMENT, "%s: parameter '%s': value %zu is not an int, float, bool or string", where,
                         name ? name : "", i);
    if (st == KT_OK) st = distinct_values(name, values, &v, where);
    kt__value *stored = NULL;
    if (st == KT_OK) st = store_values(sp, v.list.items, v.list.n, &stored, where);
    if (st == KT_OK) st = add_slot(sp, name, SLOT_PARAM, sp->nparams, where);
    if (st == KT_OK) {
        param *params = grow(sp->params, sp->nparams, sizeof *params);
        if (params == NULL) {
            free(sp->slots[--sp->nslots].name);
            st = kt__err(KT_ERR_NO_MEMORY, "%s: out of memory", where);
        } else {
            sp->params = params;
            params[sp->nparams++] = (param){sp->nslots - 1, stored, v.list.n};
        }
    }
    kt__arena_free(&scratch);
    kt__expr_free(e);
    return st;
}

kt_status kt_space_add_param_ints(kt_space *sp, const char *name, const int64_t *values, size_t n) {
    if (sp == NULL || values == NULL) return kt__err(KT_ERR_NULL, "kt_space_add_param_ints: %s is NULL", sp ? "values" : "sp");
    if (n == 0) return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_space_add_param_ints: parameter '%s' has no values", name ? name : "");
    size_t len = 2 + n * 22;
    char *text = malloc(len);
    if (text == NULL) return kt__err(KT_ERR_NO_MEMORY, "kt_space_add_param_ints: out of memory");
    size_t k = (size_t)snprintf(text, len, "[");
    for (size_t i = 0; i < n; i++) k += (size_t)snprintf(text + k, len - k, "%s%lld", i ? "," : "", (long long)values[i]);
    snprintf(text + k, len - k, "]");
    kt_status st = kt_space_add_param(sp, name, text);
    free(text);
    return st;
}

static kt_status store_values(kt_space *sp, const kt__value *src, size_t n, kt__value **out, const char *where) {
    kt__value *dst = kt__arena_alloc(&sp->store, n * sizeof *dst);
    for (size_t i = 0; dst && i < n; i++)
        if (!kt__value_copy(&src[i], &sp->store, &dst[i])) dst = NULL;
    if (dst == NULL) return kt__err(KT_ERR_NO_MEMORY, "%s: out of memory", where);
    *out = dst;
    return KT_OK;
}

kt_status kt_space_add_input(kt_space *sp, const char *name) {
    kt_status sst = changeable(sp, "kt_space_add_input");
    if (sst != KT_OK) return sst;
    if (sp->ninputs == KT__SPACE_INPUTS_MAX)
        return kt__err(KT_ERR_LIMIT, "kt_space_add_input: input '%s': a space has at most %d inputs", name ? name : "",
                       KT__SPACE_INPUTS_MAX);
    kt_status st = add_slot(sp, name, SLOT_INPUT, sp->ninputs, "kt_space_add_input");
    if (st != KT_OK) return st;
    input *inputs = grow(sp->inputs, sp->ninputs, sizeof *inputs);
    if (inputs == NULL) {
        free(sp->slots[--sp->nslots].name);
        return kt__err(KT_ERR_NO_MEMORY, "kt_space_add_input: out of memory");
    }
    sp->inputs = inputs;
    inputs[sp->ninputs++] = (input){.slot = sp->nslots - 1};
    return KT_OK;
}

static kt_status find_input(kt_space *sp, const char *name, const char *where, input **out) {
    kt_status sst = changeable(sp, where);
    if (sst != KT_OK) return sst;
    if (name == NULL) return kt__err(KT_ERR_NULL, "%s: name is NULL", where);
    long i = find_slot(sp, name, strlen(name));
    if (i < 0 || sp->slots[i].kind != SLOT_INPUT)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "%s: '%s' is not an input of this space (declare it with kt_space_add_input)",
                       where, name);
    *out = &sp->inputs[sp->slots[i].index];
    return KT_OK;
}

kt_status kt_space_bind_int(kt_space *sp, const char *name, int64_t value) {
    input *in = NULL;
    kt_status st = find_input(sp, name, "kt_space_bind_int", &in);
    if (st != KT_OK) return st;
    in->value = (kt__value){.t = KT_V_INT, .i = value};
    in->bound = true;
    return KT_OK;
}

kt_status kt_space_bind_ints(kt_space *sp, const char *name, const int64_t *values, size_t n) {
    input *in = NULL;
    kt_status st = find_input(sp, name, "kt_space_bind_ints", &in);
    if (st != KT_OK) return st;
    if (values == NULL && n > 0) return kt__err(KT_ERR_NULL, "kt_space_bind_ints: values is NULL");
    kt__value *items = kt__arena_alloc(&sp->store, (n ? n : 1) * sizeof *items);
    if (items == NULL) return kt__err(KT_ERR_NO_MEMORY, "kt_space_bind_ints: out of memory");
    for (size_t i = 0; i < n; i++) items[i] = (kt__value){.t = KT_V_INT, .i = values[i]};
    in->value = (kt__value){.t = KT_V_LIST, .list = {items, n}};
    in->bound = true;
    return KT_OK;
}

kt_status kt_space_add_constraint(kt_space *sp, const char *expression) {
    kt_status sst = changeable(sp, "kt_space_add_constraint");
    if (sst != KT_OK) return sst;
    kt__expr *e = NULL;
    reads r;
    kt_status st = parse(sp, expression, "kt_space_add_constraint", &e, &r);
    if (st != KT_OK) return st;
    constraint *cons = grow(sp->cons, sp->ncons, sizeof *cons);
    if (cons == NULL) {
        kt__expr_free(e);
        return kt__err(KT_ERR_NO_MEMORY, "kt_space_add_constraint: out of memory");
    }
    sp->cons = cons;
    /* A constraint that reads a derived value waits for the leaves. Parameters added later
     * cannot be read by it, so its level is final. */
    cons[sp->ncons++] = (constraint){.e = e, .level = r.derived ? LONG_MAX : r.max_param};
    sp->code_inputs |= r.inputs;
    return KT_OK;
}

kt_status kt_space_add_constraint_fn(kt_space *sp, kt_constraint_fn fn, void *user) {
    kt_status sst = changeable(sp, "kt_space_add_constraint_fn");
    if (sst != KT_OK) return sst;
    if (fn == NULL) return kt__err(KT_ERR_NULL, "kt_space_add_constraint_fn: fn is NULL");
    constraint *cons = grow(sp->cons, sp->ncons, sizeof *cons);
    if (cons == NULL) return kt__err(KT_ERR_NO_MEMORY, "kt_space_add_constraint_fn: out of memory");
    sp->cons = cons;
    cons[sp->ncons++] = (constraint){.fn = fn, .user = user, .level = LONG_MAX};
    return KT_OK;
}

kt_status kt_space_add_derived(kt_space *sp, const char *name, const char *expression) {
    const char *where = "kt_space_add_derived";
    kt_status sst = changeable(sp, where);
    if (sst != KT_OK) return sst;
    kt__expr *e = NULL;
    reads r;
    kt_status st = parse(sp, expression, where, &e, &r);
    if (st == KT_OK) st = add_slot(sp, name, SLOT_DERIVED, sp->nderived, where);
    if (st != KT_OK) {
        kt__expr_free(e);
        return st;
    }
    derived *ds = grow(sp->derived, sp->nderived, sizeof *ds);
    if (ds == NULL) {
        kt__expr_free(e);
        free(sp->slots[--sp->nslots].name);
        return kt__err(KT_ERR_NO_MEMORY, "%s: out of memory", where);
    }
    sp->derived = ds;
    ds[sp->nderived++] = (derived){sp->nslots - 1, e, r.inputs};
    sp->code_inputs |= r.inputs; /* every derived value reaches the code as a define */
    return KT_OK;
}

kt_status kt_space_set_geometry(kt_space *sp, kt_geometry kind, const char *const global[3], const char *const local[3],
                                const char *shared_memory) {
    const char *where = "kt_space_set_geometry";
    kt_status sst = changeable(sp, where);
    if (sst != KT_OK) return sst;
    if (kind != KT_GEOMETRY_GRID && kind != KT_GEOMETRY_GLOBAL)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "%s: kind %d is not GRID or GLOBAL", where, (int)kind);
    kt__expr *g[3] = {0}, *l[3] = {0}, *sm = NULL;
    reads r;
    kt_status st = KT_OK;
    uint64_t gin[3] = {0}, lin = 0;
    for (int d = 0; d < 3 && st == KT_OK; d++) {
        if (global && global[d]) st = parse(sp, global[d], where, &g[d], &r);
        if (st == KT_OK && global && global[d]) gin[d] = r.inputs;
        if (st == KT_OK && local && local[d]) st = parse(sp, local[d], where, &l[d], &r);
        if (st == KT_OK && local && local[d]) lin |= r.inputs;
    }
    if (st == KT_OK && shared_memory) st = parse(sp, shared_memory, where, &sm, &r);
    if (st == KT_OK && shared_memory) lin |= r.inputs;
    if (st != KT_OK) {
        for (int d = 0; d < 3; d++) kt__expr_free(g[d]), kt__expr_free(l[d]);
        kt__expr_free(sm);
        return st;
    }
    for (int d = 0; d < 3; d++) {
        kt__expr_free(sp->global[d]);
        kt__expr_free(sp->local[d]);
        sp->global[d] = g[d];
        sp->local[d] = l[d];
    }
    kt__expr_free(sp->shmem);
    sp->shmem = sm;
    sp->kind = kind;
    sp->geometry_inputs = lin; /* replaces what an earlier geometry declared */
    for (int d = 0; d < 3; d++) sp->global_inputs[d] = gin[d];
    return KT_OK;
}

/* ---- enumeration -------------------------------------------------------------------------- */

typedef struct walk {
    const kt_space *sp;
    kt__configs *out;
    kt__value *slots;
    uint16_t *cur;
    kt__arena arena;
    const constraint **by_level; /* constraints grouped by level: [level][...] flattened */
    size_t *level_start;         /* nparams + 2 entries: level -1 .. nparams */
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

/* Evaluates the derived values of the configuration in w->slots, in declaration order. */
static kt_status eval_derived(const kt_space *sp, kt__value *slots, kt__arena *arena) {
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
        if (c == NULL) return kt__err(KT_ERR_NO_MEMORY, "kt_space_enumerate: out of memory at %zu configurations", out->n);
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
        if ((st = eval_derived(sp, w->slots, &w->arena)) != KT_OK) return st;
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
static kt_status bind_slots(const kt_space *sp, const kt__value *inputs, kt__value *slots) {
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
                       ? bind_slots(sp, inputs, w.slots)
                       : kt__err(KT_ERR_NO_MEMORY, "kt_space_enumerate: out of memory");
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

/* ---- reading configurations ---------------------------------------------------------------- */

size_t kt_space_param_count(const kt_space *sp) { return sp ? sp->nparams : 0; }

const char *kt_space_param_name(const kt_space *sp, size_t index) {
    return (sp && index < sp->nparams) ? sp->slots[sp->params[index].slot].name : NULL;
}

size_t kt_space_config_count(const kt_space *sp) { return sp ? sp->last.n : 0; }

kt_status kt__space_slots(const kt_space *sp, const kt__configs *c, size_t index, const kt__value *inputs,
                          kt__value *slots, kt__arena *arena) {
    if (index >= c->n)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "configuration %zu is out of range (the space has %zu)", index, c->n);
    kt_status st = bind_slots(sp, inputs, slots);
    if (st != KT_OK) return st;
    const uint16_t *cur = c->idx + index * sp->nparams;
    for (size_t p = 0; p < sp->nparams; p++) slots[sp->params[p].slot] = sp->params[p].values[cur[p]];
    return eval_derived(sp, slots, arena);
}

kt_status kt__space_config_slots(const kt_space *sp, size_t index, kt__value *slots, kt__arena *arena) {
    return kt__space_slots(sp, &sp->last, index, NULL, slots, arena);
}

size_t kt__space_slot_count(const kt_space *sp) { return sp->nslots; }
size_t kt__space_param_count_all(const kt_space *sp) { return sp->nparams + sp->nderived; }

/* Formats the parameters and derived values of slots as name=value pairs joined by sep. A
 * value is never cut: text that does not fit in len fails with KT_ERR_LIMIT (see
 * kt__space_format_len for the length needed). */
kt_status kt__space_format_slots(const kt_space *sp, const kt__value *slots, const char *prefix, const char *sep,
                                 char *buf, size_t len) {
    size_t k = 0;
    if (len) buf[0] = '\0';
    for (size_t i = 0; i < sp->nslots; i++) {
        if (sp->slots[i].kind == SLOT_INPUT) continue;
        char num[64], *heap;
        int vlen;
        const char *value = value_text(&slots[i], num, &heap, &vlen);
        if (value == NULL) return kt__err(KT_ERR_NO_MEMORY, "configuration text: out of memory");
        int n = snprintf(buf + k, len > k ? len - k : 0, "%s%s%s=%.*s", k ? sep : "", prefix, sp->slots[i].name, vlen, value);
        free(heap);
        if (n < 0 || k + (size_t)n >= len) return kt__err(KT_ERR_LIMIT, "configuration text needs more than %zu bytes", len);
        k += (size_t)n;
    }
    return KT_OK;
}

size_t kt__space_format_len(const kt_space *sp, const kt__value *slots, const char *prefix, const char *sep) {
    size_t n = 1;
    for (size_t i = 0; i < sp->nslots; i++) {
        if (sp->slots[i].kind == SLOT_INPUT) continue;
        n += strlen(sep) + strlen(prefix) + strlen(sp->slots[i].name) + 1 + kt__value_format_len(&slots[i]);
    }
    return n;
}

kt_status kt_space_config_format(const kt_space *sp, size_t index, char *buf, size_t len) {
    if (sp == NULL || buf == NULL) return kt__err(KT_ERR_NULL, "kt_space_config_format: %s is NULL", sp ? "buf" : "sp");
    kt__value *slots = calloc(sp->nslots ? sp->nslots : 1, sizeof *slots);
    if (slots == NULL) return kt__err(KT_ERR_NO_MEMORY, "kt_space_config_format: out of memory");
    kt__arena arena = {0};
    kt_status st = kt__space_config_slots(sp, index, slots, &arena);
    if (st == KT_OK) st = kt__space_format_slots(sp, slots, "", ",", buf, len);
    kt__arena_free(&arena);
    free(slots);
    return st;
}

kt_status kt_space_config_int(const kt_space *sp, size_t index, size_t param, int64_t *out) {
    if (sp == NULL || out == NULL) return kt__err(KT_ERR_NULL, "kt_space_config_int: %s is NULL", sp ? "out" : "sp");
    if (index >= sp->last.n || param >= sp->nparams)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_space_config_int: configuration %zu / parameter %zu out of range", index, param);
    const kt__value *v = &sp->params[param].values[sp->last.idx[index * sp->nparams + param]];
    if (!kt__value_to_int(v, out))
        return kt__err(KT_ERR_ARG_TYPE, "kt_space_config_int: parameter '%s' is not an integer",
                       sp->slots[sp->params[param].slot].name);
    return KT_OK;
}

static const kt__value *cfg_param(const kt_config *cfg, size_t param) {
    if (cfg == NULL || param >= cfg->sp->nparams) return NULL;
    return &cfg->slots[cfg->sp->params[param].slot];
}

int64_t kt_config_int(const kt_config *cfg, size_t param) {
    const kt__value *v = cfg_param(cfg, param);
    int64_t i = 0;
    if (v) kt__value_to_int(v, &i);
    return i;
}

double kt_config_double(const kt_config *cfg, size_t param) {
    const kt__value *v = cfg_param(cfg, param);
    double d = 0;
    if (v) kt__value_to_double(v, &d);
    return d;
}

const char *kt_config_string(const kt_config *cfg, size_t param) {
    const kt__value *v = cfg_param(cfg, param);
    return (v && v->t == KT_V_STR) ? v->str.s : NULL;
}

/* ---- geometry ------------------------------------------------------------------------------- */

static kt_status dim(const kt__expr *e, const kt__value *slots, kt__arena *arena, int64_t dflt, const char *what,
                     int64_t *out) {
    if (e == NULL) {
        *out = dflt;
        return KT_OK;
    }
    kt__value v;
    kt_status st = kt__expr_eval(e, slots, arena, what, &v);
    if (st != KT_OK) return st;
    if (v.t == KT_V_FLOAT) {
        if (v.f != (double)(int64_t)v.f)
            return kt__err(KT_ERR_INVALID_ARGUMENT, "%s: expression '%s' gave %g, not a whole number", what, kt__expr_text(e), v.f);
        v = (kt__value){.t = KT_V_INT, .i = (int64_t)v.f};
    }
    if (!kt__value_to_int(&v, out) || *out < 0)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "%s: expression '%s' does not give a size >= 0", what, kt__expr_text(e));
    return KT_OK;
}

uint64_t kt__space_fixed_inputs(const kt_space *sp) {
    uint64_t fixed = sp->code_inputs | sp->geometry_inputs;
    for (int d = 0; d < 3; d++)
        if (sp->kind == KT_GEOMETRY_GLOBAL && sp->local[d] != NULL) fixed |= sp->global_inputs[d];
    return fixed;
}
uint64_t kt__space_global_inputs(const kt_space *sp, int d) {
    /* a global size counted in work-items must be a multiple of its local size (OpenCL 1.2):
     * where one is declared, the global size decides validity, so it is no per-call size */
    return (sp->kind == KT_GEOMETRY_GLOBAL && sp->local[d] != NULL) ? 0 : sp->global_inputs[d];
}
size_t kt__space_input_slot(const kt_space *sp, size_t index) { return sp->inputs[index].slot; }

kt_status kt__space_global(const kt_space *sp, int d, const kt__value *slots, kt__arena *arena, int64_t *out) {
    return dim(sp->global[d], slots, arena, 1, "geometry: global size", out);
}

kt_status kt__space_geometry(const kt_space *sp, const kt__value *slots, kt__arena *arena, kt__geometry *g) {
    kt_status st = KT_OK;
    for (int d = 0; d < 3 && st == KT_OK; d++) {
        st = dim(sp->global[d], slots, arena, 1, "geometry: global size", &g->global[d]);
        if (st == KT_OK) st = dim(sp->local[d], slots, arena, 1, "geometry: local size", &g->local[d]);
    }
    if (st == KT_OK) st = dim(sp->shmem, slots, arena, 0, "geometry: shared memory", &g->shared_memory);
    g->kind = sp->kind;
    return st;
}

/* ---- sizes over the whole space -------------------------------------------------------------- */

kt_status kt_space_eval_int(const kt_space *sp, const char *expression, int64_t *out) {
    if (sp == NULL || expression == NULL || out == NULL)
        return kt__err(KT_ERR_NULL, "kt_space_eval_int: %s is NULL", sp ? expression ? "out" : "expression" : "sp");
    kt__arena arena = {0};
    kt__value v;
    kt_status st = kt__space_eval_whole(sp, expression, "kt_space_eval_int", &arena, &v);
    if (st == KT_OK && v.t == KT_V_FLOAT && v.f == (double)(int64_t)v.f) v = (kt__value){.t = KT_V_INT, .i = (int64_t)v.f};
    if (st == KT_OK && !kt__value_to_int(&v, out))
        st = kt__err(KT_ERR_INVALID_ARGUMENT, "kt_space_eval_int: expression '%s' does not give an integer", expression);
    kt__arena_free(&arena);
    return st;
}

typedef struct list_env {
    const kt_space *sp;
    kt__value *slots;
} list_env;

static int resolve_lists(const char *name, size_t len, void *user) {
    list_env *le = user;
    long i = find_slot(le->sp, name, len);
    return i < 0 || le->sp->slots[i].kind == SLOT_DERIVED ? -1 : (int)i;
}

kt_status kt__space_eval_whole(const kt_space *sp, const char *text, const char *where, kt__arena *arena, kt__value *out) {
    kt__value *slots = calloc(sp->nslots ? sp->nslots : 1, sizeof *slots);
    if (slots == NULL) return kt__err(KT_ERR_NO_MEMORY, "%s: out of memory", where);
    kt_status st = bind_slots(sp, NULL, slots);
    for (size_t p = 0; p < sp->nparams; p++)
        slots[sp->params[p].slot] = (kt__value){.t = KT_V_LIST, .list = {sp->params[p].values, sp->params[p].n}};
    list_env le = {sp, slots};
    kt__expr *e = NULL;
    if (st == KT_OK) st = kt__expr_parse(text, resolve_lists, &le, where, &e);
    if (st == KT_OK) st = kt__expr_eval(e, slots, arena, where, out);
    if (st == KT_OK && (out->t == KT_V_STR || out->t == KT_V_LIST)) {
        /* strings and lists point into the expression; copy before freeing it */
        kt__value copy = *out;
        st = kt__value_copy(&copy, arena, out) ? KT_OK : kt__err(KT_ERR_NO_MEMORY, "%s: out of memory", where);
    }
    kt__expr_free(e);
    free(slots);
    return st;
}

/* ---- identity ----------------------------------------------------------------------------- */

static uint64_t hash_text(const char *s, uint64_t h) { return kt__fnv1a(s ? s : "", s ? strlen(s) + 1 : 1, h); }

static uint64_t hash_value(const kt__value *v, uint64_t h) {
    h = kt__fnv1a(&v->t, sizeof v->t, h);
    switch (v->t) {
    case KT_V_BOOL: return kt__fnv1a(&v->b, sizeof v->b, h);
    case KT_V_INT: return kt__fnv1a(&v->i, sizeof v->i, h);
    case KT_V_FLOAT: return kt__fnv1a(&v->f, sizeof v->f, h);
    case KT_V_STR: return kt__fnv1a(v->str.s, v->str.len, h);
    default:
        for (size_t i = 0; v->t == KT_V_LIST && i < v->list.n; i++) h = hash_value(&v->list.items[i], h);
        return h;
    }
}

uint64_t kt__space_hash(const kt_space *sp, uint64_t h) {
    for (size_t i = 0; i < sp->nslots; i++) {
        h = hash_text(sp->slots[i].name, h);
        h = kt__fnv1a(&sp->slots[i].kind, sizeof sp->slots[i].kind, h);
    }
    for (size_t i = 0; i < sp->nparams; i++)
        for (size_t k = 0; k < sp->params[i].n; k++) h = hash_value(&sp->params[i].values[k], h);
    for (size_t i = 0; i < sp->ninputs; i++)
        if (sp->inputs[i].bound) h = hash_value(&sp->inputs[i].value, h);
    for (size_t i = 0; i < sp->nderived; i++) h = hash_text(kt__expr_text(sp->derived[i].e), h);
    for (size_t i = 0; i < sp->ncons; i++) {
        /* a constraint function counts by its place only: its code is not ours to read, and its
         * address changes from process to process */
        h = hash_text(sp->cons[i].e ? kt__expr_text(sp->cons[i].e) : "<function>", h);
    }
    h = kt__fnv1a(&sp->kind, sizeof sp->kind, h);
    for (int d = 0; d < 3; d++) {
        h = hash_text(sp->global[d] ? kt__expr_text(sp->global[d]) : NULL, h);
        h = hash_text(sp->local[d] ? kt__expr_text(sp->local[d]) : NULL, h);
    }
    return hash_text(sp->shmem ? kt__expr_text(sp->shmem) : NULL, h);
}
