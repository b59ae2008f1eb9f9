"""The service's error taxonomy and the one mapper from errors to HTTP responses.

Every error a client can cause or see is a ``ServiceError`` subclass with its status and code.
The mapper turns them, FastAPI's validation errors and anything unexpected into the same JSON
shape, ``{"error": {"code", "message"}}``. Messages of 5xx errors we did not raise on purpose
are logged with the request id and replaced by a generic one: internals are not shown.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

logger = logging.getLogger("ray.serve.translator")


class ServiceError(Exception):
    """Base of every error the service answers with a status of its own."""

    status_code: ClassVar[int] = 500
    code: ClassVar[str] = "internal_error"

    def __init__(self, message: str, *, retry_after_s: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after_s = retry_after_s


class InvalidRequest(ServiceError):
    status_code = 422
    code = "invalid_request"


class InvalidLanguageCode(ServiceError):
    status_code = 400
    code = "invalid_language_code"


class UnsupportedLanguage(ServiceError):
    status_code = 400
    code = "unsupported_language"


class UnsupportedLanguagePair(ServiceError):
    status_code = 400
    code = "unsupported_language_pair"


class UnsupportedOption(ServiceError):
    """A request option (glossary, context, formality) the configured model cannot follow."""

    status_code = 400
    code = "unsupported_option"


class LanguageDetectionFailed(ServiceError):
    status_code = 400
    code = "language_detection_failed"


class TextTooLong(ServiceError):
    status_code = 413
    code = "text_too_long"


class BatchTooLarge(ServiceError):
    status_code = 413
    code = "batch_too_large"


class BodyTooLarge(ServiceError):
    status_code = 413
    code = "body_too_large"


class Unauthorized(ServiceError):
    status_code = 401
    code = "unauthorized"


class Overloaded(ServiceError):
    status_code = 503
    code = "overloaded"


class EngineUnavailable(ServiceError):
    """The engine is starting, stopping or dead; another replica may serve the retry."""

    status_code = 503
    code = "engine_unavailable"


class DeadlineExceeded(ServiceError):
    status_code = 504
    code = "deadline_exceeded"


class EngineStartupError(RuntimeError):
    """The engine could not start (model missing, timeout): the replica fails to start."""


def error_body(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


# Compatibility APIs (DeepL, LibreTranslate) answer errors in their own shapes: a format maps
# (status, code, message) to the status and body that API documents.
ErrorFormat = Callable[[int, str, str], tuple[int, dict[str, Any]]]


def register_error_format(app: FastAPI, prefix: str, fmt: ErrorFormat) -> None:
    """Errors of requests under path ``prefix`` are shaped by ``fmt``."""
    if not hasattr(app.state, "error_formats"):
        app.state.error_formats = []
    app.state.error_formats.append((prefix.rstrip("/") + "/", fmt))


def _respond(
    request: Request,
    status: int,
    code: str,
    message: str,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    path = request.url.path
    app_state = getattr(request.scope.get("app"), "state", None)
    for prefix, fmt in getattr(app_state, "error_formats", []):
        if path.startswith(prefix):
            status, body = fmt(status, code, message)
            return JSONResponse(body, status_code=status, headers=headers)
    return JSONResponse(error_body(code, message), status_code=status, headers=headers)


def _request_id(request: Request) -> str:
    return str(getattr(request.state, "request_id", "-"))


def service_error_response(exc: ServiceError, request: Request) -> JSONResponse:
    """``exc`` as the answer to ``request``, in the shape of the API it was sent to (also
    for the middlewares that refuse a request before any route runs)."""
    if exc.status_code >= 500:
        logger.warning("request %s failed: %s (%s)", _request_id(request), exc.code, exc.message)
    headers = None
    if exc.retry_after_s is not None:
        headers = {"Retry-After": str(exc.retry_after_s)}
    return _respond(request, exc.status_code, exc.code, exc.message, headers)


def _validation_message(exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        if err.get("type") == "json_invalid":
            parts.append("body is not valid JSON")
            continue
        loc = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
        parts.append(f"{loc}: {err.get('msg', 'invalid')}")
    return "Invalid request: " + "; ".join(parts)


async def _on_service_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ServiceError)
    return service_error_response(exc, request)


async def _on_validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return _respond(request, 422, InvalidRequest.code, _validation_message(exc))


async def _on_http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 400:
        # FastAPI's "error parsing the body": not UTF-8, or not decodable at all.
        message = f"Invalid request: the body could not be parsed ({exc.detail})."
        return _respond(request, 422, InvalidRequest.code, message)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    return _respond(request, exc.status_code, code, str(exc.detail), exc.headers)


async def _on_unexpected(request: Request, exc: Exception) -> JSONResponse:
    request_id = _request_id(request)
    logger.exception("request %s failed unexpectedly", request_id, exc_info=exc)
    message = f"Internal error; quote request id {request_id} when reporting it."
    return _respond(request, 500, "internal_error", message)


def install_error_handlers(app: FastAPI) -> None:
    """Registers the one mapper for every error type on ``app``."""
    app.add_exception_handler(ServiceError, _on_service_error)
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(StarletteHTTPException, _on_http_error)
    app.add_exception_handler(Exception, _on_unexpected)
