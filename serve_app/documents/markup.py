"""HTML and Markdown documents, read and written by the markup-preserving translation's own
parsers (``serve_app.translation.markup``), the ones the ``format`` option of every translate
route uses: one way of reading markup in the whole service.

A file is parsed into the markup ``Document``: what is not translated (block tags, ``<head>``
but its ``<title>``, scripts, styles, code, ``translate="no"`` and ``notranslate``
subtrees, Markdown's block markers, code blocks and table pipes) is kept verbatim, and each
block's text with its inline markup is one segment. A segment is stored as its source
fragment (``<b>bold</b> text``, ``**bold** text``) with ``markup`` set, and the worker
translates it as a request in that ``format``: the markup flow shows the model placeholders
in the family's formatted-translation prompt, checks the answer and falls back run by run,
so every inline tag comes back whatever the model does. ``rebuild`` parses the file again
and puts each translated fragment in its segment's place (a Markdown segment inside a block
quote gets its ``> `` back on every line).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from serve_app.core.errors import DocumentTooLarge
from serve_app.documents.base import (
    SPLIT_SEGMENT,
    DocumentFormat,
    DocumentLimits,
    Segment,
    check_count,
    decode_text,
    with_neighbours,
)
from serve_app.translation.markup import Budget, Document, MarkupOptions, OverBudget, Text, parse
from serve_app.translation.markup import Segment as MarkupSegment
from serve_app.translation.markup.segment import with_line_prefix


def _source(segment: MarkupSegment) -> str:
    """The segment's fragment as the file spells it (without a block quote's line prefix)."""
    return "".join(unit.raw for unit in segment.units)


def _plain(segment: MarkupSegment) -> str:
    return "".join(u.text for u in segment.units if isinstance(u, Text)).strip()


class MarkupFormat(DocumentFormat):
    """A format read by the markup parser named ``markup``."""

    what: ClassVar[str]  # the format's name in messages

    def _parse(self, data: bytes, budget: Budget | None = None) -> Document:
        options = MarkupOptions(budget=budget)
        return parse(self.markup or "", decode_text(data, self.what), options)

    def extract(self, data: bytes) -> list[Segment]:
        return self._segments(self._parse(data))

    def extract_within(self, data: bytes, limits: DocumentLimits) -> list[Segment]:
        """The segments, the parser stopped (DocumentTooLarge) as soon as they are past
        ``limits``: the counts are the ones ``check_segments`` makes (``Budget``), so only
        a file refused anyway is refused, and the parse of one built to be refused (a
        million ``<p>x</p>``) ends at the limit instead of the file's end. A segment's engine
        requests (its text runs between inline tags) are counted here too, as the service
        counts the request the worker makes of it: 413 now, not a failed job later."""
        budget = Budget(
            limits.max_segments,
            limits.max_segment_chars,
            limits.max_chars,
            limits.max_segment_requests,
        )
        try:
            document = self._parse(data, budget)
        except OverBudget as exc:
            advice = (
                SPLIT_SEGMENT
                if exc.in_segment
                else f"Split the {self.what} file into smaller files and upload each."
            )
            raise DocumentTooLarge(f"{exc}. {advice}") from exc
        return self._segments(document)

    @staticmethod
    def _segments(document: Document) -> list[Segment]:
        segments = document.segments
        contexts = with_neighbours([_plain(s) for s in segments])
        return [Segment(_source(s), context) for s, context in zip(segments, contexts, strict=True)]

    def rebuild(self, data: bytes, translations: Sequence[str]) -> bytes:
        document = self._parse(data)
        segments = document.segments
        check_count(translations, len(segments))
        placed = [
            with_line_prefix(t, s.line_prefix) for s, t in zip(segments, translations, strict=True)
        ]
        return document.rebuild(placed).encode("utf-8")


class HtmlFormat(MarkupFormat):
    name = "html"
    extensions = (".html", ".htm", ".xhtml")
    media_type = "text/html"
    markup = "html"
    what = "HTML"


class MarkdownFormat(MarkupFormat):
    name = "md"
    extensions = (".md", ".markdown")
    media_type = "text/markdown"
    markup = "markdown"
    what = "Markdown"
