"""Usage without keys: counted in the replica, stored once per interval in one write, exact
after the flush (refunds included), kept when the store fails, flushed before a read."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request

from serve_app.api.anonymous_usage import AnonymousUsage
from serve_app.api.errors import install_error_handlers
from serve_app.api.keys import ANONYMOUS, caller_usage, charged
from serve_app.core.errors import EngineUnavailable
from serve_app.store import Store

pytestmark = pytest.mark.unit


class CountingStore:
    """The real store, with its charge and refund calls counted (and made to fail)."""

    def __init__(self, store: Store) -> None:
        self.store, self.charges, self.refunds, self.down = store, 0, 0, False

    async def charge(self, key_id: str, characters: int, requests: int = 1) -> Any:
        self.charges += 1
        if self.down:
            raise ConnectionError("store down")
        return await self.store.charge(key_id, characters, requests)

    async def refund(self, key_id: str, characters: int, month: str) -> None:
        self.refunds += 1
        await self.store.refund(key_id, characters, month)

    async def usage(self, key_id: str) -> Any:
        return await self.store.usage(key_id)


def make_app(store: Store, counting: CountingStore, interval_s: float) -> FastAPI:
    app = FastAPI()
    install_error_handlers(app)
    app.state.store = store
    app.state.anonymous_usage = AnonymousUsage(counting, ANONYMOUS, interval_s)  # type: ignore[arg-type]

    @app.post("/translate")
    async def translate(body: dict[str, Any], request: Request) -> dict[str, str]:
        async with charged(request, len(body["text"])):
            if body.get("fail"):
                raise EngineUnavailable("engine down", retry_after_s=1)
            return {"ok": "yes"}

    @app.get("/usage")
    async def usage(request: Request) -> dict[str, int]:
        found = await caller_usage(request)
        assert found is not None
        return {"characters": found.characters}

    return app


def client(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")


async def test_many_requests_make_one_store_write_per_interval(store: Store) -> None:
    counting = CountingStore(store)
    async with client(make_app(store, counting, interval_s=1.0)) as c:
        answers = await asyncio.gather(
            *(c.post("/translate", json={"text": "abc"}) for _ in range(40))
        )
        assert {r.status_code for r in answers} == {200}
        assert counting.charges == 0  # nothing in front of the work
        await asyncio.sleep(1.5)
    assert counting.charges == 1
    assert (await store.usage(ANONYMOUS)).characters == 40 * 3


async def test_failed_work_is_refunded_before_it_is_stored(store: Store) -> None:
    counting = CountingStore(store)
    async with client(make_app(store, counting, interval_s=0.1)) as c:
        await c.post("/translate", json={"text": "abcd"})
        assert (await c.post("/translate", json={"text": "xyz", "fail": True})).status_code == 503
        await asyncio.sleep(0.3)
    assert (await store.usage(ANONYMOUS)).characters == 4


async def test_a_read_flushes_this_replicas_counts_first(store: Store) -> None:
    counting = CountingStore(store)
    async with client(make_app(store, counting, interval_s=60)) as c:
        await c.post("/translate", json={"text": "hello"})
        assert (await c.get("/usage")).json() == {"characters": 5}


async def test_counts_survive_a_store_outage(store: Store) -> None:
    counting = CountingStore(store)
    usage = AnonymousUsage(counting, ANONYMOUS, interval_s=0.05)  # type: ignore[arg-type]
    counting.down = True
    usage.add(7)
    await asyncio.sleep(0.2)
    assert counting.charges >= 2  # retried at each tick
    assert usage.pending == 7
    counting.down = False
    await asyncio.sleep(0.2)
    assert usage.pending == 0
    assert (await store.usage(ANONYMOUS)).characters == 7


async def test_a_net_refund_is_stored_as_a_refund(store: Store) -> None:
    counting = CountingStore(store)
    await store.charge(ANONYMOUS, 10, requests=0)
    usage = AnonymousUsage(counting, ANONYMOUS, interval_s=60)  # type: ignore[arg-type]
    usage.add(2)
    usage.add(-5)
    await usage.flush()
    assert (counting.charges, counting.refunds) == (0, 1)
    assert (await store.usage(ANONYMOUS)).characters == 7
