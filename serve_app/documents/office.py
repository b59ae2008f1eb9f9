"""Word documents (``.docx``, ``python-docx``).

Every paragraph of the body, its tables (nested ones too), text boxes, headers, footers and
comments is translated; its runs keep their formatting (see ``runs``): a paragraph's runs
formatted alike form one tagged group, links are groups of their own. Runs holding more than
text (pictures, fields, page breaks) are never rewritten: they split a paragraph into
stretches translated separately. Styles, numbering, sections and pictures are untouched.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator
from typing import Any

import docx
import lxml.etree
from docx.opc.exceptions import PackageNotFoundError
from docx.opc.part import XmlPart
from docx.oxml.ns import qn

from serve_app.documents import runs
from serve_app.documents.base import (
    reading,
)

_TEXT_PARTS = ("document", "header", "footer", "comments")
_RUNS = "./w:r | ./w:hyperlink/w:r | ./w:ins/w:r | ./w:smartTag/w:r | ./w:fldSimple/w:r"
_PLAIN = {qn(f"w:{n}") for n in ("rPr", "t", "tab", "cr", "noBreakHyphen", "softHyphen")}
_PLAIN_BREAK = {None, "textWrapping"}


def _plain(r: Any) -> bool:
    """The run holds only text, tabs and line breaks (safe to rewrite)."""
    for child in r:
        if child.tag == qn("w:br"):
            if child.get(qn("w:type")) not in _PLAIN_BREAK:
                return False
        elif child.tag not in _PLAIN and child.tag != qn("w:lastRenderedPageBreak"):
            return False
    return True


def _key(r: Any) -> tuple[Any, bytes]:
    """Runs format alike if their properties are the same and they share a parent (a link)."""
    rpr = r.find(qn("w:rPr"))
    props = b""
    if rpr is not None:
        props = lxml.etree.tostring(rpr)
    parent = r.getparent()
    return (None if parent.tag == qn("w:p") else id(parent), props)


def _get(r: Any) -> str:
    return str(r.text)


def _put(r: Any, text: str) -> None:
    r.text = text


def _stretches(p: Any) -> Iterator[runs.Stretch[Any]]:
    """The paragraph's runs between runs that must not be rewritten."""
    current: list[Any] = []
    for r in p.xpath(_RUNS):
        if _plain(r):
            current.append(r)
            continue
        yield runs.stretch(current, _key, _get)
        current = []
    yield runs.stretch(current, _key, _get)


class _Document:
    def __init__(self, data: bytes, fmt: DocxFormat) -> None:
        with reading(fmt):
            self.doc = docx.Document(io.BytesIO(data))
            found = [s for p in self._paragraphs() for s in _stretches(p)]
        self.stretches, self.segments = runs.segments(found, _get)

    def _paragraphs(self) -> Iterator[Any]:
        for part in self.doc.part.package.iter_parts():
            name = str(part.partname).rsplit("/", 1)[-1]
            if isinstance(part, XmlPart) and name.startswith(_TEXT_PARTS):
                yield from part.element.iter(qn("w:p"))

    def save(self) -> bytes:
        out = io.BytesIO()
        self.doc.save(out)
        return out.getvalue()


class DocxFormat(runs.RunsFormat):
    name = "docx"
    extensions = (".docx",)
    media_type = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    parse_errors = (
        zipfile.BadZipFile,
        PackageNotFoundError,
        KeyError,
        ValueError,
        lxml.etree.XMLSyntaxError,
    )

    def open(self, data: bytes) -> runs.Package:
        return _Document(data, self)

    get = staticmethod(_get)
    put = staticmethod(_put)
