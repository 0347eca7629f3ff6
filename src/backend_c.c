/*
 * backend_c.c - the C backend: the host CPU as a device.
 *
 * Native candidates (C function pointers) and, later, C kernels compiled by the system compiler
 * run here. The fingerprint records what can change a decision on a CPU: the model, the
 * instruction-set flags, the number of hardware threads and the cache sizes.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

/* Reads the value of the first "key<spaces>: value" line of /proc/cpuinfo into out; returns
 * whether it was found. */
static bool cpuinfo_field(const char *key, char *out, size_t outlen) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f == NULL) return false;
    char line[8192];
    size_t klen = strlen(key);
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        if (strncmp(line, key, klen) != 0) continue;
        const char *p = line + klen;
        while (*p == ' ' || *p == '\t') p++;
        if (*p != ':') continue;
        p++;
        while (*p == ' ') p++;
        snprintf(out, outlen, "%s", p);
        out[strcspn(out, "\n")] = '\0';
        found = true;
    }
    fclose(f);
    return found;
}

static size_t c_device_count(void *state) {
    (void)state;
    return 1;
}

static long cache_size(int name) {
#ifdef _SC_LEVEL1_DCACHE_SIZE
    long v = sysconf(name);
    return v > 0 ? v : 0;
#else
    (void)name;
    return 0;
#endif
}

static kt_status c_device_describe(void *state, size_t index, char *name, char *fp, char *err,
                                   size_t errlen) {
    (void)state;
    if (index != 0) {
        snprintf(err, errlen, "device %zu does not exist (the C backend has one)", index);
        return KT_ERR_INVALID_ARGUMENT;
    }
    struct utsname u;
    if (uname(&u) != 0) snprintf(u.machine, sizeof u.machine, "unknown");
    char model[256] = "", flags[8192] = "";
    if (!cpuinfo_field("model name", model, sizeof model) && !cpuinfo_field("Model", model, sizeof model) &&
        !cpuinfo_field("CPU part", model, sizeof model))
        snprintf(model, sizeof model, "%s CPU", u.machine);
    if (!cpuinfo_field("flags", flags, sizeof flags)) cpuinfo_field("Features", flags, sizeof flags);
    long threads = sysconf(_SC_NPROCESSORS_ONLN);
    long l1 = 0, l2 = 0, l3 = 0;
#ifdef _SC_LEVEL1_DCACHE_SIZE
    l1 = cache_size(_SC_LEVEL1_DCACHE_SIZE);
    l2 = cache_size(_SC_LEVEL2_CACHE_SIZE);
    l3 = cache_size(_SC_LEVEL3_CACHE_SIZE);
#endif
    snprintf(name, KT_DEVICE_NAME_MAX, "%.200s (%ld threads)", model, threads);
    snprintf(fp, KT_DEVICE_FINGERPRINT_MAX, "cpu:%.200s|arch=%.64s|threads=%ld|l1d=%ld|l2=%ld|l3=%ld|flags=%016llx",
             model, u.machine, threads, l1, l2, l3,
             (unsigned long long)kt__fnv1a(flags, strlen(flags), 0));
    return KT_OK;
}

/* Host memory: the C backend's buffers are plain malloc'd memory, its "device" is the host. */
static kt_status c_buffer_alloc(void *state, size_t device, size_t bytes, void **out, char *err, size_t errlen) {
    (void)state, (void)device;
    *out = malloc(bytes ? bytes : 1);
    if (*out == NULL) {
        snprintf(err, errlen, "out of memory allocating %zu bytes", bytes);
        return KT_ERR_NO_MEMORY;
    }
    return KT_OK;
}

static void c_buffer_free(void *state, size_t device, void *buffer) {
    (void)state, (void)device;
    free(buffer);
}

static kt_status c_buffer_copy(void *state, size_t device, void *dst, const void *src, size_t bytes,
                               kt_copy_dir dir, char *err, size_t errlen) {
    (void)state, (void)device, (void)dir, (void)err, (void)errlen;
    if (bytes) memmove(dst, src, bytes);
    return KT_OK;
}

static kt_status c_buffer_fill(void *state, size_t device, void *buffer, size_t bytes, const void *pattern,
                               size_t pattern_bytes, char *err, size_t errlen) {
    (void)state, (void)device;
    if (pattern_bytes == 0 || bytes % pattern_bytes != 0) {
        snprintf(err, errlen, "fill of %zu bytes with a %zu-byte pattern", bytes, pattern_bytes);
        return KT_ERR_INVALID_ARGUMENT;
    }
    unsigned char *p = buffer;
    if (pattern_bytes == 1) {
        memset(p, *(const unsigned char *)pattern, bytes);
        return KT_OK;
    }
    /* Write the pattern once, then double the filled prefix until the buffer is full. */
    size_t done = pattern_bytes < bytes ? pattern_bytes : bytes;
    memcpy(p, pattern, done);
    while (done < bytes) {
        size_t n = done < bytes - done ? done : bytes - done;
        memcpy(p + done, p, n);
        done += n;
    }
    return KT_OK;
}

static const kt_backend kt__backend_c = {
    .abi_version = KT_BACKEND_ABI_VERSION,
    .name = "c",
    .init = NULL,
    .fini = NULL,
    .device_count = c_device_count,
    .device_describe = c_device_describe,
    .buffer_alloc = c_buffer_alloc,
    .buffer_free = c_buffer_free,
    .buffer_copy = c_buffer_copy,
    .buffer_fill = c_buffer_fill,
};

const kt_backend *kt_backend_c(void) { return &kt__backend_c; }
