"""Migrations: numbered files applied once, recorded in schema_version, safe when several
replicas start at once."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from serve_app.store import GlossaryDictionary
from serve_app.store.sql.database import Migration, migrations
from serve_app.store.sql.store import SqlStore
from serve_app.store.sqlite import PRAGMAS, _set_pragmas
from tests.unit.store.conftest import StoreFactory

pytestmark = pytest.mark.unit


async def test_schema_version_records_every_migration_once(store_factory: StoreFactory) -> None:
    stores = await asyncio.gather(*(store_factory() for _ in range(4)))  # replicas starting
    store = stores[0]
    assert isinstance(store, SqlStore)
    async with store.db.tx() as tx:
        rows = await tx.fetch("SELECT version, name FROM schema_version ORDER BY version")
    expected = [(m.version, m.name) for m in migrations(store.db.dialect)]
    assert [tuple(r) for r in rows] == expected
    assert await store.db.migrate() == expected[-1][0]  # again: nothing to apply


def test_both_dialects_have_the_same_migrations() -> None:
    assert [m.version for m in migrations("sqlite")] == [m.version for m in migrations("postgres")]


def test_statements_split_at_semicolons_ending_lines() -> None:
    sql = "-- comment; not a statement\nCREATE TABLE a (x TEXT);\n\nCREATE INDEX i ON a (x);\n"
    assert Migration(1, "x", sql).statements() == [
        "CREATE TABLE a (x TEXT)",
        "CREATE INDEX i ON a (x)",
    ]


class _LockedConn:
    """Answers "database is locked" to its first ``locked`` statements."""

    def __init__(self, locked: int, error: str = "database is locked") -> None:
        self.locked, self.error, self.done = locked, error, []

    async def execute(self, sql: str) -> None:
        if self.locked:
            self.locked -= 1
            raise sqlite3.OperationalError(self.error)
        self.done.append(sql)


async def test_a_store_opening_beside_another_waits_out_the_lock_on_its_pragmas() -> None:
    conn = _LockedConn(locked=3)
    await _set_pragmas(conn)  # type: ignore[arg-type]
    assert conn.done == [f"PRAGMA {p}" for p in PRAGMAS]


async def test_pragmas_give_up_past_the_deadline_and_on_other_errors() -> None:
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        await _set_pragmas(_LockedConn(locked=10**6), retry_s=0.2)  # type: ignore[arg-type]
    with pytest.raises(sqlite3.OperationalError, match="disk I/O"):
        await _set_pragmas(_LockedConn(locked=1, error="disk I/O error"))  # type: ignore[arg-type]


async def test_glossaries_of_schema_1_are_kept_by_migration_2(store_factory: StoreFactory) -> None:
    """A store made before glossaries could be edited: its glossaries read back after the
    upgrade at revision 0, and edits work on them."""
    store = await store_factory()
    assert isinstance(store, SqlStore)
    made = await store.create_glossary("k1", "old", [GlossaryDictionary("en", "de", (("a", "b"),))])
    async with store.db.tx() as tx:  # back to schema 1
        await tx.execute("ALTER TABLE glossaries DROP COLUMN revision")
        await tx.execute("DELETE FROM schema_version WHERE version = 2")
    upgraded = await store_factory()
    assert await upgraded.get_glossary("k1", made.id) == made
    edit = [GlossaryDictionary("en", "de", (("c", "d"),))]
    assert (await upgraded.update_glossary("k1", made.id, None, edit, True)).revision == 1
