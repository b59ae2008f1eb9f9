"""A GC watcher loaded by every Python process that has this folder on ``PYTHONPATH``.

In a process whose command line holds ``GCWATCH_MATCH`` (default ``default_worker``: Ray's
workers, the Serve replicas among them) it times every collection through ``gc.callbacks``
and appends, every ``GCWATCH_EVERY_S`` seconds (10), one line to
``$GCWATCH_DIR/gc.PID.txt`` (default ``/tmp/gcwatch``): the time, per generation the number
of passes, their total and longest time, the objects frozen (``gc.freeze``) and tracked.
Cumulative counts: the difference between two lines is what the interval cost. Why: a full
pass over a replica's heap (torch, vLLM, Ray: about half a million objects) stops its event
loop for a quarter of a second unless the heap was frozen at start.
"""

from __future__ import annotations

import gc
import os
import threading
import time
from pathlib import Path


def _install() -> None:
    try:
        cmd = Path(f"/proc/{os.getpid()}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except (OSError, UnicodeDecodeError):
        return
    if os.environ.get("GCWATCH_MATCH", "default_worker") not in cmd:
        return
    stats = {g: [0, 0.0, 0.0] for g in range(3)}
    started: dict[int, float] = {}

    def on_gc(phase: str, info: dict[str, int]) -> None:
        gen = info.get("generation", 0)
        if phase == "start":
            started[gen] = time.perf_counter()
            return
        took = time.perf_counter() - started.get(gen, time.perf_counter())
        s = stats[gen]
        s[0], s[1], s[2] = s[0] + 1, s[1] + took, max(s[2], took)

    gc.callbacks.append(on_gc)
    out = Path(os.environ.get("GCWATCH_DIR", "/tmp/gcwatch"))
    every = float(os.environ.get("GCWATCH_EVERY_S", "10"))

    def dump() -> None:
        out.mkdir(parents=True, exist_ok=True)
        while True:
            time.sleep(every)
            gens = " ".join(
                f"g{g}:n={n},tot={tot * 1e3:.1f}ms,max={top * 1e3:.1f}ms"
                for g, (n, tot, top) in stats.items()
            )
            line = f"{time.time():.0f} {gens} frozen={gc.get_freeze_count()}"
            with (out / f"gc.{os.getpid()}.txt").open("a") as f:
                f.write(f"{line} tracked={len(gc.get_objects())}\n")

    threading.Thread(target=dump, name="gcwatch", daemon=True).start()


_install()
