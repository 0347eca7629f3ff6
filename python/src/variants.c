/*
 * variants.c - an op's candidates from Python: variant groups compiled from source over a space
 * of parameters (Op.add_variants: values as expressions or lists, constraints as expressions or
 * Python callables, derived values, launch geometry, Kernel Tuner's compile contract), and Python
 * callables as native candidates (Op.add_candidate: on host memory, or enqueuing their work on a
 * device's queue). Callables are called with the interpreter's lock, on whatever thread kerntune
 * calls them from; what they need is kept alive by the op (OpObject.keep).
 */
#include "kt_python.h"

#include <kerntune/variants.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* ---- parameters ------------------------------------------------------------------------------- */

/* The values of one parameter: a string (kerntune's expression language), a sequence of ints, or
 * a sequence of ints, floats, bools and strings (written as the list literal they make). */
static kt_status add_param(kt_space *sp, const char *name, PyObject *value, PyObject *keep) {
    if (PyUnicode_Check(value)) {
        const char *v = ktpy_utf8(value, keep);
        return v ? kt_space_add_param(sp, name, v) : KT_ERR_INVALID_ARGUMENT;
    }
    PyObject *seq = PySequence_Check(value) ? PySequence_List(value) : NULL;
    if (seq == NULL) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "add_variants: parameter '%s': its values must be a string or a list", name);
        return KT_ERR_INVALID_ARGUMENT;
    }
    Py_ssize_t k = PyList_Size(seq);
    bool ints = true;
    for (Py_ssize_t i = 0; i < k && ints; i++) ints = PyLong_Check(PyList_GetItem(seq, i)) && !PyBool_Check(PyList_GetItem(seq, i));
    kt_status st;
    if (ints) {
        int64_t *v = PyMem_Calloc(k ? (size_t)k : 1, sizeof *v);
        if (v == NULL) {
            Py_DECREF(seq);
            PyErr_NoMemory();
            return KT_ERR_NO_MEMORY;
        }
        for (Py_ssize_t i = 0; i < k; i++) v[i] = PyLong_AsLongLong(PyList_GetItem(seq, i));
        st = PyErr_Occurred() ? KT_ERR_INVALID_ARGUMENT : kt_space_add_param_ints(sp, name, v, (size_t)k);
        PyMem_Free(v);
    } else { /* floats, bools and strings as Python writes them: the language reads that */
        for (Py_ssize_t i = 0; i < k; i++) {
            PyObject *x = PyList_GetItem(seq, i);
            if (!PyLong_Check(x) && !PyFloat_Check(x) && !PyUnicode_Check(x)) {
                Py_DECREF(seq);
                PyErr_Format(PyExc_TypeError, "add_variants: parameter '%s': value %zd is not an int, float, bool or str", name, i);
                return KT_ERR_INVALID_ARGUMENT;
            }
        }
        PyObject *text = PyObject_Repr(seq);
        const char *v = text ? ktpy_utf8(text, keep) : NULL;
        Py_XDECREF(text);
        st = v ? kt_space_add_param(sp, name, v) : KT_ERR_INVALID_ARGUMENT;
    }
    Py_DECREF(seq);
    return st;
}

/* ---- constraints as Python callables ------------------------------------------------------------- */

typedef struct py_constraint {
    OpObject *op;  /* whose pending exception an error becomes (borrowed: the op keeps this) */
    PyObject *fn;
    PyObject *names; /* the parameters' names, a tuple, in the space's order */
} py_constraint;

static void free_constraint(PyObject *capsule) {
    py_constraint *c = PyCapsule_GetPointer(capsule, "kerntune.constraint");
    if (c == NULL) return;
    Py_XDECREF(c->fn);
    Py_XDECREF(c->names);
    PyMem_Free(c);
}

/* A configuration as a dict for the callable: ints (bools as 0 or 1), floats and strings. */
static PyObject *config_dict(const kt_config *cfg, PyObject *names) {
    PyObject *d = PyDict_New();
    for (Py_ssize_t p = 0; d && p < PyTuple_Size(names); p++) {
        const char *s = kt_config_string(cfg, (size_t)p);
        PyObject *v;
        if (s != NULL) {
            v = PyUnicode_FromString(s);
        } else {
            int64_t i = kt_config_int(cfg, (size_t)p);
            double x = kt_config_double(cfg, (size_t)p);
            v = (double)i == x ? PyLong_FromLongLong(i) : PyFloat_FromDouble(x);
        }
        if (v == NULL || PyDict_SetItem(d, PyTuple_GetItem(names, p), v) != 0) Py_CLEAR(d);
        Py_XDECREF(v);
    }
    return d;
}

static int call_constraint(const kt_config *cfg, void *user) {
    py_constraint *c = user;
    PyGILState_STATE g = PyGILState_Ensure();
    int valid = 0;
    if (c->op->pending == NULL) { /* after an error, every configuration is refused: the call raises it */
        PyObject *d = config_dict(cfg, c->names);
        PyObject *r = d ? PyObject_CallFunctionObjArgs(c->fn, d, NULL) : NULL;
        int truth = r ? PyObject_IsTrue(r) : -1;
        if (truth < 0) ktpy_keep_exception(&c->op->pending);
        valid = truth == 1;
        Py_XDECREF(r);
        Py_XDECREF(d);
    }
    PyGILState_Release(g);
    return valid;
}

static kt_status add_constraint(OpObject *o, kt_space *sp, PyObject *item, PyObject *keep) {
    if (PyUnicode_Check(item)) {
        const char *text = ktpy_utf8(item, keep);
        return text ? kt_space_add_constraint(sp, text) : KT_ERR_INVALID_ARGUMENT;
    }
    if (!PyCallable_Check(item)) {
        PyErr_SetString(PyExc_TypeError, "add_variants: a constraint is an expression (a str) or a callable taking the "
                                         "configuration as a dict");
        return KT_ERR_INVALID_ARGUMENT;
    }
    size_t n = kt_space_param_count(sp);
    PyObject *names = PyTuple_New((Py_ssize_t)n);
    for (size_t p = 0; names && p < n; p++) PyTuple_SetItem(names, (Py_ssize_t)p, PyUnicode_FromString(kt_space_param_name(sp, p)));
    py_constraint *c = names ? PyMem_Calloc(1, sizeof *c) : NULL;
    PyObject *capsule = c ? PyCapsule_New(c, "kerntune.constraint", free_constraint) : NULL;
    if (capsule == NULL) {
        Py_XDECREF(names);
        PyMem_Free(c);
        if (!PyErr_Occurred()) PyErr_NoMemory();
        return KT_ERR_NO_MEMORY;
    }
    c->op = o, c->fn = (Py_INCREF(item), item), c->names = names;
    int rc = PyList_Append(o->keep, capsule);
    Py_DECREF(capsule);
    return rc == 0 ? kt_space_add_constraint_fn(sp, call_constraint, c) : KT_ERR_NO_MEMORY;
}

/* ---- Op.add_variants ------------------------------------------------------------------------------ */

typedef struct geometry_args {
    PyObject *global, *grid, *block;
    const char *shared;
} geometry_args;

static kt_status set_geometry(kt_space *sp, const geometry_args *g, PyObject *keep) {
    bool has_global = g->global && g->global != Py_None, has_grid = g->grid && g->grid != Py_None;
    bool has_block = g->block && g->block != Py_None;
    if (has_global && has_grid) {
        PyErr_SetString(PyExc_ValueError, "add_variants: global_size (work-items, as OpenCL counts) or grid (blocks, as CUDA "
                                          "counts), not both");
        return KT_ERR_INVALID_ARGUMENT;
    }
    if (!has_global && !has_grid && !has_block && !g->shared) return KT_OK;
    size_t ng = 0, nb = 0;
    const char **glob = NULL, **blk = NULL;
    kt_status st = KT_OK;
    if ((has_global || has_grid) && ((glob = ktpy_strings(has_global ? g->global : g->grid, "add_variants: global_size or grid", &ng, keep)) == NULL ||
                                     ng < 1 || ng > 3)) {
        if (glob) PyErr_SetString(PyExc_ValueError, "add_variants: global_size or grid: one to three expressions");
        st = KT_ERR_INVALID_ARGUMENT;
    }
    if (st == KT_OK && has_block && ((blk = ktpy_strings(g->block, "add_variants: block", &nb, keep)) == NULL || nb < 1 || nb > 3)) {
        if (blk) PyErr_SetString(PyExc_ValueError, "add_variants: block: one to three expressions");
        st = KT_ERR_INVALID_ARGUMENT;
    }
    if (st == KT_OK) {
        const char *g3[3] = {NULL, NULL, NULL}, *b3[3] = {NULL, NULL, NULL};
        for (size_t i = 0; i < ng; i++) g3[i] = glob[i];
        for (size_t i = 0; i < nb; i++) b3[i] = blk[i];
        st = kt_space_set_geometry(sp, has_global ? KT_GEOMETRY_GLOBAL : KT_GEOMETRY_GRID, g3, b3, g->shared);
    }
    PyMem_Free(glob), PyMem_Free(blk);
    return st;
}

/* The space from add_variants' arguments: parameters, inputs, derived values, constraints and the
 * geometry, in that order (a constraint may read a derived value; a callable one is given the
 * parameters). */
static kt_status make_space(OpObject *o, kt_space *sp, PyObject *params, PyObject *inputs, PyObject *derived,
                            PyObject *constraints, const geometry_args *geo, PyObject *keep) {
    kt_status st = KT_OK;
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (st == KT_OK && PyDict_Next(params, &pos, &key, &value)) {
        const char *pname = ktpy_utf8(key, keep);
        st = pname ? add_param(sp, pname, value, keep) : KT_ERR_INVALID_ARGUMENT;
    }
    size_t ni = 0;
    const char **ins = NULL;
    if (st == KT_OK && inputs && inputs != Py_None) { /* op arguments the space reads (a scalar's value, a buffer's length) */
        ins = ktpy_strings(inputs, "add_variants: inputs", &ni, keep);
        if (ins == NULL) st = KT_ERR_INVALID_ARGUMENT;
    }
    for (size_t i = 0; st == KT_OK && i < ni; i++) st = kt_space_add_input(sp, ins[i]);
    PyMem_Free(ins);
    if (st == KT_OK && derived && derived != Py_None) {
        if (!PyDict_Check(derived)) {
            PyErr_SetString(PyExc_TypeError, "add_variants: derived must be a dict of name to expression");
            return KT_ERR_INVALID_ARGUMENT;
        }
        pos = 0;
        while (st == KT_OK && PyDict_Next(derived, &pos, &key, &value)) {
            const char *dname = ktpy_utf8(key, keep), *expr = dname ? ktpy_utf8(value, keep) : NULL;
            st = expr ? kt_space_add_derived(sp, dname, expr) : KT_ERR_INVALID_ARGUMENT;
        }
    }
    if (st == KT_OK && constraints && constraints != Py_None) {
        Py_ssize_t k = PySequence_Check(constraints) && !PyUnicode_Check(constraints) ? PySequence_Size(constraints) : -1;
        if (k < 0) {
            PyErr_Clear();
            PyErr_SetString(PyExc_TypeError, "add_variants: constraints must be a list of expressions or callables");
            return KT_ERR_INVALID_ARGUMENT;
        }
        for (Py_ssize_t i = 0; st == KT_OK && i < k; i++) {
            PyObject *item = PySequence_GetItem(constraints, i);
            st = item ? add_constraint(o, sp, item, keep) : KT_ERR_INVALID_ARGUMENT;
            Py_XDECREF(item);
        }
    }
    return st == KT_OK ? set_geometry(sp, geo, keep) : st;
}

PyObject *ktpy_op_add_variants(PyObject *self, PyObject *args, PyObject *kwds) {
    OpObject *o = (OpObject *)self;
    static char *kwlist[] = {"name",          "params",  "source",       "kernel",           "constraints", "options",
                             "inputs",        "global_size", "grid",     "block",            "shared_memory", "derived",
                             "kernel_tuner",  "block_size_names", "version", NULL};
    const char *name = NULL, *source = NULL, *kernel = NULL, *version = NULL;
    PyObject *params = NULL, *constraints = NULL, *options = NULL, *inputs = NULL, *derived = NULL, *block_names = NULL;
    geometry_args geo = {NULL, NULL, NULL, NULL};
    int contract = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "sOss|OOOOOOzOpOz:add_variants", kwlist, &name, &params, &source, &kernel,
                                     &constraints, &options, &inputs, &geo.global, &geo.grid, &geo.block, &geo.shared, &derived,
                                     &contract, &block_names, &version))
        return NULL;
    if (!PyDict_Check(params)) {
        PyErr_SetString(PyExc_TypeError, "add_variants: params must be a dict of parameter name to its values (a string "
                                         "such as '[1, 2, 4]' or 'range(8)', or a list)");
        return NULL;
    }
    PyObject *keep = PyList_New(0); /* the UTF-8 copies of the strings, until the end */
    if (keep == NULL) return NULL;
    kt_space *sp = NULL;
    size_t no = 0, nbn = 0;
    const char **opts = NULL, **bnames = NULL;
    kt_status st = kt_space_create(&sp);
    if (st == KT_OK) st = make_space(o, sp, params, inputs, derived, constraints, &geo, keep);
    if (st == KT_OK && options && options != Py_None && (opts = ktpy_strings(options, "add_variants: options", &no, keep)) == NULL)
        st = KT_ERR_INVALID_ARGUMENT;
    if (st == KT_OK && block_names && block_names != Py_None &&
        ((bnames = ktpy_strings(block_names, "add_variants: block_size_names", &nbn, keep)) == NULL || nbn != 3)) {
        if (bnames) PyErr_SetString(PyExc_ValueError, "add_variants: block_size_names: three names (x, y, z)");
        st = KT_ERR_INVALID_ARGUMENT;
    }
    if (st == KT_OK) st = kt_op_add_variants(o->op, name, sp, source, kernel, opts, no);
    if (st == KT_OK && contract) st = kt_op_set_kernel_tuner_contract(o->op, name, bnames);
    if (st == KT_OK && version) st = kt_op_set_candidate_version(o->op, name, version);
    PyMem_Free(opts), PyMem_Free(bnames);
    kt_space_destroy(sp); /* the op keeps its own reference */
    Py_DECREF(keep);
    if (PyErr_Occurred()) return NULL;
    if (st != KT_OK) return ktpy_raise(st);
    Py_RETURN_NONE;
}

/* ---- Python callables as candidates ------------------------------------------------------------- */

typedef struct py_candidate {
    OpObject *op; /* borrowed: the op keeps this */
    PyObject *fn;
} py_candidate;

static void free_candidate(PyObject *capsule) {
    py_candidate *c = PyCapsule_GetPointer(capsule, "kerntune.candidate");
    if (c == NULL) return;
    Py_XDECREF(c->fn);
    PyMem_Free(c);
}

/* A candidate's exception as its failure: "TypeError: ..." as the unit's diagnostic
 * (kt_candidate_failed), the exception itself cleared (a bad candidate disqualifies itself and
 * nothing else). */
static int exception_failure(void) {
    PyObject *type = NULL, *value = NULL, *tb = NULL;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *tname = type ? PyObject_GetAttrString(type, "__name__") : NULL, *text = value ? PyObject_Str(value) : NULL;
    PyObject *a = tname ? PyUnicode_AsUTF8String(tname) : NULL, *b = text ? PyUnicode_AsUTF8String(text) : NULL;
    int rc = kt_candidate_failed("%s: %s", a ? PyBytes_AsString(a) : "an exception", b ? PyBytes_AsString(b) : "");
    Py_XDECREF(tname), Py_XDECREF(text), Py_XDECREF(a), Py_XDECREF(b);
    Py_XDECREF(type), Py_XDECREF(value), Py_XDECREF(tb);
    PyErr_Clear();
    return rc;
}

/* fn(*args) (queued: fn(queue, *args)): buffers as memoryviews of host memory (valid during the
 * call) or, on a device, as the device pointer's int; scalars as numbers. None or 0 is success, an
 * int its failure code, an exception a failure whose diagnostic it is. */
static int call_candidate(py_candidate *c, const kt_arg *args, size_t nargs, kt_queue queue, bool queued) {
    OpObject *o = c->op;
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *views = PyList_New(0), *tuple = views ? PyTuple_New((Py_ssize_t)nargs + (queued ? 1 : 0)) : NULL;
    size_t at = 0;
    if (tuple && queued) PyTuple_SetItem(tuple, (Py_ssize_t)at++, PyLong_FromVoidPtr(queue));
    for (size_t i = 0; tuple && i < nargs; i++) {
        kt_type t = o->types[i];
        PyObject *v;
        if (t == KT_TYPE_BUFFER && o->host) {
            v = ktpy_memory(args[i].ptr, args[i].bytes, o->access[i] != KT_READ_ONLY);
            if (v && PyList_Append(views, v) != 0) Py_CLEAR(v);
        } else if (t == KT_TYPE_BUFFER) {
            v = PyLong_FromVoidPtr(args[i].ptr);
        } else {
            v = ktpy_scalar(&args[i], t);
        }
        if (v == NULL) Py_CLEAR(tuple);
        else PyTuple_SetItem(tuple, (Py_ssize_t)at++, v);
    }
    PyObject *r = tuple ? PyObject_CallObject(c->fn, tuple) : NULL;
    int rc = -1;
    if (r == NULL) rc = exception_failure();
    else if (r == Py_None) rc = 0;
    else if (PyLong_Check(r)) rc = (int)PyLong_AsLong(r);
    else rc = 0;
    Py_XDECREF(r), Py_XDECREF(tuple);
    ktpy_release_views(views);
    PyErr_Clear();
    PyGILState_Release(g);
    return rc;
}

static int native_trampoline(const kt_arg *args, size_t nargs, void *user) { return call_candidate(user, args, nargs, NULL, false); }

static int queued_trampoline(const kt_arg *args, size_t nargs, kt_queue queue, void *user) {
    return call_candidate(user, args, nargs, queue, true);
}

PyObject *ktpy_op_add_candidate(PyObject *self, PyObject *args, PyObject *kwds) {
    OpObject *o = (OpObject *)self;
    static char *kwlist[] = {"name", "fn", "queued", "version", NULL};
    const char *name = NULL, *version = NULL;
    PyObject *fn = NULL;
    int queued = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "sO|pz:add_candidate", kwlist, &name, &fn, &queued, &version)) return NULL;
    if (!PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "add_candidate: fn must be callable");
        return NULL;
    }
    py_candidate *c = PyMem_Calloc(1, sizeof *c);
    PyObject *capsule = c ? PyCapsule_New(c, "kerntune.candidate", free_candidate) : NULL;
    if (capsule == NULL) {
        PyMem_Free(c);
        return PyErr_Occurred() ? NULL : PyErr_NoMemory();
    }
    c->op = o, c->fn = (Py_INCREF(fn), fn);
    if (PyList_Append(o->keep, capsule) != 0) {
        Py_DECREF(capsule);
        return NULL;
    }
    Py_DECREF(capsule);
    kt_status st = queued ? kt_op_add_native_queued(o->op, name, queued_trampoline, c) : kt_op_add_native(o->op, name, native_trampoline, c);
    if (st == KT_OK && version) st = kt_op_set_candidate_version(o->op, name, version);
    if (st != KT_OK) return ktpy_raise(st);
    Py_RETURN_NONE;
}
