"""Deadlines end to end: a request past its deadline gets a 504 at once and its engine request
is aborted (the engine's count returns to 0), through Ray's proxy and the real engine."""

from __future__ import annotations

import asyncio
import time

import httpx

from tests.e2e.replicas import ITEM
from tests.texts import texts


async def _engine_requests(client: httpx.AsyncClient, url: str) -> dict[str, int]:
    seen: dict[str, int] = {}
    for _ in range(10):
        r = await client.get(f"{url}/readyz")
        seen[r.headers["x-replica"]] = r.json()["engine_requests"]
    return seen


async def _deadline_scenario(url: str) -> tuple[list[httpx.Response], float, dict[str, int]]:
    # ~450 tokens each: left alone, over a minute of CPU work each; the deadline is 2 s.
    bodies = [{**ITEM, "text": t, "timeout_s": 2} for t in texts(6, 150, 150, seed=41)]
    async with httpx.AsyncClient(timeout=60) as client:
        start = time.monotonic()
        responses = await asyncio.gather(*(client.post(f"{url}/translate", json=b) for b in bodies))
        answered_s = time.monotonic() - start
        idle: dict[str, int] = {}
        async with asyncio.timeout(20):
            while len(idle) < 2 or any(idle.values()):
                idle.update(await _engine_requests(client, url))
    return responses, answered_s, idle


def test_deadline_gives_504_and_aborts_the_engine_request(served: str) -> None:
    responses, answered_s, idle = asyncio.run(_deadline_scenario(served))
    assert [r.status_code for r in responses] == [504] * len(responses), [
        r.text[:200] for r in responses
    ]
    assert {r.json()["error"]["code"] for r in responses} == {"deadline_exceeded"}
    # 2 s deadline plus tokenizing and the proxy's hop on a busy 2-core machine.
    assert answered_s < 15
    assert set(idle.values()) == {0}, idle
