#!/usr/bin/env python3
"""replay.py - measurement policies side by side on recorded data (issue [5]).

For each shared problem of ../shared/benchmark_hub and each GPU it was recorded on, runs
`kerntune tune --simulate RESULTS --measure POLICY --seed S --json` for the race, triton and
kerneltuner policies over several seeds, and prints per problem and GPU the median over seeds
of the simulated measurement time, the runs, and chosen/true-best (the chosen configuration's
recorded mean over the recorded best mean). Ends with RESULT lines.

usage: bench/replay.py [--kerntune PATH] [--hub DIR] [--seeds 1,2,3,4,5]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

POLICIES = ["race", "triton", "kerneltuner"]


def run(kerntune, problem, results, policy, seed):
    cmd = [kerntune, "tune", problem, "--simulate", results, "--measure", policy, "--seed", str(seed), "--json", "--quiet"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("failed: %s\n%s" % (" ".join(cmd), out.stderr))
    j = json.loads(out.stdout.splitlines()[0])
    return {
        "time": j["simulated_run_time_s"],  # the runs alone (simulated_time_s adds building)
        "runs": j["runs"],
        "ratio": j["best"]["recorded_ms"] / j["recorded_best"]["time_ms"],
        "confidence": j["confidence"],
    }


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kerntune", default=os.path.join(here, "..", "build", "kerntune"))
    ap.add_argument("--hub", default=os.path.join(here, "..", "..", "shared", "benchmark_hub"))
    ap.add_argument("--seeds", default="1,2,3,4,5")
    a = ap.parse_args()
    seeds = [int(s) for s in a.seeds.split(",")]
    print("%-12s %-6s %-12s %12s %9s %13s %10s" % ("problem", "gpu", "policy", "sim time s", "runs", "chosen/best", "confidence"))
    results = []
    for problem in ["convolution_milo", "dedispersion_milo"]:
        t1 = os.path.join(a.hub, "kernels", problem + ".json")
        for gpu in ["A4000", "W6600"]:
            t4 = os.path.join(a.hub, "results", problem, gpu + "_T4.json.gz")
            med = {}
            for policy in POLICIES:
                rs = [run(a.kerntune, t1, t4, policy, s) for s in seeds]
                med[policy] = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
                m = med[policy]
                print("%-12s %-6s %-12s %12.2f %9d %13.4f %10.3f" % (problem[:12], gpu, policy, m["time"], m["runs"], m["ratio"], m["confidence"]))
            results.append((problem, gpu, med))
    print()
    for problem, gpu, med in results:
        name = "%s_%s" % (problem.split("_")[0], gpu)
        print("RESULT replay_%s_race_vs_triton_time %.2f x" % (name, med["triton"]["time"] / med["race"]["time"]))
        print("RESULT replay_%s_race_vs_kerneltuner_time %.2f x" % (name, med["kerneltuner"]["time"] / med["race"]["time"]))
        print("RESULT replay_%s_race_chosen_over_best %.4f ratio" % (name, med["race"]["ratio"]))
        print("RESULT replay_%s_triton_chosen_over_best %.4f ratio" % (name, med["triton"]["ratio"]))


if __name__ == "__main__":
    main()
