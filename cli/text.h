/*
 * text.h - strings of any length for the kerntune command's messages and expressions.
 *
 * Messages hold paths, names and values of any length, which a fixed buffer would cut; every
 * part of the command formats them here instead.
 */
#ifndef KT_CLI_TEXT_H
#define KT_CLI_TEXT_H

#include <stdarg.h>
#include <sys/types.h>

/* Formats into a new string the caller frees; NULL when out of memory. */
char *cli_format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *cli_vformat(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));

/* What a file of mode m is, for a message refusing what is not a regular file ("a FIFO", "a
 * directory", "a character device", ...). */
const char *cli_file_kind(mode_t m);

#endif
