/*
 * opencl-helpers.h - what the OpenCL tests on PoCL share (test-opencl.c, test-opencl-queues.c):
 * the artifact directory both make for their run, the first OpenCL device, a context on it,
 * and a kernel that scales a vector in place.
 */
#ifndef KT_TEST_OPENCL_HELPERS_H
#define KT_TEST_OPENCL_HELPERS_H

#include "helpers.h"

#include <kerntune/device.h>
#include <kerntune/variants.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char artifacts[256];

static const char *scale_cl =
    "typedef ELEM elem_t; /* a define whose value holds a space: 'unsigned int' */\n"
    "__kernel void scale(__global float *v, float s) {\n"
    "    long i = get_global_id(0) * PER;\n"
    "    for (int k = 0; k < PER; k++) v[i + k] *= s;\n"
    "}\n";

/* The first OpenCL device of the context; the test fails when there is none, since PoCL is
 * installed by scripts/install-deps.sh. */
static size_t opencl_device(kt_context *ctx) {
    for (size_t i = 0; i < kt_context_device_count(ctx); i++)
        if (strcmp(kt_device_backend(kt_context_device(ctx, i)), "opencl") == 0) return i;
    for (size_t i = 0; i < kt_context_unavailable_count(ctx); i++) fprintf(stderr, "%s\n", kt_context_unavailable(ctx, i));
    fail_msg("no OpenCL device: is pocl-opencl-icd installed (scripts/install-deps.sh)?");
    return 0;
}

/* A test context (runs as test_context's) with the tests' artifact directory, and its OpenCL
 * device in *dev. */
static kt_context *cl_context(unsigned runs, size_t *dev) {
    kt_context *ctx = test_context(runs);
    ok(kt_context_set_artifact_dir(ctx, artifacts));
    *dev = opencl_device(ctx);
    return ctx;
}

/* Makes the run's artifact directory (under /tmp), runs the cases, removes the directory. */
static inline int run_opencl_cases(int argc, char **argv, const struct CMUnitTest *tests, size_t n) {
    snprintf(artifacts, sizeof artifacts, "/tmp/kt-opencl-XXXXXX");
    if (mkdtemp(artifacts) == NULL) return 1;
    int rc = kt__run_cases(argc, argv, tests, n, NULL, NULL);
    char rm[300];
    snprintf(rm, sizeof rm, "rm -rf '%s'", artifacts);
    if (system(rm) != 0 && rc == 0) rc = 1;
    return rc;
}

#endif
