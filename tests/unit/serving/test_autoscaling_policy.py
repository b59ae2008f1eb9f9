"""The queue-depth autoscaling policy and what replicas report to it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from ray.serve.config import AutoscalingConfig, AutoscalingContext

from serve_app.core.config import AppConfig
from serve_app.engine.protocol import EngineLoad
from serve_app.engine.vllm import SchedulerStatsRecorder
from serve_app.serving.autoscaling import (
    ADMITTED,
    ENGINE_RUNNING,
    ENGINE_WAITING,
    queue_depth_policy,
    replica_queue_depths,
    replica_stats,
)
from serve_app.translation.service import TranslationService
from tests.fakes import FakeEngine


def context(
    metrics: dict[str, dict[Any, float]],
    serve_requests: float = 0.0,
    serve_queued: float = 0.0,
    replicas: int = 1,
    bounds: tuple[int, int] = (1, 4),
    target: float = 20,
) -> AutoscalingContext:
    """A real AutoscalingContext, as Ray Serve's controller builds it."""
    config = AutoscalingConfig(
        min_replicas=bounds[0], max_replicas=bounds[1], target_ongoing_requests=target
    )
    return AutoscalingContext(
        deployment_id=None,  # type: ignore[arg-type]
        deployment_name="Translator",
        app_name="translator",
        current_num_replicas=replicas,
        target_num_replicas=replicas,
        running_replicas=[],
        total_num_requests=serve_requests,
        total_queued_requests=serve_queued,
        aggregated_metrics=lambda: metrics,
        raw_metrics=None,
        capacity_adjusted_min_replicas=bounds[0],
        capacity_adjusted_max_replicas=bounds[1],
        policy_state={},
        last_scale_up_time=None,
        last_scale_down_time=None,
        current_time=0.0,
        config=config,
    )


def per_replica(running: list[float], waiting: list[float], admitted: list[float]) -> dict:
    return {
        ENGINE_RUNNING: dict(enumerate(running)),
        ENGINE_WAITING: dict(enumerate(waiting)),
        ADMITTED: dict(enumerate(admitted)),
    }


def test_idle_deployment_stays_at_min() -> None:
    replicas, state = queue_depth_policy(context(per_replica([0], [0], [0])))
    assert replicas == 1
    assert state == {"queue_depth": 0.0, "desired": 1}


def test_queue_hidden_inside_the_engine_scales_out() -> None:
    # Ray Serve sees 24 ongoing requests, but 8 batch requests of 5 items put 40 in the engine:
    # 24 decoding, 16 waiting. 40 at a target of 20 per replica needs 2 replicas.
    ctx = context(per_replica([24], [16], [40]), serve_requests=24)
    assert queue_depth_policy(ctx)[0] == 2


def test_default_policy_view_alone_would_not_scale() -> None:
    # The same load as Ray Serve's own count (24 ongoing) would be just over one target;
    # the proxies' queue adds to the replicas' queues.
    ctx = context(per_replica([16], [0], [16]), serve_requests=26, serve_queued=10)
    assert queue_depth_policy(ctx)[0] == 2  # 10 queued + 16 = 26 > 20


def test_replica_not_reporting_yet_counts_through_serve() -> None:
    ctx = context({}, serve_requests=70)
    assert queue_depth_policy(ctx)[0] == 4  # ceil(70 / 20) = 4 = max


def test_bounds_are_kept() -> None:
    big = context(per_replica([100, 100], [500, 500], [0, 0]), replicas=2)
    assert queue_depth_policy(big)[0] == 4
    idle = context(per_replica([0, 0], [0, 0], [0, 0]), replicas=2, bounds=(2, 4))
    assert queue_depth_policy(idle)[0] == 2


def test_replica_depth_is_the_larger_of_admitted_and_engine() -> None:
    depths = replica_queue_depths(per_replica([3, 2], [1, 0], [2, 9]))
    assert depths == {0: 4.0, 1: 9.0}


def test_scheduler_stats_split_is_bounded_by_the_exact_count() -> None:
    recorder = SchedulerStatsRecorder()
    recorder.running, recorder.waiting = 16, 4
    assert recorder.load(unfinished=20) == EngineLoad(running=16, waiting=4)
    # The engine went idle after its last report: the stale counts do not survive.
    assert recorder.load(unfinished=0) == EngineLoad(0, 0)
    assert recorder.load(unfinished=30) == EngineLoad(running=16, waiting=14)


def test_scheduler_stats_recorder_is_a_vllm_stat_logger_factory() -> None:
    pytest.importorskip("vllm")
    recorder = SchedulerStatsRecorder()
    stat_logger = recorder(vllm_config=None, engine_index=0)
    stats = SimpleNamespace(num_running_reqs=5, num_waiting_reqs=2)
    stat_logger.record(stats, None)
    stat_logger.record(None, None)  # iteration-only updates keep the last counts
    assert (recorder.running, recorder.waiting) == (5, 2)


async def test_replica_reports_engine_and_admitted_counts() -> None:
    import asyncio

    engine = FakeEngine()
    engine.max_running = 2
    engine.hold = asyncio.Event()
    service = TranslationService(AppConfig(), engine)
    await service.start()
    item = {"text": "Hello there", "source_lang": "en", "target_lang": "de"}
    from serve_app.core.schemas import TranslateRequest

    tasks = [
        asyncio.create_task(service.translate(TranslateRequest.model_validate(item), f"r{i}"))
        for i in range(5)
    ]
    async with asyncio.timeout(5):
        while len(engine.active) < 5:
            await asyncio.sleep(0.001)
    stats = replica_stats(engine.load(), service.in_flight)
    assert stats == {ENGINE_RUNNING: 2.0, ENGINE_WAITING: 3.0, ADMITTED: 5.0}
    assert all(isinstance(v, float) for v in stats.values())
    engine.hold.set()
    await asyncio.gather(*tasks)
    assert replica_stats(engine.load(), service.in_flight)[ADMITTED] == 0.0
