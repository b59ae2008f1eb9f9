"""A Markdown file's front matter through ``serve run`` (found 2026-12-06; fails on the code
before): a Jekyll or Hugo post's metadata block was read as a thematic break and a heading
and sent to the model, keys included, so the site could no longer read the translated file.
It comes back byte for byte, from ``format: markdown`` on ``/translate`` and from a ``.md``
document job, while the text after it is translated (the tiny model's words are nonsense:
only what must not change is compared)."""

from __future__ import annotations

import httpx

from tests.e2e.test_documents import _wait_done

TIMEOUT = 300
FRONT = (
    "---\r\nlayout: post\r\ntitle: Release notes\r\ntags: [news, blog]\r\ndraft: false\r\n---\r\n"
)
TOML = "+++\ntitle = 'Release notes'\ndraft = false\n+++\n"
BODY = "\nWhat is *new* in this release.\n"


def test_translate_keeps_the_front_matter(served: str) -> None:
    for front in (FRONT, TOML):
        body = {"text": front + BODY, "source_lang": "en", "target_lang": "de"}
        r = httpx.post(f"{served}/translate", json=body | {"format": "markdown"}, timeout=TIMEOUT)
        assert r.status_code == 200, r.text
        assert r.json()["translation"].startswith(front), r.text
        assert r.json()["markup"]["segments"] == 1, r.text


def test_a_markdown_document_keeps_its_front_matter(served: str) -> None:
    files = {"file": ("post.md", (FRONT + BODY).encode())}
    form = {"source_lang": "en", "target_lang": "de"}
    r = httpx.post(f"{served}/documents", files=files, data=form, timeout=TIMEOUT)
    assert r.status_code == 201, r.text
    doc = r.json()["id"]
    status = _wait_done(served, doc)
    assert status["status"] == "done", status
    assert status["segments_total"] == 1, status  # the text, not the metadata
    result = httpx.get(f"{served}/documents/{doc}/result", timeout=TIMEOUT)
    assert result.status_code == 200
    assert result.content.startswith(FRONT.encode()), result.content[:300]
