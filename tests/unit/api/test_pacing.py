"""``paced``: the first chunks at once, then at most one message per interval holding every
chunk that came meanwhile, the rest as soon as the source ends; closing closes the source."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator

import pytest

from serve_app.api.pacing import paced

# The loop's virtual clock (looptime): the pacing's timers and the sources' sleeps keep exact
# times, so these times are the pacing's own, not a busy machine's.
pytestmark = pytest.mark.looptime


async def _timed(gaps: list[float], log: list[str] | None = None) -> AsyncIterator[bytes]:
    """Chunk i after sleeping gaps[i]."""
    try:
        for i, gap in enumerate(gaps):
            await asyncio.sleep(gap)
            yield f"{i};".encode()
    finally:
        if log is not None:
            log.append("closed")


def _now() -> float:
    return asyncio.get_running_loop().time()


async def _collect(chunks: AsyncIterator[bytes]) -> list[tuple[float, bytes]]:
    start, out = _now(), []
    async for message in chunks:
        out.append((_now() - start, message))
    return out


async def test_every_chunk_arrives_once_in_order() -> None:
    messages = await _collect(paced(_timed([0.001] * 50), 0.02))
    assert b"".join(m for _, m in messages) == b"".join(f"{i};".encode() for i in range(50))


async def test_first_chunks_are_not_held_then_messages_are_paced() -> None:
    # the opening event at once, the first text 30 ms later, then a token every 2 ms
    messages = await _collect(paced(_timed([0.0, 0.03] + [0.002] * 60), 0.05))
    assert messages[0][1] == b"0;"
    assert messages[1][1] == b"1;"
    assert messages[1][0] == pytest.approx(0.03)  # the first text is not held
    # ~120 ms of tokens after that: a handful of messages, not 60
    assert 2 < len(messages) <= 2 + 5
    times = [t for t, _ in messages[1:-1]]  # the last one goes as soon as the source ends
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert all(g >= 0.045 for g in gaps)


async def test_the_end_is_sent_without_waiting_out_the_interval() -> None:
    start = _now()
    messages = await _collect(paced(_timed([0.0, 0.0, 0.0, 0.005]), 1.0))
    assert _now() - start == pytest.approx(0.005)
    assert b"".join(m for _, m in messages) == b"0;1;2;3;"


async def test_a_slow_source_gets_each_chunk_when_it_comes() -> None:
    # chunks further apart than the interval are each sent the moment they come
    messages = await _collect(paced(_timed([0.0, 0.0, 0.04, 0.04, 0.04]), 0.02))
    assert [m for _, m in messages][-3:] == [b"2;", b"3;", b"4;"]


async def test_zero_interval_passes_every_chunk_through() -> None:
    messages = await _collect(paced(_timed([0.0] * 5), 0))
    assert [m for _, m in messages] == [f"{i};".encode() for i in range(5)]


async def test_an_error_of_the_source_comes_after_its_chunks() -> None:
    async def failing() -> AsyncIterator[bytes]:
        yield b"a"
        await asyncio.sleep(0.001)
        raise RuntimeError("boom")

    got: list[bytes] = []

    async def read() -> None:
        async for message in paced(failing(), 0.01):
            got.append(message)

    with pytest.raises(RuntimeError, match="boom"):
        await read()
    assert b"".join(got) == b"a"


async def test_closing_closes_the_source() -> None:
    log: list[str] = []
    stream = paced(_timed([0.0] + [0.01] * 100, log), 0.02)
    assert await anext(stream) == b"0;"
    await stream.aclose()  # the client went away
    assert log == ["closed"]


async def test_the_first_chunks_reach_the_client_without_a_task_between() -> None:
    """A chunk the source has ready is the client's without a turn of the loop: callbacks
    already waiting for the loop (other streams' work) have not run when it arrives."""

    async def ready() -> AsyncIterator[bytes]:
        for i in range(3):
            yield f"{i};".encode()

    stream = paced(ready(), 0.05)
    loop = asyncio.get_running_loop()
    for expected in (b"0;", b"1;"):
        waiting: list[int] = []
        loop.call_soon(waiting.append, 1)
        assert await anext(stream) == expected
        assert waiting == []
        await asyncio.sleep(0)
    assert await anext(stream) == b"2;"  # then through the pump, paced
    await stream.aclose()


async def test_a_source_shorter_than_the_immediate_chunks_ends_the_stream() -> None:
    log: list[str] = []
    messages = await _collect(paced(_timed([0.0], log), 0.05))
    assert [m for _, m in messages] == [b"0;"]
    assert log == ["closed"]
