/*
 * expr_int.h - what the files of the expression language share; other files use expr.h.
 *
 *   expr_value.c     the arena, values: conversions, truthiness, formatting as Python's repr
 *   expr_lex.c       tokens, and the message of an error at a column of the expression
 *   expr_parse.c     the parser (Python's precedence) building the node array, with constant
 *                    folding; kt__expr_parse, _free, _text, _is_const
 *   expr_eval.c      evaluation of the node array: operators, comparisons, indexing,
 *                    comprehensions (list comprehensions, generator arguments) and the bounds
 *   expr_builtins.c  the built-in functions (min, max, abs, int, float, len, range, round,
 *                    sum, bool, list)
 *
 * Semantics follow Python 3: `/` is true division, `//` and `%` floor toward negative
 * infinity, `and`/`or` return an operand, comparisons chain, bools are integers in arithmetic,
 * integers are 64-bit (overflow is an error rather than a bignum).
 */
#ifndef KT_EXPR_INT_H
#define KT_EXPR_INT_H

#include "space/expr.h"
#include "util/util.h"

/* ---- the node array ------------------------------------------------------------------------ */

enum kind { N_CONST, N_SLOT, N_LIST, N_UNARY, N_BIN, N_AND, N_OR, N_NOT, N_CMP, N_COND, N_CALL, N_INDEX, N_LOCAL, N_COMP };

/* A comprehension (N_COMP) has its loop variables in locals (N_LOCAL reads one), numbered per
 * expression: at most this many live at once (a comprehension's and those of the ones around it). */
#define KT__EXPR_MAX_LOCALS 32
/* The 'for' and 'if' clauses of one comprehension. */
#define KT__EXPR_MAX_CLAUSES 32

enum op {
    OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_BAND, OP_BOR, OP_BXOR, OP_SHL, OP_SHR,
    OP_NEG, OP_POS, OP_INV,
    OP_LT, OP_LE, OP_GT, OP_GE, OP_EQ, OP_NE, OP_IN, OP_NOTIN
};

enum builtin { B_MIN, B_MAX, B_ABS, B_INT, B_FLOAT, B_LEN, B_RANGE, B_ROUND, B_SUM, B_BOOL, B_LIST, KT__NBUILTINS };

/* The built-ins' names, by enum builtin (expr_builtins.c). */
extern const char *const kt__expr_builtin_names[KT__NBUILTINS];

typedef struct node {
    uint8_t kind, op;
    uint16_t n;     /* operand count of LIST, CALL, CMP; clause count of COMP */
    int32_t a, b, c; /* children, or the start of a run in kids[]; CONST: index in consts; LOCAL: the local */
    int32_t col;    /* 1-based column, for errors */
} node;

/* N_COMP: `[b for ... if ...]`. Its clauses are n triples in kids[a...]: the local a `for`
 * binds (-1 for an `if`), the node of the iterable or condition, and that node's first column.
 * b is the element; its op loop variables (one per distinct name) are locals c .. c + op - 1,
 * and the comprehensions inside it use locals above those. */
#define KT__COMP_KIDS 3

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
    int32_t nlocals; /* locals an evaluation needs (comprehensions' loop variables) */
};

/* ---- values -------------------------------------------------------------------------------- */

static inline kt__value kt__vint(int64_t i) { return (kt__value){.t = KT_V_INT, .i = i}; }
static inline kt__value kt__vfloat(double f) { return (kt__value){.t = KT_V_FLOAT, .f = f}; }
static inline kt__value kt__vbool(bool b) { return (kt__value){.t = KT_V_BOOL, .b = b}; }

static inline bool kt__value_is_num(const kt__value *v) { return v->t == KT_V_INT || v->t == KT_V_FLOAT || v->t == KT_V_BOOL; }

/* kt__value_truthy, kt__value_to_int and kt__value_to_double, inline for evaluation's hot
 * paths. */
static inline bool kt__truthy(const kt__value *v) {
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
static inline bool kt__num_int(const kt__value *v, int64_t *out) {
    if (v->t == KT_V_INT) *out = v->i;
    else if (v->t == KT_V_BOOL) *out = v->b;
    else return false;
    return true;
}
static inline bool kt__num_double(const kt__value *v, double *out) {
    if (v->t == KT_V_FLOAT) *out = v->f;
    else if (v->t == KT_V_INT) *out = (double)v->i;
    else if (v->t == KT_V_BOOL) *out = v->b;
    else return false;
    return true;
}

/* Python's name of a value's type ("int", "list"...), for messages. */
const char *kt__value_type_name(const kt__value *v);

/* ---- expr_lex.c: tokens and errors --------------------------------------------------------- */

/* Fails with KT_ERR_INVALID_ARGUMENT: "<where>: expression '<text>': column <col>: <what>". */
kt_status kt__expr_err(const char *where, const char *text, int col, const char *fmt, ...) KT__PRINTF(4, 5);

/* Fails with KT_ERR_NO_MEMORY: "<where>: expression '<text>': column <col>: out of memory
 * allocating <what>". */
kt_status kt__expr_oom(const char *where, const char *text, int col, const char *what);

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

/* Reads the next token into lx (T_END at the end, or with lx->err set on a bad token). */
void kt__lex_next(lexer *lx);

/* Whether the current token is the operator op, or the name kw. */
bool kt__lex_is_op(const lexer *lx, const char *op);
bool kt__lex_is_kw(const lexer *lx, const char *kw);

/* ---- expr_eval.c, expr_builtins.c: evaluation ---------------------------------------------- */

/* What one evaluation changes as it goes: the loop variables of comprehensions, and what is
 * left of the evaluation's bounds (KT__EXPR_MAX_ITEMS each). */
typedef struct evalrun {
    size_t items_left; /* list items and string characters it may still make */
    size_t iters_left; /* comprehension iterations it may still run */
    size_t steps_left; /* nodes it may still evaluate (KT__EXPR_MAX_STEPS) */
    kt__value locals[KT__EXPR_MAX_LOCALS];
    bool bound[KT__EXPR_MAX_LOCALS]; /* whether a local has a value yet */
} evalrun;

typedef struct evalctx {
    const kt__expr *e;
    const kt__value *slots;
    kt__arena *arena;
    const char *where;
    evalrun *run;
} evalctx;

/* An error of the operation at column col of the expression being evaluated. */
#define EERR(x, col, ...) kt__expr_err((x)->where, (x)->e->text, (col), __VA_ARGS__)
/* Out of memory allocating what for the operation at column col. */
#define EOOM(x, col, what) kt__expr_oom((x)->where, (x)->e->text, (col), (what))

/* Evaluates node idx of e (the parser folds constants with it: slots may be NULL). */
kt_status kt__expr_eval_node(const kt__expr *e, int32_t idx, const kt__value *slots, kt__arena *arena, const char *where,
                             kt__value *out);

/* Total order for comparisons; *cmp receives -1, 0 or 1, or 2 when a NaN makes the two
 * unordered. Returns false when the two values cannot be ordered at all (for == and != that
 * means "unequal"). */
bool kt__expr_order(const kt__value *a, const kt__value *b, int *cmp);

/* a op b for a binary operator (OP_ADD..OP_SHR). */
kt_status kt__expr_binary(const evalctx *x, int op, const kt__value *a, const kt__value *b, int col, kt__value *out);

/* Counts n new list items or string characters (what: the operation, for the message) against
 * the evaluation's bound: an error past KT__EXPR_MAX_ITEMS. A list's items count with what
 * they hold (kt__expr_weight), so that no value an evaluation gives holds more, however it
 * shares lists: copying, formatting or comparing one stays within the bound too. */
kt_status kt__expr_charge(const evalctx *x, size_t n, int col, const char *what);

/* What v holds, counted deep: 1 for a number, bool or None, 1 + its characters for a string,
 * 1 + the weights of its items for a list; once past limit, some count above limit. */
size_t kt__expr_weight(const kt__value *v, size_t limit);

/* Charges n items (their weights) that a new list holds. */
kt_status kt__expr_charge_items(const evalctx *x, const kt__value *items, size_t n, int col, const char *what);

/* range()'s arguments as start, stop, step in v, and how many items it gives in *count (an
 * error past KT__EXPR_MAX_ITEMS). */
kt_status kt__expr_range(const evalctx *x, const kt__value *args, int n, int col, int64_t v[3], int64_t *count);

/* Item i of range v (start, stop, step): computed in uint64, where the steps from start may
 * pass INT64_MAX on the way to an item within the range. */
static inline int64_t kt__range_item(const int64_t v[3], int64_t i) {
    return (int64_t)((uint64_t)v[0] + (uint64_t)i * (uint64_t)v[2]);
}

/* One item v of sum, min or max (b) over a sequence: *acc is the sum so far (from int 0) or the
 * least or greatest item so far (*have: whether there was one). */
kt_status kt__expr_reduce(const evalctx *x, int b, kt__value *acc, bool *have, const kt__value *v, int col);

/* The result of sum, min or max (b) once every item went through kt__expr_reduce. */
kt_status kt__expr_reduced(const evalctx *x, int b, const kt__value *acc, bool have, int col, kt__value *out);

/* Calls built-in b on n evaluated arguments. */
kt_status kt__expr_call_builtin(const evalctx *x, int b, const kt__value *args, int n, int col, kt__value *out);

#endif /* KT_EXPR_INT_H */
