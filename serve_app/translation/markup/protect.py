"""Spans of text that must come back exactly as sent: variables and URLs.

UI strings carry variables that software fills in later: ``{name}`` (Python, ICU, .NET),
``{{name}}`` (Mustache, i18next, Angular; Liquid's and Jinja's output too, and their tags
``{% ... %}``: Jekyll's and Hugo's pages), printf's ``%s`` / ``%1$d`` / ``%(name)s``, and
ICU messages such as ``{count, plural, one {# file} other {# files}}``. A URL in a text is
an address, not words. Each becomes a placeholder the model must keep; an ICU
plural/select message is kept whole (its branches hold words, but rewriting one breaks the
message for the software that formats it). Text that looks like one of our placeholders
(``<x1>``) is protected too, so it cannot be mistaken for one.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

# printf conversions; the space flag is left out ("50% of" is prose, not "% o"). A width
# starts with 1-9 (a leading "0" is the zero flag): with "\d+" the flags and the width both
# took a run of zeros and every split was tried, cubic on "%000...".
_PRINTF = (
    r"%(?:\d+\$)?[-+0#]*(?:[1-9]\d*|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|L|q|j|z|t)?"
    r"[diouxXeEfFgGaAcspn]"
    r"|%\([A-Za-z_]\w*\)[-+0#]*(?:[1-9]\d*)?(?:\.\d+)?[diouxXeEfFgGcrsa]"
    r"|%%"
)
_SIMPLE = re.compile(
    r"\{\{[^{}\n]{1,100}\}\}"  # {{name}}, Liquid and Jinja output: {{ page.title | upcase }}
    # Liquid and Jinja tags, {% include note.html %}; without "%" inside (linear on "{%{%...")
    r"|\{%[^%\n]{1,200}%\}"
    r"|\{\s*[A-Za-z_][\w.]{0,60}\s*(?:,\s*\w+\s*(?:,[^{}\n]{0,60})?)?\}"  # {name}, {n, number}
    r"|\{\d{1,3}\}"  # {0}
    rf"|{_PRINTF}"
    r"|https?://[^\s<>\"'`]+"  # URLs (trailing punctuation trimmed below)
    # our own placeholder syntax, as text ("\s*(?:/\s*)?", not "\s*/?\s*": linear on spaces)
    r"|</?\s*[A-Za-z]\d{1,5}\s*(?:/\s*)?>"
)
_ICU = re.compile(r"\{\s*[A-Za-z_]\w*\s*,\s*(?:plural|select|selectordinal)\s*,")
_URL_TRAIL = ".,;:!?)]}'\""


def spans(text: str) -> list[tuple[int, int]]:
    """The protected spans of ``text``, in order, not overlapping."""
    icu = list(_icu_spans(text))
    found: list[tuple[int, int]] = []
    j = 0
    for m in _SIMPLE.finditer(text):
        start, end = m.span()
        if m.group(0).startswith("http"):
            end = _trim_url(text, start, end)
        while j < len(icu) and icu[j][1] <= start:
            found.append(icu[j])
            j += 1
        if j < len(icu) and icu[j][0] < end:
            continue  # inside an ICU message, which is kept whole
        found.append((start, end))
    found.extend(icu[j:])
    return found


def split(text: str) -> list[tuple[bool, str]]:
    """``text`` as (protected, piece) pairs that join back to it."""
    out: list[tuple[bool, str]] = []
    at = 0
    for start, end in spans(text):
        if start > at:
            out.append((False, text[at:start]))
        out.append((True, text[start:end]))
        at = end
    if at < len(text):
        out.append((False, text[at:]))
    return out


def _icu_spans(text: str) -> Iterator[tuple[int, int]]:
    pos = 0
    while m := _ICU.search(text, pos):
        end = _closing_brace(text, m.start())
        if end is None:
            return
        yield m.start(), end
        pos = end


def _closing_brace(text: str, start: int) -> int | None:
    """The end of the brace group opening at ``start`` (ICU quotes with ``'`` ignored)."""
    depth = 0
    for i in range(start, len(text)):
        c = text[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def _trim_url(text: str, start: int, end: int) -> int:
    """The URL's end without trailing punctuation (brackets counted once: linear in the URL,
    which may be a hundred thousand characters of ")")."""
    opened, closed = text.count("(", start, end), text.count(")", start, end)
    while end > start and text[end - 1] in _URL_TRAIL:
        # A closing bracket that closes one inside the URL belongs to it (Wikipedia links).
        if text[end - 1] == ")":
            if opened >= closed:
                break
            closed -= 1
        end -= 1
    return end
