/* Every configuration doubles its input, except P == 1, the first configuration: it adds one.
 * A reference taken blindly from the first configuration would call every other one wrong. */
void consensus(float *out, const float *in, int n) {
    for (int i = 0; i < n; i++) out[i] = P == 1 ? in[i] + 1.0f : 2.0f * in[i];
}
