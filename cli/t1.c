/*
 * t1.c - reading T1 problems: JSON syntax errors with line and column (jansson), schema errors
 * with the JSON path of the field at fault, unknown fields as warnings, paths resolved against
 * the problem file's directory.
 */
#define _DEFAULT_SOURCE /* realpath */
#include "t1.h"

#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct ctx {
    const char *file;
    FILE *warn;
    char *err;
    size_t errlen;
    bool failed;
} ctx;

static bool fail(ctx *c, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool fail(ctx *c, const char *path, const char *fmt, ...) {
    if (c->failed) return false;
    c->failed = true;
    int n = snprintf(c->err, c->errlen, "%s: %s: ", c->file, path);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < c->errlen) vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return false;
}

static const char *kind_of(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE: case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "something else";
}

/* Warns about the members of obj not in known (NULL-terminated). */
static void unknown_fields(ctx *c, json_t *obj, const char *path, const char *const *known) {
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        bool found = false;
        for (const char *const *k = known; *k && !found; k++) found = strcmp(*k, key) == 0;
        if (!found && c->warn) fprintf(c->warn, "%s: warning: ignoring unknown field %s%s%s\n", c->file, path, *path ? "." : "", key);
    }
}

/* Member key of obj, of JSON type `want` (or any when want < 0); NULL when absent (an error
 * when required) or of the wrong type (always an error). */
static json_t *member(ctx *c, json_t *obj, const char *path, const char *key, int want, bool required, const char *what) {
    char full[512];
    snprintf(full, sizeof full, "%s%s%s", path, *path ? "." : "", key);
    json_t *v = json_object_get(obj, key);
    if (v == NULL) {
        if (required) fail(c, full, "missing; expected %s", what);
        return NULL;
    }
    bool ok = want < 0 || (int)json_typeof(v) == want ||
              (want == JSON_REAL && json_typeof(v) == JSON_INTEGER) ||
              (want == JSON_TRUE && json_typeof(v) == JSON_FALSE);
    if (!ok) {
        fail(c, full, "expected %s, got %s", what, kind_of(v));
        return NULL;
    }
    return v;
}

static const char *str_member(ctx *c, json_t *obj, const char *path, const char *key, bool required, const char *what) {
    json_t *v = member(c, obj, path, key, JSON_STRING, required, what);
    return v ? json_string_value(v) : NULL;
}

kt_type t1_type(const char *name) {
    static const struct {
        const char *name;
        kt_type type;
    } types[] = {{"bool", KT_TYPE_U8},    {"int8", KT_TYPE_I8},    {"uint8", KT_TYPE_U8},   {"int16", KT_TYPE_I16},
                 {"uint16", KT_TYPE_U16}, {"int32", KT_TYPE_I32},  {"uint32", KT_TYPE_U32}, {"int64", KT_TYPE_I64},
                 {"uint64", KT_TYPE_U64}, {"half", KT_TYPE_F16},   {"float", KT_TYPE_F32},  {"double", KT_TYPE_F64},
                 {"int", KT_TYPE_I32},    {"float32", KT_TYPE_F32}, {"float64", KT_TYPE_F64}};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (strcmp(types[i].name, name) == 0) return types[i].type;
    return 0;
}

static bool read_fill(ctx *c, json_t *obj, const char *path, t1_fill *fill, double *value, const char **source) {
    const char *f = str_member(c, obj, path, "FillType", false, "a string (Constant, Random or BinaryRaw)");
    json_t *fv = member(c, obj, path, "FillValue", JSON_REAL, false, "a number");
    *value = fv ? json_number_value(fv) : 0;
    *fill = T1_FILL_CONSTANT;
    *source = NULL;
    if (c->failed) return false;
    if (f == NULL || strcmp(f, "Constant") == 0) return true;
    if (strcmp(f, "Random") == 0) {
        *fill = T1_FILL_RANDOM;
        return true;
    }
    char p[512];
    snprintf(p, sizeof p, "%s.FillType", path);
    if (strcmp(f, "BinaryRaw") == 0) {
        *fill = T1_FILL_BINARY;
        *source = str_member(c, obj, path, "DataSource", true, "a string (the file of raw elements)");
        return !c->failed;
    }
    return fail(c, p, "'%s' is not supported; expected Constant, Random or BinaryRaw", f);
}

static bool read_params(ctx *c, t1 *p, json_t *cs) {
    static const char *const known_cs[] = {"TuningParameters", "Conditions", NULL};
    static const char *const known_param[] = {"Name", "Type", "Values", "Default", "Description", NULL};
    static const char *const known_cond[] = {"Expression", "Parameters", NULL};
    unknown_fields(c, cs, "ConfigurationSpace", known_cs);
    json_t *params = member(c, cs, "ConfigurationSpace", "TuningParameters", JSON_ARRAY, true, "an array of parameters");
    if (params == NULL) return false;
    p->params = calloc(json_array_size(params) + 1, sizeof *p->params);
    size_t i;
    json_t *v;
    json_array_foreach(params, i, v) {
        char path[160];
        snprintf(path, sizeof path, "ConfigurationSpace.TuningParameters[%zu]", i);
        if (!json_is_object(v)) return fail(c, path, "expected an object, got %s", kind_of(v));
        unknown_fields(c, v, path, known_param);
        t1_param *tp = &p->params[p->nparams++];
        tp->name = str_member(c, v, path, "Name", true, "a string");
        tp->type = str_member(c, v, path, "Type", true, "a string (int, uint, float, bool or string)");
        tp->values = str_member(c, v, path, "Values", true, "a string (a Python list, e.g. \"[16, 32, 64]\")");
        tp->dflt = json_object_get(v, "Default");
        if (c->failed) return false;
        static const char *const types[] = {"int", "uint", "float", "bool", "string"};
        bool ok = false;
        for (size_t k = 0; k < 5; k++) ok = ok || strcmp(types[k], tp->type) == 0;
        if (!ok) {
            char tpath[200];
            snprintf(tpath, sizeof tpath, "%s.Type", path);
            return fail(c, tpath, "'%s' is not one of int, uint, float, bool, string", tp->type);
        }
    }
    if (p->nparams == 0) return fail(c, "ConfigurationSpace.TuningParameters", "expected at least one parameter");
    json_t *conds = member(c, cs, "ConfigurationSpace", "Conditions", JSON_ARRAY, false, "an array of conditions");
    if (c->failed) return false;
    p->conditions = calloc(json_array_size(conds) + 1, sizeof *p->conditions);
    json_array_foreach(conds, i, v) {
        char path[160];
        snprintf(path, sizeof path, "ConfigurationSpace.Conditions[%zu]", i);
        if (!json_is_object(v)) return fail(c, path, "expected an object, got %s", kind_of(v));
        unknown_fields(c, v, path, known_cond);
        const char *e = str_member(c, v, path, "Expression", true, "a string (a Python expression)");
        if (c->failed) return false;
        p->conditions[p->nconditions++] = e;
    }
    return true;
}

static bool read_sizes(ctx *c, json_t *ks, const char *key, const char *out[3], char text[3][32]) {
    static const char *const known[] = {"X", "Y", "Z", NULL};
    json_t *obj = member(c, ks, "KernelSpecification", key, JSON_OBJECT, true, "an object with X, Y, Z");
    if (obj == NULL) return false;
    char path[64];
    snprintf(path, sizeof path, "KernelSpecification.%s", key);
    unknown_fields(c, obj, path, known);
    static const char *const dims[] = {"X", "Y", "Z"};
    for (int d = 0; d < 3; d++) {
        json_t *v = json_object_get(obj, dims[d]);
        char dp[128];
        snprintf(dp, sizeof dp, "%s.%s", path, dims[d]);
        if (v == NULL) {
            if (d == 0) return fail(c, dp, "missing; expected a string (an expression)");
            out[d] = NULL;
        } else if (json_is_string(v)) {
            out[d] = json_string_value(v);
        } else if (json_is_integer(v)) { /* an integer: as text, for the expression language */
            snprintf(text[d], 32, "%lld", (long long)json_integer_value(v));
            out[d] = text[d];
        } else {
            return fail(c, dp, "expected a string (an expression), got %s", kind_of(v));
        }
    }
    return true;
}

static bool read_args(ctx *c, t1 *p, json_t *ks) {
    static const char *const known[] = {"Name", "Type", "MemoryType", "AccessType", "Size", "FillType", "FillValue",
                                        "DataSource", "RandomSeed", "Output", "MemType", "TypeSize", "Value", NULL};
    json_t *args = member(c, ks, "KernelSpecification", "Arguments", JSON_ARRAY, true, "an array of arguments");
    if (args == NULL) return false;
    p->args = calloc(json_array_size(args) + 1, sizeof *p->args);
    size_t i;
    json_t *v;
    json_array_foreach(args, i, v) {
        char path[160];
        snprintf(path, sizeof path, "KernelSpecification.Arguments[%zu]", i);
        if (!json_is_object(v)) return fail(c, path, "expected an object, got %s", kind_of(v));
        unknown_fields(c, v, path, known);
        t1_arg *a = &p->args[p->nargs++];
        a->name = str_member(c, v, path, "Name", false, "a string");
        const char *type = str_member(c, v, path, "Type", true, "a string (float, double, int32, ...)");
        const char *mem = str_member(c, v, path, "MemoryType", true, "a string (Scalar or Vector)");
        const char *access = str_member(c, v, path, "AccessType", false, "a string (ReadOnly, WriteOnly or ReadWrite)");
        if (c->failed) return false;
        char fp[200];
        if ((a->type = t1_type(type)) == 0) {
            snprintf(fp, sizeof fp, "%s.Type", path);
            return fail(c, fp, "'%s' is not supported; expected bool, int8..int64, uint8..uint64, half, float or double", type);
        }
        if (strcmp(mem, "Vector") == 0) a->vector = true;
        else if (strcmp(mem, "Scalar") != 0) {
            snprintf(fp, sizeof fp, "%s.MemoryType", path);
            return fail(c, fp, "'%s' is not supported; expected Scalar or Vector", mem);
        }
        if (a->name == NULL) {
            snprintf(a->auto_name, sizeof a->auto_name, "arg%zu", i);
            a->name = a->auto_name;
        }
        a->access = KT_READ_ONLY;
        if (access && strcmp(access, "WriteOnly") == 0) a->access = KT_WRITE_ONLY;
        else if (access && strcmp(access, "ReadWrite") == 0) a->access = KT_READ_WRITE;
        else if (access && strcmp(access, "ReadOnly") != 0) {
            snprintf(fp, sizeof fp, "%s.AccessType", path);
            return fail(c, fp, "'%s' is not one of ReadOnly, WriteOnly, ReadWrite", access);
        }
        if (!read_fill(c, v, path, &a->fill, &a->fill_value, &a->data_source)) return false;
        json_t *value = json_object_get(v, "Value"); /* a scalar may give its value here too */
        if (value && json_is_number(value)) a->fill_value = json_number_value(value);
        json_t *seed = member(c, v, path, "RandomSeed", JSON_INTEGER, false, "an integer");
        if (seed) a->has_seed = true, a->seed = json_integer_value(seed);
        if (a->vector) {
            json_t *size = json_object_get(v, "Size");
            snprintf(fp, sizeof fp, "%s.Size", path);
            if (size == NULL) return fail(c, fp, "missing; expected an integer or an expression string");
            if (json_is_integer(size)) a->size = json_integer_value(size);
            else if (json_is_string(size)) a->size_expr = json_string_value(size);
            else return fail(c, fp, "expected an integer or an expression string, got %s", kind_of(size));
        }
        if (c->failed) return false;
    }
    return true;
}

static bool read_refs(ctx *c, t1 *p, json_t *ks) {
    static const char *const known[] = {"Name", "TargetName", "FillType", "FillValue", "DataSource", "RandomSeed", NULL};
    json_t *refs = member(c, ks, "KernelSpecification", "ReferenceArguments", JSON_ARRAY, false, "an array");
    if (c->failed) return false;
    p->refs = calloc(json_array_size(refs) + 1, sizeof *p->refs);
    size_t i;
    json_t *v;
    json_array_foreach(refs, i, v) {
        char path[160];
        snprintf(path, sizeof path, "KernelSpecification.ReferenceArguments[%zu]", i);
        if (!json_is_object(v)) return fail(c, path, "expected an object, got %s", kind_of(v));
        unknown_fields(c, v, path, known);
        t1_reference *r = &p->refs[p->nrefs++];
        r->target = str_member(c, v, path, "TargetName", true, "a string (the argument it gives the expected contents of)");
        if (c->failed || !read_fill(c, v, path, &r->fill, &r->fill_value, &r->data_source)) return false;
        bool found = false;
        for (size_t a = 0; a < p->nargs; a++) found = found || strcmp(p->args[a].name, r->target) == 0;
        if (!found) {
            char tp[200];
            snprintf(tp, sizeof tp, "%s.TargetName", path);
            return fail(c, tp, "'%s' names no argument", r->target);
        }
    }
    return true;
}

static bool read_budget(ctx *c, t1 *p) {
    json_t *budget = json_object_get(p->root, "Budget");
    if (budget == NULL) return true;
    if (!json_is_array(budget)) return fail(c, "Budget", "expected an array, got %s", kind_of(budget));
    size_t i;
    json_t *v;
    json_array_foreach(budget, i, v) {
        char path[96];
        snprintf(path, sizeof path, "Budget[%zu]", i);
        if (!json_is_object(v)) return fail(c, path, "expected an object, got %s", kind_of(v));
        const char *type = str_member(c, v, path, "Type", true, "a string");
        json_t *value = member(c, v, path, "BudgetValue", JSON_REAL, true, "a number");
        if (c->failed) return false;
        double x = json_number_value(value);
        if (strcmp(type, "TuningDuration") == 0) p->budget_seconds = x;
        else if (strcmp(type, "ConfigurationCount") == 0) p->budget_count = (int64_t)x;
        else if (strcmp(type, "ConfigurationFraction") == 0) p->budget_fraction = x;
        else {
            char tp[128];
            snprintf(tp, sizeof tp, "%s.Type", path);
            return fail(c, tp, "'%s' is not one of TuningDuration, ConfigurationCount, ConfigurationFraction", type);
        }
    }
    return true;
}

bool t1_load(const char *path, t1 *p, FILE *warn, char *err, size_t errlen) {
    memset(p, 0, sizeof *p);
    p->device_id = -1;
    ctx c = {path, warn, err, errlen, false};
    json_error_t jerr;
    p->root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (p->root == NULL) {
        if (jerr.line < 0) snprintf(err, errlen, "%s: %s", path, jerr.text);
        else snprintf(err, errlen, "%s:%d:%d: %s", path, jerr.line, jerr.column, jerr.text);
        return false;
    }
    if (!json_is_object(p->root)) return fail(&c, "(top level)", "expected an object, got %s", kind_of(p->root));
    snprintf(p->path, sizeof p->path, "%s", path);
    char abs[4096];
    if (realpath(path, abs) == NULL) snprintf(abs, sizeof abs, "%s", path);
    snprintf(p->dir, sizeof p->dir, "%s", abs); /* absolute: messages give resolved paths */
    char *slash = strrchr(p->dir, '/');
    if (slash) *slash = '\0';
    else snprintf(p->dir, sizeof p->dir, ".");
    static const char *const known_top[] = {"General", "ConfigurationSpace", "KernelSpecification", "Budget", "Search", NULL};
    unknown_fields(&c, p->root, "", known_top);
    json_t *general = member(&c, p->root, "", "General", JSON_OBJECT, false, "an object");
    json_t *cs = member(&c, p->root, "", "ConfigurationSpace", JSON_OBJECT, true, "an object");
    json_t *ks = member(&c, p->root, "", "KernelSpecification", JSON_OBJECT, true, "an object");
    if (c.failed || !read_params(&c, p, cs)) return false;
    static const char *const known_ks[] = {"Language", "CompilerOptions", "BenchmarkName", "KernelName", "KernelFile",
                                           "GlobalSizeType", "LocalSize", "GlobalSize", "GridDivX", "GridDivY", "GridDivZ",
                                           "ProblemSize", "SharedMemory", "Stream", "Arguments", "ReferenceArguments",
                                           "Device", "Profiling", "SimulationInput", NULL};
    unknown_fields(&c, ks, "KernelSpecification", known_ks);
    p->language = str_member(&c, ks, "KernelSpecification", "Language", true, "a string (C, OpenCL or CUDA)");
    p->kernel_name = str_member(&c, ks, "KernelSpecification", "KernelName", true, "a string");
    const char *file = str_member(&c, ks, "KernelSpecification", "KernelFile", true, "a string (the kernel source's path)");
    if (c.failed) return false;
    if (strcmp(p->language, "C") != 0 && strcmp(p->language, "OpenCL") != 0 && strcmp(p->language, "CUDA") != 0)
        return fail(&c, "KernelSpecification.Language", "'%s' is not supported; expected C, OpenCL or CUDA", p->language);
    if (file[0] == '/') snprintf(p->kernel_file, sizeof p->kernel_file, "%s", file);
    else snprintf(p->kernel_file, sizeof p->kernel_file, "%.2000s/%.2000s", p->dir, file);
    json_t *opts = member(&c, ks, "KernelSpecification", "CompilerOptions", JSON_ARRAY, false, "an array of strings");
    p->options = calloc(json_array_size(opts) + 1, sizeof *p->options);
    size_t i;
    json_t *v;
    json_array_foreach(opts, i, v) {
        if (!json_is_string(v)) {
            char op[128];
            snprintf(op, sizeof op, "KernelSpecification.CompilerOptions[%zu]", i);
            return fail(&c, op, "expected a string, got %s", kind_of(v));
        }
        p->options[p->noptions++] = json_string_value(v);
    }
    if (!read_sizes(&c, ks, "GlobalSize", p->global, p->size_text) || !read_sizes(&c, ks, "LocalSize", p->local, p->size_text + 3))
        return false;
    const char *gtype = str_member(&c, ks, "KernelSpecification", "GlobalSizeType", false, "a string (OpenCL or CUDA)");
    if (c.failed) return false;
    p->geometry = strcmp(p->language, "CUDA") == 0 ? KT_GEOMETRY_GRID : KT_GEOMETRY_GLOBAL;
    if (gtype && strcmp(gtype, "CUDA") == 0) p->geometry = KT_GEOMETRY_GRID;
    else if (gtype && strcmp(gtype, "OpenCL") == 0) p->geometry = KT_GEOMETRY_GLOBAL;
    else if (gtype) return fail(&c, "KernelSpecification.GlobalSizeType", "'%s' is not one of OpenCL, CUDA", gtype);
    json_t *ps = member(&c, ks, "KernelSpecification", "ProblemSize", JSON_ARRAY, false, "an array of integers");
    json_array_foreach(ps, i, v) {
        if (!json_is_integer(v) || i >= 8) {
            char pp[128];
            snprintf(pp, sizeof pp, "KernelSpecification.ProblemSize[%zu]", i);
            return fail(&c, pp, i >= 8 ? "at most 8 dimensions" : "expected an integer, got %s", kind_of(v));
        }
        p->problem_size[p->nproblem++] = json_integer_value(v);
    }
    json_t *shm = member(&c, ks, "KernelSpecification", "SharedMemory", JSON_INTEGER, false, "an integer (bytes)");
    p->shared_memory = shm ? json_integer_value(shm) : 0;
    json_t *dev = member(&c, ks, "KernelSpecification", "Device", JSON_OBJECT, false, "an object with Id");
    if (dev) {
        json_t *id = member(&c, dev, "KernelSpecification.Device", "Id", JSON_INTEGER, true, "an integer");
        if (id) p->device_id = (int)json_integer_value(id);
    }
    if (c.failed || !read_args(&c, p, ks) || !read_refs(&c, p, ks) || !read_budget(&c, p)) return false;
    json_t *search = member(&c, p->root, "", "Search", JSON_OBJECT, false, "an object with Name");
    if (search) p->search = str_member(&c, search, "Search", "Name", true, "a string");
    const char *bench = general ? str_member(&c, general, "General", "BenchmarkName", false, "a string") : NULL;
    const char *kbench = str_member(&c, ks, "KernelSpecification", "BenchmarkName", false, "a string");
    p->name = bench ? bench : kbench ? kbench : p->kernel_name;
    return !c.failed;
}

void t1_free(t1 *p) {
    free(p->params);
    free(p->conditions);
    free(p->options);
    free(p->args);
    free(p->refs);
    json_decref(p->root);
    memset(p, 0, sizeof *p);
}
