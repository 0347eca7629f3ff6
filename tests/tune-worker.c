/*
 * tune-worker.c - one of many processes tuning against one persistent cache (test-persist.c).
 *
 * usage: tune-worker CACHE INDEX
 * Tunes op "shared" for keys 0..3 (the same in every worker) and key 100 + INDEX (its own),
 * each with a fast and a 10x slower native candidate, and checks that each call's output is
 * its decision's winner's. Exits 0 when every call succeeded so, 1 otherwise (saying why).
 */
#include <kerntune.h>
#include <kerntune/cache.h>
#include <kerntune/validation.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int work(const kt_arg *args, size_t nargs, void *user) {
    (void)nargs;
    volatile unsigned long x = 1;
    for (unsigned long i = 0; i < (unsigned long)(uintptr_t)user * 20000; i++) x = x * 6364136223846793005ul + 1;
    int32_t id = (int32_t)(uintptr_t)user;
    memcpy(args[0].ptr, &id, sizeof id);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: tune-worker CACHE INDEX\n");
        return 2;
    }
    kt_context *ctx = NULL;
    kt_op *op = NULL;
    if (kt_context_create(&ctx) != KT_OK || kt_context_set_cache(ctx, argv[1]) != KT_OK ||
        kt_op_create(ctx, "shared", &op) != KT_OK || kt_op_set_validation(op, 0) != KT_OK ||
        kt_op_add_buffer(op, "out", KT_TYPE_I32, KT_WRITE_ONLY) != KT_OK || kt_op_add_scalar(op, "n", KT_TYPE_I64) != KT_OK ||
        kt_op_key_arg(op, 1, KT_BUCKET_EXACT) != KT_OK || kt_op_add_native(op, "fast", work, (void *)(uintptr_t)1) != KT_OK ||
        kt_op_add_native(op, "slow", work, (void *)(uintptr_t)10) != KT_OK) {
        fprintf(stderr, "tune-worker: setup: %s\n", kt_last_error());
        return 1;
    }
    int64_t keys[5] = {0, 1, 2, 3, 100 + atoi(argv[2])};
    int rc = 0;
    for (int k = 0; k < 5; k++) {
        int32_t out = 0;
        kt_arg args[2] = {kt_arg_buf(&out, sizeof out), kt_arg_i64(keys[k])};
        if (kt_op_call(op, args, 2) != KT_OK) {
            fprintf(stderr, "tune-worker %s: key %lld: %s\n", argv[2], (long long)keys[k], kt_last_error());
            rc = 1;
        } else {
            /* the call's output is its decision's winner's (which one wins is timing: 32
             * processes share two cores here) */
            const kt_decision *d = NULL;
            if (kt_op_decision(op, args, 2, &d) != KT_OK || out != (int32_t)kt_decision_winner(d) * 9 + 1) {
                fprintf(stderr, "tune-worker %s: key %lld: output %d is not the winner's\n", argv[2], (long long)keys[k], (int)out);
                rc = 1;
            }
        }
    }
    kt_context_destroy(ctx);
    return rc;
}
