/*
 * buildid.h - what identifies the machine code of a loaded object (the executable or a shared
 * object): its ELF build-id, or, for an object linked without one, a hash of its loaded
 * read-only segments. The op stage keys native candidates by it, so that a rebuilt function
 * misses the persistent cache.
 */
#ifndef KT_UTIL_BUILDID_H
#define KT_UTIL_BUILDID_H

#include <stdbool.h>
#include <stddef.h>

/* Room for an identity: "build-id:" and up to 64 bytes of note in hex, and the terminator. */
#define KT__CODE_ID_MAX 144

typedef enum kt__code_id_kind {
    KT__CODE_ID_NONE = 0, /* the address is in no loaded ELF object (generated code): not identified */
    KT__CODE_ID_BUILD_ID, /* "build-id:HEX": the object's NT_GNU_BUILD_ID note, as the linker wrote it
                           * ("build-id~HEX", a hash of it, for a note longer than 64 bytes) */
    KT__CODE_ID_IMAGE     /* "image:HEX": no build-id (linked with --build-id=none): a 128-bit hash of
                           * the bytes of the object's loaded, readable, non-writable segments */
} kt__code_id_kind;

/* The loaded object that holds an address. */
typedef struct kt__code_object {
    const char *file; /* its file name as the dynamic loader knows it; "" when unknown (valid while
                       * the object stays loaded) */
    const void *base; /* its lowest mapped address; NULL when the address is in no object */
} kt__code_object;

/* Finds the loaded object that holds addr; false when it is in none. */
bool kt__code_object_of(const void *addr, kt__code_object *obj);

/* Identifies the code of the loaded object that holds addr. Writes the identity (a string as
 * above; "" for KT__CODE_ID_NONE) into out, which has KT__CODE_ID_MAX bytes, and says which
 * object that is in *obj. Thread-safe; takes the dynamic loader's lock while it reads. */
kt__code_id_kind kt__code_id(const void *addr, char out[KT__CODE_ID_MAX], kt__code_object *obj);

/* The NT_GNU_BUILD_ID note of the loaded object that holds addr, as raw bytes copied into id:
 * its length, or 0 when addr is in no object, the object has none, or it is longer than max.
 * Thread-safe; takes the dynamic loader's lock while it reads. */
size_t kt__build_id_of(const void *addr, unsigned char *id, size_t max);

#endif /* KT_UTIL_BUILDID_H */
