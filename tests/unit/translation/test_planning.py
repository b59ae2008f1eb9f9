"""Planning (detection, cache key, tokenization, splitting, prompts) runs off the event loop,
under the request's deadline, after a cheap admission check; the caller's API key follows
the work into the planning threads."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from serve_app.core.config import AppConfig
from serve_app.core.context import current_key
from serve_app.core.errors import DeadlineExceeded, Overloaded
from serve_app.core.schemas import BatchTranslateRequest, TranslateRequest
from serve_app.translation.service import TranslationService
from tests.fakes import FakeEngine, RecordingMetrics

ARGS: dict[str, Any] = {
    "prompt": {"family": "chat"},
    "limits": {"max_input_tokens": 20, "max_batch_items": 4, "max_engine_requests": 400},
}


class SlowTokenizer(FakeEngine):
    """Each token count takes ``delay`` seconds of a thread's time (a long text's
    tokenization); ``calls`` counts them."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay
        self.calls = 0
        self.lock = threading.Lock()

    def count_tokens(self, text: str) -> int:
        with self.lock:
            self.calls += 1
        time.sleep(self.delay)
        return super().count_tokens(text)


async def _service(engine: FakeEngine, **limits: Any) -> TranslationService:
    args = {**ARGS, "limits": {**ARGS["limits"], **limits}}
    service = TranslationService(AppConfig.model_validate(args), engine, RecordingMetrics())
    await service.start()
    return service


def _item(words: int, **extra: Any) -> dict[str, Any]:
    text = " ".join(f"w{i}" for i in range(words))
    return {"text": text, "source_lang": "en", "target_lang": "de", **extra}


async def _largest_gap(task: asyncio.Task[Any]) -> float:
    """The longest the event loop went without running this heartbeat while ``task`` ran."""
    gap, last = 0.0, time.perf_counter()
    while not task.done():
        await asyncio.sleep(0.002)
        now = time.perf_counter()
        gap, last = max(gap, now - last), now
    return gap


async def test_planning_does_not_block_the_event_loop() -> None:
    """A batch of long texts takes about a second to plan; the loop keeps running."""
    engine = SlowTokenizer(delay=0.002)
    service = await _service(engine)
    batch = BatchTranslateRequest(items=[_item(120) for _ in range(4)])
    task = asyncio.create_task(service.translate_batch(batch, "b"))
    gap = await _largest_gap(task)
    response = task.result()
    assert response.failed == 0
    assert engine.calls > 100  # the planning took a while...
    assert gap < 0.1, gap  # ...and the loop was never held for long


async def test_planning_stops_at_the_deadline() -> None:
    """A text whose planning would take ~10 s answers 504 by its 0.3 s deadline, and the
    planning thread stops at its next step instead of running on."""
    engine = SlowTokenizer(delay=0.01)
    service = await _service(engine)
    start = time.monotonic()
    with pytest.raises(DeadlineExceeded):
        await service.translate(TranslateRequest(**_item(4000, timeout_s=0.3)), "d")
    assert time.monotonic() - start < 1.0
    await asyncio.sleep(0.05)
    calls = engine.calls
    await asyncio.sleep(0.2)
    assert engine.calls == calls  # no more tokenizer calls after the deadline
    assert service.planner.pending_chars == 0
    assert not engine.requests  # nothing reached the engine


async def test_overload_is_refused_before_planning() -> None:
    """While the planning queue holds its bound of characters, a new request is refused at
    once (503), without being tokenized."""
    engine = SlowTokenizer(delay=0.02)
    service = await _service(engine, max_text_chars=40_000, max_batch_items=1)
    big = _item(6000)  # ~40k characters: fills the queue (2 batches x 1 item x 40k chars)
    first = [
        asyncio.create_task(service.translate(TranslateRequest(**big), f"f{i}")) for i in (0, 1)
    ]
    await asyncio.sleep(0.05)
    calls = engine.calls
    start = time.monotonic()
    with pytest.raises(Overloaded):
        await service.translate(TranslateRequest(**big), "refused")
    assert time.monotonic() - start < 0.05
    assert engine.calls - calls < 10  # only the queued plans' own progress
    for task in first:
        task.cancel()
    await asyncio.gather(*first, return_exceptions=True)


async def test_a_full_replica_refuses_before_planning() -> None:
    engine = FakeEngine()
    engine.hold = asyncio.Event()
    service = await _service(engine, max_engine_requests=4)
    held = asyncio.create_task(service.translate(TranslateRequest(**_item(70)), "held"))
    async with asyncio.timeout(5):
        while service.in_flight < 4:  # 70 words in pieces of 20: 4 engine requests
            await asyncio.sleep(0.001)
    counting = SlowTokenizer(delay=0)
    service.flow.engine = counting  # any planning would count tokens here
    with pytest.raises(Overloaded):
        await service.translate(TranslateRequest(**_item(3)), "refused")
    assert counting.calls == 0
    engine.hold.set()
    await held


async def test_the_callers_key_follows_planning_into_its_thread() -> None:
    """The cache is scoped by key: planned in a thread, the key must still be the caller's."""
    engine = FakeEngine()
    service = await _service(engine, inline_plan_chars=0)  # every plan in the pool
    item = TranslateRequest(**_item(3))
    token = current_key.set("key-a")
    try:
        assert not (await service.translate(item, "a1")).cached
        assert (await service.translate(item, "a2")).cached
    finally:
        current_key.reset(token)
    token = current_key.set("key-b")
    try:
        assert not (await service.translate(item, "b1")).cached
        assert service.cache_stats().entries == 1  # key-b's own entry only
        assert service.cache_stats().hits == 0
    finally:
        current_key.reset(token)


class ThreadNoting(FakeEngine):
    """Notes the thread each token count runs in."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: set[str] = set()

    def count_tokens(self, text: str) -> int:
        self.threads.add(threading.current_thread().name)
        return super().count_tokens(text)


@pytest.mark.parametrize(
    ("item", "limit", "inline"),
    [
        (_item(3), 1000, True),  # short plain text: planned on the loop
        (_item(3), 0, False),  # inline planning off
        (_item(400), 1000, False),  # ~2,300 characters: the pool
        (_item(3, format="html"), 1000, False),  # markup is read in the pool
        ({**_item(3), "text": "Hi {name}"}, 1000, False),  # protected variables: the pool
    ],
)
async def test_short_plain_text_is_planned_on_the_loop(
    item: dict[str, Any], limit: int, inline: bool
) -> None:
    """Bounded work (``limits.inline_plan_chars``) skips the hop to a planning thread."""
    engine = ThreadNoting()
    service = await _service(engine, inline_plan_chars=limit, max_input_tokens=1000)
    await service.translate(TranslateRequest(**item), "r")
    loop_thread = threading.current_thread().name
    assert engine.threads
    assert (engine.threads == {loop_thread}) is inline, engine.threads
