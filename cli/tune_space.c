/*
 * tune_space.c - a T1 problem as kerntune spaces for `kerntune tune`: argument data as FillType
 * says, the reference's outputs, the space with --define values, its geometry checked, and the
 * first configuration whose launch geometry cannot be computed, named with its JSON path.
 */
#define _XOPEN_SOURCE 700 /* mkdtemp */
#define _DEFAULT_SOURCE
#include "tune_int.h"

/* ---- arguments ----------------------------------------------------------------------------- */

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The IEEE binary16 value nearest to x, ties to even: subnormals where they fall, infinity past
 * the largest half (65504; from 65520 on, the tie rounds up to infinity), a quiet NaN for NaN.
 * Rounded once, from the double itself (through float first would round twice). */
static uint16_t half_bits(double x) {
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    uint16_t sign = (uint16_t)((b >> 48) & 0x8000);
    uint64_t mag = b & 0x7fffffffffffffffull;
    if (mag >= 0x7ff0000000000000ull) return sign | (mag > 0x7ff0000000000000ull ? 0x7e00 : 0x7c00);
    int e = (int)(mag >> 52); /* the double's biased exponent: 0 only for its subnormals, far below a half's */
    if (e == 0) return sign;
    uint64_t m = (mag & 0xfffffffffffffull) | (1ull << 52); /* x = m * 2^(e - 1075) */
    int he = e - 1023 + 15; /* the half's biased exponent, when x is a normal half */
    int shift = he >= 1 ? 42 : 42 + 1 - he; /* the bits of m below the half's last one (subnormals: exponent 1) */
    if (shift > 53) return sign; /* below half the smallest subnormal: zero */
    uint64_t q = m >> shift, rem = m & ((1ull << shift) - 1), halfway = 1ull << (shift - 1);
    if (rem > halfway || (rem == halfway && (q & 1))) q++;
    if (he < 1) return sign | (uint16_t)q; /* a subnormal; q = 1024 is the smallest normal, encoded alike */
    uint64_t out = ((uint64_t)he << 10) + (q - 1024); /* q = 2048 (rounded up) carries into the exponent */
    return sign | (uint16_t)(out >= 0x7c00 ? 0x7c00 : out);
}

/* Writes one element of type t: an integer type's value from its 64-bit two's complement bits
 * (checked to fit when the problem was read), a float type's from value. */
static void put(kt_type t, void *dst, double value, uint64_t bits) {
    switch (t) {
    case KT_TYPE_I8: *(int8_t *)dst = (int8_t)(int64_t)bits; break;
    case KT_TYPE_U8: *(uint8_t *)dst = (uint8_t)bits; break;
    case KT_TYPE_I16: *(int16_t *)dst = (int16_t)(int64_t)bits; break;
    case KT_TYPE_U16: *(uint16_t *)dst = (uint16_t)bits; break;
    case KT_TYPE_I32: *(int32_t *)dst = (int32_t)(int64_t)bits; break;
    case KT_TYPE_U32: *(uint32_t *)dst = (uint32_t)bits; break;
    case KT_TYPE_I64: *(int64_t *)dst = (int64_t)bits; break;
    case KT_TYPE_U64: *(uint64_t *)dst = bits; break;
    case KT_TYPE_F64: *(double *)dst = value; break;
    case KT_TYPE_F16: {
        uint16_t h = half_bits(value);
        memcpy(dst, &h, sizeof h);
        break;
    }
    default: *(float *)dst = (float)value; break;
    }
}

/* Fills count elements of type t as fill says; *err names the argument on failure. */
bool fill_data(const t1 *p, const t1_arg *a, size_t idx, void *data, size_t count, uint64_t seed, char **err) {
    size_t es = kt_type_size(a->type);
    if (a->fill == T1_FILL_BINARY) {
        char *path = a->data_source[0] == '/' ? cli_format("%s", a->data_source) : cli_format("%s/%s", p->dir, a->data_source);
        if (path == NULL) {
            *err = cli_format("out of memory");
            return false;
        }
        char *why = NULL;
        /* exactly the argument's bytes are read: that is the limit */
        char *bytes = t1_read_file(path, "the file", 0, count * es, NULL, &why);
        free(path);
        if (bytes == NULL) {
            *err = cli_format("argument '%s' (%zu elements of %s): %s", a->name, count, a->type_name, why ? why : "out of memory");
            free(why);
            return false;
        }
        memcpy(data, bytes, count * es);
        free(bytes);
        return true;
    }
    if (a->fill == T1_FILL_CONSTANT) {
        for (size_t i = 0; i < count; i++) put(a->type, (char *)data + i * es, a->fill_value, a->fill_bits);
        return true;
    }
    /* Random: from 0 up to FillValue (above 0, and for an integer type at most one past its
     * largest value: checked when the problem was read), else up to 1 (floats), 2 (bool) or 100 */
    uint64_t state = (a->has_seed ? (uint64_t)a->seed : seed) ^ (0x9e3779b97f4a7c15ull * (idx + 1));
    bool is_float = a->type == KT_TYPE_F32 || a->type == KT_TYPE_F64 || a->type == KT_TYPE_F16;
    double scale = a->fill_value > 0 ? a->fill_value : is_float ? 1.0 : strcmp(a->type_name, "bool") == 0 ? 2.0 : 100.0;
    for (size_t i = 0; i < count; i++) {
        double u = (double)(splitmix(&state) >> 11) * 0x1p-53; /* [0, 1) */
        double v = is_float ? u * scale : floor(u * scale);
        put(a->type, (char *)data + i * es, v, is_float ? 0 : (uint64_t)v);
    }
    return true;
}

/* ---- references ---------------------------------------------------------------------------- */


int write_reference(const kt_arg *args, size_t nargs, void *user, kt_result *result) {
    (void)nargs, (void)result;
    reference *r = user;
    for (size_t i = 0; i < r->n; i++) {
        const kt_arg *a = &args[r->arg[i]];
        if (a->bytes != r->bytes[i]) return 1;
        if (r->host) memcpy(a->ptr, r->data[i], r->bytes[i]);
        else if (kt_device_write(r->ctx, r->device, a->ptr, r->data[i], r->bytes[i]) != KT_OK) return 2;
    }
    return 0;
}

/* ---- the space ------------------------------------------------------------------------------ */

bool define_matches(const char *define, const char *name) {
    size_t len = strcspn(define, "=");
    return strlen(name) == len && strncmp(name, define, len) == 0;
}

/* Whether --define NAME=VALUE gives values among parameter tp's own Values. */
bool define_in_values(const t1_param *tp, const char *define) {
    kt_space *own = NULL, *given = NULL;
    char *list = cli_format("[%s]", strchr(define, '=') + 1);
    size_t n_own = 0, n_given = 0;
    bool ok = list && kt_space_create(&own) == KT_OK && kt_space_create(&given) == KT_OK &&
              kt_space_add_param(own, tp->name, tp->values) == KT_OK && kt_space_add_param(given, tp->name, list) == KT_OK &&
              kt_space_enumerate(own, &n_own) == KT_OK && kt_space_enumerate(given, &n_given) == KT_OK;
    free(list);
    bool all = ok;
    for (size_t g = 0; ok && all && g < n_given; g++) {
        char a[4096], b[4096]; /* a value that does not fit is taken as not found: this only decides a note */
        bool found = false;
        if (kt_space_config_format(given, g, a, sizeof a) != KT_OK) found = false;
        else
            for (size_t k = 0; k < n_own && !found; k++) found = kt_space_config_format(own, k, b, sizeof b) == KT_OK && strcmp(a, b) == 0;
        all = found;
    }
    kt_space_destroy(own);
    kt_space_destroy(given);
    return !ok || all; /* when it cannot tell, it does not say */
}

/* Sets each geometry expression alone first, so that an error names its own JSON path. */
static bool check_geometry(const t1 *p, kt_space *sp, char **err) {
    static const char *const dims = "XYZ";
    for (int d = 0; d < 3; d++) {
        for (size_t i = 0; i < p->ndiv[d]; i++) {
            char *e = cli_format("int(%s)", p->div[d][i]);
            const char *g[3] = {e, NULL, NULL};
            kt_status st = e ? kt_space_set_geometry(sp, KT_GEOMETRY_GRID, g, NULL, NULL) : KT_ERR_NO_MEMORY;
            free(e);
            if (st != KT_OK) {
                *err = cli_format("%s: KernelSpecification.GridDiv%c[%zu]: %s", p->path, dims[d], i, kt_last_error());
                return false;
            }
        }
        const char *sets[2] = {p->grid_div ? NULL : p->global[d], p->local[d]};
        for (int k = 0; k < 2; k++) {
            if (sets[k] == NULL) continue;
            const char *g[3] = {sets[k], NULL, NULL};
            if (kt_space_set_geometry(sp, KT_GEOMETRY_GRID, g, NULL, NULL) != KT_OK) {
                *err = cli_format("%s: KernelSpecification.%s.%c: %s", p->path, k ? "LocalSize" : "GlobalSize", dims[d], kt_last_error());
                return false;
            }
        }
    }
    return true;
}

/* Builds the space of the problem with these --define values (each NAME=VALUE). When defaults
 * is set, each parameter is fixed to its Default instead (NULL without error when one has
 * none). */
kt_space *make_space(const t1 *p, const char *const *defines, size_t ndefines, bool defaults, const int64_t *ps,
                            size_t nps, char **err) {
    kt_space *sp = NULL;
    *err = NULL;
    if (kt_space_create(&sp) != KT_OK) {
        *err = cli_format("%s", kt_last_error());
        return NULL;
    }
    bool ok = true;
    for (size_t i = 0; ok && i < p->nparams; i++) {
        const t1_param *tp = &p->params[i];
        char *values = NULL;
        const char *define = NULL;
        if (defaults) {
            if (tp->dflt == NULL) {
                kt_space_destroy(sp);
                return NULL;
            }
            char *lit = t1_literal(tp->dflt);
            values = lit ? cli_format("[%s]", lit) : NULL;
            free(lit);
        } else {
            for (size_t d = 0; d < ndefines; d++)
                if (define_matches(defines[d], tp->name)) define = defines[d];
            values = define ? cli_format("[%s]", strchr(define, '=') + 1) : cli_format("%s", tp->values);
        }
        if (values == NULL) {
            *err = cli_format("out of memory");
            ok = false;
        } else if (kt_space_add_param(sp, tp->name, values) != KT_OK) {
            if (define) *err = cli_format("--define %s: %s", define, kt_last_error());
            else if (defaults) *err = cli_format("%s: ConfigurationSpace.TuningParameters[%zu].Default: %s", p->path, i, kt_last_error());
            else *err = cli_format("%s: ConfigurationSpace.TuningParameters[%zu].Values: %s", p->path, i, kt_last_error());
            ok = false;
        }
        free(values);
    }
    for (size_t d = 0; ok && d < ndefines; d++) {
        bool found = false;
        for (size_t i = 0; i < p->nparams; i++) found = found || define_matches(defines[d], p->params[i].name);
        if (!found) {
            *err = cli_format("--define %.*s: the problem has no parameter of that name", (int)strcspn(defines[d], "="), defines[d]);
            ok = false;
        }
    }
    if (ok && (kt_space_add_input(sp, "ProblemSize") != KT_OK || kt_space_bind_ints(sp, "ProblemSize", ps, nps) != KT_OK)) {
        *err = cli_format("%s: KernelSpecification.ProblemSize: %s", p->path, kt_last_error());
        ok = false;
    }
    /* Kernel Tuner's block where the parameters do not give it (get_thread_block_dimensions):
     * block_size_x 256, block_size_y and block_size_z 1, so that a LocalSize naming them (as
     * benchmark_hub's gemm does without such parameters) launches the block Kernel Tuner does */
    static const char *const block[3] = {"block_size_x", "block_size_y", "block_size_z"};
    for (int d = 0; ok && d < 3; d++) {
        bool taken = false;
        for (size_t i = 0; i < p->nparams; i++) taken = taken || strcmp(p->params[i].name, block[d]) == 0;
        for (size_t a = 0; a < p->nargs; a++) taken = taken || strcmp(p->args[a].name, block[d]) == 0;
        if (!taken && (kt_space_add_input(sp, block[d]) != KT_OK || kt_space_bind_int(sp, block[d], d == 0 ? 256 : 1) != KT_OK)) {
            *err = cli_format("%s: %s (Kernel Tuner's default block): %s", p->path, block[d], kt_last_error());
            ok = false;
        }
    }
    for (size_t c = 0; ok && c < p->nconditions; c++) {
        if (kt_space_add_constraint(sp, p->conditions[c]) != KT_OK) {
            *err = cli_format("%s: ConfigurationSpace.Conditions[%zu].Expression: %s", p->path, c, kt_last_error());
            ok = false;
        }
    }
    ok = ok && check_geometry(p, sp, err);
    char shm[32]; /* an integer: always fits */
    snprintf(shm, sizeof shm, "%lld", (long long)p->shared_memory);
    const char *const *global = (const char *const *)p->global, *const *local = (const char *const *)p->local;
    /* a C kernel is called, not launched: its geometry, checked as written above, is never
     * computed (one configuration's grid that cannot be computed must not stop its tuning) */
    static const char *const none[3] = {NULL, NULL, NULL};
    if (strcmp(p->language, "C") == 0) global = local = none;
    if (ok && kt_space_set_geometry(sp, p->geometry, global, local, p->shared_memory && global != none ? shm : NULL) != KT_OK) {
        *err = cli_format("%s: KernelSpecification.GlobalSize/LocalSize: %s", p->path, kt_last_error());
        ok = false;
    }
    if (!ok) {
        if (*err == NULL) *err = cli_format("out of memory");
        kt_space_destroy(sp);
        return NULL;
    }
    return sp;
}

/* Enumerates sp, the space of p with these defines (or its Default values); an error names the
 * condition at fault, found by enumerating again with one more condition at a time (the first
 * whose addition fails is it, whatever the library's message quotes of its text), else the
 * space. */
bool enumerate(const t1 *p, kt_space *sp, const char *const *defines, size_t ndefines, bool defaults, const int64_t *ps,
                      size_t nps, size_t *count, char **err) {
    if (kt_space_enumerate(sp, count) == KT_OK) return true;
    char *msg = cli_format("%s", kt_last_error());
    long at = -1;
    t1 q = *p; /* p with its first conditions only */
    for (size_t c = 0; msg && at < 0 && c < p->nconditions; c++) {
        q.nconditions = c + 1;
        char *why = NULL;
        size_t n;
        kt_space *some = make_space(&q, defines, ndefines, defaults, ps, nps, &why);
        if (some && kt_space_enumerate(some, &n) != KT_OK) at = (long)c;
        kt_space_destroy(some);
        free(why);
    }
    if (at >= 0) *err = cli_format("%s: ConfigurationSpace.Conditions[%ld].Expression: %s", p->path, at, msg);
    else *err = cli_format("%s: ConfigurationSpace: %s", p->path, msg ? msg : "out of memory");
    free(msg);
    return false;
}

/* How many configurations a variant of the space has (0 on an error, which the full space
 * reports itself). */
static size_t count_with(const t1 *p, const char *const *defines, size_t n, const int64_t *ps, size_t nps) {
    char *err = NULL;
    size_t count = 0;
    kt_space *sp = make_space(p, defines, n, false, ps, nps, &err);
    if (sp == NULL || kt_space_enumerate(sp, &count) != KT_OK) count = 0;
    kt_space_destroy(sp);
    free(err);
    return count;
}

/* Says why the space is empty, blaming the option that emptied it where one did. */
char *empty_space(const t1 *p, const options *o, const int64_t *ps, size_t nps) {
    if (o->ndefines > 0 && count_with(p, NULL, 0, ps, nps) > 0) {
        for (size_t d = 0; d < o->ndefines; d++)
            if (count_with(p, &o->defines[d], 1, ps, nps) == 0)
                return cli_format("--define %s: no configuration meets the problem's ConfigurationSpace.Conditions with it", o->defines[d]);
        return cli_format("--define: together, the %zu values given leave no configuration that meets the problem's "
                         "ConfigurationSpace.Conditions", o->ndefines);
    }
    if (o->nproblem > 0 && count_with(p, o->defines, o->ndefines, p->problem_size, p->nproblem) > 0)
        return cli_format("--problem-size %s: no configuration meets the problem's ConfigurationSpace.Conditions for this size",
                         o->problem_size_text);
    return cli_format("%s: ConfigurationSpace.Conditions: no configuration of the space meets them", p->path);
}

/* ---- a launch geometry that cannot be computed --------------------------------------------- */

/* One expression of the launch geometry and the JSON path it comes from. */
typedef struct geo_expr {
    char *text, *path;
    bool size; /* a size: a whole number >= 0 (a GridDiv factor only has to evaluate) */
} geo_expr;

/* The search for the first configuration whose geometry cannot be computed. */
typedef struct geo_search {
    const t1 *p;
    const int64_t *ps;
    size_t nps;
    const geo_expr *ex;
    size_t nex;
    char *config; /* found: the configuration, as the tuning names it */
    size_t at;    /* and the expression that fails for it */
} geo_search;

/* Configuration idx of sp's last enumeration as kt_space_config_format writes it (allocated;
 * NULL when out of memory). */
char *format_config(const kt_space *sp, size_t idx) {
    for (size_t len = 256;; len *= 2) {
        char *buf = malloc(len);
        if (buf == NULL) return NULL;
        kt_status st = kt_space_config_format(sp, idx, buf, len);
        if (st == KT_OK) return buf;
        free(buf);
        if (st != KT_ERR_LIMIT) return NULL;
    }
}

/* A Python literal of parameter k's value in cfg (allocated): a string quoted, a bool as T1's
 * Type says, a whole number as an integer, another number as the shortest text that reads back. */
static char *config_literal(const kt_config *cfg, size_t k, const char *type) {
    const char *s = kt_config_string(cfg, k);
    json_t *j = NULL;
    if (s) j = json_string(s);
    else if (strcmp(type, "bool") == 0) return cli_format("%s", kt_config_int(cfg, k) ? "True" : "False");
    else if ((double)kt_config_int(cfg, k) == kt_config_double(cfg, k)) return cli_format("%lld", (long long)kt_config_int(cfg, k));
    else j = json_real(kt_config_double(cfg, k));
    char *lit = j ? t1_literal(j) : NULL;
    json_decref(j);
    return lit;
}

/* A constraint callback that accepts every configuration and, until one is found, checks each
 * one's geometry: a space of that configuration alone gets the geometry's expressions as derived
 * values one at a time (a derived value is computed per configuration, as a launch computes its
 * geometry), a size with a constraint that it is a whole number >= 0, and the first that fails
 * to evaluate or is no size is recorded with the configuration. */
static int find_geometry(const kt_config *cfg, void *user) {
    geo_search *g = user;
    if (g->config) return 1;
    kt_space *one = NULL;
    bool ok = kt_space_create(&one) == KT_OK;
    for (size_t k = 0; ok && k < g->p->nparams; k++) {
        char *lit = config_literal(cfg, k, g->p->params[k].type);
        char *list = lit ? cli_format("[%s]", lit) : NULL;
        ok = list && kt_space_add_param(one, g->p->params[k].name, list) == KT_OK;
        free(lit);
        free(list);
    }
    size_t n = 0;
    ok = ok && kt_space_add_input(one, "ProblemSize") == KT_OK && kt_space_bind_ints(one, "ProblemSize", g->ps, g->nps) == KT_OK &&
         kt_space_enumerate(one, &n) == KT_OK && n == 1;
    char *text = ok ? format_config(one, 0) : NULL;
    for (size_t e = 0; text && e < g->nex; e++) {
        char name[48]; /* an index: always fits */
        snprintf(name, sizeof name, "kt_geometry_%zu", e);
        if (kt_space_add_derived(one, name, g->ex[e].text) != KT_OK) break;
        char *is_size = g->ex[e].size ? cli_format("%s >= 0 and %s == int(%s)", name, name, name) : NULL;
        if (g->ex[e].size && (is_size == NULL || kt_space_add_constraint(one, is_size) != KT_OK)) {
            free(is_size);
            break;
        }
        free(is_size);
        if (kt_space_enumerate(one, &n) != KT_OK || n != 1) { /* it fails to evaluate, or is no size */
            g->config = text, g->at = e, text = NULL;
            break;
        }
    }
    free(text);
    kt_space_destroy(one);
    return 1;
}

/* The launch geometry's expressions in the order a launch computes them, each with its JSON path:
 * per dimension, the GridDiv factors, the global size (the grid from ProblemSize and GridDiv, or
 * GlobalSize) and the local size. *n gets how many; NULL when out of memory. */
static geo_expr *geometry_exprs(const t1 *p, size_t *n) {
    static const char dims[] = "XYZ";
    size_t cap = 6;
    for (int d = 0; d < 3; d++) cap += p->ndiv[d];
    geo_expr *ex = calloc(cap, sizeof *ex);
    *n = 0;
    bool ok = ex != NULL;
    for (int d = 0; ok && d < 3; d++) {
        for (size_t i = 0; ok && i < p->ndiv[d]; i++, ++*n) {
            ex[*n].text = cli_format("int(%s)", p->div[d][i]);
            ex[*n].path = cli_format("KernelSpecification.GridDiv%c[%zu]", dims[d], i);
            ok = ex[*n].text && ex[*n].path;
        }
        if (ok && p->global[d]) {
            ex[*n].size = true;
            ex[*n].text = cli_format("%s", p->global[d]);
            ex[*n].path = !p->grid_div ? cli_format("KernelSpecification.GlobalSize.%c", dims[d])
                          : p->ndiv[d] ? cli_format("KernelSpecification.GridDiv%c", dims[d])
                                       : cli_format("KernelSpecification.LocalSize.%c (the divisor of the grid's %c)", dims[d], dims[d]);
            ok = ex[*n].text && ex[*n].path;
            ++*n;
        }
        if (ok && p->local[d]) {
            ex[*n].size = true;
            ex[*n].text = cli_format("%s", p->local[d]);
            ex[*n].path = cli_format("KernelSpecification.LocalSize.%c", dims[d]);
            ok = ex[*n].text && ex[*n].path;
            ++*n;
        }
    }
    if (!ok && ex) {
        for (size_t i = 0; i <= *n && i < cap; i++) free(ex[i].text), free(ex[i].path);
        free(ex);
        return NULL;
    }
    return ex;
}

/* For a tuning that stopped on a geometry it could not compute (msg, the library's words), the
 * JSON path of the expression at fault and the configuration it fails for: the first such
 * configuration of the reference's space (the Default values, when it has one), then of the
 * tuned space (allocated; NULL when none is found). */
char *geometry_failure(const t1 *p, const options *o, const int64_t *ps, size_t nps, bool reference, const char *msg) {
    size_t nex = 0;
    geo_expr *ex = geometry_exprs(p, &nex);
    geo_search g = {p, ps, nps, ex, nex, NULL, 0};
    int k = reference ? 0 : 1;
    for (; ex && g.config == NULL && k < 2; k++) {
        char *why = NULL;
        size_t n;
        kt_space *sp = make_space(p, o->defines, k ? o->ndefines : 0, k == 0, ps, nps, &why);
        if (sp && kt_space_add_constraint_fn(sp, find_geometry, &g) == KT_OK) kt_space_enumerate(sp, &n);
        kt_space_destroy(sp);
        free(why);
        if (g.config) break;
    }
    char *out = g.config ? cli_format("%s: %s: %sconfiguration %s: %s", p->path, ex[g.at].path, k == 0 ? "the Default " : "", g.config, msg)
                         : NULL;
    for (size_t i = 0; i < nex; i++) free(ex[i].text), free(ex[i].path);
    free(ex);
    free(g.config);
    return out;
}

