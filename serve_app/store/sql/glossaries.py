"""Stored glossaries in SQL: a glossary, its dictionaries (one per language pair) and their
entries in the order given."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from serve_app.core.errors import GlossaryNotFound, LimitReached
from serve_app.store.protocol import DictionaryInfo, Glossary, GlossaryDictionary
from serve_app.store.sql.database import Database, Row, Tx
from serve_app.store.validation import check_dictionaries_async, check_name, may_name_a_row


def _not_found(glossary_id: str) -> GlossaryNotFound:
    return GlossaryNotFound(f"Glossary {glossary_id[:100]!r} not found.")


async def _dictionaries(tx: Tx, where: str, arg: str) -> dict[str, list[DictionaryInfo]]:
    rows = await tx.fetch(
        "SELECT d.glossary_id, d.source_lang, d.target_lang, d.entry_count "
        "FROM glossary_dictionaries d JOIN glossaries g ON g.id = d.glossary_id "
        f"WHERE {where} ORDER BY d.source_lang, d.target_lang",
        arg,
    )
    found: dict[str, list[DictionaryInfo]] = {}
    for glossary_id, source, target, count in rows:
        found.setdefault(glossary_id, []).append(DictionaryInfo(source, target, int(count)))
    return found


def _glossary(row: Row, dictionaries: dict[str, list[DictionaryInfo]]) -> Glossary:
    glossary_id, name, owner, created_at = row
    return Glossary(glossary_id, name, owner, float(created_at), tuple(dictionaries[glossary_id]))


async def _check_room(db: Database, tx: Tx, owner: str, dictionaries: int) -> None:
    """``LimitReached`` (403) when the owner's glossaries, or their dictionaries with the
    new glossary's, would pass the limits. Every list of glossaries reads and answers all
    the owner's dictionaries: 21 glossaries of 3,906 language pairs each held the event
    loop 1.3 s on ``GET /glossaries`` (1,000 of them: about a minute)."""
    limits = db.limits
    row = await tx.fetchrow("SELECT COUNT(*) FROM glossaries WHERE owner = ?", owner)
    if row and int(row[0]) >= limits.max_glossaries_per_owner:
        raise LimitReached(
            f"This key holds {limits.max_glossaries_per_owner} glossaries, the most "
            "allowed; delete one first."
        )
    row = await tx.fetchrow(
        "SELECT COUNT(*) FROM glossary_dictionaries d JOIN glossaries g "
        "ON g.id = d.glossary_id WHERE g.owner = ?",
        owner,
    )
    held = int(row[0]) if row else 0
    if held + dictionaries > limits.max_glossary_dictionaries:
        raise LimitReached(
            f"This key's glossaries hold {held} dictionaries (language pairs) and this one "
            f"has {dictionaries}; at most {limits.max_glossary_dictionaries} are allowed "
            "in all: delete a glossary first."
        )


async def create(
    db: Database, owner: str, name: str, dictionaries: Sequence[GlossaryDictionary]
) -> Glossary:
    name = check_name(name, db.limits, "glossary")
    checked = await check_dictionaries_async(dictionaries, db.limits)
    glossary_id, now = str(uuid.uuid4()), db.now()
    async with db.tx() as tx:
        await db.lock(tx, "glossaries:" + owner)
        await _check_room(db, tx, owner, len(checked))
        await tx.execute(
            "INSERT INTO glossaries (id, owner, name, created_at) VALUES (?, ?, ?, ?)",
            glossary_id,
            owner,
            name,
            now,
        )
        for d in checked:
            await tx.execute(
                "INSERT INTO glossary_dictionaries (glossary_id, source_lang, target_lang, "
                "entry_count) VALUES (?, ?, ?, ?)",
                glossary_id,
                d.source_lang,
                d.target_lang,
                len(d.entries),
            )
            await tx.executemany(
                "INSERT INTO glossary_entries (glossary_id, source_lang, target_lang, position, "
                "source, target) VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (glossary_id, d.source_lang, d.target_lang, n, source, target)
                    for n, (source, target) in enumerate(d.entries)
                ],
            )
    infos = [DictionaryInfo(d.source_lang, d.target_lang, len(d.entries)) for d in checked]
    infos.sort(key=lambda d: (d.source_lang, d.target_lang))
    return Glossary(glossary_id, name, owner, now, tuple(infos))


async def list_all(db: Database, owner: str) -> list[Glossary]:
    async with db.tx() as tx:
        rows = await tx.fetch(
            "SELECT id, name, owner, created_at FROM glossaries WHERE owner = ? "
            "ORDER BY created_at, id",
            owner,
        )
        dictionaries = await _dictionaries(tx, "g.owner = ?", owner)
    return [_glossary(row, dictionaries) for row in rows]


async def get(db: Database, owner: str, glossary_id: str) -> Glossary:
    if not may_name_a_row(glossary_id):
        raise _not_found(glossary_id)
    async with db.tx() as tx:
        row = await tx.fetchrow(
            "SELECT id, name, owner, created_at FROM glossaries WHERE id = ? AND owner = ?",
            glossary_id,
            owner,
        )
        if row is None:
            raise _not_found(glossary_id)
        dictionaries = await _dictionaries(tx, "g.id = ?", glossary_id)
    return _glossary(row, dictionaries)


async def entries(
    db: Database, owner: str, glossary_id: str, source_lang: str, target_lang: str
) -> tuple[tuple[str, str], ...]:
    source_lang, target_lang = source_lang.strip().lower(), target_lang.strip().lower()
    if not all(map(may_name_a_row, (glossary_id, source_lang, target_lang))):
        raise _not_found(glossary_id)
    async with db.tx() as tx:
        exists = await tx.fetchrow(
            "SELECT 1 FROM glossary_dictionaries d JOIN glossaries g ON g.id = d.glossary_id "
            "WHERE g.id = ? AND g.owner = ? AND d.source_lang = ? AND d.target_lang = ?",
            glossary_id,
            owner,
            source_lang,
            target_lang,
        )
        if exists is None:
            raise GlossaryNotFound(
                f"Glossary {glossary_id[:100]!r} with language pair "
                f"{source_lang[:35]}->{target_lang[:35]} not found."
            )
        rows = await tx.fetch(
            "SELECT source, target FROM glossary_entries WHERE glossary_id = ? "
            "AND source_lang = ? AND target_lang = ? ORDER BY position",
            glossary_id,
            source_lang,
            target_lang,
        )
    return tuple((source, target) for source, target in rows)


async def delete(db: Database, owner: str, glossary_id: str) -> None:
    if not may_name_a_row(glossary_id):
        raise _not_found(glossary_id)
    async with db.tx() as tx:
        row = await tx.fetchrow(
            "DELETE FROM glossaries WHERE id = ? AND owner = ? RETURNING id", glossary_id, owner
        )
        if row is None:
            raise _not_found(glossary_id)
