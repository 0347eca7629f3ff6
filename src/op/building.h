/*
 * building.h - what the files that build an op (op.c, candidates.c, freeze.c) share. Private to
 * src/op/; nothing outside it includes this.
 */
#ifndef KT_OP_BUILDING_H
#define KT_OP_BUILDING_H

#include "op/op.h"

#define KT__CHECK_OP(op, where)                                                      \
    do {                                                                             \
        if ((op) == NULL) return kt__err(KT_ERR_NULL, "%s: op is NULL", where);      \
    } while (0)

/* Checks argument index arg of op (a key component or a requirement); reports as `where`. */
kt_status kt__op_check_arg(const kt_op *op, size_t arg, const char *where);

/* Finds the candidate called name; reports an unknown name as `where`. */
kt_status kt__op_find_cand(const kt_op *op, const char *name, const char *where, size_t *idx);

/* Frees what a candidate owns (not the candidate). */
void kt__cand_free(kt__cand *c);

static inline bool kt__is_pow2(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

#endif /* KT_OP_BUILDING_H */
