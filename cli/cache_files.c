/*
 * cache_files.c - `kerntune cache export|import|rm|clear`: decisions out of the persistent cache
 * into a wisdom file (written only as a regular file), into it from one (read within a size
 * limit), and removed.
 */
#define _DEFAULT_SOURCE
#include "cache_int.h"
#include "text.h"

#include <kerntune.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <stdint.h>
#include <unistd.h>

/* The largest wisdom document import reads (bytes): far more than a cache of thousands of
 * decisions with every unit of their spaces, and a bound on what a wrong file costs. */
#define WISDOM_LIMIT ((size_t)256 << 20)

/* Writes text to path, a regular file or a new one: a FIFO, a device or a directory is refused
 * before anything is written (and opened without waiting for a reader). NULL on success, else
 * why (allocated). */
static char *write_regular(const char *path, const char *text) {
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return cli_format("is %s; expected a regular file (or a new one)", cli_file_kind(st.st_mode));
    int fd = open(path, O_WRONLY | O_CREAT | O_NONBLOCK | O_CLOEXEC, 0666);
    if (fd < 0) return cli_format("%s", strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) { /* replaced since it was looked at */
        char *why = cli_format("is %s; expected a regular file (or a new one)", cli_file_kind(st.st_mode));
        close(fd);
        return why;
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0) fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    size_t len = strlen(text), at = 0;
    int e = ftruncate(fd, 0) == 0 ? 0 : errno;
    while (e == 0 && at < len) {
        ssize_t w = write(fd, text + at, len - at);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) e = w < 0 ? errno : EIO;
        else at += (size_t)w;
    }
    if (close(fd) != 0 && e == 0) e = errno;
    return e ? cli_format("%s", strerror(e)) : NULL;
}

int run_export(const opts *o, kt_cache *c) {
    char *text = NULL;
    if (kt_cache_export(c, o->op, o->device, &text) != KT_OK) return cache_failed(o);
    if (o->output == NULL) {
        fputs(text, stdout);
        kt_free(text);
        return 0;
    }
    json_t *doc = json_loads(text, 0, NULL);
    size_t n = json_array_size(json_object_get(doc, "entries"));
    json_decref(doc);
    char *why = write_regular(o->output, text);
    kt_free(text);
    if (why != NULL) {
        cache_report(1, "export", "%s: %s", o->output, why);
        free(why);
        return 1;
    }
    if (o->json) {
        json_t *v = json_pack("{s:I, s:s}", "exported", (json_int_t)n, "file", o->output);
        cache_print_json(v);
        json_decref(v);
    } else {
        printf("exported %zu decision%s to %s\n", n, n == 1 ? "" : "s", o->output);
    }
    return 0;
}

/* Reads a wisdom document into a NUL-terminated buffer: a regular file of at most WISDOM_LIMIT
 * bytes (a FIFO, a device or a directory is refused before anything is read from it, so
 * nothing waits on a writer or reads without end), or stdin for "-", read up to the same
 * limit. NULL on failure, with the reason in *why (allocated; NULL when out of memory). */
char *cli_read_wisdom(const char *path, const char *name, char **why) {
    *why = NULL;
    bool in = strcmp(path, "-") == 0;
    int fd = in ? 0 : open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || (!in && fstat(fd, &st) != 0)) {
        *why = cli_format("%s: %s", name, strerror(errno));
        if (fd >= 0) close(fd);
        return NULL;
    }
    size_t want = WISDOM_LIMIT + 1; /* stdin: up to one byte past the limit, to know it is past */
    if (!in) {
        if (!S_ISREG(st.st_mode))
            *why = cli_format("%s: is %s; expected a regular file (or - for stdin)", name, cli_file_kind(st.st_mode));
        else if ((uintmax_t)st.st_size > WISDOM_LIMIT)
            *why = cli_format("%s: is %jd bytes; kerntune reads at most %zu MiB of wisdom", name, (intmax_t)st.st_size,
                              WISDOM_LIMIT >> 20);
        if (*why != NULL) {
            close(fd);
            return NULL;
        }
        int flags = fcntl(fd, F_GETFL);
        if (flags >= 0) fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
        want = (size_t)st.st_size; /* what it holds now: a file that grows meanwhile is read as it was */
    }
    size_t n = 0, cap = in ? 65536 : want + 1;
    char *buf = malloc(cap);
    while (buf != NULL && n < want) {
        if (n + 1 == cap) { /* stdin only: grow, never past the limit and its extra byte */
            size_t more = cap > (want + 1) / 2 ? want + 1 : cap * 2;
            char *p = realloc(buf, more);
            if (p == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = p;
            cap = more;
        }
        size_t room = cap - 1 - n;
        ssize_t got = read(fd, buf + n, room < want - n ? room : want - n);
        if (got < 0 && errno == EINTR) continue;
        if (got > 0) {
            n += (size_t)got;
            continue;
        }
        if (got < 0 || !in) { /* an error, or a file shorter than it was: it changed while it was read */
            *why = got < 0 ? cli_format("%s: %s", name, strerror(errno))
                           : cli_format("%s: changed while it was read (%zu of %zu bytes)", name, n, want);
            free(buf);
            buf = NULL;
        }
        break;
    }
    if (!in) close(fd);
    if (buf != NULL && n > WISDOM_LIMIT) {
        *why = cli_format("%s: more than %zu MiB; kerntune reads at most %zu MiB of wisdom", name, WISDOM_LIMIT >> 20,
                          WISDOM_LIMIT >> 20);
        free(buf);
        buf = NULL;
    }
    if (buf != NULL) buf[n] = '\0';
    return buf;
}

int run_import(const opts *o, kt_cache *c) {
    const char *name = strcmp(o->file, "-") == 0 ? "(stdin)" : o->file;
    char *why = NULL;
    char *text = cli_read_wisdom(o->file, name, &why);
    if (text == NULL) {
        cache_report(1, "import", "%s", why ? why : "out of memory");
        free(why);
        return 1;
    }
    /* syntax errors reported as FILE:LINE:COLUMN, as for T1 problems */
    json_error_t err;
    json_t *doc = json_loads(text, JSON_REJECT_DUPLICATES, &err);
    if (doc == NULL) {
        free(text);
        return cache_report(1, "import", "%s:%d:%d: %s", name, err.line, err.column, err.text);
    }
    json_decref(doc);
    size_t added, replaced, kept;
    kt_status st = kt_cache_import(c, text, o->replace, &added, &replaced, &kept);
    free(text);
    if (st != KT_OK) {
        static const char prefix[] = "kt_cache_import: ";
        const char *msg = kt_last_error();
        if (strncmp(msg, prefix, sizeof prefix - 1) == 0) msg += sizeof prefix - 1;
        return cache_report(1, "import", "%s: %s", name, msg);
    }
    if (o->json) {
        json_t *v = json_pack("{s:s, s:I, s:I, s:I}", "file", name, "added", (json_int_t)added, "replaced", (json_int_t)replaced, "kept",
                              (json_int_t)kept);
        cache_print_json(v);
        json_decref(v);
    } else {
        printf("imported %s: %zu added, %zu replaced, %zu kept\n", name, added, replaced, kept);
    }
    return 0;
}

static int print_removed(const opts *o, size_t n) {
    if (o->json) {
        json_t *v = json_pack("{s:I}", "removed", (json_int_t)n);
        cache_print_json(v);
        json_decref(v);
    } else {
        printf("removed %zu decision%s\n", n, n == 1 ? "" : "s");
    }
    return 0;
}

int run_rm(const opts *o, kt_cache *c) {
    size_t n;
    if (kt_cache_remove(c, o->op, o->device, &n) != KT_OK) return cache_failed(o);
    return print_removed(o, n);
}

int run_clear(const opts *o, kt_cache *c) {
    size_t n;
    if (kt_cache_remove(c, NULL, NULL, &n) != KT_OK) return cache_failed(o);
    return print_removed(o, n);
}
