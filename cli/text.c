/*
 * text.c - strings of any length, and where the command's output goes (see text.h).
 */
#define _XOPEN_SOURCE 700 /* nftw */
#include "text.h"

#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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

FILE *cli_json_begin(void) {
    fflush(stdout);
    int fd = fcntl(1, F_DUPFD_CLOEXEC, 3); /* not inherited by the processes this one starts */
    if (fd < 0) return NULL;
    FILE *json = fdopen(fd, "w");
    if (json == NULL) {
        close(fd);
        return NULL;
    }
    if (dup2(2, 1) < 0) {
        fclose(json);
        return NULL;
    }
    return json;
}

void cli_json_end(FILE *json) {
    if (json == NULL) return;
    fflush(stdout); /* what was printed meanwhile goes to stderr */
    fflush(json);
    dup2(fileno(json), 1);
    fclose(json);
}

char *cli_capture(void (*print)(FILE *out, const void *arg), const void *arg) {
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (m == NULL) return NULL;
    print(m, arg);
    if (fclose(m) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

int cli_remove_tree(const char *dir) { return nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

double cli_process_age_s(void) {
    static double first = -1; /* the fallback's origin */
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    double now = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
    if (first < 0) first = now;
    double age = now - first;
    FILE *f = fopen("/proc/self/stat", "r");
    char line[1024];
    long tick = sysconf(_SC_CLK_TCK);
    if (f && fgets(line, sizeof line, f) && tick > 0) {
        /* field 22, counted after the command name's closing parenthesis (the name may hold
         * spaces and parentheses): the third field after it is 4, so 22 is the 19th after ')' */
        const char *p = strrchr(line, ')');
        unsigned long long start = 0;
        int field = 2;
        for (p = p ? p + 1 : NULL; p && *p && field < 22; p++)
            if (*p == ' ') field++;
        if (p && field == 22 && sscanf(p, "%llu", &start) == 1) {
            double since = now - (double)start / (double)tick;
            if (since >= 0 && since < 86400.0 * 365) age = since;
        }
    }
    if (f) fclose(f);
    return age;
}

void cli_one_line(char *s) {
    for (unsigned char *p = (unsigned char *)s; p && *p; p++)
        if (*p < 0x20 || *p == 0x7f) *p = '?';
}
