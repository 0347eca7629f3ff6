/* Like a stencil with temporal tiling: one launch computes STEPS time steps (each adds one), so
 * every value of STEPS gives another output; UNROLL changes nothing. */
void steps(float *out, const float *in, int n) {
    for (int i = 0; i < n; i++) {
        float v = in[i];
        for (int s = 0; s < STEPS; s++) v += 1.0f;
        out[i] = v + 0.0f * UNROLL;
    }
}
