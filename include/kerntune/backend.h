/*
 * kerntune/backend.h - the backend plug-in interface.
 *
 * A backend is a versioned table of function pointers, in the manner of SQLite's VFS: the core
 * calls a backend only through thin wrappers, fields are only ever appended, and a field that a
 * backend leaves NULL is an optional method it does not provide. A backend knows how to find
 * devices (and, as the interface grows, how to compile, allocate, copy, launch and time); it
 * knows nothing about tuning.
 *
 * Version 1 covers device discovery; version 2 appends buffers (allocate, free, copy, fill).
 * Later versions append compilation, launch and timing. A backend declares the version it was
 * written against in abi_version and the core never reads a field beyond it. Comparing outputs
 * is the core's work, on host memory: a backend with device memory copies to the host first.
 */
#ifndef KERNTUNE_BACKEND_H
#define KERNTUNE_BACKEND_H

#include <kerntune.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KT_BACKEND_ABI_VERSION 2

/** Longest device name and fingerprint, terminating NUL included. */
#define KT_DEVICE_NAME_MAX 256
#define KT_DEVICE_FINGERPRINT_MAX 1024

typedef struct kt_backend kt_backend;

/** Directions of kt_backend.buffer_copy. */
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
};

/** Registers a backend with the context and enumerates its devices. The table must outlive the
 *  context. A name already registered fails with KT_ERR_DUPLICATE; a backend that fails to
 *  start fails with its status and the context is unchanged. */
KT_API kt_status kt_context_add_backend(kt_context *ctx, const kt_backend *backend);

/** Returns the built-in C backend (host CPU). */
KT_API const kt_backend *kt_backend_c(void);

#ifdef __cplusplus
}
#endif

#endif /* KERNTUNE_BACKEND_H */
