"""A document one of whose paragraphs needs more engine requests than a request may hold
(each text run between inline tags is one when the model loses a tag: the replica's
``limits.max_engine_requests``) is refused at upload with a 413 in the called API's own error
shape, not accepted to fail when the worker sends that paragraph; one at the limit is
translated. Over the fake engine and a real SQLite store."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from serve_app.core.config import LimitsConfig
from tests.unit.api.test_documents_api import AUTH, Setup, finish, make

LIMIT = LimitsConfig().max_engine_requests


def html(runs: int) -> bytes:
    return b"<html><body><p>" + b"<b>x</b>" * runs + b"</p></body></html>"


@pytest.fixture
async def setup(tmp_path) -> AsyncIterator[Setup]:  # type: ignore[no-untyped-def]
    async for s in make(tmp_path):
        yield s


async def test_native_413_at_upload(setup: Setup) -> None:
    files = {"file": ("page.html", html(200), "text/html")}
    r = await setup.client.post("/documents", files=files, data={"target_lang": "de"})
    assert r.status_code == 413, r.text
    error = r.json()["error"]
    assert error["code"] == "document_too_large"
    assert "splits into 200 parts" in error["message"]
    assert (await setup.client.get("/documents")).json() == []  # no job stored


async def test_deepl_413_in_deepls_shape(setup: Setup) -> None:
    files = {"file": ("page.html", html(200), "text/html")}
    r = await setup.client.post(
        "/v2/document", files=files, data={"target_lang": "DE"}, headers=AUTH
    )
    assert r.status_code == 413, r.text
    assert "splits into 200 parts" in r.json()["message"]


async def test_libre_413_in_libres_shape(setup: Setup) -> None:
    files = {"file": ("page.html", html(200), "text/html")}
    r = await setup.client.post(
        "/libretranslate/translate_file", files=files, data={"source": "en", "target": "de"}
    )
    assert r.status_code == 413, r.text
    assert "splits into 200 parts" in r.json()["error"]


async def test_a_paragraph_at_the_limit_is_translated(setup: Setup) -> None:
    """What the upload accepts, the worker's request of it is accepted too: the job ends
    done (a paragraph the service refused, text_too_long, failed its job)."""
    files = {"file": ("page.html", html(LIMIT), "text/html")}
    r = await setup.client.post("/documents", files=files, data={"target_lang": "de"})
    assert r.status_code == 201, r.text
    doc = r.json()["id"]
    await finish(setup)
    status = (await setup.client.get(f"/documents/{doc}")).json()
    assert status["status"] == "done", status


async def test_the_limit_is_the_replicas_max_engine_requests(tmp_path) -> None:  # type: ignore[no-untyped-def]
    async for setup in make(tmp_path, limits={"max_engine_requests": 60}):
        for name, data in (("page.html", html(61)), ("notes.txt", b"{a} x " * 61)):
            files = {"file": (name, data)}
            r = await setup.client.post("/documents", files=files, data={"target_lang": "de"})
            assert r.status_code == 413, r.text
            assert "at most 60 are accepted" in r.json()["error"]["message"]
        files = {"file": ("page.html", html(60))}
        r = await setup.client.post("/documents", files=files, data={"target_lang": "de"})
        assert r.status_code == 201, r.text
