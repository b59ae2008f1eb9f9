"""The port picker stays out of the ranges the kernel and Ray hand out (CI lost a run to a
port from bind(0) that another process took before HAProxy bound it)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from bench import ports


def test_ports_lie_between_rays_worker_ports_and_the_ephemeral_range() -> None:
    given = [ports.free_port() for _ in range(50)]
    assert len(set(given)) == 50
    assert all(ports.RAY_WORKER_PORTS_END < p < ports.ephemeral_start() for p in given)


def test_a_port_in_use_is_passed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        taken = held.getsockname()[1]
        picks = iter([taken, taken + 1 if taken < 65_535 else taken - 1])
        monkeypatch.setattr(ports.random, "randint", lambda _a, _b: next(picks))
        assert ports.free_port() != taken


def test_the_kernels_range_is_read_and_a_missing_file_falls_back(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    custom = tmp_path / "range"
    custom.write_text("40000\t60999\n")
    monkeypatch.setattr(ports, "_EPHEMERAL_RANGE", custom)
    assert ports.ephemeral_start() == 40_000
    monkeypatch.setattr(ports, "_EPHEMERAL_RANGE", tmp_path / "absent")
    assert ports.ephemeral_start() == ports.LINUX_EPHEMERAL_START
