/*
 * kt_python.h - what the files of kerntune._kerntune share: the objects (Context, Op), the
 * element types, errors, strings, and the buffers a call passes.
 *
 * The extension is written against CPython's stable ABI as of 3.9 (Py_LIMITED_API), so one
 * build serves every CPython from 3.9 on. Files by concern:
 *   module.c    the module, kerntune.Error, the element types, strings
 *   context.c   Context: devices, measurement settings, the unit callback, the cache and wisdom
 *   op.c        Op: arguments, settings, calls, tuning without a call, decisions
 *   variants.c  candidates: variant groups from source (constraints in Python too), Python
 *               callables as native candidates (on the host, or enqueuing on a device's queue)
 *   buffers.c   a call's arguments: numpy arrays and the buffer types, __cuda_array_interface__,
 *               DLPack, and staging host arrays to a device
 *   verify.c    validation from Python: an answer's arrays as the reference, a verify callable
 */
#ifndef KT_PYTHON_H
#define KT_PYTHON_H

#define Py_LIMITED_API 0x03090000
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <kerntune.h>

#include <stdbool.h>
#include <stddef.h>

/* ---- module.c ---------------------------------------------------------------------------------- */

extern PyObject *ktpy_error;   /* kerntune.Error */
extern PyObject *ktpy_context_type, *ktpy_op_type;

/* Raises kerntune.Error for status st with kerntune's last message; returns NULL. */
PyObject *ktpy_raise(kt_status st);

/* A str as UTF-8, its bytes kept alive in keep (a list) as long as keep; NULL with an exception. */
const char *ktpy_utf8(PyObject *s, PyObject *keep);

/* A sequence of strings into a NULL-terminated array (PyMem) whose strings live as long as keep;
 * NULL with an exception. */
const char **ktpy_strings(PyObject *list, const char *what, size_t *n, PyObject *keep);

typedef struct ktpy_type {
    const char *name;    /* as numpy names it */
    const char *typestr; /* __array_interface__'s typestr, little-endian */
    kt_type type;
    unsigned char dl_code, dl_bits; /* DLPack's type code (0 int, 1 uint, 2 float) and bits */
} ktpy_type;

const ktpy_type *ktpy_type_by_name(const char *name);
const ktpy_type *ktpy_type_by_kt(kt_type t);

/* In a kerntune callback (any thread, the interpreter's lock taken with PyGILState_Ensure):
 * keeps the exception being raised in *pending when none is kept yet (the call or tuning that
 * ran the callback raises it), and clears it. */
void ktpy_keep_exception(PyObject **pending);

/* Raises the pending exception (and clears *pending); returns NULL. */
PyObject *ktpy_raise_pending(PyObject **pending);

/* ---- context.c --------------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    kt_context *ctx;
    PyObject *unit_fn;  /* Context.set_unit_fn's callable, or NULL */
    PyObject *pending;  /* an exception a callback raised, for the call that ran it to raise */
} ContextObject;

extern PyType_Spec ktpy_context_spec;

/* ---- op.c -------------------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *context;  /* the Context: the op must not outlive it */
    kt_op *op;
    size_t device;      /* the op's device (an index of Context.devices()) */
    bool host;          /* its buffers are host memory (the C backend's device) */
    size_t nargs;
    kt_type *types;     /* per argument: KT_TYPE_BUFFER, or the scalar's type */
    kt_type *elems;     /* per buffer: its element type */
    kt_access *access;  /* per buffer */
    PyObject *keep;     /* what the op's callbacks need alive (callables, answers): a list */
    PyObject *pending;  /* an exception a callback raised during the last call or tuning */
    struct ktpy_answer *answer; /* verify.c: the reference's outputs, when set */
    PyObject *verify;   /* verify.c: the verify callable, or NULL */
} OpObject;

extern PyType_Spec ktpy_op_spec;

/* Raises what the op's callbacks left pending, else kerntune.Error for st. */
PyObject *ktpy_op_fail(OpObject *o, kt_status st);

/* ---- variants.c -------------------------------------------------------------------------------- */

PyObject *ktpy_op_add_variants(PyObject *self, PyObject *args, PyObject *kwds);
PyObject *ktpy_op_add_candidate(PyObject *self, PyObject *args, PyObject *kwds);

/* ---- buffers.c --------------------------------------------------------------------------------- */

/* One call's arguments: the kt_args, and for arguments staged to the op's device the device
 * buffer holding each (freed by ktpy_args_free; the host memory copied back first where asked). */
typedef struct ktpy_args {
    kt_arg *a;
    void **staged;      /* per argument: its device copy, or NULL */
    void **host;        /* per argument: the host memory a staged copy came from */
    PyObject *hold;     /* what must stay alive while the call runs (DLPack capsules): a list */
} ktpy_args;

/* Converts a call's Python arguments (one per declared argument) into a; host arrays for an op
 * on a device are copied to device buffers (unless the op only writes them: then allocated).
 * Returns -1 with an exception set. Needs the interpreter's lock. */
int ktpy_args_make(OpObject *o, PyObject *args, ktpy_args *a);

/* After the call (without the interpreter's lock): copies staged buffers the op may write back
 * into their host arrays when back is true, and frees the device copies. */
kt_status ktpy_args_unstage(OpObject *o, ktpy_args *a, bool back);

void ktpy_args_free(ktpy_args *a);

/* Host memory for a Python callback: a memoryview of the bytes at ptr (writable or read-only),
 * valid only while the callback runs; kerntune/__init__.py views it as a numpy array. */
PyObject *ktpy_memory(void *ptr, size_t bytes, bool writable);

/* Releases every memoryview in views (a list, or NULL) that ktpy_memory made for a callback, and
 * the list: a reference the callback kept then fails instead of reading freed memory. */
void ktpy_release_views(PyObject *views);

/* A scalar argument of type t as a Python number (a new reference; NULL with an exception). */
PyObject *ktpy_scalar(const kt_arg *a, kt_type t);

/* ---- verify.c ---------------------------------------------------------------------------------- */

PyObject *ktpy_op_set_answer(PyObject *self, PyObject *args);
PyObject *ktpy_op_set_verify(PyObject *self, PyObject *args);
void ktpy_answer_free(struct ktpy_answer *a);

#endif
