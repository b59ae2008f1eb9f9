"""Asyncio plumbing shared by the layers. ``sized``: work proportional to its input leaves
the event loop when the input is large. ``produced``: for the layers that stream, an async
generator must not hold a deadline or an admission slot across its ``yield``s (a
cancellation would land in whoever consumes it), so a producer task owns them and the
generator only relays what it puts. ``ThreadGate``: CPU-heavy work in threads, a few at a
time, with a bounded queue before it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import suppress
from typing import ParamSpec, TypeVar

from serve_app.core.errors import Overloaded

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


class ThreadGate:
    """Runs work in worker threads, at most ``threads`` at once: each holds the GIL and a
    core that live requests of the same process need. Beyond ``queue`` callers waiting,
    ``run(..., shed=True)`` raises ``Overloaded`` (503, Retry-After ``retry_after_s``). A
    thread cannot be stopped, so a caller that is cancelled leaves its place taken until its
    thread ends: the bound holds for threads, not for callers."""

    def __init__(self, threads: int, queue: int, what: str, retry_after_s: int = 5) -> None:
        self._free = asyncio.Semaphore(threads)
        self.queue, self.what, self.retry_after_s = queue, what, retry_after_s
        self.waiting = 0

    async def run(self, work: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._run(True, work, *args, **kwargs)

    async def run_unshed(self, work: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Waits however long the queue is (work already accepted)."""
        return await self._run(False, work, *args, **kwargs)

    async def _run(self, shed: bool, work: Callable[..., T], *args: object, **kwargs: object) -> T:
        if shed and self._free.locked() and self.waiting >= self.queue:
            raise Overloaded(
                f"Too many {self.what} are waiting on this replica; retry shortly.",
                retry_after_s=self.retry_after_s,
            )
        self.waiting += 1
        try:
            await self._free.acquire()
        finally:
            self.waiting -= 1
        thread = asyncio.ensure_future(asyncio.to_thread(work, *args, **kwargs))
        thread.add_done_callback(lambda _: self._free.release())
        return await asyncio.shield(thread)
