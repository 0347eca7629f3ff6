/*
 * test-cache-cli.c - `kerntune cache`, run as a process (the built binary): help of the command
 * and of each subcommand, import / list / show / export / rm / clear / path with their exact
 * output (newest decision first, real creation dates), --json on every subcommand (stdout one
 * JSON document, failures included), the cache path from the environment, a damaged cache, and
 * bad input with its exact messages and exit status.
 */
#define _GNU_SOURCE /* mkdtemp, nftw */
#include "helpers.h"

#include <kerntune/cache.h>

#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef KT_CLI
#error "KT_CLI must name the built kerntune binary"
#endif
#ifndef KT_DATA
#error "KT_DATA must name tests/data"
#endif

#define WISDOM KT_DATA "/store/wisdom.json"

static char dir[256];
static char db[512];

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)ftw;
    return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static int setup(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/kt-cache-cli-XXXXXX");
    if (mkdtemp(dir) == NULL) return -1;
    snprintf(db, sizeof db, "%s/cache.db", dir);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

static char out[1 << 17], err[1 << 14];

static void slurp(const char *path, char *buf, size_t len) {
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    size_t n = 0;
    ssize_t got;
    while (n + 1 < len && (got = read(fd, buf + n, len - 1 - n)) > 0) n += (size_t)got;
    buf[n] = 0;
    close(fd);
}

/*
 * Runs `kerntune ARGS...` (NULL-terminated) with stdout and stderr captured into out and err,
 * stdin from stdin_path (or /dev/null), and the environment changed by env: "NAME=VALUE"
 * entries separated by ';', an empty VALUE unsetting NAME. KERNTUNE_CACHE, XDG_CACHE_HOME and
 * HOME point into the test directory unless env says otherwise. Returns the exit status.
 */
static int cli(const char *env, const char *stdin_path, ...) {
    const char *argv[32] = {KT_CLI};
    va_list ap;
    va_start(ap, stdin_path);
    size_t n = 1;
    const char *a;
    while ((a = va_arg(ap, const char *)) != NULL && n < 31) argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    char outp[600], errp[600];
    snprintf(outp, sizeof outp, "%s/.out", dir);
    snprintf(errp, sizeof errp, "%s/.err", dir);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char home[600], xdg[600];
        snprintf(home, sizeof home, "%s/home", dir);
        snprintf(xdg, sizeof xdg, "%s/xdg", dir);
        setenv("HOME", home, 1);
        setenv("XDG_CACHE_HOME", xdg, 1);
        unsetenv("KERNTUNE_CACHE");
        char e[1024];
        snprintf(e, sizeof e, "%s", env ? env : "");
        for (char *save = NULL, *kv = strtok_r(e, ";", &save); kv; kv = strtok_r(NULL, ";", &save)) {
            char *eq = strchr(kv, '=');
            if (eq == NULL) _exit(120);
            *eq = 0;
            if (eq[1]) setenv(kv, eq + 1, 1);
            else unsetenv(kv);
        }
        int in = open(stdin_path ? stdin_path : "/dev/null", O_RDONLY);
        int o = open(outp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int r = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (in < 0 || o < 0 || r < 0) _exit(121);
        dup2(in, 0);
        dup2(o, 1);
        dup2(r, 2);
        alarm(120); /* kept across exec: a command that hangs is killed, and the test fails */
        execv(KT_CLI, (char *const *)argv);
        _exit(127);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    slurp(outp, out, sizeof out);
    slurp(errp, err, sizeof err);
    return WEXITSTATUS(status);
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void import_fixture(void) {
    assert_int_equal(cli(NULL, NULL, "cache", "import", WISDOM, "--cache", db, NULL), 0);
    assert_string_equal(out, "imported " WISDOM ": 4 added, 0 replaced, 0 kept\n");
    assert_string_equal(err, "");
}

/* ---- help ------------------------------------------------------------------------------------- */

static void test_help(void **state) {
    (void)state;
    assert_int_equal(cli(NULL, NULL, "cache", "--help", NULL), 0);
    assert_memory_equal(out, "usage: kerntune cache COMMAND [options]\n", 40);
    static const char *const lines[] = {"  list     one line per decision\n",
                                        "  show     every decision with its units\n",
                                        "  export   write decisions as a wisdom JSON document\n",
                                        "  import   read a wisdom document into the cache\n",
                                        "  rm       remove the decisions of an op (and device)\n",
                                        "  clear    remove every decision\n",
                                        "  path     print the cache file in use\n",
                                        "  deferred keys deferred by misses under graph capture\n"};
    for (size_t i = 0; i < 8; i++) assert_non_null(strstr(out, lines[i]));
    static char general[sizeof out];
    snprintf(general, sizeof general, "%s", out);
    assert_int_equal(cli(NULL, NULL, "help", "cache", NULL), 0);
    assert_string_equal(out, general);
    assert_int_equal(cli(NULL, NULL, "cache", "-h", NULL), 0);
    assert_string_equal(out, general);
    /* each subcommand answers --help with its own usage, wherever --help stands */
    static const char *const subs[] = {"list", "show", "export", "import", "rm", "clear", "path", "deferred"};
    for (size_t i = 0; i < 8; i++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "usage: kerntune cache %s ", subs[i]);
        assert_int_equal(cli(NULL, NULL, "cache", subs[i], "--help", NULL), 0);
        assert_memory_equal(out, prefix, strlen(prefix));
        assert_non_null(strstr(out, "  --cache PATH   the cache file; default: KERNTUNE_CACHE, else\n"));
        assert_int_equal(cli(NULL, NULL, "cache", subs[i], "--bogus", "-h", NULL), 0);
        assert_memory_equal(out, prefix, strlen(prefix));
    }
    assert_int_equal(cli(NULL, NULL, "cache", "import", "--help", NULL), 0);
    assert_non_null(strstr(out, "  --replace      replace decisions already in the cache\n"));
    assert_null(strstr(out, "--yes"));
    assert_int_equal(cli(NULL, NULL, "cache", "deferred", "--help", NULL), 0);
    assert_non_null(strstr(out, "This command cannot tune them: only the\nprogram that declares the op can (kt_op_tune_deferred"));
    /* the main help lists the command */
    assert_int_equal(cli(NULL, NULL, "--help", NULL), 0);
    assert_non_null(strstr(out, "  cache      list, show, export, import or remove cached decisions\n"));
    assert_non_null(strstr(out, "  KERNTUNE_CACHE  the persistent cache file, or off\n"));
}

/* ---- import, list, show ----------------------------------------------------------------------- */

static void test_import_list_show(void **state) {
    (void)state;
    import_fixture();
    assert_int_equal(cli(NULL, NULL, "cache", "import", WISDOM, "--cache", db, NULL), 0);
    assert_string_equal(out, "imported " WISDOM ": 0 added, 0 replaced, 4 kept\n");
    assert_int_equal(cli(NULL, NULL, "cache", "import", "--replace", "--json", "--cache=", NULL), 2);
    assert_string_equal(err, "kerntune cache import: --cache needs a non-empty value\nrun 'kerntune cache import --help' for the options\n");
    assert_int_equal(cli(NULL, NULL, "cache", "import", "--replace", "--json", WISDOM, "--cache", db, NULL), 0);
    json_error_t jerr;
    json_t *counts = json_loads(out, 0, &jerr);
    assert_non_null(counts);
    json_t *want = json_pack("{s:s, s:i, s:i, s:i}", "file", WISDOM, "added", 0, "replaced", 4, "kept", 0);
    assert_true(json_equal(counts, want));
    json_decref(counts);
    json_decref(want);
    /* from stdin */
    char other[600];
    snprintf(other, sizeof other, "%s/other.db", dir);
    assert_int_equal(cli(NULL, WISDOM, "cache", "import", "-", "--cache", other, NULL), 0);
    assert_string_equal(out, "imported (stdin): 4 added, 0 replaced, 0 kept\n");

    /* newest first; a decision below the confidence its race asked for shows both */
    assert_int_equal(cli(NULL, NULL, "cache", "list", "--cache", db, NULL), 0);
    assert_string_equal(out,
                        "OP      DEVICE                    KEY             WINNER            TIME       CONF       UNITS  CREATED\n"
                        "axpy    gpu:NVIDIA H200:sm_90...  1048576         unrolled          951.2 ns   1.00       2      2025-11-22 08:30\n"
                        "reduce  cpu:GenuineIntel:Xeon...  4096            tree              2.10 us    0.70<0.99  3      2025-11-22 08:29\n"
                        "matmul  cpu:GenuineIntel:Xeon...  1024,1024,1024  tiled TM=32,TN=8  1.47 ms    -          0      2025-11-22 08:28\n"
                        "matmul  cpu:GenuineIntel:Xeon...  512,512,512     tiled TM=16,TN=8  183.25 us  0.99       4      2025-11-22 08:26\n");
    assert_string_equal(err, "");
    assert_int_equal(cli(NULL, NULL, "cache", "list", "--op", "axpy", "--cache", db, NULL), 0);
    assert_string_equal(out,
                        "OP    DEVICE                    KEY      WINNER    TIME      CONF  UNITS  CREATED\n"
                        "axpy  gpu:NVIDIA H200:sm_90...  1048576  unrolled  951.2 ns  1.00  2      2025-11-22 08:30\n");
    assert_int_equal(cli(NULL, NULL, "cache", "list", "--op", "nothing", "--cache", db, NULL), 0);
    assert_string_equal(out, "no decisions\n");

    assert_int_equal(cli(NULL, NULL, "cache", "list", "--json", "--cache", db, NULL), 0);
    json_t *rows = json_loads(out, 0, &jerr);
    assert_non_null(rows);
    assert_int_equal(json_array_size(rows), 4);
    json_t *r0 = json_array_get(rows, 0), *r1 = json_array_get(rows, 1), *r2 = json_array_get(rows, 2);
    assert_string_equal(json_string_value(json_object_get(r0, "op")), "axpy");
    assert_string_equal(json_string_value(json_object_get(r0, "device")), "gpu:NVIDIA H200:sm_90:132sm");
    assert_int_equal(json_integer_value(json_array_get(json_object_get(r0, "key"), 0)), 1048576);
    assert_true(json_is_null(json_object_get(json_object_get(r0, "winner"), "config")));
    assert_true(json_real_value(json_object_get(r0, "time_ns")) == 951.25);
    assert_true(json_real_value(json_object_get(r0, "confidence")) == 1.0);
    assert_true(json_real_value(json_object_get(r0, "requested_confidence")) == 0.99);
    assert_true(json_is_false(json_object_get(r0, "below_confidence")));
    assert_int_equal(json_integer_value(json_object_get(r0, "units")), 2);
    assert_int_equal(json_integer_value(json_object_get(r0, "created")), 1763800200);
    assert_string_equal(json_string_value(json_object_get(r1, "op")), "reduce");
    assert_true(json_is_true(json_object_get(r1, "below_confidence")));
    assert_true(json_is_null(json_object_get(r2, "confidence")));
    assert_true(json_is_null(json_object_get(r2, "requested_confidence")));
    assert_int_equal(json_integer_value(json_object_get(r2, "units")), 0);
    json_decref(rows);

    assert_int_equal(cli(NULL, NULL, "cache", "show", "--op", "matmul", "--cache", db, NULL), 0);
    assert_string_equal(out,
                        "matmul [1024,1024,1024]\n"
                        "  device:        cpu:GenuineIntel:Xeon-8480:avx512f:56t:l3=105M\n"
                        "  candidate set: 5b1d0c3e9a7f2468\n"
                        "  library:       0.1.0\n"
                        "  created:       2025-11-22 08:28:20 UTC\n"
                        "  winner:        tiled TM=32,TN=8, 1.47 ms, confidence unknown\n"
                        "  units:         none recorded\n"
                        "\n"
                        "matmul [512,512,512]\n"
                        "  device:        cpu:GenuineIntel:Xeon-8480:avx512f:56t:l3=105M\n"
                        "  candidate set: 5b1d0c3e9a7f2468\n"
                        "  library:       0.1.0\n"
                        "  created:       2025-11-22 08:26:40 UTC\n"
                        "  winner:        tiled TM=16,TN=8, 183.25 us, confidence 0.99 (0.99 asked for)\n"
                        "  CANDIDATE  CONFIG       OUTCOME       TIME       RUNS  MESSAGE\n"
                        "  tiled      TM=16,TN=8   measured      183.25 us  12\n"
                        "  tiled      TM=32,TN=8   measured      201.50 us  9\n"
                        "  tiled      TM=64,TN=16  build_failed  -          0     ptxas error: too much shared data (0x10000 bytes)\n"
                        "  naive      -            invalid       -          0     output 'c' element 17: expected 3.5, got 3.25\n");
    assert_int_equal(cli(NULL, NULL, "cache", "show", "--device", "gpu:NVIDIA H200:sm_90:132sm", "--cache", db, NULL), 0);
    assert_string_equal(out,
                        "axpy [1048576]\n"
                        "  device:        gpu:NVIDIA H200:sm_90:132sm\n"
                        "  candidate set: 04d1e7c2aa90b3f1\n"
                        "  library:       0.1.0\n"
                        "  created:       2025-11-22 08:30:00 UTC\n"
                        "  winner:        unrolled, 951.2 ns, confidence 1.00 (0.99 asked for)\n"
                        "  CANDIDATE  CONFIG  OUTCOME   TIME      RUNS  MESSAGE\n"
                        "  unrolled   -       measured  951.2 ns  100\n"
                        "  simple     -       rejected  -         0\n");
    /* below what its race asked for: said so, with the finalists the next tuning re-races */
    assert_int_equal(cli(NULL, NULL, "cache", "show", "--op", "reduce", "--cache", db, NULL), 0);
    assert_string_equal(out,
                        "reduce [4096]\n"
                        "  device:        cpu:GenuineIntel:Xeon-8480:avx512f:56t:l3=105M\n"
                        "  candidate set: 6c0ffee1d00dfeed\n"
                        "  library:       0.1.0\n"
                        "  created:       2025-11-22 08:29:10 UTC\n"
                        "  winner:        tree, 2.10 us, confidence 0.70, below the 0.99 asked for: the next tuning re-races its finalists\n"
                        "  CANDIDATE  CONFIG  OUTCOME   TIME     RUNS  FINALIST  MESSAGE\n"
                        "  tree       -       measured  2.10 us  3     yes\n"
                        "  atomic     -       measured  2.15 us  3     yes\n"
                        "  serial     -       measured  9.80 us  1     no\n");
    assert_int_equal(cli(NULL, NULL, "cache", "show", "--json", "--op", "axpy", "--cache", db, NULL), 0);
    json_t *entries = json_loads(out, 0, &jerr);
    assert_int_equal(json_array_size(entries), 1);
    json_t *units = json_object_get(json_array_get(entries, 0), "units");
    assert_string_equal(json_string_value(json_object_get(json_array_get(units, 1), "outcome")), "rejected");
    json_decref(entries);
    /* show --json: the export's entries, newest first */
    assert_int_equal(cli(NULL, NULL, "cache", "show", "--json", "--cache", db, NULL), 0);
    entries = json_loads(out, 0, &jerr);
    assert_int_equal(json_array_size(entries), 4);
    static const json_int_t order[] = {1763800200, 1763800150, 1763800100, 1763800000};
    for (size_t i = 0; i < 4; i++) assert_int_equal(json_integer_value(json_object_get(json_array_get(entries, i), "created")), order[i]);
    json_decref(entries);
}

/* ---- export ----------------------------------------------------------------------------------- */

/* The fixture's entry with the same op and key as e. */
static json_t *fixture_entry(json_t *fixture, json_t *e) {
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(fixture, "entries"), i, f) {
        if (json_equal(json_object_get(f, "op"), json_object_get(e, "op")) && json_equal(json_object_get(f, "key"), json_object_get(e, "key")))
            return f;
    }
    return NULL;
}

static void test_export(void **state) {
    (void)state;
    import_fixture();
    assert_int_equal(cli(NULL, NULL, "cache", "export", "--cache", db, NULL), 0);
    assert_string_equal(err, "");
    json_error_t jerr;
    json_t *doc = json_loads(out, 0, &jerr), *fixture = json_load_file(WISDOM, 0, &jerr);
    assert_non_null(doc);
    assert_non_null(fixture);
    assert_int_equal(json_integer_value(json_object_get(doc, "kerntune_wisdom")), 1);
    assert_string_equal(json_string_value(json_object_get(doc, "library_version")), kt_version_string());
    json_t *entries = json_object_get(doc, "entries");
    assert_int_equal(json_array_size(entries), 4);
    size_t i;
    json_t *e;
    json_array_foreach(entries, i, e) {
        json_t *f = fixture_entry(fixture, e);
        assert_non_null(f);
        if (!json_equal(e, f)) fail_msg("export entry %zu differs from the fixture's", i);
    }
    json_decref(doc);
    json_decref(fixture);

    static char whole[sizeof out];
    snprintf(whole, sizeof whole, "%s", out);
    char file[600];
    snprintf(file, sizeof file, "%s/out.json", dir);
    assert_int_equal(cli(NULL, NULL, "cache", "export", "-o", file, "--cache", db, NULL), 0);
    char expect[800];
    snprintf(expect, sizeof expect, "exported 4 decisions to %s\n", file);
    assert_string_equal(out, expect);
    slurp(file, out, sizeof out);
    assert_string_equal(out, whole);

    assert_int_equal(cli(NULL, NULL, "cache", "export", "--op", "matmul", "--device", "cpu:GenuineIntel:Xeon-8480:avx512f:56t:l3=105M",
                         "--output", file, "--cache", db, NULL),
                     0);
    snprintf(expect, sizeof expect, "exported 2 decisions to %s\n", file);
    assert_string_equal(out, expect);
    doc = json_load_file(file, 0, &jerr);
    assert_int_equal(json_array_size(json_object_get(doc, "entries")), 2);
    json_decref(doc);

    /* what export writes, import reads back the same */
    char other[600];
    snprintf(other, sizeof other, "%s/other.db", dir);
    snprintf(file, sizeof file, "%s/all.json", dir);
    write_text(file, whole);
    assert_int_equal(cli(NULL, NULL, "cache", "import", file, "--cache", other, NULL), 0);
    assert_int_equal(cli(NULL, NULL, "cache", "export", "--cache", other, NULL), 0);
    assert_string_equal(out, whole);

    assert_int_equal(cli(NULL, NULL, "cache", "export", "-o", "/nonexistent-dir/x.json", "--cache", db, NULL), 1);
    assert_string_equal(err, "kerntune cache export: /nonexistent-dir/x.json: No such file or directory\n");
}

/* ---- rm, clear -------------------------------------------------------------------------------- */

static void test_rm_clear(void **state) {
    (void)state;
    import_fixture();
    assert_int_equal(cli(NULL, NULL, "cache", "rm", "--cache", db, NULL), 2);
    assert_string_equal(err,
                        "kerntune cache rm: give --op NAME (or --device FP): to remove every decision, run 'kerntune cache clear --yes'\n"
                        "run 'kerntune cache rm --help' for the options\n");
    assert_int_equal(cli(NULL, NULL, "cache", "rm", "--op", "axpy", "--cache", db, NULL), 0);
    assert_string_equal(out, "removed 1 decision\n");
    assert_int_equal(cli(NULL, NULL, "cache", "rm", "--op", "axpy", "--cache", db, NULL), 0);
    assert_string_equal(out, "removed 0 decisions\n");
    assert_int_equal(cli(NULL, NULL, "cache", "rm", "--device", "gpu:other", "--json", "--cache", db, NULL), 0);
    json_t *v = json_loads(out, 0, NULL);
    assert_non_null(v);
    assert_int_equal(json_integer_value(json_object_get(v, "removed")), 0);
    assert_int_equal(json_object_size(v), 1);
    json_decref(v);
    assert_int_equal(cli(NULL, NULL, "cache", "clear", "--cache", db, NULL), 2);
    assert_string_equal(err, "kerntune cache clear: this removes every decision of the cache: add --yes to confirm\n"
                             "run 'kerntune cache clear --help' for the options\n");
    assert_int_equal(cli(NULL, NULL, "cache", "list", "--cache", db, NULL), 0);
    assert_non_null(strstr(out, "matmul"));
    assert_int_equal(cli(NULL, NULL, "cache", "clear", "--yes", "--cache", db, NULL), 0);
    assert_string_equal(out, "removed 3 decisions\n");
    assert_int_equal(cli(NULL, NULL, "cache", "list", "--cache", db, NULL), 0);
    assert_string_equal(out, "no decisions\n");
    assert_int_equal(cli(NULL, NULL, "cache", "show", "--cache", db, NULL), 0);
    assert_string_equal(out, "no decisions\n");
}

/* ---- path ------------------------------------------------------------------------------------- */

static void test_path(void **state) {
    (void)state;
    char expect[1200];
    assert_int_equal(cli(NULL, NULL, "cache", "path", "--cache", db, NULL), 0);
    snprintf(expect, sizeof expect, "%s\n", db);
    assert_string_equal(out, expect);
    assert_string_equal(err, "");
    /* the default: KERNTUNE_CACHE, else XDG_CACHE_HOME, else HOME */
    char env[800];
    snprintf(env, sizeof env, "KERNTUNE_CACHE=%s/env.db", dir);
    assert_int_equal(cli(env, NULL, "cache", "path", NULL), 0);
    snprintf(expect, sizeof expect, "%s/env.db\n", dir);
    assert_string_equal(out, expect);
    assert_int_equal(cli(NULL, NULL, "cache", "path", NULL), 0);
    snprintf(expect, sizeof expect, "%s/xdg/kerntune/cache.db\n", dir);
    assert_string_equal(out, expect);
    assert_int_equal(cli("XDG_CACHE_HOME=", NULL, "cache", "path", NULL), 0);
    snprintf(expect, sizeof expect, "%s/home/.cache/kerntune/cache.db\n", dir);
    assert_string_equal(out, expect);
    assert_int_equal(cli("KERNTUNE_CACHE=off", NULL, "cache", "path", NULL), 1);
    assert_string_equal(out, "");
    assert_string_equal(err, "kerntune cache path: kt_cache_open(NULL): KERNTUNE_CACHE=off: the persistent cache is switched off\n");
    assert_int_equal(cli("KERNTUNE_CACHE=off", NULL, "cache", "list", NULL), 1);
    assert_int_equal(cli(NULL, NULL, "cache", "path", "--json", "--cache", db, NULL), 0);
    json_t *v = json_loads(out, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(v, "path")), db);
    assert_true(json_is_null(json_object_get(v, "warning")));
    json_decref(v);

    /* a damaged file: moved aside, and said so */
    char bad[600];
    snprintf(bad, sizeof bad, "%s/bad.db", dir);
    write_text(bad, "this is not an SQLite database, not even close; it is a sentence of some length........");
    assert_int_equal(cli(NULL, NULL, "cache", "path", "--cache", bad, NULL), 0);
    char first[2048];
    snprintf(first, sizeof first, "%s\nwarning: '%s' was damaged (file is not a database); moved it aside to '%s.corrupt-", bad, bad, bad);
    assert_memory_equal(out, first, strlen(first));
    assert_non_null(strstr(out, "' and started a fresh store\n"));
    assert_string_equal(err, "");
    write_text(bad, "garbage again, long enough to be looked at as a database header by SQLite.............");
    assert_int_equal(cli(NULL, NULL, "cache", "list", "--cache", bad, NULL), 0);
    assert_string_equal(out, "no decisions\n");
    snprintf(first, sizeof first, "kerntune cache: warning: '%s' was damaged (file is not a database); moved it aside to '%s.corrupt-", bad, bad);
    assert_memory_equal(err, first, strlen(first));
}

/* ---- --json ------------------------------------------------------------------------------------ */

/* stdout as exactly one JSON document: jansson refuses anything after the first value. */
static json_t *stdout_json(void) {
    json_error_t e;
    json_t *v = json_loads(out, 0, &e);
    if (v == NULL) fail_msg("stdout is not one JSON document (%s, line %d column %d):\n%s", e.text, e.line, e.column, out);
    return v;
}

/* stdout is {"error": message} and stderr says the same after the command's name. */
static void expect_json_error(const char *sub, const char *message) {
    json_t *v = stdout_json();
    json_t *want = json_pack("{s:s}", "error", message);
    if (!json_equal(v, want)) fail_msg("stdout: %s\nwanted the error: %s", out, message);
    json_decref(v);
    json_decref(want);
    char line[2048];
    snprintf(line, sizeof line, "kerntune cache%s%s: %s\n", sub ? " " : "", sub ? sub : "", message);
    assert_memory_equal(err, line, strlen(line));
}

/* Every subcommand that takes --json prints one JSON document on stdout and nothing else, on
 * success and on failure (usage errors included); text (warnings, errors) goes to stderr. */
static void test_json_everywhere(void **state) {
    (void)state;
    import_fixture();
    json_t *v;
    assert_int_equal(cli(NULL, NULL, "cache", "list", "--json", "--cache", db, NULL), 0);
    v = stdout_json();
    assert_int_equal(json_array_size(v), 4);
    json_decref(v);
    assert_int_equal(cli(NULL, NULL, "cache", "list", "--json", "--op", "none", "--cache", db, NULL), 0);
    v = stdout_json();
    assert_true(json_is_array(v) && json_array_size(v) == 0);
    json_decref(v);
    assert_int_equal(cli(NULL, NULL, "cache", "show", "--json", "--cache", db, NULL), 0);
    v = stdout_json();
    assert_int_equal(json_array_size(v), 4);
    json_decref(v);
    assert_int_equal(cli(NULL, NULL, "cache", "export", "--json", "--cache", db, NULL), 0);
    v = stdout_json();
    assert_int_equal(json_array_size(json_object_get(v, "entries")), 4);
    json_decref(v);
    char file[600];
    snprintf(file, sizeof file, "%s/w.json", dir);
    assert_int_equal(cli(NULL, NULL, "cache", "export", "--json", "-o", file, "--cache", db, NULL), 0);
    v = stdout_json();
    json_t *want = json_pack("{s:i, s:s}", "exported", 4, "file", file);
    assert_true(json_equal(v, want));
    json_decref(want);
    json_decref(v);
    assert_int_equal(cli(NULL, NULL, "cache", "import", file, "--json", "--cache", db, NULL), 0);
    v = stdout_json();
    assert_int_equal(json_integer_value(json_object_get(v, "kept")), 4);
    json_decref(v);
    assert_int_equal(cli(NULL, NULL, "cache", "rm", "--op", "axpy", "--json", "--cache", db, NULL), 0);
    v = stdout_json();
    assert_int_equal(json_integer_value(json_object_get(v, "removed")), 1);
    json_decref(v);
    assert_int_equal(cli(NULL, NULL, "cache", "path", "--json", "--cache", db, NULL), 0);
    v = stdout_json();
    assert_string_equal(json_string_value(json_object_get(v, "path")), db);
    json_decref(v);
    assert_int_equal(cli(NULL, NULL, "cache", "clear", "--yes", "--json", "--cache", db, NULL), 0);
    v = stdout_json();
    assert_int_equal(json_integer_value(json_object_get(v, "removed")), 3);
    json_decref(v);

    /* failures: still one document on stdout */
    char missing[600], expect[1200];
    snprintf(missing, sizeof missing, "%s/missing.json", dir);
    assert_int_equal(cli(NULL, NULL, "cache", "import", missing, "--json", "--cache", db, NULL), 1);
    snprintf(expect, sizeof expect, "%s: No such file or directory", missing);
    expect_json_error("import", expect);
    snprintf(file, sizeof file, "%s/syntax.json", dir);
    write_text(file, "{\"kerntune_wisdom\": 1,,}");
    assert_int_equal(cli(NULL, NULL, "cache", "import", file, "--json", "--cache", db, NULL), 1);
    snprintf(expect, sizeof expect, "%s:1:23: string or '}' expected near ','", file);
    expect_json_error("import", expect);
    write_text(file, "{\"kerntune_wisdom\": 1, \"library_version\": \"0.1.0\", \"entries\": [{\"op\": \"a\\u0007\"}]}");
    assert_int_equal(cli(NULL, NULL, "cache", "import", file, "--json", "--cache", db, NULL), 1);
    snprintf(expect, sizeof expect, "%s: entries[0].op: holds a control character (0x07) at offset 1", file);
    expect_json_error("import", expect);
    assert_int_equal(cli(NULL, NULL, "cache", "list", "--json", "--bogus", "--cache", db, NULL), 2);
    expect_json_error("list", "unknown option '--bogus'");
    assert_int_equal(cli(NULL, NULL, "cache", "clear", "--json", "--cache", db, NULL), 2);
    expect_json_error("clear", "this removes every decision of the cache: add --yes to confirm");
    assert_int_equal(cli(NULL, NULL, "cache", "frobnicate", "--json", NULL), 2);
    expect_json_error(NULL, "unknown command 'frobnicate'; run 'kerntune cache --help' for the list");
    assert_int_equal(cli("KERNTUNE_CACHE=off", NULL, "cache", "path", "--json", NULL), 1);
    expect_json_error("path", "kt_cache_open(NULL): KERNTUNE_CACHE=off: the persistent cache is switched off");
    assert_int_equal(cli(NULL, NULL, "cache", "export", "--json", "-o", "/nonexistent-dir/x.json", "--cache", db, NULL), 1);
    expect_json_error("export", "/nonexistent-dir/x.json: No such file or directory");

    /* a warning from opening the cache goes to stderr: stdout stays one document */
    char bad[600];
    snprintf(bad, sizeof bad, "%s/bad.db", dir);
    write_text(bad, "this is not an SQLite database, not even close; it is a sentence of some length........");
    assert_int_equal(cli(NULL, NULL, "cache", "list", "--json", "--cache", bad, NULL), 0);
    v = stdout_json();
    assert_int_equal(json_array_size(v), 0);
    json_decref(v);
    assert_non_null(strstr(err, "kerntune cache: warning: '"));
}

/* ---- long values ------------------------------------------------------------------------------ */

/* A configuration of 4000 characters and a path of 2000 are printed whole, never cut. */
static void test_long_values_whole(void **state) {
    (void)state;
    char config[4096];
    size_t at = 0;
    for (int i = 0; at < 3990; i++) at += (size_t)snprintf(config + at, sizeof config - at, "%sPARAM%d=%d", i ? "," : "", i, i);
    json_t *unit = json_pack("{s:s, s:s, s:s, s:s, s:f, s:n, s:i, s:i, s:n, s:b}", "candidate", "tiled", "config", config, "unit_hash", "ab",
                             "outcome", "measured", "time_ns", 5.0, "ci_ns", "runs", 3, "warmups", 1, "message", "finalist", 1);
    json_t *entry = json_pack("{s:s, s:s, s:s, s:s, s:[i], s:{s:s, s:s}, s:f, s:f, s:f, s:i, s:[o]}", "op", "long", "candidate_set", "s",
                              "device", "d", "library_version", "0.1.0", "key", 1, "winner", "candidate", "tiled", "config", config,
                              "time_ns", 5.0, "confidence", 0.5, "requested_confidence", 0.99, "created", 1763800000, "units", unit);
    json_t *doc = json_pack("{s:i, s:s, s:[o]}", "kerntune_wisdom", 1, "library_version", "0.1.0", "entries", entry);
    char file[600];
    snprintf(file, sizeof file, "%s/long.json", dir);
    assert_int_equal(json_dump_file(doc, file, 0), 0);
    json_decref(doc);
    if (cli(NULL, NULL, "cache", "import", file, "--cache", db, NULL) != 0) fail_msg("import: %s", err);
    assert_int_equal(cli(NULL, NULL, "cache", "list", "--cache", db, NULL), 0);
    assert_non_null(strstr(out, config));
    assert_int_equal(cli(NULL, NULL, "cache", "show", "--cache", db, NULL), 0);
    char line[4200];
    snprintf(line, sizeof line, "  winner:        tiled %s, 5.0 ns, confidence 0.50, below the 0.99 asked for", config);
    assert_non_null(strstr(out, line));
    snprintf(line, sizeof line, "  tiled      %s  measured  5.0 ns  3     yes\n", config);
    assert_non_null(strstr(out, line));
    /* a long path in an error message */
    char path[2100];
    at = (size_t)snprintf(path, sizeof path, "%s/", dir);
    while (at < 2000) path[at++] = 'x';
    snprintf(path + at, sizeof path - at, ".json");
    assert_int_equal(cli(NULL, NULL, "cache", "import", path, "--json", "--cache", db, NULL), 1);
    char want[2300];
    snprintf(want, sizeof want, "%s: %s", path, strlen(path) - strlen(dir) - 1 > 255 ? "File name too long" : "No such file or directory");
    expect_json_error("import", want);
}

/* ---- dates ------------------------------------------------------------------------------------ */

static int native_fn(const kt_arg *args, size_t nargs, void *user) {
    (void)nargs, (void)user;
    ((int32_t *)args[0].ptr)[0] = (int32_t)args[1].i;
    return 0;
}

/* A decision made now (through the library, into the test's cache) is shown with today's date
 * and first, before the older imported ones. */
static void test_real_dates_by_age(void **state) {
    (void)state;
    import_fixture();
    kt_context *ctx = NULL;
    ok(kt_context_create(&ctx));
    ok(kt_context_set_cache(ctx, db));
    kt_op *op = NULL;
    ok(kt_op_create(ctx, "fresh", &op));
    ok(kt_op_add_buffer(op, "out", KT_TYPE_I32, KT_WRITE_ONLY));
    ok(kt_op_add_scalar(op, "n", KT_TYPE_I64));
    ok(kt_op_key_arg(op, 1, KT_BUCKET_EXACT));
    ok(kt_op_add_native(op, "only", native_fn, NULL));
    int32_t buf[4] = {0};
    time_t before = time(NULL);
    ok(kt_op_call(op, (kt_arg[]){kt_arg_buf(buf, sizeof buf), kt_arg_i64(3)}, 2));
    time_t after = time(NULL);
    kt_context_destroy(ctx);

    assert_int_equal(cli(NULL, NULL, "cache", "list", "--json", "--cache", db, NULL), 0);
    json_t *rows = stdout_json();
    assert_int_equal(json_array_size(rows), 5);
    assert_string_equal(json_string_value(json_object_get(json_array_get(rows, 0), "op")), "fresh");
    time_t created = (time_t)json_integer_value(json_object_get(json_array_get(rows, 0), "created"));
    json_decref(rows);
    if (created < before || created > after) fail_msg("created %lld, made between %lld and %lld", (long long)created, (long long)before, (long long)after);
    struct tm tm;
    gmtime_r(&created, &tm);
    char minute[32], second[48];
    strftime(minute, sizeof minute, "%Y-%m-%d %H:%M", &tm);
    strftime(second, sizeof second, "%Y-%m-%d %H:%M:%S UTC", &tm);

    assert_int_equal(cli(NULL, NULL, "cache", "list", "--cache", db, NULL), 0);
    char *line2 = strchr(out, '\n') + 1; /* the first decision, after the header */
    assert_memory_equal(line2, "fresh ", 6);
    char tail[64];
    snprintf(tail, sizeof tail, "  %s\n", minute);
    char *eol = strchr(line2, '\n');
    assert_true((size_t)(eol + 1 - line2) > strlen(tail));
    assert_memory_equal(eol + 1 - strlen(tail), tail, strlen(tail));
    assert_null(strstr(out, "1970-01-01"));
    assert_int_equal(cli(NULL, NULL, "cache", "show", "--cache", db, NULL), 0);
    char shown[96];
    snprintf(shown, sizeof shown, "fresh [3]\n  device:        ");
    assert_memory_equal(out, shown, strlen(shown));
    snprintf(shown, sizeof shown, "  created:       %s\n", second);
    assert_non_null(strstr(out, shown));
    /* then the imported ones, newest first */
    const char *a = strstr(out, "axpy ["), *r = strstr(out, "reduce ["), *m1 = strstr(out, "matmul [1024"), *m5 = strstr(out, "matmul [512");
    assert_true(a && r && m1 && m5 && a < r && r < m1 && m1 < m5);
}

/* ---- what `kerntune tune` says of the cache ------------------------------------------------- */

#define MATMUL KT_DATA "/t1/matmul_c.json"

/* Runs `kerntune tune MATMUL --cache db --json [--t4 t4]` (env as cli's) and returns its JSON
 * summary (stdout must be that document alone), asserting the exit status 0. */
static json_t *tune_json(const char *env, const char *t4) {
    int rc = t4 ? cli(env, NULL, "tune", MATMUL, "--cache", db, "--json", "--quiet", "--t4", t4, NULL)
                : cli(env, NULL, "tune", MATMUL, "--cache", db, "--json", "--quiet", NULL);
    if (rc != 0) fail_msg("kerntune tune exited %d: %s", rc, err);
    return stdout_json();
}

/* The cache's one entry, edited by edit(entry), imported back in its place. */
static void edit_cache(void (*edit)(json_t *e)) {
    assert_int_equal(cli(NULL, NULL, "cache", "export", "--cache", db, NULL), 0);
    json_t *doc = stdout_json();
    assert_int_equal(json_array_size(json_object_get(doc, "entries")), 1);
    edit(json_array_get(json_object_get(doc, "entries"), 0));
    char file[600];
    snprintf(file, sizeof file, "%s/edited.json", dir);
    assert_int_equal(json_dump_file(doc, file, 0), 0);
    json_decref(doc);
    assert_int_equal(cli(NULL, NULL, "cache", "import", "--replace", file, "--cache", db, NULL), 0);
}

static bool is_winner_unit(json_t *e, json_t *u) {
    json_t *w = json_object_get(e, "winner");
    return json_equal(json_object_get(u, "candidate"), json_object_get(w, "candidate")) &&
           json_equal(json_object_get(u, "config"), json_object_get(w, "config"));
}

/* The lie: the winner is TI=32,TK=32, which breaks the problem's condition TI * TK <= 512 (the
 * winner's unit is renamed with it, so that import cannot tell). */
static void lie_constraint(json_t *e) {
    size_t i;
    json_t *u;
    json_array_foreach(json_object_get(e, "units"), i, u) {
        if (is_winner_unit(e, u)) json_object_set_new(u, "config", json_string("TI=32,TK=32"));
    }
    json_object_set_new(json_object_get(e, "winner"), "config", json_string("TI=32,TK=32"));
}

/* Configurations whose T4 record has runtimes (measured by this run), and how many there are. */
static size_t measured_in_t4(const char *t4, char names[][32], size_t max) {
    json_error_t e;
    json_t *doc = json_load_file(t4, 0, &e);
    if (doc == NULL) fail_msg("%s: %s", t4, e.text);
    size_t n = 0, i;
    json_t *r;
    json_array_foreach(json_object_get(doc, "results"), i, r) {
        if (json_array_size(json_object_get(json_object_get(r, "times"), "runtimes")) == 0) continue;
        json_t *c = json_object_get(r, "configuration");
        if (n < max)
            snprintf(names[n], 32, "TI=%lld,TK=%lld", (long long)json_integer_value(json_object_get(c, "TI")),
                     (long long)json_integer_value(json_object_get(c, "TK")));
        n++;
    }
    json_decref(doc);
    return n;
}

/* A lying decision in the cache (imported: import cannot see the lie) is rejected when
 * `kerntune tune` uses it, which says so on stderr without KERNTUNE_LOG and in --json
 * (cache_rejected), measures every configuration afresh, and replaces the lie. */
static void test_tune_rejects_lie(void **state) {
    (void)state;
    json_t *j = tune_json(NULL, NULL);
    assert_true(json_is_null(json_object_get(j, "cache_rejected")));
    json_decref(j);
    edit_cache(lie_constraint);
    char t4[600];
    snprintf(t4, sizeof t4, "%s/t4.json", dir);
    j = tune_json(NULL, t4);
    static const char why[] = "configuration TI=32,TK=32 of 'kernel' is not in today's space for these arguments";
    assert_string_equal(json_string_value(json_object_get(j, "cache_rejected")), why);
    assert_string_equal(json_string_value(json_object_get(j, "source")), "measured");
    assert_int_equal(json_integer_value(json_object_get(j, "measured")), 5);
    /* a loaded machine can end this race below the confidence it asked for (configurations
     * close together): then the next run re-races its finalists instead of serving it */
    bool settled = !json_is_true(json_object_get(j, "below_confidence"));
    json_decref(j);
    char line[300];
    snprintf(line, sizeof line, "kerntune tune: warning: the cache's decision for this problem was rejected, so it was measured again: %s\n", why);
    assert_non_null(strstr(err, line));
    char names[8][32];
    assert_int_equal(measured_in_t4(t4, names, 8), 5); /* every configuration ran: none was taken from the lie */
    /* the store holds what was measured */
    assert_int_equal(cli(NULL, NULL, "cache", "export", "--cache", db, NULL), 0);
    json_t *doc = stdout_json();
    json_t *e = json_array_get(json_object_get(doc, "entries"), 0);
    assert_string_not_equal(json_string_value(json_object_get(json_object_get(e, "winner"), "config")), "TI=32,TK=32");
    size_t i;
    json_t *u;
    json_array_foreach(json_object_get(e, "units"), i, u) {
        assert_string_not_equal(json_string_value(json_object_get(u, "config")), "TI=32,TK=32");
        if (strcmp(json_string_value(json_object_get(u, "candidate")), "kernel") == 0) assert_true(json_integer_value(json_object_get(u, "runs")) > 0);
    }
    json_decref(doc);
    /* and the next run is served from it (or re-races it, if it was not settled), without a
     * word about the lie */
    j = tune_json(NULL, NULL);
    assert_string_equal(json_string_value(json_object_get(j, "source")), settled ? "cache" : "measured");
    if (!settled) assert_true(json_is_true(json_object_get(j, "reraced")));
    assert_true(json_is_null(json_object_get(j, "cache_rejected")));
    json_decref(j);
    assert_null(strstr(err, settled ? "warning" : "was rejected")); /* (unsettled twice: a confidence warning is due) */
}

/* The decision made below the confidence its race asked for: 0.5 against 0.99, with the winner
 * and the first other configuration as its finalists. */
static char low_winner[32], low_other[32];
static void lie_low_confidence(json_t *e) {
    json_object_set_new(e, "confidence", json_real(0.5));
    json_object_set_new(e, "requested_confidence", json_real(0.99));
    snprintf(low_winner, sizeof low_winner, "%s", json_string_value(json_object_get(json_object_get(e, "winner"), "config")));
    low_other[0] = 0;
    size_t i;
    json_t *u;
    json_array_foreach(json_object_get(e, "units"), i, u) {
        bool kernel = strcmp(json_string_value(json_object_get(u, "candidate")), "kernel") == 0;
        bool finalist = is_winner_unit(e, u);
        if (kernel && !finalist && low_other[0] == 0) {
            snprintf(low_other, sizeof low_other, "%s", json_string_value(json_object_get(u, "config")));
            finalist = true;
        }
        json_object_set_new(u, "finalist", json_boolean(finalist));
    }
}

/* Below its requested confidence: with KERNTUNE_MODE=cache-only `kerntune tune` serves it and
 * warns (stderr, --json below_confidence); with measurement allowed it re-races the finalists
 * only (the T4 file shows runtimes for those two and no other) and records the new decision. */
static void test_tune_below_confidence(void **state) {
    (void)state;
    json_t *j = tune_json(NULL, NULL);
    json_decref(j);
    edit_cache(lie_low_confidence);
    j = tune_json("KERNTUNE_MODE=cache-only", NULL);
    assert_string_equal(json_string_value(json_object_get(j, "source")), "cache");
    assert_true(json_is_true(json_object_get(j, "below_confidence")));
    assert_true(json_real_value(json_object_get(j, "confidence")) == 0.5);
    assert_true(json_real_value(json_object_get(j, "requested_confidence")) == 0.99);
    assert_true(json_is_false(json_object_get(j, "reraced")));
    assert_int_equal(json_integer_value(json_object_get(j, "runs")), 0);
    json_decref(j);
    assert_non_null(strstr(err, "kerntune tune: warning: confidence 0.500 is below the 0.990 the race asked for (served from the cache without measuring)\n"));

    char t4[600];
    snprintf(t4, sizeof t4, "%s/t4.json", dir);
    j = tune_json(NULL, t4);
    assert_string_equal(json_string_value(json_object_get(j, "source")), "measured");
    assert_true(json_is_true(json_object_get(j, "reraced")));
    json_decref(j);
    char names[8][32];
    assert_int_equal(measured_in_t4(t4, names, 8), 2);
    bool has_winner = strcmp(names[0], low_winner) == 0 || strcmp(names[1], low_winner) == 0;
    bool has_other = strcmp(names[0], low_other) == 0 || strcmp(names[1], low_other) == 0;
    if (!has_winner || !has_other) fail_msg("re-raced %s and %s; the finalists are %s and %s", names[0], names[1], low_winner, low_other);
    /* the store: the re-raced decision, the other configurations as they were (0 runs now) */
    assert_int_equal(cli(NULL, NULL, "cache", "export", "--cache", db, NULL), 0);
    json_t *doc = stdout_json();
    json_t *e = json_array_get(json_object_get(doc, "entries"), 0);
    assert_true(json_real_value(json_object_get(e, "confidence")) != 0.5);
    size_t i, zero = 0;
    json_t *u;
    json_array_foreach(json_object_get(e, "units"), i, u) {
        if (strcmp(json_string_value(json_object_get(u, "candidate")), "kernel") != 0) continue;
        const char *cfg = json_string_value(json_object_get(u, "config"));
        bool finalist = strcmp(cfg, low_winner) == 0 || strcmp(cfg, low_other) == 0;
        json_int_t runs = json_integer_value(json_object_get(u, "runs"));
        if (finalist) assert_true(runs > 0);
        else zero++, assert_int_equal(runs, 0), assert_string_equal(json_string_value(json_object_get(u, "outcome")), "measured");
    }
    assert_int_equal(zero, 3);
    json_decref(doc);
}

/* ---- bad input -------------------------------------------------------------------------------- */

static void test_errors(void **state) {
    (void)state;
    char file[600], expect[1200];
    assert_int_equal(cli(NULL, NULL, "cache", NULL), 2);
    assert_memory_equal(err, "usage: kerntune cache COMMAND", 29);
    assert_int_equal(cli(NULL, NULL, "cache", "frobnicate", NULL), 2);
    assert_string_equal(err, "kerntune cache: unknown command 'frobnicate'; run 'kerntune cache --help' for the list\n");
    assert_int_equal(cli(NULL, NULL, "cache", "list", "--replace", NULL), 2);
    assert_string_equal(err, "kerntune cache list: unknown option '--replace'\nrun 'kerntune cache list --help' for the options\n");
    assert_int_equal(cli(NULL, NULL, "cache", "list", "extra", NULL), 2);
    assert_string_equal(err, "kerntune cache list: unexpected argument 'extra'\nrun 'kerntune cache list --help' for the options\n");
    assert_int_equal(cli(NULL, NULL, "cache", "list", "--op", NULL), 2);
    assert_string_equal(err, "kerntune cache list: --op needs a value\nrun 'kerntune cache list --help' for the options\n");
    assert_int_equal(cli(NULL, NULL, "cache", "import", NULL), 2);
    assert_string_equal(err, "kerntune cache import: which FILE?\nrun 'kerntune cache import --help' for the options\n");
    assert_int_equal(cli(NULL, NULL, "cache", "import", "a.json", "b.json", NULL), 2);
    assert_int_equal(cli(NULL, NULL, "cache", "path", "--json=yes", NULL), 2);
    assert_string_equal(err, "kerntune cache path: --json takes no value\nrun 'kerntune cache path --help' for the options\n");
    /* an unknown option of any length is printed whole (a 64-byte buffer cut it at 63) */
    char longopt[300] = "--";
    memset(longopt + 2, 'x', 250);
    longopt[252] = '\0';
    assert_int_equal(cli(NULL, NULL, "cache", "list", longopt, NULL), 2);
    snprintf(expect, sizeof expect, "kerntune cache list: unknown option '%s'\nrun 'kerntune cache list --help' for the options\n", longopt);
    assert_string_equal(err, expect);
    strcat(longopt, "=value");
    assert_int_equal(cli(NULL, NULL, "cache", "list", longopt, NULL), 2);
    assert_string_equal(err, expect);

    snprintf(file, sizeof file, "%s/missing.json", dir);
    assert_int_equal(cli(NULL, NULL, "cache", "import", file, "--cache", db, NULL), 1);
    snprintf(expect, sizeof expect, "kerntune cache import: %s: No such file or directory\n", file);
    assert_string_equal(err, expect);

    /* a syntax error: file, line and column */
    snprintf(file, sizeof file, "%s/syntax.json", dir);
    write_text(file, "{\n  \"kerntune_wisdom\": 1,\n  \"entries\": [1,,\n}\n");
    assert_int_equal(cli(NULL, NULL, "cache", "import", file, "--cache", db, NULL), 1);
    snprintf(expect, sizeof expect, "kerntune cache import: %s:3:17: unexpected token near ','\n", file);
    assert_string_equal(err, expect);

    /* a bad entry: its path in the document, and nothing imported */
    import_fixture();
    json_error_t jerr;
    json_t *doc = json_load_file(WISDOM, 0, &jerr);
    json_t *entries = json_object_get(doc, "entries");
    json_array_append_new(entries, json_deep_copy(json_array_get(entries, 0)));
    json_object_set_new(json_array_get(entries, 0), "op", json_string("renamed")); /* a new decision */
    json_t *third = json_deep_copy(json_array_get(entries, 2));
    json_object_set_new(third, "key", json_string("1,2"));
    json_array_set_new(entries, 2, third);
    snprintf(file, sizeof file, "%s/bad-entry.json", dir);
    assert_int_equal(json_dump_file(doc, file, JSON_INDENT(2)), 0);
    json_decref(doc);
    assert_int_equal(cli(NULL, NULL, "cache", "import", file, "--cache", db, NULL), 1);
    snprintf(expect, sizeof expect, "kerntune cache import: %s: entries[2].key: expected an array of integers, got a string\n", file);
    assert_string_equal(err, expect);
    assert_int_equal(cli(NULL, NULL, "cache", "list", "--op", "renamed", "--cache", db, NULL), 0);
    assert_string_equal(out, "no decisions\n");

    /* what is not a regular file is refused before anything is read from it or written to
     * it (a FIFO waited for a writer or a reader forever; /dev/zero was read until memory ran
     * out); stdin is read up to the same limit as a file */
    char fifo[600];
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(cli(NULL, NULL, "cache", "import", fifo, "--cache", db, NULL), 1);
    snprintf(expect, sizeof expect, "kerntune cache import: %s: is a FIFO; expected a regular file (or - for stdin)\n", fifo);
    assert_string_equal(err, expect);
    assert_int_equal(cli(NULL, NULL, "cache", "import", "/dev/zero", "--cache", db, NULL), 1);
    assert_string_equal(err, "kerntune cache import: /dev/zero: is a character device; expected a regular file (or - for stdin)\n");
    assert_int_equal(cli(NULL, NULL, "cache", "import", dir, "--cache", db, "--json", NULL), 1);
    snprintf(expect, sizeof expect, "%s: is a directory; expected a regular file (or - for stdin)", dir);
    expect_json_error("import", expect);
    assert_int_equal(cli(NULL, "/dev/zero", "cache", "import", "-", "--cache", db, NULL), 1);
    assert_string_equal(err, "kerntune cache import: (stdin): more than 256 MiB; kerntune reads at most 256 MiB of wisdom\n");
    snprintf(file, sizeof file, "%s/stdin.json", dir);
    write_text(file, "{\"kerntune_wisdom\": 1, \"library_version\": \"0.1.0\", \"entries\": []}");
    assert_int_equal(cli(NULL, file, "cache", "import", "-", "--cache", db, NULL), 0);
    assert_string_equal(out, "imported (stdin): 0 added, 0 replaced, 0 kept\n");
    assert_int_equal(cli(NULL, NULL, "cache", "export", "-o", fifo, "--cache", db, NULL), 1);
    snprintf(expect, sizeof expect, "kerntune cache export: %s: is a FIFO; expected a regular file (or a new one)\n", fifo);
    assert_string_equal(err, expect);
    assert_int_equal(cli(NULL, NULL, "cache", "export", "-o", "/dev/null", "--cache", db, "--json", NULL), 1);
    expect_json_error("export", "/dev/null: is a character device; expected a regular file (or a new one)");
    /* an existing file is replaced whole: a longer one leaves nothing of its old end */
    snprintf(file, sizeof file, "%s/old.json", dir);
    char longer[1 << 16];
    memset(longer, ' ', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    write_text(file, longer);
    assert_int_equal(cli(NULL, NULL, "cache", "export", "-o", file, "--cache", db, NULL), 0);
    assert_int_equal(cli(NULL, NULL, "cache", "export", "--cache", db, NULL), 0);
    static char exported[sizeof out];
    snprintf(exported, sizeof exported, "%s", out);
    slurp(file, out, sizeof out);
    assert_string_equal(out, exported);

    /* another major version */
    snprintf(file, sizeof file, "%s/major.json", dir);
    write_text(file, "{\"kerntune_wisdom\": 1, \"library_version\": \"7.0.1\", \"entries\": []}");
    assert_int_equal(cli(NULL, NULL, "cache", "import", file, "--cache", db, NULL), 1);
    snprintf(expect, sizeof expect,
             "kerntune cache import: %s: library_version: '7.0.1' is kerntune 7's; this library (%s) reads wisdom of major version 0 only\n",
             file, kt_version_string());
    assert_string_equal(err, expect);
    assert_int_equal(cli(NULL, NULL, "cache", "list", "--cache", db, NULL), 0);
    assert_non_null(strstr(out, "axpy"));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_help, setup, teardown),
        cmocka_unit_test_setup_teardown(test_import_list_show, setup, teardown),
        cmocka_unit_test_setup_teardown(test_export, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rm_clear, setup, teardown),
        cmocka_unit_test_setup_teardown(test_path, setup, teardown),
        cmocka_unit_test_setup_teardown(test_json_everywhere, setup, teardown),
        cmocka_unit_test_setup_teardown(test_real_dates_by_age, setup, teardown),
        cmocka_unit_test_setup_teardown(test_long_values_whole, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tune_rejects_lie, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tune_below_confidence, setup, teardown),
        cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
    };
    return kt_run_cases(argc, argv, tests, NULL, NULL);
}
