/*
 * cuda-check-device.c - the CUDA backend's checks on the device and its builds, run on a GPU
 * machine by scripts/gpu-check: validation runs vouched for on the device (ABI 9: digest and
 * all_close) and kept when the device says nothing, an NVRTC build left hung under a budget of
 * wall seconds cancelled, and Kernel Tuner's compile contract under NVRTC. (cuda-check.c:
 * tuning, artifacts, isolation, launch sizes, constant memory.)
 * Prints one line per check and closes with "N passed, N failed".
 */
#define _GNU_SOURCE /* mkdtemp */
#include "cuda-check.h"
#include "fifo-hang.h"

#include <kerntune.h>
#include <kerntune/backend.h>
#include <kerntune/inputs.h>
#include <kerntune/cache.h>
#include <kerntune/decision.h>
#include <kerntune/device.h>
#include <kerntune/measure.h>
#include <kerntune/validation.h>
#include <kerntune/variants.h>
#include <dirent.h>
#include <math.h>
#include <dlfcn.h>
#include <stdatomic.h>
#include <time.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#if defined(__linux__)
#include <sys/prctl.h>
#endif

/* ---- the backend's checks on the device (ABI 9: digest, all_close) ---------------------------- */

static const char *copy_cu =
    "extern \"C\" __global__ void copy(const float *in, float *out, long long n) {\n"
    "    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
    "    if (i < n) out[i] = in[i];\n"
    "    if (W && i == 0) ((float *)in)[0] = 7.0f; /* writes into its read-only input */\n"
    "}\n";

/* Writes v (a value the type holds exactly: a multiple of 1/2 below 2048, or 0) as type t. */
static void encode_exact(kt_type t, double v, unsigned char *out) {
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, 4);
    if (t == KT_TYPE_F64) {
        memcpy(out, &v, 8);
    } else if (t == KT_TYPE_BF16) {
        uint16_t h = (uint16_t)(u >> 16);
        memcpy(out, &h, 2);
    } else if (t == KT_TYPE_F16) { /* a normal number's sign, exponent rebiased from 127 to 15, mantissa */
        uint16_t h = f == 0.0f ? 0 : (uint16_t)(((u >> 16) & 0x8000u) | ((((u >> 23) & 0xffu) - 112u) << 10) | ((u >> 13) & 0x3ffu));
        memcpy(out, &h, 2);
    } else {
        int32_t i = (int32_t)v;
        memcpy(out, &i, 4);
    }
}

/* The host's rule of all_close: every element within atol + rtol * |e| in double. */
static int host_close_f32(const float *a, const float *e, size_t n, double atol, double rtol) {
    int bad = 0;
    for (size_t i = 0; i < n; i++) bad |= !(fabs((double)a[i] - (double)e[i]) <= atol + rtol * fabs((double)e[i]));
    return !bad;
}

static void check_device_checks(void) {
    const kt_backend *b = kt_backend_cuda();
    void *bs = NULL;
    char err[512] = "";
    if (b->init(b, &bs, err, sizeof err) != KT_OK || b->device_count(bs) == 0) {
        CHECK(0, "the CUDA backend did not start: %s", err);
        return;
    }
    CHECK(b->abi_version >= 9 && b->digest && b->all_close, "the CUDA backend has no device checks");
    enum { BYTES = (1 << 20) + 3, M = 4096 };
    unsigned char *h = malloc(BYTES + 8);
    for (int i = 0; i < BYTES + 8; i++) h[i] = (unsigned char)(i * 2654435761u >> 13);
    void *d1 = NULL, *d2 = NULL;
    OK(b->buffer_alloc(bs, 0, BYTES + 8, &d1, err, sizeof err));
    OK(b->buffer_alloc(bs, 0, BYTES + 8, &d2, err, sizeof err));
    OK(b->buffer_copy(bs, 0, d1, h, BYTES, KT_COPY_HOST_TO_DEVICE, err, sizeof err));
    OK(b->buffer_copy(bs, 0, (char *)d2 + 1, h, BYTES, KT_COPY_HOST_TO_DEVICE, err, sizeof err)); /* off 8 bytes */
    uint64_t g1 = 0, g2 = 1, g3 = 0, g0 = 0;
    OK(b->digest(bs, 0, d1, BYTES, &g1, err, sizeof err));
    OK(b->digest(bs, 0, (char *)d2 + 1, BYTES, &g2, err, sizeof err));
    CHECK(g1 == g2, "the digest of the same bytes depends on their address: %llx %llx", (unsigned long long)g1,
          (unsigned long long)g2);
    for (size_t at = 0; at < BYTES; at += BYTES / 5) { /* one bit of one byte changed anywhere */
        unsigned char c = h[at] ^ 4;
        OK(b->buffer_copy(bs, 0, (char *)d1 + at, &c, 1, KT_COPY_HOST_TO_DEVICE, err, sizeof err));
        OK(b->digest(bs, 0, d1, BYTES, &g3, err, sizeof err));
        CHECK(g3 != g1, "a changed byte at %zu kept the digest", at);
        OK(b->buffer_copy(bs, 0, (char *)d1 + at, &h[at], 1, KT_COPY_HOST_TO_DEVICE, err, sizeof err));
    }
    OK(b->digest(bs, 0, d1, BYTES - 1, &g3, err, sizeof err));
    CHECK(g3 != g1, "one byte less kept the digest");
    OK(b->digest(bs, 0, d1, 0, &g0, err, sizeof err));

    /* all_close, f32: the device says 1 exactly where the host's rule passes, at the boundary too */
    float *a = malloc(M * sizeof *a), *e = malloc(M * sizeof *e);
    int agree = 0, trials = 0, ones = 0;
    for (int t = 0; t < 60; t++) {
        for (int i = 0; i < M; i++) e[i] = (float)((i * 37 + t) % 200) - 100.0f + 0.125f, a[i] = e[i];
        const int at = (t * 131) % M;
        /* around the tolerance edge: a[at] moved by atol + rtol * |e| times 0.5 to 1.5 */
        double edge = 1e-6 + 1e-4 * fabs((double)e[at]);
        a[at] = (float)((double)e[at] + edge * (0.5 + (double)t / 60.0));
        if (t % 10 == 9) a[at] = NAN;
        if (t % 10 == 8) a[at] = e[at] = INFINITY;
        OK(b->buffer_copy(bs, 0, d1, a, M * sizeof *a, KT_COPY_HOST_TO_DEVICE, err, sizeof err));
        OK(b->buffer_copy(bs, 0, d2, e, M * sizeof *e, KT_COPY_HOST_TO_DEVICE, err, sizeof err));
        int close = -1;
        OK(b->all_close(bs, 0, KT_TYPE_F32, d1, d2, M, 1e-6, 1e-4, &close, err, sizeof err));
        const int want = host_close_f32(a, e, M, 1e-6, 1e-4);
        agree += close == want, trials++, ones += close == 1;
    }
    CHECK(agree == trials, "all_close and the host's rule disagree on %d of %d", trials - agree, trials);
    CHECK(ones > 5 && ones < trials - 5, "the boundary trials were all on one side (%d of %d close)", ones, trials);
    int close = -1;
    OK(b->all_close(bs, 0, KT_TYPE_F32, (char *)d1 + 2, d2, 16, 1e-6, 1e-4, &close, err, sizeof err));
    CHECK(close == 0, "a misaligned f32 output was not left to the host");
    /* f64, f16, bf16 and i32: equal passes, one element off fails */
    static const kt_type types[] = {KT_TYPE_F64, KT_TYPE_F16, KT_TYPE_BF16, KT_TYPE_I32};
    for (int k = 0; k < 4; k++) {
        const size_t es = kt_type_size(types[k]), n = 1000;
        unsigned char *x = calloc(n, es);
        for (size_t i = 0; i < n; i++) encode_exact(types[k], (double)(i % 50) * 0.5, x + i * es);
        OK(b->buffer_copy(bs, 0, d1, x, n * es, KT_COPY_HOST_TO_DEVICE, err, sizeof err));
        OK(b->buffer_copy(bs, 0, d2, x, n * es, KT_COPY_HOST_TO_DEVICE, err, sizeof err));
        OK(b->all_close(bs, 0, types[k], d1, d2, n, 1e-3, 1e-2, &close, err, sizeof err));
        CHECK(close == 1, "%s: equal outputs not close", kt_type_name(types[k]));
        encode_exact(types[k], 1000.0, x + 777 * es);
        OK(b->buffer_copy(bs, 0, d1, x, n * es, KT_COPY_HOST_TO_DEVICE, err, sizeof err));
        OK(b->all_close(bs, 0, types[k], d1, d2, n, 1e-3, 1e-2, &close, err, sizeof err));
        CHECK(close == 0, "%s: element 777 off, yet close", kt_type_name(types[k]));
        free(x);
    }
    b->buffer_free(bs, 0, d1);
    b->buffer_free(bs, 0, d2);
    b->fini(bs);
    free(h), free(a), free(e);

    /* end to end: a variant that writes into its read-only input is caught through the digest
     * (its run in a runner process, whose copy of the input comes back) */
    kt_context *ctx = context();
    size_t dev = cuda_device(ctx);
    if (dev == (size_t)-1) return;
    enum { K = 1 << 16 };
    float *in = malloc(K * sizeof *in), *out = malloc(K * sizeof *out);
    for (int i = 0; i < K; i++) in[i] = (float)i;
    void *din, *dout;
    OK(kt_device_alloc(ctx, dev, K * sizeof *in, &din));
    OK(kt_device_alloc(ctx, dev, K * sizeof *out, &dout));
    OK(kt_device_write(ctx, dev, din, in, K * sizeof *in));
    kt_op *op = NULL;
    OK(kt_op_create(ctx, "copy", &op));
    OK(kt_op_set_device(op, dev));
    OK(kt_op_add_buffer(op, "in", KT_TYPE_F32, KT_READ_ONLY));
    OK(kt_op_add_buffer(op, "out", KT_TYPE_F32, KT_WRITE_ONLY));
    OK(kt_op_add_scalar(op, "n", KT_TYPE_I64));
    OK(kt_op_set_inputs(op, KT_INPUTS_CLONE));
    kt_space *sp = NULL;
    OK(kt_space_create(&sp));
    OK(kt_space_add_input(sp, "n"));
    OK(kt_space_add_param(sp, "W", "[0, 1]"));
    const char *grid[3] = {"(n + 255) // 256", NULL, NULL}, *block[3] = {"256", NULL, NULL};
    OK(kt_space_set_geometry(sp, KT_GEOMETRY_GRID, grid, block, NULL));
    OK(kt_op_add_variants(op, "copy", sp, copy_cu, "copy", NULL, 0));
    kt_space_destroy(sp);
    kt_arg args[] = {kt_arg_buf(din, K * sizeof *in), kt_arg_buf(dout, K * sizeof *out), kt_arg_i64(K)};
    OK(kt_op_call(op, args, 3));
    OK(kt_device_read(ctx, dev, out, dout, K * sizeof *out));
    OK(kt_device_read(ctx, dev, in, din, K * sizeof *in));
    CHECK(out[0] == 0.0f && out[K - 1] == (float)(K - 1) && in[0] == 0.0f, "copy: out %g..%g, in[0] %g", out[0],
          out[K - 1], in[0]);
    const kt_decision *d = NULL;
    OK(kt_op_decision(op, args, 3, &d));
    for (size_t u = 0; u < kt_decision_unit_count(d); u++) {
        const char *cfg = kt_decision_unit_config(d, u), *msg = kt_decision_unit_message(d, u);
        if (strstr(cfg, "W=1"))
            CHECK(kt_decision_unit_outcome(d, u) == KT_OUTCOME_INVALID && msg && strcmp(msg, "wrote into read-only argument 'in'") == 0,
                  "the writer: %s (%s)", kt_outcome_name(kt_decision_unit_outcome(d, u)), msg ? msg : "");
        else
            CHECK(kt_decision_unit_outcome(d, u) == KT_OUTCOME_MEASURED, "W=0: %s", kt_outcome_name(kt_decision_unit_outcome(d, u)));
    }
    kt_device_free(ctx, dev, din);
    kt_device_free(ctx, dev, dout);
    free(in), free(out);
    kt_context_destroy(ctx);
}

/* The files in dir whose names start with prefix: how many, and the last one's path. */
static int files_named(const char *dir, const char *prefix, char *last, size_t len) {
    DIR *dp = opendir(dir);
    int n = 0;
    for (struct dirent *e; dp && (e = readdir(dp)) != NULL;)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) n++, snprintf(last, len, "%s/%s", dir, e->d_name);
    if (dp) closedir(dp);
    return n;
}

/* The device checks' build is kept in the directory set_cache_dir gives (ABI 17): the first
 * backend state builds it there (no temporary file left), a second loads that file (the same
 * inode and time: not built again), and one that finds the file damaged builds it again and
 * replaces it, checking as before. */
static void check_device_checks_kept(void) {
    const kt_backend *b = kt_backend_cuda();
    char dir[400], kept[800] = "", other[800] = "", err[512] = "";
    snprintf(dir, sizeof dir, "%s/own-builds", artifacts);
    struct stat st1, st2;
    uint64_t sums[3] = {0, 1, 2};
    for (int round = 0; round < 3; round++) {
        void *bs = NULL;
        if (b->init(b, &bs, err, sizeof err) != KT_OK || b->device_count(bs) == 0) {
            CHECK(0, "the CUDA backend did not start: %s", err);
            return;
        }
        CHECK(b->abi_version >= 17 && b->set_cache_dir, "the CUDA backend takes no directory of its own builds");
        b->set_cache_dir(bs, dir);
        void *buf = NULL;
        unsigned char bytes[4096];
        for (int i = 0; i < 4096; i++) bytes[i] = (unsigned char)(i * 7);
        OK(b->buffer_alloc(bs, 0, sizeof bytes, &buf, err, sizeof err));
        OK(b->buffer_copy(bs, 0, buf, bytes, sizeof bytes, KT_COPY_HOST_TO_DEVICE, err, sizeof err));
        OK(b->digest(bs, 0, buf, sizeof bytes, &sums[round], err, sizeof err));
        b->buffer_free(bs, 0, buf);
        b->fini(bs);
        CHECK(files_named(dir, "cuda-checks-", kept, sizeof kept) == 1, "round %d: not one kept build in %s", round, dir);
        CHECK(files_named(dir, "kerntune-check-", other, sizeof other) == 0, "round %d: a temporary build left: %s", round, other);
        if (round == 0) {
            CHECK(stat(kept, &st1) == 0, "stat %s", kept);
        } else if (round == 1) {
            CHECK(stat(kept, &st2) == 0 && st2.st_ino == st1.st_ino && st2.st_mtime == st1.st_mtime,
                  "the second backend built the checks again instead of loading %s", kept);
            FILE *f = fopen(kept, "wb"); /* damaged: the third builds it again */
            if (f) fputs("not a cubin", f), fclose(f);
        } else {
            CHECK(stat(kept, &st2) == 0 && st2.st_size > 100, "the damaged build was not replaced: %s", kept);
        }
    }
    CHECK(sums[0] == sums[1] && sums[1] == sums[2], "the digests differ: %llx %llx %llx", (unsigned long long)sums[0],
          (unsigned long long)sums[1], (unsigned long long)sums[2]);
}

/* Under a budget of wall seconds, an NVRTC build the tuning leaves running is cancelled: group
 * "hung" compiles with --pre-include of a FIFO nobody writes, so its NVRTC child waits for ever
 * in open(). With one build thread the fast group is built and measured first, and "hung" is
 * built from then on (well before the deadline: the fast build takes under a second); the
 * tuning waits for it until the 5 s deadline, and returns without it (NOT_RUN), having killed
 * the child: the FIFO is left with no reader, and the destroy waits for nothing. (NVRTC fails
 * a compile that reads a FIFO with a writer, so the watcher does not hold it.) */
static void check_budget_cancels_nvrtc(void) {
    static fifo_hang hang; /* the watcher reads it: it outlives an early return */
    if (!fifo_hang_start(&hang, false)) {
        CHECK(0, "cannot make the FIFO or its guard");
        return;
    }
    kt_context *ctx = context();
    size_t dev = cuda_device(ctx);
    if (dev == (size_t)-1) return;
    OK(kt_context_set_compile_threads(ctx, 1));
    kt_op *op = scale_op(ctx, dev, "cancel");
    if (op == NULL) return;
    char include[160];
    snprintf(include, sizeof include, "--pre-include=%s", hang.path);
    OK(add_scale(op, "fast", "[1]", "[64]", NULL, 0));
    OK(add_scale(op, "hung", "[1]", "[64]", (const char *const[]){include}, 1));
    OK(kt_op_set_budget(op, 0, 5.0));
    void *dv;
    OK(kt_device_alloc(ctx, dev, 1 << 20, &dv));
    kt_arg args[] = {kt_arg_buf(dv, 1 << 20), kt_arg_f32(1.0f)};
    double t0 = fifo_now_s();
    OK(kt_op_tune(op, args, 2));
    double took = fifo_now_s() - t0;
    CHECK(took >= 4.5 && took < 30, "the tuning took %.1f s (its deadline: 5 s)", took);
    const kt_decision *d = NULL;
    OK(kt_op_decision(op, args, 2, &d));
    for (size_t u = 0; u < kt_decision_unit_count(d); u++) {
        const char *name = kt_op_candidate_name(op, kt_decision_unit_candidate(d, u));
        if (strcmp(name, "hung") == 0)
            CHECK(kt_decision_unit_outcome(d, u) == KT_OUTCOME_NOT_RUN, "hung: outcome %d", (int)kt_decision_unit_outcome(d, u));
        if (strcmp(name, "fast") == 0)
            CHECK(kt_decision_unit_outcome(d, u) == KT_OUTCOME_MEASURED, "fast: outcome %d", (int)kt_decision_unit_outcome(d, u));
    }
    kt_device_free(ctx, dev, dv);
    const bool unread = fifo_unread(&hang);
    t0 = fifo_now_s();
    kt_context_destroy(ctx);
    took = fifo_now_s() - t0;
    CHECK(took < 30, "the destroy took %.1f s", took);
    const bool fired = fifo_hang_end(&hang);
    CHECK(unread && !fired, "the NVRTC child: gone %d, let finish %d", (int)unread, (int)fired);
    printf("  budget: the tuning returned at its deadline, the hung NVRTC child killed; the destroy took %.2f s\n", took);
}

/* Kernel Tuner's compile contract on NVRTC: a kernel written for Kernel Tuner (its own block size
 * when kernel_tuner is undefined) with `#pragma unroll loop_unroll_factor_0` compiles and runs
 * with the factor 4 (a constexpr int) and 0 (the pragma removed), each its own artifact, and
 * sees the configuration's block and grid. */
static const char *unroll_cu =
    "#ifndef kernel_tuner\n"
    "#define block_size_x 7\n"
    "#endif\n"
    "__global__ void sum8(const float *in, float *out, int *info) {\n"
    "    int i = blockIdx.x * block_size_x + threadIdx.x;\n"
    "    float s = 0;\n"
    "    #pragma unroll loop_unroll_factor_0\n"
    "    for (int k = 0; k < 8; k++) s += in[i * 8 + k];\n"
    "    out[i] = s;\n"
    "    if (i == 0) { info[0] = kernel_tuner; info[1] = grid_size_x; info[2] = block_size_x; }\n"
    "}\n";

static void check_kernel_tuner_contract(void) {
    kt_context *ctx = context();
    size_t dev = cuda_device(ctx);
    if (dev == (size_t)-1) return;
    enum { T = 1024 };
    float *in = malloc(T * 8 * sizeof *in), out[T];
    for (int i = 0; i < T * 8; i++) in[i] = (float)(i % 8);
    void *din, *dout, *dinfo;
    OK(kt_device_alloc(ctx, dev, T * 8 * sizeof *in, &din));
    OK(kt_device_alloc(ctx, dev, sizeof out, &dout));
    OK(kt_device_alloc(ctx, dev, 3 * sizeof(int), &dinfo));
    OK(kt_device_write(ctx, dev, din, in, T * 8 * sizeof *in));
    const char *factors[2] = {"[4]", "[0]"};
    for (int f = 0; f < 2; f++) {
        kt_op *op = NULL;
        char name[32];
        snprintf(name, sizeof name, "sum8_%d", f);
        OK(kt_op_create(ctx, name, &op));
        OK(kt_op_set_device(op, dev));
        OK(kt_op_set_validation(op, 0));
        OK(kt_op_add_buffer(op, "in", KT_TYPE_F32, KT_READ_ONLY));
        OK(kt_op_add_buffer(op, "out", KT_TYPE_F32, KT_WRITE_ONLY));
        OK(kt_op_add_buffer(op, "info", KT_TYPE_I32, KT_WRITE_ONLY));
        kt_space *sp = NULL;
        OK(kt_space_create(&sp));
        OK(kt_space_add_input(sp, "out"));
        OK(kt_space_add_param(sp, "block_size_x", "[64]"));
        OK(kt_space_add_param(sp, "loop_unroll_factor_0", factors[f]));
        const char *grid[3] = {"out // block_size_x", NULL, NULL}, *block[3] = {"block_size_x", NULL, NULL};
        OK(kt_space_set_geometry(sp, KT_GEOMETRY_GRID, grid, block, NULL));
        OK(kt_op_add_variants(op, "sum8", sp, unroll_cu, "sum8", NULL, 0));
        kt_space_destroy(sp);
        OK(kt_op_set_kernel_tuner_contract(op, "sum8", NULL));
        kt_arg args[] = {kt_arg_buf(din, T * 8 * sizeof *in), kt_arg_buf(dout, sizeof out), kt_arg_buf(dinfo, 3 * sizeof(int))};
        kt_status st = kt_op_call(op, args, 3);
        const kt_decision *d = NULL;
        if (st == KT_OK) st = kt_op_decision(op, args, 3, &d);
        CHECK(st == KT_OK, "factor %s: %s", factors[f], kt_last_error());
        if (st != KT_OK) continue;
        CHECK(kt_decision_unit_outcome(d, 0) != KT_OUTCOME_BUILD_FAILED, "factor %s did not build: %s", factors[f],
              kt_decision_unit_message(d, 0) ? kt_decision_unit_message(d, 0) : "");
        int info[3] = {0, 0, 0};
        OK(kt_device_read(ctx, dev, out, dout, sizeof out));
        OK(kt_device_read(ctx, dev, info, dinfo, sizeof info));
        int bad = 0;
        for (int i = 0; i < T; i++) bad += out[i] != 28.0f;
        CHECK(bad == 0, "factor %s: %d sums are not 28", factors[f], bad);
        CHECK(info[0] == 1 && info[1] == T / 64 && info[2] == 64, "factor %s: kernel_tuner %d, grid_size_x %d, block_size_x %d",
              factors[f], info[0], info[1], info[2]);
    }
    CHECK(kt_context_compile_count(ctx) + kt_context_artifact_hits(ctx) == 2, "%llu compiles and %llu hits for two factors",
          (unsigned long long)kt_context_compile_count(ctx), (unsigned long long)kt_context_artifact_hits(ctx));
    kt_device_free(ctx, dev, din), kt_device_free(ctx, dev, dout), kt_device_free(ctx, dev, dinfo);
    free(in);
    kt_context_destroy(ctx);
}

int main(void) {
    cuda_check_begin("device checks");
    check_device_checks();
    check_device_checks_kept();
    check_budget_cancels_nvrtc();
    check_kernel_tuner_contract();
    return cuda_check_end();
}
