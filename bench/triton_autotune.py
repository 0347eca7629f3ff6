#!/usr/bin/env python3
"""kerntune.triton.autotune beside triton.autotune on the same kernels and configs
(python/tests/triton_kernels.py: the matmul and layer-norm tutorials' shapes), on a GPU.

For each kernel and each autotuner, a fresh process (so neither finds the other's compiled
kernels in memory) makes the first call of a key and reports how long it took, three times:
with an empty Triton cache and an empty kerntune artifact directory ("cold": compiling every
config, and kerntune its device checks), with the Triton cache the cold run filled
("warm": kernels loaded from disk), and with every config compiled in the process beforehand by
an untimed Triton autotuner ("compiled": the benchmarking alone, what tuning itself costs), and,
after a process that recorded its decision (Triton's autotuner with cache_results=True, kerntune's
in a persistent cache file), in a process that finds it ("recorded": each compiles, or loads from
the warm Triton cache, the recorded winner alone). Both
picks are then timed here by one timer, triton.testing.do_bench, alternately; and the host time
per call of a tuned key is measured on a small in-place kernel (add_one, 4096 elements:
launch-bound), both autotuners in one process, timed alternately. The other phases' processes run
with KERNTUNE_CACHE=off, so kerntune measures each time. Each child's line (printed as it ends) says
where kerntune's time went: compile_s (the compile before the race: forked processes, then the
threads that load each kernel), process_compile_s (the processes' part), runs, kernel_ms (runs x times),
validation_ms, framework_ms.

Prints a table, then RESULT lines:
  triton_tune_speedup_<kernel>_<cold|warm|compiled|recorded>   triton.autotune's first call over kerntune's
  triton_pick_ratio_<kernel>                 kerntune's pick over Triton's, by do_bench (<= 1.01 is the target;
                                             1 when both picked the same config)
  triton_hit_us_<tuner>                      host time per call of a tuned key
  triton_hit_ratio                           kerntune's over Triton's
  triton_inplace_<tuner>                     1 when the in-place kernel's first call left x + 1 exactly

Usage: python3 bench/triton_autotune.py [--kernels matmul,layer_norm] [--quick]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python", "tests"))

# cold: an empty Triton cache (compiling every config); warm: the cache the cold run filled (on-disk
# kernels loaded); compiled: every config compiled in the process by an untimed Triton autotuner
# before the timed first call (the benchmarking alone: what tuning itself costs)
# recorded: a process after one that recorded its decision (Triton's cache_results, kerntune's cache file)
PHASES = ("cold", "warm", "compiled", "recorded")
SHAPES = {"matmul": (4096, 4096, 4096), "layer_norm": (4096, 8192)}


def child(tuner, kernel, quick, mode):
    if kernel == "hit":
        return hit_child()
    import torch
    import triton

    import triton_kernels as K

    if tuner == "triton":
        ks = K.make(triton.autotune, **({"cache_results": True} if mode in ("record", "recorded") else {}))
    else:
        import kerntune.triton as ktt

        ks = K.make(ktt.autotune)
    torch.manual_seed(1)
    out = {}
    if kernel == "matmul":
        M, N, Kd = (1024, 1024, 1024) if quick else SHAPES["matmul"]
        a = torch.randn(M, Kd, device="cuda", dtype=torch.float16)
        b = torch.randn(Kd, N, device="cuda", dtype=torch.float16)
        c = torch.empty(M, N, device="cuda", dtype=torch.float16)
        run = lambda: K.matmul(ks["matmul"], a, b, c)  # noqa: E731
        compile_all = lambda t: K.matmul(t["matmul"], a, b, c)  # noqa: E731
        check = lambda: float((c.float() - a.float() @ b.float()).abs().max())  # noqa: E731
    elif kernel == "layer_norm":
        rows, cols = (1024, 4096) if quick else SHAPES["layer_norm"]
        x = torch.randn(rows, cols, device="cuda", dtype=torch.float16)
        w = torch.rand(cols, device="cuda", dtype=torch.float16)
        bb = torch.rand(cols, device="cuda", dtype=torch.float16)
        y = torch.empty_like(x)
        run = lambda: K.layer_norm(ks["layer_norm"], x, w, bb, y)  # noqa: E731
        compile_all = lambda t: K.layer_norm(t["layer_norm"], x, w, bb, y)  # noqa: E731
        ref = torch.nn.functional.layer_norm(x.float(), (cols,), w.float(), bb.float(), 1e-5)
        check = lambda: float((y.float() - ref).abs().max())  # noqa: E731
    if mode == "compiled":  # every config compiled in this process first, by an untimed Triton autotuner
        compile_all(K.make(triton.autotune))
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    run()
    torch.cuda.synchronize()
    out["tune_s"] = time.perf_counter() - t0
    out["max_error"] = check()
    best = ks[kernel].best_config
    out["config"] = {"kwargs": best.kwargs, "num_warps": best.num_warps, "num_stages": best.num_stages}
    out["bench_s"] = getattr(ks[kernel], "bench_time", 0.0)  # each autotuner's own account of its benchmarking
    if tuner == "kerntune":  # where kerntune's time went
        d = ks[kernel].decision
        out["compile_s"] = ks[kernel].compile_time
        out["process_compile_s"] = ks[kernel].process_compile_time
        out["runs"] = sum(u.runs for u in d.units)
        out["kernel_ms"] = sum(u.runs * u.time_ns for u in d.units if u.time_ns > 0) / 1e6
        out["validation_ms"] = sum(u.validation_ms for u in d.units)
        out["framework_ms"] = sum(u.framework_ms for u in d.units)
        out["build_ms"] = sum(u.build_ms for u in d.units)
        worst = max(d.units, key=lambda u: u.framework_ms)  # an outlier's config (a first launch that compiled?)
        out["framework_worst"] = [worst.candidate, round(worst.framework_ms, 1)]
        out["outcomes"] = sorted(set(u.outcome for u in d.units))
        out["source"] = d.source
    print(json.dumps(out))


def hit_child():
    """The host time per call of a tuned key, both autotuners in this process, timed alternately;
    and the in-place contract on each one's first call."""
    import statistics

    import torch
    import triton

    import kerntune.triton as ktt
    import triton_kernels as K

    tuned = {"triton": K.make(triton.autotune)["add_one"], "kerntune": K.make(ktt.autotune)["add_one"]}
    out = {}
    for name, kernel in tuned.items():
        x = torch.zeros(4096, device="cuda")
        K.add_one(kernel, x)
        torch.cuda.synchronize()
        out["inplace_exact_" + name] = bool(torch.equal(x, torch.ones_like(x)))
        out["inplace_value_" + name] = float(x[0])
        for _ in range(200):
            K.add_one(kernel, x)
    torch.cuda.synchronize()
    times = {name: [] for name in tuned}
    n = 2000
    for _ in range(7):
        for name, kernel in tuned.items():
            t0 = time.perf_counter()
            for _ in range(n):
                K.add_one(kernel, x)
            times[name].append((time.perf_counter() - t0) / n * 1e6)
            torch.cuda.synchronize()
    for name in tuned:
        out["hit_us_" + name] = statistics.median(times[name])
    print(json.dumps(out))


def run_child(tuner, kernel, cache_dir, quick, mode="warm"):
    env = dict(os.environ, TRITON_CACHE_DIR=cache_dir, KERNTUNE_CACHE="off", PYTHONUNBUFFERED="1")
    if mode in ("record", "recorded"):  # kerntune's decision kept beside Triton's cache, as Triton's is in it
        env["KERNTUNE_CACHE"] = os.path.join(cache_dir, "kerntune-decisions.sqlite")
    if mode == "cold":  # kerntune's artifacts empty too (its device checks' build among them), as Triton's cache is
        env["KERNTUNE_ARTIFACTS"] = tempfile.mkdtemp(prefix="kerntune-artifacts-")
    args = [sys.executable, os.path.abspath(__file__), "--child", tuner, kernel, "--mode", mode] + (["--quick"] if quick else [])
    p = subprocess.run(args, env=env, capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        raise RuntimeError("%s %s failed:\n%s\n%s" % (tuner, kernel, p.stdout[-3000:], p.stderr[-3000:]))
    return json.loads(p.stdout.strip().splitlines()[-1])


def time_picks(kernel, configs, quick):
    """Each pick timed by do_bench, alternately, three rounds; medians in ms."""
    import statistics

    import torch
    import triton

    import triton_kernels as K

    torch.manual_seed(1)
    if kernel == "matmul":
        M, N, Kd = (1024, 1024, 1024) if quick else SHAPES["matmul"]
        a = torch.randn(M, Kd, device="cuda", dtype=torch.float16)
        b = torch.randn(Kd, N, device="cuda", dtype=torch.float16)
        c = torch.empty(M, N, device="cuda", dtype=torch.float16)

        def call(cfg):
            grid = (triton.cdiv(M, cfg["kwargs"]["BLOCK_M"]) * triton.cdiv(N, cfg["kwargs"]["BLOCK_N"]),)
            K._matmul[grid](a, b, c, M, N, Kd, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                            num_warps=cfg["num_warps"], num_stages=cfg["num_stages"], **cfg["kwargs"])
    else:
        rows, cols = (1024, 4096) if quick else SHAPES["layer_norm"]
        x = torch.randn(rows, cols, device="cuda", dtype=torch.float16)
        w = torch.rand(cols, device="cuda", dtype=torch.float16)
        bb = torch.rand(cols, device="cuda", dtype=torch.float16)
        y = torch.empty_like(x)

        def call(cfg):
            K._layer_norm[(rows,)](x, y, w, bb, x.stride(0), cols, 1e-5, num_warps=cfg["num_warps"], num_stages=cfg["num_stages"],
                                   **cfg["kwargs"])

    times = {name: [] for name in configs}
    for _ in range(3):
        for name, cfg in configs.items():
            times[name].append(triton.testing.do_bench(lambda: call(cfg)))
    return {name: statistics.median(t) for name, t in times.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernels", default="matmul,layer_norm")
    ap.add_argument("--quick", action="store_true", help="smaller shapes")
    ap.add_argument("--child", nargs=2, metavar=("TUNER", "KERNEL"), help=argparse.SUPPRESS)
    ap.add_argument("--mode", default="warm", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child(a.child[0], a.child[1], a.quick, a.mode)
    rows = []
    for kernel in a.kernels.split(","):
        res = {}
        for tuner in ("triton", "kerntune"):
            d = tempfile.mkdtemp(prefix="triton-cache-")
            for phase in PHASES:
                if phase == "recorded":  # the decision recorded first, by a tuning process
                    run_child(tuner, kernel, d, a.quick, "record")
                res[tuner, phase] = run_child(tuner, kernel, d, a.quick, phase)
                print("  %s %s %s: %s" % (kernel, tuner, phase, json.dumps(res[tuner, phase])), flush=True)
        picks = time_picks(kernel, {t: res[t, "warm"]["config"] for t in ("triton", "kerntune")}, a.quick)
        for phase in PHASES:
            ratio = res["triton", phase]["tune_s"] / res["kerntune", phase]["tune_s"]
            rows.append((kernel, phase, res["triton", phase]["tune_s"], res["kerntune", phase]["tune_s"], ratio))
            print("RESULT triton_tune_speedup_%s_%s %.2f x" % (kernel, phase, ratio))
        same = res["triton", "warm"]["config"] == res["kerntune", "warm"]["config"]
        # one config picked by both: its two timings differ by do_bench's noise alone, so the
        # ratio of the picks is 1 (the timings are printed below all the same)
        ratio = 1.0 if same else picks["kerntune"] / picks["triton"]
        print("RESULT triton_pick_ratio_%s %.4f%s" % (kernel, ratio, " (the same config)" if same else ""))
        print("picks %s: triton %s %.4f ms, kerntune %s %.4f ms" % (kernel, res["triton", "warm"]["config"], picks["triton"],
                                                               res["kerntune", "warm"]["config"], picks["kerntune"]))
        for t in ("triton", "kerntune"):
            print("  %s %s max error %.4g" % (kernel, t, res[t, "warm"]["max_error"]))
    hits = run_child("both", "hit", tempfile.mkdtemp(prefix="triton-cache-"), a.quick)
    print("%-10s %-5s %12s %12s %8s" % ("kernel", "cache", "triton s", "kerntune s", "speedup"))
    for r in rows:
        print("%-10s %-5s %12.3f %12.3f %8.2f" % r)
    for t in ("triton", "kerntune"):
        print("RESULT triton_hit_us_%s %.2f us" % (t, hits["hit_us_" + t]))
        print("RESULT triton_inplace_%s %d (x after the first call: %g, expected 1)" % (t, hits["inplace_exact_" + t],
                                                                                       hits["inplace_value_" + t]))
    print("RESULT triton_hit_ratio %.3f (kerntune's hit over Triton's, timed alternately in one process)"
          % (hits["hit_us_kerntune"] / hits["hit_us_triton"]))


if __name__ == "__main__":
    main()
