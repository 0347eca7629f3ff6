/*
 * kerntune/search.h - search strategies: which configurations of a space to measure when
 * there are too many to measure them all.
 *
 * A search runs over the valid configurations of a space's last enumeration
 * (kt_space_enumerate), named by their index there. It proposes configurations to evaluate,
 * a batch at a time, and is told each one's objective (a time: lower is better; INFINITY, or
 * any value that is not finite, for one that was invalid: it failed to build, to launch or to
 * validate). It never proposes a configuration twice, so every proposal is worth evaluating,
 * and it is deterministic: the same space, strategy, seed, budget and results, told in the same
 * order, give the same proposals.
 *
 * Strategies:
 *   exhaustive  every configuration, in enumeration order
 *   random      uniform sampling without replacement
 *   local       greedy local search on the lattice of the parameters' value lists (neighbours
 *               differ in one parameter by one step), moving to the first neighbour that
 *               improves; when none does, to the first of the far ones (one parameter any
 *               number of steps away, or a change a constraint forbids mended by a step of
 *               another parameter) that improves by 1%; from a local optimum of both it
 *               restarts near the best found (a few random steps away) or, every other time,
 *               anywhere
 *   anneal      simulated annealing over the same neighbourhoods, its temperature falling over
 *               the budget
 *   genetic     a genetic algorithm: tournaments, uniform crossover, one-step mutations, the
 *               best of parents and children surviving
 *   model       Bayesian optimisation: a Gaussian process over the parameters' value positions
 *               (LAPACK's Cholesky), proposing by expected improvement of log time
 *   auto        picks one of these for the space's size and the budget (see src/search/README.md)
 *
 * With a budget of N evaluations a caller proposes and tells until N results were told; a
 * search can run past its budget (it goes on proposing until the space is spent), but the
 * strategies pace themselves by it (annealing's temperature, the model's exploration).
 */
#ifndef KERNTUNE_SEARCH_H
#define KERNTUNE_SEARCH_H

#include <kerntune.h>
#include <kerntune/variants.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kt_search kt_search;

/** How many strategies there are, and strategy i's name (NULL past the end); "auto" is the
 *  last. */
KT_API size_t kt_search_strategy_count(void);
KT_API const char *kt_search_strategy_name(size_t i);

/** Creates a search over the configurations of sp's last enumeration with the named strategy,
 *  seeded by seed; budget is the number of evaluations the caller means to spend (0: all of
 *  them). The search copies what it needs: sp may change or go afterwards. Fails with
 *  KT_ERR_INVALID_ARGUMENT for an unknown strategy (the message lists the known ones) and with
 *  KT_ERR_STATE when sp has no configurations (not enumerated, or none valid). */
KT_API kt_status kt_search_create(const kt_space *sp, const char *strategy, uint64_t seed, size_t budget, kt_search **out);

/** Writes up to max configurations to evaluate next into configs and returns how many: none
 *  once every configuration was proposed. Configurations proposed and not yet told are
 *  pending; a strategy that waits for them may propose fewer than max, but a search with none
 *  pending always proposes at least one while any configuration is left. */
KT_API size_t kt_search_propose(kt_search *s, size_t *configs, size_t max);

/** Tells the objective of a pending configuration (not finite: invalid). Fails with
 *  KT_ERR_INVALID_ARGUMENT for a configuration that is not pending (never proposed, or told
 *  already). */
KT_API kt_status kt_search_tell(kt_search *s, size_t config, double value);

/** Results told so far, configurations proposed so far, and the space's size. */
KT_API size_t kt_search_told(const kt_search *s);
KT_API size_t kt_search_proposed(const kt_search *s);
KT_API size_t kt_search_size(const kt_search *s);

/** The best configuration told so far (its value in *value when value is not NULL), or -1 when
 *  no valid one was told. */
KT_API long kt_search_best(const kt_search *s, double *value);

/** The strategy running: for "auto", the one it chose. */
KT_API const char *kt_search_strategy(const kt_search *s);

/** Releases a search; NULL is harmless. */
KT_API void kt_search_destroy(kt_search *s);

/** Sets how the op's tunings choose which configurations of its variant groups to measure: a
 *  strategy above (NULL or "auto", the default: exhaustive when the budget covers every
 *  configuration, else the strategy auto picks for the space and the budget), seeded by seed.
 *  With a budget of units (kt_op_set_budget, kt_op_set_budget_fraction), a tuning measures the
 *  native candidates first, then asks each variant group's search for configurations in turn
 *  until the budget is spent; every configuration it proposes counts, also one that fails to
 *  build or launch, is rejected by a limit, or is known from the persistent cache (whose
 *  recorded time or failure it is told without running it: a tuning run again after an
 *  interrupted one replays the search to where it stopped, and goes on). Fails with
 *  KT_ERR_INVALID_ARGUMENT for an unknown strategy, KT_ERR_STATE once the op is frozen. */
KT_API kt_status kt_op_set_search(kt_op *op, const char *strategy, uint64_t seed);

#ifdef __cplusplus
}
#endif

#endif /* KERNTUNE_SEARCH_H */
