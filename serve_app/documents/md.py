"""Markdown documents (``markdown-it-py``): each block's inline text (a paragraph, heading,
list item, table cell) is a segment; everything else (block markers, indentation, quotes,
code blocks, front matter lines that are not text) stays as written.

The inline text is found by the parser's line map and replaced in place; a paragraph that
ran over several lines comes back on one (the same paragraph in Markdown). This is the
documents' own simple handling; the markup-preserving translation of the core
(``serve_app.translation.markup``) may replace it with one that protects inline syntax.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from markdown_it import MarkdownIt

from serve_app.documents.base import (
    DocumentFormat,
    Segment,
    check_count,
    decode_text,
    keep_space,
    with_neighbours,
)

_PARSER = MarkdownIt("commonmark").enable("table")


@dataclass(frozen=True)
class _Place:
    """Where a block's inline text lies: lines ``first``..``last``, from ``column`` of the
    first line (the text's first line), and its content."""

    content: str
    line: int
    column: int
    last: int


def _places(lines: list[str], text: str) -> list[_Place]:
    places = []
    cursor = (0, 0)  # line, column: cells of one table row share a line
    for token in _PARSER.parse(text):
        if token.type != "inline" or not token.content.strip() or token.map is None:
            continue
        start, end = token.map
        first = token.content.split("\n")[0]
        line = max(start, cursor[0])
        column = lines[line].find(first, cursor[1] if line == cursor[0] else 0)
        if column < 0:
            continue  # not found verbatim (escaped tabs...): left as it is
        last = line + token.content.count("\n")
        places.append(_Place(token.content, line, column, min(last, end - 1)))
        cursor = (line, column + len(first))
    return places


class MarkdownFormat(DocumentFormat):
    name = "md"
    extensions = (".md", ".markdown")
    media_type = "text/markdown"

    def extract(self, data: bytes) -> list[Segment]:
        text = decode_text(data, "Markdown")
        places = _places(text.split("\n"), text)
        contents = [p.content.strip() for p in places]
        contexts = with_neighbours(contents)
        return [Segment(c, x) for c, x in zip(contents, contexts, strict=True)]

    def rebuild(self, data: bytes, translations: Sequence[str]) -> bytes:
        text = decode_text(data, "Markdown")
        lines = text.split("\n")
        places = _places(lines, text)
        check_count(translations, len(places))
        # From the end, so earlier places' line numbers and columns stay valid.
        for place, translation in reversed(list(zip(places, translations, strict=True))):
            new = keep_space(place.content, translation).replace("\n", " ")
            first = place.content.split("\n")[0]
            row = lines[place.line]
            lines[place.line] = row[: place.column] + new + row[place.column + len(first) :]
            del lines[place.line + 1 : place.last + 1]
        return "\n".join(lines).encode("utf-8")
