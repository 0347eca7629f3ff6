/*
 * decision.c - freeing what a decision holds, and how its units failed.
 */
#include "op/op.h"

#include <stdlib.h>
#include <string.h>

void kt_result_release(kt_result *r) {
    if (r == NULL) return;
    if (r->release != NULL && r->ptr != NULL) r->release(r->ptr, r->release_user);
    memset(r, 0, sizeof *r);
}

/* Frees what a unit's launch holds for per-call sizes. */
void kt__launch_free_slots(kt__launch *l) {
    free(l->slots);
    l->slots = NULL;
    free(l->sizes);
    l->sizes = NULL;
    kt__arena_free(&l->slots_arena);
}

static void free_units(kt_decision *d) {
    for (size_t i = 0; i < d->nunits; i++) {
        kt__launch_free_slots(&d->units[i].launch);
        free(d->units[i].text);
        free(d->units[i].artifact);
        free(d->units[i].r.message);
        free(d->units[i].r.times);
    }
    free(d->units);
    d->units = NULL;
    d->nunits = 0;
}

void kt__decision_reset(kt_decision *d) {
    free_units(d);
    free(d->fail_msg);
    d->fail_msg = NULL;
    free(d->cache_rejected); /* what the persistent cache said (tune/recall.c) */
    d->cache_rejected = NULL;
    free(d->borrowed_device); /* whose decision a rule took (tune/fallback.c) */
    d->borrowed_device = NULL;
    d->borrowed_len = 0;
    d->rerace = false;
    d->requested_confidence = 0;
    d->validated = false;
    d->ref_unit1 = d->ref_agree = d->ref_among = 0;
    d->peak_extra = 0;
    d->confidence = 0;
    d->total_runs = 0;
    d->measure_ns = 0;
    free(d->build_spans);
    d->build_spans = NULL;
    d->nbuild_spans = 0;
    d->build_end_s = 0;
}

void kt__decision_free(kt_decision *d) {
    if (d == NULL) return;
    kt__decision_reset(d);
    free(d);
}

/* ---- the public accessors ---------------------------------------------------------------- */

size_t kt_decision_winner(const kt_decision *d) { return d ? d->winner : 0; }
kt_decision_source kt_decision_source_of(const kt_decision *d) { return d ? d->source : 0; }

const char *kt_decision_source_name(kt_decision_source source) {
    static const char *const names[] = {NULL, "measured", "default", "forced", "cache", "nearest key", "same architecture", "same vendor", "table", "remote"};
    return (int)source >= 1 && (size_t)source < sizeof names / sizeof names[0] ? names[source] : NULL;
}

const char *kt_decision_borrowed_device(const kt_decision *d) { return d ? d->borrowed_device : NULL; }

size_t kt_decision_borrowed_key(const kt_decision *d, int64_t *out, size_t max) {
    if (d == NULL || d->borrowed_device == NULL) return 0;
    for (size_t i = 0; out && i < d->borrowed_len && i < max; i++) out[i] = d->borrowed_key[i];
    return d->borrowed_len;
}
size_t kt_decision_key_len(const kt_decision *d) { return d ? d->nuser : 0; }
int64_t kt_decision_key(const kt_decision *d, size_t index) { return (d && index < d->nuser) ? d->key[index] : 0; }
int kt_decision_validated(const kt_decision *d) { return d ? d->validated : 0; }
long kt_decision_reference_unit(const kt_decision *d) { return d && d->ref_unit1 ? (long)d->ref_unit1 - 1 : -1; }
size_t kt_decision_reference_consensus(const kt_decision *d, size_t *among) {
    if (among) *among = d ? d->ref_among : 0;
    return d ? d->ref_agree : 0;
}
size_t kt_decision_peak_extra_bytes(const kt_decision *d) { return d ? d->peak_extra : 0; }

/* The unit that speaks for candidate c: the winner when c won, else c's fastest measured
 * unit, else its first; NULL when the decision did not consider c. */
static const kt__unit *cand_unit(const kt_decision *d, size_t c) {
    if (d == NULL || c >= d->ncand || d->units == NULL) return NULL;
    if (d->winner == c && d->winner_unit < d->nunits && d->units[d->winner_unit].cand == c) return &d->units[d->winner_unit];
    const kt__unit *first = NULL, *best = NULL;
    for (size_t i = 0; i < d->nunits; i++) {
        const kt__unit *u = &d->units[i];
        if (u->cand != c) continue;
        if (first == NULL) first = u;
        if (u->r.outcome == KT_OUTCOME_MEASURED && (best == NULL || u->r.time_ns < best->r.time_ns)) best = u;
    }
    return best ? best : first;
}

kt_outcome kt_decision_outcome(const kt_decision *d, size_t c) {
    const kt__unit *u = cand_unit(d, c);
    return u ? u->r.outcome : KT_OUTCOME_NOT_RUN;
}
double kt_decision_time_ns(const kt_decision *d, size_t c) {
    const kt__unit *u = cand_unit(d, c);
    return u ? u->r.time_ns : -1;
}
unsigned kt_decision_runs(const kt_decision *d, size_t c) {
    const kt__unit *u = cand_unit(d, c);
    return u ? u->r.runs : 0;
}
int kt_decision_fail_code(const kt_decision *d, size_t c) {
    const kt__unit *u = cand_unit(d, c);
    return u ? u->r.fail_code : 0;
}
const char *kt_decision_message(const kt_decision *d, size_t c) {
    const kt__unit *u = cand_unit(d, c);
    return u ? u->r.message : NULL;
}

size_t kt_decision_unit_count(const kt_decision *d) { return d ? d->nunits : 0; }

kt_status kt_decision_unit_runtimes(const kt_decision *d, size_t u, const double **times, size_t *n) {
    if (times == NULL || n == NULL) return kt__err(KT_ERR_NULL, "kt_decision_unit_runtimes: %s is NULL", times ? "n" : "times");
    *times = NULL;
    *n = 0;
    if (d == NULL || u >= d->nunits || d->units[u].r.times == NULL || d->units[u].r.runs == 0)
        return kt__err(KT_ERR_NOT_FOUND, "kt_decision_unit_runtimes: unit %zu has no measured runs", u);
    *times = d->units[u].r.times;
    *n = d->units[u].r.runs;
    return KT_OK;
}

double kt_decision_unit_flops(const kt_decision *d, size_t u) {
    return (d && u < d->nunits && d->units[u].r.work_set) ? d->units[u].r.flops : -1;
}

double kt_decision_unit_bytes(const kt_decision *d, size_t u) {
    return (d && u < d->nunits && d->units[u].r.work_set) ? d->units[u].r.bytes : -1;
}

kt_status kt_decision_unit_resources(const kt_decision *d, size_t u, int *registers, int *shared_bytes, int *local_bytes) {
    if (registers == NULL || shared_bytes == NULL || local_bytes == NULL)
        return kt__err(KT_ERR_NULL, "kt_decision_unit_resources: an output is NULL");
    *registers = *shared_bytes = *local_bytes = -1;
    if (d == NULL || u >= d->nunits) return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_decision_unit_resources: no unit %zu", u);
    const kt__cand_result *r = &d->units[u].r;
    if (!r->resources_set) return kt__err(KT_ERR_NOT_FOUND, "kt_decision_unit_resources: unit %zu: its backend told nothing of its kernel (or it was not built here)", u);
    *registers = r->registers, *shared_bytes = r->shared_bytes, *local_bytes = r->local_bytes;
    return KT_OK;
}

double kt_decision_unit_build_ms(const kt_decision *d, size_t u) { return (d && u < d->nunits) ? d->units[u].r.build_ms : 0; }
double kt_decision_unit_validation_ms(const kt_decision *d, size_t u) {
    return (d && u < d->nunits) ? d->units[u].r.validate_ns / 1e6 : 0;
}
double kt_decision_unit_framework_ms(const kt_decision *d, size_t u) {
    return (d && u < d->nunits) ? d->units[u].r.framework_ns / 1e6 : 0;
}
size_t kt_decision_winner_unit(const kt_decision *d) { return d ? d->winner_unit : 0; }
static const kt__unit *unit_at(const kt_decision *d, size_t u) { return (d && u < d->nunits) ? &d->units[u] : NULL; }
size_t kt_decision_unit_candidate(const kt_decision *d, size_t u) {
    const kt__unit *x = unit_at(d, u);
    return x ? x->cand : 0;
}
const char *kt_decision_unit_config(const kt_decision *d, size_t u) {
    const kt__unit *x = unit_at(d, u);
    return x ? x->text : NULL;
}
kt_outcome kt_decision_unit_outcome(const kt_decision *d, size_t u) {
    const kt__unit *x = unit_at(d, u);
    return x ? x->r.outcome : KT_OUTCOME_NOT_RUN;
}
double kt_decision_unit_time_ns(const kt_decision *d, size_t u) {
    const kt__unit *x = unit_at(d, u);
    return x ? x->r.time_ns : -1;
}
unsigned kt_decision_unit_runs(const kt_decision *d, size_t u) {
    const kt__unit *x = unit_at(d, u);
    return x ? x->r.runs : 0;
}
const char *kt_decision_unit_message(const kt_decision *d, size_t u) {
    const kt__unit *x = unit_at(d, u);
    return x ? x->r.message : NULL;
}

kt_status kt_decision_unit_geometry(const kt_decision *d, size_t u, int64_t global[3], int64_t local[3],
                                    int64_t *shared_memory) {
    const kt__unit *x = unit_at(d, u);
    if (x == NULL || x->text == NULL)
        return kt__err(KT_ERR_NOT_FOUND, "kt_decision_unit_geometry: unit %zu is not a planned variant", u);
    const kt_launch_geometry *g = &x->launch.geometry;
    for (int i = 0; i < 3; i++) {
        if (global) global[i] = g->global[i];
        if (local) local[i] = g->local[i];
    }
    if (shared_memory) *shared_memory = g->shared_memory;
    return KT_OK;
}

unsigned kt_decision_unit_warmups(const kt_decision *d, size_t u) {
    const kt__unit *x = unit_at(d, u);
    return x ? x->r.warmups : 0;
}
double kt_decision_unit_ci_low_ns(const kt_decision *d, size_t u) {
    const kt__unit *x = unit_at(d, u);
    return x && x->r.outcome == KT_OUTCOME_MEASURED && x->r.runs ? x->r.ci_low_ns : -1;
}
double kt_decision_unit_ci_high_ns(const kt_decision *d, size_t u) {
    const kt__unit *x = unit_at(d, u);
    return x && x->r.outcome == KT_OUTCOME_MEASURED && x->r.runs ? x->r.ci_high_ns : -1;
}
double kt_decision_confidence(const kt_decision *d) {
    return d && (d->source == KT_SOURCE_MEASURED || d->source == KT_SOURCE_CACHE) && d->confidence > 0 ? d->confidence : 0;
}
uint64_t kt_decision_total_runs(const kt_decision *d) { return d ? d->total_runs : 0; }
double kt_decision_measure_ns(const kt_decision *d) { return d ? d->measure_ns : 0; }
size_t kt_decision_build_threads(const kt_decision *d) { return d ? d->build_threads : 0; }

double kt_decision_build_busy(const kt_decision *d, double from_s, double to_s) {
    if (d == NULL || d->build_threads == 0 || d->build_end_s <= 0) return -1;
    if (from_s < 0) from_s = 0;
    if (to_s > d->build_end_s) to_s = d->build_end_s;
    if (!(to_s > from_s)) return -1; /* NaN too */
    double busy = 0;
    for (size_t i = 0; i < d->nbuild_spans; i++) {
        double a = d->build_spans[i][0] > from_s ? d->build_spans[i][0] : from_s;
        double b = d->build_spans[i][1] < to_s ? d->build_spans[i][1] : to_s;
        if (b > a) busy += b - a;
    }
    return busy / ((double)d->build_threads * (to_s - from_s));
}
double kt_decision_build_end_s(const kt_decision *d) { return d ? d->build_end_s : 0; }
kt_policy kt_decision_policy(const kt_decision *d) { return d ? d->policy : KT_POLICY_RACE; }

/* ---- failure kinds ------------------------------------------------------------------------- */

static const struct {
    const char *name, *description;
} fail_kinds[] = {
#define KT__FAIL_KIND_ROW(name, value, text, description) [value] = {text, description},
    KT_FAIL_KIND_LIST(KT__FAIL_KIND_ROW)
#undef KT__FAIL_KIND_ROW
};

const char *kt_fail_kind_name(kt_fail_kind kind) {
    size_t k = (size_t)kind;
    return k < sizeof fail_kinds / sizeof *fail_kinds && fail_kinds[k].name ? fail_kinds[k].name : "unknown";
}

const char *kt_fail_kind_describe(kt_fail_kind kind) {
    size_t k = (size_t)kind;
    return k < sizeof fail_kinds / sizeof *fail_kinds && fail_kinds[k].description ? fail_kinds[k].description
                                                                                   : "not a failure kind of this version of kerntune";
}

kt_fail_kind kt_decision_unit_fail_kind(const kt_decision *d, size_t u) {
    return d && u < d->nunits ? d->units[u].r.fail_kind : KT_FAIL_NONE;
}

int kt_decision_unit_fail_code(const kt_decision *d, size_t u) { return d && u < d->nunits ? d->units[u].r.fail_code : 0; }
