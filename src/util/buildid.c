/*
 * buildid.c - the identity of a loaded object's machine code (see buildid.h).
 *
 * dladdr says whether an address lies in a loaded object, and which file that is;
 * dl_iterate_phdr then walks the loaded objects' program headers. The object holding the
 * address is the one with a PT_LOAD segment that contains it. (dladdr's dli_fbase is the
 * object's lowest mapped address and dl_iterate_phdr's dlpi_addr its load bias: the two are
 * equal for a shared object or a position-independent executable, but not for an executable
 * linked at a fixed address, whose bias is 0; containment holds for all three.) Its PT_NOTE
 * segments are read in place for the NT_GNU_BUILD_ID note. An object without one is hashed:
 * every readable segment that is not writable, which the loader maps from the file unchanged
 * (headers, code, read-only data), so the hash changes with the code and not with the address
 * it was loaded at. Writable segments (relocated data, the GOT) are left out. An object with
 * text relocations (rare, never with -fPIC) hashes differently at each load: it always misses,
 * which costs a tuning and never serves a stale decision.
 */
#define _GNU_SOURCE /* dladdr, dl_iterate_phdr */
#include "util/buildid.h"
#include "util/util.h"

#include <stdint.h>
#include <string.h>

#if defined(__linux__) && defined(__ELF__)
#include <dlfcn.h>
#include <elf.h>
#include <link.h>

#ifndef NT_GNU_BUILD_ID
#define NT_GNU_BUILD_ID 3
#endif

#define NOTE_MAX 64 /* bytes of build-id written as they are; a longer note is hashed */

typedef struct seek {
    uintptr_t addr;
    kt__code_id_kind kind;
    char *out;
} seek;

static void hex(const unsigned char *p, size_t n, char *out) {
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[p[i] >> 4];
        out[2 * i + 1] = digits[p[i] & 15];
    }
    out[2 * n] = '\0';
}

static bool holds(const struct dl_phdr_info *info, uintptr_t addr) {
    for (size_t i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *p = &info->dlpi_phdr[i];
        if (p->p_type != PT_LOAD) continue;
        uintptr_t lo = (uintptr_t)info->dlpi_addr + (uintptr_t)p->p_vaddr;
        if (addr >= lo && addr - lo < (uintptr_t)p->p_memsz) return true;
    }
    return false;
}

static size_t pad(size_t n, size_t align) { return (n + align - 1) & ~(align - 1); }

/* Finds the build-id note in one PT_NOTE segment (bounds checked: a malformed note ends the
 * walk of its segment); sets *desc and *len to its bytes. */
static bool note_find(const unsigned char *seg, size_t size, size_t align, const unsigned char **desc_out, size_t *len) {
    size_t off = 0;
    while (size - off >= sizeof(ElfW(Nhdr))) {
        ElfW(Nhdr) h;
        memcpy(&h, seg + off, sizeof h);
        size_t name = off + sizeof h;
        if (h.n_namesz > size - name) return false;
        size_t desc = pad(name + h.n_namesz, align); /* name and desc start aligned within the segment */
        if (desc > size || h.n_descsz > size - desc) return false;
        if (h.n_type == NT_GNU_BUILD_ID && h.n_namesz == 4 && memcmp(seg + name, "GNU", 4) == 0 && h.n_descsz > 0) {
            *desc_out = seg + desc;
            *len = h.n_descsz;
            return true;
        }
        size_t next = pad(desc + h.n_descsz, align);
        if (next <= off || next > size) return false;
        off = next;
    }
    return false;
}

/* The build-id note among the object's PT_NOTE segments. */
static bool object_note(const struct dl_phdr_info *info, const unsigned char **desc, size_t *len) {
    for (size_t i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *p = &info->dlpi_phdr[i];
        if (p->p_type != PT_NOTE) continue;
        const unsigned char *seg = (const unsigned char *)((uintptr_t)info->dlpi_addr + (uintptr_t)p->p_vaddr);
        if (note_find(seg, (size_t)p->p_filesz, p->p_align == 8 ? 8 : 4, desc, len)) return true;
    }
    return false;
}

/* Writes a build-id as its identity string (see kt__code_id_kind). */
static void note_text(const unsigned char *desc, size_t n, char *out) {
    if (n <= NOTE_MAX) {
        memcpy(out, "build-id:", 9);
        hex(desc, n, out + 9);
    } else {
        memcpy(out, "build-id~", 9);
        kt__hex128(kt__fnv1a(desc, n, 0x6275696c64ull), kt__fnv1a(desc, n, 0x6e6f7465ull), out + 9);
    }
}

/* FNV-1a over a loaded segment, read as the raw bytes of the mapping: an AddressSanitizer build
 * places redzones between an object's globals, which this read crosses on purpose. */
#if defined(__GNUC__)
__attribute__((no_sanitize("address")))
#endif
static uint64_t segment_hash(const unsigned char *p, size_t len, uint64_t h) {
    h ^= 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static int visit(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    seek *s = data;
    if (!holds(info, s->addr)) return 0;
    const unsigned char *desc;
    size_t n;
    if (object_note(info, &desc, &n)) {
        note_text(desc, n, s->out);
        s->kind = KT__CODE_ID_BUILD_ID;
        return 1;
    }
    uint64_t a = 0x696d616765ull, b = 0x636f6465ull;
    for (size_t i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *p = &info->dlpi_phdr[i];
        if (p->p_type != PT_LOAD || !(p->p_flags & PF_R) || (p->p_flags & PF_W)) continue;
        const unsigned char *seg = (const unsigned char *)((uintptr_t)info->dlpi_addr + (uintptr_t)p->p_vaddr);
        uint64_t where[2] = {(uint64_t)p->p_vaddr, (uint64_t)p->p_filesz};
        a = segment_hash(seg, (size_t)p->p_filesz, kt__fnv1a(where, sizeof where, a));
        b = segment_hash(seg, (size_t)p->p_filesz, kt__fnv1a(where, sizeof where, b));
    }
    memcpy(s->out, "image:", 6);
    kt__hex128(a, b, s->out + 6);
    s->kind = KT__CODE_ID_IMAGE;
    return 1;
}

typedef struct raw_seek {
    uintptr_t addr;
    unsigned char *id;
    size_t max, len;
} raw_seek;

static int raw_visit(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    raw_seek *s = data;
    if (!holds(info, s->addr)) return 0;
    const unsigned char *desc;
    size_t n;
    if (object_note(info, &desc, &n) && n <= s->max) {
        memcpy(s->id, desc, n);
        s->len = n;
    }
    return 1;
}

size_t kt__build_id_of(const void *addr, unsigned char *id, size_t max) {
    raw_seek s = {.addr = (uintptr_t)addr, .id = id, .max = max, .len = 0};
    if (addr != NULL) dl_iterate_phdr(raw_visit, &s);
    return s.len;
}

bool kt__code_object_of(const void *addr, kt__code_object *obj) {
    *obj = (kt__code_object){.file = "", .base = NULL};
    Dl_info info;
    if (addr == NULL || dladdr(addr, &info) == 0 || info.dli_fbase == NULL) return false;
    if (info.dli_fname) obj->file = info.dli_fname;
    obj->base = info.dli_fbase;
    return true;
}

kt__code_id_kind kt__code_id(const void *addr, char out[KT__CODE_ID_MAX], kt__code_object *obj) {
    out[0] = '\0';
    if (!kt__code_object_of(addr, obj)) return KT__CODE_ID_NONE;
    seek s = {.addr = (uintptr_t)addr, .kind = KT__CODE_ID_NONE, .out = out};
    dl_iterate_phdr(visit, &s);
    return s.kind;
}

#else /* no ELF dynamic loader to ask */

size_t kt__build_id_of(const void *addr, unsigned char *id, size_t max) {
    (void)addr, (void)id, (void)max;
    return 0;
}

bool kt__code_object_of(const void *addr, kt__code_object *obj) {
    (void)addr;
    *obj = (kt__code_object){.file = "", .base = NULL};
    return false;
}

kt__code_id_kind kt__code_id(const void *addr, char out[KT__CODE_ID_MAX], kt__code_object *obj) {
    out[0] = '\0';
    kt__code_object_of(addr, obj);
    return KT__CODE_ID_NONE;
}

#endif
