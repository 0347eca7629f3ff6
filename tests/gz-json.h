/*
 * gz-json.h - a gzipped JSON file read whole (the shared benchmark_hub recordings), for the tests
 * that link jansson and zlib. Fails the test, naming the file, when it cannot be read or parsed.
 */
#ifndef KT_TEST_GZ_JSON_H
#define KT_TEST_GZ_JSON_H

#include "helpers.h"

#include <jansson.h>
#include <zlib.h>

static inline json_t *load_gz_json(const char *path) {
    gzFile gz = gzopen(path, "rb");
    if (gz == NULL) fail_msg("cannot open %s", path);
    size_t cap = 1 << 22, len = 0;
    char *buf = malloc(cap);
    assert_non_null(buf);
    int n;
    while ((n = gzread(gz, buf + len, (unsigned)(cap - len))) > 0)
        if ((len += (size_t)n) == cap) {
            buf = realloc(buf, cap *= 2);
            assert_non_null(buf);
        }
    gzclose(gz);
    json_error_t e;
    json_t *root = json_loadb(buf, len, 0, &e);
    free(buf);
    if (root == NULL) fail_msg("%s:%d:%d: %s", path, e.line, e.column, e.text);
    return root;
}

#endif
