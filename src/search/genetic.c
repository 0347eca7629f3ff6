/*
 * genetic.c - a genetic algorithm over the parameters' value indices. A generation of POP
 * configurations (the first at random) is measured whole; then POP children are bred: each
 * has two parents chosen by binary tournament among the population (the faster of two drawn at
 * random), takes each parameter from either parent (uniform crossover), and moves a parameter
 * one step of its value list with probability 1 / parameters (mutation). A child that is not a
 * valid configuration, or was tried already, is mutated again (a few times) and otherwise
 * replaced by a random untried configuration. The next population is the best POP of parents
 * and children together (elitism: the best found is never lost).
 */
#include "search/search.h"

#include <stdlib.h>
#include <string.h>

enum { POP = 20, REPAIRS = 12 };

typedef struct genetic {
    size_t pop[POP];     /* the population: configurations told */
    size_t npop;
    size_t queue[POP];   /* children bred and not yet proposed */
    size_t nqueue;
    size_t brood[POP];   /* this generation's children proposed */
    size_t nbrood, told; /* how many of them were told */
    bool started;
} genetic;

static void *create(kt__search_core *core) {
    (void)core;
    return calloc(1, sizeof(genetic));
}

static size_t tournament(const genetic *g, kt__search_core *core) {
    size_t a = g->pop[kt__rng_below(&core->rng, g->npop)], b = g->pop[kt__rng_below(&core->rng, g->npop)];
    return core->value[a] <= core->value[b] ? a : b;
}

static bool queued(const genetic *g, size_t i) {
    for (size_t k = 0; k < g->nqueue; k++)
        if (g->queue[k] == i) return true;
    return false;
}

/* One child of the population, as a fresh configuration (not already queued), or -1. */
static long breed(genetic *g, kt__search_core *core) {
    const kt__lattice *lat = core->lat;
    const size_t np = lat->nparams;
    uint16_t v[64];
    const uint16_t *a = lat->idx + tournament(g, core) * np, *b = lat->idx + tournament(g, core) * np;
    for (size_t p = 0; p < np; p++) v[p] = (kt__rng_next(&core->rng) & 1) ? a[p] : b[p];
    for (int r = 0; r <= REPAIRS; r++) {
        /* mutation: each parameter with probability 1 / parameters; after a failed try, one */
        size_t one = kt__rng_below(&core->rng, np);
        for (size_t p = 0; p < np; p++) {
            if (lat->nvalues[p] < 2 || (r == 0 ? kt__rng_below(&core->rng, np) != 0 : p != one)) continue;
            int x = (int)v[p] + ((kt__rng_next(&core->rng) & 1) ? 1 : -1);
            if (x < 0) x = 1;
            if (x >= (int)lat->nvalues[p]) x = (int)lat->nvalues[p] - 2;
            v[p] = (uint16_t)x;
        }
        long i = kt__lattice_find(lat, v);
        if (i >= 0 && kt__fresh(core, (size_t)i) && !queued(g, (size_t)i)) return i;
    }
    return -1;
}

static int by_value(const void *x, const void *y, void *core) {
    const double *v = ((const kt__search_core *)core)->value;
    double a = v[*(const size_t *)x], b = v[*(const size_t *)y];
    return (a > b) - (a < b);
}

/* The best POP of the population and the brood (insertion sort: POP is small). */
static void survive(genetic *g, kt__search_core *core) {
    size_t all[2 * POP], n = 0;
    for (size_t k = 0; k < g->npop; k++) all[n++] = g->pop[k];
    for (size_t k = 0; k < g->nbrood; k++) all[n++] = g->brood[k];
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && by_value(&all[j - 1], &all[j], core) > 0; j--) {
            size_t t = all[j];
            all[j] = all[j - 1], all[j - 1] = t;
        }
    g->npop = n < POP ? n : POP;
    memcpy(g->pop, all, g->npop * sizeof *all);
    g->nbrood = g->told = 0;
}

static size_t propose(void *p, kt__search_core *core, size_t *out, size_t max) {
    genetic *g = p;
    if (g->nqueue == 0 && g->nbrood > 0 && g->told == g->nbrood) survive(g, core); /* its children went stale */
    if (g->nqueue == 0 && g->nbrood == 0) { /* a new generation */
        bool valid = false;
        for (size_t k = 0; k < g->npop; k++) valid = valid || isfinite(core->value[g->pop[k]]);
        size_t want = POP < core->lat->n ? POP : core->lat->n;
        while (g->nqueue < want) {
            long i = g->started && valid ? breed(g, core) : -1;
            if (i < 0) { /* the first generation, or a child that could not be bred */
                size_t pick;
                if (kt__random_batch(core, &pick, 1) == 0) break;
                /* a random pick may equal a queued child: draw until it does not, or stop */
                int tries = 0;
                while (queued(g, pick) && tries++ < 64) kt__random_batch(core, &pick, 1);
                if (queued(g, pick)) break;
                i = (long)pick;
            }
            g->queue[g->nqueue++] = (size_t)i;
        }
        g->started = true;
    }
    size_t k = 0;
    while (k < max && g->nqueue > 0) {
        size_t i = g->queue[--g->nqueue];
        if (!kt__fresh(core, i)) continue;
        out[k++] = i;
        g->brood[g->nbrood++] = i;
    }
    return k;
}

static void tell(void *p, kt__search_core *core, size_t config, double value) {
    genetic *g = p;
    (void)value;
    bool ours = false;
    for (size_t k = 0; k < g->nbrood && !ours; k++) ours = g->brood[k] == config;
    if (!ours) return; /* another's proposal: the population is bred from its own */
    if (++g->told == g->nbrood && g->nqueue == 0) survive(g, core);
}

const kt__strategy kt__strategy_genetic = {"genetic", create, propose, tell, free};
