/*
 * compile.c - compile throughput: N distinct variants of a kernel built one at a time, then on
 * a thread per core, by one backend (c: processes of the system compiler; opencl: OpenCL
 * builds; cuda: NVRTC), each run into an empty artifact directory so that nothing is cached.
 * Prints a table, then RESULT lines with the speedup from parallelism.
 *
 * Usage: compile [--backend c|opencl|cuda] [--variants N] [--threads T] [--no-load]
 *   --no-load   build the artifacts only (to see which phase limits parallelism)
 */
#define _GNU_SOURCE /* mkdtemp */
#include "compile/compile.h"
#include "op/op.h"

#include <kerntune/device.h>
#include <kerntune/measure.h>
#include <kerntune/variants.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *c_src =
    "void kernel(float *restrict c, const float *restrict a, const float *restrict b, long n) {\n"
    "    for (long i = 0; i < n; i++)\n"
    "        for (long k = 0; k < n; k++) {\n"
    "            float s = a[i * n + k] * V;\n"
    "            long j = 0;\n"
    "            for (; j + UNROLL <= n; j += UNROLL)\n"
    "                for (int u = 0; u < UNROLL; u++) c[i * n + j + u] += s * b[k * n + j + u];\n"
    "            for (; j < n; j++) c[i * n + j] += s * b[k * n + j];\n"
    "        }\n"
    "}\n";
static const char *cl_src =
    "__kernel void kernel1(__global float *c, __global const float *a, __global const float *b, long n) {\n"
    "    long i = get_global_id(0);\n"
    "    float acc[UNROLL];\n"
    "    for (int u = 0; u < UNROLL; u++) acc[u] = 0;\n"
    "    for (long k = 0; k < n; k += UNROLL)\n"
    "        for (int u = 0; u < UNROLL; u++) acc[u] += a[i * n + k + u] * b[(k + u) * n + i] * V;\n"
    "    float s = 0;\n"
    "    for (int u = 0; u < UNROLL; u++) s += acc[u];\n"
    "    c[i] = s;\n"
    "}\n";
static const char *cu_src =
    "template <int U> __device__ float dot(const float *a, const float *b, long n, long i) {\n"
    "    float acc[U];\n"
    "#pragma unroll\n"
    "    for (int u = 0; u < U; u++) acc[u] = 0;\n"
    "    for (long k = 0; k < n; k += U) {\n"
    "#pragma unroll\n"
    "        for (int u = 0; u < U; u++) acc[u] += a[i * n + k + u] * b[(k + u) * n + i];\n"
    "    }\n"
    "    float s = 0;\n"
    "#pragma unroll\n"
    "    for (int u = 0; u < U; u++) s += acc[u];\n"
    "    return s * V;\n"
    "}\n"
    "__global__ void kernel1(float *c, const float *a, const float *b, long n) {\n"
    "    long i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n) c[i] = dot<UNROLL>(a, b, n, i);\n"
    "}\n";

static double now(void) { return kt_now_s(); }

static kt_status build_all(kt__artifacts *arts, kt__build *builds, size_t n);

/* Builds n variants with `threads` threads into a fresh directory; returns seconds, or -1. */
static bool no_load;

static double run(kt_context *ctx, const kt_device *dev, const char *src, const char *kernel, int n, size_t threads,
                  int base, int *failures) {
    char dir[] = "/tmp/kt-compile-bench-XXXXXX";
    if (mkdtemp(dir) == NULL) return -1;
    kt_context_set_artifact_dir(ctx, dir);
    kt_context_set_compile_threads(ctx, threads);
    const kt__backend_slot *bs = &ctx->backends[dev->slot];
    kt__build *builds = calloc((size_t)n, sizeof *builds);
    char (*defs)[2][32] = calloc((size_t)n, sizeof *defs);
    const char *(*defp)[2] = calloc((size_t)n, sizeof *defp);
    if (builds == NULL || defs == NULL || defp == NULL) {
        fprintf(stderr, "compile: out of memory for %d builds\n", n);
        free(builds);
        free(defs);
        free(defp);
        return -1;
    }
    static const kt_type types[4] = {KT_TYPE_BUFFER, KT_TYPE_BUFFER, KT_TYPE_BUFFER, KT_TYPE_I64};
    static const kt_type elems[4] = {KT_TYPE_F32, KT_TYPE_F32, KT_TYPE_F32, 0};
    static const int unrolls[] = {1, 2, 4, 8};
    for (int i = 0; i < n; i++) {
        snprintf(defs[i][0], sizeof defs[i][0], "UNROLL=%d", unrolls[i % 4]);
        snprintf(defs[i][1], sizeof defs[i][1], "V=%d.0f", base + i + 1); /* every variant, every run distinct */
        defp[i][0] = defs[i][0];
        defp[i][1] = defs[i][1];
        builds[i] = (kt__build){.backend = bs->backend, .bstate = bs->state, .device = dev->local,
                                .device_fp = dev->fingerprint,
                                .req = {.source = src, .kernel_name = kernel, .defines = defp[i], .ndefines = 2,
                                        .arg_types = types, .arg_elems = elems, .nargs = 4},
                                .no_load = no_load};
    }
    double t0 = now();
    kt_status st = build_all(&ctx->artifacts, builds, (size_t)n);
    double t = now() - t0;
    *failures = st == KT_OK ? 0 : n;
    for (int i = 0; i < n; i++) {
        if (builds[i].status != KT_OK) {
            if (*failures == 0) fprintf(stderr, "compile: variant %d: %s\n", i, builds[i].log);
            ++*failures;
        } else if (builds[i].module != NULL) {
            bs->backend->unload(bs->state, dev->local, builds[i].module);
        }
    }
    free(builds), free(defs), free(defp);
    char rm[128];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    if (system(rm) != 0) fprintf(stderr, "compile: could not remove %s\n", dir);
    return st == KT_OK ? t : -1;
}

/* A pool of arts->threads threads (0: one per core, at most 64) building the builds the way
 * tune/builder.c's threads do: each takes the next (kt__build_run_one). The variants are all
 * distinct (each defines V differently). */
typedef struct pool {
    kt__artifacts *arts;
    kt__build *builds;
    size_t n;
    _Atomic size_t next;
} pool;

static void *pool_worker(void *arg) {
    pool *p = arg;
    for (size_t i; (i = atomic_fetch_add(&p->next, 1)) < p->n;) kt__build_run_one(p->arts, &p->builds[i]);
    return NULL;
}

static kt_status build_all(kt__artifacts *arts, kt__build *builds, size_t n) {
    if (n == 0) return KT_OK;
    char compiler[1024];
    kt_status st = kt__build_begin(arts, builds[0].backend, builds[0].bstate, builds[0].device, compiler, sizeof compiler);
    if (st != KT_OK) return st;
    for (size_t i = 0; i < n; i++) kt__build_keyed(arts, compiler, &builds[i]);
    pool p = {.arts = arts, .builds = builds, .n = n};
    size_t threads = arts->threads ? arts->threads : (size_t)sysconf(_SC_NPROCESSORS_ONLN);
    if (threads < 1) threads = 1;
    if (threads > n) threads = n;
    if (threads > 64) threads = 64;
    pthread_t th[64];
    size_t started = 0;
    for (; started + 1 < threads; started++)
        if (pthread_create(&th[started], NULL, pool_worker, &p) != 0) break;
    pool_worker(&p); /* this thread works too */
    for (size_t i = 0; i < started; i++) pthread_join(th[i], NULL);
    return KT_OK;
}

int main(int argc, char **argv) {
    const char *backend = "c";
    int n = 16;
    size_t threads = (size_t)sysconf(_SC_NPROCESSORS_ONLN);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc) backend = argv[++i];
        else if (strcmp(argv[i], "--variants") == 0 && i + 1 < argc) n = atoi(argv[++i]);
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = (size_t)atoi(argv[++i]);
        else if (strcmp(argv[i], "--no-load") == 0) no_load = true;
        else {
            fprintf(stderr, "usage: compile [--backend c|opencl|cuda] [--variants N] [--threads T] [--no-load]\n");
            return 2;
        }
    }
    if (n < 1 || threads < 1 || threads > 64) {
        fprintf(stderr, "compile: --variants must be >= 1 and --threads 1..64\n");
        return 2;
    }
    setenv("POCL_KERNEL_CACHE", "0", 1); /* PoCL caches builds itself: it must not here */
    kt_context *ctx;
    if (kt_context_create(&ctx) != KT_OK) {
        fprintf(stderr, "compile: %s\n", kt_last_error());
        return 1;
    }
    const kt_device *dev = NULL;
    for (size_t i = 0; i < kt_context_device_count(ctx) && dev == NULL; i++)
        if (strcmp(kt_device_backend(kt_context_device(ctx, i)), backend) == 0) dev = kt_context_device(ctx, i);
    if (dev == NULL) {
        fprintf(stderr, "compile: no device of backend '%s'\n", backend);
        for (size_t i = 0; i < kt_context_unavailable_count(ctx); i++) fprintf(stderr, "  %s\n", kt_context_unavailable(ctx, i));
        kt_context_destroy(ctx);
        return 1;
    }
    const char *src = strcmp(backend, "c") == 0 ? c_src : strcmp(backend, "opencl") == 0 ? cl_src : cu_src;
    const char *kernel = strcmp(backend, "c") == 0 ? "kernel" : "kernel1";
    int f1 = 0, fn = 0;
    int base = (int)(time(NULL) % 100000) * 1000; /* no compiler-side cache can have seen these */
    run(ctx, dev, src, kernel, 1, 1, base, &f1); /* warm the compiler's own files (NVRTC, PoCL, cc) */
    double serial = run(ctx, dev, src, kernel, n, 1, base + 100, &f1);
    double parallel = run(ctx, dev, src, kernel, n, threads, base + 300, &fn);
    if (serial < 0 || parallel < 0 || f1 || fn) {
        fprintf(stderr, "compile: builds failed: %s\n", kt_last_error());
        kt_context_destroy(ctx);
        return 1;
    }
    printf("device: %s\n", kt_device_name(dev));
    printf("%-8s %9s %8s %12s %14s\n", "backend", "variants", "threads", "seconds", "ms/variant");
    printf("%-8s %9d %8d %12.3f %14.1f\n", backend, n, 1, serial, serial * 1e3 / n);
    printf("%-8s %9d %8zu %12.3f %14.1f\n", backend, n, threads, parallel, parallel * 1e3 / n);
    printf("RESULT compile_serial_ms_per_variant_%s %.1f ms\n", backend, serial * 1e3 / n);
    printf("RESULT compile_parallel_ms_per_variant_%s %.1f ms\n", backend, parallel * 1e3 / n);
    printf("RESULT compile_parallel_speedup_%s %.2f x\n", backend, serial / parallel);
    kt_context_destroy(ctx);
    return 0;
}
