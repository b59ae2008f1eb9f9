"""Document jobs on a real (SQLite) store: upload -> workers -> status -> download, leases
taken over from a dead worker, live traffic first, assembly that no crash can lose."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from serve_app.core.config import LimitsConfig
from serve_app.core.documents_config import DocumentsConfig
from serve_app.core.errors import (
    DocumentFailed,
    DocumentNotFound,
    DocumentNotReady,
    GlossaryTooLarge,
    MalformedDocument,
    Overloaded,
    StoreUnavailable,
    UnsupportedLanguage,
)
from serve_app.documents import FORMATS, DocumentLimits, extract
from serve_app.documents import worker as worker_module
from serve_app.documents.jobs import DocumentJobs, Upload, flag_at, pack_flags, seconds_remaining
from serve_app.documents.worker import DocumentWorker
from serve_app.store import DocumentJob, SegmentClaim, Store
from serve_app.store.sqlite import open_sqlite
from tests.docsamples import CHECKS, SAMPLES
from tests.unit.documents.test_formats import as_service, shout, upper

CONFIG = DocumentsConfig(worker_concurrency=3, idle_in_flight=4, lease_s=30, poll_interval_s=0.01)
MAX_REQUESTS = LimitsConfig().max_engine_requests


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def store(tmp_path, clock: Clock) -> AsyncIterator[Store]:  # type: ignore[no-untyped-def]
    opened = await open_sqlite(str(tmp_path / "store.db"), clock=clock)
    yield opened
    await opened.close()


class Translator:
    """The fake replica: upper case; ``live`` is its live engine requests in flight."""

    def __init__(self) -> None:
        self.live = 0
        self.seen: list[tuple[str, str]] = []
        self.fail: Exception | None = None
        self.fail_times = 0

    async def __call__(self, claim: SegmentClaim, text: str, context: str) -> str:
        self.seen.append((text, context))
        if self.fail is not None and self.fail_times > 0:
            self.fail_times -= 1
            raise self.fail
        await asyncio.sleep(0)
        if markup := claim.options.get("markup"):  # the service's markup flow
            return str(await as_service(markup, fake)(text, context))
        return shout(text)


async def fake(text: str, context: str) -> str:
    return shout(text)


def worker(jobs: DocumentJobs, translator: Translator, name: str = "w1") -> DocumentWorker:
    return DocumentWorker(jobs, CONFIG, translator, lambda: translator.live, name)


async def drain(w: DocumentWorker) -> None:
    """Runs the worker's steps until nothing is left to claim or running."""
    for _ in range(1000):
        claimed = await w.step()
        if w.running:
            await asyncio.gather(*list(w.running))
        elif not claimed:
            return
    raise AssertionError("the worker never ran out of work")


@pytest.mark.parametrize("name", sorted(SAMPLES))
async def test_every_format_goes_upload_to_download(store: Store, name: str) -> None:
    jobs, translator = DocumentJobs(store, CONFIG, MAX_REQUESTS), Translator()
    data = SAMPLES[name]()
    submitted = await jobs.submit("alice", Upload(f"sample.{name}", data, "de", "en"))
    assert submitted.job.state == "queued"
    await drain(worker(jobs, translator))
    job, out = await jobs.result("alice", submitted.job.id)
    assert job.state == "done"
    assert job.segments_done == job.segments_total
    CHECKS[name](data, out, upper)


async def test_tagged_segments_reach_the_translator_with_their_tags(store: Store) -> None:
    jobs, translator = DocumentJobs(store, CONFIG, MAX_REQUESTS), Translator()
    await jobs.submit("alice", Upload("a.docx", SAMPLES["docx"](), "de"))
    await drain(worker(jobs, translator))
    assert any(text.startswith("<g1>Plain start, </g1>") for text, _ in translator.seen)


async def test_live_traffic_first_no_claims_while_the_replica_is_busy(store: Store) -> None:
    jobs, translator = DocumentJobs(store, CONFIG, MAX_REQUESTS), Translator()
    submitted = await jobs.submit("alice", Upload("a.txt", SAMPLES["txt"](), "de"))
    translator.live = CONFIG.idle_in_flight
    w = worker(jobs, translator)
    assert await w.step() == 0
    assert (await jobs.status("alice", submitted.job.id)).state == "queued"
    translator.live = CONFIG.idle_in_flight - 1
    assert await w.step() > 0


async def test_concurrency_is_bounded(store: Store) -> None:
    jobs, translator = DocumentJobs(store, CONFIG, MAX_REQUESTS), Translator()
    text = "\n\n".join(f"paragraph {i}" for i in range(10)).encode()
    await jobs.submit("alice", Upload("a.txt", text, "de"))
    w = worker(jobs, translator)
    assert await w.step() == CONFIG.worker_concurrency
    assert await w.step() == 0  # no room until those finish
    await asyncio.gather(*list(w.running))


async def test_a_dead_workers_segments_are_claimed_again_after_the_lease(
    store: Store, clock: Clock
) -> None:
    jobs, translator = DocumentJobs(store, CONFIG, MAX_REQUESTS), Translator()
    submitted = await jobs.submit("alice", Upload("a.srt", SAMPLES["srt"](), "de"))
    dead = await store.claim_segments("dead-worker", 10, CONFIG.lease_s)
    assert len(dead) == 3
    survivor = worker(jobs, translator, "w2")
    assert await survivor.step() == 0  # still leased
    clock.now += CONFIG.lease_s + 1
    await drain(survivor)
    job, out = await jobs.result("alice", submitted.job.id)
    assert job.state == "done"
    CHECKS["srt"](SAMPLES["srt"](), out, upper)


async def test_a_job_whose_assembler_died_is_assembled_by_the_next_status(
    store: Store,
) -> None:
    jobs = DocumentJobs(store, CONFIG, MAX_REQUESTS)
    submitted = await jobs.submit("alice", Upload("a.txt", b"one\n\ntwo", "de"))
    for claim in await store.claim_segments("w", 10, 30):
        await store.complete_segment(claim.job_id, claim.index, "w", claim.text.upper())
    assert (await store.get_document("alice", submitted.job.id)).state == "translated"
    job = await jobs.status("alice", submitted.job.id)
    assert job.state == "done"
    assert (await jobs.result("alice", submitted.job.id))[1] == b"ONE\n\nTWO"


async def test_the_document_key_is_checked(store: Store) -> None:
    jobs, translator = DocumentJobs(store, CONFIG, MAX_REQUESTS), Translator()
    submitted = await jobs.submit("alice", Upload("a.txt", b"hello", "de"))
    assert (await jobs.status("alice", submitted.job.id, submitted.key)).id == submitted.job.id
    with pytest.raises(DocumentNotFound):
        await jobs.status("alice", submitted.job.id, "wrong key")
    with pytest.raises(DocumentNotFound):
        await jobs.status("mallory", submitted.job.id, submitted.key)
    with pytest.raises(DocumentNotReady):
        await jobs.result("alice", submitted.job.id, submitted.key)
    await drain(worker(jobs, translator))
    assert (await jobs.result("alice", submitted.job.id, submitted.key))[1] == b"HELLO"


async def test_a_segment_the_model_cannot_translate_fails_the_job_with_the_reason(
    store: Store,
) -> None:
    jobs, translator = DocumentJobs(store, CONFIG, MAX_REQUESTS), Translator()
    submitted = await jobs.submit("alice", Upload("a.txt", b"hello", "xx"))
    translator.fail, translator.fail_times = UnsupportedLanguage("Language 'xx' is not offered."), 9
    await drain(worker(jobs, translator))
    job = await jobs.status("alice", submitted.job.id)
    assert job.state == "error"
    assert "'xx' is not offered" in (job.error or "")
    with pytest.raises(DocumentFailed, match="not offered"):
        await jobs.result("alice", submitted.job.id)


async def test_a_full_replica_is_waited_out_not_failed(store: Store) -> None:
    jobs, translator = DocumentJobs(store, CONFIG, MAX_REQUESTS), Translator()
    submitted = await jobs.submit("alice", Upload("a.txt", b"hello", "de"))
    translator.fail, translator.fail_times = Overloaded("full", retry_after_s=1), 2
    await drain(worker(jobs, translator))
    job = await jobs.status("alice", submitted.job.id)
    assert job.state == "done"
    assert len(translator.seen) == 3


async def test_a_result_meeting_the_store_away_is_stored_again_within_the_lease(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store's deployment restarting as a segment is completed: the worker stores its
    translation again (not thrown away to be redone after the lease expires)."""
    monkeypatch.setattr(worker_module, "_STORE_RETRY_S", 0.01)
    jobs, translator = DocumentJobs(store, CONFIG, MAX_REQUESTS), Translator()
    submitted = await jobs.submit("alice", Upload("a.txt", b"One.", "de"))
    complete, outages = store.complete_segment, [StoreUnavailable("restarting")] * 2

    async def flaky(*args: object) -> DocumentJob:
        if outages:
            raise outages.pop()
        return await complete(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(store, "complete_segment", flaky)
    await drain(worker(jobs, translator))
    assert not outages
    job = await jobs.status("alice", submitted.job.id)
    assert job.state == "done"
    assert len(translator.seen) == 1  # translated once


async def test_malformed_uploads_are_refused_before_anything_is_stored(store: Store) -> None:
    jobs = DocumentJobs(store, CONFIG, MAX_REQUESTS)
    with pytest.raises(MalformedDocument):
        await jobs.submit("alice", Upload("a.docx", b"not a zip", "de"))
    assert await store.list_documents("alice") == []


async def test_a_job_keeps_the_glossary_terms_its_document_holds(store: Store) -> None:
    jobs = DocumentJobs(store, CONFIG, MAX_REQUESTS)
    entries = (("Cart", "Warenkorb"), ("wishlist", "Wunschzettel"))
    up = Upload("a.txt", b"my cart\n\nsomething", "de", "en", glossary_id="g1", glossary=entries)
    job = (await jobs.submit("alice", up)).job
    assert job.options["glossary_id"] == "g1"
    assert job.options["glossary"] == [["Cart", "Warenkorb"]]  # case-insensitive, used only
    plain = (await jobs.submit("alice", Upload("b.txt", b"my cart", "de", "en"))).job
    assert "glossary" not in plain.options


async def test_a_glossary_snapshot_beyond_its_share_of_the_options_is_a_413(
    store: Store,
) -> None:
    jobs = DocumentJobs(store, CONFIG, MAX_REQUESTS)
    entries = tuple((f"term{i:04d}" + "x" * 60, "y" * 60) for i in range(400))
    text = "\n\n".join(s for s, _ in entries).encode()
    up = Upload("a.txt", text, "de", "en", glossary_id="g1", glossary=entries)
    with pytest.raises(GlossaryTooLarge, match="split the document"):
        await jobs.submit("alice", up)
    assert await store.list_documents("alice") == []


async def test_seconds_remaining_is_estimated_from_progress(store: Store, clock: Clock) -> None:
    jobs = DocumentJobs(store, CONFIG, MAX_REQUESTS)
    submitted = await jobs.submit("alice", Upload("a.txt", b"aaaa\n\nbbbb", "de"))
    assert seconds_remaining(submitted.job) is None
    claim = (await store.claim_segments("w", 1, 30))[0]
    clock.now += 10
    job = await store.complete_segment(claim.job_id, claim.index, "w", "AAAA")
    assert seconds_remaining(job, clock.now) == 10


def test_segment_flags_pack_small() -> None:
    flags = [i % 7 == 0 for i in range(50_000)]
    packed = pack_flags(flags)
    assert len(packed) < 4000
    assert [flag_at(packed, i) for i in range(0, 50_000, 1000)] == flags[::1000]
    assert not flag_at("", 3)


def test_extracting_samples_needs_no_store() -> None:
    assert extract(FORMATS["txt"], SAMPLES["txt"](), DocumentLimits())


async def test_an_unexpected_failure_is_not_shown_to_the_client(store: Store) -> None:
    """The job's error (DeepL's ``error_message``) says an internal error happened and which
    document to quote; the exception's text stays in the log (it was ``Segment 0:
    ValueError('...')``)."""
    jobs, translator = DocumentJobs(store, CONFIG, MAX_REQUESTS), Translator()
    submitted = await jobs.submit("alice", Upload("a.txt", b"hello", "de"))
    translator.fail, translator.fail_times = ValueError("secret at /srv/model"), 99
    await drain(worker(jobs, translator))
    job = await jobs.status("alice", submitted.job.id)
    assert job.state == "error"
    assert "secret" not in (job.error or "")
    assert "ValueError" not in (job.error or "")
    assert f"internal error; quote document {submitted.job.id}" in (job.error or "")


@pytest.mark.parametrize("segments", [1, 2], ids=["last-segment", "not-the-last"])
async def test_a_job_deleted_while_its_segments_are_translated_ends_them_quietly(
    store: Store, segments: int
) -> None:
    """A client's DELETE during the translation: the worker's segments in flight end
    without an error (before: their tasks raised DocumentNotFound, logged as never
    retrieved), and the worker goes on to the next job."""
    jobs, started, release = (
        DocumentJobs(store, CONFIG, MAX_REQUESTS),
        asyncio.Event(),
        asyncio.Event(),
    )

    class Held(Translator):
        async def __call__(self, claim: SegmentClaim, text: str, context: str) -> str:
            started.set()
            await release.wait()
            return await super().__call__(claim, text, context)

    text = "\n\n".join(f"paragraph {i}" for i in range(segments)).encode()
    doomed = await jobs.submit("alice", Upload("a.txt", text, "de"))
    w = worker(jobs, Held())
    assert await w.step() == segments
    await started.wait()
    await jobs.delete("alice", doomed.job.id)
    release.set()
    results = await asyncio.gather(*list(w.running), return_exceptions=True)
    assert results == [None] * segments
    with pytest.raises(DocumentNotFound):
        await jobs.status("alice", doomed.job.id)
    kept = await jobs.submit("alice", Upload("b.txt", b"next", "de"))
    await drain(w)
    assert (await jobs.status("alice", kept.job.id)).state == "done"
