/*
 * registry.c - the list of built-in backends and the capability accessor.
 */
#include "backends/backends.h"

const kt_backend *const *kt__backends_builtin(size_t *n) {
    static const kt_backend *all[3];
    /* the tables are static constants of their files: their addresses are fixed, so filling
     * the list on every call is idempotent and safe from any thread */
    all[0] = kt_backend_c();
    all[1] = kt_backend_opencl();
    all[2] = kt_backend_cuda();
    *n = sizeof all / sizeof all[0];
    return all;
}

unsigned kt__backend_caps(const kt_backend *b) { return b != NULL && b->abi_version >= 6 ? b->caps : 0; }
