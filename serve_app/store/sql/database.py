"""What the SQL store needs from a database driver: transactions and numbered migrations.

The queries (glossaries.py, keys.py, documents.py) are written once, with ``?``
placeholders, in the SQL that SQLite and PostgreSQL share; each backend supplies a
``Database`` (sqlite.py, postgres.py) that runs them. Migrations are numbered SQL files
(``migrations/<dialect>/NNNN_name.sql``) applied in order at start, each in its own
transaction, and recorded in ``schema_version``.
"""

from __future__ import annotations

import re
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from importlib import resources
from typing import Any, Protocol

from serve_app.core.store_config import StoreLimits

Row = Sequence[Any]
Clock = Callable[[], float]


class Tx(Protocol):
    """One transaction; statements use ``?`` placeholders."""

    async def fetch(self, sql: str, *args: Any) -> list[Row]: ...

    async def fetchrow(self, sql: str, *args: Any) -> Row | None: ...

    async def execute(self, sql: str, *args: Any) -> None: ...

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None: ...


class Database(ABC):
    """A connection (pool) with the dialect's few differences."""

    dialect: str
    # Appended to a SELECT whose rows a transaction will update (claims): rows another
    # transaction holds are skipped instead of waited for.
    skip_locked: str = ""

    def __init__(self, limits: StoreLimits, clock: Clock = time.time) -> None:
        self.limits = limits
        self.clock = clock

    @abstractmethod
    def tx(self) -> AbstractAsyncContextManager[Tx]:
        """A transaction: committed when the block ends, rolled back if it raises."""

    @abstractmethod
    async def lock(self, tx: Tx, name: str) -> None:
        """Serializes transactions that take the same lock ``name`` until they end (a
        count-then-insert under a per-owner limit; migrations of replicas starting)."""

    @abstractmethod
    async def close(self) -> None: ...

    def now(self) -> float:
        return float(self.clock())

    async def migrate(self) -> int:
        """Applies the migrations not applied yet; returns the schema version."""
        version = 0
        for migration in migrations(self.dialect):
            async with self.tx() as tx:
                # Under the lock: replicas starting together would race to create it.
                await self.lock(tx, "migrations")
                await tx.execute(
                    "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, "
                    "name TEXT NOT NULL, applied_at DOUBLE PRECISION NOT NULL)"
                )
                row = await tx.fetchrow("SELECT MAX(version) FROM schema_version")
                version = int(row[0] or 0) if row else 0
                if migration.version <= version:
                    continue
                for statement in migration.statements():
                    await tx.execute(statement)
                await tx.execute(
                    "INSERT INTO schema_version (version, name, applied_at) VALUES (?, ?, ?)",
                    migration.version,
                    migration.name,
                    self.now(),
                )
                version = migration.version
        return version


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    def statements(self) -> list[str]:
        """The file's statements (split at ``;`` ending a line; comments dropped)."""
        lines = [ln for ln in self.sql.splitlines() if not ln.lstrip().startswith("--")]
        parts = re.split(r";\s*$", "\n".join(lines), flags=re.MULTILINE)
        return [p.strip() for p in parts if p.strip()]


_MIGRATION = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


def migrations(dialect: str) -> list[Migration]:
    """The dialect's migrations in order of their numbers (which must not repeat)."""
    folder = resources.files("serve_app.store") / "migrations" / dialect
    found = []
    for entry in folder.iterdir():
        if match := _MIGRATION.match(entry.name):
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    numbers = [m.version for m in found]
    if len(set(numbers)) != len(numbers) or not found:
        raise RuntimeError(f"store migrations of {dialect}: missing or repeated numbers")
    return found
