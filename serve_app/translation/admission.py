"""Admission control: a replica never holds more than ``max_engine_requests`` engine requests.

A request is admitted with the engine requests its plan needs (``admit``: 503 ``overloaded``
beyond the limit) and holds them as a ``Lease`` until it ends. Every engine request then
passes through ``slot``: it runs on one of its request's own reserved slots when one is free,
and otherwise (a piece re-split after it ran out of tokens, a degenerate loop decoded again,
a markup segment's fallback) takes one more from the replica, waiting for one to be freed
if none is left. So the count is exact and the bound holds whatever a request does after
admission; requests already admitted are served before new ones are admitted.

No wait can last forever: a slot in use is an engine request running, which finishes (or is
aborted at its request's deadline), and a request's idle reserved slots serve its own waiters.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar

from serve_app.core.errors import Overloaded
from serve_app.core.metrics import ServiceMetrics


class Lease:
    """The engine-request slots one admitted request holds."""

    def __init__(self, reserved: int) -> None:
        self.reserved = reserved
        self.busy = 0  # of the reserved slots, those running an engine request

    @property
    def free(self) -> bool:
        return self.busy < self.reserved


_lease: ContextVar[Lease | None] = ContextVar("serve_app_admission_lease", default=None)


class Admission:
    """Counts the engine requests a replica holds (``in_flight``) against ``limit``."""

    def __init__(self, limit: int, metrics: ServiceMetrics, retry_after_s: int) -> None:
        self.limit = limit
        self.metrics = metrics
        self.retry_after_s = retry_after_s
        self.in_flight = 0
        self.waiting = 0  # engine requests of admitted requests waiting for a slot
        self._changed = asyncio.Event()

    def check(self, n: int) -> None:
        """Refuses (503) a request needing ``n`` engine requests that do not fit now."""
        if self.waiting or self.in_flight + n > self.limit:
            self.metrics.rejected("overloaded")
            raise Overloaded(
                "The server is at capacity; retry after the delay given in Retry-After.",
                retry_after_s=self.retry_after_s,
            )

    @contextmanager
    def admit(self, n: int) -> Iterator[Lease]:
        """Reserves ``n`` slots for the block's engine requests (``slot``), or refuses."""
        self.check(n)
        lease = Lease(n)
        self._add(n)
        token = _lease.set(lease)
        try:
            yield lease
        finally:
            _lease.reset(token)
            self._add(-n)

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """A slot for one engine request: the current request's own, or one more."""
        lease = _lease.get()
        own = await self._take(lease)
        try:
            yield
        finally:
            if own and lease is not None:
                lease.busy -= 1
                self._signal()
            else:
                self._add(-1)

    async def _take(self, lease: Lease | None) -> bool:
        """Waits for a slot; True if it is one of ``lease``'s reserved slots."""
        self.waiting += 1
        try:
            while True:
                if lease is not None and lease.free:
                    lease.busy += 1
                    return True
                if self.in_flight < self.limit:
                    self._add(1)
                    return False
                await self._changed.wait()
        finally:
            self.waiting -= 1

    def _add(self, n: int) -> None:
        self.in_flight += n
        self.metrics.load(self.in_flight)
        if n < 0:
            self._signal()

    def _signal(self) -> None:
        """Wakes every waiter to look again (they re-check; only those that fit go on)."""
        self._changed.set()
        self._changed = asyncio.Event()
