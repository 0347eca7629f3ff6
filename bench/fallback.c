/*
 * fallback.c - how good is the answer for a key nobody tuned (issue [13])? Two parts, each
 * printing the answered time over the key's own best (1.00: as good as tuning it).
 *
 * 1. Other devices, on recorded data: benchmark_hub has one key per GPU, so for each of its
 *    kernels (and the convolution as recorded on the H200, bench/data/), the winner of one GPU
 *    is looked up in another GPU's recorded times. That is what the rules answer on a device
 *    with no decision of its own: the same vendor's (A4000 for the H200 and back), while a GPU
 *    of another vendor gets no borrowed answer and runs the op's default (for a variant group
 *    its first configuration), whose ratio is printed beside it.
 * 2. Other keys, measured here: a matrix multiply in C (variants over tile sizes TI x TK, valid
 *    when they divide n) is tuned on a sparse grid of sizes (n = 16, 64, 256) into a cache file;
 *    then a context that may not tune (effort CACHE_ONLY) calls every size of the full grid
 *    (16 to 256 in steps of about 1.5x) and the rules answer (the nearest tuned size whose
 *    winner divides n); finally every size is tuned for itself, and the answered
 *    configuration's time at that size is compared with its best, as is the default's. Timings
 *    are this machine's: ratios, with its noise (a few percent here).
 *
 * usage: fallback [--hub DIR] [--skip-measured]
 */
#define _GNU_SOURCE
#include <kerntune.h>
#include <kerntune/cache.h>
#include <kerntune/decision.h>
#include <kerntune/device.h>
#include <kerntune/variants.h>

#include "../cli/t4.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void die(const char *what, const char *detail) {
    fprintf(stderr, "fallback: %s: %s\n", what, detail ? detail : "");
    exit(1);
}

/* ---- 1. other devices, recorded ------------------------------------------------------------ */

typedef struct gpu {
    const char *name, *vendor, *t4; /* t4: relative to the hub's results, or a path */
    t4_records recs;
    const t4_record *best;
} gpu;

static const t4_record *find(const t4_records *r, const char *key) {
    t4_record probe = {.key = (char *)key};
    return bsearch(&probe, r->recs, r->n, sizeof *r->recs, t4_compare);
}

static bool valid(const t4_record *r) { return r && strcmp(r->invalidity, "correct") == 0 && r->mean_ns > 0; }

static void other_devices(const char *hub, const char *kernel, gpu *gpus, size_t ngpus) {
    char path[1200];
    snprintf(path, sizeof path, "%s/kernels/%s.json", hub, kernel);
    json_error_t jerr;
    json_t *t1 = json_load_file(path, 0, &jerr);
    if (t1 == NULL) die(path, jerr.text);
    /* the op's default for a variant group: the space's first configuration */
    const char *names[64];
    size_t nnames = 0, i, count = 0;
    json_t *p, *cs = json_object_get(t1, "ConfigurationSpace");
    kt_space *sp = NULL;
    if (kt_space_create(&sp) != KT_OK) die("kt_space_create", kt_last_error());
    json_array_foreach(json_object_get(cs, "TuningParameters"), i, p) {
        if (nnames == 64) die(path, "more than 64 parameters");
        names[nnames++] = json_string_value(json_object_get(p, "Name"));
        if (kt_space_add_param(sp, names[nnames - 1], json_string_value(json_object_get(p, "Values"))) != KT_OK) die(path, kt_last_error());
    }
    json_array_foreach(json_object_get(cs, "Conditions"), i, p) {
        if (kt_space_add_constraint(sp, json_string_value(json_object_get(p, "Expression"))) != KT_OK) die(path, kt_last_error());
    }
    char deflt[4096];
    if (kt_space_enumerate(sp, &count) != KT_OK || count == 0 || kt_space_config_format(sp, 0, deflt, sizeof deflt) != KT_OK)
        die(path, "its space has no configuration");
    for (size_t g = 0; g < ngpus; g++) {
        char *err = NULL;
        if (!t4_read(gpus[g].t4, names, nnames, &gpus[g].recs, &err)) die(gpus[g].t4, err);
        gpus[g].best = gpus[g].recs.best < gpus[g].recs.n ? &gpus[g].recs.recs[gpus[g].recs.best] : NULL;
        if (gpus[g].best == NULL) die(gpus[g].t4, "no valid configuration");
    }
    printf("\n%s: the winner of one GPU on another's recorded times, over that GPU's best\n", kernel);
    printf("  %-8s %-8s %-22s %10s   %s\n", "ON", "WINNER OF", "RULE", "RATIO", "CONFIGURATION");
    for (size_t g = 0; g < ngpus; g++) {
        const t4_record *d = find(&gpus[g].recs, deflt);
        char dratio[32];
        if (valid(d)) snprintf(dratio, sizeof dratio, "%.3f", d->mean_ns / gpus[g].best->mean_ns);
        else snprintf(dratio, sizeof dratio, d ? "invalid" : "unrecorded"); /* (not in the space: a constraint breaks it) */
        printf("  %-8s %-8s %-22s %10s   %s\n", gpus[g].name, "-", "default (1st config)", dratio, deflt);
        printf("RESULT fallback_default_%s_%s %s\n", kernel, gpus[g].name, dratio);
        for (size_t h = 0; h < ngpus; h++) {
            if (h == g) continue;
            bool same = strcmp(gpus[g].vendor, gpus[h].vendor) == 0;
            const t4_record *r = find(&gpus[g].recs, gpus[h].best->key);
            char ratio[32];
            if (valid(r)) snprintf(ratio, sizeof ratio, "%.3f", r->mean_ns / gpus[g].best->mean_ns);
            else snprintf(ratio, sizeof ratio, r ? "invalid" : "unrecorded");
            printf("  %-8s %-8s %-22s %10s   %s\n", gpus[g].name, gpus[h].name, same ? "same vendor" : "(another vendor: unused)", ratio,
                   gpus[h].best->key);
            printf("RESULT fallback_%s_%s_%s_winner_on_%s %s\n", same ? "vendor" : "other_vendor", kernel, gpus[h].name, gpus[g].name, ratio);
        }
    }
    for (size_t g = 0; g < ngpus; g++) t4_free(&gpus[g].recs);
    kt_space_destroy(sp);
    json_decref(t1);
}

/* ---- 2. other keys, measured here ---------------------------------------------------------- */

static const char *src =
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

#define TRY(call)                                                                                        \
    do {                                                                                                 \
        if ((call) != KT_OK) die(#call, kt_last_error());                                                \
    } while (0)

static kt_op *matmul_op(kt_context *ctx) {
    kt_op *op = NULL;
    TRY(kt_op_create(ctx, "fallback_matmul", &op));
    TRY(kt_op_add_buffer(op, "a", KT_TYPE_F32, KT_READ_ONLY));
    TRY(kt_op_add_buffer(op, "b", KT_TYPE_F32, KT_READ_ONLY));
    TRY(kt_op_add_buffer(op, "c", KT_TYPE_F32, KT_WRITE_ONLY));
    TRY(kt_op_add_scalar(op, "n", KT_TYPE_I64));
    TRY(kt_op_key_arg(op, 3, KT_BUCKET_EXACT));
    kt_space *sp = NULL;
    TRY(kt_space_create(&sp));
    TRY(kt_space_add_input(sp, "n"));
    TRY(kt_space_add_param(sp, "TI", "[1, 2, 4, 8, 16, 32]"));
    TRY(kt_space_add_param(sp, "TK", "[1, 4, 8, 16, 32, 64]"));
    TRY(kt_space_add_constraint(sp, "n % TI == 0 and n % TK == 0"));
    TRY(kt_op_add_variants(op, "tiled", sp, src, "matmul", NULL, 0));
    kt_space_destroy(sp);
    return op; /* its default: the first configuration that is valid, TI=1,TK=1 */
}

static kt_context *context(const char *cache, kt_effort effort, const char *artifacts) {
    kt_context *ctx = NULL;
    TRY(kt_context_create(&ctx));
    TRY(kt_context_set_cache(ctx, cache));
    TRY(kt_context_set_effort(ctx, effort));
    TRY(kt_context_set_artifact_dir(ctx, artifacts));
    return ctx;
}

/* The measured time of configuration config in decision d, or -1. */
static double time_of(const kt_decision *d, const char *config) {
    for (size_t u = 0; u < kt_decision_unit_count(d); u++)
        if (kt_decision_unit_outcome(d, u) == KT_OUTCOME_MEASURED && strcmp(kt_decision_unit_config(d, u), config) == 0)
            return kt_decision_unit_time_ns(d, u);
    return -1;
}

static void other_keys(void) {
    static const long grid[] = {16, 24, 32, 48, 64, 96, 128, 192, 256}, sparse[] = {16, 64, 256};
    enum { NGRID = sizeof grid / sizeof grid[0], NSPARSE = sizeof sparse / sizeof sparse[0] };
    char tmp[] = "/tmp/kt-fallback-XXXXXX";
    if (mkdtemp(tmp) == NULL) die("mkdtemp", "cannot make a directory");
    char cache[256], art[256];
    snprintf(cache, sizeof cache, "%s/sparse.db", tmp);
    snprintf(art, sizeof art, "%s/artifacts", tmp);
    size_t most = 256 * 256;
    float *a = malloc(most * sizeof *a), *b = malloc(most * sizeof *b), *c = calloc(most, sizeof *c);
    if (!a || !b || !c) die("buffers", "out of memory");
    for (size_t i = 0; i < most; i++) a[i] = (float)(i % 7), b[i] = (float)(i % 5);
#define MM_ARGS(n) ((kt_arg[]){kt_arg_buf(a, (size_t)((n) * (n)) * 4), kt_arg_buf(b, (size_t)((n) * (n)) * 4), kt_arg_buf(c, (size_t)((n) * (n)) * 4), kt_arg_i64(n)})
    /* the sparse grid, tuned */
    kt_context *ctx = context(cache, KT_EFFORT_MEASURE, art);
    kt_op *op = matmul_op(ctx);
    for (size_t i = 0; i < NSPARSE; i++) TRY(kt_op_tune(op, MM_ARGS(sparse[i]), 4));
    kt_context_destroy(ctx);
    /* every size answered without tuning */
    char answer[NGRID][128], rule[NGRID][32];
    long from[NGRID];
    ctx = context(cache, KT_EFFORT_CACHE_ONLY, art);
    op = matmul_op(ctx);
    for (size_t i = 0; i < NGRID; i++) {
        TRY(kt_op_call(op, MM_ARGS(grid[i]), 4));
        const kt_decision *d = NULL;
        TRY(kt_op_decision(op, MM_ARGS(grid[i]), 4, &d));
        snprintf(answer[i], sizeof answer[i], "%s", kt_decision_unit_config(d, kt_decision_winner_unit(d)));
        snprintf(rule[i], sizeof rule[i], "%s", kt_decision_source_name(kt_decision_source_of(d)));
        int64_t k = 0;
        from[i] = kt_decision_borrowed_key(d, &k, 1) ? (long)k : grid[i];
    }
    if (kt_op_measured_runs(op) != 0) die("cache-only", "measured something");
    kt_context_destroy(ctx);
    /* every size tuned for itself (no cache): its best, and the answer's and the default's times */
    ctx = context("off", KT_EFFORT_MEASURE, art);
    op = matmul_op(ctx);
    printf("\nC matmul on this machine (%s): sizes tuned 16, 64, 256; the others answered by the rules\n",
           kt_device_name(kt_context_device(ctx, 0)));
    printf("  %5s  %-12s %5s  %-12s %8s   %-12s %8s\n", "n", "RULE", "FROM", "ANSWER", "RATIO", "BEST", "DEFAULT");
    double log_sum = 0, worst = 0, dlog_sum = 0;
    size_t counted = 0;
    for (size_t i = 0; i < NGRID; i++) {
        TRY(kt_op_tune(op, MM_ARGS(grid[i]), 4));
        const kt_decision *d = NULL;
        TRY(kt_op_decision(op, MM_ARGS(grid[i]), 4, &d));
        double best = kt_decision_unit_time_ns(d, kt_decision_winner_unit(d)), t = time_of(d, answer[i]), td = time_of(d, "TI=1,TK=1");
        const char *bestc = kt_decision_unit_config(d, kt_decision_winner_unit(d));
        char ratio[32], dratio[32];
        snprintf(ratio, sizeof ratio, t > 0 ? "%.3f" : "dropped", t / best);
        snprintf(dratio, sizeof dratio, td > 0 ? "%.3f" : "dropped", td / best);
        printf("  %5ld  %-12s %5ld  %-12s %8s   %-12s %8s\n", grid[i], rule[i], from[i], answer[i], ratio, bestc, dratio);
        bool tuned = false;
        for (size_t s = 0; s < NSPARSE; s++) tuned |= sparse[s] == grid[i];
        if (!tuned && t > 0 && td > 0) {
            log_sum += log(t / best), dlog_sum += log(td / best), worst = fmax(worst, t / best);
            counted++;
        }
    }
    kt_context_destroy(ctx);
    if (counted) {
        printf("RESULT fallback_nearest_geomean %.3f (over the %zu answered sizes whose answer was measured)\n", exp(log_sum / (double)counted), counted);
        printf("RESULT fallback_nearest_worst %.3f\n", worst);
        printf("RESULT fallback_default_geomean %.3f\n", exp(dlog_sum / (double)counted));
    }
    printf("(a configuration the race dropped early was not measured to the end: 'dropped' means it is far from the best)\n");
    free(a), free(b), free(c);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) fprintf(stderr, "fallback: could not remove %s\n", tmp);
}

int main(int argc, char **argv) {
    const char *hub = "../shared/benchmark_hub";
    bool measured = true;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: fallback [--hub DIR] [--skip-measured]\n"
                   "How good the answer for a key nobody tuned is: another GPU's winner on benchmark_hub's recorded\n"
                   "times (the same-vendor rule; another vendor's for comparison; the default: the first configuration), and, measured\n"
                   "on this machine, a C matmul tuned at 3 sizes answering 9 by the nearest-key rule. Prints ratios over\n"
                   "each key's own best and RESULT lines. --skip-measured: the recorded part only.\n");
            return 0;
        }
        if (strcmp(argv[i], "--skip-measured") == 0) measured = false;
        else if (strcmp(argv[i], "--hub") == 0 && i + 1 < argc) hub = argv[++i];
        else die(argv[i], "unknown option (see --help)");
    }
    if (access(hub, R_OK) != 0) hub = KT_SOURCE_DIR "/../shared/benchmark_hub";
    char conv[3][1200], dd[2][1200];
    snprintf(conv[0], sizeof conv[0], "%s/results/convolution_milo/A4000_T4.json.gz", hub);
    snprintf(conv[1], sizeof conv[1], "%s/results/convolution_milo/W6600_T4.json.gz", hub);
    snprintf(conv[2], sizeof conv[2], "%s/bench/data/convolution_milo_H200_T4.json.gz", KT_SOURCE_DIR);
    snprintf(dd[0], sizeof dd[0], "%s/results/dedispersion_milo/A4000_T4.json.gz", hub);
    snprintf(dd[1], sizeof dd[1], "%s/results/dedispersion_milo/W6600_T4.json.gz", hub);
    gpu cg[3] = {{"A4000", "NVIDIA", conv[0], {0}, NULL}, {"W6600", "AMD", conv[1], {0}, NULL}, {"H200", "NVIDIA", conv[2], {0}, NULL}};
    gpu dg[2] = {{"A4000", "NVIDIA", dd[0], {0}, NULL}, {"W6600", "AMD", dd[1], {0}, NULL}};
    other_devices(hub, "convolution_milo", cg, 3);
    other_devices(hub, "dedispersion_milo", dg, 2);
    if (measured) other_keys();
    return 0;
}
