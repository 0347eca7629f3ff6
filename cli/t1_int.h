/*
 * t1_int.h - what the T1 reader's files share: t1.c reads the problem and its sections,
 * t1_kernel.c its kernel interface (sizes, grid division, Arguments, ReferenceArguments).
 * Every error names the file and the JSON path of the field at fault; the first error wins.
 */
#ifndef KT_CLI_T1_INT_H
#define KT_CLI_T1_INT_H

#include "t1.h"

#include <jansson.h>
#include <stdbool.h>

/* One reading: the file named in errors, where the first error goes, and whether one came. */
typedef struct ctx {
    const char *file;
    char **err;
    bool failed;
} ctx;

/* Records "FILE: PATH: message" as the reading's error unless one came before; returns false. */
bool t1_fail(ctx *c, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* "an object", "an array", ...: v's JSON kind, for messages. */
const char *t1_kind_of(const json_t *v);

/* Refuses the first member of obj not in known (NULL-terminated): a field kerntune does not
 * read would be ignored, and an ignored field can make the run differ from what the file asks. */
bool t1_known_fields(ctx *c, json_t *obj, const char *path, const char *const *known);

/* Member key of obj, of JSON type want (any when want < 0; JSON_REAL takes integers too,
 * JSON_TRUE either boolean); NULL when absent (an error when required) or of another type (an
 * error). */
json_t *t1_member(ctx *c, json_t *obj, const char *path, const char *key, int want, bool required, const char *what);

/* A string member, as t1_member. */
const char *t1_str_member(ctx *c, json_t *obj, const char *path, const char *key, bool required, const char *what);

/* KernelSpecification's LocalSize or GlobalSize (key), obj, into out: X required, Y and Z
 * optional, each an integer or an expression string, as allocated texts (t1_kernel.c). */
bool t1_read_sizes(ctx *c, json_t *obj, const char *key, char *out[3]);

/* KernelSpecification.GridDivisionX/Y/Z of ks into p. */
bool t1_read_grid_div(ctx *c, t1 *p, json_t *ks);

/* KernelSpecification.Arguments of ks into p. */
bool t1_read_args(ctx *c, t1 *p, json_t *ks);

/* KernelSpecification.ReferenceArguments of ks into p, checked against its Arguments. */
bool t1_read_refs(ctx *c, t1 *p, json_t *ks);

#endif
