"""Where the serving path's CPU goes, under load on the GPU machine (issue 18, "How").

    python -m bench.cpu_profile --out DIR [--window 30] [--py-spy PATH] -- COMMAND...

runs COMMAND (a benchmark such as ``bench.journey --systems ray_serve,vllm_serve``) and,
beside it, watches the serving processes: this project's replica and Ray's proxy, `vllm
serve`'s API server, and each one's vLLM engine core (a child process). When the benchmark
says that a system is under measured load (``bench.journey`` writes the system's name to
$BENCH_PHASE_FILE, which this sets), it waits a few seconds and measures a window of
``--window`` seconds: each process's CPU seconds (``/proc/PID/stat`` utime + stime, all
threads) and, with ``--py-spy``, a sampled profile of the front processes
(``py-spy record --nonblocking --format raw``: collapsed stacks, one file per process).
``profile.json`` gets CPU seconds per second of each process; dividing by the RPS that the
benchmark measured for that system gives CPU microseconds per request, which
``--rps-from journey.json`` does at the end. Standard library only (the GPU machine's
Python has no extras).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

TICK = os.sysconf("SC_CLK_TCK")
# Front processes by a piece of their command line; engine cores are found as their children.
FRONTS = {
    "ray_serve": {"replica": "ServeReplica:translator:Translator", "proxy": "ProxyActor"},
    "vllm_serve": {"api_server": "vllm.entrypoints."},
}


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
    for role, pid in list(found.items()):
        children = [p for p, (ppid, cmd) in procs.items() if ppid == pid and "EngineCore" in cmd]
        children = children or [p for p, (ppid, _) in procs.items() if ppid == pid]
        if children and role in ("replica", "api_server"):
            found["engine_core"] = max(children, key=lambda p: cpu_s(p) or 0.0)
    return found


def measure(system: str, pids: dict[str, int], ns: argparse.Namespace) -> dict[str, Any]:
    """One window: CPU seconds per second of each process, py-spy of the front ones."""
    spies = []
    if ns.py_spy:
        for role in FRONTS[system]:
            if role in pids:
                path = ns.out / f"{system}.{role}.txt"
                cmd = [ns.py_spy, "record", "--nonblocking", "--format", "raw", "--rate", "200",
                       "--duration", str(ns.window), "--pid", str(pids[role]),
                       "-o", str(path)]  # fmt: skip
                pipe = subprocess.PIPE
                spies.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=pipe))
    start = {role: cpu_s(pid) for role, pid in pids.items()}
    t0 = time.monotonic()
    time.sleep(ns.window)
    elapsed = time.monotonic() - t0
    result: dict[str, Any] = {"window_s": round(elapsed, 2), "pids": pids, "cpu_s_per_s": {}}
    for role, pid in pids.items():
        end, begin = cpu_s(pid), start[role]
        if end is not None and begin is not None:
            result["cpu_s_per_s"][role] = round((end - begin) / elapsed, 4)
    for spy in spies:
        _, err = spy.communicate(timeout=60)
        if spy.returncode:
            result.setdefault("py_spy_errors", []).append(err.decode(errors="replace")[-500:])
    return result


def watch(ns: argparse.Namespace, results: dict[str, Any], done: threading.Event) -> None:
    """Measures each system once, when the benchmark says (its phase file) that it is under
    measured load."""
    while not done.is_set() and len(results) < len(FRONTS):
        try:
            system = ns.phase_file.read_text().split(" ")[0]
        except OSError:
            system = ""
        if system in FRONTS and system not in results:
            time.sleep(ns.settle)
            results[system] = measure(system, find(system), ns)
            print(f"[cpu_profile] {system}: {results[system]}", flush=True)
        time.sleep(0.5)


def per_request(results: dict[str, Any], journey: Path) -> None:
    """CPU microseconds per request: CPU seconds per second over the system's measured RPS
    (the run of the benchmark that the window fell in: its ``runs``, else its head-to-head)."""
    data = json.loads(journey.read_text())
    rps: dict[str, float] = {}
    for run in data.get("runs", []):
        rps.setdefault(run["system"], run["rps"])
    for round_ in (data.get("head_to_head") or {}).get("rounds", [])[:1]:
        for system, brief in round_.items():
            rps.setdefault(system, brief["rps"])
    for system, result in results.items():
        if rps.get(system):
            result["rps"] = rps[system]
            result["cpu_us_per_request"] = {
                role: round(v * 1e6 / rps[system]) for role, v in result["cpu_s_per_s"].items()
            }


def plot(out: Path) -> None:
    """profile.png from profile.json (matplotlib: on the development machine, not the GPU's)."""
    from bench.report import plot_cpu_profile

    results = json.loads((out / "profile.json").read_text())
    plot_cpu_profile(results, out / "profile.png", "CPU per request under load, by process")


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.cpu_profile", description=__doc__)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--window", type=int, default=30)
    p.add_argument("--settle", type=int, default=5, help="seconds between load seen and window")
    p.add_argument("--py-spy", help="path to a py-spy binary (no profile without)")
    p.add_argument("--rps-from", type=Path, help="the benchmark's journey.json, for us/request")
    p.add_argument("--plot", action="store_true", help="only plot OUT/profile.json")
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
