"""Every format round-trips through a fake translator with its structure kept."""

from __future__ import annotations

import asyncio
import re

import pytest

from serve_app.documents import FORMATS, DocumentLimits, extract, rebuild, translate_segment
from serve_app.translation.markup import parse
from tests.docsamples import CHECKS, SAMPLES

_PIECES = re.compile(r"(<[^<>]+>|&[a-z]+;)")


def shout(text: str) -> str:
    """The fake translation: upper case outside tags and entities."""
    return "".join(p if _PIECES.fullmatch(p) else p.upper() for p in _PIECES.split(text))


async def _fake(text: str, context: str) -> str:
    return shout(text)


def as_service(markup: str, translate):  # type: ignore[no-untyped-def]
    """What the service does with a segment sent in a markup ``format`` (``markupflow``, in
    short): placeholders translated and checked, else the text runs one by one."""

    async def translated(text: str, context: str) -> str:
        document = parse(markup, text)
        outs = []
        for segment in document.segments:
            restored = segment.restore(await translate(segment.source(), context))
            if restored is None:
                runs = [await translate(r.text, context) for r in segment.runs()]
                restored = segment.join_runs(runs)
            outs.append(restored)
        return document.rebuild(outs)

    return translated


def translate_file(name: str, data: bytes, translate=_fake) -> bytes:  # type: ignore[no-untyped-def]
    fmt = FORMATS[name]
    segments = extract(fmt, data, DocumentLimits())
    if fmt.markup:
        translate = as_service(fmt.markup, translate)

    async def all_of() -> list[str]:
        return [await translate_segment(s, translate) for s in segments]

    return rebuild(fmt, data, asyncio.run(all_of()))


def _flat(text: str) -> str:
    return " ".join(text.split())


def upper(a: str, b: str) -> bool:
    return b == a.upper()


def test_every_format_has_a_sample_and_a_check() -> None:
    assert set(FORMATS) == set(SAMPLES) == set(CHECKS)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_round_trip_keeps_the_structure(name: str) -> None:
    data = SAMPLES[name]()
    out = translate_file(name, data)
    CHECKS[name](data, out, upper)


@pytest.mark.parametrize("name", sorted(set(SAMPLES) - {"xliff", "po"}))
def test_round_trip_translates_every_segment(name: str) -> None:
    """The translated file's segments are the source's, translated (same count, order)."""
    fmt = FORMATS[name]
    data = SAMPLES[name]()
    before = extract(fmt, data, DocumentLimits())
    after = extract(fmt, translate_file(name, data), DocumentLimits())
    translate = as_service(fmt.markup, _fake) if fmt.markup else _fake
    expected = [asyncio.run(translate(s.text, "")) for s in before]
    assert [_flat(s.text) for s in after] == [_flat(e) for e in expected]
    assert before, "the sample holds text"


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_tags_survive_a_translator_that_drops_them(name: str) -> None:
    """A model that mangles tags: the piece-by-piece fallback keeps the structure."""

    async def drop_tags(text: str, context: str) -> str:
        return re.sub(r"<[^<>]+>", "", shout(text))

    data = SAMPLES[name]()
    out = translate_file(name, data, drop_tags)
    CHECKS[name](data, out, upper)


def test_subtitle_context_is_the_neighbouring_cues() -> None:
    segments = extract(FORMATS["srt"], SAMPLES["srt"](), DocumentLimits())
    assert [s.text for s in segments][1:] == ["How are you?", "Fine, thanks."]
    assert segments[1].context == "Hello there,\nmy friend.\nFine, thanks."
    assert all("-->" not in s.text and "00:00" not in s.text for s in segments)


def test_docx_runs_travel_as_tags() -> None:
    segments = extract(FORMATS["docx"], SAMPLES["docx"](), DocumentLimits())
    first = next(s for s in segments if s.tagged)
    assert first.text == (
        "<g1>Plain start, </g1><g2>bold part</g2><g3> and </g3><g4>italic end</g4>"
    )


def test_xlsx_extracts_strings_only() -> None:
    segments = extract(FORMATS["xlsx"], SAMPLES["xlsx"](), DocumentLimits())
    assert [s.text for s in segments] == ["Item", "Price", "Note", "Apple", "fresh fruit", "Pear"]


def test_a_translation_starting_with_equals_stays_text_in_xlsx() -> None:
    async def formula(text: str, context: str) -> str:
        return "=1+1"

    import io

    import openpyxl

    out = translate_file("xlsx", SAMPLES["xlsx"](), formula)
    sheet = openpyxl.load_workbook(io.BytesIO(out))["Prices"]
    assert sheet["A2"].value == "=1+1"
    assert sheet["A2"].data_type == "s"
    assert sheet["B4"].value == "=SUM(B2:B3)"
