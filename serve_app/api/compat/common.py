"""What the compatibility APIs (DeepL, LibreTranslate) share: reading parameters the way
those APIs accept them (JSON, form or query string), and turning a batch item's error back
into the service error it was, since those APIs fail a request as a whole."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from fastapi import APIRouter, Request
from pydantic import ValidationError

from serve_app.core.errors import InvalidRequest, ServiceError
from serve_app.core.schemas import BatchTranslateResponse, ItemError, TextItem, TranslateResponse

Params = dict[str, list[Any]]
F = TypeVar("F", bound=Callable[..., Any])


async def read_params(request: Request) -> Params:
    """Every parameter as a list of values: from the query string and from a JSON object
    or form body (DeepL's and LibreTranslate's clients send both kinds; some send a form
    body even with GET). Keys sent as a JSON array (or Rack-style, ``text[]``) are noted in
    ``request.state.arrays``."""
    params: Params = {}
    request.state.arrays = set()
    for key, value in request.query_params.multi_items():
        params.setdefault(_array_key(request, key), []).append(value)
    ctype = request.headers.get("content-type", "")
    if "json" in ctype:
        for key, value in (await _json_object(request)).items():
            if isinstance(value, list):
                request.state.arrays.add(key)
            params[key] = value if isinstance(value, list) else [value]
    elif "form" in ctype:
        for key, field in (await request.form()).multi_items():
            params.setdefault(_array_key(request, key), []).append(field)
    return params


def _array_key(request: Request, key: str) -> str:
    """``text[]`` -> ``text``, noted as an array: Rack-style form arrays, as Ruby clients
    send them (Mastodon's DeepL provider posts ``text[]=...&text[]=...``)."""
    if key.endswith("[]") and len(key) > 2:
        key = key[:-2]
        request.state.arrays.add(key)
    return key


async def _json_object(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.body())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidRequest("Invalid request: body is not valid JSON.") from exc
    if not isinstance(body, dict):
        raise InvalidRequest("Invalid request: the body must be a JSON object.")
    return body


def one(params: Params, key: str, default: Any = None) -> Any:
    values = params.get(key)
    return values[-1] if values else default


def make_item(**fields: Any) -> TextItem:
    try:
        return TextItem(**{k: v for k, v in fields.items() if v is not None})
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:3]
        )
        raise InvalidRequest(f"Invalid request: {problems}") from exc


def _classes(base: type[ServiceError]) -> list[type[ServiceError]]:
    return [base] + [c for sub in base.__subclasses__() for c in _classes(sub)]


def raise_item_error(error: ItemError) -> None:
    """Raises a batch item's error as the service error of its code (status included)."""
    for cls in _classes(ServiceError):
        if cls.code == error.error.code:
            raise cls(error.error.message)
    raise ServiceError(error.error.message)


def all_translated(batch: BatchTranslateResponse) -> list[TranslateResponse]:
    """The batch's translations, or the first item's error raised."""
    for result in batch.results:
        if isinstance(result, ItemError):
            raise_item_error(result)
    return [r for r in batch.results if isinstance(r, TranslateResponse)]


def get_and_post(router: APIRouter, path: str, name: str) -> Callable[[F], F]:
    """Registers a route for GET and POST (as those APIs accept), each with its own
    OpenAPI operation id."""

    def register(endpoint: F) -> F:
        for method in ("GET", "POST"):
            router.add_api_route(
                path, endpoint, methods=[method], operation_id=f"{name}_{method.lower()}"
            )
        return endpoint

    return register
