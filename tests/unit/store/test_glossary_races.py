"""Edits and deletes of one glossary racing from two replicas on PostgreSQL: the delete of a
glossary while another replica's edit of it is inside its transaction.

Every edit of an owner's glossaries runs under the owner's advisory lock; a delete that did
not take it could commit between the edit's reads and its writes, and the edit's insert of a
dictionary then failed its foreign key (``ForeignKeyViolationError``: a 500), or the two
deadlocked on the glossary's row and its entries. SQLite runs one transaction at a time in
its process, so the race exists only on PostgreSQL.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import asyncpg
import pytest

from serve_app.core.errors import GlossaryNotFound
from serve_app.store import GlossaryDictionary, Store
from serve_app.store.sql import glossaries
from tests.postgres import PostgresServer
from tests.unit.store.conftest import StoreFactory

pytestmark = pytest.mark.unit

EN_DE = (("cart", "Warenkorb"), ("price", "Preis"))


def _only_postgres(request: pytest.FixtureRequest) -> PostgresServer:
    if request.node.callspec.params["store_factory"] != "postgres":
        pytest.skip("SQLite runs one transaction at a time: no interleaving to race")
    server: PostgresServer = request.getfixturevalue("postgres_server")
    return server


async def _delete_waits_or_ends(server: PostgresServer, delete: asyncio.Task[None]) -> None:
    """Until ``delete`` has ended or its transaction waits for a lock (polled: what the
    server says, not a time guessed)."""
    conn = await asyncpg.connect(server.url())
    try:
        while not delete.done():
            waiting = await conn.fetchval(
                "SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            )
            if waiting:
                return
            await asyncio.sleep(0.01)
    finally:
        await conn.close()


@pytest.mark.parametrize("merge", [True, False])
async def test_a_delete_during_an_edit_waits_for_it_and_neither_fails(
    store_factory: StoreFactory,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    merge: bool,
) -> None:
    server = _only_postgres(request)
    editor, deleter = await store_factory(), await store_factory()  # two replicas
    g = await editor.create_glossary("k1", "shop", [GlossaryDictionary("en", "de", EN_DE)])
    inside, release = asyncio.Event(), asyncio.Event()
    edited: Callable[..., Awaitable[GlossaryDictionary]] = glossaries._edited

    async def paused(*args: object, **kwargs: object) -> GlossaryDictionary:
        inside.set()  # the edit has read the glossary and its pairs; writes come next
        await release.wait()
        return await edited(*args, **kwargs)

    monkeypatch.setattr(glossaries, "_edited", paused)
    edit = GlossaryDictionary("en", "de", (("tax", "Steuer"),))
    update = asyncio.create_task(editor.update_glossary("k1", g.id, None, [edit], merge=merge))
    delete = None
    try:
        await asyncio.wait_for(inside.wait(), 30)
        delete = asyncio.create_task(deleter.delete_glossary("k1", g.id))
        await asyncio.wait_for(_delete_waits_or_ends(server, delete), 30)
    finally:
        release.set()  # never left holding the lock: the stores could not close
    assert delete is not None
    after = await asyncio.wait_for(update, 30)  # before the fix: ForeignKeyViolationError
    await asyncio.wait_for(delete, 30)
    assert [d.entry_count for d in after.dictionaries] == [3 if merge else 1]
    assert after.revision == 1
    with pytest.raises(GlossaryNotFound):
        await editor.get_glossary("k1", g.id)
    assert await editor.list_glossaries("k1") == []


async def test_an_edit_after_a_delete_is_not_found(
    store_factory: StoreFactory, request: pytest.FixtureRequest
) -> None:
    """The other order: the delete first, the edit waiting for it is a 404."""
    _only_postgres(request)
    store: Store = await store_factory()
    g = await store.create_glossary("k1", "shop", [GlossaryDictionary("en", "de", EN_DE)])
    edit = GlossaryDictionary("en", "de", (("tax", "Steuer"),))
    await store.delete_glossary("k1", g.id)
    with pytest.raises(GlossaryNotFound):
        await store.update_glossary("k1", g.id, None, [edit], merge=True)
