/*
 * gemm_cuda.c - a tuned bf16 GEMM on an NVIDIA GPU, through the example op of ops/gemm.c.
 *
 * The first call of each shape bucket tunes: cuBLAS's default, cuBLASLt's top 8 algorithms and
 * the NVRTC tensor-core kernels (on Hopper wgmma fed by TMA, persistent or split-K over
 * clusters; elsewhere mma.sync with split-K and stream-K), each validated against cuBLAS; later
 * calls of the bucket go straight to the winner, queued on the caller's stream.
 * The decisions land in the persistent cache, so a second run tunes nothing.
 *
 * Usage: gemm_cuda_demo [M N K ...]   (default: 1024 1024 1024 and 64 4096 4096)
 */
#include "cuda_ops.h"

#include <kerntune.h>
#include <kerntune/decision.h>
#include <kerntune/device.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    long long dims[16][3] = {{1024, 1024, 1024}, {64, 4096, 4096}};
    int n = 2;
    if (argc > 1) {
        if ((argc - 1) % 3 != 0 || argc - 1 > 48) return fprintf(stderr, "usage: gemm_cuda_demo [M N K ...]\n"), 2;
        for (n = 0; n < (argc - 1) / 3; n++)
            for (int j = 0; j < 3; j++)
                if ((dims[n][j] = atoll(argv[1 + 3 * n + j])) <= 0)
                    return fprintf(stderr, "gemm_cuda_demo: '%s' is not a positive size\n", argv[1 + 3 * n + j]), 2;
    }
    kt_context *ctx = NULL;
    if (kt_context_create(&ctx) != KT_OK) return fprintf(stderr, "%s\n", kt_last_error()), 1;
    size_t dev = (size_t)-1;
    for (size_t i = 0; i < kt_context_device_count(ctx) && dev == (size_t)-1; i++)
        if (strcmp(kt_device_backend(kt_context_device(ctx, i)), "cuda") == 0) dev = i;
    ktops_cuda *cu = NULL;
    ktops_gemm *g = NULL;
    if (dev == (size_t)-1) {
        printf("no CUDA device here: nothing to tune\n");
        kt_context_destroy(ctx);
        return 0;
    }
    if (ktops_cuda_open(ctx, dev, &cu) != KT_OK || ktops_gemm_create(cu, ctx, dev, "gemm_bf16", NULL, &g) != KT_OK)
        return fprintf(stderr, "%s\n", ktops_last_error()), 1;
    int status = 0;
    for (int i = 0; i < n && status == 0; i++) {
        long long m = dims[i][0], nn = dims[i][1], k = dims[i][2];
        void *a = NULL, *b = NULL, *c = NULL; /* device memory; a real program fills A and B */
        kt_status st = KT_OK;
        if (kt_device_alloc(ctx, dev, (size_t)(m * k) * 2, &a) != KT_OK || kt_device_alloc(ctx, dev, (size_t)(k * nn) * 2, &b) != KT_OK ||
            kt_device_alloc(ctx, dev, (size_t)(m * nn) * 2, &c) != KT_OK)
            st = KT_ERR_NO_MEMORY;
        for (int call = 0; st == KT_OK && call < 3; call++) st = ktops_gemm_run(g, NULL, a, b, c, m, nn, k); /* default stream */
        if (st == KT_OK) st = ktops_cuda_sync(cu, NULL);
        const kt_decision *d = NULL;
        if (st == KT_OK) st = ktops_gemm_decision(g, a, b, c, m, nn, k, &d);
        if (st != KT_OK) {
            fprintf(stderr, "%lld x %lld x %lld: %s\n", m, nn, k, st == KT_ERR_NO_MEMORY ? "out of device memory" : ktops_last_error());
            status = 1;
        } else {
            size_t w = kt_decision_winner_unit(d);
            const char *cfg = kt_decision_unit_config(d, w);
            printf("%lld x %lld x %lld: %s %s (%.1f us, %s)\n", m, nn, k, kt_op_candidate_name(ktops_gemm_op(g), kt_decision_winner(d)),
                   cfg ? cfg : "", kt_decision_unit_time_ns(d, w) / 1e3,
                   kt_decision_source_of(d) == KT_SOURCE_CACHE ? "from the cache" : "tuned now");
        }
        kt_device_free(ctx, dev, a), kt_device_free(ctx, dev, b), kt_device_free(ctx, dev, c);
    }
    ktops_gemm_destroy(g);
    kt_context_destroy(ctx);
    ktops_cuda_close(cu);
    return status;
}
