/*
 * contract.h - what the built-in backends share of Kernel Tuner's compile contract
 * (KT_BUILD_KERNEL_TUNER, kerntune/backend.h). Not installed.
 */
#ifndef KT_CONTRACT_H
#define KT_CONTRACT_H

#include <stdbool.h>
#include <stddef.h>

/* Removes from text, in place, every line that Kernel Tuner's "\n\s*#pragma\s+unroll\s+NAME"
 * matches for name (each match becomes one newline): what a loop_unroll_factor parameter of 0
 * does. */
void kt__contract_drop_unroll(char *text, const char *name);

/* Whether define ("NAME=VALUE") is a loop_unroll_factor parameter of value 0; its name then goes
 * into name (len bytes, cut to fit). */
bool kt__contract_unroll_zero(const char *define, char *name, size_t len);

#endif
