"""A translatable segment: text runs and the inline tags between them, as the model sees it.

Inline markup (``<a href=...>``, ``**``, a protected ``{name}``) becomes numbered placeholders:
``<x1>...</x1>`` around text, ``<x2/>`` for a tag that stands alone. The model translates the
text and moves the placeholders with the words they wrap; ``restore`` checks its answer
(every placeholder exactly once, properly nested, none invented) and puts the original tags
back. When the answer fails that check, ``runs`` and ``join_runs`` give the structural
fallback: the text runs between tags translated one by one, the tags kept where they were,
so no tag can be lost whatever the model does.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

from serve_app.translation.markup.atoms import edges, has_words

TagKind = Literal["open", "close", "void"]
Escape = Callable[[str], str]


def no_escape(text: str) -> str:
    return text


@dataclass(frozen=True)
class Text:
    """A run of text: ``text`` is what the model sees, ``raw`` what the source holds
    (they differ by entities and escapes)."""

    text: str
    raw: str
    # Words that are translated only with their sentence (a hashtag's name): the model sees
    # them with their segment, but a run of nothing else is not sent on its own.
    sentence_only: bool = False


@dataclass(frozen=True)
class Tag:
    """Markup the model sees as a placeholder; ``raw`` is put back in its place."""

    id: int
    kind: TagKind
    raw: str


Unit = Text | Tag


@dataclass(frozen=True)
class Style:
    """How placeholders are written for a model: ``<x1>..</x1>`` and ``<x2/>`` by default;
    HY-MT1.5's formatted-translation prompt calls its tags ``<sN></sN>``."""

    letter: str = "x"
    void_as_pair: bool = False

    def render(self, tag: Tag) -> str:
        n = f"{self.letter}{abs(tag.id)}"
        if tag.kind == "open":
            return f"<{n}>"
        if tag.kind == "close":
            return f"</{n}>"
        return f"<{n}></{n}>" if self.void_as_pair else f"<{n}/>"

    def pattern(self) -> re.Pattern[str]:
        return _patterns(self.letter)


_PATTERNS: dict[str, re.Pattern[str]] = {}


def _patterns(letter: str) -> re.Pattern[str]:
    if letter not in _PATTERNS:
        _PATTERNS[letter] = re.compile(
            # "\s*(?:(/)\s*)?", not "\s*(/?)\s*": linear on a run of spaces.
            rf"<\s*(?:(/)\s*)?{re.escape(letter)}(\d{{1,5}})\s*(?:(/)\s*)?>",
            re.IGNORECASE,
        )
    return _PATTERNS[letter]


DEFAULT_STYLE = Style()


@dataclass(frozen=True)
class Run:
    """A text run between tags: its units' positions and the text to translate (without
    the whitespace, addresses, handles and shortcodes around it, kept as they are in
    ``lead`` and ``trail``)."""

    start: int
    stop: int
    lead: str
    text: str
    trail: str


@dataclass(frozen=True)
class Segment:
    units: tuple[Unit, ...]
    escape: Escape = field(default=no_escape, compare=False)
    # Written after each line break of the segment (Markdown: "> " inside a block quote).
    line_prefix: str = ""
    # The source's own prefix after each of its line breaks, where they differ (Markdown: a
    # lazy continuation line); ``verbatim`` (and a translation that is the source unchanged)
    # writes them, a translation ``line_prefix``.
    source_prefixes: tuple[str, ...] = ()

    @cached_property
    def _raw(self) -> str:
        return "".join(u.raw for u in self.units)

    def _lines(self, text: str) -> str:
        if self.source_prefixes and text == self._raw:
            return with_line_prefixes(text, self.source_prefixes, self.line_prefix)
        return with_line_prefix(text, self.line_prefix)

    @property
    def tags(self) -> tuple[Tag, ...]:
        return tuple(u for u in self.units if isinstance(u, Tag))

    def verbatim(self) -> str:
        """The segment exactly as the source held it."""
        return with_line_prefixes(self._raw, self.source_prefixes, self.line_prefix)

    def source(self, style: Style = DEFAULT_STYLE) -> str:
        """The text the model translates, placeholders included."""
        return "".join(u.text if isinstance(u, Text) else style.render(u) for u in self.units)

    def restore(self, output: str, style: Style = DEFAULT_STYLE) -> str | None:
        """The model's ``output`` with the original tags in place of the placeholders and
        its text escaped for the format, or None when the placeholders are not all there
        exactly once and properly nested."""
        pieces = _parse_output(output, {t.id: t for t in self.tags}, style)
        if pieces is None:
            return None
        return self._lines("".join(p.raw if isinstance(p, Tag) else self.escape(p) for p in pieces))

    def runs(self) -> list[Run]:
        """The text runs that hold words (``atoms.has_words``): runs of spaces, punctuation,
        addresses, handles or shortcodes, and a hashtag's name alone, stay as they are, and
        so do the addresses, handles and shortcodes a run starts or ends with."""
        out = []
        for start, stop in _run_bounds(self.units):
            texts = [u for u in self.units[start:stop] if isinstance(u, Text)]
            text = "".join(u.text for u in texts)
            core = text.strip()
            if has_words(core) and not all(u.sentence_only for u in texts):
                lead = text[: len(text) - len(text.lstrip())]
                trail = text[len(lead) + len(core) :]
                first, middle, last = edges(core)
                out.append(Run(start, stop, lead + first, middle, last + trail))
        return out

    def engine_requests(self) -> int:
        """The engine requests translating this segment may hold at once at most: one, or
        for a segment with tags one for each text run when the structural method translates
        them one by one (its placeholder attempt, before, takes one), pieces of runs longer
        than a prompt aside. The one count both a request (``Document.engine_requests``) and
        a document upload (``Budget``, ``documents.base.check_requests``) are held to."""
        return max(1, len(self.runs())) if self.tags else 1

    def join_runs(self, translations: Sequence[str]) -> str:
        """The segment with each of ``runs()`` replaced by its translation, in order; tags
        and the text outside the runs are copied from the source."""
        runs = self.runs()
        if len(runs) != len(translations):
            raise ValueError(f"{len(runs)} runs, {len(translations)} translations")
        parts: list[str] = []
        at = 0
        for run, translated in zip(runs, translations, strict=True):
            parts.extend(u.raw for u in self.units[at : run.start])
            parts.append(self.escape(run.lead + translated.strip() + run.trail))
            at = run.stop
        parts.extend(u.raw for u in self.units[at:])
        return self._lines("".join(parts))


# Line ends as Markdown reads them (markdown-it's ``normalize`` rule).
LINE_END = re.compile(r"\r\n?|\n")


def with_line_prefix(text: str, prefix: str) -> str:
    """``text`` with ``prefix`` after each of its line ends (LF, CRLF or CR: Markdown's)."""
    return LINE_END.sub(lambda m: m.group(0) + prefix, text) if prefix else text


def with_line_prefixes(text: str, prefixes: Sequence[str], rest: str = "") -> str:
    """``text`` with ``prefixes[i]`` after its line end ``i`` (``rest`` after any more)."""
    if not prefixes:
        return with_line_prefix(text, rest)
    count = iter(range(len(prefixes)))

    def prefix(m: re.Match[str]) -> str:
        i = next(count, None)
        return m.group(0) + (rest if i is None else prefixes[i])

    return LINE_END.sub(prefix, text)


def _run_bounds(units: Sequence[Unit]) -> Iterator[tuple[int, int]]:
    start: int | None = None
    for i, unit in enumerate(units):
        if isinstance(unit, Text):
            start = i if start is None else start
        elif start is not None:
            yield start, i
            start = None
    if start is not None:
        yield start, len(units)


def _parse_output(output: str, tags: dict[int, Tag], style: Style) -> list[str | Tag] | None:
    """The output as text and tags, or None if its placeholders do not match ``tags``."""
    pieces: list[str | Tag] = []
    stack: list[int] = []
    seen: set[int] = set()
    at = 0
    matches = list(style.pattern().finditer(output))
    i = 0
    while i < len(matches):
        m = matches[i]
        tag = tags.get(int(m.group(2)))
        kind = _kind(m)
        if tag is None or (kind != "close" and tag.id in seen):
            return None
        if tag.kind == "void" and kind == "open":
            # ``<x2></x2>``: a void tag written as an empty pair.
            nxt = matches[i + 1] if i + 1 < len(matches) else None
            if nxt is None or _kind(nxt) != "close" or int(nxt.group(2)) != tag.id:
                return None
            if output[m.end() : nxt.start()].strip():
                return None
            i += 1
            end = nxt.end()
        else:
            if not _fits(tag, kind, stack):
                return None
            end = m.end()
        seen.add(tag.id)
        pieces.append(output[at : m.start()])
        pieces.append(tag if kind != "close" else _closer(tags, tag.id))
        at = end
        i += 1
    pieces.append(output[at:])
    if stack or seen != set(tags) - {t.id for t in tags.values() if t.kind == "close"}:
        return None
    return pieces


def _kind(m: re.Match[str]) -> TagKind:
    if m.group(1):
        return "close"
    return "void" if m.group(3) else "open"


def _fits(tag: Tag, kind: TagKind, stack: list[int]) -> bool:
    """Checks one placeholder against the tag it names and the open ones (updates them)."""
    if tag.kind == "void":
        return kind == "void"
    if tag.kind != "open":
        return False  # closing tags share their opener's id; never looked up directly
    if kind == "open":
        stack.append(tag.id)
        return True
    if kind == "close" and stack and stack[-1] == tag.id:
        stack.pop()
        return True
    return False


def _closer(tags: dict[int, Tag], tag_id: int) -> Tag:
    return tags[-tag_id]


def number_tags(units: Sequence[Unit | PendingTag]) -> tuple[Unit, ...]:
    """Gives pending tags their placeholder numbers (1, 2... in order of appearance).

    A pair is open/close with the same ``key``; an opening or closing tag whose partner is
    not in the segment (a block element inside an inline one) stands alone, as a void tag.
    Closing tags are stored under the negated id of their opener (``_closer``).
    """
    keys_open = {u.key for u in units if isinstance(u, PendingTag) and u.kind == "open"}
    keys_close = {u.key for u in units if isinstance(u, PendingTag) and u.kind == "close"}
    paired = keys_open & keys_close
    out: list[Unit] = []
    ids: dict[object, int] = {}
    n = 0
    for u in units:
        if not isinstance(u, PendingTag):
            out.append(u)
            continue
        if u.kind == "close" and u.key in paired:
            out.append(Tag(-ids[u.key], "close", u.raw))
            continue
        n += 1
        kind: TagKind = "open" if u.kind == "open" and u.key in paired else "void"
        ids[u.key] = n
        out.append(Tag(n, kind, u.raw))
    return tuple(out)


@dataclass(frozen=True)
class PendingTag:
    """A tag met while reading a document, numbered when its segment is complete."""

    kind: TagKind
    raw: str
    key: object = None
