/*
 * model.c - model-guided search (Bayesian optimisation): a Gaussian process models log time as
 * a function of the configuration's position on each parameter's value list (0 to 1), and the
 * next configurations are those of highest expected improvement over the best time so far.
 *
 *   - First INIT configurations at random (the design the model starts from).
 *   - Then, whenever the last fit's picks are out and either nothing is pending or results
 *     came in since (a caller that measures while it builds the next): fit the process to the
 *     results told (an invalid one
 *     counts as 1 in log units, e^1 = 2.7 times, worse than the worst valid one, so that the
 *     model steers away from where configurations fail; past FITMAX results, the FITMAX / 2
 *     best and the FITMAX / 2 latest of the others, which keeps a fit's cost bounded), and
 *     propose the untried configurations of largest expected improvement, as many as the caller
 *     asks for at once (BATCH to LATE_BATCH: a tuning asks for as many as it builds in
 *     parallel), among a pool: every untried configuration
 *     when there are at most POOL, else the untried neighbours of the best few and a random
 *     sample.
 *   - Past the budget (a search may be asked for more), cheaper: batches of LATE_BATCH, fitted to
 *     at most LATE_FITMAX results.
 *   - The process: zero mean on standardised log times, a Matern 5/2 kernel of one length scale
 *     over distances divided by sqrt(parameters), chosen among a few by marginal likelihood,
 *     and a noise variance for the timings' noise. Linear algebra by LAPACK (dpotrf, dpotrs,
 *     dtrtrs): the Cholesky factor of the kernel matrix gives the posterior mean and variance.
 */
#include "search/search.h"

#include <stdlib.h>
#include <string.h>

#ifndef KT_NO_LAPACK
#include <lapacke.h>
#endif

enum { INIT = 10, BATCH = 4, POOL = 1024, TOP = 8, FITMAX = 256, LATE_BATCH = 16, LATE_FITMAX = 64 };
#define NOISE 1e-2
#define XI 0.01

typedef struct model {
    size_t *obs;       /* every configuration told, in order */
    size_t nobs, cap;
    size_t fitset[FITMAX]; /* the configurations the process is fitted to */
    size_t nfit;
    size_t queue[LATE_BATCH]; /* the last fit's picks not yet proposed, best last */
    size_t nqueue;
    size_t outstanding;
    size_t fitted_at;  /* how many results the last fit saw */
    uint8_t *mine;
    double *K, *alpha, *ys, *x; /* work arrays, grown as needed; x: every configuration's position */
    size_t Kcap, acap, ycap;
    size_t fits;
    double ell;        /* the length scale of the last choice */
    bool failed;       /* LAPACK failed: propose at random from now on */
} model;

static void destroy(void *p) {
    model *m = p;
    if (m == NULL) return;
    free(m->obs), free(m->mine), free(m->K), free(m->alpha), free(m->ys), free(m->x), free(m);
}

static void *create(kt__search_core *core) {
    model *m = calloc(1, sizeof *m);
    if (m == NULL || (m->mine = calloc(core->lat->n, 1)) == NULL ||
        (m->x = malloc(core->lat->n * (core->lat->nparams ? core->lat->nparams : 1) * sizeof *m->x)) == NULL) {
        destroy(m);
        return NULL;
    }
    const kt__lattice *lat = core->lat;
    for (size_t i = 0; i < lat->n; i++)
        for (size_t p = 0; p < lat->nparams; p++)
            m->x[i * lat->nparams + p] = lat->nvalues[p] > 1 ? (double)lat->idx[i * lat->nparams + p] / (lat->nvalues[p] - 1) : 0.0;
    m->ell = 0.3;
    return m;
}

static bool grow(double **a, size_t *cap, size_t want) {
    if (*cap >= want) return true;
    double *b = realloc(*a, want * sizeof *b);
    if (b == NULL) return false;
    *a = b, *cap = want;
    return true;
}

/* The Matern 5/2 covariance of configurations i and j (prior variance 1). */
static double kernel(const model *m, const kt__lattice *lat, size_t i, size_t j, double ell) {
    const double *a = m->x + i * lat->nparams, *b = m->x + j * lat->nparams;
    double d2 = 0;
    for (size_t p = 0; p < lat->nparams; p++) d2 += (a[p] - b[p]) * (a[p] - b[p]);
    double r = sqrt(d2 / (double)(lat->nparams ? lat->nparams : 1)) / ell, s5 = sqrt(5.0) * r;
    return (1 + s5 + 5.0 * r * r / 3.0) * exp(-s5);
}

#ifndef KT_NO_LAPACK
/* Factors the kernel matrix of the observations for length scale ell into m->K (lower
 * Cholesky) and solves m->alpha; returns the log marginal likelihood, or -INFINITY when the
 * matrix would not factor. */
static double fit(model *m, const kt__lattice *lat, double ell) {
    const size_t k = m->nfit;
    for (size_t c = 0; c < k; c++)
        for (size_t r = c; r < k; r++) m->K[c * k + r] = kernel(m, lat, m->fitset[r], m->fitset[c], ell) + (r == c ? NOISE : 0.0);
    for (double jitter = 1e-8; LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (lapack_int)k, m->K, (lapack_int)k) != 0; jitter *= 100) {
        if (jitter > 1e-2) return -INFINITY;
        for (size_t c = 0; c < k; c++)
            for (size_t r = c; r < k; r++) m->K[c * k + r] = kernel(m, lat, m->fitset[r], m->fitset[c], ell) + (r == c ? NOISE + jitter : 0.0);
    }
    memcpy(m->alpha, m->ys, k * sizeof *m->ys);
    if (LAPACKE_dpotrs(LAPACK_COL_MAJOR, 'L', (lapack_int)k, 1, m->K, (lapack_int)k, m->alpha, (lapack_int)k) != 0) return -INFINITY;
    double ll = 0;
    for (size_t i = 0; i < k; i++) ll -= 0.5 * m->ys[i] * m->alpha[i] + log(m->K[i * k + i]);
    return ll;
}

static double normal_pdf(double z) { return exp(-0.5 * z * z) * 0.3989422804014327; /* 1 / sqrt(2 pi) */ }
static double normal_cdf(double z) { return 0.5 * erfc(-z / sqrt(2.0)); }

/* The candidates: every untried configuration, or the untried neighbours of the best TOP told
 * and a random sample, up to POOL. */
static size_t pool(model *m, kt__search_core *core, size_t *cand) {
    const kt__lattice *lat = core->lat;
    size_t fresh = lat->n - core->proposed, n = 0;
    if (fresh <= POOL) {
        for (size_t i = 0; i < lat->n; i++)
            if (kt__fresh(core, i)) cand[n++] = i;
        return n;
    }
    size_t best[TOP], nbest = 0;
    for (size_t o = 0; o < m->nobs; o++) { /* the TOP fastest told, by insertion */
        size_t i = m->obs[o];
        if (!isfinite(core->value[i])) continue;
        size_t pos = nbest < TOP ? nbest++ : TOP;
        while (pos > 0 && core->value[best[pos - 1]] > core->value[i]) {
            if (pos < TOP) best[pos] = best[pos - 1];
            pos--;
        }
        if (pos < TOP) best[pos] = i;
    }
    uint8_t *state = (uint8_t *)core->state; /* candidates marked taken while the pool is drawn */
    size_t nb[128];
    for (size_t b = 0; b < nbest && n < POOL / 2; b++) {
        size_t k = kt__lattice_neighbours(lat, best[b], nb);
        for (size_t j = 0; j < k && n < POOL / 2; j++)
            if (kt__fresh(core, nb[j])) cand[n++] = nb[j], state[nb[j]] = 3;
    }
    for (size_t j = 0; j < n; j++) state[cand[j]] = 0;
    size_t saved = n;
    n += kt__random_batch(core, cand + n, POOL - n);
    /* a random pick may repeat a neighbour: drop repeats */
    size_t w = saved;
    for (size_t j = saved; j < n; j++) {
        bool dup = false;
        for (size_t q = 0; q < saved && !dup; q++) dup = cand[q] == cand[j];
        if (!dup) cand[w++] = cand[j];
    }
    return w;
}

/* The results the process is fitted to: all of them, or past FITMAX the best half and the
 * latest of the rest. */
static void choose_fitset(model *m, const kt__search_core *core, size_t cap) {
    if (m->nobs <= cap) {
        memcpy(m->fitset, m->obs, m->nobs * sizeof *m->obs);
        m->nfit = m->nobs;
        return;
    }
    size_t nbest = 0, half = cap / 2;
    for (size_t o = 0; o < m->nobs; o++) { /* the cap / 2 fastest, by insertion */
        size_t i = m->obs[o], pos = nbest < half ? nbest++ : half;
        while (pos > 0 && core->value[m->fitset[pos - 1]] > core->value[i]) {
            if (pos < half) m->fitset[pos] = m->fitset[pos - 1];
            pos--;
        }
        if (pos < half) m->fitset[pos] = i;
    }
    m->nfit = nbest;
    for (size_t o = m->nobs; o-- > 0 && m->nfit < cap;) { /* then the latest others */
        bool in = false;
        for (size_t q = 0; q < nbest && !in; q++) in = m->fitset[q] == m->obs[o];
        if (!in) m->fitset[m->nfit++] = m->obs[o];
    }
}

/* Fits the process (to at most LATE_FITMAX results when late: past the budget) and queues the
 * `batch` best candidates by expected improvement (best last); false when the model failed. */
static bool by_model(model *m, kt__search_core *core, size_t batch, bool late) {
    const kt__lattice *lat = core->lat;
    choose_fitset(m, core, late ? LATE_FITMAX : FITMAX);
    const size_t k = m->nfit;
    /* targets: standardised log times, invalid ones 1 above the worst valid */
    double worst = -INFINITY, mean = 0, var = 0;
    size_t nvalid = 0;
    for (size_t o = 0; o < k; o++) {
        double v = core->value[m->fitset[o]];
        if (isfinite(v)) worst = fmax(worst, log(v)), nvalid++;
    }
    if (nvalid == 0) return false;
    if (!grow(&m->ys, &m->ycap, k) || !grow(&m->alpha, &m->acap, k)) return false;
    for (size_t o = 0; o < k; o++) {
        double v = core->value[m->fitset[o]];
        m->ys[o] = isfinite(v) ? log(v) : worst + 1.0;
        mean += m->ys[o];
    }
    mean /= (double)k;
    for (size_t o = 0; o < k; o++) var += (m->ys[o] - mean) * (m->ys[o] - mean);
    double sd = k > 1 && var > 0 ? sqrt(var / (double)(k - 1)) : 1.0, ybest = INFINITY;
    for (size_t o = 0; o < k; o++) m->ys[o] = (m->ys[o] - mean) / sd, ybest = fmin(ybest, m->ys[o]);
    size_t Kcap = m->Kcap;
    if (!grow(&m->K, &Kcap, k * k)) return false;
    m->Kcap = Kcap;
    /* the length scale: chosen again on the first fits and every eighth */
    if (m->fits < 4 || m->fits % 8 == 0) {
        static const double ells[] = {0.1, 0.2, 0.35, 0.6, 1.0};
        double best_ll = -INFINITY, best_ell = m->ell;
        for (size_t e = 0; e < sizeof ells / sizeof ells[0]; e++) {
            double ll = fit(m, lat, ells[e]);
            if (ll > best_ll) best_ll = ll, best_ell = ells[e];
        }
        m->ell = best_ell;
    }
    m->fits++;
    if (!isfinite(fit(m, lat, m->ell))) return false;
    /* the pool's posterior: mean Ks' alpha, variance 1 - |L^-1 Ks|^2 */
    size_t *cand = malloc(POOL * sizeof *cand);
    double *ei = malloc(POOL * sizeof *ei);
    size_t mc = cand ? pool(m, core, cand) : 0;
    bool ok = cand && ei && mc > 0;
    size_t Kscap = 0;
    double *Ks = NULL;
    if (ok) ok = grow(&Ks, &Kscap, k * mc);
    if (ok) {
        for (size_t c = 0; c < mc; c++)
            for (size_t o = 0; o < k; o++) Ks[c * k + o] = kernel(m, lat, m->fitset[o], cand[c], m->ell);
        for (size_t c = 0; c < mc; c++) {
            double mu = 0;
            for (size_t o = 0; o < k; o++) mu += Ks[c * k + o] * m->alpha[o];
            ei[c] = mu; /* the mean, for now */
        }
        ok = LAPACKE_dtrtrs(LAPACK_COL_MAJOR, 'L', 'N', 'N', (lapack_int)k, (lapack_int)mc, m->K, (lapack_int)k, Ks, (lapack_int)k) == 0;
    }
    if (ok)
        for (size_t c = 0; c < mc; c++) {
            double v = 1.0;
            for (size_t o = 0; o < k; o++) v -= Ks[c * k + o] * Ks[c * k + o];
            double s = sqrt(fmax(v, 1e-12)), imp = ybest - ei[c] - XI, z = imp / s;
            ei[c] = imp * normal_cdf(z) + s * normal_pdf(z);
        }
    size_t n = 0, picks[LATE_BATCH];
    while (ok && n < batch && n < mc) { /* the largest, one at a time (the batch is small) */
        size_t at = 0;
        for (size_t c = 1; c < mc; c++)
            if (ei[c] > ei[at] || (ei[c] == ei[at] && cand[c] < cand[at])) at = c;
        if (ei[at] < 0) break;
        picks[n++] = cand[at];
        ei[at] = -1.0;
    }
    for (m->nqueue = 0; m->nqueue < n; m->nqueue++) m->queue[m->nqueue] = picks[n - 1 - m->nqueue];
    free(Ks), free(cand), free(ei);
    return ok && n > 0;
}
#endif

static size_t propose(void *p, kt__search_core *core, size_t *out, size_t max) {
    model *m = p;
    /* a fit's picks: as many as asked for at once (a tuning asks for as many as it builds in
     * parallel), BATCH at least and LATE_BATCH at most; LATE_BATCH past the budget */
    size_t early = max < BATCH ? BATCH : max > LATE_BATCH ? LATE_BATCH : max;
    size_t k = 0, batch = core->told < core->budget ? early : LATE_BATCH;
    if (m->nobs + m->outstanding < INIT || m->failed) {
        size_t want = m->failed ? max : INIT - m->nobs - m->outstanding;
        k = kt__random_batch(core, out, want < max ? want : max);
    } else {
        /* fit again once the picks are out: when every one is in, or (a caller that measures
         * while it builds the next ones) when new results came in since the last fit; with
         * picks out and nothing new, wait */
        if (m->nqueue == 0 && (m->outstanding == 0 || m->nobs > m->fitted_at)) {
            m->fitted_at = m->nobs;
#ifndef KT_NO_LAPACK
            if (!by_model(m, core, batch, core->told >= core->budget)) m->nqueue = 0;
#endif
            if (m->nqueue == 0 && kt__random_batch(core, &m->queue[0], 1) == 1) m->nqueue = 1; /* no usable model (nothing valid yet) */
        }
        while (k < max && m->nqueue > 0) {
            size_t i = m->queue[--m->nqueue];
            if (kt__fresh(core, i)) out[k++] = i;
        }
    }
    for (size_t j = 0; j < k; j++) m->mine[out[j]] = 1, m->outstanding++;
    return k;
}

static void tell(void *p, kt__search_core *core, size_t config, double value) {
    model *m = p;
    (void)core, (void)value;
    if (m->mine[config]) m->mine[config] = 0, m->outstanding--;
    if (m->nobs == m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 64, *o = realloc(m->obs, cap * sizeof *o);
        if (o == NULL) {
            m->failed = true;
            return;
        }
        m->obs = o, m->cap = cap;
    }
    m->obs[m->nobs++] = config;
}

const kt__strategy kt__strategy_model = {"model", create, propose, tell, destroy};
