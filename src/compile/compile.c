/*
 * compile.c - building variants: the on-disk artifact cache, one build at a time on any thread.
 *
 * Every variant to build is keyed by a 128-bit hash of everything that can change its artifact:
 * the library version and artifact format, the backend, the compiler's identity and default
 * options, the device's fingerprint (its architecture), the kernel name, the source, the
 * defines (see below), the options, the op's signature and which arguments are constants (by name).
 * The artifact lives at <artifact dir>/<key><ext>. A file already there is used as it is (a hit:
 * a second process compiles nothing); otherwise the backend builds it under a temporary name
 * in the same directory and the core renames it into place, so a reader never sees half a
 * file and two processes racing to build one key both end with a whole one.
 * A build the compiler refuses leaves <key><ext>.failed with its log: the same key fails again
 * without compiling (a failure of the environment, such as a compiler killed, leaves nothing).
 * Defines enter the key through what the preprocessor makes of the source with them (pp.c), so
 * that configurations differing only in a parameter the code never reads share one artifact.
 * Builds run on the callers' threads (tune/builder.c's, bench/compile.c's; the C backend's each
 * drive a compiler process); variants with the same key are built once; the loaded module of a
 * key is shared.
 */
#include "compile/compile.h"
#include "compile/hash.h"
#include "compile/pp.h"
#include "backends/backends.h"

#include <pthread.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- the artifact directory ----------------------------------------------------------------- */

static kt_status mkdirs(const char *path) {
    char dir[4096];
    int e = kt__make_dirs(path, true, dir, sizeof dir);
    if (e == ENAMETOOLONG) return kt__err(KT_ERR_LIMIT, "artifact directory path is too long: %.100s...", path);
    if (e != 0) return kt__err(KT_ERR_SYSTEM, "cannot create directory %s: %s", dir, strerror(e));
    return KT_OK;
}

/* The default: KERNTUNE_ARTIFACTS, else $XDG_CACHE_HOME/kerntune/artifacts, else
 * ~/.cache/kerntune/artifacts, else /tmp/kerntune-<uid>/artifacts; refused, naming the variable,
 * when longer than KT__ARTIFACT_DIR_MAX. */
kt_status kt__default_artifact_dir(char *out, size_t len) {
    const char *v = getenv("KERNTUNE_ARTIFACTS"), *var = "KERNTUNE_ARTIFACTS";
    int n;
    if (v && *v) {
        n = snprintf(out, len, "%s", v);
    } else if ((v = getenv("XDG_CACHE_HOME")) && *v) {
        var = "XDG_CACHE_HOME";
        n = snprintf(out, len, "%s/kerntune/artifacts", v);
    } else if ((v = getenv("HOME")) && *v) {
        var = "HOME";
        n = snprintf(out, len, "%s/.cache/kerntune/artifacts", v);
    } else {
        n = snprintf(out, len, "/tmp/kerntune-%u/artifacts", (unsigned)getuid());
    }
    if (n < 0 || (size_t)n >= len || n > KT__ARTIFACT_DIR_MAX)
        return kt__err(KT_ERR_ENV, "kt_context_create: %s makes an artifact directory of %d characters; at most %d", var, n,
                       KT__ARTIFACT_DIR_MAX);
    return KT_OK;
}

/* ---- keys ----------------------------------------------------------------------------------- */

static void hash_str(kt__hasher *h, const char *s) { kt__hash_bytes(h, s ? s : "", s ? strlen(s) : 0); }

/* Bumped whenever what kerntune writes into an artifact changes (the C entry wrapper, the CUDA
 * header): artifacts of another format never match. */
#define KT__ARTIFACT_FORMAT "5"

/* Whether define i of r is one Kernel Tuner's contract may write otherwise than as a define: a
 * name containing loop_unroll_factor (KT_BUILD_KERNEL_TUNER). */
static bool unroll_define(const kt_build_request *r, size_t i) {
    if (!(r->flags & KT_BUILD_KERNEL_TUNER)) return false;
    const char *d = r->defines[i], *at = strstr(d, "loop_unroll_factor"), *eq = strchr(d, '=');
    return at != NULL && (eq == NULL || at < eq);
}

/* The preprocessed code's fingerprint (pp.c). Under Kernel Tuner's contract a backend may write a
 * loop_unroll_factor define as a C++ constant rather than a macro, and remove the lines that
 * name it when it is 0: so such a define is not given to the analysis as a macro but as a
 * name an option defines (any condition that reads it keeps both branches, and a line that uses
 * it hashes it as unknown), and its value enters the key on its own (build_key). Whichever way
 * the backend writes it, two configurations then share a fingerprint only when their code is the
 * same. */
static bool contract_fingerprint(const kt_build_request *r, uint64_t pp[2]) {
    size_t nunroll = 0;
    for (size_t i = 0; i < r->ndefines; i++) nunroll += unroll_define(r, i);
    if (nunroll == 0) return kt__pp_fingerprint(r->source, r->defines, r->ndefines, r->options, r->noptions, pp);
    const char **defs = calloc(r->ndefines, sizeof *defs), **opts = calloc(r->noptions + nunroll, sizeof *opts);
    char **named = calloc(nunroll, sizeof *named);
    bool ok = defs && opts && named;
    size_t nd = 0, no = 0, nn = 0;
    for (size_t i = 0; ok && i < r->noptions; i++) opts[no++] = r->options[i];
    for (size_t i = 0; ok && i < r->ndefines; i++) {
        if (!unroll_define(r, i)) {
            defs[nd++] = r->defines[i];
            continue;
        }
        size_t n = strlen(r->defines[i]) + 3;
        if ((named[nn] = malloc(n)) == NULL) ok = false;
        else snprintf(named[nn], n, "-D%s", r->defines[i]), opts[no++] = named[nn++];
    }
    ok = ok && kt__pp_fingerprint(r->source, defs, nd, opts, no, pp);
    for (size_t i = 0; i < nn; i++) free(named[i]);
    free(named), free(defs), free(opts);
    return ok;
}

static void build_key(const kt__build *bd, const char *compiler_id, char out[33]) {
    kt__hasher h = {0x6b65726e74756e65ull, 0x61727469666163ull};
    const kt_build_request *r = &bd->req;
    hash_str(&h, kt_version_string());
    hash_str(&h, KT__ARTIFACT_FORMAT);
    hash_str(&h, bd->backend->name);
    hash_str(&h, compiler_id);
    hash_str(&h, bd->device_fp);
    hash_str(&h, r->kernel_name);
    hash_str(&h, r->source);
    uint64_t pp[2];
    bool contract = kt__backend_has(bd->backend, KT__BACKEND_CONTRACT) && (r->flags & KT_BUILD_KERNEL_TUNER);
    if (r->ndefines > 0 && (kt__backend_caps(bd->backend) & KT_BACKEND_CAP_PREPROCESSED) && contract_fingerprint(r, pp)) {
        hash_str(&h, "|preprocessed|"); /* what the compiler sees, not how the defines spell it */
        kt__hash_bytes(&h, pp, sizeof pp);
    } else {
        for (size_t i = 0; i < r->ndefines; i++) hash_str(&h, r->defines[i]);
    }
    if (contract) { /* (absent without: the keys of other builds are unchanged) */
        hash_str(&h, "|kernel tuner|");
        for (size_t i = 0; i < r->ndefines; i++) /* as the backend may write them: their values themselves */
            if (unroll_define(r, i)) hash_str(&h, r->defines[i]);
    }
    hash_str(&h, "|options|");
    for (size_t i = 0; i < r->noptions; i++) hash_str(&h, r->options[i]);
    kt__hash_bytes(&h, r->arg_types, r->nargs * sizeof *r->arg_types);
    kt__hash_bytes(&h, r->arg_elems, r->nargs * sizeof *r->arg_elems);
    for (size_t i = 0; r->arg_constant && i < r->nargs; i++) /* which argument goes into which variable */
        if (r->arg_constant[i]) kt__hash_bytes(&h, &i, sizeof i), hash_str(&h, r->arg_names[i]);
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)h.a, (unsigned long long)h.b);
}

/* ---- the pool ------------------------------------------------------------------------------- */

/* A temporary name no other thread or process can pick: the pid alone repeats across PID
 * namespaces sharing one cache volume, so random bits join it. */
static void temp_name(const char *path, char *out, size_t len) {
    static _Atomic uint64_t seq;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t r = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)(uintptr_t)out ^
                 (atomic_fetch_add(&seq, 1) * 0x9e3779b97f4a7c15ull);
    r ^= kt__fnv1a(&ts, sizeof ts, (uint64_t)getpid());
    snprintf(out, len, "%.4000s.tmp.%ld.%016llx", path, (long)getpid(), (unsigned long long)r);
}

/* Builds one artifact into place. */
static void build_one(kt__artifacts *arts, kt__build *bd) {
    const kt_backend *b = bd->backend;
    char tmp[4200];
    temp_name(bd->path, tmp, sizeof tmp);
    bd->req.out_path = tmp;
    bd->log[0] = '\0';
    double t0 = kt__now_s();
    bd->status = b->build(bd->bstate, bd->device, &bd->req, bd->log, sizeof bd->log);
    bd->build_ms = (kt__now_s() - t0) * 1e3;
    atomic_fetch_add(&arts->compiles, 1);
    bd->req.out_path = NULL;
    if (bd->status == KT_OK && rename(tmp, bd->path) != 0) {
        snprintf(bd->log, sizeof bd->log, "cannot move the artifact to %.1900s: %s", bd->path, strerror(errno));
        bd->status = KT_ERR_SYSTEM;
    }
    if (bd->status != KT_OK) unlink(tmp);
}

/* Writes an artifact the program carries into place; false when there is none or it cannot. */
static bool place_carried(kt__artifacts *arts, kt__build *bd) {
    if (arts->carried == NULL) return false;
    const char *name = strrchr(bd->path, '/');
    size_t len = 0;
    const unsigned char *bytes = arts->carried(arts->carried_user, name ? name + 1 : bd->path, &len);
    if (bytes == NULL || len == 0) return false;
    char tmp[4200];
    temp_name(bd->path, tmp, sizeof tmp);
    FILE *f = fopen(tmp, "wb");
    bool ok = f != NULL && fwrite(bytes, 1, len, f) == len;
    if (f != NULL && fclose(f) != 0) ok = false;
    if (ok && rename(tmp, bd->path) != 0) ok = false;
    if (!ok) unlink(tmp);
    return ok;
}

static void load_one(kt__build *bd) {
    char err[1024] = "";
    bd->status = bd->backend->load(bd->bstate, bd->device, bd->path, bd->req.kernel_name, &bd->module, err, sizeof err);
    if (bd->status != KT_OK) snprintf(bd->log, sizeof bd->log, "%s", err);
}

/* A build the compiler refused is kept next to where its artifact would be, as <path>.failed
 * holding the log, so that the same code is not compiled again to fail again. */
static void failed_path(const kt__build *bd, char *out, size_t len) { snprintf(out, len, "%.4000s.failed", bd->path); }

static bool recorded_failure(kt__build *bd) {
    char path[4200];
    failed_path(bd, path, sizeof path);
    FILE *f = fopen(path, "r");
    if (f == NULL) return false;
    size_t n = fread(bd->log, 1, sizeof bd->log - 1, f);
    fclose(f);
    bd->log[n] = '\0';
    bd->status = KT_ERR_BACKEND;
    bd->cached = true;
    bd->build_ms = 0;
    return true;
}

static void record_failure(const kt__build *bd) {
    char path[4200], tmp[4300];
    failed_path(bd, path, sizeof path);
    temp_name(path, tmp, sizeof tmp);
    FILE *f = fopen(tmp, "w");
    if (f == NULL) return; /* not kept: compiled again next time, nothing worse */
    bool ok = fputs(bd->log, f) >= 0;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) unlink(tmp);
}

/* Builds (or finds) and loads one artifact. A cached artifact that does not load (truncated,
 * corrupt) is removed and built once more. */
void kt__build_run_one(kt__artifacts *arts, kt__build *bd) {
    struct stat stt;
    bool cached = stat(bd->path, &stt) == 0 && S_ISREG(stt.st_mode) && stt.st_size > 0;
    if (!cached) cached = place_carried(arts, bd); /* a decision compiled into the program brought it */
    if (!cached && recorded_failure(bd)) {
        atomic_fetch_add(&arts->hits, 1);
        return;
    }
    if (!cached) {
        build_one(arts, bd);
        if (bd->req.cancelled && bd->req.cancelled(bd->req.cancel_user)) { /* unwanted now: whatever it says, not the code's failure */
            if (bd->status == KT_OK) bd->status = KT_ERR_SYSTEM, snprintf(bd->log, sizeof bd->log, "cancelled");
            return;
        }
        if (bd->status == KT_ERR_BACKEND) record_failure(bd);
        if (bd->status != KT_OK) return;
    }
    if (bd->no_load) {
        if (cached) bd->cached = true, atomic_fetch_add(&arts->hits, 1);
        return;
    }
    load_one(bd);
    if (cached && bd->status != KT_OK) {
        unlink(bd->path);
        build_one(arts, bd);
        if (bd->status == KT_OK) load_one(bd);
        return;
    }
    if (cached) {
        bd->cached = true;
        atomic_fetch_add(&arts->hits, 1);
    }
}

kt_status kt__build_begin(kt__artifacts *arts, const kt_backend *b, void *bstate, size_t device, char *compiler, size_t len) {
    char err[1024] = "";
    compiler[0] = '\0';
    kt_status st = b->compiler_id(bstate, device, compiler, len, err, sizeof err);
    const char *carried = st != KT_OK && arts->carried_compiler ? arts->carried_compiler(arts->carried_user, b, device) : NULL;
    if (carried) snprintf(compiler, len, "%s", carried), st = KT_OK; /* what built the artifacts the program carries */
    if (st != KT_OK) return kt__err(st, "building variants: the %s backend's compiler: %s", b->name, err);
    return mkdirs(arts->dir);
}

void kt__build_keyed(const kt__artifacts *arts, const char *compiler, kt__build *bd) {
    const kt_backend *b = bd->backend;
    build_key(bd, compiler, bd->key);
    /* at most KT__ARTIFACT_DIR_MAX + 1 + 32 + 16 characters: it fits */
    snprintf(bd->path, sizeof bd->path, "%s/%s%.16s", arts->dir, bd->key, b->artifact_ext ? b->artifact_ext : "");
    bd->dup_of = -1;
}

