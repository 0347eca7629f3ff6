/*
 * recovery.c - damage: a file SQLite finds is not a database or is corrupt (a truncated file
 * counts fewer pages than its header says) is renamed to "<path>.corrupt-<unix time>" with its
 * -wal and -shm files, and a fresh store is started in its place. Damage found while opening
 * is handled by open.c through kt__recover_move_aside; damage SQLite meets deeper in the file
 * later is handled the same way during that call (kt__recover, from db.c's transaction
 * runner), which is then run again on the fresh store.
 *
 * Two processes finding the same damage move it once: the move happens under a lock on
 * "<path>.lock" (fcntl, plus a process-wide mutex, since fcntl locks do not exclude threads),
 * and only if the path still names the file that was found damaged (by inode: a file whose
 * inode was not known is never moved). What happened is reported by kt_cache_warning; nothing
 * is printed.
 */
#ifndef KT_NO_CACHE

#include "store/store_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t kt__recover_lock = PTHREAD_MUTEX_INITIALIZER;

/*
 * Moves a damaged store aside: "<path>.corrupt-<unix time>" (then "-2", "-3"... when taken),
 * its -wal and -shm files first, so that the fresh store can never replay the old WAL. Done
 * under the recovery lock, and only when path still names the file that was found damaged
 * (seen); otherwise another process or thread has moved it already. Returns 0 or an errno.
 */
int kt__recover_move_aside(kt_cache *c, const char *path, const struct stat *seen, const char *reason) {
    char lockpath[KT__STORE_PATH_MAX + 16], dest[KT__STORE_PATH_MAX + 64], from[KT__STORE_PATH_MAX + 16], to[KT__STORE_PATH_MAX + 80];
    snprintf(lockpath, sizeof lockpath, "%s.lock", path);
    pthread_mutex_lock(&kt__recover_lock);
    int fd = open(lockpath, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    int err = 0;
    if (fd < 0) err = errno;
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    while (err == 0 && fcntl(fd, F_SETLKW, &fl) != 0)
        if (errno != EINTR) err = errno;
    struct stat now;
    /* a file nobody saw (seen zeroed: no stat of it) is never moved: it may be a fresh store
     * another process just made, in use */
    if (err == 0 && seen->st_ino != 0 && stat(path, &now) == 0 && now.st_dev == seen->st_dev && now.st_ino == seen->st_ino) {
        long long t = (long long)time(NULL);
        snprintf(dest, sizeof dest, "%s.corrupt-%lld", path, t);
        struct stat sb;
        for (int n = 2; lstat(dest, &sb) == 0; n++) snprintf(dest, sizeof dest, "%s.corrupt-%lld-%d", path, t, n);
        static const char *const sides[] = {"-wal", "-shm"};
        for (size_t i = 0; i < 2 && err == 0; i++) {
            snprintf(from, sizeof from, "%s%s", path, sides[i]);
            snprintf(to, sizeof to, "%s%s", dest, sides[i]);
            if (rename(from, to) != 0 && errno != ENOENT) err = errno;
        }
        if (err == 0 && rename(path, dest) != 0) err = errno;
        if (err == 0) kt__db_warn(c, "'%s' was damaged (%s); moved it aside to '%s' and started a fresh store", path, reason, dest);
    } else if (err == 0 && seen->st_ino == 0) {
        kt__db_warn(c, "'%s' was damaged (%s); not moved aside: which file was found damaged is not known", path, reason);
    } else if (err == 0) {
        kt__db_warn(c, "'%s' was damaged (%s); another process had already moved it aside", path, reason);
    }
    if (fd >= 0) close(fd); /* releases the fcntl lock */
    pthread_mutex_unlock(&kt__recover_lock);
    return err;
}

/* Damage found during a call: close, move the file aside (if still there), open a fresh one. */
kt_status kt__recover(kt_cache *c, const char *where) {
    const char *reason = sqlite3_errstr(c->rc);
    sqlite3_close_v2(c->db);
    c->db = NULL;
    c->recoverable = false;
    int e = kt__recover_move_aside(c, c->path, &c->seen, reason);
    if (e != 0) return kt__err(KT_ERR_SYSTEM, "%s: the store is damaged (%s) and cannot be moved aside: %s", where, reason, strerror(e));
    kt_status st = kt__open_file_once(c, c->path, where);
    if (st != KT_OK) {
        sqlite3_close_v2(c->db);
        c->db = NULL;
        return st;
    }
    if (stat(c->path, &c->seen) != 0) memset(&c->seen, 0, sizeof c->seen);
    c->recoverable = true;
    return KT_OK;
}

#endif /* KT_NO_CACHE */
