"""A streamed translation whose client leaves before its body is read: the admission slot
and the engine request are given back when the response ends, not when a garbage
collection happens to find the stream.

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

import pytest

from serve_app.api.app import create_app
from serve_app.core.config import AppConfig
from serve_app.translation.service import TranslationService
from tests.fakes import FakeEngine

pytestmark = pytest.mark.unit

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
