/*
 * tune.h - the `kerntune tune` command (tune.c), and the single-configuration measurement a
 * fleet worker runs with the same code (tune_bench).
 */
#ifndef KT_CLI_TUNE_H
#define KT_CLI_TUNE_H

#include <kerntune.h>
#include <kerntune/decision.h>
#include <kerntune/variants.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Runs `kerntune tune` with its own argv (argv[0] is "tune"); returns the exit status. */
int run_tune(int argc, char **argv);

void help_tune(FILE *out);

/* ---- measuring single configurations of a problem (a fleet worker) ---------------------------- */

/* A problem made ready on one device, as `kerntune tune` would with these options: its data
 * filled and copied once, its reference ready; then any configuration can be measured. */
typedef struct tune_bench tune_bench;

typedef struct tune_bench_args {
    const char *problem;        /* the T1 file */
    const char *problem_size;   /* as --problem-size, or NULL */
    const char *const *defines; /* as --define */
    size_t ndefines;
    uint64_t seed;
    bool seed_given;
    double timeout;
    long device;                /* as --device (-1: the problem's language picks) */
    const char *simulate;       /* a recording file to replay instead, or NULL */
    const char *simulate_name;  /* the name the recording goes by (the coordinator's path) */
    bool recorded;              /* replay recorded means */
    bool build_only;            /* for tune_bench_build alone: no data made, nothing on the device,
                                 * one compile thread (a fleet worker's build-ahead threads) */
    double build_timeout;       /* tune_bench_build gives up on a build after this many seconds (0: never) */
} tune_bench_args;

/* Returns NULL and the bench, or the error (allocated). */
char *tune_bench_open(const tune_bench_args *a, tune_bench **out);
void tune_bench_close(tune_bench *b);

/* What one measurement of a configuration gave. */
typedef struct tune_bench_result {
    kt_outcome outcome;
    char *message;   /* allocated, or NULL */
    double *runs;    /* ns each, in order (allocated) */
    size_t nruns;
    double recorded_ns; /* replay: the recorded time the runs and the build stand for */
} tune_bench_result;

/* Builds (or finds built) configurations configs[0..n) (each "NAME=VALUE,...", every parameter,
 * in the problem's order; built in parallel), validates each, and runs each nruns times (a
 * replay serves its recorded runs from index from), into r[0..n); r[0].recorded_ns is what the
 * whole batch stands for. NULL, or the error that kept them from being measured at all
 * (allocated). */
char *tune_bench_measure(tune_bench *b, const char *const *configs, size_t n, unsigned from, unsigned nruns, tune_bench_result *r);
void tune_bench_result_free(tune_bench_result *r);

/* Builds configurations configs[0..n) into the artifact directory as tune_bench_measure would
 * build them, and nothing more (kt_op_build): the next tune_bench_measure of them, in this
 * process or another, finds them built. Counts into *counts, and tells on_built (when not
 * NULL) of each configuration's artifact (kt_op_build_each); a replay builds nothing. NULL, or
 * the error (allocated). */
char *tune_bench_build(tune_bench *b, const char *const *configs, size_t n, kt_build_counts *counts, kt_built_fn on_built, void *user);

#endif
