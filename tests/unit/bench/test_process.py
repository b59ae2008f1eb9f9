"""How a benchmarked server is stopped (bench/process.py): one that started its own Ray
cluster goes at once with every process below it; any other gets SIGINT first."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from bench.process import Process, descendants


def _server(tmp_path: Path, child: str, ray: bool) -> Process:
    """A stand-in server: a shell (its own process group) whose child, named ``child``,
    ignores SIGINT and has a child of its own (as a raylet has workers and they engine
    cores); the shell waits on it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / child).symlink_to("/bin/sh")
    script = f"trap '' INT; sleep 120 & {child} -c 'sleep 120 & wait' & wait"
    proc = subprocess.Popen(
        ["sh", "-c", script],
        env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"},
        start_new_session=True,
    )
    deadline = time.monotonic() + 10
    while len(descendants(proc.pid)) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    return Process("server", proc, tmp_path / "server.log", ray=ray)


def test_a_server_with_its_own_ray_cluster_is_killed_with_its_tree_at_once(
    tmp_path: Path,
) -> None:
    server = _server(tmp_path, "gcs_server", ray=True)
    tree = descendants(server.proc.pid)
    assert "gcs_server" in {p.name() for p in tree}
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 15  # not SIGINT's 60 s wait: this one ignores SIGINT
    assert server.proc.returncode == -9
    assert not [p for p in tree if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


@pytest.mark.parametrize("ray", [False, True])
def test_any_other_server_gets_sigint_first(tmp_path: Path, ray: bool) -> None:
    """Without a gcs_server below it (a Ray driver on a cluster it did not start must
    delete its application there), the server is asked first."""
    proc = subprocess.Popen(["sleep", "120"], start_new_session=True)
    server = Process("server", proc, tmp_path / "server.log", ray=ray)
    server.stop()
    assert proc.returncode == -2  # SIGINT ended it
