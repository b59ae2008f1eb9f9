"""Planning off the event loop: work proportional to a text runs in a bounded thread pool.

Reading markup, language detection, the cache key's digest, tokenization, splitting and
prompt encoding take time in proportion to the text (the longest text allowed: a good part
of a second). On the replica's event loop they would stall every other request, the health
probe included; here they run in ``workers`` threads (the tokenizer releases the GIL while
it encodes), under the request's deadline, after a cheap admission check:

- characters waiting to be planned are bounded (``max_pending_chars``): beyond, a request
  is refused at once (503 ``overloaded``), before any work;
- a plan gets a ``Budget``: its deadline, and a flag set when the request is cancelled (its
  deadline passed, its client left). The planning code calls ``Budget.check`` between steps
  (each tokenizer call), so abandoned work stops within one step instead of running on.

Context variables (the caller's API key, which scopes the cache) do not follow work into an
executor's threads by themselves: each job runs in a copy of the caller's context.

A short plain text (``limits.inline_plan_chars``, 1,000 characters: a fraction of a
millisecond of work) is planned by the service on the loop instead: the hop to a thread and
back cost more than that on a busy replica (the thread waits for the GIL, the result for
the loop).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from serve_app.core.errors import DeadlineExceeded, Overloaded
from serve_app.core.metrics import ServiceMetrics

T = TypeVar("T")


class Budget:
    """A plan's deadline (``time.monotonic`` seconds) and its cancellation flag."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.cancelled = threading.Event()

    def check(self) -> None:
        """Raises ``DeadlineExceeded`` once the deadline passed or the request was cancelled."""
        if self.cancelled.is_set() or time.monotonic() > self.deadline:
            raise DeadlineExceeded("The request's deadline passed while its text was prepared.")

    def counting(self, count: Callable[[str], int]) -> Callable[[str], int]:
        """``count`` checked against this budget before each call."""

        def checked(text: str) -> int:
            self.check()
            return count(text)

        return checked


class Planner:
    """A bounded thread pool for planning, with the characters it holds bounded too."""

    def __init__(
        self, workers: int, max_pending_chars: int, metrics: ServiceMetrics, retry_after_s: int
    ) -> None:
        self.max_pending_chars = max_pending_chars
        self.metrics = metrics
        self.retry_after_s = retry_after_s
        self.pending_chars = 0
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="planner")

    async def run_all(
        self, jobs: Sequence[Callable[[Budget], T]], chars: Sequence[int], budget: Budget
    ) -> list[T]:
        """Each ``job(budget)`` in a pool thread, in a copy of the caller's context; their
        ``chars`` (the texts' lengths) are counted as pending until each thread is done with
        its job (not when the caller stops waiting: abandoned work counts until it has
        stopped). Refused at once (503) when the pending characters would pass the bound.
        If one job fails or the caller is cancelled, the others are stopped."""
        self._reserve(sum(chars))
        futures: list[Future[T]] = []
        for job, n in zip(jobs, chars, strict=True):
            future = self._pool.submit(contextvars.copy_context().run, job, budget)
            future.add_done_callback(functools.partial(self._done, n))
            futures.append(future)
        try:
            return list(await asyncio.gather(*map(asyncio.wrap_future, futures)))
        except BaseException:
            budget.cancelled.set()
            for future in futures:
                future.cancel()  # those not started never will
            raise

    def _reserve(self, chars: int) -> None:
        with self._lock:
            if self.pending_chars and self.pending_chars + chars > self.max_pending_chars:
                self.metrics.rejected("overloaded")
                raise Overloaded(
                    "The server is at capacity; retry after the delay given in Retry-After.",
                    retry_after_s=self.retry_after_s,
                )
            self.pending_chars += chars

    def _done(self, chars: int, _: Future[Any]) -> None:
        with self._lock:
            self.pending_chars -= chars

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
