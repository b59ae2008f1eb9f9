"""The checks an Office file (a ZIP package) passes before a library unpacks it.

The libraries (python-docx, python-pptx, openpyxl) read every part into memory and build an
object for every XML element; openpyxl also makes a cell object for every cell of a merged
range, a hyperlink's range and a comment's range. A small upload can therefore cost
gigabytes and minutes: a million empty cells compress to a few hundred kilobytes, and one
``<mergeCell ref="A1:XFD1048576"/>`` stands for 17 billion cells. So the package is
checked first, in one streaming pass that holds no tree:

- its entry count and declared unpacked size (``zipfile`` stops every entry at its declared
  size and refuses it when its CRC does not match, so a header that lies about ``file_size``
  cannot unpack more than it declares);
- an encrypted entry (the libraries cannot read it);
- every XML part, streamed through expat (a C parser; Python's handler only counts): its
  elements (and the cells its ranges stand for) are counted against
  ``max_package_elements``, and a DTD (``<!DOCTYPE``, where entity bombs and external
  entities live) is refused: Open Packaging Conventions forbid DTDs in a part, so no real
  Office file holds one. A part that is not XML (a picture) is skipped; one that starts
  as XML and then breaks is malformed, as is one that lxml (python-docx's and
  python-pptx's parser) reads but expat cannot (a part in UTF-32 or Shift_JIS: Open
  Packaging Conventions allow only UTF-8 and UTF-16), which would otherwise go uncounted.
  lxml is fed incrementally from the part's first 16 KiB, the bytes expat already read: a
  picture fails both at its first byte and is never unpacked further (it was unpacked
  whole a second time for lxml, once per picture and upload). In an xlsx its content type
  does not decide: openpyxl opens a sheet by its relationship whatever type the package
  declares. python-docx and python-pptx parse a part only when its declared content type
  is one they register, all XML types; a part that ``[Content_Types].xml`` declares of
  another type (``text/html``: Word's ``altChunk`` of imported HTML, with its
  ``<!DOCTYPE html>`` and ``<br>``) stays bytes, and is not judged as XML (it was a 400);
- the stretches of a part without an element start (one start tag, comment or text node):
  those over 64 KiB may take ``MAX_LONG_STRETCHES`` bytes in all. Expat (2.5, the one
  CPython links) parses a token that spans its input chunks again from its start at every
  chunk, and openpyxl feeds it 16 KiB at a time: a 190 MB attribute or comment (a 200 KB
  upload) was hours of one core and the GIL. Parts are fed in 1 MiB chunks and an open
  stretch past the allowance is refused at once, so the check stays linear.

Any other failure of the decompressors on a damaged package (``zlib.error``, ``LZMAError``:
a truncated or corrupted download) is a malformed file, never a 500.
"""

from __future__ import annotations

import codecs
import io
import lzma
import pyexpat
import re
import zipfile
import zlib
from collections.abc import Callable
from typing import IO

import lxml.etree

from serve_app.core.errors import DocumentTooLarge, MalformedDocument
from serve_app.documents.base import DocumentLimits
from serve_app.documents.references import References, extra_reads

# Elements whose ``ref`` range openpyxl fills with one cell object per cell.
_RANGE_ELEMENTS = frozenset({"mergeCell", "hyperlink", "comment"})
_RANGE = re.compile(r"^\$?([A-Za-z]*)\$?([0-9]*):\$?([A-Za-z]*)\$?([0-9]*)$")
_MAX_ROWS, _MAX_COLUMNS = 1_048_576, 16_384  # an Excel sheet's
_ENCRYPTED = 0x1  # general purpose flag bit 0
_CHUNK = 1 << 20  # bytes of a part fed to a parser at once
_HEAD = 16 * 1024  # the first bytes read: all of a picture that is unpacked
_UTF32_BOMS = (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)
_LONG = 64 * 1024  # a stretch without an element start longer than this is a long one
# Bytes in long stretches a package may hold in all (an SVG's embedded picture is one).
MAX_LONG_STRETCHES = 10 * 1024 * 1024
_BROKEN = (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError)
_UNPACKING = (zlib.error, lzma.LZMAError)  # a damaged compressed entry
# Formats whose library reads a part once per reference to it (``references``).
_READ_PER_REFERENCE = frozenset({"xlsx"})
# Formats whose library parses a part as XML only if its declared content type says so.
_PARSED_BY_TYPE = frozenset({"docx", "pptx"})
_CONTENT_TYPES = "[Content_Types].xml"


def check_package(name: str, data: bytes, limits: DocumentLimits) -> None:
    """MalformedDocument (400) or DocumentTooLarge (413) unless the package ``data`` of
    format ``name`` is within ``limits``."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as package:
            entries = package.infolist()
            _check_entries(name, entries, limits)
            budget = _Budget(name, limits.max_package_elements)
            refs = References() if name in _READ_PER_REFERENCE else None
            types = ContentTypes() if name in _PARSED_BY_TYPE else None
            # The content types first: they say which parts the library parses.
            for entry in sorted(entries, key=lambda e: e.filename != _CONTENT_TYPES):
                if entry.file_size == 0:  # zipfile reads no more than it declares
                    continue
                if types is not None and types.kept_as_bytes(entry.filename):
                    continue
                _count_part(package, entry, budget, refs, types)
            if refs is not None:
                _check_rereads(refs, entries, budget, limits)
    except (*_BROKEN, *_UNPACKING) as exc:
        raise MalformedDocument(
            f"The file is not a valid {name} file: it is not a readable ZIP package ({exc})."
        ) from exc
    except NotImplementedError as exc:  # a compression method zipfile lacks
        raise MalformedDocument(f"The file is not a valid {name} file: {exc}.") from exc


def _check_entries(name: str, entries: list[zipfile.ZipInfo], limits: DocumentLimits) -> None:
    unpacked = sum(e.file_size for e in entries)
    if unpacked > limits.max_unpacked_bytes or len(entries) > limits.max_package_entries:
        raise DocumentTooLarge(
            f"The {name} package unpacks to {unpacked} bytes in {len(entries)} entries; "
            f"at most {limits.max_unpacked_bytes} bytes in {limits.max_package_entries} "
            "entries are accepted."
        )
    if any(e.flag_bits & _ENCRYPTED for e in entries):
        raise MalformedDocument(
            f"The {name} file is encrypted (password-protected); remove the password first."
        )


class _Budget:
    """Elements counted so far across the package's parts, and bytes in long stretches,
    against their limits."""

    def __init__(self, name: str, limit: int) -> None:
        self.name = name
        self.limit = limit
        self.used = 0
        self.long = 0

    def spend(self, count: int, part: str) -> None:
        self.used += count
        if self.used > self.limit:
            raise DocumentTooLarge(
                f"The {self.name} file holds more than {self.limit} XML elements (paragraphs, "
                f"runs, cells, ranges; reached in {part[:200]!r}); split it into smaller files."
            )

    def stretch(self, length: int, part: str, *, done: bool = True) -> None:
        """A stretch of ``length`` bytes without an element start; ``done=False`` for one
        still open (checked, not yet counted)."""
        if length <= _LONG:
            return
        if self.long + length > MAX_LONG_STRETCHES:
            raise DocumentTooLarge(
                f"The {self.name} file holds more than {MAX_LONG_STRETCHES} bytes of XML in "
                f"stretches of over {_LONG} bytes without an element (a start tag, comment or "
                f"text node; reached in {part[:200]!r}); Office files hold none so long."
            )
        if done:
            self.long += length


class ContentTypes:
    """The content types ``[Content_Types].xml`` declares: by extension (``Default``) and
    by part name (``Override``, which wins), both matched without case, as python-docx and
    python-pptx match them."""

    def __init__(self) -> None:
        self.defaults: dict[str, str] = {}
        self.overrides: dict[str, str] = {}

    def element(self, tag: str, attrs: dict[str, str]) -> None:
        kind, declared = tag.rsplit(":", 1)[-1], attrs.get("ContentType", "")
        if kind == "Default" and "Extension" in attrs:
            self.defaults[attrs["Extension"].lower()] = declared
        elif kind == "Override" and "PartName" in attrs:
            self.overrides[attrs["PartName"].lower()] = declared

    def kept_as_bytes(self, filename: str) -> bool:
        """Whether the part is declared of a type that is not XML (its library never parses
        it); a part of no declared type is judged as XML, and so are the content types and
        every ``.rels`` part, which the libraries parse by name, whatever they declare."""
        name = "/" + filename.lower()
        if filename == _CONTENT_TYPES or name.endswith(".rels"):
            return False
        declared = self.overrides.get(name)
        if declared is None and "." in name.rsplit("/", 1)[-1]:
            declared = self.defaults.get(name.rsplit(".", 1)[-1])
        if declared is None:
            return False
        return not declared.split(";", 1)[0].strip().lower().endswith("xml")


class _Part:
    """One part streamed through expat: its elements spent from the budget, and the byte
    offset of its last element start (the open stretch ends there)."""

    def __init__(
        self,
        name: str,
        budget: _Budget,
        refs: References | None = None,
        types: ContentTypes | None = None,
    ) -> None:
        self.name = name
        self.budget = budget
        self.refs = refs
        # Filled while ``[Content_Types].xml`` is read.
        self.types = types if name == _CONTENT_TYPES else None
        self.elements = 0
        self.last = 0
        self.fed = 0
        self.parser = pyexpat.ParserCreate()
        self.parser.StartElementHandler = self._start
        self.parser.StartDoctypeDeclHandler = self._doctype

    def _start(self, tag: str, attrs: dict[str, str]) -> None:
        here = self.parser.CurrentByteIndex
        self.budget.stretch(here - self.last, self.name)
        self.last = here
        self.elements += 1
        self.budget.spend(1 + _range_cells(tag, attrs), self.name)
        if self.refs is not None:
            self.refs.element(self.name, tag, attrs)
        if self.types is not None:
            self.types.element(tag, attrs)

    def _doctype(self, *_: object) -> None:
        raise MalformedDocument(
            f"The file is not a valid {self.budget.name} file: part {self.name[:200]!r} "
            "declares a DTD (<!DOCTYPE>), which Office files never hold."
        )

    def feed(self, head: bytes, stream: IO[bytes]) -> None:
        """Parses ``head`` (the part's first bytes), then the rest of ``stream``."""
        self.fed = len(head)
        self.parser.Parse(head, False)
        while chunk := stream.read(_CHUNK):
            self.fed += len(chunk)  # read: what the parse of it may fail on is gone
            self.parser.Parse(chunk, False)
            self.budget.stretch(self.fed - self.last, self.name, done=False)
        self.parser.Parse(b"", True)
        self.budget.stretch(self.fed - self.last, self.name)


def _count_part(
    package: zipfile.ZipFile,
    entry: zipfile.ZipInfo,
    budget: _Budget,
    refs: References | None = None,
    types: ContentTypes | None = None,
) -> None:
    """Counts the part's elements (and the cells its ranges cover) into ``budget``. A part
    expat cannot read from its start (a picture) is given to lxml from the bytes already
    read on, never decompressed a second time."""
    part = _Part(entry.filename, budget, refs, types)
    where = f"The file is not a valid {budget.name} file: part {entry.filename[:200]!r}"
    with package.open(entry) as stream:
        head = stream.read(_HEAD)
        try:
            part.feed(head, stream)
        except (pyexpat.ExpatError, ValueError) as exc:  # ValueError: a multi-byte encoding
            if part.elements:  # XML that breaks on the way
                raise MalformedDocument(f"{where}: {exc}") from exc
            if _lxml_reads(head, stream, part.fed, lambda: package.read(entry)):
                raise MalformedDocument(
                    f"{where} is XML in an encoding other than UTF-8 or UTF-16, which Office "
                    "files never use."
                ) from exc
        # not XML at all (a picture, a printer setting): no library parses it as XML
    if refs is not None:
        refs.elements[entry.filename] = part.elements


def _check_rereads(
    refs: References, entries: list[zipfile.ZipInfo], budget: _Budget, limits: DocumentLimits
) -> None:
    """DocumentTooLarge if the parts read more than once (``references``) take the package's
    elements or unpacked bytes past their limits, read as often as they are."""
    sizes = {e.filename: e.file_size for e in entries}
    extra = extra_reads(refs, sizes)
    if not extra:
        return
    worst = max(extra, key=lambda p: extra[p] * (sizes[p] + refs.elements.get(p, 0)))
    elements = budget.used + sum(n * refs.elements.get(p, 0) for p, n in extra.items())
    unpacked = sum(sizes.values()) + sum(n * sizes[p] for p, n in extra.items())
    if elements > limits.max_package_elements or unpacked > limits.max_unpacked_bytes:
        raise DocumentTooLarge(
            f"The {budget.name} file names part {worst[:200]!r} {extra[worst] + 1} times, and "
            f"it is read each time: {unpacked} bytes and {elements} XML elements in all, "
            f"where at most {limits.max_unpacked_bytes} bytes and "
            f"{limits.max_package_elements} elements are accepted."
        )


class _Found(Exception):
    """An element, found by lxml."""


class _FirstElement:
    """An lxml parser target that stops the parse at the first element (no tree is built)."""

    def start(self, tag: str, attrib: object, nsmap: object = None) -> None:
        raise _Found

    def close(self) -> None:
        return None


def _lxml_reads(head: bytes, rest: IO[bytes], fed: int, whole: Callable[[], bytes]) -> bool:
    """Whether lxml, as python-docx and python-pptx call it (``fromstring`` of the part's
    bytes), finds an element in the part, of which expat read ``fed`` bytes: ``head`` and
    ``rest``, the stream after it. lxml's incremental parser is fed from ``head`` on, up to
    the first element or error (a picture fails at its first byte, so the rest of it is
    never unpacked); what it finds, and a part it cannot judge so (one starting with a
    UTF-32 byte order mark, which it misses; one expat read past ``head`` of), is judged by
    ``fromstring`` of the ``whole`` part, read again."""
    if fed > len(head) or head.startswith(_UTF32_BOMS):
        return _finds_element(lambda parser: lxml.etree.fromstring(whole(), parser))
    return _finds_element(lambda parser: _feed(parser, head, rest)) and _finds_element(
        lambda parser: lxml.etree.fromstring(whole(), parser)
    )


def _feed(parser: lxml.etree.XMLParser, head: bytes, rest: IO[bytes]) -> None:
    parser.feed(head)
    while chunk := rest.read(_CHUNK):
        parser.feed(chunk)
    parser.close()


def _finds_element(parse: Callable[[lxml.etree.XMLParser], object]) -> bool:
    """Whether ``parse`` with a parser that stops at the first element (no tree is built)
    finds one before an error or the end."""
    parser = lxml.etree.XMLParser(target=_FirstElement(), resolve_entities=False)
    try:
        parse(parser)
    except _Found:
        return True
    except lxml.etree.XMLSyntaxError:
        return False
    return False


def _range_cells(tag: str, attrs: dict[str, str]) -> int:
    """The cells of the element's ``ref`` range beyond its first, if openpyxl fills it
    (``A1:C3``; a whole column ``A:C`` or row ``1:3`` spans the sheet's full height or
    width)."""
    if tag.rsplit(":", 1)[-1] not in _RANGE_ELEMENTS:
        return 0
    match = _RANGE.match(attrs.get("ref", "").strip())
    if match is None:
        return 0
    first_col, first_row, last_col, last_row = match.groups()
    rows = _span(first_row, last_row, int, _MAX_ROWS)
    cols = _span(first_col, last_col, _column, _MAX_COLUMNS)
    return rows * cols - 1


def _span(first: str, last: str, number: Callable[[str], int], whole: int) -> int:
    if not first or not last:
        return whole
    if max(len(first), len(last)) > 12:  # beyond any sheet: count it as more than allowed
        return 10**12
    return abs(number(last) - number(first)) + 1


def _column(letters: str) -> int:
    number = 0
    for letter in letters.upper():
        number = number * 26 + ord(letter) - ord("A") + 1
    return number
