"""An unexpected exception (not a ``ServiceError``) in the middle of an OpenAI stream.

Both OpenAI streams ended silently on one: no error event, no ``[DONE]``, and the official
``openai`` client read a stream that simply stopped (a chat completion cut short looked
finished). Now each ends with an error event in OpenAI's shape that quotes the request id,
on which the client raises ``APIError``, and the exception is logged once. The client is
driven against the ASGI app over the fake engine, which raises ``RuntimeError`` after its
first chunk.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import openai
import pytest

from tests.fakes import FakeEngine

MODEL = "tencent/HY-MT1.5-1.8B"
REQUEST_ID = "req-stream-bug-1"
MESSAGES = [{"role": "user", "content": "Hello, world! A text of several chunks."}]


@pytest.fixture
def engine() -> FakeEngine:
    e = FakeEngine()
    e.fail_after_chunks, e.fail_with = 1, RuntimeError("a bug in the engine layer")
    return e


def client_of(http: httpx.AsyncClient) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url="http://t/v1", api_key="k", http_client=http, max_retries=0)


async def read(stream: AsyncIterator[Any], seen: Callable[[Any], None]) -> None:
    """Reads ``stream`` to its end (or the error it raises), each item to ``seen``."""
    async for item in stream:
        seen(item)


def unexpected_logs(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.exc_info and REQUEST_ID in r.getMessage()]


def check_raised(error: openai.APIError, caplog: pytest.LogCaptureFixture) -> None:
    """The client's error: OpenAI's server error quoting the request id, nothing of the
    exception's text; the exception logged once, with its traceback."""
    assert REQUEST_ID in error.message
    assert "a bug" not in error.message
    assert error.code == "internal_error"
    assert error.type == "server_error"
    (logged,) = unexpected_logs(caplog)
    assert logged.exc_info is not None
    assert logged.exc_info[0] is RuntimeError


async def test_chat_completion_stream_raises_in_the_client(
    http: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    stream = await client_of(http).chat.completions.create(
        model=MODEL,
        messages=MESSAGES,  # type: ignore[arg-type]
        stream=True,
        extra_headers={"X-Request-ID": REQUEST_ID},
    )
    contents: list[str | None] = []
    with pytest.raises(openai.APIError) as raised:
        await read(stream, lambda chunk: contents.append(chunk.choices[0].delta.content))
    assert contents == ["", "Hell"]  # the role chunk and the first chunk came before it
    check_raised(raised.value, caplog)


async def test_chat_completion_stream_ends_with_done(http: httpx.AsyncClient) -> None:
    """On the wire: the error in OpenAI's shape, then ``[DONE]``, as after a ServiceError."""
    body = {"model": MODEL, "messages": MESSAGES, "stream": True}
    r = await http.post("/v1/chat/completions", json=body, headers={"X-Request-ID": REQUEST_ID})
    assert r.status_code == 200
    events = [e.removeprefix("data: ") for e in r.text.strip().split("\n\n")]
    assert events[-1] == "[DONE]"
    error = json.loads(events[-2])["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == "internal_error"
    assert REQUEST_ID in error["message"]


async def test_response_stream_raises_in_the_client(
    http: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    stream = await client_of(http).responses.create(
        model=MODEL,
        input=MESSAGES[0]["content"],
        stream=True,
        extra_headers={"X-Request-ID": REQUEST_ID},
    )
    kinds: list[str] = []
    with pytest.raises(openai.APIError) as raised:
        await read(stream, lambda event: kinds.append(event.type))
    assert kinds[0] == "response.created"
    assert "response.output_text.delta" in kinds
    assert "response.completed" not in kinds
    check_raised(raised.value, caplog)
