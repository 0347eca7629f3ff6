/* C = A * B (n x n, row-major), tiled over TI rows and TK columns of A. */
void matmul(float *c, const float *a, const float *b, int n) {
    for (int i = 0; i < n * n; i++) c[i] = 0;
    for (int i0 = 0; i0 < n; i0 += TI)
        for (int k0 = 0; k0 < n; k0 += TK)
            for (int i = i0; i < i0 + TI; i++)
                for (int k = k0; k < k0 + TK; k++) {
                    float aik = a[i * n + k];
                    for (int j = 0; j < n; j++) c[i * n + j] += aik * b[k * n + j];
                }
}
