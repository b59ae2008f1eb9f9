"""The document side of ``bench/document_load.py``: a .txt of K paragraphs built in memory,
uploaded through the native ``/documents`` API and kept translating for a whole measurement
window (a new upload when one finishes), and what it did in that window.

Tokens: with the bench config each output is forced to its source's token length, so a
document generates its paragraphs' source tokens; during a window they are estimated as the
jobs' ``characters_done`` progress times the document's tokens per character.
"""

from __future__ import annotations

import asyncio
import random
import time
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

import httpx

from bench.workloads import WORDS, TokenCounter


@dataclass(frozen=True)
class Document:
    """The uploaded file and what translating it generates."""

    paragraphs: list[str]
    tokens: int  # source tokens = forced output tokens
    source_lang: str = "en"
    target_lang: str = "de"

    @property
    def characters(self) -> int:
        return sum(len(p) for p in self.paragraphs)

    def txt(self) -> bytes:
        return "\n\n".join(self.paragraphs).encode() + b"\n"


def make_document(k: int, tokens_each: int, count: TokenCounter, seed: int = 0) -> Document:
    """``k`` English paragraphs of at least ``tokens_each`` tokens each, as a .txt file."""
    rng = random.Random(seed)
    paragraphs = []
    for _ in range(k):
        words: list[str] = []
        while count(" ".join(words)) < tokens_each:
            words.append(rng.choice(WORDS["en"]))
        paragraphs.append(" ".join(words) + ".")
    return Document(paragraphs, sum(count(p) for p in paragraphs))


@dataclass
class Job:
    """One upload as this client saw it."""

    id: str
    uploaded_at: float
    status: dict[str, Any] = field(default_factory=dict)
    done_at: float | None = None


class DocumentKeeper:
    """Keeps a document translating: uploads it, polls its status, uploads it again when
    it is done, until ``stop``; then waits for the one in flight to finish."""

    def __init__(self, http: httpx.AsyncClient, doc: Document, poll_s: float = 0.5) -> None:
        self.http, self.doc, self.poll_s = http, doc, poll_s
        self.jobs: list[Job] = []
        self.polls: list[tuple[float, str]] = []  # (time, status) seen during the window
        self._stop = asyncio.Event()

    async def upload(self) -> Job:
        files = {"file": ("bench.txt", self.doc.txt(), "text/plain")}
        data = {"source_lang": self.doc.source_lang, "target_lang": self.doc.target_lang}
        r = await self.http.post("/documents", files=files, data=data)
        r.raise_for_status()
        job = Job(r.json()["id"], time.perf_counter(), r.json())
        self.jobs.append(job)
        return job

    async def refresh(self, job: Job) -> str:
        r = await self.http.get(f"/documents/{job.id}")
        r.raise_for_status()
        job.status = r.json()
        state = str(job.status["status"])
        if state in {"done", "error"} and job.done_at is None:
            job.done_at = time.perf_counter()
        return state

    async def started(self, timeout_s: float) -> None:
        """Uploads the first document and returns once a worker has claimed a segment."""
        job = await self.upload()
        deadline = time.perf_counter() + timeout_s
        while await self.refresh(job) == "queued":
            if time.perf_counter() > deadline:
                raise RuntimeError(f"document {job.id} still queued after {timeout_s:.0f}s")
            await asyncio.sleep(self.poll_s / 5)

    async def keep(self) -> None:
        """Until ``stop``: one document always translating (a new one when one is done)."""
        while not self._stop.is_set():
            state = await self.refresh(self.jobs[-1])
            self.polls.append((time.perf_counter(), state))
            if state == "error":
                raise RuntimeError(f"document failed: {self.jobs[-1].status.get('error')}")
            if state == "done":
                await self.upload()
                continue
            with suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self.poll_s)

    def stop(self) -> None:
        self._stop.set()

    async def drain(self, timeout_s: float) -> None:
        """Waits for every uploaded document to finish (deletes what is left at timeout)."""
        deadline = time.perf_counter() + timeout_s
        for job in self.jobs:
            while await self.refresh(job) not in {"done", "error"}:
                if time.perf_counter() > deadline:
                    await self.http.delete(f"/documents/{job.id}")
                    break
                await asyncio.sleep(self.poll_s)

    def characters_done(self) -> int:
        return sum(int(j.status.get("characters_done", 0)) for j in self.jobs)


def document_window(keeper: DocumentKeeper, before: int, wall_s: float) -> dict[str, Any]:
    """What the documents did during one live window: tokens per second (from
    ``characters_done`` progress) and the share of polls that saw one open (queued or
    translating: a "done" poll is the moment before the next upload)."""
    doc = keeper.doc
    chars = keeper.characters_done() - before
    tokens = chars * doc.tokens / max(1, doc.characters)
    busy = sum(1 for _, state in keeper.polls if state != "done")
    return {
        "documents_uploaded": len(keeper.jobs),
        "characters_done": chars,
        "tokens_done": round(tokens),
        "tokens_per_s": round(tokens / wall_s, 1) if wall_s > 0 else 0.0,
        "open_share": round(busy / len(keeper.polls), 3) if keeper.polls else 0.0,
    }


def finished_jobs(keeper: DocumentKeeper) -> list[dict[str, Any]]:
    """Every job the round uploaded: its state and, when done, tokens/s from upload to done."""
    out = []
    for job in keeper.jobs:
        state = job.status.get("status")
        seconds = (job.done_at - job.uploaded_at) if job.done_at else None
        out.append({
            "id": job.id, "status": state,
            "segments": f"{job.status.get('segments_done')}/{job.status.get('segments_total')}",
            "seconds": round(seconds, 2) if seconds else None,
            "tokens_per_s": round(keeper.doc.tokens / seconds, 1)
            if seconds and state == "done" else None,
        })  # fmt: skip
    return out


async def translate_alone(
    http: httpx.AsyncClient, doc: Document, timeout_s: float, replicas: int = 1
) -> dict[str, Any]:
    """One document with no live traffic, upload to done: the documents' own speed."""
    keeper = DocumentKeeper(http, doc, poll_s=0.1)
    await keeper.upload()
    await keeper.drain(timeout_s)
    job = finished_jobs(keeper)[0]
    speed = job["tokens_per_s"]
    return {**job, "tokens_per_s_per_replica": round(speed / replicas, 1) if speed else None}
