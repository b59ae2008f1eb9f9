"""Characters a stored or inline name, term or code may not hold, found in one regex pass.

The refused characters are those of the Unicode categories Cc (C0 and C1 controls: tab,
newline, NUL...), Cs (lone surrogates), Zl and Zp (U+2028, U+2029): Unicode's stability
policy keeps these sets fixed, so one character class matches exactly them. A scan in C
takes milliseconds for the largest glossary (20 M characters); ``unicodedata.category`` per
character took 4 s, on the store's event loop.

``invisible`` (nothing but whitespace and format characters) is also what a translate
request calls blank: a text of 10,000 zero-width joiners has nothing to translate, and was
sent to the engine as 60 pieces (51 s of the CPU engine's time).
"""

from __future__ import annotations

import re

import regex

_BAD = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
_BAD_BUT_NEWLINES = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
# A visible character: not whitespace (``str.isspace``: ``\s`` and U+001C-U+001F) nor a
# format character (Cf: zero-width spaces and joiners, BOMs, direction marks).
_VISIBLE = regex.compile(r"[^\s\x1c-\x1f\p{Cf}]")
# U+2060 WORD JOINER: invisible, and no tokenizer's special token holds it. The prompt's
# escaping breaks control-token strings of a text with it (``engine.tokenizer``); the answer
# loses those the model copies (``translation.hygiene``).
ESCAPE_JOINER = "\u2060"
# What a text that is ``invisible`` is told, wherever it is refused: by the native request
# models (pydantic's "Value error, ..." around it) and by the translation service.
BLANK_TEXT = (
    "text must not be empty or whitespace only (zero-width and other invisible format "
    "characters count as whitespace)"
)


def bad_character(text: str, allow_newlines: bool = False) -> str | None:
    """``U+XXXX`` of the first control character, lone surrogate or line/paragraph separator
    in ``text`` (tab, CR and LF allowed with ``allow_newlines``), or None."""
    found = (_BAD_BUT_NEWLINES if allow_newlines else _BAD).search(text)
    return None if found is None else f"U+{ord(found.group()):04X}"


def invisible(text: str) -> bool:
    """Whether ``text`` holds nothing visible: only whitespace and format characters
    (zero-width spaces and joiners, BOMs, direction marks: category Cf). One scan in C: a
    client's megabyte of them is read in a millisecond, on the event loop if need be."""
    return _VISIBLE.search(text) is None
