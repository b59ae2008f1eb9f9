"""Where the compatibility APIs read their parameters (keys, body, query string), over the
app with the fake engine; each case got a wrong answer before its fix: a compressed
LibreTranslate body whose key was looked for in it (400 "not valid UTF-8", not the 415), a
valid key under ``deepl-auth-key`` (the key check passed it, the DeepL route refused it; its
refusal told DeepL clients to send ``Bearer``, which the DeepL routes refuse), a
JSON ``null`` read as a value ("Invalid formality 'None'"), a JSON body that replaced the
query string's parameters (a query's text dropped unanswered), and LibreTranslate's blank
texts (a list with one empty line was a 400 for every text)."""

from __future__ import annotations

import gzip
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from serve_app.api.app import create_app
from serve_app.core.config import AppConfig
from serve_app.store.sqlite import open_sqlite
from serve_app.translation.service import TranslationService
from tests.fakes import FakeEngine

KEY = "compat-key"
LIBRE = "/libretranslate/translate"
DEEPL = {"Authorization": "DeepL-Auth-Key k"}


async def app_client(
    tmp_path: Path, engine: FakeEngine, keys: bool, store: bool
) -> tuple[httpx.AsyncClient, list]:
    """The app (keys from ``COMPAT_KEYS`` when ``keys``; a SQLite store when ``store``:
    the key middleware with a store is another class) and what to close after."""
    security = {"api_keys_env": "COMPAT_KEYS"} if keys else {}
    config = AppConfig.model_validate({"prompt": {"family": "chat"}, "security": security})
    service = TranslationService(config, engine)
    await service.start()
    db = await open_sqlite(str(tmp_path / "store.db")) if store else None
    transport = httpx.ASGITransport(app=create_app(service, store=db), raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url="http://t"), [db] if db else []


@pytest.fixture
def engine() -> FakeEngine:
    return FakeEngine()


@pytest.fixture
async def client(tmp_path: Path, engine: FakeEngine) -> AsyncIterator[httpx.AsyncClient]:
    c, stores = await app_client(tmp_path, engine, keys=False, store=True)
    async with c:
        yield c
    for db in stores:
        await db.close()


def _bodies() -> list[tuple[str, bytes, str]]:
    fields = {"q": "Hello", "source": "en", "target": "de", "api_key": KEY}
    multipart = httpx.Request("POST", "http://t", data=fields, files={"file": ("a.txt", b"Hi")})
    return [
        ("json", json.dumps(fields).encode(), "application/json"),
        ("form", "&".join(f"{k}={v}" for k, v in fields.items()).encode(),
         "application/x-www-form-urlencoded"),
        ("multipart", multipart.read(), multipart.headers["content-type"]),
    ]  # fmt: skip


@pytest.mark.parametrize(("keys", "store"), [(True, False), (True, True), (False, True)])
@pytest.mark.parametrize(("kind", "body", "media"), _bodies())
async def test_a_compressed_body_searched_for_a_key_is_a_415(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    keys: bool,
    store: bool,
    kind: str,
    body: bytes,
    media: str,
) -> None:
    """LibreTranslate's clients may send their key in the body: without a key header, the
    key check reads it, and read the compressed bytes as "not valid UTF-8" (a 400), before
    the body check could answer the 415 (with keys on, and with a store and keys off)."""
    monkeypatch.setenv("COMPAT_KEYS", KEY)
    c, stores = await app_client(tmp_path, FakeEngine(), keys, store)
    headers = {"Content-Type": media, "Content-Encoding": "gzip"}
    async with c:
        for path in (LIBRE, "/libretranslate/translate_file", "/libretranslate/detect"):
            r = await c.post(path, content=gzip.compress(body), headers=headers)
            assert r.status_code == 415, (path, kind, r.text)
            assert r.headers["accept-encoding"] == "identity"
            assert set(r.json()) == {"error"}, r.text
    for db in stores:
        await db.close()


@pytest.mark.parametrize("store", [False, True])
async def test_the_deepl_scheme_is_case_insensitive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, store: bool
) -> None:
    """An HTTP authentication scheme is case-insensitive: the key check took the key of
    ``deepl-auth-key KEY`` and the DeepL route then refused it with a 403."""
    monkeypatch.setenv("COMPAT_KEYS", KEY)
    c, stores = await app_client(tmp_path, FakeEngine(), keys=True, store=store)
    async with c:
        for scheme in ("deepl-auth-key", "DEEPL-AUTH-KEY", "DeepL-Auth-Key"):
            headers = {"Authorization": f"{scheme} {KEY}"}
            body = {"text": ["Hi"], "target_lang": "DE"}
            r = await c.post("/v2/translate", json=body, headers=headers)
            assert r.status_code == 200, (scheme, r.text)
            r = await c.get("/v2/usage", headers=headers)
            assert r.status_code == 200, (scheme, r.text)
        r = await c.get("/v2/usage", headers={"Authorization": f"Bearer {KEY}"})
        assert r.status_code == 403, r.text  # DeepL's routes want DeepL's scheme
        for headers in ({}, {"Authorization": "DeepL-Auth-Key wrong"}):
            r = await c.get("/v2/usage", headers=headers)
            assert r.status_code == 403, r.text  # the key check's hint named Bearer
            assert r.json() == {
                "message": "Missing or invalid API key: send 'Authorization: DeepL-Auth-Key <key>'."
            }
            assert r.headers["www-authenticate"] == "DeepL-Auth-Key"  # was Bearer
    for db in stores:
        await db.close()


# (method, path, status, the message's words, WWW-Authenticate or None)
REFUSALS = [
    ("POST", "/translate", 401, "send 'Authorization: Bearer <key>'.", "Bearer"),
    ("GET", "/v1/models", 401, "send 'Authorization: Bearer <key>'.", "Bearer"),
    ("GET", "/v2/usage", 403, "send 'Authorization: DeepL-Auth-Key <key>'.", "DeepL-Auth-Key"),
    ("GET", "/v3/glossaries", 403, "send 'Authorization: DeepL-Auth-Key <key>'.", "DeepL-Auth-Key"),
    ("POST", LIBRE, 403, "send an 'api_key' parameter (or 'Authorization: Bearer <key>').", None),
]


@pytest.mark.parametrize("store", [False, True])
@pytest.mark.parametrize(("method", "path", "status", "words", "challenge"), REFUSALS)
async def test_a_key_refusal_names_the_called_apis_scheme(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    store: bool,
    method: str,
    path: str,
    status: int,
    words: str,
    challenge: str | None,
) -> None:
    """The key check's refusal is worded and challenged in the called API's scheme: the
    DeepL routes' 403 said ``WWW-Authenticate: Bearer`` (DeepL takes ``DeepL-Auth-Key``),
    LibreTranslate's named a header its clients do not send, and LibreTranslate answers
    its 403 without a challenge."""
    monkeypatch.setenv("COMPAT_KEYS", KEY)
    c, stores = await app_client(tmp_path, FakeEngine(), keys=True, store=store)
    async with c:
        r = await c.request(method, path, json={"q": "Hi", "target": "de"})
    for db in stores:
        await db.close()
    assert r.status_code == status, r.text
    body = r.json()
    message = body.get("message") or body["error"]
    message = message if isinstance(message, str) else message["message"]
    assert message == f"Missing or invalid API key: {words}"
    assert r.headers.get("www-authenticate") == challenge


async def test_a_json_null_is_an_absent_parameter(client: httpx.AsyncClient) -> None:
    """``"formality": null`` was "Invalid formality 'None'" (400), ``"type": null`` on
    ``/v2/languages`` "must be 'source' or 'target'"."""
    body = {"text": ["Hi"], "target_lang": "DE", "formality": None, "split_sentences": None}
    r = await client.post("/v2/translate", json=body, headers=DEEPL)
    assert r.status_code == 200, r.text
    r = await client.post("/v2/languages", json={"type": None}, headers=DEEPL)
    assert r.status_code == 200, r.text
    assert "supports_formality" not in r.json()[0]  # the source languages, the default
    r = await client.post(LIBRE, json={"q": "Hi", "target": "de", "source": None, "format": None})
    assert r.status_code == 200, r.text
    assert "detectedLanguage" in r.json()  # no source: detected
    r = await client.post(LIBRE, json={"q": "Hi", "target": "de", "source": " AUTO "})
    assert r.status_code == 200, r.text
    assert "detectedLanguage" in r.json()  # detected (as the service reads it): it was left out
    body = {"text": ["Hi"], "target_lang": None}
    r = await client.post("/v2/translate", json=body, headers=DEEPL)
    assert r.status_code == 400, r.text
    assert "target_lang" in r.json()["message"]


async def test_a_json_body_adds_to_the_query_string(client: httpx.AsyncClient) -> None:
    """Parameters in the query string and a JSON body are read together, as a form body's
    are: the JSON body replaced the query's, so its text went unanswered and its
    target_lang was silently overridden."""
    r = await client.post(
        "/v2/translate?text=One", json={"text": ["Two"], "target_lang": "DE"}, headers=DEEPL
    )
    assert r.status_code == 200, r.text
    assert len(r.json()["translations"]) == 2
    r = await client.post(
        "/v2/translate?target_lang=FR", json={"text": ["Hi"], "target_lang": "DE"}, headers=DEEPL
    )
    assert r.status_code == 400, r.text
    assert "target_lang" in r.json()["message"]
    r = await client.post(
        "/v2/translate?target_lang=DE", json={"text": ["Hi"], "target_lang": "DE"}, headers=DEEPL
    )
    assert r.status_code == 200, r.text


async def test_libretranslate_answers_blank_texts_as_they_are(
    client: httpx.AsyncClient, engine: FakeEngine
) -> None:
    """As LibreTranslate (and DeepL here) do: a list with an empty line or a blank text was
    a 400 for all its texts; each is now answered as it is, without engine work."""
    q = ["Hello", "", "\n\n", "World"]
    r = await client.post(LIBRE, json={"q": q, "target": "de", "alternatives": 1})
    assert r.status_code == 200, r.text
    body = r.json()
    texts = body["translatedText"]
    assert texts[1:3] == ["", "\n\n"], texts
    assert texts[0].endswith("Hello"), texts
    assert [d["language"] for d in body["detectedLanguage"]] == ["en", "und", "und", "en"]
    assert body["alternatives"][1:3] == [[], []]
    r = await client.post(LIBRE, json={"q": " ", "source": "en", "target": "de"})
    assert r.status_code == 200, r.text
    assert r.json() == {"translatedText": " "}
    before = len(engine.requests)
    r = await client.post(LIBRE, json={"q": ["", " "], "source": "en", "target": "de"})
    assert r.json() == {"translatedText": ["", " "]}, r.text
    assert len(engine.requests) == before
    for body in ({"q": "", "target": "de"}, {"q": [], "target": "de"}):
        r = await client.post(LIBRE, json=body)
        assert r.status_code == 400, r.text
        assert r.json() == {"error": "Invalid request: missing q parameter"}


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("style_id", "5d8e9b2a-style"),
        ("translation_memory_id", "tm-1"),
        ("translation_memory_threshold", 80),
        ("custom_instructions", ["Use a formal tone", "Write numbers as words"]),
        ("custom_instructions", "Use a formal tone"),
    ],
)
async def test_deepl_refuses_what_it_does_not_hold_or_follow(
    client: httpx.AsyncClient, engine: FakeEngine, name: str, value: Any
) -> None:
    """What deepl-python 1.32 sends for ``style_rule``, ``translation_memory`` and
    ``custom_instructions``: each was ignored, and the text came back as if they had been
    applied (as ``glossary_ids`` did before it was refused)."""
    body = {"text": ["Hello"], "source_lang": "EN", "target_lang": "DE", name: value}
    r = await client.post("/v2/translate", json=body, headers=DEEPL)
    assert r.status_code == 400, r.text
    assert name.split("_threshold")[0] in r.json()["message"]
    form = {k: v if isinstance(v, str | list) else str(v) for k, v in body.items()}
    r = await client.post("/v2/translate", data=form, headers=DEEPL)
    assert r.status_code == 400, r.text
    assert engine.requests == []


async def test_deepl_empty_unsupported_parameters_ask_for_nothing(
    client: httpx.AsyncClient,
) -> None:
    body = {"text": ["Hello"], "target_lang": "DE", "custom_instructions": [], "style_id": ""}
    r = await client.post(
        "/v2/translate", json=body | {"translation_memory_id": None}, headers=DEEPL
    )
    assert r.status_code == 200, r.text
