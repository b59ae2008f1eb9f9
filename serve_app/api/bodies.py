"""The one body-decoding layer: every JSON body, form body and query string is decoded here,
strictly, before a route reads it.

Python's and Starlette's decoders accept inputs that later blow up deep inside a request
(a 500 after the work, or a traceback in a middleware): lone UTF-16 surrogates (``"\\ud800"``
is valid JSON but no text: it cannot be encoded), nesting deep enough to exhaust the
recursion limit, integers too long to convert, ``NaN``/``Infinity``, duplicated keys (which
value wins differs between parsers), invalid UTF-8 in form fields (silently replaced or
read as Latin-1, in multipart field names, values and file names too). Here each becomes
an ``InvalidRequest`` with a message that says what is wrong and where; the error mapper
(``api/errors.py``) answers it in the called API's own shape (422 native, 400 DeepL and
LibreTranslate).

A body sent compressed (``Content-Encoding: gzip``, ``deflate``, ``br``, ``zstd``,
``compress``) is refused (415) before anything reads it: nothing here decompresses, and the
compressed bytes were refused as "not valid UTF-8" or "broken multipart" instead.

A body not declared as JSON, sent to a route that takes a JSON body model, is refused with
words that say what to send (``body_models.not_json``).

``BodyCheckMiddleware`` checks the JSON body of every route (FastAPI parses the native
routes' bodies itself; once checked, they parse the same); the compatibility APIs read
their parameters through ``decode_json`` and ``decode_form`` (``compat/common.py``); every
form (URL-encoded or multipart: DeepL's and LibreTranslate's parameters, the document
uploads) is read through ``request_form``.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import parse_qsl

from fastapi.routing import APIRoute
from python_multipart.multipart import parse_options_header
from starlette.datastructures import FormData, UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from serve_app.api.body_models import body_route, not_json, takes_json_model, validate_for_route
from serve_app.api.errors import printable, service_error_response
from serve_app.core.aio import sized
from serve_app.core.errors import BodyTooLarge, InvalidRequest, UnsupportedContentEncoding
from serve_app.core.gc_pause import gc_paused

MAX_DEPTH = 32  # the API's own bodies nest 4 levels deep
MAX_NUMBER_CHARS = 40  # a number longer than this is no timeout, count or flag
MAX_FORM_FIELDS = 1000
# Values (strings, numbers, objects...) one JSON body may hold: the largest the API takes, a
# glossary of 10,000 entries as objects, holds 30,000. FastAPI parses a body again on the
# event loop, at about 0.3 us a value.
MAX_JSON_VALUES = 50_000
# A body of more values is validated against its route's model in a worker thread first
# (``body_models.py``): each invalid one can cost an error of ~6 us on the event loop.
INLINE_VALUES = 1000
UTF8 = frozenset({"utf-8", "utf8", "us-ascii", "ascii"})  # the charsets a form may name
# Bodies up to this size are checked on the event loop (well under a millisecond); larger
# ones in a worker thread, so that the loop keeps serving while a 1 MB body is decoded.
INLINE_BYTES = 64 * 1024

Path = tuple[str | int, ...]
# Whether a string at this path may hold lone surrogates: the route reports them itself
# (the native batch answers that item's error in its place).
Deferred = Callable[[Path], bool]


class _Refused(ValueError):
    """Raised from inside the JSON parser's hooks; becomes an InvalidRequest."""


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_NUMBER_CHARS:
        raise _Refused(f"a number has more than {MAX_NUMBER_CHARS} digits")
    return int(text)


def _parse_float(text: str) -> float:
    if len(text) > MAX_NUMBER_CHARS:
        raise _Refused(f"a number is longer than {MAX_NUMBER_CHARS} characters")
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"the number {text} is out of range")
    return value


def _parse_constant(name: str) -> float:
    raise _Refused(f"{name} is not a JSON value")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Refused(f"the key '{printable(key)}' appears more than once in one object")
        out[key] = value
    return out


_DECODER = json.JSONDecoder(
    object_pairs_hook=_unique_keys,
    parse_int=_parse_int,
    parse_float=_parse_float,
    parse_constant=_parse_constant,
)


def has_lone_surrogate(text: str) -> bool:
    """Whether ``text`` holds a lone UTF-16 surrogate (a pair in JSON is one character)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def decode_json(raw: bytes, deferred: Deferred | None = None) -> Any:
    """The JSON value of ``raw``, or ``InvalidRequest`` saying why it is refused: not UTF-8,
    not JSON, nested deeper than ``MAX_DEPTH``, a number too long or not finite, a key twice
    in an object, a lone surrogate in a string or key (except strings at ``deferred`` paths);
    ``BodyTooLarge`` for more than ``MAX_JSON_VALUES`` values."""
    return decode_counted(raw, deferred)[0]


def decode_counted(raw: bytes, deferred: Deferred | None = None) -> tuple[Any, int]:
    """``decode_json``'s value, and how many values it holds."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidRequest(
            f"Invalid request: the body is not valid UTF-8 (byte {exc.start})."
        ) from exc
    try:
        value = _DECODER.decode(text.removeprefix("\ufeff"))
    except _Refused as exc:
        raise InvalidRequest(f"Invalid request: body is not valid JSON: {exc}.") from exc
    except RecursionError as exc:
        raise _too_deep() from exc
    except ValueError as exc:  # JSONDecodeError
        raise InvalidRequest(f"Invalid request: body is not valid JSON ({exc}).") from exc
    return value, _check_tree(value, deferred or (lambda path: False))


def _too_deep() -> InvalidRequest:
    return InvalidRequest(f"Invalid request: the body nests deeper than {MAX_DEPTH} levels.")


def _check_tree(value: Any, deferred: Deferred) -> int:
    """Depth, lone surrogates and the number of values (returned), walked without
    recursion."""
    stack: list[tuple[Any, Path]] = [(value, ())]
    count = 1
    while stack:
        node, path = stack.pop()
        if len(path) > MAX_DEPTH:
            raise _too_deep()
        for child, child_path in _children(node, path):
            count += 1
            if count > MAX_JSON_VALUES:
                raise BodyTooLarge(
                    f"The request body holds more than {MAX_JSON_VALUES} JSON values."
                )
            if isinstance(child, str) and has_lone_surrogate(child):
                if not deferred(child_path):
                    raise lone_surrogate(_dotted(child_path))
            elif isinstance(child, dict | list):
                stack.append((child, child_path))
    return count


def _children(node: Any, path: Path) -> Iterator[tuple[Any, Path]]:
    if isinstance(node, dict):
        for key, child in node.items():
            if has_lone_surrogate(key):
                raise lone_surrogate(_dotted((*path, printable(key))) + " (a key)")
            yield child, (*path, key)
    elif isinstance(node, list):
        for index, child in enumerate(node):
            yield child, (*path, index)
    elif not path and isinstance(node, str) and has_lone_surrogate(node):
        raise lone_surrogate("body")


def lone_surrogate(where: str) -> InvalidRequest:
    return InvalidRequest(
        f"Invalid request: {where} holds a lone UTF-16 surrogate (such as \\ud800): "
        "it is not valid Unicode text."
    )


def _dotted(path: Path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "body"


def decode_form(raw: bytes, what: str = "form body") -> list[tuple[str, str]]:
    """The fields of a URL-encoded form (or query string), in order, repeated ones too:
    raw bytes and percent-escapes both read as strict UTF-8 (Starlette reads raw bytes as
    Latin-1 and replaces invalid escapes)."""
    try:
        text = raw.decode("utf-8")
        return parse_qsl(
            text,
            keep_blank_values=True,
            encoding="utf-8",
            errors="strict",
            max_num_fields=MAX_FORM_FIELDS,
        )
    except UnicodeDecodeError as exc:
        raise InvalidRequest(f"Invalid request: the {what} is not valid UTF-8.") from exc
    except ValueError as exc:  # more than MAX_FORM_FIELDS fields
        raise InvalidRequest(
            f"Invalid request: the {what} has more than {MAX_FORM_FIELDS} fields."
        ) from exc


def _strict_utf8(raw: bytes | bytearray, what: str) -> None:
    try:
        bytes(raw).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidRequest(
            f"Invalid request: {what} is not valid UTF-8 (byte {exc.start})."
        ) from exc


class _StrictMultiPartParser(MultiPartParser):
    """Starlette's multipart parser, but a field's name, value or file name that is not
    UTF-8 is refused (Starlette reads it as Latin-1). A file's bytes stay as they are."""

    def on_headers_finished(self) -> None:
        _, options = parse_options_header(self._current_part.content_disposition)
        _strict_utf8(options.get(b"name", b""), "a multipart field name")
        _strict_utf8(options.get(b"filename", b""), "a multipart file name")
        super().on_headers_finished()

    def on_part_end(self) -> None:
        if self._current_part.file is None:
            name = printable(self._current_part.field_name)
            _strict_utf8(self._current_part.data, f"the multipart field '{name}'")
        super().on_part_end()


async def request_form(request: Request, max_files: int = 1000, max_fields: int = 1000) -> FormData:
    """The request's form, URL-encoded or multipart, its text decoded as strict UTF-8
    (an ``InvalidRequest`` otherwise, and for broken multipart framing); an empty form for
    any other content type. Callers close its files (``form.close()``)."""
    media = media_type(request.headers)
    if media == "application/x-www-form-urlencoded":
        fields: list[tuple[str, str | UploadFile]] = [*decode_form(await request.body())]
        return FormData(fields)
    if media != "multipart/form-data":
        return FormData()
    _, params = parse_options_header(request.headers.get("content-type", ""))
    charset = params.get(b"charset", b"utf-8").decode("latin-1").strip().lower()
    if charset not in UTF8:
        raise InvalidRequest(
            f"Invalid request: multipart bodies must be UTF-8 (charset={printable(charset)})."
        )
    parser = _StrictMultiPartParser(
        request.headers, request.stream(), max_files=max_files, max_fields=max_fields
    )
    try:
        return await parser.parse()
    except MultiPartException as exc:
        raise InvalidRequest(f"Invalid request: broken multipart body ({exc.message})") from exc


def media_type(headers: Any) -> str:
    """The request's media type, lower case, without parameters ("" when absent)."""
    return str(headers.get("content-type", "")).split(";")[0].strip().lower()


def is_json(media: str) -> bool:
    return media == "application/json" or media.endswith("+json")


async def request_json(request: Request, deferred: Deferred | None = None) -> Any:
    """The request's JSON body, decoded strictly (in a thread when large)."""
    raw = await request.body()
    return await sized(len(raw), INLINE_BYTES, decode_json, raw, deferred)


# Routes that answer a lone surrogate in an item's text with that item's error, in its place.
def _batch_texts(path: Path) -> bool:
    return len(path) == 3 and path[0] == "items" and path[2] == "text"


DEFERRED: dict[str, Deferred] = {"/translate/batch": _batch_texts}


# Content codings that compress: a body in one of them cannot be read as sent. Others (a
# client's "Content-Encoding: utf-8", meant as a charset) are left to the body's own checks.
COMPRESSIONS = frozenset({"gzip", "x-gzip", "deflate", "br", "zstd", "compress", "x-compress"})


def compressed_with(headers: Any) -> str | None:
    """The compressing content coding a request's body is declared in, or None."""
    declared = str(headers.get("content-encoding", "")).lower()
    codings = [c.strip() for c in declared.split(",")]
    return next((c for c in codings if c in COMPRESSIONS), None)


def refuse_compressed(headers: Any) -> None:
    """``UnsupportedContentEncoding`` (415) for a body declared compressed: raised before
    anything reads the body (the JSON check, the key check looking for LibreTranslate's
    ``api_key`` in it)."""
    if coding := compressed_with(headers):
        raise UnsupportedContentEncoding(
            f"Content-Encoding {coding} is not supported: send the body uncompressed."
        )


class BodyCheckMiddleware:
    """Refuses, before any route runs, a compressed body (415), a body not declared as JSON
    to a route that requires a JSON body model (``not_json``), and a JSON body that
    ``decode_json`` refuses: in the shape of the API it was sent to. The buffered body is
    then replayed to the route. A body of another type, or of none, is left to its route
    (a form's reader, ``compat.common.read_params``'s refusal): nothing reads it as JSON."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        try:
            refuse_compressed(request.headers)
        except UnsupportedContentEncoding as exc:
            await service_error_response(exc, request)(scope, receive, send)
            return
        media = media_type(request.headers)
        if not is_json(media) and takes_json_model(scope):
            await service_error_response(not_json(media), request)(scope, receive, send)
            return
        if not is_json(media):
            await self.app(scope, receive, send)
            return
        messages = await _read_all(receive)
        raw = b"".join(m.get("body", b"") for m in messages)
        if raw.strip():
            try:
                await _check_body(scope, raw)
            except (InvalidRequest, BodyTooLarge) as exc:
                response = service_error_response(exc, request)
                await response(scope, replay(messages, receive), send)
                return
        await self.app(scope, replay(messages, receive), send)


async def _check_body(scope: Scope, raw: bytes) -> None:
    """``raw`` decoded (in a worker thread when large) and, when it holds many values,
    validated against its route's body model there (``body_models.py``)."""
    deferred = DEFERRED.get(scope["path"])
    if len(raw) <= INLINE_BYTES:
        value, count = decode_counted(raw, deferred)
        if count > INLINE_VALUES and (route := body_route(scope)) is not None:
            await asyncio.to_thread(validate_for_route, route, value)
        return
    await asyncio.to_thread(_decode_and_validate, raw, deferred, body_route(scope))


def _decode_and_validate(raw: bytes, deferred: Deferred | None, route: APIRoute | None) -> None:
    """In a worker thread: the collector paused while the body's objects are built
    (``core.gc_pause``), and the error raised without them (its traceback would free them
    on the event loop)."""
    with gc_paused(len(raw)):
        refused = _refusal(raw, deferred, route)
    if refused is not None:
        kind, message = refused
        raise kind(message)


def _refusal(
    raw: bytes, deferred: Deferred | None, route: APIRoute | None
) -> tuple[type[InvalidRequest | BodyTooLarge], str] | None:
    try:
        value, count = decode_counted(raw, deferred)
        if count > INLINE_VALUES and route is not None:
            validate_for_route(route, value)
    except (InvalidRequest, BodyTooLarge) as exc:
        return type(exc), exc.message
    return None


async def _read_all(receive: Receive) -> list[Message]:
    """The body's messages (the body-size middleware in front bounds them)."""
    messages = []
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request" or not message.get("more_body", False):
            return messages


def replay(messages: list[Message], receive: Receive) -> Receive:
    pending = list(messages)

    async def replayed() -> Message:
        return pending.pop(0) if pending else await receive()

    return replayed
