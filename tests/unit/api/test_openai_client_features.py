"""Unusual but legal features of the ``openai`` client, driven against the app over the fake
engine (found 2026-12-07, each test fails on the code before its fix): a Responses API
answer echoed none of the settings it was asked with (``response.instructions``,
``.metadata``, ``.temperature`` ... read ``None``, where OpenAI's responses echo them),
``metadata`` past OpenAI's limits was served, and ``stream``, ``n`` and
``stream_options.include_usage`` sent as ``null`` (the client sends ``stream=None`` so; OpenAI's
schema says "boolean or null") were a 400. The client's own retry of an overload after
its ``Retry-After`` held already; it is tested here as the client drives it."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import openai
import pytest

from tests.asgi import chat_app_client
from tests.fakes import FakeEngine
from tests.unit.api.test_openai_api import MODEL, openai_for

ASK_BODY: dict[str, Any] = {"model": MODEL, "messages": [{"role": "user", "content": "Hello"}]}
SETTINGS: dict[str, Any] = {
    "instructions": "Translate into German.",
    "metadata": {"job": "42", "team": "docs"},
    "temperature": 0.3,
    "top_p": 0.9,
    "max_output_tokens": 64,
    "user": "user-7",
}


@pytest.fixture
def engine() -> FakeEngine:
    e = FakeEngine()
    e.reply = lambda prompt: prompt.splitlines()[-1].upper()
    return e


def assert_echoed(response: openai.types.responses.Response) -> None:
    """The settings asked, as the client reads them off the response."""
    assert response.instructions == SETTINGS["instructions"]
    assert response.metadata == SETTINGS["metadata"]
    assert (response.temperature, response.top_p) == (0.3, 0.9)
    assert response.max_output_tokens == 64
    assert response.user == "user-7"
    assert response.store is False  # nothing is kept here
    assert response.previous_response_id is None
    assert response.text is not None
    assert response.text.format is not None
    assert response.text.format.type == "text"
    assert response.output_text == "HELLO"


async def test_a_response_echoes_its_settings(http: httpx.AsyncClient) -> None:
    client = openai_for(http)
    response = await client.responses.create(model=MODEL, input="Hello", **SETTINGS)
    assert_echoed(response)


async def test_a_streamed_response_echoes_its_settings(http: httpx.AsyncClient) -> None:
    client = openai_for(http)
    async with client.responses.stream(model=MODEL, input="Hello", **SETTINGS) as stream:
        events = [event async for event in stream]
        final = await stream.get_final_response()
    created = events[0]
    assert created.type == "response.created"
    assert created.response.instructions == SETTINGS["instructions"]
    assert_echoed(final)


async def test_settings_left_out_are_echoed_as_unset(http: httpx.AsyncClient) -> None:
    response = await openai_for(http).responses.create(model=MODEL, input="Hello")
    assert response.instructions is None
    assert response.metadata == {}
    assert response.temperature is None  # the served model's own sampling applies


@pytest.mark.parametrize(
    ("metadata", "fragment"),
    [
        ({f"k{i}": "v" for i in range(17)}, "at most 16"),
        ({"k" * 65: "v"}, "keys of at most 64"),
        ({"k": "v" * 513}, "values of at most 512"),
    ],
)
async def test_metadata_past_openai_limits_is_a_400(
    http: httpx.AsyncClient, engine: FakeEngine, metadata: dict[str, str], fragment: str
) -> None:
    with pytest.raises(openai.BadRequestError, match=fragment):
        await openai_for(http).responses.create(model=MODEL, input="Hello", metadata=metadata)
    assert engine.requests == []


async def test_null_stream_and_n_are_their_defaults(
    http: httpx.AsyncClient, engine: FakeEngine
) -> None:
    client = openai_for(http)
    messages: Any = [{"role": "user", "content": "Hello"}]
    out = await client.chat.completions.create(model=MODEL, messages=messages, stream=None, n=None)
    assert [c.message.content for c in out.choices] == ["HELLO"]
    response = await client.responses.create(model=MODEL, input="Hello", stream=None)
    assert response.output_text == "HELLO"
    body = {"model": MODEL, "messages": messages, "stream": True}
    r = await http.post(
        "/v1/chat/completions", json=body | {"stream_options": {"include_usage": None}}
    )
    assert r.status_code == 200, r.text
    assert '"usage": {' not in r.text  # null asks for no usage chunk


async def test_a_refused_parameter_is_said_plainly(http: httpx.AsyncClient) -> None:
    """The client shows the message: pydantic's ``body: Value error, `` is no longer in it."""
    messages: Any = [{"role": "user", "content": "Hello"}]
    with pytest.raises(openai.BadRequestError) as caught:
        await openai_for(http).chat.completions.create(
            model=MODEL, messages=messages, logprobs=True
        )
    assert caught.value.body == {
        "message": "Invalid request: logprobs are not supported by this server",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_request",
    }
    with pytest.raises(openai.BadRequestError) as caught:
        await openai_for(http).chat.completions.create(model=MODEL, messages=messages, stop="")
    assert str(caught.value).endswith("Invalid request: stop: stop sequences must not be empty")


async def test_the_client_retries_an_overload_after_retry_after(engine: FakeEngine) -> None:
    """The ``openai`` client's own retry: the 503 of a full replica says ``Retry-After: 1``;
    the client waits it out and sends again, and the retry is served once there is room."""
    engine.hold = asyncio.Event()
    statuses: list[int] = []
    sent: list[float] = []

    async def record(response: httpx.Response) -> None:
        statuses.append(response.status_code)

    async def timed(request: httpx.Request) -> None:
        sent.append(time.monotonic())

    async with chat_app_client(
        engine, limits={"max_engine_requests": 1, "max_batch_items": 1}
    ) as http:
        busy = asyncio.create_task(http.post("/v1/chat/completions", json=ASK_BODY))
        while not engine.active:
            await asyncio.sleep(0.01)
        http.event_hooks = {"request": [timed], "response": [record]}
        client = openai.AsyncOpenAI(
            base_url="http://t/v1", api_key="any", http_client=http, max_retries=1
        )
        retried = asyncio.create_task(client.chat.completions.with_raw_response.create(**ASK_BODY))
        while not statuses:
            await asyncio.sleep(0.01)
        assert statuses == [503]
        engine.hold.set()
        assert (await busy).status_code == 200
        raw = await retried
    assert sorted(statuses) == [200, 200, 503]  # the busy one, the retry, the refusal
    assert raw.retries_taken == 1
    assert sent[1] - sent[0] >= 0.9  # Retry-After's second (its own backoff is 0.5 s at most)
    assert raw.parse().choices[0].message.content == "HELLO"
