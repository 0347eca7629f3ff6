"""kerntune.tune_kernel and run_kernel (Kernel Tuner 1.5's interface) on PoCL and the C backend:
results and env as Kernel Tuner returns them, the answer, verify functions, restrictions,
strategies and budgets, Kernel Tuner's cache file and kerntune's persistent cache, refusals, and
kerntune.util and kerntune.file_utils. Configurations differ by design (REPS: tens of times the
work), never by luck. Every test has its own artifact directory; the persistent cache is off
unless a test names its own file."""

import json
import os

import numpy as np
import pytest

import kerntune
from kerntune import file_utils, util

# out = 2 * x + WRONG, REPS times over (REPS = 40 is 40 times the work). Every space has a
# block_size_x: without one Kernel Tuner (and so tune_kernel) launches blocks of 256 threads and a
# grid of problem_size blocks, 256 times the work-items.
SCALE_CL = r"""
__kernel void scale(__global float *out, __global const float *x, int n) {
    int i = get_global_id(0);
    if (i >= n) return;
    float v = 0.0f;
    for (int r = 0; r < REPS; r++) v += 2.0f * x[i] + (float)r;
    out[i] = v - (float)(REPS * (REPS - 1) / 2) * 1.0f - (float)(REPS - 1) * 2.0f * x[i] + (float)WRONG;
}
"""

N = 1 << 16


@pytest.fixture(autouse=True)
def own_artifacts(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNTUNE_ARTIFACTS", str(tmp_path / "artifacts"))
    monkeypatch.setenv("KERNTUNE_CACHE", "off")
    monkeypatch.delenv("KERNTUNE_BUDGET", raising=False)


def inputs():
    x = ((np.arange(N) % 11) - 5).astype(np.float32)
    out = np.zeros(N, dtype=np.float32)
    return out, x, np.int32(N)


def test_results_and_env(capsys):
    out, x, n = inputs()
    params = {"block_size_x": [32, 64], "REPS": [40, 1], "WRONG": [0]}
    results, env = kerntune.tune_kernel("scale", SCALE_CL, N, [out, x, n], params)
    assert len(results) == 4
    for r in results:
        assert set(params) <= set(r) and type(r["block_size_x"]) is int
        for key in ("time", "times", "compile_time", "verification_time", "benchmark_time", "framework_time", "strategy_time", "timestamp"):
            assert key in r, key
        assert r["time"] > 0 and 1 <= len(r["times"]) <= 7  # at most `iterations` measured runs
        assert "__error__" not in r
    assert env["best_config"]["REPS"] == 1
    slow = min(r["time"] for r in results if r["REPS"] == 40)
    fast = max(r["time"] for r in results if r["REPS"] == 1)
    assert slow > fast
    assert "Portable Computing Language" in env["device_name"]
    assert env["kerntune"]["validation"].startswith("off")
    assert env["kerntune"]["strategy"] == "exhaustive for Kernel Tuner's brute_force"
    assert np.all(out == 0)  # the caller's arrays are never written
    printed = capsys.readouterr().out
    assert "Using: " in printed and "block_size_x=32, REPS=40, WRONG=0, time=" in printed


def test_answer_disqualifies_a_wrong_configuration():
    out, x, n = inputs()
    answer = [2 * x, None, None]
    results, env = kerntune.tune_kernel("scale", SCALE_CL, N, [out, x, n], {"WRONG": [1, 0], "REPS": [1], "block_size_x": [64]}, answer=answer, quiet=True)
    by = {r["WRONG"]: r for r in results}
    assert isinstance(by[1]["__error__"], util.IncorrectConfig)
    assert "expected -10, got -9" in by[1]["__error__"].message
    assert "time" not in by[1] and by[0]["time"] > 0
    assert env["best_config"]["WRONG"] == 0 and env["kerntune"]["validation"] == "answer"
    with pytest.raises(ValueError, match=r"answer\[0\] has 3 elements, the argument 65536"):
        kerntune.tune_kernel("scale", SCALE_CL, N, [out, x, n], {"WRONG": [0], "REPS": [1], "block_size_x": [64]}, answer=[np.zeros(3, np.float32), None, None])
    with pytest.raises(TypeError, match="the answer has 2 entries and there are 3 arguments"):
        kerntune.tune_kernel("scale", SCALE_CL, N, [out, x, n], {"WRONG": [0], "REPS": [1], "block_size_x": [64]}, answer=[2 * x, None])


def test_verify_as_kernel_tuner_calls_it():
    x = ((np.arange(N) % 11) - 5).astype(np.float32).reshape(256, 256)
    out = np.zeros((256, 256), dtype=np.float32)
    expected_sum = float((2 * x).sum())
    seen = []

    def verify(cpu_result, gpu_result, atol=None):
        seen.append((cpu_result, [None if g is None else g.shape for g in gpu_result], atol))
        return np.isclose(cpu_result[0], gpu_result[0].sum(), atol=atol)

    answer = [np.float32(expected_sum), None, None]  # a scalar: only a verify function reads it
    results, env = kerntune.tune_kernel("scale", SCALE_CL, N, [out, x, np.int32(N)], {"WRONG": [0, 1], "REPS": [1], "block_size_x": [64]},
                                        answer=answer, verify=verify, atol=0.5, quiet=True)
    by = {r["WRONG"]: r for r in results}
    assert "__error__" not in by[0] and isinstance(by[1]["__error__"], util.IncorrectConfig)
    assert all(a is answer and shapes == [(256, 256), None, None] and atol == 0.5 for a, shapes, atol in seen)
    assert env["kerntune"]["validation"] == "verify function"

    without = []  # no answer: Kernel Tuner hands every array to verify, and None as the answer

    def verify2(cpu_result, gpu_result):
        without.append((cpu_result, [None if g is None else g.shape for g in gpu_result]))
        return True

    kerntune.tune_kernel("scale", SCALE_CL, N, [out, x, np.int32(N)], {"WRONG": [0], "REPS": [1], "block_size_x": [64]}, verify=verify2, quiet=True)
    assert without == [(None, [(256, 256), (256, 256), None])]


def test_restrictions_and_the_block_limit():
    out, x, n = inputs()
    params = {"block_size_x": [16, 32, 64, 1 << 20], "REPS": [1, 2, 3], "WRONG": [0]}
    restrictions = ["block_size_x * REPS <= 64", lambda p: p["REPS"] != 2]
    results, _ = kerntune.tune_kernel("scale", SCALE_CL, N, [out, x, n], params, restrictions=restrictions, quiet=True)
    got = sorted((r["block_size_x"], r["REPS"]) for r in results)
    # 2^20 threads exceeds PoCL's work-group limit: left out of the space, as Kernel Tuner does
    assert got == [(16, 1), (16, 3), (32, 1), (64, 1)]


def test_strategies_and_budgets():
    out, x, n = inputs()
    params = {"block_size_x": [16, 32, 64, 128], "REPS": [1, 2], "WRONG": [0]}
    results, env = kerntune.tune_kernel("scale", SCALE_CL, N, [out, x, n], params, strategy="random_sample",
                                        strategy_options={"fraction": 0.5}, quiet=True, seed=3)
    assert len(results) == 4 and env["kerntune"]["strategy"] == "random for Kernel Tuner's random_sample"
    with pytest.warns(UserWarning, match="popsize: settings of Kernel Tuner's own genetic_algorithm"):
        results, env = kerntune.tune_kernel("scale", SCALE_CL, N, [out, x, n], params, strategy="genetic_algorithm",
                                            strategy_options={"max_fevals": 3, "popsize": 10}, quiet=True)
    assert len(results) == 3 and env["kerntune"]["notes"] == ["ignored strategy_options: popsize"]
    # every heuristic of Kernel Tuner's is served by kerntune's auto search, unless one of
    # kerntune's own is named
    assert env["kerntune"]["strategy"] == "auto for Kernel Tuner's genetic_algorithm"
    results, env = kerntune.tune_kernel("scale", SCALE_CL, N, [out, x, n], params, strategy="simulated_annealing",
                                        strategy_options={"max_fevals": 2, "kerntune_strategy": "genetic"}, quiet=True)
    assert len(results) == 2 and env["kerntune"]["strategy"] == "genetic for Kernel Tuner's simulated_annealing"
    with pytest.raises(ValueError, match="kerntune_strategy 'ga': not one of kerntune's strategies"):
        kerntune.tune_kernel("scale", SCALE_CL, N, [out, x, n], params, strategy="genetic_algorithm",
                             strategy_options={"kerntune_strategy": "ga"})
    with pytest.raises(ValueError, match="unknown strategy 'sideways'"):
        kerntune.tune_kernel("scale", SCALE_CL, N, [out, x, n], params, strategy="sideways")


def test_budget_from_the_environment(monkeypatch, capsys):
    out, x, n = inputs()
    monkeypatch.setenv("KERNTUNE_BUDGET", "2")
    results, env = kerntune.tune_kernel("scale", SCALE_CL, N, [out, x, n], {"REPS": [1, 2, 3, 4], "WRONG": [0], "block_size_x": [64]}, quiet=True)
    assert len(results) == 2 and env["kerntune"]["budget_from"] == "KERNTUNE_BUDGET"
    assert "KERNTUNE_BUDGET=2 bounds this tuning of scale" in capsys.readouterr().err
    monkeypatch.setenv("KERNTUNE_BUDGET", "soon")
    with pytest.raises(ValueError, match="KERNTUNE_BUDGET='soon'"):
        kerntune.tune_kernel("scale", SCALE_CL, N, [out, x, n], {"REPS": [1], "WRONG": [0], "block_size_x": [64]}, quiet=True)


def test_refusals_name_the_argument():
    out, x, n = inputs()
    p = {"REPS": [1], "WRONG": [0], "block_size_x": [64]}
    for kwargs, what in [
        ({"smem_args": {"size": 4}}, "smem_args"),
        ({"texmem_args": {"t": x}}, "texmem_args"),
        ({"objective": "GFLOP/s"}, "objective='GFLOP/s'"),
        ({"compiler": "g++"}, "compiler"),
        ({"observers": [object()]}, "observers"),
        ({"grid_div_x": [lambda p: 32]}, "grid_div_x"),
        ({"defines": {"K": lambda p: 1}}, r"defines\['K'\]"),
        ({"lang": "HIP"}, "lang='HIP'"),
    ]:
        with pytest.raises(NotImplementedError, match="kerntune.tune_kernel: " + what):
            kerntune.tune_kernel("scale", SCALE_CL, N, [out, x, n], p, **kwargs)
    with pytest.raises(TypeError, match="argument 2 is a int: Kernel Tuner's arguments are numpy arrays and numpy scalars"):
        kerntune.tune_kernel("scale", SCALE_CL, N, [out, x, N], p)
    with pytest.raises(FileNotFoundError, match="no file 'missing.cl'"):
        kerntune.tune_kernel("scale", "missing.cl", N, [out, x, n], p)


def test_kernel_tuner_cache_file(tmp_path):
    out, x, n = inputs()
    path = str(tmp_path / "scale_cache")
    params = {"REPS": [200, 1], "WRONG": [0], "block_size_x": [64]}
    first, env = kerntune.tune_kernel("scale", SCALE_CL, N, [out, x, n], params, cache=path, quiet=True)
    doc = json.load(open(path + ".json"))
    assert doc["kernel_name"] == "scale" and doc["tune_params_keys"] == ["REPS", "WRONG", "block_size_x"]
    assert sorted(doc["cache"]) == ["1,0,64", "200,0,64"] and doc["cache"]["1,0,64"]["time"] > 0
    again, env = kerntune.tune_kernel("scale", SCALE_CL, N, [out, x, n], params, cache=path, quiet=True)
    assert env["kerntune"]["source"] == "Kernel Tuner's cache file"  # nothing measured
    assert sorted((r["REPS"], r["time"]) for r in again) == sorted((r["REPS"], r["time"]) for r in first)
    with pytest.raises(ValueError, match="holds results of kernel 'scale', not 'other'"):
        kerntune.tune_kernel("other", SCALE_CL.replace("scale(", "other("), N, [out, x, n], params, cache=path, quiet=True)


def test_persistent_cache_serves_a_second_run(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNTUNE_CACHE", str(tmp_path / "decisions.sqlite"))
    out, x, n = inputs()
    # 200 times the work: a first decision below its confidence (a busy machine's noise) would
    # be re-raced by the second run, not served
    params = {"REPS": [200, 1], "WRONG": [0], "block_size_x": [64]}
    _, env = kerntune.tune_kernel("scale", SCALE_CL, N, [out, x, n], params, quiet=True)
    assert env["kerntune"]["source"] == "measured"
    results, env = kerntune.tune_kernel("scale", SCALE_CL, N, [out, x, n], params, quiet=True)
    assert env["kerntune"]["source"] == "cache" and env["best_config"]["REPS"] == 1 and len(results) == 2
    # validated by an answer, the same kernel is another decision
    _, env = kerntune.tune_kernel("scale", SCALE_CL, N, [out, x, n], params, answer=[2 * x, None, None], quiet=True)
    assert env["kerntune"]["source"] == "measured"


def test_run_kernel():
    out, x, n = inputs()
    got = kerntune.run_kernel("scale", SCALE_CL, N, [out, x, n], {"REPS": 3, "WRONG": 0, "block_size_x": 64})
    assert np.array_equal(got[0], 2 * x) and np.array_equal(got[1], x) and got[2] == n
    assert np.all(out == 0)


# a C function, as Kernel Tuner's C backend takes one (compiled by the system's compiler)
SCALE_C = r"""
void scale(float *out, const float *x, int n) {
    for (int r = 0; r < REPS; r++)
        for (int i = 0; i < n; i++) out[i] = SCALE * x[i] + (float)(r - r);
}
"""


def test_c_kernel_with_defines():
    out, x, n = inputs()
    results, env = kerntune.tune_kernel("scale", SCALE_C, N, [out, x, n], {"REPS": [30, 1]}, lang="C", defines={"SCALE": 3},
                                        answer=[3 * x, None, None], quiet=True)
    assert env["best_config"]["REPS"] == 1 and all("__error__" not in r for r in results)
    assert env["device_name"] == kerntune.Context(cache="off").devices()[0].name


# Kernel Tuner's C contract: a function returning float returns its run's time in ms, which is
# the time recorded. Here the time claimed and the time taken disagree by design: WAIT = 1 spins
# (tens of times the others' work) and claims 0.5 ms; WAIT = 0 claims 5 ms; WAIT = 2 claims -1
# (a failed run, as pnpoly_host.cu says "too many resources")
TIMED_C = r"""
#include <time.h>
extern "C" float timed(float *out, const float *x, int n);
float timed(float *out, const float *x, int n) {
    for (int i = 0; i < n; i++) out[i] = 2.0f * x[i];
    if (WAIT == 1) {
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        do clock_gettime(CLOCK_MONOTONIC, &t); while ((t.tv_sec - t0.tv_sec) * 1e3 + (t.tv_nsec - t0.tv_nsec) / 1e6 < 20.0);
    }
    return WAIT == 1 ? 0.5f : WAIT == 0 ? 5.0f : -1.0f;
}
""".replace('extern "C" ', "")  # (a declaration before the definition: the first one names the type)


def test_c_function_returning_its_time():
    out, x, n = inputs()
    results, env = kerntune.tune_kernel("timed", TIMED_C, (np.int32(N), 1), [out, x, n], {"WAIT": [0, 1, 2]}, lang="C",
                                        answer=[2 * x, None, None], quiet=True)
    assert env["problem_size"] == (N, 1) and json.loads(json.dumps([results, env]))  # as pnpoly.py stores them
    by = {r["WAIT"]: r for r in results}
    assert by[1]["time"] == 0.5 and by[0]["time"] == 5.0  # the times the function returned, exactly
    assert all(t == 0.5 for t in by[1]["times"]) and all(t == 5.0 for t in by[0]["times"])
    assert env["best_config"]["WAIT"] == 1
    assert isinstance(by[2]["__error__"], util.RuntimeFailedConfig)
    assert "the function returned -1 ms: under Kernel Tuner's C contract a negative time is a failed run" in \
        by[2]["__error__"].message  # the wrapper says why


# CUDA host code (Kernel Tuner's rule: it launches a kernel) on a machine whose CUDA cannot run:
# nvcc builds it, and each configuration fails saying what the CUDA runtime said when its buffers
# were to be mapped for the device (the GPU machine runs it: python/tests/test_gpu.py)
# (BAD = 1 returns a negative time: a failed run, python/tests/test_gpu.py checks what it says)
HOST_CU = r"""
__global__ void twice(float *out, const float *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * x[i];
}
extern "C" float run_twice(float *out, float *x, int n) {
    twice<<<(n + 255) / 256, 256>>>(out, x, n);
    if (cudaDeviceSynchronize() != cudaSuccess) return -2.0f;
    return BAD ? -1.0f : 0.25f;
}
"""


def test_cuda_host_code_without_a_gpu(tmp_path, monkeypatch):
    import shutil

    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not os.path.exists(nvcc):
        pytest.skip("no nvcc")
    if any(d.backend == "cuda" for d in kerntune.Context(cache="off").devices()):
        pytest.skip("a CUDA device is here: python/tests/test_gpu.py runs this code on it")
    monkeypatch.setenv("KERNTUNE_NVCC", nvcc)
    out, x = np.zeros(256, dtype=np.float32), np.arange(256, dtype=np.float32)
    with pytest.raises(kerntune.Error) as e:
        kerntune.tune_kernel("run_twice", HOST_CU, 256, [out, x, np.int32(256)], {"BAD": [0, 1]}, lang="C",
                             answer=[2 * x, None, None], quiet=True)
    assert str(e.value).count("cudaHostRegister of argument 0 (1024 bytes) failed: ") == 2, str(e.value)


# a block per element of a partial sum: Kernel Tuner's reduction pattern, the problem size a parameter
PARTIAL_CL = r"""
__kernel void partial(__global float *sums, __global const float *x, int n) {
    int b = get_group_id(0);
    if (get_local_id(0) != 0) return;
    float s = 0.0f;
    for (int i = b; i < n; i += num_blocks) s += x[i];
    sums[b] = s;
}
"""


def test_problem_size_a_parameter():
    x = np.ones(4096, dtype=np.float32)
    sums = np.zeros(64, dtype=np.float32)

    def verify(cpu, gpu, atol=None):
        return np.isclose(cpu[0], gpu[0].sum(), atol=atol)

    results, env = kerntune.tune_kernel("partial", PARTIAL_CL, "num_blocks", [sums, x, np.int32(4096)],
                                        {"num_blocks": [16, 64], "block_size_x": [32]}, grid_div_x=[],
                                        answer=[np.float32(4096), None, None], verify=verify, quiet=True)
    assert sorted(r["num_blocks"] for r in results) == [16, 64] and all("__error__" not in r for r in results)


def test_file_utils_and_util(tmp_path):
    out, x, n = inputs()
    params = {"WRONG": [1, 0], "REPS": [1], "block_size_x": [64]}
    results, _ = kerntune.tune_kernel("scale", SCALE_CL, N, [out, x, n], params, answer=[2 * x, None, None], quiet=True,
                                      metrics={"elements per ms": lambda p: N / p["time"], "twice": "2 * time"})
    path = file_utils.store_output_file(str(tmp_path / "out" / "scale"), results, params)
    assert path.endswith("scale.json")
    doc = json.load(open(path))
    assert doc["schema_version"] == "1.0.0" and doc["metadata"] == {"timeunit": "milliseconds"}
    by = {r["configuration"]["WRONG"]: r for r in doc["results"]}
    assert by[1]["invalidity"] == "correctness" and by[1]["correctness"] == 0 and by[1]["times"]["runtimes"] == []
    assert by[0]["invalidity"] == "correct" and by[0]["times"]["runtimes"]
    names = [m["name"] for m in by[0]["measurements"]]
    assert names == ["time", "elements per ms", "twice"]
    good = [r for r in results if "__error__" not in r][0]
    assert good["twice"] == 2 * good["time"]
    meta = file_utils.store_metadata_file(str(tmp_path / "meta"))
    m = json.load(open(meta))["metadata"]
    assert m["operating_system"] == "Linux" and m["environment"]["requirements"][0] == "kerntune==" + kerntune.version()
    assert util.get_config_string({"a": 1, "time": 1.23456, "b": "x"}, ["a", "time"], {"time": "ms"}) == "a=1, time=1.235ms"
    assert str(util.CompilationFailedConfig("why")) == "CompilationFailedConfig"


def test_in_place_output_is_restored_for_each_run():
    # x += 1 in place: every validation and run starts from the caller's bytes, so each
    # configuration's output is x + 1 exactly, and the caller's array is untouched
    inc = "__kernel void inc(__global float *x, int n) { int i = get_global_id(0); if (i < n) x[i] += 1.0f + (float)(R - R); }"
    x = np.arange(N, dtype=np.float32)
    results, _ = kerntune.tune_kernel("inc", inc, N, [x, np.int32(N)], {"R": [1, 2, 3], "block_size_x": [64]}, answer=[x + 1, None], quiet=True)
    assert all("__error__" not in r for r in results) and len(results) == 3
    assert np.array_equal(x, np.arange(N, dtype=np.float32))


def test_a_configuration_that_crashes_is_disqualified():
    # CRASH = 1 writes through a null pointer: on a CPU device that takes its process down, which
    # is kerntune's runner, not this interpreter
    crashy = r"""__kernel void crashy(__global float *out, __global const float *x, int n) {
        int i = get_global_id(0);
        if (CRASH && i == 0) *(__global volatile int *)(out - (size_t)out / sizeof(float)) = 1;
        if (i < n) out[i] = 2.0f * x[i];
    }"""
    out, x, n = inputs()
    results, env = kerntune.tune_kernel("crashy", crashy, N, [out, x, n], {"CRASH": [1, 0], "block_size_x": [64]},
                                        answer=[2 * x, None, None], quiet=True)
    by = {r["CRASH"]: r for r in results}
    assert isinstance(by[1]["__error__"], util.RuntimeFailedConfig) and "signal" in by[1]["__error__"].message
    assert "__error__" not in by[0] and env["best_config"]["CRASH"] == 0


def test_a_configuration_that_hangs_is_disqualified(monkeypatch):
    # Kernel Tuner sets no limit on a run; tune_kernel allows RUN_TIMEOUT_S (10 minutes, not
    # kerntune's 10 s: kernels written for GPUs run for seconds on PoCL). Lowered here to 3 s, a
    # configuration that never ends is killed with its runner, and the other one wins.
    from kerntune import kernel_tuner as kt_mod
    assert kt_mod.RUN_TIMEOUT_S == 600.0
    monkeypatch.setattr(kt_mod, "RUN_TIMEOUT_S", 3.0)
    hangs = r"""__kernel void hangs(__global float *out, __global const float *x, int n) {
        int i = get_global_id(0);
        if (HANG && i == 0) { volatile int k = 0; for (;;) k++; }
        if (i < n) out[i] = 2.0f * x[i];
    }"""
    out, x, n = inputs()
    results, env = kerntune.tune_kernel("hangs", hangs, N, [out, x, n], {"HANG": [1, 0], "block_size_x": [64]},
                                        answer=[2 * x, None, None], quiet=True)
    by = {r["HANG"]: r for r in results}
    assert isinstance(by[1]["__error__"], util.TimeoutConfig) and "3 s" in by[1]["__error__"].message
    assert "__error__" not in by[0] and env["best_config"]["HANG"] == 0


def test_cupy_compiles_as_cupy_does():
    # Kernel Tuner on CuPy measures kernels CuPy built, and CuPy adds -ftz=true to every compile
    # (on the H200 it changes pnpoly's best configuration), so lang="CuPy" builds with it too,
    # unless the caller names an -ftz of its own; the other languages get the caller's options
    from kerntune.kernel_tuner import _compile_options

    assert _compile_options("CuPy", ["-O3"], ["/k"]) == ["-O3", "-ftz=true", "-I/k"]
    assert _compile_options("cupy", None, []) == ["-ftz=true"]
    assert _compile_options("CuPy", ["-ftz=false"], []) == ["-ftz=false"]
    assert _compile_options("CuPy", ["--ftz=false"], []) == ["--ftz=false"]
    for lang in ("CUDA", "NVCUDA", "OpenCL", "C", None):
        assert _compile_options(lang, ["-O3"], ["/k"]) == ["-O3", "-I/k"]
