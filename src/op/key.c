/*
 * key.c - argument checking, tuning keys, bucketing and hashing.
 *
 * A key is a short array of 64-bit words: first the op's declared components (argument values
 * bucketed, buffer sizes, pointer alignments, user-derived values), then a validity mask with
 * one bit per candidate that declares requirements, set when the candidate accepts the
 * arguments. Putting the mask in the key means a decision is only ever reused for calls that
 * the same candidates accept, so a recorded winner can never be launched on arguments it
 * rejects. This file is on the hit path: no allocation, no system call, no lock.
 */
#include "op/op.h"

#include <string.h>

KT__COLD kt_status kt__args_refused(const kt_op *op, const kt_arg *args, size_t nargs, const char *where) {
    if (nargs != op->nargs)
        return kt__err(KT_ERR_ARG_COUNT, "%s(op '%s'): %zu argument(s) passed, the op declares %zu", where, op->name,
                       nargs, op->nargs);
    if (args == NULL && nargs > 0) return kt__err(KT_ERR_NULL, "%s(op '%s'): args is NULL", where, op->name);
    for (size_t i = 0; i < nargs; i++) {
        const kt__argdecl *d = &op->args[i];
        if (args[i].type != d->type)
            return kt__err(KT_ERR_ARG_TYPE, "%s(op '%s'): argument %zu ('%s') is %s, the op declares %s", where, op->name,
                           i, d->name, kt_type_name(args[i].type), kt_type_name(d->type));
        if (d->type == KT_TYPE_BUFFER && args[i].bytes % d->esize != 0)
            return kt__err(KT_ERR_ARG_TYPE,
                           "%s(op '%s'): buffer argument %zu ('%s') has %zu bytes, not a multiple of its %s element size %zu",
                           where, op->name, i, d->name, args[i].bytes, kt_type_name(d->elem), d->esize);
    }
    return KT_OK;
}

int64_t kt__bucket(int64_t v, kt_bucket bucket) {
    if (bucket != KT_BUCKET_POW2 || v <= 1 || v > ((int64_t)1 << 62)) return v;
    return (int64_t)1 << (64 - __builtin_clzll((uint64_t)v - 1));
}

/* The raw value of an argument as a key word: integers as themselves, floats by their bits,
 * buffers by their byte size. The union's 64-bit word already is a signed or unsigned integer's
 * value and an f64's bits; an f32 has only its low 32 bits. */
static inline int64_t arg_value(const kt__argdecl *d, const kt_arg *a) {
    if (d->type == KT_TYPE_BUFFER) return (int64_t)a->bytes;
    if (d->type == KT_TYPE_F32) {
        uint32_t bits;
        memcpy(&bits, &a->f32, sizeof bits);
        return bits;
    }
    return a->i;
}

static bool req_ok(const kt_op *op, const kt__req *r, const kt_arg *args) {
    const kt_arg *a = &args[r->arg];
    const kt__argdecl *d = &op->args[r->arg];
    if (r->kind == KT__REQ_ALIGN) return ((uintptr_t)a->ptr & (uintptr_t)((uint64_t)r->value - 1)) == 0;
    if (d->type == KT_TYPE_BUFFER) return (a->bytes / d->esize) % (uint64_t)r->value == 0;
    if (d->type >= KT_TYPE_U8 && d->type <= KT_TYPE_U64) return a->u % (uint64_t)r->value == 0;
    return a->i % r->value == 0;
}

KT__HOT size_t kt__key_compute(const kt_op *op, const kt_arg *args, int64_t *key) {
    size_t n = 0;
    for (size_t k = 0; k < op->nkeys; k++) {
        const kt__keycomp *c = &op->keys[k];
        switch (c->kind) {
        case KT__KEY_ARG: key[n++] = kt__bucket(arg_value(&op->args[c->arg], &args[c->arg]), c->bucket); break;
        case KT__KEY_ARG_FN: key[n++] = c->bucket_fn(arg_value(&op->args[c->arg], &args[c->arg]), c->user); break;
        case KT__KEY_ALIGN: {
            uint64_t p = (uint64_t)(uintptr_t)args[c->arg].ptr | c->max_align;
            key[n++] = (int64_t)(p & (~p + 1)); /* lowest set bit, at most max_align */
            break;
        }
        case KT__KEY_FN: key[n++] = c->key_fn(args, op->nargs, c->user); break;
        }
    }
    if (op->npredicated == 0) return n;
    for (size_t w = 0; w < op->nmask_words; w++) key[n + w] = 0;
    for (size_t i = 0; i < op->ncands; i++) {
        const kt__cand *c = &op->cands[i];
        if (c->mask_bit < 0) continue;
        bool ok = true;
        for (size_t r = 0; ok && r < c->nreqs; r++) ok = req_ok(op, &c->reqs[r], args);
        if (ok && c->accept != NULL) ok = c->accept(args, op->nargs, c->accept_user) != 0;
        if (ok) key[n + (size_t)c->mask_bit / 64] |= (int64_t)((uint64_t)1 << (c->mask_bit % 64));
    }
    return n + op->nmask_words;
}

bool kt__key_accepts(const kt_op *op, const int64_t *key, size_t idx) {
    int bit = op->cands[idx].mask_bit;
    if (bit < 0) return true;
    return ((uint64_t)key[op->nkeys + (size_t)bit / 64] >> (bit % 64)) & 1;
}

KT__HOT uint64_t kt__key_hash(const int64_t *key, size_t len) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ len;
    for (size_t i = 0; i < len; i++) {
        h ^= (uint64_t)key[i];
        h *= 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
    }
    return h;
}
