/*
 * names.c - the names of the public enums, expanded from the same lists as the enums themselves
 * (KT_<NAME>_LIST in the public headers), so that a value and its name cannot drift apart.
 */
#include "util/util.h"

#include <kerntune/decision.h>
#include <kerntune/inputs.h>
#include <kerntune/measure.h>

#include <string.h>

/* One `case` per entry of a list: the enumerator returns its name. */
#define KT__NAME_CASE(name, value, str) \
    case name:                          \
        return str;

const char *kt_effort_name(kt_effort effort) {
    switch (effort) { KT_EFFORT_LIST(KT__NAME_CASE) }
    return NULL;
}

const char *kt_capture_miss_name(kt_capture_miss how) {
    switch (how) { KT_CAPTURE_MISS_LIST(KT__NAME_CASE) }
    return NULL;
}

const char *kt_log_level_name(kt_log_level level) {
    switch (level) { KT_LOG_LEVEL_LIST(KT__NAME_CASE) }
    return NULL;
}

const char *kt_policy_name(kt_policy policy) {
    switch (policy) { KT_POLICY_LIST(KT__NAME_CASE) }
    return NULL;
}

const char *kt_flush_name(kt_flush flush) {
    switch (flush) { KT_FLUSH_LIST(KT__NAME_CASE) }
    return NULL;
}

const char *kt_isolation_name(kt_isolation isolation) {
    switch (isolation) { KT_ISOLATION_LIST(KT__NAME_CASE) }
    return NULL;
}

const char *kt_inputs_name(kt_inputs inputs) {
    switch (inputs) { KT_INPUTS_LIST(KT__NAME_CASE) }
    return NULL;
}

const char *kt_outcome_name(kt_outcome outcome) {
    switch (outcome) { KT_OUTCOME_LIST(KT__NAME_CASE) }
    return NULL;
}

#undef KT__NAME_CASE

/* kt_type's list also carries each type's element size. */
#define KT__TYPE_NAME(name, value, str, size) \
    case name:                                \
        return str;
#define KT__TYPE_SIZE(name, value, str, size) \
    case name:                                \
        return size;

size_t kt_type_size(kt_type type) {
    switch (type) { KT_TYPE_LIST(KT__TYPE_SIZE) }
    return 0;
}

const char *kt_type_name(kt_type type) {
    switch (type) { KT_TYPE_LIST(KT__TYPE_NAME) }
    return "?";
}

#undef KT__TYPE_NAME
#undef KT__TYPE_SIZE

/* ", name" per entry of a list, concatenated into one string literal: the names a message
 * offers, in the list's order (skip the first two characters). */
#define KT__LISTED(name, value, str) ", " str

kt_status kt_policy_parse(const char *name, kt_policy *out) {
    if (name == NULL || out == NULL) return kt__err(KT_ERR_NULL, "kt_policy_parse: name or out is NULL");
#define KT__PARSE(e, value, str) \
    if (strcmp(name, str) == 0) {  \
        *out = e;                  \
        return KT_OK;              \
    }
    KT_POLICY_LIST(KT__PARSE)
#undef KT__PARSE
    static const char listed[] = KT_POLICY_LIST(KT__LISTED);
    return kt__err(KT_ERR_INVALID_ARGUMENT, "kt_policy_parse: '%s' is not a policy (%s)", name, &listed[2]);
}

#undef KT__LISTED
