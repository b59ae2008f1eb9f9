"""The PostgreSQL backend: every replica opens its own small connection pool (asyncpg).

Queries are the shared ``?``-placeholder SQL, rewritten to ``$n`` once each. Claims skip
rows another transaction holds (``FOR UPDATE ... SKIP LOCKED``), per-owner limits and
migrations take transaction-scoped advisory locks, and a lost connection is a 503
(``StoreUnavailable``), not a 500.
"""

from __future__ import annotations

import functools
import hashlib
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import asyncpg

from serve_app.core.errors import StoreUnavailable
from serve_app.core.store_config import StoreLimits
from serve_app.store.sql.database import Clock, Database, Row, Tx
from serve_app.store.sql.store import SqlStore

_UNAVAILABLE = (OSError, asyncpg.PostgresConnectionError, asyncpg.InterfaceError)


@functools.lru_cache(maxsize=512)
def numbered(sql: str) -> str:
    """``?`` placeholders as ``$1``, ``$2``, ... (the shared SQL has no other ``?``)."""
    parts = sql.split("?")
    out = [parts[0]]
    for n, part in enumerate(parts[1:], 1):
        out.append(f"${n}{part}")
    return "".join(out)


class _PgTx:
    def __init__(self, conn: asyncpg.Connection) -> None:
        self.conn = conn

    async def fetch(self, sql: str, *args: Any) -> list[Row]:
        return list(await self.conn.fetch(numbered(sql), *args))

    async def fetchrow(self, sql: str, *args: Any) -> Row | None:
        row = await self.conn.fetchrow(numbered(sql), *args)
        return None if row is None else tuple(row)

    async def execute(self, sql: str, *args: Any) -> None:
        await self.conn.execute(numbered(sql), *args)

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        rows = list(rows)
        if rows:
            await self.conn.executemany(numbered(sql), rows)


class PostgresDatabase(Database):
    dialect = "postgres"
    skip_locked = "FOR UPDATE OF s SKIP LOCKED"

    def __init__(self, pool: asyncpg.Pool, limits: StoreLimits, clock: Clock) -> None:
        super().__init__(limits, clock)
        self.pool = pool

    @asynccontextmanager
    async def tx(self) -> AsyncIterator[_PgTx]:
        try:
            async with self.pool.acquire() as conn, conn.transaction():
                yield _PgTx(conn)
        except _UNAVAILABLE as exc:
            raise StoreUnavailable(f"The store (PostgreSQL) is unreachable: {exc}") from exc

    async def lock(self, tx: Tx, name: str) -> None:
        key = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)
        await tx.execute("SELECT pg_advisory_xact_lock(?)", key)

    async def close(self) -> None:
        await self.pool.close()


async def open_postgres(
    dsn: str,
    limits: StoreLimits | None = None,
    pool_size: int = 4,
    clock: Clock = time.time,
) -> SqlStore:
    """Connects to PostgreSQL at ``dsn`` and migrates it to the newest schema."""
    try:
        pool = await asyncpg.create_pool(dsn, min_size=1, max_size=pool_size)
    except _UNAVAILABLE as exc:
        raise StoreUnavailable(f"The store (PostgreSQL) is unreachable: {exc}") from exc
    db = PostgresDatabase(pool, limits or StoreLimits(), clock)
    try:
        await db.migrate()
    except BaseException:
        await pool.close()
        raise
    return SqlStore(db)
