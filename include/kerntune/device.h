/*
 * kerntune/device.h - devices, device memory, and running an op's variants on a device.
 *
 * Every context has the host CPU as device 0 (the C backend). Devices of the optional backends
 * (OpenCL, CUDA) follow once they are first asked for. An op's variant groups
 * (kerntune/variants.h) run on the op's device, and its buffer arguments are then that device's
 * memory, which its native candidates receive as it is (to call a vendor library, say).
 */
#ifndef KERNTUNE_DEVICE_H
#define KERNTUNE_DEVICE_H

#include <kerntune.h>

#ifdef __cplusplus
extern "C" {
#endif

/** A device found by a backend; owned by its context. */
typedef struct kt_device kt_device;

/** Returns the number of devices that the context's backends found. Device 0 is always the host
 *  CPU (the C backend); the first call that asks about devices also starts the optional
 *  backends (OpenCL, CUDA), whose devices follow. Safe to call while ops run. */
KT_API size_t kt_context_device_count(kt_context *ctx);

/** Limits the optional backends the context starts to those names lists, separated by commas
 *  ("cuda", "opencl"; "c", the host's, is always started and may be named too); NULL or ""
 *  starts every one (the default). KERNTUNE_BACKENDS, read by kt_context_create, sets the same.
 *  Starting a backend costs time at the first question about devices (OpenCL's loader opens
 *  every platform installed: 0.15-0.75 s on the H200 machine), so a program that runs on one
 *  backend can skip the others. Fails with KT_ERR_INVALID_ARGUMENT, naming the backends there
 *  are, on a name that is none of them, and once the devices were asked for (the backends
 *  started then). A backend left out is not listed by kt_context_unavailable. */
KT_API kt_status kt_context_set_backends(kt_context *ctx, const char *names);

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

/** Evicts what earlier work left in the device's caches, as tuning does before each measured
 *  run (KT_FLUSH_AUTO), and waits for it: so a benchmark can time a call in the state kerntune
 *  tuned it in. The CUDA backend reads a buffer twice as large as the L2 cache, which leaves it
 *  holding clean lines (the next kernel's misses write nothing back); OpenCL writes one as large
 *  as the device's cache. KT_ERR_BACKEND for a device whose backend cannot flush (the host:
 *  kerntune flushes the CPU's caches itself while tuning). */
KT_API kt_status kt_device_flush(kt_context *ctx, size_t device);

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

/** Returns the device's architecture and vendor as its backend classifies it (CUDA: "sm_90",
 *  "NVIDIA"; OpenCL: the device's name and CL_DEVICE_VENDOR; the host: the CPU's model and
 *  vendor_id), "" when its backend does not say. A key nobody tuned on it may take the decision
 *  of a device of the same architecture, then vendor (kt_decision_source). */
KT_API const char *kt_device_architecture(const kt_device *dev);

/** Writes into out (len bytes, cut to fit) the identity of the compiler that builds variants for
 *  device `device` of ctx, as its backend states it (the compiler's version and default
 *  options): the identity that names an op's candidate set in the persistent cache along with
 *  the device's fingerprint. "" for a backend that builds nothing. Returns KT_OK, or
 *  KT_ERR_NULL, KT_ERR_INVALID_ARGUMENT (no such device), or the backend's failure (then out
 *  is ""). A fleet's coordinator takes its workers' compiler identity from this. */
KT_API kt_status kt_device_compiler(kt_context *ctx, size_t device, char *out, size_t len);

/** Writes device `device`'s peak arithmetic rate (GFLOP/s, single precision, an FMA as two) and
 *  memory bandwidth (GB/s) as its backend reads them from the device (CUDA: compute capability,
 *  multiprocessors, clocks, bus width); 0 for what the backend cannot tell. Returns KT_OK, or
 *  KT_ERR_NULL, KT_ERR_INVALID_ARGUMENT (no such device). */
KT_API kt_status kt_device_peaks(kt_context *ctx, size_t device, double *gflops, double *gbs);

/** Writes device `device`'s launch limits as its backend reports them, 0 for one it does not
 *  tell: the most threads (work-items) in one block, the most along each dimension, and the most
 *  shared (local) memory one block may use, in bytes. A configuration past them is rejected
 *  before it is built or launched. Any pointer may be NULL. Returns KT_OK, or KT_ERR_NULL (ctx),
 *  KT_ERR_INVALID_ARGUMENT (no such device). */
KT_API kt_status kt_device_launch_limits(kt_context *ctx, size_t device, int64_t *max_threads, int64_t max_block[3], int64_t *max_shared);
KT_API const char *kt_device_vendor(const kt_device *dev);

/** Runs the op's compiled variants on device index of the context (kt_context_device); the
 *  op's buffer arguments are then that device's buffers. Default: device 0, the host CPU (the
 *  C backend). */
KT_API kt_status kt_op_set_device(kt_op *op, size_t device);

#ifdef __cplusplus
}
#endif

#endif /* KERNTUNE_DEVICE_H */
