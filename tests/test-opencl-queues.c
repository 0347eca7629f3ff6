/*
 * test-opencl-queues.c - the OpenCL backend's queues and threads, for real on PoCL: a call
 * enqueued on the caller's queue returns while that queue is held; two threads on two queues;
 * many threads sharing one module's kernel pool, and the pool exhausted; native candidates
 * that enqueue on a queue. (test-opencl.c: tuning, launch sizes, keys and device facts.)
 */
#define _GNU_SOURCE /* mkdtemp */
#include "opencl-helpers.h"

#include <kerntune/decision.h>

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <unistd.h>

/* ---- kt_op_call_async on a queue of the caller's ----------------------------------------------
 * The test reaches OpenCL itself through the ICD loader, as the backend does, for what it needs:
 * a queue of its own on the context kerntune's buffers live in, and a user event to hold it. */
typedef void *cl_ptr;
typedef struct cl_fns {
    int (*GetMemObjectInfo)(cl_ptr, unsigned, size_t, void *, size_t *);
    int (*GetContextInfo)(cl_ptr, unsigned, size_t, void *, size_t *);
    cl_ptr (*CreateCommandQueue)(cl_ptr, cl_ptr, uint64_t, int *);
    cl_ptr (*CreateUserEvent)(cl_ptr, int *);
    int (*SetUserEventStatus)(cl_ptr, int);
    int (*EnqueueBarrierWithWaitList)(cl_ptr, unsigned, const cl_ptr *, cl_ptr *);
    int (*Finish)(cl_ptr);
    int (*ReleaseCommandQueue)(cl_ptr);
    int (*ReleaseEvent)(cl_ptr);
    int (*EnqueueCopyBuffer)(cl_ptr, cl_ptr, cl_ptr, size_t, size_t, size_t, unsigned, const cl_ptr *, cl_ptr *);
    int (*EnqueueFillBuffer)(cl_ptr, cl_ptr, const void *, size_t, size_t, size_t, unsigned, const cl_ptr *, cl_ptr *);
} cl_fns;

static cl_fns cl_open(void) {
    void *h = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL);
    assert_non_null(h);
    cl_fns f;
#define LOAD(field, name)                          \
    do {                                           \
        void *sym_ = dlsym(h, name);               \
        memcpy(&f.field, &sym_, sizeof sym_);      \
    } while (0)
    LOAD(GetMemObjectInfo, "clGetMemObjectInfo");
    LOAD(GetContextInfo, "clGetContextInfo");
    LOAD(CreateCommandQueue, "clCreateCommandQueue");
    LOAD(CreateUserEvent, "clCreateUserEvent");
    LOAD(SetUserEventStatus, "clSetUserEventStatus");
    LOAD(EnqueueBarrierWithWaitList, "clEnqueueBarrierWithWaitList");
    LOAD(Finish, "clFinish");
    LOAD(ReleaseCommandQueue, "clReleaseCommandQueue");
    LOAD(ReleaseEvent, "clReleaseEvent");
    LOAD(EnqueueCopyBuffer, "clEnqueueCopyBuffer");
    LOAD(EnqueueFillBuffer, "clEnqueueFillBuffer");
#undef LOAD
    assert_true(f.GetMemObjectInfo && f.GetContextInfo && f.CreateCommandQueue && f.CreateUserEvent && f.SetUserEventStatus &&
                f.EnqueueBarrierWithWaitList && f.Finish && f.ReleaseCommandQueue && f.ReleaseEvent && f.EnqueueCopyBuffer &&
                f.EnqueueFillBuffer);
    return f;
}

/* Makes n queues of its own on the context and device that kerntune's buffer lives in; returns
 * that context. */
static cl_ptr open_queues(cl_fns *cl, void *buffer, cl_ptr *queues, size_t n) {
    cl_ptr mem = buffer, clctx = NULL, cldev = NULL;
    assert_int_equal(cl->GetMemObjectInfo(mem, 0x1106 /* CL_MEM_CONTEXT */, sizeof clctx, &clctx, NULL), 0);
    assert_int_equal(cl->GetContextInfo(clctx, 0x1081 /* CL_CONTEXT_DEVICES */, sizeof cldev, &cldev, NULL), 0);
    for (size_t i = 0; i < n; i++) {
        int rc = 0;
        queues[i] = cl->CreateCommandQueue(clctx, cldev, 0, &rc);
        assert_non_null(queues[i]);
    }
    return clctx;
}

static void stuck(int sig) {
    (void)sig;
    static const char msg[] = "kt_op_call_async waited for the caller's held queue\n";
    if (write(2, msg, sizeof msg - 1) < 0) _exit(3);
    _exit(2);
}

/* A hit enqueues on the caller's queue and returns before the kernel runs: with the queue held
 * by a user event, the call still returns (a call that waited would never return: the alarm
 * fails the test) and the buffer still holds what it held; released, the queue runs the launch
 * after the work before it, and the bytes are those of the direct sequence. The first call (a
 * miss) tunes with the queue's earlier work finished, then enqueues the winner. */
static void test_call_async_on_a_held_queue(void **state) {
    (void)state;
    size_t dev;
    kt_context *ctx = cl_context(2, &dev);
    enum { M = 256 };
    float v[M], expect[M];
    for (int i = 0; i < M; i++) v[i] = (float)i - 100.5f;
    void *dv;
    ok(kt_device_alloc(ctx, dev, sizeof v, &dv));
    ok(kt_device_write(ctx, dev, dv, v, sizeof v));
    kt_op *op = NULL;
    ok(kt_op_create(ctx, "clasync", &op));
    ok(kt_op_set_device(op, dev));
    ok(kt_op_add_buffer(op, "v", KT_TYPE_F32, KT_READ_WRITE));
    ok(kt_op_add_scalar(op, "s", KT_TYPE_F32));
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    ok(kt_space_add_input(sp, "v"));
    ok(kt_space_add_param(sp, "PER", "[1, 2]"));
    ok(kt_space_add_param(sp, "ELEM", "['int']"));
    const char *global[3] = {"v // PER", NULL, NULL};
    ok(kt_space_set_geometry(sp, KT_GEOMETRY_GLOBAL, global, NULL, NULL));
    ok(kt_op_add_variants(op, "scale", sp, scale_cl, "scale", NULL, 0));
    kt_space_destroy(sp);

    cl_fns cl = cl_open();
    cl_ptr q = NULL, clctx = open_queues(&cl, dv, &q, 1);
    int rc = 0;

    kt_arg args[] = {kt_arg_buf(dv, sizeof v), kt_arg_f32(2.0f)};
    ok(kt_op_call_async(op, q, args, 2)); /* a miss: tunes, then enqueues the winner on q */
    assert_int_equal(cl.Finish(q), 0);
    ok(kt_device_read(ctx, dev, v, dv, sizeof v));
    for (int i = 0; i < M; i++) expect[i] = ((float)i - 100.5f) * 2.0f;
    assert_memory_equal(v, expect, sizeof v);

    cl_ptr hold = cl.CreateUserEvent(clctx, &rc);
    assert_non_null(hold);
    assert_int_equal(cl.EnqueueBarrierWithWaitList(q, 1, &hold, NULL), 0); /* q runs nothing until hold is set */
    void (*was)(int) = signal(SIGALRM, stuck);
    alarm(60);
    args[1] = kt_arg_f32(3.0f);
    for (int k = 0; k < 3; k++) ok(kt_op_call_async(op, q, args, 2)); /* hits: enqueued, not run */
    alarm(0);
    signal(SIGALRM, was);
    ok(kt_device_read(ctx, dev, v, dv, sizeof v)); /* the device's own queue: q still holds the launches */
    assert_memory_equal(v, expect, sizeof v);
    assert_int_equal(cl.SetUserEventStatus(hold, 0 /* CL_COMPLETE */), 0);
    assert_int_equal(cl.Finish(q), 0);
    ok(kt_device_read(ctx, dev, v, dv, sizeof v));
    for (int i = 0; i < M; i++) expect[i] *= 27.0f; /* three launches of * 3, in order after the hold */
    assert_memory_equal(v, expect, sizeof v);
    assert_int_equal(kt_op_tune_count(op), 1);

    cl.ReleaseEvent(hold);
    cl.ReleaseCommandQueue(q);
    kt_device_free(ctx, dev, dv);
    kt_context_destroy(ctx);
}

/* One thread's hits on its own queue, for the two-queue test. */
typedef struct queue_caller {
    kt_op *op;
    cl_fns *cl;
    cl_ptr q;
    void *buf;
    size_t bytes;
    int calls;
    bool finish;     /* wait for its queue afterwards */
    kt_status st;
    int finished;    /* clFinish's code, when asked */
} queue_caller;

static void *call_on_queue(void *p) {
    queue_caller *c = p;
    kt_arg args[] = {kt_arg_buf(c->buf, c->bytes), kt_arg_f32(2.0f)};
    c->st = KT_OK;
    for (int k = 0; k < c->calls && c->st == KT_OK; k++) c->st = kt_op_call_async(c->op, c->q, args, 2);
    if (c->finish) c->finished = c->cl->Finish(c->q);
    return NULL;
}

/* Two threads, two queues, two keys (the buffer's size): a hit waits for nothing but its own
 * call. With queue A held by a user event, thread B's hits on queue B run and finish while
 * thread A's sit on A; released, A's run, each in its order. */
static void test_two_queues_two_threads(void **state) {
    (void)state;
    size_t dev;
    kt_context *ctx = cl_context(2, &dev);
    enum { MA = 256, MB = 512, CALLS = 20 };
    float va[MA], vb[MB], out[MB];
    for (int i = 0; i < MA; i++) va[i] = 1.0f;
    for (int i = 0; i < MB; i++) vb[i] = 1.0f;
    void *da, *db;
    ok(kt_device_alloc(ctx, dev, sizeof va, &da));
    ok(kt_device_alloc(ctx, dev, sizeof vb, &db));
    kt_op *op = NULL;
    ok(kt_op_create(ctx, "clqueues", &op));
    ok(kt_op_set_device(op, dev));
    ok(kt_op_add_buffer(op, "v", KT_TYPE_F32, KT_READ_WRITE));
    ok(kt_op_add_scalar(op, "s", KT_TYPE_F32));
    ok(kt_op_key_arg(op, 0, KT_BUCKET_EXACT)); /* the buffer's size: two keys */
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    ok(kt_space_add_input(sp, "v"));
    ok(kt_space_add_param(sp, "PER", "[1]"));
    ok(kt_space_add_param(sp, "ELEM", "['int']"));
    const char *global[3] = {"v // PER", NULL, NULL};
    ok(kt_space_set_geometry(sp, KT_GEOMETRY_GLOBAL, global, NULL, NULL));
    ok(kt_op_add_variants(op, "scale", sp, scale_cl, "scale", NULL, 0));
    kt_space_destroy(sp);
    kt_arg a0[] = {kt_arg_buf(da, sizeof va), kt_arg_f32(2.0f)}, b0[] = {kt_arg_buf(db, sizeof vb), kt_arg_f32(2.0f)};
    ok(kt_op_tune(op, a0, 2)); /* both keys decided first: what follows are hits */
    ok(kt_op_tune(op, b0, 2));
    ok(kt_device_write(ctx, dev, da, va, sizeof va));
    ok(kt_device_write(ctx, dev, db, vb, sizeof vb));

    cl_fns cl = cl_open();
    cl_ptr qs[2], clctx = open_queues(&cl, da, qs, 2), qa = qs[0], qb = qs[1];
    int rc = 0;
    cl_ptr hold = cl.CreateUserEvent(clctx, &rc);
    assert_non_null(hold);
    assert_int_equal(cl.EnqueueBarrierWithWaitList(qa, 1, &hold, NULL), 0);

    queue_caller ca = {op, &cl, qa, da, sizeof va, CALLS, false, KT_OK, 0};
    queue_caller cb = {op, &cl, qb, db, sizeof vb, CALLS, true, KT_OK, 0};
    void (*was)(int) = signal(SIGALRM, stuck);
    alarm(60);
    pthread_t ta, tb;
    assert_int_equal(pthread_create(&ta, NULL, call_on_queue, &ca), 0);
    assert_int_equal(pthread_create(&tb, NULL, call_on_queue, &cb), 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL); /* B finished its queue while A's is held */
    alarm(0);
    signal(SIGALRM, was);
    ok(ca.st);
    ok(cb.st);
    assert_int_equal(cb.finished, 0);
    ok(kt_device_read(ctx, dev, out, db, sizeof vb));
    for (int i = 0; i < MB; i++) assert_true(out[i] == 1048576.0f); /* 2^20: twenty launches of * 2 */
    ok(kt_device_read(ctx, dev, out, da, sizeof va));
    for (int i = 0; i < MA; i++) assert_true(out[i] == 1.0f); /* A's launches wait for A's hold */
    assert_int_equal(cl.SetUserEventStatus(hold, 0 /* CL_COMPLETE */), 0);
    assert_int_equal(cl.Finish(qa), 0);
    ok(kt_device_read(ctx, dev, out, da, sizeof va));
    for (int i = 0; i < MA; i++) assert_true(out[i] == 1048576.0f);
    assert_int_equal(kt_op_tune_count(op), 2);

    cl.ReleaseEvent(hold);
    cl.ReleaseCommandQueue(qa);
    cl.ReleaseCommandQueue(qb);
    kt_device_free(ctx, dev, da);
    kt_device_free(ctx, dev, db);
    kt_context_destroy(ctx);
}

/* ---- many threads on one module: the kernel pool (backends/opencl.c) -----------------------
 * v[j] += a + b (j % 3), over ints: every launch's two scalars and its buffer reach the result,
 * so a launch that ran with another thread's argument (a kernel object whose arguments another
 * thread set between this thread's clSetKernelArg and its enqueue) leaves wrong bytes. */
static const char *add_cl =
    "__kernel void add(__global int *v, int a, long b) {\n"
    "    long j = get_global_id(0) * PER;\n"
    "    for (int k = 0; k < PER; k++) v[j + k] += a + (int)(b * ((j + k) % 3));\n"
    "}\n";

enum { POOL_M = 256 }; /* elements of every thread's buffer: one key */

static int32_t pool_a(int t, int k) { return t * 1000 + k; }
static int64_t pool_b(int t) { return 17 * (int64_t)(t + 1); }
static int32_t pool_start(int t, int j) { return t * 7919 + j; }

/* One thread's calls of the add op on its own buffer, on queue q (NULL: the device's). */
typedef struct adder {
    kt_op *op;
    cl_fns *cl;
    cl_ptr q;
    void *buf;
    int t, calls;
    kt_status st;
    int finished; /* clFinish's code on q, when q is not NULL */
} adder;

static void *add_calls(void *p) {
    adder *c = p;
    c->st = KT_OK;
    for (int k = 0; k < c->calls && c->st == KT_OK; k++) {
        kt_arg args[] = {kt_arg_buf(c->buf, POOL_M * sizeof(int32_t)), kt_arg_i32(pool_a(c->t, k)),
                         kt_arg_i64(pool_b(c->t))};
        c->st = kt_op_call_async(c->op, c->q, args, 3);
    }
    if (c->q != NULL) c->finished = c->cl->Finish(c->q);
    return NULL;
}

static kt_op *add_op(kt_context *ctx, size_t dev, const char *name) {
    kt_op *op = NULL;
    ok(kt_op_create(ctx, name, &op));
    ok(kt_op_set_device(op, dev));
    ok(kt_op_add_buffer(op, "v", KT_TYPE_I32, KT_READ_WRITE));
    ok(kt_op_add_scalar(op, "a", KT_TYPE_I32));
    ok(kt_op_add_scalar(op, "b", KT_TYPE_I64));
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    ok(kt_space_add_input(sp, "v"));
    ok(kt_space_add_param(sp, "PER", "[1]"));
    const char *global[3] = {"v // PER", NULL, NULL};
    ok(kt_space_set_geometry(sp, KT_GEOMETRY_GLOBAL, global, NULL, NULL));
    ok(kt_op_add_variants(op, "add", sp, add_cl, "add", NULL, 0));
    kt_space_destroy(sp);
    return op;
}

/* Runs n adders at once, thread t on queues[t % nqueues] with buffers[t], and checks every
 * buffer holds exactly its start plus the sum of its own calls. */
static void run_adders(kt_context *ctx, size_t dev, kt_op *op, cl_fns *cl, int n, int calls, cl_ptr *queues,
                       size_t nqueues, void **buffers) {
    adder *c = calloc((size_t)n, sizeof *c);
    pthread_t *th = calloc((size_t)n, sizeof *th);
    int32_t v[POOL_M];
    assert_true(c && th);
    for (int t = 0; t < n; t++) {
        for (int j = 0; j < POOL_M; j++) v[j] = pool_start(t, j);
        ok(kt_device_write(ctx, dev, buffers[t], v, sizeof v));
        c[t] = (adder){op, cl, queues[(size_t)t % nqueues], buffers[t], t, calls, KT_OK, 0};
    }
    for (int t = 0; t < n; t++) assert_int_equal(pthread_create(&th[t], NULL, add_calls, &c[t]), 0);
    for (int t = 0; t < n; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < n; t++) {
        ok(c[t].st);
        assert_int_equal(c[t].finished, 0);
        /* the device's own queue is in order: this read follows the launches of a NULL-queue thread */
        ok(kt_device_read(ctx, dev, v, buffers[t], sizeof v));
        int32_t expect[POOL_M];
        for (int j = 0; j < POOL_M; j++) {
            expect[j] = pool_start(t, j);
            for (int k = 0; k < calls; k++) expect[j] += pool_a(t, k) + (int32_t)(pool_b(t) * (j % 3));
        }
        if (memcmp(v, expect, sizeof v) != 0)
            fail_msg("thread %d (of %d): its buffer does not hold its own %d launches", t, n, calls);
    }
    free(c);
    free(th);
}

/* Five threads hit the same op and key a few hundred times each, four on queues of their own and
 * one on the device's (NULL) queue, each with its own buffer and its own scalars on every call:
 * every buffer ends holding exactly its own launches. */
static void test_many_threads_one_module(void **state) {
    (void)state;
    size_t dev;
    kt_context *ctx = cl_context(2, &dev);
    enum { THREADS = 5, CALLS = KT_TEST_LARGE ? 300 : 200 };
    void *bufs[THREADS];
    for (int t = 0; t < THREADS; t++) ok(kt_device_alloc(ctx, dev, POOL_M * sizeof(int32_t), &bufs[t]));
    kt_op *op = add_op(ctx, dev, "clpool");
    kt_arg args[] = {kt_arg_buf(bufs[0], POOL_M * sizeof(int32_t)), kt_arg_i32(0), kt_arg_i64(0)};
    ok(kt_op_tune(op, args, 3)); /* what follows are hits */
    cl_fns cl = cl_open();
    cl_ptr queues[THREADS];
    open_queues(&cl, bufs[0], queues, THREADS - 1);
    queues[THREADS - 1] = NULL; /* the last thread: the device's queue */
    run_adders(ctx, dev, op, &cl, THREADS, CALLS, queues, THREADS, bufs);
    assert_int_equal(kt_op_tune_count(op), 1);
    for (int t = 0; t < THREADS - 1; t++) cl.ReleaseCommandQueue(queues[t]);
    for (int t = 0; t < THREADS; t++) kt_device_free(ctx, dev, bufs[t]);
    kt_context_destroy(ctx);
}

/* The pool's exhaustion path, made certain through tests/cl-shim.c: with the shim gathering the
 * set-and-enqueues, six threads hold six kernel objects of the one module at the same moment
 * (a module starts with four: two launches found every kernel in use and the pool grew, and a
 * launch that held a lock while setting arguments would keep the others out and never complete
 * the gathering); then 66 threads while 64 are held: the pool stops at 64 kernel objects and the
 * two launches left over wait until one is freed. No two threads ever set one kernel object at
 * once, and every buffer holds exactly its own launches. */
static void test_pool_exhausted(void **state) {
    (void)state;
    assert_int_equal(setenv("KERNTUNE_OPENCL_LIBRARY", KT_CL_SHIM, 1), 0);
    kt_context *ctx = test_context(2);
    ok(kt_context_set_artifact_dir(ctx, artifacts));
    (void)kt_context_device_count(ctx); /* starts the backend: through the shim */
    unsetenv("KERNTUNE_OPENCL_LIBRARY");  /* before anything can fail: the other tests load the real one */
    size_t dev = opencl_device(ctx);
    void *shim = dlopen(KT_CL_SHIM, RTLD_NOW | RTLD_LOCAL);
    assert_non_null(shim);
    void (*reset)(void), (*gather)(unsigned), (*counts)(unsigned *, unsigned *, unsigned *, unsigned *);
    void *p = dlsym(shim, "kt_shim_reset");
    memcpy(&reset, &p, sizeof p);
    p = dlsym(shim, "kt_shim_gather");
    memcpy(&gather, &p, sizeof p);
    p = dlsym(shim, "kt_shim_counts");
    memcpy(&counts, &p, sizeof p);
    assert_true(reset && gather && counts);

    enum { FIRST = 6, MAXK = 64, LAST = MAXK + 2, QUEUES = 4 };
    void *bufs[LAST];
    for (int t = 0; t < LAST; t++) ok(kt_device_alloc(ctx, dev, POOL_M * sizeof(int32_t), &bufs[t]));
    kt_op *op = add_op(ctx, dev, "clpoolfull");
    kt_arg args[] = {kt_arg_buf(bufs[0], POOL_M * sizeof(int32_t)), kt_arg_i32(0), kt_arg_i64(0)};
    ok(kt_op_tune(op, args, 3));
    cl_fns cl = cl_open();
    cl_ptr queues[QUEUES];
    open_queues(&cl, bufs[0], queues, QUEUES);
    unsigned nkern = 0, overlaps = 0, timeouts = 0, done0 = 0, done = 0;
    counts(&nkern, &overlaps, &timeouts, &done0);

    reset();
    gather(FIRST);
    cl_ptr own[FIRST];
    open_queues(&cl, bufs[0], own, FIRST);
    run_adders(ctx, dev, op, &cl, FIRST, 20, own, FIRST, bufs);
    counts(&nkern, &overlaps, &timeouts, &done);
    assert_int_equal(timeouts, 0); /* all six held a kernel at once */
    assert_int_equal(done, done0 + 1);
    assert_int_equal(overlaps, 0);
    /* four from the load, two grown at least (a launch that scans while others claim and free
     * may find every kernel busy one by one with fewer held at once, and grow one more) */
    assert_true(nkern >= FIRST);

    reset();
    gather(MAXK);
    run_adders(ctx, dev, op, &cl, LAST, 3, queues, QUEUES, bufs);
    counts(&nkern, &overlaps, &timeouts, &done);
    assert_int_equal(timeouts, 0);
    assert_int_equal(done, done0 + 2);
    assert_int_equal(overlaps, 0);
    assert_int_equal(nkern, MAXK); /* no more kernel objects than the pool holds */
    assert_int_equal(kt_op_tune_count(op), 1);

    for (int t = 0; t < FIRST; t++) cl.ReleaseCommandQueue(own[t]);
    for (int t = 0; t < QUEUES; t++) cl.ReleaseCommandQueue(queues[t]);
    for (int t = 0; t < LAST; t++) kt_device_free(ctx, dev, bufs[t]);
    kt_context_destroy(ctx);
    dlclose(shim);
}

/* ---- native device candidates (kt_op_add_native_queued) --------------------------------------
 * A copy op with three candidates that enqueue on the queue they are given (a vendor call,
 * clEnqueueCopyBuffer; one that fills zeros instead; one that fails) and a compiled kernel that
 * does thirty thousand times the work of a copy per element, by design: on PoCL it runs about
 * 40 ms against a copy's microseconds, so that a copy preempted for a scheduler quantum or two
 * on a loaded machine still wins (at a thousand times, 1.3 ms, a TSan run under a parallel
 * ctest once measured the copy slower). */
static const char *slowcopy_cl =
    "__kernel void slowcopy(__global const float *src, __global float *dst) {\n"
    "    size_t i = get_global_id(0);\n"
    "    float acc = src[i];\n"
    "    for (int k = 0; k < REPS; k++) acc = acc * 0.999f + 0.001f * src[i];\n"
    "    dst[i] = src[i] + (acc > 1e30f ? 1.0f : 0.0f); /* acc stays near src[i]: the loop is kept, the copy exact */\n"
    "}\n";

typedef struct queued_user {
    cl_fns *cl;
    cl_ptr caller;           /* the caller's queue, when the test has one */
    _Atomic int on_caller, on_other, calls;
    cl_ptr last;             /* the queue of the last call */
    int behave;              /* 0: copies; 1: fills zeros; 2: returns 5 */
} queued_user;

static int queued_copy(const kt_arg *args, size_t nargs, kt_queue queue, void *user) {
    queued_user *u = user;
    assert_int_equal(nargs, 2);
    assert_non_null(queue);
    atomic_fetch_add(&u->calls, 1);
    atomic_fetch_add(queue == u->caller ? &u->on_caller : &u->on_other, 1);
    u->last = queue;
    if (u->behave == 2) return 5;
    if (u->behave == 1) {
        float zero = 0;
        return u->cl->EnqueueFillBuffer(queue, args[1].ptr, &zero, sizeof zero, 0, args[1].bytes, 0, NULL, NULL);
    }
    return u->cl->EnqueueCopyBuffer(queue, args[0].ptr, args[1].ptr, 0, 0, args[0].bytes, 0, NULL, NULL);
}

/* Tuned on the backend's own queue and timed by its events, validated (the zero-filler is
 * invalid, the failing one failed with its code), chosen over the slow kernel; a hit enqueues
 * on the caller's queue and returns before the copy runs; kt_op_call waits for it. */
static void test_native_queued(void **state) {
    (void)state;
    size_t dev;
    kt_context *ctx = cl_context(2, &dev);
    enum { M = 2048 };
    static float src[M], out[M], zeros[M];
    for (int i = 0; i < M; i++) src[i] = (float)(i % 97) * 0.5f - 7.0f;
    void *ds, *dd;
    ok(kt_device_alloc(ctx, dev, sizeof src, &ds));
    ok(kt_device_alloc(ctx, dev, sizeof src, &dd));
    ok(kt_device_write(ctx, dev, ds, src, sizeof src));
    ok(kt_device_write(ctx, dev, dd, zeros, sizeof zeros));

    cl_fns cl = cl_open();
    cl_ptr q = NULL, clctx = open_queues(&cl, ds, &q, 1);
    int rc = 0;

    kt_op *op = NULL;
    ok(kt_op_create(ctx, "clqueued", &op));
    ok(kt_op_set_device(op, dev));
    ok(kt_op_add_buffer(op, "src", KT_TYPE_F32, KT_READ_ONLY));
    ok(kt_op_add_buffer(op, "dst", KT_TYPE_F32, KT_WRITE_ONLY));
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    ok(kt_space_add_input(sp, "src"));
    ok(kt_space_add_param(sp, "REPS", "[30000]"));
    const char *global[3] = {"src", NULL, NULL};
    ok(kt_space_set_geometry(sp, KT_GEOMETRY_GLOBAL, global, NULL, NULL));
    ok(kt_op_add_variants(op, "slow", sp, slowcopy_cl, "slowcopy", NULL, 0)); /* the default: the reference */
    kt_space_destroy(sp);
    queued_user copy = {.cl = &cl, .caller = q}, zero = {.cl = &cl, .behave = 1}, bad = {.cl = &cl, .behave = 2};
    ok(kt_op_add_native_queued(op, "copybuf", queued_copy, &copy));
    ok(kt_op_add_native_queued(op, "zerofill", queued_copy, &zero));
    ok(kt_op_add_native_queued(op, "fails", queued_copy, &bad));
    assert_int_equal(kt_op_add_native_queued(op, "null", NULL, NULL), KT_ERR_NULL);

    kt_arg args[] = {kt_arg_buf(ds, sizeof src), kt_arg_buf(dd, sizeof src)};
    ok(kt_op_call_async(op, q, args, 2)); /* a miss: tuned on the device's own queue, then enqueued on q */
    assert_int_equal(cl.Finish(q), 0);
    ok(kt_device_read(ctx, dev, out, dd, sizeof out));
    assert_memory_equal(out, src, sizeof out);
    const kt_decision *d = NULL;
    ok(kt_op_decision(op, args, 2, &d));
    assert_string_equal(kt_op_candidate_name(op, kt_decision_winner(d)), "copybuf");
    assert_true(atomic_load(&copy.on_other) >= 2); /* its validation and timed runs: not on the caller's queue */
    assert_int_equal(atomic_load(&copy.on_caller), 1); /* the final launch: on q */
    for (size_t i = 0; i < kt_decision_unit_count(d); i++) {
        const char *name = kt_op_candidate_name(op, kt_decision_unit_candidate(d, i));
        if (strcmp(name, "copybuf") == 0) {
            assert_int_equal(kt_decision_unit_outcome(d, i), KT_OUTCOME_MEASURED);
            assert_true(kt_decision_unit_time_ns(d, i) > 0);
        } else if (strcmp(name, "zerofill") == 0) {
            assert_int_equal(kt_decision_unit_outcome(d, i), KT_OUTCOME_INVALID);
        } else if (strcmp(name, "fails") == 0) {
            assert_int_equal(kt_decision_unit_outcome(d, i), KT_OUTCOME_FAILED);
            assert_int_equal(kt_decision_unit_fail_code(d, i), 5);
        }
    }

    /* a hit on a held queue: the copy is enqueued there and has not run when the call returns */
    for (int i = 0; i < M; i++) src[i] = (float)i;
    ok(kt_device_write(ctx, dev, ds, src, sizeof src));
    ok(kt_device_write(ctx, dev, dd, zeros, sizeof zeros));
    cl_ptr hold = cl.CreateUserEvent(clctx, &rc);
    assert_non_null(hold);
    assert_int_equal(cl.EnqueueBarrierWithWaitList(q, 1, &hold, NULL), 0);
    void (*was)(int) = signal(SIGALRM, stuck);
    alarm(60);
    ok(kt_op_call_async(op, q, args, 2));
    alarm(0);
    signal(SIGALRM, was);
    assert_ptr_equal(copy.last, q);
    ok(kt_device_read(ctx, dev, out, dd, sizeof out));
    assert_memory_equal(out, zeros, sizeof out);
    assert_int_equal(cl.SetUserEventStatus(hold, 0 /* CL_COMPLETE */), 0);
    assert_int_equal(cl.Finish(q), 0);
    ok(kt_device_read(ctx, dev, out, dd, sizeof out));
    assert_memory_equal(out, src, sizeof out);

    /* kt_op_call: the device's default queue, waited for */
    ok(kt_device_write(ctx, dev, dd, zeros, sizeof zeros));
    int before = atomic_load(&copy.on_other);
    ok(kt_op_call(op, args, 2));
    assert_int_equal(atomic_load(&copy.on_other), before + 1);
    ok(kt_device_read(ctx, dev, out, dd, sizeof out));
    assert_memory_equal(out, src, sizeof out);
    assert_int_equal(kt_op_tune_count(op), 1);

    cl.ReleaseEvent(hold);
    cl.ReleaseCommandQueue(q);
    kt_device_free(ctx, dev, ds);
    kt_device_free(ctx, dev, dd);
    kt_context_destroy(ctx);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_call_async_on_a_held_queue),
        cmocka_unit_test(test_two_queues_two_threads),
        cmocka_unit_test(test_native_queued),
        cmocka_unit_test(test_many_threads_one_module),
        cmocka_unit_test(test_pool_exhausted),
    };
    return run_opencl_cases(argc, argv, tests, sizeof tests / sizeof tests[0]);
}
