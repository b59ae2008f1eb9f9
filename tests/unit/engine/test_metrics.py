"""The buffered engine-metrics exporter sends Ray what vLLM's unbuffered logger sends, once
a flush interval instead of every engine step.

Ray's metric classes are replaced by fakes that keep what a Prometheus scrape would read:
a gauge's last value, a counter's total, a histogram's buckets, sum and count per series.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import logging
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("vllm")

from bench.engine_metrics import synthetic_steps, vllm_config
from serve_app.core.config import EngineConfig
from serve_app.engine import metrics as engine_metrics
from serve_app.engine.metrics import buffered_ray_stat_logger
from serve_app.engine.vllm import SchedulerStatsRecorder, VLLMEngine

Series = tuple[str, frozenset[tuple[str, str]]]
# A bound against a hang, not a speed test.
HANG_S = 60


class FakeRay:
    """What Ray's exporter would show for each series, and how many calls reached Ray."""

    def __init__(self) -> None:
        self.values: dict[Series, Any] = {}
        self.calls = 0


class _Recorder:
    def __init__(self, metric: _FakeMetric) -> None:
        self.metric = metric

    def record(self, value: float, tags: dict[str, str]) -> None:
        self.metric.ray.calls += 1
        self.metric.apply(value, self.metric.series(tags))


class _FakeMetric:
    """``ray.util.metrics.Metric``'s shape: ``_metric.record``, ``_default_tags``..."""

    ray: FakeRay
    fail = False

    def __init__(
        self,
        name: str,
        description: str = "",
        tag_keys: tuple[str, ...] = (),
        boundaries: list[float] | None = None,
    ) -> None:
        self._name, self._tag_keys, self.boundaries = name, tag_keys, boundaries or []
        self._default_tags: dict[str, str] = {}
        self._discard_metric = False
        self._metric = _Recorder(self)

    def series(self, tags: dict[str, str]) -> Series:
        assert set(tags) == set(self._tag_keys), (self._name, tags)
        return self._name, frozenset(tags.items())

    def _record(self, value: float, tags: dict[str, str] | None = None) -> None:
        if self.fail:
            raise RuntimeError("export failed")
        self._metric.record(value, {**self._default_tags, **(tags or {})})

    def apply(self, value: float, series: Series) -> None:
        raise NotImplementedError


class FakeGauge(_FakeMetric):
    def set(self, value: float, tags: dict[str, str] | None = None) -> None:
        self._record(value, tags)

    def apply(self, value: float, series: Series) -> None:
        self.ray.values[series] = value


class FakeCounter(_FakeMetric):
    def inc(self, value: float = 1.0, tags: dict[str, str] | None = None) -> None:
        assert value > 0
        self._record(value, tags)

    def apply(self, value: float, series: Series) -> None:
        self.ray.values[series] = self.ray.values.get(series, 0) + value


class FakeHistogram(_FakeMetric):
    def observe(self, value: float, tags: dict[str, str] | None = None) -> None:
        self._record(value, tags)

    def apply(self, value: float, series: Series) -> None:
        buckets, total, count = self.ray.values.get(
            series, ((0,) * (len(self.boundaries) + 1), 0.0, 0)
        )
        at = bisect.bisect_left(self.boundaries, value)
        buckets = tuple(n + (i == at) for i, n in enumerate(buckets))
        self.ray.values[series] = (buckets, total + value, count + 1)


def fake_ray(monkeypatch: pytest.MonkeyPatch) -> FakeRay:
    """Ray's metric classes, as vLLM's Ray wrappers see them, replaced by fakes."""
    from vllm.v1.metrics import ray_wrappers

    ray = FakeRay()
    classes = {
        name: type(name, (cls,), {"ray": ray})
        for name, cls in (("Gauge", FakeGauge), ("Counter", FakeCounter))
    }
    classes["Histogram"] = type("Histogram", (FakeHistogram,), {"ray": ray})
    monkeypatch.setattr(ray_wrappers, "ray_metrics", SimpleNamespace(**classes))
    return ray


@pytest.fixture(scope="module")
def config() -> Any:
    return vllm_config()


@pytest.fixture(scope="module")
def steps() -> list[tuple[Any, Any]]:
    return synthetic_steps(300, running=25, finished=2, seed=7)


def feed(stat_logger: Any, steps: list[tuple[Any, Any]]) -> None:
    for scheduler, iteration in steps:
        stat_logger.record(scheduler, iteration, engine_idx=0)
    stat_logger.record(None, None, engine_idx=0)  # a step with nothing to report


def approx(values: dict[Series, Any]) -> dict[Series, Any]:
    return {
        k: (v[0], pytest.approx(v[1]), v[2]) if isinstance(v, tuple) else pytest.approx(v)
        for k, v in values.items()
    }


def test_flushed_values_equal_the_unbuffered_loggers(
    monkeypatch: pytest.MonkeyPatch, config: Any, steps: list[tuple[Any, Any]]
) -> None:
    from vllm.v1.metrics.ray_wrappers import RayPrometheusStatLogger

    unbuffered = fake_ray(monkeypatch)
    feed(RayPrometheusStatLogger(config, [0]), steps)
    buffered = fake_ray(monkeypatch)
    stat_logger = buffered_ray_stat_logger(flush_s=1e9)(config, [0])
    feed(stat_logger, steps)
    assert buffered.calls == 0  # nothing reaches Ray between flushes
    stat_logger.flush()

    vllms = {k: v for k, v in buffered.values.items() if not k[0].startswith("translator_")}
    assert vllms == approx(unbuffered.values)
    names = {name for name, _ in buffered.values}
    assert {"vllm_num_requests_running", "vllm_inter_token_latency_seconds"} <= names
    assert "vllm_generation_tokens" in names
    itl = next(v for (n, _), v in buffered.values.items() if n.startswith("vllm_inter_token"))
    assert itl[2] == 300 * 23  # every token's latency, none sampled
    assert buffered.calls < unbuffered.calls


def test_gauges_and_counters_cost_one_call_per_flush(
    monkeypatch: pytest.MonkeyPatch, config: Any, steps: list[tuple[Any, Any]]
) -> None:
    ray = fake_ray(monkeypatch)
    stat_logger = buffered_ray_stat_logger(flush_s=1e9)(config, [0])
    for _ in range(2):
        feed(stat_logger, steps)
        stat_logger.flush()
    running = next(k for k in ray.values if k[0] == "vllm_num_requests_running")
    tokens = next(k for k in ray.values if k[0] == "vllm_generation_tokens")
    assert ray.values[running] == 25
    assert ray.values[tokens] == 2 * 300 * 25
    # The labelled counter vLLM re-labels on every step is one series, one buffer.
    cached = [k for k in ray.values if k[0] == "vllm_prompt_tokens_cached_by_source"]
    assert len(cached) == 1
    before = ray.calls
    stat_logger.flush()
    assert ray.calls == before  # nothing new, nothing sent


def test_step_means_average_the_batch_over_the_interval_and_start_again(
    monkeypatch: pytest.MonkeyPatch, config: Any
) -> None:
    """vLLM's running gauge is the last step's count; the step means are the interval's:
    here a batch full (24) for three steps and short (18, with 10 waiting) for one. The
    decoding mean is the requests that made a token in each step, those that finished in it
    included (vLLM's running count leaves them out): 24 in the step that ran 18 after
    six finished."""
    from vllm.v1.metrics.stats import IterationStats, SchedulerStats

    ray = fake_ray(monkeypatch)
    stat_logger = buffered_ray_stat_logger(flush_s=1e9)(config, [0])

    def step(running: int, waiting: int, decoding: int | None = None) -> None:
        stats = SchedulerStats(num_running_reqs=running, num_waiting_reqs=waiting)
        iteration = IterationStats()
        iteration.num_generation_tokens = running if decoding is None else decoding
        stat_logger.record(stats, iteration, engine_idx=0)

    def value(name: str) -> float:
        return float(next(v for k, v in ray.values.items() if k[0] == name))

    for running, waiting in [(24, 1), (24, 0), (18, 10), (24, 1)]:
        step(running, waiting, 24)
    stat_logger.record(None, None, engine_idx=0)  # a step with nothing to report
    stat_logger.flush()
    assert value("translator_engine_running_mean") == pytest.approx(22.5)
    assert value("translator_engine_waiting_mean") == pytest.approx(3.0)
    assert value("translator_engine_decoding_mean") == pytest.approx(24.0)
    assert value("vllm_num_requests_running") == 24  # the last step's
    series = next(k for k in ray.values if k[0] == "translator_engine_running_mean")
    assert dict(series[1])["engine"] == "0"
    step(10, 0)  # the next interval starts from nothing
    step(0, 0)  # its last step: the engine went idle
    stat_logger.flush()
    assert value("translator_engine_running_mean") == pytest.approx(5.0)
    assert value("translator_engine_waiting_mean") == pytest.approx(0.0)
    assert value("translator_engine_decoding_mean") == pytest.approx(5.0)
    stat_logger.flush()  # an interval without a step: the last step's counts
    stat_logger.flush()  # (set by the flush that found no step, sent by the next)
    assert value("translator_engine_running_mean") == 0
    assert value("translator_engine_decoding_mean") == 0
    before = ray.calls
    stat_logger.flush()
    assert ray.calls == before  # idle: nothing more to send


def test_token_sample_bounds_the_per_token_histogram_only(
    monkeypatch: pytest.MonkeyPatch, config: Any, steps: list[tuple[Any, Any]]
) -> None:
    ray = fake_ray(monkeypatch)
    stat_logger = buffered_ray_stat_logger(flush_s=1e9, token_sample=50)(config, [0])
    feed(stat_logger, steps)
    stat_logger.flush()
    counts = {name: v[2] for (name, _), v in ray.values.items() if isinstance(v, tuple)}
    assert 25 <= counts["vllm_inter_token_latency_seconds"] <= 50
    assert counts["vllm_e2e_request_latency_seconds"] == 300 * 2  # per request: all


async def test_a_timer_on_the_loop_flushes_after_the_interval(
    monkeypatch: pytest.MonkeyPatch, config: Any, steps: list[tuple[Any, Any]]
) -> None:
    ray = fake_ray(monkeypatch)
    stat_logger = buffered_ray_stat_logger(flush_s=0.05)(config, [0])
    feed(stat_logger, steps[:3])
    assert ray.calls == 0
    async with asyncio.timeout(HANG_S):
        while not ray.calls:
            await asyncio.sleep(0.01)
    assert any(k[0] == "vllm_inter_token_latency_seconds" for k in ray.values)


async def test_a_timed_flush_sends_histograms_a_chunk_per_loop_turn(
    monkeypatch: pytest.MonkeyPatch, config: Any, steps: list[tuple[Any, Any]]
) -> None:
    """The loop runs other work between chunks of histogram values, and in the end Ray
    holds what one explicit flush sends. The step means are left out: they mark themselves
    again at each flush, and the timer's next flush (10 ms on) finds an idle interval and sets
    the last step's counts, as it should; waiting for the first flush's means raced it (lost
    on a starved CI machine)."""
    reference = fake_ray(monkeypatch)
    explicit = buffered_ray_stat_logger(flush_s=1e9)(config, [0])
    feed(explicit, steps[:40])
    explicit.flush()

    def without_step_means(values: dict[Series, Any]) -> dict[Series, Any]:
        return {k: v for k, v in values.items() if k[0] not in engine_metrics.STEP_MEANS}

    ray = fake_ray(monkeypatch)
    monkeypatch.setattr(engine_metrics, "SEND_CHUNK", 50)
    stat_logger = buffered_ray_stat_logger(flush_s=0.01)(config, [0])
    feed(stat_logger, steps[:40])  # 40 steps x 23 inter-token latencies, and more
    seen: list[int] = []  # Ray's calls at each turn of a task beside the flush

    async def beside() -> None:
        while True:
            seen.append(ray.calls)
            await asyncio.sleep(0)

    task = asyncio.create_task(beside())
    try:
        async with asyncio.timeout(HANG_S):
            while without_step_means(ray.values) != without_step_means(reference.values):
                await asyncio.sleep(0.005)
    finally:
        task.cancel()
    during = sorted({calls for calls in seen if 0 < calls < ray.calls})
    assert len(during) >= 40 * 23 // 50 - 1  # a turn of the other task between chunks
    # A chunk per turn, and in one turn at most the step means' gauges of the next (idle) flush.
    assert max(b - a for a, b in itertools.pairwise(during)) <= 50 + len(engine_metrics.STEP_MEANS)
    assert without_step_means(ray.values) == approx(without_step_means(reference.values))


async def test_an_explicit_flush_sends_what_a_timed_one_left(
    monkeypatch: pytest.MonkeyPatch, config: Any, steps: list[tuple[Any, Any]]
) -> None:
    ray = fake_ray(monkeypatch)
    monkeypatch.setattr(engine_metrics, "SEND_CHUNK", 50)
    stat_logger = buffered_ray_stat_logger(flush_s=0.01)(config, [0])
    feed(stat_logger, steps[:40])
    async with asyncio.timeout(HANG_S):
        while not ray.calls:
            await asyncio.sleep(0.001)
    stat_logger.flush()  # a replica stopping: the rest at once, nothing twice
    await asyncio.sleep(0.05)  # the timed flush's next turn finds nothing left
    itl = next(v for (n, _), v in ray.values.items() if n.startswith("vllm_inter_token"))
    assert itl[2] == 40 * 23


async def test_writes_outside_record_are_flushed_too(
    monkeypatch: pytest.MonkeyPatch, config: Any
) -> None:
    ray = fake_ray(monkeypatch)
    stat_logger = buffered_ray_stat_logger(flush_s=0.05)(config, [0])
    stat_logger.record_sleep_state(1, 1)  # an engine put to sleep records no more steps
    async with asyncio.timeout(HANG_S):
        while not ray.calls:
            await asyncio.sleep(0.01)
    assert any(name == "vllm_engine_sleep_state" for name, _ in ray.values)


def test_without_a_loop_it_flushes_on_a_record_after_the_interval(
    monkeypatch: pytest.MonkeyPatch, config: Any, steps: list[tuple[Any, Any]]
) -> None:
    ray = fake_ray(monkeypatch)
    stat_logger = buffered_ray_stat_logger(flush_s=0)(config, [0])
    feed(stat_logger, steps[:1])
    assert ray.calls > 0


def test_engine_initialized_info_is_sent_at_once(
    monkeypatch: pytest.MonkeyPatch, config: Any
) -> None:
    ray = fake_ray(monkeypatch)
    buffered_ray_stat_logger(flush_s=1e9)(config, [0]).log_engine_initialized()
    assert any(name == "vllm_cache_config_info" for name, _ in ray.values)


def test_a_failing_series_does_not_stop_the_others(
    monkeypatch: pytest.MonkeyPatch,
    config: Any,
    steps: list[tuple[Any, Any]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    ray = fake_ray(monkeypatch)
    stat_logger = buffered_ray_stat_logger(flush_s=1e9)(config, [0])
    stat_logger.gauge_scheduler_running[0].metric.fail = True
    feed(stat_logger, steps[:2])
    with caplog.at_level(logging.ERROR, logger="ray.serve.translator"):
        stat_logger.flush()
    assert "could not export an engine metric" in caplog.text
    assert any(name == "vllm_num_requests_waiting" for name, _ in ray.values)
    assert not any(name == "vllm_num_requests_running" for name, _ in ray.values)


def _stat_loggers(monkeypatch: pytest.MonkeyPatch, **engine: Any) -> Iterator[Any]:
    import ray

    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    return iter(VLLMEngine(EngineConfig(**engine))._stat_loggers())


def test_buffered_exporter_is_the_default_inside_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    from vllm.v1.metrics.ray_wrappers import RayPrometheusStatLogger

    recorder, exporter = _stat_loggers(monkeypatch)
    assert isinstance(recorder, SchedulerStatsRecorder)  # the autoscaler's counts stay
    assert issubclass(exporter, RayPrometheusStatLogger)
    assert exporter is not RayPrometheusStatLogger
    _, unbuffered = _stat_loggers(monkeypatch, engine_metrics_flush_s=0)
    assert unbuffered is RayPrometheusStatLogger
    assert len(list(_stat_loggers(monkeypatch, export_engine_metrics=False))) == 1
