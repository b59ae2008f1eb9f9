"""bench.sched_stats: run-queue waits, involuntary switches and CPU placement, read from a
real kernel's /proc for busy processes pinned to one CPU."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from bench import sched_stats

BUSY = "while True: pass"


@contextmanager
def busy_on(cpu: int, count: int = 1) -> Iterator[list[int]]:
    """``count`` busy-looping processes, each allowed only ``cpu``."""
    procs = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(count)]
    try:
        for p in procs:
            os.sched_setaffinity(p.pid, {cpu})
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            p.kill()
            p.wait()


def _window(pids: list[int], seconds: float) -> list[dict[str, float]]:
    before = [sched_stats.read(pid) for pid in pids]
    time.sleep(seconds)
    after = [sched_stats.read(pid) for pid in pids]
    out = []
    for b, a in zip(before, after, strict=True):
        assert b is not None
        assert a is not None
        out.append(sched_stats.rates(b, a, seconds))
    return out


def test_two_busy_processes_on_one_cpu_wait_for_it_and_are_preempted() -> None:
    """Two busy loops pinned to one CPU share it: together they run about one CPU second a
    second, and each waits on the run queue and is switched out against its will; one alone
    on that CPU would wait far less (the machine's other work shares it too, so the bound is
    loose: sharing with a twin costs it at least a fifth of each second)."""
    with busy_on(0, count=2) as pids:
        time.sleep(0.3)
        shared = _window(pids, 2.0)
    assert sum(r["run_s_per_s"] for r in shared) < 1.2
    assert all(r["runqueue_wait_s_per_s"] > 0.2 for r in shared), shared
    assert all(r["nonvoluntary_per_s"] > 1 for r in shared), shared


def test_placement_sees_the_one_cpu_a_process_may_use() -> None:
    cpu = max(os.sched_getaffinity(0))
    with busy_on(cpu) as [pid]:
        placement = sched_stats.Placement({"engine_core": pid}, interval_s=0.1).start()
        time.sleep(1.0)
        seen = placement.stop()
        assert sched_stats.affinity(pid) == 1
    assert set(seen["engine_core"]) == {str(cpu)}
    assert seen["engine_core"][str(cpu)] >= 3


def test_a_gone_process_reads_none() -> None:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    assert sched_stats.read(p.pid) is None
    assert sched_stats.affinity(p.pid) is None


@pytest.mark.parametrize("elapsed", [0.0, 2.0])
def test_rates_per_second_of_the_window(elapsed: float) -> None:
    before = sched_stats.Sched(run_s=1.0, wait_s=0.5, nonvoluntary=10, threads=3)
    after = sched_stats.Sched(run_s=3.0, wait_s=1.5, nonvoluntary=30, threads=3)
    got = sched_stats.rates(before, after, elapsed)
    if elapsed:
        assert got == {"run_s_per_s": 1.0, "runqueue_wait_s_per_s": 0.5, "nonvoluntary_per_s": 10.0}
    else:  # a window of no length divides by a millisecond, not by zero
        assert got["run_s_per_s"] == 2000.0
