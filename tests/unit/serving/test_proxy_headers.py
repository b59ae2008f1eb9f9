"""The headers Ray's proxy would answer 500 to are cleaned before it reads them."""

from __future__ import annotations

import asyncio

from starlette.types import Message, Scope

from serve_app.serving.proxy_headers import IMPORT_PATH, CleanHeadersMiddleware, clean_headers
from serve_app.tools.launcher import PROXY_CALLBACK, ray_env


def test_request_ids_not_utf8_or_invalid_are_dropped_and_the_first_valid_one_kept() -> None:
    headers = [
        (b"x-request-id", b"\xff\xfe"),
        (b"x-request-id", b"x" * 100),
        (b"X-Request-ID", b"ok-1"),
        (b"x-request-id", b"ok-2"),
        (b"authorization", b"DeepL-Auth-Key \xff"),
    ]
    assert clean_headers(headers) == [(b"X-Request-ID", b"ok-1"), headers[-1]]


def test_serve_headers_that_ray_decodes_are_dropped_when_not_utf8() -> None:
    headers = [
        (b"serve_multiplexed_model_id", b"\xff"),
        (b"Serve-Multiplexed-Model-Id", b"m\xc3\x28"),
        (b"serve_session_id", b"\xed\xa0\x80"),
        (b"serve_multiplexed_model_id", "é".encode()),
    ]
    assert clean_headers(headers) == [headers[-1]]


def test_the_middleware_passes_the_cleaned_scope_on() -> None:
    seen: list[Scope] = []

    async def app(scope: Scope, receive: object, send: object) -> None:
        seen.append(scope)

    async def receive() -> Message:
        return {"type": "http.request"}

    async def send(message: Message) -> None:
        pass

    scope = {"type": "http", "headers": [(b"x-request-id", b"\xff")]}
    asyncio.run(CleanHeadersMiddleware(app)(scope, receive, send))
    assert seen[0]["headers"] == []


def test_the_launcher_exports_the_callback_for_rays_proxy() -> None:
    config = {"applications": [{"runtime_env": {"env_vars": {"RAY_SERVE_X": "1", "OTHER": "2"}}}]}
    env = ray_env(config)
    assert env == {"RAY_SERVE_X": "1", "RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH": IMPORT_PATH}
    assert PROXY_CALLBACK == IMPORT_PATH
