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
    free(d->cache_rejected); /* what the persistent cache said (persist.c) */
    d->cache_rejected = NULL;
    d->rerace = false;
    d->requested_confidence = 0;
    d->validated = false;
    d->peak_extra = 0;
    d->confidence = 0;
    d->total_runs = 0;
    d->measure_ns = 0;
}

void kt__decision_free(kt_decision *d) {
    if (d == NULL) return;
    kt__decision_reset(d);
    free(d);
}

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
