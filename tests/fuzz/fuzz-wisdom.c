/*
 * fuzz-wisdom.c - importing wisdom (kt_cache_import, src/store/wisdom_import.c) into an
 * in-memory store, then exporting it (two stores opened once, emptied for each input).
 * Promises: a document is imported or refused with a message; what was imported exports as a
 * document that imports again, whole, and exports the same text (a round trip is stable).
 */
#include "fuzz.h"

#include <kerntune/cache.h>

#include "store/store_int.h"

/* Two in-memory stores made once and emptied for each input: making the schema anew each time
 * was most of an input's cost. */
static kt_cache *first, *second;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    if (kt_cache_open(":memory:", &first) != KT_OK || kt_cache_open(":memory:", &second) != KT_OK) first = second = NULL;
    return 0;
}

static kt_cache *emptied(kt_cache *c) {
    bool ok = c && kt__db_exec(c, "DELETE FROM units; DELETE FROM decisions; DELETE FROM deferred; DELETE FROM progress;", "fuzz") == KT_OK;
    fuzz_check(ok || c == NULL, "emptying a store failed: %s", kt_last_error());
    return c;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = fuzz_text(data, size);
    kt_cache *c = emptied(first);
    if (text == NULL || c == NULL) {
        free(text);
        return 0;
    }
    size_t added = 0, replaced = 0, kept = 0;
    kt_status st = kt_cache_import(c, text, (int)(size & 1), &added, &replaced, &kept);
    if (st != KT_OK) {
        fuzz_check(kt_last_error()[0] != '\0', "an import failed without a message");
    } else {
        char *out = NULL, *again = NULL;
        st = kt_cache_export(c, NULL, NULL, &out);
        fuzz_check(st == KT_OK, "imported wisdom did not export: %s", kt_last_error());
        kt_cache *d = emptied(second);
        if (d != NULL) {
            size_t a2 = 0;
            st = kt_cache_import(d, out, 0, &a2, NULL, NULL);
            fuzz_check(st == KT_OK, "exported wisdom did not import: %s\n%s", kt_last_error(), out);
            fuzz_check(a2 == added, "%zu entries came back of %zu imported", a2, added);
            fuzz_check(kt_cache_export(d, NULL, NULL, &again) == KT_OK, "the second export failed: %s", kt_last_error());
            fuzz_check(strcmp(out, again) == 0, "the round trip changed the wisdom:\n%s\n---\n%s", out, again);
            kt_free(again);
        }
        kt_free(out);
    }
    free(text);
    return 0;
}
