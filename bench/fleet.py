#!/usr/bin/env python3
"""bench/fleet.py - throughput of tuning spread over workers (issue [14]).

Replays a benchmark_hub problem through `kerntune tune --workers` with 1, 2, 4 ... workers on a
redis-server this script starts on a loopback port. Each worker runs with `--pace F`: a job
sleeps for F times the time the recording says it took (its build and its runs), so that even a
2-core machine measures the fleet's coordination rather than its own compute. Every run does the
same search (same seed, same batch of jobs in flight), so the same jobs; it prints, per worker
count, the wall time, jobs per second, the speedup over one worker against the ideal N, and the
coordinator's processor time per job, then RESULT lines.

On a machine with GPUs, --real runs the problem for real instead: one worker per GPU
(`kerntune worker --device N`), no pacing, and the wall time with 1 and 2 workers; --local adds
the same tuning with no fleet on the first GPU, --compile-workers M a row with the largest worker
count and M compile workers (`kerntune worker --build-only`) beside them, and --cpus-per-worker K
pins each process to K processors of its own with taskset (the local run and the first device
worker get the same K), so that compile workers stand in honestly for machines of their own.

usage: bench/fleet.py [--kerntune build/kerntune] [--workers 1,2,4] [--pace 0.1] [--strategy random]
                      [--budget 5%] [--jobs 16] [--problem P --recording R]
                      [--real --devices 1,2 [--local] [--compile-workers M] [--cpus-per-worker K]]

The default search is random sampling, which proposes whenever a job slot is free: the fleet's
own throughput. A strategy that waits for a generation's results before the next (--strategy
auto picks genetic or local search here) idles workers at each generation's tail, as it idles
build threads in a local run.
"""
import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
HUB = os.environ.get("KT_HUB", os.path.join(HERE, "..", "..", "shared", "benchmark_hub"))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start_redis(tmp):
    port = free_port()
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", tmp], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2) as c:
                c.sendall(b"PING\r\n")
                if c.recv(16).startswith(b"+PONG"):
                    return proc, port
        except OSError:
            time.sleep(0.05)
    proc.kill()
    sys.exit("redis-server did not start (scripts/install-deps.sh installs it)")


def pinned(args, slot, cmd):
    """cmd on processors slot*K .. slot*K+K-1 (--cpus-per-worker K), or as it is."""
    k = args.cpus_per_worker
    return ["taskset", "-c", f"{slot * k}-{slot * k + k - 1}"] + cmd if k else cmd


def gpu_less(args, device):
    """The environment and device of a compile worker that sees no GPU: the CUDA backend builds for
    the fingerprint of device `device` (KERNTUNE_CUDA_TARGET) with every GPU hidden."""
    out = subprocess.run([args.kerntune, "devices", "--json"], stdout=subprocess.PIPE, check=True)
    d = json.loads(out.stdout)
    devs = d["devices"] if isinstance(d, dict) else d
    fp = next(x["fingerprint"] for x in devs if x["index"] == device)
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", KERNTUNE_CUDA_TARGET=fp)
    out = subprocess.run([args.kerntune, "devices", "--json"], stdout=subprocess.PIPE, check=True, env=env)
    d = json.loads(out.stdout)
    devs = d["devices"] if isinstance(d, dict) else d
    target = next((x["index"] for x in devs if x["fingerprint"] == fp), None)
    if target is None:
        sys.exit(f"no compile target for {fp} with the GPUs hidden: {d}")
    return env, target


def run(args, n, url, tmp, devices=None, compilers=0):
    workers, docs = [], []
    target = gpu_less(args, devices[0]) if args.real and compilers and args.compile_without_gpu else None
    for i in range(n + compilers):
        build_only = i >= n
        cmd = [args.kerntune, "worker", url, "--name", f"bench{n}-{compilers}-{i}", "--quiet", "--json"]
        env = dict(target[0]) if build_only and target else dict(os.environ)
        if args.real:
            cmd += ["--device", str(target[1] if build_only and target else devices[0 if build_only else i])]
            cmd += ["--build-only"] if build_only else []
        else:
            cmd += ["--pace", str(args.pace), "--batch", "1"]  # one job at a time: the recorded time of each
        if args.real:  # every run compiles afresh: no run finds another's artifacts, and no worker another's
            env["KERNTUNE_ARTIFACTS"] = os.path.join(tmp, f"artifacts-{n}-{compilers}-{i}")
        docs.append(open(os.path.join(tmp, f"worker-{n}-{compilers}-{i}.json"), "w+"))
        workers.append(subprocess.Popen(pinned(args, i, cmd), stdout=docs[-1], env=env))
    cmd = [args.kerntune, "tune", args.problem, "--workers", url, "--json", "--quiet", "--seed", "1", "--budget", args.budget,
           "--jobs", str(args.jobs), "--wait-workers", "30", "--strategy", args.strategy, "--t4", os.path.join(tmp, f"t4-{n}.json")]
    cmd += ["--cache", "off"]
    if not args.real:
        cmd += ["--simulate", args.recording]
    t0, before = time.monotonic(), os.times()
    out = subprocess.run(cmd, stdout=subprocess.PIPE, check=False)
    wall, after = time.monotonic() - t0, os.times()  # the workers are not reaped yet: the coordinator's alone
    cpu = (after.children_user + after.children_system) - (before.children_user + before.children_system)
    for w in workers:
        w.send_signal(signal.SIGTERM)
    for w in workers:
        w.wait()
    if out.returncode != 0:
        sys.exit(f"kerntune tune --workers failed with {n} workers: {out.stdout.decode()[:400]}")
    doc = json.loads(out.stdout)
    arts = {"artifacts_handed_on": 0, "artifacts_received": 0, "artifacts_rejected": 0}
    for f in docs:  # what the workers said when they stopped
        f.seek(0)
        try:
            w = json.loads(f.read())
            for k in arts:
                arts[k] += w.get(k, 0)
        except ValueError:
            pass
        f.close()
    doc["artifacts"] = arts
    return wall, doc, cpu


def local_real(args, tmp, device):
    """The same tuning on one GPU with no fleet: its wall time and document."""
    cmd = [args.kerntune, "tune", args.problem, "--device", str(device), "--json", "--quiet", "--seed", "1", "--budget", args.budget,
           "--jobs", str(args.jobs), "--strategy", args.strategy, "--cache", "off", "--t4", os.path.join(tmp, "t4-local.json")]
    env = dict(os.environ)
    env["KERNTUNE_ARTIFACTS"] = os.path.join(tmp, "artifacts-local")
    t0 = time.monotonic()
    out = subprocess.run(pinned(args, 0, cmd), stdout=subprocess.PIPE, check=True, env=env)
    return time.monotonic() - t0, json.loads(out.stdout)


def local_cpu(args, tmp):
    """The processor time of the same tuning replayed locally (no fleet), and its configurations."""
    cmd = [args.kerntune, "tune", args.problem, "--json", "--quiet", "--seed", "1", "--budget", args.budget, "--jobs", str(args.jobs),
           "--strategy", args.strategy, "--cache", "off", "--simulate", args.recording, "--t4", os.path.join(tmp, "t4-local.json")]
    before = os.times()
    out = subprocess.run(cmd, stdout=subprocess.PIPE, check=True)
    after = os.times()
    doc = json.loads(out.stdout)
    return (after.children_user + after.children_system) - (before.children_user + before.children_system), doc


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kerntune", default=os.path.join(HERE, "..", "build", "kerntune"))
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--pace", type=float, default=0.1, help="a job sleeps this times its recorded time")
    ap.add_argument("--budget", default="5%")
    ap.add_argument("--strategy", default="random",
                    help="the search (random: no generation to wait for, so the fleet's own throughput; auto: what a user gets)")
    ap.add_argument("--jobs", type=int, default=16, help="jobs in flight (the search's batch), the same for every run")
    ap.add_argument("--problem", default=os.path.join(HUB, "kernels", "convolution_milo.json"))
    ap.add_argument("--recording", default=os.path.join(HUB, "results", "convolution_milo", "A4000_T4.json.gz"))
    ap.add_argument("--real", action="store_true", help="measure for real, one worker per device (see --devices)")
    ap.add_argument("--devices", default="1,2", help="with --real: the kerntune device of each worker")
    ap.add_argument("--local", action="store_true", help="with --real: also the same tuning with no fleet on the first device")
    ap.add_argument("--compile-workers", type=int, default=0, help="with --real: a row with this many compile workers too")
    ap.add_argument("--cpus-per-worker", type=int, default=0, help="pin each process to this many processors (taskset)")
    ap.add_argument("--compile-without-gpu", action="store_true",
                    help="compile workers see no GPU (CUDA_VISIBLE_DEVICES empty) and build for the first device's fingerprint")
    args = ap.parse_args()
    counts = [int(x) for x in args.workers.split(",")]
    devices = [int(x) for x in args.devices.split(",")]
    if args.real and max(counts) > len(devices):
        sys.exit(f"--real with {max(counts)} workers needs as many --devices")
    if shutil.which("redis-server") is None:
        sys.exit("redis-server is not installed (scripts/install-deps.sh)")
    tmp = tempfile.mkdtemp(prefix="kt-bench-fleet-")
    redis, port = start_redis(tmp)
    url = f"redis://127.0.0.1:{port}"
    rows = []
    base_cpu, base_doc = (None, None) if args.real else local_cpu(args, tmp)
    local = None
    try:
        if args.real and args.local:
            wall, doc = local_real(args, tmp, devices[0])
            local = (wall, doc["measured"] + doc["failed"], doc["best"]["configuration"] if doc.get("best") else None)
        plan = [(n, 0) for n in counts] + ([(max(counts), args.compile_workers)] if args.real and args.compile_workers else [])
        for n, compilers in plan:
            wall, doc, cpu = run(args, n, url, tmp, devices, compilers)
            fl = doc["fleet"]
            rows.append((n, wall, fl["jobs"], fl["coordinator_us_per_job"], doc["best"]["configuration"] if doc.get("best") else None,
                         cpu, compilers, doc["measured"] + doc["failed"]))
            if compilers:
                a = doc["artifacts"]
                print(f"# {n} workers with {compilers} compile workers{' (no GPU)' if args.compile_without_gpu else ''}: artifacts handed on "
                      f"{a['artifacts_handed_on']}, received {a['artifacts_received']}, rejected {a['artifacts_rejected']}")
                print(f"RESULT fleet_artifacts_received {a['artifacts_received']} (rejected {a['artifacts_rejected']})")
    finally:
        redis.kill()
        redis.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    mode = "real (no pacing)" if args.real else f"replay of {os.path.basename(args.recording)}, jobs paced at {args.pace}x recorded"
    print(f"# {os.path.basename(args.problem)}: {mode}; strategy {args.strategy}, budget {args.budget}, {args.jobs} jobs in flight")
    print(f"{'workers':>7}  {'compile':>7}  {'wall s':>8}  {'configs':>7}  {'configs/s':>9}  {'jobs':>5}  {'jobs/s':>7}  {'speedup':>7}  "
          f"{'ideal':>5}  {'efficiency':>10}  {'x local':>7}  {'coord us/job':>12}")
    if local:
        print(f"{'local':>7}  {0:>7}  {local[0]:8.2f}  {local[1]:7d}  {local[1] / local[0]:9.2f}  {'':>5}  {'':>7}  {'':>7}  {'':>5}  {'':>10}  "
              f"{1.0:7.3f}  {'':>12}")
    base = rows[0][1] * rows[0][0]
    worst = None
    for n, wall, jobs, us, _, _, compilers, configs in rows:
        speed = base / wall
        eff = speed / n
        if compilers == 0:
            worst = eff if worst is None or eff < worst else worst
        xl = f"{(configs / wall) / (local[1] / local[0]):7.3f}" if local else f"{'':>7}"
        print(f"{n:>7}  {compilers:>7}  {wall:8.2f}  {configs:7d}  {configs / wall:9.2f}  {jobs:5d}  {jobs / wall:7.2f}  {speed:7.2f}  {n:5d}  "
              f"{eff:10.3f}  {xl}  {us:12.0f}")
    if local:
        for n, wall, _, _, _, _, compilers, configs in rows:
            name = f"fleet_{n}_workers" + (f"_{compilers}_compile" if compilers else "")
            print(f"RESULT {name}_over_local {(configs / wall) / (local[1] / local[0]):.3f} x (configurations per second over the local run's)")
    same = all(r[4] == rows[0][4] for r in rows) and (local is None or local[2] == rows[0][4])
    print(f"RESULT fleet_efficiency_min {worst:.3f} (target >= 0.9 with N workers: speedup >= 0.9 N)")
    print(f"RESULT coordinator_us_per_job {max(r[3] for r in rows):.0f} (its whole processor time per job: search, race, T4)")
    if base_cpu is not None:
        # the same tuning replayed here costs the search, the race and the T4 too: the rest is the fleet's
        fleet_us = max((r[5] - base_cpu) * 1e6 / r[2] for r in rows)  # whole processes, both
        print(f"RESULT local_replay_us_per_configuration {base_cpu * 1e6 / rows[0][2]:.0f} (the same tuning with no fleet, whole process)")
        print(f"RESULT fleet_overhead_us_per_job {fleet_us:.0f} (coordinator minus the local replay, per job)")
        same_local = base_doc.get("best", {}).get("configuration") == rows[0][4]
        print(f"RESULT same_pick_as_local {'yes' if same_local else 'NO'}")
    print(f"RESULT same_pick {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
