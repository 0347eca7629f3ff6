/*
 * kerntune.h - the stable public API of kerntune.
 *
 * kerntune picks, by measurement, the fastest correct implementation of an operation for each
 * problem key and device, and remembers the pick. The unit of work is an *op*: a named operation
 * with a typed argument signature, a tuning key computed from its arguments, and a set of
 * *candidates* (implementations). The first call of an op for a new key measures every candidate
 * that accepts the arguments and records the winner; every later call for that key dispatches to
 * the winner directly.
 *
 * Conventions
 *  - Every fallible function returns a kt_status; KT_OK is zero. On failure, kt_last_error()
 *    returns a message for the calling thread that says what failed and where.
 *  - Constructors hand the new handle through an out-pointer; destroy functions accept NULL.
 *  - Strings passed in are copied; the caller keeps ownership of what it passes.
 *  - Strings returned by accessors are owned by the handle they came from and live as long as it.
 *  - The library never aborts, exits or prints, unless logging is switched on (KERNTUNE_LOG or
 *    kt_context_set_log_level), in which case it writes to stderr or to the caller's log function.
 */
#ifndef KERNTUNE_H
#define KERNTUNE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(KT_BUILDING_SHARED) && defined(__GNUC__)
#define KT_API __attribute__((visibility("default")))
#else
#define KT_API
#endif

/* ---------------------------------------------------------------------------------------------
 * Version
 * ------------------------------------------------------------------------------------------- */

#define KT_VERSION_MAJOR 0
#define KT_VERSION_MINOR 1
#define KT_VERSION_PATCH 0
/** The version as one comparable number: major * 10000 + minor * 100 + patch. */
#define KT_VERSION_NUMBER (KT_VERSION_MAJOR * 10000 + KT_VERSION_MINOR * 100 + KT_VERSION_PATCH)

/** Returns the version of the library actually linked, as KT_VERSION_NUMBER computes it. */
KT_API unsigned kt_version_number(void);

/** Returns the version of the library actually linked as "MAJOR.MINOR.PATCH"; static storage. */
KT_API const char *kt_version_string(void);

/* ---------------------------------------------------------------------------------------------
 * Status codes
 *
 * One list generates the enum, kt_status_name() and kt_strerror(). Codes are stable: new codes
 * are only appended.
 * ------------------------------------------------------------------------------------------- */

#define KT_STATUS_LIST(X)                                                                          \
    X(OK, 0, "success")                                                                            \
    X(ERR_NULL, 1, "a required handle or pointer argument is NULL")                                \
    X(ERR_INVALID_ARGUMENT, 2, "an argument has a value outside what the function accepts")        \
    X(ERR_NO_MEMORY, 3, "out of memory")                                                           \
    X(ERR_STATE, 4, "the handle is not in a state that allows this call")                          \
    X(ERR_ARG_COUNT, 5, "the call passed a different number of arguments than the op declares")    \
    X(ERR_ARG_TYPE, 6, "an argument's type differs from the op's declared signature")              \
    X(ERR_UNKNOWN_CANDIDATE, 7, "no candidate of the op has that name")                            \
    X(ERR_NO_CANDIDATES, 8, "the op has no candidates")                                            \
    X(ERR_NO_VALID_CANDIDATE, 9, "no candidate of the op accepts these arguments")                 \
    X(ERR_CANDIDATE_FAILED, 10, "the candidate returned a failure")                                \
    X(ERR_ALL_FAILED, 11, "every candidate that accepts these arguments failed during tuning")     \
    X(ERR_ENV, 12, "an environment variable has a value kerntune does not understand")             \
    X(ERR_NOT_FOUND, 13, "nothing is recorded for that request")                                   \
    X(ERR_LIMIT, 14, "a fixed limit of the library was exceeded")                                  \
    X(ERR_DUPLICATE, 15, "the name is already in use")                                             \
    X(ERR_SYSTEM, 16, "an operating-system call failed")                                           \
    X(ERR_BACKEND, 17, "a backend failed or does not support the request")                       \
    X(ERR_HOOK, 18, "a benchmark hook or input generator returned a failure")

/** Status codes returned by every fallible call. */
typedef enum kt_status {
#define KT__STATUS_ENUM(name, value, msg) KT_##name = value,
    KT_STATUS_LIST(KT__STATUS_ENUM)
#undef KT__STATUS_ENUM
} kt_status;

/** Returns the generic message of a status code (static storage); unknown codes get a message
 *  saying so, never NULL. */
KT_API const char *kt_strerror(kt_status status);

/** Returns the name of a status code without the KT_ prefix, e.g. "ERR_ARG_TYPE" (static
 *  storage); unknown codes return "UNKNOWN". */
KT_API const char *kt_status_name(kt_status status);

/** Returns the detail message of the last failing kerntune call made by the calling thread, e.g.
 *  "kt_op_call(op 'matmul'): argument 2 is f32, the op declares i64". Calls that succeed do not
 *  clear it. The string is owned by the thread and valid until its next kerntune call. Never
 *  NULL; "" when no call has failed on this thread. */
KT_API const char *kt_last_error(void);

/* ---------------------------------------------------------------------------------------------
 * Types and arguments
 * ------------------------------------------------------------------------------------------- */

/** Element types of buffers and types of scalar arguments. F16 and BF16 are buffer element types
 *  only. KT_TYPE_BUFFER marks an argument value that is a buffer. */
typedef enum kt_type {
    KT_TYPE_I8 = 1,
    KT_TYPE_I16,
    KT_TYPE_I32,
    KT_TYPE_I64,
    KT_TYPE_U8,
    KT_TYPE_U16,
    KT_TYPE_U32,
    KT_TYPE_U64,
    KT_TYPE_F32,
    KT_TYPE_F64,
    KT_TYPE_F16,
    KT_TYPE_BF16,
    KT_TYPE_BUFFER = 64
} kt_type;

/** Returns the size in bytes of one element of the type (0 for KT_TYPE_BUFFER or an unknown
 *  type). */
KT_API size_t kt_type_size(kt_type type);

/** Returns the lower-case name of the type ("i32", "f64", "buffer"); "?" for unknown types. */
KT_API const char *kt_type_name(kt_type type);

/** How a candidate uses a buffer argument. ReadWrite buffers are read and written in place. */
typedef enum kt_access {
    KT_READ_ONLY = 1,
    KT_WRITE_ONLY = 2,
    KT_READ_WRITE = 3
} kt_access;

/**
 * One argument value of a call. This small value type is part of the stable ABI (as a buffer
 * descriptor is in other C libraries); build it with the kt_arg_* helpers below.
 *  - buffers: type is KT_TYPE_BUFFER, ptr the data, bytes its size in bytes;
 *  - signed integer scalars: i holds the value sign-extended; unsigned: u;
 *  - f32 scalars: f32; f64 scalars: f64.
 */
typedef struct kt_arg {
    kt_type type;
    union {
        void *ptr;
        int64_t i;
        uint64_t u;
        float f32;
        double f64;
    };
    size_t bytes;
} kt_arg;

/** A buffer argument: the caller keeps ownership of the memory. */
static inline kt_arg kt_arg_buf(void *ptr, size_t bytes) {
    kt_arg a = {KT_TYPE_BUFFER, {.ptr = ptr}, bytes};
    return a;
}
static inline kt_arg kt_arg_i8(int8_t v) { kt_arg a = {KT_TYPE_I8, {.i = v}, 0}; return a; }
static inline kt_arg kt_arg_i16(int16_t v) { kt_arg a = {KT_TYPE_I16, {.i = v}, 0}; return a; }
static inline kt_arg kt_arg_i32(int32_t v) { kt_arg a = {KT_TYPE_I32, {.i = v}, 0}; return a; }
static inline kt_arg kt_arg_i64(int64_t v) { kt_arg a = {KT_TYPE_I64, {.i = v}, 0}; return a; }
static inline kt_arg kt_arg_u8(uint8_t v) { kt_arg a = {KT_TYPE_U8, {.u = v}, 0}; return a; }
static inline kt_arg kt_arg_u16(uint16_t v) { kt_arg a = {KT_TYPE_U16, {.u = v}, 0}; return a; }
static inline kt_arg kt_arg_u32(uint32_t v) { kt_arg a = {KT_TYPE_U32, {.u = v}, 0}; return a; }
static inline kt_arg kt_arg_u64(uint64_t v) { kt_arg a = {KT_TYPE_U64, {.u = v}, 0}; return a; }
static inline kt_arg kt_arg_f32(float v) { kt_arg a = {KT_TYPE_F32, {.f32 = v}, 0}; return a; }
static inline kt_arg kt_arg_f64(double v) { kt_arg a = {KT_TYPE_F64, {.f64 = v}, 0}; return a; }

/** Releases memory a candidate returned; receives the pointer and the release user data. */
typedef void (*kt_release_fn)(void *ptr, void *user);

/**
 * A result that a candidate allocates and returns (an op declared with kt_op_set_result). Like
 * kt_arg, a small value type that is part of the stable ABI. The owner of a filled kt_result
 * releases it with kt_result_release, which calls release(ptr, release_user) when release is set.
 */
typedef struct kt_result {
    void *ptr;
    size_t bytes;
    kt_release_fn release;
    void *release_user;
} kt_result;

/** Releases a result (calls its release function, if any) and clears it. NULL is harmless. */
KT_API void kt_result_release(kt_result *result);

/* ---------------------------------------------------------------------------------------------
 * Context
 * ------------------------------------------------------------------------------------------- */

/** A context owns ops, backends and settings. Ops of one context may be called from many threads
 *  at once. The context's setters are not thread-safe: configure the context before its ops are
 *  first called. */
typedef struct kt_context kt_context;

/** How much work a miss may cost (in the spirit of FFTW's planner flags).
 *  - MEASURE: a key seen for the first time is tuned by measuring every valid candidate.
 *  - CACHE_ONLY: decisions already recorded are used; a miss dispatches the op's default
 *    candidate and never measures.
 *  - OFF: tuning is off: every call dispatches the default candidate; recorded decisions are
 *    ignored.
 *  - FORCED: every call dispatches the op's forced candidate (kt_op_force or KERNTUNE_FORCE),
 *    or its default where none is named; nothing is measured.
 * The default candidate is the one named with kt_op_set_default, else the first added; when it
 * does not accept the arguments, the first candidate in order that does is used.
 * KT_EFFORT_INHERIT (ops only) takes the context's level. */
typedef enum kt_effort {
    KT_EFFORT_INHERIT = 0,
    KT_EFFORT_MEASURE = 1,
    KT_EFFORT_CACHE_ONLY = 2,
    KT_EFFORT_OFF = 3,
    KT_EFFORT_FORCED = 4
} kt_effort;

/** Log levels; messages at or above the level set are emitted. */
typedef enum kt_log_level {
    KT_LOG_NONE = 0,
    KT_LOG_ERROR = 1,
    KT_LOG_WARN = 2,
    KT_LOG_INFO = 3,
    KT_LOG_DEBUG = 4
} kt_log_level;

/** Receives one log line (no trailing newline). May be called from any thread that calls into
 *  the context, so it must be thread-safe. */
typedef void (*kt_log_fn)(kt_log_level level, const char *message, void *user);

/**
 * Creates a context and stores it in *out (NULL on failure). Reads the environment once, here:
 *  - KERNTUNE_MODE = tune | cache-only | off   overrides every op's effort level;
 *  - KERNTUNE_FORCE = op=candidate[,op=candidate...]   forces candidates by op name;
 *  - KERNTUNE_LOG = error | warn | info | debug (none or off: no logging)   logs to stderr.
 * An unrecognised value fails with KT_ERR_ENV and a message naming the variable. (A
 * KERNTUNE_FORCE entry naming a candidate that its op lacks is found at that op's first call,
 * which fails with KT_ERR_UNKNOWN_CANDIDATE.) The built-in backends are registered. Release with
 * kt_context_destroy.
 */
KT_API kt_status kt_context_create(kt_context **out);

/** Destroys a context and every op it owns. NULL is harmless. No call on the context or its ops
 *  may be in progress. */
KT_API void kt_context_destroy(kt_context *ctx);

/** Sets the context's effort level (KT_EFFORT_INHERIT is rejected). An op takes its level when
 *  it is first called; ops already called keep theirs. KERNTUNE_MODE, when set, wins. */
KT_API kt_status kt_context_set_effort(kt_context *ctx, kt_effort effort);

/** Returns the effort level ops inherit: KERNTUNE_MODE's when set, else the one set. */
KT_API kt_effort kt_context_effort(const kt_context *ctx);

/** Sets the log level (KT_LOG_NONE switches logging off). KERNTUNE_LOG sets the initial one. */
KT_API kt_status kt_context_set_log_level(kt_context *ctx, kt_log_level level);

/** Routes log lines to fn instead of stderr; fn NULL restores stderr. */
KT_API kt_status kt_context_set_log_fn(kt_context *ctx, kt_log_fn fn, void *user);

/**
 * How candidates are measured (the measurement engine, src/bench.c).
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
typedef enum kt_policy {
    KT_POLICY_RACE = 0,
    KT_POLICY_TRITON = 1,
    KT_POLICY_KERNELTUNER = 2,
    KT_POLICY_FIXED = 3
} kt_policy;

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

/** Cache flushing between measured runs, outside the timed region. */
typedef enum kt_flush {
    KT_FLUSH_AUTO = 0, /* default: variants of backends that can flush (the C backend writes a
                          buffer as large as the CPU's last-level cache, OpenCL and CUDA one as
                          large as the device's); native candidates are not flushed */
    KT_FLUSH_OFF = 1,  /* never */
    KT_FLUSH_ON = 2    /* as AUTO, and native candidates too (the host's last-level cache) */
} kt_flush;

/** Sets cache flushing. */
KT_API kt_status kt_context_set_flush(kt_context *ctx, kt_flush flush);

/** Sets the directory of compiled artifacts (created when needed). Default: KERNTUNE_ARTIFACTS,
 *  else $XDG_CACHE_HOME/kerntune/artifacts, else ~/.cache/kerntune/artifacts. An artifact is
 *  keyed by a hash of backend, compiler identity and default options, device, kernel name,
 *  source, defines, options and the op's signature, so a second process with the same inputs
 *  compiles nothing. */
KT_API kt_status kt_context_set_artifact_dir(kt_context *ctx, const char *path);

/** Returns the artifact directory in use. */
KT_API const char *kt_context_artifact_dir(const kt_context *ctx);

/** Reports progress while an op tunes: after each unit (a native candidate or a variant's
 *  configuration) is decided, done of total units are through, valid of them measured, failed
 *  disqualified, and best_ns is the fastest time so far (negative before the first). Called on
 *  the tuning thread. */
typedef void (*kt_progress_fn)(size_t done, size_t total, size_t valid, size_t failed, double best_ns, void *user);

/** Sets the progress function (NULL: none, the default). */
KT_API kt_status kt_context_set_progress_fn(kt_context *ctx, kt_progress_fn fn, void *user);

/** Sets how many variants build at once (0, the default: one per core; at most 64). */
KT_API kt_status kt_context_set_compile_threads(kt_context *ctx, size_t threads);

/** Returns how many variants the context has compiled (artifact cache misses), and how many
 *  it found compiled already (hits). */
KT_API uint64_t kt_context_compile_count(const kt_context *ctx);
KT_API uint64_t kt_context_artifact_hits(const kt_context *ctx);

/* ---------------------------------------------------------------------------------------------
 * Devices
 * ------------------------------------------------------------------------------------------- */

/** A device found by a backend; owned by its context. */
typedef struct kt_device kt_device;

/** Returns the number of devices that the context's backends found. Device 0 is always the host
 *  CPU (the C backend); the first call that asks about devices also starts the optional
 *  backends (OpenCL, CUDA), whose devices follow. Safe to call while ops run. */
KT_API size_t kt_context_device_count(kt_context *ctx);

/** Returns device number index, or NULL when index is out of range. */
KT_API const kt_device *kt_context_device(kt_context *ctx, size_t index);

/** Device memory for ops that run on a device (kt_op_set_device): allocates bytes bytes on
 *  device index and stores the handle in *out (a host pointer for device 0, a cl_mem for an
 *  OpenCL device, a CUdeviceptr for a CUDA device); pass it to ops with kt_arg_buf. */
KT_API kt_status kt_device_alloc(kt_context *ctx, size_t device, size_t bytes, void **out);

/** Frees memory from kt_device_alloc. NULL is harmless. */
KT_API void kt_device_free(kt_context *ctx, size_t device, void *buffer);

/** Copies bytes bytes from host memory src to device buffer dst, or from device buffer src to
 *  host memory dst; both wait for the copy to finish. */
KT_API kt_status kt_device_write(kt_context *ctx, size_t device, void *dst, const void *src, size_t bytes);
KT_API kt_status kt_device_read(kt_context *ctx, size_t device, void *dst, const void *src, size_t bytes);

/** Returns how many built-in backends could not start, and the reason for number index as
 *  "name: why" (e.g. "cuda: libcuda.so.1 is not installed"), or NULL when out of range. */
KT_API size_t kt_context_unavailable_count(kt_context *ctx);
KT_API const char *kt_context_unavailable(kt_context *ctx, size_t index);

/** Returns the name of the backend that found the device ("c" for the host CPU). */
KT_API const char *kt_device_backend(const kt_device *dev);

/** Returns a human-readable device name, e.g. the CPU model. */
KT_API const char *kt_device_name(const kt_device *dev);

/** Returns the device fingerprint: a string that changes whenever the device, its driver or
 *  anything else that can change a tuning decision changes. */
KT_API const char *kt_device_fingerprint(const kt_device *dev);

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
 * Ops
 *
 * An op is built (arguments, key, candidates, requirements) and then called. Its first call
 * freezes it: building calls after that fail with KT_ERR_STATE.
 * ------------------------------------------------------------------------------------------- */

typedef struct kt_op kt_op;

/** A native candidate: runs the operation on args (nargs of them, in the op's declared order
 *  and types). Returns 0 on success; any other value is a failure, which disqualifies the
 *  candidate during tuning and is reported as KT_ERR_CANDIDATE_FAILED on a dispatched call. */
typedef int (*kt_native_fn)(const kt_arg *args, size_t nargs, void *user);

/** A validity predicate: returns nonzero when the candidate accepts these arguments. A
 *  candidate is never launched on arguments its predicate rejects. Must be pure and thread-safe. */
typedef int (*kt_accept_fn)(const kt_arg *args, size_t nargs, void *user);

/** A user bucketing function: maps a key value to its bucket. Must be pure and thread-safe. */
typedef int64_t (*kt_bucket_fn)(int64_t value, void *user);

/** A derived key value computed from all arguments. Must be pure and thread-safe. */
typedef int64_t (*kt_key_fn)(const kt_arg *args, size_t nargs, void *user);

/** How a key value is bucketed.
 *  - EXACT: the value itself (floats by their bit pattern).
 *  - POW2: the smallest power of two >= the value, for values >= 1 (1->1, 3->4, 1000->1024,
 *    1025->2048); values <= 0, and values above 2^62 (u64 values and sizes above INT64_MAX
 *    count as negative), map to themselves. Integer scalars and buffer sizes only. */
typedef enum kt_bucket {
    KT_BUCKET_EXACT = 0,
    KT_BUCKET_POW2 = 1
} kt_bucket;

/** Creates an op named name (1 to 127 characters) in ctx and stores it in *out. The op is
 *  owned by the context and destroyed with it, or earlier by kt_op_destroy. */
KT_API kt_status kt_op_create(kt_context *ctx, const char *name, kt_op **out);

/** Destroys an op. NULL is harmless. No call on the op may be in progress. */
KT_API void kt_op_destroy(kt_op *op);

/** Returns the op's name. */
KT_API const char *kt_op_name(const kt_op *op);

/** Appends a buffer argument with element type elem (not KT_TYPE_BUFFER) and access mode. At a
 *  call its kt_arg must be a buffer whose byte size is a multiple of the element size. */
KT_API kt_status kt_op_add_buffer(kt_op *op, const char *name, kt_type elem, kt_access access);

/** Appends a scalar argument of type type (an integer type, F32 or F64). */
KT_API kt_status kt_op_add_scalar(kt_op *op, const char *name, kt_type type);

/** Returns the number of declared arguments. */
KT_API size_t kt_op_arg_count(const kt_op *op);

/** Adds a key component: the value of scalar argument arg, or the byte size of buffer argument
 *  arg, bucketed as bucket. At most 8 declared key components per op (kt_op_key_*); kerntune
 *  appends up to 8 of its own for arguments that reach a variant group's code or validity. */
KT_API kt_status kt_op_key_arg(kt_op *op, size_t arg, kt_bucket bucket);

/** Adds a key component: the value of integer scalar argument arg (or byte size of buffer arg)
 *  mapped through fn. */
KT_API kt_status kt_op_key_arg_fn(kt_op *op, size_t arg, kt_bucket_fn fn, void *user);

/** Adds a key component: the alignment of buffer argument arg's pointer, i.e. the largest power
 *  of two dividing the address, capped at max_align (a power of two; NULL counts as aligned). */
KT_API kt_status kt_op_key_align(kt_op *op, size_t arg, size_t max_align);

/** Adds a key component computed by fn from all arguments. */
KT_API kt_status kt_op_key_fn(kt_op *op, kt_key_fn fn, void *user);

/** Adds a native candidate named name (unique within the op) that calls fn(args, nargs, user).
 *  At most 4096 candidates per op. */
KT_API kt_status kt_op_add_native(kt_op *op, const char *name, kt_native_fn fn, void *user);

/** Declares that candidate name accepts only calls where buffer argument arg's pointer is a
 *  multiple of align (a power of two). */
KT_API kt_status kt_op_require_align(kt_op *op, const char *name, size_t arg, size_t align);

/** Declares that candidate name accepts only calls where integer scalar argument arg is a
 *  multiple of k (k >= 1); for a buffer argument, its element count must be. */
KT_API kt_status kt_op_require_multiple(kt_op *op, const char *name, size_t arg, int64_t k);

/** Declares that candidate name accepts only calls where fn returns nonzero. One predicate per
 *  candidate; a second call replaces the first. At most 512 candidates may have requirements. */
KT_API kt_status kt_op_require_fn(kt_op *op, const char *name, kt_accept_fn fn, void *user);

/** Names the default candidate (see kt_effort). */
KT_API kt_status kt_op_set_default(kt_op *op, const char *name);

/** Names a fallback candidate: a call that finds its key being tuned by another thread runs the
 *  fallback (when it accepts the arguments) instead of waiting for the decision. NULL clears it:
 *  such calls wait, which is the default. */
KT_API kt_status kt_op_set_fallback(kt_op *op, const char *name);

/** Forces candidate name and sets the op's effort to KT_EFFORT_FORCED; NULL clears the forced
 *  candidate and sets the effort back to KT_EFFORT_INHERIT. KERNTUNE_FORCE wins over this. */
KT_API kt_status kt_op_force(kt_op *op, const char *name);

/** Limits each tuning of the op: at most max_units units (native candidates and variant
 *  configurations, in order; 0: no limit) are validated and measured, and none is started after
 *  max_seconds of wall time (0: no limit). Units left out end KT_OUTCOME_NOT_RUN. */
KT_API kt_status kt_op_set_budget(kt_op *op, size_t max_units, double max_seconds);

/** Where candidates run while tuning:
 *  - KT_ISOLATE_AUTO (default): variants of a backend whose faults poison its device context
 *    (CUDA: an illegal address would leave the caller's context unusable) in a worker process,
 *    everything else in the caller's process;
 *  - KT_ISOLATE_ON: every variant, and every native candidate that can be, in a worker process:
 *    one that crashes, hangs past the timeout or poisons its device context is disqualified
 *    (KT_OUTCOME_CRASHED, KT_OUTCOME_TIMEOUT, KT_OUTCOME_FAILED, with its kind and code:
 *    kt_decision_unit_fail_kind) and the worker replaced;
 *  - KT_ISOLATE_OFF: everything in the caller's process.
 *  A worker is a new process (posix_spawn), never a fork: it finds the code it runs by the
 *  object file that holds it. Code in a shared object runs in kerntune-worker (found through
 *  KERNTUNE_WORKER, its install path or the build tree), which loads that object; code in the
 *  program itself (a native of the program, kerntune linked statically) runs in a new start of
 *  the program, which kerntune stops before its main to serve as the worker. So a worker sees
 *  the objects' static data as initialised, never as the caller's process changed it.
 *  What cannot run in a worker runs in the caller's process, and an info line in the log says
 *  why: a backend without KT_BACKEND_CAP_WORKER; a native that returns its output
 *  (kt_op_add_native_result), of an op on device memory, whose user pointer is an address of the
 *  caller's memory (NULL, or a number that is no address, passes as it is), or whose code a
 *  worker cannot find: not in an object file (generated at run time), or in a shared object
 *  that has no build-id (link with --build-id, the default of most toolchains) when the function
 *  has no exported symbol. The final launch of the winner is always the caller's, on the
 *  caller's data. */
typedef enum kt_isolation { KT_ISOLATE_AUTO = 0, KT_ISOLATE_OFF = 1, KT_ISOLATE_ON = 2 } kt_isolation;

KT_API kt_status kt_op_set_isolation(kt_op *op, kt_isolation isolation);

/** Sets how long one isolated run may take before its worker is killed (seconds > 0;
 *  default 10). */
KT_API kt_status kt_op_set_timeout(kt_op *op, double seconds);

/** Limits every tuning of the op to max_runs runs of candidates in all (validation runs,
 *  warm-ups and measured runs; 0: no limit). The first candidate that passes validation always
 *  gets one measured run, so a key is never left undecided by a budget. */
KT_API kt_status kt_op_set_run_budget(kt_op *op, uint64_t max_runs);

/** Sets the op's effort level (KT_EFFORT_INHERIT: the context's). */
KT_API kt_status kt_op_set_effort(kt_op *op, kt_effort effort);

/** Returns the number of declared candidates. */
KT_API size_t kt_op_candidate_count(const kt_op *op);

/** Returns the name of candidate index, or NULL when out of range. */
KT_API const char *kt_op_candidate_name(const kt_op *op, size_t index);

/* ---- Arguments during tuning ---------------------------------------------------------------
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
 * ------------------------------------------------------------------------------------------- */

/** Where tuning runs take their inputs from.
 *  - PROTECT (default): the caller's buffers. ReadWrite buffers are snapshot once per tuning and
 *    restored before every run, outside the timed region; before the final launch they are
 *    restored once more. Extra memory: the ReadWrite buffers' total size.
 *  - CLONE: private copies of every buffer; the caller's buffers are not read after the copy
 *    and not written until the single final launch. Extra memory: every buffer's size (plus up
 *    to its alignment window) and the ReadWrite buffers' again (a pristine copy to restore from).
 *  - GENERATED: buffers allocated at the call's sizes and filled by each buffer's generator
 *    (kt_op_set_generator); the caller's buffers are not touched at all until the final launch. */
typedef enum kt_inputs {
    KT_INPUTS_PROTECT = 0,
    KT_INPUTS_CLONE = 1,
    KT_INPUTS_GENERATED = 2
} kt_inputs;

/** Sets where tuning runs take their inputs from (default KT_INPUTS_PROTECT). */
KT_API kt_status kt_op_set_inputs(kt_op *op, kt_inputs inputs);

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

/* ---- Candidates that return their output --------------------------------------------------- */

/** A candidate that allocates its output and hands it back in *result (ptr, bytes, and how to
 *  release it). Returns 0 on success. Whatever *result holds when it returns, success or not,
 *  belongs to kerntune, which releases it (so a failing candidate either leaves *result empty
 *  or leaves in it what it allocated; it must not release that itself). */
typedef int (*kt_result_fn)(const kt_arg *args, size_t nargs, void *user, kt_result *result);

/** Declares that the op returns an output with elements of type elem: its candidates are added
 *  with kt_op_add_native_result and it is called with kt_op_call_result. */
KT_API kt_status kt_op_set_result(kt_op *op, kt_type elem);

/** Adds a candidate that returns its output (the op must have kt_op_set_result). */
KT_API kt_status kt_op_add_native_result(kt_op *op, const char *name, kt_result_fn fn, void *user);

/* ---- Runtime-compiled variants ------------------------------------------------------------- */

/** Runs the op's compiled variants on device index of the context (kt_context_device); the
 *  op's buffer arguments are then that device's buffers. Default: device 0, the host CPU (the
 *  C backend). */
KT_API kt_status kt_op_set_device(kt_op *op, size_t device);

/**
 * Adds a group of candidates named name: one variant of source per configuration of space,
 * compiled by the op's device's backend with the configuration's parameters and derived values
 * as defines (NAME=VALUE), plus options. kernel_name is the function (C: `void NAME(...)`
 * taking the op's arguments in order, a buffer as a pointer to its element type and a scalar
 * by value) or the kernel (OpenCL, CUDA) to call. A space input whose name is an op argument
 * takes that argument's value (a scalar's, or a buffer's element count) at each tuning; other
 * inputs must be bound in the space. The op keeps a reference to the space, which can no
 * longer change (its setters then fail with KT_ERR_STATE); source and options are copied. Variants are compiled in parallel on first use, into the context's
 * artifact directory; a variant that fails to compile or load is disqualified with the first
 * lines of its log (KT_OUTCOME_BUILD_FAILED), and tuning goes on.
 */
KT_API kt_status kt_op_add_variants(kt_op *op, const char *name, kt_space *space, const char *source,
                                    const char *kernel_name, const char *const *options, size_t noptions);

/* ---- Validation ---------------------------------------------------------------------------
 *
 * While tuning, each candidate's first run is a validation run: ReadWrite inputs restored,
 * WriteOnly outputs poisoned (filled with a pattern: a NaN with a payload for floats, 0xA5 bytes
 * for integers) unless declared accumulating, and afterwards every WriteOnly and ReadWrite
 * buffer and the returned output are compared with the reference's: integers exactly, floats
 * within |actual - expected| <= atol + rtol * |expected|; NaN matches only NaN; an element still
 * holding the poison pattern was left unwritten and fails (for 8-bit outputs the pattern 0xA5
 * is also an ordinary value, so an unwritten element whose true value is 0xA5 goes unnoticed).
 * A candidate that changed a ReadOnly buffer fails; a reference that did is not used. A failing candidate is disqualified (KT_OUTCOME_INVALID) with a
 * diagnostic naming the output, the element, the expected and the actual value.
 * The reference is, in order: the function set by kt_op_set_reference_fn, the candidate named by
 * kt_op_set_reference, the op's default candidate. If the reference does not accept the
 * arguments or fails, the key is tuned without validation (logged; kt_decision_validated says so).
 * Validation adds the reference's outputs to a tuning's extra memory.
 * ------------------------------------------------------------------------------------------- */

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

/** Switches validation on (default) or off for the op. */
KT_API kt_status kt_op_set_validation(kt_op *op, int on);

/** Sets the tolerances for every floating-point output of the op (both >= 0). Defaults, by
 *  element type: f64 atol 1e-12 rtol 1e-9; f32 atol 1e-6 rtol 1e-4; f16 and bf16 atol 1e-3
 *  rtol 1e-2. Integers always compare exactly. */
KT_API kt_status kt_op_set_tolerance(kt_op *op, double atol, double rtol);

/**
 * Calls the op. Checks nargs and every argument's type against the signature, computes the
 * key, and dispatches the recorded winner for it. On a miss it decides first (by the op's
 * effort level): under MEASURE it validates and measures every candidate that accepts the
 * arguments, on the inputs kt_op_set_inputs chose, records the winner, restores the caller's
 * buffers, and runs the winner once on them: afterwards the arguments hold exactly what one
 * launch of the winner produces from the caller's original data.
 * Concurrent first calls for one key tune once; the other callers wait for the decision, or run
 * the fallback candidate (kt_op_set_fallback). A candidate must not call its own op with the
 * same key while that key is being tuned (it would wait for itself), unless a fallback is set.
 * A call that finds its decision allocates nothing, makes no system call and takes no lock in
 * kerntune: it calls the winner. (A native winner or a C variant is called directly; a device
 * variant's launch goes through its backend, which enqueues it and waits for it.)
 * Returns KT_OK, or KT_ERR_ARG_COUNT, KT_ERR_ARG_TYPE, KT_ERR_STATE (the op returns a result),
 * KT_ERR_NO_CANDIDATES, KT_ERR_NO_VALID_CANDIDATE, KT_ERR_ALL_FAILED (recorded: later calls for
 * the key return it without measuring), KT_ERR_CANDIDATE_FAILED, KT_ERR_HOOK, KT_ERR_NO_MEMORY
 * (after these two, nothing is recorded and the next call tunes again), ...
 */
KT_API kt_status kt_op_call(kt_op *op, const kt_arg *args, size_t nargs);

/** Calls an op that returns a result (kt_op_set_result), as kt_op_call does, and stores the
 *  winner's output in *result; the caller owns it and releases it with kt_result_release. The
 *  outputs of every other run made while tuning are released by kerntune. On failure *result is
 *  empty. */
KT_API kt_status kt_op_call_result(kt_op *op, const kt_arg *args, size_t nargs, kt_result *result);

/** Decides the key of these arguments without running anything on them: tunes it (by the op's
 *  effort level) if it has no decision yet, and returns. The caller's buffers are never written
 *  (PROTECT mode tunes on private copies here, as CLONE does). With KT_INPUTS_GENERATED they may
 *  be NULL: only their sizes are used, so a key can be tuned ahead of time from sizes alone.
 *  Waits when another thread is tuning the key (the fallback is not used). Returns as
 *  kt_op_call does, less KT_ERR_CANDIDATE_FAILED. */
KT_API kt_status kt_op_tune(kt_op *op, const kt_arg *args, size_t nargs);

/** Returns how many times the op has tuned a key (measured its candidates). */
KT_API uint64_t kt_op_tune_count(const kt_op *op);

/** Returns how many measured runs (warm-ups excluded) the op has made in all its tunings. */
KT_API uint64_t kt_op_measured_runs(const kt_op *op);

/* ---------------------------------------------------------------------------------------------
 * Decisions
 * ------------------------------------------------------------------------------------------- */

/** Places ReadOnly buffer argument arg in the device's constant memory too (T1's "MemType":
 *  "Constant", as Kernel Tuner reads it). CUDA: before every launch its bytes are copied into
 *  the module's `__constant__` variable named like the argument, which must be at least as
 *  large (a variant without one fails to build, naming it); the kernel also receives the buffer
 *  as its parameter, like every argument, and may ignore it. OpenCL: it is passed as the kernel
 *  argument, which the kernel declares `__constant`. Host backends and native candidates
 *  receive it like any other buffer. */
KT_API kt_status kt_op_set_constant(kt_op *op, size_t arg);

/** A recorded decision; owned by its op and valid as long as the op. Read-only. */
typedef struct kt_decision kt_decision;

/** How a decision was made. */
typedef enum kt_decision_source {
    KT_SOURCE_MEASURED = 1, /* measured at first call */
    KT_SOURCE_DEFAULT = 2,  /* default candidate, by effort OFF or CACHE_ONLY */
    KT_SOURCE_FORCED = 3,   /* forced candidate */
    KT_SOURCE_CACHE = 4     /* recorded in the persistent cache by an earlier process */
} kt_decision_source;

/** Finds the decision for the key of these arguments without tuning or calling anything.
 *  Returns KT_ERR_NOT_FOUND when the key has no finished decision. When every candidate
 *  failed for the key, returns KT_ERR_ALL_FAILED and still stores the failed decision in *out,
 *  so that its units' outcomes and messages say why (it has no winner). */
KT_API kt_status kt_op_decision(const kt_op *op, const kt_arg *args, size_t nargs,
                                const kt_decision **out);

/** Returns the number of finished decisions of the op (a snapshot; more may follow). */
KT_API size_t kt_op_decision_count(const kt_op *op);

/** Returns finished decision number index (in the order they were made), or NULL. */
KT_API const kt_decision *kt_op_decision_at(const kt_op *op, size_t index);

/** Returns the index of the winning candidate. */
KT_API size_t kt_decision_winner(const kt_decision *d);

/** Returns how the decision was made. */
KT_API kt_decision_source kt_decision_source_of(const kt_decision *d);

/** Returns the number of key components, and component index (0 when out of range). Key
 *  components are the op's declared key values in declaration order, then the automatic ones:
 *  the exact value of each argument that reaches a variant group's compiled code, constraints,
 *  local size or shared memory (a scalar's value, a buffer's byte size), which kerntune keys
 *  whatever bucket was declared, so that no decision is reused with code built or validity
 *  judged for other arguments. An argument that reaches only a global size is not keyed: each
 *  call computes that size from its own arguments. */
KT_API size_t kt_decision_key_len(const kt_decision *d);
KT_API int64_t kt_decision_key(const kt_decision *d, size_t index);

/** Candidate outcome within a decision. */
typedef enum kt_outcome {
    KT_OUTCOME_NOT_RUN = 0,  /* not measured (decision not measured) */
    KT_OUTCOME_MEASURED = 1, /* measured; time and runs are set */
    KT_OUTCOME_REJECTED = 2, /* its requirements rejected the arguments: never launched */
    KT_OUTCOME_FAILED = 3,   /* returned a failure while being measured */
    KT_OUTCOME_INVALID = 4,  /* produced a wrong answer in its validation run */
    KT_OUTCOME_BUILD_FAILED = 5, /* a variant that failed to compile or load */
    KT_OUTCOME_TIMEOUT = 6,      /* ran past the op's timeout in its worker process (killed) */
    KT_OUTCOME_CRASHED = 7       /* took its worker process down (a signal: SIGSEGV, SIGBUS, abort...) */
} kt_outcome;

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

/** Returns the policy that measured the decision. */
KT_API kt_policy kt_decision_policy(const kt_decision *d);

/** Unit u's warm-up runs, and the bounds of its estimate's confidence interval in ns (negative
 *  when not measured). */
KT_API unsigned kt_decision_unit_warmups(const kt_decision *d, size_t u);
KT_API double kt_decision_unit_ci_low_ns(const kt_decision *d, size_t u);
KT_API double kt_decision_unit_ci_high_ns(const kt_decision *d, size_t u);

/** Returns whether the decision's candidates were validated against a reference. */
KT_API int kt_decision_validated(const kt_decision *d);

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

/* ---------------------------------------------------------------------------------------------
 * The persistent cache
 *
 * Decisions outlive the process in one SQLite file, shared by every thread and process on the
 * machine: a decision is stored with the op's name, its candidate-set hash, the device's
 * fingerprint, the library version and the key, and is served only when all five match; every
 * unit it considered is kept with it (time, confidence interval, runs, outcome, diagnostic).
 * Wisdom is the JSON export of decisions, for another machine of the same fingerprint.
 * ------------------------------------------------------------------------------------------- */

/** An open persistent cache. One handle may be used by several threads at once. */
typedef struct kt_cache kt_cache;

/** Sets the persistent cache the context's ops look decisions up in (after their own table)
 *  and record measured decisions in: the path of its file, NULL for the default
 *  (kt_cache_default_path: KERNTUNE_CACHE, else the user's cache directory), or "off". Set it
 *  before the first tuning (KT_ERR_STATE after). A cache that cannot be opened is logged and
 *  left out: decisions then last as long as the process. */
KT_API kt_status kt_context_set_cache(kt_context *ctx, const char *path);

/** Returns the context's cache, opening it if it was not yet; NULL when off or unavailable. */
KT_API kt_cache *kt_context_cache(kt_context *ctx);

/** Returns how many decisions the context's ops took from the cache, and how many recorded
 *  decisions they rejected (a candidate or configuration not in today's op, values of the
 *  wrong type): a rejected record is never launched and lends nothing, the key is tuned again
 *  (kt_decision_cache_rejected says why). */
KT_API uint64_t kt_context_cache_hits(const kt_context *ctx);
KT_API uint64_t kt_context_cache_rejected(const kt_context *ctx);

/** Writes the default cache path into buf (len bytes): KERNTUNE_CACHE when set (and not "off"),
 *  else $XDG_CACHE_HOME/kerntune/cache.db (when XDG_CACHE_HOME is absolute), else
 *  $HOME/.cache/kerntune/cache.db. KT_ERR_NOT_FOUND when KERNTUNE_CACHE=off or none of the
 *  three is set; KT_ERR_LIMIT when the path does not fit. */
KT_API kt_status kt_cache_default_path(char *buf, size_t len);

/**
 * Opens the store at path (NULL: kt_cache_default_path, so KT_ERR_NOT_FOUND with
 * KERNTUNE_CACHE=off; ":memory:": a private in-memory store), creating the file and its
 * directories (mode 0700) when missing, and stores the handle in *out (NULL on failure). The file is
 * put in WAL mode; calls wait up to 10 s for other processes' locks. A file of schema version 1
 * or 2 is migrated in place; a file written by a newer kerntune (a newer schema version), or a
 * database that is not a kerntune cache, is refused with KT_ERR_STATE and left untouched.
 * A damaged file (not a database, truncated, corrupt) is moved aside to
 * "<path>.corrupt-<unix time>" (never deleted) and a fresh store started; a store this process
 * cannot write (read-only file or directory) is replaced by an in-memory one. Both succeed, and
 * kt_cache_warning says what happened.
 */
KT_API kt_status kt_cache_open(const char *path, kt_cache **out);

/** Closes the store. NULL is harmless. */
KT_API void kt_cache_close(kt_cache *cache);

/** Returns the file in use, or ":memory:" for an in-memory store (also after a fallback); NULL
 *  for a NULL cache. Valid until kt_cache_close. */
KT_API const char *kt_cache_path(const kt_cache *cache);

/** Returns "" or what opening (or a later recovery from damage) did: moved a damaged file
 *  aside, fell back to memory. Valid until kt_cache_close. */
KT_API const char *kt_cache_warning(const kt_cache *cache);

/** Stores in *count the number of decisions stored, of op and of device when not NULL. */
KT_API kt_status kt_cache_count(kt_cache *cache, const char *op, const char *device, size_t *count);

/**
 * Exports the decisions (all, or only those of op and of device when not NULL) as a wisdom
 * document into *json, a NUL-terminated string to free with kt_free. Entries are ordered by op,
 * device, candidate set, version and key; the document is:
 *
 *   {"kerntune_wisdom": 1, "library_version": "0.1.0", "entries": [
 *     {"op": "matmul", "candidate_set": "<hex>", "device": "<fingerprint>",
 *      "library_version": "0.1.0", "key": [512, 512],
 *      "winner": {"candidate": "tiled", "config": "TM=16,TN=8"},    (config null for natives)
 *      "time_ns": 1234.5, "confidence": 0.99,                     (null when unknown)
 *      "requested_confidence": 0.99,                 (what the race asked for; null: nothing)
 *      "created": 1764000000,                                     (unix time)
 *      "units": [{"candidate": "tiled", "config": "TM=16,TN=8", "unit_hash": "<hex>",
 *                 "outcome": "measured",   (not_run|measured|rejected|failed|invalid|build_failed
 *                                           |timeout|crashed)
 *                 "time_ns": 1234.5,       (negative when not measured)
 *                 "ci_ns": [1200.0, 1260.0],                      (null when unknown)
 *                 "runs": 10, "warmups": 1, "message": null,
 *                 "finalist": true}]}]}    (still racing when the race stopped, or the winner)
 *
 * A stored row that is not valid fails the export with KT_ERR_INVALID_ARGUMENT naming it.
 */
KT_API kt_status kt_cache_export(kt_cache *cache, const char *op, const char *device, char **json);

/**
 * Imports a wisdom document (as kt_cache_export writes it; requested_confidence and finalist may
 * be absent, as in documents written before they existed). Every entry is checked before
 * anything is written, for what can be checked without the op: types, names and sizes,
 * configuration text ("NAME=VALUE,..."), times that agree with outcomes and intervals,
 * confidences in range, no unit twice, the winner among the units with their time, a creation
 * time not in the future. The first problem fails the import with KT_ERR_INVALID_ARGUMENT and a
 * message naming the entry, the field and why, e.g. "kt_cache_import: entries[3].units[0].time_ns:
 * expected a number, got a string", or the line and column of a JSON syntax error. A document (or
 * entry) of another MAJOR library version, or naming one decision twice, is refused the same way.
 * The entries are then applied in one transaction, all or nothing: a decision already stored is
 * kept unless replace is nonzero. added, replaced and kept (each may be NULL) receive the counts.
 * Unknown members are ignored. What only the op can tell is checked when a decision is used
 * (kt_decision_cache_rejected).
 */
KT_API kt_status kt_cache_import(kt_cache *cache, const char *json, int replace, size_t *added,
                                 size_t *replaced, size_t *kept);

/** Removes the decisions of op and of device (NULL: any; both NULL: every decision) with their
 *  units; *removed (may be NULL) receives how many decisions. */
KT_API kt_status kt_cache_remove(kt_cache *cache, const char *op, const char *device, size_t *removed);

/** Frees memory kerntune handed out to the caller (kt_cache_export's document). NULL is
 *  harmless. */
KT_API void kt_free(void *p);

/* ---- issue [9]: failure kinds ---- */

/* How a unit's run failed (outcomes KT_OUTCOME_FAILED, KT_OUTCOME_TIMEOUT and
 * KT_OUTCOME_CRASHED), and what kt_decision_unit_fail_code and kt_decision_fail_code then hold.
 * One list generates the enum, kt_fail_kind_name() and kt_fail_kind_describe(); values are
 * stable, new kinds are only appended. */
#define KT_FAIL_KIND_LIST(X)                                                                       \
    X(NONE, 0, "none", "it did not fail while run (or never ran); the code is 0")                   \
    X(RETURNED, 1, "returned", "it returned nonzero (a native candidate, a C variant); the code is that value") \
    X(LAUNCH, 2, "launch",                                                                         \
      "its backend failed to load, launch or copy for it; the code is the backend's kt_status")    \
    X(CRASH, 3, "crash", "a signal killed its worker process; the code is the signal number")      \
    X(EXIT, 4, "exit", "its worker process exited while running it; the code is the exit status")  \
    X(TIMEOUT, 5, "timeout",                                                                       \
      "it ran past the op's timeout and its worker process was killed; the code is 0")             \
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

#endif /* KERNTUNE_H */
