/*
 * space_int.h - what the files of a space share; other stages use space.h.
 *
 *   space.c         declaring a space: parameters, inputs, constraints, derived values,
 *                   geometry; its identity hash
 *   space_enum.c    enumerating the valid configurations
 *   space_config.c  reading configurations: slot values, configuration text, geometry, and
 *                   expressions evaluated over the whole space
 *
 * Every declared name (parameter, input, derived value) gets a slot, in declaration order; an
 * expression is parsed once with names resolved to slots, and records which parameters it
 * reads. A valid configuration is stored as one value index per parameter.
 */
#ifndef KT_SPACE_INT_H
#define KT_SPACE_INT_H

#include "space/space.h"

#include <stdatomic.h>

enum slot_kind { SLOT_PARAM, SLOT_INPUT, SLOT_DERIVED };

typedef struct slot {
    char *name;
    enum slot_kind kind;
    size_t index; /* within its kind */
} slot;

typedef struct param {
    size_t slot;
    kt__value *values;
    size_t n;
} param;

typedef struct input {
    size_t slot;
    bool bound;
    kt__value value;
} input;

typedef struct derived {
    size_t slot;
    kt__expr *e;
    uint64_t inputs; /* the inputs it reads, directly or through earlier derived values */
} derived;

typedef struct constraint {
    kt__expr *e;          /* or a callback: */
    kt_constraint_fn fn;
    void *user;
    long level;           /* checked once parameter `level` has a value; -1: inputs only; LONG_MAX: at the leaves */
} constraint;

struct kt_space {
    _Atomic int refs;
    _Atomic int sealed;   /* an op holds it: it can no longer change */
    slot *slots;
    size_t nslots;
    param *params;
    size_t nparams;
    input *inputs;
    size_t ninputs;
    derived *derived;
    size_t nderived;
    constraint *cons;
    size_t ncons;
    kt_geometry kind;
    kt__expr *global[3], *local[3], *shmem;
    /* Which inputs (bit i: input i) each part reads, directly or through derived values:
     * derived values (which become defines) and constraints; the local size and shared memory
     * (which the device's limits judge); each dimension's global size. */
    uint64_t code_inputs, geometry_inputs, global_inputs[3];
    kt__arena store;      /* parameter values and bound inputs */
    kt__configs last;     /* the last kt_space_enumerate */
};

struct kt_config {
    const kt_space *sp;
    const kt__value *slots;
};

/* The slot of name (len bytes), or -1 (space.c). */
long kt__space_find_slot(const kt_space *sp, const char *name, size_t len);

/* A value as its define writes it: strings bare, bools 1/0, the rest as Python writes them.
 * Returns the text (*vlen bytes, not always NUL-terminated): num (64 bytes) when it fits there,
 * the string's own bytes, or *heap, which the caller frees; NULL when out of memory (space.c). */
const char *kt__space_value_text(const kt__value *v, char num[64], char **heap, int *vlen);

/* Puts the inputs into slots: from inputs when given, else the bound values (failing on an
 * unbound input) (space_enum.c). */
kt_status kt__space_bind_slots(const kt_space *sp, const kt__value *inputs, kt__value *slots);

/* Evaluates the derived values of the configuration in slots, in declaration order, into arena
 * (space_enum.c). */
kt_status kt__space_eval_derived(const kt_space *sp, kt__value *slots, kt__arena *arena);

#endif /* KT_SPACE_INT_H */
