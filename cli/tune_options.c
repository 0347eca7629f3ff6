/*
 * tune_options.c - the options of `kerntune tune`: --help, parsing and checking them, usage errors
 * (also as the --json document).
 */
#define _XOPEN_SOURCE 700 /* mkdtemp */
#define _DEFAULT_SOURCE
#include "tune_int.h"

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
            "                           see src/search/README.md); overrides the problem's Search\n"
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
            "                           this run's as if it had measured them (see cli/README.md)\n"
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


char *usage_message; /* the last usage error, for --json */

int usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int usage(const char *fmt, ...) {
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
void json_error(FILE *out, const char *message) {
    json_t *j = json_object();
    json_object_set_new(j, "error", json_string(message));
    char *text = json_dumps(j, JSON_COMPACT);
    if (text) fprintf(out, "%s\n", text);
    free(text);
    json_decref(j);
}

/* Whether name is a flush mode (auto, off, on); its value in *out when out is not NULL. */
bool flush_parse(const char *name, kt_flush *out) {
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
bool parse_sizes(const char *v, options *o, const char **big, int *big_len) {
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
bool same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* --budget's value: a count of configurations (N), a percentage of them (N%) or seconds (Ns). */
static int parse_budget(options *o, const char *v) {
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
    return 0;
}

/* The option name (one that takes a value) with its value v, checked into o: 0, or usage's
 * status. */
static int option_value(options *o, const char *name, const char *v) {
    if (strcmp(name, "--problem-size") == 0) {
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
        return parse_budget(o, v);
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
    return 0;
}

/* What the options say together: a problem file given, and no two that contradict each other;
 * --t4 never names a file the command reads. 0, or usage's status. */
static int check_combinations(const options *o) {
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

int parse_options(int argc, char **argv, options *o) {
    int rc;
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
        else if ((rc = option_value(o, name, v)) != 0) return rc;
    }
    return check_combinations(o);
}

