"""Markup-preserving translation: documents read into segments with placeholders, the
model's answers checked, a structural fallback, and the document put back together.

``parse(format, text, options)`` (formats: ``text``, ``html``, ``xml``, ``markdown``) gives a
``Document``; each of its ``segments`` is translated (``Segment.source(style)`` is what the
model sees, ``Segment.restore`` checks and restores its answer, ``runs``/``join_runs`` are the
fallback); ``Document.rebuild`` gives the translated document. All of it is synchronous and
proportional to the input: the service runs it in a thread.
"""

from serve_app.translation.markup import html, markdown, text
from serve_app.translation.markup.document import (
    FORMATS,
    NO_OPTIONS,
    Budget,
    Document,
    MarkupOptions,
    OverBudget,
    engine_requests,
    parse,
)
from serve_app.translation.markup.segment import DEFAULT_STYLE, Segment, Style, Tag, Text

__all__ = [
    "DEFAULT_STYLE",
    "FORMATS",
    "NO_OPTIONS",
    "Budget",
    "Document",
    "MarkupOptions",
    "OverBudget",
    "Segment",
    "Style",
    "Tag",
    "Text",
    "engine_requests",
    "html",
    "markdown",
    "parse",
    "text",
]
