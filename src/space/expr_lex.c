/*
 * expr_lex.c - the tokens of the expression language (numbers with Python's prefixes and
 * underscores, names, quoted strings, operators), and the message of an error at a column.
 */
#include "space/expr_int.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

kt_status kt__expr_err(const char *where, const char *text, int col, const char *fmt, ...) {
    /* what went wrong first, then the whole message around it (a message may quote the one
     * before it), the expression quoted whole */
    va_list ap;
    va_start(ap, fmt);
    kt__verr(KT_ERR_INVALID_ARGUMENT, fmt, ap);
    va_end(ap);
    return kt__err(KT_ERR_INVALID_ARGUMENT, "%s: expression '%s': column %d: %s", where, text, col, kt_last_error());
}

kt_status kt__expr_oom(const char *where, const char *text, int col, const char *what) {
    return kt__err(KT_ERR_NO_MEMORY, "%s: expression '%s': column %d: out of memory allocating %s", where, text, col, what);
}

/* ---- tokens ----------------------------------------------------------------------------------- */

static const char *const two_char_ops[] = {"**", "//", "<=", ">=", "==", "!=", "<<", ">>"};

/* A literal with a base prefix at p (0x, 0o, 0b): its value into lx->ival and its end into *end;
 * false with lx->err set when it is not a number Python reads. */
static bool lex_based(lexer *lx, const char *p, char **end) {
    int base = (p[1] == 'x' || p[1] == 'X') ? 16 : (p[1] == 'o' || p[1] == 'O') ? 8 : 2;
    /* the digits without their underscores: as in Python, one before each digit at most */
    char digits[72];
    size_t k = 0, i = 2;
    for (; k + 1 < sizeof digits; i++) {
        if (p[i] == '_' && isxdigit((unsigned char)p[i + 1])) i++;
        if (!isxdigit((unsigned char)p[i])) break;
        if (k == 1 && digits[0] == '0') k = 0; /* leading zeros, however many, are one */
        digits[k++] = p[i];
    }
    digits[k] = '\0';
    errno = 0;
    char *stop;
    unsigned long long v = strtoull(digits, &stop, base);
    if (k == 0 || *stop != '\0' || isxdigit((unsigned char)p[i]) || errno || v > INT64_MAX) {
        lx->err = kt__expr_err(lx->where, lx->text, lx->col, "invalid number");
        lx->t = T_END;
        return false;
    }
    lx->ival = (int64_t)v;
    *end = (char *)p + i;
    return true;
}

void kt__lex_next(lexer *lx) {
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
            if (!lex_based(lx, p, &end)) return;
        } else {
            size_t n = strspn(p, "0123456789_");
            is_float = p[n] == '.' || p[n] == 'e' || p[n] == 'E';
            char digits[64];
            size_t k = 0, i = 0;
            /* copy without underscores */
            for (; p[i] && k + 1 < sizeof digits; i++) {
                char d = p[i];
                if (d == '_' && i > 0 && isdigit((unsigned char)p[i - 1]) && isdigit((unsigned char)p[i + 1])) continue;
                if (d == '_') { /* as in Python: one underscore, between digits (not 1__0, 1_, 1_.5) */
                    lx->err = kt__expr_err(lx->where, lx->text, lx->col, "invalid number");
                    lx->t = T_END;
                    return;
                }
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
            } else if (k > 1 && digits[0] == '0' && strspn(digits, "0") != k) { /* Python refuses 05 (not octal) */
                lx->err = kt__expr_err(lx->where, lx->text, lx->col, "leading zeros in a decimal integer literal are not permitted");
                lx->t = T_END;
                return;
            } else {
                unsigned long long v = strtoull(digits, &end, 10);
                if (errno || v > INT64_MAX) {
                    lx->err = kt__expr_err(lx->where, lx->text, lx->col, "integer literal too large");
                    lx->t = T_END;
                    return;
                }
                lx->ival = (int64_t)v;
            }
            if (*end != '\0') {
                lx->err = kt__expr_err(lx->where, lx->text, lx->col, "invalid number");
                lx->t = T_END;
                return;
            }
            end = (char *)p + i;
        }
        if (isalpha((unsigned char)*end) || *end == '_') {
            lx->err = kt__expr_err(lx->where, lx->text, lx->col, "invalid number");
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
            lx->err = kt__expr_err(lx->where, lx->text, lx->col, "unterminated string");
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
    lx->err = kt__expr_err(lx->where, lx->text, lx->col, "unexpected character '%c'", c);
    lx->t = T_END;
}

bool kt__lex_is_op(const lexer *lx, const char *op) {
    return lx->t == T_OP && lx->len == strlen(op) && strncmp(lx->start, op, lx->len) == 0;
}

bool kt__lex_is_kw(const lexer *lx, const char *kw) {
    return lx->t == T_NAME && lx->len == strlen(kw) && strncmp(lx->start, kw, lx->len) == 0;
}
