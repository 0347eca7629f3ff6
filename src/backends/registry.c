/*
 * registry.c - the list of built-in backends and the capability accessors.
 */
#include "backends/backends.h"

#include <stdio.h>

size_t kt__backends_builtin(const kt_backend *out[KT__BUILTIN_BACKENDS]) {
    out[0] = kt_backend_c();
    out[1] = kt_backend_opencl();
    out[2] = kt_backend_cuda();
    return KT__BUILTIN_BACKENDS;
}

bool kt__backend_has(const kt_backend *b, kt__backend_feature f) {
    if (b == NULL) return false;
    const int v = b->abi_version;
    switch (f) {
    case KT__BACKEND_TABLE: return v >= 1 && b->name && b->device_count && b->device_describe;
    case KT__BACKEND_BUFFERS: return v >= 2 && b->buffer_alloc;
    case KT__BACKEND_BUILDS: return v >= 3 && b->build && b->load && (b->entry || b->launch);
    case KT__BACKEND_COMPILER_ID: return v >= 3 && b->compiler_id;
    case KT__BACKEND_LIMITS: return v >= 3 && b->limits;
    case KT__BACKEND_FLUSH: return v >= 4 && b->flush;
    case KT__BACKEND_CONSTANTS: return v >= 5;
    case KT__BACKEND_LANGUAGE: return v >= 6;
    case KT__BACKEND_RUNNER:
        return v >= 6 && v <= KT_BACKEND_ABI_VERSION && (b->caps & KT_BACKEND_CAP_RUNNER) && b->device_count && b->device_describe &&
               b->load && b->unload && b->buffer_alloc && b->buffer_free && b->buffer_copy && (b->entry || b->launch);
    case KT__BACKEND_FILL_CHECKS: return v >= 9 && b->digest && b->all_close && b->buffer_fill;
    case KT__BACKEND_FITS: return v >= 11 && b->fits;
    case KT__BACKEND_CLASSIFY: return v >= 12 && b->classify;
    case KT__BACKEND_PEAKS: return v >= 13 && b->peaks;
    case KT__BACKEND_RESOURCES: return v >= 13 && b->resources;
    case KT__BACKEND_CONTRACT: return v >= 15;
    case KT__BACKEND_CACHE_DIR: return v >= 17 && b->set_cache_dir;
    case KT__BACKEND_REPORTED: return v >= 18 && b->reported_ns;
    case KT__BACKEND_RUN_FAILURE: return v >= 19 && b->run_failure;
    }
    return false;
}

unsigned kt__backend_caps(const kt_backend *b) { return kt__backend_has(b, KT__BACKEND_LANGUAGE) ? b->caps : 0; }

bool kt__backend_async(const kt_backend *b) {
    return (kt__backend_caps(b) & KT_BACKEND_CAP_ASYNC_LAUNCH) && b->abi_version >= 7 && b->launch_async != NULL &&
           b->queue_wait != NULL;
}

bool kt__backend_queued(const kt_backend *b) {
    return kt__backend_async(b) && b->abi_version >= 8 && b->time_queued != NULL && b->queue_default != NULL;
}

bool kt__backend_checks(const kt_backend *b) {
    return b != NULL && b->abi_version >= 9 && b->digest != NULL && b->all_close != NULL;
}

static bool flushes_buffers(const kt_backend *b) { return b != NULL && b->abi_version >= 16 && b->flush_buffers != NULL; }

bool kt__backend_flushes(const kt_backend *b) { return (b != NULL && b->abi_version >= 4 && b->flush != NULL) || flushes_buffers(b); }

kt_status kt__backend_flush(const kt_backend *b, void *state, size_t device, const kt_arg *args, size_t nargs, char *err,
                            size_t errlen) {
    if (flushes_buffers(b)) {
        kt_status st = b->flush_buffers(state, device, args, nargs, err, errlen);
        if (st != KT_ERR_NOT_FOUND) return st;
    }
    return b != NULL && b->abi_version >= 4 && b->flush != NULL ? b->flush(state, device, err, errlen) : KT_OK;
}

double kt__backend_reported_ns(const kt_backend *b, void *state, void *module) {
    double ns = -1;
    if (module != NULL && kt__backend_has(b, KT__BACKEND_REPORTED)) b->reported_ns(state, module, &ns);
    return ns >= 0 ? ns : -1;
}

bool kt__backend_run_failure(const kt_backend *b, void *state, void *module, int rc, char *msg, size_t len) {
    if (module == NULL || rc == 0 || len == 0 || !kt__backend_has(b, KT__BACKEND_RUN_FAILURE)) return false;
    char why[256] = "";
    if (!b->run_failure(state, module, rc, why, sizeof why) || why[0] == '\0') return false;
    why[sizeof why - 1] = '\0';
    snprintf(msg, len, "%s", why);
    return true;
}
