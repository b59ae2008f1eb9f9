"""Per-request metrics are buffered and handed to Ray's metric objects by a timer."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from serve_app.serving.metrics import MetricBuffer, RayServeMetrics


class _Metric:
    """Records every call, as Ray's Counter/Histogram/Gauge would receive it."""

    def __init__(self, name: str, **_: Any) -> None:
        self.name = name
        self.calls: list[tuple[str, float, dict[str, str] | None]] = []

    def inc(self, value: float = 1, tags: dict[str, str] | None = None) -> None:
        self.calls.append(("inc", value, tags))

    def observe(self, value: float, tags: dict[str, str] | None = None) -> None:
        self.calls.append(("observe", value, tags))

    def set(self, value: float, tags: dict[str, str] | None = None) -> None:
        self.calls.append(("set", value, tags))


FAKE_RAY_METRICS = SimpleNamespace(Counter=_Metric, Histogram=_Metric, Gauge=_Metric)


def test_nothing_reaches_ray_until_a_flush_and_counters_are_summed() -> None:
    metrics = RayServeMetrics(FAKE_RAY_METRICS)
    for _ in range(3):
        metrics.translation(("en", "de"), 10, 5, 7, 0.1, None)
        metrics.request("/translate", 200, ("en", "de"), 0.2)
        metrics.load(4)
    metrics.load(2)
    metrics.translation(("en", "fr"), 1, 1, 1, None, 0.05)
    assert metrics._texts.calls == []
    assert metrics._duration.calls == []
    metrics.buffer.flush()
    assert sorted(metrics._texts.calls) == [
        ("inc", 1, {"source_lang": "en", "target_lang": "fr"}),
        ("inc", 3, {"source_lang": "en", "target_lang": "de"}),
    ]
    assert ("inc", 21, {"source_lang": "en", "target_lang": "de"}) in metrics._output.calls
    assert metrics._duration.calls == [("observe", 0.2, {"endpoint": "/translate"})] * 3
    assert metrics._queue.calls == [("observe", 0.1, None)] * 3
    assert metrics._ttft.calls == [("observe", 0.05, None)]
    assert metrics._in_flight.calls == [("set", 2, None)]  # the last value only
    metrics.buffer.flush()  # nothing twice
    assert len(metrics._texts.calls) == 2


def test_the_timer_flushes_and_flushes_once_more_when_cancelled() -> None:
    async def scenario() -> _Metric:
        metric, buffer = _Metric("c"), MetricBuffer()
        task = asyncio.create_task(buffer.flush_periodically(0.01))
        buffer.inc(metric, 2)
        await asyncio.sleep(0.05)
        assert metric.calls == [("inc", 2, None)]
        buffer.inc(metric, 5)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return metric

    assert asyncio.run(scenario()).calls == [("inc", 2, None), ("inc", 5, None)]


def test_a_failing_export_does_not_stop_the_timer() -> None:
    class Broken(_Metric):
        def inc(self, value: float = 1, tags: dict[str, str] | None = None) -> None:
            raise RuntimeError("exporter down")

    async def scenario() -> _Metric:
        broken, ok, buffer = Broken("b"), _Metric("ok"), MetricBuffer()
        task = asyncio.create_task(buffer.flush_periodically(0.01))
        buffer.inc(broken)
        await asyncio.sleep(0.03)
        buffer.observe(ok, 1.5)
        await asyncio.sleep(0.03)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return ok

    assert asyncio.run(scenario()).calls == [("observe", 1.5, None)]


def test_a_buffer_without_its_timer_stays_bounded() -> None:
    metric, buffer = _Metric("h"), MetricBuffer()
    for i in range(10_001):
        buffer.observe(metric, i)
    assert len(buffer.observations) == 0
    assert len(metric.calls) == 10_001


def test_markup_segments_are_counted_by_method() -> None:
    metrics = RayServeMetrics(FAKE_RAY_METRICS)
    metrics.markup_segments("structural_first", 3)
    metrics.markup_segments("placeholders_kept", 1)
    metrics.markup_segments("structural_first", 2)
    metrics.buffer.flush()
    assert sorted(metrics._markup.calls) == [
        ("inc", 1, {"method": "placeholders_kept"}),
        ("inc", 5, {"method": "structural_first"}),
    ]
