"""The Python package over the C library: ops of C variants tuned on numpy arrays, decisions,
the cache file, and the errors a caller gets. Run by ctest (python/CMakeLists.txt) with the
package built in the build tree; every test has its own artifact directory and cache."""

import os
import sqlite3
import subprocess
import sys
import time

import numpy as np
import pytest

import kerntune

# out = 2 * x, REPS times over: REPS = 40 is 40 times the work of REPS = 1 (selection by design)
SCALE = r"""
void scale(float *out, const float *x, int n) {
    for (int r = 0; r < REPS; r++)
        for (int i = 0; i < n; i++) out[i] = 2.0f * x[i] + (float)(r - r);
}
"""

# acc += x, in place, once per call
ACCUMULATE = r"""
void accumulate(float *acc, const float *x, int n) {
    for (int r = 0; r < REPS; r++)
        for (int i = 0; i < n; i++) if (r == REPS - 1) acc[i] += x[i];
}
"""

# CRASH = 1 writes through a null pointer
CRASHY = r"""
void crashy(float *out, const float *x, int n) {
    if (CRASH) *(volatile int *)0 = 1;
    for (int i = 0; i < n; i++) out[i] = 2.0f * x[i];
}
"""

N = 1 << 16


@pytest.fixture
def ctx(tmp_path):
    return kerntune.Context(cache="off", artifact_dir=str(tmp_path / "artifacts"))


def scale_op(ctx, name="scale"):
    op = kerntune.Op(ctx, name, [("out", "float32", "w"), ("x", "float32", "r"), ("n", "int32")])
    op.add_variants("scale", {"REPS": "[40, 1]"}, SCALE, "scale")
    return op


def test_tunes_and_runs_the_winner(ctx):
    op = scale_op(ctx)
    x = (np.arange(N, dtype=np.float32) % 13) - 6
    out = np.full(N, 7.0, dtype=np.float32)
    op(out, x, N)
    assert np.array_equal(out, 2 * x)  # exactly: the winner's one launch
    d = op.decision(out, x, N)
    assert d.winner.config == "REPS=1"
    assert {u.config: u.outcome for u in d.units} == {"REPS=40": "measured", "REPS=1": "measured"}
    assert d.winner.time_ns > 0 and d.winner.runs >= 1
    out[:] = 0
    op(out, x, N)  # the same key: the recorded winner, no tuning
    assert np.array_equal(out, 2 * x)


def test_an_op_keeps_its_context(tmp_path):
    op = scale_op(kerntune.Context(cache="off", artifact_dir=str(tmp_path / "artifacts")))  # no other reference to it
    x = np.arange(64, dtype=np.float32)
    out = np.zeros(64, dtype=np.float32)
    op(out, x, 64)
    assert np.array_equal(out, 2 * x)


def test_in_place_buffer_sees_one_launch(ctx):
    op = kerntune.Op(ctx, "acc", [("acc", "float32", "rw"), ("x", "float32", "r"), ("n", "int32")])
    op.add_variants("acc", {"REPS": [40, 1]}, ACCUMULATE, "accumulate")  # values as a list of ints
    acc = np.ones(N, dtype=np.float32)
    x = np.full(N, 2.0, dtype=np.float32)
    op(acc, x, N)  # tuning ran the candidates many times: none of it shows
    assert np.array_equal(acc, np.full(N, 3.0, dtype=np.float32))


def test_a_crashing_candidate_is_disqualified_in_its_runner(ctx):
    # the interpreter lives on: the candidate ran in kerntune's runner process
    op = kerntune.Op(ctx, "crashy", [("out", "float32", "w"), ("x", "float32", "r"), ("n", "int32")], isolation="on")
    op.add_variants("crashy", {"CRASH": "[1, 0]"}, CRASHY, "crashy")
    x = np.arange(256, dtype=np.float32)
    out = np.zeros(256, dtype=np.float32)
    op(out, x, 256)
    assert np.array_equal(out, 2 * x)
    d = op.decision(out, x, 256)
    assert d.winner.config == "CRASH=0"
    crashed = [u for u in d.units if u.config == "CRASH=1"][0]
    assert crashed.outcome == "crashed" and "signal 11" in crashed.message


def test_budget_and_search(ctx):
    op = kerntune.Op(ctx, "budgeted", [("out", "float32", "w"), ("x", "float32", "r"), ("n", "int32")])
    op.add_variants("scale", {"REPS": "[1, 2, 3, 4, 5, 6]"}, SCALE, "scale")
    with pytest.raises(kerntune.Error, match="sideways"):
        op.set_search("sideways")
    with pytest.raises(ValueError, match="units must be 0"):
        op.set_budget(units=-1)
    op.set_search("random", seed=3)
    op.set_budget(units=2)
    x = np.ones(64, dtype=np.float32)
    op(np.zeros(64, dtype=np.float32), x, 64)
    d = op.decision(np.zeros(64, dtype=np.float32), x, 64)
    assert sorted(u.outcome for u in d.units) == ["measured"] * 2 + ["not_run"] * 4
    # the units in the space's order, the ones not run made on demand: ran() names the others
    assert len(d.units) == 6 and [u.config for u in d.units] == ["REPS=%d" % r for r in range(1, 7)]
    ran = d.units.ran()
    assert len(ran) == 2 and all(d.units[i].outcome == "measured" and d.units[i].runs > 0 for i in ran)
    idle = [i for i in range(6) if i not in ran][0]
    assert d.units[idle] == kerntune.Unit("REPS=%d" % (idle + 1), "not_run", -1.0, 0, "", "scale")
    assert d.units[-1] == d.units[5] and d.units[1:3] == [d.units[1], d.units[2]] and d.units == list(d.units)
    with pytest.raises(kerntune.Error, match="the op was already called"):
        op.set_budget(units=3)


@pytest.mark.skipif("KT_CLI" not in os.environ, reason="the kerntune command's path comes from ctest")
def test_devices_are_the_commands():
    # the same devices, in the same order, as `kerntune devices` lists
    listed = subprocess.run([os.environ["KT_CLI"], "devices"], capture_output=True, text=True, check=True).stdout
    rows = [line.split(None, 2) for line in listed.splitlines()[1:] if not line.startswith("unavailable")]
    devices = kerntune.Context(cache="off").devices()
    assert [(d.backend, str(d.index), d.name) for d in devices] == [tuple(r) for r in rows]
    assert devices[0].index == 0 and devices[0].backend == "c"


def test_context_starts_the_backends_named():
    # PoCL's devices are there by default and not with backends="c"; a name that is no backend is
    # refused with kerntune's message
    assert any(d.backend == "opencl" for d in kerntune.Context(cache="off").devices())
    assert [d.backend for d in kerntune.Context(cache="off", backends="c").devices()] == ["c"]
    with pytest.raises(kerntune.Error, match="'vulkan' is not a backend"):
        kerntune.Context(cache="off", backends="vulkan")


# out = 2 * x, by work-items of a block of BS, after REPS loads of x each: 200 of them cost far
# more than one by design (the sum of x times 0.0f is a zero the compiler cannot fold without
# fast math, where the store of the same value REPS times was folded to one, and the two
# configurations tied)
SCALE_CL = r"""
__kernel void scale(__global float *out, __global const float *x, int n) {
    int i = get_global_id(0);
    if (i >= n) return;
    float zero = 0.0f;
    for (int r = 0; r < REPS; r++) zero += x[(i + 64 * r) % n] * 0.0f;
    out[i] = 2.0f * x[i] + zero;
}
"""


def test_opencl_candidates_on_pocl(ctx):
    # numpy arrays on an OpenCL device: copied there and back around each call
    opencl = [d for d in ctx.devices() if d.backend == "opencl"]
    assert opencl, "no OpenCL device: make check installs PoCL (scripts/install-deps.sh)"
    op = kerntune.Op(ctx, "scale-cl", [("out", "float32", "w"), ("x", "float32", "r"), ("n", "int32")], device=opencl[0].index)
    op.add_variants("scale", {"BS": "[32, 64]", "REPS": "[200, 1]"}, SCALE_CL, "scale", inputs=["n"],
                    global_size=["(n + BS - 1) // BS * BS"], block=["BS"])
    n = 50000
    x = (np.arange(n, dtype=np.float32) % 7) - 3
    out = np.zeros(n, dtype=np.float32)
    op(out, x, n)
    assert np.array_equal(out, 2 * x)
    d = op.decision(out, x, n)
    assert d.winner.config.endswith("REPS=1")
    assert sorted(u.outcome for u in d.units) == ["measured"] * 4
    with pytest.raises(ValueError, match="not both"):
        op.add_variants("other", {"BS": "[32]"}, SCALE_CL, "scale", global_size=["n"], grid=["1"])


def test_bytearray_buffers(ctx):
    op = scale_op(ctx, "bytes")
    x = np.arange(64, dtype=np.float32)
    out = bytearray(64 * 4)
    op(out, x.tobytes(), 64)  # bytes for a buffer the op only reads
    assert np.array_equal(np.frombuffer(out, dtype=np.float32), 2 * x)


def test_the_cache_file_holds_the_decision(tmp_path):
    path = str(tmp_path / "decisions.sqlite")
    ctx = kerntune.Context(cache=path, artifact_dir=str(tmp_path / "artifacts"))
    op = scale_op(ctx, "cached-scale")
    x = np.ones(N, dtype=np.float32)
    out = np.zeros(N, dtype=np.float32)
    op(out, x, N)
    del op, ctx  # the context closes the cache
    rows = sqlite3.connect(path).execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    assert rows  # a real SQLite file, written
    found = False
    con = sqlite3.connect(path)
    for (table,) in rows:
        for row in con.execute(f'SELECT * FROM "{table}"'):
            found = found or any(isinstance(v, str) and "cached-scale" in v for v in row)
    assert found


def fast_slow_op(ctx, name, ran):
    """An op of (out: int32 buffer, n: int64), keyed by n, with Python candidates "fast" and "slow"
    (20 ms of sleep: slower by construction) that append their names to ran and write 1 or 2 into
    out[0]; unvalidated (they write their own marks), never re-raced (a decision below its race's
    confidence is served, not measured again)."""
    op = kerntune.Op(ctx, name, [("out", "int32", "w"), ("n", "int64")])
    op.key_arg(1)
    op.set_validation(False)
    op.set_rerace(False)

    def fast(out, n):
        ran.append("fast")
        out[0] = 1

    def slow(out, n):
        ran.append("slow")
        time.sleep(0.02)
        out[0] = 2

    op.add_candidate("fast", fast, version="1")
    op.add_candidate("slow", slow, version="1")
    return op


def test_recall_runs_nothing(tmp_path):
    """Op.recall: False (nothing ran, the key left for a call) where nothing records the key; in
    the next context on the same cache file True, with the recorded winner and no run."""
    path = str(tmp_path / "decisions.sqlite")
    ran = []

    def make():
        ctx = kerntune.Context(cache=path, artifact_dir=str(tmp_path / "artifacts"), backends="c")
        return ctx, fast_slow_op(ctx, "recalled", ran)

    out = np.zeros(4, dtype=np.int32)
    ctx, op = make()
    assert op.recall(out, 5) is False
    assert ran == [] and out[0] == 0
    with pytest.raises(kerntune.Error, match="no finished decision"):
        op.decision(out, 5)
    op(out, 5)  # tunes the key
    assert out[0] == 1 and "slow" in ran
    assert op.decision(out, 5).source == "measured"
    assert op.recall(out, 5) is True
    del op, ctx
    ran.clear()
    ctx, op = make()
    assert op.recall(out, 6) is False
    out[0] = 0
    assert op.recall(out, 5) is True
    assert ran == [] and out[0] == 0
    d = op.decision(out, 5)
    assert d.source == "cache" and d.winner.candidate == "fast"
    op(out, 5)
    assert ran == ["fast"] and out[0] == 1


_FLEET_SCRIPT = r"""
import sys
import numpy as np
import kerntune
sys.path.insert(0, %r)
from test_kerntune import fast_slow_op
ran = []
op = fast_slow_op(kerntune.Context(backends="c"), "fleet-shared", ran)
out = np.zeros(4, dtype=np.int32)
if sys.argv[1] == "recall":
    print(op.recall(out, 5), ran)
else:
    op(out, 5)
d = op.decision(out, 5)
print(d.source, d.winner.candidate, "slow" in ran)
""" % os.path.dirname(os.path.abspath(__file__))


def test_the_fleet_cache_serves_another_process(tmp_path):
    """A decision made through the package reaches the fleet's shared cache (a real redis-server on
    a loopback port): another process with a cache file of its own recalls it from there, runs
    nothing, and keeps it in its own file."""
    import shutil
    import socket

    server = shutil.which("redis-server")
    if server is None:
        pytest.fail("no redis-server: scripts/install-deps.sh installs it")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    redis = subprocess.Popen([server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                              "--dir", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(500):  # until it answers
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.01)
        env = dict(os.environ, KERNTUNE_REMOTE="redis://127.0.0.1:%d" % port, KERNTUNE_REMOTE_KEY="a shared secret",
                   KERNTUNE_REMOTE_TIMEOUT="5", KERNTUNE_ARTIFACTS=str(tmp_path / "artifacts"))

        def run(mode, cache):
            p = subprocess.run([sys.executable, "-c", _FLEET_SCRIPT, mode], capture_output=True, text=True, timeout=120,
                               env=dict(env, KERNTUNE_CACHE=str(tmp_path / cache)))
            assert p.returncode == 0, p.stderr
            return p.stdout.split("\n")

        assert run("call", "first.sqlite")[0] == "measured fast True"
        recalled, source = run("recall", "second.sqlite")[:2]
        assert recalled == "True []"  # decided without a run
        assert source == "remote fast False"
        assert run("recall", "second.sqlite")[1] == "cache fast False"  # kept in its own file since
    finally:
        redis.terminate()
        redis.wait(timeout=30)


def test_argument_errors(ctx):
    op = scale_op(ctx, "errors")
    x = np.ones(8, dtype=np.float32)
    out = np.zeros(8, dtype=np.float32)
    with pytest.raises(TypeError, match="takes 3 arguments, 2 given"):
        op(out, x)
    with pytest.raises(TypeError, match="argument 1: an array of '<f8', but the op declares float32"):
        op(out, x.astype(np.float64), 8)
    ro = np.zeros(8, dtype=np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="argument 0: the array is read-only, and the op writes this buffer"):
        op(ro, x, 8)
    with pytest.raises(ValueError, match="argument 0: the array is not contiguous"):
        op(np.zeros(16, dtype=np.float32)[::2], x, 8)
    with pytest.raises(TypeError, match="argument 0: bytes are read-only"):
        op(bytes(32), x, 8)
    with pytest.raises(TypeError, match="argument 1: expected an array"):
        op(out, [1.0] * 8, 8)


def test_declaration_errors(ctx):
    with pytest.raises(ValueError, match=r"argument 1 \('x'\): unknown dtype 'float128'"):
        kerntune.Op(ctx, "bad", [("out", "float32", "w"), ("x", "float128", "r")])
    with pytest.raises(ValueError, match="access 'x': expected 'r', 'w' or 'rw'"):
        kerntune.Op(ctx, "bad2", [("out", "float32", "x")])
    with pytest.raises(TypeError, match="a kerntune.Context"):
        kerntune.Op(object(), "bad3", [])
    with pytest.raises(ValueError, match="isolation 'always': expected 'auto', 'on' or 'off'"):
        kerntune.Op(ctx, "bad4", [], isolation="always")


def test_kerntune_errors_carry_status_and_message(ctx):
    op = kerntune.Op(ctx, "space", [("out", "float32", "w"), ("x", "float32", "r"), ("n", "int32")])
    with pytest.raises(kerntune.Error) as e:
        op.add_variants("scale", {"REPS": "[1, 2"}, SCALE, "scale")
    assert e.value.status == "ERR_INVALID_ARGUMENT"
    assert str(e.value) == "kt_space_add_param: parameter 'REPS': expression '[1, 2': column 6: expected ',' or ']', found the end"
    op.add_variants("scale", {"REPS": "[1]"}, "this is not C", "scale")
    x = np.ones(8, dtype=np.float32)
    with pytest.raises(kerntune.Error) as e:
        op(np.zeros(8, dtype=np.float32), x, 8)  # every variant fails to build
    assert e.value.status == "ERR_ALL_FAILED"
    d = op.decision(np.zeros(8, dtype=np.float32), x, 8)
    assert d.winner is None and d.units[0].outcome == "build_failed" and "error" in d.units[0].message
    assert d.units[0].time_ns == -1 and d.units[0].runs == 0

