"""Malformed, hostile and oversized files get a 400 or 413 that says what is wrong."""

from __future__ import annotations

import io
import time
import tracemalloc
import zipfile

import pytest

from serve_app.api.errors import http_status
from serve_app.core.errors import DocumentTooLarge, MalformedDocument, UnsupportedDocumentFormat
from serve_app.documents import FORMATS, DocumentLimits, extract, format_for, rebuild
from tests.docsamples import SAMPLES

GARBAGE = bytes(range(256)) * 8


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_random_bytes_are_a_malformed_document(name: str) -> None:
    with pytest.raises(MalformedDocument) as info:
        extract(FORMATS[name], GARBAGE, DocumentLimits())
    assert http_status(info.value) == 400
    assert name in info.value.message or "UTF-8" in info.value.message


@pytest.mark.parametrize("name", ["docx", "pptx", "xlsx"])
def test_a_truncated_office_file_is_malformed(name: str) -> None:
    data = SAMPLES[name]()
    with pytest.raises(MalformedDocument, match=name):
        extract(FORMATS[name], data[: len(data) // 2], DocumentLimits())


@pytest.mark.parametrize("name", ["docx", "pptx", "xlsx"])
def test_a_zip_that_is_not_an_office_file_is_malformed(name: str) -> None:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as package:
        package.writestr("hello.txt", "not a document")
    with pytest.raises(MalformedDocument, match=name):
        extract(FORMATS[name], out.getvalue(), DocumentLimits())


@pytest.mark.parametrize("name", ["docx", "pptx", "xlsx"])
def test_a_package_that_unpacks_too_large_is_refused_before_parsing(name: str) -> None:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as package:
        package.writestr("bomb.xml", b"\0" * 5_000_000)
    with pytest.raises(DocumentTooLarge) as info:
        extract(FORMATS[name], out.getvalue(), DocumentLimits(max_unpacked_bytes=1_000_000))
    assert http_status(info.value) == 413


@pytest.mark.parametrize(
    ("name", "data", "why"),
    [
        ("srt", b"garbage first\n\n1\n00:00:01,000 --> 00:00:02,000\nhi\n", "srt"),
        ("srt", b"just some text", "srt file"),
        ("vtt", b"1\n00:00:01.000 --> 00:00:02.000\nno header\n", "vtt"),
        ("xliff", b"<xliff><file><body><trans-unit", "xliff"),
        ("xliff", b"<?xml version='1.0'?><root/>", "xliff"),
        ("po", b'msgid "a"\nmsgstr "b"\nthis is not po\n', "po"),
        ("txt", b"\xff\xfe\x00\xd8", "UTF-8"),
        ("md", "caf\xe9".encode("latin-1"), "UTF-8"),
    ],
)
def test_malformed_text_formats_say_why(name: str, data: bytes, why: str) -> None:
    with pytest.raises(MalformedDocument, match=why):
        extract(FORMATS[name], data, DocumentLimits())


def test_po_content_naming_a_file_is_content_not_a_path(tmp_path) -> None:  # type: ignore[no-untyped-def]
    secret = tmp_path / "secret.po"
    secret.write_text('msgid "leaked"\nmsgstr ""\n')
    try:
        segments = extract(FORMATS["po"], str(secret).encode(), DocumentLimits())
    except MalformedDocument:
        segments = []
    assert all("leaked" not in s.text for s in segments)


def test_size_limit_is_413() -> None:
    with pytest.raises(DocumentTooLarge, match="at most 100 are accepted") as info:
        extract(FORMATS["txt"], b"x" * 101, DocumentLimits(max_bytes=100))
    assert http_status(info.value) == 413


def test_segment_limits_are_413() -> None:
    data = "\n\n".join(f"paragraph {i}" for i in range(20)).encode()
    with pytest.raises(DocumentTooLarge, match="20 segments"):
        extract(FORMATS["txt"], data, DocumentLimits(max_segments=10))
    with pytest.raises(DocumentTooLarge, match="characters"):
        extract(FORMATS["txt"], data, DocumentLimits(max_chars=50))
    with pytest.raises(DocumentTooLarge, match="Segment 1"):
        extract(FORMATS["txt"], b"x" * 30, DocumentLimits(max_segment_chars=20))


def test_formats_are_found_by_extension_or_name() -> None:
    assert format_for("Report.DOCX") is FORMATS["docx"]
    assert format_for("a/b/c.subs.srt") is FORMATS["srt"]
    assert format_for("whatever.bin", "xlsx") is FORMATS["xlsx"]
    assert format_for("notes.xlf") is FORMATS["xliff"]


@pytest.mark.parametrize(
    ("filename", "name"), [("a.exe", None), ("noextension", None), ("", None), ("a.txt", "pdf")]
)
def test_unknown_formats_are_400_with_the_supported_list(filename: str, name: str | None) -> None:
    with pytest.raises(UnsupportedDocumentFormat, match=r"supported: \.docx") as info:
        format_for(filename, name)
    assert http_status(info.value) == 400


def test_rebuild_with_the_wrong_number_of_translations_is_an_error() -> None:
    with pytest.raises(MalformedDocument):
        rebuild(FORMATS["txt"], b"one\n\ntwo", ["only one"])


_BLANK_XLIFF = (
    b'<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">'
    b'<file original="x" source-language="en" datatype="plaintext"><body>'
    b'<trans-unit id="1"><source> </source></trans-unit></body></file></xliff>'
)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_a_document_without_text_has_no_segments(name: str) -> None:
    empty = {
        "txt": b"  \n\n ", "html": b"<p> </p>", "md": b"```\ncode\n```\n", "srt": b"",
        "vtt": b"WEBVTT\n", "xliff": _BLANK_XLIFF,
        "po": b'msgid ""\nmsgstr ""\n',
    }  # fmt: skip
    if name not in empty:
        pytest.skip("office files are built by their libraries elsewhere")
    fmt = FORMATS[name]
    assert extract(fmt, empty[name], DocumentLimits()) == []
    assert isinstance(rebuild(fmt, empty[name], []), bytes)


@pytest.mark.parametrize(
    ("name", "data", "why"),
    [
        (
            "srt",
            b"1\n00:00:01,000 --> 00:00:02,000\n" + b"<i>" * 5000 + b"x\n",
            "nested too deeply",
        ),
        ("vtt", b"WEBVTT\n\n00:00:01.000 --> 00:00:02.000\n" + b"<b>" * 5000 + b"x\n", "nested"),
        ("srt", b"1\n99999999999999999999:00:01,000 --> 00:00:02,000\nhi\n", "not a valid srt"),
    ],
)
def test_crafted_subtitles_get_a_reason(name: str, data: bytes, why: str) -> None:
    """Tags nested 5,000 deep and a timing too large for a clock: a 400 that says why,
    not the library's exception's name."""
    with pytest.raises(MalformedDocument, match=why):
        extract(FORMATS[name], data, DocumentLimits())


@pytest.mark.parametrize("msgid", ["%" + "0" * 12_000 + "y", "%(" * 40_000])
def test_a_po_placeholder_lookalike_is_read_in_linear_time(msgid: str) -> None:
    # The placeholder rule tried every split of a run of zeros between the flags and the
    # width (12 s for these 12,000 zeros, ~5 min for 100,000), and scanned to the end of the
    # file for each "%(" never closed: the upload hung in its reading thread for minutes.
    data = f'msgid ""\nmsgstr ""\n\nmsgid "{msgid}"\nmsgstr ""\n'.encode()
    start = time.process_time()
    segments = extract(FORMATS["po"], data, DocumentLimits(max_segment_chars=100_000))
    assert time.process_time() - start < 1
    assert [s.text for s in segments] == [msgid]


PO_HEADER = 'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'


@pytest.mark.parametrize(
    "lines",
    [
        "#. x\n" * 300_000,  # extracted comments
        "# x\n" * 300_000,  # translator comments
        'msgctxt ""\n' + '"x"\n' * 300_000,  # a continued string
        '#| msgid ""\n' + '#| "x"\n' * 300_000,  # a previous msgid, continued
    ],
)
def test_a_po_entry_of_a_million_lines_is_refused_before_polib(lines: str) -> None:
    """polib copies an entry's field for each line appended to it: a 5 MB file of one
    million ``#. x`` lines took 33 s to read, and as long again to rebuild; this one 3 s."""
    data = (PO_HEADER + lines + 'msgid "a"\nmsgstr ""\n').encode()
    start = time.process_time()
    with pytest.raises(DocumentTooLarge, match="Entry 2 of the PO file holds more than 2000"):
        extract(FORMATS["po"], data, DocumentLimits())
    assert time.process_time() - start < 0.5


def test_po_entries_within_the_line_limit_and_references_are_read() -> None:
    # 2,000 comment and continuation lines from one msgid to the next (the header's one and
    # 1,999 comments), many entries, and references and flags (kept in
    # lists by polib: linear) in any number.
    entry = "#. note\n" * 1_000 + "#: src/a.c:1\n" * 5_000 + '#, c-format\nmsgid "a"\nmsgstr ""\n'
    data = (PO_HEADER + "#. x\n" * 1_999 + 'msgid "z"\nmsgstr ""\n\n' + entry * 20).encode()
    segments = extract(FORMATS["po"], data, DocumentLimits())
    assert [s.text for s in segments] == ["z"] + ["a"] * 20
    assert all(len(s.context) < 1_000 for s in segments)


@pytest.mark.parametrize("data", [b"\n" * 3_000_000, b"\r\n \t\n" * 1_000_000])
def test_blank_lines_between_paragraphs_take_no_memory_per_line(data: bytes) -> None:
    """The blank-line rule kept a backtracking state per line: 3 MB of newlines took
    ~700 MB to split (a 10 MB file 2 GB); now no more than the file's own copies."""
    tracemalloc.start()
    try:
        segments = extract(FORMATS["txt"], b"a" + data + b"b", DocumentLimits())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [s.text for s in segments] == ["a", "b"]
    assert peak < 10 * len(data)


def test_text_paragraphs_are_counted_before_their_segments_are_made() -> None:
    # 1.2 million paragraphs: their Segments and contexts (~250 MB) were made, then refused.
    tracemalloc.start()
    try:
        with pytest.raises(DocumentTooLarge, match="1200000 segments"):
            extract(FORMATS["txt"], b"a\n\n" * 1_200_000, DocumentLimits())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 150 * 2**20


def _xliff(source: bytes, doctype: bytes) -> bytes:
    return (
        b'<?xml version="1.0"?>\n' + doctype + b'<xliff version="1.2" '
        b'xmlns="urn:oasis:names:tc:xliff:document:1.2"><file source-language="en" '
        b'target-language="de" datatype="plaintext" original="x"><body>'
        b'<trans-unit id="u1"><source>' + source + b"</source></trans-unit></body></file></xliff>"
    )  # fmt: skip


@pytest.mark.parametrize(
    ("source", "doctype"),
    [
        (b"say &a;", b'<!DOCTYPE xliff [<!ENTITY a "hello">]>'),
        (b"a &xxe; b", b'<!DOCTYPE xliff [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>'),
        (b"x &foo; y", b'<!DOCTYPE xliff SYSTEM "http://127.0.0.1:9/xliff.dtd">'),
    ],
)
def test_an_xliff_entity_reference_is_refused_at_upload(source: bytes, doctype: bytes) -> None:
    """The parser expands no entity: a unit holding one was read, translated, and then its
    target could not be written (lxml's entity nodes have no writable text): the job
    failed after its work. Now a 400 at upload, and /etc/passwd is never read."""
    with pytest.raises(MalformedDocument, match="unit 'u1' holds the entity reference &"):
        extract(FORMATS["xliff"], _xliff(source, doctype), DocumentLimits())


def test_xliff_character_references_and_a_doctype_alone_are_read_and_rebuilt() -> None:
    doctype = (
        b'<!DOCTYPE xliff PUBLIC "-//XLIFF//DTD XLIFF//EN" '
        b'"http://www.oasis-open.org/committees/xliff/documents/xliff.dtd">'
    )
    data = _xliff(b"x &amp; &#65; &lt;y", doctype)
    segments = extract(FORMATS["xliff"], data, DocumentLimits())
    assert [s.text for s in segments] == ["x & A <y"]
    assert b">X &amp; A &lt;Y</target>" in rebuild(FORMATS["xliff"], data, ["X & A <Y"])


@pytest.mark.parametrize(
    ("source", "text", "target"),
    [
        (b"one <!-- note --> two", "one two", b">ONE TWO</target>"),
        (b"one <?pi x?> two", "one two", b">ONE TWO</target>"),
        (
            b'one <g id="1">two <!-- c --> three</g><?p q?> four',
            "one <g1>two three</g1> four",
            b'>ONE <g id="1">TWO THREE</g> FOUR</target>',
        ),
    ],
)
def test_xliff_comments_and_processing_instructions_keep_the_text_after_them(
    source: bytes, text: str, target: bytes
) -> None:
    """translate-toolkit skipped a comment with the text after it (the unit was read,
    translated and written back as ``one``) and could not read a processing instruction
    (400 "TypeError")."""
    data = _xliff(source, b"")
    assert [s.text for s in extract(FORMATS["xliff"], data, DocumentLimits())] == [text]
    assert target in rebuild(FORMATS["xliff"], data, [text.upper().replace("G1>", "g1>")])


@pytest.mark.parametrize("name", ["docx", "pptx", "xlsx", "xliff"])
@pytest.mark.parametrize("junk", ["\x1b", "\x00", "\x0b\x0c", "\ufffe\uffff", "\x08"])
def test_a_translation_holding_what_xml_cannot_is_written_without_it(name: str, junk: str) -> None:
    """A model may answer with an escape, a NUL or a vertical tab (random weights do): the
    libraries of the XML formats refused to write it, and the job failed when its file was
    assembled, after all its segments were translated."""
    data = SAMPLES[name]()
    texts = [s.text for s in extract(FORMATS[name], data, DocumentLimits())]
    out = rebuild(FORMATS[name], data, [f"{t}{junk}!" for t in texts])
    if name == "xliff":  # read back: the targets
        written = out.decode()
    else:
        written = "\n".join(s.text for s in extract(FORMATS[name], out, DocumentLimits()))
    assert "!" in written
    assert not any(c in written for c in junk)
