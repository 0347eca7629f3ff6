/*
 * locate.c - naming code of this process for a runner process, and finding it there (see
 * locate.h). Uses dladdr1 and dlinfo for the object and its load bias, and util/buildid.c for
 * its build-id note.
 */
#define _GNU_SOURCE /* dladdr1, dlinfo, dl_iterate_phdr, RTLD_DL_LINKMAP */
#include "isolate/locate.h"
#include "isolate/isolate.h"
#include "util/buildid.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>

/* The program's own link map (the head of the default namespace). */
static struct link_map *program_map(void) {
    void *h = dlopen(NULL, RTLD_LAZY | RTLD_NOLOAD);
    void *lm = NULL;
    if (h == NULL) return NULL;
    if (dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0) lm = NULL;
    dlclose(h);
    return lm;
}

bool kt__code_locate(const void *addr, kt__code_ref *out, char *why, size_t len) {
    memset(out, 0, sizeof *out);
    Dl_info info;
    void *lmv = NULL;
    if (addr == NULL || dladdr1(addr, &info, &lmv, RTLD_DL_LINKMAP) == 0 || lmv == NULL) {
        snprintf(why, len, "its code is not in a loaded object file (generated at run time?)");
        return false;
    }
    const struct link_map *lm = lmv;
    out->in_program = lm == program_map();
    out->offset = (uint64_t)((uintptr_t)addr - (uintptr_t)lm->l_addr);
    if (info.dli_sname && info.dli_saddr == addr) snprintf(out->symbol, sizeof out->symbol, "%s", info.dli_sname);
    out->build_id_len = (uint32_t)kt__build_id_of(addr, out->build_id, sizeof out->build_id);
    if (out->in_program) {
        if (getauxval(AT_SECURE)) {
            snprintf(why, len, "it is in the program, which runs with raised privileges (set-user-ID), so kerntune does not start it again");
            return false;
        }
        return true; /* the runner is a fresh start of the same file (/proc/self/exe) */
    }
    char real[PATH_MAX];
    const char *file = info.dli_fname && info.dli_fname[0] ? info.dli_fname : lm->l_name;
    if (file == NULL || file[0] == '\0' || realpath(file, real) == NULL) {
        snprintf(why, len, "the file of its object (%s) cannot be found", file && file[0] ? file : "unnamed");
        return false;
    }
    if (strlen(real) >= sizeof out->path) {
        snprintf(why, len, "the path of its object is longer than %d bytes", KT__CODE_PATH_MAX - 1);
        return false;
    }
    snprintf(out->path, sizeof out->path, "%s", real);
    if (out->build_id_len == 0 && out->symbol[0] == '\0') {
        snprintf(why, len, "%s has no build-id and the code no exported symbol, so a runner could not be sure to find the same code",
                 out->path);
        return false;
    }
    return true;
}

bool kt__code_resolve(const kt__code_ref *r, void **addr, char *err, size_t len) {
    *addr = NULL;
    void *lmv = NULL;
    void *h = NULL;
    if (r->in_program) {
        lmv = program_map();
    } else {
        h = dlopen(r->path, RTLD_NOW | RTLD_LOCAL); /* kept loaded for the runner's life */
        if (h == NULL) {
            snprintf(err, len, "cannot load %s: %s", r->path, dlerror());
            return false;
        }
        if (dlinfo(h, RTLD_DI_LINKMAP, &lmv) != 0) lmv = NULL;
    }
    const struct link_map *lm = lmv;
    if (lm == NULL) {
        snprintf(err, len, "cannot find the link map of %s", r->in_program ? "the program" : r->path);
        return false;
    }
    const char *what = r->in_program ? "the program" : r->path;
    if (r->build_id_len > 0) {
        uintptr_t a = (uintptr_t)lm->l_addr + (uintptr_t)r->offset;
        unsigned char id[KT__BUILD_ID_MAX];
        size_t n = kt__build_id_of((const void *)a, id, sizeof id);
        if (n != r->build_id_len || memcmp(id, r->build_id, n) != 0) {
            snprintf(err, len, "%s is not the file the tuning process loaded (its build-id differs: rebuilt since?)", what);
            return false;
        }
        *addr = (void *)a;
        return true;
    }
    if (r->symbol[0]) {
        *addr = dlsym(h ? h : RTLD_DEFAULT, r->symbol);
        if (*addr == NULL) {
            snprintf(err, len, "%s has no symbol '%s'", what, r->symbol);
            return false;
        }
        return true;
    }
    if (r->in_program) { /* the same file as the tuning process's (a fresh start of it) */
        *addr = (void *)((uintptr_t)lm->l_addr + (uintptr_t)r->offset);
        return true;
    }
    snprintf(err, len, "%s: nothing to find the code by (no build-id, no symbol)", what);
    return false;
}

int kt__code_serve_object(char *path, size_t len, char *why, size_t wlen) {
    kt__code_ref r;
    void *addr;
    int (*serve)(int, int, long, bool) = kt__runner_serve;
    KT__FN_ADDR(serve, addr);
    if (!kt__code_locate(addr, &r, why, wlen)) return -1;
    if (r.in_program) return 0;
    if (strchr(r.path, ':') || strchr(r.path, ' ')) { /* LD_PRELOAD's separators */
        snprintf(why, wlen, "kerntune's own object %s cannot be preloaded: its path holds a ':' or a space", r.path);
        return -1;
    }
    snprintf(path, len, "%s", r.path);
    return 1;
}
