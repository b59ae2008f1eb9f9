"""Odd but valid OpenAI requests, as the ``openai`` client sends them, over the fake engine
(found 2026-12-06; each test fails on the code before its fix): a message's text parts were
joined with nothing (``Good`` and ``morning`` reached the model as ``Goodmorning``; vLLM
joins them a line apart), and the Responses API answered with plain text, as if unasked,
what chat completions refuse (``tool_choice: "required"``, ``top_logprobs``) and what names
state stored at OpenAI (a ``conversation``, a stored ``prompt``)."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from tests.fakes import FakeEngine
from tests.unit.api.test_openai_api import MODEL, openai_for

PARTS = [{"type": "text", "text": "Good"}, {"type": "text", "text": "morning"}]


@pytest.fixture
def engine() -> FakeEngine:
    e = FakeEngine()
    e.reply = lambda prompt: prompt.splitlines()[-1].upper()
    return e


def prompt_of(engine: FakeEngine) -> str:
    """The last engine request's prompt (the fake tokenizer: one id per character, the
    messages a line apart)."""
    return "".join(map(chr, engine.requests[-1].prompt_token_ids))


async def test_text_parts_are_joined_a_line_apart(
    http: httpx.AsyncClient, engine: FakeEngine
) -> None:
    client = openai_for(http)
    messages: Any = [
        {"role": "system", "content": [{"type": "text", "text": "Translate into German."}]},
        {"role": "user", "content": PARTS},
    ]
    out = await client.chat.completions.create(model=MODEL, messages=messages)
    assert prompt_of(engine) == "Translate into German.\nGood\nmorning"
    assert out.choices[0].message.content == "MORNING"
    parts = [{"type": "input_text", "text": p["text"]} for p in PARTS]
    await client.responses.create(model=MODEL, input=[{"role": "user", "content": parts}])  # type: ignore[arg-type,misc]
    assert prompt_of(engine) == "Good\nmorning"


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"tool_choice": "required"}, "tools"),
        ({"tool_choice": {"type": "function", "name": "f"}}, "tools"),
        ({"top_logprobs": 3}, "logprobs"),
        ({"include": ["message.output_text.logprobs"]}, "logprobs"),
        ({"conversation": "conv_1"}, "conversation"),
        ({"conversation": {"id": "conv_1"}}, "conversation"),
        ({"prompt": {"id": "pmpt_1", "variables": {"x": "y"}}}, "prompt"),
    ],
)
async def test_responses_refuse_what_they_cannot_follow(
    http: httpx.AsyncClient, engine: FakeEngine, change: dict[str, Any], fragment: str
) -> None:
    r = await http.post("/v1/responses", json={"model": MODEL, "input": "Hello"} | change)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert fragment in error["message"]
    assert engine.requests == []


@pytest.mark.parametrize(
    "change",
    [
        {"tool_choice": "auto"},
        {"tool_choice": "none"},
        {"top_logprobs": 0},
        {"include": ["reasoning.encrypted_content"]},
        {"conversation": None, "prompt": None},
        {"parallel_tool_calls": False, "store": False, "background": False},
    ],
)
async def test_responses_fields_that_ask_for_nothing_are_served(
    http: httpx.AsyncClient, change: dict[str, Any]
) -> None:
    r = await http.post("/v1/responses", json={"model": MODEL, "input": "Hello"} | change)
    assert r.status_code == 200, r.text
    assert r.json()["output"][0]["content"][0]["text"] == "HELLO"


async def test_the_openai_client_raises_on_a_responses_tool_choice(
    http: httpx.AsyncClient, engine: FakeEngine
) -> None:
    client = openai_for(http)
    with pytest.raises(openai.BadRequestError, match="tools"):
        await client.responses.create(model=MODEL, input="Hello", tool_choice="required")
    assert engine.requests == []
