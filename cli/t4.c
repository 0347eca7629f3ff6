/*
 * t4.c - reading recorded measurements for replay, and the helpers the T4 writer uses.
 */
#include "t4.h"
#include "text.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

void t4_value_text(const json_t *v, char *buf, size_t len) {
    if (json_is_integer(v)) {
        snprintf(buf, len, "%lld", (long long)json_integer_value(v));
    } else if (json_is_real(v)) {
        /* the shortest text that reads back, as Python writes it: %.17g and a sign, an
         * exponent and ".0" fit in 32 (found in a buffer of its own, so that no build's
         * analysis sees the caller's buffer written before its length is known good) */
        double f = json_real_value(v);
        char tmp[32];
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(tmp, sizeof tmp, "%.*g", prec, f);
            if (strtod(tmp, NULL) == f) break;
        }
        snprintf(buf, len, "%s%s", tmp, strpbrk(tmp, ".eEn") ? "" : ".0");
    } else if (json_is_boolean(v)) {
        snprintf(buf, len, "%d", json_is_true(v) ? 1 : 0);
    } else if (json_is_string(v)) {
        snprintf(buf, len, "%s", json_string_value(v));
    } else {
        snprintf(buf, len, "?");
    }
}

char *t4_value_string(const json_t *v) {
    if (!json_is_string(v)) {
        char num[64]; /* a number: always fits */
        t4_value_text(v, num, sizeof num);
        return strdup(num);
    }
    return strdup(json_string_value(v));
}

/* Reads a whole regular file, gzip or plain, into memory (NUL-terminated), at most
 * T4_READ_LIMIT bytes once decompressed. A FIFO or a device is refused before anything is read
 * from it (opened without waiting for a writer). */
static char *read_all(const char *path, size_t *len, char **err) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        *err = cli_format("%s: cannot open: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        *err = cli_format("%s: %s; expected a regular file", path, cli_file_kind(st.st_mode));
        close(fd);
        return NULL;
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0) fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    gzFile gz = gzdopen(fd, "rb");
    if (gz == NULL) {
        *err = cli_format("%s: cannot open", path);
        close(fd);
        return NULL;
    }
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap);
    int r = 0;
    bool too_large = false;
    while (buf && (r = gzread(gz, buf + n, (unsigned)(cap - n - 1))) > 0) {
        n += (size_t)r;
        if (n > T4_READ_LIMIT) {
            too_large = true;
            break;
        }
        if (cap - n - 1 == 0) {
            char *nb = realloc(buf, cap *= 2);
            if (nb == NULL) free(buf);
            buf = nb;
        }
    }
    int gerr = 0;
    char *gmsg = cli_format("%s", gzerror(gz, &gerr));
    gzclose(gz);
    if (buf == NULL || r < 0 || too_large) {
        if (too_large) *err = cli_format("%s: more than %zu bytes (%zu MiB) of recorded data; kerntune reads at most that", path, T4_READ_LIMIT, T4_READ_LIMIT >> 20);
        else *err = cli_format("%s: cannot read: %s", path, buf ? gmsg : "out of memory");
        free(buf);
        free(gmsg);
        return NULL;
    }
    free(gmsg);
    buf[n] = '\0';
    *len = n;
    return buf;
}

json_t *t4_load(const char *path, char **err) {
    *err = NULL;
    size_t len = 0;
    char *text = read_all(path, &len, err);
    if (text == NULL) return NULL;
    json_error_t jerr;
    json_t *root = json_loadb(text, len, 0, &jerr);
    free(text);
    if (root == NULL) *err = cli_format("%s:%d:%d: %s", path, jerr.line, jerr.column, jerr.text);
    return root;
}

double t4_unit_ns(const char *u) {
    if (u == NULL) return 1e6;
    if (strncmp(u, "mil", 3) == 0 || strcmp(u, "ms") == 0) return 1e6; /* "miliseconds" too */
    if (strncmp(u, "mic", 3) == 0 || strcmp(u, "us") == 0) return 1e3;
    if (strncmp(u, "nan", 3) == 0 || strcmp(u, "ns") == 0) return 1;
    if (strncmp(u, "sec", 3) == 0 || strcmp(u, "s") == 0) return 1e9;
    return 1e6;
}

/* Builds the key of a configuration object (allocated); NULL with *missing set when a name is
 * missing, NULL alone when out of memory. */
static char *make_key(const json_t *cfg, const char *const *names, size_t n, const char **missing) {
    size_t cap = 64, k = 0;
    char *buf = malloc(cap);
    if (buf == NULL) return NULL;
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_object_get(cfg, names[i]);
        if (v == NULL) {
            *missing = names[i];
            free(buf);
            return NULL;
        }
        char *text = t4_value_string(v);
        size_t need = (text ? strlen(text) : 0) + strlen(names[i]) + 3;
        if (text && k + need > cap) {
            while (k + need > cap) cap *= 2;
            char *nb = realloc(buf, cap);
            if (nb == NULL) free(text), text = NULL;
            else buf = nb;
        }
        if (text == NULL) {
            free(buf);
            return NULL;
        }
        k += (size_t)snprintf(buf + k, cap - k, "%s%s=%s", i ? "," : "", names[i], text);
        free(text);
    }
    return buf;
}

/* A recorded time in ns, or -1 when t is not a number. */
static double recorded_ns(const json_t *t, double scale) { return json_is_number(t) ? json_number_value(t) * scale : -1; }

/* The sum of two recorded times, or -1 when neither is. */
static double recorded_sum(double a, double b) { return a < 0 && b < 0 ? -1 : fmax(a, 0) + fmax(b, 0); }

static bool add_record(t4_records *out, const char *key, const json_t *runtimes, double scale, double objective,
                       const char *invalidity, double compile_ns, double framework_ns, double other_ns) {
    t4_record *r = realloc(out->recs, (out->n + 1) * sizeof *r);
    if (r == NULL) return false;
    out->recs = r;
    t4_record *rec = &out->recs[out->n];
    memset(rec, 0, sizeof *rec);
    rec->compile_ns = compile_ns, rec->framework_ns = framework_ns, rec->other_ns = other_ns;
    rec->key = strdup(key);
    rec->invalidity = strdup(strcmp(invalidity, "correct") == 0 && json_array_size(runtimes) == 0 && objective < 0 ? "runtime" : invalidity);
    size_t n = json_array_size(runtimes);
    rec->runtimes = calloc(n ? n : 1, sizeof *rec->runtimes);
    out->n++; /* counted from here on, so that t4_free releases what it holds */
    if (rec->key == NULL || rec->runtimes == NULL || rec->invalidity == NULL) return false;
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
    if (strcmp(rec->invalidity, "correct") == 0 && rec->nruntimes == 0 && objective < 0) { /* no number among them */
        free(rec->invalidity);
        if ((rec->invalidity = strdup("runtime")) == NULL) return false;
    }
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

static bool read_records(const char *path, const char *const *names, size_t n, t4_records *out, char **err);

bool t4_read(const char *path, const char *const *names, size_t n, t4_records *out, char **err) {
    *err = NULL;
    bool ok = read_records(path, names, n, out, err);
    cli_one_line(*err); /* a recorded name or value may hold a newline: the message stays one line */
    return ok;
}

static bool read_records(const char *path, const char *const *names, size_t n, t4_records *out, char **err) {
    memset(out, 0, sizeof *out);
    json_t *root = t4_load(path, err);
    if (root == NULL) return false;
    const char *missing = NULL;
    bool ok = true;
    json_t *results = json_object_get(root, "results"), *cache = json_object_get(root, "cache");
    if (json_is_array(results)) { /* T4 */
        const json_t *meta = json_object_get(root, "metadata");
        double scale = t4_unit_ns(json_string_value(json_object_get(meta, "timeunit")));
        size_t i;
        json_t *res;
        json_array_foreach(results, i, res) {
            const json_t *cfg = json_object_get(res, "configuration"), *inv = json_object_get(res, "invalidity");
            char *key = json_is_object(cfg) ? make_key(cfg, names, n, &missing) : NULL;
            if (key == NULL) {
                *err = cli_format("%s: results[%zu].configuration: %s%s", path, i,
                              missing ? "no value for parameter " : json_is_object(cfg) ? "out of memory" : "expected an object",
                              missing ? missing : "");
                ok = false;
                break;
            }
            const json_t *times = json_object_get(res, "times");
            ok = add_record(out, key, json_object_get(times, "runtimes"), scale, time_measurement(res),
                            json_is_string(inv) ? json_string_value(inv) : "correct", recorded_ns(json_object_get(times, "compilation"), scale),
                            recorded_ns(json_object_get(times, "framework"), scale),
                            recorded_sum(recorded_ns(json_object_get(times, "validation"), scale),
                                         recorded_ns(json_object_get(times, "search_algorithm"), scale)));
            free(key);
            if (!ok) {
                *err = cli_format("%s: out of memory", path);
                break;
            }
        }
    } else if (json_is_object(cache)) { /* Kernel Tuner's cache: times in ms */
        const char *k;
        json_t *entry;
        json_object_foreach(cache, k, entry) {
            char *key = json_is_object(entry) ? make_key(entry, names, n, &missing) : NULL;
            if (key == NULL) {
                *err = cli_format("%s: cache[\"%s\"]: %s%s", path, k,
                              missing ? "no value for parameter " : json_is_object(entry) ? "out of memory" : "expected an object",
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
            ok = add_record(out, key, json_object_get(entry, "times"), 1e6, json_is_number(t) ? json_number_value(t) : -1, inv,
                            recorded_ns(json_object_get(entry, "compile_time"), 1e6), recorded_ns(json_object_get(entry, "framework_time"), 1e6),
                            recorded_sum(recorded_ns(json_object_get(entry, "verification_time"), 1e6),
                                         recorded_ns(json_object_get(entry, "strategy_time"), 1e6)));
            free(key);
            if (!ok) {
                *err = cli_format("%s: out of memory", path);
                break;
            }
        }
    } else {
        *err = cli_format("%s: neither T4 results (a \"results\" array) nor a Kernel Tuner cache (a \"cache\" object)", path);
        ok = false;
    }
    json_decref(root);
    if (!ok) {
        t4_free(out);
        return false;
    }
    if (out->n > 0) qsort(out->recs, out->n, sizeof *out->recs, t4_compare); /* sorted by key: found by bsearch (none: recs may be NULL) */
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
        free(r->recs[i].invalidity);
    }
    free(r->recs);
    memset(r, 0, sizeof *r);
}

/* Where the value of names[i] starts in text ("name=value,next=value"), or NULL. */
static const char *value_of(const char *text, const char *name) {
    size_t len = strlen(name);
    for (const char *p = text; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (strncmp(p, name, len) == 0 && p[len] == '=') return p + len + 1;
    return NULL;
}

json_t *t4_configuration(const char *text, const char *const *names, size_t n) {
    json_t *cfg = json_object();
    if (text == NULL) return cfg;
    /* parameters come in declaration order; a value ends where ",<next name>=" begins, so that
     * a string value may hold a comma (derived values, which may follow, are left out) */
    const char *p = text;
    for (size_t i = 0; i < n; i++) {
        const char *v = value_of(p, names[i]);
        if (v == NULL) continue;
        const char *end = v + strlen(v);
        for (size_t j = i + 1; j < n; j++) {
            size_t len = strlen(names[j]);
            for (const char *c = strchr(v, ','); c && c < end; c = strchr(c + 1, ','))
                if (strncmp(c + 1, names[j], len) == 0 && c[1 + len] == '=') {
                    end = c;
                    break;
                }
        }
        if (i + 1 == n) { /* the last parameter: up to a derived value's ",name=" if any */
            for (const char *c = strchr(v, ','); c; c = strchr(c + 1, ',')) {
                const char *eq = c + 1 + strcspn(c + 1, "=,");
                if (*eq == '=' && eq > c + 1) {
                    end = c;
                    break;
                }
            }
        }
        char *value = malloc((size_t)(end - v) + 1);
        if (value == NULL) break;
        memcpy(value, v, (size_t)(end - v));
        value[end - v] = '\0';
        char *e;
        long long iv = strtoll(value, &e, 10);
        if (*value && *e == '\0') {
            json_object_set_new(cfg, names[i], json_integer(iv));
        } else {
            double dv = strtod(value, &e);
            if (*value && *e == '\0') json_object_set_new(cfg, names[i], json_real(dv));
            else json_object_set_new(cfg, names[i], json_string(value));
        }
        free(value);
        p = end;
    }
    return cfg;
}
