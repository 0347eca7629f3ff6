/*
 * t4.c - reading recorded measurements for replay, and the helpers the T4 writer uses.
 */
#include "t4.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

void t4_value_text(const json_t *v, char *buf, size_t len) {
    if (json_is_integer(v)) {
        snprintf(buf, len, "%lld", (long long)json_integer_value(v));
    } else if (json_is_real(v)) {
        double f = json_real_value(v);
        for (int prec = 1; prec <= 17; prec++) { /* the shortest that reads back, as Python */
            snprintf(buf, len, "%.*g", prec, f);
            if (strtod(buf, NULL) == f) break;
        }
        if (strpbrk(buf, ".eEn") == NULL && strlen(buf) + 2 < len) strcat(buf, ".0");
    } else if (json_is_boolean(v)) {
        snprintf(buf, len, "%d", json_is_true(v) ? 1 : 0);
    } else if (json_is_string(v)) {
        snprintf(buf, len, "%s", json_string_value(v));
    } else {
        snprintf(buf, len, "?");
    }
}

/* Reads a whole file, gzip or plain, into memory (NUL-terminated). */
static char *read_all(const char *path, size_t *len, char *err, size_t errlen) {
    gzFile gz = gzopen(path, "rb");
    if (gz == NULL) {
        snprintf(err, errlen, "%s: cannot open", path);
        return NULL;
    }
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap);
    int r = 0;
    while (buf && (r = gzread(gz, buf + n, (unsigned)(cap - n - 1))) > 0) {
        n += (size_t)r;
        if (cap - n - 1 == 0) {
            char *nb = realloc(buf, cap *= 2);
            if (nb == NULL) {
                free(buf);
                buf = NULL;
            } else {
                buf = nb;
            }
        }
    }
    int gerr = 0;
    const char *gmsg = gzerror(gz, &gerr);
    gzclose(gz);
    if (buf == NULL || r < 0) {
        snprintf(err, errlen, "%s: cannot read: %s", path, buf ? gmsg : "out of memory");
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* A unit's scale from a T4 timeunit to ns. */
static double unit_ns(const char *u) {
    if (u == NULL) return 1e6;
    if (strncmp(u, "mil", 3) == 0 || strcmp(u, "ms") == 0) return 1e6; /* "miliseconds" too */
    if (strncmp(u, "mic", 3) == 0 || strcmp(u, "us") == 0) return 1e3;
    if (strncmp(u, "nan", 3) == 0 || strcmp(u, "ns") == 0) return 1;
    if (strncmp(u, "sec", 3) == 0 || strcmp(u, "s") == 0) return 1e9;
    return 1e6;
}

/* Builds the key of a configuration object; false when a name is missing. */
static bool make_key(const json_t *cfg, const char *const *names, size_t n, char *buf, size_t len, const char **missing) {
    size_t k = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_object_get(cfg, names[i]);
        if (v == NULL) {
            *missing = names[i];
            return false;
        }
        char text[128];
        t4_value_text(v, text, sizeof text);
        k += (size_t)snprintf(buf + k, k < len ? len - k : 0, "%s%s=%s", i ? "," : "", names[i], text);
    }
    return k < len;
}

static bool add_record(t4_records *out, const char *key, const json_t *runtimes, double scale, double objective,
                       const char *invalidity) {
    t4_record *r = realloc(out->recs, (out->n + 1) * sizeof *r);
    if (r == NULL) return false;
    out->recs = r;
    t4_record *rec = &out->recs[out->n];
    memset(rec, 0, sizeof *rec);
    rec->key = strdup(key);
    size_t n = json_array_size(runtimes);
    rec->runtimes = calloc(n ? n : 1, sizeof *rec->runtimes);
    if (rec->key == NULL || rec->runtimes == NULL) return false;
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *t = json_array_get(runtimes, i);
        if (!json_is_number(t)) continue;
        rec->runtimes[rec->nruntimes++] = json_number_value(t) * scale;
        sum += json_number_value(t) * scale;
    }
    rec->mean_ns = objective >= 0 ? objective * scale : rec->nruntimes ? sum / (double)rec->nruntimes : -1;
    /* no unit round trip when the file is in ms, so that replay reports its numbers exactly */
    rec->mean_ms = objective >= 0 && scale == 1e6 ? objective : rec->mean_ns / 1e6;
    snprintf(rec->invalidity, sizeof rec->invalidity, "%s", invalidity);
    if (strcmp(invalidity, "correct") == 0 && rec->nruntimes == 0 && objective < 0)
        snprintf(rec->invalidity, sizeof rec->invalidity, "runtime");
    out->n++;
    return true;
}

/* The number a T4 result's "time" measurement gives, or -1. */
static double time_measurement(const json_t *res) {
    const json_t *m;
    size_t i;
    json_array_foreach(json_object_get(res, "measurements"), i, m) {
        const json_t *name = json_object_get(m, "name"), *value = json_object_get(m, "value");
        if (json_is_string(name) && strcmp(json_string_value(name), "time") == 0 && json_is_number(value))
            return json_number_value(value);
    }
    return -1;
}

int t4_compare(const void *a, const void *b) {
    return strcmp(((const t4_record *)a)->key, ((const t4_record *)b)->key);
}

bool t4_read(const char *path, const char *const *names, size_t n, t4_records *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    size_t len = 0;
    char *text = read_all(path, &len, err, errlen);
    if (text == NULL) return false;
    json_error_t jerr;
    json_t *root = json_loadb(text, len, 0, &jerr);
    free(text);
    if (root == NULL) {
        snprintf(err, errlen, "%s:%d:%d: %s", path, jerr.line, jerr.column, jerr.text);
        return false;
    }
    char key[4096];
    const char *missing = NULL;
    bool ok = true;
    json_t *results = json_object_get(root, "results"), *cache = json_object_get(root, "cache");
    if (json_is_array(results)) { /* T4 */
        const json_t *meta = json_object_get(root, "metadata");
        double scale = unit_ns(json_string_value(json_object_get(meta, "timeunit")));
        size_t i;
        json_t *res;
        json_array_foreach(results, i, res) {
            const json_t *cfg = json_object_get(res, "configuration"), *inv = json_object_get(res, "invalidity");
            if (!json_is_object(cfg) || !make_key(cfg, names, n, key, sizeof key, &missing)) {
                snprintf(err, errlen, "%s: results[%zu].configuration: %s%s", path, i,
                         missing ? "no value for parameter " : "expected an object", missing ? missing : "");
                ok = false;
                break;
            }
            const json_t *times = json_object_get(res, "times");
            if (!add_record(out, key, json_object_get(times, "runtimes"), scale, time_measurement(res),
                            json_is_string(inv) ? json_string_value(inv) : "correct")) {
                snprintf(err, errlen, "%s: out of memory", path);
                ok = false;
                break;
            }
        }
    } else if (json_is_object(cache)) { /* Kernel Tuner's cache: times in ms */
        const char *k;
        json_t *entry;
        json_object_foreach(cache, k, entry) {
            if (!json_is_object(entry) || !make_key(entry, names, n, key, sizeof key, &missing)) {
                snprintf(err, errlen, "%s: cache[\"%s\"]: %s%s", path, k, missing ? "no value for parameter " : "expected an object",
                         missing ? missing : "");
                ok = false;
                break;
            }
            const json_t *t = json_object_get(entry, "time");
            const char *inv = "correct";
            if (json_is_string(t)) {
                const char *why = json_string_value(t);
                inv = strstr(why, "Compil") ? "compile" : strstr(why, "Runtime") ? "runtime" : "constraints";
            }
            if (!add_record(out, key, json_object_get(entry, "times"), 1e6, json_is_number(t) ? json_number_value(t) : -1, inv)) {
                snprintf(err, errlen, "%s: out of memory", path);
                ok = false;
                break;
            }
        }
    } else {
        snprintf(err, errlen, "%s: neither T4 results (a \"results\" array) nor a Kernel Tuner cache (a \"cache\" object)", path);
        ok = false;
    }
    json_decref(root);
    if (!ok) {
        t4_free(out);
        return false;
    }
    qsort(out->recs, out->n, sizeof *out->recs, t4_compare); /* sorted by key: found by bsearch */
    out->best = out->n;
    for (size_t i = 0; i < out->n; i++)
        if (strcmp(out->recs[i].invalidity, "correct") == 0 && out->recs[i].mean_ns >= 0 &&
            (out->best == out->n || out->recs[i].mean_ns < out->recs[out->best].mean_ns))
            out->best = i;
    return true;
}

void t4_free(t4_records *r) {
    for (size_t i = 0; i < r->n; i++) {
        free(r->recs[i].key);
        free(r->recs[i].runtimes);
    }
    free(r->recs);
    memset(r, 0, sizeof *r);
}

json_t *t4_configuration(const char *text, const char *const *names, size_t n) {
    json_t *cfg = json_object();
    char *copy = strdup(text ? text : "");
    char *save = NULL;
    for (char *pair = strtok_r(copy, ",", &save); pair; pair = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(pair, '=');
        if (eq == NULL) continue;
        *eq = '\0';
        bool wanted = false;
        for (size_t i = 0; i < n && !wanted; i++) wanted = strcmp(names[i], pair) == 0;
        if (!wanted) continue; /* derived values are not part of a T4 configuration */
        const char *v = eq + 1;
        char *end;
        long long iv = strtoll(v, &end, 10);
        if (*v && *end == '\0') {
            json_object_set_new(cfg, pair, json_integer(iv));
            continue;
        }
        double dv = strtod(v, &end);
        if (*v && *end == '\0') json_object_set_new(cfg, pair, json_real(dv));
        else json_object_set_new(cfg, pair, json_string(v));
    }
    free(copy);
    return cfg;
}
