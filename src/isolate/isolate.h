/*
 * isolate.h - running candidates in a worker process (isolate.c, tools/worker.c). Internal.
 *
 * A worker is a separate program (kerntune-worker), started with fork and exec, that owns its
 * own backend state and device context. The tuner sends it requests over a pipe and reads the
 * replies from another; buffer arguments travel through one shared-memory region. A worker
 * that crashes, hangs past its timeout or is left with an unusable device context is killed
 * and replaced; the candidate that did it is disqualified; the caller's process is untouched.
 *
 * Requests (a kt__msg header, then the payload):
 *   SETUP  backend name, device fingerprint, the shared region's size, and per argument its
 *          type, bytes, offset in the region and scalar value: the worker finds the device and
 *          allocates its buffers (device backends) or points into the region (host backends);
 *   LOAD   an artifact's path, kernel name and launch geometry: replies with a module id;
 *   RUN    a module id, flags and which buffers to copy: the worker copies those from the region
 *          into its buffers, flushes the device's cache when asked, runs the kernel once timing
 *          it (device events, or the CPU clock around a host entry point), and copies those
 *          asked for back into the region. Its buffers persist between runs, so an input that
 *          does not change is copied once per worker and tuning.
 * Every reply starts with a kt__reply.
 */
#ifndef KT_ISOLATE_H
#define KT_ISOLATE_H

#include <kerntune/backend.h>

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

enum { KT__MSG_SETUP = 1, KT__MSG_LOAD = 2, KT__MSG_RUN = 3 };
enum { KT__RUN_FLUSH = 1 };

typedef struct kt__msg {
    uint32_t type;
    uint32_t len; /* payload bytes after the header */
} kt__msg;

typedef struct kt__msg_arg {
    uint32_t type; /* kt_type */
    uint32_t pad;
    uint64_t bytes;  /* buffers */
    uint64_t offset; /* in the shared region */
    uint64_t value;  /* scalars: the kt_arg union's bits */
} kt__msg_arg;

typedef struct kt__msg_setup {
    char backend[32];
    char device[KT_DEVICE_FINGERPRINT_MAX];
    uint64_t region;
    uint32_t nargs;
    uint32_t pad;
    /* then nargs kt__msg_arg */
} kt__msg_setup;

typedef struct kt__msg_load {
    char path[4096];
    char kernel[256];
    kt_launch_geometry geometry;
} kt__msg_load;

typedef struct kt__msg_run {
    uint32_t module;
    uint32_t flags;
    uint64_t in;  /* arguments 0..63 to copy from the region before the run (bit per argument; */
    uint64_t out; /* later ones always are), and back into it after */
} kt__msg_run;

typedef struct kt__reply {
    int32_t status;   /* kt_status of the request; for RUN, the launch's */
    int32_t sticky;   /* RUN: the device context is unusable after this failure */
    uint32_t module;  /* LOAD: the module id */
    uint32_t pad;
    double ns;        /* RUN: the kernel's time */
    char msg[512];
} kt__reply;

/* ---- isolate.c: the tuning side --------------------------------------------------------------- */

typedef struct kt__workset kt__workset;
typedef struct kt__worker kt__worker;

/* How an isolated run went wrong: the candidate failed, crashed or hung; or (INFRA) the
 * isolation itself failed (no worker, a copy failed): not the candidate's, the tuning stops. */
enum { KT__ISO_FAILED = 1, KT__ISO_CRASH = 2, KT__ISO_TIMEOUT = 3, KT__ISO_INFRA = 4 };

/* The code a trial reports for a unit that failed in its worker (the class is kept aside). */
#define KT__ISO_FAIL_CODE (-7001)

struct kt__msg_setup;
struct kt__msg_load;

typedef struct kt__worker_mod {
    struct kt__msg_load *load; /* how to load it */
    uint64_t incarnation;      /* the worker process it was loaded into */
    uint32_t worker_id;        /* its id there */
} kt__worker_mod;

/* A worker process and what it was asked to hold. */
struct kt__worker {
    pid_t pid;                 /* -1: not running */
    int req, rep;              /* the socket to it */
    uint64_t incarnation;      /* counts replacements */
    int region_fd;
    unsigned char *region;
    size_t region_bytes;
    struct kt__msg_setup *setup;
    size_t setup_len;
    bool set_up;
    bool primed;               /* the inputs that do not change are in its buffers */
    kt__worker_mod *mods;
    size_t nmods;
    /* natives: a fork of the caller runs call(call_user, unit, args, nargs) instead */
    int (*call)(void *user, size_t unit, const kt_arg *args, size_t nargs);
    void *call_user;
};

/* Prepares *w (created when NULL) for a tuning on backend's device device_fp with arguments
 * laid out as args. The process starts at the first run. */
kt_status kt__worker_setup(kt__worker **w, const char *backend, const char *device_fp, const kt_arg *args, size_t nargs);

/* Starts the worker and sets it up now, so that a worker that cannot start fails the tuning
 * rather than its candidates. */
kt_status kt__worker_ready(kt__worker *w);

/* Registers an artifact to run; *id names it in kt__worker_run. */
kt_status kt__worker_add(kt__worker *w, const char *path, const char *kernel, const kt_launch_geometry *g, size_t *id);

/* Runs module id once on run_args (the workset's): copies them to the worker and back (full:
 * every buffer both ways, for a validation run; otherwise what changes between runs only).
 * Returns 0 with the kernel's time in *ns, or KT__ISO_FAILED (it returned a failure),
 * KT__ISO_CRASH or KT__ISO_TIMEOUT with msg saying what happened. */
int kt__worker_run(kt__worker *w, size_t id, const kt__workset *ws, const kt_arg *run_args, size_t nargs, bool flush, bool full,
                   double timeout_s, double *ns, char *msg, size_t len);

/* Kills the worker and frees it; NULL is harmless. */
void kt__worker_free(kt__worker *w);


#endif
