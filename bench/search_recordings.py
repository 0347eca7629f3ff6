#!/usr/bin/env python3
"""search_recordings.py - kerntune's search, seed by seed, on every exhaustive recording there is
(issue [18] item 3), through the real engine: `kerntune tune PROBLEM --simulate RECORDING
--strategy S --budget B --seed N --json` per seed, and chosen / best (the chosen configuration's
recorded mean over the recording's best mean).

The recordings: benchmark_hub's convolution and dedispersion on the A4000 and the W6600, the
convolution on the H200 (bench/data), Kernel Tuner's CUDA example problems (examples/kernel_tuner/cuda:
matmul, reduction, pnpoly) recorded exhaustively on the H200 by kerntune (bench/data/ktex_cuda_*),
and two of its OpenCL ones recorded by Kernel Tuner on PoCL (bench/data/ktex_opencl_*). A strategy
developed on some of them is checked on the others: no setting may be fitted to one.

Prints one row per recording and strategy (median, worst, seeds over 1.10, each seed in order),
then RESULT lines: search_recordings_<strategy>_median_worst_set and _worst_seed.

usage: bench/search_recordings.py [--kerntune PATH] [--hub DIR] [--strategies auto,...] [--seeds N]
                                  [--budget 5%] [--sets NAME,...]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def sets(hub):
    data = os.path.join(HERE, "data")
    cuda = os.path.join(ROOT, "examples", "kernel_tuner", "cuda")
    cl = os.path.join(ROOT, "examples", "kernel_tuner", "opencl")
    out = []
    for kernel in ("convolution", "dedispersion"):
        for gpu in ("A4000", "W6600"):
            out.append(("%s-%s" % (kernel, gpu), os.path.join(hub, "kernels", "%s_milo.json" % kernel),
                        os.path.join(hub, "results", "%s_milo" % kernel, "%s_T4.json.gz" % gpu), []))
    out.append(("convolution-H200", os.path.join(hub, "kernels", "convolution_milo.json"),
                os.path.join(data, "convolution_milo_H200_T4.json.gz"), []))
    for name in ("matmul", "reduction", "pnpoly"):
        out.append(("ktex-%s-H200" % name, os.path.join(cuda, "%s.json" % name),
                    os.path.join(data, "ktex_cuda_%s_H200_T4.json.gz" % name), []))
    out.append(("ktex-cl-convolution-PoCL", os.path.join(cl, "convolution.json"),
                os.path.join(data, "ktex_opencl_convolution_1024_PoCL_cache.json.gz"),
                ["--problem-size", "1024,1024", "--define", "block_size_x=16,32,64,128"]))
    out.append(("ktex-cl-reduction-PoCL", os.path.join(cl, "reduction.json"),
                os.path.join(data, "ktex_opencl_reduction_PoCL_cache.json.gz"), ["--define", "loop_unroll_factor=1,8,16,32"]))
    return out


def replay(kerntune, problem, recording, extra, strategy, budget, seed):
    cmd = [kerntune, "tune", problem, "--simulate", recording, "--strategy", strategy, "--budget", budget, "--seed", str(seed),
           "--json", "--quiet"] + extra
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("search_recordings: failed: %s\n%s" % (" ".join(cmd), p.stderr[-2000:]))
    j = json.loads(p.stdout.splitlines()[0])
    return j["best"]["recorded_ms"] / j["recorded_best"]["time_ms"], j["configurations"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kerntune", default=os.path.join(ROOT, "build", "kerntune"))
    ap.add_argument("--hub", default=os.path.join(ROOT, "..", "shared", "benchmark_hub"))
    ap.add_argument("--strategies", default="auto")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--budget", default="5%")
    ap.add_argument("--sets", default="", help="names of the recordings to replay (default: all)")
    a = ap.parse_args()
    wanted = [s for s in a.sets.split(",") if s]
    worst_median, worst_seed = {}, {}
    print("%-26s %-8s %7s %7s %5s  seeds 1..%d" % ("recording", "strategy", "median", "worst", ">1.10", a.seeds))
    for name, problem, recording, extra in sets(a.hub):
        if wanted and name not in wanted:
            continue
        if not os.path.exists(recording):
            print("%-26s (no recording at %s)" % (name, recording))
            continue
        for strategy in a.strategies.split(","):
            ratios = [replay(a.kerntune, problem, recording, extra, strategy, a.budget, s)[0] for s in range(1, a.seeds + 1)]
            med, worst = statistics.median(ratios), max(ratios)
            print("%-26s %-8s %7.4f %7.4f %5d  %s" % (name, strategy, med, worst, sum(r > 1.10 for r in ratios),
                                                    " ".join("%.3f" % r for r in ratios)), flush=True)
            worst_median[strategy] = max(worst_median.get(strategy, 0), med)
            worst_seed[strategy] = max(worst_seed.get(strategy, 0), worst)
    for strategy in worst_median:
        print("RESULT search_recordings_%s_median_worst_set %.4f (the target: at most 1.03)" % (strategy, worst_median[strategy]))
        print("RESULT search_recordings_%s_worst_seed %.4f (the target: at most 1.10)" % (strategy, worst_seed[strategy]))


if __name__ == "__main__":
    main()
