/*
 * bench.c - the CPU measurement engine.
 *
 * A deliberately simple engine: unmeasured warm-up runs, then measured runs timed one by one
 * with the monotonic clock until both a minimum number of runs and a minimum measured time are
 * reached (or a maximum number of runs), and the median as the estimate. Only the candidate
 * call sits between the two clock reads: restoring inputs, filling outputs, hooks and releasing
 * returned outputs happen in the trial's before() and after(), outside. Issue [5] replaces the
 * policy with racing.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

double kt__now_s(void) { return now_ns() * 1e-9; }

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One run: prepare, call, clean up. Stores the candidate's code in *rc and, when dt is set,
 * the time of the call alone. */
static kt_status one_run(const kt__trial *t, int *rc, double *dt) {
    const kt_arg *args = NULL;
    kt_status st = t->before(t->ctx, &args);
    if (st != KT_OK) return st;
    double t0 = dt ? now_ns() : 0;
    *rc = t->run(t->ctx, args);
    if (dt) {
        *dt = now_ns() - t0;
        double dev = t->device_ns ? t->device_ns(t->ctx) : -1;
        if (dev >= 0) *dt = dev;
    }
    return t->after(t->ctx);
}

kt_status kt__measure(const kt__measure_cfg *cfg, unsigned warmup_runs, const kt__trial *t, double *scratch,
                      kt__cand_result *res) {
    res->outcome = KT_OUTCOME_MEASURED;
    res->runs = 0;
    res->fail_code = 0;
    res->time_ns = -1;
    int rc = 0;
    for (unsigned i = 0; i < warmup_runs; i++) {
        kt_status st = one_run(t, &rc, NULL);
        if (st != KT_OK) return st;
        if (rc != 0) {
            res->outcome = KT_OUTCOME_FAILED;
            res->fail_code = rc;
            return KT_OK;
        }
    }
    double total = 0, min_ns = cfg->min_time_s * 1e9;
    unsigned n = 0;
    while (n < cfg->max_runs && (n < cfg->min_runs || total < min_ns)) {
        double dt = 0;
        kt_status st = one_run(t, &rc, &dt);
        if (st != KT_OK) return st;
        if (rc != 0) {
            res->outcome = KT_OUTCOME_FAILED;
            res->fail_code = rc;
            res->runs = n;
            return KT_OK;
        }
        scratch[n++] = dt;
        total += dt;
    }
    free(res->times); /* the runs in the order taken, for T4's runtimes */
    res->times = malloc((n ? n : 1) * sizeof *res->times);
    if (res->times != NULL) memcpy(res->times, scratch, n * sizeof *scratch);
    qsort(scratch, n, sizeof *scratch, cmp_double);
    res->time_ns = (n % 2) ? scratch[n / 2] : 0.5 * (scratch[n / 2 - 1] + scratch[n / 2]);
    res->runs = res->times != NULL ? n : 0;
    if (res->times == NULL) return kt__err(KT_ERR_NO_MEMORY, "measuring: out of memory for %u run times", n);
    return KT_OK;
}
