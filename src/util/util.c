/*
 * util.c - hashing and the clock, for every stage.
 */
#define _GNU_SOURCE /* sched_getaffinity */
#include "util/util.h"

#include <sched.h>
#include <unistd.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

double kt_now_s(void) { return kt__now_s(); }

double kt__now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint64_t kt__hash_str(const char *s, uint64_t h) { return kt__fnv1a(s ? s : "", s ? strlen(s) + 1 : 1, h); }

void kt__hex128(uint64_t a, uint64_t b, char out[33]) {
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)a, (unsigned long long)b);
}

/* mkdir of dir, where a directory already there is success. */
static int make_one(const char *dir) {
    if (mkdir(dir, 0700) == 0 || errno == EEXIST) return 0;
    int e = errno;
    struct stat sb;
    return stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode) ? 0 : e;
}

int kt__make_dirs(const char *path, bool whole, char *failed, size_t len) {
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
        snprintf(failed, len, "%s", path);
        return ENAMETOOLONG;
    }
    int e = 0;
    for (char *p = buf + 1; *p && e == 0; p++) {
        if (*p != '/') continue;
        *p = '\0';
        e = make_one(buf);
        if (e == 0) *p = '/';
    }
    if (e == 0 && whole) e = make_one(buf);
    if (e != 0) snprintf(failed, len, "%s", buf);
    return e;
}

unsigned char *kt__read_whole(const char *path, size_t *len, bool *opened) {
    *len = 0;
    FILE *f = fopen(path, "rb");
    *opened = f != NULL;
    if (f == NULL) return NULL;
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    unsigned char *data = size >= 0 && fseek(f, 0, SEEK_SET) == 0 ? malloc((size_t)size + 1) : NULL;
    if (data && fread(data, 1, (size_t)size, f) != (size_t)size) {
        free(data);
        data = NULL;
    }
    fclose(f);
    if (data == NULL) return NULL;
    data[size] = '\0';
    *len = (size_t)size;
    return data;
}

size_t kt__processors(void) {
#ifdef __linux__
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return (size_t)CPU_COUNT(&set);
#endif
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (size_t)n : 1;
}

int kt__int_text(int64_t v, char out[24]) {
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    char digits[20];
    int n = 0, k = 0;
    do digits[n++] = (char)('0' + u % 10);
    while ((u /= 10) != 0);
    if (v < 0) out[k++] = '-';
    while (n > 0) out[k++] = digits[--n];
    out[k] = '\0';
    return k;
}
