"""Inline formatting as tags the model sees: ``<g1>bold</g1>``, ``<x2/>``.

A paragraph whose runs differ in formatting (bold, italic, a link) is translated as one
segment so the model sees the whole sentence; each run group travels as a numbered tag
(``gN`` pairs around text, ``xN`` stand-alone for things without text). Text outside tags is
XML-escaped. A translation is accepted only if it parses and holds every tag of the source
exactly once; otherwise ``translate_tagged`` falls back to translating the text between the
tags piece by piece, which cannot lose a tag (documents keep their formatting whatever the
model does).
"""

from __future__ import annotations

import asyncio
import html
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from xml.etree import ElementTree as ET
from xml.sax.saxutils import escape

from serve_app.documents.base import Segment, keep_space

_TAG = re.compile(r"^([gx])([1-9][0-9]{0,4})$")


@dataclass
class Tag:
    """A ``gN`` (pair, with children) or ``xN`` (stand-alone) tag."""

    kind: str
    n: int
    children: list[Node] = field(default_factory=list)


Node = str | Tag


def render(nodes: Sequence[Node]) -> str:
    """The tagged text of ``nodes``."""
    out = []
    for node in nodes:
        if isinstance(node, str):
            out.append(escape(node))
        elif node.kind == "x":
            out.append(f"<x{node.n}/>")
        else:
            out.append(f"<g{node.n}>{render(node.children)}</g{node.n}>")
    return "".join(out)


def parse(text: str) -> list[Node]:
    """The nodes of a tagged text; ValueError if it is not well-formed or holds other tags."""
    try:
        root = ET.fromstring(f"<r>{text}</r>")
    except ET.ParseError as exc:
        raise ValueError(f"not well-formed: {exc}") from exc
    return _children(root)


def _children(element: ET.Element) -> list[Node]:
    nodes: list[Node] = []
    if element.text:
        nodes.append(element.text)
    for child in element:
        match = _TAG.match(child.tag)
        if match is None or child.attrib:
            raise ValueError(f"unknown tag <{child.tag}>")
        kind, n = match.group(1), int(match.group(2))
        if kind == "x" and (len(child) or child.text):
            raise ValueError(f"<x{n}/> must be empty")
        nodes.append(Tag(kind, n, _children(child)))
        if child.tail:
            nodes.append(child.tail)
    return nodes


def tags(nodes: Sequence[Node]) -> list[tuple[str, int]]:
    """Every tag, depth first."""
    out: list[tuple[str, int]] = []
    for node in nodes:
        if isinstance(node, Tag):
            out.append((node.kind, node.n))
            out.extend(tags(node.children))
    return out


def plain(nodes: Sequence[Node]) -> str:
    return "".join(n if isinstance(n, str) else plain(n.children) for n in nodes)


def texts(nodes: Sequence[Node]) -> list[str]:
    """The text pieces, in order (each between two tag boundaries)."""
    out: list[str] = []
    for node in nodes:
        if isinstance(node, str):
            out.append(node)
        else:
            out.extend(texts(node.children))
    return out


def fill(nodes: Sequence[Node], pieces: Sequence[str]) -> list[Node]:
    """``nodes`` with their text pieces replaced by ``pieces`` (as many as ``texts`` gives)."""
    it = iter(pieces)

    def walk(level: Sequence[Node]) -> list[Node]:
        return [
            next(it) if isinstance(n, str) else Tag(n.kind, n.n, walk(n.children)) for n in level
        ]

    return walk(nodes)


def matches(translation: str, source: Sequence[Node]) -> list[Node] | None:
    """The translation's nodes if it holds exactly the source's tags, else None."""
    try:
        nodes = parse(translation)
    except ValueError:
        return None
    return nodes if sorted(tags(nodes)) == sorted(tags(source)) else None


def group_texts(nodes: Sequence[Node], count: int) -> list[str]:
    """Text per ``gN`` (1..count): each tag's own text; text outside any tag goes to the
    tag before it (or the first)."""
    out = [""] * count

    def walk(level: Sequence[Node], current: int) -> None:
        for node in level:
            if isinstance(node, str):
                out[current - 1] += node
            elif node.kind == "g" and 1 <= node.n <= count:
                walk(node.children, node.n)
                current = node.n
            else:
                walk(node.children, current)

    walk(nodes, 1)
    return out


Translate = Callable[[str, str], Awaitable[str]]
# Engine requests one segment's fallback makes at once: a segment's pieces are many (up to
# ``DocumentLimits.max_segment_tags`` tags), and a worker translates several segments.
PIECES_AT_ONCE = 4


async def translate_tagged(text: str, context: str, translate: Translate) -> str:
    """A tagged segment translated with its tags intact: whole if the model keeps the tags,
    else piece by piece (the whole segment's plain text as context)."""
    source = parse(text)
    whole = await translate(text, context)
    if matches(whole, source) is not None:
        return whole
    pieces = texts(source)
    sentence = plain(source)
    at_once = asyncio.Semaphore(PIECES_AT_ONCE)

    async def one(piece: str) -> str:
        if not piece.strip():
            return piece
        async with at_once:
            return keep_space(piece, await translate(piece, sentence))

    done = await asyncio.gather(*(one(p) for p in pieces))
    return render(fill(source, done))


# -- markup in a string (subtitle cues' <i>, <b>, <v Name>) ----------------------------------

_MARKUP = re.compile(r"</?[A-Za-z][^<>]*>|<[0-9][0-9:.]*>")


@dataclass(frozen=True)
class Encoded:
    """A string's markup tags as numbered tags: ``nodes`` for the model, ``table`` to put
    the original tags back (for ``gN``: its opening and closing tag; for ``xN``: the tag)."""

    nodes: list[Node]
    table: dict[int, tuple[str, str]]

    @property
    def tagged(self) -> bool:
        return bool(self.table)


def encode_markup(raw: str, *, entities: bool, pattern: re.Pattern[str] = _MARKUP) -> Encoded:
    """``raw`` with its tags (what ``pattern`` matches) numbered; a match that is not an
    opening tag (a closing tag without its opening one, a placeholder such as ``%s``)
    stands alone, an opening tag never closed is closed at the end with nothing."""
    table: dict[int, tuple[str, str]] = {}
    root = Tag("g", 0)
    stack = [root]
    pos = 0
    for match in pattern.finditer(raw):
        _text(stack[-1], raw[pos : match.start()], entities)
        pos = match.end()
        tag = match.group()
        n = len(table) + 1
        if tag.startswith("</") and len(stack) > 1 and _closes(tag, table[stack[-1].n][0]):
            table[stack[-1].n] = (table[stack[-1].n][0], tag)
            stack.pop()
        elif _standalone(tag):
            table[n] = (tag, "")
            stack[-1].children.append(Tag("x", n))
        else:
            table[n] = (tag, "")
            node = Tag("g", n)
            stack[-1].children.append(node)
            stack.append(node)
    _text(stack[-1], raw[pos:], entities)
    return Encoded(root.children, table)


def _standalone(tag: str) -> bool:
    return not tag.startswith("<") or tag.startswith("</") or tag[1].isdigit() or tag.endswith("/>")


def _closes(closing: str, opening: str) -> bool:
    name = re.match(r"</?([A-Za-z0-9]+)", closing)
    other = re.match(r"<([A-Za-z0-9]+)", opening)
    return bool(name and other and name.group(1).lower() == other.group(1).lower())


def _text(parent: Tag, text: str, entities: bool) -> None:
    if text:
        parent.children.append(html.unescape(text) if entities else text)


def decode_markup(
    nodes: Sequence[Node], table: dict[int, tuple[str, str]], *, entities: bool
) -> str:
    """The string of ``nodes`` with the original tags (unknown numbers are dropped)."""
    out = []
    for node in nodes:
        if isinstance(node, str):
            out.append(escape(node) if entities else node)
            continue
        opening, closing = table.get(node.n, ("", ""))
        out.append(opening + decode_markup(node.children, table, entities=entities) + closing)
    return "".join(out)


def encoded_segment(enc: Encoded, context: str) -> Segment:
    """The segment of an encoded string: tagged if it held tags."""
    return Segment(
        render(enc.nodes) if enc.tagged else plain(enc.nodes).strip(), context, enc.tagged
    )


def restore(enc: Encoded, translation: str, *, entities: bool) -> str:
    """The original string's form of ``translation`` (of ``encoded_segment(enc)``): its tags
    put back; a translation without them (not checked by ``translate_tagged``) loses them."""
    if not enc.tagged:
        text = keep_space(plain(enc.nodes), translation)
        return escape(text) if entities else text
    nodes = matches(translation, enc.nodes)
    if nodes is None:
        nodes = [untagged(translation)]
    return decode_markup(nodes, enc.table, entities=entities)


def untagged(tagged: str) -> str:
    try:
        return plain(parse(tagged))
    except ValueError:
        return tagged
