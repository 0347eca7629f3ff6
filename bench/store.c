/*
 * store.c - what a warm persistent cache saves (issue [6]).
 *
 * Runs itself as child processes, each timing from the start of main() to the end of its first
 * launch of a C-backend variant op (16 configurations of a small kernel):
 *   cold: empty cache and empty artifact directory (compiles, measures, records);
 *   warm: the same files afterwards (opens the cache, reads and checks the record, loads one
 *         cached artifact, launches).
 * For the warm child it also reports the work kerntune adds before the first launch: the first
 * call's time less a second call's (the kernel itself), the context's creation (backend start)
 * not counted. Then lookups per second through the store's internal API. RESULT lines last.
 *
 * Usage: store [--rounds R]
 */
#define _GNU_SOURCE /* mkdtemp */
#include "store/store.h"

#include <jansson.h>
#include <kerntune.h>
#include <kerntune/cache.h>
#include <kerntune/validation.h>
#include <kerntune/variants.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const char *src = "void fill(float *out, long n) { for (long i = 0; i < n; i += STEP) out[i] = (float)(i * SCALE); }\n";

#define CHECK(call)                                                                  \
    do {                                                                             \
        if ((call) != KT_OK) {                                                       \
            fprintf(stderr, "store: %s: %s\n", #call, kt_last_error());              \
            exit(1);                                                                 \
        }                                                                            \
    } while (0)

/* The child: prints "first_ms added_ms source" on stdout. */
static int child(const char *cache, const char *artifacts) {
    double t0 = now();
    kt_context *ctx = NULL;
    CHECK(kt_context_create(&ctx));
    CHECK(kt_context_set_cache(ctx, cache));
    CHECK(kt_context_set_artifact_dir(ctx, artifacts));
    double created = now();
    kt_op *op = NULL;
    CHECK(kt_op_create(ctx, "fill", &op));
    CHECK(kt_op_add_buffer(op, "out", KT_TYPE_F32, KT_WRITE_ONLY));
    CHECK(kt_op_add_scalar(op, "n", KT_TYPE_I64));
    CHECK(kt_op_key_arg(op, 1, KT_BUCKET_EXACT));
    CHECK(kt_op_set_validation(op, 0));
    kt_space *sp = NULL;
    CHECK(kt_space_create(&sp));
    CHECK(kt_space_add_param(sp, "STEP", "[1, 2, 4, 8]"));
    CHECK(kt_space_add_param(sp, "SCALE", "[1, 2, 3, 4]"));
    CHECK(kt_op_add_variants(op, "v", sp, src, "fill", NULL, 0));
    kt_space_destroy(sp);
    static float out[4096];
    kt_arg args[2] = {kt_arg_buf(out, sizeof out), kt_arg_i64(4096)};
    double c0 = now();
    CHECK(kt_op_call(op, args, 2));
    double first = now();
    CHECK(kt_op_call(op, args, 2));
    double second = now() - first;
    const kt_decision *d = NULL;
    CHECK(kt_op_decision(op, args, 2, &d));
    printf("%.4f %.4f %.4f %s\n", (first - t0) * 1e3, (first - c0 - second) * 1e3, (created - t0) * 1e3,
           kt_decision_source_of(d) == KT_SOURCE_CACHE ? "cache" : "measured");
    kt_context_destroy(ctx);
    return 0;
}

/* Runs a child and reads its line. */
static void run_child(const char *self, const char *cache, const char *artifacts, double *first, double *added, double *init,
                      char *source) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' --child '%s' '%s'", self, cache, artifacts);
    FILE *p = popen(cmd, "r");
    if (p == NULL || fscanf(p, "%lf %lf %lf %15s", first, added, init, source) != 4) {
        fprintf(stderr, "store: the child failed\n");
        exit(1);
    }
    pclose(p);
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "--child") == 0) return child(argv[2], argv[3]);
    int rounds = 5;
    if (argc == 3 && strcmp(argv[1], "--rounds") == 0) rounds = atoi(argv[2]);
    else if (argc != 1) {
        fprintf(stderr, "usage: store [--rounds R]\n");
        return strcmp(argv[1], "--help") == 0 ? 0 : 2;
    }
    if (rounds < 1 || rounds > 50) rounds = 5;
    double cold[50], warm[50], added[50], init[50];
    char dir[] = "/tmp/kt-store-bench-XXXXXX";
    if (mkdtemp(dir) == NULL) return 1;
    char cache[256], artifacts[256];
    for (int r = 0; r < rounds; r++) {
        snprintf(cache, sizeof cache, "%s/cache-%d.db", dir, r);
        snprintf(artifacts, sizeof artifacts, "%s/artifacts-%d", dir, r);
        char source[16];
        double a, i;
        run_child(argv[0], cache, artifacts, &cold[r], &a, &i, source);
        if (strcmp(source, "measured") != 0) return 1;
        run_child(argv[0], cache, artifacts, &warm[r], &added[r], &init[r], source);
        if (strcmp(source, "cache") != 0) {
            fprintf(stderr, "store: the warm child did not use the cache\n");
            return 1;
        }
        printf("round %d: cold %.2f ms, warm %.2f ms to the first launch (kerntune's part %.3f ms; context %.3f ms)\n", r + 1,
               cold[r], warm[r], added[r], init[r]);
    }
    /* lookups through the store, of the decision the last round recorded */
    kt_cache *c = NULL;
    CHECK(kt_cache_open(cache, &c));
    char *doc = NULL;
    CHECK(kt_cache_export(c, "fill", NULL, &doc));
    json_error_t jerr;
    json_t *w = json_loads(doc, 0, &jerr), *e = json_array_get(json_object_get(w, "entries"), 0);
    kt_free(doc);
    if (e == NULL) {
        fprintf(stderr, "store: no decision recorded\n");
        return 1;
    }
    int64_t k64[16];
    size_t nkey = 0, i;
    json_t *v;
    json_array_foreach(json_object_get(e, "key"), i, v) if (nkey < 16) k64[nkey++] = json_integer_value(v);
    kt__store_rec id = {.op = "fill",
                        .set_hash = (char *)json_string_value(json_object_get(e, "candidate_set")),
                        .device = (char *)json_string_value(json_object_get(e, "device")),
                        .version = (char *)json_string_value(json_object_get(e, "library_version")),
                        .key = k64,
                        .key_len = nkey};
    int n = 2000;
    kt__store_rec out;
    kt_status st = kt__store_get(c, &id, &out);
    double lookups = -1;
    if (st == KT_OK) {
        kt__store_rec_free(&out);
        double t0 = now();
        for (int j = 0; j < n; j++) {
            if (kt__store_get(c, &id, &out) != KT_OK) break;
            kt__store_rec_free(&out);
        }
        lookups = n / (now() - t0);
    } else {
        fprintf(stderr, "store: could not find the recorded decision for lookups: %s\n", kt_last_error());
    }
    json_decref(w);
    kt_cache_close(c);
    qsort(cold, (size_t)rounds, sizeof *cold, cmp);
    qsort(warm, (size_t)rounds, sizeof *warm, cmp);
    qsort(added, (size_t)rounds, sizeof *added, cmp);
    printf("\nRESULT store_cold_first_launch_ms %.2f ms\n", cold[rounds / 2]);
    printf("RESULT store_warm_first_launch_ms %.2f ms\n", warm[rounds / 2]);
    printf("RESULT store_warm_added_before_launch_ms %.3f ms\n", added[rounds / 2]);
    printf("RESULT store_cold_over_warm %.1f x\n", cold[rounds / 2] / warm[rounds / 2]);
    printf("RESULT store_lookups_per_s %.0f lookups/s\n", lookups);
    char rm[128];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    if (system(rm) != 0) fprintf(stderr, "store: could not remove %s\n", dir);
    return 0;
}
