/*
 * local.c - greedy local search with restarts (iterated local search) on the lattice of value
 * lists. It starts from the best of a small random design (INIT configurations, proposed at
 * once: a few spread-out samples find a good basin sooner than one random start, and they keep
 * parallel builds busy); from the current configuration, its untried neighbours (one parameter
 * one step away) are proposed in random order; the first result better than the current one becomes current,
 * and its neighbours are proposed next. When every neighbour of the current configuration was
 * tried without improvement it is a local optimum, and the search restarts: alternately from
 * the best found, a random walk of a few steps away (a perturbation that keeps what was
 * learnt), and anywhere at random (which escapes a poor basin).
 */
#include "search/search.h"

#include <stdlib.h>
#include <string.h>

enum { WALK = 3, WALK_TRIES = 16, INIT = 8 };

typedef struct local {
    long cur;            /* the current configuration, -1 while a start is being measured */
    double cur_val;
    long start;          /* a start proposed and not yet told, or -1 */
    size_t *frontier;    /* the current configuration's neighbours not yet proposed, shuffled */
    size_t nfrontier;
    size_t outstanding;  /* proposals of this strategy not yet told */
    uint8_t *mine;       /* per configuration: proposed by this strategy and not yet told */
    unsigned restarts;
    size_t seeded;       /* random configurations of the initial design proposed so far */
    bool began;          /* the walk began from the design's best */
} local;

static void *create(kt__search_core *core) {
    local *l = calloc(1, sizeof *l);
    if (l == NULL) return NULL;
    l->cur = l->start = -1;
    l->frontier = malloc(2 * (core->lat->nparams ? core->lat->nparams : 1) * sizeof *l->frontier);
    l->mine = calloc(core->lat->n, 1);
    if (l->frontier == NULL || l->mine == NULL) {
        free(l->frontier), free(l->mine), free(l);
        return NULL;
    }
    return l;
}

static void destroy(void *p) {
    local *l = p;
    free(l->frontier), free(l->mine), free(l);
}

/* Makes configuration i current: its fresh neighbours, shuffled, are the frontier. */
static void move_to(local *l, kt__search_core *core, size_t i, double v) {
    l->cur = (long)i, l->cur_val = v;
    size_t nb[128], n = kt__lattice_neighbours(core->lat, i, nb);
    l->nfrontier = 0;
    for (size_t k = 0; k < n; k++)
        if (kt__fresh(core, nb[k])) l->frontier[l->nfrontier++] = nb[k];
    for (size_t k = l->nfrontier; k > 1; k--) { /* Fisher-Yates */
        size_t j = kt__rng_below(&core->rng, k), t = l->frontier[k - 1];
        l->frontier[k - 1] = l->frontier[j], l->frontier[j] = t;
    }
}

/* A fresh configuration a short random walk away from configuration from (through tried ones
 * too), or -1 when the walks found none. */
static long walk_from(kt__search_core *core, size_t from) {
    size_t nb[128];
    for (int t = 0; t < WALK_TRIES; t++) {
        size_t at = from;
        for (int step = 0; step < WALK + t / 4; step++) {
            size_t n = kt__lattice_neighbours(core->lat, at, nb);
            if (n == 0) break;
            at = nb[kt__rng_below(&core->rng, n)];
            if (step + 1 >= WALK && kt__fresh(core, at)) return (long)at;
        }
    }
    return -1;
}

static size_t take(local *l, size_t *out, size_t k, size_t i) {
    out[k] = i;
    l->mine[i] = 1;
    l->outstanding++;
    return k + 1;
}

static size_t propose(void *p, kt__search_core *core, size_t *out, size_t max) {
    local *l = p;
    size_t k = 0;
    while (l->seeded < INIT && k < max) { /* first a small random design, all at once */
        long s = kt__random_fresh(core);
        if (s < 0) {
            l->seeded = INIT;
            break;
        }
        k = take(l, out, k, (size_t)s);
        l->seeded++;
    }
    if (k > 0) return k;
    if (!l->began) { /* then the walk, from the design's best, once its results are in */
        if (l->outstanding > 0) return 0;
        l->began = true;
        if (core->best >= 0) move_to(l, core, (size_t)core->best, core->value[core->best]);
    }
    if (l->start >= 0) return 0; /* waiting for where it starts */
    while (k < max && l->cur >= 0 && l->nfrontier > 0) {
        size_t i = l->frontier[--l->nfrontier];
        if (kt__fresh(core, i)) k = take(l, out, k, i);
    }
    if (k > 0 || l->outstanding > 0) return k; /* the rest waits for the neighbours' results */
    /* a local optimum (or no start yet): restart */
    long s = -1;
    if (core->best >= 0 && l->restarts++ % 2 == 0) s = walk_from(core, (size_t)core->best);
    if (s < 0) s = kt__random_fresh(core);
    if (s < 0) return 0;
    l->start = s, l->cur = -1;
    return take(l, out, 0, (size_t)s);
}

static void tell(void *p, kt__search_core *core, size_t config, double value) {
    local *l = p;
    if (l->mine[config]) l->mine[config] = 0, l->outstanding--;
    if ((long)config == l->start) {
        l->start = -1;
        if (isfinite(value)) move_to(l, core, config, value);
        return; /* an invalid start: the next proposal restarts */
    }
    if (l->cur >= 0 && isfinite(value) && value < l->cur_val) move_to(l, core, config, value); /* the first improvement */
}

const kt__strategy kt__strategy_local = {"local", create, propose, tell, destroy};
