/*
 * rowsum.cu - the row-sum op's kernels (ops/rowsum.c builds the op on them): out[r] is the sum of
 * in[r][0..cols), f32, in holding rows x cols elements row-major. Three implementations, each a
 * variant group of its own, compiled by NVRTC with one of ROWSUM_BLOCK_PER_ROW, ROWSUM_PERSISTENT
 * or ROWSUM_SPLIT_ROW defined (so a module holds only its own kernel and data) and the group's
 * parameters as defines:
 *
 *   block-per-row  grid = rows: a block of BLOCK threads sums one row.
 *   persistent     grid = min(SMs x BPS, blocks the rows can use): each block loops over rows.
 *                  A row belongs to TPR lanes: 1 to 32 (a sub-warp or a warp, so that short
 *                  rows still keep every lane busy) or, with TPR == BLOCK, the whole block;
 *                  with TPR == 1 and UNROLL > 1, a thread sums UNROLL rows at once.
 *   split-row      grid = (rows, SPLITS): each block sums a slice of its row into a partial;
 *                  the last block of the row to finish adds the row's partials and writes out.
 *
 * Every kernel is correct for any rows >= 1, any cols >= 1 (cols = 1 included) and any row start
 * on a multiple of 4 bytes, since one decision serves a whole power-of-two bucket of shapes: a
 * lane reads the elements before the row's first 16-byte boundary one at a time, then float4s
 * (UNROLL of them in flight per lane), then the tail. Launch sizes come from the call's rows;
 * rows and cols reach no define. No CUDA headers (the GPU machine has none): plain C types and
 * the compiler's built-ins (shuffles, atomics, fences) only.
 */

#ifndef BLOCK
#error "BLOCK (threads per block) must be defined"
#endif
#if BLOCK % 32 != 0 || BLOCK < 32 || BLOCK > 1024
#error "BLOCK must be a multiple of 32 from 32 to 1024"
#endif
#ifndef UNROLL
#define UNROLL 1
#endif
#if UNROLL < 1
#error "UNROLL must be at least 1"
#endif

/* Four floats read by one 16-byte load. */
struct alignas(16) rowsum_f4 {
    float x, y, z, w;
    __device__ __forceinline__ float sum() const { return (x + y) + (z + w); }
};

/* This lane's share of the sum of row[0..cols), the row being summed by N lanes (lane in
 * [0, N)). The loads of the N lanes are adjacent, so a warp's loads coalesce. */
template <int N>
static __device__ __forceinline__ float rowsum_lane(const float *__restrict__ row, long long cols, int lane) {
    const float *const end = row + cols;
    /* the first 16-byte boundary in the row (0 to 3 elements in: a row starts on a multiple of 4 bytes) */
    const float *body = row + ((((16u - ((unsigned)(unsigned long long)row & 15u)) & 15u) >> 2));
    if (body > end) body = end;
    const rowsum_f4 *v = reinterpret_cast<const rowsum_f4 *>(body) + lane;
    const rowsum_f4 *const vend = reinterpret_cast<const rowsum_f4 *>(body) + ((end - body) >> 2);
    const float *tail = reinterpret_cast<const float *>(vend) + lane;
    float acc = 0.0f;
    for (const float *p = row + lane; p < body; p += N) acc += *p; /* the head: 0 to 3 */
    for (; v + (UNROLL - 1) * N < vend; v += UNROLL * N) {
        rowsum_f4 x[UNROLL]; /* every load issued before the first add */
#pragma unroll
        for (int u = 0; u < UNROLL; u++) x[u] = v[u * N];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) acc += x[u].sum();
    }
    for (; v < vend; v += N) acc += v->sum();
    for (; tail < end; tail += N) acc += *tail; /* the tail: 0 to 3 */
    return acc;
}

/* The sum of v over each group of W adjacent lanes, in the group's first lane. Every lane of the
 * warp must take part (the full mask). */
template <int W>
static __device__ __forceinline__ float rowsum_warp(float v) {
#pragma unroll
    for (int o = W / 2; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o, W);
    return v;
}

/* The sum of v over the block of B threads, in thread 0; part holds B / 32 floats of shared
 * memory. Every thread of the block must call it. Reusing part afterwards needs a
 * __syncthreads() first. */
template <int B>
static __device__ __forceinline__ float rowsum_block(float v, float *part) {
    v = rowsum_warp<32>(v);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0) part[warp] = v;
    __syncthreads();
    v = 0.0f;
    if (warp == 0) v = rowsum_warp<32>(lane < B / 32 ? part[lane] : 0.0f);
    return v;
}

/* ---- block-per-row ------------------------------------------------------------------------- */
#ifdef ROWSUM_BLOCK_PER_ROW
__global__ void __launch_bounds__(BLOCK) rowsum_block_per_row(const float *__restrict__ in, float *__restrict__ out,
                                                              long long rows, long long cols) {
    __shared__ float part[BLOCK / 32];
    const long long r = blockIdx.x; /* grid = rows */
    if (r >= rows) return;           /* the whole block, so no barrier is left waiting */
    const float s = rowsum_block<BLOCK>(rowsum_lane<BLOCK>(in + r * cols, cols, threadIdx.x), part);
    if (threadIdx.x == 0) out[r] = s;
}
#endif

/* ---- persistent ---------------------------------------------------------------------------- */
#ifdef ROWSUM_PERSISTENT
#if !defined(TPR) || !defined(BPS)
#error "the persistent kernel needs TPR (threads per row) and BPS (blocks per multiprocessor)"
#endif
#if TPR != BLOCK && (TPR < 1 || TPR > 32 || 32 % TPR != 0)
#error "TPR must divide 32, or equal BLOCK"
#endif
__global__ void __launch_bounds__(BLOCK, BPS) rowsum_persistent(const float *__restrict__ in, float *__restrict__ out,
                                                                long long rows, long long cols) {
#if TPR == 1 && UNROLL > 1
    /* A thread per row, UNROLL rows at a time, column by column: a column's UNROLL loads are
     * issued before their adds, so a thread keeps UNROLL loads in flight even when a row holds
     * one or two elements (through rowsum_lane it would keep one). The rows of one k are
     * adjacent across the grid's threads, so loads coalesce when rows are short; long rows are
     * better served by the other configurations. No shuffles: the loop may differ per thread. */
    const long long threads = (long long)gridDim.x * BLOCK;
    for (long long base = (long long)blockIdx.x * BLOCK + threadIdx.x; base < rows; base += threads * UNROLL) {
        const float *p[UNROLL];
        float acc[UNROLL];
#pragma unroll
        for (int k = 0; k < UNROLL; k++) {
            const long long r = base + k * threads;
            p[k] = in + (r < rows ? r : rows - 1) * cols; /* a row past the end is not read */
            acc[k] = 0.0f;
        }
        for (long long c = 0; c < cols; c++) {
            float v[UNROLL];
#pragma unroll
            for (int k = 0; k < UNROLL; k++) v[k] = base + k * threads < rows ? p[k][c] : 0.0f;
#pragma unroll
            for (int k = 0; k < UNROLL; k++) acc[k] += v[k];
        }
#pragma unroll
        for (int k = 0; k < UNROLL; k++)
            if (base + k * threads < rows) out[base + k * threads] = acc[k];
    }
#elif TPR <= 32
    /* Each warp sums 32 / TPR rows at a time, TPR lanes to a row. The loop's bound is the same
     * for every lane of the warp (base, not the lane's row), so every lane reaches the shuffles;
     * lanes past the last row add zeros and write nothing. */
    const int lane = threadIdx.x & 31, sub = lane % TPR;
    const long long per_warp = 32 / TPR;
    const long long warp = (long long)blockIdx.x * (BLOCK / 32) + (threadIdx.x >> 5);
    const long long stride = (long long)gridDim.x * (BLOCK / 32) * per_warp;
    for (long long base = warp * per_warp; base < rows; base += stride) {
        const long long r = base + lane / TPR;
        float s = r < rows ? rowsum_lane<TPR>(in + r * cols, cols, sub) : 0.0f;
        s = rowsum_warp<TPR>(s);
        if (sub == 0 && r < rows) out[r] = s;
    }
#else
    /* The whole block sums a row, then moves gridDim.x rows on (the bound is the block's). */
    __shared__ float part[BLOCK / 32];
    for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
        const float s = rowsum_block<BLOCK>(rowsum_lane<BLOCK>(in + r * cols, cols, threadIdx.x), part);
        if (threadIdx.x == 0) out[r] = s;
        __syncthreads(); /* part is reused by the next row */
    }
#endif
}
#endif

/* ---- split-row ----------------------------------------------------------------------------- */
#ifdef ROWSUM_SPLIT_ROW
#if !defined(SPLITS) || !defined(SPLIT_MAX_ROWS) || !defined(SPLIT_MAX_SPLITS)
#error "the split-row kernel needs SPLITS, SPLIT_MAX_ROWS and SPLIT_MAX_SPLITS"
#endif
#if SPLITS < 1 || SPLITS > SPLIT_MAX_SPLITS
#error "SPLITS must be from 1 to SPLIT_MAX_SPLITS"
#endif
/* The module's workspace: each row's partial sums, and how many of its blocks have written
 * theirs. Zero when the module is loaded; the last block of a row sets its count back to zero,
 * so every launch finds them zero. Being one per module, two launches of this module that run
 * at the same time (on two streams) would mix their counts: ops/rowsum.c says so. rowsum.c
 * requires rows <= SPLIT_MAX_ROWS of the calls this kernel may run. */
__device__ float rowsum_partials[SPLIT_MAX_ROWS * SPLIT_MAX_SPLITS];
__device__ unsigned int rowsum_arrived[SPLIT_MAX_ROWS];

/* Two passes over different data in one launch: first each block (r, s) sums slice s of row r
 * (cols / SPLITS elements) into rowsum_partials; then the block that finds itself the row's last
 * to arrive sums the row's SPLITS partials and writes out[r]. No block waits for another, so the
 * order the blocks run in cannot deadlock it.
 * Memory order: a block's thread 0 stores its partial, fences (release), then increments the
 * row's count; the thread that increments it to SPLITS fences (acquire) after its increment, so
 * every other block's partial, stored before that block's fence and increment, is visible to
 * its block past the barrier. Those reads are volatile (from L2, never from this multiprocessor's
 * L1, which is not coherent with other multiprocessors' stores). The partials are added in split
 * order, whichever block came last, so the result is the same bits on every launch. */
__global__ void __launch_bounds__(BLOCK) rowsum_split_row(const float *__restrict__ in, float *__restrict__ out,
                                                          long long rows, long long cols) {
    __shared__ float part[BLOCK / 32];
    __shared__ int last;
    const long long r = blockIdx.x; /* grid = (rows, SPLITS) */
    const int s = blockIdx.y;
    if (r >= rows || r >= SPLIT_MAX_ROWS) return; /* the whole block; rowsum.c's requirement keeps rows in range */
    /* pass 1: this block's slice [lo, hi) of the row; a slice may be empty when cols < SPLITS */
    const long long lo = cols * s / SPLITS, hi = cols * (s + 1) / SPLITS;
    const float v = rowsum_block<BLOCK>(rowsum_lane<BLOCK>(in + r * cols + lo, hi - lo, threadIdx.x), part);
    if (threadIdx.x == 0) {
        rowsum_partials[r * SPLITS + s] = v;
        __threadfence(); /* the partial is visible device-wide before the count says it is there */
        const unsigned int before = atomicAdd(&rowsum_arrived[r], 1u);
        last = before == SPLITS - 1;
        if (last) __threadfence(); /* and this block sees every other block's partial */
    }
    __syncthreads();
    if (!last) return;
    /* pass 2: the last block's first warp adds the row's partials */
    if (threadIdx.x < 32) {
        float t = 0.0f;
        for (int k = threadIdx.x; k < SPLITS; k += 32)
            t += *(volatile const float *)&rowsum_partials[r * SPLITS + k];
        t = rowsum_warp<32>(t);
        if (threadIdx.x == 0) {
            out[r] = t;
            atomicExch(&rowsum_arrived[r], 0u); /* every block of the row has counted: the next launch starts clean */
        }
    }
}
#endif
