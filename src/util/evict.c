/*
 * evict.c - taking a range of host memory out of every level of the CPU's caches.
 *
 * A measured run that should start on a cold cache needs its own data out of the caches, not
 * the whole cache rewritten: writing a buffer as large as the last-level cache costs a run as
 * much time as that cache is large, and a server part reports its whole shared L3 (480 MiB on an
 * Intel Xeon VM of two cores, 256 MiB on an EPYC), which made every run of a small kernel pay
 * 30 to 60 ms for it. Evicting the lines of the run's buffers costs what the buffers are large,
 * and leaves no dirty lines of a flush buffer behind for the measured run to write back.
 *
 * x86-64: CLFLUSHOPT where the processor has it (CPUID leaf 7), else CLFLUSH (every x86-64
 * has it), one per cache line (the line size CPUID leaf 1 gives), then MFENCE so that the
 * evictions are complete before the run starts. AArch64: DC CIVAC (clean and invalidate to the
 * point of coherency, which Linux lets user space do) per line of the size CTR_EL0 gives, then
 * DSB ISH. Elsewhere kt__evict_supported says no, and the caller writes a cache-sized buffer as
 * before. The instructions read and write nothing a sanitizer watches.
 */
#include "util/util.h"

#include <stdint.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>

static size_t line_bytes(bool *opt) {
    unsigned a = 0, b = 0, c = 0, d = 0;
    size_t line = 64;
    if (__get_cpuid(1, &a, &b, &c, &d) && ((b >> 8) & 0xff) != 0) line = ((b >> 8) & 0xff) * 8;
    *opt = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b >> 23 & 1);
    return line;
}

bool kt__evict_supported(void) { return true; }

void kt__evict(const void *p, size_t bytes) {
    static _Atomic size_t cached_line; /* 0: not read yet; low bit: CLFLUSHOPT */
    size_t v = cached_line;
    if (v == 0) {
        bool opt = false;
        size_t line = line_bytes(&opt);
        cached_line = v = line | (opt ? 1 : 0);
    }
    size_t line = v & ~(size_t)1;
    if (p == NULL || bytes == 0) return;
    uintptr_t at = (uintptr_t)p & ~(uintptr_t)(line - 1), end = (uintptr_t)p + bytes;
    if (v & 1) {
        for (; at < end; at += line) __asm__ volatile(".byte 0x66; clflush (%0)" ::"r"(at) : "memory"); /* clflushopt */
    } else {
        for (; at < end; at += line) __asm__ volatile("clflush (%0)" ::"r"(at) : "memory");
    }
    __asm__ volatile("mfence" ::: "memory");
}

#elif defined(__aarch64__) && defined(__GNUC__)

bool kt__evict_supported(void) { return true; }

void kt__evict(const void *p, size_t bytes) {
    if (p == NULL || bytes == 0) return;
    uint64_t ctr;
    __asm__ volatile("mrs %0, ctr_el0" : "=r"(ctr));
    size_t line = (size_t)4 << ((ctr >> 16) & 0xf); /* DminLine: log2 of the words in the smallest line */
    uintptr_t at = (uintptr_t)p & ~(uintptr_t)(line - 1), end = (uintptr_t)p + bytes;
    for (; at < end; at += line) __asm__ volatile("dc civac, %0" ::"r"(at) : "memory");
    __asm__ volatile("dsb ish" ::: "memory");
}

#else

bool kt__evict_supported(void) { return false; }

void kt__evict(const void *p, size_t bytes) { (void)p, (void)bytes; }

#endif
