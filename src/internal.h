/*
 * internal.h - definitions shared by the library's source files; not installed.
 *
 * Internal names carry a kt__ prefix (public ones kt_). Every struct behind a public opaque handle
 * is defined here so that the files of one concern can see the others' state without accessors.
 */
#ifndef KT_INTERNAL_H
#define KT_INTERNAL_H

#include <kerntune.h>
#include <kerntune/backend.h>

#include "expr.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>

#define KT__NAME_MAX 127             /* longest op, argument or candidate name */
#define KT__KEY_USER_MAX 8           /* key components an op may declare */
#define KT__KEY_AUTO_MAX 8           /* components the op adds itself (arguments that reach code) */
#define KT__MASK_WORDS_MAX 8         /* 64-bit words of validity mask: 512 candidates */
#define KT__KEY_WORDS_MAX (KT__KEY_USER_MAX + KT__KEY_AUTO_MAX + KT__MASK_WORDS_MAX)
#define KT__CALL_SLOTS_MAX 128       /* slots of a space whose global size a call computes */
#define KT__CAND_MAX 4096            /* candidates per op */
#define KT__ERRBUF 1024              /* bytes of the per-thread detail message (longer ones: the heap) */
#define KT__ARTIFACT_DIR_MAX 3900    /* characters of an artifact directory (its files' paths fit 4096) */

#if defined(__GNUC__)
#define KT__LIKELY(x) __builtin_expect(!!(x), 1)
#define KT__UNLIKELY(x) __builtin_expect(!!(x), 0)
#define KT__PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define KT__LIKELY(x) (x)
#define KT__UNLIKELY(x) (x)
#define KT__PRINTF(f, a)
#endif

/* ---- status.c: the per-thread detail message, logging -------------------------------------- */

/* Formats the calling thread's detail message and returns status, so that a failing path reads
 * `return kt__err(KT_ERR_X, "kt_fn(...): what", ...);`. */
kt_status kt__err(kt_status status, const char *fmt, ...) KT__PRINTF(2, 3);
kt_status kt__verr(kt_status status, const char *fmt, va_list ap);

/* A copy of the calling thread's detail message (NULL when out of memory), and putting such a
 * copy back as the message (freeing it) with status returned: for work that must not disturb
 * the caller's last error, or a message that must outlive further calls. */
char *kt__error_save(void);
kt_status kt__error_restore(kt_status status, char *saved);

/* Emits one log line through ctx when level is at or below the context's level. */
void kt__log(const kt_context *ctx, kt_log_level level, const char *fmt, ...) KT__PRINTF(3, 4);

/* Duplicates a name after checking it is 1..KT__NAME_MAX characters; reports as `where`. */
kt_status kt__dup_name(const char *name, const char *where, char **out);

/* ---- context.c ----------------------------------------------------------------------------- */

struct kt_device {
    char *backend;
    char *name;
    char *fingerprint;
    size_t slot;   /* the backend's index in ctx->backends */
    size_t local;  /* the device's index within its backend */
};

typedef struct kt__backend_slot {
    const kt_backend *backend;
    void *state;
} kt__backend_slot;

typedef struct kt__force {
    char *op;
    char *candidate;
} kt__force;

typedef struct kt__worker kt__worker;

typedef struct kt__measure_cfg {
    kt_policy policy;
    unsigned warmup_runs; /* the fixed policy */
    unsigned min_runs;
    unsigned max_runs;
    double min_time_s;
    double confidence;    /* the race */
    double tolerance;
    unsigned race_max_runs;
    kt_flush flush;
} kt__measure_cfg;

/* Limits on one tuning; 0: none. */
typedef struct kt__budget {
    size_t units;
    double seconds;
    uint64_t runs;
} kt__budget;

#define KT__MAX_BACKENDS 16
#define KT__MAX_DEVICES 64

struct kt_context {
    kt_effort effort;     /* set by kt_context_set_effort */
    kt_effort env_mode;   /* from KERNTUNE_MODE; KT_EFFORT_INHERIT when unset */
    kt__force *forces;    /* from KERNTUNE_FORCE */
    size_t nforces;
    _Atomic int log_level;
    kt_log_fn log_fn;
    void *log_user;
    kt__measure_cfg measure;
    kt__backend_slot backends[KT__MAX_BACKENDS]; /* fixed arrays: entries never move, so */
    size_t nbackends;                            /* readers need no lock once they see */
    kt_device devices[KT__MAX_DEVICES];          /* a count that covers them */
    _Atomic size_t ndevices;
    bool discovered;                             /* the optional backends were tried */
    char *unavailable[KT__MAX_BACKENDS];         /* "name: why", for each that is not there */
    size_t nunavailable;
    pthread_mutex_t lock; /* guards the op list */
    kt_op *ops;
    char artifact_dir[KT__ARTIFACT_DIR_MAX + 1];
    size_t compile_threads;     /* 0: one per core */
    kt_progress_fn progress_fn;
    void *progress_user;
    _Atomic uint64_t compiles;  /* builds run (artifact cache misses) */
    _Atomic uint64_t artifact_hits;
    pthread_mutex_t iso_lock;   /* held by an isolated tuning: one at a time per context */
    kt__worker *workers[KT__MAX_DEVICES]; /* warm worker processes, per device */
    pthread_mutex_t cache_lock; /* guards opening the cache */
    char *cache_path;           /* as set; NULL: the default */
    bool cache_off;
    _Atomic int cache_tried;    /* the cache was opened, or failed to open */
    kt_cache *cache;            /* NULL when off or unavailable */
    _Atomic uint64_t cache_hits, cache_rejected;
};

/* The context's persistent cache, opened at the first need; NULL when it is off or cannot be
 * opened (said once in the log). */
kt_cache *kt__context_cache(kt_context *ctx);

/* Returns the candidate forced for op name by KERNTUNE_FORCE, or NULL. */
const char *kt__context_forced(const kt_context *ctx, const char *op_name);

/* Registers the optional built-in backends (OpenCL, CUDA) the first time devices are asked
 * for; thread-safe. */
void kt__context_discover(kt_context *ctx);

/* Unlinks op from its context's list (called by kt_op_destroy). */
void kt__context_unlink(kt_context *ctx, kt_op *op);

/* ---- op.c: declarations -------------------------------------------------------------------- */

typedef struct kt__argdecl {
    char *name;
    kt_type type;     /* KT_TYPE_BUFFER or the scalar type */
    kt_type elem;     /* element type of a buffer */
    kt_access access; /* buffers only */
    size_t esize;     /* element size of a buffer; size of a scalar */
    bool accumulate;  /* WriteOnly buffer filled with acc_value before every tuning run */
    double acc_value;
    bool constant;    /* a ReadOnly buffer in the device's constant memory (kt_op_set_constant) */
    kt_gen gen;       /* GENERATED mode: how to fill it */
    double gen_value;
    kt_generate_fn gen_fn;
    void *gen_user;
} kt__argdecl;

typedef enum kt__key_kind { KT__KEY_ARG, KT__KEY_ARG_FN, KT__KEY_ALIGN, KT__KEY_FN } kt__key_kind;

typedef struct kt__keycomp {
    kt__key_kind kind;
    size_t arg;
    kt_bucket bucket;
    kt_bucket_fn bucket_fn;
    kt_key_fn key_fn;
    void *user;
    uint64_t max_align;
    bool automatic;   /* added at freeze: the argument reaches a variant group's code or validity */
} kt__keycomp;

typedef enum kt__req_kind { KT__REQ_ALIGN, KT__REQ_MULTIPLE } kt__req_kind;

typedef struct kt__req {
    kt__req_kind kind;
    size_t arg;
    int64_t value;
} kt__req;

typedef struct kt__cand {
    char *name;
    kt_native_fn fn;     /* natives: exactly one of fn and rfn is set; variant groups: neither */
    kt_result_fn rfn;
    void *user;
    kt_space *space;     /* variant groups: the space, the source, the kernel, the options */
    char *source;
    char *kernel;
    char **options;
    size_t noptions;
    long *input_arg;     /* per space input: the op argument that binds it, or -1 */
    uint8_t call_dims;   /* bit d: the global size of dimension d reads an argument; each call
                          * computes it from its own (set at freeze) */
    kt__req *reqs;
    size_t nreqs;
    kt_accept_fn accept;
    void *accept_user;
    int mask_bit; /* bit in the key's validity mask; -1 when the candidate accepts everything */
} kt__cand;

/* Result of one unit within a decision. */
typedef struct kt__cand_result {
    kt_outcome outcome;
    double time_ns;
    unsigned runs;
    int fail_code;
    char *message;  /* diagnostic of a failed or invalid candidate */
    double *times;  /* the measured runs in ns, in order (runs of them) */
    double build_ms;
    unsigned warmups;         /* warm-up runs (validation excluded) */
    double ci_low_ns, ci_high_ns; /* confidence interval of time_ns */
    double spent_ns;          /* time of its warm-ups and measured runs */
    bool finalist;            /* measured and not dropped when the race stopped (set by the engine) */
} kt__cand_result;

/* How a device variant is launched: the user data of kt__launch_fn. */
typedef struct kt__launch {
    const kt_backend *backend;
    void *bstate;
    size_t device;
    void *module;
    kt_launch_geometry geometry;   /* as planned for the tuning's arguments */
    /* A group whose global size reads arguments (cand->call_dims): the configuration's slots as
     * planned (parameters, derived values, inputs), from which each call computes those sizes
     * with its own arguments in place of the inputs. NULL otherwise. */
    const kt_op *op;
    const kt__cand *cand;
    kt__value *slots;
    kt__arena slots_arena;         /* what strings and lists among them point into */
} kt__launch;

/* A native candidate calling a device variant through its backend (no timing). On a failure it
 * describes it in the thread's detail message and returns KT__RC_REPORTED. */
int kt__launch_fn(const kt_arg *args, size_t nargs, void *user);

/* A candidate's return code meaning "failed, and the detail message says how". */
#define KT__RC_REPORTED (-7002)

/* Whether candidate function fn's return code rc is such a described failure: only the launch
 * of a device variant reports so (a native may return the same number for its own reasons). */
static inline bool kt__rc_reported(kt_native_fn fn, int rc) { return rc == KT__RC_REPORTED && fn == kt__launch_fn; }

/* Whether an outcome is a failure of the unit's own (not a rejection, not "not run"). */
static inline bool kt__outcome_failed(int o) {
    return o == KT_OUTCOME_FAILED || o == KT_OUTCOME_INVALID || o == KT_OUTCOME_BUILD_FAILED || o == KT_OUTCOME_TIMEOUT ||
           o == KT_OUTCOME_CRASHED;
}

/* One thing a decision considers: a native candidate, or one configuration of a variant group. */
typedef struct kt__unit {
    size_t cand;
    char *text;            /* the configuration, "NAME=value,..."; NULL for natives */
    kt__cand_result r;
    kt_native_fn fn;       /* how to run it (set once it is built) */
    kt_result_fn rfn;
    void *user;
    kt__launch launch;     /* device variants: fn is kt__launch_fn and user points here */
    char *artifact;        /* variants: the artifact file (a worker process loads it from there) */
    bool recalled;         /* measured by an earlier tuning: its time comes from the cache */
    bool held;             /* recalled as a non-finalist of a decision being re-raced: keeps its
                              recorded result and never competes (persist.c) */
    bool env_failed;       /* failed for a reason outside its code (no artifact directory) */
} kt__unit;

/* Entry states. FAILED is final (every candidate failed); ABANDONED means the tuning stopped on
 * an error that is not the candidates' (out of memory, a hook): the next call tunes again. */
enum { KT__TUNING = 0, KT__DONE = 1, KT__FAILED = 2, KT__ABANDONED = 3 };

struct kt_decision {
    uint64_t hash;
    size_t keylen;                   /* words of key: user components, then mask words */
    size_t nuser;                    /* user components */
    int64_t key[KT__KEY_WORDS_MAX];
    _Atomic int state;               /* KT__TUNING, KT__DONE, KT__FAILED or KT__ABANDONED */
    kt_native_fn fn;                 /* the winner, copied for the hit path */
    kt_result_fn rfn;
    void *user;
    size_t winner;                   /* its candidate */
    size_t winner_unit;
    kt__unit *units;                 /* set when decided */
    size_t nunits;
    bool validated;
    size_t peak_extra;
    kt_decision_source source;
    kt_status fail_status;
    char *fail_msg;
    size_t ncand;
    kt_policy policy;                /* how it was measured */
    double confidence;
    double requested_confidence;     /* what its race asked for; <= 0: nothing (persist.c) */
    bool rerace;                     /* a recorded decision below its requested confidence is being
                                        re-raced: measure its finalists only (persist.c) */
    char *cache_rejected;            /* why the recorded decision for this key was rejected, or NULL */
    uint64_t total_runs;
    double measure_ns;
};

/* A module the op loaded, shared by every decision that uses it. */
typedef struct kt__module {
    char key[33];
    void *module;
} kt__module;

/* Open-addressed table of decisions. Readers probe it without a lock; writers hold op->lock,
 * publish an entry with a release store, and replace a full table by a copy twice the size. */
typedef struct kt__table {
    size_t mask;
    struct kt__table *retired_next; /* older tables, freed with the op */
    _Atomic(kt_decision *) slot[];
} kt__table;

struct kt_op {
    kt_context *ctx;
    kt_op *next;                   /* context's list */
    char *name;
    kt__argdecl *args;
    size_t nargs;
    kt__keycomp keys[KT__KEY_USER_MAX + KT__KEY_AUTO_MAX]; /* declared, then automatic (freeze) */
    size_t nkeys;
    kt__cand *cands;
    size_t ncands;
    size_t nmask_words;            /* set at freeze */
    size_t npredicated;            /* candidates with requirements */
    long default_idx, fallback_idx, forced_idx;  /* -1 when not set */
    size_t device;                 /* index in ctx->devices where variants run */
    kt__module *modules;           /* loaded variant modules (op->lock) */
    size_t nmodules;
    kt_inputs inputs;              /* where tuning runs take inputs from */
    uint64_t seed;
    kt_hook_fn pre_hook, post_hook;
    void *hook_user;
    bool has_result;               /* candidates return their output */
    kt_type result_elem;
    long reference_idx;            /* -1 when not set */
    bool reference_only;           /* the reference validates, never competes */
    kt_reference_fn reference_fn;
    void *reference_user;
    bool validate;
    bool tol_set;
    double atol, rtol;
    kt__budget budget;             /* 0s: no limit */
    kt_isolation isolation;        /* where variants run while tuning */
    double timeout_s;              /* one isolated run's limit */
    kt_effort effort;              /* as set on the op */
    kt_effort effective;           /* resolved at freeze */
    _Atomic int frozen;
    pthread_mutex_t lock;          /* guards insertion, the done list, freezing */
    pthread_cond_t cond;           /* signalled when a decision finishes */
    _Atomic(kt__table *) table;
    size_t count;                  /* decisions in the table */
    kt_decision **done;            /* finished decisions, in order */
    size_t ndone, done_cap;
    _Atomic uint64_t tune_count;
    _Atomic uint64_t measured_runs;
    char set_hash[33];             /* the candidate set's identity in the cache (set at freeze) */
};

/* Checks the op is still being built; reports as `where`. */
kt_status kt__op_building(const kt_op *op, const char *where);

/* Freezes the op on its first call: checks it, resolves effort and forced candidate, assigns
 * mask bits. Idempotent and thread-safe. */
kt_status kt__op_freeze(kt_op *op);

/* ---- key.c --------------------------------------------------------------------------------- */

/* Checks nargs and types against the signature. */
kt_status kt__check_args(const kt_op *op, const kt_arg *args, size_t nargs, const char *where);

/* Computes the full key (user components, then validity mask words) into key; returns its
 * length in words. Arguments must have been checked. */
size_t kt__key_compute(const kt_op *op, const kt_arg *args, int64_t *key);

/* Hashes a key. */
uint64_t kt__key_hash(const int64_t *key, size_t len);

/* Whether candidate idx accepts the arguments whose full key is key. */
bool kt__key_accepts(const kt_op *op, const int64_t *key, size_t idx);

/* Maps value by bucket (see kt_bucket). */
int64_t kt__bucket(int64_t value, kt_bucket bucket);

/* ---- table.c ------------------------------------------------------------------------------- */

kt_decision *kt__table_find(const kt__table *t, const int64_t *key, size_t len, uint64_t hash);

/* Inserts d (op->lock held); grows the table when it is half full. */
kt_status kt__table_insert(kt_op *op, kt_decision *d);

/* Frees every table and decision of the op. */
void kt__table_free(kt_op *op);

/* ---- args.c: the arguments tuning runs use ------------------------------------------------- */

/* Host memory through the C backend's buffer methods (the buffer interface of backend.h), with
 * the extra bytes a tuning holds counted. */
typedef struct kt__workset {
    const kt_op *op;
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
    size_t cur, peak;  /* extra bytes held now, and at most */
} kt__workset;

/* Sets up the work arguments for a tuning from the caller's arguments, by inputs. A copied or
 * generated buffer keeps the caller's pointer's alignment (modulo the largest alignment any
 * requirement or key of the op looks at). launching: the caller's buffers will be launched on,
 * so they must not be NULL. */
kt_status kt__workset_init(kt__workset *ws, const kt_op *op, kt_inputs inputs, const kt_arg *caller, bool launching);

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
 * fills its accumulating outputs (PROTECT mode), so the final launch sees the caller's data. */
kt_status kt__workset_finish(kt__workset *ws, const kt_arg *caller);

void kt__workset_free(kt__workset *ws);

/* Copies bytes of an argument buffer (the op's device's memory) into host memory dst. */
kt_status kt__to_host(kt__workset *ws, void *dst, const void *src, size_t bytes);

/* Returns host memory holding an argument buffer's bytes: the buffer itself on the host, a
 * copy in the workset's scratch memory otherwise (valid until the next call). NULL on error. */
const void *kt__output_host(kt__workset *ws, const void *buf, size_t bytes);

/* The op's device: its backend, backend state, local index and fingerprint. */
void kt__op_backend(const kt_op *op, const kt_backend **b, void **state, size_t *local, const char **fp);

/* Allocates/frees extra host memory counted in ws. */
kt_status kt__extra_alloc(kt__workset *ws, size_t bytes, void **out);
void kt__extra_free(kt__workset *ws, void *p, size_t bytes);

/* Writes value converted to type t into out (kt_type_size(t) bytes). */
void kt__encode(kt_type t, double value, void *out);

/* Reads element i of a buffer of type t as a double. */
double kt__decode(kt_type t, const void *base, size_t i);

/* The poison pattern of type t (kt_type_size(t) bytes). */
const void *kt__poison(kt_type t);

/* ---- validate.c: the reference and comparisons --------------------------------------------- */

typedef struct kt__reference {
    long unit;         /* the reference unit, or -1 for a reference function or none */
    bool active;       /* a reference ran: candidates are compared with it */
    bool wrote_input;  /* the reference candidate wrote into a ReadOnly buffer */
    int failed_rc;     /* nonzero: the reference unit's run returned this */
    char *failed_msg;  /* and the detail message it left (KT__RC_REPORTED), or NULL */
    char message[256];
    void **outputs;    /* per argument: the reference's WriteOnly/ReadWrite output, or NULL */
    size_t *out_bytes; /* per argument: its size */
    kt_result result;  /* the reference's returned output */
} kt__reference;

/* Runs the reference on the work arguments (a validation run: poisoned outputs) and keeps its
 * outputs. Leaves ref->active false, and says why in the log, when there is no usable reference. */
/* Runs unit index of a tuning on args (res: where a result-returning candidate puts it). */
typedef int (*kt__unit_runner)(void *user, size_t unit, const kt_arg *args, kt_result *res);

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

/* ---- bench.c: the measurement engine ------------------------------------------------------ */

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
} kt__engine_io;

typedef struct kt__engine_out {
    long best;          /* the winning unit, -1 when none was measured */
    double confidence;  /* see bench.c */
    uint64_t runs;      /* every run: validation, warm-ups, measured */
    double measure_ns;  /* time of the warm-ups and measured runs */
    size_t valid, failed;
} kt__engine_out;

/* Measures the eligible of n units by cfg's policy within budget and picks the fastest. A
 * unit whose run returns nonzero ends KT_OUTCOME_FAILED with its code; units the budget left
 * out stay KT_OUTCOME_NOT_RUN. Returns an error only when it is not the units'. */
kt_status kt__engine_run(const kt__measure_cfg *cfg, const kt__budget *budget, const kt__engine_io *io,
                         const bool *eligible, size_t n, kt__engine_out *out);

/* Seconds on the monotonic clock. */
double kt__now_s(void);

/* ---- tuner.c ------------------------------------------------------------------------------- */

/* Makes the decision's units (see tuner.c); only_text picks one configuration of group only. */
kt_status kt__make_units(kt_op *op, kt_decision *d, const kt_arg *args, long only, const char *only_text);

/* Whether a unit is built and not yet decided. */
bool kt__unit_runnable(const kt__unit *u);

/* Frees a decision's units and results (not the decision). */
void kt__decision_reset(kt_decision *d);

/* ---- isolate.c: candidates in a worker process ----------------------------------------------- */

/* How an isolated run went wrong: the candidate failed, crashed or hung; or (INFRA) the
 * isolation itself failed (no worker, a copy failed): not the candidate's, the tuning stops. */
enum { KT__ISO_FAILED = 1, KT__ISO_CRASH = 2, KT__ISO_TIMEOUT = 3, KT__ISO_INFRA = 4 };

/* The code a trial reports for a unit that failed in its worker (the class is kept aside). */
#define KT__ISO_FAIL_CODE (-7001)

struct kt__msg_setup;
struct kt__msg_load;

typedef struct kt__worker_mod {
    struct kt__msg_load *load; /* how to load it */
    uint64_t incarnation;      /* the worker process it was loaded into */
    uint32_t worker_id;        /* its id there */
} kt__worker_mod;

/* A worker process and what it was asked to hold. */
struct kt__worker {
    pid_t pid;                 /* -1: not running */
    int req, rep;              /* the socket to it */
    uint64_t incarnation;      /* counts replacements */
    int region_fd;
    unsigned char *region;
    size_t region_bytes;
    struct kt__msg_setup *setup;
    size_t setup_len;
    bool set_up;
    bool primed;               /* the inputs that do not change are in its buffers */
    kt__worker_mod *mods;
    size_t nmods;
    /* natives: a fork of the caller runs call(call_user, unit, args, nargs) instead */
    int (*call)(void *user, size_t unit, const kt_arg *args, size_t nargs);
    void *call_user;
};

/* Prepares *w (created when NULL) for a tuning on backend's device device_fp with arguments
 * laid out as args. The process starts at the first run. */
kt_status kt__worker_setup(kt__worker **w, const char *backend, const char *device_fp, const kt_arg *args, size_t nargs);

/* Starts the worker and sets it up now, so that a worker that cannot start fails the tuning
 * rather than its candidates. */
kt_status kt__worker_ready(kt__worker *w);

/* Registers an artifact to run; *id names it in kt__worker_run. */
kt_status kt__worker_add(kt__worker *w, const char *path, const char *kernel, const kt_launch_geometry *g, size_t *id);

/* Runs module id once on run_args (the workset's): copies them to the worker and back (full:
 * every buffer both ways, for a validation run; otherwise what changes between runs only).
 * Returns 0 with the kernel's time in *ns, or KT__ISO_FAILED (it returned a failure),
 * KT__ISO_CRASH or KT__ISO_TIMEOUT with msg saying what happened. */
int kt__worker_run(kt__worker *w, size_t id, const kt__workset *ws, const kt_arg *run_args, size_t nargs, bool flush, bool full,
                   double timeout_s, double *ns, char *msg, size_t len);

/* Kills the worker and frees it; NULL is harmless. */
void kt__worker_free(kt__worker *w);

/* ---- persist.c ------------------------------------------------------------------------------ */

/* Computes op->set_hash (at freeze). */
void kt__persist_identity(kt_op *op);

/* Looks d's key up in the persistent cache; when a usable record is there, makes its winner
 * runnable and sets *found. A rejected record is counted, logged and its reason kept in
 * d->cache_rejected. A usable record below the confidence its race asked for is served only
 * when the op may not measure; otherwise d->rerace is set and *found stays false. */
kt_status kt__persist_recall(kt_op *op, kt_decision *d, const kt_arg *args, bool *found);

/* Sets what a measured decision's race asked for (d->requested_confidence) and records the
 * decision with all its units (failures are logged, never returned). */
void kt__persist_record(kt_op *op, kt_decision *d);

/* Marks the units the cache already knows: recorded failures (not built or run again) and
 * recorded measurements (recalled). Nothing comes from a record that was rejected; when d is
 * re-raced, its record's finalists are left to be measured and its other units are held. */
void kt__persist_units(kt_op *op, kt_decision *d);

/* Frees a decision. */
void kt__decision_free(kt_decision *d);

/* ---- backend_c.c --------------------------------------------------------------------------- */

/* Writes a 64-bit FNV-1a hash of the bytes. */
uint64_t kt__fnv1a(const void *data, size_t len, uint64_t seed);

#endif /* KT_INTERNAL_H */
