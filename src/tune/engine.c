/*
 * engine.c - the measurement engine: one engine for online tuning, the CLI and replay.
 *
 * The engine sees units as arms. It admits an arm (the tuner validates it), measures it by the
 * context's policy, and picks the fastest. Four policies:
 *
 *   race         (default) every arm is screened with two runs after a warm-up (more while
 *                the first is a warm-up outlier, see below); then the
 *                survivors run in rounds, one run each per round. After each round an arm is
 *                dropped as soon as it is, at the configured confidence, slower than the current
 *                best by more than the tolerance; the race stops when one arm is left, when the
 *                survivors are all within the tolerance of the best with confidence, when every
 *                survivor reached its run cap, or when a budget is spent. An arm dropped
 *                earlier that leaves the one arm left short of the confidence on the figures
 *                of the end (the winner's later runs can widen them) races again first.
 *   triton       as Triton's do_bench: one call, five runs to estimate the time, warm-up runs
 *                filling 25 ms, repetitions filling 100 ms (at least one of each), the median.
 *   kerneltuner  as Kernel Tuner: one warm-up, seven runs, the mean.
 *   fixed        warm-ups, then runs until a minimum count and time (kt_context_set_measure).
 *
 * Statistics are taken on log run times, which makes a slowdown a difference and the noise of
 * a kernel proportional to its time. An arm's estimate is the median; its spread is the scaled
 * median absolute deviation of its log times once it has three runs (never below a floor of
 * 0.5%, and until seven runs never below their log range over d_n, the expected range of n
 * normal draws: two of three runs alike have no median deviation at all), and before that a conservative prior, because one run says nothing of the noise: 30%
 * (or three times the spread pooled over the arms with three runs, if more) until 8 arms have
 * three runs, then three times their pooled spread, at least 2%. After screening, the 8 leading
 * arms get three runs first (a pilot), so that the pooled spread is the leaders'. The standard error of
 * a median of n runs is 1.2533 s / sqrt(n). An arm is dropped when
 *     log(m_j) - log(m_best) - log(1 + tolerance) > z * sqrt(se_j^2 + se_best^2)
 * with z the normal quantile of the confidence. The same statistics give the decision's
 * confidence: the smallest, over the other measured arms, of the probability that the winner
 * is no more than the tolerance slower than that arm.
 *
 * The median decides the drops, being robust against a stray slow run while an arm has few.
 * The time an arm reports, and the pick among the survivors (which by then have many runs),
 * is the mean of its kept runs: what the kernel costs on average, rare stalls included.
 *
 * First-run outliers: an arm that had no validation run gets one warm-up run, until 8 arms in a
 * row showed their warm-up no more than 10% slower than their first run; and on every arm, as
 * long as its first kept run is more than 10% slower than its next one, the first is counted
 * as a warm-up and discarded (at most three warm-ups in all), so warming up lasts until the
 * timings settle. Screening already settles (its second run shows an outlier first run, and a
 * run more replaces each discarded one): a kernel whose first runs are slow because the device
 * is still warming up (clocks rising after a build) is neither dropped for it nor reported to a
 * search that steers by the screened time (recorded on the W6600 of benchmark_hub: the best
 * convolution configurations ran 5.8, 4.0, 3.0 ms before settling at 1.45 ms).
 *
 * Only the candidate call sits between the two clock reads: restoring inputs, filling outputs,
 * flushing caches, hooks and releasing returned outputs happen in the trial's before() and
 * after(), outside. A device variant's time comes from the backend's timing events.
 */
#include "tune/stages.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ns(void) { return kt__now_s() * 1e9; }

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of n values (n > 0), sorting them in place. */
static double sort_median(double *v, size_t n) {
    qsort(v, n, sizeof *v, cmp_double);
    return (n % 2) ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The standard normal distribution and its quantile (by bisection: called once per tuning). */
static double phi(double x) { return 0.5 * erfc(-x / sqrt(2.0)); }

static double phi_inv(double p) {
    double lo = -40, hi = 40;
    for (int i = 0; i < 200; i++) {
        double mid = 0.5 * (lo + hi);
        if (phi(mid) < p) lo = mid;
        else hi = mid;
    }
    return 0.5 * (lo + hi);
}

#define SPREAD_FLOOR 0.005
#define SPREAD_PRIOR 0.3        /* the prior before enough arms show the noise */
#define SPREAD_PRIOR_MIN 0.02   /* the least prior, however quiet the others */
#define POOL_MIN 8              /* arms with three runs before their pooled spread is trusted */
#define SETTLE_RATIO 1.1
#define SETTLE_MAX 3
#define WARM_CHECKS 8           /* warm-ups without an outlier before warming up stops */

/* The engine's state of one arm. */
typedef struct arm {
    kt__cand_result *r;
    kt__trial trial;
    unsigned cap;      /* capacity of r->times */
    bool racing;       /* admitted, measured and not dropped */
    bool settled;      /* its first kept run is not a warm-up outlier */
    double m, s;       /* log median and spread (s < 0: not known from its own runs) */
} arm;

typedef struct engine {
    const kt__measure_cfg *cfg;
    const kt__budget *budget;
    const kt__engine_io *io;
    arm *arms;
    size_t n;
    double *scratch;   /* sized for the longest run list */
    size_t scratch_cap;
    double start_s;
    double z, tol_log;
    double pooled;     /* spread pooled over arms with 3 runs or more; 0 when none */
    size_t npooled;    /* how many arms it pools */
    unsigned warm_checks; /* dedicated warm-ups in a row that showed no first-run outlier */
    bool any_sample;
    kt__engine_out *out;
} engine;

/* The tuning asked for no more admissions (io->stopped). */
static bool halted(const engine *e) { return e->io->stopped && e->io->stopped(e->io->user); }

static bool budget_spent(const engine *e) {
    if (!e->any_sample) return false; /* a budget never leaves a key undecided */
    if (e->budget->runs && e->out->runs >= e->budget->runs) return true;
    if (e->budget->seconds > 0 && kt__clock_s(e->io->clock, e->io->clock_user) - e->start_s >= e->budget->seconds) return true;
    return false;
}

static kt_status grow_scratch(engine *e, size_t n) {
    if (n <= e->scratch_cap) return KT_OK;
    size_t cap = e->scratch_cap ? e->scratch_cap : 64;
    while (cap < n) cap *= 2;
    double *p = realloc(e->scratch, cap * sizeof *p);
    if (p == NULL) return kt__err(KT_ERR_NO_MEMORY, "measuring: out of memory for %zu run times", n);
    e->scratch = p;
    e->scratch_cap = cap;
    return KT_OK;
}

/* Appends a run time to the arm's list. */
static kt_status keep(engine *e, arm *a, double t) {
    kt__cand_result *r = a->r;
    if (r->runs == a->cap) {
        unsigned cap = a->cap ? a->cap * 2 : 8;
        double *p = realloc(r->times, (size_t)cap * sizeof *p);
        if (p == NULL) return kt__err(KT_ERR_NO_MEMORY, "measuring: out of memory for %u run times", cap);
        r->times = p;
        a->cap = cap;
    }
    r->times[r->runs++] = t;
    return grow_scratch(e, r->runs);
}

/* One run of arm a: prepare, call, clean up. When t is set, stores the call's time (the
 * device's, when the trial has one). Returns false in *ok when the candidate failed (the arm
 * is then FAILED). */
static kt_status one_run(engine *e, arm *a, double *t, bool *ok) {
    const kt__trial *tr = &a->trial;
    const kt_arg *args = NULL;
    *ok = false;
    double w0 = now_ns();
    kt_status st = tr->before(tr->ctx, &args);
    if (st != KT_OK) return st;
    double t0 = now_ns();
    int rc = tr->run(tr->ctx, args);
    double dt = now_ns() - t0;
    double dev = tr->device_ns ? tr->device_ns(tr->ctx) : -1;
    if (dev >= 0) dt = dev;
    st = tr->after(tr->ctx);
    a->r->framework_ns += fmax(0, now_ns() - w0 - dt); /* all but the run itself */
    e->out->runs++;
    if (st != KT_OK) return st; /* not the candidate's failure: the tuning stops */
    if (rc != 0) {
        a->r->outcome = KT_OUTCOME_FAILED;
        a->r->fail_code = rc;
        a->racing = false;
        return st;
    }
    e->out->measure_ns += dt;
    a->r->spent_ns += dt;
    if (t) *t = dt;
    *ok = true;
    return st;
}

/* A warm-up run (not kept); its time in *t when t is set. */
static kt_status warm(engine *e, arm *a, bool *ok, double *t) {
    kt_status st = one_run(e, a, t, ok);
    if (*ok) a->r->warmups++;
    return st;
}

/* A measured run (kept). */
static kt_status sample(engine *e, arm *a, bool *ok) {
    double t = 0;
    kt_status st = one_run(e, a, &t, ok);
    if (st == KT_OK && *ok) {
        st = keep(e, a, t);
        e->any_sample = true;
    }
    return st;
}

/* Recomputes an arm's log median and spread from its kept runs. */
static void stats(engine *e, arm *a) {
    kt__cand_result *r = a->r;
    size_t n = r->runs;
    if (n == 0) return;
    memcpy(e->scratch, r->times, n * sizeof *r->times);
    a->m = log(sort_median(e->scratch, n));
    if (n < 3) {
        a->s = -1;
        return;
    }
    double lo = r->times[0], hi = r->times[0];
    for (size_t i = 0; i < n; i++) {
        e->scratch[i] = fabs(log(r->times[i]) - a->m);
        lo = fmin(lo, r->times[i]), hi = fmax(hi, r->times[i]);
    }
    a->s = fmax(1.4826 * sort_median(e->scratch, n), SPREAD_FLOOR);
    /* a few runs' median deviation says little: two of three alike give none at all (runs of
     * 1.14, 2.17 and 1.14 ms told apart from 1.52, 1.93, 1.53 at 0.999999); until seven runs the
     * spread is at least what their range says (the range of n normal draws is d_n standard
     * deviations), which a stall would inflate only while the runs are few */
    static const double d_n[7] = {0, 0, 0, 1.693, 2.059, 2.326, 2.534};
    if (n < 7) a->s = fmax(a->s, log(hi / lo) / d_n[n]);
}

/* Drops leading warm-up outliers once a second run shows them (race only). */
static void settle(engine *e, arm *a) {
    kt__cand_result *r = a->r;
    while (!a->settled && r->runs >= 2) {
        if (r->times[0] > SETTLE_RATIO * r->times[1] && r->warmups < SETTLE_MAX) {
            memmove(r->times, r->times + 1, (r->runs - 1) * sizeof *r->times);
            r->runs--;
            r->warmups++;
        } else {
            a->settled = true;
        }
    }
    stats(e, a);
}

/* Standard error of an arm's log median. */
static double std_err(const engine *e, const arm *a) {
    double s = a->s >= 0                 ? a->s
               : e->npooled >= POOL_MIN ? fmax(SPREAD_PRIOR_MIN, 3 * e->pooled)
                                         : fmax(SPREAD_PRIOR, 3 * e->pooled);
    return 1.2533 * s / sqrt((double)a->r->runs);
}

static void pool(engine *e) {
    size_t k = 0;
    double *v = e->scratch;
    for (size_t i = 0; i < e->n; i++)
        if (e->arms[i].r && e->arms[i].r->outcome == KT_OUTCOME_MEASURED && e->arms[i].s >= 0) v[k++] = e->arms[i].s;
    e->pooled = k == 0 ? 0 : sort_median(v, k);
    e->npooled = k;
}

/* The racing arm with the lowest estimate, or -1. */
static long best_racing(const engine *e) {
    long b = -1;
    for (size_t i = 0; i < e->n; i++)
        if (e->arms[i].racing && e->arms[i].r->runs > 0 && (b < 0 || e->arms[i].m < e->arms[b].m)) b = (long)i;
    return b;
}

static bool slower(const engine *e, const arm *a, const arm *b) {
    double se = sqrt(pow(std_err(e, a), 2) + pow(std_err(e, b), 2));
    return a->m - b->m - e->tol_log > e->z * se;
}

static void report(engine *e, size_t done) {
    const kt__engine_io *io = e->io;
    if (io->progress == NULL) return;
    long b = -1;
    for (size_t i = 0; i < e->n; i++) {
        const kt__cand_result *r = e->arms[i].r;
        if (r && r->outcome == KT_OUTCOME_MEASURED && r->runs > 0 && (b < 0 || e->arms[i].m < e->arms[b].m)) b = (long)i;
    }
    io->progress(io->user, done, e->n, e->out->valid, e->out->failed, b >= 0 ? exp(e->arms[b].m) : -1);
}

/* Admits arm i (the tuner validates it). Returns KT_OK with *usable when it may be measured. */
static kt_status admit(engine *e, size_t i, bool *usable, bool *validated) {
    unsigned runs = 0;
    arm *a = &e->arms[i];
    double t0 = now_ns();
    kt_status st = e->io->admit(e->io->user, i, usable, &runs);
    e->io->result(e->io->user, i)->validate_ns += now_ns() - t0;
    e->out->runs += runs;
    *validated = runs > 0;
    if (st != KT_OK || !*usable) return st;
    a->r = e->io->result(e->io->user, i);
    e->io->trial(e->io->user, i, &a->trial);
    a->r->outcome = KT_OUTCOME_MEASURED;
    return KT_OK;
}

/* Measures arm a fully by one of the fixed-count policies. */
static kt_status measure_fixed(engine *e, arm *a, bool validated) {
    const kt__measure_cfg *c = e->cfg;
    kt__cand_result *r = a->r;
    bool ok = true;
    kt_status st = KT_OK;
    unsigned warmups = 0, min_runs = 1, max_runs = 1;
    double min_ns = 0;
    if (c->policy == KT_POLICY_TRITON) {
        st = warm(e, a, &ok, NULL); /* do_bench's first call */
        double est = 0;
        for (int i = 0; i < 5 && st == KT_OK && ok && !budget_spent(e); i++) {
            double t = 0;
            st = warm(e, a, &ok, &t);
            est += t;
        }
        est = est / 5 / 1e6; /* ms per run */
        warmups = est > 0 ? (unsigned)fmax(1, fmin(1e7, floor(25 / est))) : 1;
        min_runs = max_runs = est > 0 ? (unsigned)fmax(1, fmin(1e7, floor(100 / est))) : 1;
    } else if (c->policy == KT_POLICY_KERNELTUNER) {
        warmups = 1;
        min_runs = max_runs = 7;
    } else {
        warmups = c->warmup_runs > 0 && validated ? c->warmup_runs - 1 : c->warmup_runs;
        min_runs = c->min_runs;
        max_runs = c->max_runs;
        min_ns = c->min_time_s * 1e9;
    }
    for (unsigned i = 0; i < warmups && st == KT_OK && ok && !budget_spent(e); i++) st = warm(e, a, &ok, NULL);
    double total = 0;
    while (st == KT_OK && ok && r->runs < max_runs && (r->runs < min_runs || total < min_ns) && !budget_spent(e)) {
        st = sample(e, a, &ok);
        if (st == KT_OK && ok) total += r->times[r->runs - 1];
    }
    if (st != KT_OK || !ok || r->runs == 0) return st;
    stats(e, a);
    return KT_OK;
}

/* Drops the racing arms that are slower than the best with confidence. */
static void eliminate(engine *e) {
    pool(e);
    long b = best_racing(e);
    if (b < 0) return;
    for (size_t i = 0; i < e->n; i++) {
        arm *a = &e->arms[i];
        if (a->racing && (long)i != b && slower(e, a, &e->arms[b])) a->racing = false;
    }
}

/* Whether arm a, measured and out of the race, leaves the decision for w short of the confidence
 * the race asks for (as conclude() computes it) while it may still run. An arm is dropped only
 * when it is slower with confidence, which implies that; but the figures move after its drop:
 * one preempted run among the winner's first three widens the winner's spread (its range, until
 * seven runs) and, while fewer than POOL_MIN arms have three runs, the prior of every arm with
 * fewer. On a loaded 2-core machine a 0.1 ms winner over a 40x slower arm ended at confidence
 * 0.75-0.99 that way in a third of the races, and a decision short of its confidence is raced
 * again by the next process (tune/recall.c). */
static bool leaves_short(const engine *e, const arm *w, const arm *a) {
    if (a == w || a->racing || a->r == NULL || a->r->outcome != KT_OUTCOME_MEASURED || a->r->runs == 0) return false;
    if (a->r->runs >= e->cfg->race_max_runs || w->r->runs >= e->cfg->race_max_runs) return false;
    double se = sqrt(pow(std_err(e, a), 2) + pow(std_err(e, w), 2));
    return phi((a->m - w->m + e->tol_log) / se) < e->cfg->confidence;
}

/* With one arm w left: how many arms leave it short. */
static size_t short_arms(const engine *e, long w) {
    size_t k = 0;
    for (size_t i = 0; i < e->n; i++) k += leaves_short(e, &e->arms[w], &e->arms[i]);
    return k;
}

/* ... and they race again, until they are dropped once more on the figures of then (a drop
 * implies the confidence) or reach their cap. */
static void revive_short(engine *e, long w) {
    for (size_t i = 0; i < e->n; i++)
        if (leaves_short(e, &e->arms[w], &e->arms[i])) e->arms[i].racing = true;
}

/* Whether the race is over: one arm left (and no arm out of the race that leaves it short of
 * the confidence asked for), or every survivor within the tolerance of the best with confidence, or
 * every survivor at its cap. Survivors found equal still get half the cap first: they are
 * picked by their means, which should include rare stalls (on the W6600 dedispersion data the
 * median-fastest configuration stalls in one run of 32, and its mean is 1.2% above the next
 * one's). */
static bool race_over(const engine *e) {
    long b = best_racing(e);
    if (b < 0) return true;
    bool within = true, capped = true;
    size_t left = 0;
    for (size_t i = 0; i < e->n; i++) {
        const arm *a = &e->arms[i];
        if (!a->racing) continue;
        left++;
        if (a->r->runs < e->cfg->race_max_runs) capped = false;
        if (a->r->runs < (e->cfg->race_max_runs + 1) / 2) within = false; /* see below */
        if ((long)i == b) continue;
        double se = sqrt(pow(std_err(e, a), 2) + pow(std_err(e, &e->arms[b]), 2));
        if (a->m - e->arms[b].m + e->z * se >= e->tol_log) within = false;
    }
    if (left == 1) return short_arms(e, b) == 0;
    return within || capped;
}

typedef struct ranked {
    double m;
    size_t i;
} ranked;

static int cmp_ranked(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    return (x->m > y->m) - (x->m < y->m);
}

/* The racing arms, fastest first, into order; returns how many. */
static size_t rank(const engine *e, ranked *order) {
    size_t k = 0;
    for (size_t i = 0; i < e->n; i++)
        if (e->arms[i].racing) order[k++] = (ranked){e->arms[i].m, i};
    qsort(order, k, sizeof *order, cmp_ranked);
    return k;
}

/* One more run of a racing arm; false when the budget is spent or it failed. */
static kt_status another(engine *e, arm *a) {
    bool ok = true;
    kt_status st = sample(e, a, &ok);
    if (st != KT_OK) return st;
    if (ok) {
        settle(e, a);
    } else {
        e->out->valid--;
        e->out->failed++;
    }
    return KT_OK;
}

/* Puts every measured arm back in the race (after the best failed: arms dropped against it
 * were judged against a candidate that is out). */
static void revive(engine *e) {
    for (size_t i = 0; i < e->n; i++) {
        arm *a = &e->arms[i];
        if (a->r && a->r->outcome == KT_OUTCOME_MEASURED && a->r->runs > 0) a->racing = true;
    }
}

/* The rounds after screening. A pilot first: the leading arms get three runs each, so that
 * their pooled spread, rather than the prior, judges the arms that ran once (not when one arm
 * alone was measured: nothing is judged, and under a budget of one configuration on PoCL a run
 * of Kernel Tuner's 4096^2 convolution example is 2.6 s). Then rounds of one run per survivor,
 * fastest first, each checked against the best just before its run. */
static kt_status race_rounds(engine *e) {
    ranked *order = malloc((e->n ? e->n : 1) * sizeof *order);
    if (order == NULL) return kt__err(KT_ERR_NO_MEMORY, "measuring: out of memory for %zu units", e->n);
    kt_status st = KT_OK;
    eliminate(e);
    size_t k = rank(e, order), measured = 0;
    for (size_t i = 0; i < e->n; i++)
        measured += e->arms[i].r && e->arms[i].r->outcome == KT_OUTCOME_MEASURED && e->arms[i].r->runs > 0;
    for (size_t j = 0; j < k && j < POOL_MIN && measured > 1 && st == KT_OK; j++) {
        arm *a = &e->arms[order[j].i];
        while (st == KT_OK && a->racing && a->r->runs < 3 && a->r->runs < e->cfg->race_max_runs && !budget_spent(e))
            st = another(e, a);
    }
    if (st == KT_OK) eliminate(e);
    while (st == KT_OK && !race_over(e) && !budget_spent(e)) {
        long b = best_racing(e);
        size_t left = 0;
        for (size_t i = 0; i < e->n; i++) left += e->arms[i].racing;
        if (left == 1) revive_short(e, b);
        k = rank(e, order);
        for (size_t j = 0; j < k && st == KT_OK && !budget_spent(e); j++) {
            arm *a = &e->arms[order[j].i];
            if (!a->racing || a->r->runs >= e->cfg->race_max_runs) continue;
            if (b >= 0 && (long)order[j].i != b && slower(e, a, &e->arms[b])) {
                a->racing = false;
                continue;
            }
            bool had3 = a->r->runs >= 3;
            st = another(e, a);
            if (st == KT_OK && !a->racing && (long)order[j].i == b) { /* the best failed: what it beat races again */
                revive(e);
                b = best_racing(e);
                break;
            }
            if (a->racing && (b < 0 || a->m < e->arms[b].m)) b = (long)order[j].i;
            if (!had3 && a->r->runs >= 3 && e->npooled < 4 * POOL_MIN) pool(e);
        }
        if (st == KT_OK) eliminate(e);
    }
    free(order);
    return st;
}

/* The winner and the decision's confidence. */
static void conclude(engine *e) {
    long w = -1;
    for (size_t i = 0; i < e->n; i++) {
        const arm *a = &e->arms[i];
        if (a->r == NULL || a->r->outcome != KT_OUTCOME_MEASURED || a->r->runs == 0) continue;
        kt__cand_result *r = a->r;
        if (e->cfg->policy == KT_POLICY_RACE || e->cfg->policy == KT_POLICY_KERNELTUNER) {
            double sum = 0;
            for (unsigned k = 0; k < r->runs; k++) sum += r->times[k];
            r->time_ns = sum / r->runs;
        } else {
            r->time_ns = exp(a->m);
        }
        double se = std_err(e, a);
        r->ci_low_ns = fmin(r->time_ns, exp(a->m - e->z * se));
        r->ci_high_ns = fmax(r->time_ns, exp(a->m + e->z * se));
        /* in a race the winner is the best survivor: a dropped arm is slower with confidence;
         * the survivors are the finalists (under the other policies, every measured arm) */
        r->finalist = e->cfg->policy != KT_POLICY_RACE || a->racing;
        if (e->cfg->policy == KT_POLICY_RACE && !a->racing) continue;
        if (w < 0 || r->time_ns < e->arms[w].r->time_ns) w = (long)i;
    }
    if (w < 0) /* every survivor failed late: the best of the rest */
        for (size_t i = 0; i < e->n; i++) {
            const arm *a = &e->arms[i];
            if (a->r && a->r->outcome == KT_OUTCOME_MEASURED && a->r->runs > 0 && (w < 0 || a->m < e->arms[w].m)) w = (long)i;
        }
    e->out->best = w;
    e->out->confidence = w >= 0 ? 1.0 : 0.0;
    if (w < 0) return;
    e->arms[w].r->finalist = true;
    const arm *b = &e->arms[w];
    for (size_t i = 0; i < e->n; i++) {
        const arm *a = &e->arms[i];
        if ((long)i == w || a->r == NULL || a->r->outcome != KT_OUTCOME_MEASURED || a->r->runs == 0) continue;
        double se = sqrt(pow(std_err(e, a), 2) + pow(std_err(e, b), 2));
        double p = phi((a->m - b->m + e->tol_log) / se);
        if (p < e->out->confidence) e->out->confidence = p;
    }
}

/* Admits unit i and screens it (one run after a warm-up in a race; the whole measurement
 * under the other policies). *ns receives its screened time, INFINITY when it failed or the
 * budget ran out before it ran. */
static kt_status screen(engine *e, size_t i, double *ns) {
    const kt__measure_cfg *cfg = e->cfg;
    kt__engine_out *out = e->out;
    bool usable = false, validated = false, ok = true;
    *ns = INFINITY;
    kt_status st = admit(e, i, &usable, &validated);
    if (st != KT_OK) return st;
    if (!usable) {
        out->failed++;
        return KT_OK;
    }
    arm *a = &e->arms[i];
    if (cfg->policy != KT_POLICY_RACE) {
        st = measure_fixed(e, a, validated);
    } else {
        /* a dedicated warm-up for an arm that did not run yet, until WARM_CHECKS of them
         * showed no first-run outlier; the settle check stays on for every arm */
        double w = -1;
        bool warming = !validated && e->warm_checks < WARM_CHECKS;
        if (warming) st = warm(e, a, &ok, &w);
        if (st == KT_OK && ok) st = sample(e, a, &ok);
        if (st == KT_OK && ok && warming) {
            e->warm_checks++;
            if (w > SETTLE_RATIO * a->r->times[0]) e->warm_checks = 0; /* an outlier: keep warming up */
        }
        /* a second run, and more while the first kept one is a warm-up outlier: a kernel still
         * warming up (a device's clocks rising after a build) is not taken for a slow one and
         * dropped, nor is a search told a time it would steer by wrongly */
        if (st == KT_OK && ok && !budget_spent(e)) st = sample(e, a, &ok);
        while (st == KT_OK && ok) {
            settle(e, a); /* settled, or its first run dropped as a warm-up */
            if (a->settled || a->r->runs >= 2 || budget_spent(e)) break;
            st = sample(e, a, &ok);
        }
        if (st == KT_OK && ok) {
            a->racing = true;
            long b = best_racing(e); /* a clear loser is out after its screening */
            if (b >= 0 && b != (long)i && slower(e, a, &e->arms[b])) a->racing = false;
        }
    }
    if (st != KT_OK) return st;
    if (a->r->outcome == KT_OUTCOME_MEASURED && a->r->runs > 0) {
        out->valid++;
        *ns = exp(a->m);
    } else if (a->r->outcome == KT_OUTCOME_MEASURED) {
        a->r->outcome = KT_OUTCOME_NOT_RUN; /* the budget ran out first */
    } else {
        out->failed++;
    }
    return KT_OK;
}

kt_status kt__engine_run(const kt__measure_cfg *cfg, const kt__budget *budget, const kt__engine_io *io, const bool *eligible,
                         size_t n, kt__engine_out *out) {
    *out = (kt__engine_out){.best = -1};
    engine e = {.cfg = cfg, .budget = budget, .io = io, .n = n, .out = out, .start_s = io->start_s};
    e.z = phi_inv(cfg->confidence);
    e.tol_log = log1p(cfg->tolerance);
    e.arms = calloc(n ? n : 1, sizeof *e.arms);
    kt_status st = e.arms ? grow_scratch(&e, n + 8) : kt__err(KT_ERR_NO_MEMORY, "measuring: out of memory for %zu units", n);
    size_t admitted = 0;
    if (io->next != NULL) { /* in the order a search gives, which keeps the budget of units */
        size_t batch[64];
        while (st == KT_OK && !budget_spent(&e) && !halted(&e)) {
            size_t k = io->next(io->user, batch, sizeof batch / sizeof batch[0]);
            if (k == 0) break;
            for (size_t j = 0; j < k && st == KT_OK && !budget_spent(&e) && !halted(&e); j++) { /* the rest of a spent budget stays NOT_RUN */
                double ns = INFINITY;
                st = screen(&e, batch[j], &ns);
                admitted++;
                if (st == KT_OK) io->told(io->user, batch[j], ns);
                report(&e, admitted);
            }
        }
        for (size_t i = 0; st == KT_OK && i < n; i++) /* build failures and rejections */
            if (!eligible[i] && io->result(io->user, i)->outcome != KT_OUTCOME_NOT_RUN) out->failed++;
    }
    for (size_t i = 0; st == KT_OK && io->next == NULL && i < n; i++) {
        if (i > 0) report(&e, i);
        if (!eligible[i]) {
            if (io->result(io->user, i)->outcome != KT_OUTCOME_NOT_RUN) out->failed++; /* build failed, rejected */
            continue;
        }
        if ((budget->units && admitted >= budget->units && e.any_sample) || budget_spent(&e) || halted(&e)) continue; /* left NOT_RUN */
        double ns;
        st = screen(&e, i, &ns);
        admitted++;
        if (st == KT_OK && io->told) io->told(io->user, i, ns);
    }
    if (st == KT_OK && cfg->policy == KT_POLICY_RACE && !halted(&e)) st = race_rounds(&e);
    if (st == KT_OK) {
        conclude(&e);
        report(&e, n);
    }
    free(e.scratch);
    free(e.arms);
    return st;
}
