/*
 * module.c - kerntune._kerntune, the C extension under the Python package (python/kerntune).
 *
 * Written against CPython's stable ABI as of 3.9 (Py_LIMITED_API), so one build serves every
 * CPython from 3.9 on. That ABI has no buffer protocol before 3.11, so arrays are reached
 * through the `__array_interface__` that numpy (and libraries copying its convention) exposes,
 * and bytearray/bytes objects directly; nothing is copied. The GIL is released while kerntune
 * tunes or calls.
 *
 * The objects mirror the C library's: Context (kt_context), Op (kt_op: its arguments declared at
 * construction, variant groups added from source, called with the arguments in order) and the
 * decision of a key, returned as plain tuples that kerntune/__init__.py wraps. Errors raise
 * kerntune.Error carrying kerntune's status name and message.
 */
#define Py_LIMITED_API 0x03090000
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <kerntune.h>
#include <kerntune/decision.h>
#include <kerntune/device.h>
#include <kerntune/measure.h>
#include <kerntune/cache.h>
#include <kerntune/search.h>
#include <kerntune/variants.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static PyObject *Error; /* kerntune.Error */

/* Raises kerntune.Error for status st with kerntune's last message; returns NULL. */
static PyObject *raise_kt(kt_status st) {
    PyObject *exc = PyObject_CallFunction(Error, "s", kt_last_error());
    if (exc == NULL) return NULL;
    PyObject *name = PyUnicode_FromString(kt_status_name(st));
    if (name == NULL || PyObject_SetAttrString(exc, "status", name) != 0) {
        Py_XDECREF(name);
        Py_DECREF(exc);
        return NULL;
    }
    Py_DECREF(name);
    PyErr_SetObject(Error, exc);
    Py_DECREF(exc);
    return NULL;
}

/* A str as UTF-8: the bytes object that holds it goes into keep (a list), so that the pointer
 * lives as long as keep. (PyUnicode_AsUTF8AndSize is in the stable ABI only from 3.10.) */
static const char *utf8(PyObject *s, PyObject *keep) {
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

/* ---- element types ---------------------------------------------------------------------------- */

typedef struct type_name {
    const char *name;    /* as numpy names it */
    const char *typestr; /* __array_interface__'s typestr, little-endian */
    kt_type type;
} type_name;

static const type_name types[] = {
    {"int8", "|i1", KT_TYPE_I8},     {"int16", "<i2", KT_TYPE_I16},   {"int32", "<i4", KT_TYPE_I32},
    {"int64", "<i8", KT_TYPE_I64},   {"uint8", "|u1", KT_TYPE_U8},    {"uint16", "<u2", KT_TYPE_U16},
    {"uint32", "<u4", KT_TYPE_U32},  {"uint64", "<u8", KT_TYPE_U64},  {"float32", "<f4", KT_TYPE_F32},
    {"float64", "<f8", KT_TYPE_F64}, {"float16", "<f2", KT_TYPE_F16},
};
enum { NTYPES = sizeof types / sizeof types[0] };

static const type_name *type_by_name(const char *name) {
    for (size_t i = 0; i < NTYPES; i++)
        if (strcmp(types[i].name, name) == 0) return &types[i];
    return NULL;
}

static const type_name *type_by_kt(kt_type t) {
    for (size_t i = 0; i < NTYPES; i++)
        if (types[i].type == t) return &types[i];
    return NULL;
}

/* ---- Context ---------------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    kt_context *ctx;
} ContextObject;

static int Context_init(PyObject *self, PyObject *args, PyObject *kwds) {
    ContextObject *c = (ContextObject *)self;
    static char *kwlist[] = {"cache", "artifact_dir", NULL};
    const char *cache = NULL, *artifacts = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|zz:Context", kwlist, &cache, &artifacts)) return -1;
    if (c->ctx != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Context.__init__: already initialised");
        return -1;
    }
    kt_status st = kt_context_create(&c->ctx);
    if (st == KT_OK) st = kt_context_set_cache(c->ctx, cache);
    if (st == KT_OK && artifacts) st = kt_context_set_artifact_dir(c->ctx, artifacts);
    if (st != KT_OK) {
        raise_kt(st);
        kt_context_destroy(c->ctx);
        c->ctx = NULL;
        return -1;
    }
    return 0;
}

static void Context_dealloc(PyObject *self) {
    ContextObject *c = (ContextObject *)self;
    if (c->ctx) {
        Py_BEGIN_ALLOW_THREADS
        kt_context_destroy(c->ctx); /* waits for builds a tuning left running */
        Py_END_ALLOW_THREADS
    }
    PyTypeObject *tp = Py_TYPE(self);
    freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    tp_free(self);
    Py_DECREF(tp);
}

static PyObject *Context_devices(PyObject *self, PyObject *noargs) {
    (void)noargs;
    ContextObject *c = (ContextObject *)self;
    size_t n = kt_context_device_count(c->ctx);
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        const kt_device *dev = kt_context_device(c->ctx, i);
        PyObject *t = Py_BuildValue("(ss)", kt_device_backend(dev), kt_device_name(dev));
        if (t == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SetItem(list, (Py_ssize_t)i, t); /* steals */
    }
    return list;
}

static PyMethodDef Context_methods[] = {
    {"_devices", Context_devices, METH_NOARGS, "_devices() -> [(backend, name)], by index; see Context.devices"},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot Context_slots[] = {
    {Py_tp_doc, "Context(cache=None, artifact_dir=None): kerntune's state (kt_context).\n"
                "cache: the persistent cache's path, 'off', or None for the default (KERNTUNE_CACHE,\n"
                "else the user's cache directory); artifact_dir: where compiled variants go."},
    {Py_tp_init, Context_init},
    {Py_tp_dealloc, Context_dealloc},
    {Py_tp_methods, Context_methods},
    {0, NULL},
};

static PyType_Spec Context_spec = {"kerntune._kerntune.Context", sizeof(ContextObject), 0, Py_TPFLAGS_DEFAULT, Context_slots};
static PyObject *ContextType;

/* ---- Op --------------------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *context; /* the Context: the op must not outlive it */
    kt_op *op;
    size_t device;     /* 0: the host CPU, whose candidates take host memory; others are staged */
    size_t nargs;
    kt_type *types;    /* per argument: KT_TYPE_BUFFER, or the scalar's type */
    kt_type *elems;    /* per buffer: its element type */
    kt_access *access; /* per buffer */
} OpObject;

static void Op_clear(OpObject *o) {
    kt_op_destroy(o->op);
    o->op = NULL;
    PyMem_Free(o->types), PyMem_Free(o->elems), PyMem_Free(o->access);
    o->types = o->elems = NULL;
    o->access = NULL;
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
    const type_name *t = type_by_name(dtype);
    if (t == NULL) {
        PyErr_Format(PyExc_ValueError, "Op: argument %zu ('%s'): unknown dtype '%s' (known: int8 to int64, uint8 to uint64, "
                                       "float16, float32, float64)", i, name, dtype);
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
        raise_kt(st);
        return -1;
    }
    return 0;
}

static int Op_init(PyObject *self, PyObject *args, PyObject *kwds) {
    OpObject *o = (OpObject *)self;
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
    if (!PyObject_IsInstance(context, ContextType)) {
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
    o->nargs = (size_t)n;
    o->types = PyMem_Calloc(n ? (size_t)n : 1, sizeof *o->types);
    o->elems = PyMem_Calloc(n ? (size_t)n : 1, sizeof *o->elems);
    o->access = PyMem_Calloc(n ? (size_t)n : 1, sizeof *o->access);
    kt_status st = KT_OK;
    if (!o->types || !o->elems || !o->access) {
        PyErr_NoMemory();
        return -1;
    }
    Py_INCREF(context); /* from here on: the op must not outlive its context, even a failed one */
    o->context = context;
    st = kt_op_create(((ContextObject *)context)->ctx, name, &o->op);
    if (device < 0) {
        PyErr_SetString(PyExc_ValueError, "Op: device must be a device's index (Context.devices())");
        return -1;
    }
    o->device = (size_t)device;
    if (st == KT_OK && device != 0) st = kt_op_set_device(o->op, (size_t)device);
    if (st == KT_OK) st = kt_op_set_isolation(o->op, iso);
    if (st != KT_OK) {
        raise_kt(st);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *spec = PySequence_GetItem(arguments, i);
        int rc = spec ? declare(o, (size_t)i, spec) : -1;
        Py_XDECREF(spec);
        if (rc != 0) return -1;
    }
    return 0;
}

static void Op_dealloc(PyObject *self) {
    OpObject *o = (OpObject *)self;
    Op_clear(o);
    Py_XDECREF(o->context);
    PyTypeObject *tp = Py_TYPE(self);
    freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    tp_free(self);
    Py_DECREF(tp);
}

/* A sequence of strings into a NULL-terminated array of C strings (PyMem) that live as long as
 * keep; NULL with an exception on error. */
static const char **strings(PyObject *list, const char *what, size_t *n, PyObject *keep) {
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
        out[i] = item ? utf8(item, keep) : NULL;
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

/* The values of one parameter: a string (kerntune's expression language) or a sequence of ints. */
static kt_status add_param(kt_space *sp, const char *name, PyObject *value, PyObject *keep) {
    if (PyUnicode_Check(value)) {
        const char *v = utf8(value, keep);
        return v ? kt_space_add_param(sp, name, v) : KT_ERR_INVALID_ARGUMENT;
    }
    Py_ssize_t k = PySequence_Check(value) ? PySequence_Size(value) : -1;
    if (k < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "add_variants: parameter '%s': its values must be a string or a list of ints", name);
        return KT_ERR_INVALID_ARGUMENT;
    }
    int64_t *v = PyMem_Calloc(k ? (size_t)k : 1, sizeof *v);
    if (v == NULL) {
        PyErr_NoMemory();
        return KT_ERR_NO_MEMORY;
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *item = PySequence_GetItem(value, i);
        v[i] = item ? PyLong_AsLongLong(item) : -1;
        Py_XDECREF(item);
        if (v[i] == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "add_variants: parameter '%s': value %zd is not an int", name, i);
            PyMem_Free(v);
            return KT_ERR_INVALID_ARGUMENT;
        }
    }
    kt_status st = kt_space_add_param_ints(sp, name, v, (size_t)k);
    PyMem_Free(v);
    return st;
}

static PyObject *Op_add_variants(PyObject *self, PyObject *args, PyObject *kwds) {
    OpObject *o = (OpObject *)self;
    static char *kwlist[] = {"name",     "params", "source",        "kernel", "constraints", "options", "inputs",
                             "global_size", "grid", "block", "shared_memory", NULL};
    const char *name = NULL, *source = NULL, *kernel = NULL, *shared = NULL;
    PyObject *params = NULL, *constraints = NULL, *options = NULL, *inputs = NULL, *global = NULL, *grid = NULL, *block = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "sOss|OOOOOOz:add_variants", kwlist, &name, &params, &source, &kernel,
                                     &constraints, &options, &inputs, &global, &grid, &block, &shared))
        return NULL;
    if (global && global != Py_None && grid && grid != Py_None) {
        PyErr_SetString(PyExc_ValueError, "add_variants: global_size (work-items, as OpenCL counts) or grid (blocks, as CUDA "
                                          "counts), not both");
        return NULL;
    }
    if (!PyDict_Check(params)) {
        PyErr_SetString(PyExc_TypeError, "add_variants: params must be a dict of parameter name to its values (a string "
                                         "such as '[1, 2, 4]' or 'range(8)', or a list of ints)");
        return NULL;
    }
    PyObject *keep = PyList_New(0); /* the UTF-8 copies of the strings, until the end */
    if (keep == NULL) return NULL;
    kt_space *sp = NULL;
    size_t nc = 0, no = 0;
    const char **cons = NULL, **opts = NULL;
    bool raised = false;
    kt_status st = kt_space_create(&sp);
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (st == KT_OK && PyDict_Next(params, &pos, &key, &value)) {
        const char *pname = utf8(key, keep);
        st = pname ? add_param(sp, pname, value, keep) : KT_ERR_INVALID_ARGUMENT;
        raised = PyErr_Occurred() != NULL;
    }
    if (st == KT_OK && constraints && constraints != Py_None) {
        cons = strings(constraints, "add_variants: constraints", &nc, keep);
        if (cons == NULL) st = KT_ERR_INVALID_ARGUMENT, raised = true;
    }
    for (size_t i = 0; st == KT_OK && i < nc; i++) st = kt_space_add_constraint(sp, cons[i]);
    size_t ni = 0, ng = 0, nb = 0;
    const char **ins = NULL, **glob = NULL, **blk = NULL;
    if (st == KT_OK && inputs && inputs != Py_None) { /* op arguments the space reads (a scalar's value, a buffer's length) */
        ins = strings(inputs, "add_variants: inputs", &ni, keep);
        if (ins == NULL) st = KT_ERR_INVALID_ARGUMENT, raised = true;
    }
    for (size_t i = 0; st == KT_OK && i < ni; i++) st = kt_space_add_input(sp, ins[i]);
    PyObject *gl = global && global != Py_None ? global : grid && grid != Py_None ? grid : NULL;
    if (st == KT_OK && gl && ((glob = strings(gl, "add_variants: global_size or grid", &ng, keep)) == NULL || ng < 1 || ng > 3)) {
        if (glob) PyErr_SetString(PyExc_ValueError, "add_variants: global_size or grid: one to three expressions");
        st = KT_ERR_INVALID_ARGUMENT, raised = true;
    }
    if (st == KT_OK && block && block != Py_None &&
        ((blk = strings(block, "add_variants: block", &nb, keep)) == NULL || nb < 1 || nb > 3)) {
        if (blk) PyErr_SetString(PyExc_ValueError, "add_variants: block: one to three expressions");
        st = KT_ERR_INVALID_ARGUMENT, raised = true;
    }
    if (st == KT_OK && (gl || blk || shared)) {
        const char *g3[3] = {NULL, NULL, NULL}, *b3[3] = {NULL, NULL, NULL};
        for (size_t i = 0; i < ng; i++) g3[i] = glob[i];
        for (size_t i = 0; i < nb; i++) b3[i] = blk[i];
        st = kt_space_set_geometry(sp, global && global != Py_None ? KT_GEOMETRY_GLOBAL : KT_GEOMETRY_GRID, g3, b3, shared);
    }
    PyMem_Free(ins), PyMem_Free(glob), PyMem_Free(blk);
    if (st == KT_OK && options && options != Py_None) {
        opts = strings(options, "add_variants: options", &no, keep);
        if (opts == NULL) st = KT_ERR_INVALID_ARGUMENT, raised = true;
    }
    if (st == KT_OK) st = kt_op_add_variants(o->op, name, sp, source, kernel, opts, no);
    PyMem_Free(cons), PyMem_Free(opts);
    kt_space_destroy(sp); /* the op keeps its own reference */
    Py_DECREF(keep);
    if (raised) return NULL;
    if (st != KT_OK) return raise_kt(st);
    Py_RETURN_NONE;
}

/* The memory of one buffer argument: a numpy-style array (its __array_interface__: contiguous,
 * of the declared element type, writable unless the op only reads it), a bytearray, or bytes (read
 * only). Sets *ptr and *bytes; returns -1 with an exception set otherwise. */
static int buffer_of(const OpObject *o, size_t i, PyObject *obj, void **ptr, size_t *bytes) {
    const type_name *want = type_by_kt(o->elems[i]);
    bool writes = o->access[i] != KT_READ_ONLY;
    if (PyByteArray_Check(obj)) {
        *ptr = PyByteArray_AsString(obj);
        *bytes = (size_t)PyByteArray_Size(obj);
        return 0;
    }
    if (PyBytes_Check(obj)) {
        if (writes) {
            PyErr_Format(PyExc_TypeError, "argument %zu: bytes are read-only, and the op writes this buffer", i);
            return -1;
        }
        *ptr = PyBytes_AsString(obj);
        *bytes = (size_t)PyBytes_Size(obj);
        return 0;
    }
    PyObject *ai = PyObject_GetAttrString(obj, "__array_interface__");
    if (ai == NULL || !PyDict_Check(ai)) {
        Py_XDECREF(ai);
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "argument %zu: expected an array (with __array_interface__), a bytearray or bytes, got %s",
                     i, "another object");
        return -1;
    }
    int rc = -1;
    PyObject *data = PyDict_GetItemString(ai, "data"), *typestr = PyDict_GetItemString(ai, "typestr"),
             *shape = PyDict_GetItemString(ai, "shape"), *strides = PyDict_GetItemString(ai, "strides");
    char native[8]; /* the typestr in the native byte order's spelling, '=' */
    snprintf(native, sizeof native, "=%s", want->typestr + 1);
    if (data == NULL || !PyTuple_Check(data) || PyTuple_Size(data) != 2 || typestr == NULL || !PyUnicode_Check(typestr) ||
        shape == NULL || !PyTuple_Check(shape)) {
        PyErr_Format(PyExc_TypeError, "argument %zu: its __array_interface__ lacks data, typestr or shape", i);
    } else if (strides != NULL && strides != Py_None) {
        PyErr_Format(PyExc_ValueError, "argument %zu: the array is not contiguous (pass numpy.ascontiguousarray of it)", i);
    } else if (PyUnicode_CompareWithASCIIString(typestr, want->typestr) != 0 && PyUnicode_CompareWithASCIIString(typestr, native) != 0) {
        PyErr_Format(PyExc_TypeError, "argument %zu: an array of %R, but the op declares %s ('%s')", i, typestr, want->name,
                     want->typestr);
    } else if (writes && PyObject_IsTrue(PyTuple_GetItem(data, 1))) {
        PyErr_Format(PyExc_ValueError, "argument %zu: the array is read-only, and the op writes this buffer", i);
    } else {
        size_t count = 1;
        for (Py_ssize_t d = 0; d < PyTuple_Size(shape); d++) count *= (size_t)PyLong_AsSize_t(PyTuple_GetItem(shape, d));
        *ptr = PyLong_AsVoidPtr(PyTuple_GetItem(data, 0));
        *bytes = count * kt_type_size(o->elems[i]);
        rc = PyErr_Occurred() ? -1 : 0;
    }
    Py_DECREF(ai);
    return rc;
}

/* The call's arguments as kt_args (args: the Python arguments, one per declared one). */
static kt_arg *to_args(const OpObject *o, PyObject *args) {
    Py_ssize_t n = PyTuple_Size(args);
    if ((size_t)n != o->nargs) {
        PyErr_Format(PyExc_TypeError, "the op takes %zu arguments, %zd given", o->nargs, n);
        return NULL;
    }
    kt_arg *a = PyMem_Calloc(o->nargs ? o->nargs : 1, sizeof *a);
    if (a == NULL) return (kt_arg *)PyErr_NoMemory();
    for (size_t i = 0; i < o->nargs; i++) {
        PyObject *v = PyTuple_GetItem(args, (Py_ssize_t)i);
        kt_type t = o->types[i];
        if (t == KT_TYPE_BUFFER) {
            void *p = NULL;
            size_t bytes = 0;
            if (buffer_of(o, i, v, &p, &bytes) != 0) goto fail;
            a[i] = kt_arg_buf(p, bytes);
        } else if (t == KT_TYPE_F32 || t == KT_TYPE_F64) {
            double d = PyFloat_AsDouble(v);
            if (d == -1.0 && PyErr_Occurred()) goto fail;
            a[i] = t == KT_TYPE_F32 ? kt_arg_f32((float)d) : kt_arg_f64(d);
        } else if (t == KT_TYPE_I8 || t == KT_TYPE_I16 || t == KT_TYPE_I32 || t == KT_TYPE_I64) {
            long long x = PyLong_AsLongLong(v);
            if (x == -1 && PyErr_Occurred()) goto fail;
            a[i] = (kt_arg){.type = t, .i = x};
        } else if (t == KT_TYPE_U8 || t == KT_TYPE_U16 || t == KT_TYPE_U32 || t == KT_TYPE_U64) {
            unsigned long long x = PyLong_AsUnsignedLongLong(v);
            if (x == (unsigned long long)-1 && PyErr_Occurred()) goto fail;
            a[i] = (kt_arg){.type = t, .u = x};
        } else {
            PyErr_Format(PyExc_TypeError, "argument %zu: scalars of this type cannot be passed from Python", i);
            goto fail;
        }
    }
    return a;
fail:
    PyMem_Free(a);
    return NULL;
}

/* A call on a device other than the host CPU, whose buffers live in the device's memory: each
 * host array is copied to a device buffer first (unless the op only writes it) and back after
 * (unless the op only reads it). dev: room for the device's arguments. Runs without the GIL. */
static kt_status call_staged(OpObject *o, const kt_arg *a, kt_arg *dev) {
    kt_context *ctx = ((ContextObject *)o->context)->ctx;
    memcpy(dev, a, o->nargs * sizeof *a);
    kt_status st = KT_OK;
    size_t done = 0;
    for (; st == KT_OK && done < o->nargs; done++) {
        if (o->types[done] != KT_TYPE_BUFFER || a[done].bytes == 0) continue;
        st = kt_device_alloc(ctx, o->device, a[done].bytes, &dev[done].ptr);
        if (st != KT_OK) dev[done].ptr = NULL;
        if (st == KT_OK && o->access[done] != KT_WRITE_ONLY)
            st = kt_device_write(ctx, o->device, dev[done].ptr, a[done].ptr, a[done].bytes);
    }
    if (st == KT_OK) st = kt_op_call(o->op, dev, o->nargs);
    for (size_t i = 0; st == KT_OK && i < o->nargs; i++)
        if (o->types[i] == KT_TYPE_BUFFER && a[i].bytes > 0 && o->access[i] != KT_READ_ONLY)
            st = kt_device_read(ctx, o->device, a[i].ptr, dev[i].ptr, a[i].bytes);
    for (size_t i = 0; i < done; i++)
        if (o->types[i] == KT_TYPE_BUFFER && a[i].bytes > 0 && dev[i].ptr) kt_device_free(ctx, o->device, dev[i].ptr);
    return st;
}

static PyObject *Op_call(PyObject *self, PyObject *args, PyObject *kwds) {
    OpObject *o = (OpObject *)self;
    if (kwds && PyDict_Size(kwds) > 0) {
        PyErr_SetString(PyExc_TypeError, "the op takes its arguments by position");
        return NULL;
    }
    kt_arg *a = to_args(o, args);
    if (a == NULL) return NULL;
    kt_arg *dev = o->device == 0 ? NULL : PyMem_Calloc(o->nargs ? o->nargs : 1, sizeof *dev);
    if (o->device != 0 && dev == NULL) {
        PyMem_Free(a);
        return PyErr_NoMemory();
    }
    kt_status st;
    Py_BEGIN_ALLOW_THREADS /* the arguments' objects are held by args meanwhile */
    st = o->device == 0 ? kt_op_call(o->op, a, o->nargs) : call_staged(o, a, dev);
    Py_END_ALLOW_THREADS
    PyMem_Free(a), PyMem_Free(dev);
    if (st != KT_OK) return raise_kt(st);
    Py_RETURN_NONE;
}

/* decision(*args) -> (winner index or None, [(config, outcome, time_ns, runs, message), ...]) */
static PyObject *Op_decision(PyObject *self, PyObject *args) {
    OpObject *o = (OpObject *)self;
    kt_arg *a = to_args(o, args);
    if (a == NULL) return NULL;
    const kt_decision *d = NULL;
    kt_status st = kt_op_decision(o->op, a, o->nargs, &d);
    PyMem_Free(a);
    if (st != KT_OK && !(st == KT_ERR_ALL_FAILED && d != NULL)) return raise_kt(st);
    size_t n = kt_decision_unit_count(d), w = kt_decision_winner_unit(d);
    PyObject *units = PyList_New((Py_ssize_t)n);
    for (size_t u = 0; units && u < n; u++) {
        const char *config = kt_decision_unit_config(d, u), *msg = kt_decision_unit_message(d, u);
        PyObject *t = Py_BuildValue("(ssdIs)", config ? config : "", kt_outcome_name(kt_decision_unit_outcome(d, u)),
                                    kt_decision_unit_time_ns(d, u), kt_decision_unit_runs(d, u), msg ? msg : "");
        if (t == NULL) {
            Py_DECREF(units);
            return NULL;
        }
        PyList_SetItem(units, (Py_ssize_t)u, t);
    }
    if (units == NULL) return NULL;
    PyObject *winner = st == KT_OK && w < n ? PyLong_FromSize_t(w) : (Py_INCREF(Py_None), Py_None); /* none: all failed */
    return Py_BuildValue("(NN)", winner, units);
}

static PyObject *Op_set_budget(PyObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"units", "seconds", NULL};
    Py_ssize_t units = 0;
    double seconds = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|nd:set_budget", kwlist, &units, &seconds)) return NULL;
    if (units < 0) {
        PyErr_SetString(PyExc_ValueError, "set_budget: units must be 0 (no limit) or more");
        return NULL;
    }
    kt_status st = kt_op_set_budget(((OpObject *)self)->op, (size_t)units, seconds);
    if (st != KT_OK) return raise_kt(st);
    Py_RETURN_NONE;
}

static PyObject *Op_set_search(PyObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"strategy", "seed", NULL};
    const char *strategy = NULL;
    unsigned long long seed = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "s|K:set_search", kwlist, &strategy, &seed)) return NULL;
    kt_status st = kt_op_set_search(((OpObject *)self)->op, strategy, seed);
    if (st != KT_OK) return raise_kt(st);
    Py_RETURN_NONE;
}

static PyMethodDef Op_methods[] = {
    {"add_variants", (PyCFunction)(void (*)(void))Op_add_variants, METH_VARARGS | METH_KEYWORDS,
     "add_variants(name, params, source, kernel, constraints=None, options=None): a group of candidates, one per\n"
     "configuration of params (a dict: name -> values, as a string in kerntune's expression language or a list\n"
     "of ints), compiled from source by the device's backend with the configuration as defines"},
    {"_decision", Op_decision, METH_VARARGS, "_decision(*args): (winner index or None, units as tuples); see Op.decision"},
    {"set_budget", (PyCFunction)(void (*)(void))Op_set_budget, METH_VARARGS | METH_KEYWORDS,
     "set_budget(units=0, seconds=0.0): stop a tuning after so many configurations or seconds (0: no limit)"},
    {"set_search", (PyCFunction)(void (*)(void))Op_set_search, METH_VARARGS | METH_KEYWORDS,
     "set_search(strategy, seed=0): which configurations a budget tries (see kerntune tune --help)"},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot Op_slots[] = {
    {Py_tp_doc, "Op(context, name, arguments, device=0, isolation='auto'): a tunable operation (kt_op).\n"
                "arguments: one declaration per argument, in order: (name, dtype) for a scalar,\n"
                "(name, dtype, access) for a buffer, access 'r', 'w' or 'rw'. isolation: where candidates\n"
                "run while tuning: 'on', a worker process (a crash disqualifies the candidate and nothing\n"
                "else); 'auto', a worker for backends whose faults poison the device (CUDA); 'off', this\n"
                "process. Calling the op with its arguments tunes on a new key, then runs the winner."},
    {Py_tp_init, Op_init},
    {Py_tp_dealloc, Op_dealloc},
    {Py_tp_call, Op_call},
    {Py_tp_methods, Op_methods},
    {0, NULL},
};

static PyType_Spec Op_spec = {"kerntune._kerntune.Op", sizeof(OpObject), 0, Py_TPFLAGS_DEFAULT, Op_slots};

/* ---- the module ------------------------------------------------------------------------------- */

static int add_type(PyObject *m, PyType_Spec *spec, const char *name, PyObject **keep) {
    PyObject *t = PyType_FromSpec(spec);
    if (t == NULL) return -1;
    if (keep) {
        Py_INCREF(t);
        *keep = t;
    }
    if (PyModule_AddObject(m, name, t) != 0) {
        Py_DECREF(t);
        return -1;
    }
    return 0;
}

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_kerntune", "kerntune's C library, for kerntune/__init__.py", -1, NULL,
                                       NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__kerntune(void) {
    PyObject *m = PyModule_Create(&moduledef);
    if (m == NULL) return NULL;
    Error = PyErr_NewException("kerntune.Error", PyExc_RuntimeError, NULL);
    if (Error == NULL || PyModule_AddObject(m, "Error", (Py_INCREF(Error), Error)) != 0 ||
        add_type(m, &Context_spec, "Context", &ContextType) != 0 || add_type(m, &Op_spec, "Op", NULL) != 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
