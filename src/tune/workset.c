/*
 * workset.c - the arguments that tuning runs use, and keeping the caller's data safe from them.
 *
 * Tuning runs every candidate many times. In PROTECT mode they run on the caller's buffers:
 * each ReadWrite buffer is copied once (the snapshot) and restored before every run, outside
 * the timed region, and once more before the final launch. In CLONE mode they run on private
 * copies; in GENERATED mode on buffers filled by generators, so the caller's data is never read.
 * Accumulating outputs are filled with their declared value before every run; other WriteOnly
 * outputs are poisoned before validation runs so that an element a candidate leaves unwritten
 * shows. Extra memory goes through the C backend's buffer methods (the buffer interface that
 * device backends implement too) and is counted, so a tuning can report its peak.
 */
#include "backends/backends.h"
#include "tune/stages.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- element encoding ---------------------------------------------------------------------- */

static uint16_t f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, exp = (x >> 23) & 0xffu, mant = x & 0x7fffffu;
    if (exp == 0xff) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u | (mant >> 13) : 0));
    int e = (int)exp - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) { /* subnormal half, or zero */
        if (e < -10) return (uint16_t)sign;
        mant |= 0x800000u;
        unsigned shift = (unsigned)(14 - e);
        uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1), halfway = 1u << (shift - 1);
        if (rem > halfway || (rem == halfway && (h & 1))) h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = sign | ((uint32_t)e << 10) | (mant >> 13), rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++; /* a carry into the exponent is right */
    return (uint16_t)h;
}

static float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0) {
        float f = (float)mant * (1.0f / 16777216.0f);
        return sign ? -f : f;
    }
    uint32_t bits = exp == 31 ? sign | 0x7f800000u | (mant << 13) : sign | ((exp + 112) << 23) | (mant << 13);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static uint16_t f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* NaN stays NaN */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

static float bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* Converts v to an integer in [lo, hi] (NaN to 0), avoiding the undefined out-of-range cast. */
static int64_t clamp_int(double v, double lo, double hi) {
    if (isnan(v)) return 0;
    if (v <= lo) return (int64_t)lo;
    if (v >= hi) return v >= 9.2e18 ? INT64_MAX : (int64_t)hi;
    return (int64_t)v;
}

void kt__encode(kt_type t, double v, void *out) {
    switch (t) {
    case KT_TYPE_I8: { int8_t x = (int8_t)clamp_int(v, -128, 127); memcpy(out, &x, 1); break; }
    case KT_TYPE_I16: { int16_t x = (int16_t)clamp_int(v, -32768, 32767); memcpy(out, &x, 2); break; }
    case KT_TYPE_I32: { int32_t x = (int32_t)clamp_int(v, -2147483648.0, 2147483647.0); memcpy(out, &x, 4); break; }
    case KT_TYPE_I64: { int64_t x = clamp_int(v, -9.2e18, 9.2e18); memcpy(out, &x, 8); break; }
    case KT_TYPE_U8: { uint8_t x = (uint8_t)clamp_int(v, 0, 255); memcpy(out, &x, 1); break; }
    case KT_TYPE_U16: { uint16_t x = (uint16_t)clamp_int(v, 0, 65535); memcpy(out, &x, 2); break; }
    case KT_TYPE_U32: { uint32_t x = (uint32_t)clamp_int(v, 0, 4294967295.0); memcpy(out, &x, 4); break; }
    case KT_TYPE_U64: { uint64_t x = (uint64_t)clamp_int(v, 0, 9.2e18); memcpy(out, &x, 8); break; }
    case KT_TYPE_F32: { float x = (float)v; memcpy(out, &x, 4); break; }
    case KT_TYPE_F64: memcpy(out, &v, 8); break;
    case KT_TYPE_F16: { uint16_t x = f32_to_f16((float)v); memcpy(out, &x, 2); break; }
    case KT_TYPE_BF16: { uint16_t x = f32_to_bf16((float)v); memcpy(out, &x, 2); break; }
    case KT_TYPE_BUFFER: case KT_TYPE_BYTES: break;
    }
}

double kt__decode(kt_type t, const void *base, size_t i) {
    const unsigned char *p = (const unsigned char *)base + i * kt_type_size(t);
    switch (t) {
    case KT_TYPE_I8: { int8_t x; memcpy(&x, p, 1); return x; }
    case KT_TYPE_I16: { int16_t x; memcpy(&x, p, 2); return x; }
    case KT_TYPE_I32: { int32_t x; memcpy(&x, p, 4); return x; }
    case KT_TYPE_I64: { int64_t x; memcpy(&x, p, 8); return (double)x; }
    case KT_TYPE_U8: return *p;
    case KT_TYPE_U16: { uint16_t x; memcpy(&x, p, 2); return x; }
    case KT_TYPE_U32: { uint32_t x; memcpy(&x, p, 4); return x; }
    case KT_TYPE_U64: { uint64_t x; memcpy(&x, p, 8); return (double)x; }
    case KT_TYPE_F32: { float x; memcpy(&x, p, 4); return x; }
    case KT_TYPE_F64: { double x; memcpy(&x, p, 8); return x; }
    case KT_TYPE_F16: { uint16_t x; memcpy(&x, p, 2); return f16_to_f32(x); }
    case KT_TYPE_BF16: { uint16_t x; memcpy(&x, p, 2); return bf16_to_f32(x); }
    case KT_TYPE_BUFFER: case KT_TYPE_BYTES: break;
    }
    return 0;
}

/* Poison: a NaN with a recognisable payload for floats, 0xA5 bytes for integers. */
const void *kt__poison(kt_type t) {
    static const uint64_t f64 = 0x7ff8a5a5a5a5a5a5ull, ints = 0xa5a5a5a5a5a5a5a5ull;
    static const uint32_t f32 = 0x7fc5a5a5u;
    static const uint16_t f16 = 0x7e5au, bf16 = 0x7fc5u;
    switch (t) {
    case KT_TYPE_F64: return &f64;
    case KT_TYPE_F32: return &f32;
    case KT_TYPE_F16: return &f16;
    case KT_TYPE_BF16: return &bf16;
    default: return &ints;
    }
}

/* ---- extra host memory, counted --------------------------------------------------------- */

kt_status kt__extra_alloc(kt__workset *ws, size_t bytes, void **out) {
    *out = malloc(bytes ? bytes : 1);
    if (*out == NULL) return kt__err(KT_ERR_NO_MEMORY, "%s(op '%s'): tuning: out of memory allocating %zu bytes", ws->where, ws->op->name, bytes);
    ws->cur += bytes;
    if (ws->cur > ws->peak) ws->peak = ws->cur;
    return KT_OK;
}

void kt__extra_free(kt__workset *ws, void *p, size_t bytes) {
    if (p == NULL) return;
    free(p);
    ws->cur -= bytes;
}

/* ---- the op's device memory ------------------------------------------------------------ */

static kt_status dcopy(kt__workset *ws, void *dst, const void *src, size_t bytes, kt_copy_dir dir) {
    char err[256] = "";
    kt_status st = ws->b->buffer_copy(ws->bstate, ws->dev, dst, src, bytes, dir, err, sizeof err);
    if (st != KT_OK) return kt__err(st, "%s(op '%s'): tuning: %s", ws->where, ws->op->name, err);
    return KT_OK;
}

kt_status kt__workset_to_host(const kt__workset *ws, void *dst, const void *buf, size_t bytes) {
    if (ws->host) {
        memcpy(dst, buf, bytes);
        return KT_OK;
    }
    return dcopy((kt__workset *)ws, dst, buf, bytes, KT_COPY_DEVICE_TO_HOST);
}

kt_status kt__workset_from_host(const kt__workset *ws, void *buf, const void *src, size_t bytes) {
    if (ws->host) {
        memcpy(buf, src, bytes);
        return KT_OK;
    }
    return dcopy((kt__workset *)ws, buf, src, bytes, KT_COPY_HOST_TO_DEVICE);
}

static kt_status dfill(kt__workset *ws, void *dst, size_t bytes, const void *pattern, size_t pattern_bytes) {
    char err[256] = "";
    kt_status st = ws->b->buffer_fill(ws->bstate, ws->dev, dst, bytes, pattern, pattern_bytes, err, sizeof err);
    if (st != KT_OK) return kt__err(st, "%s(op '%s'): tuning: %s", ws->where, ws->op->name, err);
    return KT_OK;
}

static kt_status dalloc(kt__workset *ws, size_t bytes, void **out) {
    char err[256] = "";
    kt_status st = ws->b->buffer_alloc(ws->bstate, ws->dev, bytes, out, err, sizeof err);
    if (st != KT_OK) return kt__err(st, "%s(op '%s'): tuning: %s", ws->where, ws->op->name, err);
    ws->cur += bytes;
    if (ws->cur > ws->peak) ws->peak = ws->cur;
    return KT_OK;
}

static void dfree(kt__workset *ws, void *p, size_t bytes) {
    if (p == NULL) return;
    ws->b->buffer_free(ws->bstate, ws->dev, p);
    ws->cur -= bytes;
}

/* Grows the host scratch to bytes. */
static kt_status scratch(kt__workset *ws, size_t bytes) {
    if (bytes <= ws->scratch_bytes) return KT_OK;
    kt__extra_free(ws, ws->scratch, ws->scratch_bytes);
    ws->scratch = NULL;
    ws->scratch_bytes = 0;
    kt_status st = kt__extra_alloc(ws, bytes, &ws->scratch);
    if (st == KT_OK) ws->scratch_bytes = bytes;
    return st;
}

kt_status kt__to_host(kt__workset *ws, void *dst, const void *src, size_t bytes) {
    if (ws->host) {
        if (bytes) memcpy(dst, src, bytes);
        return KT_OK;
    }
    return dcopy(ws, dst, src, bytes, KT_COPY_DEVICE_TO_HOST);
}

const void *kt__output_host(kt__workset *ws, const void *buf, size_t bytes) {
    if (ws->host) return buf;
    if (scratch(ws, bytes) != KT_OK || kt__to_host(ws, ws->scratch, buf, bytes) != KT_OK) return NULL;
    return ws->scratch;
}

/* A hash of host bytes, to notice writes to ReadOnly buffers: four independent lanes of eight
 * bytes, so the multiplications overlap (inputs of hundreds of megabytes are hashed per
 * validation run). */
static uint64_t bytes_hash(const void *p, size_t bytes) {
    const unsigned char *b = p;
    uint64_t h[4] = {0x243f6a8885a308d3ull ^ bytes, 0x13198a2e03707344ull, 0xa4093822299f31d0ull, 0x082efa98ec4e6c89ull};
    size_t i = 0;
    for (; i + 32 <= bytes; i += 32)
        for (int l = 0; l < 4; l++) {
            uint64_t w;
            memcpy(&w, b + i + 8 * l, 8);
            h[l] = (h[l] ^ w) * 0xff51afd7ed558ccdull;
            h[l] ^= h[l] >> 32;
        }
    uint64_t x = h[0];
    for (int l = 1; l < 4; l++) x = (x ^ h[l]) * 0xc4ceb9fe1a85ec53ull, x ^= x >> 29;
    return kt__fnv1a(b + i, bytes - i, x);
}

/* The hash of an argument buffer's contents: the backend's digest on a workset that checks on
 * the device, else read back (from a device) and hashed here; 0 with *ok false when it fails. */
static uint64_t content_hash(kt__workset *ws, const void *buf, size_t bytes, bool *ok) {
    if (ws->dev_checks) {
        uint64_t h = 0;
        char err[256] = "";
        kt_status st = ws->b->digest(ws->bstate, ws->dev, buf, bytes, &h, err, sizeof err);
        *ok = st == KT_OK;
        if (!*ok) kt__err(st, "%s(op '%s'): tuning: the digest of a read-only argument: %s", ws->where, ws->op->name, err);
        return h;
    }
    const void *host = kt__output_host(ws, buf, bytes);
    *ok = host != NULL || bytes == 0;
    return host ? bytes_hash(host, bytes) : 0;
}

kt_status kt__workset_keep(kt__workset *ws, const void *buf, size_t bytes, void **copy) {
    *copy = NULL;
    if (!ws->dev_checks) return KT_OK;
    kt_status st = dalloc(ws, bytes, copy);
    if (st == KT_OK && (st = dcopy(ws, *copy, buf, bytes, KT_COPY_DEVICE_TO_DEVICE)) != KT_OK) {
        dfree(ws, *copy, bytes);
        *copy = NULL;
    }
    return st;
}

void kt__workset_unkeep(kt__workset *ws, void *copy, size_t bytes) { dfree(ws, copy, bytes); }

bool kt__workset_close(kt__workset *ws, kt_type t, const void *actual, const void *expected, size_t count, double atol,
                       double rtol) {
    if (!ws->dev_checks || expected == NULL) return false;
    int close = 0;
    char err[256] = "";
    return ws->b->all_close(ws->bstate, ws->dev, t, actual, expected, count, atol, rtol, &close, err, sizeof err) == KT_OK &&
           close == 1;
}

/* ---- generated inputs ---------------------------------------------------------------------- */

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static kt_status generate_host(const kt__workset *ws, size_t arg, void *dst, size_t bytes) {
    const kt_op *op = ws->op;
    const kt_arg *caller = ws->caller;
    const kt__argdecl *d = &op->args[arg];
    if (d->gen_fn != NULL) {
        int rc = d->gen_fn(dst, bytes, d->elem, caller, op->nargs, d->gen_user);
        if (rc != 0)
            return kt__err(KT_ERR_HOOK, "%s(op '%s'): the generator of argument '%s' returned %d", ws->where, op->name,
                           d->name, rc);
        return KT_OK;
    }
    size_t es = d->esize, n = bytes / es;
    if (d->gen == KT_GEN_CONSTANT) {
        unsigned char v[8];
        kt__encode(d->elem, d->gen_value, v);
        for (size_t i = 0; i < n; i++) memcpy((unsigned char *)dst + i * es, v, es);
        return KT_OK;
    }
    uint64_t state = op->seed ^ (0x9e3779b97f4a7c15ull * (arg + 1));
    bool is_float = d->elem == KT_TYPE_F32 || d->elem == KT_TYPE_F64 || d->elem == KT_TYPE_F16 || d->elem == KT_TYPE_BF16;
    for (size_t i = 0; i < n; i++) {
        uint64_t r = splitmix(&state);
        double v = is_float ? (double)(r >> 11) * 0x1p-52 - 1.0 : (double)(r >> 60);
        kt__encode(d->elem, v, (unsigned char *)dst + i * es);
    }
    return KT_OK;
}

/* Fills device buffer dst with argument arg's generated values. */
static kt_status generate(kt__workset *ws, size_t arg, void *dst, size_t bytes) {
    if (ws->host) return generate_host(ws, arg, dst, bytes);
    void *tmp = NULL;
    kt_status st = kt__extra_alloc(ws, bytes, &tmp);
    if (st == KT_OK) st = generate_host(ws, arg, tmp, bytes);
    if (st == KT_OK) st = dcopy(ws, dst, tmp, bytes, KT_COPY_HOST_TO_DEVICE);
    kt__extra_free(ws, tmp, bytes);
    return st;
}

/* ---- the workset ---------------------------------------------------------------------------- */

/* The alignment window of buffer argument arg: the largest alignment that a requirement or a
 * key component of the op looks at (at least 64, at most 16 MiB). A copy placed at the same
 * offset within such a window as the caller's pointer passes every alignment test the caller's
 * pointer passes. */
static size_t align_window(const kt_op *op, size_t arg) {
    uint64_t w = 64;
    for (size_t k = 0; k < op->nkeys; k++)
        if (op->keys[k].kind == KT__KEY_ALIGN && op->keys[k].arg == arg && op->keys[k].max_align > w) w = op->keys[k].max_align;
    for (size_t c = 0; c < op->ncands; c++)
        for (size_t r = 0; r < op->cands[c].nreqs; r++)
            if (op->cands[c].reqs[r].kind == KT__REQ_ALIGN && op->cands[c].reqs[r].arg == arg &&
                (uint64_t)op->cands[c].reqs[r].value > w)
                w = (uint64_t)op->cands[c].reqs[r].value;
    return w > ((uint64_t)1 << 24) ? (size_t)1 << 24 : (size_t)w;
}

/* Allocates a work buffer for argument i; on the host it mirrors the caller's pointer's
 * alignment (device buffers are handles, aligned by their allocator). */
static kt_status alloc_mirror(kt__workset *ws, size_t i, size_t bytes) {
    size_t window = ws->host ? align_window(ws->op, i) : 0;
    size_t total = bytes + window;
    kt_status st = dalloc(ws, total, &ws->owned[i]);
    if (st != KT_OK) return st;
    ws->owned_bytes[i] = total;
    if (!ws->host) {
        ws->args[i].ptr = ws->owned[i];
        return KT_OK;
    }
    /* The first address at or after the allocation that is congruent to the caller's pointer
     * modulo the window: at most window - 1 bytes in, so bytes + window always suffice. */
    uintptr_t start = (uintptr_t)ws->owned[i], want = (uintptr_t)ws->caller[i].ptr;
    ws->args[i].ptr = (void *)(start + ((want - start) & (window - 1)));
    return KT_OK;
}

/* Fills a copied or generated buffer from its source: the caller's data (CLONE) or the
 * generator (GENERATED). */
static kt_status fill_input(kt__workset *ws, size_t i) {
    if (ws->inputs == KT_INPUTS_CLONE) return dcopy(ws, ws->args[i].ptr, ws->caller[i].ptr, ws->args[i].bytes, KT_COPY_DEVICE_TO_DEVICE);
    return generate(ws, i, ws->args[i].ptr, ws->args[i].bytes);
}

kt_status kt__workset_init(kt__workset *ws, const kt_op *op, const char *where, kt_inputs inputs, const kt_arg *caller,
                          bool launching) {
    memset(ws, 0, sizeof *ws);
    ws->op = op;
    ws->where = where;
    size_t local = 0;
    kt__op_backend(op, &ws->b, &ws->bstate, &local, NULL);
    ws->dev = local;
    ws->host = (kt__backend_caps(ws->b) & KT_BACKEND_CAP_HOST_MEMORY) != 0;
    ws->dev_checks = !ws->host && kt__backend_checks(ws->b);
    ws->inputs = inputs;
    ws->caller = caller;
    size_t n = op->nargs ? op->nargs : 1;
    ws->args = calloc(n, sizeof *ws->args);
    ws->run_args = calloc(n, sizeof *ws->run_args);
    ws->pristine = calloc(n, sizeof *ws->pristine);
    ws->owned = calloc(n, sizeof *ws->owned);
    ws->owned_bytes = calloc(n, sizeof *ws->owned_bytes);
    ws->ro_hash = calloc(n, sizeof *ws->ro_hash);
    if (!ws->args || !ws->run_args || !ws->pristine || !ws->owned || !ws->owned_bytes || !ws->ro_hash)
        return kt__err(KT_ERR_NO_MEMORY, "%s(op '%s'): out of memory", ws->where, op->name);
    memcpy(ws->args, caller, op->nargs * sizeof *caller);
    for (size_t i = 0; i < op->nargs; i++) {
        const kt__argdecl *d = &op->args[i];
        if (d->type != KT_TYPE_BUFFER) continue;
        size_t bytes = caller[i].bytes;
        bool reads = d->access != KT_WRITE_ONLY;
        if (bytes > 0 && caller[i].ptr == NULL && (launching || (inputs != KT_INPUTS_GENERATED && reads)))
            return kt__err(KT_ERR_INVALID_ARGUMENT, "%s(op '%s'): buffer argument %zu ('%s') is NULL with %zu bytes%s",
                           ws->where, op->name, i, d->name, bytes, launching ? "" : " (only GENERATED inputs may be NULL)");
        kt_status st;
        if (inputs != KT_INPUTS_PROTECT) {
            if ((st = alloc_mirror(ws, i, bytes)) != KT_OK) return st;
            if (reads && (st = fill_input(ws, i)) != KT_OK) return st;
        }
        if (d->access == KT_READ_WRITE) {
            if ((st = dalloc(ws, bytes, &ws->pristine[i])) != KT_OK) return st;
            if ((st = dcopy(ws, ws->pristine[i], ws->args[i].ptr, bytes, KT_COPY_DEVICE_TO_DEVICE)) != KT_OK) return st;
        }
        if (d->access == KT_READ_ONLY) {
            bool ok;
            ws->ro_hash[i] = content_hash(ws, ws->args[i].ptr, bytes, &ok);
            if (!ok && ws->dev_checks) { /* the device cannot check: the host does, for this tuning */
                kt__log(op->ctx, KT_LOG_INFO, "op '%s': checking outputs on the host: %s", op->name, kt_last_error());
                ws->dev_checks = false;
                ok = true;
                for (size_t j = 0; j <= i && ok; j++) /* the baselines so far, the host's way */
                    if (op->args[j].type == KT_TYPE_BUFFER && op->args[j].access == KT_READ_ONLY)
                        ws->ro_hash[j] = content_hash(ws, ws->args[j].ptr, ws->args[j].bytes, &ok);
            }
            if (!ok) return KT_ERR_BACKEND;
        }
    }
    return KT_OK;
}

kt_status kt__workset_before(kt__workset *ws, bool poison, const kt_arg **run_args) {
    const kt_op *op = ws->op;
    for (size_t i = 0; i < op->nargs; i++) {
        const kt__argdecl *d = &op->args[i];
        if (d->type != KT_TYPE_BUFFER) continue;
        size_t bytes = ws->args[i].bytes;
        kt_status st = KT_OK;
        if (ws->pristine[i] != NULL) {
            st = dcopy(ws, ws->args[i].ptr, ws->pristine[i], bytes, KT_COPY_DEVICE_TO_DEVICE);
        } else if (d->access == KT_WRITE_ONLY && d->accumulate) {
            unsigned char v[8];
            kt__encode(d->elem, d->acc_value, v);
            st = dfill(ws, ws->args[i].ptr, bytes, v, d->esize);
        } else if (d->access == KT_WRITE_ONLY && poison) {
            st = dfill(ws, ws->args[i].ptr, bytes, kt__poison(d->elem), d->esize);
        }
        if (st != KT_OK) return st;
    }
    memcpy(ws->run_args, ws->args, op->nargs * sizeof *ws->args);
    *run_args = ws->run_args;
    if (op->pre_hook != NULL) {
        int rc = op->pre_hook(ws->run_args, op->nargs, op->hook_user);
        if (rc != 0) return kt__err(KT_ERR_HOOK, "%s(op '%s'): the pre-benchmark hook returned %d", ws->where, op->name, rc);
    }
    return KT_OK;
}

kt_status kt__workset_after(kt__workset *ws) {
    const kt_op *op = ws->op;
    if (op->post_hook != NULL) {
        int rc = op->post_hook(ws->run_args, op->nargs, op->hook_user);
        if (rc != 0)
            return kt__err(KT_ERR_HOOK, "%s(op '%s'): the post-benchmark hook returned %d", ws->where, op->name, rc);
    }
    return KT_OK;
}

bool kt__workset_ro_changed(kt__workset *ws, char *msg, size_t len) {
    const kt_op *op = ws->op;
    bool changed = false;
    for (size_t i = 0; i < op->nargs; i++) {
        if (op->args[i].type != KT_TYPE_BUFFER || op->args[i].access != KT_READ_ONLY) continue;
        bool ok;
        if (content_hash(ws, ws->args[i].ptr, ws->args[i].bytes, &ok) == ws->ro_hash[i] || !ok) continue;
        if (!changed) snprintf(msg, len, "wrote into read-only argument '%s'", op->args[i].name);
        changed = true;
        if (ws->inputs != KT_INPUTS_PROTECT) fill_input(ws, i); /* put the input back */
        else ws->ro_hash[i] = content_hash(ws, ws->args[i].ptr, ws->args[i].bytes, &ok);
    }
    return changed;
}

kt_status kt__workset_finish(kt__workset *ws, const kt_arg *caller, kt_status st) {
    const kt_op *op = ws->op;
    if (ws->inputs != KT_INPUTS_PROTECT || ws->args == NULL) return st;
    char *earlier = st != KT_OK ? kt__error_save() : NULL; /* the tuning's own error comes first */
    for (size_t i = 0; i < op->nargs; i++) {
        const kt__argdecl *d = &op->args[i];
        if (d->type != KT_TYPE_BUFFER) continue;
        kt_status rs = KT_OK;
        char err[256] = "";
        const char *what = "restore buffer argument";
        if (ws->pristine[i] != NULL) {
            rs = ws->b->buffer_copy(ws->bstate, ws->dev, caller[i].ptr, ws->pristine[i], caller[i].bytes,
                                    KT_COPY_DEVICE_TO_DEVICE, err, sizeof err);
        } else if (d->access == KT_WRITE_ONLY && d->accumulate && caller[i].ptr != NULL) {
            unsigned char v[8];
            kt__encode(d->elem, d->acc_value, v);
            rs = ws->b->buffer_fill(ws->bstate, ws->dev, caller[i].ptr, caller[i].bytes, v, d->esize, err, sizeof err);
            what = "refill accumulating buffer argument";
        }
        if (rs == KT_OK) continue;
        /* Every buffer is still tried; the first failure is the one reported. */
        if (st == KT_OK)
            st = kt__err(rs, "%s(op '%s'): tuning could not %s '%s' for the final launch (it may hold a tuning run's data): %s",
                         ws->where, op->name, what, d->name, err[0] ? err : "the backend gave no reason");
        else
            kt__log(op->ctx, KT_LOG_WARN, "op '%s': after a failed tuning, could not %s '%s' (it may hold a tuning run's data): %s",
                    op->name, what, d->name, err[0] ? err : "the backend gave no reason");
    }
    if (earlier != NULL) kt__error_restore(st, earlier);
    return st;
}

void kt__workset_free(kt__workset *ws) {
    if (ws->op == NULL) return;
    for (size_t i = 0; ws->args && i < ws->op->nargs; i++) {
        if (ws->pristine && ws->pristine[i]) dfree(ws, ws->pristine[i], ws->args[i].bytes);
        if (ws->owned && ws->owned[i]) dfree(ws, ws->owned[i], ws->owned_bytes[i]);
    }
    kt__extra_free(ws, ws->scratch, ws->scratch_bytes);
    ws->scratch = NULL;
    ws->scratch_bytes = 0;
    free(ws->args);
    free(ws->run_args);
    free(ws->pristine);
    free(ws->owned);
    free(ws->owned_bytes);
    free(ws->ro_hash);
    ws->args = ws->run_args = NULL;
    ws->pristine = ws->owned = NULL;
    ws->owned_bytes = NULL;
    ws->ro_hash = NULL;
}
