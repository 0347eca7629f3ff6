/*
 * tune.h - what the tuning stage offers the call stage: deciding a key that has no finished
 * decision. Not installed.
 */
#ifndef KT_TUNE_H
#define KT_TUNE_H

#include "op/op.h"

/* How a miss ends: with the final launch on the caller's arguments (kt_op_call and
 * kt_op_call_result), with the decision alone (kt_op_tune), with the decision alone made on
 * generated inputs whatever the op's inputs mode (a deferred key: its buffers are NULL), or with
 * a decision only if one is recorded (kt_op_recall: nothing is measured; an op that would measure
 * the key leaves it undecided, KT_ERR_NOT_FOUND, for the next call to tune). */
typedef enum kt__finish { KT__FINISH_LAUNCH, KT__FINISH_DECIDE, KT__FINISH_GENERATED, KT__FINISH_RECALL } kt__finish;

/* Decides the key of args (key[0..len), hash) for a call named where: finds it being decided by
 * another thread (then waits, or hands back the fallback candidate), or inserts it and decides
 * it by the op's effort (recalled, measured, forced or default). With KT__FINISH_LAUNCH *launch
 * receives what to run on the caller's arguments: the winner, or the fallback written into
 * *fallback. */
kt_status kt__tune_miss(kt_op *op, const kt_arg *args, size_t nargs, const int64_t *key, size_t len, uint64_t hash,
                        kt__finish how, const char *where, kt__unit *fallback, const kt__unit **launch);

/* A miss whose queue is being captured (kt__queue_wait returned KT_ERR_CAPTURING): never tunes.
 * By the op's capture-miss policy either refuses with KT_ERR_CAPTURING and a message saying how
 * to tune ahead, or writes the op's native fallback (or default) candidate into *fallback, points
 * *launch at it for the caller to run on its arguments, and records the key as deferred
 * (tune/deferred.c). */
kt_status kt__capture_miss(kt_op *op, const kt_arg *args, size_t nargs, const int64_t *key, size_t len, const char *where,
                           kt__unit *fallback, const kt__unit **launch);

#endif /* KT_TUNE_H */
