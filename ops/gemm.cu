/*
 * gemm.cu - C = A * B on tensor cores: bf16 in, fp32 accumulate, bf16 out, all row-major
 * (A is M x K, B is K x N, C is M x N). Compiled by NVRTC once per configuration; no CUDA header
 * is included (the GPU image has none), so types are plain and the tensor-core instructions are
 * inline PTX (sm_80 and later: cp.async, ldmatrix, mma.sync m16n8k16).
 *
 * Defines (kerntune passes a configuration's parameters as -D options):
 *   BM, BN, BK   the block's tile of C (BM x BN) and the depth of one k-step (BK)
 *   WM, WN       warps along M and N; each warp computes a (BM/WM) x (BN/WN) tile
 *   STAGES       shared-memory pipeline depth (cp.async prefetches STAGES-1 k-steps ahead)
 *
 * The grid decides how the work is shared, so one kernel serves three strategies:
 *   tiles blocks          each block computes whole tiles (data-parallel);
 *   tiles * S blocks      split-K: each tile's k-range is cut into S pieces;
 *   any other count       stream-K: the tiles' k-steps, laid end to end, are cut evenly among
 *                         the blocks (a persistent grid, one or two blocks per SM).
 * A block whose piece is a whole tile stores it as bf16. Pieces of a tile add their partial sums
 * into the module's fp32 workspace `ktops_ws` (entry r * N + c for C's element (r, c); zero
 * between launches) with atomics; the block that completes a tile's k-steps (counted in
 * `ktops_cnt`) reads the sum back, zeroing the workspace as it reads, stores it as bf16 and
 * resets the counter. So the workspace is zero again when the launch ends. It is the module's:
 * a split launch needs M * N <= WS_FLOATS and at most WS_TILES tiles (the op's requirement says
 * so), and two split launches of one module must not run at the same time (on two streams).
 */

typedef unsigned short bf16_t;

#define THREADS (WM * WN * 32)
#define WTM (BM / WM)      /* warp tile rows */
#define WTN (BN / WN)      /* warp tile columns */
#define MI (WTM / 16)      /* mma tiles along M per warp */
#define NI (WTN / 8)       /* mma tiles along N per warp */
#define AS_LD (BK + 8)     /* shared row strides, padded so ldmatrix rows hit distinct banks */
#define BS_LD (BN + 8)
#define A_STAGE (BM * AS_LD)
#define B_STAGE (BK * BS_LD)
#define GROUP_M 8          /* tiles visited in groups of 8 tile rows, for L2 reuse of B */
#define WS_FLOATS (1 << 22) /* ops/gemm.c's requirement checks a split launch fits */
#define WS_TILES (1 << 16)

__device__ float ktops_ws[WS_FLOATS];
__device__ unsigned ktops_cnt[WS_TILES];

static __device__ __forceinline__ unsigned smem_addr(const void *p) {
    return (unsigned)__cvta_generic_to_shared(p);
}

/* 16 bytes global -> shared, asynchronously; zero-filled when pred is false. */
static __device__ __forceinline__ void cp_async16(void *dst, const void *src, bool pred) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(pred ? 16 : 0));
}

static __device__ __forceinline__ void cp_async_commit(void) { asm volatile("cp.async.commit_group;\n" ::); }

static __device__ __forceinline__ void cp_async_wait(void) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(STAGES - 2));
}

static __device__ __forceinline__ void cp_async_wait_all(void) { asm volatile("cp.async.wait_group 0;\n" ::); }

/* Loads k-step kt's tiles of A and B into pipeline slot `slot`. */
static __device__ __forceinline__ void load_stage(const bf16_t *A, const bf16_t *B, bf16_t *As, bf16_t *Bs, int slot,
                                                  long long m0, long long n0, long long k0, long long M, long long N,
                                                  long long K) {
    bf16_t *as = As + slot * A_STAGE, *bs = Bs + slot * B_STAGE;
    const int tid = threadIdx.x;
#pragma unroll
    for (int c = tid; c < BM * BK / 8; c += THREADS) {
        int r = c / (BK / 8), kc = (c % (BK / 8)) * 8;
        long long gm = m0 + r, gk = k0 + kc;
        bool ok = gm < M && gk < K;
        cp_async16(as + r * AS_LD + kc, ok ? A + gm * K + gk : A, ok);
    }
#pragma unroll
    for (int c = tid; c < BK * BN / 8; c += THREADS) {
        int r = c / (BN / 8), nc = (c % (BN / 8)) * 8;
        long long gk = k0 + r, gn = n0 + nc;
        bool ok = gk < K && gn < N;
        cp_async16(bs + r * BS_LD + nc, ok ? B + gk * N + gn : B, ok);
    }
}

static __device__ __forceinline__ void ldmatrix_x4(unsigned r[4], const bf16_t *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}

static __device__ __forceinline__ void ldmatrix_x4_trans(unsigned r[4], const bf16_t *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}

static __device__ __forceinline__ void mma_bf16(float c[4], const unsigned a[4], unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* Two floats as two bf16 (round to nearest even), lo at the lower address. */
static __device__ __forceinline__ unsigned pack_bf16x2(float lo, float hi) {
    unsigned d;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(hi), "f"(lo));
    return d;
}

extern "C" __global__ void __launch_bounds__(THREADS)
gemm(const bf16_t *__restrict__ A, const bf16_t *__restrict__ B, bf16_t *__restrict__ C, long long M, long long N,
     long long K) {
    extern __shared__ __align__(16) unsigned char smem[];
    bf16_t *As = (bf16_t *)smem, *Bs = As + STAGES * A_STAGE;
    __shared__ int last_piece;
    float *ws = ktops_ws;
    unsigned *cnt = ktops_cnt;

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int wm0 = (warp / WN) * WTM, wn0 = (warp % WN) * WTN;
    const long long tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
    const long long kiters = (K + BK - 1) / BK, work = tiles_m * tiles_n * kiters;
    long long it = work * blockIdx.x / gridDim.x;
    const long long end = work * (blockIdx.x + 1) / gridDim.x;

    while (it < end) {
        const long long tile = it / kiters;
        const long long kbeg = it % kiters;
        const long long kend = kbeg + (end - it) < kiters ? kbeg + (end - it) : kiters;
        it += kend - kbeg;

        /* grouped order: GROUP_M tile rows share B's columns in L2 */
        const long long group = tile / (GROUP_M * tiles_n), first_m = group * GROUP_M;
        const long long gsize = tiles_m - first_m < GROUP_M ? tiles_m - first_m : GROUP_M;
        const long long tm = first_m + (tile % (GROUP_M * tiles_n)) % gsize;
        const long long tn = (tile % (GROUP_M * tiles_n)) / gsize;
        const long long m0 = tm * BM, n0 = tn * BN;

        float acc[MI][NI][4];
#pragma unroll
        for (int i = 0; i < MI; i++)
#pragma unroll
            for (int j = 0; j < NI; j++) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.0f;

        const int steps = (int)(kend - kbeg);
#pragma unroll
        for (int s = 0; s < STAGES - 1; s++) {
            if (s < steps) load_stage(A, B, As, Bs, s, m0, n0, (kbeg + s) * BK, M, N, K);
            cp_async_commit();
        }
        for (int s = 0; s < steps; s++) {
            cp_async_wait();
            __syncthreads();
            const int next = s + STAGES - 1;
            if (next < steps) load_stage(A, B, As, Bs, next % STAGES, m0, n0, (kbeg + next) * BK, M, N, K);
            cp_async_commit();
            const bf16_t *as = As + (s % STAGES) * A_STAGE, *bs = Bs + (s % STAGES) * B_STAGE;
#pragma unroll
            for (int kk = 0; kk < BK; kk += 16) {
                unsigned a[MI][4], b[NI][2];
#pragma unroll
                for (int i = 0; i < MI; i++) ldmatrix_x4(a[i], as + (wm0 + i * 16 + (lane & 15)) * AS_LD + kk + (lane >> 4) * 8);
#pragma unroll
                for (int j = 0; j < NI; j += 2) {
                    unsigned r[4];
                    ldmatrix_x4_trans(r, bs + (kk + (lane & 15)) * BS_LD + wn0 + j * 8 + (lane >> 4) * 8);
                    b[j][0] = r[0], b[j][1] = r[1], b[j + 1][0] = r[2], b[j + 1][1] = r[3];
                }
#pragma unroll
                for (int i = 0; i < MI; i++)
#pragma unroll
                    for (int j = 0; j < NI; j++) mma_bf16(acc[i][j], a[i], b[j][0], b[j][1]);
            }
        }
        cp_async_wait_all();
        __syncthreads(); /* the shared tiles are free for the next piece */

        const long long row0 = m0 + wm0 + (lane >> 2), col0 = n0 + wn0 + (lane & 3) * 2;
        if (kbeg == 0 && kend == kiters) { /* the whole tile: store it */
#pragma unroll
            for (int i = 0; i < MI; i++)
#pragma unroll
                for (int j = 0; j < NI; j++) {
                    const long long r = row0 + i * 16, c = col0 + j * 8;
                    if (c < N) {
                        if (r < M) *(unsigned *)(C + r * N + c) = pack_bf16x2(acc[i][j][0], acc[i][j][1]);
                        if (r + 8 < M) *(unsigned *)(C + (r + 8) * N + c) = pack_bf16x2(acc[i][j][2], acc[i][j][3]);
                    }
                }
            continue;
        }
        /* a piece of the tile: add it to the workspace; the piece that completes the tile stores it */
#pragma unroll
        for (int i = 0; i < MI; i++)
#pragma unroll
            for (int j = 0; j < NI; j++) {
                const long long r = row0 + i * 16, c = col0 + j * 8;
                if (c < N) {
                    if (r < M) atomicAdd(ws + r * N + c, acc[i][j][0]), atomicAdd(ws + r * N + c + 1, acc[i][j][1]);
                    if (r + 8 < M)
                        atomicAdd(ws + (r + 8) * N + c, acc[i][j][2]), atomicAdd(ws + (r + 8) * N + c + 1, acc[i][j][3]);
                }
            }
        __threadfence(); /* this block's additions are visible before its count is */
        __syncthreads();
        if (threadIdx.x == 0) {
            const unsigned done = (unsigned)(kend - kbeg);
            last_piece = atomicAdd(cnt + tile, done) + done == (unsigned)kiters;
        }
        __syncthreads();
        if (last_piece) {
            __threadfence();
#pragma unroll
            for (int i = 0; i < MI; i++)
#pragma unroll
                for (int j = 0; j < NI; j++) {
                    const long long r = row0 + i * 16, c = col0 + j * 8;
                    if (c < N) {
                        if (r < M) {
                            float v0 = atomicExch(ws + r * N + c, 0.0f), v1 = atomicExch(ws + r * N + c + 1, 0.0f);
                            *(unsigned *)(C + r * N + c) = pack_bf16x2(v0, v1);
                        }
                        if (r + 8 < M) {
                            float v0 = atomicExch(ws + (r + 8) * N + c, 0.0f), v1 = atomicExch(ws + (r + 8) * N + c + 1, 0.0f);
                            *(unsigned *)(C + (r + 8) * N + c) = pack_bf16x2(v0, v1);
                        }
                    }
                }
            if (threadIdx.x == 0) cnt[tile] = 0;
        }
        __syncthreads(); /* last_piece is read by every thread before the next piece sets it */
    }
}
