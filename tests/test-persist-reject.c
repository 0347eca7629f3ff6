/*
 * test-persist-reject.c - recorded decisions the persistent cache does not serve as they are:
 * poisoned records and lying wisdom (unknown candidate, configuration out of the space or
 * breaking a constraint, wrong types, another library version) are rejected, counted and
 * reported on the decision, never launched, and lend nothing: the key is measured afresh and the
 * lie replaced; a decision below the confidence its race asked for is marked so, served as it is
 * without measurement, and re-raced (its finalists only) with it. Real cache files.
 */
#include "persist-test.h"

#include <kerntune/backend.h>
#include <kerntune/cache.h>
#include <kerntune/device.h>
#include <kerntune/measure.h>
#include <kerntune/validation.h>
#include <kerntune/variants.h>

#include <jansson.h>
#include <math.h>
#include <sqlite3.h>

/* Exports the cache, lets edit() change the document, imports it in place of what was there. */
static void rewrite(void (*edit)(json_t *entry)) {
    kt_cache *c = NULL;
    ok(kt_cache_open(db, &c));
    char *text = NULL;
    ok(kt_cache_export(c, NULL, NULL, &text));
    json_error_t e;
    json_t *w = json_loads(text, 0, &e);
    kt_free(text);
    assert_non_null(w);
    json_t *entries = json_object_get(w, "entries");
    assert_int_equal(json_array_size(entries), 1);
    edit(json_array_get(entries, 0));
    char *out = json_dumps(w, 0);
    json_decref(w);
    size_t removed = 0;
    ok(kt_cache_remove(c, NULL, NULL, &removed));
    ok(kt_cache_import(c, out, 1, NULL, NULL, NULL));
    free(out);
    kt_cache_close(c);
}

/* The unit of entry e that won. */
static json_t *winner_unit(json_t *e) {
    json_t *w = json_object_get(e, "winner"), *u;
    size_t i;
    json_array_foreach(json_object_get(e, "units"), i, u) {
        if (json_equal(json_object_get(u, "candidate"), json_object_get(w, "candidate")) &&
            json_equal(json_object_get(u, "config"), json_object_get(w, "config")))
            return u;
    }
    fail_msg("the entry has no unit for its winner");
    return NULL;
}

/* Makes entry e name (candidate, config) as its winner, and renames the winner's unit to match:
 * a lie that only the op can see, as a hand-edited or foreign wisdom file could tell. */
static void lie_winner(json_t *e, const char *candidate, const char *config) {
    json_t *u = winner_unit(e), *w = json_object_get(e, "winner");
    json_t *c = json_string(candidate), *k = config ? json_string(config) : json_null();
    json_object_set(w, "candidate", c);
    json_object_set(w, "config", k);
    json_object_set_new(u, "candidate", c);
    json_object_set_new(u, "config", k);
}

static void edit_version(json_t *e) { json_object_set_new(e, "library_version", json_string("0.0.9")); }
static void edit_candidate(json_t *e) { lie_winner(e, "vanished", NULL); }

/* Tunes "poison" with fast and slow once, so that the cache holds its decision. */
static kt_context *poison_op(kt_op **op, cand *fast, cand *slow) {
    kt_context *ctx = ctx_on(db);
    *op = test_op(ctx, "poison");
    ok(kt_op_add_native(*op, "fast", cand_fn, fast));
    ok(kt_op_add_native(*op, "slow", cand_fn, slow));
    return ctx;
}

/* Records that must not be used: another library version misses; a winner the op does not
 * have and a row with values of the wrong type are rejected, counted and reported on the
 * decision; the key is tuned again from scratch (no unit's time is taken from the rejected
 * record) and the answer is right. */
static void test_invalid_records(void **state) {
    (void)state;
    void (*edits[2])(json_t *) = {edit_version, edit_candidate};
    for (int k = 0; k < 3; k++) {
        remove_db();
        cand fast = {.id = 1, .work = 1}, slow = {.id = 2, .work = 10, .sleep_ms = 20};
        kt_op *op = NULL;
        kt_context *ctx = poison_op(&op, &fast, &slow);
        ok(kt_op_call(op, ARGS(3), 2));
        kt_context_destroy(ctx);
        if (k < 2) {
            rewrite(edits[k]);
        } else { /* a time stored as text */
            sqlite3 *s = NULL;
            assert_int_equal(sqlite3_open(db, &s), SQLITE_OK);
            assert_int_equal(sqlite3_exec(s, "UPDATE decisions SET time_ns = 'abc'", NULL, NULL, NULL), SQLITE_OK);
            sqlite3_close(s);
        }
        atomic_store(&fast.calls, 0), atomic_store(&slow.calls, 0);
        ctx = poison_op(&op, &fast, &slow);
        buf[0] = 0;
        ok(kt_op_call(op, ARGS(3), 2));
        assert_int_equal(buf[0], 1);
        const kt_decision *d = decision(op, 3);
        assert_int_equal(kt_decision_source_of(d), KT_SOURCE_MEASURED);
        /* decided again from scratch: neither another version's units nor a rejected record's */
        assert_true(calls(&slow) >= 1);
        assert_true(kt_decision_runs(d, 0) > 0);
        assert_true(kt_decision_runs(d, 1) > 0);
        assert_int_equal(kt_context_cache_hits(ctx), 0);
        assert_int_equal(kt_context_cache_rejected(ctx), k == 0 ? 0 : 1); /* another version simply misses */
        if (k == 0) assert_null(kt_decision_cache_rejected(d));
        if (k == 1) assert_string_equal(kt_decision_cache_rejected(d), "it names candidate 'vanished', which the op does not have");
        if (k == 2)
            assert_string_equal(kt_decision_cache_rejected(d), "kt__store_get(op 'poison'): stored decision is invalid: column "
                                                               "decisions.time_ns is text 'abc'; expected a number");
        kt_context_destroy(ctx);
    }
}

/* A configuration that is not in today's space (the space changed, same set otherwise cannot
 * happen: a poisoned record) is rejected, never launched. */
static void test_config_out_of_space(void **state) {
    (void)state;
    remove_db();
    static const char *src = "void fill(int *out, long n) { out[0] = (int)(n * K); }\n";
    for (int round = 0; round < 2; round++) {
        kt_context *ctx = ctx_on(db);
        kt_op *op = NULL;
        ok(kt_op_create(ctx, "space", &op));
        ok(kt_op_add_buffer(op, "out", KT_TYPE_I32, KT_WRITE_ONLY));
        ok(kt_op_add_scalar(op, "n", KT_TYPE_I64));
        ok(kt_op_key_arg(op, 1, KT_BUCKET_EXACT));
        ok(kt_op_set_validation(op, 0));
        kt_space *sp = NULL;
        ok(kt_space_create(&sp));
        ok(kt_space_add_param(sp, "K", "[3]"));
        ok(kt_op_add_variants(op, "v", sp, src, "fill", NULL, 0));
        kt_space_destroy(sp);
        buf[0] = 0;
        ok(kt_op_call(op, ARGS(2), 2));
        assert_int_equal(buf[0], 6);
        const kt_decision *d = decision(op, 2);
        if (round == 1) {
            assert_int_equal(kt_decision_source_of(d), KT_SOURCE_MEASURED);
            assert_int_equal(kt_context_cache_rejected(ctx), 1);
            assert_string_equal(kt_decision_cache_rejected(d), "configuration K=999 of 'v' is not in today's space for these arguments");
            assert_true(kt_decision_unit_runs(d, 0) > 0); /* measured, not taken from the rejected record */
        }
        kt_context_destroy(ctx);
        if (round == 0) {
            sqlite3 *s = NULL;
            assert_int_equal(sqlite3_open(db, &s), SQLITE_OK);
            assert_int_equal(sqlite3_exec(s, "UPDATE decisions SET winner_config = 'K=999'", NULL, NULL, NULL), SQLITE_OK);
            sqlite3_close(s);
        }
    }
}

/* ---- lying wisdom ---------------------------------------------------------------------------- */

static const char *lie_src = "void fill(int *out, long n) { out[0] = (int)(n * K); }\n";

/* An op with a native candidate and a variant group over K in [1, 2, 3] with K != 2 (so K=1 and
 * K=3), all validated against the native "ref", which computes what K=1 does. */
static int ref_fn(const kt_arg *args, size_t nargs, void *user) {
    (void)nargs, (void)user;
    ((int32_t *)args[0].ptr)[0] = (int32_t)args[1].i;
    return 0;
}

static kt_op *lie_op(kt_context *ctx) {
    kt_op *op = NULL;
    ok(kt_op_create(ctx, "liar", &op));
    ok(kt_op_add_buffer(op, "out", KT_TYPE_I32, KT_WRITE_ONLY));
    ok(kt_op_add_scalar(op, "n", KT_TYPE_I64));
    ok(kt_op_key_arg(op, 1, KT_BUCKET_EXACT));
    ok(kt_op_add_native(op, "ref", ref_fn, NULL));
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    ok(kt_space_add_param(sp, "K", "[1, 2, 3]"));
    ok(kt_space_add_constraint(sp, "K != 2"));
    ok(kt_op_add_variants(op, "v", sp, lie_src, "fill", NULL, 0));
    kt_space_destroy(sp);
    ok(kt_op_set_reference(op, "ref"));
    ok(kt_op_set_tolerance(op, 0, 0));
    return op;
}

static const struct {
    const char *candidate, *config; /* the lie: a winner and its unit */
    const char *rejected;           /* what the decision reports */
} wisdom_lies[] = {
    {"ghost", NULL, "it names candidate 'ghost', which the op does not have"},
    {"v", "K=999", "configuration K=999 of 'v' is not in today's space for these arguments"},
    {"v", "K=2", "configuration K=2 of 'v' is not in today's space for these arguments"}, /* breaks K != 2 */
    {"v", "K=abc", "configuration K=abc of 'v' is not in today's space for these arguments"},
    {"v", "J=1", "configuration J=1 of 'v' is not in today's space for these arguments"},
    {"ref", "K=1", "candidate 'ref' is native but the record gives a configuration"},
    {"v", NULL, "candidate 'v' is a variant group but the record gives no configuration"},
};
static size_t lie_at;
static void edit_lie(json_t *e) { lie_winner(e, wisdom_lies[lie_at].candidate, wisdom_lies[lie_at].config); }

/* A wisdom file that lies in a way only the op can see is imported, then used: the decision is
 * rejected and says why (no log needed), every unit is measured afresh (none of the lie's times,
 * runs or failures is reused: each unit runs), the answer is right, and the store then holds
 * the new decision in place of the lie. */
static void test_lying_wisdom(void **state) {
    (void)state;
    for (lie_at = 0; lie_at < sizeof wisdom_lies / sizeof wisdom_lies[0]; lie_at++) {
        remove_db();
        kt_context *ctx = ctx_on(db);
        kt_op *op = lie_op(ctx);
        ok(kt_op_call(op, ARGS(5), 2));
        kt_context_destroy(ctx);
        rewrite(edit_lie);

        ctx = ctx_on(db);
        op = lie_op(ctx);
        buf[0] = 0;
        ok(kt_op_call(op, ARGS(5), 2));
        assert_int_equal(buf[0], 5); /* what K=1 computes: the only valid answer */
        const kt_decision *d = decision(op, 5);
        assert_int_equal(kt_decision_source_of(d), KT_SOURCE_MEASURED);
        assert_int_equal(kt_context_cache_rejected(ctx), 1);
        assert_int_equal(kt_context_cache_hits(ctx), 0);
        if (kt_decision_cache_rejected(d) == NULL || strcmp(kt_decision_cache_rejected(d), wisdom_lies[lie_at].rejected) != 0)
            fail_msg("lie %zu: rejected as '%s'", lie_at, kt_decision_cache_rejected(d) ? kt_decision_cache_rejected(d) : "(not)");
        assert_int_equal(kt_decision_unit_count(d), 3); /* ref, K=1, K=3 */
        for (size_t u = 0; u < 3; u++) {
            const char *cfg = kt_decision_unit_config(d, u);
            if (cfg && strcmp(cfg, "K=3") == 0) { /* validated afresh: 15, not 5 (a recorded failure would say so) */
                assert_int_equal(kt_decision_unit_outcome(d, u), KT_OUTCOME_INVALID);
                assert_string_equal(kt_decision_unit_message(d, u), "output 'out' element 0: expected 5, got 15");
            } else {
                assert_int_equal(kt_decision_unit_outcome(d, u), KT_OUTCOME_MEASURED);
                if (kt_decision_unit_runs(d, u) == 0) fail_msg("lie %zu: unit %zu was not measured", lie_at, u);
            }
        }
        kt_context_destroy(ctx);

        /* the store: the lie replaced by what was measured */
        kt_cache *c = NULL;
        ok(kt_cache_open(db, &c));
        char *text = NULL;
        ok(kt_cache_export(c, NULL, NULL, &text));
        kt_cache_close(c);
        json_t *doc = json_loads(text, 0, NULL);
        kt_free(text);
        json_t *entries = json_object_get(doc, "entries");
        assert_int_equal(json_array_size(entries), 1);
        json_t *e = json_array_get(entries, 0), *w = json_object_get(e, "winner");
        const char *wc = json_string_value(json_object_get(w, "candidate"));
        const char *wk = json_string_value(json_object_get(w, "config"));
        if (!(strcmp(wc, "ref") == 0 && wk == NULL) && !(strcmp(wc, "v") == 0 && wk && strcmp(wk, "K=1") == 0))
            fail_msg("lie %zu: the store's winner is '%s' %s", lie_at, wc, wk ? wk : "");
        json_t *u;
        size_t i;
        json_array_foreach(json_object_get(e, "units"), i, u) {
            const char *cfg = json_string_value(json_object_get(u, "config"));
            assert_true(cfg == NULL || strcmp(cfg, "K=1") == 0 || strcmp(cfg, "K=3") == 0);
            if (cfg && strcmp(cfg, "K=3") == 0) assert_string_equal(json_string_value(json_object_get(u, "outcome")), "invalid");
            else assert_true(json_integer_value(json_object_get(u, "runs")) > 0);
        }
        assert_int_equal(json_array_size(json_object_get(e, "units")), 3);
        json_decref(doc);
    }
}

/* ---- confidence: a deterministic device ------------------------------------------------------ */

/*
 * A backend whose kernels take exactly the time a table says (launch reports it as the device
 * time), so that the race's statistics, and so a decision's confidence, are the same on every
 * machine. Its variants are built from a space of T: building writes the defines into the
 * artifact, loading reads T back. Buffers are host memory.
 */
static double det_ns[4];            /* per T */
static atomic_int det_launched[4];  /* launches per T */

typedef struct det_module {
    int t;
} det_module;

static size_t det_count(void *state) {
    (void)state;
    return 1;
}
static kt_status det_describe(void *state, size_t i, char *name, char *fp, char *err, size_t errlen) {
    (void)state, (void)i, (void)err, (void)errlen;
    snprintf(name, KT_DEVICE_NAME_MAX, "deterministic device");
    snprintf(fp, KT_DEVICE_FINGERPRINT_MAX, "det:1");
    return KT_OK;
}
static kt_status det_alloc(void *state, size_t dev, size_t bytes, void **out, char *err, size_t errlen) {
    (void)state, (void)dev;
    *out = calloc(1, bytes ? bytes : 1);
    if (*out == NULL) snprintf(err, errlen, "out of memory");
    return *out ? KT_OK : KT_ERR_NO_MEMORY;
}
static void det_free(void *state, size_t dev, void *p) {
    (void)state, (void)dev;
    free(p);
}
static kt_status det_copy(void *state, size_t dev, void *dst, const void *src, size_t bytes, kt_copy_dir dir, char *err, size_t errlen) {
    (void)state, (void)dev, (void)dir, (void)err, (void)errlen;
    memmove(dst, src, bytes);
    return KT_OK;
}
static kt_status det_fill(void *state, size_t dev, void *p, size_t bytes, const void *pattern, size_t plen, char *err, size_t errlen) {
    (void)state, (void)dev, (void)err, (void)errlen;
    for (size_t i = 0; i < bytes; i += plen) memcpy((char *)p + i, pattern, plen);
    return KT_OK;
}
static kt_status det_compiler(void *state, size_t dev, char *out, size_t len, char *err, size_t errlen) {
    (void)state, (void)dev, (void)err, (void)errlen;
    snprintf(out, len, "det 1");
    return KT_OK;
}
static kt_status det_build(void *state, size_t dev, const kt_build_request *req, char *log, size_t loglen) {
    (void)state, (void)dev;
    FILE *f = fopen(req->out_path, "w");
    if (f == NULL) {
        snprintf(log, loglen, "cannot write %s", req->out_path);
        return KT_ERR_BACKEND;
    }
    for (size_t i = 0; i < req->ndefines; i++) fprintf(f, "%s\n", req->defines[i]);
    fclose(f);
    return KT_OK;
}
static kt_status det_load(void *state, size_t dev, const char *path, const char *kernel, void **module, char *err, size_t errlen) {
    (void)state, (void)dev, (void)kernel;
    FILE *f = fopen(path, "r");
    int t = -1;
    char line[64];
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "T=", 2) == 0) t = atoi(line + 2);
    if (f) fclose(f);
    if (t < 0 || t > 3) {
        snprintf(err, errlen, "%s: no T", path);
        return KT_ERR_BACKEND;
    }
    det_module *m = malloc(sizeof *m);
    m->t = t;
    *module = m;
    return KT_OK;
}
static void det_unload(void *state, size_t dev, void *module) {
    (void)state, (void)dev;
    free(module);
}
static kt_status det_launch(void *state, size_t dev, void *module, const kt_launch_geometry *g, const kt_arg *args, size_t nargs,
                            double *ns, char *err, size_t errlen) {
    (void)state, (void)dev, (void)g, (void)nargs, (void)err, (void)errlen;
    const det_module *m = module;
    atomic_fetch_add(&det_launched[m->t], 1);
    ((int32_t *)args[0].ptr)[0] = m->t;
    if (ns) *ns = det_ns[m->t];
    return KT_OK;
}

static const kt_backend det_backend = {
    .abi_version = 4, .name = "det", .device_count = det_count, .device_describe = det_describe,
    .buffer_alloc = det_alloc, .buffer_free = det_free, .buffer_copy = det_copy, .buffer_fill = det_fill,
    .artifact_ext = ".det", .compiler_id = det_compiler, .build = det_build, .load = det_load, .unload = det_unload,
    .launch = det_launch};

/* A context on the test's cache with the deterministic device; *dev receives its index. The
 * race asks for 0.99 confidence with no tolerance and at most 3 runs per unit. */
static kt_context *det_context(size_t *dev, kt_effort effort) {
    kt_context *ctx = ctx_on(db);
    ok(kt_context_add_backend(ctx, &det_backend));
    ok(kt_context_set_race(ctx, 0.99, 0.0, 3));
    ok(kt_context_set_effort(ctx, effort));
    *dev = (size_t)-1;
    for (size_t i = 0; i < kt_context_device_count(ctx); i++)
        if (strcmp(kt_device_backend(kt_context_device(ctx, i)), "det") == 0) *dev = i;
    assert_true(*dev != (size_t)-1);
    return ctx;
}

/* Op "confident": variants T=1, T=2, T=3 on the deterministic device, no validation (each writes
 * its own T). */
static kt_op *det_op(kt_context *ctx, size_t dev) {
    kt_op *op = test_op(ctx, "confident");
    ok(kt_op_set_device(op, dev));
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    ok(kt_space_add_param(sp, "T", "[1, 2, 3]"));
    ok(kt_op_add_variants(op, "v", sp, "a kernel the deterministic device does not read", "k", NULL, 0));
    kt_space_destroy(sp);
    return op;
}

/* The unit of d whose configuration is text. */
static size_t unit_of(const kt_decision *d, const char *text) {
    for (size_t u = 0; u < kt_decision_unit_count(d); u++)
        if (kt_decision_unit_config(d, u) && strcmp(kt_decision_unit_config(d, u), text) == 0) return u;
    fail_msg("no unit %s", text);
    return 0;
}

/* The store's only entry, and its unit of configuration text. */
static json_t *stored_entry(void) {
    kt_cache *c = NULL;
    ok(kt_cache_open(db, &c));
    char *text = NULL;
    ok(kt_cache_export(c, NULL, NULL, &text));
    kt_cache_close(c);
    json_t *doc = json_loads(text, 0, NULL);
    kt_free(text);
    assert_int_equal(json_array_size(json_object_get(doc, "entries")), 1);
    json_t *e = json_incref(json_array_get(json_object_get(doc, "entries"), 0));
    json_decref(doc);
    return e;
}
static json_t *stored_unit(json_t *e, const char *config) {
    json_t *u;
    size_t i;
    json_array_foreach(json_object_get(e, "units"), i, u) {
        if (strcmp(json_string_value(json_object_get(u, "config")), config) == 0) return u;
    }
    fail_msg("no stored unit %s", config);
    return NULL;
}

static void reset_launches(void) {
    for (int t = 0; t < 4; t++) atomic_store(&det_launched[t], 0);
}

/*
 * T=1 and T=2 take exactly the same time, T=3 five times as long: the race drops T=3 at once and
 * cannot tell the other two apart within 3 runs (no tolerance), so it ends at confidence 0.5,
 * below the 0.99 it asked for: the decision says so and the store marks it (requested 0.99,
 * finalists T=1 and T=2). CACHE_ONLY serves it as it is, measuring nothing. The next tuning
 * that may measure re-races the finalists only (T=3, now the fastest of all, is not run: it
 * keeps its recorded time), with fresh runs in which T=2 is now 3x slower: the new decision is
 * settled, the store holds it, and the tuning after that is served from the store.
 */
static void test_low_confidence_reraced(void **state) {
    (void)state;
    remove_db();
    size_t dev;
    det_ns[1] = 1000, det_ns[2] = 1000, det_ns[3] = 5000;
    reset_launches();
    kt_context *ctx = det_context(&dev, KT_EFFORT_MEASURE);
    kt_op *op = det_op(ctx, dev);
    ok(kt_op_call(op, ARGS(9), 2));
    const kt_decision *d = decision(op, 9);
    assert_int_equal(kt_decision_source_of(d), KT_SOURCE_MEASURED);
    assert_string_equal(kt_decision_unit_config(d, kt_decision_winner_unit(d)), "T=1");
    assert_true(fabs(kt_decision_confidence(d) - 0.5) < 1e-9);
    assert_true(kt_decision_requested_confidence(d) == 0.99);
    assert_int_equal(kt_decision_below_confidence(d), 1);
    assert_int_equal(kt_decision_reraced(d), 0);
    assert_int_equal(kt_decision_unit_finalist(d, unit_of(d, "T=1")), 1);
    assert_int_equal(kt_decision_unit_finalist(d, unit_of(d, "T=2")), 1);
    assert_int_equal(kt_decision_unit_finalist(d, unit_of(d, "T=3")), 0);
    assert_int_equal(kt_decision_unit_runs(d, unit_of(d, "T=3")), 2); /* its two screening runs */
    kt_context_destroy(ctx);
    json_t *e = stored_entry();
    assert_true(json_real_value(json_object_get(e, "requested_confidence")) == 0.99);
    assert_true(fabs(json_real_value(json_object_get(e, "confidence")) - 0.5) < 1e-9);
    assert_true(json_is_true(json_object_get(stored_unit(e, "T=1"), "finalist")));
    assert_true(json_is_true(json_object_get(stored_unit(e, "T=2"), "finalist")));
    assert_true(json_is_false(json_object_get(stored_unit(e, "T=3"), "finalist")));
    json_decref(e);

    /* CACHE_ONLY: served as it is, nothing measured, and it says it is below */
    reset_launches();
    ctx = det_context(&dev, KT_EFFORT_CACHE_ONLY);
    op = det_op(ctx, dev);
    buf[0] = 0;
    ok(kt_op_call(op, ARGS(9), 2));
    assert_int_equal(buf[0], 1);
    d = decision(op, 9);
    assert_int_equal(kt_decision_source_of(d), KT_SOURCE_CACHE);
    assert_int_equal(kt_decision_below_confidence(d), 1);
    assert_true(kt_decision_requested_confidence(d) == 0.99);
    assert_int_equal(kt_op_measured_runs(op), 0);
    assert_int_equal(atomic_load(&det_launched[1]), 1); /* the call itself */
    assert_int_equal(atomic_load(&det_launched[2]) + atomic_load(&det_launched[3]), 0);
    kt_context_destroy(ctx);

    /* MEASURE: the finalists race again, afresh; T=3 is not run */
    det_ns[2] = 3000, det_ns[3] = 500;
    reset_launches();
    ctx = det_context(&dev, KT_EFFORT_MEASURE);
    op = det_op(ctx, dev);
    buf[0] = 0;
    ok(kt_op_call(op, ARGS(9), 2));
    assert_int_equal(buf[0], 1);
    d = decision(op, 9);
    assert_int_equal(kt_decision_source_of(d), KT_SOURCE_MEASURED);
    assert_int_equal(kt_decision_reraced(d), 1);
    assert_string_equal(kt_decision_unit_config(d, kt_decision_winner_unit(d)), "T=1");
    assert_true(kt_decision_confidence(d) >= 0.99);
    assert_int_equal(kt_decision_below_confidence(d), 0);
    size_t u1 = unit_of(d, "T=1"), u2 = unit_of(d, "T=2"), u3 = unit_of(d, "T=3");
    assert_true(kt_decision_unit_runs(d, u1) > 0);
    assert_true(kt_decision_unit_runs(d, u2) > 0);
    assert_int_equal(kt_decision_unit_runs(d, u3), 0);
    assert_int_equal(atomic_load(&det_launched[3]), 0);
    assert_true(atomic_load(&det_launched[2]) > 0);
    assert_int_equal(kt_decision_unit_outcome(d, u3), KT_OUTCOME_MEASURED);
    assert_true(kt_decision_unit_time_ns(d, u3) == 5000); /* as recorded */
    assert_int_equal(kt_decision_unit_finalist(d, u1), 1);
    assert_int_equal(kt_decision_unit_finalist(d, u2), 0); /* dropped this time */
    assert_int_equal(kt_decision_unit_finalist(d, u3), 0);
    kt_context_destroy(ctx);
    e = stored_entry();
    assert_string_equal(json_string_value(json_object_get(json_object_get(e, "winner"), "config")), "T=1");
    assert_true(json_real_value(json_object_get(e, "confidence")) >= 0.99);
    assert_true(json_real_value(json_object_get(e, "requested_confidence")) == 0.99);
    assert_true(json_real_value(json_object_get(stored_unit(e, "T=2"), "time_ns")) == 3000);
    assert_true(json_real_value(json_object_get(stored_unit(e, "T=3"), "time_ns")) == 5000);
    assert_int_equal(json_integer_value(json_object_get(stored_unit(e, "T=3"), "runs")), 0);
    assert_true(json_is_false(json_object_get(stored_unit(e, "T=2"), "finalist")));
    assert_true(json_is_false(json_object_get(stored_unit(e, "T=3"), "finalist")));
    json_decref(e);

    /* settled now: served from the store, nothing measured */
    reset_launches();
    ctx = det_context(&dev, KT_EFFORT_MEASURE);
    op = det_op(ctx, dev);
    ok(kt_op_call(op, ARGS(9), 2));
    d = decision(op, 9);
    assert_int_equal(kt_decision_source_of(d), KT_SOURCE_CACHE);
    assert_int_equal(kt_decision_below_confidence(d), 0);
    assert_int_equal(kt_op_measured_runs(op), 0);
    assert_int_equal(atomic_load(&det_launched[1]), 1);
    kt_context_destroy(ctx);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_invalid_records),
        cmocka_unit_test(test_config_out_of_space),
        cmocka_unit_test(test_lying_wisdom),
        cmocka_unit_test(test_low_confidence_reraced),
    };
    return kt_run_cases(argc, argv, tests, setup, teardown);
}
