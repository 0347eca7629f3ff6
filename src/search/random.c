/*
 * random.c - uniform sampling without replacement: the baseline every other strategy must
 * beat, and what the autotuning methodology's score is measured against.
 */
#include "search/search.h"

#include <stdlib.h>

static void *create(kt__search_core *core) {
    (void)core;
    return malloc(1); /* no state: the core's random numbers and record suffice */
}

static size_t propose(void *p, kt__search_core *core, size_t *out, size_t max) {
    (void)p;
    return kt__random_batch(core, out, max);
}

static void tell(void *p, kt__search_core *core, size_t config, double value) { (void)p, (void)core, (void)config, (void)value; }

const kt__strategy kt__strategy_random = {"random", create, propose, tell, free};
