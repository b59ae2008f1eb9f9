"""Usage without keys, counted in the replica and added to the store once a second.

Callers without a key have no limits, so their characters need no check before the work:
only ``/usage`` and ``/v2/usage`` read them. Charging each request to the store on its way
in put a round trip to the store's deployment (and a database write) in front of every
translation, the default setup's most common request: on an H100 it was a visible part of
the replica's CPU per request and of the time to the first streamed token. Here the
replica adds a request's characters to a local counter (refunds subtract) and one task
sends the net amount every ``interval_s``. A replica's own reads flush first, so a client
that talks to one replica sees its counts at once; other replicas' counts arrive within
``interval_s``; a replica that dies loses at most that much anonymous counting. Keyed
requests are still charged in the store one by one: their quotas must hold exactly.
"""

from __future__ import annotations

import asyncio
import logging

from serve_app.store.protocol import Store

logger = logging.getLogger("ray.serve.translator")


class AnonymousUsage:
    """A replica's not yet stored anonymous characters (``add``), stored by ``flush``."""

    def __init__(self, store: Store, key_id: str, interval_s: float = 1.0) -> None:
        self.store, self.key_id, self.interval_s = store, key_id, interval_s
        self.pending = 0
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    def add(self, characters: int) -> None:
        """Counts ``characters`` (negative: a refund); stored within ``interval_s``."""
        self.pending += characters
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._flush_periodically())

    async def flush(self) -> None:
        """Stores what was counted so far (kept for the next flush if the store fails)."""
        async with self._lock:
            amount, self.pending = self.pending, 0
            if amount == 0:
                return
            try:
                if amount > 0:
                    await self.store.charge(self.key_id, amount, requests=0)
                else:
                    usage = await self.store.usage(self.key_id)
                    await self.store.refund(self.key_id, -amount, usage.month)
            except BaseException:
                self.pending += amount
                raise

    async def _flush_periodically(self) -> None:
        while self.pending:
            await asyncio.sleep(self.interval_s)
            try:
                await self.flush()
            except Exception:  # the store is down: counted again at the next tick
                logger.warning("anonymous usage not stored yet; retrying", exc_info=True)
