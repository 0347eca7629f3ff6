/*
 * search.c - kerntune's search strategies side by side on recorded spaces (issue [12]).
 *
 * For each replay set of ../shared/benchmark_hub (the convolution and the dedispersion, each
 * recorded exhaustively on an RTX A4000 and a Radeon Pro W6600), the problem's space is built
 * from its T1 file and every configuration's recorded result is looked up in the T4 file. Each
 * strategy then runs, through kerntune/search.h, for budgets of 1%, 2%, 5% and 10% of the space
 * and for 20 seeds, proposing one configuration at a time and being told its recorded mean (or
 * that it is invalid). Each evaluation costs, in simulated time, what it cost when it was
 * recorded: compiling it, the framework's share and its runs.
 *
 * Reported per set and strategy: the median and the 90th percentile over seeds of chosen / best
 * (the best recorded mean the strategy found within the budget, over the best recorded mean of
 * the whole space) at each budget; and the performance score of the autotuning methodology
 * (Willemsen et al.: the `autotuning-methodology` package): P(t) = (f_s(t) - f_rand(t)) /
 * (f_opt - f_rand(t)), where f_s(t) is the mean over seeds of the best found by simulated time t
 * (the space's median before anything valid), f_rand(t) the best that random sampling without
 * replacement is expected to find in the t / (median evaluation time) evaluations it affords
 * (by order statistics: the value at index round(k (N + 1) / (k + 1)) of the N valid values
 * sorted from worst to best), averaged over 50 equidistant t from the time random sampling needs
 * to reach the 1st percentile cut-off to the time it needs for the 96th, where the q-th cut-off
 * is f_opt + (median - f_opt) (1 - q). 1 is the optimum everywhere, 0 random sampling, below 0
 * worse than it. Runs longer than the cut-off time for the score are given budgets to reach it.
 *
 * usage: search [--hub DIR] [--seeds N] [--strategies a,b,...] [--sets c-A4000,...] [--budgets 1,2,5,10]
 *               [--trace FILE (every evaluation of every run, as JSON lines)]
 */
#define _GNU_SOURCE
#include <kerntune.h>
#include <kerntune/search.h>
#include <kerntune/variants.h>

#include "../cli/t4.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_STRATEGIES = 16, MAX_BUDGETS = 8, MAX_SEEDS = 64, GRID = 50 };

typedef struct set {
    const char *kernel, *gpu, *label;
} set;

static const set all_sets[] = {{"convolution_milo", "A4000", "convolution A4000"},
                               {"convolution_milo", "W6600", "convolution W6600"},
                               {"dedispersion_milo", "A4000", "dedispersion A4000"},
                               {"dedispersion_milo", "W6600", "dedispersion W6600"}};

/* A recorded space: per configuration of the enumeration, its objective (recorded mean in ms,
 * INFINITY when invalid) and what evaluating it cost (ms). */
typedef struct space_data {
    kt_space *sp;
    size_t n;
    double *value, *cost;
    double opt, median, median_cost;
    double *valid_sorted; /* the valid values, worst first */
    size_t nvalid;
} space_data;

static void die(const char *what, const char *detail) {
    fprintf(stderr, "search: %s: %s\n", what, detail ? detail : "");
    exit(1);
}

static int cmp_desc(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

static int cmp_asc(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static bool load_set(const char *hub, const set *s, space_data *d) {
    char path[1024];
    snprintf(path, sizeof path, "%s/kernels/%s.json", hub, s->kernel);
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (root == NULL) die(path, jerr.text);
    json_t *cs = json_object_get(root, "ConfigurationSpace"), *p;
    size_t i;
    const char *names[64];
    size_t nnames = 0;
    if (kt_space_create(&d->sp) != KT_OK) die("kt_space_create", kt_last_error());
    json_array_foreach(json_object_get(cs, "TuningParameters"), i, p) {
        names[nnames++] = json_string_value(json_object_get(p, "Name"));
        if (kt_space_add_param(d->sp, names[nnames - 1], json_string_value(json_object_get(p, "Values"))) != KT_OK)
            die(path, kt_last_error());
    }
    json_array_foreach(json_object_get(cs, "Conditions"), i, p) {
        if (kt_space_add_constraint(d->sp, json_string_value(json_object_get(p, "Expression"))) != KT_OK) die(path, kt_last_error());
    }
    if (kt_space_enumerate(d->sp, &d->n) != KT_OK) die(path, kt_last_error());
    snprintf(path, sizeof path, "%s/results/%s/%s_T4.json.gz", hub, s->kernel, s->gpu);
    t4_records recs;
    char *err = NULL;
    if (!t4_read(path, names, nnames, &recs, &err)) die(path, err);
    d->value = malloc(d->n * sizeof *d->value);
    d->cost = malloc(d->n * sizeof *d->cost);
    d->valid_sorted = malloc(d->n * sizeof *d->valid_sorted);
    double *costs = malloc(d->n * sizeof *costs);
    d->opt = INFINITY, d->nvalid = 0;
    size_t missing = 0;
    for (size_t c = 0; c < d->n; c++) {
        char key[4096];
        if (kt_space_config_format(d->sp, c, key, sizeof key) != KT_OK) die("kt_space_config_format", kt_last_error());
        t4_record probe = {.key = key}, *r = bsearch(&probe, recs.recs, recs.n, sizeof *recs.recs, t4_compare);
        d->value[c] = INFINITY, d->cost[c] = 0;
        if (r == NULL) {
            missing++;
            continue;
        }
        double runs = 0;
        for (size_t k = 0; k < r->nruntimes; k++) runs += r->runtimes[k];
        d->cost[c] = (fmax(r->compile_ns, 0) + fmax(r->framework_ns, 0) + runs) / 1e6;
        if (strcmp(r->invalidity, "correct") == 0 && r->mean_ms > 0) {
            d->value[c] = r->mean_ms;
            d->valid_sorted[d->nvalid++] = r->mean_ms;
            d->opt = fmin(d->opt, r->mean_ms);
        }
        costs[c] = d->cost[c];
    }
    if (missing) fprintf(stderr, "search: %s: %zu configurations of the space have no record: invalid\n", s->label, missing);
    qsort(d->valid_sorted, d->nvalid, sizeof *d->valid_sorted, cmp_desc);
    d->median = d->valid_sorted[d->nvalid / 2];
    qsort(costs, d->n, sizeof *costs, cmp_asc);
    d->median_cost = costs[d->n / 2];
    free(costs);
    t4_free(&recs);
    free(err);
    json_decref(root);
    return true;
}

/* One run: the best found after each evaluation, and the simulated time then. */
typedef struct trace {
    double *best, *time;
    size_t n;
} trace;

static void run_one(const space_data *d, const char *strategy, uint64_t seed, size_t budget, trace *t, FILE *tf, const char *label) {
    kt_search *s = NULL;
    if (kt_search_create(d->sp, strategy, seed, budget, &s) != KT_OK) die(strategy, kt_last_error());
    t->best = malloc(budget * sizeof *t->best);
    t->time = malloc(budget * sizeof *t->time);
    t->n = 0;
    double best = INFINITY, now = 0;
    if (tf) fprintf(tf, "{\"set\": \"%s\", \"strategy\": \"%s\", \"seed\": %llu, \"evaluations\": [", label, strategy, (unsigned long long)seed);
    while (t->n < budget) {
        size_t c;
        if (kt_search_propose(s, &c, 1) != 1) break;
        now += d->cost[c];
        best = fmin(best, d->value[c]);
        kt_search_tell(s, c, d->value[c]);
        t->best[t->n] = best, t->time[t->n] = now;
        if (tf) fprintf(tf, "%s[%zu, %.17g, %.17g]", t->n ? ", " : "", c, isfinite(d->value[c]) ? d->value[c] : -1.0, d->cost[c]);
        t->n++;
    }
    if (tf) fprintf(tf, "]}\n");
    kt_search_destroy(s);
}

/* Evaluations random sampling needs to reach cut-off q: the least k whose expected best is
 * within f_opt + (median - f_opt) (1 - q). */
static size_t random_evals_to(const space_data *d, double q) {
    double target = d->opt + (d->median - d->opt) * (1 - q);
    const size_t N = d->nvalid;
    for (size_t k = 1; k <= N; k++) {
        size_t idx = (size_t)llround((double)k * (double)(N + 1) / (double)(k + 1));
        if (idx > N - 1) idx = N - 1;
        if (d->valid_sorted[idx] <= target) return k;
    }
    return N;
}

static double random_expected(const space_data *d, double t) {
    const size_t N = d->nvalid;
    double kf = t / d->median_cost;
    size_t k = kf < 1 ? 1 : (size_t)llround(kf);
    size_t idx = (size_t)llround((double)k * (double)(N + 1) / (double)(k + 1));
    return d->valid_sorted[idx > N - 1 ? N - 1 : idx];
}

/* The best a run had found by time t: the space's median before its first valid result. */
static double best_at(const space_data *d, const trace *t, double at) {
    double b = d->median;
    for (size_t i = 0; i < t->n && t->time[i] <= at; i++)
        if (isfinite(t->best[i])) b = fmin(d->median, t->best[i]);
    return b;
}

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

int main(int argc, char **argv) {
    const char *hub = "../shared/benchmark_hub", *trace_path = NULL;
    size_t nseeds = 20;
    char strat_buf[512] = "random,local,anneal,genetic,model,auto", set_buf[256] = "", budget_buf[128] = "1,2,5,10";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: search [--hub DIR] [--seeds N] [--strategies a,b,...] [--sets c-A4000,c-W6600,d-A4000,d-W6600]\n"
                   "              [--budgets 1,2,5,10] [--trace FILE]\n"
                   "Runs kerntune's search strategies on the recorded spaces of benchmark_hub: chosen/best at each budget\n"
                   "(percent of the space) over seeds, and the autotuning methodology's performance score.\n");
            return 0;
        }
        if (i + 1 >= argc) die(argv[i], "needs a value (see --help)");
        if (strcmp(argv[i], "--hub") == 0) hub = argv[++i];
        else if (strcmp(argv[i], "--seeds") == 0) nseeds = (size_t)atoi(argv[++i]);
        else if (strcmp(argv[i], "--strategies") == 0) snprintf(strat_buf, sizeof strat_buf, "%s", argv[++i]);
        else if (strcmp(argv[i], "--sets") == 0) snprintf(set_buf, sizeof set_buf, "%s", argv[++i]);
        else if (strcmp(argv[i], "--budgets") == 0) snprintf(budget_buf, sizeof budget_buf, "%s", argv[++i]);
        else if (strcmp(argv[i], "--trace") == 0) trace_path = argv[++i];
        else die(argv[i], "unknown option (see --help)");
    }
    if (nseeds < 1 || nseeds > MAX_SEEDS) die("--seeds", "must be 1 to 64");
    const char *strategies[MAX_STRATEGIES], *budget_text[MAX_BUDGETS], *set_names[8];
    size_t nstrat = split(strat_buf, strategies, MAX_STRATEGIES), nbudgets = split(budget_buf, budget_text, MAX_BUDGETS);
    size_t nsets = set_buf[0] ? split(set_buf, set_names, 8) : 0;
    double budgets[MAX_BUDGETS];
    for (size_t b = 0; b < nbudgets; b++)
        if (!((budgets[b] = atof(budget_text[b])) > 0 && budgets[b] <= 100)) die("--budgets", "each a percentage in (0, 100]");
    FILE *tf = trace_path ? fopen(trace_path, "w") : NULL;
    if (trace_path && tf == NULL) die(trace_path, "cannot be written");
    double worst_auto5 = 0, worst_margin = INFINITY;
    for (size_t si = 0; si < sizeof all_sets / sizeof all_sets[0]; si++) {
        const set *st = &all_sets[si];
        bool wanted = nsets == 0;
        for (size_t k = 0; k < nsets; k++) {
            char shortname[64];
            snprintf(shortname, sizeof shortname, "%c-%s", st->kernel[0], st->gpu);
            wanted = wanted || strcmp(set_names[k], shortname) == 0;
        }
        if (!wanted) continue;
        space_data d = {0};
        load_set(hub, st, &d);
        size_t k0 = random_evals_to(&d, 0.01), k1 = random_evals_to(&d, 0.96);
        if (k1 <= k0) k1 = k0 + 2;
        double t0 = (double)k0 * d.median_cost, t1 = (double)k1 * d.median_cost;
        printf("\n%s: %zu configurations, %zu valid, best %.4f ms, median %.4f ms, median evaluation %.0f ms; score over %.0f to %.0f s "
               "(random needs %zu to %zu evaluations)\n",
               st->label, d.n, d.nvalid, d.opt, d.median, d.median_cost, t0 / 1e3, t1 / 1e3, k0, k1);
        printf("  %-10s", "strategy");
        for (size_t b = 0; b < nbudgets; b++) printf("   %5.3g%%: median   p90", budgets[b]);
        printf("   score\n");
        for (size_t sj = 0; sj < nstrat; sj++) {
            printf("  %-10s", strategies[sj]);
            for (size_t b = 0; b < nbudgets; b++) {
                size_t budget = (size_t)ceil(budgets[b] / 100 * (double)d.n);
                double ratios[MAX_SEEDS];
                for (size_t seed = 0; seed < nseeds; seed++) {
                    trace t;
                    run_one(&d, strategies[sj], seed + 1, budget, &t, NULL, st->label);
                    ratios[seed] = t.n ? t.best[t.n - 1] / d.opt : INFINITY;
                    free(t.best), free(t.time);
                }
                double med = quantile(ratios, nseeds, 0.5), p90 = quantile(ratios, nseeds, 0.9);
                printf("   %13.4f %6.4f", med, p90);
                if (strcmp(strategies[sj], "auto") == 0 && budgets[b] == 5) worst_auto5 = fmax(worst_auto5, med);
            }
            /* the score: runs long enough to reach the cut-off time */
            size_t budget = d.n;
            double mean_best[GRID] = {0};
            for (size_t seed = 0; seed < nseeds; seed++) {
                trace t;
                size_t need = (size_t)ceil(t1 / fmax(d.median_cost, 1e-9) * 3);
                run_one(&d, strategies[sj], 1000 + seed, need < budget ? need : budget, &t, tf, st->label);
                for (int g = 0; g < GRID; g++) mean_best[g] += best_at(&d, &t, t0 + (t1 - t0) * g / (GRID - 1)) / (double)nseeds;
                free(t.best), free(t.time);
            }
            double score = 0;
            for (int g = 0; g < GRID; g++) {
                double at = t0 + (t1 - t0) * g / (GRID - 1), fr = random_expected(&d, at);
                score += (mean_best[g] - fr) / (d.opt - fr) / GRID;
            }
            printf("   %6.3f\n", score);
            printf("RESULT search_score_%s_%s_%s %.3f\n", st->kernel, st->gpu, strategies[sj], score);
            if (strcmp(strategies[sj], "auto") == 0) worst_margin = fmin(worst_margin, score);
        }
        kt_space_destroy(d.sp);
        free(d.value), free(d.cost), free(d.valid_sorted);
    }
    if (tf) fclose(tf);
    printf("\nRESULT search_auto_5pct_median_worst_set %.4f x (the target: at most 1.03)\n", worst_auto5);
    printf("RESULT search_auto_score_worst_set %.3f\n", worst_margin);
    return 0;
}
