"""HTML and XML read into a tree whose every node keeps its exact source text.

Built on the standard library's ``html.parser``: measured against ``selectolax`` (lexbor)
and ``lxml`` on social-media posts (docs/markup.md), it is slower per post but the only one
that reports where each token is in the source. That is what lets tags, attributes, entities
and everything not translated come back byte for byte: the tree parsers rebuild markup from
their own model of it (attribute quotes, entity spellings, implied tags all change). It is
also lenient like a browser: unclosed and stray tags are kept, never an error.
"""

from __future__ import annotations

import html
import re
from collections import Counter
from dataclasses import dataclass, field
from html.parser import HTMLParser

_VOIDS = "area base br col embed hr img input link meta param source track wbr"
VOID_HTML = frozenset(_VOIDS.split())
_NAME = re.compile(r"</?\s*([^\s/>]+)")
_SUBSET_END = re.compile(r"\]\s*>")
# What html.parser (3.11) needs to close a comment and a marked section (``<![CDATA[``).
_COMMENT_CLOSE = re.compile(r"--\s*>")
_SECTION_CLOSE = re.compile(r"\]\s*>")
_OPENS_SECTION = re.compile(r"<!(?:--|\[)")
_BOGUS_CHARREF = re.compile(r"&#(?![0-9]|[xX][0-9a-fA-F])")
_PLAIN = "\x00"  # stands for a character that html.parser must read as text
# HTML's optional end tags (WHATWG, "optional tags"): a start tag named on the right ends the
# innermost open element named on the left, as a browser's parser ends it. Without them
# ``<p>a<p>b`` nested each paragraph in the one before, and a page of more than 100 unclosed
# paragraphs, list items or table cells was past the walk's depth limit and copied
# untranslated from there on.
_BLOCK_STARTS = (
    "address article aside blockquote details dialog div dl fieldset figcaption figure "
    "footer form h1 h2 h3 h4 h5 h6 header hgroup hr main menu nav ol p pre section table ul "
    "li dd dt td th tr"
)
_CELL_ENDERS = frozenset({"td", "th", "tr", "thead", "tbody", "tfoot"})
_ENDED_BY: dict[str, frozenset[str]] = {
    "p": frozenset(_BLOCK_STARTS.split()),
    "li": frozenset({"li"}),
    "dt": frozenset({"dt", "dd"}),
    "dd": frozenset({"dt", "dd"}),
    "option": frozenset({"option", "optgroup"}),
    "optgroup": frozenset({"optgroup"}),
    "td": _CELL_ENDERS,
    "th": _CELL_ENDERS,
    "tr": frozenset({"tr", "thead", "tbody", "tfoot"}),
    "thead": frozenset({"tbody", "tfoot"}),
    "tbody": frozenset({"tbody", "tfoot"}),
    "rt": frozenset({"rt", "rp"}),
    "rp": frozenset({"rt", "rp"}),
}


@dataclass
class Node:
    """Text (``entity`` when it is a character reference) or other markup (a comment, a
    declaration, a stray end tag): copied as it is unless it is text to translate."""

    raw: str
    kind: str = "text"  # text | entity | other

    @property
    def text(self) -> str:
        return html.unescape(self.raw) if self.kind == "entity" else self.raw


@dataclass
class Element:
    name: str
    start: str  # the start tag as written
    attrs: dict[str, str | None] = field(default_factory=dict)
    children: list[Element | Node] = field(default_factory=list)
    end: str = ""  # the end tag as written; "" for void, self-closing or unclosed elements
    void: bool = False

    def raw(self) -> str:
        """The element's source text (iterative: documents may nest deeply)."""
        out: list[str] = []
        stack: list[Element | Node | str] = [self]
        while stack:
            n = stack.pop()
            if isinstance(n, str):
                out.append(n)
            elif isinstance(n, Node):
                out.append(n.raw)
            else:
                out.append(n.start)
                stack.append(n.end)
                stack.extend(reversed(n.children))
        return "".join(out)

    def elements(self) -> list[Element]:
        """This element and those inside it, in document order (parents first)."""
        order: list[Element] = []
        stack = [self]
        while stack:
            el = stack.pop()
            order.append(el)
            stack.extend(c for c in reversed(el.children) if isinstance(c, Element))
        return order


class _TreeBuilder(HTMLParser):
    def __init__(self, source: str, xml: bool) -> None:
        super().__init__(convert_charrefs=False)
        self.source, self.xml = source, xml
        self.lines = [0]
        self.lines.extend(m.end() for m in re.finditer("\n", source))
        self.root = Element("", "")
        self.stack = [self.root]
        # How many elements of each name are open (on the stack): an end tag that closes
        # none is known at once, not after a walk down the whole stack (quadratic: 100,000
        # characters of ``<i>a</b>`` took 2 s).
        self.open: Counter[str] = Counter()
        # (offset, node): each token's source text runs to the next token's offset.
        self.tokens: list[tuple[int, Element | Node, str]] = []
        # Inside a DOCTYPE's internal subset (``<!DOCTYPE x [ ... ]>``): the parser ends the
        # declaration at its first ``>`` and reads the closing ``]>`` as text.
        self.in_subset = False

    def _offset(self) -> int:
        line, col = self.getpos()
        return self.lines[line - 1] + col

    def _name(self, fallback: str) -> str:
        raw = self.get_starttag_text() or ""
        m = _NAME.match(raw)
        name = m.group(1) if m else fallback
        return name if self.xml else name.lower()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        name = self._name(tag)
        if not self.xml:
            self._end_implied(name)
        void = not self.xml and name in VOID_HTML
        el = Element(name, "", dict(attrs), void=void)
        self.stack[-1].children.append(el)
        self.tokens.append((self._offset(), el, "start"))
        if not void:
            self.stack.append(el)
            self.open[name] += 1

    def _end_implied(self, name: str) -> None:
        """Ends the open elements an HTML start tag ``name`` ends (``<li>`` an open ``li``)."""
        while len(self.stack) > 1 and name in _ENDED_BY.get(self.stack[-1].name, ()):
            self.open[self.stack.pop().name] -= 1

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        el = Element(self._name(tag), "", dict(attrs), void=True)
        self.stack[-1].children.append(el)
        self.tokens.append((self._offset(), el, "start"))

    def handle_endtag(self, tag: str) -> None:
        offset = self._offset()
        m = _NAME.match(self.source, offset)
        name = m.group(1) if m else tag
        name = name if self.xml else name.lower()
        if not self.open[name]:
            self._other(offset)  # an end tag that closes nothing: kept as it is
            return
        depth = len(self.stack) - 1  # the walk ends at the first match: at most what it pops
        while self.stack[depth].name != name:
            depth -= 1
        el = self.stack[depth]
        self.open.subtract(e.name for e in self.stack[depth:])
        del self.stack[depth:]
        self.tokens.append((offset, el, "end"))

    def _leaf(self, kind: str, offset: int | None = None) -> None:
        node = Node("", kind)
        self.stack[-1].children.append(node)
        self.tokens.append((self._offset() if offset is None else offset, node, "leaf"))

    def _other(self, offset: int | None = None) -> None:
        node = Node("", "other")
        self.stack[-1].children.append(node)
        self.tokens.append((self._offset() if offset is None else offset, node, "leaf"))

    def handle_data(self, data: str) -> None:
        if not self.in_subset:
            self._leaf("text")
            return
        self._other()  # DTD text is markup, never translated
        end = _SUBSET_END.search(data)
        if end:
            self.in_subset = False
            if end.end() < len(data):
                self._leaf("text", self._offset() + end.end())

    def handle_entityref(self, name: str) -> None:
        self._leaf("entity")

    def handle_charref(self, name: str) -> None:
        self._leaf("entity")

    def handle_comment(self, data: str) -> None:
        self._other()

    def handle_decl(self, decl: str) -> None:
        self._other()
        if decl[:7].upper() == "DOCTYPE" and "[" in decl and "]" not in decl.split("[", 1)[1]:
            self.in_subset = True

    def handle_pi(self, data: str) -> None:
        self._other()

    def unknown_decl(self, data: str) -> None:
        self._other()

    def parse_marked_section(self, i: int, report: bool = True) -> int:
        """``<![name[...]]>``; an unknown name or none (``<![foo[``, ``<![ x``) is kept as
        other markup up to its ``>``, where the standard library raises AssertionError."""
        try:
            return int(super().parse_marked_section(i, report))
        except AssertionError:
            end = self.rawdata.find(">", i + 3)
            if end < 0:
                return -1
            self.unknown_decl(self.rawdata[i + 3 : end])
            return end + 1

    def build(self) -> Element:
        self.feed(parser_input(self.source))
        self.close()
        self._fill()
        return self.root

    def _fill(self) -> None:
        """Gives each token its source text: up to where the next token starts."""
        ends = [offset for offset, _, _ in self.tokens[1:]] + [len(self.source)]
        if self.tokens and self.tokens[0][0] > 0:  # (the parser never skips a prefix)
            self.root.children.insert(0, Node(self.source[: self.tokens[0][0]], "other"))
        for (offset, node, role), end in zip(self.tokens, ends, strict=True):
            raw = self.source[offset:end]
            if role == "start":
                assert isinstance(node, Element)
                node.start = raw
            elif role == "end":
                assert isinstance(node, Element)
                node.end = raw
            else:
                assert isinstance(node, Node)
                node.raw = raw


def parser_input(source: str) -> str:
    """``source`` as html.parser reads it: the same length (token offsets are the source's,
    and every token's text is taken from the source), with the ``<`` of each construct that
    can never close and the ``&`` of each ``&#`` that is no character reference made plain
    text. html.parser reads those as text as well, but only after scanning to the end of the
    input for their close, once for each (quadratic: 100,000 characters of ``<a`` took 13 s,
    of ``<!--x>`` 3 s); and after a bogus ``&#`` it read the rest of the document as text,
    tags included (they came back escaped)."""
    cut = source.rfind(">") + 1  # after the last ">", no tag, comment or section can end
    last_comment = _last_start(_COMMENT_CLOSE, source)
    last_section = _last_start(_SECTION_CLOSE, source)
    plain = [m.start() for m in _BOGUS_CHARREF.finditer(source)]
    for m in _OPENS_SECTION.finditer(source, 0, cut):
        i = m.start()
        comment = m.group(0) == "<!--"
        if (last_comment < i + 4) if comment else (last_section < i + 3):
            plain.append(i)
    text = source
    if plain:
        chars = list(source)
        for i in plain:
            chars[i] = _PLAIN
        text = "".join(chars)
    return text[:cut] + text[cut:].replace("<", _PLAIN)


def _last_start(pattern: re.Pattern[str], text: str) -> int:
    """Where the last match of ``pattern`` in ``text`` starts; -1 if none."""
    last = -1
    for m in pattern.finditer(text):
        last = m.start()
    return last


def parse_tree(source: str, xml: bool = False) -> Element:
    """The document's root (a nameless element); ``root.raw() == source``."""
    if not source:
        return Element("", "")
    return _TreeBuilder(source, xml).build()
