"""The hard inputs of issue 14, each answered with a 4xx in the called API's own shape (not the
500 they got): lone surrogates, deep nesting, huge numbers, wrong types, duplicated keys and
fields, invalid UTF-8 in forms, a huge Content-Length; a batch item with a lone surrogate gets
its error in its place; LibreTranslate's ``alternatives`` is checked before any engine work;
a stream refused by admission gets its 503 and Retry-After; a replaced request id is sent
back. (The fuzzing of every route is test_hostile_requests.py.)"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator

import httpx
import pytest
from starlette.requests import Request

from serve_app.api.app import create_app
from serve_app.api.errors import service_error_response
from serve_app.core.config import AppConfig
from serve_app.core.errors import InvalidRequest
from serve_app.translation.service import TranslationService
from tests.fakes import FakeEngine

JSON = {"content-type": "application/json"}
FORM = {"content-type": "application/x-www-form-urlencoded"}
AUTH = {"Authorization": "DeepL-Auth-Key k"}
ITEM = b'"source_lang": "en", "target_lang": "de"'
LIBRE = "/libretranslate"


async def client_for(engine: FakeEngine, **args: object) -> httpx.AsyncClient:
    config = AppConfig.model_validate({"prompt": {"family": "chat"}, **args})
    service = TranslationService(config, engine)
    await service.start()
    transport = httpx.ASGITransport(app=create_app(service), raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url="http://t")


@pytest.fixture
def engine() -> FakeEngine:
    return FakeEngine()


@pytest.fixture
async def client(engine: FakeEngine) -> AsyncIterator[httpx.AsyncClient]:
    async with await client_for(engine) as c:
        yield c


@pytest.fixture(autouse=True)
def nothing_unexpected(caplog: pytest.LogCaptureFixture) -> None:
    """No request of this module may be logged as failing unexpectedly (a traceback)."""
    caplog.set_level(logging.ERROR, logger="ray.serve.translator")
    yield
    assert not [r for r in caplog.records if "unexpectedly" in r.getMessage()]


def shape(api: str, r: httpx.Response) -> str:
    """The error message, asserting the API's own shape."""
    body = r.json()
    if api == "native":
        assert set(body) == {"error"}
        return str(body["error"]["message"])
    key = "message" if api == "deepl" else "error"
    assert set(body) == {key}, body
    return str(body[key])


NESTED = b"[" * 100_000
CASES = [
    # (name, path, body, headers, api, status, message part)
    ("surrogate", "/translate", b'{"text": "\\ud800 hi", ' + ITEM + b"}", JSON, "native", 422,
     "surrogate"),
    ("surrogate stream", "/translate/stream", b'{"text": "\\udfff", ' + ITEM + b"}", JSON, "native",
     422, "surrogate"),
    ("surrogate context", "/translate", b'{"text": "hi", "context": "a\\ud800", ' + ITEM + b"}",
     JSON, "native", 422, "context"),
    ("surrogate key", "/translate", b'{"text": "hi", "\\ud800": 1, ' + ITEM + b"}", JSON, "native",
     422, "surrogate"),
    ("deepl surrogate", "/v2/translate", b'{"text": ["\\ud800 hi"], "target_lang": "DE"}',
     {**JSON, **AUTH}, "deepl", 400, "surrogate"),
    ("libre surrogate", f"{LIBRE}/translate", b'{"q": "\\ud800", "source": "en", "target": "de"}',
     JSON, "libre", 400, "surrogate"),
    ("libre detect surrogate", f"{LIBRE}/detect", b'{"q": "\\ud800 hi"}', JSON, "libre", 400,
     "surrogate"),
    ("deepl nested", "/v2/translate", NESTED, {**JSON, **AUTH}, "deepl", 400, "nests"),
    ("libre nested", f"{LIBRE}/translate", NESTED, JSON, "libre", 400, "nests"),
    ("native nested", "/translate", NESTED, JSON, "native", 422, "nests"),
    ("nested objects", "/translate", b'{"a":' * 5000 + b"1" + b"}" * 5000, JSON, "native", 422,
     "nests"),
    ("deepl huge integer", "/v2/translate",
     b'{"text": ["hi"], "target_lang": "DE", "formality": ' + b"9" * 5000 + b"}",
     {**JSON, **AUTH}, "deepl", 400, "digits"),
    ("libre huge integer", f"{LIBRE}/translate",
     b'{"q": "hi", "target": "de", "alternatives": ' + b"9" * 5000 + b"}", JSON, "libre", 400,
     "digits"),
    ("libre infinite", f"{LIBRE}/translate", b'{"q": "hi", "target": "de", "alternatives": 1e400}',
     JSON, "libre", 400, "range"),
    ("libre NaN", f"{LIBRE}/translate", b'{"q": "hi", "target": "de", "alternatives": NaN}', JSON,
     "libre", 400, "NaN"),
    # Non-finite numbers spelled as strings (pydantic reads "NaN" as a float): "Input should
    # be greater than 0" before, and "Infinity" a valid timeout.
    ("native NaN string", "/translate", b'{"text": "hi", "timeout_s": "NaN", ' + ITEM + b"}", JSON,
     "native", 422, "timeout_s: Input should be a finite number"),
    ("native infinite string", "/translate/batch",
     b'{"items": [{"text": "hi", ' + ITEM + b'}], "timeout_s": "Infinity"}', JSON, "native", 422,
     "timeout_s: Input should be a finite number"),
    ("libre NaN string", f"{LIBRE}/translate",
     b'{"q": "hi", "target": "de", "alternatives": "NaN"}', JSON, "libre", 400,
     "alternatives parameter is not a number"),
    ("deepl formality object", "/v2/translate",
     b'{"text": ["hi"], "target_lang": "DE", "formality": {"a": 1}}', {**JSON, **AUTH}, "deepl",
     400, "formality"),
    ("deepl text nested list", "/v2/translate", b'{"text": [["hi"]], "target_lang": "DE"}',
     {**JSON, **AUTH}, "deepl", 400, "text"),
    ("libre alternatives", f"{LIBRE}/translate",
     b'{"q": "hi", "source": "en", "target": "de", "alternatives": "x"}', JSON, "libre", 400,
     "alternatives"),
    ("libre alternatives form", f"{LIBRE}/translate", b"q=hi&source=en&target=de&alternatives=x",
     FORM, "libre", 400, "alternatives"),
    ("duplicate keys", "/translate", b'{"text": "hi", "text": "ho", ' + ITEM + b"}", JSON, "native",
     422, "more than once"),
    ("conflicting form fields", "/v2/translate", b"text=hi&target_lang=DE&target_lang=FR",
     {**FORM, **AUTH}, "deepl", 400, "more than once"),
    ("libre q twice in a form", f"{LIBRE}/translate", b"q=a&q=b&target=de", FORM, "libre", 400,
     "more than once"),
    ("invalid UTF-8 in a form", "/v2/translate", b"text=\xff\xfe&target_lang=DE", {**FORM, **AUTH},
     "deepl", 400, "UTF-8"),
    ("invalid escape in a form", "/v2/translate", b"text=%ED%A0%80&target_lang=DE",
     {**FORM, **AUTH}, "deepl", 400, "UTF-8"),
    ("file as text", "/v2/translate",
     b'--b\r\nContent-Disposition: form-data; name="text"; filename="a"\r\n\r\nhi\r\n'
     b'--b\r\nContent-Disposition: form-data; name="target_lang"\r\n\r\nDE\r\n--b--\r\n',
     {"content-type": "multipart/form-data; boundary=b", **AUTH}, "deepl", 400, "text"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "path", "body", "headers", "api", "status", "part"), CASES, ids=[c[0] for c in CASES]
)
async def test_hard_input_is_a_4xx_in_the_apis_shape(
    client: httpx.AsyncClient,
    engine: FakeEngine,
    name: str,
    path: str,
    body: bytes,
    headers: dict[str, str],
    api: str,
    status: int,
    part: str,
) -> None:
    r = await client.post(path, content=body, headers=headers)
    assert r.status_code == status, (name, r.text[:300])
    assert part in shape(api, r), r.text[:300]
    assert engine.requests == []  # refused before any engine work


async def test_a_batch_item_with_a_lone_surrogate_gets_its_error_in_its_place(
    client: httpx.AsyncClient,
) -> None:
    items = b'[{"text": "\\ud800 hi", ' + ITEM + b'}, {"text": "fine", ' + ITEM + b"}]"
    r = await client.post("/translate/batch", content=b'{"items": ' + items + b"}", headers=JSON)
    assert r.status_code == 200, r.text
    first, second = r.json()["results"]
    assert first["index"] == 0
    assert first["error"]["code"] == "invalid_request"
    assert "items[0].text" in first["error"]["message"]
    assert "fine" in second["translation"]
    assert r.json()["failed"] == 1


async def test_utf8_form_bytes_are_read_as_utf8_not_latin1(client: httpx.AsyncClient) -> None:
    body = "text=Grüße aus Köln&target_lang=EN&source_lang=DE".encode()
    r = await client.post("/v2/translate", content=body, headers={**FORM, **AUTH})
    assert r.status_code == 200, r.text
    assert "Grüße aus Köln" in r.json()["translations"][0]["text"]


async def test_huge_content_length_is_413(client: httpx.AsyncClient) -> None:
    headers = {**JSON, "content-length": "9" * 5000}
    r = await client.post("/translate", content=b"{}", headers=headers)
    assert r.status_code == 413


def test_an_error_message_holding_a_lone_surrogate_still_renders() -> None:
    scope = {"type": "http", "method": "POST", "path": "/translate", "headers": []}
    response = service_error_response(InvalidRequest("bad value '\ud800'"), Request(scope))
    assert json.loads(bytes(response.body))["error"]["message"] == "bad value '\\ud800'"


async def test_nested_body_without_a_key_when_keys_are_on_is_refused_not_500(
    engine: FakeEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOSTILE_KEYS", "k1")
    async with await client_for(engine, security={"api_keys_env": "HOSTILE_KEYS"}) as c:
        for path in ("/v2/translate", "/translate"):  # the key is a header: refused unread
            r = await c.post(path, content=NESTED, headers=JSON)
            assert r.status_code in (401, 403), (path, r.text)
        # LibreTranslate's key may be in the body, which cannot be read: its 400, in shape.
        r = await c.post(f"{LIBRE}/translate", content=NESTED, headers=JSON)
        assert r.status_code == 400
        assert "nests" in shape("libre", r)
        r = await c.post(f"{LIBRE}/translate", content=NESTED, headers={**JSON, "X-API-Key": "k1"})
        assert r.status_code == 400
        assert "nests" in shape("libre", r)


async def test_a_stream_refused_by_admission_gets_503_and_retry_after(
    engine: FakeEngine,
) -> None:
    """Two streams on a replica that holds one engine request: both pass the first check
    before either is admitted; the second must get an HTTP 503 with Retry-After, not a 200
    whose stream holds an error event."""
    engine.hold = asyncio.Event()
    limits = {"max_engine_requests": 1, "max_batch_items": 1, "retry_after_s": 2}
    async with await client_for(engine, limits=limits) as c:
        body = {"text": "Hello", "source_lang": "en", "target_lang": "de", "cache": False}
        first = asyncio.create_task(c.post("/translate/stream", json=body))
        second = asyncio.create_task(c.post("/translate/stream", json=body))
        done, _ = await asyncio.wait({first, second}, return_when=asyncio.FIRST_COMPLETED)
        refused = done.pop().result()
        engine.hold.set()
        await asyncio.gather(first, second)
    assert refused.status_code == 503, refused.text[:300]
    assert refused.headers["retry-after"] == "2"
    assert refused.json()["error"]["code"] == "overloaded"


async def test_a_replaced_request_id_is_sent_back(client: httpx.AsyncClient) -> None:
    r = await client.get("/languages", headers={"X-Request-ID": "not a valid id!"})
    sent_back = r.headers["x-request-id"]
    assert sent_back != "not a valid id!"
    assert len(sent_back) == 32
    assert sent_back.isalnum()


LONG_VALUE = "x" * 200_000
DEEPL_HI = {"text": ["hi"], "target_lang": "DE"}
ECHOED = [
    ("deepl", "/v2/translate", {**DEEPL_HI, "split_sentences": LONG_VALUE}),
    ("deepl", "/v2/translate", {**DEEPL_HI, "formality": LONG_VALUE}),
    ("libre", f"{LIBRE}/translate", {"q": "hi", "target": "de", "format": LONG_VALUE}),
]


@pytest.mark.parametrize(("api", "path", "body"), ECHOED, ids=["split", "formality", "format"])
async def test_a_refusal_quoting_a_huge_value_is_bounded(
    client: httpx.AsyncClient, api: str, path: str, body: dict[str, object]
) -> None:
    """Refusals quote the value they refuse: a 200,000-character ``split_sentences`` came
    back whole in the message (a 200 KB answer to a bad parameter). A message is cut at
    ``errors.MAX_MESSAGE_CHARS``, saying so."""
    r = await client.post(path, content=json.dumps(body), headers={**JSON, **AUTH})
    assert r.status_code == 400
    message = shape(api, r)
    assert len(message) < 1_100, len(message)
    assert message.startswith("Invalid")
    assert message.endswith(" characters)")
