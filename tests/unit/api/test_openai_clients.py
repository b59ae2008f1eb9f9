"""The requests real OpenAI-speaking translation front ends send, replayed as their source
writes them against the in-process app over the fake engine, and their answers read the way
each client reads them. Each test names the client, the file its request comes from, and
what the client parses; docs/compatibility.md says how to point each client here."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest

from tests.fakes import FakeEngine
from tests.unit.api.test_openai_api import MODEL, openai_for, reply


@pytest.fixture
def engine() -> FakeEngine:
    e = FakeEngine()
    e.reply = reply
    return e


def sse_data(body: str) -> list[str]:
    """The ``data:`` payloads of a server-sent event stream, in order."""
    return [
        line.removeprefix("data:").strip() for line in body.splitlines() if line.startswith("data:")
    ]


def chat_text(events: list[str]) -> str:
    """What a client that appends every ``choices[0].delta.content`` shows."""
    chunks = [json.loads(e) for e in events if e != "[DONE]"]
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])


# -- pot-desktop --------------------------------------------------------------------------

POT_SYSTEM = (
    "You are a professional translation engine, please translate the text into a "
    "colloquial, professional, elegant and fluent content, without the style of machine "
    "translation. You must only translate the text content, never interpret it."
)


def pot_body(stream: bool) -> dict[str, Any]:
    """pot-desktop's body: its default request arguments, then ``stream``, ``messages`` (its
    default prompt list with ``$to`` and ``$text`` filled in) and ``model``."""
    return {
        "temperature": 0.1,
        "top_p": 0.99,
        "frequency_penalty": 0,
        "presence_penalty": 0,
        "stream": stream,
        "messages": [
            {"role": "system", "content": POT_SYSTEM},
            {"role": "user", "content": 'Translate into German:\n"""\nhello\n"""'},
        ],
        "model": MODEL,
    }


POT_HEADERS = {"Content-Type": "application/json", "Authorization": "Bearer any"}


async def test_pot_desktop(http: httpx.AsyncClient, engine: FakeEngine) -> None:
    """pot-desktop (pot-app/pot-desktop), src/services/translate/openai/index.jsx (translate,
    lines 8-66) and Config.jsx (defaultRequestArguments): it appends
    ``v1/chat/completions`` to a request path that does not end in ``/chat/completions``,
    sends ``Authorization: Bearer``, and reads ``choices[0].message.content`` (not
    streamed) or every ``data:`` payload's ``choices[0].delta.content`` (streamed)."""
    r = await http.post("/v1/chat/completions", json=pot_body(False), headers=POT_HEADERS)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] == '"""'  # the prompt's last line
    job = engine.requests[0]
    assert (job.temperature, job.top_p, job.frequency_penalty) == (0.1, 0.99, 0.0)
    r = await http.post("/v1/chat/completions", json=pot_body(True), headers=POT_HEADERS)
    assert r.status_code == 200, r.text
    events = sse_data(r.text)
    assert events[-1] == "[DONE]"
    assert chat_text(events) == '"""'


# -- openai-translator --------------------------------------------------------------------


async def test_openai_translator(http: httpx.AsyncClient) -> None:
    """openai-translator (openai-translator/openai-translator),
    src/common/engines/abstract-openai.ts (getBaseRequestBody, sendMessage; listModels for
    ``GET /v1/models``): ``urlJoin(apiURL, apiURLPath)`` with the default path
    ``/v1/chat/completions``, ``Authorization: Bearer``, always streamed, penalties of 1,
    the role prompt and the command prompt joined in one user message. Per event it parses
    the JSON, stops at the first ``finish_reason``, else appends ``delta.content``; a
    non-200 answer's ``error.message`` is shown."""
    headers = {"Content-Type": "application/json", "Authorization": "Bearer any"}
    models = (await http.get("/v1/models", headers=headers)).json()
    assert [m["id"] for m in models["data"]] == [MODEL]
    body = {
        "model": MODEL,
        "temperature": 0,
        "top_p": 1,
        "frequency_penalty": 1,
        "presence_penalty": 1,
        "stream": True,
        "messages": [{"role": "user", "content": "You are a translator\n\nhello"}],
    }
    r = await http.post("/v1/chat/completions", json=body, headers=headers)
    assert r.status_code == 200, r.text
    text, finished = "", None
    for data in sse_data(r.text):
        if data == "[DONE]":
            break
        choices = json.loads(data)["choices"]
        if not choices:
            continue
        if choices[0].get("finish_reason"):
            finished = choices[0]["finish_reason"]
            break
        text += choices[0]["delta"].get("content", "")
    assert (text, finished) == ("HELLO", "stop")
    r = await http.post("/v1/chat/completions", json=body | {"model": "gpt-4o"}, headers=headers)
    assert r.status_code == 404
    assert "does not exist" in r.json()["error"]["message"]


# -- Lingarr ------------------------------------------------------------------------------

LINGARR_PROMPT = "Translate from English to German."
LINGARR_BATCH = json.dumps([{"position": 1, "line": "Hello"}, {"position": 2, "line": "Bye"}])


async def test_lingarr_local_ai(http: httpx.AsyncClient, engine: FakeEngine) -> None:
    """Lingarr (lingarr-translate/lingarr), Lingarr.Server/Services/Translation/
    LocalAiService.cs with Models/RequestTemplates/LocalAiChatTemplate.cs: an endpoint ending
    in ``completions`` is a chat endpoint; one line is ``{model, messages: [system prompt,
    user line]}``, read as ``choices[0].message.content``. A batch first asks for
    ``response_format`` ``json_schema`` (TranslateBatchWithStructuredOutput) and, when that
    fails with any status, sends the same messages without it (TranslateBatchWithJsonParsing)
    and cuts the JSON array out of the content."""
    headers = {"Accept": "application/json", "Authorization": "Bearer any"}
    line = {
        "model": MODEL,
        "messages": [
            {"role": "system", "content": LINGARR_PROMPT},
            {"role": "user", "content": "Hello there"},
        ],
    }
    r = await http.post("/v1/chat/completions", json=line, headers=headers)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] == "HELLO THERE"
    schema = {
        "type": "json_schema",
        "json_schema": {"name": "batch_translation_response", "strict": True, "schema": {}},
    }
    batch = {
        "model": MODEL,
        "messages": [
            {"role": "system", "content": LINGARR_PROMPT},
            {"role": "user", "content": LINGARR_BATCH},
        ],
    }
    r = await http.post(
        "/v1/chat/completions", json=batch | {"response_format": schema}, headers=headers
    )
    assert r.status_code == 400  # structured output cannot be honoured: Lingarr falls back
    assert r.json()["error"]["type"] == "invalid_request_error"
    assert len(engine.requests) == 1
    r = await http.post("/v1/chat/completions", json=batch, headers=headers)
    assert r.status_code == 200, r.text
    assert json.loads(r.json()["choices"][0]["message"]["content"].lower()) == json.loads(
        LINGARR_BATCH.lower()
    )


# -- Subtitle Edit ------------------------------------------------------------------------

SE_PROMPT = (
    "Translate from English to German, keep punctuation as input, keep line breaks exactly "
    "the same, do not censor the translation, give only the output without comments:"
)


def first_content(body: str) -> str | None:
    """Subtitle Edit's ``SeJsonParser.GetFirstObject(json, "content")``: the first value of
    a ``content`` key, wherever it is."""

    def find(node: Any) -> str | None:
        if isinstance(node, dict):
            if isinstance(node.get("content"), str):
                return str(node["content"])
            values = list(node.values())
        elif isinstance(node, list):
            values = node
        else:
            return None
        return next((v for v in map(find, values) if v is not None), None)

    return find(json.loads(body))


async def test_subtitle_edit_chatgpt(http: httpx.AsyncClient) -> None:
    """Subtitle Edit (SubtitleEdit/subtitleedit), src/libse/AutoTranslate/ChatGptTranslate.cs
    (Initialize, Translate): the configured URL itself (default
    ``https://api.openai.com/v1/chat/completions``) as the base address, ``accept:
    application/json``, ``Authorization: Bearer`` when a key is set, and the body written
    by hand: ``{"model": M,"messages": [{ "role": "user", "content": PROMPT\\n\\nTEXT }]}``;
    the answer is the first ``content`` value in the JSON."""
    text = "Hello"
    content = f"{SE_PROMPT}\\n\\n{text}"  # a JSON escape, as the C# source writes it
    raw = f'{{"model": "{MODEL}","messages": [{{ "role": "user", "content": "{content}" }}]}}'
    headers = {
        "accept": "application/json",
        "Authorization": "Bearer any",
        "Content-Type": "application/json; charset=utf-8",
    }
    r = await http.post("/v1/chat/completions", content=raw.encode(), headers=headers)
    assert r.status_code == 200, r.text
    assert first_content(r.text) == "HELLO"


@pytest.mark.parametrize("model", ["", MODEL])
async def test_subtitle_edit_lm_studio_and_openai_compatible(
    http: httpx.AsyncClient, model: str
) -> None:
    """Subtitle Edit, src/libse/AutoTranslate/LmStudioTranslate.cs and
    OpenAiCompatibleTranslate.cs (Translate): ``"model"`` is written only when one is
    configured ("single-model servers ... ignore it"), no key for LM Studio; the answer is
    the first ``content`` value. Without a model the served one answers, as vLLM does."""
    model_json = f'"model": "{model}",' if model else ""
    content = f"{SE_PROMPT}\\n\\nHello"
    raw = "{ " + model_json + f' "messages": [{{ "role": "user", "content": "{content}" }}]}}'
    headers = {"accept": "application/json", "Content-Type": "application/json; charset=utf-8"}
    r = await http.post("/v1/chat/completions", content=raw.encode(), headers=headers)
    assert r.status_code == 200, r.text
    assert first_content(r.text) == "HELLO"
    assert r.json()["model"] == MODEL


# -- the openai Python client -------------------------------------------------------------


async def test_openai_python_newer_fields(http: httpx.AsyncClient, engine: FakeEngine) -> None:
    """openai-python 3.54.0, openai/resources/chat/completions/completions.py (create): the
    fields of its ``CompletionCreateParams`` a translation script sets besides the basics:
    a ``developer`` message, content as ``text`` parts, ``name``, ``stop`` as a string,
    ``max_completion_tokens``, ``response_format`` ``text``, ``seed``, ``user``, ``store``,
    ``metadata``; ``stream_options`` on a stream."""
    client = openai_for(http)
    out = await client.chat.completions.create(
        model=MODEL,
        messages=[
            {"role": "developer", "content": "Translate into German."},
            {"role": "user", "name": "reader", "content": [{"type": "text", "text": "Hi"}]},
        ],
        stop="###",
        max_completion_tokens=5,
        response_format={"type": "text"},
        seed=7,
        user="u",
        store=False,
        metadata={"job": "1"},
    )
    assert out.choices[0].message.content == "HI"
    job = engine.requests[0]
    assert (job.stop, job.max_tokens) == (("###",), 5)
    prompt = "".join(map(chr, job.prompt_token_ids))
    assert prompt.startswith("Translate into German.")
    stream = await client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Hi"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [c async for c in stream]
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "HI"
    assert chunks[-1].usage is not None
    with pytest.raises(openai.NotFoundError):
        await client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "Hi"}],
        )


# -- Bob's openai-translator plugin (Responses API) ----------------------------------------

BOB_FORMATTING = (
    "\n\nIMPORTANT: Output the translation directly without any quotation marks or special "
    'characters wrapping. Do not add quotes like 『』「」"" around the result.'
)


def bob_body(stream: bool) -> dict[str, Any]:
    """Bob's ``buildRequestBody``: the (custom) system prompt with its formatting
    instructions appended as ``instructions``, the user prompt as ``input``."""
    return {
        "model": MODEL,
        "temperature": 0.2,
        "stream": stream,
        "instructions": "Translate into German." + BOB_FORMATTING,
        "input": "Hello",
    }


def bob_parse(data: dict[str, Any]) -> str:
    """Bob's ``parseResponse``: ``output_text`` if there, else the ``output_text`` parts of
    the first ``message`` item of ``output``."""
    if data.get("output_text"):
        return str(data["output_text"]).strip()
    for item in data["output"]:
        if item["type"] == "message" and item["content"]:
            text = "".join(c["text"] for c in item["content"] if c["type"] == "output_text")
            if text:
                return text.strip()
    raise AssertionError("No output returned from Responses API")


def bob_stream(body: str) -> str:
    """Bob's ``handleStream``/``parseSseMessage`` over its ``LineDecoder`` and
    ``SseDecoder``: the ``delta`` of ``response.output_text.delta`` events (by event name,
    or by ``type`` without one); an ``error`` in the data raises."""
    text, event, data = "", None, []
    for line in body.split("\n"):
        if line:
            field, _, value = line.partition(":")
            event = value.strip() if field == "event" else event
            data += [value.removeprefix(" ")] if field == "data" else []
            continue
        if not data:
            continue
        payload = "\n".join(data)
        parsed = None if payload.startswith("[DONE]") else json.loads(payload)
        if parsed is not None and parsed.get("error"):
            raise AssertionError(parsed["error"]["message"])
        if parsed is not None and "response.output_text.delta" in (event, parsed.get("type")):
            text += parsed["delta"]
        event, data = None, []
    return text


async def test_bob_openai_translator_plugin(http: httpx.AsyncClient, engine: FakeEngine) -> None:
    """Bob's openai-translator plugin (openai-translator/bob-plugin-openai-translator),
    src/adapter/openai.ts (buildHeaders, buildRequestBody, parseResponse, handleStream,
    testApiConnection) with src/utils/sse.ts and src/adapter/openai-compatible.ts: the
    Responses API at ``{apiUrl}/v1/responses`` ("OpenAI") or at the configured URL, which
    must end in ``/responses`` ("OpenAI compatible"); ``Authorization: Bearer``; the key
    is checked with ``GET .../models`` (``data`` or ``object: list``). Before, 404."""
    url, headers = (
        "/v1/responses",
        {"Content-Type": "application/json", "Authorization": "Bearer any"},
    )
    models = (await http.get("/v1/models", headers=headers)).json()
    assert models["object"] == "list"
    assert models["data"]
    r = await http.post(url, json=bob_body(False), headers=headers)
    assert r.status_code == 200, r.text
    assert bob_parse(r.json()) == "HELLO"
    prompt = "".join(map(chr, engine.requests[0].prompt_token_ids))
    assert prompt.startswith("Translate into German.\n\nIMPORTANT")
    assert engine.requests[0].temperature == 0.2
    r = await http.post(url, json=bob_body(True), headers=headers)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/event-stream")
    assert bob_stream(r.text) == "HELLO"


async def test_bob_plugin_sees_errors_in_openais_shape(
    http: httpx.AsyncClient, engine: FakeEngine
) -> None:
    """Bob's ``extractErrorFromResponse`` shows ``error.message`` (and ``param``) of a
    4xx, a stream's ``error`` event raises in ``parseSseMessage``."""
    from serve_app.core.errors import EngineUnavailable

    r = await http.post("/v1/responses", json=bob_body(False) | {"model": "gpt-5"})
    assert r.status_code == 404
    assert set(r.json()["error"]) == {"message", "type", "param", "code"}
    engine.fail_after_chunks, engine.fail_with = 1, EngineUnavailable("The engine stopped.")
    r = await http.post("/v1/responses", json=bob_body(True))
    assert r.status_code == 200
    with pytest.raises(AssertionError, match="engine stopped"):
        bob_stream(r.text)


async def test_openai_python_responses(http: httpx.AsyncClient, engine: FakeEngine) -> None:
    """openai-python 3.54.0, openai/resources/responses/responses.py (create; its stream
    of typed events): ``instructions``, ``input`` as a string or as messages with
    ``input_text`` parts, ``max_output_tokens``, ``temperature``; ``Response.output_text``
    joins the output's text, usage in ``input_tokens``/``output_tokens``."""
    client = openai_for(http)
    out = await client.responses.create(
        model=MODEL, instructions="Translate into German.", input="Hello", max_output_tokens=9
    )
    assert out.output_text == "HELLO"
    assert out.status == "completed"
    assert out.usage is not None
    assert out.usage.output_tokens == 3
    assert engine.requests[0].max_tokens == 9
    out = await client.responses.create(
        model=MODEL,
        input=[
            {"role": "developer", "content": "Translate into German."},
            {"role": "user", "content": [{"type": "input_text", "text": "Good night"}]},
        ],
    )
    assert out.output_text == "GOOD NIGHT"
    stream = await client.responses.create(model=MODEL, input="Hello", stream=True)
    events = [e async for e in stream]
    assert events[0].type == "response.created"
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert "".join(deltas) == "HELLO"
    assert events[-1].type == "response.completed"
    assert events[-1].response.output_text == "HELLO"
    assert [e.sequence_number for e in events] == list(range(len(events)))


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"input": []}, "input"),
        ({"input": [{"role": "user", "content": [{"type": "input_image"}]}]}, "text only"),
        ({"input": [{"type": "function_call_output", "call_id": "c", "output": "x"}]}, "input"),
        ({"tools": [{"type": "web_search"}]}, "tools"),
        ({"previous_response_id": "resp_1"}, "previous_response_id"),
        ({"text": {"format": {"type": "json_schema"}}}, "text.format"),
        ({"max_output_tokens": 0}, "max_output_tokens"),
        ({"temperature": "NaN"}, "temperature: Input should be a finite number"),
    ],
)
async def test_responses_refused_in_openais_shape(
    http: httpx.AsyncClient, engine: FakeEngine, change: dict[str, Any], fragment: str
) -> None:
    """What a text-only, stateless server cannot honour is a 400, never a 500."""
    r = await http.post("/v1/responses", json={"model": MODEL, "input": "Hello"} | change)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["type"] == "invalid_request_error"
    assert fragment in r.json()["error"]["message"]
    assert engine.requests == []


async def test_responses_cut_short_are_incomplete(
    http: httpx.AsyncClient, engine: FakeEngine
) -> None:
    """A response the token limit cut short is ``incomplete`` with ``incomplete_details``
    ``max_output_tokens``, its stream ending in ``response.incomplete``, as OpenAI's."""
    engine.truncate_marker = "CUT"
    client = openai_for(http)
    out = await client.responses.create(model=MODEL, input="CUT here")
    assert out.status == "incomplete"
    assert out.incomplete_details is not None
    assert out.incomplete_details.reason == "max_output_tokens"
    stream = await client.responses.create(model=MODEL, input="CUT here", stream=True)
    events = [e async for e in stream]
    assert events[-1].type == "response.incomplete"
