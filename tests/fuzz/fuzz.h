/*
 * fuzz.h - what the libFuzzer harnesses of tests/fuzz/ share (see README.md there).
 *
 * A harness checks what its reader promises, beyond not crashing: a finding is an ASan or UBSan
 * report, a broken promise (fuzz_check), or a limit (README.md: time and memory per input) that
 * libFuzzer's -timeout, -rss_limit_mb and -malloc_limit_mb catch.
 */
#ifndef KT_FUZZ_H
#define KT_FUZZ_H

#define _GNU_SOURCE /* memfd_create */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A promise broken: says which, then stops the process as a crash (libFuzzer keeps the input). */
#define fuzz_check(cond, ...)                                                          \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "fuzz: %s:%d: broken: %s: ", __FILE__, __LINE__, #cond);  \
            fprintf(stderr, __VA_ARGS__);                                              \
            fputc('\n', stderr);                                                       \
            __builtin_trap();                                                          \
        }                                                                              \
    } while (0)

/* A file of the input's bytes for readers that take a path: a memfd, named by path
 * ("/proc/self/fd/N"). Returns its descriptor (close it), or -1. */
static inline int fuzz_file(const uint8_t *data, size_t size, char path[64]) {
    int fd = memfd_create("fuzz-input", MFD_CLOEXEC);
    if (fd < 0) return -1;
    size_t done = 0;
    while (done < size) {
        ssize_t w = write(fd, data + done, size - done);
        if (w <= 0) {
            close(fd);
            return -1;
        }
        done += (size_t)w;
    }
    snprintf(path, 64, "/proc/self/fd/%d", fd);
    return fd;
}

/* The input as a NUL-terminated string (free it); NUL bytes inside stay (C readers stop there). */
static inline char *fuzz_text(const uint8_t *data, size_t size) {
    char *t = malloc(size + 1);
    if (t == NULL) return NULL;
    memcpy(t, data, size);
    t[size] = '\0';
    return t;
}

/* Splits text at its first n-1 newlines into n parts (in place); missing parts are "". */
static inline void fuzz_lines(char *text, const char **parts, int n) {
    for (int i = 0; i < n; i++) {
        parts[i] = text ? text : "";
        char *nl = text ? strchr(text, '\n') : NULL;
        if (nl && i < n - 1) *nl = '\0', text = nl + 1;
        else text = NULL;
    }
}

/* Removes the files of folder dir (not the folder): a harness's files of one input. */
static inline void fuzz_empty_dir(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[600];
    while (d && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    if (d) closedir(d);
}

static char fuzz_dir[256]; /* the harness's folder (fuzz_make_dir), removed at exit */

static inline void fuzz_remove_dir(void) {
    fuzz_empty_dir(fuzz_dir);
    rmdir(fuzz_dir);
}

/* Makes the harness's folder under TMPDIR (else /tmp), fuzz_dir, removed with what it holds
 * when the process exits; NULL (fuzz_dir empty) when it cannot. */
static inline const char *fuzz_make_dir(const char *name) {
    const char *base = getenv("TMPDIR");
    snprintf(fuzz_dir, sizeof fuzz_dir, "%s/kt-fuzz-%s-XXXXXX", base && *base ? base : "/tmp", name);
    if (mkdtemp(fuzz_dir) == NULL) {
        fuzz_dir[0] = '\0';
        return NULL;
    }
    atexit(fuzz_remove_dir);
    return fuzz_dir;
}

#endif
