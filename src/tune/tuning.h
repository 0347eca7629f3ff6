/*
 * tuning.h - what the files of one tuning by measurement share (measure.c: setting up, the
 * reference, the runners, the engine's hooks and the outcome; trial.c: one run of a unit, its
 * flush and validation; propose.c: the search over the variant groups and what is built next).
 * Not included outside them.
 */
#ifndef KT_TUNE_TUNING_H
#define KT_TUNE_TUNING_H

#include "backends/backends.h"
#include "isolate/isolate.h"
#include "search/search.h"
#include "tune/stages.h"

/* Where a unit's runs are flushed from the cache: its backend flushes a device's; the core
 * flushes the host's by evicting the run's buffers (util/evict.c), or, on a processor where it
 * cannot (or for buffers that are not host memory), by writing a buffer as large as its
 * last-level cache. */
enum { FLUSH_NONE, FLUSH_DEVICE, FLUSH_HOST };

typedef struct trial_ctx {
    const kt_op *op;
    kt__workset *ws;
    const kt__unit *unit;
    kt_result result;
    double device_ns;
    int flush;
    unsigned char *host_flush; /* the tuning's host flush buffer (when not evict) */
    size_t host_flush_len;
    bool evict;                /* FLUSH_HOST by evicting the run's buffers (host memory) from the caches */
    kt__runner *runner;        /* isolated: the runner process that runs it, and its id there */
    size_t runner_id;
    kt__iso_run iso;           /* how its isolated run failed (iso.kind), or the isolation did (iso.infra) */
    char launch_msg[256];      /* how its backend's launch failed in this process (KT_FAIL_LAUNCH) */
    bool full;                 /* this run's outputs are looked at (validation, the reference) */
    bool check;                /* isolated: the runner checks this validation run itself */
    bool checked;              /* and vouched for it: outputs match, inputs unchanged; */
    long wrote_input;          /* or saw it write into this input (-1: none) */
} trial_ctx;

/* A variant group searched in a tuning: its configurations are its units first .. first + n - 1. */
typedef struct group_search {
    size_t cand, first, n;
    kt_search *s;
    size_t outstanding; /* proposed and not told yet (building, or being screened) */
    bool done;
} group_search;

/* What the engine needs of one tuning. */
typedef struct tuning {
    kt_op *op;
    kt_decision *d;
    kt__workset *ws;
    kt__reference *ref;
    trial_ctx *trials;         /* one per unit */
    unsigned char *host_flush; /* allocated when a unit first needs it */
    size_t host_flush_len;
    bool *acc;                 /* per unit: it may run in this tuning (accepting) */
    bool isolated, natives;    /* some accepted variant runs in a runner; some native may */
    bool *refreshed;           /* per argument, for the runners (iso_args) */
    kt__runner *native_runner; /* started for this tuning: it holds this tuning's natives */
    bool iso_locked;           /* holds the context's iso_lock (the device's runner) */
    bool recalled;             /* some unit's time comes from the persistent cache */
    kt__configs *cfgs;         /* per candidate: its variant group's enumeration (make_units) */
    kt__plans *plans;          /* the variant units not built yet (lazy: built when admitted) */
    group_search *groups;      /* the searched groups, when a strategy chooses their units */
    size_t ngroups, turn;      /* and whose turn it is */
    size_t plain;              /* the next unit outside a search to admit (in spread order: a counter) */
    unsigned spread_bits;      /* nonzero: units outside a search go in spread order (spread_unit) */
    size_t evaluations, budget; /* units proposed or admitted so far, and at most (0: no limit) */
    kt_status next_error;      /* what stopped kt__tuning_next (building), for after the engine */
    bool ref_taken;            /* a searched group's reference unit went first */
    bool runner_checks;        /* the device's runner checks validation runs itself */
    /* Times under a budget of seconds are on the context's budget clock (kt__budget_now): the wall
     * clock, or a replay's simulated time. */
    double start_s;            /* when the tuning started (a budget of seconds counts from there) */
    /* building lazily under a budget of seconds: what batches cost so far */
    double build_s;            /* the time of their builds, */
    size_t waves;              /* in waves of as many units as there are build threads, */
    double screen_s;           /* the time the engine took to screen them, */
    size_t screened;           /* for this many units */
    double handed_s;           /* when the last batch went to the engine */
    size_t handed;             /* and how many units it held (0: none is out) */
    bool any_valid;            /* a unit was measured: the tuning can decide */
    kt__builder *builder;      /* pipelined: builds the next proposals while the engine measures */
    size_t threads;            /* build threads */
    size_t direct[64];         /* pipelined: proposals that need no build (the reference, natives), */
    size_t ndirect;            /* handed to the engine next */
    size_t compared, disagreed; /* validation runs compared with the reference, and those that failed */
    bool stopped;              /* most disagreed (kt_op_set_disagreement_stop): admit no more */
} tuning;

int kt__flush_kind(const kt_op *op, const kt__unit *u);
size_t kt__host_llc_bytes(void);
kt_status kt__trial_before(void *p, const kt_arg **args);
int kt__trial_run(void *p, const kt_arg *args);
double kt__trial_device_ns(void *p);
kt_status kt__trial_after(void *p);
kt_status kt__validation_run(trial_ctx *t, const kt__reference *ref, kt__cand_result *r);
bool kt__wall_budget(const kt_op *op);
double kt__build_deadline(const tuning *tu);
double kt__budget_now(const tuning *tu);
kt_status kt__prepare_built(tuning *tu, const size_t *units, size_t n);
kt_status kt__build_admitted(tuning *tu, const size_t *units, size_t n);
long kt__fastest(tuning *tu, long best);
kt_status kt__set_up_search(tuning *tu);
size_t kt__tuning_next(void *p, size_t *units, size_t max);
void kt__set_spread(tuning *tu);
void kt__tuning_told(void *p, size_t i, double ns);
void kt__free_search(tuning *tu);

#endif
