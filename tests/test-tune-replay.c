/*
 * test-tune-replay.c - `kerntune tune` on recorded results: every shared T1 problem parses and
 * its exhaustive replay (of a part of its space; the whole recordings are bench/hub_replay.py's)
 * with --measure recorded gives exactly the recorded best configuration and time; the grid of
 * every configuration is Kernel Tuner's (ProblemSize over GridDiv, rounded up), computed here by
 * hand; searches and budgets on a recorded space; T4 output carries the required fields and
 * round-trips through replay; Kernel Tuner's cache files replay; the measurement policies on
 * recorded data.
 */
#define _GNU_SOURCE /* popen, mkdtemp */
#include "tune-cli.h"
#include "hub.h"

/* ---- the shared recordings ------------------------------------------------------------------ */

/* Kernel Tuner's grid for the hub's two problems, by hand: ProblemSize[d] divided by the product
 * of GridDiv d (block_size_d * tile_size_d), rounded up; Z has no GridDiv: ProblemSize[2] (1
 * when not given) over LocalSize.Z ("1"). */
static void kt_grid(const char *kernel, const json_t *cfg, int64_t grid[3]) {
    int64_t bx = json_integer_value(json_object_get(cfg, "block_size_x")), by = json_integer_value(json_object_get(cfg, "block_size_y"));
    int64_t tx = json_integer_value(json_object_get(cfg, "tile_size_x")), ty = json_integer_value(json_object_get(cfg, "tile_size_y"));
    bool conv = strcmp(kernel, "convolution_milo") == 0;
    double psx = conv ? 4096 : 25000, psy = conv ? 4096 : 2048;
    grid[0] = (int64_t)ceil(psx / (double)(bx * tx));
    grid[1] = (int64_t)ceil(psy / (double)(by * ty));
    grid[2] = 1;
}

/* The recorded best of a T4 file among the configurations of subset: its fastest correct
 * result's time measurement. */
static const json_t *recorded_best(const json_t *t4, const char *subset, double *time, size_t *count) {
    const json_t *best = NULL, *r;
    size_t i;
    *count = 0;
    json_array_foreach(json_object_get(t4, "results"), i, r) {
        if (!hub_in_subset(json_object_get(r, "configuration"), subset)) continue;
        ++*count;
        if (strcmp(json_string_value(json_object_get(r, "invalidity")), "correct") != 0) continue;
        double t = json_number_value(json_object_get(json_array_get(json_object_get(r, "measurements"), 0), "value"));
        if (best == NULL || t < *time) best = r, *time = t;
    }
    return best;
}

/* The recording a replay read: the subset's file, or the whole recording (gzipped). */
static json_t *replayed(const char *path) {
    size_t len = strlen(path);
    return len > 3 && strcmp(path + len - 3, ".gz") == 0 ? load_gz_json(path) : load(path);
}

/* Checks the grid of every result of a T4 file that kerntune wrote for a hub problem against
 * Kernel Tuner's rule (kt_grid), and the block against LocalSize (block_size_x, _y, 1). */
static void check_hub_grids(const char *kernel, const char *t4path) {
    json_t *t4 = load(t4path);
    size_t i, checked = 0;
    json_t *r;
    json_array_foreach(json_object_get(t4, "results"), i, r) {
        const json_t *cfg = json_object_get(r, "configuration"), *geo = json_object_get(r, "geometry");
        assert_non_null(geo);
        int64_t want[3];
        kt_grid(kernel, cfg, want);
        const json_t *grid = json_object_get(geo, "grid"), *block = json_object_get(geo, "block");
        for (int d = 0; d < 3; d++)
            if (json_integer_value(json_array_get(grid, (size_t)d)) != want[d])
                fail_msg("%s result %zu: grid[%d] is %lld, Kernel Tuner's rule gives %lld", kernel, i, d,
                         (long long)json_integer_value(json_array_get(grid, (size_t)d)), (long long)want[d]);
        assert_int_equal(json_integer_value(json_array_get(block, 0)), json_integer_value(json_object_get(cfg, "block_size_x")));
        assert_int_equal(json_integer_value(json_array_get(block, 1)), json_integer_value(json_object_get(cfg, "block_size_y")));
        assert_int_equal(json_integer_value(json_array_get(block, 2)), 1);
        checked++;
    }
    assert_true(checked >= 50);
    json_decref(t4);
}

/* The replay of each recording (a hundred-odd configurations of it: the whole recordings, tens
 * of thousands, are bench/hub_replay.py's) gives exactly its recorded best; the grid of every
 * configuration is Kernel Tuner's ([8] B; its T4 output carries the geometry). */
static void test_hub_replay_exact(void **state) {
    (void)state;
    make_tmpdir();
    static const char *const kernels[] = {"convolution_milo", "dedispersion_milo"}, *const gpus[] = {"A4000", "W6600"};
    for (int k = 0; k < 2; k++)
        for (int g = 0; g < 2; g++) {
            char results[1024], args[4096], t4path[256] = "";
            const char *subset = hub_small_subset(kernels[k]);
            hub_part(kernels[k], gpus[g], subset, results, sizeof results);
            if (g == 0) snprintf(t4path, sizeof t4path, "--t4 %s/%s.json", tmpdir, kernels[k]);
            snprintf(args, sizeof args, "tune '%s/kernels/%s.json' --simulate '%s' --strategy exhaustive --measure recorded --json --quiet %s %s",
                     KT_HUB, kernels[k], results, subset, t4path);
            assert_int_equal(run(args), 0);
            json_t *s = doc(), *t4 = replayed(results);
            double want = 0;
            size_t count = 0;
            const json_t *rec = recorded_best(t4, subset, &want, &count);
            assert_non_null(rec);
            json_t *best = json_object_get(s, "best");
            if (!json_equal(json_object_get(best, "configuration"), json_object_get(rec, "configuration")))
                fail_msg("%s on %s: best configuration differs from the recorded best", kernels[k], gpus[g]);
            assert_true(json_real_value(json_object_get(best, "time_ms")) == want); /* exactly */
            assert_int_equal(json_integer_value(json_object_get(s, "configurations")), count);
            json_decref(s);
            json_decref(t4);
            if (g == 0) check_hub_grids(kernels[k], t4path + 5);
        }
    remove_tmpdir();
}

/* A search on a recorded space (issue [12]): with --budget 5% every strategy evaluates exactly
 * 5% of the convolution's configurations (ceil(0.05 x 4362) = 219, failures included), leaves
 * the rest not run, and picks one of those it evaluated. How good the pick is for a budget is
 * bench/search's business (many seeds), not a test's. */
static void test_hub_search_budget(void **state) {
    (void)state;
    make_tmpdir();
    char results[1024];
    snprintf(results, sizeof results, "%s/results/convolution_milo/A4000_T4.json.gz", KT_HUB);
    static const char *const strategies[] = {"model", "auto", "local", "anneal", "random", "genetic", "exhaustive"};
    for (size_t i = 0; i < (KT_TEST_LARGE ? sizeof strategies / sizeof strategies[0] : 2); i++) {
        char args[4096], t4[600];
        snprintf(t4, sizeof t4, "%s/search.json", tmpdir);
        snprintf(args, sizeof args, "tune '%s/kernels/convolution_milo.json' --simulate '%s' --strategy %s --budget 5%% --t4 %s --json --quiet",
                 KT_HUB, results, strategies[i], t4);
        assert_int_equal(run(args), 0);
        json_t *s = doc();
        json_int_t measured = json_integer_value(json_object_get(s, "measured")), failed = json_integer_value(json_object_get(s, "failed"));
        assert_int_equal(json_integer_value(json_object_get(s, "configurations")), 4362);
        if (measured + failed != 219) fail_msg("%s: %lld measured + %lld failed, not 219", strategies[i], (long long)measured, (long long)failed);
        assert_int_equal(json_integer_value(json_object_get(s, "not_run")), 4362 - 219);
        /* the pick is among the evaluated: its T4 record has runtimes */
        json_t *pick = json_object_get(json_object_get(s, "best"), "configuration"), *doc4 = load(t4);
        size_t k, with_runtimes = 0;
        json_t *r;
        bool found = false;
        json_array_foreach(json_object_get(doc4, "results"), k, r) {
            bool ran = json_array_size(json_object_get(json_object_get(r, "times"), "runtimes")) > 0;
            with_runtimes += ran;
            if (ran && json_equal(json_object_get(r, "configuration"), pick)) found = true;
        }
        assert_true(found);
        assert_int_equal(with_runtimes, measured);
        double chosen = json_real_value(json_object_get(json_object_get(s, "best"), "recorded_ms"));
        double best = json_real_value(json_object_get(json_object_get(s, "recorded_best"), "time_ms"));
        assert_true(chosen >= best);
        json_decref(doc4);
        json_decref(s);
    }
    remove_tmpdir();
}

/* A budget of seconds in a replay counts simulated seconds (what the runs and builds cost when
 * they were recorded), not this machine's: the hub's convolution replays in a second or two of
 * wall time, yet --budget 60s and 600s stop where the recorded device would have, the reported
 * simulated time close under the budget (a build in flight may end past it: at most the
 * recording's longest, 18.3 s), and ten times the budget evaluates several times more. */
static void test_replay_budget_of_seconds(void **state) {
    (void)state;
    make_tmpdir();
    char results[1024];
    snprintf(results, sizeof results, "%s/results/convolution_milo/A4000_T4.json.gz", KT_HUB);
    json_int_t evaluated[2];
    const double budgets[2] = {60, 600};
    /* the replay's stand-in artifact directory goes under TMPDIR and is gone afterwards, builds
     * the budget left running included (they wrote into it after its removal once) */
    char tmp[128], env[160];
    snprintf(tmp, sizeof tmp, "%s/tmp", tmpdir);
    assert_int_equal(mkdir(tmp, 0700), 0);
    snprintf(env, sizeof env, "TMPDIR='%s'", tmp);
    for (int b = 0; b < 2; b++) {
        char args[4096];
        snprintf(args, sizeof args, "tune '%s/kernels/convolution_milo.json' --simulate '%s' --budget %.0fs --seed 1 --json --quiet", KT_HUB,
                 results, budgets[b]);
        assert_int_equal(run_env(env, args), 0);
        DIR *d = opendir(tmp);
        assert_non_null(d);
        for (struct dirent *e; (e = readdir(d)) != NULL;)
            if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) fail_msg("left in TMPDIR: %s", e->d_name);
        closedir(d);
        json_t *s = doc();
        double simulated = json_real_value(json_object_get(s, "simulated_time_s"));
        evaluated[b] = json_integer_value(json_object_get(s, "measured")) + json_integer_value(json_object_get(s, "failed"));
        if (simulated < 0.75 * budgets[b] || simulated > budgets[b] + 18.4)
            fail_msg("--budget %.0fs: %.1f simulated seconds", budgets[b], simulated);
        /* an evaluation costs 2.9 s there on average: far from the whole space */
        if (evaluated[b] < 1 || (double)evaluated[b] > budgets[b] / 2.9 * 2)
            fail_msg("--budget %.0fs: %lld configurations evaluated", budgets[b], (long long)evaluated[b]);
        assert_int_equal(json_integer_value(json_object_get(s, "not_run")), 4362 - evaluated[b]);
        json_decref(s);
    }
    assert_true(evaluated[1] > 3 * evaluated[0]);
    remove_tmpdir();
}

/* Every T1 file of the hub parses (tuned here by replaying its first result file). */
static void test_every_hub_problem_parses(void **state) {
    (void)state;
    make_tmpdir();
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/kernels", KT_HUB);
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".json") != 0) continue;
        char args[4096], kernel[256];
        snprintf(kernel, sizeof kernel, "%.*s", (int)(len - 5), e->d_name);
        /* a small part of the space (a hub problem this test does not know: all of it, 5 replayed) */
        const char *subset = hub_small_subset(kernel);
        char results[1024];
        hub_part(kernel, "A4000", subset ? subset : "", results, sizeof results);
        snprintf(args, sizeof args, "tune '%s/%s' --simulate '%s' --budget 5 --quiet --json %s", dir, e->d_name, results,
                 subset ? subset : "");
        if (run(args) != 0) fail_msg("%s: %s", e->d_name, err);
        json_decref(doc());
        n++;
    }
    closedir(d);
    assert_true(n >= 2);
    remove_tmpdir();
}

/* [8] B: the grid kerntune plans for a hub configuration is Kernel Tuner's, computed here by
 * hand, not the problem's GlobalSize (which launches 64 times too many blocks). Every
 * configuration's grid is checked in test_hub_replay_exact. */
static void test_hub_grid_is_kernel_tuners(void **state) {
    (void)state;
    make_tmpdir();
    char conv[1024], dedisp[1024];
    hub_part("convolution_milo", "A4000", hub_small_subset("convolution_milo"), conv, sizeof conv);
    hub_part("dedispersion_milo", "A4000", hub_small_subset("dedispersion_milo"), dedisp, sizeof dedisp);
    /* 4096 / (16 * 2) = 128 blocks; 4096 / (4 * 3) = 341.33, so 342; Z: ProblemSize gives no
     * third size (1) and LocalSize.Z is 1: 1. GlobalSize would give (262144 // 16) // 2 = 8192
     * and (262144 // 4) // 3 = 21845. */
    char args[4096];
    snprintf(args, sizeof args,
             "tune '%s/kernels/convolution_milo.json' --simulate '%s' --measure recorded "
             "--define block_size_x=16 --define block_size_y=4 --define tile_size_x=2 --define tile_size_y=3 --define read_only=0 "
             "--define use_padding=0 --define use_shmem=1 --json --quiet",
             KT_HUB, conv);
    assert_int_equal(run(args), 0);
    json_t *s = doc();
    assert_int_equal(json_integer_value(json_object_get(s, "configurations")), 1);
    json_t *geo = json_object_get(json_object_get(s, "best"), "geometry");
    assert_int_equal(json_integer_value(json_array_get(json_object_get(geo, "grid"), 0)), 128);
    assert_int_equal(json_integer_value(json_array_get(json_object_get(geo, "grid"), 1)), 342);
    assert_int_equal(json_integer_value(json_array_get(json_object_get(geo, "grid"), 2)), 1);
    assert_int_equal(json_integer_value(json_array_get(json_object_get(geo, "block"), 0)), 16);
    assert_int_equal(json_integer_value(json_array_get(json_object_get(geo, "block"), 1)), 4);
    json_decref(s);
    /* dedispersion: 25000 / (8 * 3) = 1041.67, so 1042; 2048 / (40 * 2) = 25.6, so 26; its
     * third ProblemSize is 1 */
    snprintf(args, sizeof args,
             "tune '%s/kernels/dedispersion_milo.json' --simulate '%s' --measure recorded "
             "--define block_size_x=8 --define tile_size_x=3 --define tile_stride_x=1 --define tile_stride_y=1 --define block_size_y=40 "
             "--define tile_size_y=2 --json --quiet",
             KT_HUB, dedisp);
    assert_int_equal(run(args), 0);
    s = doc();
    geo = json_object_get(json_object_get(s, "best"), "geometry");
    assert_int_equal(json_integer_value(json_array_get(json_object_get(geo, "grid"), 0)), 1042);
    assert_int_equal(json_integer_value(json_array_get(json_object_get(geo, "grid"), 1)), 26);
    assert_int_equal(json_integer_value(json_array_get(json_object_get(geo, "grid"), 2)), 1);
    json_decref(s);
    remove_tmpdir();
}

/* T4 written by a real tuning has the required fields, classifies failures, and replays to the
 * same best. */
static void test_t4_round_trip(void **state) {
    (void)state;
    make_tmpdir();
    char t4path[256], args[2048];
    snprintf(t4path, sizeof t4path, "%s/out.json", tmpdir);
    snprintf(args, sizeof args, "tune '%s/t1/matmul_c_bad.json' --t4 '%s' --quiet --json --jobs 3 %s", KT_DATA, t4path, SMALL("--define TI=4"));
    char env[300]; /* artifacts of its own: every configuration is built, whatever ran before */
    snprintf(env, sizeof env, "KERNTUNE_ARTIFACTS='%s/artifacts'", tmpdir);
    assert_int_equal(run_env(env, args), 0);
    json_t *summary = doc(); /* where the time went: building, validating, around the runs, the runs */
    const json_t *split = json_object_get(summary, "time_split");
    static const char *const parts[] = {"build_s", "validation_s", "framework_s", "runs_s"};
    for (int k = 0; k < 4; k++) assert_true(json_real_value(json_object_get(split, parts[k])) > 0);
    /* the build threads: as many as --jobs asked, busy for a fraction of the wall time */
    assert_int_equal(json_integer_value(json_object_get(split, "build_threads")), 3);
    double busy = json_real_value(json_object_get(split, "build_busy"));
    assert_true(busy > 0 && busy <= 1.0);
    json_decref(summary);
    json_t *t4 = load(t4path);
    assert_string_equal(json_string_value(json_object_get(json_object_get(t4, "metadata"), "timeunit")), "milliseconds");
    const json_t *r;
    size_t i;
    int compile_failures = 0, correct = 0;
    json_array_foreach(json_object_get(t4, "results"), i, r) {
        static const char *const required[] = {"configuration", "times", "invalidity", "correctness"};
        for (int k = 0; k < 4; k++) assert_non_null(json_object_get(r, required[k]));
        const char *inv = json_string_value(json_object_get(r, "invalidity"));
        const json_t *cfg = json_object_get(r, "configuration");
        assert_true(json_is_integer(json_object_get(cfg, "TI")) && json_is_integer(json_object_get(cfg, "BAD")));
        if (json_integer_value(json_object_get(cfg, "BAD")) == 1) {
            assert_string_equal(inv, "compile");
            assert_int_equal(json_integer_value(json_object_get(r, "correctness")), 0);
            compile_failures++;
        } else {
            assert_string_equal(inv, "correct");
            const json_t *times = json_object_get(r, "times");
            assert_true(json_array_size(json_object_get(times, "runtimes")) > 0);
            /* the unit's costs beyond its runs: validating it, and the framework around its runs */
            assert_true(json_real_value(json_object_get(times, "validation")) > 0);
            assert_true(json_real_value(json_object_get(times, "framework")) > 0);
            correct++;
        }
    }
    assert_int_equal(compile_failures, KT_TEST_LARGE ? 5 : 2);
    assert_int_equal(correct, KT_TEST_LARGE ? 5 : 2);
    double want = 0;
    size_t count = 0;
    const json_t *rec = recorded_best(t4, "", &want, &count);
    snprintf(args, sizeof args, "tune '%s/t1/matmul_c_bad.json' --simulate '%s' --measure recorded --quiet --json %s", KT_DATA, t4path,
             SMALL("--define TI=4"));
    assert_int_equal(run(args), 0);
    json_t *s = doc();
    assert_true(json_equal(json_object_get(json_object_get(s, "best"), "configuration"), json_object_get(rec, "configuration")));
    assert_true(json_real_value(json_object_get(json_object_get(s, "best"), "time_ms")) == want);
    assert_int_equal(json_integer_value(json_object_get(s, "failed")), KT_TEST_LARGE ? 5 : 2);
    json_decref(s);
    json_decref(t4);
    remove_tmpdir();
}

/* ConfigurationCount and ConfigurationFraction together: the smaller budget (a fraction had
 * overridden the count). Replayed: the recording's 5 configurations, of which one failed to
 * compile; a budget short of them is searched, and a failed build counts as an evaluation. */
static void test_budget_count_and_fraction(void **state) {
    (void)state;
    make_tmpdir();
    static const struct {
        const char *budget;
        int measured;
    } cases[] = {
        {"[{\"Type\": \"ConfigurationCount\", \"BudgetValue\": 2}, {\"Type\": \"ConfigurationFraction\", \"BudgetValue\": 0.8}]", 2},
        {"[{\"Type\": \"ConfigurationFraction\", \"BudgetValue\": 0.8}, {\"Type\": \"ConfigurationCount\", \"BudgetValue\": 1}]", 1},
        {"[{\"Type\": \"ConfigurationCount\", \"BudgetValue\": 3}, {\"Type\": \"ConfigurationFraction\", \"BudgetValue\": 0.2}]", 1},
        {"[{\"Type\": \"ConfigurationFraction\", \"BudgetValue\": 0.5}]", 3}, /* ceil(2.5) */
        {"[{\"Type\": \"ConfigurationCount\", \"BudgetValue\": 2}]", 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[64], args[1024];
        snprintf(name, sizeof name, "budget%zu.json", i);
        mutate("matmul_c.json", name, "Budget", cases[i].budget);
        snprintf(args, sizeof args, "tune '%s/%s' --simulate '%s/t1/matmul_c.ktcache.json' --quiet --json", tmpdir, name, KT_DATA);
        if (run(args) != 0) fail_msg("%s", err);
        json_t *s = doc();
        /* a budget short of the space is searched (auto), and every configuration the search
         * proposes counts, one that fails to compile too */
        json_int_t evaluated = json_integer_value(json_object_get(s, "measured")) + json_integer_value(json_object_get(s, "failed"));
        if (evaluated != cases[i].measured)
            fail_msg("budget %s: %lld evaluated, expected %d", cases[i].budget, (long long)evaluated, cases[i].measured);
        assert_int_equal(json_integer_value(json_object_get(s, "not_run")), 5 - cases[i].measured);
        json_decref(s);
    }
    remove_tmpdir();
}

/* A ProblemSize given as one integer is one dimension, as Kernel Tuner reads it (its
 * test_cache_file_T1_input.json gives "ProblemSize": 100): the grid divides it (replayed). */
static void test_scalar_problem_size(void **state) {
    (void)state;
    make_tmpdir();
    char path[512], rec[512];
    snprintf(path, sizeof path, "%s/vector_add.json", tmpdir);
    write_file(path,
               "{\"General\": {\"BenchmarkName\": \"vector_add\", \"OutputFormat\": \"JSON\"},\n"
               " \"ConfigurationSpace\": {\"TuningParameters\": [{\"Name\": \"block_size_x\", \"Type\": \"int\", \"Values\": \"[32, 64, 128]\", \"Default\": 64}],\n"
               "   \"Conditions\": []},\n"
               " \"KernelSpecification\": {\"Language\": \"CUDA\", \"CompilerOptions\": [\"-std=c++11\"], \"BenchmarkName\": \"vector_add\",\n"
               "   \"KernelName\": \"vector_add\", \"KernelFile\": \"vector_add.cu\", \"GlobalSizeType\": \"CUDA\",\n"
               "   \"LocalSize\": {\"X\": \"block_size_x\", \"Y\": \"1\", \"Z\": \"1\"}, \"GlobalSize\": {\"X\": \"10000000 // block_size_x\", \"Y\": \"1\", \"Z\": \"1\"},\n"
               "   \"GridDivX\": [\"block_size_x\"], \"ProblemSize\": 100, \"SharedMemory\": 0, \"Stream\": null,\n"
               "   \"Arguments\": [\n"
               "     {\"Name\": \"a\", \"Type\": \"float\", \"MemoryType\": \"Vector\", \"AccessType\": \"ReadOnly\", \"FillType\": \"Random\", \"Size\": 100, \"FillValue\": 1.0},\n"
               "     {\"Name\": \"c\", \"Type\": \"float\", \"MemoryType\": \"Vector\", \"AccessType\": \"WriteOnly\", \"FillType\": \"Constant\", \"Size\": \"ProblemSize[0]\", \"FillValue\": 0.0},\n"
               "     {\"Name\": \"n\", \"Type\": \"int32\", \"MemoryType\": \"Scalar\", \"AccessType\": \"ReadOnly\", \"FillValue\": 100}]}}\n");
    json_t *t4 = json_pack("{s:{s:s}, s:[]}", "metadata", "timeunit", "milliseconds", "results");
    for (int b = 32; b <= 128; b *= 2)
        json_array_append_new(json_object_get(t4, "results"),
                              json_pack("{s:{s:i}, s:s, s:{s:[f]}, s:[{s:s,s:f,s:s}]}", "configuration", "block_size_x", b, "invalidity", "correct",
                                        "times", "runtimes", 1.0 / b, "measurements", "name", "time", "value", 1.0 / b, "unit", "ms"));
    snprintf(rec, sizeof rec, "%s/vector_add.t4.json", tmpdir);
    write_json(rec, t4);
    json_decref(t4);
    char args[2048], out4[512];
    snprintf(out4, sizeof out4, "%s/out.t4.json", tmpdir);
    snprintf(args, sizeof args, "tune '%s' --simulate '%s' --measure recorded --json --t4 '%s'", path, rec, out4);
    if (run(args) != 0) fail_msg("%s", err);
    json_decref(doc());
    t4 = load(out4);
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(t4, "results"), i, r) {
        json_int_t b = json_integer_value(json_object_get(json_object_get(r, "configuration"), "block_size_x"));
        json_t *grid = json_object_get(json_object_get(r, "geometry"), "grid");
        assert_int_equal(json_integer_value(json_array_get(grid, 0)), (100 + b - 1) / b); /* 4, 2, 1 */
    }
    assert_int_equal(json_array_size(json_object_get(t4, "results")), 3);
    json_decref(t4);
    remove_tmpdir();
}

/* A search is told each configuration's screened time and steers by it, so screening waits for
 * a kernel to settle: a configuration whose first runs are 20x, 10x slower than its steady time
 * (a device warming up after a build) is told its steady time and wins. Screened by one run it
 * would look 7x slower than the first configuration and be dropped. Replayed in recorded order. */
static void test_search_screens_settled_runs(void **state) {
    (void)state;
    make_tmpdir();
    char path[512], rec[512];
    snprintf(path, sizeof path, "%s/warming.json", tmpdir);
    write_file(path,
               "{\"General\": {\"BenchmarkName\": \"warming\", \"OutputFormat\": \"JSON\"},\n"
               " \"ConfigurationSpace\": {\"TuningParameters\": [{\"Name\": \"block_size_x\", \"Type\": \"int\", \"Values\": \"[32, 64, 128]\", \"Default\": 32}],\n"
               "   \"Conditions\": []},\n"
               " \"KernelSpecification\": {\"Language\": \"CUDA\", \"BenchmarkName\": \"warming\", \"KernelName\": \"k\", \"KernelFile\": \"k.cu\",\n"
               "   \"GlobalSizeType\": \"CUDA\", \"LocalSize\": {\"X\": \"block_size_x\", \"Y\": \"1\", \"Z\": \"1\"},\n"
               "   \"GlobalSize\": {\"X\": \"1024 // block_size_x\", \"Y\": \"1\", \"Z\": \"1\"}, \"ProblemSize\": 1024, \"SharedMemory\": 0,\n"
               "   \"Arguments\": [{\"Name\": \"c\", \"Type\": \"float\", \"MemoryType\": \"Vector\", \"AccessType\": \"WriteOnly\", \"FillType\": \"Constant\", \"Size\": 1024, \"FillValue\": 0.0}]}}\n");
    /* 32: steady 3 ms; 64: 30 (the warm-up), 20, 10, then 1 ms; 128: steady 2 ms */
    static const double runs[3][12] = {{3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3}, {30, 20, 10, 1, 1, 1, 1, 1, 1, 1, 1, 1}, {2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2}};
    json_t *t4 = json_pack("{s:{s:s}, s:[]}", "metadata", "timeunit", "milliseconds", "results");
    for (int c = 0; c < 3; c++) {
        json_t *rt = json_array();
        for (int q = 0; q < 12; q++) json_array_append_new(rt, json_real(runs[c][q]));
        json_array_append_new(json_object_get(t4, "results"),
                              json_pack("{s:{s:i}, s:s, s:{s:o}, s:[{s:s,s:f,s:s}]}", "configuration", "block_size_x", 32 << c, "invalidity",
                                        "correct", "times", "runtimes", rt, "measurements", "name", "time", "value", runs[c][11], "unit", "ms"));
    }
    snprintf(rec, sizeof rec, "%s/warming.t4.json", tmpdir);
    write_json(rec, t4);
    json_decref(t4);
    char args[2048], out4[512];
    snprintf(out4, sizeof out4, "%s/out.t4.json", tmpdir);
    snprintf(args, sizeof args, "tune '%s' --simulate '%s' --strategy exhaustive --json --quiet --t4 '%s'", path, rec, out4);
    if (run(args) != 0) fail_msg("%s", err);
    json_t *d = doc();
    assert_int_equal(json_integer_value(json_object_get(json_object_get(json_object_get(d, "best"), "configuration"), "block_size_x")), 64);
    assert_true(json_real_value(json_object_get(json_object_get(d, "best"), "time_ms")) < 1.0001);
    json_decref(d);
    t4 = load(out4);
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(t4, "results"), i, r) { /* 64's kept runs are its steady ones */
        if (json_integer_value(json_object_get(json_object_get(r, "configuration"), "block_size_x")) != 64) continue;
        json_t *kept = json_object_get(json_object_get(r, "times"), "runtimes"), *v;
        size_t q;
        assert_true(json_array_size(kept) >= 2);
        json_array_foreach(kept, q, v) assert_true(json_real_value(v) == 1.0);
    }
    json_decref(t4);
    remove_tmpdir();
}

/* Kernel Tuner's formats: its cache files replay (a failed compile classified), and a problem
 * in its T1 style (list(range(...)), GridDivX, MemType, Output, a null Stream) tunes. */
static void test_kernel_tuner_formats(void **state) {
    (void)state;
    char args[2048];
    snprintf(args, sizeof args, "tune '%s/t1/matmul_c.json' --simulate '%s/t1/matmul_c.ktcache.json' --measure recorded --quiet --json",
             KT_DATA, KT_DATA);
    assert_int_equal(run(args), 0);
    json_t *s = doc(), *best = json_object_get(s, "best");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(best, "configuration"), "TI")), 16);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(best, "configuration"), "TK")), 8);
    assert_true(json_real_value(json_object_get(best, "time_ms")) == 0.125);
    assert_int_equal(json_integer_value(json_object_get(s, "failed")), 1);
    json_decref(s);
    snprintf(args, sizeof args, "tune '%s/t1/matmul_kt_style.json' --quiet --json %s", KT_DATA, SMALL("--define TK=8"));
    assert_int_equal(run(args), 0);
    s = doc();
    /* TI in range(4, 33, 4) dividing 64, times TK: 4 with TK 8, 3 with TK 32 (TI * TK <= 512) */
    assert_int_equal(json_integer_value(json_object_get(s, "configurations")), KT_TEST_LARGE ? 7 : 4);
    assert_int_equal(json_integer_value(json_object_get(s, "measured")), KT_TEST_LARGE ? 7 : 4);
    json_decref(s);
}

/* The measurement policies on recorded data: a seeded replay is deterministic; triton makes
 * exactly do_bench's runs; kerneltuner 1 + 7 per configuration; the race spends fewer. */
static void test_replay_policies(void **state) {
    (void)state;
    char args[2048];
    json_int_t runs[3];
    static const char *const policies[3] = {"race", "triton", "kerneltuner"};
    for (int p = 0; p < 3; p++) {
        char first[8192] = "";
        for (int twice = 0; twice < 2; twice++) {
            snprintf(args, sizeof args, "tune '%s/t1/matmul_c.json' --simulate '%s/t1/matmul_c.ktcache.json' --measure %s --seed 7 --quiet --json",
                     KT_DATA, KT_DATA, policies[p]);
            assert_int_equal(run(args), 0);
            json_t *s = doc();
            assert_string_equal(json_string_value(json_object_get(s, "policy")), policies[p]);
            json_object_del(s, "tuning_time_s"); /* the only wall-clock field */
            char *text = json_dumps(s, JSON_SORT_KEYS | JSON_COMPACT | JSON_REAL_PRECISION(17));
            if (twice == 0) snprintf(first, sizeof first, "%s", text);
            else assert_string_equal(text, first);
            runs[p] = json_integer_value(json_object_get(s, "runs"));
            free(text);
            json_decref(s);
        }
    }
    assert_int_equal(runs[2], 4 * 8); /* four valid configurations, a fourth fails to compile */
    assert_true(runs[0] < runs[2]);
    /* triton, runtimes served in order: configuration TI=4,TK=8 records 0.52 0.49 0.49 0.5 ms;
     * one call (0.52), five estimate runs (0.49 0.49 0.5 0.52 0.49: 0.498 ms each), so 50
     * warm-ups (25 ms) and 200 repetitions (100 ms) */
    make_tmpdir();
    char t4path[256];
    snprintf(t4path, sizeof t4path, "%s/triton.json", tmpdir);
    snprintf(args, sizeof args, "tune '%s/t1/matmul_c.json' --simulate '%s/t1/matmul_c.ktcache.json' --measure triton --quiet --t4 %s",
             KT_DATA, KT_DATA, t4path);
    assert_int_equal(run(args), 0);
    json_t *t4 = load(t4path);
    size_t i;
    json_t *r;
    int seen = 0;
    json_array_foreach(json_object_get(t4, "results"), i, r) {
        json_t *c = json_object_get(r, "configuration");
        if (json_integer_value(json_object_get(c, "TI")) == 4 && json_integer_value(json_object_get(c, "TK")) == 8) {
            assert_int_equal(json_array_size(json_object_get(json_object_get(r, "times"), "runtimes")), 200);
            seen = 1;
        }
    }
    assert_true(seen);
    json_decref(t4);
    remove_tmpdir();
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hub_replay_exact),
        cmocka_unit_test(test_hub_search_budget),
        cmocka_unit_test(test_replay_budget_of_seconds),
        cmocka_unit_test(test_every_hub_problem_parses),
        cmocka_unit_test(test_hub_grid_is_kernel_tuners),
        cmocka_unit_test(test_t4_round_trip),
        cmocka_unit_test(test_kernel_tuner_formats),
        cmocka_unit_test(test_budget_count_and_fraction),
        cmocka_unit_test(test_scalar_problem_size),
        cmocka_unit_test(test_search_screens_settled_runs),
        cmocka_unit_test(test_replay_policies),
    };
    return kt_run_cases(argc, argv, tests, NULL, NULL);
}
