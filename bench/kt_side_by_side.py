#!/usr/bin/env python3
"""kt_side_by_side.py - kerntune and Kernel Tuner tuning the same kernels, side by side.

For each conformance problem (examples/kernel_tuner/<lang>/*.json: Kernel Tuner 1.5's own example
kernels, read unedited from ../shared/kernel_tuner_examples) both tools get the same budget of
seconds on the same device, the same problem size and the same space:

  * Kernel Tuner (PyPI kernel_tuner 1.5.0, in a virtual environment this script is run with:
    pyopencl on PoCL here, CuPy on the GPU machine) through `tune_kernel`, with the problem's
    parameters, Conditions as restrictions, GridDiv as grid_div_x/y and the budget as
    strategy_options time_limit. (Its `tune_kernel_T1` always passes cmem_args, which its OpenCL
    backend refuses even when empty, so the T1 entry point is not used.)
  * kerntune through `kerntune tune PROBLEM --budget Ns`, same problem size and --define values.

Kernel Tuner runs on pyopencl (OpenCL) or CuPy (lang "CuPy": its CUDA backend through CuPy).

Then both picks are re-timed by one timer: Kernel Tuner's own benchmark of a space of the two
picks (its default 7 iterations each), --rounds times; the median of the rounds' ratios is the
ratio. Both picks are timed in one call each round because on a shared VM a process's (an OpenCL
context's) speed differs from the next one's by up to 40% (PoCL here: one configuration 2.7 to
4.8 ms in eight processes), for every configuration alike. With --kerntune-timer, also by
kerntune's (one `kerntune tune` process a round, on a copy of the problem restricted to the two
picks), which flushes the cache before each run:
the two tools measure different things, warm or cold; --kerntune-flush off has kerntune tune on
a warm cache, the objective Kernel Tuner's timer measures). Printed per problem:

  RESULT <problem> pick_ratio <kerntune pick time / Kernel Tuner pick time>   (<= 1: kerntune's is as fast)
  RESULT <problem> kt_configs_per_min <n>   kerntune_configs_per_min <n>   (configurations evaluated:
         built and run, or failed trying; kerntune's rejected ones, over a device limit, not counted)

With --via python, kerntune is driven through kerntune.tune_kernel with exactly the arguments
Kernel Tuner gets (the drop-in: a script's call, its import changed); each tool tunes in a
process of its own with an empty PoCL kernel cache of its own (PoCL compiles each work-group
size's kernel at its first launch and caches it, so in one process the second tool found the
first's work done).

Usage (from the repository root, after `make build`):
  python3 -m venv build/sbs-venv && build/sbs-venv/bin/pip install kernel_tuner==1.5.0 numpy pyopencl
  build/sbs-venv/bin/python bench/kt_side_by_side.py --lang opencl --budget 60 [--problems stencil,matmul]
On the GPU machine: --lang cuda (Kernel Tuner's CuPy backend, kerntune's CUDA backend).
"""

import argparse
import atexit
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy

REPO = Path(__file__).resolve().parent.parent

# problem -> what both tools are given beyond the problem file: a smaller problem size where
# the full one makes a configuration take seconds on PoCL, and fixed values of parameters that
# change what the kernel computes (sepconv's filter sizes; a filter size is a problem, not a
# configuration: kerntune validates outputs, so one run tunes one size).
SETTINGS = {
    "opencl": {
        "stencil": {},
        "vector_add": {},
        # at 1024 x 1024 instead of the kernels' 4096 (seconds a run on PoCL), the grid of a
        # block width times tile that does not divide 1024 covers another region, and the output
        # differs (kerntune's validation stops on it, naming block_size_x): both tools tune the
        # widths and tiles that divide it
        "convolution": {"ps": [1024, 1024], "defines": {"block_size_x": [16, 32, 64, 128]}},
        "sepconv_row": {"ps": [1024, 1024], "defines": {"filter_width": 17, "block_size_x": [16, 32, 64, 128, 256, 512, 1024],
                                                       "tile_size_x": [1, 2, 4, 8], "tile_size_y": [1, 2, 4, 8]}},
        "sepconv_col": {"ps": [1024, 1024], "defines": {"filter_height": 17, "block_size_x": [16, 32, 64, 128, 256, 512, 1024],
                                                       "tile_size_x": [1, 2, 4, 8], "tile_size_y": [1, 2, 4, 8]}},
        "matmul": {"ps": [512, 512]},
        # loop_unroll_factor 0 makes `#pragma unroll 0`, which PoCL's compiler refuses: Kernel
        # Tuner 1.5 then stops with pyopencl's RuntimeError instead of skipping the configuration
        "reduction": {"defines": {"loop_unroll_factor": [1, 8, 16, 32]}},
    },
    "cuda": {
        "vector_add": {},
        "convolution": {"defines": {"filter_width": 15, "filter_height": 15}},
        "matmul": {},
        "reduction": {},
        "pnpoly": {},
    },
}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def problem_path(lang, name, build):
    if name == "vector_add":
        return build / "kernel_tuner_examples" / lang / "vector_add.json"
    return REPO / "examples" / "kernel_tuner" / lang / (name + ".json")


NP_TYPES = {"float": numpy.float32, "float32": numpy.float32, "double": numpy.float64, "int32": numpy.int32, "int": numpy.int32,
            "uint32": numpy.uint32, "int64": numpy.int64}


def kt_args(t1, problem, rng):
    """The problem's arguments as numpy values, filled as the T1 file says."""
    args, cmem = [], {}
    for a in t1["KernelSpecification"]["Arguments"]:
        t = NP_TYPES[a["Type"]]
        if a["MemoryType"] == "Scalar":
            args.append(t(a.get("Value", a.get("FillValue", 0))))
            continue
        n = int(a["Size"])
        if a.get("FillType") == "BinaryRaw":  # raw elements, beside the problem
            v = numpy.fromfile(problem.parent / a["DataSource"], dtype=t, count=n)
        elif a.get("FillType") == "Random":
            v = (rng.random(n) * a.get("FillValue", 1.0)).astype(t)
        else:
            v = numpy.full(n, a.get("FillValue", 0), dtype=t)
        args.append(v)
        if a.get("MemType") == "Constant":
            cmem[a["Name"]] = v
    return args, cmem


def kt_setup(t1, settings):
    """tune_kernel's arguments for the problem: parameters, restrictions, grid, problem size."""
    ks = t1["KernelSpecification"]
    params = {}
    for p in t1["ConfigurationSpace"]["TuningParameters"]:
        params[p["Name"]] = list(eval(p["Values"]))  # Kernel Tuner's own semantics: a Python list
    for k, v in settings.get("defines", {}).items():
        params[k] = list(v) if isinstance(v, list) else [v]
    restrictions = [c["Expression"] for c in t1["ConfigurationSpace"].get("Conditions", [])]
    kw = {}
    ps = settings.get("ps") or ks["ProblemSize"]
    if "GlobalSize" in ks and not any(k in ks for k in ("GridDivX", "GridDivY", "GridDivZ")):
        # a grid of blocks given directly (reduction: num_blocks blocks)
        ps = ks["GlobalSize"]["X"]
        kw["grid_div_x"] = []
    for d in "XYZ":
        if "GridDiv" + d in ks:
            kw["grid_div_" + d.lower()] = ks["GridDiv" + d]
    return params, restrictions, ps if isinstance(ps, str) else tuple(ps), kw


def kernel_tuner_run(t1, problem, settings, lang, budget, strategy, rng, only=None, iterations=7, tool="kernel_tuner"):
    """tune_kernel of Kernel Tuner (tool "kernel_tuner") or of kerntune ("kerntune": the same call,
    the drop-in of kerntune's Python package)."""
    import importlib

    kernel_tuner = importlib.import_module(tool)
    params, restrictions, ps, kw = kt_setup(t1, settings)
    if only is not None:  # a list of configurations: the space of their values, restricted to them, in their order
        params = {k: list(dict.fromkeys(c[k] for c in only)) for k in params}
        restrictions = [" or ".join("(" + " and ".join("%s == %r" % (k, c[k]) for k in params) + ")" for c in only)]
    ks = t1["KernelSpecification"]
    source = str((problem.parent / ks["KernelFile"]).resolve())
    args, cmem = kt_args(t1, problem, rng)
    if cmem:
        kw["cmem_args"] = cmem
    opts = {"time_limit": budget} if budget else {}
    t0 = time.time()
    results, env = kernel_tuner.tune_kernel(ks["KernelName"], source, ps, args, params, restrictions=restrictions or None,
                                           lang="CuPy" if lang == "cuda" else "OpenCL", strategy=strategy if only is None else "brute_force",
                                           strategy_options=opts, iterations=iterations, quiet=True, **kw)
    elapsed = time.time() - t0
    valid = [r for r in results if isinstance(r.get("time"), (int, float)) and "__error__" not in r]
    if tool == "kerntune":  # evaluated: built and run, or failed trying (not refused unbuilt by a limit)
        evaluated = sum(1 for r in results if type(r.get("__error__")).__name__ != "InvalidConfig")
        split = {k: sum(float(r.get(k) or 0) for r in results) for k in ("compile_time", "verification_time", "framework_time",
                                                                           "benchmark_time")}
        log("kerntune's time, summed over its %d configurations (ms; builds run in parallel): %s" % (
            len(results), ", ".join("%s %.0f" % kv for kv in split.items())))
        return valid, evaluated, elapsed
    # Kernel Tuner's strategies list a configuration each time they visit it (a genetic algorithm's
    # population revisits; served from its own cache, at no cost): distinct ones were evaluated
    distinct = {tuple(r.get(k) for k in params) for r in results}
    return valid, len(distinct), elapsed


def tune_in_child(tool, lang, name, budget, strategy, seed, build):
    """tune_kernel of tool (kernel_tuner or kerntune) in a process of its own, with caches of its
    own, empty: PoCL's kernels (it compiles one for each work-group size at its first launch and
    caches it: in one process the tool that ran second found the first's compiled), pyopencl's
    binaries and kerntune's artifacts (both in XDG_CACHE_HOME), CuPy's compiled kernels. The configurations it measured
    as (params, time), how many it evaluated, and its wall time."""
    cold = tempfile.mkdtemp(prefix="sbs-cold-")  # pyopencl's binary cache and kerntune's artifacts are under it too
    env = dict(os.environ, POCL_CACHE_DIR=os.path.join(cold, "pocl"), XDG_CACHE_HOME=cold, KERNTUNE_CACHE="off",
               CUPY_CACHE_DIR=os.path.join(cold, "cupy"))  # CuPy's compiled kernels (Kernel Tuner's on the GPU)
    env.pop("KERNTUNE_ARTIFACTS", None)
    cmd = [sys.executable, os.path.abspath(__file__), "--child", tool, "--lang", lang, "--problems", name, "--budget", str(budget),
           "--kt-strategy", strategy, "--seed", str(seed), "--build", str(build)]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError("%s on %s exited %d:\n%s" % (tool, name, p.returncode, p.stderr[-3000:]))
    for line in p.stderr.splitlines():  # the child's account of where its time went
        if line.startswith("kerntune's time"):
            log(line)
    j = json.loads(p.stdout.strip().splitlines()[-1])
    return j["valid"], j["evaluated"], j["elapsed"]


def kerntune_run(cli, problem, settings, budget, t4, flush="auto", search_seed=None):
    cmd = [str(cli), "tune", str(problem), "--budget", "%ds" % budget, "--json", "--cache", "off", "--t4", t4, "--flush", flush]
    if search_seed is not None:
        cmd += ["--seed", str(search_seed)]
    if settings.get("ps"):
        cmd += ["--problem-size", ",".join(str(x) for x in settings["ps"])]
    for k, v in settings.get("defines", {}).items():
        cmd += ["--define", "%s=%s" % (k, ",".join(str(x) for x in v) if isinstance(v, list) else v)]
    # its artifacts in a directory of their own, empty, as the drop-in's child gets: a run after
    # another must not find configurations built
    with tempfile.TemporaryDirectory(prefix="sbs-cold-") as cold:
        env = dict(os.environ, KERNTUNE_ARTIFACTS=os.path.join(cold, "artifacts"), POCL_CACHE_DIR=os.path.join(cold, "pocl"))
        t0 = time.time()
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        elapsed = time.time() - t0
    if p.returncode != 0:
        raise RuntimeError("kerntune tune %s exited %d:\n%s" % (problem, p.returncode, p.stderr[-3000:]))
    j = json.loads(p.stdout)
    return j, elapsed


def kerntune_time(cli, problem, settings, picks):
    """The picks timed by kerntune's own timer in one process (on this VM a process's speed
    differs from the next one's by up to 40%, for every configuration alike): `kerntune tune` on
    a copy of the problem restricted to them, with the kerneltuner policy (a warm-up and 7 runs,
    the mean), its cache flushed before each run, in the order given (every parameter's values
    listed in the picks' order, so the first pick runs first). Their times in that order."""
    t1 = json.load(open(problem))
    names = list(picks[0])
    cond = " or ".join("(" + " and ".join("%s == %s" % (k, c[k]) for k in names) + ")" for c in picks)
    t1["ConfigurationSpace"].setdefault("Conditions", []).append({"Parameters": names, "Expression": cond})
    copy = problem.parent / (".sbs-pair-%d.json" % os.getpid())  # beside it: its KernelFile is relative
    copy.write_text(json.dumps(t1))
    cmd = [str(cli), "tune", str(copy), "--json", "--cache", "off", "--measure", "kerneltuner", "--validate", "off",
           "--t4", str(copy) + ".t4"]
    if settings.get("ps"):
        cmd += ["--problem-size", ",".join(str(x) for x in settings["ps"])]
    for k in names:
        vals = dict.fromkeys(c[k] for c in picks)
        cmd += ["--define", "%s=%s" % (k, ",".join(str(x) for x in vals))]
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if p.returncode != 0:
            raise RuntimeError("kerntune tune %s (the picks) exited %d:\n%s" % (problem, p.returncode, p.stderr[-3000:]))
        got = {}
        for r in json.load(open(str(copy) + ".t4"))["results"]:
            if r["invalidity"] == "correct":
                got[tuple(r["configuration"][k] for k in names)] = r["measurements"][0]["value"]
    finally:
        for f in (copy, Path(str(copy) + ".t4")):
            f.unlink(missing_ok=True)
    return [got[tuple(c[k] for k in names)] for c in picks]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lang", choices=["opencl", "cuda"], default="opencl")
    ap.add_argument("--budget", type=int, default=60, help="seconds of tuning for each tool and problem (default 60)")
    ap.add_argument("--problems", help="comma-separated subset (default: all of --lang)")
    ap.add_argument("--kt-strategy", default="genetic_algorithm", help="Kernel Tuner's strategy (default genetic_algorithm)")
    ap.add_argument("--rounds", type=int, default=3, help="re-timing rounds of the two picks (default 3)")
    ap.add_argument("--build", default=str(REPO / "build"), help="kerntune's build directory (default build)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--kerntune-flush", choices=["auto", "off"], default="auto",
                    help="kerntune's --flush while tuning: auto (its default: each run starts on a cold cache) or off "
                         "(runs back to back on a warm cache, what Kernel Tuner measures)")
    ap.add_argument("--via", choices=["cli", "python"], default="cli",
                    help="kerntune through `kerntune tune PROBLEM` (cli, the default) or through kerntune.tune_kernel, the "
                         "same call Kernel Tuner gets with the same arguments (python: the drop-in of issue [19]; needs the "
                         "package, PYTHONPATH=build/python)")
    ap.add_argument("--kerntune-timer", action="store_true",
                    help="also re-time both picks with kerntune's timer (which flushes the cache before each run)")
    ap.add_argument("--kerntune-options", help="compiler options added to the problem's CompilerOptions for kerntune's "
                    "tuning and its timer, space-separated (e.g. -ftz=true, which CuPy adds to every compile)")
    ap.add_argument("--kerntune-seed", type=int, help="kerntune's search seed (the CLI's --seed; default its own)")
    ap.add_argument("--kerntune-only", action="store_true",
                    help="tune with kerntune alone and log where its time went (no Kernel Tuner, no ratio)")
    ap.add_argument("--child", choices=["kernel_tuner", "kerntune"], help=argparse.SUPPRESS)
    a = ap.parse_args()
    build = Path(a.build)
    cli = build / "kerntune"
    names = a.problems.split(",") if a.problems else list(SETTINGS[a.lang])
    rng = numpy.random.default_rng(a.seed)
    if a.child:  # one tool's tuning of one problem, as JSON on stdout
        name = names[0]
        problem = problem_path(a.lang, name, build)
        valid, evaluated, elapsed = kernel_tuner_run(json.load(open(problem)), problem, SETTINGS[a.lang][name], a.lang, a.budget,
                                                     a.kt_strategy, rng, tool=a.child)
        params = list(kt_setup(json.load(open(problem)), SETTINGS[a.lang][name])[0])
        print(json.dumps({"valid": [{**{k: r[k] for k in params}, "time": r["time"]} for r in valid], "evaluated": evaluated,
                          "elapsed": elapsed}, default=lambda o: o.item() if hasattr(o, "item") else str(o)))
        return
    for name in names:
        if name not in SETTINGS[a.lang]:
            sys.exit("--problems: no problem %r for %s (have %s)" % (name, a.lang, ", ".join(SETTINGS[a.lang])))
        settings = SETTINGS[a.lang][name]
        problem = problem_path(a.lang, name, build)
        t1 = json.load(open(problem))
        kproblem = problem  # what kerntune tunes and times: the problem, or a copy with more compiler options
        if a.kerntune_options:
            k1 = json.loads(json.dumps(t1))
            ks = k1["KernelSpecification"]
            ks["CompilerOptions"] = list(ks.get("CompilerOptions", [])) + a.kerntune_options.split()
            kproblem = problem.parent / (".sbs-options-%d.json" % os.getpid())  # beside it: its KernelFile is relative
            kproblem.write_text(json.dumps(k1))
            atexit.register(kproblem.unlink, missing_ok=True)
        log("== %s (%s): %d s each, kerntune with --flush %s" % (name, problem, a.budget, a.kerntune_flush))
        if a.via == "python":
            k_valid, k_evaluated, k_elapsed = tune_in_child("kerntune", a.lang, name, a.budget, a.kt_strategy, a.seed, build)
            if not k_valid:
                log("kerntune.tune_kernel found no valid configuration")
                continue
            k_best = min(k_valid, key=lambda r: r["time"])
            k_pick = {k: k_best[k] for k in kt_setup(t1, settings)[0]}
            log("kerntune.tune_kernel: %d configurations evaluated in %.1f s, pick %s (%.4f ms)" % (k_evaluated, k_elapsed, k_pick,
                                                                                                  k_best["time"]))
        else:
            with tempfile.TemporaryDirectory() as tmp:
                kj, k_elapsed = kerntune_run(cli, kproblem, settings, a.budget, os.path.join(tmp, "t4.json"), a.kerntune_flush,
                                             a.kerntune_seed)
            k_pick = kj["best"]["configuration"]
            # built and run (or failed trying): not the space's size, nor those refused before any work
            # for breaking a device limit (Kernel Tuner skips those uncounted too)
            k_evaluated = kj["measured"] + kj["failed"] - kj["failures"].get("rejected", 0)
            log("kerntune: %d of %d configurations evaluated in %.1f s, pick %s (%.4f ms)" % (k_evaluated, kj["configurations"],
                                                                                             k_elapsed, k_pick, kj["best"]["time_ms"]))
            sp = kj.get("time_split") or {}
            log("kerntune's time (s; builds run in parallel): builds %s (%s built, %s threads, %.0f%% busy), validation %s, "
                "framework %s, runs %s" % (sp.get("build_s"), kj.get("builds"), sp.get("build_threads"), 100 * (sp.get("build_busy") or 0),
                                           sp.get("validation_s"), sp.get("framework_s"), sp.get("runs_s")))
        if a.kerntune_only:
            print("RESULT %s kerntune_evaluated_per_min %.1f" % (name, 60 * k_evaluated / k_elapsed))
            continue
        if a.via == "python":  # both in processes of their own, each with a cold PoCL cache
            valid, n_kt, kt_elapsed = tune_in_child("kernel_tuner", a.lang, name, a.budget, a.kt_strategy, a.seed, build)
        else:
            valid, n_kt, kt_elapsed = kernel_tuner_run(t1, problem, settings, a.lang, a.budget, a.kt_strategy, rng)
        if not valid:
            log("Kernel Tuner found no valid configuration")
            continue
        best = min(valid, key=lambda r: r["time"])
        kt_pick = {k: best[k] for k in k_pick}
        log("Kernel Tuner: %d configurations in %.1f s, pick %s (%.4f ms)" % (n_kt, kt_elapsed, kt_pick, best["time"]))
        # both picks timed together in each round (one tune_kernel call, one process for kerntune's
        # timer): the ratio of each round, then their median
        same = k_pick == kt_pick
        ratios = []
        # the two in turn first (a round's first configuration runs on a colder process): ABAB...
        for r in range(a.rounds if not same else 0):
            pair = [k_pick, kt_pick] if r % 2 == 0 else [kt_pick, k_pick]
            v, _, _ = kernel_tuner_run(t1, problem, settings, a.lang, 0, "brute_force", rng, only=pair)
            by = {tuple(r[k] for k in k_pick): r["time"] for r in v}
            ratios.append(by[tuple(k_pick.values())] / by[tuple(kt_pick[k] for k in k_pick)])
        ratio = statistics.median(ratios) if ratios else 1.0
        log("re-timed (Kernel Tuner's timer, %d rounds, both picks in each): ratios %s" % (len(ratios), " ".join("%.3f" % r for r in ratios))
            if not same else "the same pick: ratio 1")
        print("RESULT %s pick_ratio %.3f" % (name, ratio))
        if a.kerntune_timer:
            kratios = []
            for r in range(a.rounds if not same else 0):
                if r % 2 == 0:
                    tk, tt = kerntune_time(cli, kproblem, settings, [k_pick, kt_pick])
                else:
                    tt, tk = kerntune_time(cli, kproblem, settings, [kt_pick, k_pick])
                kratios.append(tk / tt)
            log("re-timed (kerntune's timer, cache flushed before each run, both picks in one process): ratios %s"
                % " ".join("%.3f" % r for r in kratios))
            print("RESULT %s pick_ratio_kerntune_timer %.3f" % (name, statistics.median(kratios) if kratios else 1.0))
        print("RESULT %s kt_configs_per_min %.1f kerntune_configs_per_min %.1f" % (name, 60 * n_kt / kt_elapsed,
                                                                                    60 * k_evaluated / k_elapsed), flush=True)


if __name__ == "__main__":
    main()
