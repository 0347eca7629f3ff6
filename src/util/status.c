/*
 * status.c - status codes, the per-thread detail message, logging and small shared helpers.
 *
 * The status list in kerntune.h is expanded here into kt_strerror() and kt_status_name(). A
 * failing call formats what failed and where into a thread-local buffer (kt__err), which the
 * caller reads with kt_last_error(); nothing is printed unless logging is switched on.
 */
#include "util/util.h"

#include <pthread.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The calling thread's detail message. It is formatted into whichever of two buffers does not
 * hold the current message, so a message may quote the current one (kt__err(st, "...: %s",
 * kt_last_error())); one longer than a buffer goes to the heap whole, never cut (a message can
 * quote a long expression, path or compiler log). The heap copy is freed by the next message or
 * at the thread's exit. */
static _Thread_local char kt__errbufs[2][KT__ERRBUF];
static _Thread_local const char *kt__errcur = "";
static _Thread_local char *kt__errheap;
static pthread_key_t kt__errkey;
static pthread_once_t kt__erronce = PTHREAD_ONCE_INIT;

static void heap_free(void *p) { free(p); }
static void key_make(void) { pthread_key_create(&kt__errkey, heap_free); }

const char *kt_strerror(kt_status status) {
    switch (status) {
#define KT__STATUS_MSG(name, value, msg) \
    case KT_##name:                      \
        return msg;
        KT_STATUS_LIST(KT__STATUS_MSG)
#undef KT__STATUS_MSG
    }
    return "unknown status code";
}

const char *kt_status_name(kt_status status) {
    switch (status) {
#define KT__STATUS_NAME(name, value, msg) \
    case KT_##name:                       \
        return #name;
        KT_STATUS_LIST(KT__STATUS_NAME)
#undef KT__STATUS_NAME
    }
    return "UNKNOWN";
}

const char *kt_last_error(void) { return kt__errcur; }

kt_status kt__err(kt_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    kt__verr(status, fmt, ap);
    va_end(ap);
    return status;
}

int kt_candidate_failed(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    kt__verr(KT_ERR_CANDIDATE_FAILED, fmt ? fmt : "(no reason given)", ap);
    va_end(ap);
    return KT_CANDIDATE_FAILED_SAID;
}

kt_status kt__verr(kt_status status, const char *fmt, va_list ap) {
    char *buf = kt__errbufs[kt__errcur == kt__errbufs[0] ? 1 : 0];
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(buf, KT__ERRBUF, fmt, ap);
    char *old = kt__errheap, *heap = NULL;
    if (n >= KT__ERRBUF && (heap = malloc((size_t)n + 1)) != NULL) vsnprintf(heap, (size_t)n + 1, fmt, again);
    va_end(again);
    /* the arguments may have pointed into the old message: only now is it let go */
    kt__errcur = heap ? heap : buf; /* out of memory: the message as far as it fits */
    kt__errheap = heap;
    if (heap || old) {
        pthread_once(&kt__erronce, key_make);
        pthread_setspecific(kt__errkey, heap);
    }
    free(old);
    return status;
}

char *kt__error_save(void) { return strdup(kt__errcur); }

kt_status kt__error_restore(kt_status status, char *saved) {
    kt__err(status, "%s", saved ? saved : "");
    free(saved);
    return status;
}

kt_status kt__dup_name(const char *name, const char *where, char **out) {
    if (name == NULL)
        return kt__err(KT_ERR_NULL, "%s: name is NULL", where);
    size_t n = strlen(name);
    if (n == 0 || n > KT__NAME_MAX)
        return kt__err(KT_ERR_INVALID_ARGUMENT, "%s: name '%.40s%s' has %zu characters; 1 to %d allowed",
                       where, name, n > 40 ? "..." : "", n, KT__NAME_MAX);
    char *p = malloc(n + 1);
    if (p == NULL)
        return kt__err(KT_ERR_NO_MEMORY, "%s: out of memory copying name", where);
    memcpy(p, name, n + 1);
    *out = p;
    return KT_OK;
}

unsigned kt_version_number(void) { return KT_VERSION_NUMBER; }

#define KT__STR2(x) #x
#define KT__STR(x) KT__STR2(x)
const char *kt_version_string(void) {
    return KT__STR(KT_VERSION_MAJOR) "." KT__STR(KT_VERSION_MINOR) "." KT__STR(KT_VERSION_PATCH);
}
