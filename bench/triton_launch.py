#!/usr/bin/env python3
"""triton_launch.py - host time per call of Triton's autotuned kernel, for bench/launch.c's table
(issue [10]). The same work as bench/launch's kernel: v += s over 4096 float32 elements, the block
size a tuning parameter (128 or 256, as kerntune's B). --calls back-to-back calls on one stream
with one synchronisation at the end, the median over --rounds, for (a) the @triton.autotune'd
kernel (its cache hit: the autotuner's key lookup, then the launch) and (b) the same kernel with
its block size fixed (Triton's launch alone). Needs a GPU, PyTorch and Triton. Prints RESULT lines.

Usage: triton_launch.py [--calls N] [--rounds R]
"""
import argparse
import statistics
import time

import torch
import triton
import triton.language as tl

ELEMS = 4096


@triton.autotune(configs=[triton.Config({"B": 128}), triton.Config({"B": 256})], key=["n"])
@triton.jit
def add_tuned(v, s, n, B: tl.constexpr):
    i = tl.program_id(0) * B + tl.arange(0, B)
    m = i < n
    tl.store(v + i, tl.load(v + i, mask=m) + s, mask=m)


@triton.jit
def add_fixed(v, s, n, B: tl.constexpr):
    i = tl.program_id(0) * B + tl.arange(0, B)
    m = i < n
    tl.store(v + i, tl.load(v + i, mask=m) + s, mask=m)


def per_call_us(fn, calls):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e6 / calls


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=11)
    a = ap.parse_args()
    v = torch.zeros(ELEMS, device="cuda", dtype=torch.float32)
    s, n = 1.0, ELEMS
    tuned = lambda: add_tuned[lambda meta: (triton.cdiv(n, meta["B"]),)](v, s, n)
    tuned()  # tunes (the autotuner's first call), then every later call is a cache hit
    best = add_tuned.best_config.kwargs["B"]
    fixed = lambda: add_fixed[(triton.cdiv(n, best),)](v, s, n, B=best)
    fixed()
    t = {"tuned": [], "fixed": []}
    for r in range(a.rounds):
        order = ("tuned", "fixed") if r % 2 == 0 else ("fixed", "tuned")
        for m in order:
            t[m].append(per_call_us(tuned if m == "tuned" else fixed, a.calls))
    med = {m: statistics.median(x) for m, x in t.items()}
    print(f"{a.calls} back-to-back calls of a {ELEMS}-element kernel (B={best}, the autotuner's pick), "
          f"one synchronisation; median of {a.rounds} rounds; triton {triton.__version__}, torch {torch.__version__}")
    print(f"RESULT triton_autotuned_us {med['tuned']:.3f} us")
    print(f"RESULT triton_fixed_us {med['fixed']:.3f} us")
    print(f"RESULT triton_autotuner_over_fixed_us {med['tuned'] - med['fixed']:.3f} us")


if __name__ == "__main__":
    main()
