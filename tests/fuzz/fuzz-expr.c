/*
 * fuzz-expr.c - the expression language (src/space/expr_*.c): parsing, evaluation (lists,
 * comprehensions, builtins, strings), and the integer programs a call's sizes compile to.
 * Input: 16 bytes, the integers a and b; then the expression. Names: a, b (integers), xs (the
 * list [1, 2, 3]), s (the string 'ab').
 * Promises: a failure says why; a result formats within kt__value_format_len; an integer program
 * that runs gives what the interpreter gives (kt__expr_compile_int: the interpreter decides
 * whenever the program cannot).
 */
#include "fuzz.h"

#include "space/expr.h"

static const char *const names[] = {"a", "b", "xs", "s"};

static int resolve(const char *name, size_t len, void *user) {
    (void)user;
    for (int i = 0; i < 4; i++)
        if (strlen(names[i]) == len && memcmp(names[i], name, len) == 0) return i;
    return -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 16) return 0;
    int64_t ab[2];
    memcpy(ab, data, 16);
    char *text = fuzz_text(data + 16, size - 16);
    if (text == NULL) return 0;
    kt__expr *e = NULL;
    kt_status st = kt__expr_parse(text, resolve, NULL, "fuzz", &e);
    fuzz_check((st == KT_OK) == (e != NULL), "parse status %d with expression %p", (int)st, (void *)e);
    fuzz_check(st == KT_OK || kt_last_error()[0] != '\0', "a parse failed without a message");
    if (e != NULL) {
        static const kt__value items[3] = {{.t = KT_V_INT, .i = 1}, {.t = KT_V_INT, .i = 2}, {.t = KT_V_INT, .i = 3}};
        kt__value slots[4] = {{.t = KT_V_INT, .i = ab[0]}, {.t = KT_V_INT, .i = ab[1]},
                              {.t = KT_V_LIST, .list = {items, 3}}, {.t = KT_V_STR, .str = {"ab", 2}}};
        kt__arena arena = {0};
        kt__value out;
        kt_status est = kt__expr_eval(e, slots, &arena, "fuzz", &out);
        fuzz_check(est == KT_OK || kt_last_error()[0] != '\0', "an evaluation failed without a message");
        if (est == KT_OK) {
            size_t n = kt__value_format_len(&out);
            char *buf = n <= ((size_t)1 << 28) ? malloc(n) : NULL;
            if (buf) {
                kt__value_format(&out, buf, n);
                fuzz_check(strlen(buf) < n, "formatted past its length");
                free(buf);
            }
            (void)kt__value_truthy(&out);
        }
        /* a as an input of each call, b fixed: the program must agree with the interpreter */
        static const int var[4] = {0, -1, -2, -2};
        kt__iprog prog;
        int64_t got;
        if (kt__expr_compile_int(e, slots, var, &prog) && kt__iprog_run(&prog, &ab[0], &got)) {
            int64_t want = 0; /* an integer, or a bool as one (bool(0) is False; a size reads it as 0) */
            bool number = est == KT_OK && (out.t == KT_V_INT || out.t == KT_V_BOOL) && kt__value_to_int(&out, &want);
            fuzz_check(number && want == got, "program gave %lld; the interpreter %s %lld (type %d)", (long long)got,
                       est == KT_OK ? "gave" : "failed", (long long)want, est == KT_OK ? (int)out.t : -1);
        }
        kt__arena_free(&arena);
        kt__expr_free(e);
    }
    free(text);
    return 0;
}
