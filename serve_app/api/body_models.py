"""A large JSON body is validated against its route's model in a worker thread, before the
route runs.

FastAPI validates a route's body on the event loop, and pydantic reports every invalid
element of a list: a 1 MiB ``/translate/batch`` of 333,000 ``{}`` items made 666,000 errors,
which pydantic, FastAPI and the error message built in 3.4 s with the replica's event loop
standing still (every other request waited). ``BodyCheckMiddleware`` (``bodies.py``) calls
``validate_for_route`` in the thread where it decodes such a body: an invalid body is
refused there, with the message FastAPI's own refusal would carry (``errors.
validation_message``), and a valid one validates again on the loop in little time (valid
elements cost about a microsecond each, and the decoder bounds their number).

Such a route reads its body as JSON only when it is declared so: FastAPI (0.136, strict
content types) takes any other body, or one without a ``Content-Type`` (``curl -d`` sends
``application/x-www-form-urlencoded``, ``requests.post(data=json.dumps(...))`` none), as
bytes, and refused it as "body: Input should be a valid dictionary or object to extract
fields from". ``BodyCheckMiddleware`` refuses it before the route with ``not_json``, which
says what to send.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi.dependencies.utils import request_body_to_args
from fastapi.routing import APIRoute
from starlette.routing import Match
from starlette.types import Scope

from serve_app.api.errors import validation_message
from serve_app.core.errors import InvalidRequest


def body_route(scope: Scope) -> APIRoute | None:
    """The FastAPI route that will serve ``scope``, when it takes a JSON body model."""
    app = scope.get("app")
    for route in getattr(getattr(app, "router", None), "routes", ()):
        if isinstance(route, APIRoute) and route.matches(scope)[0] is Match.FULL:
            return route if route.dependant.body_params else None
    return None


def validate_for_route(route: APIRoute, body: Any) -> None:
    """Raises ``InvalidRequest`` (FastAPI's 422 message, in the called API's shape) when
    ``body`` does not validate as ``route``'s body. Runs FastAPI's own body validation (a
    coroutine that awaits nothing for JSON) in a loop of the calling thread."""
    _, errors = asyncio.run(
        request_body_to_args(
            route.dependant.body_params, body, getattr(route, "_embed_body_fields", False)
        )
    )
    if errors:
        raise InvalidRequest(validation_message(errors))


def came_as(media: str) -> str:
    """How a body was declared, in a refusal's words."""
    return f"it came as '{media[:100]}'" if media else "it came without a Content-Type"


def not_json(media: str) -> InvalidRequest:
    """The refusal of a body a JSON route cannot read: not declared as JSON."""
    return InvalidRequest(
        "Invalid request: the body must be JSON, sent with 'Content-Type: application/json' "
        f"({came_as(media)})."
    )


def takes_json_model(scope: Scope) -> bool:
    """Whether the route that will serve ``scope`` requires a JSON body model (only a
    ``POST``'s: every such route is one, and a ``GET`` is not worth the routes' search)."""
    if scope.get("method") != "POST":
        return False
    route = body_route(scope)
    return route is not None and all(
        p.field_info.is_required() for p in route.dependant.body_params
    )
