"""Document translation's file formats: one registry of handlers, by name and by extension.

``extract`` reads an uploaded file into segments (checking the limits first), and ``rebuild``
writes translations back into it; both run the parsing libraries, so callers run them in a
thread (``asyncio.to_thread``), never on the event loop. A file the library cannot read is a
``MalformedDocument`` (400) that says why; nothing a file holds makes them raise anything
else. ``translate_segment`` translates one segment through any text translator, keeping its
inline tags.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import PurePosixPath
from typing import TypeVar

from serve_app.core.errors import DocumentTooLarge, MalformedDocument, ServiceError
from serve_app.core.errors import UnsupportedDocumentFormat as UnsupportedFormat
from serve_app.documents import inline
from serve_app.documents.base import (
    DocumentFormat,
    DocumentLimits,
    Segment,
    check_requests,
    check_segments,
    keep_space,
    xml_text,
)
from serve_app.documents.bilingual import PoFormat, XliffFormat
from serve_app.documents.markup import HtmlFormat, MarkdownFormat
from serve_app.documents.office import DocxFormat
from serve_app.documents.package import check_package
from serve_app.documents.sheets import XlsxFormat
from serve_app.documents.slides import PptxFormat
from serve_app.documents.subtitles import SrtFormat, VttFormat
from serve_app.documents.text import TextFormat

__all__ = [
    "FORMATS",
    "DocumentFormat",
    "DocumentLimits",
    "Segment",
    "extract",
    "format_for",
    "rebuild",
    "translate_segment",
]

logger = logging.getLogger("ray.serve.translator")
T = TypeVar("T")

FORMATS: dict[str, DocumentFormat] = {
    fmt.name: fmt
    for fmt in (
        TextFormat(),
        HtmlFormat(),
        MarkdownFormat(),
        SrtFormat(),
        VttFormat(),
        DocxFormat(),
        PptxFormat(),
        XlsxFormat(),
        XliffFormat(),
        PoFormat(),
    )
}
_BY_EXTENSION = {ext: fmt for fmt in FORMATS.values() for ext in fmt.extensions}


def format_for(filename: str | None, name: str | None = None) -> DocumentFormat:
    """The handler for a format ``name`` (``docx``) or, without one, for the file's extension."""
    if name:
        fmt = FORMATS.get(name.lower().lstrip("."))
        if fmt is None:
            raise UnsupportedFormat(f"Unknown document format '{name}'; {_offered()}.")
        return fmt
    suffix = PurePosixPath((filename or "").replace("\\", "/")).suffix.lower()
    fmt = _BY_EXTENSION.get(suffix)
    if fmt is None:
        what = f"extension '{suffix}'" if suffix else "a file name without an extension"
        raise UnsupportedFormat(f"Documents with {what} are not supported; {_offered()}.")
    return fmt


def _offered() -> str:
    return "supported: " + ", ".join(sorted(_BY_EXTENSION))


def extract(fmt: DocumentFormat, data: bytes, limits: DocumentLimits) -> list[Segment]:
    """The file's segments; DocumentTooLarge (413) beyond the limits (a segment that needs
    more engine requests than a request is allowed included), MalformedDocument (400) if it
    cannot be read. Synchronous: run it in a thread."""
    if len(data) > limits.max_bytes:
        raise DocumentTooLarge(
            f"The document is {len(data)} bytes; at most {limits.max_bytes} are accepted."
        )
    if fmt.zipped:
        _guarded(fmt, lambda: check_package(fmt.name, data, limits))
    segments = _guarded(fmt, lambda: fmt.extract_within(data, limits))
    check_segments(segments, limits)
    if fmt.markup is None:  # HTML and Markdown: counted while read (``extract_within``)
        check_requests(segments, limits)
    return segments


def rebuild(fmt: DocumentFormat, data: bytes, translations: Sequence[str]) -> bytes:
    """The file with ``translations`` (one per segment of ``extract``) written in. A format
    written as XML gets them without the characters XML cannot hold (``base.xml_text``): a
    model's answer holding an escape or a NUL failed the whole job when its file was
    assembled."""
    if fmt.xml_text:
        translations = [xml_text(t) for t in translations]
    return _guarded(fmt, lambda: fmt.rebuild(data, translations))


def _guarded(fmt: DocumentFormat, work: Callable[[], T]) -> T:
    try:
        return work()
    except ServiceError:
        raise
    except RecursionError as exc:  # markup nested thousands deep (<i><i><i>... in a cue)
        raise MalformedDocument(
            f"The file could not be read as a {fmt.name} file: it is nested too deeply."
        ) from exc
    except Exception as exc:  # a library's surprise on a strange file is still a bad file
        logger.warning("reading a %s document failed: %r", fmt.name, exc)
        raise MalformedDocument(
            f"The file could not be read as a {fmt.name} file ({type(exc).__name__})."
        ) from exc


async def translate_segment(segment: Segment, translate: inline.Translate) -> str:
    """``segment`` translated by ``translate(text, context)``; a tagged segment's tags are
    kept whatever the translator does (see ``inline.translate_tagged``)."""
    if segment.tagged:
        return await inline.translate_tagged(segment.text, segment.context, translate)
    return keep_space(segment.text, await translate(segment.text, segment.context))
