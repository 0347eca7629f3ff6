/*
 * space.c - declaring a space: parameters (value lists), inputs (bound per call or once),
 * constraints (expressions or callbacks), derived values, launch geometry; and the hash of
 * what defines it. A space can change until an op holds it (kt__space_retain seals it).
 * Enumeration is in space_enum.c, reading configurations in space_config.c.
 */
#include "space/space_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- declaration -------------------------------------------------------------------------- */

kt_status kt_space_create(kt_space **out) {
    if (out == NULL) return kt__err(KT_ERR_NULL, "kt_space_create: out is NULL");
    *out = calloc(1, sizeof **out);
    if (*out == NULL) return kt__err(KT_ERR_NO_MEMORY, "kt_space_create: out of memory allocating a space");
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

long kt__space_find_slot(const kt_space *sp, const char *name, size_t len) {
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
    if (kt__space_find_slot(sp, copy, strlen(copy)) >= 0) {
        free(copy);
        return kt__err(KT_ERR_DUPLICATE, "%s: the name '%s' is already declared in this space", where, name);
    }
    slot *s = realloc(sp->slots, (sp->nslots + 1) * sizeof *s);
    if (s == NULL) {
        free(copy);
        return kt__err(KT_ERR_NO_MEMORY, "%s: out of memory growing the space's names for '%s'", where, name);
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
    uint64_t inputs;  /* inputs read, directly or through derived values */
} reads;

static int resolve(const char *name, size_t len, void *user) {
    reads *r = user;
    long i = kt__space_find_slot(r->sp, name, len);
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
    *r = (reads){sp, -1, false, 0};
    return kt__expr_parse(text, resolve, r, where, out);
}

static bool param_value_ok(const kt__value *v) {
    return v->t == KT_V_INT || v->t == KT_V_FLOAT || v->t == KT_V_BOOL || v->t == KT_V_STR;
}

/* Copies values into the space's store. */
static kt_status store_values(kt_space *sp, const kt__value *src, size_t n, kt__value **out, const char *where);

const char *kt__space_value_text(const kt__value *v, char num[64], char **heap, int *vlen) {
    *heap = NULL;
    if (v->t == KT_V_STR) {
        *vlen = (int)v->str.len;
        return v->str.s;
    }
    if (v->t == KT_V_BOOL || v->t == KT_V_INT) { /* the commonest values, without snprintf */
        *vlen = kt__int_text(v->t == KT_V_BOOL ? (int64_t)v->b : v->i, num);
        return num;
    }
    if (v->t == KT_V_LIST) { /* a derived list */
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
    const char *t = kt__space_value_text(v, num, &heap, &len);
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
    kt_status st = r ? KT_OK
                     : kt__err(KT_ERR_NO_MEMORY, "%s: parameter '%s': out of memory allocating %zu value texts", where,
                               name ? name : "", n);
    for (size_t i = 0; st == KT_OK && i < n; i++)
        if ((r[i].text = define_text(&list->list.items[i])) == NULL)
            st = kt__err(KT_ERR_NO_MEMORY, "%s: parameter '%s': out of memory formatting value %zu", where, name ? name : "", i);
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
    char named[160]; /* the expression's errors name the parameter too */
    snprintf(named, sizeof named, "%s: parameter '%.100s'", where, name ? name : "");
    kt_status st = parse(sp, values, named, &e, &r);
    if (st != KT_OK) return st;
    kt__arena scratch = {0};
    kt__value v;
    st = kt__expr_eval(e, NULL, &scratch, named, &v);
    if (st == KT_OK && v.t != KT_V_LIST) st = kt__err(KT_ERR_INVALID_ARGUMENT, "%s: values '%s' is not a list", named, values);
    if (st == KT_OK && v.list.n == 0) st = kt__err(KT_ERR_INVALID_ARGUMENT, "%s: values '%s' is an empty list", named, values);
    if (st == KT_OK && v.list.n > 65535) st = kt__err(KT_ERR_LIMIT, "%s has %zu values; at most 65535", named, v.list.n);
    for (size_t i = 0; st == KT_OK && i < v.list.n; i++)
        if (!param_value_ok(&v.list.items[i]))
            st = kt__err(KT_ERR_INVALID_ARGUMENT, "%s: value %zu is not an int, float, bool or string", named, i);
    if (st == KT_OK) st = distinct_values(name, values, &v, where);
    kt__value *stored = NULL;
    if (st == KT_OK) st = store_values(sp, v.list.items, v.list.n, &stored, where);
    if (st == KT_OK) st = add_slot(sp, name, SLOT_PARAM, sp->nparams, where);
    if (st == KT_OK) {
        param *params = grow(sp->params, sp->nparams, sizeof *params);
        if (params == NULL) {
            free(sp->slots[--sp->nslots].name);
            st = kt__err(KT_ERR_NO_MEMORY, "%s: out of memory growing the parameters for '%s'", where, name);
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
    if (text == NULL)
        return kt__err(KT_ERR_NO_MEMORY, "kt_space_add_param_ints: parameter '%s': out of memory allocating the text of %zu values",
                       name ? name : "", n);
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
    if (dst == NULL) return kt__err(KT_ERR_NO_MEMORY, "%s: out of memory copying %zu values into the space", where, n);
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
        return kt__err(KT_ERR_NO_MEMORY, "kt_space_add_input: out of memory growing the inputs for '%s'", name);
    }
    sp->inputs = inputs;
    inputs[sp->ninputs++] = (input){.slot = sp->nslots - 1};
    return KT_OK;
}

static kt_status find_input(kt_space *sp, const char *name, const char *where, input **out) {
    kt_status sst = changeable(sp, where);
    if (sst != KT_OK) return sst;
    if (name == NULL) return kt__err(KT_ERR_NULL, "%s: name is NULL", where);
    long i = kt__space_find_slot(sp, name, strlen(name));
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
    if (items == NULL) return kt__err(KT_ERR_NO_MEMORY, "kt_space_bind_ints: input '%s': out of memory copying %zu values", name, n);
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
        return kt__err(KT_ERR_NO_MEMORY, "kt_space_add_constraint: out of memory growing the constraints for '%s'", expression);
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
    if (cons == NULL) return kt__err(KT_ERR_NO_MEMORY, "kt_space_add_constraint_fn: out of memory growing the constraints");
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
        return kt__err(KT_ERR_NO_MEMORY, "%s: out of memory growing the derived values for '%s'", where, name);
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
