/*
 * hub.h - the shared benchmark_hub recordings (KT_HUB) in the tests that link jansson and zlib:
 * a gzipped JSON file read whole, and parts of a recording (the configurations a set of
 * --define options leaves) written once as small T4 files, so that a test replays or reports a
 * hundred-odd configurations instead of tens of thousands (bench/hub_replay.py replays them
 * whole). Fails the test, naming the file, when one cannot be read or written.
 */
#ifndef KT_TEST_HUB_H
#define KT_TEST_HUB_H

#include "helpers.h"

#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#ifndef KT_HUB
#error "KT_HUB must name ../shared/benchmark_hub"
#endif

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

/* --define options that leave a small part (about a hundred configurations) of a hub space;
 * NULL for a problem this header does not know. */
static inline const char *hub_small_subset(const char *kernel) {
    if (strcmp(kernel, "convolution_milo") == 0)
        return "--define block_size_y=4 --define read_only=0 --define use_padding=0 --define use_shmem=1";
    if (strcmp(kernel, "dedispersion_milo") == 0)
        return "--define block_size_x=8 --define tile_size_x=3 --define tile_stride_x=1 --define tile_stride_y=1";
    return NULL;
}

/* Whether a recorded configuration is in the part that subset (--define options) leaves. */
static inline bool hub_in_subset(const json_t *cfg, const char *subset) {
    char copy[512];
    snprintf(copy, sizeof copy, "%s", subset);
    for (char *d = strstr(copy, "--define "); d; d = strstr(d, "--define ")) {
        d += 9;
        char name[64];
        long long v;
        if (sscanf(d, "%63[^=]=%lld", name, &v) != 2) fail_msg("bad subset %s", subset);
        if (json_integer_value(json_object_get(cfg, name)) != v) return false;
    }
    return true;
}

/* The directory of the parts: the test environment's scratch directory where ctest names one
 * (KT_TEST_SCRATCH: each case runs as a process of its own, and each part is made once for all
 * of them), else one made for this program. (Made once: a test program that holds the
 * recordings in memory makes every later popen slow.) */
static char hub_part_dir[512];

static inline void hub_remove_part_dir(void) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", hub_part_dir);
    if (hub_part_dir[0] && system(cmd) != 0) fprintf(stderr, "could not remove %s\n", hub_part_dir);
}

/* The T4 file of kernel's recording on gpu: the hub's whole recording for an empty subset, else
 * a copy holding only the results subset leaves (made the first time it is asked for). */
static inline void hub_part(const char *kernel, const char *gpu, const char *subset, char *path, size_t len) {
    if (*subset == '\0') {
        snprintf(path, len, "%s/results/%s/%s_T4.json.gz", KT_HUB, kernel, gpu);
        return;
    }
    const char *scratch = getenv("KT_TEST_SCRATCH");
    if (hub_part_dir[0] == '\0' && scratch && *scratch) {
        snprintf(hub_part_dir, sizeof hub_part_dir, "%s/hub-subsets", scratch);
        if (mkdir(hub_part_dir, 0755) != 0 && errno != EEXIST) fail_msg("%s: %s", hub_part_dir, strerror(errno));
    } else if (hub_part_dir[0] == '\0') {
        snprintf(hub_part_dir, sizeof hub_part_dir, "/tmp/kt-test-subsets-XXXXXX");
        assert_non_null(mkdtemp(hub_part_dir));
        atexit(hub_remove_part_dir);
    }
    unsigned h = 5381; /* the subset, as a name */
    for (const char *c = subset; *c; c++) h = h * 33 + (unsigned char)*c;
    snprintf(path, len, "%s/%s_%s_%08x.json", hub_part_dir, kernel, gpu, h);
    if (access(path, R_OK) == 0) return;
    char full[1024];
    snprintf(full, sizeof full, "%s/results/%s/%s_T4.json.gz", KT_HUB, kernel, gpu);
    json_t *all = load_gz_json(full), *results = json_array(), *r;
    size_t i;
    json_array_foreach(json_object_get(all, "results"), i, r)
        if (hub_in_subset(json_object_get(r, "configuration"), subset)) json_array_append(results, r);
    json_object_set_new(all, "results", results);
    char tmp[1100]; /* written whole, then renamed: another case's process may read it at once */
    snprintf(tmp, sizeof tmp, "%s.%d", path, (int)getpid());
    if (json_dump_file(all, tmp, JSON_INDENT(1)) != 0) fail_msg("%s: cannot be written", tmp);
    assert_int_equal(rename(tmp, path), 0);
    json_decref(all);
}

#endif
