/*
 * search.h - search strategies over the valid configurations of a space: one small interface
 * (propose the next configurations, be told their results), one file per strategy, and the
 * bookkeeping they share (search.c). Internal; the public face is kerntune/search.h.
 *
 * A strategy sees the space as a lattice: n valid configurations, each a tuple of value indices,
 * one per parameter (a parameter's values in their declared order). Two configurations are
 * neighbours when they differ in one parameter by one step of its value list. Configurations
 * are named by their index in the enumeration. A strategy never proposes an index twice (the
 * core checks and drops a repeat, which is a strategy's bug) and only ever proposes valid
 * configurations (it can name no other). It is deterministic given its seed and what it was
 * told, in the order it was told.
 */
#ifndef KT_SEARCH_H
#define KT_SEARCH_H

#include <kerntune/search.h>

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kt__configs; /* space/space.h */

/* The configurations a search runs over (a copy it owns). */
typedef struct kt__lattice {
    size_t n, nparams;
    uint16_t *idx;      /* n x nparams value indices */
    uint32_t *nvalues;  /* per parameter: how many values it has */
    /* an open-addressing table from a value tuple to its configuration (built on demand) */
    uint32_t *table;    /* index + 1; 0: empty */
    size_t table_mask;
} kt__lattice;

/* The search's random numbers: xoshiro256** seeded by splitmix64. */
typedef struct kt__rng {
    uint64_t s[4];
} kt__rng;

void kt__rng_seed(kt__rng *r, uint64_t seed);
uint64_t kt__rng_next(kt__rng *r);
/* Uniform in [0, n) (n > 0), and in [0, 1). */
size_t kt__rng_below(kt__rng *r, size_t n);
double kt__rng_unit(kt__rng *r);

/* What every strategy may read and use of the search it serves. */
typedef struct kt__search_core {
    const kt__lattice *lat;
    kt__rng rng;
    size_t budget;        /* evaluations the caller means to spend (n when it did not say) */
    const uint8_t *state; /* per configuration: 0 untouched, 1 proposed (pending), 2 told */
    const double *value;  /* per configuration: its objective once told (INFINITY: invalid) */
    size_t told, proposed;
    long best;            /* the best told valid configuration, -1 when none */
    size_t walkers;       /* how many walks a strategy that walks may keep going at once (1) */
} kt__search_core;

/* Whether configuration c may still be proposed. */
static inline bool kt__fresh(const kt__search_core *c, size_t i) { return c->state[i] == 0; }

/* The configuration whose value tuple is vidx, or -1 when that tuple is not valid. */
long kt__lattice_find(const kt__lattice *lat, const uint16_t *vidx);

/* The neighbours of configuration i (at most 2 * nparams, written to out); returns how many. */
size_t kt__lattice_neighbours(const kt__lattice *lat, size_t i, size_t *out);

/* The configurations one move beyond configuration i's neighbours: those that differ from it in
 * one parameter by two steps or more, and where changing one parameter to any other value
 * breaks a constraint, those that mend it with one step of another parameter. Writes at most
 * max to out (a configuration may come twice); returns how many. */
size_t kt__lattice_far_neighbours(const kt__lattice *lat, size_t i, size_t *out, size_t max);

/* A random untouched configuration, or -1 when none is left. */
long kt__random_fresh(kt__search_core *c);

/* Up to max distinct random untouched configurations into out; returns how many. */
size_t kt__random_batch(kt__search_core *c, size_t *out, size_t max);

/* One strategy. propose writes up to max fresh configurations (in the order to run them) and
 * returns how many; it may return fewer, or none, while it waits for results it asked for (the
 * core then proposes untouched configurations at random only when nothing is pending). tell
 * gives the objective of a configuration it proposed (INFINITY when invalid: it failed to build,
 * launch or validate). */
typedef struct kt__strategy {
    const char *name;
    void *(*create)(kt__search_core *core);
    size_t (*propose)(void *st, kt__search_core *core, size_t *out, size_t max);
    void (*tell)(void *st, kt__search_core *core, size_t config, double value);
    void (*destroy)(void *st);
} kt__strategy;

extern const kt__strategy kt__strategy_exhaustive, kt__strategy_random, kt__strategy_local, kt__strategy_anneal,
    kt__strategy_genetic, kt__strategy_model;

/* The strategy auto chooses for a space of n configurations and a budget (auto.c). */
const kt__strategy *kt__strategy_auto(size_t n, size_t nparams, size_t budget);

/* Makes an untouched configuration pending, as if the search had proposed it (a tuning's
 * reference, measured whatever the search says); false when it is not untouched. */
bool kt__search_take(kt_search *s, size_t config);

/* Lets a local search keep up to n walks going at once (at least 1, the default; local.c says
 * when it begins another). For a caller that has room for more proposals while one walk waits
 * for its results; other strategies ignore it. */
void kt__search_set_walkers(kt_search *s, size_t n);

/* Creates a search over configurations cfgs of space sp (an enumeration of it, public or for
 * some inputs), as kt_search_create does over its last one; where names the caller in
 * messages. */
kt_status kt__search_new(const kt_space *sp, const struct kt__configs *cfgs, const char *strategy, uint64_t seed, size_t budget,
                         const char *where, kt_search **out);

#endif /* KT_SEARCH_H */
