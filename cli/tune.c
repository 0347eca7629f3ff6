/*
 * tune.c - `kerntune tune PROBLEM.json`: tunes a T1 problem through the public API.
 *
 * The problem's ConfigurationSpace becomes a kt_space, its kernel a variant group of one op on
 * the device its Language asks for, its Arguments buffers filled as FillType says; the op is
 * tuned with kt_op_tune and its decision's units become the table, the --json summary and the
 * T4 results. With --simulate the device is the replay backend (replay.c): the same engine,
 * served recorded runtimes, with no kernel source and no hardware.
 *
 * What can be found wrong before any work is found first (the problem file, the options, an
 * empty space, an unwritable --t4, an unusable --cache), each error naming the option or the
 * file and JSON path at fault. When every configuration fails, the failures are counted by kind
 * and the first messages of each kind shown. With --json, stdout holds one JSON document and
 * nothing else (an {"error": ...} document when the command fails); text, and whatever the
 * kernel prints, goes to stderr.
 */
#define _XOPEN_SOURCE 700 /* mkdtemp */
#define _DEFAULT_SOURCE
#include "tune_int.h"

/* ---- progress ------------------------------------------------------------------------------ */

typedef struct progress {
    double start, last;
    double budget_s; /* a budget of seconds (0: none): the time left is at most what is left of it */
    bool shown;
    size_t hidden;   /* units that are not the problem's configurations (the reference) */
    bool to_fleet;   /* with --workers the fleet's line shows it (progress_text), beside the jobs */
    pthread_mutex_t mu;
    size_t done, total, valid, failed;
    double best_ns;
} progress;

/* The tuning's progress as one line: configurations done of those it will try, valid, failed,
 * the best so far, the time elapsed and an estimate of the time left (against the budget). */
static void progress_text(char *buf, size_t len, void *user) {
    progress *p = user;
    pthread_mutex_lock(&p->mu);
    size_t done = p->done > p->hidden ? p->done - p->hidden : 0, total = p->total > p->hidden ? p->total - p->hidden : 0;
    size_t valid = p->valid, failed = p->failed;
    double best_ns = p->best_ns;
    pthread_mutex_unlock(&p->mu);
    double elapsed = kt_now_s() - p->start, eta = done ? elapsed * (double)(total - done) / (double)done : 0;
    if (p->budget_s > 0 && p->budget_s - elapsed < eta) eta = p->budget_s - elapsed > 0 ? p->budget_s - elapsed : 0; /* --budget Ns */
    char best[32] = "-";
    if (best_ns >= 0) snprintf(best, sizeof best, "%.4g ms", best_ns / 1e6);
    snprintf(buf, len, "  %zu/%zu configurations, %zu valid, %zu failed, best %s, %.1f s elapsed, ETA %.1f s", done, total, valid, failed,
             best, elapsed, eta);
}

static void on_progress(size_t done, size_t total, size_t valid, size_t failed, double best_ns, void *user) {
    progress *p = user;
    pthread_mutex_lock(&p->mu);
    p->done = done, p->total = total, p->valid = valid, p->failed = failed, p->best_ns = best_ns;
    pthread_mutex_unlock(&p->mu);
    double t = kt_now_s();
    if (p->to_fleet || (done < total && t - p->last < 0.1)) return; /* at most ten updates a second */
    p->last = t;
    char line[512];
    progress_text(line, sizeof line, p);
    fprintf(stderr, "\r\033[K%s", line);
    p->shown = true;
}

/* ---- the command ------------------------------------------------------------------------- */

typedef struct run_state {
    options o;
    char *error; /* the failure, printed at the end (and as the --json document) */
    bool usage;  /* the failure is the options' (exit status 2) */
} run_state;

static void set_error(run_state *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_error(run_state *r, const char *fmt, ...) {
    if (r->error) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    r->error = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (r->error) {
        va_start(ap, fmt);
        vsnprintf(r->error, (size_t)n + 1, fmt, ap);
        va_end(ap);
    } else {
        r->error = cli_format("out of memory");
    }
}

#define FAIL(...)                      \
    do {                               \
        set_error(&run, __VA_ARGS__);  \
        goto done;                     \
    } while (0)
#define KT(call)                                                                   \
    do {                                                                           \
        kt_status st_ = (call);                                                    \
        if (st_ != KT_OK) FAIL("%s: %s", kt_status_name(st_), kt_last_error());   \
    } while (0)

/* The strategy of the problem's Search (in kerntune's words or Kernel Tuner's) into *strategy,
 * unless --strategy was given; NULL, or the error (allocated). */
static char *problem_strategy(const t1 *p, const options *o, const char **strategy) {
    if (p->search == NULL || o->strategy_given) return NULL;
    static const char *const names[][2] = {{"brute_force", "exhaustive"}, {"random_sample", "random"},
                                           {"greedy_ils", "local"},        {"greedy_mls", "local"},
                                           {"simulated_annealing", "anneal"}, {"dual_annealing", "anneal"},
                                           {"genetic_algorithm", "genetic"}, {"bayes_opt", "model"}};
    *strategy = NULL;
    for (size_t i = 0; i < kt_search_strategy_count() && *strategy == NULL; i++)
        if (strcmp(p->search, kt_search_strategy_name(i)) == 0) *strategy = p->search;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && *strategy == NULL; i++)
        if (strcmp(p->search, names[i][0]) == 0) *strategy = names[i][1];
    if (*strategy == NULL)
        return cli_format("%s: Search.Name: '%s' is not a strategy kerntune has (exhaustive, random, local, anneal, genetic, model, auto, or "
                          "Kernel Tuner's brute_force, random_sample, greedy_ils, greedy_mls, simulated_annealing, dual_annealing, "
                          "genetic_algorithm, bayes_opt); --strategy NAME overrides it", o->problem, p->search);
    if (p->search_attributes)
        return cli_format("%s: Search.Attributes: kerntune's strategies take none (pass --strategy %s to tune without them)", o->problem,
                          *strategy);
    return NULL;
}

/* Whether --t4 names a file the problem reads (its kernel, an argument's or a reference's
 * data): the error (allocated), or NULL. */
static char *t4_replaces_input(const t1 *p, const options *o) {
    for (size_t i = 0; o->t4 && i < p->nargs + p->nrefs + 1; i++) {
        const char *src = i == 0 ? p->kernel_file : i <= p->nargs ? p->args[i - 1].data_source : p->refs[i - 1 - p->nargs].data_source;
        if (src == NULL || (i == 0 && o->simulate)) continue;
        char *path = src[0] == '/' || i == 0 ? cli_format("%s", src) : cli_format("%s/%s", p->dir, src);
        bool same = path && same_file(o->t4, path);
        free(path);
        if (!same) continue;
        if (i == 0) return cli_format("--t4 %s is the problem's KernelSpecification.KernelFile: the results would replace it", o->t4);
        if (i <= p->nargs)
            return cli_format("--t4 %s is the problem's KernelSpecification.Arguments[%zu].DataSource: the results would replace it", o->t4,
                              i - 1);
        return cli_format("--t4 %s is the problem's KernelSpecification.ReferenceArguments[%zu].DataSource: the results would replace it",
                          o->t4, i - 1 - p->nargs);
    }
    return NULL;
}

/* Opens the cache the options name (--cache, else KERNTUNE_CACHE, else the default) to see that
 * it can be used, before any work: the error (allocated), or NULL; a warning of the cache's on
 * stderr when talk. */
static char *check_cache(const options *o, bool talk) {
    kt_cache *c = NULL;
    kt_status st = kt_cache_open(o->cache, &c);
    const char *env = getenv("KERNTUNE_CACHE");
    if (st == KT_ERR_NOT_FOUND && o->cache == NULL && o->resume)
        return cli_format("--resume: there is no cache to resume from (KERNTUNE_CACHE=off, or no home directory); name one with --cache");
    if (st == KT_ERR_NOT_FOUND && o->cache == NULL) return NULL; /* KERNTUNE_CACHE=off, or no home: decisions last as long as the process */
    if (st != KT_OK) {
        if (o->cache) return cli_format("--cache %s: %s", o->cache, kt_last_error());
        if (env) return cli_format("KERNTUNE_CACHE=%s: %s", env, kt_last_error());
        return cli_format("the default cache: %s (--cache off tunes without it)", kt_last_error());
    }
    char *err = NULL;
    const char *w = kt_cache_warning(c);
    char *asked = o->cache ? cli_format("--cache %s", o->cache) : env ? cli_format("KERNTUNE_CACHE=%s", env) : cli_format("the default cache");
    const char *requested = o->cache ? o->cache : env;
    bool memory = strcmp(kt_cache_path(c), ":memory:") == 0 && !(requested && strcmp(requested, ":memory:") == 0);
    if (memory) { /* it could not be used: it would have been ignored */
        char dflt[4096]; /* KT_ERR_LIMIT when it does not fit: then the library's words stand alone */
        const char *path = o->cache ? o->cache : kt_cache_default_path(dflt, sizeof dflt) == KT_OK ? dflt : NULL;
        if (path && access(path, R_OK | W_OK) != 0)
            err = cli_format("%s: cannot be read and written: %s (--cache off tunes without a cache)", asked ? asked : "--cache", strerror(errno));
        else
            err = cli_format("%s: cannot be used: %s (--cache off tunes without a cache)", asked ? asked : "--cache", w);
    } else if (w && *w && talk) {
        fprintf(stderr, "kerntune tune: warning: %s: %s\n", asked ? asked : "--cache", w);
    }
    free(asked);
    kt_cache_close(c);
    return err;
}

int run_tune(int argc, char **argv) {
    run_state run = {0};
    options *op_ = &run.o;
    int rc = parse_options(argc, argv, op_);
    if (rc != 0) {
        for (int i = 1; i < argc; i++)
            if (strcmp(argv[i], "--json") == 0) {
                json_error(stdout, usage_message ? usage_message : "usage error");
                break;
            }
        free(usage_message);
        usage_message = NULL;
        return rc;
    }
    const options o = *op_;
    rc = 1;
    /* the kernel (in its worker processes, which inherit file descriptor 1) and the platforms'
     * libraries may print: with --json, all of that goes to stderr and the document alone to
     * the real stdout */
    FILE *jout = o.json ? cli_json_begin() : NULL, *doc_out = jout ? jout : stdout;
    t1 p;
    char *err = NULL;
    kt_context *ctx = NULL;
    kt_space *sp = NULL, *full_sp = NULL;
    prepared prep = {0};
    char *source = NULL;
    replay_data replay = {0};
    told_log told = {0};
    fleet *fl = NULL;
    long dev = -1;
    const char *names[64];
    json_t *t4doc = NULL, *vinfo = NULL; /* what validation_info says */
    double startup_s = -1, tuning_s = 0; /* with a budget of seconds: what start-up took, what the tuning got */
    t4_live live = {0};
    char replay_dir[PATH_MAX] = ""; /* a stand-in device's artifact directory (stand_in) */
    bool replay_dir_made = false;
    FILE *txt = o.quiet ? NULL : o.json ? stderr : stdout; /* the human summary */
    if (!t1_load(o.problem, &p, &err)) FAIL("%s", err ? err : "out of memory");
    if (txt) t1_print_ignored(&p, stderr, "kerntune tune"); /* what the problem gives that is not read: once */
    if (p.nargs > 64 || p.nparams > 64) FAIL("%s: at most 64 arguments and 64 parameters", o.problem);
    for (size_t i = 0; i < p.nparams; i++) names[i] = p.params[i].name;
    const char *strategy = o.strategy;
    if ((err = problem_strategy(&p, &o, &strategy)) != NULL) FAIL("%s", err);
    if ((err = t4_replaces_input(&p, &o)) != NULL) {
        run.usage = true;
        FAIL("%s", err);
    }
    if (o.nproblem && p.nproblem && o.nproblem != p.nproblem) /* sizes and grids index ProblemSize's dimensions */
        FAIL("--problem-size %s: %zu dimension%s; the problem's KernelSpecification.ProblemSize has %zu", o.problem_size_text, o.nproblem,
             o.nproblem == 1 ? "" : "s", p.nproblem);
    const int64_t *ps = o.nproblem ? o.problem_size : p.problem_size;
    size_t nps = o.nproblem ? o.nproblem : p.nproblem;
    if (!t1_grid(&p, nps, &err)) FAIL("%s", err);

    /* what the options name, checked before any work */
    if (o.t4) {
        char *why = check_writable(o.t4);
        if (why) {
            set_error(&run, "--t4 %s: %s", o.t4, why);
            free(why);
            goto done;
        }
    }
    if (!o.simulate && !(o.cache && strcmp(o.cache, "off") == 0) && (err = check_cache(&o, txt != NULL)) != NULL) FAIL("%s", err);

    KT(kt_context_create(&ctx));
    kt_policy policy = KT_POLICY_RACE;
    if (strcmp(o.measure, "recorded") != 0) KT(kt_policy_parse(o.measure, &policy));
    KT(kt_context_set_policy(ctx, policy));
    kt_flush flush = KT_FLUSH_AUTO;
    flush_parse(o.flush, &flush); /* checked with the options */
    KT(kt_context_set_flush(ctx, flush));
    KT(kt_context_set_cache(ctx, o.simulate ? "off" : o.cache)); /* replay's device is not a device */
    if (o.jobs) KT(kt_context_set_compile_threads(ctx, o.jobs));
    if (o.simulate) {
        replay.source = o.simulate;
        replay.recorded = strcmp(o.measure, "recorded") == 0;
        replay.sampled = o.seed_given;
        replay.seed = o.seed;
        if (!t4_read(o.simulate, names, p.nparams, &replay.recs, &err)) FAIL("--simulate %s", err ? err : "out of memory");
    } else if ((source = t1_read_file(p.kernel_file, "the kernel file", T1_FILE_LIMIT, 0, NULL, &err)) == NULL) {
        FAIL("%s: KernelSpecification.KernelFile: %s", o.problem, err ? err : "out of memory");
    }
    if (o.workers) { /* the device is the workers': configurations go to them as jobs (fleet.c) */
        fleet_run fr = {.problem = o.problem, .p = &p, .simulate = o.simulate, .recorded = replay.recorded, .seed = o.seed,
                        .seed_given = o.seed_given, .problem_size = o.problem_size_text, .defines = o.defines,
                        .ndefines = o.ndefines, .timeout = o.timeout};
        if (!fleet_open(o.workers, &fr, o.wait_workers, !o.quiet && isatty(2), &fl, &err)) FAIL("--workers %s: %s", o.workers, err);
        if ((err = stand_in(ctx, fleet_backend(fl), replay_dir, sizeof replay_dir, &replay_dir_made, &dev)) != NULL) FAIL("%s", err);
        fleet_stats fs;
        fleet_get_stats(fl, &fs);
        /* jobs on the stream at once: what the workers take at once (each builds its batch in
         * parallel), at least two per worker and at most 64; as many again wait to follow */
        size_t inflight = fs.batch > 2 * fs.workers ? fs.batch : 2 * fs.workers;
        if (!o.jobs) KT(kt_context_set_compile_threads(ctx, inflight > 64 ? 64 : inflight));
        if (txt)
            fprintf(stderr, "kerntune tune: %zu worker%s on %s%s\n", fs.workers, fs.workers == 1 ? "" : "s", fleet_device_name(fl),
                    fs.ignored ? " (others, on other devices, are left out)" : "");
    } else if (o.simulate) {
        if ((err = stand_in(ctx, replay_backend(&replay), replay_dir, sizeof replay_dir, &replay_dir_made, &dev)) != NULL) FAIL("%s", err);
        /* a budget of seconds counts the time the search would have cost on the recorded device */
        KT(kt_context_set_budget_clock(ctx, replay_clock_s, &replay));
    } else if ((dev = pick_device(ctx, &p, &o, &err)) < 0) {
        FAIL("%s", err ? err : "out of memory");
    }
    /* the device's peaks, for results with work formulas: given, else as its backend reads them */
    double peak_f = o.peak_gflops, peak_b = o.peak_gbs;
    if (peak_f == 0 && peak_b == 0 && !o.simulate && !o.workers) KT(kt_device_peaks(ctx, (size_t)dev, &peak_f, &peak_b));
    bool host_dev = (kt_device_caps(kt_context_device(ctx, (size_t)dev)) & KT_BACKEND_CAP_HOST_MEMORY) != 0;
    const char *dev_name = kt_device_name(kt_context_device(ctx, (size_t)dev));

    if ((sp = make_space(&p, o.defines, o.ndefines, false, ps, nps, &err)) == NULL) FAIL("%s", err);
    size_t total = 0;
    if (!enumerate(&p, sp, o.defines, o.ndefines, false, ps, nps, &total, &err)) FAIL("%s", err);
    if (total == 0) {
        err = empty_space(&p, &o, ps, nps);
        FAIL("%s", err ? err : "out of memory");
    }

    for (size_t d = 0; txt && d < o.ndefines; d++)
        for (size_t i = 0; i < p.nparams; i++)
            if (define_matches(o.defines[d], p.params[i].name) && !define_in_values(&p.params[i], o.defines[d]))
                fprintf(stderr, "kerntune tune: note: --define %s: not among the values of %s in the problem (%s)\n", o.defines[d],
                        p.params[i].name, p.params[i].values);

    kt_op *op = NULL;
    /* a decision made with --validate off is recorded under a name of its own: a validated run
     * never takes it from the cache (a fleet's coordinator, which leaves validation to its
     * workers, keeps the problem's name) */
    char *op_name = o.validate_off ? cli_format("%s (unvalidated)", p.name) : NULL;
    kt_status cst = kt_op_create(ctx, op_name ? op_name : p.name, &op);
    free(op_name);
    KT(cst);
    KT(kt_op_set_device(op, (size_t)dev));
    /* a configuration that crashes or hangs must not take the command down */
    KT(kt_op_set_isolation(op, o.simulate || o.workers ? KT_ISOLATE_OFF : KT_ISOLATE_ON));
    KT(kt_op_set_timeout(op, o.timeout));
    if (o.ndefines > 0 && (full_sp = make_space(&p, NULL, 0, false, ps, nps, &err)) == NULL) FAIL("%s", err);
    prep = (prepared){.p = &p, .ctx = ctx, .dev = (size_t)dev, .host_dev = host_dev, .no_data = o.simulate || o.workers,
                      .replay = o.simulate != NULL,
                      .source = o.simulate ? "" : source};
    if ((err = prepare(&prep, &o, ps, nps, sp, full_sp)) != NULL) FAIL("%s", err);
    bool validating = !prep.no_data && !o.validate_off;
    if ((err = declare(&prep, &sp, 1, validating, op)) != NULL) FAIL("%s", err);
    if (validating && prep.ref.n == 0 && prep.ref_sp == NULL && txt)
        fprintf(stderr, "kerntune tune: note: %s: the reference is the consensus of the first %d configurations\n", prep.no_reference,
                CONSENSUS_VOTERS);
    /* a tuning that finds most configurations wrong stops (disagree.h), and says why */
    if (validating) KT(kt_op_set_disagreement_stop(op, DISAGREE_MIN));
    /* --budget N or N% replaces the problem's ConfigurationCount and ConfigurationFraction;
     * given both, the problem's budget is the smaller of the two */
    bool given = o.budget_count || o.budget_fraction > 0;
    size_t budget = o.budget_count ? o.budget_count : given ? 0 : (size_t)p.budget_count;
    double fraction = o.budget_fraction > 0 ? o.budget_fraction : given ? 0 : p.budget_fraction;
    if (fraction > 0) {
        double want = ceil(fraction * (double)total); /* a fraction <= 1: at most total, */
        size_t part = want >= (double)total ? total : (size_t)want; /* which a double may round up */
        if (budget == 0 || part < budget) budget = part;
    }
    KT(kt_op_set_search(op, strategy, o.seed));
    double seconds = o.budget_seconds > 0 ? o.budget_seconds : p.budget_seconds;
    tuning_s = seconds;
    if (seconds > 0 && !o.simulate) {
        /* the process's seconds, not only the tuning's: start-up so far counts, and the tail is
         * kept for what follows the tuning (the unit in flight at the deadline, the outputs,
         * stopping the builds still running) */
        startup_s = cli_process_age_s();
        double tail = 0.25 + 0.02 * seconds;
        tuning_s = seconds - startup_s - (tail < 3 ? tail : 3);
        if (tuning_s < 0.001) tuning_s = 0.001; /* the first configuration is measured all the same */
    }
    if (budget || seconds > 0) KT(kt_op_set_budget(op, budget, tuning_s));
    progress prog = {.start = kt_now_s(), .budget_s = tuning_s, .hidden = prep.ref_sp ? 1 : 0, .to_fleet = fl != NULL, .best_ns = -1};
    pthread_mutex_init(&prog.mu, NULL);
    if (!o.quiet && isatty(2)) KT(kt_context_set_progress_fn(ctx, on_progress, &prog));
    if (fl) fleet_set_status(fl, progress_text, &prog); /* its line shows the tuning's beside the jobs */
    told.start = kt_now_s();
    live = (t4_live){.p = &p, .op = op, .fl = fl, .tl = &told, .path = o.t4, .device = dev_name, .names = names, .nnames = p.nparams,
                     .records = o.t4 || o.report ? json_array() : NULL, .judge = fl != NULL && !o.validate_off};
    KT(kt_context_set_unit_fn(ctx, on_unit, &live)); /* the T4 as it comes; what validation sees */
    if (txt)
        fprintf(stderr, "kerntune tune: %s: %zu configurations on %s%s\n", p.name, total, dev_name,
                o.simulate ? (replay.recorded ? " (recorded means)" : " (recorded runs)") : "");

    double t0 = kt_now_s();
    kt_status st = kt_op_tune(op, prep.args, p.nargs);
    double wall = kt_now_s() - t0;
    kt_context_set_unit_fn(ctx, NULL, NULL);
    if (live.f) fclose(live.f); /* the final document replaces it below */
    if (prog.shown) fprintf(stderr, "\n");
    if (fl) fleet_progress_done(fl); /* its last line, before the summary */
    if (st == KT_ERR_DISAGREEMENT) { /* validation stopped it: nothing was decided */
        char *why = cli_format("%s", kt_last_error());
        if (prep.ref_sp && live.ref_config == NULL) live.ref_config = format_config(prep.ref_sp, 0); /* the Default's */
        char vline[512];
        vinfo = validation_info(&prep, &o, names, live.ref_config, live.ref_agree, live.ref_among, true, vline, sizeof vline);
        if (txt && vline[0]) fprintf(txt, "%s\n", vline);
        if ((err = stopped(&p, &o, &live, vinfo, why, txt, doc_out, total, dev_name, wall, prep.ref_sp != NULL,
                           kt_context_compile_count(ctx), kt_context_artifact_hits(ctx))) != NULL) {
            free(why);
            FAIL("%s", err);
        }
        free(why);
        rc = DISAGREE_EXIT;
        goto done;
    }
    const kt_decision *d = NULL;
    if (st == KT_OK || st == KT_ERR_ALL_FAILED) st = kt_op_decision(op, prep.args, p.nargs, &d);
    if (st != KT_OK && (st != KT_ERR_ALL_FAILED || d == NULL)) {
        /* a grid that cannot be computed for a configuration is the problem's error: named with
         * its JSON path and the configuration */
        char *msg = cli_format("%s", kt_last_error());
        char *g = msg && strncmp(msg, "geometry: ", 10) == 0 ? geometry_failure(&p, &o, ps, nps, prep.ref_sp != NULL, msg) : NULL;
        if (g) set_error(&run, "%s", g);
        else set_error(&run, "%s: %s", kt_status_name(st), msg ? msg : "out of memory");
        free(g);
        free(msg);
        goto done;
    }
    /* what the persistent cache said: a rejected record, a decision below its requested confidence */
    const char *rejected = d ? kt_decision_cache_rejected(d) : NULL;
    bool low = d && kt_decision_below_confidence(d), reraced = d && kt_decision_reraced(d);
    if (rejected)
        fprintf(stderr, "kerntune tune: warning: the cache's decision for this problem was rejected%s: %s\n",
                kt_decision_source_of(d) == KT_SOURCE_DEFAULT ? "" : ", so it was measured again", rejected);
    if (low)
        fprintf(stderr, "kerntune tune: warning: confidence %.3f is below the %.3f the race asked for%s\n", kt_decision_confidence(d),
                kt_decision_requested_confidence(d),
                kt_decision_source_of(d) == KT_SOURCE_CACHE ? " (served from the cache without measuring)" : ": the next tuning re-races the finalists");
    if (reraced && txt)
        fprintf(stderr, "kerntune tune: note: the cache's decision for this problem was below the confidence its race asked for: its finalists were raced again\n");

    summary sm = {.o = &o, .p = &p, .prep = &prep, .replay = &replay, .op = op, .fl = fl, .ctx = ctx, .d = d, .names = names,
                  .dev_name = dev_name, .st = st, .policy = policy, .total = total, .wall = wall, .peak_f = peak_f, .peak_b = peak_b,
                  .startup_s = startup_s, .tuning_s = tuning_s, .rejected = rejected, .low = low, .reraced = reraced};
    summarize(&sm);
    vinfo = sm.vinfo;
    if (txt) print_summary(txt, &sm);
    if (o.t4 || o.report) {
        t4doc = t4_document(&p, op, fl, &told, d, dev_name, names, p.nparams, wall, peak_f, peak_b, vinfo);
        json_object_set_new(json_object_get(t4doc, "x-kerntune"), "flush", json_string(o.flush));
        char *why = o.t4 ? write_json(o.t4, t4doc) : NULL;
        if (why) {
            set_error(&run, "--t4 %s: cannot be written: %s", o.t4, why);
            free(why);
            goto done;
        }
    }
    if (o.report) {
        report_input in = {o.t4 ? o.t4 : "this run", t4doc};
        char *why = report_write(o.report, &in, 1, NULL);
        if (why) {
            set_error(&run, "--report %s: %s", o.report, why);
            free(why);
            goto done;
        }
        if (txt) fprintf(stderr, "kerntune tune: report written to %s\n", o.report);
    }
    if (o.json) {
        json_t *j = summary_json(&sm);
        char *text = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(17));
        if (text) fprintf(doc_out, "%s\n", text);
        free(text);
        json_decref(j);
    }
    rc = sm.best != (size_t)-1 ? 0 : 1;
done:
    if (run.error) {
        fprintf(stderr, "kerntune tune: %s\n", run.error);
        if (o.json) json_error(doc_out, run.error); /* stdout stays one JSON document */
        free(run.error);
        rc = run.usage ? 2 : 1;
    }
    prepared_free(&prep);
    json_decref(t4doc);
    json_decref(vinfo);
    live_free(&live);
    kt_space_destroy(sp);
    kt_space_destroy(full_sp);
    fflush(NULL); /* the answer is out before the context waits for builds a budget left running */
    kt_context_destroy(ctx);
    /* after the context: builds a budget left running write their artifacts until it is gone */
    if (replay_dir_made && cli_remove_tree(replay_dir) != 0)
        fprintf(stderr, "kerntune tune: could not remove %s: %s\n", replay_dir, strerror(errno));
    fleet_close(fl); /* after the context: its backend table lives in the fleet */
    free(told.order), free(told.at_s);
    t4_free(&replay.recs);
    free(source);
    free(err);
    t1_free(&p);
    cli_json_end(jout);
    return rc;
}

