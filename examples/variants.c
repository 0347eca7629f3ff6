/*
 * variants.c - one operation, a tiled matrix multiply, tuned as runtime-compiled variants on
 * every device kerntune finds: the host CPU (C, compiled by the system compiler), OpenCL
 * devices and CUDA devices. Each variant is the same kernel source compiled with other values
 * of its tile parameters; kerntune compiles them in parallel, caches the artifacts on disk
 * (a second run compiles nothing), validates each against a naive variant and keeps the
 * fastest.
 *
 * Usage: variants [N]   (matrix size, default 128, a multiple of 32)
 */
#include <kerntune.h>
#include <kerntune/decision.h>
#include <kerntune/device.h>
#include <kerntune/variants.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *c_src =
    "void matmul(const float *a, const float *b, float *c, long n) {\n"
    "    for (long i = 0; i < n * n; i++) c[i] = 0;\n"
    "    for (long i0 = 0; i0 < n; i0 += TI)\n"
    "        for (long k0 = 0; k0 < n; k0 += TK)\n"
    "            for (long i = i0; i < i0 + TI; i++)\n"
    "                for (long k = k0; k < k0 + TK; k++) {\n"
    "                    float aik = a[i * n + k];\n"
    "                    for (long j = 0; j < n; j++) c[i * n + j] += aik * b[k * n + j];\n"
    "                }\n"
    "}\n";

static const char *cl_src =
    "__kernel void matmul(__global const float *a, __global const float *b, __global float *c, long n) {\n"
    "    long col0 = get_global_id(0) * TI, row = get_global_id(1);\n"
    "    float acc[TI];\n"
    "    for (int t = 0; t < TI; t++) acc[t] = 0;\n"
    "    for (long k = 0; k < n; k++)\n"
    "        for (int t = 0; t < TI; t++) acc[t] += a[row * n + k] * b[k * n + col0 + t];\n"
    "    for (int t = 0; t < TI; t++) c[row * n + col0 + t] = acc[t];\n"
    "}\n";

static const char *cu_src =
    "__global__ void matmul(const float *a, const float *b, float *c, long n) {\n"
    "    long col0 = ((long)blockIdx.x * TK + threadIdx.x) * TI, row = blockIdx.y;\n"
    "    float acc[TI];\n"
    "    for (int t = 0; t < TI; t++) acc[t] = 0;\n"
    "    for (long k = 0; k < n; k++)\n"
    "        for (int t = 0; t < TI; t++) acc[t] += a[row * n + k] * b[k * n + col0 + t];\n"
    "    for (int t = 0; t < TI; t++) c[row * n + col0 + t] = acc[t];\n"
    "}\n";

#define TRY(call)                                                                                    \
    do {                                                                                             \
        kt_status st_ = (call);                                                                      \
        if (st_ != KT_OK) {                                                                          \
            fprintf(stderr, "variants: %s failed: %s: %s\n", #call, kt_status_name(st_), kt_last_error()); \
            return 1;                                                                                \
        }                                                                                            \
    } while (0)

/* A space of tile sizes: TI x TK on the CPU; on GPUs TI outputs per thread, TK threads per
 * group (the same two names, so one space shape serves every backend). */
static kt_space *space(const char *backend, const char *ti, const char *tk) {
    kt_space *sp = NULL;
    if (kt_space_create(&sp) || kt_space_add_input(sp, "n") || kt_space_add_param(sp, "TI", ti) ||
        kt_space_add_param(sp, "TK", tk) || kt_space_add_constraint(sp, "n % TI == 0 and (n // TI) % TK == 0"))
        return NULL;
    if (strcmp(backend, "opencl") == 0) {
        const char *global[3] = {"n // TI", "n", NULL}, *local[3] = {"TK", NULL, NULL};
        if (kt_space_set_geometry(sp, KT_GEOMETRY_GLOBAL, global, local, NULL)) return NULL;
    } else if (strcmp(backend, "cuda") == 0) {
        const char *grid[3] = {"n // TI // TK", "n", NULL}, *block[3] = {"TK", NULL, NULL};
        if (kt_space_set_geometry(sp, KT_GEOMETRY_GRID, grid, block, NULL)) return NULL;
    }
    return sp;
}

static int tune_on(kt_context *ctx, size_t dev, long n, const float *a, const float *b, const float *ref) {
    const char *backend = kt_device_backend(kt_context_device(ctx, dev));
    bool host = strcmp(backend, "c") == 0;
    const char *src = host ? c_src : strcmp(backend, "opencl") == 0 ? cl_src : cu_src;
    size_t bytes = (size_t)(n * n) * sizeof(float);
    float *c = calloc((size_t)(n * n), sizeof *c);
    void *da = (void *)a, *db = (void *)b, *dc = c;
    if (!host) {
        TRY(kt_device_alloc(ctx, dev, bytes, &da));
        TRY(kt_device_alloc(ctx, dev, bytes, &db));
        TRY(kt_device_alloc(ctx, dev, bytes, &dc));
        TRY(kt_device_write(ctx, dev, da, a, bytes));
        TRY(kt_device_write(ctx, dev, db, b, bytes));
    }
    char name[64];
    snprintf(name, sizeof name, "matmul@%zu", dev);
    kt_op *op = NULL;
    TRY(kt_op_create(ctx, name, &op));
    TRY(kt_op_set_device(op, dev));
    TRY(kt_op_add_buffer(op, "a", KT_TYPE_F32, KT_READ_ONLY));
    TRY(kt_op_add_buffer(op, "b", KT_TYPE_F32, KT_READ_ONLY));
    TRY(kt_op_add_buffer(op, "c", KT_TYPE_F32, KT_WRITE_ONLY));
    TRY(kt_op_add_scalar(op, "n", KT_TYPE_I64));
    TRY(kt_op_key_arg(op, 3, KT_BUCKET_EXACT));
    kt_space *naive = space(backend, "[1]", host ? "[1]" : "[32]");
    kt_space *tiled = host ? space(backend, "[4, 16, 32]", "[8, 32, 128]") : space(backend, "[1, 2, 4]", "[32, 64]");
    if (naive == NULL || tiled == NULL) {
        fprintf(stderr, "variants: space: %s\n", kt_last_error());
        return 1;
    }
    TRY(kt_op_add_variants(op, "naive", naive, src, "matmul", NULL, 0));
    TRY(kt_op_add_variants(op, "tiled", tiled, src, "matmul", NULL, 0));
    kt_space_destroy(naive), kt_space_destroy(tiled);
    TRY(kt_op_set_default(op, "naive")); /* the reference every variant is checked against */

    uint64_t compiles = kt_context_compile_count(ctx), hits = kt_context_artifact_hits(ctx);
    kt_arg args[] = {kt_arg_buf(da, bytes), kt_arg_buf(db, bytes), kt_arg_buf(dc, bytes), kt_arg_i64(n)};
    TRY(kt_op_call(op, args, 4));
    if (!host) TRY(kt_device_read(ctx, dev, c, dc, bytes));
    int same = memcmp(c, ref, bytes) == 0;
    const kt_decision *d = NULL;
    TRY(kt_op_decision(op, args, 4, &d));
    printf("device %zu (%s): %s\n", dev, backend, kt_device_name(kt_context_device(ctx, dev)));
    printf("  %llu variant(s) compiled, %llu found in the artifact cache (%s)\n",
           (unsigned long long)(kt_context_compile_count(ctx) - compiles),
           (unsigned long long)(kt_context_artifact_hits(ctx) - hits), kt_context_artifact_dir(ctx));
    if (kt_decision_source_of(d) == KT_SOURCE_CACHE)
        printf("  decision from the persistent cache (an earlier run): only the winner was loaded, nothing measured\n");
    for (size_t u = 0; u < kt_decision_unit_count(d); u++) {
        kt_outcome o = kt_decision_unit_outcome(d, u);
        const char *cand = kt_op_candidate_name(op, kt_decision_unit_candidate(d, u));
        if (o == KT_OUTCOME_MEASURED)
            printf("    %-6s %-12s %10.1f us%s\n", cand, kt_decision_unit_config(d, u), kt_decision_unit_time_ns(d, u) / 1e3,
                   u == kt_decision_winner_unit(d) ? "  <- winner" : "");
        else
            printf("    %-6s %-12s %13s  (outcome %d) %s\n", cand, kt_decision_unit_config(d, u), "-", (int)o,
                   kt_decision_unit_message(d, u) ? kt_decision_unit_message(d, u) : "");
    }
    printf("  validated: %s; result equals the host's: %s\n\n", kt_decision_validated(d) ? "yes" : "no", same ? "yes" : "NO");
    if (!host) {
        kt_device_free(ctx, dev, da), kt_device_free(ctx, dev, db), kt_device_free(ctx, dev, dc);
    }
    free(c);
    return same ? 0 : 1;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 128;
    if (n < 32 || n % 32 != 0 || n > 2048) {
        fprintf(stderr, "usage: variants [N]   (32 <= N <= 2048, a multiple of 32)\n");
        return 2;
    }
    float *a = malloc((size_t)(n * n) * sizeof *a), *b = malloc((size_t)(n * n) * sizeof *b),
          *ref = calloc((size_t)(n * n), sizeof *ref);
    for (long i = 0; i < n * n; i++) a[i] = (float)((i * 7) % 13) - 6, b[i] = (float)((i * 5) % 11) - 5;
    for (long i = 0; i < n; i++)
        for (long k = 0; k < n; k++)
            for (long j = 0; j < n; j++) ref[i * n + j] += a[i * n + k] * b[k * n + j];
    kt_context *ctx = NULL;
    TRY(kt_context_create(&ctx));
    printf("kerntune %s: runtime-compiled variants of a tiled matmul (n = %ld) on every device\n\n", kt_version_string(), n);
    int bad = 0;
    for (size_t dev = 0; dev < kt_context_device_count(ctx); dev++) bad |= tune_on(ctx, dev, n, a, b, ref);
    for (size_t i = 0; i < kt_context_unavailable_count(ctx); i++) printf("not here: %s\n", kt_context_unavailable(ctx, i));
    kt_context_destroy(ctx);
    free(a), free(b), free(ref);
    return bad;
}
