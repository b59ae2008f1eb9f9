"""The autoscaling ramp's load: closed-loop users, added and retired as the profile says.

Each user sends one request after another through the project's retrying client
(``serve_app.client.TranslationClient`` with a ``RetryPolicy``: a 503 with Retry-After is
retried, as a real client would), so a request counts as lost only if it never got a 200.
A retired user finishes the request it has in flight first: lowering the users never cuts a
request. Texts are fresh: the workload's pool is cycled with a round number in front of each
text, so vLLM's prefix cache never sees the same text twice.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.ramp_profile import Stage
from bench.ramp_timeline import Answer
from bench.workloads import Item
from serve_app.client import TranslationClient


def loop_time() -> float:
    """The running loop's clock, which the users and the profile keep: ``time.monotonic()``
    on asyncio's own loops; a test's virtual clock (looptime), under which the load follows
    its profile exactly however busy the machine."""
    return asyncio.get_running_loop().time()


def fresh_bodies(items: Sequence[Item]) -> Iterator[dict[str, Any]]:
    """Request bodies cycling over ``items``; from the second round on each text starts with
    its round number (no two bodies alike)."""
    for round_ in itertools.count():
        for item in items:
            text = item.text if round_ == 0 else f"{round_}. {item.text}"
            yield {"text": text, "source_lang": item.source_lang, "target_lang": item.target_lang}


@dataclass
class Users:
    """Closed-loop users sharing ``client``; answers timed from ``start`` (``loop_time``)."""

    client: TranslationClient
    bodies: Iterator[dict[str, Any]]
    start: float
    answers: list[Answer] = field(default_factory=list)
    sent: int = 0
    _active: list[asyncio.Event] = field(default_factory=list)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self._active)

    def set(self, n: int) -> None:
        """``n`` users from now: new ones start at once, retired ones after their request."""
        while len(self._active) < n:
            stop = asyncio.Event()
            self._active.append(stop)
            self._tasks.append(asyncio.create_task(self._user(stop)))
        while len(self._active) > n:
            self._active.pop().set()

    async def drain(self, timeout_s: float) -> None:
        """Retires every user and waits for their last requests (cancelled after timeout)."""
        self.set(0)
        if not self._tasks:
            return
        _, pending = await asyncio.wait(self._tasks, timeout=timeout_s)
        for task in pending:
            task.cancel()

    async def _user(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            body = next(self.bodies)
            self.sent += 1
            sent = loop_time()
            outcome = await self.client.post("/translate", body)
            self.answers.append(
                Answer(
                    sent - self.start,
                    loop_time() - self.start,
                    outcome.status,
                    outcome.headers.get("x-replica"),
                    outcome.attempts,
                )
            )


async def drive(users: Users, stages: list[Stage], deadline: float) -> float:
    """Offers each stage's users until its end or ``deadline`` (``loop_time``), whichever comes
    first; returns when the load ended, in seconds since ``users.start``."""
    for stage in stages:
        now = loop_time()
        if now >= deadline:
            break
        users.set(stage.users)
        await asyncio.sleep(max(0.0, min(users.start + stage.end_s, deadline) - now))
    return loop_time() - users.start
