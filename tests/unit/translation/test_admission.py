"""Admission counts every engine request: re-split retries of a piece that ran out of tokens
included, so a replica never holds more than ``max_engine_requests``; engine request ids are
unique per request whatever id the client sent."""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

import pytest

from serve_app.core.config import AppConfig
from serve_app.core.errors import Overloaded
from serve_app.core.schemas import TranslateRequest
from serve_app.engine.protocol import Generation, GenerationRequest
from serve_app.translation.admission import Admission
from serve_app.translation.service import TranslationService
from tests.fakes import FakeEngine, RecordingMetrics

TEXT = "Alpha beta. Gamma delta."


class SlowEngine(FakeEngine):
    """Each generation takes a while (requests overlap); records the most at once and ids."""

    def __init__(self) -> None:
        super().__init__()
        self.running = 0
        self.peak = 0
        self.ids: list[str] = []

    async def generate(self, request: GenerationRequest, request_id: str) -> Generation:
        self.ids.append(request_id)
        self.running += 1
        self.peak = max(self.peak, self.running)
        try:
            await asyncio.sleep(0.02)
            return await super().generate(request, request_id)
        finally:
            self.running -= 1


async def _service(engine: FakeEngine, limit: int) -> TranslationService:
    args: dict[str, Any] = {
        "engine": {"model": "fake", "warmup_requests": 0},  # the engines count every request
        "prompt": {"family": "chat"},
        "limits": {"max_input_tokens": 50, "max_batch_items": 1, "max_engine_requests": limit},
        "cache": {"enabled": False},
    }
    service = TranslationService(AppConfig.model_validate(args), engine, RecordingMetrics())
    await service.start()
    return service


async def test_resplit_retries_never_pass_the_engine_request_bound() -> None:
    """Two requests of one piece each fill a replica of 2; each piece runs out of tokens and
    is re-split into two halves. Uncounted, 4 engine requests ran at once; now the halves
    wait for slots, and both requests are still answered in full."""
    engine = SlowEngine()
    engine.truncate_marker = TEXT  # the whole piece runs out; its halves do not
    service = await _service(engine, limit=2)
    seen: list[int] = []

    async def watch() -> None:
        while True:
            seen.append(service.in_flight)
            await asyncio.sleep(0.001)

    watcher = asyncio.create_task(watch())
    item = {"text": TEXT, "source_lang": "en", "target_lang": "de"}
    responses = await asyncio.gather(
        *(service.translate(TranslateRequest(**item), f"r{i}") for i in range(2))
    )
    watcher.cancel()
    assert [r.truncated for r in responses] == [False, False]
    assert len(engine.ids) == 6  # each: the piece, then its two halves
    assert engine.peak <= 2
    assert max(seen) <= 2
    assert service.in_flight == 0


async def test_a_waiting_retry_goes_before_new_requests() -> None:
    """While an admitted request's retry waits for a slot, new requests are refused (503),
    and the retry gets the next slot freed."""
    admission = Admission(2, RecordingMetrics(), retry_after_s=1)
    with admission.admit(2):
        async with admission.slot(), admission.slot():
            assert admission.in_flight == 2

            async def extra() -> None:
                async with admission.slot():
                    assert admission.in_flight <= 2

            # a task of its own: outside the lease, so it needs a slot of the replica's
            waiting = asyncio.create_task(extra(), context=contextvars.Context())
            await asyncio.sleep(0.01)
            assert admission.waiting == 1
        with pytest.raises(Overloaded):  # the lease still holds both slots
            admission.check(1)
        await asyncio.sleep(0.01)
        assert not waiting.done()
    await asyncio.wait_for(waiting, 1)  # the lease ended: its slots went to the retry
    assert admission.in_flight == 0


async def test_same_client_request_id_twice_gives_distinct_engine_ids() -> None:
    engine = FakeEngine()
    engine.hold = asyncio.Event()
    service = await _service(engine, limit=4)
    item = {"text": "Hello there", "source_lang": "en", "target_lang": "de"}
    tasks = [
        asyncio.create_task(service.translate(TranslateRequest(**item), "same-id"))
        for _ in range(2)
    ]
    async with asyncio.timeout(5):
        while len(engine.active) < 2:  # a shared id would be one engine request
            await asyncio.sleep(0.001)
    assert all(i.startswith("same-id") for i in engine.active)
    engine.hold.set()
    await asyncio.gather(*tasks)
