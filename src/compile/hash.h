/*
 * hash.h - the 128-bit hash of build keys and preprocessor fingerprints (compile.c, pp.c).
 * Internal to src/compile/.
 */
#ifndef KT_BUILD_HASH_H
#define KT_BUILD_HASH_H

#include "util/util.h"

#include <stddef.h>
#include <stdint.h>

/* Two FNV-1a streams with different seeds and mixing: 128 bits. */
typedef struct kt__hasher {
    uint64_t a, b;
} kt__hasher;

/* Adds n bytes at p, after their length (which keeps ("ab","c") and ("a","bc") apart). */
static inline void kt__hash_bytes(kt__hasher *h, const void *p, size_t n) {
    uint64_t len = n;
    h->a = kt__fnv1a(&len, sizeof len, h->a);
    h->b = kt__fnv1a(&len, sizeof len, h->b ^ 0x5bd1e995u);
    h->a = kt__fnv1a(p, n, h->a);
    h->b = kt__fnv1a(p, n, h->b * 0x9e3779b97f4a7c15ull);
}

#endif
