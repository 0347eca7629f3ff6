/*
 * test-space.c - spaces: enumeration of the shared benchmark_hub problems gives exactly the
 * configurations their exhaustive T4 runs list (count and members); derived values, inputs,
 * callbacks, geometry, whole-space sizes, comprehensions in each of them, and errors.
 */
#include "helpers.h"
#include "hub.h"

#include <kerntune/variants.h>

#include "space/space.h"

#include <jansson.h>
#include <zlib.h>

#ifndef KT_HUB
#error "KT_HUB must name ../shared/benchmark_hub"
#endif

/* Builds a space from a T1 file's ConfigurationSpace. */
static kt_space *space_from_t1(const char *path) {
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (root == NULL) fail_msg("%s:%d:%d: %s", path, jerr.line, jerr.column, jerr.text);
    json_t *cs = json_object_get(root, "ConfigurationSpace");
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(cs, "TuningParameters"), i, p) {
        ok(kt_space_add_param(sp, json_string_value(json_object_get(p, "Name")), json_string_value(json_object_get(p, "Values"))));
    }
    json_array_foreach(json_object_get(cs, "Conditions"), i, p) {
        ok(kt_space_add_constraint(sp, json_string_value(json_object_get(p, "Expression"))));
    }
    json_decref(root);
    return sp;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Enumerates kernel's space and compares with the configurations of its T4 results. */
static void check_against_t4(const char *kernel, const char *gpu, size_t expected) {
    char path[1024];
    snprintf(path, sizeof path, "%s/kernels/%s.json", KT_HUB, kernel);
    kt_space *sp = space_from_t1(path);
    size_t count = 0;
    ok(kt_space_enumerate(sp, &count));
    assert_int_equal(count, expected);

    snprintf(path, sizeof path, "%s/results/%s/%s_T4.json.gz", KT_HUB, kernel, gpu);
    json_t *t4 = load_gz_json(path);
    json_t *results = json_object_get(t4, "results");
    assert_int_equal(json_array_size(results), count);
    char **ours = calloc(count, sizeof *ours), **theirs = calloc(count, sizeof *theirs);
    for (size_t c = 0; c < count; c++) {
        char buf[1024];
        ok(kt_space_config_format(sp, c, buf, sizeof buf));
        ours[c] = strdup(buf);
        /* the T4 configuration, in the space's parameter order */
        json_t *cfg = json_object_get(json_array_get(results, c), "configuration");
        size_t k = 0;
        for (size_t p = 0; p < kt_space_param_count(sp); p++) {
            json_t *v = json_object_get(cfg, kt_space_param_name(sp, p));
            assert_non_null(v);
            k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%s=%lld", p ? "," : "", kt_space_param_name(sp, p),
                                  (long long)json_integer_value(v));
        }
        theirs[c] = strdup(buf);
    }
    qsort(ours, count, sizeof *ours, cmp_str);
    qsort(theirs, count, sizeof *theirs, cmp_str);
    for (size_t c = 0; c < count; c++) {
        if (strcmp(ours[c], theirs[c]) != 0) fail_msg("%s: configuration sets differ at %s / %s", kernel, ours[c], theirs[c]);
        free(ours[c]);
        free(theirs[c]);
    }
    free(ours);
    free(theirs);
    json_decref(t4);
    kt_space_destroy(sp);
}

static void test_convolution_matches_t4(void **state) {
    (void)state;
    check_against_t4("convolution_milo", "A4000", 4362);
    check_against_t4("convolution_milo", "W6600", 4362);
}

static void test_dedispersion_matches_t4(void **state) {
    (void)state;
    check_against_t4("dedispersion_milo", "A4000", 11130);
}

static int no_128(const kt_config *cfg, void *user) {
    (void)user;
    return kt_config_int(cfg, 0) != 128 && kt_config_string(cfg, 2) != NULL && kt_config_double(cfg, 1) > 0;
}

/* Inputs, derived values, a callback, ordering, and formatting. */
static void test_derived_inputs_callbacks(void **state) {
    (void)state;
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    ok(kt_space_add_input(sp, "K"));
    ok(kt_space_add_param(sp, "TK", "[8, 16, 32, 128]"));
    ok(kt_space_add_param(sp, "ALPHA", "[0.5, 1.0]"));
    ok(kt_space_add_param(sp, "TYPE", "['float', 'double']"));
    ok(kt_space_add_derived(sp, "EVEN_K", "K % TK == 0"));
    ok(kt_space_add_constraint(sp, "EVEN_K or TK == 8"));
    ok(kt_space_add_constraint(sp, "TYPE != 'double' or ALPHA < 1"));
    ok(kt_space_add_constraint_fn(sp, no_128, NULL));
    size_t n = 0;
    expect_status(KT_ERR_STATE, kt_space_enumerate(sp, &n));
    assert_non_null(strstr(kt_last_error(), "input 'K' is not bound"));
    ok(kt_space_bind_int(sp, "K", 48));
    ok(kt_space_enumerate(sp, &n));
    /* TK in {8, 16} (48 % 32 != 0, 128 excluded by the callback); 3 (ALPHA, TYPE) pairs each */
    assert_int_equal(n, 6);
    char buf[256];
    ok(kt_space_config_format(sp, 0, buf, sizeof buf));
    assert_string_equal(buf, "TK=8,ALPHA=0.5,TYPE=float,EVEN_K=1");
    ok(kt_space_config_format(sp, 5, buf, sizeof buf));
    assert_string_equal(buf, "TK=16,ALPHA=1.0,TYPE=float,EVEN_K=1");
    int64_t v;
    ok(kt_space_config_int(sp, 5, 0, &v));
    assert_int_equal(v, 16);
    expect_status(KT_ERR_ARG_TYPE, kt_space_config_int(sp, 5, 2, &v));
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_space_config_int(sp, 6, 0, &v));
    expect_status(KT_ERR_LIMIT, kt_space_config_format(sp, 0, buf, 10));
    ok(kt_space_bind_int(sp, "K", 40)); /* 40 % 16 != 0: TK = 8 only */
    ok(kt_space_enumerate(sp, &n));
    assert_int_equal(n, 3);
    kt_space_destroy(sp);
}

/* Geometry per configuration and sizes over the whole space. */
static void test_geometry_and_whole_space(void **state) {
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/kernels/convolution_milo.json", KT_HUB);
    kt_space *sp = space_from_t1(path);
    ok(kt_space_add_input(sp, "ProblemSize"));
    ok(kt_space_bind_ints(sp, "ProblemSize", (int64_t[]){4096, 4096}, 2));
    const char *global[3] = {"(262144 // block_size_x) // tile_size_x", "(262144 // block_size_y) // tile_size_y", NULL};
    const char *local[3] = {"block_size_x", "block_size_y", "1"};
    ok(kt_space_set_geometry(sp, KT_GEOMETRY_GRID, global, local, NULL));
    size_t n;
    ok(kt_space_enumerate(sp, &n));
    kt__value *slots = calloc(kt__space_slot_count(sp), sizeof *slots);
    kt__arena arena = {0};
    ok(kt__space_config_slots(sp, 0, slots, &arena));
    kt__geometry g;
    ok(kt__space_geometry(sp, slots, &arena, &g));
    assert_int_equal(g.kind, KT_GEOMETRY_GRID);
    assert_int_equal(g.global[0], 262144 / 16);
    assert_int_equal(g.global[1], 262144);
    assert_int_equal(g.global[2], 1);
    assert_int_equal(g.local[0], 16);
    assert_int_equal(g.shared_memory, 0);
    kt__value size;
    ok(kt__space_eval_whole(sp, "(ProblemSize[0]+max(filter_width)-1) * (ProblemSize[1]+max(filter_height)-1)", "size",
                            &arena, &size));
    assert_int_equal(size.i, (4096 + 14) * (4096 + 14));
    char defines[512];
    ok(kt__space_format_slots(sp, slots, "-D", " ", defines, sizeof defines));
    assert_string_equal(defines, "-Dblock_size_x=16 -Dblock_size_y=1 -Dtile_size_x=1 -Dtile_size_y=1 -Dread_only=0 "
                                 "-Duse_padding=0 -Duse_shmem=0 -Duse_cmem=1 -Dfilter_height=15 -Dfilter_width=15");
    kt__arena_free(&arena);
    free(slots);
    kt_space_destroy(sp);
}

/* Parameter values written as comprehensions, as T1 files write them (benchmark_hub's hotspot:
 * "[2**i for i in range(0, 6)]"), enumerate to exactly their lists. */
static void test_comprehension_values(void **state) {
    (void)state;
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    ok(kt_space_add_param(sp, "P", "[2**i for i in range(0, 6)]"));
    size_t n = 0;
    ok(kt_space_enumerate(sp, &n));
    assert_int_equal(n, 6);
    static const int64_t want[] = {1, 2, 4, 8, 16, 32};
    for (size_t c = 0; c < n; c++) {
        int64_t v = 0;
        ok(kt_space_config_int(sp, c, 0, &v));
        assert_int_equal(v, want[c]);
    }
    char buf[64];
    ok(kt_space_config_format(sp, 5, buf, sizeof buf));
    assert_string_equal(buf, "P=32");
    kt_space_destroy(sp);
}

/* "[i for i in range(1, 11)]" under constraints, a derived value and geometry that use
 * comprehensions: a loop variable named like the parameter shadows it inside its comprehension
 * only, and a launch size whose comprehension reads no per-call input still compiles to an
 * integer program, while one that reads an input is left to the interpreter. */
static void test_comprehension_constraints(void **state) {
    (void)state;
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    ok(kt_space_add_input(sp, "N"));
    ok(kt_space_add_param(sp, "i", "[i for i in range(1, 11)]"));
    /* not a multiple of 3, not a square: 2, 5, 7, 8, 10 */
    ok(kt_space_add_constraint(sp, "i % 3 != 0 and i not in [k * k for k in range(4)]"));
    /* range(i) reads the parameter, the sum its loop variable: i * (i - 1) / 2 <= 28 leaves
     * 2, 5, 7, 8; after the comprehension `i` is the parameter again */
    ok(kt_space_add_constraint(sp, "sum(i for i in range(i)) <= 28 and i > [i for i in range(2)][-1]"));
    ok(kt_space_add_derived(sp, "ODD", "len([k for k in range(i) if k % 2])"));
    const char *global[3] = {"N * len([k for k in range(i) if k % 2])", "sum(N for _ in range(i))", NULL};
    const char *local[3] = {"max(k for k in [1, i])", NULL, NULL};
    ok(kt_space_set_geometry(sp, KT_GEOMETRY_GRID, global, local, NULL));
    ok(kt_space_bind_int(sp, "N", 64));
    size_t n = 0;
    ok(kt_space_enumerate(sp, &n));
    assert_int_equal(n, 4);
    static const char *const want[] = {"i=2,ODD=1", "i=5,ODD=2", "i=7,ODD=3", "i=8,ODD=4"};
    char buf[64];
    for (size_t c = 0; c < n; c++) {
        ok(kt_space_config_format(sp, c, buf, sizeof buf));
        assert_string_equal(buf, want[c]);
    }
    size_t nslots = kt__space_slot_count(sp);
    kt__value *slots = calloc(nslots, sizeof *slots);
    int *var = calloc(nslots, sizeof *var);
    assert_non_null(slots);
    assert_non_null(var);
    kt__arena arena = {0};
    ok(kt__space_config_slots(sp, 2, slots, &arena)); /* i = 7 */
    kt__geometry g;
    ok(kt__space_geometry(sp, slots, &arena, &g));
    assert_int_equal(g.global[0], 64 * 3);
    assert_int_equal(g.global[1], 64 * 7);
    assert_int_equal(g.global[2], 1);
    assert_int_equal(g.local[0], 7);
    for (size_t s = 0; s < nslots; s++) var[s] = -1;
    var[kt__space_input_slot(sp, 0)] = 0; /* N, given per call */
    kt__iprog prog;
    int64_t in[1] = {1000}, size = 0;
    assert_true(kt__space_global_compile(sp, 0, slots, var, &prog));
    assert_true(kt__iprog_run(&prog, in, &size));
    assert_int_equal(size, 1000 * 3);
    assert_false(kt__space_global_compile(sp, 1, slots, var, &prog));
    kt__arena_free(&arena);
    free(var);
    free(slots);
    kt_space_destroy(sp);
}

static void test_space_errors(void **state) {
    (void)state;
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    ok(kt_space_add_param(sp, "a", "range(1, 4)"));
    expect_status(KT_ERR_DUPLICATE, kt_space_add_param(sp, "a", "[1]"));
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_space_add_param(sp, "b", "[]"));
    assert_non_null(strstr(kt_last_error(), "empty list"));
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_space_add_param(sp, "b", "5"));
    assert_non_null(strstr(kt_last_error(), "is not a list"));
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_space_add_param(sp, "b", "[[1]]"));
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_space_add_param(sp, "2b", "[1]"));
    assert_non_null(strstr(kt_last_error(), "is not a valid name"));
    /* two values that give one define would be one configuration measured twice */
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_space_add_param(sp, "d", "[1, 2, 1]"));
    assert_string_equal(kt_last_error(), "kt_space_add_param: parameter 'd': values '[1, 2, 1]' give the value 1 twice (items 0 and 2)");
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_space_add_param(sp, "d", "[True, 1]"));
    assert_non_null(strstr(kt_last_error(), "give the value 1 twice"));
    ok(kt_space_add_param(sp, "d", "['', 'a', 1, '1.5', 1.5e0 + 0.25]"));
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_space_add_constraint(sp, "a < c"));
    assert_non_null(strstr(kt_last_error(), "expression 'a < c': column 5: name 'c' is not defined"));
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_space_bind_int(sp, "a", 3));
    ok(kt_space_add_constraint(sp, "10 // (a - 2) > 0"));
    size_t n;
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_space_enumerate(sp, &n));
    assert_non_null(strstr(kt_last_error(), "integer division or modulo by zero"));
    assert_int_equal(kt_space_config_count(sp), 0);
    kt_space_destroy(sp);
    kt_space_destroy(NULL);
}

/* A message quotes what it blames whole, however long: a 3,000-character constraint that
 * divides by zero is named in full with the failing column (the CLI finds the T1 field at
 * fault by it), and a message may quote the previous one. */
static void test_long_messages_whole(void **state) {
    (void)state;
    size_t n = 1000;
    char *expr = malloc(3 * n + 32);
    assert_non_null(expr);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += (size_t)sprintf(expr + k, "1+");
    sprintf(expr + k, "TI // (TI - 4) > 0");
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    ok(kt_space_add_param(sp, "TI", "[2, 4]"));
    ok(kt_space_add_constraint(sp, expr));
    size_t count = 0;
    expect_status(KT_ERR_INVALID_ARGUMENT, kt_space_enumerate(sp, &count));
    const char *msg = kt_last_error();
    assert_true(strlen(msg) > strlen(expr));
    assert_non_null(strstr(msg, expr));
    char col[32];
    snprintf(col, sizeof col, "column %zu:", 2 * n + 4); /* the // */
    assert_non_null(strstr(msg, col));
    assert_non_null(strstr(msg, "by zero"));
    kt_space_destroy(sp);
    free(expr);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_convolution_matches_t4),   cmocka_unit_test(test_dedispersion_matches_t4),
        cmocka_unit_test(test_derived_inputs_callbacks), cmocka_unit_test(test_geometry_and_whole_space),
        cmocka_unit_test(test_comprehension_values),     cmocka_unit_test(test_comprehension_constraints),
        cmocka_unit_test(test_space_errors),
        cmocka_unit_test(test_long_messages_whole),
    };
    return kt_run_cases(argc, argv, tests, NULL, NULL);
}
