"""``produced``: a producer task's items relayed, its error raised after them, and the task
cancelled when the consumer stops early. ``ThreadGate``: threads bounded, the queue beyond
them shed with ``Overloaded``, a cancelled caller's thread still counted."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import pytest

from serve_app.core.aio import ThreadGate, produced
from serve_app.core.errors import Overloaded


async def test_items_come_in_order_then_the_error() -> None:
    async def produce(put: Callable[[int], None]) -> None:
        put(1)
        put(2)
        raise ValueError("boom")

    seen: list[int] = []

    async def consume() -> None:
        async for item in produced(produce):
            seen.append(item)

    with pytest.raises(ValueError, match="boom"):
        await consume()
    assert seen == [1, 2]


async def test_closing_the_generator_cancels_the_producer() -> None:
    cancelled = asyncio.Event()

    async def produce(put: Callable[[str], None]) -> None:
        put("first")
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    stream = produced(produce)
    assert await stream.__anext__() == "first"
    await stream.aclose()
    assert cancelled.is_set()


class _Blocking:
    """Work that runs until released, counting how many run at once."""

    def __init__(self) -> None:
        self.release, self.lock = threading.Event(), threading.Lock()
        self.now = self.most = 0

    def __call__(self, value: int) -> int:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        self.release.wait(10)
        with self.lock:
            self.now -= 1
        return value


async def _until(condition: Callable[[], bool]) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition never held")


async def test_a_gate_runs_its_threads_few_at_a_time_and_sheds_beyond_its_queue() -> None:
    gate, work = ThreadGate(threads=2, queue=2, what="uploads", retry_after_s=7), _Blocking()
    calls = [asyncio.create_task(gate.run(work, i)) for i in range(4)]
    await _until(lambda: work.now == 2 and gate.waiting == 2)
    with pytest.raises(Overloaded, match="Too many uploads") as info:
        await gate.run(work, 99)
    assert info.value.retry_after_s == 7
    accepted = asyncio.create_task(gate.run_unshed(work, 5))  # accepted work always waits
    await _until(lambda: gate.waiting == 3)
    work.release.set()
    assert await asyncio.gather(*calls, accepted) == [0, 1, 2, 3, 5]
    assert work.most == 2


async def test_a_cancelled_caller_keeps_its_place_until_its_thread_ends() -> None:
    gate, work = ThreadGate(threads=1, queue=0, what="uploads"), _Blocking()
    first = asyncio.create_task(gate.run(work, 1))
    await _until(lambda: work.now == 1)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    with pytest.raises(Overloaded):  # the thread still runs: no second one starts
        await gate.run(work, 2)
    work.release.set()
    await _until(lambda: work.now == 0)
    await _until(lambda: not gate._free.locked())
    work.release.clear()
    second = asyncio.create_task(gate.run(work, 2))
    await _until(lambda: work.now == 1)
    work.release.set()
    assert await second == 2
