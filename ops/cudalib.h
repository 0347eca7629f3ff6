/*
 * cudalib.h - inside the example ops: the driver functions opened by ktops_cuda_open, and the
 * error helpers the ops share.
 */
#ifndef KTOPS_CUDALIB_H
#define KTOPS_CUDALIB_H

#include "cuda_ops.h"

#include <kerntune/variants.h>

#include <string.h> /* memcpy, for KTOPS__LOAD */

struct ktops_cuda {
    void *lib;
    int dev, sms, cc, retained;
    void *ctx;
    int (*Init)(unsigned);
    int (*DeviceGet)(int *, int);
    int (*DeviceGetAttribute)(int *, int, int);
    int (*PrimaryCtxRetain)(void **, int);
    int (*PrimaryCtxRelease)(int);
    int (*CtxSetCurrent)(void *);
    int (*MemAlloc)(unsigned long long *, size_t);
    int (*MemFree)(unsigned long long);
    int (*StreamCreate)(void **, unsigned);
    int (*StreamDestroy)(void *);
    int (*StreamSynchronize)(void *);
    int (*EventCreate)(void **, unsigned);
    int (*EventDestroy)(void *);
    int (*EventRecord)(void *, void *);
    int (*EventSynchronize)(void *);
    int (*EventElapsedTime)(float *, void *, void *);
    int (*LaunchHostFunc)(void *, void (*)(void *), void *);
    int (*GetErrorString)(int, const char **);
    /* cuTensorMapEncodeTiled (CUDA 12 and later; NULL on an older driver) */
    int (*TensorMapEncodeTiled)(void *, int, unsigned, void *, const unsigned long long *, const unsigned long long *,
                                const unsigned *, const unsigned *, int, int, int, int);
    kt_context *kctx; /* kerntune's context and device, whose cache flush ktops_cuda_time_cold uses */
    size_t kdev;
};

/** Sets the thread's message (printf-style) and returns status. */
kt_status ktops__fail(kt_status status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/** KT_OK for CUresult 0, else a failure naming what and the driver's message. */
kt_status ktops__cu(ktops_cuda *cu, int rc, const char *what);

/** dlsym that sets *missing when the symbol is absent. */
void *ktops__sym(void *lib, const char *name, int *missing);

/** Loads symbol name of table->lib into the function pointer table->field (an int `missing`
 *  in scope is set when it is absent). */
#define KTOPS__LOAD(table, field, name) KTOPS__LOAD_AS(table, field, name, missing)
/** The same, setting the int named by flag when the symbol is absent. */
#define KTOPS__LOAD_AS(table, field, name, flag) \
    memcpy(&(table)->field, &(void *){ktops__sym((table)->lib, name, &(flag))}, sizeof(void *))

/** The GEMM kernels' spaces: mma.sync (ops/gemm.cu) with one block per tile, split-K, or the
 * persistent stream-K grid on sms multiprocessors; wgmma (ops/gemm90.cu, Hopper) on a persistent
 * grid, or split-K over clusters. Inputs M, N, K are unbound. */
enum { KTOPS__DATA_PARALLEL, KTOPS__SPLIT_K, KTOPS__STREAM_K, KTOPS__WGMMA, KTOPS__WGMMA_SPLIT_K, KTOPS__SKINNY };
kt_status ktops__gemm_space(int kind, int sms, int cc, kt_space **out);

/** The text of an embedded kernel source (generated from ops/NAME.cu by the build). */
extern const char ktops_gemm_cu[];
extern const char ktops_gemm90_cu[];
extern const char ktops_gemm_skinny_cu[];
extern const char ktops_rowsum_cu[];

#endif /* KTOPS_CUDALIB_H */
