"""PowerPoint presentations (``.pptx``, ``python-pptx``).

Every paragraph of every slide (text boxes, placeholders, tables, grouped shapes, SmartArt
text stored in the slide) and of the speaker notes is translated; its runs keep their
formatting (see ``runs``). Line breaks and fields (slide numbers, dates) are never rewritten:
they split a paragraph into stretches translated separately. Layouts, masters, pictures and
charts are untouched.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator
from typing import Any

import lxml.etree
import pptx
from pptx.exc import PackageNotFoundError
from pptx.oxml.ns import qn

from serve_app.documents import runs
from serve_app.documents.base import reading


def _key(r: Any) -> bytes:
    rpr = r.find(qn("a:rPr"))
    return b"" if rpr is None else lxml.etree.tostring(rpr)


def _get(r: Any) -> str:
    t = r.find(qn("a:t"))
    return "" if t is None or t.text is None else str(t.text)


def _put(r: Any, text: str) -> None:
    t = r.find(qn("a:t"))
    if t is None:
        t = lxml.etree.SubElement(r, qn("a:t"))
    t.text = text


def _stretches(p: Any) -> Iterator[runs.Stretch[Any]]:
    current: list[Any] = []
    for child in p:
        if child.tag == qn("a:r"):
            current.append(child)
        elif child.tag in (qn("a:br"), qn("a:fld")):
            yield runs.stretch(current, _key, _get)
            current = []
    yield runs.stretch(current, _key, _get)


def _text_elements(prs: Any) -> list[Any]:
    """The slides' and their notes' elements, each part once, in slide order. The slide list
    may name one slide part any number of times (python-pptx loads it once), and slides may
    share a notes part: walked once per name, 1,000 names of a slide of 10,000 empty
    paragraphs (a 36 KB upload, 11,000 elements counted) took two minutes."""
    found: dict[int, Any] = {}
    for slide in prs.slides:
        found.setdefault(id(slide.part), slide.element)
        if slide.has_notes_slide:
            notes = slide.notes_slide
            found.setdefault(id(notes.part), notes.element)
    return list(found.values())


class _Presentation:
    def __init__(self, data: bytes, fmt: PptxFormat) -> None:
        with reading(fmt):
            self.prs = pptx.Presentation(io.BytesIO(data))
            found = [s for p in self._paragraphs() for s in _stretches(p)]
        self.stretches, self.segments = runs.segments(found, _get)

    def _paragraphs(self) -> Iterator[Any]:
        for element in _text_elements(self.prs):
            yield from element.iter(qn("a:p"))

    def save(self) -> bytes:
        out = io.BytesIO()
        self.prs.save(out)
        return out.getvalue()


class PptxFormat(runs.RunsFormat):
    name = "pptx"
    extensions = (".pptx",)
    media_type = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
    parse_errors = (
        zipfile.BadZipFile,
        PackageNotFoundError,
        KeyError,
        ValueError,
        lxml.etree.XMLSyntaxError,
    )

    def open(self, data: bytes) -> runs.Package:
        return _Presentation(data, self)

    get = staticmethod(_get)
    put = staticmethod(_put)
