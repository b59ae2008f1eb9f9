"""What the cache keeps and whom it tells: only complete translations (never one cut at its
token limit, streamed or not, nor an empty or degenerate one), and each API key its own."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from serve_app.api.app import create_app
from serve_app.core.config import AppConfig
from serve_app.translation.cache import CachedTranslation, TranslationCache
from serve_app.translation.service import TranslationService
from tests.fakes import FakeEngine

ITEM = {"text": "Hello world", "source_lang": "en", "target_lang": "de"}


async def _client(engine: FakeEngine, **args: object) -> httpx.AsyncClient:
    config = AppConfig.model_validate({"prompt": {"family": "chat"}, **args})
    service = TranslationService(config, engine)
    await service.start()
    transport = httpx.ASGITransport(app=create_app(service), raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url="http://t")


async def test_a_truncated_stream_is_not_served_to_translate() -> None:
    """/translate/stream never re-splits: its truncated answer once filled the cache under
    the key /translate reads, which then served it as a complete translation."""
    engine = FakeEngine()
    engine.truncate_marker = "Hello"
    async with await _client(engine) as client:
        streamed = await client.post("/translate/stream", json=ITEM)
        assert '"truncated": true' in streamed.text
        body = (await client.post("/translate", json=ITEM)).json()
        assert body["cached"] is False
        assert (await client.get("/cache")).json()["entries"] == 0


@pytest.mark.parametrize("reply", ["", "   \n"])
async def test_an_empty_translation_is_not_cached(reply: str) -> None:
    engine = FakeEngine()
    engine.reply = lambda prompt: reply
    async with await _client(engine) as client:
        for _ in range(2):
            assert (await client.post("/translate", json=ITEM)).json()["cached"] is False
    assert len(engine.requests) == 2


async def test_a_text_with_an_empty_piece_is_not_cached() -> None:
    """One piece of a long text answered nothing: the whole is not kept."""
    engine = FakeEngine()
    engine.reply = lambda prompt: "" if "three" in prompt else "ok"
    text = "one two. three four. five six."
    args = {"limits": {"max_input_tokens": 2, "max_batch_items": 5, "max_engine_requests": 40}}
    async with await _client(engine, **args) as client:
        for _ in range(2):
            r = (await client.post("/translate", json={**ITEM, "text": text})).json()
            assert r["cached"] is False


def test_the_cache_refuses_incomplete_entries() -> None:
    cache = TranslationCache(10, 10**6)
    cache.put("cut", CachedTranslation("Hal", 1, truncated=True))
    cache.put("empty", CachedTranslation(" ", 1, truncated=False))
    cache.put("good", CachedTranslation("Hallo", 1, truncated=False))
    assert cache.get("cut") is None
    assert cache.get("empty") is None
    assert cache.get("good") is not None


@pytest.fixture
async def two_keys(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[httpx.AsyncClient]:
    monkeypatch.setenv("TRANSLATOR_KEYS", "key-a,key-b")
    security = {"api_keys_env": "TRANSLATOR_KEYS"}
    async with await _client(FakeEngine(), security=security) as client:
        yield client


async def test_keys_from_the_environment_do_not_share_the_cache(two_keys) -> None:
    """``cached: true`` would tell key B that key A translated this very text."""
    a, b = {"Authorization": "Bearer key-a"}, {"Authorization": "Bearer key-b"}
    assert (await two_keys.post("/translate", json=ITEM, headers=a)).json()["cached"] is False
    assert (await two_keys.post("/translate", json=ITEM, headers=a)).json()["cached"] is True
    assert (await two_keys.post("/translate", json=ITEM, headers=b)).json()["cached"] is False


async def test_cache_stats_show_a_key_its_own_use_only(two_keys) -> None:
    a, b = {"Authorization": "Bearer key-a"}, {"Authorization": "Bearer key-b"}
    for _ in range(2):
        await two_keys.post("/translate", json=ITEM, headers=a)
    mine = (await two_keys.get("/cache", headers=a)).json()
    assert (mine["entries"], mine["hits"], mine["misses"]) == (1, 1, 1)
    theirs = (await two_keys.get("/cache", headers=b)).json()
    assert (theirs["entries"], theirs["hits"], theirs["misses"], theirs["bytes"]) == (0, 0, 0, 0)
