"""Server-sent events: the wire format of ``POST /translate/stream``.

Each event is ``event: NAME`` and one ``data:`` line of JSON. The status is sent only once
the first event is there (``opened``): a request refused by its first checks (admission's
503 with ``Retry-After``, a deadline, the engine's state) gets its HTTP status like any
other request. Once the stream has started (status 200 sent), an error can no longer change
the status: it is sent as an ``error`` event with the usual ``{"error": {"code",
"message"}}`` body, and the stream ends.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import suppress
from typing import Any

from serve_app.api.errors import error_body, internal_error_message
from serve_app.core.errors import ServiceError

logger = logging.getLogger("ray.serve.translator")

HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def format_event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


Events = AsyncIterator[tuple[str, dict[str, Any]]]


async def opened(events: Events) -> Events:
    """``events`` once its first event has come: the errors of the stream's first checks
    are raised here, before a status is sent."""
    try:
        first = await anext(events)
    except StopAsyncIteration:
        return events

    async def rest() -> Events:
        try:
            yield first
            async for event in events:
                yield event
        finally:
            if (close := getattr(events, "aclose", None)) is not None:
                with suppress(Exception):
                    await close()

    return rest()


async def sse_stream(
    events: AsyncIterator[tuple[str, dict[str, Any]]], request_id: str
) -> AsyncIterator[bytes]:
    try:
        async for name, data in events:
            yield format_event(name, data)
    except ServiceError as exc:
        logger.warning("stream %s failed: %s (%s)", request_id, exc.code, exc.message)
        yield format_event("error", error_body(exc.code, exc.message))
    except Exception:
        logger.exception("stream %s failed unexpectedly", request_id)
        yield format_event(
            "error", error_body("internal_error", internal_error_message(request_id))
        )
