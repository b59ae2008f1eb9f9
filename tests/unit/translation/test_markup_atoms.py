"""Atoms through the translation service with the fake engine: a Mastodon post's link shown
as its address, mention, custom emoji and hashtag cost the structural method no engine
request of their own (only the prose runs are sent), come back byte for byte, and the
placeholder path still validates a well-behaved answer, hashtag translated with its
sentence."""

from __future__ import annotations

from serve_app.core.config import AppConfig
from serve_app.translation.service import TranslationService
from tests.fakes import FakeEngine
from tests.unit.translation.test_markup_translation import (
    Reply,
    html_request,
    prompt_text,
    upper_keeping_tags,
)

MENTION = (
    '<span class="h-card" translate="no"><a href="https://social.example/@bob" '
    'class="u-url mention">@<span>bob</span></a></span>'
)
LINK = (
    '<a href="https://hotels.com/rome" rel="nofollow noopener noreferrer" target="_blank">'
    '<span class="invisible">https://</span><span class="">hotels.com/rome</span>'
    '<span class="invisible"></span></a>'
)
HASHTAG = (
    '<a href="https://social.example/tags/travel" class="mention hashtag" rel="tag">'
    "#<span>travel</span></a>"
)
POST = f"<p>{MENTION} Booked at {LINK} for the trip :blobcat: {HASHTAG} :flag_it:</p>"


async def service(method: str, reply: Reply) -> tuple[TranslationService, FakeEngine]:
    engine = FakeEngine()
    engine.reply = reply
    config = {"markup": {"method": method}, "cache": {"enabled": False}}
    svc = TranslationService(AppConfig.model_validate(config), engine)
    await svc.start()
    return svc, engine


def upper(prompt: str) -> str:
    return prompt_text(prompt).upper()


async def test_structural_method_sends_only_the_prose_runs() -> None:
    svc, engine = await service("structural", upper)
    r = await svc.translate(html_request(POST), "r")
    sent = sorted(prompt_text("".join(map(chr, q.prompt_token_ids))) for q in engine.requests)
    # Before: "hotels.com/rome", ":blobcat:" and ":flag_it:" were runs of their own too.
    assert sent == ["Booked at", "for the trip"]
    assert r.translation == POST.replace("Booked at", "BOOKED AT").replace(
        "for the trip", "FOR THE TRIP"
    )


async def test_placeholder_path_keeps_the_address_and_translates_the_hashtag() -> None:
    svc, engine = await service("placeholders", upper_keeping_tags)
    r = await svc.translate(html_request(POST), "r")
    assert r.markup is not None
    assert (r.markup.fallback_segments, r.markup.structural_segments) == (0, 0)
    (prompt,) = ["".join(map(chr, q.prompt_token_ids)) for q in engine.requests]
    # Atoms are never shown as text.
    assert "hotels.com" not in prompt
    assert "bob" not in prompt
    assert prompt_text(prompt) == (
        "<s1></s1> Booked at <s2></s2> for the trip :blobcat: <s3>#<s4>travel</s4></s3> :flag_it:"
    )
    assert r.translation == (
        # In a sentence, a shortcode is shown to the model (a placeholder would split the
        # segment into more runs for the structural method): this fake upper-cases it.
        f"<p>{MENTION} BOOKED AT {LINK} FOR THE TRIP :BLOBCAT: "
        f"{HASHTAG.replace('>travel<', '>TRAVEL<')} :flag_it:</p>"
    )


async def test_a_post_of_only_atoms_costs_no_engine_request() -> None:
    svc, engine = await service("auto", upper)
    post = f"<p>{MENTION} {LINK} :blobcat:</p><p>{HASHTAG} {HASHTAG}</p>"
    r = await svc.translate(html_request(post), "r")
    assert r.translation == post
    assert engine.requests == []
