"""Progress as metrics: each translated segment counts its characters, finished jobs count
by state, and every replica reports the fleet's backlog read from the store, periodically
from ``start`` on."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from serve_app.core.config import AppConfig
from serve_app.core.documents_config import DocumentsConfig
from serve_app.documents import replica as replica_module
from serve_app.documents.jobs import Upload
from serve_app.documents.replica import ReplicaDocuments
from serve_app.store import DocumentBacklog
from serve_app.store.sqlite import open_sqlite
from serve_app.translation.service import TranslationService
from tests.fakes import FakeEngine


class Recorder:
    def __init__(self) -> None:
        self.segments: list[int] = []
        self.finished: list[str] = []
        self.backlogs: list[DocumentBacklog] = []

    def document_segment(self, characters: int) -> None:
        self.segments.append(characters)

    def document_finished(self, state: str) -> None:
        self.finished.append(state)

    def document_backlog(self, backlog: DocumentBacklog) -> None:
        self.backlogs.append(backlog)


@pytest.fixture
async def documents(tmp_path) -> AsyncIterator[ReplicaDocuments]:  # type: ignore[no-untyped-def]
    service = TranslationService(
        AppConfig.model_validate({"prompt": {"family": "chat"}}), FakeEngine()
    )
    await service.start()
    store = await open_sqlite(str(tmp_path / "store.db"))
    config = DocumentsConfig(worker_concurrency=4, poll_interval_s=0.01)
    documents = ReplicaDocuments(service, store, config, "r1", Recorder())
    yield documents
    await documents.stop()
    await store.close()


async def test_segments_jobs_and_backlog_are_measured(
    documents: ReplicaDocuments, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(replica_module, "BACKLOG_PERIOD_S", 0.01)
    metrics = documents.metrics
    assert isinstance(metrics, Recorder)
    await documents.submit("o", Upload("a.txt", b"One two.\n\nThree.", "de", "en"))
    await documents.report_backlog()
    assert metrics.backlogs[-1] == DocumentBacklog(1, 2, 14)
    documents.start()  # the worker and the periodic report
    async with asyncio.timeout(10):
        while metrics.backlogs[-1] != DocumentBacklog(0, 0, 0) or not metrics.finished:
            await asyncio.sleep(0.01)
    assert sorted(metrics.segments) == [6, 8]
    assert metrics.finished == ["done"]
