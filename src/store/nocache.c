/*
 * nocache.c - the persistent cache in a build without SQLite and jansson (a KT_CUDA_ONLY build
 * on an image without their development files): every call fails with KT_ERR_STATE saying so.
 */
#ifdef KT_NO_CACHE

#include "store/store.h"
#include "util/util.h"

#include <stdlib.h>
#include <string.h>

static kt_status kt__no_cache(const char *fn) {
    return kt__err(KT_ERR_STATE, "%s: this kerntune was built without the persistent cache (no SQLite or jansson at build time)", fn);
}

kt_status kt_cache_default_path(char *buf, size_t len) {
    if (buf != NULL && len > 0) buf[0] = '\0';
    return kt__no_cache("kt_cache_default_path");
}
kt_status kt_cache_open(const char *path, kt_cache **out) {
    (void)path;
    if (out != NULL) *out = NULL;
    return kt__no_cache("kt_cache_open");
}
void kt_cache_close(kt_cache *cache) { (void)cache; }
const char *kt_cache_path(const kt_cache *cache) { (void)cache; return NULL; }
const char *kt_cache_warning(const kt_cache *cache) { (void)cache; return ""; }
kt_status kt_cache_count(kt_cache *cache, const char *op, const char *device, size_t *count) {
    (void)cache, (void)op, (void)device;
    if (count != NULL) *count = 0;
    return kt__no_cache("kt_cache_count");
}
kt_status kt_cache_export(kt_cache *cache, const char *op, const char *device, char **json) {
    (void)cache, (void)op, (void)device;
    if (json != NULL) *json = NULL;
    return kt__no_cache("kt_cache_export");
}
kt_status kt_cache_import(kt_cache *cache, const char *json, int replace, size_t *added, size_t *replaced, size_t *kept) {
    (void)cache, (void)json, (void)replace, (void)added, (void)replaced, (void)kept;
    return kt__no_cache("kt_cache_import");
}
kt_status kt_cache_explain(kt_cache *cache, const char *op, const char *device, const char *arch, const char *vendor,
                           const int64_t *key, size_t nkey, char **json) {
    (void)cache, (void)op, (void)device, (void)arch, (void)vendor, (void)key, (void)nkey;
    if (json != NULL) *json = NULL;
    return kt__no_cache("kt_cache_explain");
}
kt_status kt_cache_remove(kt_cache *cache, const char *op, const char *device, size_t *removed) {
    (void)cache, (void)op, (void)device;
    if (removed != NULL) *removed = 0;
    return kt__no_cache("kt_cache_remove");
}
void kt_free(void *p) { free(p); }
kt_status kt__store_list(kt_cache *c, const char *op, const char *version, kt__store_rec **out, size_t *n) {
    (void)c, (void)op, (void)version;
    if (out != NULL) *out = NULL;
    if (n != NULL) *n = 0;
    return kt__no_cache("kt__store_list");
}
kt_status kt__store_rec_json(const kt__store_rec *r, char **text) {
    (void)r;
    *text = NULL;
    return kt__no_cache("kt__store_rec_json");
}
kt_status kt__store_rec_parse(const char *text, const char *what, kt__store_rec *out) {
    (void)text, (void)what;
    memset(out, 0, sizeof *out);
    return kt__no_cache("kt__store_rec_parse");
}
kt_status kt__store_get(kt_cache *c, const kt__store_rec *id, kt__store_rec *out) {
    (void)c, (void)id, (void)out;
    return kt__no_cache("kt__store_get");
}
kt_status kt__store_put(kt_cache *c, const kt__store_rec *rec) {
    (void)c, (void)rec;
    return kt__no_cache("kt__store_put");
}
kt_status kt__store_progress_put(kt_cache *c, const kt__store_rec *id, const kt__store_unit *units, size_t n) {
    (void)c, (void)id, (void)units, (void)n;
    return kt__no_cache("kt__store_progress_put");
}
kt_status kt__store_get_unit(kt_cache *c, const kt__store_rec *id, const char *unit_hash, bool skip_own, kt__store_unit *out) {
    (void)c, (void)id, (void)unit_hash, (void)skip_own, (void)out;
    return kt__no_cache("kt__store_get_unit");
}

kt_status kt_cache_deferred(kt_cache *cache, const char *op, const char *device, char **json) {
    (void)cache, (void)op, (void)device;
    if (json != NULL) *json = NULL;
    return kt__no_cache("kt_cache_deferred");
}
kt_status kt__store_defer_put(kt_cache *c, const kt__store_rec *id, const char *args) {
    (void)c, (void)id, (void)args;
    return kt__no_cache("kt__store_defer_put");
}
kt_status kt__store_defer_list(kt_cache *c, const kt__store_rec *id, kt__store_deferred **out, size_t *n) {
    (void)c, (void)id;
    if (out != NULL) *out = NULL;
    if (n != NULL) *n = 0;
    return kt__no_cache("kt__store_defer_list");
}
kt_status kt__store_defer_remove(kt_cache *c, const kt__store_rec *id) {
    (void)c, (void)id;
    return kt__no_cache("kt__store_defer_remove");
}

#endif /* KT_NO_CACHE */
