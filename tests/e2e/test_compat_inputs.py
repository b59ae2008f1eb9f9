"""This session's fixes to the compatibility APIs, proven through ``serve run`` (Ray's
proxy, HAProxy, the real tokenizer and vLLM engine on the CPU), with the clients' own
libraries (found 2026-12-06; each test fails on the code before):

- a message's text parts reached the model glued together (``Good`` and ``morning`` as
  ``Goodmorning``): they are joined a line apart, as vLLM joins them, so a message of parts
  costs exactly the prompt tokens of its parts' text a line apart;
- the Responses API answered ``tool_choice: "required"``, ``top_logprobs``, ``include`` of
  logprobs, a ``conversation`` and a stored ``prompt`` with plain text, as if unasked;
- DeepL's ``style_id``, ``translation_memory_id`` and ``custom_instructions`` (deepl-python's
  ``style_rule``, ``translation_memory`` and ``custom_instructions``) were ignored, on
  ``/v2/translate`` and ``/v2/document``.
"""

from __future__ import annotations

import io
from typing import Any

import deepl
import httpx
import openai
import pytest

TIMEOUT = 300
WORDS = ["Good", "morning"] * 10


def chat_prompt_tokens(openai_client: openai.OpenAI, openai_model: str, content: Any) -> int:
    out = openai_client.chat.completions.create(
        model=openai_model, messages=[{"role": "user", "content": content}], max_tokens=1
    )
    assert out.usage is not None
    return out.usage.prompt_tokens


def responses_input_tokens(openai_client: openai.OpenAI, openai_model: str, content: Any) -> int:
    out = openai_client.responses.create(
        model=openai_model, input=[{"role": "user", "content": content}], max_output_tokens=1
    )
    assert out.usage is not None
    return out.usage.input_tokens


def test_text_parts_reach_the_model_a_line_apart(
    openai_client: openai.OpenAI, openai_model: str
) -> None:
    joined, glued = "\n".join(WORDS), "".join(WORDS)
    lines = chat_prompt_tokens(openai_client, openai_model, joined)
    assert lines != chat_prompt_tokens(
        openai_client, openai_model, glued
    )  # the test tells them apart
    parts = [{"type": "text", "text": w} for w in WORDS]
    assert chat_prompt_tokens(openai_client, openai_model, parts) == lines
    inputs = [{"type": "input_text", "text": w} for w in WORDS]
    assert responses_input_tokens(openai_client, openai_model, inputs) == responses_input_tokens(
        openai_client, openai_model, joined
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
    served: str, openai_model: str, change: dict[str, Any], fragment: str
) -> None:
    body = {"model": openai_model, "input": "Hello", "max_output_tokens": 4} | change
    r = httpx.post(f"{served}/v1/responses", json=body, timeout=TIMEOUT)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"
    assert fragment in error["message"]


def test_the_openai_client_raises_on_a_responses_tool_choice(
    openai_client: openai.OpenAI, openai_model: str
) -> None:
    with pytest.raises(openai.BadRequestError, match="tools"):
        openai_client.responses.create(model=openai_model, input="Hello", tool_choice="required")


@pytest.mark.parametrize(
    ("option", "name"),
    [
        ({"style_rule": "5d8e9b2a-style"}, "style_id"),
        ({"translation_memory": "tm-1"}, "translation_memory_id"),
        ({"custom_instructions": ["Use a formal tone"]}, "custom_instructions"),
    ],
)
def test_the_deepl_client_is_refused_what_the_server_cannot_apply(
    served: str, option: dict[str, Any], name: str
) -> None:
    translator = deepl.DeepLClient("any-key", server_url=served)
    with pytest.raises(deepl.DeepLException, match=name):
        translator.translate_text("Hello", source_lang="EN", target_lang="DE", **option)
    if name == "custom_instructions":  # translate_document takes no instructions
        return
    with pytest.raises(deepl.DeepLException, match=name):
        translator.translate_document_upload(
            io.BytesIO(b"Hello, world."),
            target_lang="DE",
            source_lang="EN",
            filename="note.txt",
            **option,
        )
    assert translator.translate_text("Hello", source_lang="EN", target_lang="DE").text
