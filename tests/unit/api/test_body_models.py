"""Large JSON bodies against the event loop: a body of more than ``bodies.MAX_JSON_VALUES``
values is a 413 in the called API's shape, a list of invalid objects is one error (not one
per element), and a body of many values is validated against its route's model in a worker
thread (``api/body_models.py``), so that building its errors never stands the replica's loop
still (a 1 MiB batch of ``{}`` items held it 3.4 s)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import fastapi.dependencies.utils
import httpx
import pytest

from serve_app.api import bodies
from serve_app.api.app import create_app
from serve_app.core.config import AppConfig
from serve_app.translation.service import TranslationService
from tests.fakes import FakeEngine

JSON = {"content-type": "application/json", "Authorization": "DeepL-Auth-Key k"}


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    service = TranslationService(
        AppConfig.model_validate({"prompt": {"family": "chat"}}), FakeEngine()
    )
    await service.start()
    transport = httpx.ASGITransport(app=create_app(service), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        yield c


async def post_timed(
    client: httpx.AsyncClient, path: str, body: str
) -> tuple[httpx.Response, float]:
    """The answer, and the longest the event loop went without running a 5 ms sleeper."""
    gaps = [0.0]
    done = asyncio.Event()

    async def watch() -> None:
        while not done.is_set():
            start = time.perf_counter()
            await asyncio.sleep(0.005)
            gaps.append(time.perf_counter() - start - 0.005)

    watcher = asyncio.create_task(watch())
    try:
        r = await client.post(path, content=body.encode(), headers=JSON)
    finally:
        done.set()
        await watcher
    return r, max(gaps)


def listed(prefix: str, unit: str, n: int, suffix: str) -> str:
    return prefix + ",".join([unit] * n) + suffix


async def test_a_megabyte_of_invalid_items_is_refused_without_a_loop_stall(
    client: httpx.AsyncClient,
) -> None:
    body = listed('{"items":[', "{}", 333_000, "]}")  # 1 MB: 666,000 errors before
    r, gap = await post_timed(client, "/translate/batch", body)
    assert r.status_code == 413
    assert r.json()["error"]["code"] == "body_too_large"
    assert gap < 0.5  # 3.4 s before


@pytest.mark.parametrize(
    ("path", "body", "key"),
    [
        ("/translate", listed('{"text":"a","target_lang":"de","x":[', "0", 60_000, "]}"), None),
        ("/v2/translate", listed('{"target_lang":"DE","text":[', '"a"', 60_000, "]}"), "message"),
        ("/libretranslate/translate", listed('{"target":"de","q":[', '"a"', 60_000, "]}"), "error"),
        ("/v1/chat/completions", listed('{"messages":[', "{}", 60_000, "]}"), "openai"),
    ],
)
async def test_too_many_values_is_a_413_in_each_apis_shape(
    client: httpx.AsyncClient, path: str, body: str, key: str | None
) -> None:
    r = await client.post(path, content=body.encode(), headers=JSON)
    assert r.status_code == 413
    message = {
        None: lambda b: b["error"]["message"],
        "message": lambda b: b["message"],
        "error": lambda b: b["error"],
        "openai": lambda b: b["error"]["message"],
    }[key](r.json())
    assert f"more than {bodies.MAX_JSON_VALUES} JSON values" in message


@pytest.mark.parametrize(
    ("path", "body", "where"),
    [
        ("/translate/batch", listed('{"items":[', "{}", 49_000, "]}"), "items.0.text"),
        ("/v1/chat/completions", listed('{"messages":[', "{}", 49_000, "]}"), "messages"),
        (
            "/v1/chat/completions",
            listed('{"messages":[{"role":"user","content":[', "{}", 49_000, "]}]}"),
            "messages.0.content",
        ),
        ("/v1/responses", listed('{"input":[', "{}", 49_000, "]}"), "input"),
    ],
)
async def test_a_list_of_invalid_objects_is_one_error(
    client: httpx.AsyncClient, path: str, body: str, where: str
) -> None:
    r, gap = await post_timed(client, path, body)
    assert r.status_code in (400, 422)
    assert where in r.text
    assert ".1." not in r.text  # the first invalid element only
    assert gap < 0.3


async def test_a_body_of_many_values_is_validated_off_the_loop(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FastAPI's own validation (on the loop) never sees an invalid body of many values:
    the body check refuses it first, from a worker thread, with FastAPI's message."""
    on_loop: list[Any] = []
    original = fastapi.dependencies.utils.request_body_to_args

    async def spy(*args: Any, **kwargs: Any) -> Any:
        on_loop.append(args)
        return await original(*args, **kwargs)

    monkeypatch.setattr(fastapi.dependencies.utils, "request_body_to_args", spy)
    keys = ",".join(f'"k{i}":0' for i in range(2 * bodies.INLINE_VALUES))
    r = await client.post(
        "/translate", content=f'{{"text":"a","target_lang":"de",{keys}}}'.encode(), headers=JSON
    )
    assert r.status_code == 422
    assert r.json()["error"]["message"].startswith(
        "Invalid request: k0: Extra inputs are not permitted; k1:"
    )
    assert on_loop == []
    small = await client.post("/translate", json={"text": "a", "target_lang": "de", "k0": 0})
    assert small.status_code == 422
    assert on_loop  # a small body: FastAPI's validation, as before
