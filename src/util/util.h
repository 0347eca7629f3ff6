/*
 * util.h - what every stage of the library may use: the per-thread detail message, names,
 * hashing and the clock. Depends on nothing but the public header; not installed.
 *
 * Internal names carry a kt__ prefix (public ones kt_).
 */
#ifndef KT_UTIL_H
#define KT_UTIL_H

#include <kerntune.h>

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KT__NAME_MAX 127             /* longest op, argument or candidate name */
#define KT__ERRBUF 1024              /* bytes of the per-thread detail message (longer ones: the heap) */

#if defined(__GNUC__)
#define KT__LIKELY(x) __builtin_expect(!!(x), 1)
#define KT__UNLIKELY(x) __builtin_expect(!!(x), 0)
#define KT__PRINTF(f, a) __attribute__((format(printf, f, a)))
/* A function of the hit path: GCC places these together (.text.hot), so that a hit, which runs
 * between a caller's and a driver's code, reads a few lines of instructions, not one in each
 * corner of the library; and their error branches go out of line (KT__COLD). */
#define KT__HOT __attribute__((hot))
#define KT__COLD __attribute__((cold, noinline))
#else
#define KT__HOT
#define KT__COLD
#define KT__LIKELY(x) (x)
#define KT__UNLIKELY(x) (x)
#define KT__PRINTF(f, a)
#endif

/* ---- status.c: the per-thread detail message ------------------------------------------------ */
/* Formats the calling thread's detail message and returns status, so that a failing path reads
 * `return kt__err(KT_ERR_X, "kt_fn(...): what", ...);`. */
kt_status kt__err(kt_status status, const char *fmt, ...) KT__PRINTF(2, 3);
kt_status kt__verr(kt_status status, const char *fmt, va_list ap);

/* A copy of the calling thread's detail message (NULL when out of memory), and putting such a
 * copy back as the message (freeing it) with status returned: for work that must not disturb
 * the caller's last error, or a message that must outlive further calls. */
char *kt__error_save(void);
kt_status kt__error_restore(kt_status status, char *saved);


/* Duplicates a name after checking it is 1..KT__NAME_MAX characters; reports as `where`. */
kt_status kt__dup_name(const char *name, const char *where, char **out);

/* Writes a 64-bit FNV-1a hash of the bytes (hash.c). */
uint64_t kt__fnv1a(const void *data, size_t len, uint64_t seed);

/* Hashes a string with its terminator (NULL as ""), continuing from h (util.c). */
uint64_t kt__hash_str(const char *s, uint64_t h);

/* Writes v in decimal into out (NUL-terminated) and returns its length: snprintf's "%lld"
 * without its cost, for texts made once per configuration of a space of millions. */
int kt__int_text(int64_t v, char out[24]);

/* Writes two 64-bit words as 32 hex digits and a NUL (util.c). */
void kt__hex128(uint64_t a, uint64_t b, char out[33]);

/* Seconds on the monotonic clock (hash.c). */
double kt__now_s(void);

/* The processors this process may run on (its affinity: taskset, a container's cpuset), at least 1. */
size_t kt__processors(void);

/* Creates the directories of path, mode 0700 (as XDG asks of cache directories): each one above
 * it, and path itself when whole (a directory's path, not a file's). One that exists already
 * (also where mkdir says otherwise, as a read-only parent does) is fine. Returns 0, or an errno
 * (ENAMETOOLONG for a path over 4095 characters) with the directory that failed in failed
 * (util.c). */
int kt__make_dirs(const char *path, bool whole, char *failed, size_t len);

/* The whole of file path, with a NUL after it, in a buffer it allocates; its length in *len.
 * NULL when it cannot be opened (*opened false) or read (*opened true); an empty file is a buffer
 * holding the NUL alone (util.c). */
unsigned char *kt__read_whole(const char *path, size_t *len, bool *opened);

/* ---- evict.c: taking host memory out of the CPU's caches ------------------------------------- */
/* Whether kt__evict works on this processor (x86-64 and AArch64); elsewhere a caller that wants
 * a cold cache writes a buffer as large as the last-level cache instead. */
bool kt__evict_supported(void);

/* Writes back and invalidates every cache line of the bytes at p, in every level of the CPU's
 * caches, and waits until that is done. The bytes keep their values. Thread-safe. */
void kt__evict(const void *p, size_t bytes);

#endif /* KT_UTIL_H */
