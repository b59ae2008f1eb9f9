"""Document inputs found 2026-12-06, through `serve run` (the documents cluster of
test_documents.py, the real libraries in the replica's reading thread): pictures unpacked
once, SubRip files of lone CRs, names with bidi overrides, and packages that name one part
many times (openpyxl reads it each time; python-pptx's slides were walked each time) or
show one shared string in many cells."""

from __future__ import annotations

import io
import os
import time
import zipfile

import httpx
import srt

from tests.docsamples import SAMPLES
from tests.e2e.test_documents import _wait_done, served_docs
from tests.unit.documents.test_package_references import (
    rebuilt,
    shared_string_book,
    workbook,
)

__all__ = ["served_docs"]  # the module's cluster


def _upload(url: str, name: str, data: bytes) -> httpx.Response:
    files = {"file": (name, data)}
    return httpx.post(f"{url}/documents", files=files, data={"target_lang": "de"}, timeout=120)


def test_a_docx_with_pictures_and_a_cr_only_srt_under_a_spoofing_name_are_done(
    served_docs: str,
) -> None:
    """A docx with 6 MB of pictures is accepted and translated (its pictures are no longer
    unpacked twice by the check); an old Mac .srt (lone CRs) uploaded as ``cr`` RLO
    ``trs.srt`` is translated (a 400 before) and offered as ``crtrs.srt``."""
    pictures = {f"word/media/image{i}.png": b"\x89PNG\r\n\x1a\n" + os.urandom(2_000_000)
                for i in range(3)}  # fmt: skip
    r = _upload(served_docs, "pictures.docx", rebuilt("docx", {}, pictures))
    assert r.status_code == 201, r.text
    docx_id = r.json()["id"]
    cues = SAMPLES["srt"]().decode().replace("\r\n", "\n").replace("\n", "\r").encode()
    r = _upload(served_docs, "cr\u202etrs.srt", cues)
    assert r.status_code == 201, r.text
    assert r.json()["name"] == "crtrs.srt"
    srt_id = r.json()["id"]
    assert _wait_done(served_docs, docx_id)["status"] == "done"
    assert _wait_done(served_docs, srt_id)["status"] == "done"
    r = httpx.get(f"{served_docs}/documents/{srt_id}/result", timeout=60)
    assert r.status_code == 200
    assert r.headers["content-disposition"].endswith("filename*=UTF-8''crtrs.srt")
    assert len(list(srt.parse(r.text))) == len(list(srt.parse(SAMPLES["srt"]().decode())))


def test_packages_naming_one_part_many_times_are_refused_fast(served_docs: str) -> None:
    """Each reproduced through this cluster on the code before (single replica): a sheet
    named 30 times, a bitmap shown 50 times, a 1 MB shared string in 1,000 cells took the
    replica's reading thread seconds to minutes and hundreds of megabytes to gigabytes.
    Now 413s within seconds, at full size, and the next upload is read."""
    crafted = {
        "sheet-named-100-times.xlsx": workbook(sheet_names=100, cells=20_000),
        "bitmap-shown-50-times.xlsx": workbook(pictures=50, side=2000),
        "shared-string.xlsx": shared_string_book(20_000, 1_000_000),
    }
    for name, data in crafted.items():
        started = time.monotonic()
        r = _upload(served_docs, name, data)
        assert r.status_code == 413, (name, r.text)
        assert set(r.json()) == {"error"}
        assert time.monotonic() - started < 20, name
    r = _upload(served_docs, "ok.xlsx", SAMPLES["xlsx"]())
    assert r.status_code == 201, r.text
    assert _wait_done(served_docs, r.json()["id"])["status"] == "done"


def test_a_slide_named_a_thousand_times_is_read_once(served_docs: str) -> None:
    """1,000 names of one slide of 10,000 empty paragraphs: walked once per name (two
    minutes of the reading thread); now read at once, with the sample's segments."""
    source = zipfile.ZipFile(io.BytesIO(SAMPLES["pptx"]()))
    deck = source.read("ppt/presentation.xml").decode()
    start = deck.index("<p:sldId ")
    entry = deck[start : deck.index("/>", start) + 2]
    names = "".join(entry.replace('id="256"', f'id="{300 + i}"') for i in range(1_000))
    slide = source.read("ppt/slides/slide1.xml").decode()
    filler = "<p:sp><p:txBody>" + "<a:p/>" * 10_000 + "</p:txBody></p:sp></p:spTree>"
    data = rebuilt(
        "pptx",
        {
            "ppt/presentation.xml": deck.replace(entry, names).encode(),
            "ppt/slides/slide1.xml": slide.replace("</p:spTree>", filler, 1).encode(),
        },
        {},
    )
    started = time.monotonic()
    r = _upload(served_docs, "deck.pptx", data)
    assert r.status_code == 201, r.text
    assert time.monotonic() - started < 20
    plain = _upload(served_docs, "plain.pptx", SAMPLES["pptx"]())
    assert r.json()["segments_total"] == plain.json()["segments_total"]
    assert _wait_done(served_docs, r.json()["id"])["status"] == "done"
