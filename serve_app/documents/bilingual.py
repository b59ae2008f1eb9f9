"""Translation exchange files: XLIFF (``translate-toolkit``) and gettext PO (``polib``).

Each unit's source is a segment and its translation goes into the unit's target, so the file
goes back to the translation tool it came from. XLIFF's inline elements (``<g>``, ``<x/>``,
``<ph>``...) travel as numbered tags and come back with their ids; units marked
``translate="no"`` are left alone. In PO files, the header, obsolete entries and plural forms'
singular and plural are handled (each plural form gets the plural's translation); a
translation already present is replaced, and machine-translated entries are marked fuzzy so
that a reviewer sees them.

An XLIFF unit whose source holds an entity reference other than XML's own (``&name;``,
declared in the file's DTD or in an external one, never expanded: the parser resolves no
entity) is refused at upload: translate-toolkit read it, but could not write the unit's
target (lxml's entity nodes have no writable text), so the job failed after translating.
A comment or processing instruction in a unit's source is dropped, the text around it kept
(``_drop_comments``).

polib appends each comment line and each continued string line to its entry's field with
``+=`` on an attribute, a copy of the whole field per line: an entry of n such lines costs
n² / 2 line lengths (a 5 MB PO file of one million ``#. x`` lines held a reading thread for
33 s, and its rebuild as long again). Such lines are counted before polib reads the file
(``check_entry_lines``, linear): an entry of more than ``MAX_PO_ENTRY_LINES`` is a 413, so
reading a file costs at most that many times its size in copies (0.4 s at 10 MB).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from typing import Any

import lxml.etree
import polib
from translate.storage import xliff
from translate.storage.placeables import StringElem
from translate.storage.placeables import xliff as placeables

from serve_app.core.errors import DocumentTooLarge, MalformedDocument
from serve_app.documents import inline
from serve_app.documents.base import (
    CONTEXT_CHARS,
    DocumentFormat,
    Segment,
    check_count,
    decode_text,
    keep_space,
    reading,
    with_neighbours,
)

_PAIRED = (placeables.G,)
_TAG_CLASSES = (
    placeables.G, placeables.X, placeables.Bx, placeables.Ex, placeables.Bpt,
    placeables.Ept, placeables.It, placeables.Ph, placeables.Sub, placeables.UnknownXML,
)  # fmt: skip


def _encode(elem: Any, table: dict[int, Any]) -> list[inline.Node]:
    if isinstance(elem, str):
        return [elem] if elem else []
    if isinstance(elem, _TAG_CLASSES):
        n = len(table) + 1
        table[n] = elem
        if isinstance(elem, _PAIRED):
            return [inline.Tag("g", n, [x for sub in elem.sub for x in _encode(sub, table)])]
        return [inline.Tag("x", n)]
    return [x for sub in elem.sub for x in _encode(sub, table)]


def _decode(nodes: Sequence[inline.Node], table: dict[int, Any]) -> list[Any]:
    out: list[Any] = []
    for node in nodes:
        if isinstance(node, str):
            out.append(node)
            continue
        twin = copy.copy(table[node.n])
        if node.kind == "g":
            twin.sub = _decode(node.children, table) or [""]
        out.append(twin)
    return out


class _Xliff:
    def __init__(self, data: bytes, fmt: XliffFormat) -> None:
        decode_text(data, "XLIFF")
        with reading(fmt):
            self.store = xliff.xlifffile.parsestring(data)
        if not self.store.units and b"trans-unit" not in data:
            raise_malformed("no <trans-unit> found (XLIFF 1.2 is supported)")
        self.units = []
        self.encoded = []
        for unit in self.store.units:
            if unit.isheader() or not unit.istranslatable():
                continue
            _check_entities(unit)
            _drop_comments(unit.source_dom)
            if not unit.source.strip():
                continue
            table: dict[int, Any] = {}
            nodes = [x for elem in unit.rich_source for x in _encode(elem, table)]
            self.units.append(unit)
            self.encoded.append((nodes, table))

    def segments(self) -> list[Segment]:
        plains = [inline.plain(nodes) for nodes, _ in self.encoded]
        return [
            Segment(inline.render(nodes) if table else plain.strip(), ctx, tagged=bool(table))
            for (nodes, table), plain, ctx in zip(
                self.encoded, plains, with_neighbours(plains), strict=True
            )
        ]

    def put(self, index: int, translation: str) -> None:
        unit, (nodes, table) = self.units[index], self.encoded[index]
        if not table:
            unit.target = keep_space(inline.plain(nodes), translation)
            return
        found = inline.matches(translation, nodes) or [inline.untagged(translation)]
        unit.rich_target = [StringElem(_decode(found, table))]


def _check_entities(unit: xliff.xliffunit) -> None:
    """MalformedDocument if the unit's source holds an entity reference (see the module's
    docstring)."""
    source = unit.source_dom
    for entity in [] if source is None else source.iter(lxml.etree.Entity):
        raise_malformed(
            f"unit '{unit.xmlelement.get('id')}' holds the entity reference {entity}, which is not "
            "expanded; write the characters it stands for instead"
        )


def _drop_comments(source: Any) -> None:
    """Removes the comments and processing instructions of a unit's source, keeping the
    text after each: translate-toolkit skipped a comment together with that text (``a
    <!-- c --> b`` was read, translated and written back as ``a``) and failed on a
    processing instruction (TypeError). The rebuilt file's source holds neither."""
    if source is None:
        return
    for node in list(source.iter(lxml.etree.Comment, lxml.etree.ProcessingInstruction)):
        parent, before = node.getparent(), node.getprevious()
        if parent is None:
            continue
        if before is not None:
            before.tail = (before.tail or "") + (node.tail or "")
        else:
            parent.text = (parent.text or "") + (node.tail or "")
        parent.remove(node)


def raise_malformed(why: str) -> None:
    raise MalformedDocument(f"The file is not a valid xliff file: {why}.")


class XliffFormat(DocumentFormat):
    name = "xliff"
    extensions = (".xliff", ".xlf")
    media_type = "application/x-xliff+xml"
    xml_text = True
    parse_errors = (lxml.etree.XMLSyntaxError, ValueError, AttributeError, TypeError)

    def extract(self, data: bytes) -> list[Segment]:
        return _Xliff(data, self).segments()

    def rebuild(self, data: bytes, translations: Sequence[str]) -> bytes:
        doc = _Xliff(data, self)
        check_count(translations, len(doc.units))
        for index, translation in enumerate(translations):
            doc.put(index, translation)
        return bytes(doc.store)


# printf-style (%s, %(name)s, %1$d) and brace (``{name}``, ``{0:>3}``) placeholders: kept as
# stand-alone tags, so they come back exactly (msgfmt --check compares them). Linear: a
# width starts with 1-9 or "*" (a leading "0" is the zero flag; the flags and the width both
# taking zeros tried every split of a run of them), and a "%(" name ends within 200
# characters (each "%(" never closed scanned to the end of the file).
_PLACEHOLDER = re.compile(
    r"%(?:\([^)]{0,200}\)|[0-9]+\$)?[-+ #0]*(?:[1-9*][0-9*]*)?(?:\.[0-9*]+)?[hlLqjzt]*"
    r"[diouxXeEfFgGcrsa%]"
    r"|\{[A-Za-z0-9_.]*(?:![rsa])?(?::[^{}]*)?\}"
)


def _encode_po(text: str) -> inline.Encoded:
    return inline.encode_markup(text, entities=False, pattern=_PLACEHOLDER)


# Lines polib appends to a field (``"..."`` continuations, ``#``, ``##``, ``#.`` and ``#|``
# comments, obsolete ``#~`` ones too), and the ``msgid`` line that starts an entry (group 1).
# ``#:`` references and ``#,`` flags are kept in lists, and blank lines are skipped.
_FIELD_LINE = re.compile(r'^[ \t]*(?:#~[ \t]*)?(?:(msgid[ \t])|"|#(?:[ \t.|#]|$))', re.MULTILINE)
MAX_PO_ENTRY_LINES = 2_000  # comment and continuation lines from one msgid to the next


def check_entry_lines(text: str, limit: int = MAX_PO_ENTRY_LINES) -> None:
    """DocumentTooLarge if an entry of the PO ``text`` (what lies between two ``msgid`` lines)
    holds more than ``limit`` comment or continued-string lines: polib's cost for an entry
    grows with the square of those (see the module's docstring)."""
    entry, lines = 0, 0
    for match in _FIELD_LINE.finditer(text):
        if match.group(1):
            entry, lines = entry + 1, 0
            continue
        lines += 1
        if lines > limit:
            raise DocumentTooLarge(
                f"Entry {entry + 1} of the PO file holds more than {limit} comment or continued "
                f"string lines; at most {limit} are read in one entry. Shorten its comments "
                "and upload the file again."
            )


def _comment(entry: polib.POEntry) -> str:
    """The entry's comments, as much of them as a segment's context holds."""
    return entry.comment[:CONTEXT_CHARS]


def _entries(data: bytes, fmt: PoFormat) -> tuple[polib.POFile, list[tuple[polib.POEntry, str]]]:
    text = decode_text(data, "PO")
    check_entry_lines(text)
    with reading(fmt):
        # polib reads a file if given a string that names one: a leading newline keeps an
        # upload saying "/etc/passwd" content, never a path.
        po = polib.pofile("\n" + text, encoding="utf-8")
    texts = []
    for entry in po:
        if entry.obsolete or not entry.msgid.strip():
            continue
        texts.append((entry, "msgid"))
        if entry.msgid_plural:
            texts.append((entry, "msgid_plural"))
    return po, texts


class PoFormat(DocumentFormat):
    name = "po"
    extensions = (".po", ".pot")
    media_type = "text/x-gettext-translation"
    parse_errors = (OSError, ValueError, IndexError)

    def extract(self, data: bytes) -> list[Segment]:
        _, texts = _entries(data, self)
        sources = [getattr(entry, field) for entry, field in texts]
        contexts = [
            "\n".join(x for x in (entry.msgctxt, _comment(entry), ctx) if x)
            for (entry, _), ctx in zip(texts, with_neighbours(sources), strict=True)
        ]
        return [
            inline.encoded_segment(_encode_po(s), c) for s, c in zip(sources, contexts, strict=True)
        ]

    def rebuild(self, data: bytes, translations: Sequence[str]) -> bytes:
        po, texts = _entries(data, self)
        check_count(translations, len(texts))
        for (entry, field), translation in zip(texts, translations, strict=True):
            text = inline.restore(_encode_po(getattr(entry, field)), translation, entities=False)
            _put_po(entry, field, text)
        return str(po).encode("utf-8")


def _put_po(entry: polib.POEntry, field: str, text: str) -> None:
    if "fuzzy" not in entry.flags:
        entry.flags.append("fuzzy")
    if field == "msgid" and not entry.msgid_plural:
        entry.msgstr = text
    elif field == "msgid":
        entry.msgstr_plural = {**entry.msgstr_plural, 0: text}
    else:
        forms = max(2, len(entry.msgstr_plural))
        entry.msgstr_plural = {0: entry.msgstr_plural.get(0, text)} | {
            i: text for i in range(1, forms)
        }
