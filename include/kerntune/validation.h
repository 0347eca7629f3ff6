/*
 * kerntune/validation.h - checking each candidate's outputs against a reference while tuning.
 *
 * Validation is on by default, with the op's default candidate as the reference.
 * While tuning, each candidate's first run is a validation run: ReadWrite inputs restored,
 * WriteOnly outputs poisoned (filled with a pattern: a NaN with a payload for floats, 0xA5 bytes
 * for integers) unless declared accumulating, and afterwards every WriteOnly and ReadWrite
 * buffer and the returned output are compared with the reference's: integers exactly, floats
 * within |actual - expected| <= atol + rtol * |expected|; NaN matches only NaN; an element still
 * holding the poison pattern was left unwritten and fails (for 8-bit outputs the pattern 0xA5
 * is also an ordinary value, so an unwritten element whose true value is 0xA5 goes unnoticed).
 * A candidate that changed a ReadOnly buffer fails; a reference that did is not used. A failing
 * candidate is disqualified (KT_OUTCOME_INVALID) with a diagnostic naming the output, the
 * element, the expected and the actual value.
 * The reference is, in order: the function set by kt_op_set_reference_fn, the candidate named by
 * kt_op_set_reference, the op's default candidate; of a variant group, its first configuration
 * that accepts the arguments, or one chosen by consensus (kt_op_set_reference_consensus). A
 * tuning can stop when most candidates disagree with it (kt_op_set_disagreement_stop). If the
 * reference does not accept the
 * arguments or fails, the key is tuned without validation (logged; kt_decision_validated says so).
 * Validation adds the reference's outputs to a tuning's extra memory.
 */
#ifndef KERNTUNE_VALIDATION_H
#define KERNTUNE_VALIDATION_H

#include <kerntune.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Names the reference candidate. */
KT_API kt_status kt_op_set_reference(kt_op *op, const char *name);

/** With on nonzero, the reference candidate only validates the others: it is not measured and
 *  never wins (for a reference that is a slow or out-of-space implementation). Default 0. */
KT_API kt_status kt_op_set_reference_only(kt_op *op, int on);

/** A reference implementation: computes the expected outputs from args in place (as a candidate
 *  would), and for an op with a result fills *result (NULL otherwise). Returns 0 on success. */
typedef int (*kt_reference_fn)(const kt_arg *args, size_t nargs, void *user, kt_result *result);

/** Sets a reference function; it takes precedence over any reference candidate. */
KT_API kt_status kt_op_set_reference_fn(kt_op *op, kt_reference_fn fn, void *user);

/** A comparison of a candidate's outputs with the reference's in place of kerntune's rules (a
 *  custom check: Kernel Tuner's `verify`). expected and actual are the op's nargs arguments in
 *  its order: each output buffer (WriteOnly or ReadWrite) as host memory holding the reference's
 *  and the candidate's bytes (read back from a device first), every other argument as the call
 *  passed it except that a ReadOnly buffer's ptr is NULL (it is not read back). Returns nonzero
 *  when the candidate's outputs are correct; 0 when not, with a diagnostic in msg (len bytes;
 *  left empty, the candidate's message says only that the verify function refused it). Called on
 *  the tuning thread, never concurrently for one op. */
typedef int (*kt_verify_fn)(const kt_arg *expected, const kt_arg *actual, size_t nargs, void *user, char *msg, size_t len);

/** Sets a verify function (NULL: kerntune's rules, the default). It decides every validation
 *  and the consensus's votes (kt_op_set_reference_consensus) in place of the element rules,
 *  tolerances and kt_op_set_compare; a ReadOnly buffer written into, and a returned output,
 *  are still checked by kerntune. A runner process's device then checks nothing itself: every
 *  validation run's outputs come back. Before the op's first call. */
KT_API kt_status kt_op_set_verify_fn(kt_op *op, kt_verify_fn fn, void *user);

/** Declares the work of one call: flops, the floating-point operations, and bytes, the bytes it
 *  moves to and from memory, each an expression of the language of spaces (either may be NULL)
 *  over the op's arguments by name (a scalar stands for its value, a buffer for its element
 *  count) and, for a variant, its parameters: "2 * M * N * K" for a matmul of scalars M, N, K.
 *  A measured decision then gives each unit's (kt_decision_unit_flops, _bytes), and with its
 *  time its GFLOP/s and GB/s. Before the op's first call. */
KT_API kt_status kt_op_set_work(kt_op *op, const char *flops, const char *bytes);

/** The most units that vote in kt_op_set_reference_consensus. */
#define KT_REFERENCE_CONSENSUS_MAX 64

/** Chooses the reference by consensus instead of taking the reference candidate's first unit,
 *  for a reference candidate that is a variant group whose configurations should all compute
 *  the same: its first n units (in the order of its space) that accept the arguments each run
 *  once on poisoned outputs, their outputs are compared with each other by the rules and
 *  tolerances of validation, and the unit whose outputs agree with those of the most others
 *  becomes the reference (on a tie, the earlier one). A unit that fails, or writes into a
 *  ReadOnly input, agrees with none. kt_decision_reference_consensus says how many agreed. The
 *  voting runs cost one run each and are not measured; an op that returns its output
 *  (kt_op_add_native_result) takes the first unit. n of 0 or 1: off (the default); at most
 *  KT_REFERENCE_CONSENSUS_MAX. Before the op's first call. */
KT_API kt_status kt_op_set_reference_consensus(kt_op *op, size_t n);

/** Stops a tuning that finds most candidates wrong: once at least min_validated units were
 *  compared with the reference (its own unit not counted) and more than half of them disagreed
 *  with it, no more units are admitted and the tuning ends with KT_ERR_DISAGREEMENT, deciding and
 *  recording nothing (the next call tunes again). What was decided up to then was reported to
 *  the context's unit function (kt_context_set_unit_fn), each unit as it came, so a caller can
 *  tell which candidates agreed. Such a tuning spends its budget on disqualifications: the
 *  reference, or the space, is likely wrong (a parameter that changes what the kernel
 *  computes). 0: off (the default). Before the op's first call. */
KT_API kt_status kt_op_set_disagreement_stop(kt_op *op, size_t min_validated);

/** Stops the op's tuning in progress as kt_op_set_disagreement_stop does (no more units are
 *  admitted; it ends with KT_ERR_DISAGREEMENT, deciding and recording nothing), for a caller
 *  that judges the disagreement itself: one whose units are validated elsewhere (the kerntune
 *  command's fleet, whose workers validate) and told to it through the unit function
 *  (kt_context_set_unit_fn), from which it may be called. Thread-safe; a tuning that begins
 *  after it forgets it. */
KT_API kt_status kt_op_stop_disagreement(kt_op *op);

/** Switches validation on (default) or off for the op. */
KT_API kt_status kt_op_set_validation(kt_op *op, int on);

/** Sets the tolerances for every floating-point output of the op (both >= 0). Defaults, by
 *  element type: f64 atol 1e-12 rtol 1e-9; f32 atol 1e-6 rtol 1e-4; f16 and bf16 atol 1e-3
 *  rtol 1e-2. Integers always compare exactly. */
KT_API kt_status kt_op_set_tolerance(kt_op *op, double atol, double rtol);

/** How an output buffer is compared with the reference's (kt_op_set_compare). */
typedef enum kt_compare {
    /** Element by element (the default), as the top of this header says. */
    KT_COMPARE_ELEMENTS = 0,
    /** The sum of its elements: the candidate's within atol + rtol * (the sum of the reference's
     *  magnitudes) of the reference's, elements the reference left unwritten (poison) left out of
     *  both, NaN and infinities failing. For an output whose elements depend on the
     *  configuration but whose total does not: the partial sums of a reduction, one per block,
     *  when the number of blocks is a tuning parameter (Kernel Tuner's reduction example
     *  verifies it so). Integers sum exactly (in 64 bits, wrapping). */
    KT_COMPARE_SUM = 1
} kt_compare;

/** Sets how output buffer argument arg (WriteOnly or ReadWrite) is compared with the reference's.
 *  Fails with KT_ERR_INVALID_ARGUMENT for an argument that is not an output buffer or an unknown
 *  kt_compare, KT_ERR_STATE once the op is frozen. */
KT_API kt_status kt_op_set_compare(kt_op *op, size_t arg, kt_compare how);

#ifdef __cplusplus
}
#endif

#endif /* KERNTUNE_VALIDATION_H */
