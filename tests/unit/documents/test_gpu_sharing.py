"""Documents and live traffic share the engine: document segments reach the engine with the
documents' priority (live requests 0), so an engine that schedules by priority (vLLM's
"priority" policy, emulated by the fake engine's slots) starts a waiting live request before
every waiting document segment; admission gives documents only the idle capacity."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from serve_app.core.config import AppConfig, EngineConfig
from serve_app.core.documents_config import DocumentsConfig
from serve_app.core.schemas import TranslateRequest
from serve_app.documents.jobs import Upload
from serve_app.documents.replica import ReplicaDocuments
from serve_app.store.sqlite import open_sqlite
from serve_app.translation.service import TranslationService
from tests.fakes import FakeEngine

SEGMENTS = 4


@dataclass
class Replica:
    engine: FakeEngine
    service: TranslationService
    documents: ReplicaDocuments


@pytest.fixture
async def replica(tmp_path) -> AsyncIterator[Replica]:  # type: ignore[no-untyped-def]
    engine = FakeEngine()
    service = TranslationService(AppConfig.model_validate({"prompt": {"family": "chat"}}), engine)
    await service.start()
    store = await open_sqlite(str(tmp_path / "store.db"))
    config = DocumentsConfig(worker_concurrency=SEGMENTS, idle_in_flight=8, poll_interval_s=0.01)
    documents = ReplicaDocuments(service, store, config, "replica-1")
    yield Replica(engine, service, documents)
    await documents.stop()
    await store.close()


async def _until(predicate, timeout_s: float = 5.0) -> None:  # type: ignore[no-untyped-def]
    async with asyncio.timeout(timeout_s):
        while not predicate():
            await asyncio.sleep(0.001)


async def _live_among_documents(replica: Replica) -> list[str]:
    """One engine slot: a document segment holds it, the others and then a live request
    wait; the order in which the engine started them."""
    engine = replica.engine
    engine.slots, engine.hold = 1, asyncio.Event()
    text = "\n\n".join(f"Paragraph number {i}." for i in range(SEGMENTS))
    await replica.documents.submit("owner", Upload("a.txt", text.encode(), "de", "en"))
    assert await replica.documents.worker.step() == SEGMENTS
    await _until(lambda: len(engine.ran) == 1 and len(engine.waiting) == SEGMENTS - 1)
    request = TranslateRequest(text="A live request.", source_lang="en", target_lang="de")
    live = asyncio.create_task(replica.service.translate(request, "live"))
    await _until(lambda: len(engine.waiting) == SEGMENTS)
    engine.hold.set()
    await live
    await asyncio.gather(*replica.documents.worker.running)
    return ["live" if rid.startswith("live") else "doc" for rid in engine.ran]


async def test_a_waiting_live_request_starts_before_waiting_document_segments(
    replica: Replica,
) -> None:
    order = await _live_among_documents(replica)
    assert order == ["doc", "live", *["doc"] * (SEGMENTS - 1)]
    priorities = {r.priority for r in replica.engine.requests}
    assert priorities == {0, DocumentsConfig().engine_priority}


async def test_without_priority_scheduling_the_live_request_waits_behind_them(
    replica: Replica,
) -> None:
    """The same with arrival order only ("fcfs"): what the priority buys."""
    replica.engine.by_priority = False
    order = await _live_among_documents(replica)
    assert order == [*["doc"] * SEGMENTS, "live"]


async def test_document_requests_carry_the_configured_priority(replica: Replica) -> None:
    replica.documents.config = replica.documents.config.model_copy(update={"engine_priority": 7})
    await replica.documents.submit("owner", Upload("a.txt", b"One.\n\nTwo.", "de", "en"))
    await replica.documents.worker.step()
    await asyncio.gather(*replica.documents.worker.running)
    await replica.service.translate(
        TranslateRequest(text="Live.", source_lang="en", target_lang="de"), "live"
    )
    assert [r.priority for r in replica.engine.requests] == [7, 7, 0]


async def test_documents_take_only_idle_capacity(replica: Replica) -> None:
    """Admission: no segment is claimed while live requests fill ``idle_in_flight``."""
    engine = replica.engine
    engine.hold = asyncio.Event()
    await replica.documents.submit("owner", Upload("a.txt", b"One.\n\nTwo.", "de", "en"))
    request = TranslateRequest(text="Live.", source_lang="en", target_lang="de")
    lives = [
        asyncio.create_task(replica.service.translate(request, f"live-{i}"))
        for i in range(replica.documents.config.idle_in_flight)
    ]
    await _until(lambda: len(engine.active) == len(lives))
    assert await replica.documents.worker.step() == 0
    engine.hold.set()
    await asyncio.gather(*lives)
    assert await replica.documents.worker.step() == 2
    await asyncio.gather(*replica.documents.worker.running)


def test_the_engine_schedules_by_priority_by_default() -> None:
    assert EngineConfig().engine_kwargs()["scheduling_policy"] == "priority"
    fcfs = EngineConfig(scheduling_policy="fcfs").engine_kwargs()
    assert fcfs["scheduling_policy"] == "fcfs"
