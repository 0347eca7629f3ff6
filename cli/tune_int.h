/*
 * tune_int.h - what the files of `kerntune tune` share (tune.c: the command's steps;
 * tune_options.c, tune_space.c, tune_prepare.c, tune_results.c, tune_bench.c). Not a public
 * header: the CLI's other commands include tune.h.
 */
#ifndef KT_CLI_TUNE_INT_H
#define KT_CLI_TUNE_INT_H

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

#define EXAMPLES 3         /* failure messages shown per kind */
#define CONSENSUS_VOTERS 5 /* configurations whose agreement makes a reference */

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

/* What measuring a problem on a device needs besides the space: made once (prepare), then an op
 * is declared over any space of the problem (declare): `kerntune tune` declares one over the
 * space it searches, a fleet worker (fleet.c) one per configuration it is sent. */
typedef struct prepared {
    const t1 *p;
    kt_context *ctx;
    size_t dev;
    bool host_dev;
    bool build_only;      /* buffers on the host whatever the device: only built for, never run */
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

/* The order the units were decided in, and when: kerntune's T4 extension ("x-kerntune"), from
 * which a report draws the search's best so far. */
typedef struct told_log {
    size_t *order;  /* per unit: 1 + its place in the order (0: not decided yet) */
    double *at_s;   /* per unit: seconds after the tuning began */
    size_t cap, n;
    double start;
} told_log;

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

/* The failure kinds as the summary names them, in the order it lists them (tune_results.c). */
typedef struct failure_kind {
    kt_outcome outcome;
    const char *name;
} failure_kind;
extern const failure_kind kinds[];
extern const size_t nkinds;

extern char *usage_message; /* the last usage error, for --json (tune_options.c) */

int usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void json_error(FILE *out, const char *message);
bool flush_parse(const char *name, kt_flush *out);
bool parse_sizes(const char *v, options *o, const char **big, int *big_len);
bool same_file(const char *a, const char *b);
int parse_options(int argc, char **argv, options *o);
bool fill_data(const t1 *p, const t1_arg *a, size_t idx, void *data, size_t count, uint64_t seed, char **err);
int write_reference(const kt_arg *args, size_t nargs, void *user, kt_result *result);
bool define_matches(const char *define, const char *name);
bool define_in_values(const t1_param *tp, const char *define);
kt_space *make_space(const t1 *p, const char *const *defines, size_t ndefines, bool defaults, const int64_t *ps, size_t nps,
                     char **err);
bool enumerate(const t1 *p, kt_space *sp, const char *const *defines, size_t ndefines, bool defaults, const int64_t *ps,
               size_t nps, size_t *count, char **err);
char *empty_space(const t1 *p, const options *o, const int64_t *ps, size_t nps);
char *format_config(const kt_space *sp, size_t idx);
char *geometry_failure(const t1 *p, const options *o, const int64_t *ps, size_t nps, bool reference, const char *msg);
char *stand_in(kt_context *ctx, const kt_backend *b, char *dir, size_t len, bool *made, long *dev);
long pick_device(kt_context *ctx, const t1 *p, const options *o, char **err);
void prepared_free(prepared *pr);
char *prepare(prepared *pr, const options *o, const int64_t *ps, size_t nps, kt_space *sp, kt_space *full_sp);
char *declare(prepared *pr, kt_space *const *sps, size_t nsp, bool validate, kt_op *op);
json_t *validation_info(const prepared *pr, const options *o, const char *const *names, const char *ref_config, size_t agree,
                        size_t among, bool active, char *line, size_t len);
char *check_writable(const char *path);
char *write_json(const char *path, json_t *root);
json_t *t4_document(const t1 *p, kt_op *op, fleet *fl, const told_log *tl, const kt_decision *d, const char *device,
                    const char *const *names, size_t nnames, double wall_s, double peak_gflops, double peak_gbs,
                    const json_t *validation);
void live_free(t4_live *l);
void on_unit(const kt_decision *d, size_t u, void *user);
char *stopped(const t1 *p, const options *o, t4_live *live, const json_t *vinfo, const char *why, FILE *txt, FILE *doc_out,
              size_t total, const char *dev_name, double wall, bool default_ref, uint64_t builds, uint64_t found);
const char *outcome_name(kt_outcome o);
const char *invalidity(kt_outcome o);
void print_message(FILE *out, const char *msg, int max_lines);
json_t *geometry_json(const t1 *p, const kt_decision *d, size_t u);
kt_outcome unit_outcome(fleet *fl, const kt_decision *d, size_t u);
void summarize(summary *s);
void print_summary(FILE *txt, const summary *s);
json_t *summary_json(const summary *s);

#endif

