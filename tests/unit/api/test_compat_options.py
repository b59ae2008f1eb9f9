"""LibreTranslate's ``alternatives`` and ``/frontend/settings``, DeepL's ``split_sentences``,
``preserve_formatting``, ``model_type`` and ``tag_handling_version``, over the fake engine."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator

import httpx
import pytest

from serve_app.api.compat.deepl_options import preserve
from serve_app.translation.service import ALTERNATIVE_TEMPERATURE
from tests.fakes import FakeEngine
from tests.unit.api.test_compat_apis import AUTH, client_for
from tests.unit.translation.test_translation_flow import text_of

LT = "/libretranslate"


@pytest.fixture
def engine() -> FakeEngine:
    """Greedy requests answer the text upper-cased; sampled ones a numbered variant (as a
    sampling model answers differently each time), every second one a repeat."""
    e = FakeEngine()
    counter = itertools.count()

    def reply(prompt: str) -> str:
        text = text_of(prompt).upper()
        if e.requests[-1].temperature == 0:
            return text
        n = next(counter)
        return f"{text} ~{n // 2}"  # pairs of equal samples: duplicates to drop

    e.reply = reply
    return e


@pytest.fixture
async def client(engine: FakeEngine) -> AsyncIterator[httpx.AsyncClient]:
    async with await client_for(
        engine, prompt={"family": "chat", "sampling": {"temperature": 0}}
    ) as c:
        yield c


async def test_alternatives_are_sampled_and_unique(
    client: httpx.AsyncClient, engine: FakeEngine
) -> None:
    body = {"q": "Hello world", "source": "en", "target": "de", "alternatives": 3}
    r = await client.post(f"{LT}/translate", json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["translatedText"] == "HELLO WORLD"
    assert out["alternatives"] == ["HELLO WORLD ~0", "HELLO WORLD ~1"]  # 3 samples, 1 repeat
    sampled = [j for j in engine.requests if j.temperature > 0]
    assert len(sampled) == 3
    assert {j.temperature for j in sampled} == {ALTERNATIVE_TEMPERATURE}
    # The cache is bypassed: asking again samples again.
    r = await client.post(f"{LT}/translate", json=body)
    assert len([j for j in engine.requests if j.temperature > 0]) == 6


async def test_alternatives_per_item_of_a_list_and_none_for_html(
    client: httpx.AsyncClient,
) -> None:
    body = {"q": ["One", "Two"], "source": "en", "target": "de", "alternatives": 1}
    r = await client.post(f"{LT}/translate", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["alternatives"] == [["ONE ~0"], ["TWO ~0"]]
    html = {"q": "<p>One</p>", "source": "en", "target": "de", "format": "html", "alternatives": 2}
    r = await client.post(f"{LT}/translate", json=html)
    assert r.status_code == 200, r.text
    assert r.json()["alternatives"] == []


@pytest.mark.parametrize(
    ("value", "message"),
    [("many", "not a number"), (4, "must be <= 3"), ([1], "not a number")],
)
async def test_bad_alternatives_are_400_before_engine_work(
    client: httpx.AsyncClient, engine: FakeEngine, value: object, message: str
) -> None:
    body = {"q": "Hello", "source": "en", "target": "de", "alternatives": value}
    r = await client.post(f"{LT}/translate", json=body)
    assert r.status_code == 400
    assert message in r.json()["error"]
    assert engine.requests == []


async def test_no_alternatives_key_unless_asked(client: httpx.AsyncClient) -> None:
    body = {"q": "Hello", "source": "en", "target": "de", "alternatives": -1}
    r = await client.post(f"{LT}/translate", json=body)
    assert r.status_code == 200
    assert "alternatives" not in r.json()


async def test_frontend_settings(client: httpx.AsyncClient) -> None:
    r = await client.get(f"{LT}/frontend/settings")
    assert r.status_code == 200
    settings = r.json()
    assert settings["charLimit"] == 100_000
    assert settings["language"] == {
        "source": {"code": "auto", "name": "Auto Detect"},
        "target": {"code": "en", "name": "English"},
    }
    assert settings["apiKeys"] is False
    assert settings["keyRequired"] is False
    assert settings["filesTranslation"] is False
    assert settings["supportedFilesFormat"] == []


async def test_frontend_settings_say_keys_are_required(
    engine: FakeEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LT_KEYS", "k1")
    async with await client_for(engine, security={"api_keys_env": "LT_KEYS"}) as c:
        r = await c.get(f"{LT}/frontend/settings", headers={"Authorization": "Bearer k1"})
    assert r.json()["keyRequired"] is True


# -- DeepL ---------------------------------------------------------------------------------


async def test_deepl_options_accepted_and_model_type_reported(client: httpx.AsyncClient) -> None:
    body = {
        "text": ["Hello"],
        "target_lang": "DE",
        "source_lang": "EN",
        "split_sentences": "nonewlines",
        "preserve_formatting": True,
        "model_type": "prefer_quality_optimized",
    }
    r = await client.post("/v2/translate", json=body, headers=AUTH)
    assert r.status_code == 200, r.text
    (entry,) = r.json()["translations"]
    assert entry["model_type_used"] == "quality_optimized"
    r = await client.post("/v2/translate", data={"text": "x", "target_lang": "DE"}, headers=AUTH)
    assert "model_type_used" not in r.json()["translations"][0]


async def test_preserve_formatting_undoes_case_and_final_stop(
    engine: FakeEngine, client: httpx.AsyncClient
) -> None:
    engine.reply = lambda prompt: "Bonjour le monde."
    form = {"text": "hello world", "target_lang": "FR", "source_lang": "EN"}
    r = await client.post("/v2/translate", data=form | {"preserve_formatting": "1"}, headers=AUTH)
    assert r.json()["translations"][0]["text"] == "bonjour le monde"
    r = await client.post("/v2/translate", data=form, headers=AUTH)
    assert r.json()["translations"][0]["text"] == "Bonjour le monde."


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("split_sentences", "2"),
        ("preserve_formatting", "yes"),
        ("model_type", "fast"),
        ("tag_handling_version", "v3"),  # accepted before 2026-12-07
        ("tag_handling_version", "V2"),
    ],
)
async def test_bad_deepl_option_values_are_400(
    client: httpx.AsyncClient, engine: FakeEngine, name: str, value: str
) -> None:
    form = {"text": "Hello", "target_lang": "DE", name: value}
    r = await client.post("/v2/translate", data=form, headers=AUTH)
    assert r.status_code == 400
    assert name in r.json()["message"]
    assert engine.requests == []


async def test_tag_handling_version_is_echoed_in_each_translation(
    client: httpx.AsyncClient,
) -> None:
    """As DeepL answers (developers.deepl.com, "Translating XML"): each translation names
    the version asked; none asked, none named."""
    body = {"text": ["Press <b>Continue</b>.", "Hi"], "target_lang": "DE", "tag_handling": "xml"}
    r = await client.post("/v2/translate", json=body | {"tag_handling_version": "v2"}, headers=AUTH)
    assert r.status_code == 200, r.text
    assert [t["tag_handling_version"] for t in r.json()["translations"]] == ["v2", "v2"]
    assert r.json()["translations"][0]["text"] == "PRESS <b>CONTINUE</b>."
    r = await client.post("/v2/translate", json=body | {"tag_handling_version": "v1"}, headers=AUTH)
    assert r.json()["translations"][1]["tag_handling_version"] == "v1"
    r = await client.post("/v2/translate", json=body, headers=AUTH)
    assert "tag_handling_version" not in r.json()["translations"][0]


@pytest.mark.parametrize(
    "text",
    [
        "<p>This tag is not closed properly</a>",  # DeepL's own example
        "<b>open",
        "a &nbsp; b",  # an HTML entity: not XML's
        "x < y",
        "<!DOCTYPE r [<!ENTITY a 'aaaa'>]><r>&a;</r>",
        "<?xml version='1.0'?><!DOCTYPE x><x/>",
    ],
)
async def test_v2_xml_that_is_not_well_formed_is_deepls_400(
    client: httpx.AsyncClient, engine: FakeEngine, text: str
) -> None:
    body = {"text": ["Fine <b>text</b>.", text], "target_lang": "DE", "tag_handling": "xml"}
    r = await client.post("/v2/translate", json=body | {"tag_handling_version": "v2"}, headers=AUTH)
    assert r.status_code == 400, r.text
    assert r.json() == {"message": "Tag handling parsing failed, please check input."}
    assert engine.requests == []
    # v1 (and html with v2: "HTML is not strictly parsed") translate it as before.
    r = await client.post("/v2/translate", json=body | {"tag_handling_version": "v1"}, headers=AUTH)
    assert r.status_code == 200, r.text
    html = body | {"tag_handling": "html", "tag_handling_version": "v2"}
    assert (await client.post("/v2/translate", json=html, headers=AUTH)).status_code == 200


async def test_v2_takes_well_formed_xml_with_a_declaration_and_references(
    client: httpx.AsyncClient,
) -> None:
    texts = ["<?xml version='1.0'?><doc>Tom &amp; Jerry &#233;</doc>", "plain text", ""]
    body = {"text": texts, "target_lang": "DE", "tag_handling": "xml"}
    r = await client.post("/v2/translate", json=body | {"tag_handling_version": "v2"}, headers=AUTH)
    assert r.status_code == 200, r.text


@pytest.mark.parametrize(
    ("source", "translation", "kept"),
    [
        ("hello world", "Hallo Welt.", "hallo Welt"),
        ("Hello world.", "Hallo Welt.", "Hallo Welt."),
        ("  wait", " Warte!\n", " warte\n"),
        ("ok…", "Gut…", "gut…"),
        ("123 apples", "123 Äpfel.", "123 Äpfel"),
    ],
)
def test_preserve(source: str, translation: str, kept: str) -> None:
    assert preserve(source, translation) == kept


async def test_deepl_rack_style_form_arrays_as_mastodon_posts_them(
    client: httpx.AsyncClient,
) -> None:
    # Mastodon's DeepL provider: http.rb's form encoder writes arrays as text[]=..., and a
    # nil source_lang as a bare key.
    body = (
        b"text%5B%5D=%3Cp%3Eone%3C%2Fp%3E&text%5B%5D=two"
        b"&source_lang&target_lang=de&tag_handling=html"
    )
    headers = AUTH | {"content-type": "application/x-www-form-urlencoded"}
    r = await client.post("/v2/translate", content=body, headers=headers)
    assert r.status_code == 200, r.text
    assert [t["text"] for t in r.json()["translations"]] == ["<p>ONE</p>", "TWO"]


async def test_libre_rack_style_q_is_a_list(client: httpx.AsyncClient) -> None:
    form = {"q[]": ["one", "two"], "source": "en", "target": "de"}
    r = await client.post(f"{LT}/translate", data=form)
    assert r.status_code == 200, r.text
    assert r.json()["translatedText"] == ["ONE", "TWO"]


async def test_alternatives_beyond_the_replicas_capacity_are_400_before_work(
    engine: FakeEngine,
) -> None:
    limits = {"max_engine_requests": 8, "max_batch_items": 8}
    async with await client_for(engine, limits=limits) as c:
        body = {"q": ["a b", "c d", "e f"], "source": "en", "target": "de", "alternatives": 3}
        r = await c.post(f"{LT}/translate", json=body)
    assert r.status_code == 400
    assert "alternatives" in r.json()["error"]
    assert engine.requests == []
