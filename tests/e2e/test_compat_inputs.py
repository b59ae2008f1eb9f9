"""This session's fixes to the compatibility APIs, proven through ``serve run`` (Ray's
proxy, HAProxy, the real tokenizer and vLLM engine on the CPU), with the clients' own
libraries (found 2026-12-06; each test fails on the code before):

- a message's text parts reached the model glued together (``Good`` and ``morning`` as
  ``Goodmorning``): they are joined a line apart, as vLLM joins them, so a message of parts
  costs exactly the prompt tokens of its parts' text a line apart;
- the Responses API answered ``tool_choice: "required"``, ``top_logprobs``, ``include`` of
  logprobs, a ``conversation`` and a stored ``prompt`` with plain text, as if unasked.
"""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

TIMEOUT = 300
WORDS = ["Good", "morning"] * 10


@pytest.fixture(scope="module")
def client(served: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{served}/v1", api_key="any-key", timeout=TIMEOUT)


@pytest.fixture(scope="module")
def model(client: openai.OpenAI) -> str:
    (only,) = list(client.models.list())
    return only.id


def chat_prompt_tokens(client: openai.OpenAI, model: str, content: Any) -> int:
    out = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": content}], max_tokens=1
    )
    assert out.usage is not None
    return out.usage.prompt_tokens


def responses_input_tokens(client: openai.OpenAI, model: str, content: Any) -> int:
    out = client.responses.create(
        model=model, input=[{"role": "user", "content": content}], max_output_tokens=1
    )
    assert out.usage is not None
    return out.usage.input_tokens


def test_text_parts_reach_the_model_a_line_apart(client: openai.OpenAI, model: str) -> None:
    joined, glued = "\n".join(WORDS), "".join(WORDS)
    lines = chat_prompt_tokens(client, model, joined)
    assert lines != chat_prompt_tokens(client, model, glued)  # the test tells them apart
    parts = [{"type": "text", "text": w} for w in WORDS]
    assert chat_prompt_tokens(client, model, parts) == lines
    inputs = [{"type": "input_text", "text": w} for w in WORDS]
    assert responses_input_tokens(client, model, inputs) == responses_input_tokens(
        client, model, joined
    )


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"tool_choice": "required"}, "tools"),
        ({"top_logprobs": 3}, "logprobs"),
        ({"include": ["message.output_text.logprobs"]}, "logprobs"),
        ({"conversation": "conv_1"}, "conversation"),
        ({"prompt": {"id": "pmpt_1"}}, "prompt"),
    ],
)
def test_responses_refuse_what_they_cannot_follow(
    served: str, model: str, change: dict[str, Any], fragment: str
) -> None:
    body = {"model": model, "input": "Hello", "max_output_tokens": 4} | change
    r = httpx.post(f"{served}/v1/responses", json=body, timeout=TIMEOUT)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"
    assert fragment in error["message"]


def test_the_openai_client_raises_on_a_responses_tool_choice(
    client: openai.OpenAI, model: str
) -> None:
    with pytest.raises(openai.BadRequestError, match="tools"):
        client.responses.create(model=model, input="Hello", tool_choice="required")
