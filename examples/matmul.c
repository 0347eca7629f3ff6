/*
 * matmul.c - an op with three native candidates of clearly different speed, tuned on its first
 * call for each matrix size and dispatched from memory afterwards.
 *
 * C = A * B for n x n single-precision matrices, row-major:
 *   naive     i-j-k order: walks B down its columns, one cache miss after another;
 *   blocked   i-k-j order in 64 x 64 tiles: walks rows, keeps tiles in cache;
 *   unrolled  blocked, with four rows of C computed per pass over a row of B; it requires
 *             n % 4 == 0, so kerntune never launches it on other sizes.
 *
 * Usage: matmul_demo [N ...]   (default sizes: 128 256 250)
 */
#include <kerntune.h>
#include <kerntune/decision.h>
#include <kerntune/device.h>
#include <kerntune/measure.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { ARG_A, ARG_B, ARG_C, ARG_N };

static int matmul_naive(const kt_arg *args, size_t nargs, void *user) {
    (void)nargs, (void)user;
    const float *a = args[ARG_A].ptr, *b = args[ARG_B].ptr;
    float *c = args[ARG_C].ptr;
    long n = (long)args[ARG_N].i;
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++) {
            float s = 0;
            for (long k = 0; k < n; k++) s += a[i * n + k] * b[k * n + j];
            c[i * n + j] = s;
        }
    return 0;
}

#define TILE 64

static int matmul_blocked(const kt_arg *args, size_t nargs, void *user) {
    (void)nargs, (void)user;
    const float *restrict a = args[ARG_A].ptr, *restrict b = args[ARG_B].ptr;
    float *restrict c = args[ARG_C].ptr;
    long n = (long)args[ARG_N].i;
    memset(c, 0, (size_t)(n * n) * sizeof *c);
    for (long i0 = 0; i0 < n; i0 += TILE)
        for (long k0 = 0; k0 < n; k0 += TILE)
            for (long j0 = 0; j0 < n; j0 += TILE) {
                long i1 = i0 + TILE < n ? i0 + TILE : n, k1 = k0 + TILE < n ? k0 + TILE : n;
                long j1 = j0 + TILE < n ? j0 + TILE : n;
                for (long i = i0; i < i1; i++)
                    for (long k = k0; k < k1; k++) {
                        float aik = a[i * n + k];
                        for (long j = j0; j < j1; j++) c[i * n + j] += aik * b[k * n + j];
                    }
            }
    return 0;
}

static int matmul_unrolled(const kt_arg *args, size_t nargs, void *user) {
    (void)nargs, (void)user;
    const float *restrict a = args[ARG_A].ptr, *restrict b = args[ARG_B].ptr;
    float *restrict c = args[ARG_C].ptr;
    long n = (long)args[ARG_N].i; /* a multiple of 4: kerntune checks the requirement */
    memset(c, 0, (size_t)(n * n) * sizeof *c);
    for (long i0 = 0; i0 < n; i0 += TILE)
        for (long k0 = 0; k0 < n; k0 += TILE)
            for (long j0 = 0; j0 < n; j0 += TILE) {
                long i1 = i0 + TILE < n ? i0 + TILE : n, k1 = k0 + TILE < n ? k0 + TILE : n;
                long j1 = j0 + TILE < n ? j0 + TILE : n;
                for (long i = i0; i < i1; i += 4) {
                    float *c0 = c + i * n, *c1 = c0 + n, *c2 = c1 + n, *c3 = c2 + n;
                    for (long k = k0; k < k1; k++) {
                        float a0 = a[i * n + k], a1 = a[(i + 1) * n + k], a2 = a[(i + 2) * n + k],
                              a3 = a[(i + 3) * n + k];
                        const float *bk = b + k * n;
                        for (long j = j0; j < j1; j++) {
                            float bv = bk[j];
                            c0[j] += a0 * bv;
                            c1[j] += a1 * bv;
                            c2[j] += a2 * bv;
                            c3[j] += a3 * bv;
                        }
                    }
                }
            }
    return 0;
}

static int check(kt_status st, const char *what) {
    if (st == KT_OK) return 0;
    fprintf(stderr, "matmul_demo: %s failed: %s: %s\n", what, kt_status_name(st), kt_last_error());
    return 1;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void print_decision(const kt_op *op, const kt_decision *d) {
    static const char *const outcome[] = {"not run", "measured", "rejected (requirements)", "failed", "wrong answer"};
    size_t w = kt_decision_winner(d);
    if (kt_decision_source_of(d) == KT_SOURCE_CACHE) {
        printf("    %-9s %10.3f ms  (recorded in the persistent cache by an earlier run: nothing measured)\n",
               kt_op_candidate_name(op, w), kt_decision_time_ns(d, w) / 1e6);
        return;
    }
    for (size_t c = 0; c < kt_op_candidate_count(op); c++) {
        kt_outcome o = kt_decision_outcome(d, c);
        if (o == KT_OUTCOME_MEASURED)
            printf("    %-9s %10.3f ms  (mean of %u runs)%s\n", kt_op_candidate_name(op, c),
                   kt_decision_time_ns(d, c) / 1e6, kt_decision_runs(d, c), c == w ? "  <- winner" : "");
        else
            printf("    %-9s %13s  %s%s%s\n", kt_op_candidate_name(op, c), "-", outcome[o],
                   kt_decision_message(d, c) ? ": " : "", kt_decision_message(d, c) ? kt_decision_message(d, c) : "");
    }
    printf("    outputs validated against the reference (blocked): %s; extra memory while tuning: %zu bytes\n",
           kt_decision_validated(d) ? "yes" : "no", kt_decision_peak_extra_bytes(d));
}

int main(int argc, char **argv) {
    long sizes[16] = {128, 256, 250};
    int nsizes = 3;
    if (argc > 1) {
        nsizes = 0;
        for (int i = 1; i < argc && nsizes < 16; i++) {
            char *end;
            long v = strtol(argv[i], &end, 10);
            if (*end || v < 1 || v > 4096) {
                fprintf(stderr, "usage: matmul_demo [N ...]  (1 <= N <= 4096); got '%s'\n", argv[i]);
                return 2;
            }
            sizes[nsizes++] = v;
        }
    }

    kt_context *ctx = NULL;
    kt_op *op = NULL;
    int bad = check(kt_context_create(&ctx), "kt_context_create");
    if (!bad) bad = check(kt_op_create(ctx, "matmul", &op), "kt_op_create");
    if (!bad) bad = check(kt_op_add_buffer(op, "A", KT_TYPE_F32, KT_READ_ONLY), "add A");
    if (!bad) bad = check(kt_op_add_buffer(op, "B", KT_TYPE_F32, KT_READ_ONLY), "add B");
    if (!bad) bad = check(kt_op_add_buffer(op, "C", KT_TYPE_F32, KT_WRITE_ONLY), "add C");
    if (!bad) bad = check(kt_op_add_scalar(op, "n", KT_TYPE_I64), "add n");
    if (!bad) bad = check(kt_op_key_arg(op, ARG_N, KT_BUCKET_EXACT), "key n");
    if (!bad) bad = check(kt_op_add_native(op, "naive", matmul_naive, NULL), "add naive");
    if (!bad) bad = check(kt_op_add_native(op, "blocked", matmul_blocked, NULL), "add blocked");
    if (!bad) bad = check(kt_op_add_native(op, "unrolled", matmul_unrolled, NULL), "add unrolled");
    if (!bad) bad = check(kt_op_require_multiple(op, "unrolled", ARG_N, 4), "require n % 4");
    if (!bad) bad = check(kt_op_set_default(op, "blocked"), "set default");
    if (bad) {
        kt_context_destroy(ctx);
        return 1;
    }

    printf("kerntune %s: op 'matmul' (C = A * B, float32), candidates naive, blocked, unrolled\n",
           kt_version_string());
    printf("device: %s\n\n", kt_device_name(kt_context_device(ctx, 0)));
    for (int s = 0; s < nsizes && !bad; s++) {
        long n = sizes[s];
        size_t bytes = (size_t)(n * n) * sizeof(float);
        float *a = malloc(bytes), *b = malloc(bytes), *c = malloc(bytes), *ref = malloc(bytes);
        if (!a || !b || !c || !ref) {
            fprintf(stderr, "matmul_demo: out of memory for n=%ld\n", n);
            bad = 1;
        }
        for (long i = 0; !bad && i < n * n; i++) {
            a[i] = (float)((i * 7) % 13) - 6.0f;
            b[i] = (float)((i * 5) % 11) - 5.0f;
        }
        kt_arg args[] = {kt_arg_buf(a, bytes), kt_arg_buf(b, bytes), kt_arg_buf(c, bytes), kt_arg_i64(n)};

        double t0 = now_s();
        if (!bad) bad = check(kt_op_call(op, args, 4), "first call");
        double first = now_s() - t0;
        const kt_decision *d = NULL;
        if (!bad) bad = check(kt_op_decision(op, args, 4, &d), "kt_op_decision");
        if (!bad) {
            printf("n = %ld: first call %s in %.1f ms; decision: %s (confidence %.3f)\n", n,
                   kt_decision_source_of(d) == KT_SOURCE_CACHE ? "served from the cache" : "tuned", first * 1e3,
                   kt_op_candidate_name(op, kt_decision_winner(d)), kt_decision_confidence(d));
            print_decision(op, d);
            /* A second call with the same key is a hit: no measurement. */
            uint64_t runs = kt_op_measured_runs(op);
            t0 = now_s();
            bad = check(kt_op_call(op, args, 4), "second call");
            double second = now_s() - t0;
            printf("  second call: dispatched to %s from memory in %.3f ms, %llu new measured runs\n",
                   kt_op_candidate_name(op, kt_decision_winner(d)), second * 1e3,
                   (unsigned long long)(kt_op_measured_runs(op) - runs));
            /* Every candidate computes the same product: check the winner against naive. */
            kt_arg rargs[] = {args[0], args[1], kt_arg_buf(ref, bytes), args[3]};
            matmul_naive(rargs, 4, NULL);
            double maxerr = 0;
            for (long i = 0; i < n * n; i++) maxerr = fmax(maxerr, fabs((double)c[i] - (double)ref[i]));
            printf("  result check against naive: max |difference| = %g\n\n", maxerr);
            if (maxerr > 1e-2 * (double)n) bad = 1;
        }
        free(a), free(b), free(c), free(ref);
    }
    printf("%zu decision(s), %llu tuning(s), %llu measured runs in all\n", kt_op_decision_count(op),
           (unsigned long long)kt_op_tune_count(op), (unsigned long long)kt_op_measured_runs(op));
    kt_context_destroy(ctx);
    return bad;
}
