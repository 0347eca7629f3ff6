#!/usr/bin/env python3
"""kt_pnpoly.py - Kernel Tuner's CUDA pnpoly.py (host code, lang="C", compiled by nvcc, timed by
itself) tuned by Kernel Tuner 1.5 and by kerntune.tune_kernel, side by side, on the GPU machine.

Each tool runs a copy of ../shared/kernel_tuner_examples/cuda/pnpoly.py in a fresh process, the
same copy for both but for the import line (kerntune's: `import kerntune as kernel_tuner`), with
two edits: the script's -arch=sm_52, which CUDA 13's nvcc no longer builds for, becomes the
oldest architecture this nvcc lists, and the tune_kernel call gets strategy="random_sample",
strategy_options={"time_limit": BUDGET} (the same budget of seconds for both; Kernel Tuner's
brute force has none). Then both picks are timed by one timer, Kernel Tuner's own (a tuning of a
space of the two picks alone: 7 runs of the host code's own timing each), --rounds times in
fresh processes; the median of the rounds' ratios is the ratio. Needs PyCUDA and kernel_tuner
(scripts/gpu-python carries them) and libcurand (LD_LIBRARY_PATH=/usr/local/cuda/lib64). Prints:

  RESULT pnpoly_<tool>_configs <n>         configurations timed in the budget
  RESULT pnpoly_<tool>_best_ms <t>         the tool's own account of its pick
  RESULT pnpoly_pick_ratio <r>             kerntune's pick over Kernel Tuner's, by Kernel Tuner's timer
                                           (<= 1: kerntune's is as fast)

Usage: python3 bench/kt_pnpoly.py [--budget 30] [--rounds 3]
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PARAMS = ("block_size_x", "tile_size", "between_method", "use_precomputed_slopes", "use_method")

# a space of the picks alone, timed by Kernel Tuner (the picks read from sys.argv[1])
RETIME = r"""
import json, sys
import pnpoly_script
picks = json.loads(sys.argv[1])
tune = pnpoly_script.kernel_tuner.tune_kernel
def only(params):
    return {k: params[k] for k in %r} in picks
def call(*a, **k):
    k.pop("strategy", None), k.pop("strategy_options", None)
    return tune(*a[:4], {p: sorted({c[p] for c in picks}) for p in %r}, *a[5:], restrictions=only, **k)
pnpoly_script.kernel_tuner.tune_kernel = call
import pycuda.driver as drv
drv.init()
ctx = drv.Device(0).make_context()
try:
    results, env = pnpoly_script.tune()
finally:
    ctx.pop()
print("RETIMED " + json.dumps([{**{p: r[p] for p in %r}, "time": r["time"]} for r in results if "time" in r]))
""" % (PARAMS, PARAMS, PARAMS)


def oldest_arch():
    out = subprocess.run(["nvcc", "--list-gpu-arch"], capture_output=True, text=True).stdout.split()
    archs = sorted(int(a.split("_")[1]) for a in out if a.startswith("compute_"))
    return "sm_%d" % archs[0] if archs else "sm_52"


def script(tool, budget, arch):
    src = (Path(os.environ.get("KT_EXAMPLES", REPO.parent / "shared" / "kernel_tuner_examples")) / "cuda" / "pnpoly.py").read_text()
    if tool == "kerntune":
        src = re.sub(r"(?m)^import kernel_tuner$", "import kerntune as kernel_tuner", src)
    src = src.replace('"-arch=sm_52"', '"-arch=%s"' % arch)
    src = src.replace("verbose=True, log=logging.DEBUG)",
                      "verbose=True, log=logging.DEBUG, strategy=\"random_sample\", strategy_options={\"time_limit\": %g})" % budget)
    assert "time_limit" in src and ("kerntune" in src) == (tool == "kerntune")
    return src


def folder(tool, budget, arch):
    d = Path(tempfile.mkdtemp(prefix="pnpoly-%s-" % tool))
    cuda = Path(os.environ.get("KT_EXAMPLES", REPO.parent / "shared" / "kernel_tuner_examples")) / "cuda"
    for f in ("pnpoly.cu", "pnpoly_host.cu"):
        shutil.copy(cuda / f, d / f)
    (d / "pnpoly_script.py").write_text(script(tool, budget, arch))
    return d


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--budget", type=float, default=30.0, help="seconds each tool tunes for (default 30)")
    ap.add_argument("--rounds", type=int, default=3, help="re-timings of the two picks (default 3)")
    a = ap.parse_args()
    arch = oldest_arch()
    env = dict(os.environ, KERNTUNE_CACHE="off", PYTHONUNBUFFERED="1")
    env.pop("KERNTUNE_BUDGET", None)
    picks = {}
    for tool in ("kernel_tuner", "kerntune"):
        d = folder(tool, a.budget, arch)
        p = subprocess.run([sys.executable, "pnpoly_script.py"], cwd=d, env=env, capture_output=True, text=True, timeout=a.budget * 4 + 120)
        if p.returncode != 0:
            sys.exit("%s failed:\n%s\n%s" % (tool, p.stdout[-2000:], p.stderr[-2000:]))
        results = json.load(open(d / "pnpoly.json"))[0]  # the script stores tune_kernel's (results, env)
        timed = [r for r in results if isinstance(r.get("time"), (int, float)) and r["time"] > 0]
        best = min(timed, key=lambda r: r["time"])
        picks[tool] = {k: best[k] for k in PARAMS}
        print("RESULT pnpoly_%s_configs %d" % (tool, len(timed)))
        print("RESULT pnpoly_%s_best_ms %.4f  (%s)" % (tool, best["time"], picks[tool]), flush=True)
    ratios = []
    d = folder("kernel_tuner", a.budget, arch)
    (d / "retime.py").write_text(RETIME)
    for r in range(a.rounds):
        p = subprocess.run([sys.executable, "retime.py", json.dumps(list(picks.values()))], cwd=d, env=env, capture_output=True,
                           text=True, timeout=600)
        line = [l for l in p.stdout.splitlines() if l.startswith("RETIMED ")]
        if p.returncode != 0 or not line:
            sys.exit("re-timing failed:\n%s\n%s" % (p.stdout[-2000:], p.stderr[-2000:]))
        times = {json.dumps({k: t[k] for k in PARAMS}, sort_keys=True): t["time"] for t in json.loads(line[0][8:])}
        got = {tool: times[json.dumps(c, sort_keys=True)] for tool, c in picks.items()}
        ratios.append(got["kerntune"] / got["kernel_tuner"])
        print("  round %d: kerntune's pick %.4f ms, Kernel Tuner's %.4f ms" % (r + 1, got["kerntune"], got["kernel_tuner"]), flush=True)
    print("RESULT pnpoly_pick_ratio %.4f  (median of %d rounds; arch %s, budget %g s)" % (statistics.median(ratios), len(ratios), arch, a.budget))


if __name__ == "__main__":
    main()
