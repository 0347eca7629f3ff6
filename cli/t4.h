/*
 * t4.h - T4 results: reading recorded measurements (T4 files, gzip or plain, and Kernel
 * Tuner cache files) for replay, and writing T4 for `kerntune tune --t4`.
 */
#ifndef KT_CLI_T4_H
#define KT_CLI_T4_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One recorded configuration. */
typedef struct t4_record {
    char *key;          /* "name=value,..." in the order of the names given to t4_read */
    double *runtimes;   /* in ns, as recorded */
    size_t nruntimes;
    double mean_ns;     /* the recorded objective: the file's time measurement, else the mean */
    double mean_ms;     /* the same in milliseconds, as the file gives it when its unit is ms */
    char *invalidity;   /* correct, compile, runtime, timeout, correctness, constraints (as the file says) */
    double compile_ns;  /* times.compilation (a Kernel Tuner cache: compile_time), -1 when not recorded */
    double framework_ns; /* times.framework (framework_time), -1 when not recorded */
    double other_ns;    /* times.validation plus times.search_algorithm (a Kernel Tuner cache:
                           verification_time plus strategy_time); -1 when neither is recorded */
} t4_record;

typedef struct t4_records {
    t4_record *recs;
    size_t n;
    size_t best;        /* the fastest correct record, or n when none */
} t4_records;

/* The most recorded data t4_read reads (bytes, after decompression). */
#define T4_READ_LIMIT ((size_t)1 << 30)

/* Reads a T4 file or a Kernel Tuner cache file (gzip or plain): a regular file of at most
 * T4_READ_LIMIT bytes once decompressed. names (n of them) are the space's parameters, which
 * give the keys their order; a configuration without one of them is an error. Errors go to *err
 * (allocated: free it) as one line naming the file. */
bool t4_read(const char *path, const char *const *names, size_t n, t4_records *out, char **err);

void t4_free(t4_records *r);

/* The JSON document of a T4 or Kernel Tuner cache file (gzip or plain), with t4_read's limits;
 * NULL with *err (allocated) naming the file. */
json_t *t4_load(const char *path, char **err);

/* How many ns one unit of a T4 timeunit ("milliseconds", Kernel Tuner's "miliseconds", "ms",
 * "microseconds", "nanoseconds", "seconds"; milliseconds when NULL or unknown) is. */
double t4_unit_ns(const char *unit);

/* Orders records by key (t4_read returns them sorted so). */
int t4_compare(const void *a, const void *b);

/* Formats a JSON value the way kerntune writes a define's value (integers as themselves, whole
 * and fractional floats as Python writes them, bools as 1/0, strings bare). A number always
 * fits in 32 bytes; a string is cut to len - 1 bytes (use t4_value_string for any value). */
void t4_value_text(const json_t *v, char *buf, size_t len);

/* The same, allocated (free it); NULL when out of memory. */
char *t4_value_string(const json_t *v);

/* Turns "name=value,..." into a JSON object of the names in names (values as integers, floats
 * or strings, whichever they read as). */
json_t *t4_configuration(const char *text, const char *const *names, size_t n);

#endif
