/* out[i] = in[i] * coef[i % 16] for i < n: each work-item scales TILE consecutive elements, a
 * work-group LX * TILE of them, so the grid must be n / (LX * TILE) work-groups rounded up
 * (T1 GridDivX ["LX", "TILE"]); coef is in constant memory (T1 MemType Constant). */
__kernel void scale(__global float *out, __global const float *in, __constant float *coef, int n) {
    int base = (get_group_id(0) * LX + get_local_id(0)) * TILE;
    for (int t = 0; t < TILE; t++) {
        int i = base + t;
        if (i < n) out[i] = in[i] * coef[i % 16];
    }
}
