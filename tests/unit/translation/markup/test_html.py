from __future__ import annotations

import pytest

from serve_app.translation.markup import Document, MarkupOptions, parse

MASTODON = (
    '<p><span class="h-card" translate="no"><a href="https://social.example/@bob" '
    'class="u-url mention">@<span>bob</span></a></span> Thanks! Read '
    '<a href="https://news.example/a?x=1&amp;y=2" rel="nofollow noopener" target="_blank">'
    '<span class="invisible">https://</span><span class="ellipsis">news.example/a</span>'
    '<span class="invisible">?x=1&amp;y=2</span></a> &amp; <em>enjoy</em> it&#39;s '
    '&quot;great&quot;<br />Cheers <a href="https://social.example/tags/cats" '
    'class="mention hashtag" rel="tag">#<span>cats</span></a></p><p>Second paragraph.</p>'
)
DOCS = [
    MASTODON,
    "<!DOCTYPE html><html><head><title>T</title><style>p{x:1}</style></head>"
    "<body><h1 class=x>Title</h1><ul><li>One<li>Two</ul><!-- note --></body></html>",
    "<div>Unclosed <b>bold <i>both</div> stray</span> tail &amp; more &lt; less",
    "<P CLASS='a'>Upper <BR>case</P >\n\n<table><tr><td>Cell <b>one</b></td></tr></table>",
    "",
    "plain text only",
]


def identity(doc: Document) -> str:
    return doc.rebuild([s.restore(s.source()) or "" for s in doc.segments])


def fallback_identity(doc: Document) -> str:
    return doc.rebuild([s.join_runs([r.text for r in s.runs()]) for s in doc.segments])


@pytest.mark.parametrize("html", DOCS)
def test_round_trip_is_byte_for_byte(html: str) -> None:
    doc = parse("html", html)
    assert doc.verbatim() == html
    assert identity(doc) == html
    assert fallback_identity(doc) == html


def test_bare_special_characters_come_back_escaped() -> None:
    # Browsers read a bare "&" or "<" followed by a space as text; the answer is written
    # well-formed.
    doc = parse("html", "<p>Fish & chips < 5 euros</p>")
    assert identity(doc) == "<p>Fish &amp; chips &lt; 5 euros</p>"


def test_blocks_are_segments_addresses_placeholders_hashtags_words() -> None:
    doc = parse("html", MASTODON)
    assert [s.source() for s in doc.segments] == [
        '<x1/> Thanks! Read <x2/> & <x3>enjoy</x3> it\'s "great"<x4/>'
        "Cheers <x5>#<x6>cats</x6></x5>",
        "Second paragraph.",
    ]


def test_translation_keeps_tags_attributes_and_entity_spellings() -> None:
    doc = parse("html", MASTODON)
    first, second = doc.segments
    out = doc.rebuild(
        [
            first.restore(
                '<x1/> Danke! Lies <x2/> & <x3>genieße</x3> es, "toll"<x4/>'
                "Prost <x5>#<x6>Katzen</x6></x5>"
            )
            or "",
            second.restore("Zweiter Absatz.") or "",
        ]
    )
    assert out == MASTODON.replace("Thanks! Read", "Danke! Lies").replace(
        "<em>enjoy</em> it&#39;s &quot;great&quot;", "<em>genieße</em> es, &quot;toll&quot;"
    ).replace("Cheers", "Prost").replace("Second paragraph.", "Zweiter Absatz.").replace(
        "<span>cats</span>", "<span>Katzen</span>"
    )


@pytest.mark.parametrize(
    "html",
    [
        '<p>Hi <span translate="no">Acme Cloud</span> there</p>',
        '<p>Hi <span class="brand notranslate">Acme Cloud</span> there</p>',
        "<p>Hi <code>Acme Cloud</code> there</p>",
        "<p>Hi <kbd>Acme Cloud</kbd> there</p>",
    ],
)
def test_untouched_subtrees_are_placeholders(html: str) -> None:
    (seg,) = parse("html", html).segments
    assert seg.source() == "Hi <x1/> there"


def test_untouched_blocks_are_copied_between_segments() -> None:
    html = '<p>Run this:</p><pre><code>rm -rf build</code></pre><div translate="no">Keep</div>'
    doc = parse("html", html)
    assert [s.source() for s in doc.segments] == ["Run this:"]
    assert doc.parts[-1] == '</p><pre><code>rm -rf build</code></pre><div translate="no">Keep</div>'


def test_ignore_and_splitting_options() -> None:
    html = "<p>Buy <brand>Acme Cloud</brand> now <span>here</span></p>"
    opts = MarkupOptions(ignore_tags=frozenset({"brand"}), splitting_tags=frozenset({"span"}))
    assert [s.source() for s in parse("html", html, opts).segments] == ["Buy <x1/> now", "here"]
    opts = MarkupOptions(non_splitting_tags=frozenset({"p", "div"}))
    doc = parse("html", "<div><p>One</p><p>Two</p></div>", opts)
    assert [s.source() for s in doc.segments] == ["<x1><x2>One</x2><x3>Two</x3></x1>"]


def test_weblate_placeholders_with_ignore_tags() -> None:
    text = 'Hello <x id="1"></x>, you have <x id="2"></x> new <b>files</b>'
    opts = MarkupOptions(ignore_tags=frozenset({"x"}))
    doc = parse("xml", text, opts)
    (seg,) = doc.segments
    assert seg.source() == "Hello <x1/>, you have <x2/> new <x3>files</x3>"
    out = seg.restore("Hallo <x1/>, du hast <x2/> neue <x3>Dateien</x3>")
    assert doc.rebuild([out or ""]) == (
        'Hallo <x id="1"></x>, du hast <x id="2"></x> neue <b>Dateien</b>'
    )


XML = (
    "<document><meta><title>A document's title</title></meta><content>"
    "<par>This is the <b>first</b> sentence.</par><par>Third.</par></content></document>"
)


def test_xml_outline_detection_finds_structure() -> None:
    doc = parse("xml", XML)
    assert [s.source() for s in doc.segments] == [
        "A document's title",
        "This is the <x1>first</x1> sentence.",
        "Third.",
    ]
    assert identity(doc) == XML


def test_xml_without_outline_detection_splits_only_at_splitting_tags() -> None:
    off = MarkupOptions(outline_detection=False)
    (seg,) = parse("xml", XML, off).segments
    assert seg.source().startswith("<x1><x2><x3>A document's title</x3></x2><x4><x5>")
    manual = MarkupOptions(outline_detection=False, splitting_tags=frozenset({"par", "title"}))
    assert [s.source() for s in parse("xml", XML, manual).segments] == [
        "A document's title",
        "This is the <x1>first</x1> sentence.",
        "Third.",
    ]


def test_xml_names_keep_their_case() -> None:
    opts = MarkupOptions(ignore_tags=frozenset({"Keep"}))
    (seg,) = parse("xml", "Say <Keep>this</Keep> and <keep>that</keep>", opts).segments
    assert seg.source() == "Say <x1/> and <x2>that</x2>"


def test_escaped_placeholder_lookalikes_stay_text() -> None:
    (seg,) = parse("html", "<p>Type &lt;x1&gt; here</p>").segments
    assert seg.source() == "Type <x1/>x1<x2/> here"
    assert seg.restore("Tippe <x1/>x1<x2/> hier") == "Tippe &lt;x1&gt; hier"


def test_deep_nesting_is_copied_not_recursed() -> None:
    html = "<span>" * 5000 + "deep" + "</span>" * 5000 + "<p>Shallow text</p>"
    doc = parse("html", html)
    assert identity(doc) == html
    assert doc.segments[-1].source() == "Shallow text"


def test_block_inside_inline_leaves_unpaired_tags_as_void() -> None:
    html = "<a href='/x'>Link <div>block</div> after</a>"
    doc = parse("html", html)
    assert [s.source() for s in doc.segments] == ["<x1/>Link", "block", "after<x1/>"]
    assert identity(doc) == html


@pytest.mark.parametrize("kind", ["xml", "html"])
def test_doctype_internal_subset_is_markup_not_text(kind: str) -> None:
    # The standard parser ends the DOCTYPE at its first ">" and reads the subset's closing
    # "]>" as text: it was sent to the model and came back escaped ("]&gt;").
    source = (
        '<?xml version="1.0"?><!DOCTYPE d [<!ENTITY a "b"><!ENTITY x SYSTEM "file:///etc/passwd">'
        "]>\nHello <p>World</p>"
    )
    doc = parse(kind, source)
    runs = [r.text for s in doc.segments for r in s.runs()]
    assert " ".join(runs).split() == ["Hello", "World"]
    assert doc.verbatim() == source
    upper = doc.rebuild([s.join_runs([r.text.upper() for r in s.runs()]) for s in doc.segments])
    assert upper == source.replace("Hello", "HELLO").replace("World", "WORLD")
