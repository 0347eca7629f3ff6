/*
 * verify.c - validation from Python: arrays holding the expected outputs as the op's reference
 * (Op.set_answer: kt_op_set_reference_fn writing their bytes into the outputs), and a Python
 * callable that decides whether a candidate's outputs are correct (Op.set_verify:
 * kt_op_set_verify_fn). kerntune.tune_kernel builds Kernel Tuner's `answer`, `atol` and `verify`
 * from these.
 */
#include "kt_python.h"

#include <kerntune/device.h>
#include <kerntune/validation.h>

#include <stdio.h>
#include <string.h>

typedef struct ktpy_answer {
    kt_context *ctx;
    size_t device;
    bool host;
    size_t n;
    size_t arg[64];
    const void *data[64];
    size_t bytes[64];
} ktpy_answer;

void ktpy_answer_free(ktpy_answer *a) { PyMem_Free(a); }

/* The reference: each answer's bytes into its output (the arrays are alive: the op keeps them). */
static int write_answer(const kt_arg *args, size_t nargs, void *user, kt_result *result) {
    (void)nargs, (void)result;
    const ktpy_answer *a = user;
    for (size_t i = 0; i < a->n; i++) {
        const kt_arg *out = &args[a->arg[i]];
        if (out->bytes != a->bytes[i]) return 1;
        if (a->host) memcpy(out->ptr, a->data[i], a->bytes[i]);
        else if (kt_device_write(a->ctx, a->device, out->ptr, a->data[i], a->bytes[i]) != KT_OK) return 2;
    }
    return 0;
}

/* set_answer({arg: array}): host arrays (numpy's __array_interface__, bytes or bytearray) of
 * exactly the bytes each output argument holds after a correct call. */
PyObject *ktpy_op_set_answer(PyObject *self, PyObject *args) {
    OpObject *o = (OpObject *)self;
    PyObject *answers = NULL;
    if (!PyArg_ParseTuple(args, "O!:set_answer", &PyDict_Type, &answers)) return NULL;
    if (PyDict_Size(answers) > 64) {
        PyErr_SetString(PyExc_ValueError, "set_answer: at most 64 outputs");
        return NULL;
    }
    ktpy_answer *a = PyMem_Calloc(1, sizeof *a);
    if (a == NULL) return PyErr_NoMemory();
    a->ctx = ((ContextObject *)o->context)->ctx;
    a->device = o->device;
    a->host = o->host;
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(answers, &pos, &key, &value)) {
        Py_ssize_t i = PyLong_AsSsize_t(key);
        if (i < 0 || (size_t)i >= o->nargs || o->types[i] != KT_TYPE_BUFFER || o->access[i] == KT_READ_ONLY) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "set_answer: %zd is not the index of an output buffer (WriteOnly or ReadWrite)", i);
            PyMem_Free(a);
            return NULL;
        }
        PyObject *ai = PyObject_GetAttrString(value, "__array_interface__");
        PyObject *data = ai && PyDict_Check(ai) ? PyDict_GetItemString(ai, "data") : NULL;
        PyObject *shape = ai && PyDict_Check(ai) ? PyDict_GetItemString(ai, "shape") : NULL;
        PyObject *strides = ai && PyDict_Check(ai) ? PyDict_GetItemString(ai, "strides") : NULL;
        if (data == NULL || !PyTuple_Check(data) || shape == NULL || !PyTuple_Check(shape) || (strides && strides != Py_None)) {
            Py_XDECREF(ai);
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "set_answer: the answer for argument %zd must be a C-contiguous numpy array", i);
            PyMem_Free(a);
            return NULL;
        }
        size_t count = 1;
        for (Py_ssize_t d = 0; d < PyTuple_Size(shape); d++) count *= PyLong_AsSize_t(PyTuple_GetItem(shape, d));
        a->arg[a->n] = (size_t)i;
        a->data[a->n] = PyLong_AsVoidPtr(PyTuple_GetItem(data, 0));
        a->bytes[a->n] = count * kt_type_size(o->elems[i]);
        a->n++;
        Py_DECREF(ai);
        if (PyErr_Occurred() || PyList_Append(o->keep, value) != 0) {
            PyMem_Free(a);
            return NULL;
        }
    }
    kt_status st = kt_op_set_reference_fn(o->op, write_answer, a);
    if (st != KT_OK) {
        PyMem_Free(a);
        return ktpy_raise(st);
    }
    ktpy_answer_free(o->answer);
    o->answer = a;
    Py_RETURN_NONE;
}

/* The arguments of one side for the verify callable: output buffers as memoryviews of their
 * host bytes, scalars as numbers, ReadOnly buffers as None. views collects the memoryviews (to
 * release once the callable returns: a reference it kept then fails instead of reading freed
 * memory). */
static PyObject *side(const OpObject *o, const kt_arg *args, size_t nargs, PyObject *views) {
    PyObject *list = PyList_New((Py_ssize_t)nargs);
    for (size_t i = 0; list && i < nargs; i++) {
        PyObject *v;
        kt_type t = o->types[i];
        if (t == KT_TYPE_BUFFER) {
            v = args[i].ptr ? ktpy_memory(args[i].ptr, args[i].bytes, false) : (Py_INCREF(Py_None), Py_None);
            if (v && v != Py_None && PyList_Append(views, v) != 0) Py_CLEAR(v);
        } else {
            v = ktpy_scalar(&args[i], t);
        }
        if (v == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SetItem(list, (Py_ssize_t)i, v);
    }
    return list;
}

/* The verify trampoline: fn(expected, actual) with the interpreter's lock; true means correct,
 * false or a string (the diagnostic) wrong; an exception is wrong too, and is raised by the call
 * that tuned once the tuning ends. */
static int call_verify(const kt_arg *expected, const kt_arg *actual, size_t nargs, void *user, char *msg, size_t len) {
    OpObject *o = user;
    PyGILState_STATE g = PyGILState_Ensure();
    int ok = 0;
    PyObject *views = PyList_New(0), *e = views ? side(o, expected, nargs, views) : NULL, *a = e ? side(o, actual, nargs, views) : NULL;
    PyObject *r = a ? PyObject_CallFunctionObjArgs(o->verify, e, a, NULL) : NULL;
    if (r == NULL) {
        PyObject *type = NULL, *value = NULL, *tb = NULL;
        PyErr_Fetch(&type, &value, &tb);
        PyObject *text = value ? PyObject_Str(value) : NULL;
        PyObject *utf = text ? PyUnicode_AsUTF8String(text) : NULL;
        PyObject *tname = type ? PyObject_GetAttrString(type, "__name__") : NULL;
        PyObject *tutf = tname ? PyUnicode_AsUTF8String(tname) : NULL;
        snprintf(msg, len, "the verify function raised %s: %s", tutf ? PyBytes_AsString(tutf) : "an exception",
                 utf ? PyBytes_AsString(utf) : "");
        Py_XDECREF(text), Py_XDECREF(utf), Py_XDECREF(tname), Py_XDECREF(tutf);
        PyErr_Clear();
        PyErr_Restore(type, value, tb);
        ktpy_keep_exception(&o->pending);
    } else if (PyUnicode_Check(r)) {
        PyObject *utf = PyUnicode_AsUTF8String(r);
        snprintf(msg, len, "%s", utf ? PyBytes_AsString(utf) : "the verify function refused its outputs");
        Py_XDECREF(utf);
    } else {
        ok = PyObject_IsTrue(r) == 1;
    }
    Py_XDECREF(r), Py_XDECREF(a), Py_XDECREF(e);
    ktpy_release_views(views);
    PyErr_Clear();
    PyGILState_Release(g);
    return ok;
}

PyObject *ktpy_op_set_verify(PyObject *self, PyObject *args) {
    OpObject *o = (OpObject *)self;
    PyObject *fn = NULL;
    if (!PyArg_ParseTuple(args, "O:set_verify", &fn)) return NULL;
    if (fn != Py_None && !PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "set_verify: expected a callable fn(expected, actual) or None");
        return NULL;
    }
    kt_status st = kt_op_set_verify_fn(o->op, fn == Py_None ? NULL : call_verify, o);
    if (st != KT_OK) return ktpy_raise(st);
    Py_XDECREF(o->verify);
    o->verify = fn == Py_None ? NULL : (Py_INCREF(fn), fn);
    Py_RETURN_NONE;
}
