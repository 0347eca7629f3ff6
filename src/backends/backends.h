/*
 * backends.h - what the core may know of the built-in backends: which exist, and what a
 * backend table says it can do. The core asks capabilities through kt__backend_caps, never a
 * backend's name. Not installed.
 */
#ifndef KT_BACKENDS_H
#define KT_BACKENDS_H

#include <kerntune/backend.h>

#include <stdbool.h>
#include <stddef.h>

#define KT__BUILTIN_BACKENDS 3

/* Writes the built-in backends into out and returns how many: the first is the host's (always
 * registered); the others are optional and registered when devices are first asked for. */
size_t kt__backends_builtin(const kt_backend *out[KT__BUILTIN_BACKENDS]);

/* What a backend table may offer beyond the required members, each with the ABI version that
 * brought it: the core asks kt__backend_has, never abi_version itself. */
typedef enum kt__backend_feature {
    KT__BACKEND_TABLE,       /* a table the core can register: name, device_count, device_describe (ABI 1) */
    KT__BACKEND_BUFFERS,     /* buffer_alloc and the rest of the buffers (ABI 2) */
    KT__BACKEND_BUILDS,      /* build, load, and an entry point or a launch: it builds variants (ABI 3) */
    KT__BACKEND_COMPILER_ID, /* compiler_id (ABI 3) */
    KT__BACKEND_LIMITS,      /* limits (ABI 3) */
    KT__BACKEND_FLUSH,       /* flush: the whole of a device's caches (ABI 4) */
    KT__BACKEND_CONSTANTS,   /* arguments placed in constant memory (ABI 5) */
    KT__BACKEND_LANGUAGE,    /* language and caps (ABI 6) */
    KT__BACKEND_RUNNER,      /* it runs in an isolation runner: KT_BACKEND_CAP_RUNNER, its buffers, load,
                                unload and an entry point or a launch, and no newer than this core */
    KT__BACKEND_FILL_CHECKS, /* digest, all_close and buffer_fill: a runner checks runs on the device (ABI 9) */
    KT__BACKEND_FITS,        /* fits (ABI 11) */
    KT__BACKEND_CLASSIFY,    /* classify (ABI 12) */
    KT__BACKEND_PEAKS,       /* peaks (ABI 13) */
    KT__BACKEND_RESOURCES,   /* resources (ABI 13) */
    KT__BACKEND_CONTRACT,    /* builds under Kernel Tuner's contract (KT_BUILD_KERNEL_TUNER, ABI 15) */
    KT__BACKEND_CACHE_DIR,   /* set_cache_dir (ABI 17) */
    KT__BACKEND_REPORTED,    /* reported_ns: a host run's own account of its time (ABI 18) */
    KT__BACKEND_RUN_FAILURE, /* run_failure: why a host run failed (ABI 19) */
} kt__backend_feature;

/* Whether b's table offers f (NULL b: nothing). */
bool kt__backend_has(const kt_backend *b, kt__backend_feature f);

/* The KT_BACKEND_CAP_* flags of b (none for a backend of ABI version below 6). */
unsigned kt__backend_caps(const kt_backend *b);

/* Whether b enqueues launches on a caller's queue: KT_BACKEND_CAP_ASYNC_LAUNCH and both of its
 * ABI 7 methods. */
bool kt__backend_async(const kt_backend *b);

/* Whether b runs native device candidates (kt_op_add_native_queued): it enqueues
 * (kt__backend_async) and has both ABI 8 methods, time_queued and queue_default. */
bool kt__backend_queued(const kt_backend *b);

/* Whether b checks buffers on the device: both ABI 9 methods, digest and all_close. */
bool kt__backend_checks(const kt_backend *b);

/* The time the last run of module's entry on this thread reported itself, in ns: -1 when it
 * reported none or b cannot say (below ABI 18). */
double kt__backend_reported_ns(const kt_backend *b, void *state, void *module);

/* Why the last run of module's entry on this thread returned rc (nonzero): written into msg
 * (len bytes) when b can say (ABI 19's run_failure), and then true; msg is left as it was
 * otherwise. */
bool kt__backend_run_failure(const kt_backend *b, void *state, void *module, int rc, char *msg, size_t len);

/* Whether b flushes its devices' caches (ABI 4's flush, or ABI 16's flush_buffers). */
bool kt__backend_flushes(const kt_backend *b);

/* Flushes device's caches before a run on args (nargs): of the run's buffers alone where b can
 * (flush_buffers), else the whole cache (flush); KT_OK when b flushes nothing. */
kt_status kt__backend_flush(const kt_backend *b, void *state, size_t device, const kt_arg *args, size_t nargs, char *err,
                            size_t errlen);

#endif
