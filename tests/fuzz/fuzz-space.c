/*
 * fuzz-space.c - spaces as the public API builds them (kerntune/variants.h): two parameters'
 * value lists, a constraint, a derived value and a launch geometry, each a line of the input,
 * then a size expression evaluated in the space (kt_space_eval_int).
 * Promises: each call succeeds or fails with a message; a space of at most 4096 candidate
 * configurations enumerates, and each configuration formats and reads back its values.
 */
#include "fuzz.h"

#include <kerntune/variants.h>

#include "space/space.h"

static void said(kt_status st, const char *what) {
    fuzz_check(st == KT_OK || kt_last_error()[0] != '\0', "%s failed without a message", what);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = fuzz_text(data, size);
    if (text == NULL) return 0;
    const char *line[6];
    fuzz_lines(text, line, 6);
    kt_space *sp = NULL;
    if (kt_space_create(&sp) != KT_OK) {
        free(text);
        return 0;
    }
    kt_status st;
    said(st = kt_space_add_param(sp, "x", line[0]), "a value list");
    if (st == KT_OK) said(kt_space_add_param(sp, "y", line[1]), "a value list");
    said(kt_space_add_input(sp, "n"), "an input");
    said(kt_space_bind_int(sp, "n", 1000), "binding an input");
    if (line[2][0]) said(kt_space_add_constraint(sp, line[2]), "a constraint");
    if (line[3][0]) said(kt_space_add_derived(sp, "d", line[3]), "a derived value");
    const char *global[3] = {line[4][0] ? line[4] : NULL, NULL, NULL}, *local[3] = {"x", NULL, NULL};
    said(kt_space_set_geometry(sp, KT_GEOMETRY_GRID, global, local, NULL), "a geometry");
    int64_t v;
    if (line[5][0]) said(kt_space_eval_int(sp, line[5], &v), "a size expression");
    size_t product = 1;
    for (size_t i = 0; i < kt_space_param_count(sp) && product <= 4096; i++)
        product *= kt__space_param_nvalues(sp, i) ? kt__space_param_nvalues(sp, i) : 1;
    size_t count = 0;
    if (product <= 4096 && (st = kt_space_enumerate(sp, &count)) == KT_OK) {
        fuzz_check(count <= product && count == kt_space_config_count(sp), "%zu configurations of %zu", count, product);
        char buf[512];
        for (size_t c = 0; c < count && c < 16; c++) {
            said(kt_space_config_format(sp, c, buf, sizeof buf), "formatting a configuration");
            for (size_t p = 0; p < kt_space_param_count(sp); p++) (void)kt_space_config_int(sp, c, p, &v);
        }
    } else if (product <= 4096) {
        said(st, "enumerating");
    }
    kt_space_destroy(sp);
    free(text);
    return 0;
}
