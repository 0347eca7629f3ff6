/*
 * rowsum.c - the row-sum op (see cuda_ops.h): out[r] = the sum of in[r][0..cols), f32, with three
 * implementations of ops/rowsum.cu, each a variant group over a small space, so that kerntune
 * picks the implementation and its parameters per shape bucket:
 *
 *   "block-per-row"  BLOCK threads per row, UNROLL float4 loads in flight per thread; grid = rows.
 *   "persistent"     SMs x BPS blocks of BLOCK threads looping over the rows, TPR threads per row
 *                    (1 to 32, or the whole block); grid = min(SMs x BPS, blocks the rows need).
 *   "split-row"      SPLITS blocks per row, the last of them adding the row's partial sums;
 *                    grid = (rows, SPLITS); for rows <= SPLIT_MAX_ROWS (a requirement), which
 *                    its module's workspace holds.
 *
 * The key is (rows, cols), each rounded up to a power of two. rows reaches only the grid, never
 * a define or a constraint, so a decision serves its whole bucket (each call computes its grid)
 * and no exact component is added to the key.
 *
 * Tuning runs on generated inputs (KT_INPUTS_GENERATED): the timing of a sum does not depend on
 * the values summed, the caller's data are never read or written until the winner's launch, and
 * a key can be tuned from sizes alone. Every unit is validated against a sum computed on the host.
 */
#include "cuda_ops.h"
#include "cudalib.h"

#include <kerntune/device.h>
#include <kerntune/inputs.h>
#include <kerntune/validation.h>
#include <kerntune/variants.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The split-row kernel's workspace (a module's __device__ arrays, ops/rowsum.cu) holds
 * SPLIT_MAX_ROWS x SPLIT_MAX_SPLITS partial sums (1 MiB) and SPLIT_MAX_ROWS counters. Larger
 * row counts never need it: their rows alone give a block-per-row grid that fills the GPU. */
enum { SPLIT_MAX_ROWS = 4096, SPLIT_MAX_SPLITS = 64, MAX_PARAMS = 4, MAX_VALUES = 8 };

/* rows above this do not fit a grid's x dimension (block-per-row and split-row launch one block
 * per row there); the persistent kernel would manage, but one limit for every candidate keeps
 * the key's validity mask simple. */
#define MAX_ROWS ((int64_t)0x7fffffff)

typedef struct param {
    const char *name;
    int64_t values[MAX_VALUES];
    size_t n;
} param;

/* One implementation: a variant group of ops/rowsum.cu. */
typedef struct group {
    const char *name;        /* the candidate */
    const char *kernel;      /* its kernel in ops/rowsum.cu */
    const char *select;      /* the define that compiles that kernel (and only it) */
    param params[MAX_PARAMS];
    size_t nparams;
    const char *constraint;  /* over parameters only (an argument in one would be keyed exactly) */
    const char *grid[3];     /* in blocks, over rows, SMS and parameters */
    bool split;              /* the split-row kernel: its workspace limits rows */
} group;

static const group groups[] = {
    {"block-per-row",
     "rowsum_block_per_row",
     "-DROWSUM_BLOCK_PER_ROW",
     {{"BLOCK", {64, 128, 256, 512, 1024}, 5}, {"UNROLL", {1, 4}, 2}},
     2,
     NULL,
     {"rows", NULL, NULL},
     false},
    /* 256 threads, 4 or 8 blocks per SM (1024 or 2048 threads). UNROLL is float4s in flight per
     * lane for a warp or a block per row, rows in flight per thread for a thread per row (rows
     * of 1 or 2 elements); rows of 2 to 16 lanes are short, so their lanes read a float4 or two. */
    {"persistent",
     "rowsum_persistent",
     "-DROWSUM_PERSISTENT",
     {{"BLOCK", {256}, 1}, {"BPS", {4, 8}, 2}, {"TPR", {1, 2, 4, 8, 16, 32, 256}, 7}, {"UNROLL", {1, 4}, 2}},
     4,
     "(TPR <= 32 or TPR == BLOCK) and (UNROLL == 1 or TPR == 1 or TPR >= 32)",
     {"min(SMS * BPS, (rows + BLOCK // TPR - 1) // (BLOCK // TPR))", NULL, NULL},
     false},
    {"split-row",
     "rowsum_split_row",
     "-DROWSUM_SPLIT_ROW",
     {{"BLOCK", {256, 1024}, 2}, {"SPLITS", {4, 16, 64}, 3}, {"UNROLL", {1, 4}, 2}},
     3,
     NULL,
     {"rows", "SPLITS", NULL},
     true},
};
enum { NGROUPS = sizeof groups / sizeof groups[0] };

struct ktops_rowsum {
    kt_context *ctx;
    size_t device;
    kt_op *op;
};

/* ---- requirements, generated inputs, the reference ------------------------------------------ */

static const int64_t rows_any = MAX_ROWS, rows_split = SPLIT_MAX_ROWS;

/* The arguments every kernel can run on: rows from 1 to *user, cols >= 1, buffers holding
 * rows x cols and rows floats, pointers on multiples of 4 bytes (each lane finds the row's
 * 16-byte boundary itself). ktops_rowsum_run checks the same with messages; this keeps a direct
 * kt_op_call from launching a kernel out of bounds. */
static int accepts(const kt_arg *a, size_t n, void *user) {
    if (n != KTOPS_ROWSUM_NARGS) return 0;
    const int64_t rows = a[KTOPS_ROWSUM_ROWS].i, cols = a[KTOPS_ROWSUM_COLS].i;
    if (rows < 1 || cols < 1 || rows > *(const int64_t *)user) return 0;
    if ((uint64_t)cols > SIZE_MAX / sizeof(float) / (uint64_t)rows) return 0;
    const size_t count = (size_t)rows * (size_t)cols;
    return a[KTOPS_ROWSUM_IN].bytes / sizeof(float) >= count && a[KTOPS_ROWSUM_OUT].bytes / sizeof(float) >= (size_t)rows &&
           (uintptr_t)a[KTOPS_ROWSUM_IN].ptr % sizeof(float) == 0 && (uintptr_t)a[KTOPS_ROWSUM_OUT].ptr % sizeof(float) == 0;
}

/* The generated input: multiples of 1/4 from -4 to 4. Every partial sum a kernel forms is then a
 * multiple of 1/4, and f32 holds such a number exactly up to 2^22: a sum of n of them stays below
 * that bound for n up to 2^20 whatever the values, and for longer rows by dozens of standard
 * deviations of these random sums (about 2.4 sqrt(n): 78,000 at n = 2^30). So every order of
 * summation gives the same bits, and validation can ask for them exactly. */
static int generate_in(void *ptr, size_t bytes, kt_type elem, const kt_arg *args, size_t nargs, void *user) {
    (void)elem, (void)args, (void)nargs, (void)user;
    float *v = ptr;
    const size_t n = bytes / sizeof(float);
    uint64_t state = 0x726f7773756dull; /* "rowsum" */
    for (size_t i = 0; i < n; i += 8) {
        uint64_t z = (state += 0x9e3779b97f4a7c15ull); /* splitmix64: eight values per draw */
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        for (size_t k = 0; k < 8 && i + k < n; k++, z >>= 8) v[i + k] = (float)((int)((z & 0xff) % 33) - 16) * 0.25f;
    }
    return 0;
}

/* The reference every unit is validated against: the rows summed on the host, in double (exact
 * for the generated values, then rounded once, exactly too). Reads the input back from the
 * device: rows x cols floats of host memory for the length of the call. */
static int host_reference(const kt_arg *a, size_t n, void *user, kt_result *result) {
    (void)n, (void)result;
    const ktops_rowsum *r = user;
    const size_t rows = (size_t)a[KTOPS_ROWSUM_ROWS].i, cols = (size_t)a[KTOPS_ROWSUM_COLS].i;
    float *in = malloc(rows * cols * sizeof *in), *out = malloc(rows * sizeof *out);
    int rc = in == NULL || out == NULL;
    if (rc == 0) rc = kt_device_read(r->ctx, r->device, in, a[KTOPS_ROWSUM_IN].ptr, rows * cols * sizeof *in) != KT_OK;
    for (size_t i = 0; rc == 0 && i < rows; i++) {
        double s = 0;
        for (size_t c = 0; c < cols; c++) s += in[i * cols + c];
        out[i] = (float)s;
    }
    if (rc == 0) rc = kt_device_write(r->ctx, r->device, a[KTOPS_ROWSUM_OUT].ptr, out, rows * sizeof *out) != KT_OK;
    free(in);
    free(out);
    return rc;
}

/* ---- spaces ------------------------------------------------------------------------------------ */

/* Reads configuration text ("BLOCK=256,UNROLL=4", as kt_decision_unit_config writes it) into
 * one value per parameter of g, each among the parameter's values. */
static kt_status parse_config(const group *g, const char *config, int64_t *pinned) {
    bool seen[MAX_PARAMS] = {false};
    const char *p = config;
    while (*p) {
        const char *end = strchr(p, ','), *eq = strchr(p, '=');
        if (end == NULL) end = p + strlen(p);
        if (eq == NULL || eq > end)
            return ktops__fail(KT_ERR_INVALID_ARGUMENT, "ktops_rowsum_create: config '%s': expected NAME=VALUE at '%.*s'",
                               config, (int)(end - p), p);
        size_t k = 0;
        while (k < g->nparams && (strlen(g->params[k].name) != (size_t)(eq - p) || strncmp(g->params[k].name, p, eq - p) != 0)) k++;
        if (k == g->nparams)
            return ktops__fail(KT_ERR_INVALID_ARGUMENT, "ktops_rowsum_create: config '%s': %s has no parameter '%.*s'", config,
                               g->name, (int)(eq - p), p);
        if (seen[k])
            return ktops__fail(KT_ERR_INVALID_ARGUMENT, "ktops_rowsum_create: config '%s': %s is given twice", config,
                               g->params[k].name);
        char *stop = NULL;
        errno = 0;
        long long v = strtoll(eq + 1, &stop, 10);
        bool known = false;
        for (size_t i = 0; i < g->params[k].n; i++) known = known || g->params[k].values[i] == v;
        if (stop != end || stop == eq + 1 || errno != 0 || !known) {
            char list[128] = "";
            for (size_t i = 0, len = 0; i < g->params[k].n && len < sizeof list; i++)
                len += (size_t)snprintf(list + len, sizeof list - len, "%s%lld", i ? ", " : "", (long long)g->params[k].values[i]);
            return ktops__fail(KT_ERR_INVALID_ARGUMENT, "ktops_rowsum_create: config '%s': %s's %s must be one of %s, not '%.*s'",
                               config, g->name, g->params[k].name, list, (int)(end - eq - 1), eq + 1);
        }
        pinned[k] = v;
        seen[k] = true;
        p = *end ? end + 1 : end;
    }
    for (size_t k = 0; k < g->nparams; k++)
        if (!seen[k])
            return ktops__fail(KT_ERR_INVALID_ARGUMENT, "ktops_rowsum_create: config '%s' gives no value of %s", config,
                               g->params[k].name);
    return KT_OK;
}

/* Builds g's space: its parameters (each pinned to one value when pinned is not NULL), the
 * inputs rows (the op's argument) and SMS (bound to sms), its constraint and geometry. */
static kt_status build_space(const group *g, const int64_t *pinned, int sms, kt_space **out) {
    kt_space *sp = NULL;
    kt_status st = kt_space_create(&sp);
    for (size_t k = 0; st == KT_OK && k < g->nparams; k++)
        st = kt_space_add_param_ints(sp, g->params[k].name, pinned ? &pinned[k] : g->params[k].values, pinned ? 1 : g->params[k].n);
    if (st == KT_OK) st = kt_space_add_input(sp, "rows");
    if (st == KT_OK) st = kt_space_add_input(sp, "SMS");
    if (st == KT_OK) st = kt_space_bind_int(sp, "SMS", sms);
    if (st == KT_OK && g->constraint) st = kt_space_add_constraint(sp, g->constraint);
    const char *block[3] = {"BLOCK", NULL, NULL};
    if (st == KT_OK) st = kt_space_set_geometry(sp, KT_GEOMETRY_GRID, g->grid, block, NULL);
    if (st != KT_OK) {
        kt_space_destroy(sp);
        return ktops__fail(st, "ktops_rowsum_create: the space of %s: %s", g->name, kt_last_error());
    }
    *out = sp;
    return KT_OK;
}

/* Adds group g as a candidate of r's op: its whole space, or the one configuration config. */
static kt_status add_group(ktops_rowsum *r, const group *g, const char *config, int sms) {
    int64_t pinned[MAX_PARAMS];
    kt_status st = config ? parse_config(g, config, pinned) : KT_OK;
    if (st == KT_OK && config) { /* the configuration must meet the constraint: a space of it alone is not empty */
        kt_space *check = NULL;
        size_t count = 0;
        if ((st = build_space(g, pinned, sms, &check)) != KT_OK) return st;
        st = kt_space_bind_int(check, "rows", 1);
        if (st == KT_OK) st = kt_space_enumerate(check, &count);
        kt_space_destroy(check);
        if (st != KT_OK) return ktops__fail(st, "ktops_rowsum_create: config '%s': %s", config, kt_last_error());
        if (count == 0)
            return ktops__fail(KT_ERR_INVALID_ARGUMENT, "ktops_rowsum_create: config '%s' breaks %s's constraint %s", config,
                               g->name, g->constraint ? g->constraint : "(none)");
    }
    kt_space *sp = NULL;
    if (st == KT_OK) st = build_space(g, config ? pinned : NULL, sms, &sp);
    if (st != KT_OK) return st;
    char limits[2][64];
    snprintf(limits[0], sizeof limits[0], "-DSPLIT_MAX_ROWS=%d", SPLIT_MAX_ROWS);
    snprintf(limits[1], sizeof limits[1], "-DSPLIT_MAX_SPLITS=%d", SPLIT_MAX_SPLITS);
    const char *options[3] = {g->select, limits[0], limits[1]};
    st = kt_op_add_variants(r->op, g->name, sp, ktops_rowsum_cu, g->kernel, options, g->split ? 3 : 1);
    kt_space_destroy(sp);
    if (st == KT_OK) st = kt_op_require_fn(r->op, g->name, accepts, (void *)(g->split ? &rows_split : &rows_any));
    return st == KT_OK ? KT_OK : ktops__fail(st, "ktops_rowsum_create: adding %s: %s", g->name, kt_last_error());
}

/* ---- the op ------------------------------------------------------------------------------------ */

kt_status ktops_rowsum_create_with(ktops_cuda *cu, kt_context *ctx, size_t device, const char *name,
                                   const ktops_rowsum_options *options, ktops_rowsum **out) {
    if (cu == NULL || ctx == NULL || name == NULL || out == NULL)
        return ktops__fail(KT_ERR_NULL, "ktops_rowsum_create: cu, ctx, name and out must not be NULL");
    *out = NULL;
    const ktops_rowsum_options opt = options ? *options : (ktops_rowsum_options){0};
    const group *only = NULL;
    for (size_t i = 0; opt.group && i < NGROUPS; i++)
        if (strcmp(opt.group, groups[i].name) == 0) only = &groups[i];
    if (opt.group && only == NULL)
        return ktops__fail(KT_ERR_INVALID_ARGUMENT,
                           "ktops_rowsum_create: no implementation '%s' (block-per-row, persistent or split-row)", opt.group);
    if (opt.config && only == NULL)
        return ktops__fail(KT_ERR_INVALID_ARGUMENT, "ktops_rowsum_create: config '%s' needs the group it belongs to", opt.config);
    const int sms = ktops_cuda_sm_count(cu);
    if (sms < 1) return ktops__fail(KT_ERR_BACKEND, "ktops_rowsum_create: the device reports %d multiprocessors", sms);
    ktops_rowsum *r = calloc(1, sizeof *r);
    if (r == NULL) return ktops__fail(KT_ERR_NO_MEMORY, "ktops_rowsum_create: out of memory");
    r->ctx = ctx, r->device = device;
    kt_status st = kt_op_create(ctx, name, &r->op);
    if (st != KT_OK) {
        free(r);
        return ktops__fail(st, "ktops_rowsum_create: %s", kt_last_error());
    }
    kt_op *op = r->op;
    if ((st = kt_op_set_device(op, device)) == KT_OK && (st = kt_op_add_buffer(op, "in", KT_TYPE_F32, KT_READ_ONLY)) == KT_OK &&
        (st = kt_op_add_buffer(op, "out", KT_TYPE_F32, KT_WRITE_ONLY)) == KT_OK &&
        (st = kt_op_add_scalar(op, "rows", KT_TYPE_I64)) == KT_OK && (st = kt_op_add_scalar(op, "cols", KT_TYPE_I64)) == KT_OK &&
        (st = kt_op_key_arg(op, KTOPS_ROWSUM_ROWS, KT_BUCKET_POW2)) == KT_OK)
        st = kt_op_key_arg(op, KTOPS_ROWSUM_COLS, KT_BUCKET_POW2);
    /* tuning's inputs and their check: see generate_in and host_reference. The outputs must
     * equal the host's sums exactly (tolerance 0): on these inputs every order of summation
     * gives the same bits, so any difference is a wrong, missed or doubled element. A caller
     * who switches the op to its own inputs (kt_op_set_inputs) must set a tolerance for them:
     * on general data, sums in different orders differ in their last bits. */
    if (st == KT_OK && (st = kt_op_set_inputs(op, KT_INPUTS_GENERATED)) == KT_OK &&
        (st = kt_op_set_generator_fn(op, KTOPS_ROWSUM_IN, generate_in, NULL)) == KT_OK &&
        (st = kt_op_set_reference_fn(op, host_reference, r)) == KT_OK)
        st = kt_op_set_tolerance(op, 0.0, 0.0);
    if (st != KT_OK) st = ktops__fail(st, "ktops_rowsum_create: building op %s: %s", name, kt_last_error());
    for (size_t i = 0; st == KT_OK && i < NGROUPS; i++)
        if (only == NULL || only == &groups[i]) st = add_group(r, &groups[i], opt.config, sms);
    if (st != KT_OK) {
        ktops_rowsum_destroy(r);
        return st;
    }
    *out = r;
    return KT_OK;
}

kt_status ktops_rowsum_create(ktops_cuda *cu, kt_context *ctx, size_t device, const char *name, ktops_rowsum **out) {
    return ktops_rowsum_create_with(cu, ctx, device, name, NULL, out);
}

void ktops_rowsum_destroy(ktops_rowsum *r) {
    if (r == NULL) return;
    kt_op_destroy(r->op);
    free(r);
}

kt_op *ktops_rowsum_op(ktops_rowsum *r) { return r ? r->op : NULL; }

/* The op's arguments for a call (checked by the caller). */
static void call_args(kt_arg args[KTOPS_ROWSUM_NARGS], const float *in, float *out, int64_t rows, int64_t cols) {
    args[KTOPS_ROWSUM_IN] = kt_arg_buf((void *)in, (size_t)rows * (size_t)cols * sizeof(float));
    args[KTOPS_ROWSUM_OUT] = kt_arg_buf(out, (size_t)rows * sizeof(float));
    args[KTOPS_ROWSUM_ROWS] = kt_arg_i64(rows);
    args[KTOPS_ROWSUM_COLS] = kt_arg_i64(cols);
}

/* Checks a call's shape, naming what is wrong. */
static kt_status check_shape(const char *where, const float *in, const float *out, int64_t rows, int64_t cols) {
    if (rows < 1 || cols < 1)
        return ktops__fail(KT_ERR_INVALID_ARGUMENT, "%s: rows %lld and cols %lld must both be at least 1", where,
                           (long long)rows, (long long)cols);
    if (rows > MAX_ROWS)
        return ktops__fail(KT_ERR_INVALID_ARGUMENT, "%s: rows %lld is above %lld (a grid's x dimension)", where, (long long)rows,
                           (long long)MAX_ROWS);
    if ((uint64_t)cols > SIZE_MAX / sizeof(float) / (uint64_t)rows)
        return ktops__fail(KT_ERR_INVALID_ARGUMENT, "%s: rows %lld x cols %lld floats overflow a size", where, (long long)rows,
                           (long long)cols);
    if ((uintptr_t)in % sizeof(float) != 0 || (uintptr_t)out % sizeof(float) != 0)
        return ktops__fail(KT_ERR_INVALID_ARGUMENT, "%s: in (%p) and out (%p) must be aligned to 4 bytes", where,
                           (const void *)in, (const void *)out);
    return KT_OK;
}

kt_status ktops_rowsum_run(ktops_rowsum *r, kt_queue stream, const float *in, float *out, int64_t rows, int64_t cols) {
    if (r == NULL) return ktops__fail(KT_ERR_NULL, "ktops_rowsum_run: r is NULL");
    kt_status st = check_shape("ktops_rowsum_run", in, out, rows, cols);
    if (st != KT_OK) return st;
    kt_arg args[KTOPS_ROWSUM_NARGS];
    call_args(args, in, out, rows, cols);
    st = kt_op_call_async(r->op, stream, args, KTOPS_ROWSUM_NARGS);
    if (st != KT_OK)
        return ktops__fail(st, "ktops_rowsum_run(op %s, rows %lld, cols %lld): %s", kt_op_name(r->op), (long long)rows,
                           (long long)cols, kt_last_error());
    return KT_OK;
}

kt_status ktops_rowsum_decision(ktops_rowsum *r, const float *in, float *out, int64_t rows, int64_t cols,
                                const kt_decision **d) {
    if (r == NULL || d == NULL) return ktops__fail(KT_ERR_NULL, "ktops_rowsum_decision: r and d must not be NULL");
    kt_status st = check_shape("ktops_rowsum_decision", in, out, rows, cols);
    if (st != KT_OK) return st;
    kt_arg args[KTOPS_ROWSUM_NARGS];
    call_args(args, in, out, rows, cols);
    st = kt_op_decision(r->op, args, KTOPS_ROWSUM_NARGS, d);
    return st == KT_OK ? KT_OK
                       : ktops__fail(st, "ktops_rowsum_decision(op %s, rows %lld, cols %lld): %s", kt_op_name(r->op),
                                     (long long)rows, (long long)cols, kt_last_error());
}
