/*
 * cuda-embed-check.c - decisions made ahead of time for a CUDA variant, carried with its compiled
 * artifact, run where NVRTC cannot be loaded (issue [13]). Driven by scripts/gpu-check:
 *
 *   cuda-embed-check tune CACHE ARTIFACTS     tunes the op 'embed' on the first CUDA device for
 *                                              two keys, recording the decisions in CACHE
 *   kerntune aot --op embed --embed --cache CACHE --artifacts ARTIFACTS -o T; cc -shared T.c
 *   KERNTUNE_NVRTC=/nonexistent cuda-embed-check run T.so EMPTY_DIR
 *                                              registers the table, calls the op for both keys
 *                                              and checks the results, that both decisions came
 *                                              from the table, and that nothing was compiled or
 *                                              measured (NVRTC missing: nothing could have been)
 *
 * Prints PASS/FAIL lines; exits 0 when every check passed.
 */
#include <kerntune.h>
#include <kerntune/aot.h>
#include <kerntune/cache.h>
#include <kerntune/decision.h>
#include <kerntune/device.h>
#include <kerntune/measure.h>
#include <kerntune/variants.h>

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

#define CHECK(cond, ...)                 \
    do {                                 \
        if (cond) {                      \
            printf("PASS ");             \
        } else {                         \
            printf("FAIL ");             \
            failures++;                  \
        }                                \
        printf(__VA_ARGS__);             \
        printf("\n");                    \
    } while (0)

/* v[i] += s * SCALE: SCALE 1 and 3 are both candidates; only 1 is right (validated against the
 * reference, SCALE=1), so the winner is known by what it writes. */
static const char *embed_cu = "__global__ void embed(float *v, float s) {\n"
                              "    long i = (long)blockIdx.x * B + threadIdx.x;\n"
                              "    v[i] += s * SCALE;\n"
                              "}\n";

static size_t cuda_device(kt_context *ctx) {
    for (size_t i = 0; i < kt_context_device_count(ctx); i++)
        if (strcmp(kt_device_backend(kt_context_device(ctx, i)), "cuda") == 0) return i;
    for (size_t i = 0; i < kt_context_unavailable_count(ctx); i++) printf("unavailable: %s\n", kt_context_unavailable(ctx, i));
    return (size_t)-1;
}

static kt_op *embed_op(kt_context *ctx, size_t dev) {
    kt_op *op = NULL;
    kt_space *sp = NULL;
    const char *grid[3] = {"v // B", NULL, NULL}, *block[3] = {"B", NULL, NULL};
    if (kt_op_create(ctx, "embed", &op) != KT_OK || kt_op_set_device(op, dev) != KT_OK ||
        kt_op_add_buffer(op, "v", KT_TYPE_F32, KT_READ_WRITE) != KT_OK || kt_op_add_scalar(op, "s", KT_TYPE_F32) != KT_OK ||
        kt_op_key_arg(op, 0, KT_BUCKET_EXACT) != KT_OK || kt_space_create(&sp) != KT_OK || kt_space_add_input(sp, "v") != KT_OK ||
        kt_space_add_param(sp, "B", "[128, 256]") != KT_OK || kt_space_add_param(sp, "SCALE", "[1, 3]") != KT_OK ||
        kt_space_set_geometry(sp, KT_GEOMETRY_GRID, grid, block, NULL) != KT_OK ||
        kt_op_add_variants(op, "v", sp, embed_cu, "embed", NULL, 0) != KT_OK) {
        printf("FAIL the op: %s\n", kt_last_error());
        kt_space_destroy(sp);
        return NULL;
    }
    kt_space_destroy(sp);
    return op;
}

/* Calls the op on n floats of 1.0 with s = 2 and checks every element became 3 (SCALE=1). */
static void call(kt_context *ctx, size_t dev, kt_op *op, size_t n, const char *when) {
    float *h = malloc(n * sizeof *h);
    void *d = NULL;
    for (size_t i = 0; i < n; i++) h[i] = 1.0f;
    kt_status st = kt_device_alloc(ctx, dev, n * sizeof *h, &d);
    if (st == KT_OK) st = kt_device_write(ctx, dev, d, h, n * sizeof *h);
    if (st == KT_OK) st = kt_op_call(op, ((kt_arg[]){kt_arg_buf(d, n * sizeof *h), kt_arg_f32(2.0f)}), 2);
    if (st == KT_OK) st = kt_device_read(ctx, dev, h, d, n * sizeof *h);
    size_t bad = 0;
    for (size_t i = 0; st == KT_OK && i < n; i++) bad += h[i] != 3.0f;
    CHECK(st == KT_OK && bad == 0, "%s: %zu floats: %s, %zu wrong", when, n, st == KT_OK ? "called" : kt_last_error(), bad);
    if (d) kt_device_free(ctx, dev, d);
    free(h);
}

int main(int argc, char **argv) {
    if (argc != 4 || (strcmp(argv[1], "tune") != 0 && strcmp(argv[1], "run") != 0)) {
        fprintf(stderr, "usage: cuda-embed-check tune CACHE ARTIFACTS | run TABLE.so ARTIFACTS\n");
        return 2;
    }
    bool tune = strcmp(argv[1], "tune") == 0;
    /* the table calls kt_context_add_decisions: keep it in this (statically linked) program */
    kt_status (*volatile add)(kt_context *, const kt_aot_table *, int *) = kt_context_add_decisions;
    (void)add;
    kt_context *ctx = NULL;
    if (kt_context_create(&ctx) != KT_OK || kt_context_set_cache(ctx, tune ? argv[2] : "off") != KT_OK ||
        kt_context_set_artifact_dir(ctx, argv[3]) != KT_OK) {
        printf("FAIL context: %s\n", kt_last_error());
        return 1;
    }
    void *so = NULL;
    if (!tune) { /* the table, before anything else */
        so = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
        kt_status (*reg)(kt_context *, size_t *) = so ? (kt_status(*)(kt_context *, size_t *))dlsym(so, "kt_decisions_register") : NULL;
        size_t used = 0;
        kt_status st = reg ? reg(ctx, &used) : KT_ERR_NOT_FOUND;
        CHECK(st == KT_OK && used == 1, "the table registered (%s, %zu used)", so ? "" : dlerror(), used);
    }
    size_t dev = cuda_device(ctx);
    if (dev == (size_t)-1) {
        printf("FAIL no CUDA device\n");
        return 1;
    }
    kt_op *op = embed_op(ctx, dev);
    if (op == NULL) return 1;
    call(ctx, dev, op, 1 << 12, tune ? "tuned" : "from the table");
    call(ctx, dev, op, 1 << 14, tune ? "tuned" : "from the table");
    for (size_t k = 0; k < kt_op_decision_count(op); k++) {
        const kt_decision *d = kt_op_decision_at(op, k);
        size_t w = kt_decision_winner_unit(d);
        const char *cfg = kt_decision_unit_config(d, w);
        CHECK(cfg && strstr(cfg, "SCALE=1") != NULL, "key %zu: winner %s", k, cfg ? cfg : "(none)");
        if (!tune)
            CHECK(kt_decision_source_of(d) == KT_SOURCE_TABLE, "key %zu: decided by %s", k, kt_decision_source_name(kt_decision_source_of(d)));
    }
    if (!tune) {
        CHECK(kt_context_compile_count(ctx) == 0, "nothing compiled (%llu)", (unsigned long long)kt_context_compile_count(ctx));
        CHECK(kt_op_measured_runs(op) == 0, "nothing measured (%llu runs)", (unsigned long long)kt_op_measured_runs(op));
    }
    kt_context_destroy(ctx);
    if (so) dlclose(so);
    printf("%d failed\n", failures);
    return failures ? 1 : 0;
}
