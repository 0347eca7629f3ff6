/*
 * fifo-hang.h - a compiler that hangs on purpose, for the tests of cancelled builds
 * (test-variants.c on the C backend, cuda-check.c on NVRTC): a variant group compiles with a
 * FIFO as a pre-included header, which nobody writes, so its compiler waits for ever in open().
 * A watcher thread ends a build that is never stopped after 60 s (the test then fails instead of
 * hanging the suite): it opens the FIFO for writing then, and closes it. With hold, it opens it
 * as soon as a reader waits (the compiler reached it: reader_seen) and holds it without writing,
 * so that the compiler stays blocked, now in read(): gcc's cc1 does; NVRTC reading a FIFO
 * with a writer fails the compile instead, so its test does not hold. fifo_unread says whether nobody reads the FIFO any
 * more, that is, whether the compiler was stopped. The fifo_hang must outlive the watcher
 * (static storage: a failed assertion may leave the test's frame). No test framework:
 * cuda-check runs where there is none.
 */
#ifndef KT_FIFO_HANG_H
#define KT_FIFO_HANG_H

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct fifo_hang {
    char dir[64], path[128];
    pthread_t watcher;
    bool started;
    bool hold; /* open the FIFO as soon as a reader waits, and hold it */
    int held;  /* the watcher's writer (-1: none) */
    _Atomic int stop, reader_seen, fired;
} fifo_hang;

static void fifo_nap_ms(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {}
}

static void *fifo_watch(void *arg) {
    fifo_hang *f = arg;
    for (int t = 0; t < 6000 && !atomic_load(&f->stop); t++) {
        if (f->hold && f->held < 0 && (f->held = open(f->path, O_WRONLY | O_NONBLOCK)) >= 0) atomic_store(&f->reader_seen, 1);
        fifo_nap_ms(10);
    }
    if (!atomic_load(&f->stop)) { /* 60 s: let the compiler finish */
        if (f->held < 0) f->held = open(f->path, O_WRONLY | O_NONBLOCK);
        if (f->held >= 0) atomic_store(&f->fired, 1);
    }
    if (f->held >= 0) close(f->held), f->held = -1;
    return NULL;
}

/* Makes the FIFO (f->path, in a fresh directory under /tmp) and starts the watcher: true when
 * both worked. */
static bool fifo_hang_start(fifo_hang *f, bool hold) {
    *f = (fifo_hang){.hold = hold, .held = -1};
    snprintf(f->dir, sizeof f->dir, "/tmp/kt-hang-XXXXXX");
    if (mkdtemp(f->dir) == NULL) return false;
    snprintf(f->path, sizeof f->path, "%s/hang.h", f->dir);
    if (mkfifo(f->path, 0600) != 0) return false;
    f->started = pthread_create(&f->watcher, NULL, fifo_watch, f) == 0;
    return f->started;
}

/* Whether nobody reads the FIFO within 10 s (a killed process takes a moment to be gone): a
 * writer's open fails with ENXIO then. One that succeeds is held open meanwhile, so that a
 * compiler still alive stays blocked instead of finishing. */
static bool fifo_unread(fifo_hang *f) {
    int held[256], nheld = 0;
    bool gone = false;
    for (int t = 0; t < 200 && !gone; t++) {
        int fd = open(f->path, O_WRONLY | O_NONBLOCK);
        if (fd < 0) {
            gone = errno == ENXIO;
        } else {
            if (nheld < 256) held[nheld++] = fd;
            else close(fd);
            fifo_nap_ms(50);
        }
    }
    for (int i = 0; i < nheld; i++) close(held[i]);
    return gone;
}

/* Stops the watcher, removes the FIFO and its directory; returns whether the watcher had to let
 * the compiler finish (a build nobody stopped). */
static bool fifo_hang_end(fifo_hang *f) {
    atomic_store(&f->stop, 1);
    if (f->started) pthread_join(f->watcher, NULL);
    f->started = false;
    unlink(f->path);
    rmdir(f->dir);
    return atomic_load(&f->fired) != 0;
}

static double fifo_now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#endif
