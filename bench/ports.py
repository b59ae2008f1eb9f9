"""Ports for the servers that benchmarks and tests start, chosen where nothing else draws from.

A port from ``bind(("127.0.0.1", 0))`` comes from the kernel's ephemeral range, the range
every outgoing connection and every Ray process that binds port 0 (raylet, object manager,
metrics agent) draws from too. Between closing the probe socket and the server binding the
port, one of them took it: CI lost a run to HAProxy's "cannot bind socket (Address already in
use)" for the HTTP port a test had just been given. So ports come from below the kernel's
ephemeral range and above Ray's worker ports (10002-19999 by default), at random so that test
processes run side by side seldom meet, never twice in one process, and only once a probe
bind shows the port free.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

RAY_WORKER_PORTS_END = 19_999  # Ray's default max_worker_port
LINUX_EPHEMERAL_START = 32_768  # the kernel's default when /proc does not say
_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_given: set[int] = set()


def ephemeral_start() -> int:
    """The first port the kernel hands out for port 0 and outgoing connections."""
    try:
        return int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return LINUX_EPHEMERAL_START


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port free now, outside the ranges the kernel and Ray hand out, not given before."""
    low, high = RAY_WORKER_PORTS_END + 1, ephemeral_start() - 1
    if high <= low:  # an unusual kernel range: fall back to the kernel's choice
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return int(s.getsockname()[1])
    for _ in range(1_000):
        port = random.randint(low, high)
        if port not in _given and _bindable(port):
            _given.add(port)
            return port
    raise RuntimeError(f"no free port in {low}-{high}")
