/*
 * search.c - the search object behind kerntune/search.h: the lattice of configurations, the
 * random numbers, the record of what was proposed and told, and the strategies' registry.
 * Each strategy lives in its own file and sees only the core (search.h).
 */
#include "search/search.h"

#include "space/space.h"
#include "util/util.h"

#include <stdlib.h>
#include <string.h>

/* ---- random numbers ------------------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void kt__rng_seed(kt__rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t kt__rng_next(kt__rng *r) {
    uint64_t *s = r->s, out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0], s[3] ^= s[1], s[1] ^= s[2], s[0] ^= s[3], s[2] ^= t, s[3] = rotl(s[3], 45);
    return out;
}

size_t kt__rng_below(kt__rng *r, size_t n) {
    /* rejection of the top partial range keeps it uniform */
    uint64_t lim = UINT64_MAX - UINT64_MAX % n, x;
    do x = kt__rng_next(r);
    while (x >= lim);
    return (size_t)(x % n);
}

double kt__rng_unit(kt__rng *r) { return (double)(kt__rng_next(r) >> 11) * 0x1.0p-53; }

/* ---- the lattice ------------------------------------------------------------------------------ */

static uint64_t tuple_hash(const uint16_t *v, size_t k) {
    uint64_t h = 0x243F6A8885A308D3ull;
    for (size_t i = 0; i < k; i++) h = (h ^ v[i]) * 0x100000001B3ull, h ^= h >> 29;
    return h;
}

static kt_status lattice_index(kt__lattice *lat) {
    size_t cap = 16;
    while (cap < 2 * lat->n) cap <<= 1;
    lat->table = calloc(cap, sizeof *lat->table);
    if (lat->table == NULL) return kt__err(KT_ERR_NO_MEMORY, "search: out of memory for the table of %zu configurations", lat->n);
    lat->table_mask = cap - 1;
    for (size_t i = 0; i < lat->n; i++) {
        size_t h = (size_t)tuple_hash(lat->idx + i * lat->nparams, lat->nparams) & lat->table_mask;
        while (lat->table[h]) h = (h + 1) & lat->table_mask;
        lat->table[h] = (uint32_t)(i + 1);
    }
    return KT_OK;
}

long kt__lattice_find(const kt__lattice *lat, const uint16_t *vidx) {
    size_t h = (size_t)tuple_hash(vidx, lat->nparams) & lat->table_mask;
    for (; lat->table[h]; h = (h + 1) & lat->table_mask) {
        size_t i = lat->table[h] - 1;
        if (memcmp(lat->idx + i * lat->nparams, vidx, lat->nparams * sizeof *vidx) == 0) return (long)i;
    }
    return -1;
}

size_t kt__lattice_neighbours(const kt__lattice *lat, size_t i, size_t *out) {
    uint16_t v[64];
    const size_t k = lat->nparams;
    memcpy(v, lat->idx + i * k, k * sizeof *v);
    size_t n = 0;
    for (size_t p = 0; p < k; p++)
        for (int step = -1; step <= 1; step += 2) {
            int x = (int)v[p] + step;
            if (x < 0 || x >= (int)lat->nvalues[p]) continue;
            uint16_t keep = v[p];
            v[p] = (uint16_t)x;
            long j = kt__lattice_find(lat, v);
            v[p] = keep;
            if (j >= 0) out[n++] = (size_t)j;
        }
    return n;
}

size_t kt__lattice_far_neighbours(const kt__lattice *lat, size_t i, size_t *out, size_t max) {
    uint16_t v[64];
    const size_t k = lat->nparams;
    memcpy(v, lat->idx + i * k, k * sizeof *v);
    size_t n = 0;
    for (size_t p = 0; p < k; p++) {
        const uint16_t keep = v[p];
        for (uint32_t x = 0; x < lat->nvalues[p] && n < max; x++) {
            if (x == keep) continue;
            v[p] = (uint16_t)x;
            long j = kt__lattice_find(lat, v);
            if (j >= 0) {
                if (x + 1 < (uint32_t)keep || x > (uint32_t)keep + 1) out[n++] = (size_t)j; /* not a near one */
                continue;
            }
            for (size_t q = 0; q < k && n < max; q++) { /* not valid: mended by a step of another */
                if (q == p) continue;
                const uint16_t keep_q = v[q];
                for (int step = -1; step <= 1 && n < max; step += 2) {
                    int y = (int)keep_q + step;
                    if (y < 0 || y >= (int)lat->nvalues[q]) continue;
                    v[q] = (uint16_t)y;
                    long m = kt__lattice_find(lat, v);
                    if (m >= 0) out[n++] = (size_t)m;
                }
                v[q] = keep_q;
            }
        }
        v[p] = keep;
    }
    return n;
}

long kt__random_fresh(kt__search_core *c) {
    const size_t n = c->lat->n;
    if (c->proposed >= n) return -1;
    /* a few random probes, then a scan from a random place: fast while most are fresh, and
     * certain to find the last ones */
    for (int tries = 0; tries < 32; tries++) {
        size_t i = kt__rng_below(&c->rng, n);
        if (kt__fresh(c, i)) return (long)i;
    }
    size_t start = kt__rng_below(&c->rng, n);
    for (size_t k = 0; k < n; k++) {
        size_t i = (start + k) % n;
        if (kt__fresh(c, i)) return (long)i;
    }
    return -1;
}

size_t kt__random_batch(kt__search_core *c, size_t *out, size_t max) {
    /* the picks are marked taken while the batch is drawn (the core's own record), so that a
     * batch has no repeat; the caller's core marks them proposed for good */
    uint8_t *state = (uint8_t *)c->state;
    size_t k = 0, saved = c->proposed;
    for (; k < max; k++) {
        long i = kt__random_fresh(c);
        if (i < 0) break;
        out[k] = (size_t)i;
        state[i] = 1;
        c->proposed++;
    }
    for (size_t j = 0; j < k; j++) state[out[j]] = 0;
    c->proposed = saved;
    return k;
}

/* ---- the search --------------------------------------------------------------------------------- */

static const kt__strategy *const strategies[] = {&kt__strategy_exhaustive, &kt__strategy_random, &kt__strategy_local,
                                                 &kt__strategy_anneal,     &kt__strategy_genetic, &kt__strategy_model};
enum { NSTRATEGIES = sizeof strategies / sizeof strategies[0] };

struct kt_search {
    kt__lattice lat;
    kt__search_core core;
    uint8_t *state;
    double *value;
    const kt__strategy *strat;
    void *st;
    size_t pending;
};

size_t kt_search_strategy_count(void) { return NSTRATEGIES + 1; }

const char *kt_search_strategy_name(size_t i) {
    return i < NSTRATEGIES ? strategies[i]->name : i == NSTRATEGIES ? "auto" : NULL;
}

kt_status kt_search_create(const kt_space *sp, const char *strategy, uint64_t seed, size_t budget, kt_search **out) {
    if (out) *out = NULL;
    if (sp == NULL || strategy == NULL || out == NULL)
        return kt__err(KT_ERR_NULL, "kt_search_create: %s is NULL", sp == NULL ? "sp" : strategy == NULL ? "strategy" : "out");
    if (kt__space_last(sp)->n == 0)
        return kt__err(KT_ERR_STATE, "kt_search_create: the space has no configurations (enumerate it first: kt_space_enumerate)");
    return kt__search_new(sp, kt__space_last(sp), strategy, seed, budget, "kt_search_create", out);
}

kt_status kt__search_new(const kt_space *sp, const kt__configs *cfgs, const char *strategy, uint64_t seed, size_t budget,
                         const char *where, kt_search **out) {
    *out = NULL;
    const size_t nparams = kt_space_param_count(sp);
    if (cfgs->n == 0) return kt__err(KT_ERR_STATE, "%s: the space has no configurations", where);
    if (cfgs->n >= UINT32_MAX) return kt__err(KT_ERR_LIMIT, "%s: %zu configurations: at most %u", where, cfgs->n, UINT32_MAX - 1);
    if (nparams > 64) return kt__err(KT_ERR_LIMIT, "%s: %zu parameters: at most 64", where, nparams);
    const kt__strategy *strat = NULL;
    for (size_t i = 0; i < NSTRATEGIES && strat == NULL; i++)
        if (strcmp(strategy, strategies[i]->name) == 0) strat = strategies[i];
    if (strat == NULL && strcmp(strategy, "auto") == 0) strat = kt__strategy_auto(cfgs->n, nparams, budget ? budget : cfgs->n);
#ifdef KT_NO_LAPACK
    if (strat == &kt__strategy_model)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "%s: strategy 'model' needs LAPACK, which this build of kerntune has not", where);
#endif
    if (strat == NULL)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "%s: unknown strategy '%s' (known: exhaustive, random, local, anneal, genetic, model, auto)",
                       where, strategy);
    kt_search *s = calloc(1, sizeof *s);
    if (s == NULL) return kt__err(KT_ERR_NO_MEMORY, "%s: out of memory", where);
    s->lat.n = cfgs->n, s->lat.nparams = nparams;
    s->lat.idx = malloc((cfgs->n * nparams > 0 ? cfgs->n * nparams : 1) * sizeof *s->lat.idx);
    s->lat.nvalues = malloc((nparams ? nparams : 1) * sizeof *s->lat.nvalues);
    s->state = calloc(cfgs->n, 1);
    s->value = malloc(cfgs->n * sizeof *s->value);
    kt_status st = s->lat.idx && s->lat.nvalues && s->state && s->value ? KT_OK
                                                                         : kt__err(KT_ERR_NO_MEMORY, "%s: out of memory for %zu configurations", where, cfgs->n);
    if (st == KT_OK) {
        memcpy(s->lat.idx, cfgs->idx, cfgs->n * nparams * sizeof *s->lat.idx);
        for (size_t p = 0; p < nparams; p++) s->lat.nvalues[p] = (uint32_t)kt__space_param_nvalues(sp, p);
        for (size_t i = 0; i < cfgs->n; i++) s->value[i] = INFINITY;
        st = lattice_index(&s->lat);
    }
    if (st == KT_OK) {
        s->core = (kt__search_core){.lat = &s->lat, .budget = budget && budget < cfgs->n ? budget : cfgs->n,
                                    .state = s->state, .value = s->value, .best = -1, .walkers = 1};
        kt__rng_seed(&s->core.rng, seed);
        s->strat = strat;
        if ((s->st = strat->create(&s->core)) == NULL)
            st = kt__err(KT_ERR_NO_MEMORY, "%s: out of memory for the %s strategy", where, strat->name);
    }
    if (st != KT_OK) {
        kt_search_destroy(s);
        return st;
    }
    *out = s;
    return KT_OK;
}

static void mark_proposed(kt_search *s, size_t i) {
    s->state[i] = 1;
    s->core.proposed++;
    s->pending++;
}

bool kt__search_take(kt_search *s, size_t config) {
    if (config >= s->lat.n || !kt__fresh(&s->core, config)) return false;
    mark_proposed(s, config);
    return true;
}

size_t kt_search_propose(kt_search *s, size_t *configs, size_t max) {
    if (s == NULL || configs == NULL || max == 0) return 0;
    size_t k = s->strat->propose(s->st, &s->core, configs, max), kept = 0;
    for (size_t j = 0; j < k && j < max; j++) {
        size_t i = configs[j];
        if (i >= s->lat.n || !kt__fresh(&s->core, i)) continue; /* a strategy's slip: never proposed twice */
        mark_proposed(s, i);
        configs[kept++] = i;
    }
    /* a strategy with nothing to say and nothing to wait for: explore at random */
    while (kept == 0 && s->pending == 0) {
        long i = kt__random_fresh(&s->core);
        if (i < 0) break;
        mark_proposed(s, (size_t)i);
        configs[kept++] = (size_t)i;
    }
    return kept;
}

kt_status kt_search_tell(kt_search *s, size_t config, double value) {
    if (s == NULL) return kt__err(KT_ERR_NULL, "kt_search_tell: s is NULL");
    if (config >= s->lat.n || s->state[config] != 1)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_search_tell: configuration %zu is not pending (%s)", config,
                       config >= s->lat.n ? "out of range" : s->state[config] == 0 ? "never proposed" : "told already");
    if (!isfinite(value)) value = INFINITY;
    s->state[config] = 2;
    s->value[config] = value;
    s->pending--;
    s->core.told++;
    if (isfinite(value) && (s->core.best < 0 || value < s->value[s->core.best])) s->core.best = (long)config;
    s->strat->tell(s->st, &s->core, config, value);
    return KT_OK;
}

size_t kt_search_told(const kt_search *s) { return s ? s->core.told : 0; }
void kt__search_set_walkers(kt_search *s, size_t n) {
    if (s) s->core.walkers = n ? n : 1;
}

size_t kt_search_proposed(const kt_search *s) { return s ? s->core.proposed : 0; }
size_t kt_search_size(const kt_search *s) { return s ? s->lat.n : 0; }

long kt_search_best(const kt_search *s, double *value) {
    if (s == NULL || s->core.best < 0) return -1;
    if (value) *value = s->value[s->core.best];
    return s->core.best;
}

const char *kt_search_strategy(const kt_search *s) { return s ? s->strat->name : NULL; }

void kt_search_destroy(kt_search *s) {
    if (s == NULL) return;
    if (s->st) s->strat->destroy(s->st);
    free(s->lat.idx);
    free(s->lat.nvalues);
    free(s->lat.table);
    free(s->state);
    free(s->value);
    free(s);
}
