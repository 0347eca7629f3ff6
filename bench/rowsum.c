/*
 * rowsum.c - the row-sum op of ops/ (issue [11]) against the best of each of its three
 * implementations, side by side, over a sweep of shapes of 64 MiB each: cols = 1, 2, 4, ...,
 * 2^20 and rows = 2^24 / cols. For each shape:
 *   1. kerntune's op tunes it (its first call; the wall time of that call is reported; the
 *      first shape's includes compiling every configuration);
 *   2. the configurations that tuning measured within 25% of their implementation's best run
 *      on their own, each as the only candidate of an op that does not tune
 *      (ktops_rowsum_create_with, effort OFF): the output is checked against the host's sums, bit
 *      for bit (the input holds multiples of 1/4, which every order sums exactly), and timed
 *      once (screening); tuning validated every configuration already, the same way, so one
 *      that it did not measure counts as a wrong output (a wrong answer) or a failure;
 *   3. the finalists, each implementation's configurations within 5% of its best screening time
 *      (at most 3 of each), and kerntune's hit (ktops_rowsum_run on the tuned op) are timed in
 *      --rounds rounds, in alternating order, each sample ktops_cuda_time over enough calls to
 *      last about 2 ms; an implementation's time is its best finalist's median.
 * It prints a table (GB/s of each implementation's best and of kerntune's pick, read plus
 * written bytes) and RESULT lines: kerntune's worst ratio to the best implementation (target:
 * 1.03), how often the persistent kernel was chosen where it wins (faster than both others'
 * best by more than 1%, the race's tolerance), how many outputs were wrong and how many
 * configurations or calls failed (targets: 0; the exit status is 1 then).
 * Needs an NVIDIA GPU (not a ctest); scripts/gpu-check runs it.
 *
 * Every timed call follows a flush of the L2 cache (ktops_cuda_time_cold), the state kerntune
 * measures candidates in by default; --warm times calls back to back instead, and tunes without
 * flushing too (KT_FLUSH_OFF). A 64 MiB input does not fit the H200's L2, but back to back part
 * of it is still there, and how much helps differs between the kernels.
 *
 * Usage: rowsum [--quick] [--rounds R] [--warm] [--help]
 */
#include "cuda_ops.h"

#include <kerntune.h>
#include <kerntune/cache.h>
#include <kerntune/decision.h>
#include <kerntune/device.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { TOTAL = 1 << 24, MAX_CONFIGS = 64, MAX_FINALISTS = 3 * 3 + 1, MAX_ROUNDS = 101 };

static const char *const group_names[3] = {"block-per-row", "persistent", "split-row"};

typedef struct bench {
    kt_context *ctx;
    size_t dev;
    ktops_cuda *cu;
    kt_queue stream;
    float *din, *dout;          /* device: TOTAL floats each */
    float *in, *out;            /* host */
    float *poison;              /* host: TOTAL NaNs, to see an output left unwritten */
    double *want;               /* the host's sums of this shape */
    ktops_rowsum *full;         /* kerntune's op */
    struct alone {              /* a configuration on its own */
        char key[128];
        ktops_rowsum *r;
    } alone[MAX_CONFIGS];
    size_t nalone;
    long long wrong, failed; /* outputs that differ from the host's; configurations or calls that failed */
} bench;

typedef struct call {
    ktops_rowsum *r;
    bench *b;
    int64_t rows, cols;
} call;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int enqueue(void *user, kt_queue stream) {
    const call *c = user;
    return ktops_rowsum_run(c->r, stream, c->b->din, c->b->dout, c->rows, c->cols) != KT_OK;
}

/* Milliseconds per call of c over calls calls; negative on failure (reported). */
/* 1: every timed call runs after an L2 flush, the state kerntune tunes in by default
 * (KT_FLUSH_AUTO); 0 (--warm): calls back to back, and kerntune tunes without flushing
 * (KT_FLUSH_OFF), so that both see the same cache */
static int cold = 1;

static double time_calls(bench *b, call *c, int calls) {
    double ms = -1;
    if ((cold ? ktops_cuda_time_cold : ktops_cuda_time)(b->cu, b->stream, enqueue, c, calls, &ms) != KT_OK) {
        printf("  FAILED timing: %s\n", ktops_last_error());
        b->failed++;
        return -1;
    }
    return ms;
}

/* Runs c once on a poisoned output and compares it with the host's sums; counts what differs. */
static int check_output(bench *b, call *c, const char *what) {
    const size_t rows = (size_t)c->rows;
    kt_status st = kt_device_write(b->ctx, b->dev, b->dout, b->poison, rows * sizeof(float));
    if (st == KT_OK && enqueue(c, b->stream) != 0) {
        printf("  FAILED %s: %s\n", what, ktops_last_error());
        b->failed++;
        return 0;
    }
    if (st == KT_OK && ktops_cuda_sync(b->cu, b->stream) != KT_OK) st = KT_ERR_BACKEND;
    if (st == KT_OK) st = kt_device_read(b->ctx, b->dev, b->out, b->dout, rows * sizeof(float));
    if (st != KT_OK) {
        printf("  FAILED %s: reading its output failed: %s %s\n", what, kt_last_error(), ktops_last_error());
        b->failed++;
        return 0;
    }
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < rows; i++)
        if (b->out[i] != (float)b->want[i] && bad++ == 0) first = i;
    if (bad) {
        printf("  WRONG %s: %zu of %zu rows differ from the host's sums, first row %zu: %.9g, not %.9g\n", what, bad, rows, first,
               b->out[first], b->want[first]);
        b->wrong++;
    }
    return bad == 0;
}

/* The op that runs group's configuration config alone, without tuning (made once, kept). */
static ktops_rowsum *alone(bench *b, const char *group, const char *config) {
    char key[128];
    snprintf(key, sizeof key, "%s %s", group, config);
    for (size_t i = 0; i < b->nalone; i++)
        if (strcmp(b->alone[i].key, key) == 0) return b->alone[i].r;
    if (b->nalone == MAX_CONFIGS) return NULL;
    char name[64];
    snprintf(name, sizeof name, "rowsum-alone-%zu", b->nalone);
    ktops_rowsum_options opt = {group, config};
    ktops_rowsum *r = NULL;
    if (ktops_rowsum_create_with(b->cu, b->ctx, b->dev, name, &opt, &r) != KT_OK ||
        kt_op_set_effort(ktops_rowsum_op(r), KT_EFFORT_OFF) != KT_OK) {
        printf("  %s: %s\n", key, ktops_last_error());
        ktops_rowsum_destroy(r);
        return NULL;
    }
    snprintf(b->alone[b->nalone].key, sizeof b->alone[b->nalone].key, "%s", key);
    b->alone[b->nalone++].r = r;
    return r;
}

static int group_of(const char *name) {
    for (int g = 0; g < 3; g++)
        if (strcmp(name, group_names[g]) == 0) return g;
    return -1;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct finalist {
    call c;
    int group;           /* -1: kerntune's hit */
    char config[96];
    int calls;
    double samples[MAX_ROUNDS];
    int n;
    double median;
} finalist;

/* Everything for one shape; returns 0 when it could not be measured. */
static int one_shape(bench *b, int64_t cols, int rounds, double *ratio, int *pers_wins, int *pers_chosen) {
    const int64_t rows = TOTAL / cols;
    for (int64_t i = 0; i < rows; i++) {
        double s = 0;
        for (int64_t c = 0; c < cols; c++) s += b->in[i * cols + c];
        b->want[i] = s;
    }
    /* 1. kerntune tunes */
    call full = {b->full, b, rows, cols};
    double t0 = now_s();
    kt_status st = ktops_rowsum_run(b->full, b->stream, b->din, b->dout, rows, cols);
    if (st == KT_OK) st = ktops_cuda_sync(b->cu, b->stream);
    const double tune_s = now_s() - t0;
    if (st != KT_OK) {
        printf("%8lld %8lld  tuning failed: %s\n", (long long)cols, (long long)rows, ktops_last_error());
        b->failed++;
        return 0;
    }
    const kt_decision *d = NULL;
    if (ktops_rowsum_decision(b->full, b->din, b->dout, rows, cols, &d) != KT_OK) {
        printf("  %s\n", ktops_last_error());
        return 0;
    }
    kt_op *op = ktops_rowsum_op(b->full);
    const char *pick_group = kt_op_candidate_name(op, kt_decision_winner(d));
    char pick[128];
    snprintf(pick, sizeof pick, "%s %s", pick_group, kt_decision_unit_config(d, kt_decision_winner_unit(d)));
    check_output(b, &full, "kerntune's pick");

    /* 2. the configurations alone: a configuration within 25% of its implementation's best
     * time in tuning is checked and screened; tuning validated every one already (a unit
     * MEASURED matched the host's sums bit for bit), so one that is not MEASURED counts as a
     * wrong output or a failure */
    double tuned_best[3] = {INFINITY, INFINITY, INFINITY};
    for (size_t u = 0; u < kt_decision_unit_count(d); u++) {
        int g = group_of(kt_op_candidate_name(op, kt_decision_unit_candidate(d, u)));
        if (g >= 0 && kt_decision_unit_outcome(d, u) == KT_OUTCOME_MEASURED)
            tuned_best[g] = fmin(tuned_best[g], kt_decision_unit_time_ns(d, u));
    }
    finalist *fin = calloc(MAX_CONFIGS + 1, sizeof *fin);
    if (fin == NULL) {
        printf("  out of memory\n");
        return 0;
    }
    size_t nf = 0;
    for (size_t u = 0; u < kt_decision_unit_count(d) && nf < MAX_CONFIGS; u++) {
        const char *cand = kt_op_candidate_name(op, kt_decision_unit_candidate(d, u)), *cfg = kt_decision_unit_config(d, u);
        const kt_outcome o = kt_decision_unit_outcome(d, u);
        if (o == KT_OUTCOME_REJECTED) continue; /* split-row past its rows */
        if (o != KT_OUTCOME_MEASURED) {
            printf("  %s %s %s in tuning: %s: %s\n", o == KT_OUTCOME_INVALID ? "WRONG" : "FAILED", cand, cfg ? cfg : "",
                   kt_outcome_name(o), kt_decision_unit_message(d, u) ? kt_decision_unit_message(d, u) : "");
            if (o == KT_OUTCOME_INVALID) b->wrong++;
            else b->failed++;
            continue;
        }
        const int g = group_of(cand);
        if (g < 0 || kt_decision_unit_time_ns(d, u) > 1.25 * tuned_best[g]) continue;
        ktops_rowsum *r = alone(b, cand, cfg);
        if (r == NULL) continue;
        finalist *f = &fin[nf];
        f->c = (call){r, b, rows, cols};
        f->group = g;
        snprintf(f->config, sizeof f->config, "%s", cfg);
        char what[160];
        snprintf(what, sizeof what, "%s %s", cand, cfg);
        if (!check_output(b, &f->c, what)) continue;
        f->median = time_calls(b, &f->c, 2); /* screening */
        if (f->median > 0) nf++;
    }
    double best_screen[3] = {INFINITY, INFINITY, INFINITY};
    for (size_t i = 0; i < nf; i++)
        if (fin[i].median < best_screen[fin[i].group]) best_screen[fin[i].group] = fin[i].median;
    /* 3. the finalists and kerntune's hit, in rounds */
    finalist *race[MAX_FINALISTS];
    int nr = 0;
    for (int g = 0; g < 3; g++)
        for (int k = 0; k < MAX_FINALISTS / 3; k++) { /* the fastest few of each group */
            finalist *next = NULL;
            for (size_t i = 0; i < nf; i++) {
                finalist *f = &fin[i];
                int taken = 0;
                for (int j = 0; j < nr; j++) taken = taken || race[j] == f;
                if (f->group == g && !taken && f->median <= best_screen[g] * 1.05 && (next == NULL || f->median < next->median))
                    next = f;
            }
            if (next) race[nr++] = next;
        }
    finalist *kt = &fin[nf]; /* kerntune's hit */
    kt->c = full;
    kt->group = -1;
    kt->median = time_calls(b, &full, 2);
    race[nr++] = kt;
    for (int j = 0; j < nr; j++) {
        double ms = race[j]->median > 0 ? race[j]->median : 1;
        race[j]->calls = ms >= 2.0 ? 1 : (int)ceil(2.0 / ms);
        if (race[j]->calls > 1000) race[j]->calls = 1000;
    }
    for (int round = 0; round < rounds; round++)
        for (int k = 0; k < nr; k++) {
            finalist *f = race[round % 2 ? nr - 1 - k : k];
            double ms = time_calls(b, &f->c, f->calls);
            if (ms > 0) f->samples[f->n++] = ms;
        }
    double best[3] = {INFINITY, INFINITY, INFINITY};
    const char *best_cfg[3] = {"-", "-", "-"};
    for (int j = 0; j < nr; j++) {
        finalist *f = race[j];
        if (f->n == 0) {
            f->median = INFINITY;
            continue;
        }
        qsort(f->samples, (size_t)f->n, sizeof f->samples[0], cmp_double);
        f->median = f->n % 2 ? f->samples[f->n / 2] : (f->samples[f->n / 2 - 1] + f->samples[f->n / 2]) / 2;
        if (f->group >= 0 && f->median < best[f->group]) best[f->group] = f->median, best_cfg[f->group] = f->config;
    }
    const double bytes = ((double)rows * (double)cols + (double)rows) * sizeof(float);
    double top = fmin(best[0], fmin(best[1], best[2]));
    *ratio = kt->median / top;
    *pers_wins = best[1] < 0.99 * fmin(best[0], best[2]);
    *pers_chosen = strcmp(pick_group, "persistent") == 0;
    char gbs[3][16];
    for (int g = 0; g < 3; g++) {
        if (isinf(best[g])) snprintf(gbs[g], sizeof gbs[g], "-");
        else snprintf(gbs[g], sizeof gbs[g], "%.0f", bytes / (best[g] * 1e-3) / 1e9);
    }
    printf("%8lld %8lld %7.2f %9s %9s %9s %9.0f %6.3f%s  %s\n", (long long)cols, (long long)rows, tune_s, gbs[0], gbs[1], gbs[2],
           bytes / (kt->median * 1e-3) / 1e9, *ratio, *pers_wins ? (*pers_chosen ? " P+" : " P-") : "   ", pick);
    printf("%8s %8s %7s   best: %s | %s | %s\n", "", "", "", best_cfg[0], best_cfg[1], best_cfg[2]);
    printf("%8s %8s %7s   us: timed %.2f | %.2f | %.2f  tuning %.2f | %.2f | %.2f\n", "", "", "", best[0] * 1e3, best[1] * 1e3,
           best[2] * 1e3, tuned_best[0] * 1e-3, tuned_best[1] * 1e-3, tuned_best[2] * 1e-3);
    free(fin);
    return 1;
}

static void usage(FILE *to) {
    fprintf(to, "usage: rowsum [--quick] [--rounds R] [--warm] [--help]\n"
                "  Sweeps row sums of 64 MiB (cols = 1, 2, 4, ..., 2^20; rows = 2^24 / cols) on the first CUDA\n"
                "  device: kerntune's op tunes each shape, then its pick is timed against the best\n"
                "  configuration of each implementation (block-per-row, persistent, split-row), side by side.\n"
                "  --quick     eight shapes (cols = 1, 8, 64, 512, 4096, 32768, 2^18, 2^20) instead of 21\n"
                "  --rounds R  timing rounds per shape (default 7, at most 101)\n"
                "  --warm      time calls back to back, the input partly left in L2 by the call before,\n"
                "              and tune the same way (KT_FLUSH_OFF); by default every timed call follows an\n"
                "              L2 flush, the state kerntune tunes in (KT_FLUSH_AUTO)\n");
}

int main(int argc, char **argv) {
    int quick = 0, rounds = 7;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--warm") == 0) {
            cold = 0;
        } else if (strcmp(argv[i], "--quick") == 0) {
            quick = 1;
        } else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
            char *end = NULL;
            long v = strtol(argv[++i], &end, 10);
            if (*end != '\0' || v < 1 || v > MAX_ROUNDS) {
                fprintf(stderr, "rowsum: --rounds %s: expected a whole number from 1 to %d\n", argv[i], MAX_ROUNDS);
                return 2;
            }
            rounds = (int)v;
        } else {
            fprintf(stderr, "rowsum: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    bench b = {0};
    b.dev = (size_t)-1;
    if (kt_context_create(&b.ctx) != KT_OK || kt_context_set_cache(b.ctx, "off") != KT_OK || /* tune afresh */
        kt_context_set_flush(b.ctx, cold ? KT_FLUSH_AUTO : KT_FLUSH_OFF) != KT_OK) {
        fprintf(stderr, "rowsum: %s\n", kt_last_error());
        return 1;
    }
    for (size_t i = 0; i < kt_context_device_count(b.ctx) && b.dev == (size_t)-1; i++)
        if (strcmp(kt_device_backend(kt_context_device(b.ctx, i)), "cuda") == 0) b.dev = i;
    if (b.dev == (size_t)-1) {
        fprintf(stderr, "rowsum: no CUDA device\n");
        for (size_t i = 0; i < kt_context_unavailable_count(b.ctx); i++) fprintf(stderr, "  %s\n", kt_context_unavailable(b.ctx, i));
        kt_context_destroy(b.ctx);
        return 1;
    }
    b.in = malloc(TOTAL * sizeof *b.in);
    b.out = malloc(TOTAL * sizeof *b.out);
    b.poison = malloc(TOTAL * sizeof *b.poison);
    b.want = malloc(TOTAL * sizeof *b.want);
    kt_status st = b.in && b.out && b.poison && b.want ? KT_OK : KT_ERR_NO_MEMORY;
    if (st == KT_OK && (st = ktops_cuda_open(b.ctx, b.dev, &b.cu)) == KT_OK && (st = ktops_cuda_stream_create(b.cu, &b.stream)) == KT_OK &&
        (st = ktops_rowsum_create(b.cu, b.ctx, b.dev, "rowsum", &b.full)) == KT_OK)
        st = kt_device_alloc(b.ctx, b.dev, TOTAL * sizeof(float), (void **)&b.din);
    if (st == KT_OK) st = kt_device_alloc(b.ctx, b.dev, TOTAL * sizeof(float), (void **)&b.dout);
    if (st != KT_OK) {
        fprintf(stderr, "rowsum: setting up: %s %s\n", kt_last_error(), ktops_last_error());
        return 1;
    }
    unsigned s = 12345u; /* multiples of 1/4 from -4 to 4: every order of summation gives the same bits */
    for (size_t i = 0; i < TOTAL; i++) {
        s = s * 1664525u + 1013904223u;
        b.in[i] = (float)((int)((s >> 24) % 33) - 16) * 0.25f;
        b.poison[i] = NAN;
    }
    if (kt_device_write(b.ctx, b.dev, b.din, b.in, TOTAL * sizeof(float)) != KT_OK) {
        fprintf(stderr, "rowsum: %s\n", kt_last_error());
        return 1;
    }
    printf("device %zu: %s, %d SMs; %d rounds; GB/s of read + written bytes; %s\n", b.dev,
           kt_device_name(kt_context_device(b.ctx, b.dev)), ktops_cuda_sm_count(b.cu), rounds,
           cold ? "every call after an L2 flush (tuned the same way)" : "calls back to back (--warm; tuned without flushing)");
    printf("%8s %8s %7s %9s %9s %9s %9s %6s     %s\n", "cols", "rows", "tune_s", "block", "persist", "split", "kerntune",
           "ratio", "kerntune's pick");
    double worst = 0;
    int wins = 0, chosen = 0, shapes = 0;
    for (int e = 0; e <= 20; e++) {
        if (quick && e % 3 != 0 && e != 20) continue;
        double ratio = 0;
        int w = 0, c = 0;
        if (!one_shape(&b, (int64_t)1 << e, rounds, &ratio, &w, &c)) continue;
        shapes++;
        if (ratio > worst) worst = ratio;
        wins += w;
        chosen += w && c;
    }
    printf("(P+: the persistent kernel wins by more than 1%% and kerntune chose it; P-: it wins and kerntune did not)\n");
    printf("RESULT rowsum_worst_ratio_to_best %.3f x\n", worst);
    printf("RESULT rowsum_persistent_chosen_where_it_wins %d/%d\n", chosen, wins);
    printf("RESULT rowsum_wrong_outputs %lld\n", b.wrong);
    printf("RESULT rowsum_failures %lld\n", b.failed);
    printf("RESULT rowsum_shapes_measured %d\n", shapes);
    for (size_t i = 0; i < b.nalone; i++) ktops_rowsum_destroy(b.alone[i].r);
    ktops_rowsum_destroy(b.full);
    kt_device_free(b.ctx, b.dev, b.din);
    kt_device_free(b.ctx, b.dev, b.dout);
    ktops_cuda_stream_destroy(b.cu, b.stream);
    ktops_cuda_close(b.cu);
    kt_context_destroy(b.ctx);
    free(b.in), free(b.out), free(b.poison), free(b.want);
    return b.wrong || b.failed ? 1 : 0;
}
