/*
 * disagree.h - when most configurations disagree with the reference: which parameter separates
 * those that agree from those that do not (disagree.c), for `kerntune tune`.
 */
#ifndef KT_CLI_DISAGREE_H
#define KT_CLI_DISAGREE_H

#include <stdbool.h>
#include <stddef.h>

/* The validations `kerntune tune` needs before it may stop, and the share that stops it:
 * at least DISAGREE_MIN configurations compared with the reference, more than half of them
 * wrong (the library's kt_op_set_disagreement_stop). */
#define DISAGREE_MIN 8

/* The exit status of a tuning that validation stopped. */
#define DISAGREE_EXIT 3

/* One configuration compared with the reference: its text as the tuning names it
 * ("NAME=VALUE,NAME=VALUE", the parameters in order) and whether its outputs agreed. */
typedef struct verdict {
    char *config;
    bool agreed;
} verdict;

/* What the verdicts say. */
typedef struct diagnosis {
    size_t param;        /* the parameter that separates them, or (size_t)-1 when none does */
    char **agreeing;     /* its values among the configurations that agreed, in the order met */
    size_t nagreeing;
    char *message;       /* the whole diagnosis, one sentence (allocated) */
} diagnosis;

/* Finds the first parameter (of names, in order; fewest agreeing values first) whose values
 * among the agreeing configurations and among the disagreeing ones are disjoint, both sets not
 * empty, and says it: "outputs differ whenever P != v: ..." (or "whenever P is none of v1, v2").
 * When none separates them, says that most disagree. False when out of memory. */
bool diagnose(const char *const *names, size_t nnames, const verdict *v, size_t n, diagnosis *out);

void diagnosis_free(diagnosis *d);

#endif
