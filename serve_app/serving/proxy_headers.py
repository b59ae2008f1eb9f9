"""Headers that Ray's HTTP proxy would fail on, cleaned before it reads them.

Ray Serve's proxy decodes ``X-Request-ID``, ``serve_multiplexed_model_id`` and the session id
header as strict UTF-8 before any replica runs: a client that sends ``X-Request-ID: \\xff``
gets a 500 from the proxy, which no replica can answer otherwise. Ray applies the middlewares
that ``RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH`` names (set to
``serve_app.serving.proxy_headers:middlewares`` in the environment of ``ray start``) outside
its own, so this one runs first: it drops those headers when their value is not UTF-8, and
keeps only the first ``X-Request-ID`` that is a valid id (the proxy then makes one; the
replica answers the id it used, ``api/middleware.py``).
"""

from __future__ import annotations

from starlette.middleware import Middleware
from starlette.types import ASGIApp, Receive, Scope, Send

from serve_app.api.middleware import valid_request_id

IMPORT_PATH = "serve_app.serving.proxy_headers:middlewares"
REQUEST_ID = b"x-request-id"


def _read_by_ray(name: bytes) -> bool:
    """Headers whose value Ray's proxy or replica wrapper decodes as UTF-8."""
    return name.lower().replace(b"-", b"_").startswith((b"serve", b"x_request_id"))


def _utf8(value: bytes) -> bool:
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def clean_headers(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    out: list[tuple[bytes, bytes]] = []
    has_id = False
    for name, value in headers:
        if name.lower() == REQUEST_ID:
            if has_id or not valid_request_id(value.decode("latin-1")):
                continue
            has_id = True
        elif _read_by_ray(name) and not _utf8(value):
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


def middlewares() -> list[Middleware]:
    """Ray's proxy callback: the middlewares it puts in front of its own."""
    return [Middleware(CleanHeadersMiddleware)]
