"""HTML documents (``lxml``), translated block by block with inline tags kept.

A block whose content is text and inline elements (``<b>``, ``<a href>``, ``<span>``) is one
segment: inline elements travel as numbered tags (``gN``) and come back with their attributes;
elements whose content is not translated (``<code>``, ``<br>``, ``<img>``, comments,
anything marked ``translate="no"`` or ``class="notranslate"``) stand alone (``xN``) and come back
whole. Blocks holding other blocks have their loose text nodes translated one by one.
Scripts, styles and preformatted text are left alone.

This is the documents' own, simple HTML handling; the markup-preserving translation of the
core (``serve_app.translation.markup``) may replace it.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import lxml.etree
import lxml.html

from serve_app.documents import inline
from serve_app.documents.base import (
    DocumentFormat,
    Segment,
    check_count,
    decode_text,
    keep_space,
    reading,
)

_SKIP = {"script", "style", "pre", "textarea", "svg", "math", "template", "head"}
_KEEP = {"code", "kbd", "samp", "var", "br", "img", "wbr", "input", "hr"} | _SKIP
_INLINE = {
    "a", "abbr", "b", "bdi", "bdo", "cite", "dfn", "em", "font", "i", "ins", "del", "label",
    "mark", "q", "s", "small", "span", "strong", "sub", "sup", "time", "u", "big", "tt",
}  # fmt: skip


@dataclass
class _Slot:
    """A place in the tree with text: a block (tagged) or one text node."""

    element: Any
    attr: str  # "block", "text" or "tail"
    nodes: list[inline.Node]
    table: dict[int, Any]


def _name(el: Any) -> str:
    return el.tag.lower() if isinstance(el.tag, str) else ""


def _kept(el: Any) -> bool:
    if not isinstance(el.tag, str):  # comments, processing instructions
        return True
    classes = (el.get("class") or "").split()
    return _name(el) in _KEEP or el.get("translate") == "no" or "notranslate" in classes


def _all_inline(el: Any) -> bool:
    return all(_kept(c) or (_name(c) in _INLINE and _all_inline(c)) for c in el)


def _encode(el: Any, table: dict[int, Any]) -> list[inline.Node]:
    nodes: list[inline.Node] = [el.text] if el.text else []
    for child in el:
        n = len(table) + 1
        twin = copy.deepcopy(child) if _kept(child) else lxml.html.Element(child.tag, child.attrib)
        twin.tail = None
        table[n] = twin
        kids = [] if _kept(child) else _encode(child, table)
        nodes.append(inline.Tag("x" if _kept(child) else "g", n, kids))
        if child.tail:
            nodes.append(child.tail)
    return nodes


def _slots(el: Any) -> Iterator[_Slot]:
    if _kept(el):
        return
    has_text = bool((el.text or "").strip()) or any((c.tail or "").strip() for c in el)
    if has_text and _all_inline(el) and _name(el) not in _INLINE:
        table: dict[int, Any] = {}
        yield _Slot(el, "block", _encode(el, table), table)
        return
    if (el.text or "").strip():
        yield _Slot(el, "text", [el.text], {})
    for child in el:
        yield from _slots(child)
        if (child.tail or "").strip():
            yield _Slot(child, "tail", [child.tail], {})


def _head_slots(root: Any) -> Iterator[_Slot]:
    for el in root.iter("title"):
        if (el.text or "").strip():
            yield _Slot(el, "text", [el.text], {})


class _Tree:
    def __init__(self, data: bytes, fmt: HtmlFormat) -> None:
        text = decode_text(data, "HTML")
        start = text.lstrip()[:500].lower()
        self.whole = start.startswith("<!doctype") or "<html" in start
        with reading(fmt):
            if self.whole:
                self.root = lxml.html.document_fromstring(text)
            else:
                self.root = lxml.html.fragment_fromstring(text, create_parent="div")
        self.slots = [*_head_slots(self.root), *_slots(self.root)]

    def serialize(self) -> bytes:
        if self.whole:
            doctype = self.root.getroottree().docinfo.doctype
            out = lxml.html.tostring(self.root, doctype=doctype or None, encoding="unicode")
            return out.encode("utf-8")
        inner = self.root.text or ""
        inner += "".join(lxml.html.tostring(c, encoding="unicode") for c in self.root)
        return inner.encode("utf-8")


def _segment(slot: _Slot) -> Segment:
    if slot.attr != "block" or not slot.table:
        return Segment(inline.plain(slot.nodes).strip())
    return Segment(inline.render(slot.nodes), tagged=True)


def _put(slot: _Slot, translation: str) -> None:
    source = inline.plain(slot.nodes)
    if slot.attr != "block" or not slot.table:
        setattr(
            slot.element, "tail" if slot.attr == "tail" else "text", keep_space(source, translation)
        )
        return
    nodes = inline.matches(translation, slot.nodes) or [_plain(translation)]
    el = slot.element
    el.text = None
    for child in list(el):
        el.remove(child)
    _emit(el, nodes, slot.table)


def _plain(tagged: str) -> str:
    try:
        return inline.plain(inline.parse(tagged))
    except ValueError:
        return tagged


def _emit(parent: Any, nodes: Sequence[inline.Node], table: dict[int, Any]) -> None:
    last = None
    for node in nodes:
        if isinstance(node, str):
            if last is None:
                parent.text = (parent.text or "") + node
            else:
                last.tail = (last.tail or "") + node
            continue
        last = copy.deepcopy(table[node.n])
        parent.append(last)
        if node.kind == "g":
            _emit(last, node.children, table)


class HtmlFormat(DocumentFormat):
    name = "html"
    extensions = (".html", ".htm", ".xhtml")
    media_type = "text/html"
    parse_errors = (lxml.etree.ParserError, lxml.etree.XMLSyntaxError, ValueError)

    def extract(self, data: bytes) -> list[Segment]:
        return [_segment(s) for s in _Tree(data, self).slots]

    def rebuild(self, data: bytes, translations: Sequence[str]) -> bytes:
        tree = _Tree(data, self)
        check_count(translations, len(tree.slots))
        for slot, translation in zip(tree.slots, translations, strict=True):
            _put(slot, translation)
        return tree.serialize()
