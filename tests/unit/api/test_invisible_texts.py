"""A text of nothing but whitespace and invisible format characters (zero-width spaces and
joiners, BOMs, direction marks) has nothing to translate: 10,000 ZWJs were 30,000 tokens, 60
engine requests each generating up to its token limit (51 s of the e2e cluster's CPU
engine). They are blank texts now, answered as a whitespace-only text is on each API, with
no engine work: the native routes' 422, DeepL's and LibreTranslate's text back as it is."""

from __future__ import annotations

import unicodedata

import httpx
import pytest

from serve_app.core.characters import invisible
from tests.fakes import FakeEngine

ZWJS = "\u200d" * 10_000
PAIR = {"source_lang": "en", "target_lang": "de"}
AUTH = {"Authorization": "DeepL-Auth-Key k"}


@pytest.mark.parametrize("text", [ZWJS, "\u200b\u200c\ufeff \n\u2066\u200f"], ids=["zwj", "mix"])
@pytest.mark.parametrize("path", ["/translate", "/translate/stream"])
async def test_native_routes_refuse_an_invisible_text_as_blank(
    client: httpx.AsyncClient, engine: FakeEngine, path: str, text: str
) -> None:
    r = await client.post(path, json={"text": text, **PAIR})
    assert r.status_code == 422, r.text
    assert "invisible format characters" in r.json()["error"]["message"]
    assert engine.requests == []


async def test_a_batch_item_of_zwjs_is_that_items_error(
    client: httpx.AsyncClient, engine: FakeEngine
) -> None:
    items = [{"text": ZWJS, **PAIR}, {"text": "Hello", **PAIR}]
    r = await client.post("/translate/batch", json={"items": items})
    assert r.status_code == 200, r.text
    first, second = r.json()["results"]
    assert "invisible format characters" in first["error"]["message"]
    assert second["translation"]
    assert len(engine.requests) == 1


async def test_deepl_and_libretranslate_give_an_invisible_text_back(
    client: httpx.AsyncClient, engine: FakeEngine
) -> None:
    body = {"text": [ZWJS, "Hello"], "source_lang": "EN", "target_lang": "DE"}
    r = await client.post("/v2/translate", json=body, headers=AUTH)
    assert r.status_code == 200, r.text
    assert r.json()["translations"][0]["text"] == ZWJS
    assert len(engine.requests) == 1
    q = {"q": ZWJS, "source": "en", "target": "de"}
    r = await client.post("/libretranslate/translate", json=q)
    assert r.status_code == 200, r.text
    assert r.json()["translatedText"] == ZWJS
    assert len(engine.requests) == 1


def test_invisible_is_whitespace_or_a_format_character() -> None:
    """The one regex scan matches the definition it replaced (``str.isspace`` or category
    Cf) on every character of the Basic Multilingual Plane."""
    for code in range(0x10000):
        ch = chr(code)
        expected = ch.isspace() or unicodedata.category(ch) == "Cf"
        assert invisible(ch) is expected, hex(code)
    assert invisible("")
    assert invisible(ZWJS * 100)
    assert not invisible(ZWJS + "a")
    assert not invisible("\u0301")
