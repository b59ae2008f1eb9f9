"""The document routes over the fake engine and a real SQLite store: native /documents,
DeepL's /v2/document flow, LibreTranslate's /translate_file; shapes, statuses, errors."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest

from serve_app.api.app import create_app
from serve_app.api.documents import file_response
from serve_app.core.config import AppConfig
from serve_app.core.documents_config import DocumentsConfig
from serve_app.documents.replica import ReplicaDocuments
from serve_app.store import DocumentJob
from serve_app.store.sqlite import open_sqlite
from serve_app.translation.service import TranslationService
from tests.docsamples import CHECKS, SAMPLES
from tests.fakes import FakeEngine

AUTH = {"Authorization": "DeepL-Auth-Key test-key"}
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def anything(a: str, b: str) -> bool:
    return bool(b.strip())


@dataclass
class Setup:
    client: httpx.AsyncClient
    documents: ReplicaDocuments


async def make(  # type: ignore[no-untyped-def]
    tmp_path, keys_env: str | None = None, limits: dict | None = None, **documents_args
) -> AsyncIterator[Setup]:
    """The app over the fake engine; with ``keys_env``, keys are required (from that
    environment variable) and checked by the store's key middleware, as in production;
    ``limits``: the service's (``AppConfig.limits``)."""
    engine = FakeEngine()
    engine.reply = lambda prompt: prompt.rsplit("\n\n", 1)[-1].upper()
    security = {"api_keys_env": keys_env} if keys_env else {}
    config = AppConfig.model_validate(
        {"prompt": {"family": "chat"}, "security": security, "limits": limits or {}}
    )
    service = TranslationService(config, engine)
    await service.start()
    store = await open_sqlite(str(tmp_path / "store.db"))
    args = {"poll_interval_s": 0.01, "worker_concurrency": 4, **documents_args}
    documents = ReplicaDocuments(service, store, DocumentsConfig(**args), "replica-1")
    app = create_app(service, store=store if keys_env else None, documents=documents)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        yield Setup(client, documents)
    await documents.stop()
    await store.close()


@pytest.fixture
async def setup(tmp_path) -> AsyncIterator[Setup]:  # type: ignore[no-untyped-def]
    async for s in make(tmp_path):
        yield s


async def drain(documents: ReplicaDocuments) -> None:
    """Runs the replica's document worker until no segment is left."""
    for _ in range(2000):
        claimed = await documents.worker.step()
        running = list(documents.worker.running)
        if running:
            await asyncio.gather(*running)
        elif not claimed:
            return


async def finish(setup: Setup) -> None:
    await drain(setup.documents)


# -- native ------------------------------------------------------------------------------


async def test_native_upload_status_download_delete(setup: Setup) -> None:
    data = SAMPLES["docx"]()
    files = {"file": ("report.docx", data, DOCX)}
    r = await setup.client.post("/documents", files=files, data={"target_lang": "de"})
    assert r.status_code == 201, r.text
    created = r.json()
    assert created["status"] == "queued"
    assert created["document_key"]
    assert created["format"] == "docx"
    assert created["source_lang"] == "en"  # detected from the text
    doc = created["id"]
    assert (await setup.client.get(f"/documents/{doc}/result")).status_code == 409
    await finish(setup)
    status = (await setup.client.get(f"/documents/{doc}")).json()
    assert status["status"] == "done"
    assert status["progress"] == 1.0
    assert status["segments_done"] == status["segments_total"] > 0
    r = await setup.client.get(f"/documents/{doc}/result")
    assert r.status_code == 200
    assert r.headers["content-type"] == DOCX
    assert 'filename="report.docx"' in r.headers["content-disposition"]
    CHECKS["docx"](data, r.content, anything)
    assert [d["id"] for d in (await setup.client.get("/documents")).json()] == [doc]
    assert (await setup.client.delete(f"/documents/{doc}")).status_code == 204
    r = await setup.client.get(f"/documents/{doc}")
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "document_not_found"


@pytest.mark.parametrize(
    ("files", "form", "status", "code", "words"),
    [
        ({"file": ("a.docx", b"not a zip", DOCX)}, {"target_lang": "de"}, 400,
         "malformed_document", "not a valid docx"),
        ({"file": ("a.exe", b"MZ", "application/x")}, {"target_lang": "de"}, 400,
         "unsupported_document_format", "supported: "),
        ({"file": ("a.txt", b"hello", "text/plain")}, {}, 422, "invalid_request", "target_lang"),
        (None, {"target_lang": "de"}, 422, "invalid_request", "'file' field"),
        ({"file": ("a.txt", b"hello", "text/plain")}, {"target_lang": "xx-nope"}, 400,
         None, "xx-nope"),
        ({"file": ("a.srt", b"\xff\xfe\x00garbage", "text/plain")}, {"target_lang": "de"}, 400,
         "malformed_document", ""),
    ],
)  # fmt: skip
async def test_native_bad_uploads_say_what_is_wrong(
    setup: Setup, files, form, status: int, code: str | None, words: str
) -> None:  # type: ignore[no-untyped-def]
    r = await setup.client.post("/documents", files=files, data=form)
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert code is None or error["code"] == code
    assert words in error["message"]


async def test_uploads_beyond_the_body_limit_are_accepted_up_to_the_document_limit(
    tmp_path,
) -> None:  # type: ignore[no-untyped-def]
    async for setup in make(tmp_path, max_bytes=3 * 1024 * 1024, max_chars=10_000_000):
        big = ("word " * 100 + "\n\n").encode() * 3000  # 1.5 MB: over the 1 MiB body limit
        files = {"file": ("big.txt", big, "text/plain")}
        r = await setup.client.post("/documents", files=files, data={"target_lang": "de"})
        assert r.status_code == 201, r.text
        files = {"file": ("big.txt", big * 3, "text/plain")}
        r = await setup.client.post("/documents", files=files, data={"target_lang": "de"})
        assert r.status_code == 413
        # The larger limit is the upload routes' only.
        r = await setup.client.post("/translate", content=big, headers={"content-type": "x"})
        assert r.status_code == 413


async def test_uploads_beyond_the_reading_queue_get_a_fast_503_in_each_apis_shape(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """One upload is read at a time per replica, one more waits; the next is refused at
    once with Retry-After (a file can take a core for a minute to read), in each API's
    error shape, and the waiting one is then read and accepted."""
    from serve_app.documents import jobs

    reading, release = threading.Event(), threading.Event()
    read = jobs._read

    def slow_read(*args):  # type: ignore[no-untyped-def]
        reading.set()
        release.wait(10)
        return read(*args)

    monkeypatch.setattr(jobs, "_read", slow_read)
    async for setup in make(tmp_path, keys_env=None, reading_threads=1, reading_queue=1):
        files = {"file": ("a.txt", b"Hello there.", "text/plain")}
        form = {"target_lang": "de"}
        first = asyncio.create_task(setup.client.post("/documents", files=files, data=form))
        second = asyncio.create_task(setup.client.post("/documents", files=files, data=form))
        for _ in range(500):
            if reading.is_set() and setup.documents.jobs.reading.waiting == 1:
                break
            await asyncio.sleep(0.01)
        r = await setup.client.post("/documents", files=files, data=form)
        assert r.status_code == 503, r.text
        assert r.headers["retry-after"] == "5"
        assert r.json()["error"]["code"] == "overloaded"
        r = await setup.client.post("/v2/document", files=files, data=form, headers=AUTH)
        assert r.status_code == 503
        assert "retry" in r.json()["message"]
        libre = {"source": "en", "target": "de"}
        r = await setup.client.post("/libretranslate/translate_file", files=files, data=libre)
        assert r.status_code == 503
        assert "retry" in r.json()["error"]
        release.set()
        assert [(await t).status_code for t in (first, second)] == [201, 201]


# -- DeepL -------------------------------------------------------------------------------


async def test_deepl_document_flow(setup: Setup) -> None:
    data = SAMPLES["srt"]()
    files = {"file": ("subs.srt", data, "application/x-subrip")}
    form = {"target_lang": "DE", "source_lang": "EN", "formality": "prefer_more"}
    r = await setup.client.post("/v2/document", files=files, data=form, headers=AUTH)
    assert r.status_code == 200, r.text
    handle = r.json()
    assert set(handle) == {"document_id", "document_key"}
    url = f"/v2/document/{handle['document_id']}"
    key = {"document_key": handle["document_key"]}
    r = await setup.client.post(url, json=key, headers=AUTH)
    assert r.json() == {"document_id": handle["document_id"], "status": "queued"}
    r = await setup.client.post(url + "/result", json=key, headers=AUTH)
    assert r.status_code == 503  # the deepl clients' DocumentNotReadyException
    assert "message" in r.json()
    await finish(setup)
    r = await setup.client.post(url, json=key, headers=AUTH)
    assert r.json()["status"] == "done"
    assert r.json()["billed_characters"] > 0
    r = await setup.client.post(url + "/result", json=key, headers=AUTH)
    assert r.status_code == 200
    CHECKS["srt"](data, r.content, anything)


async def test_deepl_download_before_the_document_is_done_says_when_to_retry(
    setup: Setup,
) -> None:
    """DeepL's answer to a download before the translation is done is a 503 (its clients'
    DocumentNotReadyException), reshaped from our 409 by DeepL's error format after the
    Retry-After every 503 gets was decided: it went without one (found by fuzzing the
    routes with a real document's id)."""
    files = {"file": ("a.txt", b"Hello world.", "text/plain")}
    r = await setup.client.post("/v2/document", files=files, data={"target_lang": "DE"},
                                headers=AUTH)  # fmt: skip
    handle = r.json()
    key = {"document_key": handle["document_key"]}
    url = f"/v2/document/{handle['document_id']}/result"
    for answer in [
        await setup.client.post(url, json=key, headers=AUTH),
        await setup.client.get(url, params=key, headers=AUTH),
    ]:
        assert answer.status_code == 503, answer.text
        assert answer.headers["retry-after"] == "1"
        assert set(answer.json()) == {"message"}


async def test_a_failed_jobs_download_says_it_failed_not_to_retry(setup: Setup) -> None:
    """A job that failed will never be ready: its download is a 409 ``document_failed``
    with the reason, in each API's shape, and no Retry-After. Before, it was the
    not-ready answer: DeepL's 503 + Retry-After 1, which a client polling the result
    retried for ever."""
    files = {"file": ("a.txt", b"Hello world.", "text/plain")}
    r = await setup.client.post("/v2/document", files=files, data={"target_lang": "DE"},
                                headers=AUTH)  # fmt: skip
    handle = r.json()
    await setup.documents.jobs.store.fail_document(handle["document_id"], "the model broke")
    key = {"document_key": handle["document_key"]}
    deepl = await setup.client.post(
        f"/v2/document/{handle['document_id']}/result", json=key, headers=AUTH
    )
    assert deepl.status_code == 409, deepl.text
    assert "retry-after" not in deepl.headers
    assert set(deepl.json()) == {"message"}
    assert "the model broke" in deepl.json()["message"]
    r = await setup.client.post(
        "/documents", files={"file": ("b.txt", b"Hello.", "text/plain")},
        data={"target_lang": "de"},
    )  # fmt: skip
    job_id = r.json()["id"]
    await setup.documents.jobs.store.fail_document(job_id, "the model broke")
    native = await setup.client.get(f"/documents/{job_id}/result")
    assert native.status_code == 409, native.text
    assert "retry-after" not in native.headers
    assert native.json()["error"]["code"] == "document_failed"


async def test_deepl_document_needs_auth_and_the_right_key(setup: Setup) -> None:
    files = {"file": ("a.txt", b"hello", "text/plain")}
    r = await setup.client.post("/v2/document", files=files, data={"target_lang": "DE"})
    assert r.status_code == 403
    r = await setup.client.post(
        "/v2/document", files=files, data={"target_lang": "DE"}, headers=AUTH
    )
    url = f"/v2/document/{r.json()['document_id']}"
    r = await setup.client.post(url, json={"document_key": "wrong"}, headers=AUTH)
    assert r.status_code == 404
    assert "message" in r.json()
    r = await setup.client.post(url, json={}, headers=AUTH)
    assert r.status_code == 400
    assert "document_key" in r.json()["message"]


async def test_deepl_malformed_document_is_a_400_in_deepls_shape(setup: Setup) -> None:
    files = {"file": ("a.xlsx", b"PK\x03\x04broken", "application/octet-stream")}
    r = await setup.client.post(
        "/v2/document", files=files, data={"target_lang": "DE"}, headers=AUTH
    )
    assert r.status_code == 400
    assert "xlsx" in r.json()["message"]


# -- LibreTranslate ----------------------------------------------------------------------


async def test_libre_translate_file_answers_a_download_url(setup: Setup) -> None:
    setup.documents.start()
    data = SAMPLES["md"]()
    files = {"file": ("notes.md", data, "text/markdown")}
    r = await setup.client.post(
        "/libretranslate/translate_file", files=files, data={"source": "en", "target": "de"}
    )
    assert r.status_code == 200, r.text
    url = r.json()["translatedFileUrl"]
    assert url.startswith("http://t/libretranslate/download_file/")
    assert url.endswith(".notes.md")
    r = await setup.client.get(url)
    assert r.status_code == 200
    assert 'filename="notes.md"' in r.headers["content-disposition"]
    CHECKS["md"](data, r.content, anything)


async def test_libre_translate_file_past_its_wait_leaves_no_job_behind(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``/translate_file`` gives the job's id only in its answer: a 504 (the wait passed)
    or a client gone while it waits left a job nobody could fetch, translated for nothing
    and counted against the key's documents until it expired; each retry stacked another.
    Both now delete it. (Checked after each setup's teardown has run: ``make`` closes its
    store only when its loop ends.)"""
    files = {"file": ("notes.txt", b"Hello world.", "text/plain")}
    form = {"source": "en", "target": "de"}
    async for s in make(tmp_path, wait_timeout_s=0.05):  # no worker runs: never done
        timed_out = await s.client.post("/libretranslate/translate_file", files=files, data=form)
        left_by_504 = await s.documents.jobs.store.list_documents("")
    assert timed_out.status_code == 504, timed_out.text
    assert set(timed_out.json()) == {"error"}
    assert left_by_504 == []
    async for s in make(tmp_path / "gone", wait_timeout_s=300):
        store = s.documents.jobs.store
        post = s.client.post("/libretranslate/translate_file", files=files, data=form)
        request = asyncio.create_task(post)
        while not await store.list_documents(""):  # until the job is stored and waited for
            await asyncio.sleep(0.01)
        request.cancel()  # the client leaves
        outcome = (await asyncio.gather(request, return_exceptions=True))[0]
        left_by_leaving = await store.list_documents("")
    assert isinstance(outcome, asyncio.CancelledError)
    assert left_by_leaving == []


async def test_libre_translate_file_errors_in_libres_shape(setup: Setup) -> None:
    files = {"file": ("a.pdf", b"%PDF", "application/pdf")}
    r = await setup.client.post(
        "/libretranslate/translate_file", files=files, data={"source": "en", "target": "de"}
    )
    assert r.status_code == 400
    assert "supported" in r.json()["error"]
    r = await setup.client.get("/libretranslate/download_file/nope.a.txt")
    assert r.status_code == 404
    assert "error" in r.json()


async def test_libre_translate_file_over_1_mib_with_the_key_in_the_form(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """LibreTranslate's clients send ``api_key`` in the multipart form: the key middleware
    reads the form within the documents' limit (not the 1 MiB of the JSON routes), so a
    1.5 MB file with its key in the form is translated; beyond the documents' limit, 413."""
    monkeypatch.setenv("E2E_LIBRE_KEYS", "libre-secret")
    async for setup in make(
        tmp_path, keys_env="E2E_LIBRE_KEYS", max_bytes=3 * 1024 * 1024, max_chars=10_000_000
    ):
        setup.documents.start()
        # 1.5 MB (over the 1 MiB body limit), mostly a code block: two segments.
        big = b"# Notes\n\nSome text.\n\n```\n" + b"x = 1\n" * 250_000 + b"```\n"
        url = "/libretranslate/translate_file"
        form = {"source": "en", "target": "de", "api_key": "libre-secret"}
        r = await setup.client.post(url, files={"file": ("big.md", big)}, data=form)
        assert r.status_code == 200, r.text
        r = await setup.client.get(r.json()["translatedFileUrl"])
        assert r.status_code == 200
        assert r.content.startswith(b"# NOTES\n\nSOME TEXT.\n\n```\nx = 1\n")
        assert len(r.content) == len(big)
        # A wrong key in the form is refused as a key, not as a size.
        bad = {**form, "api_key": "wrong"}
        r = await setup.client.post(url, files={"file": ("big.md", big)}, data=bad)
        assert r.status_code in (401, 403), r.text
        # Beyond the documents' limit: 413 in LibreTranslate's shape.
        r = await setup.client.post(url, files={"file": ("big.md", big * 3)}, data=form)
        assert r.status_code == 413
        assert "error" in r.json()


@pytest.mark.parametrize("name", ["../../etc/notes.md", "dir/sub/notes.md", "a b/notes.md"])
async def test_a_file_name_with_folders_is_served_under_its_own_name(
    setup: Setup, name: str
) -> None:
    """Folders in an uploaded file's name are dropped: the download URL LibreTranslate's
    route answers works (a '/' in it led nowhere) and the download is offered as the file's
    own name."""
    setup.documents.start()
    files = {"file": (name, SAMPLES["md"](), "text/markdown")}
    r = await setup.client.post(
        "/libretranslate/translate_file", files=files, data={"source": "en", "target": "de"}
    )
    assert r.status_code == 200, r.text
    url = r.json()["translatedFileUrl"]
    assert url.endswith(".notes.md")
    r = await setup.client.get(url)
    assert r.status_code == 200, r.text
    assert 'filename="notes.md"' in r.headers["content-disposition"]


SPOOFED = "invoice\u202efdp.md"  # a browser shows it as "invoicedm.pdf"


@pytest.mark.parametrize("route", ["native", "deepl", "libre"])
async def test_format_characters_are_dropped_from_the_name_a_file_is_offered_under(
    setup: Setup, route: str
) -> None:
    """A bidi override (RLO) in an uploaded name was kept in the translated file's
    ``Content-Disposition``, so a download bar showed another extension than the file's.
    Format characters (Cf) are dropped from the name at upload; ZWNJ and ZWJ are kept."""
    setup.documents.start()
    name = "\u2066" + SPOOFED + "\u200b\ufeff"
    files = {"file": (name, SAMPLES["md"](), "text/markdown")}
    if route == "libre":
        form = {"source": "en", "target": "de"}
        r = await setup.client.post("/libretranslate/translate_file", files=files, data=form)
        assert r.status_code == 200, r.text
        url = r.json()["translatedFileUrl"]
        assert url.endswith(".invoicefdp.md")
    elif route == "deepl":
        form = {"target_lang": "DE", "filename": name}
        r = await setup.client.post("/v2/document", files=files, data=form, headers=AUTH)
        assert r.status_code == 200, r.text
        doc, key = r.json()["document_id"], r.json()["document_key"]
        await finish(setup)
        url = f"/v2/document/{doc}/result"
    else:
        r = await setup.client.post("/documents", files=files, data={"target_lang": "de"})
        assert r.status_code == 201, r.text
        assert r.json()["name"] == "invoicefdp.md"
        await finish(setup)
        url = f"/documents/{r.json()['id']}/result"
    if route == "deepl":
        r = await setup.client.post(url, data={"document_key": key}, headers=AUTH)
    else:
        r = await setup.client.get(url)
    assert r.status_code == 200, r.text
    disposition = r.headers["content-disposition"]
    assert disposition == ("attachment; filename=\"invoicefdp.md\"; filename*=UTF-8''invoicefdp.md")


def test_a_job_stored_with_a_spoofing_name_is_offered_without_it() -> None:
    """Jobs stored before the names were cleaned at upload are cleaned when served (RFC
    5987's ``filename*`` keeps the rest of the name, Persian's ZWNJ included)."""
    job = DocumentJob(
        "id", "owner", "\u0645\u06cc\u200c" + SPOOFED, "markdown", "en", "de", {}, "done",
        1, 1, 1, 1, 1, 0.0, None, 0.0, 0.0,
    )  # fmt: skip
    disposition = file_response(job, b"x").headers["content-disposition"]
    assert "%E2%80%AE" not in disposition
    assert disposition.endswith("filename*=UTF-8''%D9%85%DB%8C%E2%80%8Cinvoicefdp.md")
    assert 'filename="??' in disposition


async def test_a_segment_of_invisible_characters_is_kept_not_translated(setup: Setup) -> None:
    """A cue of a zero-width space is a blank text to the translate routes (a 422): the
    worker gives such a segment back as it is rather than failing its job."""
    srt = "1\n00:00:01,000 --> 00:00:02,000\n\u200b\u200d\n\n2\n00:00:03,000 --> 00:00:04,000\nHi\n"
    files = {"file": ("a.srt", srt.encode())}
    r = await setup.client.post("/documents", files=files, data={"target_lang": "de"})
    assert r.status_code == 201, r.text
    doc = r.json()["id"]
    await finish(setup)
    assert (await setup.client.get(f"/documents/{doc}")).json()["status"] == "done"
    r = await setup.client.get(f"/documents/{doc}/result")
    assert "\n\u200b\u200d\n" in r.text
    assert "\nHI\n" in r.text
