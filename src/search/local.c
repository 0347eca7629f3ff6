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
 *
 * A caller that can take more proposals than one walk has while it waits (a tuning whose build
 * threads would otherwise idle: kt__search_set_walkers) gets further walks, each begun where a
 * restart would begin one and walked the same way, up to the number it allows; the
 * configurations they share are each proposed once. With one walk allowed (the default) the
 * search is the single walk above.
 */
#include "search/search.h"

#include <stdlib.h>
#include <string.h>

enum { WALK = 3, WALK_TRIES = 16, INIT = 8, FAR_MAX = 1024, WALKERS_MAX = 16, DESIGN = WALKERS_MAX + 1 };
static const double FAR_GAIN = 0.01;

typedef struct walker {
    long cur;            /* the current configuration, -1 while a start is being measured */
    double cur_val;
    long start;          /* a start proposed and not yet told, or -1 */
    size_t *frontier;    /* the current configuration's neighbours not yet proposed, shuffled */
    size_t nfrontier;
    bool wide;           /* the frontier holds the current configuration's far neighbours */
    size_t outstanding;  /* its proposals not yet told */
    unsigned restarts;
} walker;

typedef struct local {
    walker w[WALKERS_MAX];
    size_t nw;           /* walks begun */
    uint8_t *mine;       /* per configuration: which walk proposed it and waits for it (index + 1;
                          * DESIGN: the initial design), 0: none */
    size_t design_outstanding;
    size_t seeded;       /* random configurations of the initial design proposed so far */
    bool began;          /* the first walk began from the design's best */
    size_t turn;         /* the walk that proposes first next time */
    size_t nparams;
} local;

static void *create(kt__search_core *core) {
    local *l = calloc(1, sizeof *l);
    if (l == NULL) return NULL;
    l->nparams = core->lat->nparams;
    l->mine = calloc(core->lat->n, 1);
    if (l->mine == NULL) {
        free(l);
        return NULL;
    }
    return l;
}

static void destroy(void *p) {
    local *l = p;
    for (size_t i = 0; i < l->nw; i++) free(l->w[i].frontier);
    free(l->mine), free(l);
}

/* Begins walk number l->nw (its frontier allocated), or returns NULL without memory for it. */
static walker *begin_walk(local *l) {
    walker *w = &l->w[l->nw];
    *w = (walker){.cur = -1, .start = -1};
    w->frontier = malloc((FAR_MAX + 2 * l->nparams) * sizeof *w->frontier); /* near neighbours, or far ones */
    if (w->frontier == NULL) return NULL;
    l->nw++;
    return w;
}

/* Whether configuration i may be proposed: untouched, and not taken by a walk in this proposal
 * (the core marks what a proposal holds only once it returns). */
static bool avail(const local *l, const kt__search_core *core, size_t i) { return kt__fresh(core, i) && l->mine[i] == 0; }

/* A random configuration that may be proposed, or -1 when the tries found none. */
static long random_avail(const local *l, kt__search_core *core) {
    long s = -1;
    for (int t = 0; t < 64 && (s < 0 || !avail(l, core, (size_t)s)); t++)
        if ((s = kt__random_fresh(core)) < 0) return -1; /* none is left at all */
    return s >= 0 && avail(l, core, (size_t)s) ? s : -1;
}

/* Sets the frontier: the fresh ones of n configurations, shuffled. */
static void set_frontier(local *l, walker *w, kt__search_core *core, const size_t *nb, size_t n) {
    w->nfrontier = 0;
    for (size_t k = 0; k < n; k++)
        if (avail(l, core, nb[k])) w->frontier[w->nfrontier++] = nb[k];
    for (size_t k = w->nfrontier; k > 1; k--) { /* Fisher-Yates */
        size_t j = kt__rng_below(&core->rng, k), t = w->frontier[k - 1];
        w->frontier[k - 1] = w->frontier[j], w->frontier[j] = t;
    }
}

/* Makes configuration i current: its fresh near neighbours are the frontier. */
static void move_to(local *l, walker *w, kt__search_core *core, size_t i, double v) {
    w->cur = (long)i, w->cur_val = v, w->wide = false;
    size_t nb[128], n = kt__lattice_neighbours(core->lat, i, nb);
    set_frontier(l, w, core, nb, n);
}

static int by_index(const void *a, const void *b) {
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

/* The current configuration's near neighbours were all tried without a better one: its far
 * ones are the frontier. Returns whether there are any. */
static bool widen(local *l, walker *w, kt__search_core *core) {
    w->wide = true;
    size_t n = kt__lattice_far_neighbours(core->lat, (size_t)w->cur, w->frontier, FAR_MAX);
    qsort(w->frontier, n, sizeof *w->frontier, by_index); /* each once */
    size_t u = 0;
    for (size_t k = 0; k < n; k++)
        if (u == 0 || w->frontier[k] != w->frontier[u - 1]) w->frontier[u++] = w->frontier[k];
    set_frontier(l, w, core, w->frontier, u); /* in place: it writes no further than it has read */
    return w->nfrontier > 0;
}

/* A fresh configuration a short random walk away from configuration from (through tried ones
 * too), or -1 when the walks found none. */
static long walk_from(const local *l, kt__search_core *core, size_t from) {
    size_t nb[128];
    for (int t = 0; t < WALK_TRIES; t++) {
        size_t at = from;
        for (int step = 0; step < WALK + t / 4; step++) {
            size_t n = kt__lattice_neighbours(core->lat, at, nb);
            if (n == 0) break;
            at = nb[kt__rng_below(&core->rng, n)];
            if (step + 1 >= WALK && avail(l, core, at)) return (long)at;
        }
    }
    return -1;
}

static size_t take(local *l, uint8_t who, size_t *out, size_t k, size_t i) {
    out[k] = i;
    l->mine[i] = who;
    if (who == DESIGN) l->design_outstanding++;
    else l->w[who - 1].outstanding++;
    return k + 1;
}

/* A start for walk w, proposed into out[k]: alternately a short walk from the best found and
 * anywhere at random. Returns the new count (k when no configuration is left). */
static size_t restart(local *l, walker *w, kt__search_core *core, size_t *out, size_t k) {
    long s = -1;
    if (core->best >= 0 && w->restarts++ % 2 == 0) s = walk_from(l, core, (size_t)core->best);
    if (s < 0) s = random_avail(l, core);
    if (s < 0) return k;
    w->start = s, w->cur = -1;
    return take(l, (uint8_t)(w - l->w + 1), out, k, (size_t)s);
}

/* Walk w's proposals into out[k..max): its frontier's, the far ones when the near ones are
 * spent, a restart at a local optimum; none while it waits for results. Returns the new count. */
static size_t step(local *l, walker *w, kt__search_core *core, size_t *out, size_t k, size_t max) {
    if (w->start >= 0) return k; /* waiting for where it starts */
    const uint8_t who = (uint8_t)(w - l->w + 1);
    const size_t k0 = k;
    do {
        while (k < max && w->cur >= 0 && w->nfrontier > 0) {
            size_t i = w->frontier[--w->nfrontier];
            if (avail(l, core, i)) k = take(l, who, out, k, i);
        }
        if (k > k0 || w->outstanding > 0) return k; /* the rest waits for the neighbours' results */
    } while (w->cur >= 0 && !w->wide && widen(l, w, core)); /* no better near one: the far ones */
    return restart(l, w, core, out, k); /* a local optimum (or no start yet) */
}

static size_t propose(void *p, kt__search_core *core, size_t *out, size_t max) {
    local *l = p;
    size_t k = 0;
    while (l->seeded < INIT && k < max) { /* first a small random design, all at once (no repeat in it) */
        long s = random_avail(l, core);
        if (s < 0) {
            l->seeded = INIT;
            break;
        }
        k = take(l, DESIGN, out, k, (size_t)s);
        l->seeded++;
    }
    if (k > 0) return k;
    if (!l->began) { /* then the walk, from the design's best, once its results are in */
        if (l->design_outstanding > 0) return 0;
        walker *w = begin_walk(l);
        if (w == NULL) return 0;
        l->began = true;
        if (core->best >= 0) move_to(l, w, core, (size_t)core->best, core->value[core->best]);
    }
    for (size_t j = 0; j < l->nw && k < max; j++) /* each walk in turn, from the one after last time's first */
        k = step(l, &l->w[(l->turn + j) % l->nw], core, out, k, max);
    l->turn++;
    /* every walk waits, and the caller could take more: another walk, begun as a restart would */
    size_t allowed = core->walkers < WALKERS_MAX ? core->walkers : WALKERS_MAX;
    while (k < max && l->nw < allowed) {
        walker *w = begin_walk(l);
        if (w == NULL) break;
        size_t before = k;
        k = step(l, w, core, out, k, max);
        if (k == before) break; /* nothing is left to begin from */
    }
    return k;
}

static void tell(void *p, kt__search_core *core, size_t config, double value) {
    local *l = p;
    uint8_t who = l->mine[config];
    l->mine[config] = 0;
    if (who == DESIGN) l->design_outstanding--;
    if (who == DESIGN || l->nw == 0) return;
    /* one proposed by no walk (the core's random pick, a tuning's reference) may move the first */
    walker *w = &l->w[who ? who - 1 : 0];
    if (who) w->outstanding--;
    if ((long)config == w->start) {
        w->start = -1;
        if (isfinite(value)) move_to(l, w, core, config, value);
        return; /* an invalid start: the next proposal restarts */
    }
    /* the first improvement; a far one must gain FAR_GAIN, or a plateau of near-equal ones (the
     * W6600 convolution's, 1.196-1.21 of its best) is walked one far neighbourhood after another */
    if (w->cur >= 0 && isfinite(value) && value < w->cur_val * (w->wide ? 1 - FAR_GAIN : 1)) move_to(l, w, core, config, value);
}

const kt__strategy kt__strategy_local = {"local", create, propose, tell, destroy};
