/*
 * space.h - what the rest of the library needs from spaces (space.c). Internal.
 */
#ifndef KT_SPACE_H
#define KT_SPACE_H

#include "expr.h"
#include "internal.h"

#include <limits.h>

/* The launch geometry of one configuration. */
typedef struct kt__geometry {
    kt_geometry kind;
    int64_t global[3];
    int64_t local[3];
    int64_t shared_memory;
} kt__geometry;

/* Takes one more reference to a space (an op holding it). */
void kt__space_retain(kt_space *sp);

/* Number of slots (parameters, inputs, derived values) a configuration's values fill. */
size_t kt__space_slot_count(const kt_space *sp);

/* Puts the bound inputs into slots; fails naming an unbound input. */
kt_status kt__space_bind_slots(const kt_space *sp, kt__value *slots);

/* Fills slots with configuration index of the last enumeration: inputs, parameters, then
 * derived values (evaluated into arena). */
kt_status kt__space_config_slots(const kt_space *sp, size_t index, kt__value *slots, kt__arena *arena);

/* Formats the parameters and derived values in slots as prefix+name=value joined by sep
 * (bools as 1/0 and strings bare, as a define wants them). */
kt_status kt__space_format_slots(const kt_space *sp, const kt__value *slots, const char *prefix, const char *sep,
                                 char *buf, size_t len);

/* Evaluates the geometry for a configuration's slots. */
kt_status kt__space_geometry(const kt_space *sp, const kt__value *slots, kt__arena *arena, kt__geometry *g);

/* Evaluates text over the whole space: parameters stand for their value lists, inputs for their
 * bound values (T1 argument sizes: "max(filter_width) * ProblemSize[0]"). */
kt_status kt__space_eval_whole(const kt_space *sp, const char *text, const char *where, kt__arena *arena,
                               kt__value *out);

#endif
