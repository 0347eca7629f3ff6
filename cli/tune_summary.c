/*
 * tune_summary.c - what a finished `kerntune tune` says: summarize() computes it once from the
 * decision (counts by kind, the best, validation, the cache, the fleet, where the time went);
 * print_summary() writes the text, summary_json() the --json document.
 */
#define _XOPEN_SOURCE 700 /* mkdtemp */
#define _DEFAULT_SOURCE
#include "tune_int.h"

/* Fills the computed part of s from its inputs. */
void summarize(summary *s) {
    /* the kernel's units: counts; the best is the library's winner, always a configuration of the
     * kernel's space (the reference group only validates) */
    s->best = s->ref_unit = (size_t)-1;
    for (size_t u = 0; u < kt_decision_unit_count(s->d); u++) {
        const char *cand = kt_op_candidate_name(s->op, kt_decision_unit_candidate(s->d, u));
        if (strcmp(cand, "reference") == 0 && s->ref_unit == (size_t)-1) s->ref_unit = u;
        if (strcmp(cand, "kernel") != 0) continue;
        kt_outcome oc = unit_outcome(s->fl, s->d, u);
        const char *why = kt_decision_unit_message(s->d, u);
        /* taken from what the cache recorded (an earlier run, finished or not): not run now */
        if (kt_decision_source_of(s->d) == KT_SOURCE_MEASURED &&
            ((oc == KT_OUTCOME_MEASURED && kt_decision_unit_runs(s->d, u) == 0) || (why && strncmp(why, "recorded in the cache", 21) == 0)))
            s->recorded++;
        if (oc == KT_OUTCOME_MEASURED) s->measured++;
        else if (oc == KT_OUTCOME_NOT_RUN) s->not_run++;
        else if ((unsigned)oc < 8) {
            if (s->fails[oc] < EXAMPLES) s->examples[oc][s->fails[oc]] = u;
            s->failed++, s->fails[oc]++;
        }
    }
    s->best_ms = -1;
    if (s->st == KT_OK) {
        s->best = kt_decision_winner_unit(s->d);
        s->best_ms = kt_decision_unit_time_ns(s->d, s->best) / 1e6;
    }
    s->cached = kt_decision_source_of(s->d) == KT_SOURCE_CACHE;
    /* with --workers, each worker validates what it measures against its own reference: a wrong
     * answer comes back as a failure of that configuration */
    s->validated = kt_decision_validated(s->d) != 0 || (s->o->workers && !s->o->simulate);
    /* which reference validated, and why (validation_info) */
    long cref = kt_decision_reference_unit(s->d);
    const char *ref_cfg = s->ref_unit != (size_t)-1 ? kt_decision_unit_config(s->d, s->ref_unit) : cref >= 0 ? kt_decision_unit_config(s->d, (size_t)cref) : NULL;
    size_t ref_among = 0, ref_agree = kt_decision_reference_consensus(s->d, &ref_among);
    s->vinfo = validation_info(s->prep, s->o, s->names, ref_cfg, ref_agree, ref_among, s->validated, s->vline, sizeof s->vline);
    if (s->cached) { /* a decision from the cache does not say how it was validated */
        json_t *rj = json_object();
        json_object_set_new(rj, "source", json_null());
        json_object_set_new(rj, "why", json_string("a decision from the cache: nothing was run"));
        json_object_set_new(s->vinfo, "reference", rj);
        s->vline[0] = '\0';
    }
    if (s->fl) fleet_get_stats(s->fl, &s->fs);
    kt_cache *cache = kt_context_cache(s->ctx);
    s->cache_path = cache ? kt_cache_path(cache) : NULL;
    s->runs = kt_decision_total_runs(s->d);
    /* where the tuning's time went, summed over its units: building, validating, the framework
     * around the runs (loading, preparing, flushing, restoring, a worker's round trips), the runs */
    for (size_t u = 0; s->d && u < kt_decision_unit_count(s->d); u++) {
        s->split_ms[0] += kt_decision_unit_build_ms(s->d, u);
        s->split_ms[1] += kt_decision_unit_validation_ms(s->d, u);
        s->split_ms[2] += kt_decision_unit_framework_ms(s->d, u);
    }
    s->run_ns = kt_decision_measure_ns(s->d);
    s->confidence = kt_decision_confidence(s->d);
    /* how busy the build threads were over the tuning: where they built beside the measuring,
     * by the builds' spans (those a budget left running count until the tuning's end), over the
     * whole and over its first five sixths (the first 50 s of 60: at the end a budget proposes
     * nothing that could not be built in time); otherwise the units' build times over threads x
     * wall */
    s->build_threads = kt_decision_build_threads(s->d);
    s->build_busy = s->wall > 0 && s->build_threads > 0 ? s->split_ms[0] / 1e3 / ((double)s->build_threads * s->wall) : 0;
    s->build_end_s = kt_decision_build_end_s(s->d);
    s->build_busy_early = -1;
    if (s->build_end_s > 0) {
        s->build_busy = kt_decision_build_busy(s->d, 0, s->build_end_s);
        s->build_busy_early = kt_decision_build_busy(s->d, 0, s->build_end_s * 5 / 6);
    }
    /* replay: the chosen configuration's record, the recorded best */
    if (s->o->simulate) {
        if (s->best != (size_t)-1) s->chosen = replay_find(s->replay, kt_decision_unit_config(s->d, s->best));
        for (size_t i = 0; i < s->replay->recs.n; i++) {
            const t4_record *r = &s->replay->recs.recs[i];
            if (strcmp(r->invalidity, "correct") == 0 && r->mean_ms >= 0 && (s->truth == NULL || r->mean_ms < s->truth->mean_ms)) s->truth = r;
        }
    }
    if (s->replay->recorded && s->chosen) s->best_ms = s->chosen->mean_ms; /* the recorded objective itself */
}

/* The human summary of a finished tuning, into txt. */
void print_summary(FILE *txt, const summary *s) {
    if (s->best != (size_t)-1) {
        if (s->cached)
            fprintf(txt, "best: %s  %.6g ms (recorded in the cache %s; confidence %.3f): nothing was compiled or measured\n",
                    kt_decision_unit_config(s->d, s->best), s->best_ms, s->cache_path, s->confidence);
        else
            fprintf(txt, "best: %s  %.6g ms (mean of %u runs; confidence %.3f)\n", kt_decision_unit_config(s->d, s->best), s->best_ms,
                    kt_decision_unit_runs(s->d, s->best), s->confidence);
        double flops = kt_decision_unit_flops(s->d, s->best), by = kt_decision_unit_bytes(s->d, s->best), t_ns = kt_decision_unit_time_ns(s->d, s->best);
        if (!s->cached && t_ns > 0 && (flops >= 0 || by >= 0)) {
            fprintf(txt, "work of the best:");
            if (flops >= 0) fprintf(txt, " %.4g GFLOP/s", flops / t_ns);
            if (flops >= 0 && s->peak_f > 0) fprintf(txt, " (%.1f%% of %g)", 100 * flops / t_ns / s->peak_f, s->peak_f);
            if (by >= 0) fprintf(txt, "%s %.4g GB/s", flops >= 0 ? "," : "", by / t_ns);
            if (by >= 0 && s->peak_b > 0) fprintf(txt, " (%.1f%% of %g)", 100 * by / t_ns / s->peak_b, s->peak_b);
            fprintf(txt, "\n");
        }
    } else {
        fprintf(txt, "no configuration is valid\n");
    }
    if (!s->cached) {
        fprintf(txt, "%zu configurations: %zu measured, %zu failed (", s->total, s->measured, s->failed);
        for (size_t k = 0; k < nkinds; k++) fprintf(txt, "%s%zu %s", k ? ", " : "", s->fails[kinds[k].outcome], kinds[k].name);
        fprintf(txt, "), %zu not run\n", s->not_run);
        for (size_t k = 0; k < nkinds; k++) {
            kt_outcome oc = kinds[k].outcome;
            if (s->fails[oc] == 0) continue;
            fprintf(txt, "  %s (%zu)%s:\n", kinds[k].name, s->fails[oc], s->fails[oc] > EXAMPLES ? ", the first ones" : "");
            for (size_t e = 0; e < s->fails[oc] && e < EXAMPLES; e++) {
                const char *msg = kt_decision_unit_message(s->d, s->examples[oc][e]);
                fprintf(txt, "    %s\n", kt_decision_unit_config(s->d, s->examples[oc][e]));
                print_message(txt, msg ? msg : "(no message)", 4);
            }
        }
        if (s->vline[0]) fprintf(txt, "%s\n", s->vline);
        fprintf(txt, "measurement (%s): %llu runs, %.6g s of kernel time%s; tuning took %.3g s\n", kt_policy_name(s->policy),
                (unsigned long long)s->runs, s->run_ns / 1e9, s->o->simulate ? " (simulated)" : "", s->wall);
        if (s->fl)
            fprintf(txt, "fleet: %zu worker%s on %s: %llu jobs (%llu failed, %llu taken over from a worker that stopped, %llu "
                         "duplicate results ignored); the coordinator used %.0f us of processor time per job\n",
                    s->fs.workers, s->fs.workers == 1 ? "" : "s", fleet_device_name(s->fl), (unsigned long long)s->fs.jobs,
                    (unsigned long long)s->fs.failed, (unsigned long long)s->fs.reclaimed, (unsigned long long)s->fs.duplicates,
                    s->fs.jobs ? s->fs.cpu_s * 1e6 / (double)s->fs.jobs : 0.0);
        if (s->recorded)
            fprintf(txt, "%s %zu configurations as the cache %s recorded them (an earlier run's): not run again\n",
                    s->o->resume ? "resumed: took" : "took", s->recorded, s->cache_path ? s->cache_path : "");
        if (!s->o->simulate && s->fl)
            fprintf(txt, "time spent: waiting for the workers' jobs %.3g s (summed over the jobs in flight), the runs %.3g s "
                         "(measured by the workers)\n", s->split_ms[0] / 1e3, s->run_ns / 1e9);
        else if (!s->o->simulate) {
            char early[64] = "";
            if (s->build_busy_early >= 0)
                snprintf(early, sizeof early, ", %.0f%% over the first %.0f s", 100 * s->build_busy_early, s->build_end_s * 5 / 6);
            fprintf(txt, "time spent: building %.3g s (summed over the %zu build threads: %.0f%% busy%s), validating %.3g s, "
                         "around the runs %.3g s, the runs %.3g s\n", s->split_ms[0] / 1e3, s->build_threads, 100 * s->build_busy, early,
                    s->split_ms[1] / 1e3, s->split_ms[2] / 1e3, s->run_ns / 1e9);
        }
    }
    if (!s->validated && !s->o->simulate && !s->o->validate_off && !s->cached && (s->best != (size_t)-1 || s->ref_unit != (size_t)-1)) {
        fprintf(txt, "warning: the configurations were not validated: ");
        if (s->ref_unit != (size_t)-1) {
            /* what the library recorded of the reference's run: "did not run" only when it did not */
            const char *msg = kt_decision_unit_message(s->d, s->ref_unit);
            kt_outcome ro = kt_decision_unit_outcome(s->d, s->ref_unit);
            fprintf(txt, "the reference (the Default configuration %s) ", kt_decision_unit_config(s->d, s->ref_unit));
            if (ro != KT_OUTCOME_MEASURED && ro != KT_OUTCOME_NOT_RUN) fprintf(txt, "failed (%s)%s\n", outcome_name(ro), msg ? ":" : "");
            else if (msg) fprintf(txt, "could not be used:\n");
            else if (ro == KT_OUTCOME_MEASURED) fprintf(txt, "ran, but could not be used\n");
            else fprintf(txt, "did not run\n");
            if (msg) print_message(txt, msg, 4);
        } else {
            fprintf(txt, "the reference did not run\n");
        }
    }
    if (s->chosen && s->truth)
        fprintf(txt, "recorded: the chosen configuration's mean is %.6g ms, the recorded best %.6g ms (%s): ratio %.4f\n",
                s->chosen->mean_ms, s->truth->mean_ms, s->truth->key, s->chosen->mean_ms / s->truth->mean_ms);
    /* the ten fastest */
    size_t order[10], k = 0;
    for (size_t u = 0; u < kt_decision_unit_count(s->d); u++) {
        if (kt_decision_unit_outcome(s->d, u) != KT_OUTCOME_MEASURED) continue;
        if (strcmp(kt_op_candidate_name(s->op, kt_decision_unit_candidate(s->d, u)), "kernel") != 0) continue;
        size_t pos = k < 10 ? k++ : 10;
        while (pos > 0 && kt_decision_unit_time_ns(s->d, order[pos - 1]) > kt_decision_unit_time_ns(s->d, u)) {
            if (pos < 10) order[pos] = order[pos - 1];
            pos--;
        }
        if (pos < 10) order[pos] = u;
    }
    if (k > 1) {
        fprintf(txt, "%4s  %12s  %s\n", "rank", "time (ms)", "configuration");
        for (size_t i = 0; i < k; i++)
            fprintf(txt, "%4zu  %12.6g  %s\n", i + 1, kt_decision_unit_time_ns(s->d, order[i]) / 1e6, kt_decision_unit_config(s->d, order[i]));
    }
}

/* The fleet's part of the --json summary. */
static json_t *fleet_json(const summary *s) {
    json_t *fj = json_object();
    json_object_set_new(fj, "device", json_string(fleet_device_name(s->fl)));
    json_object_set_new(fj, "workers", json_integer((json_int_t)s->fs.workers));
    json_object_set_new(fj, "compile_workers", json_integer((json_int_t)s->fs.compilers));
    json_object_set_new(fj, "workers_left_out", json_integer((json_int_t)s->fs.ignored));
    json_object_set_new(fj, "jobs", json_integer((json_int_t)s->fs.jobs));
    json_object_set_new(fj, "failed", json_integer((json_int_t)s->fs.failed));
    json_object_set_new(fj, "taken_over", json_integer((json_int_t)s->fs.reclaimed));
    json_object_set_new(fj, "duplicate_results", json_integer((json_int_t)s->fs.duplicates));
    json_object_set_new(fj, "coordinator_cpu_s", json_real(s->fs.cpu_s));
    json_object_set_new(fj, "coordinator_us_per_job", s->fs.jobs ? json_real(s->fs.cpu_s * 1e6 / (double)s->fs.jobs) : json_null());
    return fj;
}

/* The --json document of a finished tuning. */
json_t *summary_json(const summary *s) {
    json_t *j = json_object();
    json_object_set_new(j, "problem", json_string(s->p->name));
    json_object_set_new(j, "ignored", t1_ignored_json(s->p)); /* JSON paths accepted without being read */
    json_object_set_new(j, "device", json_string(s->dev_name));
    json_object_set_new(j, "configurations", json_integer((json_int_t)s->total));
    json_object_set_new(j, "measured", json_integer((json_int_t)s->measured));
    json_object_set_new(j, "failed", json_integer((json_int_t)s->failed));
    json_object_set_new(j, "not_run", json_integer((json_int_t)s->not_run));
    json_t *kj = json_object(), *ej = json_object();
    for (size_t k = 0; k < nkinds; k++) {
        kt_outcome oc = kinds[k].outcome;
        json_object_set_new(kj, kinds[k].name, json_integer((json_int_t)s->fails[oc]));
        if (s->fails[oc] == 0) continue;
        json_t *list = json_array();
        for (size_t e = 0; e < s->fails[oc] && e < EXAMPLES; e++) {
            json_t *x = json_object();
            const char *msg = kt_decision_unit_message(s->d, s->examples[oc][e]);
            json_object_set_new(x, "configuration", t4_configuration(kt_decision_unit_config(s->d, s->examples[oc][e]), s->names, s->p->nparams));
            json_object_set_new(x, "message", msg ? json_string(msg) : json_null());
            json_array_append_new(list, x);
        }
        json_object_set_new(ej, kinds[k].name, list);
    }
    json_object_set_new(j, "failures", kj);
    json_object_set_new(j, "failure_examples", ej);
    /* a decision from the cache does not say whether it was validated */
    json_object_set_new(j, "validated", s->cached ? json_null() : json_boolean(s->validated));
    json_object_update(j, s->vinfo); /* "validation", "reference" */
    if (s->ref_unit != (size_t)-1 && !s->validated) {
        json_t *rj = json_object_get(j, "reference");
        const char *msg = kt_decision_unit_message(s->d, s->ref_unit);
        kt_outcome ro = kt_decision_unit_outcome(s->d, s->ref_unit);
        const char *inv = ro == KT_OUTCOME_MEASURED ? NULL : invalidity(ro); /* T4's class of a failure */
        json_object_set_new(rj, "configuration", t4_configuration(kt_decision_unit_config(s->d, s->ref_unit), s->names, s->p->nparams));
        json_object_set_new(rj, "outcome", json_string(outcome_name(ro)));
        json_object_set_new(rj, "invalidity", inv ? json_string(inv) : json_null());
        json_object_set_new(rj, "message", msg ? json_string(msg) : json_null());
    }
    json_object_set_new(j, "policy", json_string(kt_policy_name(s->policy)));
    json_object_set_new(j, "flush", json_string(s->o->flush));
    if (s->startup_s >= 0) { /* a budget of seconds: the process's, start-up included */
        json_object_set_new(j, "startup_s", json_real(s->startup_s));
        json_object_set_new(j, "tuning_budget_s", json_real(s->tuning_s));
    }
    json_object_set_new(j, "source", json_string(s->cached ? "cache" : "measured"));
    json_object_set_new(j, "cache", s->cache_path ? json_string(s->cache_path) : json_null());
    json_object_set_new(j, "runs", json_integer((json_int_t)s->runs));
    json_object_set_new(j, "recorded", json_integer((json_int_t)s->recorded)); /* taken as the cache recorded them */
    json_object_set_new(j, "measurement_time_s", json_real(s->run_ns / 1e9));
    json_object_set_new(j, "confidence", json_real(s->confidence));
    json_object_set_new(j, "requested_confidence", s->d && kt_decision_requested_confidence(s->d) > 0 ? json_real(kt_decision_requested_confidence(s->d)) : json_null());
    json_object_set_new(j, "below_confidence", json_boolean(s->low));
    json_object_set_new(j, "reraced", json_boolean(s->reraced));
    json_object_set_new(j, "cache_rejected", s->rejected ? json_string(s->rejected) : json_null());
    if (s->fl) json_object_set_new(j, "fleet", fleet_json(s));
    if (s->o->simulate && !s->o->workers) { /* what the search would have cost on the recorded device: the runs, and building what it tried */
        json_object_set_new(j, "simulated_time_s", json_real(replay_clock_s((void *)s->replay)));
        json_object_set_new(j, "simulated_run_time_s", json_real((double)atomic_load(&s->replay->served_ns) / 1e9));
    }
    json_object_set_new(j, "tuning_time_s", json_real(s->wall));
    json_object_set_new(j, "builds", json_integer((json_int_t)kt_context_compile_count(s->ctx))); /* variants compiled, */
    json_object_set_new(j, "artifacts_found", json_integer((json_int_t)kt_context_artifact_hits(s->ctx))); /* and found compiled */
    if (!s->o->simulate) {
        json_t *split = json_object();
        json_object_set_new(split, "build_s", json_real(s->split_ms[0] / 1e3));
        json_object_set_new(split, "build_threads", json_integer((json_int_t)s->build_threads));
        json_object_set_new(split, "build_busy", json_real(s->build_busy));
        if (s->build_busy_early >= 0) { /* builds beside the measuring */
            json_object_set_new(split, "build_busy_early", json_real(s->build_busy_early));
            json_object_set_new(split, "build_busy_early_s", json_real(s->build_end_s * 5 / 6));
        }
        json_object_set_new(split, "validation_s", json_real(s->split_ms[1] / 1e3));
        json_object_set_new(split, "framework_s", json_real(s->split_ms[2] / 1e3));
        json_object_set_new(split, "runs_s", json_real(s->run_ns / 1e9));
        json_object_set_new(j, "time_split", split);
    }
    if (s->best != (size_t)-1) {
        json_t *b = json_object();
        json_object_set_new(b, "configuration", t4_configuration(kt_decision_unit_config(s->d, s->best), s->names, s->p->nparams));
        json_object_set_new(b, "time_ms", json_real(s->best_ms));
        json_object_set_new(b, "runs", json_integer(kt_decision_unit_runs(s->d, s->best)));
        double flops = kt_decision_unit_flops(s->d, s->best), by = kt_decision_unit_bytes(s->d, s->best), t_ns = kt_decision_unit_time_ns(s->d, s->best);
        if (!s->cached && flops >= 0 && t_ns > 0) {
            json_object_set_new(b, "flops", json_real(flops));
            json_object_set_new(b, "gflops", json_real(flops / t_ns));
            if (s->peak_f > 0) json_object_set_new(b, "gflops_fraction_of_peak", json_real(flops / t_ns / s->peak_f));
        }
        if (!s->cached && by >= 0 && t_ns > 0) {
            json_object_set_new(b, "bytes", json_real(by));
            json_object_set_new(b, "gbs", json_real(by / t_ns));
            if (s->peak_b > 0) json_object_set_new(b, "gbs_fraction_of_peak", json_real(by / t_ns / s->peak_b));
        }
        if (s->chosen) json_object_set_new(b, "recorded_ms", json_real(s->chosen->mean_ms));
        json_t *geo = geometry_json(s->p, s->d, s->best);
        if (geo) json_object_set_new(b, "geometry", geo);
        json_object_set_new(j, "best", b);
    } else {
        json_object_set_new(j, "best", json_null());
    }
    if (s->truth) {
        json_t *b = json_object();
        json_object_set_new(b, "configuration", t4_configuration(s->truth->key, s->names, s->p->nparams));
        json_object_set_new(b, "time_ms", json_real(s->truth->mean_ms));
        json_object_set_new(j, "recorded_best", b);
    }
    return j;
}

