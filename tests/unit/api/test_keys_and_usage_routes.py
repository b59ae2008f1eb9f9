"""The app with a store: stored keys on every API, quotas refused in each API's own way
(native 429 + Retry-After, DeepL 456, LibreTranslate 429/403), usage per key on /usage and
/v2/usage, and a cache that never serves one key's translation to another."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import pytest

from serve_app.api.app import create_app
from serve_app.core.config import AppConfig
from serve_app.store import Store
from serve_app.store.apikeys import digest, env_key_id
from serve_app.translation.service import TranslationService
from tests.fakes import FakeEngine

ITEM = {"text": "Hello world", "source_lang": "en", "target_lang": "de"}


@pytest.fixture
async def engine() -> FakeEngine:
    return FakeEngine()


async def client_for(
    store: Store, engine: FakeEngine, monkeypatch: pytest.MonkeyPatch | None = None, **security: Any
) -> httpx.AsyncClient:
    config = AppConfig.model_validate(
        {"prompt": {"family": "chat"}, "security": {"store_keys": True, **security}}
    )
    service = TranslationService(config, engine)
    await service.start()
    app = create_app(service, store=store)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url="http://t")


@pytest.fixture
async def client(store: Store, engine: FakeEngine) -> AsyncIterator[httpx.AsyncClient]:
    async with await client_for(store, engine) as c:
        yield c


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


async def test_native_usage_is_per_key_with_limits(store: Store, client: httpx.AsyncClient) -> None:
    await store.create_key("a", digest("sk-a"), chars_per_month=1000, requests_per_minute=50)
    await store.create_key("b", digest("sk-b"))
    assert (await client.post("/translate", json=ITEM, headers=bearer("sk-a"))).is_success
    batch = {"items": [ITEM, {**ITEM, "text": "Good morning"}]}
    assert (await client.post("/translate/batch", json=batch, headers=bearer("sk-a"))).is_success
    a = (await client.get("/usage", headers=bearer("sk-a"))).json()
    assert a == {
        "scope": "key",
        "month": a["month"],
        "characters": 11 + 11 + 12,
        "character_limit": 1000,
        "requests_this_minute": 3,
        "requests_per_minute": 50,
    }
    b = (await client.get("/usage", headers=bearer("sk-b"))).json()
    assert (b["characters"], b["character_limit"], b["requests_this_minute"]) == (0, None, 1)
    assert (await client.get("/usage")).status_code == 401


async def test_native_quota_is_429_with_retry_after(
    store: Store, client: httpx.AsyncClient
) -> None:
    await store.create_key("q", digest("sk-q"), chars_per_month=15)
    assert (await client.post("/translate", json=ITEM, headers=bearer("sk-q"))).is_success
    refused = await client.post("/translate", json=ITEM, headers=bearer("sk-q"))
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "quota_exceeded"
    assert int(refused.headers["Retry-After"]) > 0
    stream = await client.post("/translate/stream", json=ITEM, headers=bearer("sk-q"))
    assert stream.status_code == 429


async def test_openai_chat_charges_the_messages_once_per_choice(
    store: Store, client: httpx.AsyncClient
) -> None:
    key = await store.create_key("o", digest("sk-o"), chars_per_month=100)
    body = {"messages": [{"role": "user", "content": "Hello world"}], "max_tokens": 4}
    assert (await client.post("/v1/chat/completions", json=body, headers=bearer("sk-o"))).is_success
    three = await client.post("/v1/chat/completions", json={**body, "n": 3}, headers=bearer("sk-o"))
    assert len(three.json()["choices"]) == 3
    assert (await store.usage(key.id)).characters == 11 + 3 * 11
    # 44 + 6 x 11 passes the 100 of the month: refused whole, before any engine work.
    six = await client.post("/v1/chat/completions", json={**body, "n": 6}, headers=bearer("sk-o"))
    assert six.status_code == 429
    assert (await store.usage(key.id)).characters == 44


async def test_failed_batch_items_are_refunded(store: Store, client: httpx.AsyncClient) -> None:
    key = await store.create_key("r", digest("sk-r"))
    bad = {**ITEM, "text": "Bonjour tout le monde", "target_lang": "xx-not-a-language"}
    r = await client.post("/translate/batch", json={"items": [ITEM, bad]}, headers=bearer("sk-r"))
    assert r.json()["failed"] == 1
    assert (await store.usage(key.id)).characters == len(ITEM["text"])


async def test_deepl_usage_and_456_quota(store: Store, client: httpx.AsyncClient) -> None:
    await store.create_key("d", digest("sk-d"), chars_per_month=20)
    auth = {"Authorization": "DeepL-Auth-Key sk-d"}
    body = {"text": ["Hello world"], "target_lang": "DE"}
    assert (await client.post("/v2/translate", json=body, headers=auth)).is_success
    usage = (await client.get("/v2/usage", headers=auth)).json()
    assert usage == {"character_count": 11, "character_limit": 20}
    refused = await client.post("/v2/translate", json=body, headers=auth)
    assert refused.status_code == 456
    assert set(refused.json()) == {"message"}
    assert (await client.get("/v2/usage", headers=auth)).json()["character_count"] == 11
    bad_key = await client.post(
        "/v2/translate", json=body, headers={"Authorization": "DeepL-Auth-Key x"}
    )
    assert bad_key.status_code == 403


async def test_libretranslate_rate_limit_is_429_and_bad_key_403(
    store: Store, client: httpx.AsyncClient
) -> None:
    await store.create_key("l", digest("sk-l"), requests_per_minute=1)
    form = {"q": "Hello", "source": "en", "target": "de", "api_key": "sk-l"}
    assert (await client.post("/libretranslate/translate", data=form)).is_success
    limited = await client.post("/libretranslate/translate", data=form)
    assert limited.status_code == 429
    assert set(limited.json()) == {"error"}
    assert "Retry-After" in limited.headers
    wrong = await client.post("/libretranslate/translate", data={**form, "api_key": "nope"})
    assert wrong.status_code == 403


async def test_cache_never_crosses_keys(
    store: Store, client: httpx.AsyncClient, engine: FakeEngine
) -> None:
    await store.create_key("x", digest("sk-x"))
    await store.create_key("y", digest("sk-y"))
    first = await client.post("/translate", json=ITEM, headers=bearer("sk-x"))
    again = await client.post("/translate", json=ITEM, headers=bearer("sk-x"))
    other = await client.post("/translate", json=ITEM, headers=bearer("sk-y"))
    assert (first.json()["cached"], again.json()["cached"], other.json()["cached"]) == (
        False,
        True,
        False,
    )
    assert len(engine.requests) == 2


async def test_environment_keys_keep_working_beside_stored_ones(
    store: Store, engine: FakeEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_API_KEYS", "env-1,env-2")
    async with await client_for(store, engine, api_keys_env="TEST_API_KEYS") as c:
        assert (await c.post("/translate", json=ITEM, headers={"X-API-Key": "env-2"})).is_success
        usage = (await c.get("/usage", headers=bearer("env-2"))).json()
    assert usage["characters"] == 11
    assert usage["character_limit"] is None
    assert (await store.usage(env_key_id(digest("env-2")))).characters == 11


async def test_revoked_key_is_refused_on_its_next_request(
    store: Store, client: httpx.AsyncClient
) -> None:
    await store.create_key("v", digest("sk-v"))
    assert (await client.post("/translate", json=ITEM, headers=bearer("sk-v"))).is_success
    await store.revoke_key("v")
    assert (await client.post("/translate", json=ITEM, headers=bearer("sk-v"))).status_code == 401


async def test_openai_quota_and_rate_limit_are_in_openai_codes(
    store: Store, client: httpx.AsyncClient
) -> None:
    """OpenAI answers a used-up quota with a 429 whose type and code are
    ``insufficient_quota`` (a rate limit's are ``rate_limit_error`` / ``rate_limit_exceeded``),
    which clients tell apart by; before 2026-12-07 they came as ``rate_limit_error`` /
    ``quota_exceeded`` and ``rate_limited``."""
    await store.create_key("o", digest("sk-o"), chars_per_month=5)
    api = openai.AsyncOpenAI(
        base_url="http://t/v1", api_key="sk-o", http_client=client, max_retries=0
    )
    with pytest.raises(openai.RateLimitError) as caught:
        await api.chat.completions.create(
            model="", messages=[{"role": "user", "content": "Hello world"}]
        )
    assert caught.value.code == "insufficient_quota"
    assert caught.value.type == "insufficient_quota"
    await store.create_key("r", digest("sk-r"), requests_per_minute=1)
    api = openai.AsyncOpenAI(
        base_url="http://t/v1", api_key="sk-r", http_client=client, max_retries=0
    )
    await api.models.list()
    with pytest.raises(openai.RateLimitError) as caught:
        await api.models.list()
    assert (caught.value.code, caught.value.type) == ("rate_limit_exceeded", "rate_limit_error")
