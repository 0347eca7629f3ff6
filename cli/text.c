/*
 * text.c - strings of any length (see text.h).
 */
#include "text.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

char *cli_vformat(const char *fmt, va_list ap) {
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s != NULL) vsnprintf(s, (size_t)n + 1, fmt, again);
    va_end(again);
    return s;
}

char *cli_format(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = cli_vformat(fmt, ap);
    va_end(ap);
    return s;
}

const char *cli_file_kind(mode_t m) {
    if (S_ISREG(m)) return "a regular file";
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a regular file";
}
