"""The one place that maps errors to HTTP responses.

Service errors (``core.errors``), FastAPI's validation errors and anything unexpected become
the same JSON shape, ``{"error": {"code", "message"}}``, with the status of ``STATUS``;
compatibility APIs (DeepL, LibreTranslate) register a format that reshapes errors under their
prefix. Messages of 5xx errors we did not raise on purpose are logged with the request id and
replaced by a generic one: internals are not shown.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from serve_app.core import errors as e

logger = logging.getLogger("ray.serve.translator")

# Each error type's status; a subclass without an entry takes its nearest base's.
STATUS: dict[type[e.ServiceError], int] = {
    e.ServiceError: 500,
    e.ClientError: 400,
    e.ServerError: 503,
    e.InvalidRequest: 422,
    e.InvalidLanguageCode: 400,
    e.UnsupportedLanguage: 400,
    e.UnsupportedLanguagePair: 400,
    e.UnsupportedOption: 400,
    e.LanguageDetectionFailed: 400,
    e.TextTooLong: 413,
    e.BatchTooLarge: 413,
    e.BodyTooLarge: 413,
    e.UnsupportedContentEncoding: 415,
    e.RequestTimeout: 408,
    e.Unauthorized: 401,
    e.MissingKey: 401,
    e.Forbidden: 403,
    e.Overloaded: 503,
    e.EngineUnavailable: 503,
    e.DeadlineExceeded: 504,
    e.NotFound: 404,
    e.GlossaryNotFound: 404,
    e.ModelNotFound: 404,
    e.DocumentNotFound: 404,
    e.KeyNotFound: 404,
    e.InvalidGlossary: 400,
    e.GlossaryTooLarge: 413,
    e.InvalidDocument: 400,
    e.DocumentTooLarge: 413,
    e.DocumentNotReady: 409,
    e.DocumentFailed: 409,
    e.LimitReached: 403,
    e.NameTaken: 409,
    e.QuotaExceeded: 429,
    e.RateLimited: 429,
    e.StoreUnavailable: 503,
    e.UnsupportedDocumentFormat: 400,
    e.MalformedDocument: 400,
}

# A 503 raised without a time of its own (a store that went away, say): clients that honour
# Retry-After (DeepL's, OpenAI's) wait this long before their retry instead of guessing.
UNAVAILABLE_RETRY_AFTER_S = 1

# How pydantic opens the message of a ``ValueError`` a validator raised.
VALUE_ERROR = "Value error, "
# Starlette's detail of a 404 no route matched, and the most of a path its answer repeats.
NOT_FOUND = "Not Found"
MAX_SHOWN_PATH_CHARS = 200
# What a shown path keeps as it is (RFC 3986's path characters and ``%``); the rest is
# percent-encoded.
PATH_SAFE = "/:@!$&'()*+,;=-._~%"

# Headers an error type's answer carries: what the client should send instead.
HEADERS: dict[type[e.ServiceError], dict[str, str]] = {
    e.UnsupportedContentEncoding: {"Accept-Encoding": "identity"},
}


def http_status(exc: e.ServiceError | type[e.ServiceError]) -> int:
    """The HTTP status of an error (or error type)."""
    cls = exc if isinstance(exc, type) else type(exc)
    for base in cls.__mro__:
        if base in STATUS:
            return STATUS[base]
    return 500


def error_body(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": bounded(printable(message))}}


def printable(text: str) -> str:
    """``text`` safe to put in a message and a response: lone surrogates (which a JSON
    body can carry, and which cannot be encoded) written as ``\\udXXX``."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


# An error message's most characters: messages quote what a client sent ("Invalid
# split_sentences '...'"), and a 200,000-character value came back whole in the refusal.
MAX_MESSAGE_CHARS = 1_000


def bounded(message: str) -> str:
    """``message``, cut to ``MAX_MESSAGE_CHARS`` with a note of its full length."""
    if len(message) <= MAX_MESSAGE_CHARS:
        return message
    return f"{message[:MAX_MESSAGE_CHARS]}... (cut: {len(message)} characters)"


# Compatibility APIs (DeepL, LibreTranslate) answer errors in their own shapes: a format maps
# (status, code, message) to the status and body that API documents.
ErrorFormat = Callable[[int, str, str], tuple[int, dict[str, Any]]]


@dataclass(frozen=True)
class KeyScheme:
    """How an API takes its keys: the ``WWW-Authenticate`` challenge of its key refusals
    (None: no header, as LibreTranslate sends none) and what a ``MissingKey``'s message
    tells the client to send."""

    challenge: str | None
    send: str


BEARER = KeyScheme("Bearer", "'Authorization: Bearer <key>'")


@dataclass(frozen=True)
class _Api:
    prefix: str
    format: ErrorFormat | None
    keys: KeyScheme


_NATIVE = _Api("/", None, BEARER)


def register_error_format(
    app: FastAPI, prefix: str, fmt: ErrorFormat, keys: KeyScheme = BEARER
) -> None:
    """Errors of requests under path ``prefix`` are shaped by ``fmt``; its key refusals
    name ``keys``."""
    if not hasattr(app.state, "error_formats"):
        app.state.error_formats = []
    app.state.error_formats.append(_Api(prefix.rstrip("/") + "/", fmt, keys))


def _api_of(request: Request) -> _Api:
    """The API a request was sent to, by its path: ``/v2/...`` and ``/v2`` alike."""
    path = request.url.path
    app_state = getattr(request.scope.get("app"), "state", None)
    for api in getattr(app_state, "error_formats", []):
        if path.startswith(api.prefix) or path == api.prefix[:-1]:
            return api
    return _NATIVE


def _respond(
    request: Request,
    status: int,
    code: str,
    message: str,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    message = bounded(printable(message))
    fmt = _api_of(request).format
    if fmt is not None:
        status, body = fmt(status, code, message)
    else:
        body = error_body(code, message)
    return JSONResponse(body, status_code=status, headers=_with_retry_after(status, headers))


def _with_retry_after(status: int, headers: Mapping[str, str] | None) -> dict[str, str] | None:
    """``headers``, with a Retry-After for a 503 that has none: also one an API's format
    made a 503 (DeepL's not-ready download was a 409 before it; it went without one)."""
    if status != 503 or any(k.lower() == "retry-after" for k in headers or {}):
        return dict(headers) if headers else None
    return {**(headers or {}), "Retry-After": str(UNAVAILABLE_RETRY_AFTER_S)}


def _request_id(request: Request) -> str:
    return str(getattr(request.state, "request_id", "-"))


def service_error_response(exc: e.ServiceError, request: Request) -> JSONResponse:
    """``exc`` as the answer to ``request``, in the shape of the API it was sent to (also
    for the middlewares that refuse a request before any route runs)."""
    status = http_status(exc)
    if status >= 500:
        logger.warning("request %s failed: %s (%s)", _request_id(request), exc.code, exc.message)
    headers = dict(HEADERS.get(type(exc), {}))
    message = exc.message
    if isinstance(exc, e.Unauthorized):  # in the called API's words and scheme
        keys = _api_of(request).keys
        if isinstance(exc, e.MissingKey):
            message = f"{message}: send {keys.send}."
        if keys.challenge:
            headers["WWW-Authenticate"] = keys.challenge
    retry_after = exc.retry_after_s
    if retry_after is None and status == 503:
        retry_after = UNAVAILABLE_RETRY_AFTER_S  # every 503 says when to come back
    if retry_after is not None:
        headers["Retry-After"] = str(retry_after)
    return _respond(request, status, exc.code, message, headers or None)


def validation_message(errors: Sequence[Mapping[str, Any]]) -> str:
    """FastAPI's validation errors as one message (the first five). A check of the whole
    body says its own words (``Invalid request: logprobs are not supported by this server``,
    not ``body: Value error, logprobs ...``, pydantic's wrapping, which the clients showed)."""
    parts = []
    for err in errors[:5]:
        if err.get("type") == "json_invalid":
            parts.append("body is not valid JSON")
            continue
        loc = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
        message = str(err.get("msg", "invalid"))
        if err.get("type") == "value_error":
            message = message.removeprefix(VALUE_ERROR)
        parts.append(f"{loc}: {message}" if loc else message)
    return "Invalid request: " + "; ".join(parts)


async def _on_service_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, e.ServiceError)
    return service_error_response(exc, request)


async def _on_validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return _respond(request, 422, e.InvalidRequest.code, validation_message(exc.errors()))


async def _on_http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    if isinstance(exc.__cause__, e.ServiceError):
        # FastAPI's "error parsing the body" over a service error raised while the body was
        # read (``RequestTimeout``, from the body deadline): answered as that error.
        return service_error_response(exc.__cause__, request)
    if exc.status_code == 400:
        # FastAPI's "error parsing the body": not UTF-8, or not decodable at all.
        message = f"Invalid request: the body could not be parsed ({exc.detail})."
        return _respond(request, 422, e.InvalidRequest.code, message)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    headers = exc.headers
    message = str(exc.detail)
    if exc.status_code == 405:
        headers = {**(headers or {}), "Allow": allowed_methods(request)}
    if exc.status_code == 404 and message == NOT_FOUND:
        message = not_offered_message(request)
    return _respond(request, exc.status_code, code, message, headers)


def not_offered_message(request: Request) -> str:
    """A 404 for a path no route serves, naming it: DeepL's client showed ``Not found,
    message: Not Found`` for ``rephrase_text`` (DeepL Write), OpenAI's ``Error code: 404 -
    Not Found`` for ``completions.create``, neither saying what was missing. The path is
    shown as sent, percent-encoded (no control or bidirectional character reaches the
    message) and cut at ``MAX_SHOWN_PATH_CHARS``."""
    raw = request.scope.get("raw_path") or request.url.path.encode()
    path = quote(raw, safe=PATH_SAFE)
    if len(path) > MAX_SHOWN_PATH_CHARS:
        path = path[:MAX_SHOWN_PATH_CHARS] + "..."
    return f"Not Found: this server does not offer {request.method} {path}."


def allowed_methods(request: Request) -> str:
    """Every method a route serves at the request's path, for a 405's ``Allow``: Starlette
    names only those of the first route there (``/v2/glossaries/{id}`` answered ``Allow:
    GET`` and served DELETE; ``/v2/languages``, GET and POST, ``Allow: GET``)."""
    methods: set[str] = set()
    for route in getattr(request.app, "routes", []):
        match, _ = route.matches(request.scope)
        if match is not Match.NONE:
            methods |= getattr(route, "methods", None) or set()
    return ", ".join(sorted(methods))


def internal_error_message(request_id: str) -> str:
    """What a client is told of an unexpected exception, in an answer or a stream's last
    event: the request id to quote, nothing of the exception."""
    return f"Internal error; quote request id {request_id} when reporting it."


async def _on_unexpected(request: Request, exc: Exception) -> JSONResponse:
    request_id = _request_id(request)
    logger.exception("request %s failed unexpectedly", request_id, exc_info=exc)
    return _respond(request, 500, "internal_error", internal_error_message(request_id))


def install_error_handlers(app: FastAPI) -> None:
    """Registers the one mapper for every error type on ``app``."""
    app.add_exception_handler(e.ServiceError, _on_service_error)
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(StarletteHTTPException, _on_http_error)
    app.add_exception_handler(Exception, _on_unexpected)
