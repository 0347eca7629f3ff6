/*
 * op.h - the model every call and tuning works on: the context (its backends, devices and
 * settings), the op (its signature, key components and candidates) and its decisions (the
 * table of finished and running tunings). Owned by src/op/; read by src/tune/ and src/call/,
 * never by the stages below them. Not installed.
 */
#ifndef KT_OP_H
#define KT_OP_H

#include <kerntune.h>
#include <kerntune/backend.h>
#include <kerntune/cache.h>
#include <kerntune/decision.h>
#include <kerntune/device.h>
#include <kerntune/inputs.h>
#include <kerntune/measure.h>
#include <kerntune/validation.h>
#include <kerntune/variants.h>

#include "compile/compile.h"
#include "space/expr.h"
#include "util/buildid.h"
#include "util/util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#define KT__KEY_USER_MAX 8           /* key components an op may declare */
#define KT__KEY_AUTO_MAX 8           /* components the op adds itself (arguments that reach code) */
#define KT__MASK_WORDS_MAX 8         /* 64-bit words of validity mask: 512 candidates */
#define KT__KEY_WORDS_MAX (KT__KEY_USER_MAX + KT__KEY_AUTO_MAX + KT__MASK_WORDS_MAX)
#define KT__CALL_SLOTS_MAX 128       /* slots of a space whose global size a call computes */
#define KT__CAND_MAX 4096            /* candidates per op */
#define KT__LPARAMS_MAX 8            /* launch parameters per variant group (kt_op_add_launch_param) */
#define KT__LPARAM_BYTES_MAX 2048    /* their bytes together, each at a 64-byte offset */
#define KT__LPARAM_ARGS_MAX 64       /* an op with launch parameters has at most this many arguments */

/* ---- context.c ----------------------------------------------------------------------------- */

struct kt_device {
    const kt_backend *table; /* the backend that found it */
    char *backend;
    char *name;
    char *fingerprint;
    char *arch, *vendor; /* as the backend classifies it (ABI 12); "" when unknown */
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

typedef struct kt__runner kt__runner;

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
    double fraction;  /* of the units of a tuning (0: none); with units, the smaller */
    double seconds;
    uint64_t runs;
} kt__budget;

#define KT__MAX_BACKENDS 16
#define KT__MAX_DEVICES 64
#define KT__MAX_TABLES 64

struct kt_aot_table; /* kerntune/aot.h */

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
    unsigned backends_left_out;                  /* built-in backends not to start, by index */
    char *unavailable[KT__MAX_BACKENDS];         /* "name: why", for each that is not there */
    size_t nunavailable;
    pthread_mutex_t lock; /* guards the op list */
    kt_op *ops;
    kt__artifacts artifacts;    /* where variants are built, and counts of builds */
    kt_progress_fn progress_fn;
    void *progress_user;
    kt_unit_fn unit_fn;
    void *unit_user;
    kt_clock_fn budget_clock;   /* what a budget of seconds counts on (NULL: the wall clock) */
    void *budget_clock_user;
    pthread_mutex_t iso_lock;   /* held by an isolated tuning: one at a time per context */
    kt__runner *runners[KT__MAX_DEVICES]; /* warm runner processes, per device */
    pthread_mutex_t cache_lock; /* guards opening the cache */
    char *cache_path;           /* as set; NULL: the default */
    bool cache_off;
    _Atomic int cache_tried;    /* the cache was opened, or failed to open */
    kt_cache *cache;            /* NULL when off or unavailable */
    _Atomic uint64_t cache_hits, cache_rejected;
    char *remote_url;           /* the shared cache (tune/shared.c); NULL: none */
    unsigned char *remote_key;
    size_t remote_key_len;
    int remote_timeout_ms;      /* a Redis call's bound; 0: the default (200 ms) */
    struct kt__remote *remote;  /* opened at the first need, under cache_lock */
    _Atomic int remote_tried;
    _Atomic uint64_t remote_hits, remote_rejected, remote_errors;
    const struct kt_aot_table *tables[KT__MAX_TABLES]; /* registered decision tables (tune/aot.c): */
    _Atomic size_t ntables;     /* entries never move; published by the count */
    _Atomic uint64_t table_hits;
    void *user;                 /* the caller's (kt_context_set_user); never read by kerntune */
    struct kt__builder *draining; /* builders whose abandoned builds still run (ctx->lock) */
    void (*drain)(kt_context *ctx, bool all); /* frees them (kt__builders_drain), set with draining */
};

/* Emits one log line through ctx when level is at or below the context's level. */
void kt__log(const kt_context *ctx, kt_log_level level, const char *fmt, ...) KT__PRINTF(3, 4);

/* Reads KERNTUNE_REMOTE, KERNTUNE_REMOTE_KEY and KERNTUNE_REMOTE_KEY_FILE (kt_context_create);
 * frees what the shared cache holds (kt_context_destroy). op/settings.c. */
kt_status kt__shared_env(kt_context *ctx);
void kt__shared_free(kt_context *ctx);

/* Frees the builders a tuning under a budget left with builds running (tune/builder.c): those
 * whose builds have ended, or with all, every one, waiting for its builds. The context calls it
 * through ctx->drain, which tune/builder.c sets when it leaves a builder there. */
struct kt__builder;
void kt__builders_drain(kt_context *ctx, bool all);

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
    kt_type type;       /* KT_TYPE_BUFFER or the scalar type (first: what a hit checks) */
    uint64_t size_mask; /* a buffer's bytes & size_mask must be 0: esize - 1 (every element size is a power of two) */
    char *name;
    kt_type elem;       /* element type of a buffer */
    kt_access access;   /* buffers only */
    size_t esize;       /* element size of a buffer; size of a scalar */
    bool accumulate;  /* WriteOnly buffer filled with acc_value before every tuning run */
    double acc_value;
    bool constant;    /* a ReadOnly buffer in the device's constant memory (kt_op_set_constant) */
    uint8_t compare;  /* kt_compare: how validation compares this output (kt_op_set_compare) */
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
    bool scale_set;   /* kt_op_key_scale named its scale */
    kt_key_scale scale;
} kt__keycomp;

typedef enum kt__req_kind { KT__REQ_ALIGN, KT__REQ_MULTIPLE } kt__req_kind;

typedef struct kt__req {
    kt__req_kind kind;
    size_t arg;
    int64_t value;
} kt__req;

/* A launch parameter of a variant group: bytes at offset of the launch's parameter block. */
typedef struct kt__lparam {
    size_t bytes, offset;
    kt_launch_param_fn fn;
    void *user;
} kt__lparam;

typedef struct kt__cand {
    char *name;
    kt_native_fn fn;     /* natives: exactly one of fn, rfn and qfn is set; variant groups: none */
    kt_result_fn rfn;
    kt_queued_fn qfn;    /* a native device candidate (kt_op_add_native_queued) */
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
    char *version;       /* kt_op_set_candidate_version; NULL when not set */
    kt__lparam lparams[KT__LPARAMS_MAX]; /* variant groups: launch parameters, in order */
    size_t nlparams;
    /* variant groups: Kernel Tuner's compile contract (kt_op_set_kernel_tuner_contract) and the
     * names its block dimensions are defined as */
    bool kt_contract;
    char kt_block_names[3][KT__NAME_MAX + 1];
    /* natives: the identity of the loaded object that holds the function (util/buildid.h), ""
     * when it is in none; set at freeze, part of the candidate set's and the unit's identity */
    char code_id[KT__CODE_ID_MAX];
    const void *code_base;  /* that object's base address (to identify each object once) */
} kt__cand;

/* Result of one unit within a decision. */
typedef struct kt__cand_result {
    kt_outcome outcome;
    double time_ns;
    unsigned runs;
    int fail_code;            /* what fail_kind says it is */
    kt_fail_kind fail_kind;   /* how a run failed (outcomes FAILED, TIMEOUT, CRASHED) */
    char *message;  /* diagnostic of a failed or invalid candidate */
    double *times;  /* the measured runs in ns, in order (runs of them) */
    double build_ms;
    unsigned warmups;         /* warm-up runs (validation excluded) */
    double ci_low_ns, ci_high_ns; /* confidence interval of time_ns */
    double flops, bytes;      /* kt_op_set_work's formulas for this unit and the arguments (-1: not
                                 declared, or not computable for them) */
    bool work_set;            /* flops and bytes were evaluated */
    int registers, shared_bytes, local_bytes; /* what its kernel uses (backend ABI 13) */
    bool resources_set;
    double spent_ns;          /* time of its warm-ups and measured runs */
    double validate_ns;       /* wall time of its validation (the run, the comparison, the restores) */
    double framework_ns;      /* wall time around its runs that is not the run itself (preparing,
                                 flushing, restoring, a runner's round trip), and loading it */
    bool finalist;            /* measured and not dropped when the race stopped (set by the engine) */
} kt__cand_result;

/* A variant's global sizes that read arguments (cand->call_dims), compiled at planning into
 * integer programs (space/expr.h) over the arguments they read, so that a call computes them
 * without the interpreter. */
#define KT__CALL_INPUTS_MAX 8
typedef struct kt__call_sizes {
    size_t ninputs;
    uint32_t arg[KT__CALL_INPUTS_MAX];   /* the argument that program input i reads: */
    int8_t shift[KT__CALL_INPUTS_MAX];   /* a buffer's bytes >> shift (elements), or (-1) an
                                            integer scalar's value */
    kt__iprog prog[3];                   /* per dimension of cand->call_dims */
} kt__call_sizes;

/* How a device variant is launched: the user data of kt__launch_fn. A native device candidate
 * (kt__queued_fn's user data) uses backend, bstate, device, qfn and quser. */
typedef struct kt__launch {
    /* what a hit reads, together */
    const kt_backend *backend;
    bool async;                    /* the backend can enqueue it on a caller's queue (ABI 7) */
    bool lparams;                  /* cand has launch parameters: each launch computes them */
    uint8_t call_dims;             /* cand->call_dims, copied for the hit */
    void *bstate;
    size_t device;
    void *module;
    kt__call_sizes *sizes;         /* the sizes below compiled; NULL: the interpreter computes them */
    kt_queued_fn qfn;              /* a native device candidate: its function and user data */
    void *quser;
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

/* A native device candidate run on the device's default queue, waited for (no timing): the
 * unit's fn, with its kt__launch as user data. The native's own failure is its return value;
 * the backend's is described in the detail message, returning KT__RC_REPORTED. */
int kt__queued_fn(const kt_arg *args, size_t nargs, void *user);

/* A candidate's return code meaning "failed, and the detail message says how". */
#define KT__RC_REPORTED (-7002)

/* Whether candidate function fn's return code rc is such a described failure: the launch of a
 * device variant, or the backend around a native device candidate, reports so (a native may
 * return the same number for its own reasons), and so does any native that says why with
 * kt_candidate_failed. */
static inline bool kt__rc_reported(kt_native_fn fn, int rc) {
    return (rc == KT__RC_REPORTED && (fn == kt__launch_fn || fn == kt__queued_fn)) || rc == KT_CANDIDATE_FAILED_SAID;
}

/* Whether unit function fn goes through the op's device backend (a device variant, or a native
 * device candidate): u->launch says which backend and device. */
static inline bool kt__fn_on_device(kt_native_fn fn) { return fn == kt__launch_fn || fn == kt__queued_fn; }

/* Whether an outcome is a failure of the unit's own (not a rejection, not "not run"). */
static inline bool kt__outcome_failed(int o) {
    return o == KT_OUTCOME_FAILED || o == KT_OUTCOME_INVALID || o == KT_OUTCOME_BUILD_FAILED || o == KT_OUTCOME_TIMEOUT ||
           o == KT_OUTCOME_CRASHED;
}

/* One thing a decision considers: a native candidate, or one configuration of a variant group. */
typedef struct kt__unit {
    kt_native_fn fn;       /* how to run it (set once it is built); first: what a hit reads */
    kt_result_fn rfn;
    void *user;
    kt__launch launch;     /* device variants: fn is kt__launch_fn and user points here */
    size_t cand;
    char *text;            /* the configuration, "NAME=value,..."; NULL for natives */
    kt__cand_result r;
    char *artifact;        /* variants: the artifact file (a runner process loads it from there) */
    bool recalled;         /* measured by an earlier tuning: its time comes from the cache */
    bool held;             /* recalled as a non-finalist of a decision being re-raced: keeps its
                              recorded result and never competes (tune/recall.c) */
    bool env_failed;       /* failed for a reason outside its code (no artifact directory) */
} kt__unit;

/* Entry states. FAILED is final (every candidate failed); ABANDONED means the tuning stopped on
 * an error that is not the candidates' (out of memory, a hook): the next call tunes again. */
enum { KT__TUNING = 0, KT__DONE = 1, KT__FAILED = 2, KT__ABANDONED = 3 };

struct kt_decision {
    /* what a hit reads first: the lookup's fields, the state, the winner */
    uint64_t hash;
    size_t keylen;                   /* words of key: user components, then mask words */
    _Atomic int state;               /* KT__TUNING, KT__DONE, KT__FAILED or KT__ABANDONED */
    kt_native_fn fn;                 /* the winner, copied for the hit path */
    kt_result_fn rfn;
    void *user;
    const kt__unit *hit;             /* &units[winner_unit], set with them */
    int64_t key[KT__KEY_WORDS_MAX];
    const char *where;               /* the call that is tuning it ("kt_op_call", "kt_op_tune"...),
                                        for messages */
    size_t nuser;                    /* user components */
    size_t winner;                   /* its candidate */
    size_t winner_unit;
    kt__unit *units;                 /* set when decided */
    size_t nunits;
    bool validated;
    size_t ref_unit1;                /* 1 + the reference unit of a measured decision (0: none) */
    size_t ref_agree, ref_among;     /* a reference by consensus: of the units run, how many agreed */
    size_t peak_extra;
    kt_decision_source source;
    kt_status fail_status;
    char *fail_msg;
    size_t ncand;
    kt_policy policy;                /* how it was measured */
    double confidence;
    double requested_confidence;     /* what its race asked for; <= 0: nothing (tune/recall.c) */
    bool rerace;                     /* a recorded decision below its requested confidence is being
                                        re-raced: measure its finalists only (tune/recall.c) */
    char *cache_rejected;            /* why the recorded decision for this key was rejected, or NULL */
    char *borrowed_device;           /* KT_SOURCE_NEAREST, ARCH, VENDOR: whose decision it took */
    int64_t borrowed_key[KT__KEY_USER_MAX + KT__KEY_AUTO_MAX]; /* ... and that decision's key components */
    size_t borrowed_len;
    uint64_t total_runs;
    double measure_ns;
    size_t build_threads;            /* the threads that built the tuning's variants (0: none) */
    /* the background builds' spans (tune/builder.c), in seconds from the builder's start: a
     * build the tuning's end left running ends at build_end_s */
    double (*build_spans)[2];
    size_t nbuild_spans;
    double build_end_s;              /* when the builder stopped (0: no background builds) */
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

/* A key deferred by a miss under capture (KT_CAPTURE_MISS_FALLBACK; tune/deferred.c): its key
 * and the call's arguments as kt_op_tune takes them from sizes alone (buffers NULL with their
 * byte sizes, scalars with their values). */
typedef struct kt__deferred {
    int64_t key[KT__KEY_WORDS_MAX];
    size_t keylen;
    kt_arg *args;                  /* op->nargs of them */
} kt__deferred;

struct kt_op {
    /* what a hit reads, together at the start */
    _Atomic int frozen;
    bool has_result;               /* candidates return their output */
    _Atomic(kt__table *) table;
    kt__argdecl *args;
    size_t nargs;
    size_t nkeys;
    size_t nmask_words;            /* set at freeze */
    size_t npredicated;            /* candidates with requirements */
    kt__keycomp keys[KT__KEY_USER_MAX + KT__KEY_AUTO_MAX]; /* declared, then automatic (freeze) */
    kt_context *ctx;
    void *user;                    /* the caller's (kt_op_set_user); never read by kerntune */
    kt_op *next;                   /* context's list */
    char *name;
    kt__cand *cands;
    size_t ncands;
    long default_idx, fallback_idx, forced_idx;  /* -1 when not set */
    size_t device;                 /* index in ctx->devices where variants run */
    kt__module *modules;           /* loaded variant modules (op->lock) */
    size_t nmodules;
    kt_inputs inputs;              /* where tuning runs take inputs from */
    uint64_t seed;
    kt_hook_fn pre_hook, post_hook;
    void *hook_user;
    kt_type result_elem;
    long reference_idx;            /* -1 when not set */
    bool reference_only;           /* the reference validates, never competes */
    kt_reference_fn reference_fn;
    void *reference_user;
    kt_verify_fn verify_fn;        /* kt_op_set_verify_fn: compares outputs instead of kerntune's rules */
    void *verify_user;
    bool validate;
    bool no_rerace;                /* kt_op_set_rerace(op, 0): a recorded decision below confidence is served */
    size_t consensus;              /* kt_op_set_reference_consensus: units that vote (0: off) */
    size_t disagree_min;           /* kt_op_set_disagreement_stop: validations before it may stop (0: off) */
    _Atomic bool stop_asked;       /* kt_op_stop_disagreement: the tuning in progress admits no more */
    bool tol_set;
    double atol, rtol;
    kt__budget budget;             /* 0s: no limit */
    char strategy[16];             /* the search over variant groups (kerntune/search.h); "" is auto */
    char *work_flops, *work_bytes; /* kt_op_set_work: expressions per call, NULL when not declared */
    uint64_t search_seed;
    kt_isolation isolation;        /* where variants run while tuning */
    double timeout_s;              /* one isolated run's limit */
    kt_effort effort;              /* as set on the op */
    kt_effort effective;           /* resolved at freeze */
    pthread_mutex_t lock;          /* guards insertion, the done list, freezing */
    pthread_cond_t cond;           /* signalled when a decision finishes */
    size_t count;                  /* decisions in the table */
    kt_decision **done;            /* finished decisions, in order */
    size_t ndone, done_cap;
    _Atomic uint64_t tune_count;
    _Atomic uint64_t measured_runs;
    char set_hash[33];             /* the candidate set's identity in the cache (set at freeze) */
    kt_capture_miss capture_miss;  /* what a miss under capture does */
    kt__deferred *deferred;        /* keys deferred by misses under capture (op->lock) */
    size_t ndeferred, deferred_cap;
    bool deferred_loaded;          /* the cache's deferred keys were read (op->lock) */
};

/* Checks the op is still being built; reports as `where`. */
kt_status kt__op_building(const kt_op *op, const char *where);

/* Freezes the op on its first call: checks it, resolves effort and forced candidate, assigns
 * mask bits. Idempotent and thread-safe. where: the call that froze it, for messages. */
kt_status kt__op_freeze(kt_op *op, const char *where);


/* ---- key.c --------------------------------------------------------------------------------- */

/* Says which of args does not fit the signature (the cold half of kt__check_args). */
kt_status kt__args_refused(const kt_op *op, const kt_arg *args, size_t nargs, const char *where);

/* Checks nargs, types and buffer sizes against the signature. Inline: it is on the hit path. */
static inline kt_status kt__check_args(const kt_op *op, const kt_arg *args, size_t nargs, const char *where) {
    if (KT__UNLIKELY(nargs != op->nargs || args == NULL)) return kt__args_refused(op, args, nargs, where);
    for (size_t i = 0; i < nargs; i++) {
        const kt__argdecl *d = &op->args[i];
        if (KT__UNLIKELY(args[i].type != d->type || (args[i].bytes & d->size_mask) != 0))
            return kt__args_refused(op, args, nargs, where);
    }
    return KT_OK;
}

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

/* ---- identity.c ---------------------------------------------------------------------------- */

/* Computes op->set_hash (at freeze). */
void kt__op_identity(kt_op *op);

/* Whether the op has a variant group. */
bool kt__op_has_variants(const kt_op *op);

/* The compiler identity of the op's device ("" for an op without variants, or when the
 * backend cannot say). */
void kt__op_compiler(const kt_op *op, char *out, size_t len);

/* The op's device: its backend, backend state, local index and fingerprint (op.c). */
void kt__op_backend(const kt_op *op, const kt_backend **b, void **state, size_t *local, const char **fp);

/* ---- decision.c ------------------------------------------------------------------------------ */

/* Frees a decision's units and results (not the decision). */
void kt__decision_reset(kt_decision *d);

/* The scale of each of the op's key components, 's' (a size) or 'c' (a category), into kinds
 * (op->nkeys letters and a NUL). */
void kt__key_kinds(const kt_op *op, char *kinds);

/* Frees what a unit's launch holds for per-call sizes. */
void kt__launch_free_slots(kt__launch *l);

/* Frees a decision. */
void kt__decision_free(kt_decision *d);

#endif /* KT_OP_H */
