/*
 * t1.h - reading T1 tuning problems (JSON) for `kerntune tune`.
 *
 * T1 is the autotuning community's problem format (see ../shared/DESIGN.md, the TuningSchema
 * project and Kernel Tuner's reader). kerntune reads every field it implements and refuses,
 * naming the JSON path, every field (or value of one) that would change what is run or measured
 * and that it does not implement; purely descriptive fields (names, OutputFormat, ...) are
 * accepted. Metadata that Kernel Tuner's reader skips and nothing measured depends on
 * (benchmark_hub's top-level BenchmarkConfig and KernelSpecification.Misc) are accepted without
 * being read, and listed (t1.ignored). A Default is one value, or an array of one, among its
 * parameter's Values; any other Default is not used, and listed too (Kernel Tuner reads no
 * Default at all, so a file may give any). The grid follows Kernel Tuner's rule when
 * GridDivX/Y/Z are given (see t1_grid).
 * Extensions: "Language": "C" (a C function compiled by the system compiler), "Size" given as
 * an expression string (as the benchmark_hub files do) as well as an integer, and a scalar's
 * "Value".
 */
#ifndef KT_CLI_T1_H
#define KT_CLI_T1_H

#include <kerntune.h>
#include <kerntune/variants.h>

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "text.h"

/* The largest T1 problem or kernel source kerntune reads (bytes). */
#define T1_FILE_LIMIT ((size_t)64 << 20)

typedef struct t1_param {
    const char *name;
    const char *type;      /* int, uint, float, bool, string */
    const char *values;    /* a Python list expression */
    json_t *dflt;          /* the Default kerntune uses: a number, string or boolean among the Values
                            * (an array of one gives its element), or NULL */
    json_t *dflt_given;    /* "Default" as the file gives it (NULL when absent) */
    char *dflt_unused;     /* why a Default given (not null) is not used; NULL when it is */
} t1_param;

typedef enum t1_fill { T1_FILL_CONSTANT, T1_FILL_RANDOM, T1_FILL_BINARY } t1_fill;

typedef struct t1_arg {
    const char *name;      /* the Name, else auto_name ("arg3") */
    char auto_name[24];    /* "arg" and an index: always fits */
    kt_type type;          /* element type of a vector, or the scalar's type */
    const char *type_name; /* its T1 name (bool, int8, float, ...) */
    bool vector;
    bool constant;         /* "MemType": "Constant": the device's constant memory */
    bool compare_sum;      /* "x-kerntune": {"Compare": "Sum"}: an output validated by the sum of its elements */
    kt_access access;
    const char *size_expr; /* vectors: the element count as an expression, or NULL */
    int64_t size;          /* or as an integer */
    t1_fill fill;
    double fill_value;     /* Constant: the value (a float type's); Random: the bound of the values */
    uint64_t fill_bits;    /* Constant of an integer type: the value, exactly, in 64-bit two's complement */
    const char *data_source; /* BinaryRaw: a file of raw elements */
    bool has_seed;
    int64_t seed;
} t1_arg;

typedef struct t1_reference {
    const char *target;    /* the argument whose expected contents this gives */
    t1_fill fill;
    double fill_value;     /* as t1_arg's, for the target's type */
    uint64_t fill_bits;
    const char *data_source;
    bool has_seed;
    int64_t seed;
} t1_reference;

typedef struct t1 {
    json_t *root;
    char *path;            /* as given */
    char *dir;             /* the problem file's directory, absolute when it can be resolved */
    const char *name;      /* General.BenchmarkName, else KernelSpecification.BenchmarkName, else KernelName */
    t1_param *params;
    size_t nparams;
    const char **conditions;
    size_t nconditions;
    const char *language;  /* C, OpenCL, CUDA */
    const char *kernel_name;
    char *kernel_file;     /* resolved against the problem file's directory */
    const char **options;
    size_t noptions;
    /* Launch geometry, as expressions for kt_space_set_geometry (NULL: 1). When grid_div is set
     * (a GridDivX/Y/Z is given, or GlobalSize is not), global[] is Kernel Tuner's grid in blocks
     * computed from ProblemSize (t1_grid) and geometry is KT_GEOMETRY_GRID; otherwise global[]
     * is GlobalSize, in blocks or work-items as GlobalSizeType says. */
    char *global[3], *local[3];
    bool grid_div;
    char **div[3];         /* GridDivX/Y/Z: each factor as an expression */
    size_t ndiv[3];
    kt_geometry geometry;
    int64_t problem_size[8];
    size_t nproblem;
    int64_t shared_memory;
    t1_arg *args;
    size_t nargs;
    t1_reference *refs;
    size_t nrefs;
    double atol, rtol;     /* ReferenceArguments' ValidationMethod/Threshold; negative: the defaults */
    double budget_seconds; /* 0: none */
    int64_t budget_count;  /* 0: none */
    double budget_fraction;
    const char *search;    /* Search.Name, or NULL */
    bool search_attributes;
    int device_id;         /* KernelSpecification.Device.Id (or DeviceId), or -1 */
    const char *device_name; /* KernelSpecification.Device.Name, or NULL */
    double time_scale;     /* General.TimeUnit: one ms in that unit (T4 output) */
    const char *time_unit; /* its T4 name: "milliseconds" unless TimeUnit says otherwise */
    const char *work_flops;  /* kerntune's extension KernelSpecification.x-kerntune.Flops, or NULL */
    const char *work_bytes;  /* ... .Bytes, or NULL: expressions of the arguments and parameters */
    char **ignored;        /* JSON paths of what is accepted without being read, in the file's order:
                            * the metadata (BenchmarkConfig, KernelSpecification.Misc), then the
                            * Defaults that are not used (ConfigurationSpace.TuningParameters[i].Default) */
    size_t nignored, nmetadata; /* all of them; the metadata among them (the first nmetadata) */
} t1;

/* Loads path into p. On failure returns false and stores in *err an allocated message (free
 * it) of one line that starts with the file's name: "FILE:LINE:COLUMN: message" for JSON syntax,
 * "FILE: JSON.PATH: message" for the schema. p must be released with t1_free either way. */
bool t1_load(const char *path, t1 *p, char **err);

/* Builds the global size expressions of p for the problem size ps (n of them) into p->global:
 * Kernel Tuner's grid when p->grid_div (dimension d: ProblemSize[d] (1 beyond the given ones)
 * divided by the product of GridDiv d's factors, each truncated to an integer, or by LocalSize
 * d when that dimension has no GridDiv, rounded up). False (message in *err) when out of memory. */
bool t1_grid(t1 *p, size_t nps, char **err);

void t1_free(t1 *p);

/* What p accepted without reading, as notes on out, each line starting with prefix (e.g.
 * "kerntune tune"): one line naming the metadata, and one per Default that is not used, saying
 * why. Nothing when nothing was ignored. */
void t1_print_ignored(const t1 *p, FILE *out, const char *prefix);

/* The JSON paths of t1.ignored as a new JSON array (empty when nothing was ignored); NULL when
 * out of memory. */
json_t *t1_ignored_json(const t1 *p);

/* The kt_type of a T1 argument type name ("float", "int32", ...); 0 when unsupported. */
/* A Python literal of a JSON number, string or boolean (a string quoted, a boolean True or False):
 * a one-value parameter list's item (allocated; NULL when out of memory). */
char *t1_literal(const json_t *v);

kt_type t1_type(const char *name);

/* Reads a whole regular file of at most limit bytes (a FIFO, a device or a directory is refused
 * before anything is read from it), NUL-terminated, into an allocated buffer; *len (may be NULL)
 * gets its length. With exact > 0 the file must hold exactly exact bytes. On failure returns NULL and an allocated message (free it) in *err that names path and
 * says why, in the words of what ("the kernel file"). */
char *t1_read_file(const char *path, const char *what, size_t limit, size_t exact, size_t *len, char **err);

#endif
