/*
 * disagree.c - naming the parameter that makes configurations disagree with the reference.
 *
 * A tuning whose configurations mostly disagree with the reference is usually not finding
 * broken kernels: a parameter changes what the kernel computes (a stencil's number of time
 * steps per launch), or the reference is wrong. Given the configurations compared so far and
 * whether each agreed, the first parameter whose values never overlap between the two groups
 * is named, with the --define that keeps the agreeing values.
 */
#include "disagree.h"

#include "text.h"

#include <stdlib.h>
#include <string.h>

/* The value of parameter k in config (allocated), found between "NAME=" and the next
 * ",NEXT=" (names in order, so a value holding a comma stays whole); NULL when out of memory
 * or absent. */
static char *value_of(const char *config, const char *const *names, size_t nnames, size_t k) {
    size_t len = strlen(names[k]);
    const char *at = NULL;
    for (const char *s = config; s && *s; s = strchr(s, ',') ? strchr(s, ',') + 1 : NULL)
        if (strncmp(s, names[k], len) == 0 && s[len] == '=') {
            at = s + len + 1;
            break;
        }
    if (at == NULL) return NULL;
    const char *end = at + strlen(at);
    if (k + 1 < nnames) {
        size_t nl = strlen(names[k + 1]);
        for (const char *c = strchr(at, ','); c; c = strchr(c + 1, ','))
            if (strncmp(c + 1, names[k + 1], nl) == 0 && c[1 + nl] == '=') {
                end = c;
                break;
            }
    }
    return cli_format("%.*s", (int)(end - at), at);
}

static bool has(char *const *set, size_t n, const char *v) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(set[i], v) == 0) return true;
    return false;
}

static void free_set(char **set, size_t n) {
    for (size_t i = 0; set && i < n; i++) free(set[i]);
    free(set);
}

bool diagnose(const char *const *names, size_t nnames, const verdict *v, size_t n, diagnosis *out) {
    memset(out, 0, sizeof *out);
    out->param = (size_t)-1;
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++) wrong += !v[i].agreed;
    for (size_t k = 0; k < nnames; k++) {
        char **a = calloc(n + 1, sizeof *a), **d = calloc(n + 1, sizeof *d);
        size_t na = 0, nd = 0;
        bool ok = a && d, apart = true;
        for (size_t i = 0; ok && i < n; i++) {
            char *val = value_of(v[i].config, names, nnames, k);
            if (val == NULL) { /* not this problem's configuration text: nothing to say of k */
                ok = false;
                break;
            }
            char **set = v[i].agreed ? a : d, **other = v[i].agreed ? d : a;
            size_t *ns = v[i].agreed ? &na : &nd, no = v[i].agreed ? nd : na;
            if (has(other, no, val)) apart = false;
            if (has(set, *ns, val)) free(val);
            else set[(*ns)++] = val;
        }
        bool better = ok && apart && na > 0 && nd > 0 && (out->param == (size_t)-1 || na < out->nagreeing);
        if (better) {
            free_set(out->agreeing, out->nagreeing);
            out->param = k, out->agreeing = a, out->nagreeing = na;
            a = NULL;
        }
        free_set(a, na);
        free_set(d, nd);
    }
    if (out->param == (size_t)-1) {
        out->message = cli_format("%zu of the %zu configurations compared disagree with the reference, and no single parameter "
                                  "separates those that agree from those that do not: check the reference (ReferenceArguments, "
                                  "the Default configuration, --answer), or pass --validate off",
                                  wrong, n);
        return out->message != NULL;
    }
    const char *p = names[out->param];
    size_t len = 1;
    for (size_t i = 0; i < out->nagreeing; i++) len += strlen(out->agreeing[i]) + 2;
    char *list = malloc(len), *plain = malloc(len);
    if (list == NULL || plain == NULL) {
        free(list), free(plain);
        return false;
    }
    list[0] = plain[0] = '\0';
    for (size_t i = 0; i < out->nagreeing; i++) {
        if (i) strcat(list, ", "), strcat(plain, ",");
        strcat(list, out->agreeing[i]), strcat(plain, out->agreeing[i]);
    }
    if (out->nagreeing == 1)
        out->message = cli_format("outputs differ whenever %s != %s: this parameter changes what the kernel computes; fix it with "
                                  "--define %s=%s, or pass --validate off", p, list, p, plain);
    else
        out->message = cli_format("outputs differ whenever %s is none of %s: this parameter changes what the kernel computes; fix "
                                  "it with --define %s=%s, or pass --validate off", p, list, p, plain);
    free(list), free(plain);
    return out->message != NULL;
}

void diagnosis_free(diagnosis *d) {
    free_set(d->agreeing, d->nagreeing);
    free(d->message);
    memset(d, 0, sizeof *d);
}
