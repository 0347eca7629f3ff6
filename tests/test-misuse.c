/*
 * test-misuse.c - every misuse of the API returns its documented status and a message that
 * names the function and what is wrong; nothing crashes.
 */
#include "helpers.h"

#include <kerntune/backend.h>
#include <kerntune/decision.h>
#include <kerntune/device.h>
#include <kerntune/measure.h>
#include <kerntune/variants.h>

/* Expects status and a detail message containing `needle`. */
#define expect_err(status, needle, call)                                                          \
    do {                                                                                          \
        expect_status(status, call);                                                              \
        if (strstr(kt_last_error(), needle) == NULL)                                              \
            fail_msg("%s: message '%s' lacks '%s'", #call, kt_last_error(), needle);              \
    } while (0)

static int32_t buf[8];
static cand c1 = {.id = 1}, c2 = {.id = 2};

static void test_status_names(void **state) {
    (void)state;
    assert_string_equal(kt_status_name(KT_OK), "OK");
    assert_string_equal(kt_status_name(KT_ERR_ARG_TYPE), "ERR_ARG_TYPE");
    assert_string_equal(kt_status_name((kt_status)999), "UNKNOWN");
    assert_string_equal(kt_strerror((kt_status)-1), "unknown status code");
    assert_string_equal(kt_strerror(KT_OK), "success");
    for (int s = 0; s <= KT_ERR_BACKEND; s++) {
        assert_string_not_equal(kt_status_name((kt_status)s), "UNKNOWN");
        assert_true(strlen(kt_strerror((kt_status)s)) > 5);
        for (int t = 0; t < s; t++) assert_string_not_equal(kt_status_name((kt_status)s), kt_status_name((kt_status)t));
    }
    assert_int_equal(kt_version_number(), KT_VERSION_NUMBER);
    assert_string_equal(kt_type_name(KT_TYPE_F64), "f64");
    assert_int_equal(kt_type_size(KT_TYPE_BF16), 2);
    assert_int_equal(kt_type_size(KT_TYPE_BUFFER), 0);
}

static void test_null_handles(void **state) {
    (void)state;
    kt_context *ctx = NULL;
    kt_op *op = NULL;
    const kt_decision *d = NULL;
    expect_err(KT_ERR_NULL, "kt_context_create", kt_context_create(NULL));
    expect_err(KT_ERR_NULL, "kt_op_create: out", kt_op_create(NULL, "x", NULL));
    expect_err(KT_ERR_NULL, "kt_op_create: ctx", kt_op_create(NULL, "x", &op));
    assert_null(op);
    expect_err(KT_ERR_NULL, "kt_op_call: op is NULL", kt_op_call(NULL, NULL, 0));
    expect_err(KT_ERR_NULL, "kt_op_add_native", kt_op_add_native(NULL, "a", cand_fn, NULL));
    expect_err(KT_ERR_NULL, "kt_op_add_buffer", kt_op_add_buffer(NULL, "a", KT_TYPE_F32, KT_READ_ONLY));
    expect_err(KT_ERR_NULL, "kt_op_add_scalar", kt_op_add_scalar(NULL, "a", KT_TYPE_I32));
    expect_err(KT_ERR_NULL, "kt_op_key_arg", kt_op_key_arg(NULL, 0, KT_BUCKET_EXACT));
    expect_err(KT_ERR_NULL, "kt_op_set_default", kt_op_set_default(NULL, "a"));
    expect_err(KT_ERR_NULL, "kt_op_set_fallback", kt_op_set_fallback(NULL, "a"));
    expect_err(KT_ERR_NULL, "kt_op_force", kt_op_force(NULL, "a"));
    expect_err(KT_ERR_NULL, "kt_op_set_effort", kt_op_set_effort(NULL, KT_EFFORT_OFF));
    expect_err(KT_ERR_NULL, "kt_op_require_align", kt_op_require_align(NULL, "a", 0, 16));
    expect_err(KT_ERR_NULL, "kt_op_require_multiple", kt_op_require_multiple(NULL, "a", 0, 4));
    expect_err(KT_ERR_NULL, "kt_op_require_fn", kt_op_require_fn(NULL, "a", NULL, NULL));
    expect_err(KT_ERR_NULL, "kt_op_decision: out", kt_op_decision(NULL, NULL, 0, NULL));
    expect_err(KT_ERR_NULL, "kt_op_decision: op", kt_op_decision(NULL, NULL, 0, &d));
    expect_err(KT_ERR_NULL, "kt_context_set_effort", kt_context_set_effort(NULL, KT_EFFORT_OFF));
    expect_err(KT_ERR_NULL, "kt_context_set_measure", kt_context_set_measure(NULL, 1, 1, 1, 0));
    expect_err(KT_ERR_NULL, "kt_context_set_log_level", kt_context_set_log_level(NULL, KT_LOG_INFO));
    expect_err(KT_ERR_NULL, "kt_context_set_log_fn", kt_context_set_log_fn(NULL, NULL, NULL));
    expect_err(KT_ERR_NULL, "kt_context_add_backend", kt_context_add_backend(NULL, kt_backend_c()));
    /* Destroy functions and accessors accept NULL. */
    kt_context_destroy(NULL);
    kt_op_destroy(NULL);
    assert_null(kt_op_name(NULL));
    assert_int_equal(kt_op_arg_count(NULL), 0);
    assert_int_equal(kt_op_candidate_count(NULL), 0);
    assert_null(kt_op_candidate_name(NULL, 0));
    assert_int_equal(kt_op_tune_count(NULL), 0);
    assert_int_equal(kt_op_decision_count(NULL), 0);
    assert_null(kt_op_decision_at(NULL, 0));
    assert_int_equal(kt_context_device_count(NULL), 0);
    assert_null(kt_context_device(NULL, 0));
    assert_null(kt_device_name(NULL));
    assert_int_equal(kt_decision_key_len(NULL), 0);
    assert_true(kt_decision_time_ns(NULL, 0) < 0);
    assert_int_equal(kt_context_effort(NULL), KT_EFFORT_INHERIT);
    (void)ctx;
}

static kt_op *small_op(kt_context *ctx, const char *name) {
    kt_op *op = test_op(ctx, name);
    ok(kt_op_add_native(op, "a", cand_fn, &c1));
    ok(kt_op_add_native(op, "b", cand_fn, &c2));
    return op;
}

static void test_wrong_arguments(void **state) {
    (void)state;
    kt_context *ctx = test_context(1);
    kt_op *op = small_op(ctx, "args");
    expect_err(KT_ERR_ARG_COUNT, "1 argument(s) passed, the op declares 2",
               kt_op_call(op, (kt_arg[]){kt_arg_buf(buf, sizeof buf)}, 1));
    expect_err(KT_ERR_ARG_COUNT, "op 'args'",
               kt_op_call(op, (kt_arg[]){kt_arg_buf(buf, sizeof buf), kt_arg_i64(1), kt_arg_i64(1)}, 3));
    expect_err(KT_ERR_NULL, "args is NULL", kt_op_call(op, NULL, 2));
    expect_err(KT_ERR_ARG_TYPE, "argument 1 ('n') is f32, the op declares i64",
               kt_op_call(op, (kt_arg[]){kt_arg_buf(buf, sizeof buf), kt_arg_f32(1)}, 2));
    expect_err(KT_ERR_ARG_TYPE, "argument 1 ('n') is i32",
               kt_op_call(op, (kt_arg[]){kt_arg_buf(buf, sizeof buf), kt_arg_i32(1)}, 2));
    expect_err(KT_ERR_ARG_TYPE, "argument 0 ('out') is i64, the op declares buffer",
               kt_op_call(op, (kt_arg[]){kt_arg_i64(1), kt_arg_i64(1)}, 2));
    expect_err(KT_ERR_ARG_TYPE, "has 6 bytes, not a multiple of its i32 element size 4",
               kt_op_call(op, (kt_arg[]){kt_arg_buf(buf, 6), kt_arg_i64(1)}, 2));
    assert_int_equal(calls(&c1) + calls(&c2), 0);
    expect_err(KT_ERR_ARG_COUNT, "kt_op_decision",
               kt_op_decision(op, (kt_arg[]){kt_arg_i64(1)}, 1, &(const kt_decision *){NULL}));
    kt_context_destroy(ctx);
}

static void test_unknown_candidate(void **state) {
    (void)state;
    kt_context *ctx = test_context(1);
    kt_op *op = small_op(ctx, "unknown");
    expect_err(KT_ERR_UNKNOWN_CANDIDATE, "no candidate named 'zz'", kt_op_set_default(op, "zz"));
    expect_err(KT_ERR_UNKNOWN_CANDIDATE, "kt_op_set_fallback", kt_op_set_fallback(op, "zz"));
    expect_err(KT_ERR_UNKNOWN_CANDIDATE, "kt_op_force", kt_op_force(op, "zz"));
    expect_err(KT_ERR_UNKNOWN_CANDIDATE, "kt_op_require_align", kt_op_require_align(op, "zz", 0, 16));
    expect_err(KT_ERR_UNKNOWN_CANDIDATE, "kt_op_require_multiple", kt_op_require_multiple(op, "zz", 1, 4));
    expect_err(KT_ERR_UNKNOWN_CANDIDATE, "kt_op_require_fn", kt_op_require_fn(op, "zz", cand_fn, NULL));
    expect_err(KT_ERR_NULL, "candidate name is NULL", kt_op_set_default(op, NULL));
    ok(kt_op_set_fallback(op, NULL)); /* NULL clears the fallback */
    ok(kt_op_force(op, NULL));        /* and the forced candidate */
    assert_null(kt_op_candidate_name(op, 2));
    kt_context_destroy(ctx);

    setenv("KERNTUNE_FORCE", "unknown2=zz", 1);
    ctx = test_context(1);
    unsetenv("KERNTUNE_FORCE");
    op = small_op(ctx, "unknown2");
    expect_err(KT_ERR_UNKNOWN_CANDIDATE, "KERNTUNE_FORCE names candidate 'zz'",
               kt_op_call(op, (kt_arg[]){kt_arg_buf(buf, sizeof buf), kt_arg_i64(1)}, 2));
    assert_int_equal(calls(&c1) + calls(&c2), 0);
    kt_context_destroy(ctx);
}

/* A successful call leaves the last error as it was (review finding: a successful add used to
 * overwrite it), and the largest alignment requirement is checked without overflow. */
static void test_success_keeps_error_and_huge_align(void **state) {
    (void)state;
    kt_context *ctx = test_context(1);
    kt_op *op = test_op(ctx, "keeps");
    expect_status(KT_ERR_UNKNOWN_CANDIDATE, kt_op_set_default(op, "zz"));
    char before[512];
    snprintf(before, sizeof before, "%s", kt_last_error());
    ok(kt_op_add_native(op, "a", cand_fn, &c1));
    ok(kt_op_add_native(op, "b", cand_fn, &c2));
    assert_string_equal(kt_last_error(), before);
    ok(kt_op_require_align(op, "a", 0, (size_t)1 << 63));
    ok(kt_op_call(op, (kt_arg[]){kt_arg_buf(buf, sizeof buf), kt_arg_i64(1)}, 2));
    assert_int_equal(buf[0], c2.id); /* a rejects any real address */
    kt_context_destroy(ctx);
}

static void test_empty_and_frozen(void **state) {
    (void)state;
    kt_context *ctx = test_context(1);
    kt_op *op = test_op(ctx, "empty");
    kt_arg args[] = {kt_arg_buf(buf, sizeof buf), kt_arg_i64(1)};
    expect_err(KT_ERR_NO_CANDIDATES, "op 'empty'", kt_op_call(op, args, 2));
    ok(kt_op_add_native(op, "a", cand_fn, &c1)); /* still buildable after that failure */
    ok(kt_op_call(op, args, 2));
    expect_err(KT_ERR_STATE, "kt_op_add_native(op 'empty'): the op was already called", kt_op_add_native(op, "b", cand_fn, &c2));
    expect_err(KT_ERR_STATE, "kt_op_add_scalar", kt_op_add_scalar(op, "m", KT_TYPE_I32));
    expect_err(KT_ERR_STATE, "kt_op_key_arg", kt_op_key_arg(op, 1, KT_BUCKET_EXACT));
    expect_err(KT_ERR_STATE, "kt_op_set_default", kt_op_set_default(op, "a"));
    expect_err(KT_ERR_STATE, "kt_op_set_effort", kt_op_set_effort(op, KT_EFFORT_OFF));
    expect_err(KT_ERR_STATE, "kt_op_require_multiple", kt_op_require_multiple(op, "a", 1, 2));
    kt_context_destroy(ctx);
}

static void test_bad_declarations(void **state) {
    (void)state;
    kt_context *ctx = test_context(1);
    kt_op *op = NULL, *dup = NULL;
    expect_err(KT_ERR_INVALID_ARGUMENT, "1 to 127 allowed", kt_op_create(ctx, "", &op));
    char longname[200];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    expect_err(KT_ERR_INVALID_ARGUMENT, "has 199 characters", kt_op_create(ctx, longname, &op));
    expect_err(KT_ERR_NULL, "name is NULL", kt_op_create(ctx, NULL, &op));
    op = small_op(ctx, "decl");
    expect_err(KT_ERR_DUPLICATE, "an op named 'decl' already exists", kt_op_create(ctx, "decl", &dup));
    assert_null(dup);
    expect_err(KT_ERR_DUPLICATE, "candidate 'a' already exists", kt_op_add_native(op, "a", cand_fn, &c1));
    expect_err(KT_ERR_NULL, "fn is NULL", kt_op_add_native(op, "c", NULL, NULL));
    expect_err(KT_ERR_DUPLICATE, "argument 'n' is already declared", kt_op_add_scalar(op, "n", KT_TYPE_I32));
    expect_err(KT_ERR_INVALID_ARGUMENT, "is not an element type", kt_op_add_buffer(op, "x", KT_TYPE_BUFFER, KT_READ_ONLY));
    expect_err(KT_ERR_INVALID_ARGUMENT, "access 9", kt_op_add_buffer(op, "x", KT_TYPE_F32, (kt_access)9));
    expect_err(KT_ERR_INVALID_ARGUMENT, "(f16) is not a scalar type", kt_op_add_scalar(op, "x", KT_TYPE_F16));
    expect_err(KT_ERR_INVALID_ARGUMENT, "bucket 7", kt_op_key_arg(op, 1, (kt_bucket)7));
    expect_err(KT_ERR_INVALID_ARGUMENT, "argument index 9 is out of range (the op has 2)", kt_op_key_arg(op, 9, KT_BUCKET_EXACT));
    ok(kt_op_add_scalar(op, "alpha", KT_TYPE_F64));
    expect_err(KT_ERR_INVALID_ARGUMENT, "POW2 bucketing of float argument 'alpha'", kt_op_key_arg(op, 2, KT_BUCKET_POW2));
    expect_err(KT_ERR_INVALID_ARGUMENT, "is not a power of two", kt_op_key_align(op, 0, 48));
    expect_err(KT_ERR_INVALID_ARGUMENT, "argument 'n' is not a buffer", kt_op_key_align(op, 1, 64));
    expect_err(KT_ERR_NULL, "fn is NULL", kt_op_key_fn(op, NULL, NULL));
    expect_err(KT_ERR_INVALID_ARGUMENT, "align 24 is not a power of two", kt_op_require_align(op, "a", 0, 24));
    expect_err(KT_ERR_INVALID_ARGUMENT, "argument 'n' is not a buffer", kt_op_require_align(op, "a", 1, 16));
    expect_err(KT_ERR_INVALID_ARGUMENT, "k 0 must be >= 1", kt_op_require_multiple(op, "a", 1, 0));
    expect_err(KT_ERR_INVALID_ARGUMENT, "argument 'alpha' is f64", kt_op_require_multiple(op, "a", 2, 2));
    expect_err(KT_ERR_INVALID_ARGUMENT, "argument index 5 is out of range", kt_op_require_multiple(op, "a", 5, 2));
    expect_err(KT_ERR_INVALID_ARGUMENT, "effort 9", kt_op_set_effort(op, (kt_effort)9));
    expect_err(KT_ERR_INVALID_ARGUMENT, "effort 0", kt_context_set_effort(ctx, KT_EFFORT_INHERIT));
    expect_err(KT_ERR_INVALID_ARGUMENT, "min_runs (0)", kt_context_set_measure(ctx, 1, 0, 5, 0));
    expect_err(KT_ERR_INVALID_ARGUMENT, "max_runs (2)", kt_context_set_measure(ctx, 1, 3, 2, 0));
    expect_err(KT_ERR_INVALID_ARGUMENT, "min_time_s", kt_context_set_measure(ctx, 1, 3, 5, -1));
    expect_err(KT_ERR_INVALID_ARGUMENT, "level 7", kt_context_set_log_level(ctx, (kt_log_level)7));
    for (int i = 1; i < 8; i++) ok(kt_op_key_arg(op, 1, KT_BUCKET_EXACT)); /* test_op declared one */
    expect_err(KT_ERR_LIMIT, "at most 8 key components", kt_op_key_arg(op, 1, KT_BUCKET_EXACT));
    kt_op_destroy(op); /* destroying an op early is fine; the context forgets it */
    ok(kt_op_create(ctx, "decl", &op));
    kt_context_destroy(ctx);
}

static void test_bad_environment(void **state) {
    (void)state;
    static const char *cases[][3] = {
        {"KERNTUNE_MODE", "fast", "KERNTUNE_MODE='fast' is not one of tune, cache-only, off"},
        {"KERNTUNE_LOG", "loud", "KERNTUNE_LOG='loud'"},
        {"KERNTUNE_FORCE", "justanop", "KERNTUNE_FORCE entry 1 'justanop' is not op=candidate"},
        {"KERNTUNE_FORCE", "a=b,op=", "KERNTUNE_FORCE entry 2 'op='"},
        {"KERNTUNE_FORCE", "=c", "entry 1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        setenv(cases[i][0], cases[i][1], 1);
        kt_context *ctx = (kt_context *)&ctx;
        expect_err(KT_ERR_ENV, cases[i][2], kt_context_create(&ctx));
        assert_null(ctx);
        unsetenv(cases[i][0]);
    }
    setenv("KERNTUNE_MODE", "", 1); /* empty counts as unset */
    kt_context *ctx = NULL;
    ok(kt_context_create(&ctx));
    assert_int_equal(kt_context_effort(ctx), KT_EFFORT_MEASURE);
    unsetenv("KERNTUNE_MODE");
    /* an artifact directory is never cut short: too long a one is refused, naming its source */
    char *longdir = malloc(5001);
    assert_non_null(longdir);
    memset(longdir, 'd', 5000);
    longdir[0] = '/', longdir[5000] = '\0';
    expect_err(KT_ERR_INVALID_ARGUMENT, "kt_context_set_artifact_dir: path has 5000 characters; 1 to 3900 allowed",
               kt_context_set_artifact_dir(ctx, longdir));
    longdir[3901] = '\0';
    expect_err(KT_ERR_INVALID_ARGUMENT, "path has 3901 characters", kt_context_set_artifact_dir(ctx, longdir));
    longdir[3900] = '\0';
    ok(kt_context_set_artifact_dir(ctx, longdir));
    assert_string_equal(kt_context_artifact_dir(ctx), longdir);
    kt_context_destroy(ctx);
    const char *saved = getenv("KERNTUNE_ARTIFACTS");
    char *keep = saved ? strdup(saved) : NULL;
    longdir[3900] = 'd';
    setenv("KERNTUNE_ARTIFACTS", longdir, 1); /* 3901 characters */
    ctx = (kt_context *)&ctx;
    expect_err(KT_ERR_ENV, "KERNTUNE_ARTIFACTS makes an artifact directory of 3901 characters; at most 3900", kt_context_create(&ctx));
    assert_null(ctx);
    if (keep) setenv("KERNTUNE_ARTIFACTS", keep, 1), free(keep);
    else unsetenv("KERNTUNE_ARTIFACTS");
    free(longdir);
}

/* A backend with two devices, one whose start fails, and malformed tables. */
static size_t two(void *s) {
    (void)s;
    return 2;
}
static kt_status describe(void *s, size_t i, char *name, char *fp, char *err, size_t errlen) {
    (void)s, (void)err, (void)errlen;
    snprintf(name, KT_DEVICE_NAME_MAX, "fake %zu", i);
    snprintf(fp, KT_DEVICE_FINGERPRINT_MAX, "fake:%zu", i);
    return KT_OK;
}
static kt_status failing_init(const kt_backend *b, void **st, char *err, size_t errlen) {
    (void)b, (void)st;
    snprintf(err, errlen, "runtime library not found");
    return KT_ERR_BACKEND;
}

static void test_backends(void **state) {
    (void)state;
    kt_context *ctx = test_context(1);
    size_t n0 = kt_context_device_count(ctx); /* the host, then what OpenCL and CUDA found */
    assert_true(n0 >= 1);
    assert_string_equal(kt_device_backend(kt_context_device(ctx, 0)), "c");
    assert_non_null(strstr(kt_device_fingerprint(kt_context_device(ctx, 0)), "cpu:"));
    assert_null(kt_context_device(ctx, n0));
    /* each built-in backend is either present or says why not */
    for (size_t i = 0; i < kt_context_unavailable_count(ctx); i++) assert_non_null(strstr(kt_context_unavailable(ctx, i), ": "));
    assert_null(kt_context_unavailable(ctx, kt_context_unavailable_count(ctx)));
    expect_err(KT_ERR_DUPLICATE, "backend 'c' is already registered", kt_context_add_backend(ctx, kt_backend_c()));
    kt_backend fake = {.abi_version = KT_BACKEND_ABI_VERSION, .name = "fake", .device_count = two, .device_describe = describe};
    kt_backend broken = fake, incomplete = fake;
    broken.name = "broken";
    broken.init = failing_init;
    incomplete.device_describe = NULL;
    expect_err(KT_ERR_BACKEND, "kt_context_add_backend(broken): runtime library not found", kt_context_add_backend(ctx, &broken));
    expect_err(KT_ERR_INVALID_ARGUMENT, "backend table is incomplete", kt_context_add_backend(ctx, &incomplete));
    /* a name is carried whole everywhere (fingerprints, the cache, the worker): never cut */
    kt_backend longname = fake, badname = fake;
    longname.name = "a_backend_name_of_thirty_two_chr";
    badname.name = "Fake Backend";
    expect_err(KT_ERR_INVALID_ARGUMENT, "backend name 'a_backend_name_of_thirty_two_chr' must be 1 to 31 lower-case letters",
               kt_context_add_backend(ctx, &longname));
    expect_err(KT_ERR_INVALID_ARGUMENT, "backend name 'Fake Backend' must be", kt_context_add_backend(ctx, &badname));
    assert_int_equal(kt_context_device_count(ctx), n0);
    ok(kt_context_add_backend(ctx, &fake));
    assert_int_equal(kt_context_device_count(ctx), n0 + 2);
    assert_string_equal(kt_device_name(kt_context_device(ctx, n0 + 1)), "fake 1");
    assert_string_equal(kt_device_fingerprint(kt_context_device(ctx, n0)), "fake:0");
    kt_context_destroy(ctx);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_names),     cmocka_unit_test(test_null_handles),
        cmocka_unit_test(test_wrong_arguments),  cmocka_unit_test(test_unknown_candidate),
        cmocka_unit_test(test_empty_and_frozen), cmocka_unit_test(test_bad_declarations),
        cmocka_unit_test(test_success_keeps_error_and_huge_align),
        cmocka_unit_test(test_bad_environment),  cmocka_unit_test(test_backends),
    };
    return kt_run_cases(argc, argv, tests, NULL, NULL);
}
