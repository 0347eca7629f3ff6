/*
 * tune_results.c - what `kerntune tune` writes as it goes and at the end: T4 results (as they
 * come, and whole) and a stopped validation's report (the text summary and the --json document
 * are tune_summary.c's).
 */
#define _XOPEN_SOURCE 700 /* mkdtemp */
#define _DEFAULT_SOURCE
#include "tune_int.h"

/* ---- files ---------------------------------------------------------------------------------- */

/* The mkstemp template of a temporary file beside path (in its directory); NULL when out of
 * memory. The check before work and the writer use the same one. */
static char *temp_beside(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? cli_format("%.*s/.kerntune-t4-XXXXXX", (int)(slash - path), path) : cli_format(".kerntune-t4-XXXXXX");
}

/* Checks, before any work, that path can be written as write_json writes it: a temporary file
 * is made in its directory (then removed), so a directory that refuses new files is found even
 * when path exists and could be written in place; an existing path must be a regular file that
 * can be written. NULL when it can, else why (allocated). */
char *check_writable(const char *path) {
    struct stat st;
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) return cli_format("is a directory");
        if (!S_ISREG(st.st_mode)) return cli_format("is %s; expected a regular file", cli_file_kind(st.st_mode));
        int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC); /* writes nothing */
        if (fd < 0) return cli_format("cannot be written: %s", strerror(errno));
        close(fd);
    } else if (errno != ENOENT) {
        return cli_format("cannot be written: %s", strerror(errno));
    }
    char *tmpl = temp_beside(path);
    if (tmpl == NULL) return cli_format("out of memory");
    int fd = mkstemp(tmpl);
    const char *slash = strrchr(tmpl, '/');
    char *why = fd < 0 ? cli_format("cannot be written: its directory %.*s takes no new file (T4 output is written to a temporary file "
                                    "there, then renamed into place): %s",
                                    slash ? (slash == tmpl ? 1 : (int)(slash - tmpl)) : 1, slash ? tmpl : ".", strerror(errno))
                       : NULL;
    if (fd >= 0) {
        close(fd);
        unlink(tmpl);
    }
    free(tmpl);
    return why;
}

/* Writes root to path through a temporary file in its directory, renamed into place: the file
 * is whole or not there. NULL on success, else why (allocated). */
char *write_json(const char *path, json_t *root) {
    char *tmp = temp_beside(path);
    if (tmp == NULL) return cli_format("out of memory");
    int fd = mkstemp(tmp);
    if (fd < 0) {
        char *why = cli_format("%s", strerror(errno));
        free(tmp);
        return why;
    }
    mode_t mask = umask(0); /* mkstemp made it 0600: give it the mode a new file gets */
    umask(mask);
    fchmod(fd, 0666 & ~mask);
    FILE *f = fdopen(fd, "w");
    errno = 0;
    int rc = f ? json_dumpf(root, f, JSON_INDENT(1) | JSON_REAL_PRECISION(17)) : -1;
    if (f && fputc('\n', f) == EOF) rc = -1;
    if (f ? fclose(f) != 0 : close(fd) != 0) rc = -1;
    char *why = NULL;
    if (rc != 0) why = cli_format("%s", errno ? strerror(errno) : "write failed");
    else if (rename(tmp, path) != 0) why = cli_format("%s", strerror(errno));
    if (why) unlink(tmp);
    free(tmp);
    return why;
}

/* ---- results -------------------------------------------------------------------------------- */

const char *invalidity(kt_outcome o) {
    switch (o) {
    case KT_OUTCOME_MEASURED: return "correct";
    case KT_OUTCOME_BUILD_FAILED: return "compile";
    case KT_OUTCOME_FAILED: return "runtime";
    case KT_OUTCOME_INVALID: return "correctness";
    case KT_OUTCOME_REJECTED: return "constraints";
    case KT_OUTCOME_TIMEOUT: return "timeout";
    case KT_OUTCOME_CRASHED: return "runtime"; /* T4 has no class of its own for a crash */
    default: return NULL;
    }
}

/* The failure kinds as the summary names them, in the order it lists them. */
const failure_kind kinds[] = {{KT_OUTCOME_BUILD_FAILED, "compile"}, {KT_OUTCOME_FAILED, "runtime"},    {KT_OUTCOME_CRASHED, "crashed"},
             {KT_OUTCOME_TIMEOUT, "timeout"},      {KT_OUTCOME_INVALID, "correctness"}, {KT_OUTCOME_REJECTED, "rejected"}};
const size_t nkinds = sizeof kinds / sizeof kinds[0];

/* A unit's outcome as the summary names it: a failure kind, "measured" or "not run". */
const char *outcome_name(kt_outcome o) {
    for (size_t k = 0; k < nkinds; k++)
        if (kinds[k].outcome == o) return kinds[k].name;
    return o == KT_OUTCOME_MEASURED ? "measured" : "not run";
}

static double mean_ms(const kt_decision *d, size_t u) {
    const double *t;
    size_t n;
    if (kt_decision_unit_runtimes(d, u, &t, &n) != KT_OK || n == 0) return -1;
    double s = 0;
    for (size_t i = 0; i < n; i++) s += t[i];
    return s / (double)n / 1e6;
}

/* The launch geometry unit u was planned with, as JSON; NULL for host code. */
json_t *geometry_json(const t1 *p, const kt_decision *d, size_t u) {
    int64_t g[3], l[3], shm;
    if (strcmp(p->language, "C") == 0 || kt_decision_unit_geometry(d, u, g, l, &shm) != KT_OK) return NULL;
    json_t *j = json_object(), *ga = json_array(), *la = json_array();
    for (int k = 0; k < 3; k++) {
        json_array_append_new(ga, json_integer(g[k]));
        json_array_append_new(la, json_integer(l[k]));
    }
    /* the global size counts blocks (a grid) or work-items, as the problem's geometry says */
    json_object_set_new(j, p->geometry == KT_GEOMETRY_GRID ? "grid" : "global", ga);
    json_object_set_new(j, "block", la);
    json_object_set_new(j, "shared_memory", json_integer(shm));
    return j;
}

/* The T4 record of unit u of d (a configuration of the kernel that was tried), or NULL. */

static void told_note(told_log *t, size_t u, double at_s) {
    if (u >= t->cap) {
        size_t cap = u + 1 > 2 * t->cap ? u + 1 : 2 * t->cap;
        size_t *o = realloc(t->order, cap * sizeof *o);
        if (o) t->order = o;
        double *a = o ? realloc(t->at_s, cap * sizeof *a) : NULL;
        if (a) t->at_s = a;
        if (o == NULL || a == NULL) return; /* out of memory: this unit goes without */
        memset(t->order + t->cap, 0, (cap - t->cap) * sizeof *o);
        t->cap = cap;
    }
    if (t->order[u] == 0) t->order[u] = ++t->n, t->at_s[u] = at_s;
}

/* Unit u's outcome; with --workers, a failure as the worker that measured it saw it (a crash, a
 * timeout, a wrong answer), where the library here only saw its build or launch fail. */
kt_outcome unit_outcome(fleet *fl, const kt_decision *d, size_t u) {
    kt_outcome o = kt_decision_unit_outcome(d, u);
    int seen;
    if (fl && (o == KT_OUTCOME_FAILED || o == KT_OUTCOME_BUILD_FAILED) && fleet_failure(fl, kt_decision_unit_config(d, u), &seen))
        o = (kt_outcome)seen;
    return o;
}

static json_t *t4_result(const t1 *p, kt_op *op, fleet *fl, const told_log *tl, const kt_decision *d, size_t u, const char *const *names,
                         size_t nnames) {
    if (strcmp(kt_op_candidate_name(op, kt_decision_unit_candidate(d, u)), "kernel") != 0) return NULL;
    kt_outcome o = unit_outcome(fl, d, u);
    const char *inv = invalidity(o);
    if (inv == NULL) return NULL; /* not tried (budget) */
    char stamp[64];
    time_t now = time(NULL);
    struct tm tmv;
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tmv));
    const double k = p->time_scale; /* ms to the problem's TimeUnit */
    const char *unit = strcmp(p->time_unit, "nanoseconds") == 0 ? "ns" : strcmp(p->time_unit, "microseconds") == 0 ? "us"
                       : strcmp(p->time_unit, "seconds") == 0 ? "s" : "ms";
    {
        json_t *r = json_object(), *times = json_object(), *runtimes = json_array();
        const double *t;
        size_t n = 0;
        if (kt_decision_unit_runtimes(d, u, &t, &n) == KT_OK)
            for (size_t i = 0; i < n; i++) json_array_append_new(runtimes, json_real(t[i] / 1e6 * k));
        json_object_set_new(r, "timestamp", json_string(stamp));
        json_object_set_new(r, "configuration", t4_configuration(kt_decision_unit_config(d, u), names, nnames));
        json_object_set_new(times, "compilation", json_real(kt_decision_unit_build_ms(d, u) * k));
        json_object_set_new(times, "framework", json_real(kt_decision_unit_framework_ms(d, u) * k));
        json_object_set_new(times, "search_algorithm", json_real(0));
        json_object_set_new(times, "validation", json_real(kt_decision_unit_validation_ms(d, u) * k));
        json_object_set_new(times, "runtimes", runtimes);
        json_object_set_new(r, "times", times);
        json_object_set_new(r, "invalidity", json_string(inv));
        json_object_set_new(r, "correctness", json_integer(o == KT_OUTCOME_MEASURED));
        json_t *m = json_object();
        json_object_set_new(m, "name", json_string("time"));
        if (o == KT_OUTCOME_MEASURED) json_object_set_new(m, "value", json_real(mean_ms(d, u) * k));
        else json_object_set_new(m, "value", json_string(o == KT_OUTCOME_BUILD_FAILED ? "CompilationFailedConfig"
                                                           : o == KT_OUTCOME_FAILED || o == KT_OUTCOME_CRASHED ? "RuntimeFailedConfig"
                                                           : o == KT_OUTCOME_TIMEOUT ? "TimeoutConfig"
                                                                                      : "InvalidConfig"));
        json_object_set_new(m, "unit", json_string(unit));
        json_t *ms = json_array();
        json_array_append_new(ms, m);
        json_object_set_new(r, "measurements", ms);
        json_t *objs = json_array();
        json_array_append_new(objs, json_string("time"));
        json_object_set_new(r, "objectives", objs);
        const char *why = kt_decision_unit_message(d, u);
        if (why) json_object_set_new(r, "diagnostic", json_string(why));
        json_t *geo = geometry_json(p, d, u);
        if (geo) json_object_set_new(r, "geometry", geo); /* kerntune's: the launch it was run with */
        json_t *x = json_object(); /* kerntune's extension: what other tools ignore */
        if (tl && u < tl->cap && tl->order[u]) {
            json_object_set_new(x, "order", json_integer((json_int_t)tl->order[u]));
            json_object_set_new(x, "at_s", json_real(tl->at_s[u]));
        }
        double lo = kt_decision_unit_ci_low_ns(d, u), hi = kt_decision_unit_ci_high_ns(d, u);
        if (o == KT_OUTCOME_MEASURED && lo >= 0 && hi >= lo) json_object_set_new(x, "ci_ms", json_pack("[f,f]", lo / 1e6 * k, hi / 1e6 * k));
        json_object_set_new(x, "outcome", json_string(outcome_name(o))); /* T4's classes lose crashed from runtime */
        int regs, shared, local;
        if (kt_decision_unit_resources(d, u, &regs, &shared, &local) == KT_OK) { /* by the compiler's account */
            if (regs >= 0) json_object_set_new(x, "registers", json_integer(regs));
            if (shared >= 0) json_object_set_new(x, "static_shared_bytes", json_integer(shared));
            if (local >= 0) json_object_set_new(x, "local_bytes", json_integer(local));
        }
        if (kt_decision_unit_finalist(d, u)) json_object_set_new(x, "finalist", json_true());
        double fl = kt_decision_unit_flops(d, u), by = kt_decision_unit_bytes(d, u), t_ns = kt_decision_unit_time_ns(d, u);
        if (fl >= 0) json_object_set_new(x, "flops", json_real(fl));
        if (by >= 0) json_object_set_new(x, "bytes", json_real(by));
        if (fl >= 0 && o == KT_OUTCOME_MEASURED && t_ns > 0) json_object_set_new(x, "gflops", json_real(fl / t_ns));
        if (by >= 0 && o == KT_OUTCOME_MEASURED && t_ns > 0) json_object_set_new(x, "gbs", json_real(by / t_ns));
        if (o == KT_OUTCOME_MEASURED && kt_decision_winner_unit(d) == u) json_object_set_new(x, "winner", json_true());
        json_object_set_new(r, "x-kerntune", x);
        return r;
    }
}

/* A T4 document of results (taken). */
static json_t *t4_wrap(const t1 *p, const char *device, json_t *results) {
    json_t *root = json_object();
    json_t *meta = json_object();
    json_object_set_new(meta, "timeunit", json_string(p->time_unit));
    json_object_set_new(meta, "problem", json_string(p->name));
    json_object_set_new(meta, "device", json_string(device));
    char gen[64];
    snprintf(gen, sizeof gen, "kerntune %s", kt_version_string());
    json_object_set_new(meta, "generator", json_string(gen));
    json_object_set_new(root, "schema_version", json_string("1.0.0"));
    json_object_set_new(root, "metadata", meta);
    json_object_set_new(root, "results", results);
    return root;
}

json_t *t4_document(const t1 *p, kt_op *op, fleet *fl, const told_log *tl, const kt_decision *d, const char *device,
                           const char *const *names, size_t nnames, double wall_s, double peak_gflops, double peak_gbs,
                           const json_t *validation) {
    json_t *results = json_array();
    for (size_t u = 0; u < kt_decision_unit_count(d); u++) {
        json_t *r = t4_result(p, op, fl, tl, d, u, names, nnames);
        if (r) json_array_append_new(results, r);
    }
    json_t *root = t4_wrap(p, device, results), *x = json_object(); /* kerntune's extension: the decision */
    json_object_set_new(x, "policy", json_string(kt_policy_name(kt_decision_policy(d))));
    json_object_set_new(x, "confidence", json_real(kt_decision_confidence(d)));
    json_object_set_new(x, "wall_s", json_real(wall_s));
    if (peak_gflops > 0) json_object_set_new(x, "peak_gflops", json_real(peak_gflops));
    if (peak_gbs > 0) json_object_set_new(x, "peak_gbs", json_real(peak_gbs));
    if (validation) json_object_update(x, (json_t *)validation); /* "validation", "reference" */
    json_object_set_new(root, "x-kerntune", x);
    return root;
}


void live_free(t4_live *l) {
    for (size_t i = 0; i < l->nverdicts; i++) free(l->verdicts[i].config);
    free(l->verdicts);
    json_decref(l->records);
    free(l->ref_config);
}

/* Notes unit u's verdict: a configuration of the kernel that was measured (it agreed, or it is
 * the reference) or found wrong (it disagreed); and the reference, once. */
static void note_verdict(t4_live *l, const kt_decision *d, size_t u) {
    long r = kt_decision_reference_unit(d);
    if (r >= 0 && l->ref_config == NULL) {
        l->ref_config = cli_format("%s", kt_decision_unit_config(d, (size_t)r));
        l->ref_agree = kt_decision_reference_consensus(d, &l->ref_among);
    }
    if (strcmp(kt_op_candidate_name(l->op, kt_decision_unit_candidate(d, u)), "kernel") != 0) return;
    kt_outcome o = unit_outcome(l->fl, d, u); /* a fleet's: as the worker that validated it saw it */
    if (o != KT_OUTCOME_MEASURED && o != KT_OUTCOME_INVALID) return;
    if (l->judge) { /* the library's disagreement stop, for units validated by the workers */
        l->compared++;
        l->disagreed += o == KT_OUTCOME_INVALID;
        if (l->compared >= DISAGREE_MIN && 2 * l->disagreed > l->compared) kt_op_stop_disagreement(l->op);
    }
    if (l->nverdicts == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        verdict *v = realloc(l->verdicts, cap * sizeof *v);
        if (v == NULL) return; /* out of memory: the diagnosis goes without it */
        l->verdicts = v, l->cap = cap;
    }
    char *config = cli_format("%s", kt_decision_unit_config(d, u));
    if (config) l->verdicts[l->nverdicts++] = (verdict){config, o == KT_OUTCOME_MEASURED};
}

static void live_failed(t4_live *l, const char *what) {
    fprintf(stderr, "kerntune tune: warning: --t4 %s: writing results as they come: %s: %s\n", l->path, what, strerror(errno));
    l->failed = true;
}

void on_unit(const kt_decision *d, size_t u, void *user) {
    t4_live *l = user;
    told_note(l->tl, u, kt_now_s() - l->tl->start);
    note_verdict(l, d, u);
    json_t *r = l->records ? t4_result(l->p, l->op, l->fl, l->tl, d, u, l->names, l->nnames) : NULL;
    if (r) json_array_append(l->records, r);
    if (l->failed || l->path == NULL) {
        json_decref(r);
        return;
    }
    if (r == NULL) r = t4_result(l->p, l->op, l->fl, l->tl, d, u, l->names, l->nnames);
    char *text = r ? json_dumps(r, JSON_COMPACT | JSON_REAL_PRECISION(17)) : NULL;
    json_decref(r);
    if (text == NULL) return;
    if (l->f == NULL) { /* the document's head, once */
        json_t *head = t4_wrap(l->p, l->device, json_array());
        char *h = json_dumps(head, JSON_COMPACT | JSON_REAL_PRECISION(17));
        json_decref(head);
        size_t hl = h ? strlen(h) : 0;
        if (h == NULL || hl < 3 || strcmp(h + hl - 3, "[]}") != 0) { /* "...,"results":[]}" */
            free(h), free(text);
            errno = ENOMEM;
            live_failed(l, "making its head");
            return;
        }
        h[hl - 2] = '\0';
        if ((l->f = fopen(l->path, "w")) == NULL || fputs(h, l->f) < 0) {
            free(h), free(text);
            live_failed(l, "opening it");
            return;
        }
        free(h);
        l->end = ftell(l->f);
    }
    bool ok = fseek(l->f, l->end, SEEK_SET) == 0 && fputs(l->n ? ",\n" : "\n", l->f) >= 0 && fputs(text, l->f) >= 0;
    long end = ok ? ftell(l->f) : -1;
    ok = ok && end >= 0 && fputs("\n]}\n", l->f) >= 0 && fflush(l->f) == 0;
    free(text);
    if (!ok) {
        live_failed(l, "appending a record");
        return;
    }
    l->end = end;
    l->n++;
}

/* Prints a message indented, at most max_lines of it. */
void print_message(FILE *out, const char *msg, int max_lines) {
    int lines = 0;
    while (*msg && lines < max_lines) {
        size_t len = strcspn(msg, "\n");
        if (len > 0) {
            fprintf(out, "      %.*s\n", (int)len, msg);
            lines++;
        }
        msg += len;
        if (*msg == '\n') msg++;
    }
    if (*msg) fprintf(out, "      ...\n");
}

/* A tuning that validation stopped (KT_ERR_DISAGREEMENT): most configurations compared with the
 * reference disagreed. Names the parameter that separates them (disagree.c) in the text, the
 * --json document and the T4 file (the records so far, and in its "x-kerntune" what validation
 * found); NULL, or the error (allocated). why: the library's words. */
char *stopped(const t1 *p, const options *o, t4_live *live, const json_t *vinfo, const char *why, FILE *txt, FILE *doc_out,
                     size_t total, const char *dev_name, double wall, bool default_ref, uint64_t builds, uint64_t found) {
    size_t compared = 0, wrong = 0;
    for (size_t i = 0; i < live->nverdicts; i++) { /* a consensus's reference unit was not compared: it is the reference */
        bool is_ref = !default_ref && live->ref_config && strcmp(live->verdicts[i].config, live->ref_config) == 0;
        compared += !is_ref;
        wrong += !live->verdicts[i].agreed;
    }
    /* the Default configuration, the reference group's, agrees with itself */
    if (default_ref && live->ref_config && live->nverdicts < live->cap) {
        char *c = cli_format("%s", live->ref_config);
        if (c) live->verdicts[live->nverdicts++] = (verdict){c, true};
    }
    diagnosis dg;
    if (!diagnose(live->names, live->nnames, live->verdicts, live->nverdicts, &dg)) return cli_format("out of memory");
    json_t *dj = json_object(), *vals = json_array();
    for (size_t i = 0; i < dg.nagreeing; i++) json_array_append_new(vals, json_string(dg.agreeing[i]));
    json_object_set_new(dj, "compared", json_integer((json_int_t)compared));
    json_object_set_new(dj, "disagreed", json_integer((json_int_t)wrong));
    json_object_set_new(dj, "parameter", dg.param != (size_t)-1 ? json_string(live->names[dg.param]) : json_null());
    json_object_set_new(dj, "agreeing_values", vals);
    json_object_set_new(dj, "message", json_string(dg.message));
    json_object_set_new(dj, "library", json_string(why));
    char *err = NULL;
    if (txt) {
        fprintf(txt, "validation stopped the tuning: %zu of the first %zu configurations compared with the reference disagreed with it "
                     "(of %zu configurations; the rest were not run)\n%s\n", wrong, compared, total, dg.message);
    } else {
        fprintf(stderr, "kerntune tune: %s\n", dg.message);
    }
    if (o->t4 || o->report) { /* what was decided before the stop, and why it stopped */
        json_t *doc = t4_wrap(p, dev_name, live->records ? json_deep_copy(live->records) : json_array()), *x = json_object();
        json_object_update(x, (json_t *)vinfo);
        json_object_set(x, "disagreement", dj);
        json_object_set_new(x, "wall_s", json_real(wall));
        json_object_set_new(doc, "x-kerntune", x);
        char *w = o->t4 ? write_json(o->t4, doc) : NULL;
        if (w) err = cli_format("--t4 %s: cannot be written: %s", o->t4, w);
        free(w);
        if (err == NULL && o->report) {
            report_input in = {o->t4 ? o->t4 : "this run", doc};
            char *why = report_write(o->report, &in, 1, NULL);
            if (why) err = cli_format("--report %s: %s", o->report, why);
            else if (txt) fprintf(stderr, "kerntune tune: report written to %s\n", o->report);
            free(why);
        }
        json_decref(doc);
    }
    if (o->json && err == NULL) {
        json_t *j = json_object();
        json_object_set_new(j, "problem", json_string(p->name));
        json_object_set_new(j, "device", json_string(dev_name));
        json_object_set_new(j, "configurations", json_integer((json_int_t)total));
        json_object_update(j, (json_t *)vinfo);
        json_object_set_new(j, "validated", json_true());
        json_object_set_new(j, "stopped", json_string("disagreement"));
        json_object_set(j, "disagreement", dj);
        json_object_set_new(j, "best", json_null());
        json_object_set_new(j, "builds", json_integer((json_int_t)builds)); /* variants compiled before the stop, */
        json_object_set_new(j, "artifacts_found", json_integer((json_int_t)found)); /* and found compiled */
        json_object_set_new(j, "tuning_time_s", json_real(wall));
        char *text = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(17));
        if (text) fprintf(doc_out, "%s\n", text);
        free(text);
        json_decref(j);
    }
    json_decref(dj);
    diagnosis_free(&dg);
    return err;
}


