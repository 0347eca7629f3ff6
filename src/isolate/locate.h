/*
 * locate.h - naming code of this process so that a runner process can find the same code
 * (locate.c). Internal to src/isolate/ and the runner.
 *
 * A function or a backend table is named by the object file that holds it (a shared object, or
 * the program itself), its address relative to that object's load bias, the object's ELF build-id
 * (NT_GNU_BUILD_ID) when it has one, and its dynamic symbol when one starts exactly there. A
 * runner loads the object (dlopen; the program is the runner itself, a fresh start of the same
 * file) and finds the code at the same offset, after checking that the build-id is the same;
 * an object without a build-id is found through its symbol instead.
 */
#ifndef KT_ISOLATE_LOCATE_H
#define KT_ISOLATE_LOCATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h> /* memcpy, for KT__FN_ADDR */

#define KT__CODE_PATH_MAX 4096
#define KT__BUILD_ID_MAX 64

typedef struct kt__code_ref {
    char path[KT__CODE_PATH_MAX]; /* the shared object's absolute path; "" in the program */
    char symbol[256];             /* the dynamic symbol at exactly this address, or "" */
    uint64_t offset;              /* the address minus the object's load bias */
    uint32_t in_program;          /* 1: in the program itself (the main executable) */
    uint32_t build_id_len;        /* 0: the object has no build-id */
    unsigned char build_id[KT__BUILD_ID_MAX];
} kt__code_ref;

/* Names the code at addr. Returns false, with why (a sentence, no trailing period) saying what
 * is missing, when another process could not find it: not in a loaded object (a JIT's or a
 * closure's code), an object whose file cannot be named, or a function with no dynamic symbol
 * in a shared object that has no build-id. */
bool kt__code_locate(const void *addr, kt__code_ref *out, char *why, size_t len);

/* In the runner: loads r's object when needed and returns the address of its code in *addr.
 * Fails with err set when the object cannot be loaded, it is not the file the tuning process
 * loaded (another build-id), or the symbol is missing. */
bool kt__code_resolve(const kt__code_ref *r, void **addr, char *err, size_t len);

/* The object that holds the runner's request loop (kt__runner_serve), for a runner that is a
 * fresh start of this program: 0 when it is the program itself (nothing to preload), 1 with its
 * path in path when it is a shared object the program must preload, -1 with why when it cannot
 * be named or preloaded. */
int kt__code_serve_object(char *path, size_t len, char *why, size_t wlen);

/* A function pointer as an address (POSIX makes the two convertible). */
#define KT__FN_ADDR(fn, out)                                                                       \
    do {                                                                                           \
        _Static_assert(sizeof(fn) == sizeof(void *), "function pointers are addresses");          \
        memcpy(&(out), &(fn), sizeof(void *));                                                     \
    } while (0)

#endif
