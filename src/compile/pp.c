/*
 * pp.c - a fingerprint of what the preprocessor makes of a variant's source.
 *
 * Two configurations of a variant group whose preprocessed code is the same need one build. The
 * compilers kerntune drives (NVRTC, an OpenCL platform, the system C compiler) offer no
 * preprocess-only step that all of them share, so this file interprets the directives itself and
 * hashes a description of the output that is identical for two sets of defines only when the
 * real output is:
 *   - every line the preprocessor keeps (code lines and the directives that reach the compiler:
 *     #pragma, #error, #line...), as tokens;
 *   - with each of those lines, the definition in force there of every identifier on it, and,
 *     transitively, of every identifier in those definitions' bodies (a macro's expansion can
 *     consult nothing else); a name nobody defined is hashed as unknown, which is the same for
 *     every configuration;
 *   - #if, #ifdef, #elif... are evaluated exactly when every name they read is known: a define, a
 *     macro of the source, a name the source #undef'd, or a name nobody defined, as long as no
 *     unreadable header came before and the compiler could not define it itself (a reserved
 *     name, one without lower-case letters like OpenCL's FLT_MAX, cl_*, unix...; -D options'
 *     names). A condition that reads a name that may be defined elsewhere (__CUDA_ARCH__, a
 *     system header's macro) keeps both branches and hashes the condition with its
 *     definitions, so that whatever it decides, the fingerprint covers it. A #define or #undef
 *     in such a branch leaves the name ambiguous: a condition that reads it is undecided, and a
 *     kept line that uses it hashes every definition it may have.
 * The analysis gives up (the caller then keys the build on the defines themselves, as before)
 * on what it cannot prove: a token paste (##) reachable from a kept line, __COUNTER__, a C++14 digit separator, a computed #include, a quoted
 * #include it cannot find in the -I directories, a raw string literal, options that undefine
 * or force-include (-U, -include, -imacros), and options that define one of the defines' names.
 * It assumes one thing it cannot check: that headers it cannot read (system headers, reached
 * through <...> and absent from the -I directories) do not read the tuning parameters' names.
 */
#include "compile/pp_int.h"

#include "compile/hash.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- small things ---------------------------------------------------------------------------- */

bool kt__pp_push(pp *p, toks *t, tok x) {
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 32;
        tok *v = realloc(t->v, cap * sizeof *v);
        if (v == NULL) return p->fail = true, false;
        t->v = v, t->cap = cap;
    }
    t->v[t->n++] = x;
    return true;
}

/* ---- text: splices joined, comments gone, then tokens ------------------------------------------ */

/* The source after translation phases 2 and 3: backslash-newlines removed, each comment one
 * space; string and character literals kept whole. NULL (p->fail) for a raw string literal. */
static char *clean(pp *p, const char *src, size_t len, size_t *out_len) {
    char *s = malloc(len + 1), *d = malloc(len + 1);
    if (s == NULL || d == NULL) {
        free(s), free(d);
        p->fail = true;
        return NULL;
    }
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\\' && i + 1 < len && src[i + 1] == '\n') {
            i++;
            continue;
        }
        if (src[i] == '\\' && i + 2 < len && src[i + 1] == '\r' && src[i + 2] == '\n') {
            i += 2;
            continue;
        }
        s[n++] = src[i];
    }
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        char c = s[i];
        if (c == '/' && i + 1 < n && s[i + 1] == '/') {
            while (i < n && s[i] != '\n') i++;
            d[k++] = ' ';
        } else if (c == '/' && i + 1 < n && s[i + 1] == '*') {
            i += 2;
            while (i + 1 < n && !(s[i] == '*' && s[i + 1] == '/')) i++;
            i = i + 2 < n ? i + 2 : n;
            d[k++] = ' ';
        } else if (c == '"' || c == '\'') {
            /* R"delim(...)delim" can hold anything; 1'000 is a number, not a character */
            if (i > 0 && ((c == '"' && s[i - 1] == 'R') || (c == '\'' && s[i - 1] >= '0' && s[i - 1] <= '9'))) {
                free(s), free(d);
                p->fail = true;
                return NULL;
            }
            d[k++] = s[i++];
            while (i < n && s[i] != c && s[i] != '\n') {
                if (s[i] == '\\' && i + 1 < n && s[i + 1] != '\n') d[k++] = s[i++];
                d[k++] = s[i++];
            }
            if (i < n && s[i] == c) d[k++] = s[i++];
        } else {
            d[k++] = s[i++];
        }
    }
    d[k] = '\0';
    free(s);
    *out_len = k;
    return d;
}

static const char *const punct3[] = {"<<=", ">>=", "...", "->*", NULL};
static const char *const punct2[] = {"##", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "->", "++", "--", "+=",
                                     "-=", "*=", "/=", "%=", "&=", "|=", "^=", "::", ".*", NULL};

/* Tokens of [s, end). */
static bool lex(pp *p, const char *s, const char *end, toks *out) {
    while (s < end) {
        unsigned char c = (unsigned char)*s;
        if (c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f') {
            s++;
            continue;
        }
        tok t = {TK_PUNCT, 1, s};
        const char *q = s + 1;
        if (idstart(c)) {
            while (q < end && idchar((unsigned char)*q)) q++;
            t.k = TK_ID;
        } else if (isdig(c) || (c == '.' && q < end && isdig((unsigned char)*q))) {
            while (q < end && (idchar((unsigned char)*q) || *q == '.' ||
                               ((*q == '+' || *q == '-') && strchr("eEpP", q[-1]) != NULL)))
                q++;
            t.k = TK_NUM;
        } else if (c == '"' || c == '\'') {
            while (q < end && *q != (char)c) q += (*q == '\\' && q + 1 < end) ? 2 : 1;
            if (q < end) q++;
            t.k = TK_STR;
        } else {
            for (const char *const *pp3 = punct3; *pp3 && q == s + 1; pp3++)
                if (end - s >= 3 && memcmp(s, *pp3, 3) == 0) q = s + 3;
            for (const char *const *pp2 = punct2; *pp2 && q == s + 1; pp2++)
                if (end - s >= 2 && memcmp(s, *pp2, 2) == 0) q = s + 2;
        }
        t.n = (uint32_t)(q - s);
        if (!kt__pp_push(p, out, t)) return false;
        s = q;
    }
    return true;
}

/* ---- macros ---------------------------------------------------------------------------------- */

static size_t bucket(const char *s, size_t n) { return (size_t)(kt__fnv1a(s, n, 0x811c9dc5u) % BUCKETS); }

macro *kt__pp_find(pp *p, const char *s, size_t n) {
    for (macro *m = p->tab[bucket(s, n)]; m; m = m->next)
        if (strncmp(m->name, s, n) == 0 && m->name[n] == '\0') return m;
    return NULL;
}

/* A name the compiler itself may define: those C reserves for it (_X, __x), those the OpenCL C
 * specification predefines (FLT_MAX, M_PI_F, CL_VERSION_2_0, cl_khr_fp64...) and GNU C's old
 * system names (unix, linux...). */
static bool could_be_predefined(const tok *t) {
    static const char *const names[] = {"unix", "linux", "i386", "sun", "sparc", "mips", "vax", "true", "false", "bool",
                                        "NULL", "MAXFLOAT", "HUGE_VAL", "HUGE_VALF", "INFINITY", "NAN", "kernel",
                                        "global", "local", "constant", "private", NULL};
    static const char *const prefixes[] = {"cl_", "CL_", "CLK_", "FP_", "FLT_", "DBL_", "HALF_", "M_", "CHAR_", "SCHAR_",
                                           "UCHAR_", "SHRT_", "USHRT_", "INT_", "UINT_", "LONG_", "ULONG_", NULL};
    if (t->p[0] == '_') return true; /* reserved for the implementation */
    for (const char *const *w = names; *w; w++)
        if (is(t, *w)) return true;
    for (const char *const *w = prefixes; *w; w++)
        if (t->n > strlen(*w) && memcmp(t->p, *w, strlen(*w)) == 0) return true;
    return false;
}

/* Whether the name is defined here: 1, 0, or -1 when nobody can tell (a header that could not be
 * read, the compiler or an option may define it). */
int kt__pp_defined_state(pp *p, const tok *t) {
    macro *m = kt__pp_find(p, t->p, t->n);
    if (m) return m->ambiguous ? -1 : m->text != NULL;
    if (p->opaque || could_be_predefined(t)) return -1;
    for (size_t i = 0; i < p->noptdefs; i++)
        if (strncmp(p->optdefs[i], t->p, t->n) == 0 && strchr("=(", p->optdefs[i][t->n]) != NULL) return -1;
    return 0;
}

/* Forgets a definition, and every alternative it had. */
static void clear_def(macro *m) {
    free(m->text), free(m->body);
    for (size_t i = 0; i < m->nparams; i++) free(m->params[i]);
    free(m->params);
    m->text = NULL, m->body = NULL, m->nbody = 0, m->params = NULL, m->nparams = 0;
    m->func = m->variadic = m->paste = m->external = m->ambiguous = false;
    for (macro *a = m->alt, *next; a; a = next) {
        next = a->alt;
        a->alt = NULL;
        clear_def(a);
        free(a);
    }
    m->alt = NULL;
}

/* Before a #define or #undef in a branch nobody can decide: what m is now becomes an alternative
 * it may still be afterwards. */
static bool keep_alternative(pp *p, macro *m, bool known) {
    macro *old = calloc(1, sizeof *old);
    if (old == NULL) return p->fail = true, false;
    *old = *m;
    old->next = NULL, old->name = NULL;
    old->external = m->text == NULL && !known; /* it was whatever the compiler or a header made it */
    m->text = NULL, m->body = NULL, m->nbody = 0, m->params = NULL, m->nparams = 0, m->alt = NULL;
    m->func = m->variadic = m->paste = m->external = m->ambiguous = false;
    m->alt = old; /* set again after the new definition, which clears alternatives */
    return true;
}

static macro *entry(pp *p, const char *s, size_t n) {
    macro *m = kt__pp_find(p, s, n);
    if (m) return m;
    m = calloc(1, sizeof *m);
    if (m == NULL || (m->name = malloc(n + 1)) == NULL) {
        free(m);
        p->fail = true;
        return NULL;
    }
    memcpy(m->name, s, n);
    m->name[n] = '\0';
    size_t b = bucket(s, n);
    m->next = p->tab[b];
    p->tab[b] = m;
    return m;
}

/* Defines name as the tokens body[0..nbody) with the given parameters (func: function-like). */
static void define(pp *p, const tok *name, bool func, const tok *params, size_t nparams, bool variadic, const tok *body,
                   size_t nbody, bool maybe) {
    int before = maybe ? kt__pp_defined_state(p, name) : 0;
    macro *m = entry(p, name->p, name->n);
    if (m == NULL) return;
    macro *alt = NULL;
    if (maybe) {
        if (!keep_alternative(p, m, before >= 0 && !m->ambiguous)) return;
        alt = m->alt, m->alt = NULL;
    }
    clear_def(m);
    m->alt = alt, m->ambiguous = maybe;
    size_t len = 4;
    for (size_t i = 0; i < nparams; i++) len += params[i].n + 1;
    for (size_t i = 0; i < nbody; i++) len += body[i].n + 1;
    char *text = malloc(len + 8);
    m->params = calloc(nparams ? nparams : 1, sizeof *m->params);
    if (text == NULL || m->params == NULL) {
        free(text);
        p->fail = true;
        return;
    }
    size_t k = 0;
    if (func) text[k++] = '(';
    for (size_t i = 0; i < nparams; i++) {
        if ((m->params[i] = malloc(params[i].n + 1)) == NULL) {
            free(text);
            p->fail = true;
            return;
        }
        memcpy(m->params[i], params[i].p, params[i].n);
        m->params[i][params[i].n] = '\0';
        m->nparams = i + 1;
        memcpy(text + k, params[i].p, params[i].n);
        k += params[i].n;
        text[k++] = ',';
    }
    if (func) text[k++] = variadic ? '.' : ')';
    text[k++] = '\x1f';
    size_t body_at = k;
    for (size_t i = 0; i < nbody; i++) {
        memcpy(text + k, body[i].p, body[i].n);
        k += body[i].n;
        text[k++] = ' ';
        m->paste = m->paste || is(&body[i], "##");
    }
    text[k] = '\0';
    m->text = text;
    m->func = func, m->variadic = variadic;
    toks bt = {0};
    if (!lex(p, text + body_at, text + k, &bt)) return;
    m->body = bt.v, m->nbody = bt.n;
}

/* #define's operands: a name, then "(" right after it for a function-like macro. */
static void directive_define(pp *p, const tok *t, size_t n, bool maybe) {
    if (n == 0 || t[0].k != TK_ID) return (void)(p->fail = true);
    if (n > 1 && is(&t[1], "(") && t[1].p == t[0].p + t[0].n) {
        tok params[256];
        size_t np = 0, i = 2;
        bool variadic = false;
        for (; i < n && !is(&t[i], ")"); i++) {
            if (is(&t[i], ",")) continue;
            if (is(&t[i], "...")) {
                variadic = true;
                continue;
            }
            if (t[i].k != TK_ID || np == 256) return (void)(p->fail = true);
            params[np++] = t[i];
        }
        if (i == n) return (void)(p->fail = true);
        define(p, &t[0], true, params, np, variadic, t + i + 1, n - i - 1, maybe);
    } else {
        define(p, &t[0], false, NULL, 0, false, t + 1, n - 1, maybe);
    }
}

/* ---- the closure of a kept line ---------------------------------------------------------------- */

static void visit(pp *p, const tok *t, int depth) {
    if (p->fail) return;
    if (depth > MAX_EXPAND_DEPTH || is(t, "__COUNTER__")) return (void)(p->fail = true);
    if (is(t, "__LINE__")) {
        emit(p, &p->line, sizeof p->line);
        return;
    }
    macro *m = kt__pp_find(p, t->p, t->n);
    if (m == NULL) { /* nobody here defined it: the same for every configuration */
        emit(p, "?", 1);
        return;
    }
    if (m->seen == p->gen) return;
    m->seen = p->gen;
    emit_str(p, m->name);
    for (const macro *d = m; d; d = d->alt) { /* the definition, and what else it may be */
        if (d->external || d->text == NULL) {
            emit(p, d->external ? "?" : "-", 1);
            continue;
        }
        if (d->paste) return (void)(p->fail = true); /* ## can make names nobody wrote */
        emit_str(p, d->text);
        for (size_t i = 0; i < d->nbody; i++)
            if (d->body[i].k == TK_ID) visit(p, &d->body[i], depth + 1);
    }
}

/* Hashes a kept line: its tokens and what every name on it means here. */
static void keep_line(pp *p, const char *what, const tok *t, size_t n) {
    emit_str(p, what);
    p->gen++;
    for (size_t i = 0; i < n; i++) {
        emit(p, t[i].p, t[i].n);
        if (t[i].k == TK_ID) visit(p, &t[i], 0);
    }
}

/* ---- files ----------------------------------------------------------------------------------- */

static void run(pp *p, const char *text, size_t len, region base);

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return NULL;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            if (cap >= MAX_FILE) {
                free(buf), buf = NULL;
                break;
            }
            char *b = realloc(buf, (cap = cap ? cap * 2 : 65536) + 1);
            if (b == NULL) {
                free(buf), buf = NULL;
                break;
            }
            buf = b;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    fclose(f);
    if (buf) buf[n] = '\0', *len = n;
    return buf;
}

/* #include "name" or <name>: a file found in the -I directories is read as part of the source; a
 * <name> found nowhere is a system header, hashed by name; a "name" found nowhere defeats the
 * analysis. */
static void directive_include(pp *p, const char *end, const tok *t, size_t n, region r) {
    char name[1024];
    bool angle = false;
    if (n >= 1 && t[0].k == TK_STR && t[0].p[0] == '"' && t[0].n >= 2 && t[0].n - 2 < sizeof name) {
        memcpy(name, t[0].p + 1, t[0].n - 2);
        name[t[0].n - 2] = '\0';
    } else if (n >= 1 && is(&t[0], "<")) {
        const char *a = t[0].p + 1, *b = memchr(a, '>', (size_t)(end - a));
        if (b == NULL || (size_t)(b - a) >= sizeof name) return (void)(p->fail = true);
        memcpy(name, a, (size_t)(b - a));
        name[b - a] = '\0';
        angle = true;
    } else {
        return (void)(p->fail = true); /* a computed include */
    }
    for (size_t d = 0; d < p->ndirs && name[0] != '/'; d++) {
        char path[4096];
        if (snprintf(path, sizeof path, "%s/%s", p->dirs[d], name) >= (int)sizeof path) continue;
        size_t flen = 0;
        char *body = read_file(path, &flen);
        if (body == NULL) continue;
        if (p->depth >= MAX_INCLUDE_DEPTH) {
            free(body);
            return (void)(p->fail = true);
        }
        emit_str(p, "#include");
        emit_str(p, name);
        long line_at = p->line;
        p->depth++;
        run(p, body, flen, r);
        p->depth--;
        p->line = line_at;
        free(body);
        return;
    }
    if (!angle) return (void)(p->fail = true);
    p->opaque = true;
    emit_str(p, "#include<>");
    emit_str(p, name);
}

static region region_of(const level *st, size_t n) {
    region r = LIVE;
    for (size_t i = 0; i < n; i++) {
        if (st[i].state == DEAD) return DEAD;
        if (st[i].state == MAYBE) r = MAYBE;
    }
    return r;
}

/* One conditional directive (kind: "if", "ifdef", "ifndef", "elif", "elifdef", "elifndef",
 * "else", "endif") with its operands. */
static void conditional(pp *p, level *st, size_t *depth, const tok *d, const tok *t, size_t n) {
    bool opening = is(d, "if") || is(d, "ifdef") || is(d, "ifndef");
    if (opening && *depth == MAX_COND_DEPTH) return (void)(p->fail = true);
    if (!opening && *depth == 0) return (void)(p->fail = true);
    level *l = opening ? &st[(*depth)++] : &st[*depth - 1];
    if (opening) *l = (level){DEAD, false, false, false};
    bool outer_dead = region_of(st, *depth - 1) == DEAD;
    if (is(d, "endif")) {
        if (l->emit && !outer_dead) emit_str(p, "#endif?");
        (*depth)--;
        return;
    }
    if (outer_dead || l->done) {
        l->state = DEAD;
        l->done = true;
        return;
    }
    int r = 1; /* #else */
    if (is(d, "if") || is(d, "elif")) {
        r = kt__pp_evaluate(p, t, n);
    } else if (!is(d, "else")) { /* the #ifdef family */
        if (n < 1 || t[0].k != TK_ID) return (void)(p->fail = true);
        r = kt__pp_defined_state(p, &t[0]);
        if (r >= 0 && (is(d, "ifndef") || is(d, "elifndef"))) r = !r;
    }
    if (l->maybe) { /* an earlier branch may have been taken: this one is at most maybe */
        l->state = r == 0 ? DEAD : MAYBE;
    } else {
        l->state = r == 1 ? LIVE : r == 0 ? DEAD : MAYBE;
        l->maybe = r < 0;
    }
    l->done = r == 1;
    l->emit = l->emit || r < 0 || l->maybe;
    if (l->emit) {
        keep_line(p, "#cond?", d, 1);
        keep_line(p, "", t, n);
    }
}

static void run(pp *p, const char *text, size_t len, region base) {
    size_t clen = 0;
    char *c = clean(p, text, len, &clen);
    if (c == NULL) return;
    level st[MAX_COND_DEPTH];
    size_t depth = 0;
    toks t = {0};
    p->line = 0;
    for (const char *line = c, *end; line < c + clen && !p->fail; line = end + 1) {
        end = memchr(line, '\n', (size_t)(c + clen - line));
        if (end == NULL) end = c + clen;
        p->line++;
        t.n = 0;
        if (!lex(p, line, end, &t)) break;
        if (t.n == 0) continue;
        region r = region_of(st, depth);
        if (r == LIVE) r = base; /* an included file's lines are as live as its #include */
        if (!is(&t.v[0], "#")) {
            if (r != DEAD) keep_line(p, "", t.v, t.n);
            continue;
        }
        if (t.n == 1) continue; /* the null directive */
        const tok *d = &t.v[1], *ops = t.v + 2;
        size_t nops = t.n - 2;
        if (is(d, "if") || is(d, "ifdef") || is(d, "ifndef") || is(d, "elif") || is(d, "elifdef") ||
            is(d, "elifndef") || is(d, "else") || is(d, "endif")) {
            conditional(p, st, &depth, d, ops, nops);
            continue;
        }
        if (r == DEAD) continue;
        if (is(d, "define")) {
            directive_define(p, ops, nops, r == MAYBE);
        } else if (is(d, "undef")) {
            int before = nops == 1 && ops[0].k == TK_ID ? kt__pp_defined_state(p, &ops[0]) : 0;
            macro *m = nops == 1 && ops[0].k == TK_ID ? entry(p, ops[0].p, ops[0].n) : NULL;
            if (m == NULL) {
                p->fail = true;
            } else if (r == MAYBE) { /* #undef'd, or still what it was */
                if (keep_alternative(p, m, before >= 0 && !m->ambiguous)) m->ambiguous = true;
            } else {
                clear_def(m);
            }
        } else if (is(d, "include")) {
            directive_include(p, end, ops, nops, r);
        } else if (is(d, "include_next") || is(d, "import")) {
            p->fail = true;
        } else { /* #pragma, #error, #line...: they reach the compiler */
            keep_line(p, "#", t.v + 1, t.n - 1);
        }
    }
    if (depth != 0) p->fail = true;
    free(t.v);
    free(c);
}

/* ---- the entry point ------------------------------------------------------------------------- */

static bool starts(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

bool kt__pp_fingerprint(const char *source, const char *const *defines, size_t ndefines, const char *const *options,
                        size_t noptions, uint64_t out[2]) {
    if (source == NULL) return false;
    pp *p = calloc(1, sizeof *p);
    const char **dirs = calloc(noptions ? noptions : 1, sizeof *dirs), **optdefs = calloc(noptions ? noptions : 1, sizeof *optdefs);
    if (p == NULL || dirs == NULL || optdefs == NULL) {
        free(p), free(dirs), free(optdefs);
        return false;
    }
    p->optdefs = optdefs;
    p->h = (kt__hasher){0x70726570726f63ull, 0x66696e6765727072ull};
    p->dirs = dirs;
    for (size_t i = 0; i < noptions && !p->fail; i++) {
        const char *o = options[i];
        if (starts(o, "-U") || starts(o, "--undefine-macro") || starts(o, "-include") || starts(o, "--pre-include") ||
            starts(o, "-imacros")) {
            p->fail = true;
        } else if (starts(o, "-I") || starts(o, "-isystem") || starts(o, "--include-path")) {
            const char *dir = starts(o, "-I") ? o + 2 : starts(o, "-isystem") ? o + 8 : o + 14;
            if (*dir == '=') dir++;
            if (*dir == '\0' && i + 1 < noptions) dir = options[++i];
            if (*dir) dirs[p->ndirs++] = dir;
        } else if (starts(o, "-D") || starts(o, "--define-macro")) {
            const char *def = starts(o, "-D") ? o + 2 : o + 14;
            if (*def == '=') def++;
            if (*def == '\0' && i + 1 < noptions) def = options[++i];
            size_t dn = strcspn(def, "=(");
            p->optdefs[p->noptdefs++] = def;
            for (size_t k = 0; k < ndefines; k++) /* which one wins would depend on the compiler */
                if (strncmp(defines[k], def, dn) == 0 && (defines[k][dn] == '=' || defines[k][dn] == '\0')) p->fail = true;
        }
    }
    toks t = {0};
    for (size_t i = 0; i < ndefines && !p->fail; i++) { /* -DNAME=VALUE, or -DNAME: 1 */
        const char *eq = strchr(defines[i], '='), *value = eq ? eq + 1 : "1";
        size_t nlen = eq ? (size_t)(eq - defines[i]) : strlen(defines[i]);
        bool ident = nlen > 0 && idstart((unsigned char)defines[i][0]);
        for (size_t k = 1; k < nlen; k++) ident = ident && idchar((unsigned char)defines[i][k]);
        if (!ident) {
            p->fail = true;
            break;
        }
        t.n = 0;
        tok name = {TK_ID, (uint32_t)nlen, defines[i]};
        if (lex(p, value, value + strlen(value), &t)) define(p, &name, false, NULL, 0, false, t.v, t.n, false);
    }
    free(t.v);
    if (!p->fail) run(p, source, strlen(source), LIVE);
    bool ok = !p->fail;
    if (ok) out[0] = p->h.a, out[1] = p->h.b;
    for (size_t b = 0; b < BUCKETS; b++)
        for (macro *m = p->tab[b], *next; m; m = next) {
            next = m->next;
            clear_def(m);
            free(m->name);
            free(m);
        }
    free(dirs);
    free(optdefs);
    free(p);
    return ok;
}
