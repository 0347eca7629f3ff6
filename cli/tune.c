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

/* What run_tune works with, step by step: the options, the problem, the device, the op, and what
 * the outputs need; freed by cmd_free. */
typedef struct cmd {
    run_state run;
    options o;
    FILE *jout, *doc_out, *txt; /* the --json stream, where the document goes, the human summary */
    t1 p;
    char *err;
    kt_context *ctx;
    kt_space *sp, *full_sp;
    prepared prep;
    char *source;
    replay_data replay;
    told_log told;
    fleet *fl;
    long dev;
    const char *names[64];
    json_t *t4doc, *vinfo; /* what validation_info says */
    double startup_s, tuning_s; /* with a budget of seconds: what start-up took, what the tuning got */
    t4_live live;
    char replay_dir[PATH_MAX]; /* a stand-in device's artifact directory (stand_in) */
    bool replay_dir_made;
    const char *strategy;
    const int64_t *ps;
    size_t nps;
    kt_policy policy;
    double peak_f, peak_b;
    bool host_dev;
    const char *dev_name;
    size_t total;
    kt_op *op;
    progress prog;
} cmd;

/* A step's failure: the error kept for the end, the step returns ret (false, or exit status 1). */
#define CFAIL(ret, ...)                  \
    do {                                 \
        set_error(&c->run, __VA_ARGS__); \
        return ret;                      \
    } while (0)
#define CKT(ret, call)                                                                \
    do {                                                                              \
        kt_status st_ = (call);                                                       \
        if (st_ != KT_OK) CFAIL(ret, "%s: %s", kt_status_name(st_), kt_last_error()); \
    } while (0)

/* The problem read and checked with the options, and what the options name (--t4, the cache)
 * checked, before any work. */
static bool load_problem(cmd *c) {
    if (!t1_load(c->o.problem, &c->p, &c->err)) CFAIL(false, "%s", c->err ? c->err : "out of memory");
    if (c->txt) t1_print_ignored(&c->p, stderr, "kerntune tune"); /* what the problem gives that is not read: once */
    if (c->p.nargs > 64 || c->p.nparams > 64) CFAIL(false, "%s: at most 64 arguments and 64 parameters", c->o.problem);
    for (size_t i = 0; i < c->p.nparams; i++) c->names[i] = c->p.params[i].name;
    c->strategy = c->o.strategy;
    if ((c->err = problem_strategy(&c->p, &c->o, &c->strategy)) != NULL) CFAIL(false, "%s", c->err);
    if ((c->err = t4_replaces_input(&c->p, &c->o)) != NULL) {
        c->run.usage = true;
        CFAIL(false, "%s", c->err);
    }
    if (c->o.nproblem && c->p.nproblem && c->o.nproblem != c->p.nproblem) /* sizes and grids index ProblemSize's dimensions */
        CFAIL(false, "--problem-size %s: %zu dimension%s; the problem's KernelSpecification.ProblemSize has %zu", c->o.problem_size_text, c->o.nproblem,
             c->o.nproblem == 1 ? "" : "s", c->p.nproblem);
    c->ps = c->o.nproblem ? c->o.problem_size : c->p.problem_size;
    c->nps = c->o.nproblem ? c->o.nproblem : c->p.nproblem;
    if (!t1_grid(&c->p, c->nps, &c->err)) CFAIL(false, "%s", c->err);

    /* what the options name, checked before any work */
    if (c->o.t4) {
        char *why = check_writable(c->o.t4);
        if (why) {
            set_error(&c->run, "--t4 %s: %s", c->o.t4, why);
            free(why);
            return false;
        }
    }
    if (!c->o.simulate && !(c->o.cache && strcmp(c->o.cache, "off") == 0) && (c->err = check_cache(&c->o, c->txt != NULL)) != NULL) CFAIL(false, "%s", c->err);
    return true;
}

/* The context as the options set it, and the device: a replay's or a fleet's stand-in, or the
 * one the problem's Language asks for; its peaks and name. */
static bool open_device(cmd *c) {
    CKT(false, kt_context_create(&c->ctx));
    c->policy = KT_POLICY_RACE;
    if (strcmp(c->o.measure, "recorded") != 0) CKT(false, kt_policy_parse(c->o.measure, &c->policy));
    CKT(false, kt_context_set_policy(c->ctx, c->policy));
    kt_flush flush = KT_FLUSH_AUTO;
    flush_parse(c->o.flush, &flush); /* checked with the options */
    CKT(false, kt_context_set_flush(c->ctx, flush));
    CKT(false, kt_context_set_cache(c->ctx, c->o.simulate ? "off" : c->o.cache)); /* replay's device is not a device */
    if (c->o.jobs) CKT(false, kt_context_set_compile_threads(c->ctx, c->o.jobs));
    if (c->o.simulate) {
        c->replay.source = c->o.simulate;
        c->replay.recorded = strcmp(c->o.measure, "recorded") == 0;
        c->replay.sampled = c->o.seed_given;
        c->replay.seed = c->o.seed;
        if (!t4_read(c->o.simulate, c->names, c->p.nparams, &c->replay.recs, &c->err)) CFAIL(false, "--simulate %s", c->err ? c->err : "out of memory");
    } else if ((c->source = t1_read_file(c->p.kernel_file, "the kernel file", T1_FILE_LIMIT, 0, NULL, &c->err)) == NULL) {
        CFAIL(false, "%s: KernelSpecification.KernelFile: %s", c->o.problem, c->err ? c->err : "out of memory");
    }
    if (c->o.workers) { /* the device is the workers': configurations go to them as jobs (fleet.c) */
        fleet_run fr = {.problem = c->o.problem, .p = &c->p, .simulate = c->o.simulate, .recorded = c->replay.recorded, .seed = c->o.seed,
                        .seed_given = c->o.seed_given, .problem_size = c->o.problem_size_text, .defines = c->o.defines,
                        .ndefines = c->o.ndefines, .timeout = c->o.timeout};
        if (!fleet_open(c->o.workers, &fr, c->o.wait_workers, !c->o.quiet && isatty(2), &c->fl, &c->err)) CFAIL(false, "--workers %s: %s", c->o.workers, c->err);
        if ((c->err = stand_in(c->ctx, fleet_backend(c->fl), c->replay_dir, sizeof c->replay_dir, &c->replay_dir_made, &c->dev)) != NULL) CFAIL(false, "%s", c->err);
        fleet_stats fs;
        fleet_get_stats(c->fl, &fs);
        /* jobs on the stream at once: what the workers take at once (each builds its batch in
         * parallel), at least two per worker and at most 64; as many again wait to follow */
        size_t inflight = fs.batch > 2 * fs.workers ? fs.batch : 2 * fs.workers;
        if (!c->o.jobs) CKT(false, kt_context_set_compile_threads(c->ctx, inflight > 64 ? 64 : inflight));
        if (c->txt)
            fprintf(stderr, "kerntune tune: %zu worker%s on %s%s\n", fs.workers, fs.workers == 1 ? "" : "s", fleet_device_name(c->fl),
                    fs.ignored ? " (others, on other devices, are left out)" : "");
    } else if (c->o.simulate) {
        if ((c->err = stand_in(c->ctx, replay_backend(&c->replay), c->replay_dir, sizeof c->replay_dir, &c->replay_dir_made, &c->dev)) != NULL) CFAIL(false, "%s", c->err);
        /* a budget of seconds counts the time the search would have cost on the recorded device */
        CKT(false, kt_context_set_budget_clock(c->ctx, replay_clock_s, &c->replay));
    } else if ((c->dev = pick_device(c->ctx, &c->p, &c->o, &c->err)) < 0) {
        CFAIL(false, "%s", c->err ? c->err : "out of memory");
    }
    /* the device's peaks, for results with work formulas: given, else as its backend reads them */
    c->peak_f = c->o.peak_gflops, c->peak_b = c->o.peak_gbs;
    if (c->peak_f == 0 && c->peak_b == 0 && !c->o.simulate && !c->o.workers) CKT(false, kt_device_peaks(c->ctx, (size_t)c->dev, &c->peak_f, &c->peak_b));
    c->host_dev = (kt_device_caps(kt_context_device(c->ctx, (size_t)c->dev)) & KT_BACKEND_CAP_HOST_MEMORY) != 0;
    c->dev_name = kt_device_name(kt_context_device(c->ctx, (size_t)c->dev));
    return true;
}

/* The space (empty: an error that says why), the op over it on the device, its data and its
 * reference. */
static bool make_op(cmd *c) {
    if ((c->sp = make_space(&c->p, c->o.defines, c->o.ndefines, false, c->ps, c->nps, &c->err)) == NULL) CFAIL(false, "%s", c->err);
    c->total = 0;
    if (!enumerate(&c->p, c->sp, c->o.defines, c->o.ndefines, false, c->ps, c->nps, &c->total, &c->err)) CFAIL(false, "%s", c->err);
    if (c->total == 0) {
        c->err = empty_space(&c->p, &c->o, c->ps, c->nps);
        CFAIL(false, "%s", c->err ? c->err : "out of memory");
    }

    for (size_t d = 0; c->txt && d < c->o.ndefines; d++)
        for (size_t i = 0; i < c->p.nparams; i++)
            if (define_matches(c->o.defines[d], c->p.params[i].name) && !define_in_values(&c->p.params[i], c->o.defines[d]))
                fprintf(stderr, "kerntune tune: note: --define %s: not among the values of %s in the problem (%s)\n", c->o.defines[d],
                        c->p.params[i].name, c->p.params[i].values);

    /* a decision made with --validate off is recorded under a name of its own: a validated run
     * never takes it from the cache (a fleet's coordinator, which leaves validation to its
     * workers, keeps the problem's name) */
    char *op_name = c->o.validate_off ? cli_format("%s (unvalidated)", c->p.name) : NULL;
    kt_status cst = kt_op_create(c->ctx, op_name ? op_name : c->p.name, &c->op);
    free(op_name);
    CKT(false, cst);
    CKT(false, kt_op_set_device(c->op, (size_t)c->dev));
    /* a configuration that crashes or hangs must not take the command down */
    CKT(false, kt_op_set_isolation(c->op, c->o.simulate || c->o.workers ? KT_ISOLATE_OFF : KT_ISOLATE_ON));
    CKT(false, kt_op_set_timeout(c->op, c->o.timeout));
    if (c->o.ndefines > 0 && (c->full_sp = make_space(&c->p, NULL, 0, false, c->ps, c->nps, &c->err)) == NULL) CFAIL(false, "%s", c->err);
    c->prep = (prepared){.p = &c->p, .ctx = c->ctx, .dev = (size_t)c->dev, .host_dev = c->host_dev, .no_data = c->o.simulate || c->o.workers,
                      .replay = c->o.simulate != NULL,
                      .source = c->o.simulate ? "" : c->source};
    if ((c->err = prepare(&c->prep, &c->o, c->ps, c->nps, c->sp, c->full_sp)) != NULL) CFAIL(false, "%s", c->err);
    bool validating = !c->prep.no_data && !c->o.validate_off;
    if ((c->err = declare(&c->prep, &c->sp, 1, validating, c->op)) != NULL) CFAIL(false, "%s", c->err);
    if (validating && c->prep.ref.n == 0 && c->prep.ref_sp == NULL && c->txt)
        fprintf(stderr, "kerntune tune: note: %s: the reference is the consensus of the first %d configurations\n", c->prep.no_reference,
                CONSENSUS_VOTERS);
    /* a tuning that finds most configurations wrong stops (disagree.h), and says why */
    if (validating) CKT(false, kt_op_set_disagreement_stop(c->op, DISAGREE_MIN));
    return true;
}

/* The budget: --budget, else the problem's; a budget of seconds is the process's. */
static bool set_budget(cmd *c) {
    /* --budget N or N% replaces the problem's ConfigurationCount and ConfigurationFraction;
     * given both, the problem's budget is the smaller of the two */
    bool given = c->o.budget_count || c->o.budget_fraction > 0;
    size_t budget = c->o.budget_count ? c->o.budget_count : given ? 0 : (size_t)c->p.budget_count;
    double fraction = c->o.budget_fraction > 0 ? c->o.budget_fraction : given ? 0 : c->p.budget_fraction;
    if (fraction > 0) {
        double want = ceil(fraction * (double)c->total); /* a fraction <= 1: at most total, */
        size_t part = want >= (double)c->total ? c->total : (size_t)want; /* which a double may round up */
        if (budget == 0 || part < budget) budget = part;
    }
    CKT(false, kt_op_set_search(c->op, c->strategy, c->o.seed));
    double seconds = c->o.budget_seconds > 0 ? c->o.budget_seconds : c->p.budget_seconds;
    c->tuning_s = seconds;
    if (seconds > 0 && !c->o.simulate) {
        /* the process's seconds, not only the tuning's: start-up so far counts, and the tail is
         * kept for what follows the tuning (the unit in flight at the deadline, the outputs,
         * stopping the builds still running) */
        c->startup_s = cli_process_age_s();
        double tail = 0.25 + 0.02 * seconds;
        c->tuning_s = seconds - c->startup_s - (tail < 3 ? tail : 3);
        if (c->tuning_s < 0.001) c->tuning_s = 0.001; /* the first configuration is measured all the same */
    }
    if (budget || seconds > 0) CKT(false, kt_op_set_budget(c->op, budget, c->tuning_s));
    return true;
}

/* Tunes the op, then writes what it decided: the text, the T4 file, the report, the --json
 * document. Returns the exit status (with the error kept in c->run when there is one). */
static int tune_and_report(cmd *c) {
    c->prog = (progress){.start = kt_now_s(), .budget_s = c->tuning_s, .hidden = c->prep.ref_sp ? 1 : 0, .to_fleet = c->fl != NULL, .best_ns = -1};
    pthread_mutex_init(&c->prog.mu, NULL);
    if (!c->o.quiet && isatty(2)) CKT(1, kt_context_set_progress_fn(c->ctx, on_progress, &c->prog));
    if (c->fl) fleet_set_status(c->fl, progress_text, &c->prog); /* its line shows the tuning's beside the jobs */
    c->told.start = kt_now_s();
    c->live = (t4_live){.p = &c->p, .op = c->op, .fl = c->fl, .tl = &c->told, .path = c->o.t4, .device = c->dev_name, .names = c->names, .nnames = c->p.nparams,
                     .records = c->o.t4 || c->o.report ? json_array() : NULL, .judge = c->fl != NULL && !c->o.validate_off};
    CKT(1, kt_context_set_unit_fn(c->ctx, on_unit, &c->live)); /* the T4 as it comes; what validation sees */
    if (c->txt)
        fprintf(stderr, "kerntune tune: %s: %zu configurations on %s%s\n", c->p.name, c->total, c->dev_name,
                c->o.simulate ? (c->replay.recorded ? " (recorded means)" : " (recorded runs)") : "");

    double t0 = kt_now_s();
    kt_status st = kt_op_tune(c->op, c->prep.args, c->p.nargs);
    double wall = kt_now_s() - t0;
    kt_context_set_unit_fn(c->ctx, NULL, NULL);
    if (c->live.f) fclose(c->live.f); /* the final document replaces it below */
    if (c->prog.shown) fprintf(stderr, "\n");
    if (c->fl) fleet_progress_done(c->fl); /* its last line, before the summary */
    if (st == KT_ERR_DISAGREEMENT) { /* validation stopped it: nothing was decided */
        char *why = cli_format("%s", kt_last_error());
        if (c->prep.ref_sp && c->live.ref_config == NULL) c->live.ref_config = format_config(c->prep.ref_sp, 0); /* the Default's */
        char vline[512];
        c->vinfo = validation_info(&c->prep, &c->o, c->names, c->live.ref_config, c->live.ref_agree, c->live.ref_among, true, vline, sizeof vline);
        if (c->txt && vline[0]) fprintf(c->txt, "%s\n", vline);
        if ((c->err = stopped(&c->p, &c->o, &c->live, c->vinfo, why, c->txt, c->doc_out, c->total, c->dev_name, wall, c->prep.ref_sp != NULL,
                           kt_context_compile_count(c->ctx), kt_context_artifact_hits(c->ctx))) != NULL) {
            free(why);
            CFAIL(1, "%s", c->err);
        }
        free(why);
        return DISAGREE_EXIT;
    }
    const kt_decision *d = NULL;
    if (st == KT_OK || st == KT_ERR_ALL_FAILED) st = kt_op_decision(c->op, c->prep.args, c->p.nargs, &d);
    if (st != KT_OK && (st != KT_ERR_ALL_FAILED || d == NULL)) {
        /* a grid that cannot be computed for a configuration is the problem's error: named with
         * its JSON path and the configuration */
        char *msg = cli_format("%s", kt_last_error());
        char *g = msg && strncmp(msg, "geometry: ", 10) == 0 ? geometry_failure(&c->p, &c->o, c->ps, c->nps, c->prep.ref_sp != NULL, msg) : NULL;
        if (g) set_error(&c->run, "%s", g);
        else set_error(&c->run, "%s: %s", kt_status_name(st), msg ? msg : "out of memory");
        free(g);
        free(msg);
        return 1;
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
    if (reraced && c->txt)
        fprintf(stderr, "kerntune tune: note: the cache's decision for this problem was below the confidence its race asked for: its finalists were raced again\n");

    summary sm = {.o = &c->o, .p = &c->p, .prep = &c->prep, .replay = &c->replay, .op = c->op, .fl = c->fl, .ctx = c->ctx, .d = d, .names = c->names,
                  .dev_name = c->dev_name, .st = st, .policy = c->policy, .total = c->total, .wall = wall, .peak_f = c->peak_f, .peak_b = c->peak_b,
                  .startup_s = c->startup_s, .tuning_s = c->tuning_s, .rejected = rejected, .low = low, .reraced = reraced};
    summarize(&sm);
    c->vinfo = sm.vinfo;
    if (c->txt) print_summary(c->txt, &sm);
    if (c->o.t4 || c->o.report) {
        c->t4doc = t4_document(&c->p, c->op, c->fl, &c->told, d, c->dev_name, c->names, c->p.nparams, wall, c->peak_f, c->peak_b, c->vinfo);
        json_object_set_new(json_object_get(c->t4doc, "x-kerntune"), "flush", json_string(c->o.flush));
        char *why = c->o.t4 ? write_json(c->o.t4, c->t4doc) : NULL;
        if (why) {
            set_error(&c->run, "--t4 %s: cannot be written: %s", c->o.t4, why);
            free(why);
            return 1;
        }
    }
    if (c->o.report) {
        report_input in = {c->o.t4 ? c->o.t4 : "this run", c->t4doc};
        char *why = report_write(c->o.report, &in, 1, NULL);
        if (why) {
            set_error(&c->run, "--report %s: %s", c->o.report, why);
            free(why);
            return 1;
        }
        if (c->txt) fprintf(stderr, "kerntune tune: report written to %s\n", c->o.report);
    }
    if (c->o.json) {
        json_t *j = summary_json(&sm);
        char *text = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(17));
        if (text) fprintf(c->doc_out, "%s\n", text);
        free(text);
        json_decref(j);
    }
    return sm.best != (size_t)-1 ? 0 : 1;
}

/* Frees what the steps made: the context after what uses it, the stand-in's directory after the
 * context (builds a budget left running write their artifacts until it is gone). */
static void cmd_free(cmd *c) {
    prepared_free(&c->prep);
    json_decref(c->t4doc);
    json_decref(c->vinfo);
    live_free(&c->live);
    kt_space_destroy(c->sp);
    kt_space_destroy(c->full_sp);
    fflush(NULL); /* the answer is out before the context waits for builds a budget left running */
    kt_context_destroy(c->ctx);
    /* after the context: builds a budget left running write their artifacts until it is gone */
    if (c->replay_dir_made && cli_remove_tree(c->replay_dir) != 0)
        fprintf(stderr, "kerntune tune: could not remove %s: %s\n", c->replay_dir, strerror(errno));
    fleet_close(c->fl); /* after the context: its backend table lives in the fleet */
    free(c->told.order), free(c->told.at_s);
    t4_free(&c->replay.recs);
    free(c->source);
    free(c->err);
    t1_free(&c->p);
    cli_json_end(c->jout);
}

#undef CFAIL
#undef CKT

int run_tune(int argc, char **argv) {
    cmd *c = calloc(1, sizeof *c);
    if (c == NULL) {
        fprintf(stderr, "kerntune tune: out of memory\n");
        return 1;
    }
    int rc = parse_options(argc, argv, &c->o);
    if (rc != 0) {
        for (int i = 1; i < argc; i++)
            if (strcmp(argv[i], "--json") == 0) {
                json_error(stdout, usage_message ? usage_message : "usage error");
                break;
            }
        free(usage_message);
        usage_message = NULL;
        free(c);
        return rc;
    }
    c->dev = -1, c->startup_s = -1;
    /* the kernel (in its worker processes, which inherit file descriptor 1) and the platforms'
     * libraries may print: with --json, all of that goes to stderr and the document alone to
     * the real stdout */
    c->jout = c->o.json ? cli_json_begin() : NULL;
    c->doc_out = c->jout ? c->jout : stdout;
    c->txt = c->o.quiet ? NULL : c->o.json ? stderr : stdout;
    rc = 1;
    if (load_problem(c) && open_device(c) && make_op(c) && set_budget(c)) rc = tune_and_report(c);
    if (c->run.error) {
        fprintf(stderr, "kerntune tune: %s\n", c->run.error);
        if (c->o.json) json_error(c->doc_out, c->run.error); /* stdout stays one JSON document */
        free(c->run.error);
        rc = c->run.usage ? 2 : 1;
    }
    cmd_free(c);
    free(c);
    return rc;
}
