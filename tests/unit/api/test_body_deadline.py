"""The body deadline (``api/body_deadline.py``): a body that does not arrive in time is a 408
in the called API's shape with ``Connection: close``, whether a middleware or the route
reads it; a body that arrives in time, and a response streamed after its body, are not
touched."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from starlette.types import Message

from serve_app.api.app import create_app
from serve_app.api.body_deadline import BodyDeadlineMiddleware, declared_length
from serve_app.core.config import AppConfig
from serve_app.core.documents_config import DocumentsConfig
from serve_app.documents.replica import ReplicaDocuments
from serve_app.store.sqlite import open_sqlite
from serve_app.translation.service import TranslationService
from tests.fakes import FakeEngine

TIMEOUT_S = 0.2
ITEM = {"text": "Hello", "source_lang": "en", "target_lang": "de"}
DEEPL = [(b"authorization", b"DeepL-Auth-Key k")]
BOUNDARY = "bnd"
UPLOAD = (
    f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="target_lang"\r\n\r\nde\r\n'
    f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n'
    f"Content-Type: text/plain\r\n\r\nHello.\r\n--{BOUNDARY}--\r\n"
).encode()
MULTIPART = f"multipart/form-data; boundary={BOUNDARY}".encode()


class Answer:
    def __init__(self, messages: list[Message]) -> None:
        start = next(m for m in messages if m["type"] == "http.response.start")
        self.status = int(start["status"])
        self.headers = {k.decode().lower(): v.decode() for k, v in start["headers"]}
        self.body = b"".join(m.get("body", b"") for m in messages if "body" in m)

    def json(self) -> Any:
        return json.loads(self.body)


async def call(
    app: Any,
    path: str,
    body: bytes,
    content_type: bytes | None = b"application/json",
    sent: int | None = None,
    chunked: bool = False,
    extra: list[tuple[bytes, bytes]] | None = None,
    pause_s: float | None = None,
) -> Answer:
    """POSTs ``body`` to ``app``: its first ``sent`` bytes at once, then nothing more (the
    client stalls), or after ``pause_s`` the rest; with ``chunked``, no Content-Length."""
    headers = [(b"host", b"t"), *(extra or [])]
    if content_type is not None:
        headers.append((b"content-type", content_type))
    if not chunked:
        headers.append((b"content-length", str(len(body)).encode()))
    else:
        headers.append((b"transfer-encoding", b"chunked"))
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
        "headers": headers, "client": ("127.0.0.1", 1), "server": ("t", 80),
    }  # fmt: skip
    cut = len(body) if sent is None else sent
    pending = [{"type": "http.request", "body": body[:cut], "more_body": cut < len(body)}]
    rest = body[cut:]

    async def receive() -> Message:
        nonlocal rest
        if pending:
            return pending.pop(0)
        if rest and pause_s is not None:
            await asyncio.sleep(pause_s)
            out, rest = rest, b""
            return {"type": "http.request", "body": out, "more_body": False}
        await asyncio.sleep(3600)  # a stalled client, or one waiting for the answer
        return {"type": "http.disconnect"}

    messages: list[Message] = []

    async def send(message: Message) -> None:
        messages.append(message)

    await asyncio.wait_for(app(scope, receive, send), 10)
    return Answer(messages)


async def make_app(tmp_path: Any, timeout_s: float = TIMEOUT_S, hold: bool = False) -> Any:
    engine = FakeEngine()
    if hold:
        engine.hold = asyncio.Event()
    config = AppConfig.model_validate(
        {
            "prompt": {"family": "chat"},
            "security": {"body_timeout_s": timeout_s, "body_min_bytes_per_s": 1 << 20},
        }
    )
    service = TranslationService(config, engine)
    await service.start()
    store = await open_sqlite(str(tmp_path / "store.db"))
    documents = ReplicaDocuments(service, store, DocumentsConfig(), "replica-1")
    app = create_app(service, store=store, documents=documents)
    app.state.test_engine = engine
    app.state.test_close = (documents, store)
    return app


@pytest.fixture
async def app(tmp_path: Any) -> AsyncIterator[Any]:
    app = await make_app(tmp_path)
    yield app
    documents, store = app.state.test_close
    await documents.stop()
    await store.close()


JSON = json.dumps(ITEM).encode()
FORM = b"text=Hello&target_lang=DE"
FORM_TYPE = b"application/x-www-form-urlencoded"
OPENAI = json.dumps(
    {"model": "m", "messages": [{"role": "user", "content": "Translate to German: Hi"}]}
).encode()
# (path, body, content type, extra headers, the API's shape)
STALLED = [
    ("/translate", JSON, b"application/json", [], "native"),
    ("/translate/stream", JSON, b"application/json", [], "native"),
    ("/v2/translate", FORM, FORM_TYPE, DEEPL, "deepl"),
    ("/v2/translate", JSON, b"application/json", DEEPL, "deepl"),
    ("/libretranslate/translate", FORM, FORM_TYPE, [], "libre"),
    ("/libretranslate/translate", JSON, b"application/json", [], "libre"),
    ("/v1/chat/completions", OPENAI, b"application/json", [], "openai"),
    ("/documents", UPLOAD, MULTIPART, [], "native"),
    ("/v2/document", UPLOAD, MULTIPART, DEEPL, "deepl"),
    ("/libretranslate/translate_file", UPLOAD, MULTIPART, [], "libre"),
]


def assert_timeout_shape(answer: Answer, api: str) -> None:
    assert answer.status == 408, (answer.status, answer.body)
    assert answer.headers["connection"] == "close"
    payload = answer.json()
    if api == "deepl":
        assert set(payload) == {"message"}
        assert "did not arrive in time" in payload["message"]
    elif api == "libre":
        assert set(payload) == {"error"}
        assert "did not arrive in time" in payload["error"]
    elif api == "openai":
        assert payload["error"]["code"] == "request_timeout"
        assert payload["error"]["type"] == "invalid_request_error"
    else:
        assert payload["error"]["code"] == "request_timeout"


@pytest.mark.parametrize("chunked", [False, True])
@pytest.mark.parametrize(("path", "body", "ctype", "extra", "api"), STALLED)
async def test_a_stalled_body_is_a_408_in_the_apis_shape(
    app: Any,
    path: str,
    body: bytes,
    ctype: bytes | None,
    extra: list[tuple[bytes, bytes]],
    api: str,
    chunked: bool,
) -> None:
    start = time.monotonic()
    answer = await call(app, path, body, ctype, sent=5, chunked=chunked, extra=extra)
    assert time.monotonic() - start < TIMEOUT_S + 2
    assert_timeout_shape(answer, api)


async def test_a_stalled_body_not_declared_as_json_is_refused_at_once(app: Any) -> None:
    """A JSON route cannot read a body without a JSON content type (FastAPI 0.136): it is
    refused before a byte of it is read, so a stalled one holds no place either (waiting
    for it, the deadline's 408 would come first)."""
    answer = await call(app, "/translate", JSON, None, sent=5)
    assert answer.status == 422, answer.body
    assert "Content-Type: application/json" in answer.json()["error"]["message"]


async def test_a_body_that_arrives_in_time_is_served(app: Any) -> None:
    answer = await call(app, "/translate", JSON, sent=5, pause_s=TIMEOUT_S / 4)
    assert answer.status == 200, answer.body
    assert "connection" not in answer.headers
    upload = await call(app, "/documents", UPLOAD, MULTIPART, sent=5, pause_s=TIMEOUT_S / 4)
    assert upload.status == 201, upload.body


async def test_a_stream_outlives_the_body_deadline_once_its_body_is_in(tmp_path: Any) -> None:
    """A streaming response waits on ``receive`` for the client's disconnect for as long as
    it streams: the deadline ends with the body."""
    app = await make_app(tmp_path, hold=True)
    try:
        engine = app.state.test_engine
        asyncio.get_running_loop().call_later(TIMEOUT_S * 3, engine.hold.set)
        answer = await call(app, "/translate/stream", JSON)
        assert answer.status == 200, answer.body
        assert b"event: done" in answer.body or b"done" in answer.body
    finally:
        documents, store = app.state.test_close
        await documents.stop()
        await store.close()


async def test_the_deadline_grows_with_the_declared_size() -> None:
    mw = BodyDeadlineMiddleware(None, timeout_s=10, min_rate=1000)  # type: ignore[arg-type]
    assert mw.deadline(100.0, None, 0) == 110.0
    assert mw.deadline(100.0, 5000, 0) == 115.0
    assert mw.deadline(100.0, None, 2000) == 112.0  # chunked: what came so far


def test_declared_length_reads_only_a_plain_number() -> None:
    def scope(*values: bytes) -> dict[str, Any]:
        return {"headers": [(b"content-length", v) for v in values]}

    assert declared_length(scope(b"12")) == 12
    assert declared_length(scope(b"-1")) is None
    assert declared_length(scope(b"9" * 40)) is None
    assert declared_length({"headers": []}) is None


async def test_a_bare_app_answers_408_natively_and_passes_the_rest_through() -> None:
    """The middleware alone, over an app that reads its body with Starlette."""
    from starlette.requests import Request
    from starlette.responses import PlainTextResponse

    async def echo(scope: Any, receive: Any, send: Any) -> None:
        body = await Request(scope, receive).body()
        await PlainTextResponse(body.decode())(scope, receive, send)

    mw = BodyDeadlineMiddleware(echo, timeout_s=TIMEOUT_S, min_rate=1 << 20)
    stalled = await call(mw, "/x", b"0123456789", sent=3)
    assert stalled.status == 408
    assert stalled.headers["connection"] == "close"
    assert stalled.json()["error"]["code"] == "request_timeout"
    ok = await call(mw, "/x", b"0123456789", sent=3, pause_s=TIMEOUT_S / 4)
    assert (ok.status, ok.body) == (200, b"0123456789")
