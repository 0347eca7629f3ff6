/*
 * kerntune/backend.h - the backend plug-in interface.
 *
 * A backend is a versioned table of function pointers, in the manner of SQLite's VFS: the core
 * calls a backend only through thin wrappers, fields are only ever appended, and a field that a
 * backend leaves NULL is an optional method it does not provide. A backend knows how to find
 * devices (and, as the interface grows, how to compile, allocate, copy, launch and time); it
 * knows nothing about tuning.
 *
 * Version 1 covers device discovery; version 2 appends buffers (allocate, free, copy, fill);
 * version 3 appends building variants into artifact files, loading them, launching and timing
 * them, and resource limits; version 4 appends flushing a device's cache; version 5 appends the
 * names of the op's arguments and which of them live in constant memory to the build request
 * (kt_op_set_constant); version 6 appends what the backend can do (caps: KT_BACKEND_CAP_*) and
 * the kernel language it builds, which the core asks instead of the backend's name; version 7
 * appends launching on a caller's queue without waiting, and waiting for a queue; version 8
 * appends timing work that a native device candidate enqueues, and the default queue's handle
 * (kt_op_add_native_queued); version 9 appends checking buffers where they live (a digest of a
 * buffer's bytes, and whether an output is close to the reference's), so that validating a
 * candidate reads nothing back while it passes; version 10 passes launch parameters
 * (kt_op_add_launch_param): a launch's arguments may continue past the op's with KT_TYPE_BYTES
 * values, which a backend with KT_BACKEND_CAP_LAUNCH_PARAMS passes to the kernel by value;
 * version 11 says whether a built kernel fits its launch by the compiler's own account
 * (registers, static shared memory), so that one that does not is rejected unlaunched; version
 * 12 says a device's architecture and vendor, so that a key nobody tuned on it may borrow
 * another device's decision (kerntune.h, KT_SOURCE_ARCH and KT_SOURCE_VENDOR); version 13 says
 * its peak arithmetic rate and memory bandwidth (kt_device_peaks), against which results with
 * work formulas are read, and what a built kernel uses (registers, shared memory, spills);
 * version 14 appends to the build request a way to ask whether the core still wants the build
 * (a tuning's budget of wall seconds ended while it ran), so that a backend may stop it; version
 * 15 appends flags to the build request (KT_BUILD_KERNEL_TUNER: the group is compiled under
 * Kernel Tuner's compile contract, kt_op_set_kernel_tuner_contract) and the configuration's own
 * text; version 16 appends flushing the buffers of one run from a device's caches by address (a
 * CPU device, whose whole cache is the host's last-level cache, hundreds of MiB on a server
 * part); version 17 appends a directory where the backend may keep builds of its own between
 * processes (the context's artifact directory); version 18 appends the time a host variant's
 * run reported itself (Kernel Tuner's C contract: the function returns its run's time in
 * milliseconds), which the core takes instead of the time it measured around the call. A backend
 * written against an older version has no capabilities: device memory, variants run in the
 * caller's process. A backend declares the version it was written against in
 * abi_version and the core never reads a field beyond it. Comparing outputs is the core's
 * work, on host memory: a backend with device memory copies to the host first, unless its
 * version 9 methods say on the device that they match. Caching
 * artifacts on disk, building in parallel and building identical code once are the core's
 * work too: a backend builds one artifact file when asked.
 */
#ifndef KERNTUNE_BACKEND_H
#define KERNTUNE_BACKEND_H

#include <kerntune.h>
#include <kerntune/device.h>   /* kt_device */
#include <kerntune/variants.h> /* kt_geometry */

#ifdef __cplusplus
extern "C" {
#endif

#define KT_BACKEND_ABI_VERSION 19

/** Longest device name and fingerprint, terminating NUL included. */
#define KT_DEVICE_NAME_MAX 256
#define KT_DEVICE_FINGERPRINT_MAX 1024

typedef struct kt_backend kt_backend;

/** What one variant is built from (version 3). */
typedef struct kt_build_request {
    const char *source;          /* the kernel source */
    const char *kernel_name;     /* the function or kernel to call */
    const char *const *defines;  /* "NAME=VALUE", one per parameter and derived value */
    size_t ndefines;
    const char *const *options;  /* further compiler options */
    size_t noptions;
    const kt_type *arg_types;    /* the op's signature: KT_TYPE_BUFFER or a scalar type, */
    const kt_type *arg_elems;    /* and for buffers the element type */
    size_t nargs;
    const char *out_path;        /* where to write the artifact (the core renames it into place) */
    /* version 5: */
    const char *const *arg_names; /* the op's argument names */
    const unsigned char *arg_constant; /* nonzero: buffer argument i is in constant memory
                                        * (kt_op_set_constant). A backend with such memory copies
                                        * the buffer before each launch into the module's
                                        * variable named arg_names[i], and passes it as a
                                        * parameter as well; others pass it like any buffer. An
                                        * op with constant arguments is refused by backends of
                                        * versions below 5. */
    /* version 14: */
    int (*cancelled)(void *user);  /* NULL, or nonzero once the core no longer wants the
                                    * artifact: a backend whose compiler runs apart (a child
                                    * process) may poll it, stop the compiler and return
                                    * KT_ERR_SYSTEM. Thread-safe; cheap to call. The core never
                                    * records a cancelled build's failure. */
    void *cancel_user;             /* passed to cancelled */
    /* version 15: */
    unsigned flags;                /* KT_BUILD_* */
    const char *config;            /* the configuration as kt_space_config_format writes it
                                    * ("TM=16,TN=8": its parameters and derived values, which
                                    * under KT_BUILD_KERNEL_TUNER are not all the defines), for a
                                    * backend that stands in for a device with recorded results */
} kt_build_request;

/** Flags of a build request (kt_build_request.flags, ABI 15). */
typedef enum kt_build_flag {
    /** Kernel Tuner's compile contract (kt_op_set_kernel_tuner_contract): defines holds exactly
     *  Kernel Tuner's defines, in its order (grid_size_x/y/z, the block size names, the
     *  parameters, kernel_tuner=1, then derived values). The backend places them before the
     *  source as #define lines (or passes them as -D options), then a `#line 1` line so that the
     *  compiler numbers the source's lines from 1; a backend of a language with Kernel Tuner's
     *  CUDA/HIP rule writes a define whose name contains "loop_unroll_factor" as `constexpr int
     *  NAME = VALUE;` before the `#line 1` instead, or, when VALUE is "0", writes nothing for it
     *  and removes every match of Kernel Tuner's expression "\n\s*#pragma\s+unroll\s+NAME"
     *  from the source (each replaced by one newline). The core keys the artifact on such
     *  defines' values themselves. The core sets it only for backends of version 15 or later. */
    KT_BUILD_KERNEL_TUNER = 1u << 0
} kt_build_flag;

/** The launch geometry of one variant (version 3). */
typedef struct kt_launch_geometry {
    kt_geometry kind;            /* GRID: global counts blocks; GLOBAL: global counts work-items */
    int64_t global[3];
    int64_t local[3];
    int64_t shared_memory;       /* dynamic shared memory in bytes */
} kt_launch_geometry;

/** A device's resource limits (version 3); 0 means no limit known. */
typedef struct kt_device_limits {
    int64_t max_threads_per_block;
    int64_t max_block[3];
    int64_t max_shared_memory;   /* per block, bytes */
} kt_device_limits;

/** Directions of kt_backend.buffer_copy. */
/** What a backend can do (kt_backend.caps, ABI 6): the core asks these flags, never a
 *  backend's name. A backend of an older ABI has none of them. */
typedef enum kt_backend_cap {
    /** Its buffers are host memory: the core reads and writes them directly and flushes the
     *  host's caches itself. */
    KT_BACKEND_CAP_HOST_MEMORY = 1u << 0,
    /** A runner process can run its variants (KT_ISOLATE_ON, and AUTO with FAULT_POISONS): the
     *  runner loads the shared object (or starts the program) that defines the table, finds the
     *  table there (at its offset, the object's build-id checked, or by its exported symbol) and
     *  calls init there, so init must need nothing from the caller's process. Without it, the
     *  backend's variants run in the caller's process. */
    KT_BACKEND_CAP_RUNNER = 1u << 1,
    /** A faulting variant leaves the process's device context unusable, so KT_ISOLATE_AUTO runs
     *  its variants in a runner process. */
    KT_BACKEND_CAP_FAULT_POISONS = 1u << 2,
    /** launch_async enqueues a launch on a caller's queue and returns before the kernel runs,
     *  and queue_wait waits for a queue's work (ABI 7; kt_op_call_async). */
    KT_BACKEND_CAP_ASYNC_LAUNCH = 1u << 3,
    /** launch and launch_async take arguments past the op's of type KT_TYPE_BYTES (ptr, bytes)
     *  and pass each to the kernel by value, as its next parameter (ABI 10;
     *  kt_op_add_launch_param). Without it a group with launch parameters cannot be built. */
    KT_BACKEND_CAP_LAUNCH_PARAMS = 1u << 4,
    /** build compiles the source as C preprocessor input with the defines as -D NAME=VALUE (or
     *  #define lines in front), and the artifact depends on the defines only through what the
     *  preprocessor makes of the source: configurations whose preprocessed code is the same
     *  share one artifact (the core finds them without running the compiler). Without it every
     *  set of defines is built on its own. */
    KT_BACKEND_CAP_PREPROCESSED = 1u << 5,
    /** Its kernels run on a processor of their own (a GPU), not on the host's CPUs: building on
     *  the host while one runs does not slow it, so a tuning that builds as it goes compiles the
     *  next configurations while it measures these. Without it, building and measuring take
     *  turns. */
    KT_BACKEND_CAP_OWN_PROCESSOR = 1u << 6
} kt_backend_cap;

typedef enum kt_copy_dir {
    KT_COPY_HOST_TO_DEVICE = 1,
    KT_COPY_DEVICE_TO_HOST = 2,
    KT_COPY_DEVICE_TO_DEVICE = 3
} kt_copy_dir;

struct kt_backend {
    /** KT_BACKEND_ABI_VERSION the backend was written against. */
    int abi_version;
    /** Short lower-case name, unique within a context: "c", "opencl", "cuda". */
    const char *name;
    /** Starts the backend; stores backend state in *state. A backend whose runtime is missing
     *  returns KT_ERR_BACKEND with a reason in err (errlen bytes) and is skipped. Optional. */
    kt_status (*init)(const kt_backend *self, void **state, char *err, size_t errlen);
    /** Releases what init made. Optional. */
    void (*fini)(void *state);
    /** Returns the number of devices. Required. */
    size_t (*device_count)(void *state);
    /** Writes device index's human-readable name into name (KT_DEVICE_NAME_MAX bytes) and its
     *  fingerprint into fp (KT_DEVICE_FINGERPRINT_MAX bytes). Required. */
    kt_status (*device_describe)(void *state, size_t index, char *name, char *fp, char *err,
                                 size_t errlen);

    /* ---- version 2: buffers. A buffer is an opaque handle (a host pointer for the C backend). */
    /** Allocates bytes bytes on device device; stores the handle in *out. */
    kt_status (*buffer_alloc)(void *state, size_t device, size_t bytes, void **out, char *err, size_t errlen);
    /** Frees a buffer from buffer_alloc; NULL is harmless. */
    void (*buffer_free)(void *state, size_t device, void *buffer);
    /** Copies bytes bytes from src to dst in direction dir (host pointers on the host side). */
    kt_status (*buffer_copy)(void *state, size_t device, void *dst, const void *src, size_t bytes,
                             kt_copy_dir dir, char *err, size_t errlen);
    /** Fills bytes bytes of buffer with pattern (pattern_bytes long, a divisor of bytes). */
    kt_status (*buffer_fill)(void *state, size_t device, void *buffer, size_t bytes, const void *pattern,
                             size_t pattern_bytes, char *err, size_t errlen);

    /* ---- version 3: variants. A module is an opaque loaded artifact. */
    /** File extension of artifacts (".so", ".clbin", ".cubin"). */
    const char *artifact_ext;
    /** Writes the identity of the compiler and its default options for device (name and
     *  version): part of the artifact cache key. */
    kt_status (*compiler_id)(void *state, size_t device, char *out, size_t len, char *err, size_t errlen);
    /** Builds one artifact file at req->out_path. On failure writes the compiler's log (its
     *  first lines at least) into log and returns KT_ERR_BACKEND when the compiler refused the
     *  code (the failure is kept with the artifacts and not tried again for the same key), or
     *  another status (KT_ERR_SYSTEM, KT_ERR_NO_MEMORY) when the environment failed (a compiler
     *  that could not start, crashed or was killed): tried again next time. Thread-safe. */
    kt_status (*build)(void *state, size_t device, const kt_build_request *req, char *log, size_t loglen);
    /** Loads an artifact and finds its kernel: a missing entry point fails with KT_ERR_BACKEND. */
    kt_status (*load)(void *state, size_t device, const char *path, const char *kernel_name, void **module,
                      char *err, size_t errlen);
    /** Unloads a module. */
    void (*unload)(void *state, size_t device, void *module);
    /** For host backends: the module's entry point as a native candidate, called with the op's
     *  arguments (the core then calls it directly, timing it on the CPU). NULL otherwise. */
    kt_native_fn (*entry)(void *state, void *module);
    /** Launches the module's kernel with geometry g on args and waits for it; when ns is not
     *  NULL stores the kernel's device time in nanoseconds (timing events around the launch).
     *  Optional for host backends that provide entry. */
    kt_status (*launch)(void *state, size_t device, void *module, const kt_launch_geometry *g, const kt_arg *args,
                        size_t nargs, double *ns, char *err, size_t errlen);
    /** Reads the device's resource limits, used to reject a configuration before it is built.
     *  Optional. */
    kt_status (*limits)(void *state, size_t device, kt_device_limits *out, char *err, size_t errlen);

    /* ---- version 4: measurement. */
    /** Evicts what earlier launches left in the device's caches (writing a buffer as large as
     *  its last-level cache), and waits for it; called between measured runs, outside the timed
     *  region. Optional (NULL: never flushed); host backends leave it NULL, the core flushes
     *  the host's cache itself. */
    kt_status (*flush)(void *state, size_t device, char *err, size_t errlen);

    /* ---- version 6: what it can do. */
    /** KT_BACKEND_CAP_* flags. */
    unsigned caps;
    /** The language its variants are written in, as T1 problem files name it ("C", "OpenCL",
     *  "CUDA"); NULL when it builds none. */
    const char *language;
    /* ---- version 7: asynchronous launch (KT_BACKEND_CAP_ASYNC_LAUNCH). */
    /** Enqueues the module's kernel with geometry g on args on queue (the backend's own queue
     *  handle, NULL: the device's default queue) and returns without waiting for it. The
     *  arguments may be reused by the caller as soon as it returns. */
    kt_status (*launch_async)(void *state, size_t device, void *module, const kt_launch_geometry *g, const kt_arg *args,
                              size_t nargs, void *queue, char *err, size_t errlen);
    /** Waits until the work already on queue (NULL: the device's default queue) has finished.
     *  A queue that cannot be waited for because it is being captured into a graph (waiting
     *  would end the capture) returns KT_ERR_CAPTURING: the core then does not tune
     *  (kt_op_set_capture_miss). */
    kt_status (*queue_wait)(void *state, size_t device, void *queue, char *err, size_t errlen);
    /* ---- version 8: native device candidates (kt_op_add_native_queued). */
    /** Runs work(ctx, q) on the backend's own queue q for device (the one its launch, copies and
     *  fills use), waits for what it enqueued there, and when ns is not NULL stores the device
     *  time between two timing events around it, in nanoseconds. work's return value is stored
     *  in *rc; when it is not 0 nothing is timed. Fails (KT_ERR_BACKEND) only when the backend
     *  does: its events, or waiting for the queue. */
    kt_status (*time_queued)(void *state, size_t device, int (*work)(void *ctx, void *queue), void *ctx, double *ns,
                             int *rc, char *err, size_t errlen);
    /** The handle of device's default queue: what launch_async and queue_wait take NULL for
     *  (CUDA: NULL, the default stream; OpenCL: the backend's own queue). */
    void *(*queue_default)(void *state, size_t device);
    /* ---- version 9: checking on the device. Optional, both or neither; without them the core
     * reads buffers back and checks them on the host. */
    /** Stores in *out a 64-bit digest of the bytes bytes at buffer, computed where they live:
     *  a function of the bytes alone (not of the address), so that equal contents give equal
     *  digests and a change gives a different one but by a 2^-64 chance. The core digests each
     *  ReadOnly argument before and after a validation run to see a candidate write into it. */
    kt_status (*digest)(void *state, size_t device, const void *buffer, size_t bytes, uint64_t *out, char *err,
                        size_t errlen);
    /** Sets *close to 1 when every one of count elements of type elem at actual matches the
     *  element at expected, else to 0: floats (f32, f64, f16, bf16, widened to double) when
     *  |a - e| <= atol + rtol * |e| with IEEE double operations and no fused multiply-add, which
     *  NaN and infinities never satisfy; other types when their bytes are equal. It may answer
     *  0 for any reason (an alignment it does not handle, say): the core then reads both back
     *  and compares on the host, which finds and names the element at fault, so 0 costs time,
     *  never a wrong verdict; 1 must only be said when the host's comparison would pass. */
    kt_status (*all_close)(void *state, size_t device, kt_type elem, const void *actual, const void *expected, size_t count,
                           double atol, double rtol, int *close, char *err, size_t errlen);
    /* ---- version 11: what a built kernel needs. */
    /** Says whether the loaded module's kernel can be launched with geometry g by the compiler's
     *  and the driver's own account of what it needs (the threads per block its registers
     *  allow, its static shared memory beside g's dynamic shared memory): KT_OK, or
     *  KT_ERR_LIMIT with why in err. A configuration that does not fit is rejected before it is
     *  launched (KT_OUTCOME_REJECTED). Optional. */
    kt_status (*fits)(void *state, size_t device, void *module, const kt_launch_geometry *g, char *err, size_t errlen);
    /* ---- version 12: what kind of device it is. */
    /** Writes device index's architecture (the devices that run the same code the same way: for
     *  CUDA the compute capability, "sm_90") into arch and its vendor ("NVIDIA") into vendor,
     *  each KT_DEVICE_NAME_MAX bytes; either may be left empty when unknown. A key nobody
     *  tuned may be answered from a decision made on another device of the same architecture,
     *  then of the same vendor (kt_decision_source_of). Optional: without it a device's
     *  decisions answer for that device only. */
    kt_status (*classify)(void *state, size_t index, char *arch, char *vendor, char *err, size_t errlen);
    /* ---- version 13: the device's limits. */
    /** Writes device index's peak arithmetic rate in GFLOP/s (single precision, a fused
     *  multiply-add counted as two) and its memory bandwidth in GB/s, from what the device
     *  reports; 0 for one it cannot tell. Optional. */
    kt_status (*peaks)(void *state, size_t index, double *gflops, double *gbs, char *err, size_t errlen);
    /** Writes what the loaded module's kernel uses by the compiler's own account: registers per
     *  thread, static shared (local) memory per block in bytes, and local (private) memory per
     *  thread in bytes, where registers spill; -1 for one it cannot tell. Optional. */
    kt_status (*resources)(void *state, size_t device, void *module, int *registers, int *shared_bytes, int *local_bytes, char *err,
                           size_t errlen);
    /* ---- version 16: flushing one run's buffers. */
    /** Evicts the buffers among args (the nargs arguments of the run about to start; those that
     *  are not buffers are skipped) from device's caches and waits for it: what flush does for
     *  the whole cache, for a device whose caches can be emptied by address (a CPU device's
     *  buffers are host memory). KT_ERR_NOT_FOUND when it cannot for this device: the core then
     *  calls flush. Optional. */
    kt_status (*flush_buffers)(void *state, size_t device, const kt_arg *args, size_t nargs, char *err, size_t errlen);
    /* ---- version 17: a directory of the backend's own builds. */
    /** Gives the backend a directory where it may keep what it builds for itself (its own helper
     *  kernels: the CUDA backend's device checks), so that a later process loads them instead
     *  of building them again; the context's artifact directory, given after init and again
     *  whenever kt_context_set_artifact_dir changes it. The backend copies the string; it need
     *  not exist yet. Optional. */
    void (*set_cache_dir)(void *state, const char *dir);
    /* ---- version 18: a run's own account of its time. */
    /** For host backends (entry): stores in *ns the time, in nanoseconds, that the last run of
     *  the module's entry on the calling thread reported itself, or -1 when it reported none
     *  (a function that returns no time); the core calls it right after each run, on the thread
     *  that ran it, and takes that time instead of the one it measured around the call.
     *  Optional. */
    void (*reported_ns)(void *state, void *module, double *ns);
    /* ---- version 19: why a run failed. */
    /** For host backends (entry): when the last run of the module's entry on the calling thread
     *  returned the nonzero code rc, writes why into msg (len bytes, NUL-terminated) and returns
     *  nonzero, or returns 0 when it can say no more than the code; the core calls it right
     *  after such a run, on the thread that ran it, and the unit's message is the text. Optional. */
    int (*run_failure)(void *state, void *module, int rc, char *msg, size_t len);
};

/** Registers a backend with the context and enumerates its devices. The table must outlive the
 *  context. A name already registered fails with KT_ERR_DUPLICATE; a backend that fails to
 *  start fails with its status and the context is unchanged. */
KT_API kt_status kt_context_add_backend(kt_context *ctx, const kt_backend *backend);

/** Returns the built-in backends: C (the host CPU, always registered), OpenCL (through the ICD
 *  loader, libOpenCL.so.1, opened at run time) and CUDA (libcuda.so.1 and NVRTC opened at run
 *  time), both registered when devices are first asked for. */
KT_API const kt_backend *kt_backend_c(void);
KT_API const kt_backend *kt_backend_opencl(void);
KT_API const kt_backend *kt_backend_cuda(void);

/** Returns the KT_BACKEND_CAP_* flags of the backend that found the device (0 for NULL). */
KT_API unsigned kt_device_caps(const kt_device *dev);

/** Returns the language of the variants the device's backend builds (see kt_backend.language),
 *  or NULL. */
KT_API const char *kt_device_language(const kt_device *dev);

#ifdef __cplusplus
}
#endif

#endif /* KERNTUNE_BACKEND_H */
