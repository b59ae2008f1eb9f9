"""Markdown beyond CommonMark (``markup/markdown_syntax.py``): containers and admonitions
(MkDocs' too), math, footnotes, task-list boxes and Liquid/Jinja tags. Each was sent to the
model as words before (these tests fail on that code): what the model sees, the
untranslated round trip byte for byte, a translation put back with the markup kept, and
crafted inputs read in linear time."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

import pytest

from serve_app.translation.markup import Document, parse

PAGE = """# Guide

::: warning Read this first
The *body* is translated.

- [ ] Buy milk
- [x] Walk the dog
:::

:::note[A Docusaurus title]
Second body.
:::

:::tip
> Quoted inside.
:::

Energy is $E = mc^2$, prices stay prose: $5 and $10.

$$
\\int_0^1 x\\,dx = \\frac{1}{2}
$$

A claim[^1] and an undefined one[^missing].

[^1]: The note's text, translated.
    Its second line.

Hello {{ page.title | upcase }}, {% include note.html %} and {%- if user -%}.

{% raw %}
"""

SOURCES = [
    "Guide",
    "Read this first",
    "The <x1>body</x1> is translated.",
    "<x1/> Buy milk",
    "<x1/> Walk the dog",
    "A Docusaurus title",
    "Second body.",
    "Quoted inside.",
    "Energy is <x1/>, prices stay prose: $5 and $10.",
    "A claim<x1/> and an undefined one<x2/>.",
    "The note's text, translated.\nIts second line.",
    "Hello <x1/>, <x2/> and <x3/>.",
]


def identity(doc: Document) -> str:
    return doc.rebuild([s.restore(s.source()) or "" for s in doc.segments])


def shouted(doc: Document) -> str:
    """The document with each segment's words upper-cased, its placeholders kept."""
    answers = []
    for s in doc.segments:
        source = s.source()
        words = "".join(c.upper() if not _in_tag(source, i) else c for i, c in enumerate(source))
        answers.append(s.restore(words) or "")
    return doc.rebuild(answers)


def _in_tag(text: str, at: int) -> bool:
    return text.rfind("<", 0, at + 1) > text.rfind(">", 0, at)


def test_the_page_shows_only_words_to_the_model() -> None:
    doc = parse("markdown", PAGE)
    assert [s.source() for s in doc.segments] == SOURCES


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_the_page_round_trips_byte_for_byte(newline: str) -> None:
    text = PAGE.replace("\n", newline)
    doc = parse("markdown", text)
    assert identity(doc) == text
    fallback = [s.join_runs([r.text for r in s.runs()]) for s in doc.segments]
    assert doc.rebuild(fallback) == text


def test_a_translation_keeps_every_construct() -> None:
    out = shouted(parse("markdown", PAGE))
    for kept in [
        "::: warning READ THIS FIRST\n",
        ":::note[A DOCUSAURUS TITLE]\n",
        ":::tip\n> QUOTED INSIDE.\n:::\n",
        "- [ ] BUY MILK\n- [x] WALK THE DOG\n:::\n",
        "$E = mc^2$, PRICES STAY PROSE: $5 AND $10.",
        "$$\n\\int_0^1 x\\,dx = \\frac{1}{2}\n$$\n",
        "A CLAIM[^1] AND AN UNDEFINED ONE[^missing].",
        "[^1]: THE NOTE'S TEXT, TRANSLATED.\n    ITS SECOND LINE.",
        "HELLO {{ page.title | upcase }}, {% include note.html %} AND {%- if user -%}.",
        "\n{% raw %}\n",
    ]:
        assert kept in out


@pytest.mark.parametrize(
    "text",
    [
        "a $ b $ c",  # spaces inside: prose
        "from $5 to $10",  # a digit after the closing dollar: prices
        "\\[ ] escaped box",
        "- [ ]no space after the box",
        "[ ] not in a list",
        "::: \nno name\n:::",
        "{% 100 % of it %}",  # a "%" inside: not a tag
    ],
)
def test_what_is_none_of_them_stays_text(text: str) -> None:
    doc = parse("markdown", text)
    assert len(doc.segments) == 1
    assert identity(doc) == text
    assert "<x" not in doc.segments[0].source()


MKDOCS = """!!! note "Read *this*"
    The body is translated.
    Its second line.

    A second paragraph.

??? tip
    Folded, titled by its type.

???+ warning ""
    Open, no title.

!!! danger highlight "Don't"
    - one
    - two

- A list
    !!! info "Nested"
        Deep body.

After.
"""


def test_mkdocs_admonitions_show_their_titles_and_bodies_only() -> None:
    """Before 2026-12-07 the marker line and the body were one paragraph to the model
    (``!!! note "Read this"`` with ``note`` to translate)."""
    doc = parse("markdown", MKDOCS)
    assert [s.source() for s in doc.segments] == [
        "Read <x1>this</x1>",
        "The body is translated.\nIts second line.",
        "A second paragraph.",
        "Folded, titled by its type.",
        "Open, no title.",
        "Don't",
        "one",
        "two",
        "A list",
        "Nested",
        "Deep body.",
        "After.",
    ]
    assert identity(doc) == MKDOCS
    out = shouted(doc)
    for kept in [
        '!!! note "READ *THIS*"\n    THE BODY IS TRANSLATED.\n    ITS SECOND LINE.\n',
        "??? tip\n    FOLDED, TITLED BY ITS TYPE.\n",
        '???+ warning ""\n    OPEN, NO TITLE.\n',
        '!!! danger highlight "DON\'T"\n    - ONE\n    - TWO\n',
        '    !!! info "NESTED"\n        DEEP BODY.\n',
    ]:
        assert kept in out


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("Inline $$x^2$$ here.", "Inline <x1/> here."),
        ("both $x$ and $$y$$.", "both <x1/> and <x2/>."),
        ("a $$x\ny$$ b", "a <x1/> b"),
        ("earn $$ fast and $$ more", "earn $$ fast and $$ more"),  # spaces inside: prose
        ("from $$5 to $$10", "from $$5 to $$10"),
        ("price $$$ high $$$", "price $$$ high $$$"),
    ],
)
def test_double_dollar_math_in_a_sentence_is_one_placeholder(text: str, shown: str) -> None:
    """``$$x$$`` in a sentence showed the model ``$<x1/>$`` before 2026-12-07 (its outer
    dollars as words); Pandoc's spacing rules keep prose with dollars prose."""
    doc = parse("markdown", text)
    assert [s.source() for s in doc.segments] == [shown]
    assert identity(doc) == text


def test_a_stray_display_dollar_does_not_swallow_the_page() -> None:
    doc = parse("markdown", "$$ x\n\nA paragraph after it.\n")
    assert [s.source() for s in doc.segments] == ["$$ x", "A paragraph after it."]


def seconds(work: Callable[[], object]) -> float:
    """The CPU time of ``work`` in this thread (late in a run of the unit tier, the whole
    process's time read 0.96 s for a 0.17 s parse: threads that earlier tests left running
    count in it), the least of two runs, with the garbage collector off (its full passes
    cost what the session's heap holds, not what the parser does)."""
    gc.collect()
    gc.disable()
    try:
        times = []
        for _ in range(2):
            start = time.thread_time()
            work()
            times.append(time.thread_time() - start)
        return min(times)
    finally:
        gc.enable()


FOOTNOTE = "[^a]: defined\n\n"


@pytest.mark.parametrize(
    ("head", "unit"),
    [
        (FOOTNOTE, "[^"),  # the plugin's rule scanned from each "[^" to a "]" or a space
        (FOOTNOTE, "x[^"),
        ("", "[^"),
        ("", "$"),
        ("", "a $"),
        ("", "$x"),
        ("", "$$x\n"),  # each display opener looks for its closing line
        ("", "$$\n"),
        ("", "$$a "),  # each inline opener looks no further than the next "$$"
        ("", "a $$"),
        ("", "$$a$"),
        ("", "!!! note\n"),
        ("", '??? a "t"\n    '),
        ("", ":"),
        ("", ":::note\n"),  # containers never closed, each up to the end of the page
        ("", "::: a\n\n"),
        ("", "{%"),
        ("", "{{"),
        ("", "{% x "),
        ("", "- [ ] "),
    ],
)
def test_crafted_inputs_are_read_in_linear_time(head: str, unit: str) -> None:
    small = head + unit * (20_000 // len(unit))
    large = head + unit * (80_000 // len(unit))
    first = seconds(lambda: parse("markdown", small))
    assert first < 2  # before the large one: quadratic work fails here in seconds, not hours
    took = seconds(lambda: parse("markdown", large))
    assert took < 6
    assert took / max(first, 0.05) < 8  # four times the input
    assert identity(parse("markdown", large)) == large


def test_a_long_page_of_them_is_linear() -> None:
    small, large = PAGE * 50, PAGE * 500
    ratio = seconds(lambda: parse("markdown", large)) / max(
        seconds(lambda: parse("markdown", small)), 1e-3
    )
    assert ratio < 25  # ten times the input: about ten times the time
