"""Document translation inside a translator replica: uploads checked against the languages
the replica serves, the jobs API over the shared store, and the worker that translates
segments through the replica's ``TranslationService`` (its admission, deadlines, cache and
metrics), as any live request would be; and the progress metrics (the fleet's backlog, read
from the store every ``BACKLOG_PERIOD_S``)."""

from __future__ import annotations

import asyncio
import logging
import re
from contextlib import suppress
from dataclasses import replace
from typing import Any, Protocol

from serve_app.core.characters import invisible
from serve_app.core.context import engine_priority
from serve_app.core.documents_config import DocumentsConfig
from serve_app.core.errors import LanguageDetectionFailed
from serve_app.core.glossary_terms import IndexCache, glossary_for_async, index_async
from serve_app.core.schemas import TranslateRequest
from serve_app.documents.jobs import (
    GLOSSARY,
    MARKUP,
    Charge,
    DocumentJobs,
    Submitted,
    Upload,
    glossary_of,
)
from serve_app.documents.worker import DocumentWorker
from serve_app.store import DocumentBacklog, DocumentJob, SegmentClaim, Store

_TAGS = re.compile(r"<[^<>]{1,12}>")
BACKLOG_PERIOD_S = 15.0
logger = logging.getLogger("ray.serve.translator")
_SAMPLE_CHARS = 2000


class DocumentMetrics(Protocol):
    def document_segment(self, characters: int) -> None: ...

    def document_finished(self, state: str) -> None: ...

    def document_backlog(self, backlog: DocumentBacklog) -> None: ...


class NoDocumentMetrics:
    def document_segment(self, characters: int) -> None:
        pass

    def document_finished(self, state: str) -> None:
        pass

    def document_backlog(self, backlog: DocumentBacklog) -> None:
        pass


class ReplicaDocuments:
    def __init__(
        self,
        service: Any,  # TranslationService (not imported: it would import this layer back)
        store: Store,
        config: DocumentsConfig,
        name: str,
        metrics: DocumentMetrics | None = None,
    ) -> None:
        self.service = service
        self.config = config
        self.metrics = metrics or NoDocumentMetrics()
        # A segment is translated as one request: held to the replica's request limits.
        self.jobs = DocumentJobs(store, config, service.limits.max_engine_requests)
        self.active = 0  # this replica's engine requests for documents
        self.glossaries = IndexCache(max_bytes=64 * 2**20)  # each job's terms, by job id
        self._reporter: asyncio.Task[None] | None = None
        self.worker = DocumentWorker(
            self.jobs, config, self._translate, self._live, name, self._translated
        )

    def start(self) -> None:
        self.worker.start()
        if self._reporter is None:
            self._reporter = asyncio.create_task(self._report_backlog(), name="document-backlog")

    async def stop(self) -> None:
        if self._reporter is not None:
            self._reporter.cancel()
            with suppress(asyncio.CancelledError):
                await self._reporter
            self._reporter = None
        await self.worker.stop()

    async def report_backlog(self) -> None:
        """Reads the fleet's backlog from the store into the progress metrics."""
        self.metrics.document_backlog(await self.jobs.store.document_backlog())

    async def _report_backlog(self) -> None:
        while True:
            try:
                await self.report_backlog()
            except Exception as exc:  # the store away for a moment: the next report
                logger.debug("document backlog not read: %r", exc)
            await asyncio.sleep(BACKLOG_PERIOD_S)

    async def submit(self, owner: str, upload: Upload, charge: Charge | None = None) -> Submitted:
        """Checks the languages (400 before anything is stored), reads and stores the job
        (its characters charged by ``charge``); without a source language, it is detected
        once from the document's text."""
        languages = self.service.languages
        target = languages.resolve_target(upload.target_lang).code
        auto = not upload.source_lang or upload.source_lang.strip().lower() == "auto"
        source = None if auto else languages.resolve(upload.source_lang).code
        upload = replace(upload, target_lang=target, source_lang=source)
        detect = None if source else self._detect
        return await self.jobs.submit(owner, upload, detect, charge)

    def _detect(self, texts: list[str]) -> str:
        sample = _TAGS.sub(" ", " ".join(texts)[: _SAMPLE_CHARS * 2])[:_SAMPLE_CHARS]
        found = self.service.detect(sample) if sample.strip() else []
        if not found:
            raise LanguageDetectionFailed(
                "The document's language could not be detected; send source_lang."
            )
        return str(found[0][0].code)

    def _live(self) -> int:
        return max(0, int(self.service.in_flight) - self.active)

    async def _translate(self, claim: SegmentClaim, text: str, context: str) -> str:
        if invisible(text):  # a cue of a zero-width space: nothing to translate (a 422)
            return text
        request = TranslateRequest(
            text=text,
            source_lang=claim.source_lang or "auto",
            target_lang=claim.target_lang,
            context=context[:5000] or None,
            formality=claim.options.get("formality", "default"),
            format=claim.options.get(MARKUP, "text"),
        )
        request = await self._with_glossary(request, claim)
        self.active += 1
        # The engine requests made for this segment (and the tasks they run in) carry the
        # documents' priority: behind every live request in the engine's queue.
        token = engine_priority.set(self.config.engine_priority)
        try:
            response = await self.service.translate(request, f"doc-{claim.job_id}-{claim.index}")
        finally:
            engine_priority.reset(token)
            self.active -= 1
        return str(response.translation)

    async def _with_glossary(
        self, request: TranslateRequest, claim: SegmentClaim
    ) -> TranslateRequest:
        """The request with the job's glossary terms that its text holds as its glossary:
        the terminology prompt the translate routes' ``glossary_id`` reaches (not validated
        again: the store checked the terms, and a text may hold more than the inline limit).
        The job's terms are indexed once per job in this replica, not per segment."""
        if not claim.options.get(GLOSSARY):
            return request
        if (index := self.glossaries.get(claim.job_id)) is None:
            index = await index_async(glossary_of(claim.options))
            self.glossaries.put(claim.job_id, index)
        glossary = await glossary_for_async(request.text, index)
        if not glossary:
            return request
        return request.model_copy(update={"glossary": glossary})

    def _translated(self, claim: SegmentClaim, job: DocumentJob) -> None:
        self.metrics.document_segment(len(claim.text))
        if job.state in ("done", "error"):
            self.metrics.document_finished(job.state)
