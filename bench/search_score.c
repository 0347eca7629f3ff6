/*
 * search_score.c - bench/search's scoring: the autotuning methodology's performance score,
 * computed as the `autotuning-methodology` package (1.1.0) does, up to what is noted below, and
 * Kernel Tuner's strategies read from bench/kerneltuner.py's traces to be scored the same way.
 *   - P(t) = (f_s(t) - f_rand(t)) / (f_opt - f_rand(t)), averaged over 1000 equidistant t;
 *   - f_rand(t): the expected best of random sampling after k = t / T evaluations, T the mean
 *     cost of an evaluation ("mean_per_feval": the valid configurations' mean cost plus the
 *     invalid share times the invalid ones' mean cost), k at least 1: the value at index
 *     round(k (N + 1) / (k + 1)) of the N valid values sorted worst first (Python's rounding,
 *     half to even), interpolated linearly between whole k (the package smooths with PCHIP);
 *   - the window: from the time random sampling needs to reach the 1% cut-off to the time it
 *     needs for the 96% one (the "within 4% of the optimum"; the package's default is
 *     95%), where the q cut-off value is f_opt + (median - f_opt) (1 - q) (median: of the valid
 *     values, the two middle ones averaged), its evaluations ceil(i / (N + 1 - i)) for the
 *     first worst-first index i at or below it (one less when that value is the optimum), and
 *     its time those evaluations times the median cost of a configuration;
 *   - f_s(t): over the seeds' runs that found something valid by t, the mean rank (0: the best)
 *     of the best each found, mapped back to the value of that rank (the package fits an
 *     isotonic regression to the ranks, which only smooths this); a run's best stays after it
 *     stops. Before any run found anything valid, the space's median.
 * Kernel Tuner's strategies come as traces (--kt FILE, from bench/kerneltuner.py: each run's
 * evaluations in order); each is charged the same recorded costs, each configuration once (a
 * re-visit is served from Kernel Tuner's cache, as its own simulated time counts it; the package
 * charges re-visits again).
 */
#define _GNU_SOURCE
#include "search.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { GRID = 1000 }; /* the points of the window the score averages over */

/* ---- the methodology's score ---------------------------------------------------------------- */

/* Python's round(): half to even (the default rounding mode). */
static double pyround(double x) { return nearbyint(x); }

/* The expected best of random sampling after k (>= 1, whole) evaluations. */
static double random_at(const space_data *d, double k) {
    double N = (double)d->nvalid, idx = pyround(k * (N + 1) / (k + 1));
    if (idx > N - 1) idx = N - 1;
    return d->worst_first[(size_t)idx];
}

/* ... after t ms: k = t / mean cost, at least 1, between whole k linearly. */
static double random_expected(const space_data *d, double t) {
    double k = d->mean_cost > 0 ? t / d->mean_cost : 1;
    if (k < 1) k = 1;
    double k0 = floor(k), w = k - k0;
    return w == 0 ? random_at(d, k0) : (1 - w) * random_at(d, k0) + w * random_at(d, k0 + 1);
}

/* Evaluations random sampling needs to reach cut-off q (the package's cutoff_point). */
double cutoff_evals(const space_data *d, double q) {
    double target = d->opt + (d->median - d->opt) * (1 - q);
    size_t N = d->nvalid, i = 0;
    while (i < N && d->worst_first[i] > target) i++;
    if (i == N) i = N - 1;
    if (d->worst_first[i] == d->opt && q != 1 && i > 0) i--;
    return ceil((double)i / (double)(N + 1 - i));
}

/* The rank (0: the best) of value among the valid values. */
static size_t rank_of(const space_data *d, double value) {
    size_t lo = 0, hi = d->nvalid; /* worst first: the first index whose value is <= value */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (d->worst_first[mid] > value) lo = mid + 1;
        else hi = mid;
    }
    return lo < d->nvalid ? d->nvalid - 1 - lo : 0;
}

/* The strategy's curve at t: the mean rank of the runs' bests, as a value. */
static double strategy_at(const space_data *d, trace *runs, size_t nruns, size_t *pos, double t) {
    double ranks = 0;
    size_t have = 0;
    for (size_t r = 0; r < nruns; r++) {
        while (pos[r] < runs[r].n && runs[r].time[pos[r]] <= t) pos[r]++; /* t only grows */
        if (pos[r] == 0 || !isfinite(runs[r].best[pos[r] - 1])) continue;
        ranks += (double)rank_of(d, runs[r].best[pos[r] - 1]);
        have++;
    }
    if (have == 0) return d->median;
    size_t rank = (size_t)pyround(ranks / (double)have);
    return d->worst_first[d->nvalid - 1 - (rank < d->nvalid ? rank : d->nvalid - 1)];
}

double score(const space_data *d, trace *runs, size_t nruns, double t0, double t1) {
    size_t *pos = calloc(nruns ? nruns : 1, sizeof *pos);
    if (pos == NULL) die("score", "out of memory");
    double sum = 0;
    size_t points = 0;
    for (int g = 0; g < GRID; g++) {
        double t = t0 + (t1 - t0) * g / (GRID - 1), fr = random_expected(d, t);
        if (fr == d->opt) continue; /* P is undefined where random sampling is at the optimum */
        sum += (strategy_at(d, runs, nruns, pos, t) - fr) / (d->opt - fr);
        points++;
    }
    free(pos);
    return points ? sum / (double)points : NAN;
}

/* ---- Kernel Tuner's traces ---------------------------------------------------------------- */

static int cmp_key(const void *a, const void *b) {
    const char *const *x = a, *const *y = b;
    return strcmp(*x, *y);
}

/* Reads the runs of set label from a bench/kerneltuner.py file into out (one entry per strategy). */
size_t load_kt(const char *path, const space_data *d, const char *label, kt_runs *out, size_t max) {
    FILE *f = fopen(path, "r");
    if (f == NULL) die(path, "cannot be read");
    /* the configurations' keys, sorted, each pointing back at its index */
    typedef struct entry {
        const char *key;
        size_t index;
    } entry;
    entry *idx = malloc(d->n * sizeof *idx);
    if (idx == NULL) die(path, "out of memory");
    for (size_t c = 0; c < d->n; c++) idx[c] = (entry){d->key[c], c};
    qsort(idx, d->n, sizeof *idx, cmp_key);
    size_t n = 0, lineno = 0;
    char *line = NULL;
    size_t cap = 0;
    uint8_t *seen = malloc(d->n);
    while (getline(&line, &cap, f) > 0) {
        lineno++;
        json_error_t jerr;
        json_t *j = json_loads(line, 0, &jerr);
        if (j == NULL) {
            fprintf(stderr, "search: %s:%zu: %s\n", path, lineno, jerr.text);
            exit(1);
        }
        const char *sl = json_string_value(json_object_get(j, "set")), *st = json_string_value(json_object_get(j, "strategy"));
        json_t *cfgs = json_object_get(j, "configs");
        if (!sl || !st || !json_is_array(cfgs)) {
            fprintf(stderr, "search: %s:%zu: expected set, strategy and configs\n", path, lineno);
            exit(1);
        }
        if (strcmp(sl, label) != 0) {
            json_decref(j);
            continue;
        }
        size_t s = 0;
        while (s < n && strcmp(out[s].strategy, st) != 0) s++;
        if (s == n) {
            if (n == max) die(path, "too many strategies");
            memset(&out[n], 0, sizeof out[n]);
            snprintf(out[n++].strategy, sizeof out[0].strategy, "%s", st);
        }
        if (out[s].nruns == MAX_SEEDS) die(path, "more than 64 runs of a strategy");
        trace *t = &out[s].runs[out[s].nruns++];
        *t = (trace){0};
        size_t tcap = 0, i;
        double best = INFINITY, now = 0;
        json_t *c;
        memset(seen, 0, d->n);
        json_array_foreach(cfgs, i, c) {
            entry probe = {json_string_value(c), 0}, *e = probe.key ? bsearch(&probe, idx, d->n, sizeof *idx, cmp_key) : NULL;
            if (e == NULL) {
                fprintf(stderr, "search: %s:%zu: configs[%zu] (%s) is not in the space\n", path, lineno, i, probe.key ? probe.key : "?");
                exit(1);
            }
            if (seen[e->index]) continue; /* served from Kernel Tuner's cache: no cost */
            seen[e->index] = 1;
            now += d->cost[e->index];
            best = fmin(best, d->value[e->index]);
            trace_add(t, &tcap, best, now);
        }
        json_decref(j);
    }
    free(seen);
    free(line);
    free(idx);
    fclose(f);
    return n;
}
