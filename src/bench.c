/*
 * bench.c - the CPU measurement engine for native candidates.
 *
 * A deliberately simple engine: a fixed number of unmeasured warm-up runs, then measured runs
 * timed one by one with the monotonic clock until both a minimum number of runs and a minimum
 * measured time are reached (or a maximum number of runs), and the median as the estimate. Only
 * the candidate call sits between the two clock reads. Issue [5] replaces it with racing.
 */
#include "internal.h"

#include <stdlib.h>
#include <time.h>

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void kt__measure_native(const kt__measure_cfg *cfg, kt_native_fn fn, void *user, const kt_arg *args,
                        size_t nargs, double *scratch, kt__cand_result *res) {
    res->outcome = KT_OUTCOME_MEASURED;
    res->runs = 0;
    res->fail_code = 0;
    res->time_ns = -1;
    for (unsigned i = 0; i < cfg->warmup_runs; i++) {
        int rc = fn(args, nargs, user);
        if (rc != 0) {
            res->outcome = KT_OUTCOME_FAILED;
            res->fail_code = rc;
            return;
        }
    }
    double total = 0, min_ns = cfg->min_time_s * 1e9;
    unsigned n = 0;
    while (n < cfg->max_runs && (n < cfg->min_runs || total < min_ns)) {
        double t0 = now_ns();
        int rc = fn(args, nargs, user);
        double dt = now_ns() - t0;
        if (rc != 0) {
            res->outcome = KT_OUTCOME_FAILED;
            res->fail_code = rc;
            res->runs = n;
            return;
        }
        scratch[n++] = dt;
        total += dt;
    }
    qsort(scratch, n, sizeof *scratch, cmp_double);
    res->time_ns = (n % 2) ? scratch[n / 2] : 0.5 * (scratch[n / 2 - 1] + scratch[n / 2]);
    res->runs = n;
}
