"""Glossaries of many dictionaries (language pairs) against the event loop: a new
glossary's dictionaries are read (entries parsed, language codes resolved) in a worker
thread when they are many, and the owner's dictionaries are bounded in all, since every list
of glossaries answers them (21 glossaries of 3,906 pairs held the loop 1.3 s on ``GET
/glossaries``). Refusals in each API's shape."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from serve_app.api import glossaries
from serve_app.api.app import create_app
from serve_app.core.config import AppConfig
from serve_app.store import Store, StoreLimits
from serve_app.store.sqlite import open_sqlite
from serve_app.translation.service import TranslationService
from tests.fakes import FakeEngine

pytestmark = pytest.mark.unit

DEEPL = {"Authorization": "DeepL-Auth-Key k"}
TARGETS = ["de", "fr", "es", "it", "nl", "pl"]


def dictionaries(targets: list[str], copies: int = 1) -> list[dict[str, Any]]:
    pairs = [{"source_lang": "en", "target_lang": t, "entries": "a\tb"} for t in targets]
    return pairs * copies


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    opened = await open_sqlite(str(tmp_path / "s.db"), StoreLimits(max_glossary_dictionaries=4))
    yield opened
    await opened.close()


@pytest.fixture
async def client(store: Store) -> AsyncIterator[httpx.AsyncClient]:
    service = TranslationService(
        AppConfig.model_validate({"prompt": {"family": "chat"}}), FakeEngine()
    )
    await service.start()
    transport = httpx.ASGITransport(app=create_app(service, store=store))
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        yield c


def record_reading(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """What reads a new glossary's dictionaries (parsing entries, resolving codes), each
    with whether it ran on the event loop's thread."""
    calls: list[tuple[str, bool]] = []
    resolve, parse = glossaries.stored_code, glossaries.parse_entries

    def resolved(service: TranslationService, code: str) -> str:
        calls.append(("resolve", threading.current_thread() is threading.main_thread()))
        return resolve(service, code)

    def parsed(data: str, fmt: str) -> glossaries.Entries:
        calls.append(("parse", threading.current_thread() is threading.main_thread()))
        return parse(data, fmt)

    monkeypatch.setattr(glossaries, "stored_code", resolved)
    monkeypatch.setattr(glossaries, "parse_entries", parsed)
    return calls


@pytest.mark.parametrize(("path", "headers"), [("/glossaries", {}), ("/v3/glossaries", DEEPL)])
async def test_too_many_dictionaries_are_refused_before_any_is_read(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch, path: str, headers: dict[str, str]
) -> None:
    """3,000 one-entry dictionaries (500 copies of six pairs) against a limit of 4: all
    were parsed and their codes resolved (in a worker thread) before the store counted
    them. Now the count is checked first, with the same 413."""
    calls = record_reading(monkeypatch)
    body = {"name": "wide", "dictionaries": dictionaries(TARGETS, 500)}
    r = await client.post(path, json=body, headers=headers)
    assert r.status_code == 413, r.text
    message = r.json()["message"] if headers else r.json()["error"]["message"]
    assert "3000 dictionaries (language pairs); at most 4" in message
    assert calls == []
    few = {"name": "few", "dictionaries": dictionaries(["de"])}
    r = await client.post(path, json=few, headers=headers)
    assert r.status_code == 201, r.text
    assert calls == [("parse", True), ("resolve", True), ("resolve", True)]  # few: on the loop


@pytest.mark.parametrize(("path", "headers"), [("/glossaries", {}), ("/v3/glossaries", DEEPL)])
async def test_long_dictionaries_are_read_off_the_event_loop(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch, path: str, headers: dict[str, str]
) -> None:
    """Four dictionaries of 1,500 entries each (over 50,000 characters to parse): read in
    a worker thread, not on the event loop."""
    calls = record_reading(monkeypatch)
    long = "\n".join(f"term{i}\tWort{i}" for i in range(1500))
    body = {
        "name": "long",
        "dictionaries": [{**d, "entries": long} for d in dictionaries(TARGETS[:4])],
    }
    r = await client.post(path, json=body, headers=headers)
    assert r.status_code == 201, r.text
    assert len(calls) == 4 + 8
    assert not any(on_loop for _, on_loop in calls)


async def test_an_owners_dictionaries_are_bounded_in_each_apis_shape(
    client: httpx.AsyncClient,
) -> None:
    r = await client.post("/glossaries", json={"name": "g", "dictionaries": dictionaries(["de"])})
    assert r.status_code == 201, r.text
    more = {"name": "more", "dictionaries": dictionaries(TARGETS[1:5])}
    native = await client.post("/glossaries", json=more)
    assert native.status_code == 403
    assert native.json()["error"]["code"] == "limit_reached"
    assert "hold 1 dictionaries" in native.json()["error"]["message"]
    deepl = await client.post("/v3/glossaries", json=more, headers=DEEPL)
    assert deepl.status_code == 403
    assert "at most 4 are allowed" in deepl.json()["message"]
    v2 = {"name": "v2", "source_lang": "en", "target_lang": "fr", "entries": "a\tb"}
    assert (await client.post("/v2/glossaries", json=v2, headers=DEEPL)).status_code == 201
    listed = (await client.get("/glossaries")).json()["glossaries"]
    assert sum(len(g["dictionaries"]) for g in listed) == 2
