/*
 * fuzz-pp.c - the preprocessor's analysis of a kernel source (src/compile/pp.c), which every
 * variant's source goes through (a T1 problem's KernelFile, a downloaded kernel): the input's
 * first line is the defines (NAME=VALUE, comma-separated, at most 8), the rest the source.
 * Promises: the analysis ends (fingerprint or "beyond what it can prove") and is a function of
 * its input: the same source and defines give the same answer twice.
 */
#include "fuzz.h"

#include "compile/pp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = fuzz_text(data, size);
    if (text == NULL) return 0;
    char *nl = strchr(text, '\n'), *source = nl ? nl + 1 : text + strlen(text);
    if (nl) *nl = '\0';
    const char *defines[8];
    size_t n = 0;
    for (char *tok = strtok(nl ? text : (char *)"", ","); tok && n < 8; tok = strtok(NULL, ",")) defines[n++] = tok;
    uint64_t a[2] = {1, 1}, b[2] = {2, 2};
    bool ok = kt__pp_fingerprint(source, defines, n, NULL, 0, a);
    bool again = kt__pp_fingerprint(source, defines, n, NULL, 0, b);
    fuzz_check(ok == again, "the analysis answered %d, then %d", ok, again);
    if (ok) fuzz_check(a[0] == b[0] && a[1] == b[1], "two fingerprints of one input");
    free(text);
    return 0;
}
