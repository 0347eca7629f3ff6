/* C = A * B (n x n, n = the global size along Y): TM columns per work-item, LX work-items per
 * group along the row. */
__kernel void matmul(__global float *c, __global const float *a, __global const float *b) {
    int n = get_global_size(1);
    int col0 = get_global_id(0) * TM, row = get_global_id(1);
    float acc[TM];
    for (int t = 0; t < TM; t++) acc[t] = 0;
    for (int k = 0; k < n; k++)
        for (int t = 0; t < TM; t++) acc[t] += a[row * n + k] * b[k * n + col0 + t];
    for (int t = 0; t < TM; t++) c[row * n + col0 + t] = acc[t];
}
