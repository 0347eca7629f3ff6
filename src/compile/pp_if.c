/*
 * pp_if.c - the fingerprint's #if evaluator (kt__pp_evaluate): macros expanded as the
 * preprocessor would, then the condition evaluated in the preprocessor's arithmetic (intmax_t
 * and uintmax_t, C's promotions), unknown wherever it reads a name nobody can know here or an
 * expansion this model does not follow (a token paste, stringizing, an ambiguous macro).
 */
#include "compile/pp_int.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct val {
    uint64_t v;
    bool uns, unk;
} val;

static const val UNK = {0, false, true};

/* Expands in[0..n) into out; false when the expansion goes beyond this model (the condition is
 * then unknown). A macro is not expanded inside its own expansion. */
static bool expand(pp *p, const tok *in, size_t n, toks *out, int depth) {
    if (depth > MAX_EXPAND_DEPTH) return false;
    for (size_t i = 0; i < n; i++) {
        if (++p->if_work > MAX_IF_WORK) return p->fail = true, false;
        macro *m = in[i].k == TK_ID ? kt__pp_find(p, in[i].p, in[i].n) : NULL;
        if (m == NULL || m->text == NULL || m->active || (m->func && (i + 1 == n || !is(&in[i + 1], "(")))) {
            if (!kt__pp_push(p, out, in[i])) return false;
            continue;
        }
        if (m->paste || m->ambiguous) return false;
        if (!m->func) {
            m->active = true;
            bool ok = expand(p, m->body, m->nbody, out, depth + 1);
            m->active = false;
            if (!ok) return false;
            continue;
        }
        size_t start[65], len[65], na = 0, j = i + 2, nest = 0, from = j;
        for (; j < n; j++) {
            if (is(&in[j], "(")) nest++;
            else if (is(&in[j], ")") && nest-- == 0) break;
            else if (is(&in[j], ",") && nest == 0 && !(m->variadic && na == m->nparams)) {
                if (na == 64) return false;
                start[na] = from, len[na++] = j - from, from = j + 1;
            }
        }
        if (j == n) return false;
        start[na] = from, len[na++] = j - from;
        if (na == 1 && len[0] == 0 && m->nparams == 0) na = 0;
        if (!(na == m->nparams || (m->variadic && na == m->nparams + 1))) return false; /* the compiler's error */
        toks sub = {0};
        bool ok = true;
        for (size_t b = 0; ok && b < m->nbody; b++) {
            const tok *bt = &m->body[b];
            size_t k = SIZE_MAX;
            for (size_t q = 0; bt->k == TK_ID && q < m->nparams; q++)
                if (strlen(m->params[q]) == bt->n && memcmp(m->params[q], bt->p, bt->n) == 0) k = q;
            if (k == SIZE_MAX && m->variadic && is(bt, "__VA_ARGS__")) k = m->nparams;
            if (is(bt, "#")) ok = false; /* stringizing: not an integer anyway */
            else if (k == SIZE_MAX) ok = kt__pp_push(p, &sub, *bt);
            else if (k < na) ok = expand(p, in + start[k], len[k], &sub, depth + 1);
        }
        if (ok) {
            m->active = true;
            ok = expand(p, sub.v, sub.n, out, depth + 1);
            m->active = false;
        }
        free(sub.v);
        if (!ok) return false;
        i = j;
    }
    return true;
}

typedef struct ev {
    pp *p;
    const tok *t;
    size_t n, i;
    int depth; /* unary operators and parentheses open now: at most 200 (else deeper than the stack) */
    bool bad;
} ev;

static bool peek(ev *e, const char *s) { return e->i < e->n && is(&e->t[e->i], s); }
static bool take(ev *e, const char *s) { return peek(e, s) ? (e->i++, true) : false; }

static val number(ev *e, const tok *t) {
    char buf[80];
    if (t->n >= sizeof buf) return e->bad = true, UNK;
    memcpy(buf, t->p, t->n);
    buf[t->n] = '\0';
    size_t n = t->n;
    bool uns = false;
    while (n > 0 && buf[n - 1] != '\0' && strchr("uUlL", buf[n - 1])) { /* the suffix: "lu" as well as "ul" */
        n--;
        if ((buf[n] | 32) == 'u') uns = true;
    }
    buf[n] = '\0';
    uint64_t v = 0;
    const char *s = buf;
    int base = 10;
    if (s[0] == '0' && (s[1] | 32) == 'x') base = 16, s += 2;
    else if (s[0] == '0' && (s[1] | 32) == 'b') base = 2, s += 2;
    else if (s[0] == '0') base = 8;
    if (*s == '\0' && base != 8) return e->bad = true, UNK;
    for (; *s; s++) {
        int d = isdig((unsigned char)*s) ? *s - '0' : (*s | 32) >= 'a' && (*s | 32) <= 'f' ? (*s | 32) - 'a' + 10 : 99;
        if (d >= base || v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base) return e->bad = true, UNK;
        v = v * (uint64_t)base + (uint64_t)d;
    }
    return (val){v, uns || v > (uint64_t)INT64_MAX, false};
}

static val cond(ev *e);

static val primary(ev *e) {
    if (e->i >= e->n) return e->bad = true, UNK;
    const tok *t = &e->t[e->i++];
    if (t->k == TK_NUM) return number(e, t);
    if (t->k == TK_UNKNOWN) return UNK;
    if (t->k == TK_ID) /* what expansion left: 0 if surely not a macro, else unknown */
        return kt__pp_defined_state(e->p, t) == 0 ? (val){0, false, false} : UNK;
    if (is(t, "(")) {
        val v = cond(e);
        if (!take(e, ")")) e->bad = true;
        return v;
    }
    e->bad = true; /* strings, character constants, stray punctuation */
    return UNK;
}

static val unary_op(ev *e);

/* Every recursion of a condition ("!!!!x", "((((x))))") passes here: bounded, so that a
 * hostile #if cannot overflow the stack (fuzz-pp found one that did). */
static val unary(ev *e) {
    if (e->depth >= 200) return e->bad = true, UNK;
    e->depth++;
    val v = unary_op(e);
    e->depth--;
    return v;
}

static val unary_op(ev *e) {
    if (take(e, "+")) return unary(e);
    if (take(e, "-")) {
        val v = unary(e);
        if (!v.unk && !v.uns && v.v == (uint64_t)INT64_MIN) return UNK;
        return v.unk ? v : (val){0 - v.v, v.uns, false};
    }
    if (take(e, "!")) {
        val v = unary(e);
        return v.unk ? v : (val){v.v == 0, false, false};
    }
    if (take(e, "~")) {
        val v = unary(e);
        return v.unk ? v : (val){~v.v, v.uns, false};
    }
    return primary(e);
}

static val binary(const char *op, val a, val b) {
    if (a.unk || b.unk) return UNK;
    bool u = a.uns || b.uns;
    int64_t x = (int64_t)a.v, y = (int64_t)b.v;
    switch (op[0]) {
    case '*': return (val){a.v * b.v, u, false};
    case '/':
    case '%':
        if (b.v == 0 || (!u && x == INT64_MIN && y == -1)) return UNK;
        if (u) return (val){op[0] == '/' ? a.v / b.v : a.v % b.v, true, false};
        return (val){(uint64_t)(op[0] == '/' ? x / y : x % y), false, false};
    case '+': return (val){a.v + b.v, u, false};
    case '-': return (val){a.v - b.v, u, false};
    case '<':
    case '>':
        if (op[1] == op[0]) { /* shifts: the left operand's type */
            if ((!b.uns && y < 0) || b.v >= 64 || (!a.uns && x < 0)) return UNK;
            return (val){op[0] == '<' ? a.v << b.v : a.v >> b.v, a.uns, false};
        }
        {
            bool lt = u ? a.v < b.v : x < y, gt = u ? a.v > b.v : x > y, eq = a.v == b.v;
            bool r = op[0] == '<' ? (op[1] == '=' ? lt || eq : lt) : (op[1] == '=' ? gt || eq : gt);
            return (val){r, false, false};
        }
    case '=': return (val){a.v == b.v, false, false};
    case '!': return (val){a.v != b.v, false, false};
    case '&': return (val){a.v & b.v, u, false};
    case '^': return (val){a.v ^ b.v, u, false};
    case '|': return (val){a.v | b.v, u, false};
    }
    return UNK;
}

/* Binary operators by precedence, loosest first (after && and ||). */
static const char *const levels[][5] = {{"|"}, {"^"}, {"&"}, {"==", "!="}, {"<", ">", "<=", ">="}, {"<<", ">>"}, {"+", "-"},
                                        {"*", "/", "%"}};

static val prec(ev *e, size_t lv) {
    if (lv == sizeof levels / sizeof levels[0]) return unary(e);
    val a = prec(e, lv + 1);
    for (;;) {
        const char *op = NULL;
        for (size_t k = 0; k < 5 && levels[lv][k] && !op; k++)
            if (peek(e, levels[lv][k]) && !(lv == 2 && peek(e, "&&"))) op = levels[lv][k];
        if (op == NULL) return a;
        e->i++;
        a = binary(op, a, prec(e, lv + 1));
    }
}

static val logic(ev *e, bool is_or) {
    val a = is_or ? logic(e, false) : prec(e, 0);
    while (take(e, is_or ? "||" : "&&")) {
        val b = is_or ? logic(e, false) : prec(e, 0);
        /* 1 || anything, 0 && anything: decided whatever the other side is */
        bool decided = (!a.unk && (a.v != 0) == is_or) || (!b.unk && (b.v != 0) == is_or);
        if (decided) a = (val){is_or, false, false};
        else if (a.unk || b.unk) a = UNK;
        else a = (val){!is_or, false, false};
    }
    return a;
}

static val cond(ev *e) {
    val c = logic(e, true);
    if (!take(e, "?")) return c;
    val x = cond(e);
    if (!take(e, ":")) e->bad = true;
    val y = cond(e);
    if (c.unk) return !x.unk && !y.unk && x.v == y.v ? x : UNK;
    return c.v ? x : y;
}

/* A #if's condition: 1, 0, or -1 (unknown). */
int kt__pp_evaluate(pp *p, const tok *t, size_t n) {
    toks pre = {0}, out = {0};
    int r = -1;
    for (size_t i = 0; i < n && !p->fail; i++) {
        if (!is(&t[i], "defined")) {
            kt__pp_push(p, &pre, t[i]);
            continue;
        }
        bool paren = i + 1 < n && is(&t[i + 1], "(");
        size_t at = i + 1 + paren;
        if (at >= n || t[at].k != TK_ID || (paren && (at + 1 >= n || !is(&t[at + 1], ")")))) goto done;
        int state = kt__pp_defined_state(p, &t[at]);
        tok v = {state < 0 ? TK_UNKNOWN : TK_NUM, 1, state > 0 ? "1" : "0"};
        kt__pp_push(p, &pre, v);
        i = at + paren;
    }
    if (p->fail || !expand(p, pre.v, pre.n, &out, 0)) goto done;
    for (size_t i = 0; i < out.n; i++)
        if (is(&out.v[i], "defined")) goto done; /* "defined" made by expansion: undefined behaviour */
    ev e = {.p = p, .t = out.v, .n = out.n};
    val v = cond(&e);
    if (!e.bad && e.i == e.n && !v.unk) r = v.v != 0;
done:
    free(pre.v);
    free(out.v);
    return r;
}
