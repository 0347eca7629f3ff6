/*
 * isolate-shared.c - isolation in a program linked with the shared library (libkerntune.so),
 * where kerntune's code is not in the program: a native of the program runs in a new start of
 * the program with libkerntune.so preloaded; a C variant runs in kerntune-runner, which finds
 * the C backend's table in libkerntune.so. A crash in either is the runner's, with its kind and
 * signal; the correct candidate wins. Exits 0 when all holds, 1 saying what did not.
 * usage: isolate-shared CRASHY_C (tests/data/t1/crashy.c)
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <kerntune.h>
#include <kerntune/decision.h>
#include <kerntune/measure.h>
#include <kerntune/validation.h>
#include <kerntune/variants.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define N 4096

static int failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "isolate-shared: %s:%d: ", __FILE__, __LINE__);                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, " (last error: %s)\n", kt_last_error());                               \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

static int twice(const kt_arg *args, size_t nargs, void *user) {
    (void)nargs;
    const char *log = getenv("KT_TEST_SHARED_LOG");
    FILE *f = log && user ? fopen(log, "a") : NULL;
    if (f) {
        fprintf(f, "%ld\n", (long)getpid());
        fclose(f);
    }
    float *out = args[0].ptr;
    const float *in = args[1].ptr;
    for (int32_t i = 0; i < (int32_t)args[2].i; i++) out[i] = 2.0f * in[i];
    return 0;
}

static int twice_ref(const kt_arg *args, size_t nargs, void *user, kt_result *res) {
    (void)res, (void)user;
    return twice(args, nargs, NULL);
}

static int segv(const kt_arg *args, size_t nargs, void *user) {
    (void)args, (void)nargs, (void)user;
    volatile int *bad = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (bad != MAP_FAILED) *bad = 1;
    return 1;
}

static kt_op *make_op(kt_context *ctx, const char *name) {
    kt_op *op = NULL;
    if (kt_op_create(ctx, name, &op) || kt_op_add_buffer(op, "out", KT_TYPE_F32, KT_WRITE_ONLY) ||
        kt_op_add_buffer(op, "in", KT_TYPE_F32, KT_READ_ONLY) || kt_op_add_scalar(op, "n", KT_TYPE_I32) ||
        kt_op_set_reference_fn(op, twice_ref, NULL) || kt_op_set_isolation(op, KT_ISOLATE_ON))
        return NULL;
    return op;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return NULL;
    static char text[16384];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    return text;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: isolate-shared CRASHY_C\n");
        return 2;
    }
    char dir[] = "/tmp/kt-isolate-shared-XXXXXX", log[64];
    if (mkdtemp(dir) == NULL) return 2;
    snprintf(log, sizeof log, "%s/log", dir);
    setenv("KT_TEST_SHARED_LOG", log, 1);
    static float out[N], in[N];
    for (int i = 0; i < N; i++) in[i] = (float)(i % 9);
    kt_arg args[3] = {kt_arg_buf(out, sizeof out), kt_arg_buf(in, sizeof in), kt_arg_i32(N)};
    kt_context *ctx = NULL;
    if (kt_context_create(&ctx) != KT_OK || kt_context_set_artifact_dir(ctx, dir) != KT_OK) return 2;

    /* natives of the program */
    kt_op *op = make_op(ctx, "shared-natives");
    CHECK(op != NULL, "making the op");
    if (op == NULL) return 1;
    CHECK(kt_op_add_native(op, "segv", segv, NULL) == KT_OK, "adding segv");
    CHECK(kt_op_add_native(op, "twice", twice, (void *)(intptr_t)1) == KT_OK, "adding twice");
    CHECK(kt_op_call(op, args, 3) == KT_OK, "kt_op_call");
    for (int i = 0; i < N; i++) CHECK(out[i] == 2.0f * in[i], "out[%d] is %g", i, out[i]);
    const kt_decision *d = NULL;
    CHECK(kt_op_decision(op, args, 3, &d) == KT_OK, "kt_op_decision");
    CHECK(kt_decision_unit_outcome(d, 0) == KT_OUTCOME_CRASHED, "segv: outcome %d", (int)kt_decision_unit_outcome(d, 0));
    CHECK(kt_decision_unit_fail_kind(d, 0) == KT_FAIL_CRASH && kt_decision_unit_fail_code(d, 0) == SIGSEGV, "segv: kind %s code %d",
          kt_fail_kind_name(kt_decision_unit_fail_kind(d, 0)), kt_decision_unit_fail_code(d, 0));
    CHECK(kt_decision_winner(d) == 1, "the winner is candidate %zu", kt_decision_winner(d));
    /* twice ran in another process (validation and measured runs), and here once (the call) */
    long pid, here = 0, there = 0;
    FILE *f = fopen(log, "r");
    while (f && fscanf(f, "%ld", &pid) == 1) {
        if (pid == (long)getpid()) here++;
        else there++;
    }
    if (f) fclose(f);
    CHECK(here == 1 && there >= 2, "twice ran %ld times here, %ld in a runner", here, there);

    /* a C variant: the C backend's table is in libkerntune.so */
    const char *src = slurp(argv[1]);
    CHECK(src != NULL, "reading %s", argv[1]);
    kt_op *cop = make_op(ctx, "shared-variants");
    kt_space *sp = NULL;
    CHECK(cop && kt_space_create(&sp) == KT_OK && kt_space_add_param(sp, "MODE", "[0, 1]") == KT_OK, "making the space");
    CHECK(src && kt_op_add_variants(cop, "crashy", sp, src, "crashy", NULL, 0) == KT_OK, "adding the variants");
    kt_space_destroy(sp);
    memset(out, 0, sizeof out);
    CHECK(kt_op_call(cop, args, 3) == KT_OK, "kt_op_call (variants)");
    for (int i = 0; i < N; i++) CHECK(out[i] == 2.0f * in[i], "out[%d] is %g", i, out[i]);
    CHECK(kt_op_decision(cop, args, 3, &d) == KT_OK, "kt_op_decision (variants)");
    for (size_t u = 0; u < kt_decision_unit_count(d); u++) {
        const char *config = kt_decision_unit_config(d, u);
        if (strcmp(config, "MODE=1") == 0)
            CHECK(kt_decision_unit_fail_kind(d, u) == KT_FAIL_CRASH && kt_decision_unit_fail_code(d, u) == SIGSEGV,
                  "MODE=1: kind %s code %d (%s)", kt_fail_kind_name(kt_decision_unit_fail_kind(d, u)), kt_decision_unit_fail_code(d, u),
                  kt_decision_unit_message(d, u) ? kt_decision_unit_message(d, u) : "");
        else
            CHECK(kt_decision_unit_outcome(d, u) == KT_OUTCOME_MEASURED, "%s: outcome %d", config, (int)kt_decision_unit_outcome(d, u));
    }
    kt_context_destroy(ctx);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) failures++;
    if (failures == 0) printf("isolate-shared: natives and variants isolated with the shared library\n");
    return failures ? 1 : 0;
}
