"""Plain text (``.txt``): paragraphs separated by blank lines, each a segment with the
paragraphs around it as context; the blank lines and line endings between them are kept.

The blank lines between paragraphs are one possessive repetition: a greedy group of variable
width made ``re`` keep a backtracking state per line, and a 10 MB file of newlines took
2 GB of memory to split (200 times its size); possessive, it takes none. An upload's
paragraphs are counted before their segments and contexts are made (a 10 MB file of
``a\\n\\n`` is 3.4 million paragraphs: 750 MB and 8 s before its 413).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from serve_app.documents.base import (
    DocumentFormat,
    DocumentLimits,
    Segment,
    check_count,
    check_segment_count,
    decode_text,
    keep_space,
    with_neighbours,
)

_BREAK = re.compile(r"(\r?\n(?:[ \t]*\r?\n)++)")


def _parts(data: bytes) -> list[str]:
    """Paragraphs at even indexes, the blank lines between them at odd ones."""
    return _BREAK.split(decode_text(data, "text"))


class TextFormat(DocumentFormat):
    name = "txt"
    extensions = (".txt", ".text")
    media_type = "text/plain"

    def extract(self, data: bytes) -> list[Segment]:
        return self._segments(data, None)

    def extract_within(self, data: bytes, limits: DocumentLimits) -> list[Segment]:
        return self._segments(data, limits)

    @staticmethod
    def _segments(data: bytes, limits: DocumentLimits | None) -> list[Segment]:
        paragraphs = [p for p in _parts(data)[::2] if p.strip()]
        if limits is not None:
            check_segment_count(len(paragraphs), limits)
        contexts = with_neighbours([p.strip() for p in paragraphs])
        return [Segment(p.strip(), c) for p, c in zip(paragraphs, contexts, strict=True)]

    def rebuild(self, data: bytes, translations: Sequence[str]) -> bytes:
        parts = _parts(data)
        check_count(translations, sum(1 for p in parts[::2] if p.strip()))
        it = iter(translations)
        for i in range(0, len(parts), 2):
            if parts[i].strip():
                parts[i] = keep_space(parts[i], next(it))
        return "".join(parts).encode("utf-8")
