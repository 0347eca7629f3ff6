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

/* Whether b flushes its devices' caches (ABI 4's flush, or ABI 16's flush_buffers). */
bool kt__backend_flushes(const kt_backend *b);

/* Flushes device's caches before a run on args (nargs): of the run's buffers alone where b can
 * (flush_buffers), else the whole cache (flush); KT_OK when b flushes nothing. */
kt_status kt__backend_flush(const kt_backend *b, void *state, size_t device, const kt_arg *args, size_t nargs, char *err,
                            size_t errlen);

#endif
