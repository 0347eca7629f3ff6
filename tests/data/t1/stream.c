/* Eight configurations of one result (out = 2 in), for the fleet's streaming test: V changes
 * only the code, so each configuration is a build of its own. */
void stream(float *out, const float *in, int n) {
    for (int i = 0; i < n; i++) out[i] = 2.0f * in[i] + 0.0f * V;
}
