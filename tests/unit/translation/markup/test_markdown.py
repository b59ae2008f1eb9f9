from __future__ import annotations

import pytest

from serve_app.translation.markup import Document, parse

MD = """---
title: Guide
---

# Install *it* #

Run `pip install x` and see [the docs](https://ex.com/a_(b) "Docs") or ![logo](l.png).
Escaped \\*stars\\* &amp; entities, {count} items, <kbd>Ctrl</kbd>{HARD}
after a hard break.

> Quoted line one
> quoted line two

- item **one**
  continued
- item two

| Name | Value |
|------|-------|
| a *b* | `c` |

```python
print("not translated")
```

    indented code

<div>html block</div>

Visit <https://auto.example/x> now.
""".replace("{HARD}", "  ")


def identity(doc: Document) -> str:
    return doc.rebuild([s.restore(s.source()) or "" for s in doc.segments])


@pytest.mark.parametrize("text", [MD, "", "plain", "# Only a heading", "a\\\nb"])
def test_round_trip_is_byte_for_byte(text: str) -> None:
    doc = parse("markdown", text)
    assert identity(doc) == text
    fallback = [s.join_runs([r.text for r in s.runs()]) for s in doc.segments]
    assert doc.rebuild(fallback) == text


def test_segments_show_inline_markup_as_placeholders() -> None:
    sources = [s.source() for s in parse("markdown", MD).segments]
    assert "Install <x1>it</x1>" in sources
    assert (
        "Run <x1/> and see <x2>the docs</x2> or <x3/>.\nEscaped *stars* & entities, <x4/> "
        "items, <x5/>Ctrl<x6/><x7/>after a hard break."
    ) in sources
    assert "Quoted line one\nquoted line two" in sources
    assert "Visit <x1/> now." in sources
    assert not any("not translated" in s or "indented code" in s for s in sources)
    assert not any("html block" in s for s in sources)


def test_translation_keeps_urls_escapes_and_quote_prefixes() -> None:
    doc = parse("markdown", "> Line *one*\n> line two\n\nSee [docs](https://x.y/a_b) \\*now\\*\n")
    quote, link = doc.segments
    out = doc.rebuild(
        [
            quote.restore("Zeile <x1>eins</x1>\nZeile zwei") or "",
            link.restore("Siehe <x1>Doku</x1> *jetzt*") or "",
        ]
    )
    assert out == "> Zeile *eins*\n> Zeile zwei\n\nSiehe [Doku](https://x.y/a_b) \\*jetzt\\*\n"
