"""The OpenAI API end to end (serve run, Ray's proxy, the real vLLM engine on CPU, the tiny
random-weight model), driven by the official ``openai`` client as translation front ends
(pot-desktop, Immersive Translate, Lingarr...) use it: a system prompt and the text, plain
and streamed; n sampled choices, max_tokens, stop, usage, request ids, errors in OpenAI's
shape. The model's words are nonsense: the tests assert shapes, counts and limits."""

from __future__ import annotations

import httpx
import openai
import pytest

TIMEOUT = 300
# What pot-desktop sends (its OpenAI service): a system prompt, the text in the user turn,
# and its sampling settings.
POT_SYSTEM = (
    "You are a professional translation engine, please translate the text into a "
    "colloquial, professional, elegant and fluent content, without the style of machine "
    "translation. You must only translate the text content, never interpret it."
)
POT_USER = 'Translate into German:\n"""\nGood morning, how are you?\n"""'
MESSAGES = [{"role": "system", "content": POT_SYSTEM}, {"role": "user", "content": POT_USER}]


def test_completion_with_sampled_choices(openai_client: openai.OpenAI, openai_model: str) -> None:
    out = openai_client.chat.completions.create(
        model=openai_model,
        messages=MESSAGES,  # type: ignore[arg-type]
        n=3,
        temperature=1.0,
        max_tokens=12,
        stop=["\n\n\n"],
        frequency_penalty=1,
        presence_penalty=1,
    )
    assert out.object == "chat.completion"
    assert [c.index for c in out.choices] == [0, 1, 2]
    assert all(c.finish_reason in ("stop", "length") for c in out.choices)
    assert out.usage is not None
    assert 0 < out.usage.completion_tokens <= 3 * 12
    assert out.usage.prompt_tokens > len(POT_SYSTEM.split())  # the chat template's rendering
    texts = [c.message.content for c in out.choices]
    assert len(set(texts)) > 1  # sampled apart, not copies


def test_stream_with_usage(openai_client: openai.OpenAI, openai_model: str) -> None:
    stream = openai_client.chat.completions.create(
        model=openai_model,
        messages=MESSAGES,  # type: ignore[arg-type]
        max_tokens=10,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] in ("stop", "length")
    usage = chunks[-1].usage
    assert usage is not None
    assert 0 < usage.completion_tokens <= 10
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    # Greedy: the same request unstreamed gives the same text.
    plain = openai_client.chat.completions.create(
        model=openai_model,
        messages=MESSAGES,  # type: ignore[arg-type]
        max_tokens=10,
        temperature=0,
    )
    assert plain.choices[0].message.content == streamed


def test_request_id_names_the_completion(served: str, openai_model: str) -> None:
    body = {"model": openai_model, "messages": MESSAGES, "max_tokens": 4}
    headers = {"x-request-id": "oai-e2e-1", "Authorization": "Bearer any-key"}
    r = httpx.post(f"{served}/v1/chat/completions", json=body, headers=headers, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    assert r.json()["id"] == "chatcmpl-oai-e2e-1"
    assert r.headers["x-request-id"] == "oai-e2e-1"


def test_errors_in_openais_shape(
    openai_client: openai.OpenAI, openai_model: str, served: str
) -> None:
    with pytest.raises(openai.NotFoundError) as missing:
        openai_client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)  # type: ignore[arg-type]
    assert missing.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError) as bad:
        openai_client.chat.completions.create(
            model=openai_model, messages=MESSAGES, max_tokens=10**6
        )  # type: ignore[arg-type]
    assert bad.value.code == "invalid_request"
    huge = [{"role": "user", "content": "word " * 3000}]
    with pytest.raises(openai.BadRequestError) as long:
        openai_client.chat.completions.create(model=openai_model, messages=huge)  # type: ignore[arg-type]
    assert long.value.code == "context_length_exceeded"
    r = httpx.post(f"{served}/v1/chat/completions", json={"model": openai_model}, timeout=TIMEOUT)
    assert r.status_code == 400
    assert set(r.json()["error"]) == {"message", "type", "param", "code"}


def test_responses_plain_and_streamed(openai_client: openai.OpenAI, openai_model: str) -> None:
    """``/v1/responses`` (Bob's openai-translator plugin, ``openai.responses``) through the
    real stack: the answer's one message, and the streamed deltas adding up to it."""
    out = openai_client.responses.create(
        model=openai_model,
        instructions=POT_SYSTEM,
        input=POT_USER,
        max_output_tokens=10,
        temperature=0,
    )
    assert out.object == "response"
    assert out.status in ("completed", "incomplete")
    assert out.usage is not None
    assert 0 < out.usage.output_tokens <= 10
    events = list(
        openai_client.responses.create(
            model=openai_model,
            instructions=POT_SYSTEM,
            input=POT_USER,
            max_output_tokens=10,
            temperature=0,
            stream=True,
        )
    )
    assert events[0].type == "response.created"
    assert events[-1].type in ("response.completed", "response.incomplete")
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == out.output_text  # greedy: the same text streamed or not


def test_model_left_out_is_the_served_one(served: str, openai_model: str) -> None:
    """Subtitle Edit's LM Studio / OpenAI-compatible translators send no ``model``."""
    body = {"messages": [{"role": "user", "content": POT_USER}], "max_tokens": 4}
    r = httpx.post(f"{served}/v1/chat/completions", json=body, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    assert r.json()["model"] == openai_model
