/*
 * kerntune.h - the stable core of kerntune's public API.
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
 *
 * This header is the core, what a first program needs: status codes, argument values, the
 * context, declaring an op (arguments, key, candidates), calling and tuning it, and which
 * candidate a decision chose. The rest of the API is in headers under kerntune/; each one
 * includes this header and whatever else it needs, and this header includes none of them:
 *   kerntune/measure.h     how candidates are measured: policies, the race, cache flushing,
 *                          budgets, isolation in runner processes, timeouts, progress
 *   kerntune/inputs.h      what tuning runs compute on: the caller's buffers protected, clones or
 *                          generated inputs; accumulators, generators, benchmark hooks
 *   kerntune/validation.h  checking each candidate's outputs against a reference: tolerances
 *   kerntune/decision.h    a decision in detail: each candidate's and unit's outcome, times, runs,
 *                          diagnostic; confidence, cost, re-racing
 *   kerntune/variants.h    runtime-compiled variants: spaces, variant groups, constant memory,
 *                          the artifact directory, build threads
 *   kerntune/device.h      devices, device memory, running an op's variants on a device
 *   kerntune/search.h      search strategies over a space, driven by kerntune or by hand
 *   kerntune/cache.h       the persistent cache of decisions, wisdom (its JSON export), Redis
 *   kerntune/aot.h         tables of decisions made ahead of time (`kerntune aot`)
 *   kerntune/backend.h     the backend plug-in interface
 *
 * Enums with names are generated from one list each, KT_<NAME>_LIST(X), which calls
 * X(enumerator, value, name) once per value (kt_type's adds the element size, and the status
 * list, the oldest, gives names without the KT_ prefix and a message); the enum and its name
 * function both expand the list, so they cannot disagree.
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

/* Expands one entry of a KT_<NAME>_LIST into an enumerator (internal). */
#define KT__ENUMERATOR(name, value, ...) name = value,

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
    X(ERR_HOOK, 18, "a benchmark hook or input generator returned a failure")                      \
    X(ERR_CAPTURING, 19, "the queue is being captured into a graph and cannot be waited for")      \
    X(ERR_DISAGREEMENT, 20, "most candidates' outputs disagreed with the reference: tuning stopped")

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

/** What a native candidate returns after kt_candidate_failed: its reason is in the thread's
 *  detail message. */
#define KT_CANDIDATE_FAILED_SAID (-7003)

/** For a native candidate that fails, to say why: formats the reason (printf-style) into the
 *  calling thread's detail message and returns KT_CANDIDATE_FAILED_SAID for the candidate to
 *  return (`return kt_candidate_failed("cublasLtMatmul: status %d", rc);`). A tuning records the
 *  reason as the unit's diagnostic instead of "returned N". For candidates that run in the tuning's
 *  process: a runner's message does not come back (kerntune/measure.h, kt_op_set_isolation). */
KT_API int kt_candidate_failed(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/** Returns the detail message of the last failing kerntune call made by the calling thread, e.g.
 *  "kt_op_call(op 'matmul'): argument 2 is f32, the op declares i64". Calls that succeed do not
 *  clear it. The string is owned by the thread and valid until its next kerntune call. Never
 *  NULL; "" when no call has failed on this thread. */
KT_API const char *kt_last_error(void);

/* ---------------------------------------------------------------------------------------------
 * Types and arguments
 * ------------------------------------------------------------------------------------------- */

/** Element types of buffers and types of scalar arguments. F16 and BF16 are buffer element types
 *  only. KT_TYPE_BUFFER marks an argument value that is a buffer. KT_TYPE_BYTES marks a value
 *  passed by value as raw bytes (ptr, bytes): never an op's argument, it is how a variant's
 *  launch parameters (kt_op_add_launch_param, kerntune/variants.h) reach a backend. */
#define KT_TYPE_LIST(X)                  \
    X(KT_TYPE_I8, 1, "i8", 1)            \
    X(KT_TYPE_I16, 2, "i16", 2)          \
    X(KT_TYPE_I32, 3, "i32", 4)          \
    X(KT_TYPE_I64, 4, "i64", 8)          \
    X(KT_TYPE_U8, 5, "u8", 1)            \
    X(KT_TYPE_U16, 6, "u16", 2)          \
    X(KT_TYPE_U32, 7, "u32", 4)          \
    X(KT_TYPE_U64, 8, "u64", 8)          \
    X(KT_TYPE_F32, 9, "f32", 4)          \
    X(KT_TYPE_F64, 10, "f64", 8)         \
    X(KT_TYPE_F16, 11, "f16", 2)         \
    X(KT_TYPE_BF16, 12, "bf16", 2)       \
    X(KT_TYPE_BUFFER, 64, "buffer", 0)   \
    X(KT_TYPE_BYTES, 65, "bytes", 0)

typedef enum kt_type { KT_TYPE_LIST(KT__ENUMERATOR) } kt_type;

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
#define KT_EFFORT_LIST(X)                    \
    X(KT_EFFORT_INHERIT, 0, "inherit")       \
    X(KT_EFFORT_MEASURE, 1, "tune")          \
    X(KT_EFFORT_CACHE_ONLY, 2, "cache-only") \
    X(KT_EFFORT_OFF, 3, "off")               \
    X(KT_EFFORT_FORCED, 4, "forced")

typedef enum kt_effort { KT_EFFORT_LIST(KT__ENUMERATOR) } kt_effort;

/** Returns an effort level's name: as KERNTUNE_MODE spells it ("tune" for MEASURE, "cache-only",
 *  "off"), and "inherit" or "forced" for the two that KERNTUNE_MODE does not take; NULL for an
 *  unknown value. */
KT_API const char *kt_effort_name(kt_effort effort);

/** Log levels; messages at or above the level set are emitted. */
#define KT_LOG_LEVEL_LIST(X)       \
    X(KT_LOG_NONE, 0, "none")      \
    X(KT_LOG_ERROR, 1, "error")    \
    X(KT_LOG_WARN, 2, "warn")      \
    X(KT_LOG_INFO, 3, "info")      \
    X(KT_LOG_DEBUG, 4, "debug")

typedef enum kt_log_level { KT_LOG_LEVEL_LIST(KT__ENUMERATOR) } kt_log_level;

/** Returns a log level's name as KERNTUNE_LOG spells it and log lines to stderr show it
 *  ("none", "error", "warn", "info", "debug"), or NULL for an unknown value. */
KT_API const char *kt_log_level_name(kt_log_level level);

/** Receives one log line (no trailing newline). May be called from any thread that calls into
 *  the context, so it must be thread-safe. */
typedef void (*kt_log_fn)(kt_log_level level, const char *message, void *user);

/**
 * Creates a context and stores it in *out (NULL on failure). Reads the environment once, here:
 *  - KERNTUNE_MODE = tune | cache-only | off   overrides every op's effort level;
 *  - KERNTUNE_FORCE = op=candidate[,op=candidate...]   forces candidates by op name;
 *  - KERNTUNE_LOG = error | warn | info | debug (none or off: no logging)   logs to stderr;
 *  - KERNTUNE_BACKENDS = name[,name...]   starts only those backends (kt_context_set_backends).
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

/** Stores a pointer for the caller's own use (NULL clears it): kerntune never reads, writes or
 *  frees it, so callbacks that receive the context, or code that holds it, find their data
 *  without globals. Not synchronised: set it before other threads read it. */
KT_API kt_status kt_context_set_user(kt_context *ctx, void *user);

/** Returns the pointer given to kt_context_set_user (NULL when none was, or for a NULL ctx). */
KT_API void *kt_context_user(const kt_context *ctx);

/* ---------------------------------------------------------------------------------------------
 * Ops
 *
 * An op is built (arguments, key, candidates, requirements) and then called. Its first call
 * freezes it: building calls after that fail with KT_ERR_STATE. How tuning measures the
 * candidates (kerntune/measure.h), what they run on meanwhile (kerntune/inputs.h) and how their
 * outputs are checked (kerntune/validation.h) have defaults a first program can keep.
 * ------------------------------------------------------------------------------------------- */

typedef struct kt_op kt_op;

/** A native candidate: runs the operation on args (nargs of them, in the op's declared order
 *  and types). Returns 0 on success; any other value is a failure, which disqualifies the
 *  candidate during tuning and is reported as KT_ERR_CANDIDATE_FAILED on a dispatched call. */
typedef int (*kt_native_fn)(const kt_arg *args, size_t nargs, void *user);

/** A queue of device work, as the op's device's backend names it: a CUstream for CUDA, a
 *  cl_command_queue for OpenCL (of the context and device kerntune's buffers live in); NULL
 *  for the device's own default queue. */
typedef void *kt_queue;

/** A native device candidate (kt_op_add_native_queued): enqueues the operation's work on args
 *  (device buffers of the op's device) on queue, and returns without waiting for it: a vendor
 *  library call (cuBLAS, cuBLASLt, clBLAS) or kernels of its own. queue is never NULL: a call
 *  on the default queue passes the backend's handle for it (for CUDA that handle is NULL, the
 *  default stream). Returns 0 on success; any other value is a failure, as for kt_native_fn. */
typedef int (*kt_queued_fn)(const kt_arg *args, size_t nargs, kt_queue queue, void *user);

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

/** How a key component compares when a key nobody tuned is answered from the nearest tuned one
 *  (KT_SOURCE_NEAREST): a SIZE by its distance in log2 (1024 is as far from 512 as from 2048),
 *  a CATEGORY only when equal. Without a call, a buffer's size and an integer scalar's value
 *  (bucketed or mapped) are sizes; an alignment, a float's bits and kt_op_key_fn's value are
 *  categories. */
typedef enum kt_key_scale { KT_KEY_SIZE = 0, KT_KEY_CATEGORY = 1 } kt_key_scale;

/** Sets the scale of declared key component index (0 for the first kt_op_key_* call). Only
 *  while the op is being built. */
KT_API kt_status kt_op_key_scale(kt_op *op, size_t index, kt_key_scale scale);

/** Adds a native candidate named name (unique within the op) that calls fn(args, nargs, user).
 *  At most 4096 candidates per op. */
KT_API kt_status kt_op_add_native(kt_op *op, const char *name, kt_native_fn fn, void *user);

/** Adds a native device candidate named name that enqueues its work on a queue: fn(args,
 *  nargs, queue, user). While the op tunes it runs on its device's backend's own queue,
 *  between two of that queue's timing events, so its time is the device's; its first run is
 *  validated like any candidate's. A hit of kt_op_call_async passes the caller's queue and
 *  returns as soon as fn does; kt_op_call passes the device's default queue and waits for it.
 *  The op's device (kt_op_set_device) must be one whose backend launches asynchronously and
 *  times queued work (KT_BACKEND_CAP_ASYNC_LAUNCH with backend ABI 8, as CUDA and OpenCL do):
 *  otherwise the op's first call fails with KT_ERR_STATE. Such a candidate always runs in the
 *  caller's process. */
KT_API kt_status kt_op_add_native_queued(kt_op *op, const char *name, kt_queued_fn fn, void *user);

/** Sets the version of candidate name: a string the caller changes whenever the candidate's
 *  behaviour changes in a way its identity does not show (NULL clears it; an empty string is
 *  refused). It becomes part of the candidate set's identity and of the candidate's own in the
 *  persistent cache, so a recorded decision or measurement of another version misses. Without
 *  it a native candidate is identified by its name and the build-id of the executable or shared
 *  object holding its function (ELF NT_GNU_BUILD_ID; for an object linked with
 *  --build-id=none, a hash of its loaded read-only segments), so a rebuilt object with changed
 *  code misses; a variant group by its source, kernel, options and space (not the files its
 *  source includes: set a version when those change). Only while the op is being built. */
KT_API kt_status kt_op_set_candidate_version(kt_op *op, const char *name, const char *version);

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

/** Sets the op's effort level (KT_EFFORT_INHERIT: the context's). */
KT_API kt_status kt_op_set_effort(kt_op *op, kt_effort effort);

/** Returns the number of declared candidates. */
KT_API size_t kt_op_candidate_count(const kt_op *op);

/** Returns the name of candidate index, or NULL when out of range. */
KT_API const char *kt_op_candidate_name(const kt_op *op, size_t index);

/** Stores a pointer for the caller's own use (NULL clears it), as kt_context_set_user does for a
 *  context: kerntune never reads, writes or frees it. It may be set at any time, also after the
 *  op's first call (it is not part of the op's declaration). Not synchronised: set it before
 *  other threads read it. */
KT_API kt_status kt_op_set_user(kt_op *op, void *user);

/** Returns the pointer given to kt_op_set_user (NULL when none was, or for a NULL op). */
KT_API void *kt_op_user(const kt_op *op);

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

/* ---- Calling and tuning -------------------------------------------------------------------- */

/**
 * Calls the op. Checks nargs and every argument's type against the signature, computes the
 * key, and dispatches the recorded winner for it. On a miss it decides first (by the op's
 * effort level): under MEASURE it validates and measures every candidate that accepts the
 * arguments, on the inputs kt_op_set_inputs chose (kerntune/inputs.h), records the winner,
 * restores the caller's buffers, and runs the winner once on them: afterwards the arguments hold
 * exactly what one launch of the winner produces from the caller's original data.
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

/** Calls op as kt_op_call does, with its device work on queue. A hit on a compiled variant of a
 *  backend that launches asynchronously (KT_BACKEND_CAP_ASYNC_LAUNCH in kerntune/backend.h)
 *  enqueues the one launch on queue and returns at once, before the kernel runs: it is ordered
 *  with the caller's other work on that queue exactly as a direct launch would be, and the
 *  caller synchronises as it would after one. A hit on a native device candidate
 *  (kt_op_add_native_queued) calls it with queue and returns when it does. A native candidate,
 *  a host variant, or a variant of a backend that cannot launch asynchronously runs before the
 *  call returns, as in kt_op_call. A miss first waits for the work already on queue and only
 *  that (tuning reads and restores the caller's buffers; CUDA records an event on the stream
 *  and waits for it), tunes on the backend's own queue as kt_op_call does, then enqueues the
 *  winner on queue. A miss while queue is being captured into a graph (a CUDA graph) cannot
 *  wait, so it does not tune: by default it returns KT_ERR_CAPTURING; kt_op_set_capture_miss
 *  can make it run the fallback (a native device candidate is enqueued on queue) and defer the
 *  key (kt_op_tune_deferred). Tune the keys a capture will use before capturing (kt_op_tune;
 *  with KT_INPUTS_GENERATED buffers may be NULL). */
KT_API kt_status kt_op_call_async(kt_op *op, kt_queue queue, const kt_arg *args, size_t nargs);

/** What a miss of kt_op_call_async does when its queue is being captured into a graph (a CUDA
 *  graph: the backend's queue_wait says so with KT_ERR_CAPTURING). Tuning would have to wait for
 *  the queue, which would end the capture, so such a miss never tunes:
 *  - REFUSE (the default): the call returns KT_ERR_CAPTURING, touching nothing, with a message
 *    naming the op and the key's arguments and saying how to tune the key ahead of time.
 *  - FALLBACK: the call runs, on the caller's arguments, the op's fallback candidate
 *    (kt_op_set_fallback) when it is a native that accepts them, else its default candidate
 *    (kt_op_set_default, else the first added) when that is a native that accepts them; nothing
 *    is built or loaded. It records the key as deferred (once per key; its scalar values and
 *    buffer sizes, never pointers) for kt_op_tune_deferred. When neither candidate is such a
 *    native it returns KT_ERR_CAPTURING saying so. */
#define KT_CAPTURE_MISS_LIST(X)                 \
    X(KT_CAPTURE_MISS_REFUSE, 0, "refuse")      \
    X(KT_CAPTURE_MISS_FALLBACK, 1, "fallback")

typedef enum kt_capture_miss { KT_CAPTURE_MISS_LIST(KT__ENUMERATOR) } kt_capture_miss;

/** Returns a capture-miss policy's name ("refuse", "fallback"), or NULL for an unknown value. */
KT_API const char *kt_capture_miss_name(kt_capture_miss how);

/** Sets what a miss under capture does (see kt_capture_miss). Only while the op is being built
 *  (KT_ERR_STATE after its first call); an unknown value fails with KT_ERR_INVALID_ARGUMENT. */
KT_API kt_status kt_op_set_capture_miss(kt_op *op, kt_capture_miss how);

/** Returns how many keys are deferred: recorded by misses under capture (KT_CAPTURE_MISS_FALLBACK)
 *  and not yet tuned. With a persistent cache (kerntune/cache.h) the keys deferred by earlier
 *  processes for the same op (its name, candidate set and device) count too: the first call of
 *  this function or kt_op_tune_deferred reads them. Freezes the op as its first call would (0
 *  when that fails; kt_last_error says why). */
KT_API size_t kt_op_deferred_count(const kt_op *op);

/** Tunes every deferred key as kt_op_tune would from sizes alone: on generated inputs (buffers
 *  NULL, filled by the op's generators, kerntune/inputs.h) whatever the op's inputs mode, without
 *  running anything on a queue. Each key tuned (or found decided meanwhile) leaves the list and
 *  the persistent cache; *tuned (may be NULL) receives how many did. Stops at the first key that
 *  fails, with its status and a message naming the key's arguments; that key and the rest stay
 *  deferred. Safe while other threads call the op. Call it outside any capture, e.g. at start-up
 *  before capturing, or after a captured graph was first launched. */
KT_API kt_status kt_op_tune_deferred(kt_op *op, size_t *tuned);

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

/** Decides the key of these arguments only if that needs no measuring, and runs nothing: a
 *  decision the op holds, one compiled in (kerntune/aot.h), recorded in the persistent cache or
 *  in the fleet's shared cache, or, under effort CACHE_ONLY, OFF or FORCED, what that effort
 *  decides. A recalled decision is the op's from then on (source KT_SOURCE_CACHE, TABLE or
 *  REMOTE; later calls dispatch to it); of a variant group only the recalled configuration is
 *  built. Under effort MEASURE a key nothing records returns KT_ERR_NOT_FOUND and stays
 *  undecided: the next kt_op_call or kt_op_tune tunes it; so does a recorded decision that the
 *  op would re-race (below its race's confidence; kt_op_set_rerace). Lets a caller skip the
 *  set-up that only tuning needs (a program that compiles every candidate before its first call
 *  compiles the recalled one alone). Waits when another thread is tuning the key. */
KT_API kt_status kt_op_recall(kt_op *op, const kt_arg *args, size_t nargs);

/** Returns how many times the op has tuned a key (measured its candidates). */
KT_API uint64_t kt_op_tune_count(const kt_op *op);

/* ---------------------------------------------------------------------------------------------
 * Decisions
 *
 * Which candidate a key's decision chose, and how it was made. kerntune/decision.h has the rest:
 * every candidate's and unit's outcome, times, runs and diagnostic, the confidence, the cost.
 * ------------------------------------------------------------------------------------------- */

/** A recorded decision; owned by its op and valid as long as the op. Read-only. */
typedef struct kt_decision kt_decision;

/** How a decision was made. Under effort CACHE_ONLY a key with no recorded decision is answered
 *  from what is known, by the first of these rules that gives a winner valid for the call's
 *  arguments (its requirements and, for a variant group, a configuration of today's space for
 *  these arguments): the nearest tuned key on the same device and candidate set (NEAREST: the
 *  least distance in log2 over the key's size components, every category component equal; see
 *  kt_op_key_scale), the same key decided on another device of the same architecture (ARCH),
 *  then of the same vendor (VENDOR, as the backends classify devices), else the op's default
 *  (DEFAULT). Decisions are looked for in the op's own, then in the persistent cache, which
 *  wisdom from other machines can fill (kt_cache_import). Nothing is measured. */
typedef enum kt_decision_source {
    KT_SOURCE_MEASURED = 1, /* measured at first call */
    KT_SOURCE_DEFAULT = 2,  /* default candidate, by effort OFF, FORCED without one, or CACHE_ONLY */
    KT_SOURCE_FORCED = 3,   /* forced candidate */
    KT_SOURCE_CACHE = 4,    /* recorded in the persistent cache by an earlier process */
    KT_SOURCE_NEAREST = 5,  /* CACHE_ONLY: the winner of the nearest tuned key on this device */
    KT_SOURCE_ARCH = 6,     /* CACHE_ONLY: this key's winner on another device of this architecture */
    KT_SOURCE_VENDOR = 7,   /* CACHE_ONLY: this key's winner on another device of this vendor */
    KT_SOURCE_TABLE = 8,    /* a table of decisions made ahead of time (kerntune/aot.h) */
    KT_SOURCE_REMOTE = 9    /* the fleet's shared cache (kt_context_set_remote) */
} kt_decision_source;

/** Returns a source's name: "measured", "default", "forced", "cache", "nearest key", "same
 *  architecture", "same vendor", "table", "remote"; NULL for an unknown value. */
KT_API const char *kt_decision_source_name(kt_decision_source source);

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

/** For a decision answered by a rule (KT_SOURCE_NEAREST, ARCH, VENDOR): the fingerprint of the
 *  device whose decision it took, and that decision's key components (as kt_decision_key
 *  counts them; up to max into out, returns how many there are). NULL and 0 otherwise. */
KT_API const char *kt_decision_borrowed_device(const kt_decision *d);
KT_API size_t kt_decision_borrowed_key(const kt_decision *d, int64_t *out, size_t max);

/* ---------------------------------------------------------------------------------------------
 * Memory handed out
 * ------------------------------------------------------------------------------------------- */

/** Frees memory kerntune handed out to the caller (kt_cache_export's document). NULL is
 *  harmless. */
KT_API void kt_free(void *p);

#ifdef __cplusplus
}
#endif

#endif /* KERNTUNE_H */
