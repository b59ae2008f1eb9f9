"""Fixtures of the HTTP layer's unit tests: the fake engine and a client of the app over it
(``chat`` prompt family, ``tests/asgi.py``), as ``client`` and as ``http`` (the OpenAI
modules' name: their ``client`` is the ``openai`` one over it). A module that needs another
engine (one that replies otherwise) or another app defines its own ``engine`` or
``client``, which pytest takes over these. ``store``: an empty SQLite store in the test's
folder (a module needing limits or keys in it defines its own)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from serve_app.store import Store
from serve_app.store.sqlite import open_sqlite
from tests.asgi import chat_app_client
from tests.fakes import FakeEngine


@pytest.fixture
def engine() -> FakeEngine:
    return FakeEngine()


@pytest.fixture
async def client(engine: FakeEngine) -> AsyncIterator[httpx.AsyncClient]:
    async with chat_app_client(engine) as c:
        yield c


@pytest.fixture
async def http(engine: FakeEngine) -> AsyncIterator[httpx.AsyncClient]:
    async with chat_app_client(engine) as c:
        yield c


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    opened = await open_sqlite(str(tmp_path / "s.db"))
    yield opened
    await opened.close()
