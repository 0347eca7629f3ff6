/*
 * auto.c - the strategy kerntune uses when the caller does not name one. A budget that covers
 * the space measures all of it; otherwise local search (from the best of a small random
 * design, with far moves before each restart), chosen by measurement: bench/search on the
 * recorded spaces of benchmark_hub and the H200's (within 3% at 5% of every space, median over
 * seeds), and real tunings on the H200 (a minute: within 3% of the best with two seeds of four
 * before the far moves, eight of eight with them, measuring units as they are built:
 * src/search/README.md and bench/RESULTS.md give the figures).
 * The model scores higher on some recorded spaces when evaluations come one at a time, lower
 * when they come in parallel batches as a tuning's builds do.
 */
#include "search/search.h"

const kt__strategy *kt__strategy_auto(size_t n, size_t nparams, size_t budget) {
    (void)nparams;
    if (budget >= n) return &kt__strategy_exhaustive;
    return &kt__strategy_local;
}
