"""The HTTP API over a fake engine: every route and every error the API promises."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from serve_app.api.app import create_app
from serve_app.core.config import AppConfig
from serve_app.translation.service import TranslationService
from tests.fakes import FakeEngine

ARGS = {
    "prompt": {"family": "hy_mt"},
    "limits": {
        "max_input_tokens": 20,
        "max_batch_items": 4,
        "max_engine_requests": 4,
        "retry_after_s": 2,
        "request_timeout_s": 5,
        "max_request_timeout_s": 10,
    },
}
ITEM = {"text": "Hello world", "source_lang": "en", "target_lang": "de"}


@pytest.fixture
def engine() -> FakeEngine:
    return FakeEngine()


@pytest.fixture
async def service(engine: FakeEngine) -> TranslationService:
    service = TranslationService(AppConfig.model_validate(ARGS), engine)
    await service.start()
    return service


@pytest.fixture
async def client(service: TranslationService) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(
        app=create_app(service, replica_id="r1"), raise_app_exceptions=False
    )
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        yield c


async def wait_until(predicate, timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.001)


async def test_translate(client: httpx.AsyncClient) -> None:
    r = await client.post("/translate", json=ITEM)
    assert r.status_code == 200
    body = r.json()
    assert body["source_lang"] == "en"
    assert body["target_lang"] == "de"
    assert body["model"] == "tencent/HY-MT1.5-1.8B"
    assert "Translate the following segment into German" in body["translation"]
    assert body["translation"].endswith("Hello world")
    assert body["usage"]["output_tokens"] == 3
    assert body["usage"]["input_tokens"] > 0
    assert r.headers["x-replica"] == "r1"
    assert len(r.headers["x-request-id"]) == 32


async def test_request_id_is_taken_from_the_client(
    client: httpx.AsyncClient, engine: FakeEngine
) -> None:
    r = await client.post("/translate", json=ITEM, headers={"X-Request-ID": "abc-123"})
    assert r.status_code == 200
    # Behind a proxy that sets the id, the proxy echoes it; this app does not repeat it.
    assert "x-request-id" not in r.headers
    bad = await client.post("/translate", json=ITEM, headers={"X-Request-ID": "a b\x01"})
    assert bad.status_code == 200


async def test_codes_are_normalized_in_the_answer(client: httpx.AsyncClient) -> None:
    r = await client.post(
        "/translate", json={"text": "x", "source_lang": "ZH_tw", "target_lang": "EN-us"}
    )
    assert r.status_code == 200
    assert (r.json()["source_lang"], r.json()["target_lang"]) == ("zh-Hant", "en")
    # Chinese on one side: the Chinese prompt, naming the target in Chinese.
    assert "将以下文本翻译为英语" in r.json()["translation"]


async def test_batch_keeps_order_and_sums_usage(client: httpx.AsyncClient) -> None:
    items = [
        {"text": f"text number {i}", "source_lang": "en", "target_lang": t}
        for i, t in enumerate(["de", "fr", "ja", "es"])
    ]
    r = await client.post("/translate/batch", json={"items": items})
    assert r.status_code == 200
    results = r.json()["results"]
    assert [x["target_lang"] for x in results] == ["de", "fr", "ja", "es"]
    for i, result in enumerate(results):
        assert result["translation"].endswith(f"text number {i}")
    usage = r.json()["usage"]
    assert usage["output_tokens"] == 12
    assert usage["input_tokens"] == sum(x["usage"]["input_tokens"] for x in results)


async def test_batch_items_run_concurrently(client: httpx.AsyncClient, engine: FakeEngine) -> None:
    engine.hold = asyncio.Event()
    items = [ITEM] * 4
    pending = asyncio.create_task(client.post("/translate/batch", json={"items": items}))
    await wait_until(lambda: engine.num_unfinished_requests() == 4)
    engine.hold.set()
    assert (await pending).status_code == 200


async def test_languages(client: httpx.AsyncClient) -> None:
    r = await client.get("/languages")
    assert r.status_code == 200
    langs = {x["code"]: x for x in r.json()["languages"]}
    assert {"en", "zh", "zh-Hant", "yue", "de"} <= set(langs)
    assert "en" not in langs["en"]["targets"]
    assert "de" in langs["en"]["targets"]
    assert langs["zh-Hant"]["name"] == "Traditional Chinese"


async def test_restricted_pairs(engine: FakeEngine) -> None:
    config = AppConfig.model_validate(
        {"supported_languages": ["en", "de", "fr"], "supported_language_pairs": ["en:de"]}
    )
    service = TranslationService(config, engine)
    await service.start()
    transport = httpx.ASGITransport(app=create_app(service))
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        assert (await c.post("/translate", json=ITEM)).status_code == 200
        r = await c.post("/translate", json={**ITEM, "source_lang": "de", "target_lang": "en"})
        assert r.status_code == 400
        assert r.json()["error"]["code"] == "unsupported_language_pair"
        langs = (await c.get("/languages")).json()["languages"]
        assert {x["code"]: x["targets"] for x in langs} == {"en": ["de"], "de": [], "fr": []}


async def test_health_and_readiness(
    client: httpx.AsyncClient, service: TranslationService, engine: FakeEngine
) -> None:
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    assert (await client.get("/readyz")).json() == {
        "status": "ready",
        "in_flight": 0,
        "engine_requests": 0,
    }
    engine.healthy = False
    r = await client.get("/readyz")
    assert r.status_code == 503
    assert r.json()["error"]["code"] == "engine_unavailable"
    assert (await client.get("/healthz")).status_code == 200


async def test_not_ready_before_start(engine: FakeEngine) -> None:
    service = TranslationService(AppConfig(), engine)
    transport = httpx.ASGITransport(app=create_app(service))
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        assert (await c.get("/readyz")).status_code == 503
        r = await c.post("/translate", json=ITEM)
        assert r.status_code == 503
        assert "retry-after" in r.headers


async def test_openapi_docs(client: httpx.AsyncClient) -> None:
    assert (await client.get("/docs")).status_code == 200
    spec = (await client.get("/openapi.json")).json()
    assert {"/translate", "/translate/batch", "/languages", "/healthz", "/readyz"} <= set(
        spec["paths"]
    )


BAD_REQUESTS = [
    ("not json", b'{"text":', 422, "invalid_request"),
    ("invalid utf-8", b'{"text":"\xff\xfe","source_lang":"en","target_lang":"de"}', 422, None),
    ("missing field", {"text": "x", "source_lang": "en"}, 422, "invalid_request"),
    ("wrong type", {**ITEM, "text": 5}, 422, "invalid_request"),
    ("unknown field", {**ITEM, "colour": "red"}, 422, "invalid_request"),
    ("empty text", {**ITEM, "text": ""}, 422, "invalid_request"),
    ("blank text", {**ITEM, "text": " \n\t "}, 422, "invalid_request"),
    ("array body", [ITEM], 422, "invalid_request"),
    ("null lang", {**ITEM, "target_lang": None}, 422, "invalid_request"),
    ("negative timeout", {**ITEM, "timeout_s": -1}, 422, "invalid_request"),
    ("malformed code", {**ITEM, "source_lang": "../etc"}, 400, "invalid_language_code"),
    ("unknown code", {**ITEM, "target_lang": "xx"}, 400, "unsupported_language"),
    ("same language", {**ITEM, "target_lang": "en-GB"}, 400, "unsupported_language_pair"),
    # More tokens than max_input_tokens are split (translation/test_translation_flow.py), not
    # refused.
    ("far too long", {**ITEM, "text": "x" * 1_000_000}, 413, "text_too_long"),
]


@pytest.mark.parametrize(("case", "body", "status", "code"), BAD_REQUESTS)
async def test_bad_input_gets_a_clear_4xx(
    client: httpx.AsyncClient, engine: FakeEngine, case: str, body, status: int, code
) -> None:
    if isinstance(body, bytes):
        r = await client.post(
            "/translate", content=body, headers={"content-type": "application/json"}
        )
    else:
        r = await client.post("/translate", json=body)
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert error["message"]
    assert error["code"] == (code or "invalid_request")
    assert engine.requests == []


async def test_batch_errors_are_reported_per_item(
    client: httpx.AsyncClient, engine: FakeEngine
) -> None:
    items = [ITEM, {**ITEM, "source_lang": "qq"}]
    r = await client.post("/translate/batch", json={"items": items})
    assert r.status_code == 200
    results = r.json()["results"]
    assert results[0]["translation"]
    assert results[1] == {
        "index": 1,
        "error": {"code": "unsupported_language", "message": results[1]["error"]["message"]},
    }
    assert len(engine.requests) == 1


async def test_batch_too_large_and_empty(client: httpx.AsyncClient) -> None:
    r = await client.post("/translate/batch", json={"items": [ITEM] * 5})
    assert r.status_code == 413
    assert r.json()["error"]["code"] == "batch_too_large"
    assert (await client.post("/translate/batch", json={"items": []})).status_code == 422


async def test_deadline_gives_504_and_aborts_engine_requests(
    client: httpx.AsyncClient, engine: FakeEngine, service: TranslationService
) -> None:
    engine.hold = asyncio.Event()
    # The engine never answers: a deadline long enough for planning on a loaded machine
    # (0.05 s was not, in a busy run: the engine was never reached).
    r = await client.post("/translate", json={**ITEM, "timeout_s": 1.0})
    assert r.status_code == 504
    assert r.json()["error"]["code"] == "deadline_exceeded"
    r = await client.post("/translate/batch", json={"items": [ITEM] * 3, "timeout_s": 1.0})
    assert r.status_code == 504
    assert len(engine.cancelled) == 4
    assert engine.num_unfinished_requests() == 0
    assert service.in_flight == 0


async def test_overload_gives_503_with_retry_after(
    client: httpx.AsyncClient, engine: FakeEngine, service: TranslationService
) -> None:
    engine.hold = asyncio.Event()
    held = asyncio.create_task(client.post("/translate/batch", json={"items": [ITEM] * 3}))
    await wait_until(lambda: service.in_flight == 3)
    one_more = asyncio.create_task(client.post("/translate", json=ITEM))
    await wait_until(lambda: service.in_flight == 4)
    r = await client.post("/translate", json=ITEM)
    assert r.status_code == 503
    assert r.json()["error"]["code"] == "overloaded"
    assert r.headers["retry-after"] == "2"
    engine.hold.set()
    assert (await held).status_code == 200
    assert (await one_more).status_code == 200
    assert service.in_flight == 0
    assert (await client.post("/translate", json=ITEM)).status_code == 200


async def test_unexpected_errors_are_500_without_details(
    client: httpx.AsyncClient, engine: FakeEngine
) -> None:
    engine.fail_with = RuntimeError("secret internal detail")
    r = await client.post("/translate", json=ITEM)
    assert r.status_code == 500
    assert r.json()["error"]["code"] == "internal_error"
    assert "secret" not in r.text


async def test_failed_batch_item_cancels_the_others(
    client: httpx.AsyncClient, engine: FakeEngine, service: TranslationService
) -> None:
    engine.hold = asyncio.Event()
    pending = asyncio.create_task(client.post("/translate/batch", json={"items": [ITEM] * 3}))
    await wait_until(lambda: engine.num_unfinished_requests() == 3)
    engine.fail_with = RuntimeError("boom")
    engine.hold.set()
    assert (await pending).status_code == 500
    assert engine.num_unfinished_requests() == 0
    assert service.in_flight == 0


async def test_unknown_route_and_method(client: httpx.AsyncClient) -> None:
    r = await client.get("/nope")
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "not_found"
    assert (await client.get("/translate")).status_code == 405
