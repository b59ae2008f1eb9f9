"""The project's retrying client, against scripted HTTP answers (no server)."""

from __future__ import annotations

import httpx
import pytest

from serve_app.client import RetryPolicy, TranslationClient, TranslationError

FAST = RetryPolicy(max_attempts=4, backoff_s=0.001, max_backoff_s=0.01)


def scripted(*answers: httpx.Response | Exception) -> tuple[httpx.MockTransport, list[int]]:
    """A transport that gives the answers in order; ``calls`` counts the requests."""
    calls: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        answer = answers[min(len(calls), len(answers) - 1)]
        calls.append(1)
        if isinstance(answer, Exception):
            raise answer
        return answer

    return httpx.MockTransport(handler), calls


OK = httpx.Response(200, json={"translation": "Hallo"})


async def test_retries_503_then_succeeds() -> None:
    busy = httpx.Response(503, headers={"Retry-After": "0"}, text="Request dropped")
    transport, calls = scripted(busy, busy, OK)
    async with TranslationClient("http://x", retry=FAST, transport=transport) as client:
        body = await client.translate("Hello", "en", "de")
    assert body == {"translation": "Hallo"}
    assert len(calls) == 3


async def test_retries_connection_errors() -> None:
    transport, _ = scripted(httpx.ConnectError("refused"), OK)
    async with TranslationClient("http://x", retry=FAST, transport=transport) as client:
        outcome = await client.post("/translate", {"text": "a"})
    assert outcome.ok
    assert outcome.attempts == 2


async def test_client_errors_are_final() -> None:
    bad = httpx.Response(400, json={"error": {"code": "unsupported_language", "message": "x"}})
    transport, calls = scripted(bad, OK)
    async with TranslationClient("http://x", retry=FAST, transport=transport) as client:
        with pytest.raises(TranslationError) as info:
            await client.translate("Hello", "en", "xx")
    assert info.value.outcome.status == 400
    assert len(calls) == 1


async def test_gives_up_after_max_attempts() -> None:
    transport, calls = scripted(httpx.Response(503, text="busy"))
    async with TranslationClient("http://x", retry=FAST, transport=transport) as client:
        outcome = await client.post("/translate", {"text": "a"})
    assert outcome.status == 503
    assert outcome.attempts == 4
    assert len(calls) == 4


def test_delay_honours_retry_after_and_caps_backoff() -> None:
    policy = RetryPolicy(backoff_s=1.0, max_backoff_s=4.0)
    assert policy.delay(1, "2") == 2.0
    assert policy.delay(1, "600") == 4.0
    assert all(0 <= policy.delay(10) <= 4.0 for _ in range(50))
