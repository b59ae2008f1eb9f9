"""What the API and the service record, with a recording stand-in for Ray's metrics."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from serve_app.api.app import create_app
from serve_app.core.config import AppConfig
from serve_app.translation.service import TranslationService
from tests.fakes import FakeEngine, RecordingMetrics

ITEM = {"text": "Hello world", "source_lang": "en", "target_lang": "de"}


@pytest.fixture
async def setup() -> AsyncIterator[tuple[httpx.AsyncClient, RecordingMetrics, FakeEngine]]:
    engine, metrics = FakeEngine(), RecordingMetrics()
    config = AppConfig.model_validate({"limits": {"max_engine_requests": 2, "max_batch_items": 2}})
    service = TranslationService(config, engine, metrics)
    await service.start()
    transport = httpx.ASGITransport(app=create_app(service), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        yield client, metrics, engine


async def test_requests_are_counted_by_endpoint_status_and_pair(setup) -> None:
    client, metrics, _ = setup
    await client.post("/translate", json={**ITEM, "source_lang": "EN-us"})
    await client.post("/translate", json={**ITEM, "target_lang": "../x"})
    await client.post("/translate", json={"text": 1})
    await client.post("/translate/batch", json={"items": [ITEM, {**ITEM, "target_lang": "fr"}]})
    await client.get("/languages")
    await client.get("/no/such/path")
    assert metrics.requests == [
        ("/translate", 200, ("en", "de")),
        ("/translate", 400, ("invalid", "invalid")),
        ("/translate", 422, ("", "")),
        ("/translate/batch", 200, ("mixed", "mixed")),
        ("/languages", 200, ("", "")),
        ("other", 404, ("", "")),
    ]


async def test_translations_record_characters_and_tokens(setup) -> None:
    client, metrics, _ = setup
    r = await client.post("/translate", json=ITEM)
    usage = r.json()["usage"]
    assert metrics.translations == [
        (("en", "de"), len("Hello world"), usage["input_tokens"], usage["output_tokens"])
    ]
    await client.post("/translate/batch", json={"items": [ITEM, ITEM]})
    assert metrics.batches == [2]
    assert len(metrics.translations) == 1  # both items were cache hits
    assert metrics.cache_lookups == [False, True, True]
    uncached = {**ITEM, "cache": False}
    await client.post("/translate/batch", json={"items": [uncached, uncached]})
    assert len(metrics.translations) == 3


async def test_rejections_and_load_are_recorded(setup) -> None:
    client, metrics, engine = setup
    engine.hold = asyncio.Event()
    held = asyncio.create_task(client.post("/translate/batch", json={"items": [ITEM, ITEM]}))
    async with asyncio.timeout(5):
        while engine.num_unfinished_requests() < 2:
            await asyncio.sleep(0.001)
    assert (await client.post("/translate", json=ITEM)).status_code == 503
    engine.hold.set()
    await held
    assert metrics.rejections == ["overloaded"]
    assert metrics.loads == [2, 0]


async def test_endpoint_labels_come_from_the_apps_routes(setup) -> None:
    client, metrics, _ = setup
    await client.get("/translate/../../etc")
    await client.get("/" + "x" * 1000)
    await client.get("/openapi.json")
    await client.get("/v2/languages", headers={"Authorization": "DeepL-Auth-Key k"})
    labels = [endpoint for endpoint, _, _ in metrics.requests]
    assert labels == ["other", "other", "/openapi.json", "/v2/languages"]


def test_every_route_of_the_app_is_a_label() -> None:
    from serve_app.api.middleware import route_paths

    service = TranslationService(AppConfig(), FakeEngine())
    paths = route_paths(create_app(service))
    assert {
        "/translate",
        "/translate/stream",
        "/v2/translate",
        "/libretranslate/translate",
    } <= paths
