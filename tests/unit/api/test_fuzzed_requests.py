"""The HTTP API fuzzed from its own OpenAPI schema (schemathesis): valid and invalid bodies,
types and encodings for every operation, the compatibility APIs' with the request bodies
they document (``api/compat/schemas.py``: JSON and form). No case may get a 5xx (but the
504 of a deadline the client chose too short, e.g. ``timeout_s: 5e-324``: that is the
answer it asked for); every answer must be one the schema documents, with the documented
JSON shape. Runs over the fake engine (fast); the hand-written cases run end to end in
tests/e2e/test_bad_input.py, the hostile ones (tests/hostile.py) in
tests/e2e/test_hostile_requests.py."""

from __future__ import annotations

import asyncio
import json

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from serve_app.api.app import create_app
from serve_app.core.config import AppConfig
from serve_app.translation.service import TranslationService
from tests.fakes import FakeEngine

DEEPL_AUTH = {"Authorization": "DeepL-Auth-Key fuzz"}
ARGS = {"limits": {"max_input_tokens": 64, "max_batch_items": 8, "max_engine_requests": 64}}


def api_schema() -> schemathesis.BaseSchema:
    service = TranslationService(AppConfig.model_validate(ARGS), FakeEngine())
    asyncio.run(service.start())
    return schemathesis.openapi.from_asgi("/openapi.json", create_app(service))


schema = api_schema()


@schemathesis.check
def no_server_error(
    ctx: schemathesis.CheckContext, response: schemathesis.Response, case: schemathesis.Case
) -> bool | None:
    if response.status_code < 500:
        return None
    body = json.loads(response.content or b"{}")
    if response.status_code == 504 and body["error"]["code"] == "deadline_exceeded":
        assert case.body["timeout_s"] < 1, case.body  # only a deadline the client set
        return True
    raise AssertionError(f"{response.status_code}: {response.content[:300]!r}")


@schema.parametrize()
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
def test_api_never_answers_5xx_and_keeps_its_schema(case: schemathesis.Case) -> None:
    case.call_and_validate(
        headers=DEEPL_AUTH,  # DeepL's routes want one (the native ones run without keys)
        checks=[
            no_server_error,
            status_code_conformance,
            content_type_conformance,
            response_schema_conformance,
        ],
    )
