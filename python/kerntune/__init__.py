"""kerntune from Python: pick, by measurement, the fastest correct implementation of a kernel
for each problem shape and device, and remember the pick.

This package wraps kerntune's C library (the extension kerntune._kerntune). The objects are the
library's:

    ctx = kerntune.Context(cache="off")             # or a cache file's path; None: the default
    op = kerntune.Op(ctx, "scale", [("out", "float32", "w"), ("x", "float32", "r"), ("n", "int32")])
    op.add_variants("scale", {"UNROLL": "[1, 4]"}, source=C_SOURCE, kernel="scale")
    op(out, x, len(x))                              # tunes on a new key, then runs the winner
    print(op.decision(out, x, len(x)).winner)

Candidates are variant groups compiled from source (add_variants) or Python callables
(add_candidate): a callable gets numpy arrays over the op's host buffers, or, for an op on a
device, the buffers' device pointers as ints (and with queued=True the queue to enqueue on
first). Buffers are numpy arrays, CuPy arrays and torch tensors (numpy's __array_interface__,
__cuda_array_interface__, DLPack), bytearrays, or bytes for buffers the op only reads; nothing
is copied, except host arrays passed to an op on another device, which each call copies there and
back. The interpreter's lock is released while kerntune tunes and calls.
Errors raise kerntune.Error, whose `status` names kerntune's status ("KT_ERR_...").

Kernel Tuner's interface is here too: kerntune.tune_kernel and kerntune.run_kernel, with
kerntune.util and kerntune.file_utils (see kerntune/kernel_tuner.py); and kerntune.triton for
Triton's autotuner.
"""

import hashlib
import os
from collections.abc import Sequence
from typing import NamedTuple, Optional

# Installed by pip, the package holds kerntune's runner process (isolated candidates run there):
# the library is pointed at it unless the caller chose another.
_runner = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kerntune-runner")
if os.path.exists(_runner):
    os.environ.setdefault("KERNTUNE_RUNNER", _runner)

from . import _kerntune  # noqa: E402 (after the runner's path is set)
from ._kerntune import Context, Error  # noqa: E402

__all__ = ["Context", "Decision", "Device", "Error", "Op", "Unit", "run_kernel", "tune_kernel", "version"]

version = _kerntune.version


class Device(NamedTuple):
    """One of a context's devices: its index (Op's device), its backend, name and fingerprint."""

    index: int
    backend: str  # "c" (device 0, the host CPU), "opencl", "cuda"
    name: str
    fingerprint: str


def _devices(self):
    """devices() -> [Device]: the context's devices, by index (as `kerntune devices` lists them)."""
    return [Device(i, *d) for i, d in enumerate(self._devices())]


Context.devices = _devices


class Unit(NamedTuple):
    """One candidate configuration of a decision: how its tuning went."""

    config: str  # "NAME=VALUE,..." (a native candidate's name)
    outcome: str  # "measured", "invalid", "build_failed", ... (kt_outcome_name)
    time_ns: float  # its measured time, -1 when it was not measured
    runs: int  # how many runs measured it
    message: str  # why it failed, when it did
    candidate: str = ""  # the candidate (a variant group's name, or a native's)
    runtimes_ns: tuple = ()  # its measured runs, in order
    build_ms: float = 0.0  # building it (0: a native, or found built)
    validation_ms: float = 0.0  # validating it
    framework_ms: float = 0.0  # what measuring it cost beyond its runs


class Decision(NamedTuple):
    """The decision of one key: which unit won, every unit's outcome, and where it came from
    ("measured", "cache", "nearest key", ...)."""

    winner: Optional[Unit]
    units: "Units"  # every unit, in the space's order (a sequence of Unit)
    source: str = "measured"
    confidence: float = 1.0  # that the winner is the fastest, by the race (kt_decision_confidence)
    requested_confidence: float = -1.0  # what the race asked for (negative: nothing)
    below_confidence: bool = False  # the race stopped before it could tell its finalists apart
    reraced: bool = False  # made by re-racing a recorded decision's finalists


def _unit(t):
    if len(t) == 2:  # not run: (candidate, config)
        return Unit(t[1] or t[0], "not_run", -1.0, 0, "", t[0])
    cand, config, outcome, time_ns, runs, message, runtimes, build, validation, framework = t
    return Unit(config or cand, outcome, time_ns, runs, message, cand, tuple(runtimes), build, validation, framework)


class Units(Sequence):
    """A decision's units, in the order of its space: a sequence of Unit. A space of millions
    leaves most of them not run; their Units are made when they are looked at, so that a
    decision costs what was run, not the size of its space (ran() lists the others' indices)."""

    __slots__ = ("_raw",)

    def __init__(self, raw):
        self._raw = raw

    def __len__(self):
        return len(self._raw)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self._raw)))]
        t = self._raw[i]
        if not isinstance(t, Unit):
            t = _unit(t)
            self._raw[i] = t
        return t

    def ran(self):
        """The indices of the units that were run (any outcome but not_run), in order."""
        return [i for i, t in enumerate(self._raw) if (t.outcome != "not_run" if isinstance(t, Unit) else len(t) != 2)]

    def __eq__(self, other):
        return isinstance(other, (list, tuple, Units)) and len(self) == len(other) and all(a == b for a, b in zip(self, other))

    def __repr__(self):
        return "Units(%d, %d run)" % (len(self), len(self.ran()))


def _code_version(fn):
    """A version for a Python callable: a digest of its code, so that the persistent cache never
    serves a decision made with other code under the same name."""
    code = getattr(fn, "__code__", None) or getattr(getattr(fn, "__call__", None), "__code__", None)
    h = hashlib.sha256(getattr(fn, "__qualname__", type(fn).__qualname__).encode())
    if code is not None:
        h.update(code.co_code)
        h.update(repr(code.co_consts).encode())
        h.update(repr(code.co_names).encode())
    return "py:" + h.hexdigest()[:32]


class Op(_kerntune.Op):
    """Op(context, name, arguments, device=0, isolation='auto'): a tunable operation (kt_op).

    arguments: one declaration per argument, in order: (name, dtype) for a scalar, (name, dtype,
    access) for a buffer, access 'r', 'w' or 'rw'. isolation: where candidates run while tuning:
    'on', a runner process (a crash disqualifies the candidate and nothing else); 'auto', a runner
    for backends whose faults poison the device (CUDA); 'off', this process. Calling the op with its
    arguments tunes on a new key, then runs the winner."""

    def __init__(self, context, name, arguments, device=0, isolation="auto"):
        super().__init__(context, name, arguments, device, isolation)
        self.name = name
        self.context = context
        self.arguments = [tuple(a) for a in arguments]
        self.device = device

    def decision(self, *args):
        """decision(*args) -> Decision: the decision for the key of these arguments (without calling)."""
        index, units, source, confidence, requested, below, reraced = self._decision(*args)
        units = Units(units)
        return Decision(units[index] if index is not None else None, units, source, confidence, requested, below, reraced)

    def add_candidate(self, name, fn, queued=False, version=None):
        """add_candidate(name, fn, queued=False, version=None): a Python callable as a candidate.

        fn(*args) gets the op's arguments: buffers as numpy arrays over the op's host memory (valid
        during the call), or for an op on a device their device pointers as ints; scalars as
        numbers. With queued=True (an op on a CUDA or OpenCL device) it is fn(queue, *args): it
        enqueues its work on queue (a CUstream or cl_command_queue, as an int) and returns without
        waiting; kerntune times it by the device's events. It returns None (or 0) on success, a
        nonzero int or an exception on failure. version (default: a digest of fn's code) names the
        candidate's code in the persistent cache."""
        host = self.context.devices()[self.device].backend == "c"
        decls = self.arguments
        if host and not queued:

            def call(*raw):
                import numpy

                args = [
                    numpy.frombuffer(v, dtype=decls[i][1]) if len(decls[i]) == 3 else v for i, v in enumerate(raw)
                ]
                return fn(*args)

        else:
            call = fn
        self._add_candidate(name, call, queued, version or _code_version(fn))

    def set_verify(self, fn):
        """set_verify(fn): fn(expected, actual) -> bool decides whether a candidate's outputs are
        correct (in place of kerntune's comparison): each a list with one entry per argument,
        output buffers as numpy arrays (copies: the reference's outputs, and the candidate's),
        scalars as numbers, read-only buffers as None. It may return a str: the diagnostic of a
        wrong answer. An exception it raises disqualifies the candidate, and the call raises it."""
        import numpy

        decls = self.arguments

        def view(side):
            return [
                numpy.frombuffer(v, dtype=decls[i][1]).copy() if isinstance(v, memoryview) else v for i, v in enumerate(side)
            ]

        self._set_verify(None if fn is None else (lambda e, a: fn(view(e), view(a))))


Op._add_candidate = _kerntune.Op.add_candidate
Op._set_verify = _kerntune.Op.set_verify


def tune_kernel(*args, **kwargs):
    """Kernel Tuner's tune_kernel on kerntune's engine: see kerntune.kernel_tuner.tune_kernel."""
    from .kernel_tuner import tune_kernel as tk

    return tk(*args, **kwargs)


def run_kernel(*args, **kwargs):
    """Kernel Tuner's run_kernel: see kerntune.kernel_tuner.run_kernel."""
    from .kernel_tuner import run_kernel as rk

    return rk(*args, **kwargs)
