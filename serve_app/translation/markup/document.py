"""A parsed document: source text copied as it is, and segments to translate.

Each format's parser (``FORMATS``, registered by name) reads a document into ``Document``
through a ``Builder``: what is not translated (tags of block elements, code, ignored
elements, whitespace between blocks) is kept verbatim; each block's text, with its inline
tags as placeholders, is one ``Segment``. ``rebuild`` puts the translated segments back
between the verbatim parts. Parsing and rebuilding take time proportional to the input:
callers on an event loop run them in a thread.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from serve_app.core.gc_pause import gc_paused
from serve_app.translation.markup import protect
from serve_app.translation.markup.segment import (
    Escape,
    PendingTag,
    Segment,
    TagKind,
    Text,
    Unit,
    has_words,
    no_escape,
    number_tags,
    with_line_prefixes,
)


@dataclass(frozen=True)
class MarkupOptions:
    """DeepL's tag-handling options (they apply to ``html`` and ``xml``).

    ``ignore_tags``: elements whose content is not translated; ``splitting_tags``: elements
    that always start a new segment; ``non_splitting_tags``: elements that never do (inline);
    ``outline_detection`` (XML): an element whose parent holds no text of its own is
    structure (splits), as DeepL detects it; off, only ``splitting_tags`` split.
    """

    ignore_tags: frozenset[str] = frozenset()
    non_splitting_tags: frozenset[str] = frozenset()
    splitting_tags: frozenset[str] = frozenset()
    outline_detection: bool = True
    # Document uploads: the limits their segments must keep, checked while the document
    # is read so that one built to be refused stops being read at the limit (``Budget``).
    budget: Budget | None = None


class OverBudget(Exception):
    """A document's segments went past its ``Budget`` while it was read. ``in_segment``:
    one segment is too much on its own (splitting the file would not help)."""

    def __init__(self, message: str, in_segment: bool = False) -> None:
        super().__init__(message)
        self.in_segment = in_segment


@dataclass(frozen=True)
class Budget:
    """Bounds on a document's segments (``documents.DocumentLimits``): how many, the
    characters of one (its source fragment, markup included) and of all together, and the
    engine requests one may need (``Segment.engine_requests``: each segment is translated
    as a request of its own, which a replica refuses beyond ``max_engine_requests``).

    ``Builder`` counts each segment as it is completed, the same quantities the documents'
    ``check_segments`` counts afterwards (a segment's text is its units' source, which is
    what ``Builder`` measures), so a document it stops is one ``check_segments`` refuses:
    the counts only grow. A completed segment's engine requests are counted by the function
    that counts a request's (``Segment.engine_requests``), so a segment accepted here is not
    refused when the worker sends it; counting its runs costs what its characters, checked
    first, allow. The ``Builder`` of a reader that never drops what it collected
    (``watch_pending``) also checks the segment it is collecting, once that segment holds
    words and so is sure to become one: a paragraph of a million ``<b>x</b>`` is stopped
    after some 20,000 characters rather than walked to its end."""

    max_segments: int
    max_segment_chars: int
    max_chars: int
    max_segment_requests: int


NO_OPTIONS = MarkupOptions()


@dataclass
class Document:
    parts: list[str | Segment] = field(default_factory=list)

    @property
    def segments(self) -> list[Segment]:
        return [p for p in self.parts if isinstance(p, Segment)]

    @property
    def has_tags(self) -> bool:
        return any(s.tags for s in self.segments)

    def engine_requests(self, stop_after: int) -> int:
        """The engine requests its translation may hold at once at most: its segments'
        (``Segment.engine_requests``: one, or one for each text run between tags). Counting
        stops between segments once past ``stop_after``; a segment's runs are counted whole
        (a segment of ``<i>a</i>`` repeated has as many as its characters allow)."""
        n = 0
        for segment in self.segments:
            n += segment.engine_requests()
            if n > stop_after:
                break
        return n

    def rebuild(self, translations: Sequence[str]) -> str:
        """The document with its segments replaced by ``translations`` (already restored
        to the format: tags back in place, text escaped), in order."""
        out = iter(translations)
        text = "".join(p if isinstance(p, str) else next(out) for p in self.parts)
        if next(out, None) is not None:
            raise ValueError("more translations than segments")
        return text

    def verbatim(self) -> str:
        return "".join(p if isinstance(p, str) else p.verbatim() for p in self.parts)


class Builder:
    """Collects verbatim source and segments while a parser reads a document."""

    def __init__(
        self, escape: Escape = no_escape, budget: Budget | None = None, watch_pending: bool = False
    ) -> None:
        self.escape = escape
        self.parts: list[str | Segment] = []
        self.pending: list[Unit | PendingTag] = []
        # Above zero while reading words translated only with their sentence (hashtags).
        self.sentence_only = 0
        self.budget = budget
        self.watch_pending = watch_pending and budget is not None
        self.segment_count = 0
        self.chars = 0  # of the segments so far
        self.pending_chars = 0  # of the pending units' source (watched readers only)
        self.pending_words = False  # whether a pending unit holds words (likewise)

    def verbatim(self, raw: str) -> None:
        self.flush()
        if raw:
            self._append(raw)

    def text(self, text: str, raw: str | None = None) -> None:
        """Text of the source; variables and URLs in it are protected."""
        only = self.sentence_only > 0
        if raw is not None and raw != text:
            self._pend(Text(text, raw, only))
            return
        for protected, piece in protect.split(text):
            self._pend(PendingTag("void", piece) if protected else Text(piece, piece, only))

    def tag(self, kind: TagKind, raw: str, key: object = None) -> None:
        self._pend(PendingTag(kind, raw, key))

    def _pend(self, unit: Unit | PendingTag) -> None:
        self.pending.append(unit)
        if self.watch_pending:
            self.pending_chars += len(unit.raw)
            if not self.pending_words and _has_words(unit):
                self.pending_words = True
            if self.pending_words:
                self._check_pending()

    def _check_pending(self) -> None:
        """OverBudget once the segment being collected (sure to be one: it holds words) is
        past the budget. Its first and last units are left out of the count: ``flush``
        strips their whitespace, so what is left is never more than the segment's size."""
        assert self.budget is not None
        least = self.pending_chars - len(self.pending[0].raw)
        if len(self.pending) > 1:
            least -= len(self.pending[-1].raw)
        if least > self.budget.max_segment_chars or self.chars + least > self.budget.max_chars:
            self._charge(least)

    def discard(self) -> None:
        """Drops the pending units (a reader that copies them verbatim instead)."""
        self.pending = []
        self.pending_chars, self.pending_words = 0, False

    def flush(self, line_prefix: str = "", source_prefixes: tuple[str, ...] = ()) -> None:
        """Ends the current segment (a block boundary). ``line_prefix`` is written after each
        line break of its translation; the source's own prefixes after its line breaks, when
        they differ (``Segment.source_prefixes``), are ``source_prefixes``."""
        units = number_tags(self.pending)
        self.discard()
        if not any(
            isinstance(u, Text) and not u.sentence_only and has_words(u.text) for u in units
        ):
            raw = "".join(u.raw for u in units)
            self._append(with_line_prefixes(raw, source_prefixes, line_prefix))
            return
        start, stop = 0, len(units)
        lead = trail = ""
        first, last = units[0], units[-1]
        if isinstance(first, Text) and first.text == first.raw:
            core = first.text.lstrip()
            lead = first.text[: len(first.text) - len(core)]
            units = (replace(first, text=core, raw=core), *units[1:]) if core else units[1:]
            stop = len(units)
            last = units[-1]
        if isinstance(last, Text) and last.text == last.raw:
            core = last.text.rstrip()
            trail = last.text[len(core) :]
            units = (
                (*units[: stop - 1], replace(last, text=core, raw=core))
                if core
                else units[: stop - 1]
            )
        self._append(lead)
        segment = Segment(tuple(units[start:]), self.escape, line_prefix, source_prefixes)
        if self.budget is not None:
            self._charge(sum(len(u.raw) for u in segment.units), completed=True)
            self._check_requests(segment)
        self.parts.append(segment)
        self._append(trail)

    def _charge(self, chars: int, completed: bool = False) -> None:
        """Counts a segment of (at least) ``chars`` characters, the next one; OverBudget
        if it is one too many or too long, or takes the document past its characters."""
        assert self.budget is not None
        budget, number = self.budget, self.segment_count + 1
        if number > budget.max_segments:
            raise OverBudget(
                f"The document holds more than {budget.max_segments} segments "
                "(paragraphs, headings, list items, table cells)"
            )
        if chars > budget.max_segment_chars:
            more = "" if completed else "more than "
            raise OverBudget(
                f"Segment {number} holds {more}{chars} characters (its text with its inline "
                f"markup); at most {budget.max_segment_chars} are accepted in one paragraph"
            )
        if self.chars + chars > budget.max_chars:
            raise OverBudget(f"The document holds more than {budget.max_chars} characters of text")
        if completed:
            self.segment_count, self.chars = number, self.chars + chars

    def _check_requests(self, segment: Segment) -> None:
        """OverBudget if ``segment`` (the last one counted) may need more engine requests
        than one request is allowed (``Segment.engine_requests``)."""
        assert self.budget is not None
        limit = self.budget.max_segment_requests
        # A run lies between two tags: a segment of fewer tags than the limit is within it.
        if len(segment.tags) >= limit and (n := segment.engine_requests()) > limit:
            raise OverBudget(
                f"Segment {self.segment_count} splits into {n} parts to translate (the text "
                f"runs between its inline tags, variables and URLs); at most {limit} are "
                "accepted in one paragraph",
                in_segment=True,
            )

    def document(self) -> Document:
        self.flush()
        return Document(self.parts)

    def _append(self, raw: str) -> None:
        if not raw:
            return
        if self.parts and isinstance(self.parts[-1], str):
            self.parts[-1] += raw
        else:
            self.parts.append(raw)


def _has_words(unit: Unit | PendingTag) -> bool:
    """Whether ``unit`` makes its segment one to translate (as ``Builder.flush`` judges)."""
    return isinstance(unit, Text) and not unit.sentence_only and has_words(unit.text)


Parser = Callable[[str, MarkupOptions], Document]
FORMATS: dict[str, Parser] = {}


def register(name: str) -> Callable[[Parser], Parser]:
    def add(parser: Parser) -> Parser:
        FORMATS[name] = parser
        return parser

    return add


def parse(fmt: str, text: str, options: MarkupOptions = NO_OPTIONS) -> Document:
    """``text`` read as format ``fmt`` (``FORMATS``); KeyError for an unknown format. A large
    text is read with the garbage collector paused (``core.gc_pause``)."""
    parser = FORMATS[fmt]
    with gc_paused(len(text)):
        return parser(text, options)


def engine_requests(fmt: str, text: str, stop_after: int) -> int:
    """The engine requests a request of ``text`` in format ``fmt`` may hold at once: its
    parse's ``Document.engine_requests``, the count the service refuses a request by."""
    return parse(fmt, text).engine_requests(stop_after)
