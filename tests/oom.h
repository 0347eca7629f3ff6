/*
 * oom.h - allocations that fail on purpose, for the tests that check every allocation failure
 * is reported as KT_ERR_NO_MEMORY (test-expr.c, test-store.c). Include it once, from the test
 * program's one source file: it defines malloc, calloc, realloc and free. Needs <dlfcn.h>
 * (_GNU_SOURCE for dladdr) and helpers.h before it.
 */
#ifndef KT_TEST_OOM_H
#define KT_TEST_OOM_H

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdbool.h>

/* ---- allocations that fail on purpose -------------------------------------------------------
 * This program defines malloc, calloc, realloc and free, so that every allocation in the
 * process (kerntune's, and the C library's, SQLite's and jansson's on its behalf) comes here
 * first; each is passed on to the allocator the program would have used: a sanitizer's
 * (__interceptor_malloc...) in a sanitizer build, else the C library's (__libc_malloc...).
 * While a test arms it, allocation number n (counted from 0) fails once, returning NULL. These
 * functions run before the sanitizers are set up, so they are not instrumented. */
#if defined(__GLIBC__)
#define OOM_INJECT 1
#define OOM_RAW __attribute__((no_sanitize("address"), no_sanitize("thread"), no_sanitize("undefined")))

extern void *__interceptor_malloc(size_t) __attribute__((weak));
extern void *__interceptor_calloc(size_t, size_t) __attribute__((weak));
extern void *__interceptor_realloc(void *, size_t) __attribute__((weak));
extern void __interceptor_free(void *) __attribute__((weak));
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);

static _Atomic long oom_left = -1; /* allocations to pass before the one that fails; -1: none fails */
static atomic_bool oom_hit;         /* the armed allocation failed */

/* While set, allocations made by the code of a library whose file name holds this text are
 * not counted and never fail: jansson 2.14's parser cannot report running out of memory (a
 * failed allocation comes back as a syntax error, or a byte silently left out of a string). */
static const char *_Atomic oom_spared;

OOM_RAW static bool spared(const void *caller) {
    const char *lib = atomic_load(&oom_spared);
    Dl_info info;
    return lib != NULL && dladdr(caller, &info) != 0 && info.dli_fname != NULL && strstr(info.dli_fname, lib) != NULL;
}

OOM_RAW static bool fail_now(const void *caller) {
    long left = atomic_load(&oom_left);
    if (left < 0 || spared(caller)) return false;
    while (left >= 0)
        if (atomic_compare_exchange_weak(&oom_left, &left, left - 1)) {
            if (left != 0) return false;
            atomic_store(&oom_hit, true);
            return true;
        }
    return false;
}

OOM_RAW void *malloc(size_t n) {
    if (fail_now(__builtin_return_address(0))) return NULL;
    return __interceptor_malloc ? __interceptor_malloc(n) : __libc_malloc(n);
}

OOM_RAW void *calloc(size_t n, size_t size) {
    if (fail_now(__builtin_return_address(0))) return NULL;
    return __interceptor_calloc ? __interceptor_calloc(n, size) : __libc_calloc(n, size);
}

OOM_RAW void *realloc(void *p, size_t n) {
    if (fail_now(__builtin_return_address(0))) return NULL;
    return __interceptor_realloc ? __interceptor_realloc(p, n) : __libc_realloc(p, n);
}

OOM_RAW void free(void *p) {
    if (__interceptor_free) __interceptor_free(p);
    else __libc_free(p);
}

/* Fails the test from inside a run, failing no more allocations. */
#define oom_fail_msg(...)                \
    do {                                 \
        atomic_store(&oom_left, -1);     \
        fail_msg(__VA_ARGS__);           \
    } while (0)

/* Runs body(arg) with allocation n failing, for n = 0, 1, 2... until a run meets no failure.
 * A run that failed must have returned KT_ERR_NO_MEMORY with a message saying "out of memory"
 * (none may crash or leak: the sanitizer build checks); a run that succeeded despite a failed
 * allocation must have given the right result, which body checks. Returns the number of runs. */
static long every_allocation_fails(kt_status (*body)(void *arg), void *arg, const char *what) {
    for (long n = 0;; n++) {
        atomic_store(&oom_hit, false);
        atomic_store(&oom_left, n);
        kt_status st = body(arg);
        atomic_store(&oom_left, -1);
        bool hit = atomic_load(&oom_hit);
        if (st != KT_OK && (st != KT_ERR_NO_MEMORY || strstr(kt_last_error(), "out of memory") == NULL))
            fail_msg("%s, allocation %ld failing: %s, not KT_ERR_NO_MEMORY: %s", what, n, kt_status_name(st), kt_last_error());
        if (st != KT_OK && !hit) fail_msg("%s failed with no allocation failing: %s", what, kt_last_error());
        if (!hit) return n + 1;
    }
}
#endif /* __GLIBC__ */

#endif /* KT_TEST_OOM_H */
