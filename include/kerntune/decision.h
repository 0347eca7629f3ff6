/*
 * kerntune/decision.h - a decision in detail.
 *
 * kerntune.h says which candidate a key's decision chose and how it was made. This header says
 * what happened to every candidate and every unit on the way (a unit is a native candidate or
 * one configuration of a variant group): outcome, times, runs, diagnostic, launch geometry,
 * build time; and what the decision cost and how sure it is (confidence, runs, measured time,
 * extra memory, re-racing, a cache record that was rejected).
 */
#ifndef KERNTUNE_DECISION_H
#define KERNTUNE_DECISION_H

#include <kerntune.h>
#include <kerntune/measure.h> /* kt_policy */

#ifdef __cplusplus
extern "C" {
#endif

/** A candidate's or unit's outcome within a decision. Its name (kt_outcome_name) is how
 *  wisdom documents write it (kerntune/cache.h).
 *  - KT_OUTCOME_NOT_RUN: not run (the decision was not measured, or a budget left it out);
 *  - KT_OUTCOME_MEASURED: measured; time and runs are set;
 *  - KT_OUTCOME_REJECTED: its requirements rejected the arguments: never launched;
 *  - KT_OUTCOME_FAILED: returned a failure while being validated or measured (or, in a runner
 *    process, left its device context unusable);
 *  - KT_OUTCOME_INVALID: produced a wrong answer in its validation run;
 *  - KT_OUTCOME_BUILD_FAILED: a variant that failed to compile or load;
 *  - KT_OUTCOME_TIMEOUT: ran past the op's timeout in its runner process (killed);
 *  - KT_OUTCOME_CRASHED: took its runner process down (a signal: SIGSEGV, SIGBUS, abort...). */
#define KT_OUTCOME_LIST(X)                         \
    X(KT_OUTCOME_NOT_RUN, 0, "not_run")            \
    X(KT_OUTCOME_MEASURED, 1, "measured")          \
    X(KT_OUTCOME_REJECTED, 2, "rejected")          \
    X(KT_OUTCOME_FAILED, 3, "failed")              \
    X(KT_OUTCOME_INVALID, 4, "invalid")            \
    X(KT_OUTCOME_BUILD_FAILED, 5, "build_failed")  \
    X(KT_OUTCOME_TIMEOUT, 6, "timeout")            \
    X(KT_OUTCOME_CRASHED, 7, "crashed")

typedef enum kt_outcome { KT_OUTCOME_LIST(KT__ENUMERATOR) } kt_outcome;

/** Returns an outcome's name ("not_run", "measured", "rejected", "failed", "invalid",
 *  "build_failed", "timeout", "crashed"), or NULL for an unknown value. */
KT_API const char *kt_outcome_name(kt_outcome outcome);

/** Returns candidate index's outcome in the decision. */
KT_API kt_outcome kt_decision_outcome(const kt_decision *d, size_t candidate);

/** Returns candidate index's median time in nanoseconds, or a negative value when it was not
 *  measured. */
KT_API double kt_decision_time_ns(const kt_decision *d, size_t candidate);

/** Returns the number of measured runs of candidate index (warm-ups excluded). */
KT_API unsigned kt_decision_runs(const kt_decision *d, size_t candidate);

/** Returns the failure code of the unit that speaks for the candidate (0 when it did not fail):
 *  what its kt_decision_unit_fail_kind says (a return value, a signal number...). */
KT_API int kt_decision_fail_code(const kt_decision *d, size_t candidate);

/** Returns the number of units the decision considered: one per native candidate and one per
 *  configuration of each variant group, in candidate order. Unit accessors below take a unit
 *  index; the candidate accessors above report, for a variant group, its winning or fastest
 *  configuration. */
KT_API size_t kt_decision_unit_count(const kt_decision *d);

/** Returns the unit that won. */
KT_API size_t kt_decision_winner_unit(const kt_decision *d);

/** Returns the candidate index of unit u. */
KT_API size_t kt_decision_unit_candidate(const kt_decision *d, size_t u);

/** Returns unit u's configuration as kt_space_config_format writes it, or NULL for a native
 *  candidate. */
KT_API const char *kt_decision_unit_config(const kt_decision *d, size_t u);

/** Unit u's outcome, median time in ns (negative when not measured), measured runs, and
 *  diagnostic (NULL when none). */
KT_API kt_outcome kt_decision_unit_outcome(const kt_decision *d, size_t u);
KT_API double kt_decision_unit_time_ns(const kt_decision *d, size_t u);
KT_API unsigned kt_decision_unit_runs(const kt_decision *d, size_t u);
KT_API const char *kt_decision_unit_message(const kt_decision *d, size_t u);

/** Writes the launch geometry unit u of a device variant group was planned with for the
 *  tuning's arguments (global size per dimension in blocks or work-items as the space's
 *  geometry kind says, local size, dynamic shared memory in bytes). Any pointer may be NULL.
 *  Returns KT_ERR_NOT_FOUND for a native candidate or a unit that was never planned. A call
 *  with other arguments computes its own geometry from them. */
KT_API kt_status kt_decision_unit_geometry(const kt_decision *d, size_t u, int64_t global[3], int64_t local[3],
                                           int64_t *shared_memory);

/** Stores unit u's measured run times in ns, in the order they were taken, in *times (owned by
 *  the decision) and their number in *n; KT_ERR_NOT_FOUND when it has none. */
KT_API kt_status kt_decision_unit_runtimes(const kt_decision *d, size_t u, const double **times, size_t *n);

/** Returns how long building unit u took in ms (0 for natives and for artifacts found cached). */
KT_API double kt_decision_unit_build_ms(const kt_decision *d, size_t u);

/** Returns the floating-point operations and the bytes one call of unit u does, by the op's work
 *  formulas (kt_op_set_work) for the arguments it was measured on; -1 when the op declared none,
 *  the decision was not measured in this process, or the formula does not compute for the unit
 *  (a name it lacks, a value that is not a number >= 0). Divided by kt_decision_unit_time_ns:
 *  GFLOP/s and GB/s. */
KT_API double kt_decision_unit_flops(const kt_decision *d, size_t u);

/** What unit u's built kernel uses by its compiler's account (backend ABI 13): registers per
 *  thread, static shared memory per block and local memory per thread (spills), in bytes; -1
 *  for one its backend cannot tell. KT_ERR_NOT_FOUND when the unit was not built here or its
 *  backend tells none (the outputs are then -1). */
KT_API kt_status kt_decision_unit_resources(const kt_decision *d, size_t u, int *registers, int *shared_bytes, int *local_bytes);
KT_API double kt_decision_unit_bytes(const kt_decision *d, size_t u);

/** Returns the wall time in ms that validating unit u took (its validation run, the comparison
 *  with the reference, restoring inputs), 0 when it was not validated. */
KT_API double kt_decision_unit_validation_ms(const kt_decision *d, size_t u);

/** Returns the wall time in ms that measuring unit u cost beyond its runs' own times: loading it
 *  (into a runner process), and around each run preparing arguments, flushing caches,
 *  restoring inputs and a runner's round trip. With build, validation and the runs it makes the
 *  unit's whole cost (T4's compilation, validation, framework and runtimes). */
KT_API double kt_decision_unit_framework_ms(const kt_decision *d, size_t u);

/** Returns the diagnostic of a candidate that failed or was invalid in the decision (e.g.
 *  "output 'y' element 17: expected 3.5, got 3.25"), or NULL. */
KT_API const char *kt_decision_message(const kt_decision *d, size_t candidate);

/** Returns the decision's confidence in [0, 1]: the smallest, over the other measured units, of
 *  the probability that the winner is no more than the race's tolerance slower than that unit
 *  (1 when nothing else was measured; 0 for decisions not measured). */
KT_API double kt_decision_confidence(const kt_decision *d);

/** Returns how many runs of candidates the decision's tuning made (validation runs, warm-ups
 *  and measured runs). */
KT_API uint64_t kt_decision_total_runs(const kt_decision *d);

/** Returns the time, in ns, of the warm-ups and measured runs of the decision's tuning (the
 *  kernels' times alone: restores, flushes and validation are not counted). */
KT_API double kt_decision_measure_ns(const kt_decision *d);

/** Returns how many threads built the variants of the decision's tuning (0 when it built none
 *  on this machine): the context's compile threads, or, when the device measured while they
 *  built and the context left their number to kerntune, a quarter fewer
 *  (kt_context_set_compile_threads). */
KT_API size_t kt_decision_build_threads(const kt_decision *d);

/** Returns how busy the build threads were between from_s and to_s seconds after the tuning's
 *  background builds could begin (when the device measured while they built): the time spent
 *  building in that window, summed over builds, over kt_decision_build_threads times the
 *  window. A build the tuning's end left running (a budget of seconds does not wait for it)
 *  counts as busy until then; the window ends there at the latest (kt_decision_build_end_s).
 *  -1 when the tuning built nothing in the background or the window is empty. */
KT_API double kt_decision_build_busy(const kt_decision *d, double from_s, double to_s);

/** Returns when the tuning's background builds stopped, in seconds after they could begin (0
 *  when it built nothing in the background). */
KT_API double kt_decision_build_end_s(const kt_decision *d);

/** Returns the policy that measured the decision. */
KT_API kt_policy kt_decision_policy(const kt_decision *d);

/** Unit u's warm-up runs, and the bounds of its estimate's confidence interval in ns (negative
 *  when not measured). */
KT_API unsigned kt_decision_unit_warmups(const kt_decision *d, size_t u);
KT_API double kt_decision_unit_ci_low_ns(const kt_decision *d, size_t u);
KT_API double kt_decision_unit_ci_high_ns(const kt_decision *d, size_t u);

/** Returns whether the decision's candidates were validated against a reference. */
KT_API int kt_decision_validated(const kt_decision *d);

/** Returns the unit that was the reference of a measured decision (its outputs were the
 *  expected ones), or -1: validated against a reference function, not validated, or not
 *  measured. */
KT_API long kt_decision_reference_unit(const kt_decision *d);

/** For a reference chosen by consensus (kt_op_set_reference_consensus): returns how many of the
 *  units that voted agree with the reference's outputs, itself included, and sets *among (when
 *  not NULL) to how many voted; 0 and 0 for any other reference. */
KT_API size_t kt_decision_reference_consensus(const kt_decision *d, size_t *among);

/** Returns the most memory, in bytes, that the tuning behind the decision allocated at once
 *  beyond the caller's own buffers (snapshots, clones, generated inputs, reference outputs). */
KT_API size_t kt_decision_peak_extra_bytes(const kt_decision *d);

/** Returns the confidence the decision's race asked for (the context's race confidence when it
 *  was measured, kt_context_set_race), or a negative value when none was asked for (another
 *  policy, a decision not measured, or one recorded by a kerntune that did not keep it). */
KT_API double kt_decision_requested_confidence(const kt_decision *d);

/** Returns 1 when the decision ended below the confidence its race asked for
 *  (kt_decision_confidence < kt_decision_requested_confidence): the race stopped, at its run
 *  cap or a budget, before it could tell the finalists apart. Such a decision is recorded as not
 *  settled: the next tuning of its key that may measure (effort MEASURE, in this or another
 *  process) re-races its finalists instead of serving it; CACHE_ONLY serves it as it is. */
KT_API int kt_decision_below_confidence(const kt_decision *d);

/** Returns 1 when the decision was made by re-racing the finalists of a recorded decision that
 *  had ended below its requested confidence: the finalists were measured afresh (validated as
 *  usual), every other unit kept its recorded result without running (0 runs) or competing. */
KT_API int kt_decision_reraced(const kt_decision *d);

/** Whether the op's recorded decisions that ended below their race's confidence are re-raced
 *  (on, the default: see kt_decision_below_confidence). Off: every recorded decision of this op
 *  is served as it is, as Triton's autotuner never measures a key twice (kerntune.triton turns
 *  it off). Set while the op is being built. */
KT_API kt_status kt_op_set_rerace(kt_op *op, int on);

/** Returns 1 when unit u was a finalist of the decision's race: measured and not dropped when
 *  the race stopped (a unit is dropped once it is slower than the best with the race's
 *  confidence; under the other policies none is), or the winner. */
KT_API int kt_decision_unit_finalist(const kt_decision *d, size_t u);

/** Returns why the persistent cache's decision for this key was rejected (a candidate or
 *  configuration the op does not have, one outside today's space or breaking a constraint, a
 *  native given a configuration, a stored value of the wrong type...), or NULL when none was.
 *  A rejected record is never launched and lends nothing: the key is decided from scratch (by
 *  measuring, with effort MEASURE), and the new decision replaces the record. Valid as long as
 *  the decision. */
KT_API const char *kt_decision_cache_rejected(const kt_decision *d);

/* How a unit's run failed (outcomes KT_OUTCOME_FAILED, KT_OUTCOME_TIMEOUT and
 * KT_OUTCOME_CRASHED), and what kt_decision_unit_fail_code and kt_decision_fail_code then hold.
 * One list generates the enum, kt_fail_kind_name() and kt_fail_kind_describe(); values are
 * stable, new kinds are only appended. */
#define KT_FAIL_KIND_LIST(X)                                                                       \
    X(NONE, 0, "none", "it did not fail while run (or never ran); the code is 0")                   \
    X(RETURNED, 1, "returned", "it returned nonzero (a native candidate, a C variant); the code is that value") \
    X(LAUNCH, 2, "launch",                                                                         \
      "its backend failed to load, launch or copy for it; the code is the backend's kt_status")    \
    X(CRASH, 3, "crash", "a signal killed its runner process; the code is the signal number")      \
    X(EXIT, 4, "exit", "its runner process exited while running it; the code is the exit status")  \
    X(TIMEOUT, 5, "timeout",                                                                       \
      "it ran past the op's timeout and its runner process was killed; the code is 0")             \
    X(RECORDED, 6, "recorded",                                                                     \
      "it failed in an earlier tuning, recorded in the persistent cache, which keeps the outcome " \
      "and message but not the kind or code (0)")

typedef enum kt_fail_kind {
#define KT__FAIL_KIND_ENUM(name, value, text, description) KT_FAIL_##name = value,
    KT_FAIL_KIND_LIST(KT__FAIL_KIND_ENUM)
#undef KT__FAIL_KIND_ENUM
} kt_fail_kind;

/** Returns a kind's name ("crash", "timeout", ...; static storage); unknown kinds return
 *  "unknown". */
KT_API const char *kt_fail_kind_name(kt_fail_kind kind);

/** Returns what a kind means and what its code holds (static storage); unknown kinds get a
 *  message saying so, never NULL. */
KT_API const char *kt_fail_kind_describe(kt_fail_kind kind);

/** Unit u's failure kind and code (KT_FAIL_NONE and 0 for a unit that did not fail while run,
 *  or for an out-of-range u). For a variant group's unit or a native candidate alike; the
 *  candidate accessor kt_decision_fail_code reports the code of the unit that speaks for the
 *  candidate. */
KT_API kt_fail_kind kt_decision_unit_fail_kind(const kt_decision *d, size_t u);
KT_API int kt_decision_unit_fail_code(const kt_decision *d, size_t u);

#ifdef __cplusplus
}
#endif

#endif /* KERNTUNE_DECISION_H */
