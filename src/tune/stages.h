/*
 * stages.h - the stages of one tuning, shared by the files of src/tune/ and by nothing else:
 * the work arguments (workset.c), the reference (validate.c), the measurement engine
 * (engine.c), units (variant.c), measuring them (measure.c) and recall from the persistent
 * cache (recall.c). What other stages may use is in tune/tune.h. Not installed.
 */
#ifndef KT_TUNE_STAGES_H
#define KT_TUNE_STAGES_H

#include "op/launch.h"
#include "op/op.h"
#include "space/space.h"

/* ---- workset.c: the arguments tuning runs use ------------------------------------------------ */

/* The arguments of a tuning: buffers on the op's device through its backend's buffer methods
 * (host memory when the backend has KT_BACKEND_CAP_HOST_MEMORY), with the extra bytes a tuning
 * holds counted. */
typedef struct kt__workset kt__workset;
struct kt__workset {
    const kt_op *op;
    const char *where;   /* the call that tunes ("kt_op_call", "kt_op_tune"...), for messages */
    const kt_backend *b; /* the op's device: its backend, state and local index; host: */
    void *bstate;        /* the C backend, whose buffers are host memory */
    size_t dev;
    bool host;
    void *scratch;       /* host memory for reading device buffers back */
    size_t scratch_bytes;
    kt_inputs inputs;  /* the op's mode, or CLONE for kt_op_tune in PROTECT mode */
    const kt_arg *caller;
    kt_arg *args;      /* the arguments tuning runs start from (caller's, clones or generated) */
    kt_arg *run_args;  /* one run's copy, which a pre-hook may change */
    void **pristine;   /* per argument: the bytes to restore a ReadWrite buffer from, or NULL */
    void **owned;      /* per argument: the allocation behind a CLONE or GENERATED buffer, or NULL */
    size_t *owned_bytes;
    uint64_t *ro_hash; /* per argument: hash of a ReadOnly buffer's contents at the start */
    bool dev_checks;   /* the backend digests and compares buffers on the device (ABI 9) */
    size_t cur, peak;  /* extra bytes held now, and at most */
};

/* Sets up the work arguments for a tuning from the caller's arguments, by inputs. A copied or
 * generated buffer keeps the caller's pointer's alignment (modulo the largest alignment any
 * requirement or key of the op looks at). launching: the caller's buffers will be launched on,
 * so they must not be NULL. */
kt_status kt__workset_init(kt__workset *ws, const kt_op *op, const char *where, kt_inputs inputs, const kt_arg *caller,
                          bool launching);

/* Prepares one tuning run, outside any timed region: restores ReadWrite buffers, fills
 * accumulating outputs, poisons the other WriteOnly outputs when poison is set, copies the
 * arguments and runs the pre-hook. *run_args receives the arguments to run on. */
kt_status kt__workset_before(kt__workset *ws, bool poison, const kt_arg **run_args);

/* Runs the post-hook after one tuning run, if a pre-hook ran. */
kt_status kt__workset_after(kt__workset *ws);

/* Whether a ReadOnly buffer of the work arguments changed since the start; names it in msg.
 * A changed buffer is put back (copied from the caller again in CLONE, regenerated in
 * GENERATED) or, in PROTECT where no copy exists, taken as the new baseline, so that the next
 * candidate is judged on its own writes only. */
bool kt__workset_ro_changed(kt__workset *ws, char *msg, size_t len);

/* After the last tuning run, on success or not: restores the caller's ReadWrite buffers and
 * fills its accumulating outputs (PROTECT mode), so the final launch sees the caller's data.
 * st is the tuning's status so far. Returns st when it is an error (its message kept; a buffer
 * that could not be restored is then logged), else KT_OK, or the status of the first buffer
 * that could not be restored, with a message naming it and the op. */
kt_status kt__workset_finish(kt__workset *ws, const kt_arg *caller, kt_status st);

void kt__workset_free(kt__workset *ws);

/* Copies bytes of an argument buffer (the op's device's memory) into host memory dst. */
kt_status kt__to_host(kt__workset *ws, void *dst, const void *src, size_t bytes);

/* Returns host memory holding an argument buffer's bytes: the buffer itself on the host, a
 * copy in the workset's scratch memory otherwise (valid until the next call). NULL on error. */
const void *kt__output_host(kt__workset *ws, const void *buf, size_t bytes);

/* On a workset that checks on the device (dev_checks): *copy receives a new device buffer
 * holding bytes of buf, counted in ws; elsewhere *copy is NULL. */
kt_status kt__workset_keep(kt__workset *ws, const void *buf, size_t bytes, void **copy);
void kt__workset_unkeep(kt__workset *ws, void *copy, size_t bytes);

/* Whether the backend says on the device that count elements of type t at actual match those
 * at expected (a kt__workset_keep copy) within atol and rtol (the ABI 9 all_close rule). false
 * also when it cannot say: the caller then compares on the host. */
bool kt__workset_close(kt__workset *ws, kt_type t, const void *actual, const void *expected, size_t count, double atol,
                       double rtol);

/* Allocates/frees extra host memory counted in ws. */
kt_status kt__extra_alloc(kt__workset *ws, size_t bytes, void **out);
void kt__extra_free(kt__workset *ws, void *p, size_t bytes);

/* Writes value converted to type t into out (kt_type_size(t) bytes). */
void kt__encode(kt_type t, double value, void *out);

/* Reads element i of a buffer of type t as a double. */
double kt__decode(kt_type t, const void *base, size_t i);

/* The poison pattern of type t (kt_type_size(t) bytes). */
const void *kt__poison(kt_type t);

/* The tolerances a float output of type t is compared with (the op's, or the type's default);
 * 0 and 0 for other types (compared bit for bit). */
void kt__tolerances(const kt_op *op, kt_type t, double *atol, double *rtol);

/* ---- validate.c: the reference and comparisons --------------------------------------------- */

typedef struct kt__reference {
    long unit;         /* the reference unit, or -1 for a reference function or none */
    bool active;       /* a reference ran: candidates are compared with it */
    bool wrote_input;  /* the reference candidate wrote into a ReadOnly buffer */
    int failed_rc;     /* nonzero: the reference unit's run returned this */
    char *failed_msg;  /* and the detail message it left (KT__RC_REPORTED), or NULL */
    char message[256];
    void **outputs;    /* per argument: the reference's WriteOnly/ReadWrite output, or NULL */
    void **dev_outputs; /* per argument: the same on the device (kt__workset_keep), or NULL */
    size_t *out_bytes; /* per argument: its size */
    kt_result result;  /* the reference's returned output */
    size_t agree, among; /* chosen by consensus: how many units agreed with it, of how many voted */
} kt__reference;

/* Runs the reference on the work arguments (a validation run: poisoned outputs) and keeps its
 * outputs. Leaves ref->active false, and says why in the log, when there is no usable reference. */
/* Runs unit index of a tuning on args (res: where a result-returning candidate puts it). */
typedef int (*kt__unit_runner)(void *user, size_t unit, const kt_arg *args, kt_result *res);

/* The reference candidate: named, else the default, else the first added. */
long kt__reference_candidate(const kt_op *op);

kt_status kt__reference_capture(kt__reference *ref, kt__workset *ws, const kt__unit *units, size_t nunits,
                                const bool *accepts, kt__unit_runner run, void *run_user);

/* Compares one validation run's outputs (run_args, result) with the reference's. Returns true
 * when they match; otherwise writes the diagnostic into msg. */
bool kt__validate(const kt__reference *ref, kt__workset *ws, const kt_arg *run_args,
                  const kt_result *result, char *msg, size_t len);

void kt__reference_free(kt__reference *ref, kt__workset *ws);

/* Copies bytes of a work buffer (device memory on a device backend) to host memory dst, and
 * host memory src into a work buffer. */
kt_status kt__workset_to_host(const kt__workset *ws, void *dst, const void *buf, size_t bytes);
kt_status kt__workset_from_host(const kt__workset *ws, void *buf, const void *src, size_t bytes);

/* ---- engine.c: the measurement engine ----------------------------------------------------- */

/* One candidate as the engine sees it: before() prepares a run outside the timed region and
 * hands back the arguments; run() is the timed call (returns the candidate's code); after()
 * cleans up outside the timed region. */
typedef struct kt__trial {
    kt_status (*before)(void *ctx, const kt_arg **args);
    int (*run)(void *ctx, const kt_arg *args);
    kt_status (*after)(void *ctx);
    /* optional: the device time of the last run in ns (timing events), used instead of the
     * CPU clock; negative when there is none */
    double (*device_ns)(void *ctx);
    void *ctx;
} kt__trial;

/* How the engine reaches the units it measures. */
typedef struct kt__engine_io {
    void *user;
    /* Prepares unit i (its validation run): *usable says whether it may be measured (when not,
     * its outcome says why), *runs how many times it ran. An error is not the unit's. */
    kt_status (*admit)(void *user, size_t i, bool *usable, unsigned *runs);
    /* Unit i's result record and trial (called once admitted). */
    kt__cand_result *(*result)(void *user, size_t i);
    void (*trial)(void *user, size_t i, kt__trial *out);
    /* Optional progress, as kt_progress_fn. */
    void (*progress)(void *user, size_t done, size_t total, size_t valid, size_t failed, double best_ns);
    /* Optional: the order of admission, by a search (measure.c). next writes up to max units to
     * admit next (eligible ones) and returns how many, 0 once the search is over; units it never
     * names stay NOT_RUN, and the budget of units is its to keep. NULL: every eligible unit in
     * index order, within the budget of units. told (optional, with or without next) gives each
     * admitted unit's screened time in ns (INFINITY when it failed): for the search, and to
     * record the unit as it comes. */
    size_t (*next)(void *user, size_t *units, size_t max);
    void (*told)(void *user, size_t i, double ns);
    /* The clock a budget of seconds counts on (the context's budget clock; NULL: kt__now_s),
     * and when the tuning started on it, so that the budget counts what came before the engine
     * too (setting up, building and running the reference). A simulated clock may start at 0,
     * so 0 is a time like any other. */
    kt_clock_fn clock;
    void *clock_user;
    double start_s;
    /* Optional: true once the tuning wants no more units admitted (those not admitted stay
     * NOT_RUN, no race follows); checked after each admission. */
    bool (*stopped)(void *user);
} kt__engine_io;

/* Now on a budget clock (NULL: the wall clock, kt__now_s). */
static inline double kt__clock_s(kt_clock_fn clock, void *user) { return clock ? clock(user) : kt__now_s(); }

typedef struct kt__engine_out {
    long best;          /* the winning unit, -1 when none was measured */
    double confidence;  /* see engine.c */
    uint64_t runs;      /* every run: validation, warm-ups, measured */
    double measure_ns;  /* time of the warm-ups and measured runs */
    size_t valid, failed;
} kt__engine_out;

/* Measures the eligible of n units by cfg's policy within budget and picks the fastest. A
 * unit whose run returns nonzero ends KT_OUTCOME_FAILED with its code; units the budget left
 * out stay KT_OUTCOME_NOT_RUN. Returns an error only when it is not the units'. */
kt_status kt__engine_run(const kt__measure_cfg *cfg, const kt__budget *budget, const kt__engine_io *io,
                         const bool *eligible, size_t n, kt__engine_out *out);

/* ---- variant.c: units ------------------------------------------------------------------------ */

/* Sets a unit's diagnostic from fmt, which takes detail (a %s) and code (a %d), whole. */
void kt__unit_message(kt__cand_result *r, const char *fmt, const char *detail, int code);

/* ---- work.c: the work formulas of kt_op_set_work -------------------------------------------------- */

/* Evaluates the op's work formulas for every unit of d with the arguments it was measured on
 * (units' flops and bytes; -1 where a formula does not compute). Nothing when none is declared. */
void kt__work_eval(const kt_op *op, kt_decision *d, const kt_arg *args);

/* The plans of variant units not built yet (variant.c). */
typedef struct kt__plans kt__plans;

/* Makes the decision's units (see variant.c); only_text picks one configuration of group only.
 * keep (NULL, or one per candidate): receives each variant group's enumeration, whose
 * configuration k is the group's k-th unit (the caller frees them with kt__configs_free).
 * lazy (NULL: build every variant unit now): receives the plans of the variant units, which are
 * built only when kt__build_some is asked for them (free with kt__plans_free). */
kt_status kt__make_units(kt_op *op, kt_decision *d, const kt_arg *args, long only, const char *only_text, kt__configs *keep,
                         kt__plans **lazy);

/* Builds those of units (n of them) that are planned and not built yet, in parallel: each ends
 * runnable or BUILD_FAILED. An error is not the units'. With a deadline (monotonic seconds, as
 * kt__now_s; 0: none), builds still running then are left (cancelled where the backend can
 * stop its compiler) and builds not started never start: their units stay NOT_RUN, for good
 * (their plans are freed). */
kt_status kt__build_some(kt_op *op, kt_decision *d, kt__plans *plans, const size_t *units, size_t n, double deadline);

/* Whether unit i is planned and not built yet. */
bool kt__unit_planned(const kt__plans *plans, size_t i);

/* A planned unit's defines (false when it is not planned); and forgetting its plan once built. */
bool kt__plan_defines(const kt__plans *plans, size_t i, const char *const **defines, size_t *n);
void kt__plan_done(kt__plans *plans, size_t i);

/* ---- builder.c: building planned units in the background ------------------------------------- */

typedef struct kt__builder kt__builder;

/* Starts a builder of d's planned units with threads threads (0: one per core; at most 64).
 * cancellable: its stop may abandon running builds (a budget of wall seconds), so their
 * requests say whether they are still wanted (kt_build_request.cancelled): a backend that can
 * stop its compiler then does, and a C compiler runs in a process group of its own for that.
 * background: the tuning measures while these build, so the build threads (and the compilers
 * they start) run at a lower priority (nice + 10 on Linux): the measuring thread and its runner
 * process get a processor when they need one, even with every core compiling. */
kt_status kt__builder_start(kt_op *op, kt_decision *d, kt__plans *plans, size_t threads, bool cancellable, bool background,
                            kt__builder **out);

/* Makes the builder's builds artifacts only (before any submit): nothing is loaded, and a taken
 * unit gets its artifact's path and build time, no launch (kt_op_build). */
void kt__builder_no_load(kt__builder *bl);

/* The builds done so far: compiled now, found on disk, failed (now, or recorded as failing). */
void kt__builder_counts(kt__builder *bl, size_t *built, size_t *found, size_t *failed);

/* A decision for key (len words, hash) of op, empty and tuning, in no table (miss.c). */
kt_decision *kt__decision_new(const kt_op *op, const int64_t *key, size_t len, uint64_t hash);

/* Queues the planned, not yet decided ones of units for building (those sharing a build's key
 * share the build). A unit that cannot be built here at all (no compiler, launch parameters
 * the backend cannot pass) ends BUILD_FAILED at once, not queued. An error is not the units'. */
kt_status kt__builder_submit(kt__builder *b, const size_t *units, size_t n);

/* Takes up to max units whose builds are done (waiting for one when wait and some are still
 * building, until deadline, a time of kt__now_s, when it is above 0), finished on this thread:
 * runnable, or BUILD_FAILED. With oldest, only the unit submitted first of those not taken,
 * once its build is done (waiting for it when wait): units come back in the order they were
 * submitted, whatever order their builds end in. Returns how many. *st: an error that is not
 * the units'. */
size_t kt__builder_take(kt__builder *b, size_t *units, size_t max, bool wait, bool oldest, double deadline, kt_status *st);

/* Units submitted and not taken yet; the q quantile (0 to 1) of the times of the builds done
 * (ms, 0 before one). */
size_t kt__builder_pending(kt__builder *b);
double kt__builder_quantile_ms(kt__builder *b, double q);

/* Stops the builder: queued builds never start (their units stay planned and NOT_RUN); built
 * units not taken are finished. Builds running finish first, or with abandon, on their own
 * after this returns, their units NOT_RUN and their modules unloaded (the context waits for
 * them: kt__builders_drain); a cancellable builder's are told they are no longer wanted, so
 * that a backend that can stop its compiler does it now. NULL is harmless. */
void kt__builder_stop(kt__builder *b, bool abandon);

void kt__plans_free(kt__plans *plans);

/* Whether a unit is built and not yet decided. */
bool kt__unit_runnable(const kt__unit *u);

/* Makes native candidate i's unit in *u (a native device candidate's runs through its device's
 * backend, with u->launch as its user data: *u must not move afterwards). */
void kt__unit_native(const kt_op *op, size_t i, kt__unit *u);


/* ---- measure.c ---------------------------------------------------------------------------- */

/* Validates and measures every runnable unit of d on a workset built from the caller's
 * arguments, picks the fastest, and restores the caller's buffers for the final launch (on
 * every path, errors included). Returns KT_ERR_ALL_FAILED when no unit passed; any other error
 * is not the candidates' (the key will be tuned again). launching: the caller's buffers get the
 * final launch (kt_op_call); otherwise (kt_op_tune) they are not written at all. generated:
 * tune on generated inputs whatever the op's inputs mode (a deferred key, not launching: its
 * buffers are NULL). */
kt_status kt__measure_all(kt_op *op, kt_decision *d, const kt_arg *caller, bool launching, bool generated);

/* ---- recall.c ------------------------------------------------------------------------------- */

/* Looks d's key up in the persistent cache; when a usable record is there, makes its winner
 * runnable and sets *found. A rejected record is counted, logged and its reason kept in
 * d->cache_rejected. A usable record below the confidence its race asked for is served only
 * when the op may not measure; otherwise d->rerace is set and *found stays false. */
kt_status kt__persist_recall(kt_op *op, kt_decision *d, const kt_arg *args, bool *found);

/* Makes d's units for a winner recorded elsewhere (candidate cand_name; configuration config of
 * a variant group, NULL for a native) and finds the unit that runs it for these arguments: the
 * candidate's index into *cand and the unit's into *unit; when it cannot serve (a candidate the
 * op lacks or of another kind, the reference-only one, one that rejects these arguments, a
 * configuration not in today's space for them or that cannot run) *unit is -1 and why says so
 * (d's units may have been made: kt__decision_reset them). An error is not the record's. */
kt_status kt__adopt_winner(kt_op *op, kt_decision *d, const kt_arg *args, const char *cand_name, const char *config, long *cand,
                           long *unit, char *why, size_t len);

/* Answers a key with no recorded decision from other keys' and devices' decisions (fallback.c),
 * by the rules of kt_decision_source: *found says whether one did (then d is decided, its
 * source NEAREST, ARCH or VENDOR). Measures nothing; a cache that cannot be read is skipped. */
kt_status kt__fallback(kt_op *op, kt_decision *d, const kt_arg *args, bool *found);

/* The fleet's shared cache (shared.c). recall: the remote's decision of d's key, checked and
 * taken as a recalled record is (source REMOTE; kept in the local cache too); *found says
 * whether. claim: before measuring, the key's lease across processes: *held when this one is to
 * measure (then kt__shared_release after publishing), or *found when another process's result
 * came in meanwhile. publish: the record of a decision measured here. Each is a no-op without a
 * remote, and an unreachable one costs a log line, never the call. */
struct kt__store_rec;
kt_status kt__shared_recall(kt_op *op, kt_decision *d, const kt_arg *args, bool *found);
kt_status kt__shared_claim(kt_op *op, kt_decision *d, const kt_arg *args, bool *found, bool *held);
void kt__shared_release(kt_op *op, const kt_decision *d);
void kt__shared_publish(kt_op *op, const struct kt__store_rec *rec);

/* The decision a registered table (aot.c) holds for d's key on the op's device, taken as a
 * recalled record is (source TABLE); *found says whether one did. Reads no cache. */
kt_status kt__aot_recall(kt_op *op, kt_decision *d, const kt_arg *args, bool *found);

/* The entries of the op's name in the tables of the op's device: up to max into out (and their
 * tables into tables, when not NULL); returns how many there are. */
struct kt_aot_entry;
struct kt_aot_table;
size_t kt__aot_entries(const kt_op *op, const struct kt_aot_entry **out, size_t max, const struct kt_aot_table **tables);

/* The same rules for a miss under capture, where nothing may be built: the first native
 * candidate that a ranked decision names and that accepts key, its rule into *source; -1 when
 * none does. */
long kt__fallback_native(kt_op *op, const int64_t *key, const char *where, kt_decision_source *source);

/* Sets what a measured decision's race asked for (d->requested_confidence) and records the
 * decision with all its units (failures are logged, never returned). */
void kt__persist_record(kt_op *op, kt_decision *d);

/* Marks the units the cache already knows: recorded failures (not built or run again) and
 * recorded measurements (recalled). Nothing comes from a record that was rejected; when d is
 * re-raced, its record's finalists are left to be measured and its other units are held. */
void kt__persist_units(kt_op *op, kt_decision *d);

/* Records unit i of d as a tuning decides it (ns: its screened time, INFINITY when it failed), so
 * that a tuning killed midway keeps it: the next tuning of the key takes it as recorded
 * (kt__persist_units) instead of measuring it again. Nothing without a cache, for a unit that
 * was recalled or failed for reasons not its own, or one the budget left unmeasured. */
void kt__persist_progress(kt_op *op, kt_decision *d, size_t i, double ns);

#endif /* KT_TUNE_STAGES_H */
