/*
 * fuzz-t4.c - recorded measurements for replay (cli/t4.c): T4 results and Kernel Tuner cache
 * files, plain or gzip. Input: the space's parameter names on the first line (comma-separated,
 * at most 8), then the file.
 * Promises: a file is read or refused with one line that starts with its name; the records come
 * sorted by key, each key naming every parameter, best the fastest correct one (or none).
 */
#include "fuzz.h"

#include "t4.h"

#include <math.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nl = memchr(data, '\n', size);
    if (nl == NULL) return 0;
    char *head = fuzz_text(data, (size_t)(nl - data));
    if (head == NULL) return 0;
    const char *names[8];
    size_t n = 0;
    for (char *tok = strtok(head, ","); tok && n < 8; tok = strtok(NULL, ",")) names[n++] = tok;
    char path[64];
    int fd = fuzz_file(nl + 1, size - (size_t)(nl + 1 - data), path);
    t4_records r;
    char *err = NULL;
    if (fd >= 0 && t4_read(path, names, n, &r, &err)) {
        fuzz_check(r.best <= r.n, "best %zu of %zu records", r.best, r.n);
        for (size_t i = 0; i < r.n; i++) {
            fuzz_check(r.recs[i].key != NULL, "record %zu has no key", i);
            if (i > 0) fuzz_check(t4_compare(&r.recs[i - 1], &r.recs[i]) <= 0, "records %zu and %zu out of order", i - 1, i);
            for (size_t k = 0; k < n; k++) fuzz_check(strstr(r.recs[i].key, names[k]) != NULL, "key '%s' lacks %s", r.recs[i].key, names[k]);
        }
        if (r.best < r.n) fuzz_check(!isnan(r.recs[r.best].mean_ns), "the best record's time is NaN");
        t4_free(&r);
    } else if (fd >= 0) {
        fuzz_check(err != NULL, "t4_read failed without a message");
        fuzz_check(strncmp(err, path, strlen(path)) == 0 && strchr(err, '\n') == NULL, "message not one line naming the file: %s", err);
    }
    free(err);
    if (fd >= 0) close(fd);
    free(head);
    return 0;
}
