/*
 * kerntune/inputs.h - the arguments tuning runs compute on.
 *
 * Tuning runs candidates many times; none of that may show in the caller's data. After the
 * first (tuning) call every argument holds exactly what one launch of the winner produces from
 * the caller's original data: bit-exact for ReadWrite buffers and for every WriteOnly element
 * the winner writes, and ReadOnly buffers untouched (by candidates that respect their declared
 * access; CLONE mode protects the caller even from those that do not). WriteOnly elements that
 * the winner does not write are unspecified after a tuning call: declare such a buffer
 * KT_READ_WRITE if it must keep them. When a tuning call fails, ReadWrite buffers hold the
 * caller's data again and WriteOnly contents are unspecified.
 * Copies and generated buffers keep the caller's pointer's alignment, and a candidate whose
 * requirements reject the copies it would run on is not run (KT_OUTCOME_REJECTED).
 *
 * This header chooses where those runs take their inputs from (the caller's buffers, protected;
 * private clones; or generated buffers, so that a key can be tuned from sizes alone), declares
 * accumulating outputs, and sets generators and benchmark hooks.
 */
#ifndef KERNTUNE_INPUTS_H
#define KERNTUNE_INPUTS_H

#include <kerntune.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Where tuning runs take their inputs from.
 *  - PROTECT (default): the caller's buffers. ReadWrite buffers are snapshot once per tuning and
 *    restored before every run, outside the timed region; before the final launch they are
 *    restored once more. Extra memory: the ReadWrite buffers' total size.
 *  - CLONE: private copies of every buffer; the caller's buffers are not read after the copy
 *    and not written until the single final launch. Extra memory: every buffer's size (plus up
 *    to its alignment window) and the ReadWrite buffers' again (a pristine copy to restore from).
 *  - GENERATED: buffers allocated at the call's sizes and filled by each buffer's generator
 *    (kt_op_set_generator); the caller's buffers are not touched at all until the final launch. */
#define KT_INPUTS_LIST(X)                   \
    X(KT_INPUTS_PROTECT, 0, "protect")      \
    X(KT_INPUTS_CLONE, 1, "clone")          \
    X(KT_INPUTS_GENERATED, 2, "generated")

typedef enum kt_inputs { KT_INPUTS_LIST(KT__ENUMERATOR) } kt_inputs;

/** Sets where tuning runs take their inputs from (default KT_INPUTS_PROTECT). */
KT_API kt_status kt_op_set_inputs(kt_op *op, kt_inputs inputs);

/** Returns an inputs mode's name ("protect", "clone", "generated"), or NULL for an unknown
 *  value. */
KT_API const char *kt_inputs_name(kt_inputs inputs);

/** Declares that candidates accumulate into WriteOnly buffer arg (out += ...): during tuning it
 *  is filled with value (converted to its element type) before every run, and in PROTECT mode,
 *  where the runs used the caller's buffer, once more before the final launch. The caller is
 *  expected to pass it filled with that value, as for any launch; if its prior contents matter,
 *  declare it KT_READ_WRITE instead. Ordinary (tuned) calls never fill it. */
KT_API kt_status kt_op_set_accumulate(kt_op *op, size_t arg, double value);

/** How GENERATED mode fills a buffer: RANDOM (default): floats uniform in [-1, 1), integers
 *  uniform in [0, 16), from the op's seed and the argument index; CONSTANT: every element equal
 *  to value. */
typedef enum kt_gen {
    KT_GEN_RANDOM = 0,
    KT_GEN_CONSTANT = 1
} kt_gen;

/** Sets buffer argument arg's generator for GENERATED mode; value is used by KT_GEN_CONSTANT. */
KT_API kt_status kt_op_set_generator(kt_op *op, size_t arg, kt_gen gen, double value);

/** Fills ptr (bytes bytes of elements of type elem) for buffer argument arg; receives the call's
 *  arguments (for sizes and scalars; their buffer pointers are the caller's and must not be
 *  read). Returns 0 on success. */
typedef int (*kt_generate_fn)(void *ptr, size_t bytes, kt_type elem, const kt_arg *args, size_t nargs,
                              void *user);

/** Sets a user generator for buffer argument arg in GENERATED mode. */
KT_API kt_status kt_op_set_generator_fn(kt_op *op, size_t arg, kt_generate_fn fn, void *user);

/** Sets the seed of KT_GEN_RANDOM (default 0x6b65726e74756e65). */
KT_API kt_status kt_op_set_seed(kt_op *op, uint64_t seed);

/** A benchmark hook. It receives the arguments a tuning run is about to use (or has used), as
 *  a mutable array: a pre-hook may substitute arguments (e.g. point a buffer at a scratch copy)
 *  for that run only; substitutes must meet the candidates' requirements. Returns 0 on success;
 *  nonzero stops the tuning with KT_ERR_HOOK (nothing is recorded; the next call tunes again).
 *  After a failing pre-hook the post-hook is not run: a pre-hook cleans up its own failure. */
typedef int (*kt_hook_fn)(kt_arg *args, size_t nargs, void *user);

/** Sets hooks run before and after every run made while tuning (validation, warm-up and
 *  measured runs, and the reference run), outside the timed region; never around the final
 *  launch or a dispatched call. Either may be NULL. */
KT_API kt_status kt_op_set_bench_hooks(kt_op *op, kt_hook_fn pre, kt_hook_fn post, void *user);

#ifdef __cplusplus
}
#endif

#endif /* KERNTUNE_INPUTS_H */
