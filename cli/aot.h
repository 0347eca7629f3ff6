/*
 * aot.h - the `kerntune aot` command (aot.c).
 */
#ifndef KT_CLI_AOT_H
#define KT_CLI_AOT_H

#include <stdio.h>

/* Runs `kerntune aot` with its own argv (argv[0] is "aot"); returns the exit status. */
int run_aot(int argc, char **argv);

void help_aot(FILE *out);

#endif
