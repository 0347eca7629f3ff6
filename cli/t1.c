/*
 * t1.c - reading T1 problems: JSON syntax errors with line and column (jansson), schema errors
 * with the JSON path of the field at fault, fields kerntune does not implement refused (never
 * ignored), paths resolved against the problem file's directory, files read only when they are
 * regular files and within a size limit.
 */
#define _DEFAULT_SOURCE /* realpath */
#include "t1_int.h"
#include "t4.h"

#include <kerntune/variants.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *t1_read_file(const char *path, const char *what, size_t limit, size_t exact, size_t *len, char **err) {
    *err = NULL;
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; the type is checked before reading */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        *err = cli_format("%s %s cannot be read: %s", what, path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        *err = cli_format("%s %s cannot be read: %s", what, path, strerror(errno));
        close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        *err = cli_format("%s %s is %s; expected a regular file", what, path, cli_file_kind(st.st_mode));
        close(fd);
        return NULL;
    }
    size_t size = (size_t)st.st_size;
    if (exact > 0) {
        if (size != exact) { /* a file longer than its argument would be cut, one shorter not fill it */
            *err = cli_format("%s %s holds %zu bytes; %zu expected", what, path, size, exact);
            close(fd);
            return NULL;
        }
        size = exact;
    } else if (size > limit) {
        *err = cli_format("%s %s is %zu bytes; kerntune reads at most %zu (%zu MiB)", what, path, size, limit, limit >> 20);
        close(fd);
        return NULL;
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0) fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    char *buf = malloc(size + 1);
    if (buf == NULL) {
        *err = cli_format("%s %s: cannot allocate %zu bytes", what, path, size + 1);
        close(fd);
        return NULL;
    }
    size_t got = 0;
    while (got < size) {
        ssize_t r = read(fd, buf + got, size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            *err = r < 0 ? cli_format("%s %s cannot be read: %s", what, path, strerror(errno))
                         : cli_format("%s %s changed while it was read (%zu of %zu bytes)", what, path, got, size);
            free(buf);
            close(fd);
            return NULL;
        }
        got += (size_t)r;
    }
    close(fd);
    buf[size] = '\0';
    if (len) *len = size;
    return buf;
}

bool t1_fail(ctx *c, const char *path, const char *fmt, ...) {
    if (c->failed) return false;
    c->failed = true;
    va_list ap;
    va_start(ap, fmt);
    char *msg = cli_vformat(fmt, ap);
    va_end(ap);
    *c->err = cli_format("%s: %s: %s", c->file, path, msg ? msg : "out of memory");
    free(msg);
    return false;
}

const char *t1_kind_of(const json_t *v) {
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

/* Refuses the first member of obj not in known (NULL-terminated): a field kerntune does not
 * read would be ignored, and an ignored field can make the run differ from what the file asks. */
bool t1_known_fields(ctx *c, json_t *obj, const char *path, const char *const *known) {
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        bool found = false;
        for (const char *const *k = known; *k && !found; k++) found = strcmp(*k, key) == 0;
        if (!found) {
            char *full = cli_format("%s%s%s", path, *path ? "." : "", key);
            t1_fail(c, full ? full : key, "kerntune does not implement this field; it refuses the problem rather than ignore it");
            free(full);
            return false;
        }
    }
    return true;
}

/* Member key of obj, of JSON type `want` (or any when want < 0); NULL when absent (an error
 * when required) or of the wrong type (always an error). Paths are built from the schema's
 * names and indices only. */
json_t *t1_member(ctx *c, json_t *obj, const char *path, const char *key, int want, bool required, const char *what) {
    char full[256];
    snprintf(full, sizeof full, "%s%s%s", path, *path ? "." : "", key);
    json_t *v = json_object_get(obj, key);
    if (v == NULL) {
        if (required) t1_fail(c, full, "missing; expected %s", what);
        return NULL;
    }
    bool ok = want < 0 || (int)json_typeof(v) == want ||
              (want == JSON_REAL && json_typeof(v) == JSON_INTEGER) ||
              (want == JSON_TRUE && json_typeof(v) == JSON_FALSE);
    if (!ok) {
        t1_fail(c, full, "expected %s, got %s", what, t1_kind_of(v));
        return NULL;
    }
    return v;
}

const char *t1_str_member(ctx *c, json_t *obj, const char *path, const char *key, bool required, const char *what) {
    json_t *v = t1_member(c, obj, path, key, JSON_STRING, required, what);
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

/* A parameter's name is a name in expressions and a define in the kernel's code: an identifier,
 * not a word of the expression language, not ProblemSize (the problem's size, which every
 * expression reads), and not the name of an earlier parameter. */
static bool param_name(ctx *c, const t1 *p, const char *path, const char *name) {
    static const char *const words[] = {"and", "or", "not", "if", "else", "in", "is", "lambda", "for", "True", "False", "None"};
    char np[128];
    snprintf(np, sizeof np, "%s.Name", path);
    bool ident = name[0] == '_' || (name[0] >= 'A' && name[0] <= 'Z') || (name[0] >= 'a' && name[0] <= 'z');
    for (const char *ch = name; ident && *ch; ch++)
        ident = *ch == '_' || (*ch >= '0' && *ch <= '9') || (*ch >= 'A' && *ch <= 'Z') || (*ch >= 'a' && *ch <= 'z');
    if (!ident)
        return t1_fail(c, np, "'%s' is not a name: expected a letter or _ followed by letters, digits and _ (it is a name in "
                    "expressions and a define in the kernel)", name);
    for (size_t k = 0; k < sizeof words / sizeof words[0]; k++)
        if (strcmp(words[k], name) == 0) return t1_fail(c, np, "'%s' is a word of the expression language; choose another name", name);
    if (strcmp(name, "ProblemSize") == 0)
        return t1_fail(c, np, "'ProblemSize' names the problem's size (KernelSpecification.ProblemSize) in every expression; "
                    "choose another name");
    for (size_t k = 0; k + 1 < p->nparams; k++)
        if (strcmp(p->params[k].name, name) == 0)
            return t1_fail(c, np, "'%s' is already the name of ConfigurationSpace.TuningParameters[%zu]", name, k);
    return true;
}

char *t1_literal(const json_t *v) {
    if (json_is_boolean(v)) return cli_format("%s", json_is_true(v) ? "True" : "False");
    if (!json_is_string(v)) {
        char num[64]; /* a number: always fits */
        t4_value_text(v, num, sizeof num);
        return cli_format("%s", num);
    }
    const char *s = json_string_value(v);
    char *out = malloc(2 * strlen(s) + 3), *o = out;
    if (out == NULL) return NULL;
    *o++ = '\'';
    for (; *s; s++) {
        if (*s == '\'' || *s == '\\') *o++ = '\\';
        *o++ = *s;
    }
    *o++ = '\'';
    *o = '\0';
    return out;
}

/* Whether value (a Python literal) equals one of the parameter's Values, by the expression
 * language's == (2 and 2.0 are equal); true when the Values cannot be evaluated here (the space
 * reports that error itself, naming the JSON path). */
static bool among_values(const t1_param *tp, const char *value) {
    kt_space *sp = NULL;
    char *cond = cli_format("%s == %s", tp->name, value);
    size_t n = 1;
    bool known = cond && kt_space_create(&sp) == KT_OK && kt_space_add_param(sp, tp->name, tp->values) == KT_OK &&
                 kt_space_add_constraint(sp, cond) == KT_OK && kt_space_enumerate(sp, &n) == KT_OK;
    free(cond);
    kt_space_destroy(sp);
    return !known || n > 0;
}

/* A parameter's Default. Kernel Tuner's reader reads none, so a file may give any: kerntune
 * uses one value (a number, a string or a boolean; an array of one is its element) that is one
 * of the parameter's Values, and lists any other as not used (dflt_unused says why) instead of
 * refusing the problem. Only running out of memory fails. */
static bool read_default(ctx *c, t1_param *tp, const char *path) {
    json_t *d = tp->dflt_given;
    tp->dflt = NULL;
    if (d == NULL || json_is_null(d)) return true;
    json_t *one = json_is_array(d) && json_array_size(d) == 1 ? json_array_get(d, 0) : d;
    char dpath[128];
    snprintf(dpath, sizeof dpath, "%s.Default", path);
    if (!json_is_string(one) && !json_is_number(one) && !json_is_boolean(one)) {
        if (json_is_array(d) && one == d)
            tp->dflt_unused = cli_format("an array of %zu values; expected one value (a number, a string or a boolean) or an array of one",
                                         json_array_size(d));
        else
            tp->dflt_unused = cli_format("%s%s; expected one value (a number, a string or a boolean) or an array of one",
                                         one == d ? "" : "an array of one value that is ", t1_kind_of(one));
        return tp->dflt_unused ? true : t1_fail(c, dpath, "out of memory");
    }
    char *lit = t1_literal(one);
    if (lit == NULL) return t1_fail(c, dpath, "out of memory");
    if (among_values(tp, lit)) tp->dflt = one;
    else tp->dflt_unused = cli_format("%s is not one of the Values %s", lit, tp->values);
    free(lit);
    return tp->dflt || tp->dflt_unused ? true : t1_fail(c, dpath, "out of memory");
}

static bool read_params(ctx *c, t1 *p, json_t *cs) {
    static const char *const known_cs[] = {"TuningParameters", "Conditions", NULL};
    static const char *const known_param[] = {"Name", "Type", "Values", "Default", "Description", NULL};
    static const char *const known_cond[] = {"Expression", "Parameters", NULL};
    if (!t1_known_fields(c, cs, "ConfigurationSpace", known_cs)) return false;
    json_t *params = t1_member(c, cs, "ConfigurationSpace", "TuningParameters", JSON_ARRAY, true, "an array of parameters");
    if (params == NULL) return false;
    p->params = calloc(json_array_size(params) + 1, sizeof *p->params);
    if (p->params == NULL) return t1_fail(c, "ConfigurationSpace.TuningParameters", "out of memory");
    size_t i;
    json_t *v;
    json_array_foreach(params, i, v) {
        char path[96];
        snprintf(path, sizeof path, "ConfigurationSpace.TuningParameters[%zu]", i);
        if (!json_is_object(v)) return t1_fail(c, path, "expected an object, got %s", t1_kind_of(v));
        if (!t1_known_fields(c, v, path, known_param)) return false;
        t1_param *tp = &p->params[p->nparams++];
        tp->name = t1_str_member(c, v, path, "Name", true, "a string");
        tp->type = t1_str_member(c, v, path, "Type", true, "a string (int, uint, float, bool or string)");
        tp->values = t1_str_member(c, v, path, "Values", true, "a string (a Python list, e.g. \"[16, 32, 64]\")");
        tp->dflt_given = json_object_get(v, "Default");
        t1_str_member(c, v, path, "Description", false, "a string");
        if (c->failed) return false;
        if (!param_name(c, p, path, tp->name)) return false;
        static const char *const types[] = {"int", "uint", "float", "bool", "string"};
        bool ok = false;
        for (size_t k = 0; k < 5; k++) ok = ok || strcmp(types[k], tp->type) == 0;
        if (!ok) {
            char tpath[128];
            snprintf(tpath, sizeof tpath, "%s.Type", path);
            return t1_fail(c, tpath, "'%s' is not one of int, uint, float, bool, string", tp->type);
        }
        if (!read_default(c, tp, path)) return false;
    }
    if (p->nparams == 0) return t1_fail(c, "ConfigurationSpace.TuningParameters", "expected at least one parameter");
    json_t *conds = t1_member(c, cs, "ConfigurationSpace", "Conditions", JSON_ARRAY, false, "an array of conditions");
    if (c->failed) return false;
    p->conditions = calloc(json_array_size(conds) + 1, sizeof *p->conditions);
    if (p->conditions == NULL) return t1_fail(c, "ConfigurationSpace.Conditions", "out of memory");
    json_array_foreach(conds, i, v) {
        char path[96];
        snprintf(path, sizeof path, "ConfigurationSpace.Conditions[%zu]", i);
        if (!json_is_object(v)) return t1_fail(c, path, "expected an object, got %s", t1_kind_of(v));
        if (!t1_known_fields(c, v, path, known_cond)) return false;
        const char *e = t1_str_member(c, v, path, "Expression", true, "a string (a Python expression)");
        t1_member(c, v, path, "Parameters", JSON_ARRAY, false, "an array of parameter names");
        if (c->failed) return false;
        p->conditions[p->nconditions++] = e;
    }
    return true;
}

static bool read_budget(ctx *c, t1 *p) {
    json_t *budget = json_object_get(p->root, "Budget");
    if (budget == NULL) return true;
    if (!json_is_array(budget)) return t1_fail(c, "Budget", "expected an array, got %s", t1_kind_of(budget));
    static const char *const known[] = {"Type", "BudgetValue", NULL};
    size_t i;
    json_t *v;
    json_array_foreach(budget, i, v) {
        char path[64];
        snprintf(path, sizeof path, "Budget[%zu]", i);
        if (!json_is_object(v)) return t1_fail(c, path, "expected an object, got %s", t1_kind_of(v));
        if (!t1_known_fields(c, v, path, known)) return false;
        const char *type = t1_str_member(c, v, path, "Type", true, "a string");
        json_t *value = t1_member(c, v, path, "BudgetValue", JSON_REAL, true, "a number");
        if (c->failed) return false;
        double x = json_number_value(value);
        char tp[96];
        snprintf(tp, sizeof tp, "%s.BudgetValue", path);
        if (!(x > 0) || !isfinite(x)) return t1_fail(c, tp, "%g; expected a number above 0", x);
        for (size_t k = 0; k < i; k++) /* Kernel Tuner reads Budget[0] only: two of a kind would leave one unread */
            if (strcmp(json_string_value(json_object_get(json_array_get(budget, k), "Type")), type) == 0) {
                snprintf(tp, sizeof tp, "%s.Type", path);
                return t1_fail(c, tp, "a second %s (Budget[%zu] is one): give each kind of budget once", type, k);
            }
        if (strcmp(type, "TuningDuration") == 0) p->budget_seconds = x;
        else if (strcmp(type, "ConfigurationCount") == 0) {
            if (x != floor(x)) return t1_fail(c, tp, "%g; expected a whole number of configurations", x);
            if (x > 1e15) return t1_fail(c, tp, "%g configurations is out of range: at most 1000000000000000", x);
            p->budget_count = (int64_t)x;
        } else if (strcmp(type, "ConfigurationFraction") == 0) {
            if (x > 1) return t1_fail(c, tp, "%g; expected a fraction of the space, at most 1", x);
            p->budget_fraction = x;
        } else {
            snprintf(tp, sizeof tp, "%s.Type", path);
            return t1_fail(c, tp, "'%s' is not one of TuningDuration, ConfigurationCount, ConfigurationFraction", type);
        }
    }
    return true;
}

static bool read_general(ctx *c, t1 *p, json_t *general) {
    /* descriptive fields, and TimeUnit, which kerntune's T4 output follows */
    static const char *const known[] = {"BenchmarkName", "OutputFormat", "OutputFile", "FormatVersion", "LoggingLevel",
                                        "TimeUnit", NULL};
    if (!t1_known_fields(c, general, "General", known)) return false;
    t1_str_member(c, general, "General", "BenchmarkName", false, "a string");
    const char *format = t1_str_member(c, general, "General", "OutputFormat", false, "a string (JSON or XML)");
    t1_str_member(c, general, "General", "OutputFile", false, "a string");
    t1_member(c, general, "General", "FormatVersion", JSON_INTEGER, false, "an integer");
    t1_str_member(c, general, "General", "LoggingLevel", false, "a string");
    const char *unit = t1_str_member(c, general, "General", "TimeUnit", false, "a string (Nanoseconds, Microseconds, Milliseconds or Seconds)");
    if (c->failed) return false;
    if (format && strcmp(format, "JSON") != 0 && strcmp(format, "XML") != 0)
        return t1_fail(c, "General.OutputFormat", "'%s' is not one of JSON, XML", format);
    if (unit) {
        static const struct {
            const char *t1, *t4;
            double per_ms;
        } units[] = {{"Nanoseconds", "nanoseconds", 1e6}, {"Microseconds", "microseconds", 1e3},
                     {"Milliseconds", "milliseconds", 1}, {"Seconds", "seconds", 1e-3}};
        size_t k = 0;
        while (k < 4 && strcmp(units[k].t1, unit) != 0) k++;
        if (k == 4) return t1_fail(c, "General.TimeUnit", "'%s' is not one of Nanoseconds, Microseconds, Milliseconds, Seconds", unit);
        p->time_unit = units[k].t4;
        p->time_scale = units[k].per_ms;
    }
    return true;
}

static bool read_device(ctx *c, t1 *p, json_t *ks) {
    json_t *dev = t1_member(c, ks, "KernelSpecification", "Device", JSON_OBJECT, false, "an object with Id or Name");
    if (dev == NULL) return !c->failed;
    static const char *const known[] = {"Id", "DeviceId", "Name", NULL};
    const char *path = "KernelSpecification.Device";
    if (json_object_get(dev, "PlatformId"))
        return t1_fail(c, "KernelSpecification.Device.PlatformId",
                    "kerntune numbers a backend's devices across platforms: give Device.Id (see 'kerntune devices') or --device");
    if (!t1_known_fields(c, dev, path, known)) return false;
    json_t *id = t1_member(c, dev, path, "Id", JSON_INTEGER, false, "an integer");
    json_t *did = t1_member(c, dev, path, "DeviceId", JSON_INTEGER, false, "an integer");
    p->device_name = t1_str_member(c, dev, path, "Name", false, "a string");
    if (c->failed) return false;
    if (id && did && json_integer_value(id) != json_integer_value(did))
        return t1_fail(c, "KernelSpecification.Device.DeviceId", "%lld differs from Id %lld", (long long)json_integer_value(did),
                    (long long)json_integer_value(id));
    json_t *n = id ? id : did;
    if (n) {
        if (json_integer_value(n) < 0 || json_integer_value(n) > INT_MAX)
            return t1_fail(c, id ? "KernelSpecification.Device.Id" : "KernelSpecification.Device.DeviceId", "%lld; expected a device number >= 0",
                        (long long)json_integer_value(n));
        p->device_id = (int)json_integer_value(n);
    }
    return true;
}

static bool read_search(ctx *c, t1 *p) {
    json_t *search = t1_member(c, p->root, "", "Search", JSON_OBJECT, false, "an object with Name");
    if (search == NULL) return !c->failed;
    static const char *const known[] = {"Name", "Attributes", NULL};
    if (!t1_known_fields(c, search, "Search", known)) return false;
    p->search = t1_str_member(c, search, "Search", "Name", true, "a string");
    json_t *attrs = t1_member(c, search, "Search", "Attributes", JSON_ARRAY, false, "an array");
    p->search_attributes = json_array_size(attrs) > 0;
    return !c->failed;
}

static bool read_kernel_spec(ctx *c, t1 *p, json_t *ks) {
    static const char *const known_ks[] = {"Language", "CompilerOptions", "BenchmarkName", "KernelName", "KernelFile",
                                           "GlobalSizeType", "LocalSize", "GlobalSize", "GridDivX", "GridDivY", "GridDivZ",
                                           "ProblemSize", "SharedMemory", "Stream", "Arguments", "ReferenceArguments",
                                           "Device", "Profiling", "x-kerntune", "Misc", NULL};
    if (json_object_get(ks, "SimulationInput"))
        return t1_fail(c, "KernelSpecification.SimulationInput", "kerntune replays recorded data given with --simulate FILE only");
    if (!t1_known_fields(c, ks, "KernelSpecification", known_ks)) return false;
    const char *K = "KernelSpecification";
    /* kerntune's extension (other tools ignore it): the work of one call, for GFLOP/s and GB/s */
    json_t *x = t1_member(c, ks, K, "x-kerntune", JSON_OBJECT, false, "an object with Flops and Bytes");
    if (c->failed) return false;
    if (x) {
        static const char *const known_x[] = {"Flops", "Bytes", NULL};
        if (!t1_known_fields(c, x, "KernelSpecification.x-kerntune", known_x)) return false;
        p->work_flops = t1_str_member(c, x, "KernelSpecification.x-kerntune", "Flops", false, "an expression (a string)");
        p->work_bytes = t1_str_member(c, x, "KernelSpecification.x-kerntune", "Bytes", false, "an expression (a string)");
        if (c->failed) return false;
    }
    p->language = t1_str_member(c, ks, K, "Language", true, "a string (C, OpenCL or CUDA)");
    p->kernel_name = t1_str_member(c, ks, K, "KernelName", true, "a string");
    const char *file = t1_str_member(c, ks, K, "KernelFile", true, "a string (the kernel source's path)");
    t1_str_member(c, ks, K, "BenchmarkName", false, "a string");
    if (c->failed) return false;
    if (strcmp(p->language, "Hypertuner") == 0) /* Kernel Tuner 1.5 reads it, into a backend of its own */
        return t1_fail(c, "KernelSpecification.Language",
                    "'Hypertuner' is Kernel Tuner tuning its own search strategies' settings (its hypertuner backend, "
                    "with the autotuning_methodology package), not a kernel; kerntune tunes C, OpenCL or CUDA kernels");
    if (strcmp(p->language, "C") != 0 && strcmp(p->language, "OpenCL") != 0 && strcmp(p->language, "CUDA") != 0)
        return t1_fail(c, "KernelSpecification.Language", "'%s' is not supported; expected C, OpenCL or CUDA", p->language);
    p->kernel_file = file[0] == '/' ? cli_format("%s", file) : cli_format("%s/%s", p->dir, file);
    if (p->kernel_file == NULL) return t1_fail(c, "KernelSpecification.KernelFile", "out of memory");
    json_t *opts = t1_member(c, ks, K, "CompilerOptions", JSON_ARRAY, false, "an array of strings");
    if (c->failed) return false;
    p->options = calloc(json_array_size(opts) + 1, sizeof *p->options);
    if (p->options == NULL) return t1_fail(c, "KernelSpecification.CompilerOptions", "out of memory");
    size_t i;
    json_t *v;
    json_array_foreach(opts, i, v) {
        if (!json_is_string(v)) {
            char op[96];
            snprintf(op, sizeof op, "KernelSpecification.CompilerOptions[%zu]", i);
            return t1_fail(c, op, "expected a string, got %s", t1_kind_of(v));
        }
        p->options[p->noptions++] = json_string_value(v);
    }
    /* an array of sizes, or one integer: one dimension, as Kernel Tuner reads it */
    json_t *ps = json_object_get(ks, "ProblemSize");
    if (ps && !json_is_array(ps) && !json_is_integer(ps))
        return t1_fail(c, "KernelSpecification.ProblemSize", "expected an array of integers (or one integer), got %s", t1_kind_of(ps));
    size_t nps = json_is_integer(ps) ? 1 : json_array_size(ps);
    for (i = 0; i < nps; i++) {
        v = json_is_integer(ps) ? ps : json_array_get(ps, i);
        char pp[96];
        if (json_is_integer(ps)) snprintf(pp, sizeof pp, "KernelSpecification.ProblemSize");
        else snprintf(pp, sizeof pp, "KernelSpecification.ProblemSize[%zu]", i);
        if (i >= 8) return t1_fail(c, pp, "at most 8 dimensions");
        if (!json_is_integer(v)) return t1_fail(c, pp, "expected an integer, got %s", t1_kind_of(v));
        if (json_integer_value(v) < 1) return t1_fail(c, pp, "%lld; expected a size of at least 1", (long long)json_integer_value(v));
        p->problem_size[p->nproblem++] = json_integer_value(v);
    }
    /* geometry: LocalSize; GridDiv (Kernel Tuner's grid from ProblemSize) or GlobalSize */
    json_t *local = t1_member(c, ks, K, "LocalSize", JSON_OBJECT, true, "an object with X, Y, Z");
    json_t *global = t1_member(c, ks, K, "GlobalSize", JSON_OBJECT, false, "an object with X, Y, Z");
    if (c->failed || !t1_read_sizes(c, local, "LocalSize", p->local) || !t1_read_grid_div(c, p, ks)) return false;
    if (global && !t1_read_sizes(c, global, "GlobalSize", p->global)) return false;
    const char *gtype = t1_str_member(c, ks, K, "GlobalSizeType", false, "a string (OpenCL or CUDA)");
    if (c->failed) return false;
    p->geometry = strcmp(p->language, "CUDA") == 0 ? KT_GEOMETRY_GRID : KT_GEOMETRY_GLOBAL;
    if (gtype && strcmp(gtype, "CUDA") == 0) p->geometry = KT_GEOMETRY_GRID;
    else if (gtype && strcmp(gtype, "OpenCL") == 0) p->geometry = KT_GEOMETRY_GLOBAL;
    else if (gtype) return t1_fail(c, "KernelSpecification.GlobalSizeType", "'%s' is not one of OpenCL, CUDA", gtype);
    if (global == NULL && !p->grid_div) {
        if (p->nproblem == 0)
            return t1_fail(c, "KernelSpecification.GlobalSize", "missing; expected an object with X, Y, Z (or ProblemSize, from which the grid is computed)");
        p->grid_div = true; /* no GlobalSize: Kernel Tuner's grid, each dimension divided by its LocalSize */
    }
    if (p->grid_div) {
        if (p->nproblem == 0) {
            const char *which = p->ndiv[0] ? "GridDivX" : p->ndiv[1] ? "GridDivY" : "GridDivZ";
            char gp[64];
            snprintf(gp, sizeof gp, "KernelSpecification.%s", which);
            return t1_fail(c, gp, "divides ProblemSize, which the problem does not give");
        }
        p->geometry = KT_GEOMETRY_GRID; /* a grid of blocks, for CUDA and OpenCL alike (OpenCL: times LocalSize) */
        for (int d = 0; d < 3; d++) {
            free(p->global[d]);
            p->global[d] = NULL;
        }
    }
    json_t *shm = t1_member(c, ks, K, "SharedMemory", JSON_INTEGER, false, "an integer (bytes)");
    if (c->failed) return false;
    p->shared_memory = shm ? json_integer_value(shm) : 0;
    if (p->shared_memory < 0) return t1_fail(c, "KernelSpecification.SharedMemory", "%lld; expected bytes >= 0", (long long)p->shared_memory);
    if (p->shared_memory > 0 && strcmp(p->language, "CUDA") != 0)
        return t1_fail(c, "KernelSpecification.SharedMemory",
                    "%lld bytes of dynamic shared memory: only CUDA kernels are launched with it (an %s kernel declares its own)",
                    (long long)p->shared_memory, strcmp(p->language, "OpenCL") == 0 ? "OpenCL" : "C");
    json_t *stream = json_object_get(ks, "Stream");
    if (stream && !json_is_null(stream))
        return t1_fail(c, "KernelSpecification.Stream", "kerntune runs every configuration on its own stream; expected null, got %s", t1_kind_of(stream));
    json_t *prof = t1_member(c, ks, K, "Profiling", JSON_TRUE, false, "a boolean");
    if (c->failed) return false;
    if (prof && json_is_true(prof))
        return t1_fail(c, "KernelSpecification.Profiling", "true: kerntune does not collect profiling counters; expected false");
    return read_device(c, p, ks) && t1_read_args(c, p, ks) && t1_read_refs(c, p, ks);
}

/* Metadata that Kernel Tuner's reader skips and that changes nothing about the kernel, its
 * arguments or its launch: accepted whatever it holds, never read, and listed. benchmark_hub's
 * BenchmarkConfig (dataSize, iterations, MAX_THREADS, ...: the benchmark's own settings, which
 * the problem's fields already give where they matter) and KernelSpecification.Misc ({"jitify":
 * true}: how Kernel Tuner's cupy backend may compile, not what is measured). */
static const struct {
    const char *object, *key; /* object "": the top level */
} metadata[] = {{"", "BenchmarkConfig"}, {"KernelSpecification", "Misc"}};

/* Fills p->ignored: the metadata present, then the Defaults that are not used. */
static bool list_ignored(ctx *c, t1 *p, json_t *ks) {
    size_t n = sizeof metadata / sizeof metadata[0];
    for (size_t i = 0; i < p->nparams; i++) n += p->params[i].dflt_unused != NULL;
    if ((p->ignored = calloc(n + 1, sizeof *p->ignored)) == NULL) return t1_fail(c, "(top level)", "out of memory");
    for (size_t m = 0; m < sizeof metadata / sizeof metadata[0]; m++) {
        json_t *obj = *metadata[m].object ? ks : p->root;
        if (json_object_get(obj, metadata[m].key) == NULL) continue;
        char *path = cli_format("%s%s%s", metadata[m].object, *metadata[m].object ? "." : "", metadata[m].key);
        if (path == NULL) return t1_fail(c, "(top level)", "out of memory");
        p->ignored[p->nignored++] = path;
    }
    p->nmetadata = p->nignored;
    for (size_t i = 0; i < p->nparams; i++) {
        if (p->params[i].dflt_unused == NULL) continue;
        char *path = cli_format("ConfigurationSpace.TuningParameters[%zu].Default", i);
        if (path == NULL) return t1_fail(c, "(top level)", "out of memory");
        p->ignored[p->nignored++] = path;
    }
    return true;
}

void t1_print_ignored(const t1 *p, FILE *out, const char *prefix) {
    if (p->nmetadata > 0) {
        fprintf(out, "%s: note: %s: ignored (metadata; nothing measured depends on them): ", prefix, p->path);
        for (size_t i = 0; i < p->nmetadata; i++) fprintf(out, "%s%s", i ? ", " : "", p->ignored[i]);
        fprintf(out, "\n");
    }
    for (size_t i = p->nmetadata, k = 0; i < p->nignored; i++, k++) {
        while (p->params[k].dflt_unused == NULL) k++; /* the parameter of the i-th listed Default */
        fprintf(out, "%s: note: %s: %s: %s; not used (as if the parameter had no Default)\n", prefix, p->path, p->ignored[i],
                p->params[k].dflt_unused);
    }
}

json_t *t1_ignored_json(const t1 *p) {
    json_t *a = json_array();
    for (size_t i = 0; a && i < p->nignored; i++)
        if (json_array_append_new(a, json_string(p->ignored[i])) != 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}

static bool load(const char *path, t1 *p, char **err);

bool t1_load(const char *path, t1 *p, char **err) {
    bool ok = load(path, p, err);
    cli_one_line(*err); /* a field name or value of the file may hold a newline: the message stays one line */
    return ok;
}

static bool load(const char *path, t1 *p, char **err) {
    memset(p, 0, sizeof *p);
    p->device_id = -1;
    p->atol = p->rtol = -1;
    p->time_scale = 1;
    p->time_unit = "milliseconds";
    *err = NULL;
    ctx c = {path, err, false};
    size_t len = 0;
    char *rerr = NULL;
    char *text = t1_read_file(path, "the problem file", T1_FILE_LIMIT, 0, &len, &rerr);
    if (text == NULL) {
        *err = rerr;
        return false;
    }
    json_error_t jerr;
    p->root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    free(text);
    if (p->root == NULL) {
        *err = cli_format("%s:%d:%d: %s", path, jerr.line, jerr.column, jerr.text);
        return false;
    }
    if (!json_is_object(p->root)) return t1_fail(&c, "(top level)", "expected an object, got %s", t1_kind_of(p->root));
    p->path = cli_format("%s", path);
    char *abs = realpath(path, NULL); /* absolute: messages give resolved paths */
    p->dir = abs ? abs : cli_format("%s", path);
    if (p->path == NULL || p->dir == NULL) return t1_fail(&c, "(top level)", "out of memory");
    char *slash = strrchr(p->dir, '/');
    if (slash == p->dir) slash[1] = '\0';
    else if (slash) *slash = '\0';
    else strcpy(p->dir, "."); /* "." fits: the path had at least one character */
    static const char *const known_top[] = {"General", "ConfigurationSpace", "KernelSpecification", "Budget", "Search",
                                            "BenchmarkConfig", NULL};
    if (!t1_known_fields(&c, p->root, "", known_top)) return false;
    json_t *general = t1_member(&c, p->root, "", "General", JSON_OBJECT, false, "an object");
    json_t *cs = t1_member(&c, p->root, "", "ConfigurationSpace", JSON_OBJECT, true, "an object");
    json_t *ks = t1_member(&c, p->root, "", "KernelSpecification", JSON_OBJECT, true, "an object");
    if (c.failed || (general && !read_general(&c, p, general)) || !read_params(&c, p, cs)) return false;
    if (!read_kernel_spec(&c, p, ks) || !read_budget(&c, p) || !read_search(&c, p)) return false;
    const char *bench = general ? json_string_value(json_object_get(general, "BenchmarkName")) : NULL;
    const char *kbench = json_string_value(json_object_get(ks, "BenchmarkName"));
    p->name = bench ? bench : kbench ? kbench : p->kernel_name;
    return !c.failed && list_ignored(&c, p, ks);
}

bool t1_grid(t1 *p, size_t nps, char **err) {
    if (!p->grid_div) return true;
    for (int d = 0; d < 3; d++) {
        char *ps = (size_t)d < nps ? cli_format("ProblemSize[%d]", d) : cli_format("1");
        char *div = cli_format("int(%s)", p->ndiv[d] ? p->div[d][0] : p->local[d] ? p->local[d] : "1");
        for (size_t i = 1; div && ps && i < p->ndiv[d]; i++) {
            char *more = cli_format("%s * int(%s)", div, p->div[d][i]);
            free(div);
            div = more;
        }
        free(p->global[d]);
        /* rounded up: -(-a // b), with Python's floor division */
        p->global[d] = ps && div ? cli_format("-(-%s // (%s))", ps, div) : NULL;
        free(ps);
        free(div);
        if (p->global[d] == NULL) {
            *err = cli_format("%s: out of memory", p->path);
            return false;
        }
    }
    return true;
}

void t1_free(t1 *p) {
    for (size_t i = 0; p->params && i < p->nparams; i++) free(p->params[i].dflt_unused);
    free(p->params);
    for (size_t i = 0; i < p->nignored; i++) free(p->ignored[i]);
    free(p->ignored);
    free(p->conditions);
    free(p->options);
    free(p->args);
    free(p->refs);
    for (int d = 0; d < 3; d++) {
        free(p->global[d]);
        free(p->local[d]);
        for (size_t i = 0; i < p->ndiv[d]; i++) free(p->div[d][i]);
        free(p->div[d]);
    }
    free(p->path);
    free(p->dir);
    free(p->kernel_file);
    json_decref(p->root);
    memset(p, 0, sizeof *p);
}
