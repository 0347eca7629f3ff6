/*
 * pp.h - what the C preprocessor makes of a variant's source, as a fingerprint (pp.c). Internal
 * to src/compile/.
 */
#ifndef KT_PP_H
#define KT_PP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Fingerprints what the preprocessor makes of source compiled with these defines ("NAME=VALUE"
 * or "NAME", as -D options) and options (their -I and --include-path directories are searched
 * for included files), so that two configurations get the same fingerprint only when the code
 * the compiler sees is the same: a parameter the code never reads, or reads only in a branch
 * another parameter turns off, changes nothing. Writes the 128-bit fingerprint into out and
 * returns true; returns false (out untouched) when the source is beyond what the analysis can
 * prove (see pp.c): then only the defines themselves tell configurations apart. */
bool kt__pp_fingerprint(const char *source, const char *const *defines, size_t ndefines, const char *const *options,
                        size_t noptions, uint64_t out[2]);

#endif
