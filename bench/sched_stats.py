"""How the kernel scheduled a process over a window: time on a CPU, time runnable but waiting
for one, switches it did not ask for, and the CPUs its threads ran on.

Why: on the GPU machine the engine core of each system runs a full core, and in 10 of 12
streaming rounds of 2026-11-29 the system started first served more (issue 18, item 2). If
the other one's engine core waits for a CPU (its run-queue wait), is preempted (involuntary
switches) or shares a CPU with another busy process (the CPUs it ran on), that is read here;
``bench.cpu_profile`` adds it to each window's processes.

Linux's ``/proc/PID/task/TID/schedstat`` (nanoseconds on a CPU, nanoseconds waiting on a run
queue, time slices) and ``status`` (``nonvoluntary_ctxt_switches``), summed over the
process's threads; the CPU each thread last ran on is field 39 of its ``stat``. Standard
library only (the GPU machine's Python has no extras).
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Sched:
    """A process's totals so far, over its threads alive at the read."""

    run_s: float
    wait_s: float
    nonvoluntary: int
    threads: int


def _tasks(pid: int) -> list[Path]:
    try:
        return list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return []


def _nonvoluntary(task: Path) -> int:
    for line in (task / "status").read_text().splitlines():
        if line.startswith("nonvoluntary_ctxt_switches:"):
            return int(line.split()[1])
    return 0


def read(pid: int) -> Sched | None:
    """The totals of ``pid`` now, or None when it is gone (or the kernel keeps no schedstat).
    A thread that ends between two reads takes its share with it: rates over a window are
    for the threads that lived through it, which are the ones doing the work."""
    run = wait = 0
    switches = threads = 0
    for task in _tasks(pid):
        try:
            on_cpu, queued, _ = (task / "schedstat").read_text().split()
            switches += _nonvoluntary(task)
        except (OSError, ValueError):
            continue
        run, wait, threads = run + int(on_cpu), wait + int(queued), threads + 1
    if not threads:
        return None
    return Sched(run / 1e9, wait / 1e9, switches, threads)


def rates(before: Sched, after: Sched, elapsed_s: float) -> dict[str, float]:
    """Per second of the window: CPU seconds, seconds waiting for a CPU (over all threads: 0.1
    is a tenth of a core's worth of waiting), involuntary switches."""
    elapsed_s = max(elapsed_s, 1e-3)
    return {
        "run_s_per_s": round((after.run_s - before.run_s) / elapsed_s, 4),
        "runqueue_wait_s_per_s": round((after.wait_s - before.wait_s) / elapsed_s, 4),
        "nonvoluntary_per_s": round((after.nonvoluntary - before.nonvoluntary) / elapsed_s, 1),
    }


def _cpu_time(task: Path) -> tuple[int, int] | None:
    """(utime + stime ticks, the CPU the thread last ran on) of one thread."""
    try:
        fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[11]) + int(fields[12]), int(fields[36])


class Placement:
    """Samples, every ``interval_s`` until stopped, the CPU of each thread of each process that
    used CPU since the last sample: which CPUs a process's work ran on, and how often."""

    def __init__(self, pids: dict[str, int], interval_s: float = 0.5) -> None:
        self._pids, self._interval = pids, interval_s
        self._seen: dict[str, Counter[int]] = {role: Counter() for role in pids}
        self._last: dict[Path, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Placement:
        self._sample()  # the threads' CPU times to compare the first interval with
        self._thread.start()
        return self

    def _sample(self) -> None:
        for role, pid in self._pids.items():
            for task in _tasks(pid):
                read = _cpu_time(task)
                if read is None:
                    continue
                ticks, cpu = read
                if task in self._last and ticks > self._last[task]:
                    self._seen[role][cpu] += 1
                self._last[task] = ticks

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self._sample()

    def stop(self) -> dict[str, dict[str, int]]:
        """For each role, the CPUs its busy threads were seen on (CPU: samples), most first."""
        self._stop.set()
        self._thread.join(timeout=10)
        return {
            role: {str(cpu): n for cpu, n in seen.most_common()}
            for role, seen in self._seen.items()
        }


def affinity(pid: int) -> int | None:
    """How many CPUs the process may run on (None when it is gone)."""
    try:
        return len(os.sched_getaffinity(pid))
    except OSError:
        return None
