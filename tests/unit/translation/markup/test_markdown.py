from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from serve_app.translation.markup import Document, parse

MD = """---
title: Guide
---

# Install *it* #

Run `pip install x` and see [the docs](https://ex.com/a_(b) "Docs") or ![logo](l.png).
Escaped \\*stars\\* &amp; entities, {count} items, <kbd>Ctrl</kbd>{HARD}
after a hard break.

> Quoted line one
> quoted line two

- item **one**
  continued
- item two

| Name | Value |
|------|-------|
| a *b* | `c` |

```python
print("not translated")
```

    indented code

<div>html block</div>

Visit <https://auto.example/x> now.
""".replace("{HARD}", "  ")


def identity(doc: Document) -> str:
    return doc.rebuild([s.restore(s.source()) or "" for s in doc.segments])


# Headings and table cells are one line each, their edge whitespace copied verbatim.
HEADINGS_AND_CELLS = ["# Title \t\r\n", "| a  | b \t|\r\n|--|--|\r\n| c  | d  |\r\n"]


@pytest.mark.parametrize(
    "text", [MD, "", "plain", "# Only a heading", "a\\\nb", *HEADINGS_AND_CELLS]
)
def test_round_trip_is_byte_for_byte(text: str) -> None:
    doc = parse("markdown", text)
    assert identity(doc) == text
    fallback = [s.join_runs([r.text for r in s.runs()]) for s in doc.segments]
    assert doc.rebuild(fallback) == text


def test_segments_show_inline_markup_as_placeholders() -> None:
    sources = [s.source() for s in parse("markdown", MD).segments]
    assert "Install <x1>it</x1>" in sources
    assert (
        "Run <x1/> and see <x2>the docs</x2> or <x3/>.\nEscaped *stars* & entities, <x4/> "
        "items, <x5/>Ctrl<x6/><x7/>after a hard break."
    ) in sources
    assert "Quoted line one\nquoted line two" in sources
    assert "Visit <x1/> now." in sources
    assert not any("not translated" in s or "indented code" in s for s in sources)
    assert not any("html block" in s for s in sources)


def test_translation_keeps_urls_escapes_and_quote_prefixes() -> None:
    doc = parse("markdown", "> Line *one*\n> line two\n\nSee [docs](https://x.y/a_b) \\*now\\*\n")
    quote, link = doc.segments
    out = doc.rebuild(
        [
            quote.restore("Zeile <x1>eins</x1>\nZeile zwei") or "",
            link.restore("Siehe <x1>Doku</x1> *jetzt*") or "",
        ]
    )
    assert out == "> Zeile *eins*\n> Zeile zwei\n\nSiehe [Doku](https://x.y/a_b) \\*jetzt\\*\n"


# Line ends whose whitespace markdown-it leaves out of its inline tokens: the one trailing
# space of a soft break, the spaces of a hard break, the next line's indentation, and CRLF
# or CR (which it reads as LF). Each inline text is translated, and what is not translated
# comes back byte for byte. All letters are translatable text: upper-casing the segments
# upper-cases the document.
LINE_ENDS = [
    ("hello there \nworld again\n", "hello there \nworld again"),
    ("hello there\\\n  world again\n", "hello there<x1/>world again"),
    ("hello there\t\n\tworld again\n", "hello there\t\n\tworld again"),
    ("hello there\n   world again\n", "hello there\n   world again"),
    ("- hello there \n  world again\n- two \n  three\n", "hello there \nworld again"),
    ("- hello there  \n     world again\n", "hello there<x1/>world again"),
    ("> hello there \n> world again\n", "hello there \nworld again"),
    ("> hello there  \n>   world *again* \n> end\n", "hello there<x1/>world <x2>again</x2> \nend"),
    ("hello there \nworld again\n===\n", "hello there \nworld again"),
    ("hello there\r\nworld again\r\n", "hello there\nworld again"),
    ("hello there \r\nworld again\r\n", "hello there \nworld again"),
    ("hello there  \r\nworld again\r\n", "hello there<x1/>world again"),
    ("> hello there\r\n> world again\r\n\r\nnext\r\n", "hello there\nworld again"),
    ("- hello there\r\n  world again\r\n", "hello there\nworld again"),
    ("hello there\rworld again\r", "hello there\nworld again"),
    ("> hello there\r> world again\r", "hello there\nworld again"),
    ("> hello <!-- 1\r\n> 2 -->there again\r\n", "hello <x1/>there again"),
]


@pytest.mark.parametrize(("text", "first"), LINE_ENDS)
def test_line_ends_are_translated_and_kept(text: str, first: str) -> None:
    doc = parse("markdown", text)
    assert [s.source() for s in doc.segments][:1] == [first]
    assert identity(doc) == text
    upper = [s.restore(s.source().upper()) for s in doc.segments]
    assert None not in upper
    assert doc.rebuild([u or "" for u in upper]) == text.upper()
    runs = [s.join_runs([r.text.upper() for r in s.runs()]) for s in doc.segments]
    assert doc.rebuild(runs) == text.upper()


def test_crlf_document_gets_crlf_line_breaks_back() -> None:
    doc = parse("markdown", "> Line one\r\n> line two  \r\n> three\r\n")
    (quote,) = doc.segments
    out = quote.restore("Zeile eins\nZeile zwei<x1/>drei")
    assert doc.rebuild([out or ""]) == "> Zeile eins\r\n> Zeile zwei  \r\n> drei\r\n"


def test_crlf_in_the_answer_is_not_doubled() -> None:
    doc = parse("markdown", "one two\r\nthree\r\n")
    (segment,) = doc.segments
    assert doc.rebuild([segment.restore("eins zwei\r\ndrei") or ""]) == "eins zwei\r\ndrei\r\n"


def test_each_paragraph_keeps_its_own_line_ends() -> None:
    # Mixed documents (a CRLF file edited with an LF editor): a translation's line breaks
    # are its paragraph's, not the document's first.
    source = "one two\nthree\n\nfour five\r\nsix\r\n\n> seven\r> eight\r"
    doc = parse("markdown", source)
    answers = ["eins zwei\ndrei", "vier fünf\r\nsechs", "sieben\neins"]
    restored = [seg.restore(a) or "" for seg, a in zip(doc.segments, answers, strict=True)]
    assert doc.rebuild(restored) == (
        "eins zwei\ndrei\n\nvier fünf\r\nsechs\r\n\n> sieben\r> eins\r"
    )


def test_an_escape_is_kept_in_its_own_paragraph_only() -> None:
    doc = parse("markdown", "a \\* star\n\nplain words\n")
    starred, plain = doc.segments
    assert starred.source() == "a * star"
    out = [starred.restore("ein * Stern") or "", plain.restore("2 * 3 Wörter") or ""]
    assert doc.rebuild(out) == "ein \\* Stern\n\n2 * 3 Wörter\n"


_REPARSE = MarkdownIt("commonmark").enable(["table", "strikethrough"])


def _blocks(text: str) -> list[tuple[object, ...]]:
    """The block structure markdown-it reads in ``text``: each block token's type, tag,
    nesting, markup and level, an inline token with its children's types and contents."""
    return [
        (
            tok.type,
            tok.tag,
            tok.nesting,
            tok.markup,
            tok.level,
            tuple((c.type, c.content) for c in tok.children or ()),
        )
        for tok in _REPARSE.parse(text)
    ]


# Paragraphs whose continuation lines have different prefixes in the source: a lazy
# continuation line (a list item's or a block quote's, without its indentation or "> ").
RAGGED = [
    "- a list item whose first line\n  continues here indented\n"
    "continues here lazily (no indent)\n  and indented again\n",
    "> first line\n> second\nthird lazy\n",
    "> first line\nlazy second\n> third\n\nafter the quote\n",
    "- item one\n  two\n three\nfour\n- next item\n",
    "> - quoted item\n>   continued\n  lazy one\n> lazy two\n",
    "1. numbered\r\n   continued\r\nlazy\r\n",
    "> hard break  \nlazy after it\n> *emphasis\nacross* lines\n",
    # A tab crossing the item's indentation (markdown-it passes its other columns as spaces).
    "- item\n\tlazy tab\n",
    "- a\n  b\n\tc\n \td\n",
    "1. item\n \tlazy\n- *emphasis\n\tacross* lines\n",
]


@pytest.mark.parametrize("text", RAGGED)
def test_ragged_continuation_lines_are_translated(text: str) -> None:
    doc = parse("markdown", text)
    assert identity(doc) == text
    upper = [s.restore(s.source().upper()) for s in doc.segments]
    assert None not in upper
    out = doc.rebuild([u or "" for u in upper])
    words = "".join(c if c.isalpha() else " " for c in text).split()
    assert words
    assert all(w.upper() in out for w in words)
    assert not any(c.islower() for c in out)  # nothing left untranslated
    assert _blocks(out) == _blocks(text.upper())
    runs = doc.rebuild([s.join_runs([r.text.upper() for r in s.runs()]) for s in doc.segments])
    assert _blocks(runs) == _blocks(text.upper())


def test_ragged_translation_lines_take_the_containers_prefix() -> None:
    doc = parse("markdown", "> first line\nlazy\n> third\n")
    (quote,) = doc.segments
    assert quote.source() == "first line\nlazy\nthird"
    # More lines than the source's, each behind "> ": still one paragraph in the quote.
    out = doc.rebuild([quote.restore("erste Zeile\nträge\ndritte\nvierte") or ""])
    assert out == "> erste Zeile\n> träge\n> dritte\n> vierte\n"
    source_blocks = _blocks("> first line\nlazy\n> third\n")
    assert [b[:5] for b in _blocks(out)] == [b[:5] for b in source_blocks]


_WORDS = st.lists(st.sampled_from(["hello", "there", "world", "again", "a", "b"]), min_size=1)
_LINE = _WORDS.map(" ".join)
# A line's end: what may precede the line break and what may open the next line.
_BEFORE = st.sampled_from(["", " ", "  ", "   ", "\\", "\t", " \t", "\t ", "*"])
_INDENT = st.sampled_from(["", " ", "  ", "\t", " \t"])


@st.composite
def _paragraph(draw: st.DrawFn, newline: str) -> str:
    """A paragraph, list item or block quote of a few lines, line ends spelled every way."""
    first, rest = draw(st.sampled_from([("", ""), ("> ", "> "), ("- ", "  "), ("1. ", "   ")]))
    lines = draw(st.lists(_LINE, min_size=1, max_size=4))
    out = first + lines[0]
    for line in lines[1:]:
        # A line may be a lazy continuation: its container's prefix left out, in part or all,
        # or a tab in its place (which markdown-it expands across the container's indentation).
        prefix = draw(st.sampled_from(sorted({rest, rest[:1], "", "\t", " \t"})))
        indent = draw(_INDENT if prefix == rest else st.sampled_from(["", " "]))
        out += draw(_BEFORE) + newline + prefix + indent + line
    return out + newline


_NEWLINE = st.sampled_from(["\n", "\r\n", "\r"])
# Paragraphs each with their own line ends (and the blank line after it): a document edited
# with editors of both kinds. A translation's line breaks are its own paragraph's.
_MIXED = st.lists(
    _NEWLINE.flatmap(lambda nl: _paragraph(nl).map(lambda p: p + nl)), min_size=1, max_size=3
).map("".join)


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        _NEWLINE.flatmap(lambda nl: st.lists(_paragraph(nl), min_size=1, max_size=3).map(nl.join)),
        _MIXED,
    )
)
def test_any_line_ends_round_trip_and_translate(text: str) -> None:
    doc = parse("markdown", text)
    assert identity(doc) == text
    upper = doc.rebuild([s.restore(s.source().upper()) or "" for s in doc.segments])
    runs = [s.join_runs([r.text.upper() for r in s.runs()]) for s in doc.segments]
    if any(s.source_prefixes for s in doc.segments):
        # Lazy lines come back with their container's prefix: the same blocks, all upper-cased.
        assert not any(c.islower() for c in upper)
        assert _blocks(upper) == _blocks(text.upper())
        assert _blocks(doc.rebuild(runs)) == _blocks(text.upper())
        return
    assert upper == text.upper()  # every word was in a segment, all else byte for byte
    assert doc.rebuild(runs) == text.upper()


# Front matter (found 2026-12-06): markdown-it read it as a thematic break and a setext
# heading, and its lines, keys included, were a segment to translate.
FRONT_MATTERS = {
    "yaml": "---\ntitle: My post\ntags: [news, blog]\ndraft: false\n---\n",
    "yaml-dots": "---\ntitle: My post\n...\n",
    "toml": "+++\ntitle = 'My post'\ndraft = false\n+++\n",
    "crlf": "---\r\ntitle: My post\r\n---\r\n",
    "cr": "---\rtitle: My post\r---\r",
    "bom": "\ufeff---\ntitle: My post\n---\n",
    "spaces": "--- \t\ntitle: My post\n---  \n",
    "empty": "---\n---\n",
}


@pytest.mark.parametrize("front", FRONT_MATTERS.values(), ids=FRONT_MATTERS.keys())
def test_front_matter_is_copied_not_translated(front: str) -> None:
    text = front + "\nHello *world*.\n"
    doc = parse("markdown", text)
    assert [s.source() for s in doc.segments] == ["Hello <x1>world</x1>."]
    assert identity(doc) == text
    translated = doc.segments[0].restore("Hallo <x1>Welt</x1>.") or ""
    assert doc.rebuild([translated]) == front + "\nHallo *Welt*.\n"
    assert parse("markdown", front).segments == []


@pytest.mark.parametrize(
    "text",
    [
        "---\ntitle: My post\n\nHello.\n",  # never closed: a thematic break
        "Intro.\n\n---\ntitle: My post\n---\n",  # not at the start
        " ---\ntitle: My post\n---\n",  # indented
        "+++\ntitle: My post\n---\n",  # closed by the other kind's line
    ],
)
def test_what_is_not_front_matter_is_read_as_before(text: str) -> None:
    sources = [s.source() for s in parse("markdown", text).segments]
    assert any("title: My post" in s for s in sources), sources


def test_the_front_matter_of_the_guide_is_no_segment() -> None:
    sources = [s.source() for s in parse("markdown", MD).segments]
    assert not any("title" in s for s in sources), sources
    assert sources[0] == "Install <x1>it</x1>"


# Alert markers (found 2026-12-06): GitHub's ``> [!NOTE]`` and Obsidian's callouts were
# words of the quote's text, translated; the page showed a plain quote.
@pytest.mark.parametrize(
    ("text", "source", "translated", "expected"),
    [
        (
            "> [!NOTE]\n> Useful information.\n",
            "<x1/>\nUseful information.",
            "<x1/>\nNützliche Information.",
            "> [!NOTE]\n> Nützliche Information.\n",
        ),
        (
            "> [!warning]- Careful\r\n> Hot.\r\n",
            "<x1/> Careful\nHot.",
            "<x1/> Vorsicht\nHeiß.",
            "> [!warning]- Vorsicht\r\n> Heiß.\r\n",
        ),
        (
            "- > [!TIP]\n  > Try it.\n",
            "<x1/>\nTry it.",
            "<x1/>\nProbier es.",
            "- > [!TIP]\n  > Probier es.\n",
        ),
    ],
)
def test_an_alert_marker_is_kept(text: str, source: str, translated: str, expected: str) -> None:
    doc = parse("markdown", text)
    assert [s.source() for s in doc.segments] == [source]
    assert identity(doc) == text
    assert doc.rebuild([doc.segments[0].restore(translated) or ""]) == expected


@pytest.mark.parametrize(
    "text",
    [
        "[!NOTE]\nnot in a quote\n",
        "> \\[!NOTE]\n> escaped\n",
        "> First paragraph.\n>\n> [!NOTE] not the first\n",
    ],
)
def test_what_is_no_alert_marker_is_text(text: str) -> None:
    doc = parse("markdown", text)
    assert any("[!NOTE]" in s.source() for s in doc.segments)
    assert identity(doc) == text
