/*
 * wisdom_import.c - kt_cache_import: a wisdom document (JSON, through jansson) checked whole
 * before anything is written, then its decisions written in one transaction. Every value is
 * checked on its own (types, lengths, control characters, configuration text, outcomes,
 * times that agree with outcomes and intervals) and against the rest of its entry (no unit
 * twice, the winner among the units, measured, with the entry's time), and no decision may
 * appear twice; a failure names the JSON path at fault ("entries[3].units[1].time_ns").
 */
#ifndef KT_NO_CACHE

#include "store/store_int.h"

#include <kerntune/backend.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Copies s (NULL stays NULL) into *out; false when out of memory. */
static bool dup_opt(const char *s, char **out) {
    *out = NULL;
    if (s == NULL) return true;
    *out = kt__db_dup(s);
    return *out != NULL;
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

/* Fails an import at JSON path `path`.`name`: "kt_cache_import: entries[3].op: expected ...". */
static kt_status jbad(const char *path, const char *name, const char *fmt, ...) KT__PRINTF(3, 4);
static kt_status jbad(const char *path, const char *name, const char *fmt, ...) {
    char what[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (*path == '\0' && *name == '\0') return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_cache_import: %s", what);
    return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_cache_import: %s%s%s: %s", path, *path && *name ? "." : "", name, what);
}

/* The member `name` of obj, or "path.name: missing; expected what". */
static kt_status jget(json_t *obj, const char *path, const char *name, json_t **out, const char *what) {
    *out = json_object_get(obj, name);
    if (*out == NULL) return jbad(path, name, "missing; expected %s", what);
    return KT_OK;
}

/* A string member (nullable: null gives NULL; nonempty: "" is refused), copied into *out. */
static kt_status jstr(json_t *obj, const char *path, const char *name, bool nullable, char **out) {
    json_t *v;
    const char *what = nullable ? "a string or null" : "a non-empty string";
    *out = NULL;
    kt_status st = jget(obj, path, name, &v, what);
    if (st != KT_OK) return st;
    if (nullable && json_is_null(v)) return KT_OK;
    if (!json_is_string(v) || (!nullable && json_string_length(v) == 0))
        return jbad(path, name, "expected %s, got %s", what, json_is_string(v) ? "an empty string" : kind_of(v));
    if (!dup_opt(json_string_value(v), out))
        return kt__err(KT_ERR_NO_MEMORY, "kt_cache_import: %s%s%s: out of memory copying the string", path, *path ? "." : "", name);
    return KT_OK;
}

static kt_status jnum(json_t *obj, const char *path, const char *name, double *out) {
    json_t *v;
    kt_status st = jget(obj, path, name, &v, "a number");
    if (st != KT_OK) return st;
    if (!json_is_number(v)) return jbad(path, name, "expected a number, got %s", kind_of(v));
    *out = json_number_value(v);
    return KT_OK;
}

static kt_status juint(json_t *obj, const char *path, const char *name, unsigned *out) {
    json_t *v;
    kt_status st = jget(obj, path, name, &v, "an integer from 0 to 4294967295");
    if (st != KT_OK) return st;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > (json_int_t)UINT32_MAX)
        return jbad(path, name, "expected an integer from 0 to 4294967295, got %s", kind_of(v));
    *out = (unsigned)json_integer_value(v);
    return KT_OK;
}

/* Parses "MAJOR.MINOR.PATCH"; false when text is not one. */
static bool parse_version(const char *text, long *major) {
    const char *p = text;
    for (int part = 0; part < 3; part++) {
        if (*p < '0' || *p > '9') return false;
        char *end;
        long v = strtol(p, &end, 10);
        if (part == 0) *major = v;
        p = end;
        if (part < 2 && *p++ != '.') return false;
    }
    return *p == '\0';
}

static kt_status check_major(const char *path, const char *name, const char *version) {
    long major = -1;
    if (!parse_version(version, &major)) return jbad(path, name, "expected a version \"MAJOR.MINOR.PATCH\", got '%.40s'", version);
    if (major != KT_VERSION_MAJOR)
        return jbad(path, name, "'%s' is kerntune %ld's; this library (%s) reads wisdom of major version %d only", version, major,
                    kt_version_string(), KT_VERSION_MAJOR);
    return KT_OK;
}

/* Limits on what a wisdom entry may hold: a document that breaks one is refused, whatever the
 * op it names (import knows no op: these are the checks it can make alone). */
#define KT__WISDOM_HASH_MAX 64          /* candidate_set, unit_hash */
#define KT__WISDOM_CONFIG_MAX (1 << 20) /* configuration text (string values of any length make it long) */
#define KT__WISDOM_MESSAGE_MAX 4096     /* a unit's diagnostic */
#define KT__WISDOM_UNITS_MAX (1 << 20)  /* units of one decision */
#define KT__WISDOM_FUTURE_S 86400       /* how far in the future `created` may lie (clock skew) */

/* What a text member may hold: its longest length, and whether a tab is allowed (in messages);
 * other control characters are never. */
typedef struct text_rule {
    size_t max;
    bool tab;
} text_rule;

static kt_status check_text(const char *path, const char *name, const char *s, size_t len, text_rule rule) {
    if (strlen(s) != len) return jbad(path, name, "holds a NUL character");
    if (len > rule.max) return jbad(path, name, "has %zu characters; at most %zu", len, rule.max);
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if ((ch < 0x20 && !(ch == '\t' && rule.tab)) || ch == 0x7f)
            return jbad(path, name, "holds a control character (0x%02x) at offset %zu", ch, i);
    }
    return KT_OK;
}

/* A string member checked by rule (nullable: null gives NULL; else "" is refused), copied. */
static kt_status jtext(json_t *obj, const char *path, const char *name, bool nullable, text_rule rule, char **out) {
    kt_status st = jstr(obj, path, name, nullable, out);
    if (st != KT_OK || *out == NULL) return st;
    st = check_text(path, name, *out, json_string_length(json_object_get(obj, name)), rule);
    if (st != KT_OK) {
        free(*out);
        *out = NULL;
    }
    return st;
}

static bool ident_start(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
static bool ident_char(char c) { return ident_start(c) || (c >= '0' && c <= '9'); }

/* Length of the identifier followed by '=' at p, or 0 when p does not start "NAME=". */
static size_t name_eq(const char *p) {
    if (!ident_start(*p)) return 0;
    size_t n = 1;
    while (ident_char(p[n])) n++;
    return p[n] == '=' ? n : 0;
}

/* Whether text is configuration text as kerntune writes it: NAME=VALUE items joined by ',',
 * NAME an identifier appearing once, VALUE possibly empty (an empty string's) and possibly
 * holding a comma, as a derived list's does, as long as no "NAME=" follows it). Says what is
 * wrong in why. *oom: the check could not be made (out of memory). */
static bool config_ok(const char *text, char *why, size_t len, bool *oom) {
    size_t cap = strlen(text) / 2 + 1, n = 0; /* an item takes at least 2 characters ("A=1,") */
    const char **names = malloc(cap * sizeof *names);
    size_t *lens = malloc(cap * sizeof *lens);
    bool ok = names != NULL && lens != NULL;
    *oom = !ok;
    if (!ok) snprintf(why, len, "out of memory allocating the names of '%.60s' to check it", text);
    for (const char *p = text; ok;) {
        size_t k = name_eq(p);
        if (k == 0) {
            snprintf(why, len, "'%.60s' is not configuration text: expected NAME=VALUE at offset %zu", text, (size_t)(p - text));
            ok = false;
            break;
        }
        for (size_t i = 0; i < n && ok; i++)
            if (lens[i] == k && strncmp(names[i], p, k) == 0) {
                snprintf(why, len, "'%.60s' names parameter '%.*s' twice", text, (int)k, p);
                ok = false;
            }
        if (!ok) break;
        names[n] = p, lens[n++] = k;
        const char *v = p + k + 1, *end = v;
        while (*end != '\0' && !(*end == ',' && name_eq(end + 1) > 0)) end++;
        if (*end == '\0') break; /* (a value may be empty: an empty string's) */
        p = end + 1;
    }
    free(names);
    free(lens);
    return ok;
}

/* A configuration member: null, or text that config_ok accepts. */
static kt_status jconfig(json_t *obj, const char *path, const char *name, char **out) {
    kt_status st = jtext(obj, path, name, true, (text_rule){KT__WISDOM_CONFIG_MAX, false}, out);
    char why[160];
    bool oom = false;
    if (st == KT_OK && *out != NULL && !config_ok(*out, why, sizeof why, &oom)) {
        free(*out);
        *out = NULL;
        st = oom ? kt__err(KT_ERR_NO_MEMORY, "kt_cache_import: %s%s%s: %s", path, *path ? "." : "", name, why) : jbad(path, name, "%s", why);
    }
    return st;
}

/* A probability member: null (or -1) for unknown, else a number from lo to 1; optional members
 * may be absent (unknown). */
static kt_status jprob(json_t *obj, const char *path, const char *name, bool optional, double lo, double *out) {
    *out = -1;
    json_t *v = json_object_get(obj, name);
    if (v == NULL && optional) return KT_OK;
    char what[64];
    snprintf(what, sizeof what, "a number from %g to 1, or null", lo);
    kt_status st = jget(obj, path, name, &v, what);
    if (st != KT_OK || json_is_null(v)) return st;
    if (!json_is_number(v)) return jbad(path, name, "expected %s, got %s", what, kind_of(v));
    double x = json_number_value(v);
    if (x == -1) return KT_OK; /* unknown, as the store writes it */
    if (!(x >= lo && x <= 1)) return jbad(path, name, "is %g; expected %s", x, what);
    *out = x;
    return KT_OK;
}

/* The outcome names joined by ", ", for messages. */
static const char *outcome_list(char *buf, size_t len) {
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < KT__NOUTCOMES && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%s", i ? ", " : "", kt_outcome_name((kt_outcome)i));
    return buf;
}

static kt_status parse_unit(json_t *u, const char *path, kt__store_unit *out) {
    memset(out, 0, sizeof *out);
    if (!json_is_object(u)) return jbad(path, "", "expected an object, got %s", kind_of(u));
    kt_status st = jtext(u, path, "candidate", false, (text_rule){KT__NAME_MAX, false}, &out->candidate);
    if (st == KT_OK) st = jconfig(u, path, "config", &out->config);
    if (st == KT_OK) st = jtext(u, path, "unit_hash", false, (text_rule){KT__WISDOM_HASH_MAX, false}, &out->unit_hash);
    json_t *v;
    if (st == KT_OK) st = jget(u, path, "outcome", &v, "an outcome name");
    if (st == KT_OK) {
        out->outcome = -1;
        for (int i = 0; i < KT__NOUTCOMES && json_is_string(v); i++)
            if (strcmp(json_string_value(v), kt_outcome_name((kt_outcome)i)) == 0) out->outcome = i;
        char names[160];
        if (out->outcome < 0)
            st = jbad(path, "outcome", "expected one of %s, got %s%s%.40s%s", outcome_list(names, sizeof names), kind_of(v),
                      json_is_string(v) ? " '" : "", json_is_string(v) ? json_string_value(v) : "",
                      json_is_string(v) ? "'" : "");
    }
    bool measured = out->outcome == KT_OUTCOME_MEASURED;
    if (st == KT_OK) st = jnum(u, path, "time_ns", &out->time_ns);
    if (st == KT_OK && measured && out->time_ns < 0)
        st = jbad(path, "time_ns", "is %.15g, but the unit was measured: expected a time of at least 0", out->time_ns);
    if (st == KT_OK && !measured && out->time_ns >= 0)
        st = jbad(path, "time_ns", "is %.15g, but the unit's outcome is %s: a unit that was not measured has no time (-1)", out->time_ns,
                  kt_outcome_name((kt_outcome)out->outcome));
    if (st == KT_OK) st = jget(u, path, "ci_ns", &v, "[low, high] or null");
    if (st == KT_OK) {
        out->ci_low_ns = out->ci_high_ns = -1;
        if (!json_is_null(v)) {
            if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_number(json_array_get(v, 0)) ||
                !json_is_number(json_array_get(v, 1)) || json_number_value(json_array_get(v, 0)) < 0 ||
                json_number_value(json_array_get(v, 1)) < 0)
                st = jbad(path, "ci_ns", "expected [low, high] (two non-negative numbers) or null, got %s", kind_of(v));
            else if (!measured)
                st = jbad(path, "ci_ns", "is an interval, but the unit's outcome is %s: expected null", kt_outcome_name((kt_outcome)out->outcome));
            else {
                out->ci_low_ns = json_number_value(json_array_get(v, 0));
                out->ci_high_ns = json_number_value(json_array_get(v, 1));
                if (!(out->ci_low_ns <= out->time_ns && out->time_ns <= out->ci_high_ns))
                    st = jbad(path, "ci_ns", "[%.15g, %.15g] does not contain the unit's time_ns %.15g", out->ci_low_ns, out->ci_high_ns, out->time_ns);
            }
        }
    }
    if (st == KT_OK) st = juint(u, path, "runs", &out->runs);
    if (st == KT_OK) st = juint(u, path, "warmups", &out->warmups);
    if (st == KT_OK) st = jtext(u, path, "message", true, (text_rule){KT__WISDOM_MESSAGE_MAX, true}, &out->message);
    v = json_object_get(u, "finalist"); /* absent in documents written before schema 3 */
    if (st == KT_OK && v != NULL && !json_is_boolean(v)) st = jbad(path, "finalist", "expected true or false, got %s", kind_of(v));
    if (st == KT_OK && json_is_true(v) && !measured)
        st = jbad(path, "finalist", "is true, but the unit's outcome is %s: only a measured unit can be a finalist",
                  kt_outcome_name((kt_outcome)out->outcome));
    if (st == KT_OK) out->finalist = json_is_true(v);
    if (st != KT_OK) kt__store_unit_free(out);
    return st;
}

/* Orders units by candidate, then configuration (NULL first). */
static int cmp_unit(const void *a, const void *b) {
    const kt__store_unit *x = *(const kt__store_unit *const *)a, *y = *(const kt__store_unit *const *)b;
    int d = strcmp(x->candidate, y->candidate);
    if (d == 0) d = (x->config != NULL) - (y->config != NULL);
    if (d == 0 && x->config) d = strcmp(x->config, y->config);
    return d ? d : (x < y ? -1 : x > y);
}

/* Checks what an entry's units say against each other and against its winner: no unit listed
 * twice, and the winner among them (when any are listed), measured, with the entry's time. */
static kt_status check_units(const kt__store_rec *r, const char *path) {
    if (r->nunits == 0) return KT_OK;
    const kt__store_unit **p = malloc(r->nunits * sizeof *p);
    if (p == NULL) return kt__err(KT_ERR_NO_MEMORY, "kt_cache_import: %s.units: out of memory sorting %zu units", path, r->nunits);
    for (size_t i = 0; i < r->nunits; i++) p[i] = &r->units[i];
    qsort(p, r->nunits, sizeof *p, cmp_unit);
    kt_status st = KT_OK;
    for (size_t i = 1; i < r->nunits && st == KT_OK; i++) {
        const kt__store_unit *a = p[i - 1], *b = p[i];
        if (strcmp(a->candidate, b->candidate) == 0 && (a->config == NULL) == (b->config == NULL) &&
            (a->config == NULL || strcmp(a->config, b->config) == 0)) {
            char sub[160];
            snprintf(sub, sizeof sub, "%s.units[%zu]", path, (size_t)(b - r->units));
            st = jbad(sub, "", "the same unit (candidate '%.100s'%s%.200s) as units[%zu]", b->candidate, b->config ? ", configuration " : "",
                      b->config ? b->config : "", (size_t)(a - r->units));
        }
    }
    free(p);
    if (st != KT_OK) return st;
    const kt__store_unit *w = NULL;
    size_t wi = 0;
    for (size_t i = 0; i < r->nunits && w == NULL; i++) {
        const kt__store_unit *u = &r->units[i];
        if (strcmp(u->candidate, r->winner_candidate) == 0 && (u->config == NULL) == (r->winner_config == NULL) &&
            (u->config == NULL || strcmp(u->config, r->winner_config) == 0))
            w = u, wi = i;
    }
    if (w == NULL)
        return jbad(path, "winner", "candidate '%.100s'%s%.200s is none of the entry's %zu units", r->winner_candidate,
                    r->winner_config ? ", configuration " : "", r->winner_config ? r->winner_config : "", r->nunits);
    if (w->outcome != KT_OUTCOME_MEASURED)
        return jbad(path, "winner", "its unit (units[%zu]) has outcome %s: a winner was measured", wi, kt_outcome_name((kt_outcome)w->outcome));
    if (w->time_ns != r->time_ns)
        return jbad(path, "time_ns", "is %.15g, but the winner's unit (units[%zu]) has time_ns %.15g", r->time_ns, wi, w->time_ns);
    return KT_OK;
}

static kt_status parse_entry(json_t *e, const char *path, int64_t now, kt__store_rec *out) {
    memset(out, 0, sizeof *out);
    if (!json_is_object(e)) return jbad(path, "", "expected an object, got %s", kind_of(e));
    kt_status st = jtext(e, path, "op", false, (text_rule){KT__NAME_MAX, false}, &out->op);
    if (st == KT_OK) st = jtext(e, path, "candidate_set", false, (text_rule){KT__WISDOM_HASH_MAX, false}, &out->set_hash);
    if (st == KT_OK) st = jtext(e, path, "device", false, (text_rule){KT_DEVICE_FINGERPRINT_MAX - 1, false}, &out->device);
    if (st == KT_OK) st = jstr(e, path, "library_version", false, &out->version);
    if (st == KT_OK) st = check_major(path, "library_version", out->version);
    json_t *v;
    if (st == KT_OK) st = jget(e, path, "key", &v, "an array of integers");
    if (st == KT_OK) {
        bool ints = json_is_array(v);
        for (size_t i = 0; ints && i < json_array_size(v); i++) ints = json_is_integer(json_array_get(v, i));
        if (!ints) st = jbad(path, "key", "expected an array of integers, got %s", kind_of(v));
        else if (json_array_size(v) > KT__STORE_KEY_MAX)
            st = jbad(path, "key", "has %zu words; at most %d", json_array_size(v), KT__STORE_KEY_MAX);
        else if (json_array_size(v) > 0) {
            out->key_len = json_array_size(v);
            out->key = malloc(out->key_len * sizeof *out->key);
            if (out->key == NULL) st = kt__err(KT_ERR_NO_MEMORY, "kt_cache_import: %s.key: out of memory copying %zu words", path, out->key_len);
            for (size_t i = 0; st == KT_OK && i < out->key_len; i++) out->key[i] = json_integer_value(json_array_get(v, i));
        }
    }
    /* absent in documents written before schema 6, or for a device its backend did not classify */
    static const char *const optional[5] = {"arch", "vendor", "key_kinds", "artifact", "compiler"};
    char **field[5] = {&out->arch, &out->vendor, &out->key_kinds, &out->artifact, &out->compiler};
    for (int f = 0; f < 5 && st == KT_OK; f++) {
        if (json_object_get(e, optional[f]) != NULL && !json_is_null(json_object_get(e, optional[f])))
            st = jtext(e, path, optional[f], false, (text_rule){KT_DEVICE_FINGERPRINT_MAX - 1, false}, field[f]);
    }
    if (st == KT_OK && out->key_kinds && (strspn(out->key_kinds, "sc") != strlen(out->key_kinds) || strlen(out->key_kinds) > out->key_len))
        st = jbad(path, "key_kinds", "is '%.60s'; expected one letter s (a size) or c (a category) per key component, at most %zu",
                  out->key_kinds, out->key_len);
    if (st == KT_OK && out->artifact && (strchr(out->artifact, '/') || strcmp(out->artifact, ".") == 0 || strcmp(out->artifact, "..") == 0))
        st = jbad(path, "artifact", "is '%.60s'; expected a file name", out->artifact);
    char sub[128];
    if (st == KT_OK) st = jget(e, path, "winner", &v, "an object");
    if (st == KT_OK && !json_is_object(v)) st = jbad(path, "winner", "expected an object, got %s", kind_of(v));
    snprintf(sub, sizeof sub, "%s.winner", path);
    if (st == KT_OK) st = jtext(v, sub, "candidate", false, (text_rule){KT__NAME_MAX, false}, &out->winner_candidate);
    if (st == KT_OK) st = jconfig(v, sub, "config", &out->winner_config);
    if (st == KT_OK) st = jnum(e, path, "time_ns", &out->time_ns);
    if (st == KT_OK && out->time_ns < 0) st = jbad(path, "time_ns", "is %.15g; expected the winner's time, at least 0", out->time_ns);
    if (st == KT_OK) st = jprob(e, path, "confidence", false, 0, &out->confidence);
    /* absent in documents written before schema 3: no confidence was asked for */
    if (st == KT_OK) st = jprob(e, path, "requested_confidence", true, 0.5, &out->requested_confidence);
    if (st == KT_OK) st = jget(e, path, "created", &v, "an integer (unix time)");
    if (st == KT_OK && !json_is_integer(v)) st = jbad(path, "created", "expected an integer (unix time), got %s", kind_of(v));
    if (st == KT_OK) {
        out->created = json_integer_value(v);
        if (out->created < 0 || out->created > now + KT__WISDOM_FUTURE_S)
            st = jbad(path, "created", "is %lld; expected a unix time from 0 to a day from now (%lld)", (long long)out->created,
                      (long long)(now + KT__WISDOM_FUTURE_S));
    }
    if (st == KT_OK) st = jget(e, path, "units", &v, "an array");
    if (st == KT_OK && !json_is_array(v)) st = jbad(path, "units", "expected an array, got %s", kind_of(v));
    if (st == KT_OK && json_array_size(v) > KT__WISDOM_UNITS_MAX)
        st = jbad(path, "units", "has %zu units; at most %d", json_array_size(v), KT__WISDOM_UNITS_MAX);
    if (st == KT_OK && json_array_size(v) > 0) {
        out->units = calloc(json_array_size(v), sizeof *out->units);
        if (out->units == NULL)
            st = kt__err(KT_ERR_NO_MEMORY, "kt_cache_import: %s.units: out of memory allocating %zu units", path, json_array_size(v));
        for (size_t i = 0; st == KT_OK && i < json_array_size(v); i++) {
            snprintf(sub, sizeof sub, "%s.units[%zu]", path, i);
            st = parse_unit(json_array_get(v, i), sub, &out->units[i]);
            if (st == KT_OK) out->nunits++;
        }
    }
    if (st == KT_OK) st = check_units(out, path);
    if (st != KT_OK) kt__store_rec_free(out);
    return st;
}

typedef struct import_job {
    kt__store_rec *recs;
    size_t n;
    bool replace;
    size_t added, replaced, kept;
} import_job;

static int cmp_identity(const kt__store_rec *a, const kt__store_rec *b) {
    int d = strcmp(a->op, b->op);
    if (d == 0) d = strcmp(a->set_hash, b->set_hash);
    if (d == 0) d = strcmp(a->device, b->device);
    if (d == 0) d = strcmp(a->version, b->version);
    if (d == 0) d = a->key_len < b->key_len ? -1 : a->key_len > b->key_len;
    for (size_t i = 0; d == 0 && i < a->key_len; i++) d = a->key[i] < b->key[i] ? -1 : a->key[i] > b->key[i];
    return d;
}

/* Orders pointers into one array by identity, then by position. */
static int cmp_ptr(const void *a, const void *b) {
    const kt__store_rec *x = *(const kt__store_rec *const *)a, *y = *(const kt__store_rec *const *)b;
    int d = cmp_identity(x, y);
    return d ? d : (x < y ? -1 : x > y);
}

/* Refuses a document naming one decision twice: "entries[5]: the same decision as entries[2]". */
static kt_status check_duplicates(const kt__store_rec *recs, size_t n) {
    if (n < 2) return KT_OK;
    const kt__store_rec **p = malloc(n * sizeof *p);
    if (p == NULL) return kt__err(KT_ERR_NO_MEMORY, "kt_cache_import: out of memory sorting %zu entries to find duplicates", n);
    for (size_t i = 0; i < n; i++) p[i] = &recs[i];
    qsort(p, n, sizeof *p, cmp_ptr);
    kt_status st = KT_OK;
    for (size_t i = 1; i < n && st == KT_OK; i++)
        if (cmp_identity(p[i - 1], p[i]) == 0)
            st = kt__err(KT_ERR_INVALID_ARGUMENT,
                         "kt_cache_import: entries[%zu]: the same decision (op, candidate_set, device, library_version, key) as entries[%zu]",
                         (size_t)(p[i] - recs), (size_t)(p[i - 1] - recs));
    free(p);
    return st;
}

static kt_status import_tx(kt_cache *c, void *arg, const char *where) {
    import_job *j = arg;
    j->added = j->replaced = j->kept = 0;
    sqlite3_stmt *s;
    kt_status st = kt__db_prepare(c, "SELECT 1 FROM decisions WHERE " KT__IDENTITY, &s, where);
    for (size_t i = 0; st == KT_OK && i < j->n; i++) {
        char key[KT__KEYTEXT_MAX];
        kt__rec_key_text(j->recs[i].key, j->recs[i].key_len, key);
        sqlite3_reset(s);
        kt__rec_bind_identity(s, &j->recs[i], key);
        bool exists = false;
        st = kt__db_step(c, s, &exists, where);
        sqlite3_reset(s);
        if (st != KT_OK) break;
        if (exists && !j->replace) {
            j->kept++;
            continue;
        }
        st = kt__rec_write(c, &j->recs[i], where);
        if (st == KT_OK) {
            if (exists) j->replaced++;
            else j->added++;
        }
    }
    sqlite3_finalize(s);
    return st;
}

kt_status kt_cache_import(kt_cache *cache, const char *json, int replace, size_t *added, size_t *replaced, size_t *kept) {
    if (added) *added = 0;
    if (replaced) *replaced = 0;
    if (kept) *kept = 0;
    if (cache == NULL || json == NULL) return kt__err(KT_ERR_NULL, "kt_cache_import: cache or json is NULL");
    json_error_t jerr;
    json_t *doc = json_loads(json, JSON_REJECT_DUPLICATES, &jerr);
    /* jansson names every syntax error; it fails with no text when it cannot allocate its
     * buffers, and says "out of memory" (json_error_out_of_memory) elsewhere */
    bool oom = doc == NULL && jerr.text[0] == '\0';
#if JANSSON_VERSION_HEX >= 0x020b00 /* json_error_code: jansson 2.11 */
    if (doc == NULL && json_error_code(&jerr) == json_error_out_of_memory) oom = true;
#endif
    if (oom) return kt__err(KT_ERR_NO_MEMORY, "kt_cache_import: out of memory reading the JSON document%s%s", *jerr.text ? ": " : "", jerr.text);
    if (doc == NULL)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_cache_import: invalid JSON at line %d, column %d: %s", jerr.line, jerr.column, jerr.text);
    kt_status st = KT_OK;
    json_t *v = NULL, *entries = NULL;
    if (!json_is_object(doc)) st = jbad("", "", "expected a JSON object (a kerntune wisdom document), got %s", kind_of(doc));
    if (st == KT_OK && (v = json_object_get(doc, "kerntune_wisdom")) == NULL)
        st = jbad("", "kerntune_wisdom", "missing: not a kerntune wisdom document");
    if (st == KT_OK && !(json_is_integer(v) && json_integer_value(v) == 1))
        st = jbad("", "kerntune_wisdom", "expected 1, the wisdom format this library reads, got %s", kind_of(v));
    char *version = NULL;
    if (st == KT_OK) st = jstr(doc, "", "library_version", false, &version);
    if (st == KT_OK) st = check_major("", "library_version", version);
    free(version);
    if (st == KT_OK) st = jget(doc, "", "entries", &entries, "an array");
    if (st == KT_OK && !json_is_array(entries)) st = jbad("", "entries", "expected an array, got %s", kind_of(entries));
    import_job j = {.replace = replace != 0};
    int64_t now = (int64_t)time(NULL);
    if (st == KT_OK && json_array_size(entries) > 0) {
        j.recs = calloc(json_array_size(entries), sizeof *j.recs);
        if (j.recs == NULL)
            st = kt__err(KT_ERR_NO_MEMORY, "kt_cache_import: out of memory allocating %zu entries", json_array_size(entries));
        for (size_t i = 0; st == KT_OK && i < json_array_size(entries); i++) {
            char path[48];
            snprintf(path, sizeof path, "entries[%zu]", i);
            st = parse_entry(json_array_get(entries, i), path, now, &j.recs[i]);
            if (st == KT_OK) j.n++;
        }
    }
    json_decref(doc);
    if (st == KT_OK) st = check_duplicates(j.recs, j.n);
    if (st == KT_OK) {
        char where[600];
        kt__rec_where(where, sizeof where, "kt_cache_import", cache);
        pthread_mutex_lock(&cache->lock);
        st = kt__db_tx(cache, true, import_tx, &j, where);
        pthread_mutex_unlock(&cache->lock);
    }
    for (size_t i = 0; i < j.n; i++) kt__store_rec_free(&j.recs[i]);
    free(j.recs);
    if (st != KT_OK) return st;
    if (added) *added = j.added;
    if (replaced) *replaced = j.replaced;
    if (kept) *kept = j.kept;
    return KT_OK;
}

kt_status kt__store_rec_parse(const char *text, const char *what, kt__store_rec *out) {
    memset(out, 0, sizeof *out);
    json_error_t jerr;
    json_t *e = json_loads(text, 0, &jerr);
    if (e == NULL) return kt__err(KT_ERR_INVALID_ARGUMENT, "%s: invalid JSON: %s", what, jerr.text);
    kt_status st = parse_entry(e, what, (int64_t)time(NULL), out);
    json_decref(e);
    return st;
}

#endif /* KT_NO_CACHE */
