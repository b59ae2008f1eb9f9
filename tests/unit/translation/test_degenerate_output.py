"""A translation that ran to its token limit keeps what it translated, and a degenerate loop
(a newline repeated until cut off) never becomes an empty answer, on every endpoint."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from serve_app.api.app import create_app
from serve_app.core.config import AppConfig
from serve_app.translation.piece import UNSTICK_FREQUENCY_PENALTY
from serve_app.translation.service import TranslationService
from tests.fakes import FakeEngine

ITEM = {"text": "Hello world", "source_lang": "en", "target_lang": "de"}
DEEPL_AUTH = {"Authorization": "DeepL-Auth-Key test-key"}


def text_of(prompt: str) -> str:
    return prompt.split("\n\n", 1)[1]


@pytest.fixture
def engine() -> FakeEngine:
    e = FakeEngine()
    e.reply = lambda prompt: text_of(prompt).upper()
    e.blank_loop_marker = "Hello"
    return e


@pytest.fixture
async def client(engine: FakeEngine) -> AsyncIterator[httpx.AsyncClient]:
    config = AppConfig.model_validate(
        {"prompt": {"family": "chat"}, "limits": {"max_input_tokens": 6}}
    )
    service = TranslationService(config, engine)
    await service.start()
    transport = httpx.ASGITransport(app=create_app(service), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        yield c


def sse(raw: str) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for block in raw.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.split("\n"))
        out.append((lines["event"], json.loads(lines["data"])))
    return out


async def test_blank_loop_is_decoded_again_with_a_frequency_penalty(
    client: httpx.AsyncClient, engine: FakeEngine
) -> None:
    body = (await client.post("/translate", json=ITEM)).json()
    assert body["translation"] == "HELLO WORLD"
    assert body["truncated"] is False  # the second decoding ended by itself
    first, second = engine.requests
    assert first.frequency_penalty == 0
    assert second.frequency_penalty == UNSTICK_FREQUENCY_PENALTY
    assert second.prompt_token_ids == first.prompt_token_ids
    assert body["usage"]["output_tokens"] == first.max_tokens + 3  # both decodings counted


async def test_blank_loop_of_a_long_text_is_retried_not_resplit(
    client: httpx.AsyncClient, engine: FakeEngine
) -> None:
    text = "Hello there. Good day."
    body = (await client.post("/translate", json={**ITEM, "text": text})).json()
    assert body["translation"] == text.upper()
    assert len(engine.requests) == 2


async def test_blank_loop_that_persists_says_truncated(
    client: httpx.AsyncClient, engine: FakeEngine
) -> None:
    engine.blank_loop_cured = False
    body = (await client.post("/translate", json=ITEM)).json()
    assert body["truncated"] is True
    assert len(engine.requests) == 2  # decoded again once, no more


async def test_blank_loop_streams_the_second_decoding(
    client: httpx.AsyncClient, engine: FakeEngine
) -> None:
    r = await client.post("/translate/stream", json=ITEM)
    got = sse(r.text)
    deltas = "".join(data["text"] for name, data in got if name == "delta")
    assert deltas == "HELLO WORLD"
    assert got[-1][0] == "done"
    assert got[-1][1]["translation"] == "HELLO WORLD"
    assert got[-1][1]["truncated"] is False
    assert [r.frequency_penalty for r in engine.requests] == [0, UNSTICK_FREQUENCY_PENALTY]


async def test_blank_loop_never_answers_empty_on_any_endpoint(
    client: httpx.AsyncClient,
) -> None:
    batch = await client.post("/translate/batch", json={"items": [ITEM, ITEM]})
    assert [i["translation"] for i in batch.json()["results"]] == ["HELLO WORLD"] * 2
    deepl = await client.post(
        "/v2/translate", json={"text": ["Hello world"], "target_lang": "DE"}, headers=DEEPL_AUTH
    )
    assert deepl.json()["translations"][0]["text"] == "HELLO WORLD"
    libre = await client.post(
        "/libretranslate/translate", json={"q": "Hello world", "source": "en", "target": "de"}
    )
    assert libre.json() == {"translatedText": "HELLO WORLD"}


async def test_truncated_sentence_keeps_what_it_translated(
    client: httpx.AsyncClient, engine: FakeEngine
) -> None:
    engine.truncate_marker = "Hello"
    body = (await client.post("/translate", json=ITEM)).json()
    assert body["translation"] == "HELLO WORLD"
    assert body["truncated"] is True


async def test_resplit_whose_halves_come_back_empty_keeps_the_piece(
    client: httpx.AsyncClient, engine: FakeEngine
) -> None:
    text = "Alpha beta. Zeta delta."
    engine.truncate_marker = text  # the whole piece runs out of tokens, with text
    engine.blank_loop_marker = "ta."  # both halves loop on a newline, even penalised
    engine.blank_loop_cured = False
    body = (await client.post("/translate", json={**ITEM, "text": text})).json()
    assert body["translation"] == text.upper()
    assert body["truncated"] is True
    assert len(engine.requests) == 5  # the piece, then each half twice
