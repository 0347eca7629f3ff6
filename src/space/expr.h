/*
 * expr.h - the expression language: the Python subset that T1 files use for parameter values,
 * constraints, derived values, sizes and launch geometry. Internal to the library.
 *
 * An expression is parsed once into a flat array of nodes (constants folded, names resolved to
 * slot numbers by the caller's resolver) and then evaluated many times against an array of slot
 * values. Evaluation allocates only for values that need it (lists, new strings), from a caller's
 * arena that is reset between evaluations.
 *
 * Besides literals, operators, conditionals and the built-ins (expr_builtins.c), the language
 * has Python's list comprehensions, `[x * y for x in range(3) if x for y in range(x)]`: any
 * number of `for NAME in ITERABLE` and `if COND` clauses after the first `for`, nested left to
 * right; the iterable a list, a range(), a string (its characters) or anything giving one; the
 * loop variables local to the comprehension (they shadow a name of the caller's, and are gone
 * after it); and generator expressions as the only argument of sum, min, max and list
 * (`sum(x for x in range(4))`), evaluated as the list they would give. Nothing runs away: one
 * evaluation makes at most KT__EXPR_MAX_ITEMS list items and string characters in all and runs
 * at most KT__EXPR_MAX_ITEMS comprehension iterations in all (nested ones included); past either
 * it fails with an error naming the expression, the column of the operation (of the
 * comprehension, for iterations) and the bound.
 */
#ifndef KT_EXPR_H
#define KT_EXPR_H

#include <kerntune.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The bound of one evaluation: list items and string characters made, and comprehension
 * iterations run (each counted on its own). range() of more items fails too. */
#define KT__EXPR_MAX_ITEMS 10000000
/* ... and the expression's nodes evaluated: a condition of thousands of terms in a comprehension
 * of 10^7 iterations would otherwise run for hours within the bounds above (fuzz-space found a
 * chain of four conditions at 10^7 iterations taking 23 s instrumented). */
#define KT__EXPR_MAX_STEPS 50000000

typedef enum kt__vtype { KT_V_NONE, KT_V_BOOL, KT_V_INT, KT_V_FLOAT, KT_V_STR, KT_V_LIST } kt__vtype;

typedef struct kt__value {
    kt__vtype t;
    union {
        bool b;
        int64_t i;
        double f;
        struct {
            const char *s;
            size_t len;
        } str;
        struct {
            const struct kt__value *items;
            size_t n;
        } list;
    };
} kt__value;

/* A bump allocator for values made while evaluating; kt__arena_reset keeps its first block
 * (4 KiB) for the next evaluation and frees the larger ones. */
typedef struct kt__arena {
    char *mem;
    size_t used, cap;
    struct kt__arena_block *blocks; /* overflow blocks, freed on reset */
} kt__arena;

/* Allocates n bytes (16-byte aligned) from the arena; NULL when out of memory. */
void *kt__arena_alloc(kt__arena *a, size_t n);
void kt__arena_reset(kt__arena *a);
void kt__arena_free(kt__arena *a);

/* Deep-copies src (list items, string bytes) into arena; false when out of memory. */
bool kt__value_copy(const kt__value *src, kt__arena *arena, kt__value *out);

/* Resolves a name to a slot number, or returns -1 when the name is unknown. */
typedef int (*kt__resolve_fn)(const char *name, size_t len, void *user);

typedef struct kt__expr kt__expr;

/* Parses text. Names are resolved with resolve (which may be NULL: no names). On error returns
 * KT_ERR_INVALID_ARGUMENT with "<where>: expression '<text>': column N: <what>" as the detail,
 * or KT_ERR_NO_MEMORY saying what could not be allocated. */
kt_status kt__expr_parse(const char *text, kt__resolve_fn resolve, void *user, const char *where, kt__expr **out);

void kt__expr_free(kt__expr *e);

/* The source text. */
const char *kt__expr_text(const kt__expr *e);

/* Whether the expression is a constant (folded at parse time; slots unused). */
bool kt__expr_is_const(const kt__expr *e);

/* Evaluates against slots (one value per resolved slot). Errors (division by zero, a type
 * error, an index out of range) return KT_ERR_INVALID_ARGUMENT with a message naming the
 * expression and the column of the failing operation; running out of arena memory returns
 * KT_ERR_NO_MEMORY with the same, saying what was being allocated. */
kt_status kt__expr_eval(const kt__expr *e, const kt__value *slots, kt__arena *arena, const char *where,
                        kt__value *out);

/* Python truthiness of a value. */
bool kt__value_truthy(const kt__value *v);

/* Formats a value as Python's repr would (lists as [a, b], strings quoted with '). */
void kt__value_format(const kt__value *v, char *buf, size_t len);

/* The bytes kt__value_format of v needs, exactly, the NUL included. */
size_t kt__value_format_len(const kt__value *v);

/* Numeric conversions; false when the value is not a number (bools count as 0 and 1). */
bool kt__value_to_int(const kt__value *v, int64_t *out);
/* A float that is a whole number within int64's range, as that integer; false for any other
 * (a fraction, inf, NaN, or beyond 2^63, whose conversion C leaves undefined). */
bool kt__float_whole(double f, int64_t *out);
bool kt__value_to_double(const kt__value *v, double *out);

/* ---- integer programs: an expression specialised for values that change per call ----------- */

/* What a call's global size comes to once every slot but a few integer inputs is fixed: the
 * expression compiled into a short postfix program over 64-bit integers (expr_iprog.c). Only
 * integer arithmetic is compiled (+ - * // %, unary - and +, min, max, abs, int), with
 * sub-expressions that read no input folded into constants; anything else (floats, strings,
 * lists, comprehensions, comparisons, conditionals) is left to the interpreter. */
#define KT__IPROG_MAX 32
typedef struct kt__iprog {
    uint8_t n;                /* instructions */
    bool accumulator;         /* a load, then operations with constant operands only */
    uint8_t op[KT__IPROG_MAX];
    int64_t v[KT__IPROG_MAX]; /* an instruction's constant, or the index of the input it reads */
} kt__iprog;

/* Compiles e for fixed slot values and per-call inputs: var[s] >= 0 says that slot s is input
 * var[s] (an integer each run passes), -1 that slots[s] is fixed, -2 that each call gives it a
 * value that is not an integer. Returns false when e is outside the compiled subset, reads a
 * slot that is not a fixed integer or integer input, or is longer than KT__IPROG_MAX. */
bool kt__expr_compile_int(const kt__expr *e, const kt__value *slots, const int *var, kt__iprog *out);

/* Runs p on inputs in (indexed as var gave them); false on an integer overflow, a division or
 * modulo by zero, or a negative result: the interpreter then evaluates the expression and says
 * what is wrong. Allocates nothing. */
bool kt__iprog_run(const kt__iprog *p, const int64_t *in, int64_t *out);

#endif
