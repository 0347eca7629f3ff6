/*
 * tune.c - `kerntune tune PROBLEM.json`: tunes a T1 problem through the public API.
 *
 * The problem's ConfigurationSpace becomes a kt_space, its kernel a variant group of one op on
 * the device its Language asks for, its Arguments buffers filled as FillType says; the op is
 * tuned with kt_op_tune and its decision's units become the table, the --json summary and the
 * T4 results. With --simulate the device is the replay backend (replay.c): the same engine,
 * served recorded runtimes, with no kernel source and no hardware.
 *
 * What can be found wrong before any work is found first (the problem file, the options, an
 * empty space, an unwritable --t4, an unusable --cache), each error naming the option or the
 * file and JSON path at fault. When every configuration fails, the failures are counted by kind
 * and the first messages of each kind shown. With --json, stdout holds one JSON document and
 * nothing else (an {"error": ...} document when the command fails); text, and whatever the
 * kernel prints, goes to stderr.
 */
#define _XOPEN_SOURCE 700 /* mkdtemp */
#define _DEFAULT_SOURCE
#include "tune.h"

#include <kerntune/backend.h>
#include <kerntune/cache.h>
#include <kerntune/decision.h>
#include <kerntune/device.h>
#include <kerntune/measure.h>
#include <kerntune/search.h>
#include <kerntune/validation.h>
#include <kerntune/variants.h>

#include "disagree.h"
#include "fleet.h"
#include "replay.h"
#include "report.h"
#include "t1.h"
#include "t4.h"
#include "text.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
            "  --budget N | N%% | Ns    stop after N configurations, N percent of them, or N seconds\n"
            "                           of the command (start-up, compiling and stopping included:\n"
            "                           the answer is out by then); every configuration a search proposes\n"
            "                           counts, also one that fails; with --simulate, the seconds\n"
            "                           are simulated: the recorded runs and builds\n"
            "  --strategy NAME          which configurations to try within the budget: exhaustive,\n"
            "                           random, local, anneal, genetic, model or auto (the default:\n"
            "                           exhaustive when the budget covers the space, else a search;\n"
            "                           see docs/ARCHITECTURE.md); overrides the problem's Search\n"
            "  --measure NAME           how configurations are measured: race (the default: drop a\n"
            "                           configuration as soon as it is slower than the best with 99%%\n"
            "                           confidence), triton (as Triton's do_bench: 25 ms of warm-up,\n"
            "                           100 ms of runs), kerneltuner (1 warm-up, 7 runs, the mean), or\n"
            "                           recorded (with --simulate: race on each configuration's\n"
            "                           recorded mean instead of its recorded runs)\n"
            "  --flush auto|off|on      whether caches are flushed before each measured run: auto (the\n"
            "                           default: the device's or host's last-level cache, so every run\n"
            "                           starts cold), off (runs follow each other on a warm cache, as\n"
            "                           Kernel Tuner and Triton measure), on (auto, and native\n"
            "                           candidates too)\n"
            "  --device N               the kerntune device to use (see 'kerntune devices'; not with\n"
            "                           --simulate)\n"
            "  --seed N                 seed of Random fills, of the search, and of sampled replay\n"
            "                           (default 1)\n"
            "  --t4 FILE                write T4 results of every configuration tried, failures included\n"
            "                           (checked for writing before any work)\n"
            "  --peak GFLOPS[,GB/S]     the device's peak arithmetic rate and memory bandwidth, for the\n"
            "                           fraction of peak that results with work formulas reach (the\n"
            "                           problem's KernelSpecification.x-kerntune Flops and Bytes);\n"
            "                           default: what the device reports (CUDA), else none\n"
            "  --report FILE            write an HTML page of the results, with plots (see 'kerntune\n"
            "                           report --help'); needs gnuplot\n"
            "  --simulate FILE          replay a T4 file (gzip or plain) or a Kernel Tuner cache file\n"
            "                           instead of running: no kernel source and no device needed\n"
            "  --cache PATH|off         the persistent cache of decisions (default: KERNTUNE_CACHE, else\n"
            "                           ~/.cache/kerntune/cache.db): a decision recorded there for this\n"
            "                           problem, device and kerntune version is used without measuring;\n"
            "                           a new one is recorded. A cache that cannot be used is an error.\n"
            "                           --simulate never uses it. With --t4, pass --cache off to\n"
            "                           measure every configuration again\n"
            "  --timeout S              the longest one run of a configuration may take (default 10);\n"
            "                           every configuration runs in a worker process, so one that\n"
            "                           crashes or hangs is disqualified (T4: runtime, timeout)\n"
            "  --workers redis://HOST[:PORT][/DB]\n"
            "                           measure on the workers of a fleet instead of here: start\n"
            "                           'kerntune worker URL' on each machine (one per device); the\n"
            "                           configurations the search asks for go to them as jobs on a\n"
            "                           Redis stream, and the results, the T4 file and the cache are\n"
            "                           this run's as if it had measured them (see docs/ARCHITECTURE.md)\n"
            "  --jobs N                 configurations built at once (default: the processors; with\n"
            "                           --workers, as many as the workers take at once, at most 64)\n"
            "  --wait-workers S         with --workers, how long to wait for a live worker (default 10)\n"
            "  --resume                 continue an interrupted run from what the cache recorded of it\n"
            "                           (every configuration is recorded there as it is decided, so\n"
            "                           running again does this too): its configurations are taken\n"
            "                           as recorded, the rest measured; refused with --cache off or\n"
            "                           --simulate, which record nothing\n"
            "  --validate reference|off\n"
            "                           check every configuration's outputs against the reference\n"
            "                           (the default; see below), or check nothing\n"
            "  --answer FILE            the expected outputs: the bytes of every output argument\n"
            "                           (WriteOnly or ReadWrite vectors), one after another in the\n"
            "                           order of the problem's Arguments, raw as in memory (as a\n"
            "                           ReferenceArguments BinaryRaw file holds one); the reference instead\n"
            "                           of ReferenceArguments or a configuration\n"
            "  --json                   print a machine-readable summary on stdout, and nothing else\n"
            "                           there (the text, and what the kernel prints, go to stderr)\n"
            "  --quiet                  print nothing but errors (and the --json summary)\n"
            "  -h, --help               print this help\n"
            "\n"
            "Reference for validation: --answer FILE when given, else the problem's ReferenceArguments,\n"
            "else the configuration of the parameters' Default values when it is one of the space (in\n"
            "the Values, meeting the Conditions), else a consensus: the first 5 configurations run once\n"
            "each and the one whose outputs agree with the most of them is the reference. When at\n"
            "least 8 configurations were compared and more than half disagree, the tuning stops and\n"
            "names the parameter whose values separate those that agree from the others.\n"
            "Exit status: 0 when a valid configuration was found, 1 when none was or the problem is\n"
            "wrong, 2 on a usage error, 3 when validation stopped the tuning (most configurations\n"
            "disagreed with the reference).\n");
}

typedef struct options {
    const char *problem;
    int64_t problem_size[8];
    size_t nproblem;
    const char *problem_size_text;
    const char *defines[64];
    size_t ndefines;
    size_t budget_count;
    double budget_fraction;
    double budget_seconds;
    const char *strategy;
    bool strategy_given;
    const char *measure;
    const char *flush;    /* --flush auto|off|on */
    long device;
    uint64_t seed;
    bool seed_given;
    const char *t4;
    const char *simulate;
    const char *cache;
    double timeout;
    bool json;
    bool quiet;
    bool resume;
    const char *workers;  /* --workers URL */
    size_t jobs;          /* --jobs N */
    double wait_workers;  /* --wait-workers S */
    const char *report;   /* --report FILE */
    double peak_gflops, peak_gbs; /* --peak GFLOPS[,GB/S]: the device's limits (0: not given) */
    bool validate_off;    /* --validate off */
    const char *answer;   /* --answer FILE */
} options;

static char *usage_message; /* the last usage error, for --json */

static int usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    free(usage_message);
    usage_message = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (usage_message) {
        va_start(ap, fmt);
        vsnprintf(usage_message, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    fprintf(stderr, "kerntune tune: %s\nrun 'kerntune tune --help' for the options\n", usage_message ? usage_message : fmt);
    return 2;
}

/* Prints {"error": message} on out (stdout's document): with --json, stdout holds one JSON
 * document even when the command fails. */
static void json_error(FILE *out, const char *message) {
    json_t *j = json_object();
    json_object_set_new(j, "error", json_string(message));
    char *text = json_dumps(j, JSON_COMPACT);
    if (text) fprintf(out, "%s\n", text);
    free(text);
    json_decref(j);
}

/* Whether name is a flush mode (auto, off, on); its value in *out when out is not NULL. */
static bool flush_parse(const char *name, kt_flush *out) {
    for (int f = KT_FLUSH_AUTO; f <= KT_FLUSH_ON; f++)
        if (strcmp(name, kt_flush_name((kt_flush)f)) == 0) {
            if (out) *out = (kt_flush)f;
            return true;
        }
    return false;
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

/* The largest whole number an option takes (int64_t's), as the messages write it. */
#define INT_MAX_TEXT "9223372036854775807"

/* Whether the first len characters of text (all of it when len is 0) are decimal digits that
 * make a number above INT_MAX_TEXT: a value out of range rather than a malformed one. */
static bool too_large(const char *text, size_t len) {
    if (len == 0) len = strlen(text);
    size_t lead = 0;
    while (lead + 1 < len && text[lead] == '0') lead++; /* leading zeros change nothing */
    for (size_t k = 0; k < len; k++)
        if (text[k] < '0' || text[k] > '9') return false;
    size_t digits = len - lead, max = strlen(INT_MAX_TEXT);
    return digits > max || (digits == max && strncmp(text + lead, INT_MAX_TEXT, max) > 0);
}

/* Parses --problem-size's comma-separated sizes (each at least 1). A size too large for an
 * int64_t is pointed to by *big (with its length in *big_len). */
static bool parse_sizes(const char *v, options *o, const char **big, int *big_len) {
    o->nproblem = 0;
    *big = NULL;
    const char *s = v;
    for (;;) {
        size_t len = strcspn(s, ",");
        char num[24];
        if (len > 0 && too_large(s, len)) {
            *big = s;
            *big_len = len > 64 ? 64 : (int)len;
            return false;
        }
        if (len == 0 || len >= sizeof num || o->nproblem == 8) return false; /* longer than any int64 */
        memcpy(num, s, len);
        num[len] = '\0';
        if (!parse_int(num, &o->problem_size[o->nproblem]) || o->problem_size[o->nproblem] < 1) return false;
        o->nproblem++;
        if (s[len] == '\0') return true;
        s += len + 1;
    }
}

/* Whether paths a and b name one existing file. */
static bool same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

static int parse_options(int argc, char **argv, options *o) {
    memset(o, 0, sizeof *o);
    o->strategy = "auto";
    o->measure = "race";
    o->flush = "auto";
    o->timeout = 10;
    o->device = -1;
    o->seed = 1;
    o->wait_workers = 10;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        const char *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
        size_t nlen = eq ? (size_t)(eq - a) : strlen(a);
        static const char *const with_value[] = {"--problem-size", "--define", "--budget", "--strategy", "--measure",
                                                 "--device", "--seed", "--t4", "--simulate", "--cache", "--timeout",
                                                 "--workers", "--jobs", "--wait-workers", "--report", "--peak",
                                                 "--validate", "--answer", "--flush"};
        const char *name = NULL; /* the option, when a known one takes a value */
        for (size_t k = 0; k < sizeof with_value / sizeof with_value[0]; k++)
            if (strlen(with_value[k]) == nlen && strncmp(a, with_value[k], nlen) == 0) name = with_value[k];
        if (name) {
            if (eq) v = eq + 1;
            else if (i + 1 < argc) v = argv[++i];
            else return usage("%s needs a value", name);
        } else if (eq) {
            return usage("unknown option '%s'", a);
        }
        if (strcmp(a, "--json") == 0) o->json = true;
        else if (strcmp(a, "--quiet") == 0) o->quiet = true;
        else if (strcmp(a, "--resume") == 0) o->resume = true;
        else if (name == NULL && a[0] == '-') return usage("unknown option '%s'", a);
        else if (name == NULL && o->problem == NULL) o->problem = a;
        else if (name == NULL) return usage("unexpected argument '%s' (one problem file at a time)", a);
        else if (strcmp(name, "--problem-size") == 0) {
            const char *big;
            int big_len = 0;
            if (!parse_sizes(v, o, &big, &big_len)) {
                if (big) return usage("--problem-size '%s': %.*s%s is out of range: a size is at most " INT_MAX_TEXT, v, big_len, big,
                                      big_len == 64 ? "..." : "");
                return usage("--problem-size '%s': expected up to 8 comma-separated sizes, each at least 1", v);
            }
            o->problem_size_text = v;
        } else if (strcmp(name, "--define") == 0) {
            const char *e = strchr(v, '=');
            if (e == NULL || e == v || e[1] == '\0') return usage("--define '%s': expected NAME=VALUE", v);
            if (o->ndefines == 64) return usage("at most 64 --define options");
            for (size_t d = 0; d < o->ndefines; d++) /* the last would win silently */
                if (strcspn(o->defines[d], "=") == (size_t)(e - v) && strncmp(o->defines[d], v, (size_t)(e - v)) == 0)
                    return usage("--define %s: %.*s is already given (--define %s); give each parameter once", v, (int)(e - v), v,
                                 o->defines[d]);
            o->defines[o->ndefines++] = v;
        } else if (strcmp(name, "--budget") == 0) {
            size_t len = strlen(v);
            int64_t n;
            if (len > 1 && v[len - 1] == 's') {
                char *end;
                o->budget_seconds = strtod(v, &end);
                if (end != v + len - 1 || !(o->budget_seconds > 0) || !isfinite(o->budget_seconds))
                    return usage("--budget '%s': expected a count of configurations (N), a percentage of them (N%%) or seconds (Ns)", v);
            } else if (len > 1 && v[len - 1] == '%') {
                char *end;
                double pct = strtod(v, &end);
                if (end != v + len - 1 || !(pct > 0 && pct <= 100))
                    return usage("--budget '%s': a percentage must be above 0 and at most 100", v);
                o->budget_fraction = pct / 100;
            } else if (parse_int(v, &n) && n > 0) {
#if SIZE_MAX < INT64_MAX
                if ((uint64_t)n > SIZE_MAX) return usage("--budget '%s': out of range: at most %zu configurations", v, (size_t)SIZE_MAX);
#endif
                o->budget_count = (size_t)n;
            } else if (too_large(v, 0)) {
                return usage("--budget '%s': out of range: at most " INT_MAX_TEXT " configurations", v);
            } else {
                return usage("--budget '%s': expected a count of configurations (N), a percentage of them (N%%) or seconds (Ns)", v);
            }
        } else if (strcmp(name, "--strategy") == 0) {
            bool known = false;
            for (size_t i = 0; i < kt_search_strategy_count(); i++) known = known || strcmp(v, kt_search_strategy_name(i)) == 0;
            if (!known)
                return usage("--strategy '%s': expected exhaustive, random, local, anneal, genetic, model or auto", v);
            o->strategy = v;
            o->strategy_given = true;
        } else if (strcmp(name, "--measure") == 0) {
            kt_policy pol;
            if (strcmp(v, "recorded") != 0 && (kt_policy_parse(v, &pol) != KT_OK || pol == KT_POLICY_FIXED))
                return usage("--measure '%s': expected race, triton, kerneltuner or recorded", v);
            o->measure = v;
        } else if (strcmp(name, "--flush") == 0) {
            if (!flush_parse(v, NULL)) return usage("--flush '%s': expected auto, off or on", v);
            o->flush = v;
        } else if (strcmp(name, "--device") == 0) {
            int64_t n;
            if ((parse_int(v, &n) && n > 1000000) || too_large(v, 0))
                return usage("--device '%s': out of range: expected a device number from 0 to 1000000", v);
            if (!parse_int(v, &n)) return usage("--device '%s': expected a device number", v);
            o->device = (long)n;
        } else if (strcmp(name, "--seed") == 0) {
            int64_t n;
            if (too_large(v, 0)) return usage("--seed '%s': out of range: expected an integer from 0 to " INT_MAX_TEXT, v);
            if (!parse_int(v, &n)) return usage("--seed '%s': expected a non-negative integer", v);
            o->seed = (uint64_t)n;
            o->seed_given = true;
        } else if (strcmp(name, "--t4") == 0) {
            if (*v == '\0') return usage("--t4: expected a file name");
            o->t4 = v;
        } else if (strcmp(name, "--simulate") == 0) o->simulate = v;
        else if (strcmp(name, "--cache") == 0) {
            if (*v == '\0') return usage("--cache: expected a path or off");
            o->cache = v;
        } else if (strcmp(name, "--workers") == 0) {
            char host[256];
            int port, db;
            if (kt_redis_url_parse(v, host, sizeof host, &port, &db) != KT_OK) return usage("--workers %s", kt_last_error());
            o->workers = v;
        } else if (strcmp(name, "--peak") == 0) {
            char *end = NULL;
            o->peak_gflops = strtod(v, &end);
            if (end != v && *end == ',') o->peak_gbs = strtod(end + 1, &end);
            if (end == v || *end != '\0' || !(o->peak_gflops >= 0) || !(o->peak_gbs >= 0) || !isfinite(o->peak_gflops) ||
                !isfinite(o->peak_gbs) || o->peak_gflops + o->peak_gbs <= 0)
                return usage("--peak '%s': expected GFLOPS[,GB/S], the device's peak arithmetic and memory rates (0: not known)", v);
        } else if (strcmp(name, "--validate") == 0) {
            if (strcmp(v, "off") != 0 && strcmp(v, "reference") != 0) return usage("--validate '%s': expected reference or off", v);
            o->validate_off = strcmp(v, "off") == 0;
        } else if (strcmp(name, "--answer") == 0) {
            if (*v == '\0') return usage("--answer: expected a file name");
            o->answer = v;
        } else if (strcmp(name, "--report") == 0) {
            if (*v == '\0') return usage("--report: expected a file name");
            o->report = v;
        } else if (strcmp(name, "--jobs") == 0) {
            int64_t n;
            if (!parse_int(v, &n) || n < 1 || n > 64) return usage("--jobs '%s': expected a count from 1 to 64", v);
            o->jobs = (size_t)n;
        } else if (strcmp(name, "--wait-workers") == 0) {
            char *end = NULL;
            o->wait_workers = strtod(v, &end);
            if (end == v || *end != '\0' || !(o->wait_workers >= 0 && o->wait_workers <= 86400))
                return usage("--wait-workers '%s': expected seconds from 0 to 86400", v);
        } else if (strcmp(name, "--timeout") == 0) {
            char *end = NULL;
            o->timeout = strtod(v, &end);
            if (end == v || *end != '\0' || !(o->timeout > 0)) return usage("--timeout '%s': expected seconds, more than 0", v);
            if (o->timeout > 1e6) return usage("--timeout '%s': out of range: expected seconds, more than 0 and at most 1000000", v);
        }
    }
    if (o->problem == NULL) return usage("no problem file given");
    if (strcmp(o->measure, "recorded") == 0 && o->simulate == NULL) return usage("--measure recorded needs --simulate");
    if (o->device >= 0 && o->simulate)
        return usage("--device %ld with --simulate: a replay runs on no device (the recording is its device); leave --device out", o->device);
    if (o->device >= 0 && o->workers)
        return usage("--device %ld with --workers: the workers measure, each on the device it was started with "
                     "('kerntune worker URL --device N'); leave --device out", o->device);
    if (o->resume && o->simulate) return usage("--resume with --simulate: a replay records nothing to resume from");
    if (o->answer && o->validate_off) return usage("--answer with --validate off: nothing would be compared with it");
    if (o->answer && o->simulate) return usage("--answer with --simulate: a replay runs nothing to compare with it");
    if (o->answer && o->workers) return usage("--answer with --workers: each worker validates against its own reference");
    if (o->validate_off && o->workers) return usage("--validate off with --workers: each worker validates against its own reference");
    if (o->resume && o->cache && strcmp(o->cache, "off") == 0)
        return usage("--resume with --cache off: runs record what they measure in the cache only; name the cache the run used");
    /* --t4 replaces its file: never one the command reads */
    const char *inputs[4][2] = {{o->problem, "the problem file"}, {o->simulate, "the --simulate recording"},
                                {o->cache && strcmp(o->cache, "off") != 0 ? o->cache : NULL, "the --cache file"},
                                {o->answer, "the --answer file"}};
    for (int k = 0; o->t4 && k < 4; k++)
        if (inputs[k][0] && same_file(o->t4, inputs[k][0]))
            return usage("--t4 %s is %s%s%s: the results would replace it", o->t4, inputs[k][1], strcmp(o->t4, inputs[k][0]) ? " " : "",
                         strcmp(o->t4, inputs[k][0]) ? inputs[k][0] : "");
    return 0;
}

/* ---- progress ------------------------------------------------------------------------------ */

typedef struct progress {
    double start, last;
    double budget_s; /* a budget of seconds (0: none): the time left is at most what is left of it */
    bool shown;
    size_t hidden;   /* units that are not the problem's configurations (the reference) */
    bool to_fleet;   /* with --workers the fleet's line shows it (progress_text), beside the jobs */
    pthread_mutex_t mu;
    size_t done, total, valid, failed;
    double best_ns;
} progress;

/* The tuning's progress as one line: configurations done of those it will try, valid, failed,
 * the best so far, the time elapsed and an estimate of the time left (against the budget). */
static void progress_text(char *buf, size_t len, void *user) {
    progress *p = user;
    pthread_mutex_lock(&p->mu);
    size_t done = p->done > p->hidden ? p->done - p->hidden : 0, total = p->total > p->hidden ? p->total - p->hidden : 0;
    size_t valid = p->valid, failed = p->failed;
    double best_ns = p->best_ns;
    pthread_mutex_unlock(&p->mu);
    double elapsed = kt_now_s() - p->start, eta = done ? elapsed * (double)(total - done) / (double)done : 0;
    if (p->budget_s > 0 && p->budget_s - elapsed < eta) eta = p->budget_s - elapsed > 0 ? p->budget_s - elapsed : 0; /* --budget Ns */
    char best[32] = "-";
    if (best_ns >= 0) snprintf(best, sizeof best, "%.4g ms", best_ns / 1e6);
    snprintf(buf, len, "  %zu/%zu configurations, %zu valid, %zu failed, best %s, %.1f s elapsed, ETA %.1f s", done, total, valid, failed,
             best, elapsed, eta);
}

static void on_progress(size_t done, size_t total, size_t valid, size_t failed, double best_ns, void *user) {
    progress *p = user;
    pthread_mutex_lock(&p->mu);
    p->done = done, p->total = total, p->valid = valid, p->failed = failed, p->best_ns = best_ns;
    pthread_mutex_unlock(&p->mu);
    double t = kt_now_s();
    if (p->to_fleet || (done < total && t - p->last < 0.1)) return; /* at most ten updates a second */
    p->last = t;
    char line[512];
    progress_text(line, sizeof line, p);
    fprintf(stderr, "\r\033[K%s", line);
    p->shown = true;
}

/* ---- arguments ----------------------------------------------------------------------------- */

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The IEEE binary16 value nearest to x, ties to even: subnormals where they fall, infinity past
 * the largest half (65504; from 65520 on, the tie rounds up to infinity), a quiet NaN for NaN.
 * Rounded once, from the double itself (through float first would round twice). */
static uint16_t half_bits(double x) {
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    uint16_t sign = (uint16_t)((b >> 48) & 0x8000);
    uint64_t mag = b & 0x7fffffffffffffffull;
    if (mag >= 0x7ff0000000000000ull) return sign | (mag > 0x7ff0000000000000ull ? 0x7e00 : 0x7c00);
    int e = (int)(mag >> 52); /* the double's biased exponent: 0 only for its subnormals, far below a half's */
    if (e == 0) return sign;
    uint64_t m = (mag & 0xfffffffffffffull) | (1ull << 52); /* x = m * 2^(e - 1075) */
    int he = e - 1023 + 15; /* the half's biased exponent, when x is a normal half */
    int shift = he >= 1 ? 42 : 42 + 1 - he; /* the bits of m below the half's last one (subnormals: exponent 1) */
    if (shift > 53) return sign; /* below half the smallest subnormal: zero */
    uint64_t q = m >> shift, rem = m & ((1ull << shift) - 1), halfway = 1ull << (shift - 1);
    if (rem > halfway || (rem == halfway && (q & 1))) q++;
    if (he < 1) return sign | (uint16_t)q; /* a subnormal; q = 1024 is the smallest normal, encoded alike */
    uint64_t out = ((uint64_t)he << 10) + (q - 1024); /* q = 2048 (rounded up) carries into the exponent */
    return sign | (uint16_t)(out >= 0x7c00 ? 0x7c00 : out);
}

/* Writes one element of type t: an integer type's value from its 64-bit two's complement bits
 * (checked to fit when the problem was read), a float type's from value. */
static void put(kt_type t, void *dst, double value, uint64_t bits) {
    switch (t) {
    case KT_TYPE_I8: *(int8_t *)dst = (int8_t)(int64_t)bits; break;
    case KT_TYPE_U8: *(uint8_t *)dst = (uint8_t)bits; break;
    case KT_TYPE_I16: *(int16_t *)dst = (int16_t)(int64_t)bits; break;
    case KT_TYPE_U16: *(uint16_t *)dst = (uint16_t)bits; break;
    case KT_TYPE_I32: *(int32_t *)dst = (int32_t)(int64_t)bits; break;
    case KT_TYPE_U32: *(uint32_t *)dst = (uint32_t)bits; break;
    case KT_TYPE_I64: *(int64_t *)dst = (int64_t)bits; break;
    case KT_TYPE_U64: *(uint64_t *)dst = bits; break;
    case KT_TYPE_F64: *(double *)dst = value; break;
    case KT_TYPE_F16: {
        uint16_t h = half_bits(value);
        memcpy(dst, &h, sizeof h);
        break;
    }
    default: *(float *)dst = (float)value; break;
    }
}

/* Fills count elements of type t as fill says; *err names the argument on failure. */
static bool fill_data(const t1 *p, const t1_arg *a, size_t idx, void *data, size_t count, uint64_t seed, char **err) {
    size_t es = kt_type_size(a->type);
    if (a->fill == T1_FILL_BINARY) {
        char *path = a->data_source[0] == '/' ? cli_format("%s", a->data_source) : cli_format("%s/%s", p->dir, a->data_source);
        if (path == NULL) {
            *err = cli_format("out of memory");
            return false;
        }
        char *why = NULL;
        /* exactly the argument's bytes are read: that is the limit */
        char *bytes = t1_read_file(path, "the file", 0, count * es, NULL, &why);
        free(path);
        if (bytes == NULL) {
            *err = cli_format("argument '%s' (%zu elements of %s): %s", a->name, count, a->type_name, why ? why : "out of memory");
            free(why);
            return false;
        }
        memcpy(data, bytes, count * es);
        free(bytes);
        return true;
    }
    if (a->fill == T1_FILL_CONSTANT) {
        for (size_t i = 0; i < count; i++) put(a->type, (char *)data + i * es, a->fill_value, a->fill_bits);
        return true;
    }
    /* Random: from 0 up to FillValue (above 0, and for an integer type at most one past its
     * largest value: checked when the problem was read), else up to 1 (floats), 2 (bool) or 100 */
    uint64_t state = (a->has_seed ? (uint64_t)a->seed : seed) ^ (0x9e3779b97f4a7c15ull * (idx + 1));
    bool is_float = a->type == KT_TYPE_F32 || a->type == KT_TYPE_F64 || a->type == KT_TYPE_F16;
    double scale = a->fill_value > 0 ? a->fill_value : is_float ? 1.0 : strcmp(a->type_name, "bool") == 0 ? 2.0 : 100.0;
    for (size_t i = 0; i < count; i++) {
        double u = (double)(splitmix(&state) >> 11) * 0x1p-53; /* [0, 1) */
        double v = is_float ? u * scale : floor(u * scale);
        put(a->type, (char *)data + i * es, v, is_float ? 0 : (uint64_t)v);
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

/* ---- the space ------------------------------------------------------------------------------ */

static bool define_matches(const char *define, const char *name) {
    size_t len = strcspn(define, "=");
    return strlen(name) == len && strncmp(name, define, len) == 0;
}

/* Whether --define NAME=VALUE gives values among parameter tp's own Values. */
static bool define_in_values(const t1_param *tp, const char *define) {
    kt_space *own = NULL, *given = NULL;
    char *list = cli_format("[%s]", strchr(define, '=') + 1);
    size_t n_own = 0, n_given = 0;
    bool ok = list && kt_space_create(&own) == KT_OK && kt_space_create(&given) == KT_OK &&
              kt_space_add_param(own, tp->name, tp->values) == KT_OK && kt_space_add_param(given, tp->name, list) == KT_OK &&
              kt_space_enumerate(own, &n_own) == KT_OK && kt_space_enumerate(given, &n_given) == KT_OK;
    free(list);
    bool all = ok;
    for (size_t g = 0; ok && all && g < n_given; g++) {
        char a[4096], b[4096]; /* a value that does not fit is taken as not found: this only decides a note */
        bool found = false;
        if (kt_space_config_format(given, g, a, sizeof a) != KT_OK) found = false;
        else
            for (size_t k = 0; k < n_own && !found; k++) found = kt_space_config_format(own, k, b, sizeof b) == KT_OK && strcmp(a, b) == 0;
        all = found;
    }
    kt_space_destroy(own);
    kt_space_destroy(given);
    return !ok || all; /* when it cannot tell, it does not say */
}

/* Sets each geometry expression alone first, so that an error names its own JSON path. */
static bool check_geometry(const t1 *p, kt_space *sp, char **err) {
    static const char *const dims = "XYZ";
    for (int d = 0; d < 3; d++) {
        for (size_t i = 0; i < p->ndiv[d]; i++) {
            char *e = cli_format("int(%s)", p->div[d][i]);
            const char *g[3] = {e, NULL, NULL};
            kt_status st = e ? kt_space_set_geometry(sp, KT_GEOMETRY_GRID, g, NULL, NULL) : KT_ERR_NO_MEMORY;
            free(e);
            if (st != KT_OK) {
                *err = cli_format("%s: KernelSpecification.GridDiv%c[%zu]: %s", p->path, dims[d], i, kt_last_error());
                return false;
            }
        }
        const char *sets[2] = {p->grid_div ? NULL : p->global[d], p->local[d]};
        for (int k = 0; k < 2; k++) {
            if (sets[k] == NULL) continue;
            const char *g[3] = {sets[k], NULL, NULL};
            if (kt_space_set_geometry(sp, KT_GEOMETRY_GRID, g, NULL, NULL) != KT_OK) {
                *err = cli_format("%s: KernelSpecification.%s.%c: %s", p->path, k ? "LocalSize" : "GlobalSize", dims[d], kt_last_error());
                return false;
            }
        }
    }
    return true;
}

/* Builds the space of the problem with these --define values (each NAME=VALUE). When defaults
 * is set, each parameter is fixed to its Default instead (NULL without error when one has
 * none). */
static kt_space *make_space(const t1 *p, const char *const *defines, size_t ndefines, bool defaults, const int64_t *ps,
                            size_t nps, char **err) {
    kt_space *sp = NULL;
    *err = NULL;
    if (kt_space_create(&sp) != KT_OK) {
        *err = cli_format("%s", kt_last_error());
        return NULL;
    }
    bool ok = true;
    for (size_t i = 0; ok && i < p->nparams; i++) {
        const t1_param *tp = &p->params[i];
        char *values = NULL;
        const char *define = NULL;
        if (defaults) {
            if (tp->dflt == NULL) {
                kt_space_destroy(sp);
                return NULL;
            }
            char *lit = t1_literal(tp->dflt);
            values = lit ? cli_format("[%s]", lit) : NULL;
            free(lit);
        } else {
            for (size_t d = 0; d < ndefines; d++)
                if (define_matches(defines[d], tp->name)) define = defines[d];
            values = define ? cli_format("[%s]", strchr(define, '=') + 1) : cli_format("%s", tp->values);
        }
        if (values == NULL) {
            *err = cli_format("out of memory");
            ok = false;
        } else if (kt_space_add_param(sp, tp->name, values) != KT_OK) {
            if (define) *err = cli_format("--define %s: %s", define, kt_last_error());
            else if (defaults) *err = cli_format("%s: ConfigurationSpace.TuningParameters[%zu].Default: %s", p->path, i, kt_last_error());
            else *err = cli_format("%s: ConfigurationSpace.TuningParameters[%zu].Values: %s", p->path, i, kt_last_error());
            ok = false;
        }
        free(values);
    }
    for (size_t d = 0; ok && d < ndefines; d++) {
        bool found = false;
        for (size_t i = 0; i < p->nparams; i++) found = found || define_matches(defines[d], p->params[i].name);
        if (!found) {
            *err = cli_format("--define %.*s: the problem has no parameter of that name", (int)strcspn(defines[d], "="), defines[d]);
            ok = false;
        }
    }
    if (ok && (kt_space_add_input(sp, "ProblemSize") != KT_OK || kt_space_bind_ints(sp, "ProblemSize", ps, nps) != KT_OK)) {
        *err = cli_format("%s: KernelSpecification.ProblemSize: %s", p->path, kt_last_error());
        ok = false;
    }
    /* Kernel Tuner's block where the parameters do not give it (get_thread_block_dimensions):
     * block_size_x 256, block_size_y and block_size_z 1, so that a LocalSize naming them (as
     * benchmark_hub's gemm does without such parameters) launches the block Kernel Tuner does */
    static const char *const block[3] = {"block_size_x", "block_size_y", "block_size_z"};
    for (int d = 0; ok && d < 3; d++) {
        bool taken = false;
        for (size_t i = 0; i < p->nparams; i++) taken = taken || strcmp(p->params[i].name, block[d]) == 0;
        for (size_t a = 0; a < p->nargs; a++) taken = taken || strcmp(p->args[a].name, block[d]) == 0;
        if (!taken && (kt_space_add_input(sp, block[d]) != KT_OK || kt_space_bind_int(sp, block[d], d == 0 ? 256 : 1) != KT_OK)) {
            *err = cli_format("%s: %s (Kernel Tuner's default block): %s", p->path, block[d], kt_last_error());
            ok = false;
        }
    }
    for (size_t c = 0; ok && c < p->nconditions; c++) {
        if (kt_space_add_constraint(sp, p->conditions[c]) != KT_OK) {
            *err = cli_format("%s: ConfigurationSpace.Conditions[%zu].Expression: %s", p->path, c, kt_last_error());
            ok = false;
        }
    }
    ok = ok && check_geometry(p, sp, err);
    char shm[32]; /* an integer: always fits */
    snprintf(shm, sizeof shm, "%lld", (long long)p->shared_memory);
    const char *const *global = (const char *const *)p->global, *const *local = (const char *const *)p->local;
    /* a C kernel is called, not launched: its geometry, checked as written above, is never
     * computed (one configuration's grid that cannot be computed must not stop its tuning) */
    static const char *const none[3] = {NULL, NULL, NULL};
    if (strcmp(p->language, "C") == 0) global = local = none;
    if (ok && kt_space_set_geometry(sp, p->geometry, global, local, p->shared_memory && global != none ? shm : NULL) != KT_OK) {
        *err = cli_format("%s: KernelSpecification.GlobalSize/LocalSize: %s", p->path, kt_last_error());
        ok = false;
    }
    if (!ok) {
        if (*err == NULL) *err = cli_format("out of memory");
        kt_space_destroy(sp);
        return NULL;
    }
    return sp;
}

/* Enumerates sp, the space of p with these defines (or its Default values); an error names the
 * condition at fault, found by enumerating again with one more condition at a time (the first
 * whose addition fails is it, whatever the library's message quotes of its text), else the
 * space. */
static bool enumerate(const t1 *p, kt_space *sp, const char *const *defines, size_t ndefines, bool defaults, const int64_t *ps,
                      size_t nps, size_t *count, char **err) {
    if (kt_space_enumerate(sp, count) == KT_OK) return true;
    char *msg = cli_format("%s", kt_last_error());
    long at = -1;
    t1 q = *p; /* p with its first conditions only */
    for (size_t c = 0; msg && at < 0 && c < p->nconditions; c++) {
        q.nconditions = c + 1;
        char *why = NULL;
        size_t n;
        kt_space *some = make_space(&q, defines, ndefines, defaults, ps, nps, &why);
        if (some && kt_space_enumerate(some, &n) != KT_OK) at = (long)c;
        kt_space_destroy(some);
        free(why);
    }
    if (at >= 0) *err = cli_format("%s: ConfigurationSpace.Conditions[%ld].Expression: %s", p->path, at, msg);
    else *err = cli_format("%s: ConfigurationSpace: %s", p->path, msg ? msg : "out of memory");
    free(msg);
    return false;
}

/* How many configurations a variant of the space has (0 on an error, which the full space
 * reports itself). */
static size_t count_with(const t1 *p, const char *const *defines, size_t n, const int64_t *ps, size_t nps) {
    char *err = NULL;
    size_t count = 0;
    kt_space *sp = make_space(p, defines, n, false, ps, nps, &err);
    if (sp == NULL || kt_space_enumerate(sp, &count) != KT_OK) count = 0;
    kt_space_destroy(sp);
    free(err);
    return count;
}

/* Says why the space is empty, blaming the option that emptied it where one did. */
static char *empty_space(const t1 *p, const options *o, const int64_t *ps, size_t nps) {
    if (o->ndefines > 0 && count_with(p, NULL, 0, ps, nps) > 0) {
        for (size_t d = 0; d < o->ndefines; d++)
            if (count_with(p, &o->defines[d], 1, ps, nps) == 0)
                return cli_format("--define %s: no configuration meets the problem's ConfigurationSpace.Conditions with it", o->defines[d]);
        return cli_format("--define: together, the %zu values given leave no configuration that meets the problem's "
                         "ConfigurationSpace.Conditions", o->ndefines);
    }
    if (o->nproblem > 0 && count_with(p, o->defines, o->ndefines, p->problem_size, p->nproblem) > 0)
        return cli_format("--problem-size %s: no configuration meets the problem's ConfigurationSpace.Conditions for this size",
                         o->problem_size_text);
    return cli_format("%s: ConfigurationSpace.Conditions: no configuration of the space meets them", p->path);
}

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
static char *check_writable(const char *path) {
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
static char *write_json(const char *path, json_t *root) {
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

/* ---- devices -------------------------------------------------------------------------------- */

/* Picks the device: --device, else the devices of the Language's backend (named like
 * Device.Name when given), the Device.Id-th of them (the first without one). */
/* Whether the device's backend builds variants in the problem's Language. */
static bool speaks(const kt_device *d, const char *language) {
    const char *l = kt_device_language(d);
    return l != NULL && strcmp(l, language) == 0;
}

/* The name of the backend that builds the problem's Language, for messages ("" when none has
 * a device). */
static const char *backend_for(kt_context *ctx, const char *language) {
    for (size_t i = 0; i < kt_context_device_count(ctx); i++)
        if (speaks(kt_context_device(ctx, i), language)) return kt_device_backend(kt_context_device(ctx, i));
    return "";
}

/* Registers the backend of a stand-in device (a replay, a fleet's coordinator) and gives it an
 * artifact directory of its own in dir (len bytes; made, *made set): its artifacts are worthless
 * and stay out of the cache's. Its device's index in *dev; NULL, or the error (allocated). */
static char *stand_in(kt_context *ctx, const kt_backend *b, char *dir, size_t len, bool *made, long *dev) {
    kt_status st = kt_context_add_backend(ctx, b);
    if (st != KT_OK) return cli_format("%s: %s", kt_status_name(st), kt_last_error());
    const char *tmp = getenv("TMPDIR");
    if (tmp == NULL || tmp[0] == '\0') tmp = "/tmp";
    if ((size_t)snprintf(dir, len, "%s/kerntune-replay-XXXXXX", tmp) >= len) return cli_format("TMPDIR is too long (%s)", tmp);
    if (mkdtemp(dir) == NULL) return cli_format("cannot create a temporary directory: %s", strerror(errno));
    *made = true;
    if ((st = kt_context_set_artifact_dir(ctx, dir)) != KT_OK) return cli_format("%s: %s", kt_status_name(st), kt_last_error());
    for (size_t i = 0; i < kt_context_device_count(ctx); i++)
        if (strcmp(kt_device_backend(kt_context_device(ctx, i)), b->name) == 0) *dev = (long)i;
    return NULL;
}

static long pick_device(kt_context *ctx, const t1 *p, const options *o, char **err) {
    size_t n = kt_context_device_count(ctx);
    const char *backend = backend_for(ctx, p->language);
    if (o->device >= 0) {
        if ((size_t)o->device >= n) {
            *err = cli_format("--device %ld: no such device (there are %zu; see 'kerntune devices')", o->device, n);
            return -1;
        }
        const kt_device *d = kt_context_device(ctx, (size_t)o->device);
        if (!speaks(d, p->language)) {
            *err = cli_format("--device %ld is a %s device, which does not build the problem's Language %s", o->device,
                              kt_device_backend(d), p->language);
            return -1;
        }
        return o->device;
    }
    long seen = 0, want = p->device_id < 0 ? 0 : p->device_id;
    for (size_t i = 0; i < n; i++) {
        const kt_device *d = kt_context_device(ctx, i);
        if (!speaks(d, p->language)) continue;
        if (p->device_name && strstr(kt_device_name(d), p->device_name) == NULL) continue;
        if (seen++ == want) return (long)i;
    }
    if (seen > 0 && p->device_id >= 0) {
        *err = cli_format("%s: KernelSpecification.Device.Id: %d, but there %s %ld %s device%s%s%s%s (see 'kerntune devices')", p->path,
                         p->device_id, seen == 1 ? "is" : "are", seen, backend, seen == 1 ? "" : "s", p->device_name ? " named like '" : "",
                         p->device_name ? p->device_name : "", p->device_name ? "'" : "");
        return -1;
    }
    if (p->device_name && backend[0]) {
        *err = cli_format("%s: KernelSpecification.Device.Name: no %s device is named like '%s' (see 'kerntune devices')", p->path,
                         backend, p->device_name);
        return -1;
    }
    char *msg = cli_format("no device builds the problem's Language %s", p->language);
    for (size_t i = 0; msg && i < kt_context_unavailable_count(ctx); i++) {
        char *more = cli_format("%s; %s", msg, kt_context_unavailable(ctx, i));
        free(msg);
        msg = more;
    }
    *err = msg;
    return -1;
}

/* ---- results -------------------------------------------------------------------------------- */

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

/* The failure kinds as the summary names them, in the order it lists them. */
static const struct {
    kt_outcome outcome;
    const char *name;
} kinds[] = {{KT_OUTCOME_BUILD_FAILED, "compile"}, {KT_OUTCOME_FAILED, "runtime"},    {KT_OUTCOME_CRASHED, "crashed"},
             {KT_OUTCOME_TIMEOUT, "timeout"},      {KT_OUTCOME_INVALID, "correctness"}, {KT_OUTCOME_REJECTED, "rejected"}};
#define NKINDS (sizeof kinds / sizeof kinds[0])

/* A unit's outcome as the summary names it: a failure kind, "measured" or "not run". */
static const char *outcome_name(kt_outcome o) {
    for (size_t k = 0; k < NKINDS; k++)
        if (kinds[k].outcome == o) return kinds[k].name;
    return o == KT_OUTCOME_MEASURED ? "measured" : "not run";
}
#define EXAMPLES 3 /* messages shown per kind */

static double mean_ms(const kt_decision *d, size_t u) {
    const double *t;
    size_t n;
    if (kt_decision_unit_runtimes(d, u, &t, &n) != KT_OK || n == 0) return -1;
    double s = 0;
    for (size_t i = 0; i < n; i++) s += t[i];
    return s / (double)n / 1e6;
}

/* The launch geometry unit u was planned with, as JSON; NULL for host code. */
static json_t *geometry_json(const t1 *p, const kt_decision *d, size_t u) {
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
/* The order the units were decided in, and when: kerntune's T4 extension ("x-kerntune"), from
 * which a report draws the search's best so far. */
typedef struct told_log {
    size_t *order;  /* per unit: 1 + its place in the order (0: not decided yet) */
    double *at_s;   /* per unit: seconds after the tuning began */
    size_t cap, n;
    double start;
} told_log;

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
static kt_outcome unit_outcome(fleet *fl, const kt_decision *d, size_t u) {
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

static json_t *t4_document(const t1 *p, kt_op *op, fleet *fl, const told_log *tl, const kt_decision *d, const char *device,
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

/* The T4 file as the tuning goes: each unit's record is appended as the unit is decided, and the
 * file is a whole T4 document after every append (the records, then "]}": the next append
 * writes over that end), so that a run that stops, even killed, keeps what it measured; the
 * final document replaces it at the end. */
typedef struct t4_live {
    const t1 *p;
    kt_op *op;
    fleet *fl;
    told_log *tl;
    const char *path, *device;
    const char *const *names;
    size_t nnames;
    FILE *f;
    long end;    /* where the closing "\n]}\n" starts */
    size_t n;    /* records written */
    bool failed; /* a write failed: said once, tried no more */
    /* what validation saw, unit by unit, for a tuning it stops (nothing is decided then) */
    verdict *verdicts;  /* the kernel's configurations compared with the reference, as they came */
    size_t nverdicts, cap;
    json_t *records;    /* every unit's T4 record, for the T4 written after such a stop */
    bool judge;         /* a fleet whose workers validate: the verdicts come back through the
                         * units, and this side stops the tuning (kt_op_stop_disagreement) */
    size_t compared, disagreed; /* for judge: the kernel's units validated there, and those wrong */
    char *ref_config;   /* the reference unit's configuration (a consensus's), once a unit is told */
    size_t ref_agree, ref_among;
} t4_live;

static void live_free(t4_live *l) {
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

static void on_unit(const kt_decision *d, size_t u, void *user) {
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
static void print_message(FILE *out, const char *msg, int max_lines) {
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

/* ---- the command ------------------------------------------------------------------------- */

typedef struct run_state {
    options o;
    char *error; /* the failure, printed at the end (and as the --json document) */
    bool usage;  /* the failure is the options' (exit status 2) */
} run_state;

static void set_error(run_state *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_error(run_state *r, const char *fmt, ...) {
    if (r->error) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    r->error = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (r->error) {
        va_start(ap, fmt);
        vsnprintf(r->error, (size_t)n + 1, fmt, ap);
        va_end(ap);
    } else {
        r->error = cli_format("out of memory");
    }
}

#define FAIL(...)                      \
    do {                               \
        set_error(&run, __VA_ARGS__);  \
        goto done;                     \
    } while (0)
#define KT(call)                                                                   \
    do {                                                                           \
        kt_status st_ = (call);                                                    \
        if (st_ != KT_OK) FAIL("%s: %s", kt_status_name(st_), kt_last_error());   \
    } while (0)

/* ---- a launch geometry that cannot be computed --------------------------------------------- */

/* One expression of the launch geometry and the JSON path it comes from. */
typedef struct geo_expr {
    char *text, *path;
    bool size; /* a size: a whole number >= 0 (a GridDiv factor only has to evaluate) */
} geo_expr;

/* The search for the first configuration whose geometry cannot be computed. */
typedef struct geo_search {
    const t1 *p;
    const int64_t *ps;
    size_t nps;
    const geo_expr *ex;
    size_t nex;
    char *config; /* found: the configuration, as the tuning names it */
    size_t at;    /* and the expression that fails for it */
} geo_search;

/* Configuration idx of sp's last enumeration as kt_space_config_format writes it (allocated;
 * NULL when out of memory). */
static char *format_config(const kt_space *sp, size_t idx) {
    for (size_t len = 256;; len *= 2) {
        char *buf = malloc(len);
        if (buf == NULL) return NULL;
        kt_status st = kt_space_config_format(sp, idx, buf, len);
        if (st == KT_OK) return buf;
        free(buf);
        if (st != KT_ERR_LIMIT) return NULL;
    }
}

/* A Python literal of parameter k's value in cfg (allocated): a string quoted, a bool as T1's
 * Type says, a whole number as an integer, another number as the shortest text that reads back. */
static char *config_literal(const kt_config *cfg, size_t k, const char *type) {
    const char *s = kt_config_string(cfg, k);
    json_t *j = NULL;
    if (s) j = json_string(s);
    else if (strcmp(type, "bool") == 0) return cli_format("%s", kt_config_int(cfg, k) ? "True" : "False");
    else if ((double)kt_config_int(cfg, k) == kt_config_double(cfg, k)) return cli_format("%lld", (long long)kt_config_int(cfg, k));
    else j = json_real(kt_config_double(cfg, k));
    char *lit = j ? t1_literal(j) : NULL;
    json_decref(j);
    return lit;
}

/* A constraint callback that accepts every configuration and, until one is found, checks each
 * one's geometry: a space of that configuration alone gets the geometry's expressions as derived
 * values one at a time (a derived value is computed per configuration, as a launch computes its
 * geometry), a size with a constraint that it is a whole number >= 0, and the first that fails
 * to evaluate or is no size is recorded with the configuration. */
static int find_geometry(const kt_config *cfg, void *user) {
    geo_search *g = user;
    if (g->config) return 1;
    kt_space *one = NULL;
    bool ok = kt_space_create(&one) == KT_OK;
    for (size_t k = 0; ok && k < g->p->nparams; k++) {
        char *lit = config_literal(cfg, k, g->p->params[k].type);
        char *list = lit ? cli_format("[%s]", lit) : NULL;
        ok = list && kt_space_add_param(one, g->p->params[k].name, list) == KT_OK;
        free(lit);
        free(list);
    }
    size_t n = 0;
    ok = ok && kt_space_add_input(one, "ProblemSize") == KT_OK && kt_space_bind_ints(one, "ProblemSize", g->ps, g->nps) == KT_OK &&
         kt_space_enumerate(one, &n) == KT_OK && n == 1;
    char *text = ok ? format_config(one, 0) : NULL;
    for (size_t e = 0; text && e < g->nex; e++) {
        char name[48]; /* an index: always fits */
        snprintf(name, sizeof name, "kt_geometry_%zu", e);
        if (kt_space_add_derived(one, name, g->ex[e].text) != KT_OK) break;
        char *is_size = g->ex[e].size ? cli_format("%s >= 0 and %s == int(%s)", name, name, name) : NULL;
        if (g->ex[e].size && (is_size == NULL || kt_space_add_constraint(one, is_size) != KT_OK)) {
            free(is_size);
            break;
        }
        free(is_size);
        if (kt_space_enumerate(one, &n) != KT_OK || n != 1) { /* it fails to evaluate, or is no size */
            g->config = text, g->at = e, text = NULL;
            break;
        }
    }
    free(text);
    kt_space_destroy(one);
    return 1;
}

/* The launch geometry's expressions in the order a launch computes them, each with its JSON path:
 * per dimension, the GridDiv factors, the global size (the grid from ProblemSize and GridDiv, or
 * GlobalSize) and the local size. *n gets how many; NULL when out of memory. */
static geo_expr *geometry_exprs(const t1 *p, size_t *n) {
    static const char dims[] = "XYZ";
    size_t cap = 6;
    for (int d = 0; d < 3; d++) cap += p->ndiv[d];
    geo_expr *ex = calloc(cap, sizeof *ex);
    *n = 0;
    bool ok = ex != NULL;
    for (int d = 0; ok && d < 3; d++) {
        for (size_t i = 0; ok && i < p->ndiv[d]; i++, ++*n) {
            ex[*n].text = cli_format("int(%s)", p->div[d][i]);
            ex[*n].path = cli_format("KernelSpecification.GridDiv%c[%zu]", dims[d], i);
            ok = ex[*n].text && ex[*n].path;
        }
        if (ok && p->global[d]) {
            ex[*n].size = true;
            ex[*n].text = cli_format("%s", p->global[d]);
            ex[*n].path = !p->grid_div ? cli_format("KernelSpecification.GlobalSize.%c", dims[d])
                          : p->ndiv[d] ? cli_format("KernelSpecification.GridDiv%c", dims[d])
                                       : cli_format("KernelSpecification.LocalSize.%c (the divisor of the grid's %c)", dims[d], dims[d]);
            ok = ex[*n].text && ex[*n].path;
            ++*n;
        }
        if (ok && p->local[d]) {
            ex[*n].size = true;
            ex[*n].text = cli_format("%s", p->local[d]);
            ex[*n].path = cli_format("KernelSpecification.LocalSize.%c", dims[d]);
            ok = ex[*n].text && ex[*n].path;
            ++*n;
        }
    }
    if (!ok && ex) {
        for (size_t i = 0; i <= *n && i < cap; i++) free(ex[i].text), free(ex[i].path);
        free(ex);
        return NULL;
    }
    return ex;
}

/* For a tuning that stopped on a geometry it could not compute (msg, the library's words), the
 * JSON path of the expression at fault and the configuration it fails for: the first such
 * configuration of the reference's space (the Default values, when it has one), then of the
 * tuned space (allocated; NULL when none is found). */
static char *geometry_failure(const t1 *p, const options *o, const int64_t *ps, size_t nps, bool reference, const char *msg) {
    size_t nex = 0;
    geo_expr *ex = geometry_exprs(p, &nex);
    geo_search g = {p, ps, nps, ex, nex, NULL, 0};
    int k = reference ? 0 : 1;
    for (; ex && g.config == NULL && k < 2; k++) {
        char *why = NULL;
        size_t n;
        kt_space *sp = make_space(p, o->defines, k ? o->ndefines : 0, k == 0, ps, nps, &why);
        if (sp && kt_space_add_constraint_fn(sp, find_geometry, &g) == KT_OK) kt_space_enumerate(sp, &n);
        kt_space_destroy(sp);
        free(why);
        if (g.config) break;
    }
    char *out = g.config ? cli_format("%s: %s: %sconfiguration %s: %s", p->path, ex[g.at].path, k == 0 ? "the Default " : "", g.config, msg)
                         : NULL;
    for (size_t i = 0; i < nex; i++) free(ex[i].text), free(ex[i].path);
    free(ex);
    free(g.config);
    return out;
}

/* ---- a problem made ready to measure: its data on the device, and the op over a space ------- */

/* What measuring a problem on a device needs besides the space: made once (prepare), then an op
 * is declared over any space of the problem (declare): `kerntune tune` declares one over the
 * space it searches, a fleet worker (fleet.c) one per configuration it is sent. */
typedef struct prepared {
    const t1 *p;
    kt_context *ctx;
    size_t dev;
    bool host_dev;
    bool no_data;         /* replay, or the coordinator of a fleet: buffers are never read */
    bool replay;          /* a replay: buffers of one element stand in for the arguments */
    const char *source;   /* the kernel source ("" when nothing is built here) */
    kt_space *ref_sp;     /* the Default configuration, the reference (NULL: none) */
    const char *no_reference; /* why a consensus chooses the reference instead */
    char no_reference_buf[256];
    kt_arg args[64];
    void *host[64], *dev_buf[64];
    int64_t elems[64];    /* each vector argument's element count as the problem declares it */
    size_t nbuf;
    reference ref;
} prepared;

static void prepared_free(prepared *pr) {
    for (size_t i = 0; i < pr->nbuf; i++) {
        free(pr->host[i]);
        if (pr->dev_buf[i]) kt_device_free(pr->ctx, pr->dev, pr->dev_buf[i]);
    }
    for (size_t i = 0; i < pr->ref.n; i++) free(pr->ref.data[i]);
    kt_space_destroy(pr->ref_sp);
    memset(pr, 0, sizeof *pr);
}

/* Reads --answer FILE: the expected bytes of every output argument (a WriteOnly or ReadWrite
 * vector) as the tuning allocates it, one after another in the order of the problem's
 * Arguments, into pr->ref, which the reference function writes into the outputs as it writes
 * ReferenceArguments. NULL, or the error (allocated), naming the file and what it should hold. */
static char *read_answer(prepared *pr, const char *path) {
    const t1 *p = pr->p;
    reference *ref = &pr->ref;
    *ref = (reference){.ctx = pr->ctx, .device = pr->dev, .host = pr->host_dev};
    size_t want = 0, len = 1;
    for (size_t i = 0; i < p->nargs; i++)
        if (p->args[i].vector && p->args[i].access != KT_READ_ONLY) want += pr->args[i].bytes, len += strlen(p->args[i].name) + 64;
    if (want == 0) return cli_format("--answer %s: the problem has no output argument (a WriteOnly or ReadWrite vector) to compare", path);
    char *what = malloc(len); /* "c (256 float elements, 1024 bytes), ..." */
    if (what == NULL) return cli_format("out of memory");
    what[0] = '\0';
    for (size_t i = 0, n = 0; i < p->nargs; i++) {
        const t1_arg *a = &p->args[i];
        if (!a->vector || a->access == KT_READ_ONLY) continue;
        n += (size_t)snprintf(what + n, len - n, "%s%s (%zu %s elements, %zu bytes)", n ? ", " : "", a->name,
                              pr->args[i].bytes / kt_type_size(a->type), a->type_name, pr->args[i].bytes);
    }
    struct stat st;
    char *msg = NULL;
    if (stat(path, &st) != 0) msg = cli_format("--answer %s: cannot be read: %s", path, strerror(errno));
    else if (S_ISREG(st.st_mode) && (size_t)st.st_size != want)
        msg = cli_format("--answer %s: %lld bytes; expected %zu: the outputs %s, one after another in the order of the problem's Arguments",
                         path, (long long)st.st_size, want, what);
    free(what);
    if (msg) return msg;
    char *why = NULL, *bytes = t1_read_file(path, "the file", 0, want, NULL, &why);
    if (bytes == NULL) {
        msg = cli_format("--answer %s: %s", path, why ? why : "out of memory");
        free(why);
        return msg;
    }
    for (size_t i = 0, at = 0; i < p->nargs; i++) {
        if (!p->args[i].vector || p->args[i].access == KT_READ_ONLY) continue;
        size_t b = pr->args[i].bytes;
        ref->arg[ref->n] = i;
        ref->bytes[ref->n] = b;
        if ((ref->data[ref->n] = malloc(b)) == NULL) {
            free(bytes);
            return cli_format("out of memory");
        }
        memcpy(ref->data[ref->n++], bytes + at, b);
        at += b;
    }
    free(bytes);
    return NULL;
}

/* Makes the reference space (validating: when nothing stands in for the data) and every
 * argument's data, sized over sp and full_sp (and the reference); returns NULL, or the error
 * (allocated). pr's p, ctx, dev, host_dev, no_data and source are set by the caller. */
static char *prepare(prepared *pr, const options *o, const int64_t *ps, size_t nps, kt_space *sp, kt_space *full_sp) {
    const t1 *p = pr->p;
    char *err = NULL;
    kt_status st;
#define PFAIL(...) return cli_format(__VA_ARGS__)
#define PKT(call)                                                              \
    do {                                                                       \
        if ((st = (call)) != KT_OK) PFAIL("%s: %s", kt_status_name(st), kt_last_error()); \
    } while (0)
    /* the reference: --answer, else ReferenceArguments, else the Default configuration when it
     * is a configuration of the space (every parameter's Default among its Values, meeting the
     * Conditions), else a consensus of the first configurations (declare) */
    if (!o->simulate && p->nrefs == 0 && !o->answer && !o->validate_off) {
        pr->ref_sp = make_space(p, NULL, 0, true, ps, nps, &err);
        size_t nref = 0;
        if (pr->ref_sp == NULL && err) return err;
        /* t1.c keeps a Default only when it is among its Values, and says why it did not */
        for (size_t i = 0; pr->ref_sp == NULL && pr->no_reference == NULL && i < p->nparams; i++)
            if (p->params[i].dflt == NULL && p->params[i].dflt_unused) {
                snprintf(pr->no_reference_buf, sizeof pr->no_reference_buf, "the Default of %s is not used: %s", p->params[i].name,
                         p->params[i].dflt_unused);
                pr->no_reference = pr->no_reference_buf;
            }
        if (pr->ref_sp == NULL && pr->no_reference == NULL) pr->no_reference = "a parameter has no Default";
        else if (pr->ref_sp && !enumerate(p, pr->ref_sp, NULL, 0, true, ps, nps, &nref, &err)) return err;
        else if (pr->ref_sp && nref == 0) {
            pr->no_reference = "the Default values break ConfigurationSpace.Conditions";
            kt_space_destroy(pr->ref_sp);
            pr->ref_sp = NULL;
        }
    }
    /* A buffer holds what every configuration that may run writes: its Size is evaluated over the
     * problem's whole space (as Kernel Tuner sizes it), over the space the --define values leave
     * (a value outside the problem's Values) and over the Default configuration (the reference,
     * which --define does not restrict), and the largest is taken. */
    kt_space *const sizing[3] = {sp, full_sp, pr->ref_sp};
    for (size_t i = 0; i < p->nargs; i++) {
        const t1_arg *a = &p->args[i];
        if (!a->vector) {
            pr->args[i] = (kt_arg){.type = a->type};
            if (a->type == KT_TYPE_F32) pr->args[i].f32 = (float)a->fill_value;
            else if (a->type == KT_TYPE_F64) pr->args[i].f64 = a->fill_value;
            else if (a->type >= KT_TYPE_U8 && a->type <= KT_TYPE_U64) pr->args[i].u = a->fill_bits;
            else pr->args[i].i = (int64_t)a->fill_bits; /* in range: checked when the problem was read */
            continue;
        }
        int64_t count = a->size;
        for (int k = 0; a->size_expr && k < 3; k++) {
            int64_t n;
            if (sizing[k] == NULL) continue;
            if (kt_space_eval_int(sizing[k], a->size_expr, &n) != KT_OK)
                PFAIL("%s: KernelSpecification.Arguments[%zu].Size: %s%s", o->problem, i, kt_last_error(),
                      k == 1 ? " (over the problem's whole space)" : k == 2 ? " (for the Default configuration)" : "");
            if (k == 0 || n > count) count = n;
        }
        if (count <= 0) PFAIL("%s: KernelSpecification.Arguments[%zu].Size: %lld elements; expected at least 1", o->problem, i, (long long)count);
        if ((uint64_t)count > SIZE_MAX / 16) PFAIL("%s: KernelSpecification.Arguments[%zu].Size: %lld elements is too many", o->problem, i, (long long)count);
        pr->elems[i] = count;
        if (o->simulate) count = 1; /* replay reads no data */
        size_t bytes = (size_t)count * kt_type_size(a->type);
        /* a fleet's coordinator never touches its buffers: calloc maps them without using memory */
        pr->host[i] = pr->no_data ? calloc(1, bytes) : malloc(bytes);
        if (pr->host[i] == NULL) PFAIL("argument '%s': cannot allocate %zu bytes", a->name, bytes);
        pr->nbuf = i + 1;
        if (!pr->no_data && !fill_data(p, a, i, pr->host[i], (size_t)count, o->seed, &err)) { /* only reading DataSource fails */
            char *msg = cli_format("%s: KernelSpecification.Arguments[%zu].DataSource: %s", o->problem, i, err ? err : "out of memory");
            free(err);
            return msg;
        }
        if (pr->host_dev) {
            pr->args[i] = kt_arg_buf(pr->host[i], bytes);
        } else {
            PKT(kt_device_alloc(pr->ctx, pr->dev, bytes, &pr->dev_buf[i]));
            PKT(kt_device_write(pr->ctx, pr->dev, pr->dev_buf[i], pr->host[i], bytes));
            pr->args[i] = kt_arg_buf(pr->dev_buf[i], bytes);
        }
    }
    if (!pr->no_data && o->answer) return read_answer(pr, o->answer);
    if (!pr->no_data && p->nrefs > 0) { /* the expected contents from ReferenceArguments */
        reference *ref = &pr->ref;
        *ref = (reference){.ctx = pr->ctx, .device = pr->dev, .host = pr->host_dev};
        for (size_t r = 0; r < p->nrefs; r++) {
            size_t a = 0;
            while (strcmp(p->args[a].name, p->refs[r].target) != 0) a++;
            const t1_arg *ta = &p->args[a];
            t1_arg as_ref = *ta;
            as_ref.fill = p->refs[r].fill, as_ref.fill_value = p->refs[r].fill_value, as_ref.fill_bits = p->refs[r].fill_bits;
            as_ref.data_source = p->refs[r].data_source;
            as_ref.has_seed = p->refs[r].has_seed, as_ref.seed = p->refs[r].seed;
            ref->arg[ref->n] = a;
            ref->bytes[ref->n] = pr->args[a].bytes;
            ref->data[ref->n] = malloc(pr->args[a].bytes);
            if (ref->data[ref->n] == NULL) PFAIL("out of memory");
            ref->n++;
            if (!fill_data(p, &as_ref, a, ref->data[ref->n - 1], pr->args[a].bytes / kt_type_size(ta->type), o->seed, &err)) {
                char *msg = cli_format("%s: KernelSpecification.ReferenceArguments[%zu].DataSource: %s", o->problem, r, err ? err : "out of memory");
                free(err);
                return msg;
            }
        }
    }
    return NULL;
}

/* A work formula for a replay, whose buffers stand in with one element: each name of a vector
 * argument (that no parameter shadows) becomes its declared element count, so that the formula
 * gives what it gave on the recorded device. Names are the language's (a letter or '_', then
 * letters, digits, '_'); numbers and strings are copied as they are. NULL stays NULL. */
static char *work_declared(const prepared *pr, const char *formula) {
    if (formula == NULL) return NULL;
    const t1 *p = pr->p;
    size_t cap = strlen(formula) * 24 + 1, n = 0;
    char *out = malloc(cap);
    if (out == NULL) return NULL;
    for (const char *s = formula; *s;) {
        size_t len = 1;
        if (isdigit((unsigned char)*s) || (*s == '.' && isdigit((unsigned char)s[1]))) { /* 1e-3, 0x1f, 2.5 */
            while (isalnum((unsigned char)s[len]) || s[len] == '.' ||
                   ((s[len] == '+' || s[len] == '-') && (s[len - 1] == 'e' || s[len - 1] == 'E')))
                len++;
        } else if (*s == '\'' || *s == '"') {
            while (s[len] && s[len] != *s) len += (s[len] == '\\' && s[len + 1]) ? 2 : 1;
            if (s[len]) len++;
        } else if (isalpha((unsigned char)*s) || *s == '_') {
            while (isalnum((unsigned char)s[len]) || s[len] == '_') len++;
            bool param = false;
            for (size_t k = 0; k < p->nparams && !param; k++)
                param = strlen(p->params[k].name) == len && strncmp(p->params[k].name, s, len) == 0;
            for (size_t a = 0; a < p->nargs && !param; a++) {
                if (!p->args[a].vector || strlen(p->args[a].name) != len || strncmp(p->args[a].name, s, len) != 0) continue;
                n += (size_t)snprintf(out + n, cap - n, "(%lld)", (long long)pr->elems[a]);
                s += len;
                len = 0;
                break;
            }
            if (len == 0) continue;
        }
        memcpy(out + n, s, len);
        n += len, s += len;
    }
    out[n] = '\0';
    return out;
}

/* How many of the first configurations vote when a consensus chooses the reference. */
#define CONSENSUS_VOTERS 5

/* Declares op over configurations sp of the prepared problem: its arguments, the reference group
 * and the kernel's variants, and how they are validated; returns NULL, or the error (allocated).
 * validate: compare outputs against the reference here (off where no data is read). */
static char *declare(prepared *pr, kt_space *const *sps, size_t nsp, bool validate, kt_op *op) {
    const t1 *p = pr->p;
    kt_status st;
    for (size_t i = 0; i < p->nargs; i++) {
        const t1_arg *a = &p->args[i];
        if (!a->vector) {
            PKT(kt_op_add_scalar(op, a->name, a->type));
            continue;
        }
        PKT(kt_op_add_buffer(op, a->name, a->type, a->access));
        if (a->constant) PKT(kt_op_set_constant(op, i));
        if (a->compare_sum) PKT(kt_op_set_compare(op, i, KT_COMPARE_SUM));
    }
    /* the reference group (the Default configuration) goes first: it is the budget's unit 0 */
    if (pr->ref_sp) {
        PKT(kt_op_add_variants(op, "reference", pr->ref_sp, pr->source, p->kernel_name, p->options, p->noptions));
        PKT(kt_op_set_kernel_tuner_contract(op, "reference", NULL)); /* T1 kernels are written for Kernel Tuner's defines */
        PKT(kt_op_set_default(op, "reference"));
    }
    /* one group "kernel" (a worker measuring several configurations at once: "kernel 0", ...) */
    for (size_t g = 0; g < nsp; g++) {
        char name[32] = "kernel";
        if (nsp > 1) snprintf(name, sizeof name, "kernel %zu", g);
        PKT(kt_op_add_variants(op, name, sps[g], pr->source, p->kernel_name, p->options, p->noptions));
        PKT(kt_op_set_kernel_tuner_contract(op, name, NULL));
    }
    if (p->atol >= 0) PKT(kt_op_set_tolerance(op, p->atol, p->rtol));
    /* the work of a call (x-kerntune); in a replay, whose buffers stand in with one element,
     * with the element counts the problem declares in place of the buffers' names */
    if ((p->work_flops || p->work_bytes) && !pr->replay) PKT(kt_op_set_work(op, p->work_flops, p->work_bytes));
    if ((p->work_flops || p->work_bytes) && pr->replay) {
        char *f = work_declared(pr, p->work_flops), *b = work_declared(pr, p->work_bytes);
        st = (f == NULL) != (p->work_flops == NULL) || (b == NULL) != (p->work_bytes == NULL) ? KT_ERR_NO_MEMORY : kt_op_set_work(op, f, b);
        free(f), free(b);
        if (st != KT_OK) PFAIL("%s: %s", kt_status_name(st), st == KT_ERR_NO_MEMORY ? "out of memory" : kt_last_error());
    }
    if (!validate) { /* no outputs to compare: what stands in for the device validated (a recording, a worker) */
        if (pr->ref_sp) PKT(kt_op_set_reference_only(op, 1)); /* still never the winner */
        PKT(kt_op_set_validation(op, 0));
    } else if (pr->ref.n > 0) { /* --answer, or ReferenceArguments */
        PKT(kt_op_set_reference_fn(op, write_reference, &pr->ref));
    } else if (pr->ref_sp != NULL) {
        /* the configuration of the parameters' Default values is the reference (added above): it
         * validates, but the winner comes from the space the user asked for (--define included) */
        PKT(kt_op_set_reference_only(op, 1));
    } else {
        /* no usable Default: of the first configurations, the one whose outputs agree with the
         * most of them (never blindly the first: it may be the one that is wrong) */
        PKT(kt_op_set_reference(op, nsp > 1 ? "kernel 0" : "kernel"));
        PKT(kt_op_set_reference_consensus(op, CONSENSUS_VOTERS));
    }
    return NULL;
#undef PFAIL
#undef PKT
}

/* ---- which reference validated, and why ----------------------------------------------------- */

/* What `kerntune tune` says of validation, in --json and the T4's "x-kerntune": {"validation":
 * "reference" or "off", "reference": {"source", "why", and as they apply "configuration",
 * "agreeing", "among", "file"}}; the text line into line (empty when there is none to print).
 * ref_config: the reference's configuration, when a configuration was the reference;
 * agree/among: a consensus's votes; active: the reference was used. */
static json_t *validation_info(const prepared *pr, const options *o, const char *const *names, const char *ref_config, size_t agree,
                               size_t among, bool active, char *line, size_t len) {
    const t1 *p = pr->p;
    json_t *v = json_object(), *r = json_object();
    const char *source = "none", *why = NULL;
    char label[64] = "";
    line[0] = '\0';
    if (o->validate_off) {
        why = "--validate off";
        snprintf(line, len, "validation: off (--validate off): no configuration's output was checked");
    } else if (o->simulate) {
        why = "a replay: the recording says which configurations were correct";
    } else if (o->workers) {
        source = "each worker's", why = "each worker validates what it measures against the reference it chose itself";
    } else if (!active) {
        why = "the reference could not be used";
    } else if (o->answer) {
        source = "answer file", why = "--answer";
        json_object_set_new(r, "file", json_string(o->answer));
        snprintf(line, len, "validation: against the answer file %s", o->answer);
    } else if (p->nrefs > 0) {
        source = "ReferenceArguments", why = "the problem gives ReferenceArguments";
        snprintf(line, len, "validation: against the problem's ReferenceArguments");
    } else if (pr->ref_sp) {
        source = "Default", why = "every parameter's Default is among its Values and meets the Conditions";
        snprintf(line, len, "validation: against the Default configuration %s", ref_config ? ref_config : "");
    } else {
        if (among == 0) agree = among = 1; /* one configuration voted: it is the reference */
        snprintf(label, sizeof label, "consensus of %zu of %zu", agree, among);
        source = label, why = pr->no_reference;
        json_object_set_new(r, "agreeing", json_integer((json_int_t)agree));
        json_object_set_new(r, "among", json_integer((json_int_t)among));
        snprintf(line, len, "validation: against the consensus of %zu of %zu configurations (%s): the reference is %s", agree, among,
                 pr->no_reference ? pr->no_reference : "", ref_config ? ref_config : "");
    }
    json_object_set_new(r, "source", json_string(source));
    json_object_set_new(r, "why", why ? json_string(why) : json_null());
    if (ref_config && active && !o->answer && p->nrefs == 0)
        json_object_set_new(r, "configuration", t4_configuration(ref_config, names, p->nparams));
    json_object_set_new(v, "validation", json_string(o->validate_off ? "off" : "reference"));
    json_object_set_new(v, "reference", r);
    return v;
}

/* A tuning that validation stopped (KT_ERR_DISAGREEMENT): most configurations compared with the
 * reference disagreed. Names the parameter that separates them (disagree.c) in the text, the
 * --json document and the T4 file (the records so far, and in its "x-kerntune" what validation
 * found); NULL, or the error (allocated). why: the library's words. */
static char *stopped(const t1 *p, const options *o, t4_live *live, const json_t *vinfo, const char *why, FILE *txt, FILE *doc_out,
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

/* The strategy of the problem's Search (in kerntune's words or Kernel Tuner's) into *strategy,
 * unless --strategy was given; NULL, or the error (allocated). */
static char *problem_strategy(const t1 *p, const options *o, const char **strategy) {
    if (p->search == NULL || o->strategy_given) return NULL;
    static const char *const names[][2] = {{"brute_force", "exhaustive"}, {"random_sample", "random"},
                                           {"greedy_ils", "local"},        {"greedy_mls", "local"},
                                           {"simulated_annealing", "anneal"}, {"dual_annealing", "anneal"},
                                           {"genetic_algorithm", "genetic"}, {"bayes_opt", "model"}};
    *strategy = NULL;
    for (size_t i = 0; i < kt_search_strategy_count() && *strategy == NULL; i++)
        if (strcmp(p->search, kt_search_strategy_name(i)) == 0) *strategy = p->search;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && *strategy == NULL; i++)
        if (strcmp(p->search, names[i][0]) == 0) *strategy = names[i][1];
    if (*strategy == NULL)
        return cli_format("%s: Search.Name: '%s' is not a strategy kerntune has (exhaustive, random, local, anneal, genetic, model, auto, or "
                          "Kernel Tuner's brute_force, random_sample, greedy_ils, greedy_mls, simulated_annealing, dual_annealing, "
                          "genetic_algorithm, bayes_opt); --strategy NAME overrides it", o->problem, p->search);
    if (p->search_attributes)
        return cli_format("%s: Search.Attributes: kerntune's strategies take none (pass --strategy %s to tune without them)", o->problem,
                          *strategy);
    return NULL;
}

/* Whether --t4 names a file the problem reads (its kernel, an argument's or a reference's
 * data): the error (allocated), or NULL. */
static char *t4_replaces_input(const t1 *p, const options *o) {
    for (size_t i = 0; o->t4 && i < p->nargs + p->nrefs + 1; i++) {
        const char *src = i == 0 ? p->kernel_file : i <= p->nargs ? p->args[i - 1].data_source : p->refs[i - 1 - p->nargs].data_source;
        if (src == NULL || (i == 0 && o->simulate)) continue;
        char *path = src[0] == '/' || i == 0 ? cli_format("%s", src) : cli_format("%s/%s", p->dir, src);
        bool same = path && same_file(o->t4, path);
        free(path);
        if (!same) continue;
        if (i == 0) return cli_format("--t4 %s is the problem's KernelSpecification.KernelFile: the results would replace it", o->t4);
        if (i <= p->nargs)
            return cli_format("--t4 %s is the problem's KernelSpecification.Arguments[%zu].DataSource: the results would replace it", o->t4,
                              i - 1);
        return cli_format("--t4 %s is the problem's KernelSpecification.ReferenceArguments[%zu].DataSource: the results would replace it",
                          o->t4, i - 1 - p->nargs);
    }
    return NULL;
}

/* Opens the cache the options name (--cache, else KERNTUNE_CACHE, else the default) to see that
 * it can be used, before any work: the error (allocated), or NULL; a warning of the cache's on
 * stderr when talk. */
static char *check_cache(const options *o, bool talk) {
    kt_cache *c = NULL;
    kt_status st = kt_cache_open(o->cache, &c);
    const char *env = getenv("KERNTUNE_CACHE");
    if (st == KT_ERR_NOT_FOUND && o->cache == NULL && o->resume)
        return cli_format("--resume: there is no cache to resume from (KERNTUNE_CACHE=off, or no home directory); name one with --cache");
    if (st == KT_ERR_NOT_FOUND && o->cache == NULL) return NULL; /* KERNTUNE_CACHE=off, or no home: decisions last as long as the process */
    if (st != KT_OK) {
        if (o->cache) return cli_format("--cache %s: %s", o->cache, kt_last_error());
        if (env) return cli_format("KERNTUNE_CACHE=%s: %s", env, kt_last_error());
        return cli_format("the default cache: %s (--cache off tunes without it)", kt_last_error());
    }
    char *err = NULL;
    const char *w = kt_cache_warning(c);
    char *asked = o->cache ? cli_format("--cache %s", o->cache) : env ? cli_format("KERNTUNE_CACHE=%s", env) : cli_format("the default cache");
    const char *requested = o->cache ? o->cache : env;
    bool memory = strcmp(kt_cache_path(c), ":memory:") == 0 && !(requested && strcmp(requested, ":memory:") == 0);
    if (memory) { /* it could not be used: it would have been ignored */
        char dflt[4096]; /* KT_ERR_LIMIT when it does not fit: then the library's words stand alone */
        const char *path = o->cache ? o->cache : kt_cache_default_path(dflt, sizeof dflt) == KT_OK ? dflt : NULL;
        if (path && access(path, R_OK | W_OK) != 0)
            err = cli_format("%s: cannot be read and written: %s (--cache off tunes without a cache)", asked ? asked : "--cache", strerror(errno));
        else
            err = cli_format("%s: cannot be used: %s (--cache off tunes without a cache)", asked ? asked : "--cache", w);
    } else if (w && *w && talk) {
        fprintf(stderr, "kerntune tune: warning: %s: %s\n", asked ? asked : "--cache", w);
    }
    free(asked);
    kt_cache_close(c);
    return err;
}

/* What a finished tuning says, computed once for the outputs (summarize): the inputs the
 * command set, then counts, the best, validation, the cache, the fleet, where the time went. */
typedef struct summary {
    const options *o;
    const t1 *p;
    const prepared *prep;
    const replay_data *replay;
    kt_op *op;
    fleet *fl;
    kt_context *ctx;
    const kt_decision *d;
    const char *const *names;
    const char *dev_name;
    kt_status st;
    kt_policy policy;
    size_t total;
    double wall, peak_f, peak_b, startup_s, tuning_s;
    const char *rejected; /* what the persistent cache said of its record */
    bool low, reraced;
    /* computed */
    size_t measured, failed, not_run, best, recorded, ref_unit;
    size_t fails[8], examples[8][EXAMPLES];
    double best_ms;
    bool cached, validated;
    json_t *vinfo; /* validation_info's, owned by the command */
    char vline[512];
    fleet_stats fs;
    const char *cache_path;
    uint64_t runs;
    double split_ms[3], run_ns, confidence, build_busy, build_end_s, build_busy_early;
    size_t build_threads;
    const t4_record *chosen, *truth;
} summary;

/* Fills the computed part of s from its inputs. */
static void summarize(summary *s) {
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
static void print_summary(FILE *txt, const summary *s) {
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
        for (size_t k = 0; k < NKINDS; k++) fprintf(txt, "%s%zu %s", k ? ", " : "", s->fails[kinds[k].outcome], kinds[k].name);
        fprintf(txt, "), %zu not run\n", s->not_run);
        for (size_t k = 0; k < NKINDS; k++) {
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

/* The --json document of a finished tuning. */
static json_t *summary_json(const summary *s) {
    json_t *j = json_object();
    json_object_set_new(j, "problem", json_string(s->p->name));
    json_object_set_new(j, "ignored", t1_ignored_json(s->p)); /* JSON paths accepted without being read */
    json_object_set_new(j, "device", json_string(s->dev_name));
    json_object_set_new(j, "configurations", json_integer((json_int_t)s->total));
    json_object_set_new(j, "measured", json_integer((json_int_t)s->measured));
    json_object_set_new(j, "failed", json_integer((json_int_t)s->failed));
    json_object_set_new(j, "not_run", json_integer((json_int_t)s->not_run));
    json_t *kj = json_object(), *ej = json_object();
    for (size_t k = 0; k < NKINDS; k++) {
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
    if (s->fl) {
        json_t *fj = json_object();
        json_object_set_new(fj, "device", json_string(fleet_device_name(s->fl)));
        json_object_set_new(fj, "workers", json_integer((json_int_t)s->fs.workers));
        json_object_set_new(fj, "workers_left_out", json_integer((json_int_t)s->fs.ignored));
        json_object_set_new(fj, "jobs", json_integer((json_int_t)s->fs.jobs));
        json_object_set_new(fj, "failed", json_integer((json_int_t)s->fs.failed));
        json_object_set_new(fj, "taken_over", json_integer((json_int_t)s->fs.reclaimed));
        json_object_set_new(fj, "duplicate_results", json_integer((json_int_t)s->fs.duplicates));
        json_object_set_new(fj, "coordinator_cpu_s", json_real(s->fs.cpu_s));
        json_object_set_new(fj, "coordinator_us_per_job", s->fs.jobs ? json_real(s->fs.cpu_s * 1e6 / (double)s->fs.jobs) : json_null());
        json_object_set_new(j, "fleet", fj);
    }
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

int run_tune(int argc, char **argv) {
    run_state run = {0};
    options *op_ = &run.o;
    int rc = parse_options(argc, argv, op_);
    if (rc != 0) {
        for (int i = 1; i < argc; i++)
            if (strcmp(argv[i], "--json") == 0) {
                json_error(stdout, usage_message ? usage_message : "usage error");
                break;
            }
        free(usage_message);
        usage_message = NULL;
        return rc;
    }
    const options o = *op_;
    rc = 1;
    /* the kernel (in its worker processes, which inherit file descriptor 1) and the platforms'
     * libraries may print: with --json, all of that goes to stderr and the document alone to
     * the real stdout */
    FILE *jout = o.json ? cli_json_begin() : NULL, *doc_out = jout ? jout : stdout;
    t1 p;
    char *err = NULL;
    kt_context *ctx = NULL;
    kt_space *sp = NULL, *full_sp = NULL;
    prepared prep = {0};
    char *source = NULL;
    replay_data replay = {0};
    told_log told = {0};
    fleet *fl = NULL;
    long dev = -1;
    const char *names[64];
    json_t *t4doc = NULL, *vinfo = NULL; /* what validation_info says */
    double startup_s = -1, tuning_s = 0; /* with a budget of seconds: what start-up took, what the tuning got */
    t4_live live = {0};
    char replay_dir[PATH_MAX] = ""; /* a stand-in device's artifact directory (stand_in) */
    bool replay_dir_made = false;
    FILE *txt = o.quiet ? NULL : o.json ? stderr : stdout; /* the human summary */
    if (!t1_load(o.problem, &p, &err)) FAIL("%s", err ? err : "out of memory");
    if (txt) t1_print_ignored(&p, stderr, "kerntune tune"); /* what the problem gives that is not read: once */
    if (p.nargs > 64 || p.nparams > 64) FAIL("%s: at most 64 arguments and 64 parameters", o.problem);
    for (size_t i = 0; i < p.nparams; i++) names[i] = p.params[i].name;
    const char *strategy = o.strategy;
    if ((err = problem_strategy(&p, &o, &strategy)) != NULL) FAIL("%s", err);
    if ((err = t4_replaces_input(&p, &o)) != NULL) {
        run.usage = true;
        FAIL("%s", err);
    }
    if (o.nproblem && p.nproblem && o.nproblem != p.nproblem) /* sizes and grids index ProblemSize's dimensions */
        FAIL("--problem-size %s: %zu dimension%s; the problem's KernelSpecification.ProblemSize has %zu", o.problem_size_text, o.nproblem,
             o.nproblem == 1 ? "" : "s", p.nproblem);
    const int64_t *ps = o.nproblem ? o.problem_size : p.problem_size;
    size_t nps = o.nproblem ? o.nproblem : p.nproblem;
    if (!t1_grid(&p, nps, &err)) FAIL("%s", err);

    /* what the options name, checked before any work */
    if (o.t4) {
        char *why = check_writable(o.t4);
        if (why) {
            set_error(&run, "--t4 %s: %s", o.t4, why);
            free(why);
            goto done;
        }
    }
    if (!o.simulate && !(o.cache && strcmp(o.cache, "off") == 0) && (err = check_cache(&o, txt != NULL)) != NULL) FAIL("%s", err);

    KT(kt_context_create(&ctx));
    kt_policy policy = KT_POLICY_RACE;
    if (strcmp(o.measure, "recorded") != 0) KT(kt_policy_parse(o.measure, &policy));
    KT(kt_context_set_policy(ctx, policy));
    kt_flush flush = KT_FLUSH_AUTO;
    flush_parse(o.flush, &flush); /* checked with the options */
    KT(kt_context_set_flush(ctx, flush));
    KT(kt_context_set_cache(ctx, o.simulate ? "off" : o.cache)); /* replay's device is not a device */
    if (o.jobs) KT(kt_context_set_compile_threads(ctx, o.jobs));
    if (o.simulate) {
        replay.source = o.simulate;
        replay.recorded = strcmp(o.measure, "recorded") == 0;
        replay.sampled = o.seed_given;
        replay.seed = o.seed;
        if (!t4_read(o.simulate, names, p.nparams, &replay.recs, &err)) FAIL("--simulate %s", err ? err : "out of memory");
    } else if ((source = t1_read_file(p.kernel_file, "the kernel file", T1_FILE_LIMIT, 0, NULL, &err)) == NULL) {
        FAIL("%s: KernelSpecification.KernelFile: %s", o.problem, err ? err : "out of memory");
    }
    if (o.workers) { /* the device is the workers': configurations go to them as jobs (fleet.c) */
        fleet_run fr = {.problem = o.problem, .p = &p, .simulate = o.simulate, .recorded = replay.recorded, .seed = o.seed,
                        .seed_given = o.seed_given, .problem_size = o.problem_size_text, .defines = o.defines,
                        .ndefines = o.ndefines, .timeout = o.timeout};
        if (!fleet_open(o.workers, &fr, o.wait_workers, !o.quiet && isatty(2), &fl, &err)) FAIL("--workers %s: %s", o.workers, err);
        if ((err = stand_in(ctx, fleet_backend(fl), replay_dir, sizeof replay_dir, &replay_dir_made, &dev)) != NULL) FAIL("%s", err);
        fleet_stats fs;
        fleet_get_stats(fl, &fs);
        /* jobs on the stream at once: what the workers take at once (each builds its batch in
         * parallel), at least two per worker and at most 64; as many again wait to follow */
        size_t inflight = fs.batch > 2 * fs.workers ? fs.batch : 2 * fs.workers;
        if (!o.jobs) KT(kt_context_set_compile_threads(ctx, inflight > 64 ? 64 : inflight));
        if (txt)
            fprintf(stderr, "kerntune tune: %zu worker%s on %s%s\n", fs.workers, fs.workers == 1 ? "" : "s", fleet_device_name(fl),
                    fs.ignored ? " (others, on other devices, are left out)" : "");
    } else if (o.simulate) {
        if ((err = stand_in(ctx, replay_backend(&replay), replay_dir, sizeof replay_dir, &replay_dir_made, &dev)) != NULL) FAIL("%s", err);
        /* a budget of seconds counts the time the search would have cost on the recorded device */
        KT(kt_context_set_budget_clock(ctx, replay_clock_s, &replay));
    } else if ((dev = pick_device(ctx, &p, &o, &err)) < 0) {
        FAIL("%s", err ? err : "out of memory");
    }
    /* the device's peaks, for results with work formulas: given, else as its backend reads them */
    double peak_f = o.peak_gflops, peak_b = o.peak_gbs;
    if (peak_f == 0 && peak_b == 0 && !o.simulate && !o.workers) KT(kt_device_peaks(ctx, (size_t)dev, &peak_f, &peak_b));
    bool host_dev = (kt_device_caps(kt_context_device(ctx, (size_t)dev)) & KT_BACKEND_CAP_HOST_MEMORY) != 0;
    const char *dev_name = kt_device_name(kt_context_device(ctx, (size_t)dev));

    if ((sp = make_space(&p, o.defines, o.ndefines, false, ps, nps, &err)) == NULL) FAIL("%s", err);
    size_t total = 0;
    if (!enumerate(&p, sp, o.defines, o.ndefines, false, ps, nps, &total, &err)) FAIL("%s", err);
    if (total == 0) {
        err = empty_space(&p, &o, ps, nps);
        FAIL("%s", err ? err : "out of memory");
    }

    for (size_t d = 0; txt && d < o.ndefines; d++)
        for (size_t i = 0; i < p.nparams; i++)
            if (define_matches(o.defines[d], p.params[i].name) && !define_in_values(&p.params[i], o.defines[d]))
                fprintf(stderr, "kerntune tune: note: --define %s: not among the values of %s in the problem (%s)\n", o.defines[d],
                        p.params[i].name, p.params[i].values);

    kt_op *op = NULL;
    /* a decision made with --validate off is recorded under a name of its own: a validated run
     * never takes it from the cache (a fleet's coordinator, which leaves validation to its
     * workers, keeps the problem's name) */
    char *op_name = o.validate_off ? cli_format("%s (unvalidated)", p.name) : NULL;
    kt_status cst = kt_op_create(ctx, op_name ? op_name : p.name, &op);
    free(op_name);
    KT(cst);
    KT(kt_op_set_device(op, (size_t)dev));
    /* a configuration that crashes or hangs must not take the command down */
    KT(kt_op_set_isolation(op, o.simulate || o.workers ? KT_ISOLATE_OFF : KT_ISOLATE_ON));
    KT(kt_op_set_timeout(op, o.timeout));
    if (o.ndefines > 0 && (full_sp = make_space(&p, NULL, 0, false, ps, nps, &err)) == NULL) FAIL("%s", err);
    prep = (prepared){.p = &p, .ctx = ctx, .dev = (size_t)dev, .host_dev = host_dev, .no_data = o.simulate || o.workers,
                      .replay = o.simulate != NULL,
                      .source = o.simulate ? "" : source};
    if ((err = prepare(&prep, &o, ps, nps, sp, full_sp)) != NULL) FAIL("%s", err);
    bool validating = !prep.no_data && !o.validate_off;
    if ((err = declare(&prep, &sp, 1, validating, op)) != NULL) FAIL("%s", err);
    if (validating && prep.ref.n == 0 && prep.ref_sp == NULL && txt)
        fprintf(stderr, "kerntune tune: note: %s: the reference is the consensus of the first %d configurations\n", prep.no_reference,
                CONSENSUS_VOTERS);
    /* a tuning that finds most configurations wrong stops (disagree.h), and says why */
    if (validating) KT(kt_op_set_disagreement_stop(op, DISAGREE_MIN));
    /* --budget N or N% replaces the problem's ConfigurationCount and ConfigurationFraction;
     * given both, the problem's budget is the smaller of the two */
    bool given = o.budget_count || o.budget_fraction > 0;
    size_t budget = o.budget_count ? o.budget_count : given ? 0 : (size_t)p.budget_count;
    double fraction = o.budget_fraction > 0 ? o.budget_fraction : given ? 0 : p.budget_fraction;
    if (fraction > 0) {
        double want = ceil(fraction * (double)total); /* a fraction <= 1: at most total, */
        size_t part = want >= (double)total ? total : (size_t)want; /* which a double may round up */
        if (budget == 0 || part < budget) budget = part;
    }
    KT(kt_op_set_search(op, strategy, o.seed));
    double seconds = o.budget_seconds > 0 ? o.budget_seconds : p.budget_seconds;
    tuning_s = seconds;
    if (seconds > 0 && !o.simulate) {
        /* the process's seconds, not only the tuning's: start-up so far counts, and the tail is
         * kept for what follows the tuning (the unit in flight at the deadline, the outputs,
         * stopping the builds still running) */
        startup_s = cli_process_age_s();
        double tail = 0.25 + 0.02 * seconds;
        tuning_s = seconds - startup_s - (tail < 3 ? tail : 3);
        if (tuning_s < 0.001) tuning_s = 0.001; /* the first configuration is measured all the same */
    }
    if (budget || seconds > 0) KT(kt_op_set_budget(op, budget, tuning_s));
    progress prog = {.start = kt_now_s(), .budget_s = tuning_s, .hidden = prep.ref_sp ? 1 : 0, .to_fleet = fl != NULL, .best_ns = -1};
    pthread_mutex_init(&prog.mu, NULL);
    if (!o.quiet && isatty(2)) KT(kt_context_set_progress_fn(ctx, on_progress, &prog));
    if (fl) fleet_set_status(fl, progress_text, &prog); /* its line shows the tuning's beside the jobs */
    told.start = kt_now_s();
    live = (t4_live){.p = &p, .op = op, .fl = fl, .tl = &told, .path = o.t4, .device = dev_name, .names = names, .nnames = p.nparams,
                     .records = o.t4 || o.report ? json_array() : NULL, .judge = fl != NULL && !o.validate_off};
    KT(kt_context_set_unit_fn(ctx, on_unit, &live)); /* the T4 as it comes; what validation sees */
    if (txt)
        fprintf(stderr, "kerntune tune: %s: %zu configurations on %s%s\n", p.name, total, dev_name,
                o.simulate ? (replay.recorded ? " (recorded means)" : " (recorded runs)") : "");

    double t0 = kt_now_s();
    kt_status st = kt_op_tune(op, prep.args, p.nargs);
    double wall = kt_now_s() - t0;
    kt_context_set_unit_fn(ctx, NULL, NULL);
    if (live.f) fclose(live.f); /* the final document replaces it below */
    if (prog.shown) fprintf(stderr, "\n");
    if (fl) fleet_progress_done(fl); /* its last line, before the summary */
    if (st == KT_ERR_DISAGREEMENT) { /* validation stopped it: nothing was decided */
        char *why = cli_format("%s", kt_last_error());
        if (prep.ref_sp && live.ref_config == NULL) live.ref_config = format_config(prep.ref_sp, 0); /* the Default's */
        char vline[512];
        vinfo = validation_info(&prep, &o, names, live.ref_config, live.ref_agree, live.ref_among, true, vline, sizeof vline);
        if (txt && vline[0]) fprintf(txt, "%s\n", vline);
        if ((err = stopped(&p, &o, &live, vinfo, why, txt, doc_out, total, dev_name, wall, prep.ref_sp != NULL,
                           kt_context_compile_count(ctx), kt_context_artifact_hits(ctx))) != NULL) {
            free(why);
            FAIL("%s", err);
        }
        free(why);
        rc = DISAGREE_EXIT;
        goto done;
    }
    const kt_decision *d = NULL;
    if (st == KT_OK || st == KT_ERR_ALL_FAILED) st = kt_op_decision(op, prep.args, p.nargs, &d);
    if (st != KT_OK && (st != KT_ERR_ALL_FAILED || d == NULL)) {
        /* a grid that cannot be computed for a configuration is the problem's error: named with
         * its JSON path and the configuration */
        char *msg = cli_format("%s", kt_last_error());
        char *g = msg && strncmp(msg, "geometry: ", 10) == 0 ? geometry_failure(&p, &o, ps, nps, prep.ref_sp != NULL, msg) : NULL;
        if (g) set_error(&run, "%s", g);
        else set_error(&run, "%s: %s", kt_status_name(st), msg ? msg : "out of memory");
        free(g);
        free(msg);
        goto done;
    }
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
    if (reraced && txt)
        fprintf(stderr, "kerntune tune: note: the cache's decision for this problem was below the confidence its race asked for: its finalists were raced again\n");

    summary sm = {.o = &o, .p = &p, .prep = &prep, .replay = &replay, .op = op, .fl = fl, .ctx = ctx, .d = d, .names = names,
                  .dev_name = dev_name, .st = st, .policy = policy, .total = total, .wall = wall, .peak_f = peak_f, .peak_b = peak_b,
                  .startup_s = startup_s, .tuning_s = tuning_s, .rejected = rejected, .low = low, .reraced = reraced};
    summarize(&sm);
    vinfo = sm.vinfo;
    if (txt) print_summary(txt, &sm);
    if (o.t4 || o.report) {
        t4doc = t4_document(&p, op, fl, &told, d, dev_name, names, p.nparams, wall, peak_f, peak_b, vinfo);
        json_object_set_new(json_object_get(t4doc, "x-kerntune"), "flush", json_string(o.flush));
        char *why = o.t4 ? write_json(o.t4, t4doc) : NULL;
        if (why) {
            set_error(&run, "--t4 %s: cannot be written: %s", o.t4, why);
            free(why);
            goto done;
        }
    }
    if (o.report) {
        report_input in = {o.t4 ? o.t4 : "this run", t4doc};
        char *why = report_write(o.report, &in, 1, NULL);
        if (why) {
            set_error(&run, "--report %s: %s", o.report, why);
            free(why);
            goto done;
        }
        if (txt) fprintf(stderr, "kerntune tune: report written to %s\n", o.report);
    }
    if (o.json) {
        json_t *j = summary_json(&sm);
        char *text = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(17));
        if (text) fprintf(doc_out, "%s\n", text);
        free(text);
        json_decref(j);
    }
    rc = sm.best != (size_t)-1 ? 0 : 1;
done:
    if (run.error) {
        fprintf(stderr, "kerntune tune: %s\n", run.error);
        if (o.json) json_error(doc_out, run.error); /* stdout stays one JSON document */
        free(run.error);
        rc = run.usage ? 2 : 1;
    }
    prepared_free(&prep);
    json_decref(t4doc);
    json_decref(vinfo);
    live_free(&live);
    kt_space_destroy(sp);
    kt_space_destroy(full_sp);
    fflush(NULL); /* the answer is out before the context waits for builds a budget left running */
    kt_context_destroy(ctx);
    /* after the context: builds a budget left running write their artifacts until it is gone */
    if (replay_dir_made && cli_remove_tree(replay_dir) != 0)
        fprintf(stderr, "kerntune tune: could not remove %s: %s\n", replay_dir, strerror(errno));
    fleet_close(fl); /* after the context: its backend table lives in the fleet */
    free(told.order), free(told.at_s);
    t4_free(&replay.recs);
    free(source);
    free(err);
    t1_free(&p);
    cli_json_end(jout);
    return rc;
}

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
                         .no_data = a->simulate != NULL, .replay = a->simulate != NULL, .source = a->simulate ? "" : b->source};
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

char *tune_bench_measure(tune_bench *b, const char *const *configs, size_t n, unsigned from, unsigned nruns, tune_bench_result *r) {
    const t1 *p = &b->p;
    const options *o = &b->o;
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
    for (size_t i = 0; i < n && err == NULL; i++) {
        char *why = NULL;
        kt_space *sp = config_space(b, configs[i], &err, &why);
        group[i] = sp ? nsp : (size_t)-1;
        if (sp) sps[nsp++] = sp;
        if (why) r[i].outcome = KT_OUTCOME_REJECTED, r[i].message = why;
    }
    if (err || nsp == 0) goto out;
    if ((st = kt_context_set_measure(b->ctx, 0, nruns ? nruns : 1, nruns ? nruns : 1, 0)) != KT_OK ||
        (st = kt_op_create(b->ctx, p->name, &op)) != KT_OK || (st = kt_op_set_device(op, (size_t)b->dev)) != KT_OK ||
        (st = kt_op_set_isolation(op, o->simulate ? KT_ISOLATE_OFF : KT_ISOLATE_ON)) != KT_OK ||
        (st = kt_op_set_timeout(op, o->timeout)) != KT_OK) {
        err = cli_format("%s: %s", kt_status_name(st), kt_last_error());
        goto out;
    }
    if ((err = declare(&b->prep, sps, nsp, !o->simulate, op)) != NULL) goto out;
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
