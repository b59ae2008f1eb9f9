"""What the compatibility APIs (DeepL, LibreTranslate) share: reading parameters the way
those APIs accept them (JSON, form or query string), and turning a batch item's error back
into the service error it was, since those APIs fail a request as a whole."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from fastapi import APIRouter, Request
from pydantic import ValidationError

from serve_app.api.bodies import decode_form, is_json, media_type, request_form, request_json
from serve_app.api.body_models import came_as
from serve_app.api.errors import printable
from serve_app.core.characters import invisible
from serve_app.core.context import same_language_kept
from serve_app.core.errors import InvalidRequest, ServiceError
from serve_app.core.schemas import BatchTranslateResponse, ItemError, TextItem, TranslateResponse

Params = dict[str, list[Any]]
FORM = "application/x-www-form-urlencoded"
F = TypeVar("F", bound=Callable[..., Any])


async def read_params(request: Request) -> Params:
    """Every parameter as a list of values: from the query string and from a JSON object
    or form body (DeepL's and LibreTranslate's clients send both kinds; some send a form
    body even with GET), decoded strictly (``api/bodies.py``); a JSON list is one value per
    element. An empty body holds none, whatever its content type (clients that send
    ``Content-Type: application/json`` on every request, GETs included); a body of another
    type, or of none, and JSON sent as a form (``curl -d``) are refused
    (``_check_declared``). Keys sent as a JSON array (or Rack-style, ``text[]``) are noted
    in ``request.state.arrays``. Scalar parameters are read with ``one``, which refuses
    objects, lists and files in their place."""
    params: Params = {}
    request.state.arrays = set()
    for key, value in decode_form(request.scope.get("query_string", b""), "query string"):
        params.setdefault(_array_key(request, key), []).append(value)
    media = media_type(request.headers)
    await _check_declared(request, media)
    if is_json(media) and (await request.body()).strip():  # no body: no parameters in it
        for key, value in (await _json_object(request)).items():
            if isinstance(value, list):
                request.state.arrays.add(key)
            # Beside the query's values, as a form's are (they replaced them: a query's
            # text was dropped unanswered, its target_lang silently overridden).
            params.setdefault(key, []).extend(value if isinstance(value, list) else [value])
    elif media == FORM:
        for key, field in decode_form(await request.body()):
            params.setdefault(_array_key(request, key), []).append(field)
    elif media == "multipart/form-data":
        form = await request_form(request)
        await form.close()  # a file is no parameter: one() refuses it
        for key, part in form.multi_items():
            params.setdefault(_array_key(request, key), []).append(part)
    return params


async def _check_declared(request: Request, media: str) -> None:
    """A body read as what it is declared: one of no type the APIs read (none, text/plain)
    was ignored, and JSON sent as a form (``curl -d '{...}'``) read as one field named by
    the whole object; either way the texts in it were "not specified"."""
    if is_json(media) or media == "multipart/form-data":
        return
    head = (await request.body()).lstrip()[:1]
    if media == FORM and head in (b"{", b"["):
        raise InvalidRequest(
            f"Invalid request: the body is JSON sent as a form ('{FORM}'): send it with "
            "'Content-Type: application/json'."
        )
    if media != FORM and head:
        raise InvalidRequest(
            "Invalid request: send the parameters as JSON ('Content-Type: application/json') "
            f"or as a form ('{FORM}') ({came_as(media)})."
        )


def _array_key(request: Request, key: str) -> str:
    """``text[]`` -> ``text``, noted as an array: Rack-style form arrays, as Ruby clients
    send them (Mastodon's DeepL provider posts ``text[]=...&text[]=...``)."""
    if key.endswith("[]") and len(key) > 2:
        key = key[:-2]
        request.state.arrays.add(key)
    return key


def _scalar(key: str, value: Any) -> Any:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise InvalidRequest(f"Parameter '{printable(key)}' must be a string, a number or a boolean.")


async def _json_object(request: Request) -> dict[str, Any]:
    body = await request_json(request)
    if not isinstance(body, dict):
        raise InvalidRequest("Invalid request: the body must be a JSON object.")
    return body


def one(params: Params, key: str, default: Any = None) -> Any:
    """The parameter's one value (``default`` when absent or JSON ``null``: DeepL's
    ``"formality": null`` was "Invalid formality 'None'"): a string, number or boolean; a
    400 for an object or a list in its place, or for a parameter given more than once with
    different values (which one was meant is anyone's guess)."""
    values = [_scalar(key, v) for v in params.get(key) or () if v is not None]
    if not values:
        return default
    if any(v != values[0] for v in values[1:]):
        raise InvalidRequest(f"Parameter '{key}' was given more than once, with different values.")
    return values[0]


def make_item(**fields: Any) -> TextItem:
    try:
        return TextItem(**{k: v for k, v in fields.items() if v is not None})
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:3]
        )
        raise InvalidRequest(f"Invalid request: {problems}") from exc


def blank(text: Any) -> bool:
    """A text of whitespace and invisible format characters only (or empty: ``invisible``):
    DeepL and LibreTranslate answer it as it is, without translating it."""
    return isinstance(text, str) and invisible(text)


def in_place(texts: list[Any], results: list[TranslateResponse]) -> list[TranslateResponse | str]:
    """The translations of the texts that are not ``blank``, in order, with each blank text
    kept as it is in its place."""
    translated = iter(results)
    return [text if blank(text) else next(translated) for text in texts]


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


@contextmanager
def keeping_same_language() -> Iterator[None]:
    """Within it, a text already in its target language is answered as it is
    (``core.context.same_language_kept``), as DeepL and LibreTranslate answer it."""
    token = same_language_kept.set(True)
    try:
        yield
    finally:
        same_language_kept.reset(token)


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
