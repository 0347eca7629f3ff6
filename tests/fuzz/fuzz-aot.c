/*
 * fuzz-aot.c - `kerntune aot --wisdom FILE` (cli/aot.c): the input is the wisdom file; the
 * command reads its decisions and emits the C tables (PREFIX.h, PREFIX.c) a program compiles.
 * Promises: the command succeeds and writes both files, or fails and says why; nothing of the
 * file escapes a literal of the emitted C: every string and character literal closes on its
 * line, and the files hold printable ASCII, tabs and newlines only (put_string escapes the rest).
 */
#include "fuzz.h"

#include "aot.h"

#include <fcntl.h>

static const char *dir;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    dir = fuzz_make_dir("aot");
    return 0;
}

/* The emitted C: printable, every literal closed on its line; false when it cannot be read. */
static bool check_c(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return false;
    int ch, quote = 0;
    long line = 1;
    bool escaped = false;
    while ((ch = fgetc(f)) != EOF) {
        fuzz_check(ch == '\n' || ch == '\t' || (ch >= 0x20 && ch <= 0x7e), "%s:%ld: byte 0x%02x", path, line, ch);
        if (ch == '\n') {
            fuzz_check(quote == 0, "%s:%ld: a literal runs past its line", path, line);
            line++;
        } else if (quote) {
            if (escaped) escaped = false;
            else if (ch == '\\') escaped = true;
            else if (ch == quote) quote = 0;
        } else if (ch == '"' || ch == '\'') {
            quote = ch;
        }
    }
    fclose(f);
    fuzz_check(quote == 0, "%s: a literal is not closed at the end", path);
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (dir == NULL) return 0;
    char wisdom[300], out[300], h[310], c[310];
    snprintf(wisdom, sizeof wisdom, "%s/wisdom.json", dir);
    snprintf(out, sizeof out, "%s/decisions", dir);
    snprintf(h, sizeof h, "%s.h", out);
    snprintf(c, sizeof c, "%s.c", out);
    unlink(h), unlink(c);
    int fd = open(wisdom, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return 0;
    bool whole = write(fd, data, size) == (ssize_t)size;
    close(fd);
    if (!whole) return 0;
    char *argv[] = {"aot", "--wisdom", wisdom, "-o", out, NULL};
    int status = run_aot(5, argv);
    if (status == 0) {
        fuzz_check(check_c(h) && check_c(c), "kerntune aot succeeded without writing %s and %s", h, c);
    }
    return 0;
}
