/*
 * protocol.h - the requests between a tuning process (isolate.c) and its runner (serve.c).
 * Internal to src/isolate/.
 *
 * One socket pair carries both directions; buffer arguments travel through one shared-memory
 * region. Requests (a kt__msg header, then the payload):
 *   SETUP  the protocol version, the runner's mode, the shared region's size, and per argument
 *          its type, bytes, offset in the region and scalar value; in BACKEND mode also the
 *          backend's table (a kt__code_ref: the runner loads it and calls its init) and the
 *          device's fingerprint: the runner finds the device and allocates its buffers (device
 *          backends) or points into the region (host backends, NATIVES mode);
 *   LOAD   BACKEND: an artifact's path, kernel name and launch geometry; NATIVES: the
 *          candidate's function (a kt__code_ref) and its user value. Replies with a module id;
 *   RUN    a module id, flags and which buffers to copy: the runner copies those from the region
 *          into its buffers, flushes the device's cache when asked, runs the candidate once
 *          timing it (device events, or the CPU clock around a host entry point or a native),
 *          and copies those asked for back into the region. Its buffers persist between runs,
 *          so an input that does not change is copied once per runner and tuning. A buffer the
 *          tuning rewrites with the same bytes before every run (a ReadWrite buffer restored)
 *          comes once with its `keep` bit: the runner copies it to a second buffer on its
 *          device, and later runs name it in `restore`, which copies it back there, device to
 *          device, instead of through the region (the reply's `kept` says which it holds). With
 *          KT__RUN_CHECK (after a CHECK) it also poisons the outputs to poison before the run
 *          and compares after it, on the device: every output with the reference's, every
 *          ReadOnly input's digest with the one taken at CHECK. When all match it replies
 *          checked and copies nothing back; an input that changed is named (changed) and nothing
 *          comes back; an output that does not match is named (mismatched) and the outputs that
 *          `out` says come back, so the tuning compares on the host and names the element;
 *   CHECK  per argument its role in a checked run (an output compared, with its element type and
 *          tolerances; an input that must not change; an output to poison, with the pattern):
 *          the reference's outputs and the pristine inputs are in the region at their offsets.
 *          Only for a device backend that checks on the device (ABI 9: digest, all_close).
 * Every reply is one kt__reply.
 */
#ifndef KT_ISOLATE_PROTOCOL_H
#define KT_ISOLATE_PROTOCOL_H

#include "isolate/locate.h"

#include <kerntune/backend.h>

#include <stdint.h>

#define KT__PROTOCOL_VERSION 4

enum { KT__MSG_SETUP = 1, KT__MSG_LOAD = 2, KT__MSG_RUN = 3, KT__MSG_CHECK = 4 };
enum { KT__RUN_FLUSH = 1, KT__RUN_CHECK = 2 };
enum { KT__CHECK_NONE = 0, KT__CHECK_OUTPUT = 1, KT__CHECK_INPUT = 2 };
enum { KT__MODE_BACKEND = 1, KT__MODE_NATIVES = 2 };

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
    uint32_t version; /* KT__PROTOCOL_VERSION */
    uint32_t mode;    /* KT__MODE_* */
    uint64_t region;
    kt__code_ref backend; /* BACKEND: its kt_backend table */
    char device[KT_DEVICE_FINGERPRINT_MAX];
    uint32_t nargs;
    uint32_t pad;
    /* then nargs kt__msg_arg */
} kt__msg_setup;

typedef struct kt__msg_load {
    char path[4096];  /* BACKEND: the artifact, */
    char kernel[256]; /* its kernel */
    kt_launch_geometry geometry;
    kt__code_ref native; /* NATIVES: the candidate's function, */
    uint64_t user;       /* and the user value it is called with */
} kt__msg_load;

typedef struct kt__msg_run {
    uint32_t module;
    uint32_t flags;
    uint64_t in;  /* arguments 0..63 to copy from the region before the run (bit per argument; */
    uint64_t out; /* later ones always are), and back into it after */
    uint64_t keep;    /* of those copied in, the ones to keep a copy of on the device, */
    uint64_t restore; /* and the ones restored from that copy instead of copied in */
} kt__msg_run;

typedef struct kt__msg_check_arg {
    uint32_t role;        /* KT__CHECK_* */
    uint32_t elem;        /* an output's element type (kt_type) */
    double atol, rtol;    /* an output's tolerances */
    uint8_t poison[8];    /* poisoned before a checked run with this pattern, */
    uint32_t poison_size; /* of this many bytes (0: not poisoned) */
    uint32_t pad;
} kt__msg_check_arg;

typedef struct kt__msg_check {
    uint32_t nargs; /* as set up; then nargs kt__msg_check_arg */
    uint32_t pad;
} kt__msg_check;

typedef struct kt__reply {
    int32_t status;  /* kt_status of the request; for RUN, the run's */
    int32_t sticky;  /* RUN: the device context is unusable after this failure */
    uint32_t module; /* LOAD: the module id */
    int32_t kind;    /* LOAD, RUN that failed: KT_FAIL_RETURNED or KT_FAIL_LAUNCH, */
    int32_t code;    /* with the candidate's return value or the backend's kt_status */
    uint32_t checked; /* RUN with KT__RUN_CHECK: 1 when every output matched and no input changed */
    uint64_t mismatched; /* RUN with KT__RUN_CHECK: the outputs (bit per argument) that did not match:
                            then every output, and only outputs, came back */
    uint64_t changed;    /* RUN with KT__RUN_CHECK: the inputs that changed (nothing came back) */
    uint64_t kept;       /* RUN: the buffers the runner holds a copy of to restore from */
    double ns;       /* RUN: the candidate's time */
    char msg[512];
} kt__reply;

#endif
