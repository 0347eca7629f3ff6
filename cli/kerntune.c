/*
 * kerntune.c - the kerntune command: a thin program over the public API (include/kerntune.h).
 *
 * Each subcommand is a function taking its own argv; each accepts --help. Exit status: 0 on
 * success, 1 when the work failed, 2 on a usage error. A subcommand given --json prints one JSON
 * document on stdout and nothing else: its result, {"error": MESSAGE} when it fails (usage
 * errors included), or {"help": TEXT} for --help.
 */
#include <kerntune.h>
#include <kerntune/device.h>

#include "aot.h"
#include "cache.h"
#include "fleet.h"
#include "report.h"
#include "text.h"
#include "tune.h"

#include <jansson.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct command {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
    void (*help)(FILE *out);
    int own_help; /* reads --help itself, so that its subcommands answer it (cache) */
} command;

static void usage_main(FILE *out);

static void help_devices(FILE *out) {
    fprintf(out,
            "usage: kerntune devices [-v|--verbose] [--json]\n"
            "\n"
            "Lists the backends kerntune found and their devices, then each built-in backend\n"
            "that could not start and why. The C backend (the host CPU) is always present.\n"
            "\n"
            "options:\n"
            "  -v, --verbose   also print each device's fingerprint, the string that keys\n"
            "                  recorded decisions to the device, and its architecture and\n"
            "                  vendor, by which a key nobody tuned on it may borrow another\n"
            "                  device's decision ('kerntune cache explain')\n"
            "  --json          print one JSON document instead: {\"devices\": [{\"index\", \"backend\",\n"
            "                  \"name\", \"fingerprint\", \"arch\", \"vendor\"}], \"unavailable\":\n"
            "                  [\"backend: why\", ...]}\n"
            "  -h, --help      print this help\n");
}

/* Prints {"name": value} on out, one JSON document. */
static void print_member(FILE *out, const char *name, const char *value) {
    json_t *j = json_object();
    json_object_set_new(j, name, json_string(value ? value : "out of memory"));
    char *text = json_dumps(j, JSON_COMPACT);
    if (text) fprintf(out, "%s\n", text);
    free(text);
    json_decref(j);
}

/* The devices as one JSON document on doc: each with its index, backend, name, fingerprint,
 * architecture, vendor and peaks; and the backends that could not start. */
static void devices_json(kt_context *ctx, FILE *doc) {
    size_t n = kt_context_device_count(ctx);
    json_t *j = json_object(), *devs = json_array(), *un = json_array();
    for (size_t i = 0; i < n; i++) {
        const kt_device *d = kt_context_device(ctx, i);
        json_t *x = json_object();
        json_object_set_new(x, "index", json_integer((json_int_t)i));
        json_object_set_new(x, "backend", json_string(kt_device_backend(d)));
        json_object_set_new(x, "name", json_string(kt_device_name(d)));
        json_object_set_new(x, "fingerprint", json_string(kt_device_fingerprint(d)));
        json_object_set_new(x, "arch", json_string(kt_device_architecture(d)));
        json_object_set_new(x, "vendor", json_string(kt_device_vendor(d)));
        double pf = 0, pb = 0;
        kt_device_peaks(ctx, i, &pf, &pb);
        json_object_set_new(x, "peak_gflops", pf > 0 ? json_real(pf) : json_null());
        json_object_set_new(x, "peak_gbs", pb > 0 ? json_real(pb) : json_null());
        json_array_append_new(devs, x);
    }
    for (size_t i = 0; i < kt_context_unavailable_count(ctx); i++) json_array_append_new(un, json_string(kt_context_unavailable(ctx, i)));
    json_object_set_new(j, "devices", devs);
    json_object_set_new(j, "unavailable", un);
    char *text = json_dumps(j, JSON_COMPACT);
    if (text) fprintf(doc, "%s\n", text);
    free(text);
    json_decref(j);
}

/* The devices as a table (verbose: with fingerprints, architectures and peaks), then the
 * backends that could not start. */
static void devices_text(kt_context *ctx, int verbose) {
    size_t n = kt_context_device_count(ctx);
    printf("%-8s %-6s %s\n", "BACKEND", "DEVICE", "NAME");
    for (size_t i = 0; i < n; i++) {
        const kt_device *d = kt_context_device(ctx, i);
        printf("%-8s %-6zu %s\n", kt_device_backend(d), i, kt_device_name(d));
        if (verbose) printf("%-8s %-6s fingerprint: %s\n", "", "", kt_device_fingerprint(d));
        if (verbose) printf("%-8s %-6s architecture: %s; vendor: %s\n", "", "", *kt_device_architecture(d) ? kt_device_architecture(d) : "unknown",
                            *kt_device_vendor(d) ? kt_device_vendor(d) : "unknown");
        double pf = 0, pb = 0;
        if (verbose && kt_device_peaks(ctx, i, &pf, &pb) == KT_OK && (pf > 0 || pb > 0))
            printf("%-8s %-6s peaks: %.6g GFLOP/s (single precision), %.6g GB/s\n", "", "", pf, pb);
    }
    for (size_t i = 0; i < kt_context_unavailable_count(ctx); i++) printf("unavailable: %s\n", kt_context_unavailable(ctx, i));
}

static int run_devices(int argc, char **argv) {
    int verbose = 0, json = 0;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--json") == 0) json = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-v") == 0 || strcmp(argv[i], "--verbose") == 0) {
            verbose = 1;
        } else if (strcmp(argv[i], "--json") != 0) {
            fprintf(stderr, "kerntune devices: unknown argument '%s'\n", argv[i]);
            if (json) { /* stdout stays one JSON document */
                char *msg = cli_format("unknown argument '%s'", argv[i]);
                print_member(stdout, "error", msg);
                free(msg);
            } else {
                help_devices(stderr);
            }
            return 2;
        }
    }
    /* a platform's library, loaded by kt_context_create, may print: not on the document's stdout */
    FILE *jout = json ? cli_json_begin() : NULL, *doc = jout ? jout : stdout;
    kt_context *ctx;
    kt_status st = kt_context_create(&ctx);
    if (st != KT_OK) {
        fprintf(stderr, "kerntune devices: %s: %s\n", kt_status_name(st), kt_last_error());
        if (json) {
            char *msg = cli_format("%s: %s", kt_status_name(st), kt_last_error());
            print_member(doc, "error", msg);
            free(msg);
        }
        cli_json_end(jout);
        return 1;
    }
    if (json) devices_json(ctx, doc);
    else devices_text(ctx, verbose);
    kt_context_destroy(ctx);
    cli_json_end(jout);
    return 0;
}

static void help_version(FILE *out) {
    fprintf(out, "usage: kerntune version\n\nPrints the version of the kerntune library in use.\n");
}

static int run_version(int argc, char **argv) {
    if (argc > 1) {
        fprintf(stderr, "kerntune version: unexpected argument '%s'\n", argv[1]);
        return 2;
    }
    printf("kerntune %s\n", kt_version_string());
    return 0;
}

static void help_help(FILE *out) {
    fprintf(out, "usage: kerntune help [COMMAND]\n\nPrints the help of kerntune or of one command.\n");
}

static int run_help(int argc, char **argv);

static const command commands[] = {
    {"tune", "tune a T1 problem, write T4 results, or replay recorded ones", run_tune, help_tune, 0},
    {"cache", "list, show, export, import or remove cached decisions", run_cache, help_cache, 1},
    {"aot", "emit decisions as C, for a program that must not tune", run_aot, help_aot, 0},
    {"report", "write an HTML page of tuning results, with plots", run_report, help_report, 0},
    {"worker", "measure configurations for 'kerntune tune --workers' on one device", run_worker, help_worker, 0},
    {"devices", "list backends and devices", run_devices, help_devices, 0},
    {"version", "print the version", run_version, help_version, 0},
    {"help", "print help on a command", run_help, help_help, 0},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static const command *find_command(const char *name) {
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0) return &commands[i];
    return NULL;
}

static int run_help(int argc, char **argv) {
    if (argc < 2) {
        usage_main(stdout);
        return 0;
    }
    const command *c = find_command(argv[1]);
    if (c == NULL) {
        fprintf(stderr, "kerntune help: unknown command '%s'\n", argv[1]);
        return 2;
    }
    c->help(stdout);
    return 0;
}

static void usage_main(FILE *out) {
    fprintf(out,
            "usage: kerntune [--help] [--version] COMMAND [ARGS]\n"
            "\n"
            "kerntune measures which implementation of a kernel is fastest for each problem and\n"
            "device, and remembers the pick.\n"
            "\n"
            "commands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++) fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out,
            "\n"
            "Run 'kerntune COMMAND --help' for a command's options.\n"
            "\n"
            "environment:\n"
            "  KERNTUNE_MODE   tune | cache-only | off\n"
            "  KERNTUNE_FORCE  op=candidate[,op=candidate...]\n"
            "  KERNTUNE_LOG    error | warn | info | debug (to stderr)\n"
            "  KERNTUNE_CACHE  the persistent cache file, or off\n"
            "  KERNTUNE_REMOTE redis://HOST:PORT[/DB]: a cache shared by a fleet (with KERNTUNE_REMOTE_KEY)\n");
}

static void print_help(FILE *out, const void *c) { ((const command *)c)->help(out); }

int main(int argc, char **argv) {
    if (argc < 2) {
        usage_main(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0) {
        usage_main(stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) return run_version(1, argv + 1);
    const command *c = find_command(cmd);
    if (c == NULL) {
        fprintf(stderr, "kerntune: unknown command '%s'; run 'kerntune --help' for the list\n", cmd);
        return 2;
    }
    bool json = false; /* --json: the help is a JSON document too, {"help": TEXT} */
    for (int i = 2; i < argc; i++) json = json || strcmp(argv[i], "--json") == 0;
    for (int i = 2; i < argc && !c->own_help; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            if (json) {
                char *text = cli_capture(print_help, c);
                print_member(stdout, "help", text);
                free(text);
            } else {
                c->help(stdout);
            }
            return 0;
        }
    }
    return c->run(argc - 1, argv + 1);
}
