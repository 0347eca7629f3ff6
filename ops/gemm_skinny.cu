/*
 * gemm_skinny.cu - C = A * B for products with few rows (M of 64 or less): bf16 in, fp32
 * accumulate, bf16 out, all row-major (A is M x K, B is K x N, C is M x N). Such a product is
 * bound by reading B once from memory, so this kernel streams B straight from global memory into
 * registers, with no shared-memory staging, and feeds the tensor cores (mma.sync m16n8k16,
 * sm_80 and later) from those registers. Compiled by NVRTC once per configuration; no CUDA
 * header is included.
 *
 * The trick: the product is computed transposed, C^T = B^T A^T, so that B is the MMA's A
 * operand. Which k of a fragment's slots, and which column of C a fragment's row stands for, are
 * the kernel's choice as long as both operands agree. Thread (g = lane / 4, t = lane % 4) of a
 * warp loads, for each k16 step, B's rows k = 4t + q (q = 0..3) at its VEC consecutive columns
 * g * VEC ...: 16 or 8 bytes a load, a warp reading whole 128- or 64-byte row segments. Pairs of
 * those rows (q = 0, 1 and q = 2, 3) interleaved by byte permutes are the MMA's A fragments
 * (slots 2t, 2t + 1 and 2t + 8, 2t + 9 standing for k = 4t .. 4t + 3), and A's four elements
 * A[m][4t .. 4t + 3] (one 8-byte load) are its B fragment for row m = g of an m8 tile. The
 * accumulators then hold, for rows 2t and 2t + 1 of each m8 tile, the thread's VEC columns:
 * each row is one vector store.
 *
 * Defines (kerntune passes a configuration's parameters as -D options):
 *   VEC     B columns a thread loads at once: 4 (8 bytes) or 8 (16 bytes); a warp's strip of C
 *           is 8 * VEC columns wide
 *   MT      m8 tiles of rows a block computes (8 * MT rows; a grid of M / (8 * MT) row blocks)
 *   WARPS   warps of a block; they share the block's k-steps in turns of UNROLL steps and add their
 *           partial strips in shared memory (a tree, (WARPS / 2) * MT * VEC * 64 bytes)
 *   UNROLL  k16 steps a warp loads before it multiplies them (its loads in flight)
 *   SPLIT   blocks of a cluster (sm_90) that split one strip's k-range; they add their partial
 *           strips over distributed shared memory, and the cluster's first block stores C. 1:
 *           one block per strip, no cluster
 *
 * Grid: strips * row blocks * SPLIT blocks (ceil(N / (8 * VEC)) * ceil(M / (8 * MT)) * SPLIT), the
 * SPLIT blocks of a strip consecutive (a cluster), then the row blocks of a strip. K and N must be
 * multiples of 8 and the buffers 16-byte aligned (the op's requirements); any M works, but each
 * row block reads all of B.
 */

typedef unsigned short bf16_t;

#if VEC != 4 && VEC != 8
#error "VEC must be 4 or 8"
#endif
#if SPLIT != 1 && SPLIT != 2 && SPLIT != 4
#error "SPLIT must be 1, 2 or 4"
#endif
#if WARPS != 1 && WARPS != 2 && WARPS != 4 && WARPS != 8 && WARPS != 16
#error "WARPS must be a power of two up to 16"
#endif
#ifndef KNAME
#define KNAME gemm_skinny
#endif

#define STRIP (8 * VEC) /* columns of C a block computes */
#define NP (VEC / 2)    /* MMAs per k16 step and m8 tile */
#define NACC (MT * NP * 4) /* accumulators a thread holds */

/* v = B's VEC elements at p (zeros when !ok), read once: not kept in L1. */
static __device__ __forceinline__ void load_b(unsigned v[NP], const bf16_t *p, bool ok) {
#if VEC == 8
    asm("{\n.reg .pred p;\nsetp.ne.b32 p, %5, 0;\n"
        "mov.b32 %0, 0;\nmov.b32 %1, 0;\nmov.b32 %2, 0;\nmov.b32 %3, 0;\n"
        "@p ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];\n}\n"
        : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3])
        : "l"(p), "r"((int)ok));
#else
    asm("{\n.reg .pred p;\nsetp.ne.b32 p, %3, 0;\n"
        "mov.b32 %0, 0;\nmov.b32 %1, 0;\n"
        "@p ld.global.nc.L1::no_allocate.L2::256B.v2.u32 {%0, %1}, [%2];\n}\n"
        : "=r"(v[0]), "=r"(v[1])
        : "l"(p), "r"((int)ok));
#endif
}

/* v = A's four elements at p (zeros when !ok). */
static __device__ __forceinline__ void load_a(unsigned v[2], const bf16_t *p, bool ok) {
    asm("{\n.reg .pred p;\nsetp.ne.b32 p, %3, 0;\n"
        "mov.b32 %0, 0;\nmov.b32 %1, 0;\n"
        "@p ld.global.nc.v2.u32 {%0, %1}, [%2];\n}\n"
        : "=r"(v[0]), "=r"(v[1])
        : "l"(p), "r"((int)ok));
}

static __device__ __forceinline__ unsigned perm(unsigned x, unsigned y, unsigned sel) {
    unsigned d;
    asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(d) : "r"(x), "r"(y), "r"(sel));
    return d;
}

/* d (16 x 8, f32) += a (16 x 16, row) * b (16 x 8, col). */
static __device__ __forceinline__ void mma(float d[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0,
                                           unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

static __device__ __forceinline__ unsigned pack_bf16x2(float lo, float hi) {
    unsigned d;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(hi), "f"(lo));
    return d;
}

#if SPLIT > 1
static __device__ __forceinline__ void cluster_sync(void) {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

/* The float at address addr of this block's shared memory, in the cluster's block `rank`. */
static __device__ __forceinline__ float ld_peer(const float *addr, unsigned rank) {
    unsigned a = (unsigned)__cvta_generic_to_shared(addr), r;
    float v;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(rank));
    asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(r) : "memory");
    return v;
}
#endif

extern "C" __global__ void __launch_bounds__(WARPS * 32, 1)
#if SPLIT > 1
__cluster_dims__(SPLIT, 1, 1)
#endif
KNAME(const bf16_t *__restrict__ A, const bf16_t *__restrict__ B, bf16_t *__restrict__ C, long long M, long long N, long long K) {
    extern __shared__ float red[]; /* the partial strips of the warps being added: [warp][accumulator][lane] */
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const long long mblocks = (M + 8 * MT - 1) / (8 * MT), bid = blockIdx.x;
    const int rank = (int)(bid % SPLIT);
    const long long mb = (bid / SPLIT) % mblocks, strip = bid / (SPLIT * mblocks);
    const long long n = strip * STRIP + g * VEC, m0 = mb * 8 * MT; /* this thread's first column; the block's first row */
    const long long steps = (K + 15) / 16, s_beg = steps * rank / SPLIT, s_end = steps * (rank + 1) / SPLIT;
    const bool col_ok = n < N; /* N is a multiple of 8: a thread's VEC columns are in or out together */
    const bf16_t *bp = B + (long long)(4 * t) * N + n, *ap = A + (m0 + g) * K + 4 * t;

    float acc[NACC];
#pragma unroll
    for (int j = 0; j < NACC; j++) acc[j] = 0.0f;

    for (long long s0 = s_beg + (long long)w * UNROLL; s0 < s_end; s0 += (long long)WARPS * UNROLL) {
        unsigned b[UNROLL][4][NP], a[UNROLL][MT][2];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const long long s = s0 + u, k = s * 16 + 4 * t;
            const bool step_ok = s < s_end && k < K; /* K is a multiple of 8: rows k .. k + 3 are in or out together */
#pragma unroll
            for (int q = 0; q < 4; q++) load_b(b[u][q], bp + (s * 16 + q) * N, step_ok && col_ok);
#pragma unroll
            for (int i = 0; i < MT; i++) load_a(a[u][i], ap + (long long)(8 * i) * K + s * 16, step_ok && m0 + 8 * i + g < M);
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
#pragma unroll
            for (int p = 0; p < NP; p++) {
                /* rows g and g + 8 of the fragment: columns 2p and 2p + 1 of the thread's VEC */
                const unsigned f0 = perm(b[u][0][p], b[u][1][p], 0x5410), f1 = perm(b[u][0][p], b[u][1][p], 0x7632);
                const unsigned f2 = perm(b[u][2][p], b[u][3][p], 0x5410), f3 = perm(b[u][2][p], b[u][3][p], 0x7632);
#pragma unroll
                for (int i = 0; i < MT; i++) mma(&acc[(i * NP + p) * 4], f0, f1, f2, f3, a[u][i][0], a[u][i][1]);
            }
    }

    /* the warps' partial strips, added in a tree: warps [h, 2h) hand theirs to warps [0, h) */
#pragma unroll
    for (int h = WARPS / 2; h >= 1; h >>= 1) {
        if (w >= h && w < 2 * h)
#pragma unroll
            for (int j = 0; j < NACC; j++) red[((w - h) * NACC + j) * 32 + lane] = acc[j];
        __syncthreads();
        if (w < h)
#pragma unroll
            for (int j = 0; j < NACC; j++) acc[j] += red[(w * NACC + j) * 32 + lane];
        __syncthreads();
    }
#if SPLIT > 1
    /* the cluster's blocks: the first adds the others' strips */
    if (w == 0)
#pragma unroll
        for (int j = 0; j < NACC; j++) red[j * 32 + lane] = acc[j];
    cluster_sync();
    if (rank == 0 && w == 0)
#pragma unroll
        for (unsigned q = 1; q < SPLIT; q++)
#pragma unroll
            for (int j = 0; j < NACC; j++) acc[j] += ld_peer(&red[j * 32 + lane], q);
    cluster_sync(); /* no block leaves while the first still reads its strip */
    if (rank != 0) return;
#endif
    if (w != 0 || !col_ok) return;
    /* accumulator (i, p) holds rows 2t (0, 2) and 2t + 1 (1, 3) of m8 tile i at columns 2p (0, 1) and 2p + 1 (2, 3) */
#pragma unroll
    for (int i = 0; i < MT; i++) {
        const long long m = m0 + 8 * i + 2 * t;
        unsigned lo[NP], hi[NP];
#pragma unroll
        for (int p = 0; p < NP; p++) {
            const float *d = &acc[(i * NP + p) * 4];
            lo[p] = pack_bf16x2(d[0], d[2]), hi[p] = pack_bf16x2(d[1], d[3]);
        }
#if VEC == 8
        if (m < M)
            asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(C + m * N + n), "r"(lo[0]), "r"(lo[1]), "r"(lo[2]),
                         "r"(lo[3]) : "memory");
        if (m + 1 < M)
            asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(C + (m + 1) * N + n), "r"(hi[0]), "r"(hi[1]),
                         "r"(hi[2]), "r"(hi[3]) : "memory");
#else
        if (m < M) asm volatile("st.global.v2.b32 [%0], {%1, %2};\n" ::"l"(C + m * N + n), "r"(lo[0]), "r"(lo[1]) : "memory");
        if (m + 1 < M)
            asm volatile("st.global.v2.b32 [%0], {%1, %2};\n" ::"l"(C + (m + 1) * N + n), "r"(hi[0]), "r"(hi[1]) : "memory");
#endif
    }
}
