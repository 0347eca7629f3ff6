/*
 * hitpath.c - kerntune's own CPU work on the hit path of a device variant (issue [10]), without
 * a GPU: the device here is a backend defined in this file (ABI 7, asynchronous launch) whose
 * launch only records the geometry it is given, so what is left of a call is kerntune's part,
 * which bench/launch.c sees added to cuLaunchKernel's on the GPU machine.
 *
 * The op is a realistic one: y = a*x + y over n elements (buffers x and y, scalars a and n), keyed
 * by n in powers of two and by both pointers' alignment; its variant group has a block size B
 * and a grid of (n + B - 1) // B, which reads an argument, so every call computes its own
 * grid. Three modes, alternated round by round in one process:
 *   direct  the backend's launch_async called directly with the winner's module and geometry
 *           (computed per call, as a direct cuLaunchKernel caller computes its grid);
 *   async   kt_op_call_async hits;
 *   sync    kt_op_call hits (the backend's launch that waits; here it returns at once too).
 * Each round makes --calls calls of a mode; the figure is the median over --rounds of ns per
 * call. Each call's n varies within one key's bucket (n cycles over 8 values in (2^19, 2^20]),
 * so each call's grid differs from the last one's, as it may in a real program; --same-n keeps
 * one n; --only MODE runs that mode alone (for a profiler, or `perf stat` per mode). Not run by
 * the tests.
 *
 * Usage: hitpath [--calls N] [--rounds R] [--same-n] [--only direct|async|sync]
 */
#define _GNU_SOURCE /* mkdtemp */
#include <kerntune.h>
#include <kerntune/backend.h>
#include <kerntune/cache.h>
#include <kerntune/decision.h>
#include <kerntune/device.h>
#include <kerntune/variants.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- the recording device ------------------------------------------------------------------- */

typedef struct hb_module {
    int block; /* B, read back from the artifact */
} hb_module;

/* What the last launch was given: written on every launch so that none can be optimised away. */
static volatile int64_t sink_grid, sink_block;
static volatile uintptr_t sink_arg;
static volatile uint64_t launches;

static size_t hb_count(void *state) {
    (void)state;
    return 1;
}
static kt_status hb_describe(void *state, size_t i, char *name, char *fp, char *err, size_t errlen) {
    (void)state, (void)i, (void)err, (void)errlen;
    snprintf(name, KT_DEVICE_NAME_MAX, "recording device");
    snprintf(fp, KT_DEVICE_FINGERPRINT_MAX, "hitbench:1");
    return KT_OK;
}
static kt_status hb_alloc(void *state, size_t dev, size_t bytes, void **out, char *err, size_t errlen) {
    (void)state, (void)dev;
    *out = calloc(1, bytes ? bytes : 1);
    if (*out == NULL) snprintf(err, errlen, "out of memory");
    return *out ? KT_OK : KT_ERR_NO_MEMORY;
}
static void hb_free(void *state, size_t dev, void *p) {
    (void)state, (void)dev;
    free(p);
}
static kt_status hb_copy(void *state, size_t dev, void *dst, const void *src, size_t bytes, kt_copy_dir dir, char *err,
                         size_t errlen) {
    (void)state, (void)dev, (void)dir, (void)err, (void)errlen;
    memmove(dst, src, bytes);
    return KT_OK;
}
static kt_status hb_fill(void *state, size_t dev, void *p, size_t bytes, const void *pattern, size_t plen, char *err,
                         size_t errlen) {
    (void)state, (void)dev, (void)err, (void)errlen;
    for (size_t i = 0; i < bytes; i += plen) memcpy((char *)p + i, pattern, plen);
    return KT_OK;
}
static kt_status hb_compiler(void *state, size_t dev, char *out, size_t len, char *err, size_t errlen) {
    (void)state, (void)dev, (void)err, (void)errlen;
    snprintf(out, len, "hitbench 1");
    return KT_OK;
}
/* "Builds" a variant: writes its defines into the artifact. */
static kt_status hb_build(void *state, size_t dev, const kt_build_request *req, char *log, size_t loglen) {
    (void)state, (void)dev;
    FILE *f = fopen(req->out_path, "w");
    if (f == NULL) {
        snprintf(log, loglen, "cannot write %s", req->out_path);
        return KT_ERR_BACKEND;
    }
    for (size_t i = 0; i < req->ndefines; i++) fprintf(f, "%s\n", req->defines[i]);
    return fclose(f) == 0 ? KT_OK : KT_ERR_BACKEND;
}
/* "Loads" it: reads B back. */
static kt_status hb_load(void *state, size_t dev, const char *path, const char *kernel, void **module, char *err,
                         size_t errlen) {
    (void)state, (void)dev, (void)kernel;
    FILE *f = fopen(path, "r");
    int block = 0;
    char line[64];
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "B=", 2) == 0) block = atoi(line + 2);
    if (f) fclose(f);
    hb_module *m = block > 0 ? malloc(sizeof *m) : NULL;
    if (m == NULL) {
        snprintf(err, errlen, "%s: no B", path);
        return KT_ERR_BACKEND;
    }
    m->block = block;
    *module = m;
    return KT_OK;
}
static void hb_unload(void *state, size_t dev, void *module) {
    (void)state, (void)dev;
    free(module);
}
static kt_status hb_launch_async(void *state, size_t dev, void *module, const kt_launch_geometry *g, const kt_arg *args,
                                 size_t nargs, void *queue, char *err, size_t errlen) {
    (void)state, (void)dev, (void)module, (void)nargs, (void)queue, (void)err, (void)errlen;
    sink_grid = g->global[0];
    sink_block = g->local[0];
    sink_arg = (uintptr_t)args[0].ptr;
    launches = launches + 1;
    return KT_OK;
}
/* The launch that waits: the same, with a device time that makes B=256 the winner. */
static kt_status hb_launch(void *state, size_t dev, void *module, const kt_launch_geometry *g, const kt_arg *args,
                           size_t nargs, double *ns, char *err, size_t errlen) {
    if (ns) *ns = ((const hb_module *)module)->block == 256 ? 1000.0 : 2000.0;
    return hb_launch_async(state, dev, module, g, args, nargs, NULL, err, errlen);
}
static kt_status hb_wait(void *state, size_t dev, void *queue, char *err, size_t errlen) {
    (void)state, (void)dev, (void)queue, (void)err, (void)errlen;
    return KT_OK;
}

static const kt_backend hitbench = {
    .abi_version = 7, .name = "hitbench", .device_count = hb_count, .device_describe = hb_describe,
    .buffer_alloc = hb_alloc, .buffer_free = hb_free, .buffer_copy = hb_copy, .buffer_fill = hb_fill,
    .artifact_ext = ".hb", .compiler_id = hb_compiler, .build = hb_build, .load = hb_load, .unload = hb_unload,
    .launch = hb_launch, .caps = KT_BACKEND_CAP_HOST_MEMORY | KT_BACKEND_CAP_ASYNC_LAUNCH, .language = "hitbench",
    .launch_async = hb_launch_async, .queue_wait = hb_wait};

/* ---- the benchmark -------------------------------------------------------------------------- */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#define NMAX (1 << 20)
#define NVALUES 8

typedef struct bench {
    kt_op *op;
    float *x, *y;
    int64_t n[NVALUES]; /* the calls' element counts, one bucket */
    long calls;
    hb_module winner;   /* the winner's module as the direct caller holds it */
} bench;

/* Called through a pointer, as the core calls the backend. */
static kt_status (*volatile direct_launch)(void *, size_t, void *, const kt_launch_geometry *, const kt_arg *, size_t, void *,
                                           char *, size_t) = hb_launch_async;

static int direct_calls(bench *b) {
    char err[256];
    for (long k = 0; k < b->calls; k++) {
        int64_t n = b->n[k % NVALUES], bl = b->winner.block;
        kt_arg args[] = {kt_arg_buf(b->x, (size_t)n * sizeof(float)), kt_arg_buf(b->y, (size_t)n * sizeof(float)),
                         kt_arg_f32(2.0f), kt_arg_i64(n)};
        kt_launch_geometry g = {.kind = KT_GEOMETRY_GRID, .global = {(n + bl - 1) / bl, 1, 1}, .local = {bl, 1, 1}};
        if (direct_launch(NULL, 0, &b->winner, &g, args, 4, NULL, err, sizeof err) != KT_OK) return 0;
    }
    return 1;
}

static int kt_calls(bench *b, int async) {
    for (long k = 0; k < b->calls; k++) {
        int64_t n = b->n[k % NVALUES];
        kt_arg args[] = {kt_arg_buf(b->x, (size_t)n * sizeof(float)), kt_arg_buf(b->y, (size_t)n * sizeof(float)),
                         kt_arg_f32(2.0f), kt_arg_i64(n)};
        if ((async ? kt_op_call_async(b->op, NULL, args, 4) : kt_op_call(b->op, args, 4)) != KT_OK) return 0;
    }
    return 1;
}

enum { DIRECT, ASYNC, SYNC, MODES };
static const char *const names[MODES] = {"direct", "kt_op_call_async", "kt_op_call"};

/* ns per call of one round of mode m; negative on a failure. */
static double run(bench *b, int m) {
    uint64_t before = launches;
    double t0 = now();
    int ok = m == DIRECT ? direct_calls(b) : kt_calls(b, m == ASYNC);
    double t = now() - t0;
    if (!ok || launches - before != (uint64_t)b->calls) return -1;
    /* the last call's geometry: that of the last n with the winner's block */
    int64_t n = b->n[(b->calls - 1) % NVALUES];
    if (sink_block != b->winner.block || sink_grid != (n + b->winner.block - 1) / b->winner.block ||
        sink_arg != (uintptr_t)b->x)
        return -1;
    return t * 1e9 / (double)b->calls;
}

int main(int argc, char **argv) {
    long calls = 2000000;
    int rounds = 9, same_n = 0, only = -1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--calls") == 0 && i + 1 < argc) calls = atol(argv[++i]);
        else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (strcmp(argv[i], "--same-n") == 0) same_n = 1;
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
            i++;
            only = strcmp(argv[i], "direct") == 0 ? DIRECT : strcmp(argv[i], "async") == 0 ? ASYNC : strcmp(argv[i], "sync") == 0 ? SYNC : -2;
            if (only == -2) {
                fprintf(stderr, "hitpath: --only takes direct, async or sync\n");
                return 2;
            }
        } else {
            fprintf(stderr, "usage: hitpath [--calls N] [--rounds R] [--same-n] [--only direct|async|sync]\n");
            return 2;
        }
    }
    if (calls < 1 || rounds < 1 || rounds > 99) {
        fprintf(stderr, "hitpath: --calls must be at least 1 and --rounds 1..99\n");
        return 2;
    }
    bench b = {.calls = calls};
    for (int i = 0; i < NVALUES; i++) b.n[i] = same_n ? NMAX : NMAX - 1000 * i - 3 * (i & 1);
    b.x = aligned_alloc(256, NMAX * sizeof(float));
    b.y = aligned_alloc(256, NMAX * sizeof(float));
    char dir[] = "/tmp/kt-hitpath-XXXXXX";
    kt_context *ctx = NULL;
    kt_space *sp = NULL;
    size_t dev = (size_t)-1;
    if (b.x == NULL || b.y == NULL || mkdtemp(dir) == NULL) {
        fprintf(stderr, "hitpath: out of memory or no temporary directory\n");
        return 1;
    }
    if (kt_context_create(&ctx) != KT_OK || kt_context_set_cache(ctx, "off") != KT_OK ||
        kt_context_set_artifact_dir(ctx, dir) != KT_OK || kt_context_add_backend(ctx, &hitbench) != KT_OK) {
        fprintf(stderr, "hitpath: %s\n", kt_last_error());
        return 1;
    }
    for (size_t i = 0; i < kt_context_device_count(ctx); i++)
        if (strcmp(kt_device_backend(kt_context_device(ctx, i)), "hitbench") == 0) dev = i;
    const char *grid[3] = {"(n + B - 1) // B", NULL, NULL}, *block[3] = {"B", NULL, NULL};
    if (dev == (size_t)-1 || kt_op_create(ctx, "axpy", &b.op) != KT_OK || kt_op_set_device(b.op, dev) != KT_OK ||
        kt_op_add_buffer(b.op, "x", KT_TYPE_F32, KT_READ_ONLY) != KT_OK ||
        kt_op_add_buffer(b.op, "y", KT_TYPE_F32, KT_READ_WRITE) != KT_OK || kt_op_add_scalar(b.op, "a", KT_TYPE_F32) != KT_OK ||
        kt_op_add_scalar(b.op, "n", KT_TYPE_I64) != KT_OK || kt_op_key_arg(b.op, 3, KT_BUCKET_POW2) != KT_OK ||
        kt_op_key_align(b.op, 0, 256) != KT_OK || kt_op_key_align(b.op, 1, 256) != KT_OK || kt_space_create(&sp) != KT_OK ||
        kt_space_add_input(sp, "n") != KT_OK || kt_space_add_param(sp, "B", "[128, 256]") != KT_OK ||
        kt_space_set_geometry(sp, KT_GEOMETRY_GRID, grid, block, NULL) != KT_OK ||
        kt_op_add_variants(b.op, "axpy", sp, "a kernel the recording device does not read", "axpy", NULL, 0) != KT_OK) {
        fprintf(stderr, "hitpath: %s\n", kt_last_error());
        return 1;
    }
    kt_space_destroy(sp);
    kt_arg args[] = {kt_arg_buf(b.x, NMAX * sizeof(float)), kt_arg_buf(b.y, NMAX * sizeof(float)), kt_arg_f32(2.0f),
                     kt_arg_i64(NMAX)};
    const kt_decision *d = NULL;
    const char *cfg = NULL;
    if (kt_op_tune(b.op, args, 4) != KT_OK || kt_op_decision(b.op, args, 4, &d) != KT_OK ||
        (cfg = kt_decision_unit_config(d, kt_decision_winner_unit(d))) == NULL || sscanf(cfg, "B=%d", &b.winner.block) != 1) {
        fprintf(stderr, "hitpath: tuning: %s\n", kt_last_error());
        return 1;
    }
    double t[MODES][99] = {{0}};
    for (int r = 0; r < rounds; r++)
        for (int m = 0; m < MODES; m++)
            if ((only < 0 || m == only) && (t[m][r] = run(&b, m)) < 0) {
                fprintf(stderr, "hitpath: %s failed or launched the wrong geometry: %s\n", names[m], kt_last_error());
                return 1;
            }
    double med[MODES];
    printf("%ld calls per round (n %s, B=%d, the winner's), median of %d rounds\n", calls,
           same_n ? "fixed" : "cycling over 8 values of one bucket", b.winner.block, rounds);
    printf("%-18s %10s %10s %10s\n", "mode", "ns/call", "- direct", "/ direct");
    for (int m = 0; m < MODES; m++) {
        qsort(t[m], (size_t)rounds, sizeof(double), cmp);
        med[m] = t[m][rounds / 2];
        printf("%-18s %10.2f %10.2f %10.2f\n", names[m], med[m], med[m] - med[DIRECT], med[m] / med[DIRECT]);
    }
    printf("RESULT hitpath_direct_ns %.2f ns\n", med[DIRECT]);
    printf("RESULT hitpath_async_overhead_ns %.2f ns\n", med[ASYNC] - med[DIRECT]);
    printf("RESULT hitpath_sync_overhead_ns %.2f ns\n", med[SYNC] - med[DIRECT]);
    kt_context_destroy(ctx);
    free(b.x);
    free(b.y);
    char rm[96];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    return system(rm) == 0 ? 0 : 1;
}
