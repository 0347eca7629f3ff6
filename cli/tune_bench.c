/*
 * tune_bench.c - measuring single configurations of a problem as `kerntune tune` would (a fleet
 * worker's measurements, tune.h).
 */
#define _XOPEN_SOURCE 700 /* mkdtemp */
#define _DEFAULT_SOURCE
#include "tune_int.h"

/* ---- one configuration at a time: a fleet worker's measurements ------------------------------ */

struct tune_bench {
    options o;
    t1 p;
    bool loaded;
    kt_context *ctx;
    long dev;
    char *source;
    kt_space *sp, *full_sp;
    const int64_t *ps;
    size_t nps;
    prepared prep;
    replay_data replay;
    char *replay_name;
    char replay_dir[PATH_MAX];
    bool replay_dir_made;
    double build_timeout;
};

void tune_bench_close(tune_bench *b) {
    if (b == NULL) return;
    prepared_free(&b->prep);
    kt_space_destroy(b->sp);
    kt_space_destroy(b->full_sp);
    kt_context_destroy(b->ctx);
    if (b->replay_dir_made) cli_remove_tree(b->replay_dir);
    t4_free(&b->replay.recs);
    free(b->source);
    free(b->replay_name);
    if (b->loaded) t1_free(&b->p);
    free(b);
}

char *tune_bench_open(const tune_bench_args *a, tune_bench **out) {
    *out = NULL;
    tune_bench *b = calloc(1, sizeof *b);
    if (b == NULL) return cli_format("out of memory");
    options *o = &b->o;
    char *err = NULL;
    kt_status st;
#define BFAIL(...)                      \
    do {                                \
        err = cli_format(__VA_ARGS__);  \
        goto fail;                      \
    } while (0)
#define BKT(call)                                                                      \
    do {                                                                               \
        if ((st = (call)) != KT_OK) BFAIL("%s: %s", kt_status_name(st), kt_last_error()); \
    } while (0)
    o->problem = a->problem;
    o->measure = "race";
    o->strategy = "exhaustive";
    o->seed = a->seed;
    o->seed_given = a->seed_given;
    o->timeout = a->timeout > 0 ? a->timeout : 10;
    o->device = a->device;
    o->simulate = a->simulate;
    o->cache = "off";
    o->quiet = true;
    for (size_t i = 0; i < a->ndefines && i < 64; i++) o->defines[o->ndefines++] = a->defines[i];
    if (a->problem_size) {
        const char *big;
        int big_len;
        if (!parse_sizes(a->problem_size, o, &big, &big_len)) BFAIL("problem size '%s': not a list of sizes", a->problem_size);
        o->problem_size_text = a->problem_size;
    }
    if (!t1_load(o->problem, &b->p, &err)) goto fail;
    b->loaded = true;
    t1 *p = &b->p;
    if (p->nargs > 64 || p->nparams > 64) BFAIL("%s: at most 64 arguments and 64 parameters", o->problem);
    if (o->nproblem && p->nproblem && o->nproblem != p->nproblem) BFAIL("problem size %s: wrong number of dimensions", a->problem_size);
    b->ps = o->nproblem ? o->problem_size : p->problem_size;
    b->nps = o->nproblem ? o->nproblem : p->nproblem;
    if (!t1_grid(p, b->nps, &err)) goto fail;
    BKT(kt_context_create(&b->ctx));
    BKT(kt_context_set_cache(b->ctx, "off")); /* the coordinator keeps the decision */
    if (a->build_only) BKT(kt_context_set_compile_threads(b->ctx, 1)); /* one build at a time: the caller runs several */
    b->build_timeout = a->build_timeout;
    /* every run of a job is reported: no warm-up of its own (the coordinator's engine decides
     * which runs are warm-ups, as it would of runs measured where it is) */
    BKT(kt_context_set_policy(b->ctx, KT_POLICY_FIXED));
    if (a->simulate) {
        const char *names[64];
        for (size_t i = 0; i < p->nparams; i++) names[i] = p->params[i].name;
        if ((b->replay_name = cli_format("%s", a->simulate_name ? a->simulate_name : a->simulate)) == NULL) BFAIL("out of memory");
        b->replay.source = b->replay_name;
        b->replay.recorded = a->recorded;
        b->replay.sampled = a->seed_given;
        b->replay.seed = a->seed;
        if (!t4_read(a->simulate, names, p->nparams, &b->replay.recs, &err)) goto fail;
        b->dev = -1;
        if ((err = stand_in(b->ctx, replay_backend(&b->replay), b->replay_dir, sizeof b->replay_dir, &b->replay_dir_made, &b->dev)) != NULL)
            goto fail;
    } else {
        if ((b->dev = pick_device(b->ctx, p, o, &err)) < 0) goto fail;
        if ((b->source = t1_read_file(p->kernel_file, "the kernel file", T1_FILE_LIMIT, 0, NULL, &err)) == NULL) goto fail;
    }
    if ((b->sp = make_space(p, o->defines, o->ndefines, false, b->ps, b->nps, &err)) == NULL) goto fail;
    if (o->ndefines > 0 && (b->full_sp = make_space(p, NULL, 0, false, b->ps, b->nps, &err)) == NULL) goto fail;
    size_t total = 0;
    if (!enumerate(p, b->sp, o->defines, o->ndefines, false, b->ps, b->nps, &total, &err)) goto fail;
    const kt_device *dv = kt_context_device(b->ctx, (size_t)b->dev);
    b->prep = (prepared){.p = p, .ctx = b->ctx, .dev = (size_t)b->dev, .host_dev = (kt_device_caps(dv) & KT_BACKEND_CAP_HOST_MEMORY) != 0,
                         .no_data = a->simulate != NULL || a->build_only, .build_only = a->build_only, .replay = a->simulate != NULL,
                         .source = a->simulate ? "" : b->source};
    if ((err = prepare(&b->prep, o, b->ps, b->nps, b->sp, b->full_sp)) != NULL) goto fail;
    *out = b;
    return NULL;
fail:
    tune_bench_close(b);
    return err ? err : cli_format("out of memory");
#undef BFAIL
#undef BKT
}

void tune_bench_result_free(tune_bench_result *r) {
    free(r->message);
    free(r->runs);
    memset(r, 0, sizeof *r);
}

/* The one-configuration space of config ("NAME=VALUE,..."), or NULL: *err says why, or *why
 * (allocated) says it is not a configuration of the problem here. */
static kt_space *config_space(tune_bench *b, const char *config, char **err, char **why) {
    char *copy = cli_format("%s", config), *defines[64];
    size_t n = 0;
    if (copy == NULL) {
        *err = cli_format("out of memory");
        return NULL;
    }
    for (char *s = copy, *save = NULL, *tok; (tok = strtok_r(s, ",", &save)) != NULL; s = NULL) {
        if (n == 64 || strchr(tok, '=') == NULL) {
            free(copy);
            *why = cli_format("configuration '%s': expected NAME=VALUE for each of the problem's parameters", config);
            return NULL;
        }
        defines[n++] = tok;
    }
    kt_space *sp = make_space(&b->p, (const char *const *)defines, n, false, b->ps, b->nps, err);
    size_t total = 0;
    if (sp && !enumerate(&b->p, sp, (const char *const *)defines, n, false, b->ps, b->nps, &total, err)) {
        kt_space_destroy(sp);
        sp = NULL;
    } else if (sp && total != 1) { /* the problem's conditions reject it (a coordinator's own space would not have named it) */
        *why = cli_format("configuration %s is %s of the problem's space here", config, total == 0 ? "not one" : "more than one");
        kt_space_destroy(sp);
        sp = NULL;
    }
    free(copy);
    return sp;
}

/* The op of configurations configs[0..n) (their one-configuration spaces into sps, *nsp of
 * them; group[i]: the space of configs[i], or -1 with r[i] REJECTED when it is not one here),
 * with nruns runs each; NULL with *err (allocated) on a failure. */
static kt_op *configs_op(tune_bench *b, const char *const *configs, size_t n, unsigned nruns, kt_space **sps, size_t *nsp,
                         size_t *group, tune_bench_result *r, char **err) {
    const options *o = &b->o;
    kt_op *op = NULL;
    kt_status st;
    *nsp = 0;
    for (size_t i = 0; i < n && *err == NULL; i++) {
        char *why = NULL;
        kt_space *sp = config_space(b, configs[i], err, &why);
        group[i] = sp ? *nsp : (size_t)-1;
        if (sp) sps[(*nsp)++] = sp;
        if (why) r[i].outcome = KT_OUTCOME_REJECTED, r[i].message = why;
    }
    if (*err || *nsp == 0) return NULL;
    if ((st = kt_context_set_measure(b->ctx, 0, nruns ? nruns : 1, nruns ? nruns : 1, 0)) != KT_OK ||
        (st = kt_op_create(b->ctx, b->p.name, &op)) != KT_OK || (st = kt_op_set_device(op, (size_t)b->dev)) != KT_OK ||
        (st = kt_op_set_isolation(op, o->simulate ? KT_ISOLATE_OFF : KT_ISOLATE_ON)) != KT_OK ||
        (st = kt_op_set_timeout(op, o->timeout)) != KT_OK) {
        *err = cli_format("%s: %s", kt_status_name(st), kt_last_error());
        kt_op_destroy(op);
        return NULL;
    }
    if ((*err = declare(&b->prep, sps, *nsp, !o->simulate, op)) != NULL) {
        kt_op_destroy(op);
        return NULL;
    }
    return op;
}

char *tune_bench_build(tune_bench *b, const char *const *configs, size_t n, kt_build_counts *counts, kt_built_fn on_built, void *user) {
    /* the next tune_bench_measure in another context finds what this builds */
    *counts = (kt_build_counts){0};
    if (b->o.simulate) return NULL; /* a replay has nothing to build */
    char *err = NULL;
    kt_space **sps = calloc(n ? n : 1, sizeof *sps);
    size_t *group = calloc(n ? n : 1, sizeof *group), nsp = 0;
    tune_bench_result *r = calloc(n ? n : 1, sizeof *r);
    kt_op *op = NULL;
    if (sps == NULL || group == NULL || r == NULL) err = cli_format("out of memory");
    else if ((op = configs_op(b, configs, n, 1, sps, &nsp, group, r, &err)) != NULL) {
        kt_status st = b->build_timeout > 0 ? kt_op_set_budget(op, 0, b->build_timeout) : KT_OK; /* a build that never ends is given up */
        if (st == KT_OK) st = kt_op_build_each(op, b->prep.args, b->p.nargs, counts, on_built, user);
        if (st != KT_OK) err = cli_format("%s: %s", kt_status_name(st), kt_last_error());
    }
    kt_op_destroy(op);
    for (size_t i = 0; i < nsp; i++) kt_space_destroy(sps[i]);
    for (size_t i = 0; r && i < n; i++) tune_bench_result_free(&r[i]);
    free(sps), free(group), free(r);
    return err;
}

char *tune_bench_measure(tune_bench *b, const char *const *configs, size_t n, unsigned from, unsigned nruns, tune_bench_result *r) {
    const t1 *p = &b->p;
    memset(r, 0, n * sizeof *r);
    char *err = NULL;
    kt_space **sps = calloc(n ? n : 1, sizeof *sps);
    size_t *group = calloc(n ? n : 1, sizeof *group), nsp = 0;
    kt_op *op = NULL;
    kt_status st;
    if (sps == NULL || group == NULL) {
        err = cli_format("out of memory");
        goto out;
    }
    if ((op = configs_op(b, configs, n, nruns, sps, &nsp, group, r, &err)) == NULL) goto out;
    b->replay.skip = from;
    uint64_t built0 = atomic_load(&b->replay.built_ns);
    uint64_t served0 = atomic_load(&b->replay.served_ns);
    st = kt_op_tune(op, b->prep.args, p->nargs);
    const kt_decision *d = NULL;
    if (st == KT_OK || st == KT_ERR_ALL_FAILED) st = kt_op_decision(op, b->prep.args, p->nargs, &d);
    if (d == NULL) {
        err = cli_format("%s: %s", kt_status_name(st), kt_last_error());
        goto out;
    }
    for (size_t u = 0; u < kt_decision_unit_count(d) && err == NULL; u++) {
        /* declare() adds the reference group first, when there is one, then a group per space */
        size_t base = b->prep.ref_sp ? 1 : 0, c = kt_decision_unit_candidate(d, u);
        if (c < base) continue;
        size_t g = c - base;
        for (size_t i = 0; i < n; i++) {
            if (group[i] != g) continue;
            tune_bench_result *ri = &r[i];
            ri->outcome = kt_decision_unit_outcome(d, u);
            const char *msg = kt_decision_unit_message(d, u);
            ri->message = msg ? cli_format("%s", msg) : NULL;
            const double *times = NULL;
            size_t nt = 0;
            if (kt_decision_unit_runtimes(d, u, &times, &nt) == KT_OK && nt > 0) {
                if ((ri->runs = malloc(nt * sizeof *ri->runs)) == NULL) {
                    err = cli_format("out of memory");
                    break;
                }
                memcpy(ri->runs, times, nt * sizeof *times);
                ri->nruns = nt;
            }
        }
    }
    /* the recorded time the whole batch stands for, on its first job */
    r[0].recorded_ns = (double)(atomic_load(&b->replay.built_ns) - built0) + (double)(atomic_load(&b->replay.served_ns) - served0);
out:
    kt_op_destroy(op);
    for (size_t i = 0; i < nsp; i++) kt_space_destroy(sps[i]);
    free(sps);
    free(group);
    if (err)
        for (size_t i = 0; i < n; i++) tune_bench_result_free(&r[i]);
    return err;
}
