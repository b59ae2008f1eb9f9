"""The inline half of the Markdown reader (``markdown.py``): one inline token's children
matched back onto its source text.

Emphasis markers, links' ``[`` and ``](url "title")``, images, code spans, inline HTML, hard
breaks, inline math (``$...$``) and footnote references (``[^1]``) become placeholders;
backslash escapes and entities are shown to the model decoded and written back as the source
spelled them. A block may start with a marker that is kept as a placeholder while the rest of
its text is translated (``lead_marker``: a block quote's alert, a task-list item's box).
Anything that cannot be found where the source should hold it raises ``Misaligned``: the
reader then copies the inline untranslated.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Sequence
from typing import ClassVar

from markdown_it.token import Token

from serve_app.translation.markup import atoms
from serve_app.translation.markup.document import Builder
from serve_app.translation.markup.segment import LINE_END

# What a block's inline may start with and keep: its children and source text to the marker
# as the source spells it, or None.
LeadMarker = Callable[[list[Token], str], str | None]

# What markdown-it's ``newline`` rule leaves out of its tokens around a soft break: one
# trailing space, the line end, the next line's leading spaces and tabs.
_SOFTBREAK = re.compile(r"( ?)(\r\n?|\n)([ \t]*)")
_HARDBREAK = re.compile(r"(?: {2,}|\\)(?:\r\n?|\n)[ \t]*")
_ENTITY = re.compile(r"&(?:#\d{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
_PAIRED = {"em", "strong", "s"}


class Misaligned(Exception):
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


def spelled(table: dict[str, str]) -> Callable[[str], str]:
    """Writes a translation's text with ``table``'s spellings (one inline's, filled while it
    is read): its line ends (any of LF, CRLF, CR in the answer) as the inline's own."""

    def escape(text: str) -> str:
        if "\r" in text:
            text = LINE_END.sub("\n", text)
        return "".join(table.get(c, c) for c in text) if any(c in table for c in text) else text

    return escape


class InlineReader:
    """Matches one inline token's children onto its source ``content``."""

    def __init__(self, content: str, builder: Builder, spellings: dict[str, str]) -> None:
        self.src, self.at = content, 0
        self.b, self.spellings = builder, spellings
        self.open: list[object] = []

    def run(self, children: list[Token], lead: LeadMarker | None = None) -> None:
        """Consumes ``children``; ``lead`` finds the marker they may start with (a block
        quote's alert, ``alerts.py``; a task-list item's box), kept as a placeholder."""
        if lead is not None and (marker := lead(children, self.src)) is not None:
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
            raise Misaligned(kind)
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

    def math_inline(self, tok: Token) -> None:
        self.void(self.take(tok.markup + tok.content + tok.markup))

    def footnote_ref(self, tok: Token) -> None:
        self.void(self.take(f"[^{tok.meta['label']}]"))

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

    HANDLERS: ClassVar[dict[str, Callable[[InlineReader, Token], bool | None]]] = {
        "text": text_token,
        "softbreak": softbreak,
        "hardbreak": hardbreak,
        "code_inline": code_inline,
        "html_inline": html_inline,
        "image": image,
        "math_inline": math_inline,
        "math_inline_double": math_inline,
        "footnote_ref": footnote_ref,
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
            raise Misaligned(expected)
        self.at += len(expected)
        return expected

    def match(self, pattern: re.Pattern[str]) -> re.Match[str]:
        m = pattern.match(self.src, self.at)
        if m is None:
            raise Misaligned(pattern.pattern)
        self.at = m.end()
        return m

    def until(self, end: str) -> str:
        stop = self.src.find(end, self.at)
        if stop < 0:
            raise Misaligned(end)
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
        raise Misaligned(opener)

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
                    raise Misaligned(ch)
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
