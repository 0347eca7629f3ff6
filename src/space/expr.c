/*
 * expr.c - the expression language (see expr.h).
 *
 * A Pratt-style recursive-descent parser with Python's precedence produces a flat array of
 * nodes; a node whose operands are all constants is evaluated at once and replaced by its value
 * (constant folding), so `[16, 32, 64]` or `2**10` cost nothing at evaluation time. Evaluation
 * walks the node array recursively. Semantics follow Python 3: `/` is true division, `//` and `%`
 * floor toward negative infinity, `and`/`or` return an operand, comparisons chain, bools are
 * integers in arithmetic, integers are 64-bit (overflow is an error rather than a bignum).
 */
#include "space/expr.h"
#include "util/util.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- arena ------------------------------------------------------------------------------------ */

struct kt__arena_block {
    struct kt__arena_block *next;
    size_t cap;
    _Alignas(16) char data[];
};

static void *arena_alloc(kt__arena *a, size_t n) {
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
    size_t cap = n > 4096 ? n : 4096;
    struct kt__arena_block *b = malloc(sizeof *b + cap);
    if (b == NULL) return NULL;
    b->next = a->blocks;
    b->cap = cap;
    a->blocks = b;
    return b->data; /* a block serves one allocation: simple, and lists are rare */
}

void *kt__arena_alloc(kt__arena *a, size_t n) { return arena_alloc(a, n); }

bool kt__value_copy(const kt__value *src, kt__arena *arena, kt__value *out) {
    *out = *src;
    if (src->t == KT_V_STR) {
        char *s = arena_alloc(arena, src->str.len + 1);
        if (s == NULL) return false;
        memcpy(s, src->str.s, src->str.len);
        s[src->str.len] = '\0';
        out->str.s = s;
    } else if (src->t == KT_V_LIST) {
        kt__value *items = arena_alloc(arena, (src->list.n ? src->list.n : 1) * sizeof *items);
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

/* ---- nodes ------------------------------------------------------------------------------------ */

enum kind { N_CONST, N_SLOT, N_LIST, N_UNARY, N_BIN, N_AND, N_OR, N_NOT, N_CMP, N_COND, N_CALL, N_INDEX };

enum op {
    OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_BAND, OP_BOR, OP_BXOR, OP_SHL, OP_SHR,
    OP_NEG, OP_POS, OP_INV,
    OP_LT, OP_LE, OP_GT, OP_GE, OP_EQ, OP_NE, OP_IN, OP_NOTIN
};

enum builtin { B_MIN, B_MAX, B_ABS, B_INT, B_FLOAT, B_LEN, B_RANGE, B_ROUND, B_SUM, B_BOOL, B_LIST };
static const char *const builtin_names[] = {"min", "max", "abs", "int", "float", "len", "range", "round", "sum", "bool", "list"};
#define NBUILTINS (sizeof builtin_names / sizeof builtin_names[0])

typedef struct node {
    uint8_t kind, op;
    uint16_t n;     /* operand count of LIST, CALL, CMP */
    int32_t a, b, c; /* children, or the start of a run in kids[]; CONST: index in consts */
    int32_t col;    /* 1-based column, for errors */
} node;

struct kt__expr {
    char *text;
    node *nodes;
    int32_t nnodes, cap;
    int32_t *kids;
    int32_t nkids, kcap;
    uint8_t *cmpops;
    int32_t ncmp, ccap;
    kt__value *consts;
    int32_t nconsts, constcap;
    kt__arena store; /* constant lists and strings */
    int32_t root;
};

/* ---- values ----------------------------------------------------------------------------------- */

static kt__value vint(int64_t i) { return (kt__value){.t = KT_V_INT, .i = i}; }
static kt__value vfloat(double f) { return (kt__value){.t = KT_V_FLOAT, .f = f}; }
static kt__value vbool(bool b) { return (kt__value){.t = KT_V_BOOL, .b = b}; }

static bool is_num(const kt__value *v) { return v->t == KT_V_INT || v->t == KT_V_FLOAT || v->t == KT_V_BOOL; }

bool kt__value_to_int(const kt__value *v, int64_t *out) {
    if (v->t == KT_V_INT) *out = v->i;
    else if (v->t == KT_V_BOOL) *out = v->b;
    else return false;
    return true;
}

bool kt__value_to_double(const kt__value *v, double *out) {
    if (v->t == KT_V_FLOAT) *out = v->f;
    else if (v->t == KT_V_INT) *out = (double)v->i;
    else if (v->t == KT_V_BOOL) *out = v->b;
    else return false;
    return true;
}

bool kt__value_truthy(const kt__value *v) {
    switch (v->t) {
    case KT_V_NONE: return false;
    case KT_V_BOOL: return v->b;
    case KT_V_INT: return v->i != 0;
    case KT_V_FLOAT: return v->f != 0;
    case KT_V_STR: return v->str.len != 0;
    case KT_V_LIST: return v->list.n != 0;
    }
    return false;
}

static const char *type_name(const kt__value *v) {
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

size_t kt__value_format_len(const kt__value *v) {
    switch (v->t) {
    case KT_V_STR: return v->str.len + 3;
    case KT_V_LIST: {
        size_t n = 3;
        for (size_t i = 0; i < v->list.n; i++) n += kt__value_format_len(&v->list.items[i]) + 2;
        return n;
    }
    default: return 64; /* None, a bool, an int, a float's shortest repr */
    }
}

/* ---- errors ----------------------------------------------------------------------------------- */

static kt_status expr_err(const char *where, const char *text, int col, const char *fmt, ...) KT__PRINTF(4, 5);
static kt_status expr_err(const char *where, const char *text, int col, const char *fmt, ...) {
    /* what went wrong first, then the whole message around it (a message may quote the one
     * before it), the expression quoted whole */
    va_list ap;
    va_start(ap, fmt);
    kt__verr(KT_ERR_INVALID_ARGUMENT, fmt, ap);
    va_end(ap);
    return kt__err(KT_ERR_INVALID_ARGUMENT, "%s: expression '%s': column %d: %s", where, text, col, kt_last_error());
}

/* ---- tokens ----------------------------------------------------------------------------------- */

enum tok { T_END, T_INT, T_FLOAT, T_STR, T_NAME, T_OP };

typedef struct lexer {
    const char *text;
    size_t pos;
    enum tok t;
    const char *start;
    size_t len;
    int col;
    int64_t ival;
    double fval;
    const char *where;
    kt_status err;
} lexer;

static const char *const two_char_ops[] = {"**", "//", "<=", ">=", "==", "!=", "<<", ">>"};

static void next(lexer *lx) {
    const char *s = lx->text;
    while (s[lx->pos] == ' ' || s[lx->pos] == '\t' || s[lx->pos] == '\n' || s[lx->pos] == '\r') lx->pos++;
    lx->start = s + lx->pos;
    lx->col = (int)lx->pos + 1;
    char c = s[lx->pos];
    if (c == '\0') {
        lx->t = T_END;
        lx->len = 0;
        return;
    }
    if (isdigit((unsigned char)c) || (c == '.' && isdigit((unsigned char)s[lx->pos + 1]))) {
        const char *p = s + lx->pos;
        char *end;
        bool is_float = false;
        if (c == '0' && (p[1] == 'x' || p[1] == 'X' || p[1] == 'o' || p[1] == 'O' || p[1] == 'b' || p[1] == 'B')) {
            int base = (p[1] == 'x' || p[1] == 'X') ? 16 : (p[1] == 'o' || p[1] == 'O') ? 8 : 2;
            errno = 0;
            unsigned long long v = strtoull(p + 2, &end, base);
            if (end == p + 2 || errno || v > INT64_MAX) {
                lx->err = expr_err(lx->where, lx->text, lx->col, "invalid number");
                lx->t = T_END;
                return;
            }
            lx->ival = (int64_t)v;
        } else {
            size_t n = strspn(p, "0123456789_");
            is_float = p[n] == '.' || p[n] == 'e' || p[n] == 'E';
            char digits[64];
            size_t k = 0, i = 0;
            /* copy without underscores */
            for (; p[i] && k + 1 < sizeof digits; i++) {
                char d = p[i];
                if (d == '_') continue;
                if (isdigit((unsigned char)d) || (is_float && (d == '.' || d == 'e' || d == 'E' ||
                                                               ((d == '+' || d == '-') && i > 0 && (p[i - 1] == 'e' || p[i - 1] == 'E')))))
                    digits[k++] = d;
                else
                    break;
            }
            digits[k] = '\0';
            errno = 0;
            if (is_float) {
                lx->fval = strtod(digits, &end);
            } else {
                unsigned long long v = strtoull(digits, &end, 10);
                if (errno || v > INT64_MAX) {
                    lx->err = expr_err(lx->where, lx->text, lx->col, "integer literal too large");
                    lx->t = T_END;
                    return;
                }
                lx->ival = (int64_t)v;
            }
            if (*end != '\0') {
                lx->err = expr_err(lx->where, lx->text, lx->col, "invalid number");
                lx->t = T_END;
                return;
            }
            end = (char *)p + i;
        }
        if (isalpha((unsigned char)*end) || *end == '_') {
            lx->err = expr_err(lx->where, lx->text, lx->col, "invalid number");
            lx->t = T_END;
            return;
        }
        lx->t = is_float ? T_FLOAT : T_INT;
        lx->len = (size_t)(end - p);
        lx->pos += lx->len;
        return;
    }
    if (isalpha((unsigned char)c) || c == '_') {
        size_t n = 1;
        while (isalnum((unsigned char)s[lx->pos + n]) || s[lx->pos + n] == '_') n++;
        lx->t = T_NAME;
        lx->len = n;
        lx->pos += n;
        return;
    }
    if (c == '\'' || c == '"') {
        size_t n = 1;
        while (s[lx->pos + n] && s[lx->pos + n] != c) n += (s[lx->pos + n] == '\\' && s[lx->pos + n + 1]) ? 2 : 1;
        if (s[lx->pos + n] != c) {
            lx->err = expr_err(lx->where, lx->text, lx->col, "unterminated string");
            lx->t = T_END;
            return;
        }
        lx->t = T_STR;
        lx->len = n + 1;
        lx->pos += n + 1;
        return;
    }
    for (size_t i = 0; i < sizeof two_char_ops / sizeof two_char_ops[0]; i++) {
        if (strncmp(s + lx->pos, two_char_ops[i], 2) == 0) {
            lx->t = T_OP;
            lx->len = 2;
            lx->pos += 2;
            return;
        }
    }
    if (strchr("+-*/%<>()[],&|^~", c)) {
        lx->t = T_OP;
        lx->len = 1;
        lx->pos += 1;
        return;
    }
    lx->err = expr_err(lx->where, lx->text, lx->col, "unexpected character '%c'", c);
    lx->t = T_END;
}

static bool is_op(const lexer *lx, const char *op) {
    return lx->t == T_OP && lx->len == strlen(op) && strncmp(lx->start, op, lx->len) == 0;
}

static bool is_kw(const lexer *lx, const char *kw) {
    return lx->t == T_NAME && lx->len == strlen(kw) && strncmp(lx->start, kw, lx->len) == 0;
}

/* ---- building nodes --------------------------------------------------------------------------- */

typedef struct parser {
    lexer lx;
    kt__expr *e;
    kt__resolve_fn resolve;
    void *user;
    kt__arena scratch; /* for folding */
    int depth;
} parser;

static int32_t add_node(parser *p, node n) {
    kt__expr *e = p->e;
    if (e->nnodes == e->cap) {
        int32_t cap = e->cap ? 2 * e->cap : 32;
        node *nn = realloc(e->nodes, (size_t)cap * sizeof *nn);
        if (nn == NULL) return -1;
        e->nodes = nn;
        e->cap = cap;
    }
    e->nodes[e->nnodes] = n;
    return e->nnodes++;
}

static int32_t add_kid(parser *p, int32_t k) {
    kt__expr *e = p->e;
    if (e->nkids == e->kcap) {
        int32_t cap = e->kcap ? 2 * e->kcap : 32;
        int32_t *nk = realloc(e->kids, (size_t)cap * sizeof *nk);
        if (nk == NULL) return -1;
        e->kids = nk;
        e->kcap = cap;
    }
    e->kids[e->nkids] = k;
    return e->nkids++;
}

static int32_t add_cmpop(parser *p, uint8_t op) {
    kt__expr *e = p->e;
    if (e->ncmp == e->ccap) {
        int32_t cap = e->ccap ? 2 * e->ccap : 16;
        uint8_t *nc = realloc(e->cmpops, (size_t)cap);
        if (nc == NULL) return -1;
        e->cmpops = nc;
        e->ccap = cap;
    }
    e->cmpops[e->ncmp] = op;
    return e->ncmp++;
}

/* Copies a value into the expression's own store (lists and strings deep). */
static bool persist(kt__expr *e, kt__value *v) {
    kt__value src = *v;
    return kt__value_copy(&src, &e->store, v);
}

static int32_t add_const(parser *p, kt__value v, int col) {
    kt__expr *e = p->e;
    if (!persist(e, &v)) return -1;
    if (e->nconsts == e->constcap) {
        int32_t cap = e->constcap ? 2 * e->constcap : 16;
        kt__value *nc = realloc(e->consts, (size_t)cap * sizeof *nc);
        if (nc == NULL) return -1;
        e->consts = nc;
        e->constcap = cap;
    }
    e->consts[e->nconsts] = v;
    return add_node(p, (node){.kind = N_CONST, .a = e->nconsts++, .col = col});
}

static kt_status eval_node(const kt__expr *e, int32_t idx, const kt__value *slots, kt__arena *arena,
                           const char *where, kt__value *out);

/* Whether node idx is constant, directly or through all its operands. */
static bool node_const(const kt__expr *e, int32_t idx) { return e->nodes[idx].kind == N_CONST; }

/* Replaces node idx by its value when all operands are constants. Errors in folding (1 // 0)
 * are left for evaluation to report, so parsing never fails on them. */
static int32_t fold(parser *p, int32_t idx) {
    kt__expr *e = p->e;
    node n = e->nodes[idx];
    bool all = true;
    switch (n.kind) {
    case N_CONST: case N_SLOT: return idx;
    case N_UNARY: case N_NOT: all = node_const(e, n.a); break;
    case N_BIN: case N_AND: case N_OR: case N_INDEX: all = node_const(e, n.a) && node_const(e, n.b); break;
    case N_COND: all = node_const(e, n.a) && node_const(e, n.b) && node_const(e, n.c); break;
    case N_LIST: case N_CALL: case N_CMP:
        for (int i = 0; i < n.n && all; i++) all = node_const(e, e->kids[n.a + i]);
        break;
    }
    if (!all) return idx;
    kt__value v;
    char *saved = kt__error_save();
    kt__arena_reset(&p->scratch);
    kt_status st = eval_node(e, idx, NULL, &p->scratch, "fold", &v);
    kt__error_restore(KT_OK, saved); /* a failed fold is not an error of the call */
    if (st != KT_OK) return idx;
    int32_t c = add_const(p, v, n.col);
    if (c < 0) return -1;
    e->nodes[idx] = e->nodes[c]; /* the folded node takes the constant's place */
    e->nnodes--;
    return idx;
}

/* ---- the parser ------------------------------------------------------------------------------- */

#define FAIL(p) ((p)->lx.err != KT_OK)
#define OOM(p) ((p)->lx.err = kt__err(KT_ERR_NO_MEMORY, "%s: out of memory parsing an expression", (p)->lx.where), -1)

static int32_t parse_expr(parser *p);

static int32_t syntax(parser *p, const char *what) {
    if (!FAIL(p)) {
        if (p->lx.t == T_END)
            p->lx.err = expr_err(p->lx.where, p->lx.text, p->lx.col, "%s, found the end", what);
        else
            p->lx.err = expr_err(p->lx.where, p->lx.text, p->lx.col, "%s, found '%.*s'", what, (int)p->lx.len, p->lx.start);
    }
    return -1;
}

static bool expect(parser *p, const char *op) {
    if (!is_op(&p->lx, op)) {
        char what[32];
        snprintf(what, sizeof what, "expected '%s'", op);
        syntax(p, what);
        return false;
    }
    next(&p->lx);
    return !FAIL(p);
}

/* Parses a comma-separated list up to `close`; stores the items in kids and returns the start. */
static int parse_items(parser *p, const char *close, int32_t *start, uint16_t *count) {
    int32_t items[256];
    int n = 0;
    while (!is_op(&p->lx, close)) {
        if (n == 256) {
            syntax(p, "at most 256 items");
            return -1;
        }
        int32_t it = parse_expr(p);
        if (it < 0) return -1;
        items[n++] = it;
        if (is_op(&p->lx, ",")) {
            next(&p->lx);
            if (FAIL(p)) return -1;
        } else if (!is_op(&p->lx, close)) {
            char what[32];
            snprintf(what, sizeof what, "expected ',' or '%s'", close);
            syntax(p, what);
            return -1;
        }
    }
    next(&p->lx);
    if (FAIL(p)) return -1;
    *start = p->e->nkids;
    for (int i = 0; i < n; i++)
        if (add_kid(p, items[i]) < 0) return OOM(p);
    *count = (uint16_t)n;
    return 0;
}

static char unescape(char c) {
    switch (c) {
    case 'n': return '\n';
    case 't': return '\t';
    case 'r': return '\r';
    case '0': return '\0';
    default: return c;
    }
}

static int32_t parse_atom(parser *p) {
    lexer *lx = &p->lx;
    int col = lx->col;
    if (lx->t == T_INT || lx->t == T_FLOAT) {
        kt__value v = lx->t == T_INT ? vint(lx->ival) : vfloat(lx->fval);
        next(lx);
        if (FAIL(p)) return -1;
        int32_t c = add_const(p, v, col);
        return c < 0 ? OOM(p) : c;
    }
    if (lx->t == T_STR) {
        size_t n = lx->len - 2, k = 0;
        char *buf = arena_alloc(&p->scratch, n + 1);
        if (buf == NULL) return OOM(p);
        for (size_t i = 1; i <= n; i++) buf[k++] = (lx->start[i] == '\\' && i < n) ? unescape(lx->start[++i]) : lx->start[i];
        kt__value v = {.t = KT_V_STR, .str = {buf, k}};
        next(lx);
        if (FAIL(p)) return -1;
        int32_t c = add_const(p, v, col);
        return c < 0 ? OOM(p) : c;
    }
    if (is_op(lx, "(")) {
        next(lx);
        if (FAIL(p)) return -1;
        int32_t inner = parse_expr(p);
        if (inner < 0 || !expect(p, ")")) return -1;
        return inner;
    }
    if (is_op(lx, "[")) {
        next(lx);
        if (FAIL(p)) return -1;
        node n = {.kind = N_LIST, .col = col};
        if (parse_items(p, "]", &n.a, &n.n) < 0) return -1;
        int32_t id = add_node(p, n);
        return id < 0 ? OOM(p) : fold(p, id);
    }
    if (lx->t == T_NAME) {
        const char *name = lx->start;
        size_t len = lx->len;
        if (is_kw(lx, "True") || is_kw(lx, "False") || is_kw(lx, "None")) {
            kt__value v = is_kw(lx, "None") ? (kt__value){.t = KT_V_NONE} : vbool(is_kw(lx, "True"));
            next(lx);
            int32_t c = add_const(p, v, col);
            return FAIL(p) ? -1 : c < 0 ? OOM(p) : c;
        }
        static const char *const reserved[] = {"and", "or", "not", "if", "else", "in", "lambda", "for", "is"};
        for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++)
            if (is_kw(lx, reserved[i])) return syntax(p, "expected a value");
        next(lx);
        if (FAIL(p)) return -1;
        if (is_op(lx, "(")) { /* a call of a builtin */
            int b = -1;
            for (size_t i = 0; i < NBUILTINS; i++)
                if (strlen(builtin_names[i]) == len && strncmp(builtin_names[i], name, len) == 0) b = (int)i;
            if (b < 0) {
                p->lx.err = expr_err(lx->where, lx->text, col, "unknown function '%.*s'", (int)len, name);
                return -1;
            }
            next(lx);
            if (FAIL(p)) return -1;
            node n = {.kind = N_CALL, .op = (uint8_t)b, .col = col};
            if (parse_items(p, ")", &n.a, &n.n) < 0) return -1;
            int32_t id = add_node(p, n);
            return id < 0 ? OOM(p) : fold(p, id);
        }
        int slot = p->resolve ? p->resolve(name, len, p->user) : -1;
        if (slot < 0) {
            p->lx.err = expr_err(lx->where, lx->text, col, "name '%.*s' is not defined", (int)len, name);
            return -1;
        }
        int32_t id = add_node(p, (node){.kind = N_SLOT, .a = slot, .col = col});
        return id < 0 ? OOM(p) : id;
    }
    return syntax(p, "expected a value");
}

static int32_t parse_postfix(parser *p) {
    int32_t base = parse_atom(p);
    while (base >= 0 && is_op(&p->lx, "[")) {
        int col = p->lx.col;
        next(&p->lx);
        if (FAIL(p)) return -1;
        int32_t index = parse_expr(p);
        if (index < 0 || !expect(p, "]")) return -1;
        int32_t id = add_node(p, (node){.kind = N_INDEX, .a = base, .b = index, .col = col});
        base = id < 0 ? OOM(p) : fold(p, id);
    }
    return base;
}

static int32_t parse_unary(parser *p);

static int32_t parse_power(parser *p) {
    int32_t base = parse_postfix(p);
    if (base >= 0 && is_op(&p->lx, "**")) {
        int col = p->lx.col;
        next(&p->lx);
        if (FAIL(p)) return -1;
        int32_t exp = parse_unary(p); /* right-associative, binds tighter than unary minus on its left */
        if (exp < 0) return -1;
        int32_t id = add_node(p, (node){.kind = N_BIN, .op = OP_POW, .a = base, .b = exp, .col = col});
        return id < 0 ? OOM(p) : fold(p, id);
    }
    return base;
}

static int32_t parse_unary(parser *p) {
    int col = p->lx.col;
    int op = is_op(&p->lx, "-") ? OP_NEG : is_op(&p->lx, "+") ? OP_POS : is_op(&p->lx, "~") ? OP_INV : -1;
    if (op < 0) return parse_power(p);
    if (++p->depth > 200) return syntax(p, "expression nested too deeply");
    next(&p->lx);
    if (FAIL(p)) return -1;
    int32_t a = parse_unary(p);
    p->depth--;
    if (a < 0) return -1;
    int32_t id = add_node(p, (node){.kind = N_UNARY, .op = (uint8_t)op, .a = a, .col = col});
    return id < 0 ? OOM(p) : fold(p, id);
}

/* Binary levels, loosest first. */
typedef struct binop {
    const char *tok;
    uint8_t op;
} binop;

static const binop level_bor[] = {{"|", OP_BOR}, {NULL, 0}};
static const binop level_bxor[] = {{"^", OP_BXOR}, {NULL, 0}};
static const binop level_band[] = {{"&", OP_BAND}, {NULL, 0}};
static const binop level_shift[] = {{"<<", OP_SHL}, {">>", OP_SHR}, {NULL, 0}};
static const binop level_sum[] = {{"+", OP_ADD}, {"-", OP_SUB}, {NULL, 0}};
static const binop level_term[] = {{"*", OP_MUL}, {"//", OP_FLOORDIV}, {"/", OP_DIV}, {"%", OP_MOD}, {NULL, 0}};
static const binop *const levels[] = {level_bor, level_bxor, level_band, level_shift, level_sum, level_term};

static int32_t parse_level(parser *p, int level) {
    if (level == (int)(sizeof levels / sizeof levels[0])) return parse_unary(p);
    int32_t left = parse_level(p, level + 1);
    for (;;) {
        if (left < 0) return -1;
        const binop *b = levels[level];
        while (b->tok && !is_op(&p->lx, b->tok)) b++;
        if (!b->tok) return left;
        int col = p->lx.col;
        next(&p->lx);
        if (FAIL(p)) return -1;
        int32_t right = parse_level(p, level + 1);
        if (right < 0) return -1;
        int32_t id = add_node(p, (node){.kind = N_BIN, .op = b->op, .a = left, .b = right, .col = col});
        left = id < 0 ? OOM(p) : fold(p, id);
    }
}

static int cmp_op(parser *p) {
    lexer *lx = &p->lx;
    if (is_op(lx, "<")) return OP_LT;
    if (is_op(lx, "<=")) return OP_LE;
    if (is_op(lx, ">")) return OP_GT;
    if (is_op(lx, ">=")) return OP_GE;
    if (is_op(lx, "==")) return OP_EQ;
    if (is_op(lx, "!=")) return OP_NE;
    if (is_kw(lx, "in")) return OP_IN;
    if (is_kw(lx, "not")) return OP_NOTIN; /* must be followed by "in" */
    return -1;
}

static int32_t parse_comparison(parser *p) {
    int32_t first = parse_level(p, 0);
    if (first < 0) return -1;
    int op = cmp_op(p);
    if (op < 0) return first;
    int32_t operands[64];
    uint8_t ops[64];
    int n = 0, col = p->lx.col;
    operands[0] = first;
    while (op >= 0) {
        if (n == 63) return syntax(p, "too many chained comparisons");
        next(&p->lx);
        if (FAIL(p)) return -1;
        if (op == OP_NOTIN) {
            if (!is_kw(&p->lx, "in")) return syntax(p, "expected 'in' after 'not'");
            next(&p->lx);
            if (FAIL(p)) return -1;
        }
        ops[n++] = (uint8_t)op;
        operands[n] = parse_level(p, 0);
        if (operands[n] < 0) return -1;
        op = cmp_op(p);
    }
    node nd = {.kind = N_CMP, .n = (uint16_t)(n + 1), .a = p->e->nkids, .b = p->e->ncmp, .col = col};
    for (int i = 0; i <= n; i++)
        if (add_kid(p, operands[i]) < 0) return OOM(p);
    for (int i = 0; i < n; i++)
        if (add_cmpop(p, ops[i]) < 0) return OOM(p);
    int32_t id = add_node(p, nd);
    return id < 0 ? OOM(p) : fold(p, id);
}

static int32_t parse_not(parser *p) {
    if (!is_kw(&p->lx, "not")) return parse_comparison(p);
    int col = p->lx.col;
    if (++p->depth > 200) return syntax(p, "expression nested too deeply");
    next(&p->lx);
    if (FAIL(p)) return -1;
    int32_t a = parse_not(p);
    p->depth--;
    if (a < 0) return -1;
    int32_t id = add_node(p, (node){.kind = N_NOT, .a = a, .col = col});
    return id < 0 ? OOM(p) : fold(p, id);
}

static int32_t parse_and(parser *p) {
    int32_t left = parse_not(p);
    while (left >= 0 && is_kw(&p->lx, "and")) {
        int col = p->lx.col;
        next(&p->lx);
        if (FAIL(p)) return -1;
        int32_t right = parse_not(p);
        if (right < 0) return -1;
        int32_t id = add_node(p, (node){.kind = N_AND, .a = left, .b = right, .col = col});
        left = id < 0 ? OOM(p) : fold(p, id);
    }
    return left;
}

static int32_t parse_or(parser *p) {
    int32_t left = parse_and(p);
    while (left >= 0 && is_kw(&p->lx, "or")) {
        int col = p->lx.col;
        next(&p->lx);
        if (FAIL(p)) return -1;
        int32_t right = parse_and(p);
        if (right < 0) return -1;
        int32_t id = add_node(p, (node){.kind = N_OR, .a = left, .b = right, .col = col});
        left = id < 0 ? OOM(p) : fold(p, id);
    }
    return left;
}

static int32_t parse_expr(parser *p) {
    if (++p->depth > 200) return syntax(p, "expression nested too deeply");
    int32_t value = parse_or(p);
    if (value >= 0 && is_kw(&p->lx, "if")) {
        int col = p->lx.col;
        next(&p->lx);
        if (FAIL(p)) return -1;
        int32_t cond = parse_or(p);
        if (cond < 0) return -1;
        if (!is_kw(&p->lx, "else")) return syntax(p, "expected 'else'");
        next(&p->lx);
        if (FAIL(p)) return -1;
        int32_t other = parse_expr(p);
        if (other < 0) return -1;
        int32_t id = add_node(p, (node){.kind = N_COND, .a = cond, .b = value, .c = other, .col = col});
        value = id < 0 ? OOM(p) : fold(p, id);
    }
    p->depth--;
    return value;
}

kt_status kt__expr_parse(const char *text, kt__resolve_fn resolve, void *user, const char *where, kt__expr **out) {
    *out = NULL;
    if (text == NULL) return kt__err(KT_ERR_NULL, "%s: expression is NULL", where);
    kt__expr *e = calloc(1, sizeof *e);
    if (e == NULL || (e->text = strdup(text)) == NULL) {
        free(e);
        return kt__err(KT_ERR_NO_MEMORY, "%s: out of memory", where);
    }
    parser p = {.lx = {.text = e->text, .where = where, .err = KT_OK}, .e = e, .resolve = resolve, .user = user};
    next(&p.lx);
    int32_t root = FAIL(&p) ? -1 : p.lx.t == T_END ? syntax(&p, "expected an expression") : parse_expr(&p);
    if (root >= 0 && p.lx.t != T_END && !FAIL(&p)) root = syntax(&p, "expected the end of the expression");
    kt__arena_free(&p.scratch);
    if (root < 0) {
        kt_status st = p.lx.err != KT_OK ? p.lx.err : KT_ERR_INVALID_ARGUMENT;
        kt__expr_free(e);
        return st;
    }
    e->root = root;
    *out = e;
    return KT_OK;
}

void kt__expr_free(kt__expr *e) {
    if (e == NULL) return;
    free(e->text);
    free(e->nodes);
    free(e->kids);
    free(e->cmpops);
    free(e->consts);
    kt__arena_free(&e->store);
    free(e);
}

const char *kt__expr_text(const kt__expr *e) { return e->text; }
bool kt__expr_is_const(const kt__expr *e) { return e->nodes[e->root].kind == N_CONST; }

/* ---- evaluation ------------------------------------------------------------------------------- */

typedef struct evalctx {
    const kt__expr *e;
    const kt__value *slots;
    kt__arena *arena;
    const char *where;
} evalctx;

#define EERR(x, col, ...) expr_err((x)->where, (x)->e->text, (col), __VA_ARGS__)

static kt_status eval(const evalctx *x, int32_t idx, kt__value *out);

/* Total order for comparisons; *cmp receives -1, 0 or 1. Returns false when the two values
 * cannot be ordered (for == and != that means "unequal"). */
static bool order(const kt__value *a, const kt__value *b, int *cmp) {
    if (is_num(a) && is_num(b)) {
        if (a->t != KT_V_FLOAT && b->t != KT_V_FLOAT) {
            int64_t x = 0, y = 0;
            kt__value_to_int(a, &x);
            kt__value_to_int(b, &y);
            *cmp = (x > y) - (x < y);
            return true;
        }
        double x = 0, y = 0;
        kt__value_to_double(a, &x);
        kt__value_to_double(b, &y);
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
            if (!order(&a->list.items[i], &b->list.items[i], cmp)) return false;
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
    return order(a, b, &c) && c == 0;
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
            return EERR(x, col, "argument of type '%s' is not iterable", type_name(b));
        }
        *res = op == OP_IN ? found : !found;
        return KT_OK;
    }
    int c;
    bool ordered = order(a, b, &c);
    if (op == OP_EQ || op == OP_NE) {
        bool eq = ordered && c == 0;
        *res = op == OP_EQ ? eq : !eq;
        return KT_OK;
    }
    if (!ordered)
        return EERR(x, col, "'%s' not supported between '%s' and '%s'",
                    op == OP_LT ? "<" : op == OP_LE ? "<=" : op == OP_GT ? ">" : ">=", type_name(a), type_name(b));
    if (c == 2) {
        *res = false;
        return KT_OK;
    }
    *res = op == OP_LT ? c < 0 : op == OP_LE ? c <= 0 : op == OP_GT ? c > 0 : c >= 0;
    return KT_OK;
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
    if (a->t == KT_V_STR) {
        char *s = arena_alloc(x->arena, a->str.len + b->str.len + 1);
        if (s == NULL) return EERR(x, col, "out of memory");
        memcpy(s, a->str.s, a->str.len);
        memcpy(s + a->str.len, b->str.s, b->str.len);
        *out = (kt__value){.t = KT_V_STR, .str = {s, a->str.len + b->str.len}};
    } else {
        size_t n = a->list.n + b->list.n;
        kt__value *items = arena_alloc(x->arena, (n ? n : 1) * sizeof *items);
        if (items == NULL) return EERR(x, col, "out of memory");
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
    if (times != 0 && len > ((size_t)1 << 26) / times) return EERR(x, col, "repeated sequence is too long");
    size_t total = len * times;
    if (seq->t == KT_V_STR) {
        char *s = arena_alloc(x->arena, total + 1);
        if (s == NULL) return EERR(x, col, "out of memory");
        for (size_t i = 0; i < times; i++) memcpy(s + i * len, seq->str.s, len);
        *out = (kt__value){.t = KT_V_STR, .str = {s, total}};
    } else {
        kt__value *items = arena_alloc(x->arena, (total ? total : 1) * sizeof *items);
        if (items == NULL) return EERR(x, col, "out of memory");
        for (size_t i = 0; i < times; i++) memcpy(items + i * len, seq->list.items, len * sizeof *items);
        *out = (kt__value){.t = KT_V_LIST, .list = {items, total}};
    }
    return KT_OK;
}

static kt_status binary(const evalctx *x, int op, const kt__value *a, const kt__value *b, int col, kt__value *out) {
    if (op == OP_ADD && a->t == b->t && (a->t == KT_V_STR || a->t == KT_V_LIST)) return concat(x, a, b, col, out);
    if (op == OP_MUL && (a->t == KT_V_STR || a->t == KT_V_LIST) && (b->t == KT_V_INT || b->t == KT_V_BOOL)) {
        int64_t n = 0;
        kt__value_to_int(b, &n);
        return repeat(x, a, n, col, out);
    }
    if (op == OP_MUL && (b->t == KT_V_STR || b->t == KT_V_LIST) && (a->t == KT_V_INT || a->t == KT_V_BOOL)) {
        int64_t n = 0;
        kt__value_to_int(a, &n);
        return repeat(x, b, n, col, out);
    }
    if (!is_num(a) || !is_num(b))
        return EERR(x, col, "unsupported operand types for %s: '%s' and '%s'", op_token(op), type_name(a), type_name(b));
    bool floats = a->t == KT_V_FLOAT || b->t == KT_V_FLOAT;
    if (op >= OP_BAND && op <= OP_SHR) {
        int64_t i = 0, j = 0;
        if (floats) return EERR(x, col, "unsupported operand types for %s: '%s' and '%s'", op_token(op), type_name(a), type_name(b));
        kt__value_to_int(a, &i);
        kt__value_to_int(b, &j);
        switch (op) {
        case OP_BAND: *out = vint(i & j); break;
        case OP_BOR: *out = vint(i | j); break;
        case OP_BXOR: *out = vint(i ^ j); break;
        case OP_SHL:
            if (j < 0) return EERR(x, col, "negative shift count");
            if (j >= 63 || (i != 0 && (i > (INT64_MAX >> j) || i < (INT64_MIN >> j)))) return EERR(x, col, "integer overflow in '<<'");
            *out = vint((int64_t)((uint64_t)i << j));
            break;
        default:
            if (j < 0) return EERR(x, col, "negative shift count");
            *out = vint(j >= 63 ? (i < 0 ? -1 : 0) : i >> j);
            break;
        }
        return KT_OK;
    }
    if (!floats && op != OP_DIV) {
        int64_t i = 0, j = 0, r = 0;
        kt__value_to_int(a, &i);
        kt__value_to_int(b, &j);
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
                *out = vfloat(pow((double)i, (double)j));
                return KT_OK;
            }
            if (ipow(x, i, j, col, &r) != KT_OK) return KT_ERR_INVALID_ARGUMENT;
            break;
        }
        *out = vint(r);
        return KT_OK;
    }
    double f = 0, g = 0;
    kt__value_to_double(a, &f);
    kt__value_to_double(b, &g);
    switch (op) {
    case OP_ADD: *out = vfloat(f + g); break;
    case OP_SUB: *out = vfloat(f - g); break;
    case OP_MUL: *out = vfloat(f * g); break;
    case OP_DIV:
        if (g == 0) return EERR(x, col, "division by zero");
        *out = vfloat(f / g);
        break;
    case OP_FLOORDIV:
    case OP_MOD: {
        if (g == 0) return EERR(x, col, "float floor division or modulo by zero");
        double m = fmod(f, g);
        if (m != 0 && ((m < 0) != (g < 0))) m += g;
        if (op == OP_MOD) {
            *out = vfloat(m == 0 ? copysign(0.0, g) : m);
        } else {
            double q = (f - m) / g;
            double fq = floor(q);
            if (q - fq > 0.5) fq += 1;
            *out = vfloat(q == 0 ? copysign(0.0, f / g) : fq);
        }
        break;
    }
    default: /* OP_POW */
        if (f == 0 && g < 0) return EERR(x, col, "0.0 cannot be raised to a negative power");
        if (f < 0 && g != floor(g)) return EERR(x, col, "negative number cannot be raised to a fractional power");
        *out = vfloat(pow(f, g));
        break;
    }
    return KT_OK;
}

/* Python's round(): to nearest, ties to even. */
static double round_even(double v) {
    double r = round(v);
    if (fabs(v - trunc(v)) == 0.5) r = 2.0 * round(v / 2.0);
    return r;
}

static kt_status call_builtin(const evalctx *x, int b, const kt__value *args, int n, int col, kt__value *out) {
    const char *name = builtin_names[b];
    switch (b) {
    case B_MIN:
    case B_MAX: {
        const kt__value *items = args;
        size_t count = (size_t)n;
        if (n == 1) {
            if (args[0].t != KT_V_LIST) return EERR(x, col, "'%s' object is not iterable", type_name(&args[0]));
            items = args[0].list.items;
            count = args[0].list.n;
        }
        if (count == 0) return EERR(x, col, "%s() arg is an empty sequence", name);
        const kt__value *best = &items[0];
        for (size_t i = 1; i < count; i++) {
            int c;
            if (!order(&items[i], best, &c))
                return EERR(x, col, "'<' not supported between '%s' and '%s'", type_name(&items[i]), type_name(best));
            if ((b == B_MIN && c < 0) || (b == B_MAX && c > 0 && c != 2)) best = &items[i];
        }
        *out = *best;
        return KT_OK;
    }
    case B_SUM: {
        if (n != 1 || args[0].t != KT_V_LIST) return EERR(x, col, "sum() takes one list");
        kt__value acc = vint(0);
        for (size_t i = 0; i < args[0].list.n; i++)
            if (binary(x, OP_ADD, &acc, &args[0].list.items[i], col, &acc) != KT_OK) return KT_ERR_INVALID_ARGUMENT;
        *out = acc;
        return KT_OK;
    }
    case B_RANGE: {
        if (n < 1 || n > 3) return EERR(x, col, "range expected 1 to 3 arguments, got %d", n);
        int64_t v[3] = {0, 0, 1};
        for (int i = 0; i < n; i++) {
            if (args[i].t == KT_V_FLOAT || !kt__value_to_int(&args[i], &v[n == 1 ? 1 : i]))
                return EERR(x, col, "range() arguments must be integers, not '%s'", type_name(&args[i]));
        }
        if (v[2] == 0) return EERR(x, col, "range() arg 3 must not be zero");
        int64_t count = 0;
        if (v[2] > 0 && v[1] > v[0]) count = (v[1] - v[0] + v[2] - 1) / v[2];
        if (v[2] < 0 && v[1] < v[0]) count = (v[0] - v[1] - v[2] - 1) / -v[2];
        if (count > 10000000) return EERR(x, col, "range() of %lld items is too long", (long long)count);
        kt__value *items = arena_alloc(x->arena, (size_t)(count ? count : 1) * sizeof *items);
        if (items == NULL) return EERR(x, col, "out of memory");
        for (int64_t i = 0; i < count; i++) items[i] = vint(v[0] + i * v[2]);
        *out = (kt__value){.t = KT_V_LIST, .list = {items, (size_t)count}};
        return KT_OK;
    }
    default: break;
    }
    if (b == B_ROUND && n == 2) {
        double f;
        int64_t digits;
        if (!kt__value_to_double(&args[0], &f) || !kt__value_to_int(&args[1], &digits) || args[1].t == KT_V_FLOAT)
            return EERR(x, col, "round() takes a number and an integer");
        if (args[0].t != KT_V_FLOAT) {
            int64_t i = 0, p = 1;
            kt__value_to_int(&args[0], &i);
            for (int64_t d = digits; d < 0 && p <= INT64_MAX / 10; d++) p *= 10;
            if (digits >= 0 || p == 1) {
                *out = vint(i);
            } else { /* to a multiple of p, ties to even */
                int64_t q = i / p, r = i % p;
                if (r < 0) r += p, q--;
                if (2 * r > p || (2 * r == p && (q & 1))) q++;
                *out = vint(q * p);
            }
            return KT_OK;
        }
        if (!isfinite(f) || digits > 300) {
            *out = args[0];
        } else if (digits >= 0) { /* printf rounds the exact binary value correctly, as Python does */
            char buf[720]; /* 309 digits of the largest double, a point, 300 decimals, a sign */
            snprintf(buf, sizeof buf, "%.*f", (int)digits, f);
            *out = vfloat(strtod(buf, NULL));
        } else {
            double scale = pow(10.0, (double)-digits);
            *out = vfloat(round_even(f / scale) * scale);
        }
        return KT_OK;
    }
    if (n != 1) return EERR(x, col, "%s() takes exactly one argument (%d given)", name, n);
    const kt__value *a = &args[0];
    switch (b) {
    case B_ABS:
        if (a->t == KT_V_FLOAT) *out = vfloat(fabs(a->f));
        else if (a->t == KT_V_INT || a->t == KT_V_BOOL) {
            int64_t i = 0;
            kt__value_to_int(a, &i);
            if (i == INT64_MIN) return EERR(x, col, "integer overflow in abs()");
            *out = vint(i < 0 ? -i : i);
        } else return EERR(x, col, "bad operand type for abs(): '%s'", type_name(a));
        return KT_OK;
    case B_LEN:
        if (a->t == KT_V_LIST) *out = vint((int64_t)a->list.n);
        else if (a->t == KT_V_STR) *out = vint((int64_t)a->str.len);
        else return EERR(x, col, "object of type '%s' has no len()", type_name(a));
        return KT_OK;
    case B_BOOL: *out = vbool(kt__value_truthy(a)); return KT_OK;
    case B_LIST: /* list(range(...)) as Kernel Tuner's T1 files write it; a string gives its characters */
        if (a->t == KT_V_LIST) {
            *out = *a;
        } else if (a->t == KT_V_STR) {
            kt__value *items = arena_alloc(x->arena, (a->str.len ? a->str.len : 1) * sizeof *items);
            if (items == NULL) return EERR(x, col, "out of memory");
            for (size_t i = 0; i < a->str.len; i++) items[i] = (kt__value){.t = KT_V_STR, .str = {a->str.s + i, 1}};
            *out = (kt__value){.t = KT_V_LIST, .list = {items, a->str.len}};
        } else {
            return EERR(x, col, "'%s' object is not iterable", type_name(a));
        }
        return KT_OK;
    case B_INT:
    case B_ROUND:
        if (a->t == KT_V_INT || a->t == KT_V_BOOL) {
            int64_t i = 0;
            kt__value_to_int(a, &i);
            *out = vint(i);
        } else if (a->t == KT_V_FLOAT) {
            double f = b == B_ROUND ? round_even(a->f) : trunc(a->f);
            if (!(f >= -9.2e18 && f <= 9.2e18)) return EERR(x, col, "cannot convert float %g to integer", a->f);
            *out = vint((int64_t)f);
        } else if (a->t == KT_V_STR && b == B_INT) {
            char buf[64], *end;
            snprintf(buf, sizeof buf, "%.*s", (int)a->str.len, a->str.s);
            errno = 0;
            long long v = strtoll(buf, &end, 10);
            while (*end == ' ') end++;
            if (end == buf || *end || errno) return EERR(x, col, "invalid literal for int(): '%s'", buf);
            *out = vint(v);
        } else return EERR(x, col, "%s() argument must be a number, not '%s'", name, type_name(a));
        return KT_OK;
    case B_FLOAT:
        if (a->t == KT_V_STR) {
            char buf[64], *end;
            snprintf(buf, sizeof buf, "%.*s", (int)a->str.len, a->str.s);
            double f = strtod(buf, &end);
            while (*end == ' ') end++;
            if (end == buf || *end) return EERR(x, col, "could not convert string to float: '%s'", buf);
            *out = vfloat(f);
        } else {
            double f;
            if (!kt__value_to_double(a, &f)) return EERR(x, col, "float() argument must be a number, not '%s'", type_name(a));
            *out = vfloat(f);
        }
        return KT_OK;
    default: break;
    }
    return EERR(x, col, "unknown function");
}

static kt_status eval(const evalctx *x, int32_t idx, kt__value *out) {
    const node *n = &x->e->nodes[idx];
    kt__value a, b;
    switch (n->kind) {
    case N_CONST: *out = x->e->consts[n->a]; return KT_OK;
    case N_SLOT:
        if (x->slots == NULL) return EERR(x, n->col, "no value for a name here");
        *out = x->slots[n->a];
        return KT_OK;
    case N_LIST: {
        kt__value *items = arena_alloc(x->arena, (n->n ? n->n : 1) * sizeof *items);
        if (items == NULL) return EERR(x, n->col, "out of memory");
        for (int i = 0; i < n->n; i++)
            if (eval(x, x->e->kids[n->a + i], &items[i]) != KT_OK) return KT_ERR_INVALID_ARGUMENT;
        *out = (kt__value){.t = KT_V_LIST, .list = {items, n->n}};
        return KT_OK;
    }
    case N_UNARY:
        if (eval(x, n->a, &a) != KT_OK) return KT_ERR_INVALID_ARGUMENT;
        if (!is_num(&a)) return EERR(x, n->col, "bad operand type for unary operator: '%s'", type_name(&a));
        if (n->op == OP_POS) {
            *out = a.t == KT_V_BOOL ? vint(a.b) : a;
        } else if (a.t == KT_V_FLOAT) {
            if (n->op == OP_INV) return EERR(x, n->col, "bad operand type for unary ~: 'float'");
            *out = vfloat(-a.f);
        } else {
            int64_t i = 0;
            kt__value_to_int(&a, &i);
            if (n->op == OP_INV) *out = vint(~i);
            else if (i == INT64_MIN) return EERR(x, n->col, "integer overflow in unary '-'");
            else *out = vint(-i);
        }
        return KT_OK;
    case N_NOT:
        if (eval(x, n->a, &a) != KT_OK) return KT_ERR_INVALID_ARGUMENT;
        *out = vbool(!kt__value_truthy(&a));
        return KT_OK;
    case N_AND:
    case N_OR:
        if (eval(x, n->a, &a) != KT_OK) return KT_ERR_INVALID_ARGUMENT;
        if (kt__value_truthy(&a) == (n->kind == N_OR)) {
            *out = a;
            return KT_OK;
        }
        return eval(x, n->b, out);
    case N_COND:
        if (eval(x, n->a, &a) != KT_OK) return KT_ERR_INVALID_ARGUMENT;
        return eval(x, kt__value_truthy(&a) ? n->b : n->c, out);
    case N_BIN:
        if (eval(x, n->a, &a) != KT_OK || eval(x, n->b, &b) != KT_OK) return KT_ERR_INVALID_ARGUMENT;
        return binary(x, n->op, &a, &b, n->col, out);
    case N_CMP: {
        if (eval(x, x->e->kids[n->a], &a) != KT_OK) return KT_ERR_INVALID_ARGUMENT;
        for (int i = 1; i < n->n; i++) {
            if (eval(x, x->e->kids[n->a + i], &b) != KT_OK) return KT_ERR_INVALID_ARGUMENT;
            bool r = false;
            if (compare(x, x->e->cmpops[n->b + i - 1], &a, &b, n->col, &r) != KT_OK) return KT_ERR_INVALID_ARGUMENT;
            if (!r) {
                *out = vbool(false);
                return KT_OK;
            }
            a = b;
        }
        *out = vbool(true);
        return KT_OK;
    }
    case N_INDEX: {
        if (eval(x, n->a, &a) != KT_OK || eval(x, n->b, &b) != KT_OK) return KT_ERR_INVALID_ARGUMENT;
        int64_t i;
        if (b.t == KT_V_FLOAT || !kt__value_to_int(&b, &i))
            return EERR(x, n->col, "indices must be integers, not '%s'", type_name(&b));
        size_t len = a.t == KT_V_LIST ? a.list.n : a.t == KT_V_STR ? a.str.len : 0;
        if (a.t != KT_V_LIST && a.t != KT_V_STR) return EERR(x, n->col, "'%s' object is not subscriptable", type_name(&a));
        if (i < 0) i += (int64_t)len;
        if (i < 0 || (size_t)i >= len) return EERR(x, n->col, "index out of range");
        if (a.t == KT_V_LIST) *out = a.list.items[i];
        else *out = (kt__value){.t = KT_V_STR, .str = {a.str.s + i, 1}};
        return KT_OK;
    }
    case N_CALL: {
        kt__value args[16];
        if (n->n > 16) return EERR(x, n->col, "too many arguments");
        for (int i = 0; i < n->n; i++)
            if (eval(x, x->e->kids[n->a + i], &args[i]) != KT_OK) return KT_ERR_INVALID_ARGUMENT;
        return call_builtin(x, n->op, args, n->n, n->col, out);
    }
    }
    return EERR(x, n->col, "internal error: bad node");
}

static kt_status eval_node(const kt__expr *e, int32_t idx, const kt__value *slots, kt__arena *arena,
                           const char *where, kt__value *out) {
    evalctx x = {e, slots, arena, where};
    return eval(&x, idx, out);
}

kt_status kt__expr_eval(const kt__expr *e, const kt__value *slots, kt__arena *arena, const char *where,
                        kt__value *out) {
    return eval_node(e, e->root, slots, arena, where, out);
}
