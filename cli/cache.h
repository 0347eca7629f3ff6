/*
 * cache.h - the `kerntune cache` command (cache.c).
 */
#ifndef KT_CLI_CACHE_H
#define KT_CLI_CACHE_H

#include <stdio.h>

/* Runs `kerntune cache` with its own argv (argv[0] is "cache"); returns the exit status. Reads
 * --help itself, so that each subcommand answers it with its own help. */
int run_cache(int argc, char **argv);

void help_cache(FILE *out);

/* Reads a wisdom document (a regular file of at most 256 MiB, or stdin for "-") into a
 * NUL-terminated buffer to free; NULL with the reason in *why (allocated) naming it name. */
char *cli_read_wisdom(const char *path, const char *name, char **why);

#endif
