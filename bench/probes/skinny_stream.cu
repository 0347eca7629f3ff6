/*
 * skinny_stream.cu - a tensor-core kernel for skinny products (M of 64 or less) that streams B
 * from memory into registers, tried against cuBLAS (issue [11], seventh session).
 *
 * C^T = B^T A^T on mma.sync m16n8k16: B is the MMA's A operand, loaded straight into registers
 * (thread (g, t) of a warp loads rows 4t + q, q = 0..3, of a k16 step at its VEC columns), A's
 * four elements A[m][4t .. 4t + 3] are the B operand. A block is WN x WK warps: warp (wn, wk)
 * computes 8 * VEC columns and the wk-th part of the block's k-range, D k16 steps of loads in
 * flight (a ring of registers). The SPLIT blocks of a cluster split K; the partial tiles are
 * added over distributed shared memory, each (warp slot, m8 tile, column pair) by one warp of
 * the cluster. MODE 1 leaves A's loads out, MODE 2 the MMAs (diagnostics: results are wrong).
 * Needs K a multiple of 16 * SPLIT * WK * D and N of WN * 8 * VEC (the probe's shapes are).
 *
 *   nvcc -arch=sm_90a -O3 -std=c++17 -o skinny bench/probes/skinny_stream.cu -lcublas && ./skinny
 */
#include "probe.h"

static __device__ __forceinline__ unsigned prmt(unsigned x, unsigned y, unsigned sel) {
    unsigned d;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(x), "r"(y), "r"(sel));
    return d;
}
template <int VEC> static __device__ __forceinline__ void load_b(unsigned *v, const bf16_t *p) {
    if (VEC == 8)
        asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]) : "l"(p));
    else
        asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0,%1}, [%2];" : "=r"(v[0]), "=r"(v[1]) : "l"(p));
}
static __device__ __forceinline__ void load_a(unsigned *v, const bf16_t *p) {
    asm volatile("ld.global.nc.v2.u32 {%0,%1}, [%2];" : "=r"(v[0]), "=r"(v[1]) : "l"(p));
}
static __device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
static __device__ __forceinline__ float ld_peer(const float *addr, unsigned rank) {
    unsigned a = (unsigned)__cvta_generic_to_shared(addr), r;
    float v;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank));
    asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(r));
    return v;
}

template <int VEC, int MT, int WN, int WK, int SPLIT, int D, int MODE>
__global__ void __launch_bounds__(WN *WK * 32, 1)
    skinny(const bf16_t *__restrict__ A, const bf16_t *__restrict__ B, bf16_t *__restrict__ C, int M, int N, int K) {
    constexpr int NP = VEC / 2, NACC = MT * NP * 4, STRIP = WN * 8 * VEC;
    extern __shared__ float part[]; /* [wk][wn][accumulator][lane] */
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, wn = w % WN, wk = w / WN, g = lane >> 2, t = lane & 3;
    const int rank = blockIdx.x % SPLIT, n0 = (blockIdx.x / SPLIT) * STRIP, n = n0 + wn * 8 * VEC + g * VEC;
    const int steps = K / 16, kp = rank * WK + wk, s0 = steps * kp / (SPLIT * WK), s1 = steps * (kp + 1) / (SPLIT * WK);
    const bf16_t *bp = B + (size_t)(4 * t) * N + n, *ap = A + (size_t)g * K + 4 * t;
    float acc[NACC];
#pragma unroll
    for (int j = 0; j < NACC; j++) acc[j] = 0.f;
    unsigned b[D][4][NP], a[D][MT][2];
    auto load = [&](int slot, int s) {
#pragma unroll
        for (int q = 0; q < 4; q++) load_b<VEC>(b[slot][q], bp + (size_t)(s * 16 + q) * N);
#pragma unroll
        for (int i = 0; i < MT; i++) {
            if (MODE != 1) load_a(a[slot][i], ap + (size_t)(8 * i) * K + s * 16);
            else a[slot][i][0] = a[slot][i][1] = lane * 0x00010001u;
        }
    };
#pragma unroll
    for (int u = 0; u < D; u++)
        if (s0 + u < s1) load(u, s0 + u);
    for (int sb = s0; sb < s1; sb += D) {
#pragma unroll
        for (int u = 0; u < D; u++) {
            if (sb + u >= s1) continue;
#pragma unroll
            for (int p = 0; p < NP; p++) {
                const unsigned f0 = prmt(b[u][0][p], b[u][1][p], 0x5410), f1 = prmt(b[u][0][p], b[u][1][p], 0x7632);
                const unsigned f2 = prmt(b[u][2][p], b[u][3][p], 0x5410), f3 = prmt(b[u][2][p], b[u][3][p], 0x7632);
#pragma unroll
                for (int i = 0; i < MT; i++) {
                    if (MODE != 2) mma16816(&acc[(i * NP + p) * 4], f0, f1, f2, f3, a[u][i][0], a[u][i][1]);
                    else acc[(i * NP + p) * 4] += __int_as_float((f0 ^ f1 ^ f2 ^ f3 ^ a[u][i][0] ^ a[u][i][1]) & 0x3fffffff);
                }
            }
            if (sb + u + D < s1) load(u, sb + u + D);
        }
    }
    float *mine = part + (size_t)(wk * WN + wn) * NACC * 32;
#pragma unroll
    for (int j = 0; j < NACC; j++) mine[j * 32 + lane] = acc[j];
    if (SPLIT > 1) cluster_sync();
    else __syncthreads();
    constexpr int UNITS = WN * MT * NP;
    for (int u = rank * WN * WK + w; u < UNITS; u += SPLIT * WN * WK) {
        const int ws = u / (MT * NP), ip = u % (MT * NP), i = ip / NP, p = ip % NP;
        float v[SPLIT * WK * 4], d[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int q = 0; q < SPLIT; q++)
#pragma unroll
            for (int kk = 0; kk < WK; kk++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const float *src = part + ((size_t)(kk * WN + ws) * NACC + ip * 4 + e) * 32 + lane;
                    v[(q * WK + kk) * 4 + e] = SPLIT > 1 ? ld_peer(src, q) : *src;
                }
#pragma unroll
        for (int x = 0; x < SPLIT * WK; x++)
#pragma unroll
            for (int e = 0; e < 4; e++) d[e] += v[x * 4 + e];
        const int m = 8 * i + 2 * t, c = n0 + ws * 8 * VEC + g * VEC + 2 * p;
        if (m < M) *(unsigned *)(C + (size_t)m * N + c) = pack2(d[0], d[2]);
        if (m + 1 < M) *(unsigned *)(C + (size_t)(m + 1) * N + c) = pack2(d[1], d[3]);
    }
    if (SPLIT > 1) cluster_sync(); /* no block leaves while a peer reads its partial tile */
}

template <int VEC, int MT, int WN, int WK, int SPLIT, int D, int MODE = 0>
static void run(probe &pr, int m, int n, int k, double cublas_us) {
    const size_t smem = (size_t)WK * WN * MT * (VEC / 2) * 4 * 32 * 4;
    auto kern = skinny<VEC, MT, WN, WK, SPLIT, D, MODE>;
    probe_ck(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem), "shared memory size");
    const int grid = n / (WN * 8 * VEC) * SPLIT;
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute cluster[1];
    cluster[0].id = cudaLaunchAttributeClusterDimension;
    cluster[0].val.clusterDim.x = SPLIT, cluster[0].val.clusterDim.y = 1, cluster[0].val.clusterDim.z = 1;
    cfg.gridDim = dim3(grid), cfg.blockDim = dim3(WN * WK * 32), cfg.dynamicSmemBytes = smem, cfg.stream = pr.s;
    cfg.attrs = cluster, cfg.numAttrs = 1;
    auto launch = [&] { return cudaLaunchKernelEx(&cfg, kern, (const bf16_t *)pr.A, (const bf16_t *)pr.B, pr.C, m, n, k); };
    cudaMemset(pr.C, 0, (size_t)m * n * 2);
    pr.first_run(launch());
    const int bad = MODE ? 0 : pr.mismatches(m, n);
    const double us = pr.time_cold(launch);
    int clusters = 0;
    if (SPLIT > 1) cudaOccupancyMaxActiveClusters(&clusters, kern, &cfg);
    printf("  VEC %d WN %d WK %2d SPLIT %d D %d%s: %4d blocks of %4d threads%s: %6.2f us, x%.3f cuBLAS%s\n", VEC, WN, WK, SPLIT, D,
           MODE == 1 ? " (no A loads)" : MODE == 2 ? " (no MMAs)" : "", grid, WN * WK * 32,
           SPLIT > 1 ? (clusters * SPLIT >= grid ? "" : " (more clusters than fit at once)") : "", us, cublas_us / us,
           bad ? " WRONG" : MODE ? "" : ", checked");
}

int main() {
    probe pr(64u << 20);
    double cub = pr.reference(16, 4096, 4096);
    printf("16 x 4096 x 4096: cuBLAS %.2f us\n", cub);
    run<4, 2, 1, 32, 1, 1>(pr, 16, 4096, 4096, cub);
    run<4, 2, 1, 32, 1, 2>(pr, 16, 4096, 4096, cub);
    run<4, 2, 1, 16, 1, 4>(pr, 16, 4096, 4096, cub);
    run<4, 2, 1, 16, 1, 4, 1>(pr, 16, 4096, 4096, cub);
    run<4, 2, 1, 16, 1, 4, 2>(pr, 16, 4096, 4096, cub);
    run<8, 2, 1, 16, 2, 4>(pr, 16, 4096, 4096, cub);
    run<4, 2, 2, 8, 2, 4>(pr, 16, 4096, 4096, cub);
    run<8, 2, 2, 8, 4, 4>(pr, 16, 4096, 4096, cub);
    run<4, 2, 8, 2, 8, 4>(pr, 16, 4096, 4096, cub);
    cub = pr.reference(64, 4096, 4096);
    printf("64 x 4096 x 4096: cuBLAS %.2f us\n", cub);
    run<4, 8, 1, 16, 1, 2>(pr, 64, 4096, 4096, cub);
    run<4, 8, 1, 16, 1, 2, 1>(pr, 64, 4096, 4096, cub);
    run<4, 8, 1, 16, 1, 2, 2>(pr, 64, 4096, 4096, cub);
    run<8, 8, 1, 8, 2, 2>(pr, 64, 4096, 4096, cub);
    run<4, 8, 4, 4, 4, 2>(pr, 64, 4096, 4096, cub);
    return 0;
}
