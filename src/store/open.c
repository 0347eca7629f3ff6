/*
 * open.c - opening the persistent cache, and the public handle (kt_cache_open, _close, _path,
 * _warning, kt_cache_default_path, kt_free).
 *
 * Opening creates the directories (mode 0700), then decides between the file and an
 * in-memory store: a file or directory this process cannot write gives an in-memory store
 * (SQLite keeps its -wal and -shm files beside the file, so the directory must be writable
 * too), reported by kt_cache_warning; nothing is printed. A file found damaged while opening
 * is moved aside once (recovery.c) and a fresh store started in its place. Opening reads the
 * header, the schema and the first page of each table (schema.c), which finds most damage.
 */
#ifndef KT_NO_CACHE

#include "store/store_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The directory holding path ("." for a bare name). */
static void dir_of(const char *path, char *dir, size_t len) {
    const char *slash = strrchr(path, '/');
    if (slash == NULL) snprintf(dir, len, ".");
    else if (slash == path) snprintf(dir, len, "/");
    else snprintf(dir, len, "%.*s", (int)(slash - path), path);
}

static kt_status open_connection(kt_cache *c, const char *file, const char *where) {
    int rc = sqlite3_open_v2(file, &c->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        kt_status st = kt__db_fail(c, rc, where, "cannot open the store");
        sqlite3_close_v2(c->db);
        c->db = NULL;
        return st;
    }
    sqlite3_extended_result_codes(c->db, 1);
    sqlite3_busy_timeout(c->db, KT__STORE_BUSY_MS);
    return KT_OK;
}

static kt_status open_memory(kt_cache *c, const char *where) {
    kt_status st = open_connection(c, ":memory:", where);
    if (st == KT_OK) st = kt__db_exec(c, kt__schema, where);
    free(c->path);
    c->path = kt__db_dup(":memory:");
    c->in_memory = true;
    if (st == KT_OK && c->path == NULL) st = kt__err(KT_ERR_NO_MEMORY, "%s: out of memory copying the path ':memory:'", where);
    return st;
}

static bool is_perm_errno(int e) { return e == EACCES || e == EPERM || e == EROFS; }

/* Falls back to an in-memory store because path cannot be written; why says how we know. */
static kt_status fall_back(kt_cache *c, const char *path, const char *why, const char *where) {
    if (c->db != NULL) sqlite3_close_v2(c->db);
    c->db = NULL;
    kt_status st = open_memory(c, where);
    if (st == KT_OK)
        kt__db_warn(c, "'%s' cannot be written (%s); using an in-memory store: decisions will not outlive this process", path, why);
    return st;
}

/* Whether path is an SQLite file that ends inside a page (cut short: SQLite writes whole
 * pages), by its header's page size. SQLite reads the missing bytes as zeros, and a write
 * transaction rolled back would round the file up: such a file is damaged, not refused as it
 * is (found by fuzz-store). */
static bool cut_inside_a_page(const char *path, long long *size, unsigned *page) {
    FILE *f = fopen(path, "rb");
    unsigned char h[100];
    bool cut = false;
    if (f != NULL && fread(h, 1, sizeof h, f) == sizeof h && memcmp(h, "SQLite format 3", 16) == 0 && fseek(f, 0, SEEK_END) == 0) {
        *page = h[16] == 0 && h[17] == 1 ? 65536u : (unsigned)h[16] << 8 | h[17];
        *size = ftell(f);
        cut = *page >= 512 && (*page & (*page - 1)) == 0 && *size > 0 && *size % *page != 0;
    }
    if (f) fclose(f);
    return cut;
}

/* Opens path and sets it up, retrying while other processes hold locks. */
kt_status kt__open_file_once(kt_cache *c, const char *path, const char *where) {
    long long size = 0;
    unsigned page = 0;
    if (cut_inside_a_page(path, &size, &page)) {
        c->rc = SQLITE_CORRUPT;
        return kt__err(KT_ERR_SYSTEM, "%s: the file ends inside a page (%lld bytes, pages of %u): it was cut short", where, size, page);
    }
    kt_status st = open_connection(c, path, where);
    if (st != KT_OK) return st;
    int64_t deadline = kt__db_now_ms() + KT__STORE_BUSY_MS;
    uint32_t seed = (uint32_t)(uintptr_t)c ^ (uint32_t)getpid();
    for (;;) {
        c->rc = SQLITE_OK;
        st = kt__schema_setup(c, where);
        if (st == KT_OK || !kt__db_is_busy(c->rc) || kt__db_now_ms() >= deadline) return st;
        kt__db_nap(&seed);
    }
}

/* Opens a file store: directories, the writability checks that decide on the in-memory
 * fallback, then the file itself, moving it aside once if it is damaged. */
static kt_status open_file(kt_cache *c, const char *path, const char *where) {
    if (strlen(path) >= KT__STORE_PATH_MAX)
        return kt__err(KT_ERR_LIMIT, "%s: the path has %zu characters; at most %d", where, strlen(path), KT__STORE_PATH_MAX - 1);
    c->path = kt__db_dup(path);
    if (c->path == NULL) return kt__err(KT_ERR_NO_MEMORY, "%s: out of memory copying the path", where);
    char dir[KT__STORE_PATH_MAX], why[KT__STORE_PATH_MAX + 128];
    int e = kt__make_dirs(path, false, dir, sizeof dir); /* the directories above the file */
    if (e != 0) {
        snprintf(why, sizeof why, "cannot create directory '%s': %s", dir, strerror(e));
        if (is_perm_errno(e)) return fall_back(c, path, why, where);
        return kt__err(KT_ERR_SYSTEM, "%s: %s", where, why);
    }
    struct stat sb;
    if (stat(path, &sb) == 0) {
        if (!S_ISREG(sb.st_mode)) return kt__err(KT_ERR_INVALID_ARGUMENT, "%s: not a regular file", where);
        if (access(path, R_OK | W_OK) != 0) {
            e = errno;
            snprintf(why, sizeof why, "the file is not readable and writable: %s", strerror(e));
            if (is_perm_errno(e)) return fall_back(c, path, why, where);
            return kt__err(KT_ERR_SYSTEM, "%s: %s", where, why);
        }
    } else if (errno != ENOENT) {
        return kt__err(KT_ERR_SYSTEM, "%s: %s", where, strerror(errno));
    }
    dir_of(path, dir, sizeof dir);
    if (access(dir, W_OK | X_OK) != 0) {
        e = errno;
        snprintf(why, sizeof why, "its directory '%s' is not writable, and SQLite keeps the -wal and -shm files there: %s", dir, strerror(e));
        if (is_perm_errno(e)) return fall_back(c, path, why, where);
        return kt__err(KT_ERR_SYSTEM, "%s: %s", where, why);
    }
    uint32_t seed = (uint32_t)(uintptr_t)c ^ (uint32_t)getpid();
    for (int attempt = 0, moved = 0;; attempt++) {
        struct stat seen = {0};
        stat(path, &seen);
        kt_status st = kt__open_file_once(c, path, where);
        if (st == KT_OK) {
            if (stat(path, &c->seen) != 0) memset(&c->seen, 0, sizeof c->seen);
            c->recoverable = true;
            if (strcmp(c->journal, "wal") != 0)
                kt__db_warn(c, "'%s' cannot use WAL mode here (journal mode '%s'; a network file system?): other processes' readers and writers wait for each other",
                            path, c->journal);
            return KT_OK;
        }
        int rc = c->rc;
        sqlite3_close_v2(c->db);
        c->db = NULL;
        /* the file was moved aside or replaced by another process while this one opened it (the
         * damaged file's finder, whose renames of the -wal and -shm files an opener of the old
         * file sees as an I/O error): whatever went wrong, open what the path names now */
        struct stat now;
        const bool known = seen.st_ino != 0; /* the file existed before the open: its inode is known */
        const bool replaced = known && (stat(path, &now) != 0 || now.st_dev != seen.st_dev || now.st_ino != seen.st_ino);
        if (replaced && attempt < 8) {
            kt__db_nap(&seed);
            continue;
        }
        if (kt__db_is_damaged(rc) && known && !replaced && !moved) {
            moved = 1;
            e = kt__recover_move_aside(c, path, &seen, sqlite3_errstr(rc));
            if (e == 0) continue;
            snprintf(why, sizeof why, "it is damaged (%s) and cannot be moved aside: %s", sqlite3_errstr(rc), strerror(e));
            if (is_perm_errno(e)) return fall_back(c, path, why, where);
            return kt__err(KT_ERR_SYSTEM, "%s: %s", where, why);
        }
        if (kt__db_is_unwritable(rc)) {
            /* the detail of the failure, without the "kt_cache_open('...'): " it starts with */
            const char *detail = kt_last_error();
            if (strncmp(detail, where, strlen(where)) == 0 && strncmp(detail + strlen(where), ": ", 2) == 0) detail += strlen(where) + 2;
            snprintf(why, sizeof why, "%s", detail);
            return fall_back(c, path, why, where);
        }
        return st;
    }
}


static void cache_free(kt_cache *c) {
    if (c->db != NULL) sqlite3_close_v2(c->db);
    free(c->path);
    free(atomic_load(&c->warning));
    for (size_t i = 0; i < c->nretired; i++) free(c->retired[i]);
    free(c->retired);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

/* ---- the public handle --------------------------------------------------------------------- */

static kt_status put_path(char *buf, size_t len, const char *fmt, const char *a, const char *b) {
    int n = snprintf(buf, len, fmt, a, b);
    if (n < 0 || (size_t)n >= len) {
        if (len > 0) buf[0] = '\0';
        return kt__err(KT_ERR_LIMIT, "kt_cache_default_path: the path needs %d bytes, buf has %zu", n + 1, len);
    }
    return KT_OK;
}

kt_status kt_cache_default_path(char *buf, size_t len) {
    if (buf == NULL) return kt__err(KT_ERR_NULL, "kt_cache_default_path: buf is NULL");
    const char *e = getenv("KERNTUNE_CACHE");
    if (e != NULL && *e != '\0') {
        if (strcmp(e, "off") == 0) {
            if (len > 0) buf[0] = '\0';
            return kt__err(KT_ERR_NOT_FOUND, "kt_cache_default_path: KERNTUNE_CACHE=off: the persistent cache is switched off");
        }
        return put_path(buf, len, "%s%s", e, "");
    }
    e = getenv("XDG_CACHE_HOME");
    if (e != NULL && e[0] == '/') return put_path(buf, len, "%s%s", e, "/kerntune/cache.db");
    e = getenv("HOME");
    if (e != NULL && *e != '\0') return put_path(buf, len, "%s%s", e, "/.cache/kerntune/cache.db");
    if (len > 0) buf[0] = '\0';
    return kt__err(KT_ERR_NOT_FOUND, "kt_cache_default_path: none of KERNTUNE_CACHE, XDG_CACHE_HOME (absolute) and HOME is set");
}

kt_status kt_cache_open(const char *path, kt_cache **out) {
    if (out == NULL) return kt__err(KT_ERR_NULL, "kt_cache_open: out is NULL");
    *out = NULL;
    if (!sqlite3_threadsafe())
        return kt__err(KT_ERR_STATE, "kt_cache_open: the SQLite library in use was built without threads (SQLITE_THREADSAFE=0)");
    char def[KT__STORE_PATH_MAX];
    if (path == NULL) {
        kt_status st = kt_cache_default_path(def, sizeof def);
        if (st != KT_OK) {
            return kt__err(st, "kt_cache_open(NULL): %s", kt_last_error() + strlen("kt_cache_default_path: "));
        }
        path = def;
    }
    char where[600];
    snprintf(where, sizeof where, "kt_cache_open('%.512s')", path);
    if (path[0] == '\0') return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_cache_open: path is empty");
    kt_cache *c = calloc(1, sizeof *c);
    if (c == NULL) return kt__err(KT_ERR_NO_MEMORY, "%s: out of memory allocating the handle", where);
    if (pthread_mutex_init(&c->lock, NULL) != 0) {
        free(c);
        return kt__err(KT_ERR_SYSTEM, "%s: cannot create a mutex", where);
    }
    kt_status st = strcmp(path, ":memory:") == 0 ? open_memory(c, where) : open_file(c, path, where);
    if (st != KT_OK) {
        cache_free(c);
        return st;
    }
    *out = c;
    return KT_OK;
}

void kt_cache_close(kt_cache *cache) {
    if (cache != NULL) cache_free(cache);
}

const char *kt_cache_path(const kt_cache *cache) { return cache ? cache->path : NULL; }

const char *kt_cache_warning(const kt_cache *cache) {
    if (cache == NULL) return "";
    const char *w = atomic_load((_Atomic(char *) *)&cache->warning);
    return w ? w : "";
}

void kt_free(void *p) { free(p); }

#endif /* KT_NO_CACHE */
