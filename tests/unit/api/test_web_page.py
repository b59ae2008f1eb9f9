"""The web page's server side: its files, their headers, /ui/config, and keys."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Literal

import httpx
import pytest

from serve_app.api.app import create_app
from serve_app.api.web.router import _literal_values, load_static
from serve_app.core.config import AppConfig
from serve_app.store.sqlite import open_sqlite
from serve_app.translation.service import TranslationService
from tests.fakes import FakeEngine


async def make_client(args: dict) -> httpx.AsyncClient:
    service = TranslationService(AppConfig.model_validate(args), FakeEngine())
    await service.start()
    transport = httpx.ASGITransport(app=create_app(service), raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url="http://t")


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with await make_client({"prompt": {"family": "chat"}, "model_name": "m1"}) as c:
        yield c


async def test_the_page_is_served_at_the_root(client: httpx.AsyncClient) -> None:
    r = await client.get("/")
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/html; charset=utf-8"
    assert "<title>Translate</title>" in r.text
    assert "default-src 'self'" in r.headers["content-security-policy"]
    for asset in re.findall(r'(?:src|href)="([^"]+)"', r.text):
        if asset.startswith("/ui/static/"):
            assert (await client.get(asset)).status_code == 200, asset


@pytest.mark.parametrize(
    ("path", "media_type"),
    [("/ui/static/app.js", "text/javascript"), ("/ui/static/app.css", "text/css")],
)
async def test_assets_have_their_types_and_revalidate(
    client: httpx.AsyncClient, path: str, media_type: str
) -> None:
    r = await client.get(path)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith(media_type)
    assert r.headers["x-content-type-options"] == "nosniff"
    again = await client.get(path, headers={"If-None-Match": r.headers["etag"]})
    assert again.status_code == 304
    assert again.content == b""


@pytest.mark.parametrize(
    ("sent", "status"),
    [
        ("*", 304),  # any current file: it was a 200 with the whole file
        ('"other", {etag}', 304),
        ("W/{etag}", 304),  # compared weakly, as RFC 9110 says for If-None-Match
        ('"other"', 200),
        ("{etag_prefix}", 200),  # a part of the tag is not the tag
    ],
)
async def test_if_none_match_follows_rfc_9110(
    client: httpx.AsyncClient, sent: str, status: int
) -> None:
    etag = (await client.get("/ui/static/app.js")).headers["etag"]
    header = sent.format(etag=etag, etag_prefix=etag[:-3] + '"')
    r = await client.get("/ui/static/app.js", headers={"If-None-Match": header})
    assert r.status_code == status


@pytest.mark.parametrize("name", ["nope.js", "index.html", "..%2Fsecurity.py", "app.js%00"])
async def test_unknown_files_are_404_in_the_error_shape(
    client: httpx.AsyncClient, name: str
) -> None:
    r = await client.get("/ui/static/" + name)
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "not_found"


def test_the_page_loads_nothing_from_outside_and_stays_small() -> None:
    files = load_static()
    assert {"index.html", "app.js", "app.css"} <= set(files)
    assert sum(len(f.body) for f in files.values()) < 200_000
    for name, file in files.items():
        text = file.body.decode()
        assert not re.search(r"(?:src|href|url)\s*[=(]\s*[\"']?(?:https?:)?//", text), name
        assert 'fetch("http' not in text, name


@pytest.mark.parametrize(
    ("family", "options"),
    [("chat", ["context", "formality", "glossary"]), ("hy_mt", ["context", "glossary"]),
     ("seed_x", [])],
)  # fmt: skip
async def test_ui_config_tells_what_the_family_supports(family: str, options: list[str]) -> None:
    args = {"prompt": {"family": family}, "limits": {"max_text_chars": 5000}}
    async with await make_client(args) as c:
        config = (await c.get("/ui/config")).json()
    assert config["options"] == options
    assert config["family"] == family
    assert config["max_text_chars"] == 5000
    assert config["max_body_bytes"] == 1 << 20
    assert config["model"] == "tencent/HY-MT1.5-1.8B"


async def test_ui_config_names_the_model_and_the_formats(client: httpx.AsyncClient) -> None:
    config = (await client.get("/ui/config")).json()
    assert config["model"] == "m1"
    assert config["formats"] == ["text", "html", "xml", "markdown"]


async def test_ui_config_sees_a_usage_route() -> None:
    service = TranslationService(AppConfig(), FakeEngine())
    await service.start()
    app = create_app(service)

    @app.get("/usage")
    async def usage() -> dict[str, int]:
        return {"remaining": 1}

    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        assert (await c.get("/ui/config")).json()["usage"] is True


def test_formats_are_read_from_the_request_schema() -> None:
    assert _literal_values(Literal["text", "html"]) == ["text", "html"]
    assert _literal_values(Literal["text", "markdown"] | None) == ["text", "markdown"]
    assert _literal_values(str) == []


async def test_with_keys_the_page_is_open_and_its_api_calls_need_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WEB_KEYS", "k1")
    async with await make_client({"security": {"api_keys_env": "WEB_KEYS"}}) as c:
        assert (await c.get("/")).status_code == 200
        assert (await c.get("/ui/static/app.js")).status_code == 200
        assert (await c.get("/ui/config")).status_code == 401
        assert (await c.get("/languages")).status_code == 401
        assert (await c.get("/ui/notstatic")).status_code == 401
        ok = await c.get("/ui/config", headers={"Authorization": "Bearer k1"})
        assert ok.status_code == 200


@pytest.mark.parametrize(("family", "glossaries"), [("chat", True), ("seed_x", False)])
async def test_ui_config_sees_stored_glossaries_and_documents(
    tmp_path: Path, family: str, glossaries: bool
) -> None:
    service = TranslationService(
        AppConfig.model_validate({"prompt": {"family": family}}), FakeEngine()
    )
    await service.start()
    store = await open_sqlite(str(tmp_path / "s.db"))
    try:
        transport = httpx.ASGITransport(app=create_app(service, store=store))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            config = (await c.get("/ui/config")).json()
    finally:
        await store.close()
    assert config["glossaries"] is glossaries
    assert config["documents"] is False  # no document worker on this app
    assert config["document_extensions"] == []


async def test_ui_config_without_a_store_offers_neither(client: httpx.AsyncClient) -> None:
    config = (await client.get("/ui/config")).json()
    assert (config["glossaries"], config["documents"]) == (False, False)
