"""The headers Ray's proxy would answer 500 to are cleaned before it reads them, the answers
Ray writes itself get the app's security headers, and Ray's HTTP servers serve HTTP only."""

from __future__ import annotations

import asyncio
import json

import pytest
import uvicorn
from fastapi import FastAPI
from ray.serve._private import http_util
from ray.serve._private.http_util import (
    _apply_middlewares,
    configure_http_middlewares,
    convert_object_to_asgi_messages,
    start_asgi_http_server,
)
from ray.serve.config import HTTPOptions
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bench.ports import free_port
from serve_app.api.headers import ALWAYS, API_POLICY, SecurityHeadersMiddleware
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


def test_rays_request_hints_are_dropped_when_not_utf8() -> None:
    """Ray decodes them before any route runs: ``x-request-timeout-seconds: \\xff`` was a
    500 from its proxy and from the replica's own HTTP server."""
    headers = [
        (b"x-request-timeout-seconds", b"\xff"),
        (b"X-Request-Disconnect-Disabled", b"?\xc3"),
        (b"x-request-timeout-seconds", b"30"),
        (b"x-other", b"\xff"),
    ]
    assert clean_headers(headers) == headers[2:]


def test_rays_hints_that_take_a_guarantee_away_are_the_operators() -> None:
    """Ray reads them from any client: ``x-request-disconnect-disabled: ?1`` kept a request
    running after its client went, a timeout of 0 or less turned Ray's timeout off. A
    positive timeout (a client's own, shorter or longer) stays."""
    dropped = [
        (b"x-request-disconnect-disabled", b"?1"),
        (b"X-Request-Disconnect-Disabled", b"?0"),
        *((b"x-request-timeout-seconds", v) for v in (b"0", b"-1", b"nan", b"inf", b"", b"1s")),
    ]
    kept = [(b"x-request-timeout-seconds", b"0.5"), (b"X-Request-Timeout-Seconds", b"1e3")]
    assert clean_headers([*dropped, *kept]) == kept


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


def _answer_through_rays_stack(app: ASGIApp, path: str = "/x") -> list[tuple[bytes, bytes]]:
    """The headers ``app``'s answer has once wrapped as Ray's proxy (and the replica's own
    HTTP server) wraps its ASGI app: Ray's middlewares, then the callback's."""
    options = configure_http_middlewares(HTTPOptions())
    wrapped = _apply_middlewares(app, options.middlewares)
    started: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            started.append(message)

    scope = {"type": "http", "method": "GET", "path": path, "headers": [], "query_string": b""}
    asyncio.run(wrapped(scope, receive, send))
    return [(bytes(k).lower(), bytes(v)) for k, v in started[0]["headers"]]


@pytest.fixture
def callback(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray's proxy configured as ``launcher.ray_env`` configures it (uvicorn's defaults,
    which the callback changes, restored after the test)."""
    monkeypatch.setattr(http_util, "RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH", IMPORT_PATH)
    monkeypatch.setitem(uvicorn.config.WS_PROTOCOLS, "auto", uvicorn.config.WS_PROTOCOLS["auto"])


@pytest.mark.parametrize(
    ("status", "extra"), [(404, []), (503, [(b"retry-after", b"1")]), (500, []), (408, [])]
)
def test_rays_own_answers_get_the_security_headers_once(
    callback: None, status: int, extra: list[tuple[bytes, bytes]]
) -> None:
    async def ray_answer(scope: Scope, receive: Receive, send: Send) -> None:
        for message in convert_object_to_asgi_messages("no", status, extra_headers=extra):
            await send(message)

    headers = _answer_through_rays_stack(ray_answer)
    expected = {k.lower().encode(): v.encode() for k, v in ALWAYS.items()}
    expected[b"content-security-policy"] = API_POLICY.encode()
    for name, value in expected.items():
        assert headers.count((name, value)) == 1, (name, headers)
    assert [name for name, _ in headers].count(b"content-security-policy") == 1
    assert (b"content-type", b"text/plain; charset=utf-8") in headers
    assert all(h in headers for h in extra)


def test_the_apps_answers_pass_unchanged(callback: None) -> None:
    """The app's answers have the headers: none is added twice, and its API docs (no policy,
    Swagger's scripts come from a CDN) get none."""
    app = FastAPI()
    app.add_middleware(SecurityHeadersMiddleware, own_scripts=["/docs"])

    for path in ("/docs", "/missing"):
        alone = _answer_through_rays_stack(app, path)
        names = [name for name, _ in alone]
        assert len(names) == len(set(names)), alone
        assert names.count(b"x-content-type-options") == 1
        has_policy = b"content-security-policy" in names
        assert has_policy == (path != "/docs")


WEBSOCKET = (
    b"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
)


async def _first_answer(port: int, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    try:
        return await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    except TimeoutError:
        return b""
    finally:
        writer.close()


async def _answers_from_rays_http_server(requests: list[bytes]) -> list[bytes]:
    """What the HTTP server Ray builds for its proxy and its replicas answers (its ASGI app a
    FastAPI app with one HTTP route), configured by the callback as in production."""
    app = FastAPI()

    @app.post("/translate")
    async def translate(body: dict[str, str]) -> dict[str, str]:
        return body

    port = free_port()
    options = configure_http_middlewares(HTTPOptions(host="127.0.0.1", port=port))
    task, server = await start_asgi_http_server(app, options, event_loop=asyncio.get_running_loop())
    await asyncio.sleep(0.5)
    try:
        return [await _first_answer(port, r) for r in requests]
    finally:
        server.should_exit = True
        await task


def test_an_upgrade_to_websocket_is_answered_as_http(callback: None) -> None:
    """uvicorn's WebSocket handshake never answered an upgrade request with a body (the
    connection stayed open, no byte sent) and refused the others in plain text; the app serves
    no WebSocket, so Ray's HTTP server now serves HTTP only and the app answers them."""
    body = json.dumps({"text": "hi"}).encode()
    head = b"POST /translate HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
    requests = [
        head + WEBSOCKET + b"Content-Length: %d\r\n\r\n" % len(body) + body,
        head + WEBSOCKET + b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"GET /translate HTTP/1.1\r\nHost: t\r\n" + WEBSOCKET + b"\r\n",
    ]
    answers = asyncio.run(_answers_from_rays_http_server(requests))
    # uvicorn reads no body after an upgrade's headers: the route finds none (its 422).
    assert answers[0].startswith(b"HTTP/1.1 422 "), answers
    assert answers[1].startswith(b"HTTP/1.1 422 "), answers
    assert answers[2].startswith(b"HTTP/1.1 405 "), answers
    assert all(b"content-type: application/json" in a for a in answers), answers
