/*
 * cuda_check.c - the CUDA backend's checks on the device (ABI 9): a digest of a buffer's bytes
 * and whether an output matches the reference's, so that validating a candidate reads nothing
 * back from the GPU while it passes. Before these, validating one candidate of a GEMM of
 * 8192 x 8192 x 8192 read A, B and C back (384 MB) and hashed and compared them on the host.
 *
 * The kernels are compiled at the first check on a device, by the backend's own build (an
 * NVRTC child process unless KERNTUNE_NVRTC_PROCESSES=0), into a temporary file that is loaded
 * and removed; a device that cannot build them answers with an error, and the core then
 * checks on the host. Where the context gives a directory that lacks their build, a thread
 * begins it there at once (kt__cu_check_prebuild), so that a process's first check, often a
 * second or so later, loads it instead of waiting for NVRTC.
 */
#include "backends/cuda_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The digest is the sum, modulo 2^64, over the buffer's 8-byte chunks k (the last one padded
 * with zeros) of mix(chunk ^ mix(k + golden)): a function of the bytes and their offsets alone,
 * whichever thread or order adds the terms. The closeness test is the core's host rule in IEEE
 * double, compiled with --fmad=false so that no product is fused into an addition. */
static const char check_source[] =
    "typedef unsigned long long u64;\n"
    "static __device__ __forceinline__ u64 kt_mix(u64 z) {\n"
    "    z ^= z >> 33; z *= 0xff51afd7ed558ccdULL; z ^= z >> 33; z *= 0xc4ceb9fe1a85ec53ULL; z ^= z >> 33;\n"
    "    return z;\n"
    "}\n"
    "static __device__ __forceinline__ u64 kt_chunk(const unsigned char *p, u64 bytes, u64 k, bool aligned) {\n"
    "    if (aligned && 8 * k + 8 <= bytes) return ((const u64 *)p)[k];\n"
    "    u64 w = 0;\n"
    "    for (int b = 0; b < 8 && 8 * k + b < bytes; b++) w |= (u64)p[8 * k + b] << (8 * b);\n"
    "    return w;\n"
    "}\n"
    "extern \"C\" __global__ void kt_digest(const unsigned char *p, u64 bytes, u64 *out) {\n"
    "    const bool aligned = ((u64)p & 7) == 0;\n"
    "    u64 acc = 0;\n"
    "    for (u64 k = blockIdx.x * (u64)blockDim.x + threadIdx.x; 8 * k < bytes; k += (u64)gridDim.x * blockDim.x)\n"
    "        acc += kt_mix(kt_chunk(p, bytes, k, aligned) ^ kt_mix(k + 0x9e3779b97f4a7c15ULL));\n"
    "    for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);\n"
    "    if ((threadIdx.x & 31) == 0) atomicAdd(out, acc);\n"
    "}\n"
    "extern \"C\" __global__ void kt_equal(const unsigned char *a, const unsigned char *e, u64 bytes, unsigned *bad) {\n"
    "    const bool aligned = (((u64)a | (u64)e) & 7) == 0;\n"
    "    int b = 0;\n"
    "    for (u64 k = blockIdx.x * (u64)blockDim.x + threadIdx.x; 8 * k < bytes; k += (u64)gridDim.x * blockDim.x)\n"
    "        b |= kt_chunk(a, bytes, k, aligned) != kt_chunk(e, bytes, k, aligned);\n"
    "    if (__any_sync(0xffffffffu, b) && (threadIdx.x & 31) == 0) atomicOr(bad, 1u);\n"
    "}\n"
    "static __device__ __forceinline__ double kt_abs(double x) { return x < 0 ? -x : x; }\n"
    "static __device__ __forceinline__ double kt_val(const float *p, u64 i) { return (double)p[i]; }\n"
    "static __device__ __forceinline__ double kt_val(const double *p, u64 i) { return p[i]; }\n"
    "struct kt_half { unsigned short bits; };\n"
    "struct kt_bf16 { unsigned short bits; };\n"
    "static __device__ __forceinline__ double kt_val(const kt_half *p, u64 i) {\n"
    "    float f;\n"
    "    asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(p[i].bits));\n"
    "    return (double)f;\n"
    "}\n"
    "static __device__ __forceinline__ double kt_val(const kt_bf16 *p, u64 i) {\n"
    "    union { unsigned u; float f; } c;\n"
    "    c.u = (unsigned)p[i].bits << 16;\n"
    "    return (double)c.f;\n"
    "}\n"
    "template <typename T>\n"
    "static __device__ void kt_close(const T *a, const T *e, u64 n, double atol, double rtol, unsigned *bad) {\n"
    "    int b = 0;\n"
    "    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {\n"
    "        const double x = kt_val(a, i), y = kt_val(e, i);\n"
    "        b |= !(kt_abs(x - y) <= atol + rtol * kt_abs(y));\n"
    "    }\n"
    "    if (__any_sync(0xffffffffu, b) && (threadIdx.x & 31) == 0) atomicOr(bad, 1u);\n"
    "}\n"
    "extern \"C\" __global__ void kt_close_f32(const float *a, const float *e, u64 n, double atol, double rtol, unsigned *bad)"
    " { kt_close(a, e, n, atol, rtol, bad); }\n"
    "extern \"C\" __global__ void kt_close_f64(const double *a, const double *e, u64 n, double atol, double rtol, unsigned *bad)"
    " { kt_close(a, e, n, atol, rtol, bad); }\n"
    "extern \"C\" __global__ void kt_close_f16(const kt_half *a, const kt_half *e, u64 n, double atol, double rtol, unsigned *bad)"
    " { kt_close(a, e, n, atol, rtol, bad); }\n"
    "extern \"C\" __global__ void kt_close_bf16(const kt_bf16 *a, const kt_bf16 *e, u64 n, double atol, double rtol, unsigned *bad)"
    " { kt_close(a, e, n, atol, rtol, bad); }\n";

enum { CHECK_BLOCK = 256, CHECK_MAX_GRID = 2048 };

static const char *const close_names[4] = {"kt_close_f32", "kt_close_f64", "kt_close_f16", "kt_close_bf16"};
static const char *const check_options[] = {"--fmad=false"};

/* Where the check kernels' build is kept for d: <check_dir>/cuda-checks-<hash>.cubin, the hash of
 * their source, options and compiler (NVRTC's version, the driver's and the device's
 * architecture), so another toolkit or device never loads it; false when there is no directory. */
static bool check_cache_path(cu_state *s, size_t device, char *out, size_t len) {
    cu_dev *d = &s->devs[device];
    char compiler[256], err[64];
    if (d->check_dir[0] == '\0' || kt__cu_compiler_id(s, device, compiler, sizeof compiler, err, sizeof err) != KT_OK) return false;
    uint64_t h = kt__fnv1a(check_source, sizeof check_source - 1, 0x6b74636865636b31ull);
    h = kt__fnv1a(compiler, strlen(compiler), h);
    for (size_t i = 0; i < sizeof check_options / sizeof *check_options; i++)
        h = kt__fnv1a(check_options[i], strlen(check_options[i]) + 1, h);
    int n = snprintf(out, len, "%s/cuda-checks-%016llx.cubin", d->check_dir, (unsigned long long)h);
    return n > 0 && (size_t)n < len;
}

/* Builds the check kernels into a new file in dir (a temporary name, /tmp when dir is NULL):
 * its path in path; here: NVRTC in this process, whatever KERNTUNE_NVRTC_PROCESSES says. */
static kt_status check_build(cu_state *s, size_t device, const char *dir, bool here, char *path, size_t len, char *log,
                             size_t loglen) {
    const char *tmp = getenv("TMPDIR");
    snprintf(path, len, "%s/kerntune-check-XXXXXX", dir ? dir : tmp && *tmp ? tmp : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0) {
        snprintf(log, loglen, "cannot create a temporary file in %.1000s", dir ? dir : tmp && *tmp ? tmp : "/tmp");
        return KT_ERR_SYSTEM;
    }
    close(fd);
    kt_build_request req = {.source = check_source,
                            .kernel_name = "kt_digest",
                            .options = check_options,
                            .noptions = sizeof check_options / sizeof *check_options,
                            .out_path = path};
    kt_status st = here ? kt__cu_build_here(s, device, &req, log, loglen) : kt__cu_build(s, device, &req, log, loglen);
    if (st != KT_OK) unlink(path);
    return st;
}

typedef struct prebuild {
    cu_state *s;
    size_t device;
    char dir[4096], kept[4200]; /* the directory, and the name check_load looks for there */
} prebuild;

/* The thread of kt__cu_check_prebuild: builds into its directory, then renames the build to the
 * name check_load looks for, so that no process loads half a file. Touches nothing of the
 * device's. */
static void *prebuild_main(void *p) {
    prebuild *a = p;
    char path[4200], log[256], failed[256];
    if (kt__make_dirs(a->dir, true, failed, sizeof failed) == 0 &&
        check_build(a->s, a->device, a->dir, true, path, sizeof path, log, sizeof log) == KT_OK && rename(path, a->kept) != 0)
        unlink(path);
    free(a);
    return NULL;
}

void kt__cu_check_join(cu_state *s, size_t device) {
    cu_dev *d = &s->devs[device];
    if (d->check_prebuilding) pthread_join(d->check_prebuild, NULL);
    d->check_prebuilding = false;
}

void kt__cu_check_prebuild(cu_state *s, size_t device) {
    cu_dev *d = &s->devs[device];
    kt__cu_check_join(s, device);
    if (d->check_mod != NULL || d->check_failed || s->nvrtc == NULL) return;
    prebuild *a = malloc(sizeof *a);
    if (a == NULL) return; /* built at the first check instead */
    if (!check_cache_path(s, device, a->kept, sizeof a->kept) || access(a->kept, R_OK) == 0) {
        free(a);
        return;
    }
    a->s = s, a->device = device;
    snprintf(a->dir, sizeof a->dir, "%s", d->check_dir);
    if (pthread_create(&d->check_prebuild, NULL, prebuild_main, a) == 0) d->check_prebuilding = true;
    else free(a);
}

/* Builds and loads the check kernels for d (under d->check_lock): loaded from the directory the
 * context gave (set_cache_dir) when an earlier process built them there, else built (NVRTC: a
 * few hundred milliseconds, paid once per process before) and kept there for the next. */
static kt_status check_load(cu_state *s, size_t device, char *err, size_t errlen) {
    cu_dev *d = &s->devs[device];
    if (d->check_mod != NULL) return KT_OK;
    kt__cu_check_join(s, device); /* a build begun ahead: then it is there to load */
    if (d->check_failed) {
        snprintf(err, errlen, "%s", d->check_err);
        return KT_ERR_BACKEND;
    }
    char kept[4200], path[4200], log[2048] = "";
    void *mod = NULL;
    kt_status st = KT_ERR_NOT_FOUND;
    bool cached = check_cache_path(s, device, kept, sizeof kept);
    if (cached && access(kept, R_OK) == 0 && kt__cu_load(s, device, kept, "kt_digest", &mod, log, sizeof log) == KT_OK)
        st = KT_OK; /* (a file that does not load is built again and replaced) */
    if (st != KT_OK) {
        char failed[4096];
        bool in_dir = cached && kt__make_dirs(d->check_dir, true, failed, sizeof failed) == 0;
        st = check_build(s, device, in_dir ? d->check_dir : NULL, false, path, sizeof path, log, sizeof log);
        if (st != KT_OK) {
            snprintf(d->check_err, sizeof d->check_err, "building the device checks: %.200s", log);
        } else if ((st = kt__cu_load(s, device, path, "kt_digest", &mod, log, sizeof log)) != KT_OK) {
            snprintf(d->check_err, sizeof d->check_err, "loading the device checks: %.200s", log);
        }
        if (st == KT_OK && in_dir && rename(path, kept) == 0) path[0] = '\0'; /* kept for the next process */
        if (path[0]) unlink(path);
    }
    cu_module *m = mod;
    CUresult rc = 0;
    for (int i = 0; st == KT_OK && rc == 0 && i < 5; i++)
        rc = s->api.ModuleGetFunction(i < 4 ? &d->check_close[i] : &d->check_equal, m->module, i < 4 ? close_names[i] : "kt_equal");
    if (st == KT_OK && rc == 0) rc = s->api.MemAlloc(&d->check_out, 16);
    if (st == KT_OK && rc != 0) st = kt__cu_fail(s, rc, "the device checks", d->check_err, sizeof d->check_err);
    if (st == KT_OK) {
        d->check_digest = m->fn;
        d->check_mod = mod;
    } else if (mod) {
        kt__cu_unload(s, device, mod);
    }
    if (st != KT_OK) {
        d->check_failed = 1; /* once per device: the core checks on the host from then on */
        snprintf(err, errlen, "%s", d->check_err);
    }
    return st;
}

/* Runs fn over work items on the own stream into d->check_out (zeroed first), reads back
 * out_bytes of it into out; under d->check_lock. */
static kt_status check_run(cu_state *s, size_t device, CUfunction fn, void **params, uint64_t work, void *out,
                           size_t out_bytes, char *err, size_t errlen) {
    cu_dev *d = &s->devs[device];
    CUstream own;
    kt_status st = kt__cu_own(s, device, &own, err, errlen);
    if (st != KT_OK) return st;
    uint64_t blocks = (work + CHECK_BLOCK - 1) / CHECK_BLOCK;
    unsigned grid = (unsigned)(blocks < 1 ? 1 : blocks > CHECK_MAX_GRID ? CHECK_MAX_GRID : blocks);
    const char *what = "cuMemsetD8Async (device check)";
    CUresult rc = s->api.MemsetD8Async(d->check_out, 0, 16, own);
    if (rc == 0) {
        what = "cuLaunchKernel (device check)";
        rc = s->api.LaunchKernel(fn, grid, 1, 1, CHECK_BLOCK, 1, 1, 0, own, params, NULL);
    }
    if (rc == 0) {
        what = "cuMemcpyDtoHAsync (device check)";
        rc = s->api.MemcpyDtoHAsync(out, d->check_out, out_bytes, own);
    }
    if (rc == 0) {
        what = "cuStreamSynchronize (device check)";
        rc = s->api.StreamSynchronize(own);
    }
    return rc == 0 ? KT_OK : kt__cu_fail(s, rc, what, err, errlen);
}

/* The digest kernel's sum over bytes of device memory at buffer (0 for none), under the lock. */
static kt_status digest_sum(cu_state *s, size_t device, CUdeviceptr buffer, uint64_t bytes, uint64_t *sum, char *err,
                            size_t errlen) {
    cu_dev *d = &s->devs[device];
    pthread_mutex_lock(&d->check_lock);
    kt_status st = check_load(s, device, err, errlen);
    CUdeviceptr o = d->check_out;
    void *params[] = {&buffer, &bytes, &o};
    *sum = 0;
    if (st == KT_OK && bytes > 0) st = check_run(s, device, d->check_digest, params, (bytes + 7) / 8, sum, sizeof *sum, err, errlen);
    pthread_mutex_unlock(&d->check_lock);
    return st;
}

kt_status kt__cu_read_through(cu_state *s, size_t device, CUdeviceptr buffer, size_t bytes, char *err, size_t errlen) {
    uint64_t sum;
    return digest_sum(s, device, buffer, bytes, &sum, err, errlen);
}

kt_status kt__cu_digest(void *state, size_t device, const void *buffer, size_t bytes, uint64_t *out, char *err,
                        size_t errlen) {
    uint64_t sum;
    kt_status st = digest_sum(state, device, DPTR(buffer), bytes, &sum, err, errlen);
    if (st == KT_OK) *out = sum ^ ((uint64_t)bytes * 0x9e3779b97f4a7c15ull); /* the length counts too */
    return st;
}

kt_status kt__cu_all_close(void *state, size_t device, kt_type elem, const void *actual, const void *expected, size_t count,
                           double atol, double rtol, int *close, char *err, size_t errlen) {
    cu_state *s = state;
    cu_dev *d = &s->devs[device];
    *close = 0;
    const size_t es = kt_type_size(elem);
    const int fi = elem == KT_TYPE_F32 ? 0 : elem == KT_TYPE_F64 ? 1 : elem == KT_TYPE_F16 ? 2 : elem == KT_TYPE_BF16 ? 3 : -1;
    if (es == 0 || (fi >= 0 && (((uintptr_t)actual | (uintptr_t)expected) % es) != 0))
        return KT_OK; /* an element off its alignment: the host compares */
    if (count == 0) {
        *close = 1;
        return KT_OK;
    }
    pthread_mutex_lock(&d->check_lock);
    kt_status st = check_load(s, device, err, errlen);
    unsigned bad = 1;
    CUdeviceptr a = DPTR(actual), e = DPTR(expected), o = d->check_out;
    uint64_t n = fi >= 0 ? count : count * es;
    void *fparams[] = {&a, &e, &n, &atol, &rtol, &o}, *eparams[] = {&a, &e, &n, &o};
    if (st == KT_OK)
        st = fi >= 0 ? check_run(s, device, d->check_close[fi], fparams, n, &bad, sizeof bad, err, errlen)
                     : check_run(s, device, d->check_equal, eparams, (n + 7) / 8, &bad, sizeof bad, err, errlen);
    pthread_mutex_unlock(&d->check_lock);
    if (st == KT_OK) *close = bad == 0;
    return st;
}

void kt__cu_check_free(cu_state *s, size_t device) {
    cu_dev *d = &s->devs[device];
    if (d->check_mod) kt__cu_unload(s, device, d->check_mod);
    if (d->check_out) s->api.MemFree(d->check_out);
    d->check_mod = NULL;
    d->check_out = 0;
}
