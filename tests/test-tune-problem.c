/*
 * test-tune-problem.c - what `kerntune tune` reads before any work: malformed problems and fields
 * kerntune does not implement each give their exact message; values are checked when the problem
 * is read; options, and options refused; long inputs are not cut; FIFOs are refused; every error
 * names its source (the JSON path, the option, the file).
 */
#define _GNU_SOURCE /* popen, mkdtemp */
#include "tune-cli.h"

#include <errno.h>

/* Each malformed problem gives its exact message. */
static void test_malformed_problems(void **state) {
    (void)state;
    static const struct {
        const char *file, *message;
    } cases[] = {
        {"01_syntax.json", "01_syntax.json:5:25: '}' expected"},
        {"02_values_type.json", "02_values_type.json: ConfigurationSpace.TuningParameters[1].Values: expected a string (a Python list, e.g. \"[16, 32, 64]\"), got an integer"},
        {"03_no_kernelspec.json", "03_no_kernelspec.json: KernelSpecification: missing; expected an object"},
        {"04_condition_syntax.json", "04_condition_syntax.json: ConfigurationSpace.Conditions[0].Expression: kt_space_add_constraint: expression 'TI +* 2 > 4': column 5: expected a value, found '*'"},
        {"05_values_unclosed.json", "05_values_unclosed.json: ConfigurationSpace.TuningParameters[0].Values: kt_space_add_param: parameter 'TI': expression '[4, 16': column 7: expected ',' or ']', found the end"},
        {"06_missing_kernel.json", "06_missing_kernel.json: KernelSpecification.KernelFile: the kernel file " KT_DATA "/t1/bad/no_such_kernel.c cannot be read: No such file or directory"},
        {"07_language.json", "07_language.json: KernelSpecification.Language: 'Vulkan' is not supported; expected C, OpenCL or CUDA"},
        {"08_arg_type.json", "08_arg_type.json: KernelSpecification.Arguments[0].Type: 'float4' is not supported; expected bool, int8..int64, uint8..uint64, half, float or double"},
        {"09_size_index.json", "09_size_index.json: KernelSpecification.Arguments[0].Size: kt_space_eval_int: expression 'ProblemSize[0] * ProblemSize[1]': column 29: index out of range"},
        {"10_reference_target.json", "10_reference_target.json: KernelSpecification.ReferenceArguments[0].TargetName: 'nope' names no argument"},
        {"11_param_type.json", "11_param_type.json: ConfigurationSpace.TuningParameters[0].Type: 'complex' is not one of int, uint, float, bool, string"},
        {"12_unknown_name.json", "12_unknown_name.json: ConfigurationSpace.Conditions[0].Expression: kt_space_add_constraint: expression 'TI <= block_size': column 7: name 'block_size' is not defined"},
    };
    char cwd[1024];
    assert_non_null(getcwd(cwd, sizeof cwd));
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/t1/bad", KT_DATA);
    assert_int_equal(chdir(dir), 0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[512], want[2048];
        snprintf(args, sizeof args, "tune %s --quiet", cases[i].file);
        assert_int_equal(run(args), 1);
        snprintf(want, sizeof want, "kerntune tune: %s\n", cases[i].message);
        if (strcmp(err, want) != 0) fail_msg("%s:\n  got  %s  want %s", cases[i].file, err, want);
        assert_string_equal(out, "");
    }
    assert_int_equal(chdir(cwd), 0);
}

/* [8] C: a field kerntune does not implement, or a value of one it does not implement, is
 * refused with its JSON path; descriptive fields are accepted. */
static void test_refused_fields(void **state) {
    (void)state;
    make_tmpdir();
    static const struct {
        const char *base, *path, *value, *message; /* message NULL: accepted */
    } cases[] = {
        {"matmul_c.json", "KernelSpecification.Colour", "\"blue\"",
         "KernelSpecification.Colour: kerntune does not implement this field; it refuses the problem rather than ignore it"},
        {"matmul_c.json", "Extra", "{}", "Extra: kerntune does not implement this field; it refuses the problem rather than ignore it"},
        {"matmul_c.json", "KernelSpecification.Arguments[1].Shape", "[2]",
         "KernelSpecification.Arguments[1].Shape: kerntune does not implement this field; it refuses the problem rather than ignore it"},
        {"matmul_c.json", "KernelSpecification.Arguments[0].MemType", "\"Constant\"",
         "KernelSpecification.Arguments[0].MemType: Constant on a WriteOnly argument: constant memory is read-only; expected AccessType ReadOnly"},
        {"matmul_c.json", "KernelSpecification.Arguments[1].MemType", "\"Texture\"",
         "KernelSpecification.Arguments[1].MemType: 'Texture' is not supported; expected Constant (constant memory)"},
        {"matmul_c.json", "KernelSpecification.Arguments[3].MemType", "\"Constant\"",
         "KernelSpecification.Arguments[3].MemType: Constant on a Scalar: only a Vector can be placed in constant memory"},
        {"matmul_c.json", "KernelSpecification.Arguments[1].MemoryType", "\"Local\"",
         "KernelSpecification.Arguments[1].MemoryType: 'Local' is not supported; expected Scalar or Vector"},
        {"matmul_c.json", "KernelSpecification.Stream", "0",
         "KernelSpecification.Stream: kerntune runs every configuration on its own stream; expected null, got an integer"},
        {"matmul_c.json", "KernelSpecification.Stream", "null", NULL},
        {"matmul_cl.json", "KernelSpecification.SharedMemory", "1024",
         "KernelSpecification.SharedMemory: 1024 bytes of dynamic shared memory: only CUDA kernels are launched with it (an OpenCL kernel declares its own)"},
        {"matmul_c.json", "KernelSpecification.SharedMemory", "0", NULL},
        {"matmul_c.json", "KernelSpecification.Arguments[1].Output", "1",
         "KernelSpecification.Arguments[1].Output: marks an output, but AccessType is ReadOnly: kerntune validates the outputs AccessType names (WriteOnly or ReadWrite)"},
        {"matmul_c.json", "KernelSpecification.Arguments[0].Output", "0",
         "KernelSpecification.Arguments[0].Output: marks an input, but AccessType is WriteOnly: kerntune validates the outputs AccessType names (WriteOnly or ReadWrite)"},
        {"matmul_c.json", "KernelSpecification.Arguments[0].Output", "1", NULL},
        {"matmul_c.json", "KernelSpecification.Arguments[1].FillType", "\"Generator\"",
         "KernelSpecification.Arguments[1].FillType: 'Generator' is not supported; expected Constant, Random or BinaryRaw"},
        {"matmul_c.json", "KernelSpecification.Arguments[1].DataSource", "\"a.bin\"",
         "KernelSpecification.Arguments[1].DataSource: is read only with FillType BinaryRaw"},
        {"matmul_c.json", "KernelSpecification.Arguments[3].AccessType", "\"ReadWrite\"",
         "KernelSpecification.Arguments[3].AccessType: 'ReadWrite' on a Scalar: a scalar is passed by value and cannot be written"},
        {"matmul_c.json", "KernelSpecification.Arguments[1].TypeSize", "8",
         "KernelSpecification.Arguments[1].TypeSize: 8 bytes, but a float is 4 bytes"},
        {"matmul_c.json", "KernelSpecification.Profiling", "true",
         "KernelSpecification.Profiling: true: kerntune does not collect profiling counters; expected false"},
        {"matmul_c.json", "KernelSpecification.SimulationInput", "\"cache.json\"",
         "KernelSpecification.SimulationInput: kerntune replays recorded data given with --simulate FILE only"},
        {"matmul_c.json", "KernelSpecification.Device", "{\"PlatformId\": 0, \"DeviceId\": 0}",
         "KernelSpecification.Device.PlatformId: kerntune numbers a backend's devices across platforms: give Device.Id (see 'kerntune devices') or --device"},
        {"matmul_c.json", "KernelSpecification.Device", "{\"Name\": \"no such device\"}",
         "KernelSpecification.Device.Name: no c device is named like 'no such device' (see 'kerntune devices')"},
        {"matmul_c.json", "KernelSpecification.Device", "{\"Id\": 3}",
         "KernelSpecification.Device.Id: 3, but there is 1 c device (see 'kerntune devices')"},
        {"matmul_c.json", "Search", "{\"Name\": \"pso\"}",
         "Search.Name: 'pso' is not a strategy kerntune has (exhaustive, random, local, anneal, genetic, model, auto, or Kernel "
         "Tuner's brute_force, random_sample, greedy_ils, greedy_mls, simulated_annealing, dual_annealing, genetic_algorithm, "
         "bayes_opt); --strategy NAME overrides it"},
        {"matmul_c.json", "Search", "{\"Name\": \"random_sample\", \"Attributes\": [{\"Name\": \"fraction\", \"Value\": 0.1}]}",
         "Search.Attributes: kerntune's strategies take none (pass --strategy random to tune without them)"},
        {"matmul_c.json", "Search", "{\"Name\": \"genetic_algorithm\"}", NULL},
        {"matmul_c.json", "Search", "{\"Name\": \"model\"}", NULL},
        {"matmul_c.json", "Search", "{\"Name\": \"brute_force\"}", NULL},
        {"matmul_c.json", "Budget", "[{\"Type\": \"ConfigurationCount\", \"BudgetValue\": 0}]",
         "Budget[0].BudgetValue: 0; expected a number above 0"},
        {"matmul_c.json", "Budget", "[{\"Type\": \"ConfigurationCount\", \"BudgetValue\": 1e30}]",
         "Budget[0].BudgetValue: 1e+30 configurations is out of range: at most 1000000000000000"},
        {"matmul_c.json", "Budget", "[{\"Type\": \"ConfigurationCount\", \"BudgetValue\": 2.5}]",
         "Budget[0].BudgetValue: 2.5; expected a whole number of configurations"},
        {"matmul_c.json", "General.TimeUnit", "\"Fortnights\"",
         "General.TimeUnit: 'Fortnights' is not one of Nanoseconds, Microseconds, Milliseconds, Seconds"},
        {"matmul_c.json", "General.OutputFormat", "\"JSON\"", NULL},
        {"matmul_c.json", "General.FormatVersion", "1", NULL},
        {"matmul_c.json", "KernelSpecification.GlobalSizeType", "\"Vulkan\"",
         "KernelSpecification.GlobalSizeType: 'Vulkan' is not one of OpenCL, CUDA"},
        {"matmul_c.json", "KernelSpecification.ProblemSize", "[-1]",
         "KernelSpecification.ProblemSize[0]: -1; expected a size of at least 1"},
        {"matmul_c.json", "KernelSpecification.GridDivX", "[\"TI\", 2.5]",
         "KernelSpecification.GridDivX[1]: expected a string (an expression) or an integer, got a number"},
        {"matmul_c.json", "KernelSpecification.GridDivY", "[\"TI\", \"nope\"]",
         "KernelSpecification.GridDivY[1]: kt_space_set_geometry: expression 'int(nope)': column 5: name 'nope' is not defined"},
        {"matmul_cl.json", "KernelSpecification.LocalSize.Y", "\"LY\"",
         "KernelSpecification.LocalSize.Y: kt_space_set_geometry: expression 'LY': column 1: name 'LY' is not defined"},
        {"matmul_c.json", "KernelSpecification.ReferenceArguments",
         "[{\"Name\": \"r\", \"TargetName\": \"c\", \"FillType\": \"Constant\", \"FillValue\": 0, \"ValidationMethod\": \"AbsoluteDifference\", \"ValidationThreshold\": 1}]",
         "KernelSpecification.ReferenceArguments[0].ValidationMethod: 'AbsoluteDifference' is not supported; expected SideBySideComparison or SideBySideRelativeComparison"},
        {"matmul_c.json", "KernelSpecification.ReferenceArguments",
         "[{\"Name\": \"r\", \"TargetName\": \"a\", \"FillType\": \"Constant\", \"FillValue\": 0}]",
         "KernelSpecification.ReferenceArguments[0].TargetName: 'a' is ReadOnly: only an output (WriteOnly or ReadWrite) has expected contents"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[64], args[1024], want[2048];
        snprintf(name, sizeof name, "case%02zu.json", i);
        mutate(cases[i].base, name, cases[i].path, cases[i].value);
        /* an accepted case is replayed (matmul_c's Kernel Tuner cache): read, not run; a refused
         * one must fail before any work */
        snprintf(args, sizeof args, "tune '%s/%s' --quiet%s%s", tmpdir, name, cases[i].message ? "" : " --simulate " KT_DATA "/t1/matmul_c.ktcache.json", "");
        int rc = run(args);
        if (cases[i].message == NULL) {
            if (rc != 0) fail_msg("case %zu (%s = %s) refused: %s", i, cases[i].path, cases[i].value, err);
            continue;
        }
        snprintf(want, sizeof want, "kerntune tune: %s/%s: %s\n", tmpdir, name, cases[i].message);
        if (rc != 1 || strcmp(err, want) != 0) fail_msg("case %zu (exit %d):\n  got  %s  want %s", i, rc, err, want);
    }
    /* --strategy exhaustive overrides the file's Search */
    mutate("matmul_c.json", "search.json", "Search", "{\"Name\": \"random_sample\", \"Attributes\": [{\"Name\": \"fraction\", \"Value\": \"0.1\"}]}");
    char args[1024];
    snprintf(args, sizeof args, "tune '%s/search.json' --strategy exhaustive --simulate '%s/t1/matmul_c.ktcache.json' --quiet --json", tmpdir, KT_DATA);
    assert_int_equal(run(args), 0);
    json_t *s = doc();
    assert_int_equal(json_integer_value(json_object_get(s, "configurations")), 5);
    json_decref(s);
    remove_tmpdir();
}

/* Checked when the problem is read, each refused with the JSON path at fault: fill values
 * against their argument's type (a whole number in range for an integer type: int32
 * 10000000000.7 became 1410065408, uint32 -1 4294967295, int8 300 44; a Random bound the type
 * can reach), names (arguments and parameters named twice, a parameter named ProblemSize, or
 * not a name), a half Scalar, a second Budget of a kind, ProblemSize as one integer. */
static void test_checked_at_load(void **state) {
    (void)state;
    make_tmpdir();
    static const struct {
        const char *path, *value, *path2, *value2, *message; /* path2 NULL: one change; message NULL: accepted */
    } cases[] = {
        {"KernelSpecification.Arguments[3].FillValue", "10000000000.7", NULL, NULL,
         "KernelSpecification.Arguments[3].FillValue: 10000000000.7 is not a whole number: an int32 holds whole numbers from -2147483648 to 2147483647"},
        {"KernelSpecification.Arguments[3].FillValue", "10000000000", NULL, NULL,
         "KernelSpecification.Arguments[3].FillValue: 10000000000 is out of range: an int32 holds whole numbers from -2147483648 to 2147483647"},
        {"KernelSpecification.Arguments[3].Type", "\"uint32\"", "KernelSpecification.Arguments[3].FillValue", "-1",
         "KernelSpecification.Arguments[3].FillValue: -1 is out of range: a uint32 holds whole numbers from 0 to 4294967295"},
        {"KernelSpecification.Arguments[3].Type", "\"int8\"", "KernelSpecification.Arguments[3].FillValue", "300",
         "KernelSpecification.Arguments[3].FillValue: 300 is out of range: an int8 holds whole numbers from -128 to 127"},
        {"KernelSpecification.Arguments[3].Type", "\"bool\"", "KernelSpecification.Arguments[3].FillValue", "2",
         "KernelSpecification.Arguments[3].FillValue: 2 is out of range: a bool holds whole numbers from 0 to 1"},
        {"KernelSpecification.Arguments[3].Type", "\"uint64\"", "KernelSpecification.Arguments[3].FillValue", "1.8446744073709552e19",
         "KernelSpecification.Arguments[3].FillValue: 1.8446744073709552e+19 is out of range: a uint64 holds whole numbers from 0 to 18446744073709551615"},
        {"KernelSpecification.Arguments[3].FillValue", NULL, "KernelSpecification.Arguments[3].Value", "2.5",
         "KernelSpecification.Arguments[3].Value: 2.5 is not a whole number: an int32 holds whole numbers from -2147483648 to 2147483647"},
        {"KernelSpecification.Arguments[1].Type", "\"int8\"", "KernelSpecification.Arguments[1].FillValue", "300",
         "KernelSpecification.Arguments[1].FillValue: 300: Random values go from 0 up to it, and an int8 holds at most 127"},
        {"KernelSpecification.Arguments[1].FillValue", "-1", NULL, NULL,
         "KernelSpecification.Arguments[1].FillValue: -1: the bound of Random values (from 0 up to it); expected a number above 0"},
        {"KernelSpecification.Arguments[0].Type", "\"int32\"", "KernelSpecification.ReferenceArguments",
         "[{\"Name\": \"r\", \"TargetName\": \"c\", \"FillType\": \"Constant\", \"FillValue\": 0.5}]",
         "KernelSpecification.ReferenceArguments[0].FillValue: 0.5 is not a whole number: an int32 holds whole numbers from -2147483648 to 2147483647"},
        {"KernelSpecification.Arguments[3].Type", "\"half\"", NULL, NULL,
         "KernelSpecification.Arguments[3].Type: 'half' on a Scalar: kerntune passes scalars of the integer types, float and double only; "
         "give a half as a Vector of Size 1"},
        {"KernelSpecification.Arguments[2].Name", "\"a\"", NULL, NULL, "KernelSpecification.Arguments[2].Name: 'a' is already the name of Arguments[1]"},
        {"KernelSpecification.Arguments[1].Name", NULL, "KernelSpecification.Arguments[2].Name", "\"arg1\"",
         "KernelSpecification.Arguments[2].Name: 'arg1' is already the name of Arguments[1] (the name kerntune gives an argument without one)"},
        {"ConfigurationSpace.TuningParameters[1].Name", "\"TI\"", NULL, NULL,
         "ConfigurationSpace.TuningParameters[1].Name: 'TI' is already the name of ConfigurationSpace.TuningParameters[0]"},
        {"ConfigurationSpace.TuningParameters[0].Name", "\"ProblemSize\"", NULL, NULL,
         "ConfigurationSpace.TuningParameters[0].Name: 'ProblemSize' names the problem's size (KernelSpecification.ProblemSize) in every "
         "expression; choose another name"},
        {"ConfigurationSpace.TuningParameters[0].Name", "\"a b\"", NULL, NULL,
         "ConfigurationSpace.TuningParameters[0].Name: 'a b' is not a name: expected a letter or _ followed by letters, digits and _ (it is "
         "a name in expressions and a define in the kernel)"},
        {"ConfigurationSpace.TuningParameters[0].Name", "\"\"", NULL, NULL,
         "ConfigurationSpace.TuningParameters[0].Name: '' is not a name: expected a letter or _ followed by letters, digits and _ (it is "
         "a name in expressions and a define in the kernel)"},
        {"ConfigurationSpace.TuningParameters[0].Name", "\"if\"", NULL, NULL,
         "ConfigurationSpace.TuningParameters[0].Name: 'if' is a word of the expression language; choose another name"},
        {"Budget", "[{\"Type\": \"ConfigurationCount\", \"BudgetValue\": 3}, {\"Type\": \"ConfigurationCount\", \"BudgetValue\": 2}]", NULL, NULL,
         "Budget[1].Type: a second ConfigurationCount (Budget[0] is one): give each kind of budget once"},
        {"KernelSpecification.ProblemSize", "\"64\"", NULL, NULL,
         "KernelSpecification.ProblemSize: expected an array of integers (or one integer), got a string"},
        {"KernelSpecification.ProblemSize", "0", NULL, NULL, "KernelSpecification.ProblemSize: 0; expected a size of at least 1"},
        /* accepted */
        {"KernelSpecification.ProblemSize", "64", NULL, NULL, NULL},
        {"KernelSpecification.Arguments[3].Type", "\"int64\"", "KernelSpecification.Arguments[3].FillValue", "9223372036854775807", NULL},
        {"KernelSpecification.Arguments[3].Type", "\"int64\"", "KernelSpecification.Arguments[3].FillValue", "-9223372036854775808", NULL},
        {"KernelSpecification.Arguments[3].Type", "\"uint8\"", "KernelSpecification.Arguments[3].FillValue", "255.0", NULL},
        {"KernelSpecification.Arguments[1].Type", "\"uint8\"", "KernelSpecification.Arguments[1].FillValue", "256", NULL},
        {"Budget", "[{\"Type\": \"ConfigurationCount\", \"BudgetValue\": 3}, {\"Type\": \"ConfigurationFraction\", \"BudgetValue\": 0.5}]",
         NULL, NULL, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[64], file[512], args[1024], want[2048];
        snprintf(name, sizeof name, "load%02zu.json", i);
        mutate("matmul_c.json", name, cases[i].path, cases[i].value);
        snprintf(file, sizeof file, "%s/%s", tmpdir, name);
        if (cases[i].path2) {
            json_t *j = load(file);
            json_error_t e;
            set_path(j, cases[i].path2, json_loads(cases[i].value2, JSON_DECODE_ANY, &e));
            write_json(file, j);
            json_decref(j);
        }
        /* an accepted case is replayed (read, not run); a refused one fails before any work */
        snprintf(args, sizeof args, "tune '%s' --quiet%s", file, cases[i].message ? "" : " --simulate " KT_DATA "/t1/matmul_c.ktcache.json");
        int rc = run(args);
        if (cases[i].message == NULL) {
            if (rc != 0) fail_msg("case %zu (%s = %s) refused: %s", i, cases[i].path, cases[i].value, err);
            continue;
        }
        snprintf(want, sizeof want, "kerntune tune: %s: %s\n", file, cases[i].message);
        if (rc != 1 || strcmp(err, want) != 0) fail_msg("case %zu (exit %d):\n  got  %s  want %s", i, rc, err, want);
    }
    /* --problem-size gives as many dimensions as the problem's ProblemSize */
    char args[1024];
    snprintf(args, sizeof args, "tune '%s/t1/matmul_c.json' --problem-size 8,8", KT_DATA);
    assert_int_equal(run(args), 1);
    expect_error("--problem-size 8,8: 2 dimensions; the problem's KernelSpecification.ProblemSize has 1");
    snprintf(args, sizeof args, "tune '%s/hub/two.json' --problem-size 8", tmpdir);
    mutate("matmul_c.json", "two.json", "KernelSpecification.ProblemSize", "[64, 64]");
    snprintf(args, sizeof args, "tune '%s/two.json' --problem-size 8 --quiet", tmpdir);
    assert_int_equal(run(args), 1);
    expect_error("--problem-size 8: 1 dimension; the problem's KernelSpecification.ProblemSize has 2");
    remove_tmpdir();
}

static void test_options(void **state) {
    (void)state;
    char args[2048];
    /* --budget: the first 2 configurations only */
    snprintf(args, sizeof args, "tune '%s/t1/matmul_c.json' --budget 2 --quiet --json", KT_DATA);
    assert_int_equal(run(args), 0);
    json_t *s = doc();
    assert_int_equal(json_integer_value(json_object_get(s, "measured")), 2);
    assert_int_equal(json_integer_value(json_object_get(s, "not_run")), 3);
    json_decref(s);
    /* --define fixes a parameter */
    snprintf(args, sizeof args, "tune '%s/t1/matmul_c.json' --define TI=16 --quiet --json", KT_DATA);
    assert_int_equal(run(args), 0);
    s = doc();
    assert_int_equal(json_integer_value(json_object_get(s, "configurations")), 2);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(json_object_get(s, "best"), "configuration"), "TI")), 16);
    assert_string_equal(json_string_value(json_object_get(s, "flush")), "auto"); /* the default: runs start cold */
    json_decref(s);
    /* --flush off: said in the output and in the T4 file */
    make_tmpdir();
    char t4[600];
    snprintf(t4, sizeof t4, "%s/flush.t4.json", tmpdir);
    snprintf(args, sizeof args, "tune '%s/t1/matmul_c.json' --define TI=16 --flush off --t4 '%s' --quiet --json", KT_DATA, t4);
    assert_int_equal(run(args), 0);
    s = doc();
    assert_string_equal(json_string_value(json_object_get(s, "flush")), "off");
    assert_int_equal(json_integer_value(json_object_get(s, "measured")), 2);
    json_decref(s);
    json_error_t jerr;
    json_t *t4doc = json_load_file(t4, 0, &jerr);
    if (t4doc == NULL) fail_msg("%s: %s", t4, jerr.text);
    assert_string_equal(json_string_value(json_object_get(json_object_get(t4doc, "x-kerntune"), "flush")), "off");
    json_decref(t4doc);
    remove_tmpdir();
    /* --problem-size changes the space through the constraints and sizes */
    snprintf(args, sizeof args, "tune '%s/t1/matmul_cl.json' --problem-size 8 --quiet --json %s", KT_DATA, SMALL("--define LX=4"));
    assert_int_equal(run(args), 0);
    s = doc();
    /* (8 // TM) % LX == 0: TM=1 with LX 4, 8; TM=2 with 4 */
    assert_int_equal(json_integer_value(json_object_get(s, "configurations")), KT_TEST_LARGE ? 3 : 2);
    json_decref(s);
    static const struct {
        const char *args, *message;
    } usage[] = {
        {"tune", "no problem file given"},
        {"tune x.json --frobnicate", "unknown option '--frobnicate'"},
        {"tune x.json --json=1", "unknown option '--json=1'"},
        {"tune x.json --budget lots", "--budget 'lots': expected a count of configurations (N), a percentage of them (N%) or seconds (Ns)"},
        {"tune x.json --budget 0%", "--budget '0%': a percentage must be above 0 and at most 100"},
        {"tune x.json --budget 101%", "--budget '101%': a percentage must be above 0 and at most 100"},
        {"tune x.json --measure recorded", "--measure recorded needs --simulate"},
        {"tune x.json --flush cold", "--flush 'cold': expected auto, off or on"},
        {"tune x.json --strategy pso", "--strategy 'pso': expected exhaustive, random, local, anneal, genetic, model or auto"},
        {"tune x.json --define TI", "--define 'TI': expected NAME=VALUE"},
        {"tune x.json --seed", "--seed needs a value"},
        {"tune x.json --problem-size 0", "--problem-size '0': expected up to 8 comma-separated sizes, each at least 1"},
        {"tune x.json --problem-size 4,,4", "--problem-size '4,,4': expected up to 8 comma-separated sizes, each at least 1"},
        /* numbers out of range are refused naming the option, never converted */
        {"tune x.json --budget 1e30", "--budget '1e30': expected a count of configurations (N), a percentage of them (N%) or seconds (Ns)"},
        {"tune x.json --budget 99999999999999999999", "--budget '99999999999999999999': out of range: at most 9223372036854775807 configurations"},
        {"tune x.json --budget 9223372036854775808", "--budget '9223372036854775808': out of range: at most 9223372036854775807 configurations"},
        {"tune x.json --seed 18446744073709551616", "--seed '18446744073709551616': out of range: expected an integer from 0 to 9223372036854775807"},
        {"tune x.json --seed 1e30", "--seed '1e30': expected a non-negative integer"},
        {"tune x.json --device 1000001", "--device '1000001': out of range: expected a device number from 0 to 1000000"},
        {"tune x.json --device 99999999999999999999", "--device '99999999999999999999': out of range: expected a device number from 0 to 1000000"},
        {"tune x.json --device 1e30", "--device '1e30': expected a device number"},
        {"tune x.json --timeout 1e30", "--timeout '1e30': out of range: expected seconds, more than 0 and at most 1000000"},
        {"tune x.json --timeout 1e400", "--timeout '1e400': out of range: expected seconds, more than 0 and at most 1000000"},
        {"tune x.json --problem-size 8,99999999999999999999",
         "--problem-size '8,99999999999999999999': 99999999999999999999 is out of range: a size is at most 9223372036854775807"},
    };
    for (size_t i = 0; i < sizeof usage / sizeof usage[0]; i++) {
        assert_int_equal(run(usage[i].args), 2);
        if (strstr(err, usage[i].message) == NULL) fail_msg("%s: %s", usage[i].args, err);
    }
    snprintf(args, sizeof args, "tune '%s/t1/matmul_c.json' --define NOPE=1 --quiet", KT_DATA);
    assert_int_equal(run(args), 1);
    expect_error("--define NOPE: the problem has no parameter of that name");
    assert_int_equal(run("tune --help"), 0);
    assert_non_null(strstr(out, "usage: kerntune tune PROBLEM.json"));
}

/* Options that were accepted and then ignored or harmful are refused, naming them: a parameter
 * given twice with --define (the last won), --device with --simulate (ignored), a --t4 that is
 * a file the command reads (the results replaced it). Nothing is written then. */
static void test_options_refused(void **state) {
    (void)state;
    make_tmpdir();
    char args[4096], want[2048], problem[512], rec[512], db[512], kernel[512], copy[512];
    snprintf(args, sizeof args, "tune '%s/t1/matmul_c.json' --define TI=4 --define TK=8 --define TI=16", KT_DATA);
    assert_int_equal(run(args), 2);
    expect_error("--define TI=16: TI is already given (--define TI=4); give each parameter once");
    snprintf(args, sizeof args, "tune '%s/t1/matmul_c.json' --device 0 --simulate '%s/t1/matmul_c.ktcache.json'", KT_DATA, KT_DATA);
    assert_int_equal(run(args), 2);
    expect_error("--device 0 with --simulate: a replay runs on no device (the recording is its device); leave --device out");
    /* copies, so that a failure of this test replaces nothing of the repository's */
    snprintf(kernel, sizeof kernel, "%s/matmul.c", tmpdir);
    snprintf(args, sizeof args, "cp '%s/t1/matmul.c' '%s/t1/matmul_c.ktcache.json' '%s/'", KT_DATA, KT_DATA, tmpdir);
    assert_int_equal(system(args), 0);
    mutate("matmul_c.json", "p.json", "KernelSpecification.KernelFile", "\"matmul.c\"");
    snprintf(problem, sizeof problem, "%s/p.json", tmpdir);
    snprintf(rec, sizeof rec, "%s/matmul_c.ktcache.json", tmpdir);
    snprintf(db, sizeof db, "%s/cache.db", tmpdir);
    write_file(db, "");
    json_t *before = load(problem);
    snprintf(args, sizeof args, "tune '%s' --t4 '%s' --json", problem, problem);
    assert_int_equal(run(args), 2);
    snprintf(want, sizeof want, "--t4 %s is the problem file: the results would replace it", problem);
    expect_error(want);
    json_t *j = doc();
    assert_string_equal(json_string_value(json_object_get(j, "error")), want);
    json_decref(j);
    snprintf(copy, sizeof copy, "%s/./p.json", tmpdir); /* another name of the same file */
    snprintf(args, sizeof args, "tune '%s' --t4 '%s'", problem, copy);
    assert_int_equal(run(args), 2);
    snprintf(want, sizeof want, "--t4 %s is the problem file %s: the results would replace it", copy, problem);
    expect_error(want);
    json_t *after = load(problem);
    assert_true(json_equal(before, after)); /* untouched */
    json_decref(before);
    json_decref(after);
    snprintf(args, sizeof args, "tune '%s' --simulate '%s' --t4 '%s'", problem, rec, rec);
    assert_int_equal(run(args), 2);
    snprintf(want, sizeof want, "--t4 %s is the --simulate recording: the results would replace it", rec);
    expect_error(want);
    snprintf(args, sizeof args, "tune '%s' --cache '%s' --t4 '%s'", problem, db, db);
    assert_int_equal(run(args), 2);
    snprintf(want, sizeof want, "--t4 %s is the --cache file: the results would replace it", db);
    expect_error(want);
    snprintf(args, sizeof args, "tune '%s' --t4 '%s'", problem, kernel);
    assert_int_equal(run(args), 2);
    snprintf(want, sizeof want, "--t4 %s is the problem's KernelSpecification.KernelFile: the results would replace it", kernel);
    expect_error(want);
    assert_null(strstr(err, "configurations on"));
    remove_tmpdir();
}

/* ---- [8] 7: no input is cut ----------------------------------------------------------------- */

static void test_long_inputs(void **state) {
    (void)state;
    make_tmpdir();
    /* a 199-value list (1193 characters), replayed from a recording of its 199 configurations */
    char values[4096] = "[";
    for (int v = 1000; v < 1199; v++) snprintf(values + strlen(values), sizeof values - strlen(values), "%s%d", v > 1000 ? ", " : "", v);
    strcat(values, "]");
    assert_true(strlen(values) > 1000);
    json_t *j = load(KT_DATA "/t1/matmul_c.json");
    json_t *params = json_object_get(json_object_get(j, "ConfigurationSpace"), "TuningParameters");
    json_t *pad = json_pack("{s:s, s:s, s:s, s:i}", "Name", "PAD", "Type", "int", "Values", values, "Default", 1000);
    json_array_append_new(params, pad);
    json_object_set_new(json_object_get(j, "KernelSpecification"), "KernelFile", json_string(KT_DATA "/t1/matmul.c"));
    char problem[512], rec[512], args[2048];
    snprintf(problem, sizeof problem, "%s/wide.json", tmpdir);
    write_json(problem, j);
    json_decref(j);
    json_t *t4 = json_pack("{s:{s:s}, s:[]}", "metadata", "timeunit", "milliseconds", "results");
    int best_pad = 0, idx = 0;
    double best_t = 1e9;
    for (int ti = 4; ti <= 32; ti *= 2)
        for (int tk = 8; tk <= 32; tk += 24)
            for (int v = 1000; v < 1199; v++) {
                if (ti == 8 || ti * tk > 512) continue;
                double t = 1.0 + (double)((idx++ * 7919) % 1000) / 1000.0; /* 995 distinct times */
                if (t < best_t) best_t = t, best_pad = v;
                json_array_append_new(json_object_get(t4, "results"),
                                      json_pack("{s:{s:i,s:i,s:i}, s:s, s:{s:[f]}, s:[{s:s,s:f,s:s}]}", "configuration", "TI", ti, "TK", tk,
                                                "PAD", v, "invalidity", "correct", "times", "runtimes", t, "measurements", "name",
                                                "time", "value", t, "unit", "ms"));
            }
    snprintf(rec, sizeof rec, "%s/wide.t4.json", tmpdir);
    write_json(rec, t4);
    json_decref(t4);
    snprintf(args, sizeof args, "tune '%s' --simulate '%s' --measure recorded --json --quiet", problem, rec);
    if (run(args) != 0) fail_msg("%s", err);
    json_t *s = doc();
    assert_int_equal(json_integer_value(json_object_get(s, "configurations")), 5 * 199);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(json_object_get(s, "best"), "configuration"), "PAD")), best_pad);
    assert_true(json_real_value(json_object_get(json_object_get(s, "best"), "time_ms")) == best_t);
    json_decref(s);
    /* a problem whose absolute path is longer than PATH_MAX (4096): it tunes, its kernel found
     * beside it */
    char deep[8192];
    snprintf(deep, sizeof deep, "%s", tmpdir);
    char component[201];
    memset(component, 'd', 200);
    component[200] = '\0';
    char cwd[1024];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(tmpdir), 0);
    for (int i = 0; i < 22; i++) { /* 22 * 201 characters */
        assert_int_equal(mkdir(component, 0700), 0);
        assert_int_equal(chdir(component), 0);
    }
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cp '%s/t1/matmul.c' '%s/t1/matmul_c.json' .", KT_DATA, KT_DATA);
    assert_int_equal(system(cmd), 0);
    int rc = run("tune matmul_c.json --define TI=4 --define TK=8 --quiet --json");
    if (rc != 0) fail_msg("a long path: %s", err);
    json_decref(doc());
    assert_int_equal(chdir(cwd), 0);
    remove_tmpdir();
}

/* ---- [8] 8: a FIFO is refused, never waited on ---------------------------------------------- */

static void test_fifo_refused(void **state) {
    (void)state;
    make_tmpdir();
    char fifo[512], args[2048], want[2048];
    snprintf(fifo, sizeof fifo, "%s/kernel.c", tmpdir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    mutate("matmul_c.json", "fifo_kernel.json", "KernelSpecification.KernelFile", "\"kernel.c\"");
    snprintf(args, sizeof args, "tune '%s/fifo_kernel.json'", tmpdir);
    assert_int_equal(run(args), 1); /* run() fails the test on its time limit */
    snprintf(want, sizeof want, "%s/fifo_kernel.json: KernelSpecification.KernelFile: the kernel file %s is a FIFO; expected a regular file",
             tmpdir, fifo);
    expect_error(want);
    snprintf(fifo, sizeof fifo, "%s/a.bin", tmpdir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    mutate("matmul_c.json", "fifo_data.json", "KernelSpecification.Arguments[1].FillType", "\"BinaryRaw\"");
    json_t *j = load(strcat(strcpy(args, tmpdir), "/fifo_data.json"));
    json_t *a1 = json_array_get(json_object_get(json_object_get(j, "KernelSpecification"), "Arguments"), 1);
    json_object_del(a1, "FillValue");
    json_object_set_new(a1, "DataSource", json_string("a.bin"));
    write_json(args, j);
    json_decref(j);
    snprintf(args, sizeof args, "tune '%s/fifo_data.json'", tmpdir);
    assert_int_equal(run(args), 1);
    snprintf(want, sizeof want,
             "%s/fifo_data.json: KernelSpecification.Arguments[1].DataSource: argument 'a' (4096 elements of float): the file %s is a FIFO; "
             "expected a regular file",
             tmpdir, fifo);
    expect_error(want);
    /* the problem file itself, and recorded data */
    snprintf(args, sizeof args, "tune '%s'", fifo);
    assert_int_equal(run(args), 1);
    snprintf(want, sizeof want, "the problem file %s is a FIFO; expected a regular file", fifo);
    expect_error(want);
    snprintf(args, sizeof args, "tune '%s/t1/matmul_c.json' --simulate '%s'", KT_DATA, fifo);
    assert_int_equal(run(args), 1);
    snprintf(want, sizeof want, "--simulate %s: a FIFO; expected a regular file", fifo);
    expect_error(want);
    /* a data file shorter than its argument */
    snprintf(fifo, sizeof fifo, "%s/short.bin", tmpdir);
    write_file(fifo, "0123");
    j = load(strcat(strcpy(args, tmpdir), "/fifo_data.json"));
    a1 = json_array_get(json_object_get(json_object_get(j, "KernelSpecification"), "Arguments"), 1);
    json_object_set_new(a1, "DataSource", json_string("short.bin"));
    write_json(args, j);
    json_decref(j);
    snprintf(args, sizeof args, "tune '%s/fifo_data.json'", tmpdir);
    assert_int_equal(run(args), 1);
    snprintf(want, sizeof want,
             "%s/fifo_data.json: KernelSpecification.Arguments[1].DataSource: argument 'a' (4096 elements of float): the file %s holds 4 bytes; "
             "16384 expected",
             tmpdir, fifo);
    expect_error(want);
    /* and one longer than its argument: refused too, never cut (the README says exactly its bytes) */
    snprintf(fifo, sizeof fifo, "%s/long.bin", tmpdir);
    static char longer[16388];
    memset(longer, 'x', sizeof longer - 1);
    write_file(fifo, longer);
    j = load(strcat(strcpy(args, tmpdir), "/fifo_data.json"));
    a1 = json_array_get(json_object_get(json_object_get(j, "KernelSpecification"), "Arguments"), 1);
    json_object_set_new(a1, "DataSource", json_string("long.bin"));
    write_json(args, j);
    json_decref(j);
    snprintf(args, sizeof args, "tune '%s/fifo_data.json'", tmpdir);
    assert_int_equal(run(args), 1);
    snprintf(want, sizeof want,
             "%s/fifo_data.json: KernelSpecification.Arguments[1].DataSource: argument 'a' (4096 elements of float): the file %s holds 16387 "
             "bytes; 16384 expected",
             tmpdir, fifo);
    expect_error(want);
    remove_tmpdir();
}

/* ---- [8] 9: every error names its source, before any work where it can ---------------------- */

static void test_errors_name_their_source(void **state) {
    (void)state;
    make_tmpdir();
    char args[2048], want[2048];
    /* a condition that fails during enumeration names its JSON path */
    mutate("matmul_c.json", "div0.json", "ConfigurationSpace.Conditions[0].Expression", "\"TI % 0 == 0\"");
    snprintf(args, sizeof args, "tune '%s/div0.json'", tmpdir);
    assert_int_equal(run(args), 1);
    snprintf(want, sizeof want,
             "%s/div0.json: ConfigurationSpace.Conditions[0].Expression: kt_space_enumerate: constraint: expression 'TI %% 0 == 0': "
             "column 4: integer division or modulo by zero",
             tmpdir);
    expect_error(want);
    /* a grid that cannot be computed for a configuration, found when the launch is planned
     * (before any compile): its JSON path and the configuration (the Default one first) */
    mutate("matmul_cl.json", "grid0.json", "KernelSpecification.GridDivX", "[\"1 if TM == 1 else TM - 2\"]");
    snprintf(args, sizeof args, "tune '%s/grid0.json'", tmpdir);
    assert_int_equal(run(args), 1);
    snprintf(want, sizeof want,
             "%s/grid0.json: KernelSpecification.GridDivX: configuration TM=2,LX=4: geometry: global size: expression "
             "'-(-ProblemSize[0] // (int(1 if TM == 1 else TM - 2)))': column 19: integer division or modulo by zero",
             tmpdir);
    expect_error(want);
    mutate("matmul_cl.json", "grid_neg.json", "KernelSpecification.GridDivX", "[\"TM - 2\"]"); /* -1 for TM=1: a negative grid */
    snprintf(args, sizeof args, "tune '%s/grid_neg.json'", tmpdir);
    assert_int_equal(run(args), 1);
    snprintf(want, sizeof want,
             "%s/grid_neg.json: KernelSpecification.GridDivX: the Default configuration TM=1,LX=4: geometry: global size: expression "
             "'-(-ProblemSize[0] // (int(TM - 2)))' does not give a size >= 0",
             tmpdir);
    expect_error(want);
    mutate("matmul_cl.json", "grid1.json", "KernelSpecification.GridDivX", "[\"TM - 1\"]");
    snprintf(args, sizeof args, "tune '%s/grid1.json' --define TM=2 --json", tmpdir);
    assert_int_equal(run(args), 1);
    snprintf(want, sizeof want,
             "%s/grid1.json: KernelSpecification.GridDivX: the Default configuration TM=1,LX=4: geometry: global size: expression "
             "'-(-ProblemSize[0] // (int(TM - 1)))': column 19: integer division or modulo by zero",
             tmpdir);
    expect_error(want);
    json_t *e = doc();
    assert_string_equal(json_string_value(json_object_get(e, "error")), want);
    json_decref(e);
    mutate("matmul_cl.json", "local0.json", "KernelSpecification.LocalSize.X", "\"LX // (TM - 2) if TM > 1 else LX\"");
    snprintf(args, sizeof args, "tune '%s/local0.json' --define LX=4", tmpdir);
    assert_int_equal(run(args), 1);
    snprintf(want, sizeof want,
             "%s/local0.json: KernelSpecification.LocalSize.X: configuration TM=2,LX=4: geometry: local size: expression "
             "'LX // (TM - 2) if TM > 1 else LX': column 4: integer division or modulo by zero",
             tmpdir);
    expect_error(want);
    /* a C kernel is called, not launched: a grid it never uses does not stop its tuning */
    mutate("matmul_c.json", "grid_c.json", "KernelSpecification.GridDivX", "[\"TI - 4\"]");
    snprintf(args, sizeof args, "tune '%s/grid_c.json' --define TI=4 --json", tmpdir);
    if (run(args) != 0) fail_msg("%s", err);
    e = doc();
    assert_int_equal(json_integer_value(json_object_get(e, "measured")), 2);
    json_decref(e);
    /* a --define value blames the option */
    snprintf(args, sizeof args, "tune '%s/t1/matmul_c.json' --define TI=abc", KT_DATA);
    assert_int_equal(run(args), 1);
    expect_error("--define TI=abc: kt_space_add_param: parameter 'TI': expression '[abc]': column 2: name 'abc' is not defined");
    /* an unwritable --t4, found before any work, with the system's reason */
    char file[512];
    snprintf(file, sizeof file, "%s/plain", tmpdir);
    write_file(file, "x");
    snprintf(args, sizeof args, "tune '%s/t1/matmul_c.json' --t4 '%s/out.json'", KT_DATA, file);
    assert_int_equal(run(args), 1);
    snprintf(want, sizeof want, "--t4 %s/out.json: cannot be written: Not a directory", file);
    expect_error(want);
    assert_null(strstr(err, "configurations on"));
    snprintf(args, sizeof args, "tune '%s/t1/matmul_c.json' --t4 '%s'", KT_DATA, tmpdir);
    assert_int_equal(run(args), 1);
    snprintf(want, sizeof want, "--t4 %s: is a directory", tmpdir);
    expect_error(want);
    /* an unusable --cache: a directory, another program's SQLite file, a file under a file */
    snprintf(args, sizeof args, "tune '%s/t1/matmul_c.json' --cache '%s'", KT_DATA, tmpdir);
    assert_int_equal(run(args), 1);
    snprintf(want, sizeof want, "--cache %s: kt_cache_open('%s'): not a regular file", tmpdir, tmpdir);
    expect_error(want);
    assert_null(strstr(err, "configurations on"));
    char foreign[512];
    snprintf(foreign, sizeof foreign, "%s/foreign.db", tmpdir);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(foreign, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "CREATE TABLE notes (x TEXT); INSERT INTO notes VALUES ('mine');", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    snprintf(args, sizeof args, "tune '%s/t1/matmul_c.json' --cache '%s'", KT_DATA, foreign);
    assert_int_equal(run(args), 1);
    snprintf(want, sizeof want, "--cache %s: kt_cache_open('%s'): not a kerntune cache: the file has 1 tables but no schema version; it was left untouched",
             foreign, foreign);
    expect_error(want);
    snprintf(args, sizeof args, "tune '%s/t1/matmul_c.json' --cache '%s/c.db'", KT_DATA, file);
    assert_int_equal(run(args), 1);
    snprintf(want, sizeof want, "--cache %s/c.db: kt_cache_open('%s/c.db'): Not a directory", file, file);
    expect_error(want);
    snprintf(args, sizeof args, "tune '%s/t1/matmul_c.json'", KT_DATA);
    snprintf(want, sizeof want, "KERNTUNE_CACHE='%s'", tmpdir);
    assert_int_equal(run_env(want, args), 1);
    snprintf(want, sizeof want, "KERNTUNE_CACHE=%s: kt_cache_open('%s'): not a regular file", tmpdir, tmpdir);
    expect_error(want);
    /* an unreadable cache file (as another user when this runs as root, who reads everything) */
    char unreadable[512];
    snprintf(unreadable, sizeof unreadable, "%s/unreadable.db", tmpdir);
    write_file(unreadable, "");
    assert_int_equal(chmod(unreadable, 0), 0);
    const char *as = "";
    char problem[600];
    snprintf(problem, sizeof problem, "%s/t1/matmul_c.json", KT_DATA);
    if (geteuid() == 0) {
        char stage[600];
        snprintf(stage, sizeof stage, "%s/nobody", tmpdir);
        assert_int_equal(chmod(tmpdir, 0777), 0);
        if ((as = as_nobody(stage, problem, sizeof problem)) == NULL) {
            remove_tmpdir();
            return; /* nobody to be */
        }
        assert_int_equal(chown(unreadable, 65534, 65534), 0);
    }
    snprintf(args, sizeof args, "tune '%s' --cache '%s'", problem, unreadable);
    int rc = run_env(as, args);
    cli = KT_CLI;
    assert_int_equal(rc, 1);
    snprintf(want, sizeof want, "--cache %s: cannot be read and written: Permission denied (--cache off tunes without a cache)", unreadable);
    expect_error(want);
    remove_tmpdir();
}

/* Expressions longer than 200 characters: an error still names its JSON path and quotes the
 * whole expression (the library cut it at 200, and the CLI, matching the quoted text, lost the
 * path). */
static void test_long_expressions_named(void **state) {
    (void)state;
    make_tmpdir();
    char tail[400] = "", cond[512], grid[512], args[2048], want[4096], value[600];
    for (int i = 0; i < 60; i++) strcat(tail, " + 1");
    snprintf(cond, sizeof cond, "TI %% 0 == 0%s > 0", tail); /* the division comes first */
    snprintf(grid, sizeof grid, "1 if TM == 1 else TM - 2 + 0 * (1%s)", tail); /* zero for TM=2 */
    assert_true(strlen(cond) > 200 && strlen(grid) > 200);
    snprintf(value, sizeof value, "\"%s\"", cond);
    mutate("matmul_c.json", "cond.json", "ConfigurationSpace.Conditions[0].Expression", value);
    snprintf(args, sizeof args, "tune '%s/cond.json'", tmpdir);
    assert_int_equal(run(args), 1);
    snprintf(want, sizeof want,
             "%s/cond.json: ConfigurationSpace.Conditions[0].Expression: kt_space_enumerate: constraint: expression '%s': column 4: "
             "integer division or modulo by zero",
             tmpdir, cond);
    expect_error(want);
    snprintf(value, sizeof value, "[\"%s\"]", grid);
    mutate("matmul_cl.json", "grid.json", "KernelSpecification.GridDivX", value);
    snprintf(args, sizeof args, "tune '%s/grid.json'", tmpdir);
    assert_int_equal(run(args), 1);
    snprintf(want, sizeof want,
             "%s/grid.json: KernelSpecification.GridDivX: configuration TM=2,LX=4: geometry: global size: expression "
             "'-(-ProblemSize[0] // (int(%s)))': column 19: integer division or modulo by zero",
             tmpdir, grid);
    expect_error(want);
    remove_tmpdir();
}

/* --t4 is written through a temporary file in its directory: an existing, writable T4 file in a
 * directory that takes no new file is refused before any work (it passed the check, then the
 * tuning ran and its results could not be written). As another user when this runs as root. */
static void test_t4_directory_not_writable(void **state) {
    (void)state;
    make_tmpdir();
    char dir[512], file[600], args[2048], want[2048];
    snprintf(dir, sizeof dir, "%s/results", tmpdir);
    assert_int_equal(mkdir(dir, 0755), 0);
    snprintf(file, sizeof file, "%s/out.json", dir);
    write_file(file, "{}");
    const char *as = "";
    char problem[600];
    snprintf(problem, sizeof problem, "%s/t1/matmul_c.json", KT_DATA);
    if (geteuid() == 0) {
        char stage[600];
        snprintf(stage, sizeof stage, "%s/nobody", tmpdir);
        assert_int_equal(chmod(tmpdir, 0755), 0);
        if ((as = as_nobody(stage, problem, sizeof problem)) == NULL) {
            remove_tmpdir();
            return; /* nobody to be */
        }
        assert_int_equal(chown(file, 65534, 65534), 0); /* nobody may write the file, not its directory (root's, 0755) */
        assert_int_equal(chmod(file, 0644), 0);
    } else {
        assert_int_equal(chmod(dir, 0555), 0);
    }
    snprintf(args, sizeof args, "tune '%s' --t4 '%s' --cache off", problem, file);
    int rc = run_env(as, args);
    cli = KT_CLI;
    assert_int_equal(rc, 1);
    snprintf(want, sizeof want,
             "--t4 %s: cannot be written: its directory %s takes no new file (T4 output is written to a temporary file there, then "
             "renamed into place): Permission denied",
             file, dir);
    expect_error(want);
    assert_null(strstr(err, "configurations on")); /* before any work */
    remove_tmpdir();
}

/* ---- what Kernel Tuner reads, and what it skips --------------------------------------------- */

/* How many times needle occurs in hay. */
static size_t count_of(const char *hay, const char *needle) {
    size_t n = 0;
    for (const char *at = strstr(hay, needle); at; at = strstr(at + 1, needle)) n++;
    return n;
}

/* The "ignored" member of the last --json document, joined with ", " (fails the test when it is
 * not an array of strings). */
static void ignored_of(const json_t *d, char *buf, size_t len) {
    const json_t *a = json_object_get(d, "ignored");
    if (!json_is_array(a)) fail_msg("--json has no \"ignored\" array:\n%s", out);
    buf[0] = '\0';
    size_t i;
    const json_t *v;
    json_array_foreach(a, i, v) {
        assert_true(json_is_string(v));
        size_t at = strlen(buf);
        snprintf(buf + at, len - at, "%s%s", i ? ", " : "", json_string_value(v));
    }
}

/* A problem with benchmark_hub's hotspot features, in C so that it tunes here: the metadata
 * Kernel Tuner skips (BenchmarkConfig, KernelSpecification.Misc) is accepted and named once, on
 * stderr and in --json's "ignored"; Defaults as an array of one (ROWS, tile), one that is not
 * among its Values (max_tile: not used, named) and Defaults that break the Conditions (tile 1,
 * unroll 2) are read, not refused; GlobalSize beside GridDivX/Y, GlobalSizeType OpenCL on a C
 * kernel, Scalars with FillValue and no FillType, value lists written as comprehensions
 * ("[2**i for i in range(4, 6)]", "[i for i in range(1, 3)]"). The run tunes and validates all 6
 * configurations. */
static void test_hub_style_problem(void **state) {
    (void)state;
    make_tmpdir();
    char args[2048], want[2048], ignored[1024];
    snprintf(args, sizeof args, "tune '%s/t1/hub_style_c.json' --cache off --json", KT_DATA);
    if (run(args) != 0) fail_msg("%s", err);
    json_t *d = doc();
    ignored_of(d, ignored, sizeof ignored);
    assert_string_equal(ignored, "BenchmarkConfig, KernelSpecification.Misc, ConfigurationSpace.TuningParameters[5].Default");
    assert_int_equal(json_integer_value(json_object_get(d, "configurations")), 6);
    assert_int_equal(json_integer_value(json_object_get(d, "measured")), 6);
    assert_true(json_is_true(json_object_get(d, "validated")));
    json_decref(d);
    snprintf(want, sizeof want,
             "kerntune tune: note: %s/t1/hub_style_c.json: ignored (metadata; nothing measured depends on them): BenchmarkConfig, "
             "KernelSpecification.Misc\n",
             KT_DATA);
    if (count_of(err, want) != 1) fail_msg("expected once:\n  %sgot:\n%s", want, err);
    snprintf(want, sizeof want,
             "kerntune tune: note: %s/t1/hub_style_c.json: ConfigurationSpace.TuningParameters[5].Default: 1 is not one of the Values "
             "[4]; not used (as if the parameter had no Default)\n",
             KT_DATA);
    if (count_of(err, want) != 1) fail_msg("expected once:\n  %sgot:\n%s", want, err);
    assert_int_equal(count_of(err, ": ignored ("), 1);
    /* --quiet: no notes; --json still lists them */
    snprintf(args, sizeof args, "tune '%s/t1/hub_style_c.json' --cache off --json --quiet", KT_DATA);
    if (run(args) != 0) fail_msg("%s", err);
    d = doc();
    ignored_of(d, ignored, sizeof ignored);
    assert_string_equal(ignored, "BenchmarkConfig, KernelSpecification.Misc, ConfigurationSpace.TuningParameters[5].Default");
    json_decref(d);
    assert_null(strstr(err, "note:"));
    /* max_tile's Default among its Values: every Default is used, and together they break the
     * Conditions (tile 1 % unroll 2): still read, tuned and validated */
    mutate("hub_style_c.json", "defaults.json", "ConfigurationSpace.TuningParameters[5].Default", "4");
    snprintf(args, sizeof args, "tune '%s/defaults.json' --cache off --json", tmpdir);
    if (run(args) != 0) fail_msg("%s", err);
    d = doc();
    ignored_of(d, ignored, sizeof ignored);
    assert_string_equal(ignored, "BenchmarkConfig, KernelSpecification.Misc");
    assert_int_equal(json_integer_value(json_object_get(d, "measured")), 6);
    assert_true(json_is_true(json_object_get(d, "validated")));
    json_decref(d);
    assert_null(strstr(err, ".Default:"));
    /* without the metadata nothing is ignored: an empty array, no note */
    mutate("hub_style_c.json", "plain.json", "BenchmarkConfig", NULL);
    json_t *j = load(strcat(strcpy(args, tmpdir), "/plain.json"));
    json_object_del(json_object_get(j, "KernelSpecification"), "Misc");
    json_object_set_new(json_array_get(json_object_get(json_object_get(j, "ConfigurationSpace"), "TuningParameters"), 5), "Default",
                        json_integer(4));
    write_json(args, j);
    json_decref(j);
    snprintf(args, sizeof args, "tune '%s/plain.json' --cache off --json", tmpdir);
    if (run(args) != 0) fail_msg("%s", err);
    d = doc();
    assert_int_equal(json_array_size(json_object_get(d, "ignored")), 0);
    json_decref(d);
    assert_null(strstr(err, ": ignored ("));
    remove_tmpdir();
}

/* A Default of any shape is read (Kernel Tuner reads none): one value or an array of one is
 * used when it is one of the Values (by ==: 4.0 is 4); anything else is named, with why, and
 * listed in "ignored"; null is no Default. Replayed: read, not run. */
static void test_default_shapes(void **state) {
    (void)state;
    make_tmpdir();
    static const struct {
        const char *value, *why; /* why NULL: used (or null: none), nothing ignored */
    } cases[] = {
        {"4", NULL},
        {"[4]", NULL},
        {"4.0", NULL},
        {"null", NULL},
        {"[16]", NULL},
        {"5", "5 is not one of the Values [4, 16, 32]"},
        {"[5]", "5 is not one of the Values [4, 16, 32]"},
        {"\"4\"", "'4' is not one of the Values [4, 16, 32]"},
        {"true", "True is not one of the Values [4, 16, 32]"},
        {"[4, 16]", "an array of 2 values; expected one value (a number, a string or a boolean) or an array of one"},
        {"[]", "an array of 0 values; expected one value (a number, a string or a boolean) or an array of one"},
        {"[[4]]", "an array of one value that is an array; expected one value (a number, a string or a boolean) or an array of one"},
        {"{\"value\": 4}", "an object; expected one value (a number, a string or a boolean) or an array of one"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[64], args[1024], want[2048], ignored[512];
        snprintf(name, sizeof name, "default%02zu.json", i);
        mutate("matmul_c.json", name, "ConfigurationSpace.TuningParameters[0].Default", cases[i].value);
        snprintf(args, sizeof args, "tune '%s/%s' --json --simulate '%s/t1/matmul_c.ktcache.json'", tmpdir, name, KT_DATA);
        if (run(args) != 0) fail_msg("case %zu (Default %s): %s", i, cases[i].value, err);
        json_t *d = doc();
        ignored_of(d, ignored, sizeof ignored);
        json_decref(d);
        if (cases[i].why == NULL) {
            if (*ignored || strstr(err, "note:")) fail_msg("case %zu (Default %s): ignored [%s]; stderr:\n%s", i, cases[i].value, ignored, err);
            continue;
        }
        assert_string_equal(ignored, "ConfigurationSpace.TuningParameters[0].Default");
        snprintf(want, sizeof want,
                 "kerntune tune: note: %s/%s: ConfigurationSpace.TuningParameters[0].Default: %s; not used (as if the parameter had no "
                 "Default)\n",
                 tmpdir, name, cases[i].why);
        if (count_of(err, want) != 1) fail_msg("case %zu (Default %s): expected once\n  %sgot:\n%s", i, cases[i].value, want, err);
    }
    remove_tmpdir();
}

/* Accepting metadata is by name and place: a field that would change what is run or measured,
 * or an unknown one beside the metadata, is still refused with its JSON path, before any note. */
static void test_metadata_is_not_a_loophole(void **state) {
    (void)state;
    make_tmpdir();
    static const struct {
        const char *path, *value, *message;
    } cases[] = {
        {"General.Misc", "{}", "General.Misc: kerntune does not implement this field; it refuses the problem rather than ignore it"},
        {"KernelSpecification.Arguments[1].Misc", "{\"jitify\": true}",
         "KernelSpecification.Arguments[1].Misc: kerntune does not implement this field; it refuses the problem rather than ignore it"},
        {"KernelSpecification.BenchmarkConfig", "{}",
         "KernelSpecification.BenchmarkConfig: kerntune does not implement this field; it refuses the problem rather than ignore it"},
        {"KernelSpecification.Language", "\"Hypertuner\"", "KernelSpecification.Language: 'Hypertuner' is Kernel Tuner tuning its own search strategies' settings (its hypertuner backend, "
         "with the autotuning_methodology package), not a kernel; kerntune tunes C, OpenCL or CUDA kernels"},
        {"KernelSpecification.Arguments[1].FillType", "\"Script\"",
         "KernelSpecification.Arguments[1].FillType: 'Script' is not supported; expected Constant, Random or BinaryRaw"},
        {"KernelSpecification.Arguments[1].MemoryType", "\"Symbol\"",
         "KernelSpecification.Arguments[1].MemoryType: 'Symbol' is not supported; expected Scalar or Vector"},
        {"KernelSpecification.Profiling", "true", "KernelSpecification.Profiling: true: kerntune does not collect profiling counters; expected false"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[64], file[512], args[1024], want[2048];
        snprintf(name, sizeof name, "refused%02zu.json", i);
        mutate("hub_style_c.json", name, cases[i].path, cases[i].value);
        snprintf(file, sizeof file, "%s/%s", tmpdir, name);
        snprintf(args, sizeof args, "tune '%s' --json", file);
        assert_int_equal(run(args), 1);
        snprintf(want, sizeof want, "%s: %s", file, cases[i].message);
        json_t *d = doc();
        assert_string_equal(json_string_value(json_object_get(d, "error")), want);
        snprintf(want, sizeof want, "kerntune tune: %s: %s\n", file, cases[i].message); /* and nothing else: no note */
        if (strcmp(err, want) != 0) fail_msg("case %zu:\n  got  %s  want %s", i, err, want);
        json_decref(d);
    }
    remove_tmpdir();
}

/* Problems Kernel Tuner cannot read either get an error that names the file and the JSON path. */
static void test_kernel_tuner_rejects_located(void **state) {
    (void)state;
    make_tmpdir();
    static const struct {
        const char *path, *value, *message;
    } cases[] = {
        {"KernelSpecification.KernelName", NULL, "KernelSpecification.KernelName: missing; expected a string"},
        {"KernelSpecification.KernelFile", NULL, "KernelSpecification.KernelFile: missing; expected a string (the kernel source's path)"},
        {"ConfigurationSpace", NULL, "ConfigurationSpace: missing; expected an object"},
        {"ConfigurationSpace.TuningParameters[2].Values", "\"8\"",
         "ConfigurationSpace.TuningParameters[2].Values: kt_space_add_param: parameter 'block_size_x': values '8' is not a list"},
        {"ConfigurationSpace.TuningParameters[1].Values", "[8, 16]",
         "ConfigurationSpace.TuningParameters[1].Values: expected a string (a Python list, e.g. \"[16, 32, 64]\"), got an array"},
        {"ConfigurationSpace.Conditions[0].Expression", "\"tile % \"",
         "ConfigurationSpace.Conditions[0].Expression: kt_space_add_constraint: expression 'tile % ': column 8: expected a value, found the end"},
        {"ConfigurationSpace.Conditions[1].Expression", "[\"tile\"]",
         "ConfigurationSpace.Conditions[1].Expression: expected a string (a Python expression), got an array"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[64], file[512], args[1024], want[2048];
        snprintf(name, sizeof name, "kt%02zu.json", i);
        mutate("hub_style_c.json", name, cases[i].path, cases[i].value);
        snprintf(file, sizeof file, "%s/%s", tmpdir, name);
        snprintf(args, sizeof args, "tune '%s' --quiet", file);
        assert_int_equal(run(args), 1);
        snprintf(want, sizeof want, "kerntune tune: %s: %s\n", file, cases[i].message);
        if (strcmp(err, want) != 0) fail_msg("case %zu:\n  got  %s  want %s", i, err, want);
        assert_string_equal(out, "");
    }
    remove_tmpdir();
}

/* Every T1 problem of the shared benchmark_hub (kernels/, and currently_unused/kernels/ where
 * the checkout has it) is read: replayed against no recorded results, the command gets past
 * reading, building the space and sizing the arguments, and its --json document has no error
 * (no configuration can be valid: rc 1). Problems kerntune refuses on purpose are listed with
 * their exact error. The local hub has two today; any that appear are read too. */
static void test_every_hub_problem_read(void **state) {
    (void)state;
    make_tmpdir();
    static const struct {
        const char *file, *message;
    } refused[] = {
        /* tunes a tuner's hyperparameters: Kernel Tuner's own Hypertuner backend, no kernel
         * (Kernel Tuner 1.5.0 fails on the file too: NameError at its first configuration,
         * GridDivX naming block_size_x, which is no parameter of it) */
        {"hyperparamtuning_pso.json", "KernelSpecification.Language: 'Hypertuner' is Kernel Tuner tuning its own search strategies' settings (its hypertuner backend, "
         "with the autotuning_methodology package), not a kernel; kerntune tunes C, OpenCL or CUDA kernels"},
    };
    char empty[600];
    snprintf(empty, sizeof empty, "%s/no_results.json", tmpdir);
    write_file(empty, "{\"results\": []}\n");
    static const char *const dirs[] = {"kernels", "currently_unused/kernels"};
    int n = 0;
    for (size_t k = 0; k < 2; k++) {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/%s", KT_HUB, dirs[k]);
        DIR *dd = opendir(dir);
        if (dd == NULL && k > 0 && errno == ENOENT) continue; /* the hub's checkout may not have it */
        if (dd == NULL) fail_msg("%s: %s", dir, strerror(errno));
        struct dirent *e;
        while ((e = readdir(dd)) != NULL) {
            size_t len = strlen(e->d_name);
            if (len < 6 || strcmp(e->d_name + len - 5, ".json") != 0) continue;
            char args[4096], want[4096];
            snprintf(args, sizeof args, "tune '%s/%s' --simulate '%s' --budget 1 --json", dir, e->d_name, empty);
            int rc = run(args);
            const char *expected = NULL;
            for (size_t r = 0; r < sizeof refused / sizeof refused[0]; r++)
                if (strcmp(refused[r].file, e->d_name) == 0) expected = refused[r].message;
            json_t *d = doc();
            if (expected) {
                snprintf(want, sizeof want, "%s/%s: %s", dir, e->d_name, expected);
                assert_int_equal(rc, 1);
                assert_string_equal(json_string_value(json_object_get(d, "error")), want);
            } else {
                const char *why = json_string_value(json_object_get(d, "error"));
                if ((rc != 0 && rc != 1) || why) fail_msg("%s/%s is not read (exit %d): %s", dirs[k], e->d_name, rc, why ? why : err);
                assert_true(json_integer_value(json_object_get(d, "configurations")) > 0);
                assert_true(json_is_array(json_object_get(d, "ignored")));
            }
            json_decref(d);
            n++;
        }
        closedir(dd);
    }
    assert_true(n >= 2);
    remove_tmpdir();
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_malformed_problems),
        cmocka_unit_test(test_refused_fields),
        cmocka_unit_test(test_checked_at_load),
        cmocka_unit_test(test_options),
        cmocka_unit_test(test_options_refused),
        cmocka_unit_test(test_long_inputs),
        cmocka_unit_test(test_fifo_refused),
        cmocka_unit_test(test_errors_name_their_source),
        cmocka_unit_test(test_t4_directory_not_writable),
        cmocka_unit_test(test_long_expressions_named),
        cmocka_unit_test(test_hub_style_problem),
        cmocka_unit_test(test_default_shapes),
        cmocka_unit_test(test_metadata_is_not_a_loophole),
        cmocka_unit_test(test_kernel_tuner_rejects_located),
        cmocka_unit_test(test_every_hub_problem_read),
    };
    return kt_run_cases(argc, argv, tests, NULL, NULL);
}
