"""Kernel Tuner's own example scripts (../shared/kernel_tuner_examples, unchanged) run through
kerntune: each script is written into a scratch folder with its import lines naming kerntune
instead of kernel_tuner and nothing else changed (as_kerntune checks that), beside links to the
example's own kernel files, and run there as a program: `python3 script.py`.

KERNTUNE_BUDGET bounds each tune_kernel call (tune_kernel's docstring) so that the scripts run in
seconds at their own problem sizes: the OpenCL ones on PoCL. matmul.py (a 4096^3 numpy.dot as the
answer, then 52-74 s a run of one configuration on one PoCL thread: 557 s for two configurations
on 2026-12-03) and reduction.py (a 3.2 GB input, 420 s and 16 GB at its peak for two
configurations a tuning) run only with KT_EXAMPLES_ALL=1 (`make check-examples`): either alone is
past make check's five minutes on a 2-core machine. The CUDA ones run on the GPU machine
(scripts/gpu-python).
"""

import difflib
import json
import os
import re
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.environ.get("KT_EXAMPLES") or os.path.join(HERE, "..", "..", "..", "shared", "kernel_tuner_examples")
ALL = os.environ.get("KT_EXAMPLES_ALL") == "1"

pytestmark = pytest.mark.skipif(not os.path.isdir(EXAMPLES), reason="no Kernel Tuner examples at " + EXAMPLES)


def as_kerntune(text):
    """The script with its import lines naming kerntune: `import kernel_tuner` becomes `import
    kerntune as kernel_tuner`, `from kernel_tuner[.x] import ...` `from kerntune[.x] import ...`."""
    out = re.sub(r"(?m)^(\s*)import kernel_tuner\s*$", r"\1import kerntune as kernel_tuner", text)
    out = re.sub(r"(?m)^(\s*)from kernel_tuner(\.\w+)? import ", r"\1from kerntune\2 import ", out)
    changed = [l for l in difflib.ndiff(text.splitlines(), out.splitlines()) if l[:2] in ("- ", "+ ")]
    assert changed, "no import line of kernel_tuner"
    for line in changed:  # import lines and nothing else
        assert re.match(r"[-+] \s*(import kernel_tuner|import kerntune as kernel_tuner|from (kernel_tuner|kerntune)(\.\w+)? import )", line), line
    return out


def run_example(lang, script, tmp_path, budget, edit=None, check=True):
    """Runs the script with its import lines naming kerntune (and, where edit is given, edit's
    change too: the test says why); check: that it exits 0."""
    folder = os.path.join(EXAMPLES, lang)
    for name in os.listdir(folder):
        if not name.endswith(".py"):
            os.symlink(os.path.join(folder, name), tmp_path / name)  # the kernels as they are
    with open(os.path.join(folder, script)) as f:
        text = as_kerntune(f.read())
    (tmp_path / script).write_text(edit(text) if edit else text)
    env = dict(os.environ, KERNTUNE_BUDGET=str(budget), KERNTUNE_CACHE="off", PYTHONUNBUFFERED="1")
    p = subprocess.run([sys.executable, script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0 or not check, "%s exited %d:\n%s\n%s" % (script, p.returncode, p.stdout[-4000:], p.stderr[-4000:])
    return p


def measured_lines(out):
    """The configurations a run printed as it measured them (not the best one printed after)."""
    lines = []
    for line in out.splitlines():
        if line.startswith("best performing configuration"):
            break
        if re.search(r", time=[0-9.]+ms$", line):
            lines.append(line)
    return lines


def test_vector_add(tmp_path):
    p = run_example("opencl", "vector_add.py", tmp_path, 4)
    doc = json.load(open(tmp_path / "vector_add.json"))  # store_output_file: T4
    assert doc["schema_version"] == "1.0.0" and len(doc["results"]) == 4
    assert all(r["invalidity"] == "correct" and r["times"]["runtimes"] for r in doc["results"])
    assert [r["configuration"]["block_size_x"] for r in doc["results"]] == [128, 192, 256, 320]
    meta = json.load(open(tmp_path / "vector_add-metadata.json"))["metadata"]
    assert meta["operating_system"] == "Linux"
    assert "best performing configuration" in p.stdout


def test_stencil(tmp_path):
    p = run_example("opencl", "stencil.py", tmp_path, 4)
    assert len(measured_lines(p.stdout)) == 4


# the convolutions' first configurations run 3-4 s each on PoCL's one thread: one of them (two
# with KT_EXAMPLES_ALL=1)
def test_convolution(tmp_path):
    n = 2 if ALL else 1
    p = run_example("opencl", "convolution.py", tmp_path, n)
    assert len(measured_lines(p.stdout)) == n


def test_convolution_correct(tmp_path):
    # the answer comes from run_kernel of the naive kernel; the configuration tuned agrees with it
    # (one: the naive run and each run of the first configurations take 3-4 s on PoCL's one thread)
    p = run_example("opencl", "convolution_correct.py", tmp_path, 1)
    assert len(measured_lines(p.stdout)) == 1 and "IncorrectConfig" not in p.stdout


def test_sepconv(tmp_path):
    # two tunings (rows, columns) of over a million configurations each, their (results, env)
    # stored as JSON and, through pandas, as CSV (the script makes a frame of the pair)
    p = run_example("opencl", "sepconv.py", tmp_path, 3)
    assert p.stdout.count("best performing configuration") == 2
    for part in ("row", "col"):
        results, env = json.load(open(tmp_path / ("separable_convolution_%s.json" % part)))
        assert len(results) == 3 and all(r["time"] > 0 for r in results)
        assert env["kerntune"]["budget_from"] == "KERNTUNE_BUDGET"
        assert (tmp_path / ("separable_convolution_%s.csv" % part)).exists()


@pytest.mark.skipif(not ALL, reason="KT_EXAMPLES_ALL=1 (make check-examples): a 4096^3 answer and 13 s a run on PoCL")
def test_matmul(tmp_path):
    run_example("opencl", "matmul.py", tmp_path, 2)
    results, env = json.load(open(tmp_path / "matmul.json"))
    assert len(results) == 2 and all("GFLOP/s" in r for r in results if "__error__" not in r)


@pytest.mark.skipif(not ALL, reason="KT_EXAMPLES_ALL=1 (make check-examples): a 3.2 GB input, 7 s a run on PoCL")
def test_reduction(tmp_path):
    p = run_example("opencl", "reduction.py", tmp_path, 2)
    assert "Best performing config" in p.stdout
    assert len(json.load(open(tmp_path / "reduce.json"))) == 2
    for blocks in (32, 64, 128, 256, 512, 1024):
        assert len(json.load(open(tmp_path / ("reduce-kernel2-%d.json" % blocks)))) == 2


# ---- the CUDA ones, on the GPU machine (scripts/gpu-python sets KT_EXAMPLES_CUDA=1) ------------

CUDA = os.environ.get("KT_EXAMPLES_CUDA") == "1"
cuda_only = pytest.mark.skipif(not CUDA, reason="KT_EXAMPLES_CUDA=1 on a machine with a CUDA device (scripts/gpu-python)")


@cuda_only
def test_cuda_vector_add(tmp_path):
    run_example("cuda", "vector_add.py", tmp_path, 15)  # every configuration
    doc = json.load(open(tmp_path / "vector_add.json"))
    assert len(doc["results"]) == 15 and all(r["invalidity"] == "correct" for r in doc["results"])


@cuda_only
def test_cuda_matmul(tmp_path):
    p = run_example("cuda", "matmul.py", tmp_path, "30s")
    results = json.load(open(tmp_path / "matmul.json"))  # the script writes tune_kernel's results alone
    assert results and all("GFLOP/s" in r for r in results if "__error__" not in r)
    assert "best performing configuration" in p.stdout


@cuda_only
def test_cuda_convolution(tmp_path):
    # a space of millions, the filter in constant memory (cmem_args): a budget of seconds
    run_example("cuda", "convolution.py", tmp_path, "40s")
    results, env = json.load(open(tmp_path / "convolution.json"))
    assert any("__error__" not in r for r in results)


@cuda_only
def test_cuda_reduction(tmp_path):
    p = run_example("cuda", "reduction.py", tmp_path, 8)
    assert "Best performing config" in p.stdout
    assert json.load(open(tmp_path / "reduce.json"))


@cuda_only
def test_cuda_pnpoly(tmp_path):
    # host code (lang="C", compiled by nvcc) that times itself and returns its time; the script
    # compiles for -arch=sm_52, which CUDA 13's nvcc no longer supports (nor does Kernel Tuner's
    # run of it there): unchanged, every configuration fails with nvcc's own message, and the
    # tuning with them
    pytest.importorskip("pycuda", reason="pnpoly.py drives its host code with PyCUDA, which this machine lacks")
    for d in ("as_is", "arch"):
        os.mkdir(tmp_path / d)
    p = run_example("cuda", "pnpoly.py", tmp_path / "as_is", "10s", check=False)
    unsupported = "Unsupported gpu architecture 'sm_52'" in p.stdout + p.stderr
    assert (p.returncode != 0 and unsupported) or (p.returncode == 0 and not unsupported), p.stderr[-3000:]
    if not unsupported:  # an nvcc that still builds for sm_52: the script as it is
        run_example("cuda", "pnpoly.py", tmp_path / "arch", "30s")
    else:  # the same with the oldest architecture this nvcc builds for, and nothing else changed
        run_example("cuda", "pnpoly.py", tmp_path / "arch", "30s", edit=lambda t: t.replace('"-arch=sm_52"', '"-arch=sm_75"'))
    results, env = json.load(open(tmp_path / "arch" / "pnpoly.json"))
    timed = [r for r in results if "__error__" not in r]
    assert timed and all(0 < r["time"] < 1000 for r in timed)  # the host code's own times, in ms
    assert env["best_config"]["time"] == min(r["time"] for r in timed)
