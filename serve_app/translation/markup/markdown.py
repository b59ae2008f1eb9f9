"""Markdown documents (``format`` ``markdown``), read with ``markdown-it-py``.

The block token stream's source maps (line ranges) locate each block's inline text in the
source; everything else (code blocks and fences, HTML blocks, list markers, table pipes,
front matter (``front_matter.py``), blank lines) is copied from the source as it is. Each
inline text (a paragraph, a heading, a table cell) is one segment; its inline tokens are
matched back onto its source text: emphasis markers, links' ``[`` and ``](url "title")``,
images, code spans, inline HTML and hard breaks become placeholders, backslash escapes and
entities are shown to the model decoded and written back as the source spelled them. An
inline text that cannot be matched (never expected) is copied untranslated rather than risk
changing its markup.

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
import html
import re
from collections.abc import Callable, Sequence
from typing import ClassVar, NamedTuple

from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore
from markdown_it.token import Token

from serve_app.translation.markup import atoms
from serve_app.translation.markup.alerts import alert_marker
from serve_app.translation.markup.document import (
    Budget,
    Builder,
    Document,
    MarkupOptions,
    register,
)
from serve_app.translation.markup.front_matter import blank_front_matter
from serve_app.translation.markup.segment import LINE_END

_MD = MarkdownIt("commonmark").enable(["table", "strikethrough"])
# What markdown-it's ``newline`` rule leaves out of its tokens around a soft break: one
# trailing space, the line end, the next line's leading spaces and tabs.
_SOFTBREAK = re.compile(r"( ?)(\r\n?|\n)([ \t]*)")
_HARDBREAK = re.compile(r"(?: {2,}|\\)(?:\r\n?|\n)[ \t]*")
_ENTITY = re.compile(r"&(?:#\d{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
_PAIRED = {"em", "strong", "s"}


class _Misaligned(Exception):
    """An inline token could not be found where the source should hold it."""


def _shows_address(tokens: Sequence[Token], at: int) -> bool:
    """Whether the (non-auto) link opened by ``tokens[at]`` has its address as its text
    (``atoms.shows_address``). Reads the tokens in place: a copy of the rest for each link
    made a paragraph of links quadratic."""
    link = tokens[at]
    if link.markup == "autolink":
        return False
    text = []
    for k in range(at + 1, len(tokens)):
        tok = tokens[k]
        if tok.type == "link_close":
            break
        text.append(tok.content if tok.type == "text" else " ")
    return atoms.shows_address("".join(text), str(link.attrs.get("href") or ""))


def _spelled(table: dict[str, str]) -> Callable[[str], str]:
    """Writes a translation's text with ``table``'s spellings (one inline's, filled while it
    is read): its line ends (any of LF, CRLF, CR in the answer) as the inline's own."""

    def escape(text: str) -> str:
        if "\r" in text:
            text = LINE_END.sub("\n", text)
        return "".join(table.get(c, c) for c in text) if any(c in table for c in text) else text

    return escape


class _Inline:
    """Matches one inline token's children onto its source ``content``."""

    def __init__(self, content: str, builder: Builder, spellings: dict[str, str]) -> None:
        self.src, self.at = content, 0
        self.b, self.spellings = builder, spellings
        self.open: list[object] = []

    def run(self, children: list[Token], quote_start: bool = False) -> None:
        """Consumes ``children``; ``quote_start``: they open a block quote, whose alert
        marker (``alerts.py``) is kept as a placeholder."""
        if quote_start and (marker := alert_marker(children, self.src)) is not None:
            self.void(self.take(marker))
            self.text(children[0].content[len(marker) :])
            children = children[1:]
        skip_to_close = False
        for i, tok in enumerate(children):
            if skip_to_close:
                skip_to_close = tok.type != "link_close"
                continue
            if tok.type == "link_open" and _shows_address(children, i):
                self.void(self.bracketed() + self.destination())  # an address: one atom
                skip_to_close = True
                continue
            skip_to_close = self.token(tok)
        if self.at < len(self.src):
            self.b.text(self.src[self.at :])

    def token(self, tok: Token) -> bool:
        """Consumes ``tok``; True when the tokens up to the next link_close are consumed too."""
        kind = tok.type
        if kind.removesuffix("_open") in _PAIRED or kind.removesuffix("_close") in _PAIRED:
            self.pair(tok)
            return False
        handler = self.HANDLERS.get(kind)
        if handler is None:
            raise _Misaligned(kind)
        return bool(handler(self, tok))

    def softbreak(self, tok: Token) -> None:
        space, end, indent = self.match(_SOFTBREAK).groups()
        if space:
            self.b.text(space)
        self.b.text("\n", end)
        if indent:
            self.b.text(indent)

    def hardbreak(self, tok: Token) -> None:
        self.void(self.match(_HARDBREAK).group(0))

    def code_inline(self, tok: Token) -> None:
        self.void(self.code(tok.markup))

    def html_inline(self, tok: Token) -> None:
        if "\n" not in tok.content:
            self.void(self.take(tok.content))
            return
        lines = (re.escape(line) for line in tok.content.split("\n"))
        self.void(self.match(re.compile(f"(?:{LINE_END.pattern})".join(lines))).group(0))

    def image(self, tok: Token) -> None:
        self.void(self.take("!") + self.bracketed() + self.destination())

    def link_open(self, tok: Token) -> bool:
        if tok.markup == "autolink":
            self.void(self.take("<") + self.until(">"))
            return True
        self.open.append(key := object())
        self.b.tag("open", self.take("["), key)
        return False

    def link_close(self, tok: Token) -> None:
        self.b.tag("close", self.take("]") + self.destination(), self.open.pop())

    def text_token(self, tok: Token) -> None:
        self.text(tok.content)

    HANDLERS: ClassVar[dict[str, Callable[[_Inline, Token], bool | None]]] = {
        "text": text_token,
        "softbreak": softbreak,
        "hardbreak": hardbreak,
        "code_inline": code_inline,
        "html_inline": html_inline,
        "image": image,
        "link_open": link_open,
        "link_close": link_close,
    }

    def pair(self, tok: Token) -> None:
        raw = self.take(tok.markup)
        if tok.nesting == 1:
            self.open.append(key := object())
            self.b.tag("open", raw, key)
        else:
            self.b.tag("close", raw, self.open.pop())

    def void(self, raw: str) -> None:
        self.b.tag("void", raw)

    def take(self, expected: str) -> str:
        if not self.src.startswith(expected, self.at):
            raise _Misaligned(expected)
        self.at += len(expected)
        return expected

    def match(self, pattern: re.Pattern[str]) -> re.Match[str]:
        m = pattern.match(self.src, self.at)
        if m is None:
            raise _Misaligned(pattern.pattern)
        self.at = m.end()
        return m

    def until(self, end: str) -> str:
        stop = self.src.find(end, self.at)
        if stop < 0:
            raise _Misaligned(end)
        raw, self.at = self.src[self.at : stop + len(end)], stop + len(end)
        return raw

    def code(self, ticks: str) -> str:
        pattern = re.compile(rf"{ticks}(?!`).*?(?<!`){ticks}(?!`)", re.DOTALL)
        return self.match(pattern).group(0)

    def bracketed(self) -> str:
        """``[...]`` with nested brackets and escapes."""
        return self.balanced("[", "]")

    def balanced(self, opener: str, closer: str) -> str:
        start, depth, i = self.at, 0, self.at
        while i < len(self.src):
            c = self.src[i]
            if c == "\\":
                i += 2
                continue
            depth += (c == opener) - (c == closer)
            i += 1
            if depth == 0:
                self.at = i
                return self.src[start:i]
        raise _Misaligned(opener)

    def destination(self) -> str:
        """What follows a link's text: ``(url "title")``, ``[ref]`` or nothing."""
        if self.src.startswith("(", self.at):
            return self.balanced("(", ")")
        if self.src.startswith("[", self.at):
            return self.balanced("[", "]")
        return ""

    def text(self, text: str) -> None:
        """Text as markdown-it decoded it; the source may spell characters as backslash
        escapes or entities, which are kept as the source's spellings."""
        plain = 0
        for ch in text:
            raw = self.escaped(ch)
            if raw is None:
                if not self.src.startswith(ch, self.at):
                    raise _Misaligned(ch)
                self.at += 1
                plain += 1
                continue
            self.flush_plain(plain, len(raw))
            plain = 0
            self.spellings.setdefault(ch, raw)
            self.b.text(ch, raw)
        self.flush_plain(plain, 0)

    def flush_plain(self, n: int, after: int) -> None:
        if n:
            end = self.at - after
            self.b.text(self.src[end - n : end])

    def escaped(self, ch: str) -> str | None:
        """The escape or entity spelling ``ch`` at the cursor (consumed), if there is one."""
        at = self.at
        if self.src.startswith(("\\", "&"), at):
            if self.src.startswith("\\" + ch, at):
                self.at += 2
                return "\\" + ch
            m = _ENTITY.match(self.src, at)
            if m and html.unescape(m.group(0)) == ch:
                self.at = m.end()
                return m.group(0)
        return None


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
            for i, tok in enumerate(tokens):
                tokens[i] = None  # type: ignore[call-overload]  # freed once read
                if tok.type == "inline" and tok.map and tok.content.strip():
                    _inline_parse(tok, env)
                    self.inline(tok, before == ("blockquote_open", "paragraph_open"))
                before = (before[1], tok.type)
        finally:
            # What is left (a document stopped by its budget) freed a thousand at a time:
            # a million tokens freed in one call hold the GIL, and the event loop stood still
            # for 0.6 s (a table of 400,000 cells, 1.6 MB).
            while tokens:
                del tokens[-1000:]
        self.builder.verbatim(self.source[self.at :])
        return self.builder.document()

    def inline(self, tok: Token, quote_start: bool = False) -> None:
        assert tok.map is not None
        lines = tok.content.split("\n")
        found = self.locate(lines, tok.map[0])
        if found is None:
            return  # copied untranslated with the rest of the source
        first, end, prefix, content, source_prefixes = found
        self.builder.verbatim(self.source[self.at : first])
        spellings = self.spellings_at(first)
        self.builder.escape = _spelled(spellings)  # read by this inline's segment
        try:
            _Inline(content, self.builder, spellings).run(tok.children or [], quote_start)
        except (_Misaligned, IndexError):
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
