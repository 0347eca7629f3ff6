/*
 * util.c - hashing and the clock, for every stage.
 */
#include "util/util.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

uint64_t kt__fnv1a(const void *data, size_t len, uint64_t seed) {
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ull ^ seed;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

double kt__now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint64_t kt__hash_str(const char *s, uint64_t h) { return kt__fnv1a(s ? s : "", s ? strlen(s) + 1 : 1, h); }

void kt__hex128(uint64_t a, uint64_t b, char out[33]) {
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)a, (unsigned long long)b);
}
