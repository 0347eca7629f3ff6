#!/usr/bin/env python3
"""methodology_check.py - reference numbers from the `autotuning-methodology` package for one set.

Computes, with the package's own code (autotuning_methodology 1.1.0, installed into the same
virtual environment as bench/kerneltuner.py, or imported from an unpacked copy with --atm-src),
for one recorded benchmark_hub set:

  * the calculated random-sampling baseline (baseline.RandomSearchCalculatedBaseline, as
    report_experiments.get_aggregation_data builds it) after k evaluations, printed as
    `k value` lines (value: recorded mean time in ms);
  * the space's optimum and median (searchspace_statistics.SearchspaceStatistics);
  * the cut-off values at the given percentiles (objective_performance_at_cutoff_point), with the
    evaluations random sampling needs to reach them (cutoff_point) and the time that stands for
    (cutoff_point_time_from_fevals), and the score's time range
    (cutoff_point_fevals_time_start_end);
  * the time per evaluation the baseline uses to turn time into evaluations ("mean_per_feval").
  * with --time-grid N: the baseline over N equidistant times across the score's time range.

Times are in seconds (the package converts the T4 milliseconds), objective values in ms.

Usage: python3 bench/methodology_check.py [--set c-A4000] [--cutoffs 0.01,0.96] (see --help)
"""

import argparse
import gzip
import os
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.dont_write_bytecode = True  # importing the sibling script must not leave bench/__pycache__ behind
import kerneltuner as kt  # noqa: E402  (bootstrap helpers and set names; no side effects on import)

METHODOLOGY_VERSION = "1.1.0"
ALL_TIME_KEYS = ["compilation", "runtimes", "framework", "search_algorithm", "validation"]  # the package's "all"
FALLBACK_MARK = "METHODOLOGY_CHECK_FROM_SOURCE"


def parse_args(argv):
    ap = argparse.ArgumentParser(
        description="Print the autotuning-methodology package's random-sampling baseline, optimum, median and "
                    "cut-offs for one recorded benchmark_hub set.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument("--set", default="c-A4000", choices=list(kt.SETS), help="the recorded set")
    ap.add_argument("--hub", type=Path, default=kt.DEFAULT_HUB, help="benchmark_hub directory")
    ap.add_argument("--ks", default="1,2,5,10,20,50,100,200", help="evaluation counts for the baseline")
    ap.add_argument("--cutoffs", default="0.01,0.96",
                    help="start and end cut-off percentiles (the package's experiments_defaults.json uses 0.01,0.95)")
    ap.add_argument("--time-keys", default=",".join(ALL_TIME_KEYS),
                    help="T4 time fields summed into an evaluation's time (the package's 'all')")
    ap.add_argument("--time-grid", type=int, default=0,
                    help="also print the baseline at this many equidistant times over the score's time range")
    ap.add_argument("--venv", type=Path, default=kt.DEFAULT_VENV, help="virtual environment to create / reuse")
    ap.add_argument("--atm-src", type=Path, default=Path("/tmp/atm"),
                    help="directory holding an unpacked autotuning_methodology package, used only when it cannot "
                         "be installed from PyPI")
    args = ap.parse_args(argv)
    try:
        args.k_list = sorted({int(k) for k in args.ks.split(",") if k.strip()})
        args.q = [float(q) for q in args.cutoffs.split(",")]
    except ValueError as e:
        raise kt.UsageError(f"--ks / --cutoffs: not numbers ({e})")
    if not args.k_list or args.k_list[0] < 1:
        raise kt.UsageError("--ks: need positive evaluation counts")
    if len(args.q) != 2 or not (0 <= args.q[0] < args.q[1] <= 1):
        raise kt.UsageError("--cutoffs: need START,END with 0 <= START < END <= 1")
    args.time_keys_list = [k.strip() for k in args.time_keys.split(",") if k.strip()]
    for k in args.time_keys_list:
        if k not in ALL_TIME_KEYS:
            raise kt.UsageError(f"--time-keys: unknown T4 time field {k!r} (known: {', '.join(ALL_TIME_KEYS)})")
    kernel, gpu, _ = kt.SETS[args.set]
    args.t4 = args.hub / "results" / kernel / f"{gpu}_T4.json.gz"
    if not args.t4.is_file():
        raise kt.UsageError(f"--hub {args.hub}: {args.t4} does not exist")
    return args


def bootstrap(args, argv):
    """Run inside the venv with the package installed; fall back to --atm-src if pip can't install it."""
    kt.limit_threads()
    full = dict(kt.REQUIREMENTS, **{"autotuning-methodology": METHODOLOGY_VERSION})
    if os.environ.get(FALLBACK_MARK):
        kt.ensure_venv(args.venv, kt.REQUIREMENTS, Path(__file__).resolve(), argv)
    else:
        try:
            kt.ensure_venv(args.venv, full, Path(__file__).resolve(), argv)
        except kt.UsageError as e:
            kt.log(f"[methodology_check] could not install autotuning-methodology ({e}); "
                   f"importing it from {args.atm_src} instead")
            os.environ[FALLBACK_MARK] = "1"
            kt.ensure_venv(args.venv, kt.REQUIREMENTS, Path(__file__).resolve(), argv)
    if os.environ.get(FALLBACK_MARK):
        if not (args.atm_src / "autotuning_methodology" / "baseline.py").is_file():
            raise kt.UsageError(f"--atm-src {args.atm_src}: no autotuning_methodology/baseline.py there")
        sys.path.insert(0, str(args.atm_src))


def main(argv):
    args = parse_args(argv)
    bootstrap(args, argv)

    import numpy as np
    import autotuning_methodology
    from autotuning_methodology.baseline import RandomSearchCalculatedBaseline
    from autotuning_methodology.searchspace_statistics import SearchspaceStatistics

    kernel, gpu, label = kt.SETS[args.set]
    with tempfile.TemporaryDirectory(prefix="methodology_check-") as tmp:
        # the package reads plain JSON: decompress the T4 file first
        t4_json = Path(tmp) / f"{gpu}_T4.json"
        with gzip.open(args.t4, "rb") as src, open(t4_json, "wb") as dst:
            shutil.copyfileobj(src, dst)
        stats = SearchspaceStatistics(
            application_name=kernel,
            device_name=gpu,
            minimization=True,  # the objective is time
            objective_time_keys=args.time_keys_list,
            objective_performance_keys=["time"],
            full_search_space_file_path=t4_json,
            full_validate=True,
        )

    # the baseline exactly as report_experiments.get_aggregation_data creates it (package defaults:
    # include_nan=False, time_per_feval_operator="mean_per_feval", simulate=False)
    baseline = RandomSearchCalculatedBaseline(stats)
    # over a contiguous 1..K range the package's monotone (PCHIP) smoothing passes through the
    # calculated values themselves, so these are the per-k values the package uses
    ks = np.arange(1, args.k_list[-1] + 1)
    curve = baseline.get_curve_over_fevals(ks)

    nvalid = stats.objective_performances_total_sorted.shape[0]
    print(f"# {label}: {stats.size} configurations, {nvalid} valid; autotuning_methodology "
          f"{getattr(autotuning_methodology, '__version__', METHODOLOGY_VERSION)} from "
          f"{Path(autotuning_methodology.__file__).parent}")
    print(f"# time keys: {','.join(args.time_keys_list)}; objective values in ms, times in s")
    for k in args.k_list:
        print(f"{k} {curve[k - 1]:.6f}")
    print(f"optimum {stats.total_performance_absolute_optimum():.6f}")
    print(f"median {stats.total_performance_median():.6f}")
    for q in args.q:
        value = stats.objective_performance_at_cutoff_point(q)
        _, fevals = stats.cutoff_point(q)
        print(f"cutoff {q:g} value {value:.6f} fevals {fevals} time_s {stats.cutoff_point_time_from_fevals(fevals):.3f}")
    f0, f1, t0, t1 = stats.cutoff_point_fevals_time_start_end(args.q[0], args.q[1])
    print(f"score_range fevals {f0} {f1} time_s {t0:.3f} {t1:.3f}")
    print(f"time_per_feval_s mean_per_feval {stats.get_time_per_feval('mean_per_feval'):.6f} "
          f"median {stats.total_time_median():.6f} mean {stats.total_time_mean():.6f}")
    if args.time_grid > 0:
        times = np.linspace(t0, t1, args.time_grid)
        for t, v in zip(times, baseline.get_curve_over_time(times)):
            print(f"t {t:.3f} {v:.6f}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except kt.UsageError as e:
        kt.log(f"methodology_check.py: error: {e}")
        sys.exit(2)
