/*
 * search.c - kerntune's search strategies side by side on recorded spaces (issue [12]), and
 * Kernel Tuner's own strategies on the same spaces, scored the same way.
 *
 * For each replay set of ../shared/benchmark_hub (the convolution and the dedispersion, each
 * recorded exhaustively on an RTX A4000 and a Radeon Pro W6600; more with --set-file, e.g. a
 * space recorded on the H200 by `kerntune tune --t4`), the problem's space is built from its T1
 * file and every configuration's recorded result is looked up in the T4 file. Each strategy then
 * runs through kerntune/search.h, proposing one configuration at a time. An evaluation costs,
 * in simulated time, what building it cost when it was recorded (compiling, validating, the
 * framework's share: the time fields of T4) and the runs kerntune's race takes to screen it,
 * served from its recorded runs in their order (race_screen below: a warm-up, two runs, more
 * while the first is a warm-up outlier), and the strategy is told the screened time, as the
 * engine tells a search; the best found is the race's pick (race_pick). With --cost recorded,
 * every recorded run is charged and the recorded mean told instead, as if kerntune measured
 * each configuration as the recording tuner did (Kernel Tuner: 32 runs here). Kernel Tuner's
 * own strategies are always charged the recorded costs: they are its measuring.
 *
 * Reported per set and strategy, over seeds: the median and 90th percentile of chosen / best
 * (the best recorded mean found within the budget over the space's best) for budgets of 1%, 2%,
 * 5% and 10% of the space (with --per-seed, every seed's too, in seed order; the closing RESULT
 * lines give auto's worst median and worst seed at 5% over the sets); and the autotuning
 * methodology's performance score, computed as the `autotuning-methodology` package (1.1.0)
 * does (bench/search_score.c says how, and where it differs). Kernel Tuner's strategies come as
 * traces (--kt FILE, from bench/kerneltuner.py), scored the same way.
 *
 * --kerneltuner runs bench/kerneltuner.py first, in the same run (it creates a virtual
 * environment with Kernel Tuner 1.5 on first use; its runs stop at 600 evaluations, so on a set
 * whose window is longer their last best counts to its end, as the package counts a run that
 * stopped), and scores its traces.
 *
 * usage: search [--hub DIR] [--seeds N] [--strategies a,b,...] [--sets c-A4000,...]
 *               [--budgets 1,2,5,10] [--kerneltuner | --kt FILE] [--set-file KERNEL:GPU:T4] [--trace FILE]
 *               [--batch N] [--walkers N] [--threads T] [--at-seconds S] [--cost race|recorded] [--per-seed]
 */
#define _GNU_SOURCE
#include "search.h"

#include <kerntune/search.h>

#include "../cli/t4.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_STRATEGIES = 32, MAX_BUDGETS = 8, MAX_SETS = 8, MAX_BATCH = 64 };

static size_t batch = 1; /* --batch: configurations proposed at once, as a tuning that builds in parallel asks */
static size_t walkers = 1; /* --walkers: walks a local search may keep at once (a tuning on N build threads under a
                            * budget of wall seconds allows N / 2) */
void kt__search_set_walkers(kt_search *s, size_t n); /* src/search/search.h (internal; the static library has it) */
/* --threads T: time as a tuning that builds on T threads beside one device spends it: proposals
 * in rounds of T, a round's time the longest of its builds plus all its screenings, one after
 * another (0: every evaluation's build and screening one after another, as before). */
static size_t threads = 0;
/* --at-seconds S: besides the budgets of evaluations, each seed's chosen / best once S seconds of
 * that time have passed, seed by seed. */
static double at_seconds = 0;
/* --cost: how kerntune's evaluations are charged and told. "race" (the default): as kerntune's
 * engine measures during a search, a configuration costs its build (compile, framework,
 * validation) and two recorded runs (a warm-up or validation run, then the one run it is
 * screened by), the strategy is told that screened run, and the best found is the
 * configuration with the fastest screened run (its recorded mean counts). "recorded": every
 * recorded run is charged and the recorded mean told, as the recording tuner measured. Kernel
 * Tuner's traces are always charged their recorded costs (its own measuring). */
static bool recorded_cost = false;
#define CUTOFF_START 0.01
#define CUTOFF_END 0.96

typedef struct set {
    char kernel[64], gpu[64], label[160], t4[1024];
} set;

void die(const char *what, const char *detail) {
    fprintf(stderr, "search: %s: %s\n", what, detail ? detail : "");
    exit(1);
}

static int cmp_desc(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

int cmp_asc(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_of(double *v, size_t n) { /* sorts v */
    qsort(v, n, sizeof *v, cmp_asc);
    return n == 0 ? NAN : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void load_set(const char *hub, const set *s, space_data *d) {
    char path[1100];
    snprintf(path, sizeof path, "%.900s/kernels/%.60s.json", hub, s->kernel);
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (root == NULL) die(path, jerr.text);
    json_t *cs = json_object_get(root, "ConfigurationSpace"), *p;
    size_t i;
    const char *names[64];
    size_t nnames = 0;
    if (kt_space_create(&d->sp) != KT_OK) die("kt_space_create", kt_last_error());
    json_array_foreach(json_object_get(cs, "TuningParameters"), i, p) {
        if (nnames == 64) die(path, "more than 64 parameters");
        names[nnames++] = json_string_value(json_object_get(p, "Name"));
        if (kt_space_add_param(d->sp, names[nnames - 1], json_string_value(json_object_get(p, "Values"))) != KT_OK)
            die(path, kt_last_error());
    }
    json_array_foreach(json_object_get(cs, "Conditions"), i, p) {
        if (kt_space_add_constraint(d->sp, json_string_value(json_object_get(p, "Expression"))) != KT_OK) die(path, kt_last_error());
    }
    if (kt_space_enumerate(d->sp, &d->n) != KT_OK) die(path, kt_last_error());
    t4_records recs;
    char *err = NULL;
    if (!t4_read(s->t4, names, nnames, &recs, &err)) die(s->t4, err);
    d->value = malloc(d->n * sizeof *d->value);
    d->cost = malloc(d->n * sizeof *d->cost);
    d->build = malloc(d->n * sizeof *d->build);
    d->runs = malloc(d->n * RUNS * sizeof *d->runs);
    d->nruns = calloc(d->n, 1);
    d->key = calloc(d->n, sizeof *d->key);
    d->worst_first = malloc(d->n * sizeof *d->worst_first);
    double *costs = malloc(d->n * sizeof *costs);
    if (!d->value || !d->cost || !d->build || !d->runs || !d->nruns || !d->key || !d->worst_first || !costs) die(s->label, "out of memory");
    d->opt = INFINITY, d->nvalid = 0;
    size_t missing = 0, ninvalid = 0;
    double valid_cost = 0, invalid_cost = 0;
    for (size_t c = 0; c < d->n; c++) {
        char key[4096], vals[4096];
        if (kt_space_config_format(d->sp, c, key, sizeof key) != KT_OK) die("kt_space_config_format", kt_last_error());
        size_t k = 0; /* "a=1,b=2" -> "1,2": the traces' form */
        for (const char *q = key; *q;) {
            const char *eq = strchr(q, '='), *comma = eq ? strchr(eq, ',') : NULL;
            if (eq == NULL) break;
            size_t len = comma ? (size_t)(comma - eq - 1) : strlen(eq + 1);
            k += (size_t)snprintf(vals + k, sizeof vals - k, "%s%.*s", k ? "," : "", (int)len, eq + 1);
            q = comma ? comma + 1 : eq + 1 + len;
        }
        if ((d->key[c] = strdup(k ? vals : "")) == NULL) die(s->label, "out of memory");
        t4_record probe = {.key = key}, *r = bsearch(&probe, recs.recs, recs.n, sizeof *recs.recs, t4_compare);
        d->value[c] = INFINITY, d->cost[c] = 0, d->build[c] = 0;
        if (r == NULL) {
            missing++;
            ninvalid++;
            costs[c] = 0;
            continue;
        }
        double runs = 0;
        for (size_t q = 0; q < r->nruntimes; q++) runs += r->runtimes[q];
        double build = fmax(r->compile_ns, 0) + fmax(r->framework_ns, 0) + fmax(r->other_ns, 0);
        d->cost[c] = (build + runs) / 1e6;
        d->build[c] = build / 1e6;
        if (strcmp(r->invalidity, "correct") == 0 && r->mean_ms > 0) {
            d->value[c] = r->mean_ms;
            for (size_t q = 0; q < RUNS; q++) /* without recorded runs: the mean, again and again */
                d->runs[c * RUNS + q] = r->nruntimes ? r->runtimes[q % r->nruntimes] / 1e6 : r->mean_ms;
            d->nruns[c] = RUNS;
            d->worst_first[d->nvalid++] = r->mean_ms;
            d->opt = fmin(d->opt, r->mean_ms);
            valid_cost += d->cost[c];
        } else {
            ninvalid++;
            invalid_cost += d->cost[c];
        }
        costs[c] = d->cost[c];
    }
    if (missing) fprintf(stderr, "search: %s: %zu configurations of the space have no record: invalid\n", s->label, missing);
    if (d->nvalid == 0) die(s->label, "no valid configuration recorded");
    double *tmp = malloc(d->nvalid * sizeof *tmp);
    if (tmp == NULL) die(s->label, "out of memory");
    memcpy(tmp, d->worst_first, d->nvalid * sizeof *tmp);
    d->median = median_of(tmp, d->nvalid);
    free(tmp);
    qsort(d->worst_first, d->nvalid, sizeof *d->worst_first, cmp_desc);
    d->median_cost = median_of(costs, d->n);
    d->mean_cost = valid_cost / (double)d->nvalid + (ninvalid ? invalid_cost / (double)ninvalid * (double)ninvalid / (double)d->n : 0);
    free(costs);
    t4_free(&recs);
    free(err);
    json_decref(root);
}

static void free_set(space_data *d) {
    for (size_t c = 0; c < d->n; c++) free(d->key[c]);
    kt_space_destroy(d->sp);
    free(d->value), free(d->cost), free(d->build), free(d->runs), free(d->nruns), free(d->key), free(d->worst_first);
}

void trace_add(trace *t, size_t *cap, double best, double time) {
    if (t->n == *cap) {
        *cap = *cap ? 2 * *cap : 256;
        if ((t->best = realloc(t->best, *cap * sizeof *t->best)) == NULL || (t->time = realloc(t->time, *cap * sizeof *t->time)) == NULL)
            die("trace", "out of memory");
    }
    t->best[t->n] = best, t->time[t->n] = time;
    t->n++;
}

/* kerntune's race as a search sees it (src/tune/engine.c, default settings: 99% confidence, 1%
 * tolerance). Each configuration is screened: a dedicated warm-up run until 8 configurations in
 * a row showed no warm-up outlier (10%), then two runs, and one more each time the first kept
 * run is 10% slower than the next (it counts as a warm-up; three warm-ups at most); the search
 * is told the median of the two kept. The configuration stays in the race unless it is slower
 * than the best one then, with confidence, judged with the prior spread (30%) two runs each
 * give: by more than a factor exp(z 1.2533 0.3) (1 + tolerance). When the search stops, the
 * race's rounds among those left pick the fastest: counted here as the best recorded mean among
 * them (their extra runs are not charged: a few runs of the few fastest kernels). */
#define RACE_WARM_CHECKS 8
#define RACE_SETTLE 1.1
#define RACE_SETTLE_MAX 3

/* The engine's screen() of one configuration from its recorded runs r (in order): the runs'
 * total time is returned, and the time the strategy is told in *told. */
static double race_screen(const double *r, unsigned *warm_checks, double *told) {
    size_t q = 0;
    double spent = 0;
    bool warming = *warm_checks < RACE_WARM_CHECKS;
    if (warming) spent += r[q++]; /* the dedicated warm-up */
    size_t first = q, warmups = q;
    spent += r[q] + r[q + 1];
    while (r[first] > RACE_SETTLE * r[first + 1] && warmups < RACE_SETTLE_MAX && first + 2 < RUNS) {
        first++, warmups++;
        spent += r[first + 1];
    }
    *told = (r[first] + r[first + 1]) / 2; /* the median of two */
    if (warming) *warm_checks = r[0] > RACE_SETTLE * r[1] ? 0 : *warm_checks + 1;
    return spent;
}

typedef struct race_state {
    double best_run;     /* the best screened time so far (0: none yet) */
    double pick;         /* the recorded mean of the best configuration still in the race */
} race_state;

/* Screens configuration c, told run; returns the recorded mean of the race's pick. */
static double race_pick(const space_data *d, race_state *rs, size_t c, double run) {
    const double keep = exp(2.3263478740408408 * 1.2533 * 0.3) * 1.01;
    if (rs->best_run == 0) rs->pick = INFINITY;
    if (rs->best_run == 0 || run <= keep * rs->best_run) rs->pick = fmin(rs->pick, d->value[c]); /* else dropped */
    if (rs->best_run == 0 || run < rs->best_run) rs->best_run = run;
    return rs->pick;
}

/* Runs strategy from seed, told budget: at most max evaluations, and none once until_ms of
 * simulated time has passed (0: no limit). */
static void run_one(const space_data *d, const char *strategy, uint64_t seed, size_t budget, size_t max, double until_ms, trace *t,
                    FILE *tf, const char *label) {
    kt_search *s = NULL;
    if (kt_search_create(d->sp, strategy, seed, budget, &s) != KT_OK) die(strategy, kt_last_error());
    kt__search_set_walkers(s, walkers);
    *t = (trace){0};
    size_t cap = 0;
    double best = INFINITY, now = 0;
    unsigned warm_checks = 0;
    race_state rs = {0};
    if (tf) fprintf(tf, "{\"set\": \"%s\", \"strategy\": \"%s\", \"seed\": %llu, \"evaluations\": [", label, strategy, (unsigned long long)seed);
    const size_t per_round = threads ? threads : batch;
    while (t->n < max && (until_ms <= 0 || now < until_ms)) {
        size_t cs[MAX_BATCH], want = per_round < max - t->n ? per_round : max - t->n;
        size_t got = kt_search_propose(s, cs, want);
        if (got == 0) break;
        double told[MAX_BATCH];
        if (threads) { /* the round's builds at once: its longest; each screening after them */
            double longest = 0;
            for (size_t k = 0; k < got; k++) longest = fmax(longest, d->build[cs[k]]);
            now += longest;
        }
        for (size_t k = 0; k < got; k++) { /* evaluated one after another, told together */
            size_t c = cs[k];
            double cost;
            if (recorded_cost) {
                cost = d->cost[c], told[k] = d->value[c];
                best = fmin(best, d->value[c]);
            } else {
                cost = threads ? 0 : d->build[c], told[k] = INFINITY;
                if (isfinite(d->value[c])) {
                    cost += race_screen(&d->runs[c * RUNS], &warm_checks, &told[k]);
                    best = race_pick(d, &rs, c, told[k]);
                }
            }
            now += cost;
            if (tf) fprintf(tf, "%s[%zu, %.17g, %.17g]", t->n ? ", " : "", c, isfinite(d->value[c]) ? d->value[c] : -1.0, cost);
            trace_add(t, &cap, best, now);
        }
        for (size_t k = 0; k < got; k++) kt_search_tell(s, cs[k], told[k]);
    }
    if (tf) fprintf(tf, "]}\n");
    kt_search_destroy(s);
}

/* Prints each seed's chosen / best once --at-seconds S of simulated time have passed, then their
 * median, worst, how many are over 1.10 and the evaluations made by then. */
static void at_seconds_report(const space_data *d, const char *strategy, size_t nseeds) {
    double ratio[MAX_SEEDS], evals = 0;
    size_t over = 0;
    printf("  %s at %.0f s, seed by seed:", strategy, at_seconds);
    for (size_t seed = 0; seed < nseeds; seed++) {
        trace tr;
        run_one(d, strategy, seed + 1, d->n, d->n, at_seconds * 1e3, &tr, NULL, NULL);
        size_t last = tr.n; /* the last evaluation that ended by then */
        while (last > 0 && tr.time[last - 1] > at_seconds * 1e3) last--;
        ratio[seed] = last ? tr.best[last - 1] / d->opt : INFINITY;
        over += ratio[seed] > 1.10, evals += (double)last;
        printf(" %.3f", ratio[seed]);
        free(tr.best), free(tr.time);
    }
    qsort(ratio, nseeds, sizeof *ratio, cmp_asc);
    printf("\n  %s at %.0f s: median %.4f, worst %.4f, %zu of %zu seeds over 1.10, %.0f evaluations on average\n", strategy,
           at_seconds, ratio[nseeds / 2], ratio[nseeds - 1], over, nseeds, evals / (double)nseeds);
}

/* ---- the command -------------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b) { return cmp_asc(a, b); }

static double quantile(double *v, size_t n, double q) {
    qsort(v, n, sizeof *v, cmp_double);
    size_t i = (size_t)ceil(q * (double)n) - 1;
    return v[i >= n ? n - 1 : i];
}

static size_t split(char *text, const char **out, size_t max) {
    size_t n = 0;
    for (char *save = NULL, *p = strtok_r(text, ",", &save); p && n < max; p = strtok_r(NULL, ",", &save)) out[n++] = p;
    return n;
}

/* Prints a strategy's row: chosen/best at each budget and its score. per_budget[b] (NULL: the
 * score's runs, whose prefixes then stand for the budgets) holds the runs of budget b. */
static bool per_seed; /* --per-seed: every seed's chosen / best too */

static double row(const space_data *d, const char *name, trace *const *per_budget, trace *runs, size_t nruns, const double *budgets,
                  size_t nbudgets, double t0, double t1, double *auto5, double *auto5_max) {
    printf("  %-22s", name);
    char seeds_line[MAX_BUDGETS][MAX_SEEDS * 8 + 64];
    for (size_t b = 0; b < nbudgets; b++) {
        size_t budget = (size_t)ceil(budgets[b] / 100 * (double)d->n);
        double ratios[MAX_SEEDS];
        for (size_t r = 0; r < nruns; r++) {
            const trace *t = per_budget ? &per_budget[b][r] : &runs[r];
            size_t k = t->n < budget ? t->n : budget;
            ratios[r] = k ? t->best[k - 1] / d->opt : INFINITY;
        }
        double worst = 0;
        size_t at = (size_t)snprintf(seeds_line[b], sizeof seeds_line[b], "    %5.3g%%, seed by seed:", budgets[b]);
        for (size_t r = 0; r < nruns; r++) { /* before the quantiles sort them */
            worst = fmax(worst, ratios[r]);
            if (at < sizeof seeds_line[b]) at += (size_t)snprintf(seeds_line[b] + at, sizeof seeds_line[b] - at, " %.3f", ratios[r]);
        }
        double med = quantile(ratios, nruns, 0.5), p90 = quantile(ratios, nruns, 0.9);
        printf("   %7.4f %7.4f", med, p90);
        if (auto5 && budgets[b] == 5) *auto5 = med;
        if (auto5_max && budgets[b] == 5) *auto5_max = worst;
    }
    double sc = score(d, runs, nruns, t0, t1);
    printf("   %6.3f\n", sc);
    for (size_t b = 0; per_seed && b < nbudgets; b++) printf("%s\n", seeds_line[b]);
    return sc;
}

int main(int argc, char **argv) {
    const char *hub = "../shared/benchmark_hub", *trace_path = NULL, *kt_path = NULL;
    size_t nseeds = 20;
    char strat_buf[512] = "random,local,anneal,genetic,model,auto", set_buf[256] = "", budget_buf[128] = "1,2,5,10";
    set sets[MAX_SETS];
    size_t nsets_all = 0;
    static const char *const hub_sets[][2] = {
        {"convolution_milo", "A4000"}, {"convolution_milo", "W6600"}, {"dedispersion_milo", "A4000"}, {"dedispersion_milo", "W6600"}};
    const char *extra[MAX_SETS];
    size_t nextra = 0;
    bool run_kt = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--kerneltuner") == 0) {
            run_kt = true;
            continue;
        }
        if (strcmp(argv[i], "--per-seed") == 0) {
            per_seed = true;
            continue;
        }
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: search [--hub DIR] [--seeds N] [--strategies a,b,...] [--sets c-A4000,c-W6600,d-A4000,d-W6600]\n"
                   "              [--budgets 1,2,5,10] [--kerneltuner | --kt FILE] [--set-file KERNEL:GPU:T4] [--trace FILE]\n"
                   "              [--batch N (proposals at once, told together; default 1)] [--walkers N (default 1)]\n"
                   "              [--threads T (rounds of T parallel builds, then their screenings)] [--at-seconds S (each seed's pick then)] [--cost race|recorded] [--per-seed]\n"
                   "Runs kerntune's search strategies on the recorded spaces of benchmark_hub (and --set-file's: a T4 file of\n"
                   "the hub's KERNEL recorded on GPU; its set is c-GPU or d-GPU): chosen/best at each budget (percent of the\n"
                   "space) over seeds, and the autotuning methodology's performance score; with --kt, Kernel Tuner's\n"
                   "strategies from bench/kerneltuner.py's traces, scored the same way (--kerneltuner: run it first,\n"
                   "in a virtual environment it creates). --cost race (the default) charges and tells kerntune's strategies\n"
                   "what kerntune's race spends during a search: the build, a warm-up or validation run and the one run a\n"
                   "configuration is screened by; --cost recorded charges every recorded run and tells the recorded mean.\n"
                   "Kernel Tuner's traces are always charged their recorded costs.\n");
            return 0;
        }
        if (i + 1 >= argc) die(argv[i], "needs a value (see --help)");
        if (strcmp(argv[i], "--hub") == 0) hub = argv[++i];
        else if (strcmp(argv[i], "--seeds") == 0) nseeds = (size_t)atoi(argv[++i]);
        else if (strcmp(argv[i], "--strategies") == 0) snprintf(strat_buf, sizeof strat_buf, "%s", argv[++i]);
        else if (strcmp(argv[i], "--sets") == 0) snprintf(set_buf, sizeof set_buf, "%s", argv[++i]);
        else if (strcmp(argv[i], "--budgets") == 0) snprintf(budget_buf, sizeof budget_buf, "%s", argv[++i]);
        else if (strcmp(argv[i], "--trace") == 0) trace_path = argv[++i];
        else if (strcmp(argv[i], "--kt") == 0) kt_path = argv[++i];
        else if (strcmp(argv[i], "--batch") == 0) batch = (size_t)atoi(argv[++i]);
        else if (strcmp(argv[i], "--walkers") == 0) walkers = (size_t)atoi(argv[++i]);
        else if (strcmp(argv[i], "--threads") == 0) threads = (size_t)atoi(argv[++i]);
        else if (strcmp(argv[i], "--at-seconds") == 0) at_seconds = atof(argv[++i]);
        else if (strcmp(argv[i], "--cost") == 0) {
            const char *v = argv[++i];
            if (strcmp(v, "recorded") == 0) recorded_cost = true;
            else if (strcmp(v, "race") == 0) recorded_cost = false;
            else die("--cost", "must be race or recorded");
        }
        else if (strcmp(argv[i], "--set-file") == 0 && nextra < 4) extra[nextra++] = argv[++i];
        else die(argv[i], "unknown option, or more than 4 --set-file (see --help)");
    }
    if (nseeds < 1 || nseeds > MAX_SEEDS) die("--seeds", "must be 1 to 64");
    if (batch < 1 || batch > MAX_BATCH) die("--batch", "must be 1 to 64");
    if (walkers < 1 || walkers > 16) die("--walkers", "must be 1 to 16");
    if (threads > MAX_BATCH) die("--threads", "must be 0 to 64");
    if (threads && recorded_cost) die("--threads", "models kerntune's race: not with --cost recorded");
    if (at_seconds < 0) die("--at-seconds", "must be positive");
    for (size_t k = 0; k < 4; k++) {
        set *s = &sets[nsets_all++];
        snprintf(s->kernel, sizeof s->kernel, "%s", hub_sets[k][0]);
        snprintf(s->gpu, sizeof s->gpu, "%s", hub_sets[k][1]);
        snprintf(s->label, sizeof s->label, "%s %s", s->kernel[0] == 'c' ? "convolution" : "dedispersion", s->gpu);
        snprintf(s->t4, sizeof s->t4, "%.800s/results/%.60s/%.60s_T4.json.gz", hub, s->kernel, s->gpu);
    }
    for (size_t k = 0; k < nextra; k++) {
        set *s = &sets[nsets_all++];
        const char *a = extra[k], *b = strchr(a, ':'), *c = b ? strchr(b + 1, ':') : NULL;
        if (c == NULL) die("--set-file", "expected KERNEL:GPU:T4");
        snprintf(s->kernel, sizeof s->kernel, "%.*s", (int)(b - a), a);
        snprintf(s->gpu, sizeof s->gpu, "%.*s", (int)(c - b - 1), b + 1);
        snprintf(s->label, sizeof s->label, "%s %s", s->kernel[0] == 'c' ? "convolution" : "dedispersion", s->gpu);
        snprintf(s->t4, sizeof s->t4, "%s", c + 1);
    }
    const char *strategies[MAX_STRATEGIES], *budget_text[MAX_BUDGETS], *set_names[MAX_SETS];
    size_t nstrat = split(strat_buf, strategies, MAX_STRATEGIES), nbudgets = split(budget_buf, budget_text, MAX_BUDGETS);
    size_t nsets = set_buf[0] ? split(set_buf, set_names, MAX_SETS) : 0;
    double budgets[MAX_BUDGETS];
    for (size_t b = 0; b < nbudgets; b++)
        if (!((budgets[b] = atof(budget_text[b])) > 0 && budgets[b] <= 100)) die("--budgets", "each a percentage in (0, 100]");
    static char kt_out[1200];
    if (run_kt) { /* Kernel Tuner's strategies, on the hub's sets, as many seeds */
        char sets_arg[300] = "", cmd[3000];
        for (size_t k = 0; k < 4; k++) {
            char shortname[80];
            snprintf(shortname, sizeof shortname, "%c-%s", sets[k].kernel[0], sets[k].gpu);
            bool wanted = nsets == 0;
            for (size_t q = 0; q < nsets; q++) wanted = wanted || strcmp(set_names[q], shortname) == 0;
            if (wanted) snprintf(sets_arg + strlen(sets_arg), sizeof sets_arg - strlen(sets_arg), "%s%s", sets_arg[0] ? "," : "", shortname);
        }
        snprintf(kt_out, sizeof kt_out, "%s/kt-traces.jsonl", KT_BINARY_DIR);
        snprintf(cmd, sizeof cmd, "python3 '%s/bench/kerneltuner.py' --hub '%s' --sets %s --seeds %zu --out '%s'", KT_SOURCE_DIR, hub,
                 sets_arg, nseeds, kt_out);
        fprintf(stderr, "search: %s\n", cmd);
        if (sets_arg[0] && system(cmd) != 0) die("--kerneltuner", "bench/kerneltuner.py failed (see above)");
        kt_path = kt_out;
    }
    setvbuf(stdout, NULL, _IOLBF, 0); /* each line as it comes: the runs take a while */
    FILE *tf = trace_path ? fopen(trace_path, "w") : NULL;
    if (trace_path && tf == NULL) die(trace_path, "cannot be written");
    double worst_auto5 = 0, worst_auto5_seed = 0, worst_margin = INFINITY;
    for (size_t si = 0; si < nsets_all; si++) {
        const set *st = &sets[si];
        char shortname[80];
        snprintf(shortname, sizeof shortname, "%c-%s", st->kernel[0], st->gpu);
        bool wanted = nsets == 0;
        for (size_t k = 0; k < nsets; k++) wanted = wanted || strcmp(set_names[k], shortname) == 0;
        if (!wanted) continue;
        space_data d = {0};
        load_set(hub, st, &d);
        double e0 = cutoff_evals(&d, CUTOFF_START), e1 = cutoff_evals(&d, CUTOFF_END);
        double t0 = e0 * d.median_cost, t1 = e1 * d.median_cost;
        if (t1 <= t0) t1 = t0 + d.median_cost;
        printf("\n%s: %zu configurations, %zu valid, best %.4f ms, median %.4f ms; an evaluation costs %.0f ms (median), %.0f ms "
               "(mean per evaluation); score over %.0f to %.0f s (random sampling's %.0f to %.0f evaluations)\n",
               st->label, d.n, d.nvalid, d.opt, d.median, d.median_cost, d.mean_cost, t0 / 1e3, t1 / 1e3, e0, e1);
        printf("  %-22s", "strategy");
        for (size_t b = 0; b < nbudgets; b++) printf("   %5.3g%%: median     p90", budgets[b]);
        printf("   score\n");
        double best_kt = -INFINITY, auto_score = NAN;
        /* the score's runs are told the budget random sampling needs for the window */
        size_t window = (size_t)ceil(t1 / fmax(d.mean_cost, 1e-9));
        if (window > d.n) window = d.n;
        for (size_t sj = 0; sj < nstrat; sj++) {
            static trace per[MAX_BUDGETS][MAX_SEEDS], runs[MAX_SEEDS];
            trace *per_budget[MAX_BUDGETS];
            for (size_t b = 0; b < nbudgets; b++) {
                per_budget[b] = per[b];
                size_t budget = (size_t)ceil(budgets[b] / 100 * (double)d.n);
                for (size_t seed = 0; seed < nseeds; seed++) run_one(&d, strategies[sj], seed + 1, budget, budget, 0, &per[b][seed], NULL, st->label);
            }
            for (size_t seed = 0; seed < nseeds; seed++) run_one(&d, strategies[sj], seed + 1, window, d.n, t1, &runs[seed], tf, st->label);
            if (at_seconds > 0) at_seconds_report(&d, strategies[sj], nseeds);
            double a5 = 0, a5max = 0, sc = row(&d, strategies[sj], per_budget, runs, nseeds, budgets, nbudgets, t0, t1, &a5, &a5max);
            printf("RESULT search_score_%s_%s_%s %.3f\n", st->kernel, st->gpu, strategies[sj], sc);
            if (strcmp(strategies[sj], "auto") == 0) {
                worst_margin = fmin(worst_margin, sc);
                worst_auto5 = fmax(worst_auto5, a5);
                worst_auto5_seed = fmax(worst_auto5_seed, a5max);
                auto_score = sc;
            }
            for (size_t r = 0; r < nseeds; r++) {
                free(runs[r].best), free(runs[r].time);
                for (size_t b = 0; b < nbudgets; b++) free(per[b][r].best), free(per[b][r].time);
            }
        }
        if (kt_path) {
            kt_runs *kt = calloc(MAX_STRATEGIES, sizeof *kt);
            if (kt == NULL) die("--kt", "out of memory");
            size_t nkt = load_kt(kt_path, &d, st->label, kt, MAX_STRATEGIES);
            for (size_t k = 0; k < nkt; k++) {
                double sc = row(&d, kt[k].strategy, NULL, kt[k].runs, kt[k].nruns, budgets, nbudgets, t0, t1, NULL, NULL);
                printf("RESULT search_score_%s_%s_%s %.3f\n", st->kernel, st->gpu, kt[k].strategy, sc);
                best_kt = fmax(best_kt, sc);
                size_t short_runs = 0;
                for (size_t r = 0; r < kt[k].nruns; r++) short_runs += kt[k].runs[r].time[kt[k].runs[r].n - 1] < t1;
                if (short_runs)
                    printf("  (%zu of %zu %s runs stopped before the window's end: their last best counts from then on)\n", short_runs,
                           kt[k].nruns, kt[k].strategy);
                for (size_t r = 0; r < kt[k].nruns; r++) free(kt[k].runs[r].best), free(kt[k].runs[r].time);
            }
            free(kt);
            if (nkt && !isnan(auto_score))
                printf("RESULT search_auto_minus_best_kerneltuner_%s_%s %.3f\n", st->kernel, st->gpu, auto_score - best_kt);
        }
        free_set(&d);
    }
    if (tf) fclose(tf);
    printf("\nRESULT search_auto_5pct_median_worst_set %.4f x (the target: at most 1.03)\n", worst_auto5);
    printf("RESULT search_auto_5pct_worst_seed %.4f x (the target: at most 1.10)\n", worst_auto5_seed);
    printf("RESULT search_auto_score_worst_set %.3f\n", worst_margin);
    return 0;
}
