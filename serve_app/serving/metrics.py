"""Service metrics: recorded through Ray Serve's metrics API, exported by Ray.

Inside a replica, ``ray.serve.metrics`` counters, gauges and histograms go to Ray's metrics
agent on the node, which serves them on its Prometheus endpoint (``ray start
--metrics-export-port``) next to Ray Serve's and vLLM's own, with the ``application``,
``deployment`` and ``replica`` tags Ray adds: the endpoint the Ray dashboard's Grafana reads.
Ray prefixes names with ``ray_`` and appends ``_total`` to counters. Outside Ray (unit tests)
nothing is recorded.

Each Ray metric call costs tens of microseconds (tag checks, the replica's tags merged in, a
call into Ray's core), about ten per request: so requests record into a ``MetricBuffer`` (a
dictionary update), and a timer on the replica's loop hands the sums to Ray once a second
(``flush_periodically``). Counters are summed per tag set, the gauge keeps its last value,
histogram observations are replayed. Prometheus scrapes every few seconds: nothing is lost.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from typing import Any

from serve_app.core.metrics import MarkupMethod, Pair
from serve_app.store.protocol import DocumentBacklog

LATENCY_BUCKETS: list[float] = [
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
    30,
    60,
    120,
    300,
]
BATCH_BUCKETS: list[float] = [1, 2, 4, 8, 16, 32, 64, 128]
FLUSH_PERIOD_S = 1.0
# Observations kept at most between flushes (the timer flushes long before, at ~100 RPS).
MAX_PENDING = 10_000

logger = logging.getLogger("ray.serve.translator")
Tags = tuple[tuple[str, str], ...]


class MetricBuffer:
    """Records kept in memory until ``flush`` hands them to the metric objects in one go."""

    def __init__(self) -> None:
        self.counts: defaultdict[tuple[Any, Tags], float] = defaultdict(float)
        self.observations: list[tuple[Any, float, Tags]] = []
        self.gauges: dict[Any, float] = {}

    def inc(self, metric: Any, value: float = 1, tags: dict[str, str] | None = None) -> None:
        if value <= 0:  # Ray's counters refuse an increment of 0 (a chat completion's
            return  # second choice counts no characters)
        self.counts[metric, tuple(tags.items()) if tags else ()] += value

    def observe(self, metric: Any, value: float, tags: dict[str, str] | None = None) -> None:
        self.observations.append((metric, value, tuple(tags.items()) if tags else ()))
        if len(self.observations) > MAX_PENDING:
            self.flush()

    def set(self, metric: Any, value: float) -> None:
        self.gauges[metric] = value

    def flush(self) -> None:
        counts, self.counts = self.counts, defaultdict(float)
        observations, self.observations = self.observations, []
        gauges, self.gauges = self.gauges, {}
        for (metric, tags), value in counts.items():
            metric.inc(value, tags=dict(tags) or None)
        for metric, value, tags in observations:
            metric.observe(value, tags=dict(tags) or None)
        for metric, value in gauges.items():
            metric.set(value)

    async def flush_periodically(self, period_s: float = FLUSH_PERIOD_S) -> None:
        """Flushes every ``period_s`` until cancelled, then once more."""
        try:
            while True:
                await asyncio.sleep(period_s)
                self._flush_logged()
        finally:
            self._flush_logged()

    def _flush_logged(self) -> None:
        try:
            self.flush()
        except Exception:  # a metrics failure must never stop the replica
            logger.exception("could not export the service's metrics")


class RayServeMetrics:
    """The service's metrics as Ray Serve metrics (names below, before Ray's prefixes)."""

    def __init__(self, metrics_module: Any = None) -> None:
        """``metrics_module``: ``ray.serve.metrics`` unless given (tests)."""
        if metrics_module is None:
            from ray.serve import metrics as metrics_module
        m = metrics_module
        self.buffer = MetricBuffer()
        pair_keys = ("source_lang", "target_lang")
        self._requests = m.Counter(
            "translator_requests",
            description="HTTP requests by endpoint, language pair and status.",
            tag_keys=("endpoint", "status", *pair_keys),
        )
        self._duration = m.Histogram(
            "translator_request_duration_seconds",
            description="Time from request to response at the replica.",
            boundaries=LATENCY_BUCKETS,
            tag_keys=("endpoint",),
        )
        self._queue = m.Histogram(
            "translator_queue_wait_seconds",
            description="Time a text waited in the engine's queue before it was scheduled.",
            boundaries=LATENCY_BUCKETS,
        )
        self._ttft = m.Histogram(
            "translator_time_to_first_token_seconds",
            description="Time from engine arrival to the first generated token.",
            boundaries=LATENCY_BUCKETS,
        )
        self._texts = self._pair_counter(m, "translator_texts", "Texts translated.")
        self._chars = self._pair_counter(m, "translator_characters", "Characters translated.")
        self._input = self._pair_counter(m, "translator_input_tokens", "Prompt tokens.")
        self._output = self._pair_counter(m, "translator_output_tokens", "Generated tokens.")
        self._batch = m.Histogram(
            "translator_batch_size",
            description="Items per batch request.",
            boundaries=BATCH_BUCKETS,
        )
        self._rejected = m.Counter(
            "translator_rejected_requests",
            description="Requests refused by the replica (overloaded, engine unavailable).",
            tag_keys=("reason",),
        )
        self._cache = m.Counter(
            "translator_cache_lookups",
            description="Translation cache lookups by result (hit: no engine work).",
            tag_keys=("result",),
        )
        self._markup = m.Counter(
            "translator_markup_segments",
            description="Segments with tags by how they were translated: placeholders_kept, "
            "placeholders_fell_back (translated again run by run), structural_first (run by "
            "run at once: the model recently lost tags for the target language).",
            tag_keys=("method",),
        )
        self._in_flight = m.Gauge(
            "translator_engine_requests_in_flight",
            description="Engine requests the replica has admitted and not finished.",
        )

    @staticmethod
    def _pair_counter(m: Any, name: str, description: str) -> Any:
        keys = ("source_lang", "target_lang")
        return m.Counter(name, description=description, tag_keys=keys)

    def request(self, endpoint: str, status: int, pair: Pair, seconds: float) -> None:
        b = self.buffer
        tags = {"endpoint": endpoint, "status": str(status)}
        b.inc(self._requests, 1, {**tags, "source_lang": pair[0], "target_lang": pair[1]})
        b.observe(self._duration, seconds, {"endpoint": endpoint})

    def translation(
        self,
        pair: Pair,
        characters: int,
        input_tokens: int,
        output_tokens: int,
        queue_s: float | None,
        ttft_s: float | None,
    ) -> None:
        b = self.buffer
        tags = {"source_lang": pair[0], "target_lang": pair[1]}
        b.inc(self._texts, 1, tags)
        b.inc(self._chars, characters, tags)
        b.inc(self._input, input_tokens, tags)
        b.inc(self._output, output_tokens, tags)
        if queue_s is not None:
            b.observe(self._queue, queue_s)
        if ttft_s is not None:
            b.observe(self._ttft, ttft_s)

    def batch(self, size: int) -> None:
        self.buffer.observe(self._batch, size)

    def rejected(self, reason: str) -> None:
        self.buffer.inc(self._rejected, 1, {"reason": reason})

    def load(self, in_flight: int) -> None:
        self.buffer.set(self._in_flight, in_flight)

    def cache(self, hit: bool) -> None:
        self.buffer.inc(self._cache, 1, {"result": "hit" if hit else "miss"})

    def markup_segments(self, method: MarkupMethod, count: int) -> None:
        self.buffer.inc(self._markup, count, {"method": method})

    async def flush_periodically(self, period_s: float = FLUSH_PERIOD_S) -> None:
        """Hands the buffered records to Ray every ``period_s`` (a task on the replica's loop)."""
        await self.buffer.flush_periodically(period_s)


class RayDocumentMetrics:
    """Document translation's progress (``documents.replica.DocumentMetrics``): segments and
    characters translated (the characters' rate is the documents' progress per second),
    jobs finished by state, and the fleet's backlog (jobs, segments and characters left)."""

    def __init__(self) -> None:
        from ray.serve import metrics as m

        self._segments = m.Counter(
            "translator_document_segments", description="Document segments translated."
        )
        self._chars = m.Counter(
            "translator_document_characters",
            description="Characters of document segments translated.",
        )
        self._finished = m.Counter(
            "translator_documents_finished",
            description="Document jobs finished, by state (done, error).",
            tag_keys=("state",),
        )
        # Fleet-wide (read from the store; every replica reports the same: take the max).
        self._backlog_jobs = m.Gauge(
            "translator_document_backlog_jobs", description="Document jobs not yet translated."
        )
        self._backlog_segments = m.Gauge(
            "translator_document_backlog_segments",
            description="Segments of open document jobs not yet translated.",
        )
        self._backlog_chars = m.Gauge(
            "translator_document_backlog_characters",
            description="Characters of open document jobs not yet translated.",
        )

    def document_segment(self, characters: int) -> None:
        self._segments.inc()
        self._chars.inc(characters)

    def document_finished(self, state: str) -> None:
        self._finished.inc(tags={"state": state})

    def document_backlog(self, backlog: DocumentBacklog) -> None:
        self._backlog_jobs.set(backlog.jobs)
        self._backlog_segments.set(backlog.segments)
        self._backlog_chars.set(backlog.characters)
