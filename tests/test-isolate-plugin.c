/*
 * test-isolate-plugin.c - a user's plug-in (tests/iso-plugin.c, a shared object loaded at run
 * time): a backend of its own and natives run in a runner process (kerntune-runner loads the
 * object and finds them there), crash there, are checked on the "device" there, have their
 * ReadWrite buffers restored there, build beside measuring at a lower priority and under a
 * budget of wall seconds; what cannot be found or run in a runner runs here, saying why.
 * (test-isolate.c: the candidates of this program; isolate-test.h: what both share.)
 */
#define _DEFAULT_SOURCE /* mkdtemp */
#include "isolate-test.h"

#ifndef KT_PLUGIN
#error "KT_PLUGIN must name the test plug-in (tests/iso-plugin.c) and KT_PLUGIN_NOID its build without a build-id"
#endif

static void *plugin_open(const char *path) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) fail_msg("dlopen %s: %s", path, dlerror());
    return h;
}

static void *plugin_sym(void *h, const char *name) {
    void *p = dlsym(h, name);
    if (p == NULL) fail_msg("dlsym %s: %s", name, dlerror());
    return p;
}

static int twice_ref_host(const kt_arg *args, size_t nargs, void *user, kt_result *res) { /* plug buffers are plain memory */
    return twice(args, nargs, user, res);
}

static int add_twice_ref_host(const kt_arg *args, size_t nargs, void *user, kt_result *res) {
    (void)nargs, (void)user, (void)res;
    float *out = args[0].ptr;
    const float *in = args[1].ptr;
    for (int32_t i = 0; i < (int32_t)args[2].i; i++) out[i] += 2.0f * in[i];
    return 0;
}

/* A context with the plug-in's backend of table sym (info lines into got when not NULL; builds on
 * threads threads, 0: the default) and op name on its device: out = 2 in over N floats (with
 * out_access KT_READ_WRITE, out += 2 in, out starting at 100 + i % 7), the host's reference,
 * every variant in a runner process (in holds N + 64 floats). args receives the arguments (the
 * caller frees the two buffers with kt_device_free), *dev the device, *ctxp the context. */
static kt_op *plug_op(void *h, const char *sym, const char *name, size_t threads, kt_arg *args, size_t *dev, lines *got,
                      kt_context **ctxp, kt_access out_access) {
    kt_context *ctx = NULL;
    ok(kt_context_create(&ctx));
    if (got) {
        ok(kt_context_set_log_level(ctx, KT_LOG_INFO));
        ok(kt_context_set_log_fn(ctx, capture, got));
    }
    ok(kt_context_set_artifact_dir(ctx, artifacts));
    if (threads) ok(kt_context_set_compile_threads(ctx, threads));
    ok(kt_context_add_backend(ctx, plugin_sym(h, sym)));
    *dev = (size_t)-1;
    for (size_t i = 0; i < kt_context_device_count(ctx); i++)
        if (strcmp(kt_device_fingerprint(kt_context_device(ctx, i)), "plug-device-1") == 0) *dev = i;
    assert_true(*dev != (size_t)-1);
    static float in[N + 64], out0[N]; /* in is longer, so that its copies can be told from out's */
    for (int i = 0; i < N + 64; i++) in[i] = (float)(i % 11);
    for (int i = 0; i < N; i++) out0[i] = (float)(100 + i % 7);
    void *dout, *din;
    ok(kt_device_alloc(ctx, *dev, N * sizeof(float), &dout));
    ok(kt_device_alloc(ctx, *dev, sizeof in, &din));
    ok(kt_device_write(ctx, *dev, din, in, sizeof in));
    if (out_access == KT_READ_WRITE) ok(kt_device_write(ctx, *dev, dout, out0, sizeof out0));
    kt_op *op = NULL;
    ok(kt_op_create(ctx, name, &op));
    ok(kt_op_set_device(op, *dev));
    ok(kt_op_add_buffer(op, "out", KT_TYPE_F32, out_access));
    ok(kt_op_add_buffer(op, "in", KT_TYPE_F32, KT_READ_ONLY));
    ok(kt_op_add_scalar(op, "n", KT_TYPE_I32));
    ok(kt_op_set_reference_fn(op, out_access == KT_READ_WRITE ? add_twice_ref_host : twice_ref_host, NULL));
    ok(kt_op_set_isolation(op, KT_ISOLATE_ON));
    args[0] = kt_arg_buf(dout, N * sizeof(float));
    args[1] = kt_arg_buf(din, sizeof in);
    args[2] = kt_arg_i32(N);
    *ctxp = ctx;
    return op;
}

/* Adds the plug's variants over params (NAME and values, pairs, NULL-ended) to op. */
static void plug_variants(kt_op *op, const char *const *params) {
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    for (size_t i = 0; params[i]; i += 2) ok(kt_space_add_param(sp, params[i], params[i + 1]));
    ok(kt_op_add_variants(op, "twice", sp, "plug source", "twice", NULL, 0));
    kt_space_destroy(sp);
}

/* Tunes the plug backend's variants (REPS x MODE) of the table named sym on its device; returns
 * the context (the decision through *d; info lines into got when not NULL). */
static kt_context *plug_tune(void *h, const char *sym, const char *name, const kt_decision **d, kt_arg *args, size_t *dev,
                             lines *got) {
    kt_context *ctx = NULL;
    kt_op *op = plug_op(h, sym, name, 0, args, dev, got, &ctx, KT_WRITE_ONLY);
    const char *modes = strcmp(sym, "kt_test_plug") == 0 ? "[0, 1, 2, 3]" : strcmp(sym, "kt_test_plug_checks") == 0 ? "[0, 2, 4]" : "[0, 2]";
    plug_variants(op, (const char *const[]){"REPS", "[40, 1]", "MODE", modes, NULL});
    ok(kt_op_call(op, args, 3));
    float out[N], in[N];
    ok(kt_device_read(ctx, *dev, out, args[0].ptr, sizeof out));
    ok(kt_device_read(ctx, *dev, in, args[1].ptr, sizeof in));
    for (int i = 0; i < N; i++) assert_true(out[i] == 2.0f * in[i]);
    ok(kt_op_decision(op, args, 3, d));
    return ctx;
}

/* A backend a user registers from a shared object runs its variants in a runner process
 * (kerntune-runner loads the object and finds the table there): every tuning launch is
 * another process's, the crash is that process's, and the fastest correct variant wins; the
 * final launch is this process's. */
static void test_plugin_backend(void **state) {
    (void)state;
    log_reset();
    void *h = plugin_open(KT_PLUGIN);
    const kt_decision *d = NULL;
    kt_arg args[3];
    size_t dev;
    kt_context *ctx = plug_tune(h, "kt_test_plug", "plugged", &d, args, &dev, NULL);
    assert_string_equal(kt_decision_unit_config(d, kt_decision_winner_unit(d)), "REPS=1,MODE=0");
    expect_unit(d, "REPS=40,MODE=0", KT_OUTCOME_MEASURED, NULL);
    expect_unit(d, "REPS=1,MODE=1", KT_OUTCOME_CRASHED, "signal 11");
    expect_unit(d, "REPS=1,MODE=2", KT_OUTCOME_INVALID, NULL);
    expect_unit(d, "REPS=1,MODE=3", KT_OUTCOME_FAILED, "plug: launch refused");
    expect_fail(d, unit_of(d, "REPS=1,MODE=1"), KT_OUTCOME_CRASHED, KT_FAIL_CRASH, "crash", SIGSEGV);
    expect_fail(d, unit_of(d, "REPS=1,MODE=3"), KT_OUTCOME_FAILED, KT_FAIL_LAUNCH, "launch", KT_ERR_BACKEND);
    int mine = 0;
    int others = log_count("launch", &mine, NULL);
    assert_true(others >= 8); /* a validation run of each, and the measured runs */
    assert_int_equal(mine, 1); /* the final launch */
    for (size_t i = 0; i < 3; i++)
        if (args[i].type == KT_TYPE_BUFFER) kt_device_free(ctx, dev, args[i].ptr);
    kt_context_destroy(ctx);
    dlclose(h);
}

/* A backend that checks on its device (ABI 9) checks validation runs in the runner: a variant
 * that passes sends nothing back; one with a wrong element sends its outputs back, to be named
 * here as without checks; one that wrote into its input is named by the runner, and sends
 * nothing (the caller's input is never overwritten with what it wrote). Without checks, every
 * validation run reads its two buffers back. */
static void test_plugin_backend_checks_in_runner(void **state) {
    (void)state;
    void *h = plugin_open(KT_PLUGIN);
    for (int checks = 0; checks < 2; checks++) {
        log_reset();
        const kt_decision *d = NULL;
        kt_arg args[3];
        size_t dev;
        kt_context *ctx = plug_tune(h, checks ? "kt_test_plug_checks" : "kt_test_plug", checks ? "checked" : "unchecked", &d, args,
                                    &dev, NULL);
        assert_string_equal(kt_decision_unit_config(d, kt_decision_winner_unit(d)), "REPS=1,MODE=0");
        expect_unit(d, "REPS=1,MODE=2", KT_OUTCOME_INVALID, "output 'out' element 0: expected 0");
        expect_unit(d, "REPS=40,MODE=2", KT_OUTCOME_INVALID, "output 'out' element 0: expected 0");
        int mine = 0, closes = log_count("close", &mine, NULL), readbacks = log_count("readback", &mine, NULL);
        if (checks) {
            expect_unit(d, "REPS=1,MODE=4", KT_OUTCOME_INVALID, "wrote into read-only argument 'in'");
            expect_unit(d, "REPS=40,MODE=4", KT_OUTCOME_INVALID, "wrote into read-only argument 'in'");
            assert_int_equal(closes, 6);    /* every validation run (MODE 0, 2, 4; REPS 40, 1) compared its output there */
            assert_int_equal(readbacks, 2); /* the two wrong answers' outputs, nothing else */
        } else { /* MODE 1 crashes and MODE 3 fails to launch: 4 validation runs ran */
            assert_int_equal(closes, 0);
            assert_int_equal(readbacks, 2 * 4); /* every one: both buffers */
        }
        for (size_t i = 0; i < 3; i++)
            if (args[i].type == KT_TYPE_BUFFER) kt_device_free(ctx, dev, args[i].ptr);
        kt_context_destroy(ctx);
    }
    dlclose(h);
}

static int hook_nothing(kt_arg *args, size_t nargs, void *user) {
    (void)args, (void)nargs, (void)user;
    return 0;
}

/* A ReadWrite buffer, restored before every run with the same bytes, crosses to the runner once:
 * the runner keeps a copy on its device and restores it from there (device to device) before each
 * later run, checked or not. Every run still starts from the caller's bytes: each configuration's
 * validation run (out += 2 in) matches the reference, and the caller sees one launch's sum. A
 * pre-hook may rewrite the buffer, so with one it is copied in before every run, as before. A
 * configuration that crashes its runner takes the kept copy with it: the replacement is sent
 * the buffer again, and the configurations after the crash still start from the caller's bytes. */
static void test_plugin_restores_on_device(void **state) {
    (void)state;
    void *h = plugin_open(KT_PLUGIN);
    char out_bytes[32];
    snprintf(out_bytes, sizeof out_bytes, "-%zu", (size_t)N * sizeof(float));
    static const char *const names[] = {"there", "here", "hooked", "crashing"};
    for (int c = 0; c < 4; c++) { /* checked on the device; checked here; with a pre-hook; with crashes between */
        log_reset();
        kt_context *ctx = NULL;
        kt_arg args[3];
        size_t dev;
        kt_op *op = plug_op(h, c == 0 || c == 3 ? "kt_test_plug_checks" : "kt_test_plug", names[c], 0, args, &dev, NULL, &ctx,
                            KT_READ_WRITE);
        if (c == 2) ok(kt_op_set_bench_hooks(op, hook_nothing, NULL, NULL));
        plug_variants(op, (const char *const[]){"REPS", "[40, 1]", "MODE", c == 3 ? "[5, 1]" : "[5]", NULL});
        ok(kt_op_call(op, args, 3));
        float out[N], in[N];
        ok(kt_device_read(ctx, dev, out, args[0].ptr, sizeof out));
        ok(kt_device_read(ctx, dev, in, args[1].ptr, sizeof in));
        for (int i = 0; i < N; i++) assert_true(out[i] == (float)(100 + i % 7) + 2.0f * in[i]); /* one launch's sum */
        const kt_decision *d = NULL;
        ok(kt_op_decision(op, args, 3, &d));
        assert_string_equal(kt_decision_unit_config(d, kt_decision_winner_unit(d)), "REPS=1,MODE=5");
        expect_unit(d, "REPS=40,MODE=5", KT_OUTCOME_MEASURED, NULL); /* its validation run started from the caller's bytes */
        char upload[48], d2d[48];
        snprintf(upload, sizeof upload, "upload%s", out_bytes);
        snprintf(d2d, sizeof d2d, "d2d%s", out_bytes);
        int mine = 0, launches = log_count("launch", &mine, NULL), uploads = log_count(upload, &mine, NULL),
            copies = log_count(d2d, &mine, NULL);
        assert_true(launches >= 4); /* two validation runs and at least one measured run of each */
        if (c == 3) { /* both MODE 1 configurations crashed their runners; the replacements were sent out again */
            expect_unit(d, "REPS=40,MODE=1", KT_OUTCOME_CRASHED, "signal 11");
            expect_unit(d, "REPS=1,MODE=1", KT_OUTCOME_CRASHED, "signal 11");
            expect_unit(d, "REPS=1,MODE=5", KT_OUTCOME_MEASURED, NULL);
            assert_true(uploads >= 4); /* out and the reference's out, once per runner that ran MODE 5 */
        } else if (c == 2) {
            assert_int_equal(copies, 0);
            assert_int_equal(uploads, launches); /* in, every run: the pre-hook may have changed it */
        } else {
            /* out, once (and, checked there, the reference's out for the comparison); then
             * restored there: once kept, then before every later run */
            assert_int_equal(uploads, c == 0 ? 2 : 1);
            assert_int_equal(copies, launches);
        }
        for (size_t i = 0; i < 2; i++) kt_device_free(ctx, dev, args[i].ptr);
        kt_context_destroy(ctx);
    }
    dlclose(h);
}

/* Before every validation and measured run the device's cache is flushed: a backend of ABI 16
 * that can evict the run's buffers is asked to (out and in, each time), and its whole-cache
 * flush is not; one whose flush_buffers cannot for its device (KT_ERR_NOT_FOUND) gets its whole
 * cache flushed instead. Both in the tuning process and in a runner. */
static void test_plugin_flushes_run_buffers(void **state) {
    (void)state;
    void *h = plugin_open(KT_PLUGIN);
    char out_evict[48], in_evict[48];
    snprintf(out_evict, sizeof out_evict, "evict-%zu", (size_t)N * sizeof(float));
    snprintf(in_evict, sizeof in_evict, "evict-%zu", (size_t)(N + 64) * sizeof(float));
    for (int c = 0; c < 4; c++) {
        int whole = c >= 2, isolated = c % 2 == 1;
        log_reset();
        kt_context *ctx = NULL;
        kt_arg args[3];
        size_t dev;
        kt_op *op = plug_op(h, whole ? "kt_test_plug_flush_whole" : "kt_test_plug_flush", isolated ? "flush-there" : "flush-here",
                            0, args, &dev, NULL, &ctx, KT_WRITE_ONLY);
        ok(kt_op_set_isolation(op, isolated ? KT_ISOLATE_ON : KT_ISOLATE_OFF));
        plug_variants(op, (const char *const[]){"REPS", "[40, 1]", NULL});
        ok(kt_op_call(op, args, 3));
        const kt_decision *d = NULL;
        ok(kt_op_decision(op, args, 3, &d));
        assert_string_equal(kt_decision_unit_config(d, kt_decision_winner_unit(d)), "REPS=1");
        int mine = 0, launches = log_count("launch", &mine, NULL) + mine;
        int outs = log_count(out_evict, &mine, NULL) + mine, ins = log_count(in_evict, &mine, NULL) + mine;
        int flushes = log_count("flush", &mine, NULL) + mine, refused = log_count("evict-refused", &mine, NULL) + mine;
        assert_true(launches >= 4); /* two validation runs and at least one measured run of each */
        int flushed = whole ? flushes : outs, measured = 0;
        for (size_t u = 0; u < kt_decision_unit_count(d); u++) measured += (int)kt_decision_unit_runs(d, u);
        /* every measured run was flushed first (validation runs too), never the final launch */
        if (flushed < measured || flushed > launches - 1)
            fail_msg("case %d: %d launches, %d measured runs, %d flushed", c, launches, measured, flushed);
        if (whole) {
            assert_int_equal(refused, flushes);
            assert_int_equal(outs + ins, 0);
        } else {
            assert_int_equal(ins, outs);
            assert_int_equal(flushes + refused, 0);
        }
        for (size_t i = 0; i < 2; i++) kt_device_free(ctx, dev, args[i].ptr);
        kt_context_destroy(ctx);
    }
    dlclose(h);
}

/* A backend whose kernels run on a processor of their own (KT_BACKEND_CAP_OWN_PROCESSOR) builds
 * a search's next configurations while it measures: each LAG = 1 configuration's build lasts
 * until a launch happens, which, when building and measuring took turns, never would (each
 * build would wait its 5 s out). The first configuration (LAG = 0) builds at once; every later
 * one is built while an earlier one runs. Without the capability, builds and runs take turns
 * (checked the same way: every waiting build times out). Each run repeats its work 20 times
 * (about 4 ms here): with runs of a fraction of a millisecond, a loaded CI machine once woke
 * the build threads for LAG 4 and 5 only after LAG 2 and 3 had been measured, so LAG 4's build
 * waited out its 5 s (waited 4, not 5). It happened again at 20 repetitions beside Kernel
 * Tuner's example scripts on PoCL (both cores busy), so each run now repeats it 60 times (12 ms). */
static void test_plugin_builds_while_measuring(void **state) {
    (void)state;
    void *h = plugin_open(KT_PLUGIN);
    for (int pipe = 1; pipe >= 0; pipe--) {
        log_reset();
        kt_context *ctx = NULL;
        kt_arg args[3];
        size_t dev;
        kt_op *op = plug_op(h, pipe ? "kt_test_plug_pipe" : "kt_test_plug", pipe ? "pipelined" : "in-turns", 2, args, &dev, NULL,
                            &ctx, KT_WRITE_ONLY);
        plug_variants(op, (const char *const[]){"LAG", "[0, 1, 2, 3, 4, 5]", "REPS", "[60]", NULL});
        ok(kt_op_set_search(op, "exhaustive", 1)); /* in order */
        if (!pipe) ok(kt_op_set_budget(op, 2, 0)); /* built as it goes too (a budget): LAG 0 and 1, together */
        ok(kt_op_call(op, args, 3));
        const kt_decision *d = NULL;
        ok(kt_op_decision(op, args, 3, &d));
        int mine = 0, waited = log_count("build-waited", &mine, NULL) + mine, timeouts = log_count("build-timeout", &mine, NULL) + mine;
        /* builds beside measuring run 10 below this process's priority; taking turns, at it */
        errno = 0;
        int base = getpriority(PRIO_PROCESS, 0);
        assert_int_equal(errno, 0);
        char at[32];
        snprintf(at, sizeof at, "nice-%d", pipe ? (base + 10 > 19 ? 19 : base + 10) : base);
        log_count(at, &mine, NULL);
        if (pipe) {
            for (size_t u = 0; u < kt_decision_unit_count(d); u++) assert_int_equal(kt_decision_unit_outcome(d, u), KT_OUTCOME_MEASURED);
            assert_int_equal(waited, 5); /* LAG 1 to 5: each saw a launch while it built */
            assert_int_equal(timeouts, 0);
            assert_int_equal(mine, 6); /* every build */
            assert_true(kt_decision_build_end_s(d) > 0); /* built in the background */
        } else {
            assert_int_equal(waited, 0);
            assert_int_equal(timeouts, 1); /* LAG 1 built while nothing ran */
            /* nothing was built in the background: no spans */
            assert_true(kt_decision_build_end_s(d) == 0 && kt_decision_build_busy(d, 0, 10) == -1);
            assert_int_equal(mine, 2); /* LAG 0 and 1 */
        }
        kt_device_free(ctx, dev, args[0].ptr);
        kt_device_free(ctx, dev, args[1].ptr);
        kt_context_destroy(ctx);
    }
    dlclose(h);
}

/* Under a budget of wall seconds, a tuning on such a backend stops at its deadline instead of
 * waiting for a build still running: the budget is 1 s, and SLOW's build takes 4 s (deaf: the
 * plugin does not ask whether the build is still wanted) or a minute (it asks every 10 ms). The
 * tuning returns without it (its unit NOT_RUN, the fast one the winner) and before it ends. The
 * deaf build goes on, and the context waits for it when it is destroyed (its module unloaded
 * there: the sanitizers' leak check sees to that); the other is cancelled when the tuning ends
 * (at its next look, within 10 ms), and its failure is not recorded. */
static void test_plugin_budget_leaves_slow_build(void **state) {
    (void)state;
    void *h = plugin_open(KT_PLUGIN);
    for (int deaf = 1; deaf >= 0; deaf--) {
        log_reset();
        kt_context *ctx = NULL;
        kt_arg args[3];
        size_t dev;
        const int failed_before = count_files(artifacts, ".failed");
        kt_op *op = plug_op(h, "kt_test_plug_pipe", deaf ? "deadline-deaf" : "deadline", 2, args, &dev, NULL, &ctx, KT_WRITE_ONLY);
        const char *slow = deaf ? "SLOW=4000,DEAF=1,REPS=1" : "SLOW=60000,DEAF=0,REPS=1";
        plug_variants(op, (const char *const[]){"SLOW", deaf ? "[0, 4000]" : "[0, 60000]", "DEAF", deaf ? "[1]" : "[0]", "REPS", "[1]",
                                                NULL});
        ok(kt_op_set_search(op, "exhaustive", 1)); /* in order: the fast one first */
        ok(kt_op_set_budget(op, 0, 1.0));
        double t0 = now_s();
        ok(kt_op_call(op, args, 3));
        double took = now_s() - t0;
        int mine = 0;
        /* still building: the call did not wait for the slow build (4 s of sleep, or a minute) */
        assert_int_equal(log_count("build-slow-done", &mine, NULL) + mine, 0);
        /* and returned at its deadline (1 s), not after a minute's build: a guard of ten times
         * the deadline, which a busy machine does not reach (the log, not the clock, shows that
         * it did not wait for the 4 s one) */
        assert_true(took < 10.0);
        const kt_decision *d = NULL;
        ok(kt_op_decision(op, args, 3, &d));
        expect_unit(d, deaf ? "SLOW=0,DEAF=1,REPS=1" : "SLOW=0,DEAF=0,REPS=1", KT_OUTCOME_MEASURED, NULL);
        expect_unit(d, slow, KT_OUTCOME_NOT_RUN, NULL);
        assert_string_equal(kt_decision_unit_config(d, kt_decision_winner_unit(d)), deaf ? "SLOW=0,DEAF=1,REPS=1" : "SLOW=0,DEAF=0,REPS=1");
        /* the slow build was running when the tuning ended, and counts as busy until then (its
         * unit, not run, has no build time): over the second half of the builds' span exactly
         * one build thread was busy, over the whole about one (the fast build took no time) */
        double end = kt_decision_build_end_s(d); /* at most the 1 s deadline: the builder starts after the set-up */
        size_t threads = kt_decision_build_threads(d);
        if (!(end > 0 && end <= took) || threads < 1) fail_msg("builds ended at %.3f s of a %.3f s call, %zu threads", end, took, threads);
        double late = kt_decision_build_busy(d, end / 2, end) * (double)threads;
        if (fabs(late - 1.0) > 1e-9) fail_msg("%.6f threads busy over the second half, expected 1", late);
        double whole = kt_decision_build_busy(d, 0, end) * (double)threads;
        if (whole < 0.5 || whole > 1.05) fail_msg("%.3f threads busy over the whole, expected about 1", whole);
        assert_true(kt_decision_build_busy(d, 0, end + 100) == kt_decision_build_busy(d, 0, end)); /* the window ends there */
        assert_true(kt_decision_build_busy(d, end, end + 1) == -1); /* an empty window */
        kt_device_free(ctx, dev, args[0].ptr);
        kt_device_free(ctx, dev, args[1].ptr);
        t0 = now_s();
        kt_context_destroy(ctx);
        if (deaf) { /* the context waited for it */
            assert_int_equal(log_count("build-slow-done", &mine, NULL) + mine, 1);
            assert_int_equal(log_count("build-cancelled", &mine, NULL) + mine, 0);
        } else { /* a minute's build, cancelled as the tuning ended: nothing left to wait for */
            assert_true(now_s() - t0 < 30);
            assert_int_equal(log_count("build-cancelled", &mine, NULL) + mine, 1);
            assert_int_equal(log_count("build-slow-done", &mine, NULL) + mine, 0);
            /* the plugin says its code failed (KT_ERR_BACKEND): a cancelled build is never recorded */
            assert_int_equal(count_files(artifacts, ".failed"), failed_before);
        }
    }
    dlclose(h);
}

/* Under a budget of wall seconds the search goes on proposing while a build of the median time
 * still fits in what is left, though the slowest builds would not: a build that cannot finish
 * is not waited for, so a late proposal costs a build thread and nothing else. Configurations
 * 0-7 build at once, 8-11 take 1.5 s (as large tiles do in Kernel Tuner's CUDA convolution),
 * the rest at once again; four build threads, so the eight submitted at a time are 8-15 while
 * the slow four build, and nothing else is proposed until they end, at 1.5 s or later of a 3 s
 * budget: their 90th percentile (1.5 s) no longer fits in what is left, their median (0 s)
 * does. Stopping at the 90th percentile instead ended this tuning with 17 and 22 evaluated in
 * two runs, against 225 at the median (2026-12-03). */
static void test_plugin_budget_proposes_while_median_fits(void **state) {
    (void)state;
    void *h = plugin_open(KT_PLUGIN);
    log_reset();
    kt_context *ctx = NULL;
    kt_arg args[3];
    size_t dev;
    kt_op *op = plug_op(h, "kt_test_plug_pipe", "late-proposals", 4, args, &dev, NULL, &ctx, KT_WRITE_ONLY);
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    ok(kt_space_add_param(sp, "ID", "list(range(1000))"));
    ok(kt_space_add_param(sp, "SLOW", "[0, 1500]"));
    ok(kt_space_add_param(sp, "REPS", "[1]"));
    ok(kt_space_add_constraint(sp, "(ID >= 8 and ID < 12) == (SLOW == 1500)"));
    ok(kt_op_add_variants(op, "twice", sp, "plug source", "twice", NULL, 0));
    kt_space_destroy(sp);
    ok(kt_op_set_search(op, "exhaustive", 1)); /* in order: the slow four come 9th to 12th */
    ok(kt_op_set_budget(op, 0, 3.0));
    double t0 = now_s();
    ok(kt_op_call(op, args, 3));
    assert_true(now_s() - t0 < 30.0); /* ten times the budget: it did not run to the space's end */
    const kt_decision *d = NULL;
    ok(kt_op_decision(op, args, 3, &d));
    size_t measured = 0, slow_measured = 0;
    for (size_t u = 0; u < kt_decision_unit_count(d); u++) {
        if (kt_decision_unit_outcome(d, u) != KT_OUTCOME_MEASURED) continue;
        measured++;
        slow_measured += strstr(kt_decision_unit_config(d, u), "SLOW=1500") != NULL;
    }
    assert_int_equal(slow_measured, 4);
    if (measured <= 40) fail_msg("%zu configurations measured: proposals stopped when the slow builds ended", measured);
    kt_device_free(ctx, dev, args[0].ptr);
    kt_device_free(ctx, dev, args[1].ptr);
    kt_context_destroy(ctx);
    dlclose(h);
}

/* The line of the plugin's log where word first comes (-1: never). */
static int first_line(const char *word) {
    FILE *f = fopen(plugin_log, "r");
    char w[64];
    long pid;
    int at = -1;
    for (int n = 0; f && at < 0 && fscanf(f, "%63s %ld", w, &pid) == 2; n++)
        if (strcmp(w, word) == 0) at = n;
    if (f) fclose(f);
    return at;
}

/* Under a budget of wall seconds such a tuning takes units as their builds end: SLOW = 1500,
 * proposed first (exhaustive, in order), builds for 1.5 s, and the unit proposed after it, built
 * at once, runs first. Without that budget the units run in the order proposed (repeatable):
 * the slow one first. Both are measured either way. */
static void test_plugin_budget_takes_units_as_built(void **state) {
    (void)state;
    void *h = plugin_open(KT_PLUGIN);
    for (int budget = 1; budget >= 0; budget--) {
        log_reset();
        kt_context *ctx = NULL;
        kt_arg args[3];
        size_t dev;
        /* as built: the build threads left to kerntune, which keeps a quarter of the processors
         * for the measuring (at least two threads build: the case needs two at once) */
        kt_op *op = plug_op(h, "kt_test_plug_pipe", budget ? "as-built" : "in-order", budget ? 0 : 2, args, &dev, NULL, &ctx,
                            KT_WRITE_ONLY);
        plug_variants(op, (const char *const[]){"SLOW", "[1500, 0]", "REPS", "[1]", NULL});
        ok(kt_op_set_search(op, "exhaustive", 1));
        if (budget) ok(kt_op_set_budget(op, 0, 60.0));
        ok(kt_op_call(op, args, 3));
        const kt_decision *d = NULL;
        ok(kt_op_decision(op, args, 3, &d));
        expect_unit(d, "SLOW=1500,REPS=1", KT_OUTCOME_MEASURED, NULL);
        expect_unit(d, "SLOW=0,REPS=1", KT_OUTCOME_MEASURED, NULL);
        size_t all = kt_context_compile_threads(ctx); /* here: the processors (at most 64), or the 2 set */
        assert_int_equal(kt_decision_build_threads(d), budget ? all - all / 4 : 2);
        int fast = first_line("launch"), slow = first_line("launch-slow");
        assert_true(fast >= 0 && slow >= 0);
        if (budget) assert_true(fast < slow);
        else assert_true(slow < fast);
        kt_device_free(ctx, dev, args[0].ptr);
        kt_device_free(ctx, dev, args[1].ptr);
        kt_context_destroy(ctx);
    }
    dlclose(h);
}

/* A configuration whose compiled kernel cannot take its launch's block (the backend's fits, ABI
 * 11: the compiler's own account of registers and shared memory) is rejected after it is built
 * and before it is launched, with the backend's reason; the others run. */
static void test_plugin_rejects_what_does_not_fit(void **state) {
    (void)state;
    log_reset();
    void *h = plugin_open(KT_PLUGIN);
    kt_context *ctx = NULL;
    kt_arg args[3];
    size_t dev;
    kt_op *op = plug_op(h, "kt_test_plug", "fits", 0, args, &dev, NULL, &ctx, KT_WRITE_ONLY);
    plug_variants(op, (const char *const[]){"MAXT", "[0, 64]", "REPS", "[1]", NULL});
    ok(kt_op_call(op, args, 3));
    const kt_decision *d = NULL;
    ok(kt_op_decision(op, args, 3, &d));
    expect_unit(d, "MAXT=0,REPS=1", KT_OUTCOME_REJECTED, "plug: needs 1 threads per block; the kernel allows 0");
    expect_unit(d, "MAXT=64,REPS=1", KT_OUTCOME_MEASURED, NULL);
    assert_string_equal(kt_decision_unit_config(d, kt_decision_winner_unit(d)), "MAXT=64,REPS=1");
    kt_device_free(ctx, dev, args[0].ptr);
    kt_device_free(ctx, dev, args[1].ptr);
    kt_context_destroy(ctx);
    dlclose(h);
}

/* A backend that does not say it can run in a runner runs its variants here under
 * KT_ISOLATE_ON, and an info line says so. */
static void test_plugin_backend_without_runner(void **state) {
    (void)state;
    log_reset();
    void *h = plugin_open(KT_PLUGIN);
    const kt_decision *d = NULL;
    kt_arg args[3];
    size_t dev;
    lines got = {""};
    kt_context *ctx = plug_tune(h, "kt_test_plug_nocap", "unplugged", &d, args, &dev, &got);
    assert_non_null(strstr(got.text, "op 'unplugged': variants run in this process, not in a runner: backend 'plugnocap' does not say it "
                                     "can run in a runner process (KT_BACKEND_CAP_RUNNER)"));
    assert_string_equal(kt_decision_unit_config(d, kt_decision_winner_unit(d)), "REPS=1,MODE=0");
    expect_unit(d, "REPS=1,MODE=2", KT_OUTCOME_INVALID, NULL);
    int mine = 0;
    assert_int_equal(log_count("launch", &mine, NULL), 0);
    assert_true(mine >= 5);
    for (size_t i = 0; i < 3; i++)
        if (args[i].type == KT_TYPE_BUFFER) kt_device_free(ctx, dev, args[i].ptr);
    kt_context_destroy(ctx);
    dlclose(h);
}

/* Natives of a shared object run in kerntune-runner, which loads the object: a static one
 * (found by its offset, the build-id checked) and an exported one that fails with 42. Built
 * without a build-id, the static one cannot be found there: it runs here, and says why. */
static void test_plugin_natives(void **state) {
    (void)state;
    log_reset();
    void *h = plugin_open(KT_PLUGIN), *noid = plugin_open(KT_PLUGIN_NOID);
    kt_native_fn (*get)(void) = NULL, (*get_noid)(void) = NULL;
    void *p = plugin_sym(h, "kt_test_plug_native_twice"), *q = plugin_sym(noid, "kt_test_plug_native_twice");
    memcpy(&get, &p, sizeof p);
    memcpy(&get_noid, &q, sizeof q);
    void *f = plugin_sym(h, "kt_test_plug_native_fails");
    kt_native_fn fails;
    memcpy(&fails, &f, sizeof f);
    kt_context *ctx = NULL;
    ok(kt_context_create(&ctx));
    lines got = {""};
    ok(kt_context_set_log_level(ctx, KT_LOG_INFO));
    ok(kt_context_set_log_fn(ctx, capture, &got));
    static float out[N], in[N];
    for (int i = 0; i < N; i++) in[i] = (float)(i % 13);
    kt_arg args[3] = {kt_arg_buf(out, sizeof out), kt_arg_buf(in, sizeof in), kt_arg_i32(N)};
    kt_op *op = natives_op(ctx, "plugged-natives", KT_ISOLATE_ON);
    ok(kt_op_add_native(op, "slow", get(), (void *)(intptr_t)40));
    ok(kt_op_add_native(op, "fails", fails, NULL));
    ok(kt_op_add_native(op, "fast", get(), (void *)(intptr_t)1));
    ok(kt_op_add_native(op, "noid", get_noid(), (void *)(intptr_t)40));
    ok(kt_op_call(op, args, 3));
    for (int i = 0; i < N; i++) assert_true(out[i] == 2.0f * in[i]);
    const kt_decision *d = NULL;
    ok(kt_op_decision(op, args, 3, &d));
    assert_string_equal(kt_op_candidate_name(op, kt_decision_winner(d)), "fast");
    expect_fail(d, 1, KT_OUTCOME_FAILED, KT_FAIL_RETURNED, "returned", 42);
    assert_int_equal(kt_decision_outcome(d, 3), KT_OUTCOME_MEASURED);
    assert_non_null(strstr(got.text, "native 'noid' runs in this process, not in a runner: "));
    assert_non_null(strstr(got.text, "has no build-id and the code no exported symbol"));
    assert_null(strstr(got.text, "native 'slow' runs in this process"));
    int mine = 0;
    assert_true(log_count("native", &mine, NULL) >= 5); /* slow, fails, fast: validation and measured runs */
    assert_true(mine >= 3);                            /* noid's runs, and the final launch of fast */
    kt_context_destroy(ctx);
    dlclose(noid);
    dlclose(h);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plugin_backend),
        cmocka_unit_test(test_plugin_backend_without_runner),
        cmocka_unit_test(test_plugin_backend_checks_in_runner),
        cmocka_unit_test(test_plugin_restores_on_device),
        cmocka_unit_test(test_plugin_flushes_run_buffers),
        cmocka_unit_test(test_plugin_builds_while_measuring),
        cmocka_unit_test(test_plugin_budget_leaves_slow_build),
        cmocka_unit_test(test_plugin_budget_takes_units_as_built),
        cmocka_unit_test(test_plugin_budget_proposes_while_median_fits),
        cmocka_unit_test(test_plugin_rejects_what_does_not_fit),
        cmocka_unit_test(test_plugin_natives),
    };
    return kt_run_cases(argc, argv, tests, setup, teardown);
}
