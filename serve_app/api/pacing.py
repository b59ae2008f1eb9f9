"""Paced streaming: a stream's chunks sent in fewer, larger messages.

Behind Ray's proxy every chunk a streaming response sends is a message from the replica to
the proxy (an ASGI message, a Ray object of the response generator, an HTTP write). A
translation streams one event per token, so at 25 users a replica sent thousands of
messages a second, and the per-message cost (measured with a paced engine on the CPU,
bench/pathcost: ~0.5 ms of replica CPU and ~0.6 ms of proxy CPU per token) saturated both
processes: every stream's first token then waited behind the others' tokens.

``paced`` sends the first ``immediate`` chunks the moment they come, read straight from the
source (the stream's opening event and its first text: time to first token is untouched),
then at most one message per ``interval_s`` holding every chunk that came meanwhile, and the
last one as soon as the stream ends. Chunks are joined, never changed: a client reads the
same events, a few at a time. ``interval_s`` 0 sends every chunk on its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import suppress


class _Pump:
    """Reads the source in a task of its own, so that the sender can wait for a time or
    for the source, whichever comes first."""

    def __init__(self, chunks: AsyncIterator[bytes]) -> None:
        self.chunks = chunks
        self.buffer: list[bytes] = []
        self.ended = False
        self.failure: Exception | None = None
        self.waiting_for_any = False
        self._loop = asyncio.get_running_loop()
        self._signal: asyncio.Future[None] = self._loop.create_future()
        self.task = self._loop.create_task(self._run())

    async def _run(self) -> None:
        try:
            async for chunk in self.chunks:
                self.buffer.append(chunk)
                if self.waiting_for_any:
                    self.poke()
        except Exception as exc:  # raised to the sender after the chunks before it
            self.failure = exc
        finally:
            self.ended = True
            self.poke()

    def poke(self) -> None:
        if not self._signal.done():
            self._signal.set_result(None)

    async def wait(self, timeout_s: float | None) -> None:
        """Until a chunk comes (``timeout_s`` None) or ``timeout_s`` passes; either way
        until the source ends."""
        if self.ended or (timeout_s is None and self.buffer):
            return
        self.waiting_for_any = timeout_s is None
        timer = None if timeout_s is None else self._loop.call_later(timeout_s, self.poke)
        try:
            await self._signal
        finally:
            if timer is not None:
                timer.cancel()
            self.waiting_for_any = False
            self._signal = self._loop.create_future()

    def take(self) -> bytes:
        out = b"".join(self.buffer)
        self.buffer.clear()
        return out

    async def close(self) -> None:
        self.task.cancel()
        with suppress(asyncio.CancelledError):
            await self.task
        if (close := getattr(self.chunks, "aclose", None)) is not None:
            with suppress(Exception):
                await close()


async def paced(
    chunks: AsyncIterator[bytes], interval_s: float, immediate: int = 2
) -> AsyncIterator[bytes]:
    """``chunks`` in messages at most one per ``interval_s`` after the first ``immediate``
    (see the module's docstring). Closing this generator closes ``chunks``.

    The first ``immediate`` chunks are read straight from ``chunks``; the pump's task starts
    after them. Under load every hop from one task to another waits for a turn of the busy
    loop, and the first text is the one that a client times."""
    if interval_s <= 0:
        async for chunk in chunks:
            yield chunk
        return
    pump: _Pump | None = None
    try:
        for _ in range(immediate):
            try:
                chunk = await anext(chunks)
            except StopAsyncIteration:
                return
            yield chunk
        pump = _Pump(chunks)
        while not (pump.ended and not pump.buffer):
            await pump.wait(interval_s)
            await pump.wait(None)
            if pump.buffer:
                yield pump.take()
        if pump.failure is not None:
            raise pump.failure
    finally:
        if pump is not None:
            await pump.close()
        elif (close := getattr(chunks, "aclose", None)) is not None:
            with suppress(Exception):
                await close()
