/*
 * cuda-check.h - what the CUDA suites on the GPU share (cuda-check.c, -streams.c, -device.c): the
 * artifact directory each makes for its run, the first CUDA device, a context on it, an op
 * scaling a vector in place with its variant groups, and the run's start and end ("N passed, M
 * failed").
 */
#ifndef KT_TEST_CUDA_CHECK_H
#define KT_TEST_CUDA_CHECK_H

#include "gpu-harness.h"

#include <kerntune.h>
#include <kerntune/cache.h>
#include <kerntune/device.h>
#include <kerntune/measure.h>
#include <kerntune/variants.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OK(call) OK_SAYING(call, kt_last_error())

static char artifacts[256];

static inline size_t cuda_device(kt_context *ctx) {
    for (size_t i = 0; i < kt_context_device_count(ctx); i++)
        if (strcmp(kt_device_backend(kt_context_device(ctx, i)), "cuda") == 0) return i;
    for (size_t i = 0; i < kt_context_unavailable_count(ctx); i++) printf("unavailable: %s\n", kt_context_unavailable(ctx, i));
    return (size_t)-1;
}

static inline kt_context *context(void) {
    kt_context *ctx = NULL;
    if (kt_context_create(&ctx) != KT_OK || kt_context_set_cache(ctx, "off") != KT_OK ||
        kt_context_set_measure(ctx, 1, 5, 5, 0) != KT_OK ||
        kt_context_set_artifact_dir(ctx, artifacts) != KT_OK) {
        printf("FAIL: context: %s\n", kt_last_error());
        exit(1);
    }
    return ctx;
}

/* A kernel scaling v in place by s, PER elements a thread. */
static const char scale_cu[] =
    "__global__ void scale(float *v, float s) {\n"
    "    long i = ((long)blockIdx.x * blockDim.x + threadIdx.x) * PER;\n"
    "    for (int k = 0; k < PER; k++) v[i + k] *= s;\n"
    "}\n";

/* Op `name` on device dev: v (f32, read and written) scaled by s (f32), in place. NULL when a
 * call failed (counted). */
static inline kt_op *scale_op(kt_context *ctx, size_t dev, const char *name) {
    kt_op *op = NULL;
    kt_status st = kt_op_create(ctx, name, &op);
    if (st == KT_OK) st = kt_op_set_device(op, dev);
    if (st == KT_OK) st = kt_op_add_buffer(op, "v", KT_TYPE_F32, KT_READ_WRITE);
    if (st == KT_OK) st = kt_op_add_scalar(op, "s", KT_TYPE_F32);
    CHECK(st == KT_OK, "op '%s': %s", name, kt_last_error());
    return st == KT_OK ? op : NULL;
}

/* Adds to a scale_op variant group `group` of scale_cu over PER and B (value lists), one element
 * per thread of PER and blocks of B, compiled with options (n of them). */
static inline kt_status add_scale(kt_op *op, const char *group, const char *per, const char *b, const char *const *options, size_t n) {
    kt_space *sp = NULL;
    kt_status st = kt_space_create(&sp);
    if (st == KT_OK) st = kt_space_add_input(sp, "v");
    if (st == KT_OK) st = kt_space_add_param(sp, "PER", per);
    if (st == KT_OK) st = kt_space_add_param(sp, "B", b);
    const char *grid[3] = {"v // PER // B", NULL, NULL}, *block[3] = {"B", NULL, NULL};
    if (st == KT_OK) st = kt_space_set_geometry(sp, KT_GEOMETRY_GRID, grid, block, NULL);
    if (st == KT_OK) st = kt_op_add_variants(op, group, sp, scale_cu, "scale", options, n);
    kt_space_destroy(sp);
    return st;
}

/* Makes the run's artifact directory and says which suite runs. */
static inline void cuda_check_begin(const char *suite) {
    snprintf(artifacts, sizeof artifacts, "/tmp/kt-cuda-XXXXXX");
    if (mkdtemp(artifacts) == NULL) exit(1);
    setvbuf(stdout, NULL, _IOLBF, 0); /* a check that hangs shows how far the others got */
    printf("kerntune %s CUDA %s\n", kt_version_string(), suite);
}

/* Removes the artifact directory and prints the tally: the exit status. */
static inline int cuda_check_end(void) {
    char rm[300];
    snprintf(rm, sizeof rm, "rm -rf '%s'", artifacts);
    if (system(rm) != 0) failed++;
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

#endif
