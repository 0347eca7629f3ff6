/*
 * backends.h - what the core may know of the built-in backends: which exist, and what a
 * backend table says it can do. The core asks capabilities through kt__backend_caps, never a
 * backend's name. Not installed.
 */
#ifndef KT_BACKENDS_H
#define KT_BACKENDS_H

#include <kerntune/backend.h>

#include <stddef.h>

/* The built-in backends: the first is the host's (always registered); the others are optional
 * and registered when devices are first asked for. Sets *n. */
const kt_backend *const *kt__backends_builtin(size_t *n);

/* The KT_BACKEND_CAP_* flags of b (none for a backend of ABI version below 6). */
unsigned kt__backend_caps(const kt_backend *b);

#endif
