"""Security headers on every answer of the API, not only on the web page's files.

The page (``api/web``) sets its own strict Content-Security-Policy. The rest of the API sent
none of these headers, and it serves what clients wrote: a translated HTML document comes
back from ``/documents/{id}/result`` (and DeepL's and LibreTranslate's downloads, the latter
without a key) as ``text/html`` on the page's own origin, scripts kept as the file had them.
``Content-Disposition: attachment`` makes a browser save it, but nothing stopped a page on
another site from framing a response, a browser from sniffing a type, or the file's script
from running if it was ever shown inline. Now every answer that sets no policy of its own
gets one that allows nothing (``default-src 'none'``, ``sandbox``: no script, no plugin, a
unique origin), and every answer ``nosniff``, ``frame-ancestors``/``X-Frame-Options`` and
``Referrer-Policy: no-referrer``. FastAPI's own API docs (``/docs``, ``/redoc``) load their
scripts from a CDN and keep the browser's defaults for scripts.
"""

from __future__ import annotations

from collections.abc import Iterable

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# What nothing the API answers needs: scripts, styles, frames, plugins, forms, its origin.
API_POLICY = (
    "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'; sandbox"
)
ALWAYS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}


def secure(headers: MutableHeaders, policy: bool = True) -> None:
    """Sets ``ALWAYS`` and, with ``policy``, ``API_POLICY`` on an answer's headers; a header
    the answer has already is kept, not sent twice."""
    for name, value in ALWAYS.items():
        headers.setdefault(name, value)
    if policy:
        headers.setdefault("Content-Security-Policy", API_POLICY)


def secured(headers: Headers) -> bool:
    """Whether an answer has ``ALWAYS``: one this module's middleware has seen (the app's)."""
    return all(name in headers for name in ALWAYS)


class SecurityHeadersMiddleware:
    """Adds ``ALWAYS`` to every HTTP answer and ``API_POLICY`` as its Content-Security-Policy
    unless it has one (the web page) or its path ends with one of ``own_scripts`` (the API
    docs, under any root path); a header the route set itself is kept."""

    def __init__(self, app: ASGIApp, own_scripts: Iterable[str] = ()) -> None:
        self.app = app
        self.own_scripts = frozenset(own_scripts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        policy = not any(path.endswith(own) for own in self.own_scripts)

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                secure(MutableHeaders(scope=message), policy=policy)
            await send(message)

        await self.app(scope, receive, with_headers)
