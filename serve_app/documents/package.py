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
  as XML and then breaks is malformed.
"""

from __future__ import annotations

import io
import pyexpat
import re
import zipfile
from collections.abc import Callable
from typing import IO

from serve_app.core.errors import DocumentTooLarge, MalformedDocument
from serve_app.documents.base import DocumentLimits

# Elements whose ``ref`` range openpyxl fills with one cell object per cell.
_RANGE_ELEMENTS = frozenset({"mergeCell", "hyperlink", "comment"})
_RANGE = re.compile(r"^\$?([A-Za-z]*)\$?([0-9]*):\$?([A-Za-z]*)\$?([0-9]*)$")
_MAX_ROWS, _MAX_COLUMNS = 1_048_576, 16_384  # an Excel sheet's
_ENCRYPTED = 0x1  # general purpose flag bit 0


def check_package(name: str, data: bytes, limits: DocumentLimits) -> None:
    """MalformedDocument (400) or DocumentTooLarge (413) unless the package ``data`` of
    format ``name`` is within ``limits``."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as package:
            entries = package.infolist()
            _check_entries(name, entries, limits)
            budget = _Budget(name, limits.max_package_elements)
            for entry in entries:
                if entry.file_size == 0:  # zipfile reads no more than it declares
                    continue
                with package.open(entry) as stream:
                    _count_part(stream, entry.filename, budget)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError) as exc:
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
    """Elements counted so far across the package's parts, against their limit."""

    def __init__(self, name: str, limit: int) -> None:
        self.name = name
        self.limit = limit
        self.used = 0

    def spend(self, count: int, part: str) -> None:
        self.used += count
        if self.used > self.limit:
            raise DocumentTooLarge(
                f"The {self.name} file holds more than {self.limit} XML elements (paragraphs, "
                f"runs, cells, ranges; reached in {part[:200]!r}); split it into smaller files."
            )


def _count_part(stream: IO[bytes], part: str, budget: _Budget) -> None:
    """Counts the part's elements (and the cells its ranges cover) into ``budget``."""
    parser = pyexpat.ParserCreate()
    seen = budget.used

    def start(tag: str, attrs: dict[str, str]) -> None:
        budget.spend(1 + _range_cells(tag, attrs), part)

    def doctype(*_: object) -> None:
        raise MalformedDocument(
            f"The file is not a valid {budget.name} file: part {part[:200]!r} declares a "
            "DTD (<!DOCTYPE>), which Office files never hold."
        )

    parser.StartElementHandler = start
    parser.StartDoctypeDeclHandler = doctype
    try:
        parser.ParseFile(stream)
    except pyexpat.ExpatError as exc:
        if budget.used > seen:  # XML that breaks on the way
            raise MalformedDocument(
                f"The file is not a valid {budget.name} file: part {part[:200]!r}: {exc}"
            ) from exc
        # not XML at all (a picture, a printer setting): no library parses it as XML


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
