"""Markup through the compatibility APIs over the fake engine: LibreTranslate's
``format: html`` (Mastodon) and DeepL's ``tag_handling`` with its tag lists (Weblate, the
``deepl`` client), as JSON and as form bodies; bad values are 400s in each API's shape."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.fakes import FakeEngine

AUTH = {"Authorization": "DeepL-Auth-Key test-key"}
LT = "/libretranslate"


def upper_words(prompt: str) -> str:
    """A model that keeps placeholders: the text after the chat instruction, words in
    capitals."""
    text = prompt.rsplit("\n\n", 1)[-1]
    return re.sub(r"\b[A-Za-z]+\b", lambda m: m.group(0).upper(), text)


def drop_tags(prompt: str) -> str:
    return re.sub(r"</?x\d+/?>", "", upper_words(prompt))


@pytest.fixture
def engine() -> FakeEngine:
    e = FakeEngine()
    e.reply = upper_words
    return e


POST = (
    '<p>Hi <span class="h-card" translate="no"><a href="https://s.example/@ann">@ann</a>'
    '</span>, see <a href="https://x.example/a">this</a>!</p>'
)


async def test_libre_html_as_mastodon_sends_it(client: httpx.AsyncClient) -> None:
    body = {"q": POST, "source": "auto", "target": "de", "format": "html", "api_key": ""}
    r = await client.post(f"{LT}/translate", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["translatedText"] == POST.replace("Hi", "HI").replace(", see", ", SEE").replace(
        ">this<", ">THIS<"
    )


async def test_libre_html_list_and_form(client: httpx.AsyncClient, engine: FakeEngine) -> None:
    engine.reply = drop_tags  # the fallback keeps every tag
    body = {"q": ["<b>one</b> two", "three <i>four</i>"], "source": "en", "target": "de"}
    r = await client.post(f"{LT}/translate", json={**body, "format": "html"})
    assert r.json()["translatedText"] == ["<b>ONE</b> TWO", "THREE <i>FOUR</i>"]
    form = {"q": "<b>one</b> &amp; two", "source": "en", "target": "de", "format": "html"}
    r = await client.post(f"{LT}/translate", data=form)
    assert r.json()["translatedText"] == "<b>ONE</b> &amp; TWO"


async def test_libre_text_format_keeps_tags_as_text(client: httpx.AsyncClient) -> None:
    body = {"q": "a <b>b</b>", "source": "en", "target": "de", "format": "text"}
    r = await client.post(f"{LT}/translate", json=body)
    assert r.json()["translatedText"] == "A <B>B</B>"


WEBLATE = ['Hello <x id="0"></x>, you have <x id="17"></x> files', "Plain &amp; simple"]


async def test_deepl_xml_with_weblate_placeholders(
    client: httpx.AsyncClient, engine: FakeEngine
) -> None:
    body = {
        "text": WEBLATE,
        "source_lang": "EN",
        "target_lang": "DE",
        "formality": "default",
        "tag_handling": "xml",
        "ignore_tags": ["x"],
    }
    for reply in (upper_words, drop_tags):
        engine.reply = reply
        r = await client.post("/v2/translate", json=body, headers=AUTH)
        assert r.status_code == 200, r.text
        assert [t["text"] for t in r.json()["translations"]] == [
            'HELLO <x id="0"></x>, YOU HAVE <x id="17"></x> FILES',
            "PLAIN &amp; SIMPLE",
        ]


async def test_deepl_html_tag_lists_as_form(client: httpx.AsyncClient) -> None:
    form = {
        "text": "<p>Buy <brand>Acme</brand> <em>now</em></p><note>x <q>later</q></note>",
        "target_lang": "DE",
        "tag_handling": "html",
        "ignore_tags": "brand,q",
        "splitting_tags": "note",
        "outline_detection": "0",
    }
    r = await client.post("/v2/translate", data=form, headers=AUTH)
    assert r.status_code == 200, r.text
    assert r.json()["translations"][0]["text"] == (
        "<p>BUY <brand>Acme</brand> <em>NOW</em></p><note>X <q>later</q></note>"
    )


async def test_deepl_without_tag_handling_translates_tags_as_text(
    client: httpx.AsyncClient,
) -> None:
    body = {"text": ["a <b>b</b>"], "target_lang": "DE", "source_lang": "EN"}
    r = await client.post("/v2/translate", json=body, headers=AUTH)
    assert r.json()["translations"][0]["text"] == "A <B>B</B>"


@pytest.mark.parametrize(
    "extra",
    [
        {"tag_handling": "markdown"},
        {"tag_handling": "xml", "outline_detection": "maybe"},
        {"tag_handling": "xml", "ignore_tags": [1, 2]},
        {"tag_handling": "xml", "ignore_tags": ["x" * 200]},
    ],
)
async def test_deepl_bad_tag_parameters_are_400(client: httpx.AsyncClient, extra: dict) -> None:
    body = {"text": ["Hi"], "target_lang": "DE", **extra}
    r = await client.post("/v2/translate", json=body, headers=AUTH)
    assert r.status_code == 400, r.text
    assert set(r.json()) == {"message"}


async def test_native_format_and_markup_in_the_response(client: httpx.AsyncClient) -> None:
    body = {"text": "*Hi* `code`", "source_lang": "en", "target_lang": "de", "format": "markdown"}
    r = await client.post("/translate", json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["translation"] == "*HI* `code`"
    assert out["markup"] == {"segments": 1, "fallback_segments": 0, "structural_segments": 0}
    bad = await client.post("/translate", json={**body, "format": "docx"})
    assert bad.status_code == 422
    plain = await client.post("/translate", json={**body, "format": "text", "text": "Hi"})
    assert plain.json()["markup"] is None
