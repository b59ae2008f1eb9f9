"""A benchmarked server in its own process, and how it is stopped.

Its own module because stopping is where the harness's minutes went: ``serve run``'s graceful
stop waits out the HAProxy ingress's deregistration window (Ray's
``RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S``, 30 s) for every replica after every
measurement, device time on the GPU and CI time on the CPU. A server that started its own Ray
cluster is done with it once measured: it is killed with its whole process tree at once.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import psutil


@dataclass
class Process:
    """A server in its own process group, its output in a log file."""

    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    ray: bool = False  # stop the Ray cluster it started as well
    env: dict[str, str] = field(default_factory=dict)

    def stop(self) -> None:
        """A server that started its own Ray cluster (a ``gcs_server`` among its descendants):
        SIGKILL to it and every descendant (the cluster, its workers, their engine cores and
        HAProxy), nothing to drain. Any other: SIGINT (a Ray driver on a cluster it did not
        start then deletes its application there), SIGKILL after 60 s."""
        if self.proc.poll() is not None:
            return
        tree = descendants(self.proc.pid)
        if self.ray and any(_name(p) == "gcs_server" for p in tree):
            kill_tree(self.proc, tree)
            return
        os.killpg(self.proc.pid, signal.SIGINT)
        try:
            self.proc.wait(timeout=60)
            return
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        if self.ray:  # killed: its Ray processes may be left behind
            cmd = [sys.executable, "-m", "ray.scripts.scripts", "stop", "--force"]
            subprocess.run(cmd, env=self.env, capture_output=True, timeout=120)

    def tail(self, n: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-n:] if self.log.exists() else ""


def descendants(pid: int) -> list[psutil.Process]:
    """Every process below ``pid`` (none if it is gone)."""
    with contextlib.suppress(psutil.Error):
        return list(psutil.Process(pid).children(recursive=True))
    return []


def kill_tree(proc: subprocess.Popen[bytes], tree: list[psutil.Process]) -> None:
    """SIGKILL to ``proc``'s process group and to ``tree``, then reaps ``proc`` and waits
    (10 s at most) until the tree is gone, so the next server finds its ports and memory."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    for p in tree:
        with contextlib.suppress(psutil.Error):
            p.kill()
    proc.wait()
    psutil.wait_procs(tree, timeout=10)


def _name(p: psutil.Process) -> str:
    with contextlib.suppress(psutil.Error):
        return str(p.name())
    return ""
