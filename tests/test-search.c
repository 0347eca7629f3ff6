/*
 * test-search.c - search strategies (kerntune/search.h): every strategy proposes every valid
 * configuration exactly once and nothing else, in batches of any size; the same seed and
 * results give the same proposals; invalid results are counted and never best; on a smooth
 * landscape with one optimum, local search and the model find it within a budget in which
 * random sampling, by construction, almost never does; local search leaves a trap that only a
 * move mended past a constraint leaves; errors name what is wrong.
 */
#define _GNU_SOURCE /* mkdtemp */
#include "helpers.h"
#include "search/search.h" /* kt__search_set_walkers */

#include <kerntune/decision.h>
#include <kerntune/search.h>
#include <kerntune/variants.h>

#include <kerntune/cache.h>

#include <math.h>
#include <stdbool.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

/* A space of three parameters of 16 values (0..15) each: 4096 configurations. */
static kt_space *cube(const char *constraint) {
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    ok(kt_space_add_param(sp, "a", "range(16)"));
    ok(kt_space_add_param(sp, "b", "range(16)"));
    ok(kt_space_add_param(sp, "c", "range(16)"));
    if (constraint) ok(kt_space_add_constraint(sp, constraint));
    size_t n = 0;
    ok(kt_space_enumerate(sp, &n));
    return sp;
}

static int64_t param(const kt_space *sp, size_t config, size_t p) {
    int64_t v = -1;
    ok(kt_space_config_int(sp, config, p, &v));
    return v;
}

/* A bowl with its one minimum, 1.0, at (11, 4, 9): smooth, so that a step towards the minimum
 * is always an improvement. */
static double bowl(const kt_space *sp, size_t config) {
    double a = (double)param(sp, config, 0) - 11, b = (double)param(sp, config, 1) - 4, c = (double)param(sp, config, 2) - 9;
    return 1.0 + a * a + b * b + c * c;
}

/* Invalid where a + b is a multiple of 7 (a tenth of the space or so), else the bowl. */
static double holey(const kt_space *sp, size_t config) {
    return (param(sp, config, 0) + param(sp, config, 1)) % 7 == 0 ? INFINITY : bowl(sp, config);
}

typedef double (*objective)(const kt_space *, size_t);

/* Proposes in batches of `batch` and tells each result at once, until `budget` results were
 * told (0: until the space is spent); the proposals go to seq (if not NULL). Returns how many
 * results were told. */
static size_t drive(const kt_space *sp, kt_search *s, objective f, size_t budget, size_t batch, size_t *seq) {
    size_t told = 0, buf[64];
    for (;;) {
        size_t want = batch;
        if (budget && budget - told < want) want = budget - told;
        if (want == 0) break;
        size_t k = kt_search_propose(s, buf, want);
        if (k == 0) break;
        assert_true(k <= want);
        for (size_t j = 0; j < k; j++) {
            if (seq) seq[told] = buf[j];
            ok(kt_search_tell(s, buf[j], f(sp, buf[j])));
            told++;
        }
    }
    return told;
}

static void test_strategy_names(void **state) {
    (void)state;
    const char *want[] = {"exhaustive", "random", "local", "anneal", "genetic", "model", "auto"};
    assert_int_equal(kt_search_strategy_count(), 7);
    for (size_t i = 0; i < 7; i++) assert_string_equal(kt_search_strategy_name(i), want[i]);
    assert_null(kt_search_strategy_name(7));
}

/* Every strategy, batches of 1, 3 and 17: each valid configuration exactly once, none that
 * breaks the constraint, then nothing more; the best is the space's best. */
static void test_every_configuration_once(void **state) {
    (void)state;
    kt_space *sp = cube("(a * 3 + b * 5 + c) % 4 != 1 and a + b < 24");
    size_t n = kt_space_config_count(sp);
    assert_true(n > 2000 && n < 4096);
    double truth = INFINITY;
    for (size_t i = 0; i < n; i++) truth = fmin(truth, holey(sp, i));
    unsigned char *seen = malloc(n);
    size_t *seq = malloc(n * sizeof *seq);
    for (size_t si = 0; si + 1 < kt_search_strategy_count() + 1; si++) {
        const char *name = kt_search_strategy_name(si);
        static const size_t batches[] = {1, 3, 17};
        for (size_t b = 0; b < 3; b++) {
            kt_search *s = NULL;
            ok(kt_search_create(sp, name, 7 + b, 100, &s)); /* then past its budget, as a search may be run */
            size_t told = drive(sp, s, holey, 0, batches[b], seq);
            assert_int_equal(told, n);
            assert_int_equal(kt_search_told(s), n);
            assert_int_equal(kt_search_proposed(s), n);
            memset(seen, 0, n);
            for (size_t j = 0; j < told; j++) {
                assert_true(seq[j] < n);
                assert_int_equal(seen[seq[j]], 0); /* never twice */
                seen[seq[j]] = 1;
                int64_t a = param(sp, seq[j], 0), bb = param(sp, seq[j], 1), c = param(sp, seq[j], 2);
                assert_true((a * 3 + bb * 5 + c) % 4 != 1 && a + bb < 24); /* never an invalid one */
            }
            size_t more;
            assert_int_equal(kt_search_propose(s, &more, 1), 0);
            double best = 0;
            long bi = kt_search_best(s, &best);
            assert_true(bi >= 0);
            assert_true(best == truth && holey(sp, (size_t)bi) == truth);
            kt_search_destroy(s);
        }
    }
    free(seen);
    free(seq);
    kt_space_destroy(sp);
}

/* The same seed and results: the same proposals, in the same order; another seed: others. */
static void test_deterministic(void **state) {
    (void)state;
    kt_space *sp = cube(NULL);
    size_t a[150], b[150], c[150];
    for (size_t si = 0; si < kt_search_strategy_count(); si++) {
        const char *name = kt_search_strategy_name(si);
        kt_search *s1 = NULL, *s2 = NULL, *s3 = NULL;
        ok(kt_search_create(sp, name, 42, 150, &s1));
        ok(kt_search_create(sp, name, 42, 150, &s2));
        ok(kt_search_create(sp, name, 43, 150, &s3));
        assert_int_equal(drive(sp, s1, holey, 150, 5, a), 150);
        assert_int_equal(drive(sp, s2, holey, 150, 5, b), 150);
        assert_int_equal(drive(sp, s3, holey, 150, 5, c), 150);
        assert_memory_equal(a, b, sizeof a);
        if (strcmp(name, "exhaustive") != 0) assert_memory_not_equal(a, c, sizeof a);
        assert_string_equal(kt_search_strategy(s1), strcmp(name, "auto") == 0 ? kt_search_strategy(s2) : name);
        kt_search_destroy(s1), kt_search_destroy(s2), kt_search_destroy(s3);
    }
    kt_space_destroy(sp);
}

/* A local search allowed several walks keeps a caller with room for more proposals supplied
 * while its first walk waits: the first walk proposes what it would alone, in the same order, and
 * each further walk one start (while all wait, no more); no configuration comes twice, and over
 * a whole run with results told late it finds the bowl's minimum as one walk does. One walk
 * allowed is the search as it always was. */
static void test_local_walkers(void **state) {
    (void)state;
    kt_space *sp = cube(NULL);
    size_t design[8], d4[8], one[64], many[64];
    kt_search *s1 = NULL, *s4 = NULL, *sd = NULL;
    ok(kt_search_create(sp, "local", 5, 0, &s1));
    ok(kt_search_create(sp, "local", 5, 0, &s4));
    ok(kt_search_create(sp, "local", 5, 0, &sd)); /* never told of walkers */
    kt__search_set_walkers(s1, 1);
    kt__search_set_walkers(s4, 4);
    kt_search *all[3] = {s1, s4, sd};
    for (int w = 0; w < 3; w++) { /* the design: 8 at once, then nothing until they are told */
        assert_int_equal(kt_search_propose(all[w], design, 8), 8);
        assert_int_equal(kt_search_propose(all[w], one, 8), 0);
        for (size_t j = 0; j < 8; j++) ok(kt_search_tell(all[w], design[j], bowl(sp, design[j])));
        if (all[w] == s4) memcpy(d4, design, sizeof d4);
    }
    size_t k1 = kt_search_propose(s1, one, 64), k4 = kt_search_propose(s4, many, 64), kd = kt_search_propose(sd, design, 8);
    assert_true(k1 >= 1 && k1 <= 6); /* the first walk's near neighbours */
    assert_int_equal(k4, k1 + 3);    /* and the start of each of three more walks */
    assert_memory_equal(one, many, k1 * sizeof *one);
    assert_int_equal(kd, k1 < 8 ? k1 : 8);
    assert_memory_equal(one, design, kd * sizeof *one);
    assert_int_equal(kt_search_propose(s4, many + k4, 64), 0); /* all four wait */
    for (size_t j = 0; j < k1; j++) ok(kt_search_tell(s1, one[j], bowl(sp, one[j])));
    /* the rest of a run: proposals taken 16 at a time, told a batch later (as builds end) */
    uint8_t *seen = calloc(4096, 1);
    for (size_t j = 0; j < 8; j++) seen[d4[j]] = 1;
    size_t held[64], nheld = 0, told = 8;
    for (size_t j = 0; j < k4; j++) held[nheld++] = many[j];
    for (size_t j = 0; j < nheld; j++) assert_int_equal(seen[held[j]]++, 0);
    while (told < 600) {
        size_t got[16], k = kt_search_propose(s4, got, 16);
        for (size_t j = 0; j < k; j++) assert_int_equal(seen[got[j]]++, 0); /* never twice */
        for (size_t j = 0; j < nheld; j++) ok(kt_search_tell(s4, held[j], bowl(sp, held[j])));
        told += nheld;
        if (k == 0 && nheld == 0) break;
        memcpy(held, got, k * sizeof *got);
        nheld = k;
    }
    double v = 0;
    assert_true(kt_search_best(s4, &v) >= 0);
    assert_true(v == 1.0); /* the minimum */
    free(seen);
    kt_search_destroy(s1), kt_search_destroy(s4), kt_search_destroy(sd);
    kt_space_destroy(sp);
}

/* Invalid results count as results and are never the best. */
static void test_invalid_results(void **state) {
    (void)state;
    kt_space *sp = cube(NULL);
    for (size_t si = 0; si < kt_search_strategy_count(); si++) {
        kt_search *s = NULL;
        ok(kt_search_create(sp, kt_search_strategy_name(si), 1, 100, &s));
        assert_int_equal(drive(sp, s, holey, 100, 4, NULL), 100);
        assert_int_equal(kt_search_told(s), 100);
        double v = 0;
        long best = kt_search_best(s, &v);
        assert_true(best >= 0 && isfinite(v));
        assert_true((param(sp, (size_t)best, 0) + param(sp, (size_t)best, 1)) % 7 != 0);
        kt_search_destroy(s);
    }
    /* nothing valid at all: no best */
    kt_search *s = NULL;
    ok(kt_search_create(sp, "local", 1, 0, &s));
    size_t i;
    for (int k = 0; k < 20; k++) {
        assert_int_equal(kt_search_propose(s, &i, 1), 1);
        ok(kt_search_tell(s, i, NAN));
    }
    assert_int_equal(kt_search_best(s, NULL), -1);
    kt_search_destroy(s);
    kt_space_destroy(sp);
}

/* The bowl's minimum is one configuration of 4096. With 120 evaluations random sampling finds
 * it with probability 120 / 4096 (under 3%); local search and the model, which follow the
 * slope, find it with every seed tried. */
static void test_smooth_landscape(void **state) {
    (void)state;
    kt_space *sp = cube(NULL);
    size_t random_hits = 0;
    for (uint64_t seed = 1; seed <= 10; seed++) {
        static const char *const finders[] = {"local", "model"};
        for (size_t f = 0; f < 2; f++) {
            kt_search *s = NULL;
            ok(kt_search_create(sp, finders[f], seed, 120, &s));
            assert_int_equal(drive(sp, s, bowl, 120, 4, NULL), 120);
            double v = 0;
            kt_search_best(s, &v);
            if (v != 1.0) fail_msg("%s with seed %llu: best %g after 120 evaluations, not the minimum 1", finders[f], (unsigned long long)seed, v);
            kt_search_destroy(s);
        }
        kt_search *s = NULL;
        ok(kt_search_create(sp, "random", seed, 120, &s));
        assert_int_equal(drive(sp, s, bowl, 120, 4, NULL), 120);
        double v = 0;
        kt_search_best(s, &v);
        random_hits += v == 1.0;
        kt_search_destroy(s);
    }
    assert_true(random_hits <= 1);
    kt_space_destroy(sp);
}

/* A trap that no single-parameter move leaves: a in 0..15, b in 0..15, p in {0, 1}, and p = 1
 * only with a < 4. Where p = 1 the value is 2 + a + |b - 5|; where p = 0 it is 50 + a + |b - 5|,
 * except the needle (15, 5, 0), at 1. Every descent ends at (0, 5, 1), value 2: each move of
 * one parameter from there is worse or, a to 4 or more, breaks the constraint. Local search
 * tries that move mended by one step of p, which reaches the needle, with every seed; without
 * it only a random restart would (1 configuration of 320). */
static double trap(const kt_space *sp, size_t config) {
    int64_t a = param(sp, config, 0), b = param(sp, config, 1), p = param(sp, config, 2);
    if (p == 0 && a == 15 && b == 5) return 1.0;
    return (p ? 2.0 : 50.0) + (double)a + (double)(b > 5 ? b - 5 : 5 - b);
}

static void test_constraint_trap(void **state) {
    (void)state;
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    ok(kt_space_add_param(sp, "a", "range(16)"));
    ok(kt_space_add_param(sp, "b", "range(16)"));
    ok(kt_space_add_param(sp, "p", "[0, 1]"));
    ok(kt_space_add_constraint(sp, "p == 0 or a < 4"));
    size_t n = 0;
    ok(kt_space_enumerate(sp, &n));
    assert_int_equal(n, 16 * 16 + 4 * 16);
    for (uint64_t seed = 1; seed <= 10; seed++) {
        kt_search *s = NULL;
        ok(kt_search_create(sp, "local", seed, 100, &s));
        assert_int_equal(drive(sp, s, trap, 100, 1, NULL), 100);
        double v = 0;
        kt_search_best(s, &v);
        if (v != 1.0) fail_msg("local with seed %llu: best %g after 100 evaluations, not the needle 1", (unsigned long long)seed, v);
        kt_search_destroy(s);
    }
    kt_space_destroy(sp);
}

static void test_errors(void **state) {
    (void)state;
    kt_space *sp = NULL;
    kt_search *s = NULL;
    ok(kt_space_create(&sp));
    ok(kt_space_add_param(sp, "a", "[1, 2, 3]"));
    assert_int_equal(kt_search_create(sp, "random", 1, 0, &s), KT_ERR_STATE); /* not enumerated */
    assert_non_null(strstr(kt_last_error(), "kt_space_enumerate"));
    size_t n;
    ok(kt_space_enumerate(sp, &n));
    assert_int_equal(kt_search_create(sp, "bogus", 1, 0, &s), KT_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(kt_last_error(), "'bogus'"));
    assert_non_null(strstr(kt_last_error(), "genetic"));
    assert_null(s);
    assert_int_equal(kt_search_create(NULL, "random", 1, 0, &s), KT_ERR_NULL);
    assert_int_equal(kt_search_create(sp, NULL, 1, 0, &s), KT_ERR_NULL);
    assert_int_equal(kt_search_create(sp, "random", 1, 0, NULL), KT_ERR_NULL);
    ok(kt_search_create(sp, "exhaustive", 1, 0, &s));
    assert_int_equal(kt_search_tell(s, 0, 1.0), KT_ERR_INVALID_ARGUMENT); /* never proposed */
    assert_non_null(strstr(kt_last_error(), "never proposed"));
    assert_int_equal(kt_search_tell(s, 9, 1.0), KT_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(kt_last_error(), "out of range"));
    size_t i;
    assert_int_equal(kt_search_propose(s, &i, 1), 1);
    ok(kt_search_tell(s, i, 1.0));
    assert_int_equal(kt_search_tell(s, i, 1.0), KT_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(kt_last_error(), "told already"));
    assert_int_equal(kt_search_propose(s, NULL, 1), 0);
    assert_int_equal(kt_search_propose(NULL, &i, 1), 0);
    assert_int_equal(kt_search_best(NULL, NULL), -1);
    assert_int_equal(kt_search_size(s), 3);
    kt_search_destroy(s);
    kt_search_destroy(NULL);
    kt_space_destroy(sp);
}

/* ---- searches in a tuning: real C variants, compiled by the system compiler ------------------- */

static char artifacts[256];

/* 8 x 8 configurations; X == 2 and Y == 6 do not compile (an #error), so that failures are
 * proposed too. Every variant writes 1: validation passes; each reads X and Y, so that each is
 * its own code (configurations with the same preprocessed code share one build). */
static const char *lattice_src = "#include <stdint.h>\n"
                                 "#if X == 2 && Y == 6\n#error this configuration does not compile\n#endif\n"
                                 "void lattice(int32_t *out, long n) { (void)n; out[0] = 1 + 0 * (X + Y); }\n";

/* Op name of the lattice's variants, X and Y each over values (e.g. "range(8)"). */
static kt_op *lattice_op_over(kt_context *ctx, const char *name, const char *values, const char *strategy, uint64_t seed) {
    kt_op *op = NULL;
    ok(kt_op_create(ctx, name, &op));
    ok(kt_op_add_buffer(op, "out", KT_TYPE_I32, KT_WRITE_ONLY));
    ok(kt_op_add_scalar(op, "n", KT_TYPE_I64));
    kt_space *sp = NULL;
    ok(kt_space_create(&sp));
    ok(kt_space_add_param(sp, "X", values));
    ok(kt_space_add_param(sp, "Y", values));
    ok(kt_op_add_variants(op, "lattice", sp, lattice_src, "lattice", NULL, 0));
    kt_space_destroy(sp);
    if (strategy) ok(kt_op_set_search(op, strategy, seed));
    return op;
}

static kt_op *lattice_op(kt_context *ctx, const char *strategy, uint64_t seed) {
    return lattice_op_over(ctx, "lattice", "range(8)", strategy, seed);
}

static kt_context *lattice_context(void) {
    kt_context *ctx = test_context(2);
    ok(kt_context_set_artifact_dir(ctx, artifacts));
    return ctx;
}

/* Tunes op once; writes each unit's outcome into outcomes (64) and returns how many were
 * evaluated (not NOT_RUN). */
static size_t tune_lattice(kt_op *op, kt_outcome *outcomes) {
    int32_t out[1] = {0};
    kt_arg args[] = {kt_arg_buf(out, sizeof out), kt_arg_i64(1)};
    ok(kt_op_tune(op, args, 2));
    const kt_decision *d = NULL;
    ok(kt_op_decision(op, args, 2, &d));
    assert_int_equal(kt_decision_unit_count(d), 64);
    size_t evaluated = 0;
    for (size_t u = 0; u < 64; u++) {
        outcomes[u] = kt_decision_unit_outcome(d, u);
        evaluated += outcomes[u] != KT_OUTCOME_NOT_RUN;
    }
    return evaluated;
}

/* A budget of 8 units: 8 configurations evaluated, the reference among them, and only those
 * compiled; a failure to compile counts as one of them. Random sampling with the same seed
 * evaluates the same ones; a budget of a quarter of the space, 16. */
static void test_tuning_budget_and_builds(void **state) {
    (void)state;
    static const char *const strategies[] = {"random", "local", "anneal", "genetic", "model"};
    for (size_t si = 0; si < sizeof strategies / sizeof strategies[0]; si++) {
        kt_outcome first[64], again[64];
        for (int round = 0; round < 2; round++) {
            char dir[300];
            snprintf(dir, sizeof dir, "%s/%s-%d", artifacts, strategies[si], round); /* nothing compiled yet */
            kt_context *ctx = test_context(2);
            ok(kt_context_set_artifact_dir(ctx, dir));
            kt_op *op = lattice_op(ctx, strategies[si], 11);
            ok(kt_op_set_budget(op, 8, 0));
            size_t evaluated = tune_lattice(op, round ? again : first);
            assert_int_equal(evaluated, 8);
            size_t failed = 0;
            for (size_t u = 0; u < 64; u++) failed += (round ? again : first)[u] == KT_OUTCOME_BUILD_FAILED;
            /* every evaluated configuration was compiled (a failure too), and nothing else */
            assert_int_equal(kt_context_compile_count(ctx), 8);
            assert_true(failed <= 1);
            kt_context_destroy(ctx);
        }
        /* random's choice does not depend on the times: the same seed, the same configurations
         * (the others follow the measured times, which differ from run to run) */
        if (strcmp(strategies[si], "random") == 0) assert_memory_equal(first, again, sizeof first);
    }
    kt_context *ctx = lattice_context();
    kt_op *op = lattice_op(ctx, "random", 5);
    ok(kt_op_set_budget_fraction(op, 0.25));
    kt_outcome o[64];
    assert_int_equal(tune_lattice(op, o), 16);
    kt_context_destroy(ctx);
}

/* Exhaustive with a budget takes the first configurations in order, compiling only them; auto
 * with no budget measures everything. */
static void test_tuning_exhaustive_and_auto(void **state) {
    (void)state;
    char dir[300];
    snprintf(dir, sizeof dir, "%s/exhaustive", artifacts);
    kt_context *ctx = test_context(2);
    ok(kt_context_set_artifact_dir(ctx, dir));
    kt_op *op = lattice_op(ctx, "exhaustive", 1);
    ok(kt_op_set_budget(op, 5, 0));
    kt_outcome o[64];
    assert_int_equal(tune_lattice(op, o), 5);
    for (size_t u = 0; u < 64; u++) assert_int_equal(o[u] != KT_OUTCOME_NOT_RUN, u < 5);
    assert_int_equal(kt_context_compile_count(ctx), 5);
    kt_context_destroy(ctx);
    ctx = lattice_context();
    op = lattice_op(ctx, NULL, 0); /* auto, no budget: all of them */
    assert_int_equal(tune_lattice(op, o), 64);
    assert_int_equal(o[2 * 8 + 6], KT_OUTCOME_BUILD_FAILED);
    kt_context_destroy(ctx);
}

/* ---- nothing is lost when a tuning stops -------------------------------------------------- */

static int kill_after; /* units; the progress function ends the process at that many */

static void die_midway(size_t done, size_t total, size_t valid, size_t failed, double best_ns, void *user) {
    (void)total, (void)valid, (void)failed, (void)best_ns, (void)user;
    if ((int)done >= kill_after) _exit(7); /* as a kill would: no clean-up, nothing flushed at exit */
}

static int64_t sql_count(const char *path, const char *sql) {
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;
    int64_t n = -1;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK && sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW)
        n = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    sqlite3_close(db);
    return n;
}

/* A tuning killed after 6 of its 16 units keeps them in the cache (table progress), written as
 * they came; tuning the key again measures only the other 10: the 6 are taken as recorded
 * (no runs), the decision is the same as one tuning in one go would make of them, and once
 * recorded it replaces the progress rows. */
static void test_killed_tuning_resumes(void **state) {
    (void)state;
    char db[320];
    snprintf(db, sizeof db, "%s/resume.db", artifacts);
    for (int round = 0; round < 2; round++) {
        pid_t pid = round == 0 ? fork() : 0;
        assert_true(pid >= 0);
        if (pid > 0) { /* the parent: waits for the killed tuning, then looks at the file */
            int status = 0;
            assert_int_equal(waitpid(pid, &status, 0), pid);
            assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 7);
            assert_true(sql_count(db, "SELECT count(*) FROM progress") >= 6);
            assert_int_equal(sql_count(db, "SELECT count(*) FROM decisions"), 0);
            continue;
        }
        kt_context *ctx = lattice_context();
        ok(kt_context_set_cache(ctx, db));
        kt_op *op = lattice_op_over(ctx, "resumed", "range(4)", NULL, 0);
        int32_t out[1] = {0};
        kt_arg args[] = {kt_arg_buf(out, sizeof out), kt_arg_i64(1)};
        if (round == 0) { /* the child: killed midway */
            kill_after = 6;
            ok(kt_context_set_progress_fn(ctx, die_midway, NULL));
            kt_op_tune(op, args, 2);
            _exit(0); /* not reached */
        }
        ok(kt_op_tune(op, args, 2));
        const kt_decision *d = NULL;
        ok(kt_op_decision(op, args, 2, &d));
        size_t taken = 0, measured = 0;
        for (size_t u = 0; u < kt_decision_unit_count(d); u++) {
            if (kt_decision_unit_outcome(d, u) != KT_OUTCOME_MEASURED) continue;
            if (kt_decision_unit_runs(d, u) == 0) taken++; /* as recorded: not run again */
            else measured++;
        }
        assert_true(taken >= 5); /* the reference runs again: it validates the others */
        assert_int_equal(taken + measured, 16);
        assert_int_equal(sql_count(db, "SELECT count(*) FROM progress"), 0);
        assert_int_equal(sql_count(db, "SELECT count(*) FROM decisions"), 1);
        kt_context_destroy(ctx);
    }
}

/* The order in which a tuning decides units (kt_context_set_unit_fn). */
typedef struct order {
    size_t unit[64];
    size_t n;
} order;

static void note_unit(const kt_decision *d, size_t u, void *user) {
    (void)d;
    order *o = user;
    if (o->n < 64) o->unit[o->n++] = u;
}

/* A budget of seconds alone may end long before the space does: auto searches (its first
 * configurations are not the enumeration's first), where exhaustive goes in order. */
static void test_seconds_budget_searches(void **state) {
    (void)state;
    for (int searched = 0; searched < 2; searched++) {
        kt_context *ctx = lattice_context();
        order o = {{0}, 0};
        ok(kt_context_set_unit_fn(ctx, note_unit, &o));
        kt_op *op = lattice_op(ctx, searched ? NULL : "exhaustive", 3);
        ok(kt_op_set_budget(op, 0, 3600)); /* seconds only, far more than needed */
        kt_outcome out[64];
        assert_int_equal(tune_lattice(op, out), 64); /* the space spent either way */
        assert_int_equal(o.n, 64);
        bool ascending = true;
        for (size_t i = 1; i < o.n; i++) ascending = ascending && o.unit[i] > o.unit[i - 1];
        assert_int_equal(ascending, !searched);
        kt_context_destroy(ctx);
    }
}

static void test_tuning_search_errors(void **state) {
    (void)state;
    kt_context *ctx = lattice_context();
    kt_op *op = lattice_op(ctx, NULL, 0);
    assert_int_equal(kt_op_set_search(op, "bogus", 1), KT_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(kt_last_error(), "'bogus'"));
    assert_int_equal(kt_op_set_budget_fraction(op, 1.5), KT_ERR_INVALID_ARGUMENT);
    assert_int_equal(kt_op_set_budget_fraction(op, -0.1), KT_ERR_INVALID_ARGUMENT);
    assert_int_equal(kt_op_set_search(NULL, "random", 1), KT_ERR_NULL);
    ok(kt_op_set_search(op, "auto", 1));
    ok(kt_op_set_search(op, NULL, 1));
    kt_outcome o[64];
    tune_lattice(op, o); /* frozen now */
    assert_int_equal(kt_op_set_search(op, "random", 1), KT_ERR_STATE);
    assert_int_equal(kt_op_set_budget_fraction(op, 0.5), KT_ERR_STATE);
    kt_context_destroy(ctx);
}

int main(int argc, char **argv) {
    snprintf(artifacts, sizeof artifacts, "/tmp/kt-search-XXXXXX");
    if (mkdtemp(artifacts) == NULL) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strategy_names),        cmocka_unit_test(test_every_configuration_once),
        cmocka_unit_test(test_deterministic),         cmocka_unit_test(test_invalid_results),
        cmocka_unit_test(test_smooth_landscape),      cmocka_unit_test(test_constraint_trap),
        cmocka_unit_test(test_errors),                cmocka_unit_test(test_local_walkers),
        cmocka_unit_test(test_tuning_budget_and_builds), cmocka_unit_test(test_tuning_exhaustive_and_auto),
        cmocka_unit_test(test_tuning_search_errors),    cmocka_unit_test(test_killed_tuning_resumes),
        cmocka_unit_test(test_seconds_budget_searches),
    };
    int rc = kt_run_cases(argc, argv, tests, NULL, NULL);
    char rm[300];
    snprintf(rm, sizeof rm, "rm -rf '%s'", artifacts);
    if (system(rm) != 0) rc = rc ? rc : 1;
    return rc;
}
