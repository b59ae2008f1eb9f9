"""Grouped admission: vLLM's scheduler taking waiting requests into the batch a few at a time.

Why it exists: on the GPU, an engine step that prefills a new request costs about three
decode-only steps, whether it admits one request or three (an H100 with the Qwen2.5-1.5B
shape: 9-10 ms against 3.0-3.4 ms; ``bench/gpu/schedtrace`` traced it step by step, see
``bench/results/2026-11-25-h100-admission``). Under steady load the batch's places free one
at a time, so vLLM admits one request per step and a fifth of all steps (a third under the
HTML workload, whose posts are several short engine requests) pay that price. Holding the
waiting requests until ``group`` places are free, at most ``max_hold_steps`` steps, puts
several prefills into one step: fewer, fuller mixed steps for a few decode steps in which a
place or two stays empty.

A request whose client streams is never held: its user waits for the first token, which a
hold of up to ``max_hold_steps`` steps delays (on an H100, with every request held: time to
first token 1.46x `vllm serve`'s at p50, 1.20x at p95, ``bench/results/2026-11-26-h100-
grouped-admission``). While one waits, the step admits as vLLM would. Grouping is for answers
that come whole (vLLM's ``RequestOutputKind.FINAL_ONLY``), whose latency is the whole
generation, where a few steps' hold is small and the steps saved raise throughput.

Where the engine runs those mixed steps as whole CUDA graphs (``cudagraph_mode`` resolved to
``FULL``, e.g. FlashAttention 3 on Hopper), an admitting step costs about a decode step and
the hold buys nothing: the empty places it keeps cost a few per cent (an H100 at 25 users:
0.93x `vllm serve`'s RPS with a group of 4 over six rounds in both orders, 0.976x with 1,
``bench/results/2026-12-07-h100-full-item1``). There the scheduler uses ``full_graph_group``
instead (1 by default: vLLM's own admission). vLLM resolves the mode in the worker, which a
one-GPU engine runs in the scheduler's process on the same config object, before it builds
the scheduler; so the group follows what the GPU's attention backend allows, not what the
config asked for (FULL asked on an FA2 GPU falls back to piecewise mixed steps and keeps the
group).

How: ``EngineConfig.admission_group`` > 1 sets vLLM's ``scheduler_cls`` to
:func:`grouped_admission_scheduler` and the settings in ``additional_config``. On a step it
holds, the scheduler schedules the running requests with an empty waiting queue (requests
preempted in that step land there and are put back in front). Everything else is vLLM's
scheduler, sync or async as the engine chose. ``scheduler_cls`` is not a stable vLLM
interface: the subclass touches only ``waiting``, ``running``, ``policy`` and
``max_num_running_reqs``, present in vLLM 0.26 and 0.32, and
tests/integration/test_grouped_admission.py drives it over the installed vLLM's scheduler.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# A child of vLLM's logger: the scheduler runs in the engine core's process, where only
# vLLM's logging is set up, and its lines land beside vLLM's own in the replica's log.
logger = logging.getLogger(f"vllm.{__name__}")

CONFIG_KEY = "serve_app_grouped_admission"
SCHEDULER = f"{__name__}.grouped_admission_scheduler"


class AdmissionSettings(BaseModel):
    """What the scheduler reads from ``additional_config[CONFIG_KEY]``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    group: int = Field(1, ge=1)
    max_hold_steps: int = Field(8, ge=0)
    full_graph_group: int = Field(1, ge=1)

    def wants_scheduler(self) -> bool:
        """Whether any engine could hold a step with these settings."""
        return max(self.group, self.full_graph_group) > 1

    def for_engine(self, vllm_config: Any) -> AdmissionSettings:
        """The settings one engine runs with: ``full_graph_group`` as the group where its
        steps that mix decodes with prefills run as whole CUDA graphs."""
        if not mixed_steps_graphed(vllm_config):
            return self
        return self.model_copy(update={"group": self.full_graph_group})


def mixed_steps_graphed(vllm_config: Any) -> bool:
    """Whether the engine runs a step that mixes decodes with a prefill as one CUDA graph
    (vLLM's resolved ``cudagraph_mode`` has ``FULL`` as its mixed mode)."""
    compilation = getattr(vllm_config, "compilation_config", None)
    mode = getattr(compilation, "cudagraph_mode", None)
    mixed = getattr(mode, "mixed_mode", None)
    if mode is None or mixed is None:
        return False
    return bool(mixed() == type(mode).FULL)


def holds(settings: AdmissionSettings, free: int, waiting: int, running: int, held: int) -> bool:
    """Whether this step admits nobody: a request waits, some run, fewer than ``group``
    places are free (but some are), and the waiting have been held fewer than
    ``max_hold_steps`` steps. A batch with ``group`` free places, an idle engine or an empty
    queue never holds. Fewer waiting than ``group`` still hold: in a closed loop the next
    requests arrive a step or two after the finished ones' answers (25 users on 24 places
    leave about one waiting), and they join the same admission."""
    blocked = 0 < free < settings.group
    return waiting > 0 and running > 0 and blocked and held < settings.max_hold_steps


def streams(request: Any) -> bool:
    """Whether a waiting request's client reads it token by token (any output kind but
    FINAL_ONLY; a request without sampling parameters, e.g. pooling, counts as whole)."""
    from vllm.sampling_params import RequestOutputKind

    params = getattr(request, "sampling_params", None)
    return params is not None and params.output_kind != RequestOutputKind.FINAL_ONLY


class _GroupedAdmission:
    """The mixin over vLLM's ``Scheduler`` / ``AsyncScheduler`` (see the module's docstring)."""

    waiting: Any
    running: list[Any]
    policy: Any
    max_num_running_reqs: int
    vllm_config: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        extra = getattr(self.vllm_config, "additional_config", None) or {}
        asked = AdmissionSettings.model_validate(extra.get(CONFIG_KEY, {}))
        self.admission = asked.for_engine(self.vllm_config)
        self.held_steps = 0
        logger.info(
            "Grouped admission: group %d (%s)",
            self.admission.group,
            "mixed steps run as full CUDA graphs"
            if mixed_steps_graphed(self.vllm_config)
            else "mixed steps run piecewise or eagerly",
        )

    def schedule(self, *args: Any, **kwargs: Any) -> Any:
        step = partial(super().schedule, *args, **kwargs)  # type: ignore[misc]
        free = self.max_num_running_reqs - len(self.running)
        held = holds(self.admission, free, len(self.waiting), len(self.running), self.held_steps)
        if not held or any(streams(request) for request in self.waiting):
            self.held_steps = 0
            return step()
        self.held_steps += 1
        return without_admissions(self, step)


def without_admissions(scheduler: Any, schedule: Callable[[], Any]) -> Any:
    """``schedule()`` (one step of ``scheduler``) with its waiting queue hidden, so that the
    step runs the batch and admits nobody; requests preempted in the step land in the empty
    queue and are put back in front of the waiting ones."""
    from vllm.v1.core.sched.request_queue import create_request_queue

    waiting, scheduler.waiting = scheduler.waiting, create_request_queue(scheduler.policy)
    try:
        return schedule()
    finally:
        preempted, scheduler.waiting = scheduler.waiting, waiting
        if preempted:
            scheduler.waiting.prepend_requests(preempted)


def scheduler_classes() -> tuple[type, type]:
    """The grouped-admission subclasses of vLLM's sync and async schedulers."""
    from vllm.v1.core.sched.async_scheduler import AsyncScheduler
    from vllm.v1.core.sched.scheduler import Scheduler

    sync = type("GroupedAdmissionScheduler", (_GroupedAdmission, Scheduler), {})
    async_ = type("GroupedAdmissionAsyncScheduler", (_GroupedAdmission, AsyncScheduler), {})
    return sync, async_


def grouped_admission_scheduler(*args: Any, **kwargs: Any) -> Any:
    """vLLM's ``scheduler_cls``: called as the class would be, it builds the subclass that
    matches the engine's choice of async scheduling (an async engine needs vLLM's
    ``AsyncScheduler``)."""
    vllm_config: Any = kwargs["vllm_config"] if "vllm_config" in kwargs else args[0]
    sync, async_ = scheduler_classes()
    use_async = bool(getattr(vllm_config.scheduler_config, "async_scheduling", False))
    return (async_ if use_async else sync)(*args, **kwargs)


def engine_args(settings: AdmissionSettings, additional: dict[str, Any]) -> dict[str, Any]:
    """The AsyncEngineArgs fields that turn grouped admission on (none where every group is
    1)."""
    if not settings.wants_scheduler():
        return {}
    return {
        "scheduler_cls": SCHEDULER,
        "additional_config": {**additional, CONFIG_KEY: settings.model_dump()},
    }
