#!/usr/bin/env python3
"""Triton's autotuned matmul on the shapes bench/gemm measures (bf16 in, fp32 accumulate, bf16 out,
row-major), timed the way bench/gemm times kerntune and cuBLAS: CUDA events around CALLS launches,
the median of ROUNDS rounds. The configurations are those of Triton's matmul tutorial for CUDA.

For each shape it prints one line, read by bench/gemm:
    TRITON M N K <TFLOP/s> <tuning wall seconds> <best config>
    TORCH  M N K <TFLOP/s>                 (torch.matmul: cuBLAS through PyTorch, for reference)
Usage: triton_gemm.py [--rounds R] M,N,K [M,N,K ...]
"""
import argparse
import statistics
import sys
import time

try:
    import torch
    import triton
    import triton.language as tl
except ImportError as e:  # bench/gemm reports Triton as absent
    print(f"NO-TRITON {e}")
    sys.exit(0)

# (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, stages, warps): the tutorial's CUDA list
TUTORIAL = [(128, 256, 64, 8, 3, 8), (64, 256, 32, 8, 4, 4), (128, 128, 32, 8, 4, 4), (128, 64, 32, 8, 4, 4),
            (64, 128, 32, 8, 4, 4), (128, 32, 32, 8, 4, 4), (64, 32, 32, 8, 5, 2), (32, 64, 32, 8, 5, 2)]


@triton.autotune(configs=[triton.Config({"BM": bm, "BN": bn, "BK": bk, "GM": gm}, num_stages=s, num_warps=w)
                          for bm, bn, bk, gm, s, w in TUTORIAL], key=["M", "N", "K"])
@triton.jit
def matmul_kernel(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GM: tl.constexpr):
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    per_group = GM * tiles_n
    first_m = (pid // per_group) * GM
    rows = min(tiles_m - first_m, GM)
    tm = first_m + (pid % per_group) % rows
    tn = (pid % per_group) // rows
    om = (tm * BM + tl.arange(0, BM)) % M
    on = (tn * BN + tl.arange(0, BN)) % N
    ok = tl.arange(0, BK)
    pa = a + om[:, None] * sam + ok[None, :] * sak
    pb = b + ok[:, None] * sbk + on[None, :] * sbn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, tl.cdiv(K, BK)):
        left = K - k0 * BK
        x = tl.load(pa, mask=ok[None, :] < left, other=0.0)
        y = tl.load(pb, mask=ok[:, None] < left, other=0.0)
        acc = tl.dot(x, y, acc)
        pa += BK * sak
        pb += BK * sbk
    cm = tm * BM + tl.arange(0, BM)
    cn = tn * BN + tl.arange(0, BN)
    tl.store(c + cm[:, None] * scm + cn[None, :] * scn, acc.to(tl.bfloat16), mask=(cm[:, None] < M) & (cn[None, :] < N))


def triton_mm(a, b, c):
    M, K = a.shape
    _, N = b.shape
    grid = lambda meta: (triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"]),)
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))


def timed(fn, calls, rounds):
    """Milliseconds per call: the median over rounds of CALLS launches between two events."""
    per = []
    for _ in range(rounds):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        stop.record()
        stop.synchronize()
        per.append(start.elapsed_time(stop) / calls)
    return statistics.median(per)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("shapes", nargs="+", help="M,N,K")
    opt = ap.parse_args()
    torch.manual_seed(0)
    for shape in opt.shapes:
        M, N, K = (int(x) for x in shape.split(","))
        a = torch.rand((M, K), device="cuda", dtype=torch.bfloat16) * 2 - 1
        b = torch.rand((K, N), device="cuda", dtype=torch.bfloat16) * 2 - 1
        c = torch.empty((M, N), device="cuda", dtype=torch.bfloat16)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        triton_mm(a, b, c)  # the first call of a new key: the autotuner benchmarks every config
        torch.cuda.synchronize()
        tune_s = time.perf_counter() - t0
        ref = a.float() @ b.float()
        err = ((c.float() - ref).abs() - (2e-2 * ref.abs() + 0.05)).max().item()
        if err > 0:
            print(f"TRITON-WRONG {M} {N} {K} off by {err}")
        flops = 2.0 * M * N * K
        one = timed(lambda: triton_mm(a, b, c), 1, 3)
        calls = max(3, min(200, int(2.0 / max(one, 1e-4))))  # about 2 ms per round
        ms = timed(lambda: triton_mm(a, b, c), calls, opt.rounds)
        cfg = matmul_kernel.best_config
        desc = "BM=%d,BN=%d,BK=%d,stages=%d,warps=%d" % (cfg.kwargs["BM"], cfg.kwargs["BN"], cfg.kwargs["BK"],
                                                        cfg.num_stages, cfg.num_warps)
        print(f"TRITON {M} {N} {K} {flops / ms / 1e9:.2f} {tune_s:.3f} {desc}", flush=True)
        ms_t = timed(lambda: torch.matmul(a, b, out=c), calls, opt.rounds)
        print(f"TORCH {M} {N} {K} {flops / ms_t / 1e9:.2f}", flush=True)
        del a, b, c, ref
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
