/*
 * expr_iprog.c - integer programs (see expr.h): an expression whose slots are fixed but for a
 * few integer inputs, compiled into postfix code over int64 that a call runs without the
 * interpreter, its value type checks or an arena. The semantics are the interpreter's for
 * integers (Python's floor division and modulo, bools as 0 and 1); where the interpreter would
 * fail (overflow, division by zero) a run returns false instead, and its caller asks the
 * interpreter, which says what failed.
 */
#include "space/expr_int.h"

/* Instructions: an input, a constant, then the operations, each of which either takes its right
 * operand from the stack or (I_IMM) is the instruction's constant; unary ones are always I_IMM
 * (their constant unused). */
enum { I_IN, I_C, I_ADD, I_SUB, I_MUL, I_FLOORDIV, I_MOD, I_MIN, I_MAX, I_SHR, I_AND, I_NEG, I_ABS };
#define I_IMM 0x80

/* One operation on x with right operand b (unused by the unary ones); false where the
 * interpreter fails. */
static inline bool step(int op, int64_t *xp, int64_t b) {
    int64_t x = *xp;
    switch (op) {
    case I_ADD:
        if (__builtin_add_overflow(x, b, &x)) return false;
        break;
    case I_SUB:
        if (__builtin_sub_overflow(x, b, &x)) return false;
        break;
    case I_MUL:
        if (__builtin_mul_overflow(x, b, &x)) return false;
        break;
    case I_FLOORDIV:
        if (b == 0 || (x == INT64_MIN && b == -1)) return false;
        x = x / b - ((x % b != 0) && ((x < 0) != (b < 0)));
        break;
    case I_MOD:
        if (b == 0) return false;
        if (b == -1) { /* INT64_MIN % -1 traps in C; Python gives 0 */
            x = 0;
            break;
        }
        x = x % b;
        if (x != 0 && ((x < 0) != (b < 0))) x += b;
        break;
    case I_MIN: x = b < x ? b : x; break;
    case I_MAX: x = b > x ? b : x; break;
    case I_SHR: x >>= b; break; /* // 2**b: an arithmetic shift floors as Python does */
    case I_AND: x &= b; break;  /* % (b + 1), a power of two: Python's result, in [0, b] */
    case I_NEG:
    case I_ABS:
        if (x == INT64_MIN) return false;
        if (op == I_NEG || x < 0) x = -x;
        break;
    default: return false;
    }
    *xp = x;
    return true;
}

/* Runs p, which leaves one value: *out. The top of the stack stays in x; false where the
 * interpreter fails. */
static bool run(const kt__iprog *p, const int64_t *in, int64_t *out) {
    int64_t stack[KT__IPROG_MAX], x = 0, b;
    int sp = 0;
    for (int k = 0; k < p->n; k++) {
        int op = p->op[k];
        if (op == I_IN || op == I_C) {
            stack[sp++] = x;
            x = op == I_IN ? in[p->v[k]] : p->v[k];
            continue;
        }
        if (op & I_IMM) {
            b = p->v[k];
        } else {
            b = x;
            x = stack[--sp];
        }
        if (!step(op & ~I_IMM, &x, b)) return false;
    }
    *out = x;
    return true;
}

/* A program whose first instruction loads and whose others all take their operand from the
 * instruction (most launch sizes: `(n + B - 1) // B` is an input, an add and a shift) runs
 * without a stack. */
KT__HOT static bool run_accumulator(const kt__iprog *p, const int64_t *in, int64_t *out) {
    int64_t x = p->op[0] == I_IN ? in[p->v[0]] : p->v[0];
    for (int k = 1; k < p->n; k++)
        if (!step(p->op[k] & ~I_IMM, &x, p->v[k])) return false;
    *out = x;
    return true;
}

KT__HOT bool kt__iprog_run(const kt__iprog *p, const int64_t *in, int64_t *out) {
    int64_t r;
    if (!(p->accumulator ? run_accumulator(p, in, &r) : run(p, in, &r)) || r < 0) return false;
    *out = r;
    return true;
}

typedef struct comp {
    const kt__expr *e;
    const kt__value *slots;
    const int *var;
    kt__iprog *p;
} comp;

static bool emit(kt__iprog *p, int op, int64_t v) {
    if (p->n >= KT__IPROG_MAX) return false;
    p->op[p->n] = (uint8_t)op;
    p->v[p->n++] = v;
    return true;
}

static bool int_value(const kt__value *v, int64_t *out) { return v->t != KT_V_FLOAT && kt__num_int(v, out); }

/* Node idx as a fixed integer: a constant, or a slot that is not an input. */
static bool fixed_int(const comp *c, int32_t idx, int64_t *out) {
    const node *n = &c->e->nodes[idx];
    if (n->kind == N_CONST) return int_value(&c->e->consts[n->a], out);
    return n->kind == N_SLOT && c->var[n->a] == -1 && int_value(&c->slots[n->a], out);
}

/* Whether node idx reads a slot that each call gives. */
static bool reads_call_slot(const comp *c, int32_t idx) {
    const node *n = &c->e->nodes[idx];
    switch (n->kind) {
    case N_CONST: return false;
    case N_SLOT: return c->var[n->a] != -1;
    case N_LIST:
    case N_CALL:
    case N_CMP:
        for (int i = 0; i < n->n; i++)
            if (reads_call_slot(c, c->e->kids[n->a + i])) return true;
        return false;
    case N_LOCAL: return false; /* a comprehension's loop variable: its comprehension says */
    case N_COMP:
        for (int i = 0; i < n->n; i++)
            if (reads_call_slot(c, c->e->kids[n->a + KT__COMP_KIDS * i + 1])) return true;
        return reads_call_slot(c, n->b);
    case N_UNARY:
    case N_NOT: return reads_call_slot(c, n->a);
    case N_COND: return reads_call_slot(c, n->a) || reads_call_slot(c, n->b) || reads_call_slot(c, n->c);
    default: return reads_call_slot(c, n->a) || reads_call_slot(c, n->b); /* BIN, AND, OR, INDEX */
    }
}

static bool compile(comp *c, int32_t idx) {
    const node *n = &c->e->nodes[idx];
    int64_t v;
    bool ok = false;
    if (n->kind != N_CONST && n->kind != N_SLOT && !reads_call_slot(c, idx)) {
        /* reads no input: whatever it is made of (floats, lists, conditionals), the interpreter
         * gives its value once, here, and an integer becomes a constant. It is an operand of an
         * operation the interpreter evaluated when it planned the configuration, so it evaluates
         * as it did then. */
        kt__arena arena = {0};
        kt__value val;
        ok = kt__expr_eval_node(c->e, idx, c->slots, &arena, "launch size", &val) == KT_OK && int_value(&val, &v) &&
             emit(c->p, I_C, v);
        kt__arena_free(&arena);
        return ok;
    }
    switch (n->kind) {
    case N_CONST:
    case N_SLOT:
        if (n->kind == N_SLOT && c->var[n->a] >= 0) ok = emit(c->p, I_IN, c->var[n->a]);
        else ok = fixed_int(c, idx, &v) && emit(c->p, I_C, v);
        break;
    case N_UNARY:
        ok = (n->op == OP_POS || n->op == OP_NEG) && compile(c, n->a) && (n->op == OP_POS || emit(c->p, I_NEG | I_IMM, 0));
        break;
    case N_BIN: {
        static const int ops[] = {[OP_ADD] = I_ADD, [OP_SUB] = I_SUB, [OP_MUL] = I_MUL, [OP_FLOORDIV] = I_FLOORDIV,
                                  [OP_MOD] = I_MOD};
        if (n->op != OP_ADD && n->op != OP_SUB && n->op != OP_MUL && n->op != OP_FLOORDIV && n->op != OP_MOD) break;
        if (!compile(c, n->a)) break;
        if (!fixed_int(c, n->b, &v)) {
            ok = compile(c, n->b) && emit(c->p, ops[n->op], 0);
        } else if ((n->op == OP_FLOORDIV || n->op == OP_MOD) && v > 0 && (v & (v - 1)) == 0) { /* no division */
            ok = n->op == OP_FLOORDIV ? emit(c->p, I_SHR | I_IMM, __builtin_ctzll((uint64_t)v)) : emit(c->p, I_AND | I_IMM, v - 1);
        } else {
            ok = emit(c->p, ops[n->op] | I_IMM, v);
        }
        break;
    }
    case N_CALL:
        if ((n->op == B_MIN || n->op == B_MAX) && n->n >= 2) {
            ok = compile(c, c->e->kids[n->a]);
            for (int i = 1; ok && i < n->n; i++)
                ok = compile(c, c->e->kids[n->a + i]) && emit(c->p, n->op == B_MIN ? I_MIN : I_MAX, 0);
        } else if ((n->op == B_ABS || n->op == B_INT) && n->n == 1) {
            ok = compile(c, c->e->kids[n->a]) && (n->op == B_INT || emit(c->p, I_ABS | I_IMM, 0));
        }
        break;
    default: break;
    }
    return ok;
}

bool kt__expr_compile_int(const kt__expr *e, const kt__value *slots, const int *var, kt__iprog *out) {
    *out = (kt__iprog){0};
    comp c = {e, slots, var, out};
    if (compile(&c, e->root)) {
        bool acc = out->n > 0;
        for (int k = 1; acc && k < out->n; k++) acc = (out->op[k] & I_IMM) != 0;
        out->accumulator = acc;
        return true;
    }
    *out = (kt__iprog){0};
    return false;
}
