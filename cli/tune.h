/*
 * tune.h - the `kerntune tune` command (tune.c).
 */
#ifndef KT_CLI_TUNE_H
#define KT_CLI_TUNE_H

#include <stdio.h>

/* Runs `kerntune tune` with its own argv (argv[0] is "tune"); returns the exit status. */
int run_tune(int argc, char **argv);

void help_tune(FILE *out);

#endif
