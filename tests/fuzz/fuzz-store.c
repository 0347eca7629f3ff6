/*
 * fuzz-store.c - opening a cache file (kt_cache_open, src/store/): the input is the file's
 * bytes (seeds: real stores, so that mutations are stores with damaged pages), then what a
 * user's first commands do with it: count, export, list the deferred keys, import.
 * Promises: opening succeeds (a damaged file moved aside and a fresh store started, saying so)
 * or refuses a newer or foreign database with KT_ERR_STATE, leaving the file as it was; every
 * later call returns a status with a message.
 */
#include "fuzz.h"

#include <kerntune/cache.h>

#include <fcntl.h>

static const char *dir;
static char file[300];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    if ((dir = fuzz_make_dir("store")) != NULL) snprintf(file, sizeof file, "%s/cache.db", dir);
    return 0;
}

static void said(kt_status st, const char *what) {
    fuzz_check(st == KT_OK || kt_last_error()[0] != '\0', "%s failed without a message", what);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (dir == NULL) return 0;
    fuzz_empty_dir(dir); /* the file, its -wal and -shm, what was moved aside */
    int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return 0;
    size_t done = 0;
    while (done < size) {
        ssize_t w = write(fd, data + done, size - done);
        if (w <= 0) break;
        done += (size_t)w;
    }
    close(fd);
    kt_cache *c = NULL;
    kt_status st = kt_cache_open(file, &c);
    if (st != KT_OK) {
        fuzz_check(st == KT_ERR_STATE && c == NULL, "open failed with %s: %s", kt_status_name(st), kt_last_error());
        /* refused: the file is left as it was */
        FILE *f = fopen(file, "rb");
        fuzz_check(f != NULL, "a refused file is gone");
        unsigned char buf[4096];
        size_t at = 0, got;
        while ((got = fread(buf, 1, sizeof buf, f)) > 0) {
            fuzz_check(at + got <= size && memcmp(buf, data + at, got) == 0, "a refused file was changed at byte %zu", at);
            at += got;
        }
        fclose(f);
        fuzz_check(at == size, "a refused file was cut to %zu bytes of %zu", at, size);
        return 0;
    }
    size_t n = 0;
    said(kt_cache_count(c, NULL, NULL, &n), "counting");
    char *json = NULL;
    st = kt_cache_export(c, NULL, NULL, &json);
    said(st, "exporting");
    if (st == KT_OK) {
        size_t added = 0;
        said(kt_cache_import(c, json, 1, &added, NULL, NULL), "importing its own export");
        kt_free(json);
    }
    json = NULL;
    if ((st = kt_cache_deferred(c, NULL, NULL, &json)) == KT_OK) kt_free(json);
    said(st, "listing the deferred keys");
    kt_cache_close(c);
    return 0;
}
