/*
 * opencl_build.c - the OpenCL backend's variants: the compiler's identity, building a variant
 * from source with its defines as #define lines in front (Kernel Tuner's contract applied:
 * contract.c), the artifact (a GPU's program binary; a CPU device's source and options), and
 * loading one into a module with its pool of kernel objects (opencl.c launches from the pool).
 */
#include "backends/opencl_int.h"
#include "backends/contract.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

kt_status kt__cl_compiler_id(void *state, size_t device, char *out, size_t len, char *err, size_t errlen) {
    (void)err, (void)errlen;
    snprintf(out, len, "%s", ((cl_state *)state)->devs[device].compiler);
    return KT_OK;
}

/* Joins the options into one build options string. */
static char *options_string(const kt_build_request *req) {
    size_t len = 1;
    for (size_t i = 0; i < req->noptions; i++) len += strlen(req->options[i]) + 2;
    char *s = malloc(len);
    if (s == NULL) return NULL;
    size_t k = 0;
    s[0] = '\0';
    for (size_t i = 0; i < req->noptions; i++) k += (size_t)snprintf(s + k, len - k, "%s%s", k ? " " : "", req->options[i]);
    return s;
}

/* The source with the variant's defines as #define lines in front: a value may hold spaces
 * ('unsigned int'), which a -D build option could not carry. Under Kernel Tuner's contract a
 * loop_unroll_factor of 0 removes the `#pragma unroll NAME` lines (contract.c). */
static char *source_with_defines(const kt_build_request *req) {
    bool contract = (req->flags & KT_BUILD_KERNEL_TUNER) != 0;
    char *text = NULL;
    for (size_t i = 0; contract && i < req->ndefines; i++) {
        char name[512];
        if (!kt__contract_unroll_zero(req->defines[i], name, sizeof name)) continue;
        if (text == NULL && (text = strdup(req->source)) == NULL) return NULL;
        kt__contract_drop_unroll(text, name);
    }
    const char *source = text ? text : req->source;
    size_t len = strlen(source) + 32;
    for (size_t i = 0; i < req->ndefines; i++) len += strlen(req->defines[i]) + 16;
    char *s = malloc(len);
    if (s == NULL) {
        free(text);
        return NULL;
    }
    size_t k = 0;
    for (size_t i = 0; i < req->ndefines; i++) {
        const char *eq = strchr(req->defines[i], '=');
        if (eq) k += (size_t)snprintf(s + k, len - k, "#define %.*s %s\n", (int)(eq - req->defines[i]), req->defines[i], eq + 1);
        else k += (size_t)snprintf(s + k, len - k, "#define %s\n", req->defines[i]);
    }
    snprintf(s + k, len - k, "#line 1\n%s", source);
    free(text);
    return s;
}

static void build_log(cl_state *s, cl_program prog, cl_device_id dev, char *log, size_t loglen, const char *prefix) {
    size_t k = (size_t)snprintf(log, loglen, "%s", prefix);
    if (k < loglen) {
        size_t got = 0;
        if (s->api.GetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, loglen - k, log + k, &got) != CL_SUCCESS)
            log[k] = '\0';
        log[loglen - 1] = '\0';
    }
}

/* A CPU device's artifact is the program's source and options, not its binary: PoCL's binary of
 * a CPU program holds kernels compiled for any work-group size, which costs a second code
 * generation beside the one each launch's work-group size gets anyway (the convolution example:
 * twice the build time of Kernel Tuner's, which never asks for binaries). Loading it builds the
 * source again, which the platform's own kernel cache serves (PoCL's, keyed by source and
 * options). The file: SOURCE_MAGIC, the options' length and the options, then the source. */
static const char SOURCE_MAGIC[8] = {'K', 'T', 'C', 'L', 'S', 'R', 'C', '1'};

static kt_status write_source_artifact(const char *path, const char *opts, const char *source, char *log, size_t loglen) {
    FILE *f = fopen(path, "wb");
    uint32_t olen = (uint32_t)strlen(opts);
    bool ok = f && fwrite(SOURCE_MAGIC, 1, sizeof SOURCE_MAGIC, f) == sizeof SOURCE_MAGIC && fwrite(&olen, sizeof olen, 1, f) == 1 &&
              fwrite(opts, 1, olen, f) == olen && fputs(source, f) >= 0;
    if (f && fclose(f) != 0) ok = false;
    if (!ok) snprintf(log, loglen, "cannot write %s", path);
    return ok ? KT_OK : KT_ERR_SYSTEM;
}

/* The program of a source artifact (bytes, len), built for dv; NULL with err set. */
static cl_program load_source_artifact(cl_state *s, cl_dev *dv, const unsigned char *bytes, size_t len, char *err, size_t errlen) {
    uint32_t olen = 0;
    if (len < sizeof SOURCE_MAGIC + sizeof olen) return snprintf(err, errlen, "a source artifact cut short"), NULL;
    memcpy(&olen, bytes + sizeof SOURCE_MAGIC, sizeof olen);
    size_t at = sizeof SOURCE_MAGIC + sizeof olen;
    if (olen > len - at) return snprintf(err, errlen, "a source artifact cut short"), NULL;
    char *opts = malloc((size_t)olen + 1), *src = malloc(len - at - olen + 1);
    if (opts == NULL || src == NULL) {
        free(opts), free(src);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    memcpy(opts, bytes + at, olen), opts[olen] = '\0';
    memcpy(src, bytes + at + olen, len - at - olen), src[len - at - olen] = '\0';
    cl_int rc = CL_SUCCESS;
    const char *text = src;
    cl_program prog = s->api.CreateProgramWithSource(dv->ctx, 1, &text, NULL, &rc);
    if (prog == NULL) kt__cl_fail(rc, "clCreateProgramWithSource (loading a source artifact)", err, errlen);
    else if ((rc = s->api.BuildProgram(prog, 1, &dv->id, opts, NULL, NULL)) != CL_SUCCESS) {
        build_log(s, prog, dv->id, err, errlen, "building a source artifact failed: ");
        s->api.ReleaseProgram(prog);
        prog = NULL;
    }
    free(opts), free(src);
    return prog;
}

kt_status kt__cl_build(void *state, size_t device, const kt_build_request *req, char *log, size_t loglen) {
    cl_state *s = state;
    cl_dev *dv = &s->devs[device];
    char *opts = options_string(req), *full = source_with_defines(req);
    if (opts == NULL || full == NULL) {
        free(opts), free(full);
        snprintf(log, loglen, "out of memory");
        return KT_ERR_NO_MEMORY;
    }
    cl_int rc = CL_SUCCESS;
    const char *src = full;
    cl_program prog = s->api.CreateProgramWithSource(dv->ctx, 1, &src, NULL, &rc);
    kt_status st = KT_OK;
    if (prog == NULL) {
        st = kt__cl_fail(rc, "clCreateProgramWithSource", log, loglen);
    } else if ((rc = s->api.BuildProgram(prog, 1, &dv->id, opts, NULL, NULL)) != CL_SUCCESS) {
        build_log(s, prog, dv->id, log, loglen, "OpenCL build failed: ");
        st = KT_ERR_BACKEND;
    } else if (dv->cpu) {
        st = write_source_artifact(req->out_path, opts, full, log, loglen);
    } else {
        size_t size = 0;
        unsigned char *bin = NULL;
        if (s->api.GetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, NULL) != CL_SUCCESS || size == 0 ||
            (bin = malloc(size)) == NULL ||
            s->api.GetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL) != CL_SUCCESS) {
            snprintf(log, loglen, "the OpenCL platform gave no program binary");
            st = KT_ERR_BACKEND;
        } else {
            FILE *f = fopen(req->out_path, "wb");
            if (f == NULL || fwrite(bin, 1, size, f) != size) {
                snprintf(log, loglen, "cannot write %s", req->out_path);
                st = KT_ERR_SYSTEM;
            }
            if (f && fclose(f) != 0 && st == KT_OK) {
                snprintf(log, loglen, "cannot write %s", req->out_path);
                st = KT_ERR_SYSTEM;
            }
        }
        free(bin);
    }
    if (prog) s->api.ReleaseProgram(prog);
    free(opts);
    free(full);
    return st;
}

kt_status kt__cl_load(void *state, size_t device, const char *path, const char *kernel_name, void **module,
                         char *err, size_t errlen) {
    cl_state *s = state;
    cl_dev *dv = &s->devs[device];
    size_t len;
    bool opened;
    unsigned char *bin = kt__read_whole(path, &len, &opened);
    if (bin == NULL || len == 0) {
        free(bin);
        snprintf(err, errlen, opened ? "cannot read %s" : "cannot open %s", path);
        return KT_ERR_SYSTEM;
    }
    const unsigned char *cbin = bin;
    cl_int rc = CL_SUCCESS, brc = CL_SUCCESS;
    cl_program prog;
    if (len >= sizeof SOURCE_MAGIC && memcmp(bin, SOURCE_MAGIC, sizeof SOURCE_MAGIC) == 0) { /* a CPU device's (cl_build) */
        prog = load_source_artifact(s, dv, bin, len, err, errlen);
        free(bin);
        if (prog == NULL) return KT_ERR_BACKEND;
    } else {
        prog = s->api.CreateProgramWithBinary(dv->ctx, 1, &dv->id, &len, &cbin, &brc, &rc);
        free(bin);
        if (prog == NULL || rc != CL_SUCCESS) {
            if (prog) s->api.ReleaseProgram(prog);
            return kt__cl_fail(rc != CL_SUCCESS ? rc : brc, "loading a program binary", err, errlen);
        }
        if ((rc = s->api.BuildProgram(prog, 1, &dv->id, "", NULL, NULL)) != CL_SUCCESS) {
            build_log(s, prog, dv->id, err, errlen, "building a program binary failed: ");
            s->api.ReleaseProgram(prog);
            return KT_ERR_BACKEND;
        }
    }
    cl_module *m = calloc(1, sizeof *m);
    char *name = strdup(kernel_name);
    if (m == NULL || name == NULL) {
        free(m), free(name);
        s->api.ReleaseProgram(prog);
        snprintf(err, errlen, "out of memory");
        return KT_ERR_NO_MEMORY;
    }
    m->program = prog;
    m->name = name;
    for (size_t i = 0; i < KT_CL_KERNELS_MAX; i++) atomic_init(&m->slots[i].busy, false);
    size_t made = 0;
    for (; made < KT_CL_KERNELS; made++) {
        m->slots[made].kernel = s->api.CreateKernel(prog, kernel_name, &rc);
        if (m->slots[made].kernel == NULL) break;
    }
    if (made == 0) {
        snprintf(err, errlen, "kernel '%s' not found in the program (OpenCL error %d)", kernel_name, (int)rc);
        s->api.ReleaseProgram(prog);
        free(name), free(m);
        return KT_ERR_BACKEND;
    }
    /* Fewer than asked (the platform ran short) still launches: the pool grows when needed. */
    atomic_init(&m->count, made);
    pthread_mutex_init(&m->grow, NULL);
    *module = m;
    return KT_OK;
}

void kt__cl_unload(void *state, size_t device, void *module) {
    (void)device;
    cl_state *s = state;
    cl_module *m = module;
    if (m == NULL) return;
    size_t n = atomic_load_explicit(&m->count, memory_order_acquire);
    for (size_t i = 0; i < n; i++) s->api.ReleaseKernel(m->slots[i].kernel);
    s->api.ReleaseProgram(m->program);
    pthread_mutex_destroy(&m->grow);
    free(m->name);
    free(m);
}
