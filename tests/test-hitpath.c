/*
 * test-hitpath.c - a call that finds its decision allocates nothing and makes no system call.
 *
 * Allocation: malloc, calloc, realloc and free are wrapped (through glibc's __libc_* entry
 * points) and counted while hits run. System calls: a child process enters seccomp's strict
 * mode, in which the kernel kills it on any system call but read, write, _exit and sigreturn,
 * and then makes a million hits; it survives only if none of them made a system call.
 * Sanitizer runtimes replace malloc and make system calls of their own, so this test is built
 * and run in the normal build only (tests/CMakeLists.txt).
 */
#define _GNU_SOURCE /* syscall() */
#include "helpers.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#error "test-hitpath counts allocations and system calls: the normal build's only (tests/CMakeLists.txt)"
#endif

#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);

static atomic_int counting, allocations;

void *malloc(size_t n) {
    if (atomic_load(&counting)) atomic_fetch_add(&allocations, 1);
    return __libc_malloc(n);
}
void *calloc(size_t n, size_t m) {
    if (atomic_load(&counting)) atomic_fetch_add(&allocations, 1);
    return __libc_calloc(n, m);
}
void *realloc(void *p, size_t n) {
    if (atomic_load(&counting)) atomic_fetch_add(&allocations, 1);
    return __libc_realloc(p, n);
}
void free(void *p) {
    if (atomic_load(&counting) && p) atomic_fetch_add(&allocations, 1);
    __libc_free(p);
}

static int32_t out[4];

static int tiny(const kt_arg *args, size_t nargs, void *user) {
    (void)nargs, (void)user;
    ((int32_t *)args[0].ptr)[0] += (int32_t)args[1].i;
    return 0;
}

static int multiple_of_4(const kt_arg *args, size_t nargs, void *user) {
    (void)nargs, (void)user;
    return args[1].i % 4 == 0;
}

/* An op with key, requirements (so the validity mask is computed on every call) and several
 * tuned keys in its table. */
static kt_op *tuned_op(kt_context *ctx) {
    kt_op *op = test_op(ctx, "hit");
    ok(kt_op_key_align(op, 0, 64));
    ok(kt_op_add_native(op, "a", tiny, NULL));
    ok(kt_op_add_native(op, "b", tiny, NULL));
    ok(kt_op_require_multiple(op, "b", 1, 2));
    ok(kt_op_require_fn(op, "b", multiple_of_4, NULL));
    for (int64_t n = 1; n <= 40; n++) ok(kt_op_call(op, (kt_arg[]){kt_arg_buf(out, sizeof out), kt_arg_i64(n)}, 2));
    return op;
}

static void test_hits_do_not_allocate(void **state) {
    (void)state;
    kt_context *ctx = test_context(2);
    kt_op *op = tuned_op(ctx);
    uint64_t tunes = kt_op_tune_count(op);
    out[0] = 0;
    atomic_store(&allocations, 0);
    atomic_store(&counting, 1);
    for (int i = 0; i < 100000; i++) {
        kt_arg args[] = {kt_arg_buf(out, sizeof out), kt_arg_i64(1 + i % 40)};
        if (kt_op_call(op, args, 2) != KT_OK) break;
    }
    atomic_store(&counting, 0);
    assert_int_equal(atomic_load(&allocations), 0);
    assert_int_equal(kt_op_tune_count(op), tunes);
    /* The calls did run: sum of (1 + i % 40) over 100000 calls. */
    assert_int_equal(out[0], 2500 * (40 * 41 / 2));
    kt_context_destroy(ctx);
}

static void test_hits_make_no_system_call(void **state) {
    (void)state;
    kt_context *ctx = test_context(2);
    kt_op *op = tuned_op(ctx);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT) != 0) syscall(SYS_exit, 3);
        int32_t sum_ok = 1;
        out[0] = 0;
        for (int i = 0; i < 1000000; i++) {
            kt_arg args[] = {kt_arg_buf(out, sizeof out), kt_arg_i64(1 + i % 40)};
            if (kt_op_call(op, args, 2) != KT_OK) sum_ok = 0;
        }
        int32_t reply[2] = {sum_ok, out[0]};
        if (write(fds[1], reply, sizeof reply) != (ssize_t)sizeof reply) syscall(SYS_exit, 4);
        syscall(SYS_exit, 0); /* exit_group is not allowed in strict mode */
    }
    close(fds[1]);
    int32_t reply[2] = {0, 0};
    ssize_t got = read(fds[0], reply, sizeof reply);
    close(fds[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (WIFSIGNALED(status)) fail_msg("the child was killed by signal %d: a hit made a system call", WTERMSIG(status));
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(got, (ssize_t)sizeof reply);
    assert_int_equal(reply[0], 1);
    assert_int_equal(reply[1], 25000 * (40 * 41 / 2));
    kt_context_destroy(ctx);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hits_do_not_allocate),
        cmocka_unit_test(test_hits_make_no_system_call),
    };
    return kt_run_cases(argc, argv, tests, NULL, NULL);
}
