"""Sample documents of every supported format, built with the formats' own libraries, and
the structure checks the document tests share (unit tests with a fake translator, e2e tests
through the real model)."""

from __future__ import annotations

import io
import re
from collections.abc import Callable

import docx
import openpyxl
import polib
import pptx
import srt
import webvtt
from lxml import etree
from pptx.util import Inches

TXT = "Hello world.\n\nSecond paragraph,\nover two lines.\r\n\r\n\n  Third one.  \n"

HTML = """<!DOCTYPE html>
<html lang="en"><head><title>A page</title><style>p { color: red; }</style></head>
<body>
<h1 class="title">Welcome home</h1>
<p>Hello <b>bold world</b> and <a href="https://example.com/x?a=1&amp;b=2">a link</a>.</p>
<p>Run <code>make test</code> now.<br>Next line</p>
<div><p>Inside a div</p>Loose text</div>
<p translate="no">Do not translate</p>
<script>var x = "keep me";</script>
</body></html>
"""

MD = """# Title of the page

A paragraph that runs
over two lines.

> A quoted
> remark.

- first item
- second item

| Name | Value |
|------|-------|
| one  | two   |

```python
print("keep")
```
"""

SRT = """1
00:00:01,000 --> 00:00:02,500
Hello there,
<i>my friend</i>.

2
00:00:03,000 --> 00:00:04,000
How are you?

7
00:01:00,000 --> 00:01:02,000
Fine, thanks.
"""

VTT = """WEBVTT

NOTE a comment that stays

intro
00:00:01.000 --> 00:00:02.500 align:start position:10%
<v Bob>Hello &amp; welcome</v>

00:00:03.000 --> 00:00:04.000
Second <b>cue</b>
"""

XLIFF = """<?xml version="1.0" encoding="UTF-8"?>
<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">
<file original="ui.txt" source-language="en" target-language="de" datatype="plaintext"><body>
<trans-unit id="greeting"><source>Hello <g id="1">dear</g> user<x id="2"/></source></trans-unit>
<trans-unit id="plain"><source>Save the file</source><note>a button</note></trans-unit>
<trans-unit id="fixed" translate="no"><source>ACME</source></trans-unit>
</body></file></xliff>
"""

PO = """# A translation file
msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\\n"
"Plural-Forms: nplurals=2; plural=(n != 1);\\n"

#: app.py:10
msgctxt "menu"
msgid "Open file"
msgstr ""

msgid "One apple"
msgid_plural "%d apples"
msgstr[0] ""
msgstr[1] ""

#~ msgid "Old entry"
#~ msgstr "Alt"
"""


def make_docx() -> bytes:
    doc = docx.Document()
    doc.sections[0].header.paragraphs[0].text = "Header text"
    p = doc.add_paragraph("Plain start, ")
    p.add_run("bold part").bold = True
    p.add_run(" and ")
    p.add_run("italic end").italic = True
    table = doc.add_table(rows=2, cols=2)
    for i, cell in enumerate(table._cells):
        cell.text = f"cell {i}"
    doc.add_paragraph("Last paragraph.")
    out = io.BytesIO()
    doc.save(out)
    return out.getvalue()


def make_pptx() -> bytes:
    prs = pptx.Presentation()
    slide = prs.slides.add_slide(prs.slide_layouts[5])
    slide.shapes.title.text = "Slide title"
    box = slide.shapes.add_textbox(Inches(1), Inches(2), Inches(6), Inches(1))
    para = box.text_frame.paragraphs[0]
    para.add_run().text = "Normal text "
    bold = para.add_run()
    bold.text = "bold text"
    bold.font.bold = True
    table = slide.shapes.add_table(2, 2, Inches(1), Inches(3), Inches(4), Inches(1)).table
    for r in range(2):
        for c in range(2):
            table.cell(r, c).text = f"cell {r}{c}"
    slide.notes_slide.notes_text_frame.text = "Speaker notes"
    out = io.BytesIO()
    prs.save(out)
    return out.getvalue()


def make_xlsx() -> bytes:
    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.title = "Prices"
    sheet.append(["Item", "Price", "Note"])
    sheet.append(["Apple", 1.5, "fresh fruit"])
    sheet.append(["Pear", 2, None])
    sheet["B4"] = "=SUM(B2:B3)"
    sheet["B2"].number_format = "0.00"
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


SAMPLES: dict[str, Callable[[], bytes]] = {
    "txt": lambda: TXT.encode(),
    "html": lambda: HTML.encode(),
    "md": lambda: MD.encode(),
    "srt": lambda: SRT.encode(),
    "vtt": lambda: VTT.encode(),
    "docx": make_docx,
    "pptx": make_pptx,
    "xlsx": make_xlsx,
    "xliff": lambda: XLIFF.encode(),
    "po": lambda: PO.encode(),
}


# -- structure checks: ``check(original, translated, changed)``, where ``changed(a, b)`` says
# whether a translated text b stands for a source text a (the fake translator: b == a.upper();
# the real model: anything not empty) -------------------------------------------------------

Changed = Callable[[str, str], bool]


def check_txt(original: bytes, out: bytes, changed: Changed) -> None:
    text = out.decode()
    assert "\r\n\r\n\n" in text  # the blank lines between paragraphs, as they were
    first = text.split("\n\n")[0]
    assert changed("Hello world.", first)


def check_html(original: bytes, out: bytes, changed: Changed) -> None:
    text = out.decode()
    assert text.startswith("<!DOCTYPE html>")
    assert 'href="https://example.com/x?a=1&amp;b=2"' in text
    assert "<code>make test</code>" in text
    assert 'var x = "keep me";' in text
    assert '<p translate="no">Do not translate</p>' in text
    assert "p { color: red; }" in text
    assert '<h1 class="title">' in text
    assert re.search(r"<b>[^<]*</b>", text)
    assert "<br>" in text


def check_md(original: bytes, out: bytes, changed: Changed) -> None:
    lines = out.decode().split("\n")
    assert lines[0].startswith("# ")
    assert any(line.startswith("> ") for line in lines)
    assert sum(line.startswith("- ") for line in lines) == 2
    assert '```python\nprint("keep")\n```' in out.decode()
    assert any(line.startswith("|---") for line in lines)


def check_srt(original: bytes, out: bytes, changed: Changed) -> None:
    before, after = list(srt.parse(original.decode())), list(srt.parse(out.decode()))
    assert [(c.index, c.start, c.end) for c in before] == [(c.index, c.start, c.end) for c in after]
    assert "<i>" in after[0].content
    assert "</i>" in after[0].content
    for a, b in zip(before[1:], after[1:], strict=True):
        assert changed(a.content, b.content)


def check_vtt(original: bytes, out: bytes, changed: Changed) -> None:
    before = webvtt.from_string(original.decode())
    after = webvtt.from_string(out.decode())
    assert [(c.identifier, c.start, c.end) for c in before.captions] == [
        (c.identifier, c.start, c.end) for c in after.captions
    ]
    text = out.decode()
    assert "NOTE a comment that stays" in text
    assert "align:start position:10%" in text
    assert after.captions[0].raw_text.startswith("<v Bob>")
    assert "</b>" in text


def _runs(doc: docx.document.Document) -> list[tuple[str, bool | None, bool | None]]:
    p = doc.paragraphs[0]
    return [(r.text, r.bold, r.italic) for r in p.runs]


def check_docx(original: bytes, out: bytes, changed: Changed) -> None:
    before, after = docx.Document(io.BytesIO(original)), docx.Document(io.BytesIO(out))
    runs_before, runs_after = _runs(before), _runs(after)
    assert [(b, i) for _, b, i in runs_before] == [(b, i) for _, b, i in runs_after]
    for (a, *_), (b, *_) in zip(runs_before, runs_after, strict=True):
        assert changed(a, b)
    cells = [c.text for c in after.tables[0]._cells]
    assert len(cells) == 4
    assert all(changed(f"cell {i}", c) for i, c in enumerate(cells))
    assert changed("Header text", after.sections[0].header.paragraphs[0].text)


def check_pptx(original: bytes, out: bytes, changed: Changed) -> None:
    slide = pptx.Presentation(io.BytesIO(out)).slides[0]
    assert changed("Slide title", slide.shapes.title.text)
    box = slide.shapes[1]
    runs = box.text_frame.paragraphs[0].runs
    assert [r.font.bold for r in runs] == [None, True]
    assert changed("Normal text ", runs[0].text)
    assert changed("bold text", runs[1].text)
    table = slide.shapes[2].table
    assert changed("cell 11", table.cell(1, 1).text)
    assert changed("Speaker notes", slide.notes_slide.notes_text_frame.text)


def check_xlsx(original: bytes, out: bytes, changed: Changed) -> None:
    book = openpyxl.load_workbook(io.BytesIO(out))
    sheet = book["Prices"]
    assert sheet["B2"].value == 1.5
    assert sheet["B2"].number_format == "0.00"
    assert sheet["B3"].value == 2
    assert sheet["C3"].value is None
    assert sheet["B4"].value == "=SUM(B2:B3)"
    assert changed("Apple", sheet["A2"].value)
    assert changed("fresh fruit", sheet["C2"].value)


def check_xliff(original: bytes, out: bytes, changed: Changed) -> None:
    ns = {"x": "urn:oasis:names:tc:xliff:document:1.2"}
    root = etree.fromstring(out)
    units = {u.get("id"): u for u in root.iterfind(".//x:trans-unit", ns)}
    assert set(units) == {"greeting", "plain", "fixed"}
    target = units["greeting"].find("x:target", ns)
    assert target is not None
    assert target.find("x:g[@id='1']", ns) is not None
    assert target.find("x:x[@id='2']", ns) is not None
    plain = units["plain"].find("x:target", ns)
    assert plain is not None
    assert changed("Save the file", plain.text or "")
    assert units["fixed"].find("x:target", ns) is None


def check_po(original: bytes, out: bytes, changed: Changed) -> None:
    po = polib.pofile(out.decode())
    entry = po.find("Open file", msgctxt="menu")
    assert entry is not None
    assert changed("Open file", entry.msgstr)
    assert entry.fuzzy
    plural = po.find("One apple")
    assert plural is not None
    assert changed("One apple", plural.msgstr_plural[0])
    assert plural.msgstr_plural[1].count("%d") == 1  # placeholders come back exactly
    assert changed(" apples", plural.msgstr_plural[1].replace("%d", ""))
    assert po.metadata["Plural-Forms"].startswith("nplurals=2")
    assert [e.msgid for e in po.obsolete_entries()] == ["Old entry"]


CHECKS: dict[str, Callable[[bytes, bytes, Changed], None]] = {
    "txt": check_txt,
    "html": check_html,
    "md": check_md,
    "srt": check_srt,
    "vtt": check_vtt,
    "docx": check_docx,
    "pptx": check_pptx,
    "xlsx": check_xlsx,
    "xliff": check_xliff,
    "po": check_po,
}
