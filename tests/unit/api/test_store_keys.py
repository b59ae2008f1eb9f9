"""Stored API keys in front of an app: unknown, revoked and missing keys are refused; each
request counts in the key's minute window and each text's characters in its month, exactly,
refunded when the work fails; environment keys keep working."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request

from serve_app.api.errors import install_error_handlers
from serve_app.api.keys import ANONYMOUS, KeyMiddleware, KeyResolver, charged, key_of
from serve_app.core.context import current_key
from serve_app.core.errors import EngineUnavailable
from serve_app.store import Store
from serve_app.store.apikeys import digest, env_key_id

pytestmark = pytest.mark.unit


def make_app(store: Store, env_keys: list[str], store_keys: bool = True) -> FastAPI:
    app = FastAPI()
    install_error_handlers(app)
    app.state.store = store
    resolver = KeyResolver(env_keys, store, store_keys, cache_ttl_s=0)
    app.add_middleware(KeyMiddleware, resolver=resolver, store=store, body_key_prefix="/libre")

    @app.post("/translate")
    async def translate(body: dict[str, Any], request: Request) -> dict[str, Any]:
        async with charged(request, len(body["text"])):
            if body.get("fail"):
                raise EngineUnavailable("engine down", retry_after_s=1)
            await asyncio.sleep(0)
            return {"key": key_of(request), "context": current_key.get()}

    @app.get("/ui/static/{name}")
    async def static(name: str) -> dict[str, str]:
        return {"file": name}

    @app.post("/libre/translate")
    async def libre(request: Request) -> dict[str, str]:
        return {"key": key_of(request), "body": (await request.body()).decode()}

    return app


def client(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


async def test_stored_key_is_accepted_and_names_the_caller(store: Store) -> None:
    key = await store.create_key("alice", digest("sk-alice"))
    async with client(make_app(store, [])) as c:
        r = await c.post("/translate", json={"text": "hello"}, headers=bearer("sk-alice"))
        assert r.status_code == 200
        assert r.json() == {"key": key.id, "context": key.id}
        assert (await c.post("/translate", json={"text": "x"})).status_code == 401
        wrong = await c.post("/translate", json={"text": "x"}, headers=bearer("nope"))
        assert wrong.status_code == 401
    usage = await store.usage(key.id)
    assert (usage.characters, usage.minute_requests) == (5, 1)


async def test_the_web_page_and_its_files_need_no_key(store: Store) -> None:
    async with client(make_app(store, [])) as c:
        assert (await c.get("/ui/static/app.js")).status_code == 200
        assert (await c.get("/ui/config")).status_code == 401


async def test_revoked_key_is_refused_at_once(store: Store) -> None:
    await store.create_key("bob", digest("sk-bob"))
    app = make_app(store, [])
    async with client(app) as c:
        assert (await c.post("/translate", json={"text": "a"}, headers=bearer("sk-bob"))).is_success
        await store.revoke_key("bob")
        r = await c.post("/translate", json={"text": "a"}, headers=bearer("sk-bob"))
        assert r.status_code == 401


async def test_rate_limit_is_429_with_retry_after(store: Store) -> None:
    await store.create_key("c", digest("sk-c"), requests_per_minute=2)
    async with client(make_app(store, [])) as c:
        codes = [
            (await c.post("/translate", json={"text": "a"}, headers=bearer("sk-c"))).status_code
            for _ in range(3)
        ]
        refused = await c.post("/translate", json={"text": "a"}, headers=bearer("sk-c"))
    assert codes == [200, 200, 429]
    assert refused.json()["error"]["code"] == "rate_limited"
    assert 1 <= int(refused.headers["Retry-After"]) <= 60


async def test_quota_is_exact_under_concurrency_and_refunded_on_failure(store: Store) -> None:
    key = await store.create_key("d", digest("sk-d"), chars_per_month=100)
    async with client(make_app(store, [])) as c:
        failed = await c.post(
            "/translate", json={"text": "x" * 50, "fail": True}, headers=bearer("sk-d")
        )
        assert failed.status_code == 503
        assert (await store.usage(key.id)).characters == 0  # refunded
        results = await asyncio.gather(
            *(
                c.post("/translate", json={"text": "y" * 7}, headers=bearer("sk-d"))
                for _ in range(30)
            )
        )
    statuses = [r.status_code for r in results]
    assert statuses.count(200) == 14  # 14 x 7 = 98 <= 100 < 105
    assert statuses.count(429) == 16
    assert (await store.usage(key.id)).characters == 98
    refusal = next(r for r in results if r.status_code == 429)
    assert refusal.json()["error"]["code"] == "quota_exceeded"
    assert int(refusal.headers["Retry-After"]) > 0


async def test_environment_keys_keep_working_and_are_counted(store: Store) -> None:
    async with client(make_app(store, ["env-secret"])) as c:
        r = await c.post("/translate", json={"text": "abc"}, headers={"X-API-Key": "env-secret"})
    expected = env_key_id(digest("env-secret"))
    assert r.json()["key"] == expected
    assert "env-secret" not in expected
    assert (await store.usage(expected)).characters == 3


async def test_keys_off_means_anonymous_counted_together(store: Store) -> None:
    async with client(make_app(store, [], store_keys=False)) as c:
        r = await c.post("/translate", json={"text": "abc"}, headers=bearer("whatever"))
        await c.post("/translate", json={"text": "de"})
    assert r.json() == {"key": "", "context": ""}
    usage = await store.usage(ANONYMOUS)
    assert (usage.characters, usage.minute_requests) == (5, 0)  # no store write per request


async def test_libre_api_key_parameter_and_body_replayed(store: Store) -> None:
    key = await store.create_key("e", digest("sk-e"))
    async with client(make_app(store, [])) as c:
        r = await c.post("/libre/translate", data={"q": "hi", "api_key": "sk-e"})
        assert r.json() == {"key": key.id, "body": "q=hi&api_key=sk-e"}
        assert (await c.post("/libre/translate", data={"q": "hi"})).status_code == 401


async def test_store_down_is_503_not_500(store: Store) -> None:
    await store.create_key("f", digest("sk-f"))
    app = make_app(store, [])
    await store.close()
    async with client(app) as c:
        r = await c.post("/translate", json={"text": "a"}, headers=bearer("sk-f"))
    assert r.status_code == 503
    assert r.headers["Retry-After"] == "1"
