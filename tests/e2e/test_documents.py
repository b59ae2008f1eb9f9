"""Document translation through the real stack: `serve run` with the SQLite store's deployment,
the tiny model on vLLM (CPU), HTTP through Ray's proxy. Every format round-trips (structure
checked, not quality: random weights); the deepl client's translate_document and
LibreTranslate's /translate_file work as their users run them."""

from __future__ import annotations

import asyncio
import io
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import deepl
import httpx
import lxml.etree
import pytest

from bench.ports import free_port
from serve_app.tools.launcher import derive_config
from tests.conftest import ROOT
from tests.docsamples import CHECKS, SAMPLES
from tests.e2e.conftest import serve_cluster
from tests.e2e.replicas import replica_processes
from tests.unit.documents.test_bad_files import _xliff
from tests.unit.documents.test_package import HI, MAIN, XXE, damaged, replaced, sheet

DONE_TIMEOUT_S = 900


def anything(a: str, b: str | None) -> bool:
    """Random weights may answer anything, even nothing once cleaned (an emptied cell reads
    back as None): structure only."""
    return True


@pytest.fixture(scope="module")
def served_docs(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port, gcs_port = free_port(), free_port()
    workdir = tmp_path_factory.mktemp("serve-docs")
    config = derive_config(
        ROOT / "serve_config.cpu.yaml",
        top={"http_options": {"port": port}},
        args={
            "engine": {"model": str(tiny_model_dir), "max_model_len": 2048},
            "prompt": {"family": "chat"},
            # Random weights rarely stop: short outputs keep the test quick.
            "limits": {
                "max_input_tokens": 512,
                "output_tokens_ratio": 0.5,
                "output_tokens_margin": 4,
            },
            "store": {"url": f"sqlite:///{workdir}/store.db"},
            "documents": {
                "poll_interval_s": 0.2,
                "worker_concurrency": 8,
                "idle_in_flight": 16,
                "reading_queue": 1,  # test_uploads_beyond_the_reading_queue_get_a_fast_503
            },
        },
        runtime_env={"env_vars": {"VLLM_CPU_KVCACHE_SPACE": "1"}},
        deployment={"num_replicas": 1},
    )
    with serve_cluster(config, workdir, replicas=1, ray_args=[f"--port={gcs_port}"]) as url:
        yield url


def _wait_done(url: str, doc: str) -> dict:
    deadline = time.monotonic() + DONE_TIMEOUT_S
    while time.monotonic() < deadline:
        status = httpx.get(f"{url}/documents/{doc}", timeout=30).json()
        if status["status"] in ("done", "error"):
            return status
        time.sleep(1)
    raise AssertionError(f"document {doc} not done in {DONE_TIMEOUT_S}s: {status}")


def test_every_format_round_trips_through_the_model(served_docs: str) -> None:
    ids = {}
    for name, make in SAMPLES.items():
        files = {"file": (f"sample.{name}", make())}
        form = {"target_lang": "de", "source_lang": "en"}
        r = httpx.post(f"{served_docs}/documents", files=files, data=form, timeout=60)
        assert r.status_code == 201, r.text
        ids[name] = r.json()["id"]
    for name, doc in ids.items():
        status = _wait_done(served_docs, doc)
        assert status["status"] == "done", status
        r = httpx.get(f"{served_docs}/documents/{doc}/result", timeout=60)
        assert r.status_code == 200
        CHECKS[name](SAMPLES[name](), r.content, anything)


def test_uploads_beyond_the_reading_queue_get_a_fast_503(served_docs: str) -> None:
    """Four Markdown files of 150,000 paragraphs at once (each takes the replica's reading
    thread for seconds before its 413): one is read, one waits, two are refused at once."""
    data = b"x\n\n" * 150_000

    async def upload(client: httpx.AsyncClient) -> httpx.Response:
        files = {"file": ("flood.md", data, "text/markdown")}
        return await client.post("/documents", files=files, data={"target_lang": "de"})

    async def four() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=served_docs, timeout=300) as client:
            return list(await asyncio.gather(*(upload(client) for _ in range(4))))

    answers = asyncio.run(four())
    assert sorted(r.status_code for r in answers) == [413, 413, 503, 503], [
        r.text[:200] for r in answers
    ]
    for r in answers:
        if r.status_code == 503:
            assert r.headers["retry-after"] == "5"
            assert r.json()["error"]["code"] == "overloaded"
    r = httpx.post(f"{served_docs}/documents", files={"file": ("a.txt", b"Hi.")},
                   data={"target_lang": "de"}, timeout=60)  # fmt: skip
    assert r.status_code == 201, r.text


def test_malformed_file_is_a_400_through_the_proxy(served_docs: str) -> None:
    files = {"file": ("a.docx", b"not a zip")}
    r = httpx.post(f"{served_docs}/documents", files=files, data={"target_lang": "de"})
    assert r.status_code == 400
    assert "docx" in r.json()["error"]["message"]


def test_deepl_client_translate_document(served_docs: str) -> None:
    translator = deepl.Translator("any-key", server_url=served_docs)
    out = io.BytesIO()
    data = SAMPLES["docx"]()
    status = translator.translate_document(
        data, out, target_lang="DE", source_lang="EN", filename="report.docx"
    )
    assert status.done
    assert status.billed_characters
    CHECKS["docx"](data, out.getvalue(), anything)


def test_libretranslate_translate_file(served_docs: str) -> None:
    data = SAMPLES["srt"]()
    r = httpx.post(
        f"{served_docs}/libretranslate/translate_file",
        files={"file": ("subs.srt", data)},
        data={"source": "en", "target": "de"},
        timeout=DONE_TIMEOUT_S,
    )
    assert r.status_code == 200, r.text
    url = r.json()["translatedFileUrl"]
    assert "/libretranslate/download_file/" in url
    r = httpx.get(url, timeout=60)
    assert r.status_code == 200
    CHECKS["srt"](data, r.content, anything)


def test_crafted_office_files_through_the_proxy(served_docs: str) -> None:
    """docs/hostile-input.md's crafted packages as users upload them: an external entity is
    a 400 before any library parses it, a range openpyxl would fill a 413, and a sparse
    sheet (A1 and XFD1048576: iter_rows' 17 billion cells hung the replica's thread) is
    translated."""
    xml = zipfile.ZipFile(io.BytesIO(SAMPLES["docx"]())).read(MAIN["docx"])
    body = xml.split(b"?>", 1)[-1]
    xxe = replaced(SAMPLES["docx"](), {MAIN["docx"]: b'<?xml version="1.0"?>\n' + XXE + body})
    merged = sheet(
        f'<row r="1">{HI.format(ref="A1", text="hi")}</row>',
        '<mergeCells><mergeCell ref="A1:XFD1048576"/></mergeCells>',
    )
    far = HI.format(ref="XFD1048576", text="there")
    sparse = sheet(f'<row r="1">{HI.format(ref="A1", text="hi")}</row><row r="1048576">{far}</row>')
    form = {"target_lang": "de", "source_lang": "en"}
    for name, data, status in (("a.docx", xxe, 400), ("b.xlsx", merged, 413)):
        files = {"file": (name, data)}
        r = httpx.post(f"{served_docs}/documents", files=files, data=form, timeout=60)
        assert r.status_code == status, r.text
        assert set(r.json()["error"]) >= {"code", "message"}
    files = {"file": ("c.xlsx", sparse)}
    r = httpx.post(f"{served_docs}/documents", files=files, data=form, timeout=60)
    assert r.status_code == 201, r.text
    assert _wait_done(served_docs, r.json()["id"])["status"] == "done"


def test_a_paragraph_of_too_many_runs_is_refused_at_upload(served_docs: str) -> None:
    """One HTML paragraph of 200 ``<b>x</b>``: the worker's request of it would need 200
    engine requests (each run between tags, when the model loses one; a replica holds
    ``max_engine_requests``, 128), so the upload is a 413 in each API's error shape, not a
    job that fails later."""
    page = b"<html><body><p>" + b"<b>x</b>" * 200 + b"</p></body></html>"
    files = {"file": ("page.html", page)}
    r = httpx.post(f"{served_docs}/documents", files=files, data={"target_lang": "de"}, timeout=60)
    assert r.status_code == 413, r.text
    assert r.json()["error"]["code"] == "document_too_large"
    assert "200 parts" in r.json()["error"]["message"]
    r = httpx.post(
        f"{served_docs}/v2/document",
        files=files,
        data={"target_lang": "DE"},
        headers={"Authorization": "DeepL-Auth-Key any-key"},
        timeout=60,
    )
    assert r.status_code == 413, r.text
    assert "200 parts" in r.json()["message"]
    r = httpx.post(
        f"{served_docs}/libretranslate/translate_file",
        files=files,
        data={"source": "en", "target": "de"},
        timeout=60,
    )
    assert r.status_code == 413, r.text
    assert "200 parts" in r.json()["error"]


def test_hostile_po_and_xliff_are_refused_fast_and_downloads_are_sandboxed(
    served_docs: str,
) -> None:
    """docs/hostile-input.md's crafted bilingual files through the proxy: a 5 MB PO entry of
    one million comment lines (polib's cost is the square of those: 33 s of the replica's
    one reading thread, then as long again at rebuild) is a 413 in seconds, and the reading
    thread is free for the next upload; an XLIFF unit holding an entity reference (it was
    translated, then the job failed writing its target) is a 400 at upload. A translated
    HTML file comes back under a policy that runs none of its scripts."""
    po = b'msgid ""\nmsgstr ""\n\n' + b"#. x\n" * 1_000_000 + b'msgid "Hello"\nmsgstr ""\n'
    start = time.monotonic()
    r = httpx.post(
        f"{served_docs}/v2/document",
        files={"file": ("big.po", po)},
        data={"target_lang": "DE"},
        headers={"Authorization": "DeepL-Auth-Key any-key"},
        timeout=120,
    )
    assert r.status_code == 413, r.text
    assert "more than 2000 comment" in r.json()["message"]
    assert time.monotonic() - start < 15
    xliff = (
        b'<?xml version="1.0"?>\n<!DOCTYPE xliff [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>'
        b'<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2"><file '
        b'source-language="en" target-language="de" datatype="plaintext" original="x"><body>'
        b'<trans-unit id="u1"><source>Hi &xxe;</source></trans-unit></body></file></xliff>'
    )
    form = {"target_lang": "de", "source_lang": "en"}
    r = httpx.post(
        f"{served_docs}/documents", files={"file": ("a.xlf", xliff)}, data=form, timeout=60
    )
    assert r.status_code == 400, r.text
    assert "entity reference &xxe;" in r.json()["error"]["message"]
    page = b"<html><body><p>Hello.</p><script>alert(1)</script></body></html>"
    r = httpx.post(
        f"{served_docs}/documents", files={"file": ("p.html", page)}, data=form, timeout=60
    )
    assert r.status_code == 201, r.text
    assert r.headers["x-content-type-options"] == "nosniff"
    doc = r.json()["id"]
    assert _wait_done(served_docs, doc)["status"] == "done"
    r = httpx.get(f"{served_docs}/documents/{doc}/result", timeout=60)
    assert r.headers["content-type"].startswith("text/html")
    assert b"<script>alert(1)</script>" in r.content
    policy = r.headers["content-security-policy"]
    assert "sandbox" in policy
    assert "default-src 'none'" in policy


def test_xliff_comments_keep_their_text_and_xml_formats_end_done(served_docs: str) -> None:
    """docs/hostile-input.md's XLIFF and XML-output fixes on the real engine: a comment and a
    processing instruction in a unit's source are dropped and the text on both sides of them
    is what the job translates (translate-toolkit read ``Hello`` alone, the instruction was a
    400); an XLIFF and a Word file whose translations the random model writes (it may answer
    characters XML cannot hold) end ``done`` with files their parsers read."""
    xliff = _xliff(b"Hello <!-- note --> world <?pi x?> again", b"")
    docx = SAMPLES["docx"]()
    form = {"target_lang": "de", "source_lang": "en"}
    created = {}
    for name, data in (("a.xlf", xliff), ("b.docx", docx)):
        files = {"file": (name, data)}
        r = httpx.post(f"{served_docs}/documents", files=files, data=form, timeout=60)
        assert r.status_code == 201, r.text
        created[name] = r.json()
    assert created["a.xlf"]["segments_total"] == 1
    assert created["a.xlf"]["characters_total"] == len("Hello world again")
    results = {}
    for name, job in created.items():
        status = _wait_done(served_docs, job["id"])
        assert status["status"] == "done", status
        r = httpx.get(f"{served_docs}/documents/{job['id']}/result", timeout=60)
        assert r.status_code == 200
        results[name] = r.content
    root = lxml.etree.fromstring(results["a.xlf"])
    targets = root.findall(".//{urn:oasis:names:tc:xliff:document:1.2}target")
    assert len(targets) == 1
    assert not targets[0].xpath("comment() | processing-instruction()")
    CHECKS["docx"](docx, results["b.docx"], anything)


def _peak_rss(pid: int, reset: bool = False) -> int:
    """The process's peak resident memory (VmHWM), in bytes: since it started, or, with
    ``reset``, from now (Linux's ``clear_refs`` 5: the peak becomes the current size), so the
    earlier tests' peaks (the Markdown floods) cannot hide one."""
    if reset:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise LookupError(f"no VmHWM for process {pid}")


def test_a_text_file_of_newlines_is_split_fast_in_little_memory(served_docs: str) -> None:
    """3 million newlines between two words: the greedy blank-line rule kept a backtracking
    state per line (the replica's peak grew by 594 MiB for this file); now the upload is read in
    seconds, the job has the two words' segments, and the replica's peak memory from the upload
    to the end of the job barely exceeds its size before."""
    (replica,) = replica_processes()
    before = _peak_rss(replica.pid, reset=True)
    data = b"a" + b"\n" * 3_000_000 + b"b"
    start = time.monotonic()
    r = httpx.post(
        f"{served_docs}/documents",
        files={"file": ("lines.txt", data, "text/plain")},
        data={"target_lang": "de", "source_lang": "en"},
        timeout=60,
    )
    assert r.status_code == 201, r.text
    assert time.monotonic() - start < 10
    assert r.json()["segments_total"] == 2
    assert _wait_done(served_docs, r.json()["id"])["status"] == "done"
    grown = _peak_rss(replica.pid) - before
    assert grown < 200 * 2**20, f"the replica's peak memory grew by {grown / 2**20:.0f} MiB"


def test_damaged_and_crafted_packages_get_their_4xx_in_each_apis_shape(served_docs: str) -> None:
    """A package whose deflated part is corrupted (a broken download: zlib's error was a
    500), a part in UTF-32 (read by python-docx's lxml, uncounted by the expat check) and a
    30 MB comment in a sheet (expat parsed it again at every chunk: minutes of the reading
    thread for a 30 KB upload): a 400, 400 and 413 on each upload route, at once."""
    xml = zipfile.ZipFile(io.BytesIO(SAMPLES["docx"]())).read(MAIN["docx"])
    body = xml.split(b"?>", 1)[-1]
    utf32 = ('<?xml version="1.0" encoding="utf-32"?>' + body.decode()).encode("utf-32")
    cases = (
        ("broken.docx", damaged(SAMPLES["docx"](), MAIN["docx"]), 400),
        ("wide.docx", replaced(SAMPLES["docx"](), {MAIN["docx"]: utf32}), 400),
        ("long.xlsx", sheet(f'<row r="1">{HI.format(ref="A1", text="hi")}</row>',
                            "<!--" + "x" * 30_000_000 + "-->"), 413),
    )  # fmt: skip
    deepl_auth = {"Authorization": "DeepL-Auth-Key any-key"}
    for name, data, status in cases:
        files = {"file": (name, data)}
        started = time.monotonic()
        r = httpx.post(f"{served_docs}/documents", files=files, data={"target_lang": "de"},
                       timeout=120)  # fmt: skip
        assert r.status_code == status, r.text
        assert set(r.json()["error"]) == {"code", "message"}
        r = httpx.post(f"{served_docs}/v2/document", files=files, data={"target_lang": "DE"},
                       headers=deepl_auth, timeout=120)  # fmt: skip
        assert r.status_code == status, r.text
        assert isinstance(r.json()["message"], str)
        r = httpx.post(f"{served_docs}/libretranslate/translate_file", files=files,
                       data={"source": "en", "target": "de"}, timeout=120)  # fmt: skip
        assert r.status_code == status, r.text
        assert isinstance(r.json()["error"], str)
        assert time.monotonic() - started < 30, name


def test_a_subrip_line_of_digits_is_a_fast_400_and_the_replica_reads_on(served_docs: str) -> None:
    """A 10 KB .srt of one line of 10,000 digits: srt.parse's search for a cue tried its
    index pattern every way at every position (cubic: hours of the replica's one reading
    thread, holding the GIL). Now a 400 at once on each route, and the next upload is read."""
    data = b"1\n" + b"0" * 10_000 + b"\n"
    files = {"file": ("digits.srt", data)}
    started = time.monotonic()
    r = httpx.post(f"{served_docs}/documents", files=files, data={"target_lang": "de"},
                   timeout=120)  # fmt: skip
    assert r.status_code == 400, r.text
    assert "digits" in r.json()["error"]["message"]
    r = httpx.post(f"{served_docs}/v2/document", files=files, data={"target_lang": "DE"},
                   headers={"Authorization": "DeepL-Auth-Key any-key"}, timeout=120)  # fmt: skip
    assert r.status_code == 400, r.text
    assert "digits" in r.json()["message"]
    r = httpx.post(f"{served_docs}/libretranslate/translate_file", files=files,
                   data={"source": "en", "target": "de"}, timeout=120)  # fmt: skip
    assert r.status_code == 400, r.text
    assert "digits" in r.json()["error"]
    assert time.monotonic() - started < 20
    good = {"file": ("ok.srt", SAMPLES["srt"]())}
    r = httpx.post(f"{served_docs}/documents", files=good, data={"target_lang": "de"}, timeout=60)
    assert r.status_code == 201, r.text
    assert _wait_done(served_docs, r.json()["id"])["status"] == "done"


def test_a_page_of_unclosed_paragraphs_is_translated_to_its_end(served_docs: str) -> None:
    """150 ``<p>`` without ``</p>`` (valid HTML): the reader nested each in the one before,
    and past depth 100 the rest of the page was copied untranslated (100 segments)."""
    page = "<html><body>" + "".join(f"<p>Paragraph {i}." for i in range(150)) + "</body></html>"
    files = {"file": ("old.html", page.encode())}
    r = httpx.post(f"{served_docs}/documents", files=files, data={"target_lang": "de"}, timeout=60)
    assert r.status_code == 201, r.text
    assert r.json()["segments_total"] == 150
    assert _wait_done(served_docs, r.json()["id"])["status"] == "done"
