/*
 * exhaustive.c - every configuration, in enumeration order: the strategy for spaces the budget
 * covers, and the reference the others are judged against.
 */
#include "search/search.h"

#include <stdlib.h>

typedef struct exhaustive {
    size_t next;
} exhaustive;

static void *create(kt__search_core *core) {
    (void)core;
    return calloc(1, sizeof(exhaustive));
}

static size_t propose(void *p, kt__search_core *core, size_t *out, size_t max) {
    exhaustive *e = p;
    size_t k = 0;
    for (; e->next < core->lat->n && k < max; e->next++)
        if (kt__fresh(core, e->next)) out[k++] = e->next;
    return k;
}

static void tell(void *p, kt__search_core *core, size_t config, double value) { (void)p, (void)core, (void)config, (void)value; }

const kt__strategy kt__strategy_exhaustive = {"exhaustive", create, propose, tell, free};
