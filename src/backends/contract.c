/*
 * contract.c - the part of Kernel Tuner's compile contract (KT_BUILD_KERNEL_TUNER) that more than
 * one backend applies to a kernel's text: a loop_unroll_factor parameter of 0 removes the
 * `#pragma unroll NAME` lines that name it (Kernel Tuner's expression "\n\s*#pragma\s+unroll\s+NAME",
 * each match replaced by one newline), so that the compiler chooses. Kernel Tuner does this for
 * CUDA and HIP; kerntune's OpenCL backend does it too, where the define would otherwise give
 * `#pragma unroll 0`, which OpenCL compilers refuse (PoCL: "invalid value '0'; must be positive").
 */
#include "backends/contract.h"

#include <stdbool.h>
#include <string.h>

/* Python's \s on the ASCII characters (str.isspace): what Kernel Tuner's expression skips. */
static bool py_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f'); }

/* Matches Kernel Tuner's "\n\s*#pragma\s+unroll\s+NAME" at s (which is a newline); returns the
 * length matched, 0 when it does not match. No backtracking is needed: '#', 'u' and NAME's first
 * character are not white space, so each run of white space is taken whole. */
static size_t pragma_match(const char *s, const char *name) {
    const char *p = s + 1;
    while (py_space(*p)) p++;
    if (strncmp(p, "#pragma", 7) != 0) return 0;
    p += 7;
    if (!py_space(*p)) return 0;
    while (py_space(*p)) p++;
    if (strncmp(p, "unroll", 6) != 0) return 0;
    p += 6;
    if (!py_space(*p)) return 0;
    while (py_space(*p)) p++;
    size_t n = strlen(name);
    if (strncmp(p, name, n) != 0) return 0; /* a prefix, as in Kernel Tuner: no word boundary */
    return (size_t)(p + n - s);
}

void kt__contract_drop_unroll(char *text, const char *name) {
    size_t w = 0;
    for (size_t r = 0; text[r];) {
        size_t m = text[r] == '\n' ? pragma_match(text + r, name) : 0;
        if (m) text[w++] = '\n', r += m;
        else text[w++] = text[r++];
    }
    text[w] = '\0';
}

bool kt__contract_unroll_zero(const char *define, char *name, size_t len) {
    const char *eq = strchr(define, '='), *at = strstr(define, "loop_unroll_factor");
    if (at == NULL || eq == NULL || at > eq || strcmp(eq + 1, "0") != 0) return false;
    size_t n = (size_t)(eq - define);
    if (n >= len) n = len - 1;
    memcpy(name, define, n);
    name[n] = '\0';
    return true;
}
