/* A row stencil in tiles of block_size_x * tile columns, unrolled by unroll: each output is
 * power * rx plus step. The parameters change the loop nest, never the result. */
void stencil(const float *power, float *temp_dst, float rx, float step) {
    for (int r = 0; r < ROWS; r++)
        for (int c0 = 0; c0 < N; c0 += block_size_x * tile)
            for (int c = c0; c < c0 + block_size_x * tile && c < N; c += unroll)
                for (int u = 0; u < unroll && c + u < N; u++) temp_dst[r * N + c + u] = power[r * N + c + u] * rx + step;
}
