"""``produced``: a producer task's items relayed, its error raised after them, and the task
cancelled when the consumer stops early."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from serve_app.core.aio import produced


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
