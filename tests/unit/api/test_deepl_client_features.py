"""deepl-python's own client (``tests/deepl_asgi.py``) over the app and the fake engine,
for what the replayed requests of the other tests do not reach (found 2026-12-07, each
test fails on the code before its fix): ``rephrase_text`` (DeepL Write, not offered here)
raised ``Not found, message: Not Found``, which names nothing."""

from __future__ import annotations

import asyncio

import deepl
import httpx
import openai
import pytest

from tests.deepl_asgi import deepl_client
from tests.unit.api.test_openai_api import MODEL, openai_for


async def test_deepl_write_is_refused_naming_what_is_missing(http: httpx.AsyncClient) -> None:
    client = deepl_client(http)
    with pytest.raises(deepl.DeepLException) as caught:
        await asyncio.to_thread(client.rephrase_text, "Hello", target_lang="EN-US")
    assert caught.value.http_status_code == 404
    assert "does not offer POST /v2/write/rephrase" in str(caught.value)


async def test_the_client_still_translates_through_the_bridge(http: httpx.AsyncClient) -> None:
    """The bridge itself: a translation comes back as the client parses it."""
    client = deepl_client(http)
    result = await asyncio.to_thread(client.translate_text, "Hello", target_lang="DE")
    assert isinstance(result, deepl.TextResult)
    assert result.text.endswith("Hello")
    assert result.detected_source_lang == "EN"


async def test_an_openai_route_not_offered_is_named(http: httpx.AsyncClient) -> None:
    with pytest.raises(openai.NotFoundError, match="does not offer POST /v1/completions"):
        await openai_for(http).completions.create(model=MODEL, prompt="Hello")
