from __future__ import annotations

import json

import pytest
from starlette.requests import Request

from serve_app.errors import (
    BatchTooLarge,
    DeadlineExceeded,
    EngineUnavailable,
    InvalidLanguageCode,
    Overloaded,
    ServiceError,
    TextTooLong,
    UnsupportedLanguage,
    UnsupportedLanguagePair,
    service_error_response,
)

REQUEST = Request({"type": "http", "method": "POST", "path": "/translate", "headers": []})


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (InvalidLanguageCode, 400, "invalid_language_code"),
        (UnsupportedLanguage, 400, "unsupported_language"),
        (UnsupportedLanguagePair, 400, "unsupported_language_pair"),
        (TextTooLong, 413, "text_too_long"),
        (BatchTooLarge, 413, "batch_too_large"),
        (Overloaded, 503, "overloaded"),
        (EngineUnavailable, 503, "engine_unavailable"),
        (DeadlineExceeded, 504, "deadline_exceeded"),
    ],
)
def test_each_error_maps_to_its_status(error: type[ServiceError], status: int, code: str) -> None:
    response = service_error_response(error("what happened"), REQUEST)
    assert response.status_code == status
    assert json.loads(bytes(response.body)) == {"error": {"code": code, "message": "what happened"}}


def test_retry_after_is_sent_when_given() -> None:
    response = service_error_response(Overloaded("busy", retry_after_s=3), REQUEST)
    assert response.headers["retry-after"] == "3"
    assert "retry-after" not in service_error_response(TextTooLong("long"), REQUEST).headers


def test_runtime_errors_are_not_client_errors() -> None:
    assert not issubclass(RuntimeError, ServiceError)
