/*
 * test-pp.c - the preprocessor fingerprint that keys a variant's build (src/compile/pp.c), and
 * what it buys: configurations whose preprocessed code is the same are built once, and a
 * configuration the compiler refused is not compiled again.
 *
 * The fingerprint's contract, case by case: two sets of defines get the same fingerprint only
 * when the code the compiler sees is the same; where the analysis cannot prove it, it says so
 * (false) and the build is keyed on the defines themselves. On the hub's convolution, the 4,362
 * configurations are 2,746 distinct codes (the figure of issue [12], from a real preprocessor).
 */
#include "helpers.h"

#include <kerntune/decision.h>
#include <kerntune/variants.h>

#include "compile/pp.h"

#include <jansson.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef KT_HUB
#error "KT_HUB must name ../shared/benchmark_hub"
#endif

typedef struct fp {
    uint64_t v[2];
    bool ok;
} fp;

/* The fingerprint of src with the defines given as one comma-separated text ("A=1,B=2"). */
static fp print_of(const char *src, const char *defines, const char *const *options, size_t noptions) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", defines);
    const char *defs[32];
    size_t n = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t && n < 32; t = strtok_r(NULL, ",", &save)) defs[n++] = t;
    fp f = {{0, 0}, false};
    f.ok = kt__pp_fingerprint(src, defs, n, options, noptions, f.v);
    return f;
}

static bool same(const char *src, const char *a, const char *b) {
    fp x = print_of(src, a, NULL, 0), y = print_of(src, b, NULL, 0);
    if (!x.ok || !y.ok) fail_msg("the analysis gave up on %s / %s", a, b);
    return x.v[0] == y.v[0] && x.v[1] == y.v[1];
}

static void test_unread_and_read(void **state) {
    (void)state;
    const char *src = "__global__ void k(float *x) { x[threadIdx.x] = A * 2; }\n";
    assert_true(same(src, "A=1,B=1", "A=1,B=2")); /* B is never read */
    assert_false(same(src, "A=1,B=1", "A=2,B=1"));
    /* read through a macro, and through a function-like macro's body */
    const char *via = "#define TWICE (A + A)\n#define SCALE(x) ((x) * B)\nint f(int y) { return SCALE(y) + TWICE; }\n";
    assert_false(same(via, "A=1,B=1", "A=2,B=1"));
    assert_false(same(via, "A=1,B=1", "A=1,B=2"));
    assert_true(same(via, "A=1,B=1,C=3", "A=1,B=1,C=4"));
    /* a macro that names a parameter but is never used: the parameter is not read */
    const char *unused = "#define NEVER (B * 2)\nint f(void) { return A; }\n";
    assert_true(same(unused, "A=1,B=1", "A=1,B=2"));
}

/* Integer suffixes in #if, in either order ("lu" as well as "ul"): "1lu" used to loop forever
 * (fuzz-pp found it; tests/data/fuzz/pp/). A macro that doubles at every level gives up rather
 * than expand 2^60 tokens. */
static void test_if_numbers(void **state) {
    (void)state;
    static const char *const conds[] = {"2lu > 1", "2ul > 1", "2LLU > 1", "2uLL > 1", "0x2lU > 1", "2Lu > 1"};
    for (size_t i = 0; i < sizeof conds / sizeof conds[0]; i++) {
        char src[256];
        snprintf(src, sizeof src, "#if %s\nint a = A;\n#else\nint b = B;\n#endif\n", conds[i]);
        assert_true(same(src, "A=1,B=1", "A=1,B=2"));  /* the #else is dead: B is not read */
        assert_false(same(src, "A=1,B=1", "A=2,B=1"));
    }
    char big[4096];
    size_t at = (size_t)snprintf(big, sizeof big, "#define M0 1\n");
    for (int k = 1; k <= 60; k++) at += (size_t)snprintf(big + at, sizeof big - at, "#define M%d (M%d + M%d)\n", k, k - 1, k - 1);
    snprintf(big + at, sizeof big - at, "#if M60 > 0\nint a = A;\n#endif\n");
    assert_false(print_of(big, "A=1", NULL, 0).ok); /* beyond what it proves: the defines tell configurations apart */
    /* a condition nested deeper than the stack (fuzz-pp: an ASan stack overflow): unknown, so
     * the line it guards may be compiled, and A is read */
    static char deep[300032];
    size_t k = (size_t)snprintf(deep, sizeof deep, "#if ");
    for (int i = 0; i < 100000; i++) deep[k++] = "!(-"[i % 3];
    snprintf(deep + k, sizeof deep - k, "1\nint a = A;\n#endif\n");
    fp x = print_of(deep, "A=1", NULL, 0), y = print_of(deep, "A=2", NULL, 0);
    assert_true(!x.ok || !y.ok || x.v[0] != y.v[0] || x.v[1] != y.v[1]);
}

/* A parameter read only in a branch another parameter turns off, as in the convolution. */
static void test_branches(void **state) {
    (void)state;
    const char *src = "#define USE_SHMEM use_shmem\n"
                      "#if USE_SHMEM == 1\n"
                      "#  if use_padding == 1\n#    define WIDTH (bx + 1)\n#  else\n#    define WIDTH bx\n#  endif\n"
                      "__shared__ float tile[WIDTH];\n"
                      "#elif defined(use_shmem) && use_shmem == 0\n"
                      "float direct(float *x) { return x[bx]; }\n"
                      "#endif\n";
    assert_true(same(src, "use_shmem=0,use_padding=0,bx=8", "use_shmem=0,use_padding=1,bx=8"));
    assert_false(same(src, "use_shmem=1,use_padding=0,bx=8", "use_shmem=1,use_padding=1,bx=8"));
    assert_false(same(src, "use_shmem=0,use_padding=0,bx=8", "use_shmem=0,use_padding=0,bx=16"));
    assert_false(same(src, "use_shmem=0,use_padding=0,bx=8", "use_shmem=1,use_padding=0,bx=8"));
    /* arithmetic, shifts, unsigned comparison, the conditional operator, #elif chains */
    const char *arith = "#if (N << 2) % 3 == 1 && -1 < 0 && !(-1 > 0u ? 0 : 1) && (N > 4 ? 1 : 0)\nint yes;\n"
                        "#elif N == 2\nint two;\n#else\nint no;\n#endif\n";
    /* N=7: 28 % 3 == 1, -1 < 0, -1 > 0u is true (unsigned), N > 4: "yes"; N=13 the same */
    assert_true(same(arith, "N=7", "N=13"));
    assert_false(same(arith, "N=7", "N=2"));
    assert_true(same(arith, "N=3", "N=5")); /* 12 % 3 == 0 and 20 % 3 == 2: both "no" */
    /* a name nobody defined, before any header: not defined, as the compiler sees it */
    const char *guard = "#ifndef block_size_z\n#define block_size_z 1\n#endif\nint z = block_size_z;\nint x = X;\n";
    assert_true(same(guard, "X=1,Y=1", "X=1,Y=2"));
    assert_false(same(guard, "X=1,block_size_z=2", "X=1,block_size_z=4"));
}

/* Names the compiler or an unreadable header may define: both branches count. */
static void test_unknowns(void **state) {
    (void)state;
    const char *arch = "#ifdef __CUDA_ARCH__\nint fast = P;\n#else\nint slow;\n#endif\nint q;\n";
    assert_false(same(arch, "P=1", "P=2")); /* P may be read: it is, on the device */
    const char *cond = "#if __CUDA_ARCH__ >= 800 && P > 2\nint big;\n#endif\n";
    assert_false(same(cond, "P=3", "P=4")); /* the condition reads P: hashed with it */
    assert_true(same(cond, "P=3,Q=1", "P=3,Q=2"));
    /* after a system header, a lower-case guard is unknown too: the header may have defined
     * tile, so tile is ambiguous: T's default or the header's; a condition on it is undecided */
    const char *amb = "#include <cuda_fp16.h>\n#ifndef tile\n#define tile T\n#endif\nint t = tile;\n"
                      "#if tile > 2\nint big = U;\n#endif\n";
    assert_false(same(amb, "T=1,U=1,V=1", "T=2,U=1,V=1"));
    assert_false(same(amb, "T=1,U=1,V=1", "T=1,U=2,V=1"));
    assert_true(same(amb, "T=1,U=1,V=1", "T=1,U=1,V=2"));
    /* an #undef in an undecided branch: defined or not afterwards */
    const char *undef_maybe = "#define W V\n#ifdef __CUDA_ARCH__\n#undef W\n#endif\n#ifdef W\nint w = U;\n#endif\n";
    assert_false(same(undef_maybe, "U=1,V=1", "U=2,V=1"));
    /* what the analysis cannot prove */
    assert_false(print_of("#define CAT(a, b) a##b\nint v = CAT(A, B);\n", "A=1", NULL, 0).ok);
    assert_true(print_of("#define CAT(a, b) a##b\nint v = A;\n", "A=1", NULL, 0).ok); /* never used */
    assert_false(print_of("#include \"nowhere.h\"\nint v = A;\n", "A=1", NULL, 0).ok);
    assert_false(print_of("#define H \"x.h\"\n#include H\n", "A=1", NULL, 0).ok);
    assert_false(print_of("int v = __COUNTER__ + A;\n", "A=1", NULL, 0).ok);
    assert_false(print_of("const char *s = R\"(A)\";\n", "A=1", NULL, 0).ok);
    assert_false(print_of("#if 1\nint v;\n", "A=1", NULL, 0).ok); /* unbalanced */
    const char *const undef[] = {"-UA"}, *const clash[] = {"-DA=3"}, *const other[] = {"-DFAST", "-O3"};
    assert_false(print_of("int v = A;\n", "A=1", undef, 1).ok);
    assert_false(print_of("int v = A;\n", "A=1", clash, 1).ok);
    assert_true(print_of("int v = A;\n", "A=1", other, 2).ok);
    /* an option's define is defined, its value nobody knows: both branches count */
    const char *opt = "#ifdef FAST\nint f = A;\n#endif\n";
    fp x = print_of(opt, "A=1", other, 2), y = print_of(opt, "A=2", other, 2);
    assert_true(x.ok && y.ok);
    assert_false(x.v[0] == y.v[0] && x.v[1] == y.v[1]);
    /* comments, splices and strings do not hide or invent names */
    const char *text = "int a = /* B */ A; // B\nconst char *s = \"B // \\\" B\";\n#define LONG A + \\\n  C\nint l = LONG;\n";
    assert_true(same(text, "A=1,B=1,C=1", "A=1,B=2,C=1"));
    assert_false(same(text, "A=1,B=1,C=1", "A=1,B=1,C=2"));
}

/* Quoted includes are read from the -I directories; what they read counts. */
static void test_includes(void **state) {
    (void)state;
    char dir[] = "/tmp/kt-pp-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/tile.h", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("#ifndef TILE_H\n#define TILE_H\n#define TILE (T * 2)\n#endif\n", f);
    fclose(f);
    char opt[300];
    snprintf(opt, sizeof opt, "-I%s", dir);
    const char *const opts[] = {opt};
    const char *src = "#include \"tile.h\"\n#include \"tile.h\"\nint t = TILE;\n";
    fp a = print_of(src, "T=1,U=1", opts, 1), b = print_of(src, "T=1,U=2", opts, 1), c = print_of(src, "T=2,U=1", opts, 1);
    assert_true(a.ok && b.ok && c.ok);
    assert_true(a.v[0] == b.v[0] && a.v[1] == b.v[1]);
    assert_false(a.v[0] == c.v[0] && a.v[1] == c.v[1]);
    unlink(path);
    rmdir(dir);
}

/* The hub's convolution: 4,362 configurations, 2,746 distinct codes. */
static void test_hub_convolution(void **state) {
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/kernels/convolution_milo.json", KT_HUB);
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    assert_non_null(root);
    json_t *cs = json_object_get(root, "ConfigurationSpace"), *p;
    size_t i;
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    json_array_foreach(json_object_get(cs, "TuningParameters"), i, p)
        ok(kt_space_add_param(sp, json_string_value(json_object_get(p, "Name")), json_string_value(json_object_get(p, "Values"))));
    json_array_foreach(json_object_get(cs, "Conditions"), i, p)
        ok(kt_space_add_constraint(sp, json_string_value(json_object_get(p, "Expression"))));
    json_decref(root);
    size_t n = 0;
    ok(kt_space_enumerate(sp, &n));
    assert_int_equal(n, 4362);
    snprintf(path, sizeof path, "%s/kernels/convolution_milo.cu", KT_HUB);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *src = calloc(1, 1 << 20);
    size_t len = fread(src, 1, (1 << 20) - 1, f);
    fclose(f);
    assert_true(len > 0);
    uint64_t(*v)[2] = calloc(n, sizeof *v);
    size_t distinct = 0;
    for (size_t c = 0; c < n; c++) {
        char text[1024];
        ok(kt_space_config_format(sp, c, text, sizeof text));
        const char *defs[16];
        size_t nd = 0;
        char *save = NULL;
        for (char *t = strtok_r(text, ",", &save); t && nd < 16; t = strtok_r(NULL, ",", &save)) defs[nd++] = t;
        assert_true(kt__pp_fingerprint(src, defs, nd, NULL, 0, v[c]));
        size_t j = 0;
        while (j < c && (v[j][0] != v[c][0] || v[j][1] != v[c][1])) j++;
        distinct += j == c;
    }
    assert_int_equal(distinct, 2746);
    free(v);
    free(src);
    kt_space_destroy(sp);
}

/* ---- in a tuning: real C variants ---------------------------------------------------------- */

static char artifacts[] = "/tmp/kt-pp-art-XXXXXX";

/* 4 x 4 configurations; the code reads X, and Y only when X == 3: 3 + 4 = 7 distinct codes.
 * X == 1 does not compile. Every variant writes X. */
static const char *two_src = "#include <stdint.h>\n"
                             "#if X == 1\n#error X == 1 does not compile\n#endif\n"
                             "#if X == 3\n#define EXTRA (0 * Y)\n#else\n#define EXTRA 0\n#endif\n"
                             "void two(int32_t *out, long n) { (void)n; out[0] = X + EXTRA; }\n";

static kt_op *two_op(kt_context *ctx) {
    kt_op *op = NULL;
    ok(kt_op_create(ctx, "two", &op));
    ok(kt_op_add_buffer(op, "out", KT_TYPE_I32, KT_WRITE_ONLY));
    ok(kt_op_add_scalar(op, "n", KT_TYPE_I64));
    ok(kt_op_set_validation(op, 0)); /* the variants differ on purpose */
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    ok(kt_space_add_param(sp, "X", "range(4)"));
    ok(kt_space_add_param(sp, "Y", "range(4)"));
    ok(kt_op_add_variants(op, "two", sp, two_src, "two", NULL, 0));
    kt_space_destroy(sp);
    return op;
}

static void test_tuning_builds_distinct_codes(void **state) {
    (void)state;
    assert_non_null(mkdtemp(artifacts));
    for (int round = 0; round < 2; round++) {
        kt_context *ctx = test_context(2);
        ok(kt_context_set_artifact_dir(ctx, artifacts));
        kt_op *op = two_op(ctx);
        int32_t out[1] = {0};
        kt_arg args[] = {kt_arg_buf(out, sizeof out), kt_arg_i64(1)};
        ok(kt_op_tune(op, args, 2));
        const kt_decision *d = NULL;
        ok(kt_op_decision(op, args, 2, &d));
        size_t failed = 0, runnable = 0;
        for (size_t u = 0; u < kt_decision_unit_count(d); u++) {
            failed += kt_decision_unit_outcome(d, u) == KT_OUTCOME_BUILD_FAILED;
            runnable += kt_decision_unit_outcome(d, u) == KT_OUTCOME_MEASURED;
        }
        assert_int_equal(failed, 4);    /* X == 1, every Y */
        assert_int_equal(runnable, 12); /* the others all ran, sharing 6 artifacts */
        if (round == 0) { /* 7 distinct codes (one of them refused), each compiled once */
            assert_int_equal(kt_context_compile_count(ctx), 7);
        } else { /* a second process compiles nothing: the refused code's failure is kept too */
            assert_int_equal(kt_context_compile_count(ctx), 0);
            assert_int_equal(kt_context_artifact_hits(ctx), 7);
        }
        ok(kt_op_call(op, args, 2));
        kt_context_destroy(ctx);
    }
    /* the kept failure holds the compiler's message */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "grep -l 'does not compile' %s/*.failed | wc -l", artifacts);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    int files = 0;
    assert_int_equal(fscanf(p, "%d", &files), 1);
    pclose(p);
    assert_int_equal(files, 1);
    snprintf(cmd, sizeof cmd, "rm -rf %s", artifacts);
    assert_int_equal(system(cmd), 0);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unread_and_read),    cmocka_unit_test(test_branches),
        cmocka_unit_test(test_if_numbers),
        cmocka_unit_test(test_unknowns),           cmocka_unit_test(test_includes),
        cmocka_unit_test(test_hub_convolution),    cmocka_unit_test(test_tuning_builds_distinct_codes),
    };
    return kt_run_cases(argc, argv, tests, NULL, NULL);
}
