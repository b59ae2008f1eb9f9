"""What every document format shares: segments, the handler interface and the limits.

A handler is stateless: ``extract`` reads a file into the segments the model translates, and
``rebuild`` reads the same file again and writes the translations into it, in the order
``extract`` gave the segments. Keeping no parsed state between the two lets a job be extracted
by one replica and rebuilt by another from the stored original bytes. Both are synchronous and
do work proportional to the file: callers run them in a thread, never on the event loop.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import ClassVar

from serve_app.core.errors import DocumentTooLarge, MalformedDocument
from serve_app.translation.markup import engine_requests, protect

CONTEXT_CHARS = 600  # neighbouring text given with a segment, at most
_OPENING_TAG = re.compile(r"<[gx][0-9]+/?>")  # a tagged segment's tags (see ``inline``)
# What a file refused for one segment's contents should do (a smaller file would not help).
SPLIT_SEGMENT = "Split that paragraph into shorter ones and upload the file again."


@dataclass(frozen=True)
class Segment:
    """One unit of translation. ``text`` is what the model sees: plain text, or, when
    ``tagged``, inline formatting as ``<gN>..</gN>`` / ``<xN/>`` tags (see ``inline``).
    ``context`` is neighbouring text that helps the translation and is not translated."""

    text: str
    context: str = ""
    tagged: bool = False


@dataclass(frozen=True)
class DocumentLimits:
    """Bounds on what a document may hold (413 beyond)."""

    max_bytes: int = 10 * 1024 * 1024
    max_segments: int = 20_000
    max_chars: int = 1_000_000
    max_segment_chars: int = 20_000
    # Inline tags (formatting changes, cue tags, placeholders) in one segment: a model that
    # drops them makes the segment translated piece by piece, one engine request a piece.
    max_segment_tags: int = 200
    # Engine requests translating one segment may need (a replica's ``max_engine_requests``:
    # each segment is translated as a request, refused beyond it): each text run between
    # tags, variables or URLs is one when the model loses a tag (``Segment.engine_requests``).
    max_segment_requests: int = 128
    max_unpacked_bytes: int = 200 * 1024 * 1024  # Office files are ZIP packages
    max_package_entries: int = 10_000
    # XML elements in all of an Office file's parts, and the cells that openpyxl makes for
    # its ranges (merged cells, hyperlinks, comments): each costs the libraries an object.
    max_package_elements: int = 1_000_000


class DocumentFormat(ABC):
    """A file format: its name, the extensions and media type it goes by, and how its text
    is taken out and put back."""

    name: ClassVar[str]
    extensions: ClassVar[tuple[str, ...]]
    media_type: ClassVar[str]
    # Exceptions the parsing library raises on a malformed file (reported as 400s).
    parse_errors: ClassVar[tuple[type[BaseException], ...]] = ()
    # A ZIP package (Office formats): its unpacked size is checked before parsing.
    zipped: ClassVar[bool] = False
    # Its library writes XML 1.0 (Office parts, XLIFF), which cannot hold C0 controls but tab,
    # line feed and carriage return, nor U+FFFE, U+FFFF or a surrogate: ``rebuild`` drops
    # them from the translations (``xml_text``).
    xml_text: ClassVar[bool] = False
    # Segments are fragments of this markup format (``html``, ``markdown``): they are
    # translated as requests in that format, through the markup-preserving flow.
    markup: ClassVar[str | None] = None

    @abstractmethod
    def extract(self, data: bytes) -> list[Segment]:
        """The file's translatable segments, in a fixed order."""

    @abstractmethod
    def rebuild(self, data: bytes, translations: Sequence[str]) -> bytes:
        """The file with each segment's text replaced by its translation."""

    def extract_within(self, data: bytes, limits: DocumentLimits) -> list[Segment]:
        """``extract`` for an upload checked against ``limits``: a format whose reader can
        count segments as it goes stops (DocumentTooLarge) once they are past the limits,
        rather than reading the rest of a file that can only be refused. The segments are
        checked (``check_segments``) afterwards all the same."""
        return self.extract(data)


def decode_text(data: bytes, what: str) -> str:
    """UTF-8 (with or without BOM) or UTF-16 with BOM; MalformedDocument otherwise."""
    encoding = "utf-16" if data.startswith((b"\xff\xfe", b"\xfe\xff")) else "utf-8-sig"
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise MalformedDocument(
            f"The {what} file is not valid UTF-8 text (byte {exc.start}); save it as UTF-8."
        ) from exc


# What XML 1.0 cannot hold (its Char production), as models may write it.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


def xml_text(text: str) -> str:
    """``text`` without the characters XML 1.0 cannot hold (a model's translation may have
    an escape, a NUL or a vertical tab: lxml and openpyxl refuse to write them)."""
    return _NOT_XML.sub("", text)


def with_neighbours(texts: Sequence[str]) -> list[str]:
    """For each text, the text before and after it, as context (bounded)."""
    half = CONTEXT_CHARS // 2
    contexts = []
    for i in range(len(texts)):
        before = texts[i - 1][-half:] if i > 0 else ""
        after = texts[i + 1][:half] if i + 1 < len(texts) else ""
        contexts.append("\n".join(t for t in (before, after) if t))
    return contexts


def keep_space(source: str, translation: str) -> str:
    """The translation with the source's leading and trailing whitespace (models drop it)."""
    core = translation.strip()
    start = source[: len(source) - len(source.lstrip())]
    end = source[len(source.rstrip()) :]
    return start + core + end if source.strip() else source


def check_segment_count(count: int, limits: DocumentLimits) -> None:
    """DocumentTooLarge if a document of ``count`` segments is over the limit (a reader may
    check this before it makes the segments)."""
    if count > limits.max_segments:
        raise DocumentTooLarge(
            f"The document holds {count} segments; at most {limits.max_segments} are accepted."
        )


def check_segments(segments: Sequence[Segment], limits: DocumentLimits) -> None:
    """DocumentTooLarge if the segments exceed the limits."""
    check_segment_count(len(segments), limits)
    chars = 0
    for index, segment in enumerate(segments):
        check_segment_chars(index, segment.text, limits)
        if segment.tagged:
            _check_tags(index, segment.text, limits)
        chars += len(segment.text)
    check_chars(chars, limits)


def check_segment_chars(index: int, text: str, limits: DocumentLimits) -> None:
    """DocumentTooLarge if segment ``index`` (from 0), of ``text``, is over the limit."""
    if len(text) > limits.max_segment_chars:
        raise DocumentTooLarge(
            f"Segment {index + 1} holds {len(text)} characters; at most "
            f"{limits.max_segment_chars} are accepted in one paragraph, cell or cue."
        )


def check_chars(chars: int, limits: DocumentLimits, *, more: bool = False) -> None:
    """DocumentTooLarge if ``chars`` characters of text (``more``: counted so far, of a
    document read on) are over the limit."""
    if chars > limits.max_chars:
        raise DocumentTooLarge(
            f"The document holds {'more than ' if more else ''}{chars} characters of text; at "
            f"most {limits.max_chars} are accepted."
        )


def _check_tags(index: int, text: str, limits: DocumentLimits) -> None:
    tags = len(_OPENING_TAG.findall(text))
    if tags > limits.max_segment_tags:
        raise DocumentTooLarge(
            f"Segment {index + 1} holds {tags} inline tags (formatting changes, markup or "
            f"placeholders); at most {limits.max_segment_tags} are accepted in one paragraph, "
            "cell or cue."
        )


def check_requests(segments: Sequence[Segment], limits: DocumentLimits) -> None:
    """DocumentTooLarge if a segment translated as a plain-text request (every format's but
    HTML's and Markdown's, whose readers count as they read: ``markup.Budget``) may need more
    engine requests than a request is allowed: its variables, URLs and inline tags (``<g1>``)
    are placeholders, and the text runs between them are translated one by one when the
    model loses one. Counted as the service counts a request (``markup.engine_requests``),
    so a job is never accepted to fail on its segment later."""
    limit = limits.max_segment_requests
    for index, segment in enumerate(segments):
        # Its tags are its protected spans, and a run lies between two: a segment of fewer
        # than the limit is within it without counting its runs (most of the work).
        if len(protect.spans(segment.text)) < limit:
            continue
        n = engine_requests("text", segment.text, limit)
        if n > limit:
            raise DocumentTooLarge(
                f"Segment {index + 1} splits into {n} parts to translate (the text runs "
                f"between its inline tags, variables and URLs); at most {limit} are accepted "
                f"in one paragraph, cell or cue. {SPLIT_SEGMENT}"
            )


def check_count(translations: Sequence[str], expected: int) -> None:
    if len(translations) != expected:
        raise ValueError(f"{len(translations)} translations for {expected} segments")


@contextmanager
def reading(fmt: DocumentFormat) -> Iterator[None]:
    """Turns the parsing library's errors into a MalformedDocument that names the format."""
    try:
        yield
    except MalformedDocument:
        raise
    except fmt.parse_errors as exc:
        raise MalformedDocument(f"The file is not a valid {fmt.name} file: {_reason(exc)}") from exc


def _reason(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text if len(text) <= 300 else text[:300] + "..."
