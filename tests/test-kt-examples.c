/*
 * test-kt-examples.c - the conformance suite: Kernel Tuner 1.5's own OpenCL examples
 * (../shared/kernel_tuner_examples/opencl, unchanged) tuned by `kerntune tune` through the T1
 * problems of examples/kernel_tuner/opencl, on PoCL. Each case tunes a few configurations of one
 * problem on a small part of its problem size (--problem-size: the kernels hard-code their full
 * sizes, so a smaller grid computes a corner of the same result) and checks that the kernel
 * builds as its author wrote it and that every configuration tried is valid: same output as the
 * others, nothing disqualified. The CUDA examples run on the GPU machine (scripts/gpu-check).
 */
#include "tune-cli.h"

#ifndef KT_EXAMPLE_SOURCES
#error "KT_EXAMPLE_SOURCES must name examples/kernel_tuner"
#endif
#ifndef KT_EXAMPLE_PROBLEMS
#error "KT_EXAMPLE_PROBLEMS must name the build's generated problems"
#endif

/* Tunes problem (a path) with options, expects success with `configs` configurations, every one
 * measured and valid, and returns the JSON summary. */
static json_t *tune_valid(const char *problem, const char *options, long configs) {
    char args[2048];
    snprintf(args, sizeof args, "tune '%s' --cache off --json --measure kerneltuner %s", problem, options);
    int rc = run(args);
    if (rc != 0) fail_msg("exit %d for %s\nstderr:\n%s", rc, args, err);
    json_t *j = doc();
    json_int_t n = json_integer_value(json_object_get(j, "configurations"));
    json_int_t measured = json_integer_value(json_object_get(j, "measured"));
    json_int_t failed = json_integer_value(json_object_get(j, "failed"));
    if (n != configs || measured != configs || failed != 0)
        fail_msg("%s: %lld configurations, %lld measured, %lld failed; expected %ld measured and none failed\n%s\nstderr:\n%s", problem,
                 (long long)n, (long long)measured, (long long)failed, configs, out, err);
    assert_true(json_is_true(json_object_get(j, "validated")));
    return j;
}

static json_t *tune_example(const char *name, const char *options, long configs) {
    char problem[1024];
    snprintf(problem, sizeof problem, "%s/opencl/%s.json", KT_EXAMPLE_SOURCES, name);
    return tune_valid(problem, options, configs);
}

/* The best configuration's value of parameter name. */
static long long best_value(json_t *j, const char *name) {
    json_t *v = json_object_get(json_object_get(json_object_get(j, "best"), "configuration"), name);
    if (!json_is_integer(v)) fail_msg("best configuration has no integer %s:\n%s", name, out);
    return (long long)json_integer_value(v);
}

static void test_stencil(void **state) {
    (void)state;
    json_t *j = tune_example("stencil", "--problem-size 256,64 --define block_size_x=32,64 --define block_size_y=1,2", 4);
    long long bx = best_value(j, "block_size_x"), by = best_value(j, "block_size_y");
    assert_true((bx == 32 || bx == 64) && (by == 1 || by == 2));
    json_decref(j);
}

static void test_convolution(void **state) {
    (void)state;
    json_decref(tune_example("convolution",
                             "--problem-size 64,64 --define block_size_x=16 --define block_size_y=4 --define tile_size_x=1 "
                             "--define tile_size_y=1,2",
                             2));
}

/* sepconv.py tunes convolution.cl over filter sizes too; a filter size changes what the kernel
 * computes, so each run fixes one (as tests and benchmarks do). */
static void test_sepconv_row(void **state) {
    (void)state;
    json_decref(tune_example("sepconv_row",
                             "--problem-size 64,64 --define filter_width=5 --define block_size_x=16,32 --define block_size_y=2 "
                             "--define tile_size_x=1 --define tile_size_y=1 --define use_padding=0 --define read_only=0",
                             2));
}

static void test_sepconv_col(void **state) {
    (void)state;
    json_decref(tune_example("sepconv_col",
                             "--problem-size 64,64 --define filter_height=7 --define block_size_x=16 --define block_size_y=2,4 "
                             "--define tile_size_x=1 --define tile_size_y=1 --define use_padding=1 --define read_only=0",
                             2));
}

/* The restriction block_size_x == block_size_y * tile_size_y leaves two of these four. */
static void test_matmul(void **state) {
    (void)state;
    json_t *j = tune_example("matmul", "--problem-size 64,64 --define block_size_x=16 --define block_size_y=4,16 --define tile_size_x=1 "
                             "--define tile_size_y=1,4", 2);
    long long by = best_value(j, "block_size_y"), ty = best_value(j, "tile_size_y");
    assert_int_equal(by * ty, 16);
    json_decref(j);
}

/* reduction.py verifies the sum of the partial sums (one per block, num_blocks of them): the
 * problem compares sum_global as a sum (x-kerntune Compare). loop_unroll_factor 0 makes
 * `#pragma unroll 0`, which PoCL's compiler refuses, as it does under Kernel Tuner. */
static void test_reduction(void **state) {
    (void)state;
    json_t *j = tune_example("reduction",
                             "--define block_size_x=32 --define vector=1,4 --define num_blocks=32,64 --define loop_unroll_factor=8", 4);
    json_decref(j);
}

/* vector_add's kernel is the string in vector_add.py, written out by the build. */
static void test_vector_add(void **state) {
    (void)state;
    char problem[1024];
    snprintf(problem, sizeof problem, "%s/opencl/vector_add.json", KT_EXAMPLE_PROBLEMS);
    json_decref(tune_valid(problem, "--problem-size 12288 --define block_size_x=128,192,256", 3));
}

/* A LocalSize that names block_size_x when no parameter has that name (benchmark_hub's gemm
 * problem does) launches Kernel Tuner's default block, 256 wide, which the contract defines
 * too: every work-item writes its block's width and block_size_x, checked against the
 * problem's expected contents. */
static void test_default_block(void **state) {
    (void)state;
    make_tmpdir();
    char kernel[600], problem[600];
    snprintf(kernel, sizeof kernel, "%s/block.cl", tmpdir);
    write_file(kernel, "__kernel void block(__global int *out) {\n"
                       "    out[get_global_id(0)] = (int)get_local_size(0) * 1000 + block_size_x + P - P;\n"
                       "}\n");
    snprintf(problem, sizeof problem, "%s/block.json", tmpdir);
    write_file(problem,
               "{\"ConfigurationSpace\": {\"TuningParameters\": [{\"Name\": \"P\", \"Type\": \"int\", \"Values\": \"[1, 2]\"}]},\n"
               " \"KernelSpecification\": {\"Language\": \"OpenCL\", \"KernelName\": \"block\", \"KernelFile\": \"block.cl\",\n"
               "  \"GlobalSizeType\": \"OpenCL\", \"GlobalSize\": {\"X\": \"512\"}, \"LocalSize\": {\"X\": \"block_size_x\"},\n"
               "  \"Arguments\": [{\"Name\": \"out\", \"Type\": \"int32\", \"MemoryType\": \"Vector\", \"AccessType\": \"WriteOnly\",\n"
               "                  \"Size\": 512, \"FillType\": \"Constant\", \"FillValue\": 0}],\n"
               "  \"ReferenceArguments\": [{\"Name\": \"expected\", \"TargetName\": \"out\", \"FillType\": \"Constant\",\n"
               "                           \"FillValue\": 256256}]}}\n");
    json_t *j = tune_valid(problem, "", 2);
    json_t *block = json_object_get(json_object_get(json_object_get(j, "best"), "geometry"), "block");
    assert_int_equal(json_integer_value(json_array_get(block, 0)), 256);
    json_decref(j);
    remove_tmpdir();
}

/* The CUDA problems run on the GPU machine (scripts/gpu-check); here each is read, its Values
 * and Conditions evaluated into the space Kernel Tuner's Python makes of them (the counts are
 * Python's: itertools.product of the eval'd Values, filtered by the eval'd Conditions), and its
 * arguments sized, with a replay of no recorded results (so none is measured: exit 1). The
 * convolution's filter sizes are fixed to 15 x 15, as gpu-check tunes it: its whole space of
 * 2,359,296 (256 filter shapes of 9,216) takes half a minute to enumerate here. */
static void test_cuda_problems_read(void **state) {
    (void)state;
    make_tmpdir();
    char empty[600];
    snprintf(empty, sizeof empty, "%s/none.json", tmpdir);
    write_file(empty, "{\"results\": []}\n");
    static const struct {
        const char *name;
        long long configurations;
        const char *defines;
    } cases[] = {{"convolution", 9216, "--define filter_width=15 --define filter_height=15"},
                 {"matmul", 44, ""},
                 {"pnpoly", 5456, ""},
                 {"reduction", 2376, ""},
                 {"vector_add", 15, ""}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char problem[1024], args[2048];
        if (strcmp(cases[i].name, "vector_add") == 0) snprintf(problem, sizeof problem, "%s/cuda/vector_add.json", KT_EXAMPLE_PROBLEMS);
        else snprintf(problem, sizeof problem, "%s/cuda/%s.json", KT_EXAMPLE_SOURCES, cases[i].name);
        snprintf(args, sizeof args, "tune '%s' --simulate '%s' --budget 1 --json %s", problem, empty, cases[i].defines);
        int rc = run(args);
        json_t *j = doc();
        const char *why = json_string_value(json_object_get(j, "error"));
        if (rc != 1 || why) fail_msg("%s: exit %d: %s", cases[i].name, rc, why ? why : err);
        if (json_integer_value(json_object_get(j, "configurations")) != cases[i].configurations)
            fail_msg("%s: %lld configurations, expected %lld", cases[i].name,
                     (long long)json_integer_value(json_object_get(j, "configurations")), cases[i].configurations);
        json_decref(j);
    }
    remove_tmpdir();
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stencil),     cmocka_unit_test(test_convolution), cmocka_unit_test(test_sepconv_row),
        cmocka_unit_test(test_sepconv_col), cmocka_unit_test(test_matmul),      cmocka_unit_test(test_reduction),
        cmocka_unit_test(test_vector_add),  cmocka_unit_test(test_default_block), cmocka_unit_test(test_cuda_problems_read),
    };
    return kt_run_cases(argc, argv, tests, NULL, NULL);
}
