"""A per-step trace of vLLM's scheduler, to find where a batch's places go idle.

The engine's step means (``translator_engine_*_mean``) say how full the batch was; not why a
place stayed empty while requests waited. This module is imported by every Python process
whose PYTHONPATH holds its folder (as ``sitecustomize``) and does nothing unless
``$SCHED_TRACE_DIR`` is set. Then, when vLLM's v1 scheduler module loads (in the engine core
process), it wraps ``Scheduler.schedule``, ``update_from_output``, ``add_request`` and
``_free_request`` and appends JSON lines to ``$SCHED_TRACE_DIR/<pid>.jsonl``: one per step
(the running and waiting counts before and after scheduling, the requests scheduled, new,
and held in the batch without a token) and one per request added and freed. Each step
carries the benchmark's phase (``$BENCH_PHASE_FILE``, written by ``bench.journey``).
``python -m bench.schedtrace`` reads the files. A tool for GPU runs, not for production.

It also carries the experiment that led to grouped admission (serve_app/engine/
grouped_admission.py): with ``$ADMIT_GROUP`` (or the number in ``$ADMIT_GROUP_FILE``, which a
benchmark can change between runs of one service) above 1, the scheduler admits nobody while
fewer places than that are free and a request waits, for at most ``$ADMIT_MAX_HOLD`` steps
(the rule and step are that module's: the project's root must be on the PYTHONPATH too, as
bench/gpu/run.sh puts it).
"""

from __future__ import annotations

import atexit
import functools
import importlib.abc
import importlib.util
import json
import os
import sys
import time
from typing import Any

TARGET = "vllm.v1.core.sched.scheduler"


class _Trace:
    """Buffered JSON lines, tagged with the benchmark's phase (read at most twice a second).
    Written every 512 lines, every 2 s, whenever the scheduler runs dry and at exit: an engine
    core that outlives its shutdown grace (5 s; a busy CPU makes that likely) is SIGKILLed
    and never reaches ``atexit``."""

    def __init__(self, folder: str) -> None:
        os.makedirs(folder, exist_ok=True)
        self.path = os.path.join(folder, f"{os.getpid()}.jsonl")
        self.lines: list[str] = []
        self.phase_file = os.environ.get("BENCH_PHASE_FILE")
        self.phase, self.phase_at = "", 0.0
        self.flushed_at = time.monotonic()
        atexit.register(self.flush)

    def current_phase(self, now: float) -> str:
        if self.phase_file and now - self.phase_at > 0.5:
            self.phase_at = now
            try:
                with open(self.phase_file) as f:
                    self.phase = f.read().strip()
            except OSError:
                self.phase = ""
        return self.phase

    def add(self, record: dict[str, Any]) -> None:
        self.lines.append(json.dumps(record, separators=(",", ":")))
        if len(self.lines) >= 512 or time.monotonic() - self.flushed_at > 2.0:
            self.flush()

    def flush_if_idle(self, scheduler: Any) -> None:
        if not scheduler.running and not _waiting(scheduler):
            self.flush()

    def flush(self) -> None:
        self.flushed_at = time.monotonic()
        if self.lines:
            with open(self.path, "a") as f:
                f.write("\n".join(self.lines) + "\n")
            self.lines = []


def _waiting(s: Any) -> int:
    return len(s.waiting) + len(getattr(s, "skipped_waiting", ()))


def _at_max(r: Any) -> bool:
    """vLLM's async-scheduling hold: the step in flight already makes the last token."""
    max_tokens = getattr(r, "max_tokens", None)
    placeholders = getattr(r, "num_output_placeholders", 0)
    return bool(
        max_tokens is not None
        and placeholders > 0
        and r.num_computed_tokens + 2 - placeholders >= r.num_prompt_tokens + max_tokens
    )


class _Group:
    """The admission group of the experiment: $ADMIT_GROUP, or the number in
    $ADMIT_GROUP_FILE (read at most ten times a second, so a benchmark can switch it
    between runs of one service)."""

    def __init__(self) -> None:
        self.file = os.environ.get("ADMIT_GROUP_FILE")
        self.value, self.read_at = max(1, int(os.environ.get("ADMIT_GROUP", "1"))), 0.0

    def __call__(self) -> int:
        now = time.monotonic()
        if self.file and now - self.read_at > 0.1:
            self.read_at = now
            try:
                with open(self.file) as f:
                    self.value = max(1, int(f.read().strip() or 1))
            except (OSError, ValueError):
                self.value = 1
        return self.value


def _gated(schedule: Any, group: _Group, max_hold: int) -> Any:
    """Experiment (admission group > 1): grouped admission's own rule and step
    (serve_app/engine/grouped_admission.py), with a group that can change between runs."""
    from serve_app.engine.grouped_admission import AdmissionSettings, holds, without_admissions

    settings = functools.lru_cache(lambda g: AdmissionSettings(group=g, max_hold_steps=max_hold))

    def gated_schedule(self: Any, *args: Any, **kwargs: Any) -> Any:
        free = self.max_num_running_reqs - len(self.running)
        held = getattr(self, "_gate_held", 0)
        if not holds(settings(group()), free, len(self.waiting), len(self.running), held):
            self._gate_held = 0
            return schedule(self, *args, **kwargs)
        self._gate_held = held + 1
        return without_admissions(self, functools.partial(schedule, self, *args, **kwargs))

    return gated_schedule


def _patch(module: Any, trace: _Trace) -> None:
    cls = module.Scheduler
    group = _Group()
    hold = int(os.environ.get("ADMIT_MAX_HOLD", "10"))
    cls.schedule = _gated(cls.schedule, group, hold)
    schedule, update, add, free = (
        cls.schedule,
        cls.update_from_output,
        cls.add_request,
        cls._free_request,
    )

    def traced_schedule(self: Any, *args: Any, **kwargs: Any) -> Any:
        r0, w0, t0 = len(self.running), _waiting(self), time.perf_counter()
        out = schedule(self, *args, **kwargs)
        now = time.time()
        scheduled = out.num_scheduled_tokens
        held = [r for r in self.running if r.request_id not in scheduled]
        trace.add(
            {
                "e": "s",
                "t": round(now, 4),
                "us": round((time.perf_counter() - t0) * 1e6),
                "ph": trace.current_phase(now),
                "r0": r0,
                "w0": w0,
                "r1": len(self.running),
                "w1": _waiting(self),
                "n": len(scheduled),
                "new": len(out.scheduled_new_reqs),
                "tok": out.total_num_scheduled_tokens,
                "held": len(held),
                "max": sum(_at_max(r) for r in held),
                "g": group(),
            }
        )
        return out

    def traced_update(self: Any, *args: Any, **kwargs: Any) -> Any:
        r0 = len(self.running)
        out = update(self, *args, **kwargs)
        trace.add({"e": "u", "t": round(time.time(), 4), "r0": r0, "r1": len(self.running)})
        trace.flush_if_idle(self)
        return out

    def traced_add(self: Any, request: Any) -> Any:
        trace.add(
            {
                "e": "a",
                "t": round(time.time(), 4),
                "id": request.request_id,
                "p": request.num_prompt_tokens,
                "m": getattr(request, "max_tokens", None),
                "pr": getattr(request, "priority", 0),
            }
        )
        return add(self, request)

    def traced_free(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        trace.add(
            {
                "e": "f",
                "t": round(time.time(), 4),
                "id": request.request_id,
                "o": request.num_output_tokens,
                "st": str(request.status).rsplit(".", 1)[-1],
            }
        )
        out = free(self, request, *args, **kwargs)
        trace.flush_if_idle(self)
        return out

    cls.schedule, cls.update_from_output = traced_schedule, traced_update
    cls.add_request, cls._free_request = traced_add, traced_free


class _Finder(importlib.abc.MetaPathFinder):
    """Patches the scheduler module right after it executes, on its first import."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != TARGET:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        loader, folder = spec.loader, self.folder
        run = loader.exec_module

        def exec_module(module: Any) -> None:
            run(module)
            _patch(module, _Trace(folder))

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


if os.environ.get("SCHED_TRACE_DIR"):
    sys.meta_path.insert(0, _Finder(os.environ["SCHED_TRACE_DIR"]))
