/*
 * text.h - strings of any length for the kerntune command's messages and expressions, and
 * where its output goes.
 *
 * Messages hold paths, names and values of any length, which a fixed buffer would cut; every
 * part of the command formats them here instead.
 */
#ifndef KT_CLI_TEXT_H
#define KT_CLI_TEXT_H

#include <stdarg.h>
#include <stdio.h>
#include <sys/types.h>

/* Formats into a new string the caller frees; NULL when out of memory. */
char *cli_format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *cli_vformat(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));

/* Makes s (NULL is harmless) one printable line in place: each control character (a newline, a
 * tab, an escape a file's field name or value brought into a message) becomes '?'. */
void cli_one_line(char *s);

/* What a file of mode m is, for a message refusing what is not a regular file ("a FIFO", "a
 * directory", "a character device", ...). */
const char *cli_file_kind(mode_t m);

/* --json: stdout holds the JSON document and nothing else, whatever the code that runs in this
 * process or in the processes it starts (a kernel, a worker, a platform's library) prints.
 * cli_json_begin keeps the real stdout for the document (the FILE it returns; close-on-exec,
 * so no child inherits it) and points file descriptor 1 at stderr; NULL when that cannot be
 * done (stdout is then used as it is). cli_json_end puts the real stdout back and closes json
 * (NULL is harmless). */
FILE *cli_json_begin(void);
void cli_json_end(FILE *json);

/* What print writes, as a new string (NULL when out of memory): a help text for {"help": ...}. */
char *cli_capture(void (*print)(FILE *out, const void *arg), const void *arg);

/* Seconds since this process started (exec included: /proc/self/stat's start time against
 * CLOCK_BOOTTIME, to the kernel's clock tick); where that cannot be read, since the first call.
 * A budget of seconds on the command line is the process's: what start-up took counts. */
double cli_process_age_s(void);

/* Removes directory dir and everything in it (symbolic links as links): a temporary directory
 * the command made. 0, or -1 when something could not be removed. */
int cli_remove_tree(const char *dir);

#endif
