/*
 * space_config.c - reading a space's configurations: the slot values of one (inputs,
 * parameters, derived values), its configuration text ("A=1,B=2") and defines, its parameter
 * values through kt_config (constraint callbacks), its launch geometry, and expressions
 * evaluated over the whole space (T1 argument sizes).
 */
#include "space/space_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t kt_space_param_count(const kt_space *sp) { return sp ? sp->nparams : 0; }

const char *kt_space_param_name(const kt_space *sp, size_t index) {
    return (sp && index < sp->nparams) ? sp->slots[sp->params[index].slot].name : NULL;
}

size_t kt_space_config_count(const kt_space *sp) { return sp ? sp->last.n : 0; }

const kt__configs *kt__space_last(const kt_space *sp) { return &sp->last; }

size_t kt__space_param_nvalues(const kt_space *sp, size_t p) { return p < sp->nparams ? sp->params[p].n : 0; }

kt_status kt__space_slots(const kt_space *sp, const kt__configs *c, size_t index, const kt__value *inputs,
                          kt__value *slots, kt__arena *arena) {
    if (index >= c->n)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "configuration %zu is out of range (the space has %zu)", index, c->n);
    kt_status st = kt__space_bind_slots(sp, inputs, slots);
    if (st != KT_OK) return st;
    const uint16_t *cur = c->idx + index * sp->nparams;
    for (size_t p = 0; p < sp->nparams; p++) slots[sp->params[p].slot] = sp->params[p].values[cur[p]];
    return kt__space_eval_derived(sp, slots, arena);
}

kt_status kt__space_config_slots(const kt_space *sp, size_t index, kt__value *slots, kt__arena *arena) {
    return kt__space_slots(sp, &sp->last, index, NULL, slots, arena);
}

size_t kt__space_slot_count(const kt_space *sp) { return sp->nslots; }
size_t kt__space_param_count_all(const kt_space *sp) { return sp->nparams + sp->nderived; }

/* Appends n bytes of s at *k in buf (len bytes, always NUL-terminated); false when they do not fit. */
static bool append(char *buf, size_t len, size_t *k, const char *s, size_t n) {
    if (*k + n >= len) return false;
    memcpy(buf + *k, s, n);
    *k += n;
    buf[*k] = '\0';
    return true;
}

/* Formats the parameters and derived values of slots as name=value pairs joined by sep. A
 * value is never cut: text that does not fit in len fails with KT_ERR_LIMIT (see
 * kt__space_format_len for the length needed). */
kt_status kt__space_format_slots(const kt_space *sp, const kt__value *slots, const char *prefix, const char *sep,
                                 char *buf, size_t len) {
    /* memcpy, not snprintf: every unit of a space of millions is formatted when it is planned */
    size_t k = 0, nsep = strlen(sep), nprefix = strlen(prefix);
    if (len) buf[0] = '\0';
    for (size_t i = 0; i < sp->nslots; i++) {
        if (sp->slots[i].kind == SLOT_INPUT) continue;
        if (slots[i].t == KT_V_LIST && kt__value_format_len(&slots[i]) > len - k) /* never formatted to be cut */
            return kt__err(KT_ERR_LIMIT, "configuration text needs more than %zu bytes", len);
        char num[64], *heap;
        int vlen;
        const char *value = kt__space_value_text(&slots[i], num, &heap, &vlen);
        if (value == NULL)
            return kt__err(KT_ERR_NO_MEMORY, "configuration text: out of memory formatting the value of '%s'", sp->slots[i].name);
        const char *name = sp->slots[i].name;
        bool fit = (k == 0 || append(buf, len, &k, sep, nsep)) && append(buf, len, &k, prefix, nprefix) &&
                   append(buf, len, &k, name, strlen(name)) && append(buf, len, &k, "=", 1) &&
                   append(buf, len, &k, value, (size_t)vlen);
        free(heap);
        if (!fit) return kt__err(KT_ERR_LIMIT, "configuration text needs more than %zu bytes", len);
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
    if (slots == NULL) return kt__err(KT_ERR_NO_MEMORY, "kt_space_config_format: out of memory allocating %zu slots", sp->nslots);
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
        int64_t whole;
        if (!kt__float_whole(v.f, &whole))
            return kt__err(KT_ERR_INVALID_ARGUMENT, "%s: expression '%s' gave %g, not a whole number within 64 bits", what, kt__expr_text(e), v.f);
        v = (kt__value){.t = KT_V_INT, .i = whole};
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

bool kt__space_global_compile(const kt_space *sp, int d, const kt__value *slots, const int *var, kt__iprog *out) {
    return sp->global[d] != NULL && kt__expr_compile_int(sp->global[d], slots, var, out);
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
    int64_t whole;
    if (st == KT_OK && v.t == KT_V_FLOAT && kt__float_whole(v.f, &whole)) v = (kt__value){.t = KT_V_INT, .i = whole};
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
    long i = kt__space_find_slot(le->sp, name, len);
    return i < 0 || le->sp->slots[i].kind == SLOT_DERIVED ? -1 : (int)i;
}

kt_status kt__space_eval_whole(const kt_space *sp, const char *text, const char *where, kt__arena *arena, kt__value *out) {
    kt__value *slots = calloc(sp->nslots ? sp->nslots : 1, sizeof *slots);
    if (slots == NULL) return kt__err(KT_ERR_NO_MEMORY, "%s: out of memory allocating %zu slots", where, sp->nslots);
    kt_status st = kt__space_bind_slots(sp, NULL, slots);
    for (size_t p = 0; p < sp->nparams; p++)
        slots[sp->params[p].slot] = (kt__value){.t = KT_V_LIST, .list = {sp->params[p].values, sp->params[p].n}};
    list_env le = {sp, slots};
    kt__expr *e = NULL;
    if (st == KT_OK) st = kt__expr_parse(text, resolve_lists, &le, where, &e);
    if (st == KT_OK) st = kt__expr_eval(e, slots, arena, where, out);
    if (st == KT_OK && (out->t == KT_V_STR || out->t == KT_V_LIST)) {
        /* strings and lists point into the expression; copy before freeing it */
        kt__value copy = *out;
        st = kt__value_copy(&copy, arena, out) ? KT_OK : kt__err(KT_ERR_NO_MEMORY, "%s: out of memory copying the value of '%s'", where, text);
    }
    kt__expr_free(e);
    free(slots);
    return st;
}
