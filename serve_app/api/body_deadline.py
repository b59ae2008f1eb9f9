"""A deadline for receiving a request's body ("slowloris" clients).

A client may send its headers and then dribble the body, a byte every few seconds: the
request holds one of the replica's ongoing-request places (``max_ongoing_requests``) the
whole time, and HAProxy's client timeout (an hour) does not cut a connection that sends
something now and then; nor does Ray's generated HAProxy config set ``timeout
http-request`` (which bounds the headers only, unless the body is buffered). 60 such
clients held both replicas of the e2e cluster (docs/hostile-input.md).

``BodyDeadlineMiddleware`` gives the whole body ``timeout_s`` from the moment the request
reaches the app, plus one second per ``min_rate`` bytes of it (the declared
``Content-Length``, or for a chunked body the bytes received so far), so a large upload on
a slow but honest link still arrives. Past the deadline, the pending ``receive`` raises
``RequestTimeout``; the middleware answers it, through the one error mapper
(``api/errors.py``), as a 408 in the called API's shape with ``Connection: close``. Routes
that read their body themselves (forms, uploads) get the same answer: FastAPI's "error
parsing the body" carries the ``RequestTimeout`` as its cause, which the mapper answers.

The cost is one timer per body message (``asyncio.timeout_at``), nothing per byte; once the
body is complete (or the client left) ``receive`` is passed through as it is (a streaming
response waits on it for the client's disconnect, for as long as it streams).
"""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from serve_app.api.errors import service_error_response
from serve_app.core.errors import RequestTimeout


def declared_length(scope: Scope) -> int | None:
    """The request's ``Content-Length`` as a number, or None (absent, chunked, invalid: the
    HTTP server and the body limit deal with those)."""
    for name, value in scope.get("headers") or []:
        if name == b"content-length":
            return int(value) if value.isdigit() and len(value) <= 15 else None
    return None


class BodyDeadlineMiddleware:
    """408 ``request_timeout`` when the body does not arrive in time (module docstring)."""

    def __init__(self, app: ASGIApp, timeout_s: float, min_rate: int) -> None:
        self.app = app
        self.timeout_s = timeout_s
        self.min_rate = min_rate

    def deadline(self, start: float, declared: int | None, received: int) -> float:
        size = declared if declared is not None else received
        return start + self.timeout_s + size / self.min_rate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = _Request(self, receive, send, declared_length(scope))
        try:
            await self.app(scope, request.receive, request.send)
        except RequestTimeout as exc:
            if request.started:
                raise
            response = service_error_response(exc, Request(scope))
            await response(scope, receive, request.send)

    def timeout_error(self) -> RequestTimeout:
        return RequestTimeout(
            f"The request body did not arrive in time ({self.timeout_s:g} s, plus 1 s per "
            f"{self.min_rate} bytes); send it at once."
        )


class _Request:
    """One request's ``receive`` under the deadline, and its ``send``, which adds
    ``Connection: close`` to the answer once the deadline has passed."""

    def __init__(
        self, limits: BodyDeadlineMiddleware, receive: Receive, send: Send, declared: int | None
    ) -> None:
        self.limits, self._receive, self._send, self.declared = limits, receive, send, declared
        self.start = asyncio.get_running_loop().time()
        self.received = 0
        self.complete = self.expired = self.started = False

    async def receive(self) -> Message:
        if self.complete:
            return await self._receive()
        try:
            deadline = self.limits.deadline(self.start, self.declared, self.received)
            async with asyncio.timeout_at(deadline):
                message = await self._receive()
        except TimeoutError:
            self.expired = True
            raise self.limits.timeout_error() from None
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            self.complete = not message.get("more_body", False)
        else:
            self.complete = True  # http.disconnect: nothing more will come
        return message

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.started = True
            if self.expired:
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"connection"]
                message = {**message, "headers": [*kept, (b"connection", b"close")]}
        await self._send(message)
