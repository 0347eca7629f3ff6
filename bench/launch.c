/*
 * launch.c - host time per call of a small CUDA kernel, side by side (issue [10]):
 *   direct        cuLaunchKernel of the same kernel on a stream (NVRTC-built here);
 *   kerntune      kt_op_call_async hits on the same stream;
 *   graph-direct  a CUDA graph captured from the direct launches, replayed;
 *   graph-kt      a CUDA graph captured from kt_op_call_async hits, replayed;
 *   sync          kt_op_call, which waits for every launch (what an op did before issue [10]).
 * Each mode makes --calls back-to-back calls with one synchronisation at the end; the figure is
 * the wall time over the calls, the median over --rounds (11); kerntune's cost over a direct
 * launch is the median of the differences taken within each round, the two modes' order
 * swapped from one round to the next. Needs an NVIDIA GPU, libcuda.so.1 and
 * NVRTC (opened at run time, as the CUDA backend does). Prints a table and RESULT lines.
 *
 * Usage: launch [--calls N] [--rounds R]
 */
#define _GNU_SOURCE /* mkdtemp */
#include <kerntune.h>
#include <kerntune/decision.h>
#include <kerntune/device.h>
#include <kerntune/variants.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct drv {
    int (*Init)(unsigned);
    int (*DeviceGet)(int *, int);
    int (*DeviceGetAttribute)(int *, int, int);
    int (*DevicePrimaryCtxRetain)(void **, int);
    int (*CtxSetCurrent)(void *);
    int (*StreamCreate)(void **, unsigned);
    int (*StreamSynchronize)(void *);
    int (*ModuleLoadData)(void **, const void *);
    int (*ModuleGetFunction)(void **, void *, const char *);
    int (*LaunchKernel)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **,
                        void **);
    int (*StreamBeginCapture)(void *, int);
    int (*StreamEndCapture)(void *, void **);
    int (*GraphInstantiate)(void **, void *, unsigned long long);
    int (*GraphLaunch)(void *, void *);
    int (*rtcCreateProgram)(void **, const char *, const char *, int, const char *const *, const char *const *);
    int (*rtcCompileProgram)(void *, int, const char *const *);
    int (*rtcGetCUBINSize)(void *, size_t *);
    int (*rtcGetCUBIN)(void *, char *);
} drv;

static int open_driver(drv *d) {
    void *cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    void *rtc = getenv("KERNTUNE_NVRTC") ? dlopen(getenv("KERNTUNE_NVRTC"), RTLD_NOW | RTLD_LOCAL) : NULL;
    static const char *const rtc_names[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", "/usr/local/cuda/lib64/libnvrtc.so"};
    for (size_t i = 0; rtc == NULL && i < sizeof rtc_names / sizeof rtc_names[0]; i++) rtc = dlopen(rtc_names[i], RTLD_NOW | RTLD_LOCAL);
    if (cu == NULL || rtc == NULL) return 0;
    int all = 1;
#define LOAD(lib, field, name)                  \
    do {                                        \
        void *sym_ = dlsym(lib, name);          \
        all = all && sym_ != NULL;              \
        memcpy(&d->field, &sym_, sizeof sym_);  \
    } while (0)
    LOAD(cu, Init, "cuInit");
    LOAD(cu, DeviceGet, "cuDeviceGet");
    LOAD(cu, DeviceGetAttribute, "cuDeviceGetAttribute");
    LOAD(cu, DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    LOAD(cu, CtxSetCurrent, "cuCtxSetCurrent");
    LOAD(cu, StreamCreate, "cuStreamCreate");
    LOAD(cu, StreamSynchronize, "cuStreamSynchronize");
    LOAD(cu, ModuleLoadData, "cuModuleLoadData");
    LOAD(cu, ModuleGetFunction, "cuModuleGetFunction");
    LOAD(cu, LaunchKernel, "cuLaunchKernel");
    LOAD(cu, StreamBeginCapture, "cuStreamBeginCapture_v2");
    LOAD(cu, StreamEndCapture, "cuStreamEndCapture");
    LOAD(cu, GraphInstantiate, "cuGraphInstantiateWithFlags");
    LOAD(cu, GraphLaunch, "cuGraphLaunch");
    LOAD(rtc, rtcCreateProgram, "nvrtcCreateProgram");
    LOAD(rtc, rtcCompileProgram, "nvrtcCompileProgram");
    LOAD(rtc, rtcGetCUBINSize, "nvrtcGetCUBINSize");
    LOAD(rtc, rtcGetCUBIN, "nvrtcGetCUBIN");
#undef LOAD
    return all;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#define ELEMS 4096

/* The kernel both ways: kerntune's variants (B a parameter) and the direct build (the winner's B). */
static const char *add_cu =
    "extern \"C\" __global__ void add(float *v, float s) {\n"
    "    long i = (long)blockIdx.x * B + threadIdx.x;\n"
    "    v[i] += s;\n"
    "}\n";

typedef struct bench {
    drv d;
    int block;   /* the winner's block size, which the direct launch uses too */
    void *stream, *fn;
    kt_op *op;
    void *dv;
    float s;
    int calls;
} bench;

static void direct_calls(bench *b) {
    unsigned long long ptr = (unsigned long long)(uintptr_t)b->dv;
    void *params[2] = {&ptr, &b->s};
    for (int k = 0; k < b->calls; k++)
        b->d.LaunchKernel(b->fn, (unsigned)(ELEMS / b->block), 1, 1, (unsigned)b->block, 1, 1, 0, b->stream, params, NULL);
}

static int kt_calls(bench *b) {
    kt_arg args[] = {kt_arg_buf(b->dv, ELEMS * sizeof(float)), kt_arg_f32(b->s)};
    for (int k = 0; k < b->calls; k++)
        if (kt_op_call_async(b->op, b->stream, args, 2) != KT_OK) return 0;
    return 1;
}

static int sync_calls(bench *b) {
    kt_arg args[] = {kt_arg_buf(b->dv, ELEMS * sizeof(float)), kt_arg_f32(b->s)};
    for (int k = 0; k < b->calls; k++)
        if (kt_op_call(b->op, args, 2) != KT_OK) return 0;
    return 1;
}

/* A graph of the calls of one mode, captured from the stream. */
static void *capture(bench *b, int kt) {
    void *graph = NULL, *exec = NULL;
    if (b->d.StreamBeginCapture(b->stream, 2 /* relaxed */) != 0) return NULL;
    if (kt) kt_calls(b);
    else direct_calls(b);
    if (b->d.StreamEndCapture(b->stream, &graph) != 0 || b->d.GraphInstantiate(&exec, graph, 0) != 0) return NULL;
    return exec;
}

enum { DIRECT, KT, GRAPH_DIRECT, GRAPH_KT, SYNC, MODES };
static const char *const names[MODES] = {"direct", "kerntune", "graph-direct", "graph-kt", "sync"};

/* Microseconds per call of one run of mode m. */
static double run(bench *b, int m, void *const graphs[2]) {
    b->d.StreamSynchronize(b->stream);
    double t0 = now();
    int ok = 1;
    if (m == DIRECT) direct_calls(b);
    else if (m == KT) ok = kt_calls(b);
    else if (m == GRAPH_DIRECT || m == GRAPH_KT) ok = b->d.GraphLaunch(graphs[m == GRAPH_KT], b->stream) == 0;
    else ok = sync_calls(b);
    ok = ok && b->d.StreamSynchronize(b->stream) == 0;
    double t = now() - t0;
    return ok ? t * 1e6 / b->calls : -1;
}

int main(int argc, char **argv) {
    int calls = 10000, rounds = 11;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--calls") == 0 && i + 1 < argc) calls = atoi(argv[++i]);
        else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) rounds = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: launch [--calls N] [--rounds R]\n");
            return 2;
        }
    }
    if (calls < 1 || rounds < 1 || rounds > 99) {
        fprintf(stderr, "launch: --calls must be at least 1 and --rounds 1..99\n");
        return 2;
    }
    bench b = {.s = 1.0f, .calls = calls};
    kt_context *ctx = NULL;
    char dir[] = "/tmp/kt-launch-XXXXXX";
    if (mkdtemp(dir) == NULL || kt_context_create(&ctx) != KT_OK || kt_context_set_artifact_dir(ctx, dir) != KT_OK) return 1;
    size_t dev = (size_t)-1;
    for (size_t i = 0; i < kt_context_device_count(ctx); i++)
        if (strcmp(kt_device_backend(kt_context_device(ctx, i)), "cuda") == 0) dev = i;
    if (dev == (size_t)-1 || !open_driver(&b.d)) {
        fprintf(stderr, "launch: needs a CUDA device, libcuda.so.1 and NVRTC\n");
        return 1;
    }
    kt_space *sp = NULL;
    const char *grid[3] = {"v // B", NULL, NULL}, *block[3] = {"B", NULL, NULL};
    if (kt_device_alloc(ctx, dev, ELEMS * sizeof(float), &b.dv) != KT_OK || kt_op_create(ctx, "add", &b.op) != KT_OK ||
        kt_op_set_device(b.op, dev) != KT_OK || kt_op_add_buffer(b.op, "v", KT_TYPE_F32, KT_READ_WRITE) != KT_OK ||
        kt_op_add_scalar(b.op, "s", KT_TYPE_F32) != KT_OK || kt_space_create(&sp) != KT_OK || kt_space_add_input(sp, "v") != KT_OK ||
        kt_space_add_param(sp, "B", "[128, 256]") != KT_OK || kt_space_set_geometry(sp, KT_GEOMETRY_GRID, grid, block, NULL) != KT_OK ||
        kt_op_add_variants(b.op, "add", sp, add_cu, "add", NULL, 0) != KT_OK) {
        fprintf(stderr, "launch: %s\n", kt_last_error());
        return 1;
    }
    kt_space_destroy(sp);
    kt_arg args[] = {kt_arg_buf(b.dv, ELEMS * sizeof(float)), kt_arg_f32(b.s)};
    if (kt_op_tune(b.op, args, 2) != KT_OK) { /* tuned before any timing or capture */
        fprintf(stderr, "launch: tuning: %s\n", kt_last_error());
        return 1;
    }
    int cudev = 0, major = 0, minor = 0;
    void *cuctx = NULL, *mod = NULL, *prog = NULL;
    b.d.Init(0);
    b.d.DeviceGet(&cudev, 0);
    b.d.DeviceGetAttribute(&major, 75, cudev);
    b.d.DeviceGetAttribute(&minor, 76, cudev);
    char arch[64];
    snprintf(arch, sizeof arch, "--gpu-architecture=sm_%d%d", major, minor);
    const kt_decision *dec = NULL; /* the direct kernel is the winner's code: the same B */
    if (kt_op_decision(b.op, args, 2, &dec) != KT_OK) return 1;
    const char *cfg = kt_decision_unit_config(dec, kt_decision_winner_unit(dec));
    if (cfg == NULL || sscanf(cfg, "B=%d", &b.block) != 1) return 1;
    char def[32];
    snprintf(def, sizeof def, "-DB=%d", b.block);
    const char *opts[] = {arch, def};
    size_t size = 0;
    char *cubin = NULL;
    if (b.d.DevicePrimaryCtxRetain(&cuctx, cudev) != 0 || b.d.CtxSetCurrent(cuctx) != 0 ||
        b.d.StreamCreate(&b.stream, 1 /* non-blocking */) != 0 || b.d.rtcCreateProgram(&prog, add_cu, "add.cu", 0, NULL, NULL) != 0 ||
        b.d.rtcCompileProgram(prog, 2, opts) != 0 || b.d.rtcGetCUBINSize(prog, &size) != 0 || (cubin = malloc(size)) == NULL ||
        b.d.rtcGetCUBIN(prog, cubin) != 0 || b.d.ModuleLoadData(&mod, cubin) != 0 || b.d.ModuleGetFunction(&b.fn, mod, "add") != 0) {
        fprintf(stderr, "launch: building the direct kernel failed\n");
        return 1;
    }
    void *graphs[2] = {capture(&b, 0), capture(&b, 1)};
    if (graphs[0] == NULL || graphs[1] == NULL) {
        fprintf(stderr, "launch: capturing a graph failed\n");
        return 1;
    }
    /* Each round runs every mode once; direct and kerntune swap places every round, so that
     * neither always follows the other (or the synchronous mode), and the difference is taken
     * within a round, where the machine's state is the most alike. */
    double t[MODES][99], diff[99];
    for (int r = 0; r < rounds; r++) {
        for (int m = 0; m < MODES; m++) {
            int mode = r % 2 == 1 && (m == DIRECT || m == KT) ? (m == DIRECT ? KT : DIRECT) : m;
            t[mode][r] = run(&b, mode, graphs);
        }
        diff[r] = t[KT][r] - t[DIRECT][r];
    }
    qsort(diff, (size_t)rounds, sizeof(double), cmp);
    double med[MODES];
    printf("%d back-to-back calls of a %d-element kernel (B=%d, the winner's), one synchronisation; median of %d rounds\n", calls,
           ELEMS, b.block, rounds);
    printf("%-14s %12s\n", "mode", "us per call");
    for (int m = 0; m < MODES; m++) {
        qsort(t[m], (size_t)rounds, sizeof(double), cmp);
        med[m] = t[m][rounds / 2];
        printf("%-14s %12.3f\n", names[m], med[m]);
    }
    printf("RESULT launch_direct_us %.3f us\n", med[DIRECT]);
    printf("RESULT launch_kerntune_us %.3f us\n", med[KT]);
    printf("kerntune over direct, within each round: median %+.3f us, from %+.3f to %+.3f\n", diff[rounds / 2], diff[0],
           diff[rounds - 1]);
    printf("RESULT launch_kerntune_over_direct_us %.3f us\n", diff[rounds / 2]);
    printf("RESULT launch_graph_direct_us %.3f us\n", med[GRAPH_DIRECT]);
    printf("RESULT launch_graph_kerntune_us %.3f us\n", med[GRAPH_KT]);
    printf("RESULT launch_sync_us %.3f us\n", med[SYNC]);
    kt_device_free(ctx, dev, b.dv);
    kt_context_destroy(ctx);
    char rm[96];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    return system(rm) == 0 ? 0 : 1;
}
