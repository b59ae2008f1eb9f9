"""The document worker each translator replica runs: it claims segments from the store under
leases and translates them through the replica's normal admission path.

Live requests come first: the worker claims segments only while the replica holds fewer
live engine requests than ``idle_in_flight``, and translates at most ``worker_concurrency``
segments at once, so documents fill idle capacity and never queue ahead of a user. A
segment that meets a full replica (503) waits and retries within its lease instead of
failing. A worker that dies holds its segments only until their leases expire; then any
replica's worker claims them again. A segment the model cannot translate (4xx: a language
the model lacks) fails its job with the reason; other failures release it for another try
(the store fails the job after ``max_segment_attempts``). A result that meets the store
away (its deployment restarting) is stored again while the lease lasts.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import Any

from serve_app.core.documents_config import DocumentsConfig
from serve_app.core.errors import DocumentNotFound, ServerError, ServiceError, StoreUnavailable
from serve_app.documents import Segment, translate_segment
from serve_app.documents.jobs import TAGGED, DocumentJobs, flag_at
from serve_app.store import DocumentJob, SegmentClaim

logger = logging.getLogger("ray.serve.translator")

# (claim, text, context) -> translation: one engine request through the replica's service.
TranslateClaim = Callable[[SegmentClaim, str, str], Awaitable[str]]
_RETRY_S = 0.5
_STORE_RETRY_S = 1.0


def internal_failure(claim: SegmentClaim) -> str:
    """What the document's status says of an unexpected exception (its ``error_message``,
    which DeepL's client raises with): that it happened, not the exception (whose text was
    shown, ``ValueError('...')``); the traceback is logged under the document's id."""
    return f"internal error; quote document {claim.job_id} when reporting it."


class DocumentWorker:
    def __init__(
        self,
        jobs: DocumentJobs,
        config: DocumentsConfig,
        translate: TranslateClaim,
        live_in_flight: Callable[[], int],
        name: str,
        on_segment: Callable[[SegmentClaim, DocumentJob], None] | None = None,
    ) -> None:
        self.jobs = jobs
        self.store = jobs.store
        self.config = config
        self.translate = translate
        self.live_in_flight = live_in_flight
        self.name = name
        self.on_segment = on_segment
        self.running: set[asyncio.Task[None]] = set()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self.config.worker_concurrency > 0 and self._task is None:
            self._task = asyncio.create_task(self.run(), name=f"document-worker-{self.name}")

    async def stop(self) -> None:
        tasks = [t for t in (self._task, *self.running) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with suppress(asyncio.CancelledError, Exception):
                await task
        self._task = None

    async def run(self) -> None:
        while True:
            try:
                claimed = await self.step()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the store away for a moment: try again later
                logger.warning("document worker %s: %r", self.name, exc)
                claimed = 0
            if not claimed:
                await asyncio.sleep(self.config.poll_interval_s)

    async def step(self) -> int:
        """Claims what there is room for and starts translating it; the number claimed."""
        room = self.config.worker_concurrency - len(self.running)
        if room <= 0 or self.live_in_flight() >= self.config.idle_in_flight:
            return 0
        claims = await self.store.claim_segments(self.name, room, self.config.lease_s)
        for claim in claims:
            task = asyncio.create_task(self.work(claim))
            self.running.add(task)
            task.add_done_callback(self.running.discard)
        return len(claims)

    async def work(self, claim: SegmentClaim) -> None:
        """Translates one claimed segment and stores the result (or the failure); a job
        deleted (or expired) meanwhile ends it quietly: its owner no longer wants it."""
        try:
            await self._work(claim)
        except DocumentNotFound:
            logger.info("document %s deleted during segment %d", claim.job_id, claim.index)

    async def _work(self, claim: SegmentClaim) -> None:
        try:
            translation = await self._translate(claim)
        except ServiceError as exc:
            retry = isinstance(exc, ServerError)
            await self._stored(claim, self.store.fail_segment, exc.message, retry)
            return
        except Exception:
            logger.exception("document %s segment %d failed", claim.job_id, claim.index)
            await self._stored(claim, self.store.fail_segment, internal_failure(claim), True)
            return
        job = await self._stored(claim, self.store.complete_segment, translation)
        if job.state == "translated":
            job = await self.jobs.assemble(claim.job_id)
        if self.on_segment is not None:
            self.on_segment(claim, job)

    async def _stored(
        self, claim: SegmentClaim, call: Callable[..., Awaitable[DocumentJob]], *args: Any
    ) -> DocumentJob:
        """A store call about the claimed segment, retried while the store is away (its
        deployment restarting) and the lease lasts: a translation is not thrown away
        for a moment's outage. Both calls are idempotent (a segment done stays done)."""
        while True:
            try:
                return await call(claim.job_id, claim.index, self.name, *args)
            except StoreUnavailable:
                if claim.lease_expires_at - time.time() < _STORE_RETRY_S:
                    raise  # the lease is gone: another worker will claim the segment
            await asyncio.sleep(_STORE_RETRY_S)

    async def _translate(self, claim: SegmentClaim) -> str:
        tagged = flag_at(str(claim.options.get(TAGGED, "")), claim.index)
        segment = Segment(claim.text, claim.context or "", tagged)

        async def one(text: str, context: str) -> str:
            return await self._patiently(claim, text, context)

        return await translate_segment(segment, one)

    async def _patiently(self, claim: SegmentClaim, text: str, context: str) -> str:
        """One engine request; a full replica (503) is waited out while the lease lasts."""
        while True:
            try:
                return await self.translate(claim, text, context)
            except ServiceError as exc:
                margin = claim.lease_expires_at - time.time()
                if not isinstance(exc, ServerError) or margin < 2 * _RETRY_S + 1:
                    raise
            await asyncio.sleep(_RETRY_S)
