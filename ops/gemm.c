/*
 * gemm.c - the GEMM op: C = A * B, bf16 in, fp32 accumulate, bf16 out, row-major, with
 * candidates of every kind in one choice (see cuda_ops.h):
 *
 *   "cublas"        cuBLAS's default (cublasGemmEx, CUBLAS_GEMM_DEFAULT): the reference;
 *   "cublaslt-i"    the i-th algorithm cuBLASLt's heuristic offers for the call's shape (asked
 *                   once per shape, at tuning time or at the first hit of a new shape in a
 *                   bucket, and remembered); rank 0 is cuBLASLt's own pick;
 *   "mma"           tensor-core tiled kernels (ops/gemm.cu) over tile shape, k-step and pipeline
 *                   depth, compiled by NVRTC: one block per tile of C;
 *   "mma-splitk"    the same kernel with each tile's k-range split among 4 or 8 blocks;
 *   "mma-streamk"   the same kernel on a persistent grid (one or two blocks per SM) that cuts
 *                   the k-steps of all tiles evenly among the blocks (stream-K).
 *   The split and stream-K kernels add partial sums in their module's workspace, which holds
 *   C of up to 2^22 elements: larger products are left to the others (a requirement).
 *   On Hopper (sm_90), instead of the three mma groups (options.kernels says otherwise):
 *   "wgmma"         warpgroup MMAs fed by the tensor-memory accelerator, a producer warpgroup
 *                   and one or two consumers (sharing each tile, or ping-pong: taking whole
 *                   tiles in turns), over tile shapes and pipeline depths, on a persistent grid
 *                   that stores C through the copy engine (ops/gemm90.cu);
 *   "wgmma-splitk"  the same with each tile's k-range split among the 2 to 8 blocks of a
 *                   cluster, which add their partial tiles over distributed shared memory: for
 *                   products with fewer tiles than multiprocessors (skinny M). It has no
 *                   requirement that would keep it from other shapes: the race drops it there
 *                   after a run, and so its variants are built with the others, at the first
 *                   tuning, not at the first skinny shape (where compiling cost about 1 s).
 *   Their tensor maps (A, B and C: the buffers' addresses and sizes, which only the launch
 *   knows) are launch parameters made by cuTensorMapEncodeTiled at each launch
 *   (kt_op_add_launch_param), remembered per thread for the buffers of the last launch.
 *   On request (options.kernels with KTOPS_GEMM_KERNELS_SKINNY), on any GPU:
 *   "skinny"        products of at most SKINNY_MAX_M rows, B streamed from memory into the
 *                   tensor cores through registers once (ops/gemm_skinny.cu).
 *
 * cuBLAS works in column-major order; a row-major C = A * B is the column-major C^T = B^T A^T,
 * so every vendor call swaps the operands and passes (N, M, K).
 */
#include "cuda_ops.h"
#include "cudalib.h"

#include <kerntune/device.h>
#include <kerntune/validation.h>
#include <kerntune/measure.h>
#include <kerntune/variants.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    CUDA_R_16BF = 14,
    CUDA_R_32F = 0,
    CUBLAS_COMPUTE_32F = 68,
    CUBLAS_OP_N = 0,
    CUBLAS_GEMM_DEFAULT = -1,
    CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
    MAX_TOP_K = 32,
    SHAPE_SLOTS = 1024, /* distinct (M, N, K) an op remembers heuristics for */
};

#define LT_WORKSPACE (32u << 20) /* bytes of workspace cuBLASLt's algorithms may use */
#define BLAS_WORKSPACE (32u << 20) /* and cuBLAS's */

typedef struct lt_heuristic { /* cublasLtMatmulHeuristicResult_t */
    uint64_t algo[8];
    size_t workspace;
    int state;
    float waves;
    int reserved[4];
} lt_heuristic;

typedef struct lt_fns {
    void *lib;
    int (*Create)(void **);
    int (*Destroy)(void *);
    size_t (*GetVersion)(void);
    int (*DescCreate)(void **, int, int);
    int (*DescDestroy)(void *);
    int (*LayoutCreate)(void **, int, uint64_t, uint64_t, int64_t);
    int (*LayoutDestroy)(void *);
    int (*PrefCreate)(void **);
    int (*PrefDestroy)(void *);
    int (*PrefSetAttribute)(void *, int, const void *, size_t);
    int (*Heuristic)(void *, void *, void *, void *, void *, void *, void *, int, lt_heuristic *, int *);
    int (*Matmul)(void *, void *, const void *, const void *, void *, const void *, void *, const void *, const void *,
                  void *, void *, void *, const void *, void *, size_t, void *);
} lt_fns;

typedef struct blas_fns {
    void *lib;
    int (*Create)(void **);
    int (*Destroy)(void *);
    int (*SetStream)(void *, void *);
    int (*SetWorkspace)(void *, void *, size_t);
    int (*GemmEx)(void *, int, int, int, int, int, const void *, const void *, int, int, const void *, int, int,
                  const void *, void *, int, int, int, int);
} blas_fns;

/* What cuBLASLt needs for one shape: its layouts and the heuristic's algorithms. */
typedef struct shape {
    int64_t m, n, k; /* m == 0: a free slot */
    void *la, *lb, *lc;
    int count;
    lt_heuristic algos[MAX_TOP_K];
} shape;

typedef struct lt_rank {
    ktops_gemm *g;
    int rank;
} lt_rank;

struct ktops_gemm {
    ktops_cuda *cu;
    kt_context *ctx;
    size_t device;
    kt_op *op;
    int top_k;
    lt_fns lt;
    void *lt_handle, *lt_desc, *lt_pref, *lt_ws;
    blas_fns blas;
    void *blas_handle, *blas_ws;
    pthread_mutex_t blas_lock; /* a cuBLAS handle's stream is per handle */
    pthread_mutex_t shapes_lock;
    shape *shapes;
    lt_rank ranks[MAX_TOP_K];
    char lt_version[32];
};

/* ---- opening the vendor libraries ---------------------------------------------------------- */

static void *open_lib(const char *path, const char *const *names, size_t n) {
    if (path) return *path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    void *h = NULL;
    for (size_t i = 0; h == NULL && i < n; i++) h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    return h;
}

static int open_lt(lt_fns *lt, const char *path) {
    static const char *const names[] = {"libcublasLt.so", "libcublasLt.so.13", "libcublasLt.so.12",
                                        "/usr/local/cuda/lib64/libcublasLt.so"};
    memset(lt, 0, sizeof *lt);
    if ((lt->lib = open_lib(path, names, sizeof names / sizeof names[0])) == NULL) return 0;
    int missing = 0;
    KTOPS__LOAD(lt, Create, "cublasLtCreate");
    KTOPS__LOAD(lt, Destroy, "cublasLtDestroy");
    KTOPS__LOAD(lt, GetVersion, "cublasLtGetVersion");
    KTOPS__LOAD(lt, DescCreate, "cublasLtMatmulDescCreate");
    KTOPS__LOAD(lt, DescDestroy, "cublasLtMatmulDescDestroy");
    KTOPS__LOAD(lt, LayoutCreate, "cublasLtMatrixLayoutCreate");
    KTOPS__LOAD(lt, LayoutDestroy, "cublasLtMatrixLayoutDestroy");
    KTOPS__LOAD(lt, PrefCreate, "cublasLtMatmulPreferenceCreate");
    KTOPS__LOAD(lt, PrefDestroy, "cublasLtMatmulPreferenceDestroy");
    KTOPS__LOAD(lt, PrefSetAttribute, "cublasLtMatmulPreferenceSetAttribute");
    KTOPS__LOAD(lt, Heuristic, "cublasLtMatmulAlgoGetHeuristic");
    KTOPS__LOAD(lt, Matmul, "cublasLtMatmul");
    if (missing) dlclose(lt->lib), lt->lib = NULL;
    return lt->lib != NULL;
}

static int open_blas(blas_fns *b, const char *path) {
    static const char *const names[] = {"libcublas.so", "libcublas.so.13", "libcublas.so.12",
                                        "/usr/local/cuda/lib64/libcublas.so"};
    memset(b, 0, sizeof *b);
    if ((b->lib = open_lib(path, names, sizeof names / sizeof names[0])) == NULL) return 0;
    int missing = 0;
    KTOPS__LOAD(b, Create, "cublasCreate_v2");
    KTOPS__LOAD(b, Destroy, "cublasDestroy_v2");
    KTOPS__LOAD(b, SetStream, "cublasSetStream_v2");
    KTOPS__LOAD(b, SetWorkspace, "cublasSetWorkspace_v2");
    KTOPS__LOAD(b, GemmEx, "cublasGemmEx");
    if (missing) dlclose(b->lib), b->lib = NULL;
    return b->lib != NULL;
}

/* ---- cuBLASLt: a shape's heuristic, asked once ------------------------------------------------- */

static const shape *shape_of(ktops_gemm *g, int64_t m, int64_t n, int64_t k) {
    uint64_t h = ((uint64_t)m * 0x9E3779B97F4A7C15u) ^ ((uint64_t)n * 0xC2B2AE3D27D4EB4Fu) ^ ((uint64_t)k * 0x165667B19E3779F9u);
    pthread_mutex_lock(&g->shapes_lock);
    shape *found = NULL;
    for (size_t probe = 0; probe < SHAPE_SLOTS && found == NULL; probe++) {
        shape *s = &g->shapes[(h + probe) % SHAPE_SLOTS];
        if (s->m == m && s->n == n && s->k == k) found = s;
        else if (s->m == 0) { /* new: the column-major problem is (N x K) * (K x M) = N x M */
            int ok = g->lt.LayoutCreate(&s->la, CUDA_R_16BF, (uint64_t)n, (uint64_t)k, n) == 0 &&
                     g->lt.LayoutCreate(&s->lb, CUDA_R_16BF, (uint64_t)k, (uint64_t)m, k) == 0 &&
                     g->lt.LayoutCreate(&s->lc, CUDA_R_16BF, (uint64_t)n, (uint64_t)m, n) == 0 &&
                     g->lt.Heuristic(g->lt_handle, g->lt_desc, s->la, s->lb, s->lc, s->lc, g->lt_pref, g->top_k, s->algos,
                                     &s->count) == 0 &&
                     s->count > 0;
            if (!ok) {
                if (s->la) g->lt.LayoutDestroy(s->la);
                if (s->lb) g->lt.LayoutDestroy(s->lb);
                if (s->lc) g->lt.LayoutDestroy(s->lc);
                memset(s, 0, sizeof *s);
                break;
            }
            s->m = m, s->n = n, s->k = k;
            found = s;
        }
    }
    pthread_mutex_unlock(&g->shapes_lock);
    return found;
}

static int lt_enqueue(ktops_gemm *g, int rank, const void *a, const void *b, void *c, int64_t m, int64_t n, int64_t k,
                      void *stream) {
    const shape *s = shape_of(g, m, n, k);
    if (s == NULL) return 1;
    const lt_heuristic *h = &s->algos[rank < s->count ? rank : s->count - 1];
    const float one = 1.0f, zero = 0.0f;
    return g->lt.Matmul(g->lt_handle, g->lt_desc, &one, b, s->la, a, s->lb, &zero, c, s->lc, c, s->lc, h->algo, g->lt_ws,
                        LT_WORKSPACE, stream);
}

static int lt_candidate(const kt_arg *args, size_t nargs, kt_queue queue, void *user) {
    const lt_rank *r = user;
    (void)nargs;
    return lt_enqueue(r->g, r->rank, args[KTOPS_GEMM_A].ptr, args[KTOPS_GEMM_B].ptr, args[KTOPS_GEMM_C].ptr,
                      args[KTOPS_GEMM_M].i, args[KTOPS_GEMM_N].i, args[KTOPS_GEMM_K].i, queue);
}

static int blas_enqueue(ktops_gemm *g, const void *a, const void *b, void *c, int64_t m, int64_t n, int64_t k, void *stream) {
    const float one = 1.0f, zero = 0.0f;
    if (m > 0x7fffffff || n > 0x7fffffff || k > 0x7fffffff) return 1;
    pthread_mutex_lock(&g->blas_lock);
    int rc = g->blas.SetStream(g->blas_handle, stream);
    /* setting the stream puts cuBLAS back on its default workspace pool; its own buffer instead,
     * so that no call allocates on the stream it is timed on */
    if (rc == 0) rc = g->blas.SetWorkspace(g->blas_handle, g->blas_ws, BLAS_WORKSPACE);
    if (rc == 0)
        rc = g->blas.GemmEx(g->blas_handle, CUBLAS_OP_N, CUBLAS_OP_N, (int)n, (int)m, (int)k, &one, b, CUDA_R_16BF, (int)n, a,
                            CUDA_R_16BF, (int)k, &zero, c, CUDA_R_16BF, (int)n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    pthread_mutex_unlock(&g->blas_lock);
    return rc;
}

static int blas_candidate(const kt_arg *args, size_t nargs, kt_queue queue, void *user) {
    (void)nargs;
    return blas_enqueue(user, args[KTOPS_GEMM_A].ptr, args[KTOPS_GEMM_B].ptr, args[KTOPS_GEMM_C].ptr, args[KTOPS_GEMM_M].i,
                        args[KTOPS_GEMM_N].i, args[KTOPS_GEMM_K].i, queue);
}

/* ---- the tiled kernels' spaces --------------------------------------------------------------- */

/* Tile shapes (BM, BN, warps along M, warps along N): every warp computes a 64 x 64, 64 x 32,
 * 32 x 32 or 16 x 32 piece. The first three are for large C; the rest, with split-K, for small
 * or skinny C; the last two (16 rows: one mma row) only with split-K, for M of 16 or so, where B
 * is streamed once and the product is bound by memory. */
#define TILES                                                                                                        \
    "[[128, 256, 2, 4], [128, 128, 2, 4], [128, 128, 2, 2], [64, 128, 2, 2], [64, 64, 2, 2], [32, 128, 1, 4], [32, 64, 1, 2], " \
    "[16, 64, 1, 2], [16, 128, 1, 4]]"

/* Whether a split launch fits its module's workspace (ops/gemm.cu WS_FLOATS, WS_TILES): C's
 * entries, and its tiles of the smallest tile shape (16 x 64). */
static int ws_fits(const kt_arg *args, size_t nargs, void *user) {
    int64_t m = args[KTOPS_GEMM_M].i, n = args[KTOPS_GEMM_N].i;
    (void)nargs, (void)user;
    return m * n <= (1 << 22) && ((m + 15) / 16) * ((n + 63) / 64) <= (1 << 16);
}

static kt_status gemm90_space(int kind, int sms, kt_space **out);
static kt_status skinny_space(int cc, kt_space **out);

kt_status ktops__gemm_space(int kind, int sms, int cc, kt_space **out) {
    if (kind == KTOPS__SKINNY) return skinny_space(cc, out);
    if (kind >= KTOPS__WGMMA) return gemm90_space(kind, sms, out);
    kt_space *sp = NULL;
    kt_status st = kt_space_create(&sp);
    const char *inputs[] = {"M", "N", "K", "SMS"};
    for (size_t i = 0; st == KT_OK && i < 4; i++) st = kt_space_add_input(sp, inputs[i]);
    if (st == KT_OK) st = kt_space_add_param(sp, "TILE", kind == KTOPS__DATA_PARALLEL ? "range(7)" : kind == KTOPS__SPLIT_K ? "[3, 4, 5, 6, 7, 8]" : "[1, 3, 5]");
    if (st == KT_OK) st = kt_space_add_param(sp, "BK", kind == KTOPS__STREAM_K ? "[64]" : "[32, 64]");
    if (st == KT_OK && kind == KTOPS__SPLIT_K) st = kt_space_add_param(sp, "SPLIT", "[4, 8, 16]");
    /* 16 splits with the smaller tiles and a 64-deep k-step; the 16-row tiles with 8 or 16 (22) */
    if (st == KT_OK && kind == KTOPS__SPLIT_K)
        st = kt_space_add_constraint(sp, "(TILE <= 6 or (BK == 64 and SPLIT >= 8)) and (SPLIT <= 8 or (BK == 64 and TILE >= 5))");
    if (st == KT_OK && kind == KTOPS__STREAM_K) st = kt_space_add_param(sp, "PER_SM", "[1, 2]");
    /* the large tiles take a 32-deep k-step */
    if (st == KT_OK && kind == KTOPS__DATA_PARALLEL) st = kt_space_add_constraint(sp, "TILE >= 3 or BK == 32");
    static const char *const derived[][2] = {
        {"BM", TILES "[TILE][0]"}, {"BN", TILES "[TILE][1]"}, {"WM", TILES "[TILE][2]"}, {"WN", TILES "[TILE][3]"},
        {"STAGES", "4 if TILE >= 3 else 3"},
    };
    for (size_t i = 0; st == KT_OK && i < sizeof derived / sizeof derived[0]; i++)
        st = kt_space_add_derived(sp, derived[i][0], derived[i][1]);
    if (st == KT_OK) st = kt_space_bind_int(sp, "SMS", sms);
    const char *grid[3] = {kind == KTOPS__DATA_PARALLEL ? "((M + BM - 1) // BM) * ((N + BN - 1) // BN)"
                           : kind == KTOPS__SPLIT_K     ? "((M + BM - 1) // BM) * ((N + BN - 1) // BN) * SPLIT"
                                                        : "min(SMS * PER_SM, ((M + BM - 1) // BM) * ((N + BN - 1) // BN) * ((K + BK - 1) // BK))",
                           NULL, NULL};
    const char *block[3] = {"WM * WN * 32", NULL, NULL};
    if (st == KT_OK)
        st = kt_space_set_geometry(sp, KT_GEOMETRY_GRID, grid, block, "STAGES * (BM * (BK + 8) + BK * (BN + 8)) * 2");
    if (st != KT_OK) kt_space_destroy(sp), sp = NULL;
    *out = sp;
    return st;
}

/* The wgmma tile shapes (BM, BN, consumer warpgroups, pipeline stages, ping-pong): the
 * persistent group's, and the split-K group's, each fitting the 227 KB of shared memory a block
 * may have with its stages (STAGES * (BM + BN) * 128 bytes) and C's tile (BM * BN * 2; a
 * ping-pong block has two, one per consumer) or its fp32 partial tile. The ping-pong tiles are
 * for products whose tiles have few k-steps (K of a few hundred), where a cooperative block's
 * tensor cores wait for every tile's epilogue. */
#define TILES90                                                                                                       \
    "[[128, 256, 2, 3, 0], [128, 128, 2, 5, 0], [256, 128, 2, 3, 0], [64, 256, 1, 4, 0], [64, 128, 1, 8, 0], "        \
    "[128, 64, 2, 8, 0], [128, 128, 2, 5, 1], [64, 256, 2, 4, 1], [64, 128, 2, 8, 1]]"
#define SPLIT90 "[[64, 128, 1, 8, 0], [64, 256, 1, 5, 0], [64, 64, 1, 8, 0], [128, 64, 2, 8, 0]]"

static kt_status gemm90_space(int kind, int sms, kt_space **out) {
    kt_space *sp = NULL;
    kt_status st = kt_space_create(&sp);
    const char *inputs[] = {"M", "N", "K", "SMS"};
    for (size_t i = 0; st == KT_OK && i < 4; i++) st = kt_space_add_input(sp, inputs[i]);
    const int split = kind == KTOPS__WGMMA_SPLIT_K;
    if (st == KT_OK) st = kt_space_add_param(sp, "TILE", split ? "range(4)" : "range(9)");
    if (st == KT_OK) st = kt_space_add_param(sp, "KS", split ? "[2, 4, 8]" : "[1]");
    /* eight blocks split a 128-row tile into 16-row slices: no better than four */
    if (st == KT_OK && split) st = kt_space_add_constraint(sp, "TILE < 3 or KS < 8");
    static const char *const names[5] = {"BM", "BN", "WGS", "STAGES", "PP"};
    for (int i = 0; st == KT_OK && i < 5; i++) {
        char expr[512];
        snprintf(expr, sizeof expr, "%s[TILE][%d]", split ? SPLIT90 : TILES90, i);
        st = kt_space_add_derived(sp, names[i], expr);
    }
    if (st == KT_OK) st = kt_space_bind_int(sp, "SMS", sms);
    const char *grid[3] = {split ? "((M + BM - 1) // BM) * ((N + BN - 1) // BN) * KS"
                                 : "min(SMS, ((M + BM - 1) // BM) * ((N + BN - 1) // BN))",
                           NULL, NULL};
    const char *block[3] = {"(WGS + 1) * 128", NULL, NULL};
    if (st == KT_OK)
        st = kt_space_set_geometry(sp, KT_GEOMETRY_GRID, grid, block,
                                   split ? "max(STAGES * (BM + BN) * 128, BM * (BN + 4) * 4) + 1024"
                                         : "STAGES * (BM + BN) * 128 + 1024 + BM * BN * 2 * (PP + 1)");
    if (st != KT_OK) kt_space_destroy(sp), sp = NULL;
    *out = sp;
    return st;
}

/* The skinny kernel's space (ops/gemm_skinny.cu), for M of at most SKINNY_MAX_M: the m8 tiles
 * of a block (MT) follow from M, so that one block computes every row; the rest is tuned. The
 * register estimate (accumulators, the loads of UNROLL steps in flight and about 30 for
 * addresses) must fit what WARPS warps may have, so that no configuration spills. Clusters
 * (SPLIT > 1) need sm_90. */
#define SKINNY_MAX_M 128

static kt_status skinny_space(int cc, kt_space **out) {
    kt_space *sp = NULL;
    kt_status st = kt_space_create(&sp);
    const char *inputs[] = {"M", "N", "K"};
    for (size_t i = 0; st == KT_OK && i < 3; i++) st = kt_space_add_input(sp, inputs[i]);
    if (st == KT_OK) st = kt_space_add_param(sp, "VEC", "[4, 8]");
    if (st == KT_OK) st = kt_space_add_param(sp, "MT", "[2, 4, 8]");
    if (st == KT_OK) st = kt_space_add_param(sp, "WARPS", "[4, 8, 16]");
    if (st == KT_OK) st = kt_space_add_param(sp, "UNROLL", "[2, 4]");
    if (st == KT_OK) st = kt_space_add_param(sp, "SPLIT", cc >= 90 ? "[1, 2, 4]" : "[1]");
    if (st == KT_OK) st = kt_space_add_constraint(sp, "(MT == 2 and M <= 16) or (MT == 4 and M > 16 and M <= 32) or (MT == 8 and M > 32)");
    if (st == KT_OK)
        st = kt_space_add_constraint(sp, "2 * MT * VEC + UNROLL * (2 * VEC + 2 * MT) + 30 <= min(255, 2048 // WARPS)");
    const char *grid[3] = {"((N + 8 * VEC - 1) // (8 * VEC)) * ((M + 8 * MT - 1) // (8 * MT)) * SPLIT", NULL, NULL};
    const char *block[3] = {"WARPS * 32", NULL, NULL};
    if (st == KT_OK) st = kt_space_set_geometry(sp, KT_GEOMETRY_GRID, grid, block, "max(WARPS // 2, 1) * MT * VEC * 256");
    if (st != KT_OK) kt_space_destroy(sp), sp = NULL;
    *out = sp;
    return st;
}

/* The skinny kernel streams B once per block of rows: M of at most SKINNY_MAX_M. */
static int skinny_fits(const kt_arg *args, size_t nargs, void *user) {
    (void)nargs, (void)user;
    return args[KTOPS_GEMM_M].i <= SKINNY_MAX_M;
}

/* ---- the wgmma kernels' tensor maps: launch parameters ------------------------------------- */

enum { TMAP_A, TMAP_B, TMAP_C, TMAP_BYTES = 128 };

/* The last map this thread made of each kind: the same buffer and sizes make the same bytes. */
typedef struct tmap_memo {
    const void *ptr;
    int64_t inner, outer;
    _Alignas(64) unsigned char map[TMAP_BYTES];
} tmap_memo;
static _Thread_local tmap_memo memo[3];

/* A bf16 row-major matrix of outer rows of inner elements, in boxes of 64 x 64 with the 128-byte
 * swizzle (what ops/gemm90.cu's loads and stores expect), elements past its edges read as zero. */
static int tensor_map(const ktops_gemm *g, int which, const void *ptr, int64_t inner, int64_t outer, void *out) {
    tmap_memo *m = &memo[which];
    if (m->ptr == ptr && m->inner == inner && m->outer == outer && ptr != NULL) {
        memcpy(out, m->map, TMAP_BYTES);
        return 0;
    }
    const unsigned long long dims[2] = {(unsigned long long)inner, (unsigned long long)outer},
                             strides[1] = {(unsigned long long)inner * 2};
    const unsigned box[2] = {64, 64}, elem_strides[2] = {1, 1};
    int rc = g->cu->TensorMapEncodeTiled(out, 9 /* CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 */, 2, (void *)ptr, dims, strides, box,
                                         elem_strides, 0 /* INTERLEAVE_NONE */, 3 /* SWIZZLE_128B */, 3 /* L2_PROMOTION_L2_256B */,
                                         0 /* FLOAT_OOB_FILL_NONE: zeros */);
    if (rc == 0) {
        memcpy(m->map, out, TMAP_BYTES);
        m->ptr = ptr, m->inner = inner, m->outer = outer;
    }
    return rc;
}

static int tmap_a(const kt_arg *args, size_t nargs, void *out, void *user) {
    (void)nargs;
    return tensor_map(user, TMAP_A, args[KTOPS_GEMM_A].ptr, args[KTOPS_GEMM_K].i, args[KTOPS_GEMM_M].i, out);
}

static int tmap_b(const kt_arg *args, size_t nargs, void *out, void *user) {
    (void)nargs;
    return tensor_map(user, TMAP_B, args[KTOPS_GEMM_B].ptr, args[KTOPS_GEMM_N].i, args[KTOPS_GEMM_K].i, out);
}

static int tmap_c(const kt_arg *args, size_t nargs, void *out, void *user) {
    (void)nargs;
    return tensor_map(user, TMAP_C, args[KTOPS_GEMM_C].ptr, args[KTOPS_GEMM_N].i, args[KTOPS_GEMM_M].i, out);
}

static kt_status add_kernels(ktops_gemm *g, int kind) {
    static const char *const names[] = {"mma", "mma-splitk", "mma-streamk", "wgmma", "wgmma-splitk", "skinny"};
    static const char *const sm90a[] = {"-arch=sm_90a"}; /* wgmma and setmaxnreg: NVRTC takes the "a" target over sm_90 */
    const char *name = names[kind];
    const int wgmma = kind == KTOPS__WGMMA || kind == KTOPS__WGMMA_SPLIT_K;
    kt_space *sp = NULL;
    kt_status st = ktops__gemm_space(kind, ktops_cuda_sm_count(g->cu), ktops_cuda_compute_capability(g->cu), &sp);
    if (st == KT_OK)
        st = wgmma                    ? kt_op_add_variants(g->op, name, sp, ktops_gemm90_cu, "gemm90", sm90a, 1)
             : kind == KTOPS__SKINNY ? kt_op_add_variants(g->op, name, sp, ktops_gemm_skinny_cu, "gemm_skinny", NULL, 0)
                                     : kt_op_add_variants(g->op, name, sp, ktops_gemm_cu, "gemm", NULL, 0);
    kt_space_destroy(sp);
    if (st == KT_OK && wgmma) st = kt_op_add_launch_param(g->op, name, TMAP_BYTES, tmap_a, g);
    if (st == KT_OK && wgmma) st = kt_op_add_launch_param(g->op, name, TMAP_BYTES, tmap_b, g);
    if (st == KT_OK && wgmma) st = kt_op_add_launch_param(g->op, name, TMAP_BYTES, tmap_c, g);
    /* 16-byte copies of rows of A and B: K and N multiples of 8, buffers 16-byte aligned */
    if (st == KT_OK) st = kt_op_require_multiple(g->op, name, KTOPS_GEMM_K, 8);
    if (st == KT_OK) st = kt_op_require_multiple(g->op, name, KTOPS_GEMM_N, 8);
    for (size_t arg = KTOPS_GEMM_A; st == KT_OK && arg <= KTOPS_GEMM_C; arg++) st = kt_op_require_align(g->op, name, arg, 16);
    if (st == KT_OK && (kind == KTOPS__SPLIT_K || kind == KTOPS__STREAM_K)) st = kt_op_require_fn(g->op, name, ws_fits, NULL);
    if (st == KT_OK && kind == KTOPS__SKINNY) st = kt_op_require_fn(g->op, name, skinny_fits, NULL);
    return st != KT_OK ? ktops__fail(st, "ktops_gemm_create: the %s kernels: %s", name, kt_last_error()) : KT_OK;
}

/* ---- the op ------------------------------------------------------------------------------------ */

kt_status ktops_gemm_create(ktops_cuda *cu, kt_context *ctx, size_t device, const char *name,
                            const ktops_gemm_options *options, ktops_gemm **out) {
    if (cu == NULL || ctx == NULL || name == NULL || out == NULL)
        return ktops__fail(KT_ERR_NULL, "ktops_gemm_create: cu, ctx, name and out must not be NULL");
    *out = NULL;
    ktops_gemm_options opt = options ? *options : (ktops_gemm_options){0};
    if (opt.kernels < KTOPS_GEMM_KERNELS_AUTO || opt.kernels > KTOPS_GEMM_KERNELS_ALL)
        return ktops__fail(KT_ERR_INVALID_ARGUMENT, "ktops_gemm_create: kernels %d is not a KTOPS_GEMM_KERNELS_* value",
                           opt.kernels);
    if (opt.cublaslt_top_k < 0 || opt.cublaslt_top_k > MAX_TOP_K)
        return ktops__fail(KT_ERR_INVALID_ARGUMENT, "ktops_gemm_create: cublaslt_top_k %d is outside 0..%d",
                           opt.cublaslt_top_k, MAX_TOP_K);
    ktops_gemm *g = calloc(1, sizeof *g);
    if (g == NULL || (g->shapes = calloc(SHAPE_SLOTS, sizeof *g->shapes)) == NULL) {
        free(g);
        return ktops__fail(KT_ERR_NO_MEMORY, "ktops_gemm_create: out of memory");
    }
    g->cu = cu, g->ctx = ctx, g->device = device, g->top_k = opt.cublaslt_top_k ? opt.cublaslt_top_k : 8;
    pthread_mutex_init(&g->blas_lock, NULL);
    pthread_mutex_init(&g->shapes_lock, NULL);
    kt_status st = ktops_cuda_make_current(cu);

    /* the vendor libraries, where present (their handles need the device's context current) */
    if (st == KT_OK && open_lt(&g->lt, opt.cublaslt_path)) {
        uint64_t wsb = LT_WORKSPACE;
        if (g->lt.Create(&g->lt_handle) != 0 || g->lt.DescCreate(&g->lt_desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) != 0 ||
            g->lt.PrefCreate(&g->lt_pref) != 0 ||
            g->lt.PrefSetAttribute(g->lt_pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb) != 0)
            st = ktops__fail(KT_ERR_BACKEND, "ktops_gemm_create: cuBLASLt is present but its handle could not be set up");
        if (st == KT_OK) st = ktops_cuda_alloc(cu, LT_WORKSPACE, &g->lt_ws);
        snprintf(g->lt_version, sizeof g->lt_version, "cublasLt %zu", g->lt.GetVersion());
    }
    if (st == KT_OK && open_blas(&g->blas, opt.cublas_path) && g->blas.Create(&g->blas_handle) != 0)
        st = ktops__fail(KT_ERR_BACKEND, "ktops_gemm_create: cuBLAS is present but cublasCreate failed");
    if (st == KT_OK && g->blas_handle) st = ktops_cuda_alloc(cu, BLAS_WORKSPACE, &g->blas_ws);

    /* the op: arguments, key, candidates */
    if (st == KT_OK && (st = kt_op_create(ctx, name, &g->op)) != KT_OK)
        st = ktops__fail(st, "ktops_gemm_create: %s", kt_last_error());
    if (st == KT_OK) {
        kt_op *op = g->op;
        int ok = kt_op_set_device(op, device) == KT_OK && kt_op_add_buffer(op, "A", KT_TYPE_BF16, KT_READ_ONLY) == KT_OK &&
                 kt_op_add_buffer(op, "B", KT_TYPE_BF16, KT_READ_ONLY) == KT_OK &&
                 kt_op_add_buffer(op, "C", KT_TYPE_BF16, KT_WRITE_ONLY) == KT_OK &&
                 kt_op_add_scalar(op, "M", KT_TYPE_I64) == KT_OK && kt_op_add_scalar(op, "N", KT_TYPE_I64) == KT_OK &&
                 kt_op_add_scalar(op, "K", KT_TYPE_I64) == KT_OK;
        /* the key: each dimension rounded up to a power of two, so (16, 4096, 4096) and
         * (64, 4096, 4096), or (4096, 4096, 128) and (4096, 4096, 4096), never share a decision */
        for (size_t a = KTOPS_GEMM_M; ok && a <= KTOPS_GEMM_K; a++) ok = kt_op_key_arg(op, a, KT_BUCKET_POW2) == KT_OK;
        /* the kernels are the op's own and tested: in this process, unless asked (the header says why) */
        ok = ok && kt_op_set_isolation(op, opt.isolate ? KT_ISOLATE_AUTO : KT_ISOLATE_OFF) == KT_OK;
        if (ok && g->blas_handle)
            ok = kt_op_add_native_queued(op, "cublas", blas_candidate, g) == KT_OK &&
                 kt_op_set_candidate_version(op, "cublas", g->lt_version[0] ? g->lt_version : "cublas") == KT_OK;
        for (int r = 0; ok && g->lt_handle && r < g->top_k; r++) {
            char cname[32];
            snprintf(cname, sizeof cname, "cublaslt-%d", r);
            g->ranks[r] = (lt_rank){g, r};
            ok = kt_op_add_native_queued(op, cname, lt_candidate, &g->ranks[r]) == KT_OK &&
                 kt_op_set_candidate_version(op, cname, g->lt_version) == KT_OK;
        }
        if (!ok) st = ktops__fail(KT_ERR_STATE, "ktops_gemm_create: building op %s: %s", name, kt_last_error());
    }
    /* the tiled kernels: wgmma where it runs (Hopper, and a driver that makes tensor maps), mma elsewhere */
    const int hopper = ktops_cuda_compute_capability(cu) == 90 && cu->TensorMapEncodeTiled != NULL;
    const int kernels = opt.kernels == KTOPS_GEMM_KERNELS_AUTO ? (hopper ? KTOPS_GEMM_KERNELS_WGMMA : KTOPS_GEMM_KERNELS_MMA)
                                                                 : opt.kernels;
    if (st == KT_OK && (kernels & KTOPS_GEMM_KERNELS_WGMMA) && !hopper && !opt.no_kernels)
        st = ktops__fail(KT_ERR_INVALID_ARGUMENT,
                         "ktops_gemm_create: the wgmma kernels need a Hopper GPU (compute capability 9.0; this one has %d) "
                         "and a driver with cuTensorMapEncodeTiled", ktops_cuda_compute_capability(cu));
    for (int kind = KTOPS__DATA_PARALLEL; st == KT_OK && !opt.no_kernels && kind <= KTOPS__SKINNY; kind++)
        if (kernels & (kind == KTOPS__SKINNY ? KTOPS_GEMM_KERNELS_SKINNY
                       : kind >= KTOPS__WGMMA ? KTOPS_GEMM_KERNELS_WGMMA
                                              : KTOPS_GEMM_KERNELS_MMA))
            st = add_kernels(g, kind);
    if (st == KT_OK && kt_op_candidate_count(g->op) == 0)
        st = ktops__fail(KT_ERR_NO_CANDIDATES, "ktops_gemm_create: no candidates: no cuBLAS, no cuBLASLt and no kernels");
    if (st == KT_OK) { /* the reference: cuBLAS's default, else cuBLASLt's own pick, else the first kernel */
        const char *ref = g->blas_handle ? "cublas" : g->lt_handle ? "cublaslt-0" : NULL;
        if (ref && (st = kt_op_set_reference(g->op, ref)) == KT_OK) st = kt_op_set_default(g->op, ref);
        if (st != KT_OK) st = ktops__fail(st, "ktops_gemm_create: reference %s: %s", ref, kt_last_error());
    }
    if (st != KT_OK) {
        ktops_gemm_destroy(g);
        return st;
    }
    *out = g;
    return KT_OK;
}

void ktops_gemm_destroy(ktops_gemm *g) {
    if (g == NULL) return;
    if (g->op) kt_op_destroy(g->op);
    if (g->shapes && g->lt.lib)
        for (size_t i = 0; i < SHAPE_SLOTS; i++)
            if (g->shapes[i].m) {
                g->lt.LayoutDestroy(g->shapes[i].la);
                g->lt.LayoutDestroy(g->shapes[i].lb);
                g->lt.LayoutDestroy(g->shapes[i].lc);
            }
    if (g->lt_pref) g->lt.PrefDestroy(g->lt_pref);
    if (g->lt_desc) g->lt.DescDestroy(g->lt_desc);
    if (g->lt_handle) g->lt.Destroy(g->lt_handle);
    if (g->blas_handle) g->blas.Destroy(g->blas_handle);
    ktops_cuda_free(g->cu, g->lt_ws);
    ktops_cuda_free(g->cu, g->blas_ws);
    if (g->lt.lib) dlclose(g->lt.lib);
    if (g->blas.lib) dlclose(g->blas.lib);
    pthread_mutex_destroy(&g->blas_lock);
    pthread_mutex_destroy(&g->shapes_lock);
    free(g->shapes);
    free(g);
}

kt_op *ktops_gemm_op(ktops_gemm *g) { return g ? g->op : NULL; }

/* The op's arguments for a product, with the workspace it needs. */
static kt_status gemm_args(ktops_gemm *g, const char *fn, const void *a, const void *b, void *c, int64_t m, int64_t n,
                           int64_t k, kt_arg args[KTOPS_GEMM_NARGS]) {
    if (g == NULL || a == NULL || b == NULL || c == NULL)
        return ktops__fail(KT_ERR_NULL, "%s: the op and the matrices must not be NULL", fn);
    if (m <= 0 || n <= 0 || k <= 0 || m > (1 << 30) || n > (1 << 30) || k > (1 << 30))
        return ktops__fail(KT_ERR_INVALID_ARGUMENT, "%s: M, N, K = %lld, %lld, %lld: each must be in 1..2^30", fn,
                           (long long)m, (long long)n, (long long)k);
    args[KTOPS_GEMM_A] = kt_arg_buf((void *)a, (size_t)(m * k) * 2);
    args[KTOPS_GEMM_B] = kt_arg_buf((void *)b, (size_t)(k * n) * 2);
    args[KTOPS_GEMM_C] = kt_arg_buf(c, (size_t)(m * n) * 2);
    args[KTOPS_GEMM_M] = kt_arg_i64(m);
    args[KTOPS_GEMM_N] = kt_arg_i64(n);
    args[KTOPS_GEMM_K] = kt_arg_i64(k);
    return KT_OK;
}

kt_status ktops_gemm_run(ktops_gemm *g, kt_queue stream, const void *a, const void *b, void *c, int64_t m, int64_t n, int64_t k) {
    kt_arg args[KTOPS_GEMM_NARGS];
    kt_status st = gemm_args(g, "ktops_gemm_run", a, b, c, m, n, k, args);
    if (st == KT_OK && (st = kt_op_call_async(g->op, stream, args, KTOPS_GEMM_NARGS)) != KT_OK)
        st = ktops__fail(st, "ktops_gemm_run (%lld x %lld x %lld): %s", (long long)m, (long long)n, (long long)k, kt_last_error());
    return st;
}

kt_status ktops_gemm_decision(ktops_gemm *g, const void *a, const void *b, void *c, int64_t m, int64_t n, int64_t k,
                              const kt_decision **out) {
    kt_arg args[KTOPS_GEMM_NARGS];
    kt_status st = gemm_args(g, "ktops_gemm_decision", a, b, c, m, n, k, args);
    if (st == KT_OK && (st = kt_op_decision(g->op, args, KTOPS_GEMM_NARGS, out)) != KT_OK)
        st = ktops__fail(st, "ktops_gemm_decision: %s", kt_last_error());
    return st;
}

kt_status ktops_gemm_cublas(ktops_gemm *g, kt_queue stream, const void *a, const void *b, void *c, int64_t m, int64_t n,
                            int64_t k) {
    if (g == NULL || g->blas_handle == NULL) return ktops__fail(KT_ERR_BACKEND, "ktops_gemm_cublas: cuBLAS is not present");
    int rc = blas_enqueue(g, a, b, c, m, n, k, stream);
    return rc == 0 ? KT_OK : ktops__fail(KT_ERR_BACKEND, "ktops_gemm_cublas: cublasGemmEx returned %d", rc);
}

kt_status ktops_gemm_cublaslt(ktops_gemm *g, kt_queue stream, int rank, const void *a, const void *b, void *c, int64_t m,
                              int64_t n, int64_t k) {
    if (g == NULL || g->lt_handle == NULL) return ktops__fail(KT_ERR_BACKEND, "ktops_gemm_cublaslt: cuBLASLt is not present");
    const shape *s = shape_of(g, m, n, k);
    if (s == NULL || rank < 0 || rank >= s->count)
        return ktops__fail(KT_ERR_BACKEND, "ktops_gemm_cublaslt: the heuristic offers %d algorithms for this shape, not rank %d",
                           s ? s->count : 0, rank);
    int rc = lt_enqueue(g, rank, a, b, c, m, n, k, stream);
    return rc == 0 ? KT_OK : ktops__fail(KT_ERR_BACKEND, "ktops_gemm_cublaslt: cublasLtMatmul returned %d", rc);
}
