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

#include <stdint.h>

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

#endif
