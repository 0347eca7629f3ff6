/* A kernel whose MODE picks how it behaves: 0 correct, 1 null write, 2 abort, 3 endless loop,
 * 4 a write 64 GiB out of bounds, 5 allocates until memory runs out, 6 correct but slower: it
 * sleeps 20 ms first, a floor no load can lower (when it only did 20 times MODE 0's work, a few
 * microseconds, one preempted run of MODE 0 under the test suite's parallel load made MODE 6 the
 * pick). */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <stdlib.h>
#include <time.h>

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
#elif MODE == 6
    struct timespec nap = {0, 20 * 1000 * 1000};
    nanosleep(&nap, NULL);
#endif
    for (int i = 0; i < n; i++) out[i] = 2.0f * in[i];
}
