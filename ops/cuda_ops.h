/*
 * cuda_ops.h - ready-made CUDA ops built on kerntune's public API, to read and copy:
 *
 *   GEMM (ops/gemm.c): C = A * B, bf16 in, fp32 accumulate, bf16 out, row-major; candidates
 *        of every kind in one choice: cuBLAS's default, cuBLASLt's heuristic top-k algorithms,
 *        and tensor-core tiled kernels compiled with NVRTC over tile sizes, warps and stages: on
 *        Hopper, warpgroup MMAs fed by the tensor-memory accelerator on a persistent grid, and
 *        split-K over clusters (ops/gemm90.cu); elsewhere mma.sync with split-K and stream-K
 *        grids (ops/gemm.cu); and, on request, for products of few rows (M <= 128), a kernel
 *        that streams B from memory into the tensor cores once (ops/gemm_skinny.cu).
 *
 * Nothing here links against CUDA: the driver (libcuda.so.1), cuBLASLt and cuBLAS are opened
 * at run time, like kerntune's own CUDA backend; a machine without cuBLASLt simply has fewer
 * GEMM candidates. Every function returns a kt_status; ktops_last_error says what failed.
 */
#ifndef KERNTUNE_CUDA_OPS_H
#define KERNTUNE_CUDA_OPS_H

#include <kerntune.h>

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** The message of the calling thread's last failed ktops_* call. */
const char *ktops_last_error(void);

/* ---- the driver, opened at run time ----------------------------------------------------------- */

/** The CUDA driver for kerntune device `device` of ctx (a device of the "cuda" backend), with
 *  its primary context (the one kerntune uses) current on the calling thread. */
typedef struct ktops_cuda ktops_cuda;

kt_status ktops_cuda_open(kt_context *ctx, size_t device, ktops_cuda **out);
void ktops_cuda_close(ktops_cuda *cu);

/** Makes the device's primary context current on the calling thread. */
kt_status ktops_cuda_make_current(ktops_cuda *cu);

/** The device's number of multiprocessors, and its compute capability as major * 10 + minor. */
int ktops_cuda_sm_count(const ktops_cuda *cu);
int ktops_cuda_compute_capability(const ktops_cuda *cu);

/** Creates and destroys a stream of the device (for kt_op_call_async). */
kt_status ktops_cuda_stream_create(ktops_cuda *cu, kt_queue *out);
void ktops_cuda_stream_destroy(ktops_cuda *cu, kt_queue stream);

/** Waits for everything queued on stream (NULL: the default stream). */
kt_status ktops_cuda_sync(ktops_cuda *cu, kt_queue stream);

/** Device time of calls repetitions of enqueue(user, stream), in milliseconds per call, between
 *  two events recorded on stream. enqueue returns 0 on success. */
kt_status ktops_cuda_time(ktops_cuda *cu, kt_queue stream, int (*enqueue)(void *user, kt_queue stream), void *user,
                          int calls, double *ms_per_call);

/** As ktops_cuda_time, but each call is timed alone, after the device's L2 cache is flushed
 *  outside the timed region by kerntune's own flush (kt_device_flush: a buffer of twice its
 *  size is read, leaving the cache clean): the state kerntune measures candidates in by default
 *  (KT_FLUSH_AUTO). */
kt_status ktops_cuda_time_cold(ktops_cuda *cu, kt_queue stream, int (*enqueue)(void *user, kt_queue stream), void *user,
                               int calls, double *ms_per_call);

/** Device memory: ktops_cuda_alloc allocates bytes (a CUdeviceptr, as kt_device_alloc gives). */
kt_status ktops_cuda_alloc(ktops_cuda *cu, size_t bytes, void **out);
void ktops_cuda_free(ktops_cuda *cu, void *ptr);

/* ---- GEMM ------------------------------------------------------------------------------------- */

/** Arguments of the GEMM op, in order. */
enum { KTOPS_GEMM_A, KTOPS_GEMM_B, KTOPS_GEMM_C, KTOPS_GEMM_M, KTOPS_GEMM_N, KTOPS_GEMM_K, KTOPS_GEMM_NARGS };

/** ktops_gemm_options.kernels. */
enum {
    KTOPS_GEMM_KERNELS_AUTO = 0,
    KTOPS_GEMM_KERNELS_MMA = 1,
    KTOPS_GEMM_KERNELS_WGMMA = 2,
    KTOPS_GEMM_KERNELS_SKINNY = 4,
    KTOPS_GEMM_KERNELS_ALL = 7
};

typedef struct ktops_gemm_options {
    /** How many of cuBLASLt's heuristic algorithms become candidates ("cublaslt-0" is its own
     *  first pick). 0 means 8. */
    int cublaslt_top_k;
    /** Libraries to open; NULL searches the usual names, "" leaves the library out (as on a
     *  machine without it). */
    const char *cublaslt_path;
    const char *cublas_path;
    /** Leaves out the NVRTC tiled kernels (vendor candidates only), when nonzero. */
    int no_kernels;
    /** Which tiled kernels, a combination of flags: KTOPS_GEMM_KERNELS_AUTO (0: the wgmma groups
     *  on a Hopper GPU whose driver has cuTensorMapEncodeTiled, the mma groups elsewhere), _MMA,
     *  _WGMMA (refused where they cannot run), _SKINNY (ops/gemm_skinny.cu, for M of at most
     *  128: B streamed once from memory into the tensor cores; not in AUTO, because on the H200
     *  cuBLAS streams B faster once K reaches a few thousand, and compiling its configurations
     *  at the first such shape costs more than it saves) or _ALL. */
    int kernels;
    /** Nonzero: tuning runs the NVRTC kernels in a runner process (KT_ISOLATE_AUTO, kerntune's
     *  default for CUDA variants), where a kernel that faults cannot break the caller's CUDA
     *  context. By default they run in the caller's process (KT_ISOLATE_OFF), as cuBLAS's own
     *  kernels do: they are this op's own, each configuration validated on the GPU by
     *  tests/cuda-gemm-check.c, and a runner costs every validation run a copy of A, B and C
     *  through host memory (on the H200, 2.7 s instead of 0.74 s to tune 128 x 8192 x 8192). */
    int isolate;
} ktops_gemm_options;

typedef struct ktops_gemm ktops_gemm;

/** Builds the GEMM op, named name, on cu's device (a kerntune device of ctx). The key is
 *  (M, N, K), each rounded up to a power of two, so shapes of distinct aspect ratio never share
 *  a decision. The reference that validates every candidate is cuBLAS's default (cublasGemmEx)
 *  where cuBLAS is present, else cuBLASLt's first pick, else the first kernel configuration. */
kt_status ktops_gemm_create(ktops_cuda *cu, kt_context *ctx, size_t device, const char *name,
                            const ktops_gemm_options *options, ktops_gemm **out);
void ktops_gemm_destroy(ktops_gemm *g);

/** The op (to query its decisions, candidates, or set measurement options before a call). */
kt_op *ktops_gemm_op(ktops_gemm *g);

/** Enqueues C = A * B on stream (device buffers of M x K, K x N and M x N bf16): the first call
 *  of a new shape bucket tunes. */
kt_status ktops_gemm_run(ktops_gemm *g, kt_queue stream, const void *a, const void *b, void *c, int64_t m, int64_t n, int64_t k);

/** The decision ktops_gemm_run uses for the shape (KT_ERR_NOT_FOUND before it is tuned). */
kt_status ktops_gemm_decision(ktops_gemm *g, const void *a, const void *b, void *c, int64_t m, int64_t n, int64_t k,
                              const kt_decision **out);

/** Enqueues cuBLAS's default GEMM (cublasGemmEx, CUBLAS_GEMM_DEFAULT) directly, as a caller
 *  without kerntune would; KT_ERR_BACKEND without cuBLAS. */
kt_status ktops_gemm_cublas(ktops_gemm *g, kt_queue stream, const void *a, const void *b, void *c, int64_t m, int64_t n,
                            int64_t k);

/** Enqueues cuBLASLt's heuristic algorithm of rank `rank` for the shape directly (rank 0: its
 *  own first pick); KT_ERR_BACKEND without cuBLASLt or when the heuristic offers fewer. */
kt_status ktops_gemm_cublaslt(ktops_gemm *g, kt_queue stream, int rank, const void *a, const void *b, void *c, int64_t m,
                              int64_t n, int64_t k);

/* ---- row sum ---------------------------------------------------------------------------------- */

/** Arguments of the row-sum op, in order: in (rows x cols f32, row-major), out (rows f32). */
enum { KTOPS_ROWSUM_IN, KTOPS_ROWSUM_OUT, KTOPS_ROWSUM_ROWS, KTOPS_ROWSUM_COLS, KTOPS_ROWSUM_NARGS };

typedef struct ktops_rowsum ktops_rowsum;

/** Builds the row-sum op: candidate groups "block-per-row", "persistent" and "split-row" (rows
 *  up to 4096: its module's workspace), each over a small space of block sizes, unrolling,
 *  threads per row, blocks per SM and splits. The key is (rows, cols), each rounded up to a power
 *  of two; each call computes its own grid from its rows. Tuning runs on generated inputs
 *  (multiples of 1/4, whose sums every order computes exactly), never on the caller's buffers,
 *  and validates every configuration against the rows summed on the host, bit for bit: a caller
 *  who makes it tune on its own data instead (kt_op_set_inputs) must set a tolerance for them
 *  (kt_op_set_tolerance). A "split-row" winner keeps per-row counters in its module: two of its
 *  launches must not run at the same time (on two streams), or their counts mix. */
kt_status ktops_rowsum_create(ktops_cuda *cu, kt_context *ctx, size_t device, const char *name, ktops_rowsum **out);

/** What ktops_rowsum_create_with builds; zeroes (or NULL options) build ktops_rowsum_create's op. */
typedef struct ktops_rowsum_options {
    /** Only this implementation becomes a candidate: "block-per-row", "persistent" or
     *  "split-row" (NULL: all three), e.g. to time one on its own. */
    const char *group;
    /** Only this configuration of group, as kt_decision_unit_config writes it
     *  ("BLOCK=256,UNROLL=4"), every parameter given once (NULL: the group's whole space). */
    const char *config;
} ktops_rowsum_options;

kt_status ktops_rowsum_create_with(ktops_cuda *cu, kt_context *ctx, size_t device, const char *name,
                                   const ktops_rowsum_options *options, ktops_rowsum **out);
void ktops_rowsum_destroy(ktops_rowsum *r);
kt_op *ktops_rowsum_op(ktops_rowsum *r);

/** Enqueues out = row sums of in on stream (device buffers of rows x cols and rows floats, on
 *  multiples of 4 bytes; rows from 1 to 2^31 - 1, cols >= 1); the first call of a new shape
 *  bucket tunes. */
kt_status ktops_rowsum_run(ktops_rowsum *r, kt_queue stream, const float *in, float *out, int64_t rows, int64_t cols);

/** The decision ktops_rowsum_run uses for the shape (KT_ERR_NOT_FOUND before it is tuned). */
kt_status ktops_rowsum_decision(ktops_rowsum *r, const float *in, float *out, int64_t rows, int64_t cols,
                                const kt_decision **d);

#ifdef __cplusplus
}
#endif

#endif /* KERNTUNE_CUDA_OPS_H */
