"""A chat completion's messages are rendered and tokenized as the native API plans a text:
a short input on the event loop, a long one in the service's bounded planning pool, refused
at once (503 in OpenAI's error shape, Retry-After) while the characters waiting for that
pool pass its bound. They ran in Python's default executor, whose threads are not bounded
by the service: many large chat requests at once held as many threads, each fighting the
event loop for the GIL, and none was ever refused."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from serve_app.api.app import create_app
from serve_app.core.config import AppConfig
from serve_app.translation.families import Prompt
from serve_app.translation.service import TranslationService
from tests.fakes import FakeEngine
from tests.unit.api.test_openai_api import MODEL

# Two largest batches of 4,000 characters may wait for the pool: 8,000 characters.
LIMITS = {"max_text_chars": 4000, "max_batch_items": 1, "inline_plan_chars": 1000}
LARGE = 3000  # characters of a large request: above inline_plan_chars, two fit the pool


class GatedEncoder(FakeEngine):
    """Records the thread each prompt is encoded in; a large prompt waits for ``release``
    (a long template rendering holding its planning thread)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.threads: list[str] = []

    def encode(self, prompt: Prompt) -> list[int]:
        self.threads.append(threading.current_thread().name)
        ids = super().encode(prompt)
        if len(ids) >= LARGE:
            assert self.release.wait(10)
        return ids


@pytest.fixture
def engine() -> GatedEncoder:
    return GatedEncoder()


@pytest.fixture
async def served(engine: GatedEncoder) -> AsyncIterator[tuple[httpx.AsyncClient, Any]]:
    config = AppConfig.model_validate({"prompt": {"family": "chat"}, "limits": LIMITS})
    service = TranslationService(config, engine)
    await service.start()
    engine.threads.clear()  # the warm-up's
    transport = httpx.ASGITransport(app=create_app(service), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        yield client, service
    engine.release.set()
    service.shutdown()


def chat(chars: int) -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "user", "content": "x" * chars}]}


async def test_small_messages_are_encoded_on_the_loop_large_ones_in_the_pool(
    served: tuple[httpx.AsyncClient, Any], engine: GatedEncoder
) -> None:
    http, _ = served
    engine.release.set()
    assert (await http.post("/v1/chat/completions", json=chat(100))).status_code == 200
    r = await http.post("/v1/chat/completions", json=chat(LARGE))
    assert r.status_code == 200, r.text
    r = await http.post("/v1/responses", json={"model": MODEL, "input": "x" * LARGE})
    assert r.status_code == 200, r.text
    loop = threading.current_thread().name
    assert engine.threads[0] == loop
    assert [t.startswith("planner") for t in engine.threads[1:]] == [True, True]


async def test_large_requests_beyond_the_pool_queue_are_refused_at_once(
    served: tuple[httpx.AsyncClient, Any], engine: GatedEncoder
) -> None:
    """Two large requests fill the pool's bound (one encoding, one waiting, whatever the
    pool's size); a third large one is refused, chat completions and responses alike,
    without being encoded; a short one is still answered."""
    http, service = served
    first = [
        asyncio.create_task(http.post("/v1/chat/completions", json=chat(LARGE))) for _ in (0, 1)
    ]
    async with asyncio.timeout(5):
        while service.planner.pending_chars < 2 * LARGE:
            await asyncio.sleep(0.005)
    encoded = len(engine.threads)
    for path, body in [
        ("/v1/chat/completions", chat(LARGE)),
        ("/v1/chat/completions", chat(LARGE) | {"stream": True}),
        ("/v1/responses", {"model": MODEL, "input": "x" * LARGE}),
    ]:
        r = await http.post(path, json=body)
        assert r.status_code == 503, r.text
        assert r.headers["retry-after"] == str(service.limits.retry_after_s)
        error = r.json()["error"]
        assert (error["type"], error["code"]) == ("server_error", "overloaded")
    assert len(engine.threads) == encoded  # refused before any work
    assert (await http.post("/v1/chat/completions", json=chat(100))).status_code == 200
    engine.release.set()
    assert [(await t).status_code for t in first] == [200, 200]
    assert service.planner.pending_chars == 0


class SlowEncoder(FakeEngine):
    """A large prompt takes ``ENCODE_S`` to encode (a long template rendering); every
    generation is held (an engine that never answers in time)."""

    def __init__(self) -> None:
        super().__init__()
        self.hold = asyncio.Event()

    def encode(self, prompt: Prompt) -> list[int]:
        ids = super().encode(prompt)
        if len(ids) >= LARGE:
            time.sleep(ENCODE_S)  # in a planning thread
        return ids


TIMEOUT_S = 1.0  # limits.request_timeout_s
ENCODE_S = 0.8


@pytest.mark.parametrize("stream", [False, True])
async def test_encoding_and_completion_share_the_requests_deadline(stream: bool) -> None:
    """The encoding (0.8 s) and the completion had a deadline each (1 s from when each
    began), so a request that the engine did not answer ended after 1.8 s, not 1 s. Now
    the completion ends at the request's deadline, counted from its arrival (a 504, or the
    stream's error event), and its engine request is aborted."""
    engine = SlowEncoder()
    limits = {**LIMITS, "request_timeout_s": TIMEOUT_S}
    config = AppConfig.model_validate({"prompt": {"family": "chat"}, "limits": limits})
    service = TranslationService(config, engine)
    await service.start()
    transport = httpx.ASGITransport(app=create_app(service), raise_app_exceptions=False)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
            began = time.monotonic()
            r = await http.post("/v1/chat/completions", json=chat(LARGE) | {"stream": stream})
            took = time.monotonic() - began
    finally:
        service.shutdown()
    if stream:
        assert r.status_code == 200
        assert '"code": "deadline_exceeded"' in r.text, r.text
    else:
        assert r.status_code == 504, r.text
    assert engine.requests, "the completion was started"
    assert engine.cancelled, "its engine request was aborted"
    assert TIMEOUT_S <= took < TIMEOUT_S + ENCODE_S / 2, took
