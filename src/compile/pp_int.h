/*
 * pp_int.h - what the preprocessor's fingerprint (pp.c) shares with its #if evaluator (pp_if.c):
 * tokens, macros, the state of one analysis. Internal to src/compile/.
 */
#ifndef KT_PP_INT_H
#define KT_PP_INT_H

#include "compile/pp.h"
#include "compile/hash.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum { MAX_INCLUDE_DEPTH = 32, MAX_COND_DEPTH = 256, MAX_EXPAND_DEPTH = 64, MAX_FILE = 16 << 20, BUCKETS = 512 };
/* Tokens the expansions of all #if conditions of one analysis may produce: macros that name
 * others twice grow 2^depth tokens (fuzz-pp found one that ran for minutes); past this the
 * analysis gives up, as for anything it cannot prove (a real kernel needs thousands). */
#define MAX_IF_WORK ((size_t)1 << 22)

typedef enum { TK_ID, TK_NUM, TK_STR, TK_PUNCT, TK_UNKNOWN } tkind;

typedef struct tok {
    tkind k;
    uint32_t n;
    const char *p;
} tok;

typedef struct toks {
    tok *v;
    size_t n, cap;
} toks;

typedef struct macro {
    struct macro *next;
    char *name;
    char *text; /* "(params)" for a function-like one, 0x1f, the body's tokens; NULL: #undef'd */
    tok *body;  /* into text */
    size_t nbody;
    char **params;
    size_t nparams;
    bool func, variadic, paste, active;
    bool external;    /* an alternative: whatever the name was before the source touched it */
    bool ambiguous;   /* defined or #undef'd in a branch nobody can decide: alt holds what it may still be */
    struct macro *alt;
    unsigned seen;
} macro;

typedef struct pp {
    macro *tab[BUCKETS];
    kt__hasher h;
    unsigned gen;
    const char **dirs;
    size_t ndirs;
    const char **optdefs; /* names the options -D: defined, with values the same for everyone */
    size_t noptdefs;
    int depth;
    size_t if_work; /* tokens the #if expansions produced so far (MAX_IF_WORK) */
    bool fail;
    bool opaque; /* a header nobody could read was included: any name may be defined now */
    long line;
} pp;

typedef enum { DEAD, LIVE, MAYBE } region;

typedef struct level {
    region state;
    bool done;  /* a branch so far is taken whatever the unknowns are */
    bool maybe; /* a branch so far may be taken */
    bool emit;  /* the level reads unknowns: its structure is hashed */
} level;

/* Appends x to t; false (and p->fail) when out of memory. */
bool kt__pp_push(pp *p, toks *t, tok x);

/* The macro entry of the name s[0..n), or NULL when the source never touched it. */
macro *kt__pp_find(pp *p, const char *s, size_t n);

/* Whether the name is defined here: 1, 0, or -1 when nobody can tell (a header that could not be
 * read, the compiler or an option may define it). */
int kt__pp_defined_state(pp *p, const tok *t);

/* A #if's condition t[0..n) (pp_if.c): 1, 0, or -1 when it reads what nobody can know here. */
int kt__pp_evaluate(pp *p, const tok *t, size_t n);

static inline bool is(const tok *t, const char *s) { return t->n == strlen(s) && memcmp(t->p, s, t->n) == 0; }

static inline bool isdig(unsigned char c) { return c >= '0' && c <= '9'; }
static inline bool idstart(unsigned char c) { return c == '_' || c == '$' || ((c | 32) >= 'a' && (c | 32) <= 'z') || c >= 0x80; }
static inline bool idchar(unsigned char c) { return idstart(c) || isdig(c); }

static inline void emit(pp *p, const void *data, size_t n) { kt__hash_bytes(&p->h, data, n); }

static inline void emit_str(pp *p, const char *s) { emit(p, s, strlen(s)); }

#endif
