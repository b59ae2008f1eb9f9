"""Subtitles: SubRip (``srt``) and WebVTT (``webvtt-py``).

Each cue's text is a segment, with the cues before and after it as context (a sentence often
runs over several cues). Indexes, identifiers, timings, cue settings, notes and styles are
the libraries' and never reach the model; tags inside a cue (``<i>``, ``<b>``, ``<v Name>``)
travel as numbered tags and come back as they were.

SubRip is read with the ``srt`` library's own cue pattern (``SRT_REGEX``), matched where the
last cue ended (``parse_srt``) rather than searched for as ``srt.parse`` does: its index
pattern (``-?[0-9]+[.]?[0-9]*``) splits a run of digits every way it can, so a line of
digits that is no cue cost its length squared at every position ``finditer`` tried (a
2 KB file of one line of 2,000 digits: 66 s; 10,000 digits: hours). Matched in place, the
pattern's cost is the square of the digits that start a line, wherever it is tried (its
look-ahead at every line of a cue's text too: a cue line of 20,000 digits took 6 s), so a
line may start with at most ``MAX_LEADING_DIGITS`` digits. Line ends are made LF first: a
file of lone CRs (old Mac style), which players read, was a 400; a translated file is
written with LF line ends, whatever the upload's.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import srt
import webvtt
from webvtt.errors import MalformedCaptionError, MalformedFileError

from serve_app.core.errors import MalformedDocument
from serve_app.documents import inline
from serve_app.documents.base import (
    DocumentFormat,
    Segment,
    check_count,
    decode_text,
    reading,
    with_neighbours,
)

MAX_LEADING_DIGITS = 20  # longer than any cue index; the pattern's cost is its square
# A line ends at CRLF, LF or a lone CR (old Mac files), as players read SubRip (FFmpeg's
# ``ff_subtitles_next_line``, Python's universal newlines in pysubs2); ``srt`` reads only
# the first two.
_LINE_END = re.compile(r"\r\n?")
_LONG_LEADING_NUMBER = re.compile(rf"^[ \t]*-?[0-9]{{{MAX_LEADING_DIGITS + 1}}}", re.MULTILINE)


def parse_srt(text: str) -> list[srt.Subtitle]:
    """The cues of ``text``, as ``srt.parse`` reads them (the same pattern and fields, and
    an error where it finds the cues not contiguous), in time linear in ``text``."""
    if found := _LONG_LEADING_NUMBER.search(text):
        line = text.count("\n", 0, found.start()) + 1
        raise MalformedDocument(
            f"The file is not a valid srt file: line {line} starts with a number of more than "
            f"{MAX_LEADING_DIGITS} digits."
        )
    cues: list[srt.Subtitle] = []
    at = 1 if text.startswith("\ufeff") else 0  # srt.parse lets a BOM precede the first cue
    while (match := srt.SRT_REGEX.match(text, at)) is not None:
        cues.append(_cue(match))
        at = match.end()
    if text[at:] and not (not cues and text[at:].isspace()):
        line = text.count("\n", 0, at) + 1
        raise MalformedDocument(
            f"The file is not a valid srt file: no subtitle cue where line {line} starts "
            f"({text[at : at + 40]!r})."
        )
    return cues


def _cue(match: re.Match[str]) -> srt.Subtitle:
    """A cue from a match of ``srt.SRT_REGEX``, built as ``srt.parse`` builds it."""
    index, start, end, proprietary, content = match.groups()
    return srt.Subtitle(
        index=None if index is None else int(index.split(".")[0]),
        start=srt.srt_timestamp_to_timedelta(start),
        end=srt.srt_timestamp_to_timedelta(end),
        content=content.replace("\r\n", "\n"),
        proprietary=proprietary,
    )


def cue_segments(raws: Sequence[str], *, entities: bool) -> list[Segment]:
    encoded = [inline.encode_markup(raw, entities=entities) for raw in raws]
    plains = [inline.plain(e.nodes) for e in encoded]
    contexts = with_neighbours([p.strip() for p in plains])
    return [
        inline.encoded_segment(e, context)
        for e, plain, context in zip(encoded, plains, contexts, strict=True)
        if plain.strip()
    ]


def cue_texts(raws: Sequence[str], translations: Sequence[str], *, entities: bool) -> list[str]:
    """Each cue's new raw text (cues without text keep theirs)."""
    encoded = [inline.encode_markup(raw, entities=entities) for raw in raws]
    check_count(translations, sum(1 for e in encoded if inline.plain(e.nodes).strip()))
    it = iter(translations)
    return [
        inline.restore(e, next(it), entities=entities) if inline.plain(e.nodes).strip() else raw
        for raw, e in zip(raws, encoded, strict=True)
    ]


class SrtFormat(DocumentFormat):
    name = "srt"
    extensions = (".srt",)
    media_type = "application/x-subrip"
    parse_errors = (srt.SRTParseError, ValueError, OverflowError)  # a timing past any clock

    def _cues(self, data: bytes) -> list[srt.Subtitle]:
        text = _LINE_END.sub("\n", decode_text(data, "SubRip"))
        with reading(self):
            cues = parse_srt(text)
        if not cues and text.strip():
            raise MalformedDocument("The file is not a valid srt file: no subtitle cues found.")
        return cues

    def extract(self, data: bytes) -> list[Segment]:
        return cue_segments([c.content for c in self._cues(data)], entities=False)

    def rebuild(self, data: bytes, translations: Sequence[str]) -> bytes:
        cues = self._cues(data)
        texts = cue_texts([c.content for c in cues], translations, entities=False)
        for cue, text in zip(cues, texts, strict=True):
            cue.content = text
        return srt.compose(cues, reindex=False).encode("utf-8")


class VttFormat(DocumentFormat):
    name = "vtt"
    extensions = (".vtt",)
    media_type = "text/vtt"
    parse_errors = (MalformedFileError, MalformedCaptionError, ValueError)

    def _vtt(self, data: bytes) -> webvtt.WebVTT:
        text = decode_text(data, "WebVTT")
        with reading(self):
            return webvtt.from_string(text, strict=True)

    def extract(self, data: bytes) -> list[Segment]:
        captions = self._vtt(data).captions
        return cue_segments([c.raw_text for c in captions], entities=True)

    def rebuild(self, data: bytes, translations: Sequence[str]) -> bytes:
        vtt = self._vtt(data)
        texts = cue_texts([c.raw_text for c in vtt.captions], translations, entities=True)
        for caption, text in zip(vtt.captions, texts, strict=True):
            caption.lines = text.split("\n")
        return vtt.content.encode("utf-8")
