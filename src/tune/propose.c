/*
 * propose.c - what a tuning measures next: the search strategies over the variant groups (one
 * kt_search per group, taking turns), units outside a search in spread order, within the
 * budget (units, or seconds: what the builds in flight and their screening would cost), built
 * lazily in batches or pipelined behind the engine by the background builder; what the engine
 * tells of each unit, back to its search.
 */
#include "tune/tuning.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- a search over the variant groups ----------------------------------------------------------- */

/* The searched group unit i belongs to, or NULL. */
static group_search *group_of(tuning *tu, size_t i) {
    for (size_t g = 0; g < tu->ngroups; g++)
        if (i >= tu->groups[g].first && i < tu->groups[g].first + tu->groups[g].n) return &tu->groups[g];
    return NULL;
}

/* Sets up a search over each variant group when the op's strategy (auto: for the budget of
 * units) is not exhaustive; otherwise the engine admits units in their order. */
kt_status kt__set_up_search(tuning *tu) {
    kt_op *op = tu->op;
    kt_decision *d = tu->d;
    const size_t n = d->nunits;
    size_t budget = op->budget.units;
    if (op->budget.fraction > 0) {
        double want = ceil(op->budget.fraction * (double)n);
        size_t part = want >= (double)n ? n : want < 1 ? 1 : (size_t)want;
        if (budget == 0 || part < budget) budget = part;
    }
    tu->budget = budget;
    if (d->rerace) return KT_OK; /* its finalists only: recall.c */
    size_t groups = 0;
    for (size_t c = 0; c < op->ncands; c++) groups += tu->cfgs[c].n > 0;
    if (groups == 0) return KT_OK;
    if ((tu->groups = calloc(groups, sizeof *tu->groups)) == NULL)
        return kt__err(KT_ERR_NO_MEMORY, "%s(op '%s'): out of memory", d->where, op->name);
    for (size_t c = 0, u = 0; c < op->ncands; c++) {
        while (u < n && d->units[u].cand != c) u++;
        if (tu->cfgs[c].n == 0 || u == n) continue;
        const char *strategy = op->strategy[0] ? op->strategy : "auto";
        /* a budget of seconds alone may end long before the space does: auto searches then
         * (as for a budget of units short of the space), never walks the space in order */
        if (strcmp(strategy, "auto") == 0 && budget == 0 && op->budget.seconds > 0 && tu->cfgs[c].n > 1)
            strategy = kt__strategy_auto(tu->cfgs[c].n, 0, tu->cfgs[c].n - 1)->name; /* what it picks short of the space */
        kt_search *s = NULL;
        char where[160];
        snprintf(where, sizeof where, "%s(op '%s'): the search over '%s'", d->where, op->name, op->cands[c].name);
        kt_status st = kt__search_new(op->cands[c].space, &tu->cfgs[c], strategy, op->search_seed, budget ? budget : n, where, &s);
        if (st != KT_OK) return st;
        if (strcmp(kt_search_strategy(s), "exhaustive") == 0) { /* in order: as the engine goes anyway */
            kt_search_destroy(s);
            continue;
        }
        tu->groups[tu->ngroups++] = (group_search){.cand = c, .first = u, .n = tu->cfgs[c].n, .s = s};
        kt__log(op->ctx, KT_LOG_INFO, "op '%s': searching the %zu configurations of '%s' by %s (budget %zu units of %zu)", op->name,
                tu->cfgs[c].n, op->cands[c].name, kt_search_strategy(s), budget ? budget : n, n);
    }
    return KT_OK;
}

static bool budget_left(const tuning *tu) { return tu->budget == 0 || tu->evaluations < tu->budget; }

static size_t propose_units(tuning *tu, size_t *units, size_t max);

/* The engine's next units, within the budget of units: first those outside a search (natives,
 * unsearched groups) in their order, then each search's proposals in turn, built now when they
 * are built lazily. A proposal the tuning can say something of without running it (a limit or
 * requirement rejected it, it failed to build now or in a recorded tuning, the persistent cache
 * knows its time) is told at once; each counts as an evaluation. */
/* Of units (k) just built, those the engine can run (the rest failed to build: told to their
 * search as failures); their count, kept in order at the front. Notes the hand-over time. */
static size_t keep_runnable(tuning *tu, size_t *units, size_t k) {
    size_t kept = 0;
    for (size_t j = 0; j < k; j++) {
        size_t i = units[j];
        if (tu->acc[i]) {
            units[kept++] = i;
            continue;
        }
        group_search *g = group_of(tu, i); /* it failed to build */
        if (g) {
            g->outstanding--;
            kt_search_tell(g->s, i - g->first, INFINITY);
        }
        kt__persist_progress(tu->op, tu->d, i, INFINITY); /* kept even if this tuning never ends */
        if (tu->op->ctx->unit_fn) tu->op->ctx->unit_fn(tu->d, i, tu->op->ctx->unit_user);
    }
    if (kept > 0) {
        tu->handed_s = kt__budget_now(tu);
        tu->handed = kept;
    }
    return kept;
}

/* Whether one more unit may go to the builder under a budget of seconds: what the builds and
 * screenings so far say it would finish by fits in what is left (after the inflight ones, threads
 * at a time, at the median build time; then its own build and its screening); always before the
 * tuning can decide. Its own build counts at the median on the wall clock: a build still running
 * at the deadline is not waited for (the backends that can stop one, a CUDA compile in its NVRTC
 * process or the C compiler, are told to), so a unit proposed late costs a build thread's time and
 * nothing else. At the 90th percentile, as before, the tuning of Kernel Tuner's CUDA convolution
 * on the H200 (1.4 s a build where its tiles are small, 7.8 s where they are large) stopped
 * proposing with 13 of its 40 s left and ended at 26.7 s. A budget clock of the context's own (a
 * replay's) counts each build in full, one after another, and would count one cut short as spent:
 * there it is the 90th percentile. Times are on the budget clock (kt__budget_now). */
static bool fits_in_budget(const tuning *tu, size_t inflight) {
    const kt_op *op = tu->op;
    if (op->budget.seconds <= 0 || !tu->any_valid) return true;
    const bool replay = op->ctx->budget_clock != NULL;
    double median_s = kt__builder_quantile_ms(tu->builder, 0.5) / 1e3;
    double own_s = replay ? kt__builder_quantile_ms(tu->builder, 0.9) / 1e3 : median_s;
    double per_unit = tu->screened ? tu->screen_s / (double)tu->screened : 0;
    double left = op->budget.seconds - (kt__budget_now(tu) - tu->start_s);
    size_t lanes = replay ? 1 : tu->threads; /* builds in flight finish threads at a time on the wall clock */
    return (double)(inflight / lanes) * median_s + own_s + (double)(inflight + 1) * per_unit <= left;
}

/* Pipelined: keeps the build threads busy with the search's proposals, and hands the engine
 * units in the order they were proposed, each once its build is done, so that the next
 * configurations compile while the engine measures these. Twice as many units as threads are
 * submitted and not taken at any time (a slow build at the head of the line leaves the threads
 * the others to build), and the search proposes only to refill that window after a unit was
 * taken: what the search is told, and when, depends on nothing but the results, never on which
 * build ends first. A tuning on such a device is as repeatable as one built in batches, and a
 * fleet's (cli/fleet.c), whose builds are jobs on other machines, gives a local replay's T4.
 * Under a budget of wall seconds (no budget clock) units are handed over as their builds end
 * instead: that tuning's outcome depends on timing anyway, and on the H200 the convolution's
 * slow builds (5-8 s against a median of 1-3) held back a dozen built units at a time. */
/* Gives the builder the search's proposals until the window is full (what needs no build waits
 * in tu->direct). */
static kt_status top_up(tuning *tu) {
    kt_status st = KT_OK;
    size_t inflight = kt__builder_pending(tu->builder), window = 2 * tu->threads;
    while (st == KT_OK && inflight < window && tu->ndirect < 48) {
        size_t got[16], want = window - inflight < 16 ? window - inflight : 16;
        while (want > 0 && !fits_in_budget(tu, inflight + want - 1)) want--; /* each unit of the batch must fit */
        if (want == 0) break;
        size_t k = propose_units(tu, got, want);
        if (k == 0) break;
        for (size_t j = 0; j < k && st == KT_OK; j++)
            if (!kt__unit_planned(tu->plans, got[j])) tu->direct[tu->ndirect++] = got[j]; /* built or native */
            else st = kt__builder_submit(tu->builder, &got[j], 1);
        inflight = kt__builder_pending(tu->builder);
    }
    return st;
}

static size_t next_pipelined(tuning *tu, size_t *units, size_t max) {
    for (;;) {
        kt_status st = top_up(tu);
        size_t k = 0;
        if (st == KT_OK && tu->ndirect > 0) { /* what needs no build goes first */
            k = tu->ndirect < max ? tu->ndirect : max;
            memcpy(units, tu->direct, k * sizeof *units);
            memmove(tu->direct, tu->direct + k, (tu->ndirect - k) * sizeof *tu->direct);
            tu->ndirect -= k;
        } else if (st == KT_OK) {
            /* under a budget of wall seconds, time is what counts: units are taken as their
             * builds end (in proposal order, one slow build would hold back every unit built
             * after it, and with them the search's next proposals), and not waited for past
             * the deadline once the tuning can decide */
            k = kt__builder_take(tu->builder, units, max, true, !kt__wall_budget(tu->op), kt__build_deadline(tu), &st);
        }
        /* the threads those freed build the next proposals while the engine measures these */
        if (st == KT_OK && k > 0) st = top_up(tu);
        if (st == KT_OK) st = kt__prepare_built(tu, units, k);
        if (st != KT_OK) {
            tu->next_error = st;
            return 0;
        }
        if (k == 0) return 0; /* nothing building, nothing proposed: the search is over */
        if ((k = keep_runnable(tu, units, k)) > 0) return k;
    }
}

size_t kt__tuning_next(void *p, size_t *units, size_t max) {
    tuning *tu = p;
    const kt_op *op = tu->op;
    const size_t threads = tu->threads;
    if (tu->handed > 0) { /* the engine screened the last batch meanwhile */
        tu->screen_s += kt__budget_now(tu) - tu->handed_s;
        tu->screened += tu->handed;
        tu->handed = 0;
    }
    if (tu->builder) return next_pipelined(tu, units, max);
    for (;;) {
        /* building lazily: a batch as large as the build threads, so that they all work; under a
         * budget of seconds, no larger than what the batches so far say fits in what is left
         * (nothing more, once the tuning can decide) */
        size_t want = tu->plans && threads < max ? threads : max;
        if (tu->plans && op->budget.seconds > 0 && tu->waves > 0) {
            double left = op->budget.seconds - (kt__budget_now(tu) - tu->start_s), wave = tu->build_s / (double)tu->waves;
            double per_unit = tu->screened ? tu->screen_s / (double)tu->screened : 0;
            while (want > 0 && (double)((want + threads - 1) / threads) * wave + (double)want * per_unit > left) want--;
            if (want == 0 && tu->any_valid) return 0;
            if (want == 0) want = 1;
        }
        size_t k = propose_units(tu, units, want);
        if (k == 0 || tu->plans == NULL) return k;
        double t0 = kt__budget_now(tu);
        kt_status st = kt__build_admitted(tu, units, k);
        tu->build_s += kt__budget_now(tu) - t0;
        tu->waves += (k + threads - 1) / threads;
        if (st != KT_OK) {
            tu->next_error = st;
            return 0;
        }
        if ((k = keep_runnable(tu, units, k)) > 0) return k;
    }
}

/* Units outside a search are admitted in order, unless the tuning stops on disagreement
 * (kt_op_set_disagreement_stop) and walks a whole space ten times larger than that stop's
 * minimum: then in spread order, the counter's bits reversed (units past the end skipped), which
 * visits both halves of the units, then every quarter, and so on. Enumeration varies the last
 * parameter kt__fastest, so in order the first hundred configurations can share the first
 * parameters' values, and a parameter among those that changes what the kernel computes would
 * show (and stop the tuning) only late; spread, it shows among the first. The order of the
 * whole walk is all it changes. */
void kt__set_spread(tuning *tu) {
    const kt_op *op = tu->op;
    size_t n = tu->d->nunits;
    tu->spread_bits = 0;
    if (op->disagree_min == 0 || !op->validate || tu->budget != 0 || n <= 10 * op->disagree_min) return;
    unsigned bits = 1;
    while (bits < 62 && ((size_t)1 << bits) < n) bits++;
    tu->spread_bits = bits;
}

/* The unit at position k of the walk outside a search: k itself, or its bits reversed. */
static size_t spread_unit(const tuning *tu, size_t k) {
    if (tu->spread_bits == 0) return k;
    size_t r = 0;
    for (unsigned b = 0; b < tu->spread_bits; b++, k >>= 1) r = r << 1 | (k & 1);
    return r;
}

static size_t propose_units(tuning *tu, size_t *units, size_t max) {
    kt_decision *d = tu->d;
    size_t k = 0;
    long r = tu->ref->unit;
    group_search *rg = r >= 0 && !tu->ref_taken ? group_of(tu, (size_t)r) : NULL;
    tu->ref_taken = true;
    if (rg && tu->acc[r] && budget_left(tu) && kt__search_take(rg->s, (size_t)r - rg->first)) {
        units[k++] = (size_t)r; /* the reference ran already: the search's first evaluation */
        tu->evaluations++;
        rg->outstanding++;
        return k;
    }
    size_t walk = tu->spread_bits ? (size_t)1 << tu->spread_bits : d->nunits;
    while (k < max && tu->plain < walk && budget_left(tu)) {
        size_t i = spread_unit(tu, tu->plain++);
        if (i >= d->nunits || !tu->acc[i] || group_of(tu, i) != NULL) continue;
        units[k++] = i;
        tu->evaluations++;
    }
    if (k > 0) return k;
    for (size_t idle = 0; k == 0 && idle < tu->ngroups && budget_left(tu);) {
        group_search *g = &tu->groups[tu->turn++ % tu->ngroups];
        size_t cfg[16], want = max < 16 ? max : 16;
        if (tu->budget && tu->budget - tu->evaluations < want) want = tu->budget - tu->evaluations;
        size_t m = g->done ? 0 : kt_search_propose(g->s, cfg, want);
        if (m == 0) { /* over, unless it waits for what it proposed (building, or measured now) */
            if (g->outstanding == 0) g->done = true;
            idle++;
            continue;
        }
        idle = 0;
        for (size_t j = 0; j < m; j++) {
            size_t i = g->first + cfg[j];
            const kt__unit *u = &d->units[i];
            tu->evaluations++;
            if (tu->acc[i]) {
                units[k++] = i;
                g->outstanding++;
                continue;
            }
            double told = u->recalled && u->r.time_ns > 0 ? u->r.time_ns : INFINITY;
            kt_search_tell(g->s, cfg[j], told);
        }
    }
    return k;
}

void kt__tuning_told(void *p, size_t i, double ns) {
    tuning *tu = p;
    if (isfinite(ns)) tu->any_valid = true;
    kt__persist_progress(tu->op, tu->d, i, ns); /* kept even if this tuning never ends */
    if (tu->op->ctx->unit_fn) tu->op->ctx->unit_fn(tu->d, i, tu->op->ctx->unit_user);
    group_search *g = group_of(tu, i);
    if (g) {
        g->outstanding -= g->outstanding > 0;
        kt_search_tell(g->s, i - g->first, ns);
    }
}

void kt__free_search(tuning *tu) {
    for (size_t g = 0; g < tu->ngroups; g++) kt_search_destroy(tu->groups[g].s);
    free(tu->groups);
    for (size_t c = 0; tu->cfgs && c < tu->op->ncands; c++) kt__configs_free(&tu->cfgs[c]);
    free(tu->cfgs);
    kt__plans_free(tu->plans);
}

