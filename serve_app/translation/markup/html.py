"""HTML and XML documents (``format`` ``html`` / ``xml``, DeepL's ``tag_handling``).

Block elements (``p``, ``li``, ``h1``... in HTML; in XML the structure that outline detection
finds, or ``splitting_tags``) end a segment: their tags are copied and their text is
translated on its own. Inline elements become placeholder pairs, void ones (``<br>``,
``<img>``) single placeholders. Not translated, copied as they are: ``translate="no"`` and
``class="notranslate"`` subtrees, ``ignore_tags``, and in HTML ``script``, ``style``,
``code``, ``pre`` and friends; comments and declarations; links whose text is their address
(``is_address``: Mastodon's links to URLs, mentions). A hashtag's name is translated with its
sentence, never on its own (``Text.sentence_only``). Text is shown to the model with
its entities decoded and written back escaped, each character the source spelled as an
entity spelled that way again.
"""

from __future__ import annotations

from collections.abc import Callable

from serve_app.translation.markup import atoms
from serve_app.translation.markup.document import Builder, Document, MarkupOptions, register
from serve_app.translation.markup.htmltree import Element, Node, parse_tree

_BLOCKS = """address article aside blockquote body caption dd details dialog div dl dt fieldset
    figcaption figure footer form h1 h2 h3 h4 h5 h6 head header hgroup hr html legend li main
    nav ol option p section summary table tbody td tfoot th thead title tr ul"""
BLOCK_HTML = frozenset(_BLOCKS.split())
# Copied as they are: code, and content that is not prose.
_UNTOUCHED = "script style code pre kbd samp var textarea svg math template noscript iframe"
UNTOUCHED_HTML = frozenset(_UNTOUCHED.split())
_ALWAYS = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
# Elements nested deeper than this are copied as they are (and the walk stays shallow).
MAX_DEPTH = 100


class _Walker:
    def __init__(self, options: MarkupOptions, xml: bool) -> None:
        self.options, self.xml = options, xml
        self.entities: dict[str, str] = {}
        # The walk never drops what it collected: the pending segment may be watched.
        self.builder = Builder(self._escape, options.budget, watch_pending=True)
        self.holders: set[int] = set()

    def _escape(self, text: str) -> str:
        table = self._table
        return "".join(table.get(c, c) for c in text) if any(c in table for c in text) else text

    def run(self, root: Element) -> Document:
        self._table = dict(_ALWAYS)
        if self.xml and self.options.outline_detection:
            self.holders = _text_holders(root)
        self.children(root, 0)
        # The source's own spellings of characters win: "&#38;" stays "&#38;".
        self._table.update(self.entities)
        return self.builder.document()

    def children(self, el: Element, depth: int) -> None:
        has_text = any(isinstance(c, Node) and _is_text(c) for c in el.children)
        for child in el.children:
            if isinstance(child, Node):
                self.node(child)
            else:
                self.element(child, has_text, depth + 1)

    def node(self, node: Node) -> None:
        b = self.builder
        if node.kind == "other":
            b.tag("void", node.raw)
        elif node.kind == "entity":
            text = node.text
            if text in ("<", ">", "\ufffd") or len(text) != 1:
                # Never part of a placeholder look-alike; and each reference that stands for
                # no character (``&#0;``, ``&#xD800;``, ``&#x110000;``: all read as U+FFFD)
                # keeps its own spelling.
                b.tag("void", node.raw)
            else:
                self.entities.setdefault(text, node.raw)
                b.text(text, node.raw)
        else:
            b.text(node.raw)

    def element(self, el: Element, parent_has_text: bool, depth: int) -> None:
        b = self.builder
        block = self._splits(el, parent_has_text)
        if depth > MAX_DEPTH or self._untouched(el):
            (b.verbatim if block else _void(b))(el.raw())
        elif block:
            b.verbatim(el.start)
            self.children(el, depth)
            b.verbatim(el.end)
        elif el.void or not el.children:
            b.tag("void", el.raw())
        else:
            key = object()
            hashtag = not self.xml and el.name == "a" and is_hashtag(el)
            b.tag("open", el.start, key)
            b.sentence_only += hashtag
            self.children(el, depth)
            b.sentence_only -= hashtag
            b.tag("close", el.end, key)

    def _splits(self, el: Element, parent_has_text: bool) -> bool:
        o = self.options
        if el.name in o.non_splitting_tags:
            return False
        if el.name in o.splitting_tags:
            return True
        if not self.xml:
            return el.name in BLOCK_HTML
        return o.outline_detection and not parent_has_text and id(el) in self.holders

    def _untouched(self, el: Element) -> bool:
        if el.name in self.options.ignore_tags:
            return True
        if not self.xml and el.name in UNTOUCHED_HTML:
            return True
        if (el.attrs.get("translate") or "").strip().lower() == "no":
            return True
        if "notranslate" in (el.attrs.get("class") or "").split():
            return True
        return not self.xml and el.name == "a" and is_address(el)


def _link_text(link: Element, limit: int = 512) -> str:
    """A link's text with every span joined (Mastodon hides ``https://`` and a long URL's
    tail in ``invisible`` spans: together they are the address); only its first ``limit``
    characters or so, enough to judge (a walk bounded for links wrapping a whole page)."""
    parts: list[str] = []
    size = 0
    stack: list[Element | Node] = [link]
    while stack and size < limit:
        n = stack.pop()
        if isinstance(n, Node):
            parts.append(n.text)
            size += len(n.raw)
        else:
            stack.extend(reversed(n.children))
    return "".join(parts).strip()


def is_hashtag(link: Element) -> bool:
    """A hashtag (Mastodon's ``#<span>tag</span>``): one word, starting with ``#``."""
    text = _link_text(link)
    return text.startswith("#") and not any(c.isspace() for c in text)


def is_address(link: Element) -> bool:
    """A link whose text is its address (``atoms.shows_address``, which never takes a
    hashtag): kept as it is, since a translated "hotels.com" is a broken link (Mastodon
    #21859)."""
    return atoms.shows_address(_link_text(link), link.attrs.get("href") or "")


def _void(b: Builder) -> Callable[[str], None]:
    return lambda raw: b.tag("void", raw)


def _is_text(node: Node) -> bool:
    return node.kind != "other" and bool(node.text.strip())


def _text_holders(root: Element) -> set[int]:
    """The ids of the elements with text somewhere inside (children judged first)."""
    holders: set[int] = set()
    for el in reversed(root.elements()):
        if any(id(c) in holders if isinstance(c, Element) else _is_text(c) for c in el.children):
            holders.add(id(el))
    return holders


def parse_markup(text: str, options: MarkupOptions, xml: bool) -> Document:
    return _Walker(options, xml).run(parse_tree(text, xml))


@register("html")
def parse_html(text: str, options: MarkupOptions) -> Document:
    return parse_markup(text, options, xml=False)


@register("xml")
def parse_xml(text: str, options: MarkupOptions) -> Document:
    return parse_markup(text, options, xml=True)
