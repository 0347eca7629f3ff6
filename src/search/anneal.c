/*
 * anneal.c - simulated annealing on the lattice of value lists. From the current configuration
 * it proposes untried neighbours (a short random walk away when none is left); each result
 * becomes current when it is faster, or when slower with the Metropolis probability
 * exp(-(log t_new - log t_cur) / T). Working on log times makes "twice as slow" the same step
 * for any kernel. The temperature falls geometrically over the budget, from T0 (a 2x slowdown
 * accepted half the time) to T1 (one in a thousand accepts a 7% slowdown).
 */
#include "search/search.h"

#include <stdlib.h>

#define T0 1.0
#define T1 0.01

typedef struct anneal {
    long cur;
    double cur_log;
    long start;
    size_t outstanding;
    uint8_t *mine;
} anneal;

static void *create(kt__search_core *core) {
    anneal *a = calloc(1, sizeof *a);
    if (a == NULL || (a->mine = calloc(core->lat->n, 1)) == NULL) {
        free(a);
        return NULL;
    }
    a->cur = a->start = -1;
    return a;
}

static void destroy(void *p) {
    anneal *a = p;
    free(a->mine), free(a);
}

static double temperature(const kt__search_core *core) {
    double f = (double)core->told / (double)(core->budget ? core->budget : 1);
    return T0 * pow(T1 / T0, f < 1 ? f : 1);
}

static size_t propose(void *p, kt__search_core *core, size_t *out, size_t max) {
    anneal *a = p;
    if (a->start >= 0) return 0;
    size_t k = 0;
    if (a->cur < 0) { /* a start, anywhere */
        long s = kt__random_fresh(core);
        if (s < 0) return 0;
        a->start = s;
        out[k++] = (size_t)s;
    } else {
        size_t nb[128], n = kt__lattice_neighbours(core->lat, (size_t)a->cur, nb);
        for (size_t j = n; j > 1; j--) { /* a random order */
            size_t r = kt__rng_below(&core->rng, j), t = nb[j - 1];
            nb[j - 1] = nb[r], nb[r] = t;
        }
        for (size_t j = 0; j < n && k < max; j++)
            if (kt__fresh(core, nb[j])) out[k++] = nb[j];
        /* every neighbour tried: a few random steps away, through tried ones */
        for (int t = 0; k == 0 && t < 16; t++) {
            size_t at = (size_t)a->cur;
            for (int step = 0; step < 3 + t / 4; step++) {
                size_t m = kt__lattice_neighbours(core->lat, at, nb);
                if (m == 0) break;
                at = nb[kt__rng_below(&core->rng, m)];
            }
            if (kt__fresh(core, at)) out[k++] = at;
        }
        if (k == 0 && a->outstanding == 0) { /* stuck: elsewhere */
            long s = kt__random_fresh(core);
            if (s >= 0) out[k++] = (size_t)s;
        }
    }
    for (size_t j = 0; j < k; j++) a->mine[out[j]] = 1, a->outstanding++;
    return k;
}

static void tell(void *p, kt__search_core *core, size_t config, double value) {
    anneal *a = p;
    if (a->mine[config]) a->mine[config] = 0, a->outstanding--;
    if ((long)config == a->start) a->start = -1;
    if (!isfinite(value)) return;
    double lv = log(value);
    if (a->cur < 0 || lv <= a->cur_log || kt__rng_unit(&core->rng) < exp(-(lv - a->cur_log) / temperature(core))) {
        a->cur = (long)config;
        a->cur_log = lv;
    }
}

const kt__strategy kt__strategy_anneal = {"anneal", create, propose, tell, destroy};
