/*
 * kerntune/measure.h - how tuning measures candidates, and what it may cost.
 *
 * The measurement policy and its settings (the race by default), flushing caches between runs,
 * progress reports, budgets (units, time, runs), where candidates run while tuning (isolation in
 * runner processes) and their timeout. Every setting has a default; a program that keeps them
 * needs only kerntune.h.
 */
#ifndef KERNTUNE_MEASURE_H
#define KERNTUNE_MEASURE_H

#include <kerntune.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * How candidates are measured (the measurement engine, src/tune/engine.c).
 *  - KT_POLICY_RACE (default): every candidate runs once after a warm-up; then the survivors
 *    run in rounds, and a candidate is dropped as soon as it is, at the race's confidence,
 *    slower than the current best by more than its tolerance. The race stops when one is
 *    left, when the survivors are within the tolerance of the best with confidence, when each
 *    reached its run cap, or when a budget is spent (kt_context_set_race).
 *  - KT_POLICY_TRITON: as Triton's do_bench: one call, five runs to estimate the time, warm-up
 *    runs filling 25 ms, repetitions filling 100 ms (at least one of each), their median.
 *  - KT_POLICY_KERNELTUNER: as Kernel Tuner: one warm-up, seven runs, their mean.
 *  - KT_POLICY_FIXED: the counts and time of kt_context_set_measure, the median.
 */
#define KT_POLICY_LIST(X)                      \
    X(KT_POLICY_RACE, 0, "race")               \
    X(KT_POLICY_TRITON, 1, "triton")           \
    X(KT_POLICY_KERNELTUNER, 2, "kerneltuner") \
    X(KT_POLICY_FIXED, 3, "fixed")

typedef enum kt_policy { KT_POLICY_LIST(KT__ENUMERATOR) } kt_policy;

/** Selects the measurement policy. */
KT_API kt_status kt_context_set_policy(kt_context *ctx, kt_policy policy);

/** Returns the measurement policy in use. */
KT_API kt_policy kt_context_policy(const kt_context *ctx);

/** Returns a policy's name ("race", "triton", "kerneltuner", "fixed"), or NULL for an unknown
 *  value. */
KT_API const char *kt_policy_name(kt_policy policy);

/** Parses a policy name as kt_policy_name writes it; KT_ERR_INVALID_ARGUMENT otherwise. */
KT_API kt_status kt_policy_parse(const char *name, kt_policy *out);

/**
 * Sets the race: confidence in [0.5, 0.999999] (default 0.99), tolerance >= 0 as a fraction
 * (default 0.01: candidates within 1% of each other count as equally fast) and the most
 * measured runs one candidate gets, 3 to 10000000 (default 100).
 */
KT_API kt_status kt_context_set_race(kt_context *ctx, double confidence, double tolerance, unsigned max_runs);

/**
 * Selects KT_POLICY_FIXED and sets it: warmup_runs unmeasured runs, then measured runs until at
 * least min_runs have run and min_time_s seconds were measured, or max_runs have run; the
 * estimate is the median. Defaults: 1 warm-up, 3 to 1000 runs, 2 ms. Requires 1 <= min_runs
 * <= max_runs <= 10000000 and min_time_s >= 0. With validation on, a candidate's validation
 * run counts as its first warm-up.
 */
KT_API kt_status kt_context_set_measure(kt_context *ctx, unsigned warmup_runs, unsigned min_runs,
                                        unsigned max_runs, double min_time_s);

/** Cache flushing between measured runs, outside the timed region.
 *  - KT_FLUSH_AUTO (default): variants of backends that can flush (the C backend writes a
 *    buffer as large as the CPU's last-level cache, OpenCL one as large as the device's; CUDA
 *    reads one twice as large as the L2 cache, leaving it clean, so that the measured run writes
 *    back nothing of the flush's: kt_device_flush, kerntune/device.h) and native device
 *    candidates (kt_op_add_native_queued); other native candidates are not flushed;
 *  - KT_FLUSH_OFF: never;
 *  - KT_FLUSH_ON: as AUTO, and native candidates too (the host's last-level cache). */
#define KT_FLUSH_LIST(X)         \
    X(KT_FLUSH_AUTO, 0, "auto")  \
    X(KT_FLUSH_OFF, 1, "off")    \
    X(KT_FLUSH_ON, 2, "on")

typedef enum kt_flush { KT_FLUSH_LIST(KT__ENUMERATOR) } kt_flush;

/** Sets cache flushing. */
KT_API kt_status kt_context_set_flush(kt_context *ctx, kt_flush flush);

/** Returns a flush mode's name ("auto", "off", "on"), or NULL for an unknown value. */
KT_API const char *kt_flush_name(kt_flush flush);

/** Reports progress while an op tunes: after each unit (a native candidate or a variant's
 *  configuration) is decided, done of total units are through, valid of them measured, failed
 *  disqualified, and best_ns is the fastest time so far (negative before the first). Called on
 *  the tuning thread. */
typedef void (*kt_progress_fn)(size_t done, size_t total, size_t valid, size_t failed, double best_ns, void *user);

/** Sets the progress function (NULL: none, the default). */
KT_API kt_status kt_context_set_progress_fn(kt_context *ctx, kt_progress_fn fn, void *user);

/** Reports each unit as a tuning decides it: d is the decision being made (not yet published:
 *  read it only inside the call, through the kt_decision_unit_* accessors), u the unit just
 *  screened (measured once, or failed: its outcome says) or found failing to build. Called on
 *  the tuning thread, before the progress function, so that a program can keep results as they
 *  come (the kerntune command writes its T4 file as it goes). */
typedef void (*kt_unit_fn)(const kt_decision *d, size_t u, void *user);

/** Sets the unit function (NULL: none, the default). */
KT_API kt_status kt_context_set_unit_fn(kt_context *ctx, kt_unit_fn fn, void *user);

/** The clock a budget of seconds (kt_op_set_budget) counts on: now(user) returns seconds from
 *  any fixed origin and never decreases; it is called on the tuning thread and on the build
 *  threads (it times builds too), so it must be safe to call from any thread. NULL (the default)
 *  is the wall clock. A replay of recorded results passes its simulated time (what the runs
 *  served and the builds recorded cost on the recorded device), so that a budget of seconds
 *  bounds what the search would have cost there. On such a clock builds are taken to add up,
 *  one after another (parallel build threads do not shorten it), and a tuning stops proposing
 *  when the builds in flight, the next one at the 90th percentile of those so far, and their
 *  screening would not fit in what is left. Run times are never read from it. */
typedef double (*kt_clock_fn)(void *user);

/** Returns the wall clock kerntune times with (a budget of seconds without a budget clock, a
 *  build's time, the isolation runner's runs): seconds from a fixed origin (CLOCK_MONOTONIC), never
 *  decreasing, safe to call from any thread. */
KT_API double kt_now_s(void);

/** Sets the budget clock (NULL: the wall clock). */
KT_API kt_status kt_context_set_budget_clock(kt_context *ctx, kt_clock_fn now, void *user);

/** Limits each tuning of the op: at most max_units units (native candidates and variant
 *  configurations, in order; 0: no limit) are validated and measured, and none is started after
 *  max_seconds of wall time, or of the context's budget clock (0: no limit). Units left out end
 *  KT_OUTCOME_NOT_RUN. On the wall clock, a tuning does not wait past max_seconds for builds
 *  still running once a unit was measured: it returns without them, and stops them where the
 *  backend can (CUDA, C); others finish in the background (kt_context_destroy waits for any
 *  still running). */
KT_API kt_status kt_op_set_budget(kt_op *op, size_t max_units, double max_seconds);

/** Limits each tuning of the op to a fraction (0 to 1) of its units: with a count from
 *  kt_op_set_budget, the smaller of the two; 0 (the default): no such limit. A tuning rounds
 *  it up to a whole unit. */
KT_API kt_status kt_op_set_budget_fraction(kt_op *op, double fraction);

/** Where candidates run while tuning:
 *  - KT_ISOLATE_AUTO (default): variants of a backend whose faults poison its device context
 *    (CUDA: an illegal address would leave the caller's context unusable) in a runner process,
 *    everything else in the caller's process;
 *  - KT_ISOLATE_ON: every variant, and every native candidate that can be, in a runner process:
 *    one that crashes, hangs past the timeout or poisons its device context is disqualified
 *    (KT_OUTCOME_CRASHED, KT_OUTCOME_TIMEOUT, KT_OUTCOME_FAILED, with its kind and code:
 *    kt_decision_unit_fail_kind) and the runner replaced;
 *  - KT_ISOLATE_OFF: everything in the caller's process.
 *  A runner is a new process (posix_spawn), never a fork: it finds the code it runs by the
 *  object file that holds it. Code in a shared object runs in kerntune-runner (found through
 *  KERNTUNE_RUNNER, its install path or the build tree), which loads that object; code in the
 *  program itself (a native of the program, kerntune linked statically) runs in a new start of
 *  the program, which kerntune stops before its main to serve as the runner. So a runner sees
 *  the objects' static data as initialised, never as the caller's process changed it.
 *  What cannot run in a runner runs in the caller's process, and an info line in the log says
 *  why: a backend without KT_BACKEND_CAP_RUNNER; a native that returns its output
 *  (kt_op_add_native_result), of an op on device memory, whose user pointer is an address of the
 *  caller's memory (NULL, or a number that is no address, passes as it is), or whose code a
 *  runner cannot find: not in an object file (generated at run time), or in a shared object
 *  that has no build-id (link with --build-id, the default of most toolchains) when the function
 *  has no exported symbol. The final launch of the winner is always the caller's, on the
 *  caller's data. */
#define KT_ISOLATION_LIST(X)         \
    X(KT_ISOLATE_AUTO, 0, "auto")    \
    X(KT_ISOLATE_OFF, 1, "off")      \
    X(KT_ISOLATE_ON, 2, "on")

typedef enum kt_isolation { KT_ISOLATION_LIST(KT__ENUMERATOR) } kt_isolation;

/** Sets where the op's candidates run while tuning (default KT_ISOLATE_AUTO). */
KT_API kt_status kt_op_set_isolation(kt_op *op, kt_isolation isolation);

/** Returns an isolation mode's name ("auto", "off", "on"), or NULL for an unknown value. */
KT_API const char *kt_isolation_name(kt_isolation isolation);

/** Sets how long one isolated run may take before its runner is killed (seconds > 0;
 *  default 10). */
KT_API kt_status kt_op_set_timeout(kt_op *op, double seconds);

/** Limits every tuning of the op to max_runs runs of candidates in all (validation runs,
 *  warm-ups and measured runs; 0: no limit). The first candidate that passes validation always
 *  gets one measured run, so a key is never left undecided by a budget. */
KT_API kt_status kt_op_set_run_budget(kt_op *op, uint64_t max_runs);

/** Returns how many measured runs (warm-ups excluded) the op has made in all its tunings. */
KT_API uint64_t kt_op_measured_runs(const kt_op *op);

#ifdef __cplusplus
}
#endif

#endif /* KERNTUNE_MEASURE_H */
