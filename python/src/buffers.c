/*
 * buffers.c - a call's arguments from Python objects.
 *
 * A buffer argument is, in the order tried:
 *   - a bytearray, or bytes for a buffer the op only reads (host memory);
 *   - an object with __cuda_array_interface__ (CuPy arrays, torch CUDA tensors, Numba's): CUDA
 *     device memory, for an op on a CUDA device;
 *   - an object with numpy's __array_interface__ (numpy arrays): host memory;
 *   - an object with __dlpack__ (DLPack: torch tensors, JAX arrays, ...), on the CPU or a CUDA
 *     device; the capsule is held for the call and released after it (its producer frees it).
 * Each must be C-contiguous, of the declared element type, and writable when the op writes it.
 * Nothing is copied, except host memory for an op on another device (OpenCL, CUDA): that is
 * copied to a device buffer before the call (unless the op only writes it) and back after (unless
 * the op only reads it, or the call only tunes). The stable ABI of 3.9 has no buffer protocol,
 * which is why numpy arrays are read through their __array_interface__.
 */
#include "kt_python.h"

#include <kerntune/backend.h> /* kt_device_language */
#include <kerntune/device.h>

#include <stdint.h>
#include <string.h>

/* DLPack's structures (dlpack.h, version 0.x: the legacy "dltensor" capsule that __dlpack__()
 * returns when asked with no max_version). */
typedef struct {
    int32_t device_type; /* 1: CPU, 2: CUDA, 3: CUDA host (pinned) */
    int32_t device_id;
} dl_device;
typedef struct {
    uint8_t code; /* 0 int, 1 uint, 2 float, 4 bfloat */
    uint8_t bits;
    uint16_t lanes;
} dl_dtype;
typedef struct {
    void *data;
    dl_device device;
    int32_t ndim;
    dl_dtype dtype;
    int64_t *shape;
    int64_t *strides; /* NULL: compact, row-major */
    uint64_t byte_offset;
} dl_tensor;
typedef struct dl_managed {
    dl_tensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct dl_managed *self);
} dl_managed;

enum { DL_CPU = 1, DL_CUDA = 2, DL_CUDA_HOST = 3 };

static bool op_is_cuda(const OpObject *o) {
    const char *lang = kt_device_language(kt_context_device(((ContextObject *)o->context)->ctx, o->device));
    return lang != NULL && strcmp(lang, "CUDA") == 0;
}

/* Where a buffer's memory is. */
typedef enum { MEM_HOST, MEM_CUDA } mem_kind;

/* An __array_interface__ or __cuda_array_interface__ dict: its data, checked against the declared
 * type, contiguity and writability. */
static int from_interface(const OpObject *o, size_t i, PyObject *ai, const char *which, void **ptr, size_t *bytes) {
    const ktpy_type *want = ktpy_type_by_kt(o->elems[i]);
    bool writes = o->access[i] != KT_READ_ONLY;
    PyObject *data = PyDict_GetItemString(ai, "data"), *typestr = PyDict_GetItemString(ai, "typestr"),
             *shape = PyDict_GetItemString(ai, "shape"), *strides = PyDict_GetItemString(ai, "strides");
    char native[8]; /* the typestr in the native byte order's spelling, '=' */
    snprintf(native, sizeof native, "=%s", want->typestr + 1);
    if (data == NULL || !PyTuple_Check(data) || PyTuple_Size(data) != 2 || typestr == NULL || !PyUnicode_Check(typestr) ||
        shape == NULL || !PyTuple_Check(shape)) {
        PyErr_Format(PyExc_TypeError, "argument %zu: its %s lacks data, typestr or shape", i, which);
        return -1;
    }
    size_t count = 1;
    for (Py_ssize_t d = 0; d < PyTuple_Size(shape); d++) count *= (size_t)PyLong_AsSize_t(PyTuple_GetItem(shape, d));
    if (PyErr_Occurred()) return -1;
    if (strides != NULL && strides != Py_None) { /* contiguous all the same when they are C order's */
        size_t expect = kt_type_size(o->elems[i]);
        bool c_order = PyTuple_Check(strides) && PyTuple_Size(strides) == PyTuple_Size(shape);
        for (Py_ssize_t d = PyTuple_Size(shape) - 1; c_order && d >= 0; d--) {
            size_t extent = PyLong_AsSize_t(PyTuple_GetItem(shape, d));
            if (extent > 1 && PyLong_AsSsize_t(PyTuple_GetItem(strides, d)) != (Py_ssize_t)expect) c_order = false;
            expect *= extent;
        }
        if (PyErr_Occurred()) return -1;
        if (!c_order) {
            PyErr_Format(PyExc_ValueError, "argument %zu: the array is not contiguous (pass a C-contiguous copy of it: numpy.ascontiguousarray)", i);
            return -1;
        }
    }
    if (PyUnicode_CompareWithASCIIString(typestr, want->typestr) != 0 && PyUnicode_CompareWithASCIIString(typestr, native) != 0) {
        PyErr_Format(PyExc_TypeError, "argument %zu: an array of %R, but the op declares %s ('%s')", i, typestr, want->name,
                     want->typestr);
        return -1;
    }
    if (writes && PyObject_IsTrue(PyTuple_GetItem(data, 1))) {
        PyErr_Format(PyExc_ValueError, "argument %zu: the array is read-only, and the op writes this buffer", i);
        return -1;
    }
    *ptr = PyLong_AsVoidPtr(PyTuple_GetItem(data, 0));
    *bytes = count * kt_type_size(o->elems[i]);
    return PyErr_Occurred() ? -1 : 0;
}

/* An object's __dlpack__(): its tensor, the capsule kept in hold for the call. */
static int from_dlpack(const OpObject *o, size_t i, PyObject *obj, PyObject *hold, void **ptr, size_t *bytes, mem_kind *kind) {
    const ktpy_type *want = ktpy_type_by_kt(o->elems[i]);
    PyObject *cap = PyObject_CallMethod(obj, "__dlpack__", NULL);
    if (cap == NULL) return -1;
    dl_managed *m = PyCapsule_IsValid(cap, "dltensor") ? PyCapsule_GetPointer(cap, "dltensor") : NULL;
    if (m == NULL || PyList_Append(hold, cap) != 0) {
        Py_DECREF(cap);
        if (!PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "argument %zu: __dlpack__ gave no 'dltensor' capsule", i);
        return -1;
    }
    Py_DECREF(cap); /* hold keeps it: released after the call, which has the producer free the tensor's view */
    const dl_tensor *t = &m->dl_tensor;
    size_t count = 1, expect = 1;
    bool compact = true;
    for (int32_t d = t->ndim - 1; d >= 0; d--) {
        if (t->strides && t->shape[d] > 1 && t->strides[d] != (int64_t)expect) compact = false;
        expect *= (size_t)t->shape[d];
        count *= (size_t)t->shape[d];
    }
    if (t->dtype.code != want->dl_code || t->dtype.bits != want->dl_bits || t->dtype.lanes != 1) {
        PyErr_Format(PyExc_TypeError, "argument %zu: a DLPack tensor of type code %d, %d bits, but the op declares %s", i,
                     (int)t->dtype.code, (int)t->dtype.bits, want->name);
        return -1;
    }
    if (!compact) {
        PyErr_Format(PyExc_ValueError, "argument %zu: the tensor is not contiguous (pass a contiguous copy of it)", i);
        return -1;
    }
    if (t->device.device_type == DL_CPU || t->device.device_type == DL_CUDA_HOST) *kind = MEM_HOST;
    else if (t->device.device_type == DL_CUDA) *kind = MEM_CUDA;
    else {
        PyErr_Format(PyExc_TypeError, "argument %zu: a DLPack tensor on a device of type %d (kerntune takes the CPU's and CUDA's)", i,
                     (int)t->device.device_type);
        return -1;
    }
    *ptr = (char *)t->data + t->byte_offset;
    *bytes = count * kt_type_size(o->elems[i]);
    return 0;
}

/* The memory of buffer argument i. */
static int buffer_of(const OpObject *o, size_t i, PyObject *obj, PyObject *hold, void **ptr, size_t *bytes, mem_kind *kind) {
    bool writes = o->access[i] != KT_READ_ONLY;
    *kind = MEM_HOST;
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
    PyObject *ai = PyObject_GetAttrString(obj, "__cuda_array_interface__");
    if (ai != NULL && PyDict_Check(ai)) {
        *kind = MEM_CUDA;
        int rc = from_interface(o, i, ai, "__cuda_array_interface__", ptr, bytes);
        Py_DECREF(ai);
        return rc;
    }
    Py_XDECREF(ai);
    PyErr_Clear();
    ai = PyObject_GetAttrString(obj, "__array_interface__");
    if (ai != NULL && PyDict_Check(ai)) {
        int rc = from_interface(o, i, ai, "__array_interface__", ptr, bytes);
        Py_DECREF(ai);
        return rc;
    }
    Py_XDECREF(ai);
    PyErr_Clear();
    if (PyObject_HasAttrString(obj, "__dlpack__")) return from_dlpack(o, i, obj, hold, ptr, bytes, kind);
    PyErr_Format(PyExc_TypeError, "argument %zu: expected an array (numpy's __array_interface__, __cuda_array_interface__ or "
                                  "__dlpack__), a bytearray or bytes, got %s", i, Py_TYPE(obj) == NULL ? "?" : "another object");
    return -1;
}

static int scalar_of(const OpObject *o, size_t i, PyObject *v, kt_arg *out) {
    kt_type t = o->types[i];
    if (t == KT_TYPE_F32 || t == KT_TYPE_F64) {
        double d = PyFloat_AsDouble(v);
        if (d == -1.0 && PyErr_Occurred()) return -1;
        *out = t == KT_TYPE_F32 ? kt_arg_f32((float)d) : kt_arg_f64(d);
    } else if (t == KT_TYPE_I8 || t == KT_TYPE_I16 || t == KT_TYPE_I32 || t == KT_TYPE_I64) {
        PyObject *n = PyNumber_Index(v); /* numpy's integers too */
        long long x = n ? PyLong_AsLongLong(n) : -1;
        Py_XDECREF(n);
        if (x == -1 && PyErr_Occurred()) return -1;
        *out = (kt_arg){.type = t, .i = x};
    } else if (t == KT_TYPE_U8 || t == KT_TYPE_U16 || t == KT_TYPE_U32 || t == KT_TYPE_U64) {
        PyObject *n = PyNumber_Index(v);
        unsigned long long x = n ? PyLong_AsUnsignedLongLong(n) : (unsigned long long)-1;
        Py_XDECREF(n);
        if (x == (unsigned long long)-1 && PyErr_Occurred()) return -1;
        *out = (kt_arg){.type = t, .u = x};
    } else {
        PyErr_Format(PyExc_TypeError, "argument %zu: scalars of this type cannot be passed from Python", i);
        return -1;
    }
    return 0;
}

void ktpy_args_free(ktpy_args *a) {
    PyMem_Free(a->a), PyMem_Free(a->staged), PyMem_Free(a->host);
    Py_XDECREF(a->hold);
    memset(a, 0, sizeof *a);
}

int ktpy_args_make(OpObject *o, PyObject *args, ktpy_args *a) {
    memset(a, 0, sizeof *a);
    Py_ssize_t n = PyTuple_Size(args);
    if ((size_t)n != o->nargs) {
        PyErr_Format(PyExc_TypeError, "the op takes %zu arguments, %zd given", o->nargs, n);
        return -1;
    }
    size_t k = o->nargs ? o->nargs : 1;
    a->a = PyMem_Calloc(k, sizeof *a->a);
    a->staged = PyMem_Calloc(k, sizeof *a->staged);
    a->host = PyMem_Calloc(k, sizeof *a->host);
    a->hold = PyList_New(0);
    if (!a->a || !a->staged || !a->host || !a->hold) {
        ktpy_args_free(a);
        PyErr_NoMemory();
        return -1;
    }
    bool cuda = op_is_cuda(o);
    kt_context *ctx = ((ContextObject *)o->context)->ctx;
    for (size_t i = 0; i < o->nargs; i++) {
        PyObject *v = PyTuple_GetItem(args, (Py_ssize_t)i);
        if (o->types[i] != KT_TYPE_BUFFER) {
            if (scalar_of(o, i, v, &a->a[i]) != 0) goto fail;
            continue;
        }
        void *p = NULL;
        size_t bytes = 0;
        mem_kind kind;
        if (buffer_of(o, i, v, a->hold, &p, &bytes, &kind) != 0) goto fail;
        if (kind == MEM_CUDA && !cuda) {
            PyErr_Format(PyExc_TypeError, "argument %zu: CUDA device memory, but the op's device is not a CUDA device", i);
            goto fail;
        }
        a->a[i] = kt_arg_buf(p, bytes);
        if (kind == MEM_HOST && !o->host && bytes > 0) { /* to the op's device, as kerntune's own buffer */
            kt_status st = kt_device_alloc(ctx, o->device, bytes, &a->staged[i]);
            if (st == KT_OK && o->access[i] != KT_WRITE_ONLY) st = kt_device_write(ctx, o->device, a->staged[i], p, bytes);
            if (st != KT_OK) {
                ktpy_raise(st);
                goto fail;
            }
            a->host[i] = p;
            a->a[i].ptr = a->staged[i];
        }
    }
    return 0;
fail:
    ktpy_args_unstage(o, a, false);
    ktpy_args_free(a);
    return -1;
}

kt_status ktpy_args_unstage(OpObject *o, ktpy_args *a, bool back) {
    kt_context *ctx = ((ContextObject *)o->context)->ctx;
    kt_status st = KT_OK;
    for (size_t i = 0; a->staged && i < o->nargs; i++) {
        if (a->staged[i] == NULL) continue;
        if (back && st == KT_OK && o->access[i] != KT_READ_ONLY) st = kt_device_read(ctx, o->device, a->host[i], a->staged[i], a->a[i].bytes);
        kt_device_free(ctx, o->device, a->staged[i]);
        a->staged[i] = NULL;
    }
    return st;
}

/* PyMemoryView_FromMemory's flags, which the limited API of 3.9 uses without naming them (the
 * buffer protocol's header is not part of it before 3.11). */
#ifndef PyBUF_READ
#define PyBUF_READ 0x100
#define PyBUF_WRITE 0x200
#endif

void ktpy_release_views(PyObject *views) {
    for (Py_ssize_t i = 0; views && i < PyList_Size(views); i++) {
        PyObject *done = PyObject_CallMethod(PyList_GetItem(views, i), "release", NULL);
        Py_XDECREF(done);
    }
    Py_XDECREF(views);
}

PyObject *ktpy_scalar(const kt_arg *a, kt_type t) {
    if (t == KT_TYPE_F32) return PyFloat_FromDouble(a->f32);
    if (t == KT_TYPE_F64) return PyFloat_FromDouble(a->f64);
    if (t == KT_TYPE_U8 || t == KT_TYPE_U16 || t == KT_TYPE_U32 || t == KT_TYPE_U64) return PyLong_FromUnsignedLongLong(a->u);
    return PyLong_FromLongLong(a->i);
}

PyObject *ktpy_memory(void *ptr, size_t bytes, bool writable) {
    static char empty;
    return PyMemoryView_FromMemory(ptr ? (char *)ptr : &empty, (Py_ssize_t)bytes, writable ? PyBUF_WRITE : PyBUF_READ);
}
