/*
 * gpu-harness.h - the checks of the GPU suites (cuda-check.c, cuda-gemm-check.c,
 * cuda-rowsum-check.c), which run where no test framework is installed: CHECK counts a passed
 * or failed condition and prints a failure with its place; OK_SAYING checks that a call returned
 * KT_OK and leaves the calling function when it did not. Each suite prints "N passed, M failed".
 */
#ifndef KT_GPU_HARNESS_H
#define KT_GPU_HARNESS_H

#include <kerntune.h>

#include <stdio.h>

static int passed, failed;

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (cond) {                                                        \
            passed++;                                                      \
        } else {                                                           \
            failed++;                                                      \
            printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);         \
            printf(__VA_ARGS__);                                           \
            printf("\n");                                                  \
        }                                                                  \
    } while (0)

/* what: the message to print when call fails (a string expression) */
#define OK_SAYING(call, what)                                                                  \
    do {                                                                                       \
        kt_status st_ = (call);                                                                \
        CHECK(st_ == KT_OK, "%s returned %s: %s", #call, kt_status_name(st_), (what));         \
        if (st_ != KT_OK) return;                                                              \
    } while (0)

#endif
