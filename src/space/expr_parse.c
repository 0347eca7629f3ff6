/*
 * expr_parse.c - parsing the expression language (see expr.h): a recursive-descent parser
 * with Python's precedence (one function per level; the binary operators' levels from a
 * table), producing a flat array of nodes. A node whose operands are all constants is
 * evaluated at once and replaced by its value (constant folding), so `[16, 32, 64]` or `2**10`
 * cost nothing at evaluation time.
 *
 * A comprehension is known by a `for` at the bracket's own depth, found by scanning ahead to
 * the closing bracket. Its clauses are parsed first (the first iterable in the scope around
 * it, the rest with the loop variables visible, as Python scopes them), then the parser
 * returns to the element and parses it with the loop variables visible, and resumes after the
 * closing bracket. A comprehension that reads no name from outside it folds to its list.
 */
#include "space/expr_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- building nodes --------------------------------------------------------------------------- */

typedef struct parser {
    lexer lx;
    kt__expr *e;
    kt__resolve_fn resolve;
    void *user;
    kt__arena scratch; /* for folding */
    int depth;
    /* the loop variables of the comprehensions being parsed, by local number: locals
     * [0, nlive) are allocated, the visible ones resolve names (the latest first) */
    struct {
        const char *name;
        size_t len;
        bool visible;
    } locals[KT__EXPR_MAX_LOCALS];
    int nlive;
} parser;

/* Fails the parse: out of memory allocating what. Returns -1, as the parse functions do. */
static int32_t oom(parser *p, const char *what) {
    p->lx.err = kt__err(KT_ERR_NO_MEMORY, "%s: expression '%s': out of memory allocating %s", p->lx.where, p->lx.text, what);
    return -1;
}

/* The add_* functions below append to the expression's arrays; on failure they report (oom)
 * and return -1. */
static int32_t add_node(parser *p, node n) {
    kt__expr *e = p->e;
    if (e->nnodes == e->cap) {
        int32_t cap = e->cap ? 2 * e->cap : 32;
        node *nn = realloc(e->nodes, (size_t)cap * sizeof *nn);
        if (nn == NULL) return oom(p, "its nodes");
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
        if (nk == NULL) return oom(p, "its operand lists");
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
        if (nc == NULL) return oom(p, "its comparison operators");
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
    if (!persist(e, &v)) return oom(p, "a constant's value");
    if (e->nconsts == e->constcap) {
        int32_t cap = e->constcap ? 2 * e->constcap : 16;
        kt__value *nc = realloc(e->consts, (size_t)cap * sizeof *nc);
        if (nc == NULL) return oom(p, "its constants");
        e->consts = nc;
        e->constcap = cap;
    }
    e->consts[e->nconsts] = v;
    return add_node(p, (node){.kind = N_CONST, .a = e->nconsts++, .col = col});
}

/* Whether node idx is a constant (a node whose operands were all constants has been folded
 * into one already). */
static bool node_const(const kt__expr *e, int32_t idx) { return e->nodes[idx].kind == N_CONST; }

/* Whether node idx reads a name from outside a comprehension whose locals start at base: a
 * slot, or a local of a comprehension around it (those are numbered below base). */
static bool reads_outside(const kt__expr *e, int32_t idx, int32_t base) {
    const node *n = &e->nodes[idx];
    switch (n->kind) {
    case N_CONST: return false;
    case N_SLOT: return true;
    case N_LOCAL: return n->a < base;
    case N_LIST: case N_CALL: case N_CMP:
        for (int i = 0; i < n->n; i++)
            if (reads_outside(e, e->kids[n->a + i], base)) return true;
        return false;
    case N_UNARY: case N_NOT: return reads_outside(e, n->a, base);
    case N_COND: return reads_outside(e, n->a, base) || reads_outside(e, n->b, base) || reads_outside(e, n->c, base);
    case N_COMP:
        for (int i = 0; i < n->n; i++)
            if (reads_outside(e, e->kids[n->a + KT__COMP_KIDS * i + 1], base)) return true;
        return reads_outside(e, n->b, base);
    default: return reads_outside(e, n->a, base) || reads_outside(e, n->b, base); /* BIN, AND, OR, INDEX */
    }
}

/* Replaces node idx by its value when all operands are constants. Errors in folding (1 // 0)
 * are left for evaluation to report, so parsing never fails on them. */
static int32_t fold(parser *p, int32_t idx) {
    kt__expr *e = p->e;
    node n = e->nodes[idx];
    bool all = true;
    switch (n.kind) {
    case N_CONST: case N_SLOT: case N_LOCAL: return idx;
    case N_COMP: all = !reads_outside(e, idx, n.c); break;
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
    kt_status st = kt__expr_eval_node(e, idx, NULL, &p->scratch, "fold", &v);
    kt__error_restore(KT_OK, saved); /* a failed fold is not an error of the call */
    if (st != KT_OK) return idx;
    int32_t c = add_const(p, v, n.col); /* reports running out of memory */
    if (c < 0) return -1;
    e->nodes[idx] = e->nodes[c]; /* the folded node takes the constant's place */
    e->nnodes--;
    return idx;
}

/* ---- the parser ------------------------------------------------------------------------------- */

#define FAIL(p) ((p)->lx.err != KT_OK)

static int32_t parse_expr(parser *p);

static int32_t syntax(parser *p, const char *what) {
    if (!FAIL(p)) {
        if (p->lx.t == T_END)
            p->lx.err = kt__expr_err(p->lx.where, p->lx.text, p->lx.col, "%s, found the end", what);
        else
            p->lx.err = kt__expr_err(p->lx.where, p->lx.text, p->lx.col, "%s, found '%.*s'", what, (int)p->lx.len, p->lx.start);
    }
    return -1;
}

static bool expect(parser *p, const char *op) {
    if (!kt__lex_is_op(&p->lx, op)) {
        char what[32];
        snprintf(what, sizeof what, "expected '%s'", op);
        syntax(p, what);
        return false;
    }
    kt__lex_next(&p->lx);
    return !FAIL(p);
}

/* Parses a comma-separated list up to `close`: stores the items in kids, where they start in
 * *start and how many in *count. Returns 0, or -1 with the error set. */
static int parse_items(parser *p, const char *close, int32_t *start, uint16_t *count) {
    int32_t items[256];
    int n = 0;
    while (!kt__lex_is_op(&p->lx, close)) {
        if (n == 256) {
            syntax(p, "at most 256 items");
            return -1;
        }
        int32_t it = parse_expr(p);
        if (it < 0) return -1;
        items[n++] = it;
        if (kt__lex_is_op(&p->lx, ",")) {
            kt__lex_next(&p->lx);
            if (FAIL(p)) return -1;
        } else if (!kt__lex_is_op(&p->lx, close)) {
            char what[32];
            snprintf(what, sizeof what, "expected ',' or '%s'", close);
            syntax(p, what);
            return -1;
        }
    }
    kt__lex_next(&p->lx);
    if (FAIL(p)) return -1;
    *start = p->e->nkids;
    for (int i = 0; i < n; i++)
        if (add_kid(p, items[i]) < 0) return -1;
    *count = (uint16_t)n;
    return 0;
}

/* Whether the current token is a word that cannot name a value or a loop variable. */
static bool reserved_word(const lexer *lx) {
    static const char *const words[] = {"and", "or", "not", "if", "else", "in", "lambda", "for", "is", "True", "False", "None"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (kt__lex_is_kw(lx, words[i])) return true;
    return false;
}

/* What scanning a bracket's contents ahead found. */
typedef struct compscan {
    lexer first_for; /* the lexer at the first `for` of the bracket's own depth */
    const char *names[KT__EXPR_MAX_LOCALS];
    size_t lens[KT__EXPR_MAX_LOCALS];
    int nnames; /* the distinct names its `for` clauses bind; KT__EXPR_MAX_LOCALS + 1: more */
} compscan;

/* Scans from the current token (the first inside a bracket) to the matching `close`, leaving the
 * parser where it is: whether a `for` stands at the bracket's own depth (a comprehension), and
 * the names its `for` clauses bind. A bad token or unmatched brackets end the scan with "no":
 * the parse proper then meets the same fault and reports it (replacing the message a bad token
 * left). */
static bool scan_comp(const parser *p, const char *close, compscan *cs) {
    lexer lx = p->lx;
    int depth = 0;
    bool found = false;
    cs->nnames = 0;
    while (lx.err == KT_OK && lx.t != T_END) {
        if (depth == 0 && kt__lex_is_op(&lx, close)) return found;
        if (kt__lex_is_op(&lx, "(") || kt__lex_is_op(&lx, "[")) {
            depth++;
        } else if (kt__lex_is_op(&lx, ")") || kt__lex_is_op(&lx, "]")) {
            if (depth-- == 0) return false;
        } else if (depth == 0 && kt__lex_is_kw(&lx, "for")) {
            if (!found) cs->first_for = lx;
            found = true;
            kt__lex_next(&lx);
            if (lx.t == T_NAME && !reserved_word(&lx)) {
                int i = 0;
                while (i < cs->nnames && i < KT__EXPR_MAX_LOCALS && (cs->lens[i] != lx.len || strncmp(cs->names[i], lx.start, lx.len) != 0)) i++;
                if (i == cs->nnames && i < KT__EXPR_MAX_LOCALS) {
                    cs->names[i] = lx.start;
                    cs->lens[i] = lx.len;
                    cs->nnames++;
                } else if (i == KT__EXPR_MAX_LOCALS) {
                    cs->nnames = KT__EXPR_MAX_LOCALS + 1;
                }
            }
            continue; /* the token after `for` is looked at as any other */
        }
        kt__lex_next(&lx);
    }
    return false;
}

static int32_t parse_or(parser *p);

/* Parses a comprehension: the current token is its element's first, cs says where its first
 * `for` is and which names it binds; consumes the closing bracket `close`. col: the
 * comprehension's column (its bracket, or a generator expression's first token). */
static int32_t parse_comp(parser *p, int col, const char *close, const compscan *cs) {
    kt__expr *e = p->e;
    int base = p->nlive;
    if (cs->nnames > KT__EXPR_MAX_LOCALS - base) {
        p->lx.err = kt__expr_err(p->lx.where, p->lx.text, col, "more than %d loop variables in nested comprehensions",
                                 KT__EXPR_MAX_LOCALS);
        return -1;
    }
    for (int i = 0; i < cs->nnames; i++) {
        p->locals[base + i].name = cs->names[i];
        p->locals[base + i].len = cs->lens[i];
        p->locals[base + i].visible = false; /* not in the first iterable: Python evaluates it outside */
    }
    p->nlive += cs->nnames;
    if (p->nlive > e->nlocals) e->nlocals = p->nlive;
    lexer element = p->lx;
    p->lx = cs->first_for;
    int32_t clauses[KT__COMP_KIDS * KT__EXPR_MAX_CLAUSES];
    int nc = 0;
    while (kt__lex_is_kw(&p->lx, "for") || kt__lex_is_kw(&p->lx, "if")) {
        if (nc == KT__EXPR_MAX_CLAUSES) return syntax(p, "at most 32 'for' and 'if' clauses in a comprehension");
        int32_t local = -1;
        bool is_for = kt__lex_is_kw(&p->lx, "for");
        kt__lex_next(&p->lx);
        if (FAIL(p)) return -1;
        if (is_for) {
            if (p->lx.t != T_NAME || reserved_word(&p->lx)) return syntax(p, "expected a loop variable name");
            for (int i = 0; i < cs->nnames; i++)
                if (cs->lens[i] == p->lx.len && strncmp(cs->names[i], p->lx.start, p->lx.len) == 0) local = base + i;
            if (local < 0) return syntax(p, "expected a loop variable name"); /* the scan saw every name */
            kt__lex_next(&p->lx);
            if (FAIL(p)) return -1;
            if (!kt__lex_is_kw(&p->lx, "in")) return syntax(p, "expected 'in'");
            kt__lex_next(&p->lx);
            if (FAIL(p)) return -1;
        }
        int icol = p->lx.col;
        int32_t sub = parse_or(p);
        if (sub < 0) return -1;
        clauses[KT__COMP_KIDS * nc] = local;
        clauses[KT__COMP_KIDS * nc + 1] = sub;
        clauses[KT__COMP_KIDS * nc + 2] = icol;
        nc++;
        for (int i = 0; i < cs->nnames; i++) p->locals[base + i].visible = true;
    }
    if (!kt__lex_is_op(&p->lx, close)) {
        char what[32];
        snprintf(what, sizeof what, "expected '%s'", close);
        return syntax(p, what);
    }
    lexer after = p->lx;
    p->lx = element; /* back to the element, the loop variables visible */
    int32_t elem = parse_expr(p);
    if (elem < 0) return -1;
    if (p->lx.start != cs->first_for.start) return syntax(p, "expected 'for'");
    p->lx = after;
    kt__lex_next(&p->lx);
    if (FAIL(p)) return -1;
    for (int i = 0; i < cs->nnames; i++) p->locals[base + i].visible = false;
    p->nlive = base;
    node n = {.kind = N_COMP, .op = (uint8_t)cs->nnames, .n = (uint16_t)nc, .a = e->nkids, .b = elem, .c = base, .col = col};
    for (int i = 0; i < KT__COMP_KIDS * nc; i++)
        if (add_kid(p, clauses[i]) < 0) return -1;
    int32_t id = add_node(p, n);
    return id < 0 ? -1 : fold(p, id);
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
        kt__value v = lx->t == T_INT ? kt__vint(lx->ival) : kt__vfloat(lx->fval);
        kt__lex_next(lx);
        if (FAIL(p)) return -1;
        return add_const(p, v, col);
    }
    if (lx->t == T_STR) {
        size_t n = lx->len - 2, k = 0;
        char *buf = kt__arena_alloc(&p->scratch, n + 1);
        if (buf == NULL) return oom(p, "a string literal");
        for (size_t i = 1; i <= n; i++) buf[k++] = (lx->start[i] == '\\' && i < n) ? unescape(lx->start[++i]) : lx->start[i];
        kt__value v = {.t = KT_V_STR, .str = {buf, k}};
        kt__lex_next(lx);
        if (FAIL(p)) return -1;
        return add_const(p, v, col);
    }
    if (kt__lex_is_op(lx, "(")) {
        kt__lex_next(lx);
        if (FAIL(p)) return -1;
        compscan cs;
        if (scan_comp(p, ")", &cs)) {
            p->lx.err = kt__expr_err(lx->where, lx->text, col,
                                     "a generator expression is only taken as the argument of sum(), min(), max() or list()");
            return -1;
        }
        int32_t inner = parse_expr(p);
        if (inner < 0 || !expect(p, ")")) return -1;
        return inner;
    }
    if (kt__lex_is_op(lx, "[")) {
        kt__lex_next(lx);
        if (FAIL(p)) return -1;
        compscan cs;
        if (scan_comp(p, "]", &cs)) return parse_comp(p, col, "]", &cs);
        node n = {.kind = N_LIST, .col = col};
        if (parse_items(p, "]", &n.a, &n.n) < 0) return -1;
        int32_t id = add_node(p, n);
        return id < 0 ? -1 : fold(p, id);
    }
    if (lx->t == T_NAME) {
        const char *name = lx->start;
        size_t len = lx->len;
        if (kt__lex_is_kw(lx, "True") || kt__lex_is_kw(lx, "False") || kt__lex_is_kw(lx, "None")) {
            kt__value v = kt__lex_is_kw(lx, "None") ? (kt__value){.t = KT_V_NONE} : kt__vbool(kt__lex_is_kw(lx, "True"));
            kt__lex_next(lx);
            return FAIL(p) ? -1 : add_const(p, v, col);
        }
        if (reserved_word(lx)) return syntax(p, "expected a value");
        kt__lex_next(lx);
        if (FAIL(p)) return -1;
        if (kt__lex_is_op(lx, "(")) { /* a call of a builtin */
            int b = -1;
            for (size_t i = 0; i < KT__NBUILTINS; i++)
                if (strlen(kt__expr_builtin_names[i]) == len && strncmp(kt__expr_builtin_names[i], name, len) == 0) b = (int)i;
            if (b < 0) {
                p->lx.err = kt__expr_err(lx->where, lx->text, col, "unknown function '%.*s'", (int)len, name);
                return -1;
            }
            kt__lex_next(lx);
            if (FAIL(p)) return -1;
            node n = {.kind = N_CALL, .op = (uint8_t)b, .col = col};
            compscan cs;
            if (scan_comp(p, ")", &cs)) { /* a generator expression, the only argument: its list */
                if (b != B_SUM && b != B_MIN && b != B_MAX && b != B_LIST) {
                    p->lx.err = kt__expr_err(lx->where, lx->text, col, "%s() does not take a generator expression",
                                             kt__expr_builtin_names[b]);
                    return -1;
                }
                int32_t g = parse_comp(p, lx->col, ")", &cs);
                if (g < 0 || (n.a = add_kid(p, g)) < 0) return -1;
                n.n = 1;
            } else if (parse_items(p, ")", &n.a, &n.n) < 0) {
                return -1;
            }
            int32_t id = add_node(p, n);
            return id < 0 ? -1 : fold(p, id);
        }
        for (int i = p->nlive - 1; i >= 0; i--) /* a loop variable, the innermost first */
            if (p->locals[i].visible && p->locals[i].len == len && strncmp(p->locals[i].name, name, len) == 0)
                return add_node(p, (node){.kind = N_LOCAL, .a = i, .col = col});
        int slot = p->resolve ? p->resolve(name, len, p->user) : -1;
        if (slot < 0) {
            p->lx.err = kt__expr_err(lx->where, lx->text, col, "name '%.*s' is not defined", (int)len, name);
            return -1;
        }
        int32_t id = add_node(p, (node){.kind = N_SLOT, .a = slot, .col = col});
        return id;
    }
    return syntax(p, "expected a value");
}

static int32_t parse_postfix(parser *p) {
    int32_t base = parse_atom(p);
    while (base >= 0 && kt__lex_is_op(&p->lx, "[")) {
        int col = p->lx.col;
        kt__lex_next(&p->lx);
        if (FAIL(p)) return -1;
        int32_t index = parse_expr(p);
        if (index < 0 || !expect(p, "]")) return -1;
        int32_t id = add_node(p, (node){.kind = N_INDEX, .a = base, .b = index, .col = col});
        base = id < 0 ? -1 : fold(p, id);
    }
    return base;
}

static int32_t parse_unary(parser *p);

static int32_t parse_power(parser *p) {
    int32_t base = parse_postfix(p);
    if (base >= 0 && kt__lex_is_op(&p->lx, "**")) {
        int col = p->lx.col;
        kt__lex_next(&p->lx);
        if (FAIL(p)) return -1;
        int32_t exp = parse_unary(p); /* right-associative, binds tighter than unary minus on its left */
        if (exp < 0) return -1;
        int32_t id = add_node(p, (node){.kind = N_BIN, .op = OP_POW, .a = base, .b = exp, .col = col});
        return id < 0 ? -1 : fold(p, id);
    }
    return base;
}

static int32_t parse_unary(parser *p) {
    int col = p->lx.col;
    int op = kt__lex_is_op(&p->lx, "-") ? OP_NEG : kt__lex_is_op(&p->lx, "+") ? OP_POS : kt__lex_is_op(&p->lx, "~") ? OP_INV : -1;
    if (op < 0) return parse_power(p);
    if (++p->depth > 200) return syntax(p, "expression nested too deeply");
    kt__lex_next(&p->lx);
    if (FAIL(p)) return -1;
    int32_t a = parse_unary(p);
    p->depth--;
    if (a < 0) return -1;
    int32_t id = add_node(p, (node){.kind = N_UNARY, .op = (uint8_t)op, .a = a, .col = col});
    return id < 0 ? -1 : fold(p, id);
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
        while (b->tok && !kt__lex_is_op(&p->lx, b->tok)) b++;
        if (!b->tok) return left;
        int col = p->lx.col;
        kt__lex_next(&p->lx);
        if (FAIL(p)) return -1;
        int32_t right = parse_level(p, level + 1);
        if (right < 0) return -1;
        int32_t id = add_node(p, (node){.kind = N_BIN, .op = b->op, .a = left, .b = right, .col = col});
        left = id < 0 ? -1 : fold(p, id);
    }
}

static int cmp_op(parser *p) {
    lexer *lx = &p->lx;
    if (kt__lex_is_op(lx, "<")) return OP_LT;
    if (kt__lex_is_op(lx, "<=")) return OP_LE;
    if (kt__lex_is_op(lx, ">")) return OP_GT;
    if (kt__lex_is_op(lx, ">=")) return OP_GE;
    if (kt__lex_is_op(lx, "==")) return OP_EQ;
    if (kt__lex_is_op(lx, "!=")) return OP_NE;
    if (kt__lex_is_kw(lx, "in")) return OP_IN;
    if (kt__lex_is_kw(lx, "not")) return OP_NOTIN; /* must be followed by "in" */
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
        kt__lex_next(&p->lx);
        if (FAIL(p)) return -1;
        if (op == OP_NOTIN) {
            if (!kt__lex_is_kw(&p->lx, "in")) return syntax(p, "expected 'in' after 'not'");
            kt__lex_next(&p->lx);
            if (FAIL(p)) return -1;
        }
        ops[n++] = (uint8_t)op;
        operands[n] = parse_level(p, 0);
        if (operands[n] < 0) return -1;
        op = cmp_op(p);
    }
    node nd = {.kind = N_CMP, .n = (uint16_t)(n + 1), .a = p->e->nkids, .b = p->e->ncmp, .col = col};
    for (int i = 0; i <= n; i++)
        if (add_kid(p, operands[i]) < 0) return -1;
    for (int i = 0; i < n; i++)
        if (add_cmpop(p, ops[i]) < 0) return -1;
    int32_t id = add_node(p, nd);
    return id < 0 ? -1 : fold(p, id);
}

static int32_t parse_not(parser *p) {
    if (!kt__lex_is_kw(&p->lx, "not")) return parse_comparison(p);
    int col = p->lx.col;
    if (++p->depth > 200) return syntax(p, "expression nested too deeply");
    kt__lex_next(&p->lx);
    if (FAIL(p)) return -1;
    int32_t a = parse_not(p);
    p->depth--;
    if (a < 0) return -1;
    int32_t id = add_node(p, (node){.kind = N_NOT, .a = a, .col = col});
    return id < 0 ? -1 : fold(p, id);
}

static int32_t parse_and(parser *p) {
    int32_t left = parse_not(p);
    while (left >= 0 && kt__lex_is_kw(&p->lx, "and")) {
        int col = p->lx.col;
        kt__lex_next(&p->lx);
        if (FAIL(p)) return -1;
        int32_t right = parse_not(p);
        if (right < 0) return -1;
        int32_t id = add_node(p, (node){.kind = N_AND, .a = left, .b = right, .col = col});
        left = id < 0 ? -1 : fold(p, id);
    }
    return left;
}

static int32_t parse_or(parser *p) {
    int32_t left = parse_and(p);
    while (left >= 0 && kt__lex_is_kw(&p->lx, "or")) {
        int col = p->lx.col;
        kt__lex_next(&p->lx);
        if (FAIL(p)) return -1;
        int32_t right = parse_and(p);
        if (right < 0) return -1;
        int32_t id = add_node(p, (node){.kind = N_OR, .a = left, .b = right, .col = col});
        left = id < 0 ? -1 : fold(p, id);
    }
    return left;
}

static int32_t parse_expr(parser *p) {
    if (++p->depth > 200) return syntax(p, "expression nested too deeply");
    int32_t value = parse_or(p);
    if (value >= 0 && kt__lex_is_kw(&p->lx, "if")) {
        int col = p->lx.col;
        kt__lex_next(&p->lx);
        if (FAIL(p)) return -1;
        int32_t cond = parse_or(p);
        if (cond < 0) return -1;
        if (!kt__lex_is_kw(&p->lx, "else")) return syntax(p, "expected 'else'");
        kt__lex_next(&p->lx);
        if (FAIL(p)) return -1;
        int32_t other = parse_expr(p);
        if (other < 0) return -1;
        int32_t id = add_node(p, (node){.kind = N_COND, .a = cond, .b = value, .c = other, .col = col});
        value = id < 0 ? -1 : fold(p, id);
    }
    p->depth--;
    return value;
}

kt_status kt__expr_parse(const char *text, kt__resolve_fn resolve, void *user, const char *where, kt__expr **out) {
    *out = NULL;
    if (text == NULL) return kt__err(KT_ERR_NULL, "%s: expression is NULL", where);
    kt__expr *e = calloc(1, sizeof *e);
    if (e == NULL) return kt__err(KT_ERR_NO_MEMORY, "%s: out of memory allocating an expression", where);
    if ((e->text = strdup(text)) == NULL) {
        free(e);
        return kt__err(KT_ERR_NO_MEMORY, "%s: out of memory copying the expression '%.200s'", where, text);
    }
    parser p = {.lx = {.text = e->text, .where = where, .err = KT_OK}, .e = e, .resolve = resolve, .user = user};
    kt__lex_next(&p.lx);
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
