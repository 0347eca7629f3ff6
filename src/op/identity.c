/*
 * identity.c - what names an op's candidate set in the persistent cache: its signature, key
 * components, candidates (sources, options, spaces) and the compiler of its device.
 */
#include "op/op.h"
#include "space/space.h"

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
    if (b->abi_version >= 3 && b->compiler_id && b->compiler_id(bstate, local, out, len, err, sizeof err) != KT_OK) out[0] = '\0';
}

void kt__op_identity(kt_op *op) {
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
            if (c->space == NULL) continue;
            x = kt__hash_str(c->source, kt__hash_str(c->kernel, x));
            for (size_t o = 0; o < c->noptions; o++) x = kt__hash_str(c->options[o], x);
            x = kt__space_hash(c->space, x);
        }
        h[k] = kt__hash_str(compiler, x);
        if (k == 0) h[1] ^= h[0] * 0x9e3779b97f4a7c15ull;
    }
    kt__hex128(h[0], h[1], op->set_hash);
}
