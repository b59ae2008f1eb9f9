"""The project's HTTP client: calls the translation API and retries what is worth retrying.

Translation is idempotent, so a request that failed for a reason that may pass (the proxy's or
a replica's 503 with ``Retry-After``, a replica that died mid-request, a dropped connection) is
sent again after a backoff, honouring ``Retry-After``. Client errors (4xx other than 429) are
final. The benchmark's load generator and the reliability tests use this client, so "accepted
N, lost 0" is measured with the same code a user would run.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import httpx

# 500 is included: a replica that dies mid-request surfaces at Ray's proxy as a 500, and
# translating the same text again is harmless.
RETRYABLE_STATUSES = frozenset({429, 500, 502, 503, 504})


@dataclass(frozen=True)
class RetryPolicy:
    """How many times and how patiently a request is retried."""

    max_attempts: int = 6
    backoff_s: float = 0.25
    max_backoff_s: float = 8.0
    statuses: frozenset[int] = RETRYABLE_STATUSES
    retry_connection_errors: bool = True

    def delay(self, attempt: int, retry_after: str | None = None) -> float:
        """Seconds to wait before attempt ``attempt + 1``: Retry-After if sent, else an
        exponential backoff with full jitter (spreads retries of a burst apart)."""
        if retry_after is not None:
            try:
                return min(max(float(retry_after), 0.0), self.max_backoff_s)
            except ValueError:
                pass
        ceiling = min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1))
        return random.uniform(0, ceiling)


NO_RETRY = RetryPolicy(max_attempts=1)


@dataclass
class Outcome:
    """What one logical request ended with, after any retries."""

    status: int | None  # None: no HTTP answer at all (connection failed every time)
    body: Any = None
    latency_s: float = 0.0
    attempts: int = 1
    error: str | None = None
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == 200


class TranslationError(Exception):
    """A translation request failed for good (a client error, or retries exhausted)."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(f"status {outcome.status}: {outcome.error or outcome.body}")
        self.outcome = outcome


class TranslationClient:
    """Async client of the translation API: ``async with TranslationClient(url) as c: ...``"""

    def __init__(
        self,
        base_url: str,
        *,
        retry: RetryPolicy = NO_RETRY,
        timeout_s: float = 330.0,
        api_key: str | None = None,
        max_connections: int = 256,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.retry = retry
        self._http = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            timeout=httpx.Timeout(timeout_s, connect=10.0),
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=256),
            headers=headers,
            transport=transport,
        )

    async def __aenter__(self) -> TranslationClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    @property
    def http(self) -> httpx.AsyncClient:
        """The underlying HTTP client (base URL, timeouts and auth set), e.g. to stream."""
        return self._http

    async def aclose(self) -> None:
        await self._http.aclose()

    async def post(self, path: str, body: dict[str, Any]) -> Outcome:
        """POSTs ``body`` as JSON, retrying per the policy; never raises for HTTP errors."""
        start = time.perf_counter()
        outcome = Outcome(status=None)
        for attempt in range(1, self.retry.max_attempts + 1):
            outcome = await self._attempt(path, body)
            outcome.attempts = attempt
            if not self._retryable(outcome) or attempt == self.retry.max_attempts:
                break
            await asyncio.sleep(self.retry.delay(attempt, outcome.headers.get("retry-after")))
        outcome.latency_s = time.perf_counter() - start
        return outcome

    async def translate(self, text: str, source_lang: str, target_lang: str, **fields: Any) -> Any:
        """The response body of ``POST /translate``; raises ``TranslationError`` on failure."""
        body = {"text": text, "source_lang": source_lang, "target_lang": target_lang, **fields}
        return self._unwrap(await self.post("/translate", body))

    async def translate_batch(self, items: list[dict[str, Any]], **fields: Any) -> Any:
        """The response body of ``POST /translate/batch``; raises ``TranslationError``."""
        return self._unwrap(await self.post("/translate/batch", {"items": items, **fields}))

    async def _attempt(self, path: str, body: dict[str, Any]) -> Outcome:
        try:
            response = await self._http.post(path, json=body)
        except httpx.HTTPError as exc:
            # Connection refused or reset, read timeout: no HTTP answer.
            return Outcome(status=None, error=f"{type(exc).__name__}: {exc}")
        try:
            parsed: Any = response.json()
        except ValueError:
            parsed = response.text  # Ray's proxy answers some errors in plain text
        return Outcome(status=response.status_code, body=parsed, headers=dict(response.headers))

    def _retryable(self, outcome: Outcome) -> bool:
        if outcome.status is None:
            return self.retry.retry_connection_errors
        return outcome.status in self.retry.statuses

    @staticmethod
    def _unwrap(outcome: Outcome) -> Any:
        if not outcome.ok:
            raise TranslationError(outcome)
        return outcome.body
