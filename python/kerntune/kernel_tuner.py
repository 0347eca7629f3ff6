"""Kernel Tuner's tune_kernel and run_kernel on kerntune's engine.

A script written for Kernel Tuner 1.5 runs with its import lines naming kerntune instead
(`from kerntune import tune_kernel`, `import kerntune as kernel_tuner`, `from kerntune.util import
get_config_string`, `from kerntune.file_utils import store_output_file`) and nothing else changed.
It gets what Kernel Tuner returns, `(results, env)`: one dict per configuration evaluated (its
parameters, "time" in ms, "times", "compile_time", "verification_time", "benchmark_time",
"framework_time", "strategy_time", "timestamp", the metrics; "__error__" instead of the times
for one that failed), and a dict describing the run.

Under it is kerntune's engine, not Kernel Tuner's loop: variants compiled in parallel under
Kernel Tuner's compile contract, a race that stops measuring a configuration once it is out of
it (each configuration gets at most `iterations` measured runs), outputs compared with `answer`
(or `verify`) before a configuration is measured, every configuration run in a runner process
(one that crashes or poisons the device context is disqualified, RuntimeFailedConfig, and the
tuning goes on: on a CPU device an out-of-bounds kernel would take the script down), and decisions kept in
kerntune's persistent cache, so that a second run of the script measures nothing. The arguments
are copied to the device, never written back.

Where kerntune does otherwise than Kernel Tuner (each also said in env["kerntune"]):
  - a configuration whose output disagrees with the answer is disqualified (IncorrectConfig),
    where Kernel Tuner stops the whole tuning with a RuntimeError;
  - with an answer, the arguments it gives as None are inputs to kerntune: a configuration that
    writes into one is disqualified, saying so;
  - without an answer or verify function nothing is validated, as in Kernel Tuner;
  - one run of a configuration may take up to RUN_TIMEOUT_S (10 minutes), where Kernel Tuner
    sets no limit: a run past it is taken to hang, its runner is killed and the configuration
    disqualified (TimeoutConfig). (Not kerntune's default of 10 s: a kernel written for a GPU
    runs for seconds on a CPU device, and for several times longer on a busy machine.)
  - "time" is kerntune's estimate of the configuration's time (the race's, from its measured
    runs, which "times" lists); runs are timed back to back on a warm cache, as Kernel Tuner
    times them;
  - strategies map to kerntune's own (_STRATEGIES): brute_force to exhaustive, random_sample to
    random, and every heuristic (genetic_algorithm, simulated_annealing, bayes_opt, ...) to
    kerntune's auto search, which replays of six recordings found better at every budget tried
    (strategy_options {"kerntune_strategy": "genetic"} names one of kerntune's instead); their
    tuning knobs (popsize, maxiter, T, ...) do not exist there and are reported as ignored;
    max_fevals, time_limit and fraction are budgets and are honoured;
  - lang="CuPy" compiles with -ftz=true, as CuPy does (unless compiler_options names an -ftz);
    kerntune compiles with NVRTC itself for every CUDA lang, never through CuPy or PyCUDA;
  - lang="C", as Kernel Tuner's C backend: a function returning float or double returns its
    run's time in ms, which is the time recorded (a negative one fails the configuration:
    "returned 1"); one returning anything else is timed around the call. Code with device code in
    it (or CUDA's runtime) is CUDA host code, compiled by nvcc (KERNTUNE_NVCC) with the
    caller's compiler_options, each buffer registered as device-mapped host memory for each call,
    and kerntune's runners of this process then run without their address-space cap (a CUDA
    context reserves more than it allows);
  - KERNTUNE_BUDGET in the environment ("30s", "10" configurations, "5%") bounds every
    tune_kernel call that sets no budget of its own: for running scripts written for Kernel
    Tuner under a time limit, unedited (make check does). It is said on stderr.
An argument kerntune cannot honour is refused with NotImplementedError naming it.
"""

import hashlib
import inspect
import json
import logging
import os
import re
import sys
import time
import warnings
from collections import OrderedDict
from datetime import datetime, timezone

import numpy

from . import Context, Op, util

__all__ = ["tune_kernel", "run_kernel"]

# the longest one run of a configuration may take (the docstring says why it is not kerntune's 10 s)
RUN_TIMEOUT_S = 600.0

# Kernel Tuner's strategies, by the kerntune strategy that serves them. brute_force and
# random_sample say what they try (all, a sample) and get exactly that; the others are heuristic
# searches, and every one of them gets kerntune's `auto` (exhaustive when the budget covers the
# space, else a local search with far neighbours). Replayed on six recordings (the hub's
# convolution on the A4000, the W6600 and the H200, its dedispersion on the A4000 and the W6600,
# Kernel Tuner's OpenCL convolution on PoCL) with 40 evaluations, 1%, 5% and 15% of the space,
# `auto`'s median pick was as fast as kerntune's genetic algorithm's or faster on every one, and
# far faster at the small budgets where a population search has not left its first generations;
# Kernel Tuner's own genetic algorithm did no better than kerntune's (bench/RESULTS.md,
# 2026-12-02). strategy_options {"kerntune_strategy": NAME} asks for one of kerntune's strategies
# by name instead.
_STRATEGIES = {
    "brute_force": "exhaustive",
    "random_sample": "random",
}
_HEURISTICS = ("genetic_algorithm", "diff_evo", "pso", "firefly_algorithm", "simulated_annealing", "dual_annealing", "basinhopping",
               "greedy_ils", "greedy_mls", "mls", "ordered_greedy_mls", "minimize", "bayes_opt")
_STRATEGIES.update({name: "auto" for name in _HEURISTICS})
_KERNTUNE_STRATEGIES = ("exhaustive", "random", "local", "anneal", "genetic", "model", "auto")
_BUDGET_OPTIONS = ("max_fevals", "time_limit", "fraction")

_LANGUAGES = {"CUDA": "cuda", "CUPY": "cuda", "NVCUDA": "cuda", "PYCUDA": "cuda", "OPENCL": "opencl", "C": "c"}
_NAMES = {"cuda": "CUDA", "opencl": "OpenCL", "c": "C"}


def _refuse(what, why):
    raise NotImplementedError("kerntune.tune_kernel: %s: %s" % (what, why))


# ---- the kernel's source and its device ----------------------------------------------------------


def _read_source(kernel_source):
    """The kernel's text and the folders its other files are in (added as include paths)."""
    if callable(kernel_source):
        _refuse("kernel_source", "a function that writes the code for each configuration is not supported; pass the code")
    sources = list(kernel_source) if isinstance(kernel_source, (list, tuple)) else [kernel_source]
    if not sources:
        raise ValueError("kerntune.tune_kernel: kernel_source is empty")
    texts, folders = [], []
    for s in sources:
        s = os.fspath(s) if isinstance(s, os.PathLike) else s
        if not isinstance(s, str):
            raise TypeError("kerntune.tune_kernel: kernel_source: expected code or file names, got %r" % (type(s).__name__,))
        if "\n" not in s and os.path.isfile(s):
            with open(s) as f:
                texts.append(f.read())
            folders.append(os.path.dirname(os.path.abspath(s)))
        elif "\n" not in s and re.search(r"\.(cl|cu|cuh|c|h|hpp|cpp)$", s):
            raise FileNotFoundError("kerntune.tune_kernel: kernel_source: no file '%s' (from %s)" % (s, os.getcwd()))
        else:
            texts.append(s)
    return texts[0], sorted(set(folders))


def _cuda_host_code(source):
    """Kernel Tuner's rule for its C backend, which kerntune's follows: code with device code in it
    (or CUDA's runtime) is CUDA host code, compiled by nvcc (the C backend's cuda_host_code in
    src/backends/c.c decides the build; this, only the runners' address-space cap)."""
    return any(s in source for s in ("__global", "__syncthreads()", "threadIdx", "#include <cuda", "cudaMemcpy"))


def _compile_options(lang, compiler_options, folders):
    """The options kerntune compiles with: the caller's, -ftz=true for lang="CuPy" (CuPy adds it
    to every compile, so Kernel Tuner on CuPy measures kernels built that way: on the H200
    pnpoly's best configuration differs with and without it) unless the caller names an -ftz of
    its own, and an include path for each folder the kernel's files are in."""
    options = list(compiler_options or [])
    if str(lang).upper() == "CUPY" and not any(str(o).startswith(("-ftz", "--ftz")) for o in options):
        options.append("-ftz=true")
    return options + ["-I" + d for d in folders]


def _language(lang, source):
    if lang is None:
        return "cuda" if "__global__" in source else "opencl" if "__kernel" in source else "c"
    key = str(lang).upper()
    if key not in _LANGUAGES:
        _refuse("lang=%r" % (lang,), "kerntune builds CUDA, OpenCL and C")
    return _LANGUAGES[key]


def _device(ctx, backend, device, platform):
    """The index of the device Kernel Tuner's device (and, for OpenCL, platform) name."""
    devs = [d for d in ctx.devices() if d.backend == backend]
    if not devs:
        raise RuntimeError("kerntune.tune_kernel: no %s device here (`kerntune devices` lists what there is)" % _NAMES[backend])
    if isinstance(device, str):
        named = [d for d in devs if device in d.name]
        if not named:
            raise ValueError("kerntune.tune_kernel: device=%r: no %s device of that name" % (device, _NAMES[backend]))
        return named[0]
    if backend == "opencl":  # Kernel Tuner counts OpenCL devices within their platform
        platforms = []
        for d in devs:
            p = d.name[d.name.rfind("(") + 1 : -1] if d.name.endswith(")") else ""
            if p not in platforms:
                platforms.append(p)
        if not 0 <= platform < len(platforms):
            raise ValueError("kerntune.tune_kernel: platform=%d: there are %d OpenCL platforms" % (platform, len(platforms)))
        devs = [d for d in devs if d.name.endswith("(" + platforms[platform] + ")") or not platforms[platform]]
    if not 0 <= device < len(devs):
        raise ValueError("kerntune.tune_kernel: device=%d: there are %d %s devices" % (device, len(devs), _NAMES[backend]))
    return devs[device]


# ---- arguments ----------------------------------------------------------------------------------


def _dtype_name(a):
    d = getattr(a, "dtype", None)
    name = getattr(d, "name", None) or str(d)
    return name.replace("torch.", "")


def _is_array(a):
    return isinstance(a, numpy.ndarray) or hasattr(a, "__cuda_array_interface__") or hasattr(a, "__dlpack__")


def _arguments(arguments, answer, verify, cmem_args):
    """Declarations (name, dtype[, access]), the values to call with, and what validates."""
    if answer is not None and len(answer) != len(arguments):
        raise TypeError("kerntune.tune_kernel: the answer has %d entries and there are %d arguments" % (len(answer), len(arguments)))
    validated = answer is not None or verify is not None
    constants = {}
    for name, value in (cmem_args or {}).items():
        at = [i for i, a in enumerate(arguments) if a is value]
        if not at:
            _refuse("cmem_args[%r]" % name, "kerntune copies constant memory from a kernel argument; pass the same array among the arguments")
        constants[at[0]] = name
    decls, values = [], []
    for i, a in enumerate(arguments):
        name = constants.get(i, "arg%d" % i)
        if _is_array(a):
            if isinstance(a, numpy.ndarray) and not a.flags.c_contiguous:
                a = numpy.ascontiguousarray(a)
            out = answer is not None and answer[i] is not None
            # without validation nothing reads the outputs: run on the same device copies throughout,
            # never restored, as Kernel Tuner does (declared read-only to kerntune: nothing copied)
            access = "rw" if out or (answer is None and verify is not None) else "r"
            decls.append((name, _dtype_name(a), access))
        elif isinstance(a, numpy.generic):
            decls.append((name, a.dtype.name))
        else:
            raise TypeError(
                "kerntune.tune_kernel: argument %d is a %s: Kernel Tuner's arguments are numpy arrays and numpy scalars "
                "(numpy.int32(n), numpy.float32(x))" % (i, type(a).__name__)
            )
        values.append(a)
    return decls, values, constants, validated


def _answer_arrays(answer, values):
    """The answer's arrays in the dtype and size of their arguments, for kerntune's comparison."""
    out = {}
    for i, (e, a) in enumerate(zip(answer, values)):
        if e is None:
            continue
        if not isinstance(e, numpy.ndarray) or not isinstance(a, numpy.ndarray):
            raise TypeError(
                "kerntune.tune_kernel: answer[%d] is a %s: without a verify function the answer's entries are "
                "numpy arrays, like the arguments they stand for" % (i, type(e).__name__)
            )
        if not numpy.can_cast(a.dtype, e.dtype):
            raise TypeError("kerntune.tune_kernel: answer[%d] is %s, the argument %s" % (i, e.dtype, a.dtype))
        if e.size != a.size:
            raise ValueError("kerntune.tune_kernel: answer[%d] has %d elements, the argument %d" % (i, e.size, a.size))
        out[i] = numpy.ascontiguousarray(e, dtype=a.dtype).reshape(-1)
    return out


def _verify_wrapper(verify, answer, shapes, atol):
    """Kernel Tuner's verify(answer, result_host[, atol]) from kerntune's (expected, actual)."""
    try:
        params = inspect.signature(verify).parameters
        takes_atol = "atol" in params or any(p.kind == p.VAR_KEYWORD for p in params.values())
    except (TypeError, ValueError):
        takes_atol = True

    def check(expected, actual):
        host = [None if not isinstance(v, numpy.ndarray) else v.reshape(shapes[i]) for i, v in enumerate(actual)]
        ok = verify(answer, host, atol=atol) if takes_atol else verify(answer, host)
        return bool(ok)

    return check


# ---- the space ----------------------------------------------------------------------------------


def _plain(v):
    return v.item() if isinstance(v, numpy.generic) else v


def _expr(v, what):
    if isinstance(v, (int, numpy.integer)) and not isinstance(v, bool):
        return str(int(v))
    if isinstance(v, str):
        return "(" + v + ")"
    if callable(v):
        _refuse(what, "a function is not supported; give an expression of the parameters as a string")
    raise TypeError("kerntune.tune_kernel: %s: expected an int or a string expression, got %r" % (what, v))


def _problem(problem_size):
    if callable(problem_size):
        _refuse("problem_size", "a function is not supported; give ints, or expressions of the parameters as strings")
    sizes = list(problem_size) if isinstance(problem_size, (list, tuple)) else [problem_size]
    if not 1 <= len(sizes) <= 3:
        raise ValueError("kerntune.tune_kernel: problem_size: one to three dimensions, got %r" % (problem_size,))
    return [_expr(s, "problem_size") for s in sizes] + ["1"] * (3 - len(sizes))


def _geometry(problem_size, divs, tune_params, names):
    """The launch grid (in blocks) and block, as expressions of the parameters."""
    ps = _problem(problem_size)
    grid = []
    for d, (size, div) in enumerate(zip(ps, divs)):
        if div is None:
            div = [names[d]] if names[d] in tune_params else []
        elif isinstance(div, (str, int)):
            div = [div]
        parts = [_expr(x, "grid_div_" + "xyz"[d]) for x in div]
        by = " * ".join(parts) if parts else "1"
        grid.append(size if by == "1" else "(%s + (%s) - 1) // (%s)" % (size, by, by))
    block = [n if n in tune_params else default for n, default in zip(names, ("256", "1", "1"))]
    return grid, block


def _restrictions(restrictions):
    if restrictions is None:
        return []
    items = restrictions if isinstance(restrictions, (list, tuple)) else [restrictions]
    out = []
    for r in items:
        if isinstance(r, tuple) and len(r) == 2 and callable(r[0]):  # (function, parameter names)
            fn, names = r
            out.append(lambda c, fn=fn, names=tuple(names): fn(*(c[n] for n in names)))
        elif isinstance(r, str) or callable(r):
            out.append(r)
        else:
            raise TypeError("kerntune.tune_kernel: restrictions: expected strings or functions, got %r" % (r,))
    return out


def _defines(defines):
    out = {}
    for k, v in (defines or {}).items():
        if callable(v):
            _refuse("defines[%r]" % k, "a function is not supported; give its value")
        v = _plain(v)
        out[k] = repr(v) if isinstance(v, str) else str(int(v)) if isinstance(v, bool) else repr(v)
    return out


def _formatted(v):
    """A value as kerntune writes it in a configuration's text (bools as 1 or 0)."""
    if isinstance(v, bool):
        return "1" if v else "0"
    return repr(v) if isinstance(v, float) else str(v)


def _parse_config(text, tune_params, lookup):
    params = OrderedDict()
    fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part) if text else {}
    for k in tune_params:
        params[k] = lookup[k].get(fields.get(k), fields.get(k))
    return params


# ---- budgets and strategies ---------------------------------------------------------------------


def _env_budget():
    text = os.environ.get("KERNTUNE_BUDGET", "").strip()
    if not text:
        return None
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(s|%)?", text)
    if m is None:
        raise ValueError("KERNTUNE_BUDGET=%r: expected seconds ('30s'), configurations ('10') or a share of them ('5%%')" % text)
    value, unit = float(m.group(1)), m.group(2)
    return {"time_limit": value} if unit == "s" else {"fraction": value / 100} if unit == "%" else {"max_fevals": int(value)}


def _search(strategy, strategy_options, seed):
    """kerntune's strategy, the budget, and what was ignored or said about it."""
    name = strategy or "brute_force"
    if callable(getattr(strategy, "tune", None)):
        _refuse("strategy", "a strategy object of Kernel Tuner's is not supported; name one of %s" % ", ".join(sorted(_STRATEGIES)))
    if name not in _STRATEGIES:
        raise ValueError("kerntune.tune_kernel: unknown strategy %r; known: %s" % (name, ", ".join(sorted(_STRATEGIES))))
    options = dict(strategy_options or {})
    chosen = _STRATEGIES[name]
    if "kerntune_strategy" in options:
        chosen = options.pop("kerntune_strategy")
        if chosen not in _KERNTUNE_STRATEGIES:
            raise ValueError("kerntune.tune_kernel: strategy_options kerntune_strategy %r: not one of kerntune's strategies (%s)"
                             % (chosen, ", ".join(_KERNTUNE_STRATEGIES)))
    budget = {k: options.pop(k) for k in _BUDGET_OPTIONS if k in options}
    options.pop("searchspace_construction_options", None)
    notes = []
    if options:
        warnings.warn(
            "kerntune.tune_kernel: strategy_options %s: settings of Kernel Tuner's own %s, which kerntune's %s does not have; "
            "ignored" % (", ".join(sorted(options)), name, chosen),
            stacklevel=3,
        )
        notes.append("ignored strategy_options: " + ", ".join(sorted(options)))
    if name == "random_sample" and not budget:
        budget["fraction"] = 0.1  # Kernel Tuner's default for random_sample
    from_env = False
    if not budget:
        env = _env_budget()
        if env:
            budget, from_env = env, True
    return chosen, budget, from_env, notes, name


# ---- Kernel Tuner's cache file ------------------------------------------------------------------


def _cache_key(params):
    return ",".join(str(v) for v in params.values())


def _load_cache(path, kernel_name, tune_params, device_name):
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        text = f.read().strip()
    if text and not text.endswith("}"):  # as Kernel Tuner leaves a file it was writing
        text = text.rstrip(",\n ") + "}}"
    doc = json.loads(text) if text else {}
    if doc.get("kernel_name") not in (None, kernel_name):
        raise ValueError("kerntune.tune_kernel: cache %s holds results of kernel %r, not %r" % (path, doc.get("kernel_name"), kernel_name))
    if doc.get("tune_params_keys") not in (None, list(tune_params)):
        raise ValueError("kerntune.tune_kernel: cache %s holds results of other tuning parameters (%s)" % (path, doc.get("tune_params_keys")))
    if doc.get("device_name") not in (None, device_name):
        raise ValueError("kerntune.tune_kernel: cache %s holds results of device %r, not %r" % (path, doc.get("device_name"), device_name))
    markers = {c.__name__: c for c in (util.InvalidConfig, util.CompilationFailedConfig, util.RuntimeFailedConfig,
                                       util.IncorrectConfig, util.TimeoutConfig)}
    entries = {}
    for key, r in doc.get("cache", {}).items():
        if isinstance(r.get("__error__"), str):
            r["__error__"] = markers.get(r["__error__"], util.ErrorConfig)()
        entries[key] = r
    return entries


def _write_cache(path, kernel_name, tune_params, device_name, problem_size, entries, objective):
    doc = {
        "device_name": device_name,
        "kernel_name": kernel_name,
        "problem_size": problem_size if isinstance(problem_size, (int, str)) else list(problem_size),
        "tune_params_keys": list(tune_params),
        "tune_params": {k: [_plain(v) for v in vals] for k, vals in tune_params.items()},
        "objective": objective,
        "cache": entries,
    }
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, default=lambda o: str(o) if isinstance(o, util.ErrorConfig) else _plain(o))
    os.replace(tmp, path)


# ---- results ------------------------------------------------------------------------------------

_ERRORS = {
    "build_failed": util.CompilationFailedConfig,
    "failed": util.RuntimeFailedConfig,
    "crashed": util.RuntimeFailedConfig,
    "timeout": util.TimeoutConfig,
    "invalid": util.IncorrectConfig,
    "rejected": util.InvalidConfig,
}


def _result(unit, params, stamp, metrics):
    r = OrderedDict(params)
    if unit.outcome == "measured":
        times = [t / 1e6 for t in unit.runtimes_ns]
        r["time"] = unit.time_ns / 1e6
        r["times"] = times
        r["compile_time"] = unit.build_ms
        r["verification_time"] = unit.validation_ms
        r["benchmark_time"] = sum(times)
        r["framework_time"] = unit.framework_ms
        r["strategy_time"] = 0.0
        for name, m in (metrics or {}).items():
            r[name] = m(r) if callable(m) else eval(m, {"__builtins__": {}}, dict(r))
    else:
        r["__error__"] = _ERRORS.get(unit.outcome, util.RuntimeFailedConfig)(unit.message)
        r["compile_time"] = unit.build_ms
        r["verification_time"] = unit.validation_ms
        r["benchmark_time"] = 0.0
        r["framework_time"] = unit.framework_ms
        r["strategy_time"] = 0.0
    r["timestamp"] = stamp
    return r


def _printer(tune_params, quiet, verbose):
    keys = list(tune_params)

    def show(r):
        if quiet:
            return
        if "__error__" in r:
            if verbose:
                print(util.get_config_string(r, keys) + ", " + str(r["__error__"]) + ": " + getattr(r["__error__"], "message", ""))
            return
        shown = {k: r[k] for k in keys}
        shown["time"] = r["time"]
        print(util.get_config_string(shown, units={"time": "ms"}))

    return show


# ---- tune_kernel --------------------------------------------------------------------------------


def tune_kernel(
    kernel_name,
    kernel_source,
    problem_size,
    arguments,
    tune_params,
    grid_div_x=None,
    grid_div_y=None,
    grid_div_z=None,
    restrictions=None,
    answer=None,
    atol=1e-6,
    verify=None,
    verbose=False,
    lang=None,
    device=0,
    platform=0,
    smem_args=None,
    cmem_args=None,
    texmem_args=None,
    compiler=None,
    compiler_options=None,
    defines=None,
    log=None,
    iterations=7,
    block_size_names=None,
    quiet=False,
    strategy=None,
    strategy_options=None,
    cache=None,
    metrics=None,
    simulation_mode=None,
    parallel=None,
    observers=None,
    objective=None,
    objective_higher_is_better=None,
    objectives=None,
    seed=None,
):
    """Tunes kernel_name of kernel_source over tune_params, as Kernel Tuner 1.5's tune_kernel
    does, on kerntune's engine (this module's docstring says where the two differ). Returns
    (results, env)."""
    started = time.perf_counter()
    for what, value, why in (
        ("smem_args", smem_args, "dynamic shared memory sizes per configuration are not supported"),
        ("texmem_args", texmem_args, "texture memory is not supported"),
        ("observers", observers, "kerntune measures time only"),
        ("simulation_mode", simulation_mode, "replay recorded results with `kerntune tune --replay`"),
        ("objectives", objectives, "kerntune optimises one objective: time"),
        ("compiler", compiler, "kerntune compiles with NVRTC (CUDA), the OpenCL platform, or the system's C compiler"),
    ):
        if value:
            _refuse(what, why)
    if parallel:
        _refuse("parallel", "kerntune builds in parallel by itself and measures one configuration at a time")
    if objective not in (None, "time") or objective_higher_is_better:
        _refuse("objective=%r" % (objective,), "kerntune minimises time; the metrics are computed on the results")
    if not isinstance(tune_params, dict) or not tune_params:
        raise ValueError("kerntune.tune_kernel: tune_params must be a dict of parameter names to lists of values")
    source, folders = _read_source(kernel_source)
    backend = _language(lang, source)
    if backend == "c" and _cuda_host_code(source) and "KERNTUNE_RUNNER_MEMORY_MB" not in os.environ:
        # CUDA host code (compiled by nvcc) starts a CUDA context in kerntune's runner, which
        # reserves more address space than the runner's cap on host code allows: no cap, from
        # here on in this process
        os.environ["KERNTUNE_RUNNER_MEMORY_MB"] = "0"
    names = list(block_size_names or []) + ["block_size_x", "block_size_y", "block_size_z"][len(block_size_names or []) :]
    decls, values, constants, validated = _arguments(arguments, answer, verify, cmem_args)
    kt_strategy, budget, env_budget, notes, ks_name = _search(strategy, strategy_options, seed)

    ctx = Context(backends=backend)  # its language's backend alone: starting the others costs time, not devices it uses
    if log:
        ctx.set_log_level("debug" if log <= logging.DEBUG else "info")
    dev = _device(ctx, backend, device, platform)
    if iterations >= 3:
        ctx.set_race(max_runs=int(iterations))
    else:
        ctx.set_measure(warmup_runs=1, min_runs=int(iterations), max_runs=int(iterations), min_time_s=0.0)
    ctx.set_flush("off")

    # the op's name says how it is validated, so that the persistent cache never serves a decision
    # made under other validation
    if verify is not None:
        tag = "verify " + hashlib.sha256((_code_digest(verify) + repr(atol)).encode()).hexdigest()[:12]
    elif answer is not None:
        h = hashlib.sha256(repr(atol).encode())
        for e in answer:
            if e is not None:
                h.update(numpy.ascontiguousarray(e).tobytes())
        tag = "answer " + h.hexdigest()[:12]
    else:
        tag = "unvalidated"
    # every configuration in a runner process: one that crashes (an out-of-bounds kernel on a CPU
    # device takes the process down) is disqualified, and the script goes on
    op = Op(ctx, "%s [%s]" % (kernel_name[:90], tag), decls, device=dev.index, isolation="on")
    op.set_timeout(RUN_TIMEOUT_S)
    for k, i in enumerate(i for i in range(len(decls)) if len(decls[i]) == 3):
        if k < 8:
            op.key_arg(i)  # each buffer's size: another size is another key
    for i in constants:
        op.set_constant(i)

    params = OrderedDict((k, [_plain(v) for v in vals]) for k, vals in tune_params.items())
    lookup = {k: {_formatted(v): v for v in vals} for k, vals in params.items()}
    constraints = _restrictions(restrictions)

    cache_path = None
    cached = {}
    if cache:
        cache_path = os.fspath(cache)
        cache_path = cache_path if cache_path.endswith(".json") else cache_path + ".json"
        cached = _load_cache(cache_path, kernel_name, params, dev.name)
        if cached:
            constraints.append(lambda c: _cache_key(OrderedDict((k, c[k]) for k in params)) not in cached)

    grid, block = _geometry(problem_size, (grid_div_x, grid_div_y, grid_div_z), params, names)
    # as Kernel Tuner's space leaves out blocks of more threads than the device allows
    max_threads = ctx.device_limits(dev.index)[0]
    used = [n for n in names if n in params]
    if max_threads > 0 and used:
        constraints.append("%s <= %d" % (" * ".join(used), max_threads))
    options = _compile_options(lang, compiler_options, folders)
    op.add_variants(
        "kernel", params, source, kernel_name, constraints=constraints, options=options, grid=grid, block=block,
        derived=_defines(defines) or None, kernel_tuner=True, block_size_names=names,
    )

    shapes = [getattr(a, "shape", ()) for a in values]
    if verify is not None:
        op.set_answer({})  # the reference writes nothing: verify judges the outputs alone
        op.set_verify(_verify_wrapper(verify, answer, shapes, atol))
    elif answer is not None:
        op.set_answer(_answer_arrays(answer, values))
        op.set_tolerance(float(atol), 1e-5)  # numpy.allclose's relative tolerance, as Kernel Tuner compares
    else:
        op.set_validation(False)
    op.set_search(kt_strategy, seed=int(seed) if seed is not None else 0)
    if budget:
        op.set_budget(
            units=int(budget.get("max_fevals", 0)),
            seconds=max(float(budget.get("time_limit", 0)) - (time.perf_counter() - started), 0.001) if "time_limit" in budget else 0.0,
            fraction=float(budget.get("fraction", 0.0)),
        )
        if env_budget:
            print("kerntune.tune_kernel: KERNTUNE_BUDGET=%s bounds this tuning of %s" % (os.environ["KERNTUNE_BUDGET"], kernel_name),
                  file=sys.stderr)

    show = _printer(params, quiet, verbose)
    stamps, order = {}, []

    def on_unit(index, config, outcome, time_ns, runs, message):
        stamps[index] = str(datetime.now(timezone.utc))
        order.append(index)

    ctx.set_unit_fn(on_unit)
    if not quiet:
        print("Using: " + dev.name)
    everything_cached = bool(cached) and _all_cached(params, cached, restrictions)
    decision = None
    if not everything_cached:
        op.tune(*values)
        decision = op.decision(*values)

    results = [dict(r) for r in cached.values()]
    if decision is not None:
        units = decision.units if decision.source != "cache" else _recorded_units(ctx, op, dev, decision)
        seen = set(order)
        # units a tuning reported as it went, in that order; then those it knew from the persistent
        # cache (never reported: nothing ran), in the space's order
        ran = units.ran() if hasattr(units, "ran") else [i for i, u in enumerate(units) if u.outcome != "not_run"]
        rest = [i for i in ran if i not in seen]
        for i in order + rest:
            u = units[i]
            r = _result(u, _parse_config(u.config, params, lookup), stamps.get(i, str(datetime.now(timezone.utc))), metrics)
            show(r)
            results.append(r)
    if cache_path:
        _write_cache(cache_path, kernel_name, params, dev.name, problem_size,
                     OrderedDict((_cache_key(OrderedDict((k, r[k]) for k in params)), r) for r in results), "time")

    valid = [r for r in results if "__error__" not in r and "time" in r]
    env = OrderedDict(
        device_name=dev.name,
        iterations=iterations,
        # numpy scalars as Python's (pnpoly.py's size is a numpy.int32), so that env stays JSON
        problem_size=type(problem_size)(_plain(v) for v in problem_size) if isinstance(problem_size, (list, tuple))
        else _plain(problem_size),
        compiler_options=list(compiler_options or []),
        kerntune_version=_version(),
    )
    for key in ("framework", "strategy", "compile", "verification", "benchmark"):
        env["total_%s_time" % key] = sum(r.get(key + "_time", 0) for r in results)
    env["overhead_time"] = 1000 * (time.perf_counter() - started)
    env["kerntune"] = OrderedDict(
        strategy="%s for Kernel Tuner's %s" % (kt_strategy, ks_name),
        budget=budget or None,
        budget_from="KERNTUNE_BUDGET" if env_budget else "strategy_options" if budget else None,
        validation="verify function" if verify is not None else "answer" if answer is not None else "off (no answer or verify given)",
        source=decision.source if decision is not None else "Kernel Tuner's cache file",
        evaluated=len(results),
        flush="off: runs back to back on a warm cache",
        notes=notes,
    )
    if valid:
        best = min(valid, key=lambda r: r["time"])
        env["best_config"] = best
        if not quiet:
            print("\nbest performing configuration:")
            print(util.get_config_string(best, list(params) + ["time"] + list(metrics or {}), {"time": "ms"}))
    elif not quiet:
        print("no results to report")
    return results, env


def _recorded_units(ctx, op, dev, decision):
    """A decision served by kerntune's persistent cache holds its winner alone; the record of every
    configuration's outcome comes from the cache's wisdom (the entry of this op, device and
    winner decided last)."""
    from . import Unit

    doc = json.loads(ctx.export_wisdom(op=op.name, device=dev.fingerprint))
    entries = [e for e in doc.get("entries", []) if (e.get("winner") or {}).get("config") == decision.winner.config]
    if not entries:
        return decision.units
    entry = max(entries, key=lambda e: e.get("created") or 0)
    return [
        Unit(u.get("config") or u.get("candidate", ""), u.get("outcome", "not_run"), u.get("time_ns") or -1.0, u.get("runs") or 0,
             u.get("message") or "", u.get("candidate", ""))
        for u in entry.get("units", [])
    ]


def _all_cached(params, cached, restrictions):
    """Whether Kernel Tuner's cache file holds every configuration (the restrictions' strings are
    not evaluated here: with restrictions, kerntune enumerates the rest)."""
    if restrictions:
        return False
    count = 1
    for vals in params.values():
        count *= len(vals)
    return len(cached) >= count


def _code_digest(fn):
    code = getattr(fn, "__code__", None)
    return (code.co_code.hex() + repr(code.co_consts)) if code is not None else repr(fn)


def _version():
    from . import version

    return version()


# ---- run_kernel ---------------------------------------------------------------------------------


def run_kernel(
    kernel_name,
    kernel_source,
    problem_size,
    arguments,
    params,
    grid_div_x=None,
    grid_div_y=None,
    grid_div_z=None,
    lang=None,
    device=0,
    platform=0,
    smem_args=None,
    cmem_args=None,
    texmem_args=None,
    compiler=None,
    compiler_options=None,
    defines=None,
    block_size_names=None,
    quiet=False,
    log=None,
):
    """Compiles kernel_name with the one configuration params and runs it once on copies of the
    arguments; returns every argument's state after the run (arrays as new numpy arrays, scalars
    as they were given), as Kernel Tuner's run_kernel does."""
    for what, value in (("smem_args", smem_args), ("texmem_args", texmem_args), ("compiler", compiler)):
        if value:
            _refuse("run_kernel: " + what, "not supported")
    source, folders = _read_source(kernel_source)
    backend = _language(lang, source)
    names = list(block_size_names or []) + ["block_size_x", "block_size_y", "block_size_z"][len(block_size_names or []) :]
    decls, values, constants, _ = _arguments(arguments, None, None, cmem_args)
    decls = [(d[0], d[1], "rw") if len(d) == 3 else d for d in decls]  # every array comes back
    ctx = Context(cache="off", backends=backend)
    if log:
        ctx.set_log_level("debug" if log <= logging.DEBUG else "info")
    dev = _device(ctx, backend, device, platform)
    op = Op(ctx, kernel_name[:120], decls, device=dev.index)
    for i in constants:
        op.set_constant(i)
    one = OrderedDict((k, [_plain(v)]) for k, v in params.items())
    grid, block = _geometry(problem_size, (grid_div_x, grid_div_y, grid_div_z), one, names)
    op.add_variants("kernel", one, source, kernel_name, options=_compile_options(lang, compiler_options, folders),
                    grid=grid, block=block, derived=_defines(defines) or None, kernel_tuner=True, block_size_names=names)
    op.set_effort("off")  # no tuning: the one configuration, launched once
    outputs = [numpy.array(a, copy=True) if isinstance(a, numpy.ndarray) else a for a in values]
    op(*outputs)
    return outputs
