"""Plain text (``format`` ``text``): one segment, its variables and URLs protected."""

from __future__ import annotations

from serve_app.translation.markup.document import Builder, Document, MarkupOptions, register


@register("text")
def parse_text(text: str, options: MarkupOptions) -> Document:
    builder = Builder()
    builder.text(text)
    return builder.document()
