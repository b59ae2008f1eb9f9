"""Where the serving path's CPU goes, under load on the GPU machine (issue 18, "How").

    python -m bench.cpu_profile --out DIR [--window 30] [--py-spy PATH] -- COMMAND...

runs COMMAND (a benchmark such as ``bench.journey --systems ray_serve,vllm_serve``) and,
beside it, watches the serving processes: this project's replica and Ray's proxy, `vllm
serve`'s API server, and each one's vLLM engine core (a child process). When the benchmark
says that a system is under measured load (``bench.journey`` writes the system's name to
$BENCH_PHASE_FILE, which this sets), it waits a few seconds and measures a window of
``--window`` seconds: each process's CPU seconds (``/proc/PID/stat`` utime + stime, all
threads) and, with ``--py-spy``, a sampled profile of the front processes
(``py-spy record --nonblocking --format raw``: collapsed stacks, one file per process;
``--py-spy-engine`` adds each vLLM engine core, where the model runner runs too, with its
idle samples and a root frame per thread, and
``bench/spy_summary.py`` reads a file as the share of samples per function).
``profile.json`` gets CPU seconds per second of each process; dividing by the RPS that the
benchmark measured for that system gives CPU microseconds per request, which
``--rps-from journey.json`` does at the end. Each phase the benchmark names is measured once
(a system, or a system's workload: ``ray_serve html`` and ``ray_serve variable`` of a
``--workloads html,variable`` run are two windows). Through the window the engine's gauges
are read every half second (vLLM's running and waiting requests: Ray's metrics endpoint for
this project, the API server's ``/metrics`` for `vllm serve`) and averaged: an engine that
runs fewer than ``max_num_seqs`` requests while users wait is starved by its front end.
vLLM's gauges are one step's counts, and Ray's endpoint changes only at its exports, so for
this project the window also averages the replica's means over every engine step
(``running_steps``, ``waiting_steps``: ``serve_app/engine/metrics.py``).

Each window also reads the whole machine: every process's CPU seconds per second, summed by
name (``machine``: what else is busy while one system is measured, the idle peer of a
head-to-head included), and, where ``nvidia-smi`` is, each GPU's SM clock, utilization and
power over the window (``gpu``). A window ends early when the phase does (the benchmark moved
on: a head-to-head's halves last seconds), and says so (``ended``). A twin of a control run
(``vllm_serve@2``) gets the machine and the GPU only: its processes cannot be told from its
twin's by their command lines.
Each window also says how the kernel scheduled each process (``sched``: seconds waiting for a
CPU, involuntary switches, the CPUs its busy threads ran on: ``bench/sched_stats.py``); with
``--every-turn`` each turn of a phase gets its window (``vllm_serve #1``, ``#2``...: every
half of a head-to-head, to compare the two systems' engine cores turn by turn).
Standard library only (the GPU machine's Python has no extras).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench import sched_stats

TICK = os.sysconf("SC_CLK_TCK")
# Front processes by a piece of their command line; engine cores are found as their children.
FRONTS = {
    "ray_serve": {"replica": "ServeReplica:translator:Translator", "proxy": "ProxyActor"},
    "vllm_serve": {"api_server": "vllm.entrypoints."},
}
# Native front processes (no py-spy): their CPU only, summed over every matching process
# (HAProxy, the default ingress, runs a master and a worker).
NATIVE = {"ray_serve": {"haproxy": "haproxy"}}


def processes() -> dict[int, tuple[int, str]]:
    """Every process: pid -> (parent pid, command line)."""
    out: dict[int, tuple[int, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        out[int(entry.name)] = (ppid, cmd)
    return out


def cpu_s(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / TICK


def find(system: str, procs: dict[int, tuple[int, str]] | None = None) -> dict[str, int]:
    """The system's front processes and their engine-core children, by role (among
    ``procs``, by default every process)."""
    procs = processes() if procs is None else procs
    found: dict[str, int] = {}
    for role, needle in FRONTS[system].items():
        pids = [p for p, (_, cmd) in procs.items() if needle in cmd and "cpu_profile" not in cmd]
        if pids:
            found[role] = min(pids)
    for role, needle in NATIVE.get(system, {}).items():
        pids = [p for p, (_, cmd) in procs.items() if needle in cmd.split(" ")[0]]
        for i, pid in enumerate(sorted(pids)):
            found[role if i == 0 else f"{role}_{i}"] = pid
    for role, pid in list(found.items()):
        children = [p for p, (ppid, cmd) in procs.items() if ppid == pid and "EngineCore" in cmd]
        children = children or [p for p, (ppid, _) in procs.items() if ppid == pid]
        if children and role in ("replica", "api_server"):
            found["engine_core"] = max(children, key=lambda p: cpu_s(p) or 0.0)
    return found


def label(cmd: str) -> str:
    """A process's name in the machine's table: Ray's and vLLM's process titles as they are
    (``ray::ProxyActor``, ``VLLM::EngineCore``), the module of ``python -m``, a script's
    file name, else the executable's."""
    args = cmd.split()
    if not args:
        return "?"
    if args[0].startswith(("ray::", "VLLM::")):
        return args[0]
    if "-m" in args[:-1]:
        return args[args.index("-m") + 1]
    name = Path(args[0]).name
    if name.startswith("python") and len(args) > 1 and not args[1].startswith("-"):
        return Path(args[1]).name
    return name


def machine_cpu() -> dict[int, tuple[float, str]]:
    """Every process's CPU seconds so far, with its ``label``."""
    out: dict[int, tuple[float, str]] = {}
    for pid, (_, cmd) in processes().items():
        seconds = cpu_s(pid)
        if seconds is not None:
            out[pid] = (seconds, label(cmd))
    return out


def busiest(
    before: dict[int, tuple[float, str]],
    after: dict[int, tuple[float, str]],
    elapsed: float,
    top: int = 15,
) -> dict[str, float]:
    """CPU seconds per second by name over a window: the ``top`` busiest names, then
    ``total`` (every process's). A process started in the window counts all its CPU; one
    that ended in it is not seen."""
    by_name: dict[str, float] = {}
    for pid, (seconds, name) in after.items():
        spent = seconds - before[pid][0] if pid in before else seconds
        by_name[name] = by_name.get(name, 0.0) + spent / elapsed
    ranked = sorted(by_name.items(), key=lambda kv: -kv[1])[:top]
    out = {name: round(v, 3) for name, v in ranked if v >= 0.0005}
    return {**out, "total": round(sum(by_name.values()), 3)}


GPU_QUERY = "index,clocks.sm,utilization.gpu,power.draw"
GPU_FIELDS = ("sm_clock_mhz", "utilization_pct", "power_w")


def gpu_means(csv: str) -> dict[str, dict[str, float]]:
    """``nvidia-smi --query-gpu=GPU_QUERY --format=csv,noheader,nounits`` lines averaged per
    GPU index (a line that does not parse, such as "[N/A]", is skipped)."""
    rows: dict[str, list[list[float]]] = {}
    for line in csv.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != 1 + len(GPU_FIELDS):
            continue
        try:
            values = [float(c) for c in cells[1:]]
        except ValueError:
            continue
        rows.setdefault(cells[0], []).append(values)
    return {
        index: {f: round(sum(v[i] for v in vs) / len(vs), 1) for i, f in enumerate(GPU_FIELDS)}
        | {"reads": len(vs)}
        for index, vs in rows.items()
    }


def gpu_sampler() -> subprocess.Popen[str] | None:
    """``nvidia-smi`` reading every GPU each half second until stopped (None without it)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    cmd = [exe, f"--query-gpu={GPU_QUERY}", "--format=csv,noheader,nounits", "-lms", "500"]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def gpu_stop(sampler: subprocess.Popen[str] | None) -> dict[str, dict[str, float]]:
    if sampler is None:
        return {}
    sampler.terminate()
    try:
        out, _ = sampler.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        sampler.kill()
        out, _ = sampler.communicate()
    return gpu_means(out)


def phase_now(phase_file: Path) -> str:
    try:
        return phase_file.read_text().strip()
    except OSError:
        return ""


def hold(phase_file: Path, key: str, window_s: float) -> str:
    """Waits ``window_s`` seconds, or until the benchmark's phase is no longer ``key``:
    "window" or "phase", whichever ended the wait."""
    end = time.monotonic() + window_s
    while (left := end - time.monotonic()) > 0:
        if phase_now(phase_file) != key:
            return "phase"
        time.sleep(min(0.2, left))
    return "window"


# vLLM's gauges of the engine's requests, by the name each system's metrics page gives them.
GAUGES = {
    "ray_serve": {
        "running": "ray_vllm_num_requests_running",
        "waiting": "ray_vllm_num_requests_waiting",
        # the replica's own means over every engine step of each export interval
        "running_steps": "ray_translator_engine_running_mean",
        "waiting_steps": "ray_translator_engine_waiting_mean",
        "decoding_steps": "ray_translator_engine_decoding_mean",
    },
    "vllm_serve": {"running": "vllm:num_requests_running", "waiting": "vllm:num_requests_waiting"},
}


def ray_metrics_urls(session: Path | None = None) -> list[str]:
    """Ray's Prometheus endpoints of the current session's node(s) (``bench.ramp_probe``'s
    too: this module stays standard library only)."""
    root = Path(os.environ.get("RAY_TMPDIR") or "/tmp") / "ray"
    folder = session or root / "session_latest"
    ports = [p.read_text().strip() for p in sorted(folder.glob("metrics_export_port_*"))]
    return [f"http://127.0.0.1:{port}/metrics" for port in ports if port.isdigit()]


def metrics_urls(system: str, pids: dict[str, int]) -> list[str]:
    """Where the system's engine gauges are: Ray's metrics endpoint(s) of the current
    session, or the `vllm serve` API server's own port (from its command line)."""
    if system == "ray_serve":
        return ray_metrics_urls()
    pid = pids.get("api_server")
    args = processes().get(pid, (0, ""))[1].split() if pid else []
    port = args[args.index("--port") + 1] if "--port" in args[:-1] else "8000"
    return [f"http://127.0.0.1:{port}/metrics"]


def gauge_sums(text: str, names: dict[str, str]) -> dict[str, float]:
    """Each gauge summed over its series in a Prometheus text page (absent: not in)."""
    sums: dict[str, float] = {}
    for line in text.splitlines():
        for key, name in names.items():
            if line.startswith(name) and line[len(name) : len(name) + 1] in ("{", " "):
                sums[key] = sums.get(key, 0.0) + float(line.rsplit(" ", 1)[1])
    return sums


def sample_gauges(system: str, urls: list[str], stop: threading.Event) -> dict[str, float]:
    """The engine gauges averaged over the half-second reads until ``stop``."""
    names = GAUGES[system]
    reads: list[dict[str, float]] = []
    while not stop.wait(0.5):
        sums: dict[str, float] = {}
        for url in urls:
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    page = r.read().decode(errors="replace")
            except OSError:
                continue
            for key, value in gauge_sums(page, names).items():
                sums[key] = sums.get(key, 0.0) + value
        if sums:
            reads.append(sums)
    if not reads:  # a twin's processes are not told apart: no gauges to read
        return {"reads": 0}
    out = {f"{k}_mean": round(sum(r.get(k, 0.0) for r in reads) / len(reads), 2) for k in names}
    return {**out, "reads": len(reads)}


def measure(system: str, pids: dict[str, int], ns: argparse.Namespace, key: str) -> dict[str, Any]:
    """One window: CPU seconds per second of each process, py-spy of the front ones, the
    engine's gauges, the machine's busiest processes and its GPUs."""
    spies = []
    if ns.py_spy:
        roles = [*FRONTS[system], *(["engine_core"] if ns.py_spy_engine else [])]
        for role in roles:
            if role in pids:
                path = ns.out / f"{key.replace(' ', '.')}.{role}.txt"
                cmd = [ns.py_spy, "record", "--nonblocking", "--format", "raw", "--rate", "200",
                       "--duration", str(max(1, round(ns.window))), "--pid", str(pids[role]),
                       "-o", str(path)]  # fmt: skip
                # An engine core's main thread waits on the GPU: idle samples kept, by thread.
                cmd += ["--idle", "--threads"] if role == "engine_core" else []
                pipe = subprocess.PIPE
                spies.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=pipe))
    stop, gauges = threading.Event(), {}
    urls = metrics_urls(system, pids) if pids else []
    sampler = threading.Thread(target=lambda: gauges.update(sample_gauges(system, urls, stop)))
    sampler.start()
    gpus = gpu_sampler()
    start = {role: cpu_s(pid) for role, pid in pids.items()}
    sched_start = {role: sched_stats.read(pid) for role, pid in pids.items()}
    placement = sched_stats.Placement(pids).start()
    everyone = machine_cpu()
    t0 = time.monotonic()
    ended = hold(ns.phase_file, key, ns.window)
    elapsed = max(time.monotonic() - t0, 1e-3)
    cpus_seen = placement.stop()
    if ended == "phase":
        for spy in spies:  # py-spy writes what it has on SIGINT
            spy.send_signal(signal.SIGINT)
    machine = busiest(everyone, machine_cpu(), elapsed)
    stop.set()
    sampler.join(timeout=10)
    result: dict[str, Any] = {"window_s": round(elapsed, 2), "ended": ended, "pids": pids}
    result |= {"cpu_s_per_s": {}, "engine": gauges, "machine": machine, "gpu": gpu_stop(gpus)}
    for role, pid in pids.items():
        end, begin = cpu_s(pid), start[role]
        if end is not None and begin is not None:
            result["cpu_s_per_s"][role] = round((end - begin) / elapsed, 4)
    result["sched"] = scheduling(pids, sched_start, cpus_seen, elapsed)
    for spy in spies:
        _, err = spy.communicate(timeout=60)
        if spy.returncode:
            result.setdefault("py_spy_errors", []).append(err.decode(errors="replace")[-500:])
    return result


def scheduling(
    pids: dict[str, int],
    before: dict[str, sched_stats.Sched | None],
    cpus_seen: dict[str, dict[str, int]],
    elapsed: float,
) -> dict[str, dict[str, Any]]:
    """Each process's scheduling over the window (``bench.sched_stats``): run-queue wait,
    involuntary switches, the CPUs its busy threads ran on, how many CPUs it may use."""
    out: dict[str, dict[str, Any]] = {}
    for role, pid in pids.items():
        begin, end = before.get(role), sched_stats.read(pid)
        if begin is None or end is None:
            continue
        out[role] = sched_stats.rates(begin, end, elapsed) | {
            "cpus": cpus_seen.get(role, {}),
            "affinity_cpus": sched_stats.affinity(pid),
            "threads": end.threads,
        }
    return out


def watch(ns: argparse.Namespace, results: dict[str, Any], done: threading.Event) -> None:
    """Measures each phase once (its text is the key: a system, or ``system workload``),
    when the benchmark says (its phase file) that it is under measured load; with
    ``--every-turn``, each turn of it (``ray_serve #2``: a head-to-head's halves, in order)."""
    turns: dict[str, int] = {}
    last = ""
    while not done.is_set():
        key = phase_now(ns.phase_file)
        if key != last and key:
            turns[key] = turns.get(key, 0) + 1
        last = key
        system = key.split(" ")[0]
        base = system.split("@")[0]  # vllm_serve@2: the twin of a control run
        name = f"{key} #{turns.get(key, 0)}" if ns.every_turn else key
        if base in FRONTS and name not in results:
            time.sleep(ns.settle)
            if phase_now(ns.phase_file) != key:
                continue  # the phase ended while settling: its next turn is measured
            pids = find(base) if base == system else {}
            results[name] = measure(base, pids, ns, key)
            print(f"[cpu_profile] {name}: {results[name]}", flush=True)
        time.sleep(0.5)


def per_request(results: dict[str, Any], journey: Path) -> None:
    """CPU microseconds per request: CPU seconds per second over the phase's measured RPS
    (the run of the benchmark that the window fell in: its ``runs``, else the first round of
    its head-to-head or of its workloads' head-to-head)."""
    data = json.loads(journey.read_text())
    rps: dict[str, float] = {}
    for run in data.get("runs", []):
        rps.setdefault(f"{run['system']} {run.get('workload', '')}".strip(), run["rps"])
    for round_ in (data.get("head_to_head") or {}).get("rounds", [])[:1]:
        for system, brief in round_.items():
            rps.setdefault(system, brief["rps"])
    per_workload = data.get("workload_head_to_head") or {}
    for round_ in per_workload.get("rounds", [])[:1]:
        for workload, brief in round_.items():
            rps.setdefault(f"{per_workload['system']} {workload}", brief["rps"])
    for key, result in results.items():
        key = key.split(" #")[0]  # a turn of --every-turn: the system's first-round RPS
        found = rps.get(key) or rps.get(key.split(" ")[0])
        if found:
            result["rps"] = found
            result["cpu_us_per_request"] = {
                role: round(v * 1e6 / found) for role, v in result["cpu_s_per_s"].items()
            }


def plot(out: Path) -> None:
    """profile.png from profile.json (matplotlib: on the development machine, not the GPU's)."""
    from bench.report import plot_cpu_profile

    results = json.loads((out / "profile.json").read_text())
    plot_cpu_profile(results, out / "profile.png", "CPU per request under load, by process")


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.cpu_profile", description=__doc__)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--window", type=float, default=30)
    p.add_argument("--settle", type=float, default=5, help="seconds between load seen and window")
    p.add_argument("--py-spy", help="path to a py-spy binary (no profile without)")
    p.add_argument(
        "--py-spy-engine", action="store_true", help="py-spy each vLLM engine core process too"
    )
    p.add_argument("--rps-from", type=Path, help="the benchmark's journey.json, for us/request")
    p.add_argument("--plot", action="store_true", help="only plot OUT/profile.json")
    p.add_argument("--every-turn", action="store_true", help="a window for each turn of a phase")
    p.add_argument("command", nargs=argparse.REMAINDER)
    ns = p.parse_args()
    ns.out.mkdir(parents=True, exist_ok=True)
    if ns.plot:
        plot(ns.out)
        return
    command = ns.command[1:] if ns.command[:1] == ["--"] else ns.command
    ns.phase_file = ns.out / "phase.txt"
    ns.phase_file.write_text("")
    os.environ["BENCH_PHASE_FILE"] = str(ns.phase_file)
    results: dict[str, Any] = {}
    done = threading.Event()
    watcher = threading.Thread(target=watch, args=(ns, results, done), daemon=True)
    watcher.start()
    rc = subprocess.call(command)
    done.set()
    watcher.join(timeout=ns.window + 90)
    if ns.rps_from and ns.rps_from.exists():
        per_request(results, ns.rps_from)
    (ns.out / "profile.json").write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2), flush=True)
    sys.exit(rc)


if __name__ == "__main__":
    main()
