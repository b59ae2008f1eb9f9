"""What in a post is not words (``markup.atoms``, ``html.is_address``): links whose text is
their address are kept byte for byte like ``translate="no"`` content, links with words and
hashtags are translated, and a text run of addresses, handles or shortcodes (or a hashtag's
name alone) is no run of the structural method."""

from __future__ import annotations

import pytest

from serve_app.translation.markup import parse
from serve_app.translation.markup.atoms import edges, has_words, is_atom

HASHTAG = (
    '<a href="https://social.example/tags/travel" class="mention hashtag" rel="tag">'
    "#<span>travel</span></a>"
)


@pytest.mark.parametrize(
    "token",
    [
        "news.example/en",
        "hotels.com",
        "(Hotels.com),",
        "https://x.example/a?b=1",
        "@alice",
        "@alice@social.example",
        "bob@example.com",
        ":blobcat:",
        ":blobcat::flag_fr:!",
        "#travel",
    ],
)
def test_atoms(token: str) -> None:
    assert is_atom(token)


@pytest.mark.parametrize(
    "token", ["word", "e.g.", "3.5", "a.m.", "v1.2", "and/or", "Note:", "soon.Bye", "z.B."]
)
def test_words(token: str) -> None:
    assert not is_atom(token)


def test_has_words_needs_a_word_that_is_not_an_atom() -> None:
    assert not has_words("news.example/en :blobcat: @alice #travel !")
    assert has_words("see hotels.com")
    assert has_words("I love #travel")
    assert has_words("今天 news.example/zh")
    assert has_words("请看news.example")  # words written against a host are words


def test_edges_split_off_leading_and_trailing_atoms_but_not_hashtags() -> None:
    assert edges("@alice :wave: hi there  news.example/en :blobcat:") == (
        "@alice :wave: ",
        "hi there",
        "  news.example/en :blobcat:",
    )
    assert edges("#travel to Rome #italy") == ("", "#travel to Rome #italy", "")
    assert edges("just words") == ("", "just words", "")
    assert edges("See you soon.Bye") == ("", "See you soon.Bye", "")  # a missing space


def test_a_run_ending_in_shortcodes_sends_only_its_words() -> None:
    doc = parse("html", "<p>Hi <b>there</b> all :blobcat: :wave:</p>")
    (seg,) = doc.segments
    assert [r.text for r in seg.runs()] == ["Hi", "there", "all"]
    out = doc.rebuild([seg.join_runs(["Hallo", "da", "alle"])])
    assert out == "<p>Hallo <b>da</b> alle :blobcat: :wave:</p>"


@pytest.mark.parametrize(
    "link",
    [
        '<a href="https://hotels.com">hotels.com</a>',
        '<a href="https://hotels.com/">www.hotels.com</a>',
        '<a href="https://news.example/en/12" rel="nofollow"><span class="invisible">https://'
        '</span><span class="">news.example/en</span><span class="invisible"></span></a>',
        '<a href="https://github.com/org/repo/blob/main/x"><span class="invisible">https://'
        '</span><span class="ellipsis">github.com/org/repo/blob</span><span class="invisible">'
        "/main/x</span></a>",
        '<a href="https://example.org/docs/v2">example.org/docs/…</a>',
        '<a href="https://social.example/@bob" class="u-url mention">@<span>bob</span></a>',
    ],
)
def test_link_showing_its_address_is_one_atom_kept_byte_exact(link: str) -> None:
    html = f"<p>Book at {link} today</p>"
    doc = parse("html", html)
    (seg,) = doc.segments
    assert seg.source() == "Book at <x1/> today"
    assert [r.text for r in seg.runs()] == ["Book at", "today"]
    out = seg.restore("Bucht bei <x1/> heute")
    assert doc.rebuild([out or ""]) == f"<p>Bucht bei {link} heute</p>"


@pytest.mark.parametrize(
    "link",
    [
        '<a href="https://hotels.com/deals">our best deals</a>',
        '<a href="https://example.com/docs">docs</a>',  # a word that is also in the href
        '<a href="https://example.com">Example</a>',
        '<a href="https://example.com/top">#1 in Rome</a>',  # not a hashtag: words
    ],
)
def test_link_with_words_is_translated(link: str) -> None:
    (seg,) = parse("html", f"<p>See {link}</p>").segments
    assert seg.source().startswith("See <x1>")
    assert len(seg.runs()) == 2


def test_hashtag_is_translated_with_its_sentence_never_alone() -> None:
    html = f"<p>Off to Rome {HASHTAG} tomorrow</p>"
    doc = parse("html", html)
    (seg,) = doc.segments
    assert seg.source() == "Off to Rome <x1>#<x2>travel</x2></x1> tomorrow"
    out = seg.restore("Morgen nach Rom <x1>#<x2>Reisen</x2></x1>")
    assert doc.rebuild([out or ""]) == (
        "<p>Morgen nach Rom " + HASHTAG.replace(">travel<", ">Reisen<") + "</p>"
    )
    # The structural method translates runs alone: the tag's name is not sent on its own.
    assert [r.text for r in seg.runs()] == ["Off to Rome", "tomorrow"]
    assert doc.rebuild([seg.join_runs(["A", "B"])]) == f"<p>A {HASHTAG} B</p>"


def test_runs_of_only_addresses_handles_and_shortcodes_are_not_sent() -> None:
    html = (
        "<p>Good <b>morning</b> :blobcat: :flag_fr: <i>news.example/en</i> <br>"
        "@alice@social.example <em>bye</em></p>"
    )
    doc = parse("html", html)
    (seg,) = doc.segments
    assert [r.text for r in seg.runs()] == ["Good", "morning", "bye"]
    out = doc.rebuild([seg.join_runs(["Guten", "Morgen", "tschüss"])])
    assert out == html.replace("Good", "Guten").replace("morning", "Morgen").replace(
        "bye", "tschüss"
    )


@pytest.mark.parametrize(
    "html",
    [
        f"<p>{HASHTAG} {HASHTAG}</p>",  # a last line of tags: no sentence
        "<p>:blobcat: <a href='https://hotels.com'>hotels.com</a></p>",
        "<p>news.example/en</p>",
    ],
)
def test_paragraph_without_words_is_copied(html: str) -> None:
    doc = parse("html", html)
    assert doc.segments == []
    assert doc.verbatim() == html


def test_markdown_link_showing_its_address_is_one_atom() -> None:
    text = "Book at [hotels.com](https://hotels.com) or [our deals](https://hotels.com/d) :wave:"
    doc = parse("markdown", text)
    (seg,) = doc.segments
    assert seg.source() == "Book at <x1/> or <x2>our deals</x2> :wave:"
    assert [r.text for r in seg.runs()] == ["Book at", "or", "our deals"]
    out = doc.rebuild([seg.join_runs(["Buche bei", "oder", "unsere Angebote"])])
    assert out == text.replace("Book at", "Buche bei").replace(" or ", " oder ").replace(
        "our deals", "unsere Angebote"
    )
