"""kerntune.file_utils: what scripts written for Kernel Tuner import from kernel_tuner.file_utils.

store_output_file writes tune_kernel's results as a T4 results document (the community's
format: results[] with configuration, times, invalidity, correctness, measurements, objectives;
metadata.timeunit), and store_metadata_file a T4 metadata document describing this machine and
software. kerntune's invalidities add "correctness" (a wrong answer) and "timeout", which T4
names and Kernel Tuner never produces.
"""

import json
import os
import platform
import subprocess
import sys
from datetime import datetime, timezone

from . import util

__all__ = ["filename_ensure_json_extension", "get_t4_results", "store_output_file", "get_t4_metadata", "store_metadata_file"]

SCHEMA_VERSION = "1.0.0"

_TIMINGS = ("compile_time", "benchmark_time", "framework_time", "strategy_time", "verification_time")

_INVALIDITY = [
    (util.CompilationFailedConfig, "compile"),
    (util.RuntimeFailedConfig, "runtime"),
    (util.InvalidConfig, "constraints"),
    (util.IncorrectConfig, "correctness"),
    (util.TimeoutConfig, "timeout"),
]


def filename_ensure_json_extension(filename):
    """filename, with ".json" appended unless it ends so."""
    filename = str(filename)
    return filename if filename.endswith(".json") else filename + ".json"


def _jsonable(v):
    if hasattr(v, "item") and not isinstance(v, (list, tuple, dict)):  # numpy scalars
        return v.item()
    if hasattr(v, "tolist"):
        return v.tolist()
    return v


def _invalidity(result):
    error = result.get("__error__")
    if error is None:
        return "correct"
    for kind, name in _INVALIDITY:
        if isinstance(error, kind):
            return name
    raise ValueError("unknown error marker %r in a result" % (error,))


def get_t4_results(results, tune_params, objective="time"):
    """results (as tune_kernel returns them) as a T4 results document (a dict)."""
    if isinstance(objective, (list, tuple)):
        raise ValueError("T4 documents have one objective; got %r" % (objective,))
    skip = set(tune_params) | set(_TIMINGS) | {"timestamp", "times", "__error__"}
    out = []
    for r in results:
        times = {
            "compilation": r.get("compile_time", 0),
            "benchmark": r.get("benchmark_time", 0),
            "framework": r.get("framework_time", 0),
            "search_algorithm": r.get("strategy_time", 0),
            "validation": r.get("verification_time", 0),
            "runtimes": [_jsonable(t) for t in r.get("times", [])],
        }
        record = {}
        if "timestamp" in r:
            record["timestamp"] = r["timestamp"]
        invalidity = _invalidity(r)
        record.update(
            configuration={k: _jsonable(v) for k, v in r.items() if k in tune_params},
            times=times,
            invalidity=invalidity,
            correctness=0 if invalidity == "correctness" else 1,
            measurements=[
                {"name": k, "value": _jsonable(v), "unit": "ms" if k.startswith("time") else ""}
                for k, v in r.items()
                if k not in skip and not isinstance(v, util.ErrorConfig)
            ],
            objectives=[objective],
        )
        out.append(record)
    return {"results": out, "schema_version": SCHEMA_VERSION, "metadata": {"timeunit": "milliseconds"}}


def _write(path, doc, indent=None):
    path = filename_ensure_json_extension(path)
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    with open(path, "w") as f:
        json.dump(doc, f, indent=indent)
        f.write("\n")
    return path


def store_output_file(output_filename, results, tune_params, objective="time"):
    """Writes results as a T4 results document to output_filename (".json" appended when
    missing; its folder made when missing)."""
    return _write(output_filename, get_t4_results(results, tune_params, objective))


def _hardware():
    """What this machine is, as far as it tells without privileges: lshw's JSON where lshw is
    installed, else the processor's model from /proc/cpuinfo and the memory from /proc/meminfo."""
    try:
        text = subprocess.run(["lshw", "-json", "-quiet"], capture_output=True, text=True, timeout=20).stdout.strip()
        if text:
            doc = json.loads(text if text.startswith("[") else "[" + text + "]")
            return doc
    except (OSError, ValueError, subprocess.SubprocessError):
        pass
    desc = {"machine": platform.machine()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    desc["cpu"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            desc["memory"] = f.readline().split(":", 1)[1].strip()
    except OSError:
        pass
    return [desc]


def get_t4_metadata():
    """The T4 metadata document (a dict): the operating system, the hardware, kerntune's view of
    the devices, and the software that produced the results."""
    from . import Context, version

    devices = []
    try:
        devices = [{"index": d.index, "backend": d.backend, "name": d.name} for d in Context(cache="off").devices()]
    except Exception as e:  # a device that cannot be listed does not stop the description
        devices = [{"error": str(e)}]
    requirements = ["kerntune==" + version()]
    try:
        import numpy

        requirements.append("numpy==" + numpy.__version__)
    except ImportError:
        pass
    names = {"linux": "Linux", "darwin": "Mac", "win32": "Windows"}
    metadata = {
        "operating_system": names.get(sys.platform, sys.platform),
        "hardware": {"hardware_description": _hardware()},
        "environment": {"device_query": {"kerntune": devices}, "requirements": requirements},
        "timestamp": datetime.now(timezone.utc).isoformat(),
    }
    return {"metadata": metadata, "schema_version": SCHEMA_VERSION}


def store_metadata_file(metadata_filename):
    """Writes the T4 metadata document to metadata_filename (".json" appended when missing)."""
    return _write(metadata_filename, get_t4_metadata(), indent="  ")
