"""HTTP semantics over the app with the fake engine: methods no route serves at a path
(405 with every method that is served there in ``Allow``), compressed request bodies (415),
GETs that declare a JSON body and send none; in the called API's shape."""

from __future__ import annotations

import gzip
import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from serve_app.api.app import create_app
from serve_app.core.config import AppConfig
from serve_app.core.documents_config import DocumentsConfig
from serve_app.documents.replica import ReplicaDocuments
from serve_app.store.sqlite import open_sqlite
from serve_app.translation.service import TranslationService
from tests.fakes import FakeEngine

AUTH = {"Authorization": "DeepL-Auth-Key test-key"}


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    """Every route: the native, DeepL, LibreTranslate and OpenAI APIs, documents and
    glossaries (a SQLite store)."""
    service = TranslationService(
        AppConfig.model_validate({"prompt": {"family": "chat"}}), FakeEngine()
    )
    await service.start()
    store = await open_sqlite(str(tmp_path / "store.db"))
    documents = ReplicaDocuments(service, store, DocumentsConfig(), "replica-1")
    app = create_app(service, store=store, documents=documents)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=AUTH) as c:
        yield c
    await documents.stop()
    await store.close()


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("PUT", "/v2/glossaries/g1", "DELETE, GET"),
        ("POST", "/v3/glossaries/g1", "DELETE, GET, PATCH"),
        ("GET", "/v3/glossaries/g1/dictionaries", "DELETE, PUT"),
        ("PUT", "/v2/languages", "GET, POST"),
        ("DELETE", "/v2/glossaries", "GET, POST"),
        ("TRACE", "/documents/d1", "DELETE, GET"),
        ("PUT", "/glossaries/g1", "DELETE, GET, PATCH"),
        ("OPTIONS", "/libretranslate/languages", "GET, POST"),
        ("FOO", "/v2/document/d1/result", "GET, POST"),
    ],
)
async def test_a_405_names_every_method_served_at_the_path(
    client: httpx.AsyncClient, method: str, path: str, allowed: str
) -> None:
    """Starlette's ``Allow`` named the methods of the first route at the path only (``GET``
    for each of these)."""
    r = await client.request(method, path)
    assert r.status_code == 405, r.text
    assert r.headers["allow"] == allowed
    shape = {"/v2": {"message"}, "/v3": {"message"}, "/libretranslate": {"error"}}
    assert set(r.json()) == shape.get(path[: path.index("/", 1)], {"error"}), r.text


ITEM = {"text": "Hello", "source_lang": "en", "target_lang": "de"}
SHAPES = {
    "/translate": lambda body: set(body["error"]) == {"code", "message"},
    "/v2/translate": lambda body: set(body) == {"message"},
    "/libretranslate/translate": lambda body: set(body) == {"error"},
    "/v1/chat/completions": lambda body: body["error"]["type"] == "invalid_request_error",
}


@pytest.mark.parametrize("path", list(SHAPES))
@pytest.mark.parametrize("coding", ["gzip", "br", "deflate", "identity, gzip"])
async def test_a_compressed_body_is_a_415(
    client: httpx.AsyncClient, path: str, coding: str
) -> None:
    """Nothing decompresses a request body: compressed JSON was refused as "not valid UTF-8"
    (422/400); a gzip bomb is refused unread."""
    body = gzip.compress(b"{" + b" " * (10 << 20) + b"}")
    headers = {"Content-Type": "application/json", "Content-Encoding": coding}
    r = await client.post(path, content=body, headers=headers)
    assert r.status_code == 415, r.text
    assert r.headers["accept-encoding"] == "identity"
    assert "send the body uncompressed" in r.text
    assert SHAPES[path](r.json()), r.text


async def test_a_compressed_upload_is_a_415(client: httpx.AsyncClient) -> None:
    form = {"target_lang": "de"}
    files = {"file": ("a.txt", b"Hello.")}
    request = client.build_request("POST", "/documents", data=form, files=files)
    headers = {**request.headers, "Content-Encoding": "gzip"}
    r = await client.post("/documents", content=gzip.compress(request.read()), headers=headers)
    assert r.status_code == 415, r.text
    assert r.json()["error"]["code"] == "unsupported_content_encoding"


async def test_a_content_encoding_that_compresses_nothing_is_served(
    client: httpx.AsyncClient,
) -> None:
    for coding in ("identity", "utf-8"):  # a charset where a coding belongs: clients do
        headers = {"Content-Type": "application/json", "Content-Encoding": coding}
        r = await client.post("/translate", content=json.dumps(ITEM), headers=headers)
        assert r.status_code == 200, (coding, r.text)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v2/languages"),
        ("GET", "/v2/glossaries"),
        ("GET", "/v2/usage"),
        ("POST", "/v2/usage"),
        ("GET", "/v2/glossary-language-pairs"),
    ],
)
async def test_an_empty_body_declared_as_json_holds_no_parameters(
    client: httpx.AsyncClient, method: str, path: str
) -> None:
    """Clients that send ``Content-Type: application/json`` on every request: DeepL's GETs
    were a 400 "body is not valid JSON" for the body they did not send."""
    for body in (b"", b" \r\n"):
        headers = {"Content-Type": "application/json"}
        r = await client.request(method, path, content=body, headers=headers)
        assert r.status_code == 200, (body, r.text)


@pytest.mark.parametrize(
    ("method", "path", "location"),
    [
        ("POST", "/translate/", "/translate"),
        ("POST", "/translate/?x=1&y=%20", "/translate?x=1&y=%20"),
        ("GET", "/languages//", "/languages"),
        ("POST", "/v2/translate/", "/v2/translate"),
        ("POST", "/libretranslate/translate/", "/libretranslate/translate"),
        ("GET", "/healthz/", "/healthz"),
    ],
)
async def test_a_trailing_slash_redirect_stays_on_the_server_called(
    client: httpx.AsyncClient, method: str, path: str, location: str
) -> None:
    """Starlette built the 307's ``Location`` from the ``Host`` header: ``Host:
    evil.example`` was sent to ``http://evil.example/translate``. It is relative now."""
    r = await client.request(method, path, headers={"Host": "evil.example"})
    assert r.status_code == 307, r.text
    assert r.headers["location"] == location
    assert r.headers["x-content-type-options"] == "nosniff"  # the app's answer


async def test_a_redirect_is_followed_to_the_route_and_never_names_a_host(
    client: httpx.AsyncClient,
) -> None:
    body = {"text": "Hi", "source_lang": "en", "target_lang": "de"}
    r = await client.post("/translate/", json=body, follow_redirects=True)
    assert r.status_code == 200, r.text
    assert [h.status_code for h in r.history] == [307]
    r = await client.get("/no-such-path/", headers={"Host": "evil.example"})
    assert r.status_code == 404
    assert "location" not in r.headers
    transport = client._transport  # a path starting "//" never becomes a Location
    for raw in ("//translate/", "//evil.example/translate/"):
        request = httpx.Request("POST", "http://t/x", headers={"Host": "evil.example"})
        request.url = request.url.copy_with(raw_path=raw.encode())
        answer = await transport.handle_async_request(request)
        assert answer.status_code == 404, raw
        assert "location" not in answer.headers
