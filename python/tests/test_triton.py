"""kerntune.triton.autotune on a GPU (scripts/gpu-python runs it; skipped where torch, Triton or a
CUDA device is missing): the in-place kernel of Triton issue #1563 comes back bit-exact after its
first call, the matmul and layer-norm kernels agree with torch, reset_to_zero is honoured, a config
that cannot compile is disqualified, later calls are served without tuning, and a second process
measures nothing (kerntune's persistent cache)."""

import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import kerntune.triton as ktt  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import triton_kernels as K  # noqa: E402


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    os.environ["KERNTUNE_CACHE"] = str(tmp_path_factory.mktemp("cache") / "decisions.sqlite")
    ktt._context = None  # a context on this cache
    return K.make(ktt.autotune)


def test_in_place_kernel_sees_one_launch(kernels):
    x = torch.zeros(1 << 20, device="cuda", dtype=torch.float32)
    K.add_one(kernels["add_one"], x)
    torch.cuda.synchronize()
    assert torch.equal(x, torch.ones_like(x))  # Triton's own autotuner leaves 1 + (runs it made)
    K.add_one(kernels["add_one"], x)  # served: one more launch
    torch.cuda.synchronize()
    assert torch.equal(x, torch.full_like(x, 2.0))
    d = kernels["add_one"].decision
    assert d.winner is not None and sum(u.outcome == "measured" for u in d.units) >= 2


def test_matmul_agrees_with_torch(kernels):
    torch.manual_seed(0)
    a = torch.randn(512, 384, device="cuda", dtype=torch.float16)
    b = torch.randn(384, 640, device="cuda", dtype=torch.float16)
    c = torch.empty(512, 640, device="cuda", dtype=torch.float16)
    K.matmul(kernels["matmul"], a, b, c)
    torch.cuda.synchronize()
    assert torch.allclose(c.float(), (a.float() @ b.float()), atol=0.5, rtol=1e-2)
    tuned = kernels["matmul"].decision
    c.zero_()
    K.matmul(kernels["matmul"], a, b, c)  # the same key: served from the autotuner's table
    torch.cuda.synchronize()
    assert kernels["matmul"].decision is tuned and torch.allclose(c.float(), a.float() @ b.float(), atol=0.5, rtol=1e-2)
    assert kernels["matmul"].best_config in K.matmul_configs()


def test_layer_norm_agrees_with_torch(kernels):
    x = torch.randn(256, 3000, device="cuda", dtype=torch.float16)
    w = torch.rand(3000, device="cuda", dtype=torch.float16)
    b = torch.rand(3000, device="cuda", dtype=torch.float16)
    y = torch.empty_like(x)
    K.layer_norm(kernels["layer_norm"], x, w, b, y)
    ref = torch.nn.functional.layer_norm(x.float(), (3000,), w.float(), b.float(), 1e-5)
    torch.cuda.synchronize()
    assert torch.allclose(y.float(), ref, atol=1e-2, rtol=1e-2)


def test_reset_to_zero(kernels):
    out = torch.zeros(1, device="cuda", dtype=torch.int32)
    K.count(kernels["count"], out, 100000)
    torch.cuda.synchronize()
    assert out.item() == 100000  # every benchmark run started from zero, and so did the winner's


def test_a_config_that_cannot_compile_is_disqualified():
    import triton.language as tl

    @ktt.autotune(configs=[triton.Config({"BLOCK": 1 << 22}), triton.Config({"BLOCK": 256})], key=["n"])
    @triton.jit
    def fill(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.full([BLOCK], 3.0, tl.float32), mask=offs < n)

    x = torch.zeros(4096, device="cuda")
    fill[lambda m: (triton.cdiv(4096, m["BLOCK"]),)](x, 4096)
    torch.cuda.synchronize()
    assert torch.all(x == 3.0)
    d = fill.decision
    assert d.winner.candidate == "config1"
    assert [u.outcome for u in d.units if u.candidate == "config0"] != ["measured"]


@pytest.mark.parametrize("processes", [True, False])
def test_configs_compiled_in_processes_or_threads(monkeypatch, tmp_path, processes):
    # by default each config is compiled in a forked child first (one per config up to the
    # processors, and one that builds their launcher meanwhile), and the answer is the same either way; the second autotuner of the same kernel
    # and configs shares the first's op (one op per name in a context) and tunes its own key
    import triton.language as tl

    forks = []
    real_fork = os.fork

    def counting_fork():
        pid = real_fork()
        if pid:
            forks.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", counting_fork)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))  # nothing compiled yet

    @ktt.autotune(configs=[triton.Config({"BLOCK": b}) for b in (128, 256, 512)], key=["n"], compile_processes=processes)
    @triton.jit
    def fill5(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.full([BLOCK], 5.0, tl.float32), mask=offs < n)

    n = 3000 if processes else 3001
    x = torch.zeros(n, device="cuda")
    fill5[lambda m: (triton.cdiv(n, m["BLOCK"]),)](x, n)
    torch.cuda.synchronize()
    assert torch.all(x == 5.0)
    assert len(forks) == (1 + min(3, os.cpu_count()) if processes else 0)
    assert (fill5.process_compile_time > 0) == processes
    assert sum(u.outcome == "measured" for u in fill5.decision.units) == 3


def test_a_second_process_measures_nothing(kernels, tmp_path):
    x = torch.zeros(1 << 16, device="cuda")
    K.add_one(kernels["add_one"], x)  # decided here (or already)
    torch.cuda.synchronize()
    script = r"""
import os, sys, torch
sys.path.insert(0, %r)
import kerntune.triton as ktt, triton_kernels as K
ks = K.make(ktt.autotune)
x = torch.zeros(1 << 16, device="cuda")
K.add_one(ks["add_one"], x)
torch.cuda.synchronize()
d = ks["add_one"].decision
print(d.source, float(x.sum()), d.reraced, d.below_confidence, d.confidence)
""" % os.path.dirname(os.path.abspath(__file__))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=dict(os.environ), timeout=600)
    assert out.returncode == 0, out.stderr
    source, total, reraced, below, confidence = out.stdout.split()
    assert (source, reraced) == ("cache", "False"), out.stdout  # not measured, not re-raced
    assert float(total) == float(1 << 16)


# a script's forks counted (the children that compile configs), then kerntune.triton imported
_COUNTING_FORKS = r"""
real_fork, forks = os.fork, []
def counting_fork():
    pid = real_fork()
    if pid:
        forks.append(pid)
    return pid
os.fork = counting_fork
import kerntune.triton as ktt
"""

_STAMP_SCRIPT = r"""
import os, sys, torch, triton, triton.language as tl
import triton.runtime.cache as cache
real, calls = cache.triton_key, []
def counting():
    calls.append(1)
    return real()
cache.triton_key = counting  # Triton's own key: counted in this process (a forked child exits unseen)
""" + _COUNTING_FORKS + r"""
@ktt.autotune(configs=[triton.Config({"BLOCK": b}) for b in (128, 256, 512)], key=["n"])
@triton.jit
def fill7(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.full([BLOCK], 7.0, tl.float32), mask=offs < n)

n = 5000
x = torch.zeros(n, device="cuda")
fill7[lambda m: (triton.cdiv(n, m["BLOCK"]),)](x, n)
torch.cuda.synchronize()
print(len(calls), len(forks), bool(torch.all(x == 7.0)), sum(u.outcome == "measured" for u in fill7.decision.units),
      cache.triton_key is counting)
"""


def test_compiles_keyed_by_the_installation_stamp(tmp_path):
    # the configs' compiles are cached under kerntune's stamp of Triton's installation, not
    # triton_key(): neither a first process (compiling, in children: one per config and one for
    # the launcher) nor a second (loading what the first compiled) computes Triton's key, and the
    # second compiles nothing and forks no child; with
    # KERNTUNE_TRITON_KEY=triton the key is Triton's again, so that process computes it and
    # compiles its kernels under other names
    env = dict(os.environ, TRITON_CACHE_DIR=str(tmp_path / "triton"), KERNTUNE_CACHE="off")
    env.pop("KERNTUNE_TRITON_KEY", None)
    script = tmp_path / "fill7.py"  # Triton takes a @jit function's source from its file
    script.write_text(_STAMP_SCRIPT)

    def run(extra=None):
        out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=dict(env, **(extra or {})),
                             timeout=600)
        assert out.returncode == 0, out.stderr
        calls, forks, filled, measured, restored = out.stdout.split()
        assert (filled, measured, restored) == ("True", "3", "True"), out.stdout
        return int(calls), int(forks), sorted(os.listdir(tmp_path / "triton"))

    children = 1 + min(3, os.cpu_count())
    calls, forks, entries = run()
    assert (calls, forks) == (0, children) and entries  # compiled in children, the key never computed
    calls, forks, again = run()
    assert (calls, forks) == (0, 0) and again == entries  # loaded: nothing compiled, nothing added
    calls, forks, own = run({"KERNTUNE_TRITON_KEY": "triton"})
    assert calls > 0 and forks == children and set(own) > set(entries)  # Triton's key: other names, compiled again


_RECALL_SCRIPT = r"""
import os, torch, triton, triton.language as tl
""" + _COUNTING_FORKS + r"""
@ktt.autotune(configs=[triton.Config({"BLOCK": b}) for b in (128, 256, 512)], key=["n"], reset_to_zero=["x_ptr"])
@triton.jit
def add9(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(x_ptr + offs, tl.full([BLOCK], 9.0, tl.float32), mask=offs < n)

def go(n):
    x = torch.full((n,), 5.0, device="cuda")  # zeroed before the chosen config's launch: 9 after it
    before = len(forks)
    add9[lambda m: (triton.cdiv(n, m["BLOCK"]),)](x, n)
    torch.cuda.synchronize()
    return [add9.decision.source, len(forks) - before, bool(torch.all(x == 9.0)), add9.best_config.kwargs["BLOCK"]]

# 8192 is a multiple of 16, 7000 is not: two of Triton's specializations, so two sets of compiles
first, second = go(7000), go(8192)
compiled = len(add9.fn.device_caches[torch.cuda.current_device()][0])
print(*first, *second, compiled)
"""


def test_a_recorded_decision_compiles_the_winner_alone(tmp_path):
    # a second process finds each key in kerntune's persistent cache before anything is loaded:
    # for its first key, with Triton's on-disk cache empty, its compiling children are forked as
    # before (the look-up runs beside them, while kerntune's context starts) and stopped once it
    # answers; for its second key the context runs already, so the look-up comes first and no
    # child is forked. Each key compiles one config, the recorded winner, launched on zeroes as
    # the first process's was
    script = tmp_path / "add9.py"
    script.write_text(_RECALL_SCRIPT)
    cache = str(tmp_path / "decisions.sqlite")

    def run(triton_dir):
        env = dict(os.environ, TRITON_CACHE_DIR=str(tmp_path / triton_dir), KERNTUNE_CACHE=cache)
        out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600)
        assert out.returncode == 0, out.stderr
        return out.stdout.split()

    measured = run("first")
    forks = str(1 + min(3, os.cpu_count()))
    b1, b2 = measured[3], measured[7]
    assert measured == ["measured", forks, "True", b1, "measured", forks, "True", b2, "6"]
    again = run("second")
    assert again == ["cache", forks, "True", b1, "cache", "0", "True", b2, "2"]  # the recorded winners alone
    warm = run("first")  # Triton's cache holds every config: no child at all, and one config loaded a key
    assert warm == ["cache", "0", "True", b1, "cache", "0", "True", b2, "2"]


def test_do_bench_is_refused():
    with pytest.raises(NotImplementedError, match="do_bench"):
        ktt.autotune(configs=K.add_one_configs(), key=["n"], do_bench=lambda fn, quantiles: [1.0])(K._add_one)
