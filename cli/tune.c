/*
 * tune.c - `kerntune tune PROBLEM.json`: tunes a T1 problem through the public API.
 *
 * The problem's ConfigurationSpace becomes a kt_space, its kernel a variant group of one op on
 * the device its Language asks for, its Arguments buffers filled as FillType says; the op is
 * tuned with kt_op_tune and its decision's units become the table, the --json summary and the
 * T4 results. With --simulate the device is the replay backend (replay.c): the same engine,
 * served recorded runtimes, with no kernel source and no hardware.
 */
#include "tune.h"

#include "replay.h"
#include "t1.h"
#include "t4.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void help_tune(FILE *out) {
    fprintf(out,
            "usage: kerntune tune PROBLEM.json [options]\n"
            "\n"
            "Tunes a T1 problem: compiles the kernel's variants over the problem's space on the device\n"
            "its Language names (C: the host CPU, OpenCL, CUDA), validates each against a reference,\n"
            "measures them, and prints the best configuration with a short table.\n"
            "\n"
            "options:\n"
            "  --problem-size N[,N...]  override the problem's ProblemSize\n"
            "  --define NAME=VALUE      fix a tuning parameter to one value (repeatable)\n"
            "  --budget N | Ns          stop after N configurations, or after N seconds\n"
            "  --strategy NAME          search strategy: exhaustive (the default and only one yet)\n"
            "  --measure NAME           how configurations are measured: race (the default: drop a\n"
            "                           configuration as soon as it is slower than the best with 99%%\n"
            "                           confidence), triton (as Triton's do_bench: 25 ms of warm-up,\n"
            "                           100 ms of runs), kerneltuner (1 warm-up, 7 runs, the mean), or\n"
            "                           recorded (with --simulate: race on each configuration's\n"
            "                           recorded mean instead of its recorded runs)\n"
            "  --device N               the kerntune device to use (see 'kerntune devices')\n"
            "  --seed N                 seed of Random fills, and of sampled replay (default 1)\n"
            "  --t4 FILE                write T4 results of every configuration tried, failures included\n"
            "  --simulate FILE          replay a T4 file (gzip or plain) or a Kernel Tuner cache file\n"
            "                           instead of running: no kernel source and no device needed\n"
            "  --cache PATH|off         the persistent cache of decisions (default: KERNTUNE_CACHE, else\n"
            "                           ~/.cache/kerntune/cache.db): a decision recorded there for this\n"
            "                           problem, device and kerntune version is used without measuring;\n"
            "                           a new one is recorded. --simulate never uses it. With --t4, pass\n"
            "                           --cache off to measure every configuration again\n"
            "  --timeout S              the longest one run of a configuration may take (default 10);\n"
            "                           every configuration runs in a worker process, so one that\n"
            "                           crashes or hangs is disqualified (T4: runtime, timeout)\n"
            "  --json                   print a machine-readable summary on stdout\n"
            "  --quiet                  print nothing but errors (and the --json summary)\n"
            "  -h, --help               print this help\n"
            "\n"
            "Reference for validation: the problem's ReferenceArguments when it has them, else the\n"
            "configuration of the parameters' Default values, else the first configuration.\n"
            "Exit status: 0 when a valid configuration was found, 1 when none was or the problem is\n"
            "wrong, 2 on a usage error.\n");
}

typedef struct options {
    const char *problem;
    int64_t problem_size[8];
    size_t nproblem;
    const char *defines[64];
    size_t ndefines;
    size_t budget_count;
    double budget_seconds;
    const char *strategy;
    const char *measure;
    long device;
    uint64_t seed;
    bool seed_given;
    const char *t4;
    const char *simulate;
    const char *cache;
    double timeout;
    bool json;
    bool quiet;
} options;

static int usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage(const char *fmt, ...) {
    fprintf(stderr, "kerntune tune: ");
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nrun 'kerntune tune --help' for the options\n");
    return 2;
}

/* Parses a non-negative integer; false when text is not one. */
static bool parse_int(const char *text, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (*text == '\0' || *end != '\0' || errno || v < 0) return false;
    *out = v;
    return true;
}

static int parse_options(int argc, char **argv, options *o) {
    memset(o, 0, sizeof *o);
    o->strategy = "exhaustive";
    o->measure = "race";
    o->timeout = 10;
    o->device = -1;
    o->seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        char name[64];
        const char *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
        snprintf(name, sizeof name, "%.*s", eq ? (int)(eq - a) : (int)strlen(a), a);
        static const char *const with_value[] = {"--problem-size", "--define", "--budget", "--strategy", "--measure",
                                                 "--device", "--seed", "--t4", "--simulate", "--cache", "--timeout"};
        bool takes = false;
        for (size_t k = 0; k < sizeof with_value / sizeof with_value[0]; k++) takes = takes || strcmp(name, with_value[k]) == 0;
        if (takes) {
            if (eq) v = eq + 1;
            else if (i + 1 < argc) v = argv[++i];
            else return usage("%s needs a value", name);
        }
        if (strcmp(name, "--json") == 0) o->json = true;
        else if (strcmp(name, "--quiet") == 0) o->quiet = true;
        else if (strcmp(name, "--problem-size") == 0) {
            char buf[256];
            snprintf(buf, sizeof buf, "%s", v);
            char *save = NULL;
            o->nproblem = 0;
            for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                if (o->nproblem == 8 || !parse_int(t, &o->problem_size[o->nproblem]))
                    return usage("--problem-size '%s': expected up to 8 comma-separated integers", v);
                o->nproblem++;
            }
            if (o->nproblem == 0) return usage("--problem-size '%s': expected integers", v);
        } else if (strcmp(name, "--define") == 0) {
            const char *e = strchr(v, '=');
            if (e == NULL || e == v || e[1] == '\0') return usage("--define '%s': expected NAME=VALUE", v);
            if (o->ndefines == 64) return usage("at most 64 --define options");
            o->defines[o->ndefines++] = v;
        } else if (strcmp(name, "--budget") == 0) {
            size_t len = strlen(v);
            int64_t n;
            if (len > 1 && v[len - 1] == 's') {
                char *end;
                o->budget_seconds = strtod(v, &end);
                if (end != v + len - 1 || !(o->budget_seconds > 0))
                    return usage("--budget '%s': expected a count of configurations (N) or seconds (Ns)", v);
            } else if (parse_int(v, &n) && n > 0) {
                o->budget_count = (size_t)n;
            } else {
                return usage("--budget '%s': expected a count of configurations (N) or seconds (Ns)", v);
            }
        } else if (strcmp(name, "--strategy") == 0) {
            if (strcmp(v, "exhaustive") != 0) return usage("--strategy '%s': this version has exhaustive only", v);
            o->strategy = v;
        } else if (strcmp(name, "--measure") == 0) {
            kt_policy pol;
            if (strcmp(v, "recorded") != 0 && (kt_policy_parse(v, &pol) != KT_OK || pol == KT_POLICY_FIXED))
                return usage("--measure '%s': expected race, triton, kerneltuner or recorded", v);
            o->measure = v;
        } else if (strcmp(name, "--device") == 0) {
            int64_t n;
            if (!parse_int(v, &n)) return usage("--device '%s': expected a device number", v);
            o->device = (long)n;
        } else if (strcmp(name, "--seed") == 0) {
            int64_t n;
            if (!parse_int(v, &n)) return usage("--seed '%s': expected a non-negative integer", v);
            o->seed = (uint64_t)n;
            o->seed_given = true;
        } else if (strcmp(name, "--t4") == 0) o->t4 = v;
        else if (strcmp(name, "--simulate") == 0) o->simulate = v;
        else if (strcmp(name, "--cache") == 0) o->cache = v;
        else if (strcmp(name, "--timeout") == 0) {
            char *end = NULL;
            o->timeout = strtod(v, &end);
            if (end == v || *end != '\0' || !(o->timeout > 0) || o->timeout > 1e6)
                return usage("--timeout '%s': expected seconds, more than 0", v);
        }
        else if (a[0] == '-') return usage("unknown option '%s'", a);
        else if (o->problem == NULL) o->problem = a;
        else return usage("unexpected argument '%s' (one problem file at a time)", a);
    }
    if (o->problem == NULL) return usage("no problem file given");
    if (strcmp(o->measure, "recorded") == 0 && o->simulate == NULL) return usage("--measure recorded needs --simulate");
    return 0;
}

/* ---- progress ------------------------------------------------------------------------------ */

typedef struct progress {
    double start, last;
    bool shown;
    size_t hidden; /* units that are not the problem's configurations (the reference) */
} progress;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void on_progress(size_t done, size_t total, size_t valid, size_t failed, double best_ns, void *user) {
    progress *p = user;
    double t = now_s();
    if (done < total && t - p->last < 0.1) return; /* at most ten updates a second */
    p->last = t;
    done = done > p->hidden ? done - p->hidden : 0;
    total = total > p->hidden ? total - p->hidden : 0;
    double elapsed = t - p->start, eta = done ? elapsed * (double)(total - done) / (double)done : 0;
    char best[32] = "-";
    if (best_ns >= 0) snprintf(best, sizeof best, "%.4g ms", best_ns / 1e6);
    fprintf(stderr, "\r\033[K  %zu/%zu configurations, %zu valid, %zu failed, best %s, %.1f s elapsed, ETA %.1f s", done,
            total, valid, failed, best, elapsed, eta);
    p->shown = true;
}

/* ---- arguments ----------------------------------------------------------------------------- */

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Writes value as one element of type t. */
static void put(kt_type t, void *dst, double value) {
    switch (t) {
    case KT_TYPE_I8: *(int8_t *)dst = (int8_t)value; break;
    case KT_TYPE_U8: *(uint8_t *)dst = (uint8_t)value; break;
    case KT_TYPE_I16: *(int16_t *)dst = (int16_t)value; break;
    case KT_TYPE_U16: *(uint16_t *)dst = (uint16_t)value; break;
    case KT_TYPE_I32: *(int32_t *)dst = (int32_t)value; break;
    case KT_TYPE_U32: *(uint32_t *)dst = (uint32_t)value; break;
    case KT_TYPE_I64: *(int64_t *)dst = (int64_t)value; break;
    case KT_TYPE_U64: *(uint64_t *)dst = (uint64_t)value; break;
    case KT_TYPE_F64: *(double *)dst = value; break;
    case KT_TYPE_F16: { /* float to half, truncating: test data only */
        float f = (float)value;
        uint32_t x;
        memcpy(&x, &f, 4);
        uint16_t h = (uint16_t)(((x >> 16) & 0x8000) | ((((x >> 23) & 0xff) - 112) << 10 & 0x7c00) | ((x >> 13) & 0x3ff));
        if (f == 0) h = 0;
        memcpy(dst, &h, 2);
        break;
    }
    default: *(float *)dst = (float)value; break;
    }
}

/* Fills count elements of type t as fill says; err names the argument on failure. */
static bool fill_data(const t1 *p, const t1_arg *a, size_t idx, void *data, size_t count, uint64_t seed, char *err,
                      size_t errlen) {
    size_t es = kt_type_size(a->type);
    if (a->fill == T1_FILL_BINARY) {
        char path[8200];
        if (a->data_source[0] == '/') snprintf(path, sizeof path, "%s", a->data_source);
        else snprintf(path, sizeof path, "%s/%s", p->dir, a->data_source);
        FILE *f = fopen(path, "rb");
        if (f == NULL) {
            snprintf(err, errlen, "argument '%.200s': cannot open its DataSource %.2000s: %.200s", a->name, path, strerror(errno));
            return false;
        }
        size_t got = fread(data, 1, count * es, f);
        fclose(f);
        if (got != count * es) {
            snprintf(err, errlen, "argument '%.200s': %.2000s holds %zu bytes, %zu expected", a->name, path, got, count * es);
            return false;
        }
        return true;
    }
    uint64_t state = (a->has_seed ? (uint64_t)a->seed : seed) ^ (0x9e3779b97f4a7c15ull * (idx + 1));
    bool is_float = a->type == KT_TYPE_F32 || a->type == KT_TYPE_F64 || a->type == KT_TYPE_F16;
    double scale = a->fill_value > 0 ? a->fill_value : is_float ? 1.0 : 100.0;
    for (size_t i = 0; i < count; i++) {
        double v = a->fill_value;
        if (a->fill == T1_FILL_RANDOM) {
            double u = (double)(splitmix(&state) >> 11) * 0x1p-53; /* [0, 1) */
            v = is_float ? u * scale : floor(u * scale);
        }
        put(a->type, (char *)data + i * es, v);
    }
    return true;
}

/* ---- references ---------------------------------------------------------------------------- */

/* The expected contents of ReferenceArguments, written into their targets by the reference
 * function (on the device when the op runs on one). */
typedef struct reference {
    kt_context *ctx;
    size_t device;
    bool host;
    size_t n;
    size_t arg[64];
    void *data[64];
    size_t bytes[64];
} reference;

static int write_reference(const kt_arg *args, size_t nargs, void *user, kt_result *result) {
    (void)nargs, (void)result;
    reference *r = user;
    for (size_t i = 0; i < r->n; i++) {
        const kt_arg *a = &args[r->arg[i]];
        if (a->bytes != r->bytes[i]) return 1;
        if (r->host) memcpy(a->ptr, r->data[i], r->bytes[i]);
        else if (kt_device_write(r->ctx, r->device, a->ptr, r->data[i], r->bytes[i]) != KT_OK) return 2;
    }
    return 0;
}

/* A Python literal of a JSON value, for a one-value parameter list. */
static void literal(const json_t *v, char *buf, size_t len) {
    if (json_is_string(v)) snprintf(buf, len, "'%s'", json_string_value(v));
    else if (json_is_true(v)) snprintf(buf, len, "True");
    else if (json_is_false(v)) snprintf(buf, len, "False");
    else t4_value_text(v, buf, len);
}

/* ---- the command ------------------------------------------------------------------------- */

#define FAIL(...)                                   \
    do {                                            \
        fprintf(stderr, "kerntune tune: " __VA_ARGS__); \
        fprintf(stderr, "\n");                      \
        goto done;                                  \
    } while (0)
#define KT(call)                                                                                 \
    do {                                                                                         \
        kt_status st_ = (call);                                                                  \
        if (st_ != KT_OK) FAIL("%s: %s", kt_status_name(st_), kt_last_error());                 \
    } while (0)

/* Builds the space of the problem (with its --define and --problem-size overrides). When
 * defaults is set, each parameter is fixed to its Default (NULL when one has none). */
static kt_space *make_space(const t1 *p, const options *o, bool defaults, const int64_t *ps, size_t nps, char *err,
                            size_t errlen) {
    kt_space *sp = NULL;
    if (kt_space_create(&sp) != KT_OK) return NULL;
    bool ok = true;
    for (size_t i = 0; ok && i < p->nparams; i++) {
        const t1_param *tp = &p->params[i];
        char values[512];
        snprintf(values, sizeof values, "%s", tp->values);
        for (size_t d = 0; d < o->ndefines; d++) {
            size_t len = strcspn(o->defines[d], "=");
            if (strlen(tp->name) == len && strncmp(tp->name, o->defines[d], len) == 0)
                snprintf(values, sizeof values, "[%s]", o->defines[d] + len + 1);
        }
        if (defaults) {
            if (tp->dflt == NULL) {
                kt_space_destroy(sp);
                return NULL;
            }
            char lit[256];
            literal(tp->dflt, lit, sizeof lit);
            snprintf(values, sizeof values, "[%s]", lit);
        }
        if (kt_space_add_param(sp, tp->name, values) != KT_OK) {
            snprintf(err, errlen, "%.1000s: ConfigurationSpace.TuningParameters[%zu].Values: %.2000s", p->path, i, kt_last_error());
            ok = false;
        }
    }
    for (size_t d = 0; ok && d < o->ndefines; d++) {
        size_t len = strcspn(o->defines[d], "=");
        bool found = false;
        for (size_t i = 0; i < p->nparams; i++) found = found || (strlen(p->params[i].name) == len && strncmp(p->params[i].name, o->defines[d], len) == 0);
        if (!found) {
            snprintf(err, errlen, "--define %.*s: the problem has no parameter of that name", (int)len, o->defines[d]);
            ok = false;
        }
    }
    ok = ok && kt_space_add_input(sp, "ProblemSize") == KT_OK && kt_space_bind_ints(sp, "ProblemSize", ps, nps) == KT_OK;
    for (size_t c = 0; ok && c < p->nconditions; c++) {
        if (kt_space_add_constraint(sp, p->conditions[c]) != KT_OK) {
            snprintf(err, errlen, "%.1000s: ConfigurationSpace.Conditions[%zu].Expression: %.2000s", p->path, c, kt_last_error());
            ok = false;
        }
    }
    char shm[32];
    snprintf(shm, sizeof shm, "%lld", (long long)p->shared_memory);
    if (ok && kt_space_set_geometry(sp, p->geometry, p->global, p->local, p->shared_memory ? shm : NULL) != KT_OK) {
        snprintf(err, errlen, "%.1000s: KernelSpecification.GlobalSize/LocalSize: %.2000s", p->path, kt_last_error());
        ok = false;
    }
    if (!ok) {
        kt_space_destroy(sp);
        return NULL;
    }
    return sp;
}

/* Reads the kernel source; NULL (with the resolved path in err) when it cannot. */
static char *read_source(const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(err, errlen, "the kernel file %.2000s cannot be read: %.200s", path, strerror(errno));
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    fclose(f);
    if (s == NULL) snprintf(err, errlen, "the kernel file %.2000s cannot be read", path);
    else s[n] = '\0';
    return s;
}

/* Picks the device: --device, else the first device of the Language's backend (T1's Device.Id
 * counts among those). */
static long pick_device(kt_context *ctx, const t1 *p, const options *o, const char *backend, char *err, size_t errlen) {
    size_t n = kt_context_device_count(ctx);
    if (o->device >= 0) {
        if ((size_t)o->device >= n) {
            snprintf(err, errlen, "--device %ld: no such device (there are %zu; see 'kerntune devices')", o->device, n);
            return -1;
        }
        const char *b = kt_device_backend(kt_context_device(ctx, (size_t)o->device));
        if (strcmp(b, backend) != 0) {
            snprintf(err, errlen, "--device %ld is a %s device; the problem's Language %s needs %s", o->device, b, p->language, backend);
            return -1;
        }
        return o->device;
    }
    long seen = 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(kt_device_backend(kt_context_device(ctx, i)), backend) != 0) continue;
        if (p->device_id < 0 || seen++ == p->device_id) return (long)i;
    }
    int k = snprintf(err, errlen, "no %s device for the problem's Language %s", backend, p->language);
    for (size_t i = 0; i < kt_context_unavailable_count(ctx) && k > 0 && (size_t)k < errlen; i++)
        k += snprintf(err + k, errlen - (size_t)k, "; %s", kt_context_unavailable(ctx, i));
    return -1;
}

static const char *invalidity(kt_outcome o) {
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

static double mean_ms(const kt_decision *d, size_t u) {
    const double *t;
    size_t n;
    if (kt_decision_unit_runtimes(d, u, &t, &n) != KT_OK || n == 0) return -1;
    double s = 0;
    for (size_t i = 0; i < n; i++) s += t[i];
    return s / (double)n / 1e6;
}

static bool write_t4(const char *path, const t1 *p, kt_op *op, const kt_decision *d, const char *device,
                     const char *const *names, size_t nnames) {
    json_t *root = json_object(), *results = json_array();
    char stamp[64];
    time_t now = time(NULL);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    for (size_t u = 0; u < kt_decision_unit_count(d); u++) {
        if (strcmp(kt_op_candidate_name(op, kt_decision_unit_candidate(d, u)), "kernel") != 0) continue;
        kt_outcome o = kt_decision_unit_outcome(d, u);
        const char *inv = invalidity(o);
        if (inv == NULL) continue; /* not tried (budget) */
        json_t *r = json_object(), *times = json_object(), *runtimes = json_array();
        const double *t;
        size_t n = 0;
        if (kt_decision_unit_runtimes(d, u, &t, &n) == KT_OK)
            for (size_t i = 0; i < n; i++) json_array_append_new(runtimes, json_real(t[i] / 1e6));
        json_object_set_new(r, "timestamp", json_string(stamp));
        json_object_set_new(r, "configuration", t4_configuration(kt_decision_unit_config(d, u), names, nnames));
        json_object_set_new(times, "compilation", json_real(kt_decision_unit_build_ms(d, u)));
        json_object_set_new(times, "framework", json_real(0));
        json_object_set_new(times, "search_algorithm", json_real(0));
        json_object_set_new(times, "validation", json_real(0));
        json_object_set_new(times, "runtimes", runtimes);
        json_object_set_new(r, "times", times);
        json_object_set_new(r, "invalidity", json_string(inv));
        json_object_set_new(r, "correctness", json_integer(o == KT_OUTCOME_MEASURED));
        json_t *m = json_object();
        json_object_set_new(m, "name", json_string("time"));
        if (o == KT_OUTCOME_MEASURED) json_object_set_new(m, "value", json_real(mean_ms(d, u)));
        else json_object_set_new(m, "value", json_string(o == KT_OUTCOME_BUILD_FAILED ? "CompilationFailedConfig"
                                                           : o == KT_OUTCOME_FAILED || o == KT_OUTCOME_CRASHED ? "RuntimeFailedConfig"
                                                           : o == KT_OUTCOME_TIMEOUT ? "TimeoutConfig"
                                                                                      : "InvalidConfig"));
        json_object_set_new(m, "unit", json_string("ms"));
        json_t *ms = json_array();
        json_array_append_new(ms, m);
        json_object_set_new(r, "measurements", ms);
        json_t *objs = json_array();
        json_array_append_new(objs, json_string("time"));
        json_object_set_new(r, "objectives", objs);
        const char *why = kt_decision_unit_message(d, u);
        if (why) json_object_set_new(r, "diagnostic", json_string(why));
        json_array_append_new(results, r);
    }
    json_t *meta = json_object();
    json_object_set_new(meta, "timeunit", json_string("milliseconds"));
    json_object_set_new(meta, "problem", json_string(p->name));
    json_object_set_new(meta, "device", json_string(device));
    char gen[64];
    snprintf(gen, sizeof gen, "kerntune %s", kt_version_string());
    json_object_set_new(meta, "generator", json_string(gen));
    json_object_set_new(root, "schema_version", json_string("1.0.0"));
    json_object_set_new(root, "metadata", meta);
    json_object_set_new(root, "results", results);
    int rc = json_dump_file(root, path, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
    json_decref(root);
    return rc == 0;
}

int run_tune(int argc, char **argv) {
    options o;
    int rc = parse_options(argc, argv, &o);
    if (rc != 0) return rc;
    rc = 1;
    t1 p;
    char err[4096];
    kt_context *ctx = NULL;
    kt_space *sp = NULL, *ref_sp = NULL;
    char *source = NULL;
    replay_data replay = {0};
    void *host[64] = {0}, *dev_buf[64] = {0};
    size_t nbuf = 0;
    long dev = -1;
    reference ref = {0};
    const char *names[64];
    if (!t1_load(o.problem, &p, stderr, err, sizeof err)) {
        fprintf(stderr, "kerntune tune: %s\n", err);
        t1_free(&p);
        return 1;
    }
    if (p.nargs > 64 || p.nparams > 64) FAIL("%s: at most 64 arguments and 64 parameters", o.problem);
    for (size_t i = 0; i < p.nparams; i++) names[i] = p.params[i].name;
    const int64_t *ps = o.nproblem ? o.problem_size : p.problem_size;
    size_t nps = o.nproblem ? o.nproblem : p.nproblem;

    KT(kt_context_create(&ctx));
    kt_policy policy = KT_POLICY_RACE;
    if (strcmp(o.measure, "recorded") != 0) KT(kt_policy_parse(o.measure, &policy));
    KT(kt_context_set_policy(ctx, policy));
    KT(kt_context_set_cache(ctx, o.simulate ? "off" : o.cache)); /* replay's device is not a device */
    if (o.simulate) {
        replay.source = o.simulate;
        replay.recorded = strcmp(o.measure, "recorded") == 0;
        replay.sampled = o.seed_given;
        replay.seed = o.seed;
        if (!t4_read(o.simulate, names, p.nparams, &replay.recs, err, sizeof err)) FAIL("%s", err);
        replay_bind(&replay);
        KT(kt_context_add_backend(ctx, replay_backend()));
        char dir[] = "/tmp/kerntune-replay-XXXXXX"; /* replay artifacts are worthless: keep them out of the cache */
        if (mkdtemp(dir) == NULL) FAIL("cannot create a temporary directory: %s", strerror(errno));
        KT(kt_context_set_artifact_dir(ctx, dir));
        for (size_t i = 0; i < kt_context_device_count(ctx); i++)
            if (strcmp(kt_device_backend(kt_context_device(ctx, i)), "replay") == 0) dev = (long)i;
    } else {
        const char *backend = strcmp(p.language, "C") == 0 ? "c" : strcmp(p.language, "OpenCL") == 0 ? "opencl" : "cuda";
        if ((dev = pick_device(ctx, &p, &o, backend, err, sizeof err)) < 0) FAIL("%s", err);
        if ((source = read_source(p.kernel_file, err, sizeof err)) == NULL) FAIL("%s: KernelSpecification.KernelFile: %s", o.problem, err);
    }
    bool host_dev = strcmp(kt_device_backend(kt_context_device(ctx, (size_t)dev)), "c") == 0;
    const char *dev_name = kt_device_name(kt_context_device(ctx, (size_t)dev));

    if ((sp = make_space(&p, &o, false, ps, nps, err, sizeof err)) == NULL) FAIL("%s", err[0] ? err : kt_last_error());
    size_t total = 0;
    KT(kt_space_enumerate(sp, &total));

    kt_op *op = NULL;
    KT(kt_op_create(ctx, p.name, &op));
    KT(kt_op_set_device(op, (size_t)dev));
    /* a configuration that crashes or hangs must not take the command down */
    KT(kt_op_set_isolation(op, o.simulate ? KT_ISOLATE_OFF : KT_ISOLATE_ON));
    KT(kt_op_set_timeout(op, o.timeout));
    kt_arg args[64];
    for (size_t i = 0; i < p.nargs; i++) {
        const t1_arg *a = &p.args[i];
        if (!a->vector) {
            KT(kt_op_add_scalar(op, a->name, a->type));
            args[i] = (kt_arg){.type = a->type};
            if (a->type == KT_TYPE_F32) args[i].f32 = (float)a->fill_value;
            else if (a->type == KT_TYPE_F64) args[i].f64 = a->fill_value;
            else if (a->type >= KT_TYPE_U8 && a->type <= KT_TYPE_U64) args[i].u = (uint64_t)a->fill_value;
            else args[i].i = (int64_t)a->fill_value;
            continue;
        }
        KT(kt_op_add_buffer(op, a->name, a->type, a->access));
        int64_t count = a->size;
        if (a->size_expr && kt_space_eval_int(sp, a->size_expr, &count) != KT_OK)
            FAIL("%s: KernelSpecification.Arguments[%zu].Size: %s", o.problem, i, kt_last_error());
        if (count <= 0) FAIL("%s: KernelSpecification.Arguments[%zu].Size: %lld elements; expected at least 1", o.problem, i, (long long)count);
        if (o.simulate) count = 1; /* replay reads no data */
        size_t bytes = (size_t)count * kt_type_size(a->type);
        host[i] = malloc(bytes);
        if (host[i] == NULL) FAIL("argument '%s': cannot allocate %zu bytes", a->name, bytes);
        nbuf = i + 1;
        if (!o.simulate && !fill_data(&p, a, i, host[i], (size_t)count, o.seed, err, sizeof err)) FAIL("%s", err);
        if (host_dev) {
            args[i] = kt_arg_buf(host[i], bytes);
        } else {
            KT(kt_device_alloc(ctx, (size_t)dev, bytes, &dev_buf[i]));
            KT(kt_device_write(ctx, (size_t)dev, dev_buf[i], host[i], bytes));
            args[i] = kt_arg_buf(dev_buf[i], bytes);
        }
    }
    /* the reference group (the Default configuration) goes first: it is the budget's unit 0 */
    if (!o.simulate && p.nrefs == 0 && (ref_sp = make_space(&p, &o, true, ps, nps, err, sizeof err)) != NULL) {
        KT(kt_op_add_variants(op, "reference", ref_sp, source, p.kernel_name, p.options, p.noptions));
        KT(kt_op_set_default(op, "reference"));
    }
    KT(kt_op_add_variants(op, "kernel", sp, o.simulate ? "" : source, p.kernel_name, p.options, p.noptions));
    if (o.simulate) {
        KT(kt_op_set_validation(op, 0)); /* no outputs to compare: the recorded correctness stands */
    } else if (p.nrefs > 0) { /* the expected contents from ReferenceArguments */
        ref = (reference){.ctx = ctx, .device = (size_t)dev, .host = host_dev};
        for (size_t r = 0; r < p.nrefs; r++) {
            size_t a = 0;
            while (strcmp(p.args[a].name, p.refs[r].target) != 0) a++;
            const t1_arg *ta = &p.args[a];
            t1_arg as_ref = *ta;
            as_ref.fill = p.refs[r].fill, as_ref.fill_value = p.refs[r].fill_value, as_ref.data_source = p.refs[r].data_source;
            ref.arg[ref.n] = a;
            ref.bytes[ref.n] = args[a].bytes;
            ref.data[ref.n] = malloc(args[a].bytes);
            if (ref.data[ref.n] == NULL) FAIL("out of memory");
            ref.n++;
            if (!fill_data(&p, &as_ref, a, ref.data[ref.n - 1], args[a].bytes / kt_type_size(ta->type), o.seed, err, sizeof err))
                FAIL("ReferenceArguments[%zu]: %s", r, err);
        }
        KT(kt_op_set_reference_fn(op, write_reference, &ref));
    } else if (ref_sp != NULL) {
        /* the configuration of the parameters' Default values is the reference (added above): it
         * validates, but the winner comes from the space the user asked for (--define included) */
        KT(kt_op_set_reference_only(op, 1));
    } else {
        KT(kt_op_set_reference(op, "kernel")); /* no defaults: the first configuration */
    }
    size_t budget = o.budget_count ? o.budget_count : (size_t)p.budget_count;
    if (!o.budget_count && p.budget_fraction > 0) budget = (size_t)ceil(p.budget_fraction * (double)total);
    double seconds = o.budget_seconds > 0 ? o.budget_seconds : p.budget_seconds;
    if (budget || seconds > 0) KT(kt_op_set_budget(op, budget, seconds));
    progress prog = {now_s(), 0, false, ref_sp ? 1 : 0};
    if (!o.quiet && isatty(2)) KT(kt_context_set_progress_fn(ctx, on_progress, &prog));
    if (!o.quiet)
        fprintf(stderr, "kerntune tune: %s: %zu configurations on %s%s\n", p.name, total, dev_name,
                o.simulate ? (replay.recorded ? " (recorded means)" : " (recorded runs)") : "");

    double t0 = now_s();
    kt_status st = kt_op_tune(op, args, p.nargs);
    double wall = now_s() - t0;
    if (prog.shown) fprintf(stderr, "\n");
    const kt_decision *d = NULL;
    if (st == KT_OK) st = kt_op_decision(op, args, p.nargs, &d);
    if (st != KT_OK && st != KT_ERR_ALL_FAILED) FAIL("%s: %s", kt_status_name(st), kt_last_error());
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

    /* the kernel's units: counts; the best is the library's winner, always a configuration of the
     * kernel's space (the reference group only validates) */
    size_t measured = 0, failed = 0, not_run = 0, best = (size_t)-1, fails[8] = {0};
    for (size_t u = 0; d && u < kt_decision_unit_count(d); u++) {
        if (strcmp(kt_op_candidate_name(op, kt_decision_unit_candidate(d, u)), "kernel") != 0) continue;
        kt_outcome oc = kt_decision_unit_outcome(d, u);
        if (oc == KT_OUTCOME_MEASURED) measured++;
        else if (oc == KT_OUTCOME_NOT_RUN) not_run++;
        else failed++, fails[oc]++;
    }
    double best_ms = -1;
    if (st == KT_OK) {
        best = kt_decision_winner_unit(d);
        best_ms = kt_decision_unit_time_ns(d, best) / 1e6;
    }
    bool cached = d && kt_decision_source_of(d) == KT_SOURCE_CACHE;
    kt_cache *cache = kt_context_cache(ctx);
    const char *cache_path = cache ? kt_cache_path(cache) : NULL;
    uint64_t runs = d ? kt_decision_total_runs(d) : 0;
    double run_ns = d ? kt_decision_measure_ns(d) : 0, confidence = d ? kt_decision_confidence(d) : 0;
    const t4_record *chosen = NULL, *truth = NULL; /* replay: the chosen configuration's record, the recorded best */
    if (o.simulate) {
        if (best != (size_t)-1) chosen = replay_find(&replay, kt_decision_unit_config(d, best));
        for (size_t i = 0; i < replay.recs.n; i++) {
            const t4_record *r = &replay.recs.recs[i];
            if (strcmp(r->invalidity, "correct") == 0 && r->mean_ms >= 0 && (truth == NULL || r->mean_ms < truth->mean_ms)) truth = r;
        }
    }
    if (replay.recorded && chosen) best_ms = chosen->mean_ms; /* the recorded objective itself */
    if (!o.quiet) {
        if (best != (size_t)-1) {
            if (cached)
                printf("best: %s  %.6g ms (recorded in the cache %s; confidence %.3f): nothing was compiled or measured\n",
                       kt_decision_unit_config(d, best), best_ms, cache_path, confidence);
            else
                printf("best: %s  %.6g ms (mean of %u runs; confidence %.3f)\n", kt_decision_unit_config(d, best), best_ms,
                       kt_decision_unit_runs(d, best), confidence);
        } else {
            printf("no configuration is valid\n");
        }
        if (!cached) printf("%zu configurations: %zu measured, %zu failed (%zu compile, %zu runtime, %zu crashed, %zu timeout, %zu correctness, %zu rejected), %zu not run\n",
               total, measured, failed, fails[KT_OUTCOME_BUILD_FAILED], fails[KT_OUTCOME_FAILED], fails[KT_OUTCOME_CRASHED],
               fails[KT_OUTCOME_TIMEOUT], fails[KT_OUTCOME_INVALID],
               fails[KT_OUTCOME_REJECTED], not_run);
        if (!cached) printf("measurement (%s): %llu runs, %.6g s of kernel time%s; tuning took %.3g s\n", kt_policy_name(policy),
               (unsigned long long)runs, run_ns / 1e9, o.simulate ? " (simulated)" : "", wall);
        if (chosen && truth)
            printf("recorded: the chosen configuration's mean is %.6g ms, the recorded best %.6g ms (%s): ratio %.4f\n",
                   chosen->mean_ms, truth->mean_ms, truth->key, chosen->mean_ms / truth->mean_ms);
        /* the ten fastest */
        size_t order[10], k = 0;
        for (size_t u = 0; d && u < kt_decision_unit_count(d); u++) {
            if (kt_decision_unit_outcome(d, u) != KT_OUTCOME_MEASURED) continue;
            if (strcmp(kt_op_candidate_name(op, kt_decision_unit_candidate(d, u)), "kernel") != 0) continue;
            size_t pos = k < 10 ? k++ : 10;
            while (pos > 0 && kt_decision_unit_time_ns(d, order[pos - 1]) > kt_decision_unit_time_ns(d, u)) {
                if (pos < 10) order[pos] = order[pos - 1];
                pos--;
            }
            if (pos < 10) order[pos] = u;
        }
        if (k > 1) {
            printf("%4s  %12s  %s\n", "rank", "time (ms)", "configuration");
            for (size_t i = 0; i < k; i++)
                printf("%4zu  %12.6g  %s\n", i + 1, kt_decision_unit_time_ns(d, order[i]) / 1e6, kt_decision_unit_config(d, order[i]));
        }
    }
    if (o.t4 && d && !write_t4(o.t4, &p, op, d, dev_name, names, p.nparams)) FAIL("cannot write %s", o.t4);
    if (o.json) {
        json_t *j = json_object();
        json_object_set_new(j, "problem", json_string(p.name));
        json_object_set_new(j, "device", json_string(dev_name));
        json_object_set_new(j, "configurations", json_integer((json_int_t)total));
        json_object_set_new(j, "measured", json_integer((json_int_t)measured));
        json_object_set_new(j, "failed", json_integer((json_int_t)failed));
        json_object_set_new(j, "not_run", json_integer((json_int_t)not_run));
        json_t *fj = json_object();
        static const char *const fail_names[8] = {NULL, NULL, "rejected", "runtime", "correctness", "compile", "timeout", "crashed"};
        for (int k = 2; k < 8; k++) json_object_set_new(fj, fail_names[k], json_integer((json_int_t)fails[k]));
        json_object_set_new(j, "failures", fj);
        json_object_set_new(j, "policy", json_string(kt_policy_name(policy)));
        json_object_set_new(j, "source", json_string(cached ? "cache" : "measured"));
        json_object_set_new(j, "cache", cache_path ? json_string(cache_path) : json_null());
        json_object_set_new(j, "runs", json_integer((json_int_t)runs));
        json_object_set_new(j, "measurement_time_s", json_real(run_ns / 1e9));
        json_object_set_new(j, "confidence", json_real(confidence));
        json_object_set_new(j, "requested_confidence", d && kt_decision_requested_confidence(d) > 0 ? json_real(kt_decision_requested_confidence(d)) : json_null());
        json_object_set_new(j, "below_confidence", json_boolean(low));
        json_object_set_new(j, "reraced", json_boolean(reraced));
        json_object_set_new(j, "cache_rejected", rejected ? json_string(rejected) : json_null());
        if (o.simulate) json_object_set_new(j, "simulated_time_s", json_real(replay.served_ns / 1e9));
        json_object_set_new(j, "tuning_time_s", json_real(wall));
        if (best != (size_t)-1) {
            json_t *b = json_object();
            json_object_set_new(b, "configuration", t4_configuration(kt_decision_unit_config(d, best), names, p.nparams));
            json_object_set_new(b, "time_ms", json_real(best_ms));
            json_object_set_new(b, "runs", json_integer(kt_decision_unit_runs(d, best)));
            if (chosen) json_object_set_new(b, "recorded_ms", json_real(chosen->mean_ms));
            json_object_set_new(j, "best", b);
        } else {
            json_object_set_new(j, "best", json_null());
        }
        if (truth) {
            json_t *b = json_object();
            json_object_set_new(b, "configuration", t4_configuration(truth->key, names, p.nparams));
            json_object_set_new(b, "time_ms", json_real(truth->mean_ms));
            json_object_set_new(j, "recorded_best", b);
        }
        char *text = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(17));
        if (text) printf("%s\n", text);
        free(text);
        json_decref(j);
    }
    rc = best != (size_t)-1 ? 0 : 1;
done:
    if (o.simulate && ctx && kt_context_artifact_dir(ctx) && strstr(kt_context_artifact_dir(ctx), "kerntune-replay-")) {
        char rm[4200];
        snprintf(rm, sizeof rm, "rm -rf '%s'", kt_context_artifact_dir(ctx));
        if (system(rm) != 0) fprintf(stderr, "kerntune tune: could not remove %s\n", kt_context_artifact_dir(ctx));
    }
    for (size_t i = 0; i < nbuf; i++) {
        free(host[i]);
        if (dev_buf[i]) kt_device_free(ctx, (size_t)dev, dev_buf[i]);
    }
    for (size_t i = 0; i < ref.n; i++) free(ref.data[i]);
    kt_space_destroy(sp);
    kt_space_destroy(ref_sp);
    kt_context_destroy(ctx);
    t4_free(&replay.recs);
    free(source);
    t1_free(&p);
    return rc;
}
