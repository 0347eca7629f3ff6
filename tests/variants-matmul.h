/*
 * variants-matmul.h - the tiled matrix multiply that test-variants.c and test-variants-build.c
 * tune and build on the C backend: its source (tile and unroll defines, WRONG a bug validation
 * must catch), the naive reference, the op, its space, and the inputs.
 */
#ifndef KT_TEST_VARIANTS_MATMUL_H
#define KT_TEST_VARIANTS_MATMUL_H

#include "helpers.h"

#include <kerntune/variants.h>

static char artifacts[256];

/* Tiles over i and k; UNROLL > 1 unrolls the j loop; WRONG drops the last k of each tile, a
 * bug validation must catch. */
static const char *matmul_src =
    "void matmul(const float *a, const float *b, float *c, long n) {\n"
    "    for (long i = 0; i < n * n; i++) c[i] = 0;\n"
    "    for (long i0 = 0; i0 < n; i0 += TI)\n"
    "        for (long k0 = 0; k0 < n; k0 += TK)\n"
    "            for (long i = i0; i < i0 + TI && i < n; i++)\n"
    "                for (long k = k0; k < k0 + TK - WRONG && k < n; k++) {\n"
    "                    float aik = a[i * n + k];\n"
    "                    long j = 0;\n"
    "#if UNROLL > 1\n"
    "                    for (; j + UNROLL <= n; j += UNROLL)\n"
    "                        for (int u = 0; u < UNROLL; u++) c[i * n + j + u] += aik * b[k * n + j + u];\n"
    "#endif\n"
    "                    for (; j < n; j++) c[i * n + j] += aik * b[k * n + j];\n"
    "                }\n"
    "}\n";

static int naive(const kt_arg *args, size_t nargs, void *user) {
    (void)nargs, (void)user;
    const float *a = args[0].ptr, *b = args[1].ptr;
    float *c = args[2].ptr;
    long n = (long)args[3].i;
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++) {
            float s = 0;
            for (long k = 0; k < n; k++) s += a[i * n + k] * b[k * n + j];
            c[i * n + j] = s;
        }
    return 0;
}

static kt_context *variant_context(void) {
    kt_context *ctx = test_context(3);
    ok(kt_context_set_artifact_dir(ctx, artifacts));
    return ctx;
}

static kt_op *matmul_op(kt_context *ctx, kt_space *sp, const char *src, const char *kernel) {
    kt_op *op = NULL;
    ok(kt_op_create(ctx, "matmul", &op));
    ok(kt_op_add_buffer(op, "a", KT_TYPE_F32, KT_READ_ONLY));
    ok(kt_op_add_buffer(op, "b", KT_TYPE_F32, KT_READ_ONLY));
    ok(kt_op_add_buffer(op, "c", KT_TYPE_F32, KT_WRITE_ONLY));
    ok(kt_op_add_scalar(op, "n", KT_TYPE_I64));
    ok(kt_op_key_arg(op, 3, KT_BUCKET_EXACT));
    ok(kt_op_add_native(op, "naive", naive, NULL)); /* the default: the reference */
    ok(kt_op_add_variants(op, "tiled", sp, src, kernel, (const char *const[]){"-DWRONG_DEFAULT=0"}, 1));
    return op;
}

static kt_space *matmul_space(void) {
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    ok(kt_space_add_input(sp, "n"));
    ok(kt_space_add_param(sp, "TI", "[8, 32]"));
    ok(kt_space_add_param(sp, "TK", "[16, 64]"));
    ok(kt_space_add_param(sp, "UNROLL", "[1, 4]"));
    ok(kt_space_add_derived(sp, "WRONG", "1 if UNROLL == 4 and TI == 8 else 0"));
    ok(kt_space_add_constraint(sp, "n % TI == 0"));
    return sp;
}

#define N 64

static float A[N * N], B[N * N], C[N * N], R[N * N];

static void fill(void) {
    for (int i = 0; i < N * N; i++) A[i] = (float)((i * 7) % 13) - 6, B[i] = (float)((i * 5) % 11) - 5;
    naive((kt_arg[]){kt_arg_buf(A, sizeof A), kt_arg_buf(B, sizeof B), kt_arg_buf(R, sizeof R), kt_arg_i64(N)}, 4, NULL);
}

static kt_arg *mm_args(long n) {
    static kt_arg a[4];
    a[0] = kt_arg_buf(A, (size_t)(n * n) * sizeof(float));
    a[1] = kt_arg_buf(B, (size_t)(n * n) * sizeof(float));
    a[2] = kt_arg_buf(C, (size_t)(n * n) * sizeof(float));
    a[3] = kt_arg_i64(n);
    return a;
}

#endif
