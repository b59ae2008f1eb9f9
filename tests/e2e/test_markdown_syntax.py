"""Markdown syntax CommonMark does not know, through ``serve run`` (found 2026-12-06; each
test fails on the code before). A Jekyll or Hugo post's front matter was read as a
thematic break and a heading and sent to the model, keys included, so the site could no
longer read the translated file: it comes back byte for byte, from ``format: markdown`` on
``/translate`` and from a ``.md`` document job. GitHub's alert markers (``> [!NOTE]``) and
Obsidian's callouts were words of the quote: they come back as they are. So do containers'
fence lines (``::: warning Title``: the title translated), MkDocs admonitions' marker lines,
math, footnote labels, task-list boxes and Liquid/Jinja tags, each sent to the model as
words before. The text around
them is translated (the tiny model's words are nonsense: only what must not change is
compared)."""

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


def test_alert_markers_are_kept(served: str) -> None:
    for marker in ("[!NOTE]", "[!warning]- Careful"):
        text = f"> {marker}\n> Back up your files first.\n"
        body = {"text": text, "source_lang": "en", "target_lang": "de", "format": "markdown"}
        r = httpx.post(f"{served}/translate", json=body, timeout=TIMEOUT)
        assert r.status_code == 200, r.text
        head = "> [!warning]- " if marker.startswith("[!warning]") else "> [!NOTE]\n> "
        assert r.json()["translation"].startswith(head), r.text


PAGE = """::: warning Read this first
The body of the container.
:::

- [ ] Buy milk
- [x] Walk the dog

Energy is $E = mc^2$ in the text.

$$
\\int_0^1 x\\,dx
$$

A claim[^1] with a note.

[^1]: The text of the note.

Hello {{ page.title }} and {% include note.html %} there.

!!! note "Read this"
    The body of an admonition.

??? tip
    Folded, and $$x^2$$ inline.
"""
KEPT = [
    "\n:::\n",
    "\n- [ ] ",
    "\n- [x] ",
    "$E = mc^2$",
    "\n$$\n\\int_0^1 x\\,dx\n$$\n",
    "[^1]",
    "\n[^1]: ",
    "{{ page.title }}",
    "{% include note.html %}",
    '\n!!! note "',
    "\n    ",
    "\n??? tip\n    ",
    "$$x^2$$",
]


def test_extensions_are_kept(served: str) -> None:
    body = {"text": PAGE, "source_lang": "en", "target_lang": "de", "format": "markdown"}
    r = httpx.post(f"{served}/translate", json=body, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    translation = r.json()["translation"]
    assert translation.startswith("::: warning "), translation
    for kept in KEPT:
        assert kept in translation, (kept, translation)
    # the title, the body, two items, three paragraphs, the note's text, the admonition's
    # title and its body, the folded one's body: nothing else
    assert r.json()["markup"]["segments"] == 11, r.text
