"""How many engine requests a crafted document can make: a segment with many inline tags,
which a model that drops tags makes translated piece by piece, is bounded in its tags
(``max_segment_tags``, 413 at upload), in the pieces it sends to the engine at once, and in
the engine requests the request the worker makes of it needs (``max_segment_requests``, the
replica's ``max_engine_requests``: 413 at upload, counted as the service counts a request,
not a job that fails at translation)."""

from __future__ import annotations

import asyncio
import io

import docx
import pytest

from serve_app.api.errors import http_status
from serve_app.core.errors import DocumentTooLarge
from serve_app.documents import FORMATS, DocumentLimits, Segment, extract, translate_segment
from serve_app.documents.inline import PIECES_AT_ONCE
from serve_app.translation.markup import engine_requests
from tests.docsamples import SAMPLES

LIMIT = DocumentLimits().max_segment_requests
REQUEST_FORMAT = {"html": "html", "md": "markdown"}  # the others' requests are plain text


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
    # Under max_segment_tags, but its request needs 150 engine requests: it was accepted,
    # and its job failed when the worker sent the paragraph (text_too_long).
    with pytest.raises(DocumentTooLarge, match="splits into 150 parts") as info:
        extract(FORMATS["docx"], _docx_with_runs(150), DocumentLimits())
    assert http_status(info.value) == 413
    assert extract(FORMATS["docx"], _docx_with_runs(LIMIT), DocumentLimits())


def test_cue_tags_count_too() -> None:
    cue = "".join(f"<i>w{n}</i> " for n in range(250))
    data = f"1\n00:00:01,000 --> 00:00:02,000\n{cue}\n".encode()
    with pytest.raises(DocumentTooLarge, match="250 inline tags"):
        extract(FORMATS["srt"], data, DocumentLimits())


def _html(runs: int) -> bytes:
    return b"<p>Intro.</p><p>" + b"<b>x</b>" * runs + b"</p>"


def _md(runs: int) -> bytes:
    return b"Intro.\n\n" + b" ".join([b"*x*"] * runs) + b"\n"


def _srt(runs: int) -> bytes:
    cue = " ".join(f"<i>w{n}</i>" for n in range(runs))
    return f"1\n00:00:01,000 --> 00:00:02,000\n{cue}\n".encode()


def _txt(runs: int) -> bytes:
    return b"Intro.\n\n" + b"".join(b"Dear {name%d}, " % n for n in range(runs))


def _po(runs: int) -> bytes:
    msgid = "%s file " * runs
    return f'msgid ""\nmsgstr ""\n\nmsgid "{msgid}"\nmsgstr ""\n'.encode()


def _xliff(runs: int) -> bytes:
    source = "".join(f'word <ph id="{n}">%s</ph> ' for n in range(runs))
    return (
        '<?xml version="1.0"?><xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">'
        '<file original="f" source-language="en" datatype="plaintext"><body>'
        f'<trans-unit id="1"><source>{source}</source></trans-unit></body></file></xliff>'
    ).encode()


CRAFTED = {"html": _html, "md": _md, "srt": _srt, "txt": _txt, "po": _po, "xliff": _xliff}


@pytest.mark.parametrize("name", sorted(CRAFTED))
def test_a_paragraph_of_more_runs_than_a_request_may_need_is_413(name: str) -> None:
    """One paragraph (cue, entry, unit) whose runs between tags, variables or URLs are one
    more than a request may need: refused at upload, with the segment named; one exactly at
    the limit is accepted, and the request the worker makes of it needs no more."""
    make = CRAFTED[name]
    with pytest.raises(DocumentTooLarge, match=f"splits into {LIMIT + 1} parts") as info:
        extract(FORMATS[name], make(LIMIT + 1), DocumentLimits())
    assert http_status(info.value) == 413
    assert "Split that paragraph" in str(info.value)
    segments = extract(FORMATS[name], make(LIMIT), DocumentLimits())
    fmt = REQUEST_FORMAT.get(name, "text")
    assert max(engine_requests(fmt, s.text, LIMIT) for s in segments) == LIMIT


def test_the_limit_is_the_replicas() -> None:
    limits = DocumentLimits(max_segment_requests=10)
    for name in ("html", "txt"):
        with pytest.raises(DocumentTooLarge, match="splits into 11 parts"):
            extract(FORMATS[name], CRAFTED[name](11), limits)
        assert extract(FORMATS[name], CRAFTED[name](10), limits)


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_every_sample_is_accepted_and_its_requests_too(name: str) -> None:
    fmt = REQUEST_FORMAT.get(name, "text")
    for segment in extract(FORMATS[name], SAMPLES[name](), DocumentLimits()):
        assert engine_requests(fmt, segment.text, LIMIT) <= LIMIT
