/*
 * space.h - what the rest of the library needs from spaces (space.c, space_enum.c,
 * space_config.c; they share space_int.h). Internal.
 */
#ifndef KT_SPACE_H
#define KT_SPACE_H

#include <kerntune/backend.h>

#include "space/expr.h"
#include "util/util.h"

#include <limits.h>

/* The launch geometry of one configuration (the backend interface's type). */
typedef kt_launch_geometry kt__geometry;

/* The valid configurations of one enumeration: nconfigs x nparams value indices. */
typedef struct kt__configs {
    uint16_t *idx;
    size_t n, cap;
} kt__configs;

/* Enumerates into out (which the caller frees with kt__configs_free) with the inputs in
 * inputs (one value per input, in declaration order), or the bound ones when inputs is NULL.
 * Does not change the space, so several threads may enumerate one space at once. */
kt_status kt__space_enum(const kt_space *sp, const kt__value *inputs, kt__configs *out);
void kt__configs_free(kt__configs *c);

/* Number of inputs, input index's name, and its bound value (false when unbound). */
size_t kt__space_input_count(const kt_space *sp);
const char *kt__space_input_name(const kt_space *sp, size_t index);
bool kt__space_input_value(const kt_space *sp, size_t index, kt__value *out);

/* Fills slots with configuration index of c: inputs (from inputs, or the bound ones when
 * NULL), parameters, then derived values (evaluated into arena). */
kt_status kt__space_slots(const kt_space *sp, const kt__configs *c, size_t index, const kt__value *inputs,
                          kt__value *slots, kt__arena *arena);

/* Takes one more reference to a space (an op holding it). */
void kt__space_retain(kt_space *sp);

/* Number of parameters plus derived values: the defines of a configuration. */
size_t kt__space_param_count_all(const kt_space *sp);

/* Number of slots (parameters, inputs, derived values) a configuration's values fill. */
size_t kt__space_slot_count(const kt_space *sp);

/* The configurations of the last public enumeration (kt_space_enumerate), and how many values
 * parameter p has (0 past the last parameter). */
const kt__configs *kt__space_last(const kt_space *sp);
size_t kt__space_param_nvalues(const kt_space *sp, size_t p);

/* Fills slots with configuration index of the last public enumeration. */
kt_status kt__space_config_slots(const kt_space *sp, size_t index, kt__value *slots, kt__arena *arena);

/* Formats the parameters and derived values in slots as prefix+name=value joined by sep
 * (bools as 1/0 and strings bare, as a define wants them). */
kt_status kt__space_format_slots(const kt_space *sp, const kt__value *slots, const char *prefix, const char *sep,
                                 char *buf, size_t len);

/* Inputs a space may declare (they are tracked as bits of a 64-bit mask). */
#define KT__SPACE_INPUTS_MAX 64

/* Which inputs (bit i: input i) a configuration depends on beyond its launch size: those its
 * derived values (defines, so its compiled code), its constraints (whether it is valid), its
 * local size or its shared memory (what the device's limits judge) read, directly or through
 * derived values, and those of a global size counted in work-items (KT_GEOMETRY_GLOBAL) with a
 * local size, which must divide it. An op keys an argument bound to such an input exactly. */
uint64_t kt__space_fixed_inputs(const kt_space *sp);

/* Which inputs the global size of dimension d (0..2) reads when no validity depends on it: a call
 * computes that size from its own arguments. */
uint64_t kt__space_global_inputs(const kt_space *sp, int d);

/* The slot of input index. */
size_t kt__space_input_slot(const kt_space *sp, size_t index);

/* Evaluates the global size of dimension d for slots (1 when the space declares none). */
kt_status kt__space_global(const kt_space *sp, int d, const kt__value *slots, kt__arena *arena, int64_t *out);

/* Compiles the global size of dimension d for fixed slots and per-call integer inputs (var as
 * kt__expr_compile_int takes it): false when the space declares none, or the interpreter must
 * evaluate it. */
bool kt__space_global_compile(const kt_space *sp, int d, const kt__value *slots, const int *var, kt__iprog *out);

/* An upper bound on the bytes kt__space_format_slots needs for slots (the NUL included). */
size_t kt__space_format_len(const kt_space *sp, const kt__value *slots, const char *prefix, const char *sep);

/* Evaluates the geometry for a configuration's slots. */
kt_status kt__space_geometry(const kt_space *sp, const kt__value *slots, kt__arena *arena, kt__geometry *g);

/* Evaluates text over the whole space: parameters stand for their value lists, inputs for their
 * bound values (T1 argument sizes: "max(filter_width) * ProblemSize[0]"). */
kt_status kt__space_eval_whole(const kt_space *sp, const char *text, const char *where, kt__arena *arena,
                               kt__value *out);

/* Hashes what defines the space (names, values, bound inputs, derived values, constraint texts,
 * geometry) into h: any change of the space changes it. */
uint64_t kt__space_hash(const kt_space *sp, uint64_t h);

#endif
