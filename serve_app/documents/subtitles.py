"""Subtitles: SubRip (``srt``) and WebVTT (``webvtt-py``).

Each cue's text is a segment, with the cues before and after it as context (a sentence often
runs over several cues). Indexes, identifiers, timings, cue settings, notes and styles are
the libraries' and never reach the model; tags inside a cue (``<i>``, ``<b>``, ``<v Name>``)
travel as numbered tags and come back as they were.
"""

from __future__ import annotations

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
        text = decode_text(data, "SubRip")
        with reading(self):
            cues = list(srt.parse(text))
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
