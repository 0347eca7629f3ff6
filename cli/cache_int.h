/*
 * cache_int.h - what the files of `kerntune cache` share: cache.c parses the options and runs a
 * subcommand; cache_show.c shows what the cache holds (list, show, deferred, path, explain);
 * cache_files.c moves decisions in and out (export, import, rm, clear).
 */
#ifndef KT_CLI_CACHE_INT_H
#define KT_CLI_CACHE_INT_H

#include "cache.h"

#include <kerntune/cache.h>

#include <jansson.h>
#include <stdbool.h>

/* A subcommand's options, as parsed. */
typedef struct opts {
    const char *sub;
    const char *cache, *op, *device, *output, *file, *key, *arch, *vendor;
    bool json, replace, yes;
} opts;

/* Reports an error: "kerntune cache[ SUB]: MESSAGE" on stderr and, with --json, {"error":
 * MESSAGE} on stdout. Returns status. */
int cache_report(int status, const char *sub, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Reports a usage error as cache_report does, then where the options are told; returns 2. */
int cache_usage(const char *sub, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Reports kerntune's last message for subcommand o; returns 1. */
int cache_failed(const opts *o);

/* v as one JSON document on stdout (indented, keys in order). */
void cache_print_json(json_t *v);

/* The subcommands: each returns the exit status (0, 1 when the work failed). */
int run_list(const opts *o, kt_cache *c);
int run_show(const opts *o, kt_cache *c);
int run_export(const opts *o, kt_cache *c);
int run_import(const opts *o, kt_cache *c);
int run_rm(const opts *o, kt_cache *c);
int run_clear(const opts *o, kt_cache *c);
int run_path(const opts *o, kt_cache *c);
int run_deferred(const opts *o, kt_cache *c);
int run_explain(const opts *o, kt_cache *c);

#endif
