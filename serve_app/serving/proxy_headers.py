"""What Ray's HTTP proxy runs in front of its own code: request headers it would fail on are
cleaned before it reads them, and the answers Ray writes itself get the app's security headers.

Ray Serve's proxy decodes ``X-Request-ID``, ``serve_multiplexed_model_id``, the session id
header and its per-request hints (``x-request-timeout-seconds``,
``x-request-disconnect-disabled``) as strict UTF-8 before any replica runs: a client that sends
``X-Request-ID: \\xff`` gets a 500 from the proxy (or the replica's own HTTP server), which no
replica can answer otherwise. Ray applies the middlewares that
``RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH`` names (set to
``serve_app.serving.proxy_headers:middlewares`` in the environment of ``ray start``) outside
its own, so this one runs first: it drops those headers when their value is not UTF-8, and
keeps only the first ``X-Request-ID`` that is a valid id (the proxy then makes one; the replica
answers the id it used, ``api/middleware.py``). Ray also takes its hints from any client:
``x-request-disconnect-disabled: ?1`` stopped it from cancelling a request whose client had
gone (the engine kept generating, the admission place stayed taken), and a
``x-request-timeout-seconds`` of 0 turned its request timeout off. The first is dropped from
every request, the second unless it is a positive number of seconds.

The same middlewares wrap what Ray answers itself, outside the app: the proxy's 404 for a path
no application serves, its 503 while no replica is ready, its 408/500 on a timeout or an
error, and, behind the HAProxy ingress, the replica's own HTTP server's answers (a 503 when its
queue is full, a 408 past ``x-request-timeout-seconds``), which Ray also wraps in them. Those
had none of the security headers the app puts on its answers (``api/headers.py``); they get
them here. An answer that has them is the app's and passes as it is (its API docs keep their
own policy). HAProxy's own answers never reach Ray's Python code (docs/hostile-input.md).

Ray calls the callback in each process that runs one of its HTTP servers (its proxy, each
replica behind the HAProxy ingress) just before it builds the server, with uvicorn's default
WebSocket support. The app serves no WebSocket, and uvicorn's (websockets' sans-I/O
handshake) never answered an upgrade request it could not parse: a ``POST`` with
``Upgrade: websocket`` and a body got no answer, its connection held open by the replica
and HAProxy (no server timeout) until the client left. ``serve_http_only`` turns uvicorn's
WebSocket support off there: such a request is an HTTP request, answered by the app.
"""

from __future__ import annotations

import math

from starlette.datastructures import MutableHeaders
from starlette.middleware import Middleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn import config as uvicorn_config

from serve_app.api.headers import secure, secured
from serve_app.api.middleware import valid_request_id

IMPORT_PATH = "serve_app.serving.proxy_headers:middlewares"
REQUEST_ID = b"x-request-id"
# Ray's per-request hints, which it takes from any client: these two are the operator's.
DISCONNECT_DISABLED = b"x-request-disconnect-disabled"
TIMEOUT_S = b"x-request-timeout-seconds"


def _read_by_ray(name: bytes) -> bool:
    """Headers whose value Ray's proxy or replica wrapper decodes as UTF-8: its own
    (``serve_*``) and its request hints (``x-request-id``, ``x-request-timeout-seconds``,
    ``x-request-disconnect-disabled``)."""
    return name.lower().replace(b"-", b"_").startswith((b"serve", b"x_request_"))


def _utf8(value: bytes) -> bool:
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _positive_seconds(value: bytes) -> bool:
    try:
        seconds = float(value.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return False
    return 0 < seconds < math.inf


def _operators_only(name: bytes, value: bytes) -> bool:
    """Ray's hints that would take a guarantee away from the service: ``?1`` in
    ``x-request-disconnect-disabled`` keeps a request running after its client has gone
    (its engine work is not aborted, its admission place stays taken), and a timeout of 0 or
    less turns Ray's request timeout off. A client may still ask for a timeout of its own."""
    lowered = name.lower()
    return lowered == DISCONNECT_DISABLED or (lowered == TIMEOUT_S and not _positive_seconds(value))


def clean_headers(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    out: list[tuple[bytes, bytes]] = []
    has_id = False
    for name, value in headers:
        if name.lower() == REQUEST_ID:
            if has_id or not valid_request_id(value.decode("latin-1")):
                continue
            has_id = True
        elif (_read_by_ray(name) and not _utf8(value)) or _operators_only(name, value):
            continue
        out.append((name, value))
    return out


class CleanHeadersMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            scope = {**scope, "headers": clean_headers(list(scope.get("headers") or []))}
        await self.app(scope, receive, send)


class RayAnswerHeadersMiddleware:
    """Gives an answer that Ray wrote (one without the app's security headers) those headers
    and the API's policy."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])  # optional in ASGI
                headers = MutableHeaders(scope=message)
                if not secured(headers):
                    secure(headers)
            await send(message)

        await self.app(scope, receive, with_headers)


def serve_http_only() -> None:
    """Ray's HTTP servers in this process are built without WebSocket support: Ray builds
    them with uvicorn's default (``ws="auto"``), which this makes ``"none"``."""
    uvicorn_config.WS_PROTOCOLS["auto"] = uvicorn_config.WS_PROTOCOLS["none"]


def middlewares() -> list[Middleware]:
    """Ray's proxy callback, called before it builds its HTTP server: the server serves HTTP
    only, and the middlewares it puts in front of its own (the last outermost)."""
    serve_http_only()
    return [Middleware(RayAnswerHeadersMiddleware), Middleware(CleanHeadersMiddleware)]
