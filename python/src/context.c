/*
 * context.c - kerntune.Context (kt_context): its devices, how tuning measures (policy, race,
 * flush, build threads, log level), a Python callable told of each unit as a tuning decides it,
 * and the persistent cache with its wisdom.
 */
#include "kt_python.h"

#include <kerntune/cache.h>
#include <kerntune/decision.h>
#include <kerntune/device.h>
#include <kerntune/measure.h>
#include <kerntune/variants.h>

#include <string.h>

#define SELF ContextObject *c = (ContextObject *)self

static int Context_init(PyObject *self, PyObject *args, PyObject *kwds) {
    SELF;
    static char *kwlist[] = {"cache", "artifact_dir", "backends", NULL};
    const char *cache = NULL, *artifacts = NULL, *backends = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|zzz:Context", kwlist, &cache, &artifacts, &backends)) return -1;
    if (c->ctx != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Context.__init__: already initialised");
        return -1;
    }
    kt_status st = kt_context_create(&c->ctx);
    if (st == KT_OK) st = kt_context_set_cache(c->ctx, cache);
    if (st == KT_OK && artifacts) st = kt_context_set_artifact_dir(c->ctx, artifacts);
    if (st == KT_OK && backends) st = kt_context_set_backends(c->ctx, backends);
    if (st != KT_OK) {
        ktpy_raise(st);
        kt_context_destroy(c->ctx);
        c->ctx = NULL;
        return -1;
    }
    return 0;
}

static void Context_dealloc(PyObject *self) {
    SELF;
    if (c->ctx) {
        Py_BEGIN_ALLOW_THREADS
        kt_context_destroy(c->ctx); /* waits for builds a tuning left running */
        Py_END_ALLOW_THREADS
    }
    Py_XDECREF(c->unit_fn);
    Py_XDECREF(c->pending);
    PyTypeObject *tp = Py_TYPE(self);
    freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    tp_free(self);
    Py_DECREF(tp);
}

static PyObject *Context_devices(PyObject *self, PyObject *noargs) {
    (void)noargs;
    SELF;
    size_t n = kt_context_device_count(c->ctx);
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        const kt_device *dev = kt_context_device(c->ctx, i);
        PyObject *t = Py_BuildValue("(sss)", kt_device_backend(dev), kt_device_name(dev), kt_device_fingerprint(dev));
        if (t == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SetItem(list, (Py_ssize_t)i, t); /* steals */
    }
    return list;
}

static PyObject *Context_device_limits(PyObject *self, PyObject *args) {
    SELF;
    Py_ssize_t index = 0;
    if (!PyArg_ParseTuple(args, "n:device_limits", &index)) return NULL;
    int64_t threads = 0, block[3] = {0, 0, 0}, shared = 0;
    kt_status st = index < 0 ? KT_ERR_INVALID_ARGUMENT : kt_device_launch_limits(c->ctx, (size_t)index, &threads, block, &shared);
    if (st != KT_OK) return ktpy_raise(st);
    return Py_BuildValue("(L(LLL)L)", (long long)threads, (long long)block[0], (long long)block[1], (long long)block[2], (long long)shared);
}

static PyObject *done(kt_status st) {
    if (st != KT_OK) return ktpy_raise(st);
    Py_RETURN_NONE;
}

static PyObject *Context_set_policy(PyObject *self, PyObject *args) {
    SELF;
    const char *name = NULL;
    if (!PyArg_ParseTuple(args, "s:set_policy", &name)) return NULL;
    kt_policy p;
    kt_status st = kt_policy_parse(name, &p);
    return done(st == KT_OK ? kt_context_set_policy(c->ctx, p) : st);
}

static PyObject *Context_set_race(PyObject *self, PyObject *args, PyObject *kwds) {
    SELF;
    static char *kwlist[] = {"confidence", "tolerance", "max_runs", NULL};
    double confidence = 0.99, tolerance = 0.01;
    unsigned max_runs = 100;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|ddI:set_race", kwlist, &confidence, &tolerance, &max_runs)) return NULL;
    kt_status st = kt_context_set_policy(c->ctx, KT_POLICY_RACE);
    return done(st == KT_OK ? kt_context_set_race(c->ctx, confidence, tolerance, max_runs) : st);
}

static PyObject *Context_set_measure(PyObject *self, PyObject *args, PyObject *kwds) {
    SELF;
    static char *kwlist[] = {"warmup_runs", "min_runs", "max_runs", "min_time_s", NULL};
    unsigned warmups = 1, min_runs = 3, max_runs = 1000;
    double min_time = 0.002;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|IIId:set_measure", kwlist, &warmups, &min_runs, &max_runs, &min_time)) return NULL;
    return done(kt_context_set_measure(c->ctx, warmups, min_runs, max_runs, min_time));
}

static PyObject *Context_set_flush(PyObject *self, PyObject *args) {
    SELF;
    const char *name = NULL;
    if (!PyArg_ParseTuple(args, "s:set_flush", &name)) return NULL;
    for (int f = KT_FLUSH_AUTO; f <= KT_FLUSH_ON; f++)
        if (strcmp(kt_flush_name((kt_flush)f), name) == 0) return done(kt_context_set_flush(c->ctx, (kt_flush)f));
    PyErr_Format(PyExc_ValueError, "set_flush: '%s': expected 'auto', 'off' or 'on'", name);
    return NULL;
}

static PyObject *Context_set_compile_threads(PyObject *self, PyObject *args) {
    SELF;
    Py_ssize_t n = 0;
    if (!PyArg_ParseTuple(args, "n:set_compile_threads", &n)) return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "set_compile_threads: 0 (one per core) or more");
        return NULL;
    }
    return done(kt_context_set_compile_threads(c->ctx, (size_t)n));
}

static PyObject *Context_set_log_level(PyObject *self, PyObject *args) {
    SELF;
    const char *name = NULL;
    if (!PyArg_ParseTuple(args, "s:set_log_level", &name)) return NULL;
    for (int l = KT_LOG_NONE; l <= KT_LOG_DEBUG; l++)
        if (strcmp(kt_log_level_name((kt_log_level)l), name) == 0) return done(kt_context_set_log_level(c->ctx, (kt_log_level)l));
    PyErr_Format(PyExc_ValueError, "set_log_level: '%s': expected 'none', 'error', 'warn', 'info' or 'debug'", name);
    return NULL;
}

/* The unit function's trampoline: unit_fn(index, config, outcome, time_ns, runs, message) on the
 * tuning thread, with the interpreter's lock. An exception it raises is kept and raised by the
 * call that tuned. */
static void on_unit(const kt_decision *d, size_t u, void *user) {
    ContextObject *c = user;
    PyGILState_STATE g = PyGILState_Ensure();
    if (c->unit_fn != NULL) {
        const char *config = kt_decision_unit_config(d, u), *msg = kt_decision_unit_message(d, u);
        PyObject *r = PyObject_CallFunction(c->unit_fn, "(nssdIs)", (Py_ssize_t)u, config ? config : "",
                                            kt_outcome_name(kt_decision_unit_outcome(d, u)), kt_decision_unit_time_ns(d, u),
                                            kt_decision_unit_runs(d, u), msg ? msg : "");
        if (r == NULL) ktpy_keep_exception(&c->pending);
        Py_XDECREF(r);
    }
    PyGILState_Release(g);
}

static PyObject *Context_set_unit_fn(PyObject *self, PyObject *args) {
    SELF;
    PyObject *fn = NULL;
    if (!PyArg_ParseTuple(args, "O:set_unit_fn", &fn)) return NULL;
    if (fn != Py_None && !PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "set_unit_fn: expected a callable or None");
        return NULL;
    }
    kt_status st = kt_context_set_unit_fn(c->ctx, fn == Py_None ? NULL : on_unit, c);
    if (st != KT_OK) return ktpy_raise(st);
    Py_XDECREF(c->unit_fn);
    c->unit_fn = fn == Py_None ? NULL : (Py_INCREF(fn), fn);
    Py_RETURN_NONE;
}

/* ---- the persistent cache and wisdom ----------------------------------------------------------- */

static kt_cache *cache_of(ContextObject *c) {
    kt_cache *k = kt_context_cache(c->ctx);
    if (k == NULL) PyErr_SetString(ktpy_error, "the context has no persistent cache (cache='off', or it could not be opened)");
    return k;
}

static PyObject *Context_cache_path(PyObject *self, PyObject *noargs) {
    (void)noargs;
    SELF;
    kt_cache *k = kt_context_cache(c->ctx);
    if (k == NULL) Py_RETURN_NONE;
    return PyUnicode_FromString(kt_cache_path(k));
}

static PyObject *Context_cache_count(PyObject *self, PyObject *args, PyObject *kwds) {
    SELF;
    static char *kwlist[] = {"op", "device", NULL};
    const char *op = NULL, *device = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|zz:cache_count", kwlist, &op, &device)) return NULL;
    kt_cache *k = cache_of(c);
    size_t n = 0;
    if (k == NULL) return NULL;
    kt_status st = kt_cache_count(k, op, device, &n);
    return st == KT_OK ? PyLong_FromSize_t(n) : ktpy_raise(st);
}

static PyObject *Context_export_wisdom(PyObject *self, PyObject *args, PyObject *kwds) {
    SELF;
    static char *kwlist[] = {"op", "device", NULL};
    const char *op = NULL, *device = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|zz:export_wisdom", kwlist, &op, &device)) return NULL;
    kt_cache *k = cache_of(c);
    char *json = NULL;
    if (k == NULL) return NULL;
    kt_status st = kt_cache_export(k, op, device, &json);
    if (st != KT_OK) return ktpy_raise(st);
    PyObject *s = PyUnicode_FromString(json);
    kt_free(json);
    return s;
}

static PyObject *Context_import_wisdom(PyObject *self, PyObject *args, PyObject *kwds) {
    SELF;
    static char *kwlist[] = {"wisdom", "replace", NULL};
    const char *json = NULL;
    int replace = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "s|p:import_wisdom", kwlist, &json, &replace)) return NULL;
    kt_cache *k = cache_of(c);
    size_t added = 0, replaced = 0, kept = 0;
    if (k == NULL) return NULL;
    kt_status st = kt_cache_import(k, json, replace, &added, &replaced, &kept);
    if (st != KT_OK) return ktpy_raise(st);
    return Py_BuildValue("(nnn)", (Py_ssize_t)added, (Py_ssize_t)replaced, (Py_ssize_t)kept);
}

static PyObject *Context_cache_remove(PyObject *self, PyObject *args, PyObject *kwds) {
    SELF;
    static char *kwlist[] = {"op", "device", NULL};
    const char *op = NULL, *device = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|zz:cache_remove", kwlist, &op, &device)) return NULL;
    kt_cache *k = cache_of(c);
    size_t n = 0;
    if (k == NULL) return NULL;
    kt_status st = kt_cache_remove(k, op, device, &n);
    return st == KT_OK ? PyLong_FromSize_t(n) : ktpy_raise(st);
}

#define METHOD(name, flags, doc) {#name, (PyCFunction)(void (*)(void))Context_##name, flags, doc}
static PyMethodDef Context_methods[] = {
    {"_devices", Context_devices, METH_NOARGS, "_devices() -> [(backend, name, fingerprint)], by index; see Context.devices"},
    METHOD(device_limits, METH_VARARGS,
           "device_limits(index) -> (max_threads, (max_x, max_y, max_z), max_shared_bytes): a device's launch limits, 0 unknown"),
    METHOD(set_policy, METH_VARARGS, "set_policy(name): how candidates are measured: 'race' (default), 'triton', 'kerneltuner', 'fixed'"),
    METHOD(set_race, METH_VARARGS | METH_KEYWORDS,
           "set_race(confidence=0.99, tolerance=0.01, max_runs=100): the race, and the most runs one candidate gets"),
    METHOD(set_measure, METH_VARARGS | METH_KEYWORDS,
           "set_measure(warmup_runs=1, min_runs=3, max_runs=1000, min_time_s=0.002): a fixed number of runs (policy 'fixed')"),
    METHOD(set_flush, METH_VARARGS, "set_flush('auto'|'off'|'on'): whether each measured run starts on a cold cache"),
    METHOD(set_compile_threads, METH_VARARGS, "set_compile_threads(n): variants built at once (0: kerntune decides)"),
    METHOD(set_log_level, METH_VARARGS, "set_log_level('none'|'error'|'warn'|'info'|'debug'): what kerntune logs to stderr"),
    METHOD(set_unit_fn, METH_VARARGS,
           "set_unit_fn(fn): fn(index, config, outcome, time_ns, runs, message) as each unit of a tuning is decided (None: off)"),
    METHOD(cache_path, METH_NOARGS, "cache_path() -> the persistent cache's file, or None when there is none"),
    METHOD(cache_count, METH_VARARGS | METH_KEYWORDS, "cache_count(op=None, device=None) -> decisions stored"),
    METHOD(export_wisdom, METH_VARARGS | METH_KEYWORDS, "export_wisdom(op=None, device=None) -> the decisions as a wisdom document (str)"),
    METHOD(import_wisdom, METH_VARARGS | METH_KEYWORDS,
           "import_wisdom(wisdom, replace=False) -> (added, replaced, kept): decisions from a wisdom document"),
    METHOD(cache_remove, METH_VARARGS | METH_KEYWORDS, "cache_remove(op=None, device=None) -> decisions removed"),
    {NULL, NULL, 0, NULL},
};

static PyType_Slot Context_slots[] = {
    {Py_tp_doc, "Context(cache=None, artifact_dir=None, backends=None): kerntune's state (kt_context).\n"
                "cache: the persistent cache's path, 'off', or None for the default (KERNTUNE_CACHE,\n"
                "else the user's cache directory); artifact_dir: where compiled variants go;\n"
                "backends: the backends to start, e.g. 'cuda' (kt_context_set_backends; None: all, or\n"
                "KERNTUNE_BACKENDS's)."},
    {Py_tp_init, Context_init},
    {Py_tp_dealloc, Context_dealloc},
    {Py_tp_methods, Context_methods},
    {0, NULL},
};

PyType_Spec ktpy_context_spec = {"kerntune._kerntune.Context", sizeof(ContextObject), 0, Py_TPFLAGS_DEFAULT, Context_slots};
