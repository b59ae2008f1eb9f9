"""Trailing-slash redirects that stay on the server the client called.

Starlette answers ``POST /translate/`` with a ``307`` to ``/translate`` (and the other way
round), but builds the ``Location`` as an absolute URL from the request's ``Host`` header:
``Host: evil.example`` got ``Location: http://evil.example/translate``, a redirect to a host
the client chose (host-header injection: a cache or a proxy in front that keys on the path
serves it to others). ``install_slash_redirects`` turns Starlette's redirect off and answers
the same ``307`` with a relative ``Location`` (the path and query string only, RFC 9110
section 10.2.2), so a client follows it to the server it called, whatever ``Host`` said.
"""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import FastAPI
from starlette.responses import RedirectResponse
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Receive, Scope, Send


def install_slash_redirects(app: FastAPI) -> None:
    """Starlette's trailing-slash redirect on ``app``, with a relative ``Location``: run
    for a path no route matches, before the 404."""
    router = app.router
    router.redirect_slashes = False
    not_found: ASGIApp = router.default

    async def redirect_or_not_found(scope: Scope, receive: Receive, send: Send) -> None:
        location = _other_slash(router.routes, scope)
        if location is None:
            await not_found(scope, receive, send)
            return
        await RedirectResponse(location, status_code=307)(scope, receive, send)

    router.default = redirect_or_not_found


def _other_slash(routes: Sequence[BaseRoute], scope: Scope) -> str | None:
    """The relative URL of the path with its trailing slash dropped (or one added) if a
    route serves that path, else None; never ``//...``, which a browser reads as a host."""
    path = str(scope.get("path", ""))
    if scope["type"] != "http" or path.rstrip("/") == "":
        return None
    other = path.rstrip("/") if path.endswith("/") else path + "/"
    candidate = {**scope, "path": other}
    if not any(route.matches(candidate)[0] is not Match.NONE for route in routes):
        return None
    query = bytes(scope.get("query_string", b"")).decode("latin-1")
    location = "/" + other.lstrip("/")
    return f"{location}?{query}" if query else location
