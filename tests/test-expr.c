/*
 * test-expr.c - the expression language against Python: every line of tests/data/expr_cases.tsv
 * (written by scripts/gen-expr-cases.py from Python's own eval: a hand-written table and every
 * Values, Expression, Size and geometry string of ../shared/benchmark_hub) must give the value
 * Python gave, formatted as Python's repr, or an error where Python raised. Also: syntax and
 * name errors name the expression and the column; and every allocation that parsing,
 * evaluating, declaring or enumerating a space makes can fail, with KT_ERR_NO_MEMORY saying so
 * (this program's malloc fails the one it is told to).
 */
#define _GNU_SOURCE /* dladdr (tests/oom.h) */
#include "helpers.h"

#include <kerntune/variants.h>

#include "space/expr.h"

#include <stdbool.h>

#include "oom.h"

#ifndef KT_EXPR_CASES
#error "KT_EXPR_CASES must name tests/data/expr_cases.tsv"
#endif

#define MAX_NAMES 32

typedef struct env {
    char names[MAX_NAMES][64];
    kt__value values[MAX_NAMES];
    kt__expr *owners[MAX_NAMES];
    int n;
} env;

static int resolve(const char *name, size_t len, void *user) {
    env *e = user;
    for (int i = 0; i < e->n; i++)
        if (strlen(e->names[i]) == len && strncmp(e->names[i], name, len) == 0) return i;
    return -1;
}

/* Parses "a=1;b=[1, 2]" with the language itself (each value is a constant literal). */
static void parse_bindings(env *e, char *text, kt__arena *arena) {
    e->n = 0;
    for (char *tok = strtok(text, ";"); tok; tok = strtok(NULL, ";")) {
        char *eq = strchr(tok, '=');
        assert_non_null(eq);
        *eq = '\0';
        snprintf(e->names[e->n], sizeof e->names[e->n], "%s", tok);
        kt__expr *x = NULL;
        ok(kt__expr_parse(eq + 1, NULL, NULL, "binding", &x));
        assert_true(kt__expr_is_const(x));
        ok(kt__expr_eval(x, NULL, arena, "binding", &e->values[e->n]));
        e->owners[e->n++] = x;
    }
}

static void test_against_python(void **state) {
    (void)state;
    FILE *f = fopen(KT_EXPR_CASES, "r");
    assert_non_null(f);
    char line[4096];
    int cases = 0, errors = 0, failures = 0;
    kt__arena arena = {0}, bind_arena = {0};
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *expr = line, *tab1 = strchr(line, '\t');
        assert_non_null(tab1);
        *tab1 = '\0';
        char *bindings = tab1 + 1, *tab2 = strchr(bindings, '\t');
        assert_non_null(tab2);
        *tab2 = '\0';
        const char *expected = tab2 + 1;
        env e;
        kt__arena_reset(&bind_arena);
        parse_bindings(&e, bindings, &bind_arena);
        kt__expr *x = NULL;
        kt__value v;
        kt_status st = kt__expr_parse(expr, resolve, &e, "test", &x);
        if (st == KT_OK) {
            kt__arena_reset(&arena);
            st = kt__expr_eval(x, e.values, &arena, "test", &v);
        }
        char got[1024];
        if (st == KT_OK) kt__value_format(&v, got, sizeof got);
        else snprintf(got, sizeof got, "!error");
        if (strcmp(got, expected) != 0) {
            fprintf(stderr, "MISMATCH: %s  [%s]  python %s, kerntune %s%s%s\n", expr, bindings, expected, got,
                    st != KT_OK ? ": " : "", st != KT_OK ? kt_last_error() : "");
            failures++;
        }
        if (st != KT_OK) {
            errors++;
            /* every error message names the expression */
            assert_non_null(strstr(kt_last_error(), "expression '"));
        }
        cases++;
        kt__expr_free(x);
        for (int i = 0; i < e.n; i++) kt__expr_free(e.owners[i]);
    }
    fclose(f);
    kt__arena_free(&arena);
    kt__arena_free(&bind_arena);
    fprintf(stderr, "%d cases, %d expected errors, %d mismatches\n", cases, errors, failures);
    assert_true(cases > 300);
    assert_int_equal(failures, 0);
}

/* The interpreter's answer for a size: the value when it gives an integer >= 0 (a bool as 0 or
 * 1), false otherwise (an error, a negative, a float). */
static bool interpreted_size(const kt__expr *x, const kt__value *slots, kt__arena *arena, int64_t *out) {
    kt__value v;
    kt__arena_reset(arena);
    if (kt__expr_eval(x, slots, arena, "test", &v) != KT_OK) return false;
    return (v.t == KT_V_INT || v.t == KT_V_BOOL) && kt__value_to_int(&v, out) && *out >= 0;
}

/* A compiled program agrees with the interpreter on slots (its inputs in[]): the same size, or
 * both unable to give one. Returns whether the program gave one. */
static bool agrees(const char *text, const kt__expr *x, const kt__iprog *p, const kt__value *slots, const int64_t *in,
                   kt__arena *arena) {
    int64_t want = -1, got = -1;
    bool interp = interpreted_size(x, slots, arena, &want), compiled = kt__iprog_run(p, in, &got);
    if (interp != compiled || (interp && want != got))
        fail_msg("%s: the interpreter %s %lld, the compiled program %s %lld", text, interp ? "gives" : "refuses", (long long)want,
                 compiled ? "gives" : "refuses", (long long)got);
    return compiled;
}

/* Every case of the Python table again, its integer bindings as per-call inputs and the others
 * fixed: where the expression compiles, the program gives what the interpreter gives. */
static void test_iprog_on_python_cases(void **state) {
    (void)state;
    FILE *f = fopen(KT_EXPR_CASES, "r");
    assert_non_null(f);
    char line[4096];
    int compiled = 0, with_inputs = 0;
    kt__arena arena = {0}, bind_arena = {0};
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *tab1 = strchr(line, '\t'), *tab2 = tab1 ? strchr(tab1 + 1, '\t') : NULL;
        assert_non_null(tab2);
        *tab1 = *tab2 = '\0';
        env e;
        kt__arena_reset(&bind_arena);
        parse_bindings(&e, tab1 + 1, &bind_arena);
        int var[MAX_NAMES];
        int64_t in[MAX_NAMES];
        int ninputs = 0;
        for (int i = 0; i < e.n; i++) {
            var[i] = e.values[i].t == KT_V_INT ? ninputs : -1;
            if (var[i] >= 0) in[ninputs++] = e.values[i].i;
        }
        kt__expr *x = NULL;
        kt__iprog p;
        if (kt__expr_parse(line, resolve, &e, "test", &x) == KT_OK && kt__expr_compile_int(x, e.values, var, &p)) {
            compiled++;
            with_inputs += ninputs > 0;
            agrees(line, x, &p, e.values, in, &arena);
        }
        kt__expr_free(x);
        for (int i = 0; i < e.n; i++) kt__expr_free(e.owners[i]);
    }
    fclose(f);
    kt__arena_free(&arena);
    kt__arena_free(&bind_arena);
    fprintf(stderr, "%d cases compiled, %d of them reading inputs\n", compiled, with_inputs);
    assert_true(compiled > 50);
    assert_true(with_inputs > 5);
}

/* Launch-size shapes: which compile, and over inputs from INT64_MIN to INT64_MAX (floor division
 * and modulo of negatives, overflow, division by zero, negative sizes) every compiled one gives
 * the interpreter's size or, where the interpreter fails or gives a negative, none. */
static void test_iprog_shapes(void **state) {
    (void)state;
    /* slots: n and m are per-call integer inputs, B, Z, T fixed integers (T a bool), F a fixed
     * float, x a per-call float */
    env e = {.names = {"n", "m", "B", "Z", "T", "F", "x"}, .n = 7};
    e.values[2] = (kt__value){.t = KT_V_INT, .i = 256};
    e.values[3] = (kt__value){.t = KT_V_INT, .i = 0};
    e.values[4] = (kt__value){.t = KT_V_BOOL, .b = true};
    e.values[5] = (kt__value){.t = KT_V_FLOAT, .f = 2.5};
    e.values[6] = (kt__value){.t = KT_V_FLOAT, .f = 1.5};
    const int var[] = {0, 1, -1, -1, -1, -1, -2};
    static const char *const compiles[] = {
        "n", "(n + B - 1) // B", "n // B", "n // 3", "n % B", "n % 3", "n % -3", "n // -4", "(n + 127) // 128 * m",
        "max(1, n // B)", "min(n, m, B)", "abs(n - m)", "-n + m", "+n", "int(n) // (B // 2)", "n * m // 4", "n - B * 2",
        "(n + T) // 2", "n // Z", "n % Z", "n // (B - B)", "n * 4 + (B * 3 - 1) % 7", "m // n", "m % n", "-(n * m)",
        /* sub-expressions that read no input, whatever they are made of, fold to constants */
        "n // int(F * 2)", "-(-n // (int(F) * B))", "n + (3 if B > 100 else 4)", "n * len([1, 2, 3])", "max(n, B ** 2)"};
    static const char *const interpreted[] = {"n / B", "x * 2", "n if n > 0 else 1", "F * n", "len([n])", "n ** 2",
                                              "n << 2", "int(n / B)", "n * F", "[n][0]", "n > 0", "~n", "x",
                                              "n // F", "n // (F * 2)"};
    static const int64_t values[] = {0, 1, 2, 3, 5, 127, 128, 255, 256, 257, 1000, 1048576, 1048573, -1, -2, -3, -255,
                                     -256, -257, INT64_MAX, INT64_MAX - 1, INT64_MAX - 255, INT64_MIN, INT64_MIN + 1,
                                     (int64_t)1 << 32, -((int64_t)1 << 32), 3037000499, 3037000500};
    const size_t nv = sizeof values / sizeof values[0];
    kt__arena arena = {0};
    for (size_t k = 0; k < sizeof compiles / sizeof compiles[0]; k++) {
        kt__expr *x = NULL;
        kt__iprog p;
        ok(kt__expr_parse(compiles[k], resolve, &e, "test", &x));
        if (!kt__expr_compile_int(x, e.values, var, &p)) fail_msg("'%s' should compile", compiles[k]);
        /* one input and constant operands: the stackless form; two inputs need the stack */
        if (strcmp(compiles[k], "(n + B - 1) // B") == 0 || strcmp(compiles[k], "n % -3") == 0) assert_true(p.accumulator);
        if (strcmp(compiles[k], "min(n, m, B)") == 0 || strcmp(compiles[k], "-n + m") == 0) assert_false(p.accumulator);
        size_t sized = 0;
        for (size_t i = 0; i < nv; i++)
            for (size_t j = 0; j < nv; j++) {
                e.values[0] = (kt__value){.t = KT_V_INT, .i = values[i]};
                e.values[1] = (kt__value){.t = KT_V_INT, .i = values[j]};
                int64_t in[2] = {values[i], values[j]};
                sized += agrees(compiles[k], x, &p, e.values, in, &arena);
            }
        /* every shape but the divisions by zero gives some sizes */
        if ((sized == 0) != (strstr(compiles[k], "Z") != NULL || strstr(compiles[k], "B - B") != NULL))
            fail_msg("'%s': %zu sizes", compiles[k], sized);
        kt__expr_free(x);
    }
    for (size_t k = 0; k < sizeof interpreted / sizeof interpreted[0]; k++) {
        kt__expr *x = NULL;
        kt__iprog p;
        ok(kt__expr_parse(interpreted[k], resolve, &e, "test", &x));
        if (kt__expr_compile_int(x, e.values, var, &p)) fail_msg("'%s' should be left to the interpreter", interpreted[k]);
        kt__expr_free(x);
    }
    kt__arena_free(&arena);
}

/* Syntax and name errors: the message names the expression and the 1-based column. */
static void test_error_columns(void **state) {
    (void)state;
    static const struct {
        const char *text;
        const char *message;
    } cases[] = {
        {"a +* b", "expression 'a +* b': column 4: expected a value, found '*'"},
        {"block_size_x * bogus", "column 16: name 'bogus' is not defined"},
        {"(1 + 2", "column 7: expected ')', found the end"},
        {"1 + 2)", "column 6: expected the end of the expression, found ')'"},
        {"", "column 1: expected an expression, found the end"},
        {"x if y", "column 7: expected 'else', found the end"},
        {"foo(1)", "column 1: unknown function 'foo'"},
        {"1 not 2", "column 7: expected 'in' after 'not'"},
        {"'abc", "column 1: unterminated string"},
        {"3 $ 4", "column 3: unexpected character '$'"},
        {"12abc", "column 1: invalid number"},
        {"[1, 2", "column 6: expected ',' or ']', found the end"},
    };
    env e = {.n = 5};
    static const char *const names[] = {"block_size_x", "a", "b", "x", "y"};
    for (int i = 0; i < 5; i++) snprintf(e.names[i], sizeof e.names[i], "%s", names[i]);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kt__expr *x = (kt__expr *)&e;
        expect_status(KT_ERR_INVALID_ARGUMENT, kt__expr_parse(cases[i].text, resolve, &e, "where", &x));
        assert_null(x);
        if (strstr(kt_last_error(), cases[i].message) == NULL)
            fail_msg("'%s': got '%s', want '%s'", cases[i].text, kt_last_error(), cases[i].message);
        assert_memory_equal(kt_last_error(), "where: ", 7);
    }
    /* A runtime error names the column of the operation. */
    kt__expr *x = NULL;
    kt__value v, slot = {.t = KT_V_INT, .i = 0};
    kt__arena arena = {0};
    ok(kt__expr_parse("10 + 7 // block_size_x", resolve, &e, "where", &x));
    assert_false(kt__expr_is_const(x));
    expect_status(KT_ERR_INVALID_ARGUMENT, kt__expr_eval(x, &slot, &arena, "where", &v));
    assert_non_null(strstr(kt_last_error(), "column 8: integer division or modulo by zero"));
    kt__expr_free(x);
    /* Constants fold at parse time; a folding error is left for evaluation. */
    ok(kt__expr_parse("[16, 32, 64][1] * 2 ** 3", NULL, NULL, "where", &x));
    assert_true(kt__expr_is_const(x));
    ok(kt__expr_eval(x, NULL, &arena, "where", &v));
    assert_int_equal(v.i, 256);
    kt__expr_free(x);
    ok(kt__expr_parse("1 // 0", NULL, NULL, "where", &x));
    expect_status(KT_ERR_INVALID_ARGUMENT, kt__expr_eval(x, NULL, &arena, "where", &v));
    kt__expr_free(x);
    /* Deep nesting is refused, not a stack overflow. */
    char deep[2100];
    memset(deep, '(', 1000);
    deep[1000] = '1';
    memset(deep + 1001, ')', 1000);
    deep[2001] = '\0';
    expect_status(KT_ERR_INVALID_ARGUMENT, kt__expr_parse(deep, NULL, NULL, "where", &x));
    assert_non_null(strstr(kt_last_error(), "nested too deeply"));
    kt__arena_free(&arena);
}

#ifdef OOM_INJECT
/* Expressions that fold constants (numbers, strings, lists) and, evaluated, allocate (lists,
 * range, joined and repeated strings and lists, list of a string), with x = 3 and s = 'q'. */
static const struct {
    const char *text, *want;
} oom_cases[] = {
    {"[16, 32, 64][1] * 2 ** 3", "256"},
    {"'ab' + 'cd' * 2", "'abcdcd'"},
    {"list(range(x)) + [x] * 2", "[0, 1, 2, 3, 3]"},
    {"s * x + s", "'qqqq'"},
    {"list(s + 'yz')", "['q', 'y', 'z']"},
    {"max(x, 7) if x in [1, 2, 3] else [0]", "7"},
    {"1 < x <= 3 and x != 2 and 'q' in s", "True"},
    {"sum([x, 2.5, True])", "6.5"},
};

static kt_status oom_expr_body(void *arg) {
    (void)arg;
    env e = {.n = 2};
    snprintf(e.names[0], sizeof e.names[0], "x");
    snprintf(e.names[1], sizeof e.names[1], "s");
    e.values[0] = (kt__value){.t = KT_V_INT, .i = 3};
    e.values[1] = (kt__value){.t = KT_V_STR, .str = {"q", 1}};
    kt__arena arena = {0};
    kt_status st = KT_OK;
    for (size_t i = 0; st == KT_OK && i < sizeof oom_cases / sizeof oom_cases[0]; i++) {
        kt__expr *x = NULL;
        kt__value v;
        st = kt__expr_parse(oom_cases[i].text, resolve, &e, "oom", &x);
        if (st == KT_OK) st = kt__expr_eval(x, e.values, &arena, "oom", &v);
        char got[128];
        if (st == KT_OK) kt__value_format(&v, got, sizeof got);
        if (st == KT_OK && strcmp(got, oom_cases[i].want) != 0)
            oom_fail_msg("'%s' gave %s, not %s", oom_cases[i].text, got, oom_cases[i].want);
        kt__expr_free(x);
    }
    kt__arena_free(&arena);
    return st;
}

/* A space declared whole (parameters from text and from integers, an input, a derived value,
 * a constraint, geometry), enumerated, read and evaluated over. */
static kt_status oom_space_body(void *arg) {
    (void)arg;
    kt_space *sp = NULL;
    static const int64_t b[] = {1, 2, 3};
    static const char *const global[3] = {"N // A", NULL, NULL}, *const local[3] = {"B", NULL, NULL};
    size_t count = 0;
    char text[64] = "";
    int64_t whole = 0;
    kt_status st = kt_space_create(&sp);
    if (st == KT_OK) st = kt_space_add_param(sp, "A", "[1, 2, 4, 8]");
    if (st == KT_OK) st = kt_space_add_param_ints(sp, "B", b, 3);
    if (st == KT_OK) st = kt_space_add_input(sp, "N");
    if (st == KT_OK) st = kt_space_bind_int(sp, "N", 64);
    if (st == KT_OK) st = kt_space_add_derived(sp, "D", "A * B");
    if (st == KT_OK) st = kt_space_add_constraint(sp, "D <= N // 8");
    if (st == KT_OK) st = kt_space_set_geometry(sp, KT_GEOMETRY_GRID, global, local, "D * 4");
    if (st == KT_OK) st = kt_space_enumerate(sp, &count);
    if (st == KT_OK) st = kt_space_config_format(sp, 0, text, sizeof text);
    if (st == KT_OK) st = kt_space_eval_int(sp, "max(A) * N + len(list(range(B[2])))", &whole);
    if (st == KT_OK && (count != 9 || strcmp(text, "A=1,B=1,D=1") != 0 || whole != 515))
        oom_fail_msg("the space gave %zu configurations, first '%s', whole-space value %lld; expected 9, 'A=1,B=1,D=1', 515", count,
                     text, (long long)whole);
    kt_space_destroy(sp);
    return st;
}

#endif /* OOM_INJECT */

/* Every allocation of parsing, evaluating, declaring and enumerating can fail: the call says
 * so with KT_ERR_NO_MEMORY (a failed constant fold once reported a stale message as
 * KT_ERR_INVALID_ARGUMENT, and evaluation turned running out of memory into one). */
static void test_allocation_failures(void **state) {
    (void)state;
#ifndef OOM_INJECT
    skip(); /* allocations are made to fail through the GNU C library's */
#else
    long runs = every_allocation_fails(oom_expr_body, NULL, "parsing and evaluating expressions");
    fprintf(stderr, "expressions: %ld allocations, each failed once\n", runs - 1);
    assert_true(runs > 20);
    runs = every_allocation_fails(oom_space_body, NULL, "declaring and enumerating a space");
    fprintf(stderr, "space: %ld allocations, each failed once\n", runs - 1);
    assert_true(runs > 20);
#endif
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_python),
        cmocka_unit_test(test_iprog_on_python_cases),
        cmocka_unit_test(test_iprog_shapes),
        cmocka_unit_test(test_error_columns),
        cmocka_unit_test(test_allocation_failures),
    };
    return kt_run_cases(argc, argv, tests, NULL, NULL);
}
