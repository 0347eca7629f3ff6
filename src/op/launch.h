/*
 * launch.h - how a unit launches (launch.c): a device variant through its backend, waited for or
 * enqueued on the caller's queue, with the global sizes a call computes from its own arguments
 * and a group's launch parameters; a native device candidate on a queue; waiting for a queue.
 * A hit calls these and nothing of tune/; tuning's timed runs call them too. Internal.
 */
#ifndef KT_OP_LAUNCH_H
#define KT_OP_LAUNCH_H

#include "op/op.h"

/* A space input's value from the argument a that binds it (declared by d): a scalar's value, a
 * buffer's element count. */
kt__value kt__arg_input(const kt__argdecl *d, const kt_arg *a);

/* kt__launch_fn's launch, or a native device candidate's work, enqueued on the caller's queue
 * (NULL: the device's default), returning before it runs (l->async must be set). On a failure
 * of the launch describes it and returns KT__RC_REPORTED; a native returns its own value. */
int kt__launch_async(const kt__launch *l, const kt_arg *args, size_t nargs, void *queue);

/* Waits for the work already on queue of the op's device, when its backend launches
 * asynchronously (otherwise there is nothing to wait for: every launch waited). */
kt_status kt__queue_wait(const kt_op *op, void *queue, const char *where);

/* The backend's launch of device variant l on tuning's arguments args (so with the geometry
 * planned for them), waited for; timed by the device's events into *ns unless ns is NULL. A
 * group's launch parameters (kt_op_add_launch_param) are computed from args and passed after
 * them. On a failure returns its status and describes it in err. */
kt_status kt__launch_timed(const kt__launch *l, const kt_arg *args, size_t nargs, double *ns, char *err, size_t errlen);

/* One timed run of native device candidate l on args: its work on the backend's own queue,
 * timed by that queue's events into *ns. Returns the native's own return value, or
 * KT__RC_REPORTED with the backend's failure described. */
int kt__queued_timed(const kt__launch *l, const kt_arg *args, size_t nargs, double *ns);

#endif /* KT_OP_LAUNCH_H */
