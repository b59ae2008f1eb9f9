"""Asyncio plumbing shared by the layers. ``sized``: work proportional to its input leaves
the event loop when the input is large. ``produced``: for the layers that stream, an async
generator must not hold a deadline or an admission slot across its ``yield``s (a
cancellation would land in whoever consumes it), so a producer task owns them and the
generator only relays what it puts."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import suppress
from typing import ParamSpec, TypeVar

T = TypeVar("T")
P = ParamSpec("P")


async def sized(
    size: int, inline_up_to: int, work: Callable[P, T], *args: P.args, **kwargs: P.kwargs
) -> T:
    """``work(*args, **kwargs)``: on the event loop while ``size`` (the work's measure: bytes,
    characters, entries x characters) is at most ``inline_up_to``, in a worker thread above
    it, where work proportional to the input would hold every other request."""
    if size <= inline_up_to:
        return work(*args, **kwargs)
    return await asyncio.to_thread(work, *args, **kwargs)


async def produced(
    produce: Callable[[Callable[[T], None]], Awaitable[None]],
) -> AsyncGenerator[T, None]:
    """The items ``produce(put)`` puts, as they come, from a task of its own; its error is
    raised here after the items before it. Closing this generator (the client left) cancels
    the task, which aborts whatever engine work it awaits."""
    queue: asyncio.Queue[tuple[T] | BaseException | None] = asyncio.Queue()

    async def run() -> None:
        try:
            await produce(lambda item: queue.put_nowait((item,)))
            queue.put_nowait(None)
        except Exception as exc:
            queue.put_nowait(exc)

    producer = asyncio.create_task(run())
    try:
        while (entry := await queue.get()) is not None:
            if isinstance(entry, BaseException):
                raise entry
            yield entry[0]
    finally:
        producer.cancel()
        with suppress(asyncio.CancelledError):
            await producer
