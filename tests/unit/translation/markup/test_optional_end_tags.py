"""HTML's optional end tags: a start tag ends the elements HTML lets it end (``<p>a<p>b``),
as browsers read them. The tree nested them instead, and past the walk's depth limit (100)
a page of unclosed paragraphs, list items or table cells was copied untranslated: a
document of 150 such paragraphs had 100 segments, of 150 rows of cells 49. The document
tests and the XML one fail without ``htmltree._ENDED_BY``."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from serve_app.documents import FORMATS, DocumentLimits, extract, rebuild
from serve_app.translation.markup import MarkupOptions, parse
from serve_app.translation.markup.htmltree import Element, parse_tree

Page = Callable[[Callable[[str], str]], str]
PAGES: dict[str, tuple[Page, int]] = {
    "paragraphs": (lambda t: "".join(f"<p>{t(f'para {i}')}" for i in range(150)), 150),
    "list items": (lambda t: "<ul>" + "".join(f"<li>{t(f'item {i}')}" for i in range(150)), 150),
    "table cells": (
        lambda t: "<table>" + "".join(f"<tr><td>{t(f'a{i}')}<td>{t(f'b{i}')}" for i in range(150)),
        300,
    ),
    "definitions": (
        lambda t: "<dl>" + "".join(f"<dt>{t(f'term{i}')}<dd>{t(f'def{i}')}" for i in range(150)),
        300,
    ),
}


@pytest.mark.parametrize("name", sorted(PAGES))
def test_every_unclosed_block_of_a_document_is_translated(name: str) -> None:
    page, count = PAGES[name]
    data = page(lambda text: text).encode()
    segments = extract(FORMATS["html"], data, DocumentLimits())
    assert len(segments) == count
    out = rebuild(FORMATS["html"], data, [s.text.upper() for s in segments]).decode()
    assert out == page(str.upper)


def test_segments_end_where_a_browser_ends_the_element() -> None:
    source = "<p>one<p>two<ul><li>a<li>b<p>c</ul><p>three"
    doc = parse("html", source, MarkupOptions())
    texts = ["".join(u.raw for u in s.units) for s in doc.segments]
    assert texts == ["one", "two", "a", "b", "c", "three"]
    assert doc.rebuild([t.upper() for t in texts]) == "<p>ONE<p>TWO<ul><li>A<li>B<p>C</ul><p>THREE"


def _depth(el: Element) -> int:
    inner = [c for c in el.children if isinstance(c, Element)]
    return 1 + max((_depth(c) for c in inner), default=0)


def test_xml_keeps_its_nesting() -> None:
    """XML has no optional end tags: ``<p>a<p>b</p></p>`` is two nested elements."""
    assert _depth(parse_tree("<p>a<p>b</p></p>", xml=True)) == 3  # the root, p, p
    assert _depth(parse_tree("<p>a<p>b</p></p>")) == 2  # HTML: two paragraphs
