/*
 * validate.c - checking candidates' answers against a reference.
 *
 * The reference (a user function, a named candidate, or the op's default candidate) runs once
 * per tuning on poisoned outputs, and its WriteOnly and ReadWrite buffers and returned output
 * are kept. Every other candidate's first run is a validation run on the same inputs whose
 * outputs are compared with those: integers bit for bit, floats within tolerances, NaN only
 * with NaN, and an element still holding the poison pattern as unwritten. Elements that the
 * reference itself left unwritten are not checked. On a backend that checks on the device (ABI
 * 9) the reference's outputs are kept there too, and an output the device says matches is not
 * read back; one it does not vouch for is read back and compared here, which names the element.
 */
#include "tune/stages.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool is_float(kt_type t) {
    return t == KT_TYPE_F32 || t == KT_TYPE_F64 || t == KT_TYPE_F16 || t == KT_TYPE_BF16;
}

void kt__tolerances(const kt_op *op, kt_type t, double *atol, double *rtol) {
    if (!is_float(t)) {
        *atol = *rtol = 0;
    } else if (op->tol_set) {
        *atol = op->atol;
        *rtol = op->rtol;
    } else if (t == KT_TYPE_F64) {
        *atol = 1e-12, *rtol = 1e-9;
    } else if (t == KT_TYPE_F32) {
        *atol = 1e-6, *rtol = 1e-4;
    } else {
        *atol = 1e-3, *rtol = 1e-2;
    }
}

/* Formats element i of a buffer of type t for a diagnostic. */
static void show(kt_type t, const void *base, size_t i, char *out, size_t len) {
    const unsigned char *p = (const unsigned char *)base + i * kt_type_size(t);
    if (memcmp(p, kt__poison(t), kt_type_size(t)) == 0) {
        snprintf(out, len, "poison (left unwritten)");
    } else if (t == KT_TYPE_I64) {
        int64_t v;
        memcpy(&v, p, 8);
        snprintf(out, len, "%" PRId64, v);
    } else if (t == KT_TYPE_U64) {
        uint64_t v;
        memcpy(&v, p, 8);
        snprintf(out, len, "%" PRIu64, v);
    } else {
        snprintf(out, len, "%.9g", kt__decode(t, base, i));
    }
}

/* Whether every element of a float output is a finite value within tolerance of the
 * reference's: one branch-free pass (outputs of a GEMM hold tens of millions of elements). NaN,
 * infinities and the poison all fail it, and compare() then looks at each element. */
static bool all_close(kt_type t, const void *actual, const void *expected, size_t count, double atol, double rtol) {
    int bad = 0;
    if (t == KT_TYPE_BF16) {
        const uint16_t *a = actual, *e = expected;
        for (size_t i = 0; i < count; i++) {
            uint32_t ua = (uint32_t)a[i] << 16, ue = (uint32_t)e[i] << 16;
            float x, y;
            memcpy(&x, &ua, 4), memcpy(&y, &ue, 4);
            bad |= !(fabs((double)x - (double)y) <= atol + rtol * fabs((double)y));
        }
    } else if (t == KT_TYPE_F32) {
        const float *a = actual, *e = expected;
        for (size_t i = 0; i < count; i++) bad |= !(fabs((double)a[i] - (double)e[i]) <= atol + rtol * fabs((double)e[i]));
    } else if (t == KT_TYPE_F64) {
        const double *a = actual, *e = expected;
        for (size_t i = 0; i < count; i++) bad |= !(fabs(a[i] - e[i]) <= atol + rtol * fabs(e[i]));
    } else {
        return false;
    }
    return !bad;
}

/* Compares count elements of type t; on the first mismatch writes "<what> element i: expected
 * E, got A" into msg and returns false. */
static bool compare(const kt_op *op, kt_type t, const void *actual, const void *expected, size_t count,
                    const char *what, char *msg, size_t len) {
    size_t es = kt_type_size(t);
    const void *poison = kt__poison(t);
    double atol = 0, rtol = 0;
    if (is_float(t)) kt__tolerances(op, t, &atol, &rtol);
    if (is_float(t) && all_close(t, actual, expected, count, atol, rtol)) return true;
    for (size_t i = 0; i < count; i++) {
        const unsigned char *a = (const unsigned char *)actual + i * es, *e = (const unsigned char *)expected + i * es;
        if (memcmp(e, poison, es) == 0) continue; /* the reference left it unwritten */
        bool ok, unwritten = memcmp(a, poison, es) == 0;
        if (unwritten) {
            ok = false;
        } else if (!is_float(t)) {
            ok = memcmp(a, e, es) == 0;
        } else {
            double x = kt__decode(t, actual, i), y = kt__decode(t, expected, i);
            if (isnan(y) || isnan(x)) ok = isnan(x) && isnan(y);
            else if (isinf(y)) ok = x == y;
            else ok = fabs(x - y) <= atol + rtol * fabs(y);
        }
        if (!ok) {
            char want[64], got[64];
            show(t, expected, i, want, sizeof want);
            show(t, actual, i, got, sizeof got);
            if (is_float(t) && !unwritten)
                snprintf(msg, len, "%s element %zu: expected %s, got %s (atol %g, rtol %g)", what, i, want, got, atol, rtol);
            else
                snprintf(msg, len, "%s element %zu: expected %s, got %s", what, i, want, got);
            return false;
        }
    }
    return true;
}

/* KT_COMPARE_SUM: the sums of the elements that the reference wrote (poison in expected is left
 * out of both), floats within atol + rtol * the sum of the reference's magnitudes, integers
 * exactly (64-bit wrapping sums); writes "<what>: sum S, expected E" on a mismatch. */
static bool compare_sum(const kt_op *op, kt_type t, const void *actual, const void *expected, size_t count, const char *what,
                        char *msg, size_t len) {
    size_t es = kt_type_size(t);
    const void *poison = kt__poison(t);
    if (!is_float(t)) {
        uint64_t a = 0, e = 0;
        for (size_t i = 0; i < count; i++) {
            const unsigned char *pe = (const unsigned char *)expected + i * es, *pa = (const unsigned char *)actual + i * es;
            if (memcmp(pe, poison, es) == 0) continue;
            uint64_t x = 0, y = 0;
            bool sign = t == KT_TYPE_I8 || t == KT_TYPE_I16 || t == KT_TYPE_I32 || t == KT_TYPE_I64;
            memcpy(&x, pa, es), memcpy(&y, pe, es);
            if (sign && es < 8 && (x >> (8 * es - 1)) & 1) x |= ~(uint64_t)0 << (8 * es); /* little-endian, sign-extended */
            if (sign && es < 8 && (y >> (8 * es - 1)) & 1) y |= ~(uint64_t)0 << (8 * es);
            a += x, e += y;
        }
        if (a == e) return true;
        snprintf(msg, len, "%s: sum %" PRId64 ", expected %" PRId64 " (compared as a sum)", what, (int64_t)a, (int64_t)e);
        return false;
    }
    double atol, rtol, a = 0, e = 0, mag = 0;
    kt__tolerances(op, t, &atol, &rtol);
    for (size_t i = 0; i < count; i++) {
        if (memcmp((const unsigned char *)expected + i * es, poison, es) == 0) continue;
        double x = kt__decode(t, actual, i), y = kt__decode(t, expected, i);
        a += x, e += y, mag += fabs(y);
    }
    if (isfinite(a) && isfinite(e) && fabs(a - e) <= atol + rtol * mag) return true;
    snprintf(msg, len, "%s: sum %.9g, expected %.9g (compared as a sum; atol %g, rtol %g of %.9g)", what, a, e, atol, rtol, mag);
    return false;
}

/* Output d of count elements compared with the reference's, by its rule (kt_op_set_compare). */
static bool compare_output(const kt_op *op, const kt__argdecl *d, const void *actual, const void *expected, size_t count,
                           const char *what, char *msg, size_t len) {
    return d->compare == KT_COMPARE_SUM ? compare_sum(op, d->elem, actual, expected, count, what, msg, len)
                                        : compare(op, d->elem, actual, expected, count, what, msg, len);
}

static bool is_output(const kt__argdecl *d) {
    return d->type == KT_TYPE_BUFFER && d->access != KT_READ_ONLY;
}

long kt__reference_candidate(const kt_op *op) {
    if (op->reference_idx >= 0) return op->reference_idx;
    return op->default_idx >= 0 ? op->default_idx : 0;
}

/* The verify function's verdict (kt_op_set_verify_fn) on outputs actual against expected (per
 * argument, host copies; NULL for arguments that are not outputs): the call's args give the
 * other arguments. */
static bool verified(const kt_op *op, const kt_arg *args, void *const *expected, void *const *actual, const size_t *bytes, char *msg,
                     size_t len) {
    kt_arg ex[64], ac[64];
    kt_arg *e = op->nargs <= 64 ? ex : calloc(op->nargs, sizeof *e), *a = op->nargs <= 64 ? ac : calloc(op->nargs, sizeof *a);
    bool ok = false;
    if (e == NULL || a == NULL) {
        snprintf(msg, len, "out of memory for the verify function's arguments");
    } else {
        for (size_t i = 0; i < op->nargs; i++) {
            e[i] = a[i] = args[i];
            if (op->args[i].type != KT_TYPE_BUFFER) continue;
            bool out = is_output(&op->args[i]);
            e[i].ptr = out ? expected[i] : NULL;
            a[i].ptr = out ? actual[i] : NULL;
            if (out) e[i].bytes = a[i].bytes = bytes[i];
        }
        if (len) msg[0] = '\0';
        ok = op->verify_fn(e, a, op->nargs, op->verify_user, msg, len) != 0;
        if (!ok && len && msg[0] == '\0') snprintf(msg, len, "the verify function refused its outputs");
    }
    if (e != ex) free(e);
    if (a != ac) free(a);
    return ok;
}

/* Whether two runs' outputs (per argument, host copies) agree by the rules of validation. */
static bool outputs_agree(const kt_op *op, const kt_arg *args, void *const *a, void *const *b, const size_t *bytes) {
    char msg[8];
    if (op->verify_fn) return verified(op, args, b, a, bytes, msg, sizeof msg);
    for (size_t i = 0; i < op->nargs; i++) {
        const kt__argdecl *d = &op->args[i];
        if (!is_output(d) || bytes[i] == 0) continue;
        if (!compare_output(op, d, a[i], b[i], bytes[i] / d->esize, "", msg, sizeof msg)) return false;
    }
    return true;
}

/* The reference by consensus (kt_op_set_reference_consensus): the first op->consensus accepting
 * units of candidate cand run once each on poisoned outputs, kept on the host, and the one whose
 * outputs agree with the most others is *pick (on a tie, the earlier; the first when none ran).
 * ref->agree and ref->among say how it went. */
static kt_status consensus(kt__reference *ref, kt__workset *ws, const kt__unit *units, size_t nunits, const bool *accepts,
                           size_t cand, kt__unit_runner run, void *run_user, const kt__unit **pick) {
    const kt_op *op = ws->op;
    size_t idx[KT_REFERENCE_CONSENSUS_MAX], n = 0;
    for (size_t i = 0; i < nunits && n < op->consensus; i++)
        if (units[i].cand == cand && accepts[i]) idx[n++] = i;
    *pick = n ? &units[idx[0]] : NULL;
    if (n < 2) return KT_OK;
    void **outs = calloc(n * op->nargs + 1, sizeof *outs);
    size_t *bytes = calloc(op->nargs + 1, sizeof *bytes);
    bool ok[KT_REFERENCE_CONSENSUS_MAX] = {false};
    kt_status st = outs && bytes ? KT_OK : kt__err(KT_ERR_NO_MEMORY, "%s(op '%s'): out of memory", ws->where, op->name);
    for (size_t j = 0; st == KT_OK && j < n; j++) {
        const kt__unit *u = &units[idx[j]];
        const kt_arg *args = NULL;
        if ((st = kt__workset_before(ws, true, &args)) != KT_OK) break;
        int rc = run ? run(run_user, idx[j], args, NULL) : u->fn(args, op->nargs, u->user);
        ok[j] = rc == 0;
        for (size_t i = 0; ok[j] && st == KT_OK && i < op->nargs; i++) {
            if (!is_output(&op->args[i])) continue;
            bytes[i] = args[i].bytes;
            if ((outs[j * op->nargs + i] = malloc(args[i].bytes ? args[i].bytes : 1)) == NULL)
                st = kt__err(KT_ERR_NO_MEMORY, "%s(op '%s'): out of memory for the consensus's outputs", ws->where, op->name);
            else st = kt__to_host(ws, outs[j * op->nargs + i], args[i].ptr, args[i].bytes);
        }
        char why[8];
        if (ok[j] && st == KT_OK && kt__workset_ro_changed(ws, why, sizeof why)) ok[j] = false;
        kt_status after = kt__workset_after(ws);
        if (st == KT_OK) st = after;
    }
    size_t best = n, best_votes = 0, ran = 0;
    for (size_t j = 0; st == KT_OK && j < n; j++) {
        if (!ok[j]) continue;
        ran++;
        size_t votes = 1;
        for (size_t k = 0; k < n; k++)
            if (k != j && ok[k] && outputs_agree(op, ws->caller, &outs[k * op->nargs], &outs[j * op->nargs], bytes)) votes++;
        if (best == n || votes > best_votes) best = j, best_votes = votes;
    }
    if (st == KT_OK && best < n) {
        *pick = &units[idx[best]];
        ref->agree = best_votes;
        ref->among = n;
        kt__log(op->ctx, KT_LOG_INFO, "op '%s': the reference is '%s' %s: its outputs agree with %zu of the %zu units that voted (%zu ran)",
                op->name, op->cands[cand].name, (*pick)->text ? (*pick)->text : "", best_votes, n, ran);
    }
    for (size_t k = 0; outs && k < n * op->nargs; k++) free(outs[k]);
    free(outs);
    free(bytes);
    return st;
}

kt_status kt__reference_capture(kt__reference *ref, kt__workset *ws, const kt__unit *units, size_t nunits,
                                const bool *accepts, kt__unit_runner run, void *run_user) {
    const kt_op *op = ws->op;
    memset(ref, 0, sizeof *ref);
    ref->unit = -1;
    if (!op->validate) return KT_OK;
    const kt__unit *u = NULL;
    if (op->reference_fn == NULL) {
        long cand = kt__reference_candidate(op);
        if (op->consensus > 1 && !op->has_result) {
            kt_status st = consensus(ref, ws, units, nunits, accepts, (size_t)cand, run, run_user, &u);
            if (st != KT_OK) return st;
        }
        for (size_t i = 0; i < nunits && u == NULL; i++)
            if (units[i].cand == (size_t)cand && accepts[i]) u = &units[i];
        if (u == NULL) {
            kt__log(op->ctx, KT_LOG_INFO, "op '%s': reference candidate '%s' cannot run on these arguments; tuning this key without validation",
                    op->name, op->cands[cand].name);
            return KT_OK;
        }
        ref->unit = u - units;
    }
    ref->outputs = calloc(op->nargs ? op->nargs : 1, sizeof *ref->outputs);
    ref->out_bytes = calloc(op->nargs ? op->nargs : 1, sizeof *ref->out_bytes);
    ref->dev_outputs = calloc(op->nargs ? op->nargs : 1, sizeof *ref->dev_outputs);
    if (ref->outputs == NULL || ref->out_bytes == NULL || ref->dev_outputs == NULL) return kt__err(KT_ERR_NO_MEMORY, "%s(op '%s'): out of memory", ws->where, op->name);

    const kt_arg *args = NULL;
    kt_status st = kt__workset_before(ws, true, &args);
    if (st != KT_OK) return st;
    kt_result *res = op->has_result ? &ref->result : NULL;
    int rc;
    if (u == NULL) rc = op->reference_fn(args, op->nargs, op->reference_user, res);
    else if (run) rc = run(run_user, (size_t)(u - units), args, res);
    else rc = res ? u->rfn(args, op->nargs, u->user, res) : u->fn(args, op->nargs, u->user);
    if (rc != 0 && u != NULL) { /* the unit's failure, for its outcome (the tuner records it) */
        ref->failed_rc = rc;
        if (kt__rc_reported(u->fn, rc)) ref->failed_msg = kt__error_save();
    }
    /* Keep the outputs before the post-hook runs: it may release substituted buffers. */
    for (size_t i = 0; rc == 0 && st == KT_OK && i < op->nargs; i++) {
        if (!is_output(&op->args[i])) continue;
        st = kt__extra_alloc(ws, args[i].bytes, &ref->outputs[i]);
        if (st != KT_OK) break;
        ref->out_bytes[i] = args[i].bytes;
        st = kt__to_host(ws, ref->outputs[i], args[i].ptr, args[i].bytes);
        if (st == KT_OK) st = kt__workset_keep(ws, args[i].ptr, args[i].bytes, &ref->dev_outputs[i]);
    }
    /* A reference that wrote into its inputs cannot be trusted as a reference. */
    if (rc == 0 && st == KT_OK && kt__workset_ro_changed(ws, ref->message, sizeof ref->message)) ref->wrote_input = true;
    kt_status after = kt__workset_after(ws);
    if (st == KT_OK) st = after;
    if (res) {
        ws->cur += res->bytes; /* held until the tuning ends */
        if (ws->cur > ws->peak) ws->peak = ws->cur;
    }
    if (st != KT_OK) return st;
    if (ref->wrote_input) {
        kt__log(op->ctx, KT_LOG_WARN, "op '%s': the reference %s; tuning this key without validation", op->name,
                ref->message);
        return KT_OK;
    }
    if (rc != 0) {
        kt__log(op->ctx, KT_LOG_WARN, "op '%s': the reference %s%s%s returned %d; tuning this key without validation",
                op->name, u == NULL ? "function" : "candidate '", u == NULL ? "" : op->cands[u->cand].name,
                u == NULL ? "" : "'", rc);
        return KT_OK;
    }
    if (res && res->bytes > 0 && res->ptr == NULL) {
        kt__log(op->ctx, KT_LOG_WARN, "op '%s': the reference returned no output; tuning this key without validation", op->name);
        return KT_OK;
    }
    ref->active = true;
    return KT_OK;
}

/* Output a's bytes on the host for the verify function: its own memory where the workset's is
 * the host's, else a copy read back into *out (*copied: release_copies frees it). */
static bool read_back(kt__workset *ws, const kt_arg *a, void **out, bool *copied) {
    if (ws->host || a->bytes == 0) {
        *out = a->ptr;
        return true;
    }
    void *copy = malloc(a->bytes);
    if (copy == NULL) {
        kt__err(KT_ERR_NO_MEMORY, "out of memory for a copy of an output");
        return false;
    }
    if (kt__to_host(ws, copy, a->ptr, a->bytes) != KT_OK) {
        free(copy);
        return false;
    }
    *out = copy;
    *copied = true;
    return true;
}

static void release_copies(void **p, const bool *copied, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (copied[i]) free(p[i]);
}

bool kt__validate(const kt__reference *ref, kt__workset *ws, const kt_arg *args, const kt_result *result,
                  char *msg, size_t len) {
    const kt_op *op = ws->op;
    if (kt__workset_ro_changed(ws, msg, len)) return false;
    if (!ref->active) return true;
    void *verify_actual[64] = {NULL}; /* for the verify function: each output's bytes here, */
    bool verify_copied[64] = {false}; /* those of them read back into memory of their own */
    if (op->verify_fn && op->nargs > 64) {
        snprintf(msg, len, "a verify function takes ops of at most 64 arguments");
        return false;
    }
    for (size_t i = 0; i < op->nargs; i++) {
        const kt__argdecl *d = &op->args[i];
        if (!is_output(d)) continue;
        if (args[i].bytes != ref->out_bytes[i]) {
            snprintf(msg, len, "output '%s' has %zu bytes, the reference's %zu", d->name, args[i].bytes, ref->out_bytes[i]);
            return false;
        }
        if (op->verify_fn) { /* each output's own host copy: the function sees them all at once */
            if (!read_back(ws, &args[i], &verify_actual[i], &verify_copied[i])) {
                snprintf(msg, len, "output '%s' could not be read back: %s", d->name, kt_last_error());
                release_copies(verify_actual, verify_copied, op->nargs);
                return false;
            }
            continue;
        }
        /* where the device can say they match, nothing is read back (it compares elements) */
        double atol = 0, rtol = 0;
        if (is_float(d->elem)) kt__tolerances(op, d->elem, &atol, &rtol);
        bool sum = d->compare == KT_COMPARE_SUM;
        if (!sum && kt__workset_close(ws, d->elem, args[i].ptr, ref->dev_outputs[i], args[i].bytes / d->esize, atol, rtol)) continue;
        char what[KT__NAME_MAX + 16];
        snprintf(what, sizeof what, "output '%s'", d->name);
        const void *actual = kt__output_host(ws, args[i].ptr, args[i].bytes);
        if (actual == NULL && args[i].bytes > 0) {
            snprintf(msg, len, "output '%s' could not be read back: %s", d->name, kt_last_error());
            return false;
        }
        if (!compare_output(op, d, actual, ref->outputs[i], args[i].bytes / d->esize, what, msg, len)) return false;
    }
    if (op->verify_fn) {
        bool ok = verified(op, args, ref->outputs, verify_actual, ref->out_bytes, msg, len);
        release_copies(verify_actual, verify_copied, op->nargs);
        if (!ok) return false;
    }
    if (op->has_result) {
        if (result->bytes != ref->result.bytes) {
            snprintf(msg, len, "returned %zu bytes, the reference %zu", result->bytes, ref->result.bytes);
            return false;
        }
        if (result->bytes > 0 && result->ptr == NULL) {
            snprintf(msg, len, "returned no output");
            return false;
        }
        size_t es = kt_type_size(op->result_elem);
        if (!compare(op, op->result_elem, result->ptr, ref->result.ptr, result->bytes / es, "returned output", msg, len))
            return false;
    }
    return true;
}

void kt__reference_free(kt__reference *ref, kt__workset *ws) {
    const kt_op *op = ws->op;
    for (size_t i = 0; ref->outputs && i < op->nargs; i++)
        if (ref->outputs[i]) kt__extra_free(ws, ref->outputs[i], ref->out_bytes[i]);
    for (size_t i = 0; ref->dev_outputs && i < op->nargs; i++)
        if (ref->dev_outputs[i]) kt__workset_unkeep(ws, ref->dev_outputs[i], ref->out_bytes[i]);
    free(ref->dev_outputs);
    ref->dev_outputs = NULL;
    free(ref->outputs);
    free(ref->out_bytes);
    ref->outputs = NULL;
    ref->out_bytes = NULL;
    ws->cur -= ref->result.bytes;
    kt_result_release(&ref->result);
    free(ref->failed_msg);
    ref->failed_msg = NULL;
}
