"""Excel workbooks (``.xlsx``, ``openpyxl``).

Only cells holding text are translated, each cell a segment with the cells before and after
it as context. Numbers, dates, booleans and formulas (with the references in them) are kept
as they are, and so are sheet names (formulas refer to them), styles, number formats, merged
cells and column widths. openpyxl does not carry charts and pictures over; a workbook holding
them loses them.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Sequence
from typing import Any

import lxml.etree
import openpyxl
from openpyxl.utils.exceptions import InvalidFileException

from serve_app.documents.base import (
    DocumentFormat,
    DocumentLimits,
    Segment,
    check_chars,
    check_count,
    check_segment_chars,
    keep_space,
    reading,
    with_neighbours,
)


class _Workbook:
    def __init__(self, data: bytes, fmt: XlsxFormat) -> None:
        with reading(fmt):
            self.book = openpyxl.load_workbook(io.BytesIO(data))
        self.cells = [
            cell for sheet in self.book.worksheets for cell in _cells(sheet) if _text_cell(cell)
        ]

    def save(self) -> bytes:
        out = io.BytesIO()
        self.book.save(out)
        return out.getvalue()


def _cells(sheet: Any) -> list[Any]:
    """The sheet's cells by row, then column: only those the file holds. (``iter_rows``
    makes a cell for every coordinate of the used rectangle: a sheet holding A1 and
    XFD1048576 would be 17 billion of them. openpyxl's own writer reads ``_cells`` too.)"""
    return [cell for _, cell in sorted(sheet._cells.items())]


def _text_cell(cell: Any) -> bool:
    return cell.data_type == "s" and isinstance(cell.value, str) and bool(cell.value.strip())


class XlsxFormat(DocumentFormat):
    name = "xlsx"
    extensions = (".xlsx",)
    media_type = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
    parse_errors = (
        zipfile.BadZipFile,
        InvalidFileException,
        KeyError,
        ValueError,
        TypeError,
        lxml.etree.XMLSyntaxError,
    )
    zipped = True
    xml_text = True

    def extract(self, data: bytes) -> list[Segment]:
        return self.extract_within(data, None)

    def extract_within(self, data: bytes, limits: DocumentLimits | None) -> list[Segment]:
        """The text cells' segments; with ``limits``, a cell or the text so far over them is
        refused as it is read. Cells may share one string (``t="s"``: the shared string
        table): a 1 MB string in 20,000 cells (a 109 KB upload) was copied for each cell
        by ``strip`` before the segments were checked, 19 GB and 50 s."""
        texts: list[str] = []
        chars = 0
        for cell in _Workbook(data, self).cells:
            text = str(cell.value).strip()
            if limits is not None:
                check_segment_chars(len(texts), text, limits)
                chars += len(text)
                check_chars(chars, limits, more=True)
            texts.append(text)
        return [Segment(t, c) for t, c in zip(texts, with_neighbours(texts), strict=True)]

    def rebuild(self, data: bytes, translations: Sequence[str]) -> bytes:
        book = _Workbook(data, self)
        check_count(translations, len(book.cells))
        for cell, translation in zip(book.cells, translations, strict=True):
            cell.value = keep_space(str(cell.value), translation)
            cell.data_type = "s"  # a translation starting with "=" is text, not a formula
        return book.save()
