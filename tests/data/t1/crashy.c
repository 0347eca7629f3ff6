/* A kernel whose MODE picks how it behaves: 0 correct, 1 null write, 2 abort, 3 endless loop,
 * 4 a write 64 GiB out of bounds, 5 allocates until memory runs out, 6 correct but slower. */
#include <stdlib.h>

void crashy(float *out, const float *in, int n) {
#if MODE == 1
    *(volatile int *)0 = 1;
#elif MODE == 2
    abort();
#elif MODE == 3
    for (volatile long i = 0;; i++) {
    }
#elif MODE == 4
    ((volatile float *)out)[1L << 34] = 1.0f;
#elif MODE == 5
    for (;;) {
        volatile char *p = malloc((size_t)1 << 30);
        if (p == NULL) *(volatile int *)0 = 1; /* out of memory: crash as such a kernel would */
    }
#endif
    for (int r = 0; r < (MODE == 6 ? 20 : 1); r++)
        for (int i = 0; i < n; i++) out[i] = 2.0f * in[i] + (float)r * 0.0f;
}
