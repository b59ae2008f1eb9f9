"""Every store test runs on both backends: SQLite in a temporary file, and PostgreSQL on a
real server (tests/postgres.py) with a fresh database per test."""

from __future__ import annotations

import calendar
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import pytest

from serve_app.store import Store, StoreLimits
from serve_app.store.postgres import open_postgres
from serve_app.store.sqlite import open_sqlite
from tests.postgres import PostgresServer, PostgresUnavailable, start_postgres

# 2026-11-15 12:00:30 UTC: mid-month, mid-minute.
START = float(calendar.timegm((2026, 11, 15, 12, 0, 30)))
LIMITS = StoreLimits(
    max_glossaries_per_owner=3,
    max_glossary_entries=50,
    max_glossary_dictionaries=5,
    max_term_chars=40,
    max_documents_per_owner=3,
    max_document_bytes=4096,
    max_document_segments=20,
    max_segment_chars=200,
    document_ttl_s=3600,
    max_segment_attempts=3,
)
_databases = itertools.count()


class FakeClock:
    def __init__(self, now: float = START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    try:
        with start_postgres() as server:
            yield server
    except PostgresUnavailable as exc:
        pytest.skip(f"PostgreSQL could not be installed or started: {exc}")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


StoreFactory = Callable[[], Awaitable[Store]]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def store_factory(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, clock: FakeClock
) -> AsyncIterator[StoreFactory]:
    """Opens stores on one database (two opened are two replicas' views of it)."""
    opened: list[Store] = []
    if request.param == "sqlite":
        path = str(tmp_path_factory.mktemp("store") / "store.db")

        async def make() -> Store:
            opened.append(await open_sqlite(path, LIMITS, clock))
            return opened[-1]
    else:
        server: PostgresServer = request.getfixturevalue("postgres_server")
        name = f"test_{next(_databases)}"
        server.psql(f"CREATE DATABASE {name}")

        async def make() -> Store:
            opened.append(await open_postgres(server.url(name), LIMITS, 4, clock))
            return opened[-1]

    yield make
    for store in opened:
        await store.close()


@pytest.fixture
async def store(store_factory: StoreFactory) -> Store:
    return await store_factory()
