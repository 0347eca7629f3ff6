/*
 * locate.c - naming code of this process for a worker process, and finding it there (see
 * locate.h). Uses dladdr1 and dlinfo for the object and its load bias, and dl_iterate_phdr for
 * its build-id note.
 */
#define _GNU_SOURCE /* dladdr1, dlinfo, dl_iterate_phdr, RTLD_DL_LINKMAP */
#include "isolate/locate.h"
#include "isolate/isolate.h"

#include <dlfcn.h>
#include <elf.h>
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

typedef struct note_search {
    uintptr_t bias;     /* the object's load bias */
    uintptr_t addr;     /* an address inside it */
    bool found;         /* the object was found */
    uint32_t len;       /* its build-id's length, 0 when none */
    unsigned char id[KT__BUILD_ID_MAX];
} note_search;

/* Finds the NT_GNU_BUILD_ID note among the object's PT_NOTE segments. */
static int note_of(struct dl_phdr_info *info, size_t size, void *p) {
    (void)size;
    note_search *s = p;
    if (info->dlpi_addr != s->bias) return 0;
    bool inside = false;
    for (ElfW(Half) i = 0; i < info->dlpi_phnum && !inside; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        inside = ph->p_type == PT_LOAD && s->addr >= info->dlpi_addr + ph->p_vaddr &&
                 s->addr < info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
    }
    if (!inside) return 0;
    s->found = true;
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE) continue;
        const unsigned char *n = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr), *end = n + ph->p_memsz;
        while (n + sizeof(ElfW(Nhdr)) <= end) {
            ElfW(Nhdr) h;
            memcpy(&h, n, sizeof h);
            const unsigned char *name = n + sizeof h;
            const unsigned char *desc = name + ((h.n_namesz + 3) & ~3u);
            const unsigned char *next = desc + ((h.n_descsz + 3) & ~3u);
            if (next > end) break;
            if (h.n_type == NT_GNU_BUILD_ID && h.n_namesz == 4 && memcmp(name, "GNU", 4) == 0 && h.n_descsz > 0 &&
                h.n_descsz <= KT__BUILD_ID_MAX) {
                s->len = h.n_descsz;
                memcpy(s->id, desc, h.n_descsz);
                return 1;
            }
            n = next;
        }
    }
    return 1;
}

/* The build-id of the object loaded at bias that holds addr (len 0: none). */
static void build_id(uintptr_t bias, uintptr_t addr, note_search *s) {
    *s = (note_search){.bias = bias, .addr = addr};
    dl_iterate_phdr(note_of, s);
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
    note_search s;
    build_id((uintptr_t)lm->l_addr, (uintptr_t)addr, &s);
    out->build_id_len = s.len;
    memcpy(out->build_id, s.id, s.len);
    if (out->in_program) {
        if (getauxval(AT_SECURE)) {
            snprintf(why, len, "it is in the program, which runs with raised privileges (set-user-ID), so kerntune does not start it again");
            return false;
        }
        return true; /* the worker is a fresh start of the same file (/proc/self/exe) */
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
        snprintf(why, len, "%s has no build-id and the code no exported symbol, so a worker could not be sure to find the same code",
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
        h = dlopen(r->path, RTLD_NOW | RTLD_LOCAL); /* kept loaded for the worker's life */
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
        note_search s;
        build_id((uintptr_t)lm->l_addr, a, &s);
        if (!s.found || s.len != r->build_id_len || memcmp(s.id, r->build_id, s.len) != 0) {
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
    int (*serve)(int, int, long, bool) = kt__worker_serve;
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
