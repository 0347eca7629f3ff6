"""The library's model from Python, beyond variants: Python callables as candidates, constraints
and validation written in Python, tuning without a call, the unit callback, DLPack buffers, the
cache's wisdom. Candidates differ by design (tens of times the work), never by luck."""

import json
import random
import time

import numpy as np
import pytest

import kerntune

SCALE = r"""
void scale(float *out, const float *x, int n) {
    for (int r = 0; r < REPS; r++)
        for (int i = 0; i < n; i++) out[i] = 2.0f * x[i] + (float)(r - r);
}
"""

# out = 2 * x + WRONG: WRONG = 1 is a wrong answer
WRONGLY = r"""
void wrongly(float *out, const float *x, int n) {
    for (int i = 0; i < n; i++) out[i] = 2.0f * x[i] + (float)WRONG;
}
"""

N = 1 << 15
DECL = [("out", "float32", "w"), ("x", "float32", "r"), ("n", "int32")]


@pytest.fixture
def ctx(tmp_path):
    return kerntune.Context(cache="off", artifact_dir=str(tmp_path / "artifacts"))


def test_python_candidates(ctx):
    # the slow one repeats its work 50 times; the one that raises is disqualified with its
    # exception as the reason, and the call goes on
    def fast(out, x, n):
        np.multiply(x[:n], 2, out=out[:n])

    def slow(out, x, n):
        for _ in range(50):
            np.multiply(x[:n], 2, out=out[:n])

    def broken(out, x, n):
        raise ValueError("nope")

    op = kerntune.Op(ctx, "py-scale", DECL)
    op.add_candidate("slow", slow)
    op.add_candidate("broken", broken)
    op.add_candidate("fast", fast)
    x = (np.arange(N, dtype=np.float32) % 9) - 4
    out = np.full(N, 7.0, dtype=np.float32)
    op(out, x, N)
    assert np.array_equal(out, 2 * x)
    d = op.decision(out, x, N)
    assert d.winner.candidate == "fast"
    by = {u.candidate: u for u in d.units}
    assert by["slow"].outcome == "measured" and by["slow"].time_ns > by["fast"].time_ns
    assert by["broken"].outcome == "failed" and by["broken"].message == "ValueError: nope"
    assert op.tune_count() == 1
    out[:] = 0
    op(out, x, N)  # a hit: the winner, called directly
    assert np.array_equal(out, 2 * x) and op.tune_count() == 1


def test_constraints_in_python(ctx):
    seen = []

    def allowed(config):
        seen.append(dict(config))
        return config["REPS"] != 40

    op = kerntune.Op(ctx, "constrained", DECL)
    op.add_variants("scale", {"REPS": [40, 1, 2], "TAG": ["a", "b"]}, SCALE, "scale", constraints=[allowed, "REPS < 2 or REPS == 40"])
    x = np.ones(64, dtype=np.float32)
    out = np.zeros(64, dtype=np.float32)
    op(out, x, 64)
    assert np.array_equal(out, 2 * x)
    configs = sorted(u.config for u in op.decision(out, x, 64).units)
    assert configs == ["REPS=1,TAG=a", "REPS=1,TAG=b"]
    assert {"REPS": 1, "TAG": "b"} in seen  # the callable saw the values as Python values
    assert all(type(c["REPS"]) is int and type(c["TAG"]) is str for c in seen)


def test_a_constraint_that_raises(ctx):
    def broken(config):
        raise KeyError("no such parameter")

    op = kerntune.Op(ctx, "broken-constraint", DECL)
    op.add_variants("scale", {"REPS": [1, 2]}, SCALE, "scale", constraints=[broken])
    with pytest.raises(KeyError, match="no such parameter"):
        op(np.zeros(8, dtype=np.float32), np.ones(8, dtype=np.float32), 8)


def test_verify_and_answer(ctx):
    x = np.arange(256, dtype=np.float32)
    out = np.zeros(256, dtype=np.float32)
    calls = []

    def verify(expected, actual):
        calls.append((expected[1], actual[2]))  # the read-only input is hidden; the scalar is given
        return True if np.array_equal(actual[0], 2 * x) else "off by %g" % float(actual[0][0] - 0)

    op = kerntune.Op(ctx, "verified", DECL)
    op.add_variants("wrongly", {"WRONG": [0, 1]}, WRONGLY, "wrongly")
    op.set_answer({0: 2 * x})
    op.set_verify(verify)
    op(out, x, 256)
    assert np.array_equal(out, 2 * x)
    by = {u.config: u for u in op.decision(out, x, 256).units}
    assert by["WRONG=0"].outcome == "measured"
    assert by["WRONG=1"].outcome == "invalid" and by["WRONG=1"].message == "off by 1"
    assert calls and all(e is None and n == 256 for e, n in calls)


def test_answer_alone(ctx):
    x = np.arange(256, dtype=np.float32)
    op = kerntune.Op(ctx, "answered", DECL)
    op.add_variants("wrongly", {"WRONG": [1, 0]}, WRONGLY, "wrongly")
    op.set_answer({0: 2 * x})  # the first configuration is wrong: the answer says so
    out = np.zeros(256, dtype=np.float32)
    op(out, x, 256)
    by = {u.config: u for u in op.decision(out, x, 256).units}
    assert by["WRONG=1"].outcome == "invalid" and "expected 0, got 1" in by["WRONG=1"].message
    assert np.array_equal(out, 2 * x)
    with pytest.raises(ValueError, match="not the index of an output buffer"):
        kerntune.Op(ctx, "bad-answer", DECL).set_answer({1: x})


def test_verify_that_raises(ctx):
    def verify(expected, actual):
        raise RuntimeError("verify is broken")

    op = kerntune.Op(ctx, "verify-raises", DECL)
    op.add_variants("wrongly", {"WRONG": [0, 1]}, WRONGLY, "wrongly")
    op.set_answer({0: np.zeros(8, dtype=np.float32)})
    op.set_verify(verify)
    with pytest.raises(RuntimeError, match="verify is broken"):
        op(np.zeros(8, dtype=np.float32), np.ones(8, dtype=np.float32), 8)


def test_tune_writes_nothing(ctx):
    op = kerntune.Op(ctx, "tuned-ahead", DECL)
    # 200 times the work (about 0.5 ms against 2.5 us here): at 20 times, a make check on a busy
    # machine once picked REPS=20 (a few preemptions of a run outweigh 40 us, not 0.5 ms)
    op.add_variants("scale", {"REPS": [200, 1]}, SCALE, "scale")
    x = np.ones(N, dtype=np.float32)
    out = np.full(N, 5.0, dtype=np.float32)
    op.tune(out, x, N)
    assert np.all(out == 5.0)  # tuned on kerntune's own copies
    d = op.decision(out, x, N)
    assert d.winner.config == "REPS=1", [(u.config, u.outcome, u.time_ns, u.runtimes_ns, u.message) for u in d.units]
    op(out, x, N)
    assert np.array_equal(out, 2 * x) and op.tune_count() == 1


def test_unit_fn_sees_each_unit(ctx):
    seen = []
    ctx.set_unit_fn(lambda i, config, outcome, time_ns, runs, message: seen.append((config, outcome)))
    op = kerntune.Op(ctx, "watched", DECL)
    op.add_variants("wrongly", {"WRONG": [0, 1]}, WRONGLY, "wrongly")
    op(np.zeros(64, dtype=np.float32), np.ones(64, dtype=np.float32), 64)
    assert sorted(seen) == [("WRONG=0", "measured"), ("WRONG=1", "invalid")]
    ctx.set_unit_fn(None)
    with pytest.raises(TypeError, match="callable"):
        ctx.set_unit_fn(3)


class OnlyDLPack:
    """An array reachable through DLPack alone."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, *args, **kwargs):
        return self.a.__dlpack__(*args, **kwargs)


def test_dlpack_buffers(ctx):
    op = kerntune.Op(ctx, "dlpack", DECL)
    op.add_variants("scale", {"REPS": [1]}, SCALE, "scale")
    x = np.arange(100, dtype=np.float32)
    out = np.zeros(100, dtype=np.float32)
    op(OnlyDLPack(out), OnlyDLPack(x), 100)
    assert np.array_equal(out, 2 * x)
    with pytest.raises(TypeError, match="DLPack tensor of type code 2, 64 bits, but the op declares float32"):
        op(OnlyDLPack(out), OnlyDLPack(x.astype(np.float64)), 100)


def test_wisdom_moves_decisions(tmp_path):
    first = kerntune.Context(cache=str(tmp_path / "a.sqlite"), artifact_dir=str(tmp_path / "art"))
    op = kerntune.Op(first, "wise", DECL)
    # 300 times the work: on a busy machine a 2.5 us run measured 36 us, and at 30 times the race
    # ended below its confidence (which a second context then re-races, by design)
    op.add_variants("scale", {"REPS": [300, 1]}, SCALE, "scale")
    x = np.ones(N, dtype=np.float32)
    op(np.zeros(N, dtype=np.float32), x, N)
    wisdom = first.export_wisdom(op="wise")
    doc = json.loads(wisdom)
    assert [e["winner"]["config"] for e in doc["entries"]] == ["REPS=1"]
    assert first.cache_count(op="wise") == 1
    second = kerntune.Context(cache=str(tmp_path / "b.sqlite"), artifact_dir=str(tmp_path / "art"))
    assert second.import_wisdom(wisdom) == (1, 0, 0)
    op2 = kerntune.Op(second, "wise", DECL)
    op2.add_variants("scale", {"REPS": [300, 1]}, SCALE, "scale")
    op2.set_rerace(False)  # the imported decision is served as it is, settled or not
    out = np.zeros(N, dtype=np.float32)
    op2(out, x, N)
    assert np.array_equal(out, 2 * x)
    assert op2.tune_count() == 0 and op2.decision(out, x, N).source == "cache"
    with pytest.raises(kerntune.Error, match="kt_cache_import"):
        second.import_wisdom("{not json")
    assert second.cache_remove(op="wise") == 1
    with pytest.raises(kerntune.Error, match="no persistent cache"):
        kerntune.Context(cache="off").export_wisdom()


def test_rerace_off_serves_an_unsettled_decision(tmp_path):
    # two candidates doing the same work, a race of 3 runs asked for confidence 0.999999: it
    # ends below it, and the decision is recorded as not settled. A later process re-races it,
    # unless the op says its decisions are final (kerntune.triton's: Triton never measures twice).
    # Each run also sleeps 1 to 3 ms (drawn from one seeded generator), so that runs spread by
    # design and three of them cannot tell the two apart: doing the same work alone, beside two
    # busy processes half the races told them apart at 0.999999 (one's runs a few percent
    # slower than the other's, each tightly: load that changes over time, not noise per run)
    draws = random.Random(1)

    def same(out, x, n):
        np.multiply(x[:n], 2, out=out[:n])
        time.sleep(draws.uniform(0.001, 0.003))

    def unsettled(rerace):
        ctx = kerntune.Context(cache=str(tmp_path / "c.sqlite"), artifact_dir=str(tmp_path / "art"))
        ctx.set_race(confidence=0.999999, tolerance=0.0, max_runs=3)
        op = kerntune.Op(ctx, "tie", DECL)
        op.add_candidate("a", same, version="1")
        op.add_candidate("b", same, version="1")
        if rerace is not None:
            op.set_rerace(rerace)
        x = np.ones(N, dtype=np.float32)
        out = np.zeros(N, dtype=np.float32)
        op(out, x, N)
        assert np.array_equal(out, 2 * x)
        return op.decision(out, x, N)

    first = unsettled(None)
    assert first.source == "measured" and first.below_confidence and first.requested_confidence == pytest.approx(0.999999)
    assert first.confidence < 0.999999 and not first.reraced
    served = unsettled(False)
    assert served.source == "cache" and not served.reraced and served.winner.candidate == first.winner.candidate
    again = unsettled(True)
    assert again.source == "measured" and again.reraced
