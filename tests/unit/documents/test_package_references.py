"""Packages that name one part many times. openpyxl reads a part once per reference to it
(a worksheet per ``<sheet>``, a picture per ``<a:blip>``), so the package check counts each
part as often as it is read (``documents/references.py``); python-pptx loads a slide once
however often the slide list names it, and its slides are walked once each. Each test
fails on the code before (minutes and hundreds of megabytes, on small uploads)."""

from __future__ import annotations

import io
import re
import tracemalloc
import zipfile

import pytest
from PIL import Image

from serve_app.api.errors import http_status
from serve_app.core.errors import DocumentTooLarge
from serve_app.documents import FORMATS, DocumentLimits, extract
from serve_app.documents.references import References, extra_reads
from tests.docsamples import SAMPLES
from tests.unit.documents.test_package import within

R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
RELS = '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
PIC = (
    "<xdr:oneCellAnchor><xdr:from><xdr:col>0</xdr:col><xdr:colOff>0</xdr:colOff>"
    "<xdr:row>{i}</xdr:row><xdr:rowOff>0</xdr:rowOff></xdr:from><xdr:ext cx='9' cy='9'/>"
    '<xdr:pic><xdr:nvPicPr><xdr:cNvPr id="{i}" name="P"/><xdr:cNvPicPr/></xdr:nvPicPr>'
    '<xdr:blipFill><a:blip r:embed="rId1"/></xdr:blipFill><xdr:spPr/></xdr:pic>'
    "<xdr:clientData/></xdr:oneCellAnchor>"
)


def rebuilt(name: str, change: dict[str, bytes | None], add: dict[str, bytes]) -> bytes:
    """The sample of format ``name`` with parts changed (None: unchanged) and added."""
    source = zipfile.ZipFile(io.BytesIO(SAMPLES[name]()))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as package:
        for part in source.namelist():
            package.writestr(part, change.get(part) or source.read(part))
        for part, data in add.items():
            package.writestr(part, data)
    return out.getvalue()


def workbook(sheet_names: int = 1, cells: int = 0, pictures: int = 0, side: int = 0) -> bytes:
    """The sample workbook whose sheet list names its sheet ``sheet_names`` times, the sheet
    holding ``cells`` number cells and a drawing showing one bitmap ``pictures`` times."""
    source = zipfile.ZipFile(io.BytesIO(SAMPLES["xlsx"]()))
    book = source.read("xl/workbook.xml").decode()
    entry = re.search(r"<sheet [^>]*/>", book)
    assert entry is not None
    entries = "".join(
        re.sub(r'name="[^"]*" sheetId="\d+"', f'name="S{i}" sheetId="{i + 1}"', entry.group())
        for i in range(sheet_names)
    )
    sheet = source.read("xl/worksheets/sheet1.xml").decode()
    rows = "".join(f'<row r="{i + 1}"><c r="A{i + 1}"><v>1</v></c></row>' for i in range(cells))
    sheet = re.sub(r"<sheetData>.*</sheetData>|<sheetData/>", f"<sheetData>{rows}</sheetData>",
                   sheet, flags=re.S)  # fmt: skip
    change: dict[str, bytes | None] = {"xl/workbook.xml": book.replace(entry.group(), entries)}
    add: dict[str, bytes] = {}
    if pictures:
        sheet = sheet.replace("</worksheet>", f'<drawing xmlns:r="{R}" r:id="rD"/></worksheet>')
        bitmap = io.BytesIO()
        Image.new("RGB", (side, side), (200, 10, 10)).save(bitmap, "BMP")
        drawing = "".join(PIC.format(i=i + 2) for i in range(pictures))
        add = {
            "xl/worksheets/_rels/sheet1.xml.rels": f'{RELS}<Relationship Id="rD" Type="{R}/'
            'drawing" Target="../drawings/drawing1.xml"/></Relationships>',
            "xl/drawings/drawing1.xml": '<xdr:wsDr xmlns:xdr="http://schemas.openxmlformats.org/'
            'drawingml/2006/spreadsheetDrawing" xmlns:a="http://schemas.openxmlformats.org/'
            f'drawingml/2006/main" xmlns:r="{R}">{drawing}</xdr:wsDr>',
            "xl/drawings/_rels/drawing1.xml.rels": f'{RELS}<Relationship Id="rId1" Type="{R}/'
            'image" Target="../media/image1.bmp"/></Relationships>',
            "xl/media/image1.bmp": bitmap.getvalue(),
        }  # type: ignore[dict-item]
    change["xl/worksheets/sheet1.xml"] = sheet.encode()
    change = {k: v.encode() if isinstance(v, str) else v for k, v in change.items()}
    added = {k: v.encode() if isinstance(v, str) else v for k, v in add.items()}
    return rebuilt("xlsx", change, added)


@pytest.mark.parametrize(
    ("shape", "part"),
    [
        ({"sheet_names": 100, "cells": 20_000}, "sheet1.xml"),  # 2 min, 775 MB before
        ({"pictures": 50, "side": 2000}, "image1.bmp"),  # 655 MB before (50 x 12 MB)
        ({"sheet_names": 20, "pictures": 1, "side": 2000}, "image1.bmp"),  # read 20 times
    ],
    ids=["sheet-named-100-times", "bitmap-shown-50-times", "through-a-sheet-named-20-times"],
)
def test_a_part_openpyxl_would_read_again_and_again_is_refused_first(
    shape: dict[str, int], part: str
) -> None:
    data = workbook(**shape)
    assert len(data) < 120_000
    with pytest.raises(DocumentTooLarge, match=f"names part '[^']*{part}'") as info:
        within(10, lambda: extract(FORMATS["xlsx"], data, DocumentLimits()))
    assert http_status(info.value) == 413


def test_a_picture_shown_twice_is_fine() -> None:
    data = workbook(sheet_names=2, pictures=2, side=500)  # read 4 times: 3 MB
    assert extract(FORMATS["xlsx"], data, DocumentLimits()) == []  # numbers only


def test_a_slide_named_a_thousand_times_is_walked_once() -> None:
    """python-pptx loads the slide once, but the paragraphs were walked once per name: 1,000
    names of a slide of 10,000 empty paragraphs (36 KB) took two minutes."""
    source = zipfile.ZipFile(io.BytesIO(SAMPLES["pptx"]()))
    deck = source.read("ppt/presentation.xml").decode()
    entry = re.search(r'<p:sldId id="\d+" (r:id="[^"]+")/>', deck)
    assert entry is not None
    names = "".join(f'<p:sldId id="{300 + i}" {entry.group(1)}/>' for i in range(1_000))
    slide = source.read("ppt/slides/slide1.xml").decode()
    filler = "<p:sp><p:txBody>" + "<a:p/>" * 10_000 + "</p:txBody></p:sp></p:spTree>"
    data = rebuilt(
        "pptx",
        {
            "ppt/presentation.xml": deck.replace(entry.group(), names).encode(),
            "ppt/slides/slide1.xml": slide.replace("</p:spTree>", filler, 1).encode(),
        },
        {},
    )
    expected = [s.text for s in extract(FORMATS["pptx"], SAMPLES["pptx"](), DocumentLimits())]
    segments = within(10, lambda: extract(FORMATS["pptx"], data, DocumentLimits()))
    assert [s.text for s in segments] == expected
    translated = FORMATS["pptx"].rebuild(data, [t.replace("Slide", "Folie") for t in expected])
    again = [s.text for s in extract(FORMATS["pptx"], translated, DocumentLimits())]
    assert again == [t.replace("Slide", "Folie") for t in expected] != expected


def test_relationships_in_a_cycle_are_counted_in_finite_time() -> None:
    refs = References()
    for a, b in (("a.xml", "b.xml"), ("b.xml", "a.xml")):
        refs.element(f"_rels/{a}.rels", "Relationship", {"Id": "r1", "Target": b})
        refs.element(a, "x", {"r:id": "r1"})
    refs.element("_rels/.rels", "Relationship", {"Id": "r1", "Target": "a.xml"})
    assert extra_reads(refs, {"a.xml": 1, "b.xml": 1}) == {}


def shared_string_book(cells: int, length: int) -> bytes:
    """A workbook of ``cells`` cells that all show one shared string of ``length``
    characters (ending in a space, so that ``strip`` copies it)."""
    rows = "".join(
        f'<row r="{i + 1}"><c r="A{i + 1}" t="s"><v>0</v></c></row>' for i in range(cells)
    )
    source = zipfile.ZipFile(io.BytesIO(SAMPLES["xlsx"]()))
    sheet = re.sub(r"<sheetData>.*</sheetData>|<sheetData/>", f"<sheetData>{rows}</sheetData>",
                   source.read("xl/worksheets/sheet1.xml").decode(), flags=re.S)  # fmt: skip
    types = (
        source.read("[Content_Types].xml")
        .decode()
        .replace(
            "</Types>",
            '<Override PartName="/xl/sharedStrings.xml" ContentType="application/'
            'vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"/></Types>',
        )
    )
    rels = (
        source.read("xl/_rels/workbook.xml.rels")
        .decode()
        .replace(
            "</Relationships>",
            f'<Relationship Id="rS" Type="{R}/sharedStrings" Target="sharedStrings.xml"/>'
            "</Relationships>",
        )
    )
    strings = (
        '<sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" count="1" '
        f'uniqueCount="1"><si><t xml:space="preserve">{"word " * (length // 5)}</t></si></sst>'
    )
    return rebuilt(
        "xlsx",
        {
            "xl/worksheets/sheet1.xml": sheet.encode(),
            "[Content_Types].xml": types.encode(),
            "xl/_rels/workbook.xml.rels": rels.encode(),
        },
        {"xl/sharedStrings.xml": strings.encode()},
    )


@pytest.mark.parametrize(
    ("cells", "length", "match"),
    [(2_000, 1_000_000, "Segment 1 holds"), (20_000, 15_000, "more than")],
    ids=["one-long-string", "many-cells-within-the-segment-limit"],
)
def test_a_shared_string_in_many_cells_is_refused_before_it_is_copied(
    cells: int, length: int, match: str
) -> None:
    """openpyxl gives every cell the one string object; stripping it copied it per cell
    before the segments were checked: a 1 MB string in 20,000 cells (a 109 KB upload) took
    19 GB and 50 s (2,000 cells: 2 GB here). Now the cells are checked as they are read."""
    data = shared_string_book(cells, length)
    tracemalloc.start()
    try:
        with pytest.raises(DocumentTooLarge, match=match):
            extract(FORMATS["xlsx"], data, DocumentLimits())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 150 * 1024 * 1024, peak
