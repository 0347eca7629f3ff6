/*
 * identity.c - what names an op's candidate set in the persistent cache: its signature, key
 * components, candidates (natives: the build of the object holding the function; variant
 * groups: sources, options, spaces; either: a version set by the caller) and the compiler of
 * its device.
 */
#include "backends/backends.h"
#include "op/op.h"
#include "space/space.h"

#include <stdio.h>
#include <string.h>

bool kt__op_has_variants(const kt_op *op) {
    for (size_t i = 0; i < op->ncands; i++)
        if (op->cands[i].space) return true;
    return false;
}

void kt__op_compiler(const kt_op *op, char *out, size_t len) {
    const kt_backend *b;
    void *bstate;
    size_t local;
    const char *fp;
    char err[256];
    out[0] = '\0';
    if (!kt__op_has_variants(op)) return;
    kt__op_backend(op, &b, &bstate, &local, &fp);
    if (kt__backend_has(b, KT__BACKEND_COMPILER_ID) && b->compiler_id(bstate, local, out, len, err, sizeof err) != KT_OK) {
        const kt__artifacts *a = &op->ctx->artifacts; /* none here: the one decisions carried in were made with */
        const char *carried = a->carried_compiler ? a->carried_compiler(a->carried_user, b, local) : NULL;
        snprintf(out, len, "%s", carried ? carried : "");
    }
}

/* The address of a native candidate's function (NULL for a variant group). */
static const void *native_addr(const kt__cand *c) {
    void *p = NULL;
    _Static_assert(sizeof c->fn == sizeof p && sizeof c->rfn == sizeof p, "function pointers fit a void *");
    if (c->fn) memcpy(&p, &c->fn, sizeof p);
    else if (c->rfn) memcpy(&p, &c->rfn, sizeof p);
    else if (c->qfn) memcpy(&p, &c->qfn, sizeof p);
    return p;
}

/* Sets each native's code_id: the build of the object that holds its function, looked up once
 * per object. A native in no loaded object (generated code) is identified by its name (and
 * version) only, and an object without a build-id by a hash of its code: both said in the
 * debug log. */
static void native_ids(kt_op *op) {
    for (size_t i = 0; i < op->ncands; i++) {
        kt__cand *c = &op->cands[i];
        c->code_id[0] = '\0';
        c->code_base = NULL;
        const void *addr = native_addr(c);
        if (addr == NULL) continue;
        kt__code_object obj = {.file = "", .base = NULL};
        kt__code_id_kind kind = KT__CODE_ID_NONE;
        if (kt__code_object_of(addr, &obj)) {
            for (size_t j = 0; j < i && c->code_base == NULL; j++)
                if (op->cands[j].code_base == obj.base) {
                    memcpy(c->code_id, op->cands[j].code_id, sizeof c->code_id);
                    c->code_base = obj.base;
                }
            if (c->code_base != NULL) continue;
            kind = kt__code_id(addr, c->code_id, &obj);
            c->code_base = obj.base;
        }
        if (kind == KT__CODE_ID_NONE)
            kt__log(op->ctx, KT_LOG_DEBUG, "op '%s': candidate '%s' is in no loaded object: the cache knows it by its name%s only",
                    op->name, c->name, c->version ? " and version" : "");
        else if (kind == KT__CODE_ID_IMAGE)
            kt__log(op->ctx, KT_LOG_DEBUG,
                    "op '%s': candidate '%s' is in '%s', which has no build-id (linked with --build-id=none): the cache knows it by a hash of that object's loaded code (%s)",
                    op->name, c->name, obj.file, c->code_id);
    }
}

void kt__op_identity(kt_op *op) {
    native_ids(op);
    char compiler[1024];
    kt__op_compiler(op, compiler, sizeof compiler);
    uint64_t h[2] = {0x6b65726e74756e65ull, 0x63616e6469646174ull};
    for (int k = 0; k < 2; k++) {
        uint64_t x = h[k];
        x = kt__fnv1a(&op->nargs, sizeof op->nargs, x);
        for (size_t a = 0; a < op->nargs; a++) {
            const kt__argdecl *d = &op->args[a];
            int t[3] = {(int)d->type, (int)d->elem, (int)d->access};
            x = kt__fnv1a(t, sizeof t, kt__hash_str(d->name, x));
            if (d->constant) x = kt__hash_str("constant memory", x); /* (absent before: old records still match) */
            if (d->compare) x = kt__fnv1a(&d->compare, sizeof d->compare, kt__hash_str("compared as", x)); /* likewise */
        }

        for (size_t i = 0; i < op->nkeys; i++) {
            const kt__keycomp *kc = &op->keys[i];
            int t[2] = {(int)kc->kind, (int)kc->bucket};
            x = kt__fnv1a(&kc->arg, sizeof kc->arg, kt__fnv1a(t, sizeof t, x));
        }
        for (size_t i = 0; i < op->ncands; i++) {
            const kt__cand *c = &op->cands[i];
            x = kt__hash_str(c->name, x);
            x = kt__fnv1a(&c->nreqs, sizeof c->nreqs, x);
            /* (absent for variant groups without a version: their old records still match) */
            if (c->code_id[0]) x = kt__hash_str(c->code_id, kt__hash_str("native code", x));
            if (c->version) x = kt__hash_str(c->version, kt__hash_str("version", x));
            if (c->qfn) x = kt__hash_str("queued native", x); /* times the device's work, not the host's */
            if (c->space == NULL) continue;
            x = kt__hash_str(c->source, kt__hash_str(c->kernel, x));
            for (size_t o = 0; o < c->noptions; o++) x = kt__hash_str(c->options[o], x);
            x = kt__space_hash(c->space, x);
            /* the launch parameters' sizes (absent without: old records still match) */
            for (size_t l = 0; l < c->nlparams; l++) x = kt__fnv1a(&c->lparams[l].bytes, sizeof c->lparams[l].bytes, kt__hash_str("launch param", x));
            /* Kernel Tuner's compile contract changes every variant's code (absent without: old records still match) */
            if (c->kt_contract)
                for (int d = 0; d < 3; d++) x = kt__hash_str(c->kt_block_names[d], kt__hash_str("kernel tuner contract", x));
        }
        h[k] = kt__hash_str(compiler, x);
        if (k == 0) h[1] ^= h[0] * 0x9e3779b97f4a7c15ull;
    }
    kt__hex128(h[0], h[1], op->set_hash);
}
