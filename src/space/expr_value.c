/*
 * expr_value.c - values of the expression language (see expr.h): the arena they are made in,
 * numeric conversions, Python truthiness, and formatting as Python's repr.
 */
#include "space/expr_int.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct kt__arena_block {
    struct kt__arena_block *next;
    size_t cap, used;
    _Alignas(16) char data[];
};

void *kt__arena_alloc(kt__arena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (a->mem != NULL && a->used + n <= a->cap) {
        void *p = a->mem + a->used;
        a->used += n;
        return p;
    }
    if (a->mem == NULL && n <= 4096) { /* the first block, kept across resets */
        a->mem = malloc(4096);
        if (a->mem == NULL) return NULL;
        a->cap = 4096;
        a->used = n;
        return a->mem;
    }
    /* overflow blocks, each twice the last (16 KiB to 8 MiB), allocations packed into them: a
     * block per allocation cost 4 KiB and a malloc for every small list a comprehension made
     * (fuzz-expr found an evaluation within its bound of items that used 3 GB that way) */
    struct kt__arena_block *h = a->blocks;
    if (h != NULL && h->used + n <= h->cap) {
        void *p = h->data + h->used;
        h->used += n;
        return p;
    }
    size_t grow = h == NULL ? (size_t)16 << 10 : h->cap < ((size_t)8 << 20) ? 2 * h->cap : h->cap;
    size_t cap = n > grow ? n : grow;
    struct kt__arena_block *b = malloc(sizeof *b + cap);
    if (b == NULL) return NULL;
    b->next = a->blocks;
    b->cap = cap;
    b->used = n;
    a->blocks = b;
    return b->data;
}

bool kt__value_copy(const kt__value *src, kt__arena *arena, kt__value *out) {
    *out = *src;
    if (src->t == KT_V_STR) {
        char *s = kt__arena_alloc(arena, src->str.len + 1);
        if (s == NULL) return false;
        memcpy(s, src->str.s, src->str.len);
        s[src->str.len] = '\0';
        out->str.s = s;
    } else if (src->t == KT_V_LIST) {
        kt__value *items = kt__arena_alloc(arena, (src->list.n ? src->list.n : 1) * sizeof *items);
        if (items == NULL) return false;
        for (size_t i = 0; i < src->list.n; i++)
            if (!kt__value_copy(&src->list.items[i], arena, &items[i])) return false;
        out->list.items = items;
    }
    return true;
}

void kt__arena_reset(kt__arena *a) {
    while (a->blocks) {
        struct kt__arena_block *n = a->blocks->next;
        free(a->blocks);
        a->blocks = n;
    }
    a->used = 0;
}

void kt__arena_free(kt__arena *a) {
    kt__arena_reset(a);
    free(a->mem);
    a->mem = NULL;
    a->cap = 0;
}

/* ---- values ----------------------------------------------------------------------------------- */

bool kt__value_to_int(const kt__value *v, int64_t *out) { return kt__num_int(v, out); }
bool kt__value_to_double(const kt__value *v, double *out) { return kt__num_double(v, out); }

bool kt__float_whole(double f, int64_t *out) {
    if (!(f >= -0x1p63 && f < 0x1p63) || f != trunc(f)) return false; /* NaN fails the first test */
    *out = (int64_t)f;
    return true;
}

bool kt__value_truthy(const kt__value *v) { return kt__truthy(v); }

const char *kt__value_type_name(const kt__value *v) {
    static const char *const n[] = {"NoneType", "bool", "int", "float", "str", "list"};
    return n[v->t];
}

/* Python's repr of a float: the shortest digits that read back, in fixed notation when the
 * decimal exponent is in [-4, 16) (with ".0" when there is no fraction), else as d.ddde+XX. */
static void format_float(double f, char *buf, size_t len) {
    if (isnan(f)) {
        snprintf(buf, len, "nan");
        return;
    }
    if (isinf(f)) {
        snprintf(buf, len, f > 0 ? "inf" : "-inf");
        return;
    }
    char tmp[40];
    for (int prec = 0; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec, f);
        if (strtod(tmp, NULL) == f) break;
    }
    /* tmp is [-]d[.ddd]e[+-]XX: collect the digits and the exponent */
    const char *q = tmp;
    bool neg = *q == '-';
    if (neg) q++;
    char digits[24];
    size_t nd = 0;
    for (; *q && *q != 'e'; q++)
        if (isdigit((unsigned char)*q)) digits[nd++] = *q;
    int exp10 = atoi(q + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = '\0';
    char out[64];
    size_t k = 0;
    if (neg) out[k++] = '-';
    if (exp10 >= -4 && exp10 < 16) {
        if (exp10 < 0) {
            out[k++] = '0';
            out[k++] = '.';
            for (int i = 0; i < -exp10 - 1; i++) out[k++] = '0';
            for (size_t i = 0; i < nd; i++) out[k++] = digits[i];
        } else {
            for (int i = 0; i <= exp10; i++) out[k++] = (size_t)i < nd ? digits[i] : '0';
            out[k++] = '.';
            if ((size_t)exp10 + 1 < nd)
                for (size_t i = (size_t)exp10 + 1; i < nd; i++) out[k++] = digits[i];
            else
                out[k++] = '0';
        }
        out[k] = '\0';
    } else {
        out[k++] = digits[0];
        if (nd > 1) {
            out[k++] = '.';
            for (size_t i = 1; i < nd; i++) out[k++] = digits[i];
        }
        snprintf(out + k, sizeof out - k, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    }
    snprintf(buf, len, "%s", out);
}

void kt__value_format(const kt__value *v, char *buf, size_t len) {
    if (len == 0) return;
    switch (v->t) {
    case KT_V_NONE: snprintf(buf, len, "None"); break;
    case KT_V_BOOL: snprintf(buf, len, v->b ? "True" : "False"); break;
    case KT_V_INT: snprintf(buf, len, "%lld", (long long)v->i); break;
    case KT_V_FLOAT: format_float(v->f, buf, len); break;
    case KT_V_STR: snprintf(buf, len, "'%.*s'", (int)v->str.len, v->str.s); break;
    case KT_V_LIST: {
        size_t used = (size_t)snprintf(buf, len, "[");
        for (size_t i = 0; i < v->list.n && used + 1 < len; i++) { /* items straight into buf, whole */
            if (i) used += (size_t)snprintf(buf + used, len - used, ", ");
            if (used + 1 >= len) break;
            kt__value_format(&v->list.items[i], buf + used, len - used);
            used += strlen(buf + used);
        }
        if (used < len) snprintf(buf + used, len - used, "]");
        break;
    }
    }
}

/* Exact, not a bound: a derived list of 10^7 items (the evaluation's bound) took a bound of 64
 * bytes an item, a 660 MB allocation, to format 30 MB of text (fuzz-space). */
size_t kt__value_format_len(const kt__value *v) {
    switch (v->t) {
    case KT_V_NONE: return 5;
    case KT_V_BOOL: return v->b ? 5 : 6;
    case KT_V_INT: {
        char tmp[24];
        return (size_t)kt__int_text(v->i, tmp) + 1;
    }
    case KT_V_FLOAT: {
        char tmp[64];
        format_float(v->f, tmp, sizeof tmp);
        return strlen(tmp) + 1;
    }
    case KT_V_STR: return v->str.len + 3;
    case KT_V_LIST: {
        size_t n = 3; /* the brackets and the NUL; each item's text without its NUL, ", " between */
        for (size_t i = 0; i < v->list.n; i++) n += kt__value_format_len(&v->list.items[i]) - 1 + (i ? 2 : 0);
        return n;
    }
    }
    return 64;
}
