/*
 * module.c - kerntune._kerntune, the C extension under the Python package (python/kerntune):
 * the module itself, kerntune.Error, the element types and the string helpers the other files
 * use (kt_python.h says which file holds what).
 *
 * The objects mirror the C library's: Context (kt_context) and Op (kt_op); decisions come back
 * as plain tuples that kerntune/__init__.py wraps. Errors raise kerntune.Error carrying
 * kerntune's status name and message. The interpreter's lock is released while kerntune tunes
 * or calls, and taken again by the callbacks that run Python code.
 */
#include "kt_python.h"

#include <stdio.h>
#include <string.h>

PyObject *ktpy_error;
PyObject *ktpy_context_type, *ktpy_op_type;

PyObject *ktpy_raise(kt_status st) {
    PyObject *exc = PyObject_CallFunction(ktpy_error, "s", kt_last_error());
    if (exc == NULL) return NULL;
    PyObject *name = PyUnicode_FromString(kt_status_name(st));
    if (name == NULL || PyObject_SetAttrString(exc, "status", name) != 0) {
        Py_XDECREF(name);
        Py_DECREF(exc);
        return NULL;
    }
    Py_DECREF(name);
    PyErr_SetObject(ktpy_error, exc);
    Py_DECREF(exc);
    return NULL;
}

/* (PyUnicode_AsUTF8AndSize is in the stable ABI only from 3.10.) */
const char *ktpy_utf8(PyObject *s, PyObject *keep) {
    PyObject *b = PyUnicode_Check(s) ? PyUnicode_AsUTF8String(s) : NULL;
    if (b == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "expected a string");
        return NULL;
    }
    if (PyList_Append(keep, b) != 0) {
        Py_DECREF(b);
        return NULL;
    }
    Py_DECREF(b); /* keep holds it */
    return PyBytes_AsString(b);
}

const char **ktpy_strings(PyObject *list, const char *what, size_t *n, PyObject *keep) {
    Py_ssize_t k = PySequence_Check(list) && !PyUnicode_Check(list) ? PySequence_Size(list) : -1;
    if (k < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: expected a list of strings", what);
        return NULL;
    }
    const char **out = PyMem_Calloc((size_t)k + 1, sizeof *out);
    if (out == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *item = PySequence_GetItem(list, i);
        out[i] = item ? ktpy_utf8(item, keep) : NULL;
        Py_XDECREF(item);
        if (out[i] == NULL) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "%s: item %zd is not a string", what, i);
            PyMem_Free(out);
            return NULL;
        }
    }
    *n = (size_t)k;
    return out;
}

void ktpy_keep_exception(PyObject **pending) {
    PyObject *type = NULL, *value = NULL, *tb = NULL;
    PyErr_Fetch(&type, &value, &tb);
    if (type == NULL) return;
    if (*pending != NULL) { /* the first one is the one raised */
        Py_XDECREF(type), Py_XDECREF(value), Py_XDECREF(tb);
        return;
    }
    PyErr_NormalizeException(&type, &value, &tb);
    if (value != NULL && tb != NULL) PyException_SetTraceback(value, tb);
    *pending = value;
    Py_XDECREF(type), Py_XDECREF(tb);
}

PyObject *ktpy_raise_pending(PyObject **pending) {
    PyObject *v = *pending;
    *pending = NULL;
    PyErr_SetObject((PyObject *)Py_TYPE(v), v);
    Py_DECREF(v);
    return NULL;
}

/* ---- element types ---------------------------------------------------------------------------- */

static const ktpy_type types[] = {
    {"int8", "|i1", KT_TYPE_I8, 0, 8},       {"int16", "<i2", KT_TYPE_I16, 0, 16},   {"int32", "<i4", KT_TYPE_I32, 0, 32},
    {"int64", "<i8", KT_TYPE_I64, 0, 64},    {"uint8", "|u1", KT_TYPE_U8, 1, 8},     {"uint16", "<u2", KT_TYPE_U16, 1, 16},
    {"uint32", "<u4", KT_TYPE_U32, 1, 32},   {"uint64", "<u8", KT_TYPE_U64, 1, 64},  {"float32", "<f4", KT_TYPE_F32, 2, 32},
    {"float64", "<f8", KT_TYPE_F64, 2, 64},  {"float16", "<f2", KT_TYPE_F16, 2, 16}, {"bfloat16", "<V2", KT_TYPE_BF16, 4, 16},
};
enum { NTYPES = sizeof types / sizeof types[0] };

const ktpy_type *ktpy_type_by_name(const char *name) {
    for (size_t i = 0; i < NTYPES; i++)
        if (strcmp(types[i].name, name) == 0) return &types[i];
    return NULL;
}

const ktpy_type *ktpy_type_by_kt(kt_type t) {
    for (size_t i = 0; i < NTYPES; i++)
        if (types[i].type == t) return &types[i];
    return NULL;
}

/* ---- the module ------------------------------------------------------------------------------- */

static PyObject *version(PyObject *self, PyObject *noargs) {
    (void)self, (void)noargs;
    return PyUnicode_FromString(kt_version_string());
}

static PyMethodDef module_methods[] = {
    {"version", version, METH_NOARGS, "version() -> the C library's version string"},
    {NULL, NULL, 0, NULL},
};

static int add_type(PyObject *m, PyType_Spec *spec, const char *name, PyObject **keep) {
    PyObject *t = PyType_FromSpec(spec);
    if (t == NULL) return -1;
    Py_INCREF(t);
    *keep = t;
    if (PyModule_AddObject(m, name, t) != 0) {
        Py_DECREF(t);
        return -1;
    }
    return 0;
}

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_kerntune", "kerntune's C library, for kerntune/__init__.py", -1,
                                       module_methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__kerntune(void) {
    PyObject *m = PyModule_Create(&moduledef);
    if (m == NULL) return NULL;
    ktpy_error = PyErr_NewException("kerntune.Error", PyExc_RuntimeError, NULL);
    if (ktpy_error == NULL || PyModule_AddObject(m, "Error", (Py_INCREF(ktpy_error), ktpy_error)) != 0 ||
        add_type(m, &ktpy_context_spec, "Context", &ktpy_context_type) != 0 || add_type(m, &ktpy_op_spec, "Op", &ktpy_op_type) != 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
