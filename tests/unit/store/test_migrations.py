"""Migrations: numbered files applied once, recorded in schema_version, safe when several
replicas start at once."""

from __future__ import annotations

import asyncio

import pytest

from serve_app.store.sql.database import Migration, migrations
from serve_app.store.sql.store import SqlStore
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
