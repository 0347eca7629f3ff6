"""kerntune from Python on a CUDA device (scripts/gpu-python runs it; skipped without one): CUDA
variants called on CuPy arrays and torch tensors without copies (__cuda_array_interface__,
DLPack), numpy arrays staged to the device, Python candidates enqueuing their work on the stream
kerntune gives them, call_async on torch's current stream, and the in-place contract on device
memory. Candidates differ by design (40 times the work), never by luck."""

import os

import numpy as np
import pytest

import kerntune

SCALE_CU = r"""
extern "C" __global__ void scale(float *out, const float *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = 0.0f;
    for (int r = 0; r < REPS; r++) v += x[i];
    out[i] = 2.0f * v / (float)REPS;
}
"""

N = 1 << 20


@pytest.fixture
def ctx(tmp_path):
    c = kerntune.Context(cache="off", artifact_dir=str(tmp_path / "artifacts"))
    if not [d for d in c.devices() if d.backend == "cuda"]:
        pytest.skip("no CUDA device")
    return c


def cuda_op(ctx, name="scale-cu", access="w"):
    dev = [d for d in ctx.devices() if d.backend == "cuda"][0]
    op = kerntune.Op(ctx, name, [("out", "float32", access), ("x", "float32", "r"), ("n", "int32")], device=dev.index)
    op.add_variants("scale", {"REPS": [40, 1], "BS": [128, 256]}, SCALE_CU, "scale", inputs=["n"],
                    grid=["(n + BS - 1) // BS"], block=["BS"])
    return op


def test_cupy_arrays_without_copies(ctx):
    cp = pytest.importorskip("cupy")
    op = cuda_op(ctx)
    x = (cp.arange(N, dtype=cp.float32) % 7) - 3
    out = cp.zeros(N, dtype=cp.float32)
    op(out, x, N)
    assert cp.array_equal(out, 2 * x)
    d = op.decision(out, x, N)
    assert d.winner.config.startswith("REPS=1,")
    assert sorted(u.outcome for u in d.units) == ["measured"] * 4


def test_torch_tensors_and_dlpack(ctx):
    torch = pytest.importorskip("torch")
    op = cuda_op(ctx, "scale-torch")
    x = torch.arange(N, device="cuda", dtype=torch.float32) % 5
    out = torch.zeros(N, device="cuda", dtype=torch.float32)
    op(out, x, N)  # __cuda_array_interface__
    torch.cuda.synchronize()
    assert torch.equal(out, 2 * x)

    class OnlyDLPack:
        def __init__(self, t):
            self.t = t

        def __dlpack__(self, *a, **k):
            return self.t.__dlpack__(*a, **k)

    out.zero_()
    op(OnlyDLPack(out), OnlyDLPack(x), N)  # the same key: a hit, on DLPack's pointers
    torch.cuda.synchronize()
    assert torch.equal(out, 2 * x)
    with pytest.raises(TypeError, match="CUDA device memory, but the op's device is not a CUDA device"):
        host = kerntune.Op(ctx, "host-op", [("out", "float32", "w"), ("x", "float32", "r"), ("n", "int32")])
        host(out, x, N)


def test_numpy_arrays_staged(ctx):
    op = cuda_op(ctx, "scale-staged")
    x = (np.arange(N, dtype=np.float32) % 7) - 3
    out = np.zeros(N, dtype=np.float32)
    op(out, x, N)  # copied to the device and back
    assert np.array_equal(out, 2 * x)


def test_python_candidates_on_a_stream(ctx):
    torch = pytest.importorskip("torch")
    dev = [d for d in ctx.devices() if d.backend == "cuda"][0]
    op = kerntune.Op(ctx, "py-queued", [("out", "float32", "w"), ("x", "float32", "r")], device=dev.index)
    x = torch.arange(N, device="cuda", dtype=torch.float32)
    out = torch.zeros(N, device="cuda", dtype=torch.float32)
    streams = []

    class At:  # float32 device memory at an address kerntune gives
        def __init__(self, ptr):
            self.__cuda_array_interface__ = {"data": (ptr, False), "shape": (N,), "typestr": "<f4", "version": 3}

    def run(reps):
        def candidate(queue, out_ptr, x_ptr):
            streams.append(queue)
            o, i = torch.as_tensor(At(out_ptr), device="cuda"), torch.as_tensor(At(x_ptr), device="cuda")
            with torch.cuda.stream(torch.cuda.ExternalStream(queue)):
                for _ in range(reps):
                    torch.mul(i, 2, out=tmp)
                o.copy_(tmp)

        return candidate

    tmp = torch.empty_like(x)
    op.add_candidate("slow", run(40), queued=True)
    op.add_candidate("fast", run(1), queued=True)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        op.call_async(stream.cuda_stream, out, x)
    stream.synchronize()
    assert torch.equal(out, 2 * x)
    d = op.decision(out, x)
    assert d.winner.candidate == "fast"
    assert streams[-1] == stream.cuda_stream  # the winner's launch went on the caller's stream
    assert len(set(streams)) >= 2  # the tuning ran on kerntune's own


def test_in_place_on_the_device(ctx):
    torch = pytest.importorskip("torch")
    inc = r"""extern "C" __global__ void inc(float *x, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        for (int r = 0; r < REPS; r++) if (i < n && r == REPS - 1) x[i] += 1.0f; }"""
    dev = [d for d in ctx.devices() if d.backend == "cuda"][0]
    op = kerntune.Op(ctx, "inc", [("x", "float32", "rw"), ("n", "int32")], device=dev.index)
    op.add_variants("inc", {"REPS": [30, 1]}, inc, "inc", inputs=["n"], grid=["(n + 255) // 256"], block=["256"])
    x = torch.arange(N, device="cuda", dtype=torch.float32)
    op(x, N)  # tuning ran both many times over: none of it shows
    torch.cuda.synchronize()
    assert torch.equal(x, torch.arange(N, device="cuda", dtype=torch.float32) + 1)


def test_device_checks_built_ahead(tmp_path):
    # a context whose artifact directory lacks the CUDA backend's device checks begins building
    # them there when it starts, before any op exists: the first validation then loads them
    import glob
    import time

    c = kerntune.Context(cache="off", artifact_dir=str(tmp_path / "artifacts"))
    if not [d for d in c.devices() if d.backend == "cuda"]:
        pytest.skip("no CUDA device")
    deadline = time.monotonic() + 60
    while not glob.glob(str(tmp_path / "artifacts" / "cuda-checks-*.cubin")) and time.monotonic() < deadline:
        time.sleep(0.01)
    kept = glob.glob(str(tmp_path / "artifacts" / "cuda-checks-*.cubin"))
    assert len(kept) == 1 and not glob.glob(str(tmp_path / "artifacts" / "kerntune-check-*"))  # built, renamed into place
    # a second context on the same directory builds nothing: the file is the first one's
    before = os.stat(kept[0]).st_mtime_ns
    c2 = kerntune.Context(cache="off", artifact_dir=str(tmp_path / "artifacts"))
    c2.devices()
    time.sleep(0.5)
    assert os.stat(kept[0]).st_mtime_ns == before
    op = cuda_op(c2, "checks-ahead")
    x = np.arange(1024, dtype=np.float32)
    out = np.zeros(1024, dtype=np.float32)
    op(out, x, 1024)
    assert np.array_equal(out, 2 * x)


# CUDA host code under Kernel Tuner's C contract (lang="C"): compiled by nvcc, the buffers mapped
# for the device around each call; the function returns its run's time in ms, a negative one for
# a failed run (test_tune_kernel.HOST_CU)
def test_cuda_host_code_under_the_c_contract(ctx, tmp_path, monkeypatch):  # ctx: skipped without a CUDA device
    import shutil

    nvcc = os.environ.get("KERNTUNE_NVCC") or shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not os.path.exists(nvcc) and not shutil.which(nvcc):
        pytest.skip("no nvcc")
    monkeypatch.setenv("KERNTUNE_NVCC", nvcc)
    monkeypatch.setenv("KERNTUNE_ARTIFACTS", str(tmp_path / "artifacts"))
    n = 4096
    x = np.arange(n, dtype=np.float32)
    out = np.zeros(n, dtype=np.float32)
    import sys

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from test_tune_kernel import HOST_CU

    results, env = kerntune.tune_kernel("run_twice", HOST_CU, n, [out, x, np.int32(n)], {"BAD": [0, 1]}, lang="C",
                                        answer=[2 * x, None, None], quiet=True)
    by = {r["BAD"]: r for r in results}
    assert by[0]["time"] == 0.25 and env["best_config"]["BAD"] == 0  # the time it returned, exactly
    assert "negative time is a failed run" in by[1]["__error__"].message, by[1]["__error__"].message
