/*
 * expr_eval.c - evaluating a parsed expression (see expr.h): a recursive walk of the node
 * array against the caller's slot values, with Python 3's semantics for operators,
 * comparisons (chained), `and`/`or`, conditional expressions, indexing and comprehensions.
 * Values that need memory (lists, new strings) come from the caller's arena; built-in calls are
 * in expr_builtins.c. Each evaluation counts the list items and string characters it makes and
 * the comprehension iterations it runs against KT__EXPR_MAX_ITEMS (expr.h).
 */
#include "space/expr_int.h"

#include <math.h>
#include <string.h>

bool kt__expr_order(const kt__value *a, const kt__value *b, int *cmp) {
    if (kt__value_is_num(a) && kt__value_is_num(b)) {
        if (a->t != KT_V_FLOAT && b->t != KT_V_FLOAT) {
            int64_t x = 0, y = 0;
            kt__num_int(a, &x);
            kt__num_int(b, &y);
            *cmp = (x > y) - (x < y);
            return true;
        }
        double x = 0, y = 0;
        kt__num_double(a, &x);
        kt__num_double(b, &y);
        if (isnan(x) || isnan(y)) {
            *cmp = 2; /* unordered: every comparison but != is false */
            return true;
        }
        *cmp = (x > y) - (x < y);
        return true;
    }
    if (a->t == KT_V_STR && b->t == KT_V_STR) {
        size_t n = a->str.len < b->str.len ? a->str.len : b->str.len;
        int c = memcmp(a->str.s, b->str.s, n);
        *cmp = c ? (c > 0) - (c < 0) : (a->str.len > b->str.len) - (a->str.len < b->str.len);
        return true;
    }
    if (a->t == KT_V_LIST && b->t == KT_V_LIST) {
        size_t n = a->list.n < b->list.n ? a->list.n : b->list.n;
        for (size_t i = 0; i < n; i++) {
            if (!kt__expr_order(&a->list.items[i], &b->list.items[i], cmp)) return false;
            if (*cmp != 0) return true;
        }
        *cmp = (a->list.n > b->list.n) - (a->list.n < b->list.n);
        return true;
    }
    if (a->t == KT_V_NONE && b->t == KT_V_NONE) {
        *cmp = 0;
        return true;
    }
    return false;
}

static bool equal(const kt__value *a, const kt__value *b) {
    int c;
    return kt__expr_order(a, b, &c) && c == 0;
}

static kt_status compare(const evalctx *x, int op, const kt__value *a, const kt__value *b, int col, bool *res) {
    if (op == OP_IN || op == OP_NOTIN) {
        bool found = false;
        if (b->t == KT_V_LIST) {
            for (size_t i = 0; i < b->list.n && !found; i++) found = equal(a, &b->list.items[i]);
        } else if (b->t == KT_V_STR && a->t == KT_V_STR) {
            for (size_t i = 0; i + a->str.len <= b->str.len && !found; i++)
                found = memcmp(b->str.s + i, a->str.s, a->str.len) == 0;
        } else {
            return EERR(x, col, "argument of type '%s' is not iterable", kt__value_type_name(b));
        }
        *res = op == OP_IN ? found : !found;
        return KT_OK;
    }
    int c;
    bool ordered = kt__expr_order(a, b, &c);
    if (op == OP_EQ || op == OP_NE) {
        bool eq = ordered && c == 0;
        *res = op == OP_EQ ? eq : !eq;
        return KT_OK;
    }
    if (!ordered)
        return EERR(x, col, "'%s' not supported between '%s' and '%s'",
                    op == OP_LT ? "<" : op == OP_LE ? "<=" : op == OP_GT ? ">" : ">=", kt__value_type_name(a), kt__value_type_name(b));
    if (c == 2) {
        *res = false;
        return KT_OK;
    }
    *res = op == OP_LT ? c < 0 : op == OP_LE ? c <= 0 : op == OP_GT ? c > 0 : c >= 0;
    return KT_OK;
}

kt_status kt__expr_charge(const evalctx *x, size_t n, int col, const char *what) {
    if (n > x->run->items_left)
        return EERR(x, col, "%s: more than %d list items and string characters in one evaluation", what, KT__EXPR_MAX_ITEMS);
    x->run->items_left -= n;
    return KT_OK;
}

size_t kt__expr_weight(const kt__value *v, size_t limit) {
    if (v->t == KT_V_STR) return 1 + v->str.len;
    if (v->t != KT_V_LIST) return 1;
    size_t w = 1;
    for (size_t i = 0; i < v->list.n && w <= limit; i++) w += kt__expr_weight(&v->list.items[i], limit - w);
    return w;
}

kt_status kt__expr_charge_items(const evalctx *x, const kt__value *items, size_t n, int col, const char *what) {
    size_t w = 0, limit = x->run->items_left;
    for (size_t i = 0; i < n && w <= limit; i++) w += kt__expr_weight(&items[i], limit - w);
    return kt__expr_charge(x, w, col, what);
}

static kt_status ipow(const evalctx *x, int64_t b, int64_t e, int col, int64_t *out) {
    int64_t r = 1;
    while (e > 0) {
        if (e & 1) {
            if (__builtin_mul_overflow(r, b, &r)) return EERR(x, col, "integer overflow in '**'");
        }
        e >>= 1;
        if (e > 0 && __builtin_mul_overflow(b, b, &b)) return EERR(x, col, "integer overflow in '**'");
    }
    *out = r;
    return KT_OK;
}

static kt_status concat(const evalctx *x, const kt__value *a, const kt__value *b, int col, kt__value *out) {
    kt_status st = a->t == KT_V_STR ? kt__expr_charge(x, a->str.len + b->str.len, col, "'+'")
                                    : kt__expr_charge_items(x, a->list.items, a->list.n, col, "'+'");
    if (st == KT_OK && a->t == KT_V_LIST) st = kt__expr_charge_items(x, b->list.items, b->list.n, col, "'+'");
    if (st != KT_OK) return st;
    if (a->t == KT_V_STR) {
        char *s = kt__arena_alloc(x->arena, a->str.len + b->str.len + 1);
        if (s == NULL) return EOOM(x, col, "the joined string");
        memcpy(s, a->str.s, a->str.len);
        memcpy(s + a->str.len, b->str.s, b->str.len);
        *out = (kt__value){.t = KT_V_STR, .str = {s, a->str.len + b->str.len}};
    } else {
        size_t n = a->list.n + b->list.n;
        kt__value *items = kt__arena_alloc(x->arena, (n ? n : 1) * sizeof *items);
        if (items == NULL) return EOOM(x, col, "the joined list");
        memcpy(items, a->list.items, a->list.n * sizeof *items);
        memcpy(items + a->list.n, b->list.items, b->list.n * sizeof *items);
        *out = (kt__value){.t = KT_V_LIST, .list = {items, n}};
    }
    return KT_OK;
}

static const char *op_token(int op) {
    static const char *const t[] = {"+", "-", "*", "/", "//", "%", "**", "&", "|", "^", "<<", ">>"};
    return op <= OP_SHR ? t[op] : "?";
}

/* seq * n: a string or list repeated n times (n <= 0 gives an empty one). */
static kt_status repeat(const evalctx *x, const kt__value *seq, int64_t n, int col, kt__value *out) {
    size_t len = seq->t == KT_V_STR ? seq->str.len : seq->list.n, times = n > 0 ? (size_t)n : 0;
    if (len == 0) times = 0; /* [] * 10**16 is [] at once: copying nothing 10^16 times never ended (fuzz-space) */
    if (times != 0 && len > (size_t)KT__EXPR_MAX_ITEMS / times)
        return EERR(x, col, "repeated sequence is too long: more than %d items", KT__EXPR_MAX_ITEMS);
    size_t total = len * times, each = len; /* each: the weight of one copy */
    if (seq->t == KT_V_LIST) {
        each = 0;
        for (size_t i = 0; i < len && each <= KT__EXPR_MAX_ITEMS; i++) each += kt__expr_weight(&seq->list.items[i], KT__EXPR_MAX_ITEMS - each);
    }
    kt_status st = kt__expr_charge(x, times != 0 && each > (size_t)KT__EXPR_MAX_ITEMS / times ? (size_t)KT__EXPR_MAX_ITEMS + 1 : each * times,
                                   col, "'*'");
    if (st != KT_OK) return st;
    if (seq->t == KT_V_STR) {
        char *s = kt__arena_alloc(x->arena, total + 1);
        if (s == NULL) return EOOM(x, col, "the repeated string");
        for (size_t i = 0; i < times; i++) memcpy(s + i * len, seq->str.s, len);
        *out = (kt__value){.t = KT_V_STR, .str = {s, total}};
    } else {
        kt__value *items = kt__arena_alloc(x->arena, (total ? total : 1) * sizeof *items);
        if (items == NULL) return EOOM(x, col, "the repeated list");
        for (size_t i = 0; i < times; i++) memcpy(items + i * len, seq->list.items, len * sizeof *items);
        *out = (kt__value){.t = KT_V_LIST, .list = {items, total}};
    }
    return KT_OK;
}

kt_status kt__expr_binary(const evalctx *x, int op, const kt__value *a, const kt__value *b, int col, kt__value *out) {
    if (op == OP_ADD && a->t == b->t && (a->t == KT_V_STR || a->t == KT_V_LIST)) return concat(x, a, b, col, out);
    if (op == OP_MUL && (a->t == KT_V_STR || a->t == KT_V_LIST) && (b->t == KT_V_INT || b->t == KT_V_BOOL)) {
        int64_t n = 0;
        kt__num_int(b, &n);
        return repeat(x, a, n, col, out);
    }
    if (op == OP_MUL && (b->t == KT_V_STR || b->t == KT_V_LIST) && (a->t == KT_V_INT || a->t == KT_V_BOOL)) {
        int64_t n = 0;
        kt__num_int(a, &n);
        return repeat(x, b, n, col, out);
    }
    if (!kt__value_is_num(a) || !kt__value_is_num(b))
        return EERR(x, col, "unsupported operand types for %s: '%s' and '%s'", op_token(op), kt__value_type_name(a), kt__value_type_name(b));
    bool floats = a->t == KT_V_FLOAT || b->t == KT_V_FLOAT;
    if (op >= OP_BAND && op <= OP_SHR) {
        int64_t i = 0, j = 0;
        if (floats) return EERR(x, col, "unsupported operand types for %s: '%s' and '%s'", op_token(op), kt__value_type_name(a), kt__value_type_name(b));
        kt__num_int(a, &i);
        kt__num_int(b, &j);
        switch (op) {
        case OP_BAND: *out = kt__vint(i & j); break;
        case OP_BOR: *out = kt__vint(i | j); break;
        case OP_BXOR: *out = kt__vint(i ^ j); break;
        case OP_SHL:
            if (j < 0) return EERR(x, col, "negative shift count");
            if (j >= 63 || (i != 0 && (i > (INT64_MAX >> j) || i < (INT64_MIN >> j)))) return EERR(x, col, "integer overflow in '<<'");
            *out = kt__vint((int64_t)((uint64_t)i << j));
            break;
        default:
            if (j < 0) return EERR(x, col, "negative shift count");
            *out = kt__vint(j >= 63 ? (i < 0 ? -1 : 0) : i >> j);
            break;
        }
        return KT_OK;
    }
    if (!floats && op != OP_DIV) {
        int64_t i = 0, j = 0, r = 0;
        kt__num_int(a, &i);
        kt__num_int(b, &j);
        switch (op) {
        case OP_ADD:
            if (__builtin_add_overflow(i, j, &r)) return EERR(x, col, "integer overflow in '+'");
            break;
        case OP_SUB:
            if (__builtin_sub_overflow(i, j, &r)) return EERR(x, col, "integer overflow in '-'");
            break;
        case OP_MUL:
            if (__builtin_mul_overflow(i, j, &r)) return EERR(x, col, "integer overflow in '*'");
            break;
        case OP_FLOORDIV:
        case OP_MOD:
            if (j == 0) return EERR(x, col, "integer division or modulo by zero");
            if (i == INT64_MIN && j == -1) {
                if (op == OP_MOD) r = 0;
                else return EERR(x, col, "integer overflow in '//'");
                break;
            }
            if (op == OP_FLOORDIV) {
                r = i / j;
                if ((i % j != 0) && ((i < 0) != (j < 0))) r--;
            } else {
                r = i % j;
                if (r != 0 && ((r < 0) != (j < 0))) r += j;
            }
            break;
        default: /* OP_POW */
            if (j < 0) {
                if (i == 0) return EERR(x, col, "0 cannot be raised to a negative power");
                *out = kt__vfloat(pow((double)i, (double)j));
                return KT_OK;
            }
            kt_status st = ipow(x, i, j, col, &r);
            if (st != KT_OK) return st;
            break;
        }
        *out = kt__vint(r);
        return KT_OK;
    }
    double f = 0, g = 0;
    kt__num_double(a, &f);
    kt__num_double(b, &g);
    switch (op) {
    case OP_ADD: *out = kt__vfloat(f + g); break;
    case OP_SUB: *out = kt__vfloat(f - g); break;
    case OP_MUL: *out = kt__vfloat(f * g); break;
    case OP_DIV:
        if (g == 0) return EERR(x, col, "division by zero");
        *out = kt__vfloat(f / g);
        break;
    case OP_FLOORDIV:
    case OP_MOD: {
        if (g == 0) return EERR(x, col, "float floor division or modulo by zero");
        double m = fmod(f, g);
        if (m != 0 && ((m < 0) != (g < 0))) m += g;
        if (op == OP_MOD) {
            *out = kt__vfloat(m == 0 ? copysign(0.0, g) : m);
        } else {
            double q = (f - m) / g;
            double fq = floor(q);
            if (q - fq > 0.5) fq += 1;
            *out = kt__vfloat(q == 0 ? copysign(0.0, f / g) : fq);
        }
        break;
    }
    default: /* OP_POW */
        if (f == 0 && g < 0) return EERR(x, col, "0.0 cannot be raised to a negative power");
        if (f < 0 && g != floor(g)) return EERR(x, col, "negative number cannot be raised to a fractional power");
        *out = kt__vfloat(pow(f, g));
        break;
    }
    return KT_OK;
}

static kt_status eval(const evalctx *x, int32_t idx, kt__value *out);

/* What a comprehension makes: its list, in the arena (doubled as it grows), or, as the
 * argument of sum, min or max, the running result (no list is made). */
typedef struct compout {
    kt__value *items;
    size_t n, cap;
    int reduce; /* -1: the list; B_SUM, B_MIN or B_MAX: acc and have, as kt__expr_reduce keeps them */
    int col;    /* the call's column */
    kt__value acc;
    bool have;
} compout;

/* Checks that `more` iterations of the comprehension at column col stay within the evaluation's
 * bound, and counts them when take (an iterable's length is checked first, then each iteration
 * taken: the bound fails at once where it must fail). */
static kt_status iterations(const evalctx *x, size_t more, int col, bool take) {
    if (more > x->run->iters_left)
        return EERR(x, col, "comprehension: more than %d iterations in one evaluation", KT__EXPR_MAX_ITEMS);
    if (take) x->run->iters_left -= more;
    return KT_OK;
}

static kt_status comp_clauses(const evalctx *x, const node *c, int k, compout *out);

/* Binds local to v and goes on with clause k + 1 (one iteration of clause k). */
static kt_status comp_iteration(const evalctx *x, const node *c, int k, int32_t local, kt__value v, compout *out) {
    kt_status st = iterations(x, 1, c->col, true);
    if (st != KT_OK) return st;
    x->run->locals[local] = v;
    x->run->bound[local] = true;
    return comp_clauses(x, c, k + 1, out);
}

/* Runs the clauses of comprehension c from clause k on, appending the element to out for every
 * binding that gets through them all: Python's nesting, left to right. */
static kt_status comp_clauses(const evalctx *x, const node *c, int k, compout *out) {
    kt_status st;
    kt__value v;
    if (k == c->n) { /* every clause passed: the element */
        if ((st = eval(x, c->b, &v)) != KT_OK) return st;
        if (out->reduce >= 0) return kt__expr_reduce(x, out->reduce, &out->acc, &out->have, &v, out->col);
        if (out->n == out->cap) {
            size_t cap = out->cap ? 2 * out->cap : 16;
            kt__value *items = kt__arena_alloc(x->arena, cap * sizeof *items);
            if (items == NULL) return EOOM(x, c->col, "the list of a comprehension");
            if (out->n) memcpy(items, out->items, out->n * sizeof *items);
            out->items = items;
            out->cap = cap;
        }
        if ((st = kt__expr_charge_items(x, &v, 1, c->col, "comprehension")) != KT_OK) return st;
        out->items[out->n++] = v;
        return KT_OK;
    }
    const int32_t *clause = &x->e->kids[c->a + KT__COMP_KIDS * k];
    int32_t local = clause[0], col = clause[2];
    if (local < 0) { /* if */
        if ((st = eval(x, clause[1], &v)) != KT_OK) return st;
        return kt__truthy(&v) ? comp_clauses(x, c, k + 1, out) : KT_OK;
    }
    const node *it = &x->e->nodes[clause[1]];
    if (it->kind == N_CALL && it->op == B_RANGE && it->n <= 16) { /* a range, counted rather than made */
        kt__value args[16];
        int64_t r[3], count;
        for (int i = 0; i < it->n; i++)
            if ((st = eval(x, x->e->kids[it->a + i], &args[i])) != KT_OK) return st;
        if ((st = kt__expr_range(x, args, it->n, it->col, r, &count)) != KT_OK || (st = iterations(x, (size_t)count, c->col, false)) != KT_OK)
            return st;
        for (int64_t i = 0; i < count; i++)
            if ((st = comp_iteration(x, c, k, local, kt__vint(kt__range_item(r, i)), out)) != KT_OK) return st;
        return KT_OK;
    }
    if ((st = eval(x, clause[1], &v)) != KT_OK) return st;
    if (v.t == KT_V_LIST) {
        if ((st = iterations(x, v.list.n, c->col, false)) != KT_OK) return st;
        for (size_t i = 0; i < v.list.n; i++)
            if ((st = comp_iteration(x, c, k, local, v.list.items[i], out)) != KT_OK) return st;
    } else if (v.t == KT_V_STR) {
        if ((st = iterations(x, v.str.len, c->col, false)) != KT_OK) return st;
        for (size_t i = 0; i < v.str.len; i++)
            if ((st = comp_iteration(x, c, k, local, (kt__value){.t = KT_V_STR, .str = {v.str.s + i, 1}}, out)) != KT_OK)
                return st;
    } else {
        return EERR(x, col, "'%s' object is not iterable", kt__value_type_name(&v));
    }
    return KT_OK;
}

/* Counts one node evaluated against the evaluation's bound (KT__EXPR_MAX_STEPS). */
static kt_status take_step(const evalctx *x, int col) {
    if (x->run->steps_left == 0) return EERR(x, col, "more than %d operations in one evaluation", KT__EXPR_MAX_STEPS);
    x->run->steps_left--;
    return KT_OK;
}

static kt_status eval(const evalctx *x, int32_t idx, kt__value *out) {
    const node *n = &x->e->nodes[idx];
    kt__value a, b;
    kt_status st;
    if ((st = take_step(x, n->col)) != KT_OK) return st;
    switch (n->kind) {
    case N_CONST: *out = x->e->consts[n->a]; return KT_OK;
    case N_SLOT:
        if (x->slots == NULL) return EERR(x, n->col, "no value for a name here");
        *out = x->slots[n->a];
        return KT_OK;
    case N_LOCAL:
        if (!x->run->bound[n->a]) {
            const char *name = x->e->text + n->col - 1;
            int len = 0;
            while (name[len] == '_' || (name[len] >= 'a' && name[len] <= 'z') || (name[len] >= 'A' && name[len] <= 'Z') ||
                   (name[len] >= '0' && name[len] <= '9'))
                len++;
            return EERR(x, n->col, "cannot access local variable '%.*s' where it is not associated with a value", len, name);
        }
        *out = x->run->locals[n->a];
        return KT_OK;
    case N_COMP: {
        for (int i = 0; i < n->op; i++) x->run->bound[n->c + i] = false; /* a fresh scope each time */
        compout list = {.reduce = -1};
        if ((st = comp_clauses(x, n, 0, &list)) != KT_OK) return st;
        if (list.items == NULL && (list.items = kt__arena_alloc(x->arena, sizeof *list.items)) == NULL)
            return EOOM(x, n->col, "the list of a comprehension");
        *out = (kt__value){.t = KT_V_LIST, .list = {list.items, list.n}};
        return KT_OK;
    }
    case N_LIST: {
        kt__value *items = kt__arena_alloc(x->arena, (n->n ? n->n : 1) * sizeof *items);
        if (items == NULL) return EOOM(x, n->col, "a list");
        for (int i = 0; i < n->n; i++)
            if ((st = eval(x, x->e->kids[n->a + i], &items[i])) != KT_OK) return st;
        if ((st = kt__expr_charge_items(x, items, n->n, n->col, "a list")) != KT_OK) return st;
        *out = (kt__value){.t = KT_V_LIST, .list = {items, n->n}};
        return KT_OK;
    }
    case N_UNARY:
        if ((st = eval(x, n->a, &a)) != KT_OK) return st;
        if (!kt__value_is_num(&a)) return EERR(x, n->col, "bad operand type for unary operator: '%s'", kt__value_type_name(&a));
        if (n->op == OP_POS) {
            *out = a.t == KT_V_BOOL ? kt__vint(a.b) : a;
        } else if (a.t == KT_V_FLOAT) {
            if (n->op == OP_INV) return EERR(x, n->col, "bad operand type for unary ~: 'float'");
            *out = kt__vfloat(-a.f);
        } else {
            int64_t i = 0;
            kt__num_int(&a, &i);
            if (n->op == OP_INV) *out = kt__vint(~i);
            else if (i == INT64_MIN) return EERR(x, n->col, "integer overflow in unary '-'");
            else *out = kt__vint(-i);
        }
        return KT_OK;
    case N_NOT:
        if ((st = eval(x, n->a, &a)) != KT_OK) return st;
        *out = kt__vbool(!kt__truthy(&a));
        return KT_OK;
    case N_AND:
    case N_OR:
        if ((st = eval(x, n->a, &a)) != KT_OK) return st;
        if (kt__truthy(&a) == (n->kind == N_OR)) {
            *out = a;
            return KT_OK;
        }
        return eval(x, n->b, out);
    case N_COND:
        if ((st = eval(x, n->a, &a)) != KT_OK) return st;
        return eval(x, kt__truthy(&a) ? n->b : n->c, out);
    case N_BIN:
        if ((st = eval(x, n->a, &a)) != KT_OK || (st = eval(x, n->b, &b)) != KT_OK) return st;
        return kt__expr_binary(x, n->op, &a, &b, n->col, out);
    case N_CMP: {
        if ((st = eval(x, x->e->kids[n->a], &a)) != KT_OK) return st;
        for (int i = 1; i < n->n; i++) {
            if ((st = eval(x, x->e->kids[n->a + i], &b)) != KT_OK) return st;
            bool r = false;
            if ((st = compare(x, x->e->cmpops[n->b + i - 1], &a, &b, n->col, &r)) != KT_OK) return st;
            if (!r) {
                *out = kt__vbool(false);
                return KT_OK;
            }
            a = b;
        }
        *out = kt__vbool(true);
        return KT_OK;
    }
    case N_INDEX: {
        if ((st = eval(x, n->a, &a)) != KT_OK || (st = eval(x, n->b, &b)) != KT_OK) return st;
        int64_t i;
        if (b.t == KT_V_FLOAT || !kt__num_int(&b, &i))
            return EERR(x, n->col, "indices must be integers, not '%s'", kt__value_type_name(&b));
        size_t len = a.t == KT_V_LIST ? a.list.n : a.t == KT_V_STR ? a.str.len : 0;
        if (a.t != KT_V_LIST && a.t != KT_V_STR) return EERR(x, n->col, "'%s' object is not subscriptable", kt__value_type_name(&a));
        if (i < 0) i += (int64_t)len;
        if (i < 0 || (size_t)i >= len) return EERR(x, n->col, "index out of range");
        if (a.t == KT_V_LIST) *out = a.list.items[i];
        else *out = (kt__value){.t = KT_V_STR, .str = {a.str.s + i, 1}};
        return KT_OK;
    }
    case N_CALL: {
        const node *arg = n->n == 1 ? &x->e->nodes[x->e->kids[n->a]] : NULL;
        if (arg != NULL && arg->kind == N_COMP && (n->op == B_SUM || n->op == B_MIN || n->op == B_MAX)) {
            /* sum, min or max of a comprehension: of its items as they come, making no list */
            for (int i = 0; i < arg->op; i++) x->run->bound[arg->c + i] = false;
            compout r = {.reduce = n->op, .col = n->col, .acc = kt__vint(0)};
            if ((st = comp_clauses(x, arg, 0, &r)) != KT_OK) return st;
            return kt__expr_reduced(x, n->op, &r.acc, r.have, n->col, out);
        }
        kt__value args[16];
        if (n->n > 16) return EERR(x, n->col, "too many arguments");
        for (int i = 0; i < n->n; i++)
            if ((st = eval(x, x->e->kids[n->a + i], &args[i])) != KT_OK) return st;
        return kt__expr_call_builtin(x, n->op, args, n->n, n->col, out);
    }
    }
    return EERR(x, n->col, "internal error: bad node");
}

kt_status kt__expr_eval_node(const kt__expr *e, int32_t idx, const kt__value *slots, kt__arena *arena, const char *where,
                             kt__value *out) {
    evalrun run;
    run.items_left = run.iters_left = KT__EXPR_MAX_ITEMS;
    run.steps_left = KT__EXPR_MAX_STEPS;
    if (e->nlocals > 0) memset(run.bound, 0, sizeof run.bound);
    evalctx x = {e, slots, arena, where, &run};
    return eval(&x, idx, out);
}

kt_status kt__expr_eval(const kt__expr *e, const kt__value *slots, kt__arena *arena, const char *where,
                        kt__value *out) {
    return kt__expr_eval_node(e, e->root, slots, arena, where, out);
}
