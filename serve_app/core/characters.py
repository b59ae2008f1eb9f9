"""Characters a stored or inline name, term or code may not hold, found in one regex pass.

The refused characters are those of the Unicode categories Cc (C0 and C1 controls: tab,
newline, NUL...), Cs (lone surrogates), Zl and Zp (U+2028, U+2029): Unicode's stability
policy keeps these sets fixed, so one character class matches exactly them. A scan in C
takes milliseconds for the largest glossary (20 M characters); ``unicodedata.category`` per
character took 4 s, on the store's event loop.
"""

from __future__ import annotations

import re
import unicodedata

_BAD = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
_BAD_BUT_NEWLINES = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def bad_character(text: str, allow_newlines: bool = False) -> str | None:
    """``U+XXXX`` of the first control character, lone surrogate or line/paragraph separator
    in ``text`` (tab, CR and LF allowed with ``allow_newlines``), or None."""
    found = (_BAD_BUT_NEWLINES if allow_newlines else _BAD).search(text)
    return None if found is None else f"U+{ord(found.group()):04X}"


def invisible(text: str) -> bool:
    """Whether ``text`` holds nothing visible: only whitespace and format characters
    (zero-width spaces, BOMs, direction marks: category Cf)."""
    return all(ch.isspace() or unicodedata.category(ch) == "Cf" for ch in text)
