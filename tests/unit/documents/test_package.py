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

import lxml.etree
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from serve_app.api.errors import http_status
from serve_app.core.errors import DocumentTooLarge, MalformedDocument
from serve_app.documents import FORMATS, DocumentLimits, extract
from serve_app.documents.package import _FirstElement, _Found, _lxml_reads, check_package
from tests.docsamples import SAMPLES

MAIN = {"docx": "word/document.xml", "pptx": "ppt/slides/slide1.xml"}
SHEET = "xl/worksheets/sheet1.xml"
SHEET_XML = (
    '<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">'
    "<sheetData>{rows}</sheetData>{extra}</worksheet>"
)
T = TypeVar("T")
HI = '<c r="{ref}" t="inlineStr"><is><t>{text}</t></is></c>'
# Bytes of XML, byte order marks and pictures' signatures, for parts built at random.
_BYTES = [
    *(bytes([b]) for b in b"<>/?!-ax= \n\x00\xff\xfe\xef\xbb\xbf\x89"),
    *("<a/>".encode(e) for e in ("utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be")),
    b"<?xml version='1.0' encoding='utf-32'?>",
    b"\x89PNG\r\n\x1a\n",
]


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


def damaged(data: bytes, part: str) -> bytes:
    """The package with bytes of ``part``'s deflated data flipped (a corrupted download):
    the ZIP directory is intact, the compressed stream is not."""
    out = bytearray(data)
    info = zipfile.ZipFile(io.BytesIO(data)).getinfo(part)
    name_len, extra_len = struct.unpack_from("<HH", out, info.header_offset + 26)
    start = info.header_offset + 30 + name_len + extra_len
    for at in range(start + 2, start + min(info.compress_size, 60)):
        out[at] ^= 0x5A
    return bytes(out)


@pytest.mark.parametrize("name", ["docx", "pptx", "xlsx"])
def test_a_damaged_compressed_part_is_a_malformed_file(name: str) -> None:
    """zlib's error on a broken deflate stream escaped the package check: a 500."""
    data = damaged(SAMPLES[name](), MAIN.get(name, SHEET))
    with pytest.raises(MalformedDocument, match="not a readable ZIP package") as info:
        extract(FORMATS[name], data, DocumentLimits())
    assert http_status(info.value) == 400


@pytest.mark.parametrize("token", ["attribute", "comment", "tag name"])
@pytest.mark.parametrize("name", ["docx", "xlsx"])
def test_a_token_of_megabytes_is_refused_in_linear_time(name: str, token: str) -> None:
    """One 30 MB token in a part (a 30 KB upload): expat parsed it again from its start at
    every 2 KiB the check fed it (about 5 minutes here; hours at the unpacked limit), and
    openpyxl feeds it 16 KiB at a time."""
    fill = "x" * 30_000_000
    element = {
        "attribute": f'<x a="{fill}"/>',
        "comment": f"<!--{fill}-->",
        "tag name": f"<x{fill}/>",
    }[token]
    if name == "xlsx":
        data = sheet(f'<row r="1">{HI.format(ref="A1", text="hi")}</row>', element)
    else:
        xml = zipfile.ZipFile(io.BytesIO(SAMPLES[name]())).read(MAIN[name])
        padded = xml.replace(b"</w:body>", element.encode() + b"</w:body>", 1)
        data = replaced(SAMPLES[name](), {MAIN[name]: padded})
    assert len(data) < 100_000
    with pytest.raises(DocumentTooLarge, match="stretches") as info:
        within(10, lambda: extract(FORMATS[name], data, DocumentLimits()))
    assert http_status(info.value) == 413


def test_a_long_stretch_within_the_allowance_is_read() -> None:
    """A picture embedded in a part as a 2 MB data URI (an SVG's) is no attack."""
    xml = zipfile.ZipFile(io.BytesIO(SAMPLES["docx"]())).read(MAIN["docx"])
    padded = xml.replace(b"</w:body>", b'<x a="' + b"A" * 2_000_000 + b'"/></w:body>', 1)
    data = replaced(SAMPLES["docx"](), {MAIN["docx"]: padded})
    check_package("docx", data, DocumentLimits())


@pytest.mark.parametrize("encoding", ["utf-32", "shift_jis"])
@pytest.mark.parametrize("name", ["docx", "pptx"])
def test_a_part_expat_cannot_read_but_lxml_can_is_refused(name: str, encoding: str) -> None:
    """A main part in UTF-32 failed expat at its first byte and was skipped as a picture,
    while python-docx's lxml read it: 200,000 elements (2 million: 46 s and 850 MB before
    the check saw one) went uncounted. Office parts are UTF-8 or UTF-16 (OPC)."""
    xml = zipfile.ZipFile(io.BytesIO(SAMPLES[name]())).read(MAIN[name])
    body = xml.split(b"?>", 1)[-1] if xml.startswith(b"<?xml") else xml
    filler = b"<a:endParaRPr/>" if name == "pptx" else b"<w:bookmarkEnd w:id='0'/>"
    body = body.replace(b"</w:body>", filler * 200_000 + b"</w:body>", 1)
    body = body.replace(b"</p:spTree>", filler * 200_000 + b"</p:spTree>", 1)
    declared = f'<?xml version="1.0" encoding="{encoding}"?>'.encode() + body
    part = declared.decode().encode(encoding)
    data = replaced(SAMPLES[name](), {MAIN[name]: part})
    limits = DocumentLimits(max_package_elements=100_000)
    with pytest.raises(MalformedDocument, match="UTF-8 or UTF-16") as info:
        extract(FORMATS[name], data, limits)
    assert http_status(info.value) == 400


@pytest.mark.parametrize("name", ["docx", "pptx", "xlsx"])
def test_a_part_in_utf16_is_still_read(name: str) -> None:
    part = MAIN.get(name, SHEET)
    xml = zipfile.ZipFile(io.BytesIO(SAMPLES[name]())).read(part)
    body = xml.split(b"?>", 1)[-1] if xml.startswith(b"<?xml") else xml
    utf16 = ('<?xml version="1.0" encoding="UTF-16"?>' + body.decode()).encode("utf-16")
    data = replaced(SAMPLES[name](), {part: utf16})
    assert extract(FORMATS[name], data, DocumentLimits())


def _with_picture(picture: bytes, name: str = "word/media/image1.bmp") -> bytes:
    source = zipfile.ZipFile(io.BytesIO(SAMPLES["docx"]()))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as package:
        for part in source.namelist():
            package.writestr(part, source.read(part))
        package.writestr(name, picture)
    return out.getvalue()


def test_a_picture_is_unpacked_once_and_only_its_first_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A picture fails expat at its first byte; it was then unpacked whole a second time
    (``package.read``) for lxml to fail at the same byte: a docx of four 45 MB bitmaps
    (740 KB uploaded) unpacked 185 MB in 380 ms, now 0.9 MB in 31 ms."""
    picture = b"BM" + bytes(range(256)) * 20_000  # 5 MB, deflated to a few KB
    data = _with_picture(picture)
    unpacked: dict[str, int] = {}
    read = zipfile.ZipExtFile.read

    def counted(self: zipfile.ZipExtFile, n: int = -1) -> bytes:
        out = read(self, n)
        unpacked[self.name] = unpacked.get(self.name, 0) + len(out)
        return out

    monkeypatch.setattr(zipfile.ZipExtFile, "read", counted)
    check_package("docx", data, DocumentLimits())
    assert unpacked["word/media/image1.bmp"] <= 64 * 1024
    assert extract(FORMATS["docx"], data, DocumentLimits())


def test_a_damaged_picture_is_still_a_malformed_file() -> None:
    """The check no longer unpacks a picture whole (its CRC unchecked there): the library
    that reads the package refuses it, a 400 all the same."""
    data = damaged(_with_picture(b"BM" + bytes(range(256)) * 4_000), "word/media/image1.bmp")
    with pytest.raises(MalformedDocument) as info:
        extract(FORMATS["docx"], data, DocumentLimits())
    assert http_status(info.value) == 400


@pytest.mark.parametrize("prolog", [0, 100_000], ids=["at-once", "past-the-first-bytes"])
@pytest.mark.parametrize("encoding", ["utf-32", "utf-32-be", "utf-32-le"])
def test_xml_in_another_encoding_is_found_wherever_its_first_element_is(
    encoding: str, prolog: int
) -> None:
    """lxml is fed from the bytes expat read: its incremental parser misses UTF-32 after a
    byte order mark (``utf-32``), which ``fromstring`` of the whole part reads."""
    body = "<!--" + " " * prolog + "-->" + "<w:document xmlns:w='w'>" + "<w:p/>" * 5_000
    part = (body + "</w:document>").encode(encoding)
    data = replaced(SAMPLES["docx"](), {MAIN["docx"]: part})
    with pytest.raises(MalformedDocument, match="UTF-8 or UTF-16"):
        check_package("docx", data, DocumentLimits())


@settings(max_examples=3_000, deadline=None)
@given(st.lists(st.sampled_from(_BYTES), min_size=1, max_size=14).map(b"".join))
def test_lxml_is_asked_as_the_libraries_ask_it(data: bytes) -> None:
    """A part expat cannot read is refused exactly when lxml's ``fromstring`` (python-docx's
    and python-pptx's call) finds an element in it, although lxml is fed incrementally."""
    parser = lxml.etree.XMLParser(target=_FirstElement(), resolve_entities=False)
    try:
        lxml.etree.fromstring(data, parser)
        expected = False
    except _Found:
        expected = True
    except lxml.etree.XMLSyntaxError:
        expected = False
    head, rest = data[:5], io.BytesIO(data[5:])
    assert _lxml_reads(head, rest, len(head), lambda: data) is expected
