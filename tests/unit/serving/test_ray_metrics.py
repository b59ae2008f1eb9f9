"""The service's metrics as Ray Serve metrics: what Ray's counters refuse never reaches them."""

from __future__ import annotations

from serve_app.serving.metrics import RayServeMetrics


def test_zero_counts_are_not_increments() -> None:
    # Ray's Counter.inc raises on 0: a chat completion's second choice adds no characters
    # (the messages are counted once), a generation may add no tokens.
    metrics = RayServeMetrics()
    metrics.translation(("chat", "chat"), 0, 12, 0, None, None)
    metrics.translation(("en", "de"), 5, 0, 3, 0.01, 0.02)
    metrics.buffer.flush()  # the buffered counts reach Ray's counters
