/*
 * test-cuda-target.c - building CUDA variants for a GPU this machine does not have
 * (KERNTUNE_CUDA_TARGET: a fleet's compile worker without the GPU). With NVRTC installed (this
 * machine's CUDA toolkit): the target is a device whose fingerprint is the given one exactly and
 * whose compiler identity takes the fingerprint's driver; kt_op_build compiles each configuration
 * to a cubin in the artifact directory and loads nothing; a tuning there is refused, saying the
 * device only builds; a fingerprint that is not one is refused by name. Without NVRTC the backend
 * says that it needs NVRTC. That the artifacts are the GPU's own (a device worker loads them, by
 * their keys) is checked on the GPU machine (scripts/gpu-fleet).
 */
#define _GNU_SOURCE /* mkdtemp, setenv */
#include "helpers.h"

#include <kerntune/decision.h>
#include <kerntune/device.h>
#include <kerntune/variants.h>

#include <dirent.h>
#include <stdlib.h>

static const char *fp = "cuda:NVIDIA H200|cc=9.0|sms=132|mem=150754820096|l2=62914560|driver=13000";
static char artifacts[256];

static const char *scale_cu =
    "extern \"C\" __global__ void scale(float *y, int n) {\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n) y[i] *= S;\n"
    "}\n";

/* The compile target's device index, or -1 (then *why says what the backend said). */
static long target(kt_context *ctx, const char **why) {
    *why = NULL;
    for (size_t i = 0; i < kt_context_device_count(ctx); i++)
        if (strstr(kt_device_name(kt_context_device(ctx, i)), "a compile target")) return (long)i;
    for (size_t i = 0; i < kt_context_unavailable_count(ctx); i++)
        if (strncmp(kt_context_unavailable(ctx, i), "cuda", 4) == 0) *why = kt_context_unavailable(ctx, i);
    return -1;
}

static size_t cubins(void) {
    DIR *d = opendir(artifacts);
    size_t n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 6, ".cubin") != 0) continue;
        char path[600], head[9] = "";
        snprintf(path, sizeof path, "%s/%s", artifacts, e->d_name);
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        assert_int_equal(fread(head, 1, 8, f), 8);
        fclose(f);
        assert_memory_equal(head, "KTCUBIN2", 8); /* the backend's cubin file, as a GPU's load reads it */
        n++;
    }
    if (d) closedir(d);
    return n;
}

static void test_build_for_absent_gpu(void **state) {
    (void)state;
    setenv("KERNTUNE_CUDA_TARGET", fp, 1);
    kt_context *ctx = test_context(3);
    ok(kt_context_set_artifact_dir(ctx, artifacts));
    const char *why;
    long dev = target(ctx, &why);
    if (dev < 0) { /* no NVRTC here: the backend says so */
        assert_non_null(why);
        assert_non_null(strstr(why, "needs NVRTC"));
        kt_context_destroy(ctx);
        return;
    }
    const kt_device *d = kt_context_device(ctx, (size_t)dev);
    assert_string_equal(kt_device_fingerprint(d), fp);
    assert_string_equal(kt_device_name(d), "NVIDIA H200 (sm_90, a compile target)");
    char compiler[512];
    ok(kt_device_compiler(ctx, (size_t)dev, compiler, sizeof compiler));
    assert_non_null(strstr(compiler, "| driver 13000 | sm_90"));
    kt_op *op = NULL;
    ok(kt_op_create(ctx, "scale", &op));
    ok(kt_op_set_device(op, (size_t)dev));
    ok(kt_op_add_buffer(op, "y", KT_TYPE_F32, KT_READ_WRITE));
    ok(kt_op_add_scalar(op, "n", KT_TYPE_I32));
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    ok(kt_space_add_input(sp, "n"));
    ok(kt_space_add_param(sp, "B", "[32, 64]"));
    ok(kt_space_add_param(sp, "S", "[2, 3]"));
    const char *grid[3] = {"(n + B - 1) // B", NULL, NULL}, *block[3] = {"B", NULL, NULL};
    ok(kt_space_set_geometry(sp, KT_GEOMETRY_GRID, grid, block, NULL));
    ok(kt_op_add_variants(op, "scale", sp, scale_cu, "scale", NULL, 0));
    kt_space_destroy(sp);
    static float y[1024];
    kt_arg args[2] = {kt_arg_buf(y, sizeof y), kt_arg_i32(1024)};
    kt_build_counts c = {99, 99, 99};
    ok(kt_op_build(op, args, 2, &c));
    /* S changes the code; B only the launch, so two builds serve the four configurations */
    assert_int_equal(c.built, 2);
    assert_int_equal(c.failed, 0);
    assert_int_equal(cubins(), 2);
    assert_int_equal(kt_op_decision_count(op), 0);
    ok(kt_op_build(op, args, 2, &c));
    assert_int_equal(c.found, 2);
    kt_status st = kt_op_tune(op, args, 2); /* nothing runs on a compile target */
    assert_int_not_equal(st, KT_OK);
    assert_non_null(strstr(kt_last_error(), "compile target"));
    kt_context_destroy(ctx);
    setenv("KERNTUNE_CUDA_TARGET", "cuda:NVIDIA H200|sms=132", 1); /* no cc=, no driver= */
    ctx = test_context(3);
    assert_true(target(ctx, &why) < 0);
    assert_non_null(why);
    assert_non_null(strstr(why, "KERNTUNE_CUDA_TARGET"));
    kt_context_destroy(ctx);
    unsetenv("KERNTUNE_CUDA_TARGET");
}

int main(int argc, char **argv) {
    snprintf(artifacts, sizeof artifacts, "/tmp/kt-cuda-target-XXXXXX");
    if (mkdtemp(artifacts) == NULL) return 1;
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_build_for_absent_gpu)};
    int rc = kt_run_cases(argc, argv, tests, NULL, NULL);
    char rm[300];
    snprintf(rm, sizeof rm, "rm -rf '%s'", artifacts);
    if (system(rm) != 0) rc = rc ? rc : 1;
    return rc;
}
