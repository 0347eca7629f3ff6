#!/usr/bin/env python3
"""kerneltuner.py - run Kernel Tuner's own search strategies on the recorded benchmark_hub spaces.

For each recorded set (convolution / dedispersion on an RTX A4000 / Radeon Pro W6600) this script
turns the exhaustive T4 results into a Kernel Tuner JSON cache file and runs Kernel Tuner (the
pinned PyPI release, in a virtual environment it creates on first use) in simulation mode, once
per strategy and seed. Every run's evaluation order is written as one JSON line:

    {"set": "convolution A4000", "strategy": "kt:genetic_algorithm", "seed": 3,
     "configs": ["16,1,1,1,0,0,0,1,15,15", ...]}

"configs" lists the configurations Kernel Tuner evaluated, in order, each once (a configuration
Kernel Tuner re-visits is served from its cache at no cost and is listed only the first time);
failed configurations (compile / runtime failures) are included, configurations a strategy
proposed that violate the problem's conditions (never evaluated) are not. Each entry holds the
parameter values in T1 TuningParameters order joined by ",".

How the recorded T4 data become a Kernel Tuner cache (see t4_to_cache):
  * the objective "time" is the recorded measurement "time" (the mean of the runs, in ms);
  * Kernel Tuner's simulation runner charges compile_time + verification_time + benchmark_time
    per first visit (its framework_time field is overwritten by the real overhead of the
    simulation), so the recorded framework time is folded into benchmark_time:
        compile_time      = T4 compilation
        verification_time = T4 validation (0 with --no-validation-time)
        benchmark_time    = sum(T4 runtimes) + T4 framework
    Kernel Tuner's simulated time is then the recorded cost of the evaluations it made;
  * failed configurations get "time": "CompilationFailedConfig" / "RuntimeFailedConfig" /
    "InvalidConfig" (T4 "compile" / "runtime" / "constraints"), the strings Kernel Tuner writes
    into its own cache files for failures (other failure classes: "ErrorConfig").

The kernel is never compiled in simulation mode, so a stub CUDA source with the T1 kernel name
and no arguments is passed to Kernel Tuner (the dedispersion T1 KernelSpecification is
unreliable anyway); the problem's Conditions are passed as Kernel Tuner restrictions, so Kernel
Tuner builds the same constrained space (checked against the T4 file before any run).

Runs are seeded by seeding Python's `random` and NumPy's global generator before each run. One
Kernel Tuner strategy draws from an unseeded generator: bayes_opt's Latin hypercube initial
sample (scipy.stats.qmc.LatinHypercube, fresh OS entropy); the script hands it a generator
derived from the seeded NumPy state, which leaves the algorithm as it is.

Usage: python3 bench/kerneltuner.py [--sets c-A4000,...] [--seeds N] [--out FILE] ...
(see --help). Progress and a one-line summary per run go to stderr.
"""

import argparse
import ast
import contextlib
import gzip
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_HUB = REPO_ROOT.parent / "shared" / "benchmark_hub"
DEFAULT_VENV = REPO_ROOT / "build" / "kt-venv"

# The Kernel Tuner release this script drives (the newest 1.5.x on PyPI when written), and the
# numerical libraries its strategies' random streams depend on, pinned to the versions tested.
KERNEL_TUNER_VERSION = "1.5.0"
REQUIREMENTS = {
    "kernel_tuner": KERNEL_TUNER_VERSION,
    "numpy": "2.4.6",
    "scipy": "1.17.1",
    "scikit-learn": "1.9.1",
}

# Set name -> (kernel directory / T1 stem, GPU, label used in the output).
SETS = {
    "c-A4000": ("convolution_milo", "A4000", "convolution A4000"),
    "c-W6600": ("convolution_milo", "W6600", "convolution W6600"),
    "d-A4000": ("dedispersion_milo", "A4000", "dedispersion A4000"),
    "d-W6600": ("dedispersion_milo", "W6600", "dedispersion W6600"),
}

DEFAULT_STRATEGIES = ["random_sample", "genetic_algorithm", "dual_annealing", "greedy_ils", "bayes_opt", "hybrid_vndx"]

# T4 invalidity class -> the error string Kernel Tuner stores in its cache files.
T4_FAILURE_TO_KT = {
    "compile": "CompilationFailedConfig",
    "runtime": "RuntimeFailedConfig",
    "constraints": "InvalidConfig",
}

REEXEC_MARK = "KERNELTUNER_PY_IN_VENV"


def log(msg):
    print(msg, file=sys.stderr, flush=True)


class UsageError(Exception):
    """An error in the arguments or input files; the message names the culprit."""


# ----------------------------------------------------------------------------------------------
# Virtual environment bootstrap (standard library only: runs before anything is installed)
# ----------------------------------------------------------------------------------------------


def venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def venv_missing(venv: Path, requirements: dict) -> list:
    """The requirements ('name==version') the venv at `venv` lacks (all of them if it has no Python)."""
    wanted = [f"{name}=={version}" for name, version in requirements.items()]
    py = venv_python(venv)
    if not py.exists():
        return wanted
    probe = (
        "import importlib.metadata as m, json, sys\n"
        "out = {}\n"
        "for n in json.loads(sys.argv[1]):\n"
        "    try: out[n] = m.version(n)\n"
        "    except m.PackageNotFoundError: out[n] = None\n"
        "print(json.dumps(out))\n"
    )
    try:
        found = json.loads(
            subprocess.run([str(py), "-c", probe, json.dumps(list(requirements))], check=True,
                           capture_output=True, text=True).stdout
        )
    except (subprocess.CalledProcessError, json.JSONDecodeError, OSError):
        return wanted
    return [f"{n}=={v}" for n, v in requirements.items() if found.get(n) != v]


def ensure_venv(venv: Path, requirements: dict, script: Path, argv: list):
    """Make sure we run inside `venv` with `requirements` installed: create / complete it if
    needed, then re-execute `script` with `argv` there. Returns only when already inside."""
    venv = venv.resolve()
    if Path(sys.prefix).resolve() == venv:
        missing = venv_missing(venv, requirements)
        if missing:
            raise UsageError(f"--venv {venv}: still lacks {', '.join(missing)} after installing")
        return
    if os.environ.get(REEXEC_MARK) == str(venv):
        raise UsageError(f"--venv {venv}: re-executed with {venv_python(venv)} but sys.prefix is {sys.prefix}")
    missing = venv_missing(venv, requirements)
    if missing:
        if not venv_python(venv).exists():
            log(f"[venv] creating {venv}")
            venv.parent.mkdir(parents=True, exist_ok=True)
            try:
                subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, stdout=sys.stderr)
            except subprocess.CalledProcessError as e:
                raise UsageError(f"--venv {venv}: python -m venv failed ({e})")
        log(f"[venv] installing {' '.join(missing)} into {venv} (pip output follows)")
        try:
            subprocess.run([str(venv_python(venv)), "-m", "pip", "install", "--disable-pip-version-check",
                            *missing], check=True, stdout=sys.stderr)
        except subprocess.CalledProcessError as e:
            raise UsageError(f"--venv {venv}: pip install {' '.join(missing)} failed ({e})")
    env = dict(os.environ)
    env[REEXEC_MARK] = str(venv)
    py = str(venv_python(venv))
    log(f"[venv] re-executing in {venv}")
    sys.stderr.flush()
    os.execve(py, [py, str(script), *argv], env)


def limit_threads():
    """One BLAS / OpenMP thread: the machine is shared, and the strategies gain little from more."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
        os.environ.setdefault(var, "1")


# ----------------------------------------------------------------------------------------------
# Reading the T1 problem and the T4 results
# ----------------------------------------------------------------------------------------------


def parse_values(text, where):
    """A T1 `Values` string (Python syntax) as a list."""
    if isinstance(text, list):
        return text
    try:
        values = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        # Kernel Tuner's T1 reader also accepts range(...) / list(...) expressions.
        try:
            values = eval(text, {"__builtins__": {}}, {"range": range, "list": list})  # noqa: S307
        except Exception as e:  # noqa: BLE001
            raise UsageError(f"{where}: cannot parse Values {text!r} ({e})")
    values = list(values)
    if not values:
        raise UsageError(f"{where}: empty Values")
    return values


class Problem:
    """What the runs need from a T1 file: parameters (in order), restrictions, kernel name."""

    def __init__(self, t1_path: Path):
        try:
            with open(t1_path, encoding="utf-8") as fh:
                t1 = json.load(fh)
            space = t1["ConfigurationSpace"]
            self.names = [p["Name"] for p in space["TuningParameters"]]
            self.tune_params = {
                p["Name"]: parse_values(p["Values"], f"{t1_path}: parameter {p['Name']}")
                for p in space["TuningParameters"]
            }
            self.restrictions = [c["Expression"] for c in space.get("Conditions", [])]
            spec = t1.get("KernelSpecification", {})
            self.kernel_name = spec.get("KernelName") or t1["General"]["BenchmarkName"]
            self.problem_size = spec.get("ProblemSize", [1])
        except (OSError, json.JSONDecodeError, KeyError, TypeError) as e:
            raise UsageError(f"{t1_path}: not a readable T1 problem file ({type(e).__name__}: {e})")
        if not isinstance(self.problem_size, (list, int)):
            self.problem_size = [1]

    def key(self, values) -> str:
        """Kernel Tuner's cache key of a configuration: str() of each value, joined by ','."""
        return ",".join(str(v) for v in values)

    @staticmethod
    def plain(v) -> str:
        """The output spelling of a value: integers plainly (16, not 16.0), strings as they are."""
        if isinstance(v, bool):
            return str(int(v))
        if isinstance(v, float) and v.is_integer():
            return str(int(v))
        return str(v)


class SpaceData:
    """A recorded space as converted: for every configuration its Kernel Tuner cache key and
    output spelling, the best recorded valid mean, and some counts for the log."""

    def __init__(self):
        self.out_of = {}  # cache key -> output spelling
        self.value = {}  # cache key -> recorded mean (ms) or None when invalid
        self.best = float("inf")
        self.nvalid = 0
        self.invalid = {}


def t4_to_cache(problem: Problem, t4_path: Path, device: str, cache_path: Path, validation_time: bool) -> SpaceData:
    """Convert an exhaustive T4 results file into a Kernel Tuner simulation cache file."""
    try:
        opener = gzip.open if t4_path.suffix == ".gz" else open
        with opener(t4_path, "rt", encoding="utf-8") as fh:
            t4 = json.load(fh)
        results = t4["results"]
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as e:
        raise UsageError(f"{t4_path}: not a readable T4 results file ({type(e).__name__}: {e})")
    unit = str(t4.get("metadata", {}).get("timeunit", "milliseconds")).lower()
    to_ms = {"milliseconds": 1.0, "miliseconds": 1.0, "ms": 1.0, "seconds": 1e3, "s": 1e3,
             "microseconds": 1e-3, "us": 1e-3, "nanoseconds": 1e-6, "ns": 1e-6}.get(unit)
    if to_ms is None:
        raise UsageError(f"{t4_path}: unknown metadata.timeunit {unit!r}")

    # canonical value objects per parameter, so that keys are spelled exactly as Kernel Tuner
    # spells them (str() of the T1 value, e.g. 1 and 1.0 differ)
    canon = {n: {v: v for v in problem.tune_params[n]} for n in problem.names}
    data = SpaceData()
    cache = {}
    outside = 0
    for i, rec in enumerate(results):
        try:
            conf = rec["configuration"]
            values = [canon[n][conf[n]] for n in problem.names]
        except KeyError:
            outside += 1  # a configuration outside the T1 parameter values: not in the space
            continue
        except TypeError as e:
            raise UsageError(f"{t4_path}: results[{i}].configuration malformed ({e})")
        times = rec.get("times", {}) or {}

        def ms(field):
            v = times.get(field, 0)
            return float(v) * to_ms if isinstance(v, (int, float)) and v == v and v >= 0 else 0.0

        runtimes = [float(r) * to_ms for r in (times.get("runtimes") or []) if isinstance(r, (int, float))]
        invalidity = rec.get("invalidity", "correct")
        mean = None
        if invalidity == "correct":
            for m in rec.get("measurements", []):
                if m.get("name") == "time" and isinstance(m.get("value"), (int, float)):
                    mean = float(m["value"])
            if mean is None and runtimes:
                mean = sum(runtimes) / len(runtimes)
            if mean is None or not mean > 0:
                invalidity = "runtime"  # recorded as correct but without a usable time
                mean = None

        key = problem.key(values)
        entry = dict(zip(problem.names, values))
        entry["time"] = mean if mean is not None else T4_FAILURE_TO_KT.get(invalidity, "ErrorConfig")
        entry["times"] = runtimes
        entry["compile_time"] = ms("compilation")
        entry["verification_time"] = ms("validation") if validation_time else 0.0
        entry["benchmark_time"] = sum(runtimes) + ms("framework")
        entry["framework_time"] = ms("framework")
        entry["strategy_time"] = 0.0
        if "timestamp" in rec:
            entry["timestamp"] = rec["timestamp"]
        cache[key] = entry

        data.out_of[key] = ",".join(Problem.plain(v) for v in values)
        data.value[key] = mean
        if mean is not None:
            data.nvalid += 1
            data.best = min(data.best, mean)
        else:
            data.invalid[invalidity] = data.invalid.get(invalidity, 0) + 1
    if outside:
        log(f"[convert] {t4_path}: {outside} records outside the T1 parameter values ignored")
    if not data.nvalid:
        raise UsageError(f"{t4_path}: no valid (\"correct\") configuration recorded")

    header = {
        "device_name": device,
        "kernel_name": problem.kernel_name,
        "problem_size": problem.problem_size,
        "tune_params_keys": problem.names,
        "tune_params": problem.tune_params,
        "objective": "time",
        "cache": cache,
    }
    cache_path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=cache_path.parent, suffix=".tmp", delete=False) as fh:
        json.dump(header, fh)
        tmp = fh.name
    os.replace(tmp, cache_path)
    return data


def check_space(problem: Problem, data: SpaceData, t4_path: Path, t1_path: Path) -> int:
    """Build the constrained space as Kernel Tuner does and check every member was recorded."""
    from kernel_tuner.searchspace import Searchspace

    space = Searchspace(problem.tune_params, list(problem.restrictions), 1_000_000_000)
    keys = [problem.key(c) for c in space.list]
    missing = [k for k in keys if k not in data.out_of]
    if missing:
        raise UsageError(f"{t4_path}: {len(missing)} of the {len(keys)} configurations Kernel Tuner builds from "
                         f"{t1_path} have no record (first: {missing[0]}); simulation mode needs them all")
    extra = len(data.out_of) - len(set(keys))
    if extra:
        log(f"[convert] {t4_path}: {extra} recorded configurations violate the T1 conditions (never proposed)")
    return len(keys)


# ----------------------------------------------------------------------------------------------
# Running Kernel Tuner
# ----------------------------------------------------------------------------------------------


def seed_everything(seed: int):
    import numpy as np

    random.seed(seed)
    np.random.seed(seed % (2**32))


def make_bayes_opt_reproducible():
    """bayes_opt draws its initial Latin hypercube sample from scipy.stats.qmc.LatinHypercube
    without a generator, i.e. from fresh OS entropy; give it one drawn from NumPy's (seeded)
    global state instead. The sampling itself is unchanged."""
    import numpy as np
    from scipy.stats import qmc

    try:
        import kernel_tuner.strategies.bayes_opt as bo
    except ImportError:
        return  # reported when the strategy runs
    if getattr(bo, "_kerneltuner_py_seeded", False):
        return

    def seeded_latin_hypercube(*args, **kwargs):
        if "rng" not in kwargs and "seed" not in kwargs:
            kwargs["rng"] = np.random.default_rng(np.random.randint(0, 2**31 - 1))
        return qmc.LatinHypercube(*args, **kwargs)

    bo.LatinHypercube = seeded_latin_hypercube
    bo._kerneltuner_py_seeded = True


class RunResult:
    def __init__(self):
        self.configs = []  # output spellings, first visits only, in evaluation order
        self.nresults = 0  # entries Kernel Tuner returned (re-visits included)
        self.revisits = 0
        self.unknown = 0  # results for configurations not in the recorded space (not emitted)
        self.best = float("inf")
        self.simulated_s = float("nan")
        self.wall_s = 0.0
        self.warnings = []


def run_once(problem: Problem, data: SpaceData, cache_path: Path, strategy: str, seed: int,
             strategy_options: dict) -> RunResult:
    import kernel_tuner
    import numpy as np

    if strategy == "bayes_opt":
        make_bayes_opt_reproducible()
    seed_everything(seed)
    out = RunResult()
    # never compiled in simulation mode; one dummy argument keeps Kernel Tuner's signature check quiet
    stub_source = f"__global__ void {problem.kernel_name}(float *unused) {{}}\n"
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(sys.stderr):
        warnings.simplefilter("always")
        results, env = kernel_tuner.tune_kernel(
            problem.kernel_name,
            stub_source,
            problem.problem_size,
            [np.zeros(1, dtype=np.float32)],
            {n: list(v) for n, v in problem.tune_params.items()},
            restrictions=list(problem.restrictions),
            lang="CUDA",
            cache=str(cache_path),
            simulation_mode=True,
            strategy=strategy,
            strategy_options=dict(strategy_options),
            objective="time",
            objective_higher_is_better=False,
            quiet=True,
            seed=seed,
        )
    out.wall_s = time.perf_counter() - start
    out.warnings = [f"{w.category.__name__}: {w.message}" for w in caught]
    out.simulated_s = float(env.get("simulated_time", float("nan"))) / 1e3

    # Kernel Tuner's results list is in evaluation order and includes re-visits (served from its
    # cache at no cost); keep the first visit of each configuration.
    seen = set()
    for res in results:
        if res is None:
            continue
        out.nresults += 1
        key = problem.key(res[n] for n in problem.names)
        if key not in data.out_of:
            out.unknown += 1
            continue
        if key in seen:
            out.revisits += 1
            continue
        seen.add(key)
        out.configs.append(data.out_of[key])
        if data.value[key] is not None:
            out.best = min(out.best, data.value[key])
    return out


# ----------------------------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------------------------


def parse_args(argv):
    ap = argparse.ArgumentParser(
        description="Run Kernel Tuner's own search strategies (kernel_tuner==%s, installed into a virtual "
                    "environment on first use) in simulation mode on the recorded benchmark_hub spaces, and write "
                    "each run's evaluation order as JSON lines for bench/search.c." % KERNEL_TUNER_VERSION,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument("--hub", type=Path, default=DEFAULT_HUB, help="benchmark_hub directory (kernels/, results/)")
    ap.add_argument("--sets", default=",".join(SETS), help="comma-separated sets: " + ", ".join(SETS))
    ap.add_argument("--strategies", default=",".join(DEFAULT_STRATEGIES),
                    help="comma-separated Kernel Tuner strategy names (any of kernel_tuner.interface.strategy_map, "
                         "e.g. also simulated_annealing, pso, diff_evo, mls)")
    ap.add_argument("--seeds", type=int, default=20, help="runs per strategy and set")
    ap.add_argument("--first-seed", type=int, default=1, help="seeds are FIRST_SEED .. FIRST_SEED+SEEDS-1")
    ap.add_argument("--max-fevals", type=int, default=argparse.SUPPRESS,
                    help="evaluation budget per run, capped at the space size (default: 600, or the space size when "
                         "only --time-limit is given); passed as Kernel Tuner's strategy_options max_fevals")
    ap.add_argument("--time-limit", type=float, default=argparse.SUPPRESS,
                    help="simulated seconds per run, passed as Kernel Tuner's strategy_options time_limit (Kernel "
                         "Tuner also counts the real time its strategy and startup take against it)")
    ap.add_argument("--no-validation-time", action="store_true",
                    help="leave the recorded validation time out of the simulated cost (bench/search.c charges "
                         "compilation + framework + runs only)")
    ap.add_argument("--out", type=Path, default=REPO_ROOT / "build" / "kt-traces.jsonl",
                    help="JSON lines output, one line per run")
    ap.add_argument("--cache-dir", type=Path, default=REPO_ROOT / "build" / "kt-cache",
                    help="where the converted Kernel Tuner cache files are written")
    ap.add_argument("--venv", type=Path, default=DEFAULT_VENV, help="virtual environment to create / reuse")
    args = ap.parse_args(argv)
    args.max_fevals = getattr(args, "max_fevals", None)
    args.time_limit = getattr(args, "time_limit", None)

    args.set_names = [s.strip() for s in args.sets.split(",") if s.strip()]
    for s in args.set_names:
        if s not in SETS:
            raise UsageError(f"--sets: unknown set {s!r} (known: {', '.join(SETS)})")
    if not args.set_names:
        raise UsageError("--sets: no set given")
    args.strategy_names = [s.strip() for s in args.strategies.split(",") if s.strip()]
    if not args.strategy_names:
        raise UsageError("--strategies: no strategy given")
    if args.seeds < 1:
        raise UsageError("--seeds: must be at least 1")
    if args.max_fevals is not None and args.max_fevals < 1:
        raise UsageError("--max-fevals: must be at least 1")
    if args.time_limit is not None and not args.time_limit > 0:
        raise UsageError("--time-limit: must be positive")
    for kernel, gpu, _ in {SETS[s] for s in args.set_names}:
        for path in (args.hub / "kernels" / f"{kernel}.json", args.hub / "results" / kernel / f"{gpu}_T4.json.gz"):
            if not path.is_file():
                raise UsageError(f"--hub {args.hub}: {path} does not exist")
    return args


def main(argv):
    args = parse_args(argv)  # before the venv, so --help and argument errors need nothing installed
    limit_threads()
    ensure_venv(args.venv, REQUIREMENTS, Path(__file__).resolve(), argv)

    import kernel_tuner
    from kernel_tuner.interface import strategy_map

    for s in args.strategy_names:
        if s not in strategy_map:
            raise UsageError(f"--strategies: Kernel Tuner has no strategy {s!r} (it has: {', '.join(strategy_map)})")
    from importlib.metadata import version

    log(f"[kerneltuner] Kernel Tuner {version('kernel_tuner')} ({Path(kernel_tuner.__file__).parent}), "
        f"python {sys.version.split()[0]}")

    args.out.parent.mkdir(parents=True, exist_ok=True)
    try:
        out = open(args.out, "w", encoding="utf-8")
    except OSError as e:
        raise UsageError(f"--out {args.out}: cannot be written ({e})")

    failures = []
    shown_warnings = set()
    t_all = time.perf_counter()
    with out:
        for set_name in args.set_names:
            kernel, gpu, label = SETS[set_name]
            t1_path = args.hub / "kernels" / f"{kernel}.json"
            t4_path = args.hub / "results" / kernel / f"{gpu}_T4.json.gz"
            problem = Problem(t1_path)
            cache_path = (args.cache_dir / f"{kernel}_{gpu}.json").resolve()
            data = t4_to_cache(problem, t4_path, gpu, cache_path, validation_time=not args.no_validation_time)
            size = check_space(problem, data, t4_path, t1_path)
            invalid = ", ".join(f"{n} {k}" for k, n in sorted(data.invalid.items())) or "none"
            log(f"\n[{label}] {size} configurations ({data.nvalid} valid; invalid: {invalid}), "
                f"best recorded mean {data.best:.4f} ms; cache {cache_path}")

            options = {}
            if args.time_limit is not None:
                options["time_limit"] = args.time_limit
                options["max_fevals"] = min(size, args.max_fevals) if args.max_fevals is not None else size
            else:
                options["max_fevals"] = min(size, args.max_fevals if args.max_fevals is not None else 600)
            log(f"[{label}] budget: {options}")

            for strategy in args.strategy_names:
                bests, evals = [], []
                for seed in range(args.first_seed, args.first_seed + args.seeds):
                    tag = f"[{label}] kt:{strategy} seed {seed}"
                    try:
                        r = run_once(problem, data, cache_path, strategy, seed, options)
                    except Exception as e:  # noqa: BLE001 - a failing strategy must not stop the others
                        tb = traceback.extract_tb(e.__traceback__)
                        where = f" at {Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else ""
                        log(f"{tag}: FAILED: {type(e).__name__}: {e}{where}")
                        failures.append((label, strategy, seed, f"{type(e).__name__}: {e}"))
                        continue
                    for w in r.warnings:
                        if w not in shown_warnings:
                            shown_warnings.add(w)
                            log(f"{tag}: warning (shown once): {w[:300]}")
                    extra = []
                    if r.revisits:
                        extra.append(f"{r.revisits} re-visits")
                    if r.unknown:
                        extra.append(f"{r.unknown} results outside the recorded space")
                    log(f"{tag}: {len(r.configs)} evaluations"
                        f"{' (+' + ', '.join(extra) + ')' if extra else ''}, best {r.best:.4f} ms "
                        f"({r.best / data.best:.4f} x optimum), simulated time {r.simulated_s:.1f} s, "
                        f"wall {r.wall_s:.1f} s")
                    if r.best < data.best - 1e-12:
                        log(f"{tag}: SANITY: best found {r.best} is below the space's best recorded mean {data.best}")
                    out.write(json.dumps({"set": label, "strategy": f"kt:{strategy}", "seed": seed,
                                          "configs": r.configs}) + "\n")
                    out.flush()
                    bests.append(r.best / data.best)
                    evals.append(len(r.configs))
                if bests:
                    bests.sort()
                    log(f"[{label}] kt:{strategy}: {len(bests)} runs, mean {sum(evals) / len(evals):.0f} evaluations, "
                        f"best/optimum median {bests[len(bests) // 2]:.4f}, worst {bests[-1]:.4f}")
    log(f"\n[kerneltuner] wrote {args.out} in {time.perf_counter() - t_all:.0f} s")
    if failures:
        log(f"[kerneltuner] {len(failures)} runs failed:")
        for label, strategy, seed, msg in failures:
            log(f"  {label} kt:{strategy} seed {seed}: {msg[:300]}")
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except UsageError as e:
        log(f"kerneltuner.py: error: {e}")
        sys.exit(2)
