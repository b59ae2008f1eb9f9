"""The embedded backend: one SQLite file, written by one process.

SQLite allows one writer, and several nodes cannot share its file, so exactly one
``StoreDeployment`` replica (on the head node) opens it and every other replica reaches it
through a handle (``deployment.py``). Inside that process, transactions are serialized by an
asyncio lock on one connection (``BEGIN IMMEDIATE``), which makes every charge and claim
atomic. WAL journaling with ``synchronous=NORMAL`` keeps each committed transaction across a
crash of the process (a power loss may take the last few).
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiosqlite

from serve_app.core.store_config import StoreLimits
from serve_app.store.sql.database import Clock, Database, Row
from serve_app.store.sql.store import SqlStore


class _SqliteTx:
    def __init__(self, conn: aiosqlite.Connection) -> None:
        self.conn = conn

    async def fetch(self, sql: str, *args: Any) -> list[Row]:
        return list(await self.conn.execute_fetchall(sql, args))

    async def fetchrow(self, sql: str, *args: Any) -> Row | None:
        async with self.conn.execute(sql, args) as cursor:
            row = await cursor.fetchone()
            # Drain the statement (an UPDATE ... RETURNING applies as it is stepped).
            await cursor.fetchall()
        return None if row is None else tuple(row)

    async def execute(self, sql: str, *args: Any) -> None:
        await self.conn.execute(sql, args)

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        await self.conn.executemany(sql, rows)


class SqliteDatabase(Database):
    dialect = "sqlite"

    def __init__(self, conn: aiosqlite.Connection, limits: StoreLimits, clock: Clock) -> None:
        super().__init__(limits, clock)
        self.conn = conn
        self._lock = asyncio.Lock()

    @asynccontextmanager
    async def tx(self) -> AsyncIterator[_SqliteTx]:
        async with self._lock:
            try:
                # Inside the try: a task cancelled while BEGIN runs (a client gone) still
                # rolls back, or the transaction would stay open and wedge the store. The
                # connection's thread runs statements in order, so the rollback follows it.
                await self.conn.execute("BEGIN IMMEDIATE")
                yield _SqliteTx(self.conn)
            except BaseException:
                await self.conn.rollback()
                raise
            await self.conn.commit()

    async def lock(self, tx: Any, name: str) -> None:
        """Nothing to do: this process's transactions run one at a time already."""

    async def close(self) -> None:
        await self.conn.close()


# busy_timeout: the keys command may write to the same file from another process. It comes
# first: switching to WAL waits for another connection's transaction only with it.
PRAGMAS = ("busy_timeout=10000", "journal_mode=WAL", "synchronous=NORMAL", "foreign_keys=ON")
# The switch to WAL needs the file to itself, and SQLite answers "database is locked" at once,
# without its busy timeout, when another connection opening the same new file holds it (seen
# with 4 opening together on a loaded machine): tried again for up to this long.
LOCKED_RETRY_S = 10.0


async def _set_pragmas(conn: aiosqlite.Connection, retry_s: float = LOCKED_RETRY_S) -> None:
    deadline = time.monotonic() + retry_s
    for pragma in PRAGMAS:
        while True:
            try:
                await conn.execute(f"PRAGMA {pragma}")
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.05)


async def open_sqlite(
    path: str, limits: StoreLimits | None = None, clock: Clock = time.time
) -> SqlStore:
    """Opens (creating, and migrating to the newest schema) the SQLite store at ``path``."""
    if path != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    conn = await aiosqlite.connect(path, isolation_level=None)
    db = SqliteDatabase(conn, limits or StoreLimits(), clock)
    try:
        await _set_pragmas(conn)
        await db.migrate()
    except BaseException:
        await conn.close()
        raise
    return SqlStore(db)
