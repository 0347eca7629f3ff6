/*
 * dispatch.c - what a tuned op costs per call on a hit, against calling the same C function
 * directly (through a function pointer, as a library would).
 *
 * For 1, 2 and all hardware threads, each thread makes N calls of each kind on its own buffer;
 * the two kinds alternate for several rounds in one run and the fastest round of each counts,
 * since only side-by-side ratios survive a noisy machine. Prints a table, then RESULT lines.
 *
 * Usage: dispatch [--iterations N] [--rounds R]
 */
#define _GNU_SOURCE
#include <kerntune.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int add_n(const kt_arg *args, size_t nargs, void *user) {
    (void)nargs, (void)user;
    ((int64_t *)args[0].ptr)[0] += args[1].i;
    return 0;
}

static int slower_add(const kt_arg *args, size_t nargs, void *user) {
    (void)nargs, (void)user;
    for (int i = 0; i < 64; i++) ((volatile int64_t *)args[0].ptr)[0] += args[1].i;
    ((int64_t *)args[0].ptr)[0] -= 63 * args[1].i;
    return 0;
}

static kt_native_fn volatile direct_fn = add_n;

typedef struct job {
    kt_op *op;
    long iterations;
    int use_kt;
    pthread_barrier_t *barrier;
    _Alignas(64) int64_t value;
    double seconds;
    int failed;
} job;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *worker(void *p) {
    job *j = p;
    kt_arg args[] = {kt_arg_buf(&j->value, sizeof j->value), kt_arg_i64(3)};
    pthread_barrier_wait(j->barrier);
    double t0 = now();
    if (j->use_kt) {
        for (long i = 0; i < j->iterations; i++)
            if (kt_op_call(j->op, args, 2) != KT_OK) j->failed = 1;
    } else {
        kt_native_fn fn = direct_fn;
        for (long i = 0; i < j->iterations; i++)
            if (fn(args, 2, NULL) != 0) j->failed = 1;
    }
    j->seconds = now() - t0;
    return NULL;
}

/* Runs `threads` threads of one kind; returns mean ns per call per thread, and the aggregate
 * calls per second through *throughput. */
static double run_kind(kt_op *op, int threads, long iterations, int use_kt, double *throughput) {
    pthread_t th[256];
    job *jobs = aligned_alloc(64, sizeof(job) * (size_t)threads);
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, (unsigned)threads);
    for (int t = 0; t < threads; t++) {
        memset(&jobs[t], 0, sizeof jobs[t]);
        jobs[t] = (job){.op = op, .iterations = iterations, .use_kt = use_kt, .barrier = &barrier};
        pthread_create(&th[t], NULL, worker, &jobs[t]);
    }
    double sum = 0, slowest = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(th[t], NULL);
        if (jobs[t].failed || jobs[t].value != 3 * iterations) {
            fprintf(stderr, "dispatch: thread %d computed a wrong result\n", t);
            exit(1);
        }
        sum += jobs[t].seconds;
        if (jobs[t].seconds > slowest) slowest = jobs[t].seconds;
    }
    pthread_barrier_destroy(&barrier);
    free(jobs);
    *throughput = (double)threads * (double)iterations / slowest;
    return sum / threads / (double)iterations * 1e9;
}

int main(int argc, char **argv) {
    long iterations = 20000000;
    int rounds = 5;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--iterations") == 0 && i + 1 < argc) iterations = atol(argv[++i]);
        else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) rounds = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: dispatch [--iterations N] [--rounds R]\n");
            return 2;
        }
    }
    if (iterations < 1 || rounds < 1) {
        fprintf(stderr, "dispatch: --iterations and --rounds must be >= 1\n");
        return 2;
    }
    kt_context *ctx;
    kt_op *op;
    if (kt_context_create(&ctx) || kt_op_create(ctx, "add", &op) ||
        kt_op_add_buffer(op, "acc", KT_TYPE_I64, KT_READ_WRITE) || kt_op_add_scalar(op, "n", KT_TYPE_I64) ||
        kt_op_key_arg(op, 1, KT_BUCKET_EXACT) || kt_op_add_native(op, "slower", slower_add, NULL) ||
        kt_op_add_native(op, "add", add_n, NULL)) {
        fprintf(stderr, "dispatch: setup failed: %s\n", kt_last_error());
        return 1;
    }
    int64_t warm = 0;
    kt_arg args[] = {kt_arg_buf(&warm, sizeof warm), kt_arg_i64(3)};
    if (kt_op_call(op, args, 2) != KT_OK) { /* tunes the key once */
        fprintf(stderr, "dispatch: first call failed: %s\n", kt_last_error());
        return 1;
    }
    const kt_decision *d = NULL;
    if (kt_op_decision(op, args, 2, &d) != KT_OK) {
        fprintf(stderr, "dispatch: no decision after the first call: %s\n", kt_last_error());
        return 1;
    }
    printf("tuned op 'add': winner '%s'\n", kt_op_candidate_name(op, kt_decision_winner(d)));

    int nproc = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (nproc > 256) nproc = 256;
    int counts[3] = {1, 2, nproc};
    int ncounts = nproc > 2 ? 3 : 2;
    double tput1 = 0;
    printf("%8s %12s %12s %12s %16s %16s\n", "threads", "direct ns", "kerntune ns", "overhead ns", "direct calls/s",
           "kerntune calls/s");
    for (int c = 0; c < ncounts; c++) {
        int t = counts[c];
        double best_direct = 1e30, best_kt = 1e30, tput_direct = 0, tput_kt = 0;
        for (int r = 0; r < rounds; r++) {
            double tp;
            double x = run_kind(op, t, iterations, 0, &tp);
            if (x < best_direct) best_direct = x, tput_direct = tp;
            x = run_kind(op, t, iterations, 1, &tp);
            if (x < best_kt) best_kt = x, tput_kt = tp;
        }
        double over = best_kt - best_direct;
        printf("%8d %12.2f %12.2f %12.2f %16.3e %16.3e\n", t, best_direct, best_kt, over, tput_direct, tput_kt);
        if (t == 1) {
            tput1 = tput_kt;
            printf("RESULT dispatch_overhead_ns %.2f ns\n", over);
            printf("RESULT dispatch_direct_ns %.2f ns\n", best_direct);
        } else {
            printf("RESULT dispatch_overhead_ns_%dthreads %.2f ns\n", t, over);
            printf("RESULT dispatch_scaling_%dthreads %.2f x\n", t, tput_kt / tput1);
        }
    }
    kt_context_destroy(ctx);
    return 0;
}
