/*
 * runner.c - kerntune-runner: runs candidates for a tuning process (see src/isolate/isolate.h).
 *
 * usage: kerntune-runner SOCKET_FD REGION_FD PARENT_PID
 * Started by the library (posix_spawn), never by hand, when every piece of code the runner
 * needs is in a shared object: it loads the backend's table, or the native candidates, from
 * those objects. It serves requests on the socket until the socket closes, and ends with the
 * tuning process. It prints nothing: what goes wrong is in its replies, or in how it died.
 */
#include "isolate/isolate.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

/* A descriptor or a pid from the command line: a whole decimal number in [0, max]. */
static int number(const char *s, long max, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < 0 || v > max) return -1;
    *out = v;
    return 0;
}

int main(int argc, char **argv) {
    long sock, region, parent;
    if (argc != 4 || number(argv[1], INT_MAX, &sock) != 0 || number(argv[2], INT_MAX, &region) != 0 ||
        number(argv[3], LONG_MAX, &parent) != 0) {
        fprintf(stderr, "kerntune-runner: started by the kerntune library, not by hand\n");
        return 2;
    }
    return kt__runner_serve((int)sock, (int)region, parent, false);
}
