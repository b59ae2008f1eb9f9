from __future__ import annotations

import json
from pathlib import Path

import pytest
from starlette.requests import Request

from serve_app.api.errors import service_error_response
from serve_app.core.errors import (
    BatchTooLarge,
    DeadlineExceeded,
    EngineUnavailable,
    InvalidLanguageCode,
    Overloaded,
    ServiceError,
    StoreUnavailable,
    TextTooLong,
    UnsupportedLanguage,
    UnsupportedLanguagePair,
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


@pytest.mark.parametrize("error", [Overloaded, EngineUnavailable, StoreUnavailable])
def test_every_503_says_when_to_retry(error: type[ServiceError]) -> None:
    """A 503 raised without a time of its own (the PostgreSQL store's lost connection was
    one, seen through `serve run`) still carries Retry-After; one given is kept."""
    assert service_error_response(error("down"), REQUEST).headers["retry-after"] == "1"
    given = service_error_response(error("down", retry_after_s=7), REQUEST)
    assert given.headers["retry-after"] == "7"
    assert "retry-after" not in service_error_response(DeadlineExceeded("late"), REQUEST).headers


def test_runtime_errors_are_not_client_errors() -> None:
    assert not issubclass(RuntimeError, ServiceError)


def test_every_error_type_has_a_status_and_no_http_in_the_taxonomy() -> None:
    import serve_app.core.errors as taxonomy
    from serve_app.api.errors import STATUS

    for name in dir(taxonomy):
        obj = getattr(taxonomy, name)
        if isinstance(obj, type) and issubclass(obj, ServiceError):
            assert obj in STATUS, f"{name} has no HTTP status in api/errors.STATUS"
            assert not hasattr(obj, "status_code")
    source = Path(taxonomy.__file__ or "").read_text()
    assert "fastapi" not in source
    assert "starlette" not in source
