/*
 * expr_builtins.c - the built-in functions of the expression language, as Python 3 defines
 * them: min, max, abs, int, float, len, range, round (ties to even), sum, bool, list. sum, min,
 * max and list also take a generator expression as their only argument (the parser allows it for
 * those four only; expr_eval.c runs sum, min and max over it without making its list, through
 * kt__expr_reduce). range() and the lists they make count against the bound of one evaluation
 * (KT__EXPR_MAX_ITEMS, expr.h).
 */
#include "space/expr_int.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const kt__expr_builtin_names[KT__NBUILTINS] = {"min", "max", "abs", "int", "float", "len",
                                                           "range", "round", "sum", "bool", "list"};

/* Python's round(): to nearest, ties to even. */
static double round_even(double v) {
    double r = round(v);
    if (fabs(v - trunc(v)) == 0.5) r = 2.0 * round(v / 2.0);
    return r;
}

kt_status kt__expr_range(const evalctx *x, const kt__value *args, int n, int col, int64_t v[3], int64_t *count) {
    if (n < 1 || n > 3) return EERR(x, col, "range expected 1 to 3 arguments, got %d", n);
    v[0] = 0, v[1] = 0, v[2] = 1;
    for (int i = 0; i < n; i++) {
        if (args[i].t == KT_V_FLOAT || !kt__num_int(&args[i], &v[n == 1 ? 1 : i]))
            return EERR(x, col, "range() arguments must be integers, not '%s'", kt__value_type_name(&args[i]));
    }
    if (v[2] == 0) return EERR(x, col, "range() arg 3 must not be zero");
    /* the distance in uint64: range(-2**63, 2**63 - 1) must not overflow on the way to "too long" */
    uint64_t c = 0;
    if (v[2] > 0 && v[1] > v[0]) c = ((uint64_t)v[1] - (uint64_t)v[0] - 1) / (uint64_t)v[2] + 1;
    if (v[2] < 0 && v[1] < v[0]) c = ((uint64_t)v[0] - (uint64_t)v[1] - 1) / (0 - (uint64_t)v[2]) + 1;
    if (c > KT__EXPR_MAX_ITEMS) return EERR(x, col, "range() of %llu items is too long: at most %d", (unsigned long long)c, KT__EXPR_MAX_ITEMS);
    *count = (int64_t)c;
    return KT_OK;
}

kt_status kt__expr_reduce(const evalctx *x, int b, kt__value *acc, bool *have, const kt__value *v, int col) {
    if (b == B_SUM) return kt__expr_binary(x, OP_ADD, acc, v, col, acc);
    int c;
    if (!*have) {
        *acc = *v;
        *have = true;
    } else if (!kt__expr_order(v, acc, &c)) {
        return EERR(x, col, "'<' not supported between '%s' and '%s'", kt__value_type_name(v), kt__value_type_name(acc));
    } else if ((b == B_MIN && c < 0) || (b == B_MAX && c > 0 && c != 2)) {
        *acc = *v;
    }
    return KT_OK;
}

kt_status kt__expr_reduced(const evalctx *x, int b, const kt__value *acc, bool have, int col, kt__value *out) {
    if (b != B_SUM && !have) return EERR(x, col, "%s() arg is an empty sequence", kt__expr_builtin_names[b]);
    *out = *acc;
    return KT_OK;
}

/* min, max or sum over args (one list, or min's and max's several arguments). */
static kt_status fold(const evalctx *x, int b, const kt__value *args, int n, int col, kt__value *out) {
    const kt__value *items = args;
    size_t count = (size_t)n;
    if (b == B_SUM && (n != 1 || args[0].t != KT_V_LIST)) return EERR(x, col, "sum() takes one list");
    if (n == 1) {
        if (args[0].t != KT_V_LIST) return EERR(x, col, "'%s' object is not iterable", kt__value_type_name(&args[0]));
        items = args[0].list.items;
        count = args[0].list.n;
    }
    kt__value acc = kt__vint(0);
    bool have = false;
    kt_status st;
    for (size_t i = 0; i < count; i++)
        if ((st = kt__expr_reduce(x, b, &acc, &have, &items[i], col)) != KT_OK) return st;
    return kt__expr_reduced(x, b, &acc, have, col, out);
}

/* range(): its list, charged against the evaluation's bound. */
static kt_status range_list(const evalctx *x, const kt__value *args, int n, int col, kt__value *out) {
    int64_t v[3], count;
    kt_status st = kt__expr_range(x, args, n, col, v, &count);
    if (st == KT_OK) st = kt__expr_charge(x, (size_t)count, col, "range()");
    if (st != KT_OK) return st;
    kt__value *items = kt__arena_alloc(x->arena, (size_t)(count ? count : 1) * sizeof *items);
    if (items == NULL) return EOOM(x, col, "the list of range()");
    for (int64_t i = 0; i < count; i++) items[i] = kt__vint(kt__range_item(v, i));
    *out = (kt__value){.t = KT_V_LIST, .list = {items, (size_t)count}};
    return KT_OK;
}

/* round(number, digits), as Python rounds: an integer to a multiple of 10**-digits, ties to even;
 * a float to the nearest double of its decimal rounding. */
static kt_status round_digits(const evalctx *x, const kt__value *args, int col, kt__value *out) {
    double f;
    int64_t digits;
    if (!kt__num_double(&args[0], &f) || !kt__num_int(&args[1], &digits) || args[1].t == KT_V_FLOAT)
        return EERR(x, col, "round() takes a number and an integer");
    if (args[0].t != KT_V_FLOAT) {
        int64_t i = 0, p = 1;
        kt__num_int(&args[0], &i);
        for (int64_t d = digits; d < 0 && p <= INT64_MAX / 10; d++) p *= 10;
        if (digits >= 0 || p == 1) {
            *out = kt__vint(i);
        } else { /* to a multiple of p, ties to even */
            int64_t q = i / p, r = i % p;
            if (r < 0) r += p, q--;
            if (2 * r > p || (2 * r == p && (q & 1))) q++;
            *out = kt__vint(q * p);
        }
        return KT_OK;
    }
    if (!isfinite(f) || digits > 300) {
        *out = args[0];
    } else if (digits >= 0) { /* printf rounds the exact binary value correctly, as Python does */
        char buf[720]; /* 309 digits of the largest double, a point, 300 decimals, a sign */
        snprintf(buf, sizeof buf, "%.*f", (int)digits, f);
        *out = kt__vfloat(strtod(buf, NULL));
    } else {
        double scale = pow(10.0, (double)-digits);
        *out = kt__vfloat(round_even(f / scale) * scale);
    }
    return KT_OK;
}

/* The built-ins of one argument, a: abs, len, bool, list, int, round, float. */
static kt_status one_argument(const evalctx *x, int b, const kt__value *a, int col, kt__value *out) {
    const char *name = kt__expr_builtin_names[b];
    switch (b) {
    case B_ABS:
        if (a->t == KT_V_FLOAT) *out = kt__vfloat(fabs(a->f));
        else if (a->t == KT_V_INT || a->t == KT_V_BOOL) {
            int64_t i = 0;
            kt__num_int(a, &i);
            if (i == INT64_MIN) return EERR(x, col, "integer overflow in abs()");
            *out = kt__vint(i < 0 ? -i : i);
        } else return EERR(x, col, "bad operand type for abs(): '%s'", kt__value_type_name(a));
        return KT_OK;
    case B_LEN:
        if (a->t == KT_V_LIST) *out = kt__vint((int64_t)a->list.n);
        else if (a->t == KT_V_STR) *out = kt__vint((int64_t)a->str.len);
        else return EERR(x, col, "object of type '%s' has no len()", kt__value_type_name(a));
        return KT_OK;
    case B_BOOL: *out = kt__vbool(kt__truthy(a)); return KT_OK;
    case B_LIST: /* list(range(...)) as Kernel Tuner's T1 files write it; a string gives its characters */
        if (a->t == KT_V_LIST) {
            *out = *a;
        } else if (a->t == KT_V_STR) {
            kt_status st = kt__expr_charge(x, 2 * a->str.len, col, "list()"); /* strings of one character */
            if (st != KT_OK) return st;
            kt__value *items = kt__arena_alloc(x->arena, (a->str.len ? a->str.len : 1) * sizeof *items);
            if (items == NULL) return EOOM(x, col, "the characters of a string for list()");
            for (size_t i = 0; i < a->str.len; i++) items[i] = (kt__value){.t = KT_V_STR, .str = {a->str.s + i, 1}};
            *out = (kt__value){.t = KT_V_LIST, .list = {items, a->str.len}};
        } else {
            return EERR(x, col, "'%s' object is not iterable", kt__value_type_name(a));
        }
        return KT_OK;
    case B_INT:
    case B_ROUND:
        if (a->t == KT_V_INT || a->t == KT_V_BOOL) {
            int64_t i = 0;
            kt__num_int(a, &i);
            *out = kt__vint(i);
        } else if (a->t == KT_V_FLOAT) {
            double f = b == B_ROUND ? round_even(a->f) : trunc(a->f);
            if (!(f >= -9.2e18 && f <= 9.2e18)) return EERR(x, col, "cannot convert float %g to integer", a->f);
            *out = kt__vint((int64_t)f);
        } else if (a->t == KT_V_STR && b == B_INT) {
            char buf[64], *end;
            snprintf(buf, sizeof buf, "%.*s", (int)a->str.len, a->str.s);
            errno = 0;
            long long v = strtoll(buf, &end, 10);
            while (*end == ' ') end++;
            if (end == buf || *end || errno) return EERR(x, col, "invalid literal for int(): '%s'", buf);
            *out = kt__vint(v);
        } else return EERR(x, col, "%s() argument must be a number, not '%s'", name, kt__value_type_name(a));
        return KT_OK;
    case B_FLOAT:
        if (a->t == KT_V_STR) {
            char buf[64], *end;
            snprintf(buf, sizeof buf, "%.*s", (int)a->str.len, a->str.s);
            double f = strtod(buf, &end);
            while (*end == ' ') end++;
            if (end == buf || *end) return EERR(x, col, "could not convert string to float: '%s'", buf);
            *out = kt__vfloat(f);
        } else {
            double f;
            if (!kt__num_double(a, &f)) return EERR(x, col, "float() argument must be a number, not '%s'", kt__value_type_name(a));
            *out = kt__vfloat(f);
        }
        return KT_OK;
    default: break;
    }
    return EERR(x, col, "unknown function");
}

kt_status kt__expr_call_builtin(const evalctx *x, int b, const kt__value *args, int n, int col, kt__value *out) {
    if (b == B_MIN || b == B_MAX || b == B_SUM) return fold(x, b, args, n, col, out);
    if (b == B_RANGE) return range_list(x, args, n, col, out);
    if (b == B_ROUND && n == 2) return round_digits(x, args, col, out);
    if (n != 1) return EERR(x, col, "%s() takes exactly one argument (%d given)", kt__expr_builtin_names[b], n);
    return one_argument(x, b, &args[0], col, out);
}
