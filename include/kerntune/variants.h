/*
 * kerntune/variants.h - candidates compiled at run time from one kernel source.
 *
 * A variant group is one candidate per valid configuration of a space: the kernel source
 * compiled with the configuration's parameters and derived values as defines, by the backend
 * of the op's device (the C compiler for the host CPU, OpenCL, CUDA). This header declares
 * spaces, variant groups, constant memory, and where and how variants are built.
 */
#ifndef KERNTUNE_VARIANTS_H
#define KERNTUNE_VARIANTS_H

#include <kerntune.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
 * Spaces
 *
 * A space is the set of variants of one kernel source: named parameters with value lists, the
 * constraints that valid combinations meet, values derived from them, and the launch geometry
 * they imply. Values, constraints, derived values and geometry are expression strings in the
 * Python subset that T1 files use: literals (int, float, bool, string), lists and range(),
 * + - * / // % ** (Python semantics: floor division and modulo toward negative infinity),
 * chained comparisons, and / or / not, x if c else y, min max abs int float len round sum,
 * indexing (ProblemSize[0]). A name in an expression is a parameter, a derived value or an
 * input; an unknown name is an error naming the expression and the column.
 * Inputs are values the space does not choose: problem sizes and key values, bound before
 * enumerating (kt_space_bind_*). In sizes and geometry evaluated for the whole space (not one
 * configuration), a parameter's name stands for its list of values: max(filter_width).
 * ------------------------------------------------------------------------------------------- */

typedef struct kt_space kt_space;

/** A configuration being checked by a constraint callback; read it with kt_config_*. */
typedef struct kt_config kt_config;

/** Creates an empty space; release with kt_space_destroy. */
KT_API kt_status kt_space_create(kt_space **out);

/** Releases the caller's reference to a space (ops it was added to keep theirs). NULL is
 *  harmless. */
KT_API void kt_space_destroy(kt_space *sp);

/** Adds a parameter whose values are the list that expression values gives ("[16, 32, 64]",
 *  "range(1, 9)", "['float', 'double']"); values must be ints, floats, bools or strings, and
 *  the list must not be empty. Parameters vary in declaration order, the last fastest. */
KT_API kt_status kt_space_add_param(kt_space *sp, const char *name, const char *values);

/** Adds an integer parameter with n values. */
KT_API kt_status kt_space_add_param_ints(kt_space *sp, const char *name, const int64_t *values, size_t n);

/** Declares an input: a value bound before enumeration, by name (a problem size, a key value:
 *  "K", "ProblemSize"). Expressions may use it once declared. */
KT_API kt_status kt_space_add_input(kt_space *sp, const char *name);

/** Binds an input to an integer, or to a list of integers. */
KT_API kt_status kt_space_bind_int(kt_space *sp, const char *name, int64_t value);
KT_API kt_status kt_space_bind_ints(kt_space *sp, const char *name, const int64_t *values, size_t n);

/** Adds a constraint: a configuration is valid only when expression is true. */
KT_API kt_status kt_space_add_constraint(kt_space *sp, const char *expression);

/** A constraint callback: returns nonzero when the configuration is valid. */
typedef int (*kt_constraint_fn)(const kt_config *cfg, void *user);

/** Adds a constraint callback, evaluated once every parameter has its value. */
KT_API kt_status kt_space_add_constraint_fn(kt_space *sp, kt_constraint_fn fn, void *user);

/** Adds a derived value computed from parameters, inputs and earlier derived values (e.g.
 *  "EVEN_K", "K % TK == 0"); it reaches the kernel as a define like a parameter. */
KT_API kt_status kt_space_add_derived(kt_space *sp, const char *name, const char *expression);

/** How the global geometry is given: as a grid of blocks (CUDA's grid; T1 "GlobalSizeType":
 *  "CUDA") or as a total number of work-items (OpenCL's global size). */
typedef enum kt_geometry {
    KT_GEOMETRY_GRID = 0,
    KT_GEOMETRY_GLOBAL = 1
} kt_geometry;

/** Sets the launch geometry: global sizes (grid or total, per kind), local sizes (block) and
 *  dynamic shared memory in bytes, as expressions per dimension; NULL means 1 (0 for shared
 *  memory). */
KT_API kt_status kt_space_set_geometry(kt_space *sp, kt_geometry kind, const char *const global[3],
                                       const char *const local[3], const char *shared_memory);

/** Enumerates the valid configurations for the inputs bound now; *count receives how many.
 *  Fails when an input is unbound or an expression fails to evaluate, naming it. */
KT_API kt_status kt_space_enumerate(kt_space *sp, size_t *count);

/** Returns the number of parameters, and parameter index's name (NULL when out of range). */
KT_API size_t kt_space_param_count(const kt_space *sp);
KT_API const char *kt_space_param_name(const kt_space *sp, size_t index);

/** Returns the number of configurations of the last enumeration. */
KT_API size_t kt_space_config_count(const kt_space *sp);

/** Formats configuration index of the last enumeration as "name=value,name=value" into buf:
 *  parameters and derived values in declaration order, each value as it reaches the kernel as a
 *  define (numbers as Python writes them, bools as 1 or 0, strings without quotes). Returns
 *  KT_ERR_INVALID_ARGUMENT when index is out of range, KT_ERR_LIMIT when buf is too small. */
KT_API kt_status kt_space_config_format(const kt_space *sp, size_t index, char *buf, size_t len);

/** Evaluates expression over the whole space (parameters stand for their value lists, inputs for
 *  their bound values, as in T1 argument sizes: "max(filter_width) * ProblemSize[0]") and stores
 *  the integer result in *out (a whole float counts; anything else fails naming the expression). */
KT_API kt_status kt_space_eval_int(const kt_space *sp, const char *expression, int64_t *out);

/** Reads parameter param of configuration index as an integer (bools count; floats and
 *  strings fail with KT_ERR_ARG_TYPE). */
KT_API kt_status kt_space_config_int(const kt_space *sp, size_t index, size_t param, int64_t *out);

/** Within a constraint callback: parameter param's value as an integer (0 when it is not one),
 *  a double, or a string (NULL when it is not one). */
KT_API int64_t kt_config_int(const kt_config *cfg, size_t param);
KT_API double kt_config_double(const kt_config *cfg, size_t param);
KT_API const char *kt_config_string(const kt_config *cfg, size_t param);

/* ---------------------------------------------------------------------------------------------
 * Variant groups
 * ------------------------------------------------------------------------------------------- */

/**
 * Adds a group of candidates named name: one variant of source per configuration of space,
 * compiled by the op's device's backend with the configuration's parameters and derived values
 * as defines (NAME=VALUE), plus options. kernel_name is the function (C: `void NAME(...)`
 * taking the op's arguments in order, a buffer as a pointer to its element type and a scalar
 * by value) or the kernel (OpenCL, CUDA) to call. A space input whose name is an op argument
 * takes that argument's value (a scalar's, or a buffer's element count) at each tuning; other
 * inputs must be bound in the space. The op keeps a reference to the space, which can no
 * longer change (its setters then fail with KT_ERR_STATE); source and options are copied.
 * Variants are compiled in parallel on first use, into the context's artifact directory; the
 * op's device (kt_op_set_device, kerntune/device.h) decides the backend. A variant that fails
 * to compile or load is disqualified with the first lines of its log (KT_OUTCOME_BUILD_FAILED),
 * and tuning goes on.
 */
KT_API kt_status kt_op_add_variants(kt_op *op, const char *name, kt_space *space, const char *source,
                                    const char *kernel_name, const char *const *options, size_t noptions);

/**
 * Compiles variant group name under Kernel Tuner's compile contract: the defines that Kernel
 * Tuner's prepare_kernel_string gives each configuration, in its order, so that kernels written
 * for Kernel Tuner (such as those that begin `#ifndef kernel_tuner` and define their own block
 * sizes there) compile here as they do there. Each configuration's defines are then:
 *
 *   grid_size_x, grid_size_y, grid_size_z   the launch grid in blocks (a global size given in
 *                                           work-items, KT_GEOMETRY_GLOBAL, divided by the local
 *                                           size and rounded up), 1 where unused;
 *   block names x, y, z                     the block (local) size, 1 where unused;
 *   every parameter and derived value       as without the contract, in declaration order;
 *   kernel_tuner                            1.
 *
 * A parameter or derived value with the name of one of the seven (a parameter block_size_x, as
 * Kernel Tuner's kernels have) gives it its own value, in that place, once: as in Kernel Tuner,
 * where the parameter is the block size, and where kerntune's local size comes from another
 * expression, the kernel sees the parameter (its author's value) while the launch uses the local
 * size. The backend puts the defines before the source, then `#line 1`, so that the compiler's
 * messages give the source's own line numbers; for CUDA (as Kernel Tuner does for CUDA and HIP)
 * a define whose name contains `loop_unroll_factor` becomes `constexpr int NAME = VALUE;`, and
 * with VALUE 0 it is not written at all and every `#pragma unroll NAME` that begins a line is
 * removed (Kernel Tuner's expression: a newline, optional white space, `#pragma`, white space,
 * `unroll`, white space, NAME; the white space before it, blank lines included, goes with it).
 *
 * block_size_names names the block's dimensions (Kernel Tuner's block_size_names); NULL, or a
 * NULL entry, means block_size_x, block_size_y, block_size_z. Each must be an identifier other
 * than grid_size_x/y/z and kernel_tuner, and the three must differ. A group's global size that
 * reads the op's arguments (which otherwise each call recomputes: see the architecture notes,
 * "Which arguments a decision is reused for") is compiled in as grid_size_*, so under the
 * contract such an argument is keyed exactly, as one that reaches the code. Setting it again
 * replaces the names. The op's device's backend must be of ABI 15 or later (the built-in ones
 * are): an older one fails the build, saying so. Fails with KT_ERR_UNKNOWN_CANDIDATE for an
 * unknown name, KT_ERR_INVALID_ARGUMENT for a native candidate or a bad name, and KT_ERR_STATE
 * once the op is frozen.
 */
KT_API kt_status kt_op_set_kernel_tuner_contract(kt_op *op, const char *name, const char *const block_size_names[3]);

/** Computes one launch parameter of a variant group: writes the parameter's bytes at out (64-byte
 *  aligned, zeroed before the call) from the arguments the variant is about to be launched with,
 *  and returns 0; nonzero refuses the launch (the run fails, naming the parameter). */
typedef int (*kt_launch_param_fn)(const kt_arg *args, size_t nargs, void *out, void *user);

/**
 * Adds a launch parameter of `bytes` bytes (1 to 1024; 2048 in all per group) to variant group
 * name: a value the kernel receives by value after the op's arguments, in the order the
 * parameters were added, computed by fn at each launch from that launch's arguments. During
 * tuning those are kerntune's own copies of the caller's buffers; on a hit, the caller's. Every
 * configuration of the group receives the same parameters (what depends on the configuration
 * belongs in its defines). The use it was made for: a CUDA tensor map (CUtensorMap, 128 bytes,
 * from cuTensorMapEncodeTiled) that a Hopper kernel declares as a `const __grid_constant__`
 * parameter, describing a buffer whose address only the launch knows.
 *
 * The backend must pass such values (KT_BACKEND_CAP_LAUNCH_PARAMS: CUDA and OpenCL); on another
 * the group's variants fail to build, saying so. fn runs in the caller's process, so the group's
 * variants run there too, whatever the op's isolation (kt_op_set_isolation). An op with launch
 * parameters has at most 64 arguments. Fails with KT_ERR_UNKNOWN_CANDIDATE for an unknown name,
 * KT_ERR_INVALID_ARGUMENT when name is a native candidate or a size is out of range, and
 * KT_ERR_STATE once the op is frozen.
 */
KT_API kt_status kt_op_add_launch_param(kt_op *op, const char *name, size_t bytes, kt_launch_param_fn fn, void *user);

/** Places ReadOnly buffer argument arg in the device's constant memory too (T1's "MemType":
 *  "Constant", as Kernel Tuner reads it). CUDA: before every launch its bytes are copied into
 *  the module's `__constant__` variable named like the argument, which must be at least as
 *  large (a variant without one fails to build, naming it); the kernel also receives the buffer
 *  as its parameter, like every argument, and may ignore it. OpenCL: it is passed as the kernel
 *  argument, which the kernel declares `__constant`. Host backends and native candidates
 *  receive it like any other buffer. */
KT_API kt_status kt_op_set_constant(kt_op *op, size_t arg);

/* ---- Building -------------------------------------------------------------------------------- */

/** Sets the directory of compiled artifacts (created when needed). Default: KERNTUNE_ARTIFACTS,
 *  else $XDG_CACHE_HOME/kerntune/artifacts, else ~/.cache/kerntune/artifacts. An artifact is
 *  keyed by a hash of backend, compiler identity and default options, device, kernel name,
 *  source, defines, options and the op's signature, so a second process with the same inputs
 *  compiles nothing. */
KT_API kt_status kt_context_set_artifact_dir(kt_context *ctx, const char *path);

/** Returns the artifact directory in use. */
KT_API const char *kt_context_artifact_dir(const kt_context *ctx);

/** Sets how many variants build at once (0, the default: one per core; at most 64). Left at 0,
 *  a tuning whose device measures while the next variants build (a GPU) builds on a quarter
 *  fewer threads, so that the measuring keeps processors of its own: on the H200's 16 cores,
 *  compiling on all 16 made each configuration's validation and runs cost 2 to 3 times more. */
KT_API kt_status kt_context_set_compile_threads(kt_context *ctx, size_t threads);

/** Returns how many variants build at once: the count set, else one per online core, at most 64
 *  (0 for a NULL ctx). */
KT_API size_t kt_context_compile_threads(const kt_context *ctx);

/** Returns how many variants the context has compiled (artifact cache misses), and how many
 *  it found compiled already (hits). */
KT_API uint64_t kt_context_compile_count(const kt_context *ctx);
KT_API uint64_t kt_context_artifact_hits(const kt_context *ctx);

/* ---- building without measuring ---------------------------------------------------------- */

/** What kt_op_build did, in builds (configurations with the same code share one): compiled
 *  now, found in the artifact directory, failed (now, or recorded there as failing: such a
 *  build is not tried again). */
typedef struct kt_build_counts {
    size_t built, found, failed;
} kt_build_counts;

/** Builds the variants of the key of these arguments into the context's artifact directory,
 *  and nothing more: no module is loaded, nothing runs, nothing is decided, the caller's
 *  buffers are not read (they may be NULL). A later tuning of the key, in this process or in
 *  another with the same artifact directory, finds them built. A fleet worker builds the
 *  next configurations so while its device measures the current ones (kerntune worker).
 *  Builds on the context's compile threads. Under a budget of wall seconds (kt_op_set_budget)
 *  the builds still running then are abandoned, stopped where the backend can stop its
 *  compiler (CUDA, C), and counted as failed. counts may be NULL. A variant that fails to build
 *  is counted, not an error (a tuning reports it); an error is a failure to build anything:
 *  bad arguments, no compiler, no artifact directory, memory. */
KT_API kt_status kt_op_build(kt_op *op, const kt_arg *args, size_t nargs, kt_build_counts *counts);

/** Told of each configuration kt_op_build built or found (artifact: the file it is in, in the
 *  artifact directory) or could not build (artifact NULL); config is the configuration's text
 *  ("NAME=VALUE,..."). */
typedef void (*kt_built_fn)(void *user, const char *config, const char *artifact);

/** kt_op_build, telling on_built of each configuration (on the calling thread, after the builds
 *  ended): a fleet's compile worker hands the artifacts on. */
KT_API kt_status kt_op_build_each(kt_op *op, const kt_arg *args, size_t nargs, kt_build_counts *counts, kt_built_fn on_built, void *user);

#ifdef __cplusplus
}
#endif

#endif /* KERNTUNE_VARIANTS_H */
