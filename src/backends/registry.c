/*
 * registry.c - the list of built-in backends and the capability accessors.
 */
#include "backends/backends.h"

size_t kt__backends_builtin(const kt_backend *out[KT__BUILTIN_BACKENDS]) {
    out[0] = kt_backend_c();
    out[1] = kt_backend_opencl();
    out[2] = kt_backend_cuda();
    return KT__BUILTIN_BACKENDS;
}

unsigned kt__backend_caps(const kt_backend *b) { return b != NULL && b->abi_version >= 6 ? b->caps : 0; }

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
