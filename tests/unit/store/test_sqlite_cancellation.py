"""A request cancelled while the SQLite store begins a transaction (a client that hangs up,
a deadline) must not leave the transaction open: every later store call on the replica
would fail ("cannot start a transaction within a transaction"). Found by the hostile-request
fuzzing of the document routes (tests/unit/api/test_hostile_requests.py)."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from serve_app.store.sqlite import open_sqlite


async def test_a_transaction_cancelled_at_its_begin_is_rolled_back(tmp_path: Path) -> None:
    store = await open_sqlite(str(tmp_path / "s.db"))
    db = store.db

    async def use() -> None:
        async with db.tx():
            await asyncio.sleep(0)

    try:
        task = asyncio.create_task(use())
        await asyncio.sleep(0)  # the task now awaits its BEGIN
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        async with asyncio.timeout(10), db.tx():
            pass
        assert await store.usage("anyone") is not None  # and the store still answers
    finally:
        await store.close()
