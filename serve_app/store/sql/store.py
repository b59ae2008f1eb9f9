"""``SqlStore``: the ``Store`` on a SQL ``Database`` (SQLite or PostgreSQL), one query module
per kind of state."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from serve_app.store.protocol import (
    ApiKey,
    CleanupReport,
    DocumentBacklog,
    DocumentJob,
    Glossary,
    GlossaryDictionary,
    NewSegment,
    SegmentClaim,
    Store,
    Usage,
)
from serve_app.store.sql import documents, glossaries, keys
from serve_app.store.sql.database import Database


class SqlStore(Store):
    def __init__(self, db: Database) -> None:
        self.db = db
        self.limits = db.limits

    async def close(self) -> None:
        await self.db.close()

    async def ping(self) -> None:
        async with self.db.tx() as tx:
            await tx.fetchrow("SELECT 1")

    # glossaries

    async def create_glossary(
        self, owner: str, name: str, dictionaries: Sequence[GlossaryDictionary]
    ) -> Glossary:
        return await glossaries.create(self.db, owner, name, dictionaries)

    async def list_glossaries(self, owner: str) -> list[Glossary]:
        return await glossaries.list_all(self.db, owner)

    async def get_glossary(self, owner: str, glossary_id: str) -> Glossary:
        return await glossaries.get(self.db, owner, glossary_id)

    async def glossary_entries(
        self, owner: str, glossary_id: str, source_lang: str, target_lang: str
    ) -> tuple[tuple[str, str], ...]:
        return await glossaries.entries(self.db, owner, glossary_id, source_lang, target_lang)

    async def update_glossary(
        self,
        owner: str,
        glossary_id: str,
        name: str | None,
        dictionaries: Sequence[GlossaryDictionary],
        merge: bool,
    ) -> Glossary:
        return await glossaries.update(self.db, owner, glossary_id, name, dictionaries, merge)

    async def delete_glossary_dictionary(
        self, owner: str, glossary_id: str, source_lang: str, target_lang: str
    ) -> Glossary:
        return await glossaries.delete_pair(self.db, owner, glossary_id, source_lang, target_lang)

    async def delete_glossary(self, owner: str, glossary_id: str) -> None:
        await glossaries.delete(self.db, owner, glossary_id)

    # keys

    async def create_key(
        self,
        name: str,
        digest: bytes,
        chars_per_month: int | None = None,
        requests_per_minute: int | None = None,
    ) -> ApiKey:
        return await keys.create(self.db, name, digest, chars_per_month, requests_per_minute)

    async def find_key(self, digest: bytes) -> ApiKey | None:
        return await keys.find(self.db, digest)

    async def list_keys(self) -> list[ApiKey]:
        return await keys.list_all(self.db)

    async def revoke_key(self, name_or_id: str) -> ApiKey:
        return await keys.revoke(self.db, name_or_id)

    async def charge(self, key_id: str, characters: int, requests: int = 1) -> Usage:
        return await keys.charge(self.db, key_id, characters, requests)

    async def refund(self, key_id: str, characters: int, month: str) -> None:
        await keys.refund(self.db, key_id, characters, month)

    async def usage(self, key_id: str) -> Usage:
        return await keys.usage(self.db, key_id)

    # documents

    async def create_document(
        self,
        owner: str,
        name: str,
        format: str,
        source_lang: str | None,
        target_lang: str,
        options: Mapping[str, Any],
        source: bytes,
        segments: Sequence[NewSegment],
        ttl_s: float | None = None,
    ) -> DocumentJob:
        meta = (name, format, source_lang, target_lang, options)
        return await documents.create(self.db, owner, meta, source, segments, ttl_s)

    async def get_document(self, owner: str | None, job_id: str) -> DocumentJob:
        return await documents.get(self.db, owner, job_id)

    async def list_documents(self, owner: str) -> list[DocumentJob]:
        return await documents.list_all(self.db, owner)

    async def document_source(self, owner: str | None, job_id: str) -> bytes:
        return await documents.file(self.db, owner, job_id, "source")

    async def claim_segments(
        self, worker: str, limit: int, lease_s: float, job_id: str | None = None
    ) -> list[SegmentClaim]:
        return await documents.claim(self.db, worker, limit, lease_s, job_id)

    async def complete_segment(
        self, job_id: str, index: int, worker: str, translation: str
    ) -> DocumentJob:
        return await documents.complete(self.db, job_id, index, worker, translation)

    async def fail_segment(
        self, job_id: str, index: int, worker: str, error: str, retry: bool = True
    ) -> DocumentJob:
        return await documents.fail(self.db, job_id, index, worker, error, retry)

    async def segment_translations(self, job_id: str) -> list[str | None]:
        return await documents.translations(self.db, job_id)

    async def finish_document(self, job_id: str, result: bytes) -> DocumentJob:
        return await documents.finish(self.db, job_id, result)

    async def fail_document(self, job_id: str, error: str) -> DocumentJob:
        return await documents.fail_job(self.db, job_id, error)

    async def document_result(self, owner: str | None, job_id: str) -> bytes:
        return await documents.file(self.db, owner, job_id, "result")

    async def delete_document(self, owner: str, job_id: str) -> None:
        await documents.delete(self.db, owner, job_id)

    async def document_backlog(self) -> DocumentBacklog:
        return await documents.backlog(self.db)

    async def cleanup(self) -> CleanupReport:
        return CleanupReport(await documents.cleanup(self.db), await keys.cleanup(self.db))
