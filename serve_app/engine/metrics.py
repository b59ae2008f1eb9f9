"""vLLM's engine metrics through Ray's metrics API, buffered: the same series for a fraction
of the replica's CPU.

vLLM calls its stat loggers once per engine step (~100 a second on a GPU) on the replica's
event loop. Its ``RayPrometheusStatLogger`` turns each step into dozens of Ray metric calls
(a few microseconds each: tag checks in Python, a tag conversion and a lock in Ray's C++
recorder): every gauge and counter, and one histogram observation per generated token for
the inter-token latency. A py-spy profile under load on an H100 put 11% of the replica's
samples there (bench/results/2026-11-24-h100-cpu-profile/).

``BufferedRayStatLogger`` is vLLM's logger (so the metric names, descriptions, labels and
buckets are vLLM's own, in every vLLM version) with metric wrappers that only write plain
Python state per step:

- a gauge keeps its last value, a counter adds to a pending sum;
- a histogram appends the observed value to a list.

Every ``flush_s`` seconds (a timer on the event loop, armed by the first write after a
flush) the buffered state goes to Ray: one ``set`` per gauge, one ``inc`` per counter with
the sum, and every buffered histogram value observed (the first of each chunk through Ray's
public ``observe``, which checks the tags, the rest straight through Ray's recorder), in
chunks of ``SEND_CHUNK`` values, one per turn of the event loop: a second of streaming
buffers thousands of per-token values, which sent at once held the loop for ~30 ms. Nothing is
sampled (unless ``token_sample`` is set, see ``buffered_ray_stat_logger``): counters, the
last gauge values and the histograms' buckets, ``_count`` and ``_sum`` equal the unbuffered
logger's once flushed; gauges lose only the values a later step overwrote within the
interval, which Ray's exporter (one value per export, every few seconds) drops anyway.
What is scraped lags by at most ``flush_s``; the last interval before a replica stops is
lost. Histogram observations still cost one Ray call each at the flush (Ray's histogram
has no weighted or batch observe): that is the floor of this exporter, and what
``token_sample`` trades against the per-token histogram's ``_count`` and ``_sum``.

Three series of its own ride on the same flush: ``translator_engine_running_mean``,
``_waiting_mean`` and ``_decoding_mean``, the engine's running, waiting and decoding requests
averaged over every step of the interval. vLLM's ``num_requests_running``/``_waiting`` are
one step's counts (the last before the export), which can catch the moment between a step's
finished requests and the next admissions; the means say whether the batch was full through
the interval. vLLM counts a step's running requests after its finished ones left, so with
short requests (a markup post's text runs) the running mean reads low while the batch was
full; the decoding mean is the requests that produced a token in the step (the step's
generation tokens: one each, no speculative decoding), finished ones included, so "requests
waited while slots were free" reads as waiting > 0 with decoding < ``max_num_seqs``.

It relies only on what vLLM 0.26 (the GPU machine's) and 0.32 share: the stat logger API,
``RayPrometheusStatLogger`` building its metrics through ``self._gauge_cls``,
``_counter_cls`` and ``_histogram_cls``, and the Ray wrappers' ``labels``/``set``/``inc``/
``observe`` with ``metric`` and ``_tags``.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import deque
from functools import partial
from typing import Any

logger = logging.getLogger("ray.serve.translator")


# Histogram values sent to Ray per turn of the event loop by a timed flush. A second of
# streaming on an H100 buffers ~5,000 inter-token latencies, one Ray call each: sent at
# once they held the replica's loop for ~30 ms every second (a py-spy profile put 5.6% of
# the replica's samples in one flush; bench/results/2026-11-27-h100-stream-profile), and
# every stream's next event waited behind them. 256 values: ~1-2 ms per turn.
SEND_CHUNK = 256


class EngineMetricBuffer:
    """The metric wrappers written since the last flush, when to flush them, and the
    histogram values a timed flush still has to send.

    Unlike the service's ``serving.metrics.MetricBuffer`` (one dictionary keyed by metric
    and tags, for Ray Serve's metrics), each labelled vLLM metric keeps its own buffer, so
    a step costs attribute updates, not dictionary keys built from tags."""

    def __init__(self, flush_s: float) -> None:
        self.flush_s = flush_s
        self._dirty: list[Any] = []
        self._timer: asyncio.TimerHandle | None = None
        self._last_flush = time.monotonic()
        self._outbox: deque[tuple[Any, list[float], int]] = deque()  # (histogram, values, sent)
        self._sending = False

    def mark(self, metric: Any) -> None:
        """``metric`` holds values not yet sent to Ray (called once per flush interval per
        metric): the first since the last flush arms the flush timer on the running loop."""
        self._dirty.append(metric)
        if self._timer is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return  # no loop here: ``after_record`` or an explicit ``flush``
            self._timer = loop.call_later(self.flush_s, self._flush_in_turns)

    def after_record(self) -> None:
        """Without a running loop (a synchronous engine), flushes once ``flush_s`` has passed
        since the last flush."""
        due = time.monotonic() - self._last_flush >= self.flush_s
        if self._dirty and self._timer is None and due:
            self.flush()

    def queue(self, histogram: Any, values: list[float]) -> None:
        """Histogram values to observe on Ray's ``histogram.metric`` (called by a flush)."""
        self._outbox.append((histogram, values, 0))

    def flush(self) -> None:
        """Sends every buffered value to Ray's metrics API now."""
        self._take()
        self._send()

    def _take(self) -> None:
        """Every written metric's state: gauges and counters sent (one call each), the
        histograms' values queued."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._last_flush = time.monotonic()
        dirty, self._dirty = self._dirty, []
        for metric in dirty:
            try:
                metric.flush()
            except Exception:  # one bad series must not stop the others or the loop
                logger.exception("could not export an engine metric")

    def _flush_in_turns(self) -> None:
        """The timer's flush: the histograms' values go ``SEND_CHUNK`` at a time, one chunk
        per turn of the loop, so requests' work runs between them."""
        self._timer = None
        self._take()
        if not self._sending:
            self._send_chunk()

    def _send_chunk(self) -> None:
        self._sending = self._send(SEND_CHUNK)
        if self._sending:
            asyncio.get_running_loop().call_soon(self._send_chunk)

    def _send(self, budget: float = math.inf) -> bool:
        """Observes up to ``budget`` (by default all) queued histogram values; whether some
        are left."""
        while self._outbox and budget > 0:
            histogram, values, sent = self._outbox[0]
            end = len(values) if sent + budget >= len(values) else sent + int(budget)
            if end == len(values):
                self._outbox.popleft()
            else:
                self._outbox[0] = (histogram, values, end)
            budget -= end - sent
            try:
                observe_all(histogram.metric, values[sent:end], histogram._tags)
            except Exception:  # one bad series must not stop the others or the loop
                logger.exception("could not export an engine metric")
        return bool(self._outbox)


class _Buffered:
    """Buffering shared by the metric wrappers (mixed in before vLLM's Ray wrapper class):
    labelled copies are made once per label set (vLLM asks for some on every step) and
    start with empty buffers."""

    metric: Any
    _tags: dict[str, str]

    def __init__(self, *args: Any, buffer: EngineMetricBuffer, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._buffer = buffer
        self._clones: dict[Any, Any] = {}
        self._reset()

    def _reset(self) -> None:
        self._dirty = False

    def _mark(self) -> None:
        self._dirty = True
        self._buffer.mark(self)

    def labels(self, *labels: Any, **labelskwargs: Any) -> Any:
        key = (labels, tuple(sorted(labelskwargs.items())))
        clone = self._clones.get(key)
        if clone is None:
            clone = super().labels(*labels, **labelskwargs)  # type: ignore[misc]
            clone._clones = {}
            clone._reset()
            self._clones[key] = clone
        return clone

    def flush(self) -> None:
        self._dirty = False


class _Gauge(_Buffered):
    """A gauge that keeps the last value set until the flush."""

    def _reset(self) -> None:
        super()._reset()
        self._value: float | None = None

    def set(self, value: float) -> None:
        self._value = value
        if not self._dirty:
            self._mark()

    def flush(self) -> None:
        super().flush()
        if self._value is not None:
            self.metric.set(self._value, tags=self._tags)


class _Counter(_Buffered):
    """A counter that adds up its increments until the flush."""

    def _reset(self) -> None:
        super()._reset()
        self._pending: float = 0

    def inc(self, value: float = 1.0) -> None:
        if value == 0:
            return
        self._pending += value
        if not self._dirty:
            self._mark()

    def flush(self) -> None:
        super().flush()
        pending, self._pending = self._pending, 0
        if pending > 0:
            self.metric.inc(pending, tags=self._tags)


class _Histogram(_Buffered):
    """A histogram that lists its observations until the flush."""

    sample = 0  # at most this many values per flush (evenly spaced); 0: all

    def _reset(self) -> None:
        super()._reset()
        self._values: list[float] = []

    def observe(self, value: float) -> None:
        self._values.append(value)
        if not self._dirty:
            self._mark()

    def flush(self) -> None:
        super().flush()
        values, self._values = self._values, []
        if 0 < self.sample < len(values):
            values = values[:: -(-len(values) // self.sample)]
        if values:
            self._buffer.queue(self, values)


class StepMeans:
    """The engine's running, waiting and decoding requests summed over its steps since the
    last flush; their means are set on three buffered gauges at every step (a gauge sends its
    last value), and the sums start again after each flush. An interval without a step (an
    idle engine) sets the last step's counts, so an idle engine does not show its last busy
    mean."""

    def __init__(self, buffer: EngineMetricBuffer, *gauges: Any) -> None:
        self._buffer, self._gauges = buffer, gauges
        self._dirty = False
        self.steps = 0
        self.sums = [0] * len(gauges)
        self._last: tuple[int, ...] = (0,) * len(gauges)

    def add(self, *counts: int) -> None:
        """One step's counts, in the order of the gauges (running, waiting, decoding)."""
        self.steps += 1
        for i, (gauge, count) in enumerate(zip(self._gauges, counts, strict=True)):
            self.sums[i] += count
            gauge.set(self.sums[i] / self.steps)
        self._last = counts
        if not self._dirty:
            self._dirty = True
            self._buffer.mark(self)

    def flush(self) -> None:
        if self.steps == 0:  # a whole interval without a step: idle at the last counts
            self._dirty = False
            for gauge, count in zip(self._gauges, self._last, strict=True):
                gauge.set(count)
            return
        self.steps, self.sums = 0, [0] * len(self._gauges)
        self._buffer.mark(self)  # the next flush learns whether the engine stepped since


STEP_MEANS = {
    "translator_engine_running_mean": "Requests in the engine's batch, averaged over its steps "
    "since the last export (vllm:num_requests_running is one step's count).",
    "translator_engine_waiting_mean": "Requests waiting for a place in the engine's batch, "
    "averaged over its steps since the last export.",
    "translator_engine_decoding_mean": "Requests that produced a token in an engine step, "
    "averaged over its steps since the last export (the batch at work: the running count is "
    "taken after the step's finished requests left).",
}


def _wrappers() -> tuple[type, type, type]:
    """The buffered gauge, counter and histogram: vLLM's Ray wrappers with the mixins."""
    from vllm.v1.metrics import ray_wrappers as ray

    return (
        type("BufferedRayGauge", (_Gauge, ray.RayGaugeWrapper), {}),
        type("BufferedRayCounter", (_Counter, ray.RayCounterWrapper), {}),
        type("BufferedRayHistogram", (_Histogram, ray.RayHistogramWrapper), {}),
    )


def observe_all(metric: Any, values: list[float], tags: dict[str, str]) -> None:
    """Observes ``values`` on Ray's histogram ``metric``: the first through the public API
    (which checks the tags and the value), the rest straight through Ray's recorder, as the
    public API would after those checks, when this Ray version has it."""
    metric.observe(values[0], tags=tags)
    recorder = getattr(metric, "_metric", None)
    record = getattr(recorder, "record", None)
    if record is None or getattr(metric, "_discard_metric", False):
        for value in values[1:]:
            metric.observe(value, tags=tags)
        return
    final_tags = {**metric._default_tags, **tags}
    for value in values[1:]:
        record(value, tags=final_tags)


def buffered_ray_stat_logger(flush_s: float = 1.0, token_sample: int = 0) -> type:
    """vLLM's ``RayPrometheusStatLogger`` with buffered metrics, flushed every ``flush_s``
    seconds: an ``AggregateStatLoggerBase`` class for ``AsyncLLM(stat_loggers=...)``.
    Being a ``PrometheusStatLogger``, it also stops vLLM adding its own in-process one.

    ``token_sample`` > 0 sends at most that many of the per-token inter-token latencies
    per flush to Ray (evenly spaced over the interval): that histogram's buckets keep their
    proportions (its quantiles hold) but its ``_count`` and ``_sum`` are the sample's."""
    from vllm.v1.metrics.ray_wrappers import RayPrometheusStatLogger

    gauge, counter, histogram = _wrappers()

    class BufferedRayStatLogger(RayPrometheusStatLogger):
        """``RayPrometheusStatLogger`` recording into plain Python state, flushed on a
        timer (see this module's docstring)."""

        def __init__(self, vllm_config: Any, engine_indexes: list[int] | None = None) -> None:
            self.metric_buffer = EngineMetricBuffer(flush_s)
            self._gauge_cls = partial(gauge, buffer=self.metric_buffer)
            self._counter_cls = partial(counter, buffer=self.metric_buffer)
            self._histogram_cls = partial(histogram, buffer=self.metric_buffer)
            super().__init__(vllm_config, engine_indexes)
            per_token = getattr(self, "histogram_inter_token_latency", {})
            for per_engine in per_token.values():
                per_engine.sample = token_sample
            self.step_means = self._step_means(engine_indexes or [0])

        def _step_means(self, engine_indexes: list[int]) -> dict[int, StepMeans]:
            names = ["model_name", "engine"]
            gauges = [self._gauge_cls(name=n, documentation=d, labelnames=names)
                      for n, d in STEP_MEANS.items()]  # fmt: skip
            model = getattr(
                getattr(self.vllm_config, "model_config", None), "served_model_name", ""
            )
            return {
                i: StepMeans(self.metric_buffer, *(g.labels(model, str(i)) for g in gauges))
                for i in engine_indexes
            }

        def record(
            self,
            scheduler_stats: Any,
            iteration_stats: Any,
            *args: Any,
            engine_idx: int = 0,
            **kwargs: Any,
        ) -> None:
            super().record(scheduler_stats, iteration_stats, *args, engine_idx=engine_idx, **kwargs)
            means = self.step_means.get(engine_idx)
            if scheduler_stats is not None and means is not None:
                means.add(
                    scheduler_stats.num_running_reqs,
                    scheduler_stats.num_waiting_reqs,
                    getattr(iteration_stats, "num_generation_tokens", 0),
                )
            self.metric_buffer.after_record()

        def log_engine_initialized(self) -> None:
            super().log_engine_initialized()
            self.metric_buffer.flush()  # the config info gauge, before any request

        def flush(self) -> None:
            """Sends what is buffered to Ray now."""
            self.metric_buffer.flush()

    return BufferedRayStatLogger
