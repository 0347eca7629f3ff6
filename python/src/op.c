/*
 * op.c - kerntune.Op (kt_op): its arguments (declared at construction), its settings, calls
 * (waiting, or queued on a device's stream), tuning a key without a call, and the decision of a
 * key. Candidates are added in variants.c, validation from Python in verify.c.
 */
#include "kt_python.h"

#include <kerntune/backend.h>
#include <kerntune/decision.h>
#include <kerntune/inputs.h>
#include <kerntune/device.h>
#include <kerntune/measure.h>
#include <kerntune/search.h>
#include <kerntune/validation.h>
#include <kerntune/variants.h>

#include <string.h>

#define SELF OpObject *o = (OpObject *)self

PyObject *ktpy_op_fail(OpObject *o, kt_status st) {
    ContextObject *c = (ContextObject *)o->context;
    if (o->pending) return ktpy_raise_pending(&o->pending);
    if (c && c->pending) return ktpy_raise_pending(&c->pending);
    return ktpy_raise(st);
}

/* After a call that succeeded: raises what a callback left pending (a unit function's error). */
static PyObject *ok_or_pending(OpObject *o) {
    ContextObject *c = (ContextObject *)o->context;
    if (o->pending) return ktpy_raise_pending(&o->pending);
    if (c->pending) return ktpy_raise_pending(&c->pending);
    Py_RETURN_NONE;
}

/* One argument declaration: (name, dtype) for a scalar, (name, dtype, access) for a buffer,
 * access one of "r", "w", "rw". */
static int declare(OpObject *o, size_t i, PyObject *spec) {
    const char *name = NULL, *dtype = NULL, *access = NULL;
    if (!PyTuple_Check(spec) || !PyArg_ParseTuple(spec, "ss|s", &name, &dtype, &access)) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "Op: argument %zu: expected (name, dtype) or (name, dtype, access)", i);
        return -1;
    }
    const ktpy_type *t = ktpy_type_by_name(dtype);
    if (t == NULL) {
        PyErr_Format(PyExc_ValueError, "Op: argument %zu ('%s'): unknown dtype '%s' (known: int8 to int64, uint8 to uint64, "
                                       "float16, bfloat16, float32, float64)", i, name, dtype);
        return -1;
    }
    kt_status st;
    if (access == NULL) {
        o->types[i] = t->type;
        st = kt_op_add_scalar(o->op, name, t->type);
    } else {
        kt_access a = strcmp(access, "r") == 0 ? KT_READ_ONLY : strcmp(access, "w") == 0 ? KT_WRITE_ONLY
                                                              : strcmp(access, "rw") == 0 ? KT_READ_WRITE : 0;
        if (a == 0) {
            PyErr_Format(PyExc_ValueError, "Op: argument %zu ('%s'): access '%s': expected 'r', 'w' or 'rw'", i, name, access);
            return -1;
        }
        o->types[i] = KT_TYPE_BUFFER, o->elems[i] = t->type, o->access[i] = a;
        st = kt_op_add_buffer(o->op, name, t->type, a);
    }
    if (st != KT_OK) {
        ktpy_raise(st);
        return -1;
    }
    return 0;
}

static int Op_init(PyObject *self, PyObject *args, PyObject *kwds) {
    SELF;
    static char *kwlist[] = {"context", "name", "arguments", "device", "isolation", NULL};
    PyObject *context = NULL, *arguments = NULL;
    const char *name = NULL, *isolation = "auto";
    Py_ssize_t device = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OsO|ns:Op", kwlist, &context, &name, &arguments, &device, &isolation)) return -1;
    kt_isolation iso = strcmp(isolation, "auto") == 0 ? KT_ISOLATE_AUTO : strcmp(isolation, "on") == 0 ? KT_ISOLATE_ON
                     : strcmp(isolation, "off") == 0 ? KT_ISOLATE_OFF : (kt_isolation)-1;
    if (iso == (kt_isolation)-1) {
        PyErr_Format(PyExc_ValueError, "Op: isolation '%s': expected 'auto', 'on' or 'off'", isolation);
        return -1;
    }
    if (!PyObject_IsInstance(context, ktpy_context_type)) {
        PyErr_SetString(PyExc_TypeError, "Op: context must be a kerntune.Context");
        return -1;
    }
    if (o->op != NULL || o->context != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Op.__init__: already initialised");
        return -1;
    }
    Py_ssize_t n = PySequence_Check(arguments) ? PySequence_Size(arguments) : -1;
    if (n < 0) {
        PyErr_Clear();
        PyErr_SetString(PyExc_TypeError, "Op: arguments must be a sequence of declarations");
        return -1;
    }
    if (device < 0) {
        PyErr_SetString(PyExc_ValueError, "Op: device must be a device's index (Context.devices())");
        return -1;
    }
    o->nargs = (size_t)n;
    o->types = PyMem_Calloc(n ? (size_t)n : 1, sizeof *o->types);
    o->elems = PyMem_Calloc(n ? (size_t)n : 1, sizeof *o->elems);
    o->access = PyMem_Calloc(n ? (size_t)n : 1, sizeof *o->access);
    o->keep = PyList_New(0);
    if (!o->types || !o->elems || !o->access || !o->keep) {
        PyErr_NoMemory();
        return -1;
    }
    Py_INCREF(context); /* from here on: the op must not outlive its context, even a failed one */
    o->context = context;
    kt_context *ctx = ((ContextObject *)context)->ctx;
    kt_status st = kt_op_create(ctx, name, &o->op);
    o->device = (size_t)device;
    if (st == KT_OK && device != 0) st = kt_op_set_device(o->op, (size_t)device);
    if (st == KT_OK) st = kt_op_set_isolation(o->op, iso);
    if (st != KT_OK) {
        ktpy_raise(st);
        return -1;
    }
    o->host = (kt_device_caps(kt_context_device(ctx, o->device)) & KT_BACKEND_CAP_HOST_MEMORY) != 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *spec = PySequence_GetItem(arguments, i);
        int rc = spec ? declare(o, (size_t)i, spec) : -1;
        Py_XDECREF(spec);
        if (rc != 0) return -1;
    }
    return 0;
}

static void Op_dealloc(PyObject *self) {
    SELF;
    kt_op_destroy(o->op); /* before what its callbacks use goes */
    o->op = NULL;
    PyMem_Free(o->types), PyMem_Free(o->elems), PyMem_Free(o->access);
    ktpy_answer_free(o->answer);
    Py_XDECREF(o->verify);
    Py_XDECREF(o->keep);
    Py_XDECREF(o->pending);
    Py_XDECREF(o->context);
    PyTypeObject *tp = Py_TYPE(self);
    freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    tp_free(self);
    Py_DECREF(tp);
}

/* ---- calls ------------------------------------------------------------------------------------- */

typedef enum { CALL, TUNE, ASYNC, RECALL } call_kind;

/* op(*args), op.tune(*args), op.call_async(queue, *args), op.recall(*args): the arguments
 * converted (host arrays staged to the op's device), kerntune called without the interpreter's
 * lock, staged outputs copied back into their arrays (not after tune or recall, which write
 * none). A recall returns True or False (KT_ERR_NOT_FOUND: nothing records the key). */
static PyObject *invoke(OpObject *o, PyObject *args, call_kind kind, kt_queue queue) {
    ktpy_args a = {0};
    if (ktpy_args_make(o, args, &a) != 0) return NULL;
    kt_status st;
    Py_BEGIN_ALLOW_THREADS /* the arguments' objects are held by args meanwhile */
    st = kind == TUNE     ? kt_op_tune(o->op, a.a, o->nargs)
         : kind == RECALL ? kt_op_recall(o->op, a.a, o->nargs)
         : kind == ASYNC  ? kt_op_call_async(o->op, queue, a.a, o->nargs)
                          : kt_op_call(o->op, a.a, o->nargs);
    kt_status back = ktpy_args_unstage(o, &a, st == KT_OK && kind == CALL);
    if (st == KT_OK) st = back;
    Py_END_ALLOW_THREADS
    ktpy_args_free(&a);
    bool absent = kind == RECALL && st == KT_ERR_NOT_FOUND;
    if (st != KT_OK && !absent) return ktpy_op_fail(o, st);
    PyObject *r = ok_or_pending(o);
    if (r == NULL || kind != RECALL) return r;
    Py_DECREF(r);
    return PyBool_FromLong(!absent);
}

static PyObject *Op_call(PyObject *self, PyObject *args, PyObject *kwds) {
    if (kwds && PyDict_Size(kwds) > 0) {
        PyErr_SetString(PyExc_TypeError, "the op takes its arguments by position");
        return NULL;
    }
    return invoke((OpObject *)self, args, CALL, NULL);
}

static PyObject *Op_tune(PyObject *self, PyObject *args) { return invoke((OpObject *)self, args, TUNE, NULL); }
static PyObject *Op_recall(PyObject *self, PyObject *args) { return invoke((OpObject *)self, args, RECALL, NULL); }

static PyObject *Op_call_async(PyObject *self, PyObject *args) {
    Py_ssize_t n = PyTuple_Size(args);
    if (n < 1) {
        PyErr_SetString(PyExc_TypeError, "call_async(queue, *args): the queue (a CUstream or cl_command_queue as an int) first");
        return NULL;
    }
    void *queue = PyLong_AsVoidPtr(PyTuple_GetItem(args, 0));
    if (queue == NULL && PyErr_Occurred()) return NULL;
    PyObject *rest = PyTuple_GetSlice(args, 1, n);
    if (rest == NULL) return NULL;
    PyObject *r = invoke((OpObject *)self, rest, ASYNC, queue);
    Py_DECREF(rest);
    return r;
}

/* decision(*args) -> (winner index or None, [(candidate, config, outcome, time_ns, runs, message,
 * runtimes_ns, build_ms, validation_ms, framework_ms), ...]); a unit that was not run is a pair
 * (candidate, config): a space of millions leaves most of its units not run, and the package
 * makes their Units only when they are looked at (kerntune.Decision.units). */
static PyObject *Op_decision(PyObject *self, PyObject *args) {
    SELF;
    ktpy_args a = {0};
    if (ktpy_args_make(o, args, &a) != 0) return NULL;
    const kt_decision *d = NULL;
    kt_status st = kt_op_decision(o->op, a.a, o->nargs, &d);
    Py_BEGIN_ALLOW_THREADS
    ktpy_args_unstage(o, &a, false);
    Py_END_ALLOW_THREADS
    ktpy_args_free(&a);
    if (st != KT_OK && !(st == KT_ERR_ALL_FAILED && d != NULL)) return ktpy_raise(st);
    size_t n = kt_decision_unit_count(d), w = kt_decision_winner_unit(d);
    PyObject *units = PyList_New((Py_ssize_t)n), *cand_obj = NULL;
    const char *cand_of_obj = NULL; /* the candidate name cand_obj holds: not-run units share it */
    for (size_t u = 0; units && u < n; u++) {
        const char *config = kt_decision_unit_config(d, u), *msg = kt_decision_unit_message(d, u);
        if (kt_decision_unit_outcome(d, u) == KT_OUTCOME_NOT_RUN) {
            const char *cand = kt_op_candidate_name(o->op, kt_decision_unit_candidate(d, u));
            if (cand_obj == NULL || cand != cand_of_obj) {
                Py_XDECREF(cand_obj);
                cand_obj = PyUnicode_FromString(cand ? cand : "");
                cand_of_obj = cand;
            }
            PyObject *t = cand_obj ? Py_BuildValue("(Os)", cand_obj, config ? config : "") : NULL;
            if (t == NULL) {
                Py_XDECREF(cand_obj);
                Py_DECREF(units);
                return NULL;
            }
            PyList_SetItem(units, (Py_ssize_t)u, t);
            continue;
        }
        const double *times = NULL;
        size_t nt = 0;
        if (kt_decision_unit_runtimes(d, u, &times, &nt) != KT_OK) nt = 0;
        PyObject *rt = PyList_New((Py_ssize_t)nt);
        for (size_t k = 0; rt && k < nt; k++) PyList_SetItem(rt, (Py_ssize_t)k, PyFloat_FromDouble(times[k]));
        const char *cand = kt_op_candidate_name(o->op, kt_decision_unit_candidate(d, u));
        PyObject *t = rt ? Py_BuildValue("(sssdIsNddd)", cand ? cand : "", config ? config : "",
                                         kt_outcome_name(kt_decision_unit_outcome(d, u)), kt_decision_unit_time_ns(d, u),
                                         kt_decision_unit_runs(d, u), msg ? msg : "", rt, kt_decision_unit_build_ms(d, u),
                                         kt_decision_unit_validation_ms(d, u), kt_decision_unit_framework_ms(d, u))
                         : NULL;
        if (t == NULL) {
            Py_XDECREF(cand_obj);
            Py_DECREF(units);
            return NULL;
        }
        PyList_SetItem(units, (Py_ssize_t)u, t);
    }
    Py_XDECREF(cand_obj);
    if (units == NULL) return NULL;
    PyObject *winner = st == KT_OK && w < n ? PyLong_FromSize_t(w) : (Py_INCREF(Py_None), Py_None); /* none: all failed */
    const char *source = kt_decision_source_name(kt_decision_source_of(d));
    return Py_BuildValue("(NNsddNN)", winner, units, source ? source : "", kt_decision_confidence(d),
                         kt_decision_requested_confidence(d), PyBool_FromLong(kt_decision_below_confidence(d)),
                         PyBool_FromLong(kt_decision_reraced(d)));
}

/* ---- settings ---------------------------------------------------------------------------------- */

static PyObject *done(kt_status st) {
    if (st != KT_OK) return ktpy_raise(st);
    Py_RETURN_NONE;
}

static PyObject *Op_set_budget(PyObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"units", "seconds", "fraction", NULL};
    Py_ssize_t units = 0;
    double seconds = 0, fraction = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|ndd:set_budget", kwlist, &units, &seconds, &fraction)) return NULL;
    if (units < 0) {
        PyErr_SetString(PyExc_ValueError, "set_budget: units must be 0 (no limit) or more");
        return NULL;
    }
    kt_op *op = ((OpObject *)self)->op;
    kt_status st = kt_op_set_budget(op, (size_t)units, seconds);
    return done(st == KT_OK ? kt_op_set_budget_fraction(op, fraction) : st);
}

static PyObject *Op_set_search(PyObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"strategy", "seed", NULL};
    const char *strategy = NULL;
    unsigned long long seed = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "s|K:set_search", kwlist, &strategy, &seed)) return NULL;
    return done(kt_op_set_search(((OpObject *)self)->op, strategy, seed));
}

static PyObject *Op_set_tolerance(PyObject *self, PyObject *args) {
    double atol = 0, rtol = 0;
    if (!PyArg_ParseTuple(args, "dd:set_tolerance", &atol, &rtol)) return NULL;
    return done(kt_op_set_tolerance(((OpObject *)self)->op, atol, rtol));
}

static PyObject *Op_set_validation(PyObject *self, PyObject *args) {
    int on = 1;
    if (!PyArg_ParseTuple(args, "p:set_validation", &on)) return NULL;
    return done(kt_op_set_validation(((OpObject *)self)->op, on));
}

static PyObject *Op_set_consensus(PyObject *self, PyObject *args) {
    Py_ssize_t n = 0;
    if (!PyArg_ParseTuple(args, "n:set_consensus", &n)) return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "set_consensus: 0 (off) or more units");
        return NULL;
    }
    return done(kt_op_set_reference_consensus(((OpObject *)self)->op, (size_t)n));
}

static PyObject *Op_set_timeout(PyObject *self, PyObject *args) {
    double s = 0;
    if (!PyArg_ParseTuple(args, "d:set_timeout", &s)) return NULL;
    return done(kt_op_set_timeout(((OpObject *)self)->op, s));
}

static PyObject *Op_set_effort(PyObject *self, PyObject *args) {
    const char *name = NULL;
    if (!PyArg_ParseTuple(args, "s:set_effort", &name)) return NULL;
    for (int e = KT_EFFORT_INHERIT; e <= KT_EFFORT_FORCED; e++)
        if (strcmp(kt_effort_name((kt_effort)e), name) == 0) return done(kt_op_set_effort(((OpObject *)self)->op, (kt_effort)e));
    PyErr_Format(PyExc_ValueError, "set_effort: '%s': expected 'inherit', 'tune', 'cache-only', 'off' or 'forced'", name);
    return NULL;
}

static PyObject *Op_set_constant(PyObject *self, PyObject *args) {
    Py_ssize_t arg = 0;
    if (!PyArg_ParseTuple(args, "n:set_constant", &arg)) return NULL;
    if (arg < 0) {
        PyErr_SetString(PyExc_ValueError, "set_constant: an argument's index");
        return NULL;
    }
    return done(kt_op_set_constant(((OpObject *)self)->op, (size_t)arg));
}

static PyObject *Op_set_compare(PyObject *self, PyObject *args) {
    Py_ssize_t arg = 0;
    const char *how = NULL;
    if (!PyArg_ParseTuple(args, "ns:set_compare", &arg, &how)) return NULL;
    kt_compare c = strcmp(how, "elements") == 0 ? KT_COMPARE_ELEMENTS : strcmp(how, "sum") == 0 ? KT_COMPARE_SUM : (kt_compare)-1;
    if (arg < 0 || c == (kt_compare)-1) {
        PyErr_SetString(PyExc_ValueError, "set_compare(arg, how): an output's index, and 'elements' or 'sum'");
        return NULL;
    }
    return done(kt_op_set_compare(((OpObject *)self)->op, (size_t)arg, c));
}

static PyObject *Op_set_rerace(PyObject *self, PyObject *args) {
    int on = 1;
    if (!PyArg_ParseTuple(args, "p:set_rerace", &on)) return NULL;
    return done(kt_op_set_rerace(((OpObject *)self)->op, on));
}

static PyObject *Op_set_accumulate(PyObject *self, PyObject *args) {
    Py_ssize_t arg = 0;
    double value = 0;
    if (!PyArg_ParseTuple(args, "nd:set_accumulate", &arg, &value)) return NULL;
    if (arg < 0) {
        PyErr_SetString(PyExc_ValueError, "set_accumulate: an argument's index");
        return NULL;
    }
    return done(kt_op_set_accumulate(((OpObject *)self)->op, (size_t)arg, value));
}

static PyObject *Op_set_candidate_version(PyObject *self, PyObject *args) {
    const char *name = NULL, *version = NULL;
    if (!PyArg_ParseTuple(args, "sz:set_candidate_version", &name, &version)) return NULL;
    return done(kt_op_set_candidate_version(((OpObject *)self)->op, name, version));
}

static PyObject *Op_key_arg(PyObject *self, PyObject *args) {
    Py_ssize_t arg = 0;
    const char *bucket = "exact";
    if (!PyArg_ParseTuple(args, "n|s:key_arg", &arg, &bucket)) return NULL;
    kt_bucket b = strcmp(bucket, "exact") == 0 ? KT_BUCKET_EXACT : strcmp(bucket, "pow2") == 0 ? KT_BUCKET_POW2 : (kt_bucket)-1;
    if (arg < 0 || b == (kt_bucket)-1) {
        PyErr_SetString(PyExc_ValueError, "key_arg(arg, bucket='exact'): an argument's index, and 'exact' or 'pow2'");
        return NULL;
    }
    return done(kt_op_key_arg(((OpObject *)self)->op, (size_t)arg, b));
}

static PyObject *Op_set_default(PyObject *self, PyObject *args) {
    const char *name = NULL;
    if (!PyArg_ParseTuple(args, "s:set_default", &name)) return NULL;
    return done(kt_op_set_default(((OpObject *)self)->op, name));
}

static PyObject *Op_candidates(PyObject *self, PyObject *noargs) {
    (void)noargs;
    SELF;
    size_t n = kt_op_candidate_count(o->op);
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) PyList_SetItem(list, (Py_ssize_t)i, PyUnicode_FromString(kt_op_candidate_name(o->op, i)));
    return list;
}

static PyObject *Op_tune_count(PyObject *self, PyObject *noargs) {
    (void)noargs;
    return PyLong_FromUnsignedLongLong(kt_op_tune_count(((OpObject *)self)->op));
}

#define METHOD(name, flags, doc) {#name, (PyCFunction)(void (*)(void))Op_##name, flags, doc}
static PyMethodDef Op_methods[] = {
    {"add_variants", (PyCFunction)(void (*)(void))ktpy_op_add_variants, METH_VARARGS | METH_KEYWORDS,
     "add_variants(name, params, source, kernel, constraints=None, options=None, inputs=None, global_size=None,\n"
     "grid=None, block=None, shared_memory=None, derived=None, kernel_tuner=False, block_size_names=None, version=None):\n"
     "a group of candidates, one per configuration of params (a dict: name -> values, as a string in kerntune's\n"
     "expression language or a list), compiled from source by the device's backend with the configuration as defines;\n"
     "constraints are expressions or callables taking the configuration as a dict"},
    {"add_candidate", (PyCFunction)(void (*)(void))ktpy_op_add_candidate, METH_VARARGS | METH_KEYWORDS,
     "add_candidate(name, fn, queued=False, version=None): a Python callable as a native candidate"},
    {"set_answer", ktpy_op_set_answer, METH_VARARGS, "set_answer({arg: array}): the expected outputs, as the reference"},
    {"set_verify", ktpy_op_set_verify, METH_VARARGS, "set_verify(fn): fn(expected, actual) -> bool decides validation"},
    {"_decision", Op_decision, METH_VARARGS, "_decision(*args): (winner index or None, units as tuples, source); see Op.decision"},
    METHOD(tune, METH_VARARGS, "tune(*args): decides the key of these arguments without writing them (kt_op_tune)"),
    METHOD(recall, METH_VARARGS,
           "recall(*args) -> bool: decides the key of these arguments only if that needs no measuring (a decision held, "
           "or recorded in the persistent or the fleet's cache: kt_op_recall); False leaves the key for a call to tune"),
    METHOD(call_async, METH_VARARGS, "call_async(queue, *args): the call queued on a device's queue (kt_op_call_async)"),
    METHOD(candidates, METH_NOARGS, "candidates() -> the candidates' names"),
    METHOD(tune_count, METH_NOARGS, "tune_count() -> how many times the op has tuned a key"),
    METHOD(set_budget, METH_VARARGS | METH_KEYWORDS,
           "set_budget(units=0, seconds=0.0, fraction=0.0): stop a tuning after so many configurations, seconds or such a\n"
           "fraction of its configurations (0: no limit)"),
    METHOD(set_search, METH_VARARGS | METH_KEYWORDS, "set_search(strategy, seed=0): which configurations a budget tries"),
    METHOD(set_tolerance, METH_VARARGS, "set_tolerance(atol, rtol): for every floating-point output"),
    METHOD(set_rerace, METH_VARARGS,
           "set_rerace(on): re-race a recorded decision that ended below its race's confidence (default on); off: serve it"),
    METHOD(set_validation, METH_VARARGS, "set_validation(on): validate candidates' outputs against a reference (default on)"),
    METHOD(set_consensus, METH_VARARGS, "set_consensus(n): a variant group's reference by the consensus of its first n units"),
    METHOD(set_timeout, METH_VARARGS, "set_timeout(seconds): how long an isolated run may take"),
    METHOD(set_effort, METH_VARARGS, "set_effort(name): 'inherit', 'tune', 'cache-only', 'off' or 'forced'"),
    METHOD(set_constant, METH_VARARGS, "set_constant(arg): a ReadOnly buffer in the device's constant memory too"),
    METHOD(set_compare, METH_VARARGS, "set_compare(arg, how): an output compared by 'elements' (default) or its 'sum'"),
    METHOD(set_accumulate, METH_VARARGS,
           "set_accumulate(arg, value): a WriteOnly output filled with value before every tuning run (and the final launch)"),
    METHOD(set_candidate_version, METH_VARARGS, "set_candidate_version(name, version): a version the cache keys the candidate by"),
    METHOD(key_arg, METH_VARARGS, "key_arg(arg, bucket='exact'): a key component: a scalar's value or a buffer's size"),
    METHOD(set_default, METH_VARARGS, "set_default(name): the default candidate"),
    {NULL, NULL, 0, NULL},
};

static PyType_Slot Op_slots[] = {
    {Py_tp_doc, "Op(context, name, arguments, device=0, isolation='auto'): a tunable operation (kt_op).\n"
                "arguments: one declaration per argument, in order: (name, dtype) for a scalar,\n"
                "(name, dtype, access) for a buffer, access 'r', 'w' or 'rw'. isolation: where candidates\n"
                "run while tuning: 'on', a runner process (a crash disqualifies the candidate and nothing\n"
                "else); 'auto', a runner for backends whose faults poison the device (CUDA); 'off', this\n"
                "process. Calling the op with its arguments tunes on a new key, then runs the winner."},
    {Py_tp_init, Op_init},
    {Py_tp_dealloc, Op_dealloc},
    {Py_tp_call, Op_call},
    {Py_tp_methods, Op_methods},
    {0, NULL},
};

PyType_Spec ktpy_op_spec = {"kerntune._kerntune.Op", sizeof(OpObject), 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, Op_slots};
