/*
 * t1_kernel.c - a T1 problem's KernelSpecification.Arguments and ReferenceArguments: each
 * argument's type, kind (Scalar or Vector), access, constant memory, Kernel Tuner's Output
 * marker, how it is filled (FillType, FillValue, DataSource, RandomSeed) and its size; each
 * reference argument's target and fill. Errors carry the JSON path of the field at fault.
 */
#define _DEFAULT_SOURCE
#include "t1_int.h"
#include "t4.h"

#include <kerntune/variants.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reads FillType, DataSource and RandomSeed, and FillValue as JSON (*value: NULL when absent),
 * checked by fill_value once the element type is known. */
static bool read_fill(ctx *c, json_t *obj, const char *path, t1_fill *fill, json_t **value, const char **source,
                      bool *has_seed, int64_t *seed) {
    const char *f = t1_str_member(c, obj, path, "FillType", false, "a string (Constant, Random or BinaryRaw)");
    json_t *fv = t1_member(c, obj, path, "FillValue", JSON_REAL, false, "a number");
    json_t *sd = t1_member(c, obj, path, "RandomSeed", JSON_INTEGER, false, "an integer");
    const char *ds = t1_str_member(c, obj, path, "DataSource", false, "a string (the file of raw elements)");
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
        return t1_fail(c, p, "'%s' is not supported; expected Constant, Random or BinaryRaw", f);
    }
    if (*fill == T1_FILL_BINARY) {
        *source = ds;
        if (ds == NULL) return t1_fail(c, path, "FillType BinaryRaw needs DataSource (the file of raw elements)");
        if (fv) {
            snprintf(p, sizeof p, "%s.FillValue", path);
            return t1_fail(c, p, "has no meaning with FillType BinaryRaw (the data comes from DataSource)");
        }
    } else if (ds != NULL) {
        snprintf(p, sizeof p, "%s.DataSource", path);
        return t1_fail(c, p, "is read only with FillType BinaryRaw");
    }
    if (sd && *fill != T1_FILL_RANDOM) {
        snprintf(p, sizeof p, "%s.RandomSeed", path);
        return t1_fail(c, p, "is used only with FillType Random");
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
        return t1_fail(c, path, "%s: the bound of Random values (from 0 up to it); expected a number above 0", text);
    double lo, hi;
    const char *range;
    if (!int_range(type, strcmp(type_name, "bool") == 0, &lo, &hi, &range)) return true;
    if (fill == T1_FILL_RANDOM) {
        if (*value > hi)
            return t1_fail(c, path, "%s: Random values go from 0 up to it, and %s %s holds at most %.0f", text, an, type_name, hi - 1);
        return true;
    }
    if (json_is_integer(fv)) { /* exactly, even where a double is not */
        json_int_t i = json_integer_value(fv);
        bool in = type == KT_TYPE_I64 || (type == KT_TYPE_U64 ? i >= 0 : (double)i >= lo && (double)i < hi);
        if (!in)
            return t1_fail(c, path, "%s is out of range: %s %s holds whole numbers from %s", text, an, type_name, range);
        *bits = (uint64_t)i;
        return true;
    }
    if (*value != floor(*value))
        return t1_fail(c, path, "%s is not a whole number: %s %s holds whole numbers from %s", text, an, type_name, range);
    if (*value < lo || *value >= hi)
        return t1_fail(c, path, "%s is out of range: %s %s holds whole numbers from %s", text, an, type_name, range);
    *bits = *value < 0 ? (uint64_t)(int64_t)*value : (uint64_t)*value;
    return true;
}

/* Arguments[i]'s access: AccessType, MemType Constant and Kernel Tuner's Output marker, which
 * must agree. */
static bool read_access(ctx *c, t1_arg *a, const char *path, const char *access, const char *memtype, json_t *output) {
    char fp[128];
    a->access = KT_READ_ONLY;
    if (access && strcmp(access, "WriteOnly") == 0) a->access = KT_WRITE_ONLY;
    else if (access && strcmp(access, "ReadWrite") == 0) a->access = KT_READ_WRITE;
    else if (access && strcmp(access, "ReadOnly") != 0) {
        snprintf(fp, sizeof fp, "%s.AccessType", path);
        return t1_fail(c, fp, "'%s' is not one of ReadOnly, WriteOnly, ReadWrite", access);
    }
    if (!a->vector && a->access != KT_READ_ONLY) {
        snprintf(fp, sizeof fp, "%s.AccessType", path);
        return t1_fail(c, fp, "'%s' on a Scalar: a scalar is passed by value and cannot be written", access);
    }
    if (memtype) {
        snprintf(fp, sizeof fp, "%s.MemType", path);
        if (strcmp(memtype, "Constant") != 0)
            return t1_fail(c, fp, "'%s' is not supported; expected Constant (constant memory)", memtype);
        if (!a->vector) return t1_fail(c, fp, "Constant on a Scalar: only a Vector can be placed in constant memory");
        if (a->access != KT_READ_ONLY)
            return t1_fail(c, fp, "Constant on a %s argument: constant memory is read-only; expected AccessType ReadOnly",
                        a->access == KT_WRITE_ONLY ? "WriteOnly" : "ReadWrite");
        a->constant = true;
    }
    if (output) { /* Kernel Tuner's marker of an output: it must agree with AccessType */
        snprintf(fp, sizeof fp, "%s.Output", path);
        bool is_out;
        if (json_is_boolean(output)) is_out = json_is_true(output);
        else if (json_is_integer(output) && (json_integer_value(output) == 0 || json_integer_value(output) == 1))
            is_out = json_integer_value(output) == 1;
        else return t1_fail(c, fp, "expected 0, 1 or a boolean, got %s", t1_kind_of(output));
        if (is_out != (a->access != KT_READ_ONLY))
            return t1_fail(c, fp, "%s, but AccessType is %s: kerntune validates the outputs AccessType names (WriteOnly or ReadWrite)",
                        is_out ? "marks an output" : "marks an input", access ? access : "ReadOnly (the default)");
    }
    return true;
}

/* Arguments[i]'s x-kerntune extension: how an output is compared with the reference's. */
static bool read_compare(ctx *c, t1_arg *a, json_t *v, const char *path) {
    char fp[128];
    /* (kt_op_set_compare) */
    json_t *x = t1_member(c, v, path, "x-kerntune", JSON_OBJECT, false, "an object with Compare");
    if (c->failed) return false;
    if (x) {
        static const char *const known_x[] = {"Compare", NULL};
        snprintf(fp, sizeof fp, "%s.x-kerntune", path);
        if (!t1_known_fields(c, x, fp, known_x)) return false;
        const char *how = t1_str_member(c, x, fp, "Compare", false, "a string (Elements or Sum)");
        if (c->failed) return false;
        char cp[160];
        snprintf(cp, sizeof cp, "%s.Compare", fp);
        if (how && strcmp(how, "Sum") != 0 && strcmp(how, "Elements") != 0)
            return t1_fail(c, cp, "'%s' is not one of Elements, Sum", how);
        a->compare_sum = how && strcmp(how, "Sum") == 0;
        if (a->compare_sum && (!a->vector || a->access == KT_READ_ONLY))
            return t1_fail(c, cp, "Sum on %s: only an output (a WriteOnly or ReadWrite Vector) is compared",
                        a->vector ? "a ReadOnly argument" : "a Scalar");
    }
    return true;
}

/* Arguments[i]'s data: its fill, a scalar's Value and a vector's Size. */
static bool read_data(ctx *c, t1_arg *a, json_t *v, const char *path, const char *type) {
    char fp[128];
    json_t *fv = NULL;
    if (!read_fill(c, v, path, &a->fill, &fv, &a->data_source, &a->has_seed, &a->seed)) return false;
    json_t *value = t1_member(c, v, path, "Value", JSON_REAL, false, "a number");
    if (c->failed) return false;
    snprintf(fp, sizeof fp, "%s.FillValue", path);
    if (value) { /* kerntune's extension: a scalar's value */
        snprintf(fp, sizeof fp, "%s.Value", path);
        if (a->vector) return t1_fail(c, fp, "gives a Scalar's value; a Vector is filled as FillType says");
        bool same = fv == NULL || (json_is_integer(fv) && json_is_integer(value) ? json_integer_value(fv) == json_integer_value(value)
                                                                                  : json_number_value(fv) == json_number_value(value));
        if (!same) {
            char a_text[64], b_text[64]; /* numbers: always fit */
            t4_value_text(value, a_text, sizeof a_text);
            t4_value_text(fv, b_text, sizeof b_text);
            return t1_fail(c, fp, "%s differs from FillValue %s", a_text, b_text);
        }
        fv = value;
    }
    if (!a->vector && a->fill != T1_FILL_CONSTANT) {
        char ft[128];
        snprintf(ft, sizeof ft, "%s.FillType", path);
        return t1_fail(c, ft, "a Scalar takes FillValue (FillType Constant)");
    }
    if (!fill_value(c, fp, fv, a->type, type, a->fill, &a->fill_value, &a->fill_bits)) return false;
    json_t *size = json_object_get(v, "Size");
    snprintf(fp, sizeof fp, "%s.Size", path);
    if (a->vector) {
        if (size == NULL) return t1_fail(c, fp, "missing; expected an integer or an expression string");
        if (json_is_integer(size)) a->size = json_integer_value(size);
        else if (json_is_string(size)) a->size_expr = json_string_value(size);
        else return t1_fail(c, fp, "expected an integer or an expression string, got %s", t1_kind_of(size));
        if (a->size_expr == NULL && a->size < 1) return t1_fail(c, fp, "%lld elements; expected at least 1", (long long)a->size);
    } else if (size && !(json_is_integer(size) && json_integer_value(size) == 1)) {
        return t1_fail(c, fp, "a Scalar is one element; expected 1 or no Size");
    }
    return true;
}

/* Arguments[i], v, into p's next argument: its name, type, kind, access and data. */
static bool read_arg(ctx *c, t1 *p, json_t *v, size_t i) {
    static const char *const known[] = {"Name", "Type", "MemoryType", "AccessType", "Size", "FillType", "FillValue",
                                        "DataSource", "RandomSeed", "Output", "MemType", "TypeSize", "Value", "x-kerntune", NULL};
    char path[96];
    snprintf(path, sizeof path, "KernelSpecification.Arguments[%zu]", i);
    if (!json_is_object(v)) return t1_fail(c, path, "expected an object, got %s", t1_kind_of(v));
    if (!t1_known_fields(c, v, path, known)) return false;
    t1_arg *a = &p->args[p->nargs++];
    a->name = t1_str_member(c, v, path, "Name", false, "a string");
    const char *type = t1_str_member(c, v, path, "Type", true, "a string (float, double, int32, ...)");
    const char *mem = t1_str_member(c, v, path, "MemoryType", true, "a string (Scalar or Vector)");
    const char *access = t1_str_member(c, v, path, "AccessType", false, "a string (ReadOnly, WriteOnly or ReadWrite)");
    const char *memtype = t1_str_member(c, v, path, "MemType", false, "a string (Constant)");
    json_t *output = t1_member(c, v, path, "Output", -1, false, "");
    json_t *type_size = t1_member(c, v, path, "TypeSize", JSON_INTEGER, false, "an integer (bytes)");
    if (c->failed) return false;
    char fp[128];
    if ((a->type = t1_type(type)) == 0) {
        snprintf(fp, sizeof fp, "%s.Type", path);
        return t1_fail(c, fp, "'%s' is not supported; expected bool, int8..int64, uint8..uint64, half, float or double", type);
    }
    if (type_size && json_integer_value(type_size) != (json_int_t)kt_type_size(a->type)) {
        snprintf(fp, sizeof fp, "%s.TypeSize", path);
        return t1_fail(c, fp, "%lld bytes, but a %s is %zu bytes", (long long)json_integer_value(type_size), type,
                    kt_type_size(a->type));
    }
    if (strcmp(mem, "Vector") == 0) a->vector = true;
    else if (strcmp(mem, "Scalar") != 0) {
        snprintf(fp, sizeof fp, "%s.MemoryType", path);
        return t1_fail(c, fp, "'%s' is not supported; expected Scalar or Vector", mem);
    }
    a->type_name = type;
    if (!a->vector && (a->type == KT_TYPE_F16 || a->type == KT_TYPE_BF16)) {
        snprintf(fp, sizeof fp, "%s.Type", path);
        return t1_fail(c, fp, "'%s' on a Scalar: kerntune passes scalars of the integer types, float and double only; "
                    "give a half as a Vector of Size 1", type);
    }
    if (a->name == NULL) {
        snprintf(a->auto_name, sizeof a->auto_name, "arg%zu", i);
        a->name = a->auto_name;
    }
    for (size_t k = 0; k + 1 < p->nargs; k++) /* a ReferenceArguments' TargetName must name one argument */
        if (strcmp(p->args[k].name, a->name) == 0) {
            snprintf(fp, sizeof fp, "%s.Name", path);
            return t1_fail(c, fp, "'%s' is already the name of Arguments[%zu]%s", a->name, k,
                        p->args[k].name == p->args[k].auto_name ? " (the name kerntune gives an argument without one)" : "");
        }
    return read_access(c, a, path, access, memtype, output) && read_compare(c, a, v, path) && read_data(c, a, v, path, type);
}

bool t1_read_args(ctx *c, t1 *p, json_t *ks) {
    json_t *args = t1_member(c, ks, "KernelSpecification", "Arguments", JSON_ARRAY, true, "an array of arguments");
    if (args == NULL) return false;
    p->args = calloc(json_array_size(args) + 1, sizeof *p->args);
    if (p->args == NULL) return t1_fail(c, "KernelSpecification.Arguments", "out of memory");
    size_t i;
    json_t *v;
    json_array_foreach(args, i, v)
        if (!read_arg(c, p, v, i)) return false;
    return true;
}

bool t1_read_refs(ctx *c, t1 *p, json_t *ks) {
    static const char *const known[] = {"Name", "TargetName", "FillType", "FillValue", "DataSource", "RandomSeed",
                                        "ValidationMethod", "ValidationThreshold", NULL};
    json_t *refs = t1_member(c, ks, "KernelSpecification", "ReferenceArguments", JSON_ARRAY, false, "an array");
    if (c->failed) return false;
    p->refs = calloc(json_array_size(refs) + 1, sizeof *p->refs);
    if (p->refs == NULL) return t1_fail(c, "KernelSpecification.ReferenceArguments", "out of memory");
    const char *method_seen = NULL;
    double threshold_seen = 0;
    size_t i;
    json_t *v;
    json_array_foreach(refs, i, v) {
        char path[96], tp[128];
        snprintf(path, sizeof path, "KernelSpecification.ReferenceArguments[%zu]", i);
        if (!json_is_object(v)) return t1_fail(c, path, "expected an object, got %s", t1_kind_of(v));
        if (!t1_known_fields(c, v, path, known)) return false;
        t1_reference *r = &p->refs[p->nrefs++];
        t1_str_member(c, v, path, "Name", false, "a string");
        r->target = t1_str_member(c, v, path, "TargetName", true, "a string (the argument it gives the expected contents of)");
        const char *method = t1_str_member(c, v, path, "ValidationMethod", false,
                                        "a string (SideBySideComparison or SideBySideRelativeComparison)");
        json_t *threshold = t1_member(c, v, path, "ValidationThreshold", JSON_REAL, false, "a number");
        json_t *fv = NULL;
        if (c->failed || !read_fill(c, v, path, &r->fill, &fv, &r->data_source, &r->has_seed, &r->seed)) return false;
        size_t a = 0;
        while (a < p->nargs && strcmp(p->args[a].name, r->target) != 0) a++;
        if (a == p->nargs) {
            snprintf(tp, sizeof tp, "%s.TargetName", path);
            return t1_fail(c, tp, "'%s' names no argument", r->target);
        }
        snprintf(tp, sizeof tp, "%s.FillValue", path);
        if (!fill_value(c, tp, fv, p->args[a].type, p->args[a].type_name, r->fill, &r->fill_value, &r->fill_bits)) return false;
        if (p->args[a].access == KT_READ_ONLY) {
            snprintf(tp, sizeof tp, "%s.TargetName", path);
            return t1_fail(c, tp, "'%s' is ReadOnly: only an output (WriteOnly or ReadWrite) has expected contents", r->target);
        }
        for (size_t k = 0; k + 1 < p->nrefs; k++)
            if (strcmp(p->refs[k].target, r->target) == 0) {
                snprintf(tp, sizeof tp, "%s.TargetName", path);
                return t1_fail(c, tp, "'%s' already has expected contents (ReferenceArguments[%zu])", r->target, k);
            }
        /* kerntune compares every element within atol + rtol * |expected|: the side-by-side
         * methods are that with one of the two; any other method (a sum of differences) is
         * refused below */
        if (threshold && method == NULL) {
            snprintf(tp, sizeof tp, "%s.ValidationThreshold", path);
            return t1_fail(c, tp, "needs ValidationMethod (SideBySideComparison or SideBySideRelativeComparison)");
        }
        if (method) {
            snprintf(tp, sizeof tp, "%s.ValidationMethod", path);
            if (strcmp(method, "SideBySideComparison") != 0 && strcmp(method, "SideBySideRelativeComparison") != 0)
                return t1_fail(c, tp, "'%s' is not supported; expected SideBySideComparison or SideBySideRelativeComparison", method);
            if (threshold == NULL) return t1_fail(c, tp, "needs ValidationThreshold");
            double t = json_number_value(threshold);
            if (!(t >= 0) || !isfinite(t)) {
                snprintf(tp, sizeof tp, "%s.ValidationThreshold", path);
                return t1_fail(c, tp, "%g; expected a number >= 0", t);
            }
            if (method_seen && (strcmp(method_seen, method) != 0 || threshold_seen != t))
                return t1_fail(c, tp, "kerntune validates every output with one method and threshold; ReferenceArguments give two");
            method_seen = method;
            threshold_seen = t;
            bool relative = strcmp(method, "SideBySideRelativeComparison") == 0;
            p->atol = relative ? 0 : t;
            p->rtol = relative ? t : 0;
        }
    }
    return true;
}

/* An expression's text for a size given as a string or an integer (allocated). */
static char *size_text(ctx *c, json_t *v, const char *path) {
    char *s = json_is_string(v) ? cli_format("%s", json_string_value(v)) : cli_format("%lld", (long long)json_integer_value(v));
    if (s == NULL) t1_fail(c, path, "out of memory");
    return s;
}

/* GlobalSize or LocalSize: X, Y, Z as expression strings (or integers). */
bool t1_read_sizes(ctx *c, json_t *obj, const char *key, char *out[3]) {
    static const char *const known[] = {"X", "Y", "Z", NULL};
    char path[64];
    snprintf(path, sizeof path, "KernelSpecification.%s", key);
    if (!t1_known_fields(c, obj, path, known)) return false;
    static const char *const dims[] = {"X", "Y", "Z"};
    for (int d = 0; d < 3; d++) {
        json_t *v = json_object_get(obj, dims[d]);
        char dp[96];
        snprintf(dp, sizeof dp, "%s.%s", path, dims[d]);
        if (v == NULL) {
            if (d == 0) return t1_fail(c, dp, "missing; expected a string (an expression)");
        } else if (json_is_string(v) || json_is_integer(v)) {
            if ((out[d] = size_text(c, v, dp)) == NULL) return false;
        } else {
            return t1_fail(c, dp, "expected a string (an expression), got %s", t1_kind_of(v));
        }
    }
    return true;
}

/* GridDivX/Y/Z: a list of factors (expressions or integers), as Kernel Tuner reads them; a
 * single expression is one factor; null or an empty list is no GridDiv. */
bool t1_read_grid_div(ctx *c, t1 *p, json_t *ks) {
    static const char *const names[3] = {"GridDivX", "GridDivY", "GridDivZ"};
    for (int d = 0; d < 3; d++) {
        json_t *v = json_object_get(ks, names[d]);
        char path[64];
        snprintf(path, sizeof path, "KernelSpecification.%s", names[d]);
        if (v == NULL || json_is_null(v)) continue;
        size_t n = json_is_array(v) ? json_array_size(v) : 1;
        if (!json_is_array(v) && !json_is_string(v) && !json_is_integer(v))
            return t1_fail(c, path, "expected an array of expressions (e.g. [\"block_size_x\", \"tile_size_x\"]), got %s", t1_kind_of(v));
        if (n == 0) continue;
        if ((p->div[d] = calloc(n, sizeof *p->div[d])) == NULL) return t1_fail(c, path, "out of memory");
        for (size_t i = 0; i < n; i++) {
            json_t *f = json_is_array(v) ? json_array_get(v, i) : v;
            char fp[96];
            if (json_is_array(v)) snprintf(fp, sizeof fp, "%s[%zu]", path, i);
            else snprintf(fp, sizeof fp, "%s", path);
            if (!json_is_string(f) && !json_is_integer(f))
                return t1_fail(c, fp, "expected a string (an expression) or an integer, got %s", t1_kind_of(f));
            if ((p->div[d][i] = size_text(c, f, fp)) == NULL) return false;
            p->ndiv[d]++;
        }
        p->grid_div = true;
    }
    return true;
}
