"""Document jobs in SQL: the job, its files (source, result) and its segments with leases.

A segment is ``pending``, ``leased`` (to a worker until ``lease_expires_at``) or ``done``.
Claims take pending segments and leased ones whose lease expired, so a dead worker's
segments are picked up again; a segment claimed ``max_segment_attempts`` times fails its
job instead of killing worker after worker. The job's counters move in the same
transaction as its segments, so progress is exact.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from serve_app.core.errors import DocumentFailed, DocumentNotFound, DocumentNotReady, LimitReached
from serve_app.store.protocol import DocumentBacklog, DocumentJob, NewSegment, SegmentClaim
from serve_app.store.sql.database import Database, Row, Tx
from serve_app.store.validation import (
    check_file_size,
    check_name,
    check_segments,
    clean_translation,
    encode_options,
    may_name_a_row,
)

_JOB_COLUMNS = (
    "id, owner, name, format, source_lang, target_lang, options, state, segments_total, "
    "segments_done, characters_total, characters_done, source_bytes, created_at, started_at, "
    "updated_at, expires_at, error"
)
_OPEN = "('queued', 'translating')"


def _job(row: Row) -> DocumentJob:
    values = list(row)
    values[6] = json.loads(values[6])
    for i in (13, 15, 16):
        values[i] = float(values[i])
    if values[14] is not None:
        values[14] = float(values[14])
    return DocumentJob(*values)


def _not_found(job_id: str) -> DocumentNotFound:
    return DocumentNotFound(f"Document {job_id[:100]!r} not found (or expired).")


async def _fetch_job(db: Database, tx: Tx, owner: str | None, job_id: str) -> DocumentJob:
    if not may_name_a_row(job_id):
        raise _not_found(job_id)
    sql = f"SELECT {_JOB_COLUMNS} FROM documents WHERE id = ? AND expires_at > ?"
    args: list[Any] = [job_id, db.now()]
    if owner is not None:
        sql += " AND owner = ?"
        args.append(owner)
    row = await tx.fetchrow(sql, *args)
    if row is None:
        raise _not_found(job_id)
    return _job(row)


async def _check_owner_room(db: Database, tx: Tx, owner: str) -> None:
    await db.lock(tx, "documents:" + owner)
    row = await tx.fetchrow(
        "SELECT COUNT(*) FROM documents WHERE owner = ? AND expires_at > ?", owner, db.now()
    )
    if row and int(row[0]) >= db.limits.max_documents_per_owner:
        raise LimitReached(
            f"This key holds {db.limits.max_documents_per_owner} documents, the most allowed; "
            "delete one or wait until one expires."
        )


async def create(
    db: Database,
    owner: str,
    meta: tuple[str, str, str | None, str, Mapping[str, Any]],
    source: bytes,
    segments: Sequence[NewSegment],
    ttl_s: float | None,
) -> DocumentJob:
    name, fmt, source_lang, target_lang, options = meta
    name = check_name(name, db.limits, "document")
    check_file_size(source, db.limits, "document")
    check_segments(segments, db.limits)
    now = db.now()
    ttl = db.limits.document_ttl_s if ttl_s is None else min(ttl_s, db.limits.document_ttl_s)
    chars = sum(len(s.text) for s in segments)
    state = "queued" if segments else "translated"
    job_id = uuid.uuid4().hex.upper()
    row: list[Any] = [
        job_id,
        owner,
        name,
        fmt,
        source_lang,
        target_lang,
        encode_options(options),
        state,
    ]
    row += [len(segments), 0, chars, 0, len(source), now, None, now, now + ttl, None]
    async with db.tx() as tx:
        await _check_owner_room(db, tx, owner)
        marks = ", ".join("?" * len(row))
        await tx.execute(f"INSERT INTO documents ({_JOB_COLUMNS}) VALUES ({marks})", *row)
        await tx.execute(
            "INSERT INTO document_files (document_id, kind, data) VALUES (?, 'source', ?)",
            job_id,
            bytes(source),
        )
        await tx.executemany(
            "INSERT INTO document_segments (document_id, idx, text, context, chars, state, "
            "attempts) VALUES (?, ?, ?, ?, ?, 'pending', 0)",
            [(job_id, i, s.text, s.context, len(s.text)) for i, s in enumerate(segments)],
        )
    return _job(row)


async def get(db: Database, owner: str | None, job_id: str) -> DocumentJob:
    async with db.tx() as tx:
        return await _fetch_job(db, tx, owner, job_id)


async def list_all(db: Database, owner: str) -> list[DocumentJob]:
    async with db.tx() as tx:
        rows = await tx.fetch(
            f"SELECT {_JOB_COLUMNS} FROM documents WHERE owner = ? AND expires_at > ? "
            "ORDER BY created_at, id",
            owner,
            db.now(),
        )
    return [_job(row) for row in rows]


async def file(db: Database, owner: str | None, job_id: str, kind: str) -> bytes:
    async with db.tx() as tx:
        job = await _fetch_job(db, tx, owner, job_id)
        if kind == "result" and job.state == "error":  # failed since its status was read
            raise DocumentFailed(f"The document's translation failed: {job.error}")
        if kind == "result" and job.state != "done":
            raise DocumentNotReady(f"Document {job_id!r} is {job.state}; nothing to download yet.")
        row = await tx.fetchrow(
            "SELECT data FROM document_files WHERE document_id = ? AND kind = ?", job_id, kind
        )
    if row is None:
        raise _not_found(job_id)
    return bytes(row[0])


async def _claimable(
    db: Database, tx: Tx, limit: int, job_id: str | None
) -> list[tuple[str, int, int]]:
    now = db.now()
    sql = (
        "SELECT s.document_id, s.idx, s.attempts FROM document_segments s "
        "JOIN documents d ON d.id = s.document_id "
        f"WHERE d.state IN {_OPEN} AND d.expires_at > ? AND (s.state = 'pending' OR "
        "(s.state = 'leased' AND s.lease_expires_at <= ?))"
    )
    args: list[Any] = [now, now]
    if job_id is not None:
        sql += " AND d.id = ?"
        args.append(job_id)
    sql += f" ORDER BY d.created_at, d.id, s.idx LIMIT ? {db.skip_locked}"
    rows = await tx.fetch(sql, *args, limit)
    return [(r[0], int(r[1]), int(r[2])) for r in rows]


async def _lease(
    db: Database, tx: Tx, worker: str, segment: tuple[str, int], lease_s: float
) -> Row | None:
    return await tx.fetchrow(
        "UPDATE document_segments SET state = 'leased', worker = ?, lease_expires_at = ?, "
        "attempts = attempts + 1 WHERE document_id = ? AND idx = ? "
        "RETURNING document_id, idx, text, context, attempts, lease_expires_at",
        worker,
        db.now() + lease_s,
        *segment,
    )


async def _fail_job(db: Database, tx: Tx, job_id: str, error: str) -> None:
    await tx.execute(
        "UPDATE documents SET state = 'error', error = ?, updated_at = ? "
        "WHERE id = ? AND state NOT IN ('done', 'error')",
        error[:2000],
        db.now(),
        job_id,
    )


async def claim(
    db: Database, worker: str, limit: int, lease_s: float, job_id: str | None
) -> list[SegmentClaim]:
    if limit <= 0:
        return []
    leased: list[Row] = []
    async with db.tx() as tx:
        for doc, idx, attempts in await _claimable(db, tx, limit, job_id):
            if attempts >= db.limits.max_segment_attempts:
                message = f"Segment {idx} failed after {attempts} attempts."
                await _fail_job(db, tx, doc, message)
            elif row := await _lease(db, tx, worker, (doc, idx), lease_s):
                leased.append(row)
        jobs = {}
        for doc in sorted({row[0] for row in leased}):  # one order: no deadlock
            await tx.execute(
                "UPDATE documents SET state = 'translating', started_at = ?, updated_at = ? "
                "WHERE id = ? AND state = 'queued'",
                db.now(),
                db.now(),
                doc,
            )
            jobs[doc] = await _fetch_job(db, tx, None, doc)
    claims = []
    for doc, idx, text, context, attempts, expires in leased:
        job = jobs[doc]
        claims.append(
            SegmentClaim(
                job_id=doc,
                index=int(idx),
                text=text,
                context=context,
                source_lang=job.source_lang,
                target_lang=job.target_lang,
                options=job.options,
                attempt=int(attempts),
                lease_expires_at=float(expires),
            )
        )
    return claims


async def complete(
    db: Database, job_id: str, index: int, worker: str, translation: str
) -> DocumentJob:
    async with db.tx() as tx:
        row = await tx.fetchrow(
            "UPDATE document_segments SET state = 'done', translation = ?, worker = ?, "
            "lease_expires_at = NULL WHERE document_id = ? AND idx = ? AND state <> 'done' "
            "RETURNING chars",
            clean_translation(translation),
            worker,
            job_id,
            index,
        )
        if row is not None:
            await tx.execute(
                "UPDATE documents SET segments_done = segments_done + 1, "
                "characters_done = characters_done + ?, updated_at = ?, state = CASE "
                f"WHEN state IN {_OPEN} AND segments_done + 1 >= segments_total "
                "THEN 'translated' WHEN state = 'queued' THEN 'translating' ELSE state END "
                "WHERE id = ?",
                int(row[0]),
                db.now(),
                job_id,
            )
        return await _fetch_job(db, tx, None, job_id)


async def fail(
    db: Database, job_id: str, index: int, worker: str, error: str, retry: bool
) -> DocumentJob:
    async with db.tx() as tx:
        row = await tx.fetchrow(
            "SELECT state, attempts, worker FROM document_segments "
            "WHERE document_id = ? AND idx = ?",
            job_id,
            index,
        )
        if row is None:
            raise _not_found(job_id)
        state, attempts, holder = row
        if state != "done" and retry and attempts < db.limits.max_segment_attempts:
            if holder == worker:  # a lease another worker took over is not released
                await tx.execute(
                    "UPDATE document_segments SET state = 'pending', worker = NULL, "
                    "lease_expires_at = NULL WHERE document_id = ? AND idx = ?",
                    job_id,
                    index,
                )
        elif state != "done":
            await _fail_job(db, tx, job_id, f"Segment {index}: {error}")
        return await _fetch_job(db, tx, None, job_id)


async def translations(db: Database, job_id: str) -> list[str | None]:
    async with db.tx() as tx:
        await _fetch_job(db, tx, None, job_id)
        rows = await tx.fetch(
            "SELECT translation FROM document_segments WHERE document_id = ? ORDER BY idx",
            job_id,
        )
    return [row[0] for row in rows]


async def finish(db: Database, job_id: str, result: bytes) -> DocumentJob:
    check_file_size(result, db.limits, "translated document")
    async with db.tx() as tx:
        job = await _fetch_job(db, tx, None, job_id)
        if job.state == "done":
            return job
        if job.state != "translated":
            raise DocumentNotReady(f"Document {job_id!r} is {job.state}, not translated.")
        await tx.execute(
            "INSERT INTO document_files (document_id, kind, data) VALUES (?, 'result', ?)",
            job_id,
            bytes(result),
        )
        await tx.execute(
            "UPDATE documents SET state = 'done', updated_at = ? WHERE id = ?", db.now(), job_id
        )
        return await _fetch_job(db, tx, None, job_id)


async def fail_job(db: Database, job_id: str, error: str) -> DocumentJob:
    async with db.tx() as tx:
        await _fetch_job(db, tx, None, job_id)
        await _fail_job(db, tx, job_id, error)
        return await _fetch_job(db, tx, None, job_id)


async def delete(db: Database, owner: str, job_id: str) -> None:
    if not may_name_a_row(job_id):
        raise _not_found(job_id)
    async with db.tx() as tx:
        row = await tx.fetchrow(
            "DELETE FROM documents WHERE id = ? AND owner = ? AND expires_at > ? RETURNING id",
            job_id,
            owner,
            db.now(),
        )
    if row is None:
        raise _not_found(job_id)


async def backlog(db: Database) -> DocumentBacklog:
    async with db.tx() as tx:
        row = await tx.fetchrow(
            "SELECT COUNT(*), COALESCE(SUM(segments_total - segments_done), 0), "
            "COALESCE(SUM(characters_total - characters_done), 0) FROM documents "
            f"WHERE state IN {_OPEN} AND expires_at > ?",
            db.now(),
        )
    jobs, segments, characters = row or (0, 0, 0)
    return DocumentBacklog(int(jobs), int(segments), int(characters))


async def cleanup(db: Database) -> int:
    """Deletes expired jobs; their segments and files go with them (ON DELETE CASCADE)."""
    async with db.tx() as tx:
        rows = await tx.fetch("DELETE FROM documents WHERE expires_at <= ? RETURNING id", db.now())
    return len(rows)
