"""kerntune from Python: pick, by measurement, the fastest correct implementation of a kernel
for each problem shape and device, and remember the pick.

This package wraps kerntune's C library (the extension kerntune._kerntune). The objects are the
library's:

    ctx = kerntune.Context(cache="off")             # or a cache file's path; None: the default
    op = kerntune.Op(ctx, "scale", [("out", "float32", "w"), ("x", "float32", "r"), ("n", "int32")])
    op.add_variants("scale", {"UNROLL": "[1, 4]"}, source=C_SOURCE, kernel="scale")
    op(out, x, len(x))                              # tunes on a new key, then runs the winner
    print(op.decision(out, x, len(x)).winner)

Buffers are numpy arrays (anything with numpy's __array_interface__: contiguous, of the declared
dtype, writable where the op writes), bytearrays, or bytes for buffers the op only reads; on the
host CPU (device 0) they are passed without copies, and on another device (Op's device=, an
index of Context.devices()) each call copies them to the device and back. The interpreter's
lock is released while kerntune tunes and calls.
Errors raise kerntune.Error, whose `status` names kerntune's status ("KT_ERR_...").
"""

import os
from typing import List, NamedTuple, Optional

# Installed by pip, the package holds kerntune's worker process (isolated candidates run there):
# the library is pointed at it unless the caller chose another.
_worker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kerntune-worker")
if os.path.exists(_worker):
    os.environ.setdefault("KERNTUNE_WORKER", _worker)

from ._kerntune import Context, Error, Op  # noqa: E402 (after the worker's path is set)

__all__ = ["Context", "Decision", "Device", "Error", "Op", "Unit"]


class Device(NamedTuple):
    """One of a context's devices: its index (Op's device), its backend and its name."""

    index: int
    backend: str  # "c" (device 0, the host CPU), "opencl", "cuda"
    name: str


def _devices(self):
    """devices() -> [Device]: the context's devices, by index (as `kerntune devices` lists them)."""
    return [Device(i, backend, name) for i, (backend, name) in enumerate(self._devices())]


Context.devices = _devices


class Unit(NamedTuple):
    """One candidate configuration of a decision: how its tuning went."""

    config: str  # "NAME=VALUE,..." (a native candidate's name)
    outcome: str  # "measured", "invalid", "build_failed", ... (kt_outcome_name)
    time_ns: float  # its measured time, -1 when it was not measured
    runs: int  # how many runs measured it
    message: str  # why it failed, when it did


class Decision(NamedTuple):
    """The decision of one key: which unit won, and every unit's outcome."""

    winner: Optional[Unit]
    units: List[Unit]


def _decision(self, *args):
    """decision(*args) -> Decision: the decision for the key of these arguments (without calling)."""
    index, units = self._decision(*args)
    units = [Unit(*u) for u in units]
    return Decision(units[index] if index is not None else None, units)


Op.decision = _decision
