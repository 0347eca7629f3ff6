/*
 * local.c - greedy local search with restarts (iterated local search) on the lattice of value
 * lists. It starts from the best of a small random design (INIT configurations, proposed at
 * once: a few spread-out samples find a good basin sooner than one random start, and they keep
 * parallel builds busy); from the current configuration, its untried near neighbours (one
 * parameter one step away) are proposed in random order; the first result better than the
 * current one becomes current, and its neighbours are proposed next. When no near neighbour is
 * better, the far ones are (kt__lattice_far_neighbours: one parameter any number of steps away,
 * and the moves a constraint forbids mended by one step of another parameter, such as a block
 * width that needs padding off); one of them becomes current only when it is at least FAR_GAIN
 * better. When those fail too the configuration is a local optimum, and the search restarts:
 * alternately from the best found, a random walk of a few steps away (a perturbation that keeps
 * what was learnt), and anywhere at random (which escapes a poor basin).
 */
#include "search/search.h"

#include <stdlib.h>
#include <string.h>

enum { WALK = 3, WALK_TRIES = 16, INIT = 8, FAR_MAX = 1024 };
static const double FAR_GAIN = 0.01;

typedef struct local {
    long cur;            /* the current configuration, -1 while a start is being measured */
    double cur_val;
    long start;          /* a start proposed and not yet told, or -1 */
    size_t *frontier;    /* the current configuration's neighbours not yet proposed, shuffled */
    size_t nfrontier;
    bool wide;           /* the frontier holds the current configuration's far neighbours */
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
    l->frontier = malloc((FAR_MAX + 2 * core->lat->nparams) * sizeof *l->frontier); /* near neighbours, or far ones */
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

/* Sets the frontier: the fresh ones of n configurations, shuffled. */
static void set_frontier(local *l, kt__search_core *core, const size_t *nb, size_t n) {
    l->nfrontier = 0;
    for (size_t k = 0; k < n; k++)
        if (kt__fresh(core, nb[k])) l->frontier[l->nfrontier++] = nb[k];
    for (size_t k = l->nfrontier; k > 1; k--) { /* Fisher-Yates */
        size_t j = kt__rng_below(&core->rng, k), t = l->frontier[k - 1];
        l->frontier[k - 1] = l->frontier[j], l->frontier[j] = t;
    }
}

/* Makes configuration i current: its fresh near neighbours are the frontier. */
static void move_to(local *l, kt__search_core *core, size_t i, double v) {
    l->cur = (long)i, l->cur_val = v, l->wide = false;
    size_t nb[128], n = kt__lattice_neighbours(core->lat, i, nb);
    set_frontier(l, core, nb, n);
}

static int by_index(const void *a, const void *b) {
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

/* The current configuration's near neighbours were all tried without a better one: its far
 * ones are the frontier. Returns whether there are any. */
static bool widen(local *l, kt__search_core *core) {
    l->wide = true;
    size_t n = kt__lattice_far_neighbours(core->lat, (size_t)l->cur, l->frontier, FAR_MAX);
    qsort(l->frontier, n, sizeof *l->frontier, by_index); /* each once */
    size_t u = 0;
    for (size_t k = 0; k < n; k++)
        if (u == 0 || l->frontier[k] != l->frontier[u - 1]) l->frontier[u++] = l->frontier[k];
    set_frontier(l, core, l->frontier, u); /* in place: it writes no further than it has read */
    return l->nfrontier > 0;
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
    do {
        while (k < max && l->cur >= 0 && l->nfrontier > 0) {
            size_t i = l->frontier[--l->nfrontier];
            if (kt__fresh(core, i)) k = take(l, out, k, i);
        }
        if (k > 0 || l->outstanding > 0) return k; /* the rest waits for the neighbours' results */
    } while (l->cur >= 0 && !l->wide && widen(l, core)); /* no better near one: the far ones */
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
    /* the first improvement; a far one must gain FAR_GAIN, or a plateau of near-equal ones (the
     * W6600 convolution's, 1.196-1.21 of its best) is walked one far neighbourhood after another */
    if (l->cur >= 0 && isfinite(value) && value < l->cur_val * (l->wide ? 1 - FAR_GAIN : 1)) move_to(l, core, config, value);
}

const kt__strategy kt__strategy_local = {"local", create, propose, tell, destroy};
