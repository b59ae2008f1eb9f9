"""Parts the Office libraries keep as bytes are not judged as XML (``documents.package``).

Word's ``altChunk`` imports HTML into a document as a part of type ``text/html``
(``word/afchunk.htm``, with ``<!DOCTYPE html>``, ``<meta>`` and ``<br>``). python-docx never
parses it, yet the package check refused the file for its DTD, and without one for its
unclosed tags: a 400 for a file Word and python-docx open (found 2026-12-07). The content
types and the ``.rels`` parts, which the libraries parse by name whatever they declare, are
still judged, as is every part of an xlsx (openpyxl opens parts by relationship)."""

from __future__ import annotations

import io
import zipfile

import docx
import pytest
from docx.opc.packuri import PackURI
from docx.opc.part import Part
from docx.oxml import OxmlElement
from docx.oxml.ns import qn

from serve_app.core.errors import MalformedDocument
from serve_app.documents import FORMATS, DocumentLimits, extract, rebuild
from serve_app.documents.package import check_package
from tests.docsamples import SAMPLES
from tests.unit.documents.test_package import BOMB, replaced

ALT_CHUNK = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/aFChunk"
HTML = (
    b"<!DOCTYPE html><html><head><meta charset='utf-8'><title>Imported</title></head>"
    b"<body><p>Imported<br>text &nbsp; here</p></body></html>"
)


def with_alt_chunk(html: bytes = HTML, content_type: str = "text/html") -> bytes:
    """A docx of one paragraph and an imported HTML part, as Word's altChunk holds it."""
    document = docx.Document()
    document.add_paragraph("Hello world, this is a document.")
    package = document.part.package
    part = Part(PackURI("/word/afchunk1.htm"), content_type, html, package)
    chunk = OxmlElement("w:altChunk")
    chunk.set(qn("r:id"), document.part.relate_to(part, ALT_CHUNK))
    body = document.element.body
    body.insert(len(body) - 1, chunk)  # before the section properties
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def test_a_docx_with_imported_html_is_translated_and_keeps_it() -> None:
    data = with_alt_chunk()
    segments = extract(FORMATS["docx"], data, DocumentLimits())
    assert [s.text for s in segments] == ["Hello world, this is a document."]
    out = rebuild(FORMATS["docx"], data, ["Hallo Welt, dies ist ein Dokument."])
    assert docx.Document(io.BytesIO(out)).paragraphs[0].text.startswith("Hallo Welt")
    assert zipfile.ZipFile(io.BytesIO(out)).read("word/afchunk1.htm") == HTML


@pytest.mark.parametrize("content_type", ["text/html", "TEXT/HTML; charset=utf-8"])
def test_a_part_declared_of_a_type_that_is_not_xml_is_not_parsed(content_type: str) -> None:
    check_package("docx", with_alt_chunk(b"<p>a<b>broken", content_type), DocumentLimits())


def test_the_same_html_declared_as_xml_is_still_refused() -> None:
    data = with_alt_chunk(content_type="application/xhtml+xml")
    with pytest.raises(MalformedDocument, match="DTD"):
        check_package("docx", data, DocumentLimits())


def test_rels_declared_as_text_are_still_judged() -> None:
    """python-docx parses every ``.rels`` part by its name: declaring them ``text/plain``
    must not let a DTD through."""
    data = SAMPLES["docx"]()
    types = zipfile.ZipFile(io.BytesIO(data)).read("[Content_Types].xml").decode()
    rels = "application/vnd.openxmlformats-package.relationships+xml"
    assert rels in types
    rels_part = zipfile.ZipFile(io.BytesIO(data)).read("word/_rels/document.xml.rels")
    body = rels_part.split(b"?>", 1)[-1]
    hostile = replaced(
        data,
        {
            "[Content_Types].xml": types.replace(rels, "text/plain").encode(),
            "word/_rels/document.xml.rels": b'<?xml version="1.0"?>\n' + BOMB + body,
        },
    )
    with pytest.raises(MalformedDocument, match="DTD"):
        check_package("docx", hostile, DocumentLimits())


def test_a_main_part_declared_as_html_is_a_400_not_parsed() -> None:
    """Declared ``text/html``, the document part with an entity bomb passes the check (no
    library parses it) and python-docx then finds no Word document in the file."""
    data = SAMPLES["docx"]()
    types = zipfile.ZipFile(io.BytesIO(data)).read("[Content_Types].xml").decode()
    main = "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"
    hostile = replaced(
        data,
        {
            "[Content_Types].xml": types.replace(main, "text/html").encode(),
            "word/document.xml": b'<?xml version="1.0"?>\n' + BOMB + b"<r>&d;</r>",
        },
    )
    check_package("docx", hostile, DocumentLimits())
    with pytest.raises(MalformedDocument):
        extract(FORMATS["docx"], hostile, DocumentLimits())


def test_an_xlsx_part_is_judged_whatever_its_declared_type() -> None:
    sample = SAMPLES["xlsx"]()
    types = zipfile.ZipFile(io.BytesIO(sample)).read("[Content_Types].xml").decode()
    sheet = "xl/worksheets/sheet1.xml"
    override = f'<Override PartName="/{sheet}" ContentType="text/plain"/>'
    hostile = replaced(
        sample,
        {
            "[Content_Types].xml": types.replace("</Types>", override + "</Types>").encode(),
            sheet: b'<?xml version="1.0"?>\n' + BOMB + b"<worksheet/>",
        },
    )
    with pytest.raises(MalformedDocument, match="DTD"):
        check_package("xlsx", hostile, DocumentLimits())
