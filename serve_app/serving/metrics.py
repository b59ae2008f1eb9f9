"""Service metrics: recorded through Ray Serve's metrics API, exported by Ray.

Inside a replica, ``ray.serve.metrics`` counters, gauges and histograms go to Ray's metrics
agent on the node, which serves them on its Prometheus endpoint (``ray start
--metrics-export-port``) next to Ray Serve's and vLLM's own, with the ``application``,
``deployment`` and ``replica`` tags Ray adds: the endpoint the Ray dashboard's Grafana reads.
Ray prefixes names with ``ray_`` and appends ``_total`` to counters. Outside Ray (unit tests)
nothing is recorded.
"""

from __future__ import annotations

from typing import Any

from serve_app.core.metrics import Pair

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


class RayServeMetrics:
    """The service's metrics as Ray Serve metrics (names below, before Ray's prefixes)."""

    def __init__(self) -> None:
        from ray.serve import metrics as m

        pair_keys = ("source_lang", "target_lang")
        self._requests = m.Counter(
            "translator_requests",
            description="HTTP requests by endpoint, language pair and status.",
            # Ray annotates tag_keys as Tuple[str] (one element) but takes any number.
            tag_keys=("endpoint", "status", *pair_keys),  # type: ignore[arg-type]
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
        self._in_flight = m.Gauge(
            "translator_engine_requests_in_flight",
            description="Engine requests the replica has admitted and not finished.",
        )

    @staticmethod
    def _pair_counter(m: Any, name: str, description: str) -> Any:
        keys = ("source_lang", "target_lang")
        return m.Counter(name, description=description, tag_keys=keys)

    def request(self, endpoint: str, status: int, pair: Pair, seconds: float) -> None:
        tags = {"endpoint": endpoint, "status": str(status)}
        self._requests.inc(tags={**tags, "source_lang": pair[0], "target_lang": pair[1]})
        self._duration.observe(seconds, tags={"endpoint": endpoint})

    def translation(
        self,
        pair: Pair,
        characters: int,
        input_tokens: int,
        output_tokens: int,
        queue_s: float | None,
        ttft_s: float | None,
    ) -> None:
        tags = {"source_lang": pair[0], "target_lang": pair[1]}
        self._texts.inc(tags=tags)
        self._chars.inc(characters, tags=tags)
        self._input.inc(input_tokens, tags=tags)
        self._output.inc(output_tokens, tags=tags)
        if queue_s is not None:
            self._queue.observe(queue_s)
        if ttft_s is not None:
            self._ttft.observe(ttft_s)

    def batch(self, size: int) -> None:
        self._batch.observe(size)

    def rejected(self, reason: str) -> None:
        self._rejected.inc(tags={"reason": reason})

    def load(self, in_flight: int) -> None:
        self._in_flight.set(in_flight)

    def cache(self, hit: bool) -> None:
        self._cache.inc(tags={"result": "hit" if hit else "miss"})


class RayDocumentMetrics:
    """Document translation's progress (``documents.replica.DocumentMetrics``): segments and
    characters translated (the characters' rate is the documents' progress per second), and
    jobs finished by state."""

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

    def document_segment(self, characters: int) -> None:
        self._segments.inc()
        self._chars.inc(characters)

    def document_finished(self, state: str) -> None:
        self._finished.inc(tags={"state": state})
