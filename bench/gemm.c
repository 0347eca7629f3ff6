/*
 * gemm.c - kerntune's tuned GEMM (ops/gemm.c) side by side with cuBLAS's default and with
 * Triton's autotuned matmul, on one GPU, in one run (issue [11]).
 *
 * For each shape (M, N, K) (bf16 in, fp32 accumulate, bf16 out, row-major):
 *   - tunes kerntune's op (wall time of its first call, with a fresh artifact directory, so the
 *     first shape's time includes compiling every kernel configuration);
 *   - times cuBLAS's default (cublasGemmEx), cuBLASLt's own first pick and kerntune's hit the
 *     same way, alternating their order: about 2 ms of calls per sample, each call timed alone by
 *     CUDA events after an L2 flush (the state kerntune tunes in, and Triton's do_bench times
 *     in), the median of the rounds; --warm times bursts of calls back to back instead, and
 *     tunes without flushing (KT_FLUSH_OFF), so that both see the same cache;
 *   - measures the host time of one call: kerntune's hit against cublasGemmEx called directly;
 * then runs bench/triton_gemm.py on the same shapes (when Python can import triton), with a
 * fresh Triton cache, and prints the table and RESULT lines.
 *
 * Usage: gemm [--quick] [--rounds R] [--top-k K] [--max-runs N (the race's cap, default 15)] [--isolation auto|on|off] [--warm]
 *             [--units N (print each shape's N fastest units as tuning measured them)]
 *             [--sequence N (first time cuBLAS N times alone, then alternating with cuBLASLt's pick, printing each)]
 *             [--vendor-only (no kernels)] [--skinny (the skinny kernel too, ops/gemm_skinny.cu)]
 *             [--no-triton] [--python PATH] [--script PATH]
 *             [--shape M,N,K ...]
 */
#define _GNU_SOURCE /* mkdtemp, setenv */
#include "cuda_ops.h"

#include <kerntune.h>
#include <kerntune/cache.h>
#include <kerntune/decision.h>
#include <kerntune/device.h>
#include <kerntune/measure.h>
#include <kerntune/variants.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { MAX_SHAPES = 32, NGROUPS = 8 };

static const int64_t issue_shapes[][3] = {
    {4096, 4096, 4096}, {8192, 8192, 8192}, {2048, 2048, 2048}, {1024, 1024, 1024}, {512, 512, 512},
    {16, 4096, 4096},   {64, 4096, 4096},   {128, 8192, 8192},  {4096, 4096, 128},  {8192, 8192, 256},
    {1024, 16384, 1024}, {16384, 1024, 1024}, {2048, 8192, 1536},
};

typedef struct row {
    int64_t m, n, k;
    double tune_s, cublas_tf, lt_tf, kt_tf, triton_tf, triton_tune_s, torch_tf;
    double kt_host_us, cublas_host_us;
    char winner[160], triton_cfg[96];
    double group_us[NGROUPS]; /* tuning's best time of each group of group_names */
} row;

static const char *const group_names[NGROUPS] = {"cublas", "cublaslt", "wgmma", "wgmma-splitk", "skinny", "mma", "mma-splitk", "mma-streamk"};

/* Which group of group_names candidate name belongs to (-1: none). */
static int group_of(const char *name) {
    if (strncmp(name, "cublaslt-", 9) == 0) return 1;
    for (int i = 0; i < NGROUPS; i++)
        if (i != 1 && strcmp(name, group_names[i]) == 0) return i;
    return -1;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* 1: every timed call follows an L2 flush (ktops_cuda_time_cold); 0 (--warm): bursts back to back */
static int cold = 1;

/* --units N: after tuning a shape, print its N fastest units as tuning measured them */
static int show_units = 0;

/* --sequence N: before tuning a shape, time cuBLAS's default N times alone, then N times
 * alternating with cuBLASLt's own pick, each call after a flush, and print the times in order
 * (how steady one timed call is) */
static int sequence = 0;

static void print_units(const kt_decision *d, kt_op *op, int n) {
    size_t count = kt_decision_unit_count(d);
    char *done = calloc(count ? count : 1, 1);
    for (int k = 0; done && k < n; k++) {
        long best = -1;
        for (size_t u = 0; u < count; u++)
            if (!done[u] && kt_decision_unit_outcome(d, u) == KT_OUTCOME_MEASURED &&
                (best < 0 || kt_decision_unit_time_ns(d, u) < kt_decision_unit_time_ns(d, (size_t)best)))
                best = (long)u;
        if (best < 0) break;
        done[best] = 1;
        const double *t = NULL;
        size_t nt = 0;
        kt_decision_unit_runtimes(d, (size_t)best, &t, &nt);
        printf("          %8.1f us [%6.1f, %6.1f] %2u runs%s %s %s:", kt_decision_unit_time_ns(d, (size_t)best) / 1e3,
               kt_decision_unit_ci_low_ns(d, (size_t)best) / 1e3, kt_decision_unit_ci_high_ns(d, (size_t)best) / 1e3,
               kt_decision_unit_runs(d, (size_t)best), kt_decision_unit_finalist(d, (size_t)best) ? " finalist" : "",
               kt_op_candidate_name(op, kt_decision_unit_candidate(d, (size_t)best)),
               kt_decision_unit_config(d, (size_t)best) ? kt_decision_unit_config(d, (size_t)best) : "");
        for (size_t i = 0; i < nt && i < 12; i++) printf(" %.1f", t[i] / 1e3);
        printf("\n");
    }
    free(done);
}

/* What one timed burst calls. */
typedef struct job {
    ktops_gemm *g;
    int which; /* 0 cuBLAS's default, 1 cuBLASLt's first pick, 2 kerntune */
    const void *a, *b;
    void *c;
    int64_t m, n, k;
} job;

static int enqueue(void *user, kt_queue stream) {
    job *j = user;
    kt_status st = j->which == 0   ? ktops_gemm_cublas(j->g, stream, j->a, j->b, j->c, j->m, j->n, j->k)
                   : j->which == 1 ? ktops_gemm_cublaslt(j->g, stream, 0, j->a, j->b, j->c, j->m, j->n, j->k)
                                   : ktops_gemm_run(j->g, stream, j->a, j->b, j->c, j->m, j->n, j->k);
    return st != KT_OK;
}

static uint64_t rng = 0x9E3779B97F4A7C15u;

static uint16_t random_bf16(void) { /* uniform in [-1, 1), rounded to bf16 */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    float f = (float)(rng >> 40) / (float)(1u << 24) * 2.0f - 1.0f;
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

static int bench_shape(ktops_cuda *cu, kt_context *ctx, size_t dev, ktops_gemm *g, kt_queue stream, row *r, int rounds) {
    int64_t m = r->m, n = r->n, k = r->k;
    size_t ab = (size_t)(m * k) * 2, bb = (size_t)(k * n) * 2, cb = (size_t)(m * n) * 2;
    uint16_t *host = malloc(ab > bb ? ab : bb);
    void *da = NULL, *db = NULL, *dc = NULL;
    int ok = host && kt_device_alloc(ctx, dev, ab, &da) == KT_OK && kt_device_alloc(ctx, dev, bb, &db) == KT_OK &&
             kt_device_alloc(ctx, dev, cb, &dc) == KT_OK;
    if (ok) {
        for (size_t i = 0; i < ab / 2; i++) host[i] = random_bf16();
        ok = kt_device_write(ctx, dev, da, host, ab) == KT_OK;
        for (size_t i = 0; ok && i < bb / 2; i++) host[i] = random_bf16();
        ok = ok && kt_device_write(ctx, dev, db, host, bb) == KT_OK;
    }
    free(host);
    if (!ok) {
        fprintf(stderr, "gemm: %lld x %lld x %lld: device memory: %s\n", (long long)m, (long long)n, (long long)k, kt_last_error());
        return 0;
    }
    if (sequence > 0) { /* alone, then alternating with cuBLASLt's own pick */
        job cj = {g, 0, da, db, dc, m, n, k}, lj = {g, 1, da, db, dc, m, n, k};
        for (int alt = 0; alt < 2; alt++) {
            printf("        cuBLAS%s, each call after a flush (us):", alt ? " alternating with cuBLASLt's pick" : " alone");
            for (int i = 0; i < sequence; i++) {
                double ms = 0, ms2 = 0;
                if (ktops_cuda_time_cold(cu, stream, enqueue, &cj, 1, &ms) != KT_OK) break;
                if (alt && ktops_cuda_time_cold(cu, stream, enqueue, &lj, 1, &ms2) != KT_OK) break;
                printf(alt ? " %.1f/%.1f" : " %.1f", ms * 1e3, ms2 * 1e3);
            }
            printf("\n");
        }
    }
    double t0 = now_s();
    kt_status st = ktops_gemm_run(g, stream, da, db, dc, m, n, k);
    if (st == KT_OK) st = ktops_cuda_sync(cu, stream);
    r->tune_s = now_s() - t0;
    const kt_decision *d = NULL;
    if (st == KT_OK) st = ktops_gemm_decision(g, da, db, dc, m, n, k, &d);
    if (st != KT_OK) {
        fprintf(stderr, "gemm: %lld x %lld x %lld: %s\n", (long long)m, (long long)n, (long long)k, ktops_last_error());
        ok = 0;
    } else {
        for (int i = 0; i < NGROUPS; i++) r->group_us[i] = INFINITY;
        for (size_t u = 0; u < kt_decision_unit_count(d); u++) {
            int gi = group_of(kt_op_candidate_name(ktops_gemm_op(g), kt_decision_unit_candidate(d, u)));
            if (gi >= 0 && kt_decision_unit_outcome(d, u) == KT_OUTCOME_MEASURED)
                r->group_us[gi] = fmin(r->group_us[gi], kt_decision_unit_time_ns(d, u) * 1e-3);
        }
        if (show_units > 0) print_units(d, ktops_gemm_op(g), show_units);
        size_t w = kt_decision_winner_unit(d);
        const char *cfg = kt_decision_unit_config(d, w);
        snprintf(r->winner, sizeof r->winner, "%s%s%s", kt_op_candidate_name(ktops_gemm_op(g), kt_decision_unit_candidate(d, w)),
                 cfg && *cfg ? " " : "", cfg ? cfg : "");
    }
    /* device time, side by side */
    double flops = 2.0 * (double)m * (double)n * (double)k;
    job jobs[3];
    for (int w = 0; w < 3; w++) jobs[w] = (job){g, w, da, db, dc, m, n, k};
    double one = 0;
    kt_status (*timed)(ktops_cuda *, kt_queue, int (*)(void *, kt_queue), void *, int, double *) =
        cold ? ktops_cuda_time_cold : ktops_cuda_time;
    if (ok && timed(cu, stream, enqueue, &jobs[0], 3, &one) != KT_OK) ok = 0;
    int calls = one > 0 ? (int)(2.0 / one) : 100;
    calls = calls < 3 ? 3 : calls > (cold ? 100 : 500) ? (cold ? 100 : 500) : calls;
    double ms[3][64];
    for (int i = 0; ok && i < rounds; i++)
        for (int s = 0; ok && s < 3; s++) {
            int w = (s + i) % 3; /* each round starts with another */
            if (timed(cu, stream, enqueue, &jobs[w], calls, &ms[w][i]) != KT_OK) {
                fprintf(stderr, "gemm: timing: %s\n", ktops_last_error());
                ok = 0;
            }
        }
    if (ok) {
        r->cublas_tf = flops / median(ms[0], rounds) / 1e9;
        r->lt_tf = flops / median(ms[1], rounds) / 1e9;
        r->kt_tf = flops / median(ms[2], rounds) / 1e9;
    }
    /* host time of one call, the queue kept from filling: 20 calls, then wait */
    double hosts[2][16];
    for (int i = 0; ok && i < 16; i++)
        for (int w = 0; ok && w < 2; w++) {
            job *j = &jobs[w == 0 ? 0 : 2];
            double h0 = now_s();
            for (int c = 0; c < 20; c++) ok &= enqueue(j, stream) == 0;
            hosts[w][i] = (now_s() - h0) / 20 * 1e6;
            ok &= ktops_cuda_sync(cu, stream) == KT_OK;
        }
    if (ok) r->cublas_host_us = median(hosts[0], 16), r->kt_host_us = median(hosts[1], 16);
    kt_device_free(ctx, dev, da), kt_device_free(ctx, dev, db), kt_device_free(ctx, dev, dc);
    return ok;
}

static void run_triton(const char *python, const char *script, row *rows, int nrows, int rounds, const char *dir) {
    char cmd[4096];
    int len = snprintf(cmd, sizeof cmd, "TRITON_CACHE_DIR='%s/triton' '%s' '%s' --rounds %d", dir, python, script, rounds);
    for (int i = 0; i < nrows && len < (int)sizeof cmd - 64; i++)
        len += snprintf(cmd + len, sizeof cmd - (size_t)len, " %lld,%lld,%lld", (long long)rows[i].m, (long long)rows[i].n,
                        (long long)rows[i].k);
    FILE *p = popen(cmd, "r");
    if (p == NULL) {
        printf("Triton: could not run %s\n", cmd);
        return;
    }
    char line[512];
    while (fgets(line, sizeof line, p)) {
        long long m, n, k;
        double tf, tune;
        char cfg[96];
        if (strncmp(line, "TRITON ", 7) == 0 && sscanf(line + 7, "%lld %lld %lld %lf %lf %95s", &m, &n, &k, &tf, &tune, cfg) == 6) {
            for (int i = 0; i < nrows; i++)
                if (rows[i].m == m && rows[i].n == n && rows[i].k == k)
                    rows[i].triton_tf = tf, rows[i].triton_tune_s = tune, snprintf(rows[i].triton_cfg, sizeof rows[i].triton_cfg, "%s", cfg);
        } else if (strncmp(line, "TORCH ", 6) == 0 && sscanf(line + 6, "%lld %lld %lld %lf", &m, &n, &k, &tf) == 4) {
            for (int i = 0; i < nrows; i++)
                if (rows[i].m == m && rows[i].n == n && rows[i].k == k) rows[i].torch_tf = tf;
        } else {
            printf("triton_gemm.py: %s", line);
        }
    }
    int rc = pclose(p);
    if (rc != 0) printf("triton_gemm.py exited with status %d\n", rc);
}

static void usage(FILE *f) {
    fprintf(f, "usage: gemm [--quick] [--rounds R] [--top-k K] [--max-runs N] [--isolation auto|on|off] [--warm] [--units N]\n"
               "            [--sequence N] [--vendor-only] [--skinny]\n"
               "            [--no-triton] [--python PATH] [--script PATH] [--shape M,N,K ...]\n"
               "Tunes kerntune's GEMM (ops/gemm.c) on each shape and times it beside cuBLAS's default and Triton's\n"
               "autotuned matmul. Default shapes: the 13 of issue [11]; --quick: the first 3 and 2 skinny ones.\n"
               "--isolation: where the NVRTC kernels run while tuning (kt_op_set_isolation; default the op's own,\n"
               "off: in this process; auto: in a runner process, as kerntune runs any CUDA variant by default).\n"
               "--warm: time bursts of calls back to back and tune without flushing the L2 cache (by default each\n"
               "timed call follows a flush, as kerntune tunes and Triton's do_bench times).\n"
               "--skinny: add the skinny kernel (ops/gemm_skinny.cu, M <= 128), which the op leaves out by default.\n");
}

int main(int argc, char **argv) {
    int rounds = 9, top_k = 8, triton = 1, nrows = 0, quick = 0, max_runs = 15, vendor_only = 0, skinny = 0;
    const char *python = "python3", *script = "bench/triton_gemm.py", *isolation = NULL;
    row rows[MAX_SHAPES];
    memset(rows, 0, sizeof rows);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) return usage(stdout), 0;
        if (strcmp(a, "--quick") == 0) quick = 1;
        else if (strcmp(a, "--warm") == 0) cold = 0;
        else if (strcmp(a, "--no-triton") == 0) triton = 0;
        else if (i + 1 < argc && strcmp(a, "--rounds") == 0) rounds = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(a, "--top-k") == 0) top_k = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(a, "--max-runs") == 0) max_runs = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(a, "--units") == 0) show_units = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(a, "--sequence") == 0) sequence = atoi(argv[++i]);
        else if (strcmp(a, "--vendor-only") == 0) vendor_only = 1;
        else if (strcmp(a, "--skinny") == 0) skinny = 1;
        else if (i + 1 < argc && strcmp(a, "--isolation") == 0) isolation = argv[++i];
        else if (i + 1 < argc && strcmp(a, "--python") == 0) python = argv[++i];
        else if (i + 1 < argc && strcmp(a, "--script") == 0) script = argv[++i];
        else if (i + 1 < argc && strcmp(a, "--shape") == 0 && nrows < MAX_SHAPES) {
            long long m, n, k;
            if (sscanf(argv[++i], "%lld,%lld,%lld", &m, &n, &k) != 3 || m <= 0 || n <= 0 || k <= 0) {
                fprintf(stderr, "gemm: --shape %s: want M,N,K (positive integers)\n", argv[i]);
                return 2;
            }
            rows[nrows].m = m, rows[nrows].n = n, rows[nrows].k = k, nrows++;
        } else {
            fprintf(stderr, "gemm: unknown or incomplete argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (rounds < 1 || rounds > 64) return fprintf(stderr, "gemm: --rounds must be in 1..64\n"), 2;
    if (max_runs < 3) return fprintf(stderr, "gemm: --max-runs must be at least 3\n"), 2;
    if (top_k < 1 || top_k > 32) return fprintf(stderr, "gemm: --top-k must be in 1..32\n"), 2;
    kt_isolation iso = isolation == NULL ? KT_ISOLATE_OFF /* the op's own default (ops/cuda_ops.h) */
                       : strcmp(isolation, "auto") == 0 ? KT_ISOLATE_AUTO
                       : strcmp(isolation, "on") == 0 ? KT_ISOLATE_ON
                       : strcmp(isolation, "off") == 0 ? KT_ISOLATE_OFF
                                                       : (kt_isolation)-1;
    if ((int)iso < 0) return fprintf(stderr, "gemm: --isolation %s: want auto, on or off\n", isolation), 2;
    if (nrows == 0) {
        static const int quick_set[] = {0, 2, 4, 5, 7};
        int n = quick ? 5 : (int)(sizeof issue_shapes / sizeof issue_shapes[0]);
        for (int i = 0; i < n; i++) {
            const int64_t *s = issue_shapes[quick ? quick_set[i] : i];
            rows[nrows].m = s[0], rows[nrows].n = s[1], rows[nrows].k = s[2], nrows++;
        }
    }
    char dir[] = "/tmp/kt-bench-gemm-XXXXXX", artifacts[64];
    if (mkdtemp(dir) == NULL) return perror("mkdtemp"), 1;
    snprintf(artifacts, sizeof artifacts, "%s/artifacts", dir);
    kt_context *ctx = NULL;
    /* the race's run cap (default 100) at max_runs: a shape's 42 candidates then cost about what
     * Triton's autotuner spends on its 8 configurations (25 ms of warm-up and 100 ms of runs each) */
    if (kt_context_create(&ctx) != KT_OK || kt_context_set_cache(ctx, "off") != KT_OK ||
        kt_context_set_artifact_dir(ctx, artifacts) != KT_OK || kt_context_set_race(ctx, 0.99, 0.01, (unsigned)max_runs) != KT_OK ||
        kt_context_set_flush(ctx, cold ? KT_FLUSH_AUTO : KT_FLUSH_OFF) != KT_OK) {
        fprintf(stderr, "gemm: context: %s\n", kt_last_error());
        return 1;
    }
    size_t dev = (size_t)-1;
    for (size_t i = 0; i < kt_context_device_count(ctx) && dev == (size_t)-1; i++)
        if (strcmp(kt_device_backend(kt_context_device(ctx, i)), "cuda") == 0) dev = i;
    ktops_cuda *cu = NULL;
    ktops_gemm *g = NULL;
    kt_queue stream = NULL;
    ktops_gemm_options opt = {.cublaslt_top_k = top_k, .no_kernels = vendor_only};
    int opened = dev != (size_t)-1 && ktops_cuda_open(ctx, dev, &cu) == KT_OK;
    if (opened && skinny) /* the GPU's default family and the skinny kernel */
        opt.kernels = (ktops_cuda_compute_capability(cu) == 90 ? KTOPS_GEMM_KERNELS_WGMMA : KTOPS_GEMM_KERNELS_MMA) |
                      KTOPS_GEMM_KERNELS_SKINNY;
    if (!opened || ktops_cuda_stream_create(cu, &stream) != KT_OK ||
        ktops_gemm_create(cu, ctx, dev, "bench-gemm", &opt, &g) != KT_OK || kt_op_set_isolation(ktops_gemm_op(g), iso) != KT_OK) {
        fprintf(stderr, "gemm: needs a CUDA device with cuBLAS: %s\n", dev == (size_t)-1 ? "no CUDA device" : ktops_last_error());
        return 1;
    }
    printf("device: %s (%d SMs); %zu candidates (cuBLAS, cuBLASLt top %d, the kernel groups); race capped at %d runs; %d rounds; "
           "isolation %s; %s\n",
           kt_device_name(kt_context_device(ctx, dev)), ktops_cuda_sm_count(cu), kt_op_candidate_count(ktops_gemm_op(g)), top_k,
           max_runs, rounds, isolation ? isolation : "off (the op's default)", cold ? "each timed call after an L2 flush" : "bursts back to back (--warm)");
    int good = 1;
    for (int i = 0; i < nrows; i++) {
        good &= bench_shape(cu, ctx, dev, g, stream, &rows[i], rounds);
        printf("  %5lld x %5lld x %5lld: tuned in %.2f s, cuBLAS %.1f, cuBLASLt pick %.1f, kerntune %.1f TFLOP/s (%s)\n",
               (long long)rows[i].m, (long long)rows[i].n, (long long)rows[i].k, rows[i].tune_s, rows[i].cublas_tf, rows[i].lt_tf,
               rows[i].kt_tf, rows[i].winner);
        printf("        tuning's best of each group (us):");
        for (int j = 0; j < NGROUPS; j++)
            if (isfinite(rows[i].group_us[j])) printf(" %s %.1f", group_names[j], rows[i].group_us[j]);
        printf("\n");
        fflush(stdout);
    }
    printf("kerntune compiled %llu kernel configurations\n", (unsigned long long)kt_context_compile_count(ctx));
    ktops_gemm_destroy(g);
    ktops_cuda_stream_destroy(cu, stream);
    kt_context_destroy(ctx);
    ktops_cuda_close(cu);
    if (triton) run_triton(python, script, rows, nrows, rounds, dir);

    printf("\n| M | N | K | cuBLAS TFLOP/s | kerntune TFLOP/s | x cuBLAS | kerntune's winner | tune s | Triton TFLOP/s | Triton tune s | "
           "host us/call kerntune / cuBLAS |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
    double lg = 0, worst = 1e9, lg_tr = 0;
    int worst_i = 0, n_tr = 0, faster_tune = 0;
    double host_kt[MAX_SHAPES], host_cb[MAX_SHAPES];
    for (int i = 0; i < nrows; i++) {
        row *r = &rows[i];
        double x = r->cublas_tf > 0 ? r->kt_tf / r->cublas_tf : 0;
        lg += log(x > 0 ? x : 1e-9);
        if (x < worst) worst = x, worst_i = i;
        if (r->triton_tf > 0) {
            n_tr++, lg_tr += log(r->kt_tf / r->triton_tf);
            faster_tune += r->tune_s < r->triton_tune_s;
        }
        host_kt[i] = r->kt_host_us, host_cb[i] = r->cublas_host_us;
        printf("| %lld | %lld | %lld | %.1f | %.1f | %.3f | %s | %.2f | %.1f | %.2f | %.2f / %.2f |\n", (long long)r->m,
               (long long)r->n, (long long)r->k, r->cublas_tf, r->kt_tf, x, r->winner, r->tune_s, r->triton_tf, r->triton_tune_s,
               r->kt_host_us, r->cublas_host_us);
    }
    printf("\nRESULT gemm_geomean_speedup_vs_cublas %.3f x over %d shapes\n", exp(lg / nrows), nrows);
    printf("RESULT gemm_worst_ratio_vs_cublas %.3f x at %lld x %lld x %lld\n", worst, (long long)rows[worst_i].m,
           (long long)rows[worst_i].n, (long long)rows[worst_i].k);
    if (n_tr) {
        printf("RESULT gemm_geomean_speedup_vs_triton %.3f x over %d shapes\n", exp(lg_tr / n_tr), n_tr);
        printf("RESULT gemm_tuning_faster_than_triton %d of %d shapes\n", faster_tune, n_tr);
    } else {
        printf("RESULT gemm_triton absent (python could not import triton, or --no-triton)\n");
    }
    printf("RESULT gemm_host_us_per_call kerntune %.2f cublas %.2f (medians over shapes)\n", median(host_kt, nrows),
           median(host_cb, nrows));
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "gemm: could not remove %s\n", dir);
    return good ? 0 : 1;
}
