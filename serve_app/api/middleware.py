"""The API's own ASGI middlewares: request ids, the answering replica, per-request metrics.

They wrap every route (native, compat) in the same way; refusals by the security middlewares
(``security.py``) pass through them too, so those requests are counted and carry an id.
"""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from serve_app.core.metrics import ServiceMetrics

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")


def valid_request_id(text: str) -> bool:
    """Whether a client's ``X-Request-ID`` is used as it is (else it is replaced)."""
    return _REQUEST_ID.fullmatch(text) is not None


def route_paths(app: Any) -> frozenset[str]:
    """Every path a route of ``app`` serves (FastAPI's docs and schema included)."""
    return frozenset(r.path for r in getattr(app, "routes", []) if isinstance(r, Route))


class RequestIdMiddleware:
    """Gives each request an id (``request.state.request_id``), the engine's request id too.

    Behind Ray's proxy the id arrives in ``X-Request-ID`` (the client's, or one the proxy
    made) and the proxy echoes it; without a proxy in front, this middleware makes and echoes
    one. Ids that are too long or hold odd characters are replaced, and the id used is sent
    back in ``X-Request-ID`` (Ray's proxy appends the client's after it: clients read the
    first), so the id a client quotes is the one in the logs.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        sent = dict(scope.get("headers") or []).get(b"x-request-id")
        text = sent.decode("latin-1") if sent is not None else ""
        request_id = text if valid_request_id(text) else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id
        if sent is not None and text == request_id:
            await self.app(scope, receive, send)  # the proxy echoes it
            return

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(b"x-request-id", request_id.encode()), *message.get("headers", [])]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_id)


class ReplicaHeaderMiddleware:
    """Names the replica that answered, so operators can see the load balancing."""

    def __init__(self, app: ASGIApp, replica_id: str) -> None:
        self.app = app
        self.header = (b"x-replica", replica_id.encode())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_replica(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), self.header]}
            await send(message)

        await self.app(scope, receive, send_with_replica)


class MetricsMiddleware:
    """Counts every HTTP request by endpoint, status and language pair, and times it."""

    def __init__(self, app: ASGIApp, metrics: ServiceMetrics) -> None:
        self.app = app
        self.metrics = metrics
        self._endpoints: frozenset[str] | None = None

    def endpoint_label(self, scope: Scope) -> str:
        """The route's path, or "other" for paths no route serves (labels stay bounded).
        The set is read from the app's routes at the first request, when all are added."""
        if self._endpoints is None:
            self._endpoints = route_paths(scope["app"])
        path = str(scope["path"])
        return path if path in self._endpoints else "other"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def send_and_note(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_and_note)
        finally:
            pair = scope.get("state", {}).get("pair", ("", ""))
            seconds = time.perf_counter() - start
            self.metrics.request(self.endpoint_label(scope), status, pair, seconds)
