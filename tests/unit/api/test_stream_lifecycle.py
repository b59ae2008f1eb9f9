"""Streams at the edges of their life: a client that leaves before its body is read gives
its admission slot and engine request back when the response ends (not when a garbage
collection happens to find the stream), and streams beyond capacity are 503s on every API.

``POST /translate/stream`` starts its producer (admitted, its engine request running)
before it answers, so that a refusal is an HTTP status. A client gone while the response's
start was being sent left the body never started; nothing closed it, and the producer held
its slot and decoded for nobody until a cycle collection (or the engine's end). Driven over
raw ASGI, as a server does: ``http.disconnect`` is there at once, and sending the start
takes a turn of the loop.
"""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from serve_app.api.app import create_app
from serve_app.core.config import AppConfig
from serve_app.translation.service import TranslationService
from tests.asgi import chat_app_client
from tests.fakes import FakeEngine

pytestmark = pytest.mark.unit

MODEL = "tencent/HY-MT1.5-1.8B"
BODY = json.dumps({"text": "hello world", "source_lang": "en", "target_lang": "de"}).encode()


@pytest.fixture
def no_gc() -> Iterator[None]:
    """Cycles stay uncollected during the test: what is released must be released by the
    response itself."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _scope() -> dict[str, Any]:
    """The scope of uvicorn's HTTP servers (ASGI spec 2.3: Starlette listens for the
    disconnect while it streams), as Ray Serve's replicas get."""
    return {
        "type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1", "method": "POST", "scheme": "http",
        "path": "/translate/stream", "raw_path": b"/translate/stream", "query_string": b"",
        "root_path": "", "client": ("127.0.0.1", 1), "server": ("t", 80),
        "headers": [(b"host", b"t"), (b"content-type", b"application/json"),
                    (b"content-length", str(len(BODY)).encode())],
    }  # fmt: skip


async def test_a_client_gone_before_the_body_was_read_holds_no_slot(no_gc: None) -> None:
    engine = FakeEngine()
    engine.hold = asyncio.Event()  # the engine would decode for a long time
    service = TranslationService(AppConfig.model_validate({"prompt": {"family": "chat"}}), engine)
    await service.start()
    app = create_app(service)
    messages = [{"type": "http.request", "body": BODY, "more_body": False}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        await asyncio.sleep(0)  # the start is on its way: the disconnect is seen meanwhile

    await app(_scope(), receive, send)
    assert sent[0]["type"] == "http.response.start"
    assert sent[0]["status"] == 200
    assert service.admission.in_flight == 0  # before the fix: 1, until a gc.collect()
    assert not engine.active
    engine.hold.set()
    await app(_scope(), receive, send)  # the next is served
    assert service.admission.in_flight == 0


STREAMS = {
    "/v1/chat/completions": {"model": MODEL, "stream": True,
                             "messages": [{"role": "user", "content": "Hello, world!"}]},
    "/v1/responses": {"model": MODEL, "stream": True, "input": "Hello, world!"},
    "/translate/stream": {"text": "Hello, world!", "source_lang": "en", "target_lang": "de"},
}  # fmt: skip


@pytest.mark.parametrize("path", sorted(STREAMS))
async def test_streams_beyond_capacity_are_503s_not_200s_with_an_error_event(path: str) -> None:
    """Ten streams at once on a replica of two engine requests, the two admitted held in the
    engine: the other eight are 503 ``overloaded`` with Retry-After. OpenAI's streams were
    admitted only once their body was read, after all ten had passed the check: eight 200s
    whose only event was the error, which no OpenAI client retries."""
    engine = FakeEngine()
    engine.hold = asyncio.Event()
    limits = {"max_engine_requests": 2, "max_batch_items": 2}
    async with chat_app_client(engine, limits=limits) as client:
        tasks = {asyncio.create_task(client.post(path, json=STREAMS[path])) for _ in range(10)}
        done: set[asyncio.Task[httpx.Response]] = set()
        while len(done) < 8:  # the two admitted wait in the engine until it is let go
            finished, _ = await asyncio.wait(tasks - done, return_when=asyncio.FIRST_COMPLETED)
            done |= finished
        refused = [t.result() for t in done]
        engine.hold.set()
        served = [await t for t in tasks - done]
    assert [r.status_code for r in refused] == [503] * 8, [r.text for r in refused]
    assert all(r.headers["retry-after"] for r in refused)
    assert all("overloaded" in r.text for r in refused)
    assert [r.status_code for r in served] == [200, 200]
    assert not any("overloaded" in r.text for r in served)
