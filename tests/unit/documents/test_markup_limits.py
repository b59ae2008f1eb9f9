"""HTML and Markdown uploads built to be refused stop being read at the limit: the markup
readers count segments as they go (``Budget``) instead of parsing the whole file and
counting afterwards (an 8 MB ``<b>x</b>`` flood took 40 s of CPU and 1.5 GB before its 413).
The work is counted, not timed; documents at the limits are still accepted."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from serve_app.api.errors import http_status
from serve_app.core.errors import DocumentTooLarge
from serve_app.documents import FORMATS, DocumentLimits, extract
from serve_app.translation.markup import html as markup_html
from serve_app.translation.markup import markdown as markup_md


def _counting(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> list[int]:
    """Counts the calls of ``owner.name`` (a list of one number, updated in place)."""
    calls = [0]
    original: Callable[..., Any] = getattr(owner, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls


def test_an_html_tag_flood_is_walked_only_up_to_the_segment_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One paragraph of 100,000 ``<b>x</b>``: refused once its segment is past 20,000
    characters, not after visiting all 100,000 text nodes."""
    visited = _counting(monkeypatch, markup_html._Walker, "node")
    with pytest.raises(DocumentTooLarge, match="Segment 1 holds more than") as info:
        extract(FORMATS["html"], b"<b>x</b>" * 100_000, DocumentLimits())
    assert http_status(info.value) == 413
    assert "smaller files" in str(info.value)
    assert visited[0] < 5_000


def test_an_html_paragraph_flood_stops_at_max_segments(monkeypatch: pytest.MonkeyPatch) -> None:
    visited = _counting(monkeypatch, markup_html._Walker, "node")
    with pytest.raises(DocumentTooLarge, match="more than 20000 segments"):
        extract(FORMATS["html"], b"<p>x</p>" * 100_000, DocumentLimits())
    assert visited[0] <= 20_001


def test_markdown_inlines_are_parsed_only_up_to_the_segment_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """60,000 paragraphs: markdown-it parses the inlines of the first 20,001, not all."""
    parsed = _counting(monkeypatch, markup_md._MD.inline, "parse")
    with pytest.raises(DocumentTooLarge, match="more than 20000 segments"):
        extract(FORMATS["md"], b"a\n\n" * 60_000, DocumentLimits())
    assert parsed[0] <= 20_001


def test_the_total_characters_stop_a_document_too() -> None:
    limits = DocumentLimits(max_chars=1_000)
    with pytest.raises(DocumentTooLarge, match="more than 1000 characters"):
        extract(FORMATS["html"], b"<p>" + b"word <i>x</i> " * 200 + b"</p>", limits)
    with pytest.raises(DocumentTooLarge, match="more than 1000 characters"):
        extract(FORMATS["md"], b"Some words here.\n\n" * 100, limits)


@pytest.mark.parametrize("fmt", ["html", "md"])
def test_documents_exactly_at_the_limits_are_accepted(fmt: str) -> None:
    """The counts are exact: a segment of exactly max_segment_chars (its markup included,
    the whitespace around it not) and exactly max_segments segments pass; one more fails."""
    limits = DocumentLimits(max_segments=3, max_segment_chars=100, max_chars=300)
    inline = "<b>x</b>" if fmt == "html" else "**x**"
    body = inline * ((100 - 4) // len(inline))
    body += "w" * (100 - len(body))
    block = f"<p>   {body}   </p>" if fmt == "html" else f"   {body}   \n\n"
    segments = extract(FORMATS[fmt], (block * 3).encode(), limits)
    assert [len(s.text) for s in segments] == [100, 100, 100]
    with pytest.raises(DocumentTooLarge, match="more than 3 segments"):
        extract(FORMATS[fmt], (block * 4).encode(), limits)
    longer = block.replace(body, body + "w")
    with pytest.raises(DocumentTooLarge, match="101 characters"):
        extract(FORMATS[fmt], longer.encode(), limits)


def _page(paragraphs: int) -> bytes:
    """A real-looking page: attributes, links, emphasis, a style sheet and a script."""
    head = "<!DOCTYPE html><html><head><title>Manual</title><style>p{margin:0}</style>"
    rows = [head + "<script>var a = 1 < 2;</script></head><body>"]
    for n in range(paragraphs):
        rows.append(
            f'<div class="section manual-part" id="section-{n}" data-part="{n}">'
            f'<p class="text body">Step {n}: <em>read</em> <a href="/d/{n}">this</a>.</p></div>\n'
        )
    return ("".join(rows) + "</body></html>").encode()


def test_a_large_legitimate_html_page_is_still_accepted() -> None:
    data = _page(18_000)
    assert len(data) > 2_000_000
    segments = extract(FORMATS["html"], data, DocumentLimits())
    assert len(segments) == 18_001  # the title and each paragraph


def test_a_page_of_markup_without_text_is_still_accepted() -> None:
    """Markup outside segments (a drawing, empty cells, comments) counts towards no limit:
    no bound on the tags of a file could refuse floods without refusing this page."""
    drawing = "<svg>" + '<path d="M0 0L1 1"/>' * 10_000 + "</svg>" + "<!-- x -->" * 1_000
    data = f"<body><p>One <b>paragraph</b>.</p>{drawing}<table>{'<td></td>' * 5_000}</table>"
    segments = extract(FORMATS["html"], data.encode(), DocumentLimits())
    assert [s.text for s in segments] == ["One <b>paragraph</b>."]


def test_a_large_markdown_manual_is_still_accepted() -> None:
    section = (
        "## Install step {n}\n\nRun the **installer** with `--fast` and read "
        "[the guide](https://example.com/{n}).\n\n- one item\n- another *item*\n\n"
        "```\ncode {n}\n```\n\n> A quoted\n> note.\n\n"
    )
    data = "".join(section.format(n=n) for n in range(3_500)).encode()
    segments = extract(FORMATS["md"], data, DocumentLimits())
    assert len(segments) == 3_500 * 5
