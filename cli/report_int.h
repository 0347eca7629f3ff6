/*
 * report_int.h - what the report's two files share: report.c reads T4 documents into sets and
 * writes the page; report_set.c writes one set's section of it.
 */
#ifndef KT_CLI_REPORT_INT_H
#define KT_CLI_REPORT_INT_H

#include "report.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

/* One result of a set, as the report needs it. */
typedef struct row {
    json_t *res;        /* the T4 result */
    char *config;       /* "name=value, ..." */
    const char *inv;    /* invalidity */
    bool ok;            /* measured and correct */
    double ms;          /* its time (ms), when ok */
    double cost_ms;     /* what measuring it cost: compiling, framework, validation, its runs */
    double order;       /* evaluation order */
} row;

typedef struct set {
    const report_input *in;
    row *rows;
    size_t n, nok;
    size_t *by_time;    /* indices of the ok rows, fastest first */
    const char *problem, *device;
    const json_t *ext;  /* the document's x-kerntune, or NULL */
    double scale_ms;    /* ms in one unit of its timeunit */
    long winner;        /* row index */
} set;

/* A T4 time in ms: v in units of scale_ms ms; 0 when v is not a number. */
static inline double ms_of(const json_t *v, double scale_ms) { return json_is_number(v) ? json_number_value(v) * scale_ms : 0; }

/* Writes s as HTML text into f, its markup characters escaped. */
void report_esc(FILE *f, const char *s);

/* Sorts idx[0..n) by cmp (given user), stably; left as it was when out of memory. */
void report_sort_idx(size_t *idx, size_t n, int (*cmp)(const void *, const void *, void *), void *user);

/* Set k's section of the page into h, its plots drawn under dir: false with *err (allocated)
 * when a plot cannot be drawn. */
bool report_write_set(FILE *h, set *s, size_t k, const char *dir, char **err);

#endif
