/*
 * search.h - what bench/search.c (the command: recorded spaces, the race's model, kerntune's
 * strategies) and bench/search_score.c (the autotuning methodology's score, Kernel Tuner's traces)
 * share.
 */
#ifndef KT_BENCH_SEARCH_H
#define KT_BENCH_SEARCH_H

#include <kerntune.h>
#include <kerntune/variants.h>

#include <stddef.h>
#include <stdint.h>

enum { RUNS = 8, MAX_SEEDS = 64 };

/* A recorded space: per configuration of the enumeration, its objective (recorded mean in ms,
 * INFINITY when invalid) and what evaluating it cost (ms). */
typedef struct space_data {
    kt_space *sp;
    size_t n;
    double *value, *cost;
    double *build;        /* what building it cost (compile, framework, validation; ms) */
    double *runs;         /* its first RUNS recorded runs (ms), as the replay backend serves them: in order */
    uint8_t *nruns;       /* how many of them it has (0 when invalid) */
    char **key;           /* per configuration: its values in T1 order, joined by "," */
    double opt, median, median_cost, mean_cost;
    double *worst_first;  /* the valid values, worst first */
    size_t nvalid;
} space_data;

/* One run: after each evaluation, the best found and the simulated time then. */
typedef struct trace {
    double *best, *time;
    size_t n;
} trace;

/* Kernel Tuner's runs of one strategy on one set (bench/kerneltuner.py's traces). */
typedef struct kt_runs {
    char strategy[64];
    trace runs[MAX_SEEDS];
    size_t nruns;
} kt_runs;

/* search.c: says what failed and exits; appends an evaluation's best and time to a run; orders
 * doubles ascending (qsort). */
void die(const char *what, const char *detail);
void trace_add(trace *t, size_t *cap, double best, double time);
int cmp_asc(const void *a, const void *b);

/* search_score.c: evaluations random sampling needs to reach cut-off q; the methodology's score
 * of runs over the window [t0, t1] (ms); the runs of set label in a bench/kerneltuner.py file
 * (one entry of out per strategy, at most max; returns how many). */
double cutoff_evals(const space_data *d, double q);
double score(const space_data *d, trace *runs, size_t nruns, double t0, double t1);
size_t load_kt(const char *path, const space_data *d, const char *label, kt_runs *out, size_t max);

#endif /* KT_BENCH_SEARCH_H */
