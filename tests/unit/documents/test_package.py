"""Office files (ZIP packages) built to break the libraries that read them: refused by
``documents.package`` before a library unpacks them, or read in time proportional to what
they hold. Each test fails on the code before the check it tests."""

from __future__ import annotations

import io
import struct
import threading
import zipfile
from collections.abc import Callable
from typing import TypeVar

import pytest

from serve_app.api.errors import http_status
from serve_app.core.errors import DocumentTooLarge, MalformedDocument
from serve_app.documents import FORMATS, DocumentLimits, extract
from serve_app.documents.package import check_package
from tests.docsamples import SAMPLES

MAIN = {"docx": "word/document.xml", "pptx": "ppt/slides/slide1.xml"}
SHEET = "xl/worksheets/sheet1.xml"
SHEET_XML = (
    '<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">'
    "<sheetData>{rows}</sheetData>{extra}</worksheet>"
)
T = TypeVar("T")
HI = '<c r="{ref}" t="inlineStr"><is><t>{text}</t></is></c>'


def replaced(data: bytes, parts: dict[str, bytes]) -> bytes:
    """An Office package with some parts replaced."""
    source = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as package:
        for name in source.namelist():
            package.writestr(name, parts.get(name, source.read(name)))
    return out.getvalue()


def sheet(rows: str, extra: str = "") -> bytes:
    xml = SHEET_XML.format(rows=rows, extra=extra).encode()
    return replaced(SAMPLES["xlsx"](), {SHEET: xml})


def within(seconds: float, work: Callable[[], T]) -> T:
    """``work()``'s result, failing if it runs longer than ``seconds`` (the thread is left
    behind: the old code never finished)."""
    box: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            box.append(work())
        except BaseException as exc:  # handed to the test
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds}s"
    if errors:
        raise errors[0]
    return box[0]


def test_a_sparse_sheet_is_read_in_time_proportional_to_its_cells() -> None:
    """A1 and XFD1048576: ``iter_rows`` made a cell for each of 17 billion coordinates."""
    far = HI.format(ref="XFD1048576", text="there")
    rows = f'<row r="1">{HI.format(ref="A1", text="hi")}</row><row r="1048576">{far}</row>'
    segments = within(30, lambda: extract(FORMATS["xlsx"], sheet(rows), DocumentLimits()))
    assert [s.text for s in segments] == ["hi", "there"]


@pytest.mark.parametrize("ref", ["A1:XFD1048576", "A:XFD", "1:1048576"])
@pytest.mark.parametrize("element", ["mergeCells><mergeCell", "hyperlinks><hyperlink"])
def test_a_range_that_openpyxl_would_fill_is_refused_first(element: str, ref: str) -> None:
    """openpyxl makes a cell object for every cell of a merged or hyperlinked range."""
    outer, inner = element.split("><")
    extra = f'<{outer}><{inner} ref="{ref}"/></{outer}>'
    data = sheet(f'<row r="1">{HI.format(ref="A1", text="hi")}</row>', extra)
    with pytest.raises(DocumentTooLarge, match="XML elements") as info:
        within(30, lambda: extract(FORMATS["xlsx"], data, DocumentLimits()))
    assert http_status(info.value) == 413


def test_a_small_merged_range_is_fine() -> None:
    extra = '<mergeCells><mergeCell ref="A1:D30"/></mergeCells>'
    data = sheet(f'<row r="1">{HI.format(ref="A1", text="hi")}</row>', extra)
    assert [s.text for s in extract(FORMATS["xlsx"], data, DocumentLimits())] == ["hi"]


@pytest.mark.parametrize("name", ["docx", "pptx", "xlsx"])
def test_elements_are_counted_before_a_library_builds_them(name: str) -> None:
    """200,000 empty elements compress to a few kilobytes; the limit refuses them unread."""
    if name == "xlsx":
        data = sheet('<row r="1">' + '<c r="A1"/>' * 200_000 + "</row>")
    else:
        source = zipfile.ZipFile(io.BytesIO(SAMPLES[name]())).read(MAIN[name])
        filler = b"<a:endParaRPr/>" if name == "pptx" else b"<w:bookmarkEnd w:id='0'/>"
        padded = source.replace(b"</w:body>", filler * 200_000 + b"</w:body>", 1)
        padded = padded.replace(b"</p:spTree>", filler * 200_000 + b"</p:spTree>", 1)
        data = replaced(SAMPLES[name](), {MAIN[name]: padded})
    assert len(data) < 100_000
    limits = DocumentLimits(max_package_elements=100_000)
    with pytest.raises(DocumentTooLarge, match="more than 100000 XML elements"):
        check_package(name, data, limits)
    assert extract(FORMATS[name], SAMPLES[name](), limits)  # a real file is far below


BOMB = (
    b'<!DOCTYPE r [<!ENTITY a "ha"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">'
    b'<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;"><!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;">]>'
)
XXE = b'<!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]>'


@pytest.mark.parametrize("name", ["docx", "pptx", "xlsx"])
@pytest.mark.parametrize("dtd", [BOMB, XXE], ids=["entity-bomb", "external-entity"])
def test_a_dtd_in_an_office_part_is_refused(name: str, dtd: bytes) -> None:
    """Open Packaging Conventions forbid DTDs in parts: a declared one is refused whatever
    the parsing library would make of it."""
    part = MAIN.get(name, SHEET)
    xml = zipfile.ZipFile(io.BytesIO(SAMPLES[name]())).read(part)
    body = xml.split(b"?>", 1)[-1] if xml.startswith(b"<?xml") else xml
    data = replaced(SAMPLES[name](), {part: b'<?xml version="1.0"?>\n' + dtd + body})
    with pytest.raises(MalformedDocument, match="DTD") as info:
        extract(FORMATS[name], data, DocumentLimits())
    assert http_status(info.value) == 400


def _set_flag(data: bytes, bit: int) -> bytes:
    out = bytearray(data)
    for signature, offset in ((b"PK\x01\x02", 8), (b"PK\x03\x04", 6)):
        at = out.find(signature)
        while at >= 0:
            struct.pack_into(
                "<H", out, at + offset, struct.unpack_from("<H", out, at + offset)[0] | bit
            )
            at = out.find(signature, at + 4)
    return bytes(out)


@pytest.mark.parametrize("name", ["docx", "pptx", "xlsx"])
def test_an_encrypted_package_says_so(name: str) -> None:
    with pytest.raises(MalformedDocument, match="encrypted"):
        extract(FORMATS[name], _set_flag(SAMPLES[name](), 1), DocumentLimits())


def test_a_header_that_lies_about_its_size_cannot_unpack_more() -> None:
    """A part declared as 1,000 bytes that inflates to 5 MB: zipfile stops at the declared
    size and the CRC refuses it; the limit on declared sizes bounds what is unpacked."""
    xml = zipfile.ZipFile(io.BytesIO(SAMPLES["docx"]())).read(MAIN["docx"])
    padded = xml.replace(b"</w:body>", b"<!--" + b" " * 5_000_000 + b"--></w:body>", 1)
    data = bytearray(replaced(SAMPLES["docx"](), {MAIN["docx"]: padded}))
    name = MAIN["docx"].encode()
    for signature, size_at, name_len_at, name_at in (
        (b"PK\x01\x02", 24, 28, 46),
        (b"PK\x03\x04", 22, 26, 30),
    ):
        at = data.find(signature)
        while at >= 0:
            length = struct.unpack_from("<H", data, at + name_len_at)[0]
            if bytes(data[at + name_at : at + name_at + length]) == name:
                struct.pack_into("<I", data, at + size_at, 1000)
            at = data.find(signature, at + 4)
    with pytest.raises(MalformedDocument, match="CRC"):
        extract(FORMATS["docx"], bytes(data), DocumentLimits(max_unpacked_bytes=1_000_000))
