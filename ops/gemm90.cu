/*
 * gemm90.cu - C = A * B on Hopper's warpgroup tensor cores (wgmma, sm_90a): bf16 in, fp32
 * accumulate, bf16 out, all row-major (A is M x K, B is K x N, C is M x N). Compiled by NVRTC
 * with -arch=sm_90a once per configuration; no CUDA header is included, so the instructions are
 * inline PTX.
 *
 * Defines (kerntune passes a configuration's parameters as -D options):
 *   BM, BN     the block's tile of C; BN is the n of one wgmma (64, 128 or 256)
 *   WGS        consumer warpgroups (of 128 threads); each computes BM / WGS rows of the tile
 *              (64 or 128: one or two m64 slices)
 *   STAGES     shared-memory pipeline depth
 *   KS         blocks that split one tile's k-range, as one cluster (1, 2, 4 or 8)
 *   PP         1: ping-pong (KS == 1, WGS == 2): each consumer warpgroup computes whole tiles, the
 *              two taking the block's tiles in turns, so that one's epilogue overlaps the other's
 *              MMAs; 0 (the default): cooperative, the consumers share each tile's rows
 *
 * The block is WGS consumer warpgroups and one producer warpgroup, whose first thread loads the
 * k-steps (64 deep) of A and B through the tensor-memory accelerator: tensor maps of A (K x M,
 * innermost first), B (N x K) and C (N x M), each with the 128-byte swizzle and boxes of 64 x 64,
 * reach the kernel by value after its six arguments (ops/gemm.c makes them at each launch:
 * kt_op_add_launch_param). Each stage is A's BM x 64 tile (K-major: rows of 128 bytes) and
 * B's 64 x BN tile as BN / 64 panels of 64 columns (N-major: 64 rows of 128 bytes, 8 KB each);
 * the copy engine writes both swizzled, as the tensor cores read them, and zero-fills what lies
 * past M, N or K. Stage s is full when its bytes have landed (an mbarrier with the byte count)
 * and empty again when every consumer's MMAs on it are complete (an mbarrier of WGS arrivals).
 * The shared-memory descriptors say: A's 8-row groups 1024 bytes apart; B's panels 8192 bytes
 * apart and its 8-row groups 1024 bytes apart; a k16 step starts 32 bytes further along A's rows
 * and 2048 bytes further down B's panels.
 *
 * With KS == 1 the grid is persistent: a block takes tiles blockIdx.x, blockIdx.x + gridDim.x,
 * ... (any grid size works; one block per multiprocessor is the intent). The producer runs ahead
 * across tile boundaries, so the next tile's first stages load while the consumers store the
 * last one: each consumer warpgroup writes its rows of the tile into shared memory (swizzled as
 * for the loads) and one thread sends them to C through the copy engine (a third tensor map, C:
 * N x M, boxes of 64 x 64), which clips what lies past M and N. With PP, consumer w takes the
 * block's tiles w, w + 2, ... whole (its stages are those of its tiles: every tile has the same
 * k-steps, so tile j's first is stage j * k-steps), and each stage is released by its one
 * consumer: while one warpgroup stores a tile, the other multiplies the next, and the tensor
 * cores do not wait for an epilogue (the products of few k-steps and large C, where cooperative
 * blocks idle the tensor cores for each tile's store). Their main loops take turns (a pair of
 * mbarriers: each hands the turn to the other once it has waited for its tile's last stage),
 * which keeps the waits on the stage barriers in stage order: a consumer running a whole tile
 * ahead could otherwise take a stage's earlier phase, of the same parity, for the one it wants.
 *
 * With KS > 1 the KS blocks of a cluster share one tile, each multiplying a KS-th of its
 * k-steps; they then add their fp32 partial tiles over distributed shared memory, each block
 * summing and storing BM / KS rows. No workspace, no atomics. The grid is then tiles * KS.
 *
 * Tiles are visited in groups of GROUP_M tile rows, for the reuse of B's columns in L2.
 */

typedef unsigned short bf16_t;

#ifndef PP
#define PP 0
#endif
#if PP && (KS != 1 || WGS != 2)
#error "PP (ping-pong) needs KS == 1 and WGS == 2"
#endif

#define THREADS ((WGS + 1) * 128)
#define WG_ROWS (PP ? BM : BM / WGS) /* rows of a tile per consumer warpgroup */
#define ROW0 (PP ? 0 : wg * WG_ROWS) /* the first of them */
#define MT (WG_ROWS / 64)  /* m64 slices per consumer warpgroup */
#define A_BYTES (BM * 128) /* one stage of A: BM rows of 64 bf16 */
#define B_BYTES (BN * 128) /* one stage of B: BN / 64 panels of 64 rows of 128 bytes */
#define STAGE_BYTES (A_BYTES + B_BYTES)
#define RED_LD (BN + 4)    /* the partial tile's row stride in floats (KS > 1) */
#define GROUP_M 8

#if BN != 64 && BN != 128 && BN != 256
#error "BN must be 64, 128 or 256"
#endif
#if WG_ROWS != 64 && WG_ROWS != 128
#error "BM / WGS must be 64 or 128"
#endif
#if KS != 1 && KS != 2 && KS != 4 && KS != 8
#error "KS must be 1, 2, 4 or 8"
#endif
#ifndef REGS_CONSUMER
#define REGS_CONSUMER 232 /* registers a consumer thread takes from the producer's (setmaxnreg) */
#endif
#define REGS_PRODUCER 40

/* A CUDA tensor map (CUtensorMap), opaque: 128 bytes, 64-byte aligned. */
struct __align__(64) tmap_t {
    unsigned long long v[16];
};

static __device__ __forceinline__ unsigned smem_addr(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }

/* ---- mbarriers ---- */

static __device__ __forceinline__ void bar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

static __device__ __forceinline__ void bar_arrive(unsigned bar) {
    asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.release.cta.shared::cta.b64 state, [%0];\n}\n" ::"r"(bar) : "memory");
}

static __device__ __forceinline__ void bar_arrive_expect(unsigned bar, unsigned bytes) {
    asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.expect_tx.release.cta.shared::cta.b64 state, [%0], %1;\n}\n" ::"r"(bar),
                 "r"(bytes)
                 : "memory");
}

static __device__ __forceinline__ void bar_wait(unsigned bar, unsigned parity) {
    unsigned done;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.acquire.cta.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
    } while (!done);
}

/* A box of a 2D tensor map at coordinates (c0 innermost, c1) into shared memory; its bytes count on bar. */
static __device__ __forceinline__ void tma_load(unsigned dst, const tmap_t *map, int c0, int c1, unsigned bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
                     dst),
                 "l"((unsigned long long)map), "r"(c0), "r"(c1), "r"(bar)
                 : "memory");
}

#if KS == 1
/* A box of shared memory to a 2D tensor map's coordinates (c0 innermost, c1), asynchronously. */
static __device__ __forceinline__ void tma_store(const tmap_t *map, int c0, int c1, unsigned src) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"((unsigned long long)map),
                 "r"(c0), "r"(c1), "r"(src)
                 : "memory");
}
#endif

/* ---- warpgroup MMA ---- */

static __device__ __forceinline__ void wgmma_fence(void) { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
static __device__ __forceinline__ void wgmma_commit(void) { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
static __device__ __forceinline__ void wgmma_wait1(void) { asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory"); }
static __device__ __forceinline__ void wgmma_wait0(void) { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }

/* Keeps the compiler from moving accesses of an accumulator across the asynchronous MMAs. */
static __device__ __forceinline__ void fence_acc(float *d, int n) {
#pragma unroll
    for (int i = 0; i < n; i++) asm volatile("" : "+f"(d[i])::"memory");
}

/* A shared-memory matrix descriptor with the 128-byte swizzle. */
static __device__ __forceinline__ unsigned long long make_desc(unsigned addr, unsigned lead, unsigned stride) {
    return (unsigned long long)((addr & 0x3FFFF) >> 4) | ((unsigned long long)((lead >> 4) & 0x3FFF) << 16) |
           ((unsigned long long)((stride >> 4) & 0x3FFF) << 32) | (1ull << 62);
}

/* D (64 x n, f32) += A (64 x 16, K-major) * B (16 x n, N-major), both from shared memory;
 * accumulate == 0: D = A * B. */
#if BN == 64
static __device__ __forceinline__ void wgmma_n64(float *d, unsigned long long da, unsigned long long db, int accumulate) {
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "setp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
                 "}, %32, %33, p, 1, 1, 0, 1;\n"
                 "}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "l"(da), "l"(db), "r"(accumulate));
}

#elif BN == 128
static __device__ __forceinline__ void wgmma_n128(float *d, unsigned long long da, unsigned long long db, int accumulate) {
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "setp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
                 "}, %64, %65, p, 1, 1, 0, 1;\n"
                 "}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                   "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(da), "l"(db), "r"(accumulate));
}

#else
static __device__ __forceinline__ void wgmma_n256(float *d, unsigned long long da, unsigned long long db, int accumulate) {
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "setp.ne.b32 p, %130, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
                 "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
                 "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
                 "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
                 "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
                 "}, %128, %129, p, 1, 1, 0, 1;\n"
                 "}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                   "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
                   "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
                   "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
                   "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
                   "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
                   "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
                   "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
                   "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
                   "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
                 : "l"(da), "l"(db), "r"(accumulate));
}

#endif
#define WGMMA_N(n) wgmma_n##n
#define WGMMA_(n) WGMMA_N(n)
#define WGMMA WGMMA_(BN)

static __device__ __forceinline__ unsigned pack_bf16x2(float lo, float hi) {
    unsigned d;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(hi), "f"(lo));
    return d;
}

#if KS > 1
static __device__ __forceinline__ void cluster_sync(void) {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

static __device__ __forceinline__ unsigned peer_addr(unsigned addr, unsigned rank) {
    unsigned r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(addr), "r"(rank));
    return r;
}

static __device__ __forceinline__ void ld_peer4(float v[4], unsigned addr) {
    asm volatile("ld.shared::cluster.v4.f32 {%0,%1,%2,%3}, [%4];\n" : "=f"(v[0]), "=f"(v[1]), "=f"(v[2]), "=f"(v[3]) : "r"(addr));
}
#endif

/* Piece p of the work: tile p / KS, in groups of GROUP_M tile rows, and its KS-th (p % KS) of
 * the tile's k-steps. */
static __device__ __forceinline__ void piece_of(long long p, long long tiles_m, long long tiles_n, int kiters, long long *m0,
                                                long long *n0, int *kbeg, int *steps) {
    const long long tile = p / KS, split = p % KS;
    const long long group = tile / (GROUP_M * tiles_n), first_m = group * GROUP_M;
    const long long gsize = tiles_m - first_m < GROUP_M ? tiles_m - first_m : GROUP_M;
    *m0 = (first_m + (tile % (GROUP_M * tiles_n)) % gsize) * BM;
    *n0 = ((tile % (GROUP_M * tiles_n)) / gsize) * BN;
    *kbeg = (int)(kiters * split / KS);
    *steps = (int)(kiters * (split + 1) / KS) - *kbeg;
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
#if KS > 1
__cluster_dims__(KS, 1, 1)
#endif
gemm90(const bf16_t *__restrict__ A, const bf16_t *__restrict__ B, bf16_t *__restrict__ C, long long M, long long N,
       long long K, const __grid_constant__ tmap_t tma_a, const __grid_constant__ tmap_t tma_b,
       const __grid_constant__ tmap_t tma_c) {
    extern __shared__ unsigned char smem[];
    __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES], turn[2];
    const unsigned base = (smem_addr(smem) + 1023u) & ~1023u; /* the swizzle repeats every 1024 bytes */
    const unsigned full0 = smem_addr(full), empty0 = smem_addr(empty);

    const int wg = threadIdx.x >> 7, t = threadIdx.x & 127, lane = t & 31, wl = t >> 5;
    const long long tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN, pieces = tiles_m * tiles_n * KS;
    const int kiters = (int)((K + 63) / 64);

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++) bar_init(full0 + s * 8, 1), bar_init(empty0 + s * 8, PP ? 1 : WGS);
        bar_init(smem_addr(&turn[0]), 1), bar_init(smem_addr(&turn[1]), 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (wg == WGS) { /* the producer: k-steps of every piece this block takes, g counting them all */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(REGS_PRODUCER));
        if (t == 0) {
            asm volatile("prefetch.tensormap [%0];\n" ::"l"((unsigned long long)&tma_a) : "memory");
            asm volatile("prefetch.tensormap [%0];\n" ::"l"((unsigned long long)&tma_b) : "memory");
            int g = 0;
            for (long long piece = blockIdx.x; piece < pieces; piece += gridDim.x) {
                long long m0, n0;
                int kbeg, steps;
                piece_of(piece, tiles_m, tiles_n, kiters, &m0, &n0, &kbeg, &steps);
                for (int s = 0; s < steps; s++, g++) {
                    const int slot = g % STAGES;
                    if (g >= STAGES) bar_wait(empty0 + slot * 8, (unsigned)(g / STAGES - 1) & 1);
                    const unsigned st = base + slot * STAGE_BYTES, bar = full0 + slot * 8;
                    const int k0 = (kbeg + s) * 64;
                    bar_arrive_expect(bar, STAGE_BYTES);
#pragma unroll
                    for (int i = 0; i < BM / 64; i++) tma_load(st + i * 8192, &tma_a, k0, (int)m0 + i * 64, bar);
#pragma unroll
                    for (int p = 0; p < BN / 64; p++) tma_load(st + A_BYTES + p * 8192, &tma_b, (int)n0 + p * 64, k0, bar);
                }
            }
        }
#if KS > 1
        cluster_sync(); /* the consumers' partial tiles are written */
        cluster_sync(); /* and summed */
#endif
        return;
    }

    /* a consumer: rows [ROW0, ROW0 + WG_ROWS) of each tile it takes (with PP, every other tile) */
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(REGS_CONSUMER));
    float acc[MT][BN / 2];
    int g = 0; /* the stage counter */
    for (long long j = PP ? wg : 0, piece = blockIdx.x + j * gridDim.x; piece < pieces;
         j += PP ? 2 : 1, piece += (PP ? 2 : 1) * (long long)gridDim.x) {
        long long m0, n0;
        int kbeg, steps;
        piece_of(piece, tiles_m, tiles_n, kiters, &m0, &n0, &kbeg, &steps);
#if PP
        /* the two consumers' main loops take turns (the other's epilogue runs meanwhile): so they
         * wait for the stages in order, as the stage barriers' parities require */
        g = (int)(j * steps); /* at tile j's first k-step: every tile has as many (KS == 1) */
        const long long mine = j >> 1; /* this consumer's tiles before this one */
        if (wg == 1 || mine > 0) bar_wait(smem_addr(&turn[wg]), (unsigned)(wg == 0 ? mine - 1 : mine) & 1);
#endif
        for (int s = 0; s < steps; s++, g++) {
            const int slot = g % STAGES;
            bar_wait(full0 + slot * 8, (unsigned)(g / STAGES) & 1);
            const unsigned sa = base + slot * STAGE_BYTES + ROW0 * 128, sb = base + slot * STAGE_BYTES + A_BYTES;
#pragma unroll
            for (int i = 0; i < MT; i++) fence_acc(acc[i], BN / 2);
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < 4; kk++)
#pragma unroll
                for (int i = 0; i < MT; i++)
                    WGMMA(acc[i], make_desc(sa + i * 64 * 128 + kk * 32, 16, 1024), make_desc(sb + kk * 2048, 8192, 1024),
                          s > 0 || kk > 0);
            wgmma_commit();
            wgmma_wait1(); /* the step before is done: its stage may be refilled */
#pragma unroll
            for (int i = 0; i < MT; i++) fence_acc(acc[i], BN / 2);
            if (s > 0 && t == 0) bar_arrive(empty0 + ((g - 1) % STAGES) * 8);
        }
#if PP
        if (t == 0) bar_arrive(smem_addr(&turn[wg ^ 1])); /* every stage of this tile waited for: the other's turn */
#endif
        wgmma_wait0();
#pragma unroll
        for (int i = 0; i < MT; i++) fence_acc(acc[i], BN / 2);
        if (steps > 0 && t == 0) bar_arrive(empty0 + ((g - 1) % STAGES) * 8);
        if (steps == 0) /* a split piece past the k-steps (K of fewer than KS steps of 64): adds zeros */
#pragma unroll
            for (int i = 0; i < MT; i++)
#pragma unroll
                for (int j = 0; j < BN / 2; j++) acc[i][j] = 0.0f;

        /* thread (wl, lane) of the warpgroup holds, for each n8 column block j, rows r and r + 8 */
#if KS == 1
        /* this warpgroup's rows of the tile, as BN / 64 panels of WG_ROWS rows of 128 bytes, swizzled */
        const unsigned cbuf = base + STAGES * STAGE_BYTES + wg * (WG_ROWS * BN * 2);
        if (t == 0) asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); /* the last store has read it */
        asm volatile("bar.sync %0, 128;\n" ::"r"(2 + wg) : "memory");
#pragma unroll
        for (int i = 0; i < MT; i++)
#pragma unroll
            for (int j = 0; j < BN / 8; j++) {
                const int r = i * 64 + wl * 16 + (lane >> 2);
                const unsigned at = cbuf + (j >> 3) * (WG_ROWS * 128) + (lane & 3) * 4;
                asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(at + r * 128 + (((j & 7) ^ (r & 7)) << 4)),
                             "r"(pack_bf16x2(acc[i][4 * j], acc[i][4 * j + 1])) : "memory");
                asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(at + (r + 8) * 128 + (((j & 7) ^ ((r + 8) & 7)) << 4)),
                             "r"(pack_bf16x2(acc[i][4 * j + 2], acc[i][4 * j + 3])) : "memory");
            }
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); /* the copy engine reads what was written */
        asm volatile("bar.sync %0, 128;\n" ::"r"(2 + wg) : "memory");
        if (t == 0) {
#pragma unroll
            for (int p = 0; p < BN / 64; p++)
#pragma unroll
                for (int i = 0; i < MT; i++)
                    tma_store(&tma_c, (int)n0 + p * 64, (int)m0 + ROW0 + i * 64, cbuf + p * (WG_ROWS * 128) + i * 64 * 128);
            asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
        }
#else
        /* every consumer's MMAs are complete before the partial tile goes over the stages */
        asm volatile("bar.sync 1, %0;\n" ::"n"(WGS * 128) : "memory");
        float *red = (float *)(smem + (base - smem_addr(smem)));
#pragma unroll
        for (int i = 0; i < MT; i++)
#pragma unroll
            for (int j = 0; j < BN / 8; j++) {
                const int r = wg * WG_ROWS + i * 64 + wl * 16 + (lane >> 2), c = j * 8 + (lane & 3) * 2;
                red[r * RED_LD + c] = acc[i][4 * j], red[r * RED_LD + c + 1] = acc[i][4 * j + 1];
                red[(r + 8) * RED_LD + c] = acc[i][4 * j + 2], red[(r + 8) * RED_LD + c + 1] = acc[i][4 * j + 3];
            }
        cluster_sync();
        /* this block sums rows [split * BM / KS, (split + 1) * BM / KS) over the cluster and stores them */
        const int rows = BM / KS, r0 = (int)(piece % KS) * rows;
        for (int e = threadIdx.x * 4; e < rows * BN; e += WGS * 128 * 4) {
            const int r = r0 + e / BN, c = e % BN;
            const long long gm = m0 + r, gn = n0 + c;
            const unsigned mine = smem_addr(red + r * RED_LD + c);
            float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
            for (int q = 0; q < KS; q++) {
                float p[4];
                ld_peer4(p, peer_addr(mine, (unsigned)q));
                v[0] += p[0], v[1] += p[1], v[2] += p[2], v[3] += p[3];
            }
            if (gm < M && gn < N) { /* N is a multiple of 8: the four columns are in or out together */
                const unsigned lo = pack_bf16x2(v[0], v[1]), hi = pack_bf16x2(v[2], v[3]);
                asm volatile("st.global.v2.b32 [%0], {%1, %2};\n" ::"l"(C + gm * N + gn), "r"(lo), "r"(hi) : "memory");
            }
        }
        cluster_sync(); /* no block leaves while another still reads its partial tile */
#endif
    }
#if KS == 1
    if (t == 0) asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); /* the stores are done */
#endif
}
