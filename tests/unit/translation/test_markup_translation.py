"""Markup through the translation service with the fake engine: the placeholder path when the
model keeps its placeholders, the structural fallback when it does not, and what reaches the
prompt (the family's formatted-translation template)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

import pytest

from serve_app.core.config import AppConfig
from serve_app.core.errors import TextTooLong
from serve_app.core.schemas import BatchTranslateRequest, TextItem, TranslateRequest
from serve_app.translation.service import TranslationService
from tests.fakes import FakeEngine

POST = (
    '<p><span class="h-card" translate="no"><a href="https://s.example/@bob">@<span>bob</span>'
    "</a></span> Thanks for the <em>lovely</em> evening &amp; see you<br>soon</p>"
    "<p>Second <b>paragraph</b>.</p>"
)
_TAG = re.compile(r"<[^>]+>")


def prompt_text(prompt: str) -> str:
    """The text a prompt asks to translate (the HY-MT formatted template wraps it)."""
    if "<source>" in prompt:
        return prompt.rsplit("<source>", 1)[1].rsplit("</source>", 1)[0]
    return prompt.rsplit("\n\n", 1)[-1]


def upper_keeping_tags(prompt: str) -> str:
    """A well-behaved model: translates (upper-cases) the words, keeps the placeholders."""
    text = prompt_text(prompt)
    upper = re.sub(r"\b[A-Za-z]+\b", lambda m: m.group(0).upper(), text)
    return f"<target>{upper}</target>" if "<source>" in prompt else upper


def dropping_tags(prompt: str) -> str:
    """A model that loses its placeholders."""
    return re.sub(r"</?[sx]\d+/?>", "", prompt_text(prompt)).upper()


Reply = Callable[[str], str] | None


async def service(
    family: str = "hy_mt", reply: Reply = None
) -> tuple[TranslationService, FakeEngine]:
    engine = FakeEngine()
    engine.reply = reply
    svc = TranslationService(AppConfig.model_validate({"prompt": {"family": family}}), engine)
    await svc.start()
    return svc, engine


def html_request(text: str = POST, **kw: object) -> TranslateRequest:
    return TranslateRequest(text=text, source_lang="en", target_lang="de", format="html", **kw)


async def test_model_keeping_placeholders_takes_the_placeholder_path() -> None:
    svc, engine = await service(reply=upper_keeping_tags)
    r = await svc.translate(html_request(), "r")
    assert r.markup is not None
    assert (r.markup.segments, r.markup.fallback_segments) == (2, 0)
    assert len(engine.requests) == 2  # one per block, no fallback requests
    assert r.translation == (
        '<p><span class="h-card" translate="no"><a href="https://s.example/@bob">@<span>bob'
        "</span></a></span> THANKS FOR THE <em>LOVELY</em> EVENING &amp; SEE YOU<br>SOON</p>"
        "<p>SECOND <b>PARAGRAPH</b>.</p>"
    )


async def test_hy_mt_gets_its_cards_formatted_translation_prompt() -> None:
    svc, engine = await service(reply=upper_keeping_tags)
    await svc.translate(html_request("<p>Hi <b>there</b></p>"), "r")
    prompt = "".join(chr(i) for i in engine.requests[0].prompt_token_ids)
    assert "<sn></sn>" in prompt
    assert "<source>Hi <s1>there</s1></source>" in prompt


async def test_chat_family_is_told_to_keep_placeholders() -> None:
    svc, engine = await service("chat", reply=upper_keeping_tags)
    r = await svc.translate(html_request("<p>Hi <b>there</b><br>you</p>"), "r")
    prompt = "".join(chr(i) for i in engine.requests[0].prompt_token_ids)
    assert "placeholder" in prompt
    assert prompt.endswith("Hi <x1>there</x1><x2/>you")
    assert r.markup is not None
    assert r.markup.fallback_segments == 0


async def test_model_dropping_tags_falls_back_and_keeps_every_tag() -> None:
    svc, engine = await service(reply=dropping_tags)
    r = await svc.translate(html_request(), "r")
    assert r.markup is not None
    assert (r.markup.segments, r.markup.fallback_segments) == (2, 2)
    assert Counter(_TAG.findall(r.translation)) == Counter(_TAG.findall(POST))
    assert "<em>LOVELY</em>" in r.translation
    assert "&amp;" in r.translation
    # Two placeholder requests, then one per text run.
    assert len(engine.requests) == 2 + 4 + 2


async def test_cut_short_answer_falls_back() -> None:
    svc, engine = await service(reply=upper_keeping_tags)
    engine.truncate_marker = "<s1>"
    r = await svc.translate(html_request("<p>Hi <b>there</b></p>"), "r")
    assert r.markup is not None
    assert r.markup.fallback_segments == 1
    assert r.translation == "<p>HI <b>THERE</b></p>"


async def test_plain_text_variables_survive_a_model_that_drops_them() -> None:
    svc, _ = await service(reply=dropping_tags)
    text = "Hello {name}, you have %d new {count, plural, one {# file} other {# files}}"
    r = await svc.translate(TranslateRequest(text=text, source_lang="en", target_lang="de"), "r")
    assert r.translation == (
        "HELLO {name}, YOU HAVE %d NEW {count, plural, one {# file} other {# files}}"
    )
    assert r.markup is not None
    assert r.markup.fallback_segments == 1


async def test_plain_text_without_variables_takes_the_plain_path() -> None:
    svc, engine = await service()
    r = await svc.translate(TranslateRequest(text="Hello", source_lang="en", target_lang="de"), "r")
    assert r.markup is None
    assert len(engine.requests) == 1


async def test_batch_items_have_their_own_formats_and_tag_options() -> None:
    svc, _ = await service(reply=upper_keeping_tags)
    items = [
        TextItem(text="<p>one <b>two</b></p>", source_lang="en", target_lang="de", format="html"),
        TextItem(
            text='Save <x id="1"></x> now',
            source_lang="en",
            target_lang="de",
            format="xml",
            tag_options={"ignore_tags": ["x"]},
        ),
        TextItem(text="*one* `two`", source_lang="en", target_lang="de", format="markdown"),
    ]
    r = await svc.translate_batch(BatchTranslateRequest(items=items), "r")
    html, xml, md = (x.translation for x in r.results)  # type: ignore[union-attr]
    assert (html, xml, md) == ("<p>ONE <b>TWO</b></p>", 'SAVE <x id="1"></x> NOW', "*ONE* `two`")


async def test_format_and_tag_options_are_part_of_the_cache_key() -> None:
    svc, _ = await service(reply=upper_keeping_tags)
    text = "<p>Hi <i>you</i></p>"
    await svc.translate(html_request(text), "a")
    plain = await svc.translate(
        TranslateRequest(text=text, source_lang="en", target_lang="de"), "b"
    )
    assert not plain.cached
    again = await svc.translate(html_request(text), "c")
    assert again.cached
    assert again.markup is not None
    ignored = await svc.translate(html_request(text, tag_options={"ignore_tags": ["i"]}), "d")
    assert not ignored.cached
    assert ignored.translation == "<p>HI <i>you</i></p>"


async def test_markup_streams_as_one_delta() -> None:
    svc, _ = await service(reply=upper_keeping_tags)
    events = [e async for e in await svc.translate_stream(html_request("<p>Hi <b>x</b></p>"), "r")]
    names = [name for name, _ in events]
    assert names == ["start", "delta", "done"]
    assert events[1][1]["text"] == events[2][1]["translation"] == "<p>HI <b>X</b></p>"


@pytest.mark.parametrize("fmt", ["html", "xml", "markdown", "text"])
async def test_documents_without_words_cost_no_engine_request(fmt: str) -> None:
    svc, engine = await service()
    r = await svc.translate(
        TranslateRequest(text=" 42 — {x} :) ", source_lang="en", target_lang="de", format=fmt),
        "r",
    )
    assert r.translation == " 42 — {x} :) "
    assert engine.requests == []


async def test_a_document_of_too_many_text_runs_is_refused_before_the_engine() -> None:
    # Each run between tags is one engine request when the model loses tags: a paragraph of
    # "<i>a</i>" repeated made 12,500 of them out of one request.
    svc, engine = await service("chat", dropping_tags)
    with pytest.raises(TextTooLong):
        await svc.translate(html_request("<p>" + "<i>a</i> " * 200 + "</p>"), "r1")
    assert engine.requests == []
    await svc.translate(html_request("<p>" + "<i>a</i> " * 100 + "</p>"), "r2")
    assert len(engine.requests) == 101  # the placeholder attempt, then each run
