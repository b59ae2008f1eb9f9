"""How many engine requests a crafted document can make: a segment with many inline tags,
which a model that drops tags makes translated piece by piece, is bounded in its tags
(``max_segment_tags``, 413 at upload) and in the pieces it sends to the engine at once."""

from __future__ import annotations

import asyncio
import io

import docx
import pytest

from serve_app.api.errors import http_status
from serve_app.core.errors import DocumentTooLarge
from serve_app.documents import FORMATS, DocumentLimits, Segment, extract, translate_segment
from serve_app.documents.inline import PIECES_AT_ONCE


def tagged(groups: int) -> str:
    return "".join(f"<g{n}>w{n} </g{n}>" for n in range(1, groups + 1))


def test_a_segment_falls_back_with_a_bounded_number_of_requests_at_once() -> None:
    """A model that drops every tag: the pieces are translated PIECES_AT_ONCE at a time,
    not all at once (one segment could flood its replica's admission)."""
    running = peak = calls = 0

    async def drop_tags(text: str, context: str) -> str:
        nonlocal running, peak, calls
        calls += 1
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.001)
        running -= 1
        return "no tags here"

    out = asyncio.run(translate_segment(Segment(tagged(150), tagged=True), drop_tags))
    assert calls == 151  # the whole segment, then each piece
    assert peak <= PIECES_AT_ONCE
    assert out.count("<g") == 150


def _docx_with_runs(runs: int) -> bytes:
    document = docx.Document()
    paragraph = document.add_paragraph()
    for n in range(runs):
        paragraph.add_run(f"word{n} ").bold = n % 2 == 0
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def test_a_paragraph_with_too_many_formatting_changes_is_413() -> None:
    data = _docx_with_runs(300)
    with pytest.raises(DocumentTooLarge, match="300 inline tags") as info:
        extract(FORMATS["docx"], data, DocumentLimits())
    assert http_status(info.value) == 413
    assert extract(FORMATS["docx"], _docx_with_runs(150), DocumentLimits())


def test_cue_tags_count_too() -> None:
    cue = "".join(f"<i>w{n}</i> " for n in range(250))
    data = f"1\n00:00:01,000 --> 00:00:02,000\n{cue}\n".encode()
    with pytest.raises(DocumentTooLarge, match="250 inline tags"):
        extract(FORMATS["srt"], data, DocumentLimits())
