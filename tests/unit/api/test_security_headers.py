"""Every answer of the API carries the security headers (``api/headers.py``); a translated
HTML document is downloaded under a policy that runs none of its scripts."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from serve_app.api.headers import API_POLICY
from serve_app.api.web.router import load_static
from tests.unit.api.test_documents_api import AUTH, finish, make
from tests.unit.api.test_web_page import make_client

SCRIPTED = b"<html><body><p>Hello <b>world</b>.</p><script>alert(1)</script></body></html>"


def assert_guarded(r: httpx.Response) -> None:
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["x-frame-options"] == "DENY"
    assert r.headers["referrer-policy"] == "no-referrer"
    assert "frame-ancestors 'none'" in r.headers["content-security-policy"]


async def test_a_translated_html_document_downloads_under_a_sandbox(tmp_path: Path) -> None:
    """Before: text/html with the file's <script>, on the page's origin, no policy at all;
    LibreTranslate's download needs no key."""
    async for setup in make(tmp_path):
        files = {"file": ("page.html", SCRIPTED, "text/html")}
        r = await setup.client.post("/documents", files=files, data={"target_lang": "de"})
        assert r.status_code == 201, r.text
        doc = r.json()["id"]
        r = await setup.client.post(
            "/v2/document", files=files, data={"target_lang": "DE"}, headers=AUTH
        )
        deepl = r.json()
        setup.documents.start()
        r = await setup.client.post(
            "/libretranslate/translate_file", files=files, data={"source": "en", "target": "de"}
        )
        libre = r.json()["translatedFileUrl"]
        await finish(setup)
        downloads = [
            await setup.client.get(f"/documents/{doc}/result"),
            await setup.client.post(
                f"/v2/document/{deepl['document_id']}/result",
                json={"document_key": deepl["document_key"]},
                headers=AUTH,
            ),
            await setup.client.get(libre),
        ]
        for r in downloads:
            assert r.status_code == 200, r.text
            assert r.headers["content-type"].startswith("text/html")
            assert b"<script>alert(1)</script>" in r.content
            assert r.headers["content-security-policy"] == API_POLICY
            assert "sandbox" in API_POLICY
            assert "default-src 'none'" in API_POLICY
            assert_guarded(r)


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/languages", 200),
        ("POST", "/translate", 422),
        ("GET", "/nowhere", 404),
        ("GET", "/ui/config", 401),
        ("GET", "/healthz", 200),
    ],
)
async def test_api_answers_and_refusals_carry_the_headers(
    monkeypatch: pytest.MonkeyPatch, method: str, path: str, status: int
) -> None:
    monkeypatch.setenv("HEADER_KEYS", "k1")
    async with await make_client({"security": {"api_keys_env": "HEADER_KEYS"}}) as c:
        auth = {} if path == "/ui/config" else {"Authorization": "Bearer k1"}
        body = b"<img src=x onerror=alert(1)>" if method == "POST" else None
        r = await c.request(method, path, headers=auth, content=body)
        assert r.status_code == status, r.text
        assert r.headers["content-security-policy"] == API_POLICY
        assert_guarded(r)


async def test_the_page_keeps_its_policy_and_the_api_docs_their_scripts() -> None:
    async with await make_client({"prompt": {"family": "chat"}}) as c:
        page = await c.get("/")
        assert "default-src 'self'" in page.headers["content-security-policy"]
        assert_guarded(page)
        docs = await c.get("/docs")
        assert docs.status_code == 200
        assert "content-security-policy" not in docs.headers  # Swagger UI comes from a CDN
        assert docs.headers["x-frame-options"] == "DENY"


def test_the_page_writes_text_never_markup() -> None:
    """Translations and error messages hold whatever the client or the model wrote
    (``<img src=x onerror=alert(1)>``): the page's scripts show them through
    ``textContent`` only, and nothing in them parses a string as HTML or code."""
    sinks = re.compile(
        r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|"
        r"setTimeout\(\s*[\"'`]|\.srcdoc|createContextualFragment|DOMParser"
    )
    for name, file in load_static().items():
        if name.endswith(".js") or name.endswith(".html"):
            text = file.body.decode()
            assert not sinks.findall(text), name
            assert "<script>" not in text, name  # inline scripts: the policy forbids them
