/*
 * race.c - tune-only time of the measurement policies side by side (issue [5]).
 *
 * A tiled matrix multiply over a space of tile shapes, compiled through the variants machinery
 * (C backend on the CPU, CUDA on a GPU). The artifacts are built first, so every timed tuning
 * only loads them: what is timed is validation and measurement. Each round tunes the same key
 * once per policy (race, triton, kerneltuner), each in a fresh context, and records its wall
 * time and its pick. The true best comes from a long exhaustive measurement (the fixed policy,
 * at least --long-s seconds per configuration). Then the race once more per round with every
 * variant in a runner process (isolation) against in the process. Prints a table, then RESULT
 * lines: tune time of triton and kerneltuner over race (medians over rounds), chosen/best of
 * each policy, and what isolation costs. Measured policies run in the process (isolation off)
 * so that they compare measurement alone.
 *
 * Usage: race [--backend c|cuda] [--n N] [--rounds R] [--long-s S]
 */
#define _GNU_SOURCE /* mkdtemp */
#include <kerntune.h>
#include <kerntune/cache.h>
#include <kerntune/decision.h>
#include <kerntune/device.h>
#include <kerntune/measure.h>
#include <kerntune/validation.h>
#include <kerntune/variants.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* c[i][j] = sum_k a[i][k] b[k][j], row-major; TI x TJ outputs accumulated in registers. */
static const char *c_src =
    "void matmul(const float *restrict a, const float *restrict b, float *restrict c, long n) {\n"
    "    for (long i0 = 0; i0 < n; i0 += TI)\n"
    "        for (long j0 = 0; j0 < n; j0 += TJ) {\n"
    "            float acc[TI][TJ] = {{0}};\n"
    "            for (long k = 0; k < n; k++)\n"
    "                for (int i = 0; i < TI; i++) {\n"
    "                    float av = a[(i0 + i) * n + k];\n"
    "                    for (int j = 0; j < TJ; j++) acc[i][j] += av * b[k * n + j0 + j];\n"
    "                }\n"
    "            for (int i = 0; i < TI; i++)\n"
    "                for (int j = 0; j < TJ; j++) c[(i0 + i) * n + j0 + j] = acc[i][j];\n"
    "        }\n"
    "}\n";

/* A block of BX x BY threads computes (BY*TM) x BX outputs, TM rows per thread, staging
 * BK-wide slices of a and b in shared memory. */
static const char *cu_src =
    "extern \"C\" __global__ void matmul(const float *a, const float *b, float *c, long n) {\n"
    "    __shared__ float as[BY * TM][BK];\n"
    "    __shared__ float bs[BK][BX];\n"
    "    int tx = threadIdx.x, ty = threadIdx.y, tid = ty * BX + tx;\n"
    "    long rowb = (long)blockIdx.y * BY * TM, col = (long)blockIdx.x * BX + tx;\n"
    "    float acc[TM];\n"
    "#pragma unroll\n"
    "    for (int t = 0; t < TM; t++) acc[t] = 0;\n"
    "    for (long k0 = 0; k0 < n; k0 += BK) {\n"
    "        for (int i = tid; i < BY * TM * BK; i += BX * BY) as[i / BK][i % BK] = a[(rowb + i / BK) * n + k0 + i % BK];\n"
    "        for (int i = tid; i < BK * BX; i += BX * BY) bs[i / BX][i % BX] = b[(k0 + i / BX) * n + (long)blockIdx.x * BX + i % BX];\n"
    "        __syncthreads();\n"
    "#pragma unroll\n"
    "        for (int k = 0; k < BK; k++) {\n"
    "            float bv = bs[k][tx];\n"
    "#pragma unroll\n"
    "            for (int t = 0; t < TM; t++) acc[t] += as[ty * TM + t][k] * bv;\n"
    "        }\n"
    "        __syncthreads();\n"
    "    }\n"
    "#pragma unroll\n"
    "    for (int t = 0; t < TM; t++) c[(rowb + ty * TM + t) * n + col] = acc[t];\n"
    "}\n";

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#define DIE(...)                                                 \
    do {                                                         \
        fprintf(stderr, "race: " __VA_ARGS__);                   \
        fprintf(stderr, ": %s\n", kt_last_error());              \
        exit(1);                                                 \
    } while (0)
#define OK(call)                                  \
    do {                                          \
        if ((call) != KT_OK) DIE("%s", #call);    \
    } while (0)

static const char *backend = "c";
static long n = 0;
static char artifacts[] = "/tmp/kt-race-bench-XXXXXX";
static float *ha, *hb, *hc;

static kt_space *make_space(void) {
    kt_space *sp = NULL;
    OK(kt_space_create(&sp));
    OK(kt_space_add_input(sp, "n"));
    if (strcmp(backend, "c") == 0) {
        OK(kt_space_add_param(sp, "TI", "[1, 2, 4, 8]"));
        OK(kt_space_add_param(sp, "TJ", "[4, 8, 16, 32, 64]"));
        OK(kt_space_add_constraint(sp, "n % TI == 0 and n % TJ == 0"));
    } else {
        OK(kt_space_add_param(sp, "BX", "[16, 32]"));
        OK(kt_space_add_param(sp, "BY", "[4, 8, 16]"));
        OK(kt_space_add_param(sp, "TM", "[1, 2, 4]"));
        OK(kt_space_add_param(sp, "BK", "[16, 32]"));
        OK(kt_space_add_constraint(sp, "n % BX == 0 and n % (BY * TM) == 0 and n % BK == 0"));
        const char *grid[3] = {"n // BX", "n // (BY * TM)", NULL}, *block[3] = {"BX", "BY", NULL};
        OK(kt_space_set_geometry(sp, KT_GEOMETRY_GRID, grid, block, NULL));
    }
    return sp;
}

typedef struct tuned {
    double wall_s;     /* kt_op_tune's wall time */
    double measure_s;  /* the kernels' time within it */
    unsigned long long runs;
    char config[256];
    double confidence;
} tuned;

/* Tunes the key once under policy (fixed: the long exhaustive measurement) in a fresh context
 * that shares the artifact directory. When all is set, stores each configuration's time. */
static tuned tune(kt_policy policy, double long_s, char (*configs)[256], double *times, size_t *nconfigs, kt_isolation iso) {
    kt_context *ctx = NULL;
    OK(kt_context_create(&ctx));
    OK(kt_context_set_artifact_dir(ctx, artifacts));
    OK(kt_context_set_cache(ctx, "off")); /* every tuning measures */
    OK(kt_context_set_policy(ctx, policy));
    if (policy == KT_POLICY_FIXED) OK(kt_context_set_measure(ctx, 2, 10, 100000, long_s));
    size_t dev = (size_t)-1;
    for (size_t i = 0; i < kt_context_device_count(ctx); i++)
        if (strcmp(kt_device_backend(kt_context_device(ctx, i)), backend) == 0) dev = i;
    if (dev == (size_t)-1) DIE("no %s device", backend);
    size_t bytes = (size_t)n * (size_t)n * sizeof(float);
    void *a = ha, *b = hb, *c = hc;
    if (strcmp(backend, "c") != 0) {
        OK(kt_device_alloc(ctx, dev, bytes, &a));
        OK(kt_device_alloc(ctx, dev, bytes, &b));
        OK(kt_device_alloc(ctx, dev, bytes, &c));
        OK(kt_device_write(ctx, dev, a, ha, bytes));
        OK(kt_device_write(ctx, dev, b, hb, bytes));
    }
    kt_op *op = NULL;
    OK(kt_op_create(ctx, "matmul", &op));
    OK(kt_op_set_device(op, dev));
    OK(kt_op_add_buffer(op, "a", KT_TYPE_F32, KT_READ_ONLY));
    OK(kt_op_add_buffer(op, "b", KT_TYPE_F32, KT_READ_ONLY));
    OK(kt_op_add_buffer(op, "c", KT_TYPE_F32, KT_WRITE_ONLY));
    OK(kt_op_add_scalar(op, "n", KT_TYPE_I64));
    OK(kt_op_key_arg(op, 3, KT_BUCKET_EXACT));
    OK(kt_op_set_validation(op, 0)); /* the same for every policy: left out */
    OK(kt_op_set_isolation(op, iso));
    kt_space *sp = make_space();
    OK(kt_op_add_variants(op, "tiled", sp, strcmp(backend, "c") == 0 ? c_src : cu_src, "matmul", NULL, 0));
    kt_space_destroy(sp);
    kt_arg args[4] = {kt_arg_buf(a, bytes), kt_arg_buf(b, bytes), kt_arg_buf(c, bytes), kt_arg_i64(n)};
    double t0 = now();
    OK(kt_op_tune(op, args, 4));
    tuned r = {.wall_s = now() - t0};
    const kt_decision *d = NULL;
    OK(kt_op_decision(op, args, 4, &d));
    size_t w = kt_decision_winner_unit(d);
    snprintf(r.config, sizeof r.config, "%s", kt_decision_unit_config(d, w));
    r.measure_s = kt_decision_measure_ns(d) / 1e9;
    r.runs = (unsigned long long)kt_decision_total_runs(d);
    r.confidence = kt_decision_confidence(d);
    if (configs) {
        *nconfigs = 0;
        for (size_t u = 0; u < kt_decision_unit_count(d); u++) {
            if (kt_decision_unit_outcome(d, u) != KT_OUTCOME_MEASURED) continue;
            snprintf(configs[*nconfigs], 256, "%s", kt_decision_unit_config(d, u));
            times[(*nconfigs)++] = kt_decision_unit_time_ns(d, u);
        }
    }
    if (strcmp(backend, "c") != 0) {
        kt_device_free(ctx, dev, a);
        kt_device_free(ctx, dev, b);
        kt_device_free(ctx, dev, c);
    }
    kt_context_destroy(ctx);
    return r;
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static double median(double *v, int k) {
    qsort(v, (size_t)k, sizeof *v, cmp_double);
    return k % 2 ? v[k / 2] : 0.5 * (v[k / 2 - 1] + v[k / 2]);
}

int main(int argc, char **argv) {
    int rounds = 3;
    double long_s = 0.3;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc) backend = argv[++i];
        else if (strcmp(argv[i], "--n") == 0 && i + 1 < argc) n = atol(argv[++i]);
        else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (strcmp(argv[i], "--long-s") == 0 && i + 1 < argc) long_s = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: race [--backend c|cuda] [--n N] [--rounds R] [--long-s S]\n");
            return strcmp(argv[i], "--help") == 0 ? 0 : 2;
        }
    }
    if (strcmp(backend, "c") != 0 && strcmp(backend, "cuda") != 0) DIE("--backend must be c or cuda");
    if (n <= 0) n = strcmp(backend, "c") == 0 ? 256 : 2048;
    if (rounds < 1 || rounds > 99) DIE("--rounds must be 1..99");
    if (mkdtemp(artifacts) == NULL) DIE("mkdtemp");
    size_t count = (size_t)n * (size_t)n;
    ha = malloc(count * sizeof *ha), hb = malloc(count * sizeof *hb), hc = malloc(count * sizeof *hc);
    if (!ha || !hb || !hc) DIE("out of memory");
    for (size_t i = 0; i < count; i++) ha[i] = (float)(i % 7) - 3, hb[i] = (float)(i % 5) - 2;

    /* builds every artifact (not timed), then the long exhaustive measurement */
    tune(KT_POLICY_KERNELTUNER, 0, NULL, NULL, NULL, KT_ISOLATE_OFF);
    static char configs[512][256];
    static double times[512];
    size_t nconfigs = 0;
    tuned truth = tune(KT_POLICY_FIXED, long_s, configs, times, &nconfigs, KT_ISOLATE_OFF);
    double best = INFINITY;
    for (size_t i = 0; i < nconfigs; i++) best = fmin(best, times[i]);
    printf("%s matmul n=%ld: %zu configurations; exhaustive (>= %.2f s each): best %s %.4g ms\n", backend, n, nconfigs, long_s,
           truth.config, best / 1e6);

    static const kt_policy policies[3] = {KT_POLICY_RACE, KT_POLICY_TRITON, KT_POLICY_KERNELTUNER};
    double wall[3][99], ratio[3][99], runs[3][99];
    printf("%-6s %-12s %10s %12s %8s %10s %10s  %s\n", "round", "policy", "tune s", "kernels s", "runs", "chosen/best",
           "confidence", "chosen");
    for (int r = 0; r < rounds; r++)
        for (int p = 0; p < 3; p++) {
            tuned t = tune(policies[p], 0, NULL, NULL, NULL, KT_ISOLATE_OFF);
            double chosen = NAN;
            for (size_t i = 0; i < nconfigs; i++)
                if (strcmp(configs[i], t.config) == 0) chosen = times[i];
            wall[p][r] = t.wall_s;
            ratio[p][r] = chosen / best;
            runs[p][r] = (double)t.runs;
            printf("%-6d %-12s %10.4f %12.4f %8llu %10.4f %10.3f  %s\n", r + 1, kt_policy_name(policies[p]), t.wall_s, t.measure_s,
                   t.runs, ratio[p][r], t.confidence, t.config);
        }
    /* isolation: the race in a runner process against in the process, side by side */
    double iso[2][99];
    unsigned long long iso_runs = 0;
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < 2; i++) {
            tuned t = tune(KT_POLICY_RACE, 0, NULL, NULL, NULL, i ? KT_ISOLATE_ON : KT_ISOLATE_OFF);
            iso[i][r] = t.wall_s;
            if (i) iso_runs = t.runs;
            printf("%-6d %-12s %10.4f %12.4f %8llu %10s %10.3f  %s\n", r + 1, i ? "race+runner" : "race", t.wall_s, t.measure_s,
                   t.runs, "", t.confidence, t.config);
        }
    double iso_in = median(iso[0], rounds), iso_out = median(iso[1], rounds);
    double w[3], q[3], k[3];
    for (int p = 0; p < 3; p++) w[p] = median(wall[p], rounds), q[p] = median(ratio[p], rounds), k[p] = median(runs[p], rounds);
    printf("\nRESULT race_%s_tune_s %.4f s\n", backend, w[0]);
    printf("RESULT race_%s_triton_over_race_tune_time %.2f x\n", backend, w[1] / w[0]);
    printf("RESULT race_%s_kerneltuner_over_race_tune_time %.2f x\n", backend, w[2] / w[0]);
    printf("RESULT race_%s_race_runs %.0f runs\n", backend, k[0]);
    printf("RESULT race_%s_race_chosen_over_best %.4f ratio\n", backend, q[0]);
    printf("RESULT race_%s_triton_chosen_over_best %.4f ratio\n", backend, q[1]);
    printf("RESULT race_%s_kerneltuner_chosen_over_best %.4f ratio\n", backend, q[2]);
    printf("RESULT race_%s_isolated_over_in_process_tune_time %.2f x\n", backend, iso_out / iso_in);
    printf("RESULT race_%s_isolation_cost_per_run_ms %.3f ms\n", backend, iso_runs ? (iso_out - iso_in) / (double)iso_runs * 1e3 : -1);
    char rm[128];
    snprintf(rm, sizeof rm, "rm -rf '%s'", artifacts);
    if (system(rm) != 0) fprintf(stderr, "race: could not remove %s\n", artifacts);
    free(ha), free(hb), free(hc);
    return 0;
}
