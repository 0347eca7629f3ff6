/*
 * t1.c - reading T1 problems: JSON syntax errors with line and column (jansson), schema errors
 * with the JSON path of the field at fault, fields kerntune does not implement refused (never
 * ignored), paths resolved against the problem file's directory, files read only when they are
 * regular files and within a size limit.
 */
#define _DEFAULT_SOURCE /* realpath */
#include "t1.h"
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

typedef struct ctx {
    const char *file;
    char **err;
    bool failed;
} ctx;

static bool fail(ctx *c, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool fail(ctx *c, const char *path, const char *fmt, ...) {
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

/* Refuses the first member of obj not in known (NULL-terminated): a field kerntune does not
 * read would be ignored, and an ignored field can make the run differ from what the file asks. */
static bool known_fields(ctx *c, json_t *obj, const char *path, const char *const *known) {
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        bool found = false;
        for (const char *const *k = known; *k && !found; k++) found = strcmp(*k, key) == 0;
        if (!found) {
            char *full = cli_format("%s%s%s", path, *path ? "." : "", key);
            fail(c, full ? full : key, "kerntune does not implement this field; it refuses the problem rather than ignore it");
            free(full);
            return false;
        }
    }
    return true;
}

/* Member key of obj, of JSON type `want` (or any when want < 0); NULL when absent (an error
 * when required) or of the wrong type (always an error). Paths are built from the schema's
 * names and indices only. */
static json_t *member(ctx *c, json_t *obj, const char *path, const char *key, int want, bool required, const char *what) {
    char full[256];
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

/* Reads FillType, DataSource and RandomSeed, and FillValue as JSON (*value: NULL when absent),
 * checked by fill_value once the element type is known. */
static bool read_fill(ctx *c, json_t *obj, const char *path, t1_fill *fill, json_t **value, const char **source,
                      bool *has_seed, int64_t *seed) {
    const char *f = str_member(c, obj, path, "FillType", false, "a string (Constant, Random or BinaryRaw)");
    json_t *fv = member(c, obj, path, "FillValue", JSON_REAL, false, "a number");
    json_t *sd = member(c, obj, path, "RandomSeed", JSON_INTEGER, false, "an integer");
    const char *ds = str_member(c, obj, path, "DataSource", false, "a string (the file of raw elements)");
    *value = fv;
    *fill = T1_FILL_CONSTANT;
    *source = NULL;
    *has_seed = sd != NULL;
    *seed = sd ? json_integer_value(sd) : 0;
    if (c->failed) return false;
    char p[256];
    if (f != NULL && strcmp(f, "Random") == 0) *fill = T1_FILL_RANDOM;
    else if (f != NULL && strcmp(f, "BinaryRaw") == 0) *fill = T1_FILL_BINARY;
    else if (f != NULL && strcmp(f, "Constant") != 0) {
        snprintf(p, sizeof p, "%s.FillType", path);
        return fail(c, p, "'%s' is not supported; expected Constant, Random or BinaryRaw", f);
    }
    if (*fill == T1_FILL_BINARY) {
        *source = ds;
        if (ds == NULL) return fail(c, path, "FillType BinaryRaw needs DataSource (the file of raw elements)");
        if (fv) {
            snprintf(p, sizeof p, "%s.FillValue", path);
            return fail(c, p, "has no meaning with FillType BinaryRaw (the data comes from DataSource)");
        }
    } else if (ds != NULL) {
        snprintf(p, sizeof p, "%s.DataSource", path);
        return fail(c, p, "is read only with FillType BinaryRaw");
    }
    if (sd && *fill != T1_FILL_RANDOM) {
        snprintf(p, sizeof p, "%s.RandomSeed", path);
        return fail(c, p, "is used only with FillType Random");
    }
    return true;
}

/* The whole numbers an integer type holds: [lo, hi) (exact as doubles), and as text. */
static bool int_range(kt_type t, bool is_bool, double *lo, double *hi, const char **text) {
    static const struct {
        kt_type type;
        double lo, hi;
        const char *text;
    } ranges[] = {{KT_TYPE_I8, -128.0, 128.0, "-128 to 127"},
                  {KT_TYPE_U8, 0.0, 256.0, "0 to 255"},
                  {KT_TYPE_I16, -32768.0, 32768.0, "-32768 to 32767"},
                  {KT_TYPE_U16, 0.0, 65536.0, "0 to 65535"},
                  {KT_TYPE_I32, -2147483648.0, 2147483648.0, "-2147483648 to 2147483647"},
                  {KT_TYPE_U32, 0.0, 4294967296.0, "0 to 4294967295"},
                  {KT_TYPE_I64, -0x1p63, 0x1p63, "-9223372036854775808 to 9223372036854775807"},
                  {KT_TYPE_U64, 0.0, 0x1p64, "0 to 18446744073709551615"}};
    if (is_bool) { /* a byte holding 0 or 1 */
        *lo = 0, *hi = 2, *text = "0 to 1";
        return true;
    }
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++)
        if (ranges[i].type == t) {
            *lo = ranges[i].lo, *hi = ranges[i].hi, *text = ranges[i].text;
            return true;
        }
    return false;
}

/* Checks the value fv (FillValue or Value, at path) of a fill for an element of type type_name
 * and sets *value and *bits: an integer type takes a whole number it holds for Constant (kept
 * exactly in *bits) and a bound it can reach for Random (values from 0 up to, not including,
 * the bound); a Random bound is above 0. A float type takes any number (rounded to the nearest
 * value of the type; beyond its range, infinity). */
static bool fill_value(ctx *c, const char *path, json_t *fv, kt_type type, const char *type_name, t1_fill fill, double *value,
                       uint64_t *bits) {
    *value = fv ? json_number_value(fv) : 0;
    *bits = 0;
    if (fv == NULL || fill == T1_FILL_BINARY) return true;
    char text[64]; /* a number: always fits */
    t4_value_text(fv, text, sizeof text);
    const char *an = type_name[0] == 'i' ? "an" : "a"; /* an int8, a uint8 */
    if (fill == T1_FILL_RANDOM && !(*value > 0))
        return fail(c, path, "%s: the bound of Random values (from 0 up to it); expected a number above 0", text);
    double lo, hi;
    const char *range;
    if (!int_range(type, strcmp(type_name, "bool") == 0, &lo, &hi, &range)) return true;
    if (fill == T1_FILL_RANDOM) {
        if (*value > hi)
            return fail(c, path, "%s: Random values go from 0 up to it, and %s %s holds at most %.0f", text, an, type_name, hi - 1);
        return true;
    }
    if (json_is_integer(fv)) { /* exactly, even where a double is not */
        json_int_t i = json_integer_value(fv);
        bool in = type == KT_TYPE_I64 || (type == KT_TYPE_U64 ? i >= 0 : (double)i >= lo && (double)i < hi);
        if (!in)
            return fail(c, path, "%s is out of range: %s %s holds whole numbers from %s", text, an, type_name, range);
        *bits = (uint64_t)i;
        return true;
    }
    if (*value != floor(*value))
        return fail(c, path, "%s is not a whole number: %s %s holds whole numbers from %s", text, an, type_name, range);
    if (*value < lo || *value >= hi)
        return fail(c, path, "%s is out of range: %s %s holds whole numbers from %s", text, an, type_name, range);
    *bits = *value < 0 ? (uint64_t)(int64_t)*value : (uint64_t)*value;
    return true;
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
        return fail(c, np, "'%s' is not a name: expected a letter or _ followed by letters, digits and _ (it is a name in "
                    "expressions and a define in the kernel)", name);
    for (size_t k = 0; k < sizeof words / sizeof words[0]; k++)
        if (strcmp(words[k], name) == 0) return fail(c, np, "'%s' is a word of the expression language; choose another name", name);
    if (strcmp(name, "ProblemSize") == 0)
        return fail(c, np, "'ProblemSize' names the problem's size (KernelSpecification.ProblemSize) in every expression; "
                    "choose another name");
    for (size_t k = 0; k + 1 < p->nparams; k++)
        if (strcmp(p->params[k].name, name) == 0)
            return fail(c, np, "'%s' is already the name of ConfigurationSpace.TuningParameters[%zu]", name, k);
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
                                         one == d ? "" : "an array of one value that is ", kind_of(one));
        return tp->dflt_unused ? true : fail(c, dpath, "out of memory");
    }
    char *lit = t1_literal(one);
    if (lit == NULL) return fail(c, dpath, "out of memory");
    if (among_values(tp, lit)) tp->dflt = one;
    else tp->dflt_unused = cli_format("%s is not one of the Values %s", lit, tp->values);
    free(lit);
    return tp->dflt || tp->dflt_unused ? true : fail(c, dpath, "out of memory");
}

static bool read_params(ctx *c, t1 *p, json_t *cs) {
    static const char *const known_cs[] = {"TuningParameters", "Conditions", NULL};
    static const char *const known_param[] = {"Name", "Type", "Values", "Default", "Description", NULL};
    static const char *const known_cond[] = {"Expression", "Parameters", NULL};
    if (!known_fields(c, cs, "ConfigurationSpace", known_cs)) return false;
    json_t *params = member(c, cs, "ConfigurationSpace", "TuningParameters", JSON_ARRAY, true, "an array of parameters");
    if (params == NULL) return false;
    p->params = calloc(json_array_size(params) + 1, sizeof *p->params);
    if (p->params == NULL) return fail(c, "ConfigurationSpace.TuningParameters", "out of memory");
    size_t i;
    json_t *v;
    json_array_foreach(params, i, v) {
        char path[96];
        snprintf(path, sizeof path, "ConfigurationSpace.TuningParameters[%zu]", i);
        if (!json_is_object(v)) return fail(c, path, "expected an object, got %s", kind_of(v));
        if (!known_fields(c, v, path, known_param)) return false;
        t1_param *tp = &p->params[p->nparams++];
        tp->name = str_member(c, v, path, "Name", true, "a string");
        tp->type = str_member(c, v, path, "Type", true, "a string (int, uint, float, bool or string)");
        tp->values = str_member(c, v, path, "Values", true, "a string (a Python list, e.g. \"[16, 32, 64]\")");
        tp->dflt_given = json_object_get(v, "Default");
        str_member(c, v, path, "Description", false, "a string");
        if (c->failed) return false;
        if (!param_name(c, p, path, tp->name)) return false;
        static const char *const types[] = {"int", "uint", "float", "bool", "string"};
        bool ok = false;
        for (size_t k = 0; k < 5; k++) ok = ok || strcmp(types[k], tp->type) == 0;
        if (!ok) {
            char tpath[128];
            snprintf(tpath, sizeof tpath, "%s.Type", path);
            return fail(c, tpath, "'%s' is not one of int, uint, float, bool, string", tp->type);
        }
        if (!read_default(c, tp, path)) return false;
    }
    if (p->nparams == 0) return fail(c, "ConfigurationSpace.TuningParameters", "expected at least one parameter");
    json_t *conds = member(c, cs, "ConfigurationSpace", "Conditions", JSON_ARRAY, false, "an array of conditions");
    if (c->failed) return false;
    p->conditions = calloc(json_array_size(conds) + 1, sizeof *p->conditions);
    if (p->conditions == NULL) return fail(c, "ConfigurationSpace.Conditions", "out of memory");
    json_array_foreach(conds, i, v) {
        char path[96];
        snprintf(path, sizeof path, "ConfigurationSpace.Conditions[%zu]", i);
        if (!json_is_object(v)) return fail(c, path, "expected an object, got %s", kind_of(v));
        if (!known_fields(c, v, path, known_cond)) return false;
        const char *e = str_member(c, v, path, "Expression", true, "a string (a Python expression)");
        member(c, v, path, "Parameters", JSON_ARRAY, false, "an array of parameter names");
        if (c->failed) return false;
        p->conditions[p->nconditions++] = e;
    }
    return true;
}

/* An expression's text for a size given as a string or an integer (allocated). */
static char *size_text(ctx *c, json_t *v, const char *path) {
    char *s = json_is_string(v) ? cli_format("%s", json_string_value(v)) : cli_format("%lld", (long long)json_integer_value(v));
    if (s == NULL) fail(c, path, "out of memory");
    return s;
}

/* GlobalSize or LocalSize: X, Y, Z as expression strings (or integers). */
static bool read_sizes(ctx *c, json_t *obj, const char *key, char *out[3]) {
    static const char *const known[] = {"X", "Y", "Z", NULL};
    char path[64];
    snprintf(path, sizeof path, "KernelSpecification.%s", key);
    if (!known_fields(c, obj, path, known)) return false;
    static const char *const dims[] = {"X", "Y", "Z"};
    for (int d = 0; d < 3; d++) {
        json_t *v = json_object_get(obj, dims[d]);
        char dp[96];
        snprintf(dp, sizeof dp, "%s.%s", path, dims[d]);
        if (v == NULL) {
            if (d == 0) return fail(c, dp, "missing; expected a string (an expression)");
        } else if (json_is_string(v) || json_is_integer(v)) {
            if ((out[d] = size_text(c, v, dp)) == NULL) return false;
        } else {
            return fail(c, dp, "expected a string (an expression), got %s", kind_of(v));
        }
    }
    return true;
}

/* GridDivX/Y/Z: a list of factors (expressions or integers), as Kernel Tuner reads them; a
 * single expression is one factor; null or an empty list is no GridDiv. */
static bool read_grid_div(ctx *c, t1 *p, json_t *ks) {
    static const char *const names[3] = {"GridDivX", "GridDivY", "GridDivZ"};
    for (int d = 0; d < 3; d++) {
        json_t *v = json_object_get(ks, names[d]);
        char path[64];
        snprintf(path, sizeof path, "KernelSpecification.%s", names[d]);
        if (v == NULL || json_is_null(v)) continue;
        size_t n = json_is_array(v) ? json_array_size(v) : 1;
        if (!json_is_array(v) && !json_is_string(v) && !json_is_integer(v))
            return fail(c, path, "expected an array of expressions (e.g. [\"block_size_x\", \"tile_size_x\"]), got %s", kind_of(v));
        if (n == 0) continue;
        if ((p->div[d] = calloc(n, sizeof *p->div[d])) == NULL) return fail(c, path, "out of memory");
        for (size_t i = 0; i < n; i++) {
            json_t *f = json_is_array(v) ? json_array_get(v, i) : v;
            char fp[96];
            if (json_is_array(v)) snprintf(fp, sizeof fp, "%s[%zu]", path, i);
            else snprintf(fp, sizeof fp, "%s", path);
            if (!json_is_string(f) && !json_is_integer(f))
                return fail(c, fp, "expected a string (an expression) or an integer, got %s", kind_of(f));
            if ((p->div[d][i] = size_text(c, f, fp)) == NULL) return false;
            p->ndiv[d]++;
        }
        p->grid_div = true;
    }
    return true;
}

static bool read_args(ctx *c, t1 *p, json_t *ks) {
    static const char *const known[] = {"Name", "Type", "MemoryType", "AccessType", "Size", "FillType", "FillValue",
                                        "DataSource", "RandomSeed", "Output", "MemType", "TypeSize", "Value", "x-kerntune", NULL};
    json_t *args = member(c, ks, "KernelSpecification", "Arguments", JSON_ARRAY, true, "an array of arguments");
    if (args == NULL) return false;
    p->args = calloc(json_array_size(args) + 1, sizeof *p->args);
    if (p->args == NULL) return fail(c, "KernelSpecification.Arguments", "out of memory");
    size_t i;
    json_t *v;
    json_array_foreach(args, i, v) {
        char path[96];
        snprintf(path, sizeof path, "KernelSpecification.Arguments[%zu]", i);
        if (!json_is_object(v)) return fail(c, path, "expected an object, got %s", kind_of(v));
        if (!known_fields(c, v, path, known)) return false;
        t1_arg *a = &p->args[p->nargs++];
        a->name = str_member(c, v, path, "Name", false, "a string");
        const char *type = str_member(c, v, path, "Type", true, "a string (float, double, int32, ...)");
        const char *mem = str_member(c, v, path, "MemoryType", true, "a string (Scalar or Vector)");
        const char *access = str_member(c, v, path, "AccessType", false, "a string (ReadOnly, WriteOnly or ReadWrite)");
        const char *memtype = str_member(c, v, path, "MemType", false, "a string (Constant)");
        json_t *output = member(c, v, path, "Output", -1, false, "");
        json_t *type_size = member(c, v, path, "TypeSize", JSON_INTEGER, false, "an integer (bytes)");
        if (c->failed) return false;
        char fp[128];
        if ((a->type = t1_type(type)) == 0) {
            snprintf(fp, sizeof fp, "%s.Type", path);
            return fail(c, fp, "'%s' is not supported; expected bool, int8..int64, uint8..uint64, half, float or double", type);
        }
        if (type_size && json_integer_value(type_size) != (json_int_t)kt_type_size(a->type)) {
            snprintf(fp, sizeof fp, "%s.TypeSize", path);
            return fail(c, fp, "%lld bytes, but a %s is %zu bytes", (long long)json_integer_value(type_size), type,
                        kt_type_size(a->type));
        }
        if (strcmp(mem, "Vector") == 0) a->vector = true;
        else if (strcmp(mem, "Scalar") != 0) {
            snprintf(fp, sizeof fp, "%s.MemoryType", path);
            return fail(c, fp, "'%s' is not supported; expected Scalar or Vector", mem);
        }
        a->type_name = type;
        if (!a->vector && (a->type == KT_TYPE_F16 || a->type == KT_TYPE_BF16)) {
            snprintf(fp, sizeof fp, "%s.Type", path);
            return fail(c, fp, "'%s' on a Scalar: kerntune passes scalars of the integer types, float and double only; "
                        "give a half as a Vector of Size 1", type);
        }
        if (a->name == NULL) {
            snprintf(a->auto_name, sizeof a->auto_name, "arg%zu", i);
            a->name = a->auto_name;
        }
        for (size_t k = 0; k + 1 < p->nargs; k++) /* a ReferenceArguments' TargetName must name one argument */
            if (strcmp(p->args[k].name, a->name) == 0) {
                snprintf(fp, sizeof fp, "%s.Name", path);
                return fail(c, fp, "'%s' is already the name of Arguments[%zu]%s", a->name, k,
                            p->args[k].name == p->args[k].auto_name ? " (the name kerntune gives an argument without one)" : "");
            }
        a->access = KT_READ_ONLY;
        if (access && strcmp(access, "WriteOnly") == 0) a->access = KT_WRITE_ONLY;
        else if (access && strcmp(access, "ReadWrite") == 0) a->access = KT_READ_WRITE;
        else if (access && strcmp(access, "ReadOnly") != 0) {
            snprintf(fp, sizeof fp, "%s.AccessType", path);
            return fail(c, fp, "'%s' is not one of ReadOnly, WriteOnly, ReadWrite", access);
        }
        if (!a->vector && a->access != KT_READ_ONLY) {
            snprintf(fp, sizeof fp, "%s.AccessType", path);
            return fail(c, fp, "'%s' on a Scalar: a scalar is passed by value and cannot be written", access);
        }
        if (memtype) {
            snprintf(fp, sizeof fp, "%s.MemType", path);
            if (strcmp(memtype, "Constant") != 0)
                return fail(c, fp, "'%s' is not supported; expected Constant (constant memory)", memtype);
            if (!a->vector) return fail(c, fp, "Constant on a Scalar: only a Vector can be placed in constant memory");
            if (a->access != KT_READ_ONLY)
                return fail(c, fp, "Constant on a %s argument: constant memory is read-only; expected AccessType ReadOnly",
                            a->access == KT_WRITE_ONLY ? "WriteOnly" : "ReadWrite");
            a->constant = true;
        }
        if (output) { /* Kernel Tuner's marker of an output: it must agree with AccessType */
            snprintf(fp, sizeof fp, "%s.Output", path);
            bool is_out;
            if (json_is_boolean(output)) is_out = json_is_true(output);
            else if (json_is_integer(output) && (json_integer_value(output) == 0 || json_integer_value(output) == 1))
                is_out = json_integer_value(output) == 1;
            else return fail(c, fp, "expected 0, 1 or a boolean, got %s", kind_of(output));
            if (is_out != (a->access != KT_READ_ONLY))
                return fail(c, fp, "%s, but AccessType is %s: kerntune validates the outputs AccessType names (WriteOnly or ReadWrite)",
                            is_out ? "marks an output" : "marks an input", access ? access : "ReadOnly (the default)");
        }
        /* kerntune's extension: how an output is compared with the reference's (kt_op_set_compare) */
        json_t *x = member(c, v, path, "x-kerntune", JSON_OBJECT, false, "an object with Compare");
        if (c->failed) return false;
        if (x) {
            static const char *const known_x[] = {"Compare", NULL};
            snprintf(fp, sizeof fp, "%s.x-kerntune", path);
            if (!known_fields(c, x, fp, known_x)) return false;
            const char *how = str_member(c, x, fp, "Compare", false, "a string (Elements or Sum)");
            if (c->failed) return false;
            char cp[160];
            snprintf(cp, sizeof cp, "%s.Compare", fp);
            if (how && strcmp(how, "Sum") != 0 && strcmp(how, "Elements") != 0)
                return fail(c, cp, "'%s' is not one of Elements, Sum", how);
            a->compare_sum = how && strcmp(how, "Sum") == 0;
            if (a->compare_sum && (!a->vector || a->access == KT_READ_ONLY))
                return fail(c, cp, "Sum on %s: only an output (a WriteOnly or ReadWrite Vector) is compared",
                            a->vector ? "a ReadOnly argument" : "a Scalar");
        }
        json_t *fv = NULL;
        if (!read_fill(c, v, path, &a->fill, &fv, &a->data_source, &a->has_seed, &a->seed)) return false;
        json_t *value = member(c, v, path, "Value", JSON_REAL, false, "a number");
        if (c->failed) return false;
        snprintf(fp, sizeof fp, "%s.FillValue", path);
        if (value) { /* kerntune's extension: a scalar's value */
            snprintf(fp, sizeof fp, "%s.Value", path);
            if (a->vector) return fail(c, fp, "gives a Scalar's value; a Vector is filled as FillType says");
            bool same = fv == NULL || (json_is_integer(fv) && json_is_integer(value) ? json_integer_value(fv) == json_integer_value(value)
                                                                                      : json_number_value(fv) == json_number_value(value));
            if (!same) {
                char a_text[64], b_text[64]; /* numbers: always fit */
                t4_value_text(value, a_text, sizeof a_text);
                t4_value_text(fv, b_text, sizeof b_text);
                return fail(c, fp, "%s differs from FillValue %s", a_text, b_text);
            }
            fv = value;
        }
        if (!a->vector && a->fill != T1_FILL_CONSTANT) {
            char ft[128];
            snprintf(ft, sizeof ft, "%s.FillType", path);
            return fail(c, ft, "a Scalar takes FillValue (FillType Constant)");
        }
        if (!fill_value(c, fp, fv, a->type, type, a->fill, &a->fill_value, &a->fill_bits)) return false;
        json_t *size = json_object_get(v, "Size");
        snprintf(fp, sizeof fp, "%s.Size", path);
        if (a->vector) {
            if (size == NULL) return fail(c, fp, "missing; expected an integer or an expression string");
            if (json_is_integer(size)) a->size = json_integer_value(size);
            else if (json_is_string(size)) a->size_expr = json_string_value(size);
            else return fail(c, fp, "expected an integer or an expression string, got %s", kind_of(size));
            if (a->size_expr == NULL && a->size < 1) return fail(c, fp, "%lld elements; expected at least 1", (long long)a->size);
        } else if (size && !(json_is_integer(size) && json_integer_value(size) == 1)) {
            return fail(c, fp, "a Scalar is one element; expected 1 or no Size");
        }
    }
    return true;
}

static bool read_refs(ctx *c, t1 *p, json_t *ks) {
    static const char *const known[] = {"Name", "TargetName", "FillType", "FillValue", "DataSource", "RandomSeed",
                                        "ValidationMethod", "ValidationThreshold", NULL};
    json_t *refs = member(c, ks, "KernelSpecification", "ReferenceArguments", JSON_ARRAY, false, "an array");
    if (c->failed) return false;
    p->refs = calloc(json_array_size(refs) + 1, sizeof *p->refs);
    if (p->refs == NULL) return fail(c, "KernelSpecification.ReferenceArguments", "out of memory");
    const char *method_seen = NULL;
    double threshold_seen = 0;
    size_t i;
    json_t *v;
    json_array_foreach(refs, i, v) {
        char path[96], tp[128];
        snprintf(path, sizeof path, "KernelSpecification.ReferenceArguments[%zu]", i);
        if (!json_is_object(v)) return fail(c, path, "expected an object, got %s", kind_of(v));
        if (!known_fields(c, v, path, known)) return false;
        t1_reference *r = &p->refs[p->nrefs++];
        str_member(c, v, path, "Name", false, "a string");
        r->target = str_member(c, v, path, "TargetName", true, "a string (the argument it gives the expected contents of)");
        const char *method = str_member(c, v, path, "ValidationMethod", false,
                                        "a string (SideBySideComparison or SideBySideRelativeComparison)");
        json_t *threshold = member(c, v, path, "ValidationThreshold", JSON_REAL, false, "a number");
        json_t *fv = NULL;
        if (c->failed || !read_fill(c, v, path, &r->fill, &fv, &r->data_source, &r->has_seed, &r->seed)) return false;
        size_t a = 0;
        while (a < p->nargs && strcmp(p->args[a].name, r->target) != 0) a++;
        if (a == p->nargs) {
            snprintf(tp, sizeof tp, "%s.TargetName", path);
            return fail(c, tp, "'%s' names no argument", r->target);
        }
        snprintf(tp, sizeof tp, "%s.FillValue", path);
        if (!fill_value(c, tp, fv, p->args[a].type, p->args[a].type_name, r->fill, &r->fill_value, &r->fill_bits)) return false;
        if (p->args[a].access == KT_READ_ONLY) {
            snprintf(tp, sizeof tp, "%s.TargetName", path);
            return fail(c, tp, "'%s' is ReadOnly: only an output (WriteOnly or ReadWrite) has expected contents", r->target);
        }
        for (size_t k = 0; k + 1 < p->nrefs; k++)
            if (strcmp(p->refs[k].target, r->target) == 0) {
                snprintf(tp, sizeof tp, "%s.TargetName", path);
                return fail(c, tp, "'%s' already has expected contents (ReferenceArguments[%zu])", r->target, k);
            }
        /* kerntune compares every element within atol + rtol * |expected|: the side-by-side
         * methods are that with one of the two; any other method (a sum of differences) is
         * refused below */
        if (threshold && method == NULL) {
            snprintf(tp, sizeof tp, "%s.ValidationThreshold", path);
            return fail(c, tp, "needs ValidationMethod (SideBySideComparison or SideBySideRelativeComparison)");
        }
        if (method) {
            snprintf(tp, sizeof tp, "%s.ValidationMethod", path);
            if (strcmp(method, "SideBySideComparison") != 0 && strcmp(method, "SideBySideRelativeComparison") != 0)
                return fail(c, tp, "'%s' is not supported; expected SideBySideComparison or SideBySideRelativeComparison", method);
            if (threshold == NULL) return fail(c, tp, "needs ValidationThreshold");
            double t = json_number_value(threshold);
            if (!(t >= 0) || !isfinite(t)) {
                snprintf(tp, sizeof tp, "%s.ValidationThreshold", path);
                return fail(c, tp, "%g; expected a number >= 0", t);
            }
            if (method_seen && (strcmp(method_seen, method) != 0 || threshold_seen != t))
                return fail(c, tp, "kerntune validates every output with one method and threshold; ReferenceArguments give two");
            method_seen = method;
            threshold_seen = t;
            bool relative = strcmp(method, "SideBySideRelativeComparison") == 0;
            p->atol = relative ? 0 : t;
            p->rtol = relative ? t : 0;
        }
    }
    return true;
}

static bool read_budget(ctx *c, t1 *p) {
    json_t *budget = json_object_get(p->root, "Budget");
    if (budget == NULL) return true;
    if (!json_is_array(budget)) return fail(c, "Budget", "expected an array, got %s", kind_of(budget));
    static const char *const known[] = {"Type", "BudgetValue", NULL};
    size_t i;
    json_t *v;
    json_array_foreach(budget, i, v) {
        char path[64];
        snprintf(path, sizeof path, "Budget[%zu]", i);
        if (!json_is_object(v)) return fail(c, path, "expected an object, got %s", kind_of(v));
        if (!known_fields(c, v, path, known)) return false;
        const char *type = str_member(c, v, path, "Type", true, "a string");
        json_t *value = member(c, v, path, "BudgetValue", JSON_REAL, true, "a number");
        if (c->failed) return false;
        double x = json_number_value(value);
        char tp[96];
        snprintf(tp, sizeof tp, "%s.BudgetValue", path);
        if (!(x > 0) || !isfinite(x)) return fail(c, tp, "%g; expected a number above 0", x);
        for (size_t k = 0; k < i; k++) /* Kernel Tuner reads Budget[0] only: two of a kind would leave one unread */
            if (strcmp(json_string_value(json_object_get(json_array_get(budget, k), "Type")), type) == 0) {
                snprintf(tp, sizeof tp, "%s.Type", path);
                return fail(c, tp, "a second %s (Budget[%zu] is one): give each kind of budget once", type, k);
            }
        if (strcmp(type, "TuningDuration") == 0) p->budget_seconds = x;
        else if (strcmp(type, "ConfigurationCount") == 0) {
            if (x != floor(x)) return fail(c, tp, "%g; expected a whole number of configurations", x);
            if (x > 1e15) return fail(c, tp, "%g configurations is out of range: at most 1000000000000000", x);
            p->budget_count = (int64_t)x;
        } else if (strcmp(type, "ConfigurationFraction") == 0) {
            if (x > 1) return fail(c, tp, "%g; expected a fraction of the space, at most 1", x);
            p->budget_fraction = x;
        } else {
            snprintf(tp, sizeof tp, "%s.Type", path);
            return fail(c, tp, "'%s' is not one of TuningDuration, ConfigurationCount, ConfigurationFraction", type);
        }
    }
    return true;
}

static bool read_general(ctx *c, t1 *p, json_t *general) {
    /* descriptive fields, and TimeUnit, which kerntune's T4 output follows */
    static const char *const known[] = {"BenchmarkName", "OutputFormat", "OutputFile", "FormatVersion", "LoggingLevel",
                                        "TimeUnit", NULL};
    if (!known_fields(c, general, "General", known)) return false;
    str_member(c, general, "General", "BenchmarkName", false, "a string");
    const char *format = str_member(c, general, "General", "OutputFormat", false, "a string (JSON or XML)");
    str_member(c, general, "General", "OutputFile", false, "a string");
    member(c, general, "General", "FormatVersion", JSON_INTEGER, false, "an integer");
    str_member(c, general, "General", "LoggingLevel", false, "a string");
    const char *unit = str_member(c, general, "General", "TimeUnit", false, "a string (Nanoseconds, Microseconds, Milliseconds or Seconds)");
    if (c->failed) return false;
    if (format && strcmp(format, "JSON") != 0 && strcmp(format, "XML") != 0)
        return fail(c, "General.OutputFormat", "'%s' is not one of JSON, XML", format);
    if (unit) {
        static const struct {
            const char *t1, *t4;
            double per_ms;
        } units[] = {{"Nanoseconds", "nanoseconds", 1e6}, {"Microseconds", "microseconds", 1e3},
                     {"Milliseconds", "milliseconds", 1}, {"Seconds", "seconds", 1e-3}};
        size_t k = 0;
        while (k < 4 && strcmp(units[k].t1, unit) != 0) k++;
        if (k == 4) return fail(c, "General.TimeUnit", "'%s' is not one of Nanoseconds, Microseconds, Milliseconds, Seconds", unit);
        p->time_unit = units[k].t4;
        p->time_scale = units[k].per_ms;
    }
    return true;
}

static bool read_device(ctx *c, t1 *p, json_t *ks) {
    json_t *dev = member(c, ks, "KernelSpecification", "Device", JSON_OBJECT, false, "an object with Id or Name");
    if (dev == NULL) return !c->failed;
    static const char *const known[] = {"Id", "DeviceId", "Name", NULL};
    const char *path = "KernelSpecification.Device";
    if (json_object_get(dev, "PlatformId"))
        return fail(c, "KernelSpecification.Device.PlatformId",
                    "kerntune numbers a backend's devices across platforms: give Device.Id (see 'kerntune devices') or --device");
    if (!known_fields(c, dev, path, known)) return false;
    json_t *id = member(c, dev, path, "Id", JSON_INTEGER, false, "an integer");
    json_t *did = member(c, dev, path, "DeviceId", JSON_INTEGER, false, "an integer");
    p->device_name = str_member(c, dev, path, "Name", false, "a string");
    if (c->failed) return false;
    if (id && did && json_integer_value(id) != json_integer_value(did))
        return fail(c, "KernelSpecification.Device.DeviceId", "%lld differs from Id %lld", (long long)json_integer_value(did),
                    (long long)json_integer_value(id));
    json_t *n = id ? id : did;
    if (n) {
        if (json_integer_value(n) < 0 || json_integer_value(n) > INT_MAX)
            return fail(c, id ? "KernelSpecification.Device.Id" : "KernelSpecification.Device.DeviceId", "%lld; expected a device number >= 0",
                        (long long)json_integer_value(n));
        p->device_id = (int)json_integer_value(n);
    }
    return true;
}

static bool read_search(ctx *c, t1 *p) {
    json_t *search = member(c, p->root, "", "Search", JSON_OBJECT, false, "an object with Name");
    if (search == NULL) return !c->failed;
    static const char *const known[] = {"Name", "Attributes", NULL};
    if (!known_fields(c, search, "Search", known)) return false;
    p->search = str_member(c, search, "Search", "Name", true, "a string");
    json_t *attrs = member(c, search, "Search", "Attributes", JSON_ARRAY, false, "an array");
    p->search_attributes = json_array_size(attrs) > 0;
    return !c->failed;
}

static bool read_kernel_spec(ctx *c, t1 *p, json_t *ks) {
    static const char *const known_ks[] = {"Language", "CompilerOptions", "BenchmarkName", "KernelName", "KernelFile",
                                           "GlobalSizeType", "LocalSize", "GlobalSize", "GridDivX", "GridDivY", "GridDivZ",
                                           "ProblemSize", "SharedMemory", "Stream", "Arguments", "ReferenceArguments",
                                           "Device", "Profiling", "x-kerntune", "Misc", NULL};
    if (json_object_get(ks, "SimulationInput"))
        return fail(c, "KernelSpecification.SimulationInput", "kerntune replays recorded data given with --simulate FILE only");
    if (!known_fields(c, ks, "KernelSpecification", known_ks)) return false;
    const char *K = "KernelSpecification";
    /* kerntune's extension (other tools ignore it): the work of one call, for GFLOP/s and GB/s */
    json_t *x = member(c, ks, K, "x-kerntune", JSON_OBJECT, false, "an object with Flops and Bytes");
    if (c->failed) return false;
    if (x) {
        static const char *const known_x[] = {"Flops", "Bytes", NULL};
        if (!known_fields(c, x, "KernelSpecification.x-kerntune", known_x)) return false;
        p->work_flops = str_member(c, x, "KernelSpecification.x-kerntune", "Flops", false, "an expression (a string)");
        p->work_bytes = str_member(c, x, "KernelSpecification.x-kerntune", "Bytes", false, "an expression (a string)");
        if (c->failed) return false;
    }
    p->language = str_member(c, ks, K, "Language", true, "a string (C, OpenCL or CUDA)");
    p->kernel_name = str_member(c, ks, K, "KernelName", true, "a string");
    const char *file = str_member(c, ks, K, "KernelFile", true, "a string (the kernel source's path)");
    str_member(c, ks, K, "BenchmarkName", false, "a string");
    if (c->failed) return false;
    if (strcmp(p->language, "Hypertuner") == 0) /* Kernel Tuner 1.5 reads it, into a backend of its own */
        return fail(c, "KernelSpecification.Language",
                    "'Hypertuner' is Kernel Tuner tuning its own search strategies' settings (its hypertuner backend, "
                    "with the autotuning_methodology package), not a kernel; kerntune tunes C, OpenCL or CUDA kernels");
    if (strcmp(p->language, "C") != 0 && strcmp(p->language, "OpenCL") != 0 && strcmp(p->language, "CUDA") != 0)
        return fail(c, "KernelSpecification.Language", "'%s' is not supported; expected C, OpenCL or CUDA", p->language);
    p->kernel_file = file[0] == '/' ? cli_format("%s", file) : cli_format("%s/%s", p->dir, file);
    if (p->kernel_file == NULL) return fail(c, "KernelSpecification.KernelFile", "out of memory");
    json_t *opts = member(c, ks, K, "CompilerOptions", JSON_ARRAY, false, "an array of strings");
    if (c->failed) return false;
    p->options = calloc(json_array_size(opts) + 1, sizeof *p->options);
    if (p->options == NULL) return fail(c, "KernelSpecification.CompilerOptions", "out of memory");
    size_t i;
    json_t *v;
    json_array_foreach(opts, i, v) {
        if (!json_is_string(v)) {
            char op[96];
            snprintf(op, sizeof op, "KernelSpecification.CompilerOptions[%zu]", i);
            return fail(c, op, "expected a string, got %s", kind_of(v));
        }
        p->options[p->noptions++] = json_string_value(v);
    }
    /* an array of sizes, or one integer: one dimension, as Kernel Tuner reads it */
    json_t *ps = json_object_get(ks, "ProblemSize");
    if (ps && !json_is_array(ps) && !json_is_integer(ps))
        return fail(c, "KernelSpecification.ProblemSize", "expected an array of integers (or one integer), got %s", kind_of(ps));
    size_t nps = json_is_integer(ps) ? 1 : json_array_size(ps);
    for (i = 0; i < nps; i++) {
        v = json_is_integer(ps) ? ps : json_array_get(ps, i);
        char pp[96];
        if (json_is_integer(ps)) snprintf(pp, sizeof pp, "KernelSpecification.ProblemSize");
        else snprintf(pp, sizeof pp, "KernelSpecification.ProblemSize[%zu]", i);
        if (i >= 8) return fail(c, pp, "at most 8 dimensions");
        if (!json_is_integer(v)) return fail(c, pp, "expected an integer, got %s", kind_of(v));
        if (json_integer_value(v) < 1) return fail(c, pp, "%lld; expected a size of at least 1", (long long)json_integer_value(v));
        p->problem_size[p->nproblem++] = json_integer_value(v);
    }
    /* geometry: LocalSize; GridDiv (Kernel Tuner's grid from ProblemSize) or GlobalSize */
    json_t *local = member(c, ks, K, "LocalSize", JSON_OBJECT, true, "an object with X, Y, Z");
    json_t *global = member(c, ks, K, "GlobalSize", JSON_OBJECT, false, "an object with X, Y, Z");
    if (c->failed || !read_sizes(c, local, "LocalSize", p->local) || !read_grid_div(c, p, ks)) return false;
    if (global && !read_sizes(c, global, "GlobalSize", p->global)) return false;
    const char *gtype = str_member(c, ks, K, "GlobalSizeType", false, "a string (OpenCL or CUDA)");
    if (c->failed) return false;
    p->geometry = strcmp(p->language, "CUDA") == 0 ? KT_GEOMETRY_GRID : KT_GEOMETRY_GLOBAL;
    if (gtype && strcmp(gtype, "CUDA") == 0) p->geometry = KT_GEOMETRY_GRID;
    else if (gtype && strcmp(gtype, "OpenCL") == 0) p->geometry = KT_GEOMETRY_GLOBAL;
    else if (gtype) return fail(c, "KernelSpecification.GlobalSizeType", "'%s' is not one of OpenCL, CUDA", gtype);
    if (global == NULL && !p->grid_div) {
        if (p->nproblem == 0)
            return fail(c, "KernelSpecification.GlobalSize", "missing; expected an object with X, Y, Z (or ProblemSize, from which the grid is computed)");
        p->grid_div = true; /* no GlobalSize: Kernel Tuner's grid, each dimension divided by its LocalSize */
    }
    if (p->grid_div) {
        if (p->nproblem == 0) {
            const char *which = p->ndiv[0] ? "GridDivX" : p->ndiv[1] ? "GridDivY" : "GridDivZ";
            char gp[64];
            snprintf(gp, sizeof gp, "KernelSpecification.%s", which);
            return fail(c, gp, "divides ProblemSize, which the problem does not give");
        }
        p->geometry = KT_GEOMETRY_GRID; /* a grid of blocks, for CUDA and OpenCL alike (OpenCL: times LocalSize) */
        for (int d = 0; d < 3; d++) {
            free(p->global[d]);
            p->global[d] = NULL;
        }
    }
    json_t *shm = member(c, ks, K, "SharedMemory", JSON_INTEGER, false, "an integer (bytes)");
    if (c->failed) return false;
    p->shared_memory = shm ? json_integer_value(shm) : 0;
    if (p->shared_memory < 0) return fail(c, "KernelSpecification.SharedMemory", "%lld; expected bytes >= 0", (long long)p->shared_memory);
    if (p->shared_memory > 0 && strcmp(p->language, "CUDA") != 0)
        return fail(c, "KernelSpecification.SharedMemory",
                    "%lld bytes of dynamic shared memory: only CUDA kernels are launched with it (an %s kernel declares its own)",
                    (long long)p->shared_memory, strcmp(p->language, "OpenCL") == 0 ? "OpenCL" : "C");
    json_t *stream = json_object_get(ks, "Stream");
    if (stream && !json_is_null(stream))
        return fail(c, "KernelSpecification.Stream", "kerntune runs every configuration on its own stream; expected null, got %s", kind_of(stream));
    json_t *prof = member(c, ks, K, "Profiling", JSON_TRUE, false, "a boolean");
    if (c->failed) return false;
    if (prof && json_is_true(prof))
        return fail(c, "KernelSpecification.Profiling", "true: kerntune does not collect profiling counters; expected false");
    return read_device(c, p, ks) && read_args(c, p, ks) && read_refs(c, p, ks);
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
    if ((p->ignored = calloc(n + 1, sizeof *p->ignored)) == NULL) return fail(c, "(top level)", "out of memory");
    for (size_t m = 0; m < sizeof metadata / sizeof metadata[0]; m++) {
        json_t *obj = *metadata[m].object ? ks : p->root;
        if (json_object_get(obj, metadata[m].key) == NULL) continue;
        char *path = cli_format("%s%s%s", metadata[m].object, *metadata[m].object ? "." : "", metadata[m].key);
        if (path == NULL) return fail(c, "(top level)", "out of memory");
        p->ignored[p->nignored++] = path;
    }
    p->nmetadata = p->nignored;
    for (size_t i = 0; i < p->nparams; i++) {
        if (p->params[i].dflt_unused == NULL) continue;
        char *path = cli_format("ConfigurationSpace.TuningParameters[%zu].Default", i);
        if (path == NULL) return fail(c, "(top level)", "out of memory");
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

bool t1_load(const char *path, t1 *p, char **err) {
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
    if (!json_is_object(p->root)) return fail(&c, "(top level)", "expected an object, got %s", kind_of(p->root));
    p->path = cli_format("%s", path);
    char *abs = realpath(path, NULL); /* absolute: messages give resolved paths */
    p->dir = abs ? abs : cli_format("%s", path);
    if (p->path == NULL || p->dir == NULL) return fail(&c, "(top level)", "out of memory");
    char *slash = strrchr(p->dir, '/');
    if (slash == p->dir) slash[1] = '\0';
    else if (slash) *slash = '\0';
    else strcpy(p->dir, "."); /* "." fits: the path had at least one character */
    static const char *const known_top[] = {"General", "ConfigurationSpace", "KernelSpecification", "Budget", "Search",
                                            "BenchmarkConfig", NULL};
    if (!known_fields(&c, p->root, "", known_top)) return false;
    json_t *general = member(&c, p->root, "", "General", JSON_OBJECT, false, "an object");
    json_t *cs = member(&c, p->root, "", "ConfigurationSpace", JSON_OBJECT, true, "an object");
    json_t *ks = member(&c, p->root, "", "KernelSpecification", JSON_OBJECT, true, "an object");
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
