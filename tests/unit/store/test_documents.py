"""Document jobs: segments claimed under leases, expired leases reclaimed, exact progress,
bounded sizes, TTLs and cleanup, on both backends."""

from __future__ import annotations

import asyncio

import pytest

from serve_app.core.errors import (
    DocumentFailed,
    DocumentNotFound,
    DocumentNotReady,
    DocumentTooLarge,
    InvalidDocument,
    LimitReached,
)
from serve_app.store import CleanupReport, DocumentBacklog, DocumentJob, NewSegment, Store
from serve_app.store.factory import clean_periodically
from tests.unit.store.conftest import FakeClock, StoreFactory

pytestmark = pytest.mark.unit


async def new_job(store: Store, texts: list[str], owner: str = "k1", **kw: object) -> DocumentJob:
    segments = [NewSegment(t, context=f"ctx {i}") for i, t in enumerate(texts)]
    return await store.create_document(
        owner, "report.txt", "txt", "en", "de", {"formality": "formal"}, b"source bytes",
        segments, **kw,  # type: ignore[arg-type]
    )  # fmt: skip


async def test_job_is_created_queued_with_its_source(store: Store) -> None:
    job = await new_job(store, ["one", "three"])
    assert (job.state, job.segments_total, job.segments_done) == ("queued", 2, 0)
    assert (job.characters_total, job.source_bytes) == (8, 12)
    assert job.options == {"formality": "formal"}
    assert job.expires_at == job.created_at + 3600
    assert await store.get_document("k1", job.id) == job
    assert await store.document_source("k1", job.id) == b"source bytes"
    assert [j.id for j in await store.list_documents("k1")] == [job.id]


async def test_claim_complete_and_finish_in_document_order(store: Store) -> None:
    job = await new_job(store, ["a", "bb", "ccc"])
    claims = await store.claim_segments("w1", 2, lease_s=30)
    assert [(c.index, c.text, c.context, c.attempt) for c in claims] == [
        (0, "a", "ctx 0", 1),
        (1, "bb", "ctx 1", 1),
    ]
    assert (claims[0].target_lang, claims[0].options) == ("de", {"formality": "formal"})
    assert (await store.get_document("k1", job.id)).state == "translating"
    assert [c.index for c in await store.claim_segments("w2", 5, lease_s=30)] == [2]
    assert await store.claim_segments("w3", 5, lease_s=30) == []
    for index, text in ((2, "CCC"), (0, "A")):
        progress = await store.complete_segment(job.id, index, "w", text)
    assert (progress.segments_done, progress.characters_done, progress.state) == (
        2,
        4,
        "translating",
    )
    done = await store.complete_segment(job.id, 1, "w1", "BB")
    assert (done.state, done.segments_done) == ("translated", 3)
    assert await store.segment_translations(job.id) == ["A", "BB", "CCC"]
    with pytest.raises(DocumentNotReady):
        await store.document_result("k1", job.id)
    finished = await store.finish_document(job.id, b"translated bytes")
    assert finished.state == "done"
    await store.finish_document(job.id, b"second try")  # first call wins
    assert await store.document_result("k1", job.id) == b"translated bytes"


async def test_expired_lease_is_claimed_again_and_late_result_changes_nothing(
    store: Store, clock: FakeClock
) -> None:
    job = await new_job(store, ["x"])
    [first] = await store.claim_segments("dead-worker", 1, lease_s=10)
    clock.advance(9)
    assert await store.claim_segments("w2", 1, lease_s=10) == []
    clock.advance(2)
    [again] = await store.claim_segments("w2", 1, lease_s=10)
    assert (again.index, again.attempt) == (first.index, 2)
    await store.complete_segment(job.id, 0, "w2", "fresh")
    late = await store.complete_segment(job.id, 0, "dead-worker", "stale")
    assert late.segments_done == 1
    assert await store.segment_translations(job.id) == ["fresh"]


async def test_failed_segment_is_retried_then_fails_the_job(store: Store, clock: FakeClock) -> None:
    job = await new_job(store, ["x", "y"])
    for attempt in (1, 2):
        [claim] = await store.claim_segments("w", 1, lease_s=10, job_id=job.id)
        assert (claim.index, claim.attempt) == (0, attempt)
        await store.fail_segment(job.id, 0, "w", "engine busy")
    [claim] = await store.claim_segments("w", 1, lease_s=10)
    assert claim.attempt == 3
    failed = await store.fail_segment(job.id, 0, "w", "engine busy")
    assert (failed.state, failed.error) == ("error", "Segment 0: engine busy")
    assert await store.claim_segments("w", 5, lease_s=10) == []


async def test_a_segment_that_kills_workers_fails_its_job(store: Store, clock: FakeClock) -> None:
    job = await new_job(store, ["poison"])
    for _ in range(3):
        assert await store.claim_segments("w", 1, lease_s=5)
        clock.advance(6)  # the worker died: its lease expires
    assert await store.claim_segments("w", 1, lease_s=5) == []
    failed = await store.get_document("k1", job.id)
    assert failed.state == "error"
    assert "after 3 attempts" in (failed.error or "")


async def test_permanent_failure_and_fail_document(store: Store) -> None:
    job = await new_job(store, ["x"])
    [claim] = await store.claim_segments("w", 1, lease_s=10)
    failed = await store.fail_segment(job.id, claim.index, "w", "too long", retry=False)
    assert failed.state == "error"
    other = await new_job(store, ["y"])
    assert (await store.fail_document(other.id, "bad file")).error == "bad file"
    with pytest.raises(DocumentFailed, match="bad file"):  # never ready: not a 'retry'
        await store.document_result("k1", other.id)


async def test_another_workers_lease_is_not_released(store: Store, clock: FakeClock) -> None:
    job = await new_job(store, ["x"])
    await store.claim_segments("old", 1, lease_s=5)
    clock.advance(6)
    await store.claim_segments("new", 1, lease_s=30)
    await store.fail_segment(job.id, 0, "old", "timeout")
    assert await store.claim_segments("third", 1, lease_s=30) == []


async def test_oldest_job_is_served_first(store: Store, clock: FakeClock) -> None:
    old = await new_job(store, ["a", "b"])
    clock.advance(1)
    await new_job(store, ["c"])
    claims = await store.claim_segments("w", 2, lease_s=10)
    assert {c.job_id for c in claims} == {old.id}


async def test_concurrent_claims_never_share_a_segment(store_factory: StoreFactory) -> None:
    first, second = await store_factory(), await store_factory()
    job = await new_job(first, [f"s{i}" for i in range(20)])
    batches = await asyncio.gather(
        *((first, second)[n % 2].claim_segments(f"w{n}", 3, lease_s=60) for n in range(10))
    )
    indexes = [c.index for batch in batches for c in batch]
    assert sorted(indexes) == list(range(20))
    await asyncio.gather(*(first.complete_segment(job.id, i, "w", "t") for i in range(20)))
    assert (await second.get_document("k1", job.id)).segments_done == 20


async def test_documents_never_leak_across_owners(store: Store) -> None:
    job = await new_job(store, ["x"], owner="k1")
    for call in (
        store.get_document("k2", job.id),
        store.document_source("k2", job.id),
        store.delete_document("k2", job.id),
    ):
        with pytest.raises(DocumentNotFound):
            await call
    assert await store.list_documents("k2") == []


async def test_expired_documents_vanish_and_cleanup_deletes_them(
    store: Store, clock: FakeClock
) -> None:
    short = await new_job(store, ["x"], ttl_s=10)
    long = await new_job(store, ["y"])
    clock.advance(11)
    with pytest.raises(DocumentNotFound):
        await store.get_document("k1", short.id)
    claims = await store.claim_segments("w", 5, lease_s=5)
    assert [c.job_id for c in claims] == [long.id]  # the expired job's segment is not offered
    assert (await store.cleanup()).documents == 1
    assert [j.id for j in await store.list_documents("k1")] == [long.id]
    clock.advance(3600)
    assert (await store.cleanup()).documents == 1


async def test_ttl_is_capped_by_the_configured_one(store: Store) -> None:
    job = await new_job(store, ["x"], ttl_s=10**9)
    assert job.expires_at - job.created_at == 3600


async def test_a_document_without_text_is_translated_at_once(store: Store) -> None:
    job = await new_job(store, [])
    assert job.state == "translated"
    assert (await store.finish_document(job.id, b"same")).state == "done"


async def test_sizes_are_bounded(store: Store) -> None:
    with pytest.raises(DocumentTooLarge, match="21 segments"):
        await new_job(store, ["x"] * 21)
    with pytest.raises(DocumentTooLarge, match="201 characters"):
        await new_job(store, ["x" * 201])
    with pytest.raises(DocumentTooLarge, match="4097 bytes"):
        await store.create_document("k1", "f", "txt", None, "de", {}, b"x" * 4097, [])
    job = await new_job(store, ["x"])
    await store.claim_segments("w", 1, 10)
    await store.complete_segment(job.id, 0, "w", "y")
    with pytest.raises(DocumentTooLarge):
        await store.finish_document(job.id, b"x" * 4097)


async def test_owner_document_count_is_bounded(store: Store) -> None:
    for _ in range(3):
        await new_job(store, ["x"])
    with pytest.raises(LimitReached, match="3 documents"):
        await new_job(store, ["x"])
    await new_job(store, ["x"], owner="k2")


async def test_text_postgres_cannot_hold_is_refused_or_cleaned(store: Store) -> None:
    with pytest.raises(InvalidDocument, match="NUL"):
        await new_job(store, ["a\x00b"])
    with pytest.raises(InvalidDocument, match="surrogate"):
        await new_job(store, ["\udc80"])
    job = await new_job(store, ["x"])
    await store.claim_segments("w", 1, 10)
    await store.complete_segment(job.id, 0, "w", "a\x00b\ud800")
    assert await store.segment_translations(job.id) == ["ab?"]


@pytest.mark.parametrize("job_id", ["a\x00b", "\x00", "\ud800", "id\x1b"])
async def test_an_id_no_row_can_hold_is_not_found(store: Store, job_id: str) -> None:
    """A NUL or a lone surrogate (``/documents/%00/result``) failed in PostgreSQL's driver
    (a 500): not found, as on SQLite."""
    await new_job(store, ["x"])
    for owner in ("k1", None):
        with pytest.raises(DocumentNotFound):
            await store.get_document(owner, job_id)
        with pytest.raises(DocumentNotFound):
            await store.document_result(owner, job_id)
    with pytest.raises(DocumentNotFound):
        await store.delete_document("k1", job_id)


async def test_deleted_document_is_gone(store: Store) -> None:
    job = await new_job(store, ["x"])
    await store.delete_document("k1", job.id)
    with pytest.raises(DocumentNotFound):
        await store.get_document("k1", job.id)
    assert await store.claim_segments("w", 1, 10) == []


async def test_backlog_counts_what_open_jobs_have_left(store: Store, clock: FakeClock) -> None:
    """The documents' progress metric: open jobs, their segments and characters not done;
    finished and expired jobs count for nothing."""
    assert await store.document_backlog() == DocumentBacklog(0, 0, 0)
    job = await new_job(store, ["aaaa", "bb", "c"])
    await new_job(store, ["dddddd"], ttl_s=10)
    assert await store.document_backlog() == DocumentBacklog(2, 4, 13)
    claims = await store.claim_segments("w", 1, lease_s=30, job_id=job.id)
    await store.complete_segment(job.id, claims[0].index, "w", "AAAA")
    assert await store.document_backlog() == DocumentBacklog(2, 3, 9)
    clock.advance(11)  # the second job expires
    assert await store.document_backlog() == DocumentBacklog(1, 2, 3)
    for claim in await store.claim_segments("w", 5, lease_s=30):
        await store.complete_segment(claim.job_id, claim.index, "w", "X")
    assert await store.document_backlog() == DocumentBacklog(0, 0, 0)


async def test_periodic_cleanup_deletes_expired_jobs(
    store: Store, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What every SQLite store deployment and PostgreSQL replica runs in the background."""
    reports = []
    cleanup = store.cleanup

    async def recorded() -> CleanupReport:
        reports.append(await cleanup())
        return reports[-1]

    monkeypatch.setattr(store, "cleanup", recorded)
    await new_job(store, ["x"], ttl_s=10)
    clock.advance(11)
    task = asyncio.create_task(clean_periodically(store, period_s=0.01))
    try:
        async with asyncio.timeout(10):
            while not any(r.documents for r in reports):
                await asyncio.sleep(0.01)
    finally:
        task.cancel()
    assert sum(r.documents for r in reports) == 1
