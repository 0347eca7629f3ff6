/*
 * report.h - `kerntune report`: a self-contained HTML page of tuning results (report.c).
 */
#ifndef KT_CLI_REPORT_H
#define KT_CLI_REPORT_H

#include <jansson.h>
#include <stdio.h>

/* One set of results: a T4 document (kerntune's or another tool's) and what to call it. */
typedef struct report_input {
    const char *name;  /* the file it came from, or "this run" */
    json_t *doc;
} report_input;

/* Writes the report of inputs[0..n) (one problem; several inputs: several devices, compared)
 * to path, atomically. Plots come from gnuplot's SVG terminal, embedded as data: images; the
 * page loads nothing from anywhere. Returns NULL, or the error (allocated). */
char *report_write(const char *path, const report_input *inputs, size_t n, const char *title);

/* `kerntune report`: argv[0] is "report"; returns the exit status. */
int run_report(int argc, char **argv);
void help_report(FILE *out);

#endif
