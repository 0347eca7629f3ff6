/*
 * table.c - the per-op table of decisions: lock-free lookups, locked inserts.
 *
 * Readers (every call of an op) load the current table with an acquire load and probe it
 * linearly; they never lock and never write. Writers hold the op's lock, publish a new entry
 * with a release store into an empty slot, and when the table is half full they publish a copy
 * twice as large. Old tables are kept (on a retired list) until the op is destroyed, so a
 * reader still probing one is never left with freed memory; the geometric growth bounds what
 * they cost to less than the live table's size.
 */
#include "op/op.h"

#include <stdlib.h>

/* Keys are a few words long: an inline comparison beats a call to memcmp on the hit path. */
static inline bool same_key(const int64_t *a, const int64_t *b, size_t len) {
    for (size_t i = 0; i < len; i++)
        if (a[i] != b[i]) return false;
    return true;
}

KT__HOT kt_decision *kt__table_find(const kt__table *t, const int64_t *key, size_t len, uint64_t hash) {
    for (size_t i = hash & t->mask;; i = (i + 1) & t->mask) {
        kt_decision *d = atomic_load_explicit(&t->slot[i], memory_order_acquire);
        if (d == NULL) return NULL;
        if (d->hash == hash && d->keylen == len && same_key(d->key, key, len)) return d;
    }
}

static void place(kt__table *t, kt_decision *d) {
    size_t i = d->hash & t->mask;
    while (atomic_load_explicit(&t->slot[i], memory_order_relaxed) != NULL) i = (i + 1) & t->mask;
    atomic_store_explicit(&t->slot[i], d, memory_order_release);
}

kt_status kt__table_insert(kt_op *op, kt_decision *d) {
    kt__table *t = atomic_load_explicit(&op->table, memory_order_relaxed);
    if (2 * (op->count + 1) > t->mask + 1) {
        size_t size = 2 * (t->mask + 1);
        kt__table *nt = calloc(1, sizeof *nt + size * sizeof nt->slot[0]);
        if (nt == NULL) return kt__err(KT_ERR_NO_MEMORY, "%s(op '%s'): out of memory growing its table", d->where, op->name);
        nt->mask = size - 1;
        for (size_t i = 0; i <= t->mask; i++) {
            kt_decision *e = atomic_load_explicit(&t->slot[i], memory_order_relaxed);
            if (e != NULL) place(nt, e);
        }
        nt->retired_next = t;
        atomic_store_explicit(&op->table, nt, memory_order_release);
        t = nt;
    }
    place(t, d);
    op->count++;
    return KT_OK;
}

void kt__table_free(kt_op *op) {
    kt__table *t = atomic_load_explicit(&op->table, memory_order_relaxed);
    if (t == NULL) return;
    for (size_t i = 0; i <= t->mask; i++) kt__decision_free(atomic_load_explicit(&t->slot[i], memory_order_relaxed));
    while (t != NULL) {
        kt__table *next = t->retired_next;
        free(t);
        t = next;
    }
    atomic_store_explicit(&op->table, NULL, memory_order_relaxed);
}
