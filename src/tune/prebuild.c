/*
 * prebuild.c - kt_op_build: a key's variants built into the artifact directory, nothing loaded,
 * nothing measured. The units are planned as a tuning plans them (kt__make_units, lazily) and
 * built by a builder that keeps artifacts only; the scratch decision is in no table and is
 * freed at the end, so the op's state is as before but for the artifacts on disk.
 */
#include "op/op.h"
#include "tune/stages.h"
#include "tune/tune.h"
#include "util/util.h"

#include <stdlib.h>

kt_status kt_op_build_each(kt_op *op, const kt_arg *args, size_t nargs, kt_build_counts *counts, kt_built_fn on_built, void *user) {
    if (counts) *counts = (kt_build_counts){0};
    if (op == NULL) return kt__err(KT_ERR_NULL, "kt_op_build: op is NULL");
    kt_status st = atomic_load_explicit(&op->frozen, memory_order_acquire) ? KT_OK : kt__op_freeze(op, "kt_op_build");
    if (st == KT_OK) st = kt__check_args(op, args, nargs, "kt_op_build");
    if (st != KT_OK) return st;
    int64_t key[KT__KEY_WORDS_MAX];
    size_t len = kt__key_compute(op, args, key);
    kt_decision *d = kt__decision_new(op, key, len, kt__key_hash(key, len));
    if (d == NULL) return kt__err(KT_ERR_NO_MEMORY, "kt_op_build(op '%s'): out of memory", op->name);
    d->where = "kt_op_build";
    kt__plans *plans = NULL;
    st = kt__make_units(op, d, args, -1, NULL, NULL, &plans);
    size_t *units = st == KT_OK ? malloc((d->nunits ? d->nunits : 1) * sizeof *units) : NULL, n = 0;
    if (st == KT_OK && units == NULL) st = kt__err(KT_ERR_NO_MEMORY, "kt_op_build(op '%s'): out of memory", op->name);
    for (size_t i = 0; units && i < d->nunits; i++)
        if (kt__unit_planned(plans, i)) units[n++] = i;
    size_t threads = kt_context_compile_threads(op->ctx);
    /* a budget of wall seconds bounds the builds: those still running then are abandoned, and
     * stopped where the backend can stop its compiler (a compile that never ends holds nothing) */
    double deadline = op->budget.seconds > 0 && !op->ctx->budget_clock ? kt__now_s() + op->budget.seconds : 0;
    kt__builder *bl = NULL;
    if (st == KT_OK && n > 0) st = kt__builder_start(op, d, plans, threads < n ? threads : n, deadline > 0, false, &bl);
    if (bl != NULL) {
        kt__builder_no_load(bl);
        st = kt__builder_submit(bl, units, n);
        size_t k;
        while (st == KT_OK && (k = kt__builder_take(bl, units, n, true, false, deadline, &st)) > 0)
            for (size_t i = 0; on_built && i < k; i++) {
                const kt__unit *u = &d->units[units[i]];
                on_built(user, u->text ? u->text : "", u->r.outcome == KT_OUTCOME_BUILD_FAILED ? NULL : u->artifact);
            }
        kt_build_counts c;
        kt__builder_counts(bl, &c.built, &c.found, &c.failed);
        size_t left = kt__builder_pending(bl); /* still building at the deadline: not built */
        c.failed += left;
        if (on_built)
            for (size_t i = 0; left > 0 && i < d->nunits; i++)
                if (kt__unit_planned(plans, i) && d->units[i].r.outcome == KT_OUTCOME_NOT_RUN) on_built(user, d->units[i].text ? d->units[i].text : "", NULL);
        if (counts) *counts = c;
        kt__builder_stop(bl, deadline > 0);
    }
    free(units);
    kt__plans_free(plans);
    kt__decision_free(d);
    return st;
}

kt_status kt_op_build(kt_op *op, const kt_arg *args, size_t nargs, kt_build_counts *counts) {
    return kt_op_build_each(op, args, nargs, counts, NULL, NULL);
}
