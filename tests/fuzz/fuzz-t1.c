/*
 * fuzz-t1.c - the T1 reader (cli/t1.c), then the space `kerntune tune` makes of what it read
 * (cli/tune_space.c): value lists, conditions, geometry, the Defaults.
 * Promises: a file is read or refused with one line that starts with its name; a space of at
 * most 4096 candidate configurations enumerates (or fails with a message).
 */
#include "fuzz.h"

#include "t1.h"
#include "tune_int.h"

#include "space/space.h"

static void try_space(const t1 *p, bool defaults) {
    char *err = NULL;
    kt_space *sp = make_space(p, NULL, 0, defaults, p->problem_size, p->nproblem, &err);
    fuzz_check(sp != NULL || err != NULL || defaults, "make_space failed without a message");
    size_t product = 1;
    for (size_t i = 0; sp && i < kt_space_param_count(sp) && product <= 4096; i++)
        product *= kt__space_param_nvalues(sp, i) ? kt__space_param_nvalues(sp, i) : 1;
    if (sp && product <= 4096) { /* a bigger space is its size's work, not the reader's */
        size_t count = 0;
        if (kt_space_enumerate(sp, &count) == KT_OK) {
            fuzz_check(count <= product, "%zu configurations of a product of %zu", count, product);
            for (size_t c = 0; c < count && c < 8; c++) free(format_config(sp, c));
        } else {
            fuzz_check(kt_last_error()[0] != '\0', "enumerating failed without a message");
        }
    }
    kt_space_destroy(sp);
    free(err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[64];
    int fd = fuzz_file(data, size, path);
    if (fd < 0) return 0;
    t1 p;
    char *err = NULL;
    bool ok = t1_load(path, &p, &err);
    if (!ok) {
        fuzz_check(err != NULL, "t1_load failed without a message");
        fuzz_check(strncmp(err, path, strlen(path)) == 0 && strchr(err, '\n') == NULL, "message not one line naming the file: %s", err);
    } else {
        json_decref(t1_ignored_json(&p));
        char *gerr = NULL;
        if (t1_grid(&p, p.nproblem, &gerr)) {
            try_space(&p, false);
            try_space(&p, true);
        }
        free(gerr);
    }
    free(err);
    t1_free(&p);
    close(fd);
    return 0;
}
