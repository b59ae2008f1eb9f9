"""Server-sent events: the wire format of ``POST /translate/stream``.

Each event is ``event: NAME`` and one ``data:`` line of JSON. The status is sent only once
the first event is there (``opened``): a request refused by its first checks (admission's
503 with ``Retry-After``, a deadline, the engine's state) gets its HTTP status like any
other request. Once the stream has started (status 200 sent), an error can no longer change
the status: it is sent as an ``error`` event with the usual ``{"error": {"code",
"message"}}`` body, and the stream ends.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from contextlib import suppress
from typing import Any

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from serve_app.api.errors import error_body, internal_error_message
from serve_app.core.errors import ServiceError

logger = logging.getLogger("ray.serve.translator")

HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def format_event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


Events = AsyncIterator[tuple[str, dict[str, Any]]]


class OpenedStream:
    """A stream whose first event has been taken (``opened``): that event, then the rest.
    ``aclose`` closes the source whether or not iteration has begun: a client gone before
    its response's body was read left the source (holding an admission slot and an engine
    request) open until a garbage collection found it."""

    def __init__(self, first: tuple[str, dict[str, Any]], events: Events) -> None:
        self._first: tuple[str, dict[str, Any]] | None = first
        self._events = events

    def __aiter__(self) -> OpenedStream:
        return self

    async def __anext__(self) -> tuple[str, dict[str, Any]]:
        if (first := self._first) is not None:
            self._first = None
            return first
        return await anext(self._events)

    async def aclose(self) -> None:
        self._first = None
        await close_quietly(self._events)


async def close_quietly(stream: object) -> None:
    """Closes an async generator (or anything with ``aclose``), whatever it raises."""
    if (close := getattr(stream, "aclose", None)) is not None:
        with suppress(Exception):
            await close()


async def opened(events: Events) -> Events:
    """``events`` once its first event has come: the errors of the stream's first checks
    are raised here, before a status is sent. Send it in an ``EventStreamResponse``,
    which closes it however the response ends."""
    try:
        first = await anext(events)
    except StopAsyncIteration:
        return events
    return OpenedStream(first, events)


class EventStreamResponse(StreamingResponse):
    """Server-sent events from ``body`` (chunks made from ``source``): once the response
    ends, finished, failed or cancelled (the client gone), ``body`` and then ``source`` are
    closed, which stops the source's producer, its engine request and its admission slot.
    A body never started (the client gone before it was read) is otherwise closed by
    nobody: Starlette closes no iterator it did not finish."""

    def __init__(self, body: AsyncIterator[bytes], source: AsyncIterator[Any]) -> None:
        super().__init__(body, media_type="text/event-stream", headers=HEADERS)
        self.source = source

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await asyncio.shield(self._close())

    async def _close(self) -> None:
        await close_quietly(self.body_iterator)  # first: it may be reading the source
        await close_quietly(self.source)


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
