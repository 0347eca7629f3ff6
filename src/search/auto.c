/*
 * auto.c - the strategy kerntune uses when the caller does not name one. A budget that covers
 * the space measures all of it; otherwise the choice is the one bench/search measured best on
 * the recorded spaces of benchmark_hub (docs/ARCHITECTURE.md gives the figures).
 */
#include "search/search.h"

const kt__strategy *kt__strategy_auto(size_t n, size_t nparams, size_t budget) {
    (void)nparams;
    if (budget >= n) return &kt__strategy_exhaustive;
#ifndef KT_NO_LAPACK
    return &kt__strategy_model;
#else
    return &kt__strategy_local;
#endif
}
