"""Unusual but legal features of the ``openai`` client, driven against the app over the fake
engine (found 2026-12-07, each test fails on the code before its fix): a Responses API
answer echoed none of the settings it was asked with (``response.instructions``,
``.metadata``, ``.temperature`` ... read ``None``, where OpenAI's responses echo them), and
``metadata`` past OpenAI's limits was served."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from tests.fakes import FakeEngine
from tests.unit.api.test_openai_api import MODEL, openai_for

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
