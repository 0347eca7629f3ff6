/*
 * t1.h - reading T1 tuning problems (JSON) for `kerntune tune`.
 *
 * T1 is the autotuning community's problem format (see ../shared/DESIGN.md and the TuningSchema
 * project). kerntune reads every field the shared benchmark_hub problems and Kernel Tuner's T1
 * examples use; a field it does not know is reported as a warning and ignored. Extensions:
 * "Language": "C" (a C function compiled by the system compiler), and "Size" given as an
 * expression string (as the benchmark_hub files do) as well as an integer.
 */
#ifndef KT_CLI_T1_H
#define KT_CLI_T1_H

#include <kerntune.h>

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

typedef struct t1_param {
    const char *name;
    const char *type;      /* int, uint, float, bool, string */
    const char *values;    /* a Python list expression */
    json_t *dflt;          /* "Default", or NULL */
} t1_param;

typedef enum t1_fill { T1_FILL_CONSTANT, T1_FILL_RANDOM, T1_FILL_BINARY } t1_fill;

typedef struct t1_arg {
    const char *name;      /* the Name, else auto_name ("arg3") */
    char auto_name[24];
    kt_type type;          /* element type of a vector, or the scalar's type */
    bool vector;
    kt_access access;
    const char *size_expr; /* vectors: the element count as an expression, or NULL */
    int64_t size;          /* or as an integer */
    t1_fill fill;
    double fill_value;
    const char *data_source; /* BinaryRaw: a file of raw elements */
    bool has_seed;
    int64_t seed;
} t1_arg;

typedef struct t1_reference {
    const char *target;    /* the argument whose expected contents this gives */
    t1_fill fill;
    double fill_value;
    const char *data_source;
} t1_reference;

typedef struct t1 {
    json_t *root;
    char path[4096];
    char dir[4096];
    const char *name;      /* General.BenchmarkName, else KernelSpecification.BenchmarkName, else KernelName */
    t1_param *params;
    size_t nparams;
    const char **conditions;
    size_t nconditions;
    const char *language;  /* C, OpenCL, CUDA */
    const char *kernel_name;
    char kernel_file[4096]; /* resolved against the problem file's directory */
    const char **options;
    size_t noptions;
    const char *global[3], *local[3];
    char size_text[6][32]; /* sizes given as integers, as text for the expression language */
    kt_geometry geometry;
    int64_t problem_size[8];
    size_t nproblem;
    int64_t shared_memory;
    t1_arg *args;
    size_t nargs;
    t1_reference *refs;
    size_t nrefs;
    double budget_seconds; /* 0: none */
    int64_t budget_count;  /* 0: none */
    double budget_fraction;
    const char *search;
    int device_id;         /* KernelSpecification.Device.Id, or -1 */
} t1;

/* Loads path into p. Errors (return false) are written into err as one line that starts with
 * the file's name: "FILE:LINE:COLUMN: message" for JSON syntax, "FILE: JSON.PATH: expected ..."
 * for the schema. Warnings (unknown fields) go to warn when it is not NULL. */
bool t1_load(const char *path, t1 *p, FILE *warn, char *err, size_t errlen);

void t1_free(t1 *p);

/* The kt_type of a T1 argument type name ("float", "int32", ...); 0 when unsupported. */
kt_type t1_type(const char *name);

#endif
