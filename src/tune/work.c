/*
 * work.c - the work an op's call does (kt_op_set_work): floating-point operations and bytes
 * moved, as expressions of the language of spaces over the op's arguments (a scalar: its value;
 * a buffer: its element count) and, for a variant, its configuration's parameters. Evaluated for
 * each unit of a measured decision with the arguments it was measured on, so that a result can
 * be read as GFLOP/s and GB/s (kerntune/decision.h).
 */
#include "space/expr.h"
#include "tune/stages.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The names an expression may use, and their values. */
typedef struct env {
    const char *names[256];
    size_t lens[256];
    kt__value vals[256];
    size_t n;
} env;

static int resolve(const char *name, size_t len, void *user) {
    const env *e = user;
    for (size_t i = e->n; i-- > 0;) /* a parameter shadows an argument of its name */
        if (e->lens[i] == len && strncmp(e->names[i], name, len) == 0) return (int)i;
    return -1;
}

static void add(env *e, const char *name, size_t len, kt__value v) {
    if (e->n == sizeof e->names / sizeof e->names[0]) return;
    e->names[e->n] = name, e->lens[e->n] = len, e->vals[e->n++] = v;
}

/* A configuration value as the language would read it: an integer, a float, else a string. */
static kt__value config_value(const char *s, size_t len) {
    char buf[64];
    kt__value v = {.t = KT_V_STR, .str = {s, len}};
    if (len == 0 || len >= sizeof buf) return v;
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *end;
    errno = 0;
    long long i = strtoll(buf, &end, 10);
    if (*end == '\0' && errno == 0) return (kt__value){.t = KT_V_INT, .i = i};
    double f = strtod(buf, &end);
    if (*end == '\0') return (kt__value){.t = KT_V_FLOAT, .f = f};
    return v;
}

/* One formula's value for the environment, or -1 when it cannot be computed (a name it does
 * not have, a type or arithmetic error, a result that is not a number >= 0). */
static double eval(const char *text, env *e, kt__arena *arena) {
    if (text == NULL) return -1;
    kt__expr *x = NULL;
    double out = -1;
    kt__value v;
    if (kt__expr_parse(text, resolve, e, "kt_op_set_work", &x) == KT_OK &&
        kt__expr_eval(x, e->vals, arena, "kt_op_set_work", &v) == KT_OK) {
        if (v.t == KT_V_INT && v.i >= 0) out = (double)v.i;
        else if (v.t == KT_V_FLOAT && v.f >= 0 && isfinite(v.f)) out = v.f;
        else if (v.t == KT_V_BOOL) out = v.b;
    }
    kt__expr_free(x);
    kt__arena_reset(arena);
    return out;
}

void kt__work_eval(const kt_op *op, kt_decision *d, const kt_arg *args) {
    if ((op->work_flops == NULL && op->work_bytes == NULL) || args == NULL) return;
    env base = {.n = 0};
    for (size_t a = 0; a < op->nargs; a++) {
        const kt__argdecl *ad = &op->args[a];
        kt__value v = {.t = KT_V_INT, .i = 0};
        if (ad->type == KT_TYPE_BUFFER) v.i = ad->esize ? (int64_t)(args[a].bytes / ad->esize) : 0;
        else if (ad->type == KT_TYPE_F32) v = (kt__value){.t = KT_V_FLOAT, .f = args[a].f32};
        else if (ad->type == KT_TYPE_F64) v = (kt__value){.t = KT_V_FLOAT, .f = args[a].f64};
        else if (ad->type >= KT_TYPE_U8 && ad->type <= KT_TYPE_U64) v.i = (int64_t)args[a].u;
        else if (ad->type >= KT_TYPE_I8 && ad->type <= KT_TYPE_I64) v.i = args[a].i;
        else continue; /* bytes, half types: not a number the formulas may use */
        add(&base, ad->name, strlen(ad->name), v);
    }
    kt__arena arena = {0};
    for (size_t u = 0; u < d->nunits; u++) {
        kt__unit *un = &d->units[u];
        env e = base;
        for (const char *p = un->text; p && *p;) { /* "NAME=value,..." */
            const char *eq = strchr(p, '='), *end = strchr(p, ',');
            if (end == NULL) end = p + strlen(p);
            if (eq && eq < end) add(&e, p, (size_t)(eq - p), config_value(eq + 1, (size_t)(end - eq - 1)));
            p = *end ? end + 1 : end;
        }
        un->r.flops = eval(op->work_flops, &e, &arena);
        un->r.bytes = eval(op->work_bytes, &e, &arena);
        un->r.work_set = true;
    }
    kt__arena_free(&arena);
}
