"""Stored glossaries in SQL: a glossary, its dictionaries (one per language pair) and their
entries in the order given; edits rewrite a pair's entries and raise the glossary's
revision."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from serve_app.core.aio import sized
from serve_app.core.errors import GlossaryNotFound, GlossaryTooLarge, LimitReached
from serve_app.store.protocol import DictionaryInfo, Glossary, GlossaryDictionary
from serve_app.store.sql.database import Database, Row, Tx
from serve_app.store.validation import (
    check_dictionaries_async,
    check_dictionary_count,
    check_lang,
    check_name,
    may_name_a_row,
)

Entries = tuple[tuple[str, str], ...]
# Above this many entries, merging an edit into a pair's entries leaves the event loop.
MERGE_INLINE_ENTRIES = 20_000
_GLOSSARY = "SELECT id, name, owner, created_at, revision FROM glossaries"


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
    glossary_id, name, owner, created_at, revision = row
    found = tuple(dictionaries.get(glossary_id, ()))
    return Glossary(glossary_id, name, owner, float(created_at), found, int(revision))


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
    await _check_dictionary_room(db, tx, owner, dictionaries)


async def _check_dictionary_room(db: Database, tx: Tx, owner: str, dictionaries: int) -> None:
    """``LimitReached`` when ``dictionaries`` more would pass the owner's limit."""
    limits = db.limits
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
            await _write_pair(tx, glossary_id, d)
    infos = [DictionaryInfo(d.source_lang, d.target_lang, len(d.entries)) for d in checked]
    infos.sort(key=lambda d: (d.source_lang, d.target_lang))
    return Glossary(glossary_id, name, owner, now, tuple(infos))


async def _write_pair(tx: Tx, glossary_id: str, d: GlossaryDictionary) -> None:
    """Stores the pair's dictionary and entries (the pair holds none before)."""
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


async def _drop_pair(tx: Tx, glossary_id: str, source_lang: str, target_lang: str) -> None:
    for table in ("glossary_entries", "glossary_dictionaries"):
        await tx.execute(
            f"DELETE FROM {table} WHERE glossary_id = ? AND source_lang = ? AND target_lang = ?",
            glossary_id,
            source_lang,
            target_lang,
        )


async def _pair_entries(tx: Tx, glossary_id: str, source_lang: str, target_lang: str) -> Entries:
    rows = await tx.fetch(
        "SELECT source, target FROM glossary_entries WHERE glossary_id = ? "
        "AND source_lang = ? AND target_lang = ? ORDER BY position",
        glossary_id,
        source_lang,
        target_lang,
    )
    return tuple((source, target) for source, target in rows)


def merged(old: Entries, new: Entries) -> Entries:
    """``old`` with ``new`` merged in: a source term of both keeps its place and gets the
    new target; the others of ``new`` follow, in their order."""
    entries = dict(old)
    entries.update(new)
    return tuple(entries.items())


async def _owned(tx: Tx, owner: str, glossary_id: str) -> Row:
    if not may_name_a_row(glossary_id):
        raise _not_found(glossary_id)
    row = await tx.fetchrow(_GLOSSARY + " WHERE id = ? AND owner = ?", glossary_id, owner)
    if row is None:
        raise _not_found(glossary_id)
    return row


async def update(
    db: Database,
    owner: str,
    glossary_id: str,
    name: str | None,
    dictionaries: Sequence[GlossaryDictionary],
    merge: bool,
) -> Glossary:
    name = None if name is None else check_name(name, db.limits, "glossary")
    given = await check_dictionaries_async(dictionaries, db.limits) if dictionaries else []
    async with db.tx() as tx:
        await db.lock(tx, "glossaries:" + owner)
        await _owned(tx, owner, glossary_id)
        held = {
            (d.source_lang, d.target_lang): d.entry_count
            for d in (await _dictionaries(tx, "g.id = ?", glossary_id)).get(glossary_id, [])
        }
        added = [d for d in given if (d.source_lang, d.target_lang) not in held]
        check_dictionary_count(len(held) + len(added), db.limits)
        await _check_dictionary_room(db, tx, owner, len(added))
        written = [await _edited(tx, glossary_id, d, held, merge) for d in given]
        _check_total(held, written, db.limits.max_glossary_entries)
        for d in written:
            await _drop_pair(tx, glossary_id, d.source_lang, d.target_lang)
            await _write_pair(tx, glossary_id, d)
        await tx.execute(
            "UPDATE glossaries SET name = COALESCE(?, name), revision = revision + 1 WHERE id = ?",
            name,
            glossary_id,
        )
        return await _read(tx, owner, glossary_id)


async def _edited(
    tx: Tx, glossary_id: str, d: GlossaryDictionary, held: dict[tuple[str, str], int], merge: bool
) -> GlossaryDictionary:
    """The pair's entries as the edit leaves them."""
    if not merge or (d.source_lang, d.target_lang) not in held:
        return d
    old = await _pair_entries(tx, glossary_id, d.source_lang, d.target_lang)
    size = len(old) + len(d.entries)
    entries = await sized(size, MERGE_INLINE_ENTRIES, merged, old, d.entries)
    return GlossaryDictionary(d.source_lang, d.target_lang, entries)


def _check_total(
    held: dict[tuple[str, str], int], written: Sequence[GlossaryDictionary], limit: int
) -> None:
    counts = dict(held) | {(d.source_lang, d.target_lang): len(d.entries) for d in written}
    if (total := sum(counts.values())) > limit:
        raise GlossaryTooLarge(
            f"The glossary would have {total} entries; at most {limit} are allowed."
        )


async def _read(tx: Tx, owner: str, glossary_id: str) -> Glossary:
    row = await _owned(tx, owner, glossary_id)
    return _glossary(row, await _dictionaries(tx, "g.id = ?", glossary_id))


async def delete_pair(
    db: Database, owner: str, glossary_id: str, source_lang: str, target_lang: str
) -> Glossary:
    pair = (check_lang(source_lang, "source"), check_lang(target_lang, "target"))
    async with db.tx() as tx:
        await db.lock(tx, "glossaries:" + owner)
        glossary = await _read(tx, owner, glossary_id)
        if pair not in {(d.source_lang, d.target_lang) for d in glossary.dictionaries}:
            raise _pair_not_found(glossary_id, *pair)
        await _drop_pair(tx, glossary_id, *pair)
        await tx.execute("UPDATE glossaries SET revision = revision + 1 WHERE id = ?", glossary_id)
        return await _read(tx, owner, glossary_id)


def _pair_not_found(glossary_id: str, source_lang: str, target_lang: str) -> GlossaryNotFound:
    return GlossaryNotFound(
        f"Glossary {glossary_id[:100]!r} with language pair "
        f"{source_lang[:35]}->{target_lang[:35]} not found."
    )


async def list_all(db: Database, owner: str) -> list[Glossary]:
    async with db.tx() as tx:
        rows = await tx.fetch(_GLOSSARY + " WHERE owner = ? ORDER BY created_at, id", owner)
        dictionaries = await _dictionaries(tx, "g.owner = ?", owner)
    return [_glossary(row, dictionaries) for row in rows]


async def get(db: Database, owner: str, glossary_id: str) -> Glossary:
    async with db.tx() as tx:
        return await _read(tx, owner, glossary_id)


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
            raise _pair_not_found(glossary_id, source_lang, target_lang)
        return await _pair_entries(tx, glossary_id, source_lang, target_lang)


async def delete(db: Database, owner: str, glossary_id: str) -> None:
    if not may_name_a_row(glossary_id):
        raise _not_found(glossary_id)
    async with db.tx() as tx:
        # The lock of every edit: a delete committed between an edit's reads and its writes
        # (another replica's PATCH) failed the edit's foreign key, a 500, or deadlocked it.
        await db.lock(tx, "glossaries:" + owner)
        row = await tx.fetchrow(
            "DELETE FROM glossaries WHERE id = ? AND owner = ? RETURNING id", glossary_id, owner
        )
        if row is None:
            raise _not_found(glossary_id)
