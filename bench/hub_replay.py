#!/usr/bin/env python3
"""hub_replay.py - every shared recording replayed whole, exhaustively.

For each problem of ../shared/benchmark_hub/kernels and each GPU it was recorded on, runs
`kerntune tune PROBLEM --simulate RECORDING --strategy exhaustive --measure recorded --json --t4`
over the whole recording and checks what tests/test-tune-replay.c checks on a hundred-odd
configurations of each (test_hub_replay_exact): the best is exactly the recording's fastest
correct configuration, with its recorded time; every recorded configuration was evaluated; and
the grid of every configuration in the T4 output is Kernel Tuner's (ProblemSize[d] over the
product of GridDiv d, rounded up; 1 in z), its block the problem's LocalSize. The whole
recordings are tens of thousands of configurations: a benchmark's work, not a test's.

Prints a line per recording and ends with RESULT lines; exits 1 when a check fails.

usage: bench/hub_replay.py [--kerntune PATH] [--hub DIR]
"""
import argparse
import glob
import gzip
import json
import math
import os
import subprocess
import sys
import tempfile
import time


def value(cfg, text):
    """A LocalSize or GridDiv entry: a parameter's name or a whole number."""
    text = str(text).strip()
    return cfg[text] if text in cfg else int(text)


def recorded_best(results):
    best = None
    for r in results:
        if r["invalidity"] != "correct":
            continue
        t = r["measurements"][0]["value"]
        if best is None or t < best[1]:
            best = (r["configuration"], t)
    return best


def check_grids(problem, t4):
    """The configurations whose grid or block is not Kernel Tuner's, and how many were checked."""
    spec = problem["KernelSpecification"]
    size = spec["ProblemSize"]
    size = [size] if isinstance(size, int) else list(size)
    size += [1] * (3 - len(size))
    divs = [spec.get("GridDivX", []), spec.get("GridDivY", []), spec.get("GridDivZ", [])]
    local = spec.get("LocalSize", {})
    wrong, checked = [], 0
    for r in t4["results"]:
        cfg, geo = r["configuration"], r.get("geometry")
        want = []
        for d in range(3):
            div = 1
            for name in divs[d]:
                div *= value(cfg, name)
            want.append(math.ceil(size[d] / div) if divs[d] else size[d])
        block = [value(cfg, local.get(axis, "1")) for axis in "XYZ"]
        if geo is None or geo["grid"] != want or geo["block"] != block:
            wrong.append((cfg, geo, want, block))
        checked += 1
    return wrong, checked


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kerntune", default=os.path.join(here, "..", "build", "kerntune"))
    ap.add_argument("--hub", default=os.path.join(here, "..", "..", "shared", "benchmark_hub"))
    args = ap.parse_args()
    recordings = matched = grids = bad_grids = configurations = 0
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kt-hub-replay-") as tmp:
        for path in sorted(glob.glob(os.path.join(args.hub, "kernels", "*.json"))):
            kernel = os.path.basename(path)[:-5]
            problem = json.load(open(path))
            for rec in sorted(glob.glob(os.path.join(args.hub, "results", kernel, "*_T4.json.gz"))):
                gpu = os.path.basename(rec).split("_")[0]
                results = json.load(gzip.open(rec))["results"]
                want = recorded_best(results)
                t4path = os.path.join(tmp, "%s_%s.json" % (kernel, gpu))
                cmd = [args.kerntune, "tune", path, "--simulate", rec, "--strategy", "exhaustive", "--measure", "recorded",
                       "--json", "--quiet", "--cache", "off", "--t4", t4path]
                t0 = time.monotonic()
                out = subprocess.run(cmd, capture_output=True, text=True)
                took = time.monotonic() - t0
                if out.returncode != 0:
                    sys.exit("failed (%d): %s\n%s" % (out.returncode, " ".join(cmd), out.stderr))
                doc = json.loads(out.stdout)
                best = doc["best"]
                ok = (best["configuration"] == want[0] and best["time_ms"] == want[1] and
                      doc["configurations"] == len(results))
                wrong, checked = check_grids(problem, json.load(open(t4path)))
                recordings += 1
                matched += ok
                configurations += len(results)
                grids += checked
                bad_grids += len(wrong)
                print("%-18s %-6s %6d configurations in %5.1f s: best %s (%s ms)%s; %d grids, %d not Kernel Tuner's" %
                      (kernel, gpu, len(results), took, "exact" if ok else "DIFFERS", best["time_ms"],
                       "" if ok else " against %s (%s ms)" % (json.dumps(want[0]), want[1]), checked, len(wrong)))
                for cfg, geo, g, b in wrong[:3]:
                    print("   %s: geometry %s, Kernel Tuner's grid %s, block %s" % (json.dumps(cfg), json.dumps(geo), g, b))
    print("RESULT hub_replay_exact %d of %d recordings" % (matched, recordings))
    print("RESULT hub_replay_configurations %d configurations" % configurations)
    print("RESULT hub_replay_grids_not_kernel_tuners %d of %d" % (bad_grids, grids))
    print("RESULT hub_replay_wall %.1f s" % (time.monotonic() - start))
    return 0 if recordings > 0 and matched == recordings and bad_grids == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
