"""What the service records about its work: the metrics interface, and a recorder of nothing.

The translation service and the API's middleware record through ``ServiceMetrics``; inside a
replica it is ``serving/metrics.py``'s Ray Serve implementation, elsewhere ``NoMetrics``.
"""

from __future__ import annotations

from typing import Literal, Protocol

Pair = tuple[str, str]
# How a segment with tags was translated (``markupflow``): the values of the metric's label.
MarkupMethod = Literal["placeholders_kept", "placeholders_fell_back", "structural_first"]


class ServiceMetrics(Protocol):
    def request(self, endpoint: str, status: int, pair: Pair, seconds: float) -> None: ...

    def translation(
        self,
        pair: Pair,
        characters: int,
        input_tokens: int,
        output_tokens: int,
        queue_s: float | None,
        ttft_s: float | None,
    ) -> None: ...

    def batch(self, size: int) -> None: ...

    def rejected(self, reason: str) -> None: ...

    def load(self, in_flight: int) -> None: ...

    def cache(self, hit: bool) -> None: ...

    def markup_segments(self, method: MarkupMethod, count: int) -> None: ...


class NoMetrics:
    """Records nothing (outside a Ray Serve replica)."""

    def request(self, endpoint: str, status: int, pair: Pair, seconds: float) -> None:
        pass

    def translation(
        self,
        pair: Pair,
        characters: int,
        input_tokens: int,
        output_tokens: int,
        queue_s: float | None,
        ttft_s: float | None,
    ) -> None:
        pass

    def batch(self, size: int) -> None:
        pass

    def rejected(self, reason: str) -> None:
        pass

    def load(self, in_flight: int) -> None:
        pass

    def cache(self, hit: bool) -> None:
        pass

    def markup_segments(self, method: MarkupMethod, count: int) -> None:
        pass
