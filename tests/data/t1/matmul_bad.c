/* matmul.c's kernel, with a syntax error in the variants where BAD is 1. */
#if BAD
this is not C;
#endif
void matmul(float *c, const float *a, const float *b, int n) {
    for (int i = 0; i < n * n; i++) c[i] = 0;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < n; k++)
            for (int j = 0; j < n; j++) c[i * n + j] += a[i * n + k] * b[k * n + j] * (float)(TI / TI);
}
