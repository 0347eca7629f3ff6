/*
 * small_tile.cu - a latency-minded tensor-core GEMM for small products, tried against cuBLAS
 * (issue [11], seventh session): one BM x 64 tile of C per block (4 warps, 2 x 2), up to STAGES
 * k-chunks of 64 requested at once with cp.async (all of K = 512 with 8 stages), shared memory
 * swizzled by 16-byte chunks, fragments by ldmatrix, mma.sync m16n8k16, C stored from the
 * registers. Any M, N, K with K and N multiples of 8.
 *
 *   nvcc -arch=sm_90a -O3 -std=c++17 -o small bench/probes/small_tile.cu -lcublas && ./small
 */
#include "probe.h"

static __device__ __forceinline__ void cp16(unsigned dst, const void *src, int bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(dst), "l"(src), "r"(bytes) : "memory");
}
static __device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> static __device__ __forceinline__ void wait_groups() { asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory"); }
static __device__ __forceinline__ void ldsm4(unsigned r[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];" : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
static __device__ __forceinline__ void ldsm4t(unsigned r[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];" : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
/* a shared-memory tile: rows of 64 bf16 (8 chunks of 16 B), chunk c of row r at c ^ (r & 7) */
static __device__ __forceinline__ unsigned swz(int r, int c) { return (unsigned)(r * 128 + ((c ^ (r & 7)) << 4)); }

template <int BM, int STAGES>
__global__ void __launch_bounds__(128) smallg(const bf16_t *__restrict__ A, const bf16_t *__restrict__ B, bf16_t *__restrict__ C, int M, int N, int K) {
    constexpr int BN = 64, WTM = BM / 2, MI = WTM / 16; /* 2 x 2 warps, each WTM x 32 */
    constexpr int ABYTES = BM * 128, BBYTES = 64 * 128, SBYTES = ABYTES + BBYTES;
    extern __shared__ __align__(128) unsigned char sm[];
    const unsigned base = (unsigned)__cvta_generic_to_shared(sm);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wm = warp >> 1, wn = warp & 1;
    const int tiles_n = (N + BN - 1) / BN, m0 = (blockIdx.x / tiles_n) * BM, n0 = (blockIdx.x % tiles_n) * BN;
    const int chunks = (K + 63) / 64;
    auto issue = [&](int kc) {
        if (kc < chunks) {
            const unsigned st = base + (kc % STAGES) * SBYTES;
            const int k0 = kc * 64;
#pragma unroll
            for (int i = tid; i < BM * 8; i += 128) {
                const int r = i >> 3, c = i & 7, gm = m0 + r, gk = k0 + c * 8;
                const bool ok = gm < M && gk < K;
                cp16(st + swz(r, c), ok ? A + (size_t)gm * K + gk : A, ok ? 16 : 0);
            }
#pragma unroll
            for (int i = tid; i < 64 * 8; i += 128) {
                const int r = i >> 3, c = i & 7, gk = k0 + r, gn = n0 + c * 8;
                const bool ok = gk < K && gn < N;
                cp16(st + ABYTES + swz(r, c), ok ? B + (size_t)gk * N + gn : B, ok ? 16 : 0);
            }
        }
        commit();
    };
#pragma unroll
    for (int s = 0; s < STAGES; s++) issue(s);
    float acc[MI][4][4];
#pragma unroll
    for (int i = 0; i < MI; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.f;
    for (int kc = 0; kc < chunks; kc++) {
        wait_groups<STAGES - 1>();
        __syncthreads();
        const unsigned st = base + (kc % STAGES) * SBYTES;
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            unsigned a[MI][4], b[2][4];
#pragma unroll
            for (int i = 0; i < MI; i++) ldsm4(a[i], st + swz(wm * WTM + i * 16 + (lane & 15), kk * 2 + (lane >> 4)));
#pragma unroll
            for (int j = 0; j < 2; j++) ldsm4t(b[j], st + ABYTES + swz(kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, (wn * 32 + j * 16) / 8 + (lane >> 4)));
#pragma unroll
            for (int i = 0; i < MI; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) mma16816(acc[i][j], a[i][0], a[i][1], a[i][2], a[i][3], b[j >> 1][(j & 1) * 2], b[j >> 1][(j & 1) * 2 + 1]);
        }
        __syncthreads();
        issue(kc + STAGES);
    }
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int i = 0; i < MI; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int r = m0 + wm * WTM + i * 16 + g, c = n0 + wn * 32 + j * 8 + 2 * t;
            if (c < N) {
                if (r < M) *(unsigned *)(C + (size_t)r * N + c) = pack2(acc[i][j][0], acc[i][j][1]);
                if (r + 8 < M) *(unsigned *)(C + (size_t)(r + 8) * N + c) = pack2(acc[i][j][2], acc[i][j][3]);
            }
        }
}

template <int BM, int STAGES> static void run(probe &pr, int m, int n, int k, double cublas_us) {
    const size_t smem = (size_t)STAGES * (BM * 128 + 64 * 128);
    auto kern = smallg<BM, STAGES>;
    probe_ck(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem), "shared memory size");
    const int grid = ((m + BM - 1) / BM) * ((n + 63) / 64);
    auto launch = [&] {
        kern<<<grid, 128, smem, pr.s>>>(pr.A, pr.B, pr.C, m, n, k);
        return cudaGetLastError();
    };
    cudaMemset(pr.C, 0, (size_t)m * n * 2);
    pr.first_run(launch());
    const int bad = pr.mismatches(m, n);
    const double us = pr.time_cold(launch);
    printf("  BM %3d STAGES %d: %4d blocks, %6zu B shared: %7.2f us, x%.3f cuBLAS%s\n", BM, STAGES, grid, smem, us, cublas_us / us,
           bad ? " WRONG" : ", checked");
}

int main() {
    probe pr(64u << 20);
    const int shapes[][3] = {{512, 512, 512}, {1024, 1024, 1024}, {2048, 2048, 2048}, {500, 520, 264}};
    for (auto &sh : shapes) {
        const int m = sh[0], n = sh[1], k = sh[2];
        const double cub = pr.reference(m, n, k);
        printf("%d x %d x %d: cuBLAS %.2f us\n", m, n, k, cub);
        run<64, 4>(pr, m, n, k, cub), run<64, 8>(pr, m, n, k, cub);
        run<32, 4>(pr, m, n, k, cub), run<32, 8>(pr, m, n, k, cub);
        run<128, 4>(pr, m, n, k, cub);
    }
    return 0;
}
