"""Markdown documents (``format`` ``markdown``), read with ``markdown-it-py``.

The block token stream's source maps (line ranges) locate each block's inline text in the
source; everything else (code blocks and fences, HTML blocks, list markers, table pipes,
front matter (``front_matter.py``), blank lines) is copied from the source as it is. Each
inline text (a paragraph, a heading, a table cell, a container's title) is one segment; its
inline tokens are matched back onto its source text (``markdown_inline.py``): emphasis
markers, links' ``[`` and ``](url "title")``, images, code spans, inline HTML and hard breaks
become placeholders, backslash escapes and entities are shown to the model decoded and
written back as the source spelled them. An inline text that cannot be matched (never
expected) is copied untranslated rather than risk changing its markup. The syntax beyond
CommonMark (containers, admonitions, math, footnotes, task boxes) is ``markdown_syntax.py``'s.

Line breaks are matched on the source's own spelling, not markdown-it's: its ``newline`` and
``escape`` rules leave a soft break's one trailing space, a hard break's spaces and the next
line's indentation out of every token, and it reads CRLF and CR as LF. A soft break is text:
its spaces and indentation shown as they are, a CRLF or CR shown as LF (a translation's line
breaks are written as its inline's first line end, so a document of mixed line ends keeps
each paragraph's). A hard break is one placeholder, the next line's indentation with it.
Escapes and entities are written back per inline too: a ``\\*`` in one paragraph does not
escape a translation's ``*`` in another.

Each line after an inline's first is behind its containers' prefix (``> ``, a list item's
indentation), left out of the segment and written after each of a translation's line breaks.
A lazy continuation line leaves out some of that prefix: a translation of a paragraph that
holds one is written with the whole prefix on every line (``_Reader.locate``).
"""

from __future__ import annotations

import bisect
from typing import NamedTuple

from markdown_it.rules_core import StateCore
from markdown_it.token import Token

from serve_app.translation.markup import markdown_syntax
from serve_app.translation.markup.alerts import alert_marker
from serve_app.translation.markup.document import (
    Budget,
    Builder,
    Document,
    MarkupOptions,
    register,
)
from serve_app.translation.markup.front_matter import blank_front_matter
from serve_app.translation.markup.markdown_inline import (
    InlineReader,
    LeadMarker,
    Misaligned,
    spelled,
)
from serve_app.translation.markup.segment import LINE_END

_MD = markdown_syntax.parser()
_LEADS: dict[tuple[str, str], LeadMarker] = {
    ("blockquote_open", "paragraph_open"): alert_marker,
    ("list_item_open", "paragraph_open"): markdown_syntax.task_box,
}


def _block_tokens(source: str, env: dict[str, object]) -> list[Token]:
    """The block tokens of ``source``, their inline tokens not parsed yet (``_inline_parse``):
    the core rules up to ``inline``. Reference definitions are all collected here, in
    ``env``, before any inline is parsed, as ``MarkdownIt.parse`` has them."""
    state = StateCore(source, _MD, env)
    for name, rule in zip(
        _MD.core.ruler.get_active_rules(), _MD.core.ruler.getRules(""), strict=True
    ):
        if name == "inline":
            break
        rule(state)
    return state.tokens


def _inline_parse(tok: Token, env: dict[str, object]) -> None:
    """Parses one inline token's children as ``MarkdownIt.parse`` does (the core rules from
    ``inline`` on, run on this token alone; each of them works token by token). Parsed one
    at a time, as the reader meets them: a document stopped by its budget is not parsed
    further."""
    state = StateCore("", _MD, env)
    state.tokens = [tok]
    started = False
    for name, rule in zip(
        _MD.core.ruler.get_active_rules(), _MD.core.ruler.getRules(""), strict=True
    ):
        started = started or name == "inline"
        if started:
            rule(state)


class _Reader:
    def __init__(self, source: str, budget: Budget | None = None) -> None:
        self.source = source
        # Every line end, once: ``spellings_at`` finds an inline's by bisection (a search from
        # the inline scanned the rest of its line: quadratic for a table row of thousands of
        # cells).
        self.ends = list(LINE_END.finditer(source))
        self.end_starts = [m.start() for m in self.ends]
        self.starts = [0, *(m.end() for m in self.ends)]
        self.eol = self.ends[0].group(0) if self.ends else "\n"
        # Not watch_pending: an inline that cannot be matched drops what it collected.
        self.builder = Builder(budget=budget)
        self.at = 0

    def spellings_at(self, first: int) -> dict[str, str]:
        """The spellings of a translation of the inline starting at ``first``: its line
        breaks as that inline's first line end (the document's first for an inline on the
        last, unended line), then the characters it spelled as escapes or entities."""
        i = bisect.bisect_left(self.end_starts, first)
        if i > 0 and self.ends[i - 1].end() > first:
            eol = "\n"  # ``first`` inside a CRLF: what a search from it finds
        else:
            eol = self.ends[i].group(0) if i < len(self.ends) else self.eol
        return {} if eol == "\n" else {"\n": eol}

    def read(self) -> Document:
        env: dict[str, object] = {}
        tokens = _block_tokens(blank_front_matter(self.source), env)  # copied as it is
        try:
            before = ("", "")  # the two tokens' types before this one
            titled = False  # the last MkDocs admonition's title is written
            for i, tok in enumerate(tokens):
                tokens[i] = None  # type: ignore[call-overload]  # freed once read
                if tok.type == markdown_syntax.ADMONITION:
                    titled = markdown_syntax.titled(tok)
                named = before[1] == markdown_syntax.ADMONITION_TITLE and not titled
                if tok.type == "inline" and tok.map and tok.content.strip() and not named:
                    _inline_parse(tok, env)
                    self.inline(tok, _LEADS.get(before))
                elif tok.type == markdown_syntax.CONTAINER and tok.map:
                    self.container_title(tok)
                before = (before[1], tok.type)
        finally:
            # What is left (a document stopped by its budget) freed a thousand at a time:
            # a million tokens freed in one call hold the GIL, and the event loop stood still
            # for 0.6 s (a table of 400,000 cells, 1.6 MB).
            while tokens:
                del tokens[-1000:]
        self.builder.verbatim(self.source[self.at :])
        return self.builder.document()

    def container_title(self, tok: Token) -> None:
        """A container's fence line: its title translated (``markdown_syntax``), the rest
        copied."""
        assert tok.map is not None
        row = tok.map[0]
        if row >= len(self.starts) or self.starts[row] < self.at:
            return
        end = self.end_starts[row] if row < len(self.ends) else len(self.source)
        title = markdown_syntax.container_title(tok, self.source, self.starts[row], end)
        if title is None:
            return
        self.builder.verbatim(self.source[self.at : title.start])
        self.builder.escape = spelled({})
        self.builder.text(self.source[title.start : title.end])
        self.builder.flush()
        self.at = title.end

    def inline(self, tok: Token, lead: LeadMarker | None = None) -> None:
        assert tok.map is not None
        lines = tok.content.split("\n")
        found = self.locate(lines, tok.map[0])
        if found is None:
            return  # copied untranslated with the rest of the source
        first, end, prefix, content, source_prefixes = found
        self.builder.verbatim(self.source[self.at : first])
        spellings = self.spellings_at(first)
        self.builder.escape = spelled(spellings)  # read by this inline's segment
        try:
            InlineReader(content, self.builder, spellings).run(tok.children or [], lead)
        except (Misaligned, IndexError):
            self.builder.discard()
            self.builder.verbatim(self.source[first:end])
        else:
            self.builder.flush(prefix, source_prefixes)
        self.at = end

    def locate(self, lines: list[str], line: int) -> _Place | None:
        """Where the content's lines are in the source (``_Place``)."""
        if line >= len(self.starts):
            return None
        first = self.source.find(lines[0], max(self.at, self.starts[line]))
        if first < 0:
            return None
        end, prefixes, content = first + len(lines[0]), [], [lines[0]]
        for k, parsed in enumerate(lines[1:], 1):
            found = self.line_at(parsed, line + k, end)
            if found is None:
                return None
            pos, text = found
            prefixes.append(self.source[self.starts[line + k] : pos])
            content += [self.source[end : self.starts[line + k]], text]
            end = pos + len(text)
        if len(set(prefixes)) < 2:
            return _Place(first, end, prefixes[0] if prefixes else "", "".join(content))
        # Lines indented differently: a lazy continuation line lacks some of its containers'
        # prefixes ("> ", a list item's indentation). A translation's lines are all written
        # with the container's whole prefix, the one of most "> " and then longest.
        prefix = max(prefixes, key=lambda p: (p.count(">"), len(p)))
        return _Place(first, end, prefix, "".join(content), tuple(prefixes))

    def line_at(self, text: str, row: int, after: int) -> tuple[int, str] | None:
        """Where ``text`` is on line ``row``, the line before it ending at ``after`` (a content
        line other than the last runs to its line end), and the text as the source spells it.
        A line indented with a tab that crosses its container's indentation reaches
        markdown-it's content as the tab's remaining columns in spaces: then the text without
        them, behind the source's own whitespace (the tab, part of the line's prefix)."""
        if row >= len(self.starts) or not LINE_END.fullmatch(self.source, after, self.starts[row]):
            return None
        start = self.starts[row]
        pos = self.source.find(text, start)
        if (pos < 0 or LINE_END.search(self.source, start, pos)) and text.startswith(" "):
            text = text.lstrip(" ")
            pos = self.source.find(text, start)
            if pos >= 0 and (not text or self.source[start:pos].strip(" \t")):
                return None
        if pos < 0 or LINE_END.search(self.source, start, pos):
            return None
        return pos, text


class _Place(NamedTuple):
    """Where an inline's content is in the source: from ``start`` to ``end``, each line after
    the first behind ``prefix`` (a block quote's ``> ``, a list item's indentation), and the
    content as the source spells it (its line ends, which markdown-it reads as LF). When the
    lines' prefixes differ (lazy continuation lines), ``source_prefixes`` holds each one and
    ``prefix`` is the container's whole prefix, which a translation's lines are written with."""

    start: int
    end: int
    prefix: str
    content: str
    source_prefixes: tuple[str, ...] = ()


@register("markdown")
def parse_markdown(text: str, options: MarkupOptions) -> Document:
    return _Reader(text, options.budget).read()
