"""kerntune.triton: a drop-in for @triton.autotune, deciding by kerntune's race.

    import kerntune.triton

    @kerntune.triton.autotune(configs=[triton.Config({"BLOCK": 128}, num_warps=4), ...], key=["n"])
    @triton.jit
    def kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr): ...

    kernel[grid](x, y, n)

It takes triton.autotune's arguments (configs, key, prune_configs_by, reset_to_zero,
restore_value, pre_hook, post_hook, warmup, rep, use_cuda_graph, do_bench, cache_results) and
behaves as Triton's autotuner does, with these differences:

  - every tensor argument is protected while tuning: kerntune keeps a copy of each on the device
    and restores it before every run, so the caller's tensors hold, after the first call for a
    key, what one launch of the chosen config produces (Triton's runs every config on them, so an
    in-place kernel comes back changed many times over: Triton issue #1563). `read_only=[names]`
    leaves such arguments out of it (no copy, and a config that writes one is disqualified);
    restore_value is then implied for the others, and reset_to_zero zeroes its tensors before
    every benchmark run and before the winner's launch, as Triton does;
  - configs are compared as kerntune compares candidates: each config's first run is validated
    against the first config's output (floats within kerntune's tolerances for their type;
    `validate=False` turns it off), then the race measures by the device's events, dropping a
    config once it is out of the race; a config that fails to compile or launch is disqualified
    with its error as the reason;
  - the configs are compiled before the race, where Triton's autotuner compiles each at its
    first benchmark run, one after another: first in forked processes (compile_processes=False
    or KERNTUNE_TRITON_PROCESSES=0 turns this off), one per config up to the processors and one
    that builds their launcher, which leave the kernels and the launcher in Triton's on-disk
    cache (Triton's compiler holds the GIL for most of its work, so threads of one process
    compile little faster than one); then, on compile_threads threads (default: one per config,
    up to the processors) through Triton's AsyncCompileMode, each kernel is compiled (now found
    in that cache) and loaded in this process. A child touches no CUDA: a stand-in driver gives
    it this process's device and target. Configs already in the cache get no child. Children still running after
    COMPILE_PROCESS_TIMEOUT_S are killed and their configs compiled here. These compiles are
    keyed in Triton's cache by a stamp of Triton's installation (its files' sizes, times and
    inodes: _installation_stamp) rather than by triton_key(), the hash of their contents that
    costs Triton's first compile in every process 0.4 s (KERNTUNE_TRITON_KEY=triton keeps
    Triton's own key);
  - decisions go to kerntune's persistent cache (a second process measures nothing: a decision
    is final, never re-raced, as Triton's are), and from
    there to its wisdom and its fleet cache; the first call of a key waits for the work already on
    the caller's stream, tunes on kerntune's own, then launches the winner on the caller's stream;
  - a key those caches hold is looked up (Op.recall) before anything is loaded: beside the
    compiling children when Triton's cache lacks configs and kerntune's context is yet to start
    (its start overlaps theirs), before forking any once it runs (a later key or kernel of the
    process): a recorded decision stops them or spares them, and the
    winner alone is compiled (or loaded from Triton's cache) and launched, on zeroed reset_to_zero
    tensors as the race's winner is;
  - every later call is a dictionary look-up and the launch, as in Triton's autotuner;
  - do_bench (a timer of one's own) cannot replace kerntune's race: refused; warmup, rep and
    use_cuda_graph, deprecated in Triton, are ignored with a warning (kerntune's race decides how
    many runs each config gets).
"""

import contextlib
import hashlib
import os
import signal
import time
import warnings
from collections import namedtuple
from concurrent.futures import ThreadPoolExecutor

import triton
from triton.runtime.jit import KernelInterface

from . import Context, Op

__all__ = ["autotune", "Autotuner", "context"]

_context = None
_ops = {}  # op name -> (context, Op, holder): one op per kernel source, signature and configs in a context

# how long the compiling children may take, all together, before they are killed and the configs
# are compiled in this process (Triton itself sets no limit on a compile)
COMPILE_PROCESS_TIMEOUT_S = 600.0


def context():
    """The kerntune Context every autotuner of this process shares (the persistent cache in the
    user's cache directory, or KERNTUNE_CACHE)."""
    global _context
    if _context is None:
        # CUDA's backend alone: starting OpenCL's (every platform installed) cost 0.15-0.75 s of
        # the first call on the H200 machine
        _context = Context(backends="cuda")
    return _context


def _cuda_device(ctx, torch_index):
    cuda = [d for d in ctx.devices() if d.backend == "cuda"]
    if torch_index >= len(cuda):
        raise RuntimeError("kerntune.triton: kerntune sees %d CUDA devices, the tensors are on cuda:%d" % (len(cuda), torch_index))
    return cuda[torch_index].index


def _key_int(v):
    """A Triton key value as the int64 kerntune keys by."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    h = hashlib.sha256(repr(v).encode()).digest()
    return int.from_bytes(h[:8], "little", signed=True)


class _Device:
    """Device memory at an address, as __cuda_array_interface__ describes it (torch.as_tensor reads
    it without a copy)."""

    def __init__(self, ptr, shape, strides, typestr):
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": tuple(shape), "strides": tuple(strides),
                                         "typestr": typestr, "version": 3}


def _at(ptr, t):
    """Tensor t's shape, strides and type at another address (kerntune's copy of it while tuning),
    as a torch tensor over that memory."""
    import torch

    name, typestr = _dtype(t)
    size = t.element_size()
    if name == "bfloat16":  # no array typestr names it: view 16-bit integers
        typestr = "<i2"
    view = torch.as_tensor(_Device(ptr, t.shape, [s * size for s in t.stride()], typestr), device=t.device)
    return view.view(t.dtype) if view.dtype != t.dtype else view


class _Span:
    """A tensor's memory for kerntune: __cuda_array_interface__ over every element its strides
    reach, from its first."""

    def __init__(self, t, typestr):
        span = 1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride())) if t.numel() else 0
        self.__cuda_array_interface__ = {"data": (t.data_ptr(), False), "shape": (span,), "typestr": typestr, "version": 3}
        self.numel = span


_TYPESTR = {"float16": "<f2", "bfloat16": "<V2", "float32": "<f4", "float64": "<f8", "int8": "|i1", "int16": "<i2",
            "int32": "<i4", "int64": "<i8", "uint8": "|u1", "bool": "|u1"}


def _dtype(t):
    name = str(t.dtype).replace("torch.", "")
    if name not in _TYPESTR:
        raise TypeError("kerntune.triton: tensors of %s are not supported" % name)
    return ("uint8" if name == "bool" else name), _TYPESTR[name]


_stamp = None


def _installation_stamp():
    """What kerntune keys Triton's compiles by in place of Triton's triton_key(): the version and
    the size, modification time and inode of each file triton_key() reads (its cache module, the
    Python modules of its compiler and backends, libtriton), where triton_key() hashes their
    contents (0.39 s on the H200 machine, paid by the first compile of every process). A
    reinstalled or upgraded Triton rewrites those files, and so changes the stamp."""
    global _stamp
    if _stamp is None:
        base = os.path.dirname(os.path.abspath(triton.__file__))
        paths = [os.path.join(base, "runtime", "cache.py")]
        for sub in ("compiler", "backends"):
            for root, dirs, files in os.walk(os.path.join(base, sub)):
                dirs.sort()
                paths += [os.path.join(root, f) for f in sorted(files) if f.endswith(".py")]
        lib = os.path.join(base, "_C")
        paths += [os.path.join(lib, f) for f in sorted(os.listdir(lib)) if f.startswith("libtriton")] if os.path.isdir(lib) else []
        h = hashlib.sha256(triton.__version__.encode())
        for path in paths:
            st = os.stat(path)
            h.update(("%s %d %d %d\n" % (path, st.st_size, st.st_mtime_ns, st.st_ino)).encode())
        _stamp = "%s-kerntune-stat-%s" % (triton.__version__, h.hexdigest())
    return _stamp


@contextlib.contextmanager
def _stamped_compiles():
    """Triton's compiles inside (this autotuner's, in this process and in the children it forks)
    keyed by _installation_stamp() instead of triton_key(). The key names a compiled kernel's
    place in Triton's on-disk cache and nothing else: the kernel is compiled from the same source
    and options either way, so a compile of another thread of the program meanwhile is as correct
    as ever, only cached under the stamp's name. KERNTUNE_TRITON_KEY=triton keeps Triton's own."""
    try:
        import triton.runtime.cache as cache
    except ImportError:
        cache = None
    real = getattr(cache, "triton_key", None)
    if real is None or os.environ.get("KERNTUNE_TRITON_KEY") == "triton":
        yield
        return
    stamp = _installation_stamp()
    cache.triton_key = lambda: stamp
    try:
        yield
    finally:
        cache.triton_key = real


def _binder(fn, device, target):
    """fn's JIT entry for device as Triton's JIT makes it at a first launch (create_binder), made
    with target where Triton's driver has not been started: its first use in a process builds a
    C module with the system's compiler (0.4 s on the H200 machine with an empty cache)."""
    if device not in fn.device_caches:
        from triton.compiler import ASTSource, CompiledKernel, compile, make_backend
        from triton.runtime.jit import create_function_from_signature

        backend = make_backend(target)
        fn.CompiledKernel, fn.compile, fn.ASTSource = CompiledKernel, compile, ASTSource
        fn.device_caches[device] = ({}, {}, target, backend, create_function_from_signature(fn.signature, fn.params, backend))
    return fn.device_caches[device]


# what _config_source finds of a config: whether this process holds its kernel, its ASTSource,
# and the hash and metadata file naming its place in Triton's on-disk cache
_Source = namedtuple("_Source", "loaded src hash metadata")


def _config_source(fn, args, kwargs, config, driver=None):
    """What Triton's JIT (3.6) makes of a launch of fn with config before it compiles: whether
    this process holds the kernel already, the kernel's ASTSource, and where Triton's on-disk
    cache keeps it compiled (the hash and the metadata file's name); None where this Triton does
    it otherwise. Nothing is compiled. With driver (a _ChildDriver), Triton's own is not asked."""
    try:
        from triton.compiler.compiler import get_cache_invalidating_env_vars, make_backend
        from triton.runtime.cache import get_cache_key
        from triton.runtime.jit import compute_cache_key

        kw = dict(kwargs, **config.all_kwargs())
        kw["debug"] = kw.get("debug", fn.debug) or triton.knobs.runtime.debug
        kw["instrumentation_mode"] = triton.knobs.compilation.instrumentation_mode
        if driver is None:
            drv = triton.runtime.driver.active
            entry = fn.device_caches[drv.get_current_device()]
        else:
            entry = _binder(fn, driver.get_current_device(), driver.get_current_target())
        kernel_cache, kernel_key_cache, target, backend, binder = entry
        bound_args, specialization, options = binder(*args, **kw)
        loaded = compute_cache_key(kernel_key_cache, specialization, options) in kernel_cache
        options, signature, constexprs, attrs = fn._pack_args(backend, kw, bound_args, specialization, options)
        src = fn.ASTSource(fn, signature, constexprs, attrs)
        backend = make_backend(target)
        options = backend.parse_options(dict(options.__dict__, **src.parse_options()))
        key = get_cache_key(src, backend, options, get_cache_invalidating_env_vars())
        return _Source(loaded, src, hashlib.sha256(key.encode("utf-8")).hexdigest(), "%s.json" % src.name[:150])
    except Exception:  # noqa: BLE001 - another Triton: compiled as it compiles
        return None


def _cached(fn, args, kwargs, config, driver=None):
    """Whether config's kernel is compiled: held by this process, or in Triton's on-disk cache
    (False when that cannot be told)."""
    made = _config_source(fn, args, kwargs, config, driver)
    if made is None:
        return False
    if made.loaded:
        return True
    try:
        from triton.runtime.cache import get_cache_manager

        group = get_cache_manager(made.hash).get_group(made.metadata)
        return bool(group) and made.metadata in group
    except Exception:  # noqa: BLE001
        return False


def _build_launcher(fn, args, kwargs, config):
    """Builds (into Triton's cache) the C launcher Triton makes for fn's signature, before any
    config is compiled: its source depends on the arguments' types and the constexprs, not on the
    compiled kernel, so every config's compile finds it built. A kernel whose launcher needs its
    compile's results (tensor descriptors) gets another launcher at its load, as it would have."""
    made = _config_source(fn, args, kwargs, config)
    if made is None:
        return
    src = made.src

    class Metadata:  # what the launcher's constructor reads of a compiled kernel; the rest is read after the build
        tensordesc_meta = None

    try:
        triton.runtime.driver.active.launcher_cls(src, Metadata())
    except Exception:  # noqa: BLE001 - built (or not) by then; a compiled kernel's metadata answers the rest
        pass


class _ChildDriver:
    """Triton's driver as a compiling child needs it: the parent's device and target, no stream,
    and the launcher class; anything else fails that child's compile, which the parent then
    does itself."""

    def __init__(self, device, target, launcher_cls):
        self.device, self.target, self.launcher_cls = device, target, launcher_cls

    def get_current_device(self):
        return self.device

    def get_current_stream(self, device=None):
        return 0

    def get_current_target(self):
        return self.target


def _child_driver():
    """The stand-in driver for children compiling for this process's current CUDA device, made
    without Triton's driver (as Triton's CUDA driver makes the target: the compute capability as
    one number, warps of 32); None on other GPUs or where this Triton names things otherwise."""
    try:
        import torch

        if getattr(torch.version, "hip", None) or not torch.version.cuda:
            return None
        from triton.backends.compiler import GPUTarget
        from triton.backends.nvidia.driver import CudaLauncher

        device = torch.cuda.current_device()
        major, minor = torch.cuda.get_device_capability(device)
        return _ChildDriver(device, GPUTarget("cuda", major * 10 + minor, 32), CudaLauncher)
    except Exception:  # noqa: BLE001
        return None


class Autotuner(KernelInterface):
    """triton.autotune's Autotuner, deciding with kerntune (see the module's docstring)."""

    def __init__(self, fn, arg_names, configs, key, reset_to_zero=None, restore_value=None, pre_hook=None, post_hook=None,
                 prune_configs_by=None, warmup=None, rep=None, use_cuda_graph=False, do_bench=None, cache_results=False,
                 read_only=None, validate=True, compile_threads=None, compile_processes=None):
        if do_bench is not None:
            raise NotImplementedError("kerntune.triton.autotune: do_bench: kerntune measures every config with its race on the "
                                      "device's events; a timer of one's own cannot replace it")
        if warmup is not None or rep is not None or use_cuda_graph:
            warnings.warn("kerntune.triton.autotune: warmup, rep and use_cuda_graph are ignored (deprecated in Triton too): "
                          "kerntune's race decides how many runs each config gets", DeprecationWarning, stacklevel=3)
        self.fn = fn
        self.base_fn = fn
        while not callable(getattr(self.base_fn, "__code__", None)) and hasattr(self.base_fn, "fn"):
            self.base_fn = self.base_fn.fn
        self.arg_names = list(arg_names)
        self.configs = list(configs) if configs else [triton.Config({}, num_warps=4, num_stages=3, num_ctas=1)]
        self.keys = list(key)
        self.reset_to_zero = list(reset_to_zero or [])
        self.restore_value = list(restore_value or [])
        self.user_pre_hook, self.user_post_hook = pre_hook, post_hook
        prune = prune_configs_by or {}
        self.perf_model = prune.get("perf_model")
        self.configs_top_k = prune.get("top_k", 1.0)
        self.early_config_prune = prune.get("early_config_prune")
        self.read_only = set(read_only or [])
        self.validate = validate
        self.cache = {}  # the Triton key -> the Config chosen (the hit path)
        self.best_config = None
        self.configs_timings = {}
        self.bench_time = 0.0
        self.nargs = None
        self._call = None  # the call being tuned: (args, kwargs, grid, caller's stream)
        self._tuned_configs = None  # its configs, as its op's candidates number them
        src = getattr(fn, "cache_key", None) or getattr(fn, "src", None) or repr(fn)
        self._source = hashlib.sha256(str(src).encode()).hexdigest()[:16]
        # the hit path: the key's positions among the arguments, and each key's config with its
        # keyword arguments made once
        self._kpos = [self.arg_names.index(k) for k in self.keys if k in self.arg_names]
        self._hits = {}
        self.compile_threads = compile_threads
        if compile_processes is None:
            compile_processes = os.environ.get("KERNTUNE_TRITON_PROCESSES", "1") != "0"
        self.compile_processes = bool(compile_processes) and hasattr(os, "fork")
        self.compile_time = 0.0
        self.process_compile_time = 0.0

    # ---- Triton's key and pruning, as its autotuner computes them ----

    def _key(self, all_args):
        _args = {k: v for k, v in all_args.items() if k in self.arg_names}
        key = [_args[k] for k in self.keys if k in _args]
        key += [str(a.dtype) for a in _args.values() if hasattr(a, "dtype")]
        return tuple(key)

    def prune_configs(self, kwargs):
        configs = self.configs
        if self.early_config_prune:
            configs = self.early_config_prune(self.configs, self.nargs, **kwargs)
            if not configs:
                raise triton.runtime.errors.AutotunerError("No valid autotuner configs after pruning. `early_config_prune` "
                                                           "should return at least one config.")
        if self.perf_model:
            top_k = self.configs_top_k
            if isinstance(top_k, float) and top_k <= 1.0:
                top_k = int(len(self.configs) * top_k)
            elif not isinstance(top_k, int):
                raise TypeError("Error while pruning configs, top_k must be either 1) a float <= 1.0 or 2) an int")
            if len(configs) > top_k:
                est = {c: self.perf_model(**self.nargs, **kwargs, **c.all_kwargs()) for c in configs}
                configs = sorted(est, key=lambda c: est[c])[:top_k]
        return list(configs)

    # ---- calls ----

    def _args_key(self, args):
        """Triton's key for a call whose arguments are all positional (as _key computes it)."""
        n = len(args)
        key = [args[i] for i in self._kpos if i < n]
        key += [str(a.dtype) for a in args[:len(self.arg_names)] if hasattr(a, "dtype")]
        return tuple(key)

    def run(self, *args, grid=None, warmup=False, **kwargs):
        if not kwargs and not warmup:  # the hit path: a key already decided, no keyword arguments
            hit = self._hits.get(self._args_key(args))
            if hit is not None:
                config, config_kwargs = hit
                self.best_config = config
                if config.pre_hook is not None:
                    config.pre_hook({**dict(zip(self.arg_names, args)), **config_kwargs})
                return self.fn.run(*args, grid=grid, warmup=False, **config_kwargs)
        self.nargs = dict(zip(self.arg_names, args))
        if warmup:  # compile every config, run none (Triton's warmup)
            out = [self.fn.run(*args, grid=grid, warmup=True, **kwargs, **c.all_kwargs()) for c in self.prune_configs(kwargs)]
            self.nargs = None
            return out
        if len(self.configs) == 1:
            config = self.configs[0]
        else:
            key = self._key({**self.nargs, **kwargs})
            config = self.cache.get(key)
            if config is None:
                config, launched = self._tune(key, args, kwargs, grid)
                self.cache[key] = config
                self._hits[key] = (config, config.all_kwargs())
                if launched:  # the race launched the winner on the caller's stream
                    self.best_config = config
                    self.nargs = None
                    return None
                given = {**self.nargs, **kwargs}
                for n in self.reset_to_zero:  # recalled: launched below on zeroes, as the race's winner is
                    given[n].zero_()
        self.best_config = config
        if config.pre_hook is not None:
            config.pre_hook({**self.nargs, **kwargs, **config.all_kwargs()})
        ret = self.fn.run(*args, grid=grid, warmup=False, **kwargs, **config.all_kwargs())
        self.nargs = None
        return ret

    def _tune(self, key, args, kwargs, grid):
        """Decides key: (config, False) when kerntune's caches record the decision (the persistent
        cache, wisdom, the fleet's: only the winner is compiled, from Triton's cache where it is
        there, and the caller launches it), else (config, True): every config compiled, then
        kerntune's race, which launches the winner on the caller's stream."""
        import torch

        configs = self.prune_configs(kwargs)
        tensors = [(i, a) for i, a in enumerate(args) if hasattr(a, "data_ptr") and hasattr(a, "dtype")]
        if not tensors:
            raise TypeError("kerntune.triton.autotune: the kernel has no tensor argument to run on")
        device = tensors[0][1].device.index if tensors[0][1].device.index is not None else torch.cuda.current_device()
        spans, decls = [], []
        for i, t in tensors:
            name = self.arg_names[i] if i < len(self.arg_names) else "arg%d" % i
            dtype, typestr = _dtype(t)
            spans.append(_Span(t, typestr))
            access = "r" if name in self.read_only else "w" if name in self.reset_to_zero else "rw"
            decls.append((name, dtype, access))
        keyvals = [_key_int(v) for v in key]
        decls += [("key%d" % k, "int64") for k in range(len(keyvals))]
        made = []

        def recall():
            """The op (its context started), and whether kerntune's caches decide the key; asked
            once, while the configs' compiling children run or before compiling."""
            if not made:
                op = self._op(decls, kwargs, configs, [i for i, _ in tensors], len(keyvals), device)
                made.append((op, op.recall(*spans, *keyvals)))
            return made[0][1]

        self._tuned_configs = configs
        self.bench_time = 0.0
        recalled = self._precompile(configs, args, kwargs, grid, recall) or recall()
        op = made[0][0]
        if not recalled:
            stream = torch.cuda.current_stream(device).cuda_stream
            self._call = (args, kwargs, grid, stream)
            started = time.perf_counter()
            try:
                op.call_async(stream, *spans, *keyvals)
                self.bench_time = time.perf_counter() - started
            finally:
                self._call = None
        decision = op.decision(*spans, *keyvals)
        if decision.winner is None:
            raise RuntimeError("kerntune.triton.autotune: every config failed: " +
                               "; ".join("%s: %s" % (u.candidate, u.message) for u in decision.units))
        index = {"config%d" % i: c for i, c in enumerate(configs)}
        winner = index[decision.winner.candidate]
        self.configs_timings = {index[u.candidate]: [u.time_ns / 1e6] if u.time_ns > 0 else [float("inf")] for u in decision.units}
        self.decision = decision
        if triton.knobs.autotuning.print if hasattr(triton, "knobs") else False:
            print("kerntune autotuning for function %s,\nwith key as %s,\nfinished after %.2fs,\nbest config selected: %s;"
                  % (getattr(self.base_fn, "__name__", "kernel"), key, self.bench_time, winner))
        if recalled:  # recalled: the winner alone, compiled (or found in Triton's cache) under kerntune's key
            with _stamped_compiles():
                self.fn.run(*args, grid=grid, warmup=True, **kwargs, **winner.all_kwargs())
        return winner, not recalled

    def _op(self, decls, kwargs, configs, positions, nkeys, device):
        """The op of this kernel, signature and configs in kerntune's context (made at its first
        use in the context; autotuners of the same kernel share it), tuning this autotuner's call."""
        ctx = context()
        constants = repr(sorted((k, v) for k, v in kwargs.items() if not hasattr(v, "data_ptr")))
        sig = hashlib.sha256(repr((decls, constants, [str(c) for c in configs])).encode()).hexdigest()[:12]
        name = "triton %s %s" % (getattr(self.base_fn, "__name__", "kernel")[:80], sig)
        entry = _ops.get(name)
        if entry is not None and entry[0] is not ctx:  # made in a context no longer in use
            entry = None
        if entry is None:
            holder = [self]
            op = Op(ctx, name, decls, device=_cuda_device(ctx, device))
            for k in range(min(nkeys, 8)):
                op.key_arg(len(positions) + k)
            for c_index, config in enumerate(configs):
                op.add_candidate("config%d" % c_index, _candidate(holder, c_index, positions), queued=True,
                                 version="%s|%s" % (self._source, config))
            names = [d[0] for d in decls]
            for n in self.reset_to_zero:  # zeroed before every benchmark run and the final launch, as Triton does
                if n not in names:
                    raise ValueError("kerntune.triton.autotune: reset_to_zero names '%s', which is no tensor argument" % n)
                op.set_accumulate(names.index(n), 0.0)
            if not self.validate:
                op.set_validation(False)
            op.set_rerace(False)  # a decision is final, as Triton's: a later process measures nothing
            entry = _ops[name] = (ctx, op, holder)
        entry[2][0] = self  # its candidates launch this autotuner's call, with its configs
        return entry[1]

    def _precompile(self, configs, args, kwargs, grid, recall):
        """Compiles the configs on compile_threads threads (default: one per config, up to the
        processors) before the race, with Triton's AsyncCompileMode (Triton 3.4 and later); a
        config that fails here fails again at its first launch, where it is disqualified. Asks
        recall() first (beside the compiling children, when there are some): when it says
        kerntune's caches decide the key, the children are stopped, nothing is loaded, and this
        returns True."""
        try:
            from triton.runtime._async_compile import AsyncCompileMode  # noqa: F401
        except ImportError:
            return False
        threads = self.compile_threads or min(len(configs), os.cpu_count() or 1)
        if threads <= 1 or len(configs) <= 1:
            return False
        started = time.perf_counter()
        self.process_compile_time = 0.0
        with _stamped_compiles():
            recalled = self._compile_and_load(configs, args, kwargs, grid, threads, started, recall)
        self.compile_time = time.perf_counter() - started
        return recalled

    def _compile_and_load(self, configs, args, kwargs, grid, threads, started, recall):
        import torch
        from triton.runtime._async_compile import AsyncCompileMode

        if self.compile_processes:
            recalled = self._compile_in_processes(configs, args, kwargs, grid, threads, recall)
            self.process_compile_time = time.perf_counter() - started
        else:
            recalled = recall()
        if recalled:
            return True
        futures = []
        try:
            with ThreadPoolExecutor(threads) as pool, AsyncCompileMode(pool, ignore_errors=True):
                for config in configs:
                    try:
                        futures.append(self.fn.run(*args, grid=grid, warmup=True, **kwargs, **config.all_kwargs()))
                    except Exception:  # noqa: BLE001 - reported at the config's launch
                        pass
        except RuntimeError:  # the caller is in an AsyncCompileMode of its own: compile as launched
            return False
        # then each kernel's module and launcher, loaded as its first launch would (on the
        # tensors' device), so that the race's first runs time the kernels, not their loading
        kernels = []
        for f in futures:
            try:
                k = f.result(True) if hasattr(f, "result") else f
            except Exception:  # noqa: BLE001
                k = None
            if k is not None and hasattr(k, "_init_handles"):
                kernels.append(k)
        device = torch.cuda.current_device()

        def load(k):
            try:
                with torch.cuda.device(device):
                    k._init_handles()
            except Exception:  # noqa: BLE001 - out of resources: raised again at its launch, disqualified there
                pass

        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(load, kernels))
        return False

    def _compile_in_processes(self, configs, args, kwargs, grid, processes, recall):
        """Compiles the configs in forked processes, which leave the compiled kernels in Triton's
        on-disk cache: Triton's compiler holds the GIL for most of its work, so threads of one
        process compile little faster than one. Each child is answered by a stand-in driver that
        knows the device and its target, so that it touches no CUDA and none waits for Triton's
        driver, whose first use in a process builds a C module with the system's compiler; each
        compiles its configs that Triton's cache lacks, and one more child builds their launcher.
        First this process looks into the cache (through the stand-in too): when it holds the first
        config, only the configs it lacks get children (none, when it holds them all); when it
        does not, every config's child is forked at once. A child that fails leaves its configs
        to be compiled again here; the parent then loads each kernel from the cache. recall() is
        asked while the children run (its answer returned): when kerntune's caches decide the key,
        the children are stopped; when kerntune's context is started already, it is asked first,
        and a recorded decision forks none."""
        if not hasattr(os, "fork") or _context is not None:
            # without fork, or with kerntune's context started already (another key or kernel of
            # this process): the look-up costs no start-up, so it comes before any child
            if recall():
                return True
            if not hasattr(os, "fork"):
                return False
        stand_in = _child_driver()
        if stand_in is None:  # another GPU or Triton: Triton's own driver answers the children
            drv = triton.runtime.driver.active
            try:
                stand_in = _ChildDriver(drv.get_current_device(), drv.get_current_target(), drv.launcher_cls)
            except Exception:  # noqa: BLE001 - compiled here, as without processes
                return recall()
        # a first look at the cache (Triton's driver not started): when it holds the first config,
        # only the configs it lacks are compiled, if any; otherwise every config's child is forked
        # at once and asks the cache itself
        todo = configs
        if _cached(self.fn, args, kwargs, configs[0], stand_in):
            todo = [c for c in configs if not _cached(self.fn, args, kwargs, c, stand_in)]
            if not todo:
                return recall()
        # one child builds the kernels' launcher, so that no compile waits for it
        groups = [None] + [todo[i::processes] for i in range(min(processes, len(todo)))]
        pids = []
        for group in groups:
            try:
                with warnings.catch_warnings():  # a child that only compiles takes none of the other threads' locks
                    warnings.simplefilter("ignore", DeprecationWarning)
                    pid = os.fork()
            except OSError:
                break
            if pid == 0:  # the child: compile its configs into the cache, launch nothing, touch no CUDA
                code = 0
                try:
                    triton.runtime.driver.set_active(stand_in)
                    if group is None:
                        _build_launcher(self.fn, args, kwargs, todo[0])
                    for config in group or ():
                        try:
                            if _cached(self.fn, args, kwargs, config):
                                continue
                            kernel = self.fn.run(*args, grid=grid, warmup=True, **kwargs, **config.all_kwargs())
                            # its launcher too, should the launcher child's differ (a kernel whose
                            # launcher needs its compile's results)
                            stand_in.launcher_cls(kernel.src, kernel.metadata)
                        except Exception:  # noqa: BLE001 - compiled again in the parent, which reports it
                            code = 1
                finally:
                    os._exit(code)
            pids.append(pid)
        try:  # Triton's driver started here while the children compile (the loads after them need it)
            triton.runtime.driver.active.get_current_device()
        except Exception:  # noqa: BLE001 - its error comes again at the first load
            pass
        try:  # and kerntune's op (its CUDA backend begins building its device checks where none are
            # kept), which looks the key up in kerntune's caches: a decision there needs no children
            recalled = recall()
        except BaseException:
            _stop(pids)
            raise
        if recalled:
            _stop(pids)
            return True
        deadline = time.monotonic() + COMPILE_PROCESS_TIMEOUT_S
        while pids:
            for pid in list(pids):
                try:
                    done, _ = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    done = pid
                if done:
                    pids.remove(pid)
            if pids and time.monotonic() > deadline:  # stuck (a lock another thread held at the fork): compiled here instead
                _stop(pids)
                break
            time.sleep(0.005)
        return False


def _stop(pids):
    """Kills and reaps the children pids."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def autotune(configs, key, prune_configs_by=None, reset_to_zero=None, restore_value=None, pre_hook=None, post_hook=None,
             warmup=None, rep=None, use_cuda_graph=False, do_bench=None, cache_results=False, read_only=None, validate=True,
             compile_threads=None, compile_processes=None):
    """triton.autotune's decorator, deciding with kerntune (see the module's docstring)."""

    def decorator(fn):
        return Autotuner(fn, fn.arg_names, configs, key, reset_to_zero, restore_value, pre_hook=pre_hook, post_hook=post_hook,
                         prune_configs_by=prune_configs_by, warmup=warmup, rep=rep, use_cuda_graph=use_cuda_graph,
                         do_bench=do_bench, cache_results=cache_results, read_only=read_only, validate=validate,
                         compile_threads=compile_threads, compile_processes=compile_processes)

    return decorator


def _candidate(holder, c_index, positions):
    """A config as a queued candidate of an op: launches the kernel with config number c_index of
    the autotuner tuning the op now (holder[0]: autotuners of the same kernel source, signature
    and configs share one op, which a context holds once by name) on the stream kerntune gives,
    with the tensor arguments at positions moved to the addresses kerntune gives (its copies
    while tuning)."""
    import torch

    def launch(queue, *ptrs):
        at = holder[0]
        config = at._tuned_configs[c_index]
        args, kwargs, grid, caller = at._call
        args = list(args)
        for i, p in zip(positions, ptrs):
            if p != args[i].data_ptr():
                args[i] = _at(p, args[i])
        benchmarking = queue != caller
        full = {**dict(zip(at.arg_names, args)), **kwargs, **config.all_kwargs()}
        stream = torch.cuda.ExternalStream(queue) if queue else torch.cuda.default_stream()
        with torch.cuda.stream(stream):
            if benchmarking and at.user_pre_hook:
                at.user_pre_hook(full)
            if config.pre_hook is not None:
                config.pre_hook(full)
            try:
                at.fn.run(*args, grid=grid, warmup=False, **kwargs, **config.all_kwargs())
            except Exception as e:
                if benchmarking and at.user_post_hook:
                    at.user_post_hook(full, exception=e)
                raise
            if benchmarking and at.user_post_hook:
                at.user_post_hook(full, exception=None)

    return launch
