"""Document jobs over the store: upload -> id -> status -> download, for every API's routes.

``DocumentJobs`` reads an upload into segments (in a thread), stores the file and its
segments as one job, answers status with progress and ``seconds_remaining``, and hands out
the translated file. The file is assembled by whoever first sees every segment translated:
the worker that completed the last one, or, if that worker died in between, the next
status or download request (``finish_document`` keeps the first result), so no job is left
half done. Expired jobs are deleted by the store's cleanup.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import logging
import secrets
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import regex

from serve_app.core.aio import ThreadGate
from serve_app.core.documents_config import DocumentsConfig
from serve_app.core.errors import (
    DeadlineExceeded,
    DocumentNotFound,
    GlossaryTooLarge,
    ServiceError,
)
from serve_app.core.glossary_terms import Entries, terms_for
from serve_app.documents import (
    FORMATS,
    DocumentFormat,
    DocumentLimits,
    Segment,
    extract,
    format_for,
    rebuild,
)
from serve_app.store import DocumentJob, NewSegment, Store

logger = logging.getLogger("ray.serve.translator")

KEY_DIGEST = "document_key_sha256"
TAGGED = "tagged_segments"
MARKUP = "markup"  # the request format its segments are translated in (html, markdown)
# The stored glossary named at upload: its id, and its entries that occur in the document
# (a snapshot: the job goes on unchanged if the glossary is edited or deleted).
GLOSSARY_ID = "glossary_id"
GLOSSARY = "glossary"
# The snapshot's share of the job's options (the store takes 64 KiB of options in all).
MAX_GLOSSARY_BYTES = 48 * 1024
# Dropped from a file's name: format characters (category Cf: bidi overrides, embeddings,
# isolates and marks, zero-width spaces, soft hyphens, BOMs, tags). "invoice" RLO "fdp.exe"
# shows as "invoiceexe.pdf" in a browser's download bar. ZWNJ and ZWJ stay: words of Persian
# and Indic scripts, and emoji, are spelled with them, and they reorder nothing. (Controls
# and line separators are refused by the store: ``store.validation.check_name``.)
_HIDDEN = regex.compile(r"[\p{Cf}--[\u200c\u200d]]", regex.V1)


@dataclass(frozen=True)
class Upload:
    """What a client sent: the file, its name and the translation's options."""

    filename: str
    data: bytes
    target_lang: str
    source_lang: str | None = None
    format: str | None = None  # a format name overriding the file's extension
    formality: str = "default"
    glossary_id: str | None = None
    glossary: Entries = ()  # the stored glossary's entries for the job's language pair


# Charges a document's characters to its caller (``api.keys.charged``): entered before the
# job is stored, it refuses what the caller's quota cannot take and refunds on an error.
Charge = Callable[[int], AbstractAsyncContextManager[object]]


@dataclass(frozen=True)
class Submitted:
    job: DocumentJob
    key: str  # the document key (DeepL's ``document_key``): shown once, stored as a digest


def pack_flags(flags: Sequence[bool]) -> str:
    """Segment flags as a compact string for the job's options (a compressed bitmap)."""
    bits = bytearray((len(flags) + 7) // 8)
    for i, flag in enumerate(flags):
        if flag:
            bits[i // 8] |= 1 << (i % 8)
    return base64.b64encode(zlib.compress(bytes(bits))).decode()


def flag_at(packed: str, index: int) -> bool:
    if not packed:
        return False
    bits = zlib.decompress(base64.b64decode(packed))
    return index // 8 < len(bits) and bool(bits[index // 8] >> (index % 8) & 1)


def seconds_remaining(job: DocumentJob, now: float | None = None) -> int | None:
    """An estimate from the characters done so far and the time they took; None before
    the first segment is done."""
    if job.state in ("done", "error"):
        return 0
    if job.started_at is None or job.characters_done <= 0:
        return None
    elapsed = max((now or time.time()) - job.started_at, 1e-3)
    left = job.characters_total - job.characters_done
    return int(left * elapsed / job.characters_done + 0.999)


class DocumentJobs:
    def __init__(self, store: Store, config: DocumentsConfig, max_engine_requests: int) -> None:
        self.store = store
        self.config = config
        self.limits = config.limits(max_engine_requests)
        self._assembling: dict[str, asyncio.Lock] = {}
        self.reading = ThreadGate(config.reading_threads, config.reading_queue, "uploads")

    async def submit(
        self,
        owner: str,
        upload: Upload,
        detect: Callable[[list[str]], str] | None = None,
        charge: Charge | None = None,
    ) -> Submitted:
        """Reads the file (400 if malformed, 413 beyond the limits) and stores the job;
        ``detect`` (segment texts -> language code) fills in a missing source language;
        ``charge`` is entered with the document's characters (its ``billed_characters``)
        around the job's creation: a quota it does not fit refuses the upload, and a job the
        store does not create is refunded."""
        name = file_name(upload.filename)
        fmt = format_for(name, upload.format)
        segments, terms = await self.reading.run(_read, fmt, upload, self.limits)
        source = upload.source_lang
        if detect is not None and segments:
            source = detect([s.text for s in segments[:200]])
        key = secrets.token_urlsafe(24)
        options: dict[str, Any] = {
            "formality": upload.formality,
            KEY_DIGEST: hashlib.sha256(key.encode()).hexdigest(),
            TAGGED: pack_flags([s.tagged for s in segments]),
        }
        if fmt.markup:
            options[MARKUP] = fmt.markup
        if upload.glossary_id:
            options |= _glossary_options(upload.glossary_id, terms)
        characters = sum(len(s.text) for s in segments)
        async with charge(characters) if charge else nullcontext():
            job = await self.store.create_document(
                owner,
                name or f"document.{fmt.name}",
                fmt.name,
                source,
                upload.target_lang,
                options,
                upload.data,
                [NewSegment(s.text, s.context or None) for s in segments],
            )
        return Submitted(job, key)

    async def status(self, owner: str | None, job_id: str, key: str | None = None) -> DocumentJob:
        """The job now (assembling its file if every segment is translated); with ``key``,
        DocumentNotFound unless it is the job's document key."""
        job = await self.store.get_document(owner, job_id)
        if key is not None and not _key_matches(job.options, key):
            raise DocumentNotFound(f"Document {job_id[:100]!r} not found (or wrong document key).")
        if job.state == "translated":
            job = await self.assemble(job_id)
        return job

    async def result(
        self, owner: str | None, job_id: str, key: str | None = None
    ) -> tuple[DocumentJob, bytes]:
        """The translated file; the store's DocumentNotReady (409) until it is done,
        DocumentFailed (409) once it has failed."""
        job = await self.status(owner, job_id, key)
        return job, await self.store.document_result(owner, job_id)

    async def delete(self, owner: str, job_id: str) -> None:
        await self.store.delete_document(owner, job_id)

    async def wait(self, owner: str | None, job_id: str, timeout_s: float) -> DocumentJob:
        """Polls until the job is done or failed; DeadlineExceeded (504) after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            job = await self.status(owner, job_id)
            if job.state in ("done", "error"):
                return job
            if time.monotonic() >= deadline:
                raise DeadlineExceeded(f"The document was not translated within {timeout_s:g}s.")
            await asyncio.sleep(self.config.poll_interval_s)

    async def assemble(self, job_id: str) -> DocumentJob:
        """Writes the translations into the file and stores it (once per job: the first
        result wins; a file that cannot be rebuilt fails the job with the reason)."""
        lock = self._assembling.setdefault(job_id, asyncio.Lock())
        try:
            async with lock:
                job = await self.store.get_document(None, job_id)
                if job.state != "translated":
                    return job
                return await self._assemble(job)
        finally:
            if not lock.locked():
                self._assembling.pop(job_id, None)

    async def _assemble(self, job: DocumentJob) -> DocumentJob:
        source = await self.store.document_source(None, job.id)
        translations = [t or "" for t in await self.store.segment_translations(job.id)]
        try:
            fmt = FORMATS[job.format]
            out = await self.reading.run_unshed(rebuild, fmt, source, translations)
        except ServiceError as exc:
            logger.warning("document %s could not be assembled: %s", job.id, exc.message)
            return await self.store.fail_document(job.id, exc.message)
        try:
            return await self.store.finish_document(job.id, out)
        except ServiceError:
            raise
        except Exception:  # another replica stored its result first
            job = await self.store.get_document(None, job.id)
            if job.state != "done":
                raise
            return job


def file_name(name: str) -> str:
    """The uploaded file's name without the folders a client may send with it
    (``../../x.docx``, ``C:\\Users\\x.docx``) and without invisible format characters
    (``_HIDDEN``): the name the download is offered under."""
    return _HIDDEN.sub("", name.replace("\\", "/").rsplit("/", 1)[-1]).strip()


def _read(
    fmt: DocumentFormat, upload: Upload, limits: DocumentLimits
) -> tuple[list[Segment], Entries]:
    """The document's segments, and the glossary entries whose terms occur in them."""
    segments = extract(fmt, upload.data, limits)
    if not upload.glossary:
        return segments, ()
    return segments, terms_for("\n".join(s.text for s in segments), upload.glossary)


def _glossary_options(glossary_id: str, terms: Entries) -> dict[str, Any]:
    options = {GLOSSARY_ID: glossary_id, GLOSSARY: [list(t) for t in terms]}
    if len(json.dumps(options)) > MAX_GLOSSARY_BYTES:
        raise GlossaryTooLarge(
            f"The entries of glossary {glossary_id[:100]!r} that occur in this document take "
            f"more than {MAX_GLOSSARY_BYTES} bytes; split the document or the glossary."
        )
    return options


def glossary_of(options: Mapping[str, Any]) -> Entries:
    """The glossary snapshot a job keeps in its options (empty without one)."""
    return tuple((str(s), str(t)) for s, t in options.get(GLOSSARY, ()))


def _key_matches(options: Mapping[str, Any], key: str) -> bool:
    digest = hashlib.sha256(key.encode()).hexdigest()
    return hmac.compare_digest(str(options.get(KEY_DIGEST, "")), digest)
