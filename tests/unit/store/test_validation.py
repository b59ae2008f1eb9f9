"""The store's checks off the event loop: a large glossary's terms are checked in a worker
thread (they were checked in the store's coroutine: 4 s for 20 M characters, with every
key check and quota charge of the replicas waiting behind it)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from serve_app.store import GlossaryDictionary, StoreLimits, validation
from serve_app.store.sqlite import open_sqlite

pytestmark = pytest.mark.unit


def _recording(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    threads: list[int] = []
    check = validation.check_dictionaries

    def recorded(
        dictionaries: list[GlossaryDictionary], limits: StoreLimits
    ) -> list[GlossaryDictionary]:
        threads.append(threading.get_ident())
        return check(dictionaries, limits)

    monkeypatch.setattr(validation, "check_dictionaries", recorded)
    return threads


def _dictionary(entries: int, chars: int) -> GlossaryDictionary:
    terms = tuple((f"{i:05d}{'s' * chars}", f"{i:05d}{'t' * chars}") for i in range(entries))
    return GlossaryDictionary("en", "de", terms)


async def test_a_large_glossary_is_checked_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads = _recording(monkeypatch)
    store = await open_sqlite(str(tmp_path / "s.db"), StoreLimits())
    try:
        created = await store.create_glossary("k", "big", [_dictionary(1000, 100)])
        assert created.entry_count == 1000
        await store.create_glossary("k", "small", [_dictionary(3, 10)])
    finally:
        await store.close()
    loop_thread = threading.get_ident()
    assert threads[0] != loop_thread
    assert threads[1] == loop_thread  # a small one is not worth a thread
